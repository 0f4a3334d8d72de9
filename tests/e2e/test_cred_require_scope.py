#!/usr/bin/python3
"""
A credential's `require: true` and `scope:` (issue 25, points 4 and 5;
docs/credentials.md "require and scope") with the real gateway, an HTTPS
echo origin on a test CA and secrets in the vault. require: a request to the
bound host without the placeholder where it is swapped -- none, a key of the
sandbox's own, the placeholder in a header the credential does not list -- is
refused, and with it the request passes with the secret. scope: the
placeholder with a method or path outside the scope is refused
(credential-scope), also through `..`, `%2e%2e`, encoded slashes and `//`;
inside the scope it is swapped; without the placeholder outside the scope the
request passes untouched. The same over HTTP/2 (curl --http2), and a policy in
mode: report relaxes neither. Every refusal is a 403 with its reason and a
deny row naming the credential, and the origin never receives the request.
`policy explain` shows both. Set-up, origin and helpers: test_credentials.
"""

import json
import os
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402

REQ_SECRET = 'rq-E2E/require+Secret "r" 0123456789abcdef_v1'
SCOPE_SECRET = 'sc-E2E/scope+Secret "s" 0123456789abcdef_v1'
BOTH_SECRET = 'bo-E2E/both+Secret "b" 0123456789abcdef_v1'
OWN_KEY = "sk-real-looking-0123456789abcdefghijklmnop"
REPORT_SOURCE = "127.0.0.3"
HOSTS = ("req.test", "scope.test", "both.test")

POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
  - id: box-r
    policy: watch
    source: [{report_src}/32]
policies:
  - name: agent
    allow:
      - host: req.test
        ports: [{port}]
        tls: intercept
      - host: scope.test
        ports: [{port}]
        tls: intercept
      - host: both.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [req-key, scope-key, both-key]
  - name: watch
    mode: report
    allow: []
    allow_private: [{origin}/32]
    credentials: [req-key, scope-key]
credentials:
  - name: req-key
    secret: req-secret
    hosts: [req.test]
    headers: [Authorization]
    exclusive: false
    require: true
  - name: scope-key
    secret: scope-secret
    hosts: [scope.test]
    headers: [Authorization]
    scope:
      methods: [GET, HEAD]
      paths: ["/repos/acme/*"]
  - name: both-key
    secret: both-secret
    hosts: [both.test]
    headers: [X-Api-Key]
    require: true
    scope: {{methods: [POST], paths: ["/v1/*"]}}
"""


class RequireScopeTest(C.CredentialsTest):
    """Only the tests below run (load_tests); helpers from the parent."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-credscope-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        pair = cls.pki.leaf("req.test", list(HOSTS))
        cls.bound = C.EchoOrigin("bound", *pair)
        cls.addClassCleanup(cls.bound.stop)
        cls.dns = T.Dnsmasq(d, [(n, C.ORIGIN_HOST) for n in HOSTS])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(port=cls.bound.port, origin=C.ORIGIN_HOST,
                               report_src=REPORT_SOURCE)
        cls.admin_sock = os.path.join(d, "admin.sock")
        cls.gw = T.Gateway(d, cls.dns, {"creds.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert},
            "listen": {"admin": cls.admin_sock}})
        cls.gw.vault_set(("req-secret", REQ_SECRET),
                         ("scope-secret", SCOPE_SECRET),
                         ("both-secret", BOTH_SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.wait_admin(cls.admin_sock)
        cls.ctx = ssl.create_default_context(cafile=cls.gw_ca)
        st, _, doc = C.admin_request(cls.admin_sock, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        listing = {e["id"]: C.placeholders_of(e) for e in doc["sandboxes"]}
        cls.ph = {k: v["placeholder"] for k, v in listing["box-a"].items()}
        cls.ph_r = {k: v["placeholder"] for k, v in listing["box-r"].items()}
        cls.client_data = []

    # -------------------------------------------------------------- helpers

    def at(self, host, path, headers=(), method="GET", source=None,
           body=None):
        return self.fetch(path, headers, host=host, port=self.bound.port,
                          source=source, method=method, body=body)

    def refused(self, resp, marker, cred, reason):
        """403 with reason, a deny row naming cred, nothing at the origin."""
        self.assert_misuse(resp, marker, cred=cred, reason=reason)
        time.sleep(0.1)
        self.assertEqual(self.bound.find(marker), [],
                         "the origin received a refused request")

    def swapped(self, resp, marker, secret, header="Authorization"):
        self.assertEqual(resp.status, 200, resp)
        rec = self.origin_seen(self.bound, marker)
        vals = self.header_of(rec, header)
        self.assertEqual(len(vals), 1, rec)
        self.assertIn(secret, vals[0], rec)
        return rec

    def curl2(self, host, path, headers=(), method="GET"):
        args = ["--http2", "--cacert", self.gw_ca, "-X", method]
        for k, v in headers:
            args += ["-H", "%s: %s" % (k, v)]
        r = T.curl("https://%s:%d%s" % (host, self.bound.port, path),
                   proxy=self.gw.url, args=args)
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.assert_clean(r.body, "h2 response")
        return r

    # -------------------------------------------------------------- require

    def test_r01_require_refuses_without_placeholder(self):
        ph = self.ph["req-key"]
        cases = (
            ("none", []),
            ("own-key", [("Authorization", "Bearer " + OWN_KEY)]),
            ("own-key-other-header", [("X-Api-Key", OWN_KEY)]),
            ("cookie", [("Cookie", "session=" + OWN_KEY)]),
        )
        for name, hdrs in cases:
            marker = "/echo/r01-%s" % name
            with self.subTest(case=name):
                r = self.at("req.test", marker, hdrs)
                self.refused(r, marker, "req-key", "credential-required")
        # The placeholder in a header the credential does not swap is not
        # carried but misused: refused too, as credential-misuse.
        marker = "/echo/r01-wrong-header"
        r = self.at("req.test", marker, [("X-Api-Key", ph)])
        self.refused(r, marker, "req-key", "credential-misuse")
        # ... and the placeholder in the path or body, the same.
        marker = "/echo/r01-in-path-" + ph
        r = self.at("req.test", marker)
        self.refused(r, "/echo/r01-in-path", "req-key", "credential-misuse")
        self.assertFalse(self.bound.received(OWN_KEY))

    def test_r02_require_allows_with_placeholder(self):
        ph = self.ph["req-key"]
        marker = "/echo/r02-bearer"
        r = self.at("req.test", marker, [self.bearer(ph)])
        self.swapped(r, marker, REQ_SECRET)
        marker = "/echo/r02-basic"
        r = self.at("req.test", marker, [("Authorization",
                                           T.basic("x-access-token", ph))])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, marker)["seen"],
                         REQ_SECRET)
        # A POST with a body: any method and path (no scope).
        marker = "/echo/r02-post/any/where"
        r = self.at("req.test", marker, [self.bearer(ph)], method="POST",
                    body=b"hello")
        self.swapped(r, marker, REQ_SECRET)

    def test_r03_exclusive_checked_first(self):
        # both-key: require and exclusive (default). An own key in its header
        # is foreign-credential; none at all is credential-required.
        marker = "/v1/r03-own"
        r = self.at("both.test", marker, [("X-Api-Key", OWN_KEY)],
                    method="POST", body=b"x")
        self.refused(r, marker, "both-key", "foreign-credential")
        marker = "/v1/r03-none"
        r = self.at("both.test", marker, method="POST", body=b"x")
        self.refused(r, marker, "both-key", "credential-required")
        # require and scope: outside the scope without the placeholder is
        # still required; with it, out of scope.
        marker = "/echo/r03-outside-none"
        r = self.at("both.test", marker)
        self.refused(r, marker, "both-key", "credential-required")
        marker = "/echo/r03-outside-ph"
        r = self.at("both.test", marker, [("X-Api-Key", self.ph["both-key"])],
                    method="POST", body=b"x")
        self.refused(r, marker, "both-key", "credential-scope")
        marker = "/v1/r03-ok"
        r = self.at("both.test", marker, [("X-Api-Key", self.ph["both-key"])],
                    method="POST", body=b"x")
        self.swapped(r, marker, BOTH_SECRET, header="X-Api-Key")

    def test_r04_plain_http_never_carries_it(self):
        # A placeholder is swapped only into intercepted TLS: a plain-HTTP
        # request to a required host is refused, with or without one.
        for name, hdrs in (("none", ""), ("own", "Authorization: Bearer %s\r\n"
                                          % OWN_KEY)):
            marker = "/echo/r04-%s" % name
            with self.subTest(case=name):
                r = T.raw_request(self.gw.port, (
                    "GET http://req.test:%d%s HTTP/1.1\r\nHost: req.test:%d"
                    "\r\n%s\r\n" % (self.bound.port, marker, self.bound.port,
                                     hdrs)).encode())
                self.refused(r, marker, "req-key", "credential-required")

    # -------------------------------------------------------------- scope

    def test_s01_scope_inside_swapped(self):
        ph = self.ph["scope-key"]
        for marker in ("/repos/acme/s01-app", "/repos/acme/s01-x/pulls?q=1",
                       "/repos/%61cme/s01-enc"):
            with self.subTest(path=marker):
                r = self.at("scope.test", marker, [self.bearer(ph)])
                self.swapped(r, marker, SCOPE_SECRET)
        marker = "/repos/acme/s01-head"
        r = self.at("scope.test", marker, [self.bearer(ph)], method="HEAD")
        self.assertEqual(r.status, 200, r)
        self.origin_seen(self.bound, marker)

    def test_s02_scope_refuses_wrong_method(self):
        ph = self.ph["scope-key"]
        for method in ("POST", "PUT", "DELETE"):
            marker = "/repos/acme/s02-%s" % method.lower()
            with self.subTest(method=method):
                r = self.at("scope.test", marker, [self.bearer(ph)],
                            method=method, body=b"{}")
                self.refused(r, marker, "scope-key", "credential-scope")

    def test_s03_scope_refuses_path_outside_and_escapes(self):
        ph = self.ph["scope-key"]
        paths = (
            "/repos/other/s03-plain",
            "/repos/acme",
            "/s03-root",
            "/repos/acme/../other/s03-dotdot",
            "/repos/acme/%2e%2e/other/s03-pctdot",
            "/repos/acme/%2E%2E/other/s03-pctDOT",
            "/repos/acme%2f..%2fother/s03-encslash",
            "/repos/acme%2Fs03-encslash2",
            "//repos/acme/../../other/s03-dslash",
            "/repos/acme/..;/other/s03-semi",
            "/repos/acme/%252e%252e/other/s03-double",
            "/repos/acme/s03-bs%5c..%5c..%5cother",
            "/other/s03-query?p=/repos/acme/x",
        )
        for path in paths:
            with self.subTest(path=path):
                r = self.at("scope.test", path, [self.bearer(ph)])
                self.assert_misuse(r, None, cred="scope-key",
                                   reason="credential-scope")
        time.sleep(0.2)
        self.assertEqual([x["path"] for x in self.bound.requests
                          if "s03-" in x["path"]], [])

    def test_s04_scope_without_placeholder_passes_untouched(self):
        marker = "/other/s04-none"
        r = self.at("scope.test", marker, method="POST", body=b"x")
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, marker)
        self.assertEqual(self.header_of(rec, "Authorization"), [])
        # A key of its own outside the scope is still foreign (exclusive).
        marker = "/other/s04-own"
        r = self.at("scope.test", marker, [("Authorization", "Bearer " +
                                            OWN_KEY)])
        self.refused(r, marker, "scope-key", "foreign-credential")

    # -------------------------------------------------------------- HTTP/2

    def test_h01_http2_streams(self):
        ph = self.ph
        r = self.curl2("req.test", "/echo/h01-none")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-required")
        r = self.curl2("req.test", "/echo/h01-own",
                       [("Authorization", "Bearer " + OWN_KEY)])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-required")
        r = self.curl2("req.test", "/echo/h01-ok",
                       [("Authorization", "Bearer " + ph["req-key"])])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/h01-ok")["seen"],
                         REQ_SECRET)
        r = self.curl2("scope.test", "/repos/acme/h01-post",
                       [("Authorization", "Bearer " + ph["scope-key"])],
                       method="POST")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-scope")
        r = self.curl2("scope.test", "/repos/acme/%2e%2e/h01-esc",
                       [("Authorization", "Bearer " + ph["scope-key"])])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-scope")
        r = self.curl2("scope.test", "/repos/acme/h01-in",
                       [("Authorization", "Bearer " + ph["scope-key"])])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(
            self.origin_seen(self.bound, "/repos/acme/h01-in")["seen"],
            SCOPE_SECRET)
        for marker, reason in (("/echo/h01-none", "credential-required"),
                               ("/repos/acme/h01-post", "credential-scope")):
            row = self.audit_row(lambda x, m=marker: m in (x["path"] or ""),
                                 decision="deny", reason=reason)
            self.assertIn(row["credential"], ("req-key", "scope-key"), row)
        time.sleep(0.1)
        for marker in ("/echo/h01-none", "/echo/h01-own",
                       "/repos/acme/h01-post", "h01-esc"):
            self.assertEqual([x for x in self.bound.requests
                              if marker in x["path"]], [], marker)

    # -------------------------------------------------------------- report

    def test_m01_report_mode_does_not_relax(self):
        src = REPORT_SOURCE
        marker = "/echo/m01-none"
        r = self.fetch(marker, host="req.test", port=self.bound.port,
                       source=src)
        self.refused(r, marker, "req-key", "credential-required")
        marker = "/repos/acme/m01-post"
        r = self.fetch(marker, [self.bearer(self.ph_r["scope-key"])],
                       host="scope.test", port=self.bound.port, source=src,
                       method="POST", body=b"x")
        self.refused(r, marker, "scope-key", "credential-scope")
        # The control: report mode passes (no allow rule), with the swap.
        marker = "/echo/m01-ok"
        r = self.fetch(marker, [self.bearer(self.ph_r["req-key"])],
                       host="req.test", port=self.bound.port, source=src)
        self.swapped(r, marker, REQ_SECRET)
        row = self.audit_row(lambda x: marker in (x["path"] or ""))
        self.assertEqual(row["decision"], "report", row)

    # -------------------------------------------------------------- explain

    def test_x01_policy_explain(self):
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "box-a", "--format", "json",
                           "scope.test:%d" % self.bound.port)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        cred = doc["credentials"][0]
        self.assertEqual(cred["name"], "scope-key")
        self.assertEqual(cred["require"], False)
        self.assertEqual(cred["scope"], {"methods": ["GET", "HEAD"],
                                         "paths": ["/repos/acme/*"]})
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "box-a", "--format", "json",
                           "req.test:%d" % self.bound.port)
        cred = json.loads(r.stdout)["credentials"][0]
        self.assertEqual(cred["require"], True)
        self.assertIsNone(cred["scope"])
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "box-a",
                           "both.test:%d" % self.bound.port)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("require: yes", r.stdout)
        self.assertIn("credential-required", r.stdout)
        self.assertIn("scope: methods POST; paths /v1/*", r.stdout)
        self.assertIn("credential-scope", r.stdout)
        for s in (REQ_SECRET, SCOPE_SECRET, BOTH_SECRET):
            self.assertNotIn(s, r.stdout)
        # With --method/--path: swapped inside the scope, not outside.
        for method, path, swapped in (("GET", "/repos/acme/x", True),
                                      ("POST", "/repos/acme/x", False),
                                      ("GET", "/repos/acme/%2e%2e/x", False)):
            r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                               "--sandbox", "box-a", "--format", "json",
                               "--method", method, "--path", path,
                               "scope.test:%d" % self.bound.port)
            self.assertEqual(r.returncode, 0, r.stderr)
            cred = json.loads(r.stdout)["credentials"][0]
            self.assertEqual((cred["swapped"], cred["not_swapped"]),
                             (swapped, None if swapped else
                              "credential-scope"), (method, path))
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "box-a", "--method", "DELETE",
                           "--path", "/repos/acme/x",
                           "scope.test:%d" % self.bound.port)
        self.assertIn("swapped: no: this request is outside its scope", r.stdout)

    def test_x02_policy_check_errors_at_their_line(self):
        d = os.path.join(self.td.path, "check")
        os.makedirs(d)
        gw = T.Gateway(d, self.dns, {"p.yaml": (
            "credentials:\n  - name: c\n    secret: s\n"
            "    hosts: [a.test]\n    require: maybe\n"
            "    scope:\n      methods: [GET, FETCH]\n"
            "      paths: [\"/a/../b\"]\n")})
        path = os.path.join(gw.policy_dir, "p.yaml")
        r = T.run_sandgate("policy", "check", "-c", gw.cfg_path)
        self.assertEqual(r.returncode, 1, r)
        out = r.stdout + r.stderr
        self.assertIn("%s:5:14:" % path, out)
        self.assertIn("%s:7:22:" % path, out)
        self.assertIn("FETCH", out)
        self.assertIn("%s:8:15:" % path, out)


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for name in sorted(vars(RequireScopeTest)):
        if name.startswith("test_"):
            suite.addTest(RequireScopeTest(name))
    return suite


if __name__ == "__main__":
    T.main()
