#!/usr/bin/python3
"""
Request smuggling and desync probes (SPEC §4 framing, §5 HTTP proxy, §6
interception, §7 credentials): places where the gateway's view of a
request could differ from what the origin reads, so that a request the
policy denies (a path outside the rule's `paths`, another host), or a
swapped secret, reaches an origin. Every origin records the bytes it got
per connection and parses them request by request the lenient way common
servers do; the assertions are on what arrived there.
"""

import os
import ssl
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402  (its test CA)
from test_bypass import RecOrigin, HOST  # noqa: E402

try:
    import hpack
except ImportError:
    hpack = None
if hpack is not None:
    from test_http2 import H2  # noqa: E402  (raw HTTP/2 client)

SECRET = "sk-smuggle-Secret-0123456789abcdefXYZ"
PH = "sgtest-smuggle-placeholder-0001"

POLICY = """\
sandboxes:
  - id: local
    policy: smug
    source: [127.0.0.1/32]
policies:
  - name: smug
    allow:
      - host: pr.test
        ports: [{pr}]
        methods: [GET, POST]
        paths: ["/public/*"]
      - host: mitm.test
        ports: [{mitm}]
        tls: intercept
        methods: [GET, POST]
        paths: ["/public/*"]
      - host: bound.test
        ports: [{bound}]
        tls: intercept
      - host: other.test
        ports: [{other}]
    allow_private: [{host}/32]
    credentials: [key]
credentials:
  - name: key
    secret: key-secret
    hosts: [bound.test]
    placeholder: "{ph}"
"""

DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(typ, flags, sid, payload=b""):
    return struct.pack("!I", len(payload))[1:] + bytes([typ, flags]) + \
        struct.pack("!I", sid) + payload


class SmuggleProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-smuggle-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("mitm.test", ["mitm.test", "bound.test"])
        cls.pr = RecOrigin("pr")
        cls.mitm = RecOrigin("mitm", crt, key)
        cls.bound = RecOrigin("bound", crt, key)
        cls.other = RecOrigin("other")
        for o in (cls.pr, cls.mitm, cls.bound, cls.other):
            cls.addClassCleanup(o.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in (
            "pr.test", "mitm.test", "bound.test", "other.test")])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(pr=cls.pr.port, mitm=cls.mitm.port,
                               bound=cls.bound.port, other=cls.other.port,
                               host=HOST, ph=PH)
        cls.gw = T.Gateway(d, cls.dns, {"smug.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        r = T.run_sandgate("vault", "set", "key-secret", "-c",
                           cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = cls.gw.client_context()
        cls.gw_ca = cls.gw.ca_path()      # what test_http2.H2 trusts

    # ------------------------------------------------------------ helpers

    def settle(self):
        time.sleep(0.4 * T.SLOW)

    def conn(self):
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        return c

    def tls_tunnel(self, host, port, alpn=None):
        c = self.conn()
        c.send("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
               (host, port, host, port))
        r = c.read_response("CONNECT")
        self.assertEqual(r.status, 200, r)
        ctx = self.ctx
        if alpn:
            ctx = ssl.create_default_context(cafile=self.gw.ca_path())
            ctx.set_alpn_protocols(alpn)
        c.sock = ctx.wrap_socket(c.sock, server_hostname=host)
        c.buf = b""
        return c

    def seen(self, origin, frag):
        return [q for q in origin.requests() if frag in q["path"]]

    def raw_of(self, origin):
        with origin.lock:
            return list(origin.raw)

    def try_read(self, c, method="GET"):
        try:
            return c.read_response(method)
        except (EOFError, OSError, ValueError, ssl.SSLError):
            return None

    @property
    def prh(self):
        return "pr.test:%d" % self.pr.port

    @property
    def mh(self):
        return "mitm.test:%d" % self.mitm.port

    # ------------------------------------------------------------ tests

    def test_mitm_absolute_form_naming_another_host(self):
        """
        SPEC §6: "the intercepted Host ... must match too". Inside an
        intercepted tunnel to mitm.test, an absolute-form target naming
        other.test (with Host: mitm.test), or Host naming other.test (with
        an absolute target naming mitm.test), is refused host-mismatch;
        neither origin sees it. (test_spec_4_5_listeners checks plain
        tunnels only.) An absolute target naming the tunnel is served in
        origin form. Holds on the current binary.
        """
        cases = [
            ("GET http://other.test:%d/public/abs-other HTTP/1.1\r\n"
             "Host: %s\r\n\r\n" % (self.other.port, self.mh)),
            ("GET https://%s/public/abs-hdr-other HTTP/1.1\r\n"
             "Host: other.test:%d\r\n\r\n" % (self.mh, self.other.port)),
        ]
        for data in cases:
            with self.subTest(data=data.split("\r\n")[0]):
                c = self.tls_tunnel("mitm.test", self.mitm.port)
                r = c.request(data)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "host-mismatch", r)
        c = self.tls_tunnel("mitm.test", self.mitm.port)
        r = c.request("GET https://%s/public/abs-same HTTP/1.1\r\nHost: %s"
                      "\r\n\r\n" % (self.mh, self.mh))
        self.assertEqual(r.status, 200, r)
        self.settle()
        self.assertEqual([q for q in self.other.requests()
                          if "/abs-" in q["path"]], [])
        self.assertEqual([q["path"] for q in self.mitm.requests()
                          if "/abs-" in q["path"]], ["/public/abs-same"])

    def test_connect_with_framing_headers_hides_no_request(self):
        """
        A CONNECT carrying Content-Length (or Transfer-Encoding) with a
        request to a denied path as its "body": SPEC §4 says every tunnel
        is classified by its first bytes and HTTP in it "is then handled
        request by request". The bytes after the CONNECT head are the
        tunnel's, decided as a request (403 for /admin-ccl), never relayed
        unread as a body; the chunk-size line of the TE variant is neither
        TLS nor HTTP and ends the tunnel. Nothing reaches the origin. Holds.
        """
        inner = "GET /admin-ccl HTTP/1.1\r\nHost: %s\r\n\r\n" % self.prh
        c = self.conn()
        c.send("CONNECT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s"
               % (self.prh, self.prh, len(inner), inner))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        r = self.try_read(c)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        c = self.conn()
        c.send("CONNECT %s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked"
               "\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (self.prh, self.prh,
                                                 len(inner), inner))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        self.assertIsNone(self.try_read(c))
        self.settle()
        self.assertEqual(self.pr.requests(), [])
        self.assertFalse(any(b"admin-ccl" in b for b in self.raw_of(self.pr)))

    @unittest.skipIf(hpack is None, "python3-hpack is not installed")
    def test_h2_stream_owing_body_never_shares_its_origin(self):
        """
        HTTP/2 -> HTTP/1.1: a stream whose head went out with
        Content-Length: 100 and only 10 body bytes before the client reset
        it leaves an origin connection that still owes 90 bytes. Were it
        kept (SPEC §4: an origin connection serves "the decision it was
        opened for" -- the path is not part of it), the next stream's head
        would become that body and its body a request no rule decided.
        Also content-length unlike the DATA (short, long, END_STREAM on
        HEADERS). Each such stream's origin connection is closed; the next
        stream gets a fresh one, and no origin connection carries more
        than what its own head said. Holds.
        """
        h = H2(self, "mitm.test", self.mitm.port)
        self.assertEqual(h.alpn, "h2")
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, h.block(
            1, "POST", "/public/h2-cl-es", [("content-length", "30")])))
        h.send(frame(HEADERS, END_HEADERS, 3, h.block(
            3, "POST", "/public/h2-cl-short", [("content-length", "30")])))
        h.send(frame(DATA, END_STREAM, 3, b"x" * 10))
        h.send(frame(HEADERS, END_HEADERS, 5, h.block(
            5, "POST", "/public/h2-cl-long", [("content-length", "5")])))
        h.send(frame(DATA, END_STREAM, 5, b"x" * 60))
        for sid in (1, 3, 5):
            st, = h.wait(sid)
            self.assertIsNotNone(st["rst"], st)
        h.send(frame(HEADERS, END_HEADERS, 7, h.block(
            7, "POST", "/public/h2-cl-rst", [("content-length", "100")])))
        h.send(frame(DATA, 0, 7, b"y" * 10))
        time.sleep(0.3 * T.SLOW)
        h.send(frame(RST_STREAM, 0, 7, b"\0\0\0\x08"))
        time.sleep(0.3 * T.SLOW)
        smuggled = ("GET /admin-h2 HTTP/1.1\r\nHost: %s\r\n\r\n" %
                    self.mh).encode()
        h.request(9, "POST", "/public/h2-next", body=b"z" * 90 + smuggled,
                  extra=[("content-length", str(90 + len(smuggled)))])
        st, = h.wait(9)
        self.assertEqual(H2.status(st), 200, st)
        self.settle()
        self.assertEqual(self.seen(self.mitm, "admin"), [])
        raws = self.raw_of(self.mitm)
        for raw in raws:
            self.assertFalse(b"h2-cl-" in raw and b"h2-next" in raw, raw)
        nxt = self.seen(self.mitm, "/public/h2-next")
        self.assertEqual(len(nxt), 1)
        self.assertEqual(nxt[0]["body"], b"z" * 90 + smuggled)

    @unittest.skipIf(hpack is None, "python3-hpack is not installed")
    def test_h2_host_field_without_authority_names_other(self):
        """
        SPEC §6: the intercepted Host (HTTP/2: :authority) must match the
        tunnel. A stream with no :authority and a `host` field naming
        other.test is that Host: refused host-mismatch, nothing reaches
        either origin (test_http2 checks host beside :authority only).
        Holds.
        """
        h = H2(self, "mitm.test", self.mitm.port)
        blk = h.enc.encode([(":method", "GET"), (":scheme", "https"),
                            (":path", "/public/h2-hostonly"),
                            ("host", "other.test:%d" % self.other.port)])
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, blk))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 403, st)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "host-mismatch")
        self.settle()
        self.assertEqual(self.seen(self.mitm, "h2-hostonly"), [])
        self.assertEqual(self.seen(self.other, "h2-hostonly"), [])


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
