#!/usr/bin/python3
"""
End-to-end tests of fair share between sandboxes (issue 13, acceptance 5;
docs/config.md "limits", docs/protocols.md "Over a limit"): a request head
trickled in a byte at a time is answered 408 once limits.head_timeout has
passed since it started; a sandbox at limits.per_sandbox.max_connections
gets 429 (HTTP) or SOCKS5 reply 0x02 while another sandbox's requests go
on as fast as before; connections_per_second and dns_queries_per_second
refuse bursts (429, a reset on the transparent listener, REFUSED) and
recover a second later; the audit log gets about one rate-limited row per
sandbox per second, not one per refusal. Sandboxes are told apart by
source address: each client binds its socket to its own 127.0.0.x.
"""

import os
import select
import socket
import statistics
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402

ORIGIN = "127.0.0.2"
A, B, SOCKS, SLOW_CLIENT, DNS_CLIENT, TRANSP = (
    "127.0.0.1", "127.0.0.3", "127.0.0.5", "127.0.0.6", "127.0.0.7",
    "127.0.0.8")
SANDBOXES = {"sb-a": A, "sb-b": B, "sb-socks": SOCKS, "sb-slow": SLOW_CLIENT,
             "sb-dns": DNS_CLIENT, "sb-transp": TRANSP}
MAX_CONNS = 20
HEAD_TIMEOUT = 2.0


def start_gateway(cls, per_sandbox, metrics=False):
    """A gateway with every listener the tests use, one sandbox per source."""
    cls.td = T.TempDir("sgtest-fair-")
    cls.addClassCleanup(cls.td.cleanup)
    cls.origin = T.Origin("origin", host=ORIGIN)
    cls.addClassCleanup(cls.origin.stop)
    cls.dns = T.Dnsmasq(cls.td.path, [("allowed.test", ORIGIN)])
    cls.addClassCleanup(cls.dns.stop)
    port = cls.origin.port
    policy = {
        "sandboxes": [T.local_sandbox("p", sid=sid, source=src + "/32")
                      for sid, src in sorted(SANDBOXES.items())],
        "policies": [{"name": "p",
                      "allow": [{"host": "allowed.test", "ports": [port]}],
                      "allow_private": [ORIGIN + "/32"]}],
    }
    cls.sport = T.free_port()
    cls.dport = T.free_port(udp_too=True)
    cls.tport = T.free_port()
    listen = {"socks5": "127.0.0.1:%d" % cls.sport,
              "dns": "127.0.0.1:%d" % cls.dport,
              "transparent": "127.0.0.1:%d" % cls.tport}
    if metrics:
        cls.mport = T.free_port()
        listen["metrics"] = "127.0.0.1:%d" % cls.mport
    cls.gw = T.Gateway(cls.td.path, cls.dns, {"p.yaml": policy}, extra={
        "listen": listen,
        "limits": {"head_timeout": "%gs" % HEAD_TIMEOUT,
                   "per_sandbox": per_sandbox}})
    cls.gw.start()
    cls.addClassCleanup(cls.gw.stop)
    for p in (cls.sport, cls.tport):
        if not T.wait_tcp("127.0.0.1", p, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("listener not up:\n" + cls.gw.log_tail())
    cls.url = "http://allowed.test:%d" % port


def get_req(cls, path, host=True):
    req = "GET %s%s HTTP/1.1\r\n" % (cls.url, path)
    if host:
        req += "Host: allowed.test:%d\r\n" % cls.origin.port
    return req + "\r\n"


def timed_get(cls, source, path):
    """One request on a fresh connection from source: (status, seconds)."""
    t0 = time.monotonic()
    r = T.raw_request(cls.gw.port, get_req(cls, path), source=source)
    return (r.status if r else None), time.monotonic() - t0


def rate_limited_rows(gw, sandbox, kind=None):
    rows = gw.audit_rows(sandbox=sandbox, reason="rate-limited")
    return [r for r in rows if kind is None or r["kind"] == kind]


def socks_connect(port, source, host, dport, timeout=10):
    """SOCKS5 no-auth CONNECT to host:dport; (socket, reply code)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout * T.SLOW)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise AssertionError("SOCKS5 greeting refused")
    name = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
              struct.pack("!H", dport))
    rep = b""
    while len(rep) < 10:
        b = s.recv(10 - len(rep))
        if not b:
            break
        rep += b
    return s, (rep[1] if len(rep) >= 2 else None)


class FairShareTest(unittest.TestCase):
    """max_connections 20, rates high enough not to matter, head_timeout 2s."""

    @classmethod
    def setUpClass(cls):
        start_gateway(cls, {"max_connections": MAX_CONNS,
                            "connections_per_second": 1000,
                            "dns_queries_per_second": 5})

    def setUp(self):
        self.conns = []

    def tearDown(self):
        for c in self.conns:
            c.close()
        self.conns = []

    # -------------------------------------------------------------- (a)

    def trickle(self, conn, data, interval):
        """Send data a byte every interval until the peer answers; (reply, s)."""
        t0 = time.monotonic()
        for i in range(len(data)):
            try:
                conn.sock.sendall(data[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            r, _, _ = select.select([conn.sock], [], [], interval)
            if r:
                break
        try:
            resp = conn.read_response()
        except (EOFError, ConnectionResetError):
            resp = None
        return resp, time.monotonic() - t0

    def test_slowloris_head_gets_408(self):
        c = T.Conn(self.gw.port, source=SLOW_CLIENT)
        self.conns.append(c)
        resp, took = self.trickle(c, get_req(self, "/slow").encode(), 0.5)
        self.assertIsNotNone(resp, "closed without an answer")
        self.assertEqual(resp.status, 408, resp)
        self.assertEqual(resp.header("X-Sandgate-Reason"), "head-timeout")
        # The clock ran from the head's start, not from its last byte.
        self.assertGreaterEqual(took, HEAD_TIMEOUT - 0.3)
        self.assertLess(took, HEAD_TIMEOUT + 2 * T.SLOW, "took %.1fs" % took)
        row = self.gw.wait_audit(reason="head-timeout", status=408,
                                 kind="http")
        self.assertTrue(row, "no head-timeout row")
        self.assertEqual(row[-1]["decision"], "deny")
        self.assertEqual(row[-1]["rule"], "limits")

    def test_keepalive_idle_is_not_a_slow_head(self):
        c = T.Conn(self.gw.port, source=SLOW_CLIENT)
        self.conns.append(c)
        self.assertEqual(c.request(get_req(self, "/ka1")).status, 200)
        # Idle between requests longer than head_timeout: idle_timeout's.
        time.sleep(HEAD_TIMEOUT + 0.7)
        self.assertEqual(c.request(get_req(self, "/ka2")).status, 200)
        # The next head trickled: timed from its own first byte.
        resp, took = self.trickle(c, get_req(self, "/ka3").encode(), 0.5)
        self.assertIsNotNone(resp)
        self.assertEqual(resp.status, 408)
        self.assertGreaterEqual(took, HEAD_TIMEOUT - 0.3)

    def test_socks_slow_greeting(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(s.close)
        s.bind((SLOW_CLIENT, 0))
        s.connect(("127.0.0.1", self.sport))
        s.settimeout(HEAD_TIMEOUT + 3 * T.SLOW)
        s.sendall(b"\x05")              # a greeting that never completes
        t0 = time.monotonic()
        try:
            self.assertEqual(s.recv(16), b"")
        except ConnectionResetError:
            pass
        self.assertLess(time.monotonic() - t0, HEAD_TIMEOUT + 2 * T.SLOW)
        self.assertTrue(self.gw.wait_audit(reason="head-timeout",
                                           kind="socks5"))

    # -------------------------------------------------------------- (b)

    def test_one_sandbox_at_its_limit_does_not_slow_another(self):
        n = 10
        base = [timed_get(self, B, "/base%d" % i) for i in range(n)]
        self.assertEqual([s for s, _ in base], [200] * n)
        # Sandbox A takes every connection its share allows, and keeps them.
        for i in range(MAX_CONNS):
            c = T.Conn(self.gw.port, source=A)
            self.conns.append(c)
            self.assertEqual(c.request(get_req(self, "/hold%d" % i)).status,
                             200)
        over = T.raw_request(self.gw.port, get_req(self, "/over"), source=A)
        self.assertIsNotNone(over)
        self.assertEqual(over.status, 429, over)
        self.assertEqual(over.header("X-Sandgate-Reason"), "rate-limited")
        self.assertEqual(over.header("Retry-After"), "1")
        row = self.gw.wait_audit(sandbox="sb-a", reason="rate-limited")
        self.assertTrue(row, "no rate-limited row for sb-a")
        self.assertEqual((row[-1]["status"], row[-1]["decision"],
                          row[-1]["host"]), (429, "deny", "allowed.test"))
        # Sandbox B is not touched: every request succeeds, as fast as before.
        during = [timed_get(self, B, "/during%d" % i) for i in range(n)]
        self.assertEqual([s for s, _ in during], [200] * n)
        b0 = max(statistics.median(t for _, t in base), 0.005)
        b1 = statistics.median(t for _, t in during)
        self.assertLess(b1, 20 * b0, "B's median went from %.4fs to %.4fs"
                        % (b0, b1))
        # A's held connections still work (keep-alive, idle past head_timeout).
        self.assertEqual(self.conns[0].request(get_req(self, "/again")).status,
                         200)
        # One freed connection gives A room again.
        self.conns.pop().close()
        deadline = time.time() + 5 * T.SLOW
        while True:
            st, _ = timed_get(self, A, "/room")
            if st == 200 or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(st, 200)

    # -------------------------------------------------------------- (d)

    def test_socks_over_max_connections_gets_0x02(self):
        held = []
        self.addCleanup(lambda: [s.close() for s in held])
        head = ("GET /s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                % self.origin.port).encode()
        for _ in range(MAX_CONNS):
            s, rep = socks_connect(self.sport, SOCKS, "allowed.test",
                                   self.origin.port)
            held.append(s)
            self.assertEqual(rep, 0)
            # HTTP in the tunnel keeps it open past the 5 s sniff.
            s.sendall(head)
            self.assertTrue(s.recv(12).startswith(b"HTTP/1.1 200"))
        s, rep = socks_connect(self.sport, SOCKS, "allowed.test",
                               self.origin.port)
        held.append(s)
        self.assertEqual(rep, 0x02)
        self.assertTrue(self.gw.wait_audit(sandbox="sb-socks",
                                           reason="rate-limited",
                                           kind="socks5"))

    # -------------------------------------------------------------- (e)

    def dig(self, name):
        return H.dig(["-b", DNS_CLIENT, "@127.0.0.1", "-p", str(self.dport),
                      name, "A"])

    def dns_burst(self, name, n):
        """
        n A queries sent back to back from the sandbox's address, each
        answer's status by the order sent (None: no answer). One socket and
        no process per query, so the rate the listener sees does not depend
        on how fast this machine starts dig.
        """
        q = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
        q += b"\0" + struct.pack("!HH", 1, 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(s.close)
        s.bind((DNS_CLIENT, 0))
        for i in range(n):
            s.sendto(struct.pack("!HHHHHH", 0x5000 + i, 0x0100, 1, 0, 0, 0) +
                     q, ("127.0.0.1", self.dport))
        got = {}
        deadline = time.time() + 5 * T.SLOW
        while len(got) < n and time.time() < deadline:
            r, _, _ = select.select([s], [], [], 0.2)
            if not r:
                continue
            m = s.recv(4096)
            if len(m) >= 4:
                got[struct.unpack("!H", m[:2])[0] - 0x5000] = m[3] & 0x0f
        names = {0: "NOERROR", 3: "NXDOMAIN", 5: "REFUSED", 2: "SERVFAIL"}
        return [names.get(got[i], str(got[i])) if i in got else None
                for i in range(n)]

    def test_dns_over_rate_gets_refused(self):
        # Wait until the DNS listener answers at all (a slow start).
        deadline = time.time() + 10 * T.SLOW
        while self.dig("allowed.test").status is None:
            self.assertLess(time.time(), deadline, self.gw.log_tail())
        time.sleep(1.2)                 # the bucket full again
        statuses = self.dns_burst("allowed.test", 15)
        self.assertIn("NOERROR", statuses)
        self.assertIn("REFUSED", statuses, statuses)
        self.assertEqual(statuses[0], "NOERROR")
        row = self.gw.wait_audit(sandbox="sb-dns", reason="rate-limited",
                                 kind="dns")
        self.assertTrue(row)
        self.assertEqual(row[-1]["decision"], "deny")
        time.sleep(1.2)
        self.assertEqual(self.dig("allowed.test").status, "NOERROR")


class RateTest(unittest.TestCase):
    """connections_per_second 5: bursts, recovery, rows and the transparent reset."""

    RATE = 5

    @classmethod
    def setUpClass(cls):
        start_gateway(cls, {"max_connections": 1000,
                            "connections_per_second": cls.RATE,
                            "dns_queries_per_second": 0}, metrics=True)

    def test_burst_gets_429_then_recovers(self):
        statuses = [timed_get(self, B, "/burst%d" % i)[0] for i in range(20)]
        self.assertEqual(statuses[:3], [200] * 3, statuses)
        self.assertIn(429, statuses)
        self.assertEqual(set(statuses), {200, 429}, statuses)
        self.assertLessEqual(statuses.count(200), self.RATE + 3, statuses)
        time.sleep(1.2)
        self.assertEqual(timed_get(self, B, "/after")[0], 200)

    def test_about_one_row_per_second(self):
        t0 = time.monotonic()
        refused = 0
        while time.monotonic() - t0 < 2.5:
            if timed_get(self, A, "/flood")[0] == 429:
                refused += 1
        elapsed = time.monotonic() - t0
        time.sleep(0.5)                 # the audit writer is asynchronous
        rows = rate_limited_rows(self.gw, "sb-a")
        self.assertGreater(refused, 10)
        self.assertGreaterEqual(len(rows), 1)
        self.assertLessEqual(len(rows), int(elapsed) + 2,
                             "%d rows for %d refusals in %.1fs"
                             % (len(rows), refused, elapsed))
        self.assertIsNotNone(self.gw.wait_log(
            r"rate-limited: sandbox sb-a .* more refusals? since the "
            r"previous row went unaudited"))
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport,
                   tmp=self.td.path)
        vals = {}
        for line in r.body.decode().splitlines():
            if line.startswith("sandgate_rate_limited"):
                k, v = line.split()
                vals[k] = float(v)
        self.assertGreaterEqual(vals.get("sandgate_rate_limited_total", 0),
                                refused)
        self.assertGreaterEqual(
            vals.get("sandgate_rate_limited_unaudited_total", 0),
            refused - len(rows))

    def test_transparent_over_rate_is_reset(self):
        # Admitted connections wait for their first bytes (and are not
        # redirected, so go nowhere); the ones over the rate are reset.
        n = 15
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((TRANSP, 0))
            s.connect(("127.0.0.1", self.tport))
            socks.append(s)
        resets = 0
        for s in socks:
            s.settimeout(1.0 * T.SLOW)
            try:
                s.recv(1)
            except ConnectionResetError:
                resets += 1
            except socket.timeout:
                pass
        self.assertGreaterEqual(resets, n - self.RATE - 2)
        rows = self.gw.wait_audit(sandbox="sb-transp", reason="rate-limited",
                                  kind="transparent")
        self.assertTrue(rows)
        self.assertEqual(rows[-1]["status"], 429)


if __name__ == "__main__":
    T.main()
