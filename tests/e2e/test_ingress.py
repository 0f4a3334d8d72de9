"""
Ingress (SPEC §10, docs/ingress.md) without the launcher: a static sandbox
whose guest address is a loopback test origin, and a dynamic one registered
over the admin socket. Real clients (curl, raw sockets, a WebSocket client
written here) against real origins (the harness's HTTP origin, which
records the heads it received, and a stdlib WebSocket echo server), with the
audit rows checked.
"""

import base64
import hashlib
import json
import os
import socket
import subprocess
import threading
import time
import unittest

import auditcheck as A
import sgtest as T
import wsframe as W

TOKEN = "tok-" + "a1b2c3d4e5f60718293a4b5c6d7e8f90"
DYN_TOKEN = "dyn-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
DOMAIN = "sandbox.localhost"

A.REASONS.update({"ingress-unknown-host", "ingress-unknown-sandbox",
                  "ingress-port-not-published", "sandbox-not-running",
                  "ingress-token-missing", "ingress-token-invalid",
                  "ingress-token-redirect"})


class WsEcho:
    """A WebSocket echo origin (RFC 6455, stdlib only): text and binary
    frames come back unmasked; records the handshake heads it saw."""

    def __init__(self, host="127.0.0.2"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.heads = []
        self.conns = []
        self.stopping = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(60)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                b = c.recv(65536)
                if not b:
                    return
                buf += b
            head, buf = buf.split(b"\r\n\r\n", 1)
            text = head.decode("latin-1")
            with self.lock:
                self.heads.append(text)
            key = None
            for line in text.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "sec-websocket-key":
                    key = v.strip()
            if key is None:
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                       % W.accept_key(key)).encode())
            rd = W.Reader(c, buf)
            while True:
                f = W.read_frame(rd.read_exact)
                if not f.masked:
                    return      # what reaches an origin is masked
                if f.opcode == W.OP_CLOSE:
                    c.sendall(W.encode_frame(W.OP_CLOSE, b""))
                    return
                c.sendall(W.encode_frame(f.opcode, f.payload))
        except (OSError, EOFError):
            pass
        finally:
            c.close()

    def stop(self):
        self.stopping = True
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(2)


def ws_read(conn):
    """(opcode, payload) of the next frame from the gateway (never masked)."""
    f = W.read_frame(conn.read_exact)
    if f.masked:
        raise AssertionError("a frame to the client was masked")
    return f.opcode, f.payload


def hdr(headers, name):
    """Every value of a header in [[name, value]] (as the origin recorded)."""
    return [v for k, v in headers if k.lower() == name.lower()]


class IngressBase(unittest.TestCase):
    tls = False

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.origin = T.Origin("guest", host="127.0.0.2")
        cls.origin3 = T.Origin("dynguest", host="127.0.0.3")
        cls.ws = WsEcho("127.0.0.2")
        cls.dead_port = T.free_port("127.0.0.2")   # published, nobody listens
        cls.iport = T.free_port()
        cls.sock = cls.td.join("admin.sock")
        extra = {"listen": {"ingress": "127.0.0.1:%d" % cls.iport,
                            "admin": cls.sock},
                 "ingress_upgrade_idle_timeout": "2s"}
        if cls.tls:
            cls.make_tls()
            extra["ingress_tls"] = {"cert": cls.leaf_crt, "key": cls.leaf_key}
        policy = {
            "sandboxes": [
                {"id": "web", "policy": "p", "source": ["127.0.0.9/32"],
                 "ingress": {"address": "127.0.0.2",
                             "ports": [cls.origin.port, cls.ws.port,
                                       cls.dead_port],
                             "token_sha256": T.sha256_hex(TOKEN)}},
                {"id": "pub", "policy": "p",
                 "ingress": {"address": "127.0.0.2",
                             "ports": [cls.origin.port], "public": True}},
                {"id": "plain", "policy": "p", "source": ["127.0.0.10/32"]},
            ],
            "policies": [{"name": "p", "allow": [{"host": "allowed.test"}]}],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy},
                           extra=extra)
        cls.gw.start()
        if not T.wait_tcp("127.0.0.1", cls.iport, 10 * T.SLOW, cls.gw.proc):
            raise AssertionError("ingress listener did not accept:\n" +
                                 cls.gw.log_tail())

    @classmethod
    def tearDownClass(cls):
        try:
            cls.gw.stop()
        finally:
            cls.ws.stop()
            cls.origin.stop()
            cls.origin3.stop()
            cls.dns.stop()
            cls.td.cleanup()

    def host(self, port, sid="web"):
        return "%d-%s.%s" % (port, sid, DOMAIN)

    def conn(self):
        return T.Conn(self.iport)

    def get(self, path, host, headers=(), method="GET", body=b""):
        c = self.conn()
        try:
            client = A.client_of_conn(c)
            req = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, path, host)
            for k, v in headers:
                req += "%s: %s\r\n" % (k, v)
            if body:
                req += "Content-Length: %d\r\n" % len(body)
            c.send(req.encode("latin-1") + b"\r\n" + body)
            return c.read_response(method), client
        finally:
            c.close()

    def last_request(self, origin, path):
        deadline = time.time() + 5
        while time.time() < deadline:
            reqs = origin.requests_for(path)
            if reqs:
                return reqs[-1]
            time.sleep(0.05)
        self.fail("the origin never saw %s" % path)


class IngressTest(IngressBase):

    def test_no_token_is_401_and_guest_untouched(self):
        audit = A.Audit(self, self.gw)
        h = self.host(self.origin.port)
        r, client = self.get("/nope-401", h)
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "ingress-token-missing")
        self.assertEqual(self.origin.requests_for("/nope-401"), [])
        r2, client2 = self.get("/nope-401", h, [("X-Sandgate-Token", "wrong")])
        self.assertEqual(r2.status, 401, r2)
        self.assertEqual(r2.header("X-Sandgate-Reason"), "ingress-token-invalid")
        r3, client3 = self.get("/nope-401?sg_token=" + TOKEN + "x", h)
        self.assertEqual(r3.status, 401, r3)
        self.assertIsNone(r3.header("Set-Cookie"))
        r4, client4 = self.get("/nope-401", h, [("Cookie", "sg_token=" + TOKEN[:-1])])
        self.assertEqual(r4.status, 401, r4)
        self.assertEqual(self.origin.requests_for("/nope-401"), [])
        common = dict(kind="ingress", sandbox="web", host=h, ip=None,
                      port=self.origin.port, method="GET", path="/nope-401",
                      status=401, decision="deny", rule="ingress",
                      credential=None, bytes_up=0, bytes_down=0)
        audit.expect({"client": client}, reason="ingress-token-missing", **common)
        audit.expect({"client": client2}, reason="ingress-token-invalid", **common)
        audit.expect({"client": client3}, reason="ingress-token-invalid", **common)
        audit.expect({"client": client4}, reason="ingress-token-invalid", **common)
        audit.check()

    def test_header_token_and_forwarded_head(self):
        audit = A.Audit(self, self.gw)
        h = self.host(self.origin.port)
        r, client = self.get("/headers?q=1", h, [
            ("X-Sandgate-Token", TOKEN),
            ("X-Forwarded-For", "6.6.6.6"),
            ("X-Forwarded-Host", "evil.test"),
            ("Forwarded", "for=6.6.6.6"),
            ("Connection", "X-Hop"),
            ("X-Hop", "gone"),
            ("Keep-Alive", "timeout=5"),
            ("X-Keep", "kept"),
            ("Cookie", "a=1; b=2"),
        ])
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["origin"], "guest")
        self.assertEqual(doc["path"], "/headers?q=1")
        hs = doc["headers"]
        self.assertEqual(hdr(hs, "X-Sandgate-Token"), [])
        self.assertEqual(hdr(hs, "X-Forwarded-For"), ["127.0.0.1"])
        self.assertEqual(hdr(hs, "X-Forwarded-Proto"), ["http"])
        self.assertEqual(hdr(hs, "X-Forwarded-Host"), [h])
        self.assertEqual(hdr(hs, "Forwarded"), [])
        self.assertEqual(hdr(hs, "X-Hop"), [])
        self.assertEqual(hdr(hs, "Keep-Alive"), [])
        self.assertEqual(hdr(hs, "X-Keep"), ["kept"])
        self.assertEqual(hdr(hs, "Host"), [h])
        self.assertEqual(hdr(hs, "Cookie"), ["a=1; b=2"])
        self.assertNotIn(TOKEN, json.dumps(self.origin.requests))
        audit.expect({"client": client}, kind="ingress", sandbox="web", host=h,
                     ip="127.0.0.2", port=self.origin.port, method="GET",
                     path="/headers?q=1", status=200, decision="allow",
                     rule="ingress", reason=None, credential=None, bytes_up=0,
                     bytes_down=A.at_least(len(r.body)))
        audit.check()

    def test_curl_host_header(self):
        r = T.curl("http://127.0.0.1:%d/curl-ok" % self.iport, tmp=self.td.path,
                   args=["-H", "Host: " + self.host(self.origin.port),
                         "-H", "X-Sandgate-Token: " + TOKEN])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/curl-ok")

    def test_query_token_redirect_and_cookie(self):
        audit = A.Audit(self, self.gw)
        h = self.host(self.origin.port)
        r, client = self.get("/app?a=1&sg_token=%s&b=2" % TOKEN, h)
        self.assertEqual(r.status, 302, r)
        self.assertEqual(r.header("Location"), "/app?a=1&b=2")
        sc = r.header("Set-Cookie")
        parts = [p.strip() for p in sc.split(";")]
        self.assertEqual(parts[0], "sg_token=" + TOKEN)
        attrs = {p.split("=")[0].lower() for p in parts[1:]}
        self.assertIn("httponly", attrs)
        self.assertIn("samesite=lax", [p.lower() for p in parts[1:]])
        self.assertIn("path=/", [p.lower() for p in parts[1:]])
        self.assertNotIn("domain", attrs)
        self.assertNotIn("secure", attrs) if not self.tls else \
            self.assertIn("secure", attrs)
        self.assertEqual(self.origin.requests_for("/app?a=1&b=2"), [])
        # The cookie alone now opens the sandbox; the guest never sees it.
        r2, client2 = self.get("/headers?after=1", h,
                               [("Cookie", "x=1; sg_token=%s; y=2" % TOKEN)])
        self.assertEqual(r2.status, 200, r2)
        hs = r2.json()["headers"]
        self.assertEqual(hdr(hs, "Cookie"), ["x=1; y=2"])
        r3, _ = self.get("/headers?only=1", h, [("Cookie", "sg_token=" + TOKEN)])
        self.assertEqual(r3.status, 200, r3)
        self.assertEqual(hdr(r3.json()["headers"], "Cookie"), [])
        self.assertNotIn(TOKEN, json.dumps(self.origin.requests))
        audit.expect({"client": client}, kind="ingress", sandbox="web", host=h,
                     ip=None, port=self.origin.port, method="GET",
                     path="/app?a=1&b=2", status=302, decision="allow",
                     rule="ingress", reason="ingress-token-redirect",
                     credential=None, bytes_up=0, bytes_down=0)
        audit.expect({"client": client2}, kind="ingress", sandbox="web", host=h,
                     ip="127.0.0.2", port=self.origin.port, method="GET",
                     path="/headers?after=1", status=200, decision="allow",
                     rule="ingress", reason=None, credential=None, bytes_up=0,
                     bytes_down=A.at_least(1))
        audit.check()
        rows = self.gw.audit_rows(kind="ingress")
        self.assertNotIn(TOKEN, json.dumps(rows))

    def test_curl_cookie_flow(self):
        jar = self.td.join("jar-%d" % id(self))
        h = self.host(self.origin.port)
        url = "http://%s:%d/flow?sg_token=%s" % (h, self.iport, TOKEN)
        r = T.curl(url, tmp=self.td.path, args=[
            "-L", "-c", jar, "-b", jar,
            "--connect-to", "%s:%d:127.0.0.1:%d" % (h, self.iport, self.iport)])
        self.assertEqual(r.status, 200, r)
        self.assertEqual([b[0] for b in r.blocks], [302, 200])
        self.assertEqual(r.json()["path"], "/flow")
        with open(jar) as f:
            lines = [l for l in f.read().splitlines() if "sg_token" in l]
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("#HttpOnly_" + h), lines)
        # The jar works on its own for the next request.
        r2 = T.curl("http://%s:%d/again" % (h, self.iport), tmp=self.td.path,
                    args=["-b", jar, "--connect-to",
                          "%s:%d:127.0.0.1:%d" % (h, self.iport, self.iport)])
        self.assertEqual(r2.status, 200, r2)

    def test_routing_404_400(self):
        audit = A.Audit(self, self.gw)
        tok = [("X-Sandgate-Token", TOKEN)]
        unpub = T.free_port("127.0.0.2")
        cases = [
            (self.host(unpub), 404, "ingress-port-not-published", "web"),
            (self.host(self.origin.port, "nosuch"), 404,
             "ingress-unknown-sandbox", None),
            (self.host(self.origin.port, "plain"), 404,
             "ingress-unknown-sandbox", None),
            ("%d-web.other.localhost" % self.origin.port, 404,
             "ingress-unknown-host", None),
            ("x.%s" % self.host(self.origin.port), 404,
             "ingress-unknown-host", None),
            ("0%d-web.%s" % (self.origin.port, DOMAIN), 404,
             "ingress-unknown-host", None),
            ("%s:abc" % self.host(self.origin.port), 400, "bad-request", None),
            ("%s..x" % self.host(self.origin.port), 400, "bad-request", None),
        ]
        before = len(self.origin.requests)
        for host, status, reason, sid in cases:
            r, client = self.get("/route", host, tok)
            self.assertEqual(r.status, status, (host, r))
            self.assertEqual(r.header("X-Sandgate-Reason"), reason, host)
            # A Host the HTTP parser rejects leaves no method or path.
            parsed = not host.endswith(":abc")
            audit.expect({"client": client}, label=host, kind="ingress",
                         sandbox=sid, host=A.ANY, ip=None, port=A.ANY,
                         method="GET" if parsed else None,
                         path="/route" if parsed else None, status=status,
                         decision="deny", rule="ingress", reason=reason,
                         credential=None, bytes_up=0, bytes_down=0)
        self.assertEqual(len(self.origin.requests), before)
        # A Host the case of which differs, and a trailing dot, still route.
        r, _ = self.get("/case", self.host(self.origin.port).upper() + ".:8080", tok)
        self.assertEqual(r.status, 200, r)
        audit.check()

    def test_absolute_form_target(self):
        h = self.host(self.origin.port)
        c = self.conn()
        try:
            r = c.request("GET http://%s/abs?sg=1 HTTP/1.1\r\nHost: elsewhere.test\r\n"
                          "X-Sandgate-Token: %s\r\n\r\n" % (h, TOKEN))
        finally:
            c.close()
        self.assertEqual(r.status, 200, r)
        rec = self.last_request(self.origin, "/abs?sg=1")
        self.assertEqual(rec["host"], h)
        # The authority decides: an absolute target to a foreign host is 404.
        c = self.conn()
        try:
            r = c.request("GET http://elsewhere.test/abs HTTP/1.1\r\nHost: %s\r\n"
                          "X-Sandgate-Token: %s\r\n\r\n" % (h, TOKEN))
        finally:
            c.close()
        self.assertEqual(r.status, 404, r)

    def test_public_sandbox(self):
        h = self.host(self.origin.port, "pub")
        r, _ = self.get("/headers?pub=1", h, [("X-Sandgate-Token", "anything"),
                                              ("Cookie", "sg_token=zz; k=v")])
        self.assertEqual(r.status, 200, r)
        hs = r.json()["headers"]
        self.assertEqual(hdr(hs, "X-Sandgate-Token"), [])
        self.assertEqual(hdr(hs, "Cookie"), ["k=v"])
        r2, _ = self.get("/pubq?sg_token=zz&x=1", h)
        self.assertEqual(r2.status, 200, r2)
        self.assertEqual(r2.json()["path"], "/pubq?x=1")

    def test_guest_refusing_is_502(self):
        audit = A.Audit(self, self.gw)
        h = self.host(self.dead_port)
        r, client = self.get("/dead", h, [("X-Sandgate-Token", TOKEN)])
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upstream-connect-error")
        audit.expect({"client": client}, kind="ingress", sandbox="web", host=h,
                     ip="127.0.0.2", port=self.dead_port, method="GET",
                     path="/dead", status=502, decision="error", rule="ingress",
                     reason="upstream-connect-error", credential=None,
                     bytes_up=0, bytes_down=0)
        audit.check()

    def test_keep_alive_both_sides(self):
        h = self.host(self.origin.port)
        # Guest connections earlier tests left in the worker's pool (kept
        # for the next request of the same decision) go first: released
        # after upstream.keepalive_timeout.
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            with self.origin.srv.lock:
                if not self.origin.srv.open_socks:
                    break
            time.sleep(0.05)
        n0 = self.origin.conn_count
        c = self.conn()
        try:
            for i in range(5):
                r = c.request("GET /ka/%d HTTP/1.1\r\nHost: %s\r\n"
                              "X-Sandgate-Token: %s\r\n\r\n" % (i, h, TOKEN))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["path"], "/ka/%d" % i)
                self.assertIsNone(r.header("Connection"))
            # A request for another sandbox on the same connection is decided afresh.
            r = c.request("GET /ka/other HTTP/1.1\r\nHost: %s\r\n\r\n"
                          % self.host(self.origin.port, "pub"))
            self.assertEqual(r.status, 200, r)
            r = c.request("GET /ka/last HTTP/1.1\r\nHost: %s\r\n\r\n" % h)
            self.assertEqual(r.status, 401, r)
        finally:
            c.close()
        # One connection to the guest for the five, one more for "pub".
        self.assertEqual(self.origin.conn_count - n0, 2)

    def test_connection_cannot_strip_framing(self):
        # the body is no second request at the guest, whatever the casing
        h = self.host(self.origin.port)
        for i, conn in enumerate(("keep-alive, Content-Length",
                                  "content-length", "Transfer-Encoding")):
            inner = "GET /ing-smuggled-%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (
                i, h)
            if conn == "Transfer-Encoding":
                frame = "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (
                    len(inner), inner)
            else:
                frame = "Content-Length: %d\r\n\r\n%s" % (len(inner), inner)
            c = self.conn()
            try:
                r = c.request("POST /ing-smug-%d HTTP/1.1\r\nHost: %s\r\n"
                    "X-Sandgate-Token: %s\r\nConnection: %s\r\n%s" % (
                    i, h, TOKEN, conn, frame))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["body_len"], len(inner), r)
            finally:
                c.close()
            self.last_request(self.origin, "/ing-smug-%d" % i)
            time.sleep(0.2)
            self.assertEqual(self.origin.requests_for(
                "/ing-smuggled-%d" % i), [])

    def test_bodies_streamed(self):
        h = self.host(self.origin.port)
        body = os.urandom(3 * 1024 * 1024 + 17)
        path = self.td.join("body.bin")
        with open(path, "wb") as f:
            f.write(body)
        for extra in ([], ["-H", "Transfer-Encoding: chunked"]):
            r = T.curl("http://127.0.0.1:%d/upload" % self.iport, tmp=self.td.path,
                       args=["-H", "Host: " + h, "-H", "X-Sandgate-Token: " + TOKEN,
                             "--data-binary", "@" + path] + extra)
            self.assertEqual(r.status, 200, r)
            doc = r.json()
            self.assertEqual(doc["method"], "POST")
            self.assertEqual(doc["body_len"], len(body))
            self.assertEqual(doc["body_sha256"], hashlib.sha256(body).hexdigest())
        n = 24 * 1024 * 1024 + 5
        r = T.curl("http://127.0.0.1:%d/bytes/%d" % (self.iport, n),
                   tmp=self.td.path, args=["-H", "Host: " + h, "-H",
                   "X-Sandgate-Token: " + TOKEN])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body), n)
        self.assertEqual(hashlib.sha256(r.body).hexdigest(), T.pattern_sha256(n))

    def ws_open(self, token=TOKEN):
        c = self.conn()
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n" % (self.host(self.ws.port), key))
        if token:
            req += "X-Sandgate-Token: %s\r\n" % token
        c.send(req + "\r\n")
        r = c.read_response("GET")
        return c, r, key

    def test_websocket_round_trip(self):
        audit = A.Audit(self, self.gw)
        c, r, key = self.ws_open(token=None)
        c.close()
        self.assertEqual(r.status, 401, r)
        c, r, key = self.ws_open()
        try:
            client = A.client_of_conn(c)
            self.assertEqual(r.status, 101, r)
            self.assertEqual(r.header("Sec-WebSocket-Accept"),
                             W.accept_key(key))
            self.assertEqual(r.header("Upgrade").lower(), "websocket")
            sent = [W.client_frame(1, b"hello ingress")]
            c.send(sent[-1])
            self.assertEqual(ws_read(c), (1, b"hello ingress"))
            big = os.urandom(200000)
            sent.append(W.client_frame(2, big))
            c.send(sent[-1])
            self.assertEqual(ws_read(c), (2, big))
            sent.append(W.client_frame(8, b""))
            c.send(sent[-1])
            self.assertEqual(ws_read(c)[0], 8)
        finally:
            c.close()
        head = self.ws.heads[-1]
        self.assertNotIn(TOKEN, head)
        self.assertIn("X-Forwarded-For: 127.0.0.1", head)
        audit.expect({"client": client}, kind="ingress", sandbox="web",
                     host=self.host(self.ws.port), ip="127.0.0.2",
                     port=self.ws.port, method="GET", path="/ws", status=101,
                     decision="allow", rule="ingress", reason=None,
                     credential=None,
                     # one row when the connection ends: every frame counted
                     bytes_up=sum(len(f) for f in sent),
                     bytes_down=A.at_least(200000 + 13 + 2))
        audit.check()

    def test_websocket_idle_timeout(self):
        # Upgraded connections idle out after ingress_upgrade_idle_timeout
        # (2s here); plain keep-alive ones keep upstream.idle_timeout (300s).
        h = self.host(self.origin.port)
        plain = self.conn()
        c, r, _ = self.ws_open()
        try:
            self.assertEqual(r.status, 101, r)
            r0 = plain.request("GET /idle-1 HTTP/1.1\r\nHost: %s\r\n"
                               "X-Sandgate-Token: %s\r\n\r\n" % (h, TOKEN))
            self.assertEqual(r0.status, 200)
            t0 = time.time()
            self.assertTrue(c.closed_by_peer(timeout=10))
            waited = time.time() - t0
            self.assertGreater(waited, 1.5)
            self.assertLess(waited, 6 * T.SLOW)
            r1 = plain.request("GET /idle-2 HTTP/1.1\r\nHost: %s\r\n"
                               "X-Sandgate-Token: %s\r\n\r\n" % (h, TOKEN))
            self.assertEqual(r1.status, 200)
        finally:
            c.close()
            plain.close()

    def test_dynamic_sandbox(self):
        audit = A.Audit(self, self.gw)

        def admin(method, path, obj=None):
            body = json.dumps(obj).encode() if obj is not None else b""
            req = ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                   "Content-Length: %d\r\n\r\n" % (method, path, len(body))).encode()
            st, _, out = T.unix_http(self.sock, req + body)
            return st, json.loads(out) if out.strip() else None

        ing = {"address": "127.0.0.3", "ports": [self.origin3.port],
               "token_sha256": T.sha256_hex(DYN_TOKEN), "public": False}
        bad = [
            dict(ing, ports=[0]), dict(ing, ports=[]), dict(ing, ports="80"),
            dict(ing, address="not-an-ip"), dict(ing, token_sha256="abc"),
            dict(ing, extra=1), {k: v for k, v in ing.items()
                                 if k != "token_sha256"},
            dict(ing, public="yes"),
        ]
        for b in bad:
            st, out = admin("POST", "/v1/sandboxes", {
                "id": "dyn", "policy": "p", "source": "198.18.0.2",
                "ingress": b})
            self.assertEqual(st, 400, (b, out))
        st, out = admin("POST", "/v1/sandboxes", {
            "id": "dyn", "policy": "p", "source": "198.18.0.2", "ingress": ing})
        self.assertEqual(st, 201, out)
        try:
            st, out = admin("GET", "/v1/sandboxes/dyn")
            self.assertEqual(st, 200, out)
            self.assertEqual(out["ingress"], {"address": "127.0.0.3",
                             "ports": [self.origin3.port], "public": False})
            self.assertTrue(out["running"])
            st, out = admin("GET", "/v1/sandboxes")
            self.assertNotIn(T.sha256_hex(DYN_TOKEN), json.dumps(out))
            web = [s for s in out["sandboxes"] if s["id"] == "web"][0]
            self.assertEqual(web["ingress"]["address"], "127.0.0.2")
            h = self.host(self.origin3.port, "dyn")
            r, _ = self.get("/dyn", h, [("X-Sandgate-Token", DYN_TOKEN)])
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["origin"], "dynguest")
            r, _ = self.get("/dyn", h, [("X-Sandgate-Token", TOKEN)])
            self.assertEqual(r.status, 401, r)
            # The launcher says the command ended: 503 until it runs again.
            st, out = admin("POST", "/v1/sandboxes/dyn/state", {"running": False})
            self.assertEqual(st, 200, out)
            r, client = self.get("/dyn-503", h, [("X-Sandgate-Token", DYN_TOKEN)])
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.header("X-Sandgate-Reason"), "sandbox-not-running")
            st, out = admin("GET", "/v1/sandboxes/dyn")
            self.assertFalse(out["running"])
            st, _ = admin("POST", "/v1/sandboxes/nosuch/state", {"running": False})
            self.assertEqual(st, 404)
            st, _ = admin("POST", "/v1/sandboxes/dyn/state", {"running": "no"})
            self.assertEqual(st, 400)
            st, _ = admin("POST", "/v1/sandboxes/dyn/state", {"running": True})
            self.assertEqual(st, 200)
            r, _ = self.get("/dyn-back", h, [("X-Sandgate-Token", DYN_TOKEN)])
            self.assertEqual(r.status, 200, r)
        finally:
            st, _ = admin("DELETE", "/v1/sandboxes/dyn")
            self.assertEqual(st, 200)
        r, _ = self.get("/dyn-gone", h, [("X-Sandgate-Token", DYN_TOKEN)])
        self.assertEqual(r.status, 404, r)
        audit.expect({"client": client}, kind="ingress", sandbox="dyn", host=h,
                     ip=None, port=self.origin3.port, method="GET",
                     path="/dyn-503", status=503, decision="error",
                     rule="ingress", reason="sandbox-not-running",
                     credential=None, bytes_up=0, bytes_down=0)
        audit.check()


class IngressTlsTest(IngressBase):
    tls = True

    @classmethod
    def make_tls(cls):
        d = cls.td.join("tls")
        os.makedirs(d)
        cls.ca_crt, cls.ca_key = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
        cls.leaf_crt = os.path.join(d, "leaf.crt")
        cls.leaf_key = os.path.join(d, "leaf.key")
        csr = os.path.join(d, "leaf.csr")
        ext = os.path.join(d, "ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:*.%s\nbasicConstraints=CA:FALSE\n"
                    "extendedKeyUsage=serverAuth\n" % DOMAIN)

        def ossl(*a):
            r = subprocess.run([T.OPENSSL] + list(a), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=T.clean_env(),
                               timeout=30)
            if r.returncode != 0:
                raise RuntimeError("openssl %s: %s" % (a[0], r.stdout.decode()))
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "2", "-subj", "/CN=ingress test CA",
             "-keyout", cls.ca_key, "-out", cls.ca_crt)
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-subj", "/CN=*.%s" % DOMAIN, "-keyout", cls.leaf_key,
             "-out", csr)
        ossl("x509", "-req", "-in", csr, "-CA", cls.ca_crt, "-CAkey", cls.ca_key,
             "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", cls.leaf_crt)
        os.chmod(cls.leaf_key, 0o600)

    def curl_tls(self, path, host, args=()):
        return T.curl("https://%s:%d%s" % (host, self.iport, path),
                      tmp=self.td.path, args=["--cacert", self.ca_crt,
                      "--resolve", "%s:%d:127.0.0.1" % (host, self.iport)]
                      + list(args))

    def test_tls_header_token(self):
        audit = A.Audit(self, self.gw)
        h = self.host(self.origin.port)
        r = self.curl_tls("/headers?tls=1", h, ["-H", "X-Sandgate-Token: " + TOKEN])
        self.assertEqual(r.status, 200, r)
        hs = r.json()["headers"]
        self.assertEqual(hdr(hs, "X-Forwarded-Proto"), ["https"])
        self.assertEqual(hdr(hs, "X-Forwarded-Host"), ["%s:%d" % (h, self.iport)])
        self.assertEqual(hdr(hs, "X-Sandgate-Token"), [])
        audit.expect({"client": A.client_of_curl(r)}, kind="ingress",
                     sandbox="web", host=h, ip="127.0.0.2",
                     port=self.origin.port, method="GET", path="/headers?tls=1",
                     status=200, decision="allow", rule="ingress", reason=None,
                     credential=None, bytes_up=0, bytes_down=A.at_least(1))
        audit.check()

    def test_tls_cookie_is_secure(self):
        h = self.host(self.origin.port)
        r = self.curl_tls("/s?sg_token=" + TOKEN, h)
        self.assertEqual(r.status, 302, r)
        self.assertEqual(r.header("Location"), "/s")
        parts = [p.strip().lower() for p in r.header("Set-Cookie").split(";")]
        self.assertIn("secure", parts)
        self.assertIn("httponly", parts)
        jar = self.td.join("tlsjar")
        r = self.curl_tls("/s2?sg_token=" + TOKEN, h, ["-L", "-c", jar, "-b", jar])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/s2")

    def test_tls_websocket(self):
        import ssl
        ctx = ssl.create_default_context(cafile=self.ca_crt)
        raw = socket.create_connection(("127.0.0.1", self.iport), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname=self.host(self.ws.port))
        c = T.Conn.__new__(T.Conn)
        c.sock, c.buf = s, b""
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            c.send("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                   "Sec-WebSocket-Version: 13\r\nX-Sandgate-Token: %s\r\n\r\n"
                   % (self.host(self.ws.port), key, TOKEN))
            r = c.read_response("GET")
            self.assertEqual(r.status, 101, r)
            c.send(W.client_frame(1, b"over tls"))
            self.assertEqual(ws_read(c), (1, b"over tls"))
        finally:
            c.close()

    def test_tls_plain_client_refused(self):
        r = T.curl("http://127.0.0.1:%d/plain" % self.iport, tmp=self.td.path,
                   args=["-H", "Host: " + self.host(self.origin.port),
                         "-H", "X-Sandgate-Token: " + TOKEN])
        self.assertNotEqual(r.status, 200, r)
        self.assertEqual(self.origin.requests_for("/plain"), [])

    def test_tls_1_1_refused(self):
        r = subprocess.run([T.OPENSSL, "s_client", "-connect",
                            "127.0.0.1:%d" % self.iport, "-tls1_1",
                            "-servername", self.host(self.origin.port)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=T.clean_env(), timeout=20)
        self.assertNotEqual(r.returncode, 0, r.stdout.decode()[-500:])


class IngressConfigTest(unittest.TestCase):

    def setUp(self):
        self.td = T.TempDir()

    def tearDown(self):
        self.td.cleanup()

    def check(self, cfg_extra, policy_text):
        pol = self.td.join("policies")
        os.makedirs(pol, exist_ok=True)
        with open(os.path.join(pol, "p.yaml"), "w") as f:
            f.write(policy_text)
        cfg = self.td.join("sandgate.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: %s\npolicies: [%s]\n%s" % (
                self.td.join("var"), pol, cfg_extra))
        return T.run_sandgate("policy", "check", "-c", cfg)

    def test_policy_ingress_errors(self):
        good = ("sandboxes:\n  - id: web\n    policy: p\n"
                "    ingress: { address: 127.0.0.1, ports: [8000, 3000], "
                "token_sha256: \"%s\" }\n"
                "policies:\n  - name: p\n    allow: [{host: a.test}]\n"
                % T.sha256_hex("x"))
        r = self.check("", good)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        cases = [
            ("ports: [8000, 3000]", "ports: [0]", "ports"),
            ("ports: [8000, 3000]", "ports: [70000]", "ports"),
            ("address: 127.0.0.1", "address: web.test", "address"),
            ("address: 127.0.0.1, ", "", "address is required"),
            ("token_sha256: \"%s\"" % T.sha256_hex("x"), "public: false",
             "token_sha256 is required"),
            ("token_sha256: \"%s\"" % T.sha256_hex("x"), "token_sha256: abc",
             "64 hex"),
            ("ports: [8000, 3000]", "ports: [8000], colour: blue",
             "unknown key \"colour\""),
        ]
        for old, new, word in cases:
            text = good.replace(old, new)
            self.assertNotEqual(text, good)
            r = self.check("", text)
            self.assertEqual(r.returncode, 1, text)
            self.assertRegex(r.stderr, r"p\.yaml:4:\d+: .*" + word, text)
        r = self.check("", good.replace("token_sha256: \"%s\"" % T.sha256_hex("x"),
                                        "public: true"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_config_keys(self):
        pol = "policies:\n  - name: p\n    allow: [{host: a.test}]\n"
        r = self.check("ingress_tls: { cert: /x.crt }\n", pol)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"sandgate\.yaml:\d+:\d+: ingress_tls: both")
        r = self.check("ingress_tls: { cert: a, key: b, chain: c }\n", pol)
        self.assertRegex(r.stderr, r"unknown key \"chain\"")
        r = self.check("ingress_upgrade_idle_timeout: forever\n", pol)
        self.assertRegex(r.stderr, r"ingress_upgrade_idle_timeout: bad duration")
        r = self.check("ingress_tls: null\ningress_upgrade_idle_timeout: 10m\n", pol)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_world_readable_key_refused(self):
        d = self.td.path
        crt, key = T.make_cert(d, cn="x." + DOMAIN, names=["*." + DOMAIN])
        os.chmod(key, 0o644)
        dns = T.Dnsmasq(d, [])
        try:
            gw = T.Gateway(d, dns, {"p.yaml": {"policies": [
                {"name": "p", "allow": [{"host": "a.test"}]}]}},
                extra={"listen": {"ingress": "127.0.0.1:%d" % T.free_port()},
                       "ingress_tls": {"cert": crt, "key": key}})
            with self.assertRaises(AssertionError):
                gw.start(timeout=5)
            with open(gw.log_path) as f:
                self.assertRegex(f.read(), r"readable by group or others")
        finally:
            dns.stop()


if __name__ == "__main__":
    T.main()
