#!/usr/bin/python3
"""
Probe (h2o2): an HTTP/2 ORIGIN that misbehaves toward the gateway while a
sandbox's HTTP/2 client talks to it through an intercepted CONNECT tunnel.

The origin is hand-written (TLS, ALPN h2, raw frames, HPACK by
python3-hpack); the client is the raw H2 client of test_http2.py. After
each scenario the audit table is read (read-only) for the rows of the
stream's path: one row per stream is the promise (docs/protocols.md: "Each
stream has its own audit row"; docs/audit.md: every decision is one row).

Tried:
- RST_STREAM from the origin right after HEADERS, and mid-body (after
  DATA), INTERNAL_ERROR and NO_ERROR;
- RST_STREAM REFUSED_STREAM on every try;
- GOAWAY with a last-stream-id below streams still open (GETs, a POST whose
  body had left, a stream already answered with HEADERS), then HEADERS and
  DATA on the refused streams after it, then a new request on the client
  connection; GOAWAY keeping the stream, then the origin closes;
- a DATA overrun past content-length and an underrun (END_STREAM early);
- 100 informational (103) HEADERS before the final one;
- a CONTINUATION flood (40 frames) and a header block over the limit;
- a PING flood and a SETTINGS flood (5000 frames each) from the origin;
- the origin's WINDOW_UPDATEs never arriving under an upload (the origin
  keeps its connection busy with PINGs);
- an answer dripping from the origin for longer than upstream.idle_timeout;
- trailers holding the vault secret toward the credential's own sandbox
  and toward another sandbox whose policy lists no credential.

Held (one line each):
- RST_STREAM after HEADERS / mid-body / NO_ERROR: the client gets the head
  (and the DATA) then RST_STREAM INTERNAL_ERROR, never END_STREAM;
- REFUSED_STREAM forever: 502 upstream-error, one row, <= 4 tries;
- GOAWAY below open GETs: each goes again on a new origin connection, 200,
  one allow row each; the frames sent on them after the GOAWAY never reach
  the client; a new stream opens a new origin connection;
- GOAWAY below a POST whose body left: 502 upstream-error, one row;
- GOAWAY keeping a GET, then close: the GET goes again once, 200, one row;
- content-length underrun / overrun: RST_STREAM, no clean end, no extra byte;
- 100 x 103 then 200: the client sees one 200 and its body, one row;
- CONTINUATION flood / header block over max_header_bytes: 502, one row;
- PING / SETTINGS flood: nghttp2 ends the origin session, 502, one row, the
  gateway lives;
- origin window never opening: the gateway took ~240 KiB of the client's
  upload and then gave no window; the stream was released (RST_STREAM) by
  upstream.idle_timeout, one row;
- secret in trailers: scrubbed to the placeholder (own sandbox) and to
  sandgate-redacted (another sandbox).

Findings (failing tests):
- one failure of an HTTP/2 origin stream after its head is two audit rows:
  an "error" row and an "allow" row (test_rst_after_headers_one_row,
  test_rst_mid_body_one_row, test_rst_no_error_mid_body_one_row,
  test_content_length_underrun_one_row, test_content_length_overrun_one_row,
  test_goaway_below_answered_stream -- one fault);
- an HTTP/2 origin's answer that keeps flowing is cut by
  upstream.idle_timeout (test_h2_origin_answer_dripping_is_not_idle).
"""

import os
import socket
import struct
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from test_credentials import TestCA, admin_request, placeholders_of  # noqa: E402
from test_http2 import H2, H2OriginBase, frame, read_frame, DATA, HEADERS, SETTINGS, PING, GOAWAY, \
    RST_STREAM, CONTINUATION, END_STREAM, END_HEADERS, ACK, \
    NO_ERROR, INTERNAL_ERROR  # noqa: E402

try:
    import hpack
except ImportError:
    hpack = None

ORIGIN_HOST = "127.0.0.2"
OTHER_SRC = "127.0.0.3"
SECRET = "sk-H2O2/probe+Secret_0123456789abcdefghijXYZ_v2"
IDLE = 3.0 * T.SLOW  # upstream.idle_timeout of the gateway, seconds (ASan: slower)

POLICY = """\
sandboxes:
  - id: box-h2o2
    policy: agent
    source: [127.0.0.1/32]
  - id: box-nocred
    policy: nocred
    source: [{other}/32]
policies:
  - name: agent
    allow:
      - host: evil.test
        ports: [{port}]
        tls: intercept
      - host: plain.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [h2o2-key]
  - name: nocred
    allow:
      - host: evil.test
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
credentials:
  - name: h2o2-key
    secret: h2o2-secret
    hosts: [evil.test]
    headers: [Authorization]
"""


class OConn:
    """One origin connection: frames out under a lock, HPACK state."""

    def __init__(self, srv, s, idx):
        self.srv, self.s, self.idx = srv, s, idx
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.lock = threading.Lock()
        self.streams = {}       # sid -> fields
        self.data = {}          # sid -> bytes of request body received
        self.goaway_sent = False
        self.closed = False

    def send(self, b):
        with self.lock:
            try:
                self.s.sendall(b)
            except OSError:
                self.closed = True

    def hdrs(self, sid, fields, flags=END_HEADERS):
        with self.lock:
            blk = self.enc.encode(fields)
            try:
                self.s.sendall(frame(HEADERS, flags, sid, blk))
            except OSError:
                self.closed = True


class EvilH2Origin(H2OriginBase):
    """TLS + ALPN h2; answers by :path (see answer())."""

    def __init__(self, cert, key, settings=b""):
        self.seen = []          # (conn idx, sid, fields)
        self.conns = []         # OConn, in the order their TLS came up
        super().__init__(cert, key, ORIGIN_HOST, backlog=64, timeout=60)

    def serve_h2(self, s, idx):
        with self.mu:
            oc = OConn(self, s, len(self.conns))
            self.conns.append(oc)
        self.serve(oc)

    def stop(self):
        super().stop()
        for c in list(self.conns):
            try:
                c.s.close()
            except OSError:
                pass

    def paths_on(self, idx):
        return [f.get(":path") for i, _, f in self.seen if i == idx]

    def conn_of(self, path):
        return [i for i, _, f in self.seen if f.get(":path") == path]

    read_frame = staticmethod(read_frame)

    def serve(self, oc):
        s = oc.s
        buf = [b""]
        while len(buf[0]) < 24:
            b = s.recv(65536)
            if not b:
                return
            buf[0] += b
        buf[0] = buf[0][24:]
        oc.send(frame(SETTINGS, 0, 0))
        hblock = {}
        while True:
            typ, flags, sid, p = self.read_frame(s, buf)
            if typ == SETTINGS and not flags & ACK:
                oc.send(frame(SETTINGS, ACK, 0))
                continue
            if typ == PING and not flags & ACK:
                oc.send(frame(PING, ACK, 0, p))
                continue
            if typ == DATA:
                oc.data[sid] = oc.data.get(sid, b"") + p
                continue
            if typ in (HEADERS, CONTINUATION):
                if typ == HEADERS and flags & 0x8:   # padded
                    pl = p[0]
                    p = p[1:len(p) - pl]
                if typ == HEADERS and flags & 0x20:  # priority
                    p = p[5:]
                hblock[sid] = hblock.get(sid, b"") + p
                if flags & END_HEADERS:
                    with oc.lock:
                        fields = dict(oc.dec.decode(hblock.pop(sid)))
                    oc.streams[sid] = fields
                    self.seen.append((oc.idx, sid, fields))
                    threading.Thread(target=self.answer_safe,
                                     args=(oc, sid, fields),
                                     daemon=True).start()

    def answer_safe(self, oc, sid, f):
        try:
            self.answer(oc, sid, f)
        except Exception:
            pass

    def answer(self, oc, sid, f):
        path = f.get(":path", "/")
        auth = f.get("authorization", "none")

        def ok(body=b"ok", extra=()):
            oc.hdrs(sid, [(":status", "200")] + list(extra))
            oc.send(frame(DATA, END_STREAM, sid, body))

        if path.startswith("/rst-after-headers"):
            oc.hdrs(sid, [(":status", "200")])
            time.sleep(0.2)
            oc.send(frame(RST_STREAM, 0, sid,
                          struct.pack("!I", INTERNAL_ERROR)))
        elif path.startswith("/rst-noerror"):
            oc.hdrs(sid, [(":status", "200")])
            oc.send(frame(DATA, 0, sid, b"half-"))
            time.sleep(0.2)
            oc.send(frame(RST_STREAM, 0, sid, struct.pack("!I", NO_ERROR)))
        elif path.startswith("/rst-mid"):
            oc.hdrs(sid, [(":status", "200")])
            oc.send(frame(DATA, 0, sid, b"first-part;"))
            time.sleep(0.2)
            oc.send(frame(RST_STREAM, 0, sid,
                          struct.pack("!I", INTERNAL_ERROR)))
        elif path.startswith("/ga/"):
            # Held until /ga/go arrives on this connection.
            first = oc.streams.get(min(oc.streams), {}).get(":path", "")
            if not first.startswith("/ga/first") or oc.goaway_sent:
                ok(b"conn%d" % oc.idx)
                return
            if path.startswith("/ga/headed"):
                oc.hdrs(sid, [(":status", "200")])
                oc.send(frame(DATA, 0, sid, b"headed-part;"))
                return
            if not path.startswith("/ga/go"):
                return
            # Wait for the streams below to be here (sid is the highest).
            deadline = time.time() + 5
            while time.time() < deadline and len(oc.streams) < sid // 2 + 1:
                time.sleep(0.02)
            oc.goaway_sent = True
            oc.send(frame(GOAWAY, 0, 0, struct.pack("!II", 1, NO_ERROR)))
            time.sleep(0.1)
            # Stream 1 (<= last id) is answered; the others get frames
            # after the GOAWAY that must go nowhere.
            for other in sorted(oc.streams):
                if other == 1:
                    continue
                oc.hdrs(other, [(":status", "299"),
                                ("x-after-goaway", "yes")])
                oc.send(frame(DATA, END_STREAM, other, b"after-goaway"))
            if 1 in oc.streams:
                oc.hdrs(1, [(":status", "200")])
                oc.send(frame(DATA, END_STREAM, 1, b"conn0-first"))
        elif path.startswith("/refuse-always"):
            oc.send(frame(RST_STREAM, 0, sid, struct.pack("!I", 7)))
        elif path.startswith("/goaway-close"):
            # GOAWAY that keeps this stream (last id = sid), then close.
            oc.send(frame(GOAWAY, 0, 0, struct.pack("!II", sid, NO_ERROR)))
            time.sleep(0.2)
            if len(self.conn_of(path)) == 1:
                oc.closed = True
                # shutdown: close() alone leaves the reader thread's recv
                # holding the socket, and no FIN goes out.
                oc.s.shutdown(socket.SHUT_RDWR)
                return
            ok(b"second-try")
        elif path.startswith("/cl-under"):
            oc.hdrs(sid, [(":status", "200"), ("content-length", "100")])
            oc.send(frame(DATA, END_STREAM, sid, b"only-ten!!"))
        elif path.startswith("/cl-over"):
            oc.hdrs(sid, [(":status", "200"), ("content-length", "4")])
            oc.send(frame(DATA, 0, sid, b"four"))
            time.sleep(0.1)
            oc.send(frame(DATA, END_STREAM, sid, b"-and-then-more"))
        elif path.startswith("/info100"):
            for i in range(100):
                oc.hdrs(sid, [(":status", "103"), ("link", "</x%d>" % i)])
            ok(b"after-100-infos")
        elif path.startswith("/contflood"):
            with oc.lock:
                blk = oc.enc.encode([(":status", "200")])
            b = frame(HEADERS, 0, sid, blk)
            for i in range(40):
                b += frame(CONTINUATION, 0, sid, b"")
            oc.send(b)
            time.sleep(30)
        elif path.startswith("/bighead"):
            with oc.lock:
                blk = oc.enc.encode([(":status", "200")] +
                                    [("x-big-%d" % i, "v" * 4000)
                                     for i in range(30)], huffman=False)
            chunks = [blk[i:i + 16000] for i in range(0, len(blk), 16000)]
            b = frame(HEADERS, END_HEADERS if len(chunks) == 1 else 0, sid,
                      chunks[0])
            for i, c in enumerate(chunks[1:]):
                b += frame(CONTINUATION, END_HEADERS
                           if i == len(chunks) - 2 else 0, sid, c)
            oc.send(b)
            oc.send(frame(DATA, END_STREAM, sid, b"bighead-body"))
        elif path.startswith("/pingflood"):
            b = b"".join(frame(PING, 0, 0, struct.pack("!Q", i))
                         for i in range(5000))
            oc.send(b)
            ok(b"after-pings")
        elif path.startswith("/settingsflood"):
            b = b"".join(frame(SETTINGS, 0, 0, struct.pack("!HI", 3, 100))
                         for i in range(5000))
            oc.send(b)
            ok(b"after-settings")
        elif path.startswith("/drip"):
            oc.hdrs(sid, [(":status", "200")])
            for i in range(int(IDLE * 2 / 0.5) + 2):
                oc.send(frame(DATA, 0, sid, b"piece %d\n" % i))
                time.sleep(0.5)
            oc.send(frame(DATA, END_STREAM, sid, b"end\n"))
        elif path.startswith("/stall"):
            # Never any WINDOW_UPDATE; PINGs keep the connection busy.
            for i in range(int(IDLE * 4 / 0.5)):
                if oc.closed:
                    return
                oc.send(frame(PING, 0, 0, struct.pack("!Q", i)))
                time.sleep(0.5)
            ok(b"stall-answered")
        elif path.startswith("/silent"):
            # never a frame for this stream; refused first when asked
            if "refused-first" in path and len(self.conn_of(path)) == 1:
                oc.send(frame(RST_STREAM, 0, sid, struct.pack("!I", 7)))
        elif path.startswith("/trailers"):
            oc.hdrs(sid, [(":status", "200")])
            oc.send(frame(DATA, 0, sid, b"body;"))
            tr = [("x-trailer", "v=" + SECRET), ("x-auth-seen", auth)]
            oc.hdrs(sid, tr, END_HEADERS | END_STREAM)
        else:
            ok()


class H2From(H2):
    """H2 whose tunnel comes from a given source address."""

    def __init__(self, test, host, port, source):
        real = T.open_tunnel
        T.open_tunnel = lambda p, t: real(p, t, source=source)
        try:
            H2.__init__(self, test, host, port)
        finally:
            T.open_tunnel = real


class H2OriginProbe2(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if hpack is None:
            T.skip_file("python3-hpack is not installed")
        cls.td = T.TempDir("sgtest-h2o2-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        cert, key = cls.pki.leaf("evil.test", ["evil.test", "plain.test"])
        cls.origin = EvilH2Origin(cert, key)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [("evil.test", ORIGIN_HOST),
                                ("plain.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"h2o2.yaml": POLICY.format(
            port=cls.origin.port, origin=ORIGIN_HOST, other=OTHER_SRC)},
            extra={"upstream": {"ca_bundle": cls.pki.cert,
                                "idle_timeout": "%dms" % int(IDLE * 1000)},
                   "listen": {"admin": os.path.join(d, "admin.sock")}})
        r = T.run_sandgate("vault", "set", "h2o2-secret", "-c",
                           cls.gw.cfg_path, input=SECRET)
        if r.returncode != 0:
            raise RuntimeError("vault set: %s" % r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = os.path.join(d, "certs", "ca.crt")
        admin = os.path.join(d, "admin.sock")
        cls.gw.wait_admin(admin)
        st, _, doc = admin_request(admin, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        listing = {e["id"]: e for e in doc["sandboxes"]}
        cls.ph = placeholders_of(listing["box-h2o2"])["h2o2-key"][
            "placeholder"]

    # ------------------------------------------------------------ helpers

    def h2(self, host="evil.test", timeout=None):
        h = H2(self, host, self.origin.port)
        self.assertEqual(h.alpn, "h2")
        h.sock.settimeout(timeout or 15 * T.SLOW)
        return h

    def auth(self, host="evil.test"):
        return [("authorization", "Bearer " + self.ph)] \
            if host == "evil.test" else []

    def get(self, path, host="evil.test", timeout=None):
        h = self.h2(host, timeout)
        h.request(1, path=path, extra=self.auth(host))
        st, = h.wait(1)
        return h, st

    def wait_seen(self, path):
        """Until the origin has the stream: the next one then shares its
        connection (sent 50 ms later, a loaded ASan run's next stream found
        the first one's connection still in its handshake and opened one of
        its own)."""
        deadline = time.time() + 10 * T.SLOW
        while not self.origin.conn_of(path) and time.time() < deadline:
            time.sleep(0.02)

    def rows_settled(self, path, host="evil.test", settle=1.0):
        """The rows of path, once none came for `settle` seconds."""
        deadline = time.time() + 8 * T.SLOW
        rows, last, since = [], -1, time.time()
        while time.time() < deadline:
            rows = self.gw.audit_rows(host=host, path=path)
            if len(rows) != last:
                last, since = len(rows), time.time()
            elif rows and time.time() - since >= settle * T.SLOW:
                break
            time.sleep(0.1)
        return rows

    def one_row(self, path, host="evil.test"):
        rows = self.rows_settled(path, host)
        brief = [(r["id"], r["decision"], r["status"], r["reason"])
                 for r in rows]
        self.assertEqual(len(rows), 1, "want one audit row for %s, got %r"
                         % (path, brief))
        return rows[0]

    def assert_cut(self, st):
        """The stream ended, and not with a clean END_STREAM."""
        self.assertTrue(st["done"], st)
        self.assertIsNotNone(st["rst"], "a broken answer ended cleanly: %r"
                             % (st,))

    def assert_no_secret(self, h):
        self.assertNotIn(SECRET.encode(), repr(h.streams).encode())

    # ------------------------------------------------------ RST_STREAM

    def test_rst_after_headers_one_row(self):
        """
        FINDING (double audit row). docs/protocols.md: "Each stream has its
        own audit row"; docs/audit.md: every decision is one row.
        Sent: the origin answers HEADERS :status 200, then RST_STREAM
        INTERNAL_ERROR. The client gets the 200 then RST_STREAM
        INTERNAL_ERROR (held). Observed: two rows for the one stream, same
        millisecond: (error, 200, upstream-error) then (allow, 200, -).
        """
        h, st = self.get("/rst-after-headers")
        self.assertEqual(H2.status(st), 200, st)
        self.assert_cut(st)
        row = self.one_row("/rst-after-headers")
        self.assertEqual(row["decision"], "error", row)

    def test_rst_mid_body_one_row(self):
        """FINDING, the same fault as test_rst_after_headers_one_row: HEADERS
        200, DATA "first-part;", RST_STREAM INTERNAL_ERROR (plain.test, no
        scrubber hold-back): an error row and an allow row."""
        h, st = self.get("/rst-mid", host="plain.test")
        self.assertEqual(st["data"], b"first-part;")
        self.assert_cut(st)
        row = self.one_row("/rst-mid", host="plain.test")
        self.assertEqual(row["decision"], "error", row)

    def test_rst_no_error_mid_body_one_row(self):
        """FINDING, the same fault: HEADERS 200, DATA, RST_STREAM NO_ERROR
        before END_STREAM (still a cut answer): two rows."""
        h, st = self.get("/rst-noerror")
        self.assert_cut(st)
        row = self.one_row("/rst-noerror")
        self.assertEqual(row["decision"], "error", row)

    # ---------------------------------------------------- content-length

    def test_content_length_underrun_one_row(self):
        """
        FINDING, the same fault. Sent: HEADERS 200 content-length 100, one
        DATA of 10 bytes with END_STREAM. The client gets RST_STREAM (held);
        the audit has (error, 200, upstream-error) and (allow, 200, -).
        """
        h, st = self.get("/cl-under")
        self.assert_cut(st)
        row = self.one_row("/cl-under")
        self.assertEqual(row["decision"], "error", row)

    def test_content_length_overrun_one_row(self):
        """FINDING, the same fault: content-length 4, DATA "four", then DATA
        "-and-then-more" END_STREAM: RST_STREAM (held), two rows."""
        h, st = self.get("/cl-over")
        self.assert_cut(st)
        row = self.one_row("/cl-over")
        self.assertEqual(row["decision"], "error", row)

    # ----------------------------------------------------------- GOAWAY

    def test_goaway_below_open_streams(self):
        """
        Streams 1 (/ga/first), 3, 5 (/ga/held-*) and 7 (/ga/go) open on one
        origin connection; on /ga/go the origin sends GOAWAY last-stream-id
        1, then HEADERS+DATA on 3, 5, 7 (frames after the GOAWAY), then
        answers 1. docs/protocols.md: a stream "past a GOAWAY's last stream
        id ... goes again on another connection"; new streams take a new
        origin connection. Each stream: one row.
        """
        h = self.h2()
        paths = {1: "/ga/first", 3: "/ga/held-a", 5: "/ga/held-b",
                 7: "/ga/go"}
        for sid in sorted(paths):
            h.request(sid, path=paths[sid], extra=self.auth())
            self.wait_seen(paths[sid])
        sts = h.wait(*sorted(paths))
        self.assertEqual(H2.status(sts[0]), 200, sts[0])
        self.assertEqual(sts[0]["data"], b"conn0-first")
        self.assertEqual(h.stream(3)["data"][:4], b"conn", sts)
        for st in sts[1:]:
            self.assertEqual(H2.status(st), 200, st)
            self.assertNotEqual(st["data"], b"after-goaway", st)
            self.assertIsNone(st["rst"], st)
        # A new request: not on the connection that went away.
        h.request(9, path="/ga/new", extra=self.auth())
        st, = h.wait(9)
        self.assertEqual(H2.status(st), 200, st)
        first = self.origin.conn_of("/ga/first")
        self.assertEqual(len(first), 1)
        self.assertNotIn(first[0], self.origin.conn_of("/ga/new"))
        for p in ("/ga/held-a", "/ga/held-b", "/ga/go"):
            self.assertNotIn(first[0], self.origin.conn_of(p)[1:], p)
        for p in list(paths.values()) + ["/ga/new"]:
            row = self.one_row(p)
            self.assertEqual(row["decision"], "allow", row)

    def test_goaway_below_answered_stream(self):
        """
        FINDING, the same fault. Stream 1 /ga/first2; stream 3 /ga/headed
        gets HEADERS 200 and DATA; then (on stream 5 /ga/go2) the origin
        sends GOAWAY last-stream-id 1: stream 3 was answered and cannot go
        again -- it ends cut (RST_STREAM, held), but with two rows, (error,
        200, upstream-error) and (allow, 200, -).
        """
        h = self.h2()
        h.request(1, path="/ga/first2", extra=self.auth())
        self.wait_seen("/ga/first2")
        h.request(3, path="/ga/headed", extra=self.auth())
        while not h.stream(3)["headers"] and h.pump():
            pass
        h.request(5, path="/ga/go2", extra=self.auth())
        st1, st3, st5 = h.wait(1, 3, 5)
        self.assertEqual(H2.status(st3), 200, st3)
        self.assert_cut(st3)
        row = self.one_row("/ga/headed")
        self.assertEqual(row["decision"], "error", row)
        self.one_row("/ga/go2")
        self.one_row("/ga/first2")

    def test_goaway_below_post_with_body(self):
        """
        A POST whose body left (stream 3), refused by a GOAWAY with
        last-stream-id 1: not sent again (docs: "as long as ... no body byte
        left"), 502 upstream-error, one row.
        """
        h = self.h2()
        h.request(1, path="/ga/first3", extra=self.auth())
        self.wait_seen("/ga/first3")
        h.request(3, method="POST", path="/ga/post", extra=self.auth(),
                  body=b"x" * 1000)
        time.sleep(0.3)
        h.request(5, path="/ga/go3", extra=self.auth())
        st1, st3, st5 = h.wait(1, 3, 5)
        self.assertEqual(H2.status(st3), 502, st3)
        row = self.one_row("/ga/post")
        self.assertEqual(row["reason"], "upstream-error", row)

    def test_refused_stream_forever(self):
        """Every try refused (RST_STREAM REFUSED_STREAM): at most 3 tries
        more, then 502, one row."""
        h, st = self.get("/refuse-always")
        self.assertEqual(H2.status(st), 502, st)
        self.assertLessEqual(len(self.origin.conn_of("/refuse-always")), 4)
        self.one_row("/refuse-always")

    def test_goaway_then_close_under_get(self):
        """GOAWAY keeping the stream (last id = its id), then the origin
        closes unanswered: a GET goes again once, one row."""
        h, st = self.get("/goaway-close")
        self.assertEqual(H2.status(st), 200, st)
        self.assertEqual(st["data"], b"second-try")
        row = self.one_row("/goaway-close")
        self.assertEqual(row["decision"], "allow", row)

    # ------------------------------------------------------ 1xx, headers

    def test_hundred_informational_heads(self):
        h, st = self.get("/info100")
        self.assertEqual(H2.status(st), 200, st)
        self.assertEqual(len(st["headers"]), 1, st)
        self.assertEqual(st["data"], b"after-100-infos")
        row = self.one_row("/info100")
        self.assertEqual(row["decision"], "allow", row)

    def test_continuation_flood_from_origin(self):
        h, st = self.get("/contflood", timeout=30 * T.SLOW)
        self.assertTrue(st["done"], st)
        self.assertNotEqual(H2.status(st), 200, st)
        self.one_row("/contflood")

    def test_header_block_over_limit_from_origin(self):
        h, st = self.get("/bighead", timeout=30 * T.SLOW)
        self.assertTrue(st["done"], st)
        self.assertEqual(H2.status(st), 502, st)
        self.one_row("/bighead")

    # ------------------------------------------------------------ floods

    def test_ping_flood_from_origin(self):
        h, st = self.get("/pingflood", timeout=30 * T.SLOW)
        self.assertTrue(st["done"], st)
        self.one_row("/pingflood")
        self.assertTrue(self.gw.alive())

    def test_settings_flood_from_origin(self):
        h, st = self.get("/settingsflood", timeout=30 * T.SLOW)
        self.assertTrue(st["done"], st)
        self.one_row("/settingsflood")
        self.assertTrue(self.gw.alive())

    # ---------------------------------------------------- flow control

    def test_origin_window_never_opens(self):
        """
        The origin grants no WINDOW_UPDATE (its stream window stays at
        65535) and keeps the connection busy with PINGs; the client uploads
        without end. The gateway must stop giving the client window (memory
        bounded) and release the stream by a timeout, its row an error
        (FOUND: it was "allow" with no status).
        """
        h = self.h2()
        h.send(frame(HEADERS, END_HEADERS, 1, h.block(
            1, "POST", "/stall", self.auth())))
        chunk = b"u" * 16384
        sent, t0 = 0, time.time()
        h.sock.settimeout(0.2)
        # Send as long as the gateway gives window, up to 4 MiB.
        window = 65535
        while sent < 4 << 20 and time.time() - t0 < IDLE * 3:
            if window >= len(chunk):
                h.send(frame(DATA, 0, 1, chunk))
                sent += len(chunk)
                window -= len(chunk)
                continue
            before = h.window_updates.get(1, 0)
            if not h.pump() and h.closed:
                break
            window += h.window_updates.get(1, 0) - before
            if h.stream(1)["done"]:
                break
        self.assertLess(sent, 512 * 1024, "the gateway took %d bytes of a "
                        "stalled upload" % sent)
        h.sock.settimeout(IDLE * 4 * T.SLOW)
        st, = h.wait(1)
        self.assertTrue(st["done"], st)
        row = self.one_row("/stall")
        # No answer within the idle time is the origin's timeout, not an
        # allowed exchange (the row said allow with no status).
        self.assertEqual((row["decision"], row["status"], row["reason"]),
                         ("error", 504, "upstream-timeout"), row)

    def test_silent_origin_stream_answered_504(self):
        """
        An origin that never answers a GET, on client connections quiet
        meanwhile: each stream gets 504 upstream-timeout at the idle time,
        its row says so. FOUND: the client connection's own idle timer,
        due at the same moment, could fire first and end its streams as
        the client's going: no answer, an allow row with no status. Four
        connections at once, as each is a toss of the two timers' order.
        """
        self.silent_streams("/silent/%d")

    def test_refused_then_silent_answered_504(self):
        """The same, the stream refused once and sent again first (its
        going again was the stream's last activity, after its connection's:
        FOUND, the connection's timer always came first)."""
        self.silent_streams("/silent/refused-first/%d")

    def silent_streams(self, fmt):
        conns = []
        for i in range(4):
            h = self.h2(timeout=IDLE * 4 * T.SLOW)
            h.request(1, path=fmt % i, extra=self.auth())
            conns.append(h)
        for i, h in enumerate(conns):
            st, = h.wait(1)
            self.assertEqual(H2.status(st), 504, (i, st))
            row = self.one_row(fmt % i)
            self.assertEqual((row["decision"], row["status"], row["reason"]),
                             ("error", 504, "upstream-timeout"), row)

    def test_h2_origin_answer_dripping_is_not_idle(self):
        """
        FINDING. docs/config.md upstream.idle_timeout: "a connection with no
        traffic either way for this long is closed"; test_http2.py
        test_answer_flowing_is_not_idle holds for an HTTP/1.1 origin that
        "an answer still coming on a stream is traffic". Sent: the HTTP/2
        origin (plain.test, no credential) answers 200, then one DATA frame
        "piece N\n" every 0.5 s for twice upstream.idle_timeout (3 s here),
        then END_STREAM. Observed: exactly 3.0 s after the request, with
        pieces 0-5 delivered and more coming, the client's stream gets
        RST_STREAM INTERNAL_ERROR; the row says (allow, 200, -).
        """
        t0 = time.time()
        h, st = self.get("/drip", host="plain.test",
                         timeout=IDLE * 4 * T.SLOW)
        took = time.time() - t0
        self.assertEqual(H2.status(st), 200, st)
        self.assertTrue(st["done"], st)
        self.assertIsNone(st["rst"], "the stream was cut after %.1f s while "
                          "its answer was flowing: %r; rows %r" % (
                              took, st, [(r["decision"], r["status"],
                                          r["reason"]) for r in
                                         self.rows_settled("/drip",
                                                           "plain.test")]))
        self.assertTrue(st["data"].endswith(b"end\n"), st)
        row = self.one_row("/drip", host="plain.test")
        self.assertEqual(row["decision"], "allow", row)

    # ------------------------------------------------------------ trailers

    def test_trailers_secret_scrubbed_own_sandbox(self):
        h, st = self.get("/trailers")
        self.assertEqual(H2.status(st), 200, st)
        self.assert_no_secret(h)
        tr = st["headers"][-1]
        self.assertEqual(tr.get("x-trailer"), "v=" + self.ph, st)
        self.assertEqual(tr.get("x-auth-seen"), "Bearer " + self.ph, st)
        self.one_row("/trailers")

    def test_trailers_secret_scrubbed_other_sandbox(self):
        """
        docs/credentials.md: an answer to a sandbox whose policy allows a
        bound host but lists none of its credentials is scrubbed of the
        other policies' secrets bound to that host (sandgate-redacted).
        """
        h = H2From(self, "evil.test", self.origin.port, OTHER_SRC)
        self.assertEqual(h.alpn, "h2")
        h.request(1, path="/trailers-other")
        st, = h.wait(1)
        self.assertEqual(H2.status(st), 200, st)
        self.assert_no_secret(h)
        self.assertEqual(st["headers"][-1].get("x-trailer"),
                         "v=sandgate-redacted", st)


if __name__ == "__main__":
    T.main()
