#!/usr/bin/python3
"""
End-to-end test of `sandgate policy replay` (issue 26 points 6 and 7;
docs/policy.md "Replaying the audit log"). A real gateway records a "day"
in two halves -- plain HTTP through the explicit proxy, CONNECT tunnels,
SOCKS5, DNS queries, an IP literal, from three sandboxes (one by source
address, two by proxy token) -- with names resolved by dnsmasq to loopback
origins. Then the log is replayed against candidate policy directories
with known differences: one that removes an allow (allow -> deny, exit 1),
one that adds one (deny -> allow: exit 0, 1 with --fail-on deny-to-allow),
one that changes only allow_private (the name rows become undecidable,
never guessed), an identical copy (nothing changes), and a broken one
(exit 2, FILE:LINE:COL). Groups and counts are asserted exactly, and
--since, --sandbox and --format json are exercised.
"""

import datetime
import json
import os
import pwd
import shutil
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402
import test_fleet as F  # noqa: E402  (its PostgreSQL, for --store)

TOK_AGENT = "tok-agent-3f9c1d07b2"
TOK_CI = "tok-ci-a81e44c0d95b"


def sandboxes_doc():
    return {"sandboxes": [
        T.local_sandbox("build", sid="local", source="127.0.0.1/32"),
        T.token_sandbox("agent", TOK_AGENT, "agent"),
        T.token_sandbox("ci", TOK_CI, "build"),
    ]}


def build_policy(pa, pb, files=True, blocked=False,
                 private="[127.0.0.2/32, 127.0.0.3/32]"):
    text = "policies:\n  - name: build\n    allow:\n"
    if files:
        text += "      - host: files.pkgs.test\n        ports: [%d]\n" % pa
    text += "      - host: mirror.pkgs.test\n        ports: [%d]\n" % pb
    text += ("      - host: api.other.test\n        ports: [%d]\n"
             "        methods: [GET]\n        paths: [\"/v1/*\"]\n" % pa)
    if blocked:
        text += "      - host: blocked.other.test\n        ports: [%d]\n" % pa
    text += "    allow_private: %s\n" % private
    return text


def agent_policy(pa):
    return ("policies:\n  - name: agent\n    allow:\n"
            "      - host: api.other.test\n        ports: [%d]\n"
            "    allow_private: [127.0.0.2/32]\n" % pa)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class PolicyReplayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.cert, cls.key = T.make_cert(d, cn="mirror.pkgs.test",
            names=["mirror.pkgs.test"])
        cls.http = T.Origin("plain", host="127.0.0.2")
        cls.addClassCleanup(cls.http.stop)
        cls.tls = T.Origin("tls", host="127.0.0.3", cert=cls.cert, key=cls.key)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [("files.pkgs.test", "127.0.0.2"),
                                ("mirror.pkgs.test", "127.0.0.3"),
                                ("api.other.test", "127.0.0.2"),
                                ("blocked.other.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        cls.dport = T.free_port(udp_too=True)
        cls.sport = T.free_port()
        cls.pa, cls.pb = cls.http.port, cls.tls.port
        cls.gw = T.Gateway(d, cls.dns, {
            "10-sandboxes.yaml": sandboxes_doc(),
            "20-build.yaml": build_policy(cls.pa, cls.pb),
            "30-agent.yaml": agent_policy(cls.pa)},
            extra={"listen": {"dns": "127.0.0.1:%d" % cls.dport,
                              "socks5": "127.0.0.1:%d" % cls.sport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())
        cls.record_day()
        # The log is complete once the last request's row is in.
        n = cls.expected_rows
        deadline = time.time() + 10 * T.SLOW
        while len(cls.gw.audit_rows()) < n and time.time() < deadline:
            time.sleep(0.1)
        cls.candidates = {}
        for name, files, blocked, private in (
                ("same", True, False, "[127.0.0.2/32, 127.0.0.3/32]"),
                ("no-files", False, False, "[127.0.0.2/32, 127.0.0.3/32]"),
                ("plus-blocked", True, True, "[127.0.0.2/32, 127.0.0.3/32]"),
                ("private", True, False, "[127.0.0.2/32]")):
            c = os.path.join(d, "cand-" + name)
            os.makedirs(c)
            shutil.copy(os.path.join(cls.gw.policy_dir, "10-sandboxes.yaml"), c)
            shutil.copy(os.path.join(cls.gw.policy_dir, "30-agent.yaml"), c)
            with open(os.path.join(c, "20-build.yaml"), "w") as f:
                f.write(build_policy(cls.pa, cls.pb, files, blocked, private))
            cls.candidates[name] = c

    # ------------------------------------------------------------ the day

    @classmethod
    def get(cls, host, path, auth=None, port=None):
        args = ["-U", auth] if auth else []
        return T.curl("http://%s:%d%s" % (host, port or cls.pa, path),
            proxy=cls.gw.url, args=args).status

    @classmethod
    def record_day(cls):
        pa, pb = cls.pa, cls.pb
        agent, ci = "agent:" + TOK_AGENT, "ci:" + TOK_CI
        got = []
        # The first half ("yesterday").
        got += [cls.get("files.pkgs.test", "/a/1"),
                cls.get("files.pkgs.test", "/a/2"),
                cls.get("blocked.other.test", "/x/1"),
                cls.get("api.other.test", "/v1/early", agent)]
        time.sleep(0.05)
        cls.mid = utc_now()
        time.sleep(0.05)
        # The second half.
        got += [cls.get("files.pkgs.test", "/b/%d" % i) for i in range(3)]
        got += [cls.get("blocked.other.test", "/x/%d" % i) for i in (2, 3)]
        got += [cls.get("api.other.test", "/v1/a"),     # path rule: allow
                cls.get("api.other.test", "/v2/a"),     # outside it: deny
                cls.get("127.0.0.2", "/by-ip")]          # no cidr rule: deny
        for i in range(2):   # CONNECT, TLS passed through
            r = T.curl("https://mirror.pkgs.test:%d/simple/%d" % (pb, i),
                proxy=cls.gw.url, args=["--cacert", cls.cert])
            got.append(r.status)
        r = T.curl("http://files.pkgs.test:%d/socks" % pa,
            args=["--socks5-hostname", "127.0.0.1:%d" % cls.sport])
        got.append(r.status)
        got += [cls.get("api.other.test", "/v1/b", agent),
                cls.get("api.other.test", "/v1/c", agent),
                cls.get("files.pkgs.test", "/agent", agent),  # agent: deny
                cls.get("files.pkgs.test", "/ci", ci),
                cls.get("blocked.other.test", "/ci", ci)]
        for name in ("files.pkgs.test", "blocked.other.test"):
            q = H.dig(["@127.0.0.1", "-p", str(cls.dport), name, "A"])
            got.append(q.status)
        cls.statuses = got
        cls.expected_rows = len(got)

    # ------------------------------------------------------------ helpers

    def replay(self, cand, *args):
        return T.run_sandgate("policy", "replay", "-c", self.gw.cfg_path,
            *(list(args) + [self.candidates.get(cand, cand)]))

    def replay_json(self, cand, *args):
        r = self.replay(cand, "--format", "json", *args)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        return r.returncode, json.loads(r.stdout)

    @staticmethod
    def groups(doc, key="changes"):
        """(sandbox, host, port, direction or why, count) in the order
        printed: by direction, sandbox, host, port (none first)."""
        return [(g["sandbox"], g["host"], g["port"], g.get("direction")
                 or g.get("why"), g["count"]) for g in doc[key]]

    # ------------------------------------------------------------ the tests

    def test_0_the_day_was_recorded(self):
        self.assertEqual(self.statuses, [200, 200, 403, 200,
            200, 200, 200, 403, 403, 200, 403, 403, 200, 200, 200,
            200, 200, 403, 200, 403, "NOERROR", "NXDOMAIN"])
        self.assertEqual(len(self.gw.audit_rows()), self.expected_rows)

    def test_identical_candidate_changes_nothing(self):
        r = self.replay("same")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("22 rows read: 22 decided again (22 unchanged, "
                      "0 allow -> deny, 0 deny -> allow), 0 undecidable, "
                      "0 skipped", r.stdout)
        self.assertNotIn("->  ", r.stdout)
        for fail_on in ("any", "deny-to-allow"):
            r = self.replay("same", "--fail-on", fail_on)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_removed_allow_is_allow_to_deny(self):
        pa = self.pa
        r = self.replay("no-files")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        # text: the group, its count, first/last and one example
        self.assertIn("allow -> deny:\n", r.stdout)
        self.assertRegex(r.stdout, r"\n  local  files\.pkgs\.test:%d  6 rows  "
            r"\S+Z \.\. \S+Z\n    e\.g\. http GET /a/1: then allow "
            r"\(build:allow\[0\]\), now deny \(default-deny: policy-deny\)\n"
            % pa)
        self.assertIn("22 rows read: 22 decided again (14 unchanged, "
                      "8 allow -> deny, 0 deny -> allow)", r.stdout)
        rc, doc = self.replay_json("no-files")
        self.assertEqual(rc, 1)
        self.assertEqual((doc["rows"], doc["allow_to_deny"],
                          doc["deny_to_allow"], doc["undecidable"],
                          doc["failed"]), (22, 8, 0, 0, True))
        # 5 plain HTTP requests and 1 through SOCKS5, the DNS answer, ci's
        self.assertEqual(self.groups(doc), [
            ("ci", "files.pkgs.test", pa, "allow-to-deny", 1),
            ("local", "files.pkgs.test", None, "allow-to-deny", 1),
            ("local", "files.pkgs.test", pa, "allow-to-deny", 6)])
        self.assertEqual(doc["undecidable_groups"], [])
        g = [g for g in doc["changes"] if g["port"] is None][0]
        self.assertEqual(g["example"]["method"], "A")
        self.assertEqual(g["example"]["now"], {"decision": "deny",
            "rule": "default-deny", "reason": "policy-deny",
            "unchecked": None})
        self.assertEqual(g["example"]["then"]["rule"], "build:allow[0]")
        # --fail-on chooses what fails
        self.assertEqual(self.replay("no-files", "--fail-on", "none")
                         .returncode, 0)
        self.assertEqual(self.replay("no-files", "--fail-on",
                         "deny-to-allow").returncode, 0)
        self.assertEqual(self.replay("no-files", "--fail-on", "any")
                         .returncode, 1)

    def test_since_and_sandbox_select_rows(self):
        pa = self.pa
        rc, doc = self.replay_json("no-files", "--since", self.mid)
        self.assertEqual(rc, 1)
        self.assertEqual(doc["rows"], 18)   # 4 rows were before mid
        self.assertEqual(self.groups(doc), [
            ("ci", "files.pkgs.test", pa, "allow-to-deny", 1),
            ("local", "files.pkgs.test", None, "allow-to-deny", 1),
            ("local", "files.pkgs.test", pa, "allow-to-deny", 4)])
        rc, doc = self.replay_json("no-files", "--until", self.mid)
        self.assertEqual((rc, doc["rows"]), (1, 4))
        self.assertEqual(self.groups(doc), [
            ("local", "files.pkgs.test", pa, "allow-to-deny", 2)])
        # agent's policy is the same in the candidate: nothing changes
        rc, doc = self.replay_json("no-files", "--sandbox", "agent")
        self.assertEqual((rc, doc["rows"], doc["unchanged"], doc["changes"]),
                         (0, 4, 4, []))
        rc, doc = self.replay_json("no-files", "--sandbox", "ci")
        self.assertEqual((rc, doc["rows"]), (1, 2))
        self.assertEqual(self.groups(doc), [
            ("ci", "files.pkgs.test", pa, "allow-to-deny", 1)])
        rc, doc = self.replay_json("no-files", "--since", "1s", "--sandbox",
                                   "local")
        self.assertLessEqual(doc["rows"], 16)

    def test_added_allow_is_deny_to_allow(self):
        pa = self.pa
        r = self.replay("plus-blocked")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("deny -> allow:\n", r.stdout)
        self.assertIn("now allow (build:allow[3]: allowed) if its addresses "
                      "pass (not seen then)", r.stdout)
        rc, doc = self.replay_json("plus-blocked")
        self.assertEqual((rc, doc["allow_to_deny"], doc["deny_to_allow"],
                          doc["unchanged"], doc["failed"]),
                         (0, 0, 5, 17, False))
        self.assertEqual(self.groups(doc), [
            ("ci", "blocked.other.test", pa, "deny-to-allow", 1),
            ("local", "blocked.other.test", None, "deny-to-allow", 1),
            ("local", "blocked.other.test", pa, "deny-to-allow", 3)])
        for g in doc["changes"]:
            self.assertEqual(g["example"]["then"]["reason"], "policy-deny")
            self.assertEqual(g["example"]["now"]["unchecked"], "addresses")
        r = self.replay("plus-blocked", "--fail-on", "deny-to-allow")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(self.replay("plus-blocked", "--fail-on", "any")
                         .returncode, 1)

    def test_allow_private_change_is_undecidable(self):
        pa, pb = self.pa, self.pb
        rc, doc = self.replay_json("private")
        self.assertEqual(rc, 0)
        self.assertEqual(doc["changes"], [])
        # every row the name's addresses decided then; never guessed
        self.assertEqual(self.groups(doc, "undecidable_groups"), [
            ("ci", "files.pkgs.test", pa, "addresses", 1),
            ("local", "api.other.test", pa, "addresses", 1),
            ("local", "files.pkgs.test", None, "addresses", 1),
            ("local", "files.pkgs.test", pa, "addresses", 6),
            ("local", "mirror.pkgs.test", pb, "addresses", 2)])
        self.assertEqual((doc["undecidable"], doc["decided"],
                          doc["unchanged"]), (11, 11, 11))
        for g in doc["undecidable_groups"]:
            self.assertIsNone(g["example"]["now"])
            self.assertIn("allow_private", g["detail"])
        r = self.replay("private", "--fail-on", "any")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("undecidable (the row does not hold what the decision "
                      "needs):\n", r.stdout)

    def test_candidate_without_the_sandboxes(self):
        """The candidate replaces the policies whole: a static sandbox it
        does not define has no identity under it."""
        c = os.path.join(self.td.path, "cand-nosb")
        os.makedirs(c, exist_ok=True)
        for f in ("20-build.yaml", "30-agent.yaml"):
            shutil.copy(os.path.join(self.gw.policy_dir, f), c)
        rc, doc = self.replay_json(c, "--sandbox", "agent")
        self.assertEqual(rc, 1)
        self.assertEqual(self.groups(doc), [
            ("agent", "api.other.test", self.pa, "allow-to-deny", 3)])
        self.assertEqual(doc["changes"][0]["example"]["now"]["rule"],
                         "no-identity")
        # given with the sandboxes file as a second path: the same as now
        rc, doc = self.replay_json(c, "--sandbox", "agent", os.path.join(
            self.gw.policy_dir, "10-sandboxes.yaml"))
        self.assertEqual((rc, doc["unchanged"]), (0, 4))

    def test_broken_candidate_and_usage(self):
        c = os.path.join(self.td.path, "cand-broken")
        os.makedirs(c, exist_ok=True)
        shutil.copy(os.path.join(self.gw.policy_dir, "10-sandboxes.yaml"), c)
        with open(os.path.join(c, "20-build.yaml"), "w") as f:
            f.write("policies:\n  - name: build\n    allow:\n"
                    "      - host: files.pkgs.test\n        portz: [80]\n")
        r = self.replay(c)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"20-build\.yaml:5:9: .*portz")
        self.assertEqual(r.stdout, "")
        r = self.replay(os.path.join(self.td.path, "no-such-dir"))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("no-such-dir", r.stderr)
        for args in (["--fail-on", "sometimes"], ["--format", "xml"],
                     ["--since", "yesterday"], ["--sandbox", "Bad_Id"]):
            r = self.replay("same", *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)
        r = T.run_sandgate("policy", "replay", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 2, r.stderr)


def store_skip_reason():
    """Why the --store test cannot run here, or None."""
    for exe in (F.PG_BIN + "/initdb", F.PG_BIN + "/postgres", F.PSQL,
                F.SETPRIV):
        if not os.access(exe, os.X_OK):
            return exe + " is missing (postgresql-15, util-linux)"
    if os.geteuid() != 0:
        return "needs root to run PostgreSQL as " + F.PG_USER
    try:
        pwd.getpwnam(F.PG_USER)
    except KeyError:
        return "no user " + F.PG_USER
    return None


class StoreReplayTest(unittest.TestCase):
    """--store: a gateway ships its rows (audit.ship) to a PostgreSQL this
    test starts; replay reads them from there and finds what it finds in
    the gateway's own audit.db."""

    def test_replay_from_the_fleet_store(self):
        why = store_skip_reason()
        if why:
            self.skipTest(why)
        td = T.TempDir("sgreplay-store-")
        self.addCleanup(td.cleanup)
        d = td.path
        os.chmod(d, 0o755)
        pg = F.Postgres(d)
        self.addCleanup(pg.stop)
        pg.start()
        self.assertEqual(pg.psql("postgres", "CREATE DATABASE fleet")
                         .returncode, 0)
        r = T.run_sandgate("audit", "ship", "--init", "--store", pg.url_tcp())
        self.assertEqual(r.returncode, 0, r.stderr)
        http = T.Origin("plain", host="127.0.0.2")
        self.addCleanup(http.stop)
        dns = T.Dnsmasq(d, [("files.pkgs.test", "127.0.0.2"),
                            ("blocked.other.test", "127.0.0.2")])
        self.addCleanup(dns.stop)
        pa = http.port
        gw = T.Gateway(d, dns, {
            "10-sandboxes.yaml": sandboxes_doc(),
            "20-build.yaml": build_policy(pa, pa + 1),
            "30-agent.yaml": agent_policy(pa)},
            extra={"audit": {"ship": {"url": pg.url_tcp(),
                                      "gateway": "gw-replay"}}})
        gw.start()
        self.addCleanup(gw.stop)
        got = [T.curl("http://files.pkgs.test:%d/s/%d" % (pa, i),
                      proxy=gw.url).status for i in range(3)]
        got += [T.curl("http://blocked.other.test:%d/s" % pa,
                       proxy=gw.url).status]
        got += [T.curl("http://files.pkgs.test:%d/ci" % pa, proxy=gw.url,
                       args=["-U", "ci:" + TOK_CI]).status]
        self.assertEqual(got, [200, 200, 200, 403, 200])
        sql = ("SELECT count(*) FROM sandgate.events WHERE kind = 'http' "
               "AND gateway = 'gw-replay'")
        deadline = time.time() + 20 * T.SLOW
        while pg.rows(sql) != [["5"]] and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(pg.rows(sql), [["5"]], gw.log_tail())
        cand = os.path.join(d, "cand")
        os.makedirs(cand)
        for f in ("10-sandboxes.yaml", "30-agent.yaml"):
            shutil.copy(os.path.join(gw.policy_dir, f), cand)
        with open(os.path.join(cand, "20-build.yaml"), "w") as f:
            f.write(build_policy(pa, pa + 1, files=False))
        docs = {}
        for where in ("store", "db"):
            args = ["policy", "replay", "-c", gw.cfg_path, "--format", "json",
                    cand]
            if where == "store":
                args += ["--store", pg.url_tcp()]
            r = T.run_sandgate(*args)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            docs[where] = json.loads(r.stdout)
        self.assertEqual(PolicyReplayTest.groups(docs["store"]), [
            ("ci", "files.pkgs.test", pa, "allow-to-deny", 1),
            ("local", "files.pkgs.test", pa, "allow-to-deny", 3)])
        self.assertEqual((docs["store"]["rows"], docs["store"]["unchanged"]),
                         (5, 1))
        for doc in docs.values():
            for g in doc["changes"]:
                g.pop("first")
                g.pop("last")
        self.assertEqual(docs["store"], docs["db"])
        r = T.run_sandgate("policy", "replay", "-c", gw.cfg_path, "--format",
                           "json", "--store", pg.url_tcp(), "--sandbox", "ci",
                           cand)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(PolicyReplayTest.groups(json.loads(r.stdout)), [
            ("ci", "files.pkgs.test", pa, "allow-to-deny", 1)])
        r = T.run_sandgate("policy", "replay", "-c", gw.cfg_path, "--store",
                           "mysql://x", cand)
        self.assertEqual(r.returncode, 2, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
