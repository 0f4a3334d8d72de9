#!/usr/bin/python3
"""
End-to-end test of mode: ask on the transparent listener (docs/approvals.md;
test_transparent.py's topology: a sandbox namespace whose only way out is
the gateway). A name no rule allows is held twice -- its DNS query, then the
redirected connection named by its Host or SNI -- and each goes on when
approved; a held TLS connection denied is cut with approval-denied; one
nobody answers is cut with approval-timeout. Needs root; exits 77 otherwise.
"""

import json
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402
import test_transparent as TT  # noqa: E402
import concurrent.futures  # noqa: E402


def admin(sock, method, path, body=None):
    data = b"" if body is None else json.dumps(body).encode()
    st, _, rest = T.unix_http(sock, ("%s %s HTTP/1.1\r\nHost: sandgate\r\n"
        "Connection: close\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (method, path, len(data))).encode()
        + data)
    return st, (json.loads(rest) if rest.strip() else None)


class ApprovalTransparentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d = TT.class_topology(cls, "sgt-ask-")
        topo = cls.topo
        n = topo.net_ip
        cls.main_ip = n[2]
        cls.testca, crt, key = H.make_ca_and_leaf(d, ["ask.test",
                                                      "no.test", "late.test"])
        spec = [
            {"id": "http-main", "kind": "http", "host": n[2], "port": 80},
            {"id": "https-main", "kind": "https", "host": n[2], "port": 443,
             "cert": crt, "key": key},
        ]
        cls.origins, cls.status_path = H.start_origins(d, topo.net,
            TT.ORIGINS, spec, "origins", cls.addClassCleanup)
        recs = [("ask.test", n[2]), ("no.test", n[2]), ("late.test", n[2])]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)
        cls.tport = TT.TransparentTest.free_gw_port.__func__(cls)
        cls.dport = TT.TransparentTest.free_gw_port.__func__(cls, udp=True,
            avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)
        policy = {
            "sandboxes": [{"id": "asker", "policy": "ask",
                           "source": [topo.sb_ip + "/32"]}],
            "policies": [{"name": "ask", "mode": "ask", "allow": [],
                          "allow_private": ["198.19.0.0/16"]}],
        }
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"ask.yaml": policy}, extra={
            "listen": {"transparent": "%s:%d" % (topo.gw_ip, cls.tport),
                       "dns": "%s:%d" % (topo.gw_ip, cls.dport),
                       "admin": cls.sock},
            "upstream": {"ca_bundle": cls.testca},
            "approval": {"timeout": "4s"},
        })
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp(topo.gw_ip, cls.tport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("transparent listener not up:\n" +
                cls.gw.log_tail())
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        cls.addClassCleanup(cls.pool.shutdown)

    def question(self, host, port, timeout=10):
        deadline = time.time() + timeout * T.SLOW
        while time.time() < deadline:
            st, doc = admin(self.sock, "GET", "/v1/approvals")
            for q in doc["approvals"]:
                if q["host"] == host and q["port"] == port:
                    return q
            time.sleep(0.05)
        self.fail("no question for %s:%d" % (host, port))

    def answer(self, q, ans):
        st, doc = admin(self.sock, "POST", "/v1/approvals/%d" % q["id"],
                        {"answer": ans})
        self.assertEqual(st, 200, doc)

    def resolve(self, name):
        f = self.pool.submit(H.dig, [name, "A"], prefix=self.nsx)
        self.answer(self.question(name, 0), "approve")
        r = f.result()
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs(), [self.main_ip])

    def curl(self, url, args=()):
        # The name resolved (and approved) once: curl asks no DNS again.
        host = url.split("/")[2]
        port = 443 if url.startswith("https") else 80
        args = ["--resolve", "%s:%d:%s" % (host, port, self.main_ip)] + \
            list(args)
        return self.pool.submit(H.curl, url, prefix=self.nsx, args=args,
                                tmp=self.td.path, timeout=20)

    def test_http_approved(self):
        self.resolve("ask.test")
        f = self.curl("http://ask.test/held")
        q = self.question("ask.test", 80)
        self.assertFalse(f.done())
        self.answer(q, "approve")
        r = f.result()
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/held")
        row = self.gw.wait_audit(kind="transparent", host="ask.test",
                                 port=80, decision="allow")
        self.assertTrue(row, self.gw.log_tail())
        self.assertEqual(row[-1]["rule"], "approval:%d" % q["id"])

    def test_tls_denied(self):
        self.resolve("no.test")
        f = self.curl("https://no.test/x", ["--cacert", self.testca])
        q = self.question("no.test", 443)
        self.answer(q, "deny")
        r = f.result()
        self.assertNotEqual(r.status, 200, r)
        row = self.gw.wait_audit(kind="transparent", host="no.test")
        self.assertTrue(row)
        self.assertEqual(row[-1]["reason"], "approval-denied")

    def test_http_timeout(self):
        self.resolve("late.test")
        t0 = time.time()
        r = self.curl("http://late.test/late").result()
        self.assertGreaterEqual(time.time() - t0, 3.5)
        self.assertNotEqual(r.status, 200, r)
        row = self.gw.wait_audit(kind="transparent", host="late.test")
        self.assertTrue(row)
        self.assertEqual(row[-1]["reason"], "approval-timeout")


def main():
    TT.run_main()


if __name__ == "__main__":
    main()
