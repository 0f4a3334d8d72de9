#!/usr/bin/python3
"""
Probe: the admin API (unix socket, HTTP/1.1 + JSON) driven as the party that
registers sandboxes at run time -- an orchestrator with a bug, or one that
passes on ids, names and addresses that came from users. For each attempt:
the HTTP answer, GET /v1/sandboxes, which sandbox the traffic from the
affected source address is decided as (absolute-form requests through the
HTTP proxy from a bound source address), and the audit rows (audit.db, read
only).

One gateway (default install: user sandgate, keeper) with the HTTP proxy and
an admin socket; a static sandbox st-one at 127.0.0.31 (policy pa); policies
pa (a.test, and tls.test intercepted with credential `key` swapped into
X-Api-Key) and pb (b.test); plain and TLS origins on 127.0.0.2.

Found (the test fails on the binary probed; its docstring has the details):
- test_reload_static_twin_gets_registered_placeholder: a reload that adds a
  static sandbox with a registered sandbox's id is accepted; the two
  sandboxes then share one id, one listing key and one placeholder: the
  placeholder issued to the registered sandbox is swapped for requests from
  the static one's address.
- test_delete_registered_twin_strips_static_credential: DELETE of that
  registered sandbox takes the static sandbox's placeholders with it (its own
  placeholder becomes credential-misuse; the listing shows none).

Tried, and held:
- ids with '/', '..', '%2F', NUL (\\u0000), control bytes, LF, Cyrillic and
  zero-width look-alikes, '', 10,000 characters, a static id in capitals or
  with a trailing dot or space: 400, nothing listed, no admin row, the source
  still identifies nobody;
- the static sandbox's address in other spellings (127.0.0.31., 0177.0.0.31,
  127.31, 2130706463, ::ffff:7f00:1f, ::ffff:127.0.0.31): 409; ranges
  (0.0.0.0/0, ::/0, 127.0.0.0/8, 127.0.0.31/32), zone ids, brackets, spaces:
  400; st-one's traffic stays st-one's;
- duplicate JSON keys (id, policy, source twice; the first source the static
  sandbox's): the last one wins everywhere alike -- the answer, the listing,
  the audit row and the decisions on traffic;
- numbers where strings belong (source as an integer, ports as strings,
  running as 0 or "false"): 400;
- framing: a chunked body and Expect: 100-continue register normally; a POST
  without Content-Length registers nothing (400); 30,000 levels of nesting
  are a 400 and the gateway lives; a 70 KB body sent in full is a 413 (curl
  and a raw client both read it);
- two registrations of one id interleaved on two sockets (the first one's
  body held half-sent): exactly one wins, the other is 409, the loser's
  source identifies nobody;
- a slow admin client (headers or body half-sent and held) holds up neither
  the next admin request nor proxy traffic;
- DELETE of the static sandbox in any spelling (plain, %2D-encoded, trailing
  slash, query, '//' , '/..'), DELETE /v1/sandboxes/, /*, /%2A, /%00: never
  removes anything; GET/DELETE with a query string or trailing slash is 404;
- policy `default` registers a deny-all sandbox (403 policy-deny); `PA`,
  'pa ', a policy that does not exist: 400;
- a reload whose static source prefix covers a registered address leaves the
  address to the registered sandbox (as documented), and a new registration
  inside the prefix is 409.
Observed, not counted as findings: source 0.0.0.0 and :: are accepted (201);
a registered sandbox whose policy gains a credential on a reload gets no
placeholder for it (docs say only the static sandboxes' are rebuilt).
"""

import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
STATIC_SRC = "127.0.0.31"
SECRET = "sk-admin2-probe-secret-0123456789ab"
PID = os.getpid()


def policy_text(port, tls_port, extra_sandboxes=""):
    return """sandboxes:
  - id: st-one
    policy: pa
    source: [%s/32]
%spolicies:
  - name: pa
    allow:
      - host: a.test
        ports: [%d]
      - host: tls.test
        ports: [%d]
        tls: intercept
    allow_private: [%s/32]
    credentials: [key]
  - name: pb
    allow:
      - host: b.test
        ports: [%d]
    allow_private: [%s/32]
credentials:
  - name: key
    secret: probe-secret
    hosts: [tls.test]
    headers: [X-Api-Key]
""" % (STATIC_SRC, extra_sandboxes, port, tls_port, ORIGIN_HOST, port,
       ORIGIN_HOST)


class Admin2Probe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-admin2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cert, key = T.make_cert(d, "tls.test")
        cls.tls = T.Origin("tls", ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [("a.test", ORIGIN_HOST), ("b.test", ORIGIN_HOST),
                                ("tls.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.good = policy_text(cls.origin.port, cls.tls.port)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": cls.good}, extra={
            "upstream": {"ca_bundle": cert}, "listen": {"admin": cls.sock}})
        cls.gw.vault_set(("probe-secret", SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw.wait_admin(cls.sock)
        cls.ctx = cls.gw.client_context()

    # -------------------------------------------------------------- helpers

    def A(self, method, path, body=None):
        return T.admin(self.sock, method, path, body)

    def raw(self, data, timeout=10):
        return T.unix_http(self.sock, data, timeout)

    def post_raw(self, body, headers=b"", length=True):
        h = b"POST /v1/sandboxes HTTP/1.1\r\nHost: sandgate\r\nConnection: close\r\n"
        h += headers
        if length:
            h += b"Content-Length: %d\r\n" % len(body)
        return self.raw(h + b"\r\n" + body)

    def listing(self):
        st, doc = self.A("GET", "/v1/sandboxes")
        self.assertEqual(st, 200, doc)
        return doc["sandboxes"]

    def ids(self):
        return sorted(e["id"] for e in self.listing())

    def register(self, sid, policy, source, expect=201):
        st, doc = self.A("POST", "/v1/sandboxes",
                         {"id": sid, "policy": policy, "source": source})
        if st == 201:
            self.addCleanup(self.A, "DELETE", "/v1/sandboxes/" + sid)
        self.assertEqual(st, expect, doc)
        return doc

    def get(self, host, source, path):
        """Absolute-form GET through the proxy from source: (status, reason)."""
        r = T.raw_request(self.gw.port, "GET http://%s:%d%s HTTP/1.1\r\n"
                          "Host: %s:%d\r\nConnection: close\r\n\r\n" % (
                              host, self.origin.port, path, host,
                              self.origin.port), source=source)
        return (r.status, r.header("X-Sandgate-Reason")) if r else None

    def row_for(self, path):
        rows = self.gw.wait_audit(path=path)
        return [(r["sandbox"], r["decision"], r["reason"]) for r in rows]

    def fetch_tls(self, source, path, ph):
        """GET https://tls.test/path in an intercepted tunnel from source with
        X-Api-Key: ph; (status, reason, [X-Api-Key values the origin saw])."""
        c, r = T.open_tunnel(self.gw.port, "tls.test:%d" % self.tls.port,
                             source=source)
        try:
            if r.status != 200:
                return ("tunnel", r.status, r.header("X-Sandgate-Reason"), [])
            c.sock = self.ctx.wrap_socket(c.sock, server_hostname="tls.test")
            r = c.request("GET %s HTTP/1.1\r\nHost: tls.test:%d\r\n"
                          "X-Api-Key: %s\r\n\r\n" % (path, self.tls.port, ph))
        except (EOFError, OSError) as e:
            return ("error", repr(e), None, self.key_seen(path))
        finally:
            c.close()
        return (r.status, r.header("X-Sandgate-Reason"), self.key_seen(path))

    def key_seen(self, path):
        return [dict((k.lower(), v) for k, v in x["headers"]).get("x-api-key")
                for x in self.tls.requests_for(path)]

    def restore_policy(self):
        self.gw.write_policy("p.yaml", self.good)
        st, doc = self.A("POST", "/v1/reload")
        self.assertEqual(st, 200, doc)

    @staticmethod
    def phs(entry):
        return [p["placeholder"] for p in entry.get("placeholders", [])
                if p["credential"] == "key"]

    # -------------------------------------------------------------- findings

    def test_reload_static_twin_gets_registered_placeholder(self):
        """SPEC §6: "a placeholder is valid only for the sandbox it was
        issued to, so one leaked from a sandbox is useless anywhere else";
        docs/policy.md `sandboxes`: id "unique across all files";
        docs/admin-api.md: registering an id a static sandbox has is 409 (an
        id names one sandbox); docs/credentials.md "Removed sandboxes": a
        sandbox "registered later under a former static id does not inherit"
        its placeholders.

        Sent: POST /v1/sandboxes {"id": "twin-a", "policy": "pa", "source":
        "127.0.0.62"} (answer: its placeholder P for `key`); then the policy
        file gains a static sandbox `{id: twin-a, policy: pa, source:
        [127.0.0.63/32]}` -- another machine -- and POST /v1/reload; then
        from 127.0.0.63 an intercepted GET https://tls.test/... with
        X-Api-Key: P.

        Observed: the reload is 200; GET /v1/sandboxes lists `twin-a` twice
        (static at 127.0.0.63, registered at 127.0.0.62), both with the
        placeholder P; GET /v1/sandboxes/twin-a shows only the static one; the
        request from 127.0.0.63 carrying P gets the secret swapped in (200,
        the origin sees SECRET), and audit rows from both machines say
        sandbox twin-a. The reload should have refused the id (or the static
        sandbox got placeholders of its own)."""
        sid, dyn_src, st_src = "twin-a", "127.0.0.62", "127.0.0.63"
        self.addCleanup(self.restore_policy)
        doc = self.register(sid, "pa", dyn_src)
        ph = self.phs(doc)[0]
        path0 = "/headers?twin-a-own-%d" % PID
        self.assertEqual(self.fetch_tls(dyn_src, path0, ph)[2], [SECRET])
        self.gw.write_policy("p.yaml", policy_text(
            self.origin.port, self.tls.port,
            "  - id: %s\n    policy: pa\n    source: [%s/32]\n" % (sid, st_src)))
        st, rl = self.A("POST", "/v1/reload")
        listing = [e for e in self.listing() if e["id"] == sid]
        path = "/headers?twin-a-other-%d" % PID
        got = self.fetch_tls(st_src, path, ph)
        rows = [(r["sandbox"], r["client"], r["decision"], r["reason"])
                for r in self.gw.wait_audit(path=path)]
        self.assertNotIn(SECRET, got[2] or [],
            "the placeholder issued to registered %s (%s) was swapped in for "
            "a request from %s: reload %s %r; entries named %s: %r; answer "
            "%r; rows %r" % (sid, dyn_src, st_src, st, rl, sid, listing, got,
                             rows))
        self.assertLessEqual(len(listing), 1,
            "two sandboxes named %s: %r" % (sid, listing))

    def test_delete_registered_twin_strips_static_credential(self):
        """docs/admin-api.md DELETE /v1/sandboxes/{id}: `404` for an id that
        is not registered ("a static sandbox is removed by editing its file
        and reloading"): removing a registered sandbox must leave the static
        sandboxes alone. docs/admin-api.md GET: `placeholders` are the values
        the sandbox's environment gets for each credential its policy may
        use.

        Sent: POST /v1/sandboxes {"id": "twin-b", "policy": "pa", "source":
        "127.0.0.64"}; the policy file gains static `{id: twin-b, policy: pa,
        source: [127.0.0.65/32]}`; POST /v1/reload (200); DELETE
        /v1/sandboxes/twin-b; then from 127.0.0.65 (the static twin-b) an
        intercepted GET https://tls.test/... with the placeholder GET
        /v1/sandboxes lists for the static twin-b (the one it had before the
        DELETE when the listing has none).

        Observed: DELETE answers {"removed": "twin-b"}; the static twin-b is
        still listed but with "placeholders": []; its request is 403
        credential-misuse and the origin never sees the secret (the static
        sandbox lost its credential until the next reload)."""
        sid, dyn_src, st_src = "twin-b", "127.0.0.64", "127.0.0.65"
        self.addCleanup(self.restore_policy)
        self.register(sid, "pa", dyn_src)
        self.gw.write_policy("p.yaml", policy_text(
            self.origin.port, self.tls.port,
            "  - id: %s\n    policy: pa\n    source: [%s/32]\n" % (sid, st_src)))
        st, rl = self.A("POST", "/v1/reload")
        if st != 200:
            return  # the reload refused the id: no static twin to harm
        before = [e for e in self.listing() if e["id"] == sid and e["static"]]
        self.assertEqual(len(before), 1, self.listing())
        st, doc = self.A("DELETE", "/v1/sandboxes/" + sid)
        self.assertEqual(st, 200, doc)
        after = [e for e in self.listing() if e["id"] == sid and e["static"]]
        self.assertEqual(len(after), 1, "the static %s is gone: %r"
                         % (sid, self.listing()))
        ph = (self.phs(after[0]) or self.phs(before[0]))[0]
        path = "/headers?twin-b-static-%d" % PID
        got = self.fetch_tls(st_src, path, ph)
        self.assertEqual((got[0], got[2]), (200, [SECRET]),
            "after DELETE of the registered %s, the static %s (%s): listed "
            "before %r, after %r; its request with its placeholder: %r; rows "
            "%r" % (sid, sid, st_src, before, after, got, [
                (r["sandbox"], r["client"], r["decision"], r["reason"])
                for r in self.gw.wait_audit(path=path)]))

    # -------------------------------------------------------------- held

    def test_hostile_ids_refused(self):
        """docs/admin-api.md: `400` for a bad id (`[a-z0-9][a-z0-9-]{0,39}`):
        nothing is registered, no admin row is written, the source stays
        unidentified."""
        before = self.ids()
        src = "127.0.0.40"
        bad = ("a/b", "..", "job%2F1", "job\x001", "job\x01x", "job\nx",
               "job\x7f", "\u0430bc", "st\u200bone", "", "a" * 10000,
               "St-one", "st-one.", "st-one ", " st-one", "st_one")
        for sid in bad:
            with self.subTest(sid=repr(sid[:20])):
                st, doc = self.A("POST", "/v1/sandboxes",
                                 {"id": sid, "policy": "pb", "source": src})
                if st == 201:
                    self.addCleanup(self.A, "DELETE", "/v1/sandboxes/" + sid)
                self.assertEqual(st, 400, doc)
        self.assertEqual(self.ids(), before)
        time.sleep(0.5)
        self.assertEqual([r for r in self.gw.audit_rows(kind="admin")
                          if r["sandbox"] in bad or r["client"] == src], [])
        self.assertEqual(self.get("b.test", src, "/a2/ids")[0], 407)

    def test_static_address_in_any_spelling_refused(self):
        """docs/admin-api.md: `409` when "a static sandbox has ... a source
        prefix holding the address"; `400` for a bad address (a range is not
        an address). SPEC §4: IPv4-mapped IPv6 is the IPv4 address
        everywhere. st-one's traffic stays st-one's."""
        for src in ("127.0.0.31.", "0177.0.0.31", "127.31", "2130706463",
                    "0x7f00001f", "::ffff:7f00:1f", "::ffff:127.0.0.31"):
            with self.subTest(src=src):
                self.register("spell-x", "pb", src, expect=409)
        for src in ("0.0.0.0/0", "::/0", "127.0.0.0/8", "127.0.0.31/32",
                    "127.0.0.41%lo", "[127.0.0.41]", " 127.0.0.41",
                    "127.0.0.41\n", "fe80::1%lo"):
            with self.subTest(src=src):
                self.register("range-x", "pb", src, expect=400)
        self.assertNotIn("spell-x", self.ids())
        self.assertEqual(self.get("a.test", STATIC_SRC, "/a2/spell-a")[0], 200)
        self.assertEqual(self.get("b.test", STATIC_SRC, "/a2/spell-b"),
                         (403, "policy-deny"))
        self.assertEqual(self.row_for("/a2/spell-b")[0][0], "st-one")

    def test_duplicate_keys_decide_alike_everywhere(self):
        """A body with each key twice (jansson keeps the last): the answer,
        the listing, the audit row and the decisions must all name the same
        sandbox, policy and source -- never the static address the first
        `source` named."""
        body = (b'{"id":"dup-one","policy":"pa","source":"127.0.0.31",'
                b'"id":"dup-two","policy":"pb","source":"127.0.0.43"}')
        st, _, out = self.post_raw(body)
        doc = json.loads(out)
        if st == 201:
            self.addCleanup(self.A, "DELETE", "/v1/sandboxes/" + doc["id"])
        self.assertEqual(st, 201, doc)
        self.assertEqual((doc["id"], doc["policy"], doc["source"]),
                         ("dup-two", "pb", "127.0.0.43"))
        e = [x for x in self.listing() if x["id"] in ("dup-one", "dup-two")]
        self.assertEqual([(x["id"], x["policy"], x["source"]) for x in e],
                         [("dup-two", "pb", "127.0.0.43")])
        rows = self.gw.wait_audit(kind="admin", method="POST",
                                  pred=lambda r: r["sandbox"] in ("dup-one",
                                                                  "dup-two"))
        self.assertEqual([r["sandbox"] for r in rows], ["dup-two"])
        self.assertEqual(self.get("b.test", "127.0.0.43", "/a2/dup-b")[0], 200)
        self.assertEqual(self.get("a.test", "127.0.0.43", "/a2/dup-a"),
                         (403, "policy-deny"))
        self.assertEqual(self.row_for("/a2/dup-b")[0][0], "dup-two")
        self.assertEqual(self.get("b.test", STATIC_SRC, "/a2/dup-st")[0], 403)

    def test_wrong_types_refused(self):
        """Numbers as strings and strings as numbers: 400, nothing kept."""
        before = self.ids()
        for body in ({"id": "typ-1", "policy": "pa", "source": 2130706476},
                     {"id": "typ-1", "policy": ["pa"], "source": "127.0.0.44"},
                     {"id": "typ-1", "policy": "pa", "source": "127.0.0.44",
                      "ingress": {"address": "127.0.0.44", "ports": ["8080"],
                                  "public": True}},
                     {"id": "typ-1", "policy": "pa", "source": "127.0.0.44",
                      "ingress": {"address": "127.0.0.44", "ports": [8080],
                                  "public": "true"}}):
            with self.subTest(body=body):
                st, doc = self.A("POST", "/v1/sandboxes", body)
                if st == 201:
                    self.addCleanup(self.A, "DELETE", "/v1/sandboxes/typ-1")
                self.assertEqual(st, 400, doc)
        self.assertEqual(self.ids(), before)
        self.register("typ-2", "pa", "127.0.0.45")
        for running in (0, "false", None):
            st, doc = self.A("POST", "/v1/sandboxes/typ-2/state",
                             {"running": running})
            self.assertEqual(st, 400, (running, doc))

    def test_framing_variants(self):
        """libevent frames the socket's HTTP: a chunked body and Expect:
        100-continue are bodies like any; a POST without Content-Length has
        no body (400, nothing registered); nesting past the parser's depth is
        a 400 and the main thread survives; a 70 KB body is 413 (docs)."""
        b = json.dumps({"id": "chk-1", "policy": "pa",
                        "source": "127.0.0.46"}).encode()
        st, _, out = self.post_raw(b"%x\r\n%s\r\n0\r\n\r\n" % (len(b), b),
                                   b"Transfer-Encoding: chunked\r\n", False)
        if st == 201:
            self.addCleanup(self.A, "DELETE", "/v1/sandboxes/chk-1")
        self.assertEqual(st, 201, out)
        b = json.dumps({"id": "exp-1", "policy": "pa",
                        "source": "127.0.0.47"}).encode()
        st, _, out = self.post_raw(b, b"Expect: 100-continue\r\n")
        if st == 201:
            self.addCleanup(self.A, "DELETE", "/v1/sandboxes/exp-1")
        self.assertEqual(st, 201, out)
        b = json.dumps({"id": "nocl-1", "policy": "pa",
                        "source": "127.0.0.48"}).encode()
        st, _, out = self.post_raw(b, length=False)
        self.assertEqual(st, 400, out)
        deep = (b'{"id":"deep-1","policy":"pa","source":"127.0.0.49","x":' +
                b"[" * 30000 + b"]" * 30000 + b"}")
        st, _, out = self.post_raw(deep)
        self.assertEqual(st, 400, out)
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
        big = os.path.join(self.td.path, "big.json")
        with open(big, "w") as f:
            json.dump({"id": "big-1", "policy": "pa", "source": "127.0.0.50",
                       "pad": "x" * 70000}, f)
        r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w",
                            "%{http_code}", "--unix-socket", self.sock,
                            "--data-binary", "@" + big,
                            "http://sandgate/v1/sandboxes"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stdout, "413", r.stderr)
        ids = self.ids()
        for sid in ("nocl-1", "deep-1", "big-1"):
            self.assertNotIn(sid, ids)
        self.assertEqual(self.get("a.test", "127.0.0.46", "/a2/chk")[0], 200)
        self.assertEqual(self.get("a.test", "127.0.0.48", "/a2/nocl")[0], 407)

    def test_interleaved_registrations_of_one_id(self):
        """docs/admin-api.md: 409 when a registered sandbox has the id. Two
        sockets register `race-1` from different sources; the first one's
        body is held half-sent while the second completes: one wins, the
        other is 409, and only the winner's source is race-1."""
        body = json.dumps({"id": "race-1", "policy": "pa",
                           "source": "127.0.0.60"}).encode()
        s = socket.socket(socket.AF_UNIX)
        self.addCleanup(s.close)
        s.settimeout(10 * T.SLOW)
        s.connect(self.sock)
        s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: sandgate\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
                  + body[:20])
        time.sleep(0.2)
        self.register("race-1", "pb", "127.0.0.61")
        s.sendall(body[20:])
        first = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            first += b
        self.assertTrue(first.startswith(b"HTTP/1.1 409"), first)
        e = [x for x in self.listing() if x["id"] == "race-1"]
        self.assertEqual([(x["policy"], x["source"]) for x in e],
                         [("pb", "127.0.0.61")])
        self.assertEqual(self.get("b.test", "127.0.0.61", "/a2/race-w")[0], 200)
        self.assertEqual(self.get("a.test", "127.0.0.60", "/a2/race-l")[0], 407)

    def test_slow_admin_client_holds_nothing(self):
        """docs/admin-api.md: the socket "is served by the main thread's
        event loop, never by a worker, so a slow admin client cannot hold up
        traffic". Two clients hold a half-sent request line and a half-sent
        body; the next admin request and a proxy request are answered at
        once."""
        held = []
        for data in (b"POST /v1/sandboxes HTTP/1.1\r\nHost: sandgate\r\nContent-Le",
                     b"POST /v1/sandboxes HTTP/1.1\r\nHost: sandgate\r\n"
                     b"Content-Length: 500\r\n\r\n{\"id\":"):
            s = socket.socket(socket.AF_UNIX)
            self.addCleanup(s.close)
            s.connect(self.sock)
            s.sendall(data)
            held.append(s)
        time.sleep(0.3)
        t0 = time.time()
        st, doc = self.A("GET", "/v1/status")
        self.assertEqual(st, 200, doc)
        self.assertEqual(self.get("a.test", STATIC_SRC, "/a2/slow")[0], 200)
        self.register("slow-1", "pb", "127.0.0.66")
        self.assertLess(time.time() - t0, 3 * T.SLOW)

    def test_delete_spellings_remove_nothing_else(self):
        """docs/admin-api.md DELETE: `404` for an id that is not registered;
        a static sandbox is removed by editing its file. No spelling of a
        static id, and no wildcard-looking path, removes anything."""
        self.register("keep-1", "pb", "127.0.0.67")
        before = self.ids()
        for path in ("/v1/sandboxes/st-one", "/v1/sandboxes/st%2Done",
                     "/v1/sandboxes/st-one/", "/v1/sandboxes/st-one?x=1",
                     "/v1/sandboxes//st-one", "/v1/sandboxes/x/../st-one",
                     "/v1/sandboxes/", "/v1/sandboxes/*", "/v1/sandboxes/%2A",
                     "/v1/sandboxes/%00", "/v1/sandboxes/keep-1/",
                     "/v1/sandboxes/keep-1?force=1", "/v1/sandboxes/keep"):
            with self.subTest(path=path):
                st, doc = self.A("DELETE", path)
                self.assertGreaterEqual(st, 400, doc)
        self.assertEqual(self.ids(), before)
        self.assertEqual(self.get("a.test", STATIC_SRC, "/a2/del-st")[0], 200)
        self.assertEqual(self.get("b.test", "127.0.0.67", "/a2/del-k")[0], 200)
        for path in ("/v1/sandboxes?x=1", "/v1/sandboxes/st-one/",
                     "/v1/sandboxes/st-one?x=1"):
            st, _ = self.A("GET", path)
            self.assertEqual(st, 404, path)

    def test_policy_names(self):
        """docs/policy.md: a static sandbox may use `default`, the implicit
        deny-all; a registered one under it is denied everything. Another
        spelling of an existing policy is not that policy: 400."""
        doc = self.register("pol-def", "default", "127.0.0.68")
        self.assertEqual(doc["placeholders"], [])
        self.assertEqual(self.get("a.test", "127.0.0.68", "/a2/def"),
                         (403, "policy-deny"))
        for name in ("PA", "pa ", "pa.", "nope"):
            with self.subTest(name=name):
                self.register("pol-x", name, "127.0.0.69", expect=400)

    def test_reload_prefix_over_registered_address(self):
        """docs/admin-api.md: "A reload that later gives a static sandbox a
        prefix holding a registered address leaves that address to the
        registered sandbox until it is removed"; a registration inside that
        prefix afterwards is 409."""
        self.addCleanup(self.restore_policy)
        self.register("cov-1", "pb", "127.0.0.70")
        self.gw.write_policy("p.yaml", policy_text(
            self.origin.port, self.tls.port,
            "  - id: cov-st\n    policy: pa\n    source: [127.0.0.64/26]\n"))
        st, doc = self.A("POST", "/v1/reload")
        self.assertEqual(st, 200, doc)
        self.assertEqual(self.get("b.test", "127.0.0.70", "/a2/cov-b")[0], 200)
        self.assertEqual(self.row_for("/a2/cov-b")[0][0], "cov-1")
        self.assertEqual(self.get("a.test", "127.0.0.71", "/a2/cov-a")[0], 200)
        self.assertEqual(self.row_for("/a2/cov-a")[0][0], "cov-st")
        self.register("cov-2", "pb", "127.0.0.72", expect=409)


if __name__ == "__main__":
    T.main()
