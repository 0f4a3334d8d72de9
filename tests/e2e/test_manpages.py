#!/usr/bin/python3
"""
The manual pages and the built-in help cannot go stale (issue 16, point 2):

- man/sandgate.8, man/sandgate.yaml.5 and man/sandgate-policy.5 pass
  `mandoc -T lint` with no warning or error;
- every command of SPEC sections 2 and 9 is in sandgate(8); every one this
  build has is listed by `sandgate help`, and `sandgate help CMD` and
  `sandgate CMD --help` print its usage (the same page); `sandgate help`
  lists nothing SPEC does not;
- the commands, options and keys SPEC specifies but this build does not
  have yet (NOT_BUILT below) are refused by the binary with a usage error
  and marked "not built yet" on the pages: once a branch builds one, this
  test fails until the help, the page and this list say so;
- every key the config parser (src/core/config*.c) accepts is in
  sandgate.yaml(5), and every key of SPEC section 3 is there with SPEC's
  default;
- a page says "not built yet" only of what those lists name, and the
  options built since (BUILT_OPTIONS) are accepted and on sandgate(8);
- exit statuses of SPEC section 2: usage errors are 2 with a first line
  starting "sandgate: ".
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

MAN = os.path.join(T.SRC, "man")
PAGES = ["sandgate.8", "sandgate.yaml.5", "sandgate-policy.5"]

# SPEC section 2 and 9, as they read.
SPEC_COMMANDS = [
    "serve", "policy check", "policy explain", "policy suggest", "ca init",
    "vault set", "vault list", "vault rm", "vault rotate", "audit",
    "audit verify", "audit export", "audit stats", "audit ship",
    "sandbox run", "sandbox create", "sandbox exec", "sandbox ls",
    "sandbox rm", "sandbox logs", "version", "help",
]
# Commands an issue added beyond SPEC's list (issue 24: status, reload, top),
# held to the same checks: on the page, in help, help CMD = CMD --help.
# Issue 26: policy replay.
ISSUE_COMMANDS = ["status", "reload", "top", "policy replay",
                  "approvals", "approve", "deny"]
SPEC_COMMANDS = SPEC_COMMANDS + ISSUE_COMMANDS
# Specified, built on other branches: {command: who builds it}. Empty while
# this build has every command SPEC names; the checks stay for the next one.
NOT_BUILT = {}
# Options of built commands, likewise: (argv, the page's words for it).
NOT_BUILT_OPTIONS = []
# Options that were on the lists above and are built now: (argv, the words
# sandgate(8) documents them with). Each is accepted (not a usage error).
BUILT_OPTIONS = [
    (["audit", "--store", "postgresql://127.0.0.1:9/x"], "Fl -store Ar url"),
    (["audit", "verify", "--store", "postgresql://127.0.0.1:9/x"],
     "Fl -store Ar url"),
    (["audit", "export", "--format", "ocsf"], "Fl -format Cm ocsf"),
    (["audit", "ship", "--init"], "Cm audit ship Fl -init"),
]

# SPEC section 3: every key and its default.
SPEC_KEYS = {
    "state_dir": "./var",
    "listen.http": "127.0.0.1:3128",
    "listen.socks5": "127.0.0.1:1080",
    "listen.dns": "127.0.0.1:5353",
    "listen.transparent": "127.0.0.1:3129",
    "listen.ingress": "127.0.0.1:8080",
    "listen.metrics": "127.0.0.1:9090",
    "listen.admin": "./var/admin.sock",
    "ingress_domain": "sandbox.localhost",
    "policies": "[./policies]",
    "ca.cert": "./certs/ca.crt",
    "ca.key": "./certs/ca.key",
    "vault.db": "./var/vault.db",
    "vault.key_file": "./certs/vault.key",
    "upstream.resolvers": "system",
    "upstream.ca_bundle": "system",
    "upstream.connect_timeout": "10s",
    "upstream.idle_timeout": "300s",
    "audit.db": "./var/audit.db",
    "audit.retention": "30d",
    "audit.checkpoint_interval": "10s",
    "audit.on_failure": "deny",
    "audit.syslog": "null",
    "audit.ship": "null",
    "geoip.country_db": "null",
    "geoip.asn_db": "null",
    "sandbox.runtime": "runsc",
    "sandbox.subnet": "198.18.0.0/16",
    "sandbox.rootfs": "host",
    "limits.max_connections": "20000",
    "limits.max_header_bytes": "65536",
    "limits.head_timeout": "10s",
    "limits.per_sandbox.max_connections": "1024",
    "limits.per_sandbox.connections_per_second": "200",
    "limits.per_sandbox.dns_queries_per_second": "500",
    "workers": "auto",
    "user": "sandgate",
    "policies_watch": "false",
}
NOT_BUILT_KEYS = {}
UNBUILT = "not built yet"
# What an item of a whole command that is not built says.
UNBUILT_CMD = "Specified, not built yet"


def read(name):
    with open(os.path.join(MAN, name)) as f:
        return f.read()


def man_items(text):
    """[(keys named on an .It line, the item's text up to the next .It)]."""
    items = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(".It Cm "):
            continue
        names = []
        for part in line[len(".It "):].split(" , "):
            m = re.match(r"Cm ((?:[a-z_][a-z_0-9.]*)(?: [a-z][a-z_0-9]*)*)", part)
            if m:
                names.append(m.group(1))
        body = []
        for l in lines[i + 1:]:
            if l.startswith((".It ", ".El")) and not body_nested(body):
                break
            body.append(l)
        items.append((names, line + "\n" + "\n".join(body)))
    return items


def body_nested(body):
    """Inside a list opened within the item (.Bl ... .El)?"""
    depth = 0
    for l in body:
        if l.startswith(".Bl"):
            depth += 1
        elif l.startswith(".El"):
            depth -= 1
    return depth > 0


def command_words(item_names):
    """'policy check Op Fl c' was cut at macros: the command is the words."""
    return {re.sub(r"\s+", " ", n).strip() for n in item_names}


def parser_keys():
    """(section, key) for every key src/core/config*.c compares against."""
    src = ""
    core = os.path.join(T.SRC, "src", "core")
    for name in sorted(os.listdir(core)):
        if re.match(r"config.*\.c$", name):
            with open(os.path.join(core, name)) as f:
                src += f.read() + "\n"
    tables = {}
    for m in re.finditer(r"\}\s*([a-z_0-9]+)\[\]\s*=\s*\{(.*?)\n\};", src, re.S):
        tables[m.group(1)] = re.findall(r'\{\s*"([a-z_0-9]+)",', m.group(2))
    keys = set()
    for m in re.finditer(r"\n[a-z_0-9]+\([^;{]*\)\n\{\n(.*?)\n\}\n", src, re.S):
        body = m.group(1)
        sec = re.findall(r'ycheck_unknown(?:_of)?\([^,]+,[^,]+,\s*"([^"]+)"',
                         body)
        if not sec:
            continue
        section = "" if sec[0] == "the config file" else sec[0]
        names = re.findall(r'strcmp\(c->key->str,\s*"([a-z_0-9]+)"\)', body)
        names += re.findall(r'\{\s*"([a-z_0-9]+)",', body)
        for t in re.findall(r"strcmp\(c->key->str,\s*([a-z_0-9]+)\[i\]", body):
            names += tables.get(t, [])
        keys |= {(section, n) for n in names}
    return keys


class ManpagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        r = T.run_sandgate("help")
        assert r.returncode == 0, r
        cls.help = r.stdout
        cls.man8 = read("sandgate.8")
        cls.man8_items = man_items(cls.man8)
        cls.man5_items = man_items(read("sandgate.yaml.5"))

    def man8_item(self, cmd):
        for names, body in self.man8_items:
            if cmd in command_words(names):
                return body
        return None

    def help_lists(self, cmd):
        return re.search(r"(?m)^  " + re.escape(cmd) + r"( |$)", self.help)

    # ------------------------------------------------------------ mandoc

    def test_mandoc_lint(self):
        if shutil.which("mandoc") is None:
            self.skipTest("mandoc is not installed (scripts/install-deps.sh)")
        for page in PAGES:
            with self.subTest(page=page):
                r = subprocess.run(["mandoc", "-T", "lint", "-W", "warning",
                                    os.path.join(MAN, page)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
                msgs = [l for l in (r.stdout + r.stderr).splitlines()
                        if "mandoc.db" not in l]
                self.assertEqual(msgs, [], page)
                r = subprocess.run(["mandoc", "-T", "ascii", os.path.join(MAN, page)],
                                   stdout=subprocess.PIPE, text=True)
                plain = re.sub(r".\x08", "", r.stdout)
                self.assertIn("\nNAME\n", plain)
                self.assertIn("SEE ALSO", plain)

    # ------------------------------------------------------------ commands

    def test_every_spec_command_is_on_the_page(self):
        for cmd in SPEC_COMMANDS:
            with self.subTest(cmd=cmd):
                self.assertIsNotNone(self.man8_item(cmd),
                                     "sandgate(8) has no .It Cm %s" % cmd)

    def test_built_commands_have_help(self):
        for cmd in SPEC_COMMANDS:
            if cmd in NOT_BUILT:
                continue
            with self.subTest(cmd=cmd):
                self.assertTrue(self.help_lists(cmd),
                                "sandgate help does not list %r:\n%s" % (cmd, self.help))
                r = T.run_sandgate("help", *cmd.split())
                self.assertEqual(r.returncode, 0, r)
                self.assertTrue(r.stdout.startswith("usage: sandgate " + cmd), r.stdout)
                r2 = T.run_sandgate(*(cmd.split() + ["--help"]))
                self.assertEqual(r2.returncode, 0, r2)
                self.assertEqual(r2.stdout, r.stdout,
                                 "help %s and %s --help differ" % (cmd, cmd))
                self.assertNotIn(UNBUILT_CMD, self.man8_item(cmd))

    def test_help_lists_only_spec_commands(self):
        listed = set()
        for line in self.help.splitlines():
            m = re.match(r"^  ([a-z]+)(?: ([a-z]+))?(?= |$)", line)
            if m:
                two = "%s %s" % (m.group(1), m.group(2)) if m.group(2) else m.group(1)
                listed.add(two if two in SPEC_COMMANDS else m.group(1))
        self.assertEqual(listed - set(SPEC_COMMANDS), set())
        self.assertEqual(listed, set(SPEC_COMMANDS) - set(NOT_BUILT))

    def test_not_built_commands(self):
        for cmd, who in NOT_BUILT.items():
            with self.subTest(cmd=cmd):
                r = T.run_sandgate(*(cmd.split() + ["--help"]))
                self.assertEqual(r.returncode, 2,
                                 "%r is built now (%s): list it in `sandgate help` "
                                 "(src/main.c), drop %r from its item in "
                                 "man/sandgate.8 and remove it from NOT_BUILT in "
                                 "this test" % (cmd, who, UNBUILT))
                self.assertFalse(self.help_lists(cmd))
                self.assertIn(UNBUILT_CMD, self.man8_item(cmd))

    def test_not_built_options(self):
        cfg = self.td.join("empty.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: ./var\n")
        for argv, words in NOT_BUILT_OPTIONS:
            with self.subTest(argv=argv):
                r = T.run_sandgate(*(argv + ["-c", cfg, "--db",
                                             self.td.join("none.db")]))
                self.assertEqual(r.returncode, 2,
                                 "%s is built now: update man/sandgate.8 and "
                                 "NOT_BUILT_OPTIONS" % " ".join(argv))
                i = self.man8.index(words)
                self.assertIn(UNBUILT, self.man8[i:i + 300].replace("\n", " "))

    def test_unbuilt_markers_match_the_lists(self):
        """A page says "not built yet" only of what the lists above name."""
        expect = {"sandgate.8": len(NOT_BUILT) + len(NOT_BUILT_OPTIONS),
                  "sandgate.yaml.5": len(NOT_BUILT_KEYS),
                  "sandgate-policy.5": 0}
        for page in PAGES:
            with self.subTest(page=page):
                text = re.sub(r"\s+", " ", read(page))
                self.assertEqual(text.count(UNBUILT), expect[page],
                                 "%s marks something %r that the lists of "
                                 "this test do not name" % (page, UNBUILT))

    def test_built_options(self):
        """Once built, an option is accepted and on the page."""
        cfg = self.td.join("empty.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: ./var\n")
        for argv, words in BUILT_OPTIONS:
            with self.subTest(argv=argv):
                r = T.run_sandgate(*(argv + ["-c", cfg]), cwd=self.td.path)
                self.assertNotEqual(r.returncode, 2, r)
                self.assertIn(words, self.man8)

    def test_exit_status_usage(self):
        for argv in (["frob"], ["help", "frob"], ["version", "x"],
                     ["serve", "--bogus"], ["policy"], ["policy", "frob"],
                     ["policy", "check", "--bogus"], ["policy", "explain"],
                     ["ca"], ["ca", "init", "--bogus"], ["vault"], ["vault", "set"],
                     ["vault", "list", "--bogus"], ["audit", "--bogus"],
                     ["audit", "verify", "--bogus"], ["audit", "export", "--bogus"],
                     ["audit", "frob", "--help"], ["sandbox"], ["sandbox", "frob"],
                     ["sandbox", "run", "--bogus"], ["sandbox", "exec"],
                     ["sandbox", "ls", "--bogus"], ["sandbox", "rm"],
                     ["sandbox", "logs"], ["audit", "ship"],
                     ["audit", "ship", "--init", "--db", "x.db"],
                     ["audit", "--store", "postgresql:///x", "--format",
                      "ocsf"]):
            with self.subTest(argv=argv):
                r = T.run_sandgate(*argv, cwd=self.td.path)
                self.assertEqual(r.returncode, 2, r)
                self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
                self.assertEqual(r.stdout, "")

    def test_exit_status_failure(self):
        r = T.run_sandgate("audit", "--db", self.td.join("missing.db"))
        self.assertEqual(r.returncode, 1, r)
        self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_sandbox_exec_help_is_not_the_commands(self):
        """--help after -- belongs to the sandboxed command."""
        r = T.run_sandgate("sandbox", "exec", "--", "ls", "--help")
        self.assertEqual(r.returncode, 2, r)

    # ------------------------------------------------------------ config keys

    def man5_item(self, key):
        for names, body in self.man5_items:
            for n in names:
                if n == key or n.startswith(key + "."):
                    return body
        return None

    def test_parser_keys_are_on_the_page(self):
        keys = parser_keys()
        self.assertGreater(len(keys), 40, "the scan of config.c found too little")
        documented = {n for names, _ in self.man5_items for n in names}
        for section, key in sorted(keys):
            full = key if not section else section + "." + key
            with self.subTest(key=full):
                self.assertTrue(
                    full in documented or
                    any(d.startswith(full + ".") or d.endswith("." + full)
                        for d in documented),
                    "config key %s is not in man/sandgate.yaml.5" % full)

    def test_unknown_key_suggestions_know_every_key(self):
        """The keys each ycheck_unknown_of() in config.c suggests from are
        the keys its function takes: none missing, none made up."""
        with open(os.path.join(T.SRC, "src", "core", "config.c")) as f:
            src = f.read()
        n = 0
        for m in re.finditer(r"\n([a-z_0-9]+)\([^;{]*\)\n\{\n(.*?)\n\}\n",
                             src, re.S):
            body = m.group(2)
            call = re.search(r'ycheck_unknown_of\([^,]+,[^,]+,\s*"[^"]+",'
                             r'\s*((?:"[^"]*"\s*)+)\)', body)
            if not call:
                continue
            n += 1
            known = set("".join(re.findall(r'"([^"]*)"', call.group(1)))
                        .split("|"))
            names = set(re.findall(r'strcmp\(c->key->str,\s*"([a-z_0-9]+)"\)',
                                   body))
            names |= set(re.findall(r'\{\s*"([a-z_0-9]+)",', body))
            if m.group(1) == "cf_listen":
                names |= {"http", "socks5", "dns", "transparent", "ingress",
                          "metrics"}
            with self.subTest(function=m.group(1)):
                self.assertEqual(known, names)
        self.assertGreater(n, 10, "the scan of config.c found too little")

    def test_spec_keys_with_defaults(self):
        for key, default in SPEC_KEYS.items():
            with self.subTest(key=key):
                body = self.man5_item(key)
                self.assertIsNotNone(body, "%s is not in sandgate.yaml(5)" % key)
                i = body.find("Default:")
                self.assertGreaterEqual(i, 0, body)
                self.assertIn(default, body[i:], "SPEC's default of %s" % key)

    def test_not_built_keys(self):
        for key, who in NOT_BUILT_KEYS.items():
            with self.subTest(key=key):
                parts = key.split(".")
                text = "".join("%s%s:%s\n" % ("  " * i, p, "" if i < len(parts) - 1
                                               else " null")
                               for i, p in enumerate(parts))
                cfg = self.td.join("k-%s.yaml" % key)
                with open(cfg, "w") as f:
                    f.write(text)
                r = T.run_sandgate("policy", "check", "-c", cfg)
                self.assertIn('unknown key "%s"' % parts[-1], r.stderr,
                              "%s is built now (%s): drop %r from its item in "
                              "man/sandgate.yaml.5 and from NOT_BUILT_KEYS"
                              % (key, who, UNBUILT))
                self.assertIn(UNBUILT, self.man5_item(key))


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
