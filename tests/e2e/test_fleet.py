#!/usr/bin/python3
"""
A fleet on one machine (issue 17, docs/fleet.md): three gateways, each in a
network namespace of its own with an explicit-proxy client under load and an
origin, ship their audit rows (audit.ship) to one PostgreSQL 15 that this test
starts itself (initdb in a temp dir, as the unprivileged user nobody, on a
free loopback port and a Unix socket). Under load one gateway is killed with
SIGKILL and restarted, and PostgreSQL is stopped for a while and started
again. At the end the shared table holds exactly the union of the three local
logs -- the same (gateway, id, hash) set, nothing lost, nothing twice --,
`audit verify --store` checks every gateway's chain and signatures (and fails
on a row edited in the store), and `audit --store --sandbox X` answers what
sandbox X reached on any of the three.

The gateways reach PostgreSQL through its Unix socket: a namespace with only
lo up cannot reach the host's loopback, and the socket is a file that every
namespace sees. The command-line queries use the TCP port. The gateways run
as user sandgate, under the network process's seccomp filter.
"""

import hashlib
import json
import os
import pwd
import re
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

PG_BIN = "/usr/lib/postgresql/15/bin"
PSQL = "/usr/bin/psql"
SETPRIV = "/usr/bin/setpriv"
IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "/bin/ip"
PG_USER = "nobody"
RUN_AS = "sandgate"
TOKEN = {"agent-x": "tok-x-5c1e9a77d2", "agent-y": "tok-y-08b4f6e13a"}
ORIGIN_PORT = 8080
N_GW = 3

# The explicit-proxy client run inside a namespace: threads sending requests
# with each sandbox's token, half to the origin (allowed), half denied.
LOAD = r"""
import base64, socket, sys, threading, time
port, oport, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
toks = dict(a.split("=", 1) for a in sys.argv[4:])
def run(i):
    n = 0
    while True:
        n += 1
        sid = "agent-x" if (i + n) % 2 else "agent-y"
        auth = base64.b64encode(("%s:%s" % (sid, toks[sid])).encode()).decode()
        if n % 2:
            target = "http://127.0.0.2:%d/%s/%s/%d/%d" % (oport, sid, tag, i, n)
            host = "127.0.0.2:%d" % oport
        else:
            target = "http://denied-%s.test/%s/%d/%d" % (tag, sid, i, n)
            host = "denied-%s.test" % tag
        req = ("GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n"
               "Connection: close\r\n\r\n" % (target, host, auth)).encode()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(req)
            while s.recv(65536):
                pass
            s.close()
        except OSError:
            time.sleep(0.05)
        time.sleep(0.01)
for i in range(3):
    threading.Thread(target=run, args=(i,), daemon=True).start()
while True:
    time.sleep(1)
"""


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=T.clean_env(), timeout=60, **kw)


class Postgres:
    """PostgreSQL 15 in a temp dir, run as an unprivileged user, by PID."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.data = os.path.join(tmp, "pgdata")
        self.sock = os.path.join(tmp, "pgsock")
        self.port = T.free_port()
        self.proc = None
        for d in (self.data, self.sock):
            os.makedirs(d)
            subprocess.run(["chown", PG_USER + ":", d], check=True)
        os.chmod(self.sock, 0o755)
        r = run(self._as_user([PG_BIN + "/initdb", "-D", self.data, "-U",
                               "sandgate", "--auth=trust", "-E", "UTF8",
                               "--locale=C.UTF-8", "--no-sync"]))
        if r.returncode != 0:
            raise RuntimeError("initdb failed:\n" + r.stdout + r.stderr)

    @staticmethod
    def _as_user(argv):
        pw = pwd.getpwnam(PG_USER)
        return [SETPRIV, "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                "--clear-groups", "--"] + argv

    def start(self):
        self.proc = T.Proc(self._as_user([
            PG_BIN + "/postgres", "-D", self.data, "-k", self.sock,
            "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=off", "-c", "max_connections=40"]),
            os.path.join(self.tmp, "postgres.log"))
        deadline = time.time() + 30 * T.SLOW
        while time.time() < deadline:
            if not self.proc.alive():
                break
            if self.psql("postgres", "SELECT 1").returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("postgres did not start:\n" + self.proc.log_tail())

    def stop(self):
        """Fast shutdown (SIGINT) by PID: sessions end, the data stays."""
        if self.proc is None:
            return
        if self.proc.alive():
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.p.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.proc.stop()
        self.proc = None

    def psql(self, db, sql):
        return run([PSQL, "-X", "-q", "-At", "-F", "\t", "-h", "127.0.0.1",
                    "-p", str(self.port), "-U", "sandgate", "-d", db,
                    "-v", "ON_ERROR_STOP=1", "-c", sql])

    def rows(self, sql):
        r = self.psql("fleet", sql)
        if r.returncode != 0:
            raise AssertionError("psql: " + r.stderr)
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def url_tcp(self):
        return "postgresql://sandgate@127.0.0.1:%d/fleet" % self.port

    def url_socket(self):
        return "postgresql://sandgate@/fleet?host=%s&port=%d" % (
            self.sock, self.port)


class NoDns:
    """The gateways resolve nothing here: every request names an IP or is denied by name."""
    addr = "127.0.0.1:53"


class NsGateway(T.Gateway):
    """A Gateway whose processes run inside network namespace ns."""

    def __init__(self, ns, *a, **kw):
        self.ns = ns
        super().__init__(*a, **kw)

    def start(self, timeout=20.0):
        start = 0
        if os.path.exists(self.log_path):
            start = os.path.getsize(self.log_path)
        self.proc = T.Proc([IP, "netns", "exec", self.ns, T.BIN, "serve", "-c",
                            self.cfg_path], self.log_path, cwd=self.tmp,
                           env=T.clean_env())
        if self.wait_log(r"sandgate info: ready$", timeout, start) is None:
            tail = self.proc.log_tail()
            self.proc.stop()
            raise AssertionError("gateway in %s did not start:\n%s" %
                                 (self.ns, tail))

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.p.wait(10)
        self.proc.stop()
        self.proc = None

    def in_ns(self, argv):
        return run([IP, "netns", "exec", self.ns] + argv)

    def metrics(self):
        r = self.in_ns([T.CURL, "-s", "--max-time", "5",
                        "http://127.0.0.1:%d/metrics" % self.metrics_port])
        out = {}
        for line in r.stdout.splitlines():
            m = re.match(r"^(sandgate_\w+) ([0-9.e+-]+)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def local(self):
        """{id: (hash, row)} of the local audit.db."""
        con = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True,
                              timeout=5)
        con.text_factory = bytes
        try:
            return {r[0]: (r[1].decode(), r[2:]) for r in con.execute(
                "SELECT id, hash, path, host FROM events")}
        finally:
            con.close()


class FleetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgfleet-")
        cls.addClassCleanup(cls.td.cleanup)
        os.chmod(cls.td.path, 0o755)
        cls.pg = Postgres(cls.td.path)
        cls.addClassCleanup(cls.pg.stop)
        cls.pg.start()
        r = cls.pg.psql("postgres", "CREATE DATABASE fleet")
        assert r.returncode == 0, r.stderr
        cls.nss = []
        cls.gws = []
        cls.loads = []
        cls.origins = []
        cls.addClassCleanup(cls._teardown_fleet)
        for i in range(1, N_GW + 1):
            cls._start_member(i)

    @classmethod
    def _start_member(cls, i):
        ns = "sgfleet-%d-%d" % (os.getpid(), i)
        r = run([IP, "netns", "add", ns])
        assert r.returncode == 0, r.stderr
        cls.nss.append(ns)
        run([IP, "-n", ns, "link", "set", "lo", "up"])
        d = cls.td.join("gw%d" % i)
        os.makedirs(d)
        policy = {
            "sandboxes": [T.token_sandbox(sid, tok, "agents")
                          for sid, tok in TOKEN.items()],
            "policies": [{"name": "agents",
                          "allow": [{"cidr": "127.0.0.2/32",
                                     "ports": [ORIGIN_PORT]}],
                          "deny": [{"host": "*.test"}],
                          "allow_private": ["127.0.0.2/32"]}],
        }
        metrics_port = T.free_port()
        gw = NsGateway(ns, d, NoDns(), {"p.yaml": policy}, user=RUN_AS,
                       extra={"audit": {"ship": {"url": cls.pg.url_socket(),
                                                 "gateway": "gw-%d" % i},
                                        "checkpoint_interval": "1s"},
                              "listen": {"metrics":
                                         "127.0.0.1:%d" % metrics_port},
                              "limits": {"per_sandbox":
                                         {"connections_per_second": 0}}})
        gw.metrics_port = metrics_port
        gw.db = os.path.join(d, "var", "audit.db")
        gw.pub = os.path.join(d, "certs", "audit.pub")
        gw.name = "gw-%d" % i
        cls.gws.append(gw)
        www = os.path.join(d, "www")
        os.makedirs(www)
        cls.origins.append(T.Proc(
            [IP, "netns", "exec", ns, "/usr/bin/python3", "-m", "http.server",
             "--bind", "127.0.0.2", "--directory", www, str(ORIGIN_PORT)],
            os.path.join(d, "origin.log")))
        gw.start()

    @classmethod
    def _teardown_fleet(cls):
        for p in cls.loads + cls.origins:
            p.stop(grace=2)
        for gw in cls.gws:
            if gw.proc is not None:
                gw.proc.stop()
        for ns in cls.nss:
            run([IP, "netns", "del", ns])

    def start_loads(self):
        for gw in self.gws:
            self.loads.append(T.Proc(
                [IP, "netns", "exec", gw.ns, "/usr/bin/python3", "-c", LOAD,
                 str(gw.port), str(ORIGIN_PORT), gw.name] +
                ["%s=%s" % kv for kv in TOKEN.items()],
                os.path.join(gw.tmp, "load.log")))

    def wait_rows(self, gw, more_than, timeout=20):
        deadline = time.time() + timeout * T.SLOW
        while time.time() < deadline:
            n = len(gw.local())
            if n > more_than:
                return n
            time.sleep(0.2)
        self.fail("%s wrote no new rows:\n%s" % (gw.name, gw.log_tail()))

    def wait_shipped(self, timeout=60):
        """Until the store holds every local row of every gateway."""
        deadline = time.time() + timeout * T.SLOW
        while True:
            want = {(gw.name, i) for gw in self.gws for i in gw.local()}
            have = {(g, int(i)) for g, i in self.pg.rows(
                "SELECT gateway, id FROM sandgate.events")}
            if want <= have or time.time() > deadline:
                return want - have
            time.sleep(0.5)

    def test_fleet(self):
        r = T.run_sandgate("audit", "ship", "--init", "--store",
                           self.pg.url_tcp())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("created", r.stdout)
        self.start_loads()
        for gw in self.gws:
            self.wait_rows(gw, 20)
        # The gateways started before the schema existed: each ships once
        # it is there (they retry, at most 5 s apart).
        deadline = time.time() + 30 * T.SLOW
        while time.time() < deadline:
            have = {g for (g,) in self.pg.rows(
                "SELECT DISTINCT gateway FROM sandgate.events")}
            if have == {gw.name for gw in self.gws}:
                break
            time.sleep(0.2)
        self.assertEqual(have, {gw.name for gw in self.gws})

        # 1. One gateway dies under load (SIGKILL) and comes back.
        victim = self.gws[1]
        victim.kill9()
        before = len(victim.local())
        victim.start()
        self.wait_rows(victim, before + 10)
        self.assertNotIn("shipping stops", victim.log_text())

        # 2. PostgreSQL goes away for a while: requests go on, rows wait.
        self.pg.stop()
        during = [len(gw.local()) for gw in self.gws]
        for gw, n in zip(self.gws, during):
            self.wait_rows(gw, n + 300)
        for gw in self.gws:
            m = gw.metrics()
            self.assertEqual(m.get("sandgate_audit_ship_up"), 0.0, m)
            self.assertGreater(m.get("sandgate_audit_ship_backlog_rows", 0),
                               0, m)
            self.assertGreater(m.get("sandgate_audit_ship_backlog_seconds",
                                     0), 0, m)
            self.assertTrue(gw.alive())
        self.pg.start()
        after = [len(gw.local()) for gw in self.gws]
        for gw, n in zip(self.gws, after):
            self.wait_rows(gw, n + 20)

        # 3. The load ends; every row reaches the store; a clean stop ships
        # the shutdown checkpoint as well.
        for p in self.loads:
            p.stop(grace=2)
        self.loads.clear()
        missing = self.wait_shipped()
        self.assertEqual(missing, set(), "rows not shipped")
        for gw in self.gws:
            self.assertIn("takes rows again", gw.log_text())
            m = gw.metrics()
            self.assertEqual(m.get("sandgate_audit_ship_up"), 1.0, m)
            gw.stop()
        # After the stop: the store has the shutdown checkpoints too.
        local = {}
        for gw in self.gws:
            for i, (h, _) in gw.local().items():
                local[(gw.name, i)] = h
        store_rows = self.pg.rows("SELECT gateway, id, hash FROM "
                                  "sandgate.events")
        store = {}
        for g, i, h in store_rows:
            self.assertNotIn((g, int(i)), store, "a row twice")
            store[(g, int(i))] = h
        self.assertEqual(len(store_rows), len(store))
        self.assertEqual(set(store) - set(local), set(), "rows not in any "
                         "local log")
        self.assertEqual(set(local) - set(store), set(), "rows lost")
        self.assertEqual(store, local)
        for gw in self.gws:
            last = max(i for (g, i) in local if g == gw.name)
            path = self.pg.rows("SELECT path FROM sandgate.events WHERE "
                                "gateway = '%s' AND id = %d" %
                                (gw.name, last))[0][0]
            self.assertIn("at=shutdown", path)
        print("fleet: %d rows from %s" % (len(store), ", ".join(
            "%s %d" % (gw.name, len(gw.local())) for gw in self.gws)))

        # 4. verify --store: every gateway's chain and checkpoints.
        keys = []
        for gw in self.gws:
            keys += ["--pubkey", gw.pub]
        r = T.run_sandgate("audit", "verify", "--store", self.pg.url_tcp(),
                           *keys)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for gw in self.gws:
            self.assertRegex(r.stdout, r"gateway %s: ok: \d+ rows verified" %
                             gw.name)
            self.assertRegex(r.stdout, r"gateway %s: unsigned tail: 0 rows" %
                             gw.name)
        # Without the other gateways' keys, their checkpoints cannot pass.
        r = T.run_sandgate("audit", "verify", "--store", self.pg.url_tcp(),
                           "--pubkey", self.gws[0].pub)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("gateway gw-1: ok:", r.stdout)
        self.assertIn("gateway gw-2: row", r.stderr)

        # 5. The question: what did agent-x reach, on any gateway?
        r = T.run_sandgate("audit", "--store", self.pg.url_tcp(), "--sandbox",
                           "agent-x", "--decision", "allow", "--limit", "0",
                           "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual({x["gateway"] for x in rows},
                         {gw.name for gw in self.gws})
        self.assertEqual({(x["host"], x["port"]) for x in rows},
                         {("127.0.0.2", ORIGIN_PORT)})
        self.assertTrue(all(x["sandbox"] == "agent-x" for x in rows))
        want = sum(1 for gw in self.gws for _, (h, row) in gw.local().items()
                   if row[0] is not None and b"/agent-x/" in row[0] and
                   row[1] == b"127.0.0.2")
        self.assertEqual(len(rows), want)
        # Filters work on the store as on audit.db: a glob, a gateway, a table.
        r = T.run_sandgate("audit", "--store", self.pg.url_tcp(), "--host",
                           "DENIED-GW-[23].*", "--gateway", "gw-3",
                           "--limit", "5", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual(len(got), 5)
        self.assertTrue(all(x["host"] == "denied-gw-3.test" and
                            x["gateway"] == "gw-3" for x in got), got)
        r = T.run_sandgate("audit", "--store", self.pg.url_tcp(), "--limit",
                           "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("GATEWAY "), r.stdout)

        # 6. Rows whose bytes a text column cannot hold (not UTF-8) keep
        # their encoding in raw: verify hashes that and checks the columns.
        self.raw_rows()

        # 7. A row edited in the store: verify names the gateway and the row.
        self.pg.rows("UPDATE sandgate.events SET path = '/edited' WHERE "
                     "gateway = 'gw-2' AND id = 5 RETURNING id")
        r = T.run_sandgate("audit", "verify", "--store", self.pg.url_tcp(),
                           *keys)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("sandgate: audit verify: gateway gw-2: row 5: hash does "
                      "not match", r.stderr)
        self.assertIn("gateway gw-3: ok:", r.stdout)


    def raw_rows(self):
        """Two rows of a gateway gw-raw written straight into the store."""
        prev = "0" * 64
        for i, path in ((1, b"/plain"), (2, b"/caf\xff\x00e")):
            vals = [i, "2026-12-03T06:00:0%d.000Z" % i, "agent-z", "http",
                    None, "raw.test", None, 80, None, None, "GET", path, 403,
                    "deny", "default-deny", "policy-deny", None, 0, 0, 1]
            h = hashlib.sha256(prev.encode() + encode(vals)).hexdigest()
            raw = "decode('%s', 'hex')" % encode(vals).hex() if i == 2 \
                else "NULL"
            shown = path.decode("utf-8", "replace").replace("\x00", "\ufffd")
            self.pg.rows(
                "INSERT INTO sandgate.events (gateway, id, ts, sandbox, kind, "
                "host, port, method, path, status, decision, rule, reason, "
                "bytes_up, bytes_down, duration_ms, prev_hash, hash, raw) "
                "VALUES ('gw-raw', %d, '%s', 'agent-z', 'http', 'raw.test', "
                "80, 'GET', '%s', 403, 'deny', 'default-deny', 'policy-deny', "
                "0, 0, 1, '%s', '%s', %s) RETURNING id" %
                (i, vals[1], shown, prev, h, raw))
            prev = h
        r = T.run_sandgate("audit", "verify", "--store", self.pg.url_tcp(),
                           "--gateway", "gw-raw")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("gateway gw-raw: ok: 2 rows verified", r.stdout)
        r = T.run_sandgate("audit", "--store", self.pg.url_tcp(), "--gateway",
                           "gw-raw", "--asc", "--format", "json")
        rows = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual([x["path"] for x in rows],
                         ["/plain", "/caf\ufffd\u0000e"])
        # Its column changed, its raw not: the row no longer shows what it holds.
        self.pg.rows("UPDATE sandgate.events SET path = '/cafe' WHERE "
                     "gateway = 'gw-raw' AND id = 2 RETURNING id")
        r = T.run_sandgate("audit", "verify", "--store", self.pg.url_tcp(),
                           "--gateway", "gw-raw")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("gateway gw-raw: row 2: column path differs from the "
                      "row's raw encoding", r.stderr)
        self.pg.rows("DELETE FROM sandgate.events WHERE gateway = 'gw-raw' "
                     "RETURNING id")


class FleetRetentionTest(unittest.TestCase):
    """
    A gateway that starts shipping after retention deleted its first rows:
    the store's chain for it starts after id 1, at the anchor its shipped
    retention row records, and verify --store accepts that (and only that).
    """

    def test_shipping_starts_after_retention(self):
        td = T.TempDir("sgfleet-ret-")
        self.addCleanup(td.cleanup)
        os.chmod(td.path, 0o755)
        pg = Postgres(td.path)
        self.addCleanup(pg.stop)
        pg.start()
        self.assertEqual(pg.psql("postgres", "CREATE DATABASE fleet")
                         .returncode, 0)
        r = T.run_sandgate("audit", "ship", "--init", "--store", pg.url_tcp())
        self.assertEqual(r.returncode, 0, r.stderr)
        policy = {"sandboxes": [T.local_sandbox("p", sid="agent-r")],
                  "policies": [{"name": "p", "deny": [{"host": "*.test"}]}]}
        audit = {"retention": "1s", "checkpoint_interval": "1s"}
        gw = T.Gateway(td.path, NoDns(), {"p.yaml": policy},
                       extra={"audit": dict(audit)})
        gw.start()
        self.addCleanup(gw.stop)
        for i in range(10):
            T.curl("http://denied.test/r%d" % i, proxy=gw.url, tmp=td.path)
        self.assertTrue(gw.wait_audit(10, kind="admin", rule="retention"),
                        gw.log_tail())
        gw.stop()
        # This one ships over TCP to a name (/etc/hosts), as user sandgate,
        # and first reaches the store after the privilege drop: PostgreSQL
        # is away when it starts.
        pg.stop()
        audit["ship"] = {"url": "postgresql://sandgate@localhost:%d/fleet" %
                         pg.port, "gateway": "gw-ret"}
        gw = T.Gateway(td.path, NoDns(), {"p.yaml": policy}, user=RUN_AS,
                       extra={"audit": audit})
        gw.start()
        self.addCleanup(gw.stop)
        self.assertTrue(gw.wait_log(r"privileges: running as " + RUN_AS))
        for i in range(10):
            T.curl("http://denied.test/s%d" % i, proxy=gw.url, tmp=td.path)
        pg.start()
        db = td.join("var", "audit.db")
        deadline = time.time() + 30 * T.SLOW
        while time.time() < deadline:
            con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
            local = dict(con.execute("SELECT id, hash FROM events"))
            con.close()
            store = {int(i): h for i, h in pg.rows(
                "SELECT id, hash FROM sandgate.events WHERE gateway = 'gw-ret'")}
            if set(local) <= set(store):
                break
            time.sleep(0.3)
        self.assertEqual({i: store.get(i) for i in local}, local)
        self.assertGreater(min(store), 1)
        self.assertIn("seccomp filter", gw.log_text())
        self.assertIn("takes rows again", gw.log_text())
        r = T.run_sandgate("audit", "verify", "--store", pg.url_tcp(),
                           "--pubkey", td.join("certs", "audit.pub"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("gateway gw-ret: ok:", r.stdout)
        # Without the retention row that explains it, the start is a gap.
        first = min(store)
        pg.rows("DELETE FROM sandgate.events WHERE gateway = 'gw-ret' AND "
                "rule = 'retention' AND path LIKE '%%through=%d&%%' "
                "RETURNING id" % (first - 1))
        r = T.run_sandgate("audit", "verify", "--store", pg.url_tcp(),
                           "--pubkey", td.join("certs", "audit.pub"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"gateway gw-ret: row \d+: missing")


def encode(values):
    """The canonical row encoding of docs/audit.md; bytes are TEXT as stored."""
    out = b""
    for v in values:
        if v is None:
            out += b"\x00"
        elif isinstance(v, int):
            out += b"\x01" + struct.pack(">q", v)
        else:
            b = v if isinstance(v, bytes) else v.encode()
            out += b"\x02" + struct.pack(">I", len(b)) + b
    return out


class FleetCliTest(unittest.TestCase):
    """The command line's own errors, before any store is contacted."""

    def usage(self, *args):
        r = T.run_sandgate(*args)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        return r.stderr

    def test_usage_errors(self):
        self.assertIn("ship --init", self.usage("audit", "ship"))
        self.assertIn("--gateway needs --store",
                      self.usage("audit", "--gateway", "gw-1"))
        self.assertIn("postgresql://",
                      self.usage("audit", "--store", "mysql://db/x"))
        self.assertIn("not a gateway name",
                      self.usage("audit", "--store", "postgresql:///x",
                                 "--gateway", "gw/1"))
        self.assertIn("export", self.usage("audit", "export", "--store",
                                           "postgresql:///x"))
        self.assertIn("--init", self.usage("audit", "verify", "--init"))

    def test_unreachable_store(self):
        port = T.free_port()
        url = "postgresql://sandgate@127.0.0.1:%d/fleet" % port
        for args in (("audit", "--store", url), ("audit", "verify", "--store",
                                                 url),
                     ("audit", "ship", "--init", "--store", url)):
            r = T.run_sandgate(*args)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertRegex(r.stderr, r"^sandgate: audit.*refused")
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


def require_tools():
    """Skip the file, saying why, when this machine cannot run a fleet."""
    for exe in (PG_BIN + "/initdb", PG_BIN + "/postgres", PSQL, SETPRIV, IP):
        if not os.access(exe, os.X_OK):
            T.skip_file(exe + " is missing (postgresql-15, util-linux, "
                        "iproute2)")
    if os.geteuid() != 0:
        T.skip_file("needs root for network namespaces and to run "
                    "PostgreSQL as " + PG_USER)
    for user in (PG_USER, RUN_AS):
        try:
            pwd.getpwnam(user)
        except KeyError:
            T.skip_file("no user %s (scripts/install-deps.sh creates "
                        "sandgate)" % user)


if __name__ == "__main__":
    T.require_binary()
    require_tools()
    unittest.main(verbosity=2)
