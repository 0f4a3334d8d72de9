#!/usr/bin/python3
"""
Reload probes: does a decision made under an old policy, credential or vault
value outlive the change that should end it? Each test changes the policy
(admin reload, SIGHUP, policies_watch) or the vault while a connection, a
kept origin connection, a held request or an approval is in flight, and an
origin we control records what reached it.

What is promised (quoted in each test):
- SPEC §4: "Policies reload on SIGHUP and on POST /v1/reload: a bad file keeps
  the old policy in force ...; established connections keep going."
- docs/architecture.md "Reload": "Tunnels therefore finish on the policy they
  started with; each new request on a kept-alive explicit-proxy connection
  takes the current policy."
- docs/config.md "What a reload applies": the policy files' contents
  "(sandboxes, rules, credentials), for new requests and tunnels".
- docs/credentials.md "Rotation": "new requests use the new value without a
  restart; requests already under way finish with the old one."
- docs/approvals.md: "A held request is decided when its answer comes, on
  the policy in force then".

Every test here passes on the binary probed (/work/sandgate-probe-bin): each
checks a reload/rotation promise no other e2e file exercises (the next
request on a kept-alive connection, a kept origin connection, a tunnel open
across a rotation, `vault rm`, a sandbox deletion or a credential removal,
approvals answered after a reload, a SIGHUP burst, a policy file written in
two steps under policies_watch).
"""

import concurrent.futures
import os
import signal
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
TOKEN_OLD = "tok-old-5c1d2e3f4a5b"
TOKEN_NEW = "tok-new-9e8d7c6b5a4f"
PH = "sg-fixed-placeholder-0123456789abcdef"
SECRET1 = "sk-reload-probe-first-1111111111"
SECRET2 = "sk-reload-probe-second-2222222222"


def eventually(fn, timeout=5.0):
    deadline = time.time() + timeout * T.SLOW
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(0.1)


admin = T.admin


def get(host, port, path, auth=None, keep=True):
    """An absolute-form GET for the explicit proxy."""
    req = "GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n" % (
        host, port, path, host, port)
    if auth:
        req += "Proxy-Authorization: %s\r\n" % auth
    if not keep:
        req += "Connection: close\r\n"
    return req + "\r\n"


def reason_of(resp):
    return resp.header("X-Sandgate-Reason") if resp is not None else None


# ====================================================================== plain

class PlainReloadProbe(unittest.TestCase):
    """Explicit proxy, plain HTTP, one origin; each test writes its own
    policy and reloads through the admin socket (whose 200 says the new
    policy is in force)."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-rlprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [(n, ORIGIN_HOST) for n in (
            "a.test", "b.test", "c.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(cls.td.path, "adm.sock")
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": cls.doc()},
                           extra={"listen": {"admin": cls.sock}}, workers=1)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw.wait_admin(cls.sock)

    @classmethod
    def doc(cls, hosts=("a.test",), deny=(), deny_paths=None,
            private=True, token=TOKEN_OLD, local=True, name="p"):
        pol = {"name": name,
               "allow": [{"host": h, "ports": [cls.origin.port]}
                         for h in hosts]}
        if deny:
            pol["deny"] = [{"host": h} for h in deny]
        if deny_paths:
            pol["deny"] = [{"host": h, "paths": [p]} for h, p in deny_paths]
        if private:
            pol["allow_private"] = [ORIGIN_HOST + "/32"]
        sbs = [T.token_sandbox("tok", token, name)]
        if local:
            sbs.append(T.local_sandbox(name))
        return {"sandboxes": sbs, "policies": [pol]}

    def setUp(self):
        self.apply(self.doc())

    def apply(self, doc):
        self.gw.write_policy("p.yaml", doc)
        st, body = admin(self.sock, "POST", "/v1/reload")
        self.assertEqual(st, 200, body)
        self.assertTrue(body["ok"], body)

    def seen(self, path):
        return self.origin.requests_for(path)

    def mark(self, name):
        return "/%s-%d-%f" % (name, os.getpid(), time.time())

    def test_keepalive_next_request_after_allow_removed(self):
        """architecture.md "Reload": "each new request on a kept-alive
        explicit-proxy connection takes the current policy"."""
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        p1, p2 = self.mark("ka1"), self.mark("ka2")
        r = c.request(get("a.test", self.origin.port, p1))
        self.assertEqual(r.status, 200, r)
        self.apply(self.doc(hosts=("b.test",)))
        try:
            r = c.request(get("a.test", self.origin.port, p2))
        except (EOFError, ConnectionResetError):
            r = None
        self.assertEqual(self.seen(p2), [], "a.test reached after its rule "
                         "was removed, on a kept-alive connection")
        if r is not None:
            self.assertEqual(r.status, 403, r)

    def test_keepalive_token_changed(self):
        """Each request on a kept-alive explicit-proxy connection "says again
        who it is" (architecture.md): once the reload replaced the
        sandbox's token_sha256, the old token is a 407."""
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        auth = T.basic("tok", TOKEN_OLD)
        p1, p2 = self.mark("tk1"), self.mark("tk2")
        r = c.request(get("a.test", self.origin.port, p1, auth=auth))
        self.assertEqual(r.status, 200, r)
        self.apply(self.doc(token=TOKEN_NEW, local=False))
        try:
            r = c.request(get("a.test", self.origin.port, p2, auth=auth))
        except (EOFError, ConnectionResetError):
            r = None
        self.assertEqual(self.seen(p2), [], "old token still let through")
        if r is not None:
            self.assertEqual(r.status, 407, r)

    def test_kept_origin_connection_after_allow_private_removed(self):
        """An origin connection is bound to its "checked address" (SPEC §4,
        config.md upstream.keepalive_timeout); a reload that drops the
        allow_private covering it must not let the next request (on the same
        client connection or a new one) reuse it: step (4) denies the name."""
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        p1, p2, p3 = self.mark("ap1"), self.mark("ap2"), self.mark("ap3")
        r = c.request(get("a.test", self.origin.port, p1))
        self.assertEqual(r.status, 200, r)
        self.apply(self.doc(private=False))
        try:
            r2 = c.request(get("a.test", self.origin.port, p2))
        except (EOFError, ConnectionResetError):
            r2 = None
        r3 = T.raw_request(self.gw.port, get("a.test", self.origin.port, p3,
                                             keep=False))
        self.assertEqual((self.seen(p2), self.seen(p3)), ([], []),
                         "the internal address reached after allow_private "
                         "was removed: %r %r" % (r2, r3))

    def register(self, sid, source):
        st, doc = admin(self.sock, "POST", "/v1/sandboxes",
                        {"id": sid, "policy": "p", "source": source})
        self.assertIn(st, (200, 201), doc)
        self.addCleanup(admin, self.sock, "DELETE", "/v1/sandboxes/" + sid)

    def test_registered_sandbox_whose_policy_was_removed(self):
        """A reload that removes the policy a registered sandbox names: no
        policy in force allows anything for it, so its next request must
        not reach the origin under the policy that is gone (and the gateway
        keeps running)."""
        self.register("dyn-gone", "127.0.0.8")
        p1, p2 = self.mark("dg1"), self.mark("dg2")
        r = T.raw_request(self.gw.port, get("a.test", self.origin.port, p1,
                                            keep=False), source="127.0.0.8")
        self.assertEqual(r.status, 200, r)
        self.apply(self.doc(name="q"))
        self.addCleanup(self.apply, self.doc())
        r = T.raw_request(self.gw.port, get("a.test", self.origin.port, p2,
                                            keep=False), source="127.0.0.8")
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
        st, doc = admin(self.sock, "GET", "/v1/sandboxes/dyn-gone")
        self.assertEqual(self.seen(p2), [], "policy p is gone, yet: %r; "
                         "the sandbox: %s %r" % (r, st, doc))

    def test_sighup_storm_while_serving(self):
        """A burst of SIGHUPs while requests flow: the gateway stays up, no
        request is answered by anything but the two policies that were ever
        on disk, and the file last written is in force at the end."""
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        self.addCleanup(pool.shutdown)
        stop = [False]

        def loop():
            out = []
            while not stop[0]:
                r = T.raw_request(self.gw.port, get(
                    "a.test", self.origin.port, "/storm", keep=False))
                out.append(r.status if r else None)
                time.sleep(0.02)
            return out
        fs = [pool.submit(loop) for _ in range(3)]
        for i in range(200):
            if i % 50 == 0:
                self.gw.write_policy("p.yaml", self.doc(
                    hosts=("a.test",) if (i // 50) % 2 else ("b.test",)))
            os.kill(self.gw.proc.pid, signal.SIGHUP)
            time.sleep(0.005)
        self.gw.write_policy("p.yaml", self.doc(hosts=("b.test",)))
        self.gw.reload()
        time.sleep(1.0 * T.SLOW)
        stop[0] = True
        statuses = set()
        for f in fs:
            statuses.update(f.result())
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
        self.assertLessEqual(statuses, {200, 403, 429}, statuses)  # 429: per-sandbox connection rate
        def final(host):
            r = T.raw_request(self.gw.port, get(host, self.origin.port,
                                                self.mark("st"), keep=False))
            return r.status if r else None
        time.sleep(1.0)  # the per-sandbox connection rate refills
        self.assertEqual((final("a.test"), final("b.test")), (403, 200))


# ======================================================== credentials/vault

CRED_POLICY = """\
sandboxes:
  - id: box
    policy: p
    source: [127.0.0.1/32]
policies:
  - name: p
    allow:
      - host: tls.test
        ports: [{https}]
        tls: intercept
    allow_private: [{origin}/32]
{creds_ref}
{creds}
"""

CREDS_REF = "    credentials: [key]\n"
CREDS = """\
credentials:
  - name: key
    secret: probe-secret
    hosts: [tls.test]
    headers: [X-Api-Key]
    placeholder: "{ph}"
"""


class CredentialReloadProbe(unittest.TestCase):
    """An intercepted TLS origin with a credential swapped into X-Api-Key."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-rlcred-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cert, key = T.make_cert(d, "tls.test")
        cls.origin = T.Origin("tls", ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("tls.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": cls.doc(True)},
                           extra={"upstream": {"ca_bundle": cert},
                                  "listen": {"admin": cls.sock}}, workers=1)
        cls.gw.vault_set(("probe-secret", SECRET1))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw.wait_admin(cls.sock)
        cls.ctx = cls.gw.client_context()

    @classmethod
    def doc(cls, with_cred, ph=PH):
        return CRED_POLICY.format(
            https=cls.origin.port, origin=ORIGIN_HOST,
            creds_ref=CREDS_REF if with_cred else "",
            creds=CREDS.format(ph=ph) if with_cred else "")

    def setUp(self):
        self.vault("rotate", SECRET1)
        self.apply(self.doc(True))

    def apply(self, doc):
        self.gw.write_policy("p.yaml", doc)
        st, body = admin(self.sock, "POST", "/v1/reload")
        self.assertEqual(st, 200, body)

    def vault(self, *args):
        name_args = list(args[:1]) + ["probe-secret", "-c", self.gw.cfg_path]
        r = T.run_sandgate("vault", *name_args,
                           input=args[1] if len(args) > 1 else None)
        return r

    def tunnel(self, source=None):
        c, r = T.open_tunnel(self.gw.port, "tls.test:%d" % self.origin.port,
                             source=source)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="tls.test")
        self.addCleanup(c.close)
        return c

    def req(self, c, path, ph=PH):
        try:
            return c.request("GET %s HTTP/1.1\r\nHost: tls.test:%d\r\n"
                             "X-Api-Key: %s\r\n\r\n"
                             % (path, self.origin.port, ph))
        except (EOFError, ConnectionResetError, OSError):
            return None

    def key_seen(self, path):
        recs = self.origin.requests_for(path)
        return [dict((k.lower(), v) for k, v in r["headers"]).get("x-api-key")
                for r in recs]

    def mark(self, name):
        return "/headers?%s-%f" % (name, time.time())

    def test_rotation_reaches_open_tunnel(self):
        """credentials.md "Rotation": "new requests use the new value without
        a restart". A new request inside an intercepted tunnel opened before
        `vault rotate` is a new request."""
        c = self.tunnel()
        p1 = self.mark("rot1")
        r = self.req(c, p1)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.key_seen(p1), [SECRET1])
        rr = self.vault("rotate", SECRET2)
        self.assertEqual(rr.returncode, 0, rr.stderr)
        # a fresh connection sees the new value (test_credentials covers it)
        self.assertTrue(eventually(lambda: self.fresh_key() == SECRET2),
                        "rotation not in effect on new connections")
        p2 = self.mark("rot2")
        r = self.req(c, p2)
        self.assertEqual(self.key_seen(p2), [SECRET2],
                         "the open tunnel's next request: %r" % r)

    def fresh_key(self):
        c = self.tunnel()
        p = self.mark("fresh")
        self.req(c, p)
        c.close()
        seen = self.key_seen(p)
        return seen[0] if seen else None

    def test_vault_rm_ends_the_secret(self):
        """audit.md: `credential-unavailable` -- "the credential's secret is
        not in the vault": 502. After `vault rm`, no request -- a new
        tunnel's or the next one in an open tunnel -- carries the removed
        value (the snapshot is "Fetched again after ... a rotation (the
        keeper's stamp of vault.db changed)", credentials.md)."""
        c = self.tunnel()
        p1 = self.mark("rm1")
        self.assertEqual(self.req(c, p1).status, 200)
        rr = self.vault("rm")
        self.assertEqual(rr.returncode, 0, rr.stderr)
        self.addCleanup(self.vault, "set", SECRET1)
        time.sleep(1.5 * T.SLOW)
        p2, p3 = self.mark("rm2"), self.mark("rm3")
        r2 = self.req(c, p2)
        c3 = self.tunnel()
        r3 = self.req(c3, p3)
        got = {"open tunnel": (self.key_seen(p2), r2 and r2.status),
               "new tunnel": (self.key_seen(p3), r3 and r3.status)}
        for k, (seen, _) in got.items():
            self.assertNotIn(SECRET1, seen, "%s after vault rm: %r" % (k, got))

    def test_credential_removed_open_tunnel(self):
        """A reload removes the credential, with an intercepted tunnel open.
        Tunnels keep the policy they started with (architecture.md), but
        credentials.md says the placeholders of "credentials the policy no
        longer has become removed placeholders", refused "as
        credential-misuse anywhere": the tunnel's next request carrying the
        placeholder does not reach the origin (holds)."""
        c = self.tunnel()
        p1 = self.mark("ot1")
        self.assertEqual(self.req(c, p1).status, 200)
        self.apply(self.doc(False))
        p2 = self.mark("ot2")
        r = self.req(c, p2)
        self.assertEqual(self.key_seen(p2), [],
                         "after the credential was removed: %r" % r)

    def test_failed_reload_keeps_placeholder(self):
        """policy.md: "a file with any error is never applied, the old policy
        stays in force": a bad file that also changes the fixed placeholder
        leaves the old placeholder swapped and the new one unknown."""
        new_ph = "sg-fixed-placeholder-0000111122223333"
        self.gw.write_policy("p.yaml", self.doc(True, ph=new_ph)
                             + "    bogus_key: 1\n")
        st, body = admin(self.sock, "POST", "/v1/reload")
        self.assertEqual(st, 400, body)
        p1, p2 = self.mark("fk1"), self.mark("fk2")
        r1 = self.req(self.tunnel(), p1)
        r2 = self.req(self.tunnel(), p2, ph=new_ph)
        self.assertEqual(self.key_seen(p1), [SECRET1], r1)
        self.assertNotIn(SECRET1, self.key_seen(p2), r2)

    def register(self, sid, source):
        st, doc = admin(self.sock, "POST", "/v1/sandboxes",
                        {"id": sid, "policy": "p", "source": source})
        self.assertIn(st, (200, 201), doc)
        self.addCleanup(admin, self.sock, "DELETE", "/v1/sandboxes/" + sid)
        return [p["placeholder"] for p in doc["placeholders"]
                if p["credential"] == "key"][0]

    def test_dynamic_sandbox_deleted_open_tunnel(self):
        """admin-api.md DELETE /v1/sandboxes/{id}: "Its placeholders stop
        working at once." An intercepted tunnel the sandbox opened before
        must not get the secret swapped for that placeholder afterwards."""
        ph = self.register("dyn-del", "127.0.0.5")
        c = self.tunnel(source="127.0.0.5")
        p1 = self.mark("dd1")
        self.assertEqual(self.req(c, p1, ph=ph).status, 200)
        self.assertEqual(self.key_seen(p1), [SECRET1])
        st, doc = admin(self.sock, "DELETE", "/v1/sandboxes/dyn-del")
        self.assertEqual(st, 200, doc)
        p2 = self.mark("dd2")
        r = self.req(c, p2, ph=ph)
        self.assertEqual(self.key_seen(p2), [],
                         "the deleted sandbox's placeholder still swapped in "
                         "its open tunnel: %r" % r)

# ================================================================ approvals

ASK_POLICY = """\
sandboxes:
  - id: {sid}
    policy: asking
    source: [{src}]
policies:
  - name: asking
    mode: ask
    allow:
      - host: ok.test
        ports: [{port}]
{deny}
{private}
"""


class ApprovalReloadProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-rlask-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "ok.test", "h1.test", "h2.test", "h3.test", "h4.test",
            "h5.test", "h6.test", "h7.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": cls.doc()},
                           extra={"listen": {"admin": cls.sock},
                                  "approval": {"timeout": "20s"}}, workers=1)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw.wait_admin(cls.sock)
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        cls.addClassCleanup(cls.pool.shutdown)

    @classmethod
    def doc(cls, deny=(), private=True, sandbox=True):
        # without the sandbox: another one (by another source address) stays
        return ASK_POLICY.format(
            port=cls.origin.port,
            src="127.0.0.1/32" if sandbox else "127.0.0.9/32",
            sid="agent" if sandbox else "other",
            deny=("    deny:\n" + "".join("      - host: %s\n" % h
                                          for h in deny)) if deny else "",
            private=("    allow_private: [%s/32]\n" % ORIGIN_HOST)
            if private else "")

    def setUp(self):
        self.apply(self.doc())

    def apply(self, doc):
        self.gw.write_policy("p.yaml", doc)
        st, body = admin(self.sock, "POST", "/v1/reload")
        self.assertEqual(st, 200, body)

    def bg(self, host, path):
        return self.pool.submit(T.raw_request, self.gw.port,
                                get(host, self.origin.port, path, keep=False),
                                timeout=40)

    def question(self, host):
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            st, doc = admin(self.sock, "GET", "/v1/approvals")
            for q in doc["approvals"]:
                if q["host"] == host:
                    return q
            time.sleep(0.05)
        self.fail("no question for " + host)

    def answer(self, qid, ans, **kw):
        body = {"answer": ans}
        body.update(kw)
        return admin(self.sock, "POST", "/v1/approvals/%d" % qid, body)

    def test_held_then_deny_added_then_approved(self):
        """approvals.md: "a reload that added a `deny` rule for it meanwhile
        refuses it (`policy-deny`), approved or not"."""
        f = self.bg("h1.test", "/held-deny")
        q = self.question("h1.test")
        self.apply(self.doc(deny=("h1.test",)))
        self.answer(q["id"], "approve")
        r = f.result()
        self.assertFalse(self.origin.saw_path("/held-deny"))
        self.assertEqual((r.status, reason_of(r)), (403, "policy-deny"))

    def test_held_then_sandbox_removed_then_approved(self):
        """Decided "on the policy in force then": a policy in which the
        sandbox no longer exists has no identity for the request."""
        f = self.bg("h2.test", "/held-gone")
        q = self.question("h2.test")
        self.apply(self.doc(sandbox=False))
        st, doc = self.answer(q["id"], "approve")
        r = f.result()
        self.assertFalse(self.origin.saw_path("/held-gone"),
                         "approved after its sandbox was removed: %r %r"
                         % (r, doc))

    def test_for_answer_then_deny_added(self):
        """A `--for` answer decides later requests "in scope until it
        expires"; a deny rule comes first in the decision order (SPEC §4
        step 2) and approvals.md: "one a deny rule refuses is refused as
        ever" -- so a deny added by a reload beats a standing approval."""
        f = self.bg("h4.test", "/for-1")
        q = self.question("h4.test")
        st, doc = self.answer(q["id"], "approve", **{"for": "1h"})
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result().status, 200)
        self.apply(self.doc(deny=("h4.test",)))
        r = T.raw_request(self.gw.port, get("h4.test", self.origin.port,
                                            "/for-2", keep=False))
        self.assertFalse(self.origin.saw_path("/for-2"), r)
        self.assertEqual((r.status, reason_of(r)), (403, "policy-deny"))

# ========================================================== policies_watch

class WatchHalfFileProbe(unittest.TestCase):
    """policies_watch: "one reload once changes have been quiet for 300 ms"
    (config.md): a file written in two steps 100 ms apart is one change; the
    gateway never runs on its first half (which lacks the deny rule)."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-rlwatch-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "bad.w.test", "ok.w.test", "other.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": cls.text(False)[0]},
                           extra={"policies_watch": True}, workers=1)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)

    @classmethod
    def text(cls, other):
        allow = "      - host: \"*.w.test\"\n        ports: [%d]\n" % cls.origin.port
        if other:
            allow += "      - host: other.test\n        ports: [%d]\n" % cls.origin.port
        return ("sandboxes:\n  - id: s\n    policy: p\n    source: [127.0.0.1/32]\n"
                "policies:\n  - name: p\n    allow_private: [%s/32]\n"
                "    allow:\n%s" % (ORIGIN_HOST, allow)), \
            "    deny:\n      - host: bad.w.test\n"

    def status(self, host, path):
        r = T.raw_request(self.gw.port, get(host, self.origin.port, path,
                                            keep=False))
        return r.status if r else None

    def test_two_step_write_never_runs_half(self):
        head, tail = self.text(False)
        self.assertEqual(self.status("bad.w.test", "/w0"), 200)  # v0: no deny
        # v1 with the deny, written atomically first
        self.gw.write_policy("p.yaml", head + tail)
        self.assertTrue(eventually(lambda: self.status(
            "bad.w.test", "/w-wait") == 403, 10))
        head2, tail2 = self.text(True)
        leaks = []
        for i in range(5):
            path = os.path.join(self.gw.policy_dir, "p.yaml")
            with open(path, "w") as f:      # truncate, first half
                f.write(head2)
                f.flush()
                # probe while the half file is on disk
                t_end = time.time() + 0.1
                while time.time() < t_end:
                    if self.status("bad.w.test", "/half-%d" % i) == 200:
                        leaks.append(i)
                f.write(tail2)
            t_end = time.time() + 1.0 * T.SLOW
            while time.time() < t_end:
                if self.status("bad.w.test", "/after-%d" % i) == 200:
                    leaks.append(("after", i))
        self.assertTrue(eventually(lambda: self.status(
            "other.test", "/w-other") == 200, 10))
        self.assertEqual(leaks, [], self.gw.log_tail())


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
