#!/usr/bin/python3
"""
End-to-end tests of credentials of kind oauth2 (issue 25, point 2) with the
real gateway (user sandgate, seccomp, the keeper): a local HTTPS token
endpoint of our own that issues access tokens expiring in 2 s and rotates
the refresh token on each use (the old one then gets invalid_grant), and an
HTTPS echo origin bound to the credentials. The gateway must obtain the
token itself, swap it for the placeholder, refresh it when stale with the
rotated refresh token (stored back in the vault through the keeper: a
restarted gateway still gets tokens), share one refresh among concurrent
requests, refuse with credential-refresh-failed (and an audit row naming
the credential) when the endpoint fails or answers something hostile, and
never show a token to the client.
"""

import base64
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import sys
import threading
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import EchoOrigin, TestCA, must  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
TOKEN_HOST = "127.0.0.3"
CLIENT_ID = "sg-client"
CLIENT_SECRET = "cs-E2E/oauth+Secret=1"
RT0 = "rt-initial-0123456789"
PH = {
    "crm": "sgtest-oauth2-crm-placeholder-01",
    "bad": "sgtest-oauth2-bad-placeholder-02",
    "down": "sgtest-oauth2-down-placeholder-03",
    "big": "sgtest-oauth2-big-placeholder-004",
    "odd": "sgtest-oauth2-odd-placeholder-005",
    "redir": "sgtest-oauth2-redir-placeholder-6",
    "named": "sgtest-oauth2-named-placeholder-7",
    "nxname": "sgtest-oauth2-nxname-placeholder8",
}
# Token endpoints by host name, through the gateway's resolver (dnsmasq).
NAMED = {"named": "auth.test", "nxname": "nx-auth.test"}


def ip_leaf(ca, cn, ip):
    """A server certificate for an IP address, signed by the test CA."""
    base = os.path.join(ca.d, cn)
    key, csr, crt, ext = (base + s for s in (".key", ".csr", ".crt", ".ext"))
    must([T.OPENSSL, "req", "-new", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + cn,
        "-keyout", key, "-out", csr])
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:%s,DNS:auth.test\n"
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n" % ip)
    ca.serial += 1
    must([T.OPENSSL, "x509", "-req", "-in", csr, "-CA", ca.cert,
        "-CAkey", ca.key, "-set_serial", str(ca.serial), "-days", "7",
        "-sha256", "-extfile", ext, "-out", crt])
    return crt, key


# ---------------------------------------------------------------- token endpoint

class _TokenHandler(http.server.BaseHTTPRequestHandler):
    """
    POST /ok: RFC 6749 refresh_token grant, client in Basic; the refresh
    token must be the latest one issued (else 400 invalid_grant); answers a
    new access token (expires_in 2) and a new refresh token. /invalid:
    always invalid_grant. /big: a 10 MB answer. /odd: access_token a
    number. /redir: 302 to /ok.
    """
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def setup(self):
        self.request = self.server.ssl_ctx.wrap_socket(self.request,
            server_side=True)
        self.request.settimeout(10)
        super().setup()

    def answer(self, status, doc=None, raw=None, headers=()):
        body = raw if raw is not None else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def do_POST(self):
        srv = self.server
        n = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        auth = self.headers.get("Authorization") or ""
        rec = {"path": self.path, "form": form, "auth": auth}
        with srv.lock:
            srv.calls.append(rec)
        if self.path == "/big":
            self.answer(200, raw=b'{"access_token":"' + b"A" * (10 << 20)
                + b'","token_type":"Bearer","expires_in":60}')
            return
        if self.path == "/odd":
            self.answer(200, {"access_token": 12345, "token_type": "Bearer",
                "expires_in": 60})
            return
        if self.path == "/redir":
            self.answer(302, {}, headers=[("Location", "/ok")])
            return
        if self.path == "/cc" and form.get("grant_type") == [
                "client_credentials"]:
            with srv.lock:
                srv.cc = "at-cc-%s" % os.urandom(12).hex()
                srv.issued.append(srv.cc)
            self.answer(200, {"access_token": srv.cc, "token_type": "Bearer",
                "expires_in": 60})
            return
        if self.path != "/ok":
            self.answer(400, {"error": "invalid_grant"})
            return
        time.sleep(srv.delay)  # so that concurrent requests overlap
        want = "Basic " + base64.b64encode(("%s:%s" % (
            urllib.parse.quote(CLIENT_ID, safe=""),
            urllib.parse.quote(CLIENT_SECRET, safe=""))).encode()).decode()
        with srv.lock:
            ok_client = auth == want
            ok_rt = form.get("grant_type") == ["refresh_token"] and \
                form.get("refresh_token") == [srv.rt]
            if ok_client and ok_rt:
                srv.n += 1
                srv.rt = "rt-rotated-%d-%s" % (srv.n, os.urandom(6).hex())
                srv.access = "at-%d-%s" % (srv.n, os.urandom(12).hex())
                doc = {"access_token": srv.access, "token_type": "Bearer",
                    "expires_in": srv.expires_in, "refresh_token": srv.rt}
                srv.issued.append(srv.access)
                srv.rts.append(srv.rt)
        if not ok_client:
            self.answer(401, {"error": "invalid_client"})
        elif not ok_rt:
            self.answer(400, {"error": "invalid_grant"})
        else:
            self.answer(200, doc)


class _TokenServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def handle_error(self, request, client_address):
        pass


class TokenEndpoint:
    def __init__(self, cert, key):
        self.srv = _TokenServer((TOKEN_HOST, 0), _TokenHandler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.srv.ssl_ctx = ctx
        self.srv.lock = threading.Lock()
        self.srv.calls = []
        self.srv.issued = []
        self.srv.rts = []
        self.srv.rt = RT0
        self.srv.n = 0
        self.srv.access = None
        self.srv.cc = None
        self.srv.expires_in = 2
        self.srv.delay = 0.4
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
            kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def calls(self, path="/ok"):
        with self.srv.lock:
            return [c for c in self.srv.calls if c["path"] == path]

    @property
    def access(self):
        with self.srv.lock:
            return self.srv.access

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: "*.test"
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [crm, bad, down, big, odd, redir]
credentials:
"""
CRED = """\
  - name: {name}
    kind: oauth2
    secret: {name}-oauth
    hosts: [{name}.test]
    placeholder: "{ph}"
    oauth2:
      token_url: https://{tok}:{tport}/{path}
      grant: refresh_token
      refresh_before: 1s
"""


class OAuth2Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-oauth2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        names = ["%s.test" % n for n in PH] + ["other.test"]
        cls.origin = EchoOrigin("api", *cls.pki.leaf("api.test", names))
        cls.addClassCleanup(cls.origin.stop)
        cls.tok = TokenEndpoint(*ip_leaf(cls.pki, "token", TOKEN_HOST))
        cls.addClassCleanup(cls.tok.stop)
        # A port nobody listens on: the "down" endpoint.
        s = socket.socket()
        s.bind((TOKEN_HOST, 0))
        cls.down_port = s.getsockname()[1]
        s.close()
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in names] +
            [("auth.test", TOKEN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        paths = {"crm": "ok", "bad": "invalid", "down": "ok", "big": "big",
            "odd": "odd", "redir": "redir"}
        policy = POLICY.format(port=cls.origin.port, origin=ORIGIN_HOST
            ).replace("redir]", "redir, %s]" % ", ".join(NAMED))
        for name, ph in PH.items():
            if name in NAMED:
                policy += CRED.format(name=name, ph=ph, tok=NAMED[name],
                    tport=cls.tok.port, path="cc").replace(
                    "grant: refresh_token", "grant: client_credentials")
                continue
            policy += CRED.format(name=name, ph=ph, tok=TOKEN_HOST,
                tport=cls.down_port if name == "down" else cls.tok.port,
                path=paths[name])
        # One worker: a head waiting for a token must not hold it.
        cls.gw = T.Gateway(d, cls.dns, {"oauth2.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}}, workers=1)
        entry = "client_id=%s\nclient_secret=%s\nrefresh_token=%s\n" % (
            CLIENT_ID, CLIENT_SECRET, RT0)
        for name in PH:
            r = T.run_sandgate("vault", "set", name + "-oauth", "-c",
                cls.gw.cfg_path, input=entry if name not in NAMED else
                "client_id=%s\nclient_secret=%s\n" % (CLIENT_ID,
                                                      CLIENT_SECRET))
            if r.returncode != 0:
                raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = ssl.create_default_context(cafile=cls.gw.ca_path())

    # -------------------------------------------------------------- helpers

    def fetch(self, name, path="/echo", host=None, extra=""):
        host = host or "%s.test" % name
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.origin.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.send(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s"
            "\r\n%s\r\n" % (path, host, self.origin.port, PH[name],
            extra)).encode())
        resp = c.read_response()
        # No token the endpoint issued ever reaches the client.
        blob = resp.raw_head + resp.body
        for t in self.tok.srv.issued:
            self.assertNotIn(t.encode(), blob, "a token reached the client")
        return resp

    def seen(self, path):
        return [r["seen"] for r in self.origin.requests if r["path"] == path]

    def wait_stale(self):
        """Past the token's fresh time (expires_in 2 s, refresh_before 1 s)."""
        time.sleep(2.2)

    def assert_refused(self, resp, name):
        self.assertEqual(resp.status, 502, resp)
        self.assertEqual(resp.header("X-Sandgate-Reason"),
            "credential-refresh-failed", resp)
        rows = self.gw.wait_audit(reason="credential-refresh-failed",
            credential=name)
        self.assertTrue(rows, "no audit row naming %s: %r" % (
            name, self.gw.audit_rows()[-4:]))

    # -------------------------------------------------------------- the tests

    def test_1_token_swapped_refreshed_rotated(self):
        # (a) the gateway gets a token and swaps it for the placeholder
        r = self.fetch("crm", "/echo/a1")
        self.assertEqual(r.status, 200, r)
        first = self.tok.access
        self.assertIsNotNone(first)
        self.assertEqual(self.seen("/echo/a1"), [first])
        self.assertEqual(len(self.tok.calls()), 1)
        self.assertEqual(self.tok.calls()[0]["form"]["refresh_token"], [RT0])
        # (e) the echo of the header shows the placeholder, not the token
        self.assertEqual(r.header("X-Echo-Authorization"), "Bearer " + PH["crm"])
        self.assertIn(PH["crm"].encode(), r.body)
        # a cached token is used again: no second call
        r = self.fetch("crm", "/echo/a2")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seen("/echo/a2"), [first])
        self.assertEqual(len(self.tok.calls()), 1)
        # (b) expired: a new token, asked for with the rotated refresh token
        self.wait_stale()
        r = self.fetch("crm", "/echo/b1")
        self.assertEqual(r.status, 200, r)
        second = self.tok.access
        self.assertNotEqual(first, second)
        self.assertEqual(self.seen("/echo/b1"), [second])
        calls = self.tok.calls()
        self.assertEqual(len(calls), 2)
        self.assertEqual(calls[1]["form"]["refresh_token"],
            [self.tok.srv.rts[0]])
        # The rotated token reached the vault: a restarted gateway, whose
        # only source is the vault, still gets tokens (the endpoint takes
        # only the latest refresh token).
        self.assertTrue(self.gw.wait_log("rotated refresh token stored",
            timeout=5), self.gw.log_tail())
        self.gw.stop()
        self.gw.start()
        self.wait_stale()
        r = self.fetch("crm", "/echo/b2")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seen("/echo/b2"), [self.tok.access])
        self.assertEqual(len(self.tok.calls()), 3)

    def test_2_concurrent_requests_share_one_refresh(self):
        # (c) N requests with no fresh token: one call to the endpoint
        self.wait_stale()
        before = len(self.tok.calls())
        n = 8
        conns = []
        for i in range(n):
            host = "crm.test"
            c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host,
                self.origin.port))
            self.addCleanup(c.close)
            self.assertEqual(r.status, 200, r)
            c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
            conns.append(c)
        results = [None] * n

        def go(i):
            c = conns[i]
            c.send(("GET /echo/c%d HTTP/1.1\r\nHost: crm.test:%d\r\n"
                "Authorization: Bearer %s\r\n\r\n" % (i, self.origin.port,
                PH["crm"])).encode())
            results[i] = c.read_response()
        threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual([r.status for r in results], [200] * n)
        self.assertEqual(len(self.tok.calls()) - before, 1,
            "concurrent requests made more than one token request")
        tokens = {self.seen("/echo/c%d" % i)[0] for i in range(n)}
        self.assertEqual(tokens, {self.tok.access})

    def test_2b_waiting_head_does_not_hold_the_worker(self):
        # While the token endpoint takes 2 s, other requests on the one
        # worker go on: the waiting head is parked, not blocking.
        self.wait_stale()
        self.tok.srv.delay = 2.0
        self.addCleanup(setattr, self.tok.srv, "delay", 0.4)
        res = {}
        th = threading.Thread(target=lambda: res.update(r=self.fetch("crm",
            "/echo/p1")))
        t0 = time.time()
        th.start()
        time.sleep(0.3)
        took = []
        for i in range(3):
            t1 = time.time()
            c, r = T.open_tunnel(self.gw.port, "other.test:%d" %
                self.origin.port)
            self.addCleanup(c.close)
            self.assertEqual(r.status, 200, r)
            c.sock = self.ctx.wrap_socket(c.sock, server_hostname="other.test")
            c.send(("GET /echo/p-other%d HTTP/1.1\r\nHost: other.test:%d\r\n"
                "\r\n" % (i, self.origin.port)).encode())
            self.assertEqual(c.read_response().status, 200)
            took.append(time.time() - t1)
        th.join(30)
        self.assertEqual(res["r"].status, 200, res)
        self.assertGreater(time.time() - t0, 1.9)
        self.assertLess(max(took), 1.0, "requests waited for the token "
            "fetch: %r" % took)

    def test_2c_http2_stream(self):
        # An HTTP/2 stream (fetches on its worker when stale): same swap.
        self.wait_stale()
        r = T.curl("https://crm.test:%d/echo/h2" % self.origin.port,
            proxy=self.gw.url, args=["--http2", "--cacert", self.gw.ca_path(),
            "-H", "Authorization: Bearer " + PH["crm"]])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.assertEqual(self.seen("/echo/h2"), [self.tok.access])
        for t in self.tok.srv.issued:
            self.assertNotIn(t.encode(), r.body)
        self.assertIn(PH["crm"].encode(), r.body)

    def test_2d_refresh_token_scrubbed(self):
        # An API that echoes the refresh token in use shows the placeholder.
        self.tok.srv.expires_in = 60
        self.addCleanup(setattr, self.tok.srv, "expires_in", 2)
        self.wait_stale()
        self.assertEqual(self.fetch("crm", "/echo/rt0").status, 200)
        rt = self.tok.srv.rt
        r = self.fetch("crm", "/echo/rt", extra="X-Debug: rt=%s\r\n" % rt)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(rt, self.tok.srv.rt)
        self.assertTrue(self.origin.received(rt))
        self.assertNotIn(rt.encode(), r.raw_head + r.body)
        self.assertIn(("X-Debug: rt=%s" % PH["crm"]).encode(), r.body)

    def test_3_invalid_grant_refused_and_audited(self):
        # (d) invalid_grant: refused with the reason, a row names it
        r = self.fetch("bad", "/echo/d1")
        self.assert_refused(r, "bad")
        self.assertEqual(self.seen("/echo/d1"), [])
        self.assertIn(b"invalid_grant", r.body)
        out = T.run_sandgate("audit", "-c", self.gw.cfg_path, "--credential",
            "bad", "--format", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("credential-refresh-failed", out.stdout)
        # backing off: no tight loop against the endpoint
        n = len(self.tok.calls("/invalid"))
        r = self.fetch("bad", "/echo/d2")
        self.assertEqual(r.status, 502, r)
        self.assertEqual(len(self.tok.calls("/invalid")), n)

    def test_4_endpoint_down_refused(self):
        r = self.fetch("down", "/echo/d3")
        self.assert_refused(r, "down")
        self.assertEqual(self.seen("/echo/d3"), [])

    def test_5_hostile_answers(self):
        # a 10 MB answer, an access_token that is not a string, a redirect
        n_ok = len(self.tok.calls("/ok"))
        for name in ("big", "odd", "redir"):
            r = self.fetch(name, "/echo/h-" + name)
            self.assert_refused(r, name)
            self.assertEqual(self.seen("/echo/h-" + name), [])
            self.assertEqual(len(self.tok.calls("/" + name)), 1)
        # the redirect to /ok was not followed
        self.assertEqual(len(self.tok.calls("/ok")), n_ok)
        self.assertTrue(self.gw.alive())

    def test_7_token_url_by_name(self):
        """A token endpoint named by host name: resolved by the gateway's
        own resolver (upstream.resolvers, here dnsmasq), not the C
        library's; a name that does not resolve is a refresh failure."""
        r = self.fetch("named", "/echo/n1")
        self.assertEqual(r.status, 200, r)
        seen = self.seen("/echo/n1")
        self.assertEqual(len(seen), 1, seen)
        with self.tok.srv.lock:
            cc = self.tok.srv.cc
        self.assertTrue(cc and cc.startswith("at-cc-"))
        self.assertEqual(seen[0], cc)
        r = self.fetch("nxname", "/echo/n2")
        self.assert_refused(r, "nxname")
        self.assertIn(b"nx-auth.test", r.body)
        self.assertEqual(self.seen("/echo/n2"), [])

    def test_6_placeholder_elsewhere_is_misuse(self):
        # (f) the placeholder to a host it is not bound to
        r = self.fetch("crm", "/echo/f1", host="other.test")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-misuse")
        self.assertEqual(self.seen("/echo/f1"), [])


BAD_POLICY = """\
policies:
  - name: p
    allow: [ { host: api.example.com, tls: intercept } ]
    credentials: [a, b, c, d]
credentials:
  - name: a
    kind: oauth2
    secret: a-oauth
    hosts: [api.example.com]
  - name: b
    secret: b-oauth
    hosts: [api.example.com]
    oauth2: { token_url: "https://auth.example.com/t" }
  - name: c
    kind: oauth2
    secret: c-oauth
    hosts: [api.example.com]
    oauth2:
      token_url: http://auth.example.com/t
      grant: password
      client_auth: post
      refresh_before: 2h
      scope: "a\\"b"
      tokenurl: x
  - name: d
    kind: oauth2
    secret: d-oauth
    hosts: [api.example.com]
    oauth2:
      token_url: "https://user:pw@auth.example.com/t"
"""


class PolicyCheckTest(unittest.TestCase):
    """policy check: every oauth2 mistake at its line."""

    def test_errors_at_their_lines(self):
        td = T.TempDir("sgtest-oauth2-pc-")
        self.addCleanup(td.cleanup)
        os.makedirs(td.join("pol"))
        with open(td.join("pol", "p.yaml"), "w") as f:
            f.write(BAD_POLICY)
        with open(td.join("sg.yaml"), "w") as f:
            f.write("policies: [%s]\n" % td.join("pol"))
        r = T.run_sandgate("policy", "check", "-c", td.join("sg.yaml"))
        self.assertEqual(r.returncode, 1, r)
        want = [
            (6, "kind: oauth2 needs an oauth2: map"),
            (13, "oauth2: only with kind: oauth2"),
            (19, "token_url: must be an https:// URL"),
            (20, "grant: password is not one of"),
            (21, "client_auth: post is not one of"),
            (22, "refresh_before: a duration"),
            (23, "scope: printable ASCII"),
            (24, 'unknown key "tokenurl" in oauth2'),
            (30, "no user:password@"),
        ]
        for line, text in want:
            self.assertRegex(r.stdout + r.stderr, r"p\.yaml:%d:\d+: [^\n]*%s"
                % (line, re.escape(text)))
        self.assertIn("9 errors", r.stdout + r.stderr)

    def test_explain(self):
        td = T.TempDir("sgtest-oauth2-ex-")
        self.addCleanup(td.cleanup)
        os.makedirs(td.join("pol"))
        with open(td.join("pol", "p.yaml"), "w") as f:
            f.write(POLICY.format(port=443, origin="127.0.0.2") + CRED.format(
                name="crm", ph=PH["crm"], tok="auth.example.com", tport=8443,
                path="oauth/token").replace("grant: refresh_token",
                "grant: client_credentials\n      scope: \"read write\""))
        with open(td.join("sg.yaml"), "w") as f:
            f.write("policies: [%s]\n" % td.join("pol"))
        self.assertEqual(T.run_sandgate("policy", "check", "-c",
            td.join("sg.yaml")).returncode, 1)  # the other credentials are unknown
        with open(td.join("pol", "p.yaml"), "w") as f:
            f.write((POLICY.format(port=443, origin="127.0.0.2") + CRED.format(
                name="crm", ph=PH["crm"], tok="auth.example.com", tport=8443,
                path="oauth/token").replace("grant: refresh_token",
                "grant: client_credentials\n      scope: \"read write\""))
                .replace("[crm, bad, down, big, odd, redir]", "[crm]"))
        r = T.run_sandgate("policy", "explain", "-c", td.join("sg.yaml"),
            "--sandbox", "box-a", "--format", "json", "crm.test:443")
        self.assertEqual(r.returncode, 0, r)
        cred = json.loads(r.stdout)["credentials"][0]
        self.assertEqual(cred["kind"], "oauth2")
        self.assertEqual(cred["oauth2"], {
            "token_url": "https://auth.example.com:8443/oauth/token",
            "grant": "client_credentials", "scope": "read write",
            "client_auth": "basic", "refresh_before_ms": 1000})
        r = T.run_sandgate("policy", "explain", "-c", td.join("sg.yaml"),
            "--sandbox", "box-a", "crm.test:443")
        self.assertIn("token_url: https://auth.example.com:8443/oauth/token",
            r.stdout)


if __name__ == "__main__":
    T.main()
