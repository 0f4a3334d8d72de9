#!/usr/bin/python3
"""
End-to-end tests of issue 22's "path parameters" (docs/policy.md "Path
matching"): Tomcat, Jetty and Spring cut ";..." off every path segment
before routing, so "/admin;x/", "/;jsessionid=x/admin/" and "/a/..;/admin"
reach "/admin/" there. Where a path rule or a path-scoped deny could apply,
a ';' anywhere in the path (raw or %3B, in any segment, the last one too,
with a query after it) is refused with 400 ambiguous-path, leaves a deny
row and reaches no origin: through absolute-form HTTP, HTTP/1.1 inside an
intercepted CONNECT tunnel, and HTTP/2 streams through interception (curl
--http2). Where no path rule applies, the same paths are forwarded as
written. The gateway runs as a default install does (user: sandgate).
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

# What an attacker tries: a path parameter where the servlet container
# drops it, then the spellings that might slip past a check for a raw ';'.
# "{m}" is a marker that tells this request's rows and origin logs apart.
ATTACKS = [
    "/;jsessionid={m}/admin/",
    "/admin;{m}/",
    "/admin;/{m}",
    "/public/{m}/..;/admin",
    "/public/{m}/.;/admin",
    "/admin%3b{m}/",
    "/admin%3B{m}/",
    "/%3Bjsessionid={m}/admin/",
    "/public/{m}/..%3B/admin",
    "/public/{m}/%2e%2e;/admin",
    "/public/{m}/%2E;/admin",
    "/public/{m}%2F;x/admin",
    "/public/{m}/secret;x",
    "/public/{m}/secret;",
    "/public/{m};v=1?q=/admin",
    "/public/{m}/x%3Bv=1?next=1",
]

# Forwarded as written by the path-rule hosts: ';' only in the query.
QUERY_ONLY = [
    "/public/{m}?a;b",
    "/public/{m}?x=%3B/../admin",
]

# Forwarded as written where no path rule applies (matrix parameters).
MATRIX = [
    "/;jsessionid={m}/admin/",
    "/cars;color={m};year=2024/admin;x/",
    "/a/{m}/..;/admin",
    "/items%3Bv=2/{m}",
    "/x/{m};last?q=1",
]


POLICY = """\
sandboxes:
  - id: pp-box
    policy: pp
    source: [127.0.0.1/32]
policies:
  - name: pp
    allow:
      - host: plain.test              # allow[0]: a path allow rule
        ports: [{http}]
        paths: ["/public/*"]
      - host: guarded.test            # allow[1]: a path-scoped deny below
        ports: [{http}]
      - host: open.test               # allow[2]: no path rule
        ports: [{http}]
      - host: tls.test                # allow[3]
        ports: [{https}]
        tls: intercept
        paths: ["/public/*"]
      - host: tlsopen.test            # allow[4]: no path rule
        ports: [{https}]
        tls: intercept
      - host: other.test              # allow[5]: path rule for POST only
        ports: [{http}]
        methods: [POST]
        paths: ["/public/*"]
      - host: other.test              # allow[6]
        ports: [{http}]
        methods: [GET]
    deny:
      - host: guarded.test            # deny[0]
        paths: ["/admin*"]
    allow_private: [{origin}/32]
"""


class PathParamsTest(P.PathRules, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.start("sgtest-pparam-", ("plain.test", "guarded.test",
                                     "open.test", "other.test", "tls.test",
                                     "tlsopen.test"), "pp.yaml", POLICY,
                  tls_names=["tls.test", "tlsopen.test"], user="sandgate")

    # -------------------------------------------------------------- helpers

    def absolute(self, host, path, method="GET"):
        """One absolute-form request on a fresh connection; the Response."""
        port = self.origin.port
        return T.raw_request(self.gw.port, (
            "%s http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
            "Content-Length: 0\r\n\r\n" % (method, host, port, path, host,
                                           port)).encode())

    def h2(self, host, path):
        """curl --http2 through the proxy, path sent as written."""
        return T.curl("https://%s:%d%s" % (host, self.tls_origin.port, path),
                      proxy=self.gw.url, tmp=self.td.path,
                      args=["--http2", "--path-as-is", "--cacert",
                            self.gw_ca])

    def assert_refused(self, resp, path, rule):
        self.assertIsNotNone(resp, "%s: closed without a response" % path)
        self.assertEqual(resp.status, 400, "%s: %r" % (path, resp))
        self.assertEqual(resp.header("X-Sandgate-Reason"), "ambiguous-path",
                         "%s: %r" % (path, resp))
        self.assertIn(rule.encode(), resp.body)

    def row(self, kind, host, port, path, decision, status, rule, reason,
            ip, method="GET"):
        self.audit.expect({"path": path}, decision=decision, kind=kind,
                          sandbox="pp-box", client=AC.LOOPBACK_CLIENT,
                          host=host, ip=ip, port=port, method=method,
                          status=status, rule=rule, reason=reason,
                          credential=None,
                          bytes_up=NOTHING if decision == "deny" else ANY,
                          bytes_down=NOTHING if decision == "deny" else ANY)

    def refused_row(self, kind, host, port, path, rule, method="GET"):
        self.row(kind, host, port, path, "deny", 400, rule, "ambiguous-path",
                 None, method)

    def allowed_row(self, kind, host, port, path, rule, method="GET"):
        self.row(kind, host, port, path, "allow", 200, rule, None,
                 ORIGIN_HOST, method)

    # ------------------------------------------- absolute-form HTTP/1.1

    def test_absolute_path_allow_rule_refuses(self):
        for tmpl in ATTACKS:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("plain.test", path)
                self.assert_refused(resp, path, "pp:allow[0]")
                self.refused_row("http", "plain.test", self.origin.port,
                                 path, "pp:allow[0]")
                self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    def test_absolute_path_scoped_deny_refuses(self):
        # A ';' anywhere, not only next to "admin": the deny cannot tell.
        for tmpl in ATTACKS + ["/files/{m};x/report"]:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("guarded.test", path)
                self.assert_refused(resp, path, "pp:deny[0]")
                self.refused_row("http", "guarded.test", self.origin.port,
                                 path, "pp:deny[0]")
                self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    def test_absolute_curl(self):
        # A real client: curl keeps ';' and %3B as written.
        for tmpl in ("/admin;{m}/", "/;jsessionid={m}/admin/",
                     "/admin%3B{m}/"):
            path, m = mark(tmpl)
            with self.subTest(path=path):
                r = T.curl("http://guarded.test:%d%s" % (self.origin.port,
                                                         path),
                           proxy=self.gw.url, args=["--path-as-is"],
                           tmp=self.td.path)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "ambiguous-path", r)
                self.refused_row("http", "guarded.test", self.origin.port,
                                 path, "pp:deny[0]")
                self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    def test_absolute_query_semicolon_passes(self):
        for tmpl in QUERY_ONLY:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("plain.test", path)
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(self.saw(self.origin, m), [path])
                self.allowed_row("http", "plain.test", self.origin.port,
                                 path, "pp:allow[0]")
        self.audit.check()

    def test_absolute_no_path_rule_forwards_untouched(self):
        for tmpl in MATRIX:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.absolute("open.test", path)
                self.assertEqual(resp.status, 200, resp)
                # Byte for byte what the client wrote.
                self.assertEqual(self.saw(self.origin, m), [path])
                self.assertEqual(resp.json()["path"], path)
                self.allowed_row("http", "open.test", self.origin.port,
                                 path, "pp:allow[2]")
        self.audit.check()

    def test_path_rule_for_another_method_does_not_apply(self):
        # other.test's path rule is for POST: a GET's ';' is not ambiguous
        # to any rule, a POST's is.
        path, m = mark("/admin;{m}/")
        resp = self.absolute("other.test", path)
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(self.saw(self.origin, m), [path])
        self.allowed_row("http", "other.test", self.origin.port, path,
                         "pp:allow[6]")
        path, m = mark("/public/{m};x")
        resp = self.absolute("other.test", path, method="POST")
        self.assert_refused(resp, path, "pp:allow[5]")
        self.refused_row("http", "other.test", self.origin.port, path,
                         "pp:allow[5]", method="POST")
        self.assertEqual(self.saw(self.origin, m), [])
        self.audit.check()

    # ------------------------------ HTTP/1.1 in an intercepted CONNECT

    def test_intercepted_refuses(self):
        for tmpl in ATTACKS:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.intercepted("tls.test", path)
                self.assert_refused(resp, path, "pp:allow[3]")
                self.refused_row("connect", "tls.test", self.tls_origin.port,
                                 path, "pp:allow[3]")
                self.assertEqual(self.saw(self.tls_origin, m), [])
        self.audit.check()

    def test_intercepted_no_path_rule_forwards_untouched(self):
        for tmpl in MATRIX:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                resp = self.intercepted("tlsopen.test", path)
                self.assertIsNotNone(resp)
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(self.saw(self.tls_origin, m), [path])
                self.allowed_row("connect", "tlsopen.test",
                                 self.tls_origin.port, path, "pp:allow[4]")
        self.audit.check()

    # ------------------------------------ HTTP/2 through interception

    def test_h2_refuses(self):
        for tmpl in ATTACKS:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                r = self.h2("tls.test", path)
                self.assertEqual(r.info.get("http_version"), "2", r)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.header("x-sandgate-reason"),
                                 "ambiguous-path", r)
                self.refused_row("connect", "tls.test", self.tls_origin.port,
                                 path, "pp:allow[3]")
                self.assertEqual(self.saw(self.tls_origin, m), [])
        self.audit.check()

    def test_h2_no_path_rule_forwards_untouched(self):
        for tmpl in MATRIX:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                r = self.h2("tlsopen.test", path)
                self.assertEqual(r.info.get("http_version"), "2", r)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.saw(self.tls_origin, m), [path])
                self.allowed_row("connect", "tlsopen.test",
                                 self.tls_origin.port, path, "pp:allow[4]")
        self.audit.check()

    def test_h2_query_semicolon_passes(self):
        for tmpl in QUERY_ONLY:
            path, m = mark(tmpl)
            with self.subTest(path=path):
                r = self.h2("tls.test", path)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(self.saw(self.tls_origin, m), [path])
                self.allowed_row("connect", "tls.test", self.tls_origin.port,
                                 path, "pp:allow[3]")
        self.audit.check()


if __name__ == "__main__":
    T.main()
