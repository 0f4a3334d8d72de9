#!/usr/bin/python3
"""
SPEC §2 and §3 read line by line, as an outside suite would: the exit status
of every command (0, 1 with one `sandgate: ` line, 2 for usage), options
before and after operands (also `-c FILE` before the command), and
`policy check` diagnostics at FILE:LINE:COL (1-based) for unknown keys at
every nesting level and for bad values. No gateway runs here.

One config written here says `user: null` (root) on purpose
(test_serve_bad_config_exits_1_with_positions): serve must refuse that
config before anything is bound or any privilege dropped, so no account is
involved and the test needs none to exist. Nothing is served.
"""

import json
import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

DIAG = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<msg>\S.*)$")

POLICY = """\
sandboxes:
  - id: dev
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: api.example.com
        ports: [443]
      - cidr: 0.0.0.0/0
        ports: [80]
    deny:
      - host: bad.example.com
"""


def where(text, marker, nth=0):
    """1-based (line, col) of the nth occurrence of marker in text."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(marker, i + 1)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def diags(text):
    out = []
    for l in text.splitlines():
        m = DIAG.match(l)
        if m:
            out.append((m.group("file"), int(m.group("line")),
                        int(m.group("col")), m.group("msg")))
    return out


class SpecCliTest(unittest.TestCase):
    def setUp(self):
        self.td = T.TempDir("sgtest-spec2-")
        self.addCleanup(self.td.cleanup)
        self.d = self.td.path
        os.makedirs(self.td.join("policies"))
        self.cfg = self.td.join("sandgate.yaml")
        with open(self.cfg, "w") as f:
            f.write("state_dir: ./var\npolicies: [./policies]\n"
                    "ca: { cert: ./certs/ca.crt, key: ./certs/ca.key }\n"
                    "vault: { db: ./var/vault.db, key_file: ./certs/vault.key }\n")
        self.write_policy(POLICY)

    def write_policy(self, text, name="p.yaml"):
        path = self.td.join("policies", name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def sg(self, *args, **kw):
        return T.run_sandgate(*args, cwd=self.d, **kw)

    def assert_failure(self, r, status=1):
        """Exit status, and the first stderr line starts with `sandgate: `."""
        self.assertEqual(r.returncode, status, r)
        lines = r.stderr.splitlines()
        self.assertTrue(lines, r)
        self.assertTrue(lines[0].startswith("sandgate: "), r.stderr)
        if status == 1:
            self.assertEqual(len(lines), 1, "one line: %r" % r.stderr)

    # ------------------------------------------------------------ exit statuses

    def test_failures_are_one_line_exit_1(self):
        db = self.td.join("no", "such.db")
        cases = [
            ("policy", "explain", "-c", self.cfg, "--sandbox", "nosuch",
             "api.example.com"),
            ("policy", "explain", "-c", self.cfg, "--sandbox", "nosuch",
             "--format", "json", "api.example.com"),
            ("audit", "-c", self.cfg, "--db", db),
            ("audit", "verify", "-c", self.cfg, "--db", db),
            ("vault", "rm", "nosuch", "-c", self.cfg),
        ]
        for args in cases:
            with self.subTest(args=args):
                self.assert_failure(self.sg(*args))
        # A secret needs a value: empty stdin fails, and the name stays unused.
        r = self.sg("vault", "set", "empty-one", "-c", self.cfg, input="")
        self.assert_failure(r)
        r = self.sg("vault", "set", "bad name!", "-c", self.cfg, input="v")
        self.assert_failure(r)
        self.assertEqual(self.sg("vault", "set", "dup", "-c", self.cfg,
            input="value-1").returncode, 0)
        self.assert_failure(self.sg("vault", "set", "dup", "-c", self.cfg,
            input="value-2"))
        self.assert_failure(self.sg("vault", "rotate", "nosuch", "-c",
            self.cfg, input="v"))

    def test_usage_errors_exit_2(self):
        cases = [(), ("nosuch",), ("help", "nosuch"), ("version", "x"),
            ("policy",), ("policy", "nosuch"), ("policy", "check", "--bogus"),
            ("policy", "check", "extra-operand"),
            ("policy", "explain", "-c", self.cfg, "api.example.com"),
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev"),
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
             "api.example.com:0"),
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
             "api.example.com:65536"),
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
             "--format", "xml", "api.example.com"),
            # Brackets hold IPv6 only, as on the wire.
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
             "[api.example.com]"),
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
             "[8.8.8.8]:80"),
            ("audit", "--limit", "-1"), ("audit", "--limit", "x"),
            ("audit", "--since", "yesterday"), ("audit", "--until", "5x"),
            ("audit", "--format", "xml"), ("audit", "--decision", "maybe"),
            ("audit", "--kind", "nosuch"), ("audit", "verify", "extra"),
            ("ca", "init", "extra"), ("serve", "extra"), ("serve", "--bogus"),
            ("vault",), ("vault", "set"), ("vault", "nosuch"),
            ("vault", "set", "name", "secret-on-argv")]
        for args in cases:
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assert_failure(r, status=2)
                self.assertNotIn("secret-on-argv", r.stderr)

    def test_help_and_version_exit_0(self):
        for args in (("help",), ("--help",), ("version",), ("help", "policy"),
                ("help", "audit"), ("help", "vault"), ("help", "ca"),
                ("policy", "check", "--help"), ("audit", "--help"),
                ("vault", "--help"), ("ca", "init", "--help")):
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 0, r)
                self.assertTrue(r.stdout.strip(), r)

    def test_serve_bad_config_exits_1_with_positions(self):
        """
        Runs as root (user: null) on purpose: serve must refuse the config
        before anything is bound or dropped, so no account is involved and
        the test needs none to exist.
        """
        text = ("policies: [./policies]\n"
                "listen: { http: \"127.0.0.1:%d\", socks5: null, dns: null,"
                " transparent: null, ingress: null, metrics: null }\n"
                "workers: 1\nuser: null\n"
                "upstream: { connect_timeout: soon }\n" % T.free_port())
        with open(self.cfg, "w") as f:
            f.write(text)
        r = self.sg("serve", "-c", self.cfg, timeout=20)
        self.assertEqual(r.returncode, 1, r)
        ds = diags(r.stderr + r.stdout)
        self.assertIn(where(text, "soon")[0], [l for _, l, _, _ in ds], r)
        # A bad policy file stops serve the same way.
        with open(self.cfg, "w") as f:
            f.write(text.replace("connect_timeout: soon", "connect_timeout: 3s"))
        bad = POLICY.replace("ports: [443]", "ports: [443, 70000]")
        self.write_policy(bad)
        r = self.sg("serve", "-c", self.cfg, timeout=20)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn(where(bad, "70000"),
                      [(l, c) for _, l, c, _ in diags(r.stderr + r.stdout)], r)

    # ------------------------------------------------------------ option order

    def test_options_before_and_after_operands(self):
        orders = [
            ("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
             "--format", "json", "bad.example.com"),
            ("policy", "explain", "bad.example.com", "--format", "json",
             "--sandbox", "dev", "-c", self.cfg),
            ("policy", "explain", "--format", "json", "bad.example.com",
             "-c", self.cfg, "--sandbox", "dev"),
            ("-c", self.cfg, "policy", "explain", "--sandbox", "dev",
             "--format", "json", "bad.example.com"),
            ("policy", "-c", self.cfg, "explain", "--sandbox", "dev",
             "--format", "json", "bad.example.com"),
        ]
        for args in orders:
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 0, r)
                doc = json.loads(r.stdout)
                self.assertEqual((doc["decision"], doc["rule"], doc["reason"]),
                    ("deny", "agent:deny[0]", "policy-deny"), doc)
        for args in (("policy", "check", "-c", self.cfg),
                ("-c", self.cfg, "policy", "check"),
                ("policy", "-c", self.cfg, "check")):
            with self.subTest(args=args):
                self.assertEqual(self.sg(*args).returncode, 0)
        # vault: NAME before or after -c, and -c before the command.
        for i, args in enumerate((("vault", "set", "v-a", "-c", self.cfg),
                ("vault", "-c", self.cfg, "set", "v-b"),
                ("-c", self.cfg, "vault", "set", "v-c"))):
            with self.subTest(args=args):
                r = self.sg(*args, input="value-%d" % i)
                self.assertEqual(r.returncode, 0, r)
        r = self.sg("-c", self.cfg, "vault", "list")
        self.assertEqual(r.returncode, 0, r)
        for name in ("v-a", "v-b", "v-c"):
            self.assertIn(name, r.stdout)
        for i in range(3):
            self.assertNotIn("value-%d" % i, r.stdout + r.stderr)

    # ------------------------------------------------------------ explain

    def explain(self, dest, *extra):
        r = self.sg("policy", "explain", "-c", self.cfg, "--sandbox", "dev",
            "--format", "json", dest, *extra)
        self.assertEqual(r.returncode, 0, r)
        return json.loads(r.stdout)

    def test_explain_json_fields_and_types(self):
        doc = self.explain("api.example.com")
        self.assertEqual(doc["decision"], "allow")
        self.assertEqual(doc["rule"], "agent:allow[0]")
        self.assertIsInstance(doc["port"], int)
        self.assertEqual(doc["port"], 443)
        self.assertEqual(doc["sandbox"], "dev")
        self.assertIn("reason", doc)
        doc = self.explain("nowhere.example.com")
        self.assertEqual((doc["decision"], doc["rule"]), ("deny", "default-deny"))
        self.assertEqual(doc["reason"], "policy-deny")
        doc = self.explain("api.example.com:8443")
        self.assertEqual(doc["decision"], "deny")
        self.assertEqual(doc["port"], 8443)

    def test_explain_cidr_never_opens_internal_forms(self):
        # cidr: 0.0.0.0/0 port 80 -- every spelling of the metadata address
        # and of other internal ranges stays denied.
        for dest in ("169.254.169.254:80", "[::ffff:169.254.169.254]:80",
                "[::ffff:a9fe:a9fe]:80", "2852039166:80", "0xa9fea9fe:80",
                "0251.0376.0251.0376:80", "169.254.43518:80", "0.0.0.0:80",
                "0:80", "127.1:80", "127.0.0.2:80", "198.19.255.254:80",
                "198.18.0.1:80", "192.0.2.1:80", "240.0.0.1:80",
                "255.255.255.255:80", "224.0.0.1:80"):
            with self.subTest(dest=dest):
                doc = self.explain(dest)
                self.assertEqual(doc["decision"], "deny", doc)
        doc = self.explain("8.8.8.8:80")
        self.assertEqual(doc["decision"], "allow", doc)

    def test_explain_names_normalised(self):
        for dest in ("BAD.example.com", "bad.example.com.", "Bad.Example.Com.:443"):
            with self.subTest(dest=dest):
                doc = self.explain(dest)
                self.assertEqual(doc["rule"], "agent:deny[0]", doc)
        for dest in ("API.EXAMPLE.COM", "api.example.com."):
            with self.subTest(dest=dest):
                self.assertEqual(self.explain(dest)["decision"], "allow")
        # An IP spelt as a name is an IP: no host rule matches it.
        doc = self.explain("2130706433:443")
        self.assertEqual(doc["decision"], "deny")

    # ------------------------------------------------------------ policy check

    def check(self):
        r = self.sg("policy", "check", "-c", self.cfg)
        return r, diags(r.stderr + r.stdout)

    def test_check_missing_config_is_one_line(self):
        # Issue 16: a file that cannot be opened is one line, "sandgate:
        # FILE: cannot open: ...", never FILE:0:0 (test_open_errors has
        # every command); no diagnostic with a position 0 either.
        r = self.sg("policy", "check", "-c", self.td.join("missing.yaml"))
        self.assertEqual(r.returncode, 1, r)
        self.assertRegex(r.stderr, r"^sandgate: \S*missing\.yaml: cannot open: ")
        self.assertNotIn(":0:0", r.stderr + r.stdout)

    def test_check_unknown_key_at_every_level(self):
        text = (
            "sandboxes:\n"
            "  - id: dev\n"
            "    policy: agent\n"
            "    sourc: [127.0.0.1/32]\n"
            "policies:\n"
            "  - name: agent\n"
            "    alow: []\n"
            "    allow:\n"
            "      - host: api.example.com\n"
            "        port: [443]\n"
            "    deny:\n"
            "      - host: x.example.com\n"
            "        pathz: [\"/a\"]\n"
            "    countries: { deny: [KP], alow: [US] }\n"
            "credentials:\n"
            "  - name: c\n"
            "    secret: s\n"
            "    hosts: [api.example.com]\n"
            "    header: [Authorization]\n"
            "toplevel: 1\n")
        path = self.write_policy(text)
        r, ds = self.check()
        self.assertEqual(r.returncode, 1, r)
        got = {(l, c) for f, l, c, _ in ds if f.endswith("p.yaml")}
        for key in ("sourc:", "alow:", "port:", "pathz:", "alow: [US]",
                    "header:", "toplevel:"):
            with self.subTest(key=key):
                nth = 1 if key == "alow: [US]" else 0
                marker = "alow" if key == "alow: [US]" else key[:-1]
                self.assertIn(where(text, marker, nth), got, r.stderr)
        for f, l, c, _ in ds:
            self.assertTrue(os.path.samefile(f, path) or f.endswith("p.yaml"), f)
            self.assertGreaterEqual(l, 1)
            self.assertGreaterEqual(c, 1)
        # The summary is the last line and is not a diagnostic.
        self.assertIsNone(DIAG.match(r.stderr.strip().splitlines()[-1]), r.stderr)

    def test_check_unknown_config_keys_nested(self):
        text = ("policies: [./policies]\n"
                "listen:\n  htp: 127.0.0.1:3128\n"
                "limits:\n  per_sandbox: { max_connections: 5, bogus: 1 }\n"
                "upstream:\n  resolver: system\n"
                "audit: { dbx: ./a.db }\n"
                "nosuch: 1\n")
        with open(self.cfg, "w") as f:
            f.write(text)
        r, ds = self.check()
        self.assertEqual(r.returncode, 1, r)
        got = {(l, c) for _, l, c, _ in ds}
        for marker in ("htp", "bogus", "resolver", "dbx", "nosuch"):
            with self.subTest(key=marker):
                self.assertIn(where(text, marker), got, r.stderr)

    def test_check_bad_values(self):
        text = (
            "sandboxes:\n"
            "  - id: Upper_Case\n"
            "    policy: agent\n"
            "    source: [127.0.0.1/33]\n"
            "  - id: dup\n"
            "    policy: agent\n"
            "    source: [127.0.0.2/32]\n"
            "  - id: dup\n"
            "    policy: agent\n"
            "    source: [127.0.0.3/32]\n"
            "  - id: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
            "    policy: agent\n"
            "  - id: -dash\n"
            "    policy: agent\n"
            "policies:\n"
            "  - name: agent\n"
            "    allow:\n"
            "      - host: a.example.com\n"
            "        ports: [0]\n"
            "      - host: b.example.com\n"
            "        ports: [65536]\n"
            "      - cidr: 198.18.0.1/15\n"
            "      - cidr: 300.0.0.0/8\n"
            "      - host: c.example.com\n"
            "        tls: maybe\n"
            "    allow_private: [198.18.0.0/99]\n"
            "  - name: agent\n"
            "credentials:\n"
            "  - name: c\n"
            "    secret: s\n"
            "    hosts: [a.example.com]\n"
            "  - name: c\n"
            "    secret: s\n"
            "    hosts: [a.example.com]\n"
            "    placeholder: short\n")
        self.write_policy(text)
        r, ds = self.check()
        self.assertEqual(r.returncode, 1, r)
        got = {(l, c) for _, l, c, _ in ds}
        expect = [("Upper_Case", 0), ("127.0.0.1/33", 0), ("aaaaaaaa", 0),
                  ("-dash", 0), ("[0]", 0), ("65536", 0), ("198.18.0.1/15", 0),
                  ("300.0.0.0/8", 0), ("maybe", 0), ("198.18.0.0/99", 0),
                  ("short", 0)]
        for marker, nth in expect:
            with self.subTest(value=marker):
                line, col = where(text, marker, nth)
                if marker == "[0]":
                    col += 1
                self.assertIn((line, col), got, r.stderr)
        # Duplicates name the second definition's line.
        dup_lines = {l for _, l, _, m in ds if "duplicate" in m}
        self.assertIn(where(text, "id: dup", 1)[0], dup_lines, r.stderr)
        self.assertIn(where(text, "name: agent", 1)[0], dup_lines, r.stderr)
        self.assertIn(where(text, "name: c\n", 1)[0], dup_lines, r.stderr)

    def test_check_bad_config_values(self):
        text = ("policies: [./policies]\n"
                "listen: { http: \"127.0.0.1:0\", socks5: \"127.0.0.1:65536\" }\n"
                "upstream: { connect_timeout: 10x, idle_timeout: -5s }\n"
                "limits: { max_header_bytes: lots }\n"
                "audit: { on_failure: maybe, retention: forever }\n"
                "workers: 0x\n"
                "sandbox: { subnet: 198.18.0.0/99 }\n")
        with open(self.cfg, "w") as f:
            f.write(text)
        r, ds = self.check()
        self.assertEqual(r.returncode, 1, r)
        lines = {l for _, l, _, _ in ds}
        for l in range(2, 8):
            with self.subTest(line=l):
                self.assertIn(l, lines, r.stderr)


if __name__ == "__main__":
    T.main()
