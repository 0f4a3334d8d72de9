#!/usr/bin/python3
"""
End-to-end tests of mode: ask (docs/approvals.md): a request no rule allows
is held while the operator is asked. A held curl (absolute form, CONNECT)
and a SOCKS5 connect each approved (200 from the origin), denied (403 /
SOCKS5 0x02, approval-denied) and timed out (approval-timeout); a burst to
one destination waits on one question; 200 pending questions listed;
approval.max_pending refuses more at once; --for answers decide later
requests by themselves and expire; the CLI lists and answers; each question,
answer and held request has its audit row.
"""

import concurrent.futures
import http.server
import threading
import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
NAMES = ["ok.test", "held.test", "burst.test", "socks.test", "timeout.test",
         "deny.test", "for.test", "a.wild.test", "b.wild.test", "cli.test",
         "limit.test", "sdeny.test", "stime.test", "connect.test",
         "dok.test", "ddeny.test", "dtime.test", "top.test", "topx.test"]


admin = T.admin


def policy(port, max_pending=None):
    return ("sandboxes:\n"
        "  - id: agent\n"
        "    policy: asking\n"
        "    source: [127.0.0.1/32]\n"
        "policies:\n"
        "  - name: asking\n"
        "    mode: ask\n"
        "    allow:\n"
        "      - host: ok.test\n"
        "        ports: [%d]\n"
        "    deny:\n"
        "      - host: never.test\n"
        "    allow_private: [%s/32]\n" % (port, ORIGIN_HOST))


class ApprovalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-approval-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        names = NAMES + ["never.test"] + ["n%d.many.test" % i
                                          for i in range(200)]
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in names])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.sport = T.free_port()
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policy(cls.origin.port)},
            extra={"listen": {"admin": cls.sock,
                              "socks5": "127.0.0.1:%d" % cls.sport,
                              "dns": "127.0.0.1:%d" % cls.dport},
                   "approval": {"timeout": "3s", "max_pending": 300}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)
        cls.addClassCleanup(cls.pool.shutdown)

    # ---------------------------------------------------------------- helpers

    def url(self, host, path="/x"):
        return "http://%s:%d%s" % (host, self.origin.port, path)

    def curl_bg(self, host, path="/x", socks=False, connect=False):
        if socks:
            proxy = "socks5h://127.0.0.1:%d" % self.sport
            args = ()
        else:
            proxy = self.gw.url
            args = ("-p",) if connect else ()
        return self.pool.submit(T.curl, self.url(host, path), proxy=proxy,
                                args=args, tmp=self.td.path, timeout=30)

    def pending(self):
        st, doc = admin(self.sock, "GET", "/v1/approvals")
        self.assertEqual(st, 200, doc)
        return doc["approvals"]

    def wait_question(self, host, waiting=1, timeout=10):
        deadline = time.time() + timeout * T.SLOW
        while time.time() < deadline:
            for q in self.pending():
                if q["host"] == host and q["waiting"] >= waiting:
                    return q
            time.sleep(0.05)
        self.fail("no question for %s with %d waiting: %s" % (
            host, waiting, self.pending()))

    def answer(self, qid, ans, **kw):
        body = {"answer": ans}
        body.update(kw)
        return admin(self.sock, "POST", "/v1/approvals/%d" % qid, body)

    def rows(self, **match):
        return self.gw.audit_rows(**match)

    def wait_rows(self, n, **match):
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            r = self.rows(**match)
            if len(r) >= n:
                return r
            time.sleep(0.1)
        return self.rows(**match)

    def dig(self, name):
        """One UDP query, no retry; (status, answer addresses)."""
        r = subprocess.run([T.DIG, "@127.0.0.1", "-p", str(self.dport),
                            "+tries=1", "+time=%d" % int(15 * T.SLOW), name,
                            "A"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           timeout=30 * T.SLOW)
        m = re.search(r"status: ([A-Z]+)", r.stdout)
        addrs = re.findall(r"^\S+\s+\d+\s+IN\s+A\s+(\S+)$", r.stdout, re.M)
        return (m.group(1) if m else None), addrs

    def answered_rows(self, n, **match):
        """Rows (not the question's own) once n of them are written."""
        deadline = time.time() + 10 * T.SLOW
        while True:
            rows = [x for x in self.rows(**match) if x["method"] != "ASK"]
            if len(rows) >= n or time.time() > deadline:
                return rows
            time.sleep(0.1)

    def reason(self, r):
        hv = [v for _, h in r.blocks for v in h.get("x-sandgate-reason", [])]
        return hv[-1] if hv else None

    # ------------------------------------------------------------------ tests

    def test_allowed_not_asked(self):
        r = T.curl(self.url("ok.test"), proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 200, r.stderr)
        self.assertEqual([q for q in self.pending() if q["host"] == "ok.test"],
                         [])

    def test_deny_rule_not_asked(self):
        t0 = time.time()
        r = T.curl(self.url("never.test"), proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 403)
        self.assertEqual(self.reason(r), "policy-deny")
        self.assertLess(time.time() - t0, 2.5)

    def test_held_curl_approved(self):
        f = self.curl_bg("held.test", "/approved")
        q = self.wait_question("held.test")
        self.assertEqual(q["sandbox"], "agent")
        self.assertEqual(q["port"], self.origin.port)
        self.assertFalse(f.done(), "answered before the operator did")
        st, doc = self.answer(q["id"], "approve")
        self.assertEqual(st, 200, doc)
        self.assertEqual(doc["waiting"], 1)
        self.assertTrue(doc["user"])
        r = f.result()
        self.assertEqual(r.status, 200, r.stderr)
        self.assertTrue(self.origin.saw_path("/approved"))
        row = self.wait_rows(1, host="held.test", path="/approved")[0]
        self.assertEqual(row["decision"], "allow")
        self.assertEqual(row["rule"], "approval:%d" % q["id"])
        # The question's row and the answer's, with who answered.
        self.assertEqual(len(self.wait_rows(1, host="held.test",
                                            method="ASK")), 1)
        ans = self.wait_rows(1, host="held.test", method="APPROVE")[0]
        self.assertIn("user=", ans["path"])
        self.assertEqual(ans["rule"], "approval:%d" % q["id"])
        # Once: the next request asks again.
        f = self.curl_bg("held.test", "/again")
        q2 = self.wait_question("held.test")
        self.assertNotEqual(q2["id"], q["id"])
        self.answer(q2["id"], "deny")
        self.assertEqual(f.result().status, 403)

    def test_held_connect_approved_and_denied(self):
        f = self.curl_bg("connect.test", "/via-connect", connect=True)
        q = self.wait_question("connect.test")
        self.answer(q["id"], "approve")
        r = f.result()
        self.assertEqual(r.status, 200, r.stderr)
        f = self.curl_bg("connect.test", "/via-connect2", connect=True)
        q = self.wait_question("connect.test")
        self.answer(q["id"], "deny")
        r = f.result()
        self.assertEqual(r.status, 403, r.stderr)
        self.assertEqual(self.reason(r), "approval-denied")

    def test_held_curl_denied(self):
        f = self.curl_bg("deny.test", "/denied")
        q = self.wait_question("deny.test")
        self.answer(q["id"], "deny")
        r = f.result()
        self.assertEqual(r.status, 403)
        self.assertEqual(self.reason(r), "approval-denied")
        self.assertFalse(self.origin.saw_path("/denied"))
        row = self.wait_rows(1, host="deny.test", path="/denied")[0]
        self.assertEqual(row["reason"], "approval-denied")
        self.assertEqual(row["decision"], "deny")

    def test_held_curl_timeout(self):
        t0 = time.time()
        r = T.curl(self.url("timeout.test", "/late"), proxy=self.gw.url,
                   tmp=self.td.path)
        took = time.time() - t0
        self.assertEqual(r.status, 403)
        self.assertEqual(self.reason(r), "approval-timeout")
        self.assertGreaterEqual(took, 2.5)
        self.assertLess(took, 8 * T.SLOW)
        self.assertEqual(self.wait_rows(1, host="timeout.test",
                                        path="/late")[0]["reason"],
                         "approval-timeout")

    def test_burst_one_question(self):
        n = 12
        fs = [self.curl_bg("burst.test", "/pkg%d" % i) for i in range(n)]
        q = self.wait_question("burst.test", waiting=n)
        self.assertEqual(len([x for x in self.pending()
                              if x["host"] == "burst.test"]), 1)
        self.assertEqual(q["waiting"], n)
        st, doc = self.answer(q["id"], "approve")
        self.assertEqual(doc["waiting"], n)
        for f in fs:
            self.assertEqual(f.result().status, 200)

    def test_socks5_approved_denied_timeout(self):
        f = self.curl_bg("socks.test", "/s-ok", socks=True)
        q = self.wait_question("socks.test")
        self.answer(q["id"], "approve")
        r = f.result()
        self.assertEqual(r.status, 200, r.stderr)
        self.assertTrue(self.origin.saw_path("/s-ok"))
        f = self.curl_bg("sdeny.test", "/s-no", socks=True)
        q = self.wait_question("sdeny.test")
        self.answer(q["id"], "deny")
        r = f.result()
        self.assertNotEqual(r.rc, 0)
        self.assertIn("(2)", r.stderr)
        t0 = time.time()
        r = T.curl(self.url("stime.test", "/s-late"),
                   proxy="socks5h://127.0.0.1:%d" % self.sport,
                   tmp=self.td.path)
        self.assertNotEqual(r.rc, 0)
        self.assertGreaterEqual(time.time() - t0, 2.5)
        rows = self.answered_rows(1, host="stime.test", kind="socks5")
        self.assertEqual([x["reason"] for x in rows], ["approval-timeout"])
        rows = self.answered_rows(1, host="sdeny.test", kind="socks5")
        self.assertEqual([x["reason"] for x in rows], ["approval-denied"])

    def test_dns_approved_denied_timeout(self):
        f = self.pool.submit(self.dig, "dok.test")
        q = self.wait_question("dok.test")
        self.assertEqual(q["port"], 0)
        self.assertFalse(f.done())
        self.answer(q["id"], "approve")
        st, addrs = f.result()
        self.assertEqual(st, "NOERROR")
        self.assertEqual(addrs, [ORIGIN_HOST])
        row = self.answered_rows(1, host="dok.test", kind="dns")[0]
        self.assertEqual(row["decision"], "allow")
        self.assertEqual(row["rule"], "approval:%d" % q["id"])
        f = self.pool.submit(self.dig, "ddeny.test")
        q = self.wait_question("ddeny.test")
        self.answer(q["id"], "deny")
        st, addrs = f.result()
        self.assertEqual(st, "REFUSED")
        self.assertEqual(addrs, [])
        t0 = time.time()
        st, addrs = self.dig("dtime.test")
        self.assertEqual(st, "REFUSED")
        self.assertGreaterEqual(time.time() - t0, 2.5)
        rows = self.answered_rows(1, host="dtime.test", kind="dns")
        self.assertEqual([x["reason"] for x in rows], ["approval-timeout"])
        rows = self.answered_rows(1, host="ddeny.test", kind="dns")
        self.assertEqual([x["reason"] for x in rows], ["approval-denied"])

    def test_for_answer_and_scope(self):
        f = self.curl_bg("a.wild.test", "/w1")
        q = self.wait_question("a.wild.test")
        st, doc = self.answer(q["id"], "approve", scope="*.other.test")
        self.assertEqual(st, 400, doc)
        st, doc = self.answer(q["id"], "approve", scope="*.wild.test",
                              **{"for": "2s"})
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result().status, 200)
        # In scope: no question while it lasts.
        t0 = time.time()
        r = T.curl(self.url("b.wild.test", "/w2"), proxy=self.gw.url,
                   tmp=self.td.path)
        self.assertEqual(r.status, 200)
        self.assertLess(time.time() - t0, 1.5)
        time.sleep(2.5)
        # Expired: asked again.
        f = self.curl_bg("b.wild.test", "/w3")
        q = self.wait_question("b.wild.test")
        self.answer(q["id"], "deny", **{"for": "1h"})
        self.assertEqual(f.result().status, 403)
        r = T.curl(self.url("b.wild.test", "/w4"), proxy=self.gw.url,
                   tmp=self.td.path)
        self.assertEqual(r.status, 403)
        self.assertEqual(self.reason(r), "approval-denied")

    def test_cli(self):
        f = self.curl_bg("cli.test", "/c1")
        q = self.wait_question("cli.test")
        r = T.run_sandgate("approvals", "--socket", self.sock)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cli.test:%d" % self.origin.port, r.stdout)
        self.assertIn("agent", r.stdout)
        r = T.run_sandgate("approve", str(q["id"]), "--socket", self.sock)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(f.result().status, 200)
        r = T.run_sandgate("deny", str(q["id"]), "--socket", self.sock)
        self.assertEqual(r.returncode, 1)
        r = T.run_sandgate("approve", "x", "--socket", self.sock)
        self.assertEqual(r.returncode, 2)

    def test_top_shows_and_answers(self):
        f = self.curl_bg("top.test", "/t")
        q = self.wait_question("top.test")
        r = T.run_sandgate("top", "--once", "--interval", "0.2", "-c",
                           self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pending questions (mode: ask): 1", r.stdout)
        self.assertIn("?%-5d" % q["id"], r.stdout)
        self.assertIn("top.test:%d" % self.origin.port, r.stdout)
        self.answer(q["id"], "approve")
        self.assertEqual(f.result().status, 200)
        import shutil
        if shutil.which("tmux") is None:
            print("skipped the interactive part: no tmux")
            return
        import test_top as TT
        tm = TT.Tmux("sgtest-approval-top-%d" % os.getpid())
        self.addCleanup(tm.stop)
        f = self.curl_bg("topx.test", "/x")
        self.wait_question("topx.test")
        tm.start([T.BIN, "top", "--interval", "0.2", "-c",
                  self.gw.cfg_path])
        screen = tm.wait(lambda s: "topx.test" in s)
        self.assertIn("pending questions: 1", screen)
        tm.text("x")
        r = f.result()
        self.assertEqual(r.status, 403)
        self.assertEqual(self.reason(r), "approval-denied")
        tm.text("q")

    def test_zz_audit_stats(self):
        # Run last (by name): every other test's questions, answers, requests.
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
                               "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            got = {e["row"]: e["rows"] for e in json.loads(r.stdout)["approvals"]}
            if got.get("request-approval-denied"):
                break
            time.sleep(0.2)
        self.assertGreater(got.get("question", 0), 5, got)
        self.assertGreater(got.get("answer-approve", 0), 3, got)
        self.assertGreater(got.get("answer-deny", 0), 3, got)
        self.assertGreater(got.get("request-allow", 0), 3, got)
        self.assertGreater(got.get("request-approval-denied", 0), 3, got)
        self.assertGreater(got.get("request-approval-timeout", 0), 0, got)
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path)
        self.assertIn("approvals", r.stdout)
        # The question and answer rows are rows like any: chained, exported.
        r = T.run_sandgate("audit", "verify", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = T.run_sandgate("audit", "export", "-c", self.gw.cfg_path,
                           "--format", "ocsf")
        self.assertEqual(r.returncode, 0, r.stderr)
        asks = [json.loads(x) for x in r.stdout.splitlines()
                if '"ASK"' in x]
        self.assertTrue(asks)

    def rss_kb(self):
        with open("/proc/%d/status" % self.gw.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def test_200_pending(self):
        import socket
        n = 200
        # What n idle connections (a head still arriving) cost, to compare.
        before = self.rss_kb()
        idle = []
        for i in range(n):
            c = socket.create_connection(("127.0.0.1", self.gw.port), 10)
            c.sendall(b"GET http://ok.test/ HTTP/1.1\r\n")
            idle.append(c)
        time.sleep(0.5)
        idle_kb = self.rss_kb() - before
        for c in idle:
            c.close()
        time.sleep(0.5)
        before = self.rss_kb()
        socks = []
        for i in range(n):
            c = socket.create_connection(("127.0.0.1", self.gw.port), 10)
            host = "n%d.many.test:%d" % (i, self.origin.port)
            c.sendall(("GET http://%s/m HTTP/1.1\r\nHost: %s\r\n\r\n"
                       % (host, host)).encode())
            socks.append(c)
        self.addCleanup(lambda: [c.close() for c in socks])
        deadline = time.time() + 20 * T.SLOW
        while time.time() < deadline:
            got = [q for q in self.pending()
                   if q["host"].endswith(".many.test")]
            if len(got) >= n:
                break
            time.sleep(0.1)
        self.assertEqual(len(got), n)
        self.assertEqual(len({q["id"] for q in got}), n)
        held_kb = self.rss_kb() - before
        print("200 held requests: gateway RSS +%d KiB; 200 idle "
              "connections: +%d KiB" % (held_kb, idle_kb))
        # (A sanitizer's allocator keeps freed memory: no bound there.)
        if not T.ASAN:
            self.assertLess(held_kb, 2 * idle_kb + 2048)
        r = T.run_sandgate("approvals", "--socket", self.sock)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(".many.test"), n)
        for q in got:
            st, _ = self.answer(q["id"], "deny" if q["id"] % 2 else
                                "approve")
            self.assertEqual(st, 200)
        codes = {}
        for c in socks:
            c.settimeout(10 * T.SLOW)
            head = c.recv(4096).decode("latin-1")
            code = head.split(" ", 2)[1] if head else "-"
            codes[code] = codes.get(code, 0) + 1
        self.assertEqual(codes, {"200": n // 2, "403": n // 2})

class ApprovalLimitTest(unittest.TestCase):
    """approval.max_pending: the sandbox's next question is refused at once."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-approval-limit-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("l%d.test" % i, ORIGIN_HOST)
                                for i in range(4)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policy(cls.origin.port)},
            extra={"listen": {"admin": cls.sock},
                   "approval": {"timeout": "20s", "max_pending": 2}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        cls.addClassCleanup(cls.pool.shutdown)

    def test_limit(self):
        url = "http://l%d.test:" + str(self.origin.port) + "/"
        fs = [self.pool.submit(T.curl, url % i, proxy=self.gw.url,
                               tmp=self.td.path, timeout=30)
              for i in range(2)]
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            st, doc = admin(self.sock, "GET", "/v1/approvals")
            if len(doc["approvals"]) == 2:
                break
            time.sleep(0.05)
        self.assertEqual(len(doc["approvals"]), 2)
        # A third destination: refused at once, 429 approval-limit.
        t0 = time.time()
        r = T.curl(url % 2, proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 429)
        self.assertLess(time.time() - t0, 3 * T.SLOW)
        hv = [v for _, h in r.blocks for v in h.get("x-sandgate-reason", [])]
        self.assertEqual(hv[-1:], ["approval-limit"])
        # Joining a question already asked is within it.
        f = self.pool.submit(T.curl, url % 0, proxy=self.gw.url,
                             tmp=self.td.path, timeout=30)
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            st, doc = admin(self.sock, "GET", "/v1/approvals")
            if max(q["waiting"] for q in doc["approvals"]) == 2:
                break
            time.sleep(0.05)
        for q in doc["approvals"]:
            admin(self.sock, "POST", "/v1/approvals/%d" % q["id"],
                  {"answer": "approve"})
        for x in fs + [f]:
            self.assertEqual(x.result().status, 200)
        rows = self.gw.audit_rows(host="l2.test")
        self.assertEqual([x["reason"] for x in rows], ["approval-limit"])


class ApprovalAlwaysTest(unittest.TestCase):
    """approve --always: an overlay rule under policies/approved/, kept
    across a restart, shown by policy check and policy explain."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-approval-always-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("always.test", ORIGIN_HOST),
                                ("other.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policy(cls.origin.port)},
            extra={"listen": {"admin": cls.sock},
                   "approval": {"timeout": "3s"}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        cls.addClassCleanup(cls.pool.shutdown)

    def wait_sock(self):
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(self.sock) and time.time() < deadline:
            time.sleep(0.05)

    def test_always_survives_restart(self):
        self.wait_sock()
        url = "http://always.test:%d/a" % self.origin.port
        f = self.pool.submit(T.curl, url, proxy=self.gw.url, tmp=self.td.path,
                             timeout=30)
        q = None
        deadline = time.time() + 10 * T.SLOW
        while q is None and time.time() < deadline:
            st, doc = admin(self.sock, "GET", "/v1/approvals")
            q = next((x for x in doc["approvals"]
                      if x["host"] == "always.test"), None)
            time.sleep(0.05)
        self.assertIsNotNone(q)
        r = T.run_sandgate("approve", str(q["id"]), "--always", "-c",
                           self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(f.result().status, 200)
        files = os.listdir(os.path.join(self.gw.policy_dir, "approved"))
        self.assertEqual(len(files), 1, files)
        # policy check and explain read it as any policy file.
        r = T.run_sandgate("policy", "check", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "agent",
                           "always.test:%d" % self.origin.port)
        self.assertIn("asking:allow[1]", r.stdout, r.stdout + r.stderr)
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "agent",
                           "other.test:%d" % self.origin.port)
        self.assertNotIn("asking:allow[1]", r.stdout)
        # A restart: the rule decides, nobody is asked.
        self.gw.proc.stop()
        self.gw.start()
        self.wait_sock()
        t0 = time.time()
        r = T.curl("http://always.test:%d/after" % self.origin.port,
                   proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 200, r.stderr)
        self.assertLess(time.time() - t0, 2 * T.SLOW)
        rows = self.gw.wait_audit(host="always.test", path="/after")
        self.assertEqual([x["rule"] for x in rows], ["asking:allow[1]"])
        # Another host is still asked (and times out).
        r = T.curl("http://other.test:%d/o" % self.origin.port,
                   proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 403)


class _Hook(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.server.posts.append((self.path, self.headers.get(
            "Content-Type"), self.rfile.read(n)))
        self.send_response(204)
        self.end_headers()


class ApprovalNotifyTest(unittest.TestCase):
    """approval.notify: a command with the question as JSON on its stdin
    (no shell), or a webhook POST; a chat bot then answers over the API."""

    def start(self, notify, more=None):
        td = T.TempDir("sgtest-approval-notify-")
        self.addCleanup(td.cleanup)
        d = td.path
        origin = T.Origin("plain", host=ORIGIN_HOST)
        self.addCleanup(origin.stop)
        dns = T.Dnsmasq(d, [("bot.test", ORIGIN_HOST)])
        self.addCleanup(dns.stop)
        sock = os.path.join(d, "adm.sock")
        gw = T.Gateway(d, dns, {"p.yaml": policy(origin.port)},
            extra=dict({"listen": {"admin": sock},
                   "approval": {"timeout": "10s", "notify": notify}},
                   **(more or {})))
        gw.start()
        self.addCleanup(gw.stop)
        return td, gw, origin, sock

    def ask(self, td, gw, origin):
        return concurrent.futures.ThreadPoolExecutor(1).submit(
            T.curl, "http://bot.test:%d/bot" % origin.port, proxy=gw.url,
            tmp=td.path, timeout=30)

    def wait_for(self, fn):
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            v = fn()
            if v:
                return v
            time.sleep(0.05)
        return fn()

    def test_command(self):
        out_dir = T.TempDir("sgtest-notify-out-")
        self.addCleanup(out_dir.cleanup)
        os.chmod(out_dir.path, 0o777)
        out = os.path.join(out_dir.path, "asked.jsonl")
        td, gw, origin, sock = self.start(["/usr/bin/tee", "-a", out])
        f = self.ask(td, gw, origin)
        text = self.wait_for(lambda: os.path.exists(out) and open(out).read())
        self.assertTrue(text, gw.log_tail())
        q = json.loads(text.splitlines()[0])
        self.assertEqual((q["sandbox"], q["host"], q["port"]),
                         ("agent", "bot.test", origin.port))
        # The bot answers through the admin API with the id it was given.
        st, doc = admin(sock, "POST", "/v1/approvals/%d" % q["id"],
                        {"answer": "approve"})
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result().status, 200)

    def test_webhook(self):
        self.webhook(tls=False)

    def test_webhook_https(self):
        """https://: verified against upstream.ca_bundle and the name."""
        self.webhook(tls=True)

    def test_webhook_https_untrusted(self):
        """A webhook whose certificate the CA bundle does not vouch for is
        not told (the question still waits, and is answered by the API)."""
        self.webhook(tls=True, trusted=False)

    def webhook(self, tls, trusted=True):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
        srv.posts = []
        extra = None
        if tls:
            import ssl
            import test_credentials as C
            pki_dir = T.TempDir("sgtest-notify-pki-")
            self.addCleanup(pki_dir.cleanup)
            os.chmod(pki_dir.path, 0o755)
            pki = C.TestCA(pki_dir.path)
            cert, key = pki.leaf("hook.test", ["localhost"])
            for p in (pki.d, pki.cert):
                os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
            extra = {"upstream": {"ca_bundle": pki.cert}} if trusted else None
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        td, gw, origin, sock = self.start(
            "%s://%s:%d/hook" % ("https" if tls else "http",
                                 "localhost" if tls else "127.0.0.1",
                                 srv.server_address[1]), extra)
        f = self.ask(td, gw, origin)
        if not trusted:
            time.sleep(2 * T.SLOW)
            self.assertEqual(srv.posts, [])
            self.assertIn("approval.notify: TLS with localhost failed",
                          gw.log_text() if hasattr(gw, "log_text") else
                          gw.log_tail(200))
            st, doc = admin(sock, "GET", "/v1/approvals")
            qid = doc["approvals"][0]["id"]
            admin(sock, "POST", "/v1/approvals/%d" % qid, {"answer": "deny"})
            self.assertEqual(f.result().status, 403)
            return
        self.assertTrue(self.wait_for(lambda: srv.posts), gw.log_tail())
        path, ctype, body = srv.posts[0]
        self.assertEqual((path, ctype), ("/hook", "application/json"))
        q = json.loads(body)
        self.assertEqual(q["host"], "bot.test")
        admin(sock, "POST", "/v1/approvals/%d" % q["id"], {"answer": "deny"})
        self.assertEqual(f.result().status, 403)


if __name__ == "__main__":
    T.main()
