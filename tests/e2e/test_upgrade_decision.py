#!/usr/bin/python3
"""
Upgrades keep the decision (issue 22, acceptance 4). On a rule with methods
or paths (here: GET only, and a deny rule naming /admin*), an origin that
answers an upgrade with a 101 for anything but the WebSocket the request
asked for -- h2c, no Upgrade at all, h2c to "websocket", H2C to
"WebSocket", websocket and h2c in two fields -- must not turn the
connection into a raw byte relay: the client gets 502 upgrade-refused, the
row says so (decision error: the request had gone out) and the origin
connection is closed. A request offering
"websocket, h2c" (or two Upgrade fields) there is refused before it leaves
(403 upgrade-refused). After each, the client tries GET /admin/...
on the same connection, once after reading the answer and once pipelined
behind the upgrade; the origin (a raw-socket attacker's origin that
answers any HTTP it gets, also after its 101) must never see /admin. The
same over absolute form and inside an intercepted CONNECT tunnel. A
WebSocket upgrade (mixed case) is accepted and framed, so bytes after it
that are not frames are refused. The positive case: a rule with no methods,
paths or credential, not intercepted, still relays another protocol raw.
The gateway runs as a default install does (user sandgate).
"""

import base64
import os
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
import wsframe as W  # noqa: E402
from test_credentials import TestCA  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
ADMIN_BODY = b"ADMIN-REACHED"


# The 101 the attacker's origin answers with, by the request's path prefix.
# "{echo}" is the request's own Upgrade value.
ANSWERS = {
    "/h2c": "Upgrade: h2c\r\n",
    "/no-upgrade": "",
    "/ws-h2c": "Upgrade: h2c\r\n",
    "/mixed-h2c": "Upgrade: H2C\r\n",
    "/dup-101": "Upgrade: websocket\r\nUpgrade: h2c\r\n",
    "/ws": "Upgrade: {echo}\r\nSec-WebSocket-Accept: {accept}\r\n",
    "/proto": "Upgrade: {echo}\r\n",
}


class AttackerOrigin:
    """
    An origin that switches protocols however it likes and then goes on
    answering HTTP on the switched connection, as an attacker's origin
    would to get past path rules. Plain or TLS. Records every byte each
    connection received and whether the gateway closed it.
    """

    def __init__(self, ctx=None, host=ORIGIN_HOST):
        self.ctx = ctx
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, 0))
        self.lsock.listen(32)
        self.port = self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []   # {"data": bytearray, "closed": Event, "sock": s}
        self.running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while self.running:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            rec = {"data": bytearray(), "closed": threading.Event(),
                   "sock": c}
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._serve, args=(c, rec),
                             daemon=True).start()

    def _serve(self, raw, rec):
        try:
            raw.settimeout(30 * T.SLOW)
            s = raw
            if self.ctx is not None:
                s = self.ctx.wrap_socket(raw, server_side=True)
                rec["sock"] = s
            self._session(s, rec)
        except (OSError, ValueError, ssl.SSLError):
            pass
        finally:
            rec["closed"].set()
            try:
                raw.close()
            except OSError:
                pass

    def _session(self, s, rec):
        buf = bytearray()
        upgraded = None
        while True:
            # After a WebSocket 101: frames are echoed, anything else is
            # read as HTTP again.
            if upgraded == "/ws" and buf and buf[0] & 0x70 == 0 and \
                    self._echo_frame(s, buf):
                continue
            if b"\r\n\r\n" in buf:
                i = buf.index(b"\r\n\r\n") + 4
                head = bytes(buf[:i]).decode("latin-1")
                del buf[:i]
                upgraded = self._answer(s, head, upgraded)
                continue
            b = s.recv(65536)
            if not b:
                return      # the gateway closed this connection
            with self.lock:
                rec["data"].extend(b)
            buf.extend(b)

    def _echo_frame(self, s, buf):
        """A whole masked client frame at the start of buf: echo it."""
        got = W.decode_frame(buf)
        if got is None or not got[0].masked:
            return False
        f, n = got
        del buf[:n]
        s.sendall(W.encode_frame(W.OP_TEXT, b"echo:" + f.payload))
        return True

    def _answer(self, s, head, upgraded):
        lines = head.split("\r\n")
        path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else ""
        hdrs = {}
        for l in lines[1:]:
            if ":" in l:
                k, v = l.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        for prefix, tmpl in ANSWERS.items():
            if upgraded is None and path.startswith(prefix):
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\n"
                           "Connection: Upgrade\r\n" + tmpl.format(
                               echo=hdrs.get("upgrade", "none"),
                               accept=W.accept_key(hdrs.get(
                                   "sec-websocket-key", ""))) +
                           "\r\n").encode())
                return prefix
        # Any other request, also one that arrives after a 101: answered.
        body = ADMIN_BODY if path.startswith("/admin") else path.encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" %
                  (len(body), body))
        return upgraded

    def received(self):
        with self.lock:
            return b"".join(bytes(r["data"]) for r in self.conns)

    def conn_for(self, fragment):
        """The record of the connection whose bytes hold fragment."""
        with self.lock:
            for r in self.conns:
                if fragment in r["data"]:
                    return r
        return None

    def stop(self):
        self.running = False
        try:
            self.lsock.close()
        except OSError:
            pass
        with self.lock:
            recs = list(self.conns)
        for r in recs:
            try:
                r["sock"].shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(2)


POLICY = """\
sandboxes:
  - id: box-up
    policy: up
    source: [127.0.0.1/32]
policies:
  - name: up
    allow:
      - host: insp.test
        ports: [{plain}]
        methods: [GET]
      - host: raw.test
        ports: [{plain}]
      - host: insp-tls.test
        ports: [{tls}]
        tls: intercept
        methods: [GET]
      - host: raw-tls.test
        ports: [{tls}]
        tls: intercept
      - host: paths.test
        ports: [{plain}]
        paths: ["/h2c*", "/no-upgrade*", "/ws*", "/mixed*", "/dup*"]
    deny:
      - host: insp.test
        paths: ["/admin*"]
      - host: insp-tls.test
        paths: ["/admin*"]
    allow_private: [{origin}/32]
"""

RULES = {"insp.test": "up:allow[0]", "raw.test": "up:allow[1]",
         "insp-tls.test": "up:allow[2]", "raw-tls.test": "up:allow[3]",
         "paths.test": "up:allow[4]"}

# (name, the request's Upgrade, path, the status the client gets)
REFUSED = [
    ("h2c", "h2c", "/h2c", 502),
    ("101 without Upgrade", "websocket", "/no-upgrade", 502),
    ("websocket, h2c offered", "websocket, h2c", "/ws-h2c-offer", 403),
    ("mixed case answered H2C", "WebSocket", "/mixed-h2c", 502),
    ("websocket answered h2c", "websocket", "/ws-h2c", 502),
    ("101 with two Upgrade fields", "websocket", "/dup-101", 502),
    ("two Upgrade fields offered", "websocket\r\nUpgrade: h2c",
     "/ws-dup-offer", 403),
]


class UpgradeDecisionTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-upgrade-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        crt, key = cls.pki.leaf("insp-tls.test", ["insp-tls.test",
                                                  "raw-tls.test"])
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(crt, key)
        cls.plain = AttackerOrigin()
        cls.addClassCleanup(cls.plain.stop)
        cls.tls = AttackerOrigin(sctx)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "insp.test", "raw.test", "insp-tls.test", "raw-tls.test",
            "paths.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"up.yaml": POLICY.format(
            plain=cls.plain.port, tls=cls.tls.port, origin=ORIGIN_HOST)},
            extra={"upstream": {"ca_bundle": cls.pki.cert}}, user="sandgate")
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        gw_ca = os.path.join(d, "certs", "ca.crt")
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and not os.path.exists(gw_ca):
            time.sleep(0.05)
        cls.cctx = ssl.create_default_context(cafile=gw_ca)

    # -------------------------------------------------------------- helpers

    def open(self, host, tls):
        """A connection to speak HTTP to host on: (Conn, origin, form)."""
        if not tls:
            c = T.Conn(self.gw.port)
            self.addCleanup(c.close)
            return c, self.plain, "http://%s:%d" % (host, self.plain.port)
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.tls.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.cctx.wrap_socket(c.sock, server_hostname=host)
        return c, self.tls, ""

    def req(self, prefix, host, port, path, upgrade=None):
        h = "GET %s%s HTTP/1.1\r\nHost: %s:%d\r\n" % (prefix, path, host, port)
        if upgrade == "h2c":
            h += ("Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                  "HTTP2-Settings: AAMAAABkAAQAAP__\r\n")
        elif upgrade is not None:
            h += ("Connection: Upgrade\r\nUpgrade: %s\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" %
                  (upgrade, base64.b64encode(os.urandom(16)).decode()))
        return h + "\r\n"

    def rest(self, c):
        """What the gateway still sends until it closes (b"" if nothing)."""
        try:
            return c.read_to_eof()
        except (OSError, ssl.SSLError):
            return b""

    def try_send(self, c, data):
        try:
            c.send(data)
        except (OSError, ssl.SSLError):
            pass     # the gateway closed first: nothing could get through

    def row(self, pred, **match):
        rows = self.gw.wait_audit(pred=pred, **match)
        self.assertTrue(rows, "no audit row %r; last rows: %r" % (
            match, self.gw.audit_rows()[-4:]))
        return rows[-1]

    def refused(self, host, tls, name, upgrade, path, status, pipelined):
        c, origin, prefix = self.open(host, tls)
        port = origin.port
        up = self.req(prefix, host, port, path, upgrade)
        admin = self.req(prefix, host, port, "/admin/after" + path)
        if pipelined:
            c.send(up + admin)
        else:
            c.send(up)
        r = c.read_response()
        self.assertEqual(r.status, status, "%s: %r" % (name, r))
        self.assertEqual(r.header("X-Sandgate-Reason"), "upgrade-refused", r)
        if not pipelined:
            self.try_send(c, admin)
        tail = self.rest(c)
        self.assertNotIn(ADMIN_BODY, tail)
        self.assertNotIn(b"HTTP/1.1 ", tail)    # one answer, then closed
        time.sleep(0.2 * T.SLOW)
        self.assertNotIn(b"/admin/after" + path.encode(), origin.received(),
                         name)
        self.assertNotIn(ADMIN_BODY, r.body)
        kind = "connect" if tls else "http"
        row = self.row(lambda x: x["path"] == path, reason="upgrade-refused",
                       kind=kind)
        # A refused offer never left (deny); a refused 101 answered a
        # request that had (error, as for an origin's broken answer).
        self.assertEqual((row["decision"], row["status"], row["host"],
                          row["method"], row["sandbox"]),
                         ("deny" if status == 403 else "error", status, host,
                          "GET", "box-up"), row)
        self.assertEqual(row["rule"], RULES[host], row)
        # No row says an upgrade to it was allowed.
        self.assertFalse(self.gw.audit_rows(path=path, status=101), name)
        rec = origin.conn_for(path.encode())
        if status == 403:
            self.assertIsNone(rec, "%s: the refused request left" % name)
        else:
            self.assertIsNotNone(rec, "%s: the origin got no request" % name)
            self.assertTrue(rec["closed"].wait(5 * T.SLOW),
                            "%s: the origin connection stayed open" % name)

    def cases(self, host, tls):
        for name, upgrade, path, status in REFUSED:
            for pipelined in (False, True):
                tag = "-pl" if pipelined else "-rd"
                with self.subTest(case=name, pipelined=pipelined):
                    self.refused(host, tls, name, upgrade, path + tag, status,
                                 pipelined)

    # -------------------------------------------------------------- tests

    def test_refused_upgrades_absolute_form(self):
        self.cases("insp.test", False)

    def test_refused_upgrades_paths_rule(self):
        # A rule with paths alone (/admin is outside them).
        self.cases("paths.test", False)

    def test_refused_upgrades_intercepted_tunnel(self):
        self.cases("insp-tls.test", True)

    def test_denied_path_is_denied_without_upgrade(self):
        # What the tests above try to reach is really denied there.
        for host, tls in (("insp.test", False), ("paths.test", False),
                          ("insp-tls.test", True)):
            with self.subTest(host=host):
                c, origin, prefix = self.open(host, tls)
                r = c.request(self.req(prefix, host, origin.port,
                                       "/admin/x-" + host))
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny")
                self.assertNotIn(("/admin/x-" + host).encode(),
                                 origin.received())

    def test_intercepted_rule_without_paths_frames_or_refuses(self):
        # Interception is for inspection: no raw bytes after a 101 either.
        self.refused("raw-tls.test", True, "intercepted, other protocol",
                     "example-proto", "/proto-tls", 403, False)
        self.refused("raw-tls.test", True, "intercepted, h2c answer",
                     "websocket", "/ws-h2c-tls", 502, True)

    def websocket(self, host, tls, path, upgrade):
        c, origin, prefix = self.open(host, tls)
        c.send(self.req(prefix, host, origin.port, path, upgrade))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        self.assertEqual(r.header("Upgrade"), upgrade, r)
        # Framed both ways: a masked frame reaches the origin and back.
        c.send(W.client_frame(W.OP_TEXT, b"hello"))
        f = W.read_frame(c.read_exact)
        self.assertEqual((f.opcode, f.payload), (W.OP_TEXT, b"echo:hello"))
        # Bytes that are no frame end it: GET /admin never arrives.
        admin = "/admin/ws" + path
        self.try_send(c, self.req(prefix, host, origin.port, admin))
        codes = []
        try:
            while True:
                f = W.read_frame(c.read_exact)
                if f.opcode == W.OP_CLOSE and len(f.payload) >= 2:
                    codes.append(struct.unpack("!H", f.payload[:2])[0])
        except (EOFError, OSError, ssl.SSLError, ValueError):
            pass
        self.assertIn(1002, codes)
        time.sleep(0.2 * T.SLOW)
        self.assertNotIn(admin.encode(), origin.received())
        self.assertNotIn(ADMIN_BODY, c.buf)
        row = self.row(lambda x: x["path"] == path,
                       reason="websocket-protocol-error")
        self.assertEqual((row["decision"], row["status"], row["host"]),
                         ("deny", 101, host), row)

    def test_websocket_mixed_case_framed_absolute_form(self):
        # Upgrade: WebSocket is the token websocket (case-insensitive).
        self.websocket("insp.test", False, "/ws-mixed", "WebSocket")

    def test_websocket_framed_intercepted_tunnel(self):
        self.websocket("insp-tls.test", True, "/ws-tls", "websocket")
        self.websocket("insp-tls.test", True, "/ws-tls-upper", "WEBSOCKET")

    def test_raw_upgrade_relayed_where_the_decision_allows_bytes(self):
        # No methods, paths, credential, nor interception: bytes after the
        # 101 are not the gateway's to read, and pass both ways.
        c, origin, prefix = self.open("raw.test", False)
        c.send(self.req(prefix, "raw.test", origin.port, "/proto-raw",
                        "example-proto"))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        self.assertEqual(r.header("Upgrade"), "example-proto", r)
        c.send(b"GET /admin/raw HTTP/1.1\r\nHost: raw.test\r\n\r\n")
        after = c.read_response()
        self.assertEqual((after.status, after.body), (200, ADMIN_BODY))
        self.assertIn(b"GET /admin/raw HTTP/1.1\r\nHost: raw.test\r\n\r\n",
                      origin.received())
        # The upgraded connection's one row is written when it ends, and
        # counts the bytes relayed after the 101 too (docs/audit.md).
        c.close()
        row = self.row(lambda x: x["path"] == "/proto-raw", status=101)
        self.assertEqual((row["decision"], row["host"], row["rule"],
                          row["reason"]),
                         ("allow", "raw.test", "up:allow[1]", None), row)
        sent = len(b"GET /admin/raw HTTP/1.1\r\nHost: raw.test\r\n\r\n")
        self.assertEqual(row["bytes_up"], sent, row)
        self.assertGreaterEqual(row["bytes_down"], len(ADMIN_BODY), row)


if __name__ == "__main__":
    T.main()
