#!/usr/bin/python3
"""
End-to-end tests of streaming (SPEC §5): large bodies pass through CONNECT
tunnels and absolute-form requests intact, and the gateway's peak memory
(VmHWM) stays bounded, also when the client stops reading for a while.
Each request's audit row counts exactly the bytes that went through. The
gateway runs as a default install runs it (user sandgate, seccomp, keeper;
issue 22), and no system call of its processes is refused. The SHA-256 of
64 MiB each way through every relay path is test_big_relay.py's and
test_big_transparent.py's.
"""

import hashlib
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402
import bigflow as B  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
# ASan's shadow memory and quarantine inflate every allocation.
RSS_LIMIT_KB = (512 if T.ASAN else 128) * 1024


class BigDownloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.a = T.Origin("origin-a", host="127.0.0.2")
        cls.addClassCleanup(cls.a.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        policy = {"sandboxes": [T.local_sandbox("big")],
                  "policies": [{"name": "big",
                                "allow": [{"host": "allowed.test",
                                           "ports": [cls.a.port]}],
                                "allow_private": ["127.0.0.2/32"]}]}
        # A default install: the drop to the sandgate user, seccomp, keeper.
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"big.yaml": policy},
                           user="sandgate")
        t0 = B.uptime()
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not cls.gw.wait_log(r"sandgate info: ready$", timeout=10):
            raise AssertionError("no ready line:\n" + cls.gw.log_tail())
        cls.conf = B.Confinement(cls.gw, t0)

    def setUp(self):
        self.audit = AC.Audit(self, self.gw)
        self.conf.mark()
        self.addCleanup(self.conf.check, self)

    def test_0_confined(self):
        self.conf.assert_confined(self)

    def allowed(self, client, kind, method, path, down):
        """
        The allow row of one request (absolute form, or inside a tunnel),
        found by client, method and path (client None: any loopback one).
        """
        want = dict(decision="allow", kind=kind, sandbox="local",
                    host="allowed.test", ip="127.0.0.2", port=self.a.port,
                    status=200, rule="big:allow[0]", reason=None,
                    credential=None, bytes_up=0, bytes_down=down)
        where = {"path": path, "method": method}
        if client is None:
            want["client"] = AC.LOOPBACK_CLIENT
        else:
            where["client"] = client
        self.audit.expect(where, **want)

    def assertRssBounded(self, what):
        peak = self.gw.rss_peak_kb()
        print("  %s: sandgate VmHWM %d kB (limit %d kB)" % (what, peak, RSS_LIMIT_KB))
        self.assertLess(peak, RSS_LIMIT_KB, "%s: VmHWM %d kB" % (what, peak))

    def test_connect_1gib(self):
        t = time.time()
        r = T.curl("http://allowed.test:%d/bytes/%d" % (self.a.port, GIB),
                   proxy=self.gw.url, args=["-p"], timeout=300, discard_body=True)
        dt = time.time() - t
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.info.get("size_download"), GIB, r)
        print("  1 GiB through CONNECT in %.1f s" % dt)
        self.assertRssBounded("1 GiB CONNECT")
        # plain HTTP in the tunnel: one row for the request, every byte counted
        path = "/bytes/%d" % GIB
        self.allowed(AC.client_of_curl(r), "connect", "GET", path, GIB)
        self.audit.check()

    def test_absolute_form_100mib_intact(self):
        n = 100 * MIB
        with T.session(self.gw.url) as s:
            resp = s.get("http://allowed.test:%d/bytes/%d" % (self.a.port, n),
                         stream=True, timeout=60 * T.SLOW)
            self.assertEqual(resp.status_code, 200)
            h = hashlib.sha256()
            got = 0
            for chunk in resp.iter_content(256 * 1024):
                h.update(chunk)
                got += len(chunk)
        self.assertEqual(got, n)
        self.assertEqual(h.hexdigest(), T.pattern_sha256(n))
        self.assertRssBounded("100 MiB absolute-form")
        path = "/bytes/%d" % n
        self.allowed(None, "http", "GET", path, n)
        self.audit.check()

    def stalled_read(self, conn, n):
        """Read 1 MiB, stop reading for 3 s, then drain; returns bytes read."""
        got = 0
        sent0 = self.a.bytes_sent
        while got < MIB:
            got += len(conn.read_some())
        time.sleep(3)
        # Backpressure: while nobody read, the origin could write only what
        # the socket buffers and the gateway's bounded buffers hold.
        during = self.a.bytes_sent - sent0
        print("  origin wrote %d MiB while the client read %d MiB" % (during >> 20, got >> 20))
        self.assertLess(during, 64 * MIB, "gateway kept reading from the origin "
                        "while the client did not read")
        conn.sock.settimeout(60 * T.SLOW)
        while got < n:
            b = conn.sock.recv(1 << 20)
            if not b:
                break
            got += len(b)
        return got

    def test_stalled_reader_connect(self):
        n = 384 * MIB
        c, r = T.open_tunnel(self.gw.port, "allowed.test:%d" % self.a.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        resp_head = c.request("HEAD /bytes/%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                              % (n, self.a.port), method="HEAD")
        self.assertEqual(resp_head.status, 200)
        c.send("GET /bytes/%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (n, self.a.port))
        head = c.read_until(b"\r\n\r\n")
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        got = self.stalled_read(c, n)
        self.assertEqual(got, n)
        self.assertRssBounded("stalled reader, CONNECT")
        path = "/bytes/%d" % n
        self.allowed(AC.client_of_conn(c), "connect", "HEAD", path, 0)
        self.allowed(AC.client_of_conn(c), "connect", "GET", path, n)
        self.audit.check()

    def test_stalled_reader_absolute_form(self):
        n = 384 * MIB
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        c.send("GET http://allowed.test:%d/bytes/%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
               % (self.a.port, n, self.a.port))
        head = c.read_until(b"\r\n\r\n")
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        got = self.stalled_read(c, n)
        self.assertEqual(got, n)
        self.assertRssBounded("stalled reader, absolute-form")
        self.allowed(AC.client_of_conn(c), "http", "GET", "/bytes/%d" % n, n)
        self.audit.check()


if __name__ == "__main__":
    T.main()
