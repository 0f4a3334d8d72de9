#!/usr/bin/python3
"""
The origins of test_transparent.py's "fake internet" network namespace, run
there with `ip netns exec NS /usr/bin/python3 transparent_origins.py SPEC
STATUS`. SPEC is a JSON list of servers: {"id", "kind": http|https|record|
banner|udp, "host", "port", "cert", "key", "banner"}. Every 50 ms the
connection counts and request lines of each are written to STATUS (atomic
rename), so the test can prove which origin a connection reached - or that
none did. Runs until killed.
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


class TcpRaw:
    """record: keep what arrives; banner: send the banner, then echo."""

    def __init__(self, host, port, mode, banner=b""):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.mode = mode
        self.banner = banner
        self.lock = threading.Lock()
        self.count = 0
        self.received = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.count += 1
                idx = len(self.received)
                self.received.append(b"")
            threading.Thread(target=self._serve, args=(c, idx),
                daemon=True).start()

    def _serve(self, c, idx):
        c.settimeout(60)
        try:
            if self.mode == "banner":
                c.sendall(self.banner)
            while True:
                b = c.recv(65536)
                if not b:
                    break
                with self.lock:
                    self.received[idx] += b
                if self.mode == "banner":
                    c.sendall(b)
        except OSError:
            pass
        finally:
            c.close()

    def status(self):
        with self.lock:
            return {"conn_count": self.count,
                "received": [r.decode("latin-1") for r in self.received]}


class UdpRecord:
    def __init__(self, host, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.lock = threading.Lock()
        self.count = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                self.sock.recvfrom(65536)
            except OSError:
                return
            with self.lock:
                self.count += 1

    def status(self):
        with self.lock:
            return {"conn_count": self.count}


def origin_status(o):
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
            servers[s["id"]] = (lambda o=o: origin_status(o))
        elif kind in ("record", "banner"):
            r = TcpRaw(s["host"], s["port"], kind,
                s.get("banner", "").encode("latin-1"))
            servers[s["id"]] = r.status
        elif kind == "udp":
            u = UdpRecord(s["host"], s["port"])
            servers[s["id"]] = u.status
        else:
            raise SystemExit("unknown server kind %r" % kind)
    tmp = status_path + ".tmp"
    while True:
        doc = {"ready": True, "pid": os.getpid(),
            "servers": {k: f() for k, f in servers.items()}}
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.rename(tmp, status_path)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
