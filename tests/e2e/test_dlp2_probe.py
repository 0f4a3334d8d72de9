#!/usr/bin/python3
"""
Second probe of outbound secret detection (docs/dlp.md) under
`dlp: {mode: block}`: evasions tried by sending, each kept as a test that
asserts what docs/dlp.md promises. The tests whose docstring starts
FINDING fail on the binary they were written against: a secret reached
the origin, or a benign request was refused. The others are evasions
that held, kept because no other test sends them.

The origins here record every byte they receive (RawOrigin), so a secret
that reaches them in any framing is seen.
"""

import base64
import binascii
import json
import os
import socket
import ssl
import sys
import threading
import time
import unittest
import urllib.parse
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA  # noqa: E402
from test_http2 import H2, frame, HEADERS, END_HEADERS, \
    END_STREAM  # noqa: E402

API_HOST = "127.0.0.2"      # api.test, plain.test
DOCS_HOST = "127.0.0.4"     # docs.test
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
AWS_ALPHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
DOCS_SECRET = "docs-bound-Sekret-Qm7Tz2Lw9"     # bound to docs.test only

_rng_state = [0x5EED]


def rand(n, alphabet=B62):
    out = []
    for _ in range(n):
        _rng_state[0] = (_rng_state[0] * 1103515245 + 12345) & 0x7fffffff
        out.append(alphabet[(_rng_state[0] >> 8) % len(alphabet)])
    return "".join(out)


def aws_key():
    return "AKIA" + rand(16, AWS_ALPHA)


def github_token(prefix="ghp_"):
    body = rand(30)
    crc = binascii.crc32(body.encode()) & 0xffffffff
    digits = ""
    for _ in range(6):
        digits = B62[crc % 62] + digits
        crc //= 62
    return prefix + body + digits


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt():
    return "%s.%s.%s" % (b64u(b'{"alg":"HS256","typ":"JWT"}'),
        b64u(b'{"sub":"1234567890","name":"A"}'), rand(43, B62 + "-_"))


class RawOrigin:
    """HTTP/1.1 (TLS when cert given) on host: records every byte it
    receives; answers each request 200 "ok" once its body (Content-Length
    or chunked) is in; answers Expect: 100-continue with a 100 first."""

    def __init__(self, host, cert=None, key=None):
        self.ctx = None
        if cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.data = b""
        self.conns = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,),
                daemon=True).start()

    def _serve(self, c):
        c.settimeout(15)
        buf = [b""]
        try:
            if self.ctx:
                c = self.ctx.wrap_socket(c, server_side=True)

            def fill():
                b = c.recv(65536)
                if not b:
                    raise EOFError
                with self.lock:
                    self.data += b
                buf[0] += b

            def until(sep):
                while sep not in buf[0]:
                    fill()
                i = buf[0].index(sep) + len(sep)
                out, buf[0] = buf[0][:i], buf[0][i:]
                return out

            def exact(n):
                while len(buf[0]) < n:
                    fill()
                out, buf[0] = buf[0][:n], buf[0][n:]
                return out

            while True:
                head = until(b"\r\n\r\n").decode("latin-1")
                h = {}
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    h[k.strip().lower()] = v.strip().lower()
                if h.get("expect") == "100-continue":
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                if "chunked" in h.get("transfer-encoding", ""):
                    while True:
                        size = int(until(b"\r\n").split(b";")[0].strip(), 16)
                        if size == 0:
                            while until(b"\r\n") != b"\r\n":
                                pass
                            break
                        exact(size + 2)
                elif "content-length" in h:
                    exact(int(h["content-length"]))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        except (OSError, EOFError, ValueError, ssl.SSLError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def received(self, needle):
        if isinstance(needle, str):
            needle = needle.encode()
        with self.lock:
            return needle in self.data

    def stop(self):
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


POLICY = """\
sandboxes:
  - id: box-probe2
    policy: probe2
    source: [127.0.0.1/32]
policies:
  - name: probe2
    allow:
      - host: api.test
        ports: [{api}]
        tls: intercept
      - host: docs.test
        ports: [{docs}]
        tls: intercept
      - host: plain.test
        ports: [{plain}]
    allow_private: [{api_ip}/32, {docs_ip}/32]
    credentials: [docs-key]
    dlp:
      mode: block
      allow:
        - host: docs.test
          rule: jwt
        - path: "/public/*"
credentials:
  - name: docs-key
    secret: docs-secret
    hosts: [docs.test]
    headers: [Authorization]
"""


class Dlp2(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dlp2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.api = RawOrigin(API_HOST, *cls.pki.leaf("api.test", ["api.test"]))
        cls.addClassCleanup(cls.api.stop)
        cls.docs = RawOrigin(DOCS_HOST, *cls.pki.leaf("docs.test",
            ["docs.test"]))
        cls.addClassCleanup(cls.docs.stop)
        cls.plain = RawOrigin(API_HOST)
        cls.addClassCleanup(cls.plain.stop)
        cls.dns = T.Dnsmasq(d, [("api.test", API_HOST),
            ("docs.test", DOCS_HOST), ("plain.test", API_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": POLICY.format(
            api=cls.api.port, docs=cls.docs.port, plain=cls.plain.port,
            api_ip=API_HOST, docs_ip=DOCS_HOST)},
            extra={"upstream": {"ca_bundle": cls.pki.cert}})
        r = T.run_sandgate("vault", "set", "docs-secret", "-c",
            cls.gw.cfg_path, input=DOCS_SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()

    # ------------------------------------------------------------ helpers

    def tunnel(self, host="api.test"):
        port = self.docs.port if host == "docs.test" else self.api.port
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def send(self, head, pieces=(), host="api.test", c=None):
        """head, then body pieces, on a fresh tunnel; the response or None."""
        c = c or self.tunnel(host)
        if isinstance(head, str):
            head = head.encode("latin-1")
        c.send(head)
        for p in pieces:
            time.sleep(0.03)
            try:
                c.send(p)
            except OSError:
                break
        try:
            return c.read_response()
        except (EOFError, OSError, ValueError):
            return None

    def host_hdr(self, host="api.test"):
        port = self.docs.port if host == "docs.test" else self.api.port
        return "Host: %s:%d\r\n" % (host, port)

    def post(self, path, body, hdrs="", host="api.test", pieces=None):
        head = "POST %s HTTP/1.1\r\n%s%sContent-Length: %d\r\n\r\n" % (
            path, self.host_hdr(host), hdrs, len(body))
        if pieces is None:
            pieces = (body,)
        return self.send(head, pieces, host)

    def assertNotLeaked(self, r, needle, origin=None, what=""):
        origin = origin or self.api
        leaked = origin.received(needle)
        self.assertFalse(leaked, "%s: the origin received %r (answer %s)" % (
            what, needle[:40], r.status if r else None))
        self.assertIsNotNone(r, what + ": no answer")
        self.assertEqual(r.status, 403, "%s: %r" % (what, r))

    # ------------------------------------------- exemptions: host and path

    def test_host_header_borrows_exemption(self):
        """CONNECT api.test, then inside the tunnel `Host: docs.test`
        (whose allow entry exempts rule jwt) and a JWT in a header."""
        tok = jwt()
        r = self.send("GET /h HTTP/1.1\r\n%sAuthorization: Bearer %s\r\n\r\n"
            % (self.host_hdr("docs.test"), tok))
        self.assertNotLeaked(r, tok, what="Host docs.test in api.test tunnel")

    def test_host_header_borrows_vault_binding(self):
        """CONNECT api.test, `Host: docs.test` (where docs-key is bound) and
        docs-key's value in a body: docs/dlp.md 55-57, 64-65 (a value may go
        only to a host its credential is bound to)."""
        body = "k=" + DOCS_SECRET
        r = self.send("POST /v HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (
            self.host_hdr("docs.test"), len(body)), (body,))
        self.assertNotLeaked(r, DOCS_SECRET, what="vault value, Host docs.test")

    def test_path_exemption_dot_segments(self):
        """FINDING. The policy has `dlp: allow: - path: "/public/*"`. A GET
        whose target matches that glob only before its dot segments are
        removed -- /public/../upload?k=AKIA..., /public/%2e%2e/upload?k=...,
        /public/x/../../upload?k=..., /public/..%2fupload?k=...,
        /public/%2E%2E/%2E%2E/upload?k=... -- is exempted from every rule
        and the AWS key id reaches the origin (200), although the path the
        origin resolves (RFC 3986 5.2.4) is /upload, where the control
        (/upload?k=AKIA...) is refused 403. docs/dlp.md 24-28 says an allow
        entry's path is "a glob over the path as sent"; SPEC section 4
        (path globs) says paths are matched in one canonical form (dot
        segments resolved) and a path holding encoded dot segments or %2F
        is refused 400 ambiguous-path where a path rule could apply: the dlp
        path exemption is the one path match that does neither, so any
        path can borrow it. docs/dlp.md 159-167: under block a secret in
        the target never reaches the origin."""
        key = aws_key()
        r = self.send("GET /public/x?k=%s HTTP/1.1\r\n%s\r\n" % (key,
            self.host_hdr()))
        self.assertEqual(r.status, 200, r)          # the exemption works
        key = aws_key()
        r = self.send("GET /upload?k=%s HTTP/1.1\r\n%s\r\n" % (key,
            self.host_hdr()))
        self.assertNotLeaked(r, key, what="/upload")  # and /upload is scanned
        misses = []
        for target in ("/public/../upload?k=%s", "/public/%%2e%%2e/upload?k=%s",
                       "/public/x/../../upload?k=%s", "/public/..%%2fupload?k=%s",
                       "/public/%%2E%%2E/%%2E%%2E/upload?k=%s"):
            key = aws_key()
            t = target % key
            r = self.send("GET %s HTTP/1.1\r\n%s\r\n" % (t, self.host_hdr()))
            if self.api.received(key):
                misses.append("%s: %s, reached the origin" % (t, r and r.status))
        self.assertEqual(misses, [])

    # ------------------------------------------------ request framing

    def test_pipelined_second_request(self):
        """Two requests in one TCP write; the second carries the key in its
        query, a header, or its body."""
        misses = []
        for where in ("query", "header", "body"):
            key = aws_key()
            first = "GET /p1 HTTP/1.1\r\n%s\r\n" % self.host_hdr()
            if where == "query":
                second = "GET /p2?k=%s HTTP/1.1\r\n%s\r\n" % (key,
                    self.host_hdr())
            elif where == "header":
                second = "GET /p2 HTTP/1.1\r\n%sX-K: %s\r\n\r\n" % (
                    self.host_hdr(), key)
            else:
                b = "k=" + key
                second = ("POST /p2 HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s"
                    % (self.host_hdr(), len(b), b))
            c = self.tunnel()
            c.send((first + second).encode())
            try:
                c.read_response()
                c.read_response()
            except (EOFError, OSError, ValueError):
                pass
            time.sleep(0.2)
            if self.api.received(key):
                misses.append(where)
        self.assertEqual(misses, [])

    def test_expect_100_continue(self):
        """Expect: 100-continue, the body (with the key) after the 100."""
        key = aws_key()
        body = "k=" + key
        c = self.tunnel()
        c.send("POST /e HTTP/1.1\r\n%sExpect: 100-continue\r\nContent-Length:"
               " %d\r\n\r\n" % (self.host_hdr(), len(body)))
        time.sleep(0.3)
        c.send(body)
        r = None
        try:
            r = c.read_response()
            while r.status == 100:
                r = c.read_response()
        except (EOFError, OSError, ValueError):
            pass
        self.assertNotLeaked(r, key, what="100-continue")

    # ------------------------------------------------ content codings

    def test_content_encoding_header_variants(self):
        """gzip bodies under Content-Encoding spellings: each must be
        inflated and refused (403) or refused as unscannable (415), never
        relayed unread."""
        misses = []
        for hdrs in ("Content-Encoding: identity\r\nContent-Encoding: gzip\r\n",
                     "Content-Encoding: gzip\r\nContent-Encoding: identity\r\n",
                     "Content-Encoding: , gzip\r\n",
                     "Content-Encoding: gzip,\r\n",
                     "Content-Encoding: identity,identity,gzip\r\n",
                     "Content-Encoding:gzip\r\n",
                     "Content-Encoding: gzip \t\r\n",
                     "content-encoding: X-GZIP\r\n",
                     "Content-Encoding: \"gzip\"\r\n",
                     "Content-Encoding: gzip;q=1\r\n",
                     "Content-Encoding: Deflate\r\n",
                     "Content-Encoding: \r\nContent-Encoding: gzip\r\n"):
            key = aws_key()
            if "eflate" in hdrs:
                body = zlib.compress(("k=" + key).encode())
            else:
                body = zlib.compress(("k=" + key).encode(), 6, 31)
            r = self.post("/ce", body, hdrs, pieces=(body,))
            st = r.status if r else None
            if st not in (400, 403, 415) or self.api.received(body[-12:]):
                misses.append("%r: %s, origin got it: %s" % (hdrs, st,
                    self.api.received(body[-12:])))
        self.assertEqual(misses, [])

    def test_transfer_coding_gzip(self):
        """`Transfer-Encoding: gzip, chunked`: a transfer coding the origin
        decodes; the body must not pass unread."""
        key = aws_key()
        gz = zlib.compress(("k=" + key).encode(), 6, 31)
        head = "POST /te HTTP/1.1\r\n%sTransfer-Encoding: gzip, chunked\r\n\r\n" \
            % self.host_hdr()
        r = self.send(head, (b"%x\r\n%s\r\n0\r\n\r\n" % (len(gz), gz),))
        self.assertFalse(self.api.received(gz[-12:]), r)
        self.assertIn(r.status if r else None, (400, 403, 415, 501), r)

    # ------------------------------------------------ encodings

    def enc_cases(self):
        """(name, body, needle): bodies that carry a secret in an encoding
        docs/dlp.md lines 116-131 claim."""
        key = aws_key()
        tok = github_token()
        env = "APP=1\nGITHUB_TOKEN=%s\nAWS=%s\n" % (tok, key)
        b = base64.b64encode(env.encode()).decode()
        w76 = [b[i:i + 20] for i in range(0, len(b), 20)]
        cases = []
        # base64 wrapped in a JSON string: the line breaks are \n escapes
        cases.append(("json \\n-wrapped base64", json.dumps({"f": "\n".join(
            w76)}), tok))
        cases.append(("json \\r\\n-wrapped base64", json.dumps({"f": "\r\n"
            .join(w76)}), tok))
        # PHP's json_encode escapes / as \/
        b2 = base64.b64encode((b"\xff\xfe\xfd" * 7) + env.encode()).decode()
        cases.append(("json \\/ in base64", '{"f": "%s"}' %
            b2.replace("/", "\\/"), tok))
        # curl --data-urlencode "f=$(base64 -w 20 .env)"
        cases.append(("form-urlencoded wrapped base64", "f=" +
            urllib.parse.quote("\n".join(w76), safe=""), tok))
        # base64 padding, then another base64 value
        cases.append(("base64 after padding", "eA==" + base64.b64encode(
            env.encode()).decode(), tok))
        # hex, mixed case
        h = env.encode().hex()
        hm = "".join(ch.upper() if i % 3 == 0 else ch for i, ch in enumerate(h))
        cases.append(("mixed-case hex", hm, tok))
        # hex wrapped at an odd column (a byte cut by the break)
        cases.append(("hex wrapped at 61", "\n".join(h[i:i + 61] for i in
            range(0, len(h), 61)), tok))
        # percent: each character a different number of layers (0..3)
        def pl(s):
            out = ""
            for i, ch in enumerate(s):
                n = i % 4
                e = ch
                for _ in range(n):
                    e = "".join("%%%02X" % x for x in e.encode())
                out += e
            return out
        cases.append(("percent, mixed layers", "q=" + pl(tok), tok))
        # JSON: some letters \u-escaped, upper-case hex digits
        js = "".join("\\u%04X" % ord(ch) if i % 5 == 2 else ch
            for i, ch in enumerate(tok))
        cases.append(("json some \\u upper", '{"t": "%s"}' % js, tok))
        # percent of JSON escapes (JSON in a query value)
        cases.append(("percent of json", "q=" + "".join("%%5Cu%04x" % ord(ch)
            for ch in tok), tok))
        return cases

    def test_encodings(self):
        """Held: JSON-escaped line breaks (\\n, \\r\\n) in wrapped base64,
        PHP's \\/ inside base64, form-urlencoded base64 wrapped with %0A,
        base64 after a padded value, mixed-case hex, hex wrapped at an odd
        column, percent with 0-3 layers per character, some JSON \\u
        escapes with upper-case digits, percent over JSON escapes."""
        misses = []
        for name, body, needle in self.enc_cases():
            r = self.post("/enc", body.encode(), pieces=(body.encode(),))
            if r is None or r.status != 403 or self.api.received(body[-24:]):
                misses.append("%s: %s" % (name, r and r.status))
        self.assertEqual(misses, [])

    def test_json_escaped_percent(self):
        """FINDING. A GitHub token percent-encoded (%67%68%70%5F...) and then
        written in a JSON string with its `%` as the JSON escape \\u0025
        (body `{"u": "\\u002567\\u002568\\u002570..."}`; JSON.parse gives
        "%67%68%70...", which unquotes to the token) passes (200), the body
        at the origin. docs/dlp.md 116-118: the unescaped view has
        "percent-encoding undone (three layers ...) and JSON string escapes
        undone"; the other order (percent over JSON escapes, q=%5Cu0067...)
        is refused (test_encodings), this one -- two layers, one of each
        kind, fewer than the three percent layers promised -- is not."""
        tok = github_token()
        body = '{"u": "%s"}' % "".join("\\u0025%02X" % ord(ch) for ch in tok)
        self.assertEqual(urllib.parse.unquote(json.loads(body)["u"]), tok)
        r = self.post("/jp", body.encode())
        self.assertNotLeaked(r, body[-30:], what="JSON-escaped percent")

    def test_generic_secret_form_plus(self):
        """FINDING. The text `password = <24 random characters>` is refused
        raw (403) and percent-encoded with %20 for the spaces
        (note=password%20%3D%20<value>: 403), but the same text as
        application/x-www-form-urlencoded writes it -- `+` for each space,
        what Python's urlencode, requests' data= and browsers send:
        note=password+%3D+<value> -- passes (200) and reaches the origin.
        docs/dlp.md 53 (generic-secret: `password` then `=` and 16-64 value
        characters, entropy >= 3.5) and 116-118 (percent-encoding undone)."""
        val = rand(24, B62 + "!#")
        for body in ("note: password = %s" % val,
                     "note=password%%20%%3D%%20%s" % val):
            r = self.post("/g", body.encode())
            self.assertEqual(r.status, 403, "control %r: %r" % (body, r))
        body = urllib.parse.urlencode({"note": "password = " + val})
        self.assertEqual(body, "note=password+%%3D+%s" % urllib.parse.quote_plus(
            val))
        r = self.post("/g", body.encode())
        self.assertNotLeaked(r, urllib.parse.quote_plus(val), what=body)

    # ------------------------------------------------ false positives

    def test_fp_pwd_environment_lines(self):
        """FINDING (false positive). Bodies holding the shell's working
        directory as `env`/`printenv`/CI logs/crash reports print it --
        `PWD=/home/runner/work/sandgate/sandgate`, `OLDPWD=/usr/local/lib/
        python3.11/site-packages`, `export PWD=/workspace/project` -- are
        refused 403 secret-detected (dlp rule generic-secret): the keyword
        `pwd` (docs/dlp.md 53) matches the PWD variable and a path has more
        than 3.5 bits per byte. A directory name is no secret; benign
        requests must pass under block."""
        misses = []
        for body in ("HOME=/home/runner\nPWD=/home/runner/work/sandgate/"
                     "sandgate\nSHELL=/bin/bash\n",
                     "OLDPWD=/usr/local/lib/python3.11/site-packages\n",
                     "export PWD=/workspace/project\n"):
            r = self.post("/env", body.encode())
            if r is None or r.status != 200:
                misses.append("%r: %s %s" % (body, r and r.status,
                    r and r.header("X-Sandgate-Reason")))
        self.assertEqual(misses, [])

    def test_fp_minified_js_property_chains(self):
        """FINDING (false positive). Minified JavaScript (a bundle a build
        tool uploads, a page a test posts) where a `password`/`passwd`
        property is set from a property chain -- `{password:this.state.
        passwordConfirmation}`, `{password:this.loginForm.controls.password.
        value}`, `{passwd:e.passwdInput.current.value,confirm:e.x}` -- is
        refused 403 secret-detected (generic-secret): the chain is 16-64
        "value characters" above 3.5 bits. The request carries no secret;
        minified JS is one of the benign kinds that must pass
        (tests/dlp/benign/minified.js)."""
        misses = []
        for body in ("x={password:this.state.passwordConfirmation};",
                     "s={password:this.loginForm.controls.password.value};",
                     "var r={passwd:e.passwdInput.current.value,confirm:e.x};"):
            r = self.post("/app.min.js", body.encode(),
                "Content-Type: application/javascript\r\n")
            if r is None or r.status != 200:
                misses.append("%r: %s %s" % (body, r and r.status,
                    r and r.header("X-Sandgate-Reason")))
        self.assertEqual(misses, [])

    # ------------------------------------------------ HTTP/2 head

    def test_h2_pseudo_headers(self):
        """The key in :path's query, as :method, in :scheme, in a header
        name, and a header block cut across CONTINUATION frames."""
        misses = []
        for what in ("path", "method", "scheme", "name", "continuation"):
            key = aws_key()
            h = H2(self, "api.test", self.api.port)
            auth = "api.test:%d" % self.api.port
            if what == "path":
                f = [(":method", "GET"), (":scheme", "https"),
                     (":authority", auth), (":path", "/q?k=" + key)]
            elif what == "method":
                f = [(":method", key), (":scheme", "https"),
                     (":authority", auth), (":path", "/m")]
            elif what == "scheme":
                f = [(":method", "GET"), (":scheme", key),
                     (":authority", auth), (":path", "/m")]
            else:
                f = [(":method", "GET"), (":scheme", "https"),
                     (":authority", auth), (":path", "/m")]
                if what == "name":
                    f.append(("x-" + key.lower() + "-" + key, "1"))
                else:
                    f.append(("x-data", key))
            blk = h.enc.encode(f)
            if what == "continuation":
                cut = len(blk) - 10
                h.send(frame(HEADERS, END_STREAM, 1, blk[:cut]))
                h.send(frame(9, END_HEADERS, 1, blk[cut:]))
            else:
                h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, blk))
            try:
                st, = h.wait(1)
            except Exception as e:   # noqa: BLE001
                st = repr(e)
            if self.api.received(key) or self.api.received(key.lower()):
                misses.append("%s: %r" % (what, st))
        self.assertEqual(misses, [])


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
