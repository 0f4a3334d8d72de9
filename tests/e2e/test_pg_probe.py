#!/usr/bin/python3
"""
Probe of the fleet audit store and the other audit exits (docs/fleet.md,
docs/audit.md "Syslog", "OCSF") with values a sandbox controls.

Set-up: PostgreSQL 15 started by the test as in test_fleet.py (initdb in a
temp dir as user nobody, loopback TCP port), `audit ship --init`, one
gateway as user sandgate under seccomp shipping over TCP. No network
namespaces (the probe rules forbid them).

Found, and fixed (the tests failed before; the shipper now asks the
schema's version as every other statement, ship_exec: a deadline, the
stop heard):
- test_sigterm_while_store_stalls: the store takes the connection but does
  not answer the shipper's schema-version query (sandgate.meta locked by
  another session); SIGTERM then never stopped serve: audit_pg_version's
  blocking PQexec neither polled the stop pipe nor had a deadline.
- test_no_answer_within_30s_is_an_outage: same stall for 40 s: no outage was
  logged and no failure counted, against "a statement fails or gets no
  answer within 30 s, the connection is dropped and retried".

Tried, and what held:
- SOCKS5 domain names with NUL, ', ", \\, $$, `'); DROP TABLE ...--`, a
  VALUES-tuple injection, invalid UTF-8 (0xff 0xfe, overlong C0 AF), a
  UTF-8 surrogate (ED A0 80), U+FFFD, CR LF TAB, 254 bytes: the gateway
  stores them \\xNN-escaped, lower-cased (printable ASCII), so the raw path
  is never needed; every row reaches sandgate.events once, in id order,
  `audit --store --format json` equals the local `audit --format json` row
  for row, `audit verify --store` and local `audit verify` pass, no table
  other than events/meta and no gateway other than ours appears (held).
- HTTP request-targets with quotes, backslashes, `$$`, `$1`, `%00`, `;--`,
  ~30,000 chars of `\\"']` (kept: 4096 bytes): shipped exactly (held).
- OCSF export of the same rows: one valid JSON object per line (held).
- syslog rfc5424 over TCP with `"`, `]`, `\\` in paths: one octet-counted
  frame per row, SD values escaped (held).
- A syslog message over 64 KiB (JSON cut, or a UDP datagram too big to
  send): not reachable from a sandbox, as path is capped at 4096 bytes and
  other strings at 1024, all printable ASCII (at most ~30 KB of JSON).
- PostgreSQL down then back, and a backlog while down: covered by
  test_fleet.py; the shipper holds at most one 500-row batch in memory
  (audit_ship.c ship_read), the backlog stays in audit.db (by reading).
"""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

from test_fleet import (  # noqa: E402  (its PostgreSQL and constants)
    PG_BIN, PSQL, RUN_AS, SETPRIV, NoDns, Postgres)


HOSTILE_NAMES = [
    b"a\x00b.test",
    b"q'uote.test",
    b"dq\"uote.test",
    b"back\\slash.test",
    b"$$dollar$$.test",
    b"x');DROP TABLE sandgate.events;--.test",
    b"x'),('gw-evil',999,null,null,null,null,null,null,null,null,null,"
    b"null,null,null,null,null,null,null,null,null,null,null,null,null)--",
    b"bad\xff\xfe.test",
    b"overlong\xc0\xaf.test",
    b"surrogate\xed\xa0\x80.test",
    b"fffd\xef\xbf\xbd.test",
    b"nl\r\nx\ty.test",
    b"L" * 250 + b"\xff.te",
]


def socks5_connect(port, name):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
                  b"\x01\xbb")
        try:
            s.recv(64)
        except OSError:
            pass
    finally:
        s.close()


def raw_get(port, target, host="denied.test"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host.encode() +
                  b"\r\nConnection: close\r\n\r\n")
        while True:
            try:
                if not s.recv(65536):
                    break
            except OSError:
                break
    finally:
        s.close()


def local_ids(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
    try:
        return [i for (i,) in con.execute("SELECT id FROM events ORDER BY id")]
    finally:
        con.close()


def need_pg():
    for exe in (PG_BIN + "/initdb", PG_BIN + "/postgres", PSQL, SETPRIV):
        if not os.access(exe, os.X_OK):
            raise unittest.SkipTest(exe + " is missing")
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root to run PostgreSQL as nobody")


class PgHostileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need_pg()
        cls.td = T.TempDir("sgpgp-")
        cls.addClassCleanup(cls.td.cleanup)
        os.chmod(cls.td.path, 0o755)
        cls.pg = Postgres(cls.td.path)
        cls.addClassCleanup(cls.pg.stop)
        cls.pg.start()
        r = cls.pg.psql("postgres", "CREATE DATABASE fleet")
        assert r.returncode == 0, r.stderr
        r = T.run_sandgate("audit", "ship", "--init", "--store", cls.pg.url_tcp())
        assert r.returncode == 0, r.stderr
        cls.sport = T.free_port()
        policy = {"sandboxes": [T.local_sandbox("p", sid="agent-h")],
                  "policies": [{"name": "p", "deny": [{"host": "*.test"}]}]}
        d = cls.td.join("gw")
        os.makedirs(d)
        cls.gw = T.Gateway(d, NoDns(), {"p.yaml": policy}, user=RUN_AS,
                           extra={"audit": {"ship": {"url": cls.pg.url_tcp(),
                                                     "gateway": "gw-h"},
                                            "checkpoint_interval": "1s"},
                                  "listen": {"socks5": "127.0.0.1:%d" %
                                             cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.db = os.path.join(d, "var", "audit.db")
        cls.cfg = cls.gw.cfg_path

    def wait_shipped(self, timeout=30):
        deadline = time.time() + timeout * T.SLOW
        while True:
            local = local_ids(self.db)
            store = [int(i) for (i,) in self.pg.rows(
                "SELECT id FROM sandgate.events WHERE gateway = 'gw-h' "
                "ORDER BY id")]
            if (local and store and store[-1] >= local[-1]) or \
                    time.time() > deadline:
                return local, store
            time.sleep(0.3)

    def local_json(self):
        r = T.run_sandgate("audit", "-c", self.cfg, "--asc", "--limit", "0",
                           "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(x) for x in r.stdout.splitlines()]

    def store_json(self):
        r = T.run_sandgate("audit", "--store", self.pg.url_tcp(), "--gateway",
                           "gw-h", "--asc", "--limit", "0", "--format",
                           "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = []
        for x in r.stdout.splitlines():
            o = json.loads(x)
            self.assertEqual(o.pop("gateway"), "gw-h")
            out.append(o)
        return out

    def test_hostile_values_ship_exactly(self):
        """
        docs/fleet.md: the table holds each row once, "the columns are those
        of audit.db ... with the same values", raw keeps rows PG text cannot
        hold, "the hash still verifies, and the output is the local output".
        """
        for name in HOSTILE_NAMES:
            socks5_connect(self.sport, name)
        for target in (b"http://denied.test/'\"\\$$%00$1;--",
                       b"http://denied.test/" + b"\\\"']" * 7500,
                       b"http://denied.test/after"):
            raw_get(self.gw.port, target)
        self.assertTrue(self.gw.wait_audit(10, path="/after"))
        time.sleep(1.5)
        local, store = self.wait_shipped()
        self.assertEqual(store, local, "store ids differ from audit.db's")
        # Rows arrive exactly as local ones (read side decodes raw).
        loc = {o["id"]: o for o in self.local_json()}
        sto = {o["id"]: o for o in self.store_json()}
        self.assertEqual(set(sto) - set(loc), set())
        for i in sorted(loc):
            if i in sto:
                self.assertEqual(sto[i], loc[i], "row %d differs" % i)
        hosts = {o["host"] for o in loc.values() if o["kind"] == "socks5"}
        self.assertEqual(len(hosts), len(HOSTILE_NAMES), hosts)
        # No injection: only our two tables, only our gateway.
        tables = self.pg.rows("SELECT schemaname || '.' || tablename FROM "
                              "pg_tables WHERE schemaname NOT IN "
                              "('pg_catalog', 'information_schema') "
                              "ORDER BY 1")
        self.assertEqual([t[0] for t in tables],
                         ["sandgate.events", "sandgate.meta"])
        self.assertEqual(self.pg.rows("SELECT DISTINCT gateway FROM "
                                      "sandgate.events"), [["gw-h"]])
        r = T.run_sandgate("audit", "verify", "--store", self.pg.url_tcp(),
                           "--pubkey", os.path.join(self.gw.tmp, "certs",
                                                    "audit.pub"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("gateway gw-h: ok:", r.stdout)
        r = T.run_sandgate("audit", "verify", "-c", self.cfg)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # OCSF of the same hostile rows: valid JSON, one object per line.
        r = T.run_sandgate("audit", "export", "-c", self.cfg, "--format",
                           "ocsf")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertGreaterEqual(len(lines), len(local) - 5)
        for ln in lines:
            json.loads(ln)


class PgStalledStoreTest(unittest.TestCase):
    """
    The store answers the connection but not the shipper's first query:
    sandgate.meta is locked (ACCESS EXCLUSIVE, as any ALTER TABLE, VACUUM
    FULL or a DBA's LOCK TABLE takes it) when the shipper (re)connects.
    """

    def setUp(self):
        need_pg()
        self.td = T.TempDir("sgpgl-")
        self.addCleanup(self.td.cleanup)
        os.chmod(self.td.path, 0o755)
        self.pg = Postgres(self.td.path)
        self.addCleanup(self.pg.stop)
        self.pg.start()
        r = self.pg.psql("postgres", "CREATE DATABASE fleet")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = T.run_sandgate("audit", "ship", "--init", "--store",
                           self.pg.url_tcp())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.locker = T.Proc([PSQL, "-X", "-q", "-h", "127.0.0.1", "-p",
                              str(self.pg.port), "-U", "sandgate", "-d",
                              "fleet", "-c", "BEGIN; LOCK TABLE sandgate.meta "
                              "IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(300)"],
                             self.td.join("locker.log"), env=T.clean_env())
        self.addCleanup(self.unlock)
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            if self.pg.rows("SELECT count(*) FROM pg_locks WHERE mode = "
                            "'AccessExclusiveLock' AND relation = "
                            "'sandgate.meta'::regclass AND granted")[0][0] \
                    == "1":
                break
            time.sleep(0.2)
        policy = {"sandboxes": [T.local_sandbox("p")],
                  "policies": [{"name": "p", "deny": [{"host": "*.test"}]}]}
        self.mport = T.free_port()
        self.gw = T.Gateway(self.td.path, NoDns(), {"p.yaml": policy},
                            user=RUN_AS,
                            extra={"audit": {"ship": {"url": self.pg.url_tcp(),
                                                      "gateway": "gw-l"}},
                                   "listen": {"metrics": "127.0.0.1:%d" %
                                              self.mport}})
        self.gw.start()
        self.addCleanup(self.stop_gw)
        # The shipper is connected and waits for the lock.
        deadline = time.time() + 15 * T.SLOW
        waiting = []
        while time.time() < deadline:
            waiting = self.pg.rows("SELECT wait_event_type FROM "
                                   "pg_stat_activity WHERE application_name "
                                   "= 'sandgate'")
            if ["Lock"] in waiting:
                break
            time.sleep(0.2)
        self.assertIn(["Lock"], waiting, "the shipper never queried")
        raw_get(self.gw.port, b"http://denied.test/x")
        self.assertTrue(self.gw.wait_audit(10, path="/x"))

    def unlock(self):
        self.pg.psql("fleet", "SELECT pg_terminate_backend(pid) FROM "
                     "pg_stat_activity WHERE query LIKE '%pg_sleep(300)%' "
                     "AND pid <> pg_backend_pid()")
        self.locker.stop(grace=2)

    def stop_gw(self):
        if self.gw.proc is not None and self.gw.proc.alive():
            self.gw.proc.stop(grace=1)

    def test_sigterm_while_store_stalls(self):
        """
        docs/fleet.md: the libpq connection is "used asynchronously
        (non-blocking, every wait a `poll` that also watches for stop)";
        "At a clean stop (`SIGTERM`) ... ships what is left for up to 2 s".
        Sent: SIGTERM to a gateway whose shipper is connected and waiting
        for the schema check's answer (sandgate.meta locked by another
        session, as ALTER TABLE, VACUUM FULL or LOCK TABLE lock it). Observed: serve does not exit (killed after 20 s): the
        shipper waits in PQexec (audit_pg.c audit_pg_version, called from
        audit_ship.c ship_resume), a blocking call that neither polls the
        stop pipe nor has a deadline, and audit_ship_stop joins it.
        """
        t0 = time.time()
        os.kill(self.gw.proc.pid, signal.SIGTERM)
        try:
            self.gw.proc.p.wait(20)
        except subprocess.TimeoutExpired:
            pass
        took = time.time() - t0
        alive = self.gw.proc.alive()
        self.assertFalse(alive, "serve still running %.0f s after SIGTERM "
                         "while the store stalls:\n%s" %
                         (took, self.gw.log_tail()))
        self.assertLess(took, 5 * T.SLOW)

    def test_no_answer_within_30s_is_an_outage(self):
        """
        docs/fleet.md: "When PostgreSQL is down, a statement fails or gets
        no answer within 30 s, the connection is dropped and retried ...
        The log says it once per outage". Sent: nothing but the stall above,
        for 40 s. Observed: no "cannot ship" line in the log and
        sandgate_audit_ship_failures_total stays 0 (no backlog gauges
        either): the schema-version query (PQexec in audit_pg_version) has
        no deadline, so the shipper waits as long as the lock is held.
        """
        time.sleep(40)
        text = self.gw.log_text()
        m = {}
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport,
                   tmp=self.td.path)
        for line in (r.body or b"").decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].startswith("sandgate_audit_ship"):
                m[parts[0]] = float(parts[1])
        self.assertIn("cannot ship to the fleet store", text,
                      "no outage logged after 40 s of no answer; metrics %s"
                      % m)
        self.assertGreater(m.get("sandgate_audit_ship_failures_total", 0), 0,
                           m)


class SyslogCollector:
    """A loopback collector of our own: UDP datagrams, or a TCP stream."""

    def __init__(self, udp):
        self.udp = udp
        self.data = []
        self.stream = b""
        self.stopping = False
        if udp:
            self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        else:
            self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", 0))
        self.port = self.s.getsockname()[1]
        if not udp:
            self.s.listen(4)
        self.s.settimeout(0.2)
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self):
        while not self.stopping:
            try:
                if self.udp:
                    self.data.append(self.s.recv(70000))
                else:
                    c, _ = self.s.accept()
                    c.settimeout(0.2)
                    while not self.stopping:
                        try:
                            b = c.recv(65536)
                        except socket.timeout:
                            continue
                        if not b:
                            break
                        self.stream += b
                    c.close()
            except (socket.timeout, OSError):
                continue

    def frames(self):
        """TCP: octet-counted frames (RFC 6587)."""
        out, b = [], self.stream
        while b:
            sp = b.find(b" ")
            if sp <= 0 or not b[:sp].isdigit():
                out.append(None)
                break
            n = int(b[:sp])
            if len(b) < sp + 1 + n:
                break
            out.append(b[sp + 1:sp + 1 + n])
            b = b[sp + 1 + n:]
        return out

    def stop(self):
        self.stopping = True
        self.t.join(5)
        self.s.close()


class SyslogHostileTest(unittest.TestCase):
    """audit.syslog with request-targets full of SD-special characters."""

    def gateway(self, syslog):
        td = T.TempDir("sgpgs-")
        self.addCleanup(td.cleanup)
        policy = {"sandboxes": [T.local_sandbox("p")],
                  "policies": [{"name": "p", "deny": [{"host": "*.test"}]}]}
        gw = T.Gateway(td.path, NoDns(), {"p.yaml": policy},
                       extra={"audit": {"syslog": syslog,
                                        "checkpoint_interval": "0"}})
        gw.start()
        self.addCleanup(gw.stop)
        return gw

    def test_syslog_tcp_rfc5424_hostile_path(self):
        """rfc5424 over TCP: quotes, backslashes, ] stay in one frame, SD
        escaped, frames counted right (held)."""
        col = SyslogCollector(udp=False)
        self.addCleanup(col.stop)
        gw = self.gateway({"address": "127.0.0.1:%d" % col.port,
                           "format": "rfc5424", "transport": "tcp"})
        raw_get(gw.port, b"http://denied.test/a\"]b\\c\n")
        raw_get(gw.port, b"http://denied.test/q\"]\\x%0a")
        raw_get(gw.port, b"http://denied.test/end")
        self.assertTrue(gw.wait_audit(10, path="/end"))
        n = len(gw.audit_rows())
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and len(col.frames()) < n:
            time.sleep(0.2)
        fr = col.frames()
        self.assertNotIn(None, fr)
        self.assertEqual(len(fr), n)
        for f in fr:
            self.assertRegex(f, rb'^<\d+>1 \S+ \S+ sandgate \d+ audit '
                             rb'\[sandgate@32473( [a-z_]+="([^"\\\]]|'
                             rb'\\["\\\]])*")*\] ')


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
