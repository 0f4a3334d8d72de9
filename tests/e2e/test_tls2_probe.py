#!/usr/bin/python3
"""
Probes of what the gateway reads from a TLS ClientHello to decide a tunnel
(SPEC §4 "Every tunnel ... is classified by its first bytes: a TLS
ClientHello must carry an SNI equal to the tunnel's name ... anything else is
refused unless the matching rule says `opaque: true`"; docs/protocols.md
"First bytes of a tunnel"; docs/tls.md "Which connections are intercepted").

Set-up: one address (127.0.0.2) serves several names as a CDN does; the TLS
origin there is OpenSSL 3 (Python's ssl) and records the SNI of every
ClientHello it processes (its servername callback) and every request head.
front.test: passthrough; op.test: passthrough, `opaque: true`; api.test:
`opaque: true` and bound to a credential (so always intercepted);
hidden.test: a deny rule. A recording raw origin at 127.0.0.3 (raw.test,
passthrough) shows which bytes go on.

FOUND:
- test_opaque_empty_ccs_prefix_fronts_hidden_name (CONNECT and SOCKS5): in
  an `opaque: true` tunnel, an empty ChangeCipherSpec record (14 03 03 00
  00) in front of a ClientHello naming hidden.test makes the first bytes
  "neither TLS nor HTTP" (tunnel_sniff looks at byte 0 == 0x16 only), so the
  hello is relayed unread; OpenSSL skips empty CCS records (five in a row tried) and takes
  the ClientHello: the origin selects hidden.test (servername callback) and
  answers a ServerHello. No sni-mismatch; the row is an allow for op.test.
- test_opaque_credential_host_not_intercepted_after_empty_ccs: the same
  prefix on a credential's host whose rule is `opaque: true`: the tunnel is
  not intercepted (the client verifies the origin's own certificate), and a
  request carrying a key of the sandbox's own (Authorization: Bearer ...)
  reaches the origin: no foreign-credential refusal, no request row.
  The same bypasses a `tls: intercept` + `opaque: true` rule (same path).
Root cause for both: tunnel_sniff() (src/proxy/proxy_tunnel.c) treats
only p[0] == 0x16 as TLS; anything else is DECIDE_BYTES_OTHER, which an
opaque rule relays unread. transparent_sniff() has the same test.

Tried, held (one line each; kept only where no other test covers it):
- server_name list with a name type other than host_name (1) first, then
  host_name front.test (the gateway skips the unknown type; OpenSSL refuses
  the list: decode_error) and host_name front.test then type 1 hidden.test
  (both read front.test): hidden.test never reaches the origin (kept);
- non-opaque passthrough tunnel with an empty CCS, a warning alert, or a
  middlebox CCS before the ClientHello -> access_denied/closed,
  protocol-not-allowed row, no connection to the origin (kept);
- ClientHello in 1-byte TLS records (handshake header split 1+1+1+1) and
  in 1-byte TCP writes -> read, right name passes, the bytes arrive
  unchanged; hidden.test over 1-byte records -> access_denied (kept);
- record-layer versions 03 00 (refused, protocol-not-allowed) and 03 04
  (read); the origin's OpenSSL accepts 03 00 too (a compatibility refusal,
  not a hole);
- TLS 1.3 ClientHello with psk_key_exchange_modes/early_data/pre_shared_key
  and an application_data record (0-RTT) in the same write: SNI hidden.test
  -> refused, no connection, no byte at the origin; SNI raw.test -> the
  hello and the early data arrive after the check (kept);
- handshake record followed by application data in one segment, and a
  second ClientHello after 0-RTT data -> the watch checks it (sni-mismatch);
- SNI 256 bytes -> protocol-not-allowed (no tunnel name can be that long);
  trailing dot/uppercase/IP/NUL/two names/two extensions are in
  test_spec_4_5_listeners and test_front_probe (not repeated);
- ClientHello of ~20 KiB (ML-KEM-sized key shares, three records) -> read
  and passed on whole (60 KiB / over 64 KiB are in test_tlsx_probe);
- encrypted_client_hello (0xfe0d) in a passthrough tunnel with an allowed
  outer SNI -> relayed (the outer name is checked; the docs promise nothing
  about ECH; an ECH-capable shared front would pick the inner name -- not
  testable here, OpenSSL 3.0 has no ECH);
- SSLv2-compatible ClientHello in an opaque tunnel -> relayed unread (not
  TLS to the sniffer), but the origin's OpenSSL 3 refuses it (decode_error);
- renegotiation under interception: test_tlsx_probe (no_renegotiation).
- intercepted tunnel (api.test): the first flight re-framed into 1-, 3-
  and 100-byte records, written one byte per TCP write -> the handshake
  completes with the tunnel's leaf; after the gateway's own
  HelloRetryRequest a second ClientHello naming hidden.test is taken by the
  gateway's OpenSSL (ServerHello): unchecked, but harmless -- the leaf is
  minted for the tunnel's name (ca_leaf(target.host)), the SNI is never
  read back, and every request is held to the tunnel's Host.
Not tried: the transparent listener (needs namespaces and nftables; its
sniffer, transparent_sniff, has the same byte-0 test).

Loopback only; dnsmasq answers the names with 127.0.0.2 / 127.0.0.3.
"""

import os
import socket
import ssl
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402  (its test CA)
from test_front_probe import (SniOrigin, _ext, x25519_share,  # noqa: E402
                              ACCESS_DENIED)

HOST = "127.0.0.2"
RAWHOST = "127.0.0.3"
EMPTY_CCS = b"\x14\x03\x03\x00\x00"
OWN_KEY = "sk-attacker-own-key-7f3e9a"

# ---------------------------------------------------------------- TLS bytes


def sni_list(*entries):
    """server_name extension with (type, name) entries."""
    lst = b"".join(bytes([t]) + struct.pack(">H", len(n)) + n
                   for t, n in entries)
    return _ext(0, struct.pack(">H", len(lst)) + lst)


def hello_msg(exts, key_share=None, last=()):
    """A TLS 1.3 ClientHello handshake message (no record header); last:
    extensions after the usual ones (pre_shared_key must be the last)."""
    base = [_ext(10, b"\x00\x04\x00\x1d\x00\x17"),
            _ext(13, b"\x00\x04\x04\x03\x08\x04"),
            _ext(43, b"\x02\x03\x04"),
            _ext(51, key_share if key_share is not None else x25519_share())]
    e = b"".join(list(exts) + base + list(last))
    sid = os.urandom(32)
    body = (b"\x03\x03" + os.urandom(32) + bytes([len(sid)]) + sid +
            b"\x00\x02\x13\x01" + b"\x01\x00" + struct.pack(">H", len(e)) + e)
    return b"\x01" + struct.pack(">I", len(body))[1:] + body


def records(hs, split=None, ver=b"\x03\x01"):
    split = split or 16384
    return b"".join(b"\x16" + ver + struct.pack(">H", len(hs[i:i + split])) +
                    hs[i:i + split] for i in range(0, len(hs), split))


def hello(name, **kw):
    return records(hello_msg([sni_list((0, name))]), **kw)


# ---------------------------------------------------------------- origins

class RecSniOrigin(SniOrigin):
    """SniOrigin that also keeps the request heads it was sent."""

    def __init__(self, crt, key, host=HOST):
        self.heads = []
        super().__init__(crt, key, host)

    def serve(self, c, idx):
        c.settimeout(20)
        try:
            s = self.ctx.wrap_socket(c, server_side=True)
        except (ssl.SSLError, OSError):
            return
        req = b""
        while b"\r\n\r\n" not in req:
            b = s.recv(4096)
            if not b:
                return
            req += b
        with self.lock:
            self.heads.append(req)
        body = ("vhost %s\n" % getattr(s, "sg_sni", None)).encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % len(body) + body)
        s.close()

    def got_heads(self):
        with self.lock:
            return list(self.heads)


class RawRec(T.Listener):
    """Records every byte each connection sends; answers nothing."""

    def __init__(self, host=RAWHOST):
        self.data = {}
        super().__init__(host, backlog=16)

    def serve(self, c, idx):
        c.settimeout(10)
        with self.lock:
            self.data[idx] = b""
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                with self.lock:
                    self.data[idx] += b
        except OSError:
            pass

    def streams(self):
        with self.lock:
            return dict(self.data)


# ---------------------------------------------------------------- policy

POLICY = """\
sandboxes:
  - id: local
    policy: tls2
    source: [127.0.0.1/32]
policies:
  - name: tls2
    allow:
      - host: front.test
        ports: [{cdn}]
      - host: op.test
        ports: [{cdn}]
        opaque: true
      - host: api.test
        ports: [{cdn}]
        opaque: true
      - host: raw.test
        ports: [{raw}]
      - host: rawop.test
        ports: [{raw}]
        opaque: true
      - host: hidden.test
    deny:
      - host: hidden.test
    allow_private: [{host}/32, {rawhost}/32]
    credentials: [api-key]
credentials:
  - name: api-key
    secret: api-secret
    hosts: [api.test]
    headers: [Authorization]
"""


class Tls2Probe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-tls2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("front.test", [
            "front.test", "hidden.test", "op.test", "api.test"])
        cls.cdn = RecSniOrigin(crt, key)
        cls.addClassCleanup(cls.cdn.stop)
        cls.raw = RawRec()
        cls.addClassCleanup(cls.raw.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in (
            "front.test", "hidden.test", "op.test", "api.test")] +
            [("raw.test", RAWHOST), ("rawop.test", RAWHOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"tls2.yaml": POLICY.format(
            cdn=cls.cdn.port, raw=cls.raw.port, host=HOST, rawhost=RAWHOST)},
            extra={"listen": {"socks5": "127.0.0.1:%d" % cls.sport},
                   "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.vault_set(("api-secret", "real-secret-value-0b7c"))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())

    # ------------------------------------------------------------ helpers

    def rows(self, **match):
        return [(r["kind"], r["host"], r["port"], r["path"], r["status"],
                 r["decision"], r["rule"], r["reason"])
                for r in self.gw.audit_rows(**match)]

    def tunnel(self, target):
        c, r = T.open_tunnel(self.gw.port, target)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        return c

    def socks_tunnel(self, name, port):
        c, rep = T.socks5_tunnel(self.sport, name, port)
        self.addCleanup(c.close)
        self.assertEqual(rep[:2], b"\x05\x00", rep)
        return c

    def read_some(self, c, want=64, wait=3.0):
        out = b""
        c.sock.settimeout(wait * T.SLOW)
        try:
            while len(out) < want:
                b = c.sock.recv(65536)
                if not b:
                    break
                out += b
        except (socket.timeout, OSError):
            pass
        return out

    def hidden_seen(self):
        return len([n for n in self.cdn.seen() if n == "hidden.test"])

    def handshake(self, sock, ctx, name, prefix=b""):
        """A real TLS client over sock through memory BIOs, with prefix
        written in front of its first flight. Returns (sslobj, in, out)."""
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, out, server_hostname=name)
        first = True
        sock.settimeout(10 * T.SLOW)
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                data = out.read()
                if data:
                    if first:
                        data, first = prefix + data, False
                    sock.sendall(data)
                b = sock.recv(65536)
                if not b:
                    raise EOFError("closed during the handshake")
                inc.write(b)
        data = out.read()
        if data:
            sock.sendall(data)
        return obj, inc, out

    def tls_request(self, sock, obj, inc, out, req):
        obj.write(req)
        sock.sendall(out.read())
        resp = b""
        while True:
            try:
                b = obj.read(65536)
                if not b:
                    break
                resp += b
                if b"\r\n\r\n" in resp:
                    head, _, rest = resp.partition(b"\r\n\r\n")
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            if len(rest) >= int(line.split(b":")[1]):
                                return resp
            except ssl.SSLWantReadError:
                b = sock.recv(65536)
                if not b:
                    break
                inc.write(b)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
        return resp

    # ------------------------------------------------------------ findings

    def _ccs_front(self, c, via):
        before = self.hidden_seen()
        c.send(EMPTY_CCS + hello(b"hidden.test"))
        got = self.read_some(c)
        time.sleep(0.3 * T.SLOW)
        after = self.hidden_seen()
        self.assertEqual(
            after, before,
            "%s: an empty ChangeCipherSpec record, then a ClientHello naming "
            "hidden.test, in an opaque tunnel to op.test: relayed unread; "
            "the origin selected hidden.test and answered %s; rows: %r" % (
                via, "a ServerHello" if got[:1] == b"\x16" and
                got[5:6] == b"\x02" else repr(got[:16]),
                self.rows(host="op.test")))
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        # A TLS record other than a ClientHello first is refused as in a
        # tunnel that is not opaque (protocol-not-allowed).
        self.assertTrue(self.gw.wait_audit(kind=via, host="op.test",
                                           reason="protocol-not-allowed"),
                        self.rows(kind=via))

    def test_opaque_empty_ccs_prefix_fronts_hidden_name(self):
        """
        docs/protocols.md "First bytes of a tunnel": an opaque rule's
        tunnel "The client's own first bytes are still classified as in
        any tunnel -- a ClientHello must carry the tunnel's name ... and
        only bytes that are neither TLS nor HTTP are relayed unseen";
        docs/policy.md `opaque`: "TLS and HTTP in such a tunnel are still
        checked as in any other (SNI, ...)"; SPEC §6 "no domain fronting".
        Control: CONNECT op.test:P (opaque), ClientHello SNI hidden.test ->
        access_denied, sni-mismatch (holds).
        Sent: CONNECT op.test:P -> 200; then 14 03 03 00 00 (an empty
        ChangeCipherSpec record) and a TLS 1.3 ClientHello, SNI hidden.test,
        in one write.
        Happens: the first byte is not 0x16, so the sniffer takes the bytes
        for "neither TLS nor HTTP" and relays them; the origin's OpenSSL
        skips the empty record, its servername callback runs for
        hidden.test (the denied vhost on the shared address) and it answers
        a ServerHello. No sni-mismatch row.
        """
        c = self.tunnel("op.test:%d" % self.cdn.port)
        c.send(hello(b"hidden.test"))
        got = self.read_some(c)
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        c = self.tunnel("op.test:%d" % self.cdn.port)
        self._ccs_front(c, "connect")

    def test_opaque_empty_ccs_prefix_fronts_hidden_name_socks5(self):
        """The same through SOCKS5 (domain op.test): SPEC §4, every tunnel
        (CONNECT, SOCKS5, transparent) is classified by its first bytes."""
        c = self.socks_tunnel(b"op.test", self.cdn.port)
        self._ccs_front(c, "socks5")

    def test_opaque_credential_host_not_intercepted_after_empty_ccs(self):
        """
        docs/credentials.md: "Hosts bound to a credential are always
        intercepted, even when their allow rule says passthrough" and
        "With exclusive: true (the default), a request to a bound host that
        carries some other value in the credential's headers is blocked
        (foreign-credential): an attacker's own key cannot carry data out
        through an API you allowed"; docs/protocols.md: in an opaque tunnel
        a ClientHello "is intercepted where the rule or a credential says
        so".
        Control: CONNECT api.test:P (opaque, credential api-key bound) and
        a TLS client -> the gateway's leaf; GET with Authorization: Bearer
        <own key> -> 403 foreign-credential.
        Sent: CONNECT api.test:P -> 200; the same TLS client, its first
        flight prefixed with 14 03 03 00 00 (an empty ChangeCipherSpec).
        Happens: the tunnel is relayed as opaque bytes: the client verifies
        the origin's own certificate (test CA, not the sandgate CA), and the
        request with the sandbox's own key reaches the origin; no row for it.
        """
        ctx = ssl.create_default_context(cafile=self.pki.cert)
        ctx.load_verify_locations(self.gw.ca_path())
        ctx.set_alpn_protocols(["http/1.1"])
        req = ("GET /exfil HTTP/1.1\r\nHost: api.test:%d\r\n"
               "Authorization: Bearer %s\r\nConnection: close\r\n\r\n" %
               (self.cdn.port, OWN_KEY)).encode()
        # Control: intercepted, the own key refused.
        c = self.tunnel("api.test:%d" % self.cdn.port)
        obj, inc, out = self.handshake(c.sock, ctx, "api.test")
        issuer = dict(x[0] for x in obj.getpeercert()["issuer"])
        self.assertEqual(issuer.get("commonName"),
                         "sandgate interception CA", issuer)
        resp = self.tls_request(c.sock, obj, inc, out, req)
        self.assertIn(b"foreign-credential", resp, resp[:300])
        # The attack.
        c = self.tunnel("api.test:%d" % self.cdn.port)
        try:
            obj, inc, out = self.handshake(c.sock, ctx, "api.test",
                                           prefix=EMPTY_CCS)
        except (EOFError, ssl.SSLError, OSError):
            obj = None      # refused: what is asked
        if obj is not None:
            issuer = dict(x[0] for x in obj.getpeercert()["issuer"])
            resp = self.tls_request(c.sock, obj, inc, out, req)
            time.sleep(0.3 * T.SLOW)
            leaked = [h for h in self.cdn.got_heads()
                      if OWN_KEY.encode() in h]
            self.assertEqual(
                leaked, [],
                "tunnel to a credential's host, first flight prefixed with "
                "an empty CCS record: not intercepted (peer certificate "
                "issued by %r), and the request carrying the sandbox's own "
                "key reached the origin: %r; answer %r; rows %r" % (
                    issuer.get("commonName"), leaked[:1], resp[:80],
                    self.rows(host="api.test")))
            self.assertEqual(issuer.get("commonName"),
                             "sandgate interception CA", issuer)

    # ------------------------------------------------------------ held

    def test_name_type_other_than_host_name(self):
        """RFC 6066 §3: only host_name (0) is defined; parsers disagree on
        other types (the gateway skips them, OpenSSL refuses a list that
        does not start with host_name and reads only the first entry).
        [type 1 hidden.test, host_name front.test] and [host_name
        front.test, type 1 hidden.test] in a tunnel to front.test: the
        origin never selects hidden.test. Holds."""
        before = self.hidden_seen()
        for entries in ([(1, b"hidden.test"), (0, b"front.test")],
                        [(0, b"front.test"), (1, b"hidden.test")]):
            with self.subTest(entries=entries):
                c = self.tunnel("front.test:%d" % self.cdn.port)
                c.send(records(hello_msg([sni_list(*entries)])))
                self.read_some(c)
        time.sleep(0.3 * T.SLOW)
        self.assertEqual(self.hidden_seen(), before)

    def test_opaque_tls_like_first_bytes_refused(self):
        """Variants of the CCS fix in an opaque tunnel (rawop.test): an empty
        alert, an application_data record and an SSLv2-compatible
        ClientHello first are TLS, not "neither TLS nor HTTP": refused
        (access_denied, protocol-not-allowed), none of their bytes reach the
        origin. Control: an ssh banner, neither, is relayed whole."""
        for pre in (b"\x15\x03\x03\x00\x00", b"\x17\x03\x03\x00\x00",
                    b"\x80\x2e\x01\x03\x01\x00\x15\x00\x00\x00\x10"):
            with self.subTest(prefix=pre.hex()):
                before = self.raw.streams()
                c = self.tunnel("rawop.test:%d" % self.raw.port)
                c.send(pre + hello(b"rawop.test"))
                got = self.read_some(c)
                self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
                time.sleep(0.3 * T.SLOW)
                after = self.raw.streams()
                self.assertFalse([v for k, v in after.items()
                                  if v and before.get(k) != v], after)
        self.assertTrue(self.gw.wait_audit(kind="connect", host="rawop.test",
                                           reason="protocol-not-allowed"),
                        self.rows(host="rawop.test"))
        banner = b"SSH-2.0-OpenSSH_9.2p1 probe\r\n"
        c = self.tunnel("rawop.test:%d" % self.raw.port)
        c.send(banner)
        deadline = time.time() + 5 * T.SLOW
        while time.time() < deadline and banner not in \
                self.raw.streams().values():
            time.sleep(0.1)
        self.assertIn(banner, self.raw.streams().values())

    def test_records_before_clienthello_in_passthrough(self):
        """docs/protocols.md: the first bytes of a tunnel whose rule is not
        opaque must be TLS or HTTP. An empty CCS, a warning alert, or a
        middlebox CCS in front of a ClientHello naming raw.test ->
        refused (access_denied or close), a protocol-not-allowed row, no
        connection to the origin. Holds."""
        before = len(self.raw.conns)
        for pre in (EMPTY_CCS, b"\x15\x03\x03\x00\x02\x01\x5a",
                    b"\x14\x03\x03\x00\x01\x01"):
            with self.subTest(prefix=pre.hex()):
                c = self.tunnel("raw.test:%d" % self.raw.port)
                c.send(pre + hello(b"raw.test"))
                got = self.read_some(c)
                self.assertTrue(got == b"" or got.startswith(ACCESS_DENIED),
                                got[:16])
        time.sleep(0.3 * T.SLOW)
        self.assertEqual(len(self.raw.conns), before)
        self.assertTrue(self.gw.wait_audit(kind="connect", host="raw.test",
                                           reason="protocol-not-allowed"),
                        self.rows(host="raw.test"))

    def test_one_byte_records_and_one_byte_writes(self):
        """A ClientHello in records of one byte each (the handshake header
        itself spread over four records), sent one byte per TCP write:
        raw.test passes whole and unchanged; hidden-named over the same
        framing in a tunnel to front.test is access_denied. Holds."""
        h = hello(b"raw.test", split=1)
        c = self.tunnel("raw.test:%d" % self.raw.port)
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(h)):             # one byte per write
            c.send(h[i:i + 1])
            time.sleep(0.0005)
        deadline = time.time() + 5 * T.SLOW
        while time.time() < deadline:
            if any(v == h for v in self.raw.streams().values()):
                break
            time.sleep(0.05)
        self.assertIn(h, self.raw.streams().values())
        before = self.hidden_seen()
        c = self.tunnel("front.test:%d" % self.cdn.port)
        c.send(hello(b"hidden.test", split=1))
        got = self.read_some(c)
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        self.assertEqual(self.hidden_seen(), before)

    def test_early_data_after_refused_hello_never_sent(self):
        """0-RTT: a TLS 1.3 ClientHello with psk_key_exchange_modes,
        early_data and a pre_shared_key, followed in the same write by an
        application_data record. SNI hidden.test in a tunnel to raw.test
        -> access_denied, and no connection, not a byte, at the origin;
        SNI raw.test -> the hello and the early data arrive (after the
        check). Holds."""
        psk_id = os.urandom(40)
        psk = (struct.pack(">H", len(psk_id) + 6) + struct.pack(">H",
               len(psk_id)) + psk_id + b"\x00\x00\x00\x00" +
               struct.pack(">H", 33) + b"\x20" + os.urandom(32))
        exts = [_ext(45, b"\x01\x01"), _ext(42, b"")]
        early = b"\x17\x03\x03\x00\x20" + os.urandom(32)

        def zero_rtt(name):
            return records(hello_msg([sni_list((0, name))] + exts,
                                     last=[_ext(41, psk)]))

        before = len(self.raw.conns)
        c = self.tunnel("raw.test:%d" % self.raw.port)
        c.send(zero_rtt(b"hidden.test") + early)
        got = self.read_some(c)
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        time.sleep(0.3 * T.SLOW)
        self.assertEqual(len(self.raw.conns), before)
        self.assertTrue(self.gw.wait_audit(kind="connect", host="raw.test",
                                           reason="sni-mismatch"),
                        self.rows(host="raw.test"))
        h = zero_rtt(b"raw.test")
        c = self.tunnel("raw.test:%d" % self.raw.port)
        c.send(h + early)
        deadline = time.time() + 5 * T.SLOW
        while time.time() < deadline:
            if any(v == h + early for v in self.raw.streams().values()):
                break
            time.sleep(0.05)
        self.assertIn(h + early, self.raw.streams().values())

    def test_big_hello_pq_key_shares(self):
        """A ClientHello of ~20 KiB: key_share with an X25519MLKEM768-sized
        share (1216 bytes) and padding, in records of 8 KiB, naming
        raw.test -> passed on whole; naming hidden.test in a tunnel to
        front.test -> access_denied, the origin never sees it. Holds."""
        ks = (struct.pack(">HH", 0x11ec, 1216) + os.urandom(1216) +
              struct.pack(">HH", 0x1d, 32) + os.urandom(32))
        ks = struct.pack(">H", len(ks)) + ks
        pad = _ext(21, b"\0" * 18000)
        h = records(hello_msg([sni_list((0, b"raw.test")), pad], ks), 8192)
        self.assertGreater(len(h), 16384)
        c = self.tunnel("raw.test:%d" % self.raw.port)
        c.send(h)
        deadline = time.time() + 5 * T.SLOW
        while time.time() < deadline:
            if any(v == h for v in self.raw.streams().values()):
                break
            time.sleep(0.05)
        self.assertIn(h, self.raw.streams().values())
        before = self.hidden_seen()
        c = self.tunnel("front.test:%d" % self.cdn.port)
        c.send(records(hello_msg([sni_list((0, b"hidden.test")), pad], ks),
                       8192))
        got = self.read_some(c)
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        self.assertEqual(self.hidden_seen(), before)

    def test_zz_gateway_healthy(self):
        c = self.tunnel("front.test:%d" % self.cdn.port)
        ctx = ssl.create_default_context(cafile=self.pki.cert)
        c.sock = ctx.wrap_socket(c.sock, server_hostname="front.test")
        r = c.request("GET / HTTP/1.1\r\nHost: front.test\r\n\r\n")
        self.assertEqual(r.body, b"vhost front.test\n")
        self.assertTrue(self.gw.alive())


if __name__ == "__main__":
    T.main()
