#!/usr/bin/python3
"""
Attacker probes of the transparent listener (docs/protocols.md
"Transparent"; SPEC "Transparent"): a sandbox namespace whose only way out
is nftables redirection to the gateway (test_transparent.py's topology,
renamed tpp-*), origins in a "fake internet" namespace. Needs root, `ip
netns` and `nft`; exits 77 otherwise.

FOUND (audit only; every refusal itself held):
- test_http_refusal_row_names_refused_address: Host: allowed.test aimed at
  another address over HTTP is refused (403 destination-ip-prohibited) but
  the row has ip NULL; the TLS variant's row names the address
  (proxy_transparent.c deny(): fwd.ip = orig_dst only when not HTTP).
- test_http10_without_host: "GET /nohost HTTP/1.0" with no Host -> 400
  bad-request, but the row has port NULL and ip NULL: nothing says where the
  redirected connection was going (deny before any target is set).

Tried, held (one line each):
- keep-alive: second pipelined request with Host: forbidden.test -> 403
  host-mismatch row, never relayed;
- absolute-form target naming forbidden.test with Host: allowed.test ->
  403 host-mismatch, never relayed;
- two Host headers (allowed.test, forbidden.test) -> 4xx, origin never sees
  forbidden.test;
- Host: allowed.test to the gateway's own address -> 403
  destination-ip-prohibited;
- Host: <cidr-rule IP literal> to another address -> refused;
- SNI allowed.test to the forbidden address, ClientHello in three writes
  -> access_denied, destination-ip-prohibited, no connection;
- ClientHello split over two TLS records -> refused, no connection;
- SNI forbidden.test to a cidr opaque address -> access_denied policy-deny;
- second ClientHello naming forbidden.test on a transparent passthrough,
  pipelined and after a real HelloRetryRequest -> access_denied,
  sni-mismatch (the CONNECT/SOCKS5 fix covers transparent: tlswatch_start);
- covered elsewhere, not repeated: no-SNI to cidr-opaque vs other address,
  opaque bytes to an HTTP-only port, silence then TLS, UDP other than DNS
  (nftables drops it: test_transparent.test_no_other_way_out), IPv6
  (TransparentV6Test).
"""

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402
import test_transparent as TT  # noqa: E402
from test_front_probe import (client_hello, NO_SHARES, x25519_share,  # noqa
    HRR_RANDOM, ACCESS_DENIED)

PY = "/usr/bin/python3"

# Send chunks (hex, delay after each), then read until EOF/reset/timeout.
CHUNK_CLIENT = r"""
import json, socket, sys, time
host, port, chunks, wait = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4])
out = {"received": "", "end": None, "sent": 0}
s = socket.socket()
s.settimeout(wait)
try:
    s.connect((host, port))
    for hx, delay in chunks:
        s.sendall(bytes.fromhex(hx))
        out["sent"] += 1
        if delay:
            time.sleep(delay)
    deadline = time.time() + wait
    while time.time() < deadline:
        b = s.recv(65536)
        if not b:
            out["end"] = "eof"
            break
        out["received"] += b.hex()
except ConnectionResetError:
    out["end"] = "reset"
except socket.timeout:
    out["end"] = out["end"] or "timeout"
except OSError as e:
    out["end"] = "error: %s" % e
print(json.dumps(out))
"""

# ClientHello #1 (allowed name, no usable key share), read the answer record,
# then ClientHello #2 naming another name; what came back after it.
HRR_CLIENT = r"""
import json, socket, struct, sys
host, port, ch1, ch2 = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), bytes.fromhex(sys.argv[4])
out = {"first": "", "got": "", "end": None}
s = socket.create_connection((host, port), timeout=5)
def exact(n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b
try:
    s.sendall(ch1)
    h = exact(5)
    out["first"] = (h + exact(struct.unpack(">H", h[3:5])[0])).hex()
    s.sendall(ch2)
    while True:
        b = s.recv(65536)
        if not b:
            out["end"] = "eof"
            break
        out["got"] += b.hex()
except (ConnectionResetError, EOFError):
    out["end"] = "reset/eof"
except socket.timeout:
    out["end"] = "timeout"
print(json.dumps(out))
"""


class TppTopology(TT.Topology):
    """test_transparent's topology, every name prefixed tpp."""

    def __init__(self, tmp):
        super().__init__(tmp)
        sfx = "%05x" % random.getrandbits(20)
        self.sfx = sfx
        self.sb = "tpp-sb-" + sfx
        self.net = "tpp-net-" + sfx
        self.veth_sb = "tppsb" + sfx
        self.veth_net = "tppnt" + sfx
        self.table = "tpp_" + sfx
        self.netns_etc = "/etc/netns/" + self.sb


_topos = []


def preflight():
    if os.geteuid() != 0:
        T.skip_file("needs root (network namespaces, veth, nftables)")
    for tool in (TT.IP, TT.NFT, TT.SYSCTL):
        if not os.access(tool, os.X_OK):
            T.skip_file("%s is not installed" % tool)
    probe = "tpp-probe-%05x" % random.getrandbits(20)
    r = subprocess.run([TT.IP, "netns", "add", probe],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        T.skip_file("`ip netns add` does not work here")
    subprocess.run([TT.IP, "netns", "del", probe])


class TransparentProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir(prefix="tpp-probe-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.chmod(d, 0o755)
        topo = cls.topo = TppTopology(d)
        _topos.append(topo)
        cls.addClassCleanup(topo.teardown)
        topo.build()
        cls.nsx = [TT.IP, "netns", "exec", topo.sb]
        n = topo.net_ip
        cls.main_ip, cls.evil_ip, cls.cidr_ip = n[2], n[3], n[4]
        cls.testca, crt, key = H.make_ca_and_leaf(d,
            ["allowed.test", "forbidden.test"])
        spec = [
            {"id": "http-main", "kind": "http", "host": n[2], "port": 80},
            {"id": "https-main", "kind": "https", "host": n[2], "port": 443,
             "cert": crt, "key": key},
            {"id": "rec-main", "kind": "record", "host": n[2], "port": 2323},
            {"id": "http-evil", "kind": "http", "host": n[3], "port": 80},
            {"id": "https-evil", "kind": "https", "host": n[3], "port": 443,
             "cert": crt, "key": key},
            {"id": "banner-cidr", "kind": "banner", "host": n[4],
             "port": 2222, "banner": "SSH-2.0-cidr-origin\r\n"},
        ]
        cls.origins, cls.status_path = H.start_origins(d, topo.net,
            TT.ORIGINS, spec, "origins", cls.addClassCleanup)
        recs = [("allowed.test", n[2]), ("forbidden.test", n[3]),
                ("shared-forbidden.test", n[2])]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)
        cls.tport = TT.TransparentTest.free_gw_port.__func__(cls)
        cls.dport = TT.TransparentTest.free_gw_port.__func__(cls, udp=True,
            avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)
        cls.pol = "tpp"
        policy = {
            "sandboxes": [{"id": "sbx", "policy": cls.pol,
                           "source": [topo.sb_ip + "/32"]}],
            "policies": [{
                "name": cls.pol,
                "allow": [
                    {"host": "allowed.test", "ports": [80, 443, 2323]},  # 0
                    {"cidr": n[4] + "/32", "ports": [2222],              # 1
                     "opaque": True},
                ],
                "deny": [{"host": "forbidden.test"},
                         {"host": "shared-forbidden.test"}],
                "allow_private": ["198.19.0.0/16"],
            }],
        }
        cls.gw = T.Gateway(d, cls.dns, {"tpp.yaml": policy}, extra={
            "listen": {"transparent": "%s:%d" % (topo.gw_ip, cls.tport),
                       "dns": "%s:%d" % (topo.gw_ip, cls.dport)},
            "upstream": {"ca_bundle": cls.testca},
        })
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp(topo.gw_ip, cls.tport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("transparent listener not up:\n" +
                cls.gw.log_tail())

    status = TT.TransparentTest.status
    conns = TT.TransparentTest.conns
    wait_conns = TT.TransparentTest.wait_conns
    settled_conns = TT.TransparentTest.settled_conns
    sb_dig = TT.TransparentTest.sb_dig
    audit = TT.TransparentTest.audit
    assert_row = TT.TransparentTest.assert_row

    def chunks(self, ip, port, chunks, wait=3.0):
        arg = json.dumps([[c.hex(), dl] for c, dl in chunks])
        r = TT.run(self.nsx + [PY, "-c", CHUNK_CLIENT, ip, str(port), arg,
            str(wait)], timeout=wait + 30)
        out = json.loads(r.stdout.decode())
        out["bytes"] = bytes.fromhex(out["received"])
        return out

    def http(self, ip, port, req, wait=3.0):
        out = self.chunks(ip, port, [(req.encode("latin-1"), 0)], wait)
        return out["bytes"].decode("latin-1"), out

    def last_id(self):
        return max([0] + [x["id"] for x in self.gw.audit_rows()])

    def rows_after(self, last):
        return [(r["kind"], r["host"], r["ip"], r["port"], r["path"],
                 r["status"], r["decision"], r["reason"])
                for r in self.gw.audit_rows() if r["id"] > last]

    # ------------------------------------------------------------ HTTP

    def test_keepalive_second_request_other_host(self):
        """docs/protocols.md: an HTTP request's Host is the name. On one
        redirected connection to allowed.test's address, GET /ka-ok
        (Host: allowed.test) and GET /ka-evil (Host: forbidden.test)
        pipelined: the second must be refused (403, its own transparent
        row) and never reach an origin."""
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        resp, out = self.http(self.main_ip, 80,
            "GET /ka-ok HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
            "GET /ka-evil HTTP/1.1\r\nHost: forbidden.test\r\n"
            "Connection: close\r\n\r\n")
        self.assertTrue(resp.startswith("HTTP/1.1 200"), out)
        self.assertIn("HTTP/1.1 403", resp, out)
        time.sleep(0.2)
        lines = self.status("http-main")["request_lines"] + \
            self.status("http-evil")["request_lines"]
        self.assertFalse([l for l in lines if "ka-evil" in l], lines)
        row = self.audit(kind="transparent", path="/ka-evil")
        self.assert_row(row, decision="deny", status=403, sandbox="sbx")

    def test_absolute_form_names_other_host(self):
        """An absolute-form target naming forbidden.test, Host:
        allowed.test, to allowed.test's address: an origin reading the
        target would serve forbidden.test. Must be refused, not relayed."""
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        last = self.last_id()
        resp, out = self.http(self.main_ip, 80,
            "GET http://forbidden.test/abs-evil HTTP/1.1\r\n"
            "Host: allowed.test\r\nConnection: close\r\n\r\n")
        self.assertTrue(resp.startswith("HTTP/1.1 4"), out)
        time.sleep(0.2)
        lines = self.status("http-main")["request_lines"]
        self.assertFalse([l for l in lines if "abs-evil" in l], lines)
        row = self.audit(kind="transparent", path="/abs-evil",
            pred=lambda r: r["id"] > last)
        self.assert_row(row, decision="deny", reason="host-mismatch",
            sandbox="sbx", status=403)

    def test_http10_without_host(self):
        """HTTP/1.0 without Host to allowed.test's address: no name, so
        400 (bad-request) and a transparent deny row naming the address;
        nothing reaches the origin."""
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        before = self.conns("http-main")
        last = self.last_id()
        resp, out = self.http(self.main_ip, 80, "GET /nohost HTTP/1.0\r\n\r\n")
        self.assertTrue(resp.startswith("HTTP/1.") and " 400 " in
            resp.split("\r\n")[0], out)
        self.assertEqual(self.settled_conns("http-main"), before)
        rows = self.gw.wait_audit(kind="transparent",
            pred=lambda r: r["id"] > last)
        self.assertTrue(rows, self.rows_after(last))
        self.assert_row(rows[-1], decision="deny", reason="bad-request",
            sandbox="sbx")
        # docs/audit.md: port "the destination port"; ip "the address the
        # gateway connected to or refused" -- the original destination
        self.assertEqual((rows[-1]["port"], rows[-1]["ip"]),
            (80, self.main_ip), "the refusal row does not say where the "
            "connection was going: %r" % rows[-1])

    def test_two_host_headers(self):
        """Host: allowed.test and Host: forbidden.test in one request:
        refused (RFC 9112 3.2: 400); the origin never sees forbidden.test."""
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        resp, out = self.http(self.main_ip, 80,
            "GET /two-hosts HTTP/1.1\r\nHost: allowed.test\r\n"
            "Host: forbidden.test\r\nConnection: close\r\n\r\n")
        time.sleep(0.2)
        hosts = self.status("http-main")["hosts"]
        self.assertNotIn("forbidden.test", hosts)
        self.assertTrue(resp.startswith("HTTP/1.1 4"), out)

    def test_allowed_host_to_gateway_address(self):
        """Host: allowed.test aimed at the gateway's own address (port 80,
        redirected to the listener): 403 destination-ip-prohibited, a
        transparent row; no loop, nothing connected. Holds."""
        last = self.last_id()
        resp, out = self.http(self.topo.gw_ip, 80,
            "GET /gw HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        self.assertTrue(resp.startswith("HTTP/1.1 403"), out)
        row = self.audit(kind="transparent", host="allowed.test", port=80,
            reason="destination-ip-prohibited",
            pred=lambda r: r["id"] > last)
        self.assert_row(row, decision="deny", sandbox="sbx", status=403)

    def test_http_refusal_row_names_refused_address(self):
        """docs/audit.md: `ip` is "the address the gateway connected to or
        refused, when it got that far"; docs/protocols.md: an allowed name
        aimed at an address that is not one of its own is refused (403 for
        HTTP), audited with kind transparent. Sent: GET /ip-row with Host:
        allowed.test to forbidden.test's address, port 80. The TLS variant's
        row carries ip=<that address>; the HTTP row must too (the gateway
        compared exactly that address and refused it)."""
        ev = self.conns("http-evil")
        last = self.last_id()
        resp, out = self.http(self.evil_ip, 80,
            "GET /ip-row HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        self.assertTrue(resp.startswith("HTTP/1.1 403"), out)
        self.assertEqual(self.settled_conns("http-evil"), ev)
        row = self.audit(kind="transparent", host="allowed.test", port=80,
            reason="destination-ip-prohibited",
            pred=lambda r: r["id"] > last)
        self.assertEqual(row["ip"], self.evil_ip,
            "the row of the refused address does not name it: %r" % row)

    def test_host_ip_literal_of_cidr_rule_to_other_address(self):
        """Host: <the cidr rule's address> sent to forbidden.test's address
        on the cidr rule's port (2222): the literal is allowed, the original
        destination is not it -> refused, nothing reaches the address.
        Holds."""
        ev = self.conns("http-evil")
        last = self.last_id()
        resp, out = self.http(self.evil_ip, 2222,
            "GET /lit HTTP/1.1\r\nHost: %s\r\n\r\n" % self.cidr_ip)
        self.assertTrue(resp.startswith("HTTP/1.1 403") or resp == "", out)
        row = self.audit(kind="transparent", port=2222, decision="deny",
            pred=lambda r: r["id"] > last)
        self.assert_row(row, sandbox="sbx")
        self.assertEqual(self.settled_conns("http-evil"), ev)

    # ------------------------------------------------------------ TLS

    def ch(self, sni, share=None):
        return client_hello(sni, share or x25519_share(), os.urandom(32),
            os.urandom(32))

    def test_split_clienthello_allowed_sni_forbidden_ip(self):
        """SNI allowed.test toward forbidden.test's address, the ClientHello
        in three writes (record header alone first, pauses 0.3 s): refused
        with access_denied, destination-ip-prohibited, no connection."""
        evs = self.conns("https-evil")
        ch = self.ch(b"allowed.test")
        out = self.chunks(self.evil_ip, 443,
            [(ch[:5], 0.3), (ch[5:40], 0.3), (ch[40:], 0)])
        self.assertEqual(out["bytes"], ACCESS_DENIED, out)
        self.audit(kind="transparent", host="allowed.test",
            ip=self.evil_ip, reason="destination-ip-prohibited")
        self.assertEqual(self.settled_conns("https-evil"), evs)

    def test_clienthello_over_two_records_forbidden_ip(self):
        """The same ClientHello split over two TLS records (the SNI in the
        second): refused (any reason), nothing reaches the address."""
        evs = self.conns("https-evil")
        ch = self.ch(b"allowed.test")
        hs = ch[5:]
        rec = lambda b: b"\x16\x03\x01" + struct.pack(">H", len(b)) + b
        out = self.chunks(self.evil_ip, 443,
            [(rec(hs[:20]) + rec(hs[20:]), 0)])
        self.assertNotIn(b"\x16\x03\x03", out["bytes"][:3], out)
        self.assertEqual(self.settled_conns("https-evil"), evs)
        self.audit(kind="transparent", ip=self.evil_ip, port=443,
            decision="deny")

    def test_denied_sni_to_opaque_cidr_address(self):
        """A ClientHello naming forbidden.test (a deny rule) to the address
        a cidr rule with opaque: true allows: the name decides -> access_
        denied, policy-deny row; the banner origin sees no connection.
        Holds."""
        before = self.conns("banner-cidr")
        out = self.chunks(self.cidr_ip, 2222, [(self.ch(b"forbidden.test"), 0)])
        self.assertEqual(out["bytes"], ACCESS_DENIED, out)
        self.audit(kind="transparent", host="forbidden.test", port=2222,
            decision="deny", reason="policy-deny")
        self.assertEqual(self.settled_conns("banner-cidr"), before)

    def test_tls_record_before_clienthello_to_opaque_address(self):
        """An empty ChangeCipherSpec record (14 03 03 00 00) ahead of a
        ClientHello naming forbidden.test, to the address a cidr rule with
        opaque: true allows: TLS all the same (OpenSSL skips the record), so
        refused -- protocol-not-allowed -- not relayed unread as "neither
        TLS nor HTTP" (test_tls2_probe: the CONNECT and SOCKS5 variants).
        The banner origin sees no connection."""
        before = self.conns("banner-cidr")
        out = self.chunks(self.cidr_ip, 2222,
            [(b"\x14\x03\x03\x00\x00" + self.ch(b"forbidden.test"), 0)])
        self.assertNotIn(b"\x16\x03", out["bytes"][:2], out)
        self.audit(kind="transparent", port=2222, decision="deny",
            reason="protocol-not-allowed")
        self.assertEqual(self.settled_conns("banner-cidr"), before)

    def test_second_clienthello_pipelined(self):
        """A passthrough connection to allowed.test's address (port 2323,
        a recording origin): ClientHello SNI allowed.test and a second
        naming forbidden.test in one write. docs/protocols.md: transparent
        tunnels are classified like CONNECT's -- the second hello must be
        refused (access_denied, sni-mismatch) before a byte goes on."""
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        before = self.status("rec-main")["received"]
        out = self.chunks(self.main_ip, 2323,
            [(self.ch(b"allowed.test", NO_SHARES) +
              self.ch(b"forbidden.test"), 0)])
        self.assertIn(ACCESS_DENIED, out["bytes"], out)
        time.sleep(0.3)
        got = self.status("rec-main")["received"][len(before):]
        self.assertFalse([g for g in got if "forbidden.test" in g], got)
        self.audit(kind="transparent", reason="sni-mismatch")

    def test_second_clienthello_after_hrr(self):
        """The HelloRetryRequest trick (test_front_probe, fixed there for
        CONNECT/SOCKS5) on a transparent passthrough connection: ClientHello
        SNI allowed.test with no key share -> the origin answers HRR; the
        second ClientHello names forbidden.test -> access_denied and a
        sni-mismatch transparent row, no ServerHello."""
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        sid, rnd = os.urandom(32), os.urandom(32)
        ch1 = client_hello(b"allowed.test", NO_SHARES, sid, rnd)
        ch2 = client_hello(b"forbidden.test", x25519_share(), sid, rnd)
        r = TT.run(self.nsx + [PY, "-c", HRR_CLIENT, self.main_ip, "443",
            ch1.hex(), ch2.hex()], timeout=30)
        out = json.loads(r.stdout.decode())
        first = bytes.fromhex(out["first"])
        self.assertEqual((first[:1], first[5:6], first[11:43]),
            (b"\x16", b"\x02", HRR_RANDOM), out)
        got = bytes.fromhex(out["got"])
        # the origin's ChangeCipherSpec (RFC 8446 D.4) may come first
        if got.startswith(b"\x14\x03\x03\x00\x01\x01"):
            got = got[6:]
        self.assertTrue(got.startswith(ACCESS_DENIED), out)
        self.audit(kind="transparent", reason="sni-mismatch")


def main():
    preflight()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, TT._on_signal)
    try:
        T.main()
    finally:
        for t in _topos:
            t.teardown()


if __name__ == "__main__":
    main()
