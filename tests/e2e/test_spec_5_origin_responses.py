#!/usr/bin/python3
"""
SPEC §4 ("the gateway writes the framing of what it forwards from its own
parse") and §5 ("ambiguous framing ... is rejected, never forwarded";
upstream failures are 502), from the origin's side: an allowed origin that
answers with smuggling in mind -- Content-Length and Transfer-Encoding,
two lengths, obs-fold, an overflowing or negative length, no status line, a
101 nobody asked for, a HEAD or 204 answer with a body that is really a
second response, an unasked 100 -- must never make the gateway hand the
client a response it did not ask for, nor let a pipelined request the
policy denies (here DELETE, only GET and HEAD allowed) reach the origin.
§7: the gateway never follows a redirect itself.
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

SMUGGLED = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Smuggled: 1\r\n\r\n"
            b"EVIL!")
RESPONSES = {
    "/clte": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: "
             b"chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "/tecl": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: "
             b"5\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "/dupcl": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 60\r\n"
              b"\r\nok" + SMUGGLED,
    "/fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
    "/bigcl": b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n"
              b"\r\nok",
    "/negcl": b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok",
    "/nostatus": b"ok, no status line\r\n\r\n",
    "/te-gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                b"0\r\n\r\n",
    "/h101": b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
             b"Upgrade: websocket\r\n\r\n" + SMUGGLED,
}
# Answers the gateway may pass on, as long as what follows is not a response.
BODYLESS = {
    "/head": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED) +
             SMUGGLED,
    "/h204": b"HTTP/1.1 204 No Content\r\n\r\n" + SMUGGLED,
    "/h304": b"HTTP/1.1 304 Not Modified\r\n\r\n" + SMUGGLED,
    "/h100": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
             b"Content-Length: 2\r\n\r\nok",
    "/redirect": b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/"
                 b"latest/meta-data/\r\nContent-Length: 0\r\n\r\n",
}


class ScriptedOrigin:
    """Answers each request head by its path from a table; records heads."""

    def __init__(self, host="127.0.0.2"):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.heads = []
        self.conns = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                buf += b
                while b"\r\n\r\n" in buf:
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    line = head.split(b"\r\n")[0].decode("latin-1")
                    with self.lock:
                        self.heads.append(line)
                    path = line.split(" ")[1]
                    c.sendall(RESPONSES.get(path) or BODYLESS.get(path) or
                              b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        except OSError:
            pass
        finally:
            c.close()

    def saw(self, fragment):
        with self.lock:
            return [h for h in self.heads if fragment in h]

    def stop(self):
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class OriginResponsesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-spec5o-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = ScriptedOrigin()
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("scripted.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        policy = {"sandboxes": [T.local_sandbox("p")],
                  "policies": [{"name": "p",
                                "allow": [{"host": "scripted.test",
                                           "ports": [cls.origin.port],
                                           "methods": ["GET", "HEAD"]}],
                                "allow_private": ["127.0.0.2/32"]}]}
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.h = "scripted.test:%d" % cls.origin.port

    def exchange(self, path, method="GET"):
        """The request, a DELETE and a GET pipelined behind it; all the
        client got until the gateway closed."""
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        tag = path.strip("/")
        c.send("%s http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n"
               "DELETE http://%s/del-after-%s HTTP/1.1\r\nHost: %s\r\n\r\n"
               "GET http://%s/get-after-%s HTTP/1.1\r\nHost: %s\r\n"
               "Connection: close\r\n\r\n" % (
                   method, self.h, path, self.h, self.h, tag, self.h,
                   self.h, tag, self.h))
        return c.read_to_eof()

    def test_malformed_answers_are_502_and_nothing_more(self):
        for path in RESPONSES:
            with self.subTest(path=path):
                out = self.exchange(path)
                self.assertTrue(out.startswith(b"HTTP/1.1 502 "), out[:300])
                # A 101 nobody asked for is an upgrade refused.
                self.assertRegex(out, rb"X-Sandgate-Reason: upgrade-refused"
                                 rb"\r\n" if path == "/h101" else
                                 rb"X-Sandgate-Reason: upstream-(error|"
                                 rb"encoding)\r\n")
                self.assertNotIn(b"X-Smuggled", out)
                self.assertNotIn(b"EVIL!", out)
                # The 502 ends the connection: nothing pipelined behind it ran.
                self.assertEqual(out.count(b"HTTP/1.1 "), 1, out)
        time.sleep(0.2)
        self.assertEqual(self.origin.saw("-after-"), [])
        rows = self.gw.wait_audit(reason="upstream-error", status=502)
        self.assertTrue(rows)
        rows = self.gw.wait_audit(reason="upgrade-refused", status=502,
                                  path="/h101")
        self.assertTrue(rows)

    def test_bodyless_answers_carry_no_second_response(self):
        for path, method in (("/head", "HEAD"), ("/h204", "GET"),
                             ("/h304", "GET"), ("/h100", "GET")):
            with self.subTest(path=path):
                out = self.exchange(path, method)
                self.assertNotIn(b"X-Smuggled", out)
                self.assertNotIn(b"EVIL!", out)
                # The DELETE behind it is refused by the gateway itself.
                self.assertIn(b"X-Sandgate-Reason: policy-deny", out)
        time.sleep(0.2)
        self.assertEqual(self.origin.saw("/del-after-"), [])

    def test_redirect_passed_on_never_followed(self):
        out = self.exchange("/redirect")
        self.assertTrue(out.startswith(b"HTTP/1.1 302 "), out[:200])
        self.assertIn(b"Location: http://169.254.169.254/latest/meta-data/", out)
        self.assertEqual(len(self.gw.audit_rows(host="169.254.169.254")), 0)
        # A client that follows it is decided afresh: 169.254.169.254 is
        # internal, and no rule allows it anyway.
        r = T.curl("http://%s/redirect" % self.h, proxy=self.gw.url,
                   args=["-L", "--max-redirs", "2"])
        self.assertEqual(r.status, 403, r)
        self.assertIn(r.header("X-Sandgate-Reason"),
                      ("policy-deny", "destination-ip-prohibited"), r)
        row = self.gw.wait_audit(host="169.254.169.254")
        self.assertTrue(row)
        self.assertEqual(row[-1]["decision"], "deny", row)


if __name__ == "__main__":
    T.main()
