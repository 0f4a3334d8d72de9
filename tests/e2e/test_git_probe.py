#!/usr/bin/python3
"""
Attacks on an allow rule's `git: {push: [...], delete: ...}` (docs/policy.md,
"`git`: which refs a push may update") from inside a sandbox: a real `git`
client where possible, hand-built receive-pack POSTs otherwise, to a bare
repository served by `git http-backend` behind an origin of our own (the
one tests/e2e/test_git_push_refs.py uses). After each refused push the
origin's refs are read back (`git show-ref`) and an audit row with reason
git-ref-denied is looked for.

Found, and fixed (the tests failed before; the git check now reads the
verdict's allow_rule, the allow rule that matched, not the row's rule):
- test_report_mode_deny_rule_skips_git_check: in a `mode: report` policy a
  request that a deny rule matches kept that deny rule's name as its
  verdict's rule, so proxy_git.c could not find the allow rule's `git:` and
  the push to refs/heads/main landed (docs: "Report mode does not relax it").
- test_dlp_report_finding_skips_git_check: with `dlp: {mode: report}` a
  secret-shaped value in any request header (here `git -c
  http.extraHeader=...`) renames the verdict's rule to "dlp:..." before
  git_prepare runs; the push to refs/heads/main is not held and lands.
- test_dlp_report_unscannable_coding_skips_git_check: same root, with
  `Content-Encoding: br` (dlp report: "content-unscannable"): the encoded
  push is neither held nor refused as the doc's "a body with a
  Content-Encoding" says.

Tried and held (one line each):
- real git: push to main / tag outside / delete, with protocol.version=2,
  with push options (-o), with --atomic: refused whole, 403, row, refs kept.
- hand-built lists: refs/heads/Main, main/, main.lock, HEAD, refs/for/main,
  refs/heads//main, refs/heads/bot (no slash), refs/tags/bot-1 under heads,
  a 1025-byte ref, DEL / CR / NUL / 0xff bytes in the ref, a second command
  carrying a NUL, upper-case object ids, 0001 / 0002 / 0004 pkt-lines,
  a 65520 pkt-line, a push-cert after a command, shallow after a command,
  two zero ids: all refused with 403 git-ref-denied, main unchanged.
- an allowed first command followed by a forbidden third: refused whole.
- `refs/heads/bot/../main` matches the glob and is let through, but git
  itself refuses the funny refname: main unchanged (noted, not a finding).
- the body written one byte per TCP write, and pkt-lines split one byte per
  HTTP chunk (chunk extensions too): read whole, refused.
- an allowed push pipelined with a forbidden one in one write: the second
  is gated on its own; a refused push's unread pack is not parsed as a
  request.
- Content-Type alone, escaped/odd paths, gzip body: covered by
  test_git_push_refs.py test_08 (not repeated).
"""

import gzip
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_git_push_refs as R  # noqa: E402

GIT = R.GIT
BACKEND = R.BACKEND
ORIGIN_HOST = R.ORIGIN_HOST
HOST = "probe.git.test"
ZERO = "0" * 40

ENFORCE = """\
sandboxes:
  - id: gitprobe
    policy: gp
    source: [127.0.0.1/32]
policies:
  - name: gp
    allow:
      - host: {host}
        ports: [{tport}, {pport}]
        tls: intercept
        git:
          push: ["refs/heads/bot/*", "refs/tags/bot-*"]
          delete: false
    allow_private: [{origin}/32]
"""

# A policy being rolled out: report mode, a deny rule for a path the
# operator means to close later, the git rule as in ENFORCE.
REPORT = """\
sandboxes:
  - id: gitprobe
    policy: gp
    source: [127.0.0.1/32]
policies:
  - name: gp
    mode: report
    deny:
      - host: {host}
        paths: ["/repo.git/*"]
    allow:
      - host: {host}
        ports: [{tport}, {pport}]
        tls: intercept
        git:
          push: ["refs/heads/bot/*", "refs/tags/bot-*"]
          delete: false
    allow_private: [{origin}/32]
"""

DLP_REPORT = """\
sandboxes:
  - id: gitprobe
    policy: gp
    source: [127.0.0.1/32]
policies:
  - name: gp
    allow:
      - host: {host}
        ports: [{tport}, {pport}]
        tls: intercept
        git:
          push: ["refs/heads/bot/*", "refs/tags/bot-*"]
          delete: false
    dlp:
      mode: report
    allow_private: [{origin}/32]
"""

# An AWS access key id shape (AKIA + 16 base32), no documentation marker.
FAKE_AKID = "AKIAQWERTYUIOPASDFGH"


def pkt(line):
    if isinstance(line, str):
        line = line.encode("latin-1")
    return b"%04x" % (len(line) + 4) + line


class _Base(unittest.TestCase):
    POLICY = ENFORCE

    @classmethod
    def setUpClass(cls):
        for p in (GIT, BACKEND):
            if not os.access(p, os.X_OK):
                T.skip_file(p + " is not installed")
        cls.td = T.TempDir("sgtest-gitprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.genv = T.clean_env(HOME=d, GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false",
            GIT_AUTHOR_NAME="sgtest", GIT_AUTHOR_EMAIL="sgtest@example.test",
            GIT_COMMITTER_NAME="sgtest",
            GIT_COMMITTER_EMAIL="sgtest@example.test")
        cls.srv = os.path.join(d, "srv")
        cls.bare = os.path.join(cls.srv, "repo.git")
        cls.work = os.path.join(d, "work")
        os.makedirs(cls.srv)
        R.must([GIT, "init", "-q", "-b", "main", cls.work], cls.genv)
        cls.main0 = cls.commit("README", "probe\n", "first")
        R.must([GIT, "init", "-q", "--bare", "-b", "main", cls.bare], cls.genv)
        R.must([GIT, "-C", cls.bare, "config", "http.receivepack", "true"],
            cls.genv)
        R.must([GIT, "-C", cls.bare, "config", "receive.advertisePushOptions",
            "true"], cls.genv)
        R.must([GIT, "-C", cls.work, "push", "-q", cls.bare, "main",
            "main:refs/heads/bot/base"], cls.genv)
        cert, key = T.make_cert(d, "git.test", [HOST])
        cls.origin = R.BackendOrigin(cls.srv, cert, key, tls=True)
        cls.addClassCleanup(cls.origin.stop)
        cls.plain = R.BackendOrigin(cls.srv, cert, key, tls=False)
        cls.addClassCleanup(cls.plain.stop)
        cls.dns = T.Dnsmasq(d, [(HOST, ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"gp.yaml": cls.POLICY.format(
            host=HOST, tport=cls.origin.port, pport=cls.plain.port,
            origin=ORIGIN_HOST)},
            extra={"upstream": {"ca_bundle": cert}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.genv["GIT_SSL_CAINFO"] = cls.gw.ca_path()
        cls.url = "https://%s:%d/repo.git" % (HOST, cls.origin.port)

    @classmethod
    def commit(cls, name, content, msg):
        with open(os.path.join(cls.work, name), "w") as f:
            f.write(content)
        R.must([GIT, "-C", cls.work, "add", name], cls.genv)
        R.must([GIT, "-C", cls.work, "commit", "-q", "-m", msg], cls.genv)
        return R.must([GIT, "-C", cls.work, "rev-parse", "HEAD"], cls.genv)

    # -------------------------------------------------------------- helpers

    def push(self, *refspecs, extra=(), opts=()):
        return R.run([GIT, "-c", "http.proxy=" + self.gw.url,
            "-c", "http.version=HTTP/1.1"] + list(extra) +
            ["-C", self.work, "push", "--porcelain"] + list(opts) +
            [self.url] + list(refspecs), self.genv, timeout=120)

    def refs(self):
        """The origin's refs, read from its repository directly."""
        r = R.run([GIT, "--git-dir=" + self.bare, "show-ref"], self.genv)
        out = {}
        for line in r.stdout.decode().splitlines():
            oid, _, ref = line.partition(" ")
            out[ref] = oid
        return out

    def posts_since(self, since, srv=None):
        srv = srv or self.origin
        return [x for x in srv.seen()[since:] if x["method"] == "POST"]

    def denied_ids(self):
        return {x["id"] for x in self.gw.audit_rows(reason="git-ref-denied")}

    def new_denied(self, ids):
        return self.gw.wait_audit(decision="deny", reason="git-ref-denied",
            pred=lambda x: x["id"] not in ids)

    def assert_git_refused(self, r, since, ids, before):
        err = r.stderr.decode(errors="replace") + r.stdout.decode(
            errors="replace")
        self.assertNotEqual(r.returncode, 0, "the push succeeded: " + err)
        self.assertEqual(self.refs(), before, "the origin's refs changed")
        self.assertEqual(self.posts_since(since), [],
            "a refused push's POST reached the origin")
        rows = self.new_denied(ids)
        self.assertEqual(len(rows), 1, "no git-ref-denied row: %r" %
            self.gw.audit_rows()[-3:])
        self.assertTrue((rows[0]["path"] or "").endswith("git-receive-pack"))

    def raw_head(self, path, length=None, chunked=False, extra=()):
        h = "POST http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n" % (
            HOST, self.plain.port, path, HOST, self.plain.port)
        h += "Content-Type: application/x-git-receive-pack-request\r\n"
        for x in extra:
            h += x + "\r\n"
        if chunked:
            h += "Transfer-Encoding: chunked\r\n"
        else:
            h += "Content-Length: %d\r\n" % length
        return (h + "\r\n").encode()

    def raw_post(self, body, path="/repo.git/git-receive-pack", extra=()):
        c = T.Conn(self.gw.port)
        try:
            c.send(self.raw_head(path, len(body), extra=extra) + body)
            try:
                return c.read_response("POST")
            except (EOFError, ConnectionResetError):
                return None
        finally:
            c.close()

    def cmd(self, old, new, ref, caps=True):
        line = "%s %s %s" % (old, new, ref)
        if caps:
            line += "\0report-status"
        return pkt(line + "\n")


# ====================================================================== held

class GitProbeHeld(_Base):
    """mode: enforce, no dlp: what held."""

    def test_01_real_git_variants_refused(self):
        c = self.commit("v.txt", "variants\n", "variants")
        cases = [
            ("protocol v2", ("HEAD:refs/heads/main",),
                ["-c", "protocol.version=2"], ()),
            ("push option", ("HEAD:refs/heads/main",), [], ("-o", "x=1")),
            ("atomic, allowed first", ("HEAD:refs/heads/bot/at",
                "HEAD:refs/heads/release"), [], ("--atomic",)),
            ("tag under a branch glob name", ("HEAD:refs/tags/main",), [], ()),
            ("branch named like the tag glob", ("HEAD:refs/heads/bot-1",),
                [], ()),
            ("delete of an allowed ref", (":refs/heads/bot/base",), [], ()),
            ("force over main", ("+HEAD:refs/heads/main",), [], ()),
        ]
        for what, specs, extra, opts in cases:
            with self.subTest(what):
                before = self.refs()
                since = len(self.origin.seen())
                ids = self.denied_ids()
                r = self.push(*specs, extra=extra, opts=opts)
                self.assert_git_refused(r, since, ids, before)
        self.assertNotIn("refs/heads/bot/at", self.refs())
        # Sanity: an allowed push lands through the same gateway.
        r = self.push("HEAD:refs/heads/bot/ok")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.refs().get("refs/heads/bot/ok"), c)

    def test_02_hand_made_lists_refused(self):
        main = self.refs()["refs/heads/main"]
        bot = self.refs()["refs/heads/bot/base"]
        ok = self.cmd(ZERO, main, "refs/heads/bot/h1")
        cases = [
            ("case", self.cmd(main, bot, "refs/heads/Main") + b"0000"),
            ("trailing slash", self.cmd(main, bot, "refs/heads/main/")
                + b"0000"),
            ("lock suffix", self.cmd(main, bot, "refs/heads/main.lock")
                + b"0000"),
            ("HEAD", self.cmd(main, bot, "HEAD") + b"0000"),
            ("refs/for", self.cmd(ZERO, bot, "refs/for/main") + b"0000"),
            ("double slash", self.cmd(main, bot, "refs/heads//main")
                + b"0000"),
            ("bot without slash", self.cmd(ZERO, bot, "refs/heads/bot")
                + b"0000"),
            ("long ref", self.cmd(ZERO, bot, "refs/heads/bot/" + "a" * 1020)
                + b"0000"),
            ("DEL in ref", self.cmd(main, bot, "refs/heads/bot/\x7f")
                + b"0000"),
            ("CR in ref", self.cmd(main, bot, "refs/heads/bot/x\rrefs/"
                "heads/main") + b"0000"),
            ("0xff ref", self.cmd(main, bot, "refs/heads/\xffmain")
                + b"0000"),
            ("NUL on a later command", ok + self.cmd(main, bot,
                "refs/heads/bot/y\0refs/heads/main", caps=False) + b"0000"),
            ("upper-case oid", self.cmd(main.upper(), bot,
                "refs/heads/bot/base") + b"0000"),
            ("delim pkt", ok + b"0001" + self.cmd(main, bot,
                "refs/heads/main", caps=False) + b"0000"),
            ("response-end pkt", ok + b"0002" + b"0000"),
            ("empty pkt", ok + b"0004" + b"0000"),
            ("huge pkt", b"fff0" + b"x" * 100),
            ("push-cert later", ok + pkt("push-cert\n") + b"0000"),
            ("shallow later", ok + pkt("shallow %s\n" % main) + b"0000"),
            ("two zero ids", self.cmd(ZERO, ZERO, "refs/heads/bot/z")
                + b"0000"),
            ("allowed, allowed, forbidden", ok + self.cmd(ZERO, main,
                "refs/tags/bot-h", caps=False) + self.cmd(main, bot,
                "refs/heads/main", caps=False) + b"0000"),
            ("delete third", ok + self.cmd(bot, ZERO, "refs/heads/bot/base",
                caps=False) + b"0000"),
        ]
        for what, body in cases:
            with self.subTest(what):
                before = self.refs()
                since = len(self.plain.seen())
                ids = self.denied_ids()
                r = self.raw_post(body)
                self.assertIsNotNone(r, "no answer")
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                    "git-ref-denied")
                self.assertEqual(self.plain.seen()[since:], [])
                self.assertEqual(self.refs(), before)
                self.assertTrue(self.new_denied(ids))

    def test_03_dot_dot_ref_left_to_git(self):
        """refs/heads/bot/../main matches "refs/heads/bot/*" (the doc says
        * matches any run, / included): the gateway lets it go and git
        itself refuses the funny refname. main must not change."""
        main = self.refs()["refs/heads/main"]
        bot = self.refs()["refs/heads/bot/base"]
        before = self.refs()
        self.raw_post(self.cmd(main, bot, "refs/heads/bot/../main") +
            b"0000")
        self.assertEqual(self.refs(), before)

    def test_04_split_writes_and_chunks(self):
        main = self.refs()["refs/heads/main"]
        bot = self.refs()["refs/heads/bot/base"]
        body = self.cmd(ZERO, bot, "refs/heads/bot/s1") + self.cmd(
            main, bot, "refs/heads/main", caps=False) + b"0000" + b"PACK"
        for what in ("tcp", "chunks", "chunks+ext"):
            with self.subTest(what):
                before = self.refs()
                since = len(self.plain.seen())
                ids = self.denied_ids()
                c = T.Conn(self.gw.port)
                try:
                    if what == "tcp":
                        c.send(self.raw_head("/repo.git/git-receive-pack",
                            len(body)))
                        data = body
                    else:
                        c.send(self.raw_head("/repo.git/git-receive-pack",
                            chunked=True))
                        ext = ";x=%s" % ("y" * 40) if "ext" in what else ""
                        data = b"".join(b"1%s\r\n%c\r\n" % (ext.encode(), b)
                            for b in body) + b"0\r\n\r\n"
                    for i in range(len(data)):
                        try:
                            c.send(data[i:i + 1])
                        except (BrokenPipeError, ConnectionResetError):
                            break
                        if i % 16 == 0:
                            time.sleep(0.002)
                    r = c.read_response("POST")
                finally:
                    c.close()
                self.assertEqual(r.status, 403, r)
                self.assertEqual(self.plain.seen()[since:], [])
                self.assertEqual(self.refs(), before)
                self.assertTrue(self.new_denied(ids))

    def test_05_pipelined(self):
        """An allowed push then a forbidden one in one write; a refused
        push's unread body must not be parsed as a request."""
        main = self.refs()["refs/heads/main"]
        bot = self.refs()["refs/heads/bot/base"]
        b1 = self.cmd(ZERO, bot, "refs/heads/bot/p1") + b"0000"
        b2 = self.cmd(main, bot, "refs/heads/main") + b"0000"
        before = self.refs()
        ids = self.denied_ids()
        c = T.Conn(self.gw.port)
        try:
            c.send(self.raw_head("/repo.git/git-receive-pack", len(b1)) + b1 +
                self.raw_head("/repo.git/git-receive-pack", len(b2)) + b2)
            r1 = c.read_response("POST")
            r2 = c.read_response("POST")
        finally:
            c.close()
        self.assertEqual(r1.status, 200, r1)
        self.assertEqual(r2.status, 403, r2)
        self.assertEqual(self.refs().get("refs/heads/main"),
            before["refs/heads/main"])
        self.assertTrue(self.new_denied(ids))
        # A refused push whose "pack" is a forbidden push request.
        inner = self.raw_head("/repo.git/git-receive-pack", len(b2)) + b2
        outer = b2 + inner
        since = len(self.plain.seen())
        c = T.Conn(self.gw.port)
        try:
            c.send(self.raw_head("/repo.git/git-receive-pack", len(outer)) +
                outer)
            r = c.read_response("POST")
            self.assertEqual(r.status, 403, r)
        finally:
            c.close()
        self.assertEqual(self.plain.seen()[since:], [])
        self.assertEqual(self.refs().get("refs/heads/main"),
            before["refs/heads/main"])


# ================================================================= findings

class GitProbeReportMode(_Base):
    """A policy in mode: report whose deny rule matches the push's path."""
    POLICY = REPORT

    def test_report_mode_deny_rule_skips_git_check(self):
        """
        Promise (docs/policy.md, "git"): "Report mode does not relax it (the
        refs a push may touch are an integrity check ...)"; and the report
        mode table: "`git-ref-denied` ... **denied**: a push, once made,
        rewrites the origin's history".
        Sent: `git push https://probe.git.test:PORT/repo.git
        HEAD:refs/heads/main` through the gateway; the policy is in
        `mode: report` with a deny rule `paths: ["/repo.git/*"]` for the
        host (reported, so it passes) and the allow rule with
        `git: push: [refs/heads/bot/*]`.
        Happened: the push to main lands (git exits 0, the origin's main
        moves); no git-ref-denied row. The verdict keeps the deny rule's
        name ("gp:deny[0]": "A reported verdict names the rule that would
        have denied"), and git_prepare finds the git: scope by that name.
        """
        self.commit("r.txt", "report mode\n", "report mode")
        before = self.refs()
        ids = self.denied_ids()
        since = len(self.origin.seen())
        r = self.push("HEAD:refs/heads/main")
        self.assertEqual(self.refs().get("refs/heads/main"),
            before["refs/heads/main"],
            "a push to refs/heads/main landed under git: push: "
            "[refs/heads/bot/*] in a report-mode policy (git exit %d, rows "
            "%r)" % (r.returncode, [(x["decision"], x["rule"], x["reason"])
                for x in self.gw.audit_rows()[-2:]]))
        self.assert_git_refused(r, since, ids, before)


class GitProbeDlpReport(_Base):
    """The git rule's policy has dlp: {mode: report}."""
    POLICY = DLP_REPORT

    def test_dlp_report_finding_skips_git_check(self):
        """
        Promise (docs/policy.md, "git"): "refuses the push, with 403 and
        reason `git-ref-denied`, when any command creates or updates a ref
        that no `push` glob matches"; dlp in report mode only audits.
        Sent: `git -c http.extraHeader="X-Note: AKIAQWERTYUIOPASDFGH" push
        ... HEAD:refs/heads/main` (a header the dlp rule
        aws-access-key-id matches; dlp mode report).
        Happened: the push to main lands; no git-ref-denied row. dlp's
        finding() overwrites s->verdict.rule with "dlp:..." in
        request_cred_check, before forward_prepare -> git_prepare, which
        then finds no allow rule by that name and does not hold the push.
        """
        self.commit("d.txt", "dlp report\n", "dlp report")
        before = self.refs()
        ids = self.denied_ids()
        since = len(self.origin.seen())
        r = self.push("HEAD:refs/heads/main",
            extra=["-c", "http.extraHeader=X-Note: " + FAKE_AKID])
        self.assertEqual(self.refs().get("refs/heads/main"),
            before["refs/heads/main"],
            "a push to refs/heads/main landed under git: push: "
            "[refs/heads/bot/*] because a header held a secret-shaped value "
            "under dlp: report (git exit %d, rows %r)" % (r.returncode,
                [(x["decision"], x["rule"], x["reason"])
                 for x in self.gw.audit_rows()[-2:]]))
        self.assert_git_refused(r, since, ids, before)

    def test_dlp_report_unscannable_coding_skips_git_check(self):
        """
        Promise (docs/policy.md, "git"): "Refused too: a body with a
        `Content-Encoding` (it cannot be read ...)".
        Sent (plain http, absolute form): POST
        /repo.git/git-receive-pack, Content-Type
        application/x-git-receive-pack-request, `Content-Encoding: br`,
        body = the pkt-line "<main> <bot> refs/heads/main\\0report-status"
        + "0000" (gzip-compressed here, labelled br: the coding is what
        matters).
        Happened: the request goes to the origin (no 403, no
        git-ref-denied row): dlp report's unscannable() renames the
        verdict's rule "dlp:content-unscannable header -" before
        git_prepare, which then neither holds nor refuses it.
        """
        main = self.refs()["refs/heads/main"]
        bot = self.refs()["refs/heads/bot/base"]
        body = gzip.compress(self.cmd(main, bot, "refs/heads/main") +
            b"0000")
        since = len(self.plain.seen())
        ids = self.denied_ids()
        r = self.raw_post(body, extra=("Content-Encoding: br",))
        self.assertEqual(self.posts_since(since, self.plain), [],
            "an encoded push reached the origin unread (answer %r)" % (r,))
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 403, r)
        self.assertTrue(self.new_denied(ids))


if __name__ == "__main__":
    T.main()
