#!/usr/bin/python3
"""
Third credential probe (AREA cred3): can a sandbox get a REAL secret sent to
a host it is not bound to, reflected back to itself, or logged?

Origins of our own on 127.0.0.2: Api (a T.ScriptedOrigin, one backend with
one request log, Api.seen) serves bound.test (the credential's host) over
TLS and over plain HTTP, and other.test (unbound) on a port of its own;
WsOrigin (test_websocket_scrub) serves WebSockets for other.test. The
credential probe-key: a fixed placeholder, Authorization, query: true.

Finding (fails on the binary it was written against):
- f01 (Cred3RotationProbe): after `sandgate vault rotate`, a response of
  the bound host quoting the PREVIOUS value (still valid at the provider
  until revoked "afterwards") reaches the sandbox raw; only the new value
  is scrubbed. OAuth2 keeps the replaced token in the scrubber (was_name);
  static (and aws_sigv4) values do not. The same happens when a reload
  points the credential's `secret:` at another vault entry (not kept as a
  test: the keeper deliberately drops values no policy names).

Tried and held (one line each; test name where kept):
- r01: bound host 307 -> other.test, curl -L --location-trusted re-sends
  Authorization: the follow-up is 403 credential-misuse, other.test gets
  nothing, the Location the client saw carries the placeholder.
- r02: query: true, the key swapped into ?key= reflected in a 302 Location
  to other.test: the client sees the placeholder, the follow-up is 403.
- q01: absolute-form naming other.test inside bound.test's tunnel (Host
  either name): 403 host-mismatch, nothing forwarded.
- q02: userinfo (https://u:PH@host/) in the request target: 400.
- q05: HTTP/2 range / request-range / if-range dropped and accept-encoding
  forced to identity toward an HTTP/1.1 bound origin.
- s03: compressed answers quoting the key under 14 Content-Encoding forms
  (no space, tabs and case, x-gzip, empty list element, leading comma,
  two headers, deflate, br, obs-fold, space before the colon, a parameter,
  quoted, an empty header then gzip): all 502, nothing decompressible.
- s04: HTTP/2 client, HTTP/1.1 origin: a chunked trailer and 103 / Set-Cookie
  values quoting the key are scrubbed (trailer not relayed).
- s05: the sandbox's own Accept-Encoding: gzip / br replaced by identity;
  a gzip request body to the bound echo changes nothing.
- s06: a request log read with no placeholder over plain HTTP (absolute
  form, and HTTP inside CONNECT) and through CONNECT BOUND.TEST /
  Bound.Test.: scrubbed to the placeholder.
- w01: a WebSocket message to other.test with the placeholder cut across
  two fragments and a ping between: the second fragment never arrives.
- w03: the bound origin sends an RSV1 (deflated) frame quoting the key
  after 101: never relayed.
- z99: no encoding of the secret in the gateway log or audit rows.
Also tried, held, not kept (covered elsewhere): placeholder split across
chunks (hold-back, test_credentials) and across HTTP/2 DATA frames
(test_http2); client RSV1 frames (test_wsh2_probe); obs-fold response
header and HEAD answered with a body carrying the key (502 / body dropped;
test_spec_5); CONNECT inside an intercepted tunnel (400); dlp: report with a
stripe-shaped secret swapped into a header, the query and Basic: no finding,
no excerpt of the secret in rows or log.
Not promised (docs/credentials.md "A host that transforms the key"), so
not tests: reversed / hex / line-wrapped base64; base64 then percent- or
JSON-\/-escaped (for ASCII keys only '~', '>' and '?' give base64 '+' or
'/', so rare); a gzip request body holding the placeholder toward other.test
("found as written, not in encodings").
"""

import base64
import gzip
import json
import os
import ssl
import sys
import time
import unittest
import urllib.parse
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import wsframe as W  # noqa: E402
from test_credentials import TestCA, secret_forms  # noqa: E402
from test_websocket_scrub import WsOrigin  # noqa: E402
try:
    import hpack  # noqa: F401
    from test_http2 import H2  # noqa: E402
except ImportError:
    H2 = None
try:
    import brotli
except ImportError:
    brotli = None

ORIGIN_HOST = "127.0.0.2"
SECRET = "sk-cred3/R3al+S3cret~Value_0123456789abcdefXYZqrs"
PH = "PHCRED3-probekey-000000000001"


def leaked(blob):
    """The first encoding of SECRET (or a 12-byte piece of it) in blob."""
    if isinstance(blob, str):
        blob = blob.encode("latin-1", "replace")
    low = blob.lower()
    for form in secret_forms(SECRET):
        if form in blob or form.lower() in low:
            return form
    for k in range(0, len(SECRET) - 11, 6):
        piece = SECRET[k:k + 12].encode()
        if piece in blob:
            return piece
    return None


def decompressions(body):
    """Every way a client could decompress body (attacker's client)."""
    out = []
    for fn in (gzip.decompress, zlib.decompress,
               lambda b: zlib.decompress(b, -15),
               lambda b: zlib.decompressobj(47).decompress(b)):
        try:
            out.append(fn(body))
        except Exception:
            pass
    if brotli is not None:
        try:
            out.append(brotli.decompress(body))
        except Exception:
            pass
    return out


# ---------------------------------------------------------------- origin

class Api(T.ScriptedOrigin):
    """Answers by path; every request recorded (T.ScriptedOrigin)."""

    other_port = 0
    seen = []   # every key seen, by every port of the API (one backend)

    def __init__(self, name, cert, key):
        self.name = name
        super().__init__(cert, key, ORIGIN_HOST)

    def answer(self, req):
        path, hmap = req["path"], req["hmap"]
        auth = hmap.get("authorization", "")
        tok = (auth.split(" ", 1)[1] if " " in auth else auth).encode("latin-1")
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        if "key" in q:
            tok = q["key"][0].encode("latin-1")
        p = path.split("?")[0]
        if tok and "x-amz" not in auth.lower():
            Api.seen.append(tok)
        if p.startswith("/log"):
            # a request log: every key seen, oldest first
            body = b"\n".join(Api.seen) + b"\n"
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body), False
        if p.startswith("/last"):
            # a debug route / request log: the key the API saw last
            body = b"last key: " + (Api.seen[-1] if Api.seen else b"none")
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"X-Last: " + (Api.seen[-1] if Api.seen else b"none") +
                    b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body), False
        if p.startswith("/r307") or p.startswith("/r302"):
            code = b"307 Temporary Redirect" if p.startswith("/r307") else \
                b"302 Found"
            loc = (b"https://other.test:%d/landing?from=bound&tok=" %
                   self.other_port) + urllib.parse.quote(tok, safe="").encode()
            return (b"HTTP/1.1 " + code + b"\r\nLocation: " + loc +
                    b"\r\nContent-Length: 0\r\n\r\n"), False
        if p.startswith("/fold"):
            body = b"ok"
            return (b"HTTP/1.1 200 OK\r\nX-Echo: start\r\n " + tok +
                    b"\r\nContent-Length: 2\r\n\r\n" + body), True
        if p.startswith("/headbody"):
            body = b"key=" + tok + b"\n"
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body), False
        if p.startswith("/ce/"):
            # /ce/<n>: a compressed body quoting the key, header form n
            n = int(p.split("/")[2])
            line, comp = CE_FORMS[n]
            body = comp(b"the key you sent: " + tok + b"\n")
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + line +
                    b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body), True
        if p.startswith("/trail"):
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Transfer-Encoding: chunked\r\nTrailer: X-Tok\r\n\r\n"
                    b"5\r\nhello\r\n0\r\nX-Tok: " + tok + b"\r\n\r\n"), False
        if p.startswith("/early"):
            return (b"HTTP/1.1 103 Early Hints\r\nX-Hint: " + tok +
                    b"\r\nLink: </s.css?k=" + tok + b">; rel=preload\r\n\r\n"
                    b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=" + tok +
                    b"\r\nContent-Length: 2\r\n\r\nok"), False
        if p.startswith("/ws-rsv1"):
            key = hmap.get("sec-websocket-key", "")
            comp = zlib.compressobj(9, zlib.DEFLATED, -15)
            z = comp.compress(b"key:" + tok) + comp.flush(zlib.Z_SYNC_FLUSH)
            z = z[:-4]  # permessage-deflate drops the 00 00 ff ff tail
            fr = bytes([0x80 | 0x40 | W.OP_TEXT, len(z)]) + z
            return (("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" %
                     W.accept_key(key)).encode() + fr +
                    W.encode_frame(W.OP_TEXT, b"plain:" + tok)), True
        if p.startswith("/headecho") and req["method"] == "HEAD":
            # HEAD answered with a body (the request head): wrong, but seen
            body = req["head"]
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body), False
        body = req["head"] + req["body"]
        if req["method"] == "HEAD":
            return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" %
                    len(body)), False
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body), False

    def all_bytes(self, marker=""):
        with self.lock:
            return b"".join(r["head"] + r["body"] for r in self.requests
                            if marker in r["line"])


class _NoTLS:
    def wrap_socket(self, sock, server_side=True):
        return sock


class PlainApi(Api):
    """The same API on a plain-HTTP port (the same backend and log)."""

    def __init__(self, name, cert, key):
        super().__init__(name, cert, key)
        self.ctx = _NoTLS()


def _gz(b):
    return gzip.compress(b)


def _br(b):
    return brotli.compress(b) if brotli else zlib.compress(b)


CE_FORMS = [
    (b"Content-Encoding: gzip", _gz),                       # 0 baseline
    (b"Content-Encoding:gzip", _gz),                        # 1 no space
    (b"Content-Encoding: \tGZip \t", _gz),                  # 2 case, tabs
    (b"Content-Encoding: x-gzip", _gz),                     # 3 alias
    (b"Content-Encoding: identity,,gzip", _gz),             # 4 empty element
    (b"Content-Encoding: ,gzip", _gz),                      # 5 leading comma
    (b"Content-Encoding: identity\r\nContent-Encoding: gzip", _gz),  # 6
    (b"Content-Encoding: deflate", zlib.compress),          # 7
    (b"Content-Encoding: br", _br),                         # 8
    (b"Content-Encoding: identity\r\n gzip", _gz),          # 9 obs-fold
    (b"Content-Encoding : gzip", _gz),                      # 10 space before :
    (b"Content-Encoding: identity;q=1, gzip", _gz),         # 11 parameter
    (b"Content-Encoding: \"gzip\"", _gz),                   # 12 quoted
    (b"X-Other: 1\r\nContent-Encoding:\r\nContent-Encoding: gzip", _gz),  # 13
]


POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{bound}, {plain}]
        tls: intercept
      - host: other.test
        ports: [{other}, {ws}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [probe-key]
credentials:
  - name: probe-key
    secret: probe-secret
    hosts: [bound.test]
    headers: [Authorization]
    query: true
    placeholder: "{ph}"
"""


class Cred3Probe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-cred3-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cert, key = cls.pki.leaf("bound.test", ["bound.test", "other.test"])
        cls.bound = Api("bound", cert, key)
        cls.addClassCleanup(cls.bound.stop)
        cls.other = Api("other", cert, key)
        cls.addClassCleanup(cls.other.stop)
        Api.other_port = cls.other.port
        cls.plain = PlainApi("plain", cert, key)
        cls.addClassCleanup(cls.plain.stop)
        cls.ws = WsOrigin(cert, key)
        cls.addClassCleanup(cls.ws.stop)
        cls.dns = T.Dnsmasq(d, [("bound.test", ORIGIN_HOST),
                                ("other.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(bound=cls.bound.port, other=cls.other.port,
                               ws=cls.ws.port, plain=cls.plain.port, origin=ORIGIN_HOST, ph=PH)
        cls.gw = T.Gateway(d, cls.dns, {"cred3.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.vault_set(("probe-secret", SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = ssl.create_default_context(cafile=cls.gw_ca)
        cls.ctx.set_alpn_protocols(["http/1.1"])

    # ------------------------------------------------------------ helpers

    def port_of(self, host):
        return self.bound.port if host == "bound.test" else self.other.port

    def tls_conn(self, host, port=None):
        port = port or self.port_of(host)
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def req(self, host, raw, method="GET"):
        c = self.tls_conn(host)
        c.send(raw.replace("{HOST}", "%s:%d" % (host, self.port_of(host))))
        try:
            return c.read_response(method)
        except (EOFError, ConnectionResetError, ssl.SSLError, ValueError):
            return None

    def drain(self, c):
        try:
            c.sock.settimeout(2 * T.SLOW)
            return c.read_to_eof()
        except (OSError, ssl.SSLError):
            return c.buf

    def curl(self, url, *args):
        return T.curl(url, proxy=self.gw.url, args=["--cacert", self.gw_ca] +
                      list(args), tmp=self.td.path)

    def curl_seen(self, r):
        return (json.dumps(r.blocks) + r.stderr).encode() + r.body

    def settle(self):
        time.sleep(0.3 * T.SLOW)

    # ------------------------------------------------------------ redirects

    def test_r01_307_to_unbound_host_with_location_trusted(self):
        """
        A bound origin answers 307 to other.test with the key it got in the
        Location query (an OAuth-style redirect); curl -L --location-trusted
        re-sends Authorization to other.test. other.test must get neither
        the secret nor the placeholder; the client sees no secret.
        """
        r = self.curl("https://bound.test:%d/r307/a" % self.bound.port,
                      "-L", "--location-trusted", "-X", "POST", "-d", "x=1",
                      "-H", "Authorization: Bearer " + PH)
        self.assertTrue(self.bound.got(SECRET, "/r307/a"), "control: no swap")
        self.assertIsNone(leaked(self.curl_seen(r)), r)
        self.settle()
        self.assertEqual(self.other.find("/landing"), [],
                         "the follow-up reached other.test: %r" %
                         self.other.all_bytes("/landing"))
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-misuse", r)

    def test_r02_302_query_key_to_unbound_host(self):
        """query: true -- the key swapped into ?key= comes back in a
        Location to other.test; curl -L follows (no Authorization)."""
        r = self.curl("https://bound.test:%d/r302/q?key=%s" % (
            self.bound.port, PH), "-L")
        self.assertTrue(self.bound.got(urllib.parse.quote(SECRET, safe=""),
                                       "/r302/q") or
                        self.bound.got(SECRET, "/r302/q"), "control: no swap")
        self.assertIsNone(leaked(self.curl_seen(r)), r)
        self.settle()
        self.assertEqual(self.other.find("/landing"), [],
                         "the follow-up reached other.test")
        self.assertEqual(r.status, 403, r)

    # ------------------------------------------------------------ request side

    def test_q01_absolute_form_other_host_inside_bound_tunnel(self):
        """Inside bound.test's tunnel, absolute-form naming other.test."""
        for host_hdr in ("other.test:%d" % self.other.port,
                         "bound.test:%d" % self.bound.port):
            raw = ("GET https://other.test:%d/absq HTTP/1.1\r\nHost: %s\r\n"
                   "Authorization: Bearer %s\r\n\r\n" % (
                       self.other.port, host_hdr, PH))
            r = self.req("bound.test", raw)
            self.settle()
            self.assertEqual(self.other.find("/absq"), [], host_hdr)
            if r is not None and r.status == 200:
                self.assertIsNone(leaked(r.raw_head + r.body), r)

    def test_q02_userinfo_in_request_target(self):
        """https://u:PH@host/ in the request target, inside tunnels."""
        r = self.req("other.test", "GET https://u:%s@other.test:%d/ui HTTP/1.1"
                     "\r\nHost: {HOST}\r\n\r\n" % (PH, self.other.port))
        self.settle()
        self.assertFalse(self.other.got(PH, "/ui"), r)
        r = self.req("bound.test", "GET https://u:%s@bound.test:%d/ui HTTP/1.1"
                     "\r\nHost: {HOST}\r\n\r\n" % (PH, self.bound.port))
        if r is not None:
            self.assertIsNone(leaked(r.raw_head + r.body), r)

    @unittest.skipIf(H2 is None, "hpack not installed")
    def test_q05_h2_range_dropped_on_bound_host(self):
        """range / request-range / if-range and accept-encoding: gzip in
        HTTP/2 fields toward the bound host's HTTP/1.1 echo."""
        h = H2(self, "bound.test", self.bound.port)
        h.request(1, "GET", "/echo-h2range", [
            ("authorization", "Bearer " + PH), ("range", "bytes=0-9"),
            ("request-range", "bytes=0-9"), ("if-range", "\"x\""),
            ("accept-encoding", "gzip, br")])
        st, = h.wait(1)
        reqs = self.bound.find("/echo-h2range")
        self.assertTrue(reqs, st)
        hm = reqs[-1]["hmap"]
        for k in ("range", "request-range", "if-range"):
            self.assertNotIn(k, hm, "%s reached the bound host" % k)
        self.assertEqual(hm.get("accept-encoding"), "identity", hm)
        self.assertIsNone(leaked(st["data"]), st)

    # ------------------------------------------------------------ websockets

    def ws_upgrade(self, host, port, path, extra=""):
        c = self.tls_conn(host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        c.send("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n%s\r\n" % (path, host, port, key,
                                                       extra))
        return c, c.read_response()

    def test_w01_ws_fragments_with_ping_between(self):
        """A text message to other.test: PH cut across two fragments with a
        ping between them."""
        c, r = self.ws_upgrade("other.test", self.ws.port, "/w01")
        self.assertEqual(r.status, 101, r)
        c.send(W.client_frame(W.OP_TEXT, b"a=" + PH[:12].encode(), fin=False))
        c.send(W.client_frame(W.OP_PING, b"p"))
        time.sleep(0.2)
        c.send(W.client_frame(W.OP_CONT, PH[12:].encode() + b";"))
        self.drain(c)
        self.settle()
        with self.ws.lock:
            joined = b"".join(self.ws.payloads)
        self.assertNotIn(PH.encode(), joined)
        self.assertNotIn(PH[12:].encode(), joined)

    def test_w03_ws_origin_rsv1_frame_from_bound_host(self):
        """The bound origin answers 101 then sends a frame with RSV1 and a
        deflated payload quoting the key."""
        c, r = self.ws_upgrade("bound.test", self.bound.port, "/ws-rsv1",
                               "Authorization: Bearer %s\r\n" % PH)
        rest = self.drain(c) if r.status == 101 else b""
        self.assertTrue(self.bound.got(SECRET, "/ws-rsv1"), "control: no swap")
        blob = r.raw_head + r.body + rest
        self.assertIsNone(leaked(blob), blob)
        # decompress whatever followed the 101 as a deflate stream
        for k in range(len(rest)):
            try:
                d = zlib.decompressobj(-15).decompress(rest[k:] + b"\0\0\xff\xff")
            except zlib.error:
                continue
            self.assertIsNone(leaked(d), "deflated key relayed: %r" % d)

    def test_s03_content_encoding_forms(self):
        """Every form of a compressed answer quoting the key: none may reach
        the client in a form it can decompress to the key."""
        bad = []
        for n in range(len(CE_FORMS)):
            r = self.req("bound.test", "GET /ce/%d HTTP/1.1\r\nHost: {HOST}\r\n"
                         "Authorization: Bearer %s\r\n\r\n" % (n, PH))
            if r is None:
                continue
            for d in [r.body] + decompressions(r.body):
                if leaked(d):
                    bad.append((n, CE_FORMS[n][0], r.status))
                    break
        self.assertEqual(bad, [], "compressed key relayed")

    @unittest.skipIf(H2 is None, "hpack not installed")
    def test_s04_h2_client_trailers_and_1xx_from_h1_origin(self):
        h = H2(self, "bound.test", self.bound.port)
        h.request(1, "GET", "/trail", [("authorization", "Bearer " + PH),
                                       ("te", "trailers")])
        h.request(3, "GET", "/early", [("authorization", "Bearer " + PH)])
        s1, s3 = h.wait(1, 3)
        self.assertTrue(self.bound.got(SECRET, "/trail"), "control: no swap")
        blob = repr(s1) + repr(s3)
        self.assertIsNone(leaked(blob), blob)

    def test_s05_gzip_request_body_echoed(self):
        """The sandbox sends a gzip body (Content-Encoding: gzip) to the bound
        host's echo; the echo holds its own request head, with the key."""
        body = gzip.compress(b"hello")
        r = self.req("bound.test", "POST /echo-gz HTTP/1.1\r\nHost: {HOST}\r\n"
                     "Authorization: Bearer %s\r\nContent-Encoding: gzip\r\n"
                     "Accept-Encoding: gzip\r\nAccept-Encoding: br\r\n"
                     "Content-Length: %d\r\n\r\n" % (PH, len(body)) +
                     body.decode("latin-1"), "POST")
        self.assertIsNotNone(r)
        self.assertTrue(self.bound.got(SECRET, "/echo-gz"), "control: no swap")
        self.assertIsNone(leaked(r.raw_head + r.body), r)
        hm = self.bound.find("/echo-gz")[-1]["head"].lower()
        self.assertNotIn(b"accept-encoding: gzip", hm)
        self.assertNotIn(b"accept-encoding: br", hm)

    def test_s06_request_log_over_plain_http_and_name_variants(self):
        """
        A request log of the bound API (the key its last swapped call
        carried) read without the placeholder: over intercepted TLS, over
        plain HTTP (absolute form, and HTTP inside CONNECT to the API's
        plain port), and through CONNECT names BOUND.TEST / bound.test.
        (the same host: compared case-insensitively, one trailing dot off).
        "The whole response of a credential's host is scrubbed".
        """
        r = self.req("bound.test", "GET /api/s06 HTTP/1.1\r\nHost: {HOST}\r\n"
                     "Authorization: Bearer %s\r\n\r\n" % PH)
        self.assertTrue(self.bound.got(SECRET, "/api/s06"), "control: no swap")
        pp, pb = self.plain.port, self.bound.port
        seen = []
        seen.append(T.raw_request(self.gw.port, "GET http://bound.test:%d/last "
                                  "HTTP/1.1\r\nHost: bound.test:%d\r\n\r\n" %
                                  (pp, pp)))
        c, rr = T.open_tunnel(self.gw.port, "bound.test:%d" % pp)
        self.addCleanup(c.close)
        self.assertEqual(rr.status, 200, rr)
        c.send("GET /last HTTP/1.1\r\nHost: bound.test:%d\r\n\r\n" % pp)
        seen.append(c.read_response())
        for name in ("bound.test", "BOUND.TEST", "Bound.Test."):
            c, rr = T.open_tunnel(self.gw.port, "%s:%d" % (name, pb))
            self.addCleanup(c.close)
            self.assertEqual(rr.status, 200, rr)
            c.sock = self.ctx.wrap_socket(c.sock, server_hostname="bound.test")
            c.send("GET /last HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name, pb))
            seen.append(c.read_response())
        for r in seen:
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 200, r)
            self.assertIsNone(leaked(r.raw_head + r.body), r)
            self.assertIn(PH.encode(), r.body, r)

    # ------------------------------------------------------------ log

    def test_z99_no_secret_in_log_or_audit(self):
        """After the rest: no encoding of the secret in the log or audit."""
        time.sleep(0.5 * T.SLOW)
        log = self.gw.log_text()
        self.assertIsNone(leaked(log), "the secret is in the gateway log")
        rows = json.dumps(self.gw.audit_rows())
        self.assertIsNone(leaked(rows), "the secret is in the audit log")
        self.assertFalse(self.other.got(SECRET), "the secret reached other.test")
        with self.ws.lock:
            self.assertFalse(any(SECRET.encode() in p for p in self.ws.payloads))


# ---------------------------------------------------------------- rotation

NEW_SECRET = "sk-cred3-ROTATED-new-value-9876543210zyxwvu"
ALT_SECRET = "sk-cred3-OTHER-ENTRY-value-5555544444abcdxyz"


class Cred3RotationProbe(unittest.TestCase):
    """A gateway of its own: the vault value changes under it."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-cred3rot-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cert, key = cls.pki.leaf("bound.test", ["bound.test", "other.test"])
        cls.bound = Api("bound", cert, key)
        cls.addClassCleanup(cls.bound.stop)
        cls.dns = T.Dnsmasq(d, [("bound.test", ORIGIN_HOST),
                                ("other.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.policy = POLICY.format(bound=cls.bound.port, other=cls.bound.port,
                                   ws=cls.bound.port, plain=cls.bound.port,
                                   origin=ORIGIN_HOST, ph=PH)
        cls.gw = T.Gateway(d, cls.dns, {"cred3.yaml": cls.policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.vault_set(("probe-secret", SECRET), ("alt-secret", ALT_SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = ssl.create_default_context(cafile=cls.gw.ca_path())
        cls.ctx.set_alpn_protocols(["http/1.1"])

    def setUp(self):
        del Api.seen[:]

    def get(self, path, auth=True):
        c, r = T.open_tunnel(self.gw.port, "bound.test:%d" % self.bound.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="bound.test")
        c.send("GET %s HTTP/1.1\r\nHost: bound.test:%d\r\n%s\r\n" % (
            path, self.bound.port,
            "Authorization: Bearer %s\r\n" % PH if auth else ""))
        return c.read_response()

    def wait_swapped(self, value, tag):
        """Swapped calls until the origin gets value (the change is live)."""
        deadline = time.monotonic() + 5 * T.SLOW
        n = 0
        while time.monotonic() < deadline:
            n += 1
            marker = "/api/%s-%d" % (tag, n)
            self.assertEqual(self.get(marker).status, 200)
            if self.bound.got(value, marker):
                return
            time.sleep(0.1)
        self.fail("%s not in force after 5 s" % tag)

    def test_f01_previous_value_after_vault_rotate(self):
        """
        docs/credentials.md "Rotation": `vault rotate` swaps in the new value
        for new requests; "Revoke the old key at the provider afterwards" --
        so the old key is still valid at the provider for a while. Threat
        model: "Reading the key back from the API. An echo endpoint ... a
        debugging route: the secret in response headers or body comes back
        as the placeholder". The OAuth2 section closes the same window for
        the access token a refresh replaced ("the scrubber keeps looking
        for it until then ... before, an answer that quoted an earlier
        request gave it back raw").

        Sent: one swapped call (the API's request log keeps the key), then
        `sandgate vault rotate probe-secret`, calls until the new value is
        swapped in, then GET /log (no placeholder) -- a request log, as
        test_scrub_probe uses.
        Observed: the new value comes back as the placeholder, the previous
        one raw -- a live key in the sandbox's hands.
        """
        self.assertEqual(self.get("/api/before").status, 200)
        self.assertTrue(self.bound.got(SECRET, "/api/before"), "control")
        r = T.run_sandgate("vault", "rotate", "probe-secret", "-c",
                           self.gw.cfg_path, input=NEW_SECRET)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_swapped(NEW_SECRET, "rot")
        r = self.get("/log", auth=False)
        self.assertEqual(r.status, 200, r)
        self.assertNotIn(NEW_SECRET.encode(), r.body, "control: new value")
        self.assertIn(PH.encode(), r.body, "control: new value scrubbed")
        self.assertIsNone(leaked(r.raw_head + r.body),
                          "the previous (still valid) key came back raw after "
                          "vault rotate: %r" % r.body)

    def test_f02_previous_value_kept_through_reload_then_next_rotation(self):
        """
        Variants of f01 (run after it: the value in force is NEW_SECRET).
        A policy reload (SIGHUP) between a rotation and the answer keeps the
        previous value scrubbed (it is carried, not re-read); a second
        rotation makes NEW_SECRET the previous one: scrubbed too, and the
        value in force is the placeholder as ever.
        """
        third = "sk-cred3-THIRD-value-ABCDEFGH11223344"
        self.wait_swapped(NEW_SECRET, "cur")
        self.gw.reload()
        time.sleep(0.5 * T.SLOW)
        r = T.run_sandgate("vault", "rotate", "probe-secret", "-c",
                           self.gw.cfg_path, input=third)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_swapped(third, "rot3")
        self.gw.reload()
        time.sleep(0.5 * T.SLOW)
        r = self.get("/log", auth=False)
        self.assertEqual(r.status, 200, r)
        self.assertIn(PH.encode(), r.body, "control")
        self.assertNotIn(third.encode(), r.body)
        self.assertNotIn(NEW_SECRET.encode(), r.raw_head + r.body,
                         "the value before the last rotation came back raw")


if __name__ == "__main__":
    T.main()
