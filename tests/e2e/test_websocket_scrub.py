#!/usr/bin/python3
"""
End-to-end tests of WebSocket upgrades through the gateway (issue 12,
acceptance 6): on a credential's host the origin echoes the secret the
gateway swapped into Authorization back in frames (whole, split across
fragments and across TCP writes, in a ping, in a binary frame); the
client, over CONNECT and TLS trusting the gateway's CA, must see the
placeholder and never the secret. A placeholder masked inside a client
frame, to a host with no credential, closes the session with a deny row
(credential-misuse); Sec-WebSocket-Extensions never reaches the origin; a
101 naming an extension is a 502 (upstream-encoding); Upgrade: h2c to a
credential's host is a 403 (upgrade-refused).
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
from wsframe import (OP_BIN, OP_CLOSE, OP_CONT, OP_PING,  # noqa: E402
                     OP_PONG, OP_TEXT)
from test_credentials import TestCA  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
SECRET = "sk-WS/e2e+Secret_0123456789abcdefghijXYZ_v1"
PH = "sgtest-ws-placeholder-0000000001"
class WsOrigin:
    """
    A TLS WebSocket origin (stdlib only). By path: /leak sends the bearer
    value it got back in frames; /echo echoes the client's data frames;
    /ext-101 negotiates permessage-deflate; anything else gets a 200.
    Records every request head and every client payload it received.
    """

    def __init__(self, cert, key, host=ORIGIN_HOST):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.heads = []
        self.payloads = []
        self.socks = set()
        self.running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while self.running:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                self.socks.add(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, raw):
        try:
            raw.settimeout(10 * T.SLOW)
            s = self.ctx.wrap_socket(raw, server_side=True)
            with self.lock:
                self.socks.add(s)
            self._session(s)
        except (OSError, ValueError, ssl.SSLError):
            pass
        finally:
            try:
                raw.close()
            except OSError:
                pass

    def _session(self, s):
        rd = W.Reader(s)
        try:
            head = rd.read_until(b"\r\n\r\n").decode("latin-1")
        except EOFError:
            return
        lines = head.split("\r\n")
        path = lines[0].split(" ")[1]
        hdrs = {}
        for l in lines[1:]:
            if ":" in l:
                k, v = l.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        with self.lock:
            self.heads.append({"path": path, "headers": hdrs, "raw": head})
        if hdrs.get("upgrade", "").lower() != "websocket":
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                      b"Connection: close\r\n\r\nok")
            return
        ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n" \
            if path == "/ext-101" else ""
        s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n" %
                   (W.accept_key(hdrs.get("sec-websocket-key", "")), ext)).encode())
        if path == "/leak":
            self._leak(s, hdrs.get("authorization", ""))
        self._echo(s, rd.read_exact)

    def _leak(self, s, auth):
        v = auth[7:].encode() if auth.startswith("Bearer ") else b"none"
        s.sendall(W.encode_frame(OP_TEXT, b"whole:" + v + b":end"))
        cut = len(v) // 2
        # One message in two fragments, the secret cut between them.
        s.sendall(W.encode_frame(OP_TEXT, b"frag:" + v[:cut], fin=False))
        time.sleep(0.05)
        s.sendall(W.encode_frame(OP_CONT, v[cut:] + b":end"))
        s.sendall(W.encode_frame(OP_PING, b"ping:" + v))
        # A binary frame written a few bytes at a time: read boundaries.
        data = W.encode_frame(OP_BIN, b"\x00\x01bin:" + v + b":\xff")
        for k in range(0, len(data), 7):
            s.sendall(data[k:k + 7])
            time.sleep(0.005)
        # Three fragments, the secret across all of them, a pong between.
        t = len(v) // 3
        s.sendall(W.encode_frame(OP_TEXT, b"three:" + v[:t], fin=False) +
                  W.encode_frame(OP_PONG, b"pong:" + v) +
                  W.encode_frame(OP_CONT, v[t:2 * t], fin=False) +
                  W.encode_frame(OP_CONT, v[2 * t:] + b":end"))
        s.sendall(W.encode_frame(OP_TEXT, b"done"))

    def _echo(self, s, read_exact):
        while True:
            try:
                f = W.read_frame(read_exact)
            except (EOFError, OSError, ValueError):
                return
            fin, op, p = f.fin, f.opcode, f.payload
            with self.lock:
                self.payloads.append(p)
            if op == OP_CLOSE:
                s.sendall(W.encode_frame(OP_CLOSE, p[:2]))
                return
            if op in (OP_TEXT, OP_BIN, OP_CONT):
                s.sendall(W.encode_frame(op, p, fin=fin))

    def heads_for(self, path):
        with self.lock:
            return [h for h in self.heads if h["path"] == path]

    def got_payload(self, needle):
        with self.lock:
            return any(needle in p for p in self.payloads)

    def stop(self):
        self.running = False
        try:
            self.lsock.close()
        except OSError:
            pass
        with self.lock:
            socks = list(self.socks)
        for c in socks:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                c.close()
            except OSError:
                pass


POLICY = """\
sandboxes:
  - id: box-ws
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{port}]
        tls: intercept
      - host: other.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [ws-key]
credentials:
  - name: ws-key
    secret: ws-secret
    hosts: [bound.test]
    headers: [Authorization]
    placeholder: "{ph}"
"""


class WebSocketScrubTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-ws-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.origin = WsOrigin(*cls.pki.leaf("bound.test", ["bound.test",
            "other.test"]))
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("bound.test", ORIGIN_HOST),
            ("other.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"ws.yaml": POLICY.format(
            port=cls.origin.port, origin=ORIGIN_HOST, ph=PH)},
            extra={"upstream": {"ca_bundle": cls.pki.cert}})
        r = T.run_sandgate("vault", "set", "ws-secret", "-c", cls.gw.cfg_path,
            input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()

    # -------------------------------------------------------------- helpers

    def tls_conn(self, host):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.origin.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def upgrade(self, host, path, extra=(), proto="websocket"):
        """The upgrade request on a fresh intercepted tunnel: (Conn, Response)."""
        c = self.tls_conn(host)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: %s\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n" % (path, host, self.origin.port,
                                                   proto, key))
        req += "".join("%s: %s\r\n" % kv for kv in extra) + "\r\n"
        c.send(req)
        r = c.read_response()
        if r.status == 101:
            self.assertEqual(r.header("Sec-WebSocket-Accept"), W.accept_key(key))
        return c, r

    def assert_no_secret(self, blob):
        # Whole, base64, and pieces of it (fragments re-framed wrongly).
        for form in (SECRET.encode(), base64.b64encode(SECRET.encode()),
                     SECRET[3:15].encode(), SECRET[15:30].encode(),
                     SECRET[30:].encode()):
            self.assertNotIn(form, blob, "the client saw the secret: %r" % blob)

    def audit_row(self, **match):
        rows = self.gw.wait_audit(**match)
        self.assertTrue(rows, "no audit row %r; last rows: %r" % (match,
            self.gw.audit_rows()[-4:]))
        return rows[-1]

    def closed_after(self, c):
        """Frames until the gateway closes: the close frames' codes seen."""
        codes = []
        try:
            while True:
                f = W.read_frame(c.read_exact)
                if f.opcode == OP_CLOSE and len(f.payload) >= 2:
                    codes.append(struct.unpack("!H", f.payload[:2])[0])
        except (EOFError, ConnectionResetError, ssl.SSLError, OSError):
            pass
        return codes

    # -------------------------------------------------------------- tests

    def test_secret_scrubbed_in_frames(self):
        c, r = self.upgrade("bound.test", "/leak", extra=(
            ("Authorization", "Bearer " + PH),
            ("Sec-WebSocket-Extensions", "permessage-deflate; "
             "client_max_window_bits")))
        self.assertEqual(r.status, 101, r)
        self.assertIsNone(r.header("Sec-WebSocket-Extensions"))
        head = self.origin.heads_for("/leak")[-1]
        # The gateway swapped the secret in, and offered no extension.
        self.assertEqual(head["headers"].get("authorization"), "Bearer " + SECRET)
        self.assertNotIn("sec-websocket-extensions", head["headers"])
        raw = bytearray()

        def read_exact(n):
            b = c.read_exact(n)
            raw.extend(b)
            return b

        msgs, pings, pongs, cur = [], [], [], None
        while True:
            fin, op, rsv, p, _ = W.read_frame(read_exact)
            self.assertEqual(rsv, 0)
            if op == OP_PING:
                pings.append(p)
                continue
            if op == OP_PONG:
                pongs.append(p)
                continue
            if op in (OP_TEXT, OP_BIN):
                self.assertIsNone(cur, "a new message inside a fragmented one")
                cur = [op, p]
            else:
                self.assertEqual(op, OP_CONT)
                self.assertIsNotNone(cur, "a continuation outside a message")
                cur[1] += p
            if fin:
                msgs.append((cur[0], cur[1]))
                cur = None
                if msgs[-1][1] == b"done":
                    break
        self.assert_no_secret(bytes(raw))
        ph = PH.encode()
        self.assertEqual(msgs, [
            (OP_TEXT, b"whole:" + ph + b":end"),
            (OP_TEXT, b"frag:" + ph + b":end"),
            (OP_BIN, b"\x00\x01bin:" + ph + b":\xff"),
            (OP_TEXT, b"three:" + ph + b":end"),
            (OP_TEXT, b"done")])
        self.assertEqual(pings, [b"ping:" + ph])
        self.assertEqual(pongs, [b"pong:" + ph])
        # A clean client frame still goes through (masked, echoed back).
        c.send(W.client_frame(OP_TEXT, b"hello origin"))
        f = W.read_frame(c.read_exact)
        self.assertEqual((f.fin, f.opcode, f.payload),
                         (True, OP_TEXT, b"hello origin"))
        c.send(W.client_frame(OP_CLOSE, struct.pack("!H", 1000)))
        f = W.read_frame(c.read_exact)
        self.assertEqual((f.opcode, f.payload),
                         (OP_CLOSE, struct.pack("!H", 1000)))
        # The row is written when the upgraded connection ends.
        c.close()
        row = self.audit_row(path="/leak", status=101)
        self.assertEqual((row["decision"], row["credential"], row["host"]),
                         ("allow", "ws-key", "bound.test"))

    def test_placeholder_in_client_frame_to_other_host(self):
        c, r = self.upgrade("other.test", "/echo")
        self.assertEqual(r.status, 101, r)
        c.send(W.client_frame(OP_TEXT, b"clean"))
        self.assertEqual(W.read_frame(c.read_exact).payload, b"clean")
        c.send(W.client_frame(OP_TEXT, ("leak " + PH + " now").encode()))
        codes = self.closed_after(c)
        self.assertIn(1008, codes)
        self.assertFalse(self.origin.got_payload(PH.encode()))
        row = self.audit_row(host="other.test", reason="credential-misuse")
        self.assertEqual((row["decision"], row["credential"]), ("deny", "ws-key"))

    def test_placeholder_split_across_client_frames(self):
        mark = len(self.gw.audit_rows())
        c, r = self.upgrade("other.test", "/echo-split")
        self.assertEqual(r.status, 101, r)
        cut = 9
        c.send(W.client_frame(OP_TEXT, ("a " + PH[:cut]).encode(), fin=False))
        time.sleep(0.1)
        c.send(W.client_frame(OP_CONT, (PH[cut:] + " b").encode()))
        self.assertIn(1008, self.closed_after(c))
        self.assertFalse(self.origin.got_payload(PH[cut:].encode()))
        rows = [x for x in self.gw.wait_audit(host="other.test",
                reason="credential-misuse", pred=lambda x: x["path"] ==
                "/echo-split")]
        self.assertTrue(rows, self.gw.audit_rows()[mark:])
        self.assertEqual(rows[-1]["credential"], "ws-key")

    def test_unmasked_client_frame_refused(self):
        c, r = self.upgrade("other.test", "/echo-unmasked")
        self.assertEqual(r.status, 101, r)
        c.send(W.encode_frame(OP_TEXT, b"not masked"))
        self.assertIn(1002, self.closed_after(c))
        row = self.audit_row(path="/echo-unmasked",
                             reason="websocket-protocol-error")
        self.assertEqual(row["decision"], "deny")

    def test_extension_in_101_refused(self):
        c, r = self.upgrade("bound.test", "/ext-101",
                            extra=(("Authorization", "Bearer " + PH),))
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upstream-encoding")
        self.assertTrue(self.origin.heads_for("/ext-101"))
        row = self.audit_row(path="/ext-101", reason="upstream-encoding")
        self.assertEqual(row["decision"], "error")

    def test_other_upgrade_to_credential_host_refused(self):
        c, r = self.upgrade("bound.test", "/raw-up", proto="raw-tcp",
                            extra=(("Authorization", "Bearer " + PH),))
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upgrade-refused")
        self.assertFalse(self.origin.heads_for("/raw-up"))
        row = self.audit_row(path="/raw-up", reason="upgrade-refused")
        self.assertEqual(row["decision"], "deny")

    def test_h2c_to_credential_host_goes_as_http1(self):
        # the offer is dropped: the request goes on as plain HTTP/1.1
        c, r = self.upgrade("bound.test", "/h2c", proto="h2c",
                            extra=(("Authorization", "Bearer " + PH),))
        self.assertNotEqual(r.status, 101, r)
        heads = self.origin.heads_for("/h2c")
        self.assertTrue(heads)
        self.assertNotIn("upgrade", heads[-1]["headers"])
        self.assertNotIn("http2-settings", heads[-1]["headers"])

    def test_logs_hold_no_secret(self):
        time.sleep(0.2)
        self.assertNotIn(SECRET, self.gw.log_text())
        for row in self.gw.audit_rows():
            self.assertNotIn(SECRET, repr(row))


if __name__ == "__main__":
    T.main()
