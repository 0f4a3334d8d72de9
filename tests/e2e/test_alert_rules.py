#!/usr/bin/python3
"""
The alert rules shipped in deploy/prometheus/sandgate-alerts.yml
(docs/monitoring.md "Alerts"): `promtool check rules` accepts them, and
`promtool test rules` with tests/e2e/data/sandgate-alerts.test.yml fires
each alert on the series that should fire it (labels and summary as
written) and none of them on a healthy gateway's series. That the metrics
they name are the gateway's own is checked against a live one in
test_prometheus.py.
"""

import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sgtest as T  # noqa: E402

PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(HERE, "..", "..", "deploy", "prometheus", "sandgate-alerts.yml")
TESTS = os.path.join(HERE, "data", "sandgate-alerts.test.yml")
ALERTS = {"SandgateDown", "SandgateDenyRateSpike", "SandgateCredentialMisuse",
          "SandgateAuditFailing", "SandgateAuditStalled", "SandgateKeeperDown",
          "SandgateLeafCacheThrash", "SandgateConnectionsNearLimit",
          "SandgateLimitRefusals"}


class AlertRulesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(PROMTOOL, os.X_OK):
            T.skip_file("promtool is not installed (Debian package prometheus; "
                        "scripts/install-deps.sh installs it)")

    def promtool(self, *args, cwd=None):
        return subprocess.run([PROMTOOL] + list(args), cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=120)

    def test_check_rules(self):
        r = self.promtool("check", "rules", RULES)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("SUCCESS: %d rules found" % len(ALERTS), r.stdout)

    def test_every_alert_fires_and_stays_quiet(self):
        r = self.promtool("test", "rules", os.path.basename(TESTS),
                          cwd=os.path.dirname(TESTS))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("SUCCESS", r.stdout)
        # every alert of the file is tested firing and tested quiet
        with open(TESTS) as f:
            text = f.read()
        for name in ALERTS:
            with self.subTest(alert=name):
                self.assertGreaterEqual(text.count("alertname: " + name), 2, name)
        with open(RULES) as f:
            rules = f.read()
        self.assertEqual({l.split(":", 1)[1].strip() for l in rules.splitlines()
                          if l.strip().startswith("- alert:")}, ALERTS)

    def test_a_broken_rule_fails(self):
        """The tests can fail: the same tests against a rule that never fires."""
        d = T.TempDir("sgtest-alerts-")
        self.addCleanup(d.cleanup)
        with open(RULES) as f:
            rules = f.read().replace("sandgate_keeper_up == 0",
                                     "sandgate_keeper_up == 2")
        os.makedirs(os.path.join(d.path, "deploy", "prometheus"))
        os.makedirs(os.path.join(d.path, "tests", "e2e", "data"))
        with open(os.path.join(d.path, "deploy", "prometheus",
                               "sandgate-alerts.yml"), "w") as f:
            f.write(rules)
        with open(TESTS) as f, open(os.path.join(d.path, "tests", "e2e", "data",
                                                 os.path.basename(TESTS)), "w") as g:
            g.write(f.read())
        r = self.promtool("test", "rules", os.path.basename(TESTS),
                          cwd=os.path.join(d.path, "tests", "e2e", "data"))
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("SandgateKeeperDown", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
