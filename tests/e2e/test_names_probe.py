#!/usr/bin/python3
"""
Probes of how the gateway reads host names and address literals (SPEC §4
"Names are compared case-insensitively after removing one trailing dot; IDNs
as A-labels. A host written as an IP in any form ... is an IP"; docs/policy.md
"Host names are compared case-insensitively after removing one trailing dot;
internationalised names are converted to A-labels").

IdnFoldingProbe: a deny rule on a name inside an allowed wildcard zone,
reached over SOCKS5 (domain address type) with a Unicode spelling of that
same name that IDNA folds onto it: a capital non-ASCII letter, fullwidth
letters, a decomposed umlaut. The gateway used to punycode the code points
as they came (no case folding above ASCII, no width mapping, no NFC), so
the spelling became another, allowed A-label and the tunnel opened; names
now go through UTS #46 (libidn2), as curl and browsers map them. The same
mapping on the policy side: a rule written with a capital Unicode letter
names the A-label clients send.

AddressFormsProbe (passes): short and odd IPv4 spellings of an internal
address no allow_private entry covers, through CONNECT and absolute-form,
and names whose A answer is allowed while the AAAA answer is internal, on
HTTP, SOCKS5 and DNS.

Loopback only; the zones' answers are 127.0.0.2 (the origin) and 127.0.0.3.
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
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402

ORIGIN = "127.0.0.2"   # the allowed zones' address, covered by allow_private
OTHER = "127.0.0.3"    # internal, covered by nothing


def a_label(ulabel):
    """RFC 3492 of the code points as given (what the gateway computed
    before names were mapped: the Host a granted tunnel would carry)."""
    return "xn--" + ulabel.encode("punycode").decode().lower()


def dns_query(name, qtype, qid=0x4242):
    q = b"".join(bytes([len(l)]) + l for l in name.encode().split(b".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + \
        struct.pack(">HH", qtype, 1)


class _Base(unittest.TestCase):
    """A gateway with HTTP, SOCKS5 and DNS listeners; dnsmasq answers every
    name under wild.test and idn.test with ORIGIN (a wildcard zone, as a CDN
    has), plus the records a class lists."""

    RECORDS = []

    @classmethod
    def policy(cls, po, pb):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-names-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = T.Origin("names-origin", host=ORIGIN)
        cls.addClassCleanup(cls.origin.stop)
        cls.other = T.RawServer(host=OTHER)
        cls.addClassCleanup(cls.other.stop)
        cls.dns = H.TtlDnsmasq(cls.td.path, cls.RECORDS, local_ttl=60,
            extra=["--address=/wild.test/" + ORIGIN,
                   "--address=/idn.test/" + ORIGIN])
        cls.addClassCleanup(cls.dns.stop)
        cls.sport = T.free_port()
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(cls.td.path, cls.dns,
            {"names.yaml": cls.policy(cls.origin.port, cls.other.port)},
            extra={"listen": {"socks5": "127.0.0.1:%d" % cls.sport,
                              "dns": "127.0.0.1:%d" % cls.dport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())
        deadline = time.time() + 15 * T.SLOW
        while cls.udp(dns_query("ready.sgtest.test", 1)) is None:
            if time.time() > deadline or not cls.gw.alive():
                raise RuntimeError("DNS listener not answering:\n" +
                                   cls.gw.log_tail())

    @classmethod
    def udp(cls, msg):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2 * T.SLOW)
        try:
            s.sendto(msg, ("127.0.0.1", cls.dport))
            return s.recv(4096)
        except socket.timeout:
            return None
        finally:
            s.close()

    def socks(self, name, port):
        """SOCKS5 no-auth CONNECT to a domain (bytes); (reply, socket)."""
        s = socket.create_connection(("127.0.0.1", self.sport),
                                     timeout=10 * T.SLOW)
        self.addCleanup(s.close)
        s.sendall(b"\x05\x01\x00")
        self.assertEqual(s.recv(2), b"\x05\x00")
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
                  struct.pack(">H", port))
        rep = b""
        try:
            while len(rep) < 10:
                b = s.recv(64)
                if not b:
                    break
                rep += b
        except ConnectionResetError:
            pass
        return rep, s

    def socks_get(self, name, host_hdr, tag):
        """A SOCKS5 tunnel to name and, when granted, one plain HTTP request
        in it with Host host_hdr. (reply code, what came back, the requests
        the origin saw with tag in the path)."""
        rep, s = self.socks(name, self.origin.port)
        got = b""
        if rep[1:2] == b"\x00":
            s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nConnection: close"
                       "\r\n\r\n" % (tag, host_hdr)).encode())
            try:
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    got += b
            except OSError:
                pass
        time.sleep(0.1)
        seen = [(r["host"], r["path"]) for r in self.origin.requests
                if tag in r["path"]]
        return rep[1:2], got, seen


class IdnFoldingProbe(_Base):
    """Policy: *.wild.test and *.idn.test allowed; evil.wild.test and
    böse.idn.test (A-label xn--bse-sna.idn.test) denied."""

    @classmethod
    def policy(cls, po, pb):
        return {"sandboxes": [T.local_sandbox("names")],
                "policies": [{
                    "name": "names",
                    "allow": [{"host": "*.wild.test", "ports": [po]},
                              {"host": "*.idn.test", "ports": [po]}],
                    "deny": [{"host": "evil.wild.test"},
                             {"host": "böse.idn.test"},
                             {"host": "BÖSE2.idn.test"}],
                    "allow_private": [ORIGIN + "/32"]}]}

    def assert_denied(self, spelling, note):
        name = spelling.encode("utf-8")
        tag = "idn-%d-%d" % (os.getpid(), int(time.time() * 1e6) % 10**9)
        labels = spelling.split(".")
        host = ".".join(a_label(l) if any(ord(c) > 127 for c in l) else l
                        for l in labels)
        code, got, seen = self.socks_get(name, host, tag)
        rows = [(r["host"], r["decision"], r["rule"], r["reason"])
                for r in self.gw.audit_rows(kind="socks5")][-2:]
        self.assertEqual(code, b"\x02",
            "SOCKS5 CONNECT to %r (%s) was answered %r, not 0x02; the tunnel "
            "then carried GET /%s with Host %s to the origin, which saw %r; "
            "audit rows %r; first bytes back %r" % (
                spelling, note, code, tag, host, seen, rows, got[:60]))
        self.assertEqual(seen, [])

    def test_control_ascii_spellings_denied(self):
        """The deny rules hold for ASCII case, a trailing dot, a fullwidth
        full stop, the A-label itself and the precomposed U-label."""
        for spelling in ("EVIL.Wild.Test.", "evil\uff0ewild.test",
                         "Böse.idn.test", "XN--BSE-SNA.idn.test",
                         "böse.idn.test"):
            with self.subTest(spelling=spelling):
                self.assert_denied(spelling, "control")

    def test_socks5_non_ascii_capital_is_the_denied_name(self):
        """SOCKS5 domain "bÖse.idn.test" (U+00D6 capital O with diaeresis):
        compared case-insensitively it is the denied böse.idn.test (UTS #46
        maps Ö to ö; IDNA2008 refuses the capital outright, so no reading
        allows it). "Böse.idn.test" (capital ASCII B) is denied; this one
        was granted 0x00 and the gateway resolved and connected to
        xn--bse-4ja.idn.test, the punycode of the capital as it came
        (policy_name_canon lower-cased ASCII only)."""
        self.assert_denied("bÖse.idn.test", "capital non-ASCII letter")

    def test_socks5_fullwidth_letters_are_the_denied_name(self):
        """SOCKS5 domain "ｅｖｉｌ.wild.test" (U+FF45 ...): UTS #46 maps
        fullwidth letters to ASCII, so the name is evil.wild.test, which a
        deny rule names (IDNA2008 disallows them: invalid either way). The
        gateway mapped the fullwidth full stop but not the letters: it
        decided and resolved xn--qi7ciaj2b.wild.test, allowed by
        *.wild.test, and granted the tunnel."""
        self.assert_denied("ｅｖｉｌ.wild.test", "fullwidth letters")

    def test_socks5_decomposed_umlaut_is_the_denied_name(self):
        """SOCKS5 domain "bo\\u0308se.idn.test" (o + U+0308 combining
        diaeresis, NFD): IDNA (RFC 5891 §5.2, UTS #46) takes names in NFC,
        i.e. böse.idn.test, denied. The gateway punycoded the decomposed
        code points to xn--bose-wwc.idn.test, allowed by *.idn.test, and
        granted the tunnel."""
        self.assert_denied("bo\u0308se.idn.test", "decomposed (NFD) umlaut")

    def test_socks5_fullwidth_digits_are_an_address(self):
        """SOCKS5 domain "１２７.０.０.３": UTS #46 maps fullwidth digits to
        digits, so it is the address 127.0.0.3, internal and covered by no
        allow_private entry; a name ending in a number is no name (SPEC
        §4: an IP in any form is an IP). Refused, never a tunnel."""
        rep, _ = self.socks("１２７.０.０.３".encode(), self.other.port)
        self.assertNotEqual(rep[1:2], b"\x00", rep)
        time.sleep(0.2)
        self.assertEqual(self.other.conns, [])
        rows = [r for r in self.gw.audit_rows(kind="socks5")
                if r["port"] == self.other.port]
        self.assertEqual([(r["decision"], r["reason"]) for r in rows][-1:],
                         [("deny", "invalid-host")], rows)

    def test_rule_with_a_capital_unicode_letter_names_the_a_label(self):
        """A deny rule written "BÖSE2.idn.test" is the name every client
        sends as xn--bse2-5qa.idn.test (curl, browsers: UTS #46 folds the
        capital). It was punycoded as written (xn--bse2-tmb...), matched
        nothing a client sends, and *.idn.test let the request through."""
        tag = "cap-%d" % os.getpid()
        r = T.raw_request(self.gw.port,
            "GET http://xn--bse2-5qa.idn.test:%d/%s HTTP/1.1\r\nHost: "
            "xn--bse2-5qa.idn.test:%d\r\nConnection: close\r\n\r\n" % (
                self.origin.port, tag, self.origin.port))
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        self.assertEqual([q for q in self.origin.requests
                          if tag in q["path"]], [])


class AddressFormsProbe(_Base):
    """Policy: cidr 0.0.0.0/0 and *.dual.test allowed; allow_private covers
    ORIGIN only. dualN.dual.test have an A answer ORIGIN (allowed) and an
    internal AAAA answer."""

    DUAL_V6 = ["::1", "::ffff:127.0.0.3", "fe80::1", "fc00::1"]
    RECORDS = [("dual%d.dual.test" % i, ORIGIN) for i in range(len(DUAL_V6))] + \
        [("dual%d.dual.test" % i, v6) for i, v6 in enumerate(DUAL_V6)]

    @classmethod
    def policy(cls, po, pb):
        return {"sandboxes": [T.local_sandbox("forms")],
                "policies": [{
                    "name": "forms",
                    "allow": [{"cidr": "0.0.0.0/0", "ports": [po, pb]},
                              {"host": "*.dual.test", "ports": [po, pb]}],
                    "allow_private": [ORIGIN + "/32"]}]}

    # All of these are 127.0.0.3 (WHATWG / inet_aton readings).
    FORMS = ["127.3", "0x7f.3", "0177.3", "127.0.3", "127.0.0.3.",
             "017700000003", "0x7f.0x00.0x00.0x03", "127.0.0.03",
             "127.000.000.003"]

    def test_short_ipv4_forms_of_internal_address_refused(self):
        """SPEC §4: an IP in any form is an IP; an internal address is
        reachable only where allow_private covers it (a cidr rule alone
        never opens it). Each form, as CONNECT target and absolute-form
        host, is 403 and nothing reaches OTHER."""
        before = self.other.conn_count
        pb = self.other.port
        for form in self.FORMS:
            with self.subTest(form=form, via="CONNECT"):
                c, r = T.open_tunnel(self.gw.port, "%s:%d" % (form, pb))
                c.close()
                self.assertEqual(r.status, 403, r)
            with self.subTest(form=form, via="absolute-form"):
                r = T.raw_request(self.gw.port,
                    "GET http://%s:%d/f HTTP/1.1\r\nHost: %s:%d\r\n"
                    "Connection: close\r\n\r\n" % (form, pb, form, pb))
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 403, r)
        self.assertEqual(self.other.conn_count, before)

    def test_internal_aaaa_beside_allowed_a_denies_name(self):
        """SPEC §4 step 4 / §5 DNS: any internal answer not covered denies
        the name, "even when other answers are public", and the DNS listener
        checks A and AAAA whatever type was asked. Each dualN has A ORIGIN
        (covered) and an uncovered internal AAAA: HTTP 403, SOCKS5 0x02,
        DNS A NXDOMAIN; the origin sees nothing."""
        for i, v6 in enumerate(self.DUAL_V6):
            name = "dual%d.dual.test" % i
            tag = "dual-%d-%d" % (os.getpid(), i)
            with self.subTest(aaaa=v6):
                r = T.raw_request(self.gw.port,
                    "GET http://%s:%d/%s HTTP/1.1\r\nHost: %s:%d\r\n"
                    "Connection: close\r\n\r\n" % (
                        name, self.origin.port, tag, name, self.origin.port))
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "destination-ip-prohibited", r)
                code, _, seen = self.socks_get(name.encode(), name, tag + "s")
                self.assertEqual(code, b"\x02")
                reply = self.udp(dns_query(name, 1))
                self.assertIsNotNone(reply)
                self.assertEqual(reply[3] & 0xF, 3, reply)   # NXDOMAIN
                self.assertEqual(struct.unpack(">H", reply[6:8])[0], 0)
                self.assertFalse(self.origin.saw_path(tag))


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
