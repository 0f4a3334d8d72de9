#!/usr/bin/python3
"""
End-to-end tests of issue 12's "one canonical path" (SPEC §4, docs/policy.md
"Path matching"): where a path rule or a path-scoped deny could apply, a
path that origin servers read in different ways (%2F, %5C, \\, ';' or %2e in
a dot segment, double encoding, %00, overlong UTF-8, ...) is refused with
400 and X-Sandgate-Reason: ambiguous-path, reaches no origin and leaves a
deny row; with no path rule on the host it is decided on the host alone.
Absolute-form HTTP through the proxy and HTTPS intercepted in a CONNECT
tunnel; raw sockets (and curl --path-as-is) so that nothing rewrites the path.
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402
from auditcheck import ANY  # noqa: E402
from pathrules import NOTHING, ORIGIN_HOST, mark  # noqa: E402
import pathrules as P  # noqa: E402

# Each holds a marker ("m" + a number) so that rows and origin logs of one
# request are told apart; "{m}" is replaced per request.
ATTACKS = [
    "/public/{m}/..%2Fadmin",
    "/public/{m}/..%2fadmin",
    "/public/{m}%2F..%2F..%2Fadmin",
    "/public/{m}/..%5Cadmin",
    "/public/{m}/..%5cadmin",
    "/public/{m}/..\\admin",
    "/public/{m}\\..\\..\\admin",
    "/public/{m}/..;/admin",
    "/public/{m}/..;x=1/admin",
    "/public/{m}/.;/admin",
    "/public/{m}/..%3B/admin",
    "/public/{m}/%2e%2e/admin",
    "/public/{m}/%2E%2E/admin",
    "/public/{m}/.%2e/admin",
    "/public/{m}/%2e./admin",
    "/public/{m}/%252e%252e/admin",
    "/public/{m}/..%252fadmin",
    "/public/{m}/%2541dmin",
    "/public/{m}/%00",
    "/public/{m}/a%00.json",
    "/public/{m}/%0d%0aX-Evil:%201",
    "/public/{m}/..%c0%afadmin",
    "/public/{m}/..%C0%AFadmin",
    "/public/{m}/..%ef%bc%8fadmin",
    "/public/{m}//../../admin",
    "/public/{m}/;x/../../admin",
]

# Passed to the origin as written: the positive controls.
CONTROLS = [
    "/public/{m}/a%20b",
    "/public/{m}/%7Euser",
    "/public/{m}/caf%C3%A9",
    "/public/{m}/x?next=/../admin%2F",
]


POLICY = """\
sandboxes:
  - id: amb-box
    policy: amb
    source: [127.0.0.1/32]
policies:
  - name: amb
    allow:
      - host: plain.test              # allow[0]
        ports: [{http}]
        paths: ["/public/*"]
      - host: open.test               # allow[1]: no path rule
        ports: [{http}]
      - host: guarded.test            # allow[2]: a path-scoped deny below
        ports: [{http}]
      - host: tls.test                # allow[3]
        ports: [{https}]
        tls: intercept
        paths: ["/public/*"]
    deny:
      - host: guarded.test            # deny[0]
        paths: ["/admin*"]
    allow_private: [{origin}/32]
"""


class AmbiguousPathTest(P.PathRules, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.start("sgtest-path-", ("plain.test", "open.test", "guarded.test",
                                   "tls.test"), "amb.yaml", POLICY)

    # -------------------------------------------------------------- helpers

    def absolute(self, host, path):
        """One absolute-form request on a fresh connection; the Response."""
        url = "http://%s:%d%s" % (host, self.origin.port, path)
        return T.raw_request(self.gw.port, ("GET %s HTTP/1.1\r\nHost: %s:%d\r\n"
                             "\r\n" % (url, host, self.origin.port)).encode())

    def assert_refused(self, resp, path, rule):
        self.assertIsNotNone(resp, "%s: closed without a response" % path)
        self.assertEqual(resp.status, 400, "%s: %r" % (path, resp))
        self.assertEqual(resp.header("X-Sandgate-Reason"), "ambiguous-path",
                         "%s: %r" % (path, resp))
        self.assertIn(b"ambiguous-path", resp.body)
        self.assertIn(rule.encode(), resp.body)

    def refused_row(self, host, path, rule):
        self.audit.expect({"path": path}, decision="deny", kind="http",
                          sandbox="amb-box", client=AC.LOOPBACK_CLIENT,
                          host=host, ip=None, port=self.origin.port,
                          method="GET", status=400, rule=rule,
                          reason="ambiguous-path", credential=None,
                          bytes_up=NOTHING, bytes_down=NOTHING)

    def allowed_row(self, host, path, rule):
        self.audit.expect({"path": path}, decision="allow", kind="http",
                          sandbox="amb-box", client=AC.LOOPBACK_CLIENT,
                          host=host, ip=ORIGIN_HOST, port=self.origin.port,
                          method="GET", status=200, rule=rule, reason=None,
                          credential=None, bytes_up=0, bytes_down=ANY)

    # ---------------------------------------------------------------- tests

    def test_absolute_path_rule_refuses(self):
        for tmpl in ATTACKS:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("plain.test", path)
                self.assert_refused(resp, path, "amb:allow[0]")
                self.refused_row("plain.test", path, "amb:allow[0]")
                self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    def test_absolute_curl_path_as_is(self):
        for tmpl in ("/public/{m}/..%2Fadmin", "/public/{m}/..;/admin",
                     "/public/{m}/%2e%2e/admin"):
            path, m = mark(tmpl)
            with self.subTest(path=path):
                r = T.curl("http://plain.test:%d%s" % (self.origin.port, path),
                           proxy=self.gw.url, args=["--path-as-is"],
                           tmp=self.td.path)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "ambiguous-path", r)
                self.refused_row("plain.test", path, "amb:allow[0]")
                self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    def test_path_scoped_deny_refuses(self):
        for tmpl in ATTACKS:
            path, m = mark(tmpl.replace("/public/", "/files/"))
            with self.subTest(path=path):
                resp = self.absolute("guarded.test", path)
                self.assert_refused(resp, path, "amb:deny[0]")
                self.refused_row("guarded.test", path, "amb:deny[0]")
                self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    def test_path_scoped_deny_still_denies_plain_forms(self):
        # ("/admin;x/..." is ambiguous, not plain: test_path_params.py.)
        for tmpl in ("/admin/{m}", "/%61dmin/{m}", "/files/../admin/{m}",
                     "//admin/{m}"):
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("guarded.test", path)
                self.assertEqual(resp.status, 403, resp)
                self.assertEqual(resp.header("X-Sandgate-Reason"),
                                 "policy-deny", resp)
                self.assertEqual(self.saw(self.origin, m), [])

    def test_no_path_rule_decides_on_host(self):
        # open.test has no path rule: an ambiguous path is the origin's business.
        for tmpl in ("/x/{m}/..%2Fadmin", "/x/{m}/..;/admin",
                     "/x/{m}/%2e%2e/admin", "/x/{m}/%00"):
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("open.test", path)
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(self.saw(self.origin, m), [path])
                self.allowed_row("open.test", path, "amb:allow[1]")
        self.audit.check()

    def test_controls_pass(self):
        for host, rule in (("plain.test", "amb:allow[0]"),
                           ("guarded.test", "amb:allow[2]")):
            for tmpl in CONTROLS:
                path, m = mark(tmpl)
                with self.subTest(host=host, path=path):
                    resp = self.absolute(host, path)
                    self.assertEqual(resp.status, 200, resp)
                    self.assertEqual(self.saw(self.origin, m), [path])
                    self.allowed_row(host, path, rule)
        self.audit.check()

    def test_intercepted_refuses(self):
        for tmpl in ATTACKS:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.intercepted("tls.test", path)
                self.assert_refused(resp, path, "amb:allow[3]")
                rows = self.gw.wait_audit(path=path)
                self.assertEqual(len(rows), 1, rows)
                row = rows[0]
                self.assertEqual((row["kind"], row["decision"], row["status"],
                                  row["rule"], row["reason"], row["host"],
                                  row["method"]),
                                 ("connect", "deny", 400, "amb:allow[3]",
                                  "ambiguous-path", "tls.test", "GET"))
                self.assertEqual(self.saw(self.tls_origin, m), [])

    def test_intercepted_controls_pass(self):
        for tmpl in CONTROLS:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.intercepted("tls.test", path)
                self.assertIsNotNone(resp)
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(self.saw(self.tls_origin, m), [path])
                rows = self.gw.wait_audit(path=path)
                self.assertEqual([(r["decision"], r["rule"]) for r in rows],
                                 [("allow", "amb:allow[3]")])


if __name__ == "__main__":
    T.main()
