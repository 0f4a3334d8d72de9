#!/usr/bin/python3
"""
End-to-end tests of the explicit HTTP proxy's absolute-form path (SPEC §4,
§5): policy decisions by name, wildcard, port, method and path, IP literals,
internal answers, identity and proxy auth, malformed framing, keep-alive,
hop-by-hop headers, request bodies and upstream failures. Every request
allowed or refused is also checked against its audit row (docs/audit.md).
"""

import base64
import itertools
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402
from auditcheck import ANY  # noqa: E402

TOKEN = "e2e-token-9f2c1d"
NOTHING = AC.one_of(0, None)   # bytes of a refused request: none went through
# SPEC §4: "a decision no rule made is named default-deny or no-identity";
# a request refused before it was parsed (or identified) is such a decision.
UNRULED = AC.one_of("default-deny", "no-identity")
_seq = itertools.count(1)


def uniq(tag):
    return "/%s-%d-%d" % (tag, os.getpid(), next(_seq))


class HttpProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.a = T.Origin("origin-a", host="127.0.0.2")
        cls.addClassCleanup(cls.a.stop)
        cls.a2 = T.Origin("origin-a2", host="127.0.0.2")
        cls.addClassCleanup(cls.a2.stop)
        cls.b = T.Origin("origin-b", host="127.0.0.3")
        cls.addClassCleanup(cls.b.stop)
        cls.bh = T.Blackhole("127.0.0.2")
        cls.addClassCleanup(cls.bh.stop)
        cls.closed_port = T.free_port("127.0.0.2")
        names = ["allowed.test", "wild.test", "a.wild.test",
                 "deep.sub.wild.test", "evil.wild.test", "api.test",
                 "other.test", "closed.test", "blackhole.test"]
        recs = [(n, "127.0.0.2") for n in names] + [("internal.test", "127.0.0.3")]
        cls.dns = T.Dnsmasq(cls.td.path, recs)
        cls.addClassCleanup(cls.dns.stop)
        pa, pb = cls.a.port, cls.b.port
        policy = {
            "sandboxes": [
                T.local_sandbox("main"),
                T.token_sandbox("tok", TOKEN, "hostonly"),
            ],
            "policies": [
                {"name": "main",
                 "allow": [
                     {"host": "allowed.test", "ports": [pa]},            # allow[0]
                     {"host": "*.wild.test", "ports": [pa]},             # allow[1]
                     {"host": "api.test", "ports": [pa],                 # allow[2]
                      "methods": ["GET", "HEAD"], "paths": ["/v1/*"]},
                     {"cidr": "127.0.0.0/8", "ports": [pa, pb]},         # allow[3]
                     {"host": "internal.test", "ports": [pb]},           # allow[4]
                     {"host": "nx.test", "ports": [pa]},                 # allow[5]
                     {"host": "closed.test", "ports": [cls.closed_port]},
                     {"host": "blackhole.test", "ports": [cls.bh.port]},
                 ],
                 "deny": [{"host": "evil.wild.test"}],
                 "allow_private": ["127.0.0.2/32"]},
                {"name": "hostonly",
                 "allow": [{"host": "allowed.test", "ports": [pa]}],
                 "allow_private": ["127.0.0.2/32"]},
            ],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"main.yaml": policy},
                           extra={"limits": {"max_header_bytes": 16384}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.tok_proxy = "http://tok:%s@127.0.0.1:%d" % (TOKEN, cls.gw.port)

    # -------------------------------------------------------------- helpers

    def setUp(self):
        self.audit = AC.Audit(self, self.gw)

    def get(self, url, proxy=None, args=(), timeout=20):
        return T.curl(url, proxy=proxy or self.gw.url, args=args,
                      timeout=timeout, tmp=self.td.path)

    def _row(self, client, path, want, kw):
        want.update(kw)
        where = {"path": path}
        if isinstance(client, str):
            where["client"] = client
        else:
            want["client"] = client or AC.LOOPBACK_CLIENT
        self.audit.expect(where, **want)

    def allowed(self, client, path, down, **kw):
        """The allow row of one forwarded request (client None: any loopback one)."""
        self._row(client, path, dict(
            decision="allow", kind="http", sandbox="local", host="allowed.test",
            ip="127.0.0.2", port=self.a.port, method="GET", status=200,
            rule="main:allow[0]", reason=None, credential=None, bytes_up=0,
            bytes_down=down), kw)

    def refused(self, client, path, status, reason, rule, **kw):
        """The deny (or error, for 5xx) row of one refused request."""
        self._row(client, path, dict(
            decision="error" if status in (502, 504) else "deny", kind="http",
            sandbox="local", host="allowed.test", ip=None, port=self.a.port,
            method="GET", status=status, rule=rule, reason=reason,
            credential=None, bytes_up=NOTHING, bytes_down=NOTHING), kw)

    def malformed(self, client, status, reason):
        """A request refused before it was parsed: nothing but the client is
        known. Found by client and no path: a row of an earlier test whose
        client had the same ephemeral port has a path."""
        self.audit.expect({"client": client, "path": None}, decision="deny",
                          kind="http", sandbox=None, host=None, ip=None,
                          port=None, method=None, status=status,
                          rule=UNRULED, reason=reason, credential=None,
                          bytes_up=NOTHING, bytes_down=NOTHING)

    def assertDenied(self, r, status, reason):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), reason, r)

    def assertTextBody(self, r):
        ct = r.header("Content-Type") or ""
        self.assertTrue(ct.startswith("text/plain"), r)
        text = r.body.decode("utf-8", "replace").strip()
        self.assertTrue(text, r)
        self.assertNotIn("\n", text, r)

    def assertOrigin(self, r, origin, path, host):
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["origin"], origin.name, r)
        self.assertEqual(doc["path"], path, r)
        self.assertEqual(doc["host"], host, r)

    def raw(self, data, method="GET", source=None):
        """(response or None, client addr:port) of data sent on a fresh connection."""
        return AC.raw_request(self.gw.port, data, method=method, source=source)

    # -------------------------------------------------------------- names

    def test_allowed_name(self):
        p = uniq("ok")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p))
        self.assertOrigin(r, self.a, p, "allowed.test:%d" % self.a.port)
        self.assertEqual(self.a.requests_for(p)[0]["method"], "GET")
        self.allowed(AC.client_of_curl(r), p, len(r.body))
        self.audit.check()

    def test_denied_name(self):
        p = uniq("deny")
        r = self.get("http://other.test:%d%s" % (self.a.port, p))
        self.assertDenied(r, 403, "policy-deny")
        self.assertTextBody(r)
        self.assertFalse(self.a.saw_path(p))
        self.refused(AC.client_of_curl(r), p, 403, "policy-deny", "default-deny",
                     host="other.test")
        self.audit.check()

    def test_name_case_and_trailing_dot(self):
        p = uniq("case")
        r = self.get("http://ALLOWED.Test.:%d%s" % (self.a.port, p))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.a.saw_path(p))
        # the row names the host as normalised: lower case, no trailing dot
        self.allowed(AC.client_of_curl(r), p, len(r.body))
        self.audit.check()

    def test_wildcard(self):
        for host, rule in (("a.wild.test", "main:allow[1]"),
                           ("deep.sub.wild.test", "main:allow[1]"),
                           ("wild.test", "default-deny"),
                           ("evil.wild.test", "main:deny[0]")):
            ok = "allow" in rule
            with self.subTest(host=host):
                p = uniq("wild")
                r = self.get("http://%s:%d%s" % (host, self.a.port, p))
                if ok:
                    self.assertOrigin(r, self.a, p, "%s:%d" % (host, self.a.port))
                    self.allowed(AC.client_of_curl(r), p, len(r.body),
                                 host=host, rule=rule)
                else:
                    self.assertDenied(r, 403, "policy-deny")
                    self.assertFalse(self.a.saw_path(p))
                    self.refused(AC.client_of_curl(r), p, 403, "policy-deny",
                                 rule, host=host)
        self.audit.check()

    def test_port_not_allowed(self):
        before = self.a2.conn_count
        p = uniq("port")
        r = self.get("http://allowed.test:%d%s" % (self.a2.port, p))
        self.assertDenied(r, 403, "policy-deny")
        self.assertEqual(self.a2.conn_count, before)
        self.assertFalse(self.a2.saw_path(p))
        self.refused(AC.client_of_curl(r), p, 403, "policy-deny", "default-deny",
                     port=self.a2.port)
        self.audit.check()

    def test_methods_and_paths(self):
        base = "http://api.test:%d" % self.a.port
        cases = [
            ("GET", "/v1/models", True),
            ("GET", "/v1/a/b/c", True),                 # * spans /
            ("GET", "/v1/x?next=/admin", True),         # query ignored
            ("HEAD", "/v1/models", True),
            ("POST", "/v1/models", False),
            ("GET", "/admin", False),
            ("GET", "/admin?/v1/x", False),             # query never matches
            ("GET", "/v2/v1/x", False),
        ]
        for method, path, ok in cases:
            with self.subTest(method=method, path=path):
                tag = uniq("mp")
                if "?" in path:
                    full = path.replace("?", tag + "?", 1)
                else:
                    full = path + tag
                args = ["-X", method] if method != "HEAD" else ["-I"]
                if method == "POST":
                    args += ["--data-binary", "x=1"]
                r = self.get(base + full, args=args)
                # the row keeps the path as sent, query included
                if ok:
                    self.assertEqual(r.status, 200, r)
                    self.assertTrue(self.a.saw_path(tag))
                    down = 0 if method == "HEAD" else len(r.body)  # -I: body file holds the head
                    self.allowed(AC.client_of_curl(r), full, down,
                                 host="api.test", method=method,
                                 rule="main:allow[2]")
                else:
                    self.assertDenied(r, 403, "policy-deny")
                    self.assertFalse(self.a.saw_path(tag))
                    self.refused(AC.client_of_curl(r), full, 403, "policy-deny",
                                 "default-deny", host="api.test", method=method)
        self.audit.check()

    def test_internal_answer_prohibited(self):
        before = self.b.conn_count
        p = uniq("internal")
        r = self.get("http://internal.test:%d%s" % (self.b.port, p))
        self.assertDenied(r, 403, "destination-ip-prohibited")
        self.assertEqual(self.b.conn_count, before)
        # the row keeps the allow rule the address check overrode, and the
        # address it refused (docs/audit.md: ip)
        self.refused(AC.client_of_curl(r), p, 403, "destination-ip-prohibited",
                     "main:allow[4]", host="internal.test", port=self.b.port,
                     ip="127.0.0.3")
        self.audit.check()

    def test_nxdomain(self):
        p = uniq("nx")
        r = self.get("http://nx.test:%d%s" % (self.a.port, p))
        self.assertDenied(r, 502, "dns-error")
        self.refused(AC.client_of_curl(r), p, 502, "dns-error", "main:allow[5]",
                     host="nx.test")
        self.audit.check()

    def test_invalid_host(self):
        p = uniq("inv")
        req = ("GET http://bad..test:%d%s HTTP/1.1\r\nHost: bad..test:%d\r\n"
               "Connection: close\r\n\r\n" % (self.a.port, p, self.a.port))
        r, client = self.raw(req)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "invalid-host", r)
        self.assertFalse(self.a.saw_path(p))
        # the name asked for, as it came; no rule made this decision
        self.refused(client, p, 403, "invalid-host", "default-deny",
                     host="bad..test")
        self.audit.check()

    # -------------------------------------------------------------- IP literals

    FORMS = ["127.0.0.2", "2130706434", "0177.0.0.2", "0x7f000002",
             "[::ffff:127.0.0.2]", "[::ffff:7f00:2]"]

    def test_ip_literal_forms_cidr_rule(self):
        for form in self.FORMS:
            with self.subTest(form=form):
                p = uniq("ip")
                req = ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                       "Connection: close\r\n\r\n" % (form, self.a.port, p,
                                                      form, self.a.port))
                r, client = self.raw(req)
                self.assertIsNotNone(r, form)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["origin"], "origin-a")
                self.assertTrue(self.a.saw_path(p))
                # every form is recorded as the canonical address
                self.allowed(client, p, len(r.body), host="127.0.0.2",
                             rule="main:allow[3]")
        self.audit.check()

    def test_ip_literal_forms_host_rules_only(self):
        auth = T.basic("tok", TOKEN)
        for form in self.FORMS:
            with self.subTest(form=form):
                p = uniq("iphost")
                req = ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                       "Proxy-Authorization: %s\r\nConnection: close\r\n\r\n"
                       % (form, self.a.port, p, form, self.a.port, auth))
                r, client = self.raw(req)
                self.assertIsNotNone(r, form)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
                self.assertFalse(self.a.saw_path(p))
                self.refused(client, p, 403, "policy-deny", "default-deny",
                             sandbox="tok", host="127.0.0.2")
        self.audit.check()

    def test_ip_literal_not_in_allow_private(self):
        # cidr 127.0.0.0/8 allows it, but allow_private covers only .2
        before = self.b.conn_count
        for form in ("127.0.0.3", "0x7f000003", "[::ffff:127.0.0.3]"):
            with self.subTest(form=form):
                p = uniq("ippriv")
                req = ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                       "Connection: close\r\n\r\n" % (form, self.b.port, p,
                                                      form, self.b.port))
                r, client = self.raw(req)
                self.assertIsNotNone(r, form)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "destination-ip-prohibited", r)
                self.refused(client, p, 403, "destination-ip-prohibited",
                             "main:allow[3]", host="127.0.0.3",
                             port=self.b.port, ip="127.0.0.3")
        self.assertEqual(self.b.conn_count, before)
        self.audit.check()

    # -------------------------------------------------------------- identity

    def test_no_identity_407(self):
        p = uniq("noid")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p),
                     args=["--interface", "127.0.0.9"])
        self.assertDenied(r, 407, "no-identity")
        self.assertEqual(r.header("Proxy-Authenticate"), 'Basic realm="sandgate"', r)
        raw, client = self.raw("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                               "Host: allowed.test:%d\r\nConnection: close\r\n\r\n"
                               % (self.a.port, p, self.a.port), source="127.0.0.9")
        self.assertEqual(raw.status, 407, raw)
        self.assertFalse(self.a.saw_path(p))
        # SPEC §4: a decision no rule made is named no-identity; the
        # destination asked for is known and recorded
        for c in (AC.client_of_curl(r), client):
            self.assertTrue(c.startswith("127.0.0.9:"), c)
            self.refused(c, p, 407, "no-identity", "no-identity", sandbox=None)
        self.audit.check()

    def keep_alive(self, source, requests):
        """Requests (host, path, headers) on one connection from source
        (None: 127.0.0.1); (their responses, the client's addr:port)."""
        c = T.Conn(self.gw.port, source=source)
        try:
            out = [c.request("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                             "%s\r\n" % (h, self.a.port, p, h, self.a.port, x))
                   for h, p, x in requests]
            return out, "%s:%d" % c.sock.getsockname()
        finally:
            c.close()

    def test_identity_is_each_requests_own(self):
        """
        On a kept-alive connection each request says who it is: an identity
        (or its policy) never carries to the next request on it.
        """
        p = [uniq("idk%d" % i) for i in range(6)]
        tok = "Proxy-Authorization: Basic %s\r\n" % base64.b64encode(
            ("tok:%s" % TOKEN).encode()).decode()
        # An unidentified source: the token's request, then none.
        (r1, r2), client = self.keep_alive("127.0.0.9", [
            ("allowed.test", p[0], tok), ("allowed.test", p[1], "")])
        self.assertEqual(r1.status, 200, r1)
        self.assertEqual((r2.status, r2.header("X-Sandgate-Reason")),
                         (407, "no-identity"), r2)
        self.assertTrue(self.a.saw_path(p[0]))
        self.assertFalse(self.a.saw_path(p[1]))
        self.allowed(client, p[0], ANY, sandbox="tok", rule="hostonly:allow[0]")
        self.refused(client, p[1], 407, "no-identity", "no-identity",
                     sandbox=None)
        # A source that names sandbox local: the token's sandbox for its
        # request only; the next, without one, is local's again, under
        # local's policy (hostonly would refuse wild.test).
        (r3, r4), client = self.keep_alive(None, [
            ("allowed.test", p[2], tok), ("a.wild.test", p[3], "")])
        self.assertEqual((r3.status, r4.status), (200, 200), (r3, r4))
        self.allowed(client, p[2], ANY, sandbox="tok", rule="hostonly:allow[0]")
        self.allowed(client, p[3], ANY, host="a.wild.test", rule="main:allow[1]")
        # ... and the other way round: local first, then the token's
        # request is decided under hostonly, which refuses wild.test.
        (r5, r6), client = self.keep_alive(None, [
            ("a.wild.test", p[4], ""), ("a.wild.test", p[5], tok)])
        self.assertEqual((r5.status, r6.status), (200, 403), (r5, r6))
        self.assertFalse(self.a.saw_path(p[5]))
        self.allowed(client, p[4], ANY, host="a.wild.test", rule="main:allow[1]")
        self.refused(client, p[5], 403, "policy-deny", "default-deny",
                     sandbox="tok", host="a.wild.test")
        self.audit.check()

    def test_wrong_token_407(self):
        p = uniq("badtok")
        url = "http://allowed.test:%d%s" % (self.a.port, p)
        for who, proxy, src in (
                ("wrong token, unidentified source",
                 "http://tok:wrong@127.0.0.1:%d" % self.gw.port, "127.0.0.9"),
                ("wrong token, identified source",
                 "http://tok:wrong@127.0.0.1:%d" % self.gw.port, None),
                ("unknown sandbox",
                 "http://nobody:%s@127.0.0.1:%d" % (TOKEN, self.gw.port), None)):
            with self.subTest(who=who):
                args = ["--interface", src] if src else []
                r = self.get(url, proxy=proxy, args=args)
                self.assertDenied(r, 407, "proxy-auth-failed")
                # no sandbox, not even the one the source address names
                self.refused(AC.client_of_curl(r), p, 407, "proxy-auth-failed",
                             "no-identity", sandbox=None)
        self.assertFalse(self.a.saw_path(p))
        self.audit.check()

    def test_right_token(self):
        p = uniq("tok")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p),
                     proxy=self.tok_proxy, args=["--interface", "127.0.0.9"])
        self.assertOrigin(r, self.a, p, "allowed.test:%d" % self.a.port)
        self.allowed(AC.client_of_curl(r), p, len(r.body), sandbox="tok",
                     rule="hostonly:allow[0]")
        # the token's policy decides, not the source address's
        p2 = uniq("tok")
        r = self.get("http://a.wild.test:%d%s" % (self.a.port, p2),
                     proxy=self.tok_proxy)
        self.assertDenied(r, 403, "policy-deny")
        self.refused(AC.client_of_curl(r), p2, 403, "policy-deny", "default-deny",
                     sandbox="tok", host="a.wild.test")
        p = uniq("tokreq")
        with T.session(self.tok_proxy) as s:
            resp = s.get("http://allowed.test:%d%s" % (self.a.port, p), timeout=10)
        self.assertEqual(resp.status_code, 200, resp.text)
        self.assertEqual(resp.json()["path"], p)
        self.allowed(None, p, len(resp.content), sandbox="tok",
                     rule="hostonly:allow[0]")
        self.audit.check()

    # -------------------------------------------------------------- framing

    REASON_OF = {400: "bad-request", 414: "uri-too-long", 431: "header-too-large"}

    def test_malformed_requests(self):
        pa = self.a.port
        host = "allowed.test:%d" % pa

        def req(tag, extra, body="", method="GET"):
            p = uniq(tag)
            return p, ("%s http://%s%s HTTP/1.1\r\nHost: %s\r\n%s\r\n%s"
                       % (method, host, p, host, extra, body))

        big = "".join("X-Filler-%02d: %s\r\n" % (i, "f" * 1000) for i in range(20))
        cases = [
            ("cl-te", 400, req("clte", "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",
                               "0\r\n\r\nX", "POST")),
            ("te-cl", 400, req("tecl", "Transfer-Encoding: chunked\r\nContent-Length: 6\r\n",
                               "0\r\n\r\nX", "POST")),
            ("dup-cl", 400, req("dupcl", "Content-Length: 3\r\nContent-Length: 4\r\n",
                                "abcd", "POST")),
            ("obs-fold", 400, req("fold", "X-Fold: a\r\n  b\r\n")),
            ("bare-lf", 400, req("lf", "X-A: b\nX-B: c\r\n")),
            ("bare-cr", 400, req("cr", "X-A: b\rX-B: c\r\n")),
            ("nul", 400, req("nul", "X-A: a\x00b\r\n")),
            ("long-line", 414, req("long" + "a" * 9000, "")),
            ("big-head", 431, req("bighead", big)),
        ]
        for name, status, (path, data) in cases:
            with self.subTest(case=name):
                r, client = self.raw(data)
                self.assertIsNotNone(r, "%s: closed without a response" % name)
                self.assertEqual(r.status, status, r)
                self.malformed(client, status, self.REASON_OF[status])
        time.sleep(0.3)
        for name, status, (path, data) in cases:
            self.assertFalse(self.a.saw_path(path[:40]), name)
        self.assertTrue(self.gw.alive())
        self.audit.check()

    def test_garbage_request_line(self):
        for data, status in (("GARBAGE\r\n\r\n", 400), ("GET\r\n\r\n", 400),
                             ("GET http://allowed.test/ HTTP/9.9\r\n"
                              "Host: allowed.test\r\n\r\n", 505)):
            with self.subTest(data=data):
                r, client = self.raw(data)
                self.assertIsNotNone(r)
                self.assertEqual(r.status, status, r)
                # a refused request, not an allowed one that failed: deny
                self.malformed(client, status, "bad-request")
        self.audit.check()

    # -------------------------------------------------------------- keep-alive

    def test_keepalive_raw_two_requests_one_connection(self):
        pa = self.a.port
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            before = self.a.conn_count
            p1, p2 = uniq("ka"), uniq("ka")
            r1 = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                           "Host: allowed.test:%d\r\n\r\n" % (pa, p1, pa))
            r2 = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                           "Host: allowed.test:%d\r\n\r\n" % (pa, p2, pa))
            self.assertEqual(r1.json()["path"], p1)
            self.assertEqual(r2.json()["path"], p2)
            # keep-alive upstream too: at most one new origin connection
            self.assertLessEqual(self.a.conn_count - before, 1)
        finally:
            c.close()
        self.allowed(client, p1, len(r1.body))
        self.allowed(client, p2, len(r2.body))
        self.audit.check()

    def _origin_conns(self):
        """Connections origin a holds open (the gateway's)."""
        with self.a.srv.lock:
            return len(self.a.srv.open_socks)

    def test_keepalive_kept_origins_bounded(self):
        # One client connection walking through destinations, each a
        # decision of its own (host names, an IP literal) on one origin:
        # every response leaves its origin connection kept alive in the
        # worker's pool for the next exchange of that same decision. Kept
        # connections are one per decision in use, not one per request: a
        # destination asked for again after others is answered on the
        # connection its decision left (bounded per worker by the pool,
        # and in time by upstream.keepalive_timeout).
        pa = self.a.port
        dests = [("allowed.test", pa, "127.0.0.2", "main:allow[0]", self.a),
                 ("a.wild.test", pa, "127.0.0.2", "main:allow[1]", self.a),
                 ("127.0.0.2", pa, "127.0.0.2", "main:allow[3]", self.a),
                 ("deep.sub.wild.test", pa, "127.0.0.2", "main:allow[1]",
                  self.a),
                 ("allowed.test", pa, "127.0.0.2", "main:allow[0]", self.a)]
        deadline = time.time() + 10 * T.SLOW
        while self._origin_conns() > 0 and time.time() < deadline:
            time.sleep(0.05)        # what earlier tests' connections left
        self.assertEqual(self._origin_conns(), 0)
        c = T.Conn(self.gw.port)
        done = []
        seen = set()
        try:
            client = AC.client_of_conn(c)
            for host, port, ip, rule, origin in dests:
                p = uniq("kept-bound")
                again = host in seen
                before = self.a.conn_count
                seen.add(host)
                r = c.request("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                              "\r\n" % (host, port, p, host, port))
                self.assertOrigin(r, origin, p, "%s:%d" % (host, port))
                done.append((p, len(r.body), host, port, ip, rule))
                self.assertLessEqual(self._origin_conns(), len(seen),
                                     "origin connections kept after %s" % host)
                if again:
                    self.assertEqual(self.a.conn_count, before,
                                     "%s again: not on its kept connection" % host)
                else:
                    self.assertEqual(self.a.conn_count, before + 1,
                                     "%s: another decision's connection" % host)
        finally:
            c.close()
        for p, down, host, port, ip, rule in done:
            self.allowed(client, p, down, host=host, port=port, ip=ip,
                         rule=rule)
        self.audit.check()

    def test_keepalive_then_refused_same_connection(self):
        # each request's row describes that request, not the one before it
        pa = self.a.port
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            p1, p2 = uniq("ka-ok"), uniq("ka-deny")
            r1 = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                           "Host: allowed.test:%d\r\n\r\n" % (pa, p1, pa))
            self.assertEqual(r1.status, 200, r1)
            r2 = c.request("GET http://other.test:%d%s HTTP/1.1\r\n"
                           "Host: other.test:%d\r\n\r\n" % (pa, p2, pa))
            self.assertEqual(r2.status, 403, r2)
        finally:
            c.close()
        self.allowed(client, p1, len(r1.body))
        self.refused(client, p2, 403, "policy-deny", "default-deny",
                     host="other.test")
        self.audit.check()

    def test_keepalive_curl_reuses_proxy_connection(self):
        p1, p2 = uniq("curlka"), uniq("curlka")
        u1 = "http://allowed.test:%d%s" % (self.a.port, p1)
        u2 = "http://allowed.test:%d%s" % (self.a.port, p2)
        r = self.get(u1, args=["-v", "-o", "/dev/null", u2])
        self.assertEqual(r.rc, 0, r)
        self.assertIn("Re-using existing connection", r.stderr)
        # which body went to which file is curl's business: some bytes each
        self.allowed(None, p1, AC.at_least(1))
        self.allowed(None, p2, AC.at_least(1))
        found = self.audit.check()
        # one proxy connection: both rows name the same client
        self.assertEqual(found[0][0]["client"], found[1][0]["client"], found)

    def test_keepalive_requests_session(self):
        paths = []
        with T.session(self.gw.url) as s:
            for _ in range(3):
                p = uniq("sess")
                resp = s.get("http://allowed.test:%d%s" % (self.a.port, p), timeout=10)
                self.assertEqual(resp.status_code, 200)
                self.assertEqual(resp.json()["path"], p)
                self.allowed(None, p, len(resp.content))
                paths.append(p)
            managers = list(s.get_adapter("http://").proxy_manager.values())
            self.assertEqual(len(managers), 1)
            pool = managers[0].connection_from_host("127.0.0.1", self.gw.port, "http")
            self.assertEqual(pool.num_connections, 1)
        found = self.audit.check()
        self.assertEqual(len({f[0]["client"] for f in found}), 1, found)

    def test_pipelined_requests(self):
        pa = self.a.port
        p1, p2, p3 = uniq("pipe"), uniq("pipe"), uniq("pipe")
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            c.send("".join("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                           % (pa, p, pa) for p in (p1, p2, p3)))
            for p in (p1, p2, p3):
                r = c.read_response()
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["path"], p)
                self.allowed(client, p, len(r.body))
        finally:
            c.close()
        self.audit.check()

    def test_denied_request_body_is_not_a_request(self):
        # the body of a refused request must never be parsed as the next request
        pa = self.a.port
        sm = uniq("smuggled")
        inner = ("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                 % (pa, sm, pa))
        for target, status in (("other.test:%d" % pa, 403), ("allowed.test:%d" % pa, 407)):
            with self.subTest(target=target):
                src = "127.0.0.9" if status == 407 else None
                c = T.Conn(self.gw.port, source=src)
                try:
                    client = AC.client_of_conn(c)
                    c.send("POST http://%s/x HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s"
                           % (target, target, len(inner), inner))
                    r = c.read_response()
                    self.assertEqual(r.status, status, r)
                    if status == 403:
                        self.refused(client, "/x", 403, "policy-deny",
                                     "default-deny", host="other.test",
                                     method="POST")
                    else:
                        self.refused(client, "/x", 407, "no-identity",
                                     "no-identity", sandbox=None, method="POST")
                    legit = uniq("legit")
                    try:
                        c.send("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                               % (pa, legit, pa))
                        r2 = c.read_response()
                    except (EOFError, ConnectionResetError, BrokenPipeError):
                        r2 = None   # closing after a refusal is fine
                    if r2 is not None and r2.status == 200:
                        self.assertEqual(r2.json()["path"], legit, r2)
                        self.allowed(client, legit, len(r2.body))
                finally:
                    c.close()
        time.sleep(0.2)
        self.assertFalse(self.a.saw_path(sm))
        self.audit.check()
        self.assertEqual(self.gw.audit_rows(path=sm), [])

    def test_absolute_uri_wins_over_host_header(self):
        # the URI names the destination; a different Host must not reach the origin
        pa = self.a.port
        p = uniq("hostmix")
        r, client = self.raw("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: other.test:%d\r\n"
                             "Connection: close\r\n\r\n" % (pa, p, pa))
        self.assertIsNotNone(r)
        self.assertIn(r.status, (200, 400, 403), r)
        for req in self.a.requests_for(p):
            self.assertEqual(req["host"], "allowed.test:%d" % pa, req)
        if r.status == 200:
            self.assertEqual(r.json()["host"], "allowed.test:%d" % pa, r)
            self.allowed(client, p, len(r.body))
        else:
            # refused: the row still names the URI's host, never the Host header's
            self.refused(client, p, r.status, r.header("X-Sandgate-Reason"),
                         ANY)
        self.audit.check()

    def test_http10_client(self):
        pa = self.a.port
        p = uniq("http10")
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            r = c.request("GET http://allowed.test:%d%s HTTP/1.0\r\n\r\n" % (pa, p))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["path"], p)
            self.assertTrue(c.closed_by_peer(5), "HTTP/1.0 connection left open")
        finally:
            c.close()
        self.allowed(client, p, len(r.body))
        self.audit.check()

    # -------------------------------------------------------------- headers

    def test_hop_by_hop_removed_and_via_added(self):
        pa = self.a.port
        req = ("GET http://allowed.test:%d/headers HTTP/1.1\r\n"
               "Host: allowed.test:%d\r\n"
               "Proxy-Authorization: %s\r\n"
               "Connection: keep-alive, X-Hop-Secret\r\n"
               "Keep-Alive: timeout=5, max=7\r\n"
               "Proxy-Connection: keep-alive\r\n"
               "TE: trailers\r\n"
               "Upgrade: sgtest/1\r\n"
               "X-Hop-Secret: leaked\r\n"
               "X-End-To-End: kept\r\n"
               "User-Agent: sgtest\r\n\r\n" % (pa, pa, T.basic("tok", TOKEN)))
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            r = c.request(req)
        finally:
            c.close()
        self.assertEqual(r.status, 200, r)
        seen = {}
        for k, v in r.json()["headers"]:
            seen.setdefault(k.lower(), []).append(v)
        for gone in ("proxy-authorization", "proxy-connection", "te",
                     "upgrade", "x-hop-secret"):
            self.assertNotIn(gone, seen, seen)
        self.assertNotIn("timeout=5, max=7", seen.get("keep-alive", []), seen)
        for v in seen.get("connection", []):
            self.assertNotIn("x-hop-secret", v.lower(), seen)
        self.assertEqual(seen.get("x-end-to-end"), ["kept"], seen)
        self.assertEqual(seen.get("host"), ["allowed.test:%d" % pa], seen)
        via = ",".join(seen.get("via", []))
        self.assertRegex(via, r"(^|,)\s*1\.1 sandgate\b", seen)
        self.allowed(client, "/headers", len(r.body), sandbox="tok",
                     rule="hostonly:allow[0]")
        self.audit.check()

    # -------------------------------------------------------------- bodies

    def test_post_content_length(self):
        data = os.urandom(300000)
        p = uniq("upload")
        with T.session(self.gw.url) as s:
            resp = s.post("http://allowed.test:%d%s" % (self.a.port, p),
                          data=data, timeout=20)
        self.assertEqual(resp.status_code, 200, resp.text)
        doc = resp.json()
        self.assertEqual(doc["method"], "POST")
        self.assertEqual(doc["body_len"], len(data))
        self.assertEqual(doc["body_sha256"], T.sha256_hex(data))
        self.allowed(None, p, len(resp.content), method="POST",
                     bytes_up=len(data))
        self.audit.check()

    def test_post_chunked(self):
        parts = [os.urandom(n) for n in (1, 4096, 70000, 3, 100000)]

        def gen():
            for p in parts:
                yield p
        data = b"".join(parts)
        p = uniq("chunked")
        with T.session(self.gw.url) as s:
            resp = s.post("http://allowed.test:%d%s" % (self.a.port, p),
                          data=gen(), timeout=20)
        self.assertEqual(resp.status_code, 200, resp.text)
        doc = resp.json()
        self.assertEqual(doc["body_len"], len(data))
        self.assertEqual(doc["body_sha256"], T.sha256_hex(data))
        # bytes_up counts the body as it went on the wire: chunk framing too
        wire = sum(len("%x\r\n" % len(x)) + len(x) + 2 for x in parts) + 5
        self.allowed(None, p, len(resp.content), method="POST", bytes_up=wire)
        self.audit.check()

    def test_expect_100_continue(self):
        data = os.urandom(200000)
        path = os.path.join(self.td.path, "upload.bin")
        with open(path, "wb") as f:
            f.write(data)
        p = uniq("expect")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p),
                     args=["--data-binary", "@" + path, "-H", "Expect: 100-continue"])
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["body_len"], len(data))
        self.assertEqual(doc["body_sha256"], T.sha256_hex(data))
        self.allowed(AC.client_of_curl(r), p, len(r.body), method="POST",
                     bytes_up=len(data))
        self.audit.check()

    def test_raw_chunked_then_next_request(self):
        pa = self.a.port
        body = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            p1 = uniq("rawchunk")
            r = c.request("POST http://allowed.test:%d%s HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "%s" % (pa, p1, pa, body))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body_sha256"], T.sha256_hex(b"hello world"))
            self.allowed(client, p1, len(r.body), method="POST",
                         bytes_up=len(body))
            p = uniq("after-chunk")
            r = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\n\r\n" % (pa, p, pa))
            self.assertEqual(r.json()["path"], p)
            self.allowed(client, p, len(r.body))
        finally:
            c.close()
        self.audit.check()

    def test_head(self):
        pa = self.a.port
        c = T.Conn(self.gw.port)
        try:
            client = AC.client_of_conn(c)
            r = c.request("HEAD http://allowed.test:%d/bytes/1000 HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\n\r\n" % (pa, pa), method="HEAD")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("Content-Length"), "1000")
            self.allowed(client, "/bytes/1000", 0, method="HEAD")
            # the HEAD response had no body: the next response parses cleanly
            p = uniq("after-head")
            r = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\n\r\n" % (pa, p, pa))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["path"], p)
            self.allowed(client, p, len(r.body))
        finally:
            c.close()
        r = self.get("http://allowed.test:%d/bytes/1234" % pa, args=["-I"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Content-Length"), "1234")
        self.allowed(AC.client_of_curl(r), "/bytes/1234", 0, method="HEAD")
        self.audit.check()

    def test_response_body_intact(self):
        n = 5 * 1024 * 1024 + 17
        with T.session(self.gw.url) as s:
            resp = s.get("http://allowed.test:%d/bytes/%d" % (self.a.port, n), timeout=30)
        self.assertEqual(resp.status_code, 200)
        self.assertEqual(len(resp.content), n)
        self.assertEqual(T.sha256_hex(resp.content), T.pattern_sha256(n))
        self.allowed(None, "/bytes/%d" % n, n)
        self.audit.check()

    def test_long_path_kept(self):
        # docs/audit.md: the path as sent, at most 4096 bytes kept
        pa = self.a.port
        for n in (3000, 6000):
            with self.subTest(n=n):
                tag = uniq("longpath")
                p = tag + "/" + "p" * (n - len(tag) - 1)
                r, client = self.raw("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                                     "Host: allowed.test:%d\r\nConnection: close\r\n\r\n"
                                     % (pa, p, pa))
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["path"], p)
                self.audit.expect(
                    {"client": client}, decision="allow", kind="http",
                    sandbox="local", host="allowed.test", ip="127.0.0.2",
                    port=pa, method="GET", path=p[:4096], status=200,
                    rule="main:allow[0]", reason=None, credential=None,
                    bytes_up=0, bytes_down=len(r.body))
        self.audit.check()

    # -------------------------------------------------------------- upstream

    def test_upstream_connect_refused_502(self):
        p = uniq("closed")
        r = self.get("http://closed.test:%d%s" % (self.closed_port, p))
        self.assertDenied(r, 502, "upstream-connect-error")
        # allowed, then the origin failed: an error row under the allow rule
        self.refused(AC.client_of_curl(r), p, 502, "upstream-connect-error",
                     "main:allow[6]", host="closed.test", port=self.closed_port,
                     ip=AC.one_of(None, "127.0.0.2"))
        self.audit.check()

    def test_upstream_connect_timeout_504(self):
        if not self.bh.works():
            self.skipTest("this kernel does not drop SYNs to a full accept queue")
        t = time.time()
        p = uniq("blackhole")
        r = self.get("http://blackhole.test:%d%s" % (self.bh.port, p), timeout=30)
        self.assertEqual(r.status, 504, r)
        self.assertGreaterEqual(time.time() - t, 2.5)
        self.refused(AC.client_of_curl(r), p, 504, "upstream-timeout",
                     "main:allow[7]", host="blackhole.test", port=self.bh.port,
                     ip=AC.one_of(None, "127.0.0.2"), duration_ms=AC.at_least(2500))
        self.audit.check()

    # -------------------------------------------------------------- audit

    def test_audit_rows(self):
        # one allow and one deny, each found by client and path, every column checked
        p = uniq("audit-allow")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p))
        self.assertEqual(r.status, 200, r)
        self.allowed(AC.client_of_curl(r), p, len(r.body))
        p = uniq("audit-deny")
        r = self.get("http://other.test:%d%s" % (self.a.port, p))
        self.assertEqual(r.status, 403, r)
        self.refused(AC.client_of_curl(r), p, 403, "policy-deny", "default-deny",
                     host="other.test")
        found = self.audit.check()
        # the writer keeps one chain: ids rise, each row links to the one before
        rows = {r["id"]: r for r in self.gw.audit_rows()}
        for f in found:
            row = f[0]
            if row["id"] > 1:
                self.assertEqual(row["prev_hash"], rows[row["id"] - 1]["hash"], row)


if __name__ == "__main__":
    T.main()
