#!/usr/bin/python3
"""
Bulk data through intercepted TLS (SPEC §6; issue 4's fast path, where the
gateway drives both sockets under its TLS filters itself): large bodies
arrive intact both ways, many kept-alive requests on one connection all
succeed, and a client that stops reading holds the origin back instead of
making the gateway buffer the whole response.
"""
import hashlib
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
BIG = 24 << 20            # body size for the integrity tests
HUGE = 96 << 20           # response a stalled client never reads

POLICY = """\
sandboxes:
  - id: bulk-box
    policy: bulk
    source: [127.0.0.1/32]
policies:
  - name: bulk
    allow:
      - host: bulk.test
        ports: [{port}]
        tls: intercept
        methods: [GET, POST]
        paths: ["/bytes/*", "/upload"]
    allow_private: [{origin}/32]
"""


class InterceptBulkTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        T.require_binary()
        cls.td = T.TempDir("sgtest-bulk-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cert, key = T.make_cert(d, "bulk.test")
        cls.origin = T.Origin("bulk", ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("bulk.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"bulk.yaml": POLICY.format(
            port=cls.origin.port, origin=ORIGIN_HOST)},
            extra={"upstream": {"ca_bundle": cert}}, workers=1)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()

    def tls_conn(self):
        c, r = T.open_tunnel(self.gw.port, "bulk.test:%d" % self.origin.port,
            timeout=30)
        self.addCleanup(c.sock.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="bulk.test")
        return c

    def get(self, c, path):
        c.send("GET %s HTTP/1.1\r\nHost: bulk.test:%d\r\n\r\n" %
            (path, self.origin.port))
        return c.read_response("GET")

    def rss_kb(self):
        with open("/proc/%d/status" % self.gw.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def sanitized(self):
        with open("/proc/%d/maps" % self.gw.proc.pid) as f:
            return T.ASAN or "libasan" in f.read()

    def test_a_stalled_reader_holds_the_origin_back(self):
        # Runs first (name order): the gateway's memory is still small.
        rss0 = self.rss_kb()
        sent0 = self.origin.bytes_sent
        c = self.tls_conn()
        c.send("GET /bytes/%d HTTP/1.1\r\nHost: bulk.test:%d\r\n\r\n" %
            (HUGE, self.origin.port))
        c.read_until(b"\r\n\r\n")
        time.sleep(3 * T.SLOW)
        stalled = self.origin.bytes_sent - sent0
        grown = self.rss_kb() - rss0
        # Socket buffers on two loopback hops hold some MiB; the gateway's
        # own buffers are bounded at a few hundred KiB per direction.
        self.assertLess(stalled, 40 << 20,
            "the origin sent %d bytes to a client that reads nothing" % stalled)
        if not self.sanitized():	# ASan's quarantine keeps freed buffers
            self.assertLess(grown, 24 << 10,
                "the gateway grew by %d KiB for a stalled client" % grown)
        # Reading again drains everything, intact.
        h = hashlib.sha256()
        n = 0
        while n < HUGE:
            b = c.read_some()
            h.update(b)
            n += len(b)
        self.assertEqual(n, HUGE)
        self.assertEqual(h.hexdigest(), T.pattern_sha256(HUGE))

    def test_big_download_intact(self):
        r = T.curl("https://bulk.test:%d/bytes/%d" % (self.origin.port, BIG),
            proxy=self.gw.url, args=["--cacert", self.gw_ca], timeout=60,
            tmp=self.td.path)
        self.assertEqual((r.rc, r.status), (0, 200), r.stderr)
        self.assertEqual(len(r.body), BIG)
        self.assertEqual(hashlib.sha256(r.body).hexdigest(),
            T.pattern_sha256(BIG))

    def test_big_upload_intact(self):
        body = os.path.join(self.td.path, "upload.bin")
        with open(body, "wb") as f:
            f.write(os.urandom(BIG))
        with open(body, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        r = T.curl("https://bulk.test:%d/upload" % self.origin.port,
            proxy=self.gw.url, args=["--cacert", self.gw_ca,
            "--data-binary", "@" + body], timeout=60, tmp=self.td.path)
        self.assertEqual((r.rc, r.status), (0, 200), r.stderr)
        doc = r.json()
        self.assertEqual((doc["body_len"], doc["body_sha256"]), (BIG, want))

    def test_many_requests_one_connection(self):
        c = self.tls_conn()
        conns = self.origin.conn_count
        for i in range(300):
            r = self.get(c, "/bytes/%d" % (i * 37 % 5000))
            self.assertEqual(r.status, 200)
            self.assertEqual(len(r.body), i * 37 % 5000)
        # One origin connection served them all.
        self.assertLessEqual(self.origin.conn_count, conns + 1)
        # Every request is its own audit row (the writer is asynchronous).
        deadline = time.time() + 10 * T.SLOW
        while True:
            rows = [x for x in self.gw.audit_rows(decision="allow")
                if (x["path"] or "").startswith("/bytes/") and
                x["status"] == 200]
            if len(rows) >= 300 or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertGreaterEqual(len(rows), 300)


if __name__ == "__main__":
    T.main()
