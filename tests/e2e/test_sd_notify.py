#!/usr/bin/python3
"""
`sandgate serve` under a service manager (systemd Type=notify, sd_notify(3)):
a unix datagram socket stands in for systemd's and is passed as
NOTIFY_SOCKET. READY=1 comes once the listeners accept, RELOADING=1 and
READY=1 frame a SIGHUP reload, STOPPING=1 comes on SIGTERM. The gateway runs
as a default install does (the harness's default user, sandgate): started
as root it drops to that user first, as the packaged service does, so the
message is sent by the confined process. Only when the harness is told to
keep it root (SANDGATE_TEST_USER=none, gw.user None: a machine without the
sandgate user) does it stay root, and then the check that READY=1 came from
the dropped process is skipped, there being none.
"""

import os
import pwd
import signal
import socket
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


class NoResolver:
    """No name is ever resolved here; the config still wants an upstream."""
    addr = "127.0.0.1:9"


class NotifySocket:
    """systemd's end: a datagram socket anyone may write to, as systemd's is."""

    def __init__(self, path):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        os.chmod(path, 0o777)
        self.s.settimeout(20 * T.SLOW)

    def recv(self):
        """One message as {KEY: VALUE}; raises socket.timeout after 20 s."""
        data = self.s.recv(4096).decode()
        return dict(l.split("=", 1) for l in data.split("\n") if "=" in l)

    def close(self):
        self.s.close()


class SdNotifyTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir()
        self.addCleanup(self.td.cleanup)
        self.gw = T.Gateway(self.td.path, NoResolver(), {})
        self.user = self.gw.user
        self.sock = NotifySocket(self.td.join("notify.sock"))
        self.addCleanup(self.sock.close)
        if self.user is not None:
            T.open_to_others(self.td.path)

    def start(self, notify_socket):
        self.gw.proc = T.Proc([T.BIN, "serve", "-c", self.gw.cfg_path],
            self.gw.log_path, cwd=self.td.path,
            env=T.clean_env(NOTIFY_SOCKET=notify_socket))
        self.addCleanup(self.gw.stop)

    def recv(self):
        try:
            return self.sock.recv()
        except socket.timeout:
            self.fail("no sd_notify message within 20 s; log tail:\n" +
                      self.gw.log_tail())

    def exit_status(self):
        """After SIGTERM: its exit status; the harness forgets the process."""
        rc = self.gw.proc.p.wait(20 * T.SLOW)
        self.gw.log = self.gw.proc.log_text()
        self.gw.proc.stop()
        self.gw.proc = None
        return rc

    def accepts(self):
        c = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        c.close()
        return True

    def test_ready_reload_stopping(self):
        self.start(self.sock.path)
        m = self.recv()
        self.assertEqual(m.get("READY"), "1", m)
        # READY=1 means every listener is bound: a connect succeeds at once.
        self.assertTrue(self.accepts())
        self.assertIn("serving", m.get("STATUS", ""), m)
        if self.user is not None and os.geteuid() == 0:
            st = T.proc_status(self.gw.proc.pid)
            self.assertEqual(st["Uid"].split()[0],
                             str(pwd.getpwnam(self.user).pw_uid),
                             "READY=1 must come from the dropped process")
        os.kill(self.gw.proc.pid, signal.SIGHUP)
        m = self.recv()
        self.assertEqual(m.get("RELOADING"), "1", m)
        self.assertRegex(m.get("MONOTONIC_USEC", ""), r"^\d+$", m)
        m = self.recv()
        self.assertEqual(m.get("READY"), "1", m)
        self.assertTrue(self.gw.wait_log(r"reload: new policy in force"))
        os.kill(self.gw.proc.pid, signal.SIGTERM)
        m = self.recv()
        self.assertEqual(m.get("STOPPING"), "1", m)
        self.assertEqual(self.exit_status(), 0, self.gw.log_tail())

    def test_bad_reload_still_ready(self):
        """A reload that fails keeps the old policy; systemd must not hang in 'reloading'."""
        self.start(self.sock.path)
        self.assertEqual(self.recv().get("READY"), "1")
        self.gw.write_policy("broken.yaml", "policies: [\n")
        os.kill(self.gw.proc.pid, signal.SIGHUP)
        self.assertEqual(self.recv().get("RELOADING"), "1")
        self.assertEqual(self.recv().get("READY"), "1")
        self.assertTrue(self.gw.wait_log(r"reload failed"))
        self.assertTrue(self.accepts())

    def test_unreachable_socket_is_not_fatal(self):
        """A NOTIFY_SOCKET nobody listens on: logged once, the gateway serves."""
        self.start(self.td.join("nobody-here.sock"))
        self.assertTrue(T.wait_tcp("127.0.0.1", self.gw.port, 10 * T.SLOW,
                                   self.gw.proc), self.gw.log_tail())
        self.assertTrue(self.gw.wait_log(r"sd_notify: cannot tell the service "
                                         r"manager \"READY=1\""), self.gw.log_tail())
        os.kill(self.gw.proc.pid, signal.SIGTERM)
        self.assertEqual(self.exit_status(), 0, self.gw.log_tail())
        self.assertEqual(self.gw.log.count("sd_notify: cannot"), 1)


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
