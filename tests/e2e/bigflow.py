"""
Helpers of the bulk-relay tests (test_big_relay.py, test_big_transparent.py):
the data file (seeded PRNG), the origins process (data/big_origins.py), the
clients that are not curl (an opaque-tunnel peer, SOCKS5, WebSocket framing),
the check that the confined gateway had no system call refused, and what
both test classes do around it (BulkTest).
"""

import base64
import hashlib
import json
import os
import pwd
import random
import re
import socket
import ssl
import struct
import subprocess
import sys
import time

import sgtest as T
import auditcheck as AC
import wsframe as W

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data"))
import big_origins as O  # noqa: E402
ORIGINS = os.path.join(HERE, "data", "big_origins.py")
MIB = 1 << 20
# over 64 MiB and not a multiple of any buffer or record size
SIZE = 64 * MIB + 4099
BLOCK = MIB
# TLS records add 22-29 bytes per 16 KiB (0.2 %); the handshakes a few KiB
TLS_SLACK = SIZE // 100 + 64 * 1024


def make_data(d, seed, size=SIZE):
    """size bytes of a seeded PRNG in d/data.bin; (path, sha256 hex)."""
    rng = random.Random(seed)
    path = os.path.join(d, "data.bin")
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            b = rng.randbytes(min(left, 8 * MIB))
            h.update(b)
            f.write(b)
            left -= len(b)
    os.chmod(path, 0o644)
    return path, h.hexdigest()


def chunked_framing(size):
    """Bytes the origin's chunked framing (big_origins.CHUNKS) adds to size."""
    left, i, extra = size, 0, len(b"0\r\n\r\n")
    while left:
        n = min(left, O.CHUNKS[i % len(O.CHUNKS)])
        i += 1
        left -= n
        extra += len(b"%x\r\n\r\n" % n)
    return extra


def sha256_file(path):
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(8 * MIB)
            if not b:
                break
            h.update(b)
            n += len(b)
    return n, h.hexdigest()


def start_origins(d, data, servers, cleanup, prefix=(), name="big-origins"):
    """Run data/big_origins.py (behind prefix, e.g. ip netns exec NS) with
    servers; stopped through cleanup. Returns {id: port}."""
    spec = os.path.join(d, name + ".json")
    with open(spec, "w") as f:
        json.dump({"file": data, "servers": servers}, f)
    status = os.path.join(d, name + ".status")
    proc = T.Proc(list(prefix) + ["/usr/bin/python3", ORIGINS, spec, status],
                  os.path.join(d, name + ".log"))
    cleanup(proc.stop)
    deadline = time.time() + 15 * T.SLOW
    while not os.path.exists(status):
        if not proc.alive() or time.time() > deadline:
            raise RuntimeError("origins did not start:\n" + proc.log_tail())
        time.sleep(0.05)
    with open(status) as f:
        return json.load(f)


# ---------------------------------------------------------------- opaque peer

def recv_all(sock, limit=None):
    """Read to EOF; (bytes, sha256 hex) without keeping the bytes."""
    h = hashlib.sha256()
    n = 0
    while True:
        b = sock.recv(BLOCK)
        if not b:
            break
        h.update(b)
        n += len(b)
    return n, h.hexdigest()


def send_file(sock, path):
    with open(path, "rb") as f:
        while True:
            b = f.read(BLOCK)
            if not b:
                return
            sock.sendall(b)


def raw_up(sock, path, size):
    """The opaque protocol's upload on a connected socket: the peer's
    "<sha256> <n>" answer as (n, sha)."""
    sock.sendall(b"UP %d\n" % size)
    send_file(sock, path)
    line = b""
    while not line.endswith(b"\n"):
        b = sock.recv(256)
        if not b:
            break
        line += b
    sha, n = line.split()
    return int(n), sha.decode()


def raw_down(sock):
    """The opaque protocol's download: (n, sha) of what arrived before EOF."""
    sock.sendall(b"DOWN\n")
    return recv_all(sock)


RAW_UP_HEAD = len(b"UP %d\n" % SIZE)      # bytes a raw_up sends before the data
RAW_UP_ANSWER = 64 + 1 + len(str(SIZE)) + 1
RAW_DOWN_HEAD = len(b"DOWN\n")


def socks5_connect(port, host, dport, timeout=60):
    """A SOCKS5 CONNECT (no auth, domain name) through 127.0.0.1:port."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * T.SLOW)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise AssertionError("SOCKS5 method refused")
    name = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
              struct.pack("!H", dport))
    rep = b""
    while len(rep) < 10:
        b = s.recv(10 - len(rep))
        if not b:
            break
        rep += b
    if rep[:2] != b"\x05\x00":
        s.close()
        raise AssertionError("SOCKS5 reply %r" % rep)
    return s


# ---------------------------------------------------------------- WebSocket

class WsClient:
    """A WebSocket client over an established (TLS) socket."""

    def __init__(self, sock, host, path="/ws"):
        self.sock = sock
        self.rd = W.Reader(sock, bufsize=BLOCK)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n" % (path, host, key))
                     .encode())
        self.head = self.rd.read_until(b"\r\n\r\n").decode("latin-1")
        self.status = int(self.head.split(" ", 2)[1])
        want = W.accept_key(key)
        self.accept_ok = ("Sec-WebSocket-Accept: %s" % want).lower() \
            in self.head.lower()

    def read(self):
        """(opcode, payload) of the next server frame (unmasked, final)."""
        f = W.read_frame(self.rd.read_exact)
        if f.masked or not f.fin:
            raise AssertionError("server frame masked or fragmented")
        return f.opcode, f.payload

    def send(self, op, payload):
        self.sock.sendall(W.client_frame(op, payload))

    def upload(self, path):
        """The file in binary frames of 1 MiB, then "end"; the origin's
        JSON count of what it received."""
        with open(path, "rb") as f:
            while True:
                b = f.read(BLOCK)
                if not b:
                    break
                self.send(2, b)
        self.send(1, b"end")
        op, p = self.read()
        if op != 1:
            raise AssertionError("want a text frame, got opcode %d" % op)
        return json.loads(p)

    def download(self):
        """Ask for the file; (n, sha256) of the binary frames until "end"."""
        self.send(1, b"down")
        h = hashlib.sha256()
        n = 0
        while True:
            op, p = self.read()
            if op == 2:
                h.update(p)
                n += len(p)
            elif op == 1 and p == b"end":
                return n, h.hexdigest()
            else:
                raise AssertionError("unexpected frame %d %r" % (op, p[:80]))

    def close(self):
        self.send(8, b"\x03\xe8")
        op, _ = self.read()
        return op


def ws_wire_bytes(size, block=BLOCK, masked=True):
    """Bytes on the wire of size bytes sent as binary frames of block."""
    total = 0
    left = size
    while left:
        n = min(left, block)
        total += 2 + (8 if n >= 65536 else 2 if n >= 126 else 0) + \
            (4 if masked else 0) + n
        left -= n
    return total


# ---------------------------------------------------------------- confinement

def uptime():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def family(pid):
    """pid and its descendants (serve, sg-monitor, sg-keeper)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


_SECCOMP = re.compile(r"^\[\s*(\d+\.\d+)\] audit: type=1326 .*\bpid=(\d+)\b.*"
                      r"\bsyscall=(\d+)", re.M)


# Refused on purpose (docs/architecture.md, "The seccomp filter"): clone3
# answers ENOSYS so that glibc falls back to clone, whose flags the filter
# can read; every new thread asks once.
EXPECTED = {435}


class Confinement:
    """
    What the gateway's confinement refused while a test ran: kernel log
    records of seccomp (type=1326, the filter carries SECCOMP_FILTER_FLAG_LOG)
    for the gateway's processes since mark(), and EPERM in its own log.
    """

    def __init__(self, gw, since):
        """since: uptime() taken before the gateway started."""
        self.gw = gw
        self.pids = family(gw.proc.pid)
        self.dmesg_ok = subprocess.run(["dmesg"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL).returncode == 0
        self.t0 = since
        self.log_at = 0
        # what start-up had refused, up to the first mark()
        self.at_start = self.refused()
        self.mark()

    def mark(self):
        """Look only at what happens from now on (each test's own)."""
        self.t0 = uptime()
        self.log_at = len(self.gw.log_text())

    def refused(self):
        self.pids |= family(self.gw.proc.pid)
        out = []
        if self.dmesg_ok:
            text = subprocess.run(["dmesg"], stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
            for m in _SECCOMP.finditer(text):
                if float(m.group(1)) >= self.t0 - 0.5 and \
                        int(m.group(2)) in self.pids and \
                        int(m.group(3)) not in EXPECTED:
                    out.append(m.group(0))
        for line in self.gw.log_text()[self.log_at:].splitlines():
            if "Operation not permitted" in line:
                out.append(line)
        return out

    def check(self, tc):
        """No refusal since mark(); marks again."""
        got = self.refused()
        self.mark()
        tc.assertEqual(got, [], "the confined gateway had system "
                       "calls refused")

    def assert_confined(self, tc):
        """serve runs as the sandgate user with the seccomp filter on, and
        starting it had no system call refused."""
        tc.assertEqual(self.at_start, [], "refused while starting")
        st = T.proc_status(self.gw.proc.pid)
        uid = pwd.getpwnam("sandgate").pw_uid
        tc.assertEqual(st["Uid"].split()[0], str(uid), st["Uid"])
        tc.assertEqual(st["Seccomp"], "2", st)


def tls_client_ctx(cafile, alpn=None):
    ctx = ssl.create_default_context(cafile=cafile)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def digest_body(r):
    """(length, sha256 hex) of a CurlResult's body, which is then cut to
    300 bytes so that a failure message stays readable."""
    got = (len(r.body), hashlib.sha256(r.body).hexdigest())
    r.body = r.body[:300]
    return got


# ---------------------------------------------------------------- test class

class BulkTest:
    """
    Mixin for the bulk tests' unittest.TestCase: the confined gateway's
    start (start_confined, from setUpClass), each test's audit expectations
    and confinement check, the splice counter, and the first and last test
    (confined as a default install is; still alive). The class sets td, gw
    and mport (a metrics listener) before start_confined.
    """

    @classmethod
    def start_confined(cls, host, port, timeout, what):
        """Start cls.gw, wait until what (a listener) accepts on host:port
        and the gateway says ready (after its drop), then cls.conf."""
        t0 = uptime()
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp(host, port, timeout * T.SLOW, cls.gw.proc):
            raise AssertionError("%s listener not up:\n%s" %
                                 (what, cls.gw.log_tail()))
        # the listeners accept before the drop; "ready" comes after it
        if not cls.gw.wait_log(r"sandgate info: ready$", timeout=10):
            raise AssertionError("no ready line:\n" + cls.gw.log_tail())
        cls.conf = Confinement(cls.gw, t0)

    def setUp(self):
        self.audit = AC.Audit(self, self.gw, timeout=15)
        self.conf.mark()
        self.addCleanup(self.conf.check, self)

    def spliced(self):
        """sandgate_tunnels_spliced_total, from the metrics listener."""
        return T.metric(self.mport, "sandgate_tunnels_spliced_total",
                        self.td.path)

    def test_00_confined(self):
        """The gateway under test is confined as a default install is."""
        self.conf.assert_confined(self)

    def test_zz_alive(self):
        self.assertTrue(self.gw.alive(), self.gw.log_tail())
