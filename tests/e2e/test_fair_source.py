#!/usr/bin/python3
"""
End-to-end tests of issue 22's "fair share before identity" (docs/config.md
"limits"): a connection whose sandbox is not known yet -- a request head
still arriving, a SOCKS5 greeting pending -- counts against its source
address's share (limits.per_sandbox.max_connections) until its sandbox is
known, so that sandbox A holding 40 partial heads cannot take all 40 slots
of limits.max_connections from sandbox B. A's connections over its share
are refused at accept (429 on the HTTP listener, closed on SOCKS5) with a
rate-limited row and log line; B's requests are served all along; and the
counts are given back exactly once, whichever way a connection ends.
Sandboxes are told apart by source address (127.0.0.2 and 127.0.0.3). The
gateway runs as a default install does (user: sandgate).
"""

import os
import select
import socket
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import auditcheck as AC  # noqa: E402
import fairsrc as F  # noqa: E402

A, B = "127.0.0.2", "127.0.0.3"
MAX_CONNS = 40          # limits.max_connections
SHARE = 10              # limits.per_sandbox.max_connections
ROW_A = AC.regex(r"127\.0\.0\.2:[1-9][0-9]{0,4}")


def recv_all(s, timeout):
    """Everything s receives until the peer closes it (EOF or reset)."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (ConnectionResetError, socket.timeout):
        pass
    return data


class FairSourceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        F.start(cls, "sgtest-fairsrc-", {"sb-a": A, "sb-b": B}, {
            "max_connections": MAX_CONNS,
            # Long enough that no partial head times out here.
            "head_timeout": "60s",
            "per_sandbox": {"max_connections": SHARE,
                            "connections_per_second": 1000}})

    def setUp(self):
        self.held = []
        self.addCleanup(self.close_held)
        self.audit = AC.Audit(self, self.gw)
        self.since = self.audit.mark()

    def close_held(self):
        for s in self.held:
            s.close()
        self.held = []
        # Every count given back before the next test starts.
        self.wait_idle()

    # -------------------------------------------------------------- helpers

    def connect(self, port, source=A):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10 * T.SLOW)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        self.held.append(s)
        return s

    def partial_head(self, path):
        # A request head that never ends: no blank line.
        return ("GET %s%s HTTP/1.1\r\nHost: allowed.test:%d\r\nX-Slow: 1"
                % (self.url, path, self.origin.port)).encode()

    def settle(self, socks, want_closed):
        """
        Wait until the gateway has closed want_closed of socks (then a
        moment longer, for any it should not have closed); returns
        (held, {sock: bytes it got before the close}).
        """
        closed = {}
        deadline = time.time() + 10 * T.SLOW
        while len(closed) < want_closed and time.time() < deadline:
            r, _, _ = select.select([s for s in socks if s not in closed],
                                    [], [], 0.2)
            for s in r:
                closed[s] = recv_all(s, 2 * T.SLOW)
        time.sleep(0.5 * T.SLOW)
        r, _, _ = select.select([s for s in socks if s not in closed], [], [],
                                0)
        for s in r:
            closed[s] = recv_all(s, 2 * T.SLOW)
        return [s for s in socks if s not in closed], closed

    def b_is_served(self, tag):
        """Sandbox B's requests succeed: absolute form with curl, and SOCKS5."""
        for i in range(3):
            r = T.curl("%s/b-%s-%d" % (self.url, tag, i), proxy=self.gw.url,
                       args=["--interface", B], tmp=self.td.path)
            self.assertEqual(r.status, 200, "B refused (%s): %r" % (tag, r))
            self.assertEqual(r.json()["path"], "/b-%s-%d" % (tag, i))
        r = T.curl("%s/b-%s-socks" % (self.url, tag), tmp=self.td.path,
                   args=["--socks5-hostname", "127.0.0.1:%d" % self.sport,
                         "--interface", B])
        self.assertEqual(r.status, 200, "B refused on SOCKS5 (%s): %r"
                         % (tag, r))
        rows = self.gw.wait_audit(sandbox="sb-b", path="/b-%s-0" % tag)
        self.assertEqual([(x["decision"], x["status"]) for x in rows],
                         [("allow", 200)])

    def expect_refusal_rows(self, kind, status, method=None):
        """Rows of A's refusals: no sandbox yet, rule limits, rate-limited."""
        rows = [r for r in self.gw.wait_audit(
            reason="rate-limited", pred=lambda r: r["id"] > self.since)
            if r["sandbox"] is None]
        self.assertTrue(rows, "no rate-limited row for the source")
        self.audit.expect({"reason": "rate-limited", "kind": kind},
                          count=len(rows), after=self.since,
                          decision="deny", sandbox=None, client=ROW_A,
                          host=None, ip=None, port=AC.one_of(0, None),
                          method=method, path=None, status=status,
                          rule="limits", credential=None,
                          bytes_up=AC.one_of(0, None),
                          bytes_down=AC.one_of(0, None))
        self.audit.check()
        self.assertIsNotNone(self.gw.wait_log(
            r"rate-limited: source 127\.0\.0\.2 has %d connections open "
            r"whose sandbox is not known yet" % SHARE))
        # The sandbox's own share was not touched by any of it.
        self.assertEqual(self.gw.audit_rows(sandbox="sb-a",
                                            reason="rate-limited"), [])

    def wait_idle(self):
        """Until A's share is free again (counts are given back at close)."""
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            probe = [self.connect(self.gw.port) for _ in range(SHARE)]
            held, closed = self.settle(probe, 0)
            for s in probe:
                s.close()
                self.held.remove(s)
            if not closed:
                time.sleep(0.3 * T.SLOW)   # the probes' closes processed
                return
            time.sleep(0.2)
        self.fail("A's share never came back")

    def assert_exact_share(self, port, send):
        """Exactly SHARE more connections from A are held; one more is not."""
        socks = [self.connect(port) for _ in range(SHARE + 1)]
        held, closed = self.settle(socks, 1)
        self.assertEqual((len(held), len(closed)), (SHARE, 1))
        for s in held:
            s.sendall(send)
        return held

    # ---------------------------------------------------------------- tests

    def test_partial_heads_take_only_the_sources_share(self):
        # A opens every slot there is; the gateway answers at accept.
        socks = [self.connect(self.gw.port) for _ in range(MAX_CONNS)]
        held, closed = self.settle(socks, MAX_CONNS - SHARE)
        self.assertEqual(len(held), SHARE, "%d held, %d refused"
                         % (len(held), len(closed)))
        for s, data in closed.items():
            self.assertTrue(data.startswith(b"HTTP/1.1 429 "), data[:200])
            self.assertIn(b"X-Sandgate-Reason: rate-limited", data)
            self.assertIn(b"source 127.0.0.2", data)
        # The ones held send heads that never end, and stay open.
        for i, s in enumerate(held):
            s.sendall(self.partial_head("/a-partial-%d" % i))
        self.b_is_served("heads")
        r, _, _ = select.select(held, [], [], 0.3)
        self.assertEqual(r, [], "a held partial head was answered")
        self.assertFalse(self.origin.saw_path("/a-partial-"))
        self.expect_refusal_rows("http", 429)

    def test_partial_heads_sent_at_once(self):
        # The attacker's variant: the partial head goes with the connect.
        socks = []
        for i in range(MAX_CONNS):
            s = self.connect(self.gw.port)
            try:
                s.sendall(self.partial_head("/a-eager-%d" % i))
            except (BrokenPipeError, ConnectionResetError):
                pass        # refused before the head went out
            socks.append(s)
        held, closed = self.settle(socks, MAX_CONNS - SHARE)
        self.assertEqual((len(held), len(closed)), (SHARE, MAX_CONNS - SHARE))
        self.b_is_served("eager")
        self.assertFalse(self.origin.saw_path("/a-eager-"))
        self.expect_refusal_rows("http", 429)

    def test_partial_socks_greetings(self):
        socks = [self.connect(self.sport) for _ in range(MAX_CONNS)]
        for s in socks:
            try:
                s.sendall(b"\x05\x02\x00")  # two methods, one sent
            except (BrokenPipeError, ConnectionResetError):
                pass
        held, closed = self.settle(socks, MAX_CONNS - SHARE)
        self.assertEqual((len(held), len(closed)), (SHARE, MAX_CONNS - SHARE))
        # SOCKS5 has nothing to say before the greeting: refused is closed.
        for data in closed.values():
            self.assertEqual(data, b"")
        self.b_is_served("socks")
        # The held greetings still complete: they were only waiting.
        s = held[0]
        s.sendall(b"\x01")             # methods: no auth, GSSAPI
        self.assertEqual(s.recv(2), b"\x05\x00")
        name = b"allowed.test"
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
                  struct.pack("!H", self.origin.port))
        self.assertEqual(s.recv(10)[:2], b"\x05\x00")
        s.sendall(("GET /a-socks HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                   % self.origin.port).encode())
        self.assertTrue(s.recv(12).startswith(b"HTTP/1.1 200"))
        self.expect_refusal_rows("socks5", 429, method="CONNECT")

    def test_mix_of_partial_heads_and_idle_keepalive(self):
        # Completed requests on kept-alive connections are sb-a's, not the
        # source's: they leave the source's share to the partial heads.
        ka = []
        for i in range(5):
            c = T.Conn(self.gw.port, source=A)
            self.addCleanup(c.close)
            resp = c.request("GET %s/a-ka-%d HTTP/1.1\r\nHost: allowed.test:%d"
                             "\r\n\r\n" % (self.url, i, self.origin.port))
            self.assertEqual(resp.status, 200, resp)
            ka.append(c)
        n = MAX_CONNS - len(ka)
        socks = [self.connect(self.gw.port) for _ in range(n)]
        for i, s in enumerate(socks):
            try:
                s.sendall(self.partial_head("/a-mix-%d" % i))
            except (BrokenPipeError, ConnectionResetError):
                pass
        held, closed = self.settle(socks, n - SHARE)
        self.assertEqual((len(held), len(closed)), (SHARE, n - SHARE))
        self.b_is_served("mix")
        # The kept-alive connections still work, and are not re-counted.
        for i, c in enumerate(ka):
            resp = c.request("GET %s/a-ka2-%d HTTP/1.1\r\nHost: allowed.test:"
                             "%d\r\n\r\n" % (self.url, i, self.origin.port))
            self.assertEqual(resp.status, 200, resp)
        self.expect_refusal_rows("http", 429)
        # Closing the identified connections gives nothing back to the
        # source (it holds none of them): still exactly full.
        for c in ka:
            c.close()
        time.sleep(0.3 * T.SLOW)
        extra = self.connect(self.gw.port)
        held2, closed2 = self.settle([extra], 1)
        self.assertEqual((len(held2), len(closed2)), (0, 1))

    def full_get(self, path):
        return ("GET %s%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                % (self.url, path, self.origin.port)).encode()

    def test_counts_are_given_back_exactly_once(self):
        held = self.assert_exact_share(self.gw.port,
                                       self.partial_head("/a-once"))
        # Closed by the client before its head was complete: given back.
        for s in held[:4]:
            s.close()
            self.held.remove(s)
        time.sleep(0.3 * T.SLOW)
        fresh, closed = self.settle(
            [self.connect(self.gw.port) for _ in range(5)], 1)
        self.assertEqual((len(fresh), len(closed)), (4, 1))
        # Ended by the gateway before identity (a malformed head): given back.
        for s in fresh[:2]:
            s.sendall(b"BAD\r\n\r\n")
            self.assertTrue(recv_all(s, 5 * T.SLOW).startswith(
                b"HTTP/1.1 400"))
        # Identified: moved to sb-a's share, kept alive.
        moved = fresh[2:]
        for i, s in enumerate(moved):
            s.sendall(self.full_get("/a-moved-%d" % i))
        for s in held[4:]:
            s.sendall(b"\r\n\r\n")     # the partial head ends
            moved.append(s)
        for s in moved:
            head = b""
            while b"\r\n\r\n" not in head:
                b = s.recv(4096)
                self.assertTrue(b, "closed instead of answered")
                head += b
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:100])
        self.assertEqual(len(moved), 8)
        # A's source now holds nothing: its whole share, not more.
        self.assert_exact_share(self.gw.port, self.partial_head("/a-again"))
        # The identified ones end: that gives nothing back to the source
        # (a second release would let one more partial head in).
        for s in moved:
            s.close()
            self.held.remove(s)
        time.sleep(0.3 * T.SLOW)
        h, c = self.settle([self.connect(self.gw.port) for _ in range(2)], 2)
        self.assertEqual((len(h), len(c)), (0, 2))
        # The heads completed above went through; the ones held never did.
        self.assertEqual(len([r for r in self.origin.requests
                              if r["path"] == "/a-once"]), 6)
        self.assertFalse(self.origin.saw_path("/a-again"))

if __name__ == "__main__":
    T.main()
