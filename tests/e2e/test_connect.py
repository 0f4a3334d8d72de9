#!/usr/bin/python3
"""
End-to-end tests of CONNECT tunnels (SPEC §4 "Every tunnel ... is classified
by its first bytes", §5): HTTP inside a tunnel, TLS passthrough with SNI
checks, refused non-TLS bytes, opaque rules, IP-literal tunnels, denials, and
Python requests through an HTTPS_PROXY-style tunnel.
"""

import os
import ssl
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


class ConnectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.cert, cls.key = T.make_cert(cls.td.path, "allowed.test")
        cls.a = T.Origin("origin-a", host="127.0.0.2")
        cls.addClassCleanup(cls.a.stop)
        cls.b = T.Origin("origin-b", host="127.0.0.3")
        cls.addClassCleanup(cls.b.stop)
        cls.tls = T.Origin("origin-tls", host="127.0.0.2", cert=cls.cert, key=cls.key)
        cls.addClassCleanup(cls.tls.stop)
        cls.rec = T.RawServer("127.0.0.2", mode="record")
        cls.addClassCleanup(cls.rec.stop)
        cls.echo = T.RawServer("127.0.0.2", mode="echo")
        cls.addClassCleanup(cls.echo.stop)
        cls.banner = T.RawServer("127.0.0.2", mode="banner", banner=b"SSH-2.0-origin\r\n")
        cls.addClassCleanup(cls.banner.stop)
        cls.banner2 = T.RawServer("127.0.0.2", mode="banner", banner=b"SSH-2.0-origin\r\n")
        cls.addClassCleanup(cls.banner2.stop)
        recs = [(n, "127.0.0.2") for n in
                ("allowed.test", "ssh.test", "denied.test", "other.test")]
        recs.append(("internal.test", "127.0.0.3"))
        cls.dns = T.Dnsmasq(cls.td.path, recs)
        cls.addClassCleanup(cls.dns.stop)
        policy = {
            "sandboxes": [T.local_sandbox("tun")],
            "policies": [{
                "name": "tun",
                "allow": [
                    {"host": "allowed.test",                     # allow[0]
                     "ports": [cls.a.port, cls.tls.port, cls.rec.port,
                               cls.banner2.port]},
                    {"host": "ssh.test", "ports": [cls.echo.port, cls.banner.port],
                     "opaque": True},                            # allow[1]
                    {"cidr": "127.0.0.2/32", "ports": [cls.a.port]},   # allow[2]
                    {"host": "internal.test", "ports": [cls.b.port]},  # allow[3]
                ],
                "deny": [{"host": "denied.test"}],
                "allow_private": ["127.0.0.2/32"],
            }],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"tun.yaml": policy})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    def curl(self, url, args=()):
        return T.curl(url, proxy=self.gw.url, args=["-p"] + list(args),
                      tmp=self.td.path)

    def tunnel(self, target, **kw):
        c, r = T.open_tunnel(self.gw.port, target, **kw)
        self.addCleanup(c.close)
        return c, r

    # -------------------------------------------------------------- HTTP inside

    def test_http_inside_tunnel(self):
        r = self.curl("http://allowed.test:%d/in-tunnel" % self.a.port)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.info.get("http_connect"), 200, r)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["origin"], "origin-a")
        self.assertEqual(doc["path"], "/in-tunnel")
        self.assertEqual(doc["host"], "allowed.test:%d" % self.a.port)

    def test_http_inside_tunnel_keepalive(self):
        pa = self.a.port
        c, r = self.tunnel("allowed.test:%d" % pa)
        self.assertEqual(r.status, 200, r)
        for i in range(3):
            resp = c.request("GET /ka-%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (i, pa))
            self.assertEqual(resp.status, 200, resp)
            self.assertEqual(resp.json()["path"], "/ka-%d" % i)

    def test_http_inside_tunnel_host_mismatch(self):
        pa = self.a.port
        c, r = self.tunnel("allowed.test:%d" % pa)
        self.assertEqual(r.status, 200, r)
        before = self.a.conn_count
        c.send("GET /mismatch-host HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % pa)
        try:
            resp = c.read_response()
        except (EOFError, ConnectionResetError):
            resp = None
        self.assertIsNotNone(resp, "tunnel closed without a 403")
        self.assertEqual(resp.status, 403, resp)
        self.assertFalse(self.a.saw_path("/mismatch-host"))
        self.assertEqual(self.a.conn_count, before)

    def test_bytes_sent_with_the_connect(self):
        # a client may send its first bytes in the same write as the CONNECT
        pa = self.a.port
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        c.send("CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
               "GET /eager HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (pa, pa, pa))
        r = c.read_response("CONNECT")
        self.assertEqual(r.status, 200, r)
        resp = c.read_response()
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.json()["path"], "/eager")

    def test_connect_bad_target(self):
        for target in ("allowed.test", "allowed.test:", "allowed.test:99999",
                       "allowed.test:%d/x" % self.a.port):
            with self.subTest(target=target):
                c, r = self.tunnel(target)
                self.assertEqual(r.status, 400, r)

    # -------------------------------------------------------------- TLS

    def test_tls_passthrough_curl(self):
        r = self.curl("https://allowed.test:%d/tls-curl" % self.tls.port,
                      args=["--cacert", self.cert])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.info.get("ssl_verify_result"), 0, r)
        doc = r.json()
        self.assertEqual(doc["origin"], "origin-tls")
        self.assertEqual(doc["path"], "/tls-curl")

    def test_tls_passthrough_python(self):
        c, r = self.tunnel("allowed.test:%d" % self.tls.port)
        self.assertEqual(r.status, 200, r)
        ctx = ssl.create_default_context(cafile=self.cert)
        s = ctx.wrap_socket(c.sock, server_hostname="allowed.test")
        try:
            # the certificate the origin itself holds, not a minted one
            der = s.getpeercert(binary_form=True)
            with open(self.cert) as f:
                self.assertEqual(der, ssl.PEM_cert_to_DER_cert(f.read()))
            s.sendall(b"GET /tls-py HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        finally:
            s.close()
        self.assertIn(b"200 OK", data.split(b"\r\n")[0])
        self.assertIn(b'"/tls-py"', data)

    def test_tls_sni_mismatch_refused(self):
        before = self.tls.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.tls.port)
        self.assertEqual(r.status, 200, r)
        ctx = ssl.create_default_context(cafile=self.cert)
        ctx.check_hostname = False
        with self.assertRaises(ssl.SSLError) as cm:
            s = ctx.wrap_socket(c.sock, server_hostname="other.test")
            s.close()
        self.assertIn("ACCESS_DENIED", str(cm.exception).upper().replace(" ", "_"))
        time.sleep(0.3)
        self.assertEqual(self.tls.conn_count, before)

    def test_tls_sni_mismatch_openssl(self):
        before = self.tls.conn_count
        r = subprocess.run(
            [T.OPENSSL, "s_client", "-proxy", "127.0.0.1:%d" % self.gw.port,
             "-connect", "allowed.test:%d" % self.tls.port,
             "-servername", "other.test", "-CAfile", self.cert],
            input=b"", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=T.clean_env(), timeout=20 * T.SLOW)
        out = r.stdout.decode("utf-8", "replace")
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn("access denied", out.lower())
        self.assertNotIn("BEGIN CERTIFICATE", out)
        time.sleep(0.3)
        self.assertEqual(self.tls.conn_count, before)

    def test_tls_without_sni_refused(self):
        before = self.tls.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.tls.port)
        self.assertEqual(r.status, 200, r)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with self.assertRaises((ssl.SSLError, OSError)):
            s = ctx.wrap_socket(c.sock, server_hostname=None)
            s.close()
        time.sleep(0.3)
        self.assertEqual(self.tls.conn_count, before)

    # -------------------------------------------------------------- other bytes

    def test_raw_bytes_refused(self):
        before = self.rec.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.rec.port)
        self.assertEqual(r.status, 200, r)
        c.send(b"SSH-2.0-x\r\n")
        self.assertTrue(c.closed_by_peer(10), "tunnel not closed after refused bytes")
        time.sleep(0.3)
        self.assertEqual(self.rec.conn_count, before)

    def test_server_speaks_first_without_opaque_refused(self):
        # nothing from the client for 5 s: treated as opaque, and the rule is not
        before = self.banner2.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.banner2.port, timeout=20)
        self.assertEqual(r.status, 200, r)
        t = time.time()
        self.assertTrue(c.closed_by_peer(15), "silent tunnel never closed")
        self.assertGreaterEqual(time.time() - t, 4.0)
        self.assertEqual(self.banner2.conn_count, before)

    def test_opaque_rule_passes_raw_bytes(self):
        c, r = self.tunnel("ssh.test:%d" % self.echo.port)
        self.assertEqual(r.status, 200, r)
        for msg in (b"SSH-2.0-x\r\n", os.urandom(70000)):
            c.send(msg)
            got = c.read_exact(len(msg))
            self.assertEqual(got, msg)

    def test_opaque_rule_server_speaks_first(self):
        c, r = self.tunnel("ssh.test:%d" % self.banner.port)
        self.assertEqual(r.status, 200, r)
        c.sock.settimeout(3 * T.SLOW)
        self.assertEqual(c.read_until(b"\r\n"), b"SSH-2.0-origin\r\n")

    # -------------------------------------------------------------- denials

    def test_denied_connect_curl(self):
        r = self.curl("http://denied.test:%d/" % self.a.port)
        self.assertNotEqual(r.rc, 0, r)
        self.assertEqual(r.info.get("http_connect"), 403, r)
        self.assertIn("CONNECT tunnel failed, response 403", r.stderr)

    def test_denied_connect_raw(self):
        for target, reason in (("denied.test:%d" % self.a.port, "policy-deny"),
                               ("other.test:%d" % self.a.port, "policy-deny"),
                               ("allowed.test:%d" % self.b.port, "policy-deny")):
            with self.subTest(target=target):
                c, r = self.tunnel(target)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"), reason, r)

    def test_connect_no_identity_407(self):
        c, r = self.tunnel("allowed.test:%d" % self.a.port, source="127.0.0.9")
        self.assertEqual(r.status, 407, r)
        self.assertEqual(r.header("Proxy-Authenticate"), 'Basic realm="sandgate"', r)

    def test_connect_internal_answer_never_reaches_origin(self):
        before = self.b.conn_count
        r = self.curl("http://internal.test:%d/internal" % self.b.port)
        self.assertNotEqual(r.status, 200, r)
        status = r.info.get("http_connect") if r.info.get("http_connect") != 200 else r.status
        self.assertEqual(status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "destination-ip-prohibited", r)
        self.assertEqual(self.b.conn_count, before)

    # -------------------------------------------------------------- IP literal

    def test_connect_ip_literal_cidr_rule(self):
        r = self.curl("http://127.0.0.2:%d/ip-tunnel" % self.a.port)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/ip-tunnel")
        # the same IP on a port the cidr rule does not list
        c, resp = self.tunnel("127.0.0.2:%d" % self.rec.port)
        self.assertEqual(resp.status, 403, resp)

    # -------------------------------------------------------------- requests

    def test_requests_https_proxy(self):
        with T.session(self.gw.url) as s:
            resp = s.get("https://allowed.test:%d/py-https" % self.tls.port,
                         verify=self.cert, timeout=15)
            self.assertEqual(resp.status_code, 200)
            self.assertEqual(resp.json()["origin"], "origin-tls")
            resp = s.post("https://allowed.test:%d/py-post" % self.tls.port,
                          data=b"x" * 200000, verify=self.cert, timeout=15)
            self.assertEqual(resp.json()["body_len"], 200000)

    def test_https_proxy_environment(self):
        # an unmodified program that only knows HTTPS_PROXY
        code = ("import requests, sys\n"
                "r = requests.get(sys.argv[1], verify=sys.argv[2], timeout=15)\n"
                "print(r.status_code, r.json()['origin'], r.json()['path'])\n")
        env = T.clean_env(HTTPS_PROXY=self.gw.url)
        out = subprocess.run(["/usr/bin/python3", "-c", code,
                              "https://allowed.test:%d/env-proxy" % self.tls.port, self.cert],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                             timeout=60 * T.SLOW, text=True)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertEqual(out.stdout.split(), ["200", "origin-tls", "/env-proxy"])

    def test_tunnel_refusal_leaves_gateway_healthy(self):
        c, r = self.tunnel("allowed.test:%d" % self.rec.port)
        c.send(b"\x00\x01\x02garbage")
        c.closed_by_peer(10)
        r = self.curl("http://allowed.test:%d/still-alive" % self.a.port)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.gw.alive())

    def test_audit_rows(self):
        c, r = self.tunnel("allowed.test:%d" % self.rec.port)
        self.assertEqual(r.status, 200, r)
        c.send(b"SSH-2.0-audit\r\n")
        c.closed_by_peer(10)
        rows = self.gw.wait_audit(kind="connect", host="allowed.test",
                                  port=self.rec.port, decision="deny",
                                  reason="protocol-not-allowed")
        self.assertTrue(rows, "no audit row for the refused tunnel")
        r = self.curl("http://denied.test:%d/" % self.a.port)
        self.assertEqual(r.info.get("http_connect"), 403, r)
        rows = self.gw.wait_audit(kind="connect", host="denied.test",
                                  decision="deny", rule="tun:deny[0]")
        self.assertTrue(rows, "no audit row for the denied CONNECT")


if __name__ == "__main__":
    T.main()
