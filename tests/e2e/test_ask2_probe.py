#!/usr/bin/python3
"""
Probes of mode: ask (docs/approvals.md, docs/admin-api.md, docs/config.md
"approval"), second round, as a sandbox trying to get traffic through that
no operator approved, or an approval to cover more than it was asked.

Found (tests fail on the probed binary):
- approvals are keyed by the sandbox's id string and outlive the sandbox:
  a sandbox registered after DELETE /v1/sandboxes/ID under the same id
  (other source, other policy) rides on the removed one's --for answer
  (test_reregistered_id_does_not_inherit_for_answer) and joins its pending
  question, whose approve sends the new sandbox's request on
  (test_reregistered_id_does_not_join_old_question);
- an answer sent after a question's deadline (before the worker's 500 ms
  tick collects it) is taken (200) and its held request goes to the
  origin instead of approval-timeout (test_answer_after_deadline);
- `sandgate approve ID --always --scope S` writes and reloads S without
  the API's checks: a scope that does not cover the question (another
  host) is written (test_always_scope_not_covering_question), and a scope
  the API's grammar refuses (`host:PORT, 22`) becomes `ports: [PORT, 22]`
  (test_always_scope_the_api_refuses);
- `sandgate top` cuts a question's destination to 40 characters: a long
  name under evil.test shows as api.trusted.example.com.aaaa..., port and
  registrable domain hidden, and `a` approves it
  (test_top_shows_the_questions_destination).

What held (passing tests kept where no other e2e file covers it):
- a held request of a registered sandbox removed before the approve is
  refused 407 no-identity;
- an approval does not open an internal address: a name resolving to an
  address outside allow_private, approved (also --for), and an internal IP
  literal approved, never reach it;
- a CONNECT tunnel an answer opened refuses an HTTP request inside it for
  another Host;
- answering twice (deny then approve --for) is 404 and changes nothing;
- approval.max_pending is per sandbox: one at its limit (429
  approval-limit) does not stop another sandbox's question;
- a DNS question approved once does not answer the HTTP question for the
  name; approved --for (default scope) it covers HTTP on any port (rule
  `approval`); a host:port scope cannot cover a DNS question (400);
- (tried, not kept) absolute-form hosts with ESC, U+202E, raw UTF-8 (IDN),
  U+3002 dots and CONNECT with ESC are 400 bad-request before any question;
  `%0d%0a` is invalid-host; A.TEST., 127.1, [::1], x_y.test, xn-- names
  are asked in canonical form (a.test, 127.0.0.1, ::1) and the JSON
  listing and `sandgate approvals` print them whole; a client that leaves
  a held request still counts as waiting (the gateway does not read its
  FIN while parked) and on approve its request is sent to the origin --
  the operator did approve it; reloads while pending are covered by
  test_reload_probe.py and test_listener_probe.py; the notifier's JSON by
  test_notify_probe.py.
"""

import concurrent.futures
import os
import socket
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
INTERNAL_HOST = "127.0.0.9"     # a loopback address no allow_private covers
VICTIM_SRC = "127.0.0.3"

admin = T.admin

NAMES = ("reuse.test", "gone.test", "inner.test", "late0.test", "late1.test",
         "late2.test", "twice.test", "tun.test", "other.test", "always.test",
         "dnsonly.test", "pending.test")


def policy(port):
    return ("sandboxes:\n"
            "  - id: agent\n"
            "    policy: asking\n"
            "    source: [127.0.0.1/32]\n"
            "  - id: victim\n"
            "    policy: asking\n"
            "    source: [%s/32]\n"
            "policies:\n"
            "  - name: asking\n"
            "    mode: ask\n"
            "    allow:\n"
            "      - host: ok.test\n"
            "        ports: [%d]\n"
            "    allow_private: [%s/32]\n"
            "  - name: strict\n"
            "    mode: ask\n"
            "    allow_private: [%s/32]\n" % (VICTIM_SRC, port, ORIGIN_HOST,
                                             ORIGIN_HOST))


def dns_query(name, qid):
    hdr = struct.pack(">HHHHHH", qid & 0xffff, 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(l)]) + l.encode() for l in name.split("."))
    return hdr + body + b"\0" + struct.pack(">HH", 1, 1)


class _Base(unittest.TestCase):
    TIMEOUT = "4s"
    WORKERS = 2
    EXTRA = {}

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-ask2-probe-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.inner = T.Origin("inner", host=INTERNAL_HOST)
        cls.addClassCleanup(cls.inner.stop)
        recs = [(n, ORIGIN_HOST) for n in ("ok.test",) + NAMES]
        recs.append(("internal.test", INTERNAL_HOST))
        cls.dns = T.Dnsmasq(d, recs)
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.dport = T.free_port(udp_too=True)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policy(cls.origin.port)},
                           extra={"listen": {"admin": cls.sock,
                                             "dns": "127.0.0.1:%d" % cls.dport},
                                  "approval": dict({"timeout": cls.TIMEOUT},
                                                   **cls.EXTRA)},
                           workers=cls.WORKERS)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw.wait_admin(cls.sock)
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        cls.addClassCleanup(cls.pool.shutdown)

    # ---------------------------------------------------------------- helpers

    def pending(self):
        st, doc = admin(self.sock, "GET", "/v1/approvals")
        self.assertEqual(st, 200, doc)
        return doc["approvals"]

    def question(self, host, sandbox=None, port=None, timeout=10):
        deadline = time.time() + timeout * T.SLOW
        while time.time() < deadline:
            for q in self.pending():
                if q["host"] == host and (sandbox is None or
                                          q["sandbox"] == sandbox) and \
                        (port is None or q["port"] == port):
                    return q
            time.sleep(0.05)
        self.fail("no question for %s (%s): %s" % (host, sandbox,
                                                    self.pending()))

    def answer(self, qid, ans, **kw):
        body = {"answer": ans}
        body.update(kw)
        return admin(self.sock, "POST", "/v1/approvals/%d" % qid, body)

    def get(self, host, path, port=None, hosthdr=None):
        port = self.origin.port if port is None else port
        return ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s\r\n"
                "Connection: close\r\n\r\n" % (host, port, path,
                                               hosthdr or host)).encode()

    def bg(self, host, path, source=None, port=None):
        return self.pool.submit(T.raw_request, self.gw.port,
                                self.get(host, path, port), source=source,
                                timeout=30)

    def reason(self, r):
        return r.header("x-sandgate-reason") if r is not None else None

    def register(self, sid, source, pol):
        return admin(self.sock, "POST", "/v1/sandboxes",
                     {"id": sid, "policy": pol, "source": source})

    def remove(self, sid):
        return admin(self.sock, "DELETE", "/v1/sandboxes/" + sid)


class SandboxIdentityProbe(_Base):
    """An answer, and a question, belong to the sandbox they were for."""

    def test_reregistered_id_does_not_inherit_for_answer(self):
        """approvals.md: "--for DURATION also decides the sandbox's later
        requests in --scope"; admin-api.md DELETE /v1/sandboxes/{id}
        removes a registered sandbox ("Its placeholders stop working at
        once"). A sandbox registered later under the same id -- another
        source address, another policy -- is another sandbox: an operator
        who approved job-1's reuse.test for an hour did not approve it for
        whatever is started next as job-1 (`sandbox run --id job-1`).
        Sent: job-1 (127.0.0.4, policy asking) GET reuse.test, approved
        --for 1h; DELETE job-1; POST job-1 again (127.0.0.5, policy strict);
        GET http://reuse.test:PORT/r2 from 127.0.0.5. Observed: 200 at once,
        row decision allow, rule `approval` -- no question asked."""
        st, doc = self.register("job-1", "127.0.0.4", "asking")
        self.assertEqual(st, 201, doc)
        f = self.bg("reuse.test", "/r1", source="127.0.0.4")
        q = self.question("reuse.test", "job-1")
        st, doc = self.answer(q["id"], "approve", **{"for": "1h"})
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result().status, 200)
        st, doc = self.remove("job-1")
        self.assertEqual(st, 200, doc)
        st, doc = self.register("job-1", "127.0.0.5", "strict")
        self.assertEqual(st, 201, doc)
        self.addCleanup(self.remove, "job-1")
        t0 = time.time()
        r = T.raw_request(self.gw.port, self.get("reuse.test", "/r2"),
                          source="127.0.0.5", timeout=30)
        took = time.time() - t0
        rows = self.gw.wait_audit(host="reuse.test", path="/r2")
        self.assertFalse(self.origin.saw_path("/r2"),
            "the new job-1 (127.0.0.5, policy strict) reached reuse.test "
            "at once (%.2f s, status %s) on the removed job-1's --for "
            "answer; rows %r" % (took, r.status if r else None,
                                 [(x["decision"], x["rule"]) for x in rows]))
        asks = self.gw.wait_audit(host="reuse.test", method="ASK")
        self.assertEqual(len(asks), 2, "the new job-1 was never asked about")

    def test_reregistered_id_does_not_join_old_question(self):
        """approvals.md: "Requests of one sandbox to one destination wait on
        one question". job-3 (127.0.0.7) is held on pending.test; job-3 is
        removed and another job-3 registered (127.0.0.8); its request to
        pending.test joins the removed sandbox's question (waiting 2), and
        the operator's approve of that question -- asked by a sandbox that
        no longer exists -- sends the new sandbox's request on (200, rule
        approval:ID), while the old one is refused no-identity."""
        st, doc = self.register("job-3", "127.0.0.7", "strict")
        self.assertEqual(st, 201, doc)
        f1 = self.bg("pending.test", "/p1", source="127.0.0.7")
        q = self.question("pending.test", "job-3")
        self.assertEqual(self.remove("job-3")[0], 200)
        st, doc = self.register("job-3", "127.0.0.8", "strict")
        self.assertEqual(st, 201, doc)
        self.addCleanup(self.remove, "job-3")
        f2 = self.bg("pending.test", "/p2", source="127.0.0.8")
        time.sleep(0.5 * T.SLOW)
        listed = [x for x in self.pending() if x["host"] == "pending.test"]
        st, doc = self.answer(q["id"], "approve")
        r1, r2 = f1.result(), f2.result()
        self.assertFalse(self.origin.saw_path("/p1"), r1)
        self.assertFalse(self.origin.saw_path("/p2"),
            "the new job-3's request went on under question %d, asked by the "
            "removed job-3 (listing then: %r; answer %s %r; new job-3 got %s)"
            % (q["id"], listed, st, doc, r2.status if r2 else None))

    def test_removed_sandbox_held_request_not_approved(self):
        """(Held.) A request held for a registered sandbox that is then
        removed (DELETE /v1/sandboxes/{id}) is decided when the answer comes
        "on the policy in force then" (approvals.md): no sandbox owns its
        source any more, so an approve does not send it on (407
        no-identity)."""
        st, doc = self.register("job-2", "127.0.0.6", "asking")
        self.assertEqual(st, 201, doc)
        f = self.bg("gone.test", "/g1", source="127.0.0.6")
        q = self.question("gone.test", "job-2")
        st, doc = self.remove("job-2")
        self.assertEqual(st, 200, doc)
        st, doc = self.answer(q["id"], "approve")
        r = f.result()
        self.assertFalse(self.origin.saw_path("/g1"),
            "a held request of removed sandbox job-2 reached the origin "
            "after approve (%s %r): %r" % (st, doc, r))
        self.assertEqual((r.status, self.reason(r)), (407, "no-identity"))


class InternalAddressProbe(_Base):
    """An approval is for the destination no rule allowed; it is not an
    allow_private (SPEC §4 step 4 comes after the rules)."""

    def test_approved_name_to_internal_address_refused(self):
        """SPEC §4: "(4) the resolved addresses: any internal address ...
        not covered by allow_private -> deny the name". internal.test
        resolves to 127.0.0.9, which no allow_private covers; approving
        the question must not open it."""
        f = self.bg("internal.test", "/in1", port=self.inner.port)
        q = self.question("internal.test")
        st, doc = self.answer(q["id"], "approve", **{"for": "1h"})
        self.assertEqual(st, 200, doc)
        r = f.result()
        self.assertFalse(self.inner.saw_path("/in1"), r)
        self.assertEqual(r.status, 403, r)
        r = T.raw_request(self.gw.port, self.get("internal.test", "/in2",
                                                 port=self.inner.port),
                          timeout=30)
        self.assertFalse(self.inner.saw_path("/in2"), r)

    def test_approved_ip_literal_internal_refused(self):
        """The same for a question about an internal IP literal."""
        f = self.bg(INTERNAL_HOST, "/ip1", port=self.inner.port)
        q = self.question(INTERNAL_HOST)
        st, doc = self.answer(q["id"], "approve")
        self.assertEqual(st, 200, doc)
        r = f.result()
        self.assertFalse(self.inner.saw_path("/ip1"), r)


class TunnelProbe(_Base):
    """A tunnel an answer opened carries its own name only."""

    def test_connect_approved_then_other_host_inside(self):
        """approvals.md: "A tunnel an answer opened carries its requests
        under it"; SPEC §4: HTTP in a tunnel "must carry a Host equal to
        it". The tunnel to tun.test approved, an HTTP request inside for
        other.test (Host, then absolute form) is refused."""
        fut = self.pool.submit(T.open_tunnel, self.gw.port,
                               "tun.test:%d" % self.origin.port, timeout=30)
        q = self.question("tun.test")
        st, doc = self.answer(q["id"], "approve")
        self.assertEqual(st, 200, doc)
        c, r = fut.result()
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200)
        c.send("GET /t1 HTTP/1.1\r\nHost: tun.test:%d\r\n\r\n"
               % self.origin.port)
        self.assertEqual(c.read_response().status, 200)
        c.send("GET /t2 HTTP/1.1\r\nHost: other.test:%d\r\n\r\n"
               % self.origin.port)
        try:
            r = c.read_response()
        except (EOFError, ConnectionResetError):
            r = None
        self.assertFalse(self.origin.saw_path("/t2"), r)


class AnswerOnceProbe(_Base):
    """An answer is for one pending question, once, before its deadline."""

    TIMEOUT = "1s"

    def test_answer_twice(self):
        """(Held.) A question answered is no pending question any more:
        a second answer (approve --for after a deny) is 404 and opens
        nothing."""
        f = self.bg("twice.test", "/w1")
        q = self.question("twice.test")
        st, doc = self.answer(q["id"], "deny")
        self.assertEqual(st, 200, doc)
        st, doc = self.answer(q["id"], "approve", **{"for": "1h"})
        self.assertEqual(st, 404, doc)
        r = f.result()
        self.assertEqual((r.status, self.reason(r)), (403, "approval-denied"))
        r = T.raw_request(self.gw.port, self.get("twice.test", "/w2"),
                          timeout=30)
        self.assertFalse(self.origin.saw_path("/w2"))

    def test_answer_after_deadline(self):
        """approvals.md: "A held request waits at most approval.timeout
        (default 60 s), then is refused with approval-timeout";
        POST /v1/approvals/{id}: "404 no such pending question". With
        approval.timeout 1s, an approve sent 30 ms after a question's
        deadline (no GET in between) must be 404 and its held request
        refused approval-timeout. Three questions, so that a worker's tick
        landing in the 30 ms cannot hide what happens. Observed: each
        answer 200 ("waiting": 1), each held request 200 from the origin,
        rows APPROVE and allow approval:ID, ~1030 ms after the question."""
        got = []
        for i in range(3):
            host = "late%d.test" % i
            f = self.bg(host, "/late%d" % i)
            q = self.question(host)
            deadline = time.time() + q["expires_in_ms"] / 1000.0
            time.sleep(max(0, deadline - time.time() + 0.03))
            st, doc = self.answer(q["id"], "approve")
            r = f.result()
            got.append((host, q["expires_in_ms"], st, r.status if r else None,
                        self.reason(r)))
        late = [g for g in got if g[2] != 404 or g[3] == 200]
        self.assertEqual(late, [],
            "answered after the question's deadline and let through: %r"
            % got)


class DnsHttpProbe(_Base):
    """(Held.) A name resolved, then connected to, is two questions unless
    the first is answered --for with a scope covering both."""

    def dig(self, name, qid):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.settimeout(20 * T.SLOW)
            u.sendto(dns_query(name, qid), ("127.0.0.1", self.dport))
            resp, _ = u.recvfrom(4096)
            return resp[3] & 0x0f
        finally:
            u.close()

    def test_dns_once_then_http_asks_dns_for_covers(self):
        """approvals.md: "A name a sandbox resolves and then connects to is
        two questions: the DNS query's and the connection's -- unless the
        first is answered --for a while with a scope covering both (the
        default, the host on any port, does)". A host:port scope cannot
        cover the DNS question (port 0): 400."""
        f = self.pool.submit(self.dig, "dnsonly.test", 11)
        q = self.question("dnsonly.test", port=0)
        st, doc = self.answer(q["id"], "approve")
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result(), 0)
        f = self.bg("dnsonly.test", "/h1")
        q2 = self.question("dnsonly.test", port=self.origin.port)
        self.assertNotEqual(q2["id"], q["id"])
        self.answer(q2["id"], "deny")
        self.assertEqual(self.reason(f.result()), "approval-denied")
        self.assertFalse(self.origin.saw_path("/h1"))
        # --for on the DNS question: host:port cannot cover it; the
        # default scope covers the name on any port.
        f = self.pool.submit(self.dig, "dnsonly.test", 12)
        q3 = self.question("dnsonly.test", port=0)
        st, doc = self.answer(q3["id"], "approve", **{
            "for": "1h", "scope": "dnsonly.test:%d" % self.origin.port})
        self.assertEqual(st, 400, doc)
        st, doc = self.answer(q3["id"], "approve", **{"for": "1h"})
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result(), 0)
        r = T.raw_request(self.gw.port, self.get("dnsonly.test", "/h2"),
                          timeout=30)
        self.assertEqual(r.status, 200)
        rows = self.gw.wait_audit(host="dnsonly.test", path="/h2")
        self.assertEqual([x["rule"] for x in rows], ["approval"])


class AlwaysProbe(_Base):
    """`sandgate approve ID --always --scope S` writes S as a rule."""

    def approved_files(self):
        d = os.path.join(self.gw.policy_dir, "approved")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def cleanup_approved(self):
        d = os.path.join(self.gw.policy_dir, "approved")
        for n in self.approved_files():
            os.unlink(os.path.join(d, n))
        admin(self.sock, "POST", "/v1/reload")

    def always(self, scope, path):
        self.addCleanup(self.cleanup_approved)
        f = self.bg("always.test", path)
        q = self.question("always.test")
        r = T.run_sandgate("approve", str(q["id"]), "--always", "--scope",
                           scope, "-c", self.gw.cfg_path, "--socket",
                           self.sock)
        files = {n: open(os.path.join(self.gw.policy_dir, "approved",
                                      n)).read()
                 for n in self.approved_files()}
        return q, r, f.result(), files

    def test_always_scope_not_covering_question(self):
        """approvals.md: POST /v1/approvals/{id}: "400 a bad body or a scope
        that does not cover the question"; `--always` "writes an allow
        rule for the question's destination (or --scope)". The question
        is always.test:PORT; `sandgate approve ID --always --scope
        other.test` -- a scope the API refuses for this question -- exits
        0, writes approved/asking--other.test--0.yaml (`host:
        "other.test"`, reloaded into the policy) and approves the held
        request: the CLI writes and reloads the rule before it asks the
        API, then sends the approve without the scope, so the API's check
        never sees it."""
        q, r, held, files = self.always("other.test", "/al1")
        self.assertFalse(any("other.test" in t for t in files.values()),
            "approve %d --always --scope other.test (question %s) exited "
            "%d and wrote %r; held request %s" % (
                q["id"], q["destination"], r.returncode, files,
                held.status if held else None))
        self.assertNotEqual(r.returncode, 0, r.stdout)

    def test_always_scope_the_api_refuses(self):
        """The scope grammar (approvals.md: `host`, `host:port`,
        `*.domain`; the API answers 400 "scope: host, host:port or
        *.domain" to anything else) is not checked for --always: `--scope
        'always.test:PORT, 22'` writes `ports: [PORT, 22]` -- a port
        nobody was asked about -- and the reload takes it."""
        scope = "always.test:%d, 22" % self.origin.port
        q, r, held, files = self.always(scope, "/al2")
        self.assertFalse(any("22]" in t for t in files.values()),
            "approve %d --always --scope %r exited %d and wrote %r" % (
                q["id"], scope, r.returncode, files))


class TopDisplayProbe(_Base):
    """What `sandgate top` shows the operator before `a` approves."""

    TIMEOUT = "8s"

    def test_top_shows_the_questions_destination(self):
        """approvals.md: "`sandgate top` lists the pending questions above
        its table (and in its --once snapshot); `a` approves the oldest".
        The sandbox asks for api.trusted.example.com.<60 a>.<60 b>.<40 c>.
        evil.test:PORT; top (--once and the interactive screen, same
        top_question_line) prints its destination cut to 40 characters,
        `api.trusted.example.com.aaaaaaaaaaaaaaaa`: the registrable domain
        (evil.test) and the port are never shown, and the line reads as a
        name under api.trusted.example.com. `sandgate approvals` prints it
        whole."""
        long = ("api.trusted.example.com." + "a" * 60 + "." + "b" * 60 +
                "." + "c" * 40 + ".evil.test")
        f = self.bg(long, "/long")
        q = self.question(long)
        r = T.run_sandgate("top", "--once", "--interval", "0.2", "-c",
                           self.gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [ln for ln in r.stdout.splitlines()
                 if ln.startswith("?%d " % q["id"])]
        self.assertEqual(len(lines), 1, r.stdout)
        tail = "evil.test:%d" % self.origin.port
        self.answer(q["id"], "deny")
        f.result()
        self.assertIn(tail, lines[0],
            "top shows question %d (%s) as %r" % (q["id"], q["destination"],
                                                 lines[0]))


class LimitShareProbe(_Base):
    """(Held.) approval.max_pending is each sandbox's own."""

    EXTRA = {"max_pending": 2}

    @classmethod
    def setUpClass(cls):
        cls.TIMEOUT = "6s"
        super().setUpClass()

    def test_full_sandbox_does_not_block_another(self):
        """config.md: max_pending: "questions one sandbox may have waiting
        at once". The agent fills its 2 (a third is approval-limit at
        once); the victim's question is still asked and approved."""
        fs = [self.bg(h, "/f") for h in ("late0.test", "late1.test")]
        for h in ("late0.test", "late1.test"):
            self.question(h, "agent")
        r = T.raw_request(self.gw.port, self.get("late2.test", "/f"),
                          timeout=30)
        self.assertEqual((r.status, self.reason(r)), (429, "approval-limit"))
        v = self.bg("late2.test", "/victim", source=VICTIM_SRC)
        q = self.question("late2.test", "victim")
        st, doc = self.answer(q["id"], "approve")
        self.assertEqual(st, 200, doc)
        self.assertEqual(v.result().status, 200)
        for x in self.pending():
            self.answer(x["id"], "deny")
        for x in fs:
            x.result()


if __name__ == "__main__":
    T.main()
