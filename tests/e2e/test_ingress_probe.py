#!/usr/bin/python3
"""
Probes of the ingress listener (SPEC section 10, docs/ingress.md) and its
audit rows (docs/audit.md "Ingress rows"): one static sandbox with a token
("web", guest on 127.0.0.2) and one public one ("pub", guest on 127.0.0.3),
both loopback origins, no launcher.

What held (not repeated here; see the report of branch probe-ingress): Host
tricks (duplicate Host, userinfo, comma, NUL, obs-fold, brackets, leading-zero
port, absolute form naming the public sandbox with Host naming the token one)
never reached the token sandbox's guest; every token spelling a browser sends
(header twice, cookie twice, two Cookie headers, query twice, percent-encoded
parameter name) was cut before the guest and out of the rows; CONNECT and
OPTIONS * are 400; a non-101 answer to an upgrade closes the connection so a
pipelined request to the other sandbox is never relayed; an open WebSocket's
row is written at SIGTERM; head timeouts, 414 and 431 have rows; a forged
retention row in a path does not excuse deleted rows in `audit verify`.
"""

import os
import sys
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

DOMAIN = "sandbox.localhost"
TOKEN = "tokW-9c8b7a6d5e4f3"


class IngressProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-ingprobe-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.gw_guest = T.Origin("guest-web", host="127.0.0.2")
        cls.addClassCleanup(cls.gw_guest.stop)
        cls.pub_guest = T.Origin("guest-pub", host="127.0.0.3")
        cls.addClassCleanup(cls.pub_guest.stop)
        cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        cls.iport = T.free_port()
        policy = {
            "sandboxes": [
                {"id": "web", "policy": "p",
                 "ingress": {"address": "127.0.0.2",
                             "ports": [cls.gw_guest.port],
                             "token_sha256": T.sha256_hex(TOKEN)}},
                {"id": "pub", "policy": "p",
                 "ingress": {"address": "127.0.0.3",
                             "ports": [cls.pub_guest.port], "public": True}},
            ],
            "policies": [{"name": "p", "allow": [{"host": "allowed.test"}]}],
        }
        cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy}, extra={
            "listen": {"ingress": "127.0.0.1:%d" % cls.iport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.iport, 10 * T.SLOW, cls.gw.proc):
            raise RuntimeError("ingress not up:\n" + cls.gw.log_tail())
        cls.hw = "%d-web.%s" % (cls.gw_guest.port, DOMAIN)
        cls.hp = "%d-pub.%s" % (cls.pub_guest.port, DOMAIN)

    def send(self, data):
        """One request on a fresh connection: (Response, client addr:port)."""
        c = T.Conn(self.iport)
        self.addCleanup(c.close)
        client = "%s:%d" % c.sock.getsockname()[:2]
        c.send(data)
        return c.read_response(), client

    # ------------------------------------------------ the token link's 302

    def _redirect_stays_on_host(self, target, host=None):
        r, _ = self.send("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (
            target, host or self.hw))
        self.assertEqual(r.status, 302, r)
        loc = r.header("Location")
        # How a browser reads a Location (WHATWG URL, http is a special
        # scheme): "\" counts as "/", and a value starting with two of them
        # is a network-path reference naming another host.
        lead = loc.replace("\\", "/")
        self.assertFalse(lead.startswith("//"),
            "the token link %r is answered 302 Location: %r, which a browser "
            "follows to another host" % (target, loc))
        base = "http://%s:%d/" % (self.hw, self.iport)
        self.assertEqual(urllib.parse.urlsplit(urllib.parse.urljoin(
            base, lead)).hostname, self.hw, loc)
        return loc

    def test_token_link_redirect_stays_on_host(self):
        """docs/ingress.md "Tokens and cookies" 1.: `?sg_token=TOKEN` is
        answered `302 Found` with `Location:` "the same path and query
        without sg_token" -- the way back to this sandbox's page, on this
        host. Sent: `GET //evil.example/x?sg_token=TOKEN` with `Host:
        PORT-web.sandbox.localhost` and the right token. It was answered 302
        `Location: //evil.example/x` (and the Set-Cookie), a network-path
        reference (RFC 3986 section 4.2): resolved against the request URL
        it names host evil.example (checked here with urljoin). So a token
        link on the gateway's own domain redirects to any site. Needs a
        valid token in the link. Now the Location is "/.//evil.example/x":
        the same path, on this host."""
        base = "http://%s:%d/" % (self.hw, self.iport)
        self.assertEqual(urllib.parse.urlsplit(urllib.parse.urljoin(
            base, "//evil.example/x")).hostname, "evil.example")
        loc = self._redirect_stays_on_host("//evil.example/x?sg_token=" +
                                           TOKEN)
        self.assertEqual(loc, "/.//evil.example/x")
        # Variants: three slashes, absolute form, the query kept.
        self._redirect_stays_on_host("///evil.example/x?sg_token=" + TOKEN)
        loc = self._redirect_stays_on_host(
            "http://%s:%d//evil.example/y?a=1&sg_token=%s" % (
                self.hw, self.iport, TOKEN))
        self.assertEqual(loc, "/.//evil.example/y?a=1")

    def test_token_link_redirect_stays_on_host_backslash(self):
        """As above with `GET /\\evil.example/x?sg_token=TOKEN`: Location is
        `/\\evil.example/x`; the WHATWG URL Standard (what browsers parse
        Location with) reads a backslash as a slash in http URLs, so this
        was the same network-path reference to evil.example."""
        for t in ("/\\evil.example/x", "/\\\\evil.example/x",
                  "/\\/evil.example/x"):
            with self.subTest(target=t):
                self._redirect_stays_on_host(t + "?sg_token=" + TOKEN)

    # ------------------------------------------------ audit row fields

    def test_refused_row_host_without_port(self):
        """docs/audit.md "Ingress rows": `host` is "the host it asked for,
        lower-case, without port (`8000-web.sandbox.localhost`)". Sent:
        `GET /p08 HTTP/1.1` with `Host: PORT-WEB.Sandbox.Localhost:08080`
        (a leading-zero listener port: 400 bad-request, docs/ingress.md
        "Routing"). The 400 row's host was the header as sent, port
        included (`PORT-web.sandbox.localhost:08080`), where the docs say
        a row's host has no port."""
        host = self.hw.upper().replace("SANDBOX.LOCALHOST", "Sandbox.Localhost")
        r, client = self.send("GET /p08 HTTP/1.1\r\nHost: %s:08080\r\n\r\n" % host)
        self.assertEqual(r.status, 400, r)
        rows = self.gw.wait_audit(kind="ingress", client=client)
        self.assertEqual(len(rows), 1, rows)
        self.assertIn(rows[0]["host"], (None, self.hw), rows[0])

    # ------------------------------------------------ passing control

    def test_control_public_cannot_open_token_sandbox(self):
        """Absolute form naming the public sandbox, Host naming the token
        one, and the reverse: the token sandbox's guest sees nothing and its
        row is a 401 (docs/ingress.md "Routing": the authority wins)."""
        r, _ = self.send("GET http://%s/ctl1 HTTP/1.1\r\nHost: %s\r\n\r\n"
                         % (self.hp, self.hw))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["origin"], "guest-pub")
        r, _ = self.send("GET http://%s/ctl2 HTTP/1.1\r\nHost: %s\r\n\r\n"
                         % (self.hw, self.hp))
        self.assertEqual(r.status, 401, r)
        time.sleep(0.2)
        self.assertEqual([q for q in self.gw_guest.requests
                          if q["path"].startswith("/ctl")], [])


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
