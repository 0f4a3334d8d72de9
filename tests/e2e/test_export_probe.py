#!/usr/bin/python3
"""
Probe: what a security team reads -- `sandgate audit` (table, json, csv),
`audit export --format ocsf`, `audit stats`, `audit verify` -- when rows
hold text a sandbox chose, and when someone who can write audit.db (but
holds no signing key) wants a row out of the team's sight.

Found (tests that fail on the probed binary; details in their docstrings):
- test_index_tamper_hides_signed_row: rewriting only the SQLite indexes of
  `events` (PRAGMA writable_schema, no row touched) hides a row that a
  shutdown checkpoint signs from `sandgate audit --host NAME`,
  `--sandbox ID` and `--sandbox ID --decision deny`, files it under a
  sandbox that never existed, while `audit verify` (and stats' chain)
  says ok, every row signed. verify never checks the indexes
  (PRAGMA integrity_check reports "row N missing from index ...").
- test_stats_held_ask_method_is_not_a_question: under mode: ask, a sandbox
  that sends its request with the method `ASK` has its held request's row
  counted by `audit stats` as a *question* (the CASE keys on method = 'ASK'):
  approvals.question goes up and the request that timed out is missing from
  request-approval-timeout.
- test_question_row_unknowns_are_null: every HTTP question row (method ASK)
  has status 0 and client '-' where docs/audit.md says an unknown value is
  NULL "never '' or 0"; OCSF export then makes the question an HTTP Activity
  with http_response.code 0 (src/exchange/proxy_approval.c).

Tried, held (one line each; the passing test keeps what no other e2e test
covers):
- peer bytes in stored rows (ESC, CR LF, TAB, NUL, U+202E, U+2028, lone
  surrogate CESU bytes, 0xff): table shows only printable ASCII (`\\xNN`),
  one line per row; json lines parse, invalid UTF-8 -> U+FFFD, numbers are
  numbers; OCSF lines parse, non-UTF-8 / NUL strings get `?` for every byte
  outside printable ASCII; CSV round-trips through Python's csv with
  embedded `"`, `,`, CR LF (test_peer_bytes_in_every_format);
- filters: `--host a_b.test` does not match axb.test, `--host %` matches
  nothing, `--host A_B.TEST` is case-insensitive, `--sandbox "x' OR
  '1'='1"` matches nothing (bound parameters, GLOB not LIKE);
- time filters: `2026-12-02T14:00:03` (no zone), `+5m`, `-5m`, `0`,
  `1e3s`, `2026-02-30`, `99999999999999999d` are usage errors (exit 2);
  `13:59:60Z` rolls over to 14:00:00; `.999999Z` truncates to ms;
- hosts a sandbox sends are lower-cased everywhere (absolute form, CONNECT,
  SOCKS5, DNS), so `--host` finds them; SOCKS5 invalid names are stored
  escaped (`\\xNN`), DNS labels in RFC 1035 `\\DDD` form: no control byte
  reaches audit.db from any listener; HTTP/1 targets with bytes outside
  printable ASCII are 400 with no path kept;
- CSV formula injection: a SOCKS5 name `=cmd|' /C calc'!A0` or a method
  `+SUM`/`-1+1` is written as is into `--format csv` (no `'` prefix); the
  docs say so ("open untrusted CSV as text"), so not a finding;
- `audit stats` strings: non-ASCII becomes `?` (safe_string);
- verify: host edit, BLOB/TEXT type swap are caught (test_audit_cli covers).
"""

import csv
import hashlib
import io
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

COLS = ["id", "ts", "sandbox", "kind", "client", "host", "ip", "port",
        "country", "asn", "method", "path", "status", "decision", "rule",
        "reason", "credential", "bytes_up", "bytes_down", "duration_ms",
        "prev_hash", "hash"]
HASHED = COLS[:20]
ZERO = "0" * 64
SCHEMA = """
CREATE TABLE events (id INTEGER PRIMARY KEY, ts TEXT, sandbox TEXT,
  kind TEXT, client TEXT, host TEXT, ip TEXT, port INTEGER, country TEXT,
  asn INTEGER, method TEXT, path TEXT, status INTEGER, decision TEXT,
  rule TEXT, reason TEXT, credential TEXT, bytes_up INTEGER,
  bytes_down INTEGER, duration_ms INTEGER, prev_hash TEXT, hash TEXT);
CREATE INDEX events_ts ON events(ts);
CREATE INDEX events_sandbox ON events(sandbox, ts);
CREATE INDEX events_sandbox_decision ON events(sandbox, decision, ts);
CREATE INDEX events_decision ON events(decision, ts);
CREATE INDEX events_host ON events(host, ts);
PRAGMA user_version = 2;
"""


def encode(values):
    """docs/audit.md "The hash chain": values are str, bytes (raw TEXT
    bytes as stored), int or None."""
    out = b""
    for v in values:
        if v is None:
            out += b"\x00"
        elif isinstance(v, int):
            out += b"\x01" + struct.pack(">q", v)
        else:
            b = v.encode("utf-8") if isinstance(v, str) else v
            out += b"\x02" + struct.pack(">I", len(b)) + b
    return out


def audit(*args, timeout=30):
    return subprocess.run([T.BIN, "audit"] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=T.clean_env(), timeout=timeout * T.SLOW)


# Peer bytes as docs/audit.md says they are kept ("Peer-supplied bytes are
# stored as they came; `sandgate audit` escapes them for the terminal").
PEER_ROWS = [
    ("axb.test", b"/p1", "GET"),
    ("a_b.test", b"/p2", "GET"),
    ('=HYPERLINK("http://x.test","ok")', b"@SUM(1)", "+SUM"),
    ("bidi.test", "/a\u202eexe.txt\u2028x\x00y\x1b[2J\tz\r\n".encode(), "GET"),
    ("bad.test", b"/\xff\xed\xa0\x80end", "GET"),
]


class PeerBytesFormats(unittest.TestCase):
    """No gateway: a file written here with the documented chain."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.db = cls.td.join("audit.db")
        con = sqlite3.connect(cls.db)
        con.executescript(SCHEMA)
        prev = ZERO
        for i, (host, path, method) in enumerate(PEER_ROWS, 1):
            vals = [i, "2026-12-02T14:00:0%d.000Z" % i, "sb", "http",
                    "127.0.0.1:4%d" % i, host, None, 80, None, None, method,
                    path, 403, "deny", "default-deny", "policy-deny", None,
                    0, 0, 0]
            h = hashlib.sha256(prev.encode() + encode(vals)).hexdigest()
            con.execute("INSERT INTO events (%s) VALUES (%s)" % (
                ",".join(COLS), ",".join("?" * 22)),
                vals[:11] + [None] + vals[12:] + [prev, h])
            # Python's sqlite3 binds bytes as BLOB; store the raw bytes as TEXT.
            con.execute("UPDATE events SET path = CAST(? AS TEXT) WHERE id = ?",
                        (path, i))
            prev = h
        con.commit()
        con.close()

    def test_peer_bytes_in_every_format(self):
        """docs/audit.md "Querying from the command line": table "non-printable
        bytes as \\xNN"; json "one object per line ... invalid UTF-8 becomes
        U+FFFD"; csv "RFC 4180 ... fields with , " CR or LF quoted";
        OCSF: "A string that is not valid UTF-8 ... every byte outside
        printable ASCII replaced by ?"; --host "a glob ... SQLite GLOB,
        matched case-insensitively"."""
        r = audit("verify", "--db", self.db)
        self.assertEqual(r.returncode, 0, r.stderr)
        # table
        r = audit("--db", self.db, "--asc")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.split(b"\n")
        self.assertEqual(lines[-1], b"")
        self.assertEqual(len(lines), 2 + len(PEER_ROWS), r.stdout)
        for line in lines:
            self.assertNotRegex(line, rb"[^\x20-\x7e]", line)
        self.assertIn(rb"/a\xe2\x80\xaeexe.txt", r.stdout)
        # json
        r = audit("--db", self.db, "--asc", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        # (bytes.split: str.splitlines would also split at U+2028)
        got = [json.loads(l) for l in r.stdout.split(b"\n")[:-1]]
        self.assertEqual(len(got), len(PEER_ROWS))
        self.assertEqual(got[3]["path"],
                         "/a\u202eexe.txt\u2028x\x00y\x1b[2J\tz\r\n")
        self.assertEqual(got[4]["path"], "/\ufffd\ufffd\ufffd\ufffdend")
        self.assertIs(type(got[0]["port"]), int)
        # ocsf
        r = audit("export", "--db", self.db, "--format", "ocsf")
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = [json.loads(l) for l in r.stdout.split(b"\n")[:-1]]
        self.assertEqual(len(ev), len(PEER_ROWS))
        self.assertEqual(ev[4]["http_request"]["url"]["path"], "/????end")
        for e in ev[3:]:
            self.assertNotRegex(json.dumps(e["http_request"]["url"],
                                           ensure_ascii=False),
                                "[^\x20-\x7e]")
        # csv
        r = audit("--db", self.db, "--asc", "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.reader(io.StringIO(
            r.stdout.decode("utf-8", "surrogateescape"), newline="")))
        self.assertEqual(rows[0], COLS)
        self.assertEqual(len(rows), 1 + len(PEER_ROWS))
        self.assertEqual(rows[3][COLS.index("host")], PEER_ROWS[2][0])
        self.assertEqual(rows[4][COLS.index("path")],
                         PEER_ROWS[3][1].decode("utf-8"))
        # filters
        for glob, want in (("a_b.test", [2]), ("%", []), ("A_B.TEST", [2]),
                           ("*_*", [2]), ("=*", [3])):
            with self.subTest(host=glob):
                r = audit("--db", self.db, "--asc", "--format", "json",
                          "--host", glob)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual([json.loads(l)["id"] for l in
                                  r.stdout.splitlines()], want)
        r = audit("--db", self.db, "--format", "json", "--sandbox",
                  "x' OR '1'='1")
        self.assertEqual((r.returncode, r.stdout), (0, b""))


class IndexTamper(unittest.TestCase):
    """A gateway writes rows and its shutdown checkpoint; then a copy of
    audit.db is tampered with as root, as docs/audit.md's attacker (can
    write audit.db, does not hold the key) would."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        origin = T.Origin("o", host="127.0.0.2")
        cls.addClassCleanup(origin.stop)
        dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(dns.stop)
        pol = {"sandboxes": [T.local_sandbox("p")],
               "policies": [{"name": "p",
                             "allow": [{"host": "allowed.test",
                                        "ports": [origin.port]}],
                             "allow_private": ["127.0.0.2/32"]}]}
        gw = T.Gateway(cls.td.path, dns, {"p.yaml": pol},
                       extra={"audit": {"checkpoint_interval": "0"}})
        gw.start()
        try:
            for h in (b"one.test", b"exfil.test", b"two.test"):
                r = T.raw_request(gw.port, b"GET http://" + h +
                                  b"/x HTTP/1.1\r\nHost: " + h + b"\r\n\r\n")
                assert r is not None and r.status == 403, r
            if len(gw.wait_audit(timeout=5, pred=lambda x: x["host"] ==
                                 "two.test")) != 1:
                raise RuntimeError("rows not written:\n" + gw.log_tail())
        finally:
            gw.stop()
        cls.pub = os.path.join(cls.td.path, "certs", "audit.pub")
        cls.src = os.path.join(cls.td.path, "var", "audit.db")

    def copy(self, name):
        d = self.td.join(name)
        os.makedirs(d)
        db = os.path.join(d, "audit.db")
        for s in ("", "-wal"):
            if os.path.exists(self.src + s):
                shutil.copy(self.src + s, db + s)
        con = sqlite3.connect(db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        return db

    def test_index_tamper_hides_signed_row(self):
        """docs/audit.md: "Each row is chained ... so `sandgate audit
        verify` finds a row that was edited, deleted or inserted; and every
        few seconds a checkpoint row carries an Ed25519 signature ... so
        that whoever can write audit.db but does not hold the key cannot
        rewrite rows ... unnoticed"; "Cannot edit, insert, delete or reorder
        a row that a surviving checkpoint signs"; `--host`, `--sandbox`
        select rows (docs: the indexes make them "one index range").
        Done (on a copy, as root, with Python's sqlite3): UPDATE the signed
        row's host/sandbox (table and indexes follow), PRAGMA
        writable_schema=ON, DELETE the five index entries of `events` from
        sqlite_master, reopen, UPDATE the row back to its original values
        (only the table changes), re-INSERT the five sqlite_master entries.
        Happened: `audit verify --pubkey audit.pub` exits 0 ("ok: 4 rows
        verified ... unsigned tail: 0 rows"), yet `sandgate audit --host
        exfil.test`, `--sandbox local` and `--sandbox local --decision deny`
        (and `--format json/csv`) do not return the row, and `--sandbox
        ghost` returns it (showing sandbox local). The row is gone from the
        team's queries and verify does not say so; `PRAGMA integrity_check`
        says "row 2 missing from index events_host". audit_verify()
        (src/audit/audit_chain.c) walks the table by rowid only and runs no
        PRAGMA integrity_check (quick_check would not compare indexes)."""
        db = self.copy("idx")
        r = audit("verify", "--db", db, "--pubkey", self.pub)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"unsigned tail: 0 rows", r.stdout)
        con = sqlite3.connect(db)
        (tid,) = con.execute(
            "SELECT id FROM events WHERE host = 'exfil.test'").fetchone()
        con.execute("UPDATE events SET host = 'one.test', sandbox = 'ghost' "
                    "WHERE id = ?", (tid,))
        con.commit()
        con.execute("PRAGMA writable_schema = ON")
        saved = con.execute(
            "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master "
            "WHERE type = 'index' AND tbl_name = 'events'").fetchall()
        self.assertEqual(len(saved), 5, saved)
        con.execute("DELETE FROM sqlite_master WHERE type = 'index' AND "
                    "tbl_name = 'events'")
        con.commit()
        con.close()
        con = sqlite3.connect(db)
        con.execute("UPDATE events SET host = 'exfil.test', sandbox = 'local' "
                    "WHERE id = ?", (tid,))
        con.commit()
        con.execute("PRAGMA writable_schema = ON")
        con.executemany("INSERT INTO sqlite_master VALUES (?, ?, ?, ?, ?)",
                        saved)
        con.commit()
        con.close()
        v = audit("verify", "--db", db, "--pubkey", self.pub)
        for args in (["--host", "exfil.test"], ["--sandbox", "local"],
                     ["--sandbox", "local", "--decision", "deny"]):
            with self.subTest(args=args):
                r = audit("--db", db, "--format", "json", "--limit", "0",
                          *args)
                self.assertEqual(r.returncode, 0, r.stderr)
                ids = [json.loads(l)["id"] for l in r.stdout.splitlines()]
                self.assertTrue(tid in ids or v.returncode == 1,
                    "signed row %d (host exfil.test, sandbox local) is not "
                    "returned by `sandgate audit %s` (ids %r), and `audit "
                    "verify` exits %d: %r" % (tid, " ".join(args), ids,
                                              v.returncode, v.stdout))


ASK_POLICY = """sandboxes:
  - id: agent
    policy: asking
    source: [127.0.0.1/32]
policies:
  - name: asking
    mode: ask
    allow:
      - host: ok.test
    allow_private: [127.0.0.2/32]
"""


class AskMethodStats(unittest.TestCase):
    """mode: ask, approval.timeout 1s; the sandbox sends `GET
    http://held1.test/x` and `ASK http://held2.test/x` (a method is a token
    the sandbox picks); nobody answers, both end 403 approval-timeout."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.dns = T.Dnsmasq(cls.td.path, [("held1.test", "127.0.0.2"),
                                          ("held2.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": ASK_POLICY},
                           extra={"approval": {"timeout": "1s"},
                                  "audit": {"checkpoint_interval": "0"}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.answers = []
        for method, host in ((b"GET", b"held1.test"),
                             (b"ASK", b"held2.test")):
            r = T.raw_request(cls.gw.port, method + b" http://" + host +
                              b"/x HTTP/1.1\r\nHost: " + host + b"\r\n\r\n",
                              method=method.decode(), timeout=15)
            cls.answers.append(None if r is None else
                               (r.status, r.header("X-Sandgate-Reason")))
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and len(cls.gw.audit_rows(
                reason="approval-timeout")) < 2:
            time.sleep(0.1)

    def test_stats_held_ask_method_is_not_a_question(self):
        """docs/approvals.md "Audit rows": the question has `method` `ASK`;
        "each held request: its own row as ever, rule approval:ID and, when
        refused, reason ... approval-timeout ... `sandgate audit stats`
        counts them in its approvals section (questions, answers by kind,
        held requests by how they ended)". Sent: `GET
        http://held1.test/x` and `ASK http://held2.test/x`, both held and
        timed out (403 approval-timeout). Expected: approvals {question:
        2, request-approval-timeout: 2}. Happened: the ASK request's row
        (kind http, method ASK, path /x, status 403, decision deny, rule
        approval:2, reason approval-timeout) is counted as a question:
        {question: 3, request-approval-timeout: 1}. The CASE of
        src/cmd_audit_stats.c ("approvals" section) keys on method = 'ASK'
        alone."""
        self.assertEqual(self.answers, [(403, "approval-timeout")] * 2)
        rows = self.gw.audit_rows(reason="approval-timeout")
        self.assertEqual(len(rows), 2, self.gw.audit_rows())
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
                           "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {e["row"]: e["rows"] for e in json.loads(r.stdout)["approvals"]}
        self.assertEqual((got.get("question"),
                          got.get("request-approval-timeout")), (2, 2), got)

    def test_question_row_unknowns_are_null(self):
        """docs/audit.md "Schema": "A value that does not apply or is not
        known is NULL, never '' or 0"; docs/approvals.md: the question row
        has "method ASK, rule approval:ID, sandbox, host, port, no
        decision". Happened: each HTTP question row has status 0 (no status
        was sent for a question) and client '-' (not an addr:port, not
        NULL). `audit export --format ocsf` then makes the question an HTTP
        Activity event with http_response.code 0 and status_code "0"
        (docs: HTTP Activity is "an answered request ... status is set").
        Source: src/exchange/proxy_approval.c, the question's audit_event
        (ev.client = "-", ev.status = 0)."""
        qs = self.gw.audit_rows(method="ASK", path=None)
        self.assertEqual(len(qs), 2, self.gw.audit_rows())
        for q in qs:
            with self.subTest(question=q["id"]):
                self.assertIsNone(q["decision"], q)
                self.assertIsNone(q["status"], q)
                self.assertIsNone(q["client"], q)


if __name__ == "__main__":
    T.require_binary()
    T.main()
