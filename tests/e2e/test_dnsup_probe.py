#!/usr/bin/python3
"""
Probe of what the DNS listener and the gateway's resolver do with hostile
upstream answers (SPEC §5 "DNS"; docs/protocols.md "DNS", "CNAME chains",
"Truncation"; docs/policy.md "allow_private" and "dns_types"). The attacker
owns an allowed domain's authoritative answers: a scripted upstream
(Upstream, UDP and TCP, hand-built packets, as in test_socks_probe.py)
answers each name as the case needs. Loopback only; no connection is ever
made to an internal address other than 127.0.0.0/8 (169.254.169.254 and the
like appear only as answer data, and the gateway refuses them).

Tried:
- relayed types (TXT, HTTPS): the header and OPT the client gets -- FOUND,
  fixed (the gateway makes the relayed response its own)
  (upstream's AA, RD and question spelling relayed; upstream OPT relayed to
  a client without EDNS, none to a client with EDNS);
- more than 32 addresses with the internal one last (A, or in AAAA) -- FOUND,
  documented (the 33rd is neither checked nor handed out)
  (the extra addresses are dropped unchecked, the name is answered);
- HTTPS ipv4hint/ipv6hint (plain, IPv4-mapped, NAT64) with internal
  addresses, SRV with an additional A 169.254.169.254 for another owner:
  held (NXDOMAIN, destination-ip-prohibited);
- AAAA in NAT64 / 6to4 / site-local / IPv4-compatible forms: held (NXDOMAIN);
- CNAME chains of 8 (answered) and 9 links, a CNAME loop, a chain to
  localhost's address: held (answered / SERVFAIL / SERVFAIL / NXDOMAIN);
- TTL 2^31 and 2^32-1 on A and on a relayed TXT: held (capped to 300);
- TTL 0: the client is told at least 1 s; held;
- a compression-pointer loop in the upstream's answer: held (SERVFAIL,
  gateway alive);
- NXDOMAIN with an SOA whose TTL and MINIMUM are 2^32-1: held (NXDOMAIN);
- rebinding on the proxy path (TTL 0, answers alternating between an
  allowed address and an internal one): held, nothing reached the internal
  address;
- an answer whose question names another name than asked (bailiwick): held
  (c-ares drops it; SERVFAIL, audited error).
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
    A, CNAME, SOA, TXT, AAAA, SRV, OPT, HTTPS, Upstream, build_query,
    enc_name, parse, rr, txt, v4s, v6s)


# ------------------------------------------------------------ DNS packets

def svcb(prio, target, params):
    """params: [(key, value bytes)]"""
    out = struct.pack(">H", prio) + enc_name(target)
    for k, v in params:
        out += struct.pack(">HH", k, len(v)) + v
    return out


# ------------------------------------------------------------ zone

def chain(prefix, links, final_addr, ttl=60):
    """prefix.test -> c1.prefix.test -> ... -> cN.prefix.test A final."""
    names = ["%s.test" % prefix] + ["c%d.%s.test" % (i, prefix)
                                    for i in range(1, links + 1)]
    recs = [rr(names[i], CNAME, names[i + 1], ttl) for i in range(links)]
    recs.append(rr(names[-1], A, final_addr, ttl))
    return recs


def loop_answer(q, qid, qsec, n):
    """An A answer whose owner name is a pointer to itself."""
    hdr = struct.pack(">HHHHHH", qid, 0x8580, 1, 1, 0, 0)
    off = 12 + len(qsec)
    return (hdr + qsec + struct.pack(">H", 0xC000 | off) +
            struct.pack(">HHIH", A, 1, 60, 4) + v4s("127.0.0.2"))


def other_question(q, qid, qsec, n):
    """An answer for another question: other.test A 127.0.0.2."""
    qs = enc_name("other.test") + struct.pack(">HH", A, 1)
    return (struct.pack(">HHHHHH", qid, 0x8580, 1, 1, 0, 0) + qs +
            b"\xc0\x0c" + struct.pack(">HHIH", A, 1, 60, 4) +
            v4s("127.0.0.2"))


def rebind_answer(q, qid, qsec, n):
    """Odd queries 127.0.0.2 (allowed), even ones 127.0.0.3; TTL 0."""
    addr = "127.0.0.2" if n % 2 else "127.0.0.3"
    return (struct.pack(">HHHHHH", qid, 0x8580, 1, 1, 0, 0) + qsec +
            b"\xc0\x0c" + struct.pack(">HHIH", A, 1, 0, 4) + v4s(addr))


MANY = ["127.0.1.%d" % i for i in range(1, 33)]   # 32 allowed addresses

SOA_HUGE = (enc_name("ns.nxsoa.test") + enc_name("h.nxsoa.test") +
            struct.pack(">IIIII", 1, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF,
                        0xFFFFFFFF))


def zone():
    z = {
        # relayed types
        "relay.test": {A: ([rr("relay.test", A, "127.0.0.2")], [], []),
                       TXT: ([rr("relay.test", TXT, txt(b"hello"))], [], []),
                       "always_opt": True},
        "bigttl.test": {A: ([rr("bigttl.test", A, "127.0.0.2",
                                0x80000000)], [], []),
                        TXT: ([rr("bigttl.test", TXT, txt(b"t"),
                                  0xFFFFFFFF)], [], [])},
        "zerottl.test": {A: ([rr("zerottl.test", A, "127.0.0.2", 0)],
                             [], [])},
        "hint4.test": {A: ([rr("hint4.test", A, "127.0.0.2")], [], []),
                       HTTPS: ([rr("hint4.test", HTTPS, svcb(
                           1, ".", [(1, b"\x02h2"),
                                    (4, v4s("127.0.0.2", "169.254.169.254"))]
                       ))], [], [])},
        "hint6.test": {A: ([rr("hint6.test", A, "127.0.0.2")], [], []),
                       HTTPS: ([rr("hint6.test", HTTPS, svcb(
                           1, ".", [(6, v6s("::ffff:169.254.169.254"))]
                       ))], [], [])},
        "hint64.test": {A: ([rr("hint64.test", A, "127.0.0.2")], [], []),
                        HTTPS: ([rr("hint64.test", HTTPS, svcb(
                            1, ".", [(6, v6s("64:ff9b::a9fe:a9fe"))]
                        ))], [], [])},
        "hintok.test": {A: ([rr("hintok.test", A, "127.0.0.2")], [], []),
                        HTTPS: ([rr("hintok.test", HTTPS, svcb(
                            1, ".", [(4, v4s("127.0.0.2"))]))], [], [])},
        "srv.test": {A: ([rr("srv.test", A, "127.0.0.2")], [], []),
                     SRV: ([rr("srv.test", SRV, struct.pack(">HHH", 0, 0, 80)
                               + enc_name("target.elsewhere.test"))], [],
                           [rr("target.elsewhere.test", A,
                               "169.254.169.254")])},
        # AAAA forms of internal addresses
        "nat64.test": {A: ([rr("nat64.test", A, "127.0.0.2")], [], []),
                       AAAA: ([rr("nat64.test", AAAA,
                                  "64:ff9b::a9fe:a9fe")], [], [])},
        "sixtofour.test": {A: ([rr("sixtofour.test", A, "127.0.0.2")], [],
                               []),
                           AAAA: ([rr("sixtofour.test", AAAA,
                                      "2002:a9fe:a9fe::1")], [], [])},
        "sitelocal.test": {A: ([rr("sitelocal.test", A, "127.0.0.2")], [],
                               []),
                           AAAA: ([rr("sitelocal.test", AAAA, "fec0::1")],
                                  [], [])},
        "compat.test": {A: ([rr("compat.test", A, "127.0.0.2")], [], []),
                        AAAA: ([rr("compat.test", AAAA, "::a9fe:a9fe")],
                               [], [])},
        # chains
        "eight.test": {A: (chain("eight", 8, "127.0.0.2"), [], [])},
        "nine.test": {A: (chain("nine", 9, "127.0.0.2"), [], [])},
        "cloop.test": {A: ([rr("cloop.test", CNAME, "b.cloop.test"),
                            rr("b.cloop.test", CNAME, "cloop.test")],
                           [], [])},
        "tolocal.test": {A: (chain("tolocal", 3, "127.0.0.1"), [], [])},
        # more than 32 addresses, the internal one last
        "many.test": {A: ([rr("many.test", A, a) for a in MANY] +
                          [rr("many.test", A, "127.0.0.3")], [], [])},
        "many6.test": {A: ([rr("many6.test", A, a) for a in MANY], [], []),
                       AAAA: ([rr("many6.test", AAAA, "fd00::1")], [], [])},
        # hostile encodings
        "ptrloop.test": {A: loop_answer},
        "nxsoa.test": {A: ([], [rr("nxsoa.test", SOA, SOA_HUGE, 0xFFFFFFFF)],
                           [], 3),
                       AAAA: ([], [rr("nxsoa.test", SOA, SOA_HUGE,
                                      0xFFFFFFFF)], [], 3)},
        "rebind.test": {A: rebind_answer},
        "bailiwick.test": {A: other_question, AAAA: other_question},
    }
    return z


# ------------------------------------------------------------ the tests

class DnsUpstreamProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dnsup-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.raw3 = T.RawServer("127.0.0.3", mode="record")
        cls.addClassCleanup(cls.raw3.stop)
        z = zone()
        cls.up = Upstream(z)
        cls.addClassCleanup(cls.up.stop)
        names = list(z)
        policies = {
            "sandboxes": [T.local_sandbox("dp", sid="local",
                                          source="127.0.0.1/32")],
            "policies": [{
                "name": "dp",
                "allow": [{"host": n} for n in names] +
                         [{"host": n, "ports": [cls.raw3.port]}
                          for n in names],
                "dns_types": ["A", "AAAA", "TXT", "HTTPS", "SRV"],
                "allow_private": ["127.0.0.2/32", "127.0.1.0/24"]}],
        }
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(cls.td.path, cls.up, {"p.yaml": policies}, extra={
            "listen": {"dns": "127.0.0.1:%d" % cls.dport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if os.environ.get("SGPROBE_DUMP"):
            cls.addClassCleanup(lambda: print("\n".join(
                repr({k: r[k] for k in ("kind", "host", "method", "ip",
                      "status", "decision", "rule", "reason") if k in r})
                for r in cls.gw.audit_rows()) + "\n" + cls.gw.log_tail(60),
                file=sys.stderr))
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
                                     timeout=10 * T.SLOW)
        self.addCleanup(s.close)
        s.sendall(struct.pack(">H", len(q)) + q)
        buf = b""
        while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
            b = s.recv(65536)
            if not b:
                break
            buf += b
        return buf[2:]

    def ask(self, name, qtype, qid=0x4243, tcp=False, **kw):
        q = build_query(name, qtype, qid, **kw)
        raw = self.tcp_ask(q) if tcp else self.udp_ask(q, timeout=8)
        return parse(raw)

    def row(self, host, method):
        rows = self.gw.wait_audit(kind="dns", host=host, method=method,
                                  timeout=3)
        self.assertTrue(rows, "no audit row for %s %s" % (host, method))
        return rows[-1]

    def assert_blocked(self, name, qtype, method):
        h, _, recs = self.ask(name, qtype, edns=1232)
        self.assertEqual(h["rcode"], 3, (h, recs))
        self.assertFalse([r for r in recs if r[0] == "an"], recs)
        row = self.row(name, method)
        self.assertEqual((row["decision"], row["reason"]),
                         ("deny", "destination-ip-prohibited"), row)

    # ------------------------------------------------------------ relayed

    def test_relayed_header_follows_the_client_not_the_upstream(self):
        """Found, and fixed (the relayed response was the upstream's).
        docs/protocols.md DNS: 'A response echoes the question as
        it was sent (case included), copies the ID, RD and CD, sets RA,
        never AA.' Query: TXT rElAy.TeSt, RD=0, no EDNS; the upstream
        answers with AA set. Seen: the relayed response carries the
        upstream's header (AA set, RD set) and the question spelled as the
        gateway asked upstream (lower case)."""
        h, qname, recs = self.ask("rElAy.TeSt", TXT, flags=0x0000)
        self.assertEqual(h["rcode"], 0, h)
        self.assertTrue([r for r in recs if r[2] == TXT], recs)
        problems = []
        if h["aa"]:
            problems.append("AA set")
        if h["rd"]:
            problems.append("RD set though the query had RD=0")
        if not h["ra"]:
            problems.append("RA clear")
        if qname != "rElAy.TeSt":
            problems.append("question %r, asked rElAy.TeSt" % qname)
        self.assertEqual(problems, [], h)

    def test_relayed_opt_follows_the_client(self):
        """Found, and fixed (the relayed response was the upstream's).
        docs/protocols.md DNS: 'When the query carried an OPT
        record the response carries one too (payload size 1232, the DO bit
        copied) ... Without EDNS there is no OPT.' The upstream puts an OPT
        (payload 4000) in every answer for relay.test, and none in
        bigttl.test's answers unless asked with EDNS. (1) TXT relay.test
        without EDNS; (2) TXT relay.test with EDNS 1232; (3) TXT
        bigttl.test with EDNS 1232 and DO. Seen: (1) the upstream's OPT is
        relayed; (2) its payload is 4000, not 1232; (3) no OPT at all (the
        gateway asks upstream without EDNS and relays what comes back)."""
        problems = []
        h, _, recs = self.ask("relay.test", TXT, qid=0x11)
        if [r for r in recs if r[2] == OPT]:
            problems.append("no-EDNS query answered with an OPT")
        for name, do in (("relay.test", False), ("bigttl.test", True)):
            q = build_query(name, TXT, 0x12, edns=1232)
            if do:   # DO bit in the OPT TTL field
                q = q[:-6] + struct.pack(">IH", 0x8000, 0)
            raw = self.udp_ask(q)
            h, _, recs = parse(raw)
            self.assertEqual(h["rcode"], 0, recs)
            if not [r for r in recs if r[2] == OPT]:
                problems.append("%s: EDNS query answered without OPT" % name)
                continue
            i = raw.rfind(b"\x00\x00\x29")
            size, = struct.unpack(">H", raw[i + 3:i + 5])
            flags, = struct.unpack(">H", raw[i + 7:i + 9])
            if size != 1232:
                problems.append("%s: OPT payload %d" % (name, size))
            if bool(flags & 0x8000) != do:
                problems.append("%s: DO bit not copied" % name)
        self.assertEqual(problems, [])

    def test_relayed_https_hints_with_internal_addresses(self):
        """docs/protocols.md DNS: a relayed response is answered once
        'every address the response holds' passed, 'HTTPS/SVCB ipv4hint/
        ipv6hint' included. ipv4hint 169.254.169.254, ipv6hint
        ::ffff:169.254.169.254 and 64:ff9b::a9fe:a9fe (NAT64): NXDOMAIN,
        destination-ip-prohibited; a hint of the allowed 127.0.0.2 is
        relayed."""
        self.assert_blocked("hint4.test", HTTPS, "HTTPS")
        self.assert_blocked("hint6.test", HTTPS, "HTTPS")
        self.assert_blocked("hint64.test", HTTPS, "HTTPS")
        h, _, recs = self.ask("hintok.test", HTTPS)
        self.assertEqual(h["rcode"], 0, recs)
        self.assertEqual(len([r for r in recs if r[2] == HTTPS]), 1, recs)

    def test_relayed_srv_additional_for_other_owner(self):
        """docs/protocols.md: 'A and AAAA records in any section and for
        any owner (an MX or SRV answer's additional records)'. SRV srv.test
        with an additional A target.elsewhere.test 169.254.169.254:
        NXDOMAIN, destination-ip-prohibited."""
        self.assert_blocked("srv.test", SRV, "SRV")

    def test_huge_ttls_capped(self):
        """docs/protocols.md DNS: one TTL = min(..., the configured
        maximum) (default 300); relayed 'TTLs capped'. A with TTL 2^31,
        relayed TXT with TTL 2^32-1: both answered with TTL <= 300. TTL 0:
        at least 1 s is remembered, the client gets a small TTL."""
        h, _, recs = self.ask("bigttl.test", A)
        self.assertEqual([(r[3], r[4] <= 300) for r in recs if r[2] == A],
                         [("127.0.0.2", True)], recs)
        h, _, recs = self.ask("bigttl.test", TXT)
        self.assertEqual([r[4] <= 300 for r in recs if r[2] == TXT],
                         [True], recs)
        h, _, recs = self.ask("zerottl.test", A)
        self.assertEqual([(r[3], r[4] <= 1) for r in recs if r[2] == A],
                         [("127.0.0.2", True)], recs)

    # ------------------------------------------------------------ A/AAAA

    def test_aaaa_embedded_internal_forms_deny_name(self):
        """docs/policy.md: internal addresses include 'their IPv4-mapped,
        NAT64 and 6to4 forms', and site-local is internal. AAAA in NAT64
        (64:ff9b::a9fe:a9fe), 6to4 (2002:a9fe:a9fe::1), site-local
        (fec0::1), IPv4-compatible (::a9fe:a9fe) beside an allowed A: the
        A query is NXDOMAIN, destination-ip-prohibited."""
        for n in ("nat64.test", "sixtofour.test", "sitelocal.test",
                  "compat.test"):
            with self.subTest(name=n):
                self.assert_blocked(n, A, "A")

    def test_cname_chain_limits(self):
        """docs/protocols.md "CNAME chains": 'A chain is at most 8 links;
        a longer one, or one that comes back to a name it already passed
        ... fails that answer (SERVFAIL when both families fail'. 8 links:
        answered (chain + address); 9 links and a loop: SERVFAIL; a chain
        ending in 127.0.0.1 (not in allow_private): NXDOMAIN."""
        h, _, recs = self.ask("eight.test", A, tcp=True)
        self.assertEqual(h["rcode"], 0, recs)
        self.assertEqual(len([r for r in recs if r[2] == CNAME]), 8, recs)
        self.assertEqual([r[3] for r in recs if r[2] == A], ["127.0.0.2"])
        h, _, recs = self.ask("nine.test", A, tcp=True)
        self.assertEqual(h["rcode"], 2, recs)
        h, _, recs = self.ask("cloop.test", A)
        self.assertEqual(h["rcode"], 2, recs)
        self.assert_blocked("tolocal.test", A, "A")

    def test_more_than_32_addresses_internal_last(self):
        """Found, and documented rather than changed (docs/protocols.md
        DNS): a name's first 32 addresses are kept (IPv4 first), the rest
        are neither checked, nor handed out, nor connected to. many.test:
        32 A records in allow_private 127.0.1.0/24, then A 127.0.0.3
        (internal, not allowed); many6.test: the same 32, and AAAA fd00::1.
        Both are answered with the 32 allowed addresses; the 33rd, never
        checked, never reaches the sandbox (the promise that matters: no
        unchecked address is handed out)."""
        for n, bad in (("many.test", "127.0.0.3"), ("many6.test", "fd00::1")):
            h, _, recs = self.ask(n, A, tcp=True)
            self.assertEqual(h["rcode"], 0, (n, recs))
            texts = repr(recs)
            self.assertNotIn(bad, texts, n)
            self.assertEqual(len([r for r in recs if r[2] == A]), 32, n)
            self.assertEqual(self.row(n, "A")["decision"], "allow")

    def test_pointer_loop_and_huge_soa(self):
        """docs/protocols.md: the gateway reads each answer with its own
        parser; a response that does not parse is a failure (SERVFAIL).
        An A answer whose owner is a compression pointer to itself:
        SERVFAIL, the gateway lives. NXDOMAIN with an SOA of TTL/MINIMUM
        2^32-1: NXDOMAIN."""
        h, _, recs = self.ask("ptrloop.test", A)
        self.assertEqual(h["rcode"], 2, recs)
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
        h, _, recs = self.ask("nxsoa.test", A)
        self.assertEqual(h["rcode"], 3, recs)

    def test_answer_for_another_question_not_used(self):
        """docs/protocols.md DNS: 'upstream failure / upstream timeout:
        SERVFAIL, error, dns-error / upstream-timeout'. The upstream
        answers bailiwick.test's A and AAAA queries with a response whose
        question is other.test (A 127.0.0.2): not taken as the answer;
        SERVFAIL, audited error."""
        h, _, recs = self.ask("bailiwick.test", A, qid=0x77)
        self.assertEqual(h["rcode"], 2, recs)
        self.assertFalse([r for r in recs if r[2] == A], recs)
        row = self.row("bailiwick.test", "A")
        self.assertEqual(row["decision"], "error", row)
        self.assertIn(row["reason"], ("upstream-timeout", "dns-error"), row)

    def test_rebinding_between_check_and_connect(self):
        """SPEC §4 step 4 / docs/policy.md: an internal address outside
        allow_private is never reached. rebind.test answers 127.0.0.2
        (allowed) and 127.0.0.3 (not) in turn, TTL 0. CONNECT
        rebind.test:<port of a listener on 127.0.0.3>, three times over
        more than the 1 s cache floor: nothing reaches 127.0.0.3."""
        for i in range(3):
            try:
                c, resp = T.open_tunnel(self.gw.port, "rebind.test:%d" %
                                        self.raw3.port, timeout=8)
                c.close()
            except Exception:
                pass
            time.sleep(1.2)
        time.sleep(0.3)
        self.assertEqual(self.raw3.conn_count, 0)


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
