#!/usr/bin/python3
"""
Faults the gateway must survive or refuse clearly (issue 13, point 7, the
parts that stand without the key keeper): an upstream resolver that never
answers ends in a 504 within upstream.connect_timeout while other requests
go on; a corrupt vault.db, audit.db or state.db stops the command with one
line that names the file, and exit 1.
"""

import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


class SilentResolver:
    """UDP and TCP on one port that take queries and never answer."""

    def __init__(self):
        # A free UDP port may be a TCP port in use: try again until both bind.
        for _ in range(50):
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind(("127.0.0.1", 0))
            self.port = self.udp.getsockname()[1]
            self.tcp = socket.socket()
            self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                self.tcp.bind(("127.0.0.1", self.port))
                break
            except OSError:
                self.udp.close()
                self.tcp.close()
        else:
            raise RuntimeError("no port free for both UDP and TCP")
        self.tcp.listen(8)
        self.addr = "127.0.0.1:%d" % self.port
        self.queries = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        self.udp.settimeout(0.1)
        while not self.stopping:
            try:
                self.udp.recvfrom(4096)
                self.queries += 1
            except socket.timeout:
                continue
            except OSError:
                return

    def stop(self):
        self.stopping = True
        self.thread.join(2)
        self.udp.close()
        self.tcp.close()


class SilentDnsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-faults-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.dns = SilentResolver()
        cls.addClassCleanup(cls.dns.stop)
        cls.origin = T.Origin("origin", host="127.0.0.2")
        cls.addClassCleanup(cls.origin.stop)
        policy = {"sandboxes": [T.local_sandbox("local")],
                  "policies": [{"name": "local",
                                "allow": [{"host": "silent.test"},
                                          {"cidr": "127.0.0.2/32",
                                           "ports": [cls.origin.port]}],
                                "allow_private": ["127.0.0.2/32"]}]}
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy},
            extra={"upstream": {"resolvers": [cls.dns.addr],
                                "connect_timeout": "2s"}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    def fetch(self, url, out, key):
        t0 = time.monotonic()
        r = T.curl(url, proxy=self.gw.url, timeout=30, tmp=self.td.path)
        out[key] = (r, time.monotonic() - t0)

    def test_silent_resolver_is_504_within_connect_timeout(self):
        out = {}
        slow = threading.Thread(target=self.fetch,
            args=("http://silent.test/never", out, "silent"))
        slow.start()
        # meanwhile an address literal goes through: nothing waits on DNS
        time.sleep(0.3)
        self.fetch("http://127.0.0.2:%d/meanwhile" % self.origin.port, out,
            "other")
        slow.join(30)
        r, dt = out["silent"]
        self.assertEqual(r.status, 504, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "dns-error", r)
        # connect_timeout is 2 s; c-ares alone would take 6 s and more
        self.assertLess(dt, 2.0 + 2.5 * T.SLOW, dt)
        o, odt = out["other"]
        self.assertEqual(o.status, 200, o)
        self.assertLess(odt, dt, (odt, dt))
        self.assertGreater(self.dns.queries, 0)
        rows = self.gw.wait_audit(host="silent.test", reason="dns-error")
        self.assertTrue(rows)
        self.assertEqual((rows[-1]["decision"], rows[-1]["status"]),
            ("error", 504), rows[-1])

    def test_silent_resolver_socks_and_again(self):
        # a second lookup of the same silent name is bounded the same way
        t0 = time.monotonic()
        r = T.curl("http://silent.test/twice", proxy=self.gw.url, timeout=30,
            tmp=self.td.path)
        self.assertEqual(r.status, 504, r)
        self.assertLess(time.monotonic() - t0, 2.0 + 2.5 * T.SLOW)


class CorruptFilesTest(unittest.TestCase):

    def setUp(self):
        self.td = T.TempDir("sgtest-corrupt-")
        self.addCleanup(self.td.cleanup)
        self.var = self.td.join("var")
        os.makedirs(self.var)
        self.cfg = self.td.join("sg.yaml")
        with open(self.cfg, "w") as f:
            f.write("state_dir: %s\nlisten: {http: 127.0.0.1:%d, socks5: null, "
                "dns: null, transparent: null, ingress: null, metrics: null, "
                "admin: null}\npolicies: []\nca: {cert: %s, key: %s}\n" % (
                self.var, T.free_port(), self.td.join("ca.crt"),
                self.td.join("ca.key")))

    def garbage(self, name):
        with open(os.path.join(self.var, name), "wb") as f:
            f.write(b"SQLite format 3\0" + os.urandom(4000))

    def serve(self):
        r = subprocess.run([T.BIN, "serve", "-c", self.cfg],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=T.clean_env(), timeout=20 * T.SLOW)
        lines = [l for l in r.stderr.decode().splitlines()
                 if l.startswith("sandgate: ")]
        return r.returncode, lines

    def test_corrupt_vault_db(self):
        self.garbage("vault.db")
        rc, lines = self.serve()
        self.assertEqual(rc, 1)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("vault.db", lines[0])

    def test_corrupt_audit_db(self):
        self.garbage("audit.db")
        rc, lines = self.serve()
        self.assertEqual(rc, 1)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("audit.db", lines[0])

    def test_corrupt_state_db(self):
        if os.geteuid() != 0:
            self.skipTest("sandbox commands need root")
        self.garbage("state.db")
        r = subprocess.run([T.BIN, "sandbox", "ls", "-c", self.cfg],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=T.clean_env(), timeout=20 * T.SLOW)
        self.assertEqual(r.returncode, 1)
        lines = r.stderr.decode().strip().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("sandgate: "), lines)
        self.assertIn("state.db", lines[0])


if __name__ == "__main__":
    T.main()
