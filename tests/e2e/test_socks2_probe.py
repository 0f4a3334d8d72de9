#!/usr/bin/python3
"""
Second probe of the SOCKS5 listener (RFC 1928/1929; SPEC §5 "SOCKS5",
docs/protocols.md "SOCKS5", docs/audit.md), beyond test_socks_probe.py,
test_dns_socks.py and test_spec_4_5_listeners.py. SOCKS5 is spoken by hand;
recording origins on 127.0.0.2 / 127.0.0.3, a scripted resolver counting
the names it is asked. Tests that FAIL on the current binary carry in their
docstring the promise, what was sent and what happened.

Tried and held (kept as tests where no other test covers the promise):
- BIND (0x02), UDP ASSOCIATE (0x03), cmd 0x00 / 0x09: 0x07, closed, one row
  (but see the row findings below).
- ATYP 4 ::127.0.0.2 (IPv4-compatible), 64:ff9b::127.0.0.2 (NAT64),
  64:ff9b:1::127.0.0.2, 2002:7f00:2::1 (6to4), ::1 under cidr ::/0 and
  allow_private 127.0.0.2/32: 0x02 destination-ip-prohibited;
  ::ffff:127.0.0.3 under cidr 0.0.0.0/0: 0x02.
- ATYP 3 numeric names (2130706434, 0x7f.2, 0X7F.0X2, 0177.0.0.02,
  127.0.0.2., [::ffff:127.0.0.2], ::ffff:127.0.0.2) are IP literals:
  decided by the cidr rule, never resolved; 0x7f.3 refused as internal.
- ATYP 3 "allowed.test:PORT", "allowed%2etest", trailing NUL, space, tab,
  ".": 0x02 invalid-host, not resolved; "ALLOWED.test" and "denied.test."
  fold to the rule's name; "allowed_test" is default-deny.
- user/pass: another sandbox's id with this token, token + NUL, id in upper
  case, a source-only sandbox's id with an empty password, 255-byte id and
  password: 01 01 + proxy-auth-failed row; a right pair from a source owned
  by another sandbox is held to its own policy.
- greeting + login + request + a second request + data in one write: all
  answered in order, the second request relayed verbatim as tunnel data
  (not parsed, not resolved); same in a no-auth opaque tunnel; a wrong
  login pipelined with a request: 01 01, the request never decided.
- BND.ADDR is always 0.0.0.0:0 (allowed and refused replies): no leak of the
  origin's or the gateway's address.
- 20 connections reset (SO_LINGER 0) right after greeting + request: the
  gateway stays up.
- 1100 connections from one source that stop after a complete greeting:
  1024 (per_sandbox.max_connections) held, the rest closed at accept with
  one rate-limited row, a new one from that source closed (covered by
  test_fair_source; not kept).
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

from dnswire import A, rr  # noqa: E402
from dnswire import Upstream as _Upstream  # noqa: E402

TOK_A = "tok-alpha-0123456789abcdef"
TOK_B = "tok-bravo-fedcba9876543210"


def dom(name):
    return b"\x03" + bytes([len(name)]) + name


def v4(addr):
    return b"\x01" + socket.inet_aton(addr)


def v6(addr):
    return b"\x04" + socket.inet_pton(socket.AF_INET6, addr)


def req(addr, port, cmd=1, rsv=0, ver=5):
    return bytes([ver, cmd, rsv]) + addr + struct.pack(">H", port)


def auth(user, pw, ver=1):
    return bytes([ver, len(user)]) + user + bytes([len(pw)]) + pw


class Socks2Probe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-socks2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.raw = T.RawServer("127.0.0.2", mode="record")
        cls.addClassCleanup(cls.raw.stop)
        cls.raw3 = T.RawServer("127.0.0.3", mode="record")
        cls.addClassCleanup(cls.raw3.stop)
        cls.echo = T.RawServer("127.0.0.2", mode="echo")
        cls.addClassCleanup(cls.echo.stop)
        p2, p3, pe = cls.raw.port, cls.raw3.port, cls.echo.port
        zone = {n: {A: ([rr(n, A, "127.0.0.2")], [])} for n in (
            "allowed.test", "opaque.test", "alpha.test", "bravo.test",
            "denied.test")}
        zone["three.test"] = {A: ([rr("three.test", A, "127.0.0.3")], [])}
        cls.up = _Upstream(zone, opt_size=1232, ra=False)
        cls.addClassCleanup(cls.up.stop)
        policies = {
            "sandboxes": [
                T.local_sandbox("sp", sid="local", source="127.0.0.1/32"),
                T.token_sandbox("agent-a", TOK_A, "pa"),
                T.token_sandbox("agent-b", TOK_B, "pb"),
            ],
            "policies": [
                {"name": "sp",
                 "allow": [{"host": "allowed.test", "ports": [p2]},
                           {"host": "three.test", "ports": [p3]},
                           {"host": "opaque.test", "ports": [p2, pe],
                            "opaque": True},
                           {"cidr": "127.0.0.2/32", "ports": [p2]},
                           {"cidr": "0.0.0.0/0", "ports": [p3]},
                           {"cidr": "::/0", "ports": [p3]}],
                 "deny": [{"host": "denied.test"}],
                 "allow_private": ["127.0.0.2/32"]},
                {"name": "pa",
                 "allow": [{"host": "alpha.test", "ports": [p2, pe],
                            "opaque": True}],
                 "allow_private": ["127.0.0.2/32"]},
                {"name": "pb",
                 "allow": [{"host": "bravo.test", "ports": [p2, pe],
                            "opaque": True}],
                 "allow_private": ["127.0.0.2/32"]},
            ],
        }
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.up, {"p.yaml": policies}, extra={
            "listen": {"socks5": "127.0.0.1:%d" % cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if os.environ.get("SGPROBE_DUMP"):
            cls.addClassCleanup(lambda: print("\n".join(
                repr({k: r[k] for k in ("kind", "sandbox", "client", "host",
                      "ip", "port", "method", "status", "decision", "rule",
                      "reason") if k in r}) for r in cls.gw.audit_rows())
                + "\n" + cls.gw.log_tail(60), file=sys.stderr))
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("no SOCKS5 listener:\n" + cls.gw.log_tail())

    # ------------------------------------------------------------ helpers

    def conn(self, source=None):
        c = T.Conn(self.sport, source=source, timeout=5)
        self.addCleanup(c.close)
        c.client = "%s:%d" % c.sock.getsockname()
        return c

    def rows(self, c, timeout=2, n=1):
        deadline = time.time() + timeout * T.SLOW
        while True:
            rows = self.gw.audit_rows(kind="socks5", client=c.client)
            if len(rows) >= n or time.time() > deadline:
                return rows
            time.sleep(0.1)

    def read_or_none(self, c, n):
        try:
            return c.read_exact(n)
        except (EOFError, ConnectionResetError, socket.timeout):
            return None

    def noauth(self, c):
        c.send(b"\x05\x01\x00")
        self.assertEqual(c.read_exact(2), b"\x05\x00")

    def exchange(self, request, source=None):
        """greeting (no auth), request; returns (c, reply or None, rows)."""
        c = self.conn(source)
        self.noauth(c)
        c.send(request)
        rep = self.read_or_none(c, 10)
        return c, rep, self.rows(c)

    def alive(self):
        self.assertTrue(self.gw.alive(), "gateway died:\n" + self.gw.log_tail())

    # ------------------------------------------------------------ findings

    def assert_closed_with_row(self, c, what):
        """The gateway closes c; then a deny row for c's client exists."""
        self.assertTrue(c.closed_by_peer(5), "%s: connection left open" % what)
        rows = self.rows(c)
        self.assertTrue(rows, "%s: closed without an audit row" % what)
        self.assertEqual(rows[-1]["decision"], "deny", rows)
        return rows

    def test_reserved_byte_not_zero_is_audited(self):
        """FOUND (fixed). docs/audit.md: "Every decision sandgate makes -- a request
        allowed, a tunnel refused ... -- becomes one row"; other malformed
        SOCKS5 input is refused with a row (a bad greeting, an unknown ATYP:
        bad-request; an empty name: invalid-host). Sent, after 05 01 00 /
        05 00: 05 01 01 03 0c "allowed.test" PORT (RSV = 0x01, RFC 1928:
        X'00'). Seen: no reply, the connection is closed, no audit row:
        a sandbox probing the listener leaves no trace."""
        n0 = self.raw.conn_count
        c = self.conn()
        self.noauth(c)
        c.send(req(dom(b"allowed.test"), self.raw.port, rsv=1))
        self.assert_closed_with_row(c, "RSV 0x01")
        self.assertEqual(self.raw.conn_count, n0)

    def test_request_version_not_5_is_audited(self):
        """FOUND (fixed). As test_reserved_byte_not_zero_is_audited: a request whose
        VER is 4 (04 01 00 03 0c "allowed.test" PORT) after a good SOCKS5
        greeting. Seen: closed, no reply, no audit row (a greeting with
        VER 4 gets 05 FF and a bad-request row)."""
        c = self.conn()
        self.noauth(c)
        c.send(req(dom(b"allowed.test"), self.raw.port, ver=4))
        self.assert_closed_with_row(c, "request VER 4")

    def test_rfc1929_version_not_1_is_audited(self):
        """FOUND (fixed). docs/protocols.md SOCKS5: the username/password 'must be a
        sandbox id and its token ... a wrong pair gets the RFC 1929 failure
        status and the connection closes'; docs/audit.md: every refusal is
        a row (a wrong pair: proxy-auth-failed, rule no-identity, 407).
        Sent: 05 01 02, then the sub-negotiation with VER 0x05 instead of
        0x01 (05 07 "agent-a" LEN TOKEN -- the right pair). Seen: no status
        byte, the connection closed, no audit row: an authentication
        attempt with nothing in the audit trail."""
        for ver in (5, 0):
            with self.subTest(ver=ver):
                c = self.conn()
                c.send(b"\x05\x01\x02")
                self.assertEqual(c.read_exact(2), b"\x05\x02")
                c.send(auth(b"agent-a", TOK_A.encode(), ver=ver))
                rows = self.assert_closed_with_row(c, "RFC 1929 VER %d" % ver)
                self.assertEqual(rows[-1]["reason"], "proxy-auth-failed", rows)

    def test_refusal_rows_name_rule_and_status(self):
        """FOUND (fixed). SPEC §4: "a decision no rule made is named default-deny or
        no-identity"; docs/audit.md columns: `rule` is "the rule that
        decided: ... default-deny, no-identity, ..."; `status`: "SOCKS5 ...
        rows use the HTTP status of the equivalent decision" (the reason
        table gives bad-request 400, method-not-supported 405,
        proxy-auth-failed 407). A wrong user/pass row has them (407,
        no-identity: test_auditx_probe); an "allowed.test:22" name row has
        them (403, default-deny). Sent: a SOCKS4 greeting; 05 01 01 (only
        GSSAPI offered); a request with ATYP 5; BIND (cmd 2) and UDP
        ASSOCIATE (cmd 3). Seen: each row is deny with the right reason
        but rule NULL and status NULL (and method CONNECT for BIND/UDP)."""
        cases = [
            ("socks4 greeting", None,
             b"\x04\x01\x00\x50\x7f\x00\x00\x02u\x00", "bad-request"),
            ("gssapi only", None, b"\x05\x01\x01", "proxy-auth-failed"),
            ("atyp 5", True, b"\x05\x01\x00\x05\x7f\x00\x00\x02\x00\x50",
             "bad-request"),
            ("bind", True, req(dom(b"allowed.test"), self.raw.port, cmd=2),
             "method-not-supported"),
            ("udp associate", True, req(v4("0.0.0.0"), 0, cmd=3),
             "method-not-supported"),
        ]
        for what, greet, data, reason in cases:
            with self.subTest(what):
                c = self.conn()
                if greet:
                    self.noauth(c)
                c.send(data)
                rows = self.assert_closed_with_row(c, what)
                row = rows[-1]
                self.assertEqual(row["reason"], reason, row)
                self.assertIsNotNone(row["rule"], row)
                self.assertIsNotNone(row["status"], row)

    def test_empty_name_row_like_other_invalid_names(self):
        """FOUND (fixed). docs/audit.md "Request rows": "A destination refused as
        invalid (a CONNECT target, a SOCKS5 domain) is logged as the client
        wrote it ... never as null: ... 403 invalid-host with that host,
        port and method -- and, as any request, with the sandbox that sent
        it: its Proxy-Authorization or address is checked first". From
        127.0.0.1 (sandbox `local`), CONNECT ATYP 3 with "allowed.test:22"
        gets such a row (sandbox local, 403, the port). CONNECT ATYP 3
        with length 0, port P: reply 0x02 but the row has sandbox NULL,
        host NULL, port NULL, status NULL: the refusal is not attributed
        to the sandbox that sent it (`audit --sandbox local` misses it)."""
        c = self.conn()
        self.noauth(c)
        c.send(b"\x05\x01\x00\x03\x00" + struct.pack(">H", self.raw.port))
        self.assertEqual(c.read_exact(10), b"\x05\x02\x00\x01" + b"\0" * 6)
        rows = self.assert_closed_with_row(c, "empty name")
        row = rows[-1]
        self.assertEqual(row["reason"], "invalid-host", row)
        # An empty name is written "-" (nothing written), never null.
        self.assertEqual((row["sandbox"], row["status"], row["port"],
                          row["host"]),
                         ("local", 403, self.raw.port, "-"), row)

    def test_bind_row_names_the_source_sandbox(self):
        """FOUND (fixed). docs/audit.md column `sandbox`: "the sandbox id that made
        the request; NULL when nothing identified the client"; SPEC §5
        SOCKS5: "no-auth identifies by source address". From 127.0.0.1
        (sandbox `local`), no auth, BIND (05 02 00 03 0c allowed.test P):
        reply 0x07 (right), but the row's sandbox is NULL (after user/pass
        login the same BIND row names the sandbox): a sandbox's attempts at
        unsupported commands are not found under its name."""
        c = self.conn()
        self.noauth(c)
        c.send(req(dom(b"allowed.test"), self.raw.port, cmd=2))
        self.assertEqual(c.read_exact(10), b"\x05\x07\x00\x01" + b"\0" * 6)
        rows = self.assert_closed_with_row(c, "BIND")
        self.assertEqual(rows[-1]["reason"], "method-not-supported", rows)
        self.assertEqual(rows[-1]["sandbox"], "local", rows)

    # ------------------------------------------------------------ held

    def test_userpass_identity_not_borrowed(self):
        """SPEC §5 SOCKS5 "user/pass by sandbox id/token"; docs/protocols.md:
        "the username/password must be a sandbox id and its token". A
        token proves only its own sandbox: agent-b with agent-a's token,
        agent-a with its token plus a NUL, "AGENT-A", the source-only
        sandbox `local` with an empty password, a 255-byte username with a
        255-byte password: each 01 01, closed, a proxy-auth-failed row
        without a sandbox. agent-a's own pair from 127.0.0.1 (which
        identifies `local`) is agent-a, held to agent-a's policy: its
        host is granted, `local`'s allowed.test and agent-b's bravo.test
        are 0x02 rows of agent-a, and nothing reaches the origin."""
        n0 = self.raw.conn_count
        bad = [(b"agent-b", TOK_A.encode()),
               (b"agent-a", TOK_A.encode() + b"\x00"),
               (b"AGENT-A", TOK_A.encode()),
               (b"local", b""),
               (b"a" * 255, b"p" * 255)]
        for user, pw in bad:
            with self.subTest(user=user[:16]):
                c = self.conn()
                c.send(b"\x05\x01\x02")
                self.assertEqual(c.read_exact(2), b"\x05\x02")
                c.send(auth(user, pw))
                self.assertEqual(c.read_exact(2), b"\x01\x01")
                rows = self.assert_closed_with_row(c, "bad pair")
                self.assertEqual((rows[-1]["sandbox"], rows[-1]["reason"]),
                                 (None, "proxy-auth-failed"), rows)
        for host, port, rep in ((b"alpha.test", self.echo.port, 0),
                                (b"allowed.test", self.raw.port, 2),
                                (b"bravo.test", self.raw.port, 2)):
            with self.subTest(host=host):
                c = self.conn()
                c.send(b"\x05\x01\x02" + auth(b"agent-a", TOK_A.encode()))
                self.assertEqual(c.read_exact(4), b"\x05\x02\x01\x00")
                c.send(req(dom(host), port))
                self.assertEqual(c.read_exact(10), bytes([5, rep, 0, 1]) +
                                 b"\0" * 6)
                if rep:
                    rows = self.assert_closed_with_row(c, host)
                    self.assertEqual(rows[-1]["sandbox"], "agent-a", rows)
        time.sleep(0.3)
        self.assertEqual(self.raw.conn_count, n0)
        self.alive()

    def test_pipelined_login_and_second_request_relayed_as_data(self):
        """RFC 1928 / docs/protocols.md: after the CONNECT reply the
        connection is a tunnel. Greeting (user/pass), login, CONNECT
        alpha.test (opaque, echo origin), a second CONNECT to bravo.test
        and "PING", all in ONE write before any reply: the gateway answers
        05 02 / 01 00 / 05 00 00 01 0.0.0.0:0 (BND.ADDR reveals neither its
        own nor the origin's address), and the second request reaches the
        origin verbatim as tunnel data -- never parsed (bravo.test is not
        even resolved). The same on a no-auth opaque tunnel whose second
        request names a denied host."""
        second = req(dom(b"bravo.test"), self.raw.port) + b"PING"
        c = self.conn()
        c.send(b"\x05\x01\x02" + auth(b"agent-a", TOK_A.encode()) +
               req(dom(b"alpha.test"), self.echo.port) + second)
        self.assertEqual(c.read_exact(14), b"\x05\x02\x01\x00\x05\x00\x00"
                         b"\x01" + b"\0" * 6)
        self.assertEqual(c.read_exact(len(second)), second)
        c.close()
        self.assertNotIn(("bravo.test", A), self.up.count)
        c = self.conn()
        c.send(b"\x05\x01\x00" + req(dom(b"opaque.test"), self.raw.port))
        self.assertEqual(c.read_exact(12), b"\x05\x00\x05\x00\x00\x01" +
                         b"\0" * 6)
        second = req(dom(b"denied.test"), self.raw3.port) + b"\x05\x01\x00"
        n3 = self.raw3.conn_count
        c.send(second)
        deadline = time.time() + 3 * T.SLOW
        while time.time() < deadline and not any(
                second in r for r in self.raw.received):
            time.sleep(0.1)
        self.assertTrue(any(second in r for r in self.raw.received),
                        self.raw.received)
        self.assertEqual(self.raw3.conn_count, n3)

    def test_numeric_names_are_ip_literals(self):
        """SPEC §4: "A host written as an IP in any form (decimal, octal,
        hex, IPv4-mapped IPv6, bracketed IPv6) is an IP and only cidr rules
        can allow it". ATYP 3 names 2130706434, 0x7f.2, 0X7F.0X2,
        0177.0.0.02, 127.0.0.2., [::ffff:127.0.0.2]: granted by the cidr
        rule (row host 127.0.0.2, rule sp:allow[3]), none sent to the
        resolver; 0x7f.3 (under cidr 0.0.0.0/0, not in allow_private):
        0x02 destination-ip-prohibited. Names with a port, a
        percent-escape or a trailing NUL: 0x02 invalid-host, not
        resolved."""
        asked = dict(self.up.count)
        for name in (b"2130706434", b"0x7f.2", b"0X7F.0X2", b"0177.0.0.02",
                     b"127.0.0.2.", b"[::ffff:127.0.0.2]"):
            with self.subTest(name=name):
                c = self.conn()
                self.noauth(c)
                c.send(req(dom(name), self.raw.port))
                self.assertEqual(c.read_exact(10),
                                 b"\x05\x00\x00\x01" + b"\0" * 6)
                c.close()
                rows = self.rows(c)
                self.assertTrue(rows, "no row")
                self.assertEqual((rows[-1]["host"], rows[-1]["rule"]),
                                 ("127.0.0.2", "sp:allow[3]"), rows)
        for name, port, reason in (
                (b"0x7f.3", self.raw3.port, "destination-ip-prohibited"),
                (b"allowed.test:%d" % self.raw.port, self.raw.port,
                 "invalid-host"),
                (b"allowed%2etest", self.raw.port, "invalid-host"),
                (b"allowed.test\x00", self.raw.port, "invalid-host")):
            with self.subTest(name=name):
                c = self.conn()
                self.noauth(c)
                c.send(req(dom(name), port))
                self.assertEqual(c.read_exact(10)[1], 2)
                rows = self.assert_closed_with_row(c, name)
                self.assertEqual(rows[-1]["reason"], reason, rows)
        self.assertEqual(self.up.count, asked)

    def test_embedded_ipv4_forms_not_opened_by_v4_allow_private(self):
        """SPEC §4 step 4 / docs/policy.md allow_private: an internal
        address "and their IPv4-mapped, NAT64 and 6to4 forms" is reachable
        only when an entry covers it. allow_private 127.0.0.2/32 and cidr
        ::/0 for the port: ATYP 4 ::127.0.0.2 (IPv4-compatible),
        64:ff9b::127.0.0.2, 64:ff9b:1::127.0.0.2, 2002:7f00:2::1 and ::1
        are 0x02 destination-ip-prohibited (so the gateway never connects
        to them); ::ffff:127.0.0.2 is 127.0.0.2 (granted by cidr
        127.0.0.2/32)."""
        for addr in ("::127.0.0.2", "64:ff9b::127.0.0.2",
                     "64:ff9b:1::127.0.0.2", "2002:7f00:2::1", "::1"):
            with self.subTest(addr=addr):
                c = self.conn()
                self.noauth(c)
                c.send(req(v6(addr), self.raw3.port))
                self.assertEqual(c.read_exact(10),
                                 b"\x05\x02\x00\x01" + b"\0" * 6)
                rows = self.assert_closed_with_row(c, addr)
                self.assertEqual(rows[-1]["reason"],
                                 "destination-ip-prohibited", rows)
        c = self.conn()
        self.noauth(c)
        c.send(req(v6("::ffff:127.0.0.2"), self.raw.port))
        self.assertEqual(c.read_exact(10), b"\x05\x00\x00\x01" + b"\0" * 6)
        self.alive()

if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
