#!/usr/bin/python3
"""
End-to-end tests of the explicit HTTP proxy's absolute-form path (SPEC §4,
§5): policy decisions by name, wildcard, port, method and path, IP literals,
internal answers, identity and proxy auth, malformed framing, keep-alive,
hop-by-hop headers, request bodies and upstream failures.
"""

import itertools
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

TOKEN = "e2e-token-9f2c1d"
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

    def get(self, url, proxy=None, args=(), timeout=20):
        return T.curl(url, proxy=proxy or self.gw.url, args=args,
                      timeout=timeout, tmp=self.td.path)

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
        return T.raw_request(self.gw.port, data, method=method, source=source)

    # -------------------------------------------------------------- names

    def test_allowed_name(self):
        p = uniq("ok")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p))
        self.assertOrigin(r, self.a, p, "allowed.test:%d" % self.a.port)
        self.assertEqual(self.a.requests_for(p)[0]["method"], "GET")

    def test_denied_name(self):
        p = uniq("deny")
        r = self.get("http://other.test:%d%s" % (self.a.port, p))
        self.assertDenied(r, 403, "policy-deny")
        self.assertTextBody(r)
        self.assertFalse(self.a.saw_path(p))

    def test_name_case_and_trailing_dot(self):
        p = uniq("case")
        r = self.get("http://ALLOWED.Test.:%d%s" % (self.a.port, p))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.a.saw_path(p))

    def test_wildcard(self):
        for host, ok in (("a.wild.test", True), ("deep.sub.wild.test", True),
                         ("wild.test", False), ("evil.wild.test", False)):
            with self.subTest(host=host):
                p = uniq("wild")
                r = self.get("http://%s:%d%s" % (host, self.a.port, p))
                if ok:
                    self.assertOrigin(r, self.a, p, "%s:%d" % (host, self.a.port))
                else:
                    self.assertDenied(r, 403, "policy-deny")
                    self.assertFalse(self.a.saw_path(p))

    def test_port_not_allowed(self):
        before = self.a2.conn_count
        p = uniq("port")
        r = self.get("http://allowed.test:%d%s" % (self.a2.port, p))
        self.assertDenied(r, 403, "policy-deny")
        self.assertEqual(self.a2.conn_count, before)
        self.assertFalse(self.a2.saw_path(p))

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
                if ok:
                    self.assertEqual(r.status, 200, r)
                    self.assertTrue(self.a.saw_path(tag))
                else:
                    self.assertDenied(r, 403, "policy-deny")
                    self.assertFalse(self.a.saw_path(tag))

    def test_internal_answer_prohibited(self):
        before = self.b.conn_count
        p = uniq("internal")
        r = self.get("http://internal.test:%d%s" % (self.b.port, p))
        self.assertDenied(r, 403, "destination-ip-prohibited")
        self.assertEqual(self.b.conn_count, before)

    def test_nxdomain(self):
        r = self.get("http://nx.test:%d/" % self.a.port)
        self.assertDenied(r, 502, "dns-error")

    def test_invalid_host(self):
        p = uniq("inv")
        req = ("GET http://bad..test:%d%s HTTP/1.1\r\nHost: bad..test:%d\r\n"
               "Connection: close\r\n\r\n" % (self.a.port, p, self.a.port))
        r = self.raw(req)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "invalid-host", r)
        self.assertFalse(self.a.saw_path(p))

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
                r = self.raw(req)
                self.assertIsNotNone(r, form)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["origin"], "origin-a")
                self.assertTrue(self.a.saw_path(p))

    def test_ip_literal_forms_host_rules_only(self):
        auth = T.basic("tok", TOKEN)
        for form in self.FORMS:
            with self.subTest(form=form):
                p = uniq("iphost")
                req = ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                       "Proxy-Authorization: %s\r\nConnection: close\r\n\r\n"
                       % (form, self.a.port, p, form, self.a.port, auth))
                r = self.raw(req)
                self.assertIsNotNone(r, form)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
                self.assertFalse(self.a.saw_path(p))

    def test_ip_literal_not_in_allow_private(self):
        # cidr 127.0.0.0/8 allows it, but allow_private covers only .2
        before = self.b.conn_count
        for form in ("127.0.0.3", "0x7f000003", "[::ffff:127.0.0.3]"):
            with self.subTest(form=form):
                req = ("GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n"
                       "Connection: close\r\n\r\n" % (form, self.b.port,
                                                      form, self.b.port))
                r = self.raw(req)
                self.assertIsNotNone(r, form)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "destination-ip-prohibited", r)
        self.assertEqual(self.b.conn_count, before)

    # -------------------------------------------------------------- identity

    def test_no_identity_407(self):
        p = uniq("noid")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p),
                     args=["--interface", "127.0.0.9"])
        self.assertDenied(r, 407, "no-identity")
        self.assertEqual(r.header("Proxy-Authenticate"), 'Basic realm="sandgate"', r)
        raw = self.raw("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n"
                       "Connection: close\r\n\r\n" % (self.a.port, p, self.a.port),
                       source="127.0.0.9")
        self.assertEqual(raw.status, 407, raw)
        self.assertFalse(self.a.saw_path(p))

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
        self.assertFalse(self.a.saw_path(p))

    def test_right_token(self):
        p = uniq("tok")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p),
                     proxy=self.tok_proxy, args=["--interface", "127.0.0.9"])
        self.assertOrigin(r, self.a, p, "allowed.test:%d" % self.a.port)
        # the token's policy decides, not the source address's
        r = self.get("http://a.wild.test:%d%s" % (self.a.port, uniq("tok")),
                     proxy=self.tok_proxy)
        self.assertDenied(r, 403, "policy-deny")
        p = uniq("tokreq")
        with T.session(self.tok_proxy) as s:
            resp = s.get("http://allowed.test:%d%s" % (self.a.port, p), timeout=10)
        self.assertEqual(resp.status_code, 200, resp.text)
        self.assertEqual(resp.json()["path"], p)

    # -------------------------------------------------------------- framing

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
                r = self.raw(data)
                self.assertIsNotNone(r, "%s: closed without a response" % name)
                self.assertEqual(r.status, status, r)
        time.sleep(0.3)
        for name, status, (path, data) in cases:
            self.assertFalse(self.a.saw_path(path[:40]), name)
        self.assertTrue(self.gw.alive())

    def test_garbage_request_line(self):
        for data in ("GARBAGE\r\n\r\n", "GET\r\n\r\n",
                     "GET http://allowed.test/ HTTP/9.9\r\nHost: allowed.test\r\n\r\n"):
            with self.subTest(data=data):
                r = self.raw(data)
                self.assertIsNotNone(r)
                self.assertIn(r.status, (400, 505), r)

    # -------------------------------------------------------------- keep-alive

    def test_keepalive_raw_two_requests_one_connection(self):
        pa = self.a.port
        c = T.Conn(self.gw.port)
        try:
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

    def test_keepalive_curl_reuses_proxy_connection(self):
        u1 = "http://allowed.test:%d%s" % (self.a.port, uniq("curlka"))
        u2 = "http://allowed.test:%d%s" % (self.a.port, uniq("curlka"))
        r = self.get(u1, args=["-v", "-o", "/dev/null", u2])
        self.assertEqual(r.rc, 0, r)
        self.assertIn("Re-using existing connection", r.stderr)

    def test_keepalive_requests_session(self):
        with T.session(self.gw.url) as s:
            for _ in range(3):
                p = uniq("sess")
                resp = s.get("http://allowed.test:%d%s" % (self.a.port, p), timeout=10)
                self.assertEqual(resp.status_code, 200)
                self.assertEqual(resp.json()["path"], p)
            managers = list(s.get_adapter("http://").proxy_manager.values())
            self.assertEqual(len(managers), 1)
            pool = managers[0].connection_from_host("127.0.0.1", self.gw.port, "http")
            self.assertEqual(pool.num_connections, 1)

    def test_pipelined_requests(self):
        pa = self.a.port
        p1, p2, p3 = uniq("pipe"), uniq("pipe"), uniq("pipe")
        c = T.Conn(self.gw.port)
        try:
            c.send("".join("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                           % (pa, p, pa) for p in (p1, p2, p3)))
            for p in (p1, p2, p3):
                r = c.read_response()
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["path"], p)
        finally:
            c.close()

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
                    c.send("POST http://%s/x HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s"
                           % (target, target, len(inner), inner))
                    r = c.read_response()
                    self.assertEqual(r.status, status, r)
                    legit = uniq("legit")
                    try:
                        c.send("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                               % (pa, legit, pa))
                        r2 = c.read_response()
                    except (EOFError, ConnectionResetError, BrokenPipeError):
                        r2 = None   # closing after a refusal is fine
                    if r2 is not None and r2.status == 200:
                        self.assertEqual(r2.json()["path"], legit, r2)
                finally:
                    c.close()
        time.sleep(0.2)
        self.assertFalse(self.a.saw_path(sm))

    def test_absolute_uri_wins_over_host_header(self):
        # the URI names the destination; a different Host must not reach the origin
        pa = self.a.port
        p = uniq("hostmix")
        r = self.raw("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: other.test:%d\r\n"
                     "Connection: close\r\n\r\n" % (pa, p, pa))
        self.assertIsNotNone(r)
        self.assertIn(r.status, (200, 400, 403), r)
        for req in self.a.requests_for(p):
            self.assertEqual(req["host"], "allowed.test:%d" % pa, req)
        if r.status == 200:
            self.assertEqual(r.json()["host"], "allowed.test:%d" % pa, r)

    def test_http10_client(self):
        pa = self.a.port
        p = uniq("http10")
        c = T.Conn(self.gw.port)
        try:
            r = c.request("GET http://allowed.test:%d%s HTTP/1.0\r\n\r\n" % (pa, p))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["path"], p)
            self.assertTrue(c.closed_by_peer(5), "HTTP/1.0 connection left open")
        finally:
            c.close()

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

    # -------------------------------------------------------------- bodies

    def test_post_content_length(self):
        data = os.urandom(300000)
        with T.session(self.gw.url) as s:
            resp = s.post("http://allowed.test:%d/upload" % self.a.port,
                          data=data, timeout=20)
        self.assertEqual(resp.status_code, 200, resp.text)
        doc = resp.json()
        self.assertEqual(doc["method"], "POST")
        self.assertEqual(doc["body_len"], len(data))
        self.assertEqual(doc["body_sha256"], T.sha256_hex(data))

    def test_post_chunked(self):
        parts = [os.urandom(n) for n in (1, 4096, 70000, 3, 100000)]

        def gen():
            for p in parts:
                yield p
        data = b"".join(parts)
        with T.session(self.gw.url) as s:
            resp = s.post("http://allowed.test:%d/chunked" % self.a.port,
                          data=gen(), timeout=20)
        self.assertEqual(resp.status_code, 200, resp.text)
        doc = resp.json()
        self.assertEqual(doc["body_len"], len(data))
        self.assertEqual(doc["body_sha256"], T.sha256_hex(data))

    def test_expect_100_continue(self):
        data = os.urandom(200000)
        path = os.path.join(self.td.path, "upload.bin")
        with open(path, "wb") as f:
            f.write(data)
        r = self.get("http://allowed.test:%d/expect" % self.a.port,
                     args=["--data-binary", "@" + path, "-H", "Expect: 100-continue"])
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["body_len"], len(data))
        self.assertEqual(doc["body_sha256"], T.sha256_hex(data))

    def test_raw_chunked_then_next_request(self):
        pa = self.a.port
        c = T.Conn(self.gw.port)
        try:
            r = c.request("POST http://allowed.test:%d/rawchunk HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" % (pa, pa))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body_sha256"], T.sha256_hex(b"hello world"))
            p = uniq("after-chunk")
            r = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\n\r\n" % (pa, p, pa))
            self.assertEqual(r.json()["path"], p)
        finally:
            c.close()

    def test_head(self):
        pa = self.a.port
        c = T.Conn(self.gw.port)
        try:
            r = c.request("HEAD http://allowed.test:%d/bytes/1000 HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\n\r\n" % (pa, pa), method="HEAD")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("Content-Length"), "1000")
            # the HEAD response had no body: the next response parses cleanly
            p = uniq("after-head")
            r = c.request("GET http://allowed.test:%d%s HTTP/1.1\r\n"
                          "Host: allowed.test:%d\r\n\r\n" % (pa, p, pa))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["path"], p)
        finally:
            c.close()
        r = self.get("http://allowed.test:%d/bytes/1234" % pa, args=["-I"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Content-Length"), "1234")

    def test_response_body_intact(self):
        n = 5 * 1024 * 1024 + 17
        with T.session(self.gw.url) as s:
            resp = s.get("http://allowed.test:%d/bytes/%d" % (self.a.port, n), timeout=30)
        self.assertEqual(resp.status_code, 200)
        self.assertEqual(len(resp.content), n)
        self.assertEqual(T.sha256_hex(resp.content), T.pattern_sha256(n))

    # -------------------------------------------------------------- upstream

    def test_upstream_connect_refused_502(self):
        r = self.get("http://closed.test:%d/" % self.closed_port)
        self.assertDenied(r, 502, "upstream-connect-error")

    def test_upstream_connect_timeout_504(self):
        if not self.bh.works():
            self.skipTest("this kernel does not drop SYNs to a full accept queue")
        t = time.time()
        r = self.get("http://blackhole.test:%d/" % self.bh.port, timeout=30)
        self.assertEqual(r.status, 504, r)
        self.assertGreaterEqual(time.time() - t, 2.5)

    # -------------------------------------------------------------- audit

    def test_audit_rows(self):
        p = uniq("audit-allow")
        r = self.get("http://allowed.test:%d%s" % (self.a.port, p))
        self.assertEqual(r.status, 200, r)
        r = self.get("http://other.test:%d%s" % (self.a.port, uniq("audit-deny")))
        self.assertEqual(r.status, 403, r)
        rows = self.gw.wait_audit(kind="http", host="allowed.test", decision="allow",
                                  rule="main:allow[0]", sandbox="local")
        self.assertTrue(rows, "no audit row for the allowed request")
        self.assertTrue(any(x.get("port") == self.a.port and x.get("status") == 200
                            for x in rows), rows)
        rows = self.gw.wait_audit(kind="http", host="other.test", decision="deny",
                                  reason="policy-deny", rule="default-deny")
        self.assertTrue(rows, "no audit row for the denied request")
        self.assertEqual(rows[-1].get("status"), 403, rows)


if __name__ == "__main__":
    T.main()
