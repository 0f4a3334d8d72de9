#!/usr/bin/python3
"""
Intercepted HTTP/2 against intercepted HTTP/1.1 keep-alive (issue 15, point
6), with Debian's h2load: the same number of connections, a 200-byte body
from nginx (which speaks both), through sandgate's CONNECT with interception.
h2load cannot use a proxy, so a local shim opens the CONNECT tunnel for each
of its connections and then moves bytes with splice(2) (no copy through
Python). Prints one markdown table; owns every process it starts.

  bench/h2load.py [--seconds 10] [--clients 10] [--streams 10]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
import sgtest as T  # noqa: E402
from test_credentials import TestCA  # noqa: E402
from test_http2 import NginxH2, ORIGIN_HOST  # noqa: E402
from run import cpu_ticks, cpu_seconds  # noqa: E402

H2LOAD = "/usr/bin/h2load"


def pump(src, dst):
    """Bytes src -> dst through a pipe, in the kernel."""
    r, w = os.pipe()
    try:
        while True:
            n = os.splice(src.fileno(), w, 1 << 20)
            if n == 0:
                break
            while n:
                n -= os.splice(r, dst.fileno(), n)
    except OSError:
        pass
    finally:
        os.close(r)
        os.close(w)
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ConnectShim:
    def __init__(self, gw_port, target):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(128)
        self.port = self.ls.getsockname()[1]
        self.gw_port, self.target = gw_port, target
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.gw_port))
            u.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" %
                       (self.target, self.target)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += u.recv(1)
            for a, b in ((c, u), (u, c)):
                a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                threading.Thread(target=pump, args=(a, b), daemon=True).start()


def h2load(args, url, shim, h1, streams):
    argv = [H2LOAD, "-c", str(args.clients), "-m", str(streams),
            "-D", str(args.seconds), "--connect-to", "127.0.0.1:%d" % shim]
    if h1:
        argv.append("--h1")
    out = subprocess.run(argv + [url], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=args.seconds + 60,
                         text=True).stdout
    m = re.search(r"finished in .*?, ([\d.]+) req/s", out)
    ok = re.search(r"requests: .* (\d+) succeeded, (\d+) failed", out)
    proto = re.search(r"Application protocol: (\S+)", out)
    if not m or not ok:
        raise RuntimeError(out)
    if os.environ.get("H2LOAD_VERBOSE"):
        print(out, file=sys.stderr)
    return float(m.group(1)), int(ok.group(1)), int(ok.group(2)), \
        proto.group(1) if proto else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--streams", type=int, default=10)
    args = ap.parse_args()
    if not os.access(H2LOAD, os.X_OK):
        print("h2load is not installed (nghttp2-client)")
        return 77
    td = T.TempDir("sgbench-h2-")
    try:
        pki = TestCA(td.path)
        cert, key = pki.leaf("nginx.test", ["nginx.test"])
        nginx = NginxH2(td.path, cert, key, keepalive_requests=int(
            os.environ.get("H2LOAD_NGINX_KEEPALIVE", "1000000")))
        with open(os.path.join(nginx.dir, "www", "small"), "wb") as f:
            f.write(b"x" * 200)
        h11 = NginxH2(td.path, cert, key, keepalive_requests=1000000,
                      http2=False, name="nginx-h11")
        with open(os.path.join(h11.dir, "www", "small"), "wb") as f:
            f.write(b"x" * 200)
        dns = T.Dnsmasq(td.path, [("nginx.test", ORIGIN_HOST)])
        policy = ("sandboxes:\n  - id: bench\n    policy: p\n"
                  "    source: [127.0.0.1/32]\npolicies:\n  - name: p\n"
                  "    allow:\n      - host: nginx.test\n"
                  "        ports: [%d, %d]\n"
                  "        tls: intercept\n    allow_private: [%s/32]\n"
                  % (nginx.port, h11.port, ORIGIN_HOST))
        gw = T.Gateway(td.path, dns, {"b.yaml": policy}, workers=1,
                       extra={"upstream": {"ca_bundle": pki.cert}})
        gw.start()
        rows = []
        for name, port, h1, m in (
                ("intercepted HTTP/1.1 keep-alive, h2 origin", nginx.port,
                 True, 1),
                ("intercepted HTTP/2, %d streams, h2 origin" % args.streams,
                 nginx.port, False, args.streams),
                ("intercepted HTTP/1.1 keep-alive, HTTP/1.1-only origin",
                 h11.port, True, 1),
                ("intercepted HTTP/2, %d streams, HTTP/1.1-only origin" %
                 args.streams, h11.port, False, args.streams)):
            target = "nginx.test:%d" % port
            shim = ConnectShim(gw.port, target)
            t0 = cpu_ticks(gw.proc.pid)
            rps, ok, bad, proto = h2load(args, "https://%s/small" % target,
                                         shim.port, h1, m)
            # The gateway's own CPU per request: steadier than req/s on
            # a shared machine (the client and the origins share it).
            cpu = cpu_seconds(t0, cpu_ticks(gw.proc.pid)) * 1e6 / max(ok, 1)
            rows.append((name, proto, rps, ok, bad, cpu))
        print("| run | client ALPN | req/s | succeeded | failed | "
              "gateway CPU per request |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print("| %s | %s | %.0f | %d | %d | %.0f µs |" % r)
        print("\nHTTP/2 / HTTP/1.1 at %d connections: %.2f (h2 origin), "
              "%.2f (HTTP/1.1-only origin)" % (args.clients,
                                               rows[1][2] / rows[0][2],
                                               rows[3][2] / rows[2][2]))
        if os.environ.get("H2LOAD_VERBOSE"):
            for line in gw.log_text().splitlines():
                if " error " in line or "warn" in line or "origin" in line:
                    print(line, file=sys.stderr)
        gw.stop()
        nginx.stop()
        h11.stop()
        dns.stop()
    finally:
        td.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
