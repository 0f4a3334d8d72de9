#!/usr/bin/python3
"""
End-to-end tests of TLS interception (SPEC §6, issue 4): an nginx origin with
a test CA of its own, sandgate's CA serving the client, per-request method and
path decisions inside the TLS session, SNI and Host checks, keep-alive, four
kinds of bad origin certificate, an untrusted client, an IP-literal tunnel,
and a WebSocket echo through an intercepted tunnel. Clients: curl, Python
requests, openssl s_client and hand-written ssl + socket code.
"""

import base64
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import wsframe as W  # noqa: E402

NGINX = "/usr/sbin/nginx"
ORIGIN_HOST = "127.0.0.2"
OTHER_SOURCE = "127.0.0.9"     # a second sandbox's address
ALERT_ACCESS_DENIED = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31])


def run(argv, input=None, timeout=30):
    r = subprocess.run(argv, input=input, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=T.clean_env(), timeout=timeout * T.SLOW)
    return r


def must(argv, input=None):
    r = run(argv, input=input)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s%s" % (" ".join(argv),
            r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")))
    return r.stdout.decode(errors="replace")


# ---------------------------------------------------------------- test PKI

class TestPKI:
    """A CA of the test's own (openssl CLI), and leaves it signs."""

    def __init__(self, d, name):
        self.d = os.path.join(d, name)
        os.makedirs(os.path.join(self.d, "newcerts"))
        self.cert = os.path.join(self.d, "ca.crt")
        self.key = os.path.join(self.d, "ca.key")
        with open(os.path.join(self.d, "index.txt"), "w"):
            pass
        with open(os.path.join(self.d, "serial"), "w") as f:
            f.write("1000\n")
        self.cnf = os.path.join(self.d, "ca.cnf")
        with open(self.cnf, "w") as f:
            f.write("[ca]\ndefault_ca = tca\n[tca]\n"
                "database = %s/index.txt\nnew_certs_dir = %s/newcerts\n"
                "serial = %s/serial\ndefault_md = sha256\npolicy = pol\n"
                "unique_subject = no\n[pol]\ncommonName = supplied\n"
                % (self.d, self.d, self.d))
        must([T.OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
            "-subj", "/CN=sgtest %s" % name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", self.key, "-out", self.cert])

    def leaf(self, cn, sans, start=None, end=None):
        """A server certificate for cn with SANs ("DNS:x", "IP:y")."""
        base = os.path.join(self.d, cn)
        key, csr, crt, ext = (base + s for s in (".key", ".csr", ".crt", ".ext"))
        must([T.OPENSSL, "req", "-new", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", key, "-out", csr])
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n" % ",".join(sans))
        argv = [T.OPENSSL, "ca", "-config", self.cnf, "-batch", "-notext",
            "-cert", self.cert, "-keyfile", self.key, "-in", csr, "-out", crt,
            "-extfile", ext]
        if start:
            argv += ["-startdate", start, "-enddate", end]
        else:
            argv += ["-days", "30"]
        must(argv)
        return crt, key


def cert_text(pem_or_path):
    if os.path.exists(pem_or_path):
        return must([T.OPENSSL, "x509", "-noout", "-text", "-in", pem_or_path])
    return must([T.OPENSSL, "x509", "-noout", "-text"], input=pem_or_path.encode())


def cert_field(pem, *args):
    return must([T.OPENSSL, "x509", "-noout"] + list(args),
        input=pem.encode()).strip()


def pem_blocks(text):
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----",
        text, re.S)


# ---------------------------------------------------------------- nginx

class Nginx:
    """
    nginx in the foreground with a config of our own: one TLS server per
    (port, cert, key); each answers with its port, Host and path. A plain
    HTTP stub_status server counts accepted connections. `/ws` is proxied to
    the WebSocket origin when ws_port is given.
    """

    def __init__(self, tmp, servers, ws_port=None):
        self.dir = os.path.join(tmp, "nginx")
        os.makedirs(os.path.join(self.dir, "logs"))
        self.access = os.path.join(self.dir, "logs", "access.log")
        self.status_port = T.free_port(ORIGIN_HOST)
        while self.status_port in [s[0] for s in servers]:
            self.status_port = T.free_port(ORIGIN_HOST)
        conf = os.path.join(self.dir, "nginx.conf")
        user = "user root;\n" if os.geteuid() == 0 else ""
        blocks = []
        for port, cert, key in servers:
            ws = ""
            if ws_port:
                ws = ("    location /ws {\n"
                    "      proxy_pass https://%s:%d;\n"
                    "      proxy_http_version 1.1;\n"
                    "      proxy_set_header Upgrade $http_upgrade;\n"
                    "      proxy_set_header Connection \"upgrade\";\n"
                    "      proxy_set_header Host $host;\n"
                    "      proxy_ssl_server_name on;\n"
                    "      proxy_ssl_name allowed.test;\n"
                    "      proxy_read_timeout 30s;\n"
                    "    }\n" % (ORIGIN_HOST, ws_port))
            blocks.append(
                "  server {\n"
                "    listen %s:%d ssl;\n"
                "    server_name _;\n"
                "    ssl_certificate %s;\n"
                "    ssl_certificate_key %s;\n"
                "    ssl_protocols TLSv1.2 TLSv1.3;\n"
                "    location / { return 200 \"nginx $server_port $host $request_method $uri\\n\"; }\n"
                "    location /ok/close/ { keepalive_timeout 0; return 200 \"closed\\n\"; }\n"
                "%s"
                "  }\n" % (ORIGIN_HOST, port, cert, key, ws))
        with open(conf, "w") as f:
            f.write(
                "%s"
                "worker_processes 1;\n"
                "pid %s/nginx.pid;\n"
                "error_log %s/logs/error.log info;\n"
                "events { worker_connections 512; }\n"
                "http {\n"
                "  log_format sg '$server_port|$ssl_server_name|$host|"
                "$request_method|$request_uri|$connection|$connection_requests|"
                "$ssl_session_reused|$ssl_protocol|$ssl_alpn_protocol|$status|"
                "$http_via';\n"
                "  access_log %s sg;\n"
                "  client_body_temp_path %s/body;\n"
                "  proxy_temp_path %s/proxy;\n"
                "  fastcgi_temp_path %s/fastcgi;\n"
                "  uwsgi_temp_path %s/uwsgi;\n"
                "  scgi_temp_path %s/scgi;\n"
                "  default_type text/plain;\n"
                "  keepalive_requests 10000;\n"
                "  keepalive_timeout 60s;\n"
                "  server {\n"
                "    listen %s:%d;\n"
                "    location / { stub_status; }\n"
                "  }\n"
                "%s"
                "}\n" % (user, self.dir, self.dir, self.access,
                    self.dir, self.dir, self.dir, self.dir, self.dir,
                    ORIGIN_HOST, self.status_port, "".join(blocks)))
        self.proc = T.Proc([NGINX, "-p", self.dir, "-c", conf, "-g",
            "daemon off;"], os.path.join(self.dir, "stderr.log"))
        for port in [self.status_port] + [s[0] for s in servers]:
            if not T.wait_tcp(ORIGIN_HOST, port, 10 * T.SLOW, self.proc):
                self.proc.stop()
                raise RuntimeError("nginx did not listen on %d:\n%s" % (port,
                    self.error_log()))

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "logs", "error.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def accepts(self):
        """Connections nginx accepted so far (this query's own included)."""
        c = socket.create_connection((ORIGIN_HOST, self.status_port), timeout=5)
        try:
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = b""
            while True:
                b = c.recv(4096)
                if not b:
                    break
                data += b
        finally:
            c.close()
        m = re.search(rb"\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\n", data)
        if not m:
            raise RuntimeError("no stub_status numbers in %r" % data)
        return int(m.group(1))

    def log(self, port=None):
        """Parsed access-log lines (dicts), optionally only for one port."""
        keys = ("port", "sni", "host", "method", "uri", "conn", "conn_req",
            "reused", "proto", "alpn", "status", "via")
        out = []
        try:
            with open(self.access) as f:
                for line in f:
                    parts = line.rstrip("\n").split("|")
                    if len(parts) != len(keys):
                        continue
                    d = dict(zip(keys, parts))
                    if port is None or d["port"] == str(port):
                        out.append(d)
        except OSError:
            pass
        return out

    def wait_log(self, pred, timeout=5.0):
        deadline = time.time() + timeout * T.SLOW
        while True:
            rows = [r for r in self.log() if pred(r)]
            if rows or time.time() > deadline:
                return rows
            time.sleep(0.05)

    def stop(self):
        self.proc.stop()


# ---------------------------------------------------------------- WebSocket origin

class WsOrigin(T.RawServer):
    """
    A threaded TLS server that does the RFC 6455 handshake on any path and
    echoes text frames (answering a close with a close). Records each
    request head and whether client frames were masked. The listener,
    its connection count and stop() are sgtest's RawServer.
    """

    def __init__(self, cert, key, host=ORIGIN_HOST):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.heads = []
        self.unmasked = 0
        self.errors = []
        super().__init__(host)

    def _serve(self, raw, idx):
        raw.settimeout(20)
        try:
            c = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as e:
            with self.lock:
                self.errors.append("handshake: %r" % e)
            raw.close()
            return
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                if len(buf) > 16384:
                    raise ValueError("head too large")
                b = c.recv(65536)
                if not b:
                    return
                buf += b
            i = buf.index(b"\r\n\r\n") + 4
            head, buf = buf[:i].decode("latin-1"), buf[i:]
            lines = head.split("\r\n")
            hdrs = {}
            for l in lines[1:]:
                if ":" in l:
                    k, v = l.split(":", 1)
                    hdrs[k.strip().lower()] = v.strip()
            with self.lock:
                self.heads.append({"line": lines[0], "headers": hdrs})
            key = hdrs.get("sec-websocket-key")
            if ("upgrade" not in hdrs.get("connection", "").lower() or
                    hdrs.get("upgrade", "").lower() != "websocket" or not key):
                body = b"not a websocket handshake\n"
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n%s" % (len(body), body))
                return
            c.sendall(("HTTP/1.1 101 Switching Protocols\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: %s\r\n\r\n" % W.accept_key(key)).encode())
            rd = W.Reader(c, buf)
            for _ in range(64):
                f = W.read_frame(rd.read_exact, max_len=1 << 20)
                op, payload = f.opcode, f.payload
                if not f.masked:
                    with self.lock:
                        self.unmasked += 1
                if op == 0x1:
                    c.sendall(W.encode_frame(0x1, payload))
                elif op == 0x8:
                    c.sendall(W.encode_frame(0x8, payload[:2]))
                    return
                elif op == 0x9:
                    c.sendall(W.encode_frame(0xA, payload))
        except (OSError, EOFError, ValueError, ssl.SSLError) as e:
            with self.lock:
                self.errors.append(repr(e))
        finally:
            try:
                c.close()
            except OSError:
                pass


# ---------------------------------------------------------------- the tests

class InterceptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(NGINX, os.X_OK):
            T.skip_file("nginx is not installed at " + NGINX)
        cls.td = T.TempDir("sgtest-icpt-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestPKI(d, "origin-ca")
        cls.other_pki = TestPKI(d, "unknown-ca")
        good = cls.pki.leaf("allowed.test", ["DNS:allowed.test", "IP:" + ORIGIN_HOST])
        expired = cls.pki.leaf("expired.bad.test", ["DNS:expired.bad.test"],
            start="20200101000000Z", end="20200201000000Z")
        selfsigned = T.make_cert(d, "selfsigned.bad.test")
        wrongname = cls.pki.leaf("other.test", ["DNS:other.test"])
        unknownca = cls.other_pki.leaf("unknownca.bad.test", ["DNS:unknownca.bad.test"])

        cls.ws = WsOrigin(*good)
        cls.addClassCleanup(cls.ws.stop)
        cls.port = T.free_port(ORIGIN_HOST)
        cls.bad_ports = {}
        servers = [(cls.port,) + good]
        for name, pair in (("expired", expired), ("selfsigned", selfsigned),
                ("wrongname", wrongname), ("unknownca", unknownca)):
            p = T.free_port(ORIGIN_HOST)
            while p in [s[0] for s in servers]:
                p = T.free_port(ORIGIN_HOST)
            cls.bad_ports[name] = p
            servers.append((p,) + pair)
        cls.nginx = Nginx(d, servers, ws_port=cls.ws.port)
        cls.addClassCleanup(cls.nginx.stop)

        names = ["allowed.test", "other.test"] + [
            "%s.bad.test" % n for n in cls.bad_ports]
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in names])
        cls.addClassCleanup(cls.dns.stop)
        policy = {
            "sandboxes": [T.local_sandbox("icpt", sid="icpt-box"),
                          T.local_sandbox("icpt", sid="icpt-two",
                                          source=OTHER_SOURCE + "/32")],
            "policies": [{
                "name": "icpt",
                "allow": [
                    {"host": "allowed.test",                         # allow[0]
                     "ports": [cls.port, cls.ws.port], "tls": "intercept",
                     "methods": ["GET", "HEAD"],
                     "paths": ["/ok/*", "/ws", "/ws/*"]},
                    {"host": "*.bad.test",                           # allow[1]
                     "ports": sorted(cls.bad_ports.values()),
                     "tls": "intercept"},
                    {"cidr": ORIGIN_HOST + "/32", "ports": [cls.port],
                     "tls": "intercept"},                            # allow[2]
                ],
                "deny": [{"host": "allowed.test", "paths": ["/ok/secret*"]}],
                "allow_private": [ORIGIN_HOST + "/32"],
            }],
        }
        # The loader takes `tls:` only as a plain scalar; to_yaml quotes strings.
        text = T.to_yaml(policy).replace('tls: "intercept"', "tls: intercept")
        cls.workers = 2
        cls.gw = T.Gateway(d, cls.dns, {"icpt.yaml": text + "\n"},
            extra={"upstream": {"ca_bundle": cls.pki.cert,
                                "keepalive_timeout": "2s"}},
            workers=cls.workers)
        cls.ca = os.path.join(d, "certs", "ca.crt")
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    # -------------------------------------------------------------- helpers

    def url(self, path, host="allowed.test", port=None):
        return "https://%s:%d%s" % (host, port or self.port, path)

    def curl(self, url, args=(), cacert=True):
        a = ["--cacert", self.ca] if cacert else []
        return T.curl(url, proxy=self.gw.url, args=a + list(args),
            tmp=self.td.path)

    def client_ctx(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx

    def strict_ctx(self):
        """A context for which an EOF without close_notify is an error."""
        ctx = self.client_ctx()
        ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
        return ctx

    def tls_tunnel(self, target="allowed.test", port=None, sni="allowed.test",
            alpn=None):
        """CONNECT, then TLS over it trusting only sandgate's CA: a T.Conn."""
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (target, port or self.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        ctx = self.client_ctx()
        if alpn:
            ctx.set_alpn_protocols(alpn)
        c.sock = ctx.wrap_socket(c.sock, server_hostname=sni)
        return c

    def get(self, c, path, host=None, extra="", method="GET"):
        host = host or "allowed.test:%d" % self.port
        return c.request("%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (
            method, path, host, extra), method)

    def audit_one(self, **match):
        rows = self.gw.wait_audit(**match)
        self.assertTrue(rows, "no audit row with %r; rows: %r" % (match,
            self.gw.audit_rows()[-8:]))
        return rows[-1]

    def assert_denied_inside(self, r, reason):
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), reason, r)
        self.assertIn(reason.encode(), r.body)

    # -------------------------------------------------------------- CA and chain

    def test_ca_created_on_first_start(self):
        self.assertTrue(os.path.exists(self.ca))
        key = os.path.join(self.td.path, "certs", "ca.key")
        self.assertEqual(os.stat(key).st_mode & 0o077, 0, "ca.key readable by others")
        text = cert_text(self.ca)
        self.assertIn("CA:TRUE", text)
        self.assertIn("prime256v1", text)
        self.assertIsNotNone(self.gw.wait_log(re.escape(self.ca)),
            "serve did not say where the CA is")

    def test_openssl_s_client_chain(self):
        req = ("GET /ok/sclient HTTP/1.1\r\nHost: allowed.test:%d\r\n"
            "Connection: close\r\n\r\n" % self.port).encode()
        r = run([T.OPENSSL, "s_client", "-proxy", "127.0.0.1:%d" % self.gw.port,
            "-connect", "allowed.test:%d" % self.port,
            "-servername", "allowed.test", "-showcerts", "-alpn", "http/1.1",
            "-CAfile", self.ca, "-verify_return_error", "-ign_eof"], input=req)
        out = r.stdout.decode(errors="replace")
        # (Its exit status also reflects how the session was closed: that is
        # test_close_notify's business.)
        self.assertIn("Verify return code: 0 (ok)", out,
            out + r.stderr.decode(errors="replace"))
        self.assertIn("ALPN protocol: http/1.1", out)
        self.assertRegex(out, r"HTTP/1.1 200")
        self.assertIn("nginx %d allowed.test GET /ok/sclient" % self.port, out)
        chain = pem_blocks(out)
        self.assertGreaterEqual(len(chain), 1, out)
        leaf = chain[0]
        with open(self.ca) as f:
            ca_pem = f.read()
        self.assertEqual(cert_field(leaf, "-issuer").split("=", 1)[1],
            cert_field(ca_pem, "-subject").split("=", 1)[1])
        lf = os.path.join(self.td.path, "sclient-leaf.pem")
        with open(lf, "w") as f:
            f.write(leaf + "\n")
        v = run([T.OPENSSL, "verify", "-CAfile", self.ca, "-purpose", "sslserver", lf])
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        san = cert_field(leaf, "-ext", "subjectAltName")
        self.assertRegex(san, r"DNS:allowed\.test\s*$")
        text = cert_text(leaf)
        self.assertIn("prime256v1", text)
        self.assertNotIn("CA:TRUE", text)
        # Not signed by the origin's CA: the client saw sandgate's leaf.
        self.assertNotIn("sgtest origin-ca", cert_field(leaf, "-issuer"))
        if len(chain) > 1:
            self.assertEqual(cert_field(chain[1], "-fingerprint", "-sha256"),
                cert_field(ca_pem, "-fingerprint", "-sha256"))
        # Short validity (at most what public CAs may issue).
        nb = cert_field(leaf, "-startdate").split("=", 1)[1]
        na = cert_field(leaf, "-enddate").split("=", 1)[1]
        fmt = "%b %d %H:%M:%S %Y %Z"
        days = (time.mktime(time.strptime(na, fmt)) -
            time.mktime(time.strptime(nb, fmt))) / 86400
        self.assertLessEqual(days, 398, "leaf valid for %.0f days" % days)
        self.assertGreater(days, 0)

    def test_leaf_serials_unique(self):
        serials, ders = set(), set()
        for target, sni in (("allowed.test", "allowed.test"),
                (ORIGIN_HOST, None)):
            c, r = T.open_tunnel(self.gw.port, "%s:%d" % (target, self.port))
            self.addCleanup(c.close)
            self.assertEqual(r.status, 200)
            ctx = self.client_ctx()
            c.sock = ctx.wrap_socket(c.sock, server_hostname=sni or target)
            der = c.sock.getpeercert(binary_form=True)
            ders.add(der)
            serials.add(must([T.OPENSSL, "x509", "-inform", "DER", "-noout",
                "-serial"], input=der).strip())
        self.assertEqual(len(ders), 2)
        self.assertEqual(len(serials), 2, serials)

    # -------------------------------------------------------------- allow / deny

    def test_curl_allowed_get(self):
        r = self.curl(self.url("/ok/curl"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, ("nginx %d allowed.test GET /ok/curl\n"
            % self.port).encode())
        lines = self.nginx.wait_log(lambda l: l["uri"] == "/ok/curl")
        self.assertEqual(len(lines), 1)
        # The origin connection: SNI, ALPN http/1.1, TLS >= 1.2, via sandgate.
        self.assertEqual(lines[0]["sni"], "allowed.test")
        self.assertEqual(lines[0]["alpn"], "http/1.1")
        self.assertIn(lines[0]["proto"], ("TLSv1.2", "TLSv1.3"))
        self.assertIn("sandgate", lines[0]["via"])
        row = self.audit_one(path="/ok/curl")
        self.assertEqual(row["kind"], "connect")
        self.assertEqual(row["decision"], "allow")
        self.assertEqual(row["rule"], "icpt:allow[0]")
        self.assertEqual(row["method"], "GET")
        self.assertEqual(row["status"], 200)
        self.assertEqual(row["host"], "allowed.test")
        self.assertEqual(row["port"], self.port)
        self.assertEqual(row["sandbox"], "icpt-box")
        self.assertIsNone(row["reason"])

    def test_curl_post_denied_inside_tls(self):
        r = self.curl(self.url("/ok/post"), args=["-X", "POST", "-d", "x=1"])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.info.get("http_connect"), 200, r)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        self.assertIn(b"policy-deny", r.body)
        self.assertFalse(any(l["uri"] == "/ok/post" for l in self.nginx.log()))
        row = self.audit_one(path="/ok/post", method="POST")
        self.assertEqual(row["decision"], "deny")
        self.assertEqual(row["status"], 403)
        self.assertEqual(row["reason"], "policy-deny")
        self.assertEqual(row["rule"], "default-deny")
        self.assertEqual(row["kind"], "connect")

    def test_curl_path_denied_inside_tls(self):
        r = self.curl(self.url("/admin/users"))
        self.assertEqual(r.info.get("http_connect"), 200, r)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        self.assertFalse(any(l["uri"] == "/admin/users" for l in self.nginx.log()))
        row = self.audit_one(path="/admin/users")
        self.assertEqual((row["decision"], row["status"], row["method"]),
            ("deny", 403, "GET"))

    def test_deny_rule_on_path(self):
        r = self.curl(self.url("/ok/secret-plans"))
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        self.assertIn(b"icpt:deny[0]", r.body)
        self.assertFalse(any(l["uri"] == "/ok/secret-plans" for l in self.nginx.log()))
        row = self.audit_one(path="/ok/secret-plans")
        self.assertEqual((row["decision"], row["rule"]), ("deny", "icpt:deny[0]"))

    def test_query_not_part_of_path_match(self):
        r = self.curl(self.url("/ok/q?next=/admin"))
        self.assertEqual(r.status, 200, r)
        r = self.curl(self.url("/admin?x=/ok/y"))
        self.assertEqual(r.status, 403, r)

    def test_requests_verify_ca(self):
        s = T.session(self.gw.url)
        s.verify = self.ca
        self.addCleanup(s.close)
        r = s.get(self.url("/ok/requests-1"), timeout=20 * T.SLOW)
        self.assertEqual(r.status_code, 200)
        self.assertEqual(r.text, "nginx %d allowed.test GET /ok/requests-1\n" % self.port)
        r2 = s.get(self.url("/ok/requests-2"), timeout=20 * T.SLOW)
        self.assertEqual(r2.status_code, 200)
        r3 = s.post(self.url("/ok/requests-3"), data=b"x", timeout=20 * T.SLOW)
        self.assertEqual(r3.status_code, 403)
        self.assertEqual(r3.headers.get("X-Sandgate-Reason"), "policy-deny")
        # One proxy connection carried both allowed requests.
        a = self.audit_one(path="/ok/requests-1")
        b = self.audit_one(path="/ok/requests-2")
        self.assertEqual(a["client"], b["client"])
        self.assertEqual((a["decision"], b["decision"]), ("allow", "allow"))
        d = self.audit_one(path="/ok/requests-3")
        self.assertEqual((d["decision"], d["method"], d["status"]), ("deny", "POST", 403))

    def test_requests_without_ca_fails(self):
        s = T.session(self.gw.url)
        self.addCleanup(s.close)
        s.verify = self.pki.cert   # trusts the origin's CA, not sandgate's
        with self.assertRaises(T.requests.exceptions.SSLError):
            s.get(self.url("/ok/requests-untrusted"), timeout=20 * T.SLOW)
        self.assertFalse(any(l["uri"] == "/ok/requests-untrusted"
            for l in self.nginx.log()))

    # -------------------------------------------------------------- SNI, Host

    def _sni_refused(self, sni):
        before = self.nginx.accepts()
        c, r = T.open_tunnel(self.gw.port, "allowed.test:%d" % self.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        ctx = self.client_ctx()
        ctx.check_hostname = False
        inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inb, outb, server_hostname=sni)
        with self.assertRaises(ssl.SSLWantReadError):
            obj.do_handshake()
        c.send(outb.read())
        got = c.read_to_eof(limit=4096)
        self.assertEqual(got, ALERT_ACCESS_DENIED)
        inb.write(got)
        with self.assertRaisesRegex(ssl.SSLError, "(?i)access.denied"):
            obj.do_handshake()
        time.sleep(0.3)
        # Only our own stub_status query reached nginx.
        self.assertEqual(self.nginx.accepts(), before + 1)

    def test_sni_mismatch_alert(self):
        self._sni_refused("other.test")
        row = self.audit_one(host="allowed.test", reason="sni-mismatch")
        self.assertEqual((row["kind"], row["decision"]), ("connect", "deny"))

    def test_sni_missing_alert(self):
        self._sni_refused(None)

    def test_host_mismatch_inside_tls(self):
        c = self.tls_tunnel()
        r = self.get(c, "/ok/fronted", host="other.test")
        self.assert_denied_inside(r, "host-mismatch")
        c2 = self.tls_tunnel()
        r = self.get(c2, "/ok/fronted-port", host="allowed.test:%d" % (self.port + 1))
        self.assert_denied_inside(r, "host-mismatch")
        self.assertFalse(any(l["uri"].startswith("/ok/fronted")
            for l in self.nginx.log()))
        row = self.audit_one(path="/ok/fronted")
        self.assertEqual((row["decision"], row["reason"], row["status"]),
            ("deny", "host-mismatch", 403))

    def test_host_mismatch_after_allowed_request(self):
        c = self.tls_tunnel()
        r = self.get(c, "/ok/before-fronting")
        self.assertEqual(r.status, 200, r)
        r = self.get(c, "/ok/fronted-second", host="other.test")
        self.assert_denied_inside(r, "host-mismatch")
        self.assertFalse(any(l["uri"] == "/ok/fronted-second"
            for l in self.nginx.log()))

    def test_close_notify(self):
        # "Connection: close" ends the TLS session with close_notify, so a
        # strict client (OpenSSL 3 without IGNORE_UNEXPECTED_EOF) sees a clean
        # end, not a truncation.
        c, r = T.open_tunnel(self.gw.port, "allowed.test:%d" % self.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.strict_ctx().wrap_socket(c.sock,
            server_hostname="allowed.test", suppress_ragged_eofs=False)
        r = self.get(c, "/ok/close-notify", extra="Connection: close\r\n")
        self.assertEqual(r.status, 200, r)
        try:
            rest = c.read_to_eof(limit=4096)
        except ssl.SSLError as e:
            self.fail("the gateway closed the TLS session without "
                "close_notify: %r" % e)
        self.assertEqual(rest, b"")

    def test_close_notify_after_deny(self):
        c, r = T.open_tunnel(self.gw.port, "allowed.test:%d" % self.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.strict_ctx().wrap_socket(c.sock,
            server_hostname="allowed.test", suppress_ragged_eofs=False)
        r = self.get(c, "/ok/close-notify-deny", method="PUT",
            extra="Content-Length: 0\r\n")
        self.assert_denied_inside(r, "policy-deny")
        try:
            rest = c.read_to_eof(limit=4096)
        except ssl.SSLError as e:
            self.fail("the gateway closed the TLS session without "
                "close_notify after a 403: %r" % e)
        self.assertEqual(rest, b"")

    # -------------------------------------------------------------- keep-alive

    def test_keepalive_two_requests_one_connection(self):
        # h2 is offered too (SPEC §6, test_http2.py); this client speaks 1.1.
        c = self.tls_tunnel(alpn=["http/1.1"])
        self.assertEqual(c.sock.selected_alpn_protocol(), "http/1.1")
        r1 = self.get(c, "/ok/ka-1")
        self.assertEqual(r1.status, 200, r1)
        self.assertNotEqual((r1.header("Connection") or "").lower(), "close")
        r2 = self.get(c, "/ok/ka-2")
        self.assertEqual(r2.status, 200, r2)
        self.assertEqual(r2.body, ("nginx %d allowed.test GET /ok/ka-2\n"
            % self.port).encode())
        # A denied request in the same session does not need a new tunnel.
        r3 = self.get(c, "/ok/ka-3", method="DELETE")
        self.assert_denied_inside(r3, "policy-deny")
        l1 = self.nginx.wait_log(lambda l: l["uri"] == "/ok/ka-1")
        l2 = self.nginx.wait_log(lambda l: l["uri"] == "/ok/ka-2")
        self.assertEqual(len(l1), 1)
        self.assertEqual(len(l2), 1)
        # The origin side was kept alive too.
        self.assertEqual(l1[0]["conn"], l2[0]["conn"])
        a = self.audit_one(path="/ok/ka-1")
        b = self.audit_one(path="/ok/ka-2")
        self.assertEqual(a["client"], b["client"])
        self.assertEqual(c.sock.getsockname()[1], int(a["client"].rsplit(":", 1)[1]))

    def test_origin_connection_released_when_idle(self):
        # upstream.keepalive_timeout (2s here): the origin connection kept
        # for the tunnel's next request goes once it idled that long; the
        # client's tunnel stays, and its next request opens a new one.
        c = self.tls_tunnel(alpn=["http/1.1"])
        r1 = self.get(c, "/ok/pool-1")
        self.assertEqual(r1.status, 200, r1)
        r2 = self.get(c, "/ok/pool-2")
        self.assertEqual(r2.status, 200, r2)
        time.sleep(3.5)
        r3 = self.get(c, "/ok/pool-3")
        self.assertEqual(r3.status, 200, r3)
        conn = {}
        for n in (1, 2, 3):
            l = self.nginx.wait_log(lambda l, n=n: l["uri"] == "/ok/pool-%d" % n)
            self.assertEqual(len(l), 1)
            conn[n] = l[0]["conn"]
        self.assertEqual(conn[1], conn[2], "kept alive between quick requests")
        self.assertNotEqual(conn[2], conn[3], "kept past keepalive_timeout")
        rows = [self.audit_one(path="/ok/pool-%d" % n) for n in (1, 2, 3)]
        self.assertEqual(len(set(r["client"] for r in rows)), 1)

    def test_origin_session_resumption(self):
        # Origin sessions are cached per worker: of workers + 1 tunnels made
        # one after the other, at least two share a worker. The origin
        # closes each connection after its answer (else the next tunnel
        # would take it from the worker's pool: no handshake at all).
        n = self.workers + 1
        for i in range(n):
            r = self.curl(self.url("/ok/close/resume-%d" % i))
            self.assertEqual(r.status, 200, r)
        lines = [self.nginx.wait_log(lambda l, i=i: l["uri"] ==
            "/ok/close/resume-%d" % i) for i in range(n)]
        self.assertTrue(all(lines))
        self.assertEqual(len({l[0]["conn"] for l in lines}), n)
        self.assertIn("r", [l[0]["reused"] for l in lines[1:]], lines)

    def test_origin_connection_shared_by_tunnels(self):
        # An idle origin connection waits in its worker's pool for the next
        # exchange of the same decision, on whichever of the sandbox's
        # tunnels: of workers + 1 tunnels made one after the other, at
        # least two share one. Another sandbox's tunnels, or tunnels to the
        # same origin named by its address (another decision), never get
        # one of them.
        n = self.workers + 1

        def conns(tag, url, args=()):
            for i in range(n):
                r = self.curl(url("/ok/%s-%d" % (tag, i)), args=args)
                self.assertEqual(r.status, 200, r)
            got = [self.nginx.wait_log(lambda l, i=i: l["uri"] ==
                "/ok/%s-%d" % (tag, i)) for i in range(n)]
            self.assertTrue(all(got), got)
            return [g[0]["conn"] for g in got]

        mine = conns("share", self.url)
        self.assertLess(len(set(mine)), n, mine)
        other = conns("share-other", self.url, ["--interface", OTHER_SOURCE])
        self.assertFalse(set(other) & set(mine), (mine, other))
        # The rows come from the asynchronous writer: wait for them.
        self.assertTrue(self.gw.wait_audit(timeout=10, sandbox="icpt-two",
            pred=lambda r: (r.get("path") or "").startswith(
                "/ok/share-other-")))
        byip = conns("share-ip", lambda p: "https://%s:%d%s" % (ORIGIN_HOST,
            self.port, p))
        self.assertFalse(set(byip) & (set(mine) | set(other)),
            (mine, other, byip))

    # -------------------------------------------------------------- bad origins

    def _bad_origin(self, kind, why):
        host = "%s.bad.test" % kind
        port = self.bad_ports[kind]
        r = self.curl(self.url("/ok/bad", host=host, port=port))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.info.get("http_connect"), 200, r)
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upstream-tls-error", r)
        self.assertRegex(r.body.decode(errors="replace"), re.compile(why, re.I))
        self.assertEqual(self.nginx.log(port), [], "a request reached the origin")
        row = self.audit_one(host=host, reason="upstream-tls-error")
        self.assertEqual(row["decision"], "error")
        self.assertEqual(row["status"], 502)
        self.assertEqual(row["kind"], "connect")
        self.assertEqual(row["port"], port)
        self.assertIsNotNone(self.gw.wait_log("(?i)" + re.escape(host) + ".*" + why),
            "no log line naming %s and %r" % (host, why))

    def test_bad_origin_expired(self):
        self._bad_origin("expired", r"expired")

    def test_bad_origin_self_signed(self):
        self._bad_origin("selfsigned", r"self.signed")

    def test_bad_origin_wrong_name(self):
        self._bad_origin("wrongname", r"hostname mismatch")

    def test_bad_origin_unknown_ca(self):
        self._bad_origin("unknownca", r"(local|unable to get) issuer")

    def test_bad_origins_are_serving(self):
        # Control: each bad origin answers a client that checks nothing.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        for kind, port in self.bad_ports.items():
            s = ctx.wrap_socket(socket.create_connection((ORIGIN_HOST, port),
                timeout=5), server_hostname="%s.bad.test" % kind)
            try:
                s.sendall(b"GET /control HTTP/1.0\r\nHost: x\r\n\r\n")
                data = b""
                while True:
                    b = s.recv(4096)
                    if not b:
                        break
                    data += b
            except ssl.SSLError:
                pass
            finally:
                s.close()
            self.assertTrue(data.startswith(b"HTTP/1.1 200"), (kind, data))

    # -------------------------------------------------------------- untrusted client

    def test_untrusted_client_fails(self):
        start = len(self.gw.log_text())
        r = self.curl(self.url("/ok/untrusted"), cacert=False)
        self.assertNotEqual(r.rc, 0, r)
        self.assertIn(r.rc, (35, 60), r)
        self.assertFalse(any(l["uri"] == "/ok/untrusted" for l in self.nginx.log()))
        m = self.gw.wait_log(r"client-tls-error", start=start)
        self.assertIsNotNone(m, self.gw.log_tail())
        row = self.audit_one(host="allowed.test", reason="client-tls-error")
        self.assertEqual(row["decision"], "error")
        self.assertEqual(row["kind"], "connect")

    # -------------------------------------------------------------- IP literal

    def test_ip_literal_leaf_has_ip_san(self):
        c = self.tls_tunnel(target=ORIGIN_HOST, sni=ORIGIN_HOST)
        cert = c.sock.getpeercert()
        san = cert.get("subjectAltName", ())
        self.assertIn(("IP Address", ORIGIN_HOST), san)
        self.assertFalse([v for k, v in san if k == "DNS"], san)
        r = self.get(c, "/ip/anything", host="%s:%d" % (ORIGIN_HOST, self.port))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, ("nginx %d %s GET /ip/anything\n" % (
            self.port, ORIGIN_HOST)).encode())
        row = self.audit_one(path="/ip/anything")
        self.assertEqual((row["decision"], row["rule"], row["host"]),
            ("allow", "icpt:allow[2]", ORIGIN_HOST))

    def test_ip_literal_curl(self):
        r = self.curl("https://%s:%d/ip/curl" % (ORIGIN_HOST, self.port))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)

    # -------------------------------------------------------------- WebSocket

    def _ws_roundtrip(self, port, path, text):
        c = self.tls_tunnel(port=port)
        key = base64.b64encode(os.urandom(16)).decode()
        r = self.get(c, path, host="allowed.test:%d" % port, extra=(
            "Connection: Upgrade\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n" % key))
        self.assertEqual(r.status, 101, r)
        self.assertEqual(r.header("Sec-WebSocket-Accept"), W.accept_key(key))
        self.assertEqual((r.header("Upgrade") or "").lower(), "websocket")
        c.send(W.client_frame(0x1, text.encode()))
        f = W.read_frame(c.read_exact, max_len=1 << 20)
        self.assertEqual((f.fin, f.opcode, f.masked), (True, 0x1, False))
        self.assertEqual(f.payload, text.encode())
        # A second frame, larger than 125 bytes, in the same tunnel.
        big = ("x" * 300) + text
        c.send(W.client_frame(0x1, big.encode()))
        f = W.read_frame(c.read_exact, max_len=1 << 20)
        self.assertEqual((f.opcode, f.payload), (0x1, big.encode()))
        c.send(W.client_frame(0x8, struct.pack("!H", 1000)))
        f = W.read_frame(c.read_exact, max_len=1 << 20)
        self.assertEqual(f.opcode, 0x8)
        return c

    def test_websocket_echo(self):
        n = self.ws.conn_count
        self._ws_roundtrip(self.ws.port, "/ws", "hello through sandgate")
        self.assertEqual(self.ws.conn_count, n + 1)
        heads = [h for h in self.ws.heads if h["line"] == "GET /ws HTTP/1.1"]
        self.assertTrue(heads)
        self.assertEqual(heads[-1]["headers"].get("host"),
            "allowed.test:%d" % self.ws.port)
        self.assertEqual(self.ws.unmasked, 0)
        row = self.audit_one(path="/ws", port=self.ws.port)
        self.assertEqual((row["decision"], row["status"], row["method"]),
            ("allow", 101, "GET"))

    def test_websocket_echo_via_nginx(self):
        self._ws_roundtrip(self.port, "/ws/nginx", "hello via nginx")
        lines = self.nginx.wait_log(lambda l: l["uri"] == "/ws/nginx")
        self.assertTrue(lines)
        self.assertEqual(lines[0]["status"], "101")

    def test_websocket_denied_path(self):
        n = self.ws.conn_count
        c = self.tls_tunnel(port=self.ws.port)
        key = base64.b64encode(os.urandom(16)).decode()
        r = self.get(c, "/chat", host="allowed.test:%d" % self.ws.port, extra=(
            "Connection: Upgrade\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n" % key))
        self.assert_denied_inside(r, "policy-deny")
        self.assertEqual(self.ws.conn_count, n)

    # -------------------------------------------------------------- last

    def test_zz_gateway_healthy(self):
        r = self.curl(self.url("/ok/after-everything"))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.gw.alive())


if __name__ == "__main__":
    T.main()
