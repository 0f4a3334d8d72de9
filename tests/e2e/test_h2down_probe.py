#!/usr/bin/python3
"""
Probe: HTTP/2 -> HTTP/1.1 downgrade (docs/protocols.md "HTTP/2 inside
intercepted tunnels"; SPEC §6), attacked as in James Kettle's "HTTP/2: the
sequel is always worse". The sandbox speaks raw HTTP/2 frames (hpack, no
validation) through CONNECT + interception to a keep-alive HTTP/1.1 TLS
origin (RawH1) that keeps every byte each connection carried and parses
it as a lenient server would; assertions are on those bytes, on what the
next stream is answered, and on the audit rows.

Tried, held (H) or found (F):
- H H2.CL: content-length "5, 5", "+5", "0x5", "-1", huge, two differing,
  0 with DATA: RST_STREAM; "05" goes as Content-Length: 5.
- H H2.TE: transfer-encoding: chunked (body "0\r\n\r\n" + a request): RST.
- H CR / LF / NUL / space / ':' in names, values, :path, :method,
  :authority, :scheme; upper-case names; pseudo-fields after regular ones,
  unknown, twice: RST_STREAM or 400; nothing injected reaches the origin.
- H :path empty, '*' with GET, relative, absolute URL (same or other host),
  with '#': refused; OPTIONS * forwarded as "OPTIONS *" only where no rule
  limits methods (rules.test: 403).
- H :authority with userinfo '@', another name, another port, a path;
  host differing from :authority, host twice: 400/403/RST.
- H connection, keep-alive, upgrade, proxy-connection, te: gzip / list,
  http2-settings: refused; te: trailers and trailer: dropped.
- H cookie crumbs joined into one "Cookie: a=1; b=2".
- H trailers with content-length, transfer-encoding, host, :path,
  connection, upper case, CRLF: stream reset, trailers never forwarded.
- H GET / HEAD with a body: forwarded chunked, one request at the origin.
- H padded DATA: padding never forwarded; many DATA frames (see test_http2).
- H policy over h2: deny paths (/admin, /public/../admin, //admin,
  /%61dmin), deny methods in any case (delete, Delete), allow methods exact
  (get refused), ambiguous /%2e%2e/: refused and audited with the rule.
- H client reset before the answer, reset mid-answer, HEAD answers with and
  without a stray body, 100 Continue, expect: 100-continue: the next stream
  on the kept origin connection always gets its own answer.
- H chunked upload reset mid-body: its origin connection is never reused.
- F a stream the gateway resets for malformed trailers (host in trailers)
  is audited decision allow, status NULL, no reason
  (test_stream_refused_for_bad_trailers_is_audited_deny).
- F a stream decided allow and reset (nghttp2 PROTOCOL_ERROR for DATA past
  content-length 0, or the client's CANCEL) while its origin connection is
  being opened has no audit row at all, though the origin connection was
  opened (test_decided_stream_reset_before_origin_has_its_row).
- N underscore names (transfer_encoding, content_length) are forwarded as
  written (valid tokens; test_hdr_probe covers odd names in HTTP/1.1);
  :scheme "foo"/"http" accepted and ignored; "get" forwarded to hosts
  with no methods rule.
"""

import os
import ssl
import struct
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402  (its test CA)

try:
    import hpack
except ImportError:
    hpack = None
if hpack is not None:
    from test_http2 import H2, frame  # noqa: E402  (raw HTTP/2 client)

HOST = "127.0.0.2"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 7, 8
END_STREAM, END_HEADERS, PADDED = 0x1, 0x4, 0x8
PROTOCOL_ERROR, CANCEL = 1, 8

POLICY = """\
sandboxes:
  - id: local
    policy: h2d
    source: [127.0.0.1/32]
policies:
  - name: h2d
    deny:
      - host: rules.test
        paths: ["/admin*"]
      - host: rules.test
        methods: [DELETE]
      - host: open.test
        paths: ["/admin*"]
    allow:
      - host: rules.test
        ports: [{port}]
        tls: intercept
        methods: [GET, POST, HEAD, DELETE]
        paths: ["/public/*"]
      - host: open.test
        ports: [{port}]
        tls: intercept
      - host: other.test
        ports: [{port}]
        tls: intercept
      - host: fresh.test
        ports: [{port}]
        tls: intercept
    allow_private: [{host}/32]
"""

SMUG = b"GET /admin/smuggled HTTP/1.1\r\nHost: open.test\r\n\r\n"


class RawH1(T.Listener):
    """
    An HTTP/1.1 origin over TLS that keeps every byte each connection
    carried (.raw[idx], as read), parses it request by request as a
    keep-alive server does (Content-Length, chunked) and answers each
    with "conn=<idx> n=<k> <method> <path>". /slow/ answers after 1.5 s;
    HEAD gets a Content-Length and no body (/headbody/: and a body anyway);
    /100/ sends "100 Continue" first; /big/ sends 256 KiB.
    """

    def __init__(self, cert, key):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(["http/1.1"])
        self.lock = threading.Lock()
        self.raw = {}
        self.reqs = []
        super().__init__(HOST)

    def accepted(self, conn, idx):
        self.raw[idx] = b""

    def serve(self, c, idx):
        c.settimeout(20)
        s = self.ctx.wrap_socket(c, server_side=True)
        try:
            self._serve(s, idx)
        finally:
            s.close()

    def _serve(self, s, idx):
        buf = b""
        n = 0

        def more():
            b = s.recv(65536)
            if not b:
                raise EOFError
            with self.lock:
                self.raw[idx] += b
            return b
        while True:
            while b"\r\n\r\n" not in buf:
                buf += more()
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            words = lines[0].split(" ")
            method, path = words[0], words[1] if len(words) > 1 else ""
            hm = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                hm.setdefault(k.strip().lower(), v.strip())
            body = b""
            if "chunked" in hm.get("transfer-encoding", "").lower():
                while True:
                    while b"\r\n" not in buf:
                        buf += more()
                    sz, buf = buf.split(b"\r\n", 1)
                    size = int(sz.split(b";")[0], 16)
                    while len(buf) < size + 2:
                        buf += more()
                    body += buf[:size]
                    buf = buf[size + 2:]
                    if size == 0:
                        break
            elif "content-length" in hm:
                cl = int(hm["content-length"])
                while len(buf) < cl:
                    buf += more()
                body, buf = buf[:cl], buf[cl:]
            with self.lock:
                self.reqs.append({"conn": idx, "n": n, "method": method,
                                  "path": path, "head": head, "hmap": hm,
                                  "body": body})
            text = ("conn=%d n=%d %s %s\n" % (idx, n, method, path)).encode()
            n += 1
            out = b""
            if path.startswith("/slow/"):
                time.sleep(1.5)
            if path.startswith("/100/"):
                out += b"HTTP/1.1 100 Continue\r\n\r\n"
            if path.startswith("/big/"):
                text = text + b"B" * (256 * 1024)
            out += b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(text)
            if method != "HEAD" or path.startswith("/headbody/"):
                out += text
            s.sendall(out)

    def requests(self):
        with self.lock:
            return list(self.reqs)

    def raws(self):
        with self.lock:
            return dict(self.raw)

    def paths(self):
        return [r["path"] for r in self.requests()]


@unittest.skipIf(hpack is None, "python3-hpack is not installed")
class H2DownProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-h2down-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("rules.test", ["rules.test", "open.test",
                                               "other.test", "fresh.test"])
        cls.o = RawH1(crt, key)
        cls.addClassCleanup(cls.o.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in (
            "rules.test", "open.test", "other.test", "fresh.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"h2d.yaml": POLICY.format(
            port=cls.o.port, host=HOST)},
            extra={"upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()      # what test_http2.H2 trusts

    # ------------------------------------------------------------ helpers

    def h2(self, host="open.test"):
        h = H2(self, host, self.o.port)
        self.assertEqual(h.alpn, "h2")
        return h

    def settle(self):
        time.sleep(0.5 * T.SLOW)

    def fields(self, h, method, path, extra=(), authority=None, scheme="https"):
        return h.enc.encode([(":method", method), (":scheme", scheme),
                             (":authority", authority or h.authority),
                             (":path", path)] + list(extra))

    def assert_no_smuggle(self):
        self.settle()
        bad = [r for r in self.o.requests() if "admin" in r["path"]
               or "smug" in r["path"]]
        self.assertEqual(bad, [], "a request no rule decided reached the "
                         "origin")

    def row(self, **match):
        rows = self.gw.wait_audit(**match)
        self.assertTrue(rows, "no audit row %r; last rows: %r" % (
            match, self.gw.audit_rows()[-4:]))
        return rows[-1]

    def send_raw(self, fields, body=None, host="open.test", trailers=None):
        """One stream of raw (name, value) fields, on a new connection:
        its status, ("rst", code), or "closed"."""
        h = self.h2(host)
        flags = END_HEADERS | (END_STREAM if body is None and trailers is None
                               else 0)
        h.send(frame(HEADERS, flags, 1, h.enc.encode(fields)))
        if body is not None:
            h.send(frame(DATA, 0 if trailers else END_STREAM, 1, body))
        if trailers is not None:
            h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                         h.enc.encode(trailers)))
        st, = h.wait(1)
        if st["headers"]:
            return H2.status(st)
        if st["rst"] is not None:
            return ("rst", st["rst"])
        return "closed"

    def base(self, auth, method="GET", path="/inj/x", scheme="https"):
        return [(":method", method), (":scheme", scheme),
                (":authority", auth), (":path", path)]

    def answer_of(self, st):
        return st["data"].decode("latin-1")

    # ------------------------------------------------------------ tests

    def test_reset_before_answer_never_answers_the_next_stream(self):
        """
        Response-queue poisoning: docs/protocols.md "An origin connection
        serves only its own decision" / "Bytes an origin sends past the end
        of its response ... never answer the next request". Stream 1 GET
        /slow/ (the origin answers after 1.5 s) is reset by the client
        (CANCEL) while the answer is owed; streams 3 and 5 must get their
        own answers, never stream 1's. Holds.
        """
        h = self.h2()
        h.request(1, "GET", "/slow/q1")
        time.sleep(0.4 * T.SLOW)
        h.send(frame(RST_STREAM, 0, 1, struct.pack("!I", CANCEL)))
        time.sleep(0.2 * T.SLOW)
        h.request(3, "GET", "/after/q1")
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 200, st)
        self.assertIn("GET /after/q1", self.answer_of(st))
        time.sleep(2)
        h.request(5, "GET", "/after2/q1")
        st, = h.wait(5)
        self.assertIn("GET /after2/q1", self.answer_of(st))

    def test_reset_mid_answer_never_answers_the_next_stream(self):
        """
        Stream 1 GET /big/ (256 KiB) is reset once its HEADERS came, the
        rest of the body still on the origin connection; stream 3's answer
        is its own (starts "conn="), not the leftover bytes. Holds.
        """
        h = self.h2()
        h.window = False
        h.request(1, "GET", "/big/q2")
        while not h.stream(1)["headers"]:
            self.assertTrue(h.pump())
        h.send(frame(RST_STREAM, 0, 1, struct.pack("!I", CANCEL)))
        h.window = True
        time.sleep(0.3 * T.SLOW)
        h.request(3, "GET", "/after/q2")
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 200, st)
        self.assertTrue(self.answer_of(st).startswith("conn="),
                        st["data"][:80])
        self.assertIn("GET /after/q2", self.answer_of(st))

    def test_head_100_and_body_on_head_stay_in_sync(self):
        """
        On one h2 connection to a keep-alive HTTP/1.1 origin: HEAD (a
        Content-Length, no body), HEAD answered with a body anyway, a 100
        Continue before the final answer, and POST with expect:
        100-continue; each followed by a GET that must get its own answer
        (docs/protocols.md "Framing is the gateway's own": HEAD keeps the
        length of a body not sent; bytes past a response never answer the
        next request). Holds.
        """
        h = self.h2()
        seq = [("HEAD", "/h/q3", None, ()), ("GET", "/after/q3", None, ()),
               ("HEAD", "/headbody/q3", None, ()),
               ("GET", "/after2/q3", None, ()),
               ("GET", "/100/q3", None, ()), ("GET", "/after3/q3", None, ()),
               ("POST", "/100/q3b", b"abc", [("expect", "100-continue"),
                                             ("content-length", "3")]),
               ("GET", "/after4/q3", None, ())]
        for i, (m, p, body, extra) in enumerate(seq):
            sid = 1 + 2 * i
            h.request(sid, m, p, extra=extra, body=body)
            st, = h.wait(sid)
            self.assertEqual(H2.status(st), 200, (p, st))
            if m == "HEAD":
                self.assertEqual(st["data"], b"", (p, st))
            else:
                self.assertIn("%s %s" % (m, p), self.answer_of(st), p)

    def test_chunked_body_reset_not_reused(self):
        """
        The chunked twin of test_smuggle_probe's content-length case: a
        stream with no content-length (forwarded chunked) reset after one
        DATA frame leaves its origin connection inside a chunk; a later
        stream (method ABC, a valid token that reads as a chunk size, its
        body a request for /admin/) never goes on that connection. Holds.
        """
        h = self.h2()
        h.send(frame(HEADERS, END_HEADERS, 1, self.fields(h, "POST", "/up/q4")))
        h.send(frame(DATA, 0, 1, b"abc"))
        time.sleep(0.3 * T.SLOW)
        h.send(frame(RST_STREAM, 0, 1, struct.pack("!I", CANCEL)))
        time.sleep(0.3 * T.SLOW)
        h.request(3, "ABC", "/next/q4", body=b"x" * 10 + SMUG)
        h.wait(3)
        self.assert_no_smuggle()
        for raw in self.o.raws().values():
            self.assertFalse(b"/up/q4" in raw and b"/next/q4" in raw, raw)

    def test_field_injection_refused(self):
        """
        Kettle's H2.X / request-line injection: CR, LF, NUL, space or ':'
        in names, values and pseudo-fields, upper-case names, a :path that
        is empty, '*' with GET, relative or absolute, pseudo-fields out of
        order, unknown or twice, connection-specific fields (connection,
        keep-alive, upgrade, proxy-connection, te other than trailers,
        http2-settings), transfer-encoding, an :authority or host naming
        another host (userinfo '@', another name or port, a path). Each is
        refused on its stream (RST_STREAM by nghttp2, or 400/403 by the
        gateway) and nothing of it reaches the origin. Holds.
        """
        auth = "open.test:%d" % self.o.port
        inj = "\r\nx-injected: 1\r\n\r\nGET /admin/smug HTTP/1.1\r\nx: y"
        b = self.base
        cases = {
            "path-crlf": b(auth, path="/inj/p1 HTTP/1.1" + inj),
            "path-space": b(auth, path="/inj/p2 x"),
            "path-lf": b(auth, path="/inj/p3\nx-injected: 1"),
            "path-nul": b(auth, path="/inj/p4\x00x"),
            "path-hash": b(auth, path="/inj/p5#/../admin"),
            "path-empty": b(auth, path=""),
            "path-star-get": b(auth, path="*"),
            "path-relative": b(auth, path="inj/p8"),
            "path-absolute": b(auth, path="https://other.test:%d/inj/p9"
                               % self.o.port),
            "method-space": b(auth, method="GET /admin/smug HTTP/1.1" + inj),
            "method-crlf": b(auth, method="GET" + inj, path="/inj/m2"),
            "method-tab": b(auth, method="GET\t", path="/inj/m4"),
            "authority-crlf": b(auth + inj, path="/inj/a1"),
            "authority-userinfo": b("other.test@" + auth, path="/inj/a2"),
            "authority-at": b(auth + "@other.test", path="/inj/a3"),
            "authority-other": b("other.test:%d" % self.o.port,
                                 path="/inj/a4"),
            "authority-port": b("open.test:1", path="/inj/a6"),
            "authority-path": b(auth + "/admin", path="/inj/a9"),
            "scheme-crlf": b(auth, scheme="https" + inj, path="/inj/s1"),
            "scheme-url": b(auth, scheme="https://other.test/x?",
                            path="/inj/s4"),
            "name-crlf": b(auth, path="/inj/n1") + [("x-a\r\nx-injected", "1")],
            "name-colon": b(auth, path="/inj/n2") + [("x-injected:1\r\nx-b",
                                                       "1")],
            "name-colon-end": b(auth, path="/inj/n3") + [("x-injected:", "1")],
            "name-space": b(auth, path="/inj/n4") + [("x-injected 1", "1")],
            "name-nul": b(auth, path="/inj/n5") + [("x-in\x00jected", "1")],
            "name-upper": b(auth, path="/inj/n6") + [("X-Injected", "1")],
            "name-upper-cl": b(auth, "POST", "/inj/n7") + [("Content-Length",
                                                            "0")],
            "value-crlf": b(auth, path="/inj/v1") + [("x-a", "1" + inj)],
            "value-lf": b(auth, path="/inj/v2") + [("x-a", "1\nx-injected: 1")],
            "value-cr": b(auth, path="/inj/v3") + [("x-a", "1\rx-injected: 1")],
            "value-nul": b(auth, path="/inj/v4") + [("x-a", "1\x00x-injected")],
            "host-crlf": b(auth, path="/inj/h1") + [("host", auth + inj)],
            "host-other": b(auth, path="/inj/h2") + [
                ("host", "other.test:%d" % self.o.port)],
            "host-twice": b(auth, path="/inj/h5") + [("host", auth),
                                                     ("host", "other.test")],
            "connection": b(auth, path="/inj/c1") + [("connection", "close")],
            "keep-alive": b(auth, path="/inj/c2") + [("keep-alive", "300")],
            "upgrade": b(auth, path="/inj/c3") + [("upgrade", "websocket")],
            "te-gzip": b(auth, path="/inj/c4") + [("te", "gzip")],
            "te-list": b(auth, path="/inj/c6") + [("te", "trailers, gzip")],
            "proxy-connection": b(auth, path="/inj/c7") + [
                ("proxy-connection", "keep-alive")],
            "http2-settings": b(auth, path="/inj/c8") + [("http2-settings",
                                                          "AAA")],
            "transfer-encoding": b(auth, "POST", "/inj/t1") + [
                ("transfer-encoding", "chunked")],
            "pseudo-after-regular": [(":method", "GET"), (":scheme", "https"),
                                     ("x-a", "1"), (":authority", auth),
                                     (":path", "/inj/o1")],
            "pseudo-unknown": b(auth, path="/inj/o2") + [(":foo", "bar")],
            "path-twice": b(auth, path="/inj/o3") + [(":path", "/admin/smug")],
        }
        passed = {}
        for name, f in cases.items():
            got = self.send_raw(f)
            if not (isinstance(got, tuple) or (isinstance(got, int) and
                                               400 <= got < 500)):
                passed[name] = got
        self.assertEqual(passed, {}, "streams not refused")
        self.settle()
        self.assertEqual([r["path"] for r in self.o.requests()
                          if "/inj/" in r["path"]], [])
        for raw in self.o.raws().values():
            self.assertNotIn(b"x-injected", raw.lower())
        self.assert_no_smuggle()

    def test_policy_rules_not_dodged_over_h2(self):
        """
        docs/policy.md: a deny rule with paths, a deny rule with methods
        ("on a deny rule: any case, so post cannot dodge a POST deny") and
        an allow rule limited to methods and /public/*, reached over
        HTTP/2: DELETE/delete/Delete, get, /admin, /public/../admin,
        //admin, /%61dmin, /ADMIN, /public/%2e%2e/admin (ambiguous),
        OPTIONS *, HEAD /admin -- all refused and audited with the rule;
        nothing reaches the origin. Holds.
        """
        ra = "rules.test:%d" % self.o.port
        cases = [("DELETE", "/public/pd1", 403, "h2d:deny[1]"),
                 ("delete", "/public/pd2", 403, "h2d:deny[1]"),
                 ("Delete", "/public/pd3", 403, "h2d:deny[1]"),
                 ("get", "/public/pd4", 403, "default-deny"),
                 ("GET", "/admin/pd5", 403, "h2d:deny[0]"),
                 ("GET", "/public/../admin/pd6", 403, "h2d:deny[0]"),
                 ("GET", "//admin/pd7", 403, "h2d:deny[0]"),
                 ("GET", "/public/%2e%2e/admin/pd8", 400, "h2d:deny[0]"),
                 ("OPTIONS", "*", 403, "default-deny"),
                 ("HEAD", "/admin/pd10", 403, "h2d:deny[0]"),
                 ("GET", "/ADMIN/pd12", 403, "default-deny"),
                 ("GET", "/%61dmin/pd13", 403, "h2d:deny[0]")]
        for m, p, want, rule in cases:
            with self.subTest(method=m, path=p):
                self.assertEqual(self.send_raw(self.base(ra, m, p),
                                               host="rules.test"), want)
                row = self.row(method=m, path=p)
                self.assertEqual(row["decision"], "deny", row)
                self.assertEqual(row["rule"], rule, row)
        self.assertEqual(self.send_raw(self.base(ra, "GET", "/public/ok"),
                                       host="rules.test"), 200)
        self.settle()
        self.assertEqual([r["path"] for r in self.o.requests()
                          if r["hmap"].get("host", "").startswith("rules.")],
                         ["/public/ok"])

    def test_framing_fields_and_bodies(self):
        """
        H2.CL / H2.TE: transfer-encoding: chunked with a body that ends the
        chunked stream early and carries a request; two content-lengths
        that differ, "5, 5", "+5", "0x5", "-1", a huge one, content-length
        0 with DATA; trailers holding content-length, transfer-encoding,
        host, :path, connection, an upper-case name or CRLF in a value --
        each stream reset, nothing smuggled. GET and HEAD with a body
        (no content-length) go as chunked and arrive whole as one request;
        "05" goes as Content-Length: 5; padded DATA frames reach the origin
        without their padding. Holds.
        """
        oa = "open.test:%d" % self.o.port
        b = self.base
        refused = {
            "te-chunked": (b(oa, "POST", "/bd/1") + [("transfer-encoding",
                           "chunked")], b"0\r\n\r\n" + SMUG, None),
            "cl-two": (b(oa, "POST", "/bd/2") + [("content-length", "5"),
                       ("content-length", "60")], b"x" * 5, None),
            "cl-list": (b(oa, "POST", "/bd/3") + [("content-length", "5, 5")],
                        b"x" * 5, None),
            "cl-plus": (b(oa, "POST", "/bd/5") + [("content-length", "+5")],
                        b"x" * 5, None),
            "cl-hex": (b(oa, "POST", "/bd/6") + [("content-length", "0x5")],
                       b"x" * 5, None),
            "cl-neg": (b(oa, "POST", "/bd/7") + [("content-length", "-1")],
                       b"x" * 5, None),
            "cl-huge": (b(oa, "POST", "/bd/8") + [("content-length",
                        "99999999999999999999999")], b"x" * 5, None),
            "cl-0-data": (b(oa, "POST", "/bd/9") + [("content-length", "0")],
                          SMUG, None),
            "tr-cl": (b(oa, "POST", "/bd/13"), b"abc", [("content-length",
                                                         "100")]),
            "tr-te": (b(oa, "POST", "/bd/14"), b"abc", [("transfer-encoding",
                                                         "chunked")]),
            "tr-host": (b(oa, "POST", "/bd/15"), b"abc", [("host",
                                                           "other.test")]),
            "tr-path": (b(oa, "POST", "/bd/16"), b"abc", [(":path",
                                                           "/admin/smug")]),
            "tr-crlf": (b(oa, "POST", "/bd/17"), b"abc", [
                ("x-tr", "1\r\n\r\n" + SMUG.decode())]),
            "tr-upper": (b(oa, "POST", "/bd/20"), b"abc", [("X-Tr", "1")]),
            "tr-connection": (b(oa, "POST", "/bd/21"), b"abc",
                              [("connection", "close")]),
        }
        for k, (f, body, tr) in refused.items():
            with self.subTest(case=k):
                got = self.send_raw(f, body=body, trailers=tr)
                self.assertIsInstance(got, tuple, got)
        ok = {
            "/bd/4": (b(oa, "POST", "/bd/4") + [("content-length", "05")],
                      b"x" * 5),
            "/bd/10": (b(oa, "GET", "/bd/10"), SMUG),
            "/bd/11": (b(oa, "HEAD", "/bd/11"), SMUG),
        }
        for p, (f, body) in ok.items():
            self.assertEqual(self.send_raw(f, body=body), 200, p)
        h = self.h2()
        h.send(frame(HEADERS, END_HEADERS, 1, self.fields(h, "POST", "/bd/pad")))
        h.send(frame(DATA, PADDED, 1, bytes([len(SMUG)]) + b"abc" + SMUG))
        h.send(frame(DATA, PADDED | END_STREAM, 1, bytes([len(SMUG)]) + SMUG))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)
        self.settle()
        got = {r["path"]: r for r in self.o.requests()
               if r["path"].startswith("/bd/")}
        self.assertEqual(sorted(got), sorted(list(ok) + ["/bd/pad"]))
        self.assertEqual(got["/bd/4"]["hmap"].get("content-length"), "5")
        self.assertEqual(got["/bd/10"]["body"], SMUG)
        self.assertEqual(got["/bd/11"]["body"], SMUG)
        self.assertEqual(got["/bd/pad"]["body"], b"abc")
        self.assert_no_smuggle()

    # ------------------------------------------------------------ findings

    def test_stream_refused_for_bad_trailers_is_audited_deny(self):
        """
        FINDING. docs/protocols.md "Refused on HTTP/2": a field HTTP/2
        forbids is answered 400 "or RST_STREAM PROTOCOL_ERROR", reason
        `bad-request`; docs/audit.md: every decision is one row "with the
        same reason word that the client sees", decision `deny` when "the
        request was refused". Sent: HEADERS POST /tr/host (no
        content-length, so forwarded chunked), DATA "abc", then, 0.3 s
        later, trailers HEADERS+END_STREAM with `host: other.test` (a field
        h2_req_trailer() refuses: "nothing that frames or routes a
        message"). Observed: the gateway resets the stream
        (RST_STREAM PROTOCOL_ERROR; the origin got the head and a chunk,
        then its connection closed), and the only audit row says decision
        `allow`, status NULL, reason NULL -- a refused, malformed request
        logged as an allowed one. (A placeholder in the same trailers gets
        a `deny` row: st_trailers_check() logs that case, not
        st->trailers_bad.)
        """
        h = self.h2("fresh.test")
        h.send(frame(HEADERS, END_HEADERS, 1, self.fields(h, "POST",
                                                         "/tr/host")))
        h.send(frame(DATA, 0, 1, b"abc"))
        time.sleep(0.3 * T.SLOW)
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, h.enc.encode(
            [("host", "other.test")])))
        st, = h.wait(1)
        self.assertEqual(st["rst"], PROTOCOL_ERROR, st)
        self.assertEqual(st["headers"], [], st)
        time.sleep(0.5 * T.SLOW)
        rows = self.gw.audit_rows(path="/tr/host")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual((rows[0]["decision"], rows[0]["reason"]),
                         ("deny", "bad-request"),
                         "a stream reset as malformed is audited as %r" % {
                             k: rows[0][k] for k in ("decision", "status",
                                                     "reason", "rule")})

    def test_decided_stream_reset_before_origin_has_its_row(self):
        """
        FINDING. SPEC §6: "each HTTP/2 stream is a request decided,
        swapped, scrubbed and audited on its own"; SPEC §8 "one row per
        decision"; docs/protocols.md "Each stream has its own audit row".
        Sent, in one write, on a tunnel to a host no origin connection is
        kept for (fresh.test: no stream of it is ever answered here):
        HEADERS (no END_STREAM) POST /nr/cl0 with
        content-length: 0, then DATA "abc" (body longer than its
        content-length) -- and, second case, HEADERS GET /nr/cancel then
        the client's own RST_STREAM CANCEL. The header block is decided at
        once (st_request -> proxy_decide: allow, origin connection
        started), then the stream is reset (nghttp2 PROTOCOL_ERROR; the
        client's CANCEL). Observed: no audit row at all for either
        stream: exchange_end() (src/exchange/proxy_life.c) logs a stream
        only in state S_FORWARD, so a stream reset while its origin
        connection is still being opened vanishes from the log, though
        the gateway did open a TCP+TLS connection to the origin for it
        (the failure message counts them; with a kept origin connection
        the same stream gets an `allow` row with status NULL instead).
        """
        for path, extra, tail in (
                ("/nr/cl0", [("content-length", "0")],
                 lambda h: frame(DATA, END_STREAM, 1, b"abc")),
                ("/nr/cancel", [],
                 lambda h: frame(RST_STREAM, 0, 1,
                                 struct.pack("!I", CANCEL)))):
            with self.subTest(path=path):
                before = len(self.o.conns)
                h = self.h2("fresh.test")
                flags = END_HEADERS | (END_STREAM if not extra else 0)
                h.send(frame(HEADERS, flags, 1, self.fields(
                    h, "POST" if extra else "GET", path, extra)) + tail(h))
                if extra:
                    st, = h.wait(1)
                    self.assertEqual(st["rst"], PROTOCOL_ERROR, st)
                time.sleep(0.5 * T.SLOW)
                opened = len(self.o.conns) - before
                # The audit writer is working: a stream after it (on a
                # host with kept origin connections) has its row.
                self.assertEqual(self.send_raw(self.base(
                    "open.test:%d" % self.o.port, "GET", path + "-ctl")), 200)
                self.row(path=path + "-ctl")
                time.sleep(0.5 * T.SLOW)
                self.assertEqual(len(self.gw.audit_rows(path=path)), 1,
                                 "the stream %s was decided (%d origin "
                                 "connection(s) opened for it) and has no "
                                 "audit row" % (path, opened))


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
