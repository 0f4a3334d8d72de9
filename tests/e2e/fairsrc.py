"""
What the fair-share tests (test_fair_source.py, test_fair_source_full.py)
start with: an origin, dnsmasq answering allowed.test with its address, and
a gateway as a default install runs it (user: sandgate) with an HTTP and a
SOCKS5 listener, whose sandboxes are told apart by source address.
"""

import sgtest as T

ORIGIN = "127.0.0.9"


def start(cls, prefix, sources, limits):
    """
    Start it all for the test class cls, each part stopped by its class
    cleanups. sources: {sandbox id: source address}, every sandbox on one
    policy "p" that allows allowed.test on the origin's port; limits: the
    config's limits section. Sets cls.td, origin, dns, sport (the SOCKS5
    port), gw and url (http://allowed.test:PORT).
    """
    T.require_binary()
    cls.td = T.TempDir(prefix)
    cls.addClassCleanup(cls.td.cleanup)
    cls.origin = T.Origin("origin", host=ORIGIN)
    cls.addClassCleanup(cls.origin.stop)
    cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", ORIGIN)])
    cls.addClassCleanup(cls.dns.stop)
    policy = {
        "sandboxes": [T.local_sandbox("p", sid=sid, source=addr + "/32")
                      for sid, addr in sources.items()],
        "policies": [{"name": "p",
                      "allow": [{"host": "allowed.test",
                                 "ports": [cls.origin.port]}],
                      "allow_private": [ORIGIN + "/32"]}],
    }
    cls.sport = T.free_port()
    cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy}, extra={
        "listen": {"socks5": "127.0.0.1:%d" % cls.sport},
        "limits": limits}, user="sandgate")
    cls.gw.start()
    cls.addClassCleanup(cls.gw.stop)
    if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
        raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())
    cls.url = "http://allowed.test:%d" % cls.origin.port
