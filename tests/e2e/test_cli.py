#!/usr/bin/python3
"""
End-to-end tests of the command line (SPEC §2, §3): version, help and usage
exit codes, `policy check` diagnostics as FILE:LINE:COL, `policy explain`
decisions and JSON output, and `serve` on built-in defaults.
"""

import json
import os
import re
import stat
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

DIAG = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<msg>\S.*)$")

EXPLAIN_POLICY = """\
sandboxes:
  - id: dev
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: api.allowed.test
        ports: [443]
      - host: "*.pkgcdn.test"
      - cidr: 140.82.112.0/20
        ports: [22]
        opaque: true
      - host: "*.files.test"
      - host: api2.allowed.test
        tls: intercept
        methods: [GET]
        paths: ["/v1/*"]
    deny:
      - host: uploads.files.test
"""

# Public answers are data only: explain never connects anywhere.
EXPLAIN_NAMES = ["api.allowed.test", "x.y.pkgcdn.test", "pkgcdn.test",
                 "a.files.test", "uploads.files.test", "api2.allowed.test"]


def where(text, marker, nth=0):
    """1-based (line, col) of the nth occurrence of marker in text."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(marker, i + 1)
    line = text.count("\n", 0, i) + 1
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, col


def diags(text):
    out = []
    for l in text.splitlines():
        m = DIAG.match(l)
        if m:
            out.append((m.group("file"), int(m.group("line")), int(m.group("col")),
                        m.group("msg")))
    return out


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        cls.dns = T.Dnsmasq(cls.td.path, [(n, "93.184.216.34") for n in EXPLAIN_NAMES])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"agent.yaml": EXPLAIN_POLICY})
        cls.cfg = cls.gw.cfg_path

    def sg(self, *args, **kw):
        return T.run_sandgate(*args, **kw)

    def fresh(self, name):
        d = os.path.join(self.td.path, name)
        os.makedirs(d)
        return d

    # -------------------------------------------------------------- basics

    def test_version(self):
        with open(os.path.join(T.SRC, "CMakeLists.txt")) as f:
            want = re.search(r"project\(sandgate VERSION (\d+\.\d+\.\d+)", f.read()).group(1)
        r = self.sg("version")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(r.stdout.strip(), "sandgate " + want, r)

    def test_help(self):
        for args, word in ((["help"], "serve"), (["help"], "policy"),
                           (["serve", "--help"], "serve"), (["help", "serve"], "serve"),
                           (["help", "policy"], "explain"),
                           (["policy", "--help"], "explain")):
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 0, r)
                out = r.stdout + r.stderr
                self.assertIn(word, out)
                self.assertRegex(out, r"(?i)usage")
        r = self.sg("serve", "--help")
        self.assertIn("-c", r.stdout + r.stderr)

    def test_usage_errors(self):
        for args in (["frobnicate"], ["serve", "--no-such-option"],
                     ["policy", "frobnicate"], ["policy", "check", "--bogus"],
                     ["policy", "explain", "-c", self.cfg],
                     ["policy", "explain", "-c", self.cfg, "api.allowed.test"]):
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 2, r)
                self.assertTrue(r.stderr.strip(), r)
                # one line, no usage dump: `sandgate help CMD` has the rest
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_usage_error_names_the_option(self):
        """The option as written, dashes kept; exit 2; nothing on stdout."""
        cases = [
            (["serve", "-c"], "sandgate: -c: missing value"),
            (["policy", "check", "--config"], "sandgate: --config: missing value"),
            (["audit", "--format", "xml"],
             "sandgate: --format: expected table|json|csv|ocsf, got xml"),
            (["audit", "--format=xml"],
             "sandgate: --format: expected table|json|csv|ocsf, got xml"),
            (["audit", "stats", "--format", "csv"],
             "sandgate: --format: expected text|json, got csv"),
            (["audit", "export", "--format", "csv"],
             "sandgate: --format: expected json|ocsf, got csv"),
            (["audit", "--decision", "maybe"],
             "sandgate: --decision: expected allow|deny|report|error, got maybe"),
            (["audit", "--frobnicate"],
             "sandgate: --frobnicate: unknown option (sandgate help audit)"),
            (["audit", "--asc=1"], "sandgate: --asc: takes no value"),
            (["audit", "--frobnicate=1"],
             "sandgate: --frobnicate: unknown option (sandgate help audit)"),
            (["policy", "explain", "-x"],
             "sandgate: -x: unknown option (sandgate help policy explain)"),
            (["policy", "explain", "--format", "yaml", "--sandbox", "d", "h"],
             "sandgate: --format: expected text|json, got yaml"),
            (["serve", "--log-level", "loud"],
             "sandgate: --log-level: expected debug|info|warn|error, got loud"),
            (["serve", "--log-format", "xml"],
             "sandgate: --log-format: expected text|json, got xml"),
            (["sandbox", "ls", "--format", "x"],
             "sandgate: --format: expected table|json, got x"),
            (["sandbox", "run", "--nope"],
             "sandgate: --nope: unknown option (sandgate help sandbox run)"),
            (["sandbox", "logs", "--since", "1h"],
             "sandgate: --since: unknown option (sandgate help sandbox logs)"),
            (["vault", "list", "--db", "x"],
             "sandgate: --db: unknown option (sandgate help vault)"),
        ]
        for args, line in cases:
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 2, r)
                self.assertEqual(r.stderr, line + "\n")
                self.assertEqual(r.stdout, "")
        # help CMD and CMD --help still print the whole usage, on stdout
        for args in (["help", "audit"], ["audit", "--help"]):
            r = self.sg(*args)
            self.assertEqual(r.returncode, 0, r)
            self.assertIn("--format table|json|csv|ocsf", r.stdout)

    # -------------------------------------------------------------- check

    def write_set(self, name, policy_text):
        d = self.fresh(name)
        gw = T.Gateway(d, self.dns, {"p.yaml": policy_text})
        return gw.cfg_path, os.path.join(gw.policy_dir, "p.yaml")

    def test_check_good(self):
        r = self.sg("policy", "check", "-c", self.cfg)
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(diags(r.stderr), [], r)

    def test_check_three_errors(self):
        text = (
            "sandboxes:\n"
            "  - id: Bad_Id!\n"
            "    policy: p\n"
            "    source: [127.0.0.1/32]\n"
            "policies:\n"
            "  - name: p\n"
            "    allow:\n"
            "      - host: ok.test\n"
            "        ports: [70000]\n"
            "      - cidr: 198.18.0.0/33\n"
            "    allow_private: []\n")
        cfg, pfile = self.write_set("three", text)
        r = self.sg("policy", "check", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        ds = diags(r.stderr)
        self.assertEqual(len(ds), 3, r.stderr)
        for f, _, _, _ in ds:
            self.assertTrue(f.endswith("p.yaml"), r.stderr)
        want = [
            ("id", {where(text, "id: Bad")[1], where(text, "Bad_Id")[1]},
             where(text, "Bad_Id")[0]),
            ("port", {where(text, "ports:")[1], where(text, "[70000")[1],
                      where(text, "70000")[1]}, where(text, "70000")[0]),
            ("cidr", {where(text, "cidr:")[1], where(text, "198.18.0.0/33")[1]},
             where(text, "198.18.0.0/33")[0]),
        ]
        got = sorted((l, c) for _, l, c, _ in ds)
        for (what, cols, line), (gl, gc) in zip(want, got):
            self.assertEqual(gl, line, "%s error: %s" % (what, r.stderr))
            self.assertIn(gc, cols, "%s error column: %s" % (what, r.stderr))
        # a summary line follows the diagnostics
        lines = [l for l in (r.stderr + r.stdout).splitlines() if l.strip()]
        self.assertTrue(any(not DIAG.match(l) for l in lines), r)

    def test_check_unknown_key_in_policy(self):
        text = (
            "policies:\n"
            "  - name: p\n"
            "    allow:\n"
            "      - host: ok.test\n"
            "        prots: [443]\n")
        cfg, pfile = self.write_set("unknown", text)
        r = self.sg("policy", "check", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        ds = diags(r.stderr)
        self.assertEqual([(l, c) for _, l, c, _ in ds], [where(text, "prots")], r.stderr)
        self.assertIn("prots", ds[0][3])

    def test_check_suggests_keys_and_networks(self):
        """An unknown key names the nearest known one; a CIDR with host
        bits set is refused with the network it most likely meant."""
        text = (
            "sandboxes:\n"
            "  - id: dev\n"
            "    polcy: p\n"
            "    source: [198.18.1.7/16]\n"
            "policies:\n"
            "  - name: p\n"
            "    alow:\n"
            "      - host: ok.test\n"
            "    allow:\n"
            "      - host: ok.test\n"
            "        prots: [443]\n"
            "      - cidr: 2001:db8::1/32\n"
            "      - host: other.test\n"
            "        frobnicate: 1\n")
        cfg, pfile = self.write_set("suggest", text)
        r = self.sg("policy", "check", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        got = {(l, c): (f, m) for f, l, c, m in diags(r.stderr)}
        want = {
            where(text, "id: dev"): "sandbox: policy is required",
            where(text, "polcy"):
                'unknown key "polcy" in sandbox (did you mean "policy"?)',
            where(text, "198.18.1.7"):
                'source: "198.18.1.7/16" has host bits set; did you mean '
                '198.18.0.0/16?',
            where(text, "alow"):
                'unknown key "alow" in policy (did you mean "allow"?)',
            where(text, "prots"):
                'unknown key "prots" in allow rule (did you mean "ports"?)',
            where(text, "2001:db8::1"):
                'cidr: "2001:db8::1/32" has host bits set; did you mean '
                '2001:db8::/32?',
            where(text, "frobnicate"): 'unknown key "frobnicate" in allow rule',
        }
        self.assertEqual(sorted(got), sorted(want), r.stderr)
        for pos, msg in want.items():
            self.assertTrue(got[pos][0].endswith("p.yaml"), r.stderr)
            self.assertEqual(got[pos][1], msg, r.stderr)
        # the config's keys too
        d = self.fresh("suggestcfg")
        path = os.path.join(d, "sandgate.yaml")
        ctext = ("upstream:\n  conect_timeout: 3s\nlog_levl: info\n"
                 "sandbox:\n  subnet: 198.18.3.1/16\n")
        with open(path, "w") as f:
            f.write(ctext)
        r = self.sg("policy", "check", "-c", path)
        self.assertEqual(r.returncode, 1, r)
        self.assertEqual(
            [(l, c, m) for _, l, c, m in diags(r.stderr)],
            [where(ctext, "conect") + ('unknown key "conect_timeout" in '
              'upstream (did you mean "connect_timeout"?)',),
             where(ctext, "log_levl") + ('unknown key "log_levl" in the '
              'config file (did you mean "log_level"?)',),
             where(ctext, "198.18.3.1") + ('subnet: "198.18.3.1/16" has '
              'host bits set; did you mean 198.18.0.0/16?',)], r.stderr)

    def test_check_config_errors(self):
        d = self.fresh("badcfg")
        path = os.path.join(d, "sandgate.yaml")
        text = ("state_dir: ./var\n"
                "listn:\n"
                "  http: 127.0.0.1:3128\n"
                "workers: many\n"
                "upstream:\n"
                "  connect_timeout: 10 parsecs\n")
        with open(path, "w") as f:
            f.write(text)
        r = self.sg("policy", "check", "-c", path)
        self.assertEqual(r.returncode, 1, r)
        ds = diags(r.stderr)
        lines = sorted(l for _, l, _, _ in ds)
        self.assertEqual(lines, [where(text, "listn")[0], where(text, "many")[0],
                                 where(text, "parsecs")[0]], r.stderr)
        for f, _, _, _ in ds:
            self.assertTrue(f.endswith("sandgate.yaml"), r.stderr)
        # serve refuses the same file with the same diagnostics and exit 1
        r = self.sg("serve", "-c", path, timeout=10)
        self.assertEqual(r.returncode, 1, r)
        self.assertTrue(diags(r.stderr), r)

    def test_check_yaml_syntax_error(self):
        text = "policies:\n  - name: p\n    allow: [\n"
        cfg, pfile = self.write_set("syntax", text)
        r = self.sg("policy", "check", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        ds = diags(r.stderr)
        self.assertTrue(ds, r)
        self.assertTrue(ds[0][0].endswith("p.yaml"), r)

    # -------------------------------------------------------------- explain

    def explain(self, target, *extra, sandbox="dev", fmt=None):
        args = ["policy", "explain", "-c", self.cfg, "--sandbox", sandbox]
        args += list(extra)
        if fmt:
            args += ["--format", fmt]
        return self.sg(*(args + [target]))

    @staticmethod
    def fields(out):
        d = {}
        for l in out.splitlines():
            if ":" in l:
                k, v = l.split(":", 1)
                d[k.strip()] = v.strip()
        return d

    def test_explain_table(self):
        cases = [
            ("api.allowed.test:443", [], "allow", "agent:allow[0]", None),
            ("api.allowed.test", [], "allow", "agent:allow[0]", None),
            ("API.Allowed.Test.", [], "allow", "agent:allow[0]", None),
            ("api.allowed.test:80", [], "deny", "default-deny", "policy-deny"),
            ("x.y.pkgcdn.test", [], "allow", "agent:allow[1]", None),
            ("x.y.pkgcdn.test:80", [], "allow", "agent:allow[1]", None),
            ("x.y.pkgcdn.test:8080", [], "deny", "default-deny", "policy-deny"),
            ("pkgcdn.test", [], "deny", "default-deny", "policy-deny"),
            ("140.82.112.5:22", [], "allow", "agent:allow[2]", None),
            ("140.82.112.5:443", [], "deny", "default-deny", "policy-deny"),
            ("a.files.test", [], "allow", "agent:allow[3]", None),
            ("uploads.files.test", [], "deny", "agent:deny[0]", "policy-deny"),
            ("api2.allowed.test", ["--method", "GET", "--path", "/v1/models?x=1"],
             "allow", "agent:allow[4]", None),
            ("api2.allowed.test", ["--method", "GET", "--path", "/v1/a/b"],
             "allow", "agent:allow[4]", None),
            ("api2.allowed.test", ["--method", "POST", "--path", "/v1/models"],
             "deny", "default-deny", "policy-deny"),
            ("api2.allowed.test", ["--method", "GET", "--path", "/admin"],
             "deny", "default-deny", "policy-deny"),
            ("unlisted.test", [], "deny", "default-deny", "policy-deny"),
        ]
        for target, extra, decision, rule, reason in cases:
            with self.subTest(target=target, extra=extra):
                r = self.explain(target, *extra)
                self.assertEqual(r.returncode, 0, r)
                f = self.fields(r.stdout)
                self.assertEqual(f.get("decision"), decision, r.stdout)
                self.assertEqual(f.get("rule"), rule, r.stdout)
                if reason:
                    self.assertEqual(f.get("reason"), reason, r.stdout)

    def test_explain_options_after_operand(self):
        r = self.sg("policy", "explain", "uploads.files.test", "-c", self.cfg,
                    "--sandbox", "dev")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(self.fields(r.stdout).get("rule"), "agent:deny[0]", r)

    def test_explain_json(self):
        r = self.explain("uploads.files.test", fmt="json")
        self.assertEqual(r.returncode, 0, r)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["decision"], "deny")
        self.assertEqual(doc["rule"], "agent:deny[0]")
        self.assertEqual(doc["reason"], "policy-deny")
        self.assertEqual(doc["sandbox"], "dev")
        self.assertEqual(doc["host"], "uploads.files.test")
        self.assertEqual(doc["port"], 443)
        r = self.explain("api.allowed.test:443", fmt="json")
        doc = json.loads(r.stdout)
        self.assertEqual(doc["decision"], "allow")
        self.assertEqual(doc["rule"], "agent:allow[0]")
        self.assertIn("reason", doc)
        self.assertEqual(doc["port"], 443)

    def test_explain_unknown_sandbox(self):
        r = self.explain("api.allowed.test", sandbox="nobody")
        self.assertEqual(r.returncode, 1, r)
        lines = r.stderr.strip().splitlines()
        self.assertTrue(lines and lines[0].startswith("sandgate: "), r)

    # -------------------------------------------------------------- serve

    DEFAULT_TCP = [3128, 1080, 5353, 3129, 8080, 9090]

    def test_serve_builtin_defaults(self):
        if os.path.exists("/etc/sandgate/sandgate.yaml"):
            self.skipTest("/etc/sandgate/sandgate.yaml exists and would be used")
        busy = [p for p in self.DEFAULT_TCP if T.port_in_use(p)]
        if T.port_in_use(5353, udp=True):
            busy.append("5353/udp")
        if busy:
            self.skipTest("default ports in use: %s" % busy)
        d = self.fresh("defaults")
        proc = T.Proc([T.BIN, "serve"], os.path.join(self.td.path, "defaults.log"), cwd=d)
        self.addCleanup(proc.stop)
        ok = T.wait_tcp("127.0.0.1", 3128, 10 * T.SLOW, proc)
        self.assertTrue(ok, "serve did not listen on 127.0.0.1:3128:\n" + proc.log_tail())
        r = T.curl("http://example.test/", proxy="http://127.0.0.1:3128", tmp=self.td.path)
        self.assertIn(r.status, (403, 407), r)
        self.assertTrue(r.header("X-Sandgate-Reason"), r)
        self.assertTrue(os.path.isdir(os.path.join(d, "var")), os.listdir(d))
        for rel in ("certs/ca.crt", "certs/ca.key", "certs/vault.key"):
            with self.subTest(created=rel):
                self.assertTrue(os.path.isfile(os.path.join(d, rel)), rel)
        for rel in ("certs/ca.key", "certs/vault.key"):
            p = os.path.join(d, rel)
            if os.path.exists(p):
                with self.subTest(mode=rel):
                    self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o600)
        self.assertTrue(proc.alive(), proc.log_tail())
        rc = proc.stop()
        self.assertIn(rc, (0, -15, 143), proc.log_tail())
        # built-in defaults: user sandgate, seccomp; nothing refused
        self.assertIn("privileges: running as sandgate", proc.log_text())
        self.assertEqual(T.log_problems(proc.log_text()), [], proc.log_tail())


if __name__ == "__main__":
    T.main()
