#!/usr/bin/python3
"""
A reload says what it did not apply (docs/config.md, "What a reload
applies"): SIGHUP and POST /v1/reload after a change of listen.metrics,
workers and a policy apply the policy (a request it now allows passes, with
its audit row) and name each restart-only key, by its full dotted name, in
the log and in the admin API's answer ("needs a restart: listen.metrics,
workers") instead of "new policy in force"; the old metrics port keeps
serving and the new one stays closed. A reload that changes nothing
restart-only says the plain "new policy in force". The attacker's variants:
the same address written another way (no false claim), a key still changed
on a second reload (still named: the running value stays), and a changed
key together with a broken policy (refused, old policy, nothing claimed).
The gateway runs as a default install does (user sandgate).
"""

import json
import os
import socket
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


def admin(sock_path, method, path):
    st, _, body = T.unix_http(sock_path, ("%s %s HTTP/1.1\r\nHost: sandgate\r\n"
        "Connection: close\r\nContent-Length: 0\r\n\r\n" % (method,
        path)).encode())
    return st, json.loads(body) if body.strip() else None


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class ReloadRestartKeysTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir()
        self.addCleanup(self.td.cleanup)
        self.origin = T.Origin("origin", host="127.0.0.2")
        self.addCleanup(self.origin.stop)
        self.dns = T.Dnsmasq(self.td.path, [("first.test", "127.0.0.2"),
            ("later.test", "127.0.0.2")])
        self.addCleanup(self.dns.stop)
        self.sock = self.td.join("adm.sock")
        # The metrics port is bound after the HTTP listener accepts and
        # after the admin socket exists: a port another test took between
        # free_port() and that bind ends the gateway. Ready means the admin
        # API answers; a gateway that ended is started again on new ports.
        for attempt in range(3):
            self.mport = T.free_port()
            self.gw = T.Gateway(self.td.path, self.dns,
                {"main.yaml": self.policy(["first.test"])}, user="sandgate",
                extra={"listen": {"metrics": "127.0.0.1:%d" % self.mport,
                    "admin": self.sock}})
            self.gw.start()
            if self.admin_answers():
                break
            tail = self.gw.log_tail()
            self.gw.stop()
            if attempt == 2:
                self.fail("the admin API never answered; log tail:\n" + tail)
        self.addCleanup(self.gw.stop)
        with open(self.gw.cfg_path) as f:
            self.cfg_text = f.read()

    def admin_answers(self):
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and self.gw.alive():
            try:
                st, _ = admin(self.sock, "GET", "/v1/status")
                return st == 200
            except OSError:
                time.sleep(0.05)
        return False

    def policy(self, hosts):
        return {"sandboxes": [T.local_sandbox("main")],
                "policies": [{"name": "main", "allow": [{"host": h, "ports":
                    [self.origin.port]} for h in hosts],
                    "allow_private": ["127.0.0.2/32"]}]}

    def write_config(self, metrics=None, workers=None, timeout=None):
        """The config file with listen.metrics, workers and
        upstream.connect_timeout written anew (YAML text)."""
        text = self.cfg_text
        for key, old, new in (("metrics", '"127.0.0.1:%d"' % self.mport,
                metrics), ("workers", "2", workers), ("connect_timeout",
                '"3s"', timeout)):
            if new is not None:
                line = "%s: %s\n" % (key, old)
                self.assertIn(line, text)
                text = text.replace(line, "%s: %s\n" % (key, new))
        tmp = self.gw.cfg_path + ".tmp~"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, self.gw.cfg_path)

    def get(self, host):
        return T.curl("http://%s:%d/x" % (host, self.origin.port),
            proxy=self.gw.url)

    def reload_by(self, how):
        """Reload by SIGHUP or POST; the log written by it, and the answer."""
        start = len(self.gw.log_text())
        doc = None
        if how == "sighup":
            self.gw.reload()
            m = self.gw.wait_log(r"reload: (new policy in force|policies "
                r"applied|failed).*", 10, start)
            self.assertIsNotNone(m, self.gw.log_tail())
        else:
            st, doc = admin(self.sock, "POST", "/v1/reload")
            self.assertIn(st, (200, 400), doc)
            doc["status"] = st
        time.sleep(0.2 * T.SLOW)  # the per-key lines come first; be sure
        return self.gw.log_text()[start:], doc

    def assert_policy_applied(self):
        r = self.get("later.test")
        self.assertEqual(r.status, 200, r)
        rows = self.gw.wait_audit(host="later.test", decision="allow")
        self.assertTrue(rows, "no allow row for later.test")
        self.assertEqual(rows[-1]["rule"], "main:allow[1]")

    def check_restart_claim(self, how):
        newport = T.free_port()
        self.write_config(metrics='"127.0.0.1:%d"' % newport, workers=3)
        self.gw.write_policy("main.yaml", self.policy(["first.test",
            "later.test"]))
        log, doc = self.reload_by(how)
        self.assertRegex(log, r"reload: listen\.metrics needs a restart")
        self.assertRegex(log, r"reload: workers needs a restart")
        self.assertRegex(log, r"reload: policies applied \(.*\); needs a "
            r"restart: listen\.metrics, workers\n")
        self.assertNotIn("new policy in force", log)
        self.assertNotIn("reload failed", log)
        if doc is not None:
            self.assertEqual(doc, {"status": 200, "ok": True,
                "message": "needs a restart: listen.metrics, workers",
                "needs_restart": ["listen.metrics", "workers"]})
        # the policy is in force ...
        self.assert_policy_applied()
        # ... the restart-only keys are not: old metrics port, old workers
        st, _, body = T.tcp_http(self.mport, "GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertFalse(listening(newport), "the new metrics port opened")
        return newport

    def test_01_sighup_names_restart_keys(self):
        self.check_restart_claim("sighup")

    def test_02_post_reload_names_restart_keys(self):
        self.check_restart_claim("post")

    def test_03_nothing_restart_only_changed(self):
        """Only a policy changed: the plain message, by both ways."""
        for how in ("sighup", "post"):
            with self.subTest(how=how):
                hosts = ["first.test", "later.test"]
                if how == "post":
                    hosts.append("third.test")
                self.gw.write_policy("main.yaml", self.policy(hosts))
                log, doc = self.reload_by(how)
                self.assertRegex(log, r"reload: new policy in force")
                self.assertNotIn("needs a restart", log)
                if doc is not None:
                    self.assertEqual(doc, {"status": 200, "ok": True,
                        "message": "new policy in force",
                        "needs_restart": []})
                self.assert_policy_applied()

    def test_04_same_values_written_otherwise(self):
        """listen.metrics unquoted, connect_timeout 3s as 3000ms, workers
        as before: the same values, so no claim."""
        self.write_config(metrics="127.0.0.1:%d" % self.mport, workers=2,
            timeout="3000ms")
        self.gw.write_policy("main.yaml", self.policy(["first.test",
            "later.test"]))
        log, doc = self.reload_by("post")
        self.assertEqual(doc, {"status": 200, "ok": True,
            "message": "new policy in force", "needs_restart": []})
        self.assertNotIn("needs a restart", log)
        self.assert_policy_applied()
        # the same file with a different timeout is named: the check sees it
        self.write_config(timeout="4s")
        log, doc = self.reload_by("post")
        self.assertEqual(doc["needs_restart"], ["upstream.connect_timeout"])

    def test_05_still_named_on_the_next_reload(self):
        """A second reload after the change still names the key: the
        running value has not changed; put back, the claim goes."""
        newport = self.check_restart_claim("post")
        log, doc = self.reload_by("post")
        self.assertEqual(doc["needs_restart"], ["listen.metrics", "workers"])
        self.write_config(metrics='"127.0.0.1:%d"' % newport)  # workers back
        log, doc = self.reload_by("sighup")
        self.assertRegex(log, r"needs a restart: listen\.metrics\n")
        self.assertNotRegex(log, r"workers needs a restart")
        self.write_config()
        log, doc = self.reload_by("post")
        self.assertEqual(doc["needs_restart"], [])
        self.assertIn("new policy in force", log)

    def test_06_broken_policy_claims_nothing(self):
        """A restart-only change with a broken policy: refused as a whole,
        the old policy stays, no key is claimed."""
        self.write_config(metrics='"127.0.0.1:%d"' % T.free_port(), workers=3)
        self.gw.write_policy("main.yaml", "policies: [ {name: main, allow: "
            "[ {host: later.test, ports: [notaport]} ] } ]\n")
        log, doc = self.reload_by("post")
        self.assertEqual(doc["status"], 400, doc)
        self.assertFalse(doc["ok"])
        self.assertNotIn("needs_restart", doc)
        self.assertNotIn("needs a restart", log)
        self.assertIn("reload failed", log)
        r = self.get("later.test")
        self.assertEqual(r.status, 403, r)
        rows = self.gw.wait_audit(host="later.test", decision="deny")
        self.assertTrue(rows, "no deny row for later.test")
        r = self.get("first.test")
        self.assertEqual(r.status, 200, r)


if __name__ == "__main__":
    T.require_binary()
    if os.geteuid() != 0:
        T.skip_file("the gateway drops to user sandgate: needs root")
    unittest.main(verbosity=2)
