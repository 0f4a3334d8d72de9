#!/usr/bin/python3
"""
End-to-end tests of the rebinding defence (SPEC §4 step 4): a name whose
answers mix public and internal addresses is denied unless allow_private
covers the internal ones, and cidr rules never open internal ranges. Runs
as root in a fresh network namespace with only lo up, so that the public
addresses in the DNS answers are unreachable: nothing can leave the machine.
Each refusal's audit row names the allow rule the address check overrode and
the address it refused.
"""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402

UNSHARE = "/usr/bin/unshare"
PUBLIC = "93.184.216.34"  # data only: unreachable inside the namespace
TOKEN = "e2e-private-token-77"
NOTHING = AC.one_of(0, None)   # bytes of a refused request: none went through


def enter_netns():
    """Re-exec this file in a new network namespace; returns only inside it."""
    if os.environ.get("SGTEST_IN_NETNS") == "1":
        r = subprocess.run(["/usr/sbin/ip", "link", "set", "lo", "up"])
        if r.returncode != 0:
            T.skip_file("cannot bring lo up in the new network namespace")
        links = subprocess.run(["/usr/sbin/ip", "-o", "link", "show"],
                               stdout=subprocess.PIPE, text=True).stdout
        names = [l.split(":")[1].strip() for l in links.splitlines() if l.strip()]
        routes = subprocess.run(["/usr/sbin/ip", "route", "show"],
                                stdout=subprocess.PIPE, text=True).stdout.strip()
        if names != ["lo"] or routes:
            print("FAIL: not an isolated namespace: links %s routes %r" % (names, routes))
            sys.exit(1)
        return
    T.require_binary()
    if os.geteuid() != 0:
        T.skip_file("needs root to create a network namespace (unshare --net)")
    probe = subprocess.run([UNSHARE, "-n", "/bin/true"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    if probe.returncode != 0:
        T.skip_file("unshare --net failed: %s" % probe.stdout.strip())
    env = dict(os.environ, SGTEST_IN_NETNS="1")
    r = subprocess.run([UNSHARE, "-n", "/usr/bin/python3", os.path.abspath(__file__)]
                       + sys.argv[1:], env=env)
    sys.exit(r.returncode)


class PublicAnswersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.a = T.Origin("origin-a", host="127.0.0.2", port=0)
        cls.addClassCleanup(cls.a.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [
            ("mixed.test", PUBLIC), ("mixed.test", "127.0.0.2"),
            ("public.test", PUBLIC),
            ("inner.test", "127.0.0.3"),
            ("meta.test", "169.254.169.254"),
        ], cnames=[("alias.test", "inner.test")])
        cls.addClassCleanup(cls.dns.stop)
        pa = cls.a.port
        names = ["mixed.test", "public.test", "alias.test", "meta.test"]
        policy = {
            "sandboxes": [T.local_sandbox("strict"),
                          T.token_sandbox("priv", TOKEN, "private")],
            "policies": [
                {"name": "strict",
                 "allow": [{"host": n, "ports": [pa, 80]} for n in names] +
                          [{"cidr": "0.0.0.0/0", "ports": [pa, 80]},
                           {"cidr": "::/0", "ports": [pa, 80]}],
                 "allow_private": []},
                {"name": "private",
                 "allow": [{"host": "mixed.test", "ports": [pa]}],
                 "allow_private": ["127.0.0.0/8"]},
            ],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.priv_proxy = "http://priv:%s@127.0.0.1:%d" % (TOKEN, cls.gw.port)

    def setUp(self):
        self.audit = AC.Audit(self, self.gw)

    def get(self, url, proxy=None, args=()):
        return T.curl(url, proxy=proxy or self.gw.url, args=args, tmp=self.td.path)

    def raw_get(self, hostport, path):
        """(response, client addr:port) of one absolute-form GET."""
        return AC.raw_request(self.gw.port,
                              "GET http://%s%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                              % (hostport, path, hostport))

    def prohibited(self, client, host, port, path, rule, ip, kind="http"):
        """The row of a refusal by the address check (step 4 of SPEC §4)."""
        self.audit.expect({"client": client}, decision="deny", kind=kind,
                          sandbox="local", host=host, ip=ip, port=port,
                          method="GET" if kind == "http" else "CONNECT",
                          path=path, status=403, rule=rule,
                          reason="destination-ip-prohibited", credential=None,
                          bytes_up=NOTHING, bytes_down=NOTHING)

    def assertProhibited(self, r):
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "destination-ip-prohibited", r)

    def test_mixed_answers_denied(self):
        before = self.a.conn_count
        r = self.get("http://mixed.test:%d/mixed" % self.a.port)
        self.assertProhibited(r)
        self.prohibited(AC.client_of_curl(r), "mixed.test", self.a.port, "/mixed",
                        "strict:allow[0]", "127.0.0.2")
        r = self.get("http://mixed.test:%d/mixed-tunnel" % self.a.port, args=["-p"])
        self.assertNotEqual(r.status, 200, r)
        self.assertEqual(self.a.conn_count, before)
        self.assertFalse(self.a.saw_path("/mixed"))
        # the refused address is the internal answer, not the public one
        self.prohibited(AC.client_of_curl(r), "mixed.test", self.a.port, None,
                        "strict:allow[0]", "127.0.0.2", kind="connect")
        self.audit.check()

    def test_cname_to_internal_denied(self):
        r = self.get("http://alias.test:%d/alias" % self.a.port)
        self.assertProhibited(r)
        self.prohibited(AC.client_of_curl(r), "alias.test", self.a.port, "/alias",
                        "strict:allow[2]", "127.0.0.3")
        self.audit.check()

    def test_public_only_answer_allowed_but_unreachable(self):
        r = self.get("http://public.test:%d/pub" % self.a.port)
        self.assertIn(r.status, (502, 504), r)
        self.assertNotEqual(r.header("X-Sandgate-Reason"), "destination-ip-prohibited", r)
        # allowed, then unreachable: an error row under the allow rule
        self.audit.expect({"client": AC.client_of_curl(r)}, decision="error",
                          kind="http", sandbox="local", host="public.test",
                          ip=AC.one_of(None, PUBLIC), port=self.a.port,
                          method="GET", path="/pub", status=r.status,
                          rule="strict:allow[1]",
                          reason={502: "upstream-connect-error",
                                  504: "upstream-timeout"}[r.status],
                          credential=None, bytes_up=NOTHING, bytes_down=NOTHING)
        self.audit.check()

    def test_metadata_address_never_reachable(self):
        path = "/latest/meta-data/"
        r = self.get("http://meta.test" + path)
        self.assertProhibited(r)
        self.prohibited(AC.client_of_curl(r), "meta.test", 80, path,
                        "strict:allow[3]", "169.254.169.254")
        # every form is recorded as its canonical address; IPv4-mapped is IPv4
        v4 = ("169.254.169.254", "strict:allow[4]")
        for form, (canon, rule) in (
                ("169.254.169.254", v4), ("2852039166", v4), ("0xa9fea9fe", v4),
                ("0251.0376.0251.0376", v4), ("[::ffff:169.254.169.254]", v4),
                ("[64:ff9b::a9fe:a9fe]", ("64:ff9b::a9fe:a9fe", "strict:allow[5]")),
                ("[2002:a9fe:a9fe::1]", ("2002:a9fe:a9fe::1", "strict:allow[5]"))):
            with self.subTest(form=form):
                r, client = self.raw_get(form, path)
                self.assertProhibited(r)
                self.prohibited(client, canon, 80, path, rule, canon)
        self.audit.check()

    def test_cidr_rule_does_not_open_loopback(self):
        before = self.a.conn_count
        for form, canon, rule in (("127.0.0.2", "127.0.0.2", "strict:allow[4]"),
                                  ("[::ffff:127.0.0.2]", "127.0.0.2", "strict:allow[4]"),
                                  ("[::1]", "::1", "strict:allow[5]")):
            with self.subTest(form=form):
                r, client = self.raw_get("%s:%d" % (form, self.a.port), "/lo")
                self.assertProhibited(r)
                self.prohibited(client, canon, self.a.port, "/lo", rule, canon)
        self.assertEqual(self.a.conn_count, before)
        self.audit.check()

    def test_mixed_answers_with_allow_private(self):
        # both answers are acceptable now; the public one has no route here,
        # so the origin answers, or the gateway reports an upstream failure
        before = len(self.a.requests_for("/mixed-ok"))
        r = self.get("http://mixed.test:%d/mixed-ok" % self.a.port, proxy=self.priv_proxy)
        self.assertIn(r.status, (200, 502, 504), r)
        want = dict(kind="http", sandbox="priv", host="mixed.test",
                    port=self.a.port, method="GET", path="/mixed-ok",
                    status=r.status, rule="private:allow[0]", credential=None)
        if r.status == 200:
            self.assertEqual(r.json()["origin"], "origin-a")
            self.assertEqual(len(self.a.requests_for("/mixed-ok")), before + 1)
            want.update(decision="allow", ip="127.0.0.2", reason=None,
                        bytes_up=0, bytes_down=len(r.body))
        else:
            self.assertNotEqual(r.header("X-Sandgate-Reason"),
                                "destination-ip-prohibited", r)
            want.update(decision="error", ip=AC.one_of(None, PUBLIC, "127.0.0.2"),
                        reason=r.header("X-Sandgate-Reason"), bytes_up=NOTHING,
                        bytes_down=NOTHING)
        self.audit.expect({"client": AC.client_of_curl(r)}, **want)
        self.audit.check()


if __name__ == "__main__":
    enter_netns()
    T.main()
