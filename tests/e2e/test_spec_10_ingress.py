#!/usr/bin/python3
"""
SPEC §10 read line by line, with two sandboxes behind one ingress listener
and the variants a visitor holding one sandbox's token tries on the other:
that token in the header, the cookie `?sg_token=` set for one host sent to
the other, and a keep-alive connection that first passes with a token and
then asks the other sandbox without one. Also: 404 for an unknown sandbox
or port in every spelling, and the token never reaching the guest.
"""

import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

DOMAIN = "sandbox.localhost"
TOKEN_A = "tokA-1f0e9d8c7b6a5"
TOKEN_B = "tokB-a5b6c7d8e9f01"


class SpecIngressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-spec10-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.ga = T.Origin("guest-a", host="127.0.0.2")
        cls.addClassCleanup(cls.ga.stop)
        cls.gb = T.Origin("guest-b", host="127.0.0.3")
        cls.addClassCleanup(cls.gb.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        cls.iport = T.free_port()
        policy = {
            "sandboxes": [
                {"id": "app-a", "policy": "p",
                 "ingress": {"address": "127.0.0.2", "ports": [cls.ga.port],
                             "token_sha256": T.sha256_hex(TOKEN_A)}},
                {"id": "app-b", "policy": "p",
                 "ingress": {"address": "127.0.0.3", "ports": [cls.gb.port],
                             "token_sha256": T.sha256_hex(TOKEN_B)}},
            ],
            "policies": [{"name": "p", "allow": [{"host": "allowed.test"}]}],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy}, extra={
            "listen": {"ingress": "127.0.0.1:%d" % cls.iport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.iport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("ingress not up:\n" + cls.gw.log_tail())
        cls.ha = "%d-app-a.%s" % (cls.ga.port, DOMAIN)
        cls.hb = "%d-app-b.%s" % (cls.gb.port, DOMAIN)

    def req(self, c, path, host, headers=()):
        data = "GET %s HTTP/1.1\r\nHost: %s\r\n" % (path, host)
        data += "".join("%s: %s\r\n" % kv for kv in headers)
        return c.request(data + "\r\n")

    def one(self, path, host, headers=()):
        c = T.Conn(self.iport)
        self.addCleanup(c.close)
        return self.req(c, path, host, headers)

    def test_one_sandbox_token_opens_no_other(self):
        cases = [("/x-hdr", [("X-Sandgate-Token", TOKEN_A)]),
                 ("/x-cookie", [("Cookie", "sg_token=" + TOKEN_A)]),
                 ("/x-query?sg_token=" + TOKEN_A, [])]
        for path, hdrs in cases:
            with self.subTest(path=path):
                r = self.one(path, self.hb, hdrs)
                self.assertEqual(r.status, 401, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "ingress-token-invalid", r)
        self.assertEqual([q for q in self.gb.requests
                          if q["path"].startswith("/x-")], [])
        row = self.gw.wait_audit(kind="ingress", sandbox="app-b", status=401)
        self.assertTrue(row)
        self.assertEqual(row[-1]["decision"], "deny")

    def test_keepalive_decides_each_request(self):
        c = T.Conn(self.iport)
        self.addCleanup(c.close)
        r = self.req(c, "/ka-a", self.ha, [("X-Sandgate-Token", TOKEN_A)])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["origin"], "guest-a")
        try:
            r = self.req(c, "/ka-b", self.hb)
        except (EOFError, ConnectionResetError):
            r = None
        if r is not None:
            self.assertEqual(r.status, 401, r)
        try:
            r = self.req(c, "/ka-a2", self.ha)
        except (EOFError, ConnectionResetError):
            r = None
        if r is not None:
            self.assertEqual(r.status, 401, r)
        time.sleep(0.2)
        self.assertEqual(self.gb.requests_for("/ka-b"), [])
        self.assertEqual(self.ga.requests_for("/ka-a2"), [])

    def test_cookie_flow_and_token_never_reaches_guest(self):
        r = self.one("/q?a=1&sg_token=%s&b=2" % TOKEN_A, self.ha)
        self.assertEqual(r.status, 302, r)
        loc = r.header("Location")
        self.assertNotIn(TOKEN_A, loc)
        self.assertIn("a=1", loc)
        self.assertIn("b=2", loc)
        cookie = r.header("Set-Cookie")
        self.assertIn("HttpOnly", cookie)
        self.assertNotIn("Domain", cookie)
        r = self.one("/headers?a=1", self.ha,
                     [("Cookie", "x=1; sg_token=%s; y=2" % TOKEN_A),
                      ("X-Forwarded-For", "203.0.113.9")])
        self.assertEqual(r.status, 200, r)
        seen = r.json()["headers"]
        blob = repr(seen)
        self.assertNotIn(TOKEN_A, blob)
        self.assertNotIn("203.0.113.9", blob)
        cookies = [v for k, v in seen if k.lower() == "cookie"]
        self.assertEqual(cookies, ["x=1; y=2"], seen)
        r = self.one("/headers", self.ha, [("X-Sandgate-Token", TOKEN_A)])
        self.assertEqual(r.status, 200, r)
        self.assertNotIn(TOKEN_A, repr(r.json()["headers"]))
        for q in self.ga.requests:
            self.assertNotIn(TOKEN_A, q["path"])

    def test_unknown_sandbox_or_port_404(self):
        hosts = ["%d-app-c.%s" % (self.ga.port, DOMAIN),
                 "%d-app-a.%s" % (self.gb.port, DOMAIN),
                 "%d-APP-B.%s" % (self.ga.port, DOMAIN.upper()),
                 "%d-app-a.%s" % (self.ga.port + 65536, DOMAIN),
                 "0-app-a.%s" % DOMAIN, "app-a.%s" % DOMAIN,
                 "%d-app-a.%s.evil.test" % (self.ga.port, DOMAIN)]
        for h in hosts:
            with self.subTest(host=h):
                r = self.one("/nf", h, [("X-Sandgate-Token", TOKEN_A)])
                self.assertIn(r.status, (400, 404), r)
        self.assertEqual(self.ga.requests_for("/nf"), [])
        self.assertEqual(self.gb.requests_for("/nf"), [])


if __name__ == "__main__":
    T.main()
