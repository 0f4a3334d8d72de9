#!/usr/bin/python3
"""
A SIGHUP that reaches `sandgate serve` between the moment its listeners
accept and the moment its main loop handles signals (a reload sent as soon as
the port answers -- what a script or a sanitizer-slowed start makes likely)
is a reload, not the end of the gateway: serve holds SIGHUP from start-up and
takes it once proxy_run is ready (docs/architecture.md, start-up). Sent at the
first accepted connection, three times over, by a client polling as fast as
it can; the gateway must stay up, log the reload, and serve afterwards. The
gateway runs as a default install does (user: sandgate).
"""

import os
import signal
import socket
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


class NoResolver:
    """No name is resolved here; the config still wants an upstream."""
    addr = "127.0.0.1:9"


class EarlySighupTest(unittest.TestCase):
    def setUp(self):
        T.require_binary()
        self.td = T.TempDir("sgtest-hup-")
        self.addCleanup(self.td.cleanup)

    def first_accept(self, port, proc, timeout):
        """Poll the port without sleeping; True at the first accept."""
        deadline = time.time() + timeout
        while time.time() < deadline and proc.alive():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                pass
        return False

    def test_sighup_at_first_accept_is_a_reload(self):
        for round_ in range(3):
            tmp = self.td.join("r%d" % round_)
            os.makedirs(tmp)
            gw = T.Gateway(tmp, NoResolver(), {"p.yaml": {
                "sandboxes": [T.local_sandbox("p")],
                "policies": [{"name": "p", "allow": [{"host": "x.test"}]}]}},
                user="sandgate")
            gw.proc = T.Proc([T.BIN, "serve", "-c", gw.cfg_path],
                             gw.log_path, cwd=tmp, env=T.clean_env())
            self.addCleanup(gw.stop)
            self.assertTrue(self.first_accept(gw.port, gw.proc, 20 * T.SLOW),
                            gw.log_tail())
            os.kill(gw.proc.pid, signal.SIGHUP)
            m = gw.wait_log(r"reload: new policy in force", timeout=10)
            self.assertTrue(gw.alive(), "serve ended on an early SIGHUP "
                            "(status %s):\n%s" % (gw.proc.p.poll(), gw.log_tail()))
            self.assertIsNotNone(m, gw.log_tail())
            self.assertIn("SIGHUP: reloading", gw.log_text())
            # and it still answers as a proxy: a denial, with its reason
            r = T.curl("http://denied.test/", proxy=gw.url, tmp=tmp)
            self.assertEqual(r.status, 403, r)
            gw.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
