#!/usr/bin/python3
"""
End-to-end tests of `sandgate status` and `sandgate reload` (issue 24 point 3)
against a gateway as a default install runs it (unprivileged, seccomp, the
keeper), through its admin socket:

- status prints one screen: version, uptime, listeners, workers, the keeper,
  policies and sandboxes, requests/s and denials/s over the last minute, the
  audit log's health and the last reload's result; --json gives the same
  as the admin API's document, and its counts are exactly the traffic sent.
- reload reloads; a broken policy prints each error as FILE:LINE:COL: message
  on stderr and exits 1, the old policy keeps deciding, and status then says
  the last reload failed, from where, and its first error.
- an unreachable socket is one line and exit 1; a usage error exit 2.
"""

import json
import os
import re
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
N_ALLOWED = 17
N_DENIED = 6


def policy_doc(port, extra_host=None):
    hosts = ["alpha.test"] + ([extra_host] if extra_host else [])
    return ("sandboxes:\n"
        "  - id: local\n"
        "    policy: alpha\n"
        "    source: [127.0.0.1/32]\n"
        "policies:\n"
        "  - name: alpha\n"
        "    allow:\n" + "".join(
            "      - host: %s\n        ports: [%d]\n" % (h, port) for h in hosts) +
        "    allow_private: [%s/32]\n" % ORIGIN_HOST)


# A policy file with two errors the loader reports with their place.
BROKEN = ("sandboxes:\n"
    "  - id: local\n"
    "    policy: alpha\n"
    "    source: [127.0.0.1/32]\n"
    "policies:\n"
    "  - name: alpha\n"
    "    alow:\n"
    "      - host: alpha.test\n"
    "    allow:\n"
    "      - host: alpha.test\n"
    "        ports: [notaport]\n")


class StatusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-status-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("alpha.test", ORIGIN_HOST),
                                ("beta.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.good = policy_doc(cls.origin.port)
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": cls.good},
            extra={"listen": {"admin": cls.sock}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)
        # The rates are measured from the first sample, a second after start.
        time.sleep(1.3)
        for i in range(N_ALLOWED):
            r = cls.get("alpha.test", "/ok/%d" % i)
            assert r is not None and r.status == 200, r
        for i in range(N_DENIED):
            r = cls.get("beta.test", "/no/%d" % i)
            assert r is not None and r.status == 403, r
        rows = cls.gw.wait_audit(timeout=10, pred=lambda _: len(
            cls.gw.audit_rows()) >= N_ALLOWED + N_DENIED)
        assert rows, "the audit rows did not arrive"

    @classmethod
    def get(cls, host, path):
        return T.raw_request(cls.gw.port, "GET http://%s:%d%s HTTP/1.1\r\n"
            "Host: %s:%d\r\n\r\n" % (host, cls.origin.port, path, host,
            cls.origin.port))

    def cli(self, *args):
        return T.run_sandgate(*args, "-c", self.gw.cfg_path)

    def status_json(self):
        r = self.cli("status", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def restore(self):
        self.gw.write_policy("main.yaml", self.good)
        r = self.cli("reload")
        self.assertEqual(r.returncode, 0, r.stderr)

    # ------------------------------------------------------------- status

    def test_01_json_counts_the_traffic(self):
        doc = self.status_json()
        ver = T.run_sandgate("version").stdout.split()[1]
        self.assertEqual(doc["version"], ver)
        self.assertGreaterEqual(doc["uptime_s"], 1)
        self.assertRegex(doc["started"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(doc["listeners"]["http"], "127.0.0.1:%d" % self.gw.port)
        self.assertIsNone(doc["listeners"]["ingress"])
        self.assertEqual(doc["listeners"]["admin"], self.sock)
        self.assertEqual(doc["workers"], 2)
        self.assertTrue(doc["keeper"]["up"])
        self.assertGreater(doc["keeper"]["pid"], 0)
        pc = doc["policies"]
        self.assertEqual((pc["files"], pc["sandboxes"], pc["policies"],
            pc["rules"], pc["dynamic_sandboxes"]), (1, 1, 1, 1, 0))
        r = doc["rates"]
        self.assertEqual(r["requests_total"], N_ALLOWED + N_DENIED)
        self.assertEqual(r["denials_total"], N_DENIED)
        # Every request fell inside the window: rate x window = the count.
        self.assertGreaterEqual(r["window_s"], 1)
        self.assertLessEqual(r["window_s"], 60.5)
        self.assertAlmostEqual(r["requests_per_s"] * r["window_s"],
            N_ALLOWED + N_DENIED, delta=0.05)
        self.assertAlmostEqual(r["denials_per_s"] * r["window_s"], N_DENIED,
            delta=0.05)
        a = doc["audit"]
        self.assertTrue(a["healthy"])
        self.assertGreaterEqual(a["rows_written"], N_ALLOWED + N_DENIED)
        self.assertEqual(a["rows_dropped"], 0)

    def test_02_text_is_one_screen(self):
        r = self.cli("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        lines = out.splitlines()
        self.assertLessEqual(len(lines), 24, out)
        self.assertRegex(lines[0], r"^sandgate \d+\.\d+\.\d+, up \d+[smhd]")
        self.assertRegex(out, r"(?m)^workers +2; connections \d+ of \d+")
        self.assertIn("http 127.0.0.1:%d" % self.gw.port, out)
        self.assertRegex(out, r"(?m)^keeper +up \(pid \d+, 0 restarts\)$")
        self.assertRegex(out, r"(?m)^policies +1 file, 1 sandbox, 1 policy, "
            r"1 rule, 0 credentials$")
        m = re.search(r"(?m)^traffic +([\d.]+) requests/s, ([\d.]+) "
            r"denials/s over the last (\d+) s; (\d+) requests, (\d+) denied",
            out)
        self.assertIsNotNone(m, out)
        self.assertGreater(float(m.group(1)), 0)
        self.assertGreater(float(m.group(2)), 0)
        self.assertEqual((int(m.group(4)), int(m.group(5))),
            (N_ALLOWED + N_DENIED, N_DENIED))
        self.assertRegex(out, r"(?m)^audit +healthy: \d+ rows written, "
            r"0 waiting, 0 dropped")
        self.assertRegex(out, r"(?m)^last reload +none since start$")

    # ------------------------------------------------------------- reload

    def test_03_reload_ok(self):
        self.gw.write_policy("main.yaml", policy_doc(self.origin.port,
            "beta.test"))
        self.addCleanup(self.restore)
        r = self.cli("reload")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "reloaded: new policy in force\n")
        resp = self.get("beta.test", "/now-allowed")
        self.assertEqual(resp.status, 200)
        lr = self.status_json()["last_reload"]
        self.assertEqual((lr["ok"], lr["source"], lr["errors"]),
            (True, "admin", 0))
        out = self.cli("status").stdout
        self.assertRegex(out, r"(?m)^last reload +ok at \S+Z \(admin\)$")

    def test_04_reload_broken_prints_places_and_fails(self):
        self.gw.write_policy("main.yaml", BROKEN)
        self.addCleanup(self.restore)
        path = os.path.join(self.gw.tmp, "policies", "main.yaml")
        r = self.cli("reload")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        errs = r.stderr.splitlines()
        self.assertGreaterEqual(len(errs), 3, r.stderr)
        places = [l for l in errs[:-1]]
        for l in places:
            self.assertRegex(l, r"^%s:\d+:\d+: \S" % re.escape(
                os.path.realpath(path) if not l.startswith(path) else path))
        self.assertTrue(any(":7:" in l and "alow" in l for l in places),
            r.stderr)
        self.assertTrue(any(":11:" in l for l in places), r.stderr)
        self.assertRegex(errs[-1], r"^sandgate: reload failed: ")
        # The old policy decides: beta.test still denied, alpha allowed.
        self.assertEqual(self.get("alpha.test", "/still").status, 200)
        self.assertEqual(self.get("beta.test", "/still").status, 403)
        lr = self.status_json()["last_reload"]
        self.assertEqual((lr["ok"], lr["source"], lr["errors"]),
            (False, "admin", len(places)))
        self.assertEqual(lr["first_error"], places[0])
        out = self.cli("status").stdout
        self.assertRegex(out, r"(?m)^last reload +FAILED at \S+Z \(admin\), "
            r"%d errors" % len(places))
        self.assertIn(places[0], out)

    def test_05_sighup_is_remembered_as_signal(self):
        before = self.gw.log_text().count("reload: new policy in force")
        self.gw.reload()
        deadline = time.time() + 5 * T.SLOW
        while (self.gw.log_text().count("reload: new policy in force") == before
               and time.time() < deadline):
            time.sleep(0.05)
        lr = self.status_json()["last_reload"]
        self.assertEqual((lr["ok"], lr["source"]), (True, "signal"))

    # ------------------------------------------------------------- errors

    def test_06_unreachable_socket(self):
        for cmd in ("status", "reload"):
            r = T.run_sandgate(cmd, "--socket",
                os.path.join(self.td.path, "nothing.sock"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn("cannot reach the gateway's admin socket", r.stderr)

    def test_07_usage(self):
        r = T.run_sandgate("status", "extra")
        self.assertEqual(r.returncode, 2)
        r = T.run_sandgate("reload", "--bogus")
        self.assertEqual(r.returncode, 2)
        for cmd in ("status", "reload"):
            r = T.run_sandgate("help", cmd)
            self.assertEqual(r.returncode, 0)
            self.assertIn("usage: sandgate %s" % cmd, r.stdout)


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
