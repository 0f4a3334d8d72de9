"""
What the path-rule tests (test_ambiguous_path.py, test_path_params.py)
share: a plain and a TLS origin on one address, dnsmasq answering the test's
host names with it, a gateway whose one policy file names both origins'
ports and trusts the TLS origin's certificate, a client TLS context that
trusts the gateway's CA, requests inside an intercepted tunnel, and the
per-request markers that tell one request's rows and origin logs apart.
"""

import itertools
import os
import ssl

import sgtest as T
import auditcheck as AC

ORIGIN_HOST = "127.0.0.2"
NOTHING = AC.one_of(0, None)
_seq = itertools.count(1)


def mark(template):
    """template with "{m}" replaced by a fresh marker; (path, marker)."""
    m = "m%d-%d" % (os.getpid(), next(_seq))
    return template.format(m=m), m


class PathRules:
    """Mixin for a unittest.TestCase: start() from setUpClass."""

    @classmethod
    def start(cls, prefix, hosts, policy_file, policy, tls_names=None,
              **gateway_kw):
        """
        The origins (cls.origin, cls.tls_origin: its certificate is for
        tls.test and tls_names), dnsmasq answering hosts with ORIGIN_HOST,
        and the gateway with policy_file: policy formatted with http, https
        (the origins' ports) and origin (ORIGIN_HOST); gateway_kw go to
        sgtest.Gateway. Sets cls.td, dns, gw, gw_ca and ctx (trusting
        gw_ca); each part is stopped by the class cleanups.
        """
        T.require_binary()
        cls.td = T.TempDir(prefix)
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cert, key = T.make_cert(d, "tls.test", names=tls_names)
        cls.tls_origin = T.Origin("tls", ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.tls_origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in hosts])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {policy_file: policy.format(
            http=cls.origin.port, https=cls.tls_origin.port,
            origin=ORIGIN_HOST)}, extra={"upstream": {"ca_bundle": cert}},
            **gateway_kw)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = cls.gw.client_context()

    def setUp(self):
        self.audit = AC.Audit(self, self.gw)

    def intercepted(self, host, path):
        """One HTTP/1.1 request inside a fresh intercepted tunnel to host on
        the TLS origin's port; the Response, or None when closed without."""
        port = self.tls_origin.port
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, port))
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.send(("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
                (path, host, port)).encode())
        try:
            return c.read_response("GET")
        except (EOFError, ConnectionResetError, ssl.SSLError):
            return None

    @staticmethod
    def saw(origin, m):
        """The paths origin was asked for that hold the marker m."""
        return [r["path"] for r in origin.requests if m in r["path"]]
