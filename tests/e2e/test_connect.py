#!/usr/bin/python3
"""
End-to-end tests of CONNECT tunnels (SPEC §4 "Every tunnel ... is classified
by its first bytes", §5): HTTP inside a tunnel, TLS passthrough with SNI
checks, refused non-TLS bytes, opaque rules, IP-literal tunnels, denials, and
Python requests through an HTTPS_PROXY-style tunnel. Every tunnel and every
request in one that is allowed or refused is checked against its audit row.
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
import auditcheck as AC  # noqa: E402

NOTHING = AC.one_of(0, None)   # bytes of a refused tunnel: none went through
UNRULED = AC.one_of("default-deny", "no-identity")  # SPEC §4: no rule decided


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

    def setUp(self):
        self.audit = AC.Audit(self, self.gw)

    def curl(self, url, args=()):
        return T.curl(url, proxy=self.gw.url, args=["-p"] + list(args),
                      tmp=self.td.path)

    def tunnel(self, target, **kw):
        c, r = T.open_tunnel(self.gw.port, target, **kw)
        self.addCleanup(c.close)
        return c, r

    def in_tunnel(self, client, path, down, **kw):
        """The allow row of one HTTP request carried by a CONNECT tunnel."""
        want = dict(decision="allow", kind="connect", sandbox="local",
                    host="allowed.test", ip="127.0.0.2", port=self.a.port,
                    method="GET", status=200, rule="tun:allow[0]", reason=None,
                    credential=None, bytes_up=0, bytes_down=down)
        want.update(kw)
        self.audit.expect({"client": client, "path": path}, **want)

    def tunnel_row(self, client, decision, status, rule, reason, port,
                   host="allowed.test", ip=None, up=NOTHING, down=NOTHING,
                   after=None, **kw):
        """The row of a tunnel itself (method CONNECT, no path)."""
        want = dict(decision=decision, kind="connect", sandbox="local",
                    host=host, ip=ip, port=port, path=None, status=status,
                    rule=rule, reason=reason, credential=None, bytes_up=up,
                    bytes_down=down)
        want.update(kw)
        where = {"method": "CONNECT"}
        if isinstance(client, str):
            where["client"] = client
        else:
            where.update(host=want.pop("host"), port=want.pop("port"))
            want["client"] = AC.LOOPBACK_CLIENT
        self.audit.expect(where, after=after, **want)

    def malformed(self, client, status, reason):
        self.audit.expect({"client": client}, decision="deny", kind="http",
                          sandbox=None, host=None, ip=None, port=None,
                          method=None, path=None, status=status, rule=UNRULED,
                          reason=reason, credential=None, bytes_up=NOTHING,
                          bytes_down=NOTHING)

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
        self.in_tunnel(AC.client_of_curl(r), "/in-tunnel", len(r.body))
        self.audit.check()

    def test_http_inside_tunnel_keepalive(self):
        pa = self.a.port
        c, r = self.tunnel("allowed.test:%d" % pa)
        self.assertEqual(r.status, 200, r)
        for i in range(3):
            resp = c.request("GET /ka-%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (i, pa))
            self.assertEqual(resp.status, 200, resp)
            self.assertEqual(resp.json()["path"], "/ka-%d" % i)
            self.in_tunnel(AC.client_of_conn(c), "/ka-%d" % i, len(resp.body))
        self.audit.check()

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
        # the tunnel's name, and the allow rule the Host check overrode
        self.in_tunnel(AC.client_of_conn(c), "/mismatch-host", NOTHING,
                       decision="deny", status=403, reason="host-mismatch",
                       ip=None, bytes_up=NOTHING)
        self.audit.check()

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
        self.in_tunnel(AC.client_of_conn(c), "/eager", len(resp.body))
        self.audit.check()

    def test_connect_bad_target(self):
        for target in ("allowed.test", "allowed.test:", "allowed.test:99999",
                       "allowed.test:%d/x" % self.a.port):
            with self.subTest(target=target):
                c, r = self.tunnel(target)
                self.assertEqual(r.status, 400, r)
                self.malformed(AC.client_of_conn(c), 400, "bad-request")
        self.audit.check()

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
        # one row when the tunnel ends, counting the TLS bytes each way
        self.tunnel_row(AC.client_of_curl(r), "allow", 200, "tun:allow[0]", None,
                        self.tls.port, ip="127.0.0.2", up=AC.at_least(1),
                        down=AC.at_least(len(r.body) + 1))
        self.audit.check()

    def test_tls_passthrough_python(self):
        c, r = self.tunnel("allowed.test:%d" % self.tls.port)
        self.assertEqual(r.status, 200, r)
        client = AC.client_of_conn(c)
        ctx = ssl.create_default_context(cafile=self.cert)
        s = ctx.wrap_socket(c.sock, server_hostname="allowed.test")
        req = b"GET /tls-py HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
        try:
            # the certificate the origin itself holds, not a minted one
            der = s.getpeercert(binary_form=True)
            with open(self.cert) as f:
                self.assertEqual(der, ssl.PEM_cert_to_DER_cert(f.read()))
            s.sendall(req)
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
        self.tunnel_row(client, "allow", 200, "tun:allow[0]", None, self.tls.port,
                        ip="127.0.0.2", up=AC.at_least(len(req) + 1),
                        down=AC.at_least(len(data) + len(der)))
        self.audit.check()

    def test_tls_sni_mismatch_refused(self):
        before = self.tls.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.tls.port)
        self.assertEqual(r.status, 200, r)
        client = AC.client_of_conn(c)
        ctx = ssl.create_default_context(cafile=self.cert)
        ctx.check_hostname = False
        with self.assertRaises(ssl.SSLError) as cm:
            s = ctx.wrap_socket(c.sock, server_hostname="other.test")
            s.close()
        self.assertIn("ACCESS_DENIED", str(cm.exception).upper().replace(" ", "_"))
        time.sleep(0.3)
        self.assertEqual(self.tls.conn_count, before)
        # refused after the 200: the row says 403, like an HTTP refusal
        self.tunnel_row(client, "deny", 403, "tun:allow[0]", "sni-mismatch",
                        self.tls.port)
        self.audit.check()

    def test_tls_sni_mismatch_openssl(self):
        before = self.tls.conn_count
        mark = self.audit.mark()
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
        self.tunnel_row(None, "deny", 403, "tun:allow[0]", "sni-mismatch",
                        self.tls.port, after=mark)
        self.audit.check()

    def test_tls_without_sni_refused(self):
        before = self.tls.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.tls.port)
        self.assertEqual(r.status, 200, r)
        client = AC.client_of_conn(c)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with self.assertRaises((ssl.SSLError, OSError)):
            s = ctx.wrap_socket(c.sock, server_hostname=None)
            s.close()
        time.sleep(0.3)
        self.assertEqual(self.tls.conn_count, before)
        self.tunnel_row(client, "deny", 403, "tun:allow[0]", "sni-mismatch",
                        self.tls.port)
        self.audit.check()

    # -------------------------------------------------------------- other bytes

    def test_raw_bytes_refused(self):
        before = self.rec.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.rec.port)
        self.assertEqual(r.status, 200, r)
        c.send(b"SSH-2.0-x\r\n")
        self.assertTrue(c.closed_by_peer(10), "tunnel not closed after refused bytes")
        time.sleep(0.3)
        self.assertEqual(self.rec.conn_count, before)
        self.tunnel_row(AC.client_of_conn(c), "deny", 403, "tun:allow[0]",
                        "protocol-not-allowed", self.rec.port)
        self.audit.check()

    def test_server_speaks_first_without_opaque_refused(self):
        # nothing from the client for 5 s: treated as opaque, and the rule is not
        before = self.banner2.conn_count
        c, r = self.tunnel("allowed.test:%d" % self.banner2.port, timeout=20)
        self.assertEqual(r.status, 200, r)
        t = time.time()
        self.assertTrue(c.closed_by_peer(15), "silent tunnel never closed")
        self.assertGreaterEqual(time.time() - t, 4.0)
        self.assertEqual(self.banner2.conn_count, before)
        self.tunnel_row(AC.client_of_conn(c), "deny", 403, "tun:allow[0]",
                        "protocol-not-allowed", self.banner2.port,
                        duration_ms=AC.at_least(4000))
        self.audit.check()

    def test_opaque_rule_passes_raw_bytes(self):
        c, r = self.tunnel("ssh.test:%d" % self.echo.port)
        self.assertEqual(r.status, 200, r)
        client = AC.client_of_conn(c)
        sent = 0
        for msg in (b"SSH-2.0-x\r\n", os.urandom(70000)):
            c.send(msg)
            got = c.read_exact(len(msg))
            self.assertEqual(got, msg)
            sent += len(msg)
        c.close()
        # written when the tunnel ends, with every byte counted both ways
        self.tunnel_row(client, "allow", 200, "tun:allow[1]", None, self.echo.port,
                        host="ssh.test", ip="127.0.0.2", up=sent, down=sent)
        self.audit.check()

    def test_tunnel_row_counts_only_the_tunnel(self):
        """
        A CONNECT on a connection that first carried an absolute-form request
        is an exchange of its own: its row counts the tunnel's bytes and no
        byte of the request before it (whose row has its body), each way.
        """
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10 * T.SLOW)
        self.addCleanup(conn.close)
        conn.request("GET", "http://allowed.test:%d/before-the-tunnel" % self.a.port,
                     body=b"x" * 1000, headers={"Content-Length": "1000"})
        r = conn.getresponse()
        body = r.read()
        self.assertEqual(r.status, 200)
        self.assertGreater(len(body), 0)
        sock = conn.sock
        client = AC.client_of_sock(sock)
        sock.sendall(b"CONNECT ssh.test:%d HTTP/1.1\r\nHost: ssh.test:%d\r\n\r\n"
                     % (self.echo.port, self.echo.port))
        head = b""
        while b"\r\n\r\n" not in head:
            b = sock.recv(1)
            self.assertTrue(b, "the gateway closed before answering CONNECT")
            head += b
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        msg = b"SSH-2.0-x\r\n" + b"y" * 3000
        self._echo(sock, msg)
        conn.close()
        self.audit.expect({"client": client, "method": "GET"}, decision="allow",
                          kind="http", sandbox="local", host="allowed.test",
                          ip="127.0.0.2", port=self.a.port,
                          path="/before-the-tunnel", status=200,
                          rule="tun:allow[0]", reason=None, credential=None,
                          bytes_up=1000, bytes_down=len(body))
        self.tunnel_row(client, "allow", 200, "tun:allow[1]", None, self.echo.port,
                        host="ssh.test", ip="127.0.0.2", up=len(msg), down=len(msg))
        self.audit.check()

    def _echo(self, sock, msg):
        """msg through an open tunnel to the echo origin, and back whole."""
        sock.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = sock.recv(65536)
            self.assertTrue(b, "the tunnel closed early")
            got += b
        self.assertEqual(got, msg)

    def _request_then_connect(self, body_headers, body, target):
        """One absolute-form POST, then CONNECT target on the same connection."""
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10 * T.SLOW)
        self.addCleanup(conn.close)
        conn.request("POST", "http://allowed.test:%d/first" % self.a.port,
                     body=body, headers=body_headers,
                     encode_chunked="Transfer-Encoding" in body_headers)
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        sock = conn.sock
        client = AC.client_of_sock(sock)
        sock.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                     % (target.encode(), target.encode()))
        head = b""
        while b"\r\n\r\n" not in head:
            b = sock.recv(1)
            if not b:
                break
            head += b
        return conn, sock, client, head

    def test_tunnel_row_counts_only_the_tunnel_chunked_before(self):
        """The same with a chunked request body before the tunnel."""
        def chunks():
            yield b"a" * 700
            yield b"b" * 300
        conn, sock, client, head = self._request_then_connect(
            {"Transfer-Encoding": "chunked"}, chunks(),
            "ssh.test:%d" % self.echo.port)
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        msg = b"SSH-2.0-y\r\n"
        self._echo(sock, msg)
        conn.close()
        self.tunnel_row(client, "allow", 200, "tun:allow[1]", None, self.echo.port,
                        host="ssh.test", ip="127.0.0.2", up=len(msg), down=len(msg))
        self.audit.check()

    def test_refused_tunnel_after_a_request_moved_nothing(self):
        """A CONNECT refused after a request on the connection: its row has no bytes."""
        conn, sock, client, head = self._request_then_connect(
            {"Content-Length": "1000"}, b"z" * 1000, "denied.test:443")
        self.assertTrue(head.startswith(b"HTTP/1.1 403"), head)
        conn.close()
        self.tunnel_row(client, "deny", 403, "tun:deny[0]", "policy-deny", 443,
                        host="denied.test")
        self.audit.check()

    BANNER = b"SSH-2.0-origin\r\n"

    def banner_tunnel(self):
        """A tunnel under the opaque rule to the server that speaks first,
        its banner read: (tunnel, its client address)."""
        c, r = self.tunnel("ssh.test:%d" % self.banner.port)
        self.assertEqual(r.status, 200, r)
        c.sock.settimeout(3 * T.SLOW)
        self.assertEqual(c.read_until(b"\r\n"), self.BANNER)
        return c, AC.client_of_conn(c)

    def test_opaque_rule_server_speaks_first(self):
        c, client = self.banner_tunnel()
        c.close()
        self.tunnel_row(client, "allow", 200, "tun:allow[1]", None,
                        self.banner.port, host="ssh.test", ip="127.0.0.2",
                        up=0, down=len(self.BANNER))
        self.audit.check()

    def test_opaque_tunnel_turned_http_keeps_its_row(self):
        """An opaque rule connects before the client's first bytes; when they
        are HTTP the tunnel carries requests instead and its connection is
        closed. The origin was reached under the tunnel's decision: it has
        its row even when no request inside ever completes (a head cut
        short), not only the requests' rows."""
        before = self.echo.conn_count
        c, r = self.tunnel("ssh.test:%d" % self.echo.port)
        self.assertEqual(r.status, 200, r)
        client = AC.client_of_conn(c)
        deadline = time.time() + 5 * T.SLOW
        while self.echo.conn_count == before and time.time() < deadline:
            time.sleep(0.05)
        self.assertGreater(self.echo.conn_count, before,
                           "the opaque rule connects before any byte")
        c.send(b"GET /cut HTTP/1.1\r\nHost: ssh.test:%d\r\n" % self.echo.port)
        time.sleep(0.3)
        c.close()
        self.tunnel_row(client, "allow", 200, "tun:allow[1]", None,
                        self.echo.port, host="ssh.test", ip="127.0.0.2",
                        up=0, down=0)
        self.audit.check()

    def test_opaque_tunnel_turned_http_after_banner(self):
        # The same after the server spoke first: its banner reached the
        # client and is counted in the tunnel's row; then a whole request,
        # decided on its own (the origin's answer is no HTTP: 502).
        c, client = self.banner_tunnel()
        resp = c.request("GET /after-banner HTTP/1.1\r\nHost: ssh.test:%d\r\n"
                         "\r\n" % self.banner.port)
        self.assertEqual(resp.status, 502, resp)
        c.close()
        self.tunnel_row(client, "allow", 200, "tun:allow[1]", None,
                        self.banner.port, host="ssh.test", ip="127.0.0.2",
                        up=0, down=len(self.BANNER))
        self.audit.expect({"client": client, "path": "/after-banner"},
                          decision="error", kind="connect", sandbox="local",
                          method="GET", status=502, host="ssh.test",
                          ip="127.0.0.2", port=self.banner.port,
                          rule="tun:allow[1]", reason="upstream-error",
                          credential=None, bytes_up=0, bytes_down=0)
        self.audit.check()

    # -------------------------------------------------------------- denials

    def test_denied_connect_curl(self):
        r = self.curl("http://denied.test:%d/" % self.a.port)
        self.assertNotEqual(r.rc, 0, r)
        self.assertEqual(r.info.get("http_connect"), 403, r)
        self.assertIn("CONNECT tunnel failed, response 403", r.stderr)
        self.tunnel_row(AC.client_of_curl(r), "deny", 403, "tun:deny[0]",
                        "policy-deny", self.a.port, host="denied.test")
        self.audit.check()

    def test_denied_connect_raw(self):
        for target, host, port, reason, rule in (
                ("denied.test:%d" % self.a.port, "denied.test", self.a.port,
                 "policy-deny", "tun:deny[0]"),
                ("other.test:%d" % self.a.port, "other.test", self.a.port,
                 "policy-deny", "default-deny"),
                ("allowed.test:%d" % self.b.port, "allowed.test", self.b.port,
                 "policy-deny", "default-deny")):
            with self.subTest(target=target):
                c, r = self.tunnel(target)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"), reason, r)
                self.tunnel_row(AC.client_of_conn(c), "deny", 403, rule, reason,
                                port, host=host)
        self.audit.check()

    def test_connect_no_identity_407(self):
        c, r = self.tunnel("allowed.test:%d" % self.a.port, source="127.0.0.9")
        self.assertEqual(r.status, 407, r)
        self.assertEqual(r.header("Proxy-Authenticate"), 'Basic realm="sandgate"', r)
        # still a CONNECT to a known destination, decided by the identity step
        self.tunnel_row(AC.client_of_conn(c), "deny", 407, "no-identity",
                        "no-identity", self.a.port, sandbox=None)
        self.audit.check()

    def test_connect_internal_answer_never_reaches_origin(self):
        before = self.b.conn_count
        r = self.curl("http://internal.test:%d/internal" % self.b.port)
        self.assertNotEqual(r.status, 200, r)
        status = r.info.get("http_connect") if r.info.get("http_connect") != 200 else r.status
        self.assertEqual(status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "destination-ip-prohibited", r)
        self.assertEqual(self.b.conn_count, before)
        # the allow rule the address check overrode, and the refused address
        self.tunnel_row(AC.client_of_curl(r), "deny", 403, "tun:allow[3]",
                        "destination-ip-prohibited", self.b.port,
                        host="internal.test", ip="127.0.0.3")
        self.audit.check()

    # -------------------------------------------------------------- IP literal

    def test_connect_ip_literal_cidr_rule(self):
        r = self.curl("http://127.0.0.2:%d/ip-tunnel" % self.a.port)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/ip-tunnel")
        self.in_tunnel(AC.client_of_curl(r), "/ip-tunnel", len(r.body),
                       host="127.0.0.2", rule="tun:allow[2]")
        # the same IP on a port the cidr rule does not list
        c, resp = self.tunnel("127.0.0.2:%d" % self.rec.port)
        self.assertEqual(resp.status, 403, resp)
        self.tunnel_row(AC.client_of_conn(c), "deny", 403, "default-deny",
                        "policy-deny", self.rec.port, host="127.0.0.2")
        self.audit.check()

    # -------------------------------------------------------------- requests

    def test_requests_https_proxy(self):
        mark = self.audit.mark()
        with T.session(self.gw.url) as s:
            resp = s.get("https://allowed.test:%d/py-https" % self.tls.port,
                         verify=self.cert, timeout=15)
            self.assertEqual(resp.status_code, 200)
            self.assertEqual(resp.json()["origin"], "origin-tls")
            down = len(resp.content)
            resp = s.post("https://allowed.test:%d/py-post" % self.tls.port,
                          data=b"x" * 200000, verify=self.cert, timeout=15)
            self.assertEqual(resp.json()["body_len"], 200000)
            down += len(resp.content)
        # one pooled tunnel carried both requests: one row when it closed
        self.tunnel_row(None, "allow", 200, "tun:allow[0]", None, self.tls.port,
                        ip="127.0.0.2", up=AC.at_least(200001),
                        down=AC.at_least(down + 1), after=mark)
        self.audit.check()

    def test_https_proxy_environment(self):
        # an unmodified program that only knows HTTPS_PROXY
        mark = self.audit.mark()
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
        self.tunnel_row(None, "allow", 200, "tun:allow[0]", None, self.tls.port,
                        ip="127.0.0.2", up=AC.at_least(1), down=AC.at_least(1),
                        after=mark)
        self.audit.check()

    def test_tunnel_refusal_leaves_gateway_healthy(self):
        c, r = self.tunnel("allowed.test:%d" % self.rec.port)
        c.send(b"\x00\x01\x02garbage")
        c.closed_by_peer(10)
        self.tunnel_row(AC.client_of_conn(c), "deny", 403, "tun:allow[0]",
                        "protocol-not-allowed", self.rec.port)
        r = self.curl("http://allowed.test:%d/still-alive" % self.a.port)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.gw.alive())
        self.in_tunnel(AC.client_of_curl(r), "/still-alive", len(r.body))
        self.audit.check()

    def test_audit_rows(self):
        # a tunnel refused by its first bytes, and one refused by a deny rule
        c, r = self.tunnel("allowed.test:%d" % self.rec.port)
        self.assertEqual(r.status, 200, r)
        c.send(b"SSH-2.0-audit\r\n")
        c.closed_by_peer(10)
        self.tunnel_row(AC.client_of_conn(c), "deny", 403, "tun:allow[0]",
                        "protocol-not-allowed", self.rec.port)
        r = self.curl("http://denied.test:%d/" % self.a.port)
        self.assertEqual(r.info.get("http_connect"), 403, r)
        self.tunnel_row(AC.client_of_curl(r), "deny", 403, "tun:deny[0]",
                        "policy-deny", self.a.port, host="denied.test")
        self.audit.check()


if __name__ == "__main__":
    T.main()
