#!/usr/bin/python3
"""
serve's log format and level (--log-format, --log-level, the config keys
log_format and log_level): every line a JSON gateway writes, the keeper's
too, parses with json.loads, including the decision line of a request whose
path carries a quote and a backslash and of one with raw control bytes;
the decision line's fields are keys of their own; options win over the
config; debug lines are absent at info, info lines absent at warn.
"""

import json
import os
import re
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
LEVELS = {"debug", "info", "warn", "error", "fatal"}


def requests(gw, origin):
    """An allowed request with " and \\ in its path, a raw control byte, a denial."""
    port = origin.port
    r = T.raw_request(gw.port, b'GET http://allowed.test:%d/q"uo\\te HTTP/1.1'
                      b'\r\nHost: allowed.test:%d\r\n\r\n' % (port, port))
    assert r is not None and r.status == 200, r
    r = T.raw_request(gw.port, b'GET http://allowed.test:%d/c\x01\x7f\xff HTTP/1.1'
                      b'\r\nHost: allowed.test:%d\r\n\r\n' % (port, port))
    assert r is not None and r.status == 400, r
    r = T.raw_request(gw.port, b'GET http://denied.test/d"x HTTP/1.1\r\n'
                      b'Host: denied.test\r\n\r\n')
    assert r is not None and r.status == 403, r


def json_lines(test, text):
    out = []
    for line in text.splitlines():
        with test.subTest(line=line):
            obj = json.loads(line)
            test.assertRegex(obj["ts"], TS)
            test.assertIn(obj["level"], LEVELS)
            test.assertIsInstance(obj["msg"], str)
            out.append(obj)
    return out


class LogFormatTest(unittest.TestCase):
    def run_gateway(self, extra, args=(), logged=True):
        td = T.TempDir()
        self.addCleanup(td.cleanup)
        origin = T.Origin("origin", host="127.0.0.2")
        self.addCleanup(origin.stop)
        dns = T.Dnsmasq(td.path, [("allowed.test", "127.0.0.2")])
        self.addCleanup(dns.stop)
        policy = {"sandboxes": [T.local_sandbox("dev")],
                  "policies": [{"name": "dev",
                                "allow": [{"host": "allowed.test",
                                           "ports": [origin.port]}],
                                "allow_private": ["127.0.0.2/32"]}]}
        gw = T.Gateway(td.path, dns, {"dev.yaml": policy}, extra=extra)
        gw.start(args=args)
        self.addCleanup(gw.stop)
        requests(gw, origin)
        if logged:
            self.assertTrue(gw.wait_log(r"d\\?\"x", timeout=5), gw.log_tail())
        else:   # not in the log: the audit row says the denial happened
            self.assertTrue(gw.wait_audit(host="denied.test"), gw.log_tail())
        time.sleep(0.2)
        text = gw.log_text()
        gw.stop()
        return text

    def test_json_from_the_config(self):
        text = self.run_gateway({"log_format": "json", "log_level": "debug"})
        objs = json_lines(self, text)
        levels = {o["level"] for o in objs}
        self.assertIn("debug", levels)
        # the keeper (a child process) writes JSON too
        self.assertTrue(any(o["msg"].startswith("keeper:") for o in objs),
                        text)
        allow = [o for o in objs if o.get("decision") == "allow"]
        self.assertEqual(len(allow), 1, text)
        self.assertEqual(allow[0]["kind"], "http")
        self.assertEqual(allow[0]["host"], "allowed.test")
        self.assertEqual(allow[0]["status"], "200")
        # the quote as is, the backslash as log_escape writes it (\x5c)
        self.assertEqual(allow[0]["path"], '/q"uo\\x5cte')
        deny = [o for o in objs if o.get("decision") == "deny"]
        self.assertEqual(sorted(o["status"] for o in deny), ["400", "403"],
                         text)
        self.assertEqual([o["path"] for o in deny if o["status"] == "403"],
                         ['/d"x'])
        for o in deny:
            self.assertEqual(o["sandbox"], "local" if o["status"] == "403"
                             else o["sandbox"])
            self.assertIn(o["reason"], ("policy-deny", "bad-request"))

    def test_options_win_over_the_config(self):
        text = self.run_gateway({"log_format": "text", "log_level": "debug"},
                                args=("--log-format", "json",
                                      "--log-level", "info"))
        objs = json_lines(self, text)
        levels = {o["level"] for o in objs}
        self.assertNotIn("debug", levels, text)
        self.assertIn("info", levels, text)
        self.assertTrue(any(o["msg"] == "ready" for o in objs), text)

    def test_json_failure_is_json(self):
        """serve that cannot start says why in a JSON line of level error."""
        td = T.TempDir()
        self.addCleanup(td.cleanup)
        dns = T.Dnsmasq(td.path, [("allowed.test", "127.0.0.2")])
        self.addCleanup(dns.stop)
        gw = T.Gateway(td.path, dns, {})
        import socket
        s = socket.socket()
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", gw.port))
        s.listen(1)
        r = T.run_sandgate("serve", "-c", gw.cfg_path, "--log-format", "json",
                           cwd=td.path)
        self.assertEqual(r.returncode, 1, r)
        objs = json_lines(self, r.stderr)
        self.assertTrue(objs, r)
        self.assertEqual(objs[-1]["level"], "error", r.stderr)
        self.assertIn(str(gw.port), objs[-1]["msg"], r.stderr)

    def test_text_at_warn(self):
        text = self.run_gateway({}, args=("--log-level", "warn"),
                                logged=False)
        for line in text.splitlines():
            with self.subTest(line=line):
                self.assertNotRegex(line, r"^\S+ sandgate (info|debug): ")
                self.assertFalse(line.startswith("{"), line)
        self.assertNotIn("ready", text)
        self.assertNotIn("deny http", text)


if __name__ == "__main__":
    T.main()
