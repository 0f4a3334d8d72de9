#!/usr/bin/python3
"""
A tunnel the gateway only relays moves to splice(2) after its first MiB
(docs/protocols.md, "When splice fails"). When splice fails at run time --
here an extra seccomp filter (tests/helpers/sg_fault_exec) makes it return
EPERM, as a stricter host would -- the relay goes on by copying and loses no
byte: 64 MiB each way arrive intact (SHA-256) and the row is `allow` with
the exact counts. When the bytes already in a splice pipe cannot be read
back, the tunnel ends as an `error` row with reason `relay-error`, never as
an allowed tunnel cut short. Every gateway runs as a default install does:
user sandgate, seccomp, keeper.
"""

import hashlib
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

MIB = 1 << 20
N = 64 * MIB
SPLICE_CHUNK = 1 << 20    # proxy_relay.c: socket -> pipe asks for this much
SPLICE_DRAIN = 16384      # proxy_relay.c: a pipe is read back this much at a time


def upload(n):
    """
    n random bytes that the gateway relays as opaque: a fixed first line,
    for random bytes start with 0x16 once in 256 runs and are then sniffed
    as a (malformed) ClientHello and refused, as they must be -- an opaque
    rule still checks TLS (docs/policy.md) -- which is not this test.
    """
    head = b"SG-BULK\r\n"
    return head + os.urandom(n - len(head))


class BulkOrigin:
    """
    Per connection: sends N bytes (then SHUT_WR) while it reads to EOF;
    records for each connection the SHA-256 and the count of what it read.
    """

    def __init__(self, host="127.0.0.2", n=N):
        self.n = n
        self.down = os.urandom(n)
        self.results = []
        self.lock = threading.Lock()
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind((host, 0))
        self.s.listen(8)
        self.port = self.s.getsockname()[1]
        self.stopping = False
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        def send():
            try:
                c.sendall(self.down)
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        st = threading.Thread(target=send, daemon=True)
        st.start()
        h, got = hashlib.sha256(), 0
        try:
            while True:
                b = c.recv(1 << 18)
                if not b:
                    break
                h.update(b)
                got += len(b)
        except OSError:
            pass
        st.join(120)
        c.close()
        with self.lock:
            self.results.append((got, h.hexdigest()))

    def stop(self):
        self.stopping = True
        self.s.close()


def tunnel_both_ways(gw_port, target, up, timeout=120):
    """
    CONNECT target, send up (then SHUT_WR) while reading to EOF or reset.
    Returns (status, bytes read, their SHA-256, error or None).
    """
    c, resp = T.open_tunnel(gw_port, target, timeout=timeout * T.SLOW)
    if resp.status != 200:
        c.close()
        return resp.status, 0, None, "CONNECT %d" % resp.status
    sock = c.sock
    err = []

    def send():
        try:
            sock.sendall(up)
            sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            err.append(e)
    st = threading.Thread(target=send, daemon=True)
    st.start()
    h = hashlib.sha256()
    got = 0
    if c.buf:
        h.update(c.buf)
        got += len(c.buf)
    try:
        while True:
            b = sock.recv(1 << 18)
            if not b:
                break
            h.update(b)
            got += len(b)
    except OSError as e:
        err.append(e)
    st.join(timeout)
    c.close()
    return 200, got, h.hexdigest(), err[0] if err else None


class SpliceFallbackTest(unittest.TestCase):
    def setUp(self):
        if T.FAULT_EXEC is None or not os.access(T.FAULT_EXEC, os.X_OK):
            raise unittest.SkipTest("sg_fault_exec not built (SANDGATE_FAULT_EXEC)")
        self.td = T.TempDir("sgtest-splicefb-")
        self.addCleanup(self.td.cleanup)
        self.origin = BulkOrigin()
        self.addCleanup(self.origin.stop)
        self.dns = T.Dnsmasq(self.td.path, [("bulk.test", "127.0.0.2")])
        self.addCleanup(self.dns.stop)
        self.mport = T.free_port()
        policy = {"sandboxes": [T.local_sandbox("bulk")],
                  "policies": [{"name": "bulk",
                                "allow": [{"host": "bulk.test",
                                           "ports": [self.origin.port],
                                           "opaque": True}],
                                "allow_private": ["127.0.0.2/32"]}]}
        self.gw = T.Gateway(self.td.path, self.dns, {"bulk.yaml": policy},
                            user="sandgate",
                            extra={"listen": {"metrics": "127.0.0.1:%d" % self.mport}})

    def start(self, *fault):
        self.gw.start(wrap=[T.FAULT_EXEC] + list(fault) + ["--"])
        self.addCleanup(self.gw.stop)

    def metric(self, name):
        st, _, body = T.tcp_http(self.mport, "GET", "/metrics")
        self.assertEqual(st, 200)
        m = re.search(r"^sandgate_%s (\d+)$" % name,
                      body.decode() if isinstance(body, bytes) else body, re.M)
        self.assertIsNotNone(m, "no %s in /metrics" % name)
        return int(m.group(1))

    def target(self):
        return "bulk.test:%d" % self.origin.port

    def origin_result(self):
        deadline = time.time() + 30 * T.SLOW
        while time.time() < deadline:
            with self.origin.lock:
                if self.origin.results:
                    return self.origin.results[-1]
            time.sleep(0.1)
        self.fail("the origin never saw its connection end")

    def assert_intact(self):
        up = upload(N)
        t = time.time()
        status, got, digest, err = tunnel_both_ways(self.gw.port, self.target(), up)
        print("  %d MiB each way in %.1f s" % (N // MIB, time.time() - t))
        self.assertEqual(status, 200)
        self.assertIsNone(err, "client saw an error; the gateway's log:\n" +
                          self.gw.log_tail())
        self.assertEqual(got, N, "bytes down")
        self.assertEqual(digest, hashlib.sha256(self.origin.down).hexdigest(),
                         "what came down differs from what the origin sent")
        ogot, odigest = self.origin_result()
        self.assertEqual(ogot, N, "bytes up")
        self.assertEqual(odigest, hashlib.sha256(up).hexdigest(),
                         "what went up differs from what the client sent")
        rows = self.gw.wait_audit(kind="connect", host="bulk.test",
                                  timeout=10)
        self.assertEqual(len(rows), 1, rows)
        r = rows[0]
        self.assertEqual((r["decision"], r["reason"], r["rule"], r["status"]),
                         ("allow", None, "bulk:allow[0]", 200), r)
        self.assertEqual((r["bytes_up"], r["bytes_down"]), (N, N), r)

    def test_splice_refused_copies_to_the_end(self):
        """Every splice fails with EPERM: the first one, right after the switch."""
        self.start("--splice")
        self.assert_intact()
        self.assertGreaterEqual(self.metric("tunnels_spliced_total"), 1)
        self.assertEqual(self.metric("splice_fallbacks_total"), 1)
        self.assertIsNotNone(self.gw.wait_log(
            r"splice\(2\) failed: Operation not permitted; tunnels are "
            r"relayed by copying from now on"), self.gw.log_tail())
        # a second tunnel does not try splice again, and is intact too
        self.origin.results.clear()
        self.assert_intact_second()

    def assert_intact_second(self):
        spliced = self.metric("tunnels_spliced_total")
        up = upload(8 * MIB)
        status, got, digest, err = tunnel_both_ways(self.gw.port, self.target(), up)
        self.assertEqual((status, got, err), (200, N, None))
        self.assertEqual(digest, hashlib.sha256(self.origin.down).hexdigest())
        self.assertEqual(self.origin_result(), (len(up), hashlib.sha256(up).hexdigest()))
        self.assertEqual(self.metric("tunnels_spliced_total"), spliced)

    def test_splice_fails_with_bytes_in_the_pipe(self):
        """
        socket -> pipe works, pipe -> socket fails: the failure hits after
        splice moved bytes into its pipes, which are read back and sent on.
        """
        self.start("--splice-unless-len", str(SPLICE_CHUNK))
        self.assert_intact()
        self.assertEqual(self.metric("splice_fallbacks_total"), 1)
        m = self.gw.wait_log(r"splice failed \(Operation not permitted\) after "
                             r"(\d+) bytes: relaying by copying, (\d+) bytes "
                             r"taken back from its pipes")
        self.assertIsNotNone(m, self.gw.log_tail())
        self.assertGreaterEqual(int(m.group(1)), MIB)
        self.assertGreater(int(m.group(2)), 0, "no byte was in the pipes")

    def test_pipe_unreadable_is_an_error_row(self):
        """
        The bytes in the pipe cannot be read back either: they are lost, so
        the tunnel is cut and its row says error / relay-error, not allow.
        """
        self.start("--splice-unless-len", str(SPLICE_CHUNK),
                   "--read-len", str(SPLICE_DRAIN))
        up = upload(N)
        status, got, digest, err = tunnel_both_ways(self.gw.port, self.target(), up)
        self.assertEqual(status, 200)
        ogot, _ = self.origin_result()
        self.assertTrue(got < N or ogot < N,
                        "nothing was cut: down %d, up %d" % (got, ogot))
        rows = self.gw.wait_audit(kind="connect", host="bulk.test", timeout=10)
        self.assertEqual(len(rows), 1, rows)
        r = rows[0]
        self.assertEqual((r["decision"], r["reason"], r["rule"]),
                         ("error", "relay-error", "bulk:allow[0]"), r)
        self.assertGreaterEqual(r["bytes_up"] + r["bytes_down"], MIB, r)
        self.assertIsNotNone(self.gw.wait_log(
            r"could not be read back \(Operation not permitted\): the tunnel "
            r"is cut"), self.gw.log_tail())


if __name__ == "__main__":
    T.main()
