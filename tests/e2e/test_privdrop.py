#!/usr/bin/python3
"""
End-to-end tests of issue 13's least privilege for the network process
(docs/architecture.md, "Privileges"): `sandgate serve` started as root with
`user: sandgate` shows, in /proc of every one of its threads, the user, no
capability in any set, NoNewPrivs 1 and Seccomp 2; holds no descriptor of a
key file, and the user it runs as cannot open them; and it still serves plain
HTTP, intercepted HTTPS (leaves minted with the CA key it read as root), a
credential swap, a vault rotation, a SIGHUP and an admin reload, each with
its audit row. A user that does not exist, or that can read a key, stops
start-up with one line.

One test runs the network process as root on purpose
(test_user_null_keeps_root): `user: null` is the documented opt-out of the
drop, and the test checks that it keeps uid 0, has no seccomp filter, and
says so in the log. Every other gateway here drops to the sandgate user as a
default install does.
"""

import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

USER = "sandgate"
ORIGIN_HOST = "127.0.0.2"
SETPRIV = "/usr/bin/setpriv"
PH = "sgtest-privdrop-placeholder-01"
SECRET1 = "sk-privdrop-first-0123456789"
SECRET2 = "sk-privdrop-rotated-9876543210"
CAP_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")

POLICY = """\
sandboxes:
  - id: pd-box
    policy: pd
    source: [127.0.0.1/32]
policies:
  - name: pd
    allow:
      - host: plain.test
        ports: [{http}]
      - host: tls.test
        ports: [{https}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [pd-key]
credentials:
  - name: pd-key
    secret: pd-secret
    hosts: [tls.test]
    headers: [X-Api-Key]
    placeholder: "{ph}"
"""

LATER = """\
policies:
  - name: later
    allow:
      - host: later.test
        ports: [{http}]
"""


def as_user(code, *args):
    """python3 -c code args as the gateway's user: its uid and gid, no
    supplementary group, no capability (what /proc shows of the gateway)."""
    return subprocess.run([SETPRIV, "--reuid", USER, "--regid", USER,
        "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
        "--no-new-privs", "/usr/bin/python3", "-c", code] + list(args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=T.clean_env(), timeout=30)


class PrivDropTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            T.skip_file("the privilege drop is tested as root")
        try:
            cls.pw = pwd.getpwnam(USER)
        except KeyError:
            raise AssertionError("no user %s: run scripts/install-deps.sh "
                "(the install step creates it)" % USER)
        cls.td = T.TempDir("sgtest-priv-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cert, key = T.make_cert(d, "tls.test")
        cls.tls_origin = T.Origin("tls", ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.tls_origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in
                                ("plain.test", "tls.test", "later.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.admin_sock = os.path.join(d, "var", "admin.sock")
        cls.gw = T.Gateway(d, cls.dns, {"pd.yaml": POLICY.format(
            http=cls.origin.port, https=cls.tls_origin.port,
            origin=ORIGIN_HOST, ph=PH)}, user=USER,
            extra={"upstream": {"ca_bundle": cert},
                   "listen": {"admin": cls.admin_sock}})
        r = T.run_sandgate("vault", "set", "pd-secret", "-c", cls.gw.cfg_path,
            input=SECRET1)
        if r.returncode != 0:
            raise RuntimeError("vault set: " + r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not cls.gw.wait_log(r"^.*privileges: running as %s" % USER, 10):
            raise AssertionError("no privilege drop in the log:\n"
                + cls.gw.log_tail())
        cls.pid = cls.gw.proc.pid
        cls.ca_crt = os.path.join(d, "certs", "ca.crt")
        cls.keys = [os.path.join(d, "certs", k) for k in ("ca.key", "vault.key")]

    def proxy(self):
        return "http://127.0.0.1:%d" % self.gw.port

    # -------------------------------------------------------------- /proc

    def test_01_every_thread_unprivileged(self):
        # the main loop, two workers and the audit writer at least; the
        # listeners are bound (and accept) before the workers start
        deadline = time.time() + 10 * T.SLOW
        while True:
            tasks = os.listdir("/proc/%d/task" % self.pid)
            if len(tasks) >= 4 or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(len(tasks), 4, tasks)
        ids = "\t".join([str(self.pw.pw_uid)] * 4)
        gids = "\t".join([str(self.pw.pw_gid)] * 4)
        for tid in ["."] + tasks:
            path = "/proc/%d/%s" % (self.pid, "status" if tid == "."
                                    else "task/%s/status" % tid)
            st = T.proc_status(path)
            with self.subTest(task=tid):
                self.assertEqual(st["Uid"], ids, st)
                self.assertEqual(st["Gid"], gids, st)
                self.assertEqual(st["Groups"].strip(), "", st)
                for c in CAP_SETS:
                    self.assertEqual(int(st[c], 16), 0, "%s %s" % (c, st[c]))
                self.assertEqual(st["NoNewPrivs"], "1", st)
                self.assertEqual(st["Seccomp"], "2", st)

    def test_02_no_descriptor_of_a_key(self):
        keys = {os.path.realpath(k) for k in self.keys}
        for k in self.keys:
            st = os.stat(k)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o600), k)
        fd_dir = "/proc/%d/fd" % self.pid
        targets = []
        for fd in os.listdir(fd_dir):
            try:
                targets.append(os.readlink(os.path.join(fd_dir, fd)))
            except FileNotFoundError:
                pass
        self.assertTrue(targets)
        self.assertFalse(keys & set(targets), targets)
        self.assertFalse([t for t in targets if t.endswith(".key")], targets)

    def test_03_user_cannot_open_the_keys(self):
        code = ("import errno, sys\n"
                "for p in sys.argv[1:]:\n"
                "    try:\n"
                "        open(p, 'rb')\n"
                "    except OSError as e:\n"
                "        print(p, errno.errorcode[e.errno])\n"
                "    else:\n"
                "        print(p, 'OPENED')\n")
        r = as_user(code, self.ca_crt, *self.keys)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines())
        # the certificate is public: the user reaches the directory
        self.assertEqual(got[self.ca_crt], "OPENED", r.stdout)
        for k in self.keys:
            self.assertIn(got[k], ("EACCES", "EPERM"), r.stdout)

    def test_04_state_dir_shared_read_only(self):
        st = os.stat(os.path.join(self.td.path, "var"))
        self.assertEqual(st.st_uid, 0)
        self.assertEqual(st.st_gid, self.pw.pw_gid)
        mode = stat.S_IMODE(st.st_mode)
        self.assertTrue(mode & 0o010, oct(mode))
        self.assertFalse(mode & 0o027, oct(mode))

    def test_05_audit_writer_keeps_its_sqlite_locks(self):
        """Nothing the drop does to state_dir costs the audit writer its
        SQLite locks (a close() of any descriptor of the file would): a
        reader running as root must not take the database over."""
        var = os.path.join(self.td.path, "var")
        for name, (start, length) in (("audit.db-shm", T.SQLITE_SHM_DMS),
                                      ("audit.db", T.SQLITE_SHARED)):
            path = os.path.join(var, name)
            self.assertFalse(T.lock_takeover(path, start, length),
                "%s: the gateway's locks: %s" % (name,
                T.posix_locks(self.pid, path)))

    # -------------------------------------------------------------- serving

    def test_10_plain_http(self):
        r = T.curl("http://plain.test:%d/pd-plain" % self.origin.port,
            proxy=self.proxy(), tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/pd-plain")
        rows = self.gw.wait_audit(path="/pd-plain", decision="allow")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0]["sandbox"], "pd-box")

    def fetch_tls(self, path):
        """The X-Api-Key the origin saw (the answer shows it scrubbed)."""
        r = T.curl("https://tls.test:%d%s" % (self.tls_origin.port, path),
            proxy=self.proxy(), tmp=self.td.path,
            args=["--cacert", self.ca_crt, "-H", "X-Api-Key: " + PH])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["origin"], "tls")
        self.assertNotIn(SECRET1, r.body.decode())
        self.assertNotIn(SECRET2, r.body.decode())
        recs = [q for q in self.tls_origin.requests if q["path"] == path]
        self.assertEqual(len(recs), 1, recs)
        return dict((k.lower(), v) for k, v in recs[0]["headers"])

    def test_11_intercepted_https_with_a_credential(self):
        seen = self.fetch_tls("/headers?pd-tls")
        self.assertEqual(seen["x-api-key"], SECRET1, self.gw.log_tail())
        rows = self.gw.wait_audit(host="tls.test", decision="allow",
            pred=lambda r: r["path"].startswith("/headers") and r["credential"])
        self.assertTrue(rows, self.gw.audit_rows(host="tls.test"))
        self.assertEqual(rows[0]["credential"], "pd-key")

    def test_20_vault_rotation(self):
        r = T.run_sandgate("vault", "rotate", "pd-secret", "-c",
            self.gw.cfg_path, input=SECRET2)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.time() + 5 * T.SLOW
        seen, n = None, 0
        while time.time() < deadline:
            n += 1
            seen = self.fetch_tls("/headers?pd-rot-%d" % n)["x-api-key"]
            if seen == SECRET2:
                break
            time.sleep(0.2)
        self.assertEqual(seen, SECRET2, self.gw.log_tail())

    def test_30_reload_by_sighup_and_admin(self):
        url = "http://later.test:%d/pd-later" % self.origin.port
        r = T.curl(url, proxy=self.proxy(), tmp=self.td.path)
        self.assertEqual(r.status, 403, r)
        off = len(self.gw.log_text())
        path = self.gw.write_policy("later.yaml",
            LATER.format(http=self.origin.port))
        self.addCleanup(os.unlink, path)
        self.gw.reload()
        m = self.gw.wait_log(r"reload: (new policy in force|failed).*", 5,
            start=off)
        self.assertTrue(m and "in force" in m.group(0), self.gw.log_tail())
        # the sandbox keeps its own policy (later.test stays denied); the
        # admin API reloads too, and the status counts the new policy
        status, _, body = T.unix_http(self.admin_sock,
            b"POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n")
        self.assertEqual(status, 200, body)
        self.assertTrue(json.loads(body)["ok"])
        status, _, body = T.unix_http(self.admin_sock,
            b"GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 200, body)
        self.assertIn("2 policies", json.loads(body)["policy"])
        # rows keep coming after the reloads
        r = T.curl(url + "-after", proxy=self.proxy(), tmp=self.td.path)
        self.assertEqual(r.status, 403, r)
        self.assertTrue(self.gw.wait_audit(path="/pd-later-after",
            decision="deny"), self.gw.audit_rows(host="later.test"))

    def test_40_after_all_still_confined(self):
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
        st = T.proc_status("/proc/%d/status" % self.pid)
        self.assertEqual(st["Seccomp"], "2")
        self.assertEqual(int(st["CapEff"], 16), 0)


class PrivDropStartTest(unittest.TestCase):
    """Start-up refusals: each one line on stderr, exit 1, nothing served."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root")
        self.td = T.TempDir("sgtest-privstart-")
        self.addCleanup(self.td.cleanup)

    def config(self, user):
        d = self.td.path
        os.makedirs(os.path.join(d, "policies"), exist_ok=True)
        cfg = os.path.join(d, "sandgate.yaml")
        with open(cfg, "w") as f:
            f.write(T.to_yaml({"state_dir": "./var",
                "listen": {"http": "127.0.0.1:%d" % T.free_port(),
                    "socks5": None, "dns": None, "transparent": None,
                    "ingress": None, "metrics": None, "admin": None},
                "upstream": {"resolvers": ["127.0.0.1:9"]},
                "workers": 1, "user": user}) + "\n")
        return cfg

    def test_missing_user(self):
        name = "sg-no-such-user"
        self.assertRaises(KeyError, pwd.getpwnam, name)
        r = T.run_sandgate("serve", "-c", self.config(name), timeout=15)
        self.assertEqual(r.returncode, 1, r)
        lines = r.stderr.strip().splitlines()
        errs = [l for l in lines if l.startswith("sandgate: ")]
        self.assertEqual(len(errs), 1, r.stderr)
        self.assertTrue(errs[0].startswith(
            'sandgate: user "%s" does not exist (create it: ' % name), errs[0])
        self.assertEqual(errs[0], lines[-1])
        # nothing was created before the check
        self.assertFalse(os.path.exists(os.path.join(self.td.path, "certs")))

    def test_user_that_can_read_a_key(self):
        try:
            pw = pwd.getpwnam(USER)
        except KeyError:
            self.fail("no user %s: run scripts/install-deps.sh" % USER)
        cfg = self.config(USER)
        T.open_to_others(self.td.path)
        self.assertEqual(T.run_sandgate("ca", "init", "-c", cfg).returncode, 0)
        key = os.path.join(self.td.path, "certs", "ca.key")
        os.chown(key, pw.pw_uid, pw.pw_gid)
        # mode 0600 and yet the user's: the directory no longer protects it
        os.chmod(os.path.dirname(key), 0o755)
        r = T.run_sandgate("serve", "-c", cfg, timeout=15)
        self.assertEqual(r.returncode, 1, r)
        last = r.stderr.strip().splitlines()[-1]
        self.assertRegex(last, r'^sandgate: user "%s" can open the key file '
            r'%s: make it root\'s' % (USER, re.escape(key)))

    def test_user_null_keeps_root(self):
        """
        Runs the network process as root on purpose: user: null is the
        documented opt-out of the drop, and this checks that it keeps uid 0
        and says so in the log.
        """
        cfg = self.config(None)
        log = os.path.join(self.td.path, "serve.log")
        p = T.Proc([T.BIN, "serve", "-c", cfg], log, cwd=self.td.path)
        self.addCleanup(p.stop)
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and "ready" not in p.log_text():
            time.sleep(0.05)
        self.assertIn("user: null", p.log_text())
        st = T.proc_status("/proc/%d/status" % p.pid)
        self.assertEqual(st["Uid"].split("\t")[0], "0")
        self.assertEqual(st["Seccomp"], "0")
        self.assertIn(p.stop(), (0, -15, 143), p.log_tail())


if __name__ == "__main__":
    if not os.access(SETPRIV, os.X_OK) or shutil.which("curl") is None:
        T.skip_file("needs setpriv (util-linux) and curl")
    T.main()
