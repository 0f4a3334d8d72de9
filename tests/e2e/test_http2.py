#!/usr/bin/python3
"""
HTTP/2 through interception (issue 15): intercepted tunnels offer h2 and
http/1.1 in ALPN; every HTTP/2 stream is an HTTP/1.1 request to the origin,
decided, swapped, scrubbed and audited on its own.

Real clients: curl --http2 through CONNECT, Python grpcio (unary and streaming
calls with metadata credentials to an HTTP/2 origin; to an HTTP/1.1-only
origin they are refused with a clear status), and a raw HTTP/2 client built here from hand-made frames (HPACK by
python3-hpack) for what well-behaved clients never send: a placeholder split
across DATA frames or in trailers, :authority unlike the SNI, floods.
"""

import hashlib
import os
import select
import socket
import ssl
import struct
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA, EchoOrigin, admin_request, \
    placeholders_of  # noqa: E402

try:
    import hpack
except ImportError:
    hpack = None
try:
    import grpc
except ImportError:
    grpc = None

NGINX = "/usr/sbin/nginx"
BIG = 16 * 1024 * 1024

ORIGIN_HOST = "127.0.0.2"
SECRET = "sk-H2/e2e+Secret_0123456789abcdefghijXYZ_v1"
PH = "sgtest-h2-placeholder-0000000001"
OTHER_PH = "sgtest-h2-placeholder-other-0002"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0, 1, 2, 3
REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 7, 8, 9, 11

POLICY = """\
sandboxes:
  - id: box-h2
    policy: agent
    source: [127.0.0.1/32]
  - id: box-other
    policy: other
    token_sha256: "{other_tok}"
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{port}]
        tls: intercept
        paths: ["/echo*", "/leak/*", "/up*", "/big*", "/test.Echo/*"]
      - host: plain.test
        ports: [{port}]
        tls: intercept
      - host: nginx.test
        ports: [{nginx}]
        tls: intercept
      - host: nginx-cred.test
        ports: [{nginx}]
        tls: intercept
      - host: grpc.test
        ports: [{grpc}]
        tls: intercept
        paths: ["/test.Echo/*"]
    allow_private: [{origin}/32]
    credentials: [h2-key]
  - name: other
    allow:
      - host: bound.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [h2-key]
credentials:
  - name: h2-key
    secret: h2-secret
    hosts: [bound.test, grpc.test, nginx-cred.test]
    headers: [Authorization]
"""


class NginxH2:
    """nginx speaking HTTP/2 and HTTP/1.1 over TLS (ALPN): /big.bin, /proto."""

    def __init__(self, tmp, cert, key, keepalive_requests=5, http2=True,
                 name="nginx"):
        self.dir = os.path.join(tmp, name)
        os.makedirs(os.path.join(self.dir, "logs"))
        os.makedirs(os.path.join(self.dir, "www"))
        data = bytes(range(256)) * (BIG // 256)
        with open(os.path.join(self.dir, "www", "big.bin"), "wb") as f:
            f.write(data)
        self.big_sha = hashlib.sha256(data).hexdigest()
        self.port = T.free_port(ORIGIN_HOST)
        user = "user root;\n" if os.geteuid() == 0 else ""
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(
                "%sworker_processes 1;\npid %s/nginx.pid;\n"
                "error_log %s/logs/error.log info;\n"
                "events { worker_connections 256; }\n"
                "http {\n  log_format a '$server_protocol $uri $http_authorization';\n"
                "  access_log %s/logs/access.log a;\n"
                "  client_body_temp_path %s/body;\n  proxy_temp_path %s/p;\n"
                "  fastcgi_temp_path %s/f;\n  uwsgi_temp_path %s/u;\n"
                "  scgi_temp_path %s/s;\n  default_type text/plain;\n"
                "  keepalive_requests %d;\n"
                "  server {\n    listen %s:%d ssl%s;\n"
                "    ssl_certificate %s;\n    ssl_certificate_key %s;\n"
                "    root %s/www;\n"
                "    location /proto { return 200 \"$server_protocol "
                "$request_method $uri\\n\"; }\n"
                "    location /leak { add_header X-Leak $http_authorization; "
                "return 200 \"$server_protocol auth=$http_authorization\\n\"; }\n"
                "  }\n}\n" % (user, self.dir, self.dir, self.dir, self.dir, self.dir,
                               self.dir, self.dir, self.dir, keepalive_requests,
                               ORIGIN_HOST, self.port,
                               " http2" if http2 else "", cert, key, self.dir))
        self.proc = T.Proc([NGINX, "-p", self.dir, "-c", conf, "-g",
                            "daemon off;"], os.path.join(self.dir, "stderr.log"))
        if not T.wait_tcp(ORIGIN_HOST, self.port, 10 * T.SLOW, self.proc):
            self.proc.stop()
            raise RuntimeError("nginx did not listen")

    def access(self):
        try:
            with open(os.path.join(self.dir, "logs", "access.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        self.proc.stop()


class GrpcOrigin:
    """A grpcio server over TLS: /test.Echo/Unary and /test.Echo/Stream (bytes)."""

    def __init__(self, cert, key):
        self.seen = []

        def echo(ctx, m):
            # The credential as received: the gateway must scrub it back.
            return ("auth=%s;msg=" % dict(ctx.invocation_metadata()).get(
                "authorization", "")).encode() + m

        def unary(req, ctx):
            self.seen.append(dict(ctx.invocation_metadata()))
            return echo(ctx, req)

        def stream(it, ctx):
            self.seen.append(dict(ctx.invocation_metadata()))
            for m in it:
                yield echo(ctx, m)

        from concurrent import futures
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "test.Echo", {
                "Unary": grpc.unary_unary_rpc_method_handler(unary),
                "Stream": grpc.stream_stream_rpc_method_handler(stream)}),))
        with open(cert, "rb") as f:
            c = f.read()
        with open(key, "rb") as f:
            k = f.read()
        creds = grpc.ssl_server_credentials(((k, c),))
        self.port = self.server.add_secure_port("%s:0" % ORIGIN_HOST, creds)
        self.server.start()

    def stop(self):
        self.server.stop(0)


class SerialTLS:
    """
    One TLS connection shared by a reading thread and writing threads.
    OpenSSL does not allow SSL_read and SSL_write on one connection at
    once: an origin whose reader and answer threads did so lost what it
    read (its kernel receive queue held the gateway's next request while
    its reader waited forever). Each call here holds a lock, and none
    waits while holding it for the peer's bytes: the socket is
    non-blocking, recv waits outside the lock, sendall in select.
    """

    def __init__(self, s, timeout):
        s.setblocking(False)
        self.s, self.timeout = s, timeout
        self.lock = threading.Lock()

    def fileno(self):
        return self.s.fileno()

    def _wait(self, want_write, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("TLS %s timed out" %
                                 ("send" if want_write else "recv"))
        w = [self.s] if want_write else []
        select.select([] if want_write else [self.s], w, [], min(left, 0.2))

    def recv(self, n):
        deadline = time.monotonic() + self.timeout
        while True:
            with self.lock:
                try:
                    return self.s.recv(n)
                except ssl.SSLWantReadError:
                    want_write = False
                except ssl.SSLWantWriteError:
                    want_write = True
            self._wait(want_write, deadline)

    def sendall(self, b):
        view = memoryview(b)
        deadline = time.monotonic() + self.timeout
        with self.lock:
            while view:
                try:
                    view = view[self.s.send(view):]
                except ssl.SSLWantWriteError:
                    self._wait(True, deadline)
                except ssl.SSLWantReadError:
                    self._wait(False, deadline)

    def shutdown(self, how):
        """The TCP connection's, under the TLS (no close_notify)."""
        socket.socket.shutdown(self.s, how)

    def close(self):
        self.s.close()


class H2OriginBase:
    """A TLS origin on host that offers only h2: each connection's TLS
    socket goes to serve_h2(s, idx) in a thread of its own (idx: its
    number, from 0), which a subclass writes; whatever it raises ends that
    connection. s is a SerialTLS: threads of the subclass may read and
    write it at once. stop() closes the listener and every connection."""

    def __init__(self, cert, key, host, backlog=16, timeout=20):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(["h2"])
        self.timeout = timeout
        self.mu = threading.Lock()
        self.socks = []
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((host, 0))
        self.ls.listen(backlog)
        self.port = self.ls.getsockname()[1]
        self.stopping = False
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.mu:
                idx = len(self.socks)
                self.socks.append(c)
            threading.Thread(target=self._conn, args=(c, idx),
                             daemon=True).start()

    def _conn(self, c, idx):
        try:
            c.settimeout(self.timeout)
            self.serve_h2(SerialTLS(self.ctx.wrap_socket(c, server_side=True),
                                    self.timeout), idx)
        except Exception:
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def serve_h2(self, s, idx):
        raise NotImplementedError

    def stop(self):
        self.stopping = True
        try:
            self.ls.close()
        except OSError:
            pass
        with self.mu:
            socks = list(self.socks)
        for c in socks:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def read_frame(s, buf):
    """One frame from socket s, buf a one-element list holding what was
    read past the last frame: (type, flags, stream id, payload)."""
    while len(buf[0]) < 9:
        b = s.recv(65536)
        if not b:
            raise EOFError
        buf[0] += b
    n = struct.unpack("!I", b"\0" + buf[0][:3])[0]
    while len(buf[0]) < 9 + n:
        b = s.recv(65536)
        if not b:
            raise EOFError
        buf[0] += b
    typ, flags = buf[0][3], buf[0][4]
    sid = struct.unpack("!I", buf[0][5:9])[0] & 0x7fffffff
    p = buf[0][9:9 + n]
    buf[0] = buf[0][9 + n:]
    return typ, flags, sid, p


def frame(typ, flags, sid, payload=b""):
    return struct.pack("!I", len(payload))[1:] + bytes([typ, flags]) + \
        struct.pack("!I", sid) + payload


class H2:
    """A raw HTTP/2 client over CONNECT and TLS (the gateway's CA trusted)."""

    def __init__(self, test, host, port, settings=((4, 1 << 20),), window=True):
        self.t = test
        c, r = T.open_tunnel(test.gw.port, "%s:%d" % (host, port))
        test.addCleanup(c.close)
        test.assertEqual(r.status, 200, r)
        ctx = ssl.create_default_context(cafile=test.gw_ca)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        self.sock = ctx.wrap_socket(c.sock, server_hostname=host)
        self.sock.settimeout(10 * T.SLOW)
        test.addCleanup(self.sock.close)
        self.alpn = self.sock.selected_alpn_protocol()
        self.authority = "%s:%d" % (host, port)
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.streams = {}
        self.goaway = None
        self.closed = False
        self.window = window
        self.rsts = []
        self.last_ping_ack = None
        self.window_updates = {}      # stream id (0: connection) -> bytes granted
        payload = b"".join(struct.pack("!HI", k, v) for k, v in settings)
        self.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                  frame(SETTINGS, 0, 0, payload))
        if window:
            self.send(frame(WINDOW_UPDATE, 0, 0, struct.pack("!I", 1 << 24)))

    def send(self, b):
        try:
            self.sock.sendall(b)
        except (OSError, ssl.SSLError):
            self.closed = True

    def block(self, sid, method="GET", path="/echo", extra=(), authority=None):
        fields = [(":method", method), (":scheme", "https"),
                  (":authority", authority or self.authority), (":path", path)]
        return self.enc.encode(fields + list(extra))

    def request(self, sid, method="GET", path="/echo", extra=(), body=None,
                authority=None):
        blk = self.block(sid, method, path, extra, authority)
        self.send(frame(HEADERS, END_HEADERS | (END_STREAM if body is None else 0),
                        sid, blk))
        if body is not None:
            self.send(frame(DATA, END_STREAM, sid, body))

    def _read(self):
        while len(self.buf) < 9:
            b = self.sock.recv(65536)
            if not b:
                raise EOFError
            self.buf += b
        n = struct.unpack("!I", b"\0" + self.buf[:3])[0]
        while len(self.buf) < 9 + n:
            b = self.sock.recv(65536)
            if not b:
                raise EOFError
            self.buf += b
        typ, flags = self.buf[3], self.buf[4]
        sid = struct.unpack("!I", self.buf[5:9])[0] & 0x7fffffff
        payload = self.buf[9:9 + n]
        self.buf = self.buf[9 + n:]
        return typ, flags, sid, payload

    def stream(self, sid):
        return self.streams.setdefault(sid, {"headers": [], "data": b"",
                                             "done": False, "rst": None})

    def pump(self):
        """Read one frame and account for it; False once the connection ended."""
        try:
            typ, flags, sid, p = self._read()
        except (EOFError, OSError, ssl.SSLError):
            self.closed = True
            return False
        if typ == SETTINGS and not flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        elif typ == PING and flags & ACK:
            self.last_ping_ack = p
        elif typ == GOAWAY:
            self.goaway = struct.unpack("!II", p[:8])[1]
        elif typ == WINDOW_UPDATE:
            self.window_updates[sid] = self.window_updates.get(sid, 0) + \
                (struct.unpack("!I", p[:4])[0] & 0x7fffffff)
        elif typ == RST_STREAM:
            st = self.stream(sid)
            st["rst"] = struct.unpack("!I", p[:4])[0]
            st["done"] = True
            self.rsts.append(sid)
        elif typ == HEADERS:
            st = self.stream(sid)
            st["headers"].append(dict(self.dec.decode(p)))
            if flags & END_STREAM:
                st["done"] = True
        elif typ == DATA:
            st = self.stream(sid)
            st["data"] += p
            if self.window and p:
                self.send(frame(WINDOW_UPDATE, 0, sid, struct.pack("!I", len(p))))
                self.send(frame(WINDOW_UPDATE, 0, 0, struct.pack("!I", len(p))))
            if flags & END_STREAM:
                st["done"] = True
        return True

    def wait(self, *sids):
        while not all(self.stream(s)["done"] for s in sids):
            if not self.pump():
                break
        return [self.stream(s) for s in sids]

    def wait_goaway(self):
        while self.goaway is None and self.pump():
            pass
        return self.goaway

    @staticmethod
    def status(st):
        return int(st["headers"][0][":status"]) if st["headers"] else None


class Http2Test(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if hpack is None:
            T.skip_file("python3-hpack is not installed")
        cls.td = T.TempDir("sgtest-h2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cert, key = cls.pki.leaf("bound.test", ["bound.test", "plain.test",
                                                "nginx.test", "grpc.test",
                                                "nginx-cred.test"])
        cls.cert, cls.key = cert, key
        cls.origin = EchoOrigin("h1", cert, key)
        cls.addClassCleanup(cls.origin.stop)
        cls.nginx = NginxH2(d, cert, key)
        cls.addClassCleanup(cls.nginx.stop)
        cls.grpc = GrpcOrigin(cert, key) if grpc is not None else None
        if cls.grpc is not None:
            cls.addClassCleanup(cls.grpc.stop)
        cls.dns = T.Dnsmasq(d, [("bound.test", ORIGIN_HOST),
                                ("plain.test", ORIGIN_HOST),
                                ("nginx.test", ORIGIN_HOST),
                                ("nginx-cred.test", ORIGIN_HOST),
                                ("grpc.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.other_tok = "other-token-h2"
        cls.socks_port = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"h2.yaml": POLICY.format(
            port=cls.origin.port, origin=ORIGIN_HOST, nginx=cls.nginx.port,
            grpc=cls.grpc.port if cls.grpc else 1,
            other_tok=T.sha256_hex(cls.other_tok))},
            extra={"upstream": {"ca_bundle": cls.pki.cert},
                   "listen": {"admin": os.path.join(d, "admin.sock"),
                              "socks5": "127.0.0.1:%d" % cls.socks_port},
                   "limits": {"max_header_bytes": 6144,
                              "http2": {"max_concurrent_streams": 8,
                                        "max_resets_per_second": 20,
                                        "max_control_per_second": 20,
                                        "max_header_list_bytes": 8192}}})
        r = T.run_sandgate("vault", "set", "h2-secret", "-c", cls.gw.cfg_path,
                           input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        admin = os.path.join(d, "admin.sock")
        cls.gw_ca = cls.gw.wait_admin(admin)
        st, _, doc = admin_request(admin, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        listing = {e["id"]: e for e in doc["sandboxes"]}
        cls.ph = placeholders_of(listing["box-h2"])["h2-key"]["placeholder"]
        cls.other_ph = placeholders_of(listing["box-other"])["h2-key"][
            "placeholder"]

    # ------------------------------------------------------------ helpers

    def curl2(self, path, args=(), host="bound.test"):
        return T.curl("https://%s:%d%s" % (host, self.origin.port, path),
                      proxy=self.gw.url, args=["--http2", "--cacert",
                                               self.gw_ca] + list(args))

    def row(self, **match):
        rows = self.gw.wait_audit(**match)
        self.assertTrue(rows, "no audit row %r; last rows: %r" % (
            match, self.gw.audit_rows()[-4:]))
        return rows[-1]

    def assert_no_secret(self, blob):
        if isinstance(blob, str):
            blob = blob.encode()
        self.assertNotIn(SECRET.encode(), blob)

    # ------------------------------------------------------------ tests

    def test_curl_h2_swap_and_scrub(self):
        r = self.curl2("/echo/curl", ["-H", "Authorization: Bearer " + self.ph])
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.info.get("http_version"), "2", r.info)
        self.assertEqual(r.status, 200)
        reqs = self.origin.find("/echo/curl")
        self.assertEqual(len(reqs), 1)
        self.assertEqual(reqs[0]["seen"], SECRET)     # the secret went in
        self.assertTrue(reqs[0]["line"].endswith("HTTP/1.1"))
        # The echo of it comes back as the placeholder, header and body.
        self.assert_no_secret(r.body)
        self.assertIn(self.ph.encode(), r.body)
        self.assertEqual(r.header("x-echo-authorization"), "Bearer " + self.ph)
        row = self.row(path="/echo/curl")
        self.assertEqual(row["decision"], "allow")
        self.assertEqual(row["method"], "GET")
        self.assertEqual(row["status"], 200)
        self.assertEqual(row["credential"], "h2-key")

    def test_socks5_h2(self):
        r = T.curl("https://bound.test:%d/echo/socks" % self.origin.port,
                   args=["--socks5-hostname", "127.0.0.1:%d" % self.socks_port,
                         "--http2", "--cacert", self.gw_ca,
                         "-H", "Authorization: Bearer " + self.ph])
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.info.get("http_version"), "2")
        self.assertEqual(r.status, 200)
        self.assertEqual(self.origin.find("/echo/socks")[0]["seen"], SECRET)
        self.assert_no_secret(r.body)
        row = self.row(path="/echo/socks")
        self.assertEqual(row["kind"], "socks5")
        self.assertEqual(row["decision"], "allow")

    def test_curl_h2_post_body(self):
        body = b"x" * 200000
        path = "/up/post"
        bf = os.path.join(self.td.path, "post-body")
        with open(bf, "wb") as f:
            f.write(body)
        r = self.curl2(path, ["--data-binary", "@" + bf])
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.status, 200)
        reqs = self.origin.find(path)
        self.assertEqual(len(reqs), 1)
        self.assertEqual(len(reqs[0]["body"]), len(body))
        row = self.row(path=path)
        self.assertEqual(row["bytes_up"], len(body))

    def test_curl_h2_leak_scrubbed(self):
        for mode in ("chunked", "length", "close"):
            with self.subTest(mode=mode):
                r = self.curl2("/leak/raw/" + mode,
                               ["-H", "Authorization: Bearer " + self.ph])
                self.assertEqual(r.rc, 0, r.stderr)
                self.assertEqual(r.status, 200)
                self.assert_no_secret(r.body)
                self.assertEqual(r.body.count(self.ph.encode()), 3)
                self.assertEqual(r.header("x-leak"), self.ph)

    def test_curl_h2_placeholder_in_body(self):
        r = self.curl2("/echo/body", ["--data-binary", "k=" + self.ph])
        self.assertEqual(r.status, 403)
        self.assertEqual(r.header("x-sandgate-reason"), "credential-misuse")
        self.assertFalse(self.origin.received(self.ph))
        row = self.row(path="/echo/body")
        self.assertEqual(row["decision"], "deny")
        self.assertEqual(row["reason"], "credential-misuse")

    def test_curl_h2_path_denied(self):
        r = self.curl2("/admin")
        self.assertEqual(r.status, 403)
        self.assertEqual(r.info.get("http_version"), "2")
        self.assertEqual(r.header("x-sandgate-reason"), "policy-deny")
        self.assertEqual(self.origin.find("/admin"), [])
        row = self.row(path="/admin")
        self.assertEqual(row["decision"], "deny")

    def test_curl_h2_ambiguous_path(self):
        r = self.curl2("/echo/%2e%2e/admin", ["--path-as-is"])
        self.assertIn(r.status, (400, 403))
        self.assertEqual(self.origin.find("/echo/%2e%2e"), [])

    def test_streams_decided_alone(self):
        h = H2(self, "bound.test", self.origin.port)
        self.assertEqual(h.alpn, "h2")
        h.request(1, path="/echo/s1")
        h.request(3, path="/forbidden/s3")
        h.request(5, path="/echo/s5",
                  extra=[("authorization", "Bearer " + self.ph)])
        s1, s3, s5 = h.wait(1, 3, 5)
        self.assertEqual(H2.status(s1), 200)
        self.assertEqual(H2.status(s3), 403)
        self.assertEqual(s3["headers"][0].get("x-sandgate-reason"), "policy-deny")
        self.assertEqual(H2.status(s5), 200)
        self.assertIn(self.ph.encode(), s5["data"])
        self.assert_no_secret(s5["data"])
        self.assertEqual(self.origin.find("/echo/s5")[0]["seen"], SECRET)
        self.assertIsNone(h.goaway)
        # The connection goes on after a refusal.
        h.request(7, path="/echo/s7")
        s7, = h.wait(7)
        self.assertEqual(H2.status(s7), 200)

    def test_streams_one_after_another_decided_afresh(self):
        """
        Streams one after another reuse the HTTP/1.1 origin connection
        the stream before left in the connection's pool; nothing of one stream's decision or
        credential carries into the next.
        """
        h = H2(self, "bound.test", self.origin.port)
        h.request(1, path="/echo/seq1",
                  extra=[("authorization", "Bearer " + self.ph)])
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200)
        h.request(3, path="/forbidden/seq2")
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 403)
        h.request(5, path="/echo/seq3")
        st, = h.wait(5)
        self.assertEqual(H2.status(st), 200)
        h.request(7, path="/echo/seq4", extra=[("x-other", self.ph)])
        st, = h.wait(7)
        self.assertEqual(H2.status(st), 403)
        h.request(9, "POST", "/echo/seq5", body=b"plain body")
        st, = h.wait(9)
        self.assertEqual(H2.status(st), 200)
        self.assertEqual(self.origin.find("/echo/seq1")[0]["seen"], SECRET)
        self.assertIsNone(self.origin.find("/echo/seq3")[0]["seen"])
        self.assertEqual(self.origin.find("/echo/seq4"), [])
        self.assertEqual(self.origin.find("/echo/seq5")[0]["body"], b"plain body")
        self.assertEqual(self.origin.find("/forbidden"), [])
        self.row(path="/echo/seq5")  # the writer is asynchronous
        rows = {r["path"]: r for r in self.gw.audit_rows(host="bound.test")
                if (r["path"] or "").startswith(("/echo/seq", "/forbidden/seq"))}
        self.assertEqual(rows["/echo/seq1"]["credential"], "h2-key")
        self.assertIsNone(rows["/echo/seq3"]["credential"])
        self.assertEqual(rows["/forbidden/seq2"]["decision"], "deny")
        self.assertEqual(rows["/echo/seq4"]["reason"], "credential-misuse")

    def test_streams_share_an_idle_stream_session(self):
        # Streams of one connection, one after another and then side by
        # side, to an HTTP/1.1 origin: a stream that answered leaves its
        # origin connection in the connection's pool for the next stream,
        # so the origin sees few connections, not one per stream.
        h = H2(self, "bound.test", self.origin.port)
        for sid in (1, 3, 5):
            h.request(sid, path="/echo/lane-%d" % sid)
            st, = h.wait(sid)
            self.assertEqual(H2.status(st), 200, st)
        side = list(range(7, 19, 2))      # 6: under max_concurrent_streams
        for sid in side:
            h.request(sid, path="/echo/lane-%d" % sid)
        for st in h.wait(*side):
            self.assertEqual(H2.status(st), 200, st)
        h.request(19, path="/echo/lane-19")
        st, = h.wait(19)
        self.assertEqual(H2.status(st), 200, st)
        port = {sid: self.origin.find("/echo/lane-%d" % sid)[0]["port"]
                for sid in [1, 3, 5, 19] + side}
        self.assertEqual(port[1], port[3])
        self.assertEqual(port[3], port[5])
        # 6 side by side need at most 6 connections; the one after them
        # finds one of them idle.
        self.assertLessEqual(len(set(port.values())), 6, port)
        self.assertIn(port[19], set(port[s] for s in side) | {port[1]})

    def _origin_socks(self, port):
        """The origin's open sockets whose peer (the gateway) is on port."""
        found = []
        with self.origin.srv.lock:
            for s in self.origin.srv.open_socks:
                try:
                    if s.getpeername()[1] == port:
                        found.append(s)
                except OSError:
                    pass
        return found

    def _kept_port(self, sid, tag):
        """Stream sid to /echo/TAG on a connection of its own: its origin port."""
        h = H2(self, "bound.test", self.origin.port)
        h.request(sid, path="/echo/" + tag)
        st, = h.wait(sid)
        self.assertEqual(H2.status(st), 200, st)
        return h, self.origin.find("/echo/" + tag)[0]["port"]

    def test_kept_origin_closed_by_origin_not_reused(self):
        # A finished stream's origin connection waits for the next stream;
        # the origin closes it meanwhile: the next stream is answered on a
        # new connection, not failed on the dead one. Twice, so that the
        # second closed connection was itself one taken from the pool.
        h, p1 = self._kept_port(1, "kept-close-1")
        for sid in (3, 5):
            time.sleep(0.3)            # the stream ended: its origin kept
            socks = self._origin_socks(p1)
            self.assertEqual(len(socks), 1, "the kept connection is open")
            socks[0].shutdown(socket.SHUT_RDWR)
            time.sleep(0.3)            # the gateway notices the close
            h.request(sid, path="/echo/kept-close-%d" % sid)
            st, = h.wait(sid)
            self.assertEqual(H2.status(st), 200, st)
            p2 = self.origin.find("/echo/kept-close-%d" % sid)[0]["port"]
            self.assertNotEqual(p2, p1)
            p1 = p2
        # ... and the new one is kept in turn for the stream after.
        time.sleep(0.3)
        h.request(7, path="/echo/kept-close-7")
        st, = h.wait(7)
        self.assertEqual(H2.status(st), 200, st)
        self.assertEqual(self.origin.find("/echo/kept-close-7")[0]["port"], p1)

    def test_origin_answering_before_body_not_kept(self):
        # An HTTP/1.1 origin answers a stream's POST before its body came:
        # the origin connection still owes that body's end and is no
        # longer in step, so it is not kept for the streams after. A
        # stream sent while the origin still has the half body in its
        # socket must go on a connection of its own, and get its answer.
        h = H2(self, "bound.test", self.origin.port)
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST",
                                                      "/echo/early-1")))
        h.send(frame(DATA, 0, 1, b"first part of a body"))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)
        self.assertEqual(st["data"], b"early\n")
        p1 = self.origin.find("/echo/early-1")[0]["port"]
        for sid in (3, 5):
            h.request(sid, path="/echo/after-early-%d" % sid)
            st, = h.wait(sid)
            self.assertEqual(H2.status(st), 200, st)
            got = self.origin.find("/echo/after-early-%d" % sid)
            self.assertEqual(len(got), 1, got)
            self.assertNotEqual(got[0]["port"], p1)
        self.assertFalse(h.closed)

    def test_kept_origin_released_after_keepalive_timeout(self):
        # upstream.keepalive_timeout (5 s by default) bounds how long a
        # finished stream's origin connection waits: the origin sees it
        # closed, and the stream after is answered on a new one.
        h, p1 = self._kept_port(1, "kept-time-1")
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            if not self._origin_socks(p1):
                break
            time.sleep(0.2)
        else:
            self.fail("the kept origin connection was never released")
        h.request(3, path="/echo/kept-time-3")
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 200, st)
        self.assertNotEqual(self.origin.find("/echo/kept-time-3")[0]["port"], p1)

    def test_answer_flowing_is_not_idle(self):
        # upstream.idle_timeout closes a connection with no traffic either
        # way: an answer still coming on a stream is traffic, even while the
        # client, its window wide open, says nothing. A gateway of its own
        # with a 1.5 s idle timeout; the origin drips for 3 s.
        d = os.path.join(self.td.path, "idle-gw")
        os.makedirs(d)
        gw = T.Gateway(d, self.dns, {"h2.yaml": POLICY.format(
            port=self.origin.port, origin=ORIGIN_HOST, nginx=self.nginx.port,
            grpc=self.grpc.port if self.grpc else 1,
            other_tok=T.sha256_hex(self.other_tok))},
            extra={"upstream": {"ca_bundle": self.pki.cert,
                                "idle_timeout": "1500ms"}})
        gw.start()
        self.addCleanup(gw.stop)

        class Via:
            """What H2 needs of a test, with this gateway."""
        via = Via()
        via.gw, via.gw_ca = gw, os.path.join(d, "certs", "ca.crt")
        via.addCleanup, via.assertEqual = self.addCleanup, self.assertEqual
        h = H2(via, "plain.test", self.origin.port, window=False)
        h.request(1, path="/echo/drip/6")
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)
        self.assertTrue(st["done"] and st["rst"] is None, st)
        self.assertEqual(st["data"], b"".join(b"piece %d\n" % i
                                              for i in range(6)))
        self.assertFalse(h.closed)
        # The other way: a body dripping in for 3 s, the origin silent until
        # it is whole. The stream's session waits for it, not for the origin.
        h.send(frame(HEADERS, END_HEADERS, 3, h.block(3, "POST",
                                                      "/echo/slow-up")))
        for i in range(6):
            time.sleep(0.5)
            h.send(frame(DATA, END_STREAM if i == 5 else 0, 3,
                         b"part %d\n" % i))
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 200, st)
        got, = self.origin.find("/echo/slow-up")
        self.assertEqual(got["body"], b"".join(b"part %d\n" % i
                                               for i in range(6)))
        self.assertFalse(h.closed)

    def test_authority_not_sni(self):
        h = H2(self, "bound.test", self.origin.port)
        h.request(1, path="/echo/auth", authority="plain.test:%d" %
                  self.origin.port)
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 403)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "host-mismatch")
        self.assertEqual(self.origin.find("/echo/auth"), [])
        # host and :authority differing is the same refusal.
        h.request(3, path="/echo/auth2", extra=[("host", "plain.test")])
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 403)
        self.assertEqual(self.origin.find("/echo/auth2"), [])

    def test_placeholder_split_across_data_frames(self):
        h = H2(self, "bound.test", self.origin.port)
        body = ("a=1&k=" + self.ph + "&z=2").encode()
        cut = body.index(self.ph.encode()) + 7
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", "/echo/split")))
        h.send(frame(DATA, 0, 1, body[:cut]))
        h.send(frame(DATA, END_STREAM, 1, body[cut:]))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 403)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "credential-misuse")
        self.assertFalse(self.origin.received(self.ph))
        self.assertEqual(self.row(path="/echo/split")["reason"],
                         "credential-misuse")

    def test_placeholder_in_trailers(self):
        h = H2(self, "bound.test", self.origin.port)
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", "/echo/trailer",
                                                     [("te", "trailers")])))
        h.send(frame(DATA, 0, 1, b"hello"))
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                     h.enc.encode([("x-token", self.ph)])))
        st, = h.wait(1)
        # Refused before any answer: 403 on the stream (after one, RST_STREAM).
        self.assertEqual(H2.status(st), 403, st)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "credential-misuse")
        self.assertFalse(self.origin.received(self.ph))
        row = self.row(path="/echo/trailer", reason="credential-misuse")
        self.assertEqual(row["decision"], "deny")

    def test_trailers_without_placeholder_pass(self):
        h = H2(self, "bound.test", self.origin.port)
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", "/echo/tr-ok")))
        h.send(frame(DATA, 0, 1, b"hello"))
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                     h.enc.encode([("x-check", "fine")])))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200)
        self.assertEqual(self.origin.find("/echo/tr-ok")[0]["body"], b"hello")

    def test_unsized_upload_past_the_window(self):
        # No content-length: the body reaches the HTTP/1.1 origin chunked,
        # whole and in order, with its trailers, though it is five times the
        # stream's window -- which comes back only as the body is taken.
        h = H2(self, "bound.test", self.origin.port)
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", "/echo/unsized")))
        piece, sent, body = 16384, 0, b""
        for i in range(20):
            chunk = bytes([65 + i % 26]) * piece
            # The stream's window is 65535: wait for room before sending past it.
            while sent + piece > 65535 + h.window_updates.get(1, 0):
                self.assertTrue(h.pump(), "connection ended while uploading")
            h.send(frame(DATA, 0, 1, chunk))
            sent += piece
            body += chunk
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                     h.enc.encode([("x-check", "fine")])))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)
        got, = self.origin.find("/echo/unsized")
        self.assertEqual(len(got["body"]), len(body))
        self.assertEqual(got["body"], body)
        heads = dict((k.lower(), v) for k, v in got["headers"])
        self.assertEqual(heads.get("transfer-encoding"), "chunked", heads)
        self.assertNotIn("content-length", heads)
        row = self.row(path="/echo/unsized")
        # Counted as sent to the origin: the payload and its chunk framing.
        self.assertGreater(row["bytes_up"], len(body))
        self.assertLess(row["bytes_up"], len(body) + 4096)

    def test_other_sandboxes_placeholder(self):
        # As in HTTP/1.1: another sandbox's placeholder is credential misuse.
        r = self.curl2("/echo/foreign", ["-H", "Authorization: Bearer " +
                                         self.other_ph])
        self.assertEqual(r.status, 403)
        self.assertEqual(r.header("x-sandgate-reason"), "credential-misuse")
        self.assertFalse(self.origin.received(self.other_ph))
        self.assertEqual(self.row(path="/echo/foreign")["sandbox"], "box-h2")

    def test_placeholder_in_unlisted_header(self):
        r = self.curl2("/echo/unlisted", ["-H", "X-Other: " + self.ph])
        self.assertEqual(r.status, 403)
        self.assertEqual(r.header("x-sandgate-reason"), "credential-misuse")
        self.assertFalse(self.origin.received(self.ph))

    def test_extended_connect_refused(self):
        h = H2(self, "bound.test", self.origin.port)
        blk = h.enc.encode([(":method", "CONNECT"), (":protocol", "websocket"),
                            (":scheme", "https"), (":path", "/echo/ws"),
                            (":authority", h.authority)])
        h.send(frame(HEADERS, END_HEADERS, 1, blk))
        st, = h.wait(1)
        # SETTINGS_ENABLE_CONNECT_PROTOCOL was never sent: a malformed stream.
        self.assertEqual(st["rst"], PROTOCOL_ERROR, st)
        self.assertIsNone(h.goaway)
        self.assertEqual(self.origin.find("/echo/ws"), [])
        # The connection is still usable.
        h.request(3, path="/echo/after-ws")
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 200)
        # Plain CONNECT inside HTTP/2: refused, audited.
        h.send(frame(HEADERS, END_HEADERS, 5, h.enc.encode(
            [(":method", "CONNECT"), (":authority", "plain.test:443")])))
        st, = h.wait(5)
        self.assertEqual(H2.status(st), 405, st)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "method-not-supported")

    def test_header_list_too_large(self):
        h = H2(self, "bound.test", self.origin.port)
        h.request(1, path="/echo/big-head", extra=[("x-pad", "p" * 9000)])
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 431, st)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "header-too-large")
        self.assertIsNone(h.goaway)
        self.assertEqual(self.row(path="/echo/big-head")["reason"],
                         "header-too-large")
        self.assertEqual(self.origin.find("/echo/big-head"), [])

    def test_head_over_max_header_bytes(self):
        # Under the HTTP/2 header-list limit (8192), over limits.max_header_bytes
        # (6144) as a request head: 431, as the same request over HTTP/1.1 is.
        h = H2(self, "bound.test", self.origin.port)
        h.request(1, path="/echo/head-6k", extra=[("x-pad", "p" * 6400)])
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 431, st)
        self.assertEqual(self.row(path="/echo/head-6k")["reason"],
                         "header-too-large")
        self.assertEqual(self.origin.find("/echo/head-6k"), [])
        # Just under it: forwarded.
        h.request(3, path="/echo/head-5k", extra=[("x-pad", "p" * 5000)])
        st, = h.wait(3)
        self.assertEqual(H2.status(st), 200, st)

    def test_fields_not_an_http_request(self):
        # Fields nghttp2 lets through that no HTTP/1.1 head may carry: refused
        # by the checks a parsed head passes (400), audited, never forwarded.
        h = H2(self, "bound.test", self.origin.port)
        h.request(1, path="/echo/frag#x")
        h.request(3, path="/echo/bad-port", authority="bound.test:99999")
        for sid, path in ((1, "/echo/frag#x"), (3, "/echo/bad-port")):
            st, = h.wait(sid)
            self.assertEqual(H2.status(st), 400, st)
            self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                             "bad-request")
            self.assertEqual(self.row(path=path)["reason"], "bad-request")
        # Two content-lengths: nghttp2 resets the stream, or we refuse it.
        h.request(5, path="/echo/two-cl", extra=[("content-length", "0"),
                                                  ("content-length", "0")])
        st, = h.wait(5)
        self.assertTrue(st["rst"] is not None or H2.status(st) == 400, st)
        for path in ("/echo/frag", "/echo/bad-port", "/echo/two-cl"):
            self.assertEqual(self.origin.find(path), [], path)
        h.request(7, path="/echo/after-bad")
        st, = h.wait(7)
        self.assertEqual(H2.status(st), 200, st)

    def test_concurrent_streams_limit(self):
        h = H2(self, "bound.test", self.origin.port)
        # Headers without END_STREAM: every stream stays open.
        for i in range(9):
            h.send(frame(HEADERS, END_HEADERS, 1 + 2 * i,
                         h.block(1 + 2 * i, "POST", "/echo/cc%d" % i)))
        h.wait(17)
        # RFC 9113 §5.1.2: a stream over the limit is refused, alone.
        self.assertEqual(h.stream(17)["rst"], REFUSED_STREAM)
        self.assertIsNone(h.goaway)

    def test_rapid_reset(self):
        h = H2(self, "bound.test", self.origin.port)
        out = b""
        for i in range(60):
            sid = 1 + 2 * i
            out += frame(HEADERS, END_HEADERS, sid, h.block(sid, "GET",
                                                            "/echo/rr"))
            out += frame(RST_STREAM, 0, sid, struct.pack("!I", CANCEL))
        h.send(out)
        self.assertEqual(h.wait_goaway(), ENHANCE_YOUR_CALM)

    def test_ping_flood(self):
        h = H2(self, "bound.test", self.origin.port)
        h.send(b"".join(frame(PING, 0, 0, struct.pack("!Q", i))
                        for i in range(100)))
        self.assertEqual(h.wait_goaway(), ENHANCE_YOUR_CALM)

    def test_settings_flood(self):
        h = H2(self, "bound.test", self.origin.port)
        h.send(b"".join(frame(SETTINGS, 0, 0, struct.pack("!HI", 4, 65535))
                        for i in range(100)))
        self.assertEqual(h.wait_goaway(), ENHANCE_YOUR_CALM)

    def test_continuation_flood(self):
        h = H2(self, "bound.test", self.origin.port)
        blk = h.block(1, "GET", "/echo/cont")
        out = frame(HEADERS, 0, 1, blk[:3])
        out += b"".join(frame(CONTINUATION, 0, 1, b"") for i in range(20))
        out += frame(CONTINUATION, END_HEADERS, 1, blk[3:])
        h.send(out)
        self.assertEqual(h.wait_goaway(), ENHANCE_YOUR_CALM)
        self.assertEqual(self.origin.find("/echo/cont"), [])

    def test_bad_preface(self):
        c, r = T.open_tunnel(self.gw.port, "bound.test:%d" % self.origin.port)
        self.addCleanup(c.close)
        ctx = ssl.create_default_context(cafile=self.gw_ca)
        ctx.set_alpn_protocols(["h2"])
        s = ctx.wrap_socket(c.sock, server_hostname="bound.test")
        s.settimeout(10 * T.SLOW)
        s.sendall(b"GET / HTTP/1.1\r\nHost: bound.test\r\n\r\n")
        got = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except (OSError, ssl.SSLError):
            pass
        self.assertNotIn(b"HTTP/1.1 200", got)

    def test_http11_still_offered(self):
        r = T.curl("https://bound.test:%d/echo/h11" % self.origin.port,
                   proxy=self.gw.url, args=["--http1.1", "--cacert", self.gw_ca])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.info.get("http_version"), "1.1")

    def test_nginx_h2_origin_spoken_to_in_http2(self):
        r = T.curl("https://nginx.test:%d/proto" % self.nginx.port,
                   proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca])
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.info.get("http_version"), "2")
        self.assertEqual(r.body, b"HTTP/2.0 GET /proto\n")
        self.row(host="nginx.test", path="/proto", status=200)
        # An HTTP/1.1 client is spoken for in HTTP/1.1 to the same origin.
        r = T.curl("https://nginx.test:%d/proto" % self.nginx.port,
                   proxy=self.gw.url, args=["--http1.1", "--cacert", self.gw_ca])
        self.assertEqual(r.body, b"HTTP/1.1 GET /proto\n")

    def test_h2_origin_connection_shared_and_renewed(self):
        """
        The streams of one client connection share one HTTP/2 origin
        connection; nginx ends each after 5 requests (GOAWAY), and the
        streams it refused unprocessed go again on a new one.
        """
        h = H2(self, "nginx.test", self.nginx.port)
        sids = []
        for wave in range(4):
            ids = [1 + 2 * (wave * 6 + i) for i in range(6)]
            for sid in ids:
                h.request(sid, path="/proto")
            for st in h.wait(*ids):
                self.assertEqual(H2.status(st), 200, st)
                self.assertEqual(st["data"], b"HTTP/2.0 GET /proto\n")
            sids += ids
        self.assertIsNone(h.goaway)
        rows = self.gw.audit_rows(host="nginx.test", path="/proto")
        self.assertFalse([r for r in rows if r["decision"] != "allow"], rows)

    def test_h2_origin_swap_and_scrub(self):
        r = T.curl("https://nginx-cred.test:%d/leak" % self.nginx.port,
                   proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca,
                                            "-H", "Authorization: Bearer " +
                                            self.ph])
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.status, 200)
        # nginx got the secret over HTTP/2; the echo of it is scrubbed.
        self.assertEqual(r.body, ("HTTP/2.0 auth=Bearer %s\n" % self.ph).encode())
        self.assertEqual(r.header("x-leak"), "Bearer " + self.ph)
        self.assert_no_secret(r.body)
        want = "HTTP/2.0 /leak Bearer " + SECRET
        deadline = time.time() + 5 * T.SLOW  # nginx logs after it answered
        while want not in self.nginx.access() and time.time() < deadline:
            time.sleep(0.05)
        self.assertIn(want, self.nginx.access())
        row = self.row(host="nginx-cred.test", path="/leak")
        self.assertEqual(row["credential"], "h2-key")
        self.assertEqual(row["decision"], "allow")
        # A placeholder in a header the credential does not list: refused.
        r = T.curl("https://nginx-cred.test:%d/leak" % self.nginx.port,
                   proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca,
                                            "-H", "X-Other: " + self.ph])
        self.assertEqual(r.status, 403)
        self.assertEqual(r.header("x-sandgate-reason"), "credential-misuse")

    def test_big_download_and_stalled_window(self):
        """
        A client whose window stays shut gets the head and no DATA; once it
        opens the window the whole body arrives intact (the stalled stream
        paused its origin and resumed it).
        """
        h = H2(self, "nginx.test", self.nginx.port, settings=((4, 0),),
               window=False)
        h.request(1, path="/big.bin")
        while not h.stream(1)["headers"] and h.pump():
            pass
        self.assertEqual(H2.status(h.stream(1)), 200)
        self.assertEqual(h.stream(1)["headers"][0].get("content-length"),
                         str(BIG))
        # A PING round trip: anything the gateway had sent is in by now.
        h.send(frame(PING, 0, 0, b"stall-ok"))
        while h.pump():
            if h.last_ping_ack == b"stall-ok":
                break
        self.assertEqual(h.stream(1)["data"], b"")
        h.window = True
        h.send(frame(SETTINGS, 0, 0, struct.pack("!HI", 4, 1 << 20)))
        h.send(frame(WINDOW_UPDATE, 0, 0, struct.pack("!I", 1 << 24)))
        st, = h.wait(1)
        self.assertTrue(st["done"])
        self.assertIsNone(st["rst"])
        self.assertEqual(len(st["data"]), BIG)
        self.assertEqual(hashlib.sha256(st["data"]).hexdigest(),
                         self.nginx.big_sha)
        row = self.row(host="nginx.test", path="/big.bin")
        self.assertEqual(row["bytes_down"], BIG)

    def grpc_channel(self):
        if grpc is None:
            self.skipTest("python3-grpcio is not installed")
        with open(self.gw_ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        ch = grpc.secure_channel("grpc.test:%d" % self.grpc.port, creds,
                                 options=[("grpc.http_proxy", self.gw.url),
                                          ("grpc.enable_retries", 0)])
        self.addCleanup(ch.close)
        return ch

    def test_grpc_unary_swapped_and_scrubbed(self):
        ch = self.grpc_channel()
        call = ch.unary_unary("/test.Echo/Unary")
        out = call(b"hello", metadata=[("authorization", "Bearer " + self.ph)],
                   timeout=20 * T.SLOW)
        # The server got the secret; what it echoed comes back as the placeholder.
        self.assertEqual(self.grpc.seen[-1].get("authorization"),
                         "Bearer " + SECRET)
        self.assertEqual(out, ("auth=Bearer %s;msg=hello" % self.ph).encode())
        row = self.row(host="grpc.test", path="/test.Echo/Unary",
                       decision="allow")
        self.assertEqual(row["status"], 200)
        self.assertGreater(row["bytes_down"], 0)
        self.assertEqual(row["credential"], "h2-key")

    def test_grpc_streaming(self):
        ch = self.grpc_channel()
        call = ch.stream_stream("/test.Echo/Stream")
        msgs = [b"m%d" % i for i in range(20)] + [b"x" * 100000]
        got = list(call(iter(msgs), metadata=[("authorization",
                                               "Bearer " + self.ph)],
                        timeout=20 * T.SLOW))
        self.assertEqual(len(got), len(msgs))
        for m, g in zip(msgs, got):
            self.assertEqual(g, ("auth=Bearer %s;msg=" % self.ph).encode() + m)
        self.assertEqual(self.grpc.seen[-1].get("authorization"),
                         "Bearer " + SECRET)
        self.row(host="grpc.test", path="/test.Echo/Stream", status=200)

    def test_grpc_many_small_frames_in_one_read(self):
        """
        A stream already flowing to its HTTP/2 origin, then the rest of its
        messages in many small DATA frames that the gateway reads at once:
        the stream session gets them as many more pieces than one pass of
        its body decoder took (16), and no further read comes since the
        client has nothing more to send. Every message must still reach the
        origin and its echo come back (the call stalled before).
        """
        if grpc is None:
            self.skipTest("python3-grpcio is not installed")
        if hpack is None:
            self.skipTest("python3-hpack is not installed")
        h = H2(self, "grpc.test", self.grpc.port)
        self.assertEqual(h.alpn, "h2")
        msgs = [b"s%02d" % i for i in range(60)]
        want = [("auth=Bearer %s;msg=" % self.ph).encode() + m for m in msgs]

        def grpc_frame(m, end=False):
            return frame(DATA, END_STREAM if end else 0, 1,
                         b"\0" + struct.pack("!I", len(m)) + m)

        blk = h.block(1, "POST", "/test.Echo/Stream", extra=(
            ("content-type", "application/grpc"), ("te", "trailers"),
            ("authorization", "Bearer " + self.ph)))
        h.send(frame(HEADERS, END_HEADERS, 1, blk) + grpc_frame(msgs[0]))
        st = h.stream(1)
        # The first echo: the stream is open at the origin, reads flowing.
        while len(st["data"]) < 5 + len(want[0]) and not st["done"]:
            self.assertTrue(h.pump(), "the connection ended")
        self.assertEqual(st["data"][5:], want[0])
        rest = b"".join(grpc_frame(m, i == len(msgs) - 2)
                        for i, m in enumerate(msgs[1:]))
        h.send(rest)  # one write: the gateway reads it at once
        st = h.wait(1)[0]
        self.assertTrue(st["done"],
                        "the stream never ended (stalled, or the connection went)")
        self.assertIsNone(st["rst"])
        self.assertEqual(H2.status(st), 200)
        self.assertEqual(st["headers"][-1].get("grpc-status"), "0",
                         st["headers"])
        got, data = [], st["data"]
        while len(data) >= 5:
            n = struct.unpack("!I", data[1:5])[0]
            got.append(data[5:5 + n])
            data = data[5 + n:]
        self.assertEqual(got, want)

    def test_h1_origin_many_small_frames_in_one_read(self):
        """
        The same toward an HTTP/1.1 origin: the body goes out chunked as it
        comes, and the rest of it, many small DATA frames read at once, must
        reach the origin whole (the request stalled before).
        """
        if hpack is None:
            self.skipTest("python3-hpack is not installed")
        h = H2(self, "bound.test", self.origin.port)
        self.assertEqual(h.alpn, "h2")
        path = "/echo/small-frames-%d" % os.getpid()
        pieces = [b"piece-%02d;" % i for i in range(60)]
        blk = h.block(1, "POST", path, extra=(
            ("content-type", "text/plain"),))
        h.send(frame(HEADERS, END_HEADERS, 1, blk) +
               frame(DATA, 0, 1, pieces[0]))
        # The first piece at the origin: the request is being forwarded.
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and not any(
                r["body"] for r in self.origin.find(path)):
            time.sleep(0.02)
        self.assertEqual([r["body"] for r in self.origin.find(path)],
                         [pieces[0]])
        h.send(b"".join(frame(DATA, END_STREAM if i == len(pieces) - 2 else 0,
                              1, p) for i, p in enumerate(pieces[1:])))
        st = h.wait(1)[0]
        self.assertTrue(st["done"],
                        "the stream never ended (stalled, or the connection went)")
        self.assertIsNone(st["rst"])
        self.assertEqual(H2.status(st), 200)
        self.assertTrue(st["data"].endswith(b"".join(pieces)), st["data"][-200:])
        self.assertEqual(self.origin.find(path)[0]["body"], b"".join(pieces))

    def test_grpc_placeholder_in_message(self):
        ch = self.grpc_channel()
        call = ch.unary_unary("/test.Echo/Unary")
        n = len(self.grpc.seen)
        with self.assertRaises(grpc.RpcError) as cm:
            call(b"leak " + self.ph.encode(), timeout=20 * T.SLOW)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("credential-misuse", cm.exception.details())
        self.assertEqual(len(self.grpc.seen), n)
        self.assertEqual(self.row(host="grpc.test", path="/test.Echo/Unary",
                                  reason="credential-misuse")["decision"], "deny")

    def test_grpc_to_http11_origin_refused_clearly(self):
        """An origin without HTTP/2: a clear UNAVAILABLE, audited."""
        if grpc is None:
            self.skipTest("python3-grpcio is not installed")
        with open(self.gw_ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        ch = grpc.secure_channel("bound.test:%d" % self.origin.port, creds,
                                 options=[("grpc.http_proxy", self.gw.url)])
        self.addCleanup(ch.close)
        with self.assertRaises(grpc.RpcError) as cm:
            ch.unary_unary("/test.Echo/Unary")(
                b"hello", metadata=[("authorization", "Bearer " + self.ph)],
                timeout=20 * T.SLOW)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("upstream-protocol", cm.exception.details())
        self.assertEqual(self.origin.find("/test.Echo"), [])
        row = self.row(host="bound.test", path="/test.Echo/Unary")
        self.assertEqual(row["reason"], "upstream-protocol")

    def test_grpc_denied_path(self):
        ch = self.grpc_channel()
        call = ch.unary_unary("/other.Service/Call")
        with self.assertRaises(grpc.RpcError) as cm:
            call(b"hello", timeout=20 * T.SLOW)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("policy-deny", cm.exception.details())
        self.assertEqual(self.row(host="grpc.test",
                                  path="/other.Service/Call")["decision"], "deny")


if __name__ == "__main__":
    T.main()
