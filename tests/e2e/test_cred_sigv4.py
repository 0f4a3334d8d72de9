#!/usr/bin/python3
"""
aws_sigv4 credentials (issue 25 point 1; docs/credentials.md "aws_sigv4")
with the real gateway, Debian's boto3 as the client and an HTTPS origin
(s3_origin.py) that checks every signature with botocore's own signer and the
REAL key and session token. The client holds only the placeholders the
gateway issued (key id and secret) and goes through the explicit proxy.

What must hold: boto3 uploads, lists, downloads and deletes S3 objects, and
calls a JSON API whose body the gateway hashes itself; a presigned URL works
over HTTP/1.1 and HTTP/2 (curl); the origin only ever sees the real key id
and token, the sandbox never (an echo of them comes back as placeholders).
Refused before the origin sees anything: a request altered after signing, one
signed with another secret, aws-chunked signed chunks (aws-chunked-refused), a
body over the bound without X-Amz-Content-SHA256 (aws-body-too-large),
SigV4a, a key of the sandbox's own (foreign-credential) and the placeholder
sent to a host it is not bound to (credential-misuse).
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402

try:
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
    from botocore.exceptions import ClientError
except ImportError:  # pragma: no cover
    T.skip_file("python3-boto3 is not installed")

REAL_ID = "AKIAREALKEYID0000001"
REAL_SECRET = "rEaL/Secret+Key0123456789abcdefghijKLMNO"
REAL_TOKEN = "FwoGZXIvYXdzEXAMPLEreal+session/token0123456789abcdefghij=="
ORIGIN = C.ORIGIN_HOST

POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: s3.test
        ports: [{port}]
        tls: intercept
      - host: ddb.test
        ports: [{port}]
        tls: intercept
      - host: other.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [aws]
credentials:
  - name: aws
    kind: aws_sigv4
    secret: aws-prod
    hosts: [s3.test, ddb.test]
    env: AWS_ACCESS_KEY_ID
    secret_env: AWS_SECRET_ACCESS_KEY
"""


def start_origin(d, bind, port, cert, key, token=REAL_TOKEN, prefix=()):
    """s3_origin.py, started by PID; returns (proc, port, log path)."""
    log = os.path.join(d, "s3-origin-%d.jsonl" % len(os.listdir(d)))
    argv = list(prefix) + ["/usr/bin/python3", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "s3_origin.py"),
        "--bind", bind, "--port", str(port), "--cert", cert, "--key", key,
        "--keyid", REAL_ID, "--secret", REAL_SECRET, "--log", log]
    if token:
        argv += ["--token", token]
    proc = T.Proc(argv, log + ".out")
    deadline = time.time() + 20
    while time.time() < deadline:
        for line in proc.log_text().splitlines():
            if line.startswith("ready "):
                return proc, int(line.split()[1]), log
        if not proc.alive():
            break
        time.sleep(0.05)
    proc.stop()
    raise RuntimeError("s3_origin did not start:\n" + proc.log_tail())


def origin_log(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


class SigV4Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-sigv4-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        cert, key = cls.pki.leaf("s3.test", ["s3.test", "ddb.test",
                                             "other.test"])
        cls.origin, cls.port, cls.log = start_origin(d, ORIGIN, 0, cert, key)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN) for n in ("s3.test", "ddb.test",
                                                      "other.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.admin_sock = os.path.join(d, "admin.sock")
        cls.gw = T.Gateway(d, cls.dns, {"aws.yaml": POLICY.format(
            port=cls.port, origin=ORIGIN)}, extra={
            "upstream": {"ca_bundle": cls.pki.cert},
            "listen": {"admin": cls.admin_sock}})
        cls.gw.vault_set(("aws-prod", "%s:%s:%s" % (REAL_ID, REAL_SECRET,
                                                    REAL_TOKEN)))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.wait_admin(cls.admin_sock)
        st, _, doc = C.admin_request(cls.admin_sock, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        box = [e for e in doc["sandboxes"] if e["id"] == "box-a"][0]
        phs = [p for p in box["placeholders"] if p["credential"] == "aws"]
        cls.ph_id = [p for p in phs if "part" not in p][0]
        cls.ph_secret = [p for p in phs if p.get("part") == "secret"][0]
        cls.proxy = "http://127.0.0.1:%d" % cls.gw.port

    # ------------------------------------------------------------ helpers

    def client(self, service, host, key_id=None, secret=None, sigv=None):
        if sigv is None:
            sigv = "s3v4" if service == "s3" else "v4"
        return boto3.client(
            service, endpoint_url="https://%s:%d" % (host, self.port),
            region_name="us-east-1",
            aws_access_key_id=key_id or self.ph_id["placeholder"],
            aws_secret_access_key=secret or self.ph_secret["placeholder"],
            verify=self.gw_ca,
            config=Config(proxies={"https": self.proxy}, signature_version=sigv,
                          s3={"addressing_style": "path"},
                          retries={"max_attempts": 1}))

    def mark(self):
        return len(origin_log(self.log))

    def since(self, n):
        return origin_log(self.log)[n:]

    def assert_never_real(self, blob):
        for s in (REAL_ID, REAL_SECRET, REAL_TOKEN):
            self.assertNotIn(s.encode() if isinstance(blob, bytes) else s,
                             blob)

    def signed(self, method, host, path, headers=None, body=b"",
               service="s3", secret=None, key_id=None, ts=None):
        """A request signed as boto3 would (placeholders by default)."""
        req = AWSRequest(method=method, url="https://%s:%d%s" % (
            host, self.port, path), data=body, headers=dict(headers or {}))
        req.headers["Host"] = "%s:%d" % (host, self.port)
        auth = SigV4Auth(Credentials(key_id or self.ph_id["placeholder"],
                                     secret or self.ph_secret["placeholder"]),
                         service, "us-east-1")
        auth.add_auth(req)
        if ts is not None:
            del req.headers["X-Amz-Date"]
            req.headers["X-Amz-Date"] = ts
        return req

    def send(self, host, req, body=b""):
        """One request on an intercepted tunnel; the Response."""
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        import ssl
        ctx = ssl.create_default_context(cafile=self.gw_ca)
        c.sock = ctx.wrap_socket(c.sock, server_hostname=host)
        path = req.url.split("%d" % self.port, 1)[1]
        head = "%s %s HTTP/1.1\r\n" % (req.method, path)
        head += "".join("%s: %s\r\n" % kv for kv in req.headers.items())
        if body and "Content-Length" not in req.headers and \
                "Transfer-Encoding" not in req.headers:
            head += "Content-Length: %d\r\n" % len(body)
        c.send(head.encode("latin-1") + b"\r\n" + body)
        return c.read_response(req.method)

    def refused(self, resp, reason, status=403, n0=None):
        """resp (None: the client checked the status) refused with reason,
        a deny row naming the credential, nothing at the origin after n0."""
        if resp is not None:
            self.assertEqual((resp.status, resp.header("X-Sandgate-Reason")),
                             (status, reason), resp)
        rows = self.gw.wait_audit(decision="deny", reason=reason)
        self.assertTrue(rows, "no deny row for %s" % reason)
        self.assertEqual(rows[-1]["credential"], "aws", rows[-1])
        if n0 is not None:
            time.sleep(0.2)
            self.assertEqual(self.since(n0), [], "the origin saw it")

    # ------------------------------------------------------------ tests

    def test_01_placeholders(self):
        self.assertEqual(self.ph_id["env"], "AWS_ACCESS_KEY_ID")
        self.assertEqual(self.ph_secret["env"], "AWS_SECRET_ACCESS_KEY")
        self.assertTrue(self.ph_id["placeholder"].startswith("sg-ph-"))
        self.assertEqual(len(self.ph_secret["placeholder"]), 40)
        self.assertNotIn(REAL_ID, json.dumps([self.ph_id, self.ph_secret]))

    def test_02_boto3_s3_round_trip(self):
        n0 = self.mark()
        s3 = self.client("s3", "s3.test")
        data = os.urandom(3000) + b"sigv4 round trip"
        s3.put_object(Bucket="bkt", Key="dir/a b.bin", Body=data)
        s3.put_object(Bucket="bkt", Key="two.txt", Body=b"second")
        keys = [o["Key"] for o in s3.list_objects_v2(
            Bucket="bkt", Prefix="")["Contents"]]
        self.assertEqual(keys, ["dir/a b.bin", "two.txt"])
        got = s3.get_object(Bucket="bkt", Key="dir/a b.bin")["Body"].read()
        self.assertEqual(got, data)
        s3.delete_object(Bucket="bkt", Key="two.txt")
        seen = self.since(n0)
        self.assertGreaterEqual(len(seen), 5, seen)
        for rec in seen:
            self.assertTrue(rec["ok"], rec)
            self.assertIn("Credential=" + REAL_ID + "/", rec["auth"])
            self.assertEqual(rec["token"], REAL_TOKEN)
            self.assertNotIn(self.ph_id["placeholder"], json.dumps(rec))
        rows = self.gw.wait_audit(decision="allow", host="s3.test")
        self.assertTrue(any(r["credential"] == "aws" for r in rows), rows)

    def test_03_json_api_body_hashed_by_gateway(self):
        n0 = self.mark()
        ddb = self.client("dynamodb", "ddb.test")
        out = ddb.list_tables(Limit=3)
        self.assertEqual(out["TableNames"], [])
        seen = self.since(n0)
        self.assertEqual(len(seen), 1, seen)
        self.assertTrue(seen[0]["ok"], seen[0])
        self.assertIsNone(seen[0]["sha"], "boto3 sent no payload hash: the "
                          "gateway hashed the body")
        self.assertGreater(seen[0]["len"], 0)

    def test_04_presigned_http1_and_http2(self):
        s3 = self.client("s3", "s3.test")
        s3.put_object(Bucket="pre", Key="obj", Body=b"presigned body")
        url = s3.generate_presigned_url("get_object", Params={
            "Bucket": "pre", "Key": "obj"}, ExpiresIn=300)
        self.assertIn(self.ph_id["placeholder"], url)
        for flag in ("--http1.1", "--http2"):
            with self.subTest(flag=flag):
                n0 = self.mark()
                r = subprocess.run(["curl", "-sS", flag, "--proxy", self.proxy,
                    "--cacert", self.gw_ca, "--resolve",
                    "s3.test:%d:%s" % (self.port, ORIGIN), url],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                self.assertEqual(r.stdout, b"presigned body", (r.stdout, r.stderr))
                seen = self.since(n0)
                self.assertEqual(len(seen), 1, seen)
                self.assertTrue(seen[0]["ok"] and seen[0]["presigned"], seen)
                self.assertIn("X-Amz-Credential=" + REAL_ID, seen[0]["path"])
                self.assertIn("X-Amz-Security-Token=", seen[0]["path"])
        # S3's legacy SigV2 presigned URL cannot be re-signed: refused.
        v2 = self.client("s3", "s3.test", sigv="s3").generate_presigned_url(
            "get_object", Params={"Bucket": "pre", "Key": "obj"})
        self.assertIn("AWSAccessKeyId=", v2)
        n0 = self.mark()
        r = subprocess.run(["curl", "-sS", "--proxy", self.proxy, "--cacert",
            self.gw_ca, "-o", "/dev/null", "-w", "%{http_code}", v2],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(r.stdout, b"403", r.stderr)
        self.refused(None, "aws-signature-unsupported", n0=n0)

    def test_04b_curl_aws_sigv4_http1_and_http2(self):
        """Another signer (curl's --aws-sigv4), over HTTP/1.1 and HTTP/2."""
        s3 = self.client("s3", "s3.test")
        s3.put_object(Bucket="curl", Key="obj", Body=b"curl body")
        for flag in ("--http1.1", "--http2"):
            with self.subTest(flag=flag):
                n0 = self.mark()
                r = subprocess.run(["curl", "-sS", flag, "--proxy", self.proxy,
                    "--cacert", self.gw_ca, "--aws-sigv4",
                    "aws:amz:us-east-1:s3", "--user", "%s:%s" % (
                        self.ph_id["placeholder"],
                        self.ph_secret["placeholder"]),
                    "https://s3.test:%d/curl/obj" % self.port],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                self.assertEqual(r.stdout, b"curl body", (r.stdout, r.stderr))
                seen = self.since(n0)
                self.assertEqual(len(seen), 1, seen)
                self.assertTrue(seen[0]["ok"], seen)
                self.assertIn("Credential=" + REAL_ID + "/", seen[0]["auth"])

    def test_04c_curl_json_body_http1_hashed_http2_refused(self):
        """A body signed without X-Amz-Content-SHA256 (curl, a non-S3
        service): over HTTP/1.1 the gateway hashes it; an HTTP/2 stream's
        body is not read before deciding: 413 aws-body-too-large."""
        def call(flag):
            return subprocess.run(["curl", "-sS", flag, "--proxy", self.proxy,
                "--cacert", self.gw_ca, "--aws-sigv4",
                "aws:amz:eu-central-1:dynamodb", "--user", "%s:%s" % (
                    self.ph_id["placeholder"], self.ph_secret["placeholder"]),
                "-H", "X-Amz-Target: DynamoDB_20120810.ListTables",
                "-H", "Content-Type: application/x-amz-json-1.0",
                "-d", '{"Limit":2}', "-D", "-",
                "https://ddb.test:%d/" % self.port],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        n0 = self.mark()
        r = call("--http1.1")
        self.assertIn(b'"TableNames": []', r.stdout, r)
        seen = self.since(n0)
        self.assertEqual(len(seen), 1, seen)
        self.assertTrue(seen[0]["ok"], seen)
        self.assertIsNone(seen[0]["sha"], seen)
        n0 = self.mark()
        r = call("--http2")
        self.assertIn(b"x-sandgate-reason: aws-body-too-large",
                      r.stdout.lower(), r)
        time.sleep(0.2)
        self.assertEqual(self.since(n0), [])

    def test_05_altered_after_signing(self):
        req = self.signed("GET", "s3.test", "/bkt/two.txt")
        # The path changed after signing: the placeholder signature fails.
        req.url = req.url.replace("two.txt", "one.txt")
        n0 = self.mark()
        self.refused(self.send("s3.test", req), "aws-signature-invalid",
                     n0=n0)
        # A signed header changed.
        req = self.signed("GET", "s3.test", "/bkt/two.txt",
                          headers={"X-Amz-Meta-A": "1"})
        req.headers.replace_header("X-Amz-Meta-A", "2")
        self.refused(self.send("s3.test", req), "aws-signature-invalid",
                     n0=n0)
        # Signed with another secret (the sandbox guessing the real one).
        req = self.signed("GET", "s3.test", "/bkt/two.txt",
                          secret=REAL_SECRET[::-1])
        self.refused(self.send("s3.test", req), "aws-signature-invalid",
                     n0=n0)
        # A body altered after signing a JSON call the gateway hashes.
        body = b'{"Limit":1}'
        req = self.signed("POST", "ddb.test", "/", body=body,
                          service="dynamodb", headers={
                              "X-Amz-Target": "DynamoDB_20120810.ListTables",
                              "Content-Type": "application/x-amz-json-1.0"})
        self.refused(self.send("ddb.test", req, body=b'{"Limit":2}'),
                     "aws-signature-invalid", n0=n0)

    def test_06_streaming_and_body_bound(self):
        n0 = self.mark()
        req = self.signed("PUT", "s3.test", "/bkt/stream", headers={
            "X-Amz-Content-SHA256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
            "Content-Encoding": "aws-chunked",
            "X-Amz-Decoded-Content-Length": "5"}, body=b"")
        self.refused(self.send("s3.test", req), "aws-chunked-refused", n0=n0)
        big = b"x" * (100 * 1024)
        req = self.signed("POST", "ddb.test", "/", body=big,
                          service="dynamodb", headers={
                              "X-Amz-Target": "DynamoDB_20120810.PutItem"})
        self.refused(self.send("ddb.test", req, body=big),
                     "aws-body-too-large", status=413, n0=n0)
        # Chunked, no payload hash: the gateway cannot hash it before deciding.
        small = b'{"Limit":1}'
        req = self.signed("POST", "ddb.test", "/", body=small,
                          service="dynamodb", headers={
                              "X-Amz-Target": "DynamoDB_20120810.ListTables",
                              "Transfer-Encoding": "chunked"})
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(small), small)
        self.refused(self.send("ddb.test", req, body=chunked),
                     "aws-body-too-large", status=413, n0=n0)

    def test_07_sigv4a_and_wrong_day(self):
        n0 = self.mark()
        req = self.signed("GET", "s3.test", "/bkt/two.txt")
        req.headers.replace_header("Authorization", req.headers[
            "Authorization"].replace("AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256"))
        self.refused(self.send("s3.test", req), "aws-signature-unsupported", n0=n0)
        req = self.signed("GET", "s3.test", "/bkt/two.txt",
                          ts="20000101T000000Z")
        self.refused(self.send("s3.test", req), "aws-signature-unsupported", n0=n0)

    def test_08_own_key_and_other_host(self):
        n0 = self.mark()
        # A key of the sandbox's own to the bound host: not through this door.
        s3 = self.client("s3", "s3.test", key_id="AKIAOWNKEY0000000000",
                         secret="own-secret-0123456789")
        with self.assertRaises(ClientError) as e:
            s3.get_object(Bucket="bkt", Key="two.txt")
        self.assertEqual(e.exception.response["ResponseMetadata"][
            "HTTPStatusCode"], 403)
        rows = self.gw.wait_audit(decision="deny", reason="foreign-credential",
                                  host="s3.test")
        self.assertTrue(rows)
        self.assertEqual(rows[-1]["credential"], "aws")
        # ... nor in a presigned URL (SigV4 or S3's SigV2).
        for sigv in ("s3v4", "s3"):
            own = self.client("s3", "s3.test", key_id="AKIAOWNKEY0000000000",
                              secret="own-secret-0123456789", sigv=sigv)
            url = own.generate_presigned_url("get_object", Params={
                "Bucket": "bkt", "Key": "two.txt"})
            r = subprocess.run(["curl", "-sS", "--proxy", self.proxy,
                "--cacert", self.gw_ca, "-o", "/dev/null", "-D", "-", url],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertIn(b"x-sandgate-reason: foreign-credential",
                          r.stdout.lower(), (sigv, r.stdout, r.stderr))
        # The placeholder to a host the credential is not bound to.
        other = self.client("s3", "other.test")
        with self.assertRaises(ClientError):
            other.get_object(Bucket="bkt", Key="two.txt")
        rows = self.gw.wait_audit(decision="deny", reason="credential-misuse",
                                  host="other.test")
        self.assertTrue(rows)
        self.assertEqual(rows[-1]["credential"], "aws")
        time.sleep(0.2)
        self.assertEqual(self.since(n0), [])

    def test_09_echoed_credentials_scrubbed(self):
        s3 = self.client("s3", "s3.test")
        body = s3.get_object(Bucket="bkt", Key="leak")["Body"].read()
        self.assert_never_real(body)
        doc = json.loads(body)
        self.assertEqual(doc["AccessKeyId"], self.ph_id["placeholder"])
        self.assertEqual(doc["SecretAccessKey"], self.ph_secret["placeholder"])
        self.assertEqual(doc["SessionToken"], self.ph_secret["placeholder"])

    def test_10_explain_and_check(self):
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
                           "--sandbox", "box-a", "s3.test:%d" % self.port)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kind: aws_sigv4", r.stdout)
        self.assertIn("re-signed with the real key", r.stdout)
        self.assertIn("$AWS_SECRET_ACCESS_KEY", r.stdout)


CHECK_HEAD = """\
sandboxes:
  - id: dev
    policy: p
    source: [127.0.0.1/32]
policies:
  - name: p
    allow:
      - host: s3.test
    credentials: [aws]
credentials:
  - name: aws
    secret: aws-prod
    hosts: [s3.test]
"""


class SigV4CheckTest(unittest.TestCase):
    """policy check and explain, offline."""

    def setUp(self):
        self.td = T.TempDir()
        self.addCleanup(self.td.cleanup)
        d = self.td.path
        os.makedirs(os.path.join(d, "policies"))
        self.pfile = os.path.join(d, "policies", "p.yaml")
        self.cfg = os.path.join(d, "sandgate.yaml")
        with open(self.cfg, "w") as f:
            f.write("state_dir: ./var\npolicies: [./policies]\n")

    def check(self, tail):
        text = CHECK_HEAD + tail
        with open(self.pfile, "w") as f:
            f.write(text)
        r = T.run_sandgate("policy", "check", "-c", self.cfg)
        diags = []
        for line in r.stderr.splitlines():
            m = re.match(r"^(.+?):(\d+):(\d+): (\S.*)$", line)
            if m and m.group(1).endswith("p.yaml"):
                diags.append((int(m.group(2)), m.group(4)))
        return text, r, diags

    def test_good(self):
        for tail in ("    kind: aws_sigv4\n",
                     "    kind: aws_sigv4\n    env: AWS_ACCESS_KEY_ID\n"
                     "    secret_env: AWS_SECRET_ACCESS_KEY\n"
                     "    placeholder_shape: {prefix: AKIA, length: 30, "
                     "alphabet: base32upper}\n",
                     "    kind: aws_sigv4\n    query: false\n    require: true\n",
                     "    kind: static\n"):
            with self.subTest(tail=tail):
                _, r, diags = self.check(tail)
                self.assertEqual((r.returncode, diags), (0, []), r)

    def test_errors_at_their_line(self):
        cases = (
            ("    kind: sigv4\n", "kind:", "not one of"),
            ("    kind: aws_sigv4\n    headers: [Authorization]\n", "headers:",
             "not with kind aws_sigv4"),
            ("    secret_env: AWS_SECRET_ACCESS_KEY\n", "secret_env:",
             "only with kind aws_sigv4"),
            ("    kind: aws_sigv4\n    secret_env: \"9 bad\"\n", "secret_env:",
             "not an environment variable name"),
        )
        for tail, marker, words in cases:
            with self.subTest(tail=tail):
                text, r, diags = self.check(tail)
                self.assertEqual(r.returncode, 1, r)
                want = text.count("\n", 0, text.index(marker)) + 1
                self.assertTrue(any(ln == want and words in m for ln, m in diags),
                                "want line %d with %r: %r" % (want, words,
                                                              r.stderr))

    def test_explain_json(self):
        self.check("    kind: aws_sigv4\n    secret_env: AWS_SECRET_ACCESS_KEY\n")
        r = T.run_sandgate("policy", "explain", "-c", self.cfg, "--sandbox",
                           "dev", "--format", "json", "s3.test")
        self.assertEqual(r.returncode, 0, r.stderr)
        cred = json.loads(r.stdout)["credentials"][0]
        self.assertEqual((cred["kind"], cred["query"], cred["secret_env"]),
                         ("aws_sigv4", True, "AWS_SECRET_ACCESS_KEY"))


if __name__ == "__main__":
    T.main()
