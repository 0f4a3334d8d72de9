#!/usr/bin/python3
"""
Domain-fronting probes: reaching a host the policy does not allow through a
tunnel an allowed name opened (SPEC §4 "a TLS ClientHello must carry an SNI
equal to the tunnel's name", §6 "The client's SNI must match the CONNECT
host (no domain fronting) ... Passthrough rules splice bytes without
decrypting, after checking that the SNI matches"; docs/tls.md, docs/protocols.md
"First bytes of a tunnel").

Set-up: one address (127.0.0.2) serves two names, as a CDN does: front.test
(allowed, passthrough) and hidden.test (a deny rule). The TLS origin there is
OpenSSL (Python's ssl) and records the SNI of every ClientHello it processes
(its servername callback); mitm.test is an intercepted name on a recording
HTTP/1.1 origin.

FOUND (fixed; the tests failed before parse/tls_watch.c):
- test_passthrough_hrr_second_clienthello_fronts / test_socks5_...: the
  first-bytes check read only the first ClientHello. A client that makes
  the origin answer HelloRetryRequest (TLS 1.3: no key_share it can use)
  sends a second, still plaintext, ClientHello naming hidden.test; the
  gateway relayed it unread and the origin's OpenSSL accepted the new name
  (servername callback ran for hidden.test, ServerHello followed). No
  sni-mismatch, no audit row. Variants: the second hello pipelined before
  the retry request, after a ChangeCipherSpec; and the legitimate retry
  (same name) still completes.

Tried, held (kept where no existing test covers it):
- intercepted HTTP/1.1 keep-alive: an allowed request and a request with
  Host: hidden.test pipelined in one TLS write -> the second is 403
  host-mismatch with its own row, never reaches an origin (kept);
- CONNECT to an IP literal (cidr rule, passthrough) with a ClientHello whose
  SNI names hidden.test -> access_denied, sni-mismatch row (kept);
- SNI other than the CONNECT name, missing SNI, empty SNI, two names, two SNI
  extensions, NUL in SNI, IP as SNI, SNI split over records and TCP writes,
  trailing dot / upper case (test_intercept, test_connect,
  test_spec_4_5_listeners);
- Host / absolute-form authority / :authority / host differing from the
  tunnel inside intercepted and plain tunnels, also on a second keep-alive
  request (test_intercept, test_smuggle_probe, test_http2,
  test_spec_4_5_listeners); :path must start with "/" (h2_req.c), so no
  absolute target over HTTP/2; userinfo in an authority is refused by the
  parser (http_authority);
- absolute-form proxy request whose Host header names another host: the
  URL's host is forwarded (test_http_proxy);
- IP literal of an allowed name's address without a cidr rule, short /
  octal / hex / mapped / NAT64 / 6to4 forms of internal addresses
  (test_connect, test_names_probe, test_spec_4_5_listeners);
- report mode: sni-mismatch/host-mismatch are not relaxed (policy_match.c
  / decide.c, docs/policy.md).
Not tried: the transparent listener (needs network namespaces).

Loopback only; dnsmasq answers every name with 127.0.0.2.
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
from test_bypass import RecOrigin  # noqa: E402

HOST = "127.0.0.2"
ACCESS_DENIED = b"\x15\x03\x03\x00\x02\x02\x31"
HRR_RANDOM = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


# ---------------------------------------------------------------- TLS bytes

def _ext(t, data):
    return struct.pack(">HH", t, len(data)) + data


def sni_ext(name):
    lst = b"\0" + struct.pack(">H", len(name)) + name
    return _ext(0, struct.pack(">H", len(lst)) + lst)


def client_hello(sni, key_share, sid, rnd):
    """One TLS 1.3 ClientHello record: TLS_AES_128_GCM_SHA256, groups
    x25519 and P-256, the given key_share extension body."""
    exts = [_ext(10, b"\x00\x04\x00\x1d\x00\x17"),      # supported_groups
            _ext(13, b"\x00\x04\x04\x03\x08\x04"),      # signature_algorithms
            _ext(43, b"\x02\x03\x04"),                  # supported_versions
            _ext(51, key_share)]                        # key_share
    if sni is not None:
        exts.insert(0, sni_ext(sni))
    body = (b"\x03\x03" + rnd + bytes([len(sid)]) + sid +
            b"\x00\x02\x13\x01" + b"\x01\x00")
    e = b"".join(exts)
    body += struct.pack(">H", len(e)) + e
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


NO_SHARES = b"\x00\x00"                                  # an empty list


def x25519_share():
    ks = struct.pack(">HH", 0x1d, 32) + os.urandom(32)
    return struct.pack(">H", len(ks)) + ks


# ---------------------------------------------------------------- origin

class SniOrigin(T.Listener):
    """A TLS origin (OpenSSL through Python's ssl) serving several names on
    one address. Records the name of every ClientHello its servername
    callback saw; after a handshake answers one HTTP request with
    "vhost <sni>"."""

    def __init__(self, crt, key, host=HOST):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(crt, key)
        self.ctx.sni_callback = self._sni
        self.names = []
        super().__init__(host, backlog=16)

    def _sni(self, sslobj, name, ctx):
        sslobj.sg_sni = name
        with self.lock:
            self.names.append(name)

    def seen(self):
        with self.lock:
            return list(self.names)

    def serve(self, c, idx):
        c.settimeout(20)
        s = self.ctx.wrap_socket(c, server_side=True)
        req = b""
        while b"\r\n\r\n" not in req:
            b = s.recv(4096)
            if not b:
                return
            req += b
        body = ("vhost %s\n" % getattr(s, "sg_sni", None)).encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % len(body) + body)
        s.close()


class FrontProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-front-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("front.test", ["front.test", "hidden.test",
                                               "mitm.test"])
        cls.cdn = SniOrigin(crt, key)
        cls.addClassCleanup(cls.cdn.stop)
        cls.mitm = RecOrigin("mitm", crt, key)
        cls.addClassCleanup(cls.mitm.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in (
            "front.test", "hidden.test", "mitm.test")])
        cls.addClassCleanup(cls.dns.stop)
        policy = {
            "sandboxes": [T.local_sandbox("front")],
            "policies": [{
                "name": "front",
                "allow": [
                    {"host": "front.test", "ports": [cls.cdn.port]},   # allow[0]
                    {"host": "mitm.test", "ports": [cls.mitm.port],
                     "tls": "intercept"},                            # allow[1]
                    {"cidr": HOST + "/32", "ports": [cls.cdn.port]},  # allow[2]
                    {"host": "hidden.test"},                         # allow[3]
                ],
                "deny": [{"host": "hidden.test"}],                   # deny[0]
                "allow_private": [HOST + "/32"],
            }],
        }
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"front.yaml": policy}, extra={
            "listen": {"socks5": "127.0.0.1:%d" % cls.sport},
            "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())

    # ------------------------------------------------------------ helpers

    def rows(self, **match):
        return [(r["kind"], r["host"], r["port"], r["method"], r["path"],
                 r["status"], r["decision"], r["rule"], r["reason"])
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

    def read_record(self, c):
        """One TLS record (type, body), or None at EOF."""
        try:
            hdr = c.read_exact(5)
            return hdr[0], c.read_exact(struct.unpack(">H", hdr[3:5])[0])
        except (EOFError, OSError):
            return None

    def hrr_front(self, c, inner):
        """ClientHello naming front.test without a usable key share; the
        origin answers HelloRetryRequest; then a second ClientHello naming
        `inner`. Returns what came back after the second one."""
        sid, rnd = os.urandom(32), os.urandom(32)
        c.send(client_hello(b"front.test", NO_SHARES, sid, rnd))
        rec = self.read_record(c)
        self.assertIsNotNone(rec, "no answer to the first ClientHello")
        typ, body = rec
        # The control: the first ClientHello passed and the origin asked again.
        self.assertEqual((typ, body[0], body[6:38]), (22, 2, HRR_RANDOM),
                         "expected a HelloRetryRequest, got %r" % body[:40])
        self.assertIn("front.test", self.cdn.seen())
        c.send(client_hello(inner, x25519_share(), sid, rnd))
        c.sock.settimeout(3 * T.SLOW)
        got = b""
        try:
            while True:
                b = c.sock.recv(65536)
                if not b:
                    break
                got += b
        except (socket.timeout, OSError):
            pass
        return got

    # ------------------------------------------------------------ tests

    def test_control_hidden_name_denied_directly(self):
        """The destination this file tries to reach is refused when named:
        CONNECT hidden.test is 403 policy-deny with a row naming it, and a
        real TLS client through CONNECT front.test reaches the front vhost."""
        c, r = T.open_tunnel(self.gw.port, "hidden.test:%d" % self.cdn.port)
        c.close()
        self.assertEqual(r.status, 403, r)
        self.assertTrue(self.gw.wait_audit(kind="connect", host="hidden.test",
                                           reason="policy-deny"), self.rows())
        c = self.tunnel("front.test:%d" % self.cdn.port)
        ctx = ssl.create_default_context(cafile=self.pki.cert)
        c.sock = ctx.wrap_socket(c.sock, server_hostname="front.test")
        r = c.request("GET / HTTP/1.1\r\nHost: front.test\r\n\r\n")
        self.assertEqual(r.body, b"vhost front.test\n")

    def _hrr_case(self, c, via):
        before = len([n for n in self.cdn.seen() if n == "hidden.test"])
        got = self.hrr_front(c, b"hidden.test")
        time.sleep(0.3 * T.SLOW)
        after = len([n for n in self.cdn.seen() if n == "hidden.test"])
        self.assertEqual(
            after, before,
            "%s: a second ClientHello (after HelloRetryRequest) naming "
            "hidden.test was relayed unread in the tunnel to front.test; the "
            "origin accepted that name and answered %s" % (
                via, "a ServerHello" if got[:1] == b"\x16" and got[5:6] ==
                b"\x02" and got[11:43] != HRR_RANDOM else repr(got[:16])))
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        self.assertTrue(self.gw.wait_audit(kind=via, reason="sni-mismatch"),
                        self.rows(kind=via))

    def test_passthrough_hrr_second_clienthello_fronts(self):
        """
        SPEC §4: "a TLS ClientHello must carry an SNI equal to the tunnel's
        name"; §6: "The client's SNI must match the CONNECT host (no domain
        fronting) ... Passthrough rules splice bytes without decrypting,
        after checking that the SNI matches"; docs/tls.md: sni-mismatch
        "stops domain fronting".
        Sent: CONNECT front.test:P (allow[0], passthrough) -> 200; a TLS 1.3
        ClientHello, SNI front.test, key_share with no entry -> the origin
        answers HelloRetryRequest (relayed); a second ClientHello, plaintext
        like the first, SNI hidden.test (deny[0]).
        Happens: the gateway relays it; the origin's OpenSSL runs its
        servername callback for hidden.test and answers ServerHello -- the
        denied vhost on the shared address is selected. No refusal, no row.
        """
        c = self.tunnel("front.test:%d" % self.cdn.port)
        self._hrr_case(c, "connect")

    def test_socks5_passthrough_hrr_second_clienthello_fronts(self):
        """The same through SOCKS5 (domain address type front.test); SPEC
        §4: every tunnel (CONNECT, SOCKS5, transparent) is classified the
        same way."""
        c = self.socks_tunnel(b"front.test", self.cdn.port)
        self._hrr_case(c, "socks5")

    def test_hrr_second_clienthello_same_name_goes_on(self):
        """The legitimate retry: after the HelloRetryRequest the second
        ClientHello names front.test again (RFC 8446 4.1.2: the same hello
        but the key share) -> relayed, the origin answers a ServerHello
        that is no retry request, and the tunnel's row is an allow."""
        c = self.tunnel("front.test:%d" % self.cdn.port)
        got = self.hrr_front(c, b"front.test")
        self.assertFalse(got.startswith(ACCESS_DENIED), got[:16])
        self.assertEqual((got[:1], got[5:6]), (b"\x16", b"\x02"), got[:16])
        self.assertNotEqual(got[11:43], HRR_RANDOM)
        self.assertNotIn("hidden.test", self.cdn.seen())
        c.close()
        self.assertTrue(self.gw.wait_audit(kind="connect", host="front.test",
                                           decision="allow"),
                        self.rows(kind="connect"))

    def test_second_clienthello_pipelined_before_the_retry(self):
        """A variant that does not wait for the HelloRetryRequest: the
        first ClientHello (no usable key share) and a second naming
        hidden.test in one write. The origin would take the second as the
        answer to its retry request; the gateway refuses it before a byte
        of it goes on: access_denied, a sni-mismatch row."""
        c = self.tunnel("front.test:%d" % self.cdn.port)
        sid, rnd = os.urandom(32), os.urandom(32)
        c.send(client_hello(b"front.test", NO_SHARES, sid, rnd) +
               client_hello(b"hidden.test", x25519_share(), sid, rnd))
        got = c.read_to_eof(limit=65536)
        self.assertIn(ACCESS_DENIED, got)
        time.sleep(0.3 * T.SLOW)
        self.assertNotIn("hidden.test", self.cdn.seen())
        self.assertTrue(self.gw.wait_audit(kind="connect",
                                           reason="sni-mismatch"),
                        self.rows(kind="connect"))

    def test_second_clienthello_after_a_change_cipher_spec(self):
        """Another variant: after the retry request, the middlebox
        compatibility record (ChangeCipherSpec, RFC 8446 D.4) and then the
        second ClientHello naming hidden.test, in its own write. The CCS
        goes on; the hello is refused: access_denied, a sni-mismatch row,
        the origin never sees the name."""
        c = self.tunnel("front.test:%d" % self.cdn.port)
        sid, rnd = os.urandom(32), os.urandom(32)
        c.send(client_hello(b"front.test", NO_SHARES, sid, rnd))
        rec = self.read_record(c)
        self.assertEqual((rec[0], rec[1][6:38]), (22, HRR_RANDOM))
        c.send(b"\x14\x03\x03\x00\x01\x01")
        time.sleep(0.1)
        c.send(client_hello(b"hidden.test", x25519_share(), sid, rnd))
        got = c.read_to_eof(limit=65536)
        self.assertIn(ACCESS_DENIED, got)
        time.sleep(0.3 * T.SLOW)
        self.assertNotIn("hidden.test", self.cdn.seen())
        self.assertTrue(self.gw.wait_audit(kind="connect",
                                           reason="sni-mismatch"),
                        self.rows(kind="connect"))

    def test_ip_tunnel_clienthello_naming_a_host_refused(self):
        """docs/protocols.md "First bytes": a ClientHello in a tunnel to an
        IP literal must carry no SNI. CONNECT 127.0.0.2:P (allow[2], cidr,
        passthrough) with SNI hidden.test: access_denied, a sni-mismatch
        row, and the origin never sees the name. Holds."""
        before = list(self.cdn.seen())
        c = self.tunnel("%s:%d" % (HOST, self.cdn.port))
        c.send(client_hello(b"hidden.test", x25519_share(), os.urandom(32),
                            os.urandom(32)))
        got = c.read_to_eof(limit=4096)
        self.assertTrue(got.startswith(ACCESS_DENIED), got[:16])
        time.sleep(0.2 * T.SLOW)
        self.assertEqual(self.cdn.seen(), before)
        self.assertTrue(self.gw.wait_audit(kind="connect", host=HOST,
                                           reason="sni-mismatch"),
                        self.rows(kind="connect"))

    def test_intercept_pipelined_second_request_other_host(self):
        """SPEC §6: "the intercepted Host ... must match too". Inside an
        intercepted tunnel to mitm.test, an allowed request and one with
        Host: hidden.test written in one TLS write: the first is served, the
        second is 403 host-mismatch with a row of its own, and no origin
        sees it (test_intercept checks the second request only after the
        first was answered). Holds."""
        c = self.tunnel("mitm.test:%d" % self.mitm.port)
        ctx = ssl.create_default_context(cafile=self.gw.ca_path())
        ctx.set_alpn_protocols(["http/1.1"])
        c.sock = ctx.wrap_socket(c.sock, server_hostname="mitm.test")
        mh = "mitm.test:%d" % self.mitm.port
        c.send("GET /pipe-ok HTTP/1.1\r\nHost: %s\r\n\r\n"
               "GET /pipe-hidden HTTP/1.1\r\nHost: hidden.test:%d\r\n\r\n"
               % (mh, self.mitm.port))
        r1 = c.read_response()
        self.assertEqual(r1.status, 200, r1)
        r2 = c.read_response()
        self.assertEqual(r2.status, 403, r2)
        self.assertEqual(r2.header("X-Sandgate-Reason"), "host-mismatch", r2)
        time.sleep(0.3 * T.SLOW)
        paths = [q["path"] for q in self.mitm.requests()]
        self.assertIn("/pipe-ok", paths)
        self.assertNotIn("/pipe-hidden", paths)
        self.assertTrue(self.gw.wait_audit(kind="connect",
                                           path="/pipe-hidden",
                                           reason="host-mismatch"),
                        self.rows(kind="connect"))


if __name__ == "__main__":
    T.main()
