#!/usr/bin/python3
"""
End-to-end tests of the launcher's lifecycle (SPEC §9, issue 7 point 5):
`sandbox create` (detached: id, token, URLs), `exec`, `ls`, `logs`, `rm`,
`--ttl`, a command that ends on its own, and a supervisor killed outright,
in both runtimes. After each, nothing the sandbox made is left: namespace,
veth, address, rules, cgroup, bundle, registration, state row.
Root only (exit 77 otherwise).
"""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from sbtest import (BODY, SandboxWorld, launcher_lock, leftovers,  # noqa: E402
    skip_unless_root)


class SandboxLifeTest(SandboxWorld):
    def create(self, rt, sid, *args):
        r = self.sandgate("sandbox", "create", "--policy", "web", "--runtime",
            rt, "--id", sid, *args)
        self.assertEqual(r.returncode, 0, r.stderr + self.gw.log_tail())
        self.addCleanup(self.sandgate, "sandbox", "rm", sid)
        return r

    def ls(self):
        r = self.sandgate("sandbox", "ls", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {e["id"]: e for e in json.loads(r.stdout)}

    def wait_gone(self, sid, secs):
        deadline = time.time() + secs * T.SLOW
        while time.time() < deadline:
            if sid not in self.ls() and leftovers(sid) == []:
                return True
            time.sleep(0.5)
        return False

    def check_clean(self, sid):
        super().check_clean(sid)
        self.assertNotIn(sid, self.ls())

    def test_01_create_exec_ls_logs_rm(self):
        def one(rt):
            sid = "t-life-" + rt
            r = self.create(rt, sid, "--publish", "8000", "--ttl", "1h",
                "--", "sh", "-c", 'echo "started $SANDGATE_SANDBOX"; '
                'exec sleep 600')
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], sid)
            self.assertRegex(lines[1], r"^token [0-9a-f]{40}$")
            token = lines[1].split()[1]
            self.assertIn(sid, self.registered())

            e = self.ls()[sid]
            self.assertEqual((e["runtime"], e["mode"], e["state"],
                e["policy"], e["publish"], e["token"]),
                (rt, "create", "running", "web", [8000], token))
            self.assertRegex(e["guest"], r"^198\.18\.\d+\.\d+$")
            self.assertIsNotNone(e["expires"])
            table = self.sandgate("sandbox", "ls").stdout
            self.assertRegex(table, r"(?m)^ID +POLICY +RUNTIME")
            self.assertRegex(table, r"(?m)^%s +web +%s +running " % (sid, rt))
            mode = os.stat(self.td.join("var", "state.db")).st_mode
            self.assertEqual(stat.S_IMODE(mode), 0o600)

            r = self.sandgate("sandbox", "exec", sid, "--", "sh", "-c",
                'echo "in $SANDGATE_SANDBOX"; exit 5')
            self.assertEqual((r.returncode, r.stdout), (5, "in %s\n" % sid),
                r.stderr)
            r = self.sandgate("sandbox", "exec", sid, "--", "curl", "-s",
                "-m", "20", "http://allowed.test/")
            self.assertEqual((r.returncode, r.stdout), (0, BODY), r.stderr)
            rows = self.gw.wait_audit(sandbox=sid, host="allowed.test",
                decision="allow")
            self.assertTrue(rows, "no allow row for the exec'd curl")

            r = self.sandgate("sandbox", "logs", sid)
            self.assertEqual((r.returncode, r.stdout), (0, "started %s\n" %
                sid), r.stderr)

            r = self.sandgate("sandbox", "rm", sid)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.check_clean(sid)
            r = self.sandgate("sandbox", "exec", sid, "--", "true")
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stderr, r"^sandgate: .*no sandbox")
            r = self.sandgate("sandbox", "rm", sid)
            self.assertEqual(r.returncode, 1)
        self.each_runtime(one)

    def test_02_command_end_reaps(self):
        def one(rt):
            sid = "t-end-" + rt
            self.create(rt, sid, "--", "sh", "-c", "sleep 1; echo bye")
            self.assertTrue(self.wait_gone(sid, 60), leftovers(sid))
            self.check_clean(sid)
        self.each_runtime(one)

    def test_03_ttl(self):
        def one(rt):
            sid = "t-ttl-" + rt
            started = time.time()
            self.create(rt, sid, "--ttl", "4s")
            self.assertIn(sid, self.ls())
            self.assertTrue(self.wait_gone(sid, 60), leftovers(sid))
            # the idle init stops on TERM: no 10 s wait for KILL
            self.assertGreaterEqual(time.time() - started, 4)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_04_killed_supervisor_reconciled(self):
        def one(rt):
            sid = "t-svk-" + rt
            self.create(rt, sid)
            with open("/run/sandgate/bundles/%s/owner.json" % sid) as f:
                pid = json.load(f)["pid"]
            with launcher_lock():
                os.kill(pid, signal.SIGKILL)
                deadline = time.time() + 10
                while os.path.exists("/proc/%d" % pid) and \
                        time.time() < deadline:
                    time.sleep(0.05)
                self.assertNotEqual(leftovers(sid), [])
            # any launcher start reconciles; ls is one
            self.assertNotIn(sid, self.ls())
            self.check_clean(sid)
        self.each_runtime(one)

    def test_05_run_is_listed(self):
        rt = "crun" if os.access("/usr/bin/crun", os.X_OK) else "runsc"
        sid = "t-fg-" + rt
        p = subprocess.Popen([T.BIN, "sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", rt, "--id", sid, "--", "sh", "-c",
            "trap 'exit 3' TERM; sleep 300 & wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=T.clean_env())
        try:
            deadline = time.time() + 60 * T.SLOW
            e = None
            while time.time() < deadline and p.poll() is None:
                e = self.ls().get(sid)
                if e is not None and e["state"] == "running":
                    break
                time.sleep(0.2)
            self.assertIsNotNone(e)
            self.assertEqual((e["mode"], e["state"]), ("run", "running"))
            r = self.sandgate("sandbox", "logs", sid)
            self.assertEqual(r.returncode, 1)
            r = self.sandgate("sandbox", "rm", sid)
            self.assertEqual(r.returncode, 0, r.stderr)
            p.communicate(timeout=60)
            # rm's TERM reached the command, whose status run returns
            self.assertEqual(p.returncode, 3)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.check_clean(sid)

    def exec_signalled(self, sid, script, sig, group):
        """`sandbox exec SID -- sh -c SCRIPT`, signalled with sig once it
        printed "started" (group: its whole process group, as a terminal's
        ^C); (status, stdout, stderr)."""
        p = subprocess.Popen([T.BIN, "sandbox", "exec", "-c",
            self.gw.cfg_path, sid, "--", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=T.clean_env(),
            start_new_session=True)
        try:
            self.assertEqual(p.stdout.readline(), "started\n")
            if group:
                os.killpg(p.pid, sig)
            else:
                p.send_signal(sig)
            out, err = p.communicate(timeout=30 * T.SLOW)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        return p.returncode, out, err

    def test_07_exec_passes_signals_on(self):
        """`sandbox exec` passes SIGTERM to the command (and ^C, SIGINT to
        its whole process group, as a terminal sends it) in both runtimes:
        the command's trap runs and its status is exec's."""
        trap = ('trap "echo got TERM; exit 5" TERM; '
            'trap "echo got INT; exit 6" INT; '
            'echo started; while :; do sleep 0.1; done')

        def one(rt):
            sid = "t-sig-" + rt
            self.create(rt, sid)
            for sig, word, status in ((signal.SIGTERM, "TERM", 5),
                    (signal.SIGINT, "INT", 6)):
                with self.subTest(signal=word):
                    rc, out, err = self.exec_signalled(sid, trap, sig,
                        sig == signal.SIGINT)
                    self.assertEqual((rc, out), (status, "got %s\n" % word),
                        err)
            # nothing of the two commands is left running in the sandbox
            r = self.sandgate("sandbox", "exec", sid, "--", "sh", "-c",
                "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; "
                "echo; done")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("got TERM", r.stdout)
            self.assertEqual(self.sandgate("sandbox", "rm", sid).returncode, 0)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_07b_group_interrupt_reaches_the_command_once(self):
        """A ^C to `sandbox exec`'s whole process group, stdin not a
        terminal, reaches the command, whose trap runs once and whose
        status is exec's, in both runtimes. The double delivery this guards
        against (crun exec passing the group's SIGINT on, and the launcher
        again) is a race that merges into one signal most of the time: this
        test did not see it against the old launcher either, and test_07
        saw it once, in CI under ASan. The fix is crun exec's own process
        group (sandbox_run.c, runtime_spawn)."""
        trap = ('n=0; trap \'n=$((n+1)); echo "got INT $n"; sleep 1; '
            '[ $n -gt 1 ] && exit 7; exit 6\' INT; '
            'echo started; while :; do sleep 0.1; done')

        def one(rt):
            sid = "t-sig2-" + rt
            self.create(rt, sid)
            rc, out, err = self.exec_signalled(sid, trap, signal.SIGINT, True)
            self.assertEqual((rc, out), (6, "got INT 1\n"), err)
            self.assertEqual(self.sandgate("sandbox", "rm", sid).returncode, 0)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_06_usage_errors(self):
        for args in (["create", "--publish", "0"], ["create", "--publish",
                "70000"], ["create", "--ttl", "soon"], ["create", "--ttl",
                "0s"], ["exec", "--", "true"], ["exec", "x"], ["rm"],
                ["rm", "Bad_Id"], ["ls", "--format", "xml"], ["logs"],
                ["bogus"]):
            r = T.run_sandgate("sandbox", args[0], "-c", self.gw.cfg_path,
                *args[1:])
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        r = self.sandgate("sandbox", "rm", "t-never-was")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(re.match(r"^sandgate: .*no sandbox", r.stderr),
            r.stderr)


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
