#!/usr/bin/python3
"""
Probe: a hostile HTTP/2 ORIGIN behind an intercepted tunnel (h2 both sides).

A hand-written origin (TLS, ALPN h2, raw frames, HPACK by python3-hpack)
plays a credential's host that reflects the swapped secret, and misbehaves.
The sandbox client is the raw H2 client of test_http2.py.

Tried (see each test): secret reflected in response fields (huffman and
never-indexed), in a CONTINUATION frame, in trailers and the body; a 1xx
informational HEADERS carrying the secret; a :status the gateway's "< 200"
check calls informational but nghttp2 calls final (099); content-encoding
gzip on a credential host; PUSH_PROMISE; content-length smaller than the
body.
Held: secret scrubbed from fields (huffman, never-indexed, set-cookie),
CONTINUATION, trailers, body; 1xx dropped; gzip -> 502 upstream-encoding;
099 -> 502 (reason text says "gRPC message", cosmetic); content-length
overrun -> HEADERS then RST_STREAM INTERNAL_ERROR, no body.
Found, and fixed (the tests failed before): PUSH_PROMISE, DATA on an
unopened stream, HEADERS on an even stream (nghttp2 connection errors) left
the client's stream hanging with no answer and no audit row; such a session
now ends its streams (502 upstream-error; GET, HEAD, OPTIONS go again once).
"""

import os
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA, admin_request, placeholders_of  # noqa: E402
from test_http2 import H2, H2OriginBase, frame, read_frame, DATA, HEADERS, SETTINGS, PUSH, \
    CONTINUATION, END_STREAM, END_HEADERS, ACK  # noqa: E402

try:
    import hpack
except ImportError:
    hpack = None

ORIGIN_HOST = "127.0.0.2"
SECRET = "sk-H2O/probe+Secret_0123456789abcdefghijXYZ_v1"

POLICY = """\
sandboxes:
  - id: box-h2o
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: evil.test
        ports: [{port}]
        tls: intercept
      - host: plain.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [h2o-key]
credentials:
  - name: h2o-key
    secret: h2o-secret
    hosts: [evil.test]
    headers: [Authorization]
"""


class EvilH2Origin(H2OriginBase):
    """TLS + ALPN h2; answers by :path with hand-made frames."""

    def __init__(self, cert, key):
        self.seen = []
        super().__init__(cert, key, ORIGIN_HOST)

    def serve_h2(self, s, idx):
        self.serve(s)

    read_frame = staticmethod(read_frame)

    def serve(self, s):
        buf = [b""]
        while len(buf[0]) < 24:
            b = s.recv(65536)
            if not b:
                return
            buf[0] += b
        buf[0] = buf[0][24:]
        enc, dec = hpack.Encoder(), hpack.Decoder()
        s.sendall(frame(SETTINGS, 0, 0))
        hblock = {}
        while True:
            typ, flags, sid, p = self.read_frame(s, buf)
            if typ == SETTINGS and not flags & ACK:
                s.sendall(frame(SETTINGS, ACK, 0))
                continue
            if typ in (HEADERS, CONTINUATION):
                if typ == HEADERS and flags & 0x8:   # padded
                    pl = p[0]
                    p = p[1:len(p) - pl]
                if typ == HEADERS and flags & 0x20:  # priority
                    p = p[5:]
                hblock[sid] = hblock.get(sid, b"") + p
                if flags & END_HEADERS:
                    fields = dict(dec.decode(hblock.pop(sid)))
                    self.seen.append(fields)
                    self.answer(s, enc, sid, fields)

    def answer(self, s, enc, sid, f):
        auth = f.get("authorization", "none")
        path = f.get(":path", "/")
        NI = hpack.NeverIndexedHeaderTuple

        def hdrs(fields, fl=END_HEADERS, huff=True):
            s.sendall(frame(HEADERS, fl, sid, enc.encode(fields, huffman=huff)))

        if path == "/fields":
            hdrs([(":status", "200"), NI("x-ni", auth), ("x-plain", auth),
                  ("set-cookie", "a=" + auth)])
            s.sendall(frame(DATA, 0, sid, ("body=" + auth).encode()))
            hdrs([("x-trailer", auth), NI("x-trailer-ni", auth)],
                 END_HEADERS | END_STREAM)
        elif path == "/continuation":
            blk = enc.encode([(":status", "200"), ("x-cont", auth)],
                             huffman=False)
            s.sendall(frame(HEADERS, 0, sid, blk[:3]) +
                      frame(CONTINUATION, 0, sid, blk[3:10]) +
                      frame(CONTINUATION, END_HEADERS, sid, blk[10:]))
            s.sendall(frame(DATA, END_STREAM, sid, b"ok"))
        elif path == "/info":
            hdrs([(":status", "103"), ("link", "</" + auth + ">"),
                  ("x-info", auth)])
            hdrs([(":status", "200")])
            s.sendall(frame(DATA, END_STREAM, sid, b"ok"))
        elif path == "/status099":
            hdrs([(":status", "099"), ("x-odd", auth)])
            s.sendall(frame(DATA, 0, sid, ("odd-body=" + auth).encode()))
            hdrs([("x-odd-trailer", auth)], END_HEADERS | END_STREAM)
        elif path == "/gzip":
            hdrs([(":status", "200"), ("content-encoding", "gzip")])
            s.sendall(frame(DATA, END_STREAM, sid, b"\x1f\x8b" + b"\0" * 18))
        elif path == "/push":
            pblk = enc.encode([(":method", "GET"), (":scheme", "https"),
                               (":authority", f.get(":authority", "")),
                               (":path", "/pushed")])
            s.sendall(frame(PUSH, END_HEADERS, sid,
                            struct.pack("!I", 2) + pblk))
            hdrs([(":status", "200")])
            s.sendall(frame(DATA, END_STREAM, sid, b"ok"))
            hdrs([(":status", "200"), ("x-pushed", auth)])
        elif path == "/ghost":
            # DATA on a stream the gateway never opened, then silence.
            s.sendall(frame(DATA, 0, sid + 200, ("ghost=" + auth).encode()))
        elif path == "/even":
            # HEADERS opening a stream of the server's own (an even id),
            # then silence: a connection error too.
            s.sendall(frame(HEADERS, END_HEADERS, 2, enc.encode(
                [(":status", "200"), ("x-even", auth)])))
        elif path == "/cl":
            hdrs([(":status", "200"), ("content-length", "4")])
            s.sendall(frame(DATA, END_STREAM, sid,
                            ("more-than-four=" + auth).encode()))
        else:
            hdrs([(":status", "404")], END_HEADERS | END_STREAM)


class H2OriginProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if hpack is None:
            T.skip_file("python3-hpack is not installed")
        cls.td = T.TempDir("sgtest-h2o-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cert, key = cls.pki.leaf("evil.test", ["evil.test", "plain.test"])
        cls.origin = EvilH2Origin(cert, key)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("evil.test", ORIGIN_HOST), ("plain.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"h2o.yaml": POLICY.format(
            port=cls.origin.port, origin=ORIGIN_HOST)},
            extra={"upstream": {"ca_bundle": cls.pki.cert},
                   "listen": {"admin": os.path.join(d, "admin.sock")}})
        r = T.run_sandgate("vault", "set", "h2o-secret", "-c",
                           cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        admin = os.path.join(d, "admin.sock")
        cls.gw_ca = cls.gw.wait_admin(admin)
        st, _, doc = admin_request(admin, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        listing = {e["id"]: e for e in doc["sandboxes"]}
        cls.ph = placeholders_of(listing["box-h2o"])["h2o-key"]["placeholder"]

    def get(self, path, timeout=None, host="evil.test"):
        h = H2(self, host, self.origin.port)
        self.assertEqual(h.alpn, "h2")
        if timeout:
            h.sock.settimeout(timeout)
        extra = [("authorization", "Bearer " + self.ph)] \
            if host == "evil.test" else []
        h.request(1, path=path, extra=extra)
        st, = h.wait(1)
        return h, st

    def blob(self, h, st):
        return repr(st).encode() + repr(h.streams).encode()

    def assert_no_secret(self, h, st):
        b = self.blob(h, st)
        self.assertNotIn(SECRET.encode(), b)

    def origin_got_secret(self):
        return any(f.get("authorization") == "Bearer " + SECRET
                   for f in self.origin.seen)

    def rows(self, path, host="evil.test"):
        deadline = time.time() + 5 * T.SLOW
        while time.time() < deadline:
            r = self.gw.audit_rows(host=host, path=path)
            if r:
                return r
            time.sleep(0.05)
        return []

    # ---------------------------------------------------------------- held

    def test_fields_trailers_body_scrubbed(self):
        h, st = self.get("/fields")
        self.assertTrue(self.origin_got_secret())
        self.assertEqual(H2.status(st), 200, st)
        self.assert_no_secret(h, st)
        self.assertIn(self.ph.encode(), st["data"])

    def test_continuation_scrubbed(self):
        h, st = self.get("/continuation")
        self.assertEqual(H2.status(st), 200, st)
        self.assert_no_secret(h, st)

    def test_informational_not_relayed(self):
        h, st = self.get("/info")
        self.assert_no_secret(h, st)
        self.assertEqual(H2.status(st), 200, st)

    def test_gzip_refused(self):
        h, st = self.get("/gzip")
        self.assert_no_secret(h, st)
        self.assertNotEqual(H2.status(st), 200, st)
        r = self.rows("/gzip")
        self.assertTrue(r and r[-1]["reason"] == "upstream-encoding", r)

    def test_content_length_overrun_not_relayed(self):
        """content-length 4, 40 bytes of DATA: headers then RST_STREAM, no body."""
        h, st = self.get("/cl")
        self.assert_no_secret(h, st)
        self.assertEqual(st["data"], b"")
        self.assertEqual(st["rst"], 2, st)

    def test_status_099_refused(self):
        """:status 099 (final for nghttp2, < 200 for the gateway): no body out."""
        h, st = self.get("/status099", timeout=8 * T.SLOW)
        self.assert_no_secret(h, st)
        self.assertTrue(st["done"], st)
        self.assertEqual(H2.status(st), 502, st)

    # ------------------------------------------------------------ findings

    def assert_stream_ends(self, path, host="evil.test"):
        h, st = self.get(path, timeout=20 * T.SLOW, host=host)
        self.assert_no_secret(h, st)
        self.assertTrue(st["done"], "no answer, no RST_STREAM within %ds on "
                        "the client's stream: %r" % (20 * T.SLOW, st))
        self.assertTrue(self.rows(path, host=host), "no audit row for %s" % path)

    def test_push_promise_ends_the_stream(self):
        """
        docs/protocols.md (Refused on HTTP/2): "server push | never sent
        (SETTINGS_ENABLE_PUSH 0); an origin's push is refused by nghttp2";
        and "when the connection ends under a stream ..., only GET, HEAD and
        OPTIONS go again ..., the others end 502 upstream-error".
        Sent: origin answers the GET with PUSH_PROMISE (promised id 2), then
        HEADERS 200 + DATA "ok" + END_STREAM, and keeps the TCP connection open.
        Observed (fixed: a session that neither reads nor writes now ends its
        streams, 502 upstream-error): nghttp2 queues GOAWAY PROTOCOL_ERROR and
        ignores everything after; the gateway never noticed the session was over, so the client's
        stream gets nothing (no HEADERS, no RST_STREAM) for 20 s (60 s tried)
        and there is no audit row.
        """
        self.assert_stream_ends("/push")

    def test_data_on_unopened_stream_ends_the_stream(self):
        """
        Same promise. Sent: origin answers the stream's request with one DATA
        frame on a stream id the gateway never opened (sid+200), then silence.
        nghttp2 treats it as a connection error (GOAWAY PROTOCOL_ERROR) but the
        client's stream hangs with no answer and no audit row.
        """
        self.assert_stream_ends("/ghost")

    def test_headers_on_even_stream_ends_the_stream(self):
        """A variant: the origin answers with HEADERS on stream 2, which no
        client may open and the gateway never did, then silence. The same
        connection error; the client's stream must end (fixed with the two
        above: a session that neither reads nor writes ends its streams)."""
        self.assert_stream_ends("/even")


if __name__ == "__main__":
    T.main()
