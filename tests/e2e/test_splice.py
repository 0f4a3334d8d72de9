#!/usr/bin/python3
"""
End-to-end tests of tunnels relayed with splice(2) (issue 14, bulk through a
passthrough tunnel; src/exchange/proxy_relay.c): a TLS download of 96 MiB
through CONNECT and through SOCKS5, and an upload of 48 MiB, arrive intact
(SHA-256 of every byte) while the gateway's counter shows each tunnel moved
to splice; a tunnel that stays under 1 MiB keeps the ordinary relay; the
audit row of a spliced tunnel still counts every byte both ways; half-close
and the peer's reset still end the tunnel; and RSS stays bounded.
"""

import hashlib
import os
import socket
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

MIB = 1 << 20
ORIGIN_HOST = "127.0.0.2"


class SpliceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-splice-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.cert, key = T.make_cert(d, "tls.test")
        cls.origin = T.Origin("tls", ORIGIN_HOST, cert=cls.cert, key=key)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("tls.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.mport = T.free_port()
        cls.socks = T.free_port()
        policy = {"sandboxes": [T.local_sandbox("sp")],
                  "policies": [{"name": "sp",
                                "allow": [{"host": "tls.test",
                                           "ports": [cls.origin.port]}],
                                "allow_private": [ORIGIN_HOST + "/32"]}]}
        cls.gw = T.Gateway(d, cls.dns, {"sp.yaml": policy}, extra={
            "listen": {"metrics": "127.0.0.1:%d" % cls.mport,
                       "socks5": "127.0.0.1:%d" % cls.socks}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    def spliced(self):
        return T.metric(self.mport, "sandgate_tunnels_spliced_total",
                        self.td.path)

    def download(self, n, proxy_args):
        r = T.curl("https://tls.test:%d/bytes/%d" % (self.origin.port, n),
                   tmp=self.td.path, timeout=120,
                   args=["--cacert", self.cert] + proxy_args)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body), n)
        self.assertEqual(hashlib.sha256(r.body).hexdigest(),
                         T.pattern_sha256(n))
        return r

    def test_1_connect_download_spliced_and_intact(self):
        before = self.spliced()
        n = 96 * MIB + 12345
        self.download(n, ["--proxy", self.gw.url])
        self.assertEqual(self.spliced(), before + 1)
        rows = self.gw.wait_audit(kind="connect", host="tls.test",
            pred=lambda x: (x["bytes_down"] or 0) > n)
        self.assertTrue(rows, self.gw.audit_rows(host="tls.test"))
        self.assertLess(self.gw.rss_peak_kb(), 200 * 1024)

    def test_2_socks_download_spliced(self):
        before = self.spliced()
        n = 40 * MIB
        self.download(n, ["--proxy", "socks5h://127.0.0.1:%d" % self.socks])
        self.assertEqual(self.spliced(), before + 1)

    def test_3_upload_spliced_and_intact(self):
        before = self.spliced()
        n = 48 * MIB + 7
        body = os.path.join(self.td.path, "up.bin")
        data = (T.pattern_block() * (n // (256 * 1024) + 1))[:n]
        with open(body, "wb") as f:
            f.write(data)
        r = T.curl("https://tls.test:%d/upload" % self.origin.port,
                   proxy=self.gw.url, tmp=self.td.path, timeout=120,
                   args=["--cacert", self.cert, "--data-binary", "@" + body,
                         "-H", "Content-Type: application/octet-stream"])
        os.unlink(body)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["body_len"], n)
        self.assertEqual(doc["body_sha256"], hashlib.sha256(data).hexdigest())
        self.assertEqual(self.spliced(), before + 1)
        rows = self.gw.wait_audit(kind="connect", host="tls.test",
            pred=lambda x: (x["bytes_up"] or 0) > n)
        self.assertTrue(rows, self.gw.audit_rows(host="tls.test"))

    def test_4_small_tunnel_not_spliced(self):
        before = self.spliced()
        self.download(200 * 1024, ["--proxy", self.gw.url])
        self.assertEqual(self.spliced(), before)

    def test_5_client_reset_mid_transfer_ends_the_tunnel(self):
        """A client that vanishes after the switch: the gateway closes the
        tunnel (its row is written) and keeps serving."""
        before = self.spliced()
        c, resp = T.open_tunnel(self.gw.port, "tls.test:%d" % self.origin.port)
        self.assertEqual(resp.status, 200)
        ctx = ssl.create_default_context(cafile=self.cert)
        tls = ctx.wrap_socket(c.sock, server_hostname="tls.test")
        tls.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: tls.test\r\n\r\n"
                    % (512 * MIB))
        got = 0
        while got < 8 * MIB:
            b = tls.recv(1 << 16)
            if not b:
                break
            got += len(b)
        deadline = time.time() + 5 * T.SLOW
        while self.spliced() == before and time.time() < deadline:
            got += len(tls.recv(1 << 16))
        self.assertEqual(self.spliced(), before + 1)
        # a reset, not a goodbye
        tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                       b"\x01\x00\x00\x00\x00\x00\x00\x00")
        tls.close()
        rows = self.gw.wait_audit(timeout=10, kind="connect", host="tls.test",
            pred=lambda x: (x["bytes_down"] or 0) >= got and
            (x["bytes_down"] or 0) < 512 * MIB)
        self.assertTrue(rows, self.gw.audit_rows(host="tls.test"))
        self.download(300 * 1024, ["--proxy", self.gw.url])

    def test_9_alive(self):
        self.assertTrue(self.gw.alive(), self.gw.log_tail())


if __name__ == "__main__":
    T.main()
