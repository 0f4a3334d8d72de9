#!/usr/bin/python3
"""
A file that cannot be opened is one line, `sandgate: FILE: cannot open:
<strerror>`, exit 1 (issue 16, point 6): the config file named by -c, for
every command that loads it, and a policy path the config names. Errors
inside a file keep the FILE:LINE:COL form and the summary line.
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

COMMANDS = [
    ["policy", "check"],
    ["policy", "explain", "--policy", "default", "example.com"],
    ["serve"],
    ["audit"],
    ["vault", "list"],
    ["ca", "init"],
]


class OpenErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-open-")
        cls.addClassCleanup(cls.td.cleanup)

    def one_line(self, r, path, why):
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, "sandgate: %s: cannot open: %s\n" % (
            path, why))

    def test_missing_config(self):
        path = self.td.join("nope.yaml")
        for cmd in COMMANDS:
            with self.subTest(cmd=cmd[:2]):
                r = T.run_sandgate(*cmd, "-c", path)
                self.one_line(r, path, "No such file or directory")

    def test_config_is_a_directory(self):
        path = self.td.join("adir.yaml")
        os.makedirs(path, exist_ok=True)
        r = T.run_sandgate("policy", "check", "-c", path)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("sandgate: %s: " % path), r.stderr)

    def test_unreadable_config(self):
        if os.geteuid() == 0:
            self.skipTest("root reads a file of mode 0000")
        path = self.td.join("secret.yaml")
        with open(path, "w") as f:
            f.write("{}\n")
        os.chmod(path, 0)
        r = T.run_sandgate("policy", "check", "-c", path)
        self.one_line(r, path, "Permission denied")

    def test_missing_policy_path(self):
        cfg = self.td.join("c.yaml")
        missing = self.td.join("no-policies")
        with open(cfg, "w") as f:
            f.write("policies: [%s]\n" % missing)
        r = T.run_sandgate("policy", "check", "-c", cfg)
        self.one_line(r, missing, "No such file or directory")

    def test_errors_inside_keep_their_position(self):
        cfg = self.td.join("bad.yaml")
        with open(cfg, "w") as f:
            f.write("workers: 2\nbogus: 1\n")
        r = T.run_sandgate("policy", "check", "-c", cfg)
        self.assertEqual(r.returncode, 1)
        lines = r.stderr.splitlines()
        self.assertRegex(lines[0], r"^%s:2:1: " % cfg)
        self.assertEqual(lines[-1], "sandgate: 1 error")


if __name__ == "__main__":
    T.main()
