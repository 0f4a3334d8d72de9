#!/usr/bin/python3
"""
End-to-end test of audit.read_group (issue 24 point 7: analysts read the audit
log without root). The gateway runs as a default install runs it (started as
root, dropped to the user sandgate, seccomp, the keeper), with
audit.read_group naming a group this test creates:

- audit.db and its -wal and -shm are root:GROUP 0640, state_dir is
  root:GROUP 0710, and the network process has GROUP as its one
  supplementary group; vault.db stays root's 0600.
- a member of the group (not root) runs `sandgate audit` and sees the rows,
  and later rows too, while the gateway keeps writing; it cannot read
  vault.db or the keys, nor open the admin socket.
- a user outside the group cannot read the log: one line, exit 1.
- a read_group that does not exist stops serve at start with one line.

Runs as root: it creates the group and two users (groupadd, useradd) and
removes them at the end.
"""

import grp
import json
import os
import pwd
import sqlite3
import subprocess
import sys
import threading
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
TAG = "%d" % (os.getpid() % 100000)
GROUP = "sgt-audit-" + TAG
ANALYST = "sgt-analyst-" + TAG
OUTSIDER = "sgt-outsider-" + TAG


def run(*argv):
    return subprocess.run(list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=30)


def as_user(user, *args):
    """sandgate ARGS as user (its own groups), with a clean environment."""
    return subprocess.run(["setpriv", "--reuid=" + user, "--regid=" +
        str(pwd.getpwnam(user).pw_gid), "--init-groups", "--", T.BIN] +
        list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, timeout=30 * T.SLOW, env=T.clean_env(), cwd="/")


class AuditGroupTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            T.skip_file("needs root: creates a group and users")
        for tool in ("groupadd", "useradd", "setpriv"):
            if run("sh", "-c", "command -v " + tool).returncode != 0:
                T.skip_file("%s is missing" % tool)
        r = run("groupadd", "--system", GROUP)
        if r.returncode != 0:
            raise RuntimeError("groupadd: " + r.stderr)
        cls.addClassCleanup(run, "groupdel", GROUP)
        for user, extra in ((ANALYST, ["-G", GROUP]), (OUTSIDER, [])):
            r = run("useradd", "--system", "--no-create-home", "--shell",
                    "/usr/sbin/nologin", *extra, user)
            if r.returncode != 0:
                raise RuntimeError("useradd: " + r.stderr)
            cls.addClassCleanup(run, "userdel", user)
        cls.gid = grp.getgrnam(GROUP).gr_gid

        cls.td = T.TempDir("sgtest-auditgrp-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("alpha.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        pol = ("sandboxes:\n  - id: local\n    policy: alpha\n"
               "    source: [127.0.0.1/32]\n"
               "policies:\n  - name: alpha\n    allow:\n"
               "      - host: alpha.test\n        ports: [%d]\n"
               "    allow_private: [%s/32]\n" % (cls.origin.port, ORIGIN_HOST))
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": pol}, extra={
            "listen": {"admin": cls.sock}, "audit": {"read_group": GROUP}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.db = os.path.join(d, "var", "audit.db")
        for i in range(3):
            cls.get("/first/%d" % i)
        assert cls.gw.wait_audit(timeout=10, path="/first/2"), "no rows"

    @classmethod
    def get(cls, path):
        r = T.raw_request(cls.gw.port, "GET http://alpha.test:%d%s HTTP/1.1\r\n"
            "Host: alpha.test:%d\r\n\r\n" % (cls.origin.port, path,
            cls.origin.port))
        assert r is not None and r.status == 200, r
        return r

    def test_files_and_process(self):
        for name in ("audit.db", "audit.db-wal", "audit.db-shm"):
            st = os.stat(os.path.join(self.td.path, "var", name))
            self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777),
                             (0, self.gid, 0o640), name)
        st = os.stat(os.path.join(self.td.path, "var"))
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777),
                         (0, self.gid, 0o710))
        st = os.stat(os.path.join(self.td.path, "var", "vault.db"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        with open("/proc/%d/status" % self.gw.proc.pid) as f:
            status = dict(l.split(":", 1) for l in f if ":" in l)
        self.assertEqual(status["Uid"].split()[0],
                         str(pwd.getpwnam(T.DEFAULT_USER).pw_uid))
        self.assertEqual(status["Groups"].split(), [str(self.gid)])

    def test_member_reads_the_log_as_it_grows(self):
        r = as_user(ANALYST, "audit", "-c", self.gw.cfg_path, "--format",
                    "json", "--asc")
        self.assertEqual(r.returncode, 0, r.stderr)
        paths = [json.loads(l)["path"] for l in r.stdout.splitlines()]
        for i in range(3):
            self.assertIn("/first/%d" % i, paths)
        # The gateway writes on while a reader comes and goes.
        self.get("/later")
        self.assertTrue(self.gw.wait_audit(timeout=10, path="/later"))
        r = as_user(ANALYST, "audit", "-c", self.gw.cfg_path, "--format",
                    "json", "--host", "alpha.test")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/later", [json.loads(l)["path"]
                                 for l in r.stdout.splitlines()])
        # The reader left nothing of its own in state_dir.
        for name in os.listdir(os.path.join(self.td.path, "var")):
            st = os.stat(os.path.join(self.td.path, "var", name))
            self.assertNotEqual(st.st_uid, pwd.getpwnam(ANALYST).pw_uid, name)

    def test_gateway_keeps_its_sqlite_locks(self):
        """Sharing the files must not cost the writer its SQLite locks:
        closing any descriptor of a file drops every POSIX lock the process
        holds on it. Without them a reader running as root takes the -shm
        for abandoned and truncates it under the gateway's mapping (SIGBUS,
        seen in CI), and could checkpoint and delete the -wal it writes."""
        var = os.path.join(self.td.path, "var")
        pid = self.gw.proc.pid
        for name, (start, length) in (("audit.db-shm", T.SQLITE_SHM_DMS),
                                      ("audit.db", T.SQLITE_SHARED)):
            path = os.path.join(var, name)
            self.assertFalse(T.lock_takeover(path, start, length),
                "%s: nothing holds bytes %d+%d; the gateway's locks: %s" %
                (name, start, length, T.posix_locks(pid, path)))
            self.assertTrue(T.posix_locks(pid, path), name)

    def test_root_readers_while_the_gateway_writes(self):
        """Readers as root (an operator's sqlite3, `sudo sandgate audit`)
        come and go while the gateway writes: it stays up and every row
        lands in the file they read."""
        db = os.path.join(self.td.path, "var", "audit.db")
        stop = []
        opened = [0]

        def readers():
            while not stop:
                con = sqlite3.connect("file:%s?mode=ro" % db, uri=True,
                                      timeout=5)
                con.execute("SELECT count(*) FROM events").fetchone()
                con.close()
                opened[0] += 1

        t = threading.Thread(target=readers)
        t.start()
        try:
            for i in range(60):
                self.get("/burst/%d" % i)
        finally:
            stop.append(1)
            t.join()
        self.assertTrue(self.gw.proc.alive(), self.gw.log_tail())
        self.assertGreater(opened[0], 10)
        self.assertTrue(self.gw.wait_audit(timeout=10, path="/burst/59"))
        paths = {r["path"] for r in self.gw.audit_rows(host="alpha.test")}
        self.assertEqual({"/burst/%d" % i for i in range(60)} - paths, set())
        r = as_user(ANALYST, "audit", "-c", self.gw.cfg_path, "--format",
                    "json", "--host", "alpha.test", "--limit", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/burst/59", [json.loads(l)["path"]
                                    for l in r.stdout.splitlines()])

    def test_member_reaches_nothing_else(self):
        uid = pwd.getpwnam(ANALYST).pw_uid
        probe = ("import socket,sys\n"
                 "for p in sys.argv[1:-1]:\n"
                 "    try:\n"
                 "        open(p,'rb').read(1); print('read', p)\n"
                 "    except OSError as e: print('denied', p, e.errno)\n"
                 "s=socket.socket(socket.AF_UNIX)\n"
                 "try:\n"
                 "    s.connect(sys.argv[-1]); print('connected')\n"
                 "except OSError as e: print('refused', e.errno)\n")
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" %
            pwd.getpwnam(ANALYST).pw_gid, "--init-groups", "--",
            "/usr/bin/python3", "-c", probe,
            os.path.join(self.td.path, "var", "vault.db"),
            os.path.join(self.td.path, "certs", "ca.key"),
            os.path.join(self.td.path, "certs", "vault.key"), self.sock],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r.stdout)
        for l in lines[:3]:
            self.assertTrue(l.startswith("denied "), l)
        self.assertTrue(lines[3].startswith("refused "), lines[3])

    def test_outsider_cannot_read(self):
        r = as_user(OUTSIDER, "audit", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("sandgate:", r.stderr)

    def test_missing_group_stops_serve(self):
        td = T.TempDir("sgtest-auditgrp-missing-")
        self.addCleanup(td.cleanup)
        gw = T.Gateway(td.path, self.dns, {}, extra={
            "audit": {"read_group": "sgt-nosuch-" + TAG}})
        r = subprocess.run([T.BIN, "serve", "-c", gw.cfg_path],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=30 * T.SLOW, env=T.clean_env())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn('audit.read_group: group "sgt-nosuch-%s" does not '
                      'exist' % TAG, r.stderr)


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
