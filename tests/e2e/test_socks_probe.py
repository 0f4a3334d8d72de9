#!/usr/bin/python3
"""
Probe of the SOCKS5 and DNS listeners (SPEC §5 "SOCKS5", "DNS";
docs/protocols.md "SOCKS5", "DNS"; docs/architecture.md step 8 "Relay").

A scripted upstream resolver (FakeUpstream, UDP and TCP, hand-built
packets) answers what each case needs: extra records for names nobody asked
about, IPv4-mapped AAAA answers, a TXT answer bigger than any UDP limit.
SOCKS5 is spoken by hand. Loopback only; every address handed out is in
127.0.0.0/8. Also tried and held (not kept as tests): a greeting and
request written byte by byte, 255 methods offered (0x02 picked), a DNS
question in mixed case (echoed as sent), a TCP DNS frame announcing more
than is sent then FIN (closed, no answer), ATYP 4 ::ffff:127.0.0.2 under
cidr 127.0.0.2/32 (granted). Tests that FAIL on the current binary carry in their
docstring the promise, where it is written, and what happened.
"""

import os
import socket
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sgtest as T  # noqa: E402

from dnswire import (  # noqa: E402
    A, AAAA, CNAME, TXT, OPT, build_query, parse, rr, txt_rdata)
from dnswire import Upstream as _Upstream  # noqa: E402


def FakeUpstream(zone):
    """The scripted resolver (dnswire.Upstream) as this file's cases want
    it: OPT of 1232, no RA."""
    return _Upstream(zone, opt_size=1232, ra=False)


class HalfCloseServer(T.Listener):
    """Reads until the client's EOF, then answers b"got:<n>" and closes."""

    def __init__(self, host="127.0.0.2"):
        self.got_eof = []
        super().__init__(host, backlog=8)

    def serve(self, c, idx):
        c.settimeout(20)
        n = 0
        while True:
            b = c.recv(65536)
            if not b:
                break
            n += len(b)
        self.got_eof.append(n)
        time.sleep(0.3)
        c.sendall(b"got:%d" % n)


# ------------------------------------------------------------ the tests

BIG_TXT = b"x" * 6000   # more than the 4096 any UDP answer may hold


class SocksDnsProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-sprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.raw = T.RawServer("127.0.0.2", mode="record")
        cls.addClassCleanup(cls.raw.stop)
        cls.raw3 = T.RawServer("127.0.0.3", mode="record")
        cls.addClassCleanup(cls.raw3.stop)
        cls.half = HalfCloseServer("127.0.0.2")
        cls.addClassCleanup(cls.half.stop)
        zone = {
            # an A answer carrying records for a name nobody asked about
            "spoof.test": {A: ([rr("spoof.test", A, "127.0.0.2"),
                                rr("victim.test", A, "127.0.0.5")],
                               [rr("victim.test", A, "127.0.0.5")])},
            "victim.test": {A: ([rr("victim.test", A, "127.0.0.2")], [])},
            # a CNAME for another owner slipped in before the real answer
            "detour.test": {A: ([rr("victim2.test", CNAME, "evil.test"),
                                 rr("detour.test", A, "127.0.0.2")], [])},
            "victim2.test": {A: ([rr("victim2.test", A, "127.0.0.2")], [])},
            "evil.test": {A: ([rr("evil.test", A, "127.0.0.5")], [])},
            # AAAA in IPv4-mapped form of an internal address not allowed
            "mapped.test": {A: ([rr("mapped.test", A, "127.0.0.2")], []),
                            AAAA: ([rr("mapped.test", AAAA,
                                       "::ffff:127.0.0.3")], [])},
            # AAAA in IPv4-mapped form of the allowed address
            "mappedok.test": {AAAA: ([rr("mappedok.test", AAAA,
                                         "::ffff:127.0.0.2")], [])},
            "bigtxt.test": {A: ([rr("bigtxt.test", A, "127.0.0.2")], []),
                            TXT: ([rr("bigtxt.test", TXT,
                                      txt_rdata(BIG_TXT))], [])},
            "allowed.test": {A: ([rr("allowed.test", A, "127.0.0.2")], [])},
            "denied.test": {A: ([rr("denied.test", A, "127.0.0.2")], [])},
        }
        cls.up = FakeUpstream(zone)
        cls.addClassCleanup(cls.up.stop)
        names = ["spoof.test", "victim.test", "detour.test", "victim2.test",
                 "mapped.test", "mappedok.test", "bigtxt.test",
                 "allowed.test"]
        policies = {
            "sandboxes": [T.local_sandbox("sp", sid="local",
                                          source="127.0.0.1/32")],
            "policies": [{
                "name": "sp",
                "allow": ([{"host": n, "ports": [cls.raw.port, cls.half.port]}
                           for n in names] +
                          [{"cidr": "127.0.0.2/32", "ports": [cls.raw.port,
                                                              cls.half.port]},
                           {"cidr": "0.0.0.0/0", "ports": [cls.raw3.port]},
                           {"host": "opaque.test", "ports": [cls.half.port],
                            "opaque": True}]),
                "deny": [{"host": "denied.test"}],
                "dns_types": ["A", "AAAA", "TXT"],
                "allow_private": ["127.0.0.2/32"]}],
        }
        zone["opaque.test"] = {A: ([rr("opaque.test", A, "127.0.0.2")], [])}
        cls.dport = T.free_port(udp_too=True)
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.up, {"p.yaml": policies}, extra={
            "listen": {"dns": "127.0.0.1:%d" % cls.dport,
                       "socks5": "127.0.0.1:%d" % cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if os.environ.get("SGPROBE_DUMP"):
            cls.addClassCleanup(lambda: print("\n".join(
                repr({k: r[k] for k in ("kind", "client", "host", "port",
                      "method", "status", "decision", "rule", "reason")
                      if k in r}) for r in cls.gw.audit_rows()) + "\n" +
                cls.gw.log_tail(60), file=sys.stderr))
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("no SOCKS5 listener:\n" + cls.gw.log_tail())
        deadline = time.time() + 15 * T.SLOW
        while True:
            try:
                cls.udp_ask(build_query("ready.sgtest.test", A), timeout=0.5)
                break
            except socket.timeout:
                if time.time() > deadline or not cls.gw.proc.alive():
                    raise RuntimeError("DNS listener not answering:\n" +
                                       cls.gw.log_tail())

    # ------------------------------------------------------------ helpers

    @classmethod
    def udp_ask(cls, q, timeout=3.0):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.settimeout(timeout * T.SLOW)
            s.sendto(q, ("127.0.0.1", cls.dport))
            return s.recv(65535)
        finally:
            s.close()

    def tcp_ask(self, q):
        s = socket.create_connection(("127.0.0.1", self.dport),
                                     timeout=5 * T.SLOW)
        self.addCleanup(s.close)
        s.sendall(struct.pack(">H", len(q)) + q)
        buf = b""
        while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
            b = s.recv(65536)
            if not b:
                break
            buf += b
        return buf[2:]

    def conn(self):
        c = T.Conn(self.sport, timeout=5)
        self.addCleanup(c.close)
        return c

    def socks_req(self, atyp_addr, port, cmd=1):
        return b"\x05" + bytes([cmd, 0]) + atyp_addr + struct.pack(">H", port)

    @staticmethod
    def dom(name):
        return b"\x03" + bytes([len(name)]) + name

    @staticmethod
    def v6(addr):
        return b"\x04" + socket.inet_pton(socket.AF_INET6, addr)

    def gateway_alive(self):
        self.assertTrue(self.gw.alive(), "gateway died:\n" + self.gw.log_tail())

    # ------------------------------------------------------------ DNS

    def test_dns_spoofed_other_owner_not_relayed_nor_cached(self):
        """docs/protocols.md "CNAME chains": records for any other owner are
        ignored, 'so an upstream cannot slip in addresses ... for a name
        nobody asked about'. The client's A answer for spoof.test holds only
        spoof.test's address, and a later query of victim.test gets
        victim.test's own answer, not the spoofed 127.0.0.5."""
        h, _, recs = parse(self.udp_ask(build_query("spoof.test", A)))
        self.assertEqual(h["rcode"], 0, recs)
        self.assertEqual([(r[1], r[3]) for r in recs if r[2] == A],
                         [("spoof.test", "127.0.0.2")], recs)
        h, _, recs = parse(self.udp_ask(build_query("victim.test", A, 0x55)))
        self.assertEqual([r[3] for r in recs if r[2] == A], ["127.0.0.2"])
        h, _, recs = parse(self.udp_ask(build_query("detour.test", A, 0x56)))
        self.assertEqual([(r[1], r[2], r[3]) for r in recs],
                         [("detour.test", A, "127.0.0.2")], recs)
        h, _, recs = parse(self.udp_ask(build_query("victim2.test", A, 0x57)))
        self.assertEqual([(r[1], r[2], r[3]) for r in recs],
                         [("victim2.test", A, "127.0.0.2")], recs)

    def test_dns_ipv4_mapped_internal_aaaa_denies_name(self):
        """SPEC §5 DNS + docs/policy.md allow_private: an internal address
        includes 'their IPv4-mapped ... forms'; any internal answer not in
        allow_private (A or AAAA, whatever type was asked) denies the whole
        name. mapped.test: A 127.0.0.2 (allowed) + AAAA ::ffff:127.0.0.3.
        An A query must be NXDOMAIN (destination-ip-prohibited)."""
        h, _, recs = parse(self.udp_ask(build_query("mapped.test", A)))
        self.assertEqual(h["rcode"], 3, recs)
        h, _, recs = parse(self.udp_ask(build_query("mapped.test", AAAA, 7)))
        self.assertEqual(h["rcode"], 3, recs)

    def test_dns_big_txt_udp_truncated_even_with_huge_edns(self):
        """docs/protocols.md "Truncation": a UDP response may be as long as
        the client's advertised payload size within 512..4096; longer is
        sent with TC and no answer records. A client advertising 65535 gets
        at most 4096 bytes; the OPT of the reply says 1232. Over TCP the
        whole 6000-byte TXT arrives."""
        raw = self.udp_ask(build_query("bigtxt.test", TXT, edns=65535))
        h, _, recs = parse(raw)
        self.assertLessEqual(len(raw), 4096, h)
        self.assertTrue(h["tc"], h)
        self.assertEqual([r for r in recs if r[0] == "an"], [])
        opt = [r for r in recs if r[2] == OPT]
        self.assertEqual(len(opt), 1, recs)
        raw = self.tcp_ask(build_query("bigtxt.test", TXT, 9, edns=1232))
        h, _, recs = parse(raw)
        self.assertEqual(h["rcode"], 0, h)
        txt = [r for r in recs if r[2] == TXT]
        self.assertEqual(len(txt), 1, recs)
        self.assertEqual(len(txt[0][3]), len(BIG_TXT) + 24)

    # ------------------------------------------------------------ SOCKS5

    def test_socks_ipv4_mapped_internal_refused(self):
        """docs/protocols.md SOCKS5: 'IPv4-mapped IPv6 is IPv4'; an internal
        address not in allow_private is 0x02 even under cidr 0.0.0.0/0
        (docs/policy.md: a cidr rule alone never opens an internal range).
        ATYP 4 ::ffff:127.0.0.3: 0x02, nothing reaches 127.0.0.3."""
        c = self.conn()
        c.send(b"\x05\x01\x00" + self.socks_req(self.v6("::ffff:127.0.0.3"),
                                               self.raw3.port))
        self.assertEqual(c.read_exact(2), b"\x05\x00")
        rep = c.read_exact(4)
        self.assertEqual(rep[1], 0x02, rep)
        time.sleep(0.3)
        self.assertEqual(self.raw3.conn_count, 0)

    def socks_domain_reply(self, name):
        c = self.conn()
        client = "127.0.0.1:%d" % c.sock.getsockname()[1]
        c.send(b"\x05\x01\x00")
        self.assertEqual(c.read_exact(2), b"\x05\x00")
        c.send(self.socks_req(self.dom(name), self.raw.port))
        try:
            rep = c.read_exact(4)
        except EOFError:
            rep = None
        rows = self.gw.wait_audit(kind="socks5", client=client, timeout=2)
        return rep, rows

    def test_socks_empty_domain_refused_0x02(self):
        """FAILS. docs/protocols.md SOCKS5 reply table: 'invalid host' ->
        0x02 connection not allowed by ruleset (and SOCKS5 refusals are
        audited, as for a bad ATYP: test_dns_socks
        test_socks5_bad_address_type). CONNECT with ATYP 3 and length 0.
        Seen: the gateway closes without any reply and writes no audit
        row."""
        rep, rows = self.socks_domain_reply(b"")
        self.assertIsNotNone(rep, "closed without a SOCKS5 reply")
        self.assertEqual(rep[1], 0x02, rep)
        self.assertTrue(rows, "no audit row")

    def test_socks_overlong_domain_refused_0x02(self):
        """A 255-byte domain (more than a host name's 253): 0x02,
        audited invalid-host."""
        rep, rows = self.socks_domain_reply((b"a" * 63 + b".") * 3 + b"b" * 63)
        self.assertIsNotNone(rep)
        self.assertEqual(rep[1], 0x02, rep)
        self.assertEqual(rows[-1]["reason"], "invalid-host", rows)
        self.gateway_alive()

    def test_socks_pipelined_http_with_other_host(self):
        """docs/protocols.md "First bytes of a tunnel": every request's
        Host must equal the tunnel's name (host-mismatch, 403). Greeting,
        CONNECT allowed.test and a request for Host evil.test in ONE write,
        before any reply: the bytes pipelined behind the SOCKS request must
        be classified like later ones (403), and reach no origin."""
        n0 = self.raw.conn_count
        c = self.conn()
        c.send(b"\x05\x01\x00" +
               self.socks_req(self.dom(b"allowed.test"), self.raw.port) +
               b"GET /pipelined HTTP/1.1\r\nHost: evil.test\r\n\r\n")
        self.assertEqual(c.read_exact(2), b"\x05\x00")
        rep = c.read_exact(10)
        self.assertEqual(rep[1], 0x00, rep)
        body = c.read_to_eof()
        self.assertTrue(body.startswith(b"HTTP/1.1 403"), body[:200])
        time.sleep(0.3)
        self.assertFalse(any(b"pipelined" in r for r in self.raw.received),
                         self.raw.received)
        self.assertEqual(self.raw.conn_count, n0)

    def test_socks_userpass_empty_username(self):
        """FAILS (weak: RFC 1929 draws ULEN as 1..255). docs/protocols.md
        SOCKS5: 'a wrong pair gets the RFC 1929 failure status and the
        connection closes'. Username and password of length 0. Seen: the
        connection is closed with no status byte and no audit row, while
        username "x" with an empty password gets 01 01 and a
        proxy-auth-failed row."""
        c = self.conn()
        client = "127.0.0.1:%d" % c.sock.getsockname()[1]
        c.send(b"\x05\x01\x02")
        self.assertEqual(c.read_exact(2), b"\x05\x02")
        c.send(b"\x01\x00\x00")
        try:
            rep = c.read_exact(2)
        except EOFError:
            rep = None
        rows = self.gw.wait_audit(kind="socks5", client=client, timeout=2)
        self.assertEqual(rep, b"\x01\x01", "no RFC 1929 failure status")
        self.assertTrue(rows, "no audit row")

    def test_socks_half_close_passed_on(self):
        """docs/architecture.md step 8 "Relay": 'An EOF is passed on as a
        half-close (shutdown(SHUT_WR))'; the tunnel ends when both
        directions have ended. Opaque tunnel to a server that answers only
        after the client's EOF: the client sends, shuts down its write
        side, and must still receive the server's answer."""
        c = self.conn()
        c.send(b"\x05\x01\x00" +
               self.socks_req(self.dom(b"opaque.test"), self.half.port))
        self.assertEqual(c.read_exact(2), b"\x05\x00")
        rep = c.read_exact(10)
        self.assertEqual(rep[1], 0x00, rep)
        c.send(b"\x00\x01binary-not-http\n")
        time.sleep(0.2)
        c.sock.shutdown(socket.SHUT_WR)
        got = c.read_to_eof()
        self.assertEqual(got, b"got:18")


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
