#!/usr/bin/python3
"""
Evasions of outbound secret detection (docs/dlp.md) a review found, kept
as regression tests. Each test sends a secret a default rule matches
through an allowed host under `dlp: {mode: block}` and asserts that the
gateway refuses it; each failed on the code before its fix (the origin
received the secret): a gzip member's header fields, a long JWT with an
escape past the unescaped view's first 256 bytes, a raw upgrade on plain
http://. (Indented base64 lines, also found, are documented as out of
reach instead: docs/dlp.md.)
"""

import json
import os
import socket
import struct
import sys
import threading
import unittest
import urllib.parse
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_dlp  # noqa: E402
from test_dlp import rand, b64u, B62  # noqa: E402

AWS_ALPHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def aws_key():
    return "AKIA" + rand(16, AWS_ALPHA)


def long_jwt():
    """A JWT as identity providers issue them: header and payload together
    well over 1 KiB (kid, x5t, claims)."""
    hdr = b64u(json.dumps({"alg": "RS256", "typ": "JWT", "kid": rand(40),
        "x5t": rand(43)}).encode())
    pl = b64u(json.dumps({"sub": rand(24), "aud": "api://" + rand(36),
        "iss": "https://login.example.com/" + rand(36) + "/v2.0",
        "name": "A", "roles": [rand(30) for _ in range(20)]}).encode())
    sig = rand(342, B62 + "-_")
    return hdr, pl, sig


def gzip_member(payload, comment=None, fname=None, extra=None):
    """A gzip member (RFC 1952) with optional FEXTRA, FNAME, FCOMMENT."""
    flg = 0
    hdr = b""
    if extra is not None:
        flg |= 4
        hdr += struct.pack("<H", len(extra)) + extra
    if fname is not None:
        flg |= 8
        hdr += fname + b"\0"
    if comment is not None:
        flg |= 16
        hdr += comment + b"\0"
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = c.compress(payload) + c.flush()
    return (b"\x1f\x8b\x08" + bytes([flg]) + b"\0\0\0\0\0\xff" + hdr + body +
        struct.pack("<II", zlib.crc32(payload) & 0xffffffff,
        len(payload) & 0xffffffff))


class DlpProbe(test_dlp.DlpTest):
    """The DlpTest gateway (guarded: mode block), new requests."""

    def mark(self):
        DlpProbe.seq += 1
        return "/probe/%d" % DlpProbe.seq

    def post(self, body, extra_headers="", path=None):
        path = path or self.mark()
        head = ("POST %s HTTP/1.1\r\nHost: api.test:%d\r\n%s"
                "Content-Length: %d\r\n\r\n" % (path, self.origin.port,
                extra_headers, len(body))).encode()
        return path, self.send("api.test", head, (body,))

    # ------------------------------------------------- content codings

    def test_gzip_header_fields_unscanned(self):
        """Content-Encoding: gzip: the member's FNAME / FCOMMENT / FEXTRA
        are consumed by inflate and never scanned, but they reach the
        origin as sent, in the clear."""
        misses = []
        for field in ("comment", "fname", "extra"):
            key = aws_key()
            member = gzip_member(b"hello world", **{field: key.encode()})
            self.assertEqual(zlib.decompress(member, 31), b"hello world")
            path, r = self.post(member, "Content-Encoding: gzip\r\n")
            if r.status == 200 or self.origin.received(key):
                misses.append("gzip %s: %d, the origin received the key in "
                    "the clear: %s" % (field, r.status,
                    self.origin.received(key)))
        self.assertEqual(misses, [])

    # ------------------------------------------------- base64 runs

    def test_jwt_escape_after_prime_query(self):
        """A long JWT in the query, one character of its signature
        percent-encoded (the origin decodes it back): the unescaped view
        wakes at the escape and scans only 256 bytes before the current
        1 KiB block, so the JWT's start is never in it."""
        hdr, pl, sig = long_jwt()
        jwt = "%s.%s.%s" % (hdr, pl, sig)
        enc = "%s.%s.%%%02X%s" % (hdr, pl, ord(sig[0]), sig[1:])
        self.assertEqual(urllib.parse.unquote(enc), jwt)
        path = self.mark()
        head = ("GET %s?id_token=%s HTTP/1.1\r\nHost: api.test:%d\r\n\r\n"
                % (path, enc, self.origin.port)).encode()
        r = self.send("api.test", head)
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.origin.received(enc))

    def test_jwt_escape_after_prime_json_body(self):
        """The same in a JSON body, the signature's first character as
        \\u00XX: the JSON the origin parses holds the JWT."""
        hdr, pl, sig = long_jwt()
        jwt = "%s.%s.%s" % (hdr, pl, sig)
        body = ('{"token": "%s.%s.\\u%04x%s"}' % (hdr, pl, ord(sig[0]),
            sig[1:])).encode()
        self.assertEqual(json.loads(body)["token"], jwt)
        path, r = self.post(body, "Content-Type: application/json\r\n")
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.origin.received(body.decode()[-40:]))


class UpgradeOrigin:
    """Plain HTTP on 127.0.0.2: answers any request with a 101 to the
    protocol the client named in Upgrade, then records every byte."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((test_dlp.ORIGIN_HOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.data = b""
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
        c.settimeout(20)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                b = c.recv(4096)
                if not b:
                    return
                buf += b
            head = buf.split(b"\r\n\r\n")[0].decode("latin-1")
            proto = "x"
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "upgrade":
                    proto = v.strip()
            with self.lock:
                self.data += buf
            if proto == "x":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            else:
                c.sendall(("HTTP/1.1 101 Switching Protocols\r\n"
                    "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n" %
                    proto).encode())
            while True:
                b = c.recv(65536)
                if not b:
                    return
                with self.lock:
                    self.data += b
                c.sendall(b"ack")
        except OSError:
            pass
        finally:
            c.close()

    def received(self, needle):
        with self.lock:
            return needle.encode() in self.data

    def stop(self):
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


PLAIN_POLICY = """\
sandboxes:
  - id: box-plain
    policy: plain
    source: [127.0.0.1/32]
policies:
  - name: plain
    allow:
      - host: up.test
        ports: [{port}]
    allow_private: [{origin}/32]
    dlp:
      mode: block
"""


class DlpPlainProbe(unittest.TestCase):
    """Plain http:// through the explicit proxy, dlp mode block."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dlpprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = UpgradeOrigin()
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("up.test", test_dlp.ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": PLAIN_POLICY.format(
            port=cls.origin.port, origin=test_dlp.ORIGIN_HOST)})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    def conn(self):
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        return c

    def test_plain_http_secret_refused(self):
        """The control: the same host, a secret in the query is refused."""
        key = aws_key()
        c = self.conn()
        c.send("GET http://up.test:%d/q?k=%s HTTP/1.1\r\nHost: up.test:%d"
               "\r\n\r\n" % (self.origin.port, key, self.origin.port))
        r = c.read_response()
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.origin.received(key))

    def test_raw_upgrade_unscanned(self):
        """Upgrade: to any protocol the origin accepts (101): the bytes after
        it are relayed unread although dlp is on for this host."""
        key = aws_key()
        c = self.conn()
        c.send("GET http://up.test:%d/u HTTP/1.1\r\nHost: up.test:%d\r\n"
               "Connection: Upgrade\r\nUpgrade: exfil\r\n\r\n" % (
               self.origin.port, self.origin.port))
        r = c.read_response()
        if r.status == 101:
            c.send("key=%s\n" % key)
            c.read_exact(3)     # the origin's ack: it has the bytes
        self.assertFalse(self.origin.received(key),
            "the origin received the key after the %d" % r.status)
        self.assertNotEqual(r.status, 101, "a raw upgrade under dlp: %r" % r)


# Only the probes run here, not DlpTest's own tests again.
for _n in dir(test_dlp.DlpTest):
    if _n.startswith("test_") and _n not in DlpProbe.__dict__:
        setattr(DlpProbe, _n, None)


if __name__ == "__main__":
    T.main()
