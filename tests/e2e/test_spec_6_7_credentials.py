#!/usr/bin/python3
"""
SPEC §6 (interception: the intercepted request must name the tunnel's host)
and §7 (credentials) read line by line, with the variants an attacker tries
after the obvious ones: an absolute-form target inside intercepted TLS that
names another host while carrying a placeholder, two Authorization headers
(placeholder and a key of one's own, either order), a lower-case header
name, the placeholder as the Basic user name, in a chunked request's
trailer, percent-encoded in the query, and the whole swap through a SOCKS5
tunnel. It reuses test_credentials' origins, CA and policy (the same
gateway set-up) and runs only the tests written here.
"""

import base64
import json
import os
import socket
import ssl
import struct
import sys
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_credentials as C  # noqa: E402


def go_json(v):
    """JSON-escaped as Go's encoding/json (and Rails) write it: HTML-safe."""
    return (json.dumps(v)[1:-1].replace("&", "\\u0026")
            .replace("<", "\\u003c").replace(">", "\\u003e"))


# The echo origin serves /leak/ENC/MODE with these encoders too: what other
# origins' frameworks write for "JSON-escaped" and "percent-encoded".
OTHER_ENCODERS = {
    "gojson": go_json,
    "pctslash": lambda v: urllib.parse.quote(v),          # "/" kept
    "pctplus": lambda v: urllib.parse.quote_plus(v),      # " " as "+"
    "pctjs": lambda v: urllib.parse.quote(v, safe="!'()*"),  # encodeURIComponent
}
C.ENCODERS.update(OTHER_ENCODERS)


class SpecCredentialsTest(C.CredentialsTest):
    """Only the tests below run (load_tests); the set-up is the parent's."""

    def test_s01_absolute_target_in_intercepted_tls_names_another_host(self):
        other = "other.test:%d" % self.other.port
        for i, (target, host) in enumerate((
                ("https://%s/s01-a" % other, "bound.test:%d" % self.bound.port),
                ("http://%s/s01-b" % other, "bound.test:%d" % self.bound.port),
                ("https://bound.test:%d/s01-c" % self.bound.port, other))):
            with self.subTest(target=target, host=host):
                c = self.tls_conn("bound.test")
                c.send("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer "
                       "%s\r\n\r\n" % (target, host, self.ph_a))
                r = self.got(c.read_response())
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                                 "host-mismatch", r)
        time.sleep(0.2)
        self.assertEqual(self.other.find("/s01"), [])
        self.assertEqual(self.bound.find("/s01"), [])
        self.assertFalse(self.other.received(self.secret))
        # The control: an absolute target naming the tunnel itself is served,
        # with the swap.
        c = self.tls_conn("bound.test")
        c.send("GET https://bound.test:%d/s01-ok HTTP/1.1\r\nHost: bound.test:%d"
               "\r\nAuthorization: Bearer %s\r\n\r\n" % (
                   self.bound.port, self.bound.port, self.ph_a))
        r = self.got(c.read_response())
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/s01-ok")["seen"],
                         self.secret)

    def test_s02_two_authorization_headers_are_foreign(self):
        for order in ((self.ph_a, C.ATTACKER_KEY), (C.ATTACKER_KEY, self.ph_a)):
            marker = "/m/s02-%s" % ("ph-first" if order[0] == self.ph_a
                                    else "key-first")
            with self.subTest(marker=marker):
                r = self.fetch(marker, [("Authorization", "Bearer " + order[0]),
                                        ("Authorization", "Bearer " + order[1])])
                self.assert_misuse(r, marker, reason="foreign-credential")
        self.assertEqual(self.bound.find("/m/s02"), [])
        self.assertFalse(self.bound.received(C.ATTACKER_KEY))

    def test_s03_header_names_any_case(self):
        r = self.fetch("/echo/s03", [("authorization", "Bearer " + self.ph_a)])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/s03")["seen"],
                         self.secret)
        r = self.fetch("/m/s03-foreign", [("AUTHORIZATION", "Bearer " +
                                           C.ATTACKER_KEY)])
        self.assert_misuse(r, "/m/s03-foreign", reason="foreign-credential")

    def test_s04_placeholder_as_basic_user_never_leaks_elsewhere(self):
        basic = "Basic " + base64.b64encode(
            ("%s:x" % self.ph_a).encode()).decode()
        r = self.fetch("/m/s04-other", [("Authorization", basic)],
                       host="other.test", port=self.other.port)
        self.assert_misuse(r, "/m/s04-other")
        self.assertEqual(self.other.find("/m/s04"), [])
        # To the bound host it is swapped or refused, never passed as is.
        r = self.fetch("/echo/s04-bound", [("Authorization", basic)])
        self.assertIn(r.status, (200, 403), r)
        if r.status == 200:
            rec = self.origin_seen(self.bound, "/echo/s04-bound")
            self.assertFalse(self.bound.received(self.ph_a), rec)

    def test_s05_placeholder_in_request_trailer(self):
        ph = self.ph_a
        half = len(ph) // 2
        for host, port in (("other.test", self.other.port),
                           ("bound.test", self.bound.port)):
            for split in (False, True):
                with self.subTest(host=host, split=split):
                    marker = "/m/s05-%s-%s" % (host, "split" if split else "one")
                    head = ("POST %s HTTP/1.1\r\nHost: %s:%d\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n"
                            "3\r\nabc\r\n0\r\nX-Key: " % (marker, host, port))
                    c = self.tls_conn(host, port)
                    if split:
                        c.send(head + ph[:half])
                        time.sleep(0.3 * T.SLOW)
                        c.send(ph[half:] + "\r\n\r\n")
                    else:
                        c.send(head + ph + "\r\n\r\n")
                    try:
                        r = self.got(c.read_response("POST"))
                    except (EOFError, ConnectionResetError, ssl.SSLError):
                        r = None
                    self.assert_misuse(r, marker)
                    # (Split, the head and "0\r\n" may have gone before the
                    # trailer was held back; the echo origin counts that
                    # cut-off request as complete, so only the 403 tells.)
                    origin = self.other if host == "other.test" else self.bound
                    if not split:
                        self.assertEqual([x for x in origin.find(marker)
                                          if x["complete"]], [])
        self.assertFalse(self.other.received(ph[:half]))
        # The control: a trailer without a placeholder goes through.
        c = self.tls_conn("other.test", self.other.port)
        r = self.got(c.request("POST /echo/s05-ok HTTP/1.1\r\nHost: other.test:%d"
                               "\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc"
                               "\r\n0\r\nX-T: 1\r\n\r\n" % self.other.port,
                               method="POST"))
        self.assertEqual(r.status, 200, r)

    def test_s06_percent_encoded_placeholder_in_query(self):
        enc = "".join("%%%02X" % ord(ch) for ch in self.ph_a)
        # Another host: the origin would decode it back into the placeholder.
        r = self.fetch("/m/s06-other?key=%s" % enc, host="other.test",
                       port=self.other.port)
        self.assert_misuse(r, "/m/s06-other")
        self.assertEqual(self.other.find("/m/s06"), [])
        # The bound host (query: true): swapped or refused, never passed.
        r = self.fetch("/echo/s06-bound?key=%s" % enc)
        self.assertIn(r.status, (200, 403), r)
        if r.status == 200:
            rec = self.origin_seen(self.bound, "/echo/s06-bound")
            self.assertEqual(rec["seen"], self.secret, rec)

    def socks_tls(self, host, port):
        s = socket.create_connection(("127.0.0.1", self.socks_port),
                                     timeout=10 * T.SLOW)
        self.addCleanup(s.close)
        s.sendall(b"\x05\x01\x00")
        self.assertEqual(s.recv(2), b"\x05\x00")
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() +
                  struct.pack("!H", port))
        rep = s.recv(10)
        self.assertEqual(rep[:2], b"\x05\x00", rep)
        c = T.Conn.__new__(T.Conn)
        c.sock = self.ctx.wrap_socket(s, server_hostname=host)
        c.buf = b""
        return c

    def test_s07_swap_and_misuse_through_socks5(self):
        c = self.socks_tls("bound.test", self.bound.port)
        r = self.got(c.request("GET /echo/s07 HTTP/1.1\r\nHost: bound.test:%d\r\n"
                               "Authorization: Bearer %s\r\n\r\n" % (
                                   self.bound.port, self.ph_a)))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/s07")["seen"],
                         self.secret)
        row = self.audit_row(lambda x: x["path"] == "/echo/s07", kind="socks5")
        self.assertEqual(row["credential"], "echo-key", row)
        c = self.socks_tls("other.test", self.other.port)
        r = self.got(c.request("GET /m/s07-other HTTP/1.1\r\nHost: other.test:%d"
                               "\r\nAuthorization: Bearer %s\r\n\r\n" % (
                                   self.other.port, self.ph_a)))
        self.assert_misuse(r, "/m/s07-other")
        self.assertEqual(self.other.find("/m/s07"), [])

    def test_s08_identity_encoding_asked_of_bound_hosts_only(self):
        r = self.fetch("/echo/s08", [self.bearer(self.ph_a),
                                     ("Accept-Encoding", "gzip, br"),
                                     ("accept-encoding", "deflate")])
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, "/echo/s08")
        self.assertEqual(self.header_of(rec, "Accept-Encoding"), ["identity"])
        # TE asks for transfer codings: none may come back compressed.
        r = self.fetch("/echo/s08-te", [self.bearer(self.ph_a),
                                        ("TE", "gzip"), ("Connection", "TE")])
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, "/echo/s08-te")
        self.assertEqual(self.header_of(rec, "TE"), [])


    def test_s09_scrub_other_encoders(self):
        # SECRET holds '&', '/', '+', ' ' and '"': a Go API echoes '&' as
        # \u0026, Python's quote keeps '/', forms write ' ' as '+'.
        for enc, fn in OTHER_ENCODERS.items():
            self.assertNotEqual(fn(self.secret), self.secret, enc)
            for mode in ("chunked", "length", "close"):
                with self.subTest(enc=enc, mode=mode):
                    path = "/leak/%s/%s/%d" % (enc, mode, time.monotonic_ns())
                    r = self.fetch(path, [self.bearer(self.ph_a)])
                    self.assertEqual(r.status, 200, r)
                    self.assertEqual(self.origin_seen(self.bound, path)["seen"],
                                     self.secret)
                    blob = r.raw_head + r.body
                    self.assertNotIn(fn(self.secret).encode(), blob)
                    self.assertEqual(r.header("X-Leak"), self.ph_a, r)
                    self.assertEqual(r.body.count(self.ph_a.encode()), 3,
                                     r.body)


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for name in sorted(vars(SpecCredentialsTest)):
        if name.startswith("test_s"):
            suite.addTest(SpecCredentialsTest(name))
    return suite


if __name__ == "__main__":
    T.main()
