#!/usr/bin/python3
"""
Where a sandboxed command's output lands (SPEC §9, docs/sandbox.md "Output"):
`{ echo A; sandgate sandbox run -- echo B; echo C; } > f` must leave A, B
and C in f, in that order, under runsc and crun, for `sandbox run` and
`sandbox exec`, for stdout and stderr, with `>` and `>>`. gVisor writes a
regular file it is handed at its own offset (0), so the launcher must not
hand it one. The attacker's variants: both streams into one file
(`> f 2>&1`, order kept), output larger than a pipe's buffer, and a file the
shell has already written into and keeps writing after the sandbox. A pipe
still works. Root only (exit 77 otherwise). The gateway runs as a default
install does (user sandgate).
"""

import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from sbtest import SandboxWorld, skip_unless_root  # noqa: E402

BIG = 300000  # bytes: several pipe buffers' worth


class SandboxStdioTest(SandboxWorld):
    USER = "sandgate"

    def shell(self, script, cwd):
        """Run script under bash with $SG (the binary) and $CFG set."""
        env = T.clean_env(SG=T.BIN, CFG=self.gw.cfg_path)
        r = subprocess.run(["/bin/bash", "-c", script], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=180 * T.SLOW)
        self.assertEqual(r.returncode, 0, "script failed: %s\n%s%s" % (
            script, r.stdout, r.stderr + self.gw.log_tail()))
        return r

    def workdir(self, name):
        d = self.td.join(name)
        os.makedirs(d, exist_ok=True)
        return d

    @staticmethod
    def read(d, name):
        with open(os.path.join(d, name)) as f:
            return f.read()

    def launch(self, mode, rt, sid):
        """The shell words that run a command in a sandbox: a fresh one
        (run) or the live sandbox sid (exec)."""
        if mode == "run":
            return ('"$SG" sandbox run -c "$CFG" --policy web --runtime %s '
                '--id %s --' % (rt, sid))
        return '"$SG" sandbox exec -c "$CFG" %s --' % sid

    def each_mode(self, fn):
        """fn(mode, rt, sid) for run and for exec, in every runtime."""
        def one(rt):
            fn("run", rt, "t-io-run-" + rt)
            self.check_clean("t-io-run-" + rt)
            sid = "t-io-exec-" + rt
            r = self.sandgate("sandbox", "create", "--policy", "web",
                "--runtime", rt, "--id", sid, "--", "sleep", "600")
            self.assertEqual(r.returncode, 0, r.stderr + self.gw.log_tail())
            try:
                fn("exec", rt, sid)
            finally:
                self.sandgate("sandbox", "rm", sid)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_01_truncate_keeps_earlier_lines(self):
        """`> f` and `2> g`: what the shell wrote before stays, and what it
        writes after follows the sandbox's lines."""
        def one(mode, rt, sid):
            d = self.workdir("trunc-%s-%s" % (mode, rt))
            with open(os.path.join(d, "out"), "w") as f:
                f.write("stale content that > must truncate\n")
            self.shell("{ echo A; echo a >&2; %s sh -c 'echo B; echo b >&2'; "
                "echo C; echo c >&2; } > out 2> err" % self.launch(mode, rt,
                sid), d)
            self.assertEqual(self.read(d, "out"), "A\nB\nC\n", (mode, rt))
            self.assertEqual(self.read(d, "err"), "a\nb\nc\n", (mode, rt))
        self.each_mode(one)

    def test_02_append_keeps_earlier_content(self):
        """`>> f` and `2>> g` onto files that already hold lines."""
        def one(mode, rt, sid):
            d = self.workdir("append-%s-%s" % (mode, rt))
            for name, first in (("out", "0\n"), ("err", "z\n")):
                with open(os.path.join(d, name), "w") as f:
                    f.write(first)
            self.shell("{ echo A; echo a >&2; %s sh -c 'echo B; echo b >&2'; "
                "echo C; echo c >&2; } >> out 2>> err" % self.launch(mode, rt,
                sid), d)
            self.assertEqual(self.read(d, "out"), "0\nA\nB\nC\n", (mode, rt))
            self.assertEqual(self.read(d, "err"), "z\na\nb\nc\n", (mode, rt))
        self.each_mode(one)

    def test_03_one_file_for_both_streams_keeps_order(self):
        """`> f 2>&1`: one open file for both streams; the sandbox's
        alternating stdout and stderr lines keep their order."""
        inner = "for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; done"

        def one(mode, rt, sid):
            d = self.workdir("both-%s-%s" % (mode, rt))
            self.shell("{ echo A; %s sh -c '%s'; echo C; } > out 2>&1" % (
                self.launch(mode, rt, sid), inner), d)
            want = "A\n" + "".join("o%d\ne%d\n" % (i, i)
                for i in range(1, 6)) + "C\n"
            self.assertEqual(self.read(d, "out"), want, (mode, rt))
        self.each_mode(one)

    def test_04_large_output_after_a_partial_line(self):
        """More than a pipe buffer holds, after the shell left the offset in
        the middle of a line: every byte, in place, nothing overwritten."""
        def one(mode, rt, sid):
            d = self.workdir("big-%s-%s" % (mode, rt))
            self.shell("{ printf 'head:'; %s python3 -c \"import sys; "
                "sys.stdout.write('x' * %d + '\\\\n'); "
                "sys.stderr.write('y' * %d)\"; echo tail; } > out 2> err" % (
                self.launch(mode, rt, sid), BIG, BIG), d)
            self.assertEqual(self.read(d, "out"), "head:" + "x" * BIG +
                "\ntail\n", (mode, rt))
            self.assertEqual(self.read(d, "err"), "y" * BIG, (mode, rt))
        self.each_mode(one)

    def test_05_pipe_still_works(self):
        """Output through a pipe, and the command's status through it."""
        def one(mode, rt, sid):
            d = self.workdir("pipe-%s-%s" % (mode, rt))
            r = self.shell("set -o pipefail; { echo A; %s sh -c 'echo B; "
                "echo b >&2; exit 3'; echo \"st=$?\"; } 2>&1 | cat > out" %
                self.launch(mode, rt, sid), d)
            self.assertEqual(self.read(d, "out"), "A\nB\nb\nst=3\n",
                (mode, rt, r.stderr))
        self.each_mode(one)


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
