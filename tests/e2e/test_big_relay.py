#!/usr/bin/python3
"""
Bulk data through every relay path of a gateway run as a default install runs
it (issue 22: user sandgate, seccomp, keeper). A default install once cut every
spliced tunnel at 1 MiB (splice was not on the seccomp list) and no test saw
it, because every test that moved more than 1 MiB ran the gateway as root.

Each test moves SIZE (64 MiB + 4099) bytes of a seeded PRNG, generated once
into a file, through one path and one direction, and asserts the SHA-256 and
length of what arrived on the other side, the bytes of its audit row, and,
at the end of each test, that no system call of the gateway's processes was
refused (kernel log records of the seccomp filter, EPERM in its log).

Paths: CONNECT passthrough (TLS, not intercepted) and an opaque tunnel
(neither TLS nor HTTP, rule `opaque: true`) -- both spliced past 1 MiB;
SOCKS5 (TLS and opaque); intercepted HTTP/1.1 (download and upload, each
with Content-Length and chunked); HTTP/2 through interception to nginx
(h2; upload by WebDAV PUT) and to an HTTP/1.1-only origin; a WebSocket
through interception (64 MiB of frames each way on one upgraded
connection); ingress (download and upload). The transparent listener has
its own file (test_big_transparent.py: it needs network namespaces).
Clients: curl, and Python sockets where curl has no verb (opaque, WebSocket).
Origins: data/big_origins.py (http.server, TLS without ALPN) and nginx.
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402
import bigflow as B  # noqa: E402

ORIGIN = "127.0.0.2"
NGINX = "/usr/sbin/nginx"
SIZE = B.SIZE
TOKEN = "tok-bigflow-0123456789abcdef01234567"
DOMAIN = "sandbox.localhost"
TLS_SLACK = B.TLS_SLACK
# A chunked body's row counts its bytes as framed (docs/audit.md)
CHUNKED = SIZE + B.chunked_framing(SIZE)

AC.REASONS.update({"ingress-unknown-host"})


between = AC.between
at_least = AC.at_least


class NginxH2:
    """nginx over TLS with http2: GET /data.bin, PUT /up/NAME (WebDAV)."""

    def __init__(self, d, cert, key, data):
        self.dir = os.path.join(d, "nginx")
        for sub in ("logs", "www", "www/up", "body"):
            os.makedirs(os.path.join(self.dir, sub))
        os.link(data, os.path.join(self.dir, "www", "data.bin"))
        self.port = T.free_port(ORIGIN)
        conf = os.path.join(self.dir, "nginx.conf")
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(conf, "w") as f:
            f.write(
                "%sworker_processes 1;\npid %s/nginx.pid;\n"
                "error_log %s/logs/error.log;\n"
                "events { worker_connections 64; }\n"
                "http {\n  access_log %s/logs/access.log;\n"
                "  client_body_temp_path %s/body;\n  proxy_temp_path %s/body;\n"
                "  fastcgi_temp_path %s/body;\n  uwsgi_temp_path %s/body;\n"
                "  scgi_temp_path %s/body;\n  default_type application/octet-stream;\n"
                "  server {\n    listen %s:%d ssl http2;\n"
                "    ssl_certificate %s;\n    ssl_certificate_key %s;\n"
                "    root %s/www;\n    client_max_body_size 0;\n"
                "    location /up/ { dav_methods PUT; }\n"
                "  }\n}\n" % ((user,) + (self.dir,) * 8 + (ORIGIN, self.port,
                                                             cert, key, self.dir)))
        self.proc = T.Proc([NGINX, "-p", self.dir, "-c", conf, "-g", "daemon off;"],
                           os.path.join(self.dir, "stderr.log"))
        if not T.wait_tcp(ORIGIN, self.port, 10 * T.SLOW, self.proc):
            self.proc.stop()
            raise RuntimeError("nginx did not listen")

    def uploaded(self, name):
        return os.path.join(self.dir, "www", "up", name)

    def stop(self):
        self.proc.stop()


class BigRelayTest(B.BulkTest, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-bigrelay-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.data, cls.sha = B.make_data(d, seed=22)
        cls.cert, key = T.make_cert(d, "tls.test",
                                    ["tls.test", "icpt.test", "nginx.test"])
        ports = B.start_origins(d, cls.data, [
            {"id": "tls", "kind": "http", "host": ORIGIN, "cert": cls.cert,
             "key": key},
            {"id": "plain", "kind": "http", "host": ORIGIN},
            {"id": "raw", "kind": "raw", "host": ORIGIN},
        ], cls.addClassCleanup)
        cls.tls_port, cls.plain_port, cls.raw_port = \
            ports["tls"], ports["plain"], ports["raw"]
        cls.nginx = None
        if os.access(NGINX, os.X_OK):
            cls.nginx = NginxH2(d, cls.cert, key, cls.data)
            cls.addClassCleanup(cls.nginx.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN) for n in
                                ("tls.test", "opaque.test", "icpt.test",
                                 "nginx.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.socks = T.free_port()
        cls.iport = T.free_port()
        cls.mport = T.free_port()
        allow = [
            {"host": "tls.test", "ports": [cls.tls_port]},                # 0
            {"host": "opaque.test", "ports": [cls.raw_port],              # 1
             "opaque": True},
            {"host": "icpt.test", "ports": [cls.tls_port],                # 2
             "tls": "intercept"},
        ]
        if cls.nginx:
            allow.append({"host": "nginx.test", "ports": [cls.nginx.port],  # 3
                          "tls": "intercept"})
        policy = {
            "sandboxes": [
                T.local_sandbox("big", sid="big"),
                {"id": "web", "policy": "big", "source": ["127.0.0.9/32"],
                 "ingress": {"address": ORIGIN, "ports": [cls.plain_port],
                             "token_sha256": T.sha256_hex(TOKEN)}},
            ],
            "policies": [{"name": "big", "allow": allow,
                          "allow_private": [ORIGIN + "/32"]}],
        }
        # A default install: the drop to the sandgate user, seccomp, keeper.
        cls.gw = T.Gateway(d, cls.dns, {"big.yaml": policy}, user="sandgate",
            extra={"listen": {"socks5": "127.0.0.1:%d" % cls.socks,
                              "ingress": "127.0.0.1:%d" % cls.iport,
                              "metrics": "127.0.0.1:%d" % cls.mport},
                   "upstream": {"ca_bundle": cls.cert}})
        cls.gw_ca = os.path.join(d, "certs", "ca.crt")
        cls.start_confined("127.0.0.1", cls.iport, 10, "ingress")

    # ------------------------------------------------------------ helpers

    def curl(self, url, args=(), proxy=None):
        """curl; (CurlResult, (length, sha256) of the body it got)."""
        r = T.curl(url, proxy=proxy, tmp=self.td.path, timeout=180,
                   args=list(args))
        return r, B.digest_body(r)

    def assertArrived(self, got, what):
        self.assertEqual(got, (SIZE, self.sha), "%s: length and SHA-256 of "
                         "what arrived" % what)

    def assertUploaded(self, r, what):
        self.assertEqual((r.rc, r.status), (0, 200), r)
        doc = r.json()
        self.assertEqual((doc["body_len"], doc["body_sha256"]), (SIZE, self.sha),
                         "%s: what the origin received" % what)
        return doc

    def tunnel_row(self, client, kind, host, port, rule, up, down, method="CONNECT"):
        self.audit.expect({"client": client, "kind": kind, "method": method},
                          decision="allow", sandbox="big", host=host, ip=ORIGIN,
                          port=port, path=None, status=200, rule=rule,
                          reason=None, credential=None, bytes_up=up,
                          bytes_down=down)
        self.audit.check()

    def request_row(self, client, method, path, host, port, rule, up, down,
                    kind="connect", status=200):
        self.audit.expect({"client": client, "method": method, "path": path},
                          decision="allow", kind=kind, sandbox="big", host=host,
                          ip=ORIGIN, port=port, status=status, rule=rule,
                          reason=None, credential=None, bytes_up=up,
                          bytes_down=down)
        self.audit.check()

    # ------------------------------------------------------------ CONNECT

    def test_connect_tls_passthrough_download(self):
        before = self.spliced()
        r, got = self.curl("https://tls.test:%d/file" % self.tls_port,
                           ["--cacert", self.cert], proxy=self.gw.url)
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertArrived(got, "CONNECT passthrough download")
        self.assertEqual(self.spliced(), before + 1)
        self.tunnel_row(AC.client_of_curl(r), "connect", "tls.test",
                        self.tls_port, "big:allow[0]",
                        between(500, 64 * 1024), between(SIZE, SIZE + TLS_SLACK))

    def test_connect_tls_passthrough_upload(self):
        before = self.spliced()
        r = T.curl("https://tls.test:%d/upload" % self.tls_port,
                   proxy=self.gw.url, tmp=self.td.path, timeout=180,
                   args=["--cacert", self.cert, "--data-binary", "@" + self.data])
        self.assertUploaded(r, "CONNECT passthrough upload")
        self.assertEqual(self.spliced(), before + 1)
        self.tunnel_row(AC.client_of_curl(r), "connect", "tls.test",
                        self.tls_port, "big:allow[0]",
                        between(SIZE, SIZE + TLS_SLACK), between(500, 64 * 1024))

    def opaque_tunnel(self):
        c, r = T.open_tunnel(self.gw.port, "opaque.test:%d" % self.raw_port,
                             timeout=120)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        return c

    def test_connect_opaque_download(self):
        before = self.spliced()
        c = self.opaque_tunnel()
        got = B.raw_down(c.sock)
        client = AC.client_of_conn(c)
        c.close()
        self.assertArrived(got, "CONNECT opaque download")
        self.assertEqual(self.spliced(), before + 1)
        self.tunnel_row(client, "connect", "opaque.test", self.raw_port,
                        "big:allow[1]", B.RAW_DOWN_HEAD, SIZE)

    def test_connect_opaque_upload(self):
        before = self.spliced()
        c = self.opaque_tunnel()
        got = B.raw_up(c.sock, self.data, SIZE)
        client = AC.client_of_conn(c)
        c.close()
        self.assertArrived(got, "CONNECT opaque upload")
        self.assertEqual(self.spliced(), before + 1)
        self.tunnel_row(client, "connect", "opaque.test", self.raw_port,
                        "big:allow[1]", B.RAW_UP_HEAD + SIZE, B.RAW_UP_ANSWER)

    # ------------------------------------------------------------ SOCKS5

    def test_socks5_tls_download(self):
        before = self.spliced()
        r, got = self.curl("https://tls.test:%d/file" % self.tls_port,
                           ["--cacert", self.cert], proxy="socks5h://127.0.0.1:%d"
                           % self.socks)
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertArrived(got, "SOCKS5 download")
        self.assertEqual(self.spliced(), before + 1)
        self.tunnel_row(AC.client_of_curl(r), "socks5", "tls.test",
                        self.tls_port, "big:allow[0]",
                        between(500, 64 * 1024), between(SIZE, SIZE + TLS_SLACK))

    def test_socks5_tls_upload(self):
        before = self.spliced()
        r = T.curl("https://tls.test:%d/upload" % self.tls_port,
                   proxy="socks5h://127.0.0.1:%d" % self.socks, tmp=self.td.path,
                   timeout=180, args=["--cacert", self.cert, "-T", self.data])
        self.assertUploaded(r, "SOCKS5 upload")
        self.assertEqual(self.spliced(), before + 1)
        self.tunnel_row(AC.client_of_curl(r), "socks5", "tls.test",
                        self.tls_port, "big:allow[0]",
                        between(SIZE, SIZE + TLS_SLACK), between(500, 64 * 1024))

    def test_socks5_opaque_both_ways(self):
        before = self.spliced()
        s = B.socks5_connect(self.socks, "opaque.test", self.raw_port)
        self.addCleanup(s.close)
        client = AC.client_of_sock(s)
        got = B.raw_down(s)
        s.close()
        self.assertArrived(got, "SOCKS5 opaque download")
        s2 = B.socks5_connect(self.socks, "opaque.test", self.raw_port)
        self.addCleanup(s2.close)
        client2 = AC.client_of_sock(s2)
        got = B.raw_up(s2, self.data, SIZE)
        s2.close()
        self.assertArrived(got, "SOCKS5 opaque upload")
        self.assertEqual(self.spliced(), before + 2)
        self.tunnel_row(client, "socks5", "opaque.test", self.raw_port,
                        "big:allow[1]", B.RAW_DOWN_HEAD, SIZE)
        self.tunnel_row(client2, "socks5", "opaque.test", self.raw_port,
                        "big:allow[1]", B.RAW_UP_HEAD + SIZE, B.RAW_UP_ANSWER)

    # ------------------------------------------------------------ interception, HTTP/1.1

    def icpt_url(self, path):
        return "https://icpt.test:%d%s" % (self.tls_port, path)

    def test_intercept_download_content_length(self):
        r, got = self.curl(self.icpt_url("/file"), ["--cacert", self.gw_ca,
                           "--http1.1"], proxy=self.gw.url)
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(r.header("content-length"), str(SIZE))
        self.assertArrived(got, "intercepted download, Content-Length")
        self.request_row(AC.client_of_curl(r), "GET", "/file", "icpt.test",
                         self.tls_port, "big:allow[2]", 0, SIZE)

    def test_intercept_download_chunked(self):
        r, got = self.curl(self.icpt_url("/file?chunked"), ["--cacert",
                           self.gw_ca, "--http1.1"], proxy=self.gw.url)
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(r.header("transfer-encoding"), "chunked")
        self.assertArrived(got, "intercepted download, chunked")
        self.request_row(AC.client_of_curl(r), "GET", "/file?chunked",
                         "icpt.test", self.tls_port, "big:allow[2]", 0, CHUNKED)

    def test_intercept_upload_content_length(self):
        r = T.curl(self.icpt_url("/upload"), proxy=self.gw.url, tmp=self.td.path,
                   timeout=180, args=["--cacert", self.gw_ca, "--http1.1",
                                      "--data-binary", "@" + self.data])
        doc = self.assertUploaded(r, "intercepted upload, Content-Length")
        self.assertEqual(doc["cl"], str(SIZE))
        self.request_row(AC.client_of_curl(r), "POST", "/upload", "icpt.test",
                         self.tls_port, "big:allow[2]", SIZE, between(60, 400))

    def test_intercept_upload_chunked(self):
        r = T.curl(self.icpt_url("/upload-chunked"), proxy=self.gw.url,
                   tmp=self.td.path, timeout=180,
                   args=["--cacert", self.gw_ca, "--http1.1", "-H",
                         "Transfer-Encoding: chunked", "--data-binary",
                         "@" + self.data])
        doc = self.assertUploaded(r, "intercepted upload, chunked")
        self.assertEqual((doc["te"], doc["cl"]), ("chunked", None))
        self.assertGreater(doc["wire_len"], SIZE)
        self.request_row(AC.client_of_curl(r), "POST", "/upload-chunked",
                         "icpt.test", self.tls_port, "big:allow[2]",
                         doc["wire_len"], between(60, 400))

    # ------------------------------------------------------------ interception, HTTP/2

    def h2(self, url, args=()):
        return self.curl(url, ["--cacert", self.gw_ca, "--http2"] + list(args),
                         proxy=self.gw.url)

    def need_nginx(self):
        if self.nginx is None:
            self.skipTest("%s is not installed (scripts/install-deps.sh)" % NGINX)

    def test_h2_nginx_download(self):
        self.need_nginx()
        r, got = self.h2("https://nginx.test:%d/data.bin" % self.nginx.port)
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.assertArrived(got, "HTTP/2 download from nginx (h2)")
        self.request_row(AC.client_of_curl(r), "GET", "/data.bin", "nginx.test",
                         self.nginx.port, "big:allow[3]", 0, SIZE)

    def test_h2_nginx_upload(self):
        self.need_nginx()
        name = "put-%d.bin" % os.getpid()
        r = T.curl("https://nginx.test:%d/up/%s" % (self.nginx.port, name),
                   proxy=self.gw.url, tmp=self.td.path, timeout=180,
                   args=["--cacert", self.gw_ca, "--http2", "-T", self.data])
        self.assertEqual(r.rc, 0, r)
        self.assertIn(r.status, (201, 204), r)
        self.assertEqual(r.info.get("http_version"), "2", r)
        path = self.nginx.uploaded(name)
        self.assertArrived(B.sha256_file(path), "HTTP/2 upload to nginx (h2)")
        os.unlink(path)
        self.request_row(AC.client_of_curl(r), "PUT", "/up/" + name, "nginx.test",
                         self.nginx.port, "big:allow[3]", SIZE, between(0, 400),
                         status=r.status)

    def test_h2_http1_origin_download(self):
        r, got = self.h2(self.icpt_url("/file"))
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.assertArrived(got, "HTTP/2 download from an HTTP/1.1 origin")
        self.request_row(AC.client_of_curl(r), "GET", "/file", "icpt.test",
                         self.tls_port, "big:allow[2]", 0, SIZE)

    def test_h2_http1_origin_download_chunked(self):
        r, got = self.h2(self.icpt_url("/file?chunked"))
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.assertArrived(got, "HTTP/2 download from an HTTP/1.1 origin, chunked")
        self.request_row(AC.client_of_curl(r), "GET", "/file?chunked",
                         "icpt.test", self.tls_port, "big:allow[2]", 0, CHUNKED)

    def test_h2_http1_origin_upload(self):
        r = T.curl(self.icpt_url("/upload-h2"), proxy=self.gw.url,
                   tmp=self.td.path, timeout=180,
                   args=["--cacert", self.gw_ca, "--http2", "--data-binary",
                         "@" + self.data])
        self.assertUploaded(r, "HTTP/2 upload to an HTTP/1.1 origin")
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.request_row(AC.client_of_curl(r), "POST", "/upload-h2", "icpt.test",
                         self.tls_port, "big:allow[2]", SIZE, between(60, 400))

    # ------------------------------------------------------------ WebSocket

    def test_websocket_both_ways(self):
        c, r = T.open_tunnel(self.gw.port, "icpt.test:%d" % self.tls_port,
                             timeout=120)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        client = AC.client_of_conn(c)
        tls = B.tls_client_ctx(self.gw_ca).wrap_socket(
            c.sock, server_hostname="icpt.test")
        c.sock = tls
        ws = B.WsClient(tls, "icpt.test:%d" % self.tls_port)
        self.assertEqual(ws.status, 101, ws.head)
        self.assertTrue(ws.accept_ok, ws.head)
        up = ws.upload(self.data)
        self.assertEqual((up["len"], up["sha256"]), (SIZE, self.sha),
                         "WebSocket upload: what the origin received")
        self.assertArrived(ws.download(), "WebSocket download")
        self.assertEqual(ws.close(), 8)
        c.close()
        # One row when the upgraded connection ends (docs/audit.md), with
        # every byte it moved: frames of 1 MiB, the text frames "end" and
        # "down", and the close frame, masked up; at least the frames down.
        up = B.ws_wire_bytes(SIZE) + 2 * (2 + 4) + len(b"end") + len(b"down") \
            + 2 + 4 + 2
        self.request_row(client, "GET", "/ws", "icpt.test", self.tls_port,
                         "big:allow[2]", between(up, up),
                         at_least(B.ws_wire_bytes(SIZE, masked=False)),
                         status=101)

    # ------------------------------------------------------------ ingress

    def ingress_host(self):
        return "%d-web.%s" % (self.plain_port, DOMAIN)

    def ingress_row(self, client, method, path, up, down):
        self.audit.expect({"client": client, "method": method, "path": path},
                          decision="allow", kind="ingress", sandbox="web",
                          host=self.ingress_host(), ip=ORIGIN,
                          port=self.plain_port, status=200, rule="ingress",
                          reason=None, credential=None, bytes_up=up,
                          bytes_down=down)
        self.audit.check()

    def ingress_args(self):
        return ["-H", "Host: " + self.ingress_host(), "-H",
                "X-Sandgate-Token: " + TOKEN]

    def test_ingress_download(self):
        for path in ("/file", "/file?chunked"):
            r, got = self.curl("http://127.0.0.1:%d%s" % (self.iport, path),
                               self.ingress_args())
            self.assertEqual((r.rc, r.status), (0, 200), r)
            self.assertArrived(got, "ingress download " + path)
            self.ingress_row(AC.client_of_curl(r), "GET", path, 0,
                             CHUNKED if "chunked" in path else SIZE)

    def test_ingress_upload(self):
        for te in ([], ["-H", "Transfer-Encoding: chunked"]):
            r = T.curl("http://127.0.0.1:%d/upload" % self.iport,
                       tmp=self.td.path, timeout=180,
                       args=self.ingress_args() + te + ["--data-binary",
                                                        "@" + self.data])
            doc = self.assertUploaded(r, "ingress upload %r" % te)
            self.assertEqual(doc["te"], "chunked" if te else None)
            self.ingress_row(AC.client_of_curl(r), "POST", "/upload",
                             doc["wire_len"], between(60, 400))


if __name__ == "__main__":
    T.main()
