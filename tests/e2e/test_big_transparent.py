#!/usr/bin/python3
"""
Bulk data through the transparent listener of a gateway run as a default
install runs it (issue 22: user sandgate, seccomp, keeper), the relay path
test_big_relay.py cannot reach from loopback. A sandbox network namespace
whose only way out is nftables redirection to the gateway, and a "fake
internet" namespace with the origins (test_transparent.py's Topology, subnets
from 198.18.0.0/15). Clients inside the sandbox, without proxy settings, move
SIZE (64 MiB + 4099) bytes of a seeded PRNG each way: TLS passed through
(curl, spliced past 1 MiB), an opaque tunnel (Python sockets, rule `opaque:
true`) and plain HTTP (curl; the gateway reads it request by request). Each
asserts the SHA-256 and length of what arrived, the audit row's bytes, and
that no system call of the gateway's processes was refused.

Needs root (namespaces, veth, nftables) because the topology does; the
gateway itself drops to the sandgate user. Exits 77 otherwise.
"""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402
import bigflow as B  # noqa: E402
import transparent_helpers as H  # noqa: E402
import test_transparent as TT  # noqa: E402

SIZE = B.SIZE
TLS_SLACK = B.TLS_SLACK

# Run inside the sandbox: the opaque protocol of data/big_origins.py.
RAW_CLIENT = r"""
import json, socket, sys
sys.path.insert(0, sys.argv[5])
import bigflow as B
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=120)
client = "%s:%d" % s.getsockname()[:2]
if sys.argv[3] == "up":
    n, sha = B.raw_up(s, sys.argv[4], B.SIZE)
else:
    n, sha = B.raw_down(s)
s.close()
print(json.dumps({"client": client, "n": n, "sha": sha}))
"""


class BigTransparentTest(B.BulkTest, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d = TT.class_topology(cls, "sgt-bigtr-")
        topo = cls.topo
        cls.data, cls.sha = B.make_data(d, seed=2222)
        cls.ip = topo.net_ip[2]
        cls.testca, crt, key = H.make_ca_and_leaf(d, ["tls.test"])
        B.start_origins(d, cls.data, [
            {"id": "tls", "kind": "http", "host": cls.ip, "port": 443,
             "cert": crt, "key": key},
            {"id": "plain", "kind": "http", "host": cls.ip, "port": 80},
            {"id": "raw", "kind": "raw", "host": cls.ip, "port": 2222},
        ], cls.addClassCleanup, prefix=[TT.IP, "netns", "exec", topo.net])
        cls.dns = H.TtlDnsmasq(d, [("tls.test", cls.ip), ("opaque.test", cls.ip),
                                   ("plain.test", cls.ip)], local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)
        cls.tport = TT.TransparentTest.free_gw_port.__func__(cls)
        cls.dport = TT.TransparentTest.free_gw_port.__func__(cls, udp=True,
                                                             avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)
        policy = {
            "sandboxes": [{"id": "bulk", "policy": "bulk",
                           "source": [topo.sb_ip + "/32"]}],
            "policies": [{"name": "bulk", "allow": [
                {"host": "tls.test", "ports": [443]},                    # 0
                {"host": "opaque.test", "ports": [2222], "opaque": True},  # 1
                {"host": "plain.test", "ports": [80]},                   # 2
            ], "allow_private": ["198.19.0.0/16"]}],
        }
        cls.mport = T.free_port()
        # A default install: the drop to the sandgate user, seccomp, keeper.
        cls.gw = T.Gateway(d, cls.dns, {"bulk.yaml": policy}, user="sandgate",
            extra={"listen": {"transparent": "%s:%d" % (topo.gw_ip, cls.tport),
                              "dns": "%s:%d" % (topo.gw_ip, cls.dport),
                              "metrics": "127.0.0.1:%d" % cls.mport}})
        cls.start_confined(topo.gw_ip, cls.tport, 5, "transparent")

    def resolve(self, name):
        q = H.dig([name, "A"], prefix=self.nsx)
        self.assertEqual((q.status, q.addrs()), ("NOERROR", [self.ip]), q)

    def sb_curl(self, url, args=()):
        r = H.curl(url, prefix=self.nsx, args=list(args), tmp=self.td.path,
                   timeout=180)
        return r, B.digest_body(r)

    def sb_raw(self, direction):
        r = TT.run(self.nsx + [TT.PY, "-c", RAW_CLIENT, self.ip, "2222",
                               direction, self.data, HERE], timeout=180)
        return json.loads(r.stdout)

    def row(self, client, host, port, rule, up, down, method="CONNECT",
            path=None):
        self.audit.expect({"client": client, "method": method, "path": path},
                          decision="allow", kind="transparent", sandbox="bulk",
                          host=host, ip=self.ip, port=port, status=200,
                          rule=rule, reason=None, credential=None,
                          bytes_up=up, bytes_down=down)
        self.audit.check()

    def sb_client(self, r):
        return "%s:%d" % (self.topo.sb_ip, r.info["local_port"])

    def test_tls_passthrough_download(self):
        self.resolve("tls.test")
        before = self.spliced()
        r, got = self.sb_curl("https://tls.test/file", ["--cacert", self.testca])
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(got, (SIZE, self.sha))
        self.assertEqual(self.spliced(), before + 1)
        self.row(self.sb_client(r), "tls.test", 443, "bulk:allow[0]",
                 AC.between(500, 64 * 1024), AC.between(SIZE, SIZE + TLS_SLACK))

    def test_tls_passthrough_upload(self):
        self.resolve("tls.test")
        before = self.spliced()
        r, _ = self.sb_curl("https://tls.test/upload", ["--cacert", self.testca,
                            "--data-binary", "@" + self.data])
        self.assertEqual((r.rc, r.status), (0, 200), r)
        doc = json.loads(r.body)
        self.assertEqual((doc["body_len"], doc["body_sha256"]), (SIZE, self.sha))
        self.assertEqual(self.spliced(), before + 1)
        self.row(self.sb_client(r), "tls.test", 443, "bulk:allow[0]",
                 AC.between(SIZE, SIZE + TLS_SLACK), AC.between(500, 64 * 1024))

    def test_opaque_download(self):
        self.resolve("opaque.test")
        before = self.spliced()
        out = self.sb_raw("down")
        self.assertEqual((out["n"], out["sha"]), (SIZE, self.sha))
        self.assertEqual(self.spliced(), before + 1)
        self.row(out["client"], "opaque.test", 2222, "bulk:allow[1]",
                 B.RAW_DOWN_HEAD, SIZE)

    def test_opaque_upload(self):
        self.resolve("opaque.test")
        before = self.spliced()
        out = self.sb_raw("up")
        self.assertEqual((out["n"], out["sha"]), (SIZE, self.sha))
        self.assertEqual(self.spliced(), before + 1)
        self.row(out["client"], "opaque.test", 2222, "bulk:allow[1]",
                 B.RAW_UP_HEAD + SIZE, B.RAW_UP_ANSWER)

    def test_http_download(self):
        self.resolve("plain.test")
        r, got = self.sb_curl("http://plain.test/file")
        self.assertEqual((r.rc, r.status), (0, 200), r)
        self.assertEqual(got, (SIZE, self.sha))
        self.row(self.sb_client(r), "plain.test", 80, "bulk:allow[2]", 0, SIZE,
                 method="GET", path="/file")

    def test_http_upload(self):
        self.resolve("plain.test")
        r, _ = self.sb_curl("http://plain.test/upload",
                            ["--data-binary", "@" + self.data])
        self.assertEqual((r.rc, r.status), (0, 200), r)
        doc = json.loads(r.body)
        self.assertEqual((doc["body_len"], doc["body_sha256"]), (SIZE, self.sha))
        self.row(self.sb_client(r), "plain.test", 80, "bulk:allow[2]", SIZE,
                 AC.between(60, 400), method="POST", path="/upload")


def main():
    TT.run_main()


if __name__ == "__main__":
    main()
