#!/usr/bin/python3
"""
End-to-end test of mode: report on the transparent and DNS listeners
(issue 16 point 3; docs/policy.md "What report mode lets pass"): a sandbox
namespace whose only way out is the gateway (test_transparent.py's
topology), a policy in report mode with no allow rule. A name the policy
would deny is answered by the DNS listener and fetched over HTTP and TLS
(passthrough), a server-speaks-first protocol passes after the sniff
timeout -- all audited with decision report. What report mode never
relaxes stays refused: a name whose answers are internal (outside
allow_private), and an allowed-looking SNI aimed at an address the DNS
listener never handed out for it. Needs root; exits 77 otherwise.
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402
import test_transparent as TT  # noqa: E402


class ReportTransparentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d = TT.class_topology(cls, "sgt-report-")
        topo = cls.topo
        n = topo.net_ip
        cls.main_ip, cls.other_ip, cls.banner_ip = n[2], n[3], n[4]
        cls.testca, crt, key = H.make_ca_and_leaf(d, ["learn.test"])
        spec = [
            {"id": "http-main", "kind": "http", "host": n[2], "port": 80},
            {"id": "https-main", "kind": "https", "host": n[2], "port": 443,
             "cert": crt, "key": key},
            {"id": "https-other", "kind": "https", "host": n[3], "port": 443,
             "cert": crt, "key": key},
            {"id": "banner", "kind": "banner", "host": n[4], "port": 2222,
             "banner": "SSH-2.0-report-origin\r\n"},
        ]
        cls.origins, cls.status_path = H.start_origins(d, topo.net,
            TT.ORIGINS, spec, "origins", cls.addClassCleanup)
        recs = [("learn.test", n[2]), ("meta.test", "127.0.0.9"),
                ("banner.test", n[4])]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)
        cls.tport = TT.TransparentTest.free_gw_port.__func__(cls)
        cls.dport = TT.TransparentTest.free_gw_port.__func__(cls, udp=True,
            avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)
        policy = {
            "sandboxes": [{"id": "learner", "policy": "learn",
                           "source": [topo.sb_ip + "/32"]}],
            "policies": [{"name": "learn", "mode": "report", "allow": [],
                          "allow_private": ["198.19.0.0/16"]}],
        }
        cls.gw = T.Gateway(d, cls.dns, {"learn.yaml": policy}, extra={
            "listen": {"transparent": "%s:%d" % (topo.gw_ip, cls.tport),
                       "dns": "%s:%d" % (topo.gw_ip, cls.dport)},
            "upstream": {"ca_bundle": cls.testca},
        })
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp(topo.gw_ip, cls.tport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("transparent listener not up:\n" +
                cls.gw.log_tail())

    def sb_curl(self, url, args=()):
        return H.curl(url, prefix=self.nsx, args=list(args), tmp=self.td.path,
            timeout=15)

    def audit(self, **match):
        rows = self.gw.wait_audit(**match)
        self.assertTrue(rows, "no audit row %r; rows: %r" % (match,
            [(r["kind"], r["host"], r["ip"], r["port"], r["decision"],
              r["reason"]) for r in self.gw.audit_rows()][-30:]))
        return rows[-1]

    def test_reported_name_passes(self):
        q = H.dig(["learn.test", "A"], prefix=self.nsx)
        self.assertEqual(q.status, "NOERROR", q)
        self.assertEqual(q.addrs(), [self.main_ip], q)
        row = self.audit(kind="dns", host="learn.test")
        self.assertEqual((row["decision"], row["rule"], row["reason"]),
            ("report", "default-deny", "policy-deny"))
        r = self.sb_curl("http://learn.test/plain")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/plain")
        row = self.audit(kind="transparent", host="learn.test", port=80)
        self.assertEqual((row["decision"], row["reason"]),
            ("report", "policy-deny"))
        r = self.sb_curl("https://learn.test/tls", ["--cacert", self.testca])
        self.assertEqual(r.status, 200, r)
        row = self.audit(kind="transparent", host="learn.test", port=443)
        self.assertEqual((row["decision"], row["ip"]),
            ("report", self.main_ip))

    def test_server_speaks_first_passes(self):
        q = H.dig(["banner.test", "A"], prefix=self.nsx)
        self.assertEqual(q.status, "NOERROR", q)
        out = TT.run(self.nsx + [TT.PY, "-c", TT.RAW_CLIENT, self.banner_ip,
            "2222", "", str(8 * T.SLOW)], timeout=40)
        self.assertIn("SSH-2.0-report-origin", out.stdout.decode(), out)
        row = self.audit(kind="transparent", port=2222, decision="report")
        self.assertEqual(row["reason"], "policy-deny")

    def test_internal_answer_still_denied(self):
        q = H.dig(["meta.test", "A"], prefix=self.nsx)
        self.assertEqual(q.status, "NXDOMAIN", q)
        self.assertEqual(q.answers, [], q)
        row = self.audit(kind="dns", host="meta.test")
        self.assertEqual((row["decision"], row["reason"]),
            ("deny", "destination-ip-prohibited"))

    def test_sni_to_address_not_handed_out_still_denied(self):
        self.assertEqual(H.dig(["learn.test", "A"], prefix=self.nsx).status,
            "NOERROR")
        r = self.sb_curl("https://learn.test/sni-attack",
            ["--cacert", self.testca,
             "--resolve", "learn.test:443:" + self.other_ip])
        self.assertNotEqual(r.rc, 0, r)
        row = self.audit(kind="transparent", host="learn.test", port=443,
            decision="deny")
        self.assertEqual(row["reason"], "destination-ip-prohibited")


def main():
    TT.run_main()


if __name__ == "__main__":
    main()
