#!/usr/bin/python3
"""
Crash safety of the audit log (SPEC §8, issue 3): `kill -9` of the gateway
while clients hammer a denied host leaves a database that opens, passes
PRAGMA integrity_check and `sandgate audit verify`, and still holds every row
that was committed before the kill; a restarted gateway continues the chain.
"""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_audit_cli as AC  # noqa: E402  (the Python chain walk)

CLIENTS = 6


class Load:
    """Client threads sending requests for a denied host, one per connection."""

    def __init__(self, port, tag):
        self.port = port
        self.tag = tag
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.denied = 0
        self.other = 0
        self.threads = [threading.Thread(target=self._run, args=(i,),
                                         daemon=True)
                        for i in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def _run(self, i):
        n = 0
        while not self.stop_ev.is_set():
            n += 1
            req = ("GET http://denied.test/%s/%d/%d HTTP/1.1\r\n"
                   "Host: denied.test\r\nConnection: close\r\n\r\n" %
                   (self.tag, i, n)).encode()
            try:
                s = socket.create_connection(("127.0.0.1", self.port),
                                             timeout=5)
                s.sendall(req)
                data = b""
                while True:
                    b = s.recv(4096)
                    if not b:
                        break
                    data += b
                s.close()
            except OSError:
                data = b""
                if self.stop_ev.wait(0.01):
                    break
            with self.lock:
                if data.startswith(b"HTTP/1.1 403"):
                    self.denied += 1
                else:
                    self.other += 1

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(10)


def snapshot(db):
    """{id: hash} of every committed row, read the way any reader would."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
    try:
        return dict(con.execute("SELECT id, hash FROM events"))
    finally:
        con.close()


def count_rows(db):
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
    except sqlite3.Error:
        return 0
    try:
        return con.execute("SELECT count(*) FROM events").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        con.close()


class AuditCrashTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgaudit-crash-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        policy = {
            "sandboxes": [T.local_sandbox("main", sid="agent-crash")],
            "policies": [{"name": "main",
                          "allow": [{"host": "allowed.test"}]}],
        }
        # The load opens new connections far faster than a sandbox's
        # per-second share: the limit is lifted, this test is about the log.
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"main.yaml": policy},
            extra={"limits": {"per_sandbox": {"connections_per_second": 0}}})
        cls.addClassCleanup(cls.gw.stop)
        cls.db = cls.td.join("var", "audit.db")

    def kill9(self):
        """SIGKILL the gateway by PID and reap it; the harness forgets it."""
        proc = self.gw.proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.p.wait(10)
        self.assertEqual(proc.p.returncode, -signal.SIGKILL)
        proc.stop()         # already dead: only closes the log, by PID
        self.gw.proc = None

    def check_file(self, committed):
        # It opens and SQLite finds nothing wrong with it.
        r = subprocess.run([AC.SQLITE3, self.db, "PRAGMA integrity_check;"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ok")
        # Every row committed before the kill is there, unchanged.
        after = snapshot(self.db)
        missing = [i for i in committed if i not in after]
        self.assertEqual(missing, [], "rows lost by the kill")
        changed = [i for i in committed if after[i] != committed[i]]
        self.assertEqual(changed, [])
        # The chain holds, by the CLI and by the Python walk.
        r = T.run_sandgate("audit", "verify", "-c", self.gw.cfg_path,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0], "ok: %d rows verified" %
                         len(after))
        self.assertIsNone(AC.py_verify(AC.read_rows(self.db)))
        return after

    def test_kill9_under_load(self):
        rounds = 2
        committed = {}
        for rnd in range(rounds):
            self.gw.start()
            base = count_rows(self.db)
            load = Load(self.gw.port, "r%d" % rnd)
            try:
                # Let rows pile up and commit while the load runs.
                deadline = time.time() + 30 * T.SLOW
                while time.time() < deadline and \
                        count_rows(self.db) < base + 1500:
                    time.sleep(0.1)
                time.sleep(0.5)
                committed = snapshot(self.db)
                self.assertGreater(len(committed), base + 500,
                                   "the load produced too few rows: %d"
                                   % len(committed))
                self.kill9()
            finally:
                load.stop()
            self.assertGreater(load.denied, 0)
            after = self.check_file(committed)
            self.assertGreaterEqual(len(after), len(committed))
            print("round %d: %d rows seen committed before the kill, %d in "
                  "the file after it, %d denied responses" % (
                      rnd, len(committed), len(after), load.denied),
                  file=sys.stderr)
            rows = AC.read_rows(self.db)
            # The gateway's own checkpoint rows sign the chain in between.
            tail = [r for r in rows if r["id"] > base and
                    r["rule"] != "checkpoint"]
            self.assertTrue(all(r["decision"] == "deny" and
                                r["status"] == 403 and
                                r["sandbox"] == "agent-crash" and
                                r["host"] == "denied.test" for r in tail))
            self.assertEqual([r["id"] for r in rows],
                             list(range(1, len(rows) + 1)))

        # A restarted gateway continues the chain after the last kill.
        last = max(committed)
        self.gw.start()
        top = max(snapshot(self.db))
        r = T.curl("http://denied.test/after-restart", proxy=self.gw.url)
        self.assertEqual(r.status, 403, r)
        rows = self.gw.wait_audit(path="/after-restart")
        self.assertEqual(len(rows), 1, self.gw.log_tail())
        self.assertGreater(rows[0]["id"], top)
        self.assertGreaterEqual(top, last)
        self.gw.stop()
        r = T.run_sandgate("audit", "verify", "-c", self.gw.cfg_path,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(AC.py_verify(AC.read_rows(self.db)))


if __name__ == "__main__":
    T.main()
