#!/usr/bin/python3
"""
Probe (AREA ws2): the WebSocket relay -- an HTTP/1.1 Upgrade through the
HTTP proxy (absolute form) or inside an intercepted CONNECT tunnel -- where
the gateway reads frames to refuse credential placeholders, scrub the
secret toward the client and scan for secrets (docs/credentials.md
"WebSockets", docs/dlp.md "Where" WebSocket row, docs/protocols.md
"Upgrades keep the decision").

Set-up: one scripted origin on 127.0.0.2 (TLS and plain ports), whose
behaviour after the request head is chosen by the test per path; a
credential ws-key bound to bound.test (Authorization); other.test has no
credential; raw.test is plain HTTP with no paths, credential or dlp (the
one place a 101 may become a byte relay). Sandbox box-ws (127.0.0.1) has
no dlp; box-dlp (127.0.0.3) has `dlp: {mode: block}`.

Tried (held unless marked FOUND):
- FOUND: a dlp path exemption opens a raw relay. Policy with `dlp: {mode:
  block, allow: [{path: "/pub/*"}]}` on a plain-HTTP rule (no paths, no
  credential): an upgrade to /pub/x offering another protocol is relayed
  raw after the 101, and a later `POST /private/...` carrying a GitHub
  token on that connection reaches the origin unscanned; the same upgrade
  to /private/x is 403 upgrade-refused
  (test_f1_dlp_path_exemption_opens_raw_relay).
- origin->client on bound.test: the secret in a text message cut into
  one-byte frames with a ping and a pong (each quoting the secret) between
  every fragment; in a binary message likewise; in a message when the
  upgrade request carried no placeholder at all (no swap): the client sees
  only the placeholder, the messages arrive whole.
- origin->client: a ping quoting the secret that grows past 125 bytes once
  scrubbed: close 1014, row error upstream-encoding, no secret.
- origin sends a masked frame (bound.test) quoting the secret: close 1014,
  row error websocket-protocol-error, nothing of it relayed.
- client->other.test: the placeholder cut into one-byte text frames, a
  ping and a pong between every two (ping/pong payloads innocent), and in
  a binary message; the placeholder in a close frame's reason; the
  placeholder across the end of one message and the start of the next:
  close 1008, credential-misuse row, the origin never gets the tail.
- client->bound.test: the placeholder in a frame is refused too ("on every
  host").
- client frames: a 64-bit length of 2^63 (MSB set), a close frame of 126
  bytes (16-bit length), a ping with FIN clear: close 1002,
  websocket-protocol-error, nothing reaches the origin.
- dlp (box-dlp, other.test): a GitHub token cut into one-byte fragments,
  each followed by a ping and a pong: close 1008, secret-detected, origin
  gets no complete token; a token in a binary frame; a token in a pong
  payload (websocket-control).
- Upgrade: websocket request with a body (Content-Length) carrying the
  placeholder toward other.test: 403 credential-misuse, origin gets nothing.
- frames pipelined in the same write as the upgrade head: still checked.
- the bound origin's 101 quoting the key in Sec-WebSocket-Protocol and
  X-Echo: scrubbed to the placeholder.
- origin answers 101 with no Sec-WebSocket-Accept, or a wrong one: the
  gateway relays the 101 as sent (no promise says it checks the accept key;
  the client's own library must fail it); frames are still framed/checked.
- raw.test (raw-allowed): Upgrade: h2c answered 101 h2c: 502
  upgrade-refused, no byte after the head reaches the origin; a request
  without any Upgrade answered 101: 502; Upgrade: TLS/1.0 and IRC/6.9
  answered in kind: relayed as bytes (documented; not kept, as
  test_upgrade_decision's example-proto); intercepted other.test:
  Upgrade: TLS/1.0 is 403 upgrade-refused (not kept, as raw-tcp in
  test_websocket_scrub).
- not kept (no promise covers it): the placeholder's first 20 bytes ending
  an upgrade request's Content-Length body, the rest starting the first
  frame after the 101: both halves reach other.test, no misuse row
  (ws_relay_start resets the carried tail; only an origin that joins body
  and frames reads it whole, and a placeholder is no secret).
"""

import base64
import binascii
import os
import random
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
DLP_SRC = "127.0.0.3"
DLPX_SRC = "127.0.0.4"
SECRET = "sk-WS2probe/Secret+0123456789_abcdefghijKLMNOP"
PH = "sgtest-ws2-placeholder-00000000000000000000000000000000001"
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
RNG = random.Random(0x3151)


def github_token():
    body = "".join(RNG.choice(B62) for _ in range(30))
    crc = binascii.crc32(body.encode()) & 0xffffffff
    digits = ""
    for _ in range(6):
        digits = B62[crc % 62] + digits
        crc //= 62
    return "ghp_" + body + digits


class Origin:
    """
    A scripted origin, TLS on one port and plain on another. Reads a request
    head (and its Content-Length body); a script named by the longest path
    prefix in self.scripts then runs (sock, reader, path, headers); the
    default answers a websocket upgrade with a correct 101 and echoes
    frames. Every byte received after the request head, and every frame
    payload it read, is recorded by path.
    """

    def __init__(self, cert, key):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.lock = threading.Lock()
        self.scripts = {}
        self.heads = []
        self.raw = {}        # path -> bytes received after the head
        self.payloads = {}   # path -> [frame payloads, unmasked]
        self.socks = []
        self.lsocks = []
        self.tls_port = self._listen(True)
        self.plain_port = self._listen(False)

    def _listen(self, tls):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ORIGIN_HOST, 0))
        s.listen(32)
        self.lsocks.append(s)
        threading.Thread(target=self._loop, args=(s, tls), daemon=True).start()
        return s.getsockname()[1]

    def _loop(self, ls, tls):
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            with self.lock:
                self.socks.append(c)
            threading.Thread(target=self._serve, args=(c, tls),
                             daemon=True).start()

    def _serve(self, c, tls):
        c.settimeout(15 * T.SLOW)
        try:
            if tls:
                c = self.ctx.wrap_socket(c, server_side=True)
            rd = Rec(c, self)
            head = rd.read_until(b"\r\n\r\n").decode("latin-1")
            path = head.split(" ")[1]
            rd.path = path
            h = {}
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k:
                    h[k.strip().lower()] = v.strip()
            with self.lock:
                self.heads.append((path, head, h))
            script = None
            with self.lock:
                best = ""
                for p, fn in self.scripts.items():
                    if path.startswith(p) and len(p) > len(best):
                        best, script = p, fn
            (script or default_script)(c, rd, path, h)
        except (OSError, EOFError, ValueError, ssl.SSLError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def head(self, path):
        with self.lock:
            for p, head, h in self.heads:
                if p == path:
                    return h
        return None

    def got(self, path, needle):
        with self.lock:
            raw = self.raw.get(path, b"")
            pl = self.payloads.get(path, [])
        return needle in raw or needle in b"".join(pl) or any(
            needle in p for p in pl)

    def stop(self):
        for s in self.lsocks:
            s.close()
        with self.lock:
            for c in self.socks:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class Rec(W.Reader):
    """A Reader that records what the origin received after the head."""

    def __init__(self, sock, origin):
        super().__init__(sock)
        self.origin = origin
        self.path = None

    def _fill(self):
        b = self.sock.recv(self.bufsize)
        if not b:
            raise EOFError("connection closed")
        if self.path is not None:
            with self.origin.lock:
                self.origin.raw[self.path] = self.origin.raw.get(
                    self.path, b"") + b
        self.buf += b


def answer_101(c, h, extra=""):
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n" %
               (W.accept_key(h.get("sec-websocket-key", "")), extra)).encode())


def echo(c, rd, path):
    """Read client frames, record payloads, echo data, answer close."""
    while True:
        f = W.read_frame(rd.read_exact)
        with rd.origin.lock:
            rd.origin.payloads.setdefault(path, []).append(f.payload)
        if f.opcode in (OP_TEXT, OP_BIN, OP_CONT):
            c.sendall(W.encode_frame(f.opcode, f.payload, fin=f.fin))
        if f.opcode == OP_CLOSE:
            c.sendall(W.encode_frame(OP_CLOSE, f.payload[:2]))
            return


def default_script(c, rd, path, h):
    if "content-length" in h:
        rd.read_exact(int(h["content-length"]))
    if h.get("upgrade", "").lower() != "websocket":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                  b"Connection: close\r\n\r\nok")
        return
    answer_101(c, h)
    echo(c, rd, path)


POLICY = """\
sandboxes:
  - id: box-ws
    policy: agent
    source: [127.0.0.1/32]
  - id: box-dlp
    policy: dlpol
    source: [{dlp_src}/32]
  - id: box-dlpx
    policy: dlpx
    source: [{dlpx_src}/32]
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{tls}]
        tls: intercept
      - host: other.test
        ports: [{tls}]
        tls: intercept
      - host: raw.test
        ports: [{plain}]
    allow_private: [{origin}/32]
    credentials: [ws-key]
  - name: dlpol
    allow:
      - host: other.test
        ports: [{tls}]
        tls: intercept
    allow_private: [{origin}/32]
    dlp:
      mode: block
  - name: dlpx
    allow:
      - host: raw.test
        ports: [{plain}]
      - host: free.test
        ports: [{plain}]
    allow_private: [{origin}/32]
    dlp:
      mode: block
      allow:
        - path: "/pub/*"
        - host: raw.test
          path: "/onlygh/*"
          rule: github-token
        - host: raw.test
          path: "/hp/*"
        - host: free.test
credentials:
  - name: ws-key
    secret: ws2-secret
    hosts: [bound.test]
    headers: [Authorization]
    placeholder: "{ph}"
"""


class Ws2Probe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-ws2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.origin = Origin(*cls.pki.leaf("bound.test", ["bound.test",
                                                         "other.test"]))
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "bound.test", "other.test", "raw.test", "free.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"ws2.yaml": POLICY.format(
            tls=cls.origin.tls_port, plain=cls.origin.plain_port,
            origin=ORIGIN_HOST, ph=PH, dlp_src=DLP_SRC, dlpx_src=DLPX_SRC)},
            extra={"upstream": {"ca_bundle": cls.pki.cert}})
        r = T.run_sandgate("vault", "set", "ws2-secret", "-c",
                           cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = cls.gw.client_context()
        cls.seq = 0

    # ------------------------------------------------------------ helpers

    def path(self, name):
        Ws2Probe.seq += 1
        return "/%s-%d" % (name, Ws2Probe.seq)

    def script(self, path, fn):
        with self.origin.lock:
            self.origin.scripts[path] = fn

    def tls_conn(self, host, source=None):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (
            host, self.origin.tls_port), source=source)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def head(self, host, path, port, proto="websocket", extra="",
             absolute=False, key=None):
        key = key or base64.b64encode(os.urandom(16)).decode()
        target = "http://%s:%d%s" % (host, port, path) if absolute else path
        h = "GET %s HTTP/1.1\r\nHost: %s:%d\r\n" % (target, host, port)
        if proto is not None:
            h += ("Upgrade: %s\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" %
                  (proto, key))
        return h + extra + "\r\n"

    def ws(self, host, path, extra="", source=None):
        """A WebSocket on a fresh intercepted tunnel: (Conn, Response)."""
        c = self.tls_conn(host, source)
        key = base64.b64encode(os.urandom(16)).decode()
        c.send(self.head(host, path, self.origin.tls_port, extra=extra,
                         key=key))
        r = c.read_response()
        return c, r

    def drain(self, c, limit=5.0):
        """Every byte the gateway sends until it closes (or limit s)."""
        out = bytearray()
        c.sock.settimeout(limit * T.SLOW)
        out += c.buf
        c.buf = b""
        try:
            while True:
                b = c.sock.recv(65536)
                if not b:
                    break
                out += b
        except (OSError, ssl.SSLError):
            pass
        return bytes(out)

    def frames(self, blob):
        """The frames in blob (a drain), as W.Frame; stops at garbage."""
        out = []
        while blob:
            try:
                r = W.decode_frame(blob)
            except ValueError:
                break
            if r is None:
                break
            f, n = r
            out.append(f)
            blob = blob[n:]
        return out

    def close_codes(self, frames):
        return [struct.unpack("!H", f.payload[:2])[0] for f in frames
                if f.opcode == OP_CLOSE and len(f.payload) >= 2]

    def messages(self, frames):
        """Data messages reassembled: [(opcode, payload)], controls apart."""
        msgs, ctl, cur = [], [], None
        for f in frames:
            if f.opcode >= 8:
                ctl.append((f.opcode, f.payload))
            elif f.opcode in (OP_TEXT, OP_BIN):
                cur = [f.opcode, f.payload]
                if f.fin:
                    msgs.append(tuple(cur))
                    cur = None
            else:
                if cur is None:
                    msgs.append(("stray-continuation", f.payload))
                    continue
                cur[1] += f.payload
                if f.fin:
                    msgs.append(tuple(cur))
                    cur = None
        return msgs, ctl

    def row(self, path, **match):
        rows = self.gw.wait_audit(pred=lambda x: x["path"] == path, **match)
        self.assertTrue(rows, "no row %s %r; last rows %r" % (
            path, match, self.gw.audit_rows()[-3:]))
        return rows[-1]

    def no_secret(self, blob):
        s = SECRET.encode()
        for form in (s, base64.b64encode(s), s[:20], s[20:]):
            self.assertNotIn(form, blob, "the client saw the secret")

    # ------------------------------------------------- origin -> client

    def test_o1_secret_in_one_byte_frames_with_controls_between(self):
        """
        docs/credentials.md: "each text or binary message goes through the
        scrubber as one stream, started afresh for each message (a secret
        split across fragments or reads is still found)"; "Ping, pong and
        close payloads are scrubbed whole". The bound origin sends the
        secret it got in Authorization as a text message of one-byte
        frames with a ping and a pong quoting the secret between every two,
        then the same as a binary message, then "done".
        """
        p = self.path("o1")

        def script(c, rd, path, h):
            answer_101(c, h)
            v = h.get("authorization", "")[7:].encode()
            for op in (OP_TEXT, OP_BIN):
                msg = b"<" + v + b">"
                out = b""
                for i in range(len(msg)):
                    first, last = i == 0, i == len(msg) - 1
                    out += W.encode_frame(op if first else OP_CONT,
                                          msg[i:i + 1], fin=last)
                    if not last:
                        out += W.encode_frame(OP_PING, b"p" + v)
                        out += W.encode_frame(OP_PONG, b"q" + v)
                c.sendall(out)
            c.sendall(W.encode_frame(OP_TEXT, b"done"))
            echo(c, rd, path)

        self.script(p, script)
        c, r = self.ws("bound.test", p, "Authorization: Bearer %s\r\n" % PH)
        self.assertEqual(r.status, 101, r)
        self.assertEqual(self.origin.head(p).get("authorization"),
                         "Bearer " + SECRET, "control: no swap")
        got = bytearray()
        fr = []
        while not fr or fr[-1].payload != b"done":
            f = W.read_frame(c.read_exact)
            fr.append(f)
            got += f.payload
        self.no_secret(bytes(got))
        msgs, ctl = self.messages(fr)
        ph = PH.encode()
        self.assertEqual(msgs, [(OP_TEXT, b"<" + ph + b">"),
                                (OP_BIN, b"<" + ph + b">"),
                                (OP_TEXT, b"done")])
        self.assertTrue(ctl)
        for op, pl in ctl:
            self.assertIn(pl, (b"p" + ph, b"q" + ph))

    def test_o2_secret_without_swap(self):
        """
        "On a credential's host ... each text or binary message goes
        through the scrubber": the upgrade request carries no placeholder
        (nothing swapped); the bound origin sends the secret anyway (it
        knows its own key).
        """
        p = self.path("o2")

        def script(c, rd, path, h):
            answer_101(c, h)
            c.sendall(W.encode_frame(OP_TEXT, b"key=" + SECRET.encode()) +
                      W.encode_frame(OP_TEXT, b"done"))
            echo(c, rd, path)

        self.script(p, script)
        c, r = self.ws("bound.test", p)
        self.assertEqual(r.status, 101, r)
        f1 = W.read_frame(c.read_exact)
        f2 = W.read_frame(c.read_exact)
        self.no_secret(f1.payload + f2.payload)
        self.assertEqual(f1.payload, b"key=" + PH.encode())

    def test_o3_control_grows_past_125(self):
        """
        "one that would exceed 125 bytes once scrubbed closes the session
        (upstream-encoding)": a 125-byte ping holding the secret (the
        placeholder is longer).
        """
        p = self.path("o3")

        def script(c, rd, path, h):
            answer_101(c, h)
            pl = SECRET.encode()
            pl = pl + b"." * (125 - len(pl))
            c.sendall(W.encode_frame(OP_PING, pl))
            echo(c, rd, path)

        self.script(p, script)
        c, r = self.ws("bound.test", p, "Authorization: Bearer %s\r\n" % PH)
        self.assertEqual(r.status, 101, r)
        blob = self.drain(c)
        self.no_secret(blob)
        self.assertIn(1014, self.close_codes(self.frames(blob)))
        row = self.row(p, reason="upstream-encoding")
        self.assertEqual(row["decision"], "error")

    def test_o4_masked_server_frame(self):
        """'server frames not' masked: the bound origin sends a masked text
        frame quoting the secret (masked with a zero key, so its bytes are
        the secret in the clear)."""
        p = self.path("o4")

        def script(c, rd, path, h):
            answer_101(c, h)
            c.sendall(W.encode_frame(OP_TEXT, b"k=" + SECRET.encode(),
                                     mask=b"\0\0\0\0"))
            echo(c, rd, path)

        self.script(p, script)
        c, r = self.ws("bound.test", p, "Authorization: Bearer %s\r\n" % PH)
        self.assertEqual(r.status, 101, r)
        blob = self.drain(c)
        self.no_secret(blob)
        self.assertIn(1014, self.close_codes(self.frames(blob)))
        row = self.row(p, reason="websocket-protocol-error")
        self.assertEqual(row["decision"], "error")

    # ------------------------------------------------- client -> origin

    def misuse(self, host, p, frames, needle, extra=""):
        """Send frames after a 101 to host; the session must close 1008
        with a credential-misuse row and the origin must not get needle."""
        c, r = self.ws(host, p, extra)
        self.assertEqual(r.status, 101, r)
        for f in frames:
            try:
                c.send(f)
            except OSError:
                break
        blob = self.drain(c)
        time.sleep(0.2)
        self.assertIn(1008, self.close_codes(self.frames(blob)), blob[:200])
        self.assertFalse(self.origin.got(p, needle),
                         "the origin got %r" % needle)
        row = self.row(p, reason="credential-misuse")
        self.assertEqual((row["decision"], row["credential"]),
                         ("deny", "ws-key"))

    def test_c1_placeholder_one_byte_frames_controls_between(self):
        """"A placeholder ... split across frames is found when the second
        frame arrives, and that frame is not forwarded": the placeholder in
        one-byte text fragments, a ping and a pong between every two."""
        p = self.path("c1")
        msg = ("x" + PH + "y").encode()
        out = []
        for i in range(len(msg)):
            out.append(W.client_frame(OP_TEXT if i == 0 else OP_CONT,
                                      msg[i:i + 1], fin=i == len(msg) - 1))
            out.append(W.client_frame(OP_PING, b"ping"))
            out.append(W.client_frame(OP_PONG, b"pong"))
        self.misuse("other.test", p, [b"".join(out)], PH[-8:].encode())

    def test_c2_placeholder_binary_and_close_reason(self):
        """A binary frame, and a close frame's reason, carrying it."""
        p = self.path("c2b")
        self.misuse("other.test", p, [W.client_frame(
            OP_BIN, b"\x00\xff" + PH.encode() + b"\x00")], PH.encode())
        p = self.path("c2c")
        self.misuse("other.test", p, [W.client_frame(
            OP_CLOSE, struct.pack("!H", 1000) + PH.encode())], PH.encode())

    def test_c3_placeholder_across_two_messages(self):
        """The placeholder's first half ends one message, its second half
        starts the next (what a client joining messages reads whole)."""
        p = self.path("c3")
        cut = len(PH) // 2
        self.misuse("other.test", p, [
            W.client_frame(OP_TEXT, ("a" + PH[:cut]).encode()),
            W.client_frame(OP_TEXT, (PH[cut:] + "b").encode())],
            PH[cut:].encode())

    def test_c4_placeholder_to_bound_host(self):
        """"From the sandbox, on every host": a placeholder in a frame to the
        credential's own host is not swapped, and ends the session."""
        p = self.path("c4")
        self.misuse("bound.test", p, [W.client_frame(
            OP_TEXT, ("use " + PH).encode())], PH.encode(),
            "Authorization: Bearer %s\r\n" % PH)

    def bad_frame(self, p, data):
        c, r = self.ws("other.test", p)
        self.assertEqual(r.status, 101, r)
        c.send(data)
        blob = self.drain(c)
        self.assertIn(1002, self.close_codes(self.frames(blob)), blob[:100])
        row = self.row(p, reason="websocket-protocol-error")
        self.assertEqual(row["decision"], "deny")
        with self.origin.lock:
            self.assertFalse(self.origin.raw.get(p), "bytes reached the origin")

    def test_c5_malformed_client_frames(self):
        """2^63 length (MSB set); a 126-byte close (16-bit length); a ping
        with FIN clear: close 1002, nothing forwarded."""
        self.bad_frame(self.path("c5a"), struct.pack(
            "!BBQ", 0x81, 0xff, 1 << 63) + b"\1\2\3\4" + PH.encode())
        pl = struct.pack("!H", 1000) + b"r" * 124
        self.bad_frame(self.path("c5b"), struct.pack(
            "!BBH", 0x88, 0x80 | 126, len(pl)) + b"\0\0\0\0" + pl)
        self.bad_frame(self.path("c5c"), struct.pack("!BB", 0x09, 0x84) +
                       b"\0\0\0\0" + b"ping")

    # ------------------------------------------------- dlp

    def dlp_refused(self, p, data, needle, where="websocket"):
        c, r = self.ws("other.test", p, source=DLP_SRC)
        self.assertEqual(r.status, 101, r)
        try:
            c.send(data)
        except OSError:
            pass
        blob = self.drain(c)
        time.sleep(0.2)
        self.assertIn(1008, self.close_codes(self.frames(blob)), blob[:100])
        self.assertFalse(self.origin.got(p, needle), "the origin got it")
        row = self.row(p, reason="secret-detected")
        self.assertEqual(row["decision"], "deny")
        self.assertIn(where, row["rule"] or "")

    def test_d1_token_one_byte_frames_controls_between(self):
        """docs/dlp.md: "each client message, unmasked, as one stream
        across its fragments ... (a ping between two fragments does not
        break the message's stream)"."""
        tok = github_token()
        msg = ("t " + tok + " e").encode()
        out = []
        for i in range(len(msg)):
            out.append(W.client_frame(OP_TEXT if i == 0 else OP_CONT,
                                      msg[i:i + 1], fin=i == len(msg) - 1))
            out.append(W.client_frame(OP_PING, b"ping"))
            out.append(W.client_frame(OP_PONG, b""))
        self.dlp_refused(self.path("d1"), b"".join(out), tok.encode())

    def test_d2_token_in_binary_and_pong(self):
        tok = github_token()
        self.dlp_refused(self.path("d2b"), W.client_frame(
            OP_BIN, b"\x00" + tok.encode() + b"\xff"), tok.encode())
        tok = github_token()
        self.dlp_refused(self.path("d2p"), W.client_frame(
            OP_PONG, tok.encode()), tok.encode(), "websocket-control")

    # ------------------------------------------------- handshake

    def test_h1_upgrade_with_body_carrying_placeholder(self):
        """An Upgrade: websocket request with a Content-Length body holding
        the placeholder, toward other.test: misuse before anything goes."""
        p = self.path("h1")
        c = self.tls_conn("other.test")
        body = "x=" + PH
        c.send(self.head("other.test", p, self.origin.tls_port,
                         extra="Content-Length: %d\r\n" % len(body)) + body)
        r = c.read_response()
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-misuse")
        self.assertFalse(self.origin.got(p, PH.encode()))

    def test_h5_frames_pipelined_behind_the_head(self):
        """Frames written in the same write as the upgrade request (before
        the 101): the placeholder among them is still refused."""
        p = self.path("h5")
        c = self.tls_conn("other.test")
        c.send(self.head("other.test", p, self.origin.tls_port).encode() +
               W.client_frame(OP_TEXT, b"hi") +
               W.client_frame(OP_TEXT, ("x" + PH).encode()))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        blob = self.drain(c)
        self.assertIn(1008, self.close_codes(self.frames(blob)))
        self.assertFalse(self.origin.got(p, PH.encode()))

    def test_h6_secret_in_101_headers(self):
        """"The whole response of a credential's host is scrubbed": the
        bound origin's 101 quotes the key in Sec-WebSocket-Protocol and in
        a header of its own."""
        p = self.path("h6")

        def script(c, rd, path, h):
            answer_101(c, h, "Sec-WebSocket-Protocol: %s\r\nX-Echo: Bearer "
                       "%s\r\n" % (SECRET, SECRET))
            echo(c, rd, path)

        self.script(p, script)
        c, r = self.ws("bound.test", p, "Authorization: Bearer %s\r\n" % PH)
        self.assertTrue(self.origin.head(p), r)
        self.assertEqual(r.status, 101, r)
        self.no_secret(r.raw_head)
        self.assertEqual(r.header("X-Echo"), "Bearer " + PH)

    def test_h2_accept_key_not_checked(self):
        """No promise: a 101 without Sec-WebSocket-Accept and one with a
        wrong key are relayed as sent (a client library must fail them);
        the frames after are still checked (a placeholder still ends the
        session)."""
        for name, extra in (("h2none", ""),
                            ("h2wrong", "Sec-WebSocket-Accept: AAAA\r\n")):
            p = self.path(name)

            def script(c, rd, path, h, extra=extra):
                c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: "
                           "websocket\r\nConnection: Upgrade\r\n%s\r\n" %
                           extra).encode())
                echo(c, rd, path)

            self.script(p, script)
            self.misuse("other.test", p, [W.client_frame(
                OP_TEXT, PH.encode())], PH.encode())

    def raw_origin_101(self, answer):
        def script(c, rd, path, h):
            c.sendall(answer.encode())
            while True:
                rd._fill()
        return script

    def test_h3_raw_host_h2c_and_unasked_101(self):
        """docs/protocols.md: "On every decision, a 101 answering a request
        that made no offer, or whose h2c offer was dropped, is refused" --
        here on raw.test, where another protocol may be relayed raw."""
        port = self.origin.plain_port
        for name, proto, extra in (
                ("h3h2c", None, "Connection: Upgrade, HTTP2-Settings\r\n"
                 "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"),
                ("h3none", None, "")):
            p = self.path(name)
            self.script(p, self.raw_origin_101(
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                "Upgrade: h2c\r\n\r\n"))
            c = T.Conn(self.gw.port)
            self.addCleanup(c.close)
            c.send(self.head("raw.test", p, port, proto=proto, extra=extra,
                             absolute=True) +
                   "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nGET /after HTTP/1.1\r\n"
                   "Host: raw.test\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 502, (name, r))
            self.assertEqual(r.header("X-Sandgate-Reason"), "upgrade-refused")
            time.sleep(0.3)
            self.assertFalse(self.origin.got(p, b"PRI"), name)
            self.assertFalse(self.origin.got(p, b"/after"), name)

    def test_f1_variants(self):
        """Variants of f1's fix (policy dlpx): an upgrade to another protocol
        on a path exempt from one rule only (/onlygh/, rule github-token),
        or exempt by an entry naming host and path (/hp/), is refused as
        well (the host is scanned); on free.test, a host the
        dlp allow: exempts whole, it switches (101 relayed: nothing there
        is scanned, so nothing is relayed unread that would be read)."""
        port = self.origin.plain_port
        for pre in ("/onlygh/", "/hp/"):
            p = pre + self.path("f1v")[1:]
            self.script(p, self.raw_origin_101(
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade"
                "\r\nUpgrade: example-proto\r\n\r\n"))
            c = T.Conn(self.gw.port, source=DLPX_SRC)
            self.addCleanup(c.close)
            c.send(self.head("raw.test", p, port, proto="example-proto",
                             absolute=True))
            r = c.read_response()
            self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                             (403, "upgrade-refused"), (pre, r))
        p = "/any/" + self.path("f1w")[1:]
        self.script(p, self.raw_origin_101(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            "Upgrade: example-proto\r\n\r\n"))
        c = T.Conn(self.gw.port, source=DLPX_SRC)
        self.addCleanup(c.close)
        c.send(self.head("free.test", p, port, proto="example-proto",
                         absolute=True))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)

    def test_f1_dlp_path_exemption_opens_raw_relay(self):
        """
        FINDING. docs/protocols.md "Upgrades keep the decision": after a 101
        the gateway relays bytes it does not read only where "... the
        sandbox's policy does not scan its requests for secrets (`dlp:`,
        docs/dlp.md) ..."; docs/dlp.md (WebSocket row): "An upgrade to any
        other protocol is refused (`403 upgrade-refused`) where `dlp:`
        scans the request, plain `http://` included: its bytes would be
        relayed unread".

        Policy dlpx (sandbox 127.0.0.4): raw.test plain HTTP, `dlp: {mode:
        block, allow: [{path: "/pub/*"}]}` -- requests to raw.test are
        scanned except under /pub/. Sent (absolute form):
          GET http://raw.test:P/pub/x HTTP/1.1 / Upgrade: example-proto /
          Connection: Upgrade
        the origin answers `101 Upgrade: example-proto`, then the client
        writes `POST /private HTTP/1.1 ... ghp_<valid token>` on the
        switched connection. Control: the same upgrade to /private/x is 403
        upgrade-refused. Observed: the /pub/ upgrade gets the 101 and the
        POST with the token reaches the origin unread -- one exempt path
        makes every later byte on the connection exempt, for any path.
        """
        port = self.origin.plain_port
        tok = github_token()
        # Control: a scanned path may not switch to another protocol.
        p = "/private/" + self.path("f1c")[1:]
        c = T.Conn(self.gw.port, source=DLPX_SRC)
        self.addCleanup(c.close)
        c.send(self.head("raw.test", p, port, proto="example-proto",
                         absolute=True))
        r = c.read_response()
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (403, "upgrade-refused"), r)
        # Control: a token sent plainly to /private is refused.
        body = "k=" + tok
        r = T.raw_request(self.gw.port, "POST http://raw.test:%d/private/q "
                          "HTTP/1.1\r\nHost: raw.test:%d\r\nContent-Length: "
                          "%d\r\n\r\n%s" % (port, port, len(body), body),
                          method="POST", source=DLPX_SRC)
        self.assertEqual(r.status, 403, r)
        # The exempt path's upgrade.
        p = "/pub/" + self.path("f1")[1:]
        self.script(p, self.raw_origin_101(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            "Upgrade: example-proto\r\n\r\n"))
        c = T.Conn(self.gw.port, source=DLPX_SRC)
        self.addCleanup(c.close)
        c.send(self.head("raw.test", p, port, proto="example-proto",
                         absolute=True))
        r = c.read_response()
        after = ("POST /private/upload HTTP/1.1\r\nHost: raw.test\r\n"
                 "Content-Length: %d\r\n\r\n%s" % (len(body), body))
        if r.status == 101:
            c.send(after)
            deadline = time.time() + 2 * T.SLOW
            while time.time() < deadline and not self.origin.got(
                    p, tok.encode()):
                time.sleep(0.05)
        self.assertFalse(self.origin.got(p, tok.encode()),
                         "a GitHub token reached the origin unscanned over "
                         "the raw relay opened by an exempt path (101 given)")
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (403, "upgrade-refused"), r)

    def test_z9_no_secret_in_log_or_rows(self):
        time.sleep(0.3)
        self.assertNotIn(SECRET, self.gw.log_text())
        for row in self.gw.audit_rows():
            self.assertNotIn(SECRET, repr(row))


if __name__ == "__main__":
    T.main()
