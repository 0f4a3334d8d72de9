#!/usr/bin/python3
"""
Header probes (SPEC §4/§5 HTTP proxy, §7 credentials; docs/protocols.md
"Forwarding", "Framing is the gateway's own"): what a sandbox can make the
gateway forward to an origin, add, drop or leak. Every origin here records
every byte it reads off its socket (trailers included) and echoes the
request head back in its body.

Tried (H = holds on the current binary, F = finding -- failed then, fixed
now: a request's trailers are not forwarded --, N = no promise):
- H Proxy-Authorization (Basic token) never reaches the origin in absolute
  form: canonical, lower, upper case, no space after ':', listed in
  Connection:, inside a WebSocket upgrade request.
- H a second Proxy-Authorization -> 407 proxy-auth-failed, nothing forwarded.
- H "Proxy-Authorization : ..." (space before ':') -> 400, nothing forwarded.
- H plain HTTP inside a CONNECT tunnel: the inner request's
  Proxy-Authorization is dropped.
- H HTTP/2 "proxy-authorization" field in an intercepted h2 stream is
  dropped before the HTTP/1.1 origin.
- H Connection: Host, Content-Length, Transfer-Encoding, Upgrade, Via, TE
  cannot strip Host, the body length or the gateway's Via.
- H Connection: Accept-Encoding on a bound host: the gateway's
  "Accept-Encoding: identity" still goes out.
- H Connection: <custom> drops that header (hop-by-hop honoured).
- H TRACE to an echoing bound host: the swapped secret is reflected by the
  origin but comes back to the sandbox as the placeholder.
- H 128 header fields forwarded; 129 -> 431 header-too-large.
- H odd but valid tchar names forwarded as written; a name with '(' or '"'
  -> 400.
- H Upgrade: h2c forwarded without Upgrade and HTTP2-Settings.
- F chunked request trailers went to the origin as sent: a trailer
  "Proxy-Authorization: Basic <the sandbox's token>" reaches the origin
  (HTTP/1.1 absolute form, and an intercepted HTTP/2 stream's trailers
  turned into chunked trailers), and so do trailer fields named by the
  request's Connection header and Keep-Alive / TE / Connection /
  Transfer-Encoding / Host trailers
  (test_trailer_proxy_authorization_reaches_origin,
  test_trailer_hop_by_hop_fields_reach_origin); and on a bound host
  (exclusive) a trailer "Authorization: Bearer <own key>" goes out next to
  the swapped secret, where the same header is refused foreign-credential
  (test_trailer_foreign_credential_reaches_bound_host).
- H a placeholder in Proxy-Authorization or in a header Connection names
  (dropped, never forwarded) is still refused credential-misuse.
- H Upgrade other than websocket on an intercepted connection -> 403
  upgrade-refused; h2c offer dropped there too.
- H an HTTP/2 "host" field differing from :authority -> 403 host-mismatch;
  CR/LF in an h2 field value, a space in a name, proxy-connection ->
  RST_STREAM before anything is forwarded.
- H absolute-form URL with userinfo (http://user:pass@host/) -> 400.
- H Expect: 100-continue is forwarded; the gateway sends no 100 itself and
  relays the body when the client sends it.
- N Forwarded / X-Forwarded-For / X-Real-IP from the sandbox are passed
  through unchanged (end-to-end headers, as documented); the gateway adds
  none of its own. Max-Forwards: 0 on TRACE/OPTIONS is forwarded (RFC 9110
  §7.6.2 wants the proxy to answer itself; docs are silent). Via loops
  (20 x "Via: 1.1 sandgate") are forwarded with one more Via appended: no
  loop detection (docs are silent). An HTTP/1.0 request with
  "Upgrade: websocket" goes out as an upgrade (Connection: upgrade; RFC
  9110 §7.8 has servers ignore Upgrade in 1.0). Lines marked H/N above
  without a test here were tried by hand only.
"""

import base64
import os
import ssl
import sys
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
    from test_http2 import H2  # noqa: E402

HOST = "127.0.0.2"
SECRET = "sk-hdrprobe-Secret-0123456789abcdefXYZ"
PH = "sgtest-hdrprobe-placeholder-0001"
TOKEN = "hdrprobe-token-0123456789abcdef"
BASIC = base64.b64encode(("tok:%s" % TOKEN).encode()).decode()
UNKNOWN_SRC = "127.0.0.9"   # no sandbox owns it: the token decides

POLICY = """\
sandboxes:
  - id: local
    policy: hdr
    source: [127.0.0.1/32]
  - id: tok
    policy: hdr
    token_sha256: {tsha}
policies:
  - name: hdr
    allow:
      - host: pr.test
        ports: [{pr}]
      - host: mitm.test
        ports: [{mitm}]
        tls: intercept
      - host: bound.test
        ports: [{bound}]
        tls: intercept
        methods: [GET, POST, TRACE, OPTIONS]
    allow_private: [{host}/32]
    credentials: [key]
credentials:
  - name: key
    secret: key-secret
    hosts: [bound.test]
    placeholder: "{ph}"
"""


class _Rec:
    """A socket reader that keeps every byte it read."""

    def __init__(self, sock, sink):
        self.s, self.sink, self.buf = sock, sink, b""

    def _fill(self):
        b = self.s.recv(65536)
        if not b:
            raise EOFError
        self.sink(b)
        self.buf += b

    def until(self, sep):
        while sep not in self.buf:
            if len(self.buf) > 1 << 20:
                raise EOFError
            self._fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


class EchoOrigin(T.Listener):
    """HTTP/1.1 origin (plain or TLS): records raw bytes per connection,
    answers every request with its own head (the bytes it got) as body."""

    def __init__(self, cert=None, key=None):
        self.ctx = None
        if cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
        self.raw = []
        self.heads = []
        super().__init__(HOST, backlog=32)

    def accepted(self, c, idx):
        self.raw.append(b"")

    def _sink(self, idx):
        def f(b):
            with self.lock:
                self.raw[idx] += b
        return f

    def serve(self, c, idx):
        c.settimeout(15)
        if self.ctx is not None:
            c = self.ctx.wrap_socket(c, server_side=True)
        r = _Rec(c, self._sink(idx))
        while True:
            head = r.until(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            hm = {}
            for l in lines[1:]:
                if ":" in l:
                    k, v = l.split(":", 1)
                    hm[k.strip().lower()] = v.strip()
            with self.lock:
                self.heads.append(head)
            if "chunked" in hm.get("transfer-encoding", "").lower():
                while True:
                    line = r.until(b"\r\n")
                    n = int(line.split(b";")[0].strip(), 16)
                    if n == 0:
                        while r.until(b"\r\n") != b"\r\n":
                            pass
                        break
                    r.exact(n + 2)
            elif "content-length" in hm:
                r.exact(int(hm["content-length"]))
            body = head
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def all_bytes(self):
        with self.lock:
            return b"".join(self.raw)

    def last_head(self):
        with self.lock:
            return self.heads[-1] if self.heads else None

    def heads_with(self, needle):
        with self.lock:
            return [h for h in self.heads if needle in h]


def head_fields(head):
    out = []
    for l in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            out.append((k.strip().lower(), v.strip()))
    return out


class HdrProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-hdr-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("mitm.test", ["mitm.test", "bound.test"])
        cls.pr = EchoOrigin()
        cls.mitm = EchoOrigin(crt, key)
        cls.bound = EchoOrigin(crt, key)
        for o in (cls.pr, cls.mitm, cls.bound):
            cls.addClassCleanup(o.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in (
            "pr.test", "mitm.test", "bound.test")])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(pr=cls.pr.port, mitm=cls.mitm.port,
                               bound=cls.bound.port, host=HOST, ph=PH,
                               tsha=T.sha256_hex(TOKEN))
        cls.gw = T.Gateway(d, cls.dns, {"hdr.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        r = T.run_sandgate("vault", "set", "key-secret", "-c",
                           cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = cls.gw.client_context()
        cls.gw_ca = cls.gw.ca_path()

    # ------------------------------------------------------------ helpers

    def conn(self, source=None):
        c = T.Conn(self.gw.port, source=source)
        self.addCleanup(c.close)
        return c

    def try_read(self, c, method="GET"):
        try:
            return c.read_response(method)
        except (EOFError, OSError, ValueError, ssl.SSLError):
            return None

    @property
    def prh(self):
        return "pr.test:%d" % self.pr.port

    def tls_tunnel(self, host, port):
        c = self.conn()
        c.send("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
               (host, port, host, port))
        r = c.read_response("CONNECT")
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.buf = b""
        return c

    def assert_no_token(self, origin):
        raw = origin.all_bytes()
        self.assertNotIn(TOKEN.encode(), raw)
        self.assertNotIn(BASIC.encode(), raw)
        self.assertNotIn(b"proxy-authorization", raw.lower())

    # ------------------------------------------- Proxy-Authorization

    def test_proxy_authorization_never_forwarded_absolute_form(self):
        """
        docs/protocols.md "Forwarding": the origin gets "not the hop-by-hop
        headers (... Proxy-Authorization ...)". The token sandbox's
        request, in every spelling, is allowed and its token is nowhere in
        the origin's bytes. Holds.
        """
        variants = [
            "Proxy-Authorization: Basic %s\r\n" % BASIC,
            "proxy-authorization: Basic %s\r\n" % BASIC,
            "PROXY-AUTHORIZATION: Basic %s\r\n" % BASIC,
            "Proxy-Authorization:Basic %s  \r\n" % BASIC,
            "Proxy-Authorization: Basic %s\r\nConnection: "
            "Proxy-Authorization\r\n" % BASIC,
            "Connection: keep-alive, proxy-authorization\r\n"
            "Proxy-Authorization: Basic %s\r\n" % BASIC,
            # a WebSocket offer: forwarded as a request like any other
            "Proxy-Authorization: Basic %s\r\nConnection: Upgrade, "
            "Proxy-Authorization\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
            "dGhlIHNhbXBsZSBub25jZQ==\r\n" % BASIC,
        ]
        for i, v in enumerate(variants):
            with self.subTest(i=i):
                c = self.conn(UNKNOWN_SRC)
                c.send("GET http://%s/pa-%d HTTP/1.1\r\nHost: %s\r\n%s"
                       "Connection: close\r\n\r\n" % (self.prh, i, self.prh, v)
                       if "Connection:" not in v else
                       "GET http://%s/pa-%d HTTP/1.1\r\nHost: %s\r\n%s\r\n"
                       % (self.prh, i, self.prh, v))
                r = self.try_read(c)
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 200, r)
                self.assertTrue(self.pr.heads_with(b"/pa-%d " % i))
        self.assert_no_token(self.pr)

    def test_proxy_authorization_refusals_forward_nothing(self):
        """
        docs/protocols.md: Proxy-Authorization "sent twice" -> 407
        proxy-auth-failed; a name with whitespace before ':' is an invalid
        token -> 400. "nothing of a refused request is forwarded". Holds.
        """
        cases = [
            ("Proxy-Authorization: Basic %s\r\nProxy-Authorization: Bearer x"
             "\r\n" % BASIC, 407),
            ("Proxy-Authorization: Basic %s\r\nproxy-authorization: Basic %s"
             "\r\n" % (BASIC, BASIC), 407),
            ("Proxy-Authorization : Basic %s\r\n" % BASIC, 400),
            ("Proxy-Authorization\t: Basic %s\r\n" % BASIC, 400),
        ]
        for i, (v, st) in enumerate(cases):
            with self.subTest(i=i):
                c = self.conn(UNKNOWN_SRC)
                c.send("GET http://%s/par-%d HTTP/1.1\r\nHost: %s\r\n%s\r\n"
                       % (self.prh, i, self.prh, v))
                r = self.try_read(c)
                self.assertIsNotNone(r)
                self.assertEqual(r.status, st, r)
        time.sleep(0.3 * T.SLOW)
        self.assertEqual(self.pr.heads_with(b"/par-"), [])
        self.assert_no_token(self.pr)

    def test_proxy_authorization_in_tunnel_dropped(self):
        """
        Plain HTTP inside a CONNECT tunnel is "handled request by request as
        plain HTTP" (SPEC §4): the inner request's Proxy-Authorization is
        hop-by-hop and dropped like in absolute form. Holds.
        """
        c = self.conn(UNKNOWN_SRC)
        c.send("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: "
               "Basic %s\r\n\r\n" % (self.prh, self.prh, BASIC))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        c.send("GET /tun-pa HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: "
               "Basic %s\r\nConnection: close\r\n\r\n" % (self.prh, BASIC))
        r = self.try_read(c)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.pr.heads_with(b"/tun-pa "))
        self.assert_no_token(self.pr)

    @unittest.skipIf(hpack is None, "python3-hpack is not installed")
    def test_h2_proxy_authorization_field_dropped(self):
        """
        An intercepted HTTP/2 stream carrying a "proxy-authorization"
        field (not one RFC 9113 forbids): the HTTP/1.1 origin must not get
        it (hop-by-hop, docs/protocols.md). Holds.
        """
        h = H2(self, "mitm.test", self.mitm.port)
        if h.alpn != "h2":
            self.skipTest("no h2 from the gateway")
        h.request(1, path="/h2-pa", extra=[
            ("proxy-authorization", "Basic %s" % BASIC),
            ("x-probe", "1")])
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)
        self.assertTrue(self.mitm.heads_with(b"/h2-pa "))
        self.assert_no_token(self.mitm)

    # ------------------------------------------- Connection nominations

    def test_connection_cannot_strip_framing_host_or_via(self):
        """
        SPEC §4: "Connection cannot nominate Content-Length,
        Transfer-Encoding, Host or Upgrade"; docs/protocols.md: the origin
        gets Via: 1.x sandgate. A POST naming them all (and Via, TE) in
        Connection: the origin still gets Host, the body by its length, and
        the gateway's Via. A custom header Connection names is dropped.
        Holds.
        """
        body = "a=1&b=2"
        c = self.conn()
        c.send("POST http://%s/conn-nom HTTP/1.1\r\nHost: %s\r\n"
               "Connection: Host, Content-Length, Transfer-Encoding, Via, TE,"
               " Upgrade, X-Drop-Me\r\nX-Drop-Me: 1\r\nTE: trailers\r\n"
               "Content-Length: %d\r\n\r\n%s" % (self.prh, self.prh,
                                                 len(body), body))
        r = self.try_read(c, "POST")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        h = self.pr.heads_with(b"/conn-nom ")
        self.assertEqual(len(h), 1)
        f = head_fields(h[0])
        names = [k for k, _ in f]
        self.assertIn(("host", self.prh), f)
        self.assertIn(("content-length", str(len(body))), f)
        self.assertIn(("via", "1.1 sandgate"), f)
        self.assertNotIn("x-drop-me", names)
        self.assertNotIn("te", names)
        self.assertIn(body.encode(), self.pr.all_bytes())

    def test_connection_accept_encoding_on_bound_host(self):
        """
        docs/credentials.md: "Requests to bound hosts ask for
        Accept-Encoding: identity". Connection: Accept-Encoding (and
        Connection: Authorization) must not remove the gateway's own
        Accept-Encoding: identity; the placeholder never reaches the origin
        and the secret never reaches the client. Holds.
        """
        c = self.tls_tunnel("bound.test", self.bound.port)
        c.send("GET /ae-conn HTTP/1.1\r\nHost: bound.test:%d\r\n"
               "Authorization: Bearer %s\r\nAccept-Encoding: gzip\r\n"
               "Connection: Accept-Encoding, Authorization\r\n\r\n"
               % (self.bound.port, PH))
        r = self.try_read(c)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        h = self.bound.heads_with(b"/ae-conn ")
        self.assertEqual(len(h), 1)
        f = head_fields(h[0])
        self.assertIn(("accept-encoding", "identity"), f)
        self.assertNotIn(("accept-encoding", "gzip"), f)
        self.assertNotIn(PH.encode(), self.bound.all_bytes())
        self.assertNotIn(SECRET.encode(), r.body)

    # ------------------------------------------- TRACE, counts, names

    def test_trace_echo_on_bound_host_is_scrubbed(self):
        """
        SPEC §7: "the secret in response headers or body ... comes back to
        the sandbox as the placeholder". TRACE (allowed by the rule) to an
        origin that echoes the request head, Max-Forwards: 0 included: the
        origin got the swapped secret; the sandbox sees only the
        placeholder. Holds.
        """
        for i, (m, extra) in enumerate([("TRACE", ""),
                                        ("TRACE", "Max-Forwards: 0\r\n"),
                                        ("OPTIONS", "Max-Forwards: 0\r\n")]):
            with self.subTest(m=m, extra=extra):
                c = self.tls_tunnel("bound.test", self.bound.port)
                c.send("%s /trace-%d HTTP/1.1\r\nHost: bound.test:%d\r\n"
                       "Authorization: Bearer %s\r\n%s\r\n"
                       % (m, i, self.bound.port, PH, extra))
                r = self.try_read(c, m)
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 200, r)
                self.assertNotIn(SECRET.encode(), r.body)
                self.assertIn(PH.encode(), r.body)
        self.assertIn(SECRET.encode(), self.bound.all_bytes())

    def test_header_count_limit(self):
        """
        docs/protocols.md: "more than 128 header fields" -> 431
        header-too-large, never forwarded; 128 fields go out. Holds.
        """
        for n, st in ((128, 200), (129, 431)):
            with self.subTest(n=n):
                hs = "".join("X-H%d: v\r\n" % i for i in range(n - 1))
                c = self.conn()
                c.send("GET http://%s/hcount-%d HTTP/1.1\r\nHost: %s\r\n%s"
                       "\r\n" % (self.prh, n, self.prh, hs))
                r = self.try_read(c)
                self.assertIsNotNone(r)
                self.assertEqual(r.status, st, r)
        time.sleep(0.3 * T.SLOW)
        self.assertEqual(len(self.pr.heads_with(b"/hcount-128 ")), 1)
        self.assertEqual(self.pr.heads_with(b"/hcount-129 "), [])

    def test_odd_header_names(self):
        """
        docs/protocols.md: "invalid tokens" -> 400 bad-request, never
        forwarded. Names of valid tchars go out as written. Holds.
        """
        c = self.conn()
        c.send("GET http://%s/odd-ok HTTP/1.1\r\nHost: %s\r\n"
               "X!#$%%&'*+-.^_`|~: v\r\n\r\n" % (self.prh, self.prh))
        r = self.try_read(c)
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"\r\nX!#$%&'*+-.^_`|~: v\r\n",
                      self.pr.heads_with(b"/odd-ok ")[0])
        for i, name in enumerate(["X(a)", 'X"q"', "X{a}", "X a", "X/a",
                                  "X@a", "X\x7fa", "X\xe9a", ":x"]):
            with self.subTest(name=name):
                c = self.conn()
                c.send("GET http://%s/odd-%d HTTP/1.1\r\nHost: %s\r\n%s: v"
                       "\r\n\r\n" % (self.prh, i, self.prh, name))
                r = self.try_read(c)
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 400, r)
        time.sleep(0.3 * T.SLOW)
        self.assertEqual([h for h in self.pr.heads_with(b"/odd-")
                          if b"/odd-ok " not in h], [])

    def test_h2c_offer_dropped(self):
        """
        docs/protocols.md: "An h2c offer (Upgrade: h2c) is forwarded as a
        plain HTTP/1.1 request without Upgrade and HTTP2-Settings". Holds.
        """
        c = self.conn()
        c.send("GET http://%s/h2c-off HTTP/1.1\r\nHost: %s\r\nConnection: "
               "Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: "
               "AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" % (self.prh, self.prh))
        r = self.try_read(c)
        self.assertEqual(r.status, 200, r)
        names = [k for k, _ in head_fields(self.pr.heads_with(
            b"/h2c-off ")[0])]
        self.assertNotIn("upgrade", names)
        self.assertNotIn("http2-settings", names)

    def test_trailer_proxy_authorization_reaches_origin(self):
        """
        FINDING. docs/protocols.md "Forwarding": the origin gets "every
        end-to-end header ... and not the hop-by-hop headers (Connection
        and the headers it names, Keep-Alive, Proxy-Connection,
        Proxy-Authorization, ...)"; SPEC §5 "hop-by-hop headers removed".
        Sent (from a source no sandbox owns, token sandbox tok):
          POST http://pr.test:P/trl-pa HTTP/1.1 / Host / Proxy-Authorization:
          Basic <tok:TOKEN> / Transfer-Encoding: chunked / Trailer:
          Proxy-Authorization, body "3 abc 0" then the trailer field
          "Proxy-Authorization: Basic <tok:TOKEN>".
        Observed: 200, allow row; the origin's bytes end with
        "0\r\nProxy-Authorization: Basic dG9rOmhk...\r\n\r\n": the
        sandbox's gateway token reaches the origin. The same through an
        intercepted HTTP/2 stream: a trailing HEADERS frame with
        "proxy-authorization" is written to the HTTP/1.1 origin as a
        chunked trailer (docs/protocols.md: request trailers are "forwarded
        as chunked trailers").
        """
        c = self.conn(UNKNOWN_SRC)
        c.send("POST http://%s/trl-pa HTTP/1.1\r\nHost: %s\r\n"
               "Proxy-Authorization: Basic %s\r\nTransfer-Encoding: chunked"
               "\r\nTrailer: Proxy-Authorization\r\n\r\n3\r\nabc\r\n0\r\n"
               "Proxy-Authorization: Basic %s\r\n\r\n"
               % (self.prh, self.prh, BASIC, BASIC))
        r = self.try_read(c, "POST")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        rows = self.gw.wait_audit(path="/trl-pa")
        self.assertEqual((rows[-1]["sandbox"], rows[-1]["decision"]),
                         ("tok", "allow"), rows)
        if hpack is not None:
            from test_smuggle_probe import frame, HEADERS, DATA, \
                END_HEADERS, END_STREAM
            h = H2(self, "mitm.test", self.mitm.port)
            if h.alpn == "h2":
                blk = h.block(1, "POST", "/trl-h2")
                h.send(frame(HEADERS, END_HEADERS, 1, blk))
                h.send(frame(DATA, 0, 1, b"abc"))
                h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                             h.enc.encode([("proxy-authorization",
                                            "Basic " + BASIC)])))
                st, = h.wait(1)
                self.assertEqual(H2.status(st), 200, st)
        time.sleep(0.3 * T.SLOW)
        for name, o, mark in (("http/1.1 absolute form", self.pr, b"/trl-pa "),
                              ("intercepted h2 stream", self.mitm,
                               b"/trl-h2 ")):
            with self.subTest(path=name):
                raw = o.all_bytes()
                i = raw.find(mark)
                self.assertGreaterEqual(i, 0, "request not forwarded")
                self.assertNotIn(BASIC.encode(), raw[i:])
                self.assertNotIn(b"proxy-authorization", raw[i:].lower())

    def test_trailer_hop_by_hop_fields_reach_origin(self):
        """
        FINDING. docs/protocols.md "Forwarding": not forwarded are
        "Connection and the headers it names, Keep-Alive, ..., TE, ...,
        Transfer-Encoding"; RFC 9110 §7.6.1: an intermediary removes "any
        header or trailer field(s)" named by Connection. Sent:
          POST http://pr.test:P/trl-hop / Connection: X-Hop /
          Transfer-Encoding: chunked, body "3 abc 0", trailers
          "X-Hop: 1", "Keep-Alive: 5", "TE: gzip", "Connection: close",
          "Transfer-Encoding: chunked", "Host: evil.test".
        Observed: 200 (allow row) and every one of those trailer fields in
        the origin's bytes, unchanged: only the header section is filtered
        (src/exchange/proxy_forward.c: "Trailer fields go on as sent").
        """
        c = self.conn()
        c.send("POST http://%s/trl-hop HTTP/1.1\r\nHost: %s\r\n"
               "Connection: X-Hop\r\nTransfer-Encoding: chunked\r\n\r\n"
               "3\r\nabc\r\n0\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nTE: gzip\r\n"
               "Connection: close\r\nTransfer-Encoding: chunked\r\n"
               "Host: evil.test\r\n\r\n" % (self.prh, self.prh))
        r = self.try_read(c, "POST")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        time.sleep(0.3 * T.SLOW)
        raw = self.pr.all_bytes()
        i = raw.find(b"POST /trl-hop ")
        self.assertGreaterEqual(i, 0)
        body = raw[i:].split(b"\r\n\r\n", 1)[1]
        tail = body[:body.find(b"\r\n\r\n") + 4].lower()   # chunks+trailers
        for f in (b"x-hop:", b"keep-alive:", b"te:", b"connection:",
                  b"transfer-encoding:", b"host:"):
            with self.subTest(field=f):
                self.assertNotIn(b"\r\n" + f, tail)

    def test_trailer_foreign_credential_reaches_bound_host(self):
        """
        FINDING (same root: trailers go on as sent). docs/credentials.md:
        "With exclusive: true (the default), a request to a bound host that
        carries some other value in the credential's headers is blocked
        (foreign-credential)"; SPEC §7 likewise. The header form is refused
        (checked here first). Sent inside the intercepted tunnel to
        bound.test:
          POST /trl-foreign / Authorization: Bearer <placeholder> /
          Transfer-Encoding: chunked, body "3 abc 0", trailer
          "Authorization: Bearer sk-attacker-own-key-1234567890".
        Observed: 200, and the origin gets the swapped secret in the
        header and the sandbox's own key as a trailer field (trailers are
        searched for placeholders only: proxy_forward.c
        trailer_has_placeholder()). Impact depends on an origin reading
        credentials from trailers (few do).
        """
        own = "sk-attacker-own-key-1234567890"
        c = self.tls_tunnel("bound.test", self.bound.port)
        c.send("GET /hdr-foreign HTTP/1.1\r\nHost: bound.test:%d\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (self.bound.port, own))
        r = self.try_read(c)
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (403, "foreign-credential"), r)
        c = self.tls_tunnel("bound.test", self.bound.port)
        c.send("POST /trl-foreign HTTP/1.1\r\nHost: bound.test:%d\r\n"
               "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n"
               "\r\n3\r\nabc\r\n0\r\nAuthorization: Bearer %s\r\n\r\n"
               % (self.bound.port, PH, own))
        r = self.try_read(c, "POST")
        time.sleep(0.3 * T.SLOW)
        self.assertNotIn(own.encode(), self.bound.all_bytes(),
                         "own key reached the bound host (status %s)" %
                         (r and r.status))

    def test_spoofable_forwarding_headers_observed(self):
        """
        No promise either way (docs/protocols.md: "every end-to-end
        header"): the sandbox's Forwarded / X-Forwarded-For / X-Real-IP go
        out unchanged and the gateway adds none; Via loops are not
        detected. Recorded so a change is noticed.
        """
        c = self.conn()
        c.send("GET http://%s/fwd HTTP/1.1\r\nHost: %s\r\n"
               "Forwarded: for=198.18.0.9;by=sandgate\r\nX-Forwarded-For: "
               "198.18.0.9\r\nX-Real-IP: 198.18.0.9\r\n%s\r\n"
               % (self.prh, self.prh, "Via: 1.1 sandgate\r\n" * 20))
        r = self.try_read(c)
        self.assertEqual(r.status, 200, r)
        f = head_fields(self.pr.heads_with(b"/fwd ")[0])
        self.assertIn(("x-forwarded-for", "198.18.0.9"), f)
        self.assertEqual(len([1 for k, _ in f if k == "x-forwarded-for"]), 1)
        self.assertEqual(len([1 for k, _ in f if k == "via"]), 21)


if __name__ == "__main__":
    T.main()
