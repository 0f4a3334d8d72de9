#!/usr/bin/python3
"""
The signed audit chain (issue 13, acceptance 6; docs/audit.md "Checkpoints"):
the gateway creates its Ed25519 key beside the CA, writes a checkpoint row
every audit.checkpoint_interval (1s here) and at shutdown, and
`sandgate audit verify [--pubkey FILE]` checks every signature. Rows
rewritten with every hash recomputed fail at the next checkpoint; rows cut
after a checkpoint are reported; a wrong key fails; a `kill -9` under load
leaves a file that verifies, with its unsigned tail reported and signed by
the next start.
"""

import os
import re
import shutil
import signal
import stat
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_audit_cli as AC  # noqa: E402  (the Python chain)
import test_audit_crash as CR  # noqa: E402  (the client load)

try:
    from cryptography.hazmat.primitives.serialization import \
        load_pem_public_key
    from cryptography.exceptions import InvalidSignature
except ImportError:         # the cross-check is skipped, not the test
    load_pem_public_key = None


def checkpoint_fields(path):
    """The key=value pairs of a checkpoint row's path."""
    assert path.startswith("/events?"), path
    return dict(p.split("=", 1) for p in path[len("/events?"):].split("&"))


def checkpoint_message(row, head):
    """What the key signs, as docs/audit.md gives it."""
    f = checkpoint_fields(row["path"])
    return ("sandgate-audit-checkpoint-v1\nthrough=%s\nhead=%s\nat=%s\n"
            "ts=%s\n" % (f["through"], head, f["at"], row["ts"])).encode()


def rechain(db, start):
    """Recompute prev_hash and hash of every row from id start on."""
    rows = AC.read_rows(db)
    prev = None
    stmts = []
    for r in rows:
        if r["id"] < start:
            prev = r["hash"]
            continue
        if prev is None:
            prev = AC.ZERO
        h = AC.row_hash(prev, [r[c] for c in AC.HASHED])
        stmts.append("UPDATE events SET prev_hash = '%s', hash = '%s' "
                     "WHERE id = %d;" % (prev, h, r["id"]))
        prev = h
    AC.sqlite3_cli(db, "BEGIN;" + "".join(stmts) + "COMMIT;")


class AuditSignedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgaudit-signed-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        policy = {
            "sandboxes": [T.local_sandbox("main", sid="agent-signed")],
            "policies": [{"name": "main",
                          "allow": [{"host": "allowed.test"}]}],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"main.yaml": policy},
                           extra={"audit": {"checkpoint_interval": "1s"}})
        cls.addClassCleanup(cls.gw.stop)
        cls.db = cls.td.join("var", "audit.db")
        cls.key = cls.td.join("certs", "audit.key")
        cls.pub = cls.td.join("certs", "audit.pub")
        # Three bursts of denied requests, a checkpoint interval apart,
        # then a clean stop.
        cls.gw.start()
        for burst, n in enumerate((4, 3, 2)):
            for i in range(n):
                r = T.curl("http://denied.test/b%d/%d" % (burst, i),
                           proxy=cls.gw.url)
                assert r.status == 403, r
            time.sleep(1.5 * T.SLOW)
        cls.gw.stop()

    def verify(self, *args):
        return T.run_sandgate("audit", "verify", *args, timeout=120)

    def copy_db(self, name):
        d = self.td.join(name)
        os.makedirs(d)
        db = os.path.join(d, "audit.db")
        shutil.copy(self.db, db)
        return db

    def checkpoints(self, db):
        return [r for r in AC.read_rows(db) if r["kind"] == "admin" and
                r["rule"] == "checkpoint"]

    # ------------------------------------------------------------- clean

    def test_1_keys_beside_the_ca(self):
        self.assertEqual(stat.S_IMODE(os.stat(self.key).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.pub).st_mode), 0o644)
        self.assertTrue(os.path.exists(self.td.join("certs", "ca.key")))

    def test_2_clean_stop_verifies(self):
        r = self.verify("-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = AC.read_rows(self.db)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "ok: %d rows verified" % len(rows))
        self.assertIn("unsigned tail: 0 rows after the last checkpoint",
                      r.stdout)
        self.assertNotIn("note:", r.stdout)
        cps = self.checkpoints(self.db)
        self.assertGreaterEqual(len(cps), 3, r.stdout)
        self.assertRegex(r.stdout, r"checkpoints: %d signed by key "
                         r"[0-9a-f]{16}; the last, row %d \(shutdown, " %
                         (len(cps), rows[-1]["id"]))
        # Each checkpoint follows the row it signs; the last is the stop's.
        for c in cps:
            f = checkpoint_fields(c["path"])
            self.assertEqual(int(f["through"]), c["id"] - 1)
            self.assertEqual(f["head"], c["prev_hash"])
            self.assertEqual((c["decision"], c["reason"], c["sandbox"]),
                             ("allow", "checkpoint", None))
        self.assertEqual(checkpoint_fields(cps[-1]["path"])["at"], "shutdown")
        self.assertEqual(rows[-1]["id"], cps[-1]["id"])
        # Interval checkpoints sit between the bursts.
        self.assertTrue(any(checkpoint_fields(c["path"])["at"] == "interval"
                            for c in cps))
        self.assertIsNone(AC.py_verify(rows))

    @unittest.skipIf(load_pem_public_key is None, "no python3-cryptography")
    def test_3_signatures_cross_checked_in_python(self):
        with open(self.pub, "rb") as f:
            pub = load_pem_public_key(f.read())
        for c in self.checkpoints(self.db):
            sig = bytes.fromhex(checkpoint_fields(c["path"])["sig"])
            pub.verify(sig, checkpoint_message(c, c["prev_hash"]))
            with self.assertRaises(InvalidSignature):
                pub.verify(sig, checkpoint_message(c, AC.ZERO))

    # ------------------------------------------------------------ tamper

    def test_4_rewrite_with_every_hash_recomputed(self):
        db = self.copy_db("rewrite")
        first = AC.read_rows(db)[0]
        AC.sqlite3_cli(db, "UPDATE events SET host = 'innocent.example' "
                       "WHERE id = %d" % first["id"])
        rechain(db, first["id"])
        # The hash chain alone is consistent again...
        self.assertIsNone(AC.py_verify(AC.read_rows(db)))
        # ...but the first checkpoint after the row no longer fits.
        cp = self.checkpoints(db)[0]
        r = self.verify("--db", db, "--pubkey", self.pub)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(r.stdout, "")
        self.assertTrue(r.stderr.startswith(
            "sandgate: audit verify: row %d: checkpoint signature " %
            cp["id"]), r.stderr)
        self.assertIn("changed after they were signed", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1)

    def test_5_forged_checkpoint(self):
        db = self.copy_db("forged")
        cp = self.checkpoints(db)[-1]
        sig = checkpoint_fields(cp["path"])["sig"]
        forged = sig[:-2] + ("00" if sig[-2:] != "00" else "11")
        AC.sqlite3_cli(db, "UPDATE events SET path = replace(path, '%s', "
                       "'%s') WHERE id = %d" % (sig, forged, cp["id"]))
        rechain(db, cp["id"])
        r = self.verify("--db", db, "--pubkey", self.pub)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("row %d: checkpoint signature does not verify" %
                      cp["id"], r.stderr)

    def test_6_rows_deleted_after_a_checkpoint(self):
        cps = self.checkpoints(self.db)
        interval = [c for c in cps
                    if checkpoint_fields(c["path"])["at"] == "interval"][0]
        # Everything after an interval checkpoint cut away, the shutdown
        # checkpoint with it: the chain is whole, verify says what is off.
        db = self.copy_db("cut")
        AC.sqlite3_cli(db, "DELETE FROM events WHERE id > %d" %
                       interval["id"])
        r = self.verify("--db", db, "--pubkey", self.pub)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the last, row %d (interval, " % interval["id"],
                      r.stdout)
        self.assertIn("unsigned tail: 0 rows after the last checkpoint",
                      r.stdout)
        self.assertIn("note: the last checkpoint was not written at "
                      "shutdown", r.stdout)
        self.assertIn("rows after the checkpoint were deleted", r.stdout)
        # Only the shutdown checkpoint deleted: the rows it signed are an
        # unsigned tail again.
        db = self.copy_db("cut-last")
        prev = cps[-2]
        AC.sqlite3_cli(db, "DELETE FROM events WHERE id = %d" % cps[-1]["id"])
        r = self.verify("--db", db, "--pubkey", self.pub)
        self.assertEqual(r.returncode, 0, r.stderr)
        n = cps[-1]["id"] - prev["id"] - 1
        if n > 0:
            self.assertIn("unsigned tail: %d rows after the last checkpoint "
                          "(id %d..%d)" % (n, prev["id"] + 1,
                                           cps[-1]["id"] - 1), r.stdout)
        self.assertIn("note: the last checkpoint was not written at "
                      "shutdown", r.stdout)
        # A row deleted before a checkpoint: the chain has a gap.
        db = self.copy_db("cut-middle")
        AC.sqlite3_cli(db, "DELETE FROM events WHERE id = 2")
        r = self.verify("--db", db, "--pubkey", self.pub)
        self.assertEqual(r.returncode, 1)
        self.assertIn("row 2: missing", r.stderr)

    def test_7_wrong_or_missing_public_key(self):
        other = T.TempDir("sgaudit-otherkey-")
        self.addCleanup(other.cleanup)
        cfg = other.join("sandgate.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: ./var\n")
        r = T.run_sandgate("ca", "init", "-c", cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("wrote audit signing key", r.stdout)
        wrong = other.join("certs", "audit.pub")
        self.assertTrue(os.path.exists(wrong))
        r = self.verify("-c", self.gw.cfg_path, "--pubkey", wrong)
        self.assertEqual(r.returncode, 1, r.stdout)
        cp = self.checkpoints(self.db)[0]
        self.assertRegex(r.stderr, r"^sandgate: audit verify: row %d: "
                         r"checkpoint signed by key [0-9a-f]{16}, not by the "
                         r"public key given \(key [0-9a-f]{16}\)\n$" %
                         cp["id"])
        r = self.verify("-c", self.gw.cfg_path, "--pubkey",
                        other.join("nope.pub"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot open public key", r.stderr)
        # --pubkey belongs to verify alone.
        r = T.run_sandgate("audit", "-c", self.gw.cfg_path, "--pubkey", wrong)
        self.assertEqual(r.returncode, 2)

    # ------------------------------------------------------------- crash

    def test_8_kill9_under_load(self):
        before = len(AC.read_rows(self.db))
        self.gw.start()
        load = CR.Load(self.gw.port, "k9")
        try:
            # Long enough for interval checkpoints amid the load.
            deadline = time.time() + 2.5 * T.SLOW
            while time.time() < deadline:
                time.sleep(0.1)
            proc = self.gw.proc
            os.kill(proc.pid, signal.SIGKILL)
            proc.p.wait(10)
            proc.stop()         # already dead: closes the log, by PID
            self.gw.proc = None
        finally:
            load.stop()
        self.assertGreater(load.denied, 0)
        rows = AC.read_rows(self.db)
        self.assertGreater(len(rows), before)
        self.assertGreater(len(self.checkpoints(self.db)), 3)
        r = self.verify("-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0],
                         "ok: %d rows verified" % len(rows))
        self.assertRegex(r.stdout, r"unsigned tail: \d+ rows after the last "
                         r"checkpoint")
        self.assertIsNone(AC.py_verify(rows))
        # The next start signs what the crash left unsigned.
        self.gw.start()
        time.sleep(1.5 * T.SLOW)
        self.gw.stop()
        r = self.verify("-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("unsigned tail: 0 rows after the last checkpoint",
                      r.stdout)
        self.assertTrue(re.search(r"\(shutdown, ", r.stdout), r.stdout)


if __name__ == "__main__":
    T.main()
