#!/usr/bin/python3
"""
The command table (src/cmd_table.c) against the commands, and the bash
completion generated from it at build time: every option the table names is
accepted by its command, every option a command's usage names is in the
table, and the completion offers every command, subcommand, option and enum
value. Adding an option to a command without the table fails here.
"""

import os
import re
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"
# An option in a usage text: -c, --log-level; not the "--" before a command.
USAGE_OPT = re.compile(r"(?<![\w=,-])(--?[a-z][a-z0-9-]*)")  # not a value: --kind=-admin,-vault


def load_table():
    r = T.run_sandgate("__complete", "table")
    if r.returncode != 0:
        raise AssertionError(r)
    table = {}
    for line in r.stdout.splitlines():
        cmd, sub, opt, kind, values = line.split("\t")
        key = (cmd, None if sub == "-" else sub)
        table.setdefault(key, {})[opt] = (kind, None if values == "-"
                                          else values.split("|"))
    return table


def completion_path():
    return os.path.join(os.path.dirname(os.path.abspath(T.BIN)),
                        "sandgate.bash-completion")


class TableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.table = load_table()
        cls.missing = os.path.join(cls.td.path, "no", "such.yaml")

    @classmethod
    def tearDownClass(cls):
        cls.td.cleanup()

    def sg(self, *args):
        return T.run_sandgate(*args, cwd=self.td.path)

    def words(self, key):
        return [key[0]] + ([key[1]] if key[1] else [])

    def test_table_has_the_commands(self):
        cmds = {c for c, _ in self.table}
        subs = {k for k in self.table if k[1]}
        for c in ("serve", "policy", "ca", "vault", "audit", "sandbox",
                  "version", "help"):
            self.assertIn(c, cmds)
        for k in (("policy", "check"), ("policy", "explain"),
                  ("policy", "suggest"), ("audit", "verify"),
                  ("audit", "export"), ("audit", "stats"), ("audit", "ship"),
                  ("sandbox", "run"), ("sandbox", "create"),
                  ("sandbox", "exec"), ("sandbox", "ls"), ("sandbox", "rm"),
                  ("sandbox", "logs")):
            self.assertIn(k, subs)
        self.assertIn("ocsf", self.table[("audit", None)]["--format"][1])
        self.assertIn("report", self.table[("audit", None)]["--decision"][1])

    def test_every_command_is_in_the_table(self):
        """What `sandgate help` lists is what the table has: a command or
        subcommand added to the CLI without the table fails here."""
        r = self.sg("help")
        self.assertEqual(r.returncode, 0, r)
        listed = set()
        for line in r.stdout.splitlines():
            m = re.match(r"^  ([a-z]+)(?: ([a-z]+)\b)?", line)
            if m:
                listed.add((m.group(1), m.group(2)))
        self.assertGreater(len(listed), 10, r.stdout)
        cmds = {c for c, _ in self.table}
        self.assertEqual({c for c, _ in listed}, cmds)
        for c, s in listed:
            with self.subTest(cmd=c, sub=s):
                if s is not None:
                    self.assertIn((c, s), self.table)
                else:
                    self.assertTrue(any(k[0] == c for k in self.table))
        # every (sub)command the table names has its page
        for c, s in self.table:
            with self.subTest(page=(c, s)):
                r = self.sg("help", *([c] + ([s] if s else [])))
                self.assertEqual(r.returncode, 0, r)

    def test_every_table_option_is_accepted(self):
        """sandgate CMD [SUB] OPT [VALUE] never says unknown option."""
        for key, opts in sorted(self.table.items(), key=str):
            for opt, (kind, values) in opts.items():
                if opt in ("--help", "-h"):
                    continue
                args = self.words(key) + [opt]
                if kind == "enum":
                    args.append(values[0])
                elif kind != "none":
                    args.append(os.path.join(self.td.path, "no", "x"))
                if opt not in ("-c", "--config"):
                    args += ["-c", self.missing]
                with self.subTest(args=args):
                    r = self.sg(*args)
                    self.assertNotIn("unknown option", r.stderr, r)
                    self.assertNotIn("missing value", r.stderr, r)
                    self.assertNotIn("takes no value", r.stderr, r)

    def test_an_option_outside_the_table_is_refused(self):
        """The check above can fail: an unknown option is named as such."""
        for key in sorted(self.table, key=str):
            if key[0] in ("help", "version"):
                continue
            with self.subTest(key=key):
                r = self.sg(*self.words(key) + ["--frobnicate"])
                self.assertEqual(r.returncode, 2, r)
                hint = " ".join(self.words(key))
                if key[0] == "audit" or key[0] == "vault" or key[0] == "ca":
                    hint = key[0]
                self.assertEqual(r.stderr, "sandgate: --frobnicate: unknown "
                                 "option (sandgate help %s)\n" % hint)

    def test_usage_options_are_in_the_table(self):
        """Every option `sandgate help CMD [SUB]` names is in the table."""
        for key in sorted(self.table, key=str):
            if key == ("help", None):
                continue
            r = self.sg("help", *self.words(key))
            self.assertEqual(r.returncode, 0, r)
            if key[1] is not None:
                known = set(self.table[key])
            else:   # the command's page covers its subcommands too
                known = set()
                for k, opts in self.table.items():
                    if k[0] == key[0]:
                        known |= set(opts)
            known |= {"-h", "--help"}
            found = set(USAGE_OPT.findall(r.stdout))
            with self.subTest(key=key):
                self.assertTrue(found or key[0] == "version", r.stdout)
                self.assertEqual(found - known, set(),
                                 "in the usage, not in src/cmd_table.c")


class CompletionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(BASH_COMPLETION):
            raise unittest.SkipTest("bash-completion is not installed")
        cls.script = completion_path()
        if not os.path.exists(cls.script):
            raise AssertionError("no generated completion at %s" % cls.script)
        cls.table = load_table()

    def complete_many(self, lines):
        """Each line is what was typed before TAB; the offers of each."""
        prog = [". %s" % BASH_COMPLETION, ". %s" % self.script]
        for words in lines:
            arr = " ".join("'%s'" % w for w in words)
            line = " ".join(words)
            prog.append("COMP_WORDS=(%s); COMP_CWORD=%d; COMP_LINE='%s'; "
                        "COMP_POINT=%d; COMPREPLY=(); _sandgate; "
                        "echo \"@@ ${COMPREPLY[*]}\"" %
                        (arr, len(words) - 1, line, len(line)))
        r = subprocess.run(["bash", "-c", "\n".join(prog)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60, cwd="/")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = [l[3:].split() for l in r.stdout.splitlines()
               if l.startswith("@@")]
        self.assertEqual(len(out), len(lines), r)
        return out

    def test_offers_everything(self):
        cases = []
        cmds = []
        for c, _ in self.table:
            if c not in cmds:
                cmds.append(c)
        cases.append((["sandgate", ""], set(cmds)))
        cases.append((["sandgate", "help", ""], set(cmds)))
        for c in cmds:
            subs = {s for k, s in self.table if k == c and s}
            if subs:
                cases.append((["sandgate", c, ""], subs))
                cases.append((["sandgate", "help", c, ""], subs))
                cases.append((["sandgate", "-c", "x.yaml", c, ""], subs))
        for key, opts in self.table.items():
            words = ["sandgate", key[0]] + ([key[1]] if key[1] else [])
            cases.append((words + ["-"], set(opts)))
            for opt, (kind, values) in opts.items():
                if kind == "enum":
                    cases.append((words + [opt, ""], set(values)))
                    # after another option and its value
                    cases.append((words + ["-c", "x.yaml", opt, ""],
                                  set(values)))
        got = self.complete_many([w for w, _ in cases])
        for (words, want), offers in zip(cases, got):
            with self.subTest(words=words):
                self.assertEqual(set(offers) & want, want, offers)
        # What the old hand-written script lacked.
        named = dict((" ".join(w), set(o)) for (w, _), o in zip(cases, got))
        self.assertIn("suggest", named["sandgate policy "])
        self.assertTrue({"stats", "ship"} <= named["sandgate audit "])
        self.assertEqual(named["sandgate audit --format "],
                         {"table", "json", "csv", "ocsf"})
        self.assertIn("report", named["sandgate audit --decision "])
        self.assertEqual(named["sandgate audit stats --format "],
                         {"text", "json"})
        self.assertEqual(named["sandgate serve --log-level "],
                         {"debug", "info", "warn", "error"})

    def test_no_offer_after_dashdash(self):
        got = self.complete_many([["sandgate", "sandbox", "run", "--", "-"]])
        self.assertEqual(got, [[]])


if __name__ == "__main__":
    T.main()
