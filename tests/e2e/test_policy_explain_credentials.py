#!/usr/bin/python3
"""
`sandgate policy explain` tells the truth for credential hosts (SPEC §6, §7;
docs/policy.md "policy explain"): for a host a credential of the sandbox's
policy is bound to, the connection is intercepted whatever the rule says,
and explain names the credential, its vault entry, the headers (and query)
it is swapped into, where the placeholder lives, and for which requests;
never a secret value, and without the vault or the key keeper. A host no
credential is bound to is not claimed intercepted unless its rule says so.
A path/method-scoped rule whose --method/--path do not match says "not
swapped". The attacker's variants: a subdomain under a wildcard rule, the
bound host of another policy's credential, an IP literal and a spelling of
the bound name with case and a trailing dot. No gateway runs: explain is
offline, so the default install's user does not apply.
"""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

SECRET = "sk-live-never-printed-0123456789abcdef"

POLICY = """\
sandboxes:
  - id: dev
    policy: agent
    source: [127.0.0.1/32]
  - id: other
    policy: plain
    source: [127.0.0.2/32]
policies:
  - name: agent
    allow:
      - host: api.llm.test
      - host: files.test
      - host: api.git.test
        tls: intercept
        methods: [GET, POST]
        paths: ["/repos/*"]
      - host: inspect.test
        tls: intercept
      - host: "*.llm.test"
      - cidr: 198.18.7.0/24
        ports: [443]
    allow_private: [198.18.7.0/24]
    credentials: [llm, git]
  - name: plain
    allow:
      - host: api.llm.test
credentials:
  - name: llm
    secret: llm-prod
    hosts: [api.llm.test]
    env: LLM_API_KEY
  - name: git
    secret: git-token
    hosts: [api.git.test]
    headers: [Authorization, X-Token]
    query: true
    exclusive: false
    placeholder: "fixed-placeholder-0123456789"
"""

JSON_KEYS = {"decision", "rule", "reason", "sandbox", "policy", "host", "port",
             "tls", "opaque", "intercept", "intercept_by", "methods", "paths",
             "git", "credentials", "dlp"}
CRED_KEYS = {"name", "kind", "secret", "secret_env", "hosts", "headers", "query", "exclusive", "env",
             "placeholder_shape", "oauth2",
             "placeholder", "swapped", "not_swapped", "require", "scope"}


class ExplainCredentialsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.makedirs(os.path.join(d, "policies"))
        with open(os.path.join(d, "policies", "agent.yaml"), "w") as f:
            f.write(POLICY)
        cls.cfg = os.path.join(d, "sandgate.yaml")
        with open(cls.cfg, "w") as f:
            f.write("state_dir: ./var\npolicies: [./policies]\n"
                "vault: { db: ./var/vault.db, key_file: ./certs/vault.key }\n"
                "ca: { cert: ./certs/ca.crt, key: ./certs/ca.key }\n")

    def explain(self, target, *extra, sandbox="dev", fmt=None):
        args = ["policy", "explain", "-c", self.cfg, "--sandbox", sandbox]
        args += list(extra)
        if fmt:
            args += ["--format", fmt]
        r = T.run_sandgate(*(args + [target]))
        self.assertEqual(r.returncode, 0, r)
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        if fmt == "json":
            doc = json.loads(r.stdout)
            self.assertEqual(set(doc), JSON_KEYS, doc)
            for c in doc["credentials"]:
                self.assertEqual(set(c), CRED_KEYS, c)
            return doc
        return r.stdout

    def test_01_credential_host_text(self):
        out = self.explain("api.llm.test")
        self.assertIn("decision: allow\n", out)
        # the rule says nothing of tls: the credential makes it intercepted
        self.assertIn("tls: intercept (a credential is bound to this host)\n",
            out)
        self.assertIn("credential: llm\n", out)
        self.assertIn("  kind: static\n  secret: vault entry llm-prod", out)
        self.assertIn("  hosts: api.llm.test\n", out)
        self.assertRegex(out, r"  swapped: yes, over the intercepted TLS "
            r"connection, in header Authorization\n")
        self.assertIn("  placeholder: random, one per sandbox, in "
            "$LLM_API_KEY\n", out)
        self.assertIn("  exclusive: yes", out)
        self.assertNotIn("credential: git", out)
        self.assertNotIn("tls: passthrough", out)

    def test_02_credential_host_json(self):
        doc = self.explain("api.llm.test", fmt="json")
        self.assertEqual((doc["decision"], doc["tls"], doc["intercept"],
            doc["intercept_by"]), ("allow", "intercept", True, "credential"))
        self.assertEqual(doc["credentials"], [{"name": "llm",
            "kind": "static", "secret": "llm-prod", "hosts": ["api.llm.test"],
            "headers": ["Authorization"], "query": False, "exclusive": True,
            "env": "LLM_API_KEY", "secret_env": None,
            "placeholder": "per-sandbox",
            "placeholder_shape": None, "swapped": True, "not_swapped": None,
            "require": False, "scope": None, "oauth2": None}])
        self.assertIsNone(doc["methods"])
        self.assertIsNone(doc["paths"])
        # a fixed placeholder is said to be fixed, never printed
        doc = self.explain("api.git.test", fmt="json")
        self.assertEqual([(c["name"], c["placeholder"], c["headers"],
            c["query"], c["exclusive"], c["env"]) for c in
            doc["credentials"]], [("git", "fixed", ["Authorization",
            "X-Token"], True, False, None)])
        self.assertEqual(doc["intercept_by"], "rule")
        out = self.explain("api.git.test")
        self.assertNotIn("fixed-placeholder-0123456789", out)

    def test_03_non_credential_host(self):
        out = self.explain("files.test")
        self.assertIn("tls: passthrough\n", out)
        self.assertIn("credentials: none bound to this host\n", out)
        self.assertNotIn("intercept", out)
        doc = self.explain("files.test", fmt="json")
        self.assertEqual((doc["tls"], doc["intercept"], doc["intercept_by"],
            doc["credentials"]), ("passthrough", False, None, []))
        # the rule intercepts, no credential: intercepted, nothing swapped
        doc = self.explain("inspect.test", fmt="json")
        self.assertEqual((doc["tls"], doc["intercept"], doc["intercept_by"],
            doc["credentials"]), ("intercept", True, "rule", []))
        out = self.explain("inspect.test")
        self.assertIn("tls: intercept (the rule says tls: intercept)\n", out)

    def test_04_scoped_rule_not_matching_is_not_swapped(self):
        for extra in (["--method", "DELETE", "--path", "/repos/x"],
                      ["--method", "GET", "--path", "/admin"],
                      ["--path", "/user/keys"]):
            with self.subTest(extra=extra):
                doc = self.explain("api.git.test", *extra, fmt="json")
                self.assertEqual((doc["decision"], doc["reason"]),
                    ("deny", "policy-deny"))
                # the connection is still intercepted: the request is refused
                self.assertEqual(doc["intercept"], True)
                self.assertEqual([(c["name"], c["swapped"], c["not_swapped"])
                    for c in doc["credentials"]], [("git", False,
                    "policy-deny")])
                out = self.explain("api.git.test", *extra)
                self.assertIn("  swapped: no: the request is denied "
                    "(policy-deny)\n", out)
                self.assertNotIn("swapped: yes", out)
        doc = self.explain("api.git.test", "--method", "POST", "--path",
            "/repos/a/b?q=1", fmt="json")
        self.assertEqual((doc["decision"], doc["methods"], doc["paths"]),
            ("allow", ["GET", "POST"], ["/repos/*"]))
        self.assertEqual([(c["name"], c["swapped"]) for c in
            doc["credentials"]], [("git", True)])
        out = self.explain("api.git.test")
        self.assertIn("requests: methods GET, POST; paths /repos/*\n", out)
        self.assertIn("swapped: yes, in the requests above", out)

    def test_05_attacker_names(self):
        """Close to a bound host is not a bound host; the bound host is
        bound however it is spelt."""
        # a subdomain under the wildcard rule: allowed, no credential
        doc = self.explain("x.api.llm.test", fmt="json")
        self.assertEqual((doc["decision"], doc["intercept"], doc["credentials"]),
            ("allow", False, []))
        # case and a trailing dot: the same host, the same credential
        doc = self.explain("API.LLM.Test.:443", fmt="json")
        self.assertEqual((doc["host"], doc["intercept_by"]),
            ("api.llm.test", "credential"))
        self.assertEqual([c["name"] for c in doc["credentials"]], ["llm"])
        # another policy allows the host but lists no credential: passthrough
        doc = self.explain("api.llm.test", sandbox="other", fmt="json")
        self.assertEqual((doc["decision"], doc["tls"], doc["credentials"]),
            ("allow", "passthrough", []))
        # an IP literal is never a credential host
        doc = self.explain("198.18.7.9:443", fmt="json")
        self.assertEqual((doc["decision"], doc["intercept"], doc["credentials"]),
            ("allow", False, []))
        self.assertEqual(doc["rule"], "agent:allow[5]")

    def test_06_no_vault_no_keeper_no_secret(self):
        """explain opens no vault and starts no keeper: with the vault's
        key absent it answers and creates nothing; with a secret stored,
        the value is in no output (explain() checks every run)."""
        d = self.td.path
        before = sorted(os.listdir(d))
        doc = self.explain("api.llm.test", fmt="json")
        self.assertEqual(doc["credentials"][0]["secret"], "llm-prod")
        self.assertEqual(sorted(os.listdir(d)), before)
        self.assertFalse(os.path.exists(os.path.join(d, "certs", "vault.key")))
        r = T.run_sandgate("vault", "set", "llm-prod", "-c", self.cfg,
            input=SECRET + "\n")
        self.assertEqual(r.returncode, 0, r)
        self.assertTrue(os.path.exists(os.path.join(d, "certs", "vault.key")))
        self.explain("api.llm.test")
        self.explain("api.llm.test", fmt="json")


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
