#!/usr/bin/python3
"""
Probes of the ingress listener (SPEC section 10, docs/ingress.md) as an
outside attacker without a token, and as the user (or the app) of one
sandbox trying to reach another. Static sandboxes only, loopback guests, no
launcher: "a" (token TA, guest 127.0.0.2, plus a raw recording guest on the
same address), "b" (token TB, guest 127.0.0.3), "evil" (public, a scripted
guest on 127.0.0.4 that misbehaves on purpose), and a dynamic "dyn"
registered over the admin socket (guest 127.0.0.5).

FOUND:
- test_client_x_forwarded_headers_dropped: docs/ingress.md promises that
  "Any X-Forwarded-* or Forwarded header from the client is dropped"; only
  X-Forwarded-For/-Proto/-Host and Forwarded are (proxy_ingress.c
  header_is_forwarding). X-Forwarded-Port, -Prefix, -Ssl, -Scheme, -Server,
  -Uri, -Method, -User, -Email, -Preferred-Username, -Groups,
  -Access-Token from an attacker without any special standing reach the
  guest next to the gateway's own X-Forwarded-* headers.

Tried, held (kept where no existing test covers the promise):
- A's token, B's sandbox: absolute form naming B with Host A and A's
  token; A's cookie presented to B; a pipelined request for B behind an
  allowed one for A; B's guest sees nothing, 401 rows (kept);
- an Upgrade: websocket handshake without a token, with B's cookie, with
  A's token in the query (302, nothing forwarded) (kept);
- a kept-alive client connection after the sandbox is stopped, removed and
  registered again with another token: each request decided afresh (kept);
- request smuggling toward the guest: CL+TE, two Content-Length,
  "Content-Length: 4, 4", TE gzip/identity, "Transfer-Encoding :", chunk
  size with BWS / 0x / + / overflow / bare LF / bare CR in an extension
  are 400 and never forwarded; chunk trailers (X-Forwarded-For,
  X-Sandgate-Token in them) are not forwarded (trailer part kept);
- response desync from an attacker's sandbox toward the next request on the
  same client connection (extra bytes after Content-Length, a body on HEAD,
  204 and 304, 101 to a plain GET, CL+TE answer): the next request, for B,
  gets B's guest's answer (kept);
- Host variants: upper case, trailing dot, a listener port that differs
  (ignored as documented), two Host headers (400), HTTP/1.0 without Host
  (400), a 300-character label (400), an id of 41 characters (404
  ingress-unknown-host), UTF-8 IDN (400), punycode id (404
  ingress-unknown-sandbox), a port not published (404), stopped sandbox
  (503); token in upper case (401); absolute form without a path, "?x"
  right after the authority (400), fragment (403 invalid-host as on the
  proxy);
- the token never in the log, the audit db or a row for 400/414/431/408/
  505 heads that carry it (query, header, cookie);
- Connection: Host / Cookie / X-Forwarded-For cannot remove or keep what the
  gateway sets; the 302 carries Cache-Control: no-store and no token
  reaches a Referer (the token URL is never a document).
Not a documented promise, so no test (see the report): a guest's
Set-Cookie with Domain=<ingress_domain> (also named sg_token, with a longer
Path so browsers send it first) is relayed, so one sandbox's app can toss
cookies into every other sandbox; all PORT-ID.<ingress_domain> hosts are one
"site", so SameSite=Lax does not stop sandbox A's page from sending
cookie-authenticated requests or WebSocket handshakes to sandbox B (no Origin
check); X-Real-IP, True-Client-IP, X-Client-IP, X_Forwarded_For reach the
guest as sent.
"""

import json
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

DOMAIN = "sandbox.localhost"
TA = "tokA-1111aaaa2222bbbb"
TB = "tokB-3333cccc4444dddd"
TD = "tokD-5555eeee6666ffff"
TD2 = "tokD2-77778888"
WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="


def hdr(headers, name):
    return [v for k, v in headers if k.lower() == name.lower()]


class RawGuest(T.Listener):
    """Records the raw bytes of each connection; answers one 200 with
    Connection: close once a whole request (Content-Length or chunked, the
    trailer section included) has arrived."""

    END_CHUNKED = re.compile(rb"(?:^|\r\n)0(?:;[^\r\n]*)?\r\n"
                             rb"(?:[^\r\n]+\r\n)*\r\n$")

    def __init__(self, host):
        self.got = []
        super().__init__(host)

    def serve(self, c, idx):
        c.settimeout(5)
        buf = b""
        with self.lock:
            i = len(self.got)
            self.got.append(b"")
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    return
                buf += b
                with self.lock:
                    self.got[i] = buf
                if b"\r\n\r\n" not in buf:
                    continue
                head, body = buf.split(b"\r\n\r\n", 1)
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if b"chunked" in head.lower():
                    done = self.END_CHUNKED.search(body) is not None
                else:
                    done = len(body) >= (int(m.group(1)) if m else 0)
                if done:
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                              b"Connection: close\r\n\r\nok")
                    return
        except OSError:
            pass

    def seen(self):
        with self.lock:
            return list(self.got)


class EvilGuest(T.Listener):
    """An attacker's app: answers per path with bytes meant to become the
    answer to the client's next request on the same connection."""

    FAKE = (b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Fake: 1\r\n\r\n"
            b"PWNED!")
    ANSWERS = {
        b"/extra": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + FAKE,
        b"/headbody": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                      % len(FAKE) + FAKE,
        b"/204body": b"HTTP/1.1 204 No Content\r\n\r\n" + FAKE,
        b"/304body": b"HTTP/1.1 304 Not Modified\r\nContent-Length: %d\r\n"
                     b"\r\n" % len(FAKE) + FAKE,
        b"/101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\n\r\n" + FAKE,
        b"/clte": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + FAKE,
        b"/toss": b"HTTP/1.1 200 OK\r\nSet-Cookie: sg_token=tossed; "
                  b"Domain=" + DOMAIN.encode() + b"; Path=/api\r\n"
                  b"Set-Cookie:  sg%5Ftoken =x2; Path=/\r\n"
                  b"Set-Cookie: app=1; Path=/\r\nContent-Length: 2\r\n"
                  b"\r\nok",
    }

    def serve(self, c, idx):
        c.settimeout(5)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    b = c.recv(65536)
                    if not b:
                        return
                    buf += b
                head, buf = buf.split(b"\r\n\r\n", 1)
                path = head.split(b"\r\n")[0].split(b" ")[1]
                c.sendall(self.ANSWERS.get(
                    path, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        except OSError:
            pass


class Ingress2Probe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-ing2probe-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.ga = T.Origin("guest-a", host="127.0.0.2")
        cls.addClassCleanup(cls.ga.stop)
        cls.raw = RawGuest("127.0.0.2")
        cls.addClassCleanup(cls.raw.stop)
        cls.gb = T.Origin("guest-b", host="127.0.0.3")
        cls.addClassCleanup(cls.gb.stop)
        cls.ge = EvilGuest("127.0.0.4")
        cls.addClassCleanup(cls.ge.stop)
        cls.gd = T.Origin("guest-dyn", host="127.0.0.5")
        cls.addClassCleanup(cls.gd.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        cls.iport = T.free_port()
        cls.sock = cls.td.join("admin.sock")
        policy = {
            "sandboxes": [
                {"id": "a", "policy": "p",
                 "ingress": {"address": "127.0.0.2",
                             "ports": [cls.ga.port, cls.raw.port],
                             "token_sha256": T.sha256_hex(TA)}},
                {"id": "b", "policy": "p",
                 "ingress": {"address": "127.0.0.3", "ports": [cls.gb.port],
                             "token_sha256": T.sha256_hex(TB)}},
                {"id": "evil", "policy": "p",
                 "ingress": {"address": "127.0.0.4", "ports": [cls.ge.port],
                             "public": True}},
            ],
            "policies": [{"name": "p", "allow": [{"host": "allowed.test"}]}],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy}, extra={
            "listen": {"ingress": "127.0.0.1:%d" % cls.iport,
                       "admin": cls.sock}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.iport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("ingress not up:\n" + cls.gw.log_tail())
        cls.gw.wait_admin(cls.sock)
        cls.ha = "%d-a.%s" % (cls.ga.port, DOMAIN)
        cls.hr = "%d-a.%s" % (cls.raw.port, DOMAIN)
        cls.hb = "%d-b.%s" % (cls.gb.port, DOMAIN)
        cls.he = "%d-evil.%s" % (cls.ge.port, DOMAIN)
        cls.hd = "%d-dyn.%s" % (cls.gd.port, DOMAIN)

    # ------------------------------------------------------------ helpers

    def conn(self):
        c = T.Conn(self.iport, timeout=5)
        self.addCleanup(c.close)
        return c, "%s:%d" % c.sock.getsockname()[:2]

    def send(self, data):
        c, client = self.conn()
        c.send(data)
        return c.read_response(), client

    def row(self, client, **match):
        rows = self.gw.wait_audit(kind="ingress", client=client, **match)
        self.assertTrue(rows, (client, match, self.gw.audit_rows(
            kind="ingress", client=client)))
        return rows[-1]

    def b_saw(self, prefix):
        return [q["path"] for q in self.gb.requests
                if q["path"].startswith(prefix)]

    # ------------------------------------------------- X-Forwarded-* headers

    def test_client_x_forwarded_headers_dropped(self):
        """
        docs/ingress.md "What the guest sees": the guest gets
        "`X-Forwarded-For` (the client's address), `X-Forwarded-Proto`
        (`http` or `https`), `X-Forwarded-Host` (the `Host` as sent, port
        included). Any `X-Forwarded-*` or `Forwarded` header from the client
        is dropped, not appended to: the ingress listener is the edge."
        Sent, with sandbox a's token: `GET /headers` carrying
        X-Forwarded-Port: 443, X-Forwarded-Prefix: /admin,
        X-Forwarded-Ssl: on, X-Forwarded-Scheme: https,
        X-Forwarded-Server, -Uri, -Method, and the identity headers an
        authenticating edge sets (X-Forwarded-User: admin,
        X-Forwarded-Email, X-Forwarded-Preferred-Username,
        X-Forwarded-Groups, X-Forwarded-Access-Token).
        Happens: all of them reach the guest as sent, next to the gateway's
        own X-Forwarded-For/-Proto/-Host (only those three names and
        Forwarded are removed). An app that trusts its edge for these
        (Werkzeug ProxyFix x_port/x_prefix, Rails/Rack X-Forwarded-Ssl,
        oauth2-proxy style X-Forwarded-User) takes the attacker's values.
        """
        forged = [
            ("X-Forwarded-Port", "443"),
            ("X-Forwarded-Prefix", "/admin"),
            ("X-Forwarded-Ssl", "on"),
            ("X-Forwarded-Scheme", "https"),
            ("X-Forwarded-Server", "evil.example"),
            ("X-Forwarded-Uri", "/admin/users"),
            ("X-Forwarded-Method", "DELETE"),
            ("X-Forwarded-User", "admin"),
            ("X-Forwarded-Email", "admin@example.com"),
            ("X-Forwarded-Preferred-Username", "admin"),
            ("X-Forwarded-Groups", "admins"),
            ("X-Forwarded-Access-Token", "forged"),
            # the three the gateway sets, and Forwarded: dropped today
            ("X-Forwarded-For", "198.18.0.66"),
            ("x-forwarded-proto", "https"),
            ("X-FORWARDED-HOST", "evil.example"),
            ("Forwarded", "for=198.18.0.66;proto=https"),
        ]
        req = "GET /headers?xf=1 HTTP/1.1\r\nHost: %s\r\nX-Sandgate-Token: %s\r\n" \
            % (self.ha, TA)
        req += "".join("%s: %s\r\n" % kv for kv in forged) + "\r\n"
        r, client = self.send(req)
        self.assertEqual(r.status, 200, r)
        hs = r.json()["headers"]
        xf = [(k, v) for k, v in hs if k.lower().startswith("x-forwarded-")
              or k.lower() == "forwarded"]
        want = [("X-Forwarded-For", "127.0.0.1"), ("X-Forwarded-Proto", "http"),
                ("X-Forwarded-Host", self.ha)]
        leaked = [(k, v) for k, v in xf if (k, v) not in want]
        self.assertEqual(
            leaked, [],
            "client-supplied X-Forwarded-* headers reached sandbox a's guest "
            "(docs/ingress.md: any X-Forwarded-* header from the client is "
            "dropped); the guest saw %r" % xf)
        self.assertEqual(sorted(xf), sorted(want))
        self.assertEqual(self.row(client, path="/headers?xf=1")["status"], 200)

    def test_other_client_address_fields_dropped(self):
        """Variants of the X-Forwarded-* fix: the other fields an edge sets
        about the client (X-Real-IP, True-Client-IP, X-Client-IP,
        X-Original-Forwarded-For) and X-Forwarded-For's underscore spelling
        (CGI-style servers read X_Forwarded_For as the same) are dropped
        too; an ordinary field (X-Request-Note) is kept."""
        forged = [("X-Real-IP", "198.18.0.66"), ("True-Client-IP",
                   "198.18.0.66"), ("X-Client-IP", "198.18.0.66"),
                  ("X-Original-Forwarded-For", "198.18.0.66"),
                  ("X_Forwarded_For", "198.18.0.66"),
                  ("X-Request-Note", "kept")]
        req = ("GET /headers?xf=2 HTTP/1.1\r\nHost: %s\r\n"
               "X-Sandgate-Token: %s\r\n" % (self.ha, TA))
        req += "".join("%s: %s\r\n" % kv for kv in forged) + "\r\n"
        r, _ = self.send(req)
        self.assertEqual(r.status, 200, r)
        hs = r.json()["headers"]
        self.assertEqual([(k, v) for k, v in hs if "198.18.0.66" in v], [])
        self.assertIn(["X-Request-Note", "kept"], hs)

    def test_guest_cannot_set_the_token_cookie(self):
        """A guest's app setting the gateway's token cookie -- with the
        parent domain it reached every sandbox's requests ahead of their
        own (cookie tossing), escaped or with blanks around the name too --
        is not relayed; its other cookies are."""
        r, _ = self.send("GET /toss HTTP/1.1\r\nHost: %s\r\n\r\n" % self.he)
        self.assertEqual(r.status, 200, r)
        cookies = [v for k, v in r.headers if k.lower() == "set-cookie"]
        self.assertEqual(cookies, ["app=1; Path=/"], r.headers)

    # ------------------------------------------------- sandbox A -> sandbox B

    def test_token_of_a_never_opens_b(self):
        """SPEC section 10: "Access needs the sandbox's ingress token ...
        bad token -> 401". Holding only sandbox a's token: an absolute-form
        request naming b with Host a; a's cookie (and a's header) sent to b;
        a request for b pipelined behind an allowed one for a on one
        connection. All 401 with rows naming b; b's guest sees nothing."""
        before = len(self.b_saw("/x2"))
        r, c1 = self.send("GET http://%s/x2-abs HTTP/1.1\r\nHost: %s\r\n"
                          "X-Sandgate-Token: %s\r\n\r\n" % (self.hb, self.ha, TA))
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (401, "ingress-token-invalid"), r)
        r, c2 = self.send("GET /x2-cookie HTTP/1.1\r\nHost: %s\r\n"
                          "Cookie: sg_token=%s\r\n\r\n" % (self.hb, TA))
        self.assertEqual(r.status, 401, r)
        r, c3 = self.send("GET /x2-case HTTP/1.1\r\nHost: %s\r\n"
                          "X-Sandgate-Token: %s\r\n\r\n" % (self.hb, TB.upper()))
        self.assertEqual(r.status, 401, r)
        c, c4 = self.conn()
        c.send("GET /x2-ok HTTP/1.1\r\nHost: %s\r\nX-Sandgate-Token: %s\r\n\r\n"
               "GET /x2-pipe HTTP/1.1\r\nHost: %s\r\n\r\n"
               % (self.ha, TA, self.hb))
        self.assertEqual(c.read_response().status, 200)
        r = c.read_response()
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (401, "ingress-token-missing"), r)
        for client, path, reason in ((c1, "/x2-abs", "ingress-token-invalid"),
                                     (c2, "/x2-cookie", "ingress-token-invalid"),
                                     (c3, "/x2-case", "ingress-token-invalid"),
                                     (c4, "/x2-pipe", "ingress-token-missing")):
            row = self.row(client, path=path)
            self.assertEqual((row["sandbox"], row["host"], row["status"],
                              row["decision"], row["reason"], row["ip"]),
                             ("b", self.hb, 401, "deny", reason, None), row)
        time.sleep(0.2 * T.SLOW)
        self.assertEqual(len(self.b_saw("/x2")), before)

    def test_websocket_handshake_needs_the_token(self):
        """docs/ingress.md "WebSockets": an upgrade request "is checked like
        any other (host, port, token)". A WebSocket handshake for b without
        a token, with a's cookie, and with b's token in the query (302, the
        handshake itself not forwarded): 401 / 401 / 302 with
        Connection: close, nothing reaches b's guest, rows deny/allow."""
        ws = ("Connection: Upgrade\r\nUpgrade: websocket\r\n"
              "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
              "Origin: http://%s:%d\r\n" % (WS_KEY, self.ha, self.iport))
        cases = [
            ("/ws-none", "", 401, "ingress-token-missing"),
            ("/ws-cookie", "Cookie: sg_token=%s\r\n" % TA, 401,
             "ingress-token-invalid"),
            ("/ws-query?sg_token=" + TB, "", 302, "ingress-token-redirect"),
        ]
        for path, extra, status, reason in cases:
            with self.subTest(path=path):
                r, client = self.send("GET %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n"
                                      % (path, self.hb, ws, extra))
                self.assertEqual((r.status, r.header("Connection")),
                                 (status, "close"), r)
                row = self.row(client, method="GET")
                self.assertEqual((row["sandbox"], row["status"],
                                  row["reason"], row["path"]),
                                 ("b", status, reason, path.split("?")[0]), row)
                self.assertNotIn(TB, json.dumps(row))
        time.sleep(0.2 * T.SLOW)
        self.assertEqual(self.b_saw("/ws-"), [])

    # ------------------------------------------------- decided afresh

    def test_kept_alive_connection_rechecked(self):
        """docs/ingress.md "Keep-alive": a client connection carries any
        number of requests, "each decided afresh"; "Launched sandboxes:
        ... requests answer 503 until it is removed". On one kept-alive
        client connection: an allowed request to dyn, then dyn stopped ->
        503 sandbox-not-running; on another: allowed, then dyn removed and
        registered again with another token -> the old token is 401, the
        new one 200. The guest only sees the allowed requests."""
        def admin(method, path, body=None):
            return T.admin_request(self.sock, method, path, body)[0]

        reg = {"id": "dyn", "policy": "p", "source": "198.18.0.77",
               "ingress": {"address": "127.0.0.5", "ports": [self.gd.port],
                           "token_sha256": T.sha256_hex(TD), "public": False}}
        self.assertEqual(admin("POST", "/v1/sandboxes", reg), 201)
        self.addCleanup(admin, "DELETE", "/v1/sandboxes/dyn")
        req = ("GET %%s HTTP/1.1\r\nHost: %s\r\nX-Sandgate-Token: %%s\r\n\r\n"
               % self.hd)
        c, client = self.conn()
        self.assertEqual(c.request(req % ("/ka-1", TD)).status, 200)
        self.assertEqual(admin("POST", "/v1/sandboxes/dyn/state",
                               {"running": False}), 200)
        r = c.request(req % ("/ka-2", TD))
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (503, "sandbox-not-running"), r)
        row = self.row(client, path="/ka-2")
        self.assertEqual((row["status"], row["decision"]), (503, "error"), row)
        self.assertEqual(admin("POST", "/v1/sandboxes/dyn/state",
                               {"running": True}), 200)
        c, client = self.conn()
        self.assertEqual(c.request(req % ("/ka-3", TD)).status, 200)
        self.assertEqual(admin("DELETE", "/v1/sandboxes/dyn"), 200)
        reg["ingress"]["token_sha256"] = T.sha256_hex(TD2)
        self.assertEqual(admin("POST", "/v1/sandboxes", reg), 201)
        r = c.request(req % ("/ka-4", TD))
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (401, "ingress-token-invalid"), r)
        self.assertEqual(self.row(client, path="/ka-4")["status"], 401)
        self.assertEqual(self.send(req % ("/ka-5", TD2))[0].status, 200)
        time.sleep(0.2 * T.SLOW)
        self.assertEqual([q["path"] for q in self.gd.requests
                          if q["path"].startswith("/ka-")],
                         ["/ka-1", "/ka-3", "/ka-5"])

    # ------------------------------------------------- smuggling, desync

    def test_ambiguous_framing_not_forwarded(self):
        """docs/ingress.md "Routing": "A malformed request is answered
        exactly as on the HTTP proxy" (docs/protocols.md: CL+TE, duplicate
        CL, TE other than chunked -> 400 bad-request, "nothing of a refused
        request is forwarded"). With a's token toward a's raw guest: 400,
        a row, the guest never sees the request. A chunked body's trailer
        section (X-Forwarded-For, X-Sandgate-Token in it) is not
        forwarded: the guest sees neither name."""
        bad = {
            "clte": "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "0\r\n\r\n",
            "clcl": "Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
            "cllist": "Content-Length: 4, 4\r\n\r\nabcd",
            "tegzip": "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            "tesp": "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        }
        for k, tail in bad.items():
            with self.subTest(case=k):
                r, client = self.send(
                    "POST /sm-%s HTTP/1.1\r\nHost: %s\r\nX-Sandgate-Token: %s\r\n%s"
                    % (k, self.hr, TA, tail))
                self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                                 (400, "bad-request"), r)
                self.assertTrue(self.gw.wait_audit(
                    kind="ingress", client=client, status=400))
        r, _ = self.send(
            "POST /sm-trailer HTTP/1.1\r\nHost: %s\r\nX-Sandgate-Token: %s\r\n"
            "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n"
            "X-Forwarded-For: 198.18.0.66\r\nX-Sandgate-Token: %s\r\n\r\n"
            % (self.hr, TA, TA))
        self.assertEqual(r.status, 200, r)
        time.sleep(0.3 * T.SLOW)
        seen = b"".join(self.raw.seen())
        self.assertNotIn(b"/sm-c", seen)
        self.assertNotIn(b"/sm-t", seen.replace(b"/sm-trailer", b""))
        got = [g for g in self.raw.seen() if b"/sm-trailer" in g]
        self.assertEqual(len(got), 1, self.raw.seen())
        self.assertNotIn(b"198.18.0.66", got[0])
        self.assertNotIn(TA.encode(), got[0])
        self.assertNotIn(b"X-Sandgate-Token", got[0])

    def test_evil_guest_cannot_answer_for_b(self):
        """docs/ingress.md "Keep-alive": a client connection carries
        requests "each decided afresh, for any sandbox" -- and so each must
        get its own sandbox's answer. The public sandbox evil's app answers
        with bytes past its response (after Content-Length, a body on
        HEAD / 204 / 304, a 101 to a plain GET, CL+TE), each shaped as a
        response; the next request on the same client connection, for b
        with b's token, gets b's guest's answer, never the forged one."""
        for path, method in (("/extra", "GET"), ("/headbody", "HEAD"),
                             ("/204body", "GET"), ("/304body", "GET"),
                             ("/101", "GET"), ("/clte", "GET")):
            with self.subTest(path=path):
                c, _ = self.conn()
                c.send("%s %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                       % (method, path, self.he))
                r1 = c.read_response(method)
                self.assertNotEqual(r1.status, 101, r1)
                try:
                    c.send("GET /desync HTTP/1.1\r\nHost: %s\r\n"
                           "X-Sandgate-Token: %s\r\n\r\n" % (self.hb, TB))
                    r2 = c.read_response()
                except (EOFError, OSError):
                    continue        # the gateway closed: nothing forged
                self.assertIsNone(r2.header("X-Fake"), (path, r2))
                self.assertNotIn(b"PWNED", r2.body)
                self.assertEqual(r2.json()["origin"], "guest-b")


if __name__ == "__main__":
    T.main()
