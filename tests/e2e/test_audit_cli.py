#!/usr/bin/python3
"""
End-to-end tests of `sandgate audit` (SPEC §8): filters, durations and
RFC 3339 times, the three formats, --asc and --limit, `audit verify` before
and after tampering with sqlite3, and `audit export --follow` with a cursor.
The rows are written here in Python with the hash chain of docs/audit.md,
which cross-checks the C implementation; rows the gateway writes are
checked the other way round.
"""

import csv
import fnmatch
import hashlib
import io
import json
import os
import queue
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

SQLITE3 = "/usr/bin/sqlite3"

# ------------------------------------------------------------ the chain

COLS = ["id", "ts", "sandbox", "kind", "client", "host", "ip", "port",
        "country", "asn", "method", "path", "status", "decision", "rule",
        "reason", "credential", "bytes_up", "bytes_down", "duration_ms",
        "prev_hash", "hash"]
HASHED = COLS[:20]
INT_COLS = {"id", "port", "asn", "status", "bytes_up", "bytes_down",
            "duration_ms"}
ZERO = "0" * 64

# The schema as docs/audit.md gives it.
SCHEMA = """
CREATE TABLE events (id INTEGER PRIMARY KEY, ts TEXT, sandbox TEXT,
  kind TEXT, client TEXT, host TEXT, ip TEXT, port INTEGER, country TEXT,
  asn INTEGER, method TEXT, path TEXT, status INTEGER, decision TEXT,
  rule TEXT, reason TEXT, credential TEXT, bytes_up INTEGER,
  bytes_down INTEGER, duration_ms INTEGER, prev_hash TEXT, hash TEXT);
CREATE INDEX events_ts ON events(ts);
CREATE INDEX events_sandbox ON events(sandbox, ts);
CREATE INDEX events_decision ON events(decision, ts);
CREATE INDEX events_host ON events(host, ts);
PRAGMA user_version = 2;
"""


def encode(values):
    """The canonical encoding of the 20 hashed values (docs/audit.md)."""
    out = bytearray()
    for v in values:
        if v is None:
            out += b"\x00"
        elif isinstance(v, bool):
            raise TypeError("bool in an audit row")
        elif isinstance(v, int):
            out += b"\x01" + struct.pack(">q", v)
        elif isinstance(v, float):
            out += b"\x03" + struct.pack(">d", v)
        elif isinstance(v, str):
            b = v.encode("utf-8")
            out += b"\x02" + struct.pack(">I", len(b)) + b
        elif isinstance(v, bytes):
            out += b"\x04" + struct.pack(">I", len(v)) + v
        else:
            raise TypeError(repr(v))
    return bytes(out)


def row_hash(prev, values):
    return hashlib.sha256(prev.encode("ascii") + encode(values)).hexdigest()


def ts_of(ms):
    """RFC 3339 UTC with milliseconds, as the gateway writes ts."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + \
        ".%03dZ" % (ms % 1000)


def now_ms():
    return int(time.time() * 1000)


def read_rows(path):
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=5)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(
            "SELECT %s FROM events ORDER BY id" % ", ".join(COLS))]
    finally:
        con.close()


def parse_retention(path):
    """(through, anchor) of a retention row's path, or None."""
    if not path or not path.startswith("/events?"):
        return None
    kv = dict(p.split("=", 1) for p in path[8:].split("&") if "=" in p)
    try:
        return int(kv["through"]), kv["anchor"]
    except (KeyError, ValueError):
        return None


def py_verify(rows):
    """The chain walk of docs/audit.md: None, or the first bad id."""
    if not rows:
        return None
    first = rows[0]["id"]
    if first == 1:
        expect = ZERO
    else:
        expect = None
        for r in rows:
            if r["kind"] == "admin" and r["rule"] == "retention":
                ret = parse_retention(r["path"])
                if ret and ret[0] == first - 1:
                    expect = ret[1]
                    break
        if expect is None:
            return 1
    prev_id = None
    for r in rows:
        if prev_id is not None and r["id"] != prev_id + 1:
            return prev_id + 1
        if r["prev_hash"] != expect:
            return r["id"]
        if row_hash(r["prev_hash"], [r[c] for c in HASHED]) != r["hash"]:
            return r["id"]
        expect = r["hash"]
        prev_id = r["id"]
    return None


class PyWriter:
    """Appends chained rows the way the gateway's writer does."""

    def __init__(self, path):
        self.path = path
        new = not os.path.exists(path)
        self.con = sqlite3.connect(path, isolation_level=None, timeout=5)
        self.con.execute("PRAGMA journal_mode = WAL")
        if new:
            self.con.executescript(SCHEMA)

    def append(self, ts_ms=None, **fields):
        for k in fields:
            assert k in COLS, k
        self.con.execute("BEGIN IMMEDIATE")
        head = self.con.execute(
            "SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        rid, prev = (head[0] + 1, head[1]) if head else (1, ZERO)
        row = dict.fromkeys(COLS)
        row.update(fields)
        row["id"] = rid
        row["ts"] = ts_of(ts_ms if ts_ms is not None else now_ms())
        if row["host"]:
            row["host"] = row["host"].lower()
        row["prev_hash"] = prev
        row["hash"] = row_hash(prev, [row[c] for c in HASHED])
        self.con.execute("INSERT INTO events (%s) VALUES (%s)" % (
            ", ".join(COLS), ", ".join("?" * len(COLS))),
            [row[c] for c in COLS])
        self.con.execute("COMMIT")
        return row

    def close(self):
        self.con.close()


def write_config(dirpath, db):
    path = os.path.join(dirpath, "sandgate.yaml")
    with open(path, "w") as f:
        f.write("state_dir: %s\naudit: { db: %s }\n" % (
            json.dumps(os.path.join(dirpath, "var")), json.dumps(db)))
    return path


def sqlite3_cli(db, sql):
    r = subprocess.run([SQLITE3, db, sql], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


class LineReader:
    """Collects a child's stdout lines on a thread."""

    def __init__(self, proc):
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, args=(proc.stdout,),
                                  daemon=True)
        self.t.start()

    def _run(self, f):
        for line in f:
            self.q.put(line)

    def lines(self, n, timeout=5.0):
        out = []
        deadline = time.time() + timeout * T.SLOW
        while len(out) < n and time.time() < deadline:
            try:
                out.append(self.q.get(timeout=0.05))
            except queue.Empty:
                pass
        return out

    def quiet(self, seconds):
        """Lines that arrive within seconds (expected: none)."""
        return self.lines(1 << 30, seconds)


# ------------------------------------------------------------ the tests

class AuditCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgaudit-")
        cls.addClassCleanup(cls.td.cleanup)
        os.makedirs(cls.td.join("var"))
        cls.db = cls.td.join("var", "audit.db")
        cls.cfg = write_config(cls.td.path, cls.db)
        now = now_ms()
        m = 60000
        spec = [
            # minutes ago, sandbox, kind, host, decision, credential
            (8 * 1440, "agent-7", "http", "pkgs.example.com", "allow", None),
            (3 * 1440, "agent-7", "connect", "api.openai.com", "allow",
             "openai"),
            (180, "agent-8", "http", "evil.example", "deny", None),
            (90, "agent-7", "connect", "files.pkgcdn.example.com", "allow",
             None),
            (100, "agent-7", "socks5", "evil.example", "deny", None),
            (60, "agent-7", "http", "Upload.Pkgs.Example.Com", "deny", None),
            (10, "agent-8", "dns", "api.openai.com", "deny", "openai"),
            (5, None, "http", "pkgs.example.com", "deny", None),
            (1, "agent-7", "transparent", "203.0.113.9", "error", None),
        ]
        w = PyWriter(cls.db)
        cls.rows = []
        for i, (ago, sb, kind, host, dec, cred) in enumerate(spec):
            cls.rows.append(w.append(
                ts_ms=now - ago * m, sandbox=sb, kind=kind, host=host,
                decision=dec, credential=cred,
                client="127.0.0.1:%d" % (40000 + i),
                ip="127.0.0.2" if kind != "dns" else None,
                port=443 if kind != "dns" else None,
                method="GET" if kind == "http" else None,
                path='/a,"b"\nc' if i == 5 else ("/" if kind == "http"
                                                   else None),
                status=403 if dec == "deny" and kind == "http" else None,
                rule="default-deny" if dec == "deny" else
                ("p:allow[%d]" % i if dec == "allow" else None),
                reason="policy-deny" if dec == "deny" else
                ("upstream-connect-error" if dec == "error" else None),
                bytes_up=100 * i if dec == "allow" else None,
                bytes_down=0 if dec == "allow" else None,
                duration_ms=i))
        w.close()
        cls.now = now

    # -------------------------------------------------------- helpers

    def audit(self, *args, cwd=None):
        return T.run_sandgate("audit", *args, cwd=cwd)

    def json_ids(self, *args):
        r = self.audit("-c", self.cfg, "--format", "json", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(l)["id"] for l in r.stdout.splitlines()]

    def expect_ids(self, sandbox=None, decision=None, kind=None, host=None,
                   credential=None, since=None, until=None, limit=100,
                   asc=False):
        """The same query, answered in Python from the rows written."""
        out = []
        for r in self.rows:
            if sandbox is not None and r["sandbox"] != sandbox:
                continue
            if decision is not None and r["decision"] != decision:
                continue
            if kind is not None and r["kind"] != kind:
                continue
            if credential is not None and r["credential"] != credential:
                continue
            if host is not None and (r["host"] is None or not
                                     fnmatch.fnmatchcase(r["host"],
                                                         host.lower())):
                continue
            if since is not None and r["ts"] < ts_of(since):
                continue
            if until is not None and r["ts"] >= ts_of(until):
                continue
            out.append(r)
        out.sort(key=lambda r: (r["ts"], r["id"]), reverse=not asc)
        ids = [r["id"] for r in out]
        return ids[:limit] if limit else ids

    # -------------------------------------------------------- queries

    def test_filters(self):
        now, m = self.now, 60000
        t1, t2 = now - 100 * m - 1, now - 30 * m
        cases = [
            ([], {}),
            (["--sandbox", "agent-7"], {"sandbox": "agent-7"}),
            (["--decision", "deny"], {"decision": "deny"}),
            (["--kind", "connect"], {"kind": "connect"}),
            (["--host", "*.Pkgs.Example.Com"], {"host": "*.pkgs.example.com"}),
            (["--host", "evil.example"], {"host": "evil.example"}),
            (["--host", "*"], {"host": "*"}),
            (["--credential", "openai"], {"credential": "openai"}),
            (["--since", "15m"], {"since": now - 15 * m}),
            (["--since", "2h"], {"since": now - 120 * m}),
            (["--since", "7d"], {"since": now - 7 * 1440 * m}),
            (["--until", "2h"], {"until": now - 120 * m}),
            (["--since", ts_of(t1), "--until", ts_of(t2)],
             {"since": t1, "until": t2}),
            (["--since", time.strftime("%Y-%m-%dT%H:%M:%S+00:00",
                                       time.gmtime((now - 50 * m) // 1000))],
             {"since": (now - 50 * m) // 1000 * 1000}),
            (["--limit", "2"], {"limit": 2}),
            (["--limit", "0"], {"limit": 0}),
            (["--asc"], {"asc": True}),
            (["--asc", "--limit", "3"], {"asc": True, "limit": 3}),
            (["--sandbox", "agent-7", "--decision", "deny", "--since", "2h"],
             {"sandbox": "agent-7", "decision": "deny",
              "since": now - 120 * m}),
            (["--sandbox", "nobody"], {"sandbox": "nobody"}),
        ]
        for args, kw in cases:
            with self.subTest(args=args):
                want = self.expect_ids(**kw)
                self.assertEqual(self.json_ids(*args), want)
        # Sanity of the expectations themselves: newest first, all rows.
        self.assertEqual(self.expect_ids(), [9, 8, 7, 6, 4, 5, 3, 2, 1])
        self.assertEqual(self.expect_ids(since=now - 15 * m), [9, 8, 7])

    def test_json_is_every_column(self):
        r = self.audit("-c", self.cfg, "--format", "json", "--asc")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(l) for l in r.stdout.splitlines()]
        stored = sorted(read_rows(self.db), key=lambda x: (x["ts"], x["id"]))
        self.assertEqual([g["id"] for g in got], [1, 2, 3, 5, 4, 6, 7, 8, 9])
        self.assertEqual(len(got), len(stored))
        for g, s in zip(got, stored):
            self.assertEqual(list(g.keys()), COLS)
            self.assertEqual(g, s)
            for c in INT_COLS:
                self.assertTrue(g[c] is None or type(g[c]) is int, (c, g))
        self.assertIsNone(got[7]["sandbox"])
        self.assertEqual(got[5]["path"], '/a,"b"\nc')
        self.assertEqual(got[5]["host"], "upload.pkgs.example.com")
        self.assertIsNone(got[0]["asn"])
        self.assertIs(type(got[0]["port"]), int)

    def test_csv(self):
        # Bytes, not text: RFC 4180 lines end in CRLF and Python's text
        # mode would hide that.
        r = subprocess.run([T.BIN, "audit", "-c", self.cfg, "--format",
                            "csv", "--limit", "0"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=T.clean_env(),
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.decode()
        self.assertTrue(out.startswith(",".join(COLS) + "\r\n"), out[:300])
        rows = list(csv.reader(io.StringIO(out, newline="")))
        self.assertEqual(rows[0], COLS)
        stored = {x["id"]: x for x in read_rows(self.db)}
        self.assertEqual([int(x[0]) for x in rows[1:]], self.expect_ids())
        for got in rows[1:]:
            s = stored[int(got[0])]
            want = ["" if s[c] is None else str(s[c]) for c in COLS]
            self.assertEqual(got, want)
        self.assertIn('"/a,""b""\nc"', out)

    def test_table(self):
        r = self.audit("-c", self.cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        head = lines[0]
        for name in ("TS", "SANDBOX", "KIND", "DECISION", "HOST", "PORT",
                     "METHOD", "PATH", "STATUS", "RULE", "REASON"):
            self.assertIn(name, head.split())
        self.assertEqual(len(lines), 1 + len(self.rows))
        want = self.expect_ids()
        byid = {x["id"]: x for x in self.rows}
        kpos, dpos, hpos = (head.index(" KIND ") + 1,
                            head.index(" DECISION ") + 1,
                            head.index(" HOST ") + 1)
        for line, rid in zip(lines[1:], want):
            row = byid[rid]
            self.assertTrue(line.startswith(row["ts"]), line)
            self.assertEqual(line[kpos:].split()[0], row["kind"], line)
            self.assertEqual(line[dpos:].split()[0], row["decision"], line)
            self.assertEqual(line[hpos:].split()[0], row["host"], line)
        # The newline inside a path is escaped, never raw on a terminal.
        self.assertIn("\\x0a", r.stdout)

    def test_config_search_and_options_anywhere(self):
        # ./sandgate.yaml in the working directory is found without -c.
        r = self.audit("--format", "json", "--limit", "1", cwd=self.td.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["id"], 9)
        r = self.audit("verify", "-c", self.cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.audit("-c", self.cfg, "verify")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.audit("--db", self.db, "--format=json", "--limit=1")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.audit("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: sandgate audit", r.stdout)

    def test_usage_errors(self):
        for args in (["--format", "xml"], ["--since", "3x"],
                     ["--until", "2026-13-01T00:00:00Z"],
                     ["--decision", "maybe"], ["--kind", "ftp"],
                     ["--limit", "-1"], ["--limit"], ["--bogus"],
                     ["frobnicate"], ["verify", "--sandbox", "x"],
                     ["export", "--format", "csv"], ["--pubkey", "x"],
                     ["export", "--pubkey", "x"],
                     ["--since", "1h", "--until", "2h"]):
            with self.subTest(args=args):
                r = self.audit("-c", self.cfg, *args)
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        r = self.audit("--db", self.td.join("missing.db"))
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("sandgate: audit: "), r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1)

    # -------------------------------------------------------- verify

    def copy_db(self, name):
        d = self.td.join(name)
        os.makedirs(d)
        db = os.path.join(d, "audit.db")
        shutil.copy(self.db, db)
        return db

    def test_verify_and_tamper(self):
        self.assertIsNone(py_verify(read_rows(self.db)))
        r = self.audit("verify", "-c", self.cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0], "ok: 9 rows verified")
        # Rows written here carry no checkpoint: all of them are unsigned.
        self.assertIn("unsigned tail: 9 rows, no checkpoint (id 1..9)",
                      r.stdout)
        cases = [
            ("UPDATE events SET host = 'good.example' WHERE id = 4", 4),
            ("UPDATE events SET decision = 'allow' WHERE id = 9", 9),
            ("UPDATE events SET bytes_up = bytes_up + 1 WHERE id = 1", 1),
            ("DELETE FROM events WHERE id = 6", 6),
            ("DELETE FROM events WHERE id = 1", 1),
            # Swap two rows whole: ids 3 and 4 trade contents.
            ("UPDATE events SET id = -3 WHERE id = 3;"
             "UPDATE events SET id = 3 WHERE id = 4;"
             "UPDATE events SET id = 4 WHERE id = -3", 3),
        ]
        for i, (sql, bad) in enumerate(cases):
            with self.subTest(sql=sql):
                db = self.copy_db("tamper%d" % i)
                sqlite3_cli(db, sql)
                r = self.audit("verify", "--db", db)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertEqual(r.stdout, "")
                self.assertTrue(r.stderr.startswith(
                    "sandgate: audit verify: row %d: " % bad), r.stderr)
                self.assertEqual(py_verify(read_rows(db)), bad)

    def test_retention_row_keeps_verify_passing(self):
        # Delete a prefix the way retention does and record it.
        db = self.copy_db("retained")
        rows = read_rows(db)
        sqlite3_cli(db, "DELETE FROM events WHERE id <= 3")
        w = PyWriter(db)
        w.append(kind="admin", method="DELETE", decision="allow",
                 rule="retention", reason="retention",
                 path="/events?through=3&rows=3&before=%s&anchor=%s" % (
                     rows[2]["ts"], rows[2]["hash"]))
        w.close()
        r = self.audit("verify", "--db", db)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0], "ok: 7 rows verified")
        self.assertIsNone(py_verify(read_rows(db)))
        # A deletion the retention row does not cover is still caught.
        sqlite3_cli(db, "DELETE FROM events WHERE id = 4")
        r = self.audit("verify", "--db", db)
        self.assertEqual(r.returncode, 1)
        self.assertIn("row 4: ", r.stderr)

    # -------------------------------------------------------- export

    def test_export_plain(self):
        r = self.audit("export", "-c", self.cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(l) for l in r.stdout.splitlines()]
        self.assertEqual([g["id"] for g in got], list(range(1, 10)))
        self.assertEqual(got, read_rows(self.db))
        r = self.audit("export", "-c", self.cfg, "--decision", "deny",
                       "--since", "2h")
        self.assertEqual([json.loads(l)["id"] for l in r.stdout.splitlines()],
                         [5, 6, 7, 8])

    def start_export(self, db, *args):
        p = subprocess.Popen([T.BIN, "audit", "export", "--db", db] +
                             list(args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=T.clean_env())
        self.addCleanup(self.kill_pid, p)
        return p, LineReader(p)

    @staticmethod
    def kill_pid(p):
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()

    def stop_export(self, p):
        os.kill(p.pid, signal.SIGTERM)
        rc = p.wait(10)
        self.assertEqual(rc, 0, p.stderr.read())

    def test_export_follow_with_cursor(self):
        db = self.copy_db("follow")
        cursor = self.td.join("follow", "cursor")
        w = PyWriter(db)
        self.addCleanup(w.close)

        p, rd = self.start_export(db, "--follow", "--cursor", cursor)
        # It starts after the newest row: nothing of the 9 rows so far.
        self.assertEqual(rd.quiet(0.8), [])
        new = [w.append(sandbox="agent-9", kind="http", decision="deny",
                        host="x%d.example" % i) for i in range(3)]
        got = [json.loads(l) for l in rd.lines(3)]
        self.assertEqual([g["id"] for g in got], [10, 11, 12])
        self.assertEqual(got, [dict(r) for r in new])
        deadline = time.time() + 5
        while time.time() < deadline:
            with open(cursor) as f:
                if f.read().strip() == "12":
                    break
            time.sleep(0.05)
        with open(cursor) as f:
            self.assertEqual(f.read(), "12\n")
        self.stop_export(p)

        # Rows committed while it was down come out once after a restart.
        for i in range(2):
            w.append(sandbox="agent-9", kind="dns", decision="deny")
        p, rd = self.start_export(db, "--follow", "--cursor", cursor)
        self.assertEqual([json.loads(l)["id"] for l in rd.lines(2)], [13, 14])
        self.assertEqual(rd.quiet(0.6), [])
        w.append(sandbox="agent-9", kind="dns", decision="allow")
        self.assertEqual([json.loads(l)["id"] for l in rd.lines(1)], [15])
        self.stop_export(p)

        # A third run with nothing new prints nothing.
        p, rd = self.start_export(db, "--follow", "--cursor", cursor)
        self.assertEqual(rd.quiet(0.8), [])
        self.stop_export(p)
        with open(cursor) as f:
            self.assertEqual(f.read(), "15\n")

        # Without --follow, --cursor resumes too and then exits.
        w.append(sandbox="agent-9", kind="dns", decision="allow")
        r = self.audit("export", "--db", db, "--cursor", cursor)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([json.loads(l)["id"] for l in r.stdout.splitlines()],
                         [16])
        r = self.audit("export", "--db", db, "--cursor", cursor)
        self.assertEqual(r.stdout, "")

        with open(cursor, "w") as f:
            f.write("not-an-id\n")
        r = self.audit("export", "--db", db, "--cursor", cursor)
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("sandgate: audit export: "))

    def test_export_follow_since_and_filters(self):
        db = self.copy_db("follow-since")
        w = PyWriter(db)
        self.addCleanup(w.close)
        p, rd = self.start_export(db, "--follow", "--since", "15m",
                                  "--decision", "deny")
        # Existing rows of the last 15 minutes that match, in id order...
        self.assertEqual([json.loads(l)["id"] for l in rd.lines(2)], [7, 8])
        self.assertEqual(rd.quiet(0.5), [])
        # ...then new ones as they are committed, filtered.
        w.append(kind="http", decision="allow")
        w.append(kind="http", decision="deny")
        self.assertEqual([json.loads(l)["id"] for l in rd.lines(1)], [11])
        self.assertEqual(rd.quiet(0.5), [])
        self.stop_export(p)


# ------------------------------------------------ rows the gateway writes

class GatewayRowsTest(unittest.TestCase):
    """The C writer's chain, recomputed here; the CLI on a live file."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgaudit-gw-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = T.Origin("origin", host="127.0.0.2")
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        policy = {
            "sandboxes": [T.local_sandbox("main", sid="agent-7")],
            "policies": [{
                "name": "main",
                "allow": [{"host": "allowed.test",
                           "ports": [cls.origin.port]}],
                "allow_private": ["127.0.0.2/32"],
            }],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"main.yaml": policy})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.db = cls.td.join("var", "audit.db")

    def test_chain_and_cli_on_live_file(self):
        proxy = self.gw.url
        ok = T.curl("http://allowed.test:%d/hello" % self.origin.port,
                    proxy=proxy)
        self.assertEqual(ok.status, 200, ok)
        denied = T.curl("http://Denied.Example:%d/x?y=1" % self.origin.port,
                        proxy=proxy)
        self.assertEqual(denied.status, 403, denied)
        rows = self.gw.wait_audit(host="denied.example")
        self.assertEqual(len(rows), 1, self.gw.log_tail())
        self.assertTrue(self.gw.wait_audit(host="allowed.test"))
        d = rows[0]
        self.assertEqual((d["sandbox"], d["kind"], d["decision"], d["status"],
                          d["rule"], d["reason"]),
                         ("agent-7", "http", "deny", 403, "default-deny",
                          "policy-deny"))
        self.assertRegex(d["ts"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        # Every hash the C writer stored, recomputed in Python.
        self.assertIsNone(py_verify(read_rows(self.db)))
        # The CLI reads the file while the gateway has it open.
        r = T.run_sandgate("audit", "-c", self.gw.cfg_path, "--format",
                           "json", "--sandbox", "agent-7", "--decision",
                           "deny", "--since", "15m")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(l) for l in r.stdout.splitlines()]
        self.assertEqual([g["id"] for g in got], [d["id"]])
        self.assertEqual(got[0]["host"], "denied.example")
        self.assertEqual(got[0]["path"], "/x?y=1")
        r = T.run_sandgate("audit", "-c", self.gw.cfg_path, "--host",
                           "ALLOWED.*", "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(len(r.stdout.splitlines()), 2)
        r = T.run_sandgate("audit", "verify", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^ok: \d+ rows verified\n")


if __name__ == "__main__":
    T.main()
