#!/usr/bin/python3
"""
End-to-end tests of `sandgate vault` (SPEC §2, §7) with the real binary: a
value goes in on stdin and never shows up in argv, ps, output or the
database file; list shows names, credentials and times; rotate, rm; and the
tamper cases: one byte of a ciphertext edited, two entries' sealed values
swapped, a key file others can read, a wrong or missing key.
"""

import base64
import os
import sqlite3
import stat
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

POLICY = """\
credentials:
  - name: openai
    secret: openai-prod
    hosts: [api.openai.com]
  - name: openai-batch
    secret: openai-prod
    hosts: [api.openai.com]
    headers: [X-Api-Key]
  - name: github
    secret: gh-token
    hosts: [api.github.com]
"""

SECRET_A = "sk-proj-E2Etest0123456789abcdefABCDEF_secret_A"
SECRET_B = "ghp_E2EtestB16C7e42F292c6912E7710c838347Ae"
SECRET_C = "rotated-E2E-value-C-9f8e7d6c5b4a"


class VaultCliTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir()
        self.addCleanup(self.td.cleanup)
        os.makedirs(self.td.join("policies"))
        with open(self.td.join("policies", "creds.yaml"), "w") as f:
            f.write(POLICY)
        self.db = self.td.join("var", "vault.db")
        self.key = self.td.join("certs", "vault.key")
        self.cfg = self.td.join("sandgate.yaml")
        with open(self.cfg, "w") as f:
            f.write(T.to_yaml({
                "state_dir": self.td.join("var"),
                "policies": [self.td.join("policies")],
                "vault": {"db": self.db, "key_file": self.key},
            }) + "\n")
        self.outputs = []  # every stdout/stderr, checked for values at the end

    def tearDown(self):
        for text in self.outputs:
            for s in (SECRET_A, SECRET_B, SECRET_C):
                self.assertNotIn(s, text)
                self.assertNotIn(s[4:-4], text)

    def vault(self, *args, input=None):
        r = T.run_sandgate("vault", *args, "-c", self.cfg, input=input)
        self.outputs += [r.stdout, r.stderr]
        return r

    def set(self, name, value, sub="set"):
        r = self.vault(sub, name, input=value + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def table(self):
        """vault list as {name: [credentials, created, rotated, version, status]}."""
        r = self.vault("list")
        lines = r.stdout.splitlines()
        self.assertTrue(lines and lines[0].split()[0] == "NAME", r.stdout)
        rows = {}
        for l in lines[1:]:
            f = l.split()
            rows[f[0]] = f[1:]
        return r, rows

    # ---------------------------------------------------------------- basics

    def test_set_list_rotate_rm(self):
        # Listing before anything exists: an empty table, no key made.
        r, rows = self.table()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(rows, {})
        self.assertFalse(os.path.exists(self.key))

        r = self.set("openai-prod", SECRET_A)
        self.assertIn("openai-prod", r.stdout)
        self.set("gh-token", SECRET_B)
        self.set("unused.entry", SECRET_C)
        # The key and the database are the owner's alone.
        self.assertEqual(stat.S_IMODE(os.stat(self.key).st_mode), 0o600)
        self.assertEqual(os.path.getsize(self.key), 32)
        self.assertEqual(stat.S_IMODE(os.stat(self.db).st_mode), 0o600)

        r, rows = self.table()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(list(rows), ["gh-token", "openai-prod", "unused.entry"])
        self.assertEqual(rows["openai-prod"][0], "openai,openai-batch")
        self.assertEqual(rows["gh-token"][0], "github")
        self.assertEqual(rows["unused.entry"][0], "-")
        created, rotated, version, status = rows["openai-prod"][1:]
        self.assertRegex(created, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual((rotated, version, status), ("-", "1", "ok"))

        # set does not overwrite; rotate does, and says so in list.
        r = self.vault("set", "openai-prod", input=SECRET_C)
        self.assertEqual(r.returncode, 1)
        self.assertIn("already exists", r.stderr)
        self.assertIn("vault rotate", r.stderr)
        r = self.set("openai-prod", SECRET_C, sub="rotate")
        self.assertIn("version 2", r.stdout)
        r, rows = self.table()
        self.assertRegex(rows["openai-prod"][2], r"^\d{4}-")
        self.assertEqual(rows["openai-prod"][3:], ["2", "ok"])
        r = self.vault("rotate", "no-such", input=SECRET_A)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no-such", r.stderr)

        # rm, and rm again.
        r = self.vault("rm", "unused.entry")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.vault("rm", "gh-token")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("credential github still uses gh-token", r.stderr)
        r = self.vault("rm", "gh-token")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        r, rows = self.table()
        self.assertEqual(list(rows), ["openai-prod"])
        self.assertIn("credential github uses vault entry gh-token, which "
                      "does not exist", r.stderr)

    def test_value_never_exposed(self):
        # While `vault set` waits for its value, nothing about the process
        # shows it: argv, environment, ps.
        p = subprocess.Popen([T.BIN, "vault", "set", "openai-prod", "-c", self.cfg],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=T.clean_env())
        try:
            time.sleep(0.3 * T.SLOW)
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                cmdline = f.read()
            ps = subprocess.run(["ps", "-eo", "pid,args"], stdout=subprocess.PIPE,
                text=True).stdout
            out, err = p.communicate(SECRET_A.encode() + b"\n", timeout=30 * T.SLOW)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(b"openai-prod", cmdline)
        self.assertNotIn(SECRET_A.encode(), cmdline)
        self.assertNotIn(SECRET_A, ps)
        self.outputs += [out.decode(), err.decode()]
        # The database holds it sealed: no plain, base64 or hex copy.
        with open(self.db, "rb") as f:
            raw = f.read()
        for form in (SECRET_A.encode(), base64.b64encode(SECRET_A.encode()),
                     SECRET_A.encode().hex().encode(), SECRET_A[8:30].encode()):
            self.assertNotIn(form, raw)
        # A value put on the command line is refused, and not echoed.
        r = self.vault("set", "other", SECRET_B)
        self.assertEqual(r.returncode, 2)
        self.assertIn("stdin", r.stderr)
        # A name that is not one (e.g. a pasted value) is not echoed either.
        r = self.vault("set", SECRET_B + "/x", input="v" * 20)
        self.assertEqual(r.returncode, 1)
        self.assertIn("invalid entry name", r.stderr)
        r, rows = self.table()
        self.assertEqual(list(rows), ["openai-prod"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_input_rules(self):
        r = self.vault("set", "empty", input="")
        self.assertEqual(r.returncode, 1)
        self.assertIn("empty value", r.stderr)
        r = self.vault("set", "empty", input="\n")
        self.assertEqual(r.returncode, 1)
        r = self.vault("set", "big", input="b" * 16384 + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.vault("set", "too-big", input="b" * 16385)
        self.assertEqual(r.returncode, 1)
        self.assertIn("16384", r.stderr)
        for args, code in ((("bogus",), 2), ((), 2), (("set",), 2),
                           (("list", "extra"), 2), (("list", "--nope"), 2)):
            r = self.vault(*args)
            self.assertEqual(r.returncode, code, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        r = T.run_sandgate("vault", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("stdin", r.stdout)

    # ---------------------------------------------------------------- tamper

    def sealed(self, name):
        with sqlite3.connect(self.db) as c:
            return c.execute("SELECT nonce, ciphertext, tag FROM secrets "
                             "WHERE name = ?", (name,)).fetchone()

    def put_sealed(self, name, row):
        c = sqlite3.connect(self.db)
        c.execute("UPDATE secrets SET nonce = ?, ciphertext = ?, tag = ? "
                  "WHERE name = ?", (row[0], row[1], row[2], name))
        c.commit()
        c.close()

    def test_tamper_one_byte(self):
        self.set("openai-prod", SECRET_A)
        self.set("gh-token", SECRET_B)
        good = self.sealed("openai-prod")
        for col in range(3):  # nonce, ciphertext, tag
            bad = list(good)
            b = bytearray(bad[col])
            b[len(b) // 2] ^= 0x20
            bad[col] = bytes(b)
            self.put_sealed("openai-prod", bad)
            r, rows = self.table()
            self.assertEqual(r.returncode, 1, (col, r.stdout))
            self.assertIn("entry openai-prod does not open: tampered or wrong key",
                          r.stderr)
            self.assertNotIn("gh-token", r.stderr)
            self.assertEqual(rows["openai-prod"][-1], "BROKEN")
            self.assertEqual(rows["gh-token"][-1], "ok")
            self.put_sealed("openai-prod", good)
        r, rows = self.table()
        self.assertEqual(r.returncode, 0, r.stderr)
        # Rotating a broken entry repairs it.
        bad = (good[0], bytes([good[1][0] ^ 1]) + good[1][1:], good[2])
        self.put_sealed("openai-prod", bad)
        self.set("openai-prod", SECRET_C, sub="rotate")
        r, rows = self.table()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_tamper_swap_entries(self):
        self.set("openai-prod", SECRET_A)
        self.set("gh-token", SECRET_B)
        a, b = self.sealed("openai-prod"), self.sealed("gh-token")
        self.put_sealed("openai-prod", b)
        self.put_sealed("gh-token", a)
        r, rows = self.table()
        self.assertEqual(r.returncode, 1)
        self.assertIn("entry openai-prod does not open", r.stderr)
        self.assertIn("entry gh-token does not open", r.stderr)
        self.assertEqual(rows["openai-prod"][-1], "BROKEN")
        self.assertEqual(rows["gh-token"][-1], "BROKEN")

    def test_keys(self):
        self.set("openai-prod", SECRET_A)
        # A key file group or others can read is refused, by every command.
        os.chmod(self.key, 0o644)
        for args, inp in ((("list",), None), (("set", "x"), "value-x"),
                          (("rotate", "openai-prod"), SECRET_C),
                          (("rm", "openai-prod"), None)):
            r = self.vault(*args, input=inp)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn(self.key, r.stderr)
            self.assertIn("group or others", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        os.chmod(self.key, 0o600)
        r, rows = self.table()
        self.assertEqual((r.returncode, rows["openai-prod"][-1]), (0, "ok"))

        # A wrong key: caught before any entry is looked at.
        with open(self.key, "rb") as f:
            good = f.read()
        os.unlink(self.key)
        fd = os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32))
        os.close(fd)
        r = self.vault("list")
        self.assertEqual(r.returncode, 1)
        self.assertIn("wrong key", r.stderr)

        # A missing key is not silently replaced while secrets exist.
        os.unlink(self.key)
        r = self.vault("set", "new-entry", input="value-new")
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing", r.stderr)
        self.assertFalse(os.path.exists(self.key))
        fd = os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, good)
        os.close(fd)
        r, rows = self.table()
        self.assertEqual((r.returncode, list(rows)), (0, ["openai-prod"]))


if __name__ == "__main__":
    T.main()
