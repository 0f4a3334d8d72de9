#!/usr/bin/python3
"""
End-to-end tests of the bypasses issue 12 names, each tried the way an
attacker inside a sandbox would, with variants the issue does not list:

- an origin connection used by a later request with another decision
  (absolute form -> CONNECT, -> another host, -> another port);
- request smuggling through `Connection` naming framing headers, in
  absolute form and inside intercepted tunnels, and the same on responses;
- `opaque: true` switching inspection off;
- scrubbing gaps on credential hosts (reason phrase, Content-Encoding lists
  and repeats, transfer codings);
- audit rows carrying an earlier request's fields.

Every origin records each request it parsed, so the tests assert what the
origin received, request by request, beside the client's result and the
audit row.
"""

import gzip
import os
import re
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
import test_credentials as C  # noqa: E402  (its test CA)

HOST = "127.0.0.2"
SECRET = "sk-bypass-Secret-0123456789abcdefXYZ"
PH = "sgtest-bypass-placeholder-0001"


# ---------------------------------------------------------------- origin

def _read_head(f):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = f.read(1)
        if not b:
            return None
        head += b
        if len(head) > 65536:
            return None
    return head


def _read_chunked(f):
    body = b""
    while True:
        line = f.readline(1024)
        if not line:
            raise ConnectionError("short chunked body")
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            while f.readline(8192) not in (b"\r\n", b""):
                pass
            return body
        body += f.read(size)
        f.readline(16)


class RecOrigin:
    """
    An HTTP/1.1 origin (plain or TLS) that parses requests one by one on
    each connection, records them, and answers by path (see _answer).
    """

    def __init__(self, name, cert=None, key=None):
        self.name = name
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(32)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.ctx = None
        if cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
        self.lock = threading.Lock()
        self.reqs = []          # dicts: conn, method, path, headers, body
        self.raw = []           # every byte received, per connection
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        n = 0
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
                self.raw.append(b"")
            threading.Thread(target=self._serve, args=(c, n),
                daemon=True).start()
            n += 1

    def _serve(self, c, idx):
        c.settimeout(20)
        try:
            if self.ctx is not None:
                c = self.ctx.wrap_socket(c, server_side=True)
            f = c.makefile("rb")
            while True:
                head = _read_head(f)
                if head is None:
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdrs = []
                for l in lines[1:]:
                    if l:
                        k, v = l.split(":", 1)
                        hdrs.append((k.strip(), v.strip()))
                hm = {k.lower(): v for k, v in hdrs}
                if "chunked" in hm.get("transfer-encoding", "").lower():
                    body = _read_chunked(f)
                elif "content-length" in hm:
                    body = f.read(int(hm["content-length"]))
                else:
                    body = b""
                rec = {"conn": idx, "method": method, "path": path,
                       "headers": hdrs, "hmap": hm, "body": body}
                with self.lock:
                    self.reqs.append(rec)
                    self.raw[idx] += head + body
                out = self._answer(rec)
                c.sendall(out)
                if b"Connection: close" in out:
                    return
        except (OSError, ValueError, ConnectionError):
            return
        finally:
            try:
                c.close()
            except OSError:
                pass

    def _answer(self, rec):
        p = rec["path"]
        body = ("%s %s %s\n" % (self.name, rec["method"], p)).encode()
        if p.startswith("/reason"):
            return (b"HTTP/1.1 200 OK " + SECRET.encode() +
                b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        if p.startswith("/ce-"):
            z = gzip.compress(b"hidden " + SECRET.encode())
            ce = {"/ce-double": b"Content-Encoding: identity\r\n"
                                b"Content-Encoding: gzip\r\n",
                  "/ce-list": b"Content-Encoding: identity, gzip\r\n",
                  "/ce-upper": b"content-encoding: GZIP\r\n",
                  "/ce-deflate": b"Content-Encoding: deflate\r\n"}[p]
            return (b"HTTP/1.1 200 OK\r\n" + ce +
                b"Content-Length: %d\r\n\r\n" % len(z) + z)
        if p.startswith("/te-gzip"):
            z = gzip.compress(b"hidden " + SECRET.encode())
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n"
                b"\r\n%x\r\n" % len(z) + z + b"\r\n0\r\n\r\n")
        if p.startswith("/extra"):
            # a response, and one nobody asked for right behind it
            return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" %
                len(body) + body + b"HTTP/1.1 200 OK\r\nContent-Length: 8"
                b"\r\n\r\ninjected")
        if p.startswith("/conn-cl"):
            return (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, "
                b"Content-Length\r\nContent-Length: %d\r\n\r\n" % len(body) +
                body)
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def requests(self):
        with self.lock:
            return list(self.reqs)

    def paths(self):
        return [r["path"] for r in self.requests()]

    def received(self, needle):
        with self.lock:
            return any(needle in r for r in self.raw)

    def stop(self):
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.thread.join(2)


# ---------------------------------------------------------------- policy

POLICY = """\
sandboxes:
  - id: local
    policy: byp
    source: [127.0.0.1/32]
policies:
  - name: byp
    allow:
      - host: a.test
        ports: [{a}, {a2}]
      - host: getonly.test
        ports: [{g}]
        methods: [GET]
      - host: bound.test
        ports: [{b}]
        tls: intercept
      - host: op.test
        ports: [{o}]
        opaque: true
      - host: b.test
        ports: [{a}]
    deny:
      - host: op.test
        paths: ["/admin*"]
      - host: denied.test
    allow_private: [{host}/32]
    credentials: [key]
credentials:
  - name: key
    secret: key-secret
    hosts: [bound.test]
    placeholder: "{ph}"
"""


class BypassTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-bypass-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("bound.test", ["bound.test"])
        cls.a = RecOrigin("a")
        cls.a2 = RecOrigin("a2")
        cls.g = RecOrigin("getonly")
        cls.b = RecOrigin("bound", crt, key)
        for o in (cls.a, cls.a2, cls.g, cls.b):
            cls.addClassCleanup(o.stop)
        cls.op = T.RawServer(HOST, mode="echo")
        cls.addClassCleanup(cls.op.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in ("a.test", "b.test",
            "getonly.test", "bound.test", "op.test", "denied.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.sport = T.free_port()
        policy = POLICY.format(a=cls.a.port, a2=cls.a2.port, g=cls.g.port,
            b=cls.b.port, o=cls.op.port, host=HOST, ph=PH)
        cls.gw = T.Gateway(d, cls.dns, {"byp.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert},
            "listen": {"socks5": "127.0.0.1:%d" % cls.sport}})
        r = T.run_sandgate("vault", "set", "key-secret", "-c", cls.gw.cfg_path,
            input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gwca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()

    # ------------------------------------------------------------ helpers

    def conn(self):
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        return c

    def tls_upgrade(self, c, host):
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.buf = b""

    def row(self, **match):
        rows = self.gw.wait_audit(**match)
        self.assertTrue(rows, "no audit row %r; last: %r" % (match,
            self.gw.audit_rows()[-5:]))
        return rows[-1]

    def absreq(self, host, port, path, method="GET", extra="", body=b""):
        return ("%s http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n%s" % (method,
            host, port, path, host, port, extra)).encode() + \
            (b"Content-Length: %d\r\n\r\n" % len(body) + body
             if body else b"\r\n")

    def settle(self):
        time.sleep(0.3 * T.SLOW)

    # ------------------------------------------- origin bound to its decision

    def test_absolute_then_connect_secret_stays_with_bound_host(self):
        c = self.conn()
        r = c.request(self.absreq("a.test", self.a.port, "/first-ob"))
        self.assertEqual(r.status, 200, r)
        c.send("CONNECT bound.test:%d HTTP/1.1\r\nHost: bound.test:%d\r\n\r\n"
            % (self.b.port, self.b.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        self.tls_upgrade(c, "bound.test")
        r = c.request("GET /second-ob HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Authorization: Bearer %s\r\n\r\n" % (self.b.port, PH))
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"bound GET /second-ob", r.body)
        self.settle()
        self.assertNotIn("/second-ob", self.a.paths())
        self.assertFalse(self.a.received(SECRET.encode()))
        self.assertFalse(self.a.received(PH.encode()))
        got = [q for q in self.b.requests() if q["path"] == "/second-ob"]
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0]["hmap"]["authorization"], "Bearer " + SECRET)
        self.row(path="/second-ob", host="bound.test", decision="allow",
            credential="key")

    def test_absolute_then_connect_get_only_host_delete_refused(self):
        c = self.conn()
        self.assertEqual(c.request(self.absreq("a.test", self.a.port,
            "/first-del")).status, 200)
        c.send("CONNECT getonly.test:%d HTTP/1.1\r\nHost: getonly.test:%d"
            "\r\n\r\n" % (self.g.port, self.g.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        r = c.request("DELETE /del-inside HTTP/1.1\r\nHost: getonly.test:%d\r\n"
            "\r\n" % self.g.port)
        self.assertEqual(r.status, 403, r)
        self.settle()
        self.assertNotIn("/del-inside", self.a.paths() + self.g.paths())
        row = self.row(path="/del-inside")
        self.assertEqual((row["decision"], row["host"], row["reason"]),
            ("deny", "getonly.test", "policy-deny"), row)

    def test_absolute_then_connect_get_goes_to_tunnel_host(self):
        c = self.conn()
        self.assertEqual(c.request(self.absreq("a.test", self.a.port,
            "/first-get")).status, 200)
        c.send("CONNECT getonly.test:%d HTTP/1.1\r\nHost: getonly.test:%d"
            "\r\n\r\n" % (self.g.port, self.g.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        r = c.request("GET /get-inside HTTP/1.1\r\nHost: getonly.test:%d\r\n"
            "\r\n" % self.g.port)
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"getonly GET /get-inside", r.body)
        self.settle()
        self.assertNotIn("/get-inside", self.a.paths())

    def test_absolute_then_opaque_connect_has_its_row(self):
        # A tunnel after a request on one connection is a decision of its
        # own: its row is written when it ends, whatever the request's was
        # (found by fuzz_worker: the request's row hid the tunnel's).
        for n in (1, 2):
            with self.subTest(requests_before=n):
                c = self.conn()
                for i in range(n):
                    self.assertEqual(c.request(self.absreq(
                        "a.test", self.a.port, "/before-op-%d-%d" % (n, i))
                    ).status, 200)
                c.send("CONNECT op.test:%d HTTP/1.1\r\nHost: op.test:%d"
                       "\r\n\r\n" % (self.op.port, self.op.port))
                self.assertEqual(c.read_response("CONNECT").status, 200)
                mark = b"opaque-after-%d\r\n" % n
                self.assertIn(mark, self.echoed(c, mark))
                client = "127.0.0.1:%d" % c.sock.getsockname()[1]
                c.close()
                row = self.row(kind="connect", host="op.test",
                               client=client, decision="allow")
                self.assertEqual(row["rule"], "byp:allow[3]", row)
                self.assertGreaterEqual(row["bytes_up"], len(mark), row)
                self.assertIsNone(row["path"], row)

    def test_absolute_then_passthrough_connect_has_its_row(self):
        c = self.conn()
        self.assertEqual(c.request(self.absreq("a.test", self.a.port,
            "/before-pt")).status, 200)
        # a.test is not intercepted: TLS inside passes through unread.
        c.send("CONNECT a.test:%d HTTP/1.1\r\nHost: a.test:%d\r\n\r\n" %
               (self.a2.port, self.a2.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        client = "127.0.0.1:%d" % c.sock.getsockname()[1]
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            ctx.wrap_socket(c.sock, server_hostname="a.test").close()
        except (ssl.SSLError, OSError):
            pass    # a plain origin: the handshake fails there, not here
        c.close()
        row = self.row(kind="connect", host="a.test", port=self.a2.port,
                       client=client)
        self.assertEqual((row["decision"], row["rule"]),
                         ("allow", "byp:allow[0]"), row)
        self.assertGreater(row["bytes_up"], 0, row)

    def test_absolute_to_another_host_same_address_new_connection(self):
        # a.test and b.test share address and port: still two decisions
        c = self.conn()
        self.assertEqual(c.request(self.absreq("a.test", self.a.port,
            "/host-a")).status, 200)
        self.assertEqual(c.request(self.absreq("b.test", self.a.port,
            "/host-b")).status, 200)
        self.settle()
        reqs = {q["path"]: q for q in self.a.requests()}
        self.assertNotEqual(reqs["/host-a"]["conn"], reqs["/host-b"]["conn"])
        self.assertEqual(reqs["/host-b"]["hmap"]["host"],
            "b.test:%d" % self.a.port)
        self.row(path="/host-b", host="b.test", decision="allow")

    def test_absolute_to_another_port_new_connection(self):
        c = self.conn()
        self.assertEqual(c.request(self.absreq("a.test", self.a.port,
            "/port-1")).status, 200)
        r = c.request(self.absreq("a.test", self.a2.port, "/port-2"))
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"a2 GET /port-2", r.body)
        self.settle()
        self.assertNotIn("/port-2", self.a.paths())
        self.assertIn("/port-2", self.a2.paths())

    def test_keepalive_same_decision_reuses(self):
        c = self.conn()
        for p in ("/same-1", "/same-2"):
            self.assertEqual(c.request(self.absreq("a.test", self.a.port,
                p)).status, 200)
        self.settle()
        reqs = {q["path"]: q for q in self.a.requests()}
        self.assertEqual(reqs["/same-1"]["conn"], reqs["/same-2"]["conn"])

    # --------------------------------------------- smuggling via Connection

    def smuggle_body(self, host, port):
        return ("DELETE /smuggled HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host,
            port)).encode()

    def assert_one_post(self, origin, path, body):
        self.settle()
        self.assertNotIn("/smuggled", origin.paths())
        got = [q for q in origin.requests() if q["path"] == path]
        self.assertEqual(len(got), 1, origin.requests())
        self.assertEqual(got[0]["body"], body)
        return got[0]

    def test_connection_names_content_length(self):
        body = self.smuggle_body("a.test", self.a.port)
        r = T.raw_request(self.gw.port, self.absreq("a.test", self.a.port,
            "/smug-cl", "POST", "Connection: keep-alive, Content-Length\r\n",
            body))
        self.assertEqual(r.status, 200, r)
        q = self.assert_one_post(self.a, "/smug-cl", body)
        self.assertEqual(q["hmap"].get("content-length"), str(len(body)))
        self.row(path="/smug-cl", decision="allow", method="POST")

    def test_connection_names_content_length_other_casing(self):
        body = self.smuggle_body("a.test", self.a.port)
        r = T.raw_request(self.gw.port, self.absreq("a.test", self.a.port,
            "/smug-case", "POST", "connection: CONTENT-length,keep-alive\r\n",
            body))
        self.assertEqual(r.status, 200, r)
        self.assert_one_post(self.a, "/smug-case", body)

    def test_connection_names_transfer_encoding(self):
        inner = self.smuggle_body("a.test", self.a.port)
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(inner), inner)
        req = ("POST http://a.test:%d/smug-te HTTP/1.1\r\nHost: a.test:%d\r\n"
            "Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n"
            "\r\n" % (self.a.port, self.a.port)).encode() + chunked
        r = T.raw_request(self.gw.port, req)
        self.assertEqual(r.status, 200, r)
        self.assert_one_post(self.a, "/smug-te", inner)

    def test_connection_names_host_in_tunnel(self):
        c = self.conn()
        c.send("CONNECT a.test:%d HTTP/1.1\r\nHost: a.test:%d\r\n\r\n" %
            (self.a.port, self.a.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        r = c.request("GET /conn-host HTTP/1.1\r\nHost: a.test:%d\r\n"
            "Connection: Host\r\n\r\n" % self.a.port)
        self.assertEqual(r.status, 200, r)
        self.settle()
        got = [q for q in self.a.requests() if q["path"] == "/conn-host"]
        self.assertEqual(got[0]["hmap"].get("host"), "a.test:%d" % self.a.port)

    def test_smuggling_inside_credential_tunnel(self):
        c = self.conn()
        c.send("CONNECT bound.test:%d HTTP/1.1\r\nHost: bound.test:%d\r\n\r\n"
            % (self.b.port, self.b.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        self.tls_upgrade(c, "bound.test")
        # the body would open a request whose body swallows the next one
        inner = ("GET /captured HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Content-Length: 400\r\n\r\n" % self.b.port).encode()
        req = ("POST /smug-cred HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Connection: keep-alive, Content-Length\r\n"
            "Content-Length: %d\r\n\r\n" % (self.b.port, len(inner))).encode()
        r = c.request(req + inner)
        self.assertEqual(r.status, 200, r)
        r = c.request("GET /after-smug HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Authorization: Bearer %s\r\n\r\n" % (self.b.port, PH))
        self.assertEqual(r.status, 200, r)
        self.settle()
        paths = self.b.paths()
        self.assertNotIn("/captured", paths)
        self.assertIn("/smug-cred", paths)
        got = [q for q in self.b.requests() if q["path"] == "/after-smug"]
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0]["hmap"]["authorization"], "Bearer " + SECRET)
        q = [q for q in self.b.requests() if q["path"] == "/smug-cred"][0]
        self.assertEqual(q["body"], inner)

    def test_response_connection_names_content_length(self):
        c = self.conn()
        r = c.request(self.absreq("a.test", self.a.port, "/conn-cl"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Content-Length"), str(len(r.body)), r)
        self.assertIn(b"a GET /conn-cl", r.body)
        # the connection stays in step: a second request works
        r = c.request(self.absreq("a.test", self.a.port, "/after-conn-cl"))
        self.assertEqual(r.status, 200, r)
        self.assertIn(b"/after-conn-cl", r.body)

    def test_unasked_response_not_given_to_next_request(self):
        c = self.conn()
        r = c.request(self.absreq("a.test", self.a.port, "/extra"))
        self.assertEqual(r.status, 200, r)
        time.sleep(0.2 * T.SLOW)
        for p in ("/after-extra-1", "/after-extra-2"):
            r = c.request(self.absreq("a.test", self.a.port, p))
            self.assertEqual(r.status, 200, r)
            self.assertNotEqual(r.body, b"injected")
            self.assertIn(p.encode(), r.body)

    # ------------------------------------------ upgrades past the decision

    def test_h2c_upgrade_forwarded_without_the_offer(self):
        # HTTP/2 after a 101 would carry requests no rule decided
        c = self.conn()
        r = c.request(self.absreq("getonly.test", self.g.port, "/h2c",
            extra="Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
            "HTTP2-Settings: AAMAAABkAAQAAP__\r\n"))
        self.assertEqual(r.status, 200, r)
        self.settle()
        q = [q for q in self.g.requests() if q["path"] == "/h2c"][0]
        self.assertNotIn("upgrade", q["hmap"])
        self.assertNotIn("http2-settings", q["hmap"])

    def test_other_upgrade_refused_where_rule_inspects(self):
        r = T.raw_request(self.gw.port, self.absreq("getonly.test",
            self.g.port, "/tcp-up", extra="Connection: upgrade\r\n"
            "Upgrade: raw-tcp\r\n"))
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upgrade-refused")
        self.settle()
        self.assertNotIn("/tcp-up", self.g.paths())

    def test_other_upgrade_allowed_where_rule_does_not_inspect(self):
        r = T.raw_request(self.gw.port, self.absreq("a.test", self.a.port,
            "/tcp-up-a", extra="Connection: upgrade\r\nUpgrade: raw-tcp\r\n"))
        self.assertEqual(r.status, 200, r)   # this origin does not switch
        self.settle()
        q = [q for q in self.a.requests() if q["path"] == "/tcp-up-a"][0]
        self.assertEqual(q["hmap"].get("upgrade"), "raw-tcp")

    # --------------------------------------------------------- opaque

    def test_opaque_with_methods_is_a_policy_error(self):
        p = os.path.join(self.td.path, "bad-opaque")
        os.makedirs(p, exist_ok=True)
        with open(os.path.join(p, "x.yaml"), "w") as f:
            f.write("policies:\n  - name: x\n    allow:\n      - host: s.test\n"
                "        opaque: true\n        methods: [GET]\n"
                "      - host: t.test\n        paths: [\"/a\"]\n"
                "        opaque: true\n")
        cfg = os.path.join(p, "sg.yaml")
        with open(cfg, "w") as f:
            f.write("policies: [%s]\n" % p)
        r = T.run_sandgate("policy", "check", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        err = r.stdout + r.stderr
        self.assertIn("x.yaml:5:9:", err)
        self.assertIn("x.yaml:9:9:", err)
        self.assertIn("opaque", err)

    def opaque_tunnel(self):
        c = self.conn()
        c.send("CONNECT op.test:%d HTTP/1.1\r\nHost: op.test:%d\r\n\r\n" %
            (self.op.port, self.op.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        return c

    def tls_refused(self, c, sni):
        """A ClientHello for sni inside tunnel c: 1 when the handshake failed."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            ctx.wrap_socket(c.sock, server_hostname=sni).close()
        except (ssl.SSLError, OSError):
            return True
        return False

    def echoed(self, c, mark):
        """Send mark into tunnel c; what came back once it did (or time ran out)."""
        c.send(mark)
        got = b""
        deadline = time.time() + 5 * T.SLOW
        while mark not in got and time.time() < deadline:
            got += c.read_some()
        return got

    def op_bytes(self):
        time.sleep(0.3 * T.SLOW)
        with self.op.lock:
            return b"".join(self.op.received)

    def test_opaque_tunnel_http_path_deny_applies(self):
        c = self.opaque_tunnel()
        r = c.request("GET /admin/x HTTP/1.1\r\nHost: op.test:%d\r\n\r\n" %
            self.op.port)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny")
        self.assertNotIn(b"/admin/x", self.op_bytes())
        row = self.row(path="/admin/x")
        self.assertEqual((row["decision"], row["rule"]), ("deny",
            "byp:deny[0]"), row)

    def test_opaque_tunnel_http_host_checked(self):
        c = self.opaque_tunnel()
        r = c.request("GET /front HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "host-mismatch")
        self.assertNotIn(b"/front", self.op_bytes())

    def test_opaque_tunnel_tls_sni_checked(self):
        c = self.opaque_tunnel()
        self.assertTrue(self.tls_refused(c, "elsewhere.test"))
        self.assertNotIn(b"elsewhere.test", self.op_bytes())
        self.row(host="op.test", reason="sni-mismatch", decision="deny")

    def test_opaque_tunnel_other_bytes_pass(self):
        c = self.opaque_tunnel()
        self.assertIn(b"SSH-2.0-opaque-client",
                      self.echoed(c, b"SSH-2.0-opaque-client\r\n"))

    def test_opaque_tunnel_silence_is_no_way_around(self):
        # The 5 s an opaque tunnel waits for a server that speaks first are
        # no way around its checks: the client's first bytes are classified
        # whenever they come -- TLS must name the tunnel, HTTP is decided
        # request by request, only other bytes pass unseen.
        tls, http, other = (self.opaque_tunnel() for _ in range(3))
        time.sleep(6)
        self.assertTrue(self.tls_refused(tls, "elsewhere.test"))
        r = http.request("GET /late HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "host-mismatch")
        self.assertIn(b"SSH-2.0-late-client",
                      self.echoed(other, b"SSH-2.0-late-client\r\n"))
        seen = self.op_bytes()
        self.assertNotIn(b"elsewhere.test", seen)
        self.assertNotIn(b"/late", seen)
        self.row(host="op.test", reason="sni-mismatch", decision="deny")

    # ------------------------------------------------- scrubbing gaps

    def bound_get(self, path):
        c = self.conn()
        c.send("CONNECT bound.test:%d HTTP/1.1\r\nHost: bound.test:%d\r\n\r\n"
            % (self.b.port, self.b.port))
        self.assertEqual(c.read_response("CONNECT").status, 200)
        self.tls_upgrade(c, "bound.test")
        c.send("GET %s HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Authorization: Bearer %s\r\n\r\n" % (path, self.b.port, PH))
        head = c.read_until(b"\r\n\r\n")
        try:
            rest = c.read_to_eof()
        except OSError:
            rest = b""
        return head, rest

    def test_reason_phrase_scrubbed(self):
        head, rest = self.bound_get("/reason")
        self.assertNotIn(SECRET.encode(), head + rest)
        self.assertIn(PH.encode(), head.split(b"\r\n")[0])

    def assert_encoding_refused(self, path):
        head, rest = self.bound_get(path)
        self.assertTrue(head.startswith(b"HTTP/1.1 502"), head)
        self.assertIn(b"X-Sandgate-Reason: upstream-encoding", head)
        self.assertNotIn(SECRET.encode(), head + rest)
        self.assertNotIn(gzip.compress(b"hidden " + SECRET.encode())[10:],
            head + rest)
        row = self.row(path=path)
        self.assertEqual((row["decision"], row["reason"], row["status"]),
            ("error", "upstream-encoding", 502), row)

    def test_two_content_encoding_headers_refused(self):
        self.assert_encoding_refused("/ce-double")

    def test_content_encoding_list_refused(self):
        self.assert_encoding_refused("/ce-list")

    def test_content_encoding_casing_refused(self):
        self.assert_encoding_refused("/ce-upper")

    def test_content_encoding_deflate_refused(self):
        self.assert_encoding_refused("/ce-deflate")

    def test_transfer_coding_other_than_chunked_refused(self):
        self.assert_encoding_refused("/te-gzip")

    def test_transfer_coding_refused_on_any_host(self):
        r = T.raw_request(self.gw.port, self.absreq("a.test", self.a.port,
            "/te-gzip"))
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upstream-encoding")

    # ------------------------------------------------- audit rows

    def test_pipelined_malformed_row_has_no_earlier_fields(self):
        c = self.conn()
        c.send(self.absreq("a.test", self.a.port, "/pipe-ok") +
            b"GET http://a.test:%d/x HTTP/1.1\r\nHost:\x01bad\r\n\r\n" %
            self.a.port)
        r = c.read_response()
        self.assertEqual(r.status, 200, r)
        r = c.read_response()
        self.assertEqual(r.status, 400, r)
        first = self.row(path="/pipe-ok")
        rows = self.gw.wait_audit(pred=lambda x: x["id"] > first["id"] and
            x["client"] == first["client"])
        self.assertTrue(rows)
        bad = rows[0]
        self.assertEqual(bad["reason"], "bad-request", bad)
        self.assertIsNone(bad["host"], bad)
        self.assertIsNone(bad["ip"], bad)
        self.assertIsNone(bad["path"], bad)
        self.assertNotEqual(bad["rule"], first["rule"], bad)

    def test_pipelined_denied_row_names_its_own_host(self):
        c = self.conn()
        c.send(self.absreq("a.test", self.a.port, "/pipe-ok2") +
            self.absreq("denied.test", self.a.port, "/pipe-denied"))
        self.assertEqual(c.read_response().status, 200)
        self.assertEqual(c.read_response().status, 403)
        row = self.row(path="/pipe-denied")
        self.assertEqual((row["host"], row["rule"], row["ip"]),
            ("denied.test", "byp:deny[1]", None), row)

    def test_pipelined_bad_version_after_connect_like_request(self):
        c = self.conn()
        c.send(self.absreq("a.test", self.a.port, "/pipe-ok3") +
            b"GET http://a.test/v HTTP/2.0\r\n\r\n")
        self.assertEqual(c.read_response().status, 200)
        self.assertEqual(c.read_response().status, 505)
        first = self.row(path="/pipe-ok3")
        rows = self.gw.wait_audit(pred=lambda x: x["id"] > first["id"] and
            x["client"] == first["client"])
        self.assertTrue(rows)
        self.assertIsNone(rows[0]["host"], rows[0])
        self.assertEqual(rows[0]["rule"], "default-deny", rows[0])

    def socks_connect_name(self, name, port=80):
        s = socket.create_connection(("127.0.0.1", self.sport), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"\x05\x01\x00")
        self.assertEqual(s.recv(2), b"\x05\x00")
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
            struct.pack(">H", port))
        return s.recv(10)

    def test_socks_invalid_name_row_names_it(self):
        rep = self.socks_connect_name(b"bad name!.test")
        self.assertEqual(rep[1], 2, rep)
        rows = self.gw.wait_audit(kind="socks5", reason="invalid-host",
            pred=lambda r: r["host"] is not None and "bad" in r["host"])
        self.assertTrue(rows, self.gw.audit_rows()[-3:])

    def test_socks_invalid_name_control_bytes_escaped(self):
        rep = self.socks_connect_name(b"evil\x1b[31m\x00.test")
        self.assertEqual(rep[1], 2, rep)
        rows = self.gw.wait_audit(kind="socks5", reason="invalid-host",
            pred=lambda r: r["host"] and "evil" in r["host"])
        self.assertTrue(rows)
        self.assertNotIn("\x1b", rows[-1]["host"])
        self.assertNotIn("\x00", rows[-1]["host"])

    def test_socks_invalid_name_cannot_write_log_fields(self):
        # A SOCKS5 name may hold any byte: spaces and quotes must not let
        # it add key=value fields of its own to the gateway's log line.
        for name, seen in ((b'x reason=allowed sandbox=other.test', "x"),
                           (b'"y" rule=p:allow[0]', r"\\x22y")):
            with self.subTest(name=name):
                rep = self.socks_connect_name(name)
                self.assertEqual(rep[1], 2, rep)
                rows = self.gw.wait_audit(
                    kind="socks5", reason="invalid-host",
                    pred=lambda r, n=name: r["host"] and
                    n.decode()[-8:].replace(" ", "\\x20") in r["host"])
                self.assertTrue(rows, self.gw.audit_rows()[-3:])
                host = rows[-1]["host"]
                self.assertNotIn(" ", host)
                self.assertNotIn('"', host)
                m = self.gw.wait_log(r"^.*host=%s\S*\\x20.*$" % seen)
                self.assertIsNotNone(m, self.gw.log_tail())
                line = m.group(0)
                self.assertEqual(len(re.findall(r" reason=", line)), 1, line)
                self.assertEqual(len(re.findall(r" sandbox=", line)), 1, line)
                self.assertEqual(len(re.findall(r" rule=", line)), 1, line)
                self.assertIn(" reason=invalid-host ", line)


if __name__ == "__main__":
    T.main()
