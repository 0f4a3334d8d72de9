#!/usr/bin/python3
"""
Fair share before identity when the gateway is full (issue 22, docs/config.md
"limits"): with only limits.max_connections set (40) and
per_sandbox.max_connections left at its default (more than the whole
gateway), sandbox A opens all 40 connections and sends partial heads.
Sandbox B's requests are still served: a full gateway makes room by closing
an unidentified connection of the source holding the most (503
too-many-connections, with its row), never one of a source that would then
hold as many. Variants: A alone still fills the gateway as the limit allows
and its 41st is refused as ever; two addresses of an attacker -- the one
holding more is the one closed; SOCKS5 for B. The gateway runs as a default
install does (user: sandgate).
"""

import os
import select
import socket
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import fairsrc as F  # noqa: E402

A, A2, B = "127.0.0.2", "127.0.0.4", "127.0.0.3"
MAX_CONNS = 40


class FairSourceFullTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        F.start(cls, "sgtest-fairfull-", {"sb-a": A, "sb-a2": A2, "sb-b": B},
                {"max_connections": MAX_CONNS, "head_timeout": "60s"})
        # The start-up probes' connections closed before any test counts.
        time.sleep(1.0 * T.SLOW)

    def setUp(self):
        self.held = []
        self.addCleanup(self.close_held)

    def close_held(self):
        for s in self.held:
            s.close()
        self.held = []
        time.sleep(1.0 * T.SLOW)   # the closes processed before the next test

    def open_from(self, source, n):
        socks = []
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(10 * T.SLOW)
            s.bind((source, 0))
            s.connect(("127.0.0.1", self.gw.port))
            self.held.append(s)
            socks.append(s)
        return socks

    def settle(self, socks):
        """(held, {closed sock: what it got}) once the gateway is done."""
        closed = {}
        quiet_since = time.time()
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline and time.time() - quiet_since < 1.0 * T.SLOW:
            r, _, _ = select.select([s for s in socks if s not in closed],
                                    [], [], 0.2)
            for s in r:
                data = b""
                try:
                    while True:
                        b = s.recv(65536)
                        if not b:
                            break
                        data += b
                except (ConnectionResetError, socket.timeout):
                    pass
                closed[s] = data
                quiet_since = time.time()
        return [s for s in socks if s not in closed], closed

    def b_is_served(self, tag):
        r = T.curl("%s/b-%s" % (self.url, tag), proxy=self.gw.url,
                   args=["--interface", B], tmp=self.td.path)
        self.assertEqual(r.status, 200, "B refused (%s): %r" % (tag, r))
        r = T.curl("%s/b-%s-socks" % (self.url, tag), tmp=self.td.path,
                   args=["--socks5-hostname", "127.0.0.1:%d" % self.sport,
                         "--interface", B])
        self.assertEqual(r.status, 200, "B refused on SOCKS5 (%s): %r"
                         % (tag, r))
        rows = self.gw.wait_audit(sandbox="sb-b", path="/b-%s" % tag)
        self.assertEqual([(x["decision"], x["status"]) for x in rows],
                         [("allow", 200)])

    def evicted(self, socks, n):
        """Exactly n of socks were answered 503 too-many-connections."""
        held, closed = self.settle(socks)
        self.assertEqual(len(closed), n, "%d of A's closed" % len(closed))
        for s, data in closed.items():
            self.assertTrue(data.startswith(b"HTTP/1.1 503 "), data[:200])
            self.assertIn(b"X-Sandgate-Reason: too-many-connections", data)
        return held

    def partial(self, socks, tag):
        for i, s in enumerate(socks):
            s.sendall(b"GET http://allowed.test/a-%s-%d HTTP/1.1\r\nHost: "
                      b"allowed.test\r\nX-Slow: 1" % (tag.encode(), i))

    def test_full_gateway_makes_room_for_another_source(self):
        socks = self.open_from(A, MAX_CONNS)
        held, closed = self.settle(socks)
        self.assertEqual((len(held), len(closed)), (MAX_CONNS, 0))
        self.partial(held, "full")
        # B's first connection needs room: one of A's is closed for it;
        # B's second comes when the first has closed, and fits.
        self.b_is_served("full")
        held = self.evicted(held, 1)
        self.assertEqual(len(held), MAX_CONNS - 1)
        r, _, _ = select.select(held, [], [], 0.3)
        self.assertEqual(r, [], "a held partial head was answered")
        self.assertFalse(self.origin.saw_path("/a-"))
        rows = [r for r in self.gw.wait_audit(reason="too-many-connections")
                if r["client"].startswith(A + ":")]
        self.assertEqual(len(rows), 1, rows)
        for r in rows:
            self.assertEqual((r["decision"], r["status"], r["rule"],
                              r["sandbox"], r["host"]),
                             ("deny", 503, "limits", None, None), r)
        self.assertIsNotNone(self.gw.wait_log(
            r"too-many-connections: max_connections reached: closed to make "
            r"room, source 127\.0\.0\.2 holds \d+ connections"))

    def test_one_source_alone_is_refused_at_the_limit(self):
        socks = self.open_from(A, MAX_CONNS)
        held, closed = self.settle(socks)
        self.assertEqual((len(held), len(closed)), (MAX_CONNS, 0))
        extra = self.open_from(A, 1)
        held2, closed2 = self.settle(extra)
        self.assertEqual(len(closed2), 1, "A's 41st was let in")
        self.assertEqual(list(closed2.values()), [b""])
        self.assertEqual(self.settle(socks)[1], {}, "A closed itself room")
        self.assertIsNotNone(self.gw.wait_log(
            r"max_connections \(%d\) reached: refusing connections"
            % MAX_CONNS))

    def test_two_attacker_sources_the_larger_pays(self):
        a = self.open_from(A, 25)
        a2 = self.open_from(A2, 15)
        self.assertEqual(self.settle(a + a2)[1], {})
        self.partial(a, "one")
        self.partial(a2, "two")
        self.b_is_served("two")
        self.evicted(a, 1)
        self.assertEqual(self.settle(a2)[1], {}, "the smaller source paid")


if __name__ == "__main__":
    unittest.main(verbosity=2)
