#!/usr/bin/python3
"""
End-to-end test of `sandgate audit stats` and `sandgate audit export
--format ocsf` (issue 16 point 4; docs/audit.md): a gateway sees plain HTTP,
a CONNECT tunnel, an intercepted request that carries a credential, a
placeholder sent to the wrong host (credential-misuse), denials from two
sandboxes and DNS queries. stats (text and JSON) must agree with a count
made straight from audit.db, and with verify's chain status, also after a
row was altered; every exported OCSF event must carry the class, category,
activity, type_uid, severity and status the mapping in docs/audit.md gives
its row, with and without --follow.
"""

import json
import os
import sqlite3
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

TOKEN = "tok-1e8a4c0b7d3f2a95"
PH = "sgtest-stats-placeholder-0001"
SECRET = "sk-stats-secret-0123456789"


class StatsOcsfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.cert, cls.key = T.make_cert(d, cn="api.test", names=["api.test"])
        cls.plain = T.Origin("plain", host="127.0.0.2")
        cls.addClassCleanup(cls.plain.stop)
        cls.tls = T.Origin("tls", host="127.0.0.2", cert=cls.cert, key=cls.key)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [("ok.test", "127.0.0.2"),
                                ("api.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        pol = {
            "sandboxes": [T.local_sandbox("p", sid="alpha"),
                          T.token_sandbox("beta", TOKEN, "p")],
            "policies": [{"name": "p", "allow": [
                {"host": "ok.test", "ports": [cls.plain.port, cls.tls.port]},
                {"host": "api.test", "ports": [cls.tls.port],
                 "tls": "intercept"}],
                "allow_private": ["127.0.0.2/32"], "credentials": ["apikey"]}],
            "credentials": [{"name": "apikey", "secret": "apikey-secret",
                "hosts": ["api.test"], "placeholder": PH}],
        }
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": pol}, extra={
            "upstream": {"ca_bundle": cls.cert},
            "listen": {"dns": "127.0.0.1:%d" % cls.dport}})
        r = T.run_sandgate("vault", "set", "apikey-secret", "-c",
            cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: " + r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.traffic()

    @classmethod
    def traffic(cls):
        gw, pp, tp = cls.gw, cls.plain.port, cls.tls.port
        for i in range(3):
            assert T.curl("http://ok.test:%d/a%d" % (pp, i),
                proxy=gw.url).status == 200
        r = T.curl("https://ok.test:%d/t" % tp, proxy=gw.url,
            args=["--cacert", cls.cert])
        assert r.status == 200, r
        r = T.curl("https://api.test:%d/v1/x" % tp, proxy=gw.url,
            args=["--cacert", cls.gw_ca, "-H", "Authorization: Bearer " + PH])
        assert r.status == 200, r
        r = T.curl("http://ok.test:%d/leak" % pp, proxy=gw.url,
            args=["-H", "Authorization: Bearer " + PH])
        assert r.status == 403, r
        for i in range(2):
            assert T.curl("http://no.test:%d/" % pp,
                proxy=gw.url).status == 403
        r = T.curl("http://no.test:%d/" % pp, proxy=gw.url,
            args=["-U", "beta:" + TOKEN])
        assert r.status == 403, r
        q = H.dig(["@127.0.0.1", "-p", str(cls.dport), "ok.test", "A"])
        assert q.status == "NOERROR", q
        q = H.dig(["@127.0.0.1", "-p", str(cls.dport), "no.test", "A"])
        assert q.status == "NXDOMAIN", q
        # every row written before the checks
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and len([r for r in gw.audit_rows()
                if r["kind"] != "admin"]) < 11:
            time.sleep(0.1)

    def db(self):
        return os.path.join(self.gw.tmp, "var", "audit.db")

    def sql(self, q, *args):
        con = sqlite3.connect("file:%s?mode=ro" % self.db(), uri=True)
        try:
            return con.execute(q, args).fetchall()
        finally:
            con.close()

    # ------------------------------------------------------------ stats

    def stats_json(self, *args):
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
            "--format", "json", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_stats_json_matches_db(self):
        s = self.stats_json()
        total = self.sql("SELECT count(*) FROM events")[0][0]
        dec = dict(self.sql("SELECT decision, count(*) FROM events "
            "GROUP BY decision"))
        got = {d["decision"]: d["rows"] for d in s["decisions"]}
        # rows may be added (checkpoints) between the two reads: at least
        self.assertEqual(got.get("deny"), dec.get("deny"))
        self.assertGreaterEqual(sum(got.values()), total - 2)
        top = {d["host"]: d for d in s["top_destinations"]}
        self.assertEqual(top["no.test"]["rows"], 4)   # 3 HTTP + 1 DNS
        self.assertEqual(top["no.test"]["denied"], 4)
        self.assertGreaterEqual(top["ok.test"]["rows"], 6)
        self.assertGreater(top["ok.test"]["bytes_down"], 0)
        reasons = {d["reason"]: d["rows"] for d in s["denials_by_reason"]}
        self.assertEqual(reasons["policy-deny"], 4)
        self.assertEqual(reasons["credential-misuse"], 1)
        sb = {d["sandbox"]: d["rows"] for d in s["denials_by_sandbox"]}
        self.assertEqual(sb, {"alpha": 4, "beta": 1})
        uses = {d["credential"]: d["rows"] for d in s["credential_uses"]}
        self.assertEqual(uses.get("apikey"), 1)
        mis = [(d["credential"], d["reason"], d["rows"])
               for d in s["credential_misuses"]]
        self.assertEqual(mis, [("apikey", "credential-misuse", 1)])
        self.assertEqual(s["chain"]["status"], "ok")
        self.assertGreaterEqual(s["chain"]["rows"], total)

    def test_stats_filters_and_text(self):
        s = self.stats_json("--sandbox", "beta")
        self.assertEqual(s["sandbox"], "beta")
        self.assertEqual([(d["host"], d["rows"]) for d in
            s["top_destinations"]], [("no.test", 1)])
        self.assertEqual(s["credential_uses"], [])
        s = self.stats_json("--since", "2000-01-01T00:00:00Z",
            "--until", "2000-01-02T00:00:00Z")
        self.assertEqual(s["decisions"], [])
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
            "--since", "1h")
        self.assertEqual(r.returncode, 0, r.stderr)
        for want in ("chain: ok", "top destinations", "ok.test",
                "denials by reason", "policy-deny", "denials by sandbox",
                "alpha", "credential uses", "apikey", "credential misuses",
                "credential-misuse"):
            self.assertIn(want, r.stdout)
        self.assertLessEqual(len(r.stdout.splitlines()), 80)
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
            "--decision", "deny")
        self.assertEqual(r.returncode, 2)
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
            "--format", "csv")
        self.assertEqual(r.returncode, 2)

    def test_stats_sees_a_broken_chain(self):
        copy = os.path.join(self.td.path, "copy.db")
        src = sqlite3.connect("file:%s?mode=ro" % self.db(), uri=True)
        dst = sqlite3.connect(copy)
        src.backup(dst)
        src.close()
        dst.execute("UPDATE events SET host = 'elsewhere.test' WHERE id = 2")
        dst.commit()
        dst.close()
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
            "--db", copy, "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        chain = json.loads(r.stdout)["chain"]
        self.assertEqual((chain["status"], chain["bad_id"]), ("broken", 2))
        r = T.run_sandgate("audit", "stats", "-c", self.gw.cfg_path,
            "--db", copy)
        self.assertIn("chain: BROKEN at row 2", r.stdout)

    # ------------------------------------------------------------ OCSF

    def expected(self, row):
        """(class_uid, activity_id, severity_id, status_id) per docs/audit.md."""
        kind, method, dec = row["kind"], row["method"], row["decision"]
        if kind in ("admin", "vault"):
            cls, act = 0, 99
        elif kind == "dns":
            cls, act = 4003, 2
        elif method and method != "CONNECT" and row["status"] is not None:
            cls = 4002
            act = {"GET": 3, "POST": 6, "HEAD": 4, "PUT": 7, "DELETE": 2,
                   "OPTIONS": 5, "TRACE": 8}.get(method, 99)
        else:
            cls = 4001
            act = {"deny": 5, "error": 4}.get(dec, 6)
        if dec == "deny" and row["reason"] in ("credential-misuse",
                "foreign-credential", "destination-ip-prohibited"):
            sev = 4
        else:
            sev = {"deny": 3, "report": 2, "error": 2}.get(dec, 1)
        status = 1 if dec in ("allow", "report") else 2
        return cls, act, sev, status

    def check_event(self, ev, row):
        cls, act, sev, status = self.expected(row)
        self.assertEqual(ev["class_uid"], cls, (ev, row))
        self.assertEqual(ev["category_uid"], 4 if cls else 0)
        self.assertEqual(ev["activity_id"], act, (ev, row))
        self.assertEqual(ev["type_uid"], cls * 100 + act)
        self.assertEqual(ev["severity_id"], sev, (ev, row))
        self.assertEqual(ev["status_id"], status)
        self.assertEqual(ev["metadata"]["uid"], str(row["id"]))
        self.assertEqual(ev["metadata"]["version"], "1.1.0")
        self.assertEqual(ev["metadata"]["product"]["name"], "sandgate")
        self.assertIsInstance(ev["time"], int)
        self.assertEqual(ev["unmapped"]["hash"], row["hash"])
        if cls == 4002:
            self.assertEqual(ev["http_request"]["http_method"], row["method"])
            self.assertEqual(ev["http_request"]["url"]["hostname"], row["host"])
            self.assertEqual(ev["http_response"]["code"], row["status"])
        if cls == 4003:
            self.assertEqual(ev["query"]["hostname"], row["host"])
            self.assertEqual(ev["rcode_id"], row["status"])
        if cls == 4003:
            # the resolver: the gateway's DNS listener, not the name asked
            self.assertEqual(ev["dst_endpoint"]["port"], self.dport)
        if cls in (4001, 4002):
            self.assertEqual(ev["dst_endpoint"].get("hostname"), row["host"])
        if cls in (4001, 4002, 4003):
            self.assertEqual(ev["src_endpoint"]["name"], row["sandbox"])
            self.assertEqual(ev["action_id"], 2 if row["decision"] == "deny"
                else 1)

    def test_export_ocsf(self):
        r = T.run_sandgate("audit", "export", "-c", self.gw.cfg_path,
            "--since", "1d", "--format", "ocsf")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {x["id"]: x for x in self.gw.audit_rows()}
        events = [json.loads(ln) for ln in r.stdout.splitlines()]
        self.assertGreaterEqual(len(events), 11)
        classes = set()
        for ev in events:
            row = rows[int(ev["metadata"]["uid"])]
            self.check_event(ev, row)
            classes.add(ev["class_uid"])
        self.assertTrue({4001, 4002, 4003} <= classes, classes)
        mis = [e for e in events if e.get("status_detail") ==
               "credential-misuse"]
        self.assertEqual(len(mis), 1)
        self.assertEqual(mis[0]["severity"], "High")
        self.assertEqual(mis[0]["unmapped"]["credential"], "apikey")

    def test_export_ocsf_follow(self):
        # A cursor at the newest row: following starts right after it,
        # however long the exporter takes to start.
        cursor = os.path.join(self.td.path, "ocsf.cursor")
        with open(cursor, "w") as f:
            f.write("%d\n" % self.sql("SELECT max(id) FROM events")[0][0])
        p = subprocess.Popen([T.BIN, "audit", "export", "-c", self.gw.cfg_path,
            "--follow", "--cursor", cursor, "--format", "ocsf"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=T.clean_env(),
            text=True)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait(),
            p.stdout.close(), p.stderr.close()))
        r = T.curl("http://ok.test:%d/followed" % self.plain.port,
            proxy=self.gw.url)
        self.assertEqual(r.status, 200)
        while True:
            line = p.stdout.readline()
            if not line:
                self.fail("export --follow ended: " + p.stderr.read())
            ev = json.loads(line)
            if ev["class_uid"] == 4002:
                break
        self.assertEqual(ev["http_request"]["url"]["path"], "/followed")
        row = [x for x in self.gw.audit_rows()
               if x["id"] == int(ev["metadata"]["uid"])][0]
        self.check_event(ev, row)
        p.terminate()
        self.assertEqual(p.wait(timeout=10), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
