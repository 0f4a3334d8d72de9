#!/usr/bin/python3
"""
Probe: secrets leaving through WebSocket and HTTP/2 on intercepted (and
plain) sessions despite `dlp: {mode: block}` (docs/dlp.md "Where",
"Content codings"; docs/protocols.md "Upgrades keep the decision",
"HTTP/2 inside intercepted tunnels"; docs/credentials.md "WebSockets").
A test whose docstring starts FOUND failed on the binary it was written
against (fixed since); the others held and are kept because no earlier
test sends them.

Tried:
- FOUND (fixed): a WebSocket upgrade request that carries a body with
  `Content-Encoding: gzip`: the gateway kept inflating every later client
  message as if it continued that gzip stream, so the messages themselves
  (what the origin gets) are never scanned; a GitHub token in plain text
  in a text message reaches the origin (test_ws_messages_inflated_by_upgrade_coding).
- FOUND (fixed): gRPC message compression (`grpc-encoding: gzip`, compressed
  flag 1), which the origin undoes like a Content-Encoding: the DATA are
  scanned as sent (deflate bytes), a GitHub token inside reaches the
  origin; the same message uncompressed is refused (test_grpc_compressed_message).
- held: WebSocket through plain http:// (absolute form) and plain HTTP in a
  CONNECT tunnel: a token cut across fragments with a ping between, and a
  64-bit length header, closes the session with 1008, nothing at the origin.
- held: `Sec-WebSocket-Extensions: permessage-deflate` (and x-webkit-deflate)
  offered by the client never reaches the origin; a frame with RSV1/RSV2/
  RSV3 set (a deflated token) ends the session 1002 before the origin.
- held: a text frame with invalid UTF-8 around a token; a zero-length
  mask key; a token cut at every masking offset by one-byte fragments.
- held: `Upgrade: h2c` on plain http:// with an HTTP/2 preface and a HEADERS
  frame carrying a token pipelined after it: the origin's 101 is refused
  (502), no byte after the request head reaches the origin.
- held: HTTP/2 header block in CONTINUATION frames with a token cut across
  HPACK fragments (Huffman-coded literal), a token in :method, a token in a
  second `cookie` crumb, a token in DATA with padding and a gzip body over
  HTTP/2 toward an HTTP/1.1 origin (earlier probes), extended CONNECT
  (:protocol websocket, RST_STREAM, covered by test_http2.py).
"""

import base64
import binascii
import gzip
import os
import random
import socket
import ssl
import struct
import sys
import threading
import time
import unittest
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA  # noqa: E402
import wsframe as W  # noqa: E402

try:
    import hpack
except ImportError:
    hpack = None
try:
    import grpc
except ImportError:
    grpc = None
if hpack is not None:
    from test_http2 import H2, frame, HEADERS, DATA, END_HEADERS, \
        END_STREAM, CONTINUATION  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
RNG = random.Random(0x5A5A)


def rand(n, alphabet=B62):
    return "".join(RNG.choice(alphabet) for _ in range(n))


def github_token(prefix="ghp_"):
    """A token the github-token rule accepts: its last 6 base62 digits are
    the CRC32 of the 30 before (src/dlp/dlp_rules.c check_github)."""
    body = rand(30)
    crc = binascii.crc32(body.encode()) & 0xffffffff
    digits = ""
    for _ in range(6):
        digits = B62[crc % 62] + digits
        crc //= 62
    return prefix + body + digits


def aws_key():
    return "AKIA" + rand(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


class WsOrigin:
    """A WebSocket origin (TLS when cert given) on ORIGIN_HOST. Reads a
    request head and its Content-Length body, answers a websocket upgrade
    with 101 (/h2c*: 101 Upgrade: h2c to anything), then records every
    client frame's unmasked payload and echoes data frames. Every byte it
    receives is recorded too."""

    def __init__(self, cert=None, key=None):
        self.ctx = None
        if cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((ORIGIN_HOST, 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.raw = b""
        self.payloads = []
        self.heads = []
        self.conns = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,),
                daemon=True).start()

    def _serve(self, c):
        c.settimeout(20 * T.SLOW)
        buf = [b""]
        try:
            if self.ctx:
                c = self.ctx.wrap_socket(c, server_side=True)

            def fill():
                b = c.recv(65536)
                if not b:
                    raise EOFError
                with self.lock:
                    self.raw += b
                buf[0] += b

            def until(sep):
                while sep not in buf[0]:
                    fill()
                i = buf[0].index(sep) + len(sep)
                out, buf[0] = buf[0][:i], buf[0][i:]
                return out

            def exact(n):
                while len(buf[0]) < n:
                    fill()
                out, buf[0] = buf[0][:n], buf[0][n:]
                return out

            head = until(b"\r\n\r\n").decode("latin-1")
            path = head.split(" ")[1]
            h = {}
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                h[k.strip().lower()] = v.strip()
            with self.lock:
                self.heads.append(head)
            if "content-length" in h:
                exact(int(h["content-length"]))
            if path.startswith("/h2c"):
                c.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                          b"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
                while True:
                    fill()
            if h.get("upgrade", "").lower() != "websocket":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                while True:
                    fill()
            c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket"
                "\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                % W.accept_key(h.get("sec-websocket-key", ""))).encode())
            while True:
                b0, b1 = exact(2)
                n = b1 & 0x7f
                if n == 126:
                    n = struct.unpack("!H", exact(2))[0]
                elif n == 127:
                    n = struct.unpack("!Q", exact(8))[0]
                mask = exact(4) if b1 & 0x80 else b"\0\0\0\0"
                p = W.xor_mask(exact(n), mask)
                with self.lock:
                    self.payloads.append(p)
                if b0 & 0x0f in (W.OP_TEXT, W.OP_BIN, W.OP_CONT):
                    c.sendall(W.encode_frame(b0 & 0x0f, p, fin=bool(b0 & 0x80)))
                if b0 & 0x0f == W.OP_CLOSE:
                    c.sendall(W.encode_frame(W.OP_CLOSE, p[:2]))
                    return
        except (OSError, EOFError, ValueError, ssl.SSLError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def got(self, needle):
        """Whether needle (bytes) is in any payload, or their join, or
        in the raw bytes received."""
        with self.lock:
            return needle in b"".join(self.payloads) or any(
                needle in p for p in self.payloads) or needle in self.raw

    def heads_text(self):
        with self.lock:
            return "\n".join(self.heads)

    def stop(self):
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class GrpcRecorder:
    """A grpcio server over TLS: /test.Echo/Unary records each request
    message as the application gets it (decompressed) and echoes it."""

    def __init__(self, cert, key):
        self.seen = []

        def unary(req, ctx):
            self.seen.append(req)
            return b"ok"

        from concurrent import futures
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler("test.Echo", {
                "Unary": grpc.unary_unary_rpc_method_handler(unary)}),))
        with open(cert, "rb") as f:
            c = f.read()
        with open(key, "rb") as f:
            k = f.read()
        self.port = self.server.add_secure_port("%s:0" % ORIGIN_HOST,
            grpc.ssl_server_credentials(((k, c),)))
        self.server.start()

    def got(self, needle):
        return any(needle in m for m in self.seen)

    def stop(self):
        self.server.stop(0)


POLICY = """\
sandboxes:
  - id: box-wsh2
    policy: wsh2
    source: [127.0.0.1/32]
policies:
  - name: wsh2
    allow:
      - host: ws.test
        ports: [{ws}]
        tls: intercept
      - host: api.test
        ports: [{ws}]
        tls: intercept
      - host: plainws.test
        ports: [{plain}]
      - host: grpc.test
        ports: [{grpc}]
        tls: intercept
    allow_private: [{origin}/32]
    dlp:
      mode: block
"""


def craft_coded_message(prefix_len=32768):
    """(body, message, token): body is an upgrade request's gzip body (a
    gzip header and one non-final stored block of 'x's: what it inflates to
    is harmless); message is a WebSocket payload holding a GitHub token in
    plain text that, read as the continuation of that deflate stream (a
    fixed-Huffman block), inflates without error to bytes without the
    token. Checked here with zlib, as the gateway inflates (windowBits
    16 + 15)."""
    fill = b"x" * prefix_len
    body = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + b"\x00" + \
        struct.pack("<HH", len(fill), 0xffff ^ len(fill)) + fill
    for _ in range(5000):
        tok = github_token()
        for h in range(2, 256, 8):      # low 3 bits 010: BFINAL 0, BTYPE 01
            msg = bytes([h]) + b" token " + tok.encode() + b" "
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out = d.decompress(body + msg)
            except zlib.error:
                continue
            if not d.eof and tok.encode() not in out and \
                    tok[:4].encode() not in out[len(fill):]:
                return body, msg, tok
    raise RuntimeError("no message found")


class WsH2Probe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-wsh2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cert, key = cls.pki.leaf("ws.test", ["ws.test", "api.test",
                                             "grpc.test"])
        cls.ws = WsOrigin(cert, key)
        cls.addClassCleanup(cls.ws.stop)
        cls.plain = WsOrigin()
        cls.addClassCleanup(cls.plain.stop)
        cls.grpc = GrpcRecorder(cert, key) if grpc is not None else None
        if cls.grpc is not None:
            cls.addClassCleanup(cls.grpc.stop)
        cls.dns = T.Dnsmasq(d, [("ws.test", ORIGIN_HOST),
                                ("api.test", ORIGIN_HOST),
                                ("plainws.test", ORIGIN_HOST),
                                ("grpc.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": POLICY.format(
            ws=cls.ws.port, plain=cls.plain.port, origin=ORIGIN_HOST,
            grpc=cls.grpc.port if cls.grpc else 1)},
            extra={"upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()
        cls.seq = 0

    # ------------------------------------------------------------ helpers

    def mark(self):
        WsH2Probe.seq += 1
        return "/w%d" % WsH2Probe.seq

    def tls_conn(self, host="ws.test"):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.ws.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def upgrade_head(self, path, host, extra="", absolute=False):
        key = base64.b64encode(os.urandom(16)).decode()
        target = ("http://%s%s" % (host, path)) if absolute else path
        return ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                "Sec-WebSocket-Version: 13\r\n%s\r\n" % (target, host, key,
                                                         extra)).encode()

    def close_codes(self, c):
        codes = []
        try:
            while True:
                f = W.read_frame(c.read_exact)
                if f.opcode == W.OP_CLOSE and len(f.payload) >= 2:
                    codes.append(struct.unpack("!H", f.payload[:2])[0])
        except (EOFError, ConnectionResetError, ssl.SSLError, OSError,
                ValueError):
            pass
        return codes

    # ------------------------------------------------------------ WebSocket

    def test_ws_messages_inflated_by_upgrade_coding(self):
        """FOUND, fixed. docs/dlp.md "Where", WebSocket: "each client
        message, unmasked, as one stream across its fragments and TCP
        reads; a finding closes the session with 1008 (block) before the
        bytes that complete the match go on"; "Content codings": only "a
        request body sent with Content-Encoding: gzip" is inflated.

        Sent, in an intercepted tunnel to ws.test: `GET /echo` with
        `Upgrade: websocket`, `Content-Encoding: gzip` and a Content-Length
        body that is a gzip header and one non-final stored deflate block
        of 32768 'x' (so the gzip stream is left open). After the 101, one
        masked text frame: `\\n token ghp_...` (a GitHub token with a valid
        CRC32, in plain text; the first byte chosen so that, read as more
        deflate data, the message inflates without error to bytes that do
        not hold the token).

        Happened: the gateway fed the WebSocket message to the inflater the
        upgrade request's Content-Encoding set up (x->z outlived the request
        body), so only the inflated garbage was scanned; the origin got the
        token; no 1008, no deny row. Now: a body whose coding does not end
        is refused (415 content-unscannable: no upgrade); and a body whose
        gzip (or deflate) stream ends whole leaves the messages after it
        read as sent (1008, the token never reaches the origin)."""
        body, msg, tok = craft_coded_message()
        # control: no coded body, the token in the message is found
        path = "/echo" + self.mark()
        c = self.tls_conn()
        c.send(self.upgrade_head(path, "ws.test:%d" % self.ws.port))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        c.send(W.client_frame(W.OP_TEXT, msg))
        self.assertIn(1008, self.close_codes(c), "control")
        self.assertFalse(self.ws.got(tok.encode()), "control")
        # the upgrade request carries a gzip body left open: not scannable
        path = "/echo" + self.mark()
        c = self.tls_conn()
        c.send(self.upgrade_head(path, "ws.test:%d" % self.ws.port,
            "Content-Encoding: gzip\r\nContent-Length: %d\r\n" % len(body))
            + body)
        r = c.read_response()
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (415, "content-unscannable"), r)
        # a coded body that ends whole: the messages after it are read as sent
        for coding, data in (("gzip", gzip.compress(b"x" * 40000)),
                             ("deflate", zlib.compress(b"y" * 1000))):
            path = "/echo" + self.mark()
            c = self.tls_conn()
            c.send(self.upgrade_head(path, "ws.test:%d" % self.ws.port,
                "Content-Encoding: %s\r\nContent-Length: %d\r\n" % (
                    coding, len(data))) + data)
            r = c.read_response()
            self.assertEqual(r.status, 101, (coding, r))
            # a message with nothing in it goes on (not read as more coding)
            c.send(W.client_frame(W.OP_TEXT, b"clean"))
            self.assertEqual(W.read_frame(c.read_exact).payload, b"clean",
                             coding)
            c.send(W.client_frame(W.OP_TEXT, msg))
            time.sleep(0.3)
            codes = self.close_codes(c)
            self.assertFalse(self.ws.got(tok.encode()),
                "%s: the origin got the token in a WebSocket message (close "
                "codes %r, rows %r)" % (coding, codes, [
                    (x["decision"], x["reason"], x["rule"])
                    for x in self.gw.audit_rows(path=path)]))
            self.assertIn(1008, codes, coding)
            self.assertTrue(self.gw.wait_audit(path=path,
                                               reason="secret-detected"),
                            (coding, self.gw.audit_rows(path=path)))

    def ws_session(self, conn, path, host, absolute=False):
        conn.send(self.upgrade_head(path, host, absolute=absolute))
        r = conn.read_response()
        self.assertEqual(r.status, 101, r)
        conn.send(W.client_frame(W.OP_TEXT, b"clean"))
        self.assertEqual(W.read_frame(conn.read_exact).payload, b"clean")

    def test_ws_plain_http_secret_refused(self):
        """docs/dlp.md: dlp scans "plain http:// through the explicit
        proxy" too, and WebSocket messages "as one stream across its
        fragments" (a ping between fragments does not break it). A token
        cut across three fragments with a ping between, through absolute
        form and through plain HTTP in a CONNECT tunnel; and an AWS key id
        in a frame whose length is written in the 64-bit form
        (non-minimal: refused 1002 as a protocol error, never relayed)."""
        origin = self.plain
        host = "plainws.test:%d" % origin.port
        for how in ("absolute", "tunnel"):
            tok = github_token()
            path = "/echo" + self.mark()
            if how == "absolute":
                c = T.Conn(self.gw.port)
                self.addCleanup(c.close)
            else:
                c, r = T.open_tunnel(self.gw.port, host)
                self.addCleanup(c.close)
                self.assertEqual(r.status, 200, r)
            self.ws_session(c, path, host, absolute=how == "absolute")
            c.send(W.client_frame(W.OP_TEXT, b"a " + tok[:15].encode(),
                                  fin=False))
            c.send(W.client_frame(W.OP_PING, b"hb"))
            c.send(W.client_frame(W.OP_CONT, tok[15:30].encode(), fin=False))
            c.send(W.client_frame(W.OP_CONT, tok[30:].encode() + b" z"))
            self.assertIn(1008, self.close_codes(c), how)
            self.assertFalse(origin.got(tok[28:].encode()), how)
            rows = self.gw.wait_audit(path=path, reason="secret-detected")
            self.assertTrue(rows, (how, self.gw.audit_rows(path=path)))
            self.assertTrue(rows[0]["rule"].startswith(
                "dlp:github-token websocket "), rows[0]["rule"])
        # a 64-bit length for a short payload: not minimal, refused
        key = aws_key()
        path = "/echo" + self.mark()
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        self.ws_session(c, path, host, absolute=True)
        p = ("k=" + key).encode()
        m = os.urandom(4)
        c.send(struct.pack("!BBQ", 0x81, 0x80 | 127, len(p)) + m +
               W.xor_mask(p, m))
        self.assertIn(1002, self.close_codes(c))
        self.assertFalse(origin.got(key.encode()))

    def test_ws_extension_offer_and_rsv_bits(self):
        """docs/credentials.md "WebSockets": "The request's
        Sec-WebSocket-Extensions is never forwarded ... so permessage-deflate
        is never negotiated" and frames are parsed strictly ("no RSV
        bit"). Offers permessage-deflate and x-webkit-deflate-frame (two
        fields), then sends a raw-deflated AWS key id with RSV1, then with
        RSV2 and with RSV3 alone: the offer never reaches the origin, each
        frame ends the session with 1002 and never reaches it."""
        key = aws_key()
        co = zlib.compressobj(6, zlib.DEFLATED, -15)
        comp = co.compress(("key " + key).encode()) + co.flush(zlib.Z_SYNC_FLUSH)
        comp = comp[:-4]
        for bit in (0x40, 0x20, 0x10):
            path = "/echo" + self.mark()
            c = self.tls_conn()
            c.send(self.upgrade_head(path, "ws.test:%d" % self.ws.port,
                "Sec-WebSocket-Extensions: permessage-deflate; "
                "client_max_window_bits\r\nSec-WebSocket-Extensions: "
                "x-webkit-deflate-frame\r\n"))
            r = c.read_response()
            self.assertEqual(r.status, 101, r)
            self.assertIsNone(r.header("Sec-WebSocket-Extensions"))
            f = bytearray(W.client_frame(W.OP_TEXT, comp))
            f[0] |= bit
            c.send(bytes(f))
            self.assertIn(1002, self.close_codes(c), hex(bit))
            self.assertFalse(self.ws.got(comp), hex(bit))
        self.assertNotIn("deflate", self.ws.heads_text().lower())

    def test_ws_masking_and_utf8_edges(self):
        """A token in a text frame surrounded by invalid UTF-8 (lone
        continuation bytes, an overlong NUL); with an all-zero mask key;
        cut into one-byte fragments, each masked with its own key so that
        the token's bytes sit at every mask offset: each closes with 1008
        and the token's end never reaches the origin."""
        cases = {}
        tok = github_token()
        cases["invalid-utf8"] = [W.encode_frame(W.OP_TEXT, b"\x80\xc0\x80" +
            tok.encode() + b"\xff\xfe", mask=os.urandom(4))]
        tok2 = github_token()
        cases["zero-mask"] = [W.encode_frame(W.OP_TEXT, b"t=" + tok2.encode(),
            mask=b"\0\0\0\0")]
        tok3 = github_token()
        data = b"v " + tok3.encode()
        frames = []
        for i, ch in enumerate(data):
            op = W.OP_TEXT if i == 0 else W.OP_CONT
            frames.append(W.encode_frame(op, bytes([ch]),
                fin=i == len(data) - 1, mask=os.urandom(4)))
        cases["one-byte-fragments"] = frames
        toks = {"invalid-utf8": tok, "zero-mask": tok2,
                "one-byte-fragments": tok3}
        for name, frames in cases.items():
            path = "/echo" + self.mark()
            c = self.tls_conn()
            self.ws_session(c, path, "ws.test:%d" % self.ws.port)
            for f in frames:
                c.send(f)
            self.assertIn(1008, self.close_codes(c), name)
            self.assertFalse(self.ws.got(toks[name][-8:].encode()), name)
            rows = self.gw.wait_audit(path=path, reason="secret-detected")
            self.assertTrue(rows, (name, self.gw.audit_rows(path=path)))

    def test_h2c_pipelined_preface_plain_http(self):
        """docs/protocols.md: "`Upgrade: h2c` alone is forwarded without the
        offer"; a 101 answering it is refused and "Nothing the client sent
        after its request ... is forwarded". Sent on plain http:// (absolute
        form) under dlp: `Upgrade: h2c` with HTTP2-Settings, then at once
        the HTTP/2 preface, SETTINGS and a HEADERS frame whose :path holds
        an AWS key id (HPACK literal, not Huffman); the origin answers 101
        Upgrade: h2c. Expected: 502 upgrade-refused, the key and the
        preface never at the origin, the offer dropped."""
        key = aws_key()
        host = "plainws.test:%d" % self.plain.port
        path = "/h2c" + self.mark()
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        blk = b"\x82\x86" + b"\x44" + bytes([len("/k/" + key)]) + \
            ("/k/" + key).encode()
        c.send(("GET http://%s%s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade, "
                "HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQA"
                "oAAAAAIAAAAA\r\n\r\n" % (host, path, host)).encode() +
               b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
               struct.pack("!I", 0)[1:] + b"\x04\x00" + b"\0\0\0\0" +
               struct.pack("!I", len(blk))[1:] + b"\x01\x05" +
               struct.pack("!I", 3) + blk)
        r = c.read_response()
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "upgrade-refused")
        time.sleep(0.3)
        self.assertFalse(self.plain.got(key.encode()))
        self.assertFalse(self.plain.got(b"PRI * HTTP/2.0"))
        heads = self.plain.heads_text().lower()
        self.assertNotIn("upgrade: h2c", heads)
        self.assertNotIn("http2-settings", heads)

    # ------------------------------------------------------------ HTTP/2

    def need_h2(self):
        if hpack is None:
            self.skipTest("python3-hpack is not installed")

    def test_h2_continuation_huffman_split(self):
        """docs/dlp.md "Where": every header is scanned "as `name: value`"
        before the head is built. A header block cut into HEADERS and two
        CONTINUATION frames in the middle of a Huffman-coded literal
        holding a GitHub token; and a token as the :method: both refused
        with 403 secret-detected, nothing at the origin."""
        self.need_h2()
        tok = github_token()
        path = self.mark()
        h = H2(self, "api.test", self.ws.port)
        enc = hpack.Encoder()
        blk = enc.encode([(":method", "GET"), (":scheme", "https"),
            (":authority", h.authority), (":path", path),
            ("x-note", "see " + tok)], huffman=True)
        a, b = len(blk) - 20, len(blk) - 9
        h.enc = enc
        h.send(frame(HEADERS, END_STREAM, 1, blk[:a]) +
               frame(CONTINUATION, 0, 1, blk[a:b]) +
               frame(CONTINUATION, END_HEADERS, 1, blk[b:]))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 403, st)
        self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                         "secret-detected")
        self.assertFalse(self.ws.got(tok[-10:].encode()))
        key = aws_key()
        h = H2(self, "api.test", self.ws.port)
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, h.enc.encode([
            (":method", key), (":scheme", "https"),
            (":authority", h.authority), (":path", self.mark())])))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 403, st)
        self.assertFalse(self.ws.got(key.encode()))

    def test_grpc_compressed_message(self):
        """FOUND, fixed (now 415 content-unscannable, UNIMPLEMENTED in gRPC:
        grpc-encoding other than identity). docs/dlp.md "Where": HTTP/2 DATA, "a stream's payload,
        as its DATA frames come, toward an HTTP/1.1 or an HTTP/2 origin";
        "Content codings": "What the gateway cannot decode is not let
        through unread under mode: block". (docs/credentials.md refuses a
        compressed gRPC message toward the client for the same reason:
        "a compressed message ... cannot be read".)

        Sent: a gRPC unary call (python grpcio, `grpc.http_proxy` = the
        gateway, CONNECT + interception, HTTP/2 origin) to grpc.test
        /test.Echo/Unary with `compression=grpc.Compression.Gzip`: the
        client sends `grpc-encoding: gzip` and the message with its
        compressed flag set, its bytes gzip. The message holds a GitHub
        token in plain text (2 KiB of text around it).

        Happened: the call succeeds and the origin's handler gets the
        token (grpcio inflated it); no deny row. The same message sent
        uncompressed is refused (PERMISSION_DENIED, secret-detected).
        Where: src/exchange/proxy_h2_origin.c h2o_client_read feeds the
        DATA to dlp_payload as sent; nothing reads grpc-encoding or the
        message's compressed flag (proxy_dlp.c body_coding knows only
        Content-Encoding)."""
        if grpc is None:
            self.skipTest("python3-grpcio is not installed")
        tok = github_token()
        msg = (("lorem ipsum dolor sit amet " * 40) + "token=" + tok + " " +
               ("consectetur adipiscing " * 40)).encode()
        with open(self.gw_ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        ch = grpc.secure_channel("grpc.test:%d" % self.grpc.port, creds,
            options=[("grpc.http_proxy", self.gw.url),
                     ("grpc.enable_retries", 0)])
        self.addCleanup(ch.close)
        call = ch.unary_unary("/test.Echo/Unary")
        # control: uncompressed, refused
        with self.assertRaises(grpc.RpcError) as cm:
            call(msg, timeout=20 * T.SLOW)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("secret-detected", cm.exception.details())
        self.assertFalse(self.grpc.got(tok.encode()))
        tok = github_token()
        msg = msg.replace(msg[msg.index(b"token=") + 6:][:40], tok.encode())
        outcome = "no error"
        try:
            call(msg, timeout=20 * T.SLOW, compression=grpc.Compression.Gzip)
        except grpc.RpcError as e:
            outcome = "%s %s" % (e.code(), e.details())
        self.assertFalse(self.grpc.got(tok.encode()),
            "the origin got the token in a gzip-compressed gRPC message "
            "(client saw: %s)" % outcome)
        # refused as a coding the gateway does not read, in gRPC's words
        self.assertIn("UNIMPLEMENTED", outcome)
        self.assertIn("content-unscannable", outcome)
        # the other codings grpcio has, and a clean compressed message too:
        # nothing compressed goes on unread
        for how, body in ((grpc.Compression.Deflate, msg),
                          (grpc.Compression.Gzip, b"nothing secret here")):
            with self.assertRaises(grpc.RpcError) as cm:
                call(body, timeout=20 * T.SLOW, compression=how)
            self.assertEqual(cm.exception.code(),
                             grpc.StatusCode.UNIMPLEMENTED, how)
        self.assertFalse(self.grpc.got(b"nothing secret here"))
        # without compression a clean call goes through
        call(b"nothing secret here", timeout=20 * T.SLOW)
        self.assertTrue(self.grpc.got(b"nothing secret here"))


if __name__ == "__main__":
    T.main()
