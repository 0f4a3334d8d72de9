#!/usr/bin/python3
"""
A real Prometheus (Debian's `prometheus`, started by this test on a loopback
port with its own data directory) scrapes a default-install gateway (user
sandgate, seccomp, keeper) every second while curl sends it allowed and
denied traffic; the test then asks Prometheus, through its HTTP API, what an
operator's alerts would: denials by reason, requests by sandbox, and a
decision-time quantile from the histogram (docs/monitoring.md). That proves
the exposition is one Prometheus itself ingests, not only one our parser
reads: `up` is 1 and no sample was dropped.
"""

import json
import os
import re
import sys
import time
import unittest
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "..", "..", "deploy", "prometheus", "sandgate-alerts.yml")
DASHBOARD = os.path.join(HERE, "..", "..", "deploy", "grafana", "sandgate.json")
METRIC_RX = re.compile(r"\b(sandgate_[a-z0-9_]+)")
ORIGIN_HOST = "127.0.0.2"
ALLOWED, DENIED = 6, 4


class PrometheusTest(unittest.TestCase):
    # loopback only: no proxy from the environment
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @classmethod
    def setUpClass(cls):
        if not os.access(PROMETHEUS, os.X_OK):
            T.skip_file("prometheus is not installed (Debian package "
                        "prometheus; scripts/install-deps.sh installs it)")
        cls.td = T.TempDir("sgtest-prom-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("allowed.test", ORIGIN_HOST),
                                ("denied.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.mport = T.free_port()
        doc = {"sandboxes": [T.local_sandbox("main")],
               "policies": [{"name": "main",
                             "allow": [{"host": "allowed.test",
                                        "ports": [cls.origin.port]}],
                             "allow_private": [ORIGIN_HOST + "/32"]}]}
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": doc},
                           extra={"listen": {"metrics": "127.0.0.1:%d" % cls.mport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.mport, 10 * T.SLOW, cls.gw.proc):
            raise AssertionError("metrics port not listening:\n" +
                                 cls.gw.log_tail())
        cls.pport = T.free_port()
        conf = os.path.join(d, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n"
                    "rule_files: ['%s']\n"
                    "scrape_configs:\n  - job_name: sandgate\n"
                    "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
                    % (os.path.abspath(RULES), cls.mport))
        data = os.path.join(d, "prom-data")
        os.mkdir(data)
        cls.prom = T.Proc([PROMETHEUS, "--config.file=" + conf,
                           "--storage.tsdb.path=" + data,
                           "--web.listen-address=127.0.0.1:%d" % cls.pport,
                           "--log.level=warn"],
                          os.path.join(d, "prometheus.log"), cwd=d)
        cls.addClassCleanup(cls.prom.stop)
        if not T.wait_tcp("127.0.0.1", cls.pport, 30 * T.SLOW, cls.prom):
            raise AssertionError("prometheus did not start:\n" +
                                 cls.prom.log_tail())
        # 503 until its storage is open
        deadline = time.time() + 60 * T.SLOW
        while True:
            try:
                with cls.opener.open("http://127.0.0.1:%d/-/ready" % cls.pport,
                                     timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline or not cls.prom.alive():
                raise AssertionError("prometheus not ready:\n" +
                                     cls.prom.log_tail())
            time.sleep(0.3)

    def query(self, q):
        """An instant query; the result vector ([] when nothing matched)."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.pport, urllib.parse.urlencode({"query": q}))
        with self.opener.open(url, timeout=10) as r:
            body = json.load(r)
        self.assertEqual(body.get("status"), "success", body)
        return body["data"]["result"]

    def scalar(self, q):
        res = self.query(q)
        return float(res[0]["value"][1]) if res else None

    def eventually(self, q, pred, timeout=30.0):
        deadline = time.time() + timeout * T.SLOW
        v = None
        while time.time() < deadline:
            v = self.scalar(q)
            if v is not None and pred(v):
                return v
            time.sleep(0.5)
        self.fail("%s: still %r after %g s\n%s" % (q, v, timeout,
                                                  self.prom.log_tail()))

    def test_prometheus_scrapes_the_decisions(self):
        # the target is up: Prometheus parsed a whole scrape
        self.eventually('up{job="sandgate"}', lambda v: v == 1)
        for i in range(ALLOWED):
            r = T.curl("http://allowed.test:%d/a%d" % (self.origin.port, i),
                       proxy=self.gw.url, tmp=self.td.path)
            self.assertEqual(r.status, 200, r)
        for _ in range(DENIED):
            r = T.curl("https://denied.test:443/", proxy=self.gw.url,
                       tmp=self.td.path)
            self.assertEqual(r.status, 403, r)
        self.gw.wait_audit(kind="connect", host="denied.test", decision="deny")
        # the counters as an alert reads them
        self.eventually('sum(sandgate_requests_total{decision="deny",'
                        'reason="policy-deny",listener="connect"})',
                        lambda v: v == DENIED)
        self.eventually('sum(sandgate_requests_total{decision="allow",'
                        'listener="http"})', lambda v: v == ALLOWED)
        self.assertEqual(self.scalar(
            'sum(sandgate_sandbox_requests_total{sandbox="local"})'),
            ALLOWED + DENIED)
        by_reason = {r["metric"].get("reason"): float(r["value"][1])
                     for r in self.query('sum by (reason) (sandgate_requests_total'
                                         '{decision="deny"})')}
        self.assertEqual(by_reason, {"policy-deny": DENIED})
        # a quantile from the histogram: one number, within the buckets
        q = self.eventually(
            'histogram_quantile(0.5, sum by (le) '
            '(sandgate_decision_seconds_bucket{listener="http"}))',
            lambda v: v == v)   # not NaN
        self.assertGreater(q, 0)
        self.assertLessEqual(q, 30)
        n = self.scalar('sum(sandgate_exchange_seconds_count{listener="http"})')
        self.assertEqual(n, ALLOWED)
        # nothing in the exposition was refused by Prometheus's parser
        self.assertEqual(self.scalar(
            'scrape_samples_post_metric_relabeling{job="sandgate"} - '
            'scrape_samples_scraped{job="sandgate"}'), 0)
        self.assertGreater(self.scalar('scrape_samples_scraped{job="sandgate"}'),
                           50)

    def exposed(self):
        """The gateway's metric names: every family its /metrics declares
        (with or without samples yet), a histogram's series names too."""
        url = "http://127.0.0.1:%d/metrics" % self.mport
        with self.opener.open(url, timeout=10) as r:
            text = r.read().decode()
        names = set()
        for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
            names.add(m.group(1))
            if m.group(2) == "histogram":
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
        self.assertIn("sandgate_requests_total", names)
        return names

    def test_alert_rules_load_and_evaluate(self):
        """The shipped rules load in Prometheus, evaluate without an error on
        a live gateway's series, none fires on it, and every metric they
        name is one it exposes."""
        self.eventually('up{job="sandgate"}', lambda v: v == 1)
        deadline = time.time() + 30 * T.SLOW
        while True:
            url = "http://127.0.0.1:%d/api/v1/rules" % self.pport
            with self.opener.open(url, timeout=10) as r:
                groups = json.load(r)["data"]["groups"]
            rules = [x for g in groups for x in g["rules"]]
            if rules and all(x.get("lastEvaluation", "").startswith("2")
                             and not x["lastEvaluation"].startswith("0001")
                             for x in rules) or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(len(rules), 9, rules)
        for x in rules:
            with self.subTest(rule=x["name"]):
                self.assertEqual(x["health"], "ok", x)
                self.assertEqual(x["state"], "inactive", x)
        exposed = self.exposed()
        with open(RULES) as f:
            named = set(METRIC_RX.findall(f.read()))
        self.assertTrue(named)
        self.assertEqual(named - exposed, set(), "rules name metrics the "
                         "gateway does not expose")

    def test_dashboard_queries(self):
        """Every panel's query of deploy/grafana/sandgate.json runs, and names
        only metrics the gateway exposes."""
        self.eventually('up{job="sandgate"}', lambda v: v == 1)
        with open(DASHBOARD) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        self.assertGreaterEqual(len(exprs), 10)
        exposed = self.exposed()
        for e in exprs:
            with self.subTest(expr=e):
                q = e.replace("$__rate_interval", "1m").replace("$instance", ".*")
                self.query(q)   # status success, or the test fails
                self.assertEqual(set(METRIC_RX.findall(e)) - exposed, set())


if __name__ == "__main__":
    unittest.main(verbosity=2)
