#!/usr/bin/python3
"""
policies_watch: true (SPEC §3, issue 17): the gateway reloads by itself when
a policy file or directory changes -- a file edited, added, deleted, the
symlink swap with which Kubernetes updates a mounted ConfigMap (a new
timestamped directory, "..data" renamed over the old symlink) -- and, as with
SIGHUP, a file with an error keeps the old policy in force. Each change is
checked by a request through the gateway and by the log's reload lines; the
gateway runs as user sandgate (seccomp), as it would in production.
"""

import os
import shutil
import sys
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

TOKEN_B = "tok-b-61a0f93c"


def eventually(fn, timeout=10.0):
    deadline = time.time() + timeout * T.SLOW
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(0.1)


class PoliciesWatchTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir("sgwatch-")
        self.addCleanup(self.td.cleanup)
        self.origin = T.Origin("origin", host="127.0.0.2")
        self.addCleanup(self.origin.stop)
        self.dns = T.Dnsmasq(self.td.path, [(n, "127.0.0.2") for n in (
            "one.test", "two.test", "three.test", "four.test")])
        self.addCleanup(self.dns.stop)
        # Two policy paths: a plain directory, and one laid out as a
        # ConfigMap volume (files are symlinks through ..data).
        self.cm = self.td.join("configmap")
        os.makedirs(self.td.join("configmap", "..2026_12_03_06_00_00.000000001"))
        self.cm_write("..2026_12_03_06_00_00.000000001", ["four.test"])
        os.symlink("..2026_12_03_06_00_00.000000001", self.td.join(
            "configmap", "..data"))
        os.symlink("..data/cm.yaml", self.td.join("configmap", "cm.yaml"))
        self.gw = T.Gateway(self.td.path, self.dns,
                            {"main.yaml": self.main(["one.test"])},
                            user="sandgate",
                            extra={"policies_watch": True})
        # And a single file, watched through its directory.
        self.solo = self.td.join("single", "solo.yaml")
        os.makedirs(os.path.dirname(self.solo))
        self.solo_write(["one.test"])
        with open(self.gw.cfg_path) as f:
            cfg = f.read().replace("policies: [", "policies: [\"%s\", \"%s\", "
                                   % (self.cm, self.solo))
        with open(self.gw.cfg_path, "w") as f:
            f.write(cfg)
        T.open_to_others(self.cm)
        self.gw.start()
        self.addCleanup(self.gw.stop)
        self.assertTrue(self.gw.wait_log(r"policies_watch: watching 3 policy paths"))

    def main(self, hosts):
        return {"sandboxes": [T.local_sandbox("main")],
                "policies": [{"name": "main",
                              "allow": [{"host": h, "ports": [self.origin.port]}
                                        for h in hosts],
                              "allow_private": ["127.0.0.2/32"]}]}

    def cm_write(self, stamp, hosts):
        doc = {"policies": [{"name": "cm",
                             "allow": [{"host": h, "ports": [self.origin.port]}
                                       for h in hosts],
                             "allow_private": ["127.0.0.2/32"]}],
               "sandboxes": [T.token_sandbox("cm-box", TOKEN_B, "cm")]}
        path = self.td.join("configmap", stamp, "cm.yaml")
        with open(path, "w") as f:
            f.write(T.to_yaml(doc) + "\n")
        T.open_to_others(os.path.dirname(path))
        os.chmod(path, 0o644)

    def solo_write(self, hosts):
        """The single-file policy, replaced the way editors save (rename)."""
        doc = {"policies": [{"name": "solo",
                             "allow": [{"host": h, "ports": [self.origin.port]}
                                       for h in hosts],
                             "allow_private": ["127.0.0.2/32"]}],
               "sandboxes": [T.token_sandbox("solo-box", TOKEN_B + "s",
                                             "solo")]}
        with open(self.solo + ".tmp", "w") as f:
            f.write(T.to_yaml(doc) + "\n")
        os.chmod(self.solo + ".tmp", 0o644)
        os.rename(self.solo + ".tmp", self.solo)
        T.open_to_others(os.path.dirname(self.solo))

    def status(self, host, auth=None):
        args = ["--proxy-user", auth] if auth else []
        return T.curl("http://%s:%d/" % (host, self.origin.port),
                      proxy=self.gw.url, tmp=self.td.path, args=args).status

    def reloads(self, word):
        return self.gw.log_text().count(word)

    def wait_reload(self, before_ok, before_err=None):
        """Until a reload after the given counts has happened; which kind."""
        def done():
            if self.reloads("reload: new policy in force") > before_ok:
                return "ok"
            if before_err is not None and \
                    self.reloads("reload failed") > before_err:
                return "error"
            return None
        got = eventually(done)
        self.assertIsNotNone(got, "no reload:\n" + self.gw.log_tail())
        return got

    def counts(self):
        return (self.reloads("reload: new policy in force"),
                self.reloads("reload failed"))

    def test_edit_add_delete_swap_and_bad_file(self):
        self.assertEqual(self.status("one.test"), 200)
        self.assertEqual(self.status("two.test"), 403)
        self.assertEqual(self.status("four.test", "cm-box:" + TOKEN_B), 200)

        # Edit: main.yaml rewritten in place.
        ok, err = self.counts()
        with open(os.path.join(self.gw.policy_dir, "main.yaml"), "w") as f:
            f.write(T.to_yaml(self.main(["two.test"])) + "\n")
        self.assertEqual(self.wait_reload(ok, err), "ok")
        self.assertEqual(self.status("two.test"), 200)
        self.assertEqual(self.status("one.test"), 403)

        # Add: a new file with another sandbox (by source address) and policy.
        other = ["--interface", "127.0.0.9"]
        url3 = "http://three.test:%d/" % self.origin.port
        self.assertEqual(T.curl(url3, proxy=self.gw.url, tmp=self.td.path,
                                args=other).status, 407)
        ok, err = self.counts()
        self.gw.write_policy("extra.yaml", {
            "sandboxes": [T.local_sandbox("extra", sid="other",
                                          source="127.0.0.9/32")],
            "policies": [{"name": "extra",
                          "allow": [{"host": "three.test",
                                     "ports": [self.origin.port]}],
                          "allow_private": ["127.0.0.2/32"]}]})
        self.assertEqual(self.wait_reload(ok, err), "ok")
        self.assertEqual(T.curl(url3, proxy=self.gw.url, tmp=self.td.path,
                                args=other).status, 200)

        # Delete it again: that sandbox is unknown once more.
        ok, err = self.counts()
        os.unlink(os.path.join(self.gw.policy_dir, "extra.yaml"))
        self.assertEqual(self.wait_reload(ok, err), "ok")
        self.assertEqual(T.curl(url3, proxy=self.gw.url, tmp=self.td.path,
                                args=other).status, 407)

        # The ConfigMap's symlink swap: a new timestamped directory, then
        # ..data renamed over the old link, then the old directory removed.
        ok, err = self.counts()
        new = "..2026_12_03_06_05_00.000000002"
        os.makedirs(self.td.join("configmap", new))
        self.cm_write(new, ["three.test"])
        os.symlink(new, self.td.join("configmap", "..data_tmp"))
        os.rename(self.td.join("configmap", "..data_tmp"),
                  self.td.join("configmap", "..data"))
        shutil.rmtree(self.td.join("configmap",
                                   "..2026_12_03_06_00_00.000000001"))
        self.assertEqual(self.wait_reload(ok, err), "ok")
        auth = "cm-box:" + TOKEN_B
        self.assertTrue(eventually(lambda: self.status("three.test", auth) ==
                                   200))
        self.assertEqual(self.status("four.test", auth), 403)

        # The single file, replaced.
        solo = "solo-box:" + TOKEN_B + "s"
        self.assertEqual(self.status("one.test", solo), 200)
        ok, err = self.counts()
        self.solo_write(["two.test"])
        self.assertEqual(self.wait_reload(ok, err), "ok")
        self.assertEqual(self.status("two.test", solo), 200)
        self.assertEqual(self.status("one.test", solo), 403)

        # A bad file: the reload fails, the old policy stays in force.
        ok, err = self.counts()
        self.gw.write_policy("main.yaml", "policies: [ {name: main, allow: [\n")
        self.assertEqual(self.wait_reload(ok, err), "error")
        self.assertIn("the previous policy stays in force",
                      self.gw.log_text())
        self.assertEqual(self.status("two.test"), 200)
        # Fixed: it applies again.
        ok, err = self.counts()
        self.gw.write_policy("main.yaml", self.main(["one.test"]))
        self.assertEqual(self.wait_reload(ok, err), "ok")
        self.assertEqual(self.status("one.test"), 200)
        self.assertEqual(self.status("two.test"), 403)


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
