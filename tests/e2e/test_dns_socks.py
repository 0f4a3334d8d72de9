#!/usr/bin/python3
"""
End-to-end tests of the DNS listener and the SOCKS5 listener on loopback
(SPEC §5 "SOCKS5" and "DNS", issue 6 points 1, 2 and 6; docs/protocols.md):
dig against listen.dns for allowed, denied (with the Extended DNS Error),
other-type, internal-address, unidentified and TCP queries; curl through
--socks5-hostname and --socks5 with and without username/password; raw
SOCKS5 for BIND, UDP ASSOCIATE, bad address types and malformed greetings.
Every case checks its audit row. No root needed.
"""

import os
import re
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

TOKEN = "tok-7d3f0c2a9b51e4c8"
MAX_TTL = 300          # the gateway's cap on answer TTLs
UPSTREAM_TTL = 3600    # what dnsmasq gives
SHORT_TTL = 7          # one CNAME's own TTL


def socks_rep(r):
    """The SOCKS5 reply code curl reports for a refused request, or None."""
    m = re.search(r"Can't complete SOCKS5 connection to .*\((\d+)\)", r.stderr)
    return int(m.group(1)) if m else None


class DnsSocksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.a = T.Origin("origin-a", host="127.0.0.2")
        cls.addClassCleanup(cls.a.stop)
        pa = cls.a.port
        recs = [("allowed.test", "127.0.0.2"), ("tok.test", "127.0.0.2"),
                ("denied.test", "127.0.0.2"), ("unlisted.test", "127.0.0.2"),
                ("internal.test", "127.0.0.3"),
                ("mixed.test", "127.0.0.2"), ("mixed.test", "127.0.0.4"),
                ("meta.test", "169.254.169.254")]
        cls.dns = H.TtlDnsmasq(d, recs, cnames=[("alias.test", "allowed.test"),
                ("alias2.test", "alias.test"), ("badalias.test", "internal.test")],
            local_ttl=UPSTREAM_TTL,
            extra=["--txt-record=allowed.test,v=sandgate-relayed",
                   "--cname=shortalias.test,allowed.test,%d" % SHORT_TTL])
        cls.addClassCleanup(cls.dns.stop)
        policies = {
            "sandboxes": [
                T.local_sandbox("dnsp", sid="local", source="127.0.0.1/32"),
                T.local_sandbox("txtp", sid="txt", source="127.0.0.6/32"),
                T.token_sandbox("agent-1", TOKEN, "tokp"),
            ],
            "policies": [
                {"name": "dnsp",
                 "allow": [
                     {"host": "allowed.test", "ports": [pa]},       # allow[0]
                     {"host": "alias.test", "ports": [pa]},         # allow[1]
                     {"host": "internal.test", "ports": [pa]},      # allow[2]
                     {"host": "meta.test", "ports": [80]},          # allow[3]
                     {"host": "mixed.test", "ports": [pa]},         # allow[4]
                     {"host": "nx.test", "ports": [pa]},            # allow[5]
                     {"cidr": "127.0.0.2/32", "ports": [pa]},       # allow[6]
                     {"host": "alias2.test", "ports": [pa]},        # allow[7]
                     {"host": "badalias.test", "ports": [pa]},      # allow[8]
                     {"host": "shortalias.test", "ports": [pa]},    # allow[9]
                 ],
                 "deny": [{"host": "denied.test"}],
                 "allow_private": ["127.0.0.2/32"]},
                {"name": "txtp",
                 "allow": [{"host": "allowed.test", "ports": [pa]}],
                 "dns_types": ["A", "AAAA", "TXT"],
                 "allow_private": ["127.0.0.2/32"]},
                {"name": "tokp",
                 "allow": [{"host": "tok.test", "ports": [pa]},
                           {"cidr": "127.0.0.2/32", "ports": [pa]}],
                 "allow_private": ["127.0.0.2/32"]},
            ],
        }
        cls.dport = T.free_port(udp_too=True)
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policies}, extra={
            "listen": {"dns": "127.0.0.1:%d" % cls.dport,
                       "socks5": "127.0.0.1:%d" % cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())
        # A bound socket is not a running worker (a slow start, ASan):
        # wait for any DNS answer (a denied name: no test counts those rows).
        deadline = time.time() + 15 * T.SLOW
        while H.dig(["@127.0.0.1", "-p", str(cls.dport), "ready.sgtest.test",
                "A"]).status is None:
            if time.time() > deadline or not cls.gw.proc.alive():
                raise RuntimeError("DNS listener not answering:\n" +
                    cls.gw.log_tail())

    # ------------------------------------------------------------ helpers

    def dig(self, *args):
        return H.dig(["@127.0.0.1", "-p", str(self.dport)] + list(args))

    def audit(self, pred=None, **match):
        rows = self.gw.wait_audit(pred=pred, **match)
        self.assertTrue(rows, "no audit row %r; last rows: %r" % (match,
            [(r["kind"], r["sandbox"], r["host"], r["method"], r["status"],
              r["decision"], r["rule"], r["reason"])
             for r in self.gw.audit_rows()][-20:]))
        return rows[-1]

    def wait_rows(self, n, pred=None, **match):
        """Poll until at least n audit rows match; the rows."""
        deadline = time.time() + 5 * T.SLOW
        while True:
            rows = self.gw.audit_rows(**match)
            rows = [r for r in rows if pred is None or pred(r)]
            if len(rows) >= n or time.time() > deadline:
                return rows
            time.sleep(0.05)

    def assert_row(self, row, **want):
        for k, v in want.items():
            self.assertEqual(row[k], v, "%s: %r" % (k, row))

    def socks_url(self, scheme="socks5h", auth=None):
        cred = "%s:%s@" % auth if auth else ""
        return "%s://%s127.0.0.1:%d" % (scheme, cred, self.sport)

    def curl(self, url, proxy):
        return T.curl(url, proxy=proxy, tmp=self.td.path)

    def raw(self):
        c = T.Conn(self.sport)
        self.addCleanup(c.close)
        return c

    # ------------------------------------------------------------ DNS

    def test_dns_a_allowed(self):
        r = self.dig("allowed.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs(), ["127.0.0.2"], r)
        self.assertIn("ra", r.flags, r)
        self.assertNotIn("aa", r.flags, r)
        self.assertTrue(r.has_opt, r)
        ttl = r.answers[0][1]
        self.assertTrue(0 < ttl <= MAX_TTL, r)      # upstream gave 3600
        row = self.audit(kind="dns", host="allowed.test", method="A",
            decision="allow")
        self.assert_row(row, sandbox="local", ip="127.0.0.2", status=0,
            rule="dnsp:allow[0]", reason=None)
        self.assertTrue(row["client"].startswith("127.0.0.1:"), row)

    def test_dns_aaaa_nodata(self):
        r = self.dig("allowed.test", "AAAA")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.answers, [], r)
        row = self.audit(kind="dns", host="allowed.test", method="AAAA")
        self.assert_row(row, decision="allow", status=0, ip=None)

    def chain(self, r):
        return [(a[0], a[2], a[3]) for a in r.answers]

    def test_dns_cname_chain(self):
        # the CNAME first, then the A record owned by the canonical name
        r = self.dig("alias.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(self.chain(r), [("alias.test.", "CNAME", "allowed.test."),
            ("allowed.test.", "A", "127.0.0.2")], r)
        # upstream gave 3600 to both: one capped TTL for the whole answer
        ttls = set(a[1] for a in r.answers)
        self.assertEqual(len(ttls), 1, r)
        self.assertTrue(0 < ttls.pop() <= MAX_TTL, r)
        self.audit(kind="dns", host="alias.test", method="A", decision="allow",
            ip="127.0.0.2", rule="dnsp:allow[1]")
        # two links, over TCP
        r = self.dig("+tcp", "alias2.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(self.chain(r), [
            ("alias2.test.", "CNAME", "alias.test."),
            ("alias.test.", "CNAME", "allowed.test."),
            ("allowed.test.", "A", "127.0.0.2")], r)
        self.audit(kind="dns", host="alias2.test", method="A",
            decision="allow", ip="127.0.0.2", rule="dnsp:allow[7]")
        # AAAA: the target has none, the chain is still the answer
        r = self.dig("alias.test", "AAAA")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(self.chain(r),
            [("alias.test.", "CNAME", "allowed.test.")], r)

    def test_dns_cname_ttl_bounds_answer(self):
        # a link with a 7 s TTL: no record of the answer outlives it
        r = self.dig("shortalias.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(self.chain(r), [
            ("shortalias.test.", "CNAME", "allowed.test."),
            ("allowed.test.", "A", "127.0.0.2")], r)
        for a in r.answers:
            self.assertTrue(0 < a[1] <= SHORT_TTL, r)

    def test_dns_cname_to_internal_denied(self):
        # the chain ends in an address allow_private does not cover: the
        # whole name is refused, no CNAME leaks out
        r = self.dig("badalias.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.answers, [], r)
        self.assertIsNotNone(r.ede, r)
        self.assertEqual(r.ede[0], 15, r)
        self.assertIn("destination-ip-prohibited", r.ede[2] or "", r)
        row = self.audit(kind="dns", host="badalias.test", method="A",
            decision="deny")
        self.assert_row(row, sandbox="local", status=3,
            reason="destination-ip-prohibited", rule="dnsp:allow[8]", ip=None)

    def test_dns_denied_ede(self):
        r = self.dig("denied.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.answers, [], r)
        self.assertIsNotNone(r.ede, r)
        self.assertEqual(r.ede[0], 15, r)
        self.assertEqual(r.ede[1], "Blocked", r)
        text = r.ede[2] or ""
        self.assertIn("policy dnsp", text, r)
        self.assertIn("policy-deny", text, r)
        self.assertIn("dnsp:deny[0]", text, r)
        row = self.audit(kind="dns", host="denied.test", method="A")
        self.assert_row(row, sandbox="local", decision="deny", status=3,
            rule="dnsp:deny[0]", reason="policy-deny", ip=None)
        # no allow rule at all: the same answer, the default rule
        r = self.dig("unlisted.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.ede and r.ede[0], 15, r)
        self.audit(kind="dns", host="unlisted.test", decision="deny",
            rule="default-deny", reason="policy-deny")

    def test_dns_denials_logged(self):
        """
        A refused query has its log line at info, as every other denial
        does (docs/architecture.md, "Logging"): the line its exchange
        writes with its row. An allowed one has none without serve -d.
        """
        start = len(self.gw.log_text())
        for args, rx in (
                (("denied.test", "A"), r"deny dns sandbox=local client=127\.0\.0"
                 r"\.1:\d+ host=denied\.test port=- ip=- method=A path=- "
                 r"status=3 rule=dnsp:deny\[0\] reason=policy-deny up=- "
                 r"down=- ms=\d+"),
                (("allowed.test", "MX"), r"deny dns sandbox=local client=\S+ "
                 r"host=allowed\.test .*method=MX .*status=5 .*"
                 r"reason=dns-type-refused"),
                (("-b", "127.0.0.5", "allowed.test", "A"), r"deny dns "
                 r"sandbox=- client=127\.0\.0\.5:\d+ host=allowed\.test "
                 r".*status=5 .*reason=no-identity")):
            with self.subTest(args=args):
                self.dig(*args)
                m = self.gw.wait_log(rx, 5, start)
                self.assertIsNotNone(m, self.gw.log_tail())
        # A name whose label holds a space and an equals sign cannot write
        # fields of its own into the line: both bytes stay escaped.
        mark = len(self.gw.log_text())
        self.dig("x\\032reason=allow.test", "A")
        m = self.gw.wait_log(r"deny dns .*host=x\\032reason\\061allow\.test "
                             r".*reason=invalid-host ", 5, mark)
        self.assertIsNotNone(m, self.gw.log_tail())
        self.assertNotIn(" reason=allow.test", self.gw.log_text()[mark:])
        mark = len(self.gw.log_text())
        r = self.dig("allowed.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.audit(kind="dns", host="allowed.test", method="A",
            decision="allow", pred=lambda x: x["id"] > 0)
        time.sleep(0.3 * T.SLOW)
        self.assertNotRegex(self.gw.log_text()[mark:],
            r"allow dns .*host=allowed\.test", "allowed traffic at info")

    def test_dns_denied_without_edns(self):
        r = self.dig("+noedns", "denied.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertFalse(r.has_opt, r)
        self.assertIsNone(r.ede, r)

    def test_dns_other_type_refused(self):
        r = self.dig("allowed.test", "MX")
        self.assertEqual(r.status, "REFUSED", r)
        self.assertEqual(r.answers, [], r)
        self.assertEqual(r.ede and r.ede[0], 18, r)
        row = self.audit(kind="dns", host="allowed.test", method="MX")
        self.assert_row(row, decision="deny", status=5,
            reason="dns-type-refused")
        r = self.dig("allowed.test", "ANY")
        self.assertEqual(r.status, "REFUSED", r)

    def test_dns_listed_type_relayed(self):
        # the txt sandbox lists TXT in dns_types: the upstream's answer is
        # relayed, its TTL capped like every answer's
        r = self.dig("-b", "127.0.0.6", "allowed.test", "TXT")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual([(a[0], a[2], a[3]) for a in r.answers],
            [("allowed.test.", "TXT", '"v=sandgate-relayed"')], r)
        self.assertLessEqual(r.answers[0][1], 300, r)
        self.assertGreater(UPSTREAM_TTL, 300)
        row = self.audit(kind="dns", host="allowed.test", method="TXT",
            sandbox="txt")
        self.assert_row(row, decision="allow", status=0)
        # and the same type from the other sandbox is refused
        r = self.dig("allowed.test", "TXT")
        self.assertEqual(r.status, "REFUSED", r)

    def test_dns_tcp(self):
        r = self.dig("+tcp", "allowed.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs(), ["127.0.0.2"], r)
        r = self.dig("+tcp", "denied.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.ede and r.ede[0], 15, r)
        # two queries on one TCP connection (RFC 7766), by hand
        s = socket.create_connection(("127.0.0.1", self.dport), timeout=5)
        self.addCleanup(s.close)
        q = b""
        for qid, name in ((0x1111, b"allowed.test"), (0x2222, b"denied.test")):
            qname = b"".join(bytes([len(l)]) + l for l in name.split(b".")) + b"\0"
            msg = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname + \
                struct.pack(">HH", 1, 1)
            q += struct.pack(">H", len(msg)) + msg
        s.sendall(q)
        got = {}
        buf = b""
        while len(got) < 2:
            while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
                b = s.recv(4096)
                self.assertTrue(b, "connection closed after %r" % got)
                buf += b
            n = struct.unpack(">H", buf[:2])[0]
            msg, buf = buf[2:2 + n], buf[2 + n:]
            qid, flags, qd, an = struct.unpack(">HHHH", msg[:8])
            got[qid] = (flags & 0xF, an)
        self.assertEqual(got, {0x1111: (0, 1), 0x2222: (3, 0)})

    def test_dns_internal_without_allow_private(self):
        for name in ("internal.test", "meta.test", "mixed.test"):
            with self.subTest(name=name):
                r = self.dig(name, "A")
                self.assertEqual(r.status, "NXDOMAIN", r)
                self.assertEqual(r.answers, [], r)
                self.assertEqual(r.ede and r.ede[0], 15, r)
                self.assertIn("destination-ip-prohibited", r.ede[2] or "", r)
                row = self.audit(kind="dns", host=name, method="A",
                    decision="deny")
                self.assert_row(row, reason="destination-ip-prohibited",
                    status=3)

    def test_dns_no_identity(self):
        r = self.dig("-b", "127.0.0.5", "allowed.test", "A")
        self.assertEqual(r.status, "REFUSED", r)
        self.assertEqual(r.ede and r.ede[0], 18, r)
        row = self.audit(kind="dns", reason="no-identity",
            pred=lambda x: (x["client"] or "").startswith("127.0.0.5:"))
        self.assert_row(row, sandbox=None, decision="deny", status=5)

    def test_dns_ip_literal_name(self):
        r = self.dig("127.0.0.2", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.ede and r.ede[0], 15, r)
        self.audit(kind="dns", host="127.0.0.2", decision="deny",
            reason="invalid-host")

    # ------------------------------------------------------------ SOCKS5 curl

    def test_socks5h_no_auth_allowed(self):
        url = "http://allowed.test:%d/socks-h" % self.a.port
        r = self.curl(url, self.socks_url("socks5h"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["origin"], "origin-a")
        self.assertEqual(doc["host"], "allowed.test:%d" % self.a.port)
        row = self.audit(kind="socks5", host="allowed.test",
            decision="allow", path="/socks-h")
        self.assert_row(row, sandbox="local", port=self.a.port,
            ip="127.0.0.2", rule="dnsp:allow[0]")

    def test_socks5h_no_auth_denied(self):
        before = self.a.conn_count
        r = self.curl("http://denied.test:%d/socks-denied" % self.a.port,
            self.socks_url("socks5h"))
        self.assertEqual(r.rc, 97, r)                   # CURLE_PROXY
        self.assertEqual(socks_rep(r), 2, r)              # reply 0x02
        row = self.audit(kind="socks5", host="denied.test")
        self.assert_row(row, sandbox="local", decision="deny",
            rule="dnsp:deny[0]", reason="policy-deny")
        self.assertEqual(self.a.conn_count, before)

    def test_socks5h_unresolvable(self):
        r = self.curl("http://nx.test:%d/" % self.a.port,
            self.socks_url("socks5h"))
        self.assertEqual(r.rc, 97, r)
        self.assertEqual(socks_rep(r), 4, r)         # reply 0x04
        self.audit(kind="socks5", host="nx.test", reason="dns-error")

    def test_socks5_ip_allowed_by_cidr(self):
        # --socks5: curl resolves itself, the gateway gets an IP address
        url = "http://127.0.0.2:%d/socks-ip" % self.a.port
        r = self.curl(url, self.socks_url("socks5"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/socks-ip")
        row = self.audit(kind="socks5", host="127.0.0.2", decision="allow",
            path="/socks-ip")
        self.assert_row(row, sandbox="local", rule="dnsp:allow[6]")

    def test_socks5_ip_denied(self):
        r = self.curl("http://127.0.0.3:%d/x" % self.a.port,
            self.socks_url("socks5"))
        self.assertEqual(r.rc, 97, r)
        self.assertEqual(socks_rep(r), 2, r)
        self.audit(kind="socks5", host="127.0.0.3", decision="deny",
            reason="policy-deny")

    def test_socks5h_userpass(self):
        url = "http://tok.test:%d/socks-auth" % self.a.port
        r = self.curl(url, self.socks_url("socks5h", ("agent-1", TOKEN)))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/socks-auth")
        row = self.audit(kind="socks5", host="tok.test", decision="allow")
        self.assert_row(row, sandbox="agent-1", rule="tokp:allow[0]")
        # the presented identity decides, not the source address: the
        # token's policy does not allow allowed.test
        before = self.a.conn_count
        r = self.curl("http://allowed.test:%d/as-agent" % self.a.port,
            self.socks_url("socks5h", ("agent-1", TOKEN)))
        self.assertEqual(r.rc, 97, r)
        self.assertEqual(socks_rep(r), 2, r)
        self.audit(kind="socks5", sandbox="agent-1", host="allowed.test",
            decision="deny", rule="default-deny")
        # --socks5 with user/pass to an IP the token's cidr rule allows
        r = self.curl("http://127.0.0.2:%d/auth-ip" % self.a.port,
            self.socks_url("socks5", ("agent-1", TOKEN)))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.audit(kind="socks5", sandbox="agent-1", host="127.0.0.2",
            decision="allow", rule="tokp:allow[1]")
        self.assertFalse(self.a.saw_path("/as-agent"))
        self.assertEqual(self.a.conn_count, before + 1)

    def test_socks5h_wrong_password(self):
        before = self.a.conn_count
        for user, pw in (("agent-1", "wrong-token"), ("nobody", TOKEN)):
            with self.subTest(user=user):
                r = self.curl("http://tok.test:%d/bad-auth" % self.a.port,
                    self.socks_url("socks5h", (user, pw)))
                self.assertEqual(r.rc, 97, r)
                self.assertIn("User was rejected", r.stderr, r)
        rows = self.wait_rows(2, kind="socks5", reason="proxy-auth-failed",
            decision="deny", sandbox=None)
        self.assertGreaterEqual(len(rows), 2, rows)
        self.assertEqual(self.a.conn_count, before)

    # ------------------------------------------------------------ SOCKS5 raw

    def greet(self, c):
        c.send(b"\x05\x01\x00")
        self.assertEqual(c.read_exact(2), b"\x05\x00")

    def client_of(self, c):
        return "127.0.0.1:%d" % c.sock.getsockname()[1]

    def test_socks5_bind_and_udp_associate(self):
        clients = []
        for cmd in (2, 3):
            with self.subTest(cmd=cmd):
                c = self.raw()
                clients.append(self.client_of(c))
                self.greet(c)
                c.send(b"\x05" + bytes([cmd]) + b"\x00\x01\x7f\x00\x00\x02" +
                    struct.pack(">H", self.a.port))
                rep = c.read_exact(10)
                self.assertEqual(rep[:2], b"\x05\x07", rep)
                self.assertTrue(c.closed_by_peer(5), "not closed after 0x07")
        rows = self.wait_rows(2, kind="socks5",
            pred=lambda x: x["client"] in clients)
        self.assertEqual(len(rows), 2,
            "BIND / UDP ASSOCIATE: one audit row each expected, got %r" % rows)
        for row in rows:
            self.assert_row(row, decision="deny",
                reason="method-not-supported")

    def test_socks5_bad_address_type(self):
        c = self.raw()
        client = self.client_of(c)
        self.greet(c)
        c.send(b"\x05\x01\x00\x05\x7f\x00\x00\x02\x00\x50")
        rep = c.read_exact(10)
        self.assertEqual(rep[:2], b"\x05\x08", rep)
        self.assertTrue(c.closed_by_peer(5))
        rows = self.wait_rows(1, kind="socks5",
            pred=lambda x: x["client"] == client)
        self.assertEqual(len(rows), 1, "unknown ATYP not audited: %r" % rows)
        self.assert_row(rows[0], decision="deny", reason="bad-request")

    def test_socks5_malformed_greetings(self):
        cases = [
            ("socks4", b"\x04\x01\x00\x50\x7f\x00\x00\x02user\x00"),
            ("no methods", b"\x05\x00"),
            ("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ]
        n0 = len(self.gw.audit_rows(kind="socks5", reason="bad-request"))
        for name, data in cases:
            with self.subTest(case=name):
                c = self.raw()
                c.send(data)
                self.assertEqual(c.read_exact(2), b"\x05\xff")
                self.assertTrue(c.closed_by_peer(5), "not closed")
        rows = self.wait_rows(n0 + len(cases), kind="socks5",
            reason="bad-request", decision="deny")
        self.assertGreaterEqual(len(rows) - n0, len(cases), rows)
        # only an unsupported method (GSSAPI): "no acceptable methods"
        c = self.raw()
        client = self.client_of(c)
        c.send(b"\x05\x01\x01")
        self.assertEqual(c.read_exact(2), b"\x05\xff")
        self.assertTrue(c.closed_by_peer(5), "not closed")
        rows = self.wait_rows(1, kind="socks5",
            pred=lambda x: x["client"] == client)
        self.assertEqual([r["decision"] for r in rows], ["deny"],
            "no acceptable method: one audit row expected, got %r" % rows)
        # a truncated greeting then silence does not hang the gateway
        c = self.raw()
        c.send(b"\x05\x03\x00")
        time.sleep(0.2)
        r = self.curl("http://allowed.test:%d/after-junk" % self.a.port,
            self.socks_url("socks5h"))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.gw.alive())


if __name__ == "__main__":
    T.main()
