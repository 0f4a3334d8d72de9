#!/usr/bin/python3
"""
Probes of the DNS listener and of mode: ask across a reload (a review of
the listeners; SPEC §4, §5 "DNS", docs/protocols.md "DNS",
docs/approvals.md), kept as regression tests. Each test states the
contract; each failed on the code before its fix:

- a query type listed in dns_types (TXT, HTTPS, MX, ...) is relayed from
  upstream without the address stage: a name whose addresses are internal
  (and not in allow_private) is answered, and the relayed records hand the
  sandbox internal addresses (HTTPS ipv4hint, MX/SRV additional A records
  owned by a name nobody asked about);
- a request held for an operator's answer is let through under the policy
  in force when it was accepted, even when a reload in between added a deny
  rule for its destination (HTTP, CONNECT, SOCKS5 and DNS alike).

Loopback only; dnsmasq is the upstream. No root needed.
"""

import concurrent.futures
import os
import re
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402
from test_approval import admin  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
# An HTTPS record (type 65): priority 1, target ".", ipv4hint=127.0.0.3.
HTTPS_RDATA = "0001" "00" "0004" "0004" "7f000003"


class DnsRelayedTypesProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-lprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        recs = [("allowed.test", ORIGIN_HOST), ("internal.test", "127.0.0.3"),
                ("mx.test", ORIGIN_HOST)]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=60, extra=[
            "--txt-record=internal.test,internal-only",
            "--dns-rr=allowed.test,65,%s" % HTTPS_RDATA,
            "--mx-host=mx.test,internal.test,10",
            "--srv-host=_svc._tcp.allowed.test,internal.test,80"])
        cls.addClassCleanup(cls.dns.stop)
        policies = {
            "sandboxes": [T.local_sandbox("relay", sid="local",
                                          source="127.0.0.1/32")],
            "policies": [{
                "name": "relay",
                "allow": [{"host": "allowed.test"},        # allow[0]
                          {"host": "*.allowed.test"},      # allow[1]
                          {"host": "internal.test"},       # allow[2]
                          {"host": "mx.test"}],            # allow[3]
                "dns_types": ["A", "AAAA", "TXT", "HTTPS", "MX", "SRV"],
                "allow_private": [ORIGIN_HOST + "/32"]}],
        }
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policies}, extra={
            "listen": {"dns": "127.0.0.1:%d" % cls.dport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 15 * T.SLOW
        while cls.dig_raw("ready.sgtest.test", "A").status is None:
            if time.time() > deadline or not cls.gw.proc.alive():
                raise RuntimeError("DNS listener not answering:\n" +
                                   cls.gw.log_tail())

    @classmethod
    def dig_raw(cls, *args):
        return H.dig(["@127.0.0.1", "-p", str(cls.dport)] + list(args))

    def dig(self, *args):
        return self.dig_raw(*args)

    def records(self, r):
        """Every record of every section: (owner, type, data)."""
        out = []
        for line in r.out.splitlines():
            if not line.strip() or line.startswith(";"):
                continue
            f = line.split(None, 4)
            if len(f) == 5 and f[2] == "IN":
                out.append((f[0], f[3], f[4]))
        return out

    def test_sanity_a_query_of_internal_name_denied(self):
        # the contract the relayed types are measured against
        r = self.dig("internal.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.ede and r.ede[0], 15, r)

    def test_relayed_type_of_internal_name_denied(self):
        # docs/protocols.md: "any address the name resolves to (A and AAAA,
        # whatever type was asked) internal and not in allow_private ->
        # NXDOMAIN for the whole name". A TXT query is relayed instead.
        r = self.dig("internal.test", "TXT")
        self.assertEqual(self.records(r), [], r)
        self.assertEqual(r.status, "NXDOMAIN", r)
        row = self.gw.wait_audit(kind="dns", host="internal.test",
                                 method="TXT")
        self.assertTrue(row, self.gw.audit_rows()[-5:])
        self.assertEqual(row[-1]["reason"], "destination-ip-prohibited",
                         row[-1])

    def assert_no_internal(self, r):
        for owner, rtype, data in self.records(r):
            self.assertNotIn("127.0.0.3", data,
                             "internal address handed out: %r" % (r,))

    def test_relayed_https_hint_internal_address(self):
        # SPEC §5: a name whose answers include an internal address that
        # allow_private does not cover is denied as a whole.
        r = self.dig("allowed.test", "HTTPS")
        self.assert_no_internal(r)

    def test_relayed_mx_additional_internal_address(self):
        # an A record for another owner (the exchange) in the additional
        # section, internal: relayed as it came
        r = self.dig("mx.test", "MX")
        self.assert_no_internal(r)

    def test_relayed_srv_additional_internal_address(self):
        r = self.dig("_svc._tcp.allowed.test", "SRV")
        self.assert_no_internal(r)


def ask_policy(port, extra_deny=()):
    return {
        "sandboxes": [{"id": "agent", "policy": "asking",
                       "source": ["127.0.0.1/32"]}],
        "policies": [{
            "name": "asking", "mode": "ask",
            "allow": [{"host": "ok.test", "ports": [port]}],
            "deny": [{"host": "never.test"}] +
                    [{"host": h} for h in extra_deny],
            "allow_private": [ORIGIN_HOST + "/32"]}],
    }


class HeldAcrossReloadProbe(unittest.TestCase):
    """
    docs/approvals.md: "one a deny rule refuses is refused as ever
    (policy-deny). Only default-deny is asked." A request held on a
    question, then a reload that adds a deny rule for its host, then the
    operator's approve: the held request is decided after the reload, and
    must be refused as the new policy says (a new request to the same host
    is). It goes through under the old policy instead.
    """

    NAMES = ["held.test", "sheld.test", "cheld.test", "dheld.test"]

    def setUp(self):
        self.td = T.TempDir("sgtest-lprobe-ask-")
        self.addCleanup(self.td.cleanup)
        d = self.td.path
        self.origin = T.Origin("plain", host=ORIGIN_HOST)
        self.addCleanup(self.origin.stop)
        self.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in self.NAMES])
        self.addCleanup(self.dns.stop)
        self.sock = os.path.join(d, "adm.sock")
        self.sport = T.free_port()
        self.dport = T.free_port(udp_too=True)
        self.gw = T.Gateway(d, self.dns,
            {"p.yaml": ask_policy(self.origin.port)},
            extra={"listen": {"admin": self.sock,
                              "socks5": "127.0.0.1:%d" % self.sport,
                              "dns": "127.0.0.1:%d" % self.dport},
                   "approval": {"timeout": "30s"}})
        self.gw.start()
        self.addCleanup(self.gw.stop)
        self.gw.wait_admin(self.sock)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        self.addCleanup(self.pool.shutdown)

    def url(self, host, path):
        return "http://%s:%d%s" % (host, self.origin.port, path)

    def question(self, host):
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            st, doc = admin(self.sock, "GET", "/v1/approvals")
            for q in (doc or {}).get("approvals", []):
                if q["host"] == host:
                    return q
            time.sleep(0.05)
        self.fail("no question for %s" % host)

    def reload_deny(self, host):
        start = len(self.gw.log_text())
        self.gw.write_policy("p.yaml",
                             ask_policy(self.origin.port, extra_deny=[host]))
        self.gw.reload()
        self.assertIsNotNone(self.gw.wait_log(r"reload: new policy in force",
            timeout=10 * T.SLOW, start=start), self.gw.log_tail())
        # the new policy is in force: a new request to the host is denied
        r = T.curl(self.url(host, "/probe-new"), proxy=self.gw.url,
                   tmp=self.td.path, timeout=10)
        self.assertEqual(r.status, 403, r.stderr)

    def held_then_reload_then_approve(self, host, fut):
        q = self.question(host)
        self.assertFalse(fut.done())
        self.reload_deny(host)
        st, doc = admin(self.sock, "POST", "/v1/approvals/%d" % q["id"],
                        {"answer": "approve"})
        return st, doc

    def test_held_http_after_reload_deny(self):
        f = self.pool.submit(T.curl, self.url("held.test", "/held-http"),
                             proxy=self.gw.url, tmp=self.td.path, timeout=40)
        self.held_then_reload_then_approve("held.test", f)
        r = f.result()
        self.assertFalse(self.origin.saw_path("/held-http"),
                         "held request reached the origin past the new deny")
        self.assertEqual(r.status, 403, r.stderr)

    def test_held_connect_after_reload_deny(self):
        f = self.pool.submit(T.curl, self.url("cheld.test", "/held-connect"),
                             proxy=self.gw.url, args=("-p",),
                             tmp=self.td.path, timeout=40)
        self.held_then_reload_then_approve("cheld.test", f)
        f.result()
        self.assertFalse(self.origin.saw_path("/held-connect"),
                         "held CONNECT reached the origin past the new deny")

    def test_held_socks5_after_reload_deny(self):
        f = self.pool.submit(T.curl, self.url("sheld.test", "/held-socks"),
                             proxy="socks5h://127.0.0.1:%d" % self.sport,
                             tmp=self.td.path, timeout=40)
        self.held_then_reload_then_approve("sheld.test", f)
        f.result()
        self.assertFalse(self.origin.saw_path("/held-socks"),
                         "held SOCKS5 reached the origin past the new deny")

    def test_held_dns_after_reload_deny(self):
        def dig():
            r = subprocess.run([T.DIG, "@127.0.0.1", "-p", str(self.dport),
                                "+tries=1", "+time=35", "dheld.test", "A"],
                               stdout=subprocess.PIPE, text=True,
                               env=T.clean_env(), timeout=60)
            return r.stdout
        f = self.pool.submit(dig)
        self.held_then_reload_then_approve("dheld.test", f)
        out = f.result()
        self.assertEqual(re.findall(r"^\S+\s+\d+\s+IN\s+A\s+(\S+)$", out,
                                    re.M), [], out)
        self.assertNotIn("status: NOERROR", out)


if __name__ == "__main__":
    T.main()
