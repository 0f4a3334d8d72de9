#!/usr/bin/python3
"""
Second credential probe: ways for a real secret to reach the sandbox, a
host it is not bound to, or the log/audit, beyond test_cred_probe.py.

A raw, programmable HTTPS origin of our own answers by path; it records
every request it gets. Names bound.test, other.test and third.test are
served on 127.0.0.2 (one certificate covers all three, as a real shared
front-end's would). Credentials: probe-key (Authorization, query: true)
and scoped-key (X-Scoped, scope GET /repos/acme/*) bound to bound.test,
b-key (Authorization) bound to third.test.

test_f* are findings (they fail on the binary they were written
against); test_h* are probes that held and are not covered elsewhere:
scrubbing of a response to a request that carried no placeholder, of a
body read to EOF and of a chunked trailer; 502 answers to malformed
responses that quote the key; HTTP/2 :authority and HTTP/1.1 Host/SNI
naming the bound host inside another host's tunnel; credential A's
placeholder toward credential B's host; scope paths with raw
backslashes and other tricks; OAuth2 failure details; log and audit.
"""

import base64
import json
import os
import socketserver
import ssl
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA, secret_forms  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
SECRET = "sk-probe2-R3alS3cretValue-0123456789abcdefXYZqrstuvw"
SCOPED_SECRET = "sc-probe2-ScopedSecretValue-0123456789abcdef"
B_SECRET = "bk-probe2-ThirdHostSecret-0123456789abcdefgh"
ALL_SECRETS = (SECRET, SCOPED_SECRET, B_SECRET)
PH = "PHPROBE2-probekey-0000000001"
SCOPED_PH = "PHPROBE2-scopedkey-000000001"
B_PH = "PHPROBE2-bkey-00000000000001"
NAMES = ["bound.test", "other.test", "third.test"]


# ---------------------------------------------------------------- origin

class RawOrigin(T.ScriptedOrigin):
    """The API, answering by path (below); a /store request's key is kept
    for /last."""

    def __init__(self, name, cert, key):
        self.name = name
        self.stored = None
        super().__init__(cert, key, ORIGIN_HOST)

    def got_any_secret(self, marker=""):
        for s in ALL_SECRETS:
            for form in secret_forms(s):
                if self.got(form, marker):
                    return form
        return None

    def answer(self, req):
        return self.respond(req["path"], req["head"], req["hmap"])

    def respond(self, path, head, hmap):
        """(bytes to send, close after)."""
        srv = self
        auth = hmap.get("authorization", "")
        tok = auth.split(" ", 1)[1] if " " in auth else auth
        tb = tok.encode("latin-1")
        if "/store" in path:
            with srv.lock:
                srv.stored = tb
        if path.startswith("/last"):
            # the key the API saw last (a "whoami"/debug route), asked for
            # by a request that carries no placeholder
            with srv.lock:
                body = b"last key: " + (srv.stored or b"none") + b"\n"
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body), False
        if path.startswith("/eof"):
            # HTTP/1.0 style: no length, the body ends with the connection
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Connection: close\r\n\r\n" + head), True
        if path.startswith("/trailer"):
            body = b"hello"
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Transfer-Encoding: chunked\r\nTrailer: X-Echo\r\n\r\n"
                    b"%x\r\n" % len(body) + body + b"\r\n0\r\n"
                    b"X-Echo: " + tb + b"\r\n\r\n"), False
        if path.startswith("/badhdr"):
            # a malformed header line (no colon) quoting the key
            return (b"HTTP/1.1 200 OK\r\nX-Bad " + tb + b"\r\n"
                    b"Content-Length: 0\r\n\r\n"), True
        if path.startswith("/badce"):
            return (b"HTTP/1.1 200 OK\r\nContent-Encoding: x-" + tb + b"\r\n"
                    b"Content-Length: 2\r\n\r\nok"), True
        if path.startswith("/badcl"):
            return (b"HTTP/1.1 200 OK\r\nContent-Length: " + tb + b"\r\n\r\n"
                    b"ok"), True
        if path.startswith("/badstatus"):
            return (b"HTTP/1.1 " + tb + b" OK\r\nContent-Length: 0\r\n\r\n"), True
        if path.startswith("/badte"):
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + tb +
                    b", chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), True
        if path.startswith("/badupg"):
            return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + tb +
                    b"\r\nConnection: Upgrade\r\n\r\n"), True
        if path.startswith("/redir"):
            loc = b"https://other.test/landing?k=" + tb
            return (b"HTTP/1.1 302 Found\r\nLocation: " + loc + b"\r\n"
                    b"Content-Length: 0\r\n\r\n"), False
        body = head
        if head.startswith(b"HEAD "):
            body = b""
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n\r\n" % len(head) + body), False


POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{bound}]
        tls: intercept
      - host: other.test
        ports: [{other}]
        tls: intercept
      - host: third.test
        ports: [{third}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [probe-key, scoped-key, b-key]
credentials:
  - name: probe-key
    secret: probe-secret
    hosts: [bound.test]
    headers: [Authorization]
    query: true
    placeholder: "{ph}"
  - name: scoped-key
    secret: scoped-secret
    hosts: [bound.test]
    headers: [X-Scoped]
    placeholder: "{scoped_ph}"
    scope:
      methods: [GET]
      paths: ["/repos/acme/*"]
  - name: b-key
    secret: b-secret
    hosts: [third.test]
    headers: [Authorization]
    placeholder: "{b_ph}"
"""


def contains_secret(blob):
    """The first encoding of any secret found in blob (bytes), or None."""
    low = blob.lower()
    for s in ALL_SECRETS:
        for form in secret_forms(s):
            if form in blob or form.lower() in low:
                return form
    return None


class Cred2ProbeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-cred2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        crt = cls.pki.leaf("shared.test", NAMES)
        cls.o = {}
        for n in NAMES:
            cls.o[n] = RawOrigin(n, *crt)
            cls.addClassCleanup(cls.o[n].stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in NAMES])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(bound=cls.o["bound.test"].port,
            other=cls.o["other.test"].port, third=cls.o["third.test"].port,
            origin=ORIGIN_HOST, ph=PH, scoped_ph=SCOPED_PH, b_ph=B_PH)
        cls.gw = T.Gateway(d, cls.dns, {"probe2.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.vault_set(("probe-secret", SECRET),
                         ("scoped-secret", SCOPED_SECRET),
                         ("b-secret", B_SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = ssl.create_default_context(cafile=cls.gw_ca)
        cls.ctx.set_alpn_protocols(["http/1.1"])

    # ------------------------------------------------------------ helpers

    def port(self, host):
        return self.o[host].port

    def tls_conn(self, host, sni=None):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.port(host)))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=sni or host)
        return c

    def req(self, host, raw, method="GET"):
        """raw with {HOST} = host:port; the response or None."""
        c = self.tls_conn(host)
        c.send(raw.replace("{HOST}", "%s:%d" % (host, self.port(host))))
        try:
            return c.read_response(method)
        except (EOFError, ConnectionResetError, ssl.SSLError, ValueError,
                OSError):
            return None

    def auth_get(self, path, host="bound.test", extra=""):
        return self.req(host, "GET %s HTTP/1.1\r\nHost: {HOST}\r\n"
                        "Authorization: Bearer %s\r\n%s\r\n" % (path, PH, extra))

    def assert_clean(self, blob, what):
        form = contains_secret(blob)
        self.assertIsNone(form, "%s: the real secret (as %r) reached the "
                          "sandbox: %r" % (what, form, blob[:600]))

    @staticmethod
    def blob(r):
        return b"" if r is None else r.raw_head + r.body

    # ------------------------------------------------------------ responses

    def test_h03_error_answers_to_malformed_responses(self):
        """
        Malformed answers of the bound origin that quote the key in the
        part the gateway rejects: a header line without a colon,
        Content-Encoding (x-<secret>, refused as
        upstream-encoding), Content-Length, the status code,
        Transfer-Encoding and a 101's Upgrade. Whatever the gateway
        answers (a 502) must not carry the secret (SPEC section 7 "never
        appear in ... error messages"; docs/credentials.md "Scrubbing
        responses": the whole response of a credential's host is
        scrubbed).
        """
        bad = []
        for path in ("/badhdr", "/badce", "/badcl", "/badstatus", "/badte", "/badupg"):
            extra = ""
            if path == "/badupg":
                extra = "Connection: Upgrade\r\nUpgrade: websocket\r\n" \
                    "Sec-WebSocket-Version: 13\r\n" \
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            r = self.auth_get(path, extra=extra)
            self.assertTrue(self.o["bound.test"].got(SECRET, path), path)
            if contains_secret(self.blob(r)):
                bad.append((path, self.blob(r)[:400]))
        self.assertEqual(bad, [], "the secret came back in the gateway's "
                         "answer to a malformed response")

    def test_h01_secret_echoed_to_request_without_placeholder(self):
        """
        The whole response of a credential's host is scrubbed
        (docs/credentials.md "Scrubbing responses"), not only a response
        to a request into which the secret was swapped: a debug route
        that tells the last key seen, asked without any placeholder.
        """
        r = self.auth_get("/store")
        self.assertEqual(r.status, 200, r)
        r = self.req("bound.test", "GET /last HTTP/1.1\r\nHost: {HOST}\r\n\r\n")
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"last key:", r.body)
        self.assert_clean(self.blob(r), "/last without a placeholder")
        self.assertIn(PH.encode(), r.body)

    def test_h02_body_ended_by_close_and_trailer(self):
        """A body read to EOF (no length) and a chunked trailer that
        quotes the key: scrubbed / not relayed."""
        r = self.auth_get("/eof")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        self.assert_clean(self.blob(r), "body to EOF")
        self.assertIn(PH.encode(), r.body)
        c = self.tls_conn("bound.test")
        c.send("GET /trailer HTTP/1.1\r\nHost: bound.test:%d\r\n"
               "Authorization: Bearer %s\r\nTE: trailers\r\n\r\n" % (
                   self.port("bound.test"), PH))
        time.sleep(0.5)
        raw = b""
        try:
            raw = c.read_until(b"0\r\n", limit=1 << 16)
            raw += c.read_until(b"\r\n\r\n", limit=1 << 16)
        except (EOFError, OSError, ssl.SSLError):
            pass
        self.assertIn(b"hello", raw)
        self.assert_clean(raw, "chunked trailer")

    # ------------------------------------------------------------ wrong host

    def test_h04_http2_authority_of_bound_host_on_other_tunnel(self):
        """
        HTTP/2 coalescing: CONNECT other.test (the certificate covers
        bound.test too), a stream whose :authority is bound.test carrying
        the placeholder. The secret must not reach other.test (SPEC
        section 6: the :authority must match the CONNECT host).
        """
        o = self.port("other.test")
        r = T.curl("https://other.test:%d/coalesce" % o, proxy=self.gw.url,
                   args=["--http2", "--cacert", self.gw_ca,
                         "-H", "Host: bound.test:%d" % self.port("bound.test"),
                         "-H", "Authorization: Bearer %s" % PH],
                   tmp=self.td.path)
        time.sleep(0.2)
        self.assertIsNone(self.o["other.test"].got_any_secret("/coalesce"))
        self.assertIsNone(self.o["bound.test"].got_any_secret("/coalesce"))
        self.assertNotEqual(r.status, 200, r)

    def test_h05_host_header_mismatch_http1(self):
        """CONNECT other.test, Host: bound.test, the placeholder; and
        CONNECT bound.test, SNI other.test."""
        r = self.req("other.test", "GET /hostmm HTTP/1.1\r\nHost: bound.test:%d"
                     "\r\nAuthorization: Bearer %s\r\n\r\n" % (
                         self.port("bound.test"), PH))
        time.sleep(0.2)
        for n in NAMES:
            self.assertIsNone(self.o[n].got_any_secret("/hostmm"), n)
        self.assertIsNotNone(r)
        self.assertNotEqual(r.status, 200, r)
        # SNI other.test inside a tunnel to bound.test
        c, rr = T.open_tunnel(self.gw.port, "bound.test:%d" % self.port(
            "bound.test"))
        self.addCleanup(c.close)
        try:
            c.sock = self.ctx.wrap_socket(c.sock, server_hostname="other.test")
            c.send("GET /snimm HTTP/1.1\r\nHost: other.test:%d\r\n"
                   "Authorization: Bearer %s\r\n\r\n" % (
                       self.port("other.test"), PH))
            c.read_response()
        except (OSError, ssl.SSLError, EOFError, ValueError):
            pass
        time.sleep(0.2)
        for n in NAMES:
            self.assertIsNone(self.o[n].got_any_secret("/snimm"), n)

    def test_h06_placeholder_of_a_to_host_of_b(self):
        """probe-key's placeholder (Bearer, Basic user:PH, query) toward
        third.test, which b-key is bound to: never probe-key's secret
        there, and refused as misuse."""
        basic = base64.b64encode(("x-access-token:%s" % PH).encode()).decode()
        for i, (line, hdr) in enumerate((
                ("/ab1", "Authorization: Bearer %s" % PH),
                ("/ab2", "Authorization: Basic %s" % basic),
                ("/ab3?key=%s" % PH, "X-N: 1"),
                ("/ab4", "Authorization: Bearer %s %s" % (B_PH, PH)))):
            r = self.req("third.test", "GET %s HTTP/1.1\r\nHost: {HOST}\r\n"
                         "%s\r\n\r\n" % (line, hdr))
            time.sleep(0.1)
            m = line.split("?")[0]
            self.assertFalse(self.o["third.test"].got(SECRET, m), line)
            self.assertFalse(self.o["third.test"].got(PH, m), line)
            self.assertIsNotNone(r, line)
            self.assertEqual(r.status, 403, (line, r))

    def test_h08_scope_raw_backslash_dot_segments(self):
        """
        scoped-key is scoped to GET /repos/acme/*. docs/credentials.md
        "require and scope": "a path the origin could read in another way
        -- an encoded `/` or `\\`, `%2e%2e` ... -- is outside every scope".
        A raw backslash is a path the origin can read another way (IIS,
        many Windows/Node servers and URL libraries treat `\\` as `/`):
        `/repos/acme/..\\..\\admin` is /admin there. The gateway must not
        swap the scoped secret into it.
        """
        leaked = []
        for i, path in enumerate(("/repos/acme/..\\..\\admin",
                                  "/repos/acme/x\\..\\..\\..\\admin")):
            mark = "bs%d" % i
            r = self.req("bound.test", "GET %s?m=%s HTTP/1.1\r\nHost: {HOST}\r\n"
                         "X-Scoped: %s\r\n\r\n" % (path, mark, SCOPED_PH))
            time.sleep(0.1)
            if self.o["bound.test"].got(SCOPED_SECRET, mark):
                leaked.append((path, r and r.status))
        self.assertEqual(leaked, [], "the scoped secret was swapped into a "
                         "path outside the scope as a backslash-normalising "
                         "origin reads it")

    def test_h07_scope_other_tricks(self):
        """Paths outside GET /repos/acme/* written to look inside it."""
        for i, path in enumerate((
                "/repos/acme/../admin", "/repos/acme/%2e%2e/admin",
                "/repos/acme/%2E%2E/admin", "/repos/acme/.%2e/admin",
                "/repos/acme/..;/admin", "/repos/acme%2f..%2fadmin",
                "/repos/acme/%252e%252e/admin", "/REPOS/acme/x",
                "/repos/acme", "/repos/acme;x/../../admin",
                "/repos/acme/x/%2e%2e/%2e%2e/..", "/repos/acme/x#/../../../a",
                "/repos/acme/x%00/../../../admin", "//repos/acme/../../admin",
                "/repos/acme/%c0%ae%c0%ae/admin")):
            mark = "sc%d" % i
            self.req("bound.test", "GET %s?m=%s HTTP/1.1\r\nHost: {HOST}\r\n"
                     "X-Scoped: %s\r\n\r\n" % (path, mark, SCOPED_PH))
            self.assertFalse(self.o["bound.test"].got(SCOPED_SECRET, mark),
                             path)
        # control: inside the scope it is swapped
        self.req("bound.test", "GET /repos/acme/x?m=scok HTTP/1.1\r\n"
                 "Host: {HOST}\r\nX-Scoped: %s\r\n\r\n" % SCOPED_PH)
        self.assertTrue(self.o["bound.test"].got(SCOPED_SECRET, "scok"))

    # ------------------------------------------------------------ last

    def test_z99_no_secret_in_log_or_audit(self):
        """After the rest: no encoding of any secret in the log file, the
        audit database, `sandgate audit` output, or any request that
        reached other.test / third.test (SPEC section 7)."""
        time.sleep(1.0)
        out = T.run_sandgate("audit", "-c", self.gw.cfg_path, "--format",
                             "json")
        blobs = {"sandgate audit": (out.stdout + out.stderr).encode(),
                 "log": self.gw.log_text().encode()}
        var = os.path.join(self.td.path, "var")
        for f in os.listdir(var):
            if f.startswith("audit.db"):
                with open(os.path.join(var, f), "rb") as fh:
                    blobs[f] = fh.read()
        bad = [(k, contains_secret(v)) for k, v in blobs.items()
               if contains_secret(v)]
        self.assertEqual(bad, [])
        self.assertIsNone(self.o["other.test"].got_any_secret())
        f = self.o["third.test"].got(SECRET) or self.o["third.test"].got(
            SCOPED_SECRET)
        self.assertFalse(f)


# ---------------------------------------------------------------- oauth2

OA_CLIENT_ID = "cred2-client"
OA_CLIENT_SECRET = "cs-cred2-ClientSecretValue-0123456789"
OA_RT = "rt-cred2-RefreshTokenValue-0123456789"
OA_AT = "at-cred2-AccessTokenValue-0123456789"
# a refresh token of lower-case letters and "_" only (the eerr entry's)
OA_RT_LC = "rt_lowercase_refresh_tokenvalue"  # 31 characters
OA_SECRETS = (OA_CLIENT_SECRET, OA_RT, OA_AT, OA_RT_LC)
OA_PATHS = ("e400", "e500", "tt", "exp", "eerr")


class _TokenHandler(socketserver.BaseRequestHandler):
    """
    A token endpoint that quotes what it got, as many do in their error
    answers: /e400 (400 invalid_grant, error_description quoting the form
    and the Authorization header), /e500 (500 text/plain: the request as
    it came), /tt (200, a valid access token but token_type naming the
    refresh token), /eerr (400, the "error" code is the refresh token
    it got), /exp (200, the access token with expires_in a string
    quoting it).
    """
    def handle(self):
        srv = self.server
        try:
            sock = srv.ssl_ctx.wrap_socket(self.request, server_side=True)
            sock.settimeout(10)
            buf = b""
            while b"\r\n\r\n" not in buf:
                b = sock.recv(65536)
                if not b:
                    return
                buf += b
            head, body = buf.split(b"\r\n\r\n", 1)
            n = 0
            for l in head.split(b"\r\n")[1:]:
                if l.lower().startswith(b"content-length:"):
                    n = int(l.split(b":", 1)[1])
            while len(body) < n:
                b = sock.recv(65536)
                if not b:
                    break
                body += b
            path = head.split(b" ")[1].decode()
            with srv.lock:
                srv.calls.append(path)
            auth = b""
            for l in head.split(b"\r\n")[1:]:
                if l.lower().startswith(b"authorization:"):
                    auth = l.split(b":", 1)[1].strip()
            ctype = b"application/json"
            if path == "/e400":
                st = b"400 Bad Request"
                out = json.dumps({"error": "invalid_grant",
                    "error_description": "refresh token not valid: %s "
                    "(client %s, decoded %s)" % (body.decode(),
                    auth.decode(), base64.b64decode(auth.split(b" ")[-1]
                    ).decode() if auth else "")}).encode()
            elif path == "/e500":
                st = b"500 Internal Server Error"
                ctype = b"text/plain"
                out = b"cannot handle: " + head + b"\r\n\r\n" + body + \
                    b"\ndecoded client: " + base64.b64decode(
                        auth.split(b" ")[-1])
            elif path == "/eerr":
                # the error code itself quoting the refresh token
                st = b"400 Bad Request"
                import urllib.parse
                rt = urllib.parse.parse_qs(body.decode()).get(
                    "refresh_token", [""])[0]
                out = json.dumps({"error": rt}).encode()
            elif path == "/tt":
                st = b"200 OK"
                out = json.dumps({"access_token": OA_AT, "token_type": OA_RT,
                    "expires_in": 60}).encode()
            else:
                st = b"200 OK"
                out = json.dumps({"access_token": OA_AT, "token_type":
                    "Bearer", "expires_in": "never-" + OA_AT}).encode()
            sock.sendall(b"HTTP/1.1 " + st + b"\r\nContent-Type: " + ctype +
                b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" %
                len(out) + out)
            sock.close()
        except (OSError, ssl.SSLError, ValueError):
            return


OA_POLICY = """\
sandboxes:
  - id: box-o
    policy: oa
    source: [127.0.0.1/32]
policies:
  - name: oa
    allow:
      - host: "*.test"
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [{names}]
credentials:
"""
OA_CRED = """\
  - name: {name}
    kind: oauth2
    secret: {name}-oauth
    hosts: [{name}.test]
    placeholder: "PHPROBE2-oauth-{name}-000001"
    oauth2:
      token_url: https://{tok}:{tport}/{name}
      grant: refresh_token
"""


class Cred2OAuthTest(unittest.TestCase):
    """What the sandbox gets back when the token endpoint fails."""

    @classmethod
    def setUpClass(cls):
        from test_cred_oauth2 import ip_leaf, TOKEN_HOST
        cls.td = T.TempDir("sgtest-cred2oa-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        names = ["%s.test" % n for n in OA_PATHS]
        cls.origin = RawOrigin("api", *cls.pki.leaf("api.test", names))
        cls.addClassCleanup(cls.origin.stop)
        srv = T.ThreadedServer((TOKEN_HOST, 0), _TokenHandler)
        srv.lock = threading.Lock()
        srv.calls = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*ip_leaf(cls.pki, "token", TOKEN_HOST))
        srv.ssl_ctx = ctx
        cls.tok = srv
        threading.Thread(target=srv.serve_forever, kwargs={
            "poll_interval": 0.1}, daemon=True).start()

        def _stop():
            srv.shutdown()
            srv.server_close()
        cls.addClassCleanup(_stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in names])
        cls.addClassCleanup(cls.dns.stop)
        policy = OA_POLICY.format(port=cls.origin.port, origin=ORIGIN_HOST,
                                  names=", ".join(OA_PATHS))
        for n in OA_PATHS:
            policy += OA_CRED.format(name=n, tok=TOKEN_HOST,
                                     tport=srv.server_address[1])
        cls.gw = T.Gateway(d, cls.dns, {"oa.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        entry = "client_id=%s\nclient_secret=%s\nrefresh_token=%s\n" % (
            OA_CLIENT_ID, OA_CLIENT_SECRET, OA_RT)
        cls.gw.vault_set(*[(n + "-oauth", entry if n != "eerr" else
                            entry.replace(OA_RT, OA_RT_LC)) for n in OA_PATHS])
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = ssl.create_default_context(cafile=cls.gw.ca_path())
        cls.ctx.set_alpn_protocols(["http/1.1"])

    def fetch(self, name):
        host = "%s.test" % name
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.origin.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.send("GET /oa-%s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: "
               "Bearer PHPROBE2-oauth-%s-000001\r\n\r\n" % (
                   name, host, self.origin.port, name))
        return c.read_response()

    def own_log(self, names):
        """The log lines naming these credentials (f01's are its own)."""
        return "\n".join(l for l in self.gw.log_text().splitlines()
                         if any("credential %s:" % n in l or
                                "host=%s.test" % n in l for n in names)
                         ).encode()

    @staticmethod
    def leaks(blob):
        out = []
        basic = base64.b64encode(("%s:%s" % (OA_CLIENT_ID, OA_CLIENT_SECRET)
                                  ).encode())
        for s in OA_SECRETS:
            for form in secret_forms(s):
                if form in blob:
                    out.append(form)
        if basic in blob:
            out.append(basic)
        return out

    def test_h11_token_endpoint_error_quoting_refresh_token(self):
        """
        docs/credentials.md "OAuth 2.0 credentials", "What this closes":
        "The sandbox cannot read ... the client secret or the refresh
        token: they never leave the gateway except to token_url"; SPEC
        section 7: secret values never appear in "logs, audit rows, error
        messages". A failed fetch answers the sandbox 502
        credential-refresh-failed "the detail in the body and the log".
        The endpoint's error answers quote the form it got (the refresh
        token) and the client (Basic, decoded: the client secret), as
        error pages do.
        """
        bad = []
        names = ("e400", "e500")
        for name in names:
            r = self.fetch(name)
            self.assertEqual(r.status, 502, r)
            self.assertEqual(r.header("X-Sandgate-Reason"),
                             "credential-refresh-failed", r)
            got = self.leaks(r.raw_head + r.body)
            if got:
                bad.append(("response to the sandbox", name, got, r.body[:300]))
        time.sleep(0.5)
        got = self.leaks(self.own_log(names))
        if got:
            bad.append(("log", got))
        self.assertEqual(bad, [])

    def test_f01_refresh_token_quoted_in_error_code_reaches_sandbox(self):
        """
        The endpoint answers 400 {"error": "<the refresh token it got>"}.
        The gateway puts the `error` value into the 502 body it sends the
        sandbox (and the log), keeping its lower-case letters and `_`, up
        to 32 characters (on this binary: "the token endpoint answered
        400 rt_lowercase_refresh_tokenvalue"): a refresh token of those
        characters and at most 32 long comes back whole; any other, its
        first 32 such characters (with "invalid_grant:<token>" in front,
        the first 19). Breaks docs/credentials.md "OAuth 2.0 credentials",
        "What this closes": "The sandbox cannot read ... the refresh
        token: they never leave the gateway except to token_url", and
        SPEC section 7 "Secret values never appear in logs, ... error
        messages". (The answer "is read as hostile input".)
        """
        r = self.fetch("eerr")
        self.assertEqual(r.status, 502, r)
        self.assertIn("/eerr", self.tok.calls)
        self.assertNotIn(OA_RT_LC.encode(), r.raw_head + r.body,
                         "the refresh token reached the sandbox: %r" % r.body)
        time.sleep(0.3)
        self.assertNotIn(OA_RT_LC, self.gw.log_text(),
                         "the refresh token is in the log")

    def test_h12_malformed_token_answer_detail(self):
        """A 2xx answer the gateway refuses (token_type not Bearer; a
        non-numeric expires_in) whose refused field quotes the refresh or
        access token: the 502's detail and the log must not carry it (same
        promises as test_f04; the access token is in the scrubber's set)."""
        bad = []
        names = ("tt", "exp")
        for name in names:
            r = self.fetch(name)
            self.assertEqual(r.status, 502, r)
            got = self.leaks(r.raw_head + r.body)
            if got:
                bad.append(("response to the sandbox", name, got, r.body[:300]))
        time.sleep(0.5)
        got = self.leaks(self.own_log(names))
        if got:
            bad.append(("log", got))
        self.assertEqual(bad, [])

    def test_z99_audit(self):
        """No client secret, refresh or access token in the audit log."""
        time.sleep(1.0)
        var = os.path.join(self.td.path, "var")
        bad = []
        for f in os.listdir(var):
            if f.startswith("audit.db"):
                with open(os.path.join(var, f), "rb") as fh:
                    got = self.leaks(fh.read())
                if got:
                    bad.append((f, got))
        self.assertEqual(bad, [])


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
