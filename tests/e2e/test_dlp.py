#!/usr/bin/python3
"""
Outbound secret detection end to end (issue 27, docs/dlp.md): the real
gateway intercepting TLS toward an HTTPS echo origin, a sandbox whose
policy has `dlp: {mode: block}` and one with `mode: report`.

- The malicious set: every default rule (fake secrets made here, GitHub
  tokens with a valid CRC32) x every location (query, header, body with
  Content-Length, chunked body, the secret split across two chunks and two
  TCP writes) x every encoding (raw, percent x1..x3, base64, base64url, hex,
  JSON \\u escapes) is refused with 403 secret-detected; the origin never
  receives the secret; the audit row names the rule and never holds the
  secret.
- mode: report lets the same requests pass and audits them (decision
  report, reason secret-detected).
- The benign corpus (tests/dlp/benign) passes under mode: block, as bodies
  and as header values; curl and requests as clients.
- A WebSocket: a secret in a client message (whole, split across
  fragments and TCP writes, base64) closes the session with 1008 before the
  origin gets it; report mode lets it pass.
- DNS (the gateway's DNS listener): a name whose labels carry an encoded
  payload (one long base32 label, or short labels together) is NXDOMAIN
  with a deny row secret-detected under block, passes with a report row
  under report; ordinary names under the same parent resolve.
- An allow entry exempts a rule toward a host.
"""

import base64
import binascii
import json
import os
import random
import re
import ssl
import struct
import subprocess
import sys
import time
import unittest
import urllib.parse
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import EchoOrigin, TestCA  # noqa: E402
from test_websocket_scrub import WsOrigin  # noqa: E402
from test_http2 import H2, frame, HEADERS, DATA, END_HEADERS, \
    END_STREAM  # noqa: E402
import wsframe as W  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
REPORT_SOURCE = "127.0.0.3"
VAULT_SECRET = "Zq9-internal-Sekret-v4lue-2026"
DOCS_SECRET = "docs-only-Sekret-7Yh2kP0q"      # bound to docs.test
AWS_KEY_ID = "AKIAZQ9SGTESTKEYID77"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYsgtestKEY"
AWS_TOKEN = "IQoJb3JpZ2luX2VjEsgtestSessionToken/+Zq9w=="
OA_CLIENT_SECRET = "oa-client-Sekret-4f9d2c1b8a"
OA_REFRESH = "oa-refresh-Tok3n-91c7e2d4b5a6"

POLICY = """\
sandboxes:
  - id: box-block
    policy: guarded
    source: [127.0.0.1/32]
  - id: box-report
    policy: watched
    source: [{report}/32]
policies:
  - name: guarded
    allow:
      - host: api.test
        ports: [{port}]
        tls: intercept
      - host: docs.test
        ports: [{port}]
        tls: intercept
      - host: ws.test
        ports: [{wsport}]
        tls: intercept
      - host: "*.exfil.test"
        ports: [443]
    allow_private: [{origin}/32]
    credentials: [leak-key, docs-key, aws-key, oa-key]
    dlp:
      mode: block
      rules:
        - id: acme-key
          regex: 'acme_[a-z0-9]{{24}}'
          severity: high
          entropy: 3.0
      allow:
        - host: docs.test
          rule: jwt
  - name: watched
    allow:
      - host: api.test
        ports: [{port}]
        tls: intercept
      - host: ws.test
        ports: [{wsport}]
        tls: intercept
      - host: "*.exfil.test"
        ports: [443]
    allow_private: [{origin}/32]
    dlp:
      mode: report
credentials:
  - name: leak-key
    secret: leak-secret
    hosts: [bound.test]
    headers: [Authorization]
    placeholder: "sgtest-dlp-placeholder-00000001"
  - name: docs-key
    secret: docs-secret
    hosts: [docs.test]
    headers: [Authorization]
  - name: aws-key
    kind: aws_sigv4
    secret: aws-leak
    hosts: [s3.test]
  - name: oa-key
    kind: oauth2
    secret: oa-leak
    hosts: [auth-bound.test]
    oauth2:
      token_url: https://tok.test:1/t
      grant: client_credentials
"""

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
RNG = random.Random(27)


def rand(n, alphabet=B62):
    return "".join(RNG.choice(alphabet) for _ in range(n))


def github_token(prefix="ghp_"):
    body = rand(30)
    crc = binascii.crc32(body.encode()) & 0xffffffff
    digits = ""
    for _ in range(6):
        digits = B62[crc % 62] + digits
        crc //= 62
    return prefix + body + digits


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def samples():
    """(rule, text): a fake secret of every default rule, and a custom one."""
    jwt = "%s.%s.%s" % (b64u(b'{"alg":"HS256","typ":"JWT"}'),
        b64u(b'{"sub":"1234567890","name":"A"}'), rand(43, B62 + "-_"))
    return [
        ("aws-access-key-id", "AKIA" + rand(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
        ("aws-secret-access-key", "aws_secret_access_key=" + rand(40, B62 + "+/")),
        ("github-token", github_token("ghp_")),
        ("github-token", github_token("gho_")),
        ("github-fine-grained-token", "github_pat_%s_%s" % (rand(22), rand(59))),
        ("gitlab-token", "glpat-" + rand(20)),
        ("slack-token", "xoxb-123456789012-1234567890123-" + rand(24)),
        ("slack-webhook", "https://hooks.slack.com/services/T0AB12CD3/B0CD34EF5/"
            + rand(24)),
        ("stripe-secret-key", "sk_live_" + rand(28)),
        ("jwt", jwt),
        ("private-key", "-----BEGIN RSA PRIVATE KEY----- MIIEow" + rand(40)),
        ("gcp-service-account", '{"type": "service_account", "project_id": "p", '
            '"private_key": "-----BEGIN PRIVATE KEY-----MIIEv"}'),
        ("generic-secret", '{"password": "%s"}' % rand(24, B62 + "!#")),
        ("acme-key", "acme_" + rand(24, "abcdefghijklmnopqrstuvwxyz0123456789")),
    ]


def pct(s, layers):
    for _ in range(layers):
        s = "".join("%%%02X" % b for b in s.encode())
    return s


ENCODINGS = {
    "raw": lambda s: s,
    "pct1": lambda s: pct(s, 1),
    "pct2": lambda s: pct(s, 2),
    "pct3": lambda s: pct(s, 3),
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "base64url": lambda s: b64u(s.encode()),
    "hex": lambda s: s.encode().hex(),
    "json": lambda s: "".join("\\u%04x" % ord(c) for c in s),
}


class DlpTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dlp-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.origin = EchoOrigin("dlp", *cls.pki.leaf("api.test",
            ["api.test", "docs.test"]))
        cls.addClassCleanup(cls.origin.stop)
        cls.ws = WsOrigin(*cls.pki.leaf("ws.test", ["ws.test"]))
        cls.addClassCleanup(cls.ws.stop)
        cls.dns = T.Dnsmasq(d, [("api.test", ORIGIN_HOST),
            ("docs.test", ORIGIN_HOST), ("ws.test", ORIGIN_HOST),
            ("cdn1.exfil.test", ORIGIN_HOST)])
        cls.dport = T.free_port(udp_too=True)
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"dlp.yaml": POLICY.format(
            port=cls.origin.port, origin=ORIGIN_HOST, report=REPORT_SOURCE,
            wsport=cls.ws.port)},
            extra={"upstream": {"ca_bundle": cls.pki.cert},
                   "listen": {"dns": "127.0.0.1:%d" % cls.dport}})
        for name, value in (("leak-secret", VAULT_SECRET),
                            ("docs-secret", DOCS_SECRET),
                            ("aws-leak", "%s:%s:%s" % (AWS_KEY_ID, AWS_SECRET,
                                                      AWS_TOKEN)),
                            ("oa-leak", "client_id=sgtest\nclient_secret=%s\n"
                             "refresh_token=%s\n" % (OA_CLIENT_SECRET,
                                                     OA_REFRESH))):
            r = T.run_sandgate("vault", "set", name, "-c", cls.gw.cfg_path,
                input=value)
            if r.returncode != 0:
                raise RuntimeError("vault set %s: %s" % (name, r.stderr))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()
        cls.seq = 0

    # -------------------------------------------------------------- helpers

    def mark(self):
        DlpTest.seq += 1
        return "/m/%d" % DlpTest.seq

    def send(self, host, head, pieces=(), source=None):
        """A request on a fresh intercepted tunnel: head, then body pieces."""
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.origin.port),
            source=source)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.send(head)
        for p in pieces:
            time.sleep(0.02)
            try:
                c.send(p)
            except OSError:
                break
        return c.read_response()

    def request(self, where, value, host="api.test", source=None):
        """value carried at where; returns (its mark, the path's start; response)."""
        path = target = self.mark()
        hdrs = "Host: %s:%d\r\n" % (host, self.origin.port)
        pieces = ()
        if where == "query":
            target += "?q=" + urllib.parse.quote(value, safe="%")
        elif where == "path":
            target += "/" + urllib.parse.quote(value, safe="%/+")
        elif where == "header":
            hdrs += "X-Data: %s\r\n" % value
        elif where == "body":
            b = ("data=" + value + "&end=1").encode()
            hdrs += "Content-Length: %d\r\n" % len(b)
            pieces = (b[:7], b[7:])
        elif where == "chunked":
            b = ("data=" + value + "&end=1").encode()
            cut = len(b) // 2    # the secret split across two chunks
            hdrs += "Transfer-Encoding: chunked\r\n"
            pieces = (b"%x\r\n%s\r\n" % (cut, b[:cut]),
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(b) - cut, b[cut:]))
        method = "GET" if where in ("query", "header") else "POST"
        head = "%s %s HTTP/1.1\r\n%s\r\n" % (method, target, hdrs)
        return path, self.send(host, head.encode(), pieces, source)

    def assert_refused(self, rule, path, r, secret, enc):
        self.assertEqual(r.status, 403, "%s %s: %r" % (rule, path, r))
        self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
        self.assertIn(rule.encode(), r.body)
        self.assertFalse(self.origin.received(enc),
            "%s: the origin received it (%s)" % (rule, path))
        self.assertFalse(self.origin.received(secret))

    def assert_one_row(self, path, rule_start, secret):
        """The origin never got secret; one row for path, its rule so."""
        self.assertFalse(self.origin.received(secret), path)
        rows = self.rows_with(path)
        self.assertEqual(len(rows), 1, rows)
        self.assertTrue(rows[0]["rule"].startswith(rule_start), rows[0]["rule"])

    def rows_with(self, path):
        return self.gw.wait_audit(pred=lambda r: (r.get("path") or "")
            .startswith(path))

    # ---------------------------------------------------------------- tests

    def test_malicious_set_refused(self):
        """Every rule x location x encoding: 403, never at the origin."""
        misses = []
        for rule, secret in samples():
            for where in ("query", "header", "body", "chunked"):
                for name, fn in ENCODINGS.items():
                    enc = fn(secret)
                    path, r = self.request(where, enc)
                    if (r.status != 403 or r.header("X-Sandgate-Reason") !=
                            "secret-detected" or rule.encode() not in r.body):
                        misses.append("%s/%s/%s: %s %s" % (rule, where, name,
                            r.status, r.body[:80]))
                        continue
                    if self.origin.received(enc) or self.origin.received(secret):
                        misses.append("%s/%s/%s: reached the origin" % (
                            rule, where, name))
        self.assertEqual(misses, [])

    def test_query_redacted_on_row_and_log(self):
        rule, secret = samples()[0]
        path, r = self.request("query", secret)
        self.assertEqual(r.status, 403, r)
        rows = self.rows_with(path)
        self.assertEqual(rows[0]["path"], path + "?[redacted]")
        path, r = self.request("query", pct(secret, 2))
        self.assertEqual(self.rows_with(path)[0]["path"], path + "?[redacted]")
        self.assertNotIn(secret[4:], self.gw.log_text())
        self.assertNotIn(pct(secret, 2)[12:], self.gw.log_text())

    def test_audit_row_redacted(self):
        rule, secret = samples()[2]    # a GitHub token
        path, r = self.request("header", "token " + secret)
        self.assert_refused(rule, path, r, secret, secret)
        rows = self.rows_with(path)
        self.assertEqual(len(rows), 1, rows)
        row = rows[0]
        self.assertEqual(row["decision"], "deny")
        self.assertEqual(row["reason"], "secret-detected")
        self.assertTrue(row["rule"].startswith("dlp:github-token header X-Data "),
            row["rule"])
        self.assertIn("ghp_/40/#", row["rule"])
        for r2 in self.gw.audit_rows():
            for v in r2.values():
                self.assertNotIn(secret[4:], str(v))
        self.assertNotIn(secret[4:], self.gw.log_text())

    def test_report_mode_passes_and_audits(self):
        for rule, secret in samples()[:13]:
            for where in ("query", "body"):
                path, r = self.request(where, secret, source=REPORT_SOURCE)
                self.assertEqual(r.status, 200, "%s %s %r" % (rule, where, r))
                rows = self.rows_with(path)
                self.assertEqual(len(rows), 1, rows)
                self.assertEqual(rows[0]["decision"], "report", rows[0])
                self.assertEqual(rows[0]["reason"], "secret-detected")
                self.assertTrue(rows[0]["rule"].startswith("dlp:" + rule + " "),
                    rows[0]["rule"])
                self.assertNotIn(secret[5:], rows[0]["rule"])
                # the target it came in is not kept whole on the row
                quoted = urllib.parse.quote(secret, safe="%")
                self.assertNotIn(quoted[8:], json.dumps(rows[0]))
                if where == "query":
                    self.assertEqual(rows[0]["path"], path + "?[redacted]")
        # a benign request under report mode: allowed, no dlp on its row
        path, r = self.request("body", "hello", source=REPORT_SOURCE)
        self.assertEqual(r.status, 200)
        self.assertEqual(self.rows_with(path)[0]["decision"], "allow")

    def test_benign_corpus_passes(self):
        corpus = os.path.join(T.SRC, "tests", "dlp", "benign")
        names = sorted(os.listdir(corpus))
        self.assertGreaterEqual(len(names), 5)
        for name in names:
            with open(os.path.join(corpus, name), "rb") as f:
                data = f.read()
            s = T.session(self.gw.url)
            r = s.post("https://api.test:%d%s" % (self.origin.port, self.mark()),
                data=data, verify=self.gw_ca, timeout=20 * T.SLOW)
            self.assertEqual(r.status_code, 200, "%s: %s %s" % (name,
                r.headers.get("X-Sandgate-Reason"), r.text[:200]))
            for line in data.decode("latin-1").splitlines():
                line = line.strip()
                if not line or len(line) > 2000:
                    continue
                path, r = self.request("header", line)
                self.assertEqual(r.status, 200, "%s: %r: %r" % (name, line, r))
        # curl as a client: a page with example keys, as a query and a body
        r = T.curl("https://api.test:%d/search?q=AKIAIOSFODNN7EXAMPLE" %
            self.origin.port, proxy=self.gw.url, args=["--cacert", self.gw_ca,
            "--data-binary", "@" + os.path.join(corpus,
            "docs-example-keys.txt")], tmp=self.td.path)
        self.assertEqual(r.status, 200, r)

    def test_curl_client_refused(self):
        rule, secret = samples()[8]    # stripe
        r = T.curl("https://api.test:%d/curl" % self.origin.port,
            proxy=self.gw.url, args=["--cacert", self.gw_ca, "-H",
            "Authorization: Bearer " + secret], tmp=self.td.path)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
        self.assertFalse(self.origin.received(secret))

    def test_http2_client(self):
        """curl --http2: a header and a DATA body (in pieces) refused."""
        for rule, secret in (samples()[2], samples()[8], samples()[12]):
            r = T.curl("https://api.test:%d/h2%s" % (self.origin.port,
                self.mark()), proxy=self.gw.url, args=["--http2", "--cacert",
                self.gw_ca, "-H", "X-Token: " + secret], tmp=self.td.path)
            self.assertEqual((r.status, r.info.get("http_version")), (403, "2"),
                r)
            self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
            path = self.mark()
            body = os.path.join(self.td.path, "h2body")
            with open(body, "w") as f:
                f.write("x" * 70000 + base64.b64encode(secret.encode()).decode()
                    + "y" * 1000)
            r = T.curl("https://api.test:%d%s" % (self.origin.port, path),
                proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca,
                "--data-binary", "@" + body], tmp=self.td.path)
            self.assertEqual(r.status, 403, r)
            self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
            self.assertFalse(self.origin.received(secret))
            self.assertFalse(self.origin.received(
                base64.b64encode(secret.encode()).decode()))
            rows = self.rows_with(path)
            self.assertEqual(len(rows), 1, rows)
            self.assertTrue(rows[0]["rule"].startswith("dlp:%s h2-data " % rule),
                rows[0]["rule"])
        r = T.curl("https://api.test:%d/h2ok" % self.origin.port,
            proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca,
            "--data-binary", "plain body"], tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        # a gzip'd body in DATA frames: inflated, found; br: unscannable
        rule, secret = samples()[2]
        body = os.path.join(self.td.path, "h2body.gz")
        with open(body, "wb") as f:
            f.write(zlib.compress(("x" * 70000 + secret).encode(), 6, 31))
        for coding, status, reason in (("gzip", 403, "secret-detected"),
                                       ("br", 415, "content-unscannable")):
            r = T.curl("https://api.test:%d%s" % (self.origin.port,
                self.mark()), proxy=self.gw.url, args=["--http2", "--cacert",
                self.gw_ca, "-H", "Content-Encoding: " + coding,
                "--data-binary", "@" + body], tmp=self.td.path)
            self.assertEqual((r.status, r.info.get("http_version")),
                (status, "2"), r)
            self.assertEqual(r.header("X-Sandgate-Reason"), reason)

    def test_trailers(self):
        """Trailer fields are scanned like headers (HTTP/1.1 and HTTP/2)."""
        rule, secret = samples()[2]    # a GitHub token
        for name, value in (("token", secret), ("vault", VAULT_SECRET)):
            want = "github-token" if name == "token" else "vault-secret"
            # HTTP/1.1 chunked: the trailer arrives in pieces, after the body
            path = self.mark()
            head = ("POST %s HTTP/1.1\r\nHost: api.test:%d\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n" % (path,
                    self.origin.port)).encode()
            field = ("X-Leak: " + value + "\r\n").encode()
            r = self.send("api.test", head, (b"5\r\nhello\r\n0\r\n",
                field[:12], field[12:], b"\r\n"))
            self.assertEqual(r.status, 403, "%s %r" % (name, r))
            self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
            self.assert_one_row(path, "dlp:%s trailer " % want, value)
            # HTTP/2: the trailers HEADERS frame
            path = self.mark()
            h = H2(self, "api.test", self.origin.port)
            h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", path,
                [("te", "trailers")])))
            h.send(frame(DATA, 0, 1, b"hello"))
            h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                         h.enc.encode([("x-leak", value)])))
            st, = h.wait(1)
            self.assertEqual(H2.status(st), 403, st)
            self.assertEqual(st["headers"][0].get("x-sandgate-reason"),
                "secret-detected")
            self.assert_one_row(path, "dlp:%s trailer " % want, value)
        # clean trailers: the request goes on, both ways; the fields
        # themselves are not forwarded (docs/protocols.md "Forwarding")
        path = self.mark()
        r = self.send("api.test", ("POST %s HTTP/1.1\r\nHost: api.test:%d\r\n"
            "Transfer-Encoding: chunked\r\n\r\n" % (path, self.origin.port))
            .encode(), (b"5\r\nhello\r\n0\r\nX-Check: fine-", b"1\r\n\r\n"))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.origin.received("hello"))
        self.assertFalse(self.origin.received("X-Check: fine-1"))
        path = self.mark()
        h = H2(self, "api.test", self.origin.port)
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(1, "POST", path)))
        h.send(frame(DATA, 0, 1, b"hello"))
        h.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                     h.enc.encode([("x-check", "fine-2")])))
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)

    def upgrade(self, path, source=None):
        c, r = T.open_tunnel(self.gw.port, "ws.test:%d" % self.ws.port,
            source=source)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="ws.test")
        key = base64.b64encode(os.urandom(16)).decode()
        c.send("GET %s HTTP/1.1\r\nHost: ws.test:%d\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n" % (path, self.ws.port, key))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        return c

    def ws_refused(self, name, frames, tail, rule_start, enc="utf-8"):
        """A session that sends frames after a clean echo: closed with
        1008 before tail reached the origin; one deny row, rule so."""
        path = "/echo" + self.mark()
        c = self.upgrade(path)
        c.send(W.client_frame(W.OP_TEXT, b"clean"))
        self.assertEqual(W.read_frame(c.read_exact).payload, b"clean")
        for op, text, fin in frames:
            c.send(W.client_frame(op, text.encode(enc), fin=fin))
            time.sleep(0.05)
        self.assertIn(1008, self.closed_after(c), name)
        self.assertFalse(self.ws.got_payload(tail.encode()), name)
        rows = self.rows_with(path)
        self.assertEqual([(r["decision"], r["reason"]) for r in rows],
            [("deny", "secret-detected")], name)
        self.assertTrue(rows[0]["rule"].startswith(rule_start),
            (name, rows[0]["rule"]))

    def closed_after(self, c):
        codes = []
        try:
            while True:
                f = W.read_frame(c.read_exact)
                if f.opcode == W.OP_CLOSE and len(f.payload) >= 2:
                    codes.append(struct.unpack("!H", f.payload[:2])[0])
        except (EOFError, ConnectionResetError, ssl.SSLError, OSError):
            pass
        return codes

    def test_websocket_messages(self):
        rule, secret = samples()[2]    # a GitHub token
        variants = {
            "whole": [(W.OP_TEXT, "send " + secret, True)],
            "fragments": [(W.OP_TEXT, "a " + secret[:11], False),
                          (W.OP_CONT, secret[11:25], False),
                          (W.OP_CONT, secret[25:] + " b", True)],
            "base64": [(W.OP_BIN, base64.b64encode(secret.encode()).decode(),
                        True)],
        }
        for name, frames in variants.items():
            self.ws_refused(name, frames, secret[-12:],
                "dlp:github-token websocket ")
        # report: it passes, the row says report
        path = "/echo" + self.mark()
        c = self.upgrade(path, source=REPORT_SOURCE)
        c.send(W.client_frame(W.OP_TEXT, ("send " + secret).encode()))
        self.assertEqual(W.read_frame(c.read_exact).payload,
            ("send " + secret).encode())
        c.send(W.client_frame(W.OP_CLOSE, struct.pack("!H", 1000)))
        self.assertIn(1000, self.closed_after(c))
        c.close()
        rows = self.gw.wait_audit(pred=lambda r: r.get("path") == path and
            r.get("decision") == "report")
        self.assertTrue(rows, self.rows_with(path))
        self.assertEqual(rows[0]["reason"], "secret-detected")

    def test_websocket_control_frames(self):
        """A ping's payload is scanned too, as a stream of its own."""
        rule, secret = samples()[2]    # a GitHub token
        cases = {
            # the secret in a ping (and in a pong, and a close's reason)
            "ping": [(W.OP_PING, secret, True)],
            "pong": [(W.OP_PONG, "x" + secret, True)],
            "close": [(W.OP_CLOSE, "\x03\xe9" + secret,
                       True)],
            # a ping between two fragments: the message's stream goes on
            "between": [(W.OP_TEXT, "a " + secret[:20], False),
                        (W.OP_PING, "keepalive", True),
                        (W.OP_CONT, secret[20:] + " b", True)],
        }
        for name, frames in cases.items():
            where = "websocket" if name == "between" else "websocket-control"
            self.ws_refused(name, frames, secret[-12:],
                "dlp:github-token %s " % where, enc="latin-1")
        # a clean ping goes on, and so does the session
        c = self.upgrade("/echo" + self.mark())
        c.send(W.client_frame(W.OP_PING, b"are-you-there"))
        c.send(W.client_frame(W.OP_TEXT, b"still here"))
        f = W.read_frame(c.read_exact)
        while f.opcode == W.OP_PONG:
            f = W.read_frame(c.read_exact)
        self.assertEqual((f.opcode, f.payload), (W.OP_TEXT, b"still here"))
        self.assertTrue(self.ws.got_payload(b"are-you-there"))

    def dig(self, name, source="127.0.0.1"):
        r = subprocess.run([T.DIG, "@127.0.0.1", "-p", str(self.dport), "-b",
            source, "+time=3", "+tries=2", name, "A"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=30 * T.SLOW)
        return r.stdout

    def test_dns_burst(self):
        """Short encoded labels, many distinct names: the 32nd is refused."""
        b32 = "abcdefghijklmnopqrstuvwxyz234567"
        names = ["%s.t.exfil.test" % rand(16, b32) for _ in range(32)]
        for n in names[:31]:
            self.dig(n)
        out = self.dig(names[31])
        self.assertIn("status: NXDOMAIN", out, out)
        rows = self.gw.wait_audit(kind="dns", host=names[31])
        self.assertEqual([(r["decision"], r["reason"]) for r in rows],
            [("deny", "secret-detected")], rows)
        self.assertTrue(rows[0]["rule"].startswith("dlp:dns-encoded-burst dns "),
            rows[0]["rule"])
        first = self.gw.wait_audit(kind="dns", host=names[0])
        self.assertEqual(first[0]["reason"], None, first)

    def test_dns_names(self):
        b32 = "abcdefghijklmnopqrstuvwxyz234567"
        one = rand(48, b32) + ".exfil.test"
        lab = rand(60, b32)
        many = "%s.%s.%s.x.exfil.test" % (lab[:20], lab[20:40], lab[40:])
        for name, rule in ((one, "dns-encoded-label"),
                           (many, "dns-encoded-name")):
            out = self.dig(name)
            self.assertIn("status: NXDOMAIN", out, out)
            rows = self.gw.wait_audit(kind="dns", host=name)
            self.assertEqual([(r["decision"], r["reason"]) for r in rows],
                [("deny", "secret-detected")], rows)
            self.assertTrue(rows[0]["rule"].startswith("dlp:%s dns " % rule),
                rows[0]["rule"])
        out = self.dig("cdn1.exfil.test")
        self.assertIn("status: NOERROR", out, out)
        self.assertIn(ORIGIN_HOST, out)
        # report: the same kind of name passes (NXDOMAIN from upstream here)
        name = rand(48, b32) + ".exfil.test"
        out = self.dig(name, source=REPORT_SOURCE)
        self.assertIn("status:", out, out)
        rows = self.gw.wait_audit(kind="dns", host=name)
        self.assertEqual([(r["decision"], r["reason"]) for r in rows],
            [("report", "secret-detected")], rows)

    def test_vault_secret_to_unbound_host(self):
        """The real value of a credential bound elsewhere: refused."""
        for where, value in (("header", VAULT_SECRET),
                             ("header", "Basic " + base64.b64encode(
                                 ("u:" + VAULT_SECRET).encode()).decode()),
                             ("query", VAULT_SECRET)):
            path, r = self.request(where, value)
            self.assertEqual(r.status, 403, "%s %r" % (where, r))
            self.assertIn(b"vault-secret", r.body)
            rows = self.rows_with(path)
            self.assertEqual(len(rows), 1, rows)
            self.assertTrue(rows[0]["rule"].startswith("dlp:vault-secret %s" %
                ("query" if where == "query" else "header X-Data")),
                rows[0]["rule"])
            self.assertFalse(self.origin.received(VAULT_SECRET))
        for r2 in self.gw.audit_rows():
            self.assertNotIn(VAULT_SECRET, json.dumps(r2))
        self.assertNotIn(VAULT_SECRET, self.gw.log_text())

    def test_vault_secret_in_bodies(self):
        """Every kind's values, in bodies, split and encoded: refused."""
        values = {"static": VAULT_SECRET, "aws-secret-key": AWS_SECRET,
                  "aws-session-token": AWS_TOKEN,
                  "oauth2-client-secret": OA_CLIENT_SECRET,
                  "oauth2-refresh-token": OA_REFRESH}
        for kind, value in values.items():
            for enc in ("raw", "pct2", "base64", "hex", "json"):
                for where in ("body", "chunked"):
                    sent = ENCODINGS[enc](value)
                    path, r = self.request(where, sent)
                    what = "%s %s %s" % (kind, enc, where)
                    self.assertEqual(r.status, 403, "%s: %r" % (what, r))
                    self.assertIn(b"vault-secret", r.body, what)
                    self.assertFalse(self.origin.received(sent), what)
                    self.assertFalse(self.origin.received(value), what)
                    rows = self.rows_with(path)
                    self.assertEqual(len(rows), 1, rows)
                    self.assertTrue(rows[0]["rule"].startswith(
                        "dlp:vault-secret body -"), rows[0]["rule"])
        for r2 in self.gw.audit_rows():
            for value in values.values():
                self.assertNotIn(value, json.dumps(r2))
        log = self.gw.log_text()
        for value in values.values():
            self.assertNotIn(value, log)

    def post_coded(self, body, coding, chunked=False, source=None):
        """body (bytes, already coded) with Content-Encoding: coding."""
        path = self.mark()
        hdrs = "Host: api.test:%d\r\nContent-Encoding: %s\r\n" % (
            self.origin.port, coding)
        if chunked:
            cut = len(body) // 2
            hdrs += "Transfer-Encoding: chunked\r\n"
            pieces = (b"%x\r\n%s\r\n" % (cut, body[:cut]),
                      b"%x\r\n%s\r\n0\r\n\r\n" % (len(body) - cut, body[cut:]))
        else:
            hdrs += "Content-Length: %d\r\n" % len(body)
            pieces = (body[:len(body) // 3], body[len(body) // 3:])
        head = ("POST %s HTTP/1.1\r\n%s\r\n" % (path, hdrs)).encode()
        return path, self.send("api.test", head, pieces, source)

    def test_coded_bodies(self):
        """gzip, x-gzip, deflate (zlib and raw), gzip members: decoded and
        scanned; a secret in them refused."""
        rule, secret = samples()[2]    # a GitHub token
        text = ("x" * 5000 + " token " + secret + " " + "y" * 5000).encode()

        def gz(b):
            return zlib.compress(b, 6, 16 + zlib.MAX_WBITS)

        def raw(b):
            c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            return c.compress(b) + c.flush()
        variants = [
            ("gzip", gz(text), False), ("x-gzip", gz(text), True),
            ("deflate", zlib.compress(text), False), ("deflate", raw(text), True),
            # the secret in the second of two gzip members
            ("gzip", gz(b"a" * 3000) + gz(text), False),
            ("identity, GZip", gz(text), True),
        ]
        for coding, body, chunked in variants:
            path, r = self.post_coded(body, coding, chunked)
            what = "%s chunked=%s" % (coding, chunked)
            self.assertEqual(r.status, 403, "%s: %r" % (what, r))
            self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
            rows = self.rows_with(path)
            self.assertEqual(len(rows), 1, rows)
            self.assertTrue(rows[0]["rule"].startswith("dlp:github-token body "),
                (what, rows[0]["rule"]))
        # the gateway's own secret, gzip'd
        path, r = self.post_coded(gz(("v=" + VAULT_SECRET).encode()), "gzip")
        self.assertEqual(r.status, 403, r)
        self.assertIn(b"vault-secret", r.body)
        # benign corpus files, gzip'd, pass whole
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
            "dlp", "benign")
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            path, r = self.post_coded(gz(data), "gzip", chunked=True)
            self.assertEqual(r.status, 200, "%s: %r" % (name, r))

    def test_wrapped_base64_env(self):
        """`curl -d "$(base64 .env)"`: GNU base64 wraps at 76 columns, so
        the token is cut by line breaks; still found, at every cut."""
        rule, secret = samples()[2]
        for pad in range(0, 40, 3):
            env = "A" * pad + "\nAPP=1\nGITHUB_TOKEN=" + secret + "\n"
            b = base64.b64encode(env.encode()).decode()
            wrapped = "\n".join(b[i:i + 76] for i in range(0, len(b), 76))
            path, r = self.request("body", wrapped)
            self.assertEqual(r.status, 403, "pad %d: %r" % (pad, r))
            rows = self.rows_with(path)
            self.assertTrue(rows[0]["rule"].startswith("dlp:github-token body "),
                rows[0]["rule"])

    def test_shifted_runs(self):
        """Base64 or hex whose run starts before it: in a URL path (the run
        takes in "m/N/"), after junk put in front on purpose (one to three
        characters shift every quantum), hex after a hex digit. Every
        alignment is decoded: each is refused, the origin gets none."""
        misses = []
        for rule, secret in samples()[:6] + samples()[9:11]:
            b = base64.b64encode(secret.encode()).decode()
            u = b64u(secret.encode())
            h = secret.encode().hex()
            for where, enc in (("path", b), ("path", u), ("path", "x" + u),
                               ("body", "x" + b), ("body", "xy" + b),
                               ("body", "xyz" + u), ("chunked", "Zz" + b),
                               ("body", "f" + h), ("header", "a" + h)):
                path, r = self.request(where, enc)
                if (r.status != 403 or r.header("X-Sandgate-Reason") !=
                        "secret-detected" or rule.encode() not in r.body):
                    misses.append("%s/%s/%s: %s" % (rule, where, enc[:4],
                        r.status))
                elif self.origin.received(enc) or self.origin.received(secret):
                    misses.append("%s/%s/%s: reached the origin" % (rule,
                        where, enc[:4]))
        self.assertEqual(misses, [])
        # The path's row keeps what came before the run, not the run.
        path, r = self.request("path", "Q" + base64.b64encode(
            samples()[2][1].encode()).decode())
        self.assertEqual(r.status, 403, r)
        self.assertNotIn(samples()[2][1][4:], self.gw.log_text())

    def test_head_corners(self):
        """The request line and head beyond target and header values: a
        secret as the method, inside a header name longer than any real
        one, in a chunk extension (framing the gateway relays), across
        the chunk-size lines of one body. Each refused, none at the origin."""
        rule, secret = samples()[2]    # a GitHub token: all token characters
        aws = samples()[0][1]          # an AWS key id: 20, a method's length
        host = "Host: api.test:%d\r\n" % self.origin.port
        cases = {
            "method": ("%s %s HTTP/1.1\r\n%s\r\n", aws, ()),
            "long header name": ("GET %%s HTTP/1.1\r\n%%sX-%s%s: 1\r\n\r\n"
                % ("a" * 90, secret), None, ()),
            "chunk extension": ("POST %s HTTP/1.1\r\n%sTransfer-Encoding: "
                "chunked\r\n\r\n", None, (b"5;x=%s\r\nhello\r\n" %
                secret.encode(), b"0\r\n\r\n")),
            "last-chunk extension": ("POST %s HTTP/1.1\r\n%sTransfer-Encoding: "
                "chunked\r\n\r\n", None, (b"5\r\nhello\r\n", b"0;t=%s\r\n"
                b"\r\n" % secret.encode())),
            "extensions of several chunks": ("POST %s HTTP/1.1\r\n%s"
                "Transfer-Encoding: chunked\r\n\r\n", None, tuple(
                b"1;%s\r\nx\r\n" % aws[i:i + 5].encode()
                for i in range(0, len(aws), 5)) + (b"0\r\n\r\n",)),
        }
        where = {"method": "dlp:aws-access-key-id method ",
                 "long header name": "dlp:github-token header X-aaaa",
                 "chunk extension": "dlp:github-token chunk-extension ",
                 "last-chunk extension": "dlp:github-token chunk-extension ",
                 "extensions of several chunks":
                     "dlp:aws-access-key-id chunk-extension "}
        misses = []
        for name, (fmt, method, pieces) in cases.items():
            path = self.mark()
            head = (fmt % (method, path, host) if method else fmt % (path, host))
            r = self.send("api.test", head.encode(), pieces)
            if r.status != 403 or r.header("X-Sandgate-Reason") != "secret-detected":
                misses.append("%s: %s %r" % (name, r.status, r.body[:80]))
            elif self.origin.received(secret) or self.origin.received(aws[4:]):
                misses.append("%s: reached the origin" % name)
            else:
                rows = self.rows_with(path)
                if len(rows) != 1 or not rows[0]["rule"].startswith(where[name]):
                    misses.append("%s: rows %r" % (name, rows))
        self.assertEqual(misses, [])

    def test_unscannable_bodies(self):
        """What cannot be decoded does not pass under block: 415."""
        rule, secret = samples()[2]
        plain = ("token " + secret).encode()
        cases = [
            ("br", plain),                       # a coding it cannot decode
            ("gzip, gzip", zlib.compress(zlib.compress(plain, 6, 31), 6, 31)),
            ("gzip", plain),                     # a lie: not gzip at all
            ("deflate", plain),
            ("gzip", zlib.compress(b"harmless", 6, 31) + b"trailing " + plain),
            ("compress", plain),
        ]
        for coding, body in cases:
            path, r = self.post_coded(body, coding)
            self.assertEqual(r.status, 415, "%s: %r" % (coding, r))
            self.assertEqual(r.header("X-Sandgate-Reason"), "content-unscannable")
            self.assertFalse(self.origin.received(secret), coding)
            rows = self.rows_with(path)
            self.assertEqual([(x["decision"], x["reason"]) for x in rows],
                [("deny", "content-unscannable")], (coding, rows))
            self.assertTrue(rows[0]["rule"].startswith("dlp:content-unscannable "),
                rows[0]["rule"])
        # a bomb: 300 MiB of zeros in a few hundred KiB
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb = b"".join(c.compress(b"\0" * (1 << 20)) for _ in range(300)) + c.flush()
        path, r = self.post_coded(bomb, "gzip")
        self.assertEqual(r.status, 415, r)
        # report mode: passes, the row says report content-unscannable
        path, r = self.post_coded(plain, "br", source=REPORT_SOURCE)
        self.assertEqual(r.status, 200, r)
        rows = self.gw.wait_audit(pred=lambda x: (x.get("path") or "")
            .startswith(path) and x.get("decision") == "report")
        self.assertEqual(rows[0]["reason"], "content-unscannable", rows)

    def test_vault_secret_bound_host(self):
        """A value may go where its credential is bound, nowhere else."""
        path, r = self.request("body", DOCS_SECRET, host="docs.test")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.origin.received(DOCS_SECRET))
        path, r = self.request("body", DOCS_SECRET)
        self.assertEqual(r.status, 403, r)
        self.assertIn(b"vault-secret", r.body)
        # a lookalike (one byte off) is nothing
        path, r = self.request("body", DOCS_SECRET[:-1] + "X")
        self.assertEqual(r.status, 200, r)

    def test_vault_secret_websocket(self):
        """The value across fragments and TCP writes: closed with 1008."""
        for name, text in (("raw", VAULT_SECRET),
                           ("base64", base64.b64encode(
                               VAULT_SECRET.encode()).decode())):
            cut = len(text) // 2
            self.ws_refused(name, [(W.OP_TEXT, "a " + text[:cut], False),
                                   (W.OP_CONT, text[cut:] + " b", True)],
                text[cut:], "dlp:vault-secret websocket ")

    def test_connect_names(self):
        """A CONNECT target that carries a payload: 403 before any connect."""
        name = rand(48, "abcdefghijklmnopqrstuvwxyz234567") + ".exfil.test"
        c, r = T.open_tunnel(self.gw.port, name + ":443")
        self.addCleanup(c.close)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "secret-detected")
        rows = self.gw.wait_audit(host=name)
        self.assertEqual([(x["decision"], x["reason"]) for x in rows],
            [("deny", "secret-detected")], rows)
        self.assertTrue(rows[0]["rule"].startswith("dlp:dns-encoded-label name "),
            rows[0]["rule"])
        self.assertIsNone(rows[0]["ip"])      # nothing was connected to
        c, r = T.open_tunnel(self.gw.port, "cdn1.exfil.test:443")
        self.addCleanup(c.close)
        self.assertNotEqual(r.header("X-Sandgate-Reason"), "secret-detected", r)

    def test_allow_entry_exempts_rule(self):
        rule, secret = [s for s in samples() if s[0] == "jwt"][0]
        path, r = self.request("header", secret, host="docs.test")
        self.assertEqual(r.status, 200, r)
        path, r = self.request("header", secret, host="api.test")
        self.assertEqual(r.status, 403, r)
        # the entry names jwt only: other rules still apply on docs.test
        rule, secret = samples()[0]
        path, r = self.request("header", secret, host="docs.test")
        self.assertEqual(r.status, 403, r)


class DlpPolicyTest(unittest.TestCase):
    """policy check (errors at their line) and policy explain, offline."""

    def setUp(self):
        self.td = T.TempDir("sgtest-dlp-policy-")
        self.addCleanup(self.td.cleanup)
        d = self.td.path
        os.makedirs(os.path.join(d, "policies"))
        self.pol = os.path.join(d, "policies", "p.yaml")
        self.cfg = os.path.join(d, "sandgate.yaml")
        with open(self.cfg, "w") as f:
            f.write("state_dir: ./var\npolicies: [./policies]\n"
                "vault: { db: ./var/vault.db, key_file: ./certs/vault.key }\n"
                "ca: { cert: ./certs/ca.crt, key: ./certs/ca.key }\n")

    def write(self, dlp):
        with open(self.pol, "w") as f:
            f.write("policies:\n  - name: p\n    allow:\n"
                "      - host: api.example.com\n        tls: intercept\n"
                "      - host: pass.example.com\n" + dlp)

    def test_check_errors_at_their_line(self):
        self.write("    dlp:\n"                        # line 7
                   "      mode: stop\n"                # 8
                   "      rules:\n"                    # 9
                   "        - id: Bad_Id\n"            # 10
                   "          regex: 'x+'\n"           # 11
                   "        - id: jwt\n"               # 12
                   "          regex: 'y+'\n"           # 13
                   "          severity: urgent\n"      # 14
                   "          entropy: nine\n"         # 15
                   "        - regex: 'z'\n"            # 16
                   "      allow:\n"                    # 17
                   "        - hots: a.example.com\n"   # 18
                   "      colour: red\n")              # 19
        r = T.run_sandgate("policy", "check", "-c", self.cfg)
        self.assertEqual(r.returncode, 1, r)
        out = r.stdout + r.stderr
        for line, what in ((8, "mode: expected block, report or off"),
                           (10, "is not a rule id"),
                           (12, "is a default rule's id"),
                           (14, "severity: expected"),
                           (15, "entropy: expected"),
                           (16, "id is required"),
                           (18, 'unknown key "hots"'),
                           (19, 'unknown key "colour"')):
            self.assertRegex(out, r"p\.yaml:%d:\d+: [^\n]*%s" % (line,
                re.escape(what)), out)
        # a regex Hyperscan refuses, at its line; an allow naming no rule
        self.write("    dlp:\n      rules:\n        - id: broken\n"
                   "          regex: 'a(b'\n")
        r = T.run_sandgate("policy", "check", "-c", self.cfg)
        self.assertEqual(r.returncode, 1, r)
        self.assertRegex(r.stdout + r.stderr, r"p\.yaml:10:\d+: dlp: regex:")
        self.write("    dlp:\n      allow:\n        - rule: nope\n")
        r = T.run_sandgate("policy", "check", "-c", self.cfg)
        self.assertRegex(r.stdout + r.stderr,
            r"p\.yaml:9:\d+: rule: no dlp rule is named \"nope\"")
        self.write("    dlp:\n      mode: report\n      rules:\n"
                   "        - id: acme\n          regex: 'acme_[a-z]{8}'\n"
                   "      allow:\n        - rule: dns-encoded-name\n"
                   "        - host: '*.example.org'\n          rule: acme\n")
        r = T.run_sandgate("policy", "check", "-c", self.cfg)
        self.assertEqual(r.returncode, 0, r)

    def test_explain(self):
        self.write("    dlp:\n      allow:\n        - path: /health\n")
        def explain(target, *extra):
            r = T.run_sandgate("policy", "explain", "-c", self.cfg, "--policy",
                "p", *extra, target)
            self.assertEqual(r.returncode, 0, r)
            return r.stdout
        self.assertIn("dlp: block (request target, headers and bodies are "
            "scanned)", explain("api.example.com:443"))
        self.assertIn("dlp: block, does not apply (TLS is passed through",
            explain("pass.example.com:443"))
        self.assertIn("does not apply (an allow entry exempts it)",
            explain("api.example.com:443", "--method", "GET", "--path",
            "/health"))
        doc = json.loads(explain("api.example.com:443", "--format", "json"))
        self.assertEqual(doc["dlp"]["mode"], "block")
        self.assertTrue(doc["dlp"]["applies"])
        self.write("")
        self.assertIn("dlp: off, does not apply",
            explain("api.example.com:443"))


if __name__ == "__main__":
    T.main()
