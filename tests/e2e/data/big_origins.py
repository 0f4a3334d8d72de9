#!/usr/bin/python3
"""
The origins of the bulk-relay tests (test_big_relay.py, test_big_transparent.py),
run as a process of their own (`python3 big_origins.py SPEC STATUS`, inside a
network namespace with `ip netns exec` where a test needs that), so that the
test's clients and these servers do not share one interpreter's lock. SPEC is a
JSON object {"file": PATH, "servers": [{"id", "kind": http|raw, "host", "port"
(0: any), "cert", "key"}]}; once every server listens, STATUS gets
{id: port} (atomic rename). Runs until killed.

http (TLS when cert and key are given; no ALPN, so HTTP/1.1 only):
  GET /file            the data file, with Content-Length
  GET /file?chunked    the data file, chunked, in chunks of varying sizes
  POST|PUT anything    reads the body (Content-Length or chunked) and answers
                       JSON {"body_len", "body_sha256", "wire_len" (with the
                       chunked framing), "te", "cl"}
  GET /ws (Upgrade: websocket)  101, then: the client's binary frames are
                       hashed until a text frame "end", answered with a text
                       frame of JSON {"len", "sha256"}; a text frame "down" is
                       answered with the data file in binary frames of 1 MiB
                       and a text frame "end"; a close frame is echoed.
raw (neither TLS nor HTTP; for opaque tunnels):
  "UP n\\n" then n bytes -> "<sha256 hex> <n>\\n", then close
  "DOWN\\n"              -> the data file, then close
"""

import hashlib
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import sys
import threading

sys.dont_write_bytecode = True  # keep the source tree clean
# tests/e2e, for wsframe when this runs as a script of its own
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import wsframe as W  # noqa: E402

BLOCK = 1 << 20
# chunk sizes of the chunked download, cycled: tiny, odd, and large
CHUNKS = (1, 65536, 4093, BLOCK, 17, 300000, 8192)


def ws_read(read_exact):
    """(opcode, payload) of the next frame, unmasked; fragments not used here."""
    f = W.read_frame(read_exact)
    if not f.fin:
        raise ValueError("fragmented frame")
    return f.opcode, f.payload


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120

    def log_message(self, *a):
        pass

    def setup(self):
        ctx = self.server.ssl_ctx
        if ctx is not None:
            self.request.settimeout(30)
            self.request = ctx.wrap_socket(self.request, server_side=True)
            self.request.settimeout(self.timeout)
        super().setup()

    def _read_body(self):
        """(body length, its SHA-256, bytes of the message body as framed)."""
        h = hashlib.sha256()
        n = wire = 0
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(1024)
                wire += len(line)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        line = self.rfile.readline(8192)
                        wire += len(line)
                        if line in (b"\r\n", b"\n", b""):
                            break
                    break
                n += self._read_n(size, h)
                wire += size + len(self.rfile.readline(16))
        elif self.headers.get("Content-Length"):
            n = wire = self._read_n(int(self.headers["Content-Length"]), h)
        return n, h.hexdigest(), wire

    def _read_n(self, left, h):
        got = 0
        while left:
            b = self.rfile.read(min(left, BLOCK))
            if not b:
                raise ConnectionError("short body")
            h.update(b)
            got += len(b)
            left -= len(b)
        return got

    def _json(self, doc, status=200):
        body = (json.dumps(doc) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _upload(self):
        n, sha, wire = self._read_body()
        self._json({"body_len": n, "body_sha256": sha, "wire_len": wire,
                    "te": self.headers.get("Transfer-Encoding"),
                    "cl": self.headers.get("Content-Length")})

    do_POST = _upload
    do_PUT = _upload

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/ws" and "websocket" in self.headers.get("Upgrade", "").lower():
            return self._websocket()
        if path != "/file":
            return self._json({"error": "no such path"}, 404)
        size = os.path.getsize(self.server.file)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if query == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        with open(self.server.file, "rb") as f:
            if query != "chunked":
                while True:
                    b = f.read(BLOCK)
                    if not b:
                        break
                    self.wfile.write(b)
                return
            i = 0
            while True:
                b = f.read(CHUNKS[i % len(CHUNKS)])
                i += 1
                if not b:
                    break
                self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

    def _websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", W.accept_key(key))
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True

        def read_exact(n):
            b = self.rfile.read(n)
            if len(b) != n:
                raise EOFError("short frame")
            return b

        h, n = hashlib.sha256(), 0
        while True:
            op, p = ws_read(read_exact)
            if op == 2:
                h.update(p)
                n += len(p)
            elif op == 1 and p == b"end":
                doc = {"len": n, "sha256": h.hexdigest()}
                self.wfile.write(W.encode_frame(1, json.dumps(doc).encode()))
                h, n = hashlib.sha256(), 0
            elif op == 1 and p == b"down":
                with open(self.server.file, "rb") as f:
                    while True:
                        b = f.read(BLOCK)
                        if not b:
                            break
                        self.wfile.write(W.encode_frame(2, b))
                self.wfile.write(W.encode_frame(1, b"end"))
            elif op == 8:
                self.wfile.write(W.encode_frame(8, p[:2]))
                return
            elif op == 9:
                self.wfile.write(W.encode_frame(10, p))


class HttpServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def server_bind(self):
        # HTTPServer.server_bind would do a reverse lookup (getfqdn).
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]


class RawServer:
    """The opaque-tunnel peer: UP n / DOWN, as the module says."""

    def __init__(self, host, port, path):
        self.path = path
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(120)
        try:
            f = c.makefile("rb")
            line = f.readline(64)
            m = re.match(rb"^UP (\d+)\n$", line)
            if m:
                left = int(m.group(1))
                h = hashlib.sha256()
                got = 0
                while left:
                    b = f.read1(min(left, BLOCK))
                    if not b:
                        break
                    h.update(b)
                    got += len(b)
                    left -= len(b)
                c.sendall(b"%s %d\n" % (h.hexdigest().encode(), got))
            elif line == b"DOWN\n":
                with open(self.path, "rb") as src:
                    while True:
                        b = src.read(BLOCK)
                        if not b:
                            break
                        c.sendall(b)
            c.shutdown(socket.SHUT_WR)
            # wait for the peer's end, so that nothing is reset under it
            while c.recv(65536):
                pass
        except OSError:
            pass
        finally:
            c.close()


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    ports = {}
    for s in spec["servers"]:
        if s["kind"] == "raw":
            ports[s["id"]] = RawServer(s["host"], s.get("port", 0),
                                       spec["file"]).port
            continue
        srv = HttpServer((s["host"], s.get("port", 0)), Handler)
        srv.file = spec["file"]
        srv.ssl_ctx = None
        if s.get("cert"):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(s["cert"], s["key"])
            srv.ssl_ctx = ctx
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True).start()
        ports[s["id"]] = srv.server_address[1]
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ports, f)
    os.rename(tmp, sys.argv[2])
    threading.Event().wait()


if __name__ == "__main__":
    main()
