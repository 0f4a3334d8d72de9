#!/usr/bin/python3
"""
Probes of the client side of TLS interception: the gateway terminating a
sandbox's TLS with a leaf of its own CA for `tls: intercept` hosts (SPEC §6,
docs/tls.md "What happens in an intercepted tunnel", "Leaf certificates").

Set-up: one TLS origin at 127.0.0.2 (a test CA of its own) behind several
names. Sandbox box-a (127.0.0.1): a.test (intercept, GET /ok/* only),
b.test (intercept), pass.test (passthrough), *.wild.test (intercept) with
deny rules for secret.wild.test and denied.test, the cidr 127.0.0.2/32
(intercept). Sandbox box-b (127.0.0.9): b.test only. lo.wild.test resolves
to 127.0.0.3 (not in allow_private), mix.wild.test to both. HTTP proxy,
SOCKS5 and metrics listeners; ONE worker, because the client-side session
cache and ticket keys are per worker and the resumption tests must not
depend on which worker accepts.

FOUND (fixed: each connection's session id context is the digest of the
sandbox, the tunnel's name and port; the test failed before):
- test_session_resumed_in_tunnel_to_another_name (TLS 1.2 and 1.3): a
  session the gateway issued in a tunnel to a.test (leaf DNS:a.test) was
  resumed by the gateway in a CONNECT tunnel to b.test (SNI b.test): no
  certificate is sent, the client ends up in b.test's tunnel on a session
  authenticated by a.test's leaf (Python reports the a.test certificate as
  the peer of the b.test connection, and its hostname check never runs).
  RFC 6066 §3 says a server "MUST NOT accept the request to resume the
  session if the server_name extension contains a different name"; the
  client SSL_CTX (proxy_tls_worker_init) is one per worker for every name
  and every sandbox, with no session id context per name. Not a policy
  bypass (requests are still decided on the tunnel's name and Host). Seen
  too, now a variant in the same test: a session box-a got in its b.test
  tunnel was resumed by box-b (another sandbox) in its b.test tunnel.

Tried, held:
- leaves for names the policy refuses: CONNECT and SOCKS5 to a denied name,
  to "*.wild.test", to a name resolving to a refused address (all or one of
  two), to an NXDOMAIN name -> 403 / 0x02 / 0x04 before any tunnel, and the
  leaf cache stays as it was (kept: test_no_leaf_for_refused_names);
- leaves minted: 253-character name (CN its first 64 characters, SAN whole),
  "_" label, "A.TEST." -> DNS:a.test, IDN through SOCKS5 (UTF-8 domain) ->
  DNS:xn--bcher-kva.test, IP forms 2130706434 / 0x7f000002 /
  [::ffff:127.0.0.2] / SOCKS5 IPv6 mapped -> IP:127.0.0.2 only (SOCKS5 part
  kept: test_socks5_leaf_names; CONNECT forms are unit-tested in
  tests/vault/test_ca.c);
- resumption with an SNI other than the tunnel's (a.test session, SNI
  a.test, tunnel b.test) -> access_denied, sni-mismatch (the first-bytes
  check runs on every ClientHello, resumed or not); a gateway session
  offered to a passthrough origin -> not resumed, the origin's own chain;
- 0-RTT: the gateway's tickets carry max_early_data 0 (openssl sess_id), so
  s_client sends no early data; hand-made early data cannot be decrypted;
- client-initiated renegotiation in TLS 1.2 (s_client -legacy_renegotiation,
  "R") -> no_renegotiation alert (SSL_OP_NO_RENEGOTIATION), gateway healthy;
- TLS 1.0 / 1.1 offered (SECLEVEL=0 client) -> protocol_version alert and a
  client-tls-error row (kept: test_old_tls_versions_refused); SSLv3 record
  and SSLv2 hello -> access_denied / closed, protocol-not-allowed rows;
- ALPN: unknown protocols only -> no ALPN answer, HTTP/1.x; h2 preface on an
  http/1.1 session -> 505, nothing to the origin; HTTP/1.1 bytes after
  choosing h2 -> SETTINGS then the connection ends, nothing to the origin;
  "h3, http/1.1" -> http/1.1 (kept: test_unknown_alpn_read_as_http1);
- ClientHello with an encrypted_client_hello (0xfe0d) extension -> handshake
  goes on with the tunnel's leaf (ECH ignored, the outer SNI checked);
- ClientHello padded to 60 KB over four records -> ServerHello; over 64 KiB
  -> access_denied (protocol-not-allowed row).
Not tried: the transparent listener (needs network namespaces).
"""

import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import time
import unittest
import warnings

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402  (its test CA)
from test_bypass import RecOrigin  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)  # TLSv1, TLSv1_1

HOST = "127.0.0.2"
LONG = ".".join(["l" * 63, "m" * 63, "n" * 63, "o" * 46]) + ".wild.test"
NAMES = ["a.test", "b.test", "pass.test", "x.wild.test", "secret.wild.test",
         "denied.test", "xn--bcher-kva.test", LONG]


def cert_names(der):
    """(CN, [SAN entries]) of a DER certificate, by the openssl CLI."""
    text = subprocess.run([T.OPENSSL, "x509", "-inform", "DER", "-noout",
                           "-subject", "-ext", "subjectAltName"], input=der,
                          stdout=subprocess.PIPE, env=T.clean_env()).stdout
    text = text.decode()
    cn = re.search(r"CN\s*=\s*(\S+)", text).group(1)
    sans = re.findall(r"(DNS:[^,\s]+|IP Address:[^,\s]+)", text)
    return cn, sans


class TlsInterceptProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-tlsx-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("a.test", NAMES[:6])
        cls.org = RecOrigin("org", crt, key)
        cls.addClassCleanup(cls.org.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in NAMES] + [
            ("lo.wild.test", "127.0.0.3"), ("mix.wild.test", HOST),
            ("mix.wild.test", "127.0.0.3")])
        cls.addClassCleanup(cls.dns.stop)
        P = cls.P = cls.org.port
        policy = {
            "sandboxes": [T.local_sandbox("pa", sid="box-a"),
                          T.local_sandbox("pb", sid="box-b",
                                          source="127.0.0.9/32")],
            "policies": [
                {"name": "pa",
                 "allow": [
                     {"host": "a.test", "ports": [P], "tls": "intercept",
                      "methods": ["GET"], "paths": ["/ok/*"]},     # allow[0]
                     {"host": "b.test", "ports": [P],
                      "tls": "intercept"},                          # allow[1]
                     {"host": "pass.test", "ports": [P]},           # allow[2]
                     {"host": "*.wild.test", "ports": [P],
                      "tls": "intercept"},                          # allow[3]
                     {"host": "xn--bcher-kva.test", "ports": [P],
                      "tls": "intercept"},                          # allow[4]
                     {"cidr": HOST + "/32", "ports": [P],
                      "tls": "intercept"},                          # allow[5]
                 ],
                 "deny": [{"host": "secret.wild.test"},
                          {"host": "denied.test"}],
                 "allow_private": [HOST + "/32"]},
                {"name": "pb",
                 "allow": [{"host": "b.test", "ports": [P],
                            "tls": "intercept"}],
                 "allow_private": [HOST + "/32"]},
            ]}
        # The loader takes `tls:` only as a plain scalar; to_yaml quotes strings.
        text = T.to_yaml(policy).replace('tls: "intercept"', "tls: intercept")
        cls.sport = T.free_port()
        cls.mport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"tlsx.yaml": text + "\n"}, workers=1,
                           extra={"listen": {
                               "socks5": "127.0.0.1:%d" % cls.sport,
                               "metrics": "127.0.0.1:%d" % cls.mport},
                               "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())
        cls.ca = cls.gw.ca_path()

    # ------------------------------------------------------------ helpers

    def ctx(self, version=None):
        c = ssl.create_default_context(cafile=self.ca)
        if version is not None:
            c.minimum_version = c.maximum_version = version
        return c

    def tunnel(self, name, source=None):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (name, self.P),
                             source=source)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        return c

    def socks(self, addr, atyp=3):
        """SOCKS5 CONNECT; (socket, reply code byte)."""
        s = socket.create_connection(("127.0.0.1", self.sport),
                                     timeout=10 * T.SLOW)
        self.addCleanup(s.close)
        s.sendall(b"\x05\x01\x00")
        self.assertEqual(s.recv(2), b"\x05\x00")
        if atyp == 3:
            dst = b"\x03" + bytes([len(addr)]) + addr
        elif atyp == 1:
            dst = b"\x01" + socket.inet_pton(socket.AF_INET, addr)
        else:
            dst = b"\x04" + socket.inet_pton(socket.AF_INET6, addr)
        s.sendall(b"\x05\x01\x00" + dst + struct.pack(">H", self.P))
        rep = b""
        while len(rep) < 2:
            b = s.recv(64)
            if not b:
                break
            rep += b
        self.assertGreaterEqual(len(rep), 2, rep)
        if rep[1] == 0:
            need = {1: 10, 4: 22}.get(rep[3], 10)
            while len(rep) < need:
                rep += s.recv(need - len(rep))
        return s, rep[1]

    def get(self, s, host, path):
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (
            path, host, self.P)).encode())
        got = b""
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            if not b:
                break
            got += b
        return got

    def leaves(self):
        return T.metric(self.mport, "sandgate_tls_leaf_cache_entries",
                        tmp=self.td.path)

    # ------------------------------------------------------------ tests

    def test_session_resumed_in_tunnel_to_another_name(self):
        """
        docs/tls.md "What happens in an intercepted tunnel" 3: "The gateway
        finishes the handshake with the client. It uses a leaf certificate
        for that name" (the tunnel's); SPEC §6: intercepted tunnels "are
        terminated with a leaf certificate minted for the SNI name"; RFC 6066
        §3: a server "MUST NOT accept the request to resume the session if
        the server_name extension contains a different name. Instead, it
        proceeds with a full handshake".
        Sent (box-a, for TLS 1.2 and for TLS 1.3): CONNECT a.test -> 200,
        TLS with SNI a.test (leaf DNS:a.test), GET /ok/1, keep the session;
        CONNECT b.test -> 200, TLS with SNI b.test offering that session.
        Happened (fixed: the session context is the sandbox, name and
        port): the gateway resumed it: no certificate is sent in b.test's
        tunnel, the connection to b.test carries a session authenticated by
        a.test's leaf (getpeercert() is DNS:a.test), and the client's
        hostname check never ran. The control (the same session offered to
        a.test again) resumes as well, so the worker did hold it.
        """
        for ver in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            with self.subTest(version=ver.name):
                cx = self.ctx(ver)
                s = cx.wrap_socket(self.tunnel("a.test").sock,
                                   server_hostname="a.test")
                self.assertIn(b" 200 ", self.get(s, "a.test", "/ok/1")[:20])
                sess = s.session
                s.close()
                # Control: the gateway resumes this session for a.test.
                s1 = cx.wrap_socket(self.tunnel("a.test").sock,
                                    server_hostname="a.test", session=sess)
                self.assertTrue(s1.session_reused,
                                "control: the session was not resumable")
                s1.close()
                s2 = cx.wrap_socket(self.tunnel("b.test").sock,
                                    server_hostname="b.test", session=sess)
                peer = s2.getpeercert()
                reused = s2.session_reused
                self.assertIn(b" 200 ", self.get(s2, "b.test", "/x")[:20])
                s2.close()
                self.assertFalse(
                    reused,
                    "%s: a session issued in the tunnel to a.test was resumed "
                    "in the tunnel to b.test (SNI b.test): no certificate for "
                    "b.test was presented; the peer certificate of that "
                    "connection is %r" % (ver.name,
                                          peer.get("subjectAltName")))
                # Variant: box-a's session for b.test, offered by box-b in
                # its own tunnel to b.test (same name, another sandbox).
                s3 = cx.wrap_socket(self.tunnel("b.test").sock,
                                    server_hostname="b.test")
                self.assertIn(b" 200 ", self.get(s3, "b.test", "/x")[:20])
                sess_b = s3.session
                s3.close()
                s4 = cx.wrap_socket(self.tunnel("b.test",
                                                source="127.0.0.9").sock,
                                    server_hostname="b.test", session=sess_b)
                self.assertIn(b" 200 ", self.get(s4, "b.test", "/x")[:20])
                self.assertFalse(s4.session_reused, "%s: box-a's session was "
                                 "resumed by box-b" % ver.name)
                s4.close()

    def test_no_leaf_for_refused_names(self):
        """
        SPEC §4: "The gateway connects onward only after the first bytes
        passed ... a refused tunnel never reaches, resolves or reveals its
        destination"; docs/tls.md: a tunnel is decided (name, port, every
        resolved address) before the client gets 200, and "Wildcard leaves
        are never issued". Sent over CONNECT and SOCKS5 (domain): denied
        rule names, "*.wild.test", a name resolving to 127.0.0.3 (not in
        allow_private), one resolving to an allowed and a refused address,
        an NXDOMAIN name; a second sandbox asking for a.test (not in its
        policy). Each is refused before any tunnel (no 200 / SOCKS5 0x00,
        so no ClientHello is ever taken) and the leaf cache does not grow.
        """
        before = self.leaves()
        for name, status, reason in (
                ("secret.wild.test", 403, "policy-deny"),
                ("denied.test", 403, "policy-deny"),
                ("*.wild.test", 403, "invalid-host"),
                ("lo.wild.test", 403, "destination-ip-prohibited"),
                ("mix.wild.test", 403, "destination-ip-prohibited"),
                ("nx.wild.test", 502, "dns-error")):
            c, r = T.open_tunnel(self.gw.port, "%s:%d" % (name, self.P))
            c.close()
            self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                             (status, reason), name)
            s, code = self.socks(name.encode())
            self.assertNotEqual(code, 0, "SOCKS5 %s succeeded" % name)
            s.close()
        c, r = T.open_tunnel(self.gw.port, "a.test:%d" % self.P,
                             source="127.0.0.9")
        c.close()
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.leaves(), before)

    def test_socks5_leaf_names(self):
        """
        docs/tls.md "Leaf certificates": exactly one SAN, "DNS:<name> (lower
        case, trailing dot removed) or IP:<address>"; IDNs as A-labels
        (SPEC §4). Through SOCKS5: the UTF-8 domain "bücher.test" -> leaf
        DNS:xn--bcher-kva.test; "X.WILD.TEST." -> DNS:x.wild.test; a
        253-character name -> CN its first 64 characters, SAN the whole
        name; IPv4 127.0.0.2 and IPv6 ::ffff:127.0.0.2 -> IP:127.0.0.2.
        """
        for addr, atyp, sni, cn, san in (
                ("bücher.test".encode(), 3, "xn--bcher-kva.test",
                 "xn--bcher-kva.test", "DNS:xn--bcher-kva.test"),
                (b"X.WILD.TEST.", 3, "x.wild.test", "x.wild.test",
                 "DNS:x.wild.test"),
                (LONG.encode(), 3, LONG, LONG[:64], "DNS:" + LONG),
                (HOST, 1, None, HOST, "IP Address:" + HOST),
                ("::ffff:" + HOST, 4, None, HOST, "IP Address:" + HOST)):
            with self.subTest(addr=addr[:20]):
                s, code = self.socks(addr, atyp)
                self.assertEqual(code, 0)
                cx = self.ctx()
                cx.check_hostname = False
                ss = cx.wrap_socket(s, server_hostname=sni)
                self.assertEqual(cert_names(ss.getpeercert(True)),
                                 (cn, [san]))
                ss.close()

    def test_old_tls_versions_refused(self):
        """
        docs/tls.md 3: the gateway "accepts TLS 1.2 and 1.3". A client
        offering only TLS 1.0, or only TLS 1.1 (SECLEVEL=0 so that OpenSSL
        sends them at all), gets a protocol_version alert, and the tunnel's
        row is client-tls-error.
        """
        n = len(self.gw.audit_rows(reason="client-tls-error"))
        for ver in ("TLSv1", "TLSv1_1"):
            cx = self.ctx()
            cx.set_ciphers("DEFAULT:@SECLEVEL=0")
            cx.minimum_version = cx.maximum_version = getattr(
                ssl.TLSVersion, ver)
            c = self.tunnel("a.test")
            with self.assertRaises(ssl.SSLError) as cm:
                cx.wrap_socket(c.sock, server_hostname="a.test")
            self.assertIn("PROTOCOL_VERSION", str(cm.exception).upper())
        self.assertTrue(self.gw.wait_audit(
            pred=lambda r: len(self.gw.audit_rows(
                reason="client-tls-error")) >= n + 2,
            reason="client-tls-error"))

    def test_unknown_alpn_read_as_http1(self):
        """
        docs/tls.md 3: ALPN "h2" and "http/1.1" in that order; "a client
        that offers neither gets no ALPN answer and is read as HTTP/1.x".
        Offered only "spdy/3" -> no ALPN, and a GET /ok/alpn is answered
        in HTTP/1.1 by the origin; "h3, http/1.1" -> http/1.1. An HTTP/2
        preface sent on the HTTP/1.x session reaches no origin.
        """
        cx = self.ctx()
        cx.set_alpn_protocols(["spdy/3"])
        s = cx.wrap_socket(self.tunnel("a.test").sock,
                           server_hostname="a.test")
        self.assertIsNone(s.selected_alpn_protocol())
        self.assertTrue(self.get(s, "a.test", "/ok/alpn").startswith(
            b"HTTP/1.1 200"))
        self.assertIn("/ok/alpn", [r["path"] for r in self.org.requests()])
        cx = self.ctx()
        cx.set_alpn_protocols(["h3", "http/1.1"])
        s = cx.wrap_socket(self.tunnel("a.test").sock,
                           server_hostname="a.test")
        self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
        n = len(self.org.requests())
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        s.settimeout(5 * T.SLOW)
        got = s.recv(4096)
        self.assertTrue(got.startswith(b"HTTP/1.1 "), got[:40])
        self.assertFalse(got.startswith(b"HTTP/1.1 2"), got[:40])
        time.sleep(0.3)
        self.assertEqual(len(self.org.requests()), n)

    def test_zz_gateway_healthy(self):
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
        s = self.ctx().wrap_socket(self.tunnel("b.test").sock,
                                   server_hostname="b.test")
        self.assertTrue(self.get(s, "b.test", "/h").startswith(
            b"HTTP/1.1 200"))


if __name__ == "__main__":
    T.main()
