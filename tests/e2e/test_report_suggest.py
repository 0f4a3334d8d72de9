#!/usr/bin/python3
"""
End-to-end test of a policy roll-out (issue 16 point 3; docs/policy.md
"mode: report", "policy suggest"): a policy in mode: report, a "build"
(curl over plain HTTP and a CONNECT tunnel, Python requests) that fetches
from three hosts through the gateway, names resolved by dnsmasq as the
gateway's upstream to loopback origins; every fetch passes and is audited
with decision report; the DNS listener answers a name the policy would
deny (decision report); what report mode never relaxes is still refused
(a wrong proxy token: 407; an internal address outside allow_private;
a placeholder sent to another host). Then `policy suggest` prints a
document that `policy check` loads, it is merged into the policy in
force (mode: enforce), the same build passes with decision allow, and a
fourth host is denied.
"""

import os
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402

TOKEN = "tok-5b2e9d0c7a14f386"
PLACEHOLDER = "sgtest-report-placeholder-0001"


def sandboxes_doc():
    return {"sandboxes": [
        T.local_sandbox("build", sid="builder", source="127.0.0.1/32"),
        T.token_sandbox("tokbuild", TOKEN, "build"),
    ], "credentials": [
        {"name": "apikey", "secret": "apikey-secret",
         "hosts": ["keys.other.test"], "placeholder": PLACEHOLDER},
    ]}


class ReportSuggestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import requests  # noqa: F401
        except ImportError:
            T.skip_file("python3-requests is not installed")
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.cert, cls.key = T.make_cert(d, cn="mirror.pkgs.test",
            names=["mirror.pkgs.test"])
        cls.http = T.Origin("plain", host="127.0.0.2")
        cls.addClassCleanup(cls.http.stop)
        cls.tls = T.Origin("tls", host="127.0.0.3", cert=cls.cert, key=cls.key)
        cls.addClassCleanup(cls.tls.stop)
        recs = [("files.pkgs.test", "127.0.0.2"),
                ("mirror.pkgs.test", "127.0.0.3"),
                ("api.other.test", "127.0.0.2"),
                ("evil.other.test", "127.0.0.2"),
                ("internal.test", "127.0.0.4")]
        cls.dns = T.Dnsmasq(d, recs)
        cls.addClassCleanup(cls.dns.stop)
        cls.dport = T.free_port(udp_too=True)
        cls.sport = T.free_port()
        cls.policy_tail = ("    allow_private: [127.0.0.2/32, 127.0.0.3/32]\n"
                           "    credentials: [apikey]\n")
        report = ("policies:\n  - name: build\n    mode: report\n"
                  "    allow: []\n" + cls.policy_tail)
        cls.gw = T.Gateway(d, cls.dns, {"10-sandboxes.yaml": sandboxes_doc(),
            "20-build.yaml": report},
            extra={"listen": {"dns": "127.0.0.1:%d" % cls.dport,
                              "socks5": "127.0.0.1:%d" % cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())

    # ------------------------------------------------------------ helpers

    def build(self):
        """The build: three hosts, three clients; the statuses."""
        import requests
        pa, pb = self.http.port, self.tls.port
        got = []
        r = T.curl("http://files.pkgs.test:%d/dist/a.tar.gz" % pa,
            proxy=self.gw.url)
        got.append(r.status)
        r = T.curl("https://mirror.pkgs.test:%d/simple/b/" % pb,
            proxy=self.gw.url, args=["--cacert", self.cert])
        got.append(r.status)
        try:
            resp = requests.get("http://api.other.test:%d/v1/c" % pa,
                proxies={"http": self.gw.url}, timeout=20 * T.SLOW)
            got.append(resp.status_code)
        except requests.RequestException as e:
            got.append(repr(e))
        return got

    def rows(self, host, **match):
        rows = self.gw.wait_audit(host=host, **match)
        self.assertTrue(rows, "no audit row for %s %r; rows: %r" % (host,
            match, [(r["kind"], r["host"], r["decision"], r["rule"],
            r["reason"]) for r in self.gw.audit_rows()][-20:]))
        return rows

    def wait_reload(self, start):
        m = self.gw.wait_log(r"reload: new policy in force|reload failed",
            timeout=10, start=start)
        self.assertTrue(m and "in force" in m.group(0),
            "reload did not apply:\n" + self.gw.log_tail())

    # ------------------------------------------------------------ the test

    def test_rollout(self):
        pa = self.http.port
        # 1. report mode: the build passes, every row says report.
        self.assertEqual(self.build(), [200, 200, 200])
        for host in ("files.pkgs.test", "mirror.pkgs.test", "api.other.test"):
            row = self.rows(host, decision="report")[-1]
            self.assertEqual((row["rule"], row["reason"]),
                ("default-deny", "policy-deny"), row)
        self.assertEqual(self.rows("mirror.pkgs.test")[-1]["kind"], "connect")
        # the DNS listener answers what it would have denied
        q = H.dig(["@127.0.0.1", "-p", str(self.dport), "files.pkgs.test", "A"])
        self.assertEqual(q.status, "NOERROR", q)
        self.assertIn("127.0.0.2", q.addrs(), q)
        row = self.rows("files.pkgs.test", kind="dns")[-1]
        self.assertEqual((row["decision"], row["reason"]),
            ("report", "policy-deny"))
        # SOCKS5 too
        r = T.curl("http://api.other.test:%d/socks" % pa,
            args=["--socks5-hostname", "127.0.0.1:%d" % self.sport])
        self.assertEqual(r.status, 200, r)
        row = self.rows("api.other.test", kind="socks5")[-1]
        self.assertEqual((row["decision"], row["reason"]),
            ("report", "policy-deny"))
        # 2. what report mode never relaxes
        r = T.curl("http://files.pkgs.test:%d/x" % pa, proxy=self.gw.url,
            args=["-U", "tokbuild:wrong-token"])
        self.assertEqual(r.status, 407, r)
        r = T.curl("http://internal.test:%d/x" % pa, proxy=self.gw.url)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"),
            "destination-ip-prohibited")
        self.assertEqual(self.rows("internal.test")[-1]["decision"], "deny")
        r = T.curl("http://files.pkgs.test:%d/leak" % pa, proxy=self.gw.url,
            args=["-H", "Authorization: Bearer " + PLACEHOLDER])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-misuse")
        self.assertFalse(self.http.saw_path("/leak"))
        # an IP literal passes in report mode (allow_private covers it)
        r = T.curl("http://127.0.0.2:%d/by-ip" % pa, proxy=self.gw.url)
        self.assertEqual(r.status, 200, r)
        self.rows("127.0.0.2", decision="report")

        # 3. the suggestion
        out = T.run_sandgate("policy", "suggest", "-c", self.gw.cfg_path,
            "--sandbox", "builder", "--since", "1h")
        self.assertEqual(out.returncode, 0, out.stderr)
        text = out.stdout
        active = [ln for ln in text.splitlines()
                  if ln.strip() and not ln.lstrip().startswith("#")]
        for host in ("files.pkgs.test", "mirror.pkgs.test", "api.other.test"):
            self.assertIn("      - host: %s" % host, "\n".join(active), text)
        self.assertIn("# pkgs.test: 2 names", text)
        self.assertIn("# other.test: 1 name", text)
        self.assertNotIn("internal.test", "\n".join(active))
        self.assertNotIn("127.0.0.2", "\n".join(active))
        self.assertNotIn("cidr", "\n".join(active))
        self.assertRegex(text, r"#\s+internal\.test port %d: internal address"
            % pa)
        # an IP literal, and internal: named, never suggested
        self.assertRegex(text, r"#\s+127\.0\.0\.2 port %d: internal address"
            ".*1 row \\(report\\)" % pa)
        self.assertIn("ports: [%d]" % pa, text)
        self.assertRegex(text, r"first \d{4}-\d\d-\d\dT[\d:.]+Z, last ")
        # it loads on its own with policy check
        alone = os.path.join(self.td.path, "alone")
        os.makedirs(alone, exist_ok=True)
        with open(os.path.join(alone, "suggested.yaml"), "w") as f:
            f.write(text)
        cfg = os.path.join(alone, "sandgate.yaml")
        with open(cfg, "w") as f:
            f.write("policies: [%s]\nstate_dir: %s\n" % (
                os.path.join(alone, "suggested.yaml"),
                os.path.join(alone, "var")))
        chk = T.run_sandgate("policy", "check", "-c", cfg)
        self.assertEqual(chk.returncode, 0, chk.stdout + chk.stderr + text)

        # 4. merged into the policy in force, enforced
        start = len(self.gw.log_text())
        self.gw.write_policy("20-build.yaml", text + self.policy_tail)
        self.gw.reload()
        self.wait_reload(start)
        before = len(self.gw.audit_rows())
        self.assertEqual(self.build(), [200, 200, 200])
        deadline = time.time() + 5 * T.SLOW
        while time.time() < deadline:
            new = self.gw.audit_rows()[before:]
            if len([r for r in new if r["decision"] == "allow"]) >= 3:
                break
            time.sleep(0.1)
        new = self.gw.audit_rows()[before:]
        for host in ("files.pkgs.test", "mirror.pkgs.test", "api.other.test"):
            hits = [r for r in new if r["host"] == host]
            self.assertTrue(hits and all(r["decision"] == "allow" for r in hits),
                (host, hits))
        # the fourth host, and the IP literal, are denied now
        r = T.curl("http://evil.other.test:%d/x" % pa, proxy=self.gw.url)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny")
        row = self.rows("evil.other.test")[-1]
        self.assertEqual((row["decision"], row["rule"]), ("deny", "default-deny"))
        r = T.curl("http://127.0.0.2:%d/by-ip-2" % pa, proxy=self.gw.url)
        self.assertEqual(r.status, 403, r)
        q = H.dig(["@127.0.0.1", "-p", str(self.dport), "evil.other.test", "A"])
        self.assertEqual(q.status, "NXDOMAIN", q)

    def test_usage(self):
        out = T.run_sandgate("policy", "suggest", "-c", self.gw.cfg_path)
        self.assertEqual(out.returncode, 2)
        self.assertTrue(out.stderr.startswith("sandgate: "), out.stderr)
        out = T.run_sandgate("policy", "suggest", "-c", self.gw.cfg_path,
            "--sandbox", "Bad_Id")
        self.assertEqual(out.returncode, 2)
        out = T.run_sandgate("policy", "suggest", "-c", self.gw.cfg_path,
            "--sandbox", "nobody", "--psl", "/nonexistent/psl.dat")
        self.assertEqual(out.returncode, 1)
        out = T.run_sandgate("policy", "suggest", "-c", self.gw.cfg_path,
            "--sandbox", "nobody", "--name", "quiet")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("allow: []", out.stdout)
        self.assertIn("- name: quiet", out.stdout)

    def test_explain_says_report(self):
        out = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
            "--sandbox", "tokbuild", "nowhere.test:443", "--format", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('"decision":"report","rule":"default-deny",'
            '"reason":"policy-deny"', out.stdout)
        # (runs before test_rollout, which enforces the policy)
        out = T.run_sandgate("policy", "check", "-c", self.gw.cfg_path)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("1 policy in mode: report (denials logged, not "
            "enforced)", out.stdout)

if __name__ == "__main__":
    unittest.main(verbosity=2)
