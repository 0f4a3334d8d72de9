#!/usr/bin/python3
"""
End-to-end test of audit.syslog (issue 16 point 4; docs/audit.md "Syslog"):
Debian's rsyslogd runs as this test's own process with its own config in
a temp dir, listening on loopback (imtcp for TCP with octet counting, imudp
for UDP). The gateway forwards every audit row; after N requests and a
clean stop, the collector holds every row of audit.db exactly once (ids
from 1 up, no gap), in RFC 5424 (rsyslog parses the app name, msgid and
the structured data) and in JSON (each message is the row as `audit
export` prints it). In the TCP run the collector starts only after half
of the requests: the rows waited in audit.db and none is lost.
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sgtest as T  # noqa: E402

RSYSLOGD = "/usr/sbin/rsyslogd"
N = 40


class Rsyslog:
    """rsyslogd -n with a config of our own: one input, one output file."""

    def __init__(self, tmp, name, port, udp=False):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.out = os.path.join(self.dir, "out.log")
        conf = os.path.join(self.dir, "rsyslog.conf")
        mod = "imudp" if udp else "imtcp"
        with open(conf, "w") as f:
            f.write('global(workDirectory="%s")\n' % self.dir)
            f.write('module(load="%s")\n' % mod)
            f.write('template(name="t" type="string" string="%app-name% '
                    '%msgid% %structured-data% %msg%\\n")\n')
            f.write('ruleset(name="r") {\n  action(type="omfile" file="%s" '
                    'template="t")\n}\n' % self.out)
            f.write('input(type="%s" address="127.0.0.1" port="%d" '
                    'ruleset="r")\n' % (mod, port))
        self.proc = T.Proc([RSYSLOGD, "-n", "-f", conf, "-i",
            os.path.join(self.dir, "rsyslogd.pid")],
            os.path.join(self.dir, "rsyslogd.log"))
        if not udp and not T.wait_tcp("127.0.0.1", port, 10 * T.SLOW,
                self.proc):
            tail = self.proc.log_tail()
            self.proc.stop()
            raise RuntimeError("rsyslogd did not listen:\n" + tail)
        if udp:
            time.sleep(0.5)  # no way to probe a UDP listener; see wait_lines

    def lines(self):
        if not os.path.exists(self.out):
            return []
        with open(self.out, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()

    def stop(self):
        self.proc.stop()


class AuditSyslogTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(RSYSLOGD, os.X_OK):
            T.skip_file("rsyslogd is not installed (package rsyslog)")
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = T.Origin("o", host="127.0.0.2")
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("ok.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)

    def run_gateway(self, name, syslog, before, after, collector):
        """Start a gateway with audit.syslog, send before + after requests
        (the collector started in between), stop it; its audit.db ids."""
        d = os.path.join(self.td.path, name)
        os.makedirs(d)
        pol = {"sandboxes": [T.local_sandbox("p")], "policies": [{
            "name": "p", "allow": [{"host": "ok.test",
            "ports": [self.origin.port]}],
            "allow_private": ["127.0.0.2/32"]}]}
        gw = T.Gateway(d, self.dns, {"p.yaml": pol},
            extra={"audit": {"syslog": syslog, "checkpoint_interval": "0"}})
        gw.start()
        col = None
        try:
            for i in range(before + after):
                if i == before:
                    col = collector()
                url = ("http://ok.test:%d/r%d" if i % 3 else
                       "http://denied.test:%d/r%d") % (self.origin.port, i)
                r = T.curl(url, proxy=gw.url)
                self.assertIn(r.status, (200, 403), r)
            if col is None:
                col = collector()
        finally:
            gw.stop()
        ids = [r["id"] for r in gw.audit_rows()]
        return gw, col, ids

    def wait_lines(self, col, want):
        deadline = time.time() + 30 * T.SLOW
        while time.time() < deadline:
            if len(col.lines()) >= want:
                break
            time.sleep(0.2)
        return col.lines()

    def test_rfc5424_tcp(self):
        port = T.free_port()
        holder = []

        def collector():
            holder.append(Rsyslog(self.td.path, "rs-tcp", port))
            self.addCleanup(holder[-1].stop)
            return holder[-1]

        gw, col, ids = self.run_gateway("gw-tcp",
            {"address": "127.0.0.1:%d" % port, "format": "rfc5424"},
            N // 2, N - N // 2, collector)
        self.assertGreaterEqual(len(ids), N)
        self.assertEqual(ids, list(range(1, len(ids) + 1)))
        lines = self.wait_lines(col, len(ids))
        got = []
        for ln in lines:
            m = re.match(r'^sandgate audit \[sandgate@32473 id="(\d+)"(.*)\] ',
                ln)
            self.assertTrue(m, "not parsed as RFC 5424 by rsyslog: %r" % ln)
            got.append(int(m.group(1)))
        self.assertEqual(sorted(got), ids, "rows missing or repeated")
        self.assertEqual(got, sorted(got), "rows out of order")
        # the row's fields are in the structured data
        denied = [ln for ln in lines if 'host="denied.test"' in ln]
        self.assertTrue(denied)
        self.assertIn('decision="deny"', denied[0])
        self.assertIn('reason="policy-deny"', denied[0])
        self.assertIn('hash="', denied[0])
        with open(gw.log_path, errors="replace") as f:
            log = f.read()
        self.assertRegex(log, r"forwarded to syslog 127\.0\.0\.1:%d "
            r"over TCP \(rfc5424\)" % port)

    def test_json_udp(self):
        port = T.free_port(udp_too=True)
        holder = []

        def collector():
            holder.append(Rsyslog(self.td.path, "rs-udp", port, udp=True))
            self.addCleanup(holder[-1].stop)
            return holder[-1]

        col = collector()  # UDP: nothing waits for a collector that is down
        gw, _, ids = self.run_gateway("gw-udp",
            {"address": "127.0.0.1:%d" % port, "format": "json",
             "transport": "udp"}, 0, N, lambda: col)
        self.assertEqual(ids, list(range(1, len(ids) + 1)))
        lines = self.wait_lines(col, len(ids))
        rows = []
        for ln in lines:
            self.assertTrue(ln.startswith("sandgate audit - "), ln)
            rows.append(json.loads(ln[len("sandgate audit - "):].strip()))
        self.assertEqual(sorted(r["id"] for r in rows), ids)
        db = {r["id"]: r for r in gw.audit_rows()}
        for r in rows:
            self.assertEqual(r["hash"], db[r["id"]]["hash"])
            self.assertEqual(r["decision"], db[r["id"]]["decision"])

    def test_config_errors(self):
        d = os.path.join(self.td.path, "cfgerr")
        os.makedirs(d)
        cases = [
            ("  syslog: { address: nowhere.example.com:514 }\n", "address:"),
            ("  syslog: { address: 127.0.0.1:514, format: cef }\n",
             "format: expected rfc5424 or json"),
            ("  syslog: { address: 127.0.0.1:514, transport: tls }\n",
             "transport: expected tcp or udp"),
            ("  syslog: { format: json }\n", "address is required"),
            ("  syslog: { address: 127.0.0.1:514, facility: 3 }\n",
             'unknown key "facility"'),
        ]
        for text, msg in cases:
            cfg = os.path.join(d, "sandgate.yaml")
            with open(cfg, "w") as f:
                f.write("state_dir: %s\npolicies: []\naudit:\n%s" % (
                    os.path.join(d, "var"), text))
            r = T.run_sandgate("policy", "check", "-c", cfg)
            self.assertEqual(r.returncode, 1, text)
            self.assertRegex(r.stdout + r.stderr,
                re.escape(cfg) + r":4:\d+: .*" + re.escape(msg))


if __name__ == "__main__":
    unittest.main(verbosity=2)
