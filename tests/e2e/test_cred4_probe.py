#!/usr/bin/python3
"""
Fourth credential probe (AREA cred4): the credential kinds beyond static
keys -- aws_sigv4 (re-signed with the real key) and oauth2 (tokens the
gateway fetches). Attacker: the program in the sandbox.

Set-up: SigV4Cred4Probe reuses test_cred_sigv4.py's gateway and s3_origin.py
(an S3 that checks every signature with botocore and the REAL key and logs
every request it gets). OAuth2Cred4Probe runs one HTTPS origin of our own
(SameHostApi) that is both the bound API and its OAuth2 token endpoint, as
a self-hosted forge or CRM is (token_url https://<bound host>/oauth/token):
it answers tokens, and GET /log shows the last token request it got (a
request log / debug page, as test_scrub_probe's "request log" route).

Findings (fail on the binary they were written against):
- f01 (SigV4): a presigned URL signed with a key of the sandbox's own
  reaches the bound S3 host when the parameter name X-Amz-Credential (or
  SigV2 AWSAccessKeyId) is percent-encoded to 32 characters or more:
  `foreign-credential` is not applied. proxy_cred.c query_signed() skips
  names of >= 32 encoded bytes (char k[32]), while proxy_sigv4.c
  presigned_parse() decodes names up to 64 bytes -- the gateway itself
  reads `%58%2D%41...` as X-Amz-Credential (control: the placeholder under
  the same encoded name is re-signed and accepted by the origin).
- f02 (OAuth2): the client secret is not in the scrubber's set. With the
  token endpoint on a bound host, a route of that host that shows the
  token request (client_auth basic: the Authorization: Basic value and its
  decoded id:secret; client_auth body: the form) hands the client secret
  to the sandbox raw, while the refresh token in the same answer comes
  back as the placeholder.

Tried and held (one line each; test name where kept):
- h03: an access_token with CR LF (a header injection) in the token
  endpoint's answer: 502 credential-refresh-failed, audited with the
  credential, nothing reaches the API.
- SigV4 own key in a presigned URL with the name in lower case, or with
  one or a few bytes %-escaped (< 32 characters): foreign-credential.
- SigV4 placeholder presigned URL with X-Amz-Security-Token of the
  sandbox's own: dropped, the real token added (origin verified).
- SigV4 header form with the placeholder and a second, lower-case
  `authorization` of its own: foreign-credential.
- SigV4 placeholder in the query AND a SigV4 Authorization: refused
  ("signed both"); X-Amz-Date of another day than the scope: refused.
- SigV4: an answer of the bound host to a request carrying NO placeholder
  that quotes the real key id (header and body), secret key and session
  token: all scrubbed to the placeholders (tried with a scratch origin,
  not kept).
Covered elsewhere, not repeated: redirects of bound hosts followed by the
client (test_cred3_probe r01), token endpoint redirect/oversize/odd answers
(test_cred_oauth2), error codes quoting the refresh token
(test_cred2_probe), previous access token scrubbed (test_scrub_probe f05),
Range kept for aws_sigv4 (test_scrub_probe f06), aws-chunked, body bound,
SigV4a and wrong-day dates (test_cred_sigv4).
Not promised (so not tests): X-Amz-Date far in the past/future and
X-Amz-Expires (docs: "the time window ... AWS's own 15-minute check
applies"); an origin that shows the canonical request in hex (S3's
CanonicalRequestBytes: "A host that transforms the key"); two oauth2
credentials naming one vault entry with different scope: (docs: "the first
one seen asks with its settings").
"""

import base64
import json
import os
import ssl
import sys
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA  # noqa: E402
import test_cred_sigv4 as SV  # noqa: E402  (skips the file without boto3)

ORIGIN_HOST = "127.0.0.2"
OWN_ID = "AKIAOWNKEY0000000000"
OWN_SECRET = "own-secret-0123456789"


def pct_name(name, n):
    """name with its first n characters written as %XX."""
    return "".join("%%%02X" % ord(ch) for ch in name[:n]) + name[n:]


# ---------------------------------------------------------------- aws_sigv4

def aws_query_check(raw_path, port):
    """s3_origin's presigned check with the REAL key over raw_path whose
    parameter names are decoded and encoded again (as AWS canonicalises
    the query): None when the signature verifies, else why not."""
    import s3_origin
    from http.client import HTTPMessage
    path, _, q = raw_path.partition("?")
    pairs = []
    for p in q.split("&"):
        k, eq, v = p.partition("=")
        pairs.append(urllib.parse.quote(urllib.parse.unquote(k),
                                        safe="-_.~") + eq + v)

    class Args:
        keyid, secret, token = SV.REAL_ID, SV.REAL_SECRET, SV.REAL_TOKEN

    class Store:
        args = Args
    h = HTTPMessage()
    h["Host"] = "s3.test:%d" % port
    return s3_origin.check_query_form(None, Store, "GET", path + "?" +
                                      "&".join(pairs), h, b"")


class SigV4Cred4Probe(unittest.TestCase):
    """test_cred_sigv4's gateway and S3 origin (the REAL key checks)."""

    setUpClass = classmethod(SV.SigV4Test.setUpClass.__func__)
    client = SV.SigV4Test.client
    mark = SV.SigV4Test.mark
    since = SV.SigV4Test.since
    signed = SV.SigV4Test.signed
    send = SV.SigV4Test.send

    def get_raw(self, host, target, extra=""):
        """GET target on a fresh intercepted tunnel; the Response."""
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        ctx = ssl.create_default_context(cafile=self.gw_ca)
        ctx.set_alpn_protocols(["http/1.1"])
        c.sock = ctx.wrap_socket(c.sock, server_hostname=host)
        c.send(("GET %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n" % (
            target, host, self.port, extra)).encode("latin-1"))
        return c.read_response("GET")

    def presigned_path(self, key_id, secret, sigv):
        s3 = self.client("s3", "s3.test", key_id=key_id, secret=secret,
                         sigv=sigv)
        url = s3.generate_presigned_url("get_object", Params={
            "Bucket": "c4", "Key": "obj"}, ExpiresIn=300)
        return url.split(":%d" % self.port, 1)[1]

    def test_f01_own_key_presigned_encoded_param_name(self):
        """
        Promise (docs/credentials.md "aws_sigv4"): "a request to `hosts`
        signed with a key of the sandbox's own -- in `Authorization`, or a
        presigned URL's `X-Amz-Credential` or SigV2 `AWSAccessKeyId` -- is
        `foreign-credential` (`exclusive`, the default)"; SPEC section 7:
        "an attacker's own key must not carry data out through an allowed
        API".
        Sent: GET /c4/obj?X-Amz-Algorithm=AWS4-HMAC-SHA256&
        %58%2D%41%6D%7A%2D%43%72%65%64%65%6E%74%69%61%6C=AKIAOWNKEY...%2F
        <date>%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=...&X-Amz-Expires
        =300&X-Amz-SignedHeaders=host&X-Amz-Signature=<own signature> over
        an intercepted tunnel to s3.test (a boto3 presigned URL of the
        sandbox's own key, the name X-Amz-Credential percent-encoded); the
        same for SigV2 (AWSAccessKeyId, 9 bytes encoded).
        Happened: forwarded to the bound origin untouched, no deny row;
        with the name written plainly, or fewer bytes encoded, it is
        refused foreign-credential. Control: the sandbox's PLACEHOLDER
        under the same encoded name is recognised as X-Amz-Credential,
        re-signed and accepted by the origin (so the gateway itself reads
        that name as the credential parameter).
        Fault: src/exchange/proxy_cred.c query_signed(): `char k[32]` and
        `if (qp.name.len >= sizeof(k)) continue;` skips any name of 32 or
        more encoded bytes; presigned_parse() (proxy_sigv4.c) uses k[64].
        """
        # Control 1: the placeholder, X-Amz-Credential fully encoded (48
        # characters): the gateway reads it as the credential, re-signs.
        s3 = self.client("s3", "s3.test")
        s3.put_object(Bucket="c4", Key="obj", Body=b"cred4 object")
        path = self.presigned_path(None, None, "s3v4")
        self.assertIn("X-Amz-Credential=", path)
        enc = pct_name("X-Amz-Credential", 16)
        n0 = self.mark()
        self.get_raw("s3.test", path.replace("X-Amz-Credential=",
                                             enc + "=", 1))
        seen = self.since(n0)
        self.assertEqual(len(seen), 1, seen)
        # Re-signed under the encoded name with the real key id and token
        # (s3_origin's botocore verifier sorts names as sent, not decoded,
        # so its own verdict is not the AWS one: checked here on the
        # query as AWS canonicalises it, names decoded and encoded again).
        fwd = seen[0]["path"]
        self.assertIn(enc + "=" + SV.REAL_ID, fwd)
        self.assertIn("X-Amz-Security-Token=", fwd)
        self.assertEqual(aws_query_check(fwd, self.port), None, fwd)

        bad = []
        cases = (("s3v4", "X-Amz-Credential", 3),   # 22 characters
                 ("s3v4", "X-Amz-Credential", 16),  # 48 characters
                 ("s3v4", "X-Amz-Credential", 8),   # 32 characters
                 ("s3", "AWSAccessKeyId", 9))       # 32 characters
        for sigv, name, n in cases:
            path = self.presigned_path(OWN_ID, OWN_SECRET, sigv)
            self.assertIn(name + "=" + OWN_ID, path)
            target = path.replace(name + "=", pct_name(name, n) + "=", 1)
            n0 = self.mark()
            r = self.get_raw("s3.test", target)
            time.sleep(0.3)
            seen = self.since(n0)
            if (r.status, r.header("X-Sandgate-Reason")) != (
                    403, "foreign-credential") or seen:
                bad.append({"sent": target[:160], "status": r.status,
                            "reason": r.header("X-Sandgate-Reason"),
                            "origin saw": [s["path"][:120] for s in seen]})
        self.assertEqual(bad, [], "a presigned URL of the sandbox's own key "
                         "reached the bound host: %s" % json.dumps(bad,
                                                                  indent=1))

    def test_h02_presigned_and_header_tricks(self):
        """Held: a lower-case parameter name of the own key, a presigned
        URL with a session token of the sandbox's own (dropped, the real
        one added), a lower-case second authorization header, placeholder
        in both header and query."""
        s3 = self.client("s3", "s3.test")
        s3.put_object(Bucket="c4", Key="obj", Body=b"cred4 object")
        n0 = self.mark()
        path = self.presigned_path(OWN_ID, OWN_SECRET, "s3v4")
        r = self.get_raw("s3.test", path.replace("X-Amz-Credential=",
                                                 "x-amz-credential=", 1))
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (403, "foreign-credential"), r)
        # The sandbox's own X-Amz-Security-Token on a placeholder URL.
        path = self.presigned_path(None, None, "s3v4")
        r = self.get_raw("s3.test", path + "&X-Amz-Security-Token=OWNTOKEN")
        self.assertEqual(r.status, 403, r)  # not signed: the check fails
        self.assertEqual(r.header("X-Sandgate-Reason"),
                         "aws-signature-invalid", r)
        time.sleep(0.2)
        self.assertEqual(self.since(n0), [])
        # Header form, plus a second authorization of its own.
        req = self.signed("GET", "s3.test", "/c4/obj")
        req.headers["authorization"] = "AWS4-HMAC-SHA256 Credential=%s/" \
            "20240101/us-east-1/s3/aws4_request, SignedHeaders=host, " \
            "Signature=%s" % (OWN_ID, "0" * 64)
        r = self.send("s3.test", req)
        self.assertEqual(r.status, 403, r)
        self.assertIn(r.header("X-Sandgate-Reason"),
                      ("foreign-credential", "aws-signature-unsupported"), r)
        # Placeholder in the query too: "signed both".
        req = self.signed("GET", "s3.test", "/c4/obj?note=%s" %
                          self.ph_id["placeholder"])
        r = self.send("s3.test", req)
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (403, "aws-signature-unsupported"), r)
        time.sleep(0.2)
        self.assertEqual(self.since(n0), [])


# ---------------------------------------------------------------- oauth2

CLIENT_ID = "cred4-client"
# unreserved characters only: raw == every percent form
CLIENT_SECRET = "cs-cred4-ClientSecretValue-0123456789abcdef"
RT = "rt-cred4-RefreshTokenValue-0123456789abcdef"
PH = {"crm": "PHCRED4-oauth2-crm-000000001",
      "crmb": "PHCRED4-oauth2-crmb-00000001",
      "crlf": "PHCRED4-oauth2-crlf-00000001"}
NAMES = ["%s.test" % n for n in PH]


class SameHostApi(T.ScriptedOrigin):
    """
    The bound API and its token endpoint on one host. POST /oauth/token:
    a Bearer token (expires_in 3600, the refresh token not rotated); POST
    /oauth/crlf: an access_token with CR LF and a header after it; GET
    /log: the last token request as it came, and its client decoded (a
    request log); anything else: 200 "ok".
    """

    def __init__(self, cert, key):
        self.last_token_req = {}
        self.issued = []
        super().__init__(cert, key, ORIGIN_HOST)

    def answer(self, req):
        path, host = req["path"], req["hmap"].get("host", "")
        if path.startswith("/oauth/"):
            with self.lock:
                self.last_token_req[host.split(":")[0]] = req
            if path == "/oauth/crlf":
                doc = {"access_token": "at-crlf-0123456789\r\nX-Injected: 1",
                       "token_type": "Bearer", "expires_in": 3600}
            else:
                at = "at-cred4-%s" % os.urandom(10).hex()
                with self.lock:
                    self.issued.append(at)
                doc = {"access_token": at, "token_type": "Bearer",
                       "expires_in": 3600}
            body = json.dumps(doc).encode()
            return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n" %
                    len(body) + body), True
        if path.startswith("/log"):
            with self.lock:
                t = self.last_token_req.get(host.split(":")[0])
            if t is None:
                body = b"no token request yet\n"
            else:
                auth = t["hmap"].get("authorization", "")
                dec = b""
                if auth.startswith("Basic "):
                    dec = base64.b64decode(auth[6:])
                form = urllib.parse.parse_qs(t["body"].decode("latin-1"))
                body = (b"last token request:\n" + t["head"] + t["body"] +
                        b"\ndecoded client: " + dec + b"\nform: " +
                        json.dumps(form).encode() + b"\n")
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body), False
        body = b"ok\n"
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body), False


OA_POLICY = """\
sandboxes:
  - id: box-o
    policy: oa
    source: [127.0.0.1/32]
policies:
  - name: oa
    allow:
      - host: "*.test"
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [crm, crmb, crlf]
credentials:
  - name: crm
    kind: oauth2
    secret: crm-oauth
    hosts: [crm.test]
    placeholder: "{ph_crm}"
    oauth2:
      token_url: https://crm.test:{port}/oauth/token
      grant: refresh_token
  - name: crmb
    kind: oauth2
    secret: crmb-oauth
    hosts: [crmb.test]
    placeholder: "{ph_crmb}"
    oauth2:
      token_url: https://crmb.test:{port}/oauth/token
      grant: refresh_token
      client_auth: body
  - name: crlf
    kind: oauth2
    secret: crlf-oauth
    hosts: [crlf.test]
    placeholder: "{ph_crlf}"
    oauth2:
      token_url: https://crlf.test:{port}/oauth/crlf
      grant: refresh_token
"""


class OAuth2Cred4Probe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-cred4oa-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.api = SameHostApi(*cls.pki.leaf("crm.test", NAMES))
        cls.addClassCleanup(cls.api.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in NAMES])
        cls.addClassCleanup(cls.dns.stop)
        policy = OA_POLICY.format(port=cls.api.port, origin=ORIGIN_HOST,
                                  ph_crm=PH["crm"], ph_crmb=PH["crmb"],
                                  ph_crlf=PH["crlf"])
        cls.gw = T.Gateway(d, cls.dns, {"oa.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        entry = "client_id=%s\nclient_secret=%s\nrefresh_token=%s\n" % (
            CLIENT_ID, CLIENT_SECRET, RT)
        cls.gw.vault_set(*[(n + "-oauth", entry) for n in PH])
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = ssl.create_default_context(cafile=cls.gw.ca_path())
        cls.ctx.set_alpn_protocols(["http/1.1"])

    def call(self, name, path, with_ph=True):
        host = "%s.test" % name
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, self.api.port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.send(("GET %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n" % (
            path, host, self.api.port, "Authorization: Bearer %s\r\n" %
            PH[name] if with_ph else "")).encode())
        return c.read_response()

    def test_f02_client_secret_echoed_by_bound_host(self):
        """
        Promise (docs/credentials.md "OAuth 2.0 credentials", "What this
        closes"): "The sandbox cannot read, send elsewhere or keep the
        client secret or the refresh token: they never leave the gateway
        except to `token_url`"; threat model, "Reading the key back from
        the API ... a debugging route: the secret in response headers or
        body comes back as the placeholder", and a page "that shows a key
        the host keeps (a request log ...)" is closed for requests carrying
        no placeholder too.
        Set-up: token_url on the bound host itself (crm.test, client_auth
        basic; crmb.test, client_auth body), as a self-hosted service has
        it. Sent: GET /api with `Authorization: Bearer <placeholder>` (the
        gateway fetches a token from https://crm.test/oauth/token), then
        GET /log on the bound host, with and without the placeholder.
        Happened: the answer carries the client secret raw (the decoded
        Basic id:secret, the form's client_secret=) and the Basic value
        base64(id:secret) whole; the refresh token in the same answer IS
        replaced by the placeholder (the scrubber ran).
        Fault: src/exchange/proxy_cred.c cred_scrub_lists() lists an
        oauth2 credential's #access, #was and #refresh names only; the
        entry's client_secret is never a scrub target (nor is it published
        in the snapshot: src/vault/oauth2_token.c).
        """
        basic = base64.b64encode(("%s:%s" % (CLIENT_ID, CLIENT_SECRET)
                                  ).encode())
        bad = []
        for name in ("crm", "crmb"):
            r = self.call(name, "/api/%s" % name)
            self.assertEqual(r.status, 200, r)
            t = self.api.last_token_req.get("%s.test" % name)
            self.assertIsNotNone(t, "control: no token request at the "
                                 "bound host")
            self.assertIn(CLIENT_SECRET.encode(),
                          base64.b64decode(t["hmap"]["authorization"][6:])
                          if name == "crm" else t["body"])
            for with_ph in (True, False):
                r = self.call(name, "/log", with_ph=with_ph)
                self.assertEqual(r.status, 200, r)
                blob = r.raw_head + r.body
                # control: the scrubber ran on this answer
                self.assertNotIn(RT.encode(), blob)
                self.assertIn(PH[name].encode(), r.body)
                for t_ in self.api.issued:
                    self.assertNotIn(t_.encode(), blob)
                got = [f for f, v in (("raw", CLIENT_SECRET.encode()),
                                      ("basic", basic)) if v in blob]
                if got:
                    bad.append((name, "placeholder" if with_ph else
                                "no placeholder", got))
        self.assertEqual(bad, [], "the OAuth2 client secret reached the "
                         "sandbox: %r" % bad)
        rows = self.gw.wait_audit(decision="allow", credential="crm")
        self.assertTrue(rows, "no allow row naming crm")

    def test_h03_access_token_with_crlf_refused(self):
        """Held: an access_token with CR LF and a header after it
        (docs: "access_token a string of 1 to 8192 printable bytes"; "A
        secret containing a control character ... is never put raw into a
        header"): 502 credential-refresh-failed, audited with the
        credential, the API gets no request with it."""
        r = self.call("crlf", "/api/crlf")
        self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                         (502, "credential-refresh-failed"), r)
        self.assertNotIn(b"at-crlf", r.raw_head + r.body)
        rows = self.gw.wait_audit(reason="credential-refresh-failed",
                                  credential="crlf")
        self.assertTrue(rows, "no audit row naming crlf")
        self.assertEqual(self.api.find("/api/crlf"), [])
        self.assertFalse(self.api.got("X-Injected"))


if __name__ == "__main__":
    T.main()
