#!/usr/bin/python3
"""
End-to-end tests of `sandgate sandbox run` (SPEC §9) in both runtimes: a
real gateway with transparent and DNS listeners, an origin in a "fake
internet" network namespace on a 198.19.X.0/24 reached through a veth of the
test's own, and a sandboxed curl that gets an allowed name and is refused a
denied one. After every run no namespace, veth, nftables chain, address or
registration of the sandbox is left. Root only (exit 77 otherwise).
"""

import os
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from sbtest import (BODY, INET_HOST, INET_ORIGIN, RUNTIMES,  # noqa: E402
    SandboxWorld, launcher_lock, leftovers, sh, skip_unless_root)


class SandboxRunTest(SandboxWorld):
    def test_01_allowed_name(self):
        def one(rt):
            sid = "t-ok-" + rt
            r = self.run_sandbox(rt, sid, ["curl", "-s", "-m", "20",
                "http://allowed.test/"])
            self.assertEqual((r.returncode, r.stdout), (0, BODY),
                r.stderr + self.gw.log_tail())
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, host="allowed.test",
                decision="allow")
            self.assertTrue(rows, "no allow row for " + sid)
        self.each_runtime(one)

    def test_02_denied_name(self):
        def one(rt):
            sid = "t-deny-" + rt
            r = self.run_sandbox(rt, sid, ["curl", "-s", "-m", "20",
                "http://denied.test/"])
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertNotIn(BODY, r.stdout)
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, decision="deny")
            self.assertTrue(rows, "no deny row for " + sid)
            # The bare address, no name: no way around the gateway.
            sid = "t-ip-" + rt
            r = self.run_sandbox(rt, sid, ["curl", "-s", "-m", "20",
                "http://%s/" % INET_ORIGIN])
            self.assertNotIn(BODY, r.stdout)
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, decision="deny")
            self.assertTrue(rows, "no deny row for " + sid)
        self.each_runtime(one)

    def test_03_exit_status_and_env(self):
        def one(rt):
            sid = "t-env-" + rt
            r = self.run_sandbox(rt, sid, ["sh", "-c",
                'echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS"; '
                'cat /etc/resolv.conf; touch /usr/x 2>/dev/null && echo rw; '
                'echo tmp > /tmp/x && cat /tmp/x; exit 7'])
            self.assertEqual(r.returncode, 7, r.stderr)
            ca = "/etc/ssl/certs/ca-certificates.crt"
            self.assertIn("%s %s %s" % (ca, ca, ca), r.stdout)
            self.assertRegex(r.stdout, r"nameserver 198\.18\.\d+\.\d+")
            self.assertNotIn("rw", r.stdout.split())
            self.assertIn("tmp", r.stdout.split())
            self.check_clean(sid)
        self.each_runtime(one)

    def test_04_sigterm_cleans_up(self):
        def one(rt):
            sid = "t-term-" + rt
            p = self.start_run(rt, sid, ["sleep", "300"], subprocess.PIPE)
            try:
                p.send_signal(signal.SIGTERM)
                p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
            self.assertNotEqual(p.returncode, 0)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_06_sigkill_reconciled_by_next_launcher(self):
        def one(rt):
            sid = "t-kill-" + rt
            p = self.start_run(rt, sid, ["sleep", "300"])
            try:
                with launcher_lock():
                    p.kill()
                    p.wait(30)
                    # a launcher killed outright leaves its sandbox behind ...
                    self.assertNotEqual(leftovers(sid), [])
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            # ... until the next launcher starts
            r = self.run_sandbox(rt, "t-after-" + rt, ["true"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.check_clean(sid)
            self.check_clean("t-after-" + rt)
            lst = sh(RUNTIMES[rt], "--root", "/run/sandgate/" + rt, "list",
                check=False).stdout
            self.assertNotIn(sid, lst)
        self.each_runtime(one)

    def test_07_no_way_around(self):
        """UDP to the host's addresses and onward, and the metadata address."""
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("0.0.0.0", 0))
        udp.settimeout(0.5)
        self.addCleanup(udp.close)
        uport = udp.getsockname()[1]
        script = (
            "import socket\n"
            "for a in ('%s', '%s', '198.18.0.1', '127.0.0.1'):\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
            ".sendto(b'escape', (a, %d))\n"
            "try:\n"
            "    c = socket.create_connection(('169.254.169.254', 80), 10)\n"
            "    c.sendall(b'GET /latest/meta-data/ HTTP/1.0\\r\\n"
            "Host: 169.254.169.254\\r\\n\\r\\n')\n"
            "    print('META', c.recv(200))\n"
            "except Exception as e:\n"
            "    print('META-ERR', e)\n" % (INET_HOST, INET_ORIGIN, uport))

        def one(rt):
            sid = "t-esc-" + rt
            r = self.run_sandbox(rt, sid, ["python3", "-c", script])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("META", r.stdout)
            self.assertNotIn(" 200 ", r.stdout)
            got = []
            try:
                while True:
                    got.append(udp.recvfrom(100))
            except socket.timeout:
                pass
            self.assertEqual(got, [], "UDP got out of the sandbox")
            self.check_clean(sid)
            # (the transparent listener records the bare address as host)
            rows = self.gw.wait_audit(sandbox=sid, host="169.254.169.254",
                decision="deny")
            self.assertTrue(rows, "no deny row for the metadata address")
        self.each_runtime(one)

    def test_08_workspace_env_placeholder(self):
        ws = self.td.join("ws")
        os.makedirs(ws, exist_ok=True)
        with open(os.path.join(ws, "input.txt"), "w") as f:
            f.write("from the workspace\n")
        os.chmod(ws, 0o755)

        def one(rt):
            sid = "t-ws-" + rt
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", rt, "--id", sid,
                "--workspace", ws, "--env", "GREETING=hello world", "--",
                "sh", "-c", 'pwd; cat input.txt; echo "[$GREETING]"; '
                'echo "token=$GH_TOKEN"; echo "id=$SANDGATE_SANDBOX"; '
                'test -e /etc/shadow && echo host-etc; true', timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], "/workspace")
            self.assertIn("from the workspace", lines)
            self.assertIn("[hello world]", lines)
            self.assertIn("id=" + sid, lines)
            self.assertNotIn("host-etc", lines)
            tok = [l for l in lines if l.startswith("token=")]
            self.assertRegex(tok[0], r"^token=sg-ph-[a-z2-7]{32}$")
            self.check_clean(sid)
        self.each_runtime(one)

    def test_09_memory_limit(self):
        def one(rt):
            sid = "t-mem-" + rt
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", rt, "--id", sid,
                "--memory", "64M", "--", "python3", "-c",
                "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); "
                "print('allocated')", timeout=120)
            self.assertNotIn("allocated", r.stdout)
            self.assertNotEqual(r.returncode, 0)
            self.check_clean(sid)
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", rt, "--id", sid,
                "--memory", "512M", "--", "python3", "-c",
                "b = bytearray(100 << 20); print('allocated')", timeout=120)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "allocated"),
                r.stderr)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_10_usage_errors(self):
        for args in (["--", ], ["--runtime", "docker", "--", "true"],
                ["--id", "Bad_Id", "--", "true"], ["--memory", "lots", "--",
                "true"], ["--env", "1X=y", "--", "true"], ["--cpus", "0",
                "--", "true"]):
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path, *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)

    def test_05_gateway_not_running(self):
        cfg = os.path.join(self.td.path, "down.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: %s\nlisten:\n  admin: %s\n" % (
                self.td.join("down"), self.td.join("down", "none.sock")))
        r = T.run_sandgate("sandbox", "run", "-c", cfg, "--runtime", "crun",
            "--id", "t-down", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^sandgate: .*not running")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertEqual(leftovers("t-down"), [])


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
