#!/usr/bin/python3
"""
End-to-end tests of the metrics listener (SPEC §3 listen.metrics, §5
"Metrics"): Prometheus text format 0.0.4 at GET /metrics, every line a
comment or a parseable sample with its # HELP and # TYPE, counters that move
with real traffic and reloads, 404 and 405 elsewhere, no crossing with the
admin socket, and a busy port that stops start-up with one clear line.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
MAX_CONNS = 4
PLACEHOLDER = "sgtest-metrics-placeholder-0001"

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*=" + LABEL_VALUE
SAMPLE_RX = re.compile(r"^(%s)(?:\{(%s(?:,%s)*)?,?\})? (\S+)(?: (-?\d+))?$"
                       % (NAME, LABEL, LABEL))
LABEL_RX = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)=(%s)' % LABEL_VALUE)
HELP_RX = re.compile(r"^# HELP (%s) (.*)$" % NAME)
TYPE_RX = re.compile(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$"
                     % NAME)

# name -> (type, set of label sets expected)
EXPECTED = {
    "sandgate_build_info": ("gauge", None),
    "sandgate_workers": ("gauge", [()]),
    "sandgate_connections": ("gauge", [()]),
    "sandgate_connections_limit": ("gauge", [()]),
    "sandgate_connections_refused_total": ("counter", [()]),
    "sandgate_connections_evicted_total": ("counter", [()]),
    "sandgate_rate_limited_total": ("counter", [()]),
    "sandgate_rate_limited_unaudited_total": ("counter", [()]),
    "sandgate_audit_rows_written_total": ("counter", [()]),
    "sandgate_audit_producer_stalls_total": ("counter", [()]),
    "sandgate_audit_checkpoints_total": ("counter", [()]),
    "sandgate_audit_checkpoint_failures_total": ("counter", [()]),
    "sandgate_audit_unavailable": ("gauge", [()]),
    "sandgate_audit_write_failures_total": ("counter", [()]),
    "sandgate_audit_rows_waiting": ("gauge", [()]),
    "sandgate_audit_write_seconds": ("histogram", None),
    "sandgate_audit_rows_dropped_total": ("counter", [()]),
    "sandgate_sandboxes": ("gauge", [(("kind", "static"),),
                                     (("kind", "registered"),)]),
    "sandgate_tunnels_spliced_total": ("counter", [()]),
    "sandgate_splice_fallbacks_total": ("counter", [()]),
    # one sample per refused call: a healthy gateway has none
    "sandgate_seccomp_refused_total": ("counter", []),
    "sandgate_keeper_up": ("gauge", [()]),
    "sandgate_keeper_rtt_seconds": ("histogram", None),
    "sandgate_keeper_restarts_total": ("counter", [()]),
    "sandgate_tls_leaf_cache_hits_total": ("counter", [()]),
    "sandgate_tls_leaf_cache_misses_total": ("counter", [()]),
    "sandgate_tls_leaf_cache_entries": ("gauge", [()]),
    "sandgate_policy_reloads_total": ("counter", [(("result", "ok"),),
                                                  (("result", "error"),)]),
    # by what traffic came: label sets checked by the tests below
    "sandgate_requests_total": ("counter", None),
    "sandgate_sandbox_requests_total": ("counter", None),
    "sandgate_bytes_total": ("counter", None),
    "sandgate_sandbox_bytes_total": ("counter", None),
    "sandgate_sandbox_connections_open": ("gauge", None),
    "sandgate_limit_refusals_total": ("counter", [
        (("limit", l),) for l in ("max_connections", "per_sandbox", "head_timeout",
                                  "max_header_bytes", "idle_timeout")]),
    "sandgate_tunnels_open": ("gauge", [
        (("kind", k), ("listener", l))
        for l in ("http", "connect", "socks5", "transparent", "ingress")
        for k in ("intercepted", "relayed", "websocket")]),
    "sandgate_credential_requests_total": ("counter", None),
    "sandgate_decision_seconds": ("histogram", None),
    "sandgate_upstream_connect_seconds": ("histogram", None),
    "sandgate_origin_tls_seconds": ("histogram", None),
    "sandgate_first_byte_seconds": ("histogram", None),
    "sandgate_exchange_seconds": ("histogram", None),
}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1),
                  v[1:-1])


def parse_exposition(test, text):
    """{(name, ((label, value), ...)): float}; fails the test on any bad line."""
    samples, helps, types = {}, {}, {}
    test.assertTrue(text.endswith("\n"), "exposition must end with a newline")
    for line in text.split("\n")[:-1]:
        if line.startswith("#"):
            m = HELP_RX.match(line) or TYPE_RX.match(line)
            test.assertIsNotNone(m, "bad comment line: %r" % line)
            name = m.group(1)
            target = helps if line.startswith("# HELP") else types
            test.assertNotIn(name, target, "repeated comment: %r" % line)
            test.assertNotIn(name, {k[0] for k in samples},
                             "comment after the family's samples: %r" % line)
            target[name] = m.group(2)
            continue
        m = SAMPLE_RX.match(line)
        test.assertIsNotNone(m, "bad sample line: %r" % line)
        name, labels_text, value = m.group(1), m.group(2) or "", m.group(3)
        labels = tuple(sorted((k, unescape(v))
                              for k, v in LABEL_RX.findall(labels_text)))
        fam = name
        for suf in HISTOGRAM_SUFFIXES:
            base = name[:-len(suf)]
            if name.endswith(suf) and types.get(base) == "histogram":
                fam = base
                test.assertEqual(suf == "_bucket", "le" in dict(labels), line)
        test.assertIn(fam, helps, "sample before its # HELP: %r" % line)
        test.assertIn(fam, types, "sample before its # TYPE: %r" % line)
        test.assertTrue(types[fam] != "histogram" or fam != name,
                        "a histogram's sample without its suffix: %r" % line)
        test.assertTrue(name.startswith("sandgate_"), line)
        key = (name, labels)
        test.assertNotIn(key, samples, "duplicate sample: %r" % line)
        samples[key] = float(value)
        if types[fam] == "counter":
            test.assertTrue(name.endswith("_total"), line)
            test.assertGreaterEqual(samples[key], 0, line)
    return samples, types


def http_get(port, method="GET", path="/metrics", body=None, timeout=10):
    """One request on a fresh connection; (status, lower-case headers, body)."""
    return T.tcp_http(port, method, path, body=body, timeout=timeout)


def eventually(fn, timeout=5.0):
    deadline = time.time() + timeout * T.SLOW
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(0.1)


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-metrics-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.cert, cls.key = T.make_cert(d, cn="keys.test",
                                       names=["keys.test", "pass.test"])
        cls.tls = T.Origin("tls", host=ORIGIN_HOST, cert=cls.cert, key=cls.key)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [("allowed.test", ORIGIN_HOST),
                                ("denied.test", ORIGIN_HOST),
                                ("keys.test", ORIGIN_HOST),
                                ("pass.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.mport = T.free_port()
        cls.dport = T.free_port(udp_too=True)
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": cls.policy_doc()},
            extra={"listen": {"metrics": "127.0.0.1:%d" % cls.mport,
                              "admin": cls.sock,
                              "dns": "127.0.0.1:%d" % cls.dport},
                   "limits": {"max_connections": MAX_CONNS},
                   "upstream": {"ca_bundle": cls.cert}},
            workers=2)
        r = T.run_sandgate("vault", "set", "apikey-secret", "-c",
                           cls.gw.cfg_path, input="the-real-key\n")
        if r.returncode != 0:
            raise RuntimeError("vault set: " + r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.mport, 10 * T.SLOW, cls.gw.proc):
            raise AssertionError("metrics port not listening:\n" +
                                 cls.gw.log_tail())
        eventually(lambda: os.path.exists(cls.sock))

    @classmethod
    def policy_doc(cls, broken=False):
        doc = {"sandboxes": [T.local_sandbox("main")],
               "credentials": [{"name": "apikey", "secret": "apikey-secret",
                                "hosts": ["keys.test"],
                                "placeholder": PLACEHOLDER}],
               "policies": [{"name": "main",
                             "allow": [{"host": "allowed.test",
                                        "ports": [cls.origin.port]},
                                       {"host": "keys.test",
                                        "ports": [cls.tls.port],
                                        "tls": "intercept"},
                                       {"host": "pass.test",
                                        "ports": [cls.tls.port]}],
                             "allow_private": [ORIGIN_HOST + "/32"],
                             "credentials": ["apikey"]}]}
        if broken:
            doc["policies"][0]["no_such_key"] = 1
        return doc

    def scrape(self):
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport, tmp=self.td.path)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        ctype = r.header("Content-Type") or ""
        parts = [p.strip() for p in ctype.split(";")]
        self.assertEqual(parts[0], "text/plain", ctype)
        self.assertIn("version=0.0.4", parts[1:], ctype)
        samples, _ = parse_exposition(self, r.body.decode("utf-8"))
        return samples

    def value(self, samples, name, **labels):
        key = (name, tuple(sorted(labels.items())))
        self.assertIn(key, samples, sorted(samples))
        return samples[key]

    def wait_value(self, name, pred, timeout=5.0, **labels):
        """Scrape until pred(value) holds; the last value."""
        deadline = time.time() + timeout * T.SLOW
        while True:
            v = self.value(self.scrape(), name, **labels)
            if pred(v) or time.time() > deadline:
                return v
            time.sleep(0.1)

    # -------------------------------------------------------------- format

    def test_every_family_with_help_and_type(self):
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport, tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        samples, types = parse_exposition(self, r.body.decode("utf-8"))
        for name, (typ, label_sets) in EXPECTED.items():
            with self.subTest(metric=name):
                self.assertEqual(types.get(name), typ, types)
                have = sorted(k[1] for k in samples if k[0] == name)
                if label_sets is not None:
                    self.assertEqual(have, sorted(label_sets))
        self.assertEqual(set(types), set(EXPECTED), "unexpected families")

    def test_values_match_status(self):
        st, _, body = T.unix_http(self.sock, b"GET /v1/status HTTP/1.1\r\n"
            b"Host: sandgate\r\nConnection: close\r\n\r\n")
        self.assertEqual(st, 200)
        status = json.loads(body)
        s = self.scrape()
        versions = [k[1] for k in s if k[0] == "sandgate_build_info"]
        self.assertEqual(versions, [(("version", status["version"]),)])
        self.assertEqual(self.value(s, "sandgate_build_info",
                                    version=status["version"]), 1)
        self.assertEqual(self.value(s, "sandgate_workers"), 2)
        self.assertEqual(self.value(s, "sandgate_workers"), status["workers"])
        self.assertEqual(self.value(s, "sandgate_sandboxes", kind="static"), 1)
        self.assertEqual(self.value(s, "sandgate_connections_limit"), MAX_CONNS)

    def test_output_is_deterministic(self):
        """Two scrapes list the same lines in the same order (values aside)."""
        def shape():
            r = T.curl("http://127.0.0.1:%d/metrics" % self.mport,
                       tmp=self.td.path)
            return [re.sub(r" \S+$", "", l) if not l.startswith("#") else l
                    for l in r.body.decode().splitlines()]
        self.assertEqual(shape(), shape())


    # -------------------------------------------------------------- counters

    def test_denied_connect_writes_an_audit_row(self):
        before = self.value(self.scrape(), "sandgate_audit_rows_written_total")
        r = T.curl("https://denied.test:443/", proxy=self.gw.url,
                   tmp=self.td.path)
        self.assertEqual(r.status, 403, r)
        rows = self.gw.wait_audit(kind="connect", host="denied.test",
                                  decision="deny")
        self.assertTrue(rows, "no audit row for the denied CONNECT")
        after = self.wait_value("sandgate_audit_rows_written_total",
                                lambda v: v >= before + 1)
        self.assertGreaterEqual(after, before + 1)
        self.assertEqual(self.value(self.scrape(),
                                    "sandgate_audit_producer_stalls_total"), 0)

    def get(self, samples, name, **labels):
        """A sample's value, 0 when the gateway has not shown it yet."""
        return samples.get((name, tuple(sorted(labels.items()))), 0)

    def check_histogram(self, samples, name, listener):
        """Buckets cumulative, +Inf equal to _count; the count."""
        buckets = sorted((float(dict(k[1])["le"]), v) for k, v in samples.items()
                         if k[0] == name + "_bucket"
                         and dict(k[1])["listener"] == listener)
        self.assertTrue(buckets, name)
        self.assertEqual(buckets[-1][0], float("inf"))
        for (_, a), (_, b) in zip(buckets, buckets[1:]):
            self.assertLessEqual(a, b, buckets)
        count = self.value(samples, name + "_count", listener=listener)
        self.assertEqual(buckets[-1][1], count)
        self.assertGreaterEqual(self.value(samples, name + "_sum",
                                           listener=listener), 0)
        return count

    def test_decisions_counted_by_listener_reason_sandbox(self):
        """Each exchange counted once: by listener, decision and reason, by
        sandbox, its bytes, and in both histograms."""
        s0 = self.scrape()
        body = 1000
        r = T.curl("http://allowed.test:%d/bytes/%d" % (self.origin.port, body),
                   proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        for _ in range(2):
            r = T.curl("https://denied.test:443/", proxy=self.gw.url,
                       tmp=self.td.path)
            self.assertEqual(r.status, 403, r)
        # a target that is no host name: refused before any rule, as an
        # invalid destination (docs/audit.md: its row names it)
        with socket.create_connection(("127.0.0.1", self.gw.port), 10) as c:
            c.sendall(b"GET http://bad_host!.test/ HTTP/1.1\r\n"
                      b"Host: bad_host!.test\r\nConnection: close\r\n\r\n")
            head = c.recv(4096)
        self.assertTrue(head.startswith(b"HTTP/1.1 403 "), head)
        self.assertIn(b"x-sandgate-reason: invalid-host", head.lower())
        self.gw.wait_audit(kind="http", host="allowed.test", decision="allow")

        def moved(s):
            return (self.get(s, "sandgate_requests_total", listener="connect",
                             decision="deny", reason="policy-deny")
                    - self.get(s0, "sandgate_requests_total", listener="connect",
                               decision="deny", reason="policy-deny") >= 2)
        s1 = eventually(lambda: (lambda s: s if moved(s) else None)(self.scrape()))
        self.assertTrue(s1, "the denied CONNECTs were not counted")

        def delta(name, **labels):
            return self.get(s1, name, **labels) - self.get(s0, name, **labels)
        self.assertEqual(delta("sandgate_requests_total", listener="connect",
                               decision="deny", reason="policy-deny"), 2)
        self.assertEqual(delta("sandgate_requests_total", listener="http",
                               decision="allow", reason="none"), 1)
        self.assertEqual(delta("sandgate_requests_total", listener="http",
                               decision="deny", reason="invalid-host"), 1)
        # the invalid destination's request came from sandbox local's
        # address: it is that sandbox's (docs/audit.md, column sandbox)
        self.assertEqual(delta("sandgate_sandbox_requests_total", sandbox="local",
                               decision="deny"), 3)
        self.assertEqual(delta("sandgate_sandbox_requests_total", sandbox="local",
                               decision="allow"), 1)
        # only sandbox names the policy has, no free text from requests
        names = {dict(k[1])["sandbox"] for k in s1
                 if k[0] == "sandgate_sandbox_requests_total"}
        self.assertEqual(names, {"local"})
        self.assertGreaterEqual(delta("sandgate_bytes_total", listener="http",
                                      direction="down"), body)
        self.assertGreaterEqual(delta("sandgate_sandbox_bytes_total",
                                      sandbox="local", direction="down"), body)
        # a row per exchange: the histograms' counts move with them
        n0 = self.get(s0, "sandgate_decision_seconds_count", listener="connect")
        self.assertEqual(self.check_histogram(s1, "sandgate_decision_seconds",
                                              "connect") - n0, 2)
        n0 = self.get(s0, "sandgate_exchange_seconds_count", listener="http")
        self.assertEqual(self.check_histogram(s1, "sandgate_exchange_seconds",
                                              "http") - n0, 2)
        # a placeholder toward a host its credential is not bound to
        n0 = self.get(s1, "sandgate_credential_requests_total",
                      credential="apikey", outcome="misuse")
        r = T.curl("http://allowed.test:%d/leak" % self.origin.port,
                   proxy=self.gw.url, tmp=self.td.path,
                   args=["-H", "Authorization: Bearer " + PLACEHOLDER])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-misuse")
        # a misuse is logged at warning, other denials at info
        self.assertTrue(self.gw.wait_log(
            r"sandgate warn: deny http .*path=/leak .*reason=credential-misuse"),
            self.gw.log_tail())
        self.assertTrue(self.gw.wait_log(
            r"sandgate info: deny connect .*host=denied\.test .*reason=policy-deny"),
            self.gw.log_tail())
        s1 = eventually(lambda: (lambda s: s if self.get(
            s, "sandgate_credential_requests_total", credential="apikey",
            outcome="misuse") > n0 else None)(self.scrape()))
        self.assertTrue(s1, "the misuse was not counted")
        self.assertEqual(self.get(s1, "sandgate_credential_requests_total",
                                  credential="apikey", outcome="misuse"), n0 + 1)
        self.assertEqual(self.get(s1, "sandgate_credential_requests_total",
                                  credential="apikey", outcome="swapped"), 0)
        # an intercepted request: its origin's connect, TLS handshake and
        # first byte, and its placeholder swapped
        s2 = self.scrape()
        r = T.curl("https://keys.test:%d/k" % self.tls.port, proxy=self.gw.url,
                   tmp=self.td.path, args=["--cacert", self.gw.ca_path(),
                                           "-H", "Authorization: Bearer " +
                                           PLACEHOLDER])
        self.assertEqual(r.status, 200, r)
        self.gw.wait_audit(kind="connect", host="keys.test", path="/k")
        s3 = eventually(lambda: (lambda s: s if self.get(
            s, "sandgate_first_byte_seconds_count", listener="connect") >
            self.get(s2, "sandgate_first_byte_seconds_count",
                     listener="connect") else None)(self.scrape()))
        self.assertTrue(s3, "the intercepted request's first byte not counted")
        for fam in ("sandgate_upstream_connect_seconds",
                    "sandgate_origin_tls_seconds",
                    "sandgate_first_byte_seconds"):
            with self.subTest(family=fam):
                n0 = self.get(s2, fam + "_count", listener="connect")
                self.assertEqual(self.check_histogram(s3, fam, "connect") - n0,
                                 1)
        self.assertEqual(self.get(s3, "sandgate_credential_requests_total",
                                  credential="apikey", outcome="swapped") -
                         self.get(s2, "sandgate_credential_requests_total",
                                  credential="apikey", outcome="swapped"), 1)
        # the plain request had a connect and a first byte, no TLS
        self.assertGreaterEqual(self.check_histogram(
            s3, "sandgate_first_byte_seconds", "http"), 1)
        self.assertEqual(self.get(s3, "sandgate_origin_tls_seconds_count",
                                  listener="http"), 0)
        # the keeper signed the leaf and handed out the secret; the audit
        # writer committed the rows: both histograms without a label
        for fam in ("sandgate_keeper_rtt_seconds", "sandgate_audit_write_seconds"):
            with self.subTest(family=fam):
                buckets = sorted(
                    (float(dict(k[1])["le"]), v) for k, v in s3.items()
                    if k[0] == fam + "_bucket")
                self.assertEqual(buckets[-1][0], float("inf"))
                for (_, a), (_, b) in zip(buckets, buckets[1:]):
                    self.assertLessEqual(a, b, buckets)
                self.assertEqual(buckets[-1][1], self.value(s3, fam + "_count"))
                self.assertGreaterEqual(self.value(s3, fam + "_count"), 1)
                self.assertGreater(self.value(s3, fam + "_sum"), 0)
        n0 = self.get(s2, "sandgate_keeper_rtt_seconds_count")
        self.assertGreaterEqual(self.get(s3, "sandgate_keeper_rtt_seconds_count")
                                - n0, 1, "the leaf for keys.test was signed")
        # the sum of every decision is the audit's count of rows
        total = sum(v for k, v in s1.items() if k[0] == "sandgate_requests_total")
        by_sandbox = sum(v for k, v in s1.items()
                         if k[0] == "sandgate_sandbox_requests_total")
        self.assertGreaterEqual(total, by_sandbox)

    def tunnel(self, host, port, ca=None):
        """A CONNECT tunnel with TLS through it and one request answered;
        the socket, left open."""
        import ssl
        raw = socket.create_connection(("127.0.0.1", self.gw.port), 10)
        raw.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                    % (host.encode(), port, host.encode(), port))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = raw.recv(4096)
            self.assertTrue(chunk, head)
            head += chunk
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        ctx = ssl.create_default_context(cafile=ca or self.cert)
        tls = ctx.wrap_socket(raw, server_hostname=host)
        tls.sendall(b"GET /t HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
        self.assertTrue(tls.recv(4096).startswith(b"HTTP/1.1 200"))
        return tls

    def test_dns_queries_counted(self):
        """The DNS listener's queries: an answered one and a refused one,
        each once, under listener dns."""
        def count(s, **labels):
            return self.get(s, "sandgate_requests_total", listener="dns",
                            **labels)
        s0 = self.scrape()
        q = H.dig(["@127.0.0.1", "-p", str(self.dport), "allowed.test", "A"])
        self.assertEqual(q.status, "NOERROR", q)
        q = H.dig(["@127.0.0.1", "-p", str(self.dport), "denied.test", "A"])
        self.assertEqual(q.status, "NXDOMAIN", q)
        s1 = eventually(lambda: (lambda s: s if count(
            s, decision="deny", reason="policy-deny") > count(
            s0, decision="deny", reason="policy-deny") else None)(self.scrape()))
        self.assertTrue(s1, "the refused query was not counted")
        self.assertEqual(count(s1, decision="deny", reason="policy-deny") -
                         count(s0, decision="deny", reason="policy-deny"), 1)
        self.assertEqual(count(s1, decision="allow", reason="none") -
                         count(s0, decision="allow", reason="none"), 1)
        self.assertEqual(self.get(s1, "sandgate_decision_seconds_count",
                                  listener="dns") -
                         self.get(s0, "sandgate_decision_seconds_count",
                                  listener="dns"), 2)

    def test_limit_refusals_by_limit(self):
        """A head over limits.max_header_bytes: a refusal of that limit."""
        def n():
            return self.value(self.scrape(), "sandgate_limit_refusals_total",
                              limit="max_header_bytes")
        n0 = n()
        with socket.create_connection(("127.0.0.1", self.gw.port), 10) as c:
            c.sendall(b"GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n"
                      % self.origin.port + b"X-Pad: " + b"a" * 70000 + b"\r\n\r\n")
            head = c.recv(4096)
        self.assertTrue(head.startswith(b"HTTP/1.1 431 "), head)
        self.assertEqual(eventually(lambda: n() == n0 + 1), True)

    def test_tunnels_open_by_kind(self):
        """The gauge follows tunnels held open, by kind, and comes back."""
        def open_now(kind):
            return self.value(self.scrape(), "sandgate_tunnels_open",
                              listener="connect", kind=kind)
        base = {k: open_now(k) for k in ("intercepted", "relayed", "websocket")}
        # TLS passed through: relayed; TLS intercepted: intercepted
        t1 = self.tunnel("pass.test", self.tls.port)
        t2 = self.tunnel("keys.test", self.tls.port, ca=self.gw.ca_path())
        try:
            self.assertEqual(eventually(lambda: open_now("relayed") ==
                                        base["relayed"] + 1), True)
            self.assertEqual(open_now("intercepted"), base["intercepted"] + 1)
            self.assertEqual(open_now("websocket"), base["websocket"])
        finally:
            t1.close()
            t2.close()
        self.assertEqual(eventually(lambda: open_now("relayed") ==
                                    base["relayed"] and
                                    open_now("intercepted") ==
                                    base["intercepted"]), True,
                         {k: v for k, v in self.scrape().items()
                          if k[0] == "sandgate_tunnels_open"})

    def test_sandbox_connections_open(self):
        """Open connections by the sandbox they identified as: two tunnels
        and a kept-alive request connection of sandbox local count 3 (a
        denial would close its connection); an
        unidentified connection (no request yet) does not count; all back
        to the base when they close, and the series stays (0 is a value)."""
        def open_now():
            return self.value(self.scrape(), "sandgate_sandbox_connections_open",
                              sandbox="local") or 0
        base = self.wait_value("sandgate_connections", lambda v: v == 0)
        self.assertEqual(base, 0)
        self.assertEqual(eventually(lambda: open_now() == 0), True)
        t1 = self.tunnel("pass.test", self.tls.port)
        t2 = self.tunnel("keys.test", self.tls.port, ca=self.gw.ca_path())
        idle = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        kept = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        try:
            url = "allowed.test:%d" % self.origin.port
            kept.sendall(("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" %
                          (url, url)).encode())
            self.assertTrue(kept.recv(4096).startswith(b"HTTP/1.1 200 "))
            self.assertEqual(eventually(lambda: open_now() == 3), True,
                             open_now())
            self.assertEqual(self.value(self.scrape(), "sandgate_connections"), 4)
        finally:
            for c in (t1, t2, idle, kept):
                c.close()
        self.assertEqual(eventually(lambda: open_now() == 0), True, open_now())
        self.assertIn(("sandgate_sandbox_connections_open",
                       (("sandbox", "local"),)), self.scrape())

    def test_connections_gauge_and_refusals(self):
        base = self.wait_value("sandgate_connections", lambda v: v == 0)
        self.assertEqual(base, 0)
        refused0 = self.value(self.scrape(), "sandgate_connections_refused_total")
        held = []
        try:
            for _ in range(MAX_CONNS):
                held.append(socket.create_connection(("127.0.0.1", self.gw.port),
                                                     timeout=5))
            v = self.wait_value("sandgate_connections",
                                lambda v: v == MAX_CONNS)
            self.assertEqual(v, MAX_CONNS)
            # One more than max_connections: accepted by the kernel, then closed.
            extra = socket.create_connection(("127.0.0.1", self.gw.port),
                                             timeout=5 * T.SLOW)
            try:
                try:
                    got = extra.recv(1)
                except ConnectionResetError:
                    got = b""
                self.assertEqual(got, b"")
            finally:
                extra.close()
            refused = self.wait_value("sandgate_connections_refused_total",
                                      lambda v: v == refused0 + 1)
            self.assertEqual(refused, refused0 + 1)
            # the same refusal, by the limit that made it
            self.assertEqual(self.value(self.scrape(),
                                        "sandgate_limit_refusals_total",
                                        limit="max_connections"), refused)
            self.assertEqual(self.value(self.scrape(), "sandgate_connections"),
                             MAX_CONNS)
        finally:
            for s in held:
                s.close()
        self.assertEqual(self.wait_value("sandgate_connections",
                                         lambda v: v == 0), 0)

    def test_registered_sandboxes(self):
        s = self.scrape()
        reg0 = self.value(s, "sandgate_sandboxes", kind="registered")
        body = json.dumps({"id": "metrics-dyn", "policy": "main",
                           "source": "198.18.0.77"}).encode()
        st, _, out = T.unix_http(self.sock, b"POST /v1/sandboxes HTTP/1.1\r\n"
            b"Host: sandgate\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
            % len(body) + body)
        self.assertEqual(st, 201, out)
        try:
            s = self.scrape()
            self.assertEqual(self.value(s, "sandgate_sandboxes",
                                        kind="registered"), reg0 + 1)
            self.assertEqual(self.value(s, "sandgate_sandboxes", kind="static"), 1)
        finally:
            st, _, out = T.unix_http(self.sock, b"DELETE /v1/sandboxes/metrics-dyn "
                b"HTTP/1.1\r\nHost: sandgate\r\nConnection: close\r\n\r\n")
            self.assertEqual(st, 200, out)
        self.assertEqual(self.value(self.scrape(), "sandgate_sandboxes",
                                    kind="registered"), reg0)

    def test_reload_counters(self):
        s = self.scrape()
        ok0 = self.value(s, "sandgate_policy_reloads_total", result="ok")
        err0 = self.value(s, "sandgate_policy_reloads_total", result="error")
        self.gw.reload()
        ok = self.wait_value("sandgate_policy_reloads_total",
                             lambda v: v == ok0 + 1, result="ok")
        self.assertEqual(ok, ok0 + 1, self.gw.log_tail())
        self.assertEqual(self.value(self.scrape(), "sandgate_policy_reloads_total",
                                    result="error"), err0)
        self.gw.write_policy("main.yaml", self.policy_doc(broken=True))
        try:
            self.gw.reload()
            err = self.wait_value("sandgate_policy_reloads_total",
                                  lambda v: v == err0 + 1, result="error")
            self.assertEqual(err, err0 + 1, self.gw.log_tail())
            self.assertEqual(self.value(self.scrape(),
                "sandgate_policy_reloads_total", result="ok"), ok0 + 1)
        finally:
            self.gw.write_policy("main.yaml", self.policy_doc())
            self.gw.reload()
            self.wait_value("sandgate_policy_reloads_total",
                            lambda v: v == ok0 + 2, result="ok")

    # -------------------------------------------------------------- routing

    def test_other_paths_404(self):
        for path in ("/other", "/", "/metrics/", "/v1/status", "/metricsx"):
            with self.subTest(path=path):
                st, _, _ = http_get(self.mport, path=path)
                self.assertEqual(st, 404)

    def test_query_string_is_ignored(self):
        st, _, body = http_get(self.mport, path="/metrics?x=1")
        self.assertEqual(st, 200)
        self.assertIn(b"sandgate_workers", body)

    def test_other_methods_405(self):
        for method, body in (("POST", b""), ("POST", b"x=1"), ("PUT", b"{}"),
                             ("DELETE", None), ("HEAD", None)):
            with self.subTest(method=method, body=body):
                st, hdrs, _ = http_get(self.mport, method=method, body=body)
                self.assertEqual(st, 405)
                self.assertEqual(hdrs.get("allow"), "GET")
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport,
                   args=["-X", "POST"], tmp=self.td.path)
        self.assertEqual(r.status, 405, r)

    def test_admin_and_metrics_do_not_cross(self):
        st, _, _ = T.unix_http(self.sock, b"GET /metrics HTTP/1.1\r\n"
            b"Host: sandgate\r\nConnection: close\r\n\r\n")
        self.assertEqual(st, 404)
        for path in ("/v1/status", "/v1/sandboxes"):
            with self.subTest(path=path):
                st, _, body = http_get(self.mport, path=path)
                self.assertEqual(st, 404)
                self.assertNotIn(b"version", body)


class MetricsStartupTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir("sgtest-metrics-busy-")
        self.addCleanup(self.td.cleanup)
        self.dns = T.Dnsmasq(self.td.path, [])
        self.addCleanup(self.dns.stop)

    def test_port_in_use_stops_start_up(self):
        busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        gw = T.Gateway(self.td.path, self.dns, {},
            extra={"listen": {"metrics": "127.0.0.1:%d" % port}})
        r = subprocess.run([T.BIN, "serve", "-c", gw.cfg_path], cwd=self.td.path,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=T.clean_env(), timeout=30 * T.SLOW,
            text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "127.0.0.1:%d" % port in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("listen metrics on 127.0.0.1:%d" % port, lines[0])
        self.assertIn("Address already in use", lines[0])
        self.assertNotIn("listening: metrics", r.stderr)
        self.assertNotRegex(r.stderr, re.compile(r" info: ready$", re.M))
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                       "runtime error:"):
            self.assertNotIn(marker, r.stderr)

    def test_null_disables(self):
        gw = T.Gateway(self.td.path, self.dns, {},
            extra={"listen": {"metrics": None}})
        gw.start()
        self.addCleanup(gw.stop)
        self.assertTrue(gw.wait_log(r"\bready\b"), gw.log_tail())
        self.assertNotIn("metrics on", gw.log_text())


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
