#!/usr/bin/python3
"""
Keys stay out of the tree (docs/packaging.md, "What the package is built
from"): `sandgate serve` on the built-in defaults, run from a scratch clone
of the checkout as `make run` does (its default install's configuration:
user sandgate, seccomp, keeper), creates var/ and certs/ca.*, vault.key,
audit.key and audit.pub; afterwards `git status --porcelain` is empty, so no
key can be committed by accident. And scripts/build-deb.sh copies tracked
files only: its source tree is exactly `git ls-files`, without the keys
serve made. The attacker's variants: a key-like file under certs/ with a
name serve does not use yet (ignored all the same), and untracked files
outside certs/ and var/ (a stray key, a source file nobody added), which git
shows but the package build must not take. serve runs in a network
namespace of the test's own, so the default ports are its alone: root only
(exit 77 otherwise).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

GIT = shutil.which("git") or "/usr/bin/git"
MADE = ["certs/ca.crt", "certs/ca.key", "certs/vault.key", "certs/audit.key",
        "certs/audit.pub", "var/audit.db", "var/vault.db"]


def git(clone, *args):
    r = subprocess.run([GIT, "-C", clone] + list(args), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("git %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


class TreeCleanTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-tree-")
        cls.addClassCleanup(cls.td.cleanup)
        os.chmod(cls.td.path, 0o755)
        cls.clone = cls.td.join("clone")
        r = subprocess.run([GIT, "clone", "-q", "--depth", "1",
            "file://" + T.SRC, cls.clone], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError("git clone: " + r.stdout)
        os.chmod(cls.clone, 0o755)
        cls.serve_on_defaults()

    @classmethod
    def serve_on_defaults(cls):
        """serve with no config from the clone's top (make run), in a
        network namespace of its own; one request through it; SIGTERM."""
        log = cls.td.join("serve.log")
        proc = T.Proc(["/usr/bin/unshare", "--net", "/bin/sh", "-c",
            "ip link set lo up && exec \"$0\" serve", T.BIN], log,
            cwd=cls.clone, env=T.clean_env())
        try:
            deadline = time.time() + 20 * T.SLOW
            while time.time() < deadline and proc.alive() and \
                    " ready" not in proc.log_text():
                time.sleep(0.1)
            if " ready" not in proc.log_text():
                raise AssertionError("serve did not get ready:\n" +
                    proc.log_tail())
            r = subprocess.run(["/usr/bin/nsenter", "--net=/proc/%d/ns/net" %
                proc.pid, T.CURL, "-s", "-o", "/dev/null", "-w",
                "%{http_code}", "-x", "http://127.0.0.1:3128",
                "http://example.test/"], stdout=subprocess.PIPE, text=True,
                timeout=30)
            cls.status = r.stdout
        finally:
            rc = proc.stop()
        cls.serve_log = proc.log_text()
        cls.serve_rc = rc

    def test_01_serve_made_keys_and_state(self):
        self.assertIn(self.serve_rc, (0, -signal.SIGTERM, 128 + signal.SIGTERM),
            self.serve_log)
        self.assertIn(self.status, ("403", "407"))
        self.assertRegex(self.serve_log, r"privileges: running as sandgate")
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                       "runtime error:"):
            self.assertNotIn(marker, self.serve_log)
        for rel in MADE:
            with self.subTest(made=rel):
                self.assertTrue(os.path.exists(os.path.join(self.clone, rel)),
                    rel)

    def test_02_git_status_is_empty(self):
        self.assertEqual(git(self.clone, "status", "--porcelain"), "")
        ignored = git(self.clone, "status", "--porcelain", "--ignored")
        for rel in ("certs/ca.key", "certs/vault.key", "certs/audit.key",
                    "certs/audit.pub", "var/"):
            self.assertIn("!! " + rel + "\n", ignored)
        # a key certs/ will hold one day is ignored as well
        with open(os.path.join(self.clone, "certs", "ingress-tls.key"),
                "w") as f:
            f.write("not a real key\n")
        self.addCleanup(os.unlink, os.path.join(self.clone, "certs",
            "ingress-tls.key"))
        self.assertEqual(git(self.clone, "status", "--porcelain"), "")
        # ... but the README beside them is still tracked
        self.assertIn("certs/README.md\n", git(self.clone, "ls-files",
            "certs"))

    def test_03_deb_sources_are_tracked_files_only(self):
        strays = ["leaked.key", "src/forgotten.c"]
        for rel in strays:
            with open(os.path.join(self.clone, rel), "w") as f:
                f.write("untracked\n")
            self.addCleanup(os.unlink, os.path.join(self.clone, rel))
        # git shows them (they are not ignored) ...
        status = git(self.clone, "status", "--porcelain")
        for rel in strays:
            self.assertIn("?? " + rel + "\n", status)
        out = self.td.join("deb")
        r = subprocess.run([os.path.join(self.clone, "scripts",
            "build-deb.sh"), "--sources-only", out], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        tree = r.stdout.strip().splitlines()[-1]
        self.assertTrue(tree.startswith(out + "/sandgate-"), tree)
        got = set()
        for top, dirs, files in os.walk(tree):
            for f in files:
                got.add(os.path.relpath(os.path.join(top, f), tree))
        tracked = set(git(self.clone, "ls-files").splitlines())
        # ... the package build does not take them, nor the keys
        self.assertEqual(sorted(got - tracked), [])
        self.assertEqual(sorted(tracked - got), [])
        for rel in MADE + strays:
            self.assertNotIn(rel, got)


if __name__ == "__main__":
    T.require_binary()
    if os.geteuid() != 0:
        T.skip_file("serve on its default ports runs in a network namespace "
            "of the test's own: needs root")
    for tool in (GIT, "/usr/bin/unshare", "/usr/bin/nsenter", T.CURL):
        if not os.access(tool, os.X_OK):
            T.skip_file(tool + " is not installed")
    if subprocess.run([GIT, "-C", T.SRC, "rev-parse", "--git-dir"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        T.skip_file(T.SRC + " is not a git checkout")
    unittest.main(verbosity=2)
