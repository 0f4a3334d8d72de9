#!/usr/bin/python3
"""
audit.db on a full filesystem (issue 13 point 7; docs/audit.md "When
audit.db cannot be written"): audit.db lives on a small tmpfs, a filler file
takes every free block, and

- with audit.on_failure: deny (the default) new requests are refused before
  any origin is contacted: 503 with X-Sandgate-Reason audit-unavailable
  (absolute form and CONNECT), SOCKS5 reply 0x01, DNS SERVFAIL with EDE 14,
  and ingress too -- 503 audit-unavailable before the sandbox is looked
  up, with a good token, a wrong one, or for a sandbox that does not exist,
  and the guest sees nothing; sandgate_audit_unavailable is 1;
- with audit.on_failure: allow requests go on succeeding, and the gateway
  warns once;

and once the filler is deleted, without a restart, requests succeed again
within seconds, every request -- the refused ones too -- has exactly one
row, the rows from before the fault are unchanged, and `sandgate audit
verify` passes. Needs root (mount); skipped with the reason otherwise.
"""

import errno
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import auditcheck as A  # noqa: E402
import test_audit_cli as AC  # noqa: E402  (the Python chain walk)
import transparent_helpers as H  # noqa: E402

TMPFS_SIZE = "3m"
SID = "full"
REASON = "audit-unavailable"
TOKEN = "ingress-token-full-1"
IDOMAIN = "sandbox.test"


class Tmpfs:
    """A small tmpfs on a temp dir, a filler file to make it full, unmounted by close()."""

    def __init__(self, size):
        self.path = tempfile.mkdtemp(prefix="sgaudit-tmpfs-")
        self.filler = os.path.join(self.path, "filler")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                            "size=%s,mode=0755" % size, "sgaudit-full",
                            self.path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        self.mounted = r.returncode == 0
        self.error = r.stdout.strip()
        if not self.mounted:
            os.rmdir(self.path)

    def fill(self):
        """Write the filler until the file system says ENOSPC; its size."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        total = 0
        try:
            for chunk in (1 << 16, 4096, 1):
                buf = b"\0" * chunk
                while True:
                    try:
                        n = os.write(fd, buf)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
                    total += n
                    if n < chunk:
                        break
        finally:
            os.close(fd)
        return total

    def free(self):
        os.unlink(self.filler)

    def close(self):
        if not self.mounted:
            return
        r = subprocess.run(["umount", self.path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode != 0:   # still busy: detach it, it goes when unused
            subprocess.run(["umount", "-l", self.path])
        self.mounted = False
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def probe_mount():
    """None when this process can mount a tmpfs, else why not."""
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs (running as uid %d)" % os.geteuid()
    fs = Tmpfs("64k")
    if not fs.mounted:
        return "cannot mount a tmpfs: %s" % fs.error
    fs.close()
    return None


class Gateway(T.Gateway):
    """sgtest's gateway, its audit rows read from audit.db on the tmpfs."""

    def __init__(self, tmp, dns, policies, db, extra):
        self.db = db
        super().__init__(tmp, dns, policies, extra=extra)

    def audit_rows(self, **match):
        try:
            con = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True,
                                  timeout=2)
        except sqlite3.Error:
            return []
        try:
            con.row_factory = sqlite3.Row
            rows = [dict(r) for r in
                    con.execute("SELECT * FROM events ORDER BY id")]
        except sqlite3.Error:
            return []
        finally:
            con.close()
        return [r for r in rows
                if all(r.get(k) == v for k, v in match.items())]


def socks_connect(port, host, dport):
    """A SOCKS5 CONNECT to host:dport without auth; the reply code."""
    c = T.Conn(port)
    try:
        c.send(b"\x05\x01\x00")
        if c.read_exact(2) != b"\x05\x00":
            return None
        name = host.encode()
        c.send(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
               dport.to_bytes(2, "big"))
        rep = c.read_exact(2)
        return rep[1], A.client_of_conn(c)
    except (EOFError, ConnectionResetError):
        return None
    finally:
        c.close()


class AuditFullTest(unittest.TestCase):
    def start(self, on_failure):
        self.fs = Tmpfs(TMPFS_SIZE)
        if not self.fs.mounted:
            self.skipTest("cannot mount a tmpfs: %s" % self.fs.error)
        # Registered first, so it runs last: the gateway is stopped by then.
        self.addCleanup(self.fs.close)
        self.td = T.TempDir("sgaudit-full-")
        self.addCleanup(self.td.cleanup)
        self.origin = T.Origin("origin", host="127.0.0.2")
        self.addCleanup(self.origin.stop)
        self.dns = T.Dnsmasq(self.td.path, [("allowed.test", "127.0.0.2")])
        self.addCleanup(self.dns.stop)
        self.db = os.path.join(self.fs.path, "audit.db")
        self.sport = T.free_port()
        self.dport = T.free_port(udp_too=True)
        self.mport = T.free_port()
        self.iport = T.free_port()
        web = {"id": "web", "policy": SID,
               "ingress": {"address": "127.0.0.2",
                           "ports": [self.origin.port],
                           "token_sha256": T.sha256_hex(TOKEN)}}
        policy = {"sandboxes": [T.local_sandbox(SID, sid=SID), web],
                  "policies": [{"name": SID,
                                "allow": [{"host": "allowed.test",
                                           "ports": [self.origin.port]}],
                                "allow_private": ["127.0.0.2/32"]}]}
        audit = {"db": self.db}
        if on_failure is not None:
            audit["on_failure"] = on_failure
        self.gw = Gateway(self.td.path, self.dns, {SID + ".yaml": policy},
                          self.db, extra={
                              "audit": audit,
                              "ingress_domain": IDOMAIN,
                              "listen": {"socks5": "127.0.0.1:%d" % self.sport,
                                         "ingress": "127.0.0.1:%d" %
                                         self.iport,
                                         "dns": "127.0.0.1:%d" % self.dport,
                                         "metrics": "127.0.0.1:%d" %
                                         self.mport}})
        self.gw.start()
        self.addCleanup(self.gw.stop)
        deadline = time.time() + 15 * T.SLOW
        while self.dig("ready.sgtest.test").status is None:
            if time.time() > deadline or not self.gw.alive():
                self.fail("DNS listener not answering:\n" + self.gw.log_tail())
        self.n = 0

    # ------------------------------------------------------------ clients

    def get(self, tag):
        """An absolute-form GET with a path of its own: (path, response, client)."""
        self.n += 1
        path = "/%s/%d" % (tag, self.n)
        req = ("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d"
               "\r\nConnection: close\r\n\r\n" % (self.origin.port, path,
                                                  self.origin.port))
        r, client = A.raw_request(self.gw.port, req)
        return path, r, client

    def ingress(self, tag, sandbox="web", token=TOKEN):
        """A GET to sandbox's published port through ingress: (path, response, client)."""
        self.n += 1
        path = "/%s/%d" % (tag, self.n)
        req = ("GET %s HTTP/1.1\r\nHost: %d-%s.%s\r\nX-Sandgate-Token: %s"
               "\r\nConnection: close\r\n\r\n" % (path, self.origin.port,
                                                  sandbox, IDOMAIN, token))
        r, client = A.raw_request(self.iport, req)
        return path, r, client

    def dig(self, name):
        return H.dig(["@127.0.0.1", "-p", str(self.dport), name, "A"])

    def metric(self, name):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.mport,
                                    timeout=5 * T.SLOW) as f:
            text = f.read().decode()
        m = re.search(r"^sandgate_%s (\d+)$" % name, text, re.M)
        self.assertIsNotNone(m, "no %s in /metrics" % name)
        return int(m.group(1))

    def rows_by_path(self):
        out = {}
        for r in self.gw.audit_rows():
            if r["path"]:
                out.setdefault(r["path"], []).append(r)
        return out

    # ------------------------------------------------------------ checks

    def before_fault(self):
        """Some allowed traffic, written; {id: hash} of every row."""
        for _ in range(5):
            path, r, _ = self.get("before")
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 200, r)
        rows = self.gw.wait_audit(pred=lambda r: r["path"] == path)
        self.assertTrue(rows, "the rows before the fault were not written")
        self.assertEqual(self.metric("audit_unavailable"), 0)
        return {r["id"]: r["hash"] for r in self.gw.audit_rows()}

    def recover(self):
        """
        Delete the filler: within a few seconds requests succeed and the
        writer has written again (under allow they never stopped).
        """
        self.fs.free()
        t0 = time.time()
        deadline = t0 + 10 * T.SLOW
        while True:
            path, r, _ = self.get("after")
            self.paths[path] = r.status if r else None
            if r is not None and r.status == 200 and \
                    self.metric("audit_unavailable") == 0:
                break
            self.assertLess(time.time(), deadline, "no recovery: %r\n%s" %
                            (r, self.gw.log_tail()))
            time.sleep(0.1)
        took = time.time() - t0
        self.assertLess(took, 5 * T.SLOW, "recovery took %.1f s" % took)
        self.assertGreater(self.metric("audit_write_failures_total"), 0)
        self.assertEqual(self.metric("audit_rows_dropped_total"), 0)
        self.assertIsNotNone(self.gw.wait_log(
            r"audit: \S+ takes rows again after", timeout=5))

    def after_recovery(self, before):
        """One row per request, the old rows unchanged, a chain that verifies."""
        deadline = time.time() + 10 * T.SLOW
        while True:
            by_path = self.rows_by_path()
            missing = [p for p in self.paths if p not in by_path]
            if not missing or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(missing, [], "requests without a row")
        for p, status in self.paths.items():
            self.assertEqual(len(by_path[p]), 1, "%s: %r" % (p, by_path[p]))
            self.assertEqual(by_path[p][0]["status"], status, by_path[p])
        rows = self.gw.audit_rows()
        now = {r["id"]: r["hash"] for r in rows}
        for i, h in before.items():
            self.assertEqual(now.get(i), h, "row %d changed or lost" % i)
        self.assertEqual([r["id"] for r in rows],
                         list(range(rows[0]["id"], rows[-1]["id"] + 1)))
        self.gw.stop()
        con = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True)
        try:
            self.assertEqual(con.execute("PRAGMA integrity_check").fetchone(),
                             ("ok",))
        finally:
            con.close()
        r = T.run_sandgate("audit", "verify", "-c", self.gw.cfg_path,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(r.stdout.startswith("ok: "), r.stdout)
        self.assertIsNone(AC.py_verify(AC.read_rows(self.db)))

    # ------------------------------------------------------------ tests

    def test_deny_then_recover(self):
        self.start(None)    # the default is deny
        before = self.before_fault()
        self.paths = {}
        filled = self.fs.fill()
        self.assertGreater(filled, 0)

        # The row of the first request after the fill is the write that
        # fails; from then on every new request is refused.
        deadline = time.time() + 10 * T.SLOW
        while True:
            path, r, client = self.get("fault")
            self.assertIsNotNone(r, "no answer")
            self.paths[path] = r.status
            if r.status == 503:
                break
            self.assertEqual(r.status, 200, r)
            self.assertLess(time.time(), deadline, "never refused:\n" +
                            self.gw.log_tail())
            time.sleep(0.1)
        self.assertEqual(r.header("X-Sandgate-Reason"), REASON, r)
        self.assertIn(b"(audit-unavailable)", r.body)
        self.assertFalse(self.origin.saw_path(path))
        self.assertEqual(self.metric("audit_unavailable"), 1)
        self.assertIsNotNone(self.gw.wait_log(
            r"audit: cannot write .*on_failure deny", timeout=1))

        audit = A.Audit(self, self.gw, timeout=10)
        conns = self.origin.conn_count
        refused = []
        for _ in range(3):
            path, r, client = self.get("refused")
            self.paths[path] = r.status
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.header("X-Sandgate-Reason"), REASON, r)
            refused.append((path, client))
        # CONNECT, SOCKS5 and DNS are refused the same way.
        req = ("CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d"
               "\r\n\r\n" % (self.origin.port, self.origin.port))
        cr, cclient = A.raw_request(self.gw.port, req, method="CONNECT")
        self.assertEqual(cr.status, 503, cr)
        self.assertEqual(cr.header("X-Sandgate-Reason"), REASON, cr)
        rep, sclient = socks_connect(self.sport, "allowed.test",
                                     self.origin.port)
        self.assertEqual(rep, 0x01, "SOCKS5 reply: general failure")
        d = self.dig("allowed.test")
        self.assertEqual(d.status, "SERVFAIL", d)
        self.assertEqual(d.ede and d.ede[0], 14, d)
        self.assertIn(REASON, d.out)
        # Ingress: the audit stage comes before the sandbox, its port and
        # its token, whatever the token says.
        ingress = []
        for sandbox, token in (("web", TOKEN), ("web", "wrong"),
                               ("nosuch", TOKEN)):
            path, r, client = self.ingress("ingress", sandbox, token)
            self.assertIsNotNone(r, "no ingress answer")
            self.paths[path] = r.status
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.header("X-Sandgate-Reason"), REASON, r)
            ingress.append((path, client, sandbox))
        self.assertEqual(self.origin.conn_count, conns,
                         "a refused request reached the origin")
        for path in [p for p, _ in refused]:
            self.assertFalse(self.origin.saw_path(path))
        # Readers need no space: the CLI still answers.
        q = T.run_sandgate("audit", "-c", self.gw.cfg_path, "--limit", "1",
                           "--format", "json")
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertIn('"kind":', q.stdout)
        # Long enough for a few retries that fail too.
        time.sleep(1.5)
        self.assertGreaterEqual(self.metric("audit_write_failures_total"), 3)
        self.assertGreaterEqual(self.metric("audit_rows_waiting"), 6)

        self.recover()

        # The refusals were queued: they land now, each with its row.
        common = dict(sandbox=SID, host="allowed.test", ip=None,
                      port=self.origin.port, status=503, decision="error",
                      rule="audit", reason=REASON, credential=None)
        for path, client in refused:
            audit.expect({"client": client, "path": path}, kind="http",
                         method="GET", bytes_up=0, bytes_down=0, **common)
        audit.expect({"client": cclient, "kind": "connect"}, method="CONNECT",
                     path=None, bytes_up=0, bytes_down=0, **common)
        audit.expect({"client": sclient, "kind": "socks5"}, method="CONNECT",
                     path=None, bytes_up=0, bytes_down=0, **common)
        for path, client, sandbox in ingress:
            # The path too: a client port may come round again on another
            # listener within one test.
            audit.expect({"client": client, "path": path}, kind="ingress",
                         method="GET", sandbox=None, ip=None,
                         host="%d-%s.%s" % (self.origin.port, sandbox,
                                            IDOMAIN),
                         port=self.origin.port, status=503,
                         decision="error", rule="audit", reason=REASON,
                         credential=None, bytes_up=0, bytes_down=0)
        audit.expect({"kind": "dns", "reason": REASON}, method="A",
                     client=A.ANY, path=None, status=2, decision="error",
                     rule="audit", sandbox=SID, host="allowed.test", ip=None,
                     port=None, credential=None, bytes_up=None,
                     bytes_down=None)
        audit.check()
        self.after_recovery(before)

    def test_allow_keeps_serving(self):
        self.start("allow")
        before = self.before_fault()
        self.paths = {}
        self.fs.fill()
        deadline = time.time() + 10 * T.SLOW
        while True:
            path, r, _ = self.get("fault")
            self.assertIsNotNone(r, "no answer")
            self.assertEqual(r.status, 200, r)
            self.paths[path] = r.status
            if self.metric("audit_unavailable") == 1:
                break
            self.assertLess(time.time(), deadline, "the failure was not "
                            "noticed:\n" + self.gw.log_tail())
            time.sleep(0.1)
        for _ in range(10):
            path, r, _ = self.get("during")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("X-Sandgate-Reason"), None)
            self.paths[path] = r.status
        self.assertEqual(self.dig("allowed.test").addrs(), ["127.0.0.2"])
        self.assertEqual(self.metric("audit_unavailable"), 1)
        self.assertGreaterEqual(self.metric("audit_rows_waiting"), 10)
        # One warning for the episode, not one per request.
        self.assertEqual(len(re.findall(r"audit: cannot write .*"
                                        r"on_failure allow",
                                        self.gw.log_text())), 1)
        self.recover()
        self.after_recovery(before)


if __name__ == "__main__":
    why = probe_mount()
    if why is not None:
        T.require_binary()
        T.skip_file(why)
    T.main()
