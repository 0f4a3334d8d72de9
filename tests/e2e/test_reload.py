#!/usr/bin/python3
"""
End-to-end tests of SIGHUP reload (SPEC §1, §4 "Policies reload on SIGHUP"):
a valid policy applies to new requests while open tunnels keep going; a bad
policy or config file is logged as FILE:LINE:COL and the old policy stays.
Every request and tunnel is checked against its audit row, whose rule names
the policy that decided it.
"""

import itertools
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402

_seq = itertools.count(1)


def eventually(fn, timeout=5.0):
    """Call fn until it returns something true or timeout passes; the last result."""
    deadline = time.time() + timeout * T.SLOW
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(0.1)


class ReloadTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir()
        self.addCleanup(self.td.cleanup)
        self.a = T.Origin("origin-a", host="127.0.0.2")
        self.addCleanup(self.a.stop)
        self.echo = T.RawServer("127.0.0.2", mode="echo")
        self.addCleanup(self.echo.stop)
        self.dns = T.Dnsmasq(self.td.path, [(n, "127.0.0.2") for n in
                                            ("allowed.test", "ssh.test", "later.test")])
        self.addCleanup(self.dns.stop)
        self.gw = T.Gateway(self.td.path, self.dns, {"main.yaml": self.policy_v1()})
        self.gw.start()
        self.addCleanup(self.gw.stop)
        self.audit = AC.Audit(self, self.gw)

    def policy(self, allow):
        return {"sandboxes": [T.local_sandbox("main")],
                "policies": [{"name": "main", "allow": allow,
                              "allow_private": ["127.0.0.2/32"]}]}

    def policy_v1(self):
        return self.policy([
            {"host": "allowed.test", "ports": [self.a.port]},
            {"host": "ssh.test", "ports": [self.echo.port], "opaque": True},
        ])

    def policy_v2(self):
        return self.policy([{"host": "later.test", "ports": [self.a.port]}])

    def status(self, host):
        """The status of one request to host; its audit row is expected too."""
        path = "/%s-%d-%d" % (host.split(".")[0], os.getpid(), next(_seq))
        r = T.curl("http://%s:%d%s" % (host, self.a.port, path), proxy=self.gw.url,
                   tmp=self.td.path)
        # v1 allows allowed.test, v2 later.test, each as main:allow[0]
        want = dict(kind="http", sandbox="local", host=host, port=self.a.port,
                    method="GET", credential=None)
        if r.status == 200:
            want.update(decision="allow", ip="127.0.0.2", status=200,
                        rule="main:allow[0]", reason=None, bytes_up=0,
                        bytes_down=len(r.body))
        else:
            want.update(decision="deny", ip=None, status=r.status,
                        rule="default-deny", reason="policy-deny",
                        bytes_up=AC.one_of(0, None), bytes_down=AC.one_of(0, None))
        self.audit.expect({"client": AC.client_of_curl(r), "path": path}, **want)
        return r.status

    def hup_and_wait(self, host, want):
        self.gw.reload()
        got = eventually(lambda: self.status(host) == want)
        self.assertTrue(got, "after SIGHUP %s never answered %d" % (host, want))

    def test_valid_reload_applies_to_new_requests_only(self):
        pa = self.a.port
        http_tun, r = T.open_tunnel(self.gw.port, "allowed.test:%d" % pa)
        self.addCleanup(http_tun.close)
        self.assertEqual(r.status, 200, r)
        resp = http_tun.request("GET /before HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % pa)
        self.assertEqual(resp.status, 200, resp)
        self.in_tunnel(AC.client_of_conn(http_tun), "/before", len(resp.body))
        raw_tun, r = T.open_tunnel(self.gw.port, "ssh.test:%d" % self.echo.port)
        self.addCleanup(raw_tun.close)
        self.assertEqual(r.status, 200, r)
        raw_tun.send(b"SSH-2.0-before\r\n")
        self.assertEqual(raw_tun.read_exact(16), b"SSH-2.0-before\r\n")
        self.assertEqual(self.status("later.test"), 403)

        self.gw.write_policy("main.yaml", self.policy_v2())
        self.hup_and_wait("allowed.test", 403)
        self.assertEqual(self.status("later.test"), 200)

        # the tunnels opened before the reload keep going
        raw_tun.send(b"still-open\n")
        self.assertEqual(raw_tun.read_exact(11), b"still-open\n")
        resp = http_tun.request("GET /after HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % pa)
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.json()["path"], "/after")
        # still the old policy's rule: the tunnel started under it
        self.in_tunnel(AC.client_of_conn(http_tun), "/after", len(resp.body))
        # a new tunnel is decided by the new policy
        c, r = T.open_tunnel(self.gw.port, "ssh.test:%d" % self.echo.port)
        client = AC.client_of_conn(c)
        c.close()
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny")
        self.assertTrue(self.gw.alive())
        self.audit.expect({"client": client, "method": "CONNECT"},
                          decision="deny", kind="connect", sandbox="local",
                          host="ssh.test", ip=None, port=self.echo.port, path=None,
                          status=403, rule="default-deny", reason="policy-deny",
                          credential=None, bytes_up=AC.one_of(0, None),
                          bytes_down=AC.one_of(0, None))
        # the opaque tunnel's row is written when it ends, with both byte counts
        raw_client = AC.client_of_conn(raw_tun)
        raw_tun.close()
        n = len(b"SSH-2.0-before\r\n") + len(b"still-open\n")
        self.audit.expect({"client": raw_client, "method": "CONNECT"},
                          decision="allow", kind="connect", sandbox="local",
                          host="ssh.test", ip="127.0.0.2", port=self.echo.port,
                          path=None, status=200, rule="main:allow[1]",
                          reason=None, credential=None, bytes_up=n, bytes_down=n)
        self.audit.check()

    def in_tunnel(self, client, path, down):
        self.audit.expect({"client": client, "path": path}, decision="allow",
                          kind="connect", sandbox="local", host="allowed.test",
                          ip="127.0.0.2", port=self.a.port, method="GET",
                          status=200, rule="main:allow[0]", reason=None,
                          credential=None, bytes_up=0, bytes_down=down)

    def broken_reload(self, fname, text, line, col, check_old):
        start = len(self.gw.log_text())
        path = os.path.join(self.gw.policy_dir, fname) if fname != "sandgate.yaml" \
            else self.gw.cfg_path
        with open(path + ".tmp~", "w") as f:
            f.write(text)
        os.rename(path + ".tmp~", path)
        self.gw.reload()
        rx = r"%s:%d:%d: \S" % (os.path.basename(fname).replace(".", r"\."), line, col)
        m = self.gw.wait_log(rx, timeout=5, start=start)
        self.assertIsNotNone(m, "no %s line in the log after SIGHUP; log:\n%s"
                             % (rx, self.gw.log_text()[start:][-3000:]))
        check_old()
        self.assertTrue(self.gw.alive())

    def check_v1_in_force(self):
        # keep polling a while: a late, wrong apply must show up here
        for _ in range(5):
            self.assertEqual(self.status("allowed.test"), 200)
            self.assertEqual(self.status("later.test"), 403)
            time.sleep(0.1)

    def test_broken_policy_keeps_old_one(self):
        self.assertEqual(self.status("allowed.test"), 200)
        # an unknown key (a typo must not weaken policy) at line 9, column 9
        bad = (
            "sandboxes:\n"
            "  - id: main\n"
            "    policy: main\n"
            "    source: [127.0.0.1/32]\n"
            "policies:\n"
            "  - name: main\n"
            "    allow:\n"
            "      - host: later.test\n"
            "        prots: [%d]\n"
            "    allow_private: [127.0.0.2/32]\n" % self.a.port)
        self.broken_reload("main.yaml", bad, 9, 9, self.check_v1_in_force)
        # a YAML syntax error
        bad_syntax = (
            "sandboxes:\n"
            "  - id: main\n"
            "    policy: main\n"
            "    source: [127.0.0.1/32\n"
            "policies: []\n")
        start = len(self.gw.log_text())
        self.gw.write_policy("main.yaml", bad_syntax)
        self.gw.reload()
        m = self.gw.wait_log(r"main\.yaml:\d+:\d+: \S", timeout=5, start=start)
        self.assertIsNotNone(m, self.gw.log_text()[start:][-3000:])
        self.check_v1_in_force()
        # a bad file next to a good one: the whole set is refused
        self.gw.write_policy("main.yaml", self.policy_v2())
        start = len(self.gw.log_text())
        self.gw.write_policy("zz-extra.yaml", "policies:\n  - name: extra\n    allow:\n"
                             "      - host: x.test\n        ports: [70000]\n")
        self.gw.reload()
        m = self.gw.wait_log(r"zz-extra\.yaml:5:\d+: \S", timeout=5, start=start)
        self.assertIsNotNone(m, self.gw.log_text()[start:][-3000:])
        self.check_v1_in_force()
        # and a good set afterwards applies
        os.unlink(os.path.join(self.gw.policy_dir, "zz-extra.yaml"))
        self.hup_and_wait("later.test", 200)
        self.assertEqual(self.status("allowed.test"), 403)
        self.audit.check()

    def test_broken_config_keeps_old_policy(self):
        self.assertEqual(self.status("allowed.test"), 200)
        with open(self.gw.cfg_path) as f:
            good_cfg = f.read()
        # a valid new policy on disk, but the config next to it is broken
        self.gw.write_policy("main.yaml", self.policy_v2())
        lines = good_cfg.splitlines()
        bad_cfg = "\n".join(lines + ["bogus_key: 1"]) + "\n"
        self.broken_reload("sandgate.yaml", bad_cfg, len(lines) + 1, 1,
                           self.check_v1_in_force)
        with open(self.gw.cfg_path, "w") as f:
            f.write(good_cfg)
        self.hup_and_wait("later.test", 200)
        self.audit.check()


if __name__ == "__main__":
    T.main()
