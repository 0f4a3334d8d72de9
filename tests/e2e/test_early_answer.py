#!/usr/bin/python3
"""
An origin that answers before it has read the request body (nginx's
`return 200`, an early refusal) and then reads the rest, as HTTP/1.1
allows (docs/proxy.md, "An answer before the body"): the gateway relays
the answer at once and the rest of the body after it, so a client that
sends its whole body before it reads gets the answer, and the connection
stays usable for the next request. Variants: the origin closes after its
early answer instead (the answer still stands, the row is allow), or
sends a second answer (never relayed); a chunked body; a body large enough
to fill every buffer on the way.
"""

import os
import socket
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"


def wait_for(pred, seconds):
    end = time.monotonic() + seconds * T.SLOW
    while not pred() and time.monotonic() < end:
        time.sleep(0.05)


class EarlyOrigin:
    """Answers each request as soon as its head is in, then reads its body
    (Content-Length or chunked) and records how many body bytes came; path
    /close/... closes after the answer instead of reading, /extra/... sends
    a second answer after the first."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((ORIGIN_HOST, 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.got = {}           # path -> body bytes read
        self.conn_of = {}       # path -> the connection's number
        self.lock = threading.Lock()
        self.running = True
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while self.running:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.serve, args=(c, len(self.conns)),
                             daemon=True).start()

    def serve(self, c, idx):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline(65536)
                if not line:
                    return
                path = line.split()[1].decode()
                with self.lock:
                    self.conn_of[path] = idx
                clen, chunked = 0, False
                while True:
                    h = f.readline(65536)
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    if k.lower() == "content-length":
                        clen = int(v)
                    if k.lower() == "transfer-encoding" and "chunked" in v:
                        chunked = True
                close = path.startswith("/close/")
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n%s\r\nearly\n"
                          % (b"Connection: close\r\n" if close else b""))
                if close:
                    return
                if path.startswith("/extra/"):
                    # a second answer nobody asked for: with the first
                    # (/extra/1) or a little after it
                    if path == "/extra/2":
                        time.sleep(0.2)
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                              b"\r\nextra")
                n = 0
                if chunked:
                    while True:
                        size = int(f.readline(1024).split(b";")[0], 16)
                        if size == 0:
                            while f.readline(8192) not in (b"\r\n", b""):
                                pass
                            break
                        n += len(f.read(size))
                        f.readline(16)
                else:
                    while n < clen:
                        b = f.read(min(65536, clen - n))
                        if not b:
                            return
                        n += len(b)
                with self.lock:
                    self.got[path] = n
        except (OSError, ValueError, IndexError):
            return
        finally:
            c.close()

    def stop(self):
        self.running = False
        self.lsock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


class EarlyAnswerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-early-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = EarlyOrigin()
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("early.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        policy = {"sandboxes": [T.local_sandbox("p")],
                  "policies": [{"name": "p",
                                "allow": [{"host": "early.test",
                                           "ports": [cls.origin.port]}],
                                "allow_private": [ORIGIN_HOST + "/32"]}]}
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    def proxy_conn(self):
        s = socket.create_connection(("127.0.0.1", self.gw.port))
        s.settimeout(30 * T.SLOW)
        self.addCleanup(s.close)
        return s

    def read_answer(self, s, buf=b""):
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            if not b:
                return None, buf
            buf += b
        head, _, rest = buf.partition(b"\r\n\r\n")
        clen = 0
        for h in head.split(b"\r\n")[1:]:
            k, _, v = h.partition(b":")
            if k.strip().lower() == b"content-length":
                clen = int(v)
        while len(rest) < clen:
            b = s.recv(65536)
            if not b:
                break
            rest += b
        return head.split(b"\r\n")[0], rest[clen:]

    def url(self, path):
        return "http://early.test:%d%s" % (self.origin.port, path)

    def test_whole_body_then_answer_then_next(self):
        """8 MiB sent before reading: answered, relayed whole; the client
        connection carries the next request, the origin connection does
        not (an origin that answered unread may take the rest of the body
        for a request of its own: test_pool_probe)."""
        s = self.proxy_conn()
        body = os.urandom(8 << 20)
        s.sendall(("POST %s HTTP/1.1\r\nHost: early.test:%d\r\n"
                   "Content-Length: %d\r\n\r\n" % (self.url("/up/1"),
                   self.origin.port, len(body))).encode())
        s.sendall(body)
        status, rest = self.read_answer(s)
        self.assertEqual(status, b"HTTP/1.1 200 OK")
        # the next request on the same connection
        s.sendall(("POST %s HTTP/1.1\r\nHost: early.test:%d\r\n"
                   "Content-Length: 5\r\n\r\nhello" % (self.url("/up/2"),
                   self.origin.port)).encode())
        status, _ = self.read_answer(s, rest)
        self.assertEqual(status, b"HTTP/1.1 200 OK")
        wait_for(lambda: "/up/2" in self.origin.got and
                 "/up/1" in self.origin.got, 10)
        self.assertEqual(self.origin.got.get("/up/1"), len(body))
        self.assertNotEqual(self.origin.conn_of["/up/1"],
                            self.origin.conn_of["/up/2"],
                            "the second request went on the connection "
                            "that answered the first early")
        self.assertEqual(self.origin.got.get("/up/2"), 5)
        rows = self.gw.wait_audit(pred=lambda r: (r.get("path") or "")
                                  .startswith("/up/1"))
        self.assertEqual([(r["decision"], r["status"]) for r in rows],
                         [("allow", 200)], rows)
        self.assertGreaterEqual(rows[0]["bytes_up"], len(body))

    def test_chunked_body(self):
        s = self.proxy_conn()
        s.sendall(("POST %s HTTP/1.1\r\nHost: early.test:%d\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n" % (self.url("/up/c"),
                   self.origin.port)).encode())
        for _ in range(64):
            s.sendall(b"4000\r\n" + b"z" * 0x4000 + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        status, rest = self.read_answer(s)
        self.assertEqual(status, b"HTTP/1.1 200 OK")
        wait_for(lambda: "/up/c" in self.origin.got, 10)
        self.assertEqual(self.origin.got["/up/c"], 64 * 0x4000)

    def test_curl_upload(self):
        """curl -T: the answer comes back (curl itself stops sending the
        body once it has one: what the origin got is curl's choice)."""
        f = os.path.join(self.td.path, "upload.bin")
        with open(f, "wb") as fh:
            fh.write(os.urandom(4 << 20))
        r = T.curl(self.url("/up/curl"), proxy=self.gw.url,
                   args=["-T", f, "-H", "Expect:"], tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"early\n")

    def test_origin_closes_after_answer(self):
        """It answers and goes: the answer stands (row allow 200)."""
        s = self.proxy_conn()
        s.sendall(("POST %s HTTP/1.1\r\nHost: early.test:%d\r\n"
                   "Content-Length: %d\r\n\r\n" % (self.url("/close/1"),
                   self.origin.port, 1 << 20)).encode() + b"a" * 1000)
        status, _ = self.read_answer(s)
        self.assertEqual(status, b"HTTP/1.1 200 OK")
        rows = self.gw.wait_audit(pred=lambda r: (r.get("path") or "")
                                  .startswith("/close/1"))
        self.assertEqual([(r["decision"], r["status"], r["reason"])
                          for r in rows], [("allow", 200, None)], rows)


    def test_origin_sends_past_its_answer(self):
        """A second answer, sent with the first or after it while the body
        still goes: never relayed; the first stands."""
        for path in ("/extra/1", "/extra/2"):
            s = self.proxy_conn()
            s.sendall(("POST %s HTTP/1.1\r\nHost: early.test:%d\r\n"
                       "Content-Length: %d\r\n\r\n" % (self.url(path),
                       self.origin.port, 4 << 20)).encode())
            try:
                s.sendall(b"b" * (4 << 20))
            except OSError:
                pass    # the gateway may close before the last bytes
            status, rest = self.read_answer(s)
            self.assertEqual(status, b"HTTP/1.1 200 OK")
            # the next request: answered by the origin afresh, or the
            # connection is closed -- never "extra"
            s.settimeout(10 * T.SLOW)
            try:
                s.sendall(("GET %s HTTP/1.1\r\nHost: early.test:%d\r\n\r\n"
                           % (self.url("/next"), self.origin.port)).encode())
                status, rest = self.read_answer(s, rest)
            except OSError:
                status = None
            self.assertIn(status, (None, b"HTTP/1.1 200 OK"))
            self.assertNotIn(b"extra", rest)
            rows = self.gw.wait_audit(pred=lambda r: (r.get("path") or "")
                                      .startswith(path))
            self.assertEqual([(r["decision"], r["status"]) for r in rows],
                             [("allow", 200)], rows)

if __name__ == "__main__":
    unittest.main(verbosity=2)
