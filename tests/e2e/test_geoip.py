#!/usr/bin/python3
"""
End-to-end test of GeoIP rules (issue 6 point 5): with geoip.country_db and
asn_db set to databases generated here (Debian's libmaxmind-db-writer-perl,
never downloaded), every resolved address is checked against the policy's
countries / asns deny rules, and the audit row carries country and ASN.
A missing or malformed database is a start-up error.
"""

import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

MAKE = os.path.join(T.SRC, "tests", "core", "data", "geoip_make.pl")
TOKEN = "geo-token-0123456789"


class GeoipTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-geo-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        r = subprocess.run(["/usr/bin/perl", MAKE, d], capture_output=True)
        if r.returncode == 2:
            raise unittest.SkipTest("MaxMind::DB::Writer (Debian's "
                "libmaxmind-db-writer-perl) is not installed")
        if r.returncode != 0:
            raise AssertionError("geoip_make.pl failed: %r" % r.stderr)
        # The generated databases: 127.0.0.0/24 is KP, AS64496;
        # 127.0.1.0/24 is DE, AS64511; 127.0.2.0/24 is not in them.
        cls.kp = T.Origin("kp", host="127.0.0.2")
        cls.addClassCleanup(cls.kp.stop)
        cls.de = T.Origin("de", host="127.0.1.2")
        cls.addClassCleanup(cls.de.stop)
        cls.free = T.Origin("free", host="127.0.2.2")
        cls.addClassCleanup(cls.free.stop)
        cls.dns = T.Dnsmasq(d, [("kp.test", "127.0.0.2"), ("de.test", "127.0.1.2"),
            ("free.test", "127.0.2.2"), ("mixed.test", "127.0.2.2"),
            ("mixed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        ports = sorted({cls.kp.port, cls.de.port, cls.free.port})
        allow = [{"host": h, "ports": ports} for h in
                 ("kp.test", "de.test", "free.test", "mixed.test")]
        policy = {
            "sandboxes": [T.local_sandbox("strict"),
                          T.token_sandbox("tourist", TOKEN, "lenient")],
            "policies": [
                {"name": "strict", "allow": allow,
                 "allow_private": ["127.0.0.0/8"],
                 "countries": {"deny": ["KP"]}, "asns": {"deny": [64511]}},
                {"name": "lenient", "allow": allow,
                 "allow_private": ["127.0.0.0/8"],
                 "countries": {"deny": ["FR"]}},
            ]}
        cls.dns_port = T.free_port(udp_too=True)
        cls.gw = T.Gateway(d, cls.dns, {"geo.yaml": policy}, extra={
            "listen": {"dns": "127.0.0.1:%d" % cls.dns_port},
            "geoip": {"country_db": os.path.join(d, "country.mmdb"),
                      "asn_db": os.path.join(d, "asn.mmdb")}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    def get(self, host, origin, path, proxy=None):
        url = "http://%s:%d%s" % (host, origin.port, path)
        return T.curl(url, proxy=proxy or self.gw.url, tmp=self.td.path)

    def row(self, path):
        rows = self.gw.wait_audit(path=path)
        self.assertEqual(len(rows), 1, rows)
        return rows[0]

    def test_country_deny(self):
        r = self.get("kp.test", self.kp, "/geo/kp")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "country-deny")
        self.assertFalse(self.kp.saw_path("/geo/kp"))
        row = self.row("/geo/kp")
        self.assertEqual((row["decision"], row["reason"], row["ip"],
            row["country"], row["asn"]),
            ("deny", "country-deny", "127.0.0.2", "KP", 64496))

    def test_asn_deny(self):
        r = self.get("de.test", self.de, "/geo/asn-denied")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "asn-deny")
        self.assertFalse(self.de.saw_path("/geo/asn-denied"))
        row = self.row("/geo/asn-denied")
        self.assertEqual((row["reason"], row["country"], row["asn"]),
            ("asn-deny", "DE", 64511))

    def test_unknown_address_allowed(self):
        r = self.get("free.test", self.free, "/geo/free")
        self.assertEqual(r.status, 200, r)
        row = self.row("/geo/free")
        self.assertEqual((row["decision"], row["country"], row["asn"]),
            ("allow", None, None))

    def test_one_denied_address_denies_the_name(self):
        r = self.get("mixed.test", self.free, "/geo/mixed")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "country-deny")

    def test_allowed_row_has_country_and_asn(self):
        proxy = "http://tourist:%s@127.0.0.1:%d" % (TOKEN, self.gw.port)
        r = self.get("de.test", self.de, "/geo/de-allowed", proxy=proxy)
        self.assertEqual(r.status, 200, r)
        row = self.row("/geo/de-allowed")
        self.assertEqual((row["sandbox"], row["decision"], row["country"],
            row["asn"]), ("tourist", "allow", "DE", 64511))

    def test_dns_listener_applies_geo_rules(self):
        def dig(name):
            return subprocess.run(["dig", "+time=5", "+tries=1", "-p",
                str(self.dns_port), "@127.0.0.1", name, "A"],
                capture_output=True, text=True, timeout=20 * T.SLOW).stdout
        for name, reason in (("kp.test", "country-deny"), ("de.test", "asn-deny")):
            out = dig(name)
            self.assertIn("status: NXDOMAIN", out, out)
            self.assertIn(reason, out, out)   # the EDE text names the reason
            rows = self.gw.wait_audit(kind="dns", host=name, reason=reason)
            self.assertTrue(rows, self.gw.audit_rows()[-4:])
        out = dig("free.test")
        self.assertIn("status: NOERROR", out, out)
        self.assertIn("127.0.2.2", out, out)

    def test_bad_database_is_a_startup_error(self):
        d = self.td.join("bad")
        os.makedirs(d, exist_ok=True)
        junk = os.path.join(d, "junk.mmdb")
        with open(junk, "wb") as f:
            f.write(os.urandom(4096))
        for path in (junk, os.path.join(d, "missing.mmdb")):
            gw = T.Gateway(d, self.dns, {"p.yaml": {"policies": []}},
                extra={"geoip": {"country_db": path}})
            r = subprocess.run([T.BIN, "serve", "-c", gw.cfg_path],
                capture_output=True, timeout=20 * T.SLOW, cwd=d)
            self.assertEqual(r.returncode, 1, r)
            self.assertIn(path, r.stderr.decode(errors="replace"))


if __name__ == "__main__":
    T.main()
