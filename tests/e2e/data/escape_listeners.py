#!/usr/bin/python3
"""
Listeners that count what reaches them, for test_sandbox_escape.py: run in
the "fake internet" namespace with `ip netns exec NS /usr/bin/python3
escape_listeners.py SPEC STATUS`, or imported by the test for the host's own
listeners. SPEC is a JSON list of {"id", "kind": http|https|tcp|udp,
"host", "port", "cert", "key"}; IPv6 hosts work for tcp and udp. Every 50 ms
the counts (accepted connections with the local address each was accepted
on, datagrams) go to STATUS (atomic rename). Runs until killed.
"""

import json
import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sgtest as T  # noqa: E402


def _family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class TcpCount:
    """Accepts and closes; counts each connection and the address it hit."""

    def __init__(self, host, port):
        self.sock = socket.socket(_family(host), socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if _family(host) == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.hits = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, peer = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.hits.append([c.getsockname()[0], peer[0]])
            c.close()

    def status(self):
        with self.lock:
            return {"conn_count": len(self.hits), "hits": list(self.hits)}

    def close(self):
        self.sock.close()


class UdpCount:
    """Counts datagrams and where they came from."""

    def __init__(self, host, port):
        self.sock = socket.socket(_family(host), socket.SOCK_DGRAM)
        if _family(host) == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind((host, port))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.hits = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                _, peer = self.sock.recvfrom(65536)
            except OSError:
                return
            with self.lock:
                self.hits.append(peer[0])

    def status(self):
        with self.lock:
            return {"conn_count": len(self.hits), "hits": list(self.hits)}

    def close(self):
        self.sock.close()


def _origin_status(o):
    return {"conn_count": o.conn_count, "request_lines": o.request_lines,
        "hosts": [r["host"] for r in o.requests]}


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    status_path = sys.argv[2]
    servers = {}
    for s in spec:
        kind = s["kind"]
        if kind in ("http", "https"):
            o = T.Origin(s["id"], host=s["host"], port=s["port"],
                cert=s.get("cert"), key=s.get("key"))
            servers[s["id"]] = (lambda o=o: _origin_status(o))
        elif kind == "tcp":
            servers[s["id"]] = TcpCount(s["host"], s["port"]).status
        elif kind == "udp":
            servers[s["id"]] = UdpCount(s["host"], s["port"]).status
        else:
            raise SystemExit("unknown server kind %r" % kind)
    tmp = status_path + ".tmp"
    while True:
        doc = {"ready": True, "servers": {k: f() for k, f in servers.items()}}
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.rename(tmp, status_path)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
