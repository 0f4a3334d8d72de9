#!/usr/bin/python3
"""
End-to-end tests of `sandgate top` (docs/monitoring.md, "A live console"):
the console runs in a detached tmux session against a gateway under traffic
from two sandboxes (default install: user sandgate, seccomp, the keeper);
capture-pane shows the sandboxes with their counts and the feed of
decisions; keys filter by sandbox, decision and host and open one row's
detail; a path carrying an ESC byte is shown escaped; a tiny terminal and a
resize do not kill it; without a terminal it refuses, and --once prints one
snapshot as text.
"""

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

TMUX = shutil.which("tmux")
ORIGIN_HOST = "127.0.0.2"
TOKEN = "sgtest-top-token-0123456789"
TOKEN_G = "sgtest-top-token-gamma-0123"
WIDTH, HEIGHT = 160, 50


class Tmux:
    """A tmux server of our own (-L socket), killed by its socket and PID."""

    def __init__(self, name):
        self.sock = name
        self.server_pid = None
        self.pane_pid = None

    def tmux(self, *args, check=True):
        r = subprocess.run([TMUX, "-L", self.sock, "-f", "/dev/null"] +
            list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=T.clean_env(TERM="xterm"), timeout=20)
        if check and r.returncode != 0:
            raise AssertionError("tmux %s: %s" % (args, r.stderr))
        return r

    def start(self, argv, status_file=None):
        """argv in the pane; with status_file, the shell that runs it writes
        its exit status there (tmux's own pane_dead_status comes late: it
        may hold a dead pane's process as a zombie for seconds)."""
        cmd = " ".join("'%s'" % a.replace("'", "'\\''") for a in argv)
        cmd = ("%s; echo $? > '%s'" % (cmd, status_file) if status_file
               else "exec " + cmd)
        self.tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT),
                  "-s", "top", cmd)
        self.tmux("set-option", "-t", "top", "remain-on-exit", "on")
        out = self.tmux("display-message", "-p", "-t", "top",
                        "#{pid} #{pane_pid}").stdout.split()
        self.server_pid, self.pane_pid = int(out[0]), int(out[1])

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "top", *keys)

    def text(self, *keys):
        """Literal text (-l), no key names."""
        self.tmux("send-keys", "-t", "top", "-l", *keys)

    def capture(self):
        return self.tmux("capture-pane", "-p", "-t", "top").stdout

    def wait(self, pred, timeout=10.0):
        """Capture until pred(screen) is true; the last screen either way."""
        deadline = time.time() + timeout * T.SLOW
        while True:
            screen = self.capture()
            if pred(screen) or time.time() > deadline:
                return screen
            time.sleep(0.1)

    def pane_dead(self):
        r = self.tmux("display-message", "-p", "-t", "top", "#{pane_dead}",
                      check=False)
        return r.returncode != 0 or r.stdout.strip() == "1"

    def stop(self):
        self.tmux("kill-server", check=False)
        for pid in (self.pane_pid, self.server_pid):
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def feed_lines(screen):
    """The feed's rows: the lines after its title, each split in columns."""
    lines = screen.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("TIME ") and "SANDBOX" in line:
            return [l.split() for l in lines[i + 1:] if l.strip()]
    return []


def table_row(screen, sandbox):
    """A sandbox's table line as [name, req/s, deny/s, reqs, denied,
    errors, up, down, open], or None."""
    for line in screen.split("\n"):
        w = line.split()
        if len(w) == 9 and w[0] == sandbox and re.match(r"^[\d.]+$", w[1]):
            return w
    return None


@unittest.skipIf(TMUX is None, "tmux is not installed (scripts/install-deps.sh)")
class TopTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-top-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("origin", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.raw = T.RawServer(host=ORIGIN_HOST, mode="echo")
        cls.addClassCleanup(cls.raw.stop)
        cls.dns = T.Dnsmasq(d, [("allowed.test", ORIGIN_HOST),
                                ("denied.test", ORIGIN_HOST),
                                ("raw.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        pol = {
            "sandboxes": [T.local_sandbox("p", sid="alpha"),
                          T.token_sandbox("beta", TOKEN, "p"),
                          T.token_sandbox("gamma", TOKEN_G, "p")],
            "policies": [{"name": "p", "allow": [
                {"host": "allowed.test", "ports": [cls.origin.port]},
                {"host": "raw.test", "ports": [cls.raw.port],
                 "opaque": True}],
                "allow_private": [ORIGIN_HOST + "/32"]}],
        }
        cls.mport = T.free_port()
        cls.admin = os.path.join(d, "admin.sock")
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": pol}, extra={
            "listen": {"metrics": "127.0.0.1:%d" % cls.mport,
                       "admin": cls.admin}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.tm = Tmux("sgtest-top-%d" % os.getpid())
        cls.addClassCleanup(cls.tm.stop)
        cls.status_file = os.path.join(cls.td.path, "top.status")
        cls.tm.start([T.BIN, "top", "-c", cls.gw.cfg_path,
                      "--interval", "0.3"], status_file=cls.status_file)
        # top started before the traffic: it counts every row below
        scr = cls.tm.wait(lambda s: "no traffic since top started" in s)
        assert "no traffic since top started" in scr, scr
        cls.traffic()

    @classmethod
    def traffic(cls):
        gw, port = cls.gw, cls.origin.port
        for i in range(3):
            r = T.curl("http://allowed.test:%d/a%d" % (port, i), proxy=gw.url)
            assert r.status == 200, r
        for i in range(2):
            r = T.curl("http://denied.test:%d/no%d" % (port, i), proxy=gw.url)
            assert r.status == 403, r
        r = T.curl("http://allowed.test:%d/b0" % port, proxy=gw.url,
            args=["-U", "beta:" + TOKEN])
        assert r.status == 200, r
        for i in range(4):
            r = T.curl("http://denied.test:%d/bno%d" % (port, i),
                proxy=gw.url, args=["-U", "beta:" + TOKEN])
            assert r.status == 403, r
        # HTTP/1 takes no control byte in a target: %1b stays as written
        c = T.Conn(gw.port)
        resp = c.request(("GET http://allowed.test:%d/esc%%1b[2Jtail HTTP/1.1"
            "\r\nHost: allowed.test:%d\r\nConnection: close\r\n\r\n"
            % (port, port)).encode())
        c.close()
        assert resp.status == 200, resp
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and len([r for r in gw.audit_rows()
                if r["kind"] != "admin"]) < 11:   # every request above
            time.sleep(0.1)
        cls.rows = [r for r in gw.audit_rows() if r["kind"] != "admin"]

    def gw_db(self):
        return os.path.join(self.gw.tmp, "var", "audit.db")

    def setUp(self):
        self.tm.keys("c")   # no filter left over from another test
        self.tm.keys("Escape")
        time.sleep(0.2)
        self.assertFalse(self.tm.pane_dead(), self.tm.capture())

    def test_1_table_counts(self):
        """Each sandbox's requests, denials and bytes, from the audit rows."""
        want = {}
        for sid in ("alpha", "beta"):
            rows = [r for r in self.rows if r["sandbox"] == sid]
            want[sid] = (len(rows),
                         len([r for r in rows if r["decision"] == "deny"]))
        scr = self.tm.wait(lambda s: all(
            (table_row(s, sid) or [0] * 9)[3:5] == [str(n) for n in want[sid]]
            for sid in want))
        for sid, (total, denied) in want.items():
            row = table_row(scr, sid)
            self.assertIsNotNone(row, scr)
            self.assertEqual(row[3:5], [str(total), str(denied)], scr)
        self.assertEqual(want["alpha"][1], 2)
        self.assertEqual(want["beta"], (5, 4))
        down = sum(r["bytes_down"] or 0 for r in self.rows
                   if r["sandbox"] == "beta")
        self.assertGreater(down, 0)
        self.assertEqual(table_row(scr, "beta")[7], str(down), scr)
        # the header: what the admin API and /metrics publish
        head = scr.split("\n")[0]
        self.assertRegex(head, r"sandgate \d+\.\d+\.\d+ +up \d+m\d\ds +workers 2 +"
                         r"connections \d+ +tunnels \d+ +keeper up", scr)

    def test_2_feed_rows(self):
        """The feed shows every decision, newest first."""
        scr = self.tm.wait(lambda s: len(feed_lines(s)) >= len(self.rows))
        lines = feed_lines(scr)
        self.assertGreaterEqual(len(lines), len(self.rows), scr)
        hosts = [l[4] for l in lines]
        self.assertIn("denied.test:%d" % self.origin.port, hosts)
        self.assertIn("allowed.test:%d" % self.origin.port, hosts)
        # newest first, the newest row on top
        times = [l[0] for l in lines]
        self.assertEqual(times, sorted(times, reverse=True), scr)
        self.assertEqual(lines[0][6], "/esc%1b[2Jtail", scr)
        self.assertEqual(lines[-1][6], "/a0", scr)

    def test_3_filter_sandbox(self):
        self.tm.keys("s")
        self.tm.text("beta")
        self.tm.keys("Enter")
        scr = self.tm.wait(lambda s: "sandbox=beta" in s and
                           all(l[1] == "beta" for l in feed_lines(s)))
        self.assertIn("filter: sandbox=beta", scr)
        lines = feed_lines(scr)
        self.assertEqual(len(lines), 5, scr)
        self.assertTrue(all(l[1] == "beta" for l in lines), scr)
        self.assertIsNone(table_row(scr, "alpha"), scr)

    def test_4_filter_decision(self):
        # A capture can catch the screen mid-repaint (seen under ASan): wait
        # for the filtered feed itself, not only the filter line.
        self.tm.keys("d")   # allow
        scr = self.tm.wait(lambda s: "decision=allow" in s and feed_lines(s)
                           and all(l[2] == "allow" for l in feed_lines(s)))
        lines = feed_lines(scr)
        self.assertTrue(lines, scr)
        self.assertTrue(all(l[2] == "allow" for l in lines), scr)
        self.tm.keys("d")   # deny
        scr = self.tm.wait(lambda s: "decision=deny" in s and
                           len(feed_lines(s)) == 6 and
                           all(l[2] == "deny" for l in feed_lines(s)))
        lines = feed_lines(scr)
        self.assertEqual(len(lines), 6, scr)
        self.assertTrue(all(l[2] == "deny" for l in lines), scr)
        self.assertEqual(len([r for r in self.rows
                              if r["decision"] == "deny"]), 6)

    def test_5_filter_host(self):
        self.tm.keys("h")
        self.tm.text("DENIED")
        self.tm.keys("Enter")
        scr = self.tm.wait(lambda s: "host=DENIED" in s)
        lines = feed_lines(scr)
        self.assertEqual(len(lines), 6, scr)
        self.assertTrue(all(l[4].startswith("denied.test:") for l in lines),
                        scr)
        # Esc at the prompt keeps the filter as it was
        self.tm.keys("h")
        self.tm.text("nothing")
        self.tm.keys("Escape")
        scr = self.tm.wait(lambda s: "host=DENIED" in s and
                           "Esc: cancel" not in s)
        self.assertEqual(len(feed_lines(scr)), 6, scr)
        self.tm.keys("c")
        scr = self.tm.wait(lambda s: "host=*" in s)
        self.assertGreaterEqual(len(feed_lines(scr)), len(self.rows), scr)

    def test_6_detail(self):
        """Down selects the newest matching row, Enter shows every field."""
        self.tm.keys("s")
        self.tm.text("beta")
        self.tm.keys("Enter", "d", "d")
        self.tm.wait(lambda s: "decision=deny" in s and "sandbox=beta" in s)
        self.tm.keys("Down", "Down", "Enter")
        scr = self.tm.wait(lambda s: "every field" in s)
        self.assertIn("every field", scr)
        fields = {}
        for line in scr.split("\n")[1:]:
            m = re.match(r"^(\w+) +(\S.*)$", line)
            if m:
                fields[m.group(1)] = m.group(2).strip()
        beta_denied = [r for r in self.rows if r["sandbox"] == "beta" and
                       r["decision"] == "deny"]
        row = sorted(beta_denied, key=lambda r: r["id"])[-2]
        self.assertEqual(fields.get("id"), str(row["id"]), scr)
        for col in ("sandbox", "kind", "host", "decision", "reason", "path",
                    "method", "client"):
            self.assertEqual(fields.get(col), str(row[col]), scr)
        self.assertEqual(fields.get("rule"),
                         "(null)" if row["rule"] is None else row["rule"], scr)
        self.assertEqual(fields.get("status"), str(row["status"]), scr)
        self.assertIn("hash", fields)
        self.tm.keys("Escape")
        scr = self.tm.wait(lambda s: "every field" not in s)
        self.assertIn("filter: sandbox=beta decision=deny", scr)

    def test_7_escaped_path(self):
        """%1b in a path shows as written; raw bytes are drawn escaped."""
        scr = self.tm.wait(lambda s: "/esc%1b[2Jtail" in s)
        self.assertIn("/esc%1b[2Jtail", scr)
        # The gateway refuses control bytes in a request target and escapes
        # a bad host itself, so raw bytes are put in a copy of audit.db,
        # the way a damaged or hostile file would hold them.
        d = self.td.path
        copy = os.path.join(d, "evil.db")
        src = sqlite3.connect("file:%s?mode=ro" % self.gw_db(), uri=True)
        dst = sqlite3.connect(copy)
        src.backup(dst)
        src.close()
        evil = "/x\x1b[2J\x1b]0;owned\x07\x9b31m\xff\ttab"
        dst.execute("UPDATE events SET path = ?, host = ? WHERE id = "
                    "(SELECT max(id) FROM events WHERE kind != 'admin')",
                    (evil.encode("latin-1"), b"h\x1bost.test"))
        dst.commit()
        dst.close()
        with open(self.gw.cfg_path) as f:
            text = f.read()
        cfg = os.path.join(d, "evil.yaml")
        with open(cfg, "w") as f:
            f.write(text.replace(self.gw_db(), copy))
        tm = Tmux("sgtest-top-evil-%d" % os.getpid())
        self.addCleanup(tm.stop)
        tm.start([T.BIN, "top", "-c", cfg, "--interval", "0.3"])
        want = "/x\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\xff\\x09tab"
        # The first screen with the row may be drawn before the whole feed
        # (a loaded machine): wait for both.
        scr = tm.wait(lambda s: want in s and
                      len(feed_lines(s)) >= len(self.rows))
        self.assertIn(want, scr)
        self.assertIn("h\\x1bost.test", scr)
        self.assertNotIn("\x1b", scr)
        # the clear-screen did not run: the header and the feed are there
        self.assertTrue(scr.startswith("sandgate "), scr)
        self.assertGreaterEqual(len(feed_lines(scr)), len(self.rows), scr)
        # and in the detail
        tm.keys("h")
        tm.text("ost.test")
        tm.keys("Enter")
        tm.wait(lambda s: "host=ost.test" in s)
        tm.keys("Down", "Enter")
        scr = tm.wait(lambda s: "every field" in s)
        self.assertIn("owned", scr)
        self.assertNotIn("\x1b", scr)
        r = T.run_sandgate("top", "-c", cfg, "--once", "--interval", "0.2")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(want, r.stdout)
        self.assertNotIn("\x1b", r.stdout)

    def test_8_tiny_and_resize(self):
        self.tm.tmux("resize-window", "-t", "top", "-x", "12", "-y", "3")
        scr = self.tm.wait(lambda s: "terminal" in s)
        self.assertIn("terminal", scr)
        self.tm.tmux("resize-window", "-t", "top", "-x", "45", "-y", "7")
        self.tm.keys("Down", "Enter")
        time.sleep(0.5)
        self.tm.keys("Escape")
        self.tm.tmux("resize-window", "-t", "top", "-x", str(WIDTH), "-y",
                     str(HEIGHT))
        scr = self.tm.wait(lambda s: table_row(s, "alpha") is not None)
        self.assertFalse(self.tm.pane_dead(), scr)
        self.assertIsNotNone(table_row(scr, "alpha"), scr)

    def test_9_once_and_no_tty(self):
        r = T.run_sandgate("top", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 1, r)
        self.assertEqual(len(r.stderr.strip().split("\n")), 1, r.stderr)
        self.assertIn("--once", r.stderr)
        r = T.run_sandgate("top", "-c", self.gw.cfg_path, "--once",
                           "--interval", "0.2", "--decision", "deny")
        self.assertEqual(r.returncode, 0, r)
        self.assertRegex(r.stdout, r"(?m)^sandgate \d+\.\d+\.\d+ +up \d+m\d\ds +workers 2")
        lines = r.stdout.split("decisions")[1].strip().split("\n")[1:]
        self.assertEqual(len(lines), 6, r.stdout)
        self.assertTrue(all(l.split()[2] == "deny" for l in lines), r.stdout)
        self.assertNotIn("\x1b", r.stdout)

    def test_y_under_traffic(self):
        """A third sandbox's steady requests and an open tunnel show live."""
        port = self.origin.port
        c, resp = T.open_tunnel(self.gw.port, "raw.test:%d" % self.raw.port,
                                auth=T.basic("gamma", TOKEN_G))
        self.addCleanup(c.close)
        self.assertEqual(resp.status, 200, resp)
        # an opaque protocol: a relayed tunnel, open while the test looks
        c.send(b"SSH-2.0-sgtest\r\n")
        self.assertEqual(c.read_exact(len(b"SSH-2.0-sgtest\r\n")),
                         b"SSH-2.0-sgtest\r\n")
        stop = threading.Event()
        sent = []

        def load():
            sess = T.session("http://gamma:%s@127.0.0.1:%d" % (TOKEN_G,
                                                             self.gw.port))
            while not stop.is_set():
                r = sess.get("http://allowed.test:%d/g" % port, timeout=10)
                sent.append(r.status_code)
                time.sleep(0.02)
        th = threading.Thread(target=load)
        th.start()
        try:
            scr = self.tm.wait(lambda s: table_row(s, "gamma") is not None
                               and float(table_row(s, "gamma")[1]) > 0
                               and table_row(s, "gamma")[8] not in ("0", "?")
                               and "tunnels 1" in s.split("\n")[0])
        finally:
            stop.set()
            th.join()
        self.assertTrue(sent and set(sent) == {200}, sent)
        row = table_row(scr, "gamma")
        self.assertIsNotNone(row, scr)
        self.assertGreater(float(row[1]), 0, scr)
        self.assertEqual(row[2], "0.0", scr)
        # OPEN: gamma's tunnel (and its kept request connection) are open
        self.assertGreaterEqual(int(row[8]), 1, scr)
        self.assertRegex(scr, r"(?m)^SANDBOX +REQ/S +DENY/S +REQS +DENIED +"
                         r"ERRORS +UP +DOWN +OPEN *$")
        self.assertRegex(scr.split("\n")[0], r"connections [1-9]\d* +tunnels 1 ",
                         scr)

    def test_z_quit(self):
        self.tm.keys("q")
        deadline = time.time() + 5 * T.SLOW
        # the shell's redirect makes the file before echo writes into it
        while time.time() < deadline and not (os.path.exists(self.status_file)
                and os.path.getsize(self.status_file) > 0):
            time.sleep(0.1)
        # 0: no sanitizer report at exit either (leaks included)
        with open(self.status_file) as f:
            self.assertEqual(f.read().strip(), "0", self.tm.capture())
        self.assertTrue(self.gw.alive())


if __name__ == "__main__":
    T.main()
