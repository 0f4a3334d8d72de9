#!/usr/bin/python3
"""
Rows of their own (issue 22, acceptance 7): a malformed request pipelined
behind another in the same write gets its own audit row -- 400,
bad-request, and only what it parsed itself (nothing: a request that did
not parse has no method, host or path) -- never the earlier request's
host, address, rule, credential or byte counts. Over absolute form and
inside intercepted tunnels (without and with a credential swapped into
the first request); several kinds of malformed request, one of them naming
another host. Behind a denied request nothing more is read: the refusal
closes the connection, so the garbage gets no row and borrows nothing.
The gateway runs as a default install does (user sandgate).
"""

import os
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
SECRET = "sk-rows-e2e-Secret-0123456789abcdefXYZ"
PH = "sgtest-rows-placeholder-00000001"

# Malformed requests, each complete (its head ends), by name.
MALFORMED = {
    "no colon": "GET /m HTTP/1.1\r\nHost: {host}\r\nNoColonHere\r\n\r\n",
    "other host, bad field": "GET http://elsewhere.test/x HTTP/1.1\r\n"
                             "Host: elsewhere.test\r\nBad Name: v\r\n\r\n",
    "CL and TE": "POST /m HTTP/1.1\r\nHost: {host}\r\nContent-Length: 3\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n",
    "binary": "\x16\x03\x01\x00\xa5garbage\x01\x02\r\n\r\n",
}

POLICY = """\
sandboxes:
  - id: box-rows
    policy: rows
    source: [127.0.0.1/32]
policies:
  - name: rows
    allow:
      - host: ok.test
        ports: [{plain}]
      - host: tls.test
        ports: [{tls}]
        tls: intercept
      - host: cred.test
        ports: [{tls}]
        tls: intercept
    deny:
      - host: ok.test
        paths: ["/denied*"]
      - host: tls.test
        paths: ["/denied*"]
    allow_private: [{origin}/32]
    credentials: [rows-key]
credentials:
  - name: rows-key
    secret: rows-secret
    hosts: [cred.test]
    headers: [Authorization]
    placeholder: "{ph}"
"""


class PipelinedRowsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-rows-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        crt, key = cls.pki.leaf("tls.test", ["tls.test", "cred.test"])
        cls.plain = T.Origin("plain")
        cls.addClassCleanup(cls.plain.stop)
        cls.tls = T.Origin("tls", cert=crt, key=key)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "ok.test", "tls.test", "cred.test", "elsewhere.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"rows.yaml": POLICY.format(
            plain=cls.plain.port, tls=cls.tls.port, origin=ORIGIN_HOST,
            ph=PH)}, extra={"upstream": {"ca_bundle": cls.pki.cert}},
            user="sandgate")
        r = T.run_sandgate("vault", "set", "rows-secret", "-c",
                           cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        gw_ca = os.path.join(d, "certs", "ca.crt")
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and not os.path.exists(gw_ca):
            time.sleep(0.05)
        cls.cctx = ssl.create_default_context(cafile=gw_ca)

    # -------------------------------------------------------------- helpers

    def conn(self, tunnel=None):
        """A client connection; tunnel "host": CONNECT and TLS to it."""
        if tunnel is None:
            c = T.Conn(self.gw.port)
            self.addCleanup(c.close)
            return c
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (tunnel, self.tls.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.cctx.wrap_socket(c.sock, server_hostname=tunnel)
        return c

    def rows_of(self, c, n, settle=True):
        """The rows of client connection c once there are n (sorted by id)."""
        client = "127.0.0.1:%d" % c.sock.getsockname()[1]
        rows = self.gw.wait_audit(
            pred=lambda r: len(self.gw.audit_rows(client=client)) >= n,
            client=client)
        if settle:
            time.sleep(0.3 * T.SLOW)    # a row too many would show now
        return self.gw.audit_rows(client=client)

    def assert_own_row(self, row, host=None, port=None, rule="default-deny",
                       kind="http"):
        """A malformed request's row: its status and nothing borrowed."""
        self.assertEqual((row["status"], row["decision"], row["reason"]),
                         (400, "deny", "bad-request"), row)
        self.assertEqual((row["method"], row["path"], row["ip"]),
                         (None, None, None), row)
        self.assertEqual((row["host"], row["port"], row["rule"], row["kind"]),
                         (host, port, rule, kind), row)
        self.assertIsNone(row["credential"], row)
        self.assertEqual((row["bytes_up"], row["bytes_down"]), (0, 0), row)

    def pipelined(self, c, first, garbage):
        """first and garbage in one write: (first response, second)."""
        c.send(first + garbage)
        r1 = c.read_response()
        r2 = c.read_response()
        return r1, r2

    # -------------------------------------------------------------- tests

    def test_after_allowed_absolute_form(self):
        host = "ok.test:%d" % self.plain.port
        for name, bad in MALFORMED.items():
            with self.subTest(malformed=name):
                c = self.conn()
                path = "/first-abs-%d" % len(name)
                r1, r2 = self.pipelined(c, "GET http://%s%s HTTP/1.1\r\n"
                                        "Host: %s\r\n\r\n" % (host, path, host),
                                        bad.format(host=host))
                self.assertEqual(r1.status, 200, r1)
                self.assertEqual((r2.status, r2.header("X-Sandgate-Reason")),
                                 (400, "bad-request"), r2)
                rows = self.rows_of(c, 2)
                self.assertEqual(len(rows), 2, rows)
                first, second = rows
                self.assertEqual((first["status"], first["path"],
                                  first["host"], first["rule"]),
                                 (200, path, "ok.test", "rows:allow[0]"), first)
                self.assertGreater(first["bytes_down"], 0, first)
                self.assertIsNotNone(first["ip"], first)
                self.assert_own_row(second)
                self.assertIsNone(second["sandbox"], second)
        # The malformed requests went nowhere.
        self.assertFalse(self.plain.saw_path("/m"))
        self.assertFalse(self.plain.saw_path("/x"))

    def test_after_denied_absolute_form(self):
        # The refusal closes the connection: the garbage is never read.
        host = "ok.test:%d" % self.plain.port
        for name, bad in MALFORMED.items():
            with self.subTest(malformed=name):
                c = self.conn()
                c.send("GET http://%s/denied-%d HTTP/1.1\r\nHost: %s\r\n\r\n"
                       % (host, len(name), host) + bad.format(host=host))
                r = c.read_response()
                self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                                 (403, "policy-deny"), r)
                self.assertEqual(c.read_to_eof(), b"")
                rows = self.rows_of(c, 1)
                self.assertEqual(len(rows), 1, rows)
                self.assertEqual((rows[0]["status"], rows[0]["rule"],
                                  rows[0]["path"], rows[0]["reason"]),
                                 (403, "rows:deny[0]", "/denied-%d" % len(name),
                                  "policy-deny"), rows[0])
        self.assertFalse(self.plain.saw_path("/denied"))

    def test_after_denied_intercepted_tunnel(self):
        host = "tls.test:%d" % self.tls.port
        for name, bad in MALFORMED.items():
            with self.subTest(malformed=name):
                c = self.conn("tls.test")
                path = "/denied-tls-%d" % len(name)
                c.send("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host) +
                       bad.format(host=host))
                r = c.read_response()
                self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                                 (403, "policy-deny"), r)
                try:
                    rest = c.read_to_eof()
                except (OSError, ssl.SSLError):
                    rest = b""
                self.assertEqual(rest, b"")
                rows = self.rows_of(c, 1)
                self.assertEqual(len(rows), 1, rows)
                self.assertEqual((rows[0]["status"], rows[0]["rule"],
                                  rows[0]["path"], rows[0]["method"]),
                                 (403, "rows:deny[1]", path, "GET"), rows[0])
        self.assertFalse(self.tls.saw_path("/denied"))

    def tunnel_case(self, tunnel, rule, auth):
        host = "%s:%d" % (tunnel, self.tls.port)
        for name, bad in MALFORMED.items():
            with self.subTest(malformed=name, tunnel=tunnel):
                c = self.conn(tunnel)
                path = "/first-%s-%d" % (tunnel, len(name))
                extra = "Authorization: Bearer %s\r\n" % PH if auth else ""
                r1, r2 = self.pipelined(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%s"
                                        "\r\n" % (path, host, extra),
                                        bad.format(host=host))
                self.assertEqual(r1.status, 200, r1)
                self.assertEqual((r2.status, r2.header("X-Sandgate-Reason")),
                                 (400, "bad-request"), r2)
                rows = self.rows_of(c, 2)
                self.assertEqual(len(rows), 2, rows)
                first, second = rows
                self.assertEqual((first["status"], first["path"],
                                  first["host"], first["rule"],
                                  first["credential"]),
                                 (200, path, tunnel, rule,
                                  "rows-key" if auth else None), first)
                self.assertGreater(first["bytes_down"], 0, first)
                # Inside a tunnel: the tunnel's own name, port, sandbox and
                # the rule that opened it (docs/audit.md), nothing else.
                self.assert_own_row(second, host=tunnel, port=self.tls.port,
                                    rule=rule, kind="connect")
                self.assertEqual(second["sandbox"], "box-rows", second)
        if auth:
            seen = [q for q in self.tls.requests if q["path"].startswith(
                "/first-" + tunnel)]
            self.assertTrue(seen)
            for q in seen:
                self.assertIn(["Authorization", "Bearer " + SECRET],
                              q["headers"])
        self.assertFalse(self.tls.saw_path("/m"))

    def test_after_allowed_intercepted_tunnel(self):
        self.tunnel_case("tls.test", "rows:allow[1]", False)

    def test_after_credential_swap_intercepted_tunnel(self):
        self.tunnel_case("cred.test", "rows:allow[2]", True)

    def test_rows_hold_no_secret(self):
        self.test_after_credential_swap_intercepted_tunnel()
        self.assertNotIn(SECRET, self.gw.log_text())
        for row in self.gw.audit_rows():
            self.assertNotIn(SECRET, repr(row))


if __name__ == "__main__":
    T.main()
