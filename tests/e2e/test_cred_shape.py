#!/usr/bin/python3
"""
Shaped placeholders (issue 25 point 3; docs/credentials.md "Placeholders"):
a credential with `placeholder_shape: {prefix: "ghp_", length: 40, alphabet:
base62}` gets, for every sandbox, a placeholder a client that checks the
shape of a GitHub token accepts, and that placeholder is still swapped toward
its host only (the intercepted HTTPS echo origin checks it got the real
secret), refused toward another host, in a path, a query, a DNS name and a
body (also split across reads), and put back where a response echoes the
secret. It reuses test_credentials' origins, CA and gateway set-up with the
echo-key credential shaped, runs the parent's tests that hold for any
placeholder, and the ones below. `policy check` errors on bad shapes at
their line, and `policy explain` shows the shape (offline, no gateway).
"""

import json
import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402

# Block style: the parent's policy goes through str.format.
SHAPE = ("    placeholder_shape:\n      prefix: ghp_\n      length: 40\n"
         "      alphabet: base62\n")
SHAPE_RX = re.compile(r"^ghp_[A-Za-z0-9]{36}$")
# echo-key, shaped; the rest of the parent's policy as it is.
SHAPED_POLICY = C.POLICY.replace("    env: ECHO_KEY\n",
                                 "    env: ECHO_KEY\n" + SHAPE, 1)
assert SHAPED_POLICY != C.POLICY

# The parent's tests that hold for any placeholder of echo-key (its CONNECT
# and SOCKS5 target tests look for the name in the audit log as sent, but a
# host name is logged lower-cased: test_a03 does those).
PARENT_TESTS = (
    "test_02_bearer_swapped_and_echo_scrubbed",
    "test_03_second_listed_header",
    "test_04_basic_swapped_curl",
    "test_05_query_swapped_curl",
    "test_10_scrub_every_encoding_split_across_chunks",
    "test_11_scrub_basic_and_query_forms",
    "test_20_misuse_other_host",
    "test_23_misuse_in_path",
    "test_25_misuse_unlisted_header",
    "test_26_misuse_in_request_body",
    "test_27_misuse_dns_name",
    "test_29_misuse_from_another_sandbox",
    "test_30_foreign_credential",
)


class ShapedCredentialsTest(C.CredentialsTest):
    @classmethod
    def setUpClass(cls):
        plain = C.POLICY
        C.POLICY = SHAPED_POLICY
        try:
            super().setUpClass()
        finally:
            C.POLICY = plain

    def test_a01_placeholders_have_the_shape(self):
        # What a client that checks a GitHub token's shape would do.
        for ph in (self.ph_a, self.ph_b):
            self.assertRegex(ph, SHAPE_RX)
        self.assertNotEqual(self.ph_a, self.ph_b)
        # Other credentials keep theirs.
        self.assertRegex(self.loose_a, C.PH_RX)
        a = C.placeholders_of(self.listing["box-a"])
        self.assertEqual(a["fixed-key"]["placeholder"], C.FIXED_PH)
        self.assertEqual(a["echo-key"]["env"], "ECHO_KEY")

    def test_a02_swapped_toward_its_host_and_echo_put_back(self):
        r = self.fetch("/echo/shape-bearer", [self.bearer(self.ph_a)])
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, "/echo/shape-bearer")
        self.assertEqual(rec["seen"], self.secret)
        self.assertFalse(self.bound.received(self.ph_a))
        # The origin echoes the secret; the client gets its placeholder.
        self.assertEqual(r.header("X-Echo-Authorization"), "Bearer " + self.ph_a)
        self.assertIn(("Authorization: Bearer %s\r\n" % self.ph_a).encode(), r.body)

    def test_a03_refused_toward_another_host_in_query_and_body(self):
        r = self.fetch("/m/shape-q?key=%s" % self.ph_a, host="other.test",
                       port=self.other.port)
        self.assert_misuse(r, "/m/shape-q")
        r = self.fetch("/m/shape-body", method="POST", host="other.test",
                       port=self.other.port,
                       body=b"token=" + self.ph_a.encode() + b"&x=1")
        self.assert_misuse(r, "/m/shape-body")
        # Deep in one read of a longer body (past the first bytes looked at).
        r = self.fetch("/m/shape-deep", method="POST", host="other.test",
                       port=self.other.port,
                       body=b"x" * 3000 + self.ph_a.encode() + b"y" * 100)
        self.assert_misuse(r, "/m/shape-deep")
        # In a host name as is, and lower-cased (as a DNS resolver might):
        # still it (host names are logged lower-cased).
        name = "%s.bound.test" % self.ph_a
        for target in (name, name.lower()):
            with self.subTest(target=target):
                c, r = T.open_tunnel(self.gw.port, "%s:%d" % (
                    target, self.bound.port))
                c.close()
                self.got(r)
                self.assert_misuse(r, host=name.lower())
        rep = self.socks_connect(name, self.bound.port)
        self.assertEqual(rep[:2], b"\x05\x02", rep)
        row = self.audit_row(None, host=name.lower(), kind="socks5",
                             reason="credential-misuse")
        self.assertEqual(row["credential"], "echo-key", row)
        self.assertEqual(self.other.find("/m/shape"), [])
        self.assertFalse(self.other.received(self.ph_a))

    def test_a04_body_split_mid_prefix_and_mid_random(self):
        ph = self.ph_a
        for cut in (2, 4, 20):
            with self.subTest(cut=cut):
                marker = "/m/shape-split-%d" % cut
                head = ("POST %s HTTP/1.1\r\nHost: bound.test:%d\r\n"
                        "Content-Length: %d\r\n\r\n" % (marker, self.bound.port,
                                                        len(ph) + 8))
                r = self.body_in_two_writes(marker, head + "key=" + ph[:cut],
                                            ph[cut:] + "&end")
                self.assert_misuse(r, marker)
        # Not even the part before the cut reached the origin.
        self.assertFalse(any(ph[:20].encode() in x["body"]
                             for x in self.bound.requests))
        # A near miss (a character changed in each half, so that no half of
        # the placeholder reaches the origin) is just a value of the body.
        flip = {"A": "B"}
        other = (ph[:5] + flip.get(ph[5], "A") + ph[6:-1] +
                 flip.get(ph[-1], "A"))
        self.assertNotEqual(other, ph)
        r = self.fetch("/echo/shape-near", [self.bearer(ph)], method="POST",
                       body=b"key=" + other.encode())
        self.assertEqual(r.status, 200, r)

    def test_a05_dynamic_sandbox_gets_its_own_in_the_shape(self):
        st, _, doc = C.admin_request(self.admin_sock, "POST", "/v1/sandboxes", {
            "id": "dyn-shape", "policy": "agent", "source": C.DYN_SOURCE})
        self.addCleanup(C.admin_request, self.admin_sock, "DELETE",
                        "/v1/sandboxes/dyn-shape")
        self.assertEqual(st, 201, doc)
        dyn = C.placeholders_of(doc)["echo-key"]["placeholder"]
        self.assertRegex(dyn, SHAPE_RX)
        self.assertNotIn(dyn, (self.ph_a, self.ph_b))
        r = self.fetch("/echo/shape-dyn", [self.bearer(dyn)], source=C.DYN_SOURCE)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/shape-dyn")["seen"],
                         self.secret)
        r = self.fetch("/m/shape-a-uses-dyn", [self.bearer(dyn)])
        self.assertEqual(self.assert_misuse(r, "/m/shape-a-uses-dyn")["sandbox"],
                         "box-a")
        st, _, doc = C.admin_request(self.admin_sock, "DELETE",
                                     "/v1/sandboxes/dyn-shape")
        self.assertEqual(st, 200, doc)
        # Removed, leaked: still refused.
        r = self.fetch("/m/shape-after-delete", [self.bearer(dyn)],
                       host="other.test", port=self.other.port)
        self.assert_misuse(r, "/m/shape-after-delete")


POLICY_HEAD = """\
sandboxes:
  - id: dev
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: api.git.test
    credentials: [git]
credentials:
  - name: git
    secret: git-token
    hosts: [api.git.test]
"""


class ShapeCheckTest(unittest.TestCase):
    """policy check and policy explain, offline."""

    def setUp(self):
        self.td = T.TempDir()
        self.addCleanup(self.td.cleanup)
        d = self.td.path
        os.makedirs(os.path.join(d, "policies"))
        self.pfile = os.path.join(d, "policies", "p.yaml")
        self.cfg = os.path.join(d, "sandgate.yaml")
        with open(self.cfg, "w") as f:
            f.write("state_dir: ./var\npolicies: [./policies]\n"
                    "vault: { db: ./var/vault.db, key_file: ./certs/vault.key }\n"
                    "ca: { cert: ./certs/ca.crt, key: ./certs/ca.key }\n")

    def check(self, tail):
        text = POLICY_HEAD + tail
        with open(self.pfile, "w") as f:
            f.write(text)
        r = T.run_sandgate("policy", "check", "-c", self.cfg)
        diags = []
        for l in r.stderr.splitlines():
            m = re.match(r"^(.+?):(\d+):(\d+): (\S.*)$", l)
            if m and m.group(1).endswith("p.yaml"):
                diags.append((int(m.group(2)), m.group(4)))
        return text, r, diags

    def line_of(self, text, marker):
        return text.count("\n", 0, text.index(marker)) + 1

    def test_b01_good_shapes(self):
        for shape in ('{prefix: "ghp_", length: 40, alphabet: base62}',
                      '{prefix: "sk-", length: 35, alphabet: hex}',
                      '{prefix: "xoxb-", length: 31, alphabet: base32}',
                      '{prefix: "AKIA", length: 30, alphabet: base32upper}',
                      '{prefix: "tok.", length: 128, alphabet: base36}'):
            with self.subTest(shape=shape):
                _, r, diags = self.check("    placeholder_shape: %s\n" % shape)
                self.assertEqual((r.returncode, diags), (0, []), r)

    def test_b02_errors_at_their_line(self):
        cases = (
            # too little randomness: the minimum named
            ("    placeholder_shape:\n      prefix: ghp_\n      length: 25\n"
             "      alphabet: base62\n", "length: 25", "at least 26"),
            ("    placeholder_shape:\n      prefix: sk-\n      length: 34\n"
             "      alphabet: hex\n", "length: 34", "at least 35"),
            ("    placeholder_shape:\n      prefix: \"gh p\"\n      length: 40\n"
             "      alphabet: base62\n", "prefix:", "only A-Z"),
            ("    placeholder_shape:\n      prefix: \"a/b\"\n      length: 40\n"
             "      alphabet: base62\n", "prefix:", "only A-Z"),
            ("    placeholder_shape:\n      prefix: ab\n      length: 40\n"
             "      alphabet: base62\n", "prefix:", "at least 3"),
            ("    placeholder_shape:\n      prefix: ghp_\n      length: 129\n"
             "      alphabet: base62\n", "length:", "length"),
            ("    placeholder_shape:\n      prefix: ghp_\n      length: 40\n"
             "      alphabet: base64\n", "alphabet:", "unknown"),
            ("    placeholder_shape:\n      prefix: ghp_\n      length: 40\n"
             "      alphabet: base62\n      checksum: crc32\n", "checksum:",
             "checksum"),
            ("    placeholder: \"fixed-placeholder-0123456789\"\n"
             "    placeholder_shape:\n      prefix: ghp_\n      length: 40\n"
             "      alphabet: base62\n", "placeholder_shape:", "not with a fixed"),
        )
        for tail, marker, words in cases:
            with self.subTest(tail=tail):
                text, r, diags = self.check(tail)
                self.assertEqual(r.returncode, 1, r)
                want = self.line_of(text, marker)
                self.assertTrue(any(l == want and words in m for l, m in diags),
                                "want line %d with %r: %r" % (want, words,
                                                              r.stderr))

    def test_b03_explain_shows_the_shape(self):
        self.check("    placeholder_shape: {prefix: \"ghp_\", length: 40, "
                   "alphabet: base62}\n")
        args = ["policy", "explain", "-c", self.cfg, "--sandbox", "dev",
                "api.git.test"]
        r = T.run_sandgate(*args)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn('placeholder: random, one per sandbox, shaped: "ghp_" + '
                      '36 base62 characters (40 in all)', r.stdout)
        r = T.run_sandgate(*(args[:-1] + ["--format", "json", args[-1]]))
        self.assertEqual(r.returncode, 0, r)
        c = json.loads(r.stdout)["credentials"][0]
        self.assertEqual(c["placeholder"], "shaped")
        self.assertEqual(c["placeholder_shape"], {"prefix": "ghp_",
                                                  "length": 40,
                                                  "alphabet": "base62"})


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for name in sorted(vars(ShapedCredentialsTest)):
        if name.startswith("test_a"):
            suite.addTest(ShapedCredentialsTest(name))
    for name in PARENT_TESTS:
        suite.addTest(ShapedCredentialsTest(name))
    suite.addTest(ShapedCredentialsTest("test_99_hygiene"))
    suite.addTest(loader.loadTestsFromTestCase(ShapeCheckTest))
    return suite


if __name__ == "__main__":
    T.main()
