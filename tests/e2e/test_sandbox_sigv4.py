#!/usr/bin/python3
"""
boto3 inside a sandbox (issue 25 point 1): `sandgate sandbox run` in both
runtimes starts Debian's python3 with boto3, whose only credentials are the
placeholders the launcher put in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
(and the gateway's CA in AWS_CA_BUNDLE). It uploads, lists and downloads S3
objects at s3.test:443, an HTTPS origin in the fake-internet namespace
(s3_origin.py) that checks every signature with botocore's signer and the
REAL key and session token; the transparent listener intercepts and
re-signs. The sandbox never sees the real key: not in its environment, not
in an answer that echoes it. Root only (exit 77 otherwise).
"""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402
from sbtest import (INET_NET, INET_NS, INET_ORIGIN, IP,  # noqa: E402
    SandboxWorld, skip_unless_root)
from test_cred_sigv4 import (REAL_ID, REAL_SECRET, REAL_TOKEN,  # noqa: E402
    origin_log, start_origin)

POLICY = """\
policies:
  - name: web
    allow:
      - host: s3.test
        ports: [443]
        tls: intercept
    allow_private: [%s.0/24]
    credentials: [aws]
credentials:
  - name: aws
    kind: aws_sigv4
    secret: aws-prod
    hosts: [s3.test]
    env: AWS_ACCESS_KEY_ID
    secret_env: AWS_SECRET_ACCESS_KEY
""" % INET_NET

CLIENT = r"""
import json, os, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url="https://s3.test", region_name="eu-west-3",
    config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                  retries={"max_attempts": 1}))
data = b"from the sandbox " + os.environ["SANDGATE_SANDBOX"].encode()
s3.put_object(Bucket="sb", Key="dir/k 1", Body=data)
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="sb")["Contents"]]
got = s3.get_object(Bucket="sb", Key="dir/k 1")["Body"].read()
leak = s3.get_object(Bucket="sb", Key="leak")["Body"].read().decode()
print(json.dumps({"keys": keys, "same": got == data, "leak": leak,
                  "env": dict(os.environ)}))
"""


class SandboxSigV4Test(SandboxWorld):
    POLICY = POLICY
    NAMES = ("s3.test",)

    @classmethod
    def setUpClass(cls):
        cls.pki_dir = T.TempDir("sgtest-sbsigv4-pki-")
        cls.addClassCleanup(cls.pki_dir.cleanup)
        os.chmod(cls.pki_dir.path, 0o755)
        cls.pki = C.TestCA(cls.pki_dir.path)
        cls.cert, cls.key = cls.pki.leaf("s3.test", ["s3.test"])
        for p in (cls.pki.d, cls.pki.cert):
            os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
        cls.EXTRA = {"upstream": {"ca_bundle": cls.pki.cert}}
        super().setUpClass()
        r = T.run_sandgate("vault", "set", "aws-prod", "-c", cls.gw.cfg_path,
                           input="%s:%s:%s" % (REAL_ID, REAL_SECRET, REAL_TOKEN))
        if r.returncode != 0:
            raise RuntimeError("vault set: " + r.stderr)
        # The gateway loaded its secrets at start: once more, with the entry.
        cls.gw.stop()
        cls.gw.start()
        cls.s3, _, cls.log = start_origin(cls.pki_dir.path, INET_ORIGIN, 443,
            cls.cert, cls.key, prefix=(IP, "netns", "exec", INET_NS))
        cls.addClassCleanup(cls.s3.stop)

    def test_boto3_in_sandbox(self):
        def one(rt):
            n0 = len(origin_log(self.log))
            sid = "t-sigv4-" + rt
            r = self.run_sandbox(rt, sid, ["/usr/bin/python3", "-c", CLIENT],
                                 timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr +
                             self.gw.log_tail())
            out = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual(out["keys"], ["dir/k 1"])
            self.assertTrue(out["same"])
            blob = r.stdout + r.stderr
            for real in (REAL_ID, REAL_SECRET, REAL_TOKEN):
                self.assertNotIn(real, blob)
            env = out["env"]
            self.assertTrue(env["AWS_ACCESS_KEY_ID"].startswith("sg-ph-"), env)
            self.assertEqual(len(env["AWS_SECRET_ACCESS_KEY"]), 40, env)
            leak = json.loads(out["leak"])
            self.assertEqual(leak["AccessKeyId"], env["AWS_ACCESS_KEY_ID"])
            self.assertEqual(leak["SecretAccessKey"],
                             env["AWS_SECRET_ACCESS_KEY"])
            seen = origin_log(self.log)[n0:]
            self.assertGreaterEqual(len(seen), 4, seen)
            for rec in seen:
                self.assertTrue(rec["ok"], rec)
                self.assertIn("Credential=%s/" % REAL_ID, rec["auth"])
                self.assertIn("/eu-west-3/s3/", rec["auth"])
            rows = self.gw.wait_audit(sandbox=sid, host="s3.test",
                                      decision="allow", kind="transparent")
            self.assertTrue(rows and all(x["credential"] == "aws"
                                         for x in rows), rows)
            ran.append(rt)
            self.check_clean(sid)
        ran = []
        self.each_runtime(one)
        print("ran in:", ran, file=sys.stderr)


if __name__ == "__main__":
    skip_unless_root()
    T.main()
