#!/usr/bin/python3
"""
Credential bypasses found by a review, kept as regression tests: an
attacker who controls the sandbox's client, and a bound origin with an
ordinary echo/debug route. Each test_f* method asserts what SPEC section 7
and docs/credentials.md promise; each failed on the code before its fix
(a secret echoed into a response header's name, Range answers that give
the secret back in pieces, a placeholder as the method, in a header's
name or in a chunk extension going to a host it is not bound to). The
test_h* methods are probes that held.

A raw, programmable HTTPS origin of our own (one per host) answers by
path: /hname (the Authorization value reflected into a response header
NAME), /range (an echo of the request head that honours Range, as static
handlers and many frameworks do), /echo (the request head as the body).
"""

import json
import os
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA, admin_request, placeholders_of  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
# A realistic API key: only token characters, so raw == every percent form.
SECRET = "sk-probe-R3alS3cretValue-0123456789abcdefXYZqrstuvw"
FIXED_SECRET = "fx-probe-fixed-secret-0123456789"
FIXED_PH = "SGPROBEFIXED0001"  # 16 characters: short enough to be a method


# ---------------------------------------------------------------- origin

class RawOrigin(T.ScriptedOrigin):
    """The API, answering by path (below)."""

    def __init__(self, cert, key):
        super().__init__(cert, key, ORIGIN_HOST, alpn=None)

    def received(self, needle, marker=""):
        """needle in a request (whose request line holds marker)."""
        return self.got(needle, marker)

    def answer(self, req):
        return self.respond(req["path"], req["method"], req["head"],
                            req["hmap"]), False

    def respond(self, path, method, head, hmap):
        auth = hmap.get("authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else auth
        if path.startswith("/hname"):
            # A debug route that reports the caller's key in a header name
            # (e.g. a per-key rate-limit bucket header).
            body = b"ok\n"
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"X-Key-" + tok.encode() + b": seen\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if path.startswith("/range"):
            full = head  # the request head as the body, as an echo does
            rng = hmap.get("range")
            if rng:
                specs = rng.split("=", 1)[1].split(",")
                parts = []
                for sp in specs:
                    a, b = sp.strip().split("-")
                    a, b = int(a), min(int(b), len(full) - 1)
                    parts.append((a, b))
                if len(parts) == 1:
                    a, b = parts[0]
                    body = full[a:b + 1]
                    return (b"HTTP/1.1 206 Partial Content\r\n"
                            b"Content-Type: text/plain\r\n"
                            b"Content-Range: bytes %d-%d/%d\r\n"
                            b"Content-Length: %d\r\n\r\n" % (a, b, len(full),
                            len(body)) + body)
                bnd = b"SGBOUNDARY"
                body = b""
                for a, b in parts:
                    body += (b"--" + bnd + b"\r\nContent-Type: text/plain\r\n"
                             b"Content-Range: bytes %d-%d/%d\r\n\r\n" % (
                                 a, b, len(full)) + full[a:b + 1] + b"\r\n")
                body += b"--" + bnd + b"--\r\n"
                return (b"HTTP/1.1 206 Partial Content\r\n"
                        b"Content-Type: multipart/byteranges; boundary=" + bnd +
                        b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Accept-Ranges: bytes\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(full) + full)
        if path.startswith("/early103"):
            body = b"ok\n"
            return (b"HTTP/1.1 103 Early Hints\r\nX-Key-" + tok.encode() +
                    b": 1\r\nLink: </" + tok.encode() + b">\r\n\r\n"
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                    + body)
        body = head
        if method == "HEAD":
            body = b""
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n\r\n" % len(head) + body)


POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{bound}]
        tls: intercept
      - host: other.test
        ports: [{other}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [probe-key, fixed-key]
credentials:
  - name: fixed-key
    secret: fixed-secret
    hosts: [bound.test]
    headers: [X-Api-Key]
    placeholder: "{fixed_ph}"
  - name: probe-key
    secret: probe-secret
    hosts: [bound.test]
    headers: [Authorization]
    query: true
    env: PROBE_KEY
"""


class CredProbeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-credprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cls.bound = RawOrigin(*cls.pki.leaf("bound.test", ["bound.test"]))
        cls.addClassCleanup(cls.bound.stop)
        cls.other = RawOrigin(*cls.pki.leaf("other.test", ["other.test"]))
        cls.addClassCleanup(cls.other.stop)
        cls.dns = T.Dnsmasq(d, [("bound.test", ORIGIN_HOST),
                                ("other.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.admin_sock = os.path.join(d, "admin.sock")
        policy = POLICY.format(bound=cls.bound.port, other=cls.other.port,
                               origin=ORIGIN_HOST, fixed_ph=FIXED_PH)
        cls.gw = T.Gateway(d, cls.dns, {"probe.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert},
            "listen": {"admin": cls.admin_sock}})
        cls.gw.vault_set(("probe-secret", SECRET), ("fixed-secret", FIXED_SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.wait_admin(cls.admin_sock)
        cls.ctx = ssl.create_default_context(cafile=cls.gw_ca)
        st, _, doc = admin_request(cls.admin_sock, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        lst = {e["id"]: e for e in doc["sandboxes"]}
        cls.ph = placeholders_of(lst["box-a"])["probe-key"]["placeholder"]

    # ------------------------------------------------------------ helpers

    def tls_conn(self, host):
        port = self.bound.port if host == "bound.test" else self.other.port
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c, port

    def req(self, host, raw, method="GET"):
        c, port = self.tls_conn(host)
        c.send(raw.replace("{HOST}", "%s:%d" % (host, port)))
        try:
            return c.read_response(method)
        except (EOFError, ConnectionResetError, ssl.SSLError):
            return None

    # ------------------------------------------------------------ findings

    def test_f1_secret_in_response_header_name_not_scrubbed(self):
        """A bound host's echo of the key in a response header *name*."""
        r = self.req("bound.test", "GET /hname HTTP/1.1\r\nHost: {HOST}\r\n"
                     "Authorization: Bearer %s\r\n\r\n" % self.ph)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.bound.received(SECRET, "/hname"))  # the swap happened
        self.assertNotIn(SECRET.encode(), r.raw_head + r.body,
                         "the real secret reached the client: %r" % r.raw_head)

    def test_f1b_secret_in_1xx_header_name_not_scrubbed(self):
        """The same in an interim (103) response's header name."""
        c, port = self.tls_conn("bound.test")
        c.send("GET /early103 HTTP/1.1\r\nHost: bound.test:%d\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (port, self.ph))
        r1 = c.read_response()
        self.assertEqual(r1.status, 103, r1)
        r2 = c.read_response()
        blob = r1.raw_head + r2.raw_head + r2.body
        self.assertNotIn(SECRET.encode(), blob,
                         "the real secret reached the client: %r" % blob)

    def test_f1c_secret_in_response_header_name_http2_client(self):
        """The client speaks HTTP/2 (curl --http2), the origin HTTP/1.1."""
        r = T.curl("https://bound.test:%d/hname-h2" % self.bound.port,
                   proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca,
                   "-H", "Authorization: Bearer %s" % self.ph], tmp=self.td.path)
        self.assertEqual(r.info.get("http_version"), "2", r)
        self.assertTrue(self.bound.received(SECRET, "/hname-h2"))
        seen = json.dumps(r.blocks).lower() + r.stderr.lower()
        self.assertNotIn(SECRET.lower(), seen,
                         "the secret (lower-cased by HTTP/2) reached the "
                         "client: %r %r" % (r.blocks, r.stderr))

    def test_f2_range_dropped_when_a_secret_is_swapped(self):
        """
        An echo route that honours Range would hand back the secret in
        pieces the client picks (no whole encoding for the scrubber to
        find; pieces with overlapping ranges, or one multipart/byteranges
        answer, give the whole). A request into which a secret is swapped
        goes without Range and If-Range: the origin answers whole, and the
        whole is scrubbed. Without a secret in it, Range goes too (a host
        bound to a credential may show a key it keeps: test_scrub_probe
        f01), while another host keeps it.
        """
        base = ("GET /range HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer "
                "%s\r\n" % self.ph)
        r = self.req("bound.test", base + "\r\n")
        self.assertEqual(r.status, 200, r)
        i = r.body.index(b"Authorization: Bearer ") + len(b"Authorization: Bearer ")
        half = len(SECRET) // 2
        for rng in ("bytes=%d-%d" % (i, i + 7), "bytes=%d-" % (i + 8),
                    "bytes=%d-%d,%d-%d" % (i, i + half - 1, i + half,
                                           i + len(SECRET) - 1),
                    "bytes=-40"):
            for extra in ("", "If-Range: \"x\"\r\n"):
                rr = self.req("bound.test", base + "Range: %s\r\n%s\r\n" % (
                    rng, extra))
                self.assertEqual(rr.status, 200, (rng, rr))
                # the body is the head the origin got: no Range in it
                self.assertNotIn(b"\r\nRange:", rr.body, rng)
                self.assertNotIn(b"\r\nIf-Range:", rr.body, rng)
                self.assertIn(self.ph.encode(), rr.body)
                for k in range(len(SECRET) - 7):
                    self.assertNotIn(SECRET[k:k + 8].encode(), rr.body,
                                     "a piece of the secret came back (%s)" % rng)
        rr = self.req("bound.test", "GET /range HTTP/1.1\r\nHost: {HOST}\r\n"
                      "Range: bytes=0-9\r\n\r\n")
        self.assertEqual(rr.status, 200, rr)
        self.assertNotIn(b"\r\nRange:", rr.body)
        rr = self.req("other.test", "GET /range HTTP/1.1\r\nHost: {HOST}\r\n"
                      "Range: bytes=0-9\r\n\r\n")
        self.assertEqual(rr.status, 206, rr)
        self.assertEqual(rr.body, b"GET /range")

    def test_f3_placeholder_in_header_name_to_other_host(self):
        r = self.req("other.test", "GET /f3 HTTP/1.1\r\nHost: {HOST}\r\n"
                     "X-%s: 1\r\n\r\n" % self.ph)
        time.sleep(0.2)
        self.assertFalse(self.other.received(self.ph, "/f3"),
                         "placeholder in a header name reached other.test "
                         "(response %r)" % r)

    def test_f4_placeholder_as_method_to_other_host(self):
        """A fixed placeholder (16 to 23 characters) as the request method."""
        r = self.req("other.test", "%s /f4 HTTP/1.1\r\nHost: {HOST}\r\n\r\n" %
                     FIXED_PH)
        time.sleep(0.2)
        self.assertFalse(self.other.received(FIXED_PH, "/f4"),
                         "placeholder as the method reached other.test "
                         "(response %r)" % r)

    def test_f5_placeholder_in_chunk_extension_to_other_host(self):
        r = self.req("other.test", "POST /f5 HTTP/1.1\r\nHost: {HOST}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"
                     "3;x=%s\r\nabc\r\n0\r\n\r\n" % self.ph, method="POST")
        time.sleep(0.2)
        self.assertFalse(self.other.received(self.ph, "/f5"),
                         "placeholder in a chunk extension reached other.test "
                         "(response %r)" % r)

    def test_f3b_placeholder_in_header_name_http2(self):
        """The same over HTTP/2 (curl --http2 through the CONNECT tunnel)."""
        r = T.curl("https://other.test:%d/f3b" % self.other.port,
                   proxy=self.gw.url, args=["--http2", "--cacert", self.gw_ca,
                   "-H", "x-%s: 1" % self.ph], tmp=self.td.path)
        self.assertEqual(r.info.get("http_version"), "2", r)
        time.sleep(0.2)
        self.assertFalse(self.other.received(self.ph, "/f3b"),
                         "placeholder in an h2 field name reached other.test "
                         "(status %r)" % r.status)

    # ------------------------------------------------------------ held

    def test_h1_control_swap_and_echo_scrubbed(self):
        r = self.req("bound.test", "GET /echo HTTP/1.1\r\nHost: {HOST}\r\n"
                     "Authorization: Bearer %s\r\n\r\n" % self.ph)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.bound.received(SECRET, "/echo"))
        self.assertNotIn(SECRET.encode(), r.raw_head + r.body)
        self.assertIn(self.ph.encode(), r.body)

    def test_h2_placeholder_in_header_value_to_other_host(self):
        r = self.req("other.test", "GET /h2 HTTP/1.1\r\nHost: {HOST}\r\n"
                     "X-K: %s\r\n\r\n" % self.ph)
        self.assertEqual(r.status, 403, r)
        self.assertFalse(self.other.received(self.ph, "/h2"))


if __name__ == "__main__":
    T.main()
