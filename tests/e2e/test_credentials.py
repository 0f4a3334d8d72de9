#!/usr/bin/python3
"""
End-to-end tests of credential handling (SPEC §7, the credentials part of
§4, issue 5) with the real gateway: HTTPS echo origins of our own on a test
CA (one bound to the credentials, one not, plus a plain-HTTP one), secrets
set with `sandgate vault set`, placeholders read from the admin API. The
secret must reach the bound host in Bearer, Basic and query form and nowhere
else; the client must never see it in any encoding (responses scrubbed even
when the secret is split across chunks); every misuse is a 403 with its
reason and an audit row naming the credential; rotation without restart; a
dynamic sandbox's own placeholder; and, after it all, the secret in no log,
no audit row and no argv.
"""

import base64
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
DYN_SOURCE = "127.0.0.5"

# Secrets with bytes that percent- and JSON-encoding change, so each
# encoding of the secret differs from the raw one.
SECRET = 'sk-E2E/cred+Test "q1" \\b&x=1 0123456789abcdefXYZ_v1'
SECRET2 = 'sk-E2E/rotated+Value "r2" \\c&y=2 9876543210fedcUVW_v2'
FIXED_SECRET = 'fx-E2E/fixed+Secret="f" 0123456789ABCDEFghij/klmn'
LOOSE_SECRET = 'lo-E2E/loose+Secret="l" abcdefghij0123456789/KLMN'
ALL_SECRETS = (SECRET, SECRET2, FIXED_SECRET, LOOSE_SECRET)
FIXED_PH = "sgtest-fixed-placeholder-0001"
TOKEN_B = "box-b-token-0123456789"
ATTACKER_KEY = "sk-attacker-own-key-0123456789abcdef"
PH_RX = re.compile(r"^sg-ph-[a-z2-7]{32}$", re.I)

ENCODERS = {
    "raw": lambda s: s,
    "b64": lambda s: base64.b64encode(s.encode()).decode(),
    "b64url": lambda s: base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
    "pct": lambda s: urllib.parse.quote(s, safe=""),
    "json": lambda s: json.dumps(s)[1:-1],
}
PIECES = (1, 2, 3, 5, 7, 11, 4)  # write sizes the origin cycles through


def b64_core(data, align, url=False):
    """The base64 characters fully fixed by data at byte alignment 0..2."""
    enc = (base64.urlsafe_b64encode if url else base64.b64encode)(
        b"\0" * align + data + b"\0\0").decode()
    return enc[(8 * align + 5) // 6:(8 * align + 8 * len(data)) // 6]


def secret_forms(secret):
    """Every encoding of secret a client must never see, as bytes."""
    b = secret.encode()
    pct_up = urllib.parse.quote(secret, safe="")
    pct_lo = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), pct_up)
    all_up = "".join("%%%02X" % c for c in b)
    js = json.dumps(secret)[1:-1]
    forms = {secret, pct_up, pct_lo, all_up, all_up.lower(), js,
        js.replace("/", "\\/"), urllib.parse.quote_plus(secret)}
    for a in range(3):
        forms.add(b64_core(b, a))
        forms.add(b64_core(b, a, url=True))
    return sorted(f.encode() for f in forms)


def run(argv, input=None, timeout=30):
    return subprocess.run(argv, input=input, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=T.clean_env(), timeout=timeout * T.SLOW)


def must(argv):
    r = run(argv)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(argv),
            r.stderr.decode(errors="replace")))


# ---------------------------------------------------------------- test CA

class TestCA:
    """A CA of the test's own and the server certificates it signs."""

    def __init__(self, d):
        self.d = os.path.join(d, "origin-ca")
        os.makedirs(self.d)
        self.cert = os.path.join(self.d, "ca.crt")
        self.key = os.path.join(self.d, "ca.key")
        self.serial = 0x5000
        must([T.OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-days", "7",
            "-subj", "/CN=sgtest credentials CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", self.key, "-out", self.cert])

    def leaf(self, cn, names):
        base = os.path.join(self.d, cn)
        key, csr, crt, ext = (base + s for s in (".key", ".csr", ".crt", ".ext"))
        must([T.OPENSSL, "req", "-new", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", key, "-out", csr])
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n" %
                ",".join("DNS:" + n for n in names))
        self.serial += 1
        must([T.OPENSSL, "x509", "-req", "-in", csr, "-CA", self.cert,
            "-CAkey", self.key, "-set_serial", str(self.serial), "-days", "7",
            "-sha256", "-extfile", ext, "-out", crt])
        return crt, key


# ---------------------------------------------------------------- echo origin

def seen_secret(headers, path):
    """The credential value a request carried: Bearer, Basic, X-Api-Key or ?key=."""
    a = headers.get("Authorization") or ""
    if a.startswith("Bearer "):
        return a[7:]
    if a.lower().startswith("basic "):
        try:
            dec = base64.b64decode(a[6:].strip(), validate=True).decode("latin-1")
        except ValueError:
            return None
        return dec.split(":", 1)[1] if ":" in dec else None
    if headers.get("X-Api-Key"):
        return headers["X-Api-Key"]
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    return q["key"][0] if "key" in q else None


class _EchoHandler(http.server.BaseHTTPRequestHandler):
    """
    /leak/ENC/MODE: the secret the request carried, encoded (raw, b64,
    b64url, pct, json), in a response header and three times in a body
    written a few bytes at a time (MODE chunked: one chunk per write;
    length: Content-Length; close: until close). Anything else: the request
    line, headers and body as the body, Authorization and X-Api-Key echoed
    in response headers.
    """
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *a):
        pass

    def setup(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        srv = self.server
        if srv.ssl_ctx is not None:
            self.request.settimeout(10)
            self.request = srv.ssl_ctx.wrap_socket(self.request, server_side=True)
        with srv.lock:
            srv.open_socks.add(self.request)
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.lock:
                self.server.open_socks.discard(self.request)

    def _read_body(self, rec):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise ConnectionError("short chunked body")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    # trailer fields: kept, so that tests see what arrived
                    while True:
                        line = self.rfile.readline(8192)
                        if line in (b"\r\n", b"\n", b""):
                            return
                        rec["trailers"] = rec.get("trailers", b"") + line
                while size:
                    b = self.rfile.read(size)
                    if not b:
                        raise ConnectionError("short chunk")
                    rec["body"] += b
                    size -= len(b)
                self.rfile.readline(16)
        elif self.headers.get("Content-Length"):
            left = int(self.headers["Content-Length"])
            while left:
                b = self.rfile.read(min(left, 65536))
                if not b:
                    raise ConnectionError("short body")
                rec["body"] += b
                left -= len(b)

    def _handle(self):
        srv = self.server
        rec = {"line": self.requestline, "path": self.path,
            "headers": [(k, v) for k, v in self.headers.items()],
            "body": b"", "complete": False, "peer": self.client_address[0],
            "port": self.client_address[1],
            "seen": seen_secret(self.headers, self.path)}
        with srv.lock:
            srv.requests.append(rec)
        if self.path.startswith("/echo/early"):
            self._early()
            return
        self._read_body(rec)
        rec["complete"] = True
        m = re.match(r"^/echo/drip/([0-9]+)$", self.path)
        if m:
            self._drip(int(m.group(1)))
            return
        m = re.match(r"^/leak/([a-z0-9]+)/([a-z]+)", self.path)
        if m and m.group(1) in ENCODERS:
            self._leak(rec["seen"] or "", m.group(1), m.group(2))
            return
        body = (self.requestline + "\r\n" + "".join("%s: %s\r\n" % kv
            for kv in rec["headers"]) + "\r\n").encode("latin-1") + rec["body"]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for h in ("Authorization", "X-Api-Key"):
            if self.headers.get(h) is not None:
                self.send_header("X-Echo-" + h, self.headers[h])
        self.send_header("X-Origin", srv.name)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _early(self):
        """
        Answered before the request body is read, the connection left
        open: what the body still owes is in the socket, and for a second
        nothing reads it -- a request sent on this connection meanwhile
        lands behind it and is read as garbage.
        """
        body = b"early\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        time.sleep(1.0)

    def _drip(self, n):
        """n chunks "piece i\\n", half a second apart."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n):
            piece = b"piece %d\n" % i
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            time.sleep(0.5)
        self.wfile.write(b"0\r\n\r\n")

    def _leak(self, secret, enc, mode):
        e = ENCODERS[enc](secret)
        body = ("begin %s\n" % enc + "".join("line %d [[%s]] tail\n" % (i, e)
            for i in range(3)) + "end\n").encode("latin-1")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("X-Leak", e)
        self.send_header("X-Leak-Wrapped", "token=%s; path=/" % e)
        if mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        elif mode == "length":
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        i = k = 0
        while i < len(body):
            piece = body[i:i + PIECES[k % len(PIECES)]]
            i += len(piece)
            k += 1
            if mode == "chunked":
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                self.wfile.write(piece)
            time.sleep(0.001)
        if mode == "chunked":
            self.wfile.write(b"0\r\n\r\n")
        elif mode == "close" and self.server.ssl_ctx is not None:
            # End the TLS stream with close_notify: a clean end of body.
            try:
                self.request.settimeout(2)
                self.request = self.request.unwrap()
            except (OSError, ValueError):
                pass

    do_GET = do_POST = do_PUT = do_HEAD = _handle


class _EchoServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)  # no reverse lookup
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def handle_error(self, request, client_address):
        with self.lock:
            self.errors.append(repr(sys.exc_info()[1]))


class EchoOrigin:
    def __init__(self, name, cert=None, key=None, host=ORIGIN_HOST):
        self.srv = _EchoServer((host, 0), _EchoHandler)
        self.srv.name = name
        self.srv.lock = threading.Lock()
        self.srv.requests = []
        self.srv.errors = []
        self.srv.open_socks = set()
        self.srv.ssl_ctx = None
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.srv.ssl_ctx = ctx
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
            kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        with self.srv.lock:
            return list(self.srv.requests)

    def find(self, path_prefix):
        return [r for r in self.requests if r["path"].startswith(path_prefix)]

    def received(self, needle):
        """True when needle was in any request line, header or body received."""
        for r in self.requests:
            head = r["line"] + "\n" + "".join("%s: %s\n" % kv
                for kv in r["headers"])
            blob = head.encode("latin-1", "replace") + r["body"] + \
                r.get("trailers", b"")
            if needle.encode() in blob:
                return True
        return False

    def stop(self):
        self.srv.shutdown()
        with self.srv.lock:
            socks = list(self.srv.open_socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.srv.server_close()


# ---------------------------------------------------------------- admin client

admin_request = T.admin_request


def placeholders_of(entry):
    """credential -> its placeholder entry (an aws_sigv4's key id; its
    secret's entry, "part": "secret", is left out)."""
    return {p["credential"]: p for p in entry["placeholders"]
            if "part" not in p}


# ---------------------------------------------------------------- the tests

POLICY = """\
sandboxes:
  - id: box-a
    policy: agent
    source: [127.0.0.1/32]
  - id: box-b
    policy: agent
    token_sha256: "{tok}"
policies:
  - name: agent
    allow:
      - host: bound.test
        ports: [{bound}, {plain}]
        tls: intercept
      - host: fixed.test
        ports: [{bound}]
        tls: intercept
      - host: loose.test
        ports: [{bound}]
        # no tls: intercept: a credential's host is intercepted anyway (SPEC 6)
      - host: other.test
        ports: [{other}, {plain}]
        tls: intercept
      - host: "*.bound.test"
        ports: [{bound}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [echo-key, fixed-key, loose-key]
credentials:
  - name: echo-key
    secret: echo-secret
    hosts: [bound.test]
    headers: [Authorization, X-Api-Key]
    query: true
    env: ECHO_KEY
  - name: fixed-key
    secret: fixed-secret
    hosts: [fixed.test]
    headers: [X-Api-Key]
    env: FIXED_KEY
    placeholder: "{fixed_ph}"
  - name: loose-key
    secret: loose-secret
    hosts: [loose.test]
    exclusive: false
    env: LOOSE_KEY
"""


class CredentialsTest(unittest.TestCase):
    secret = SECRET  # the current value of echo-secret (rotation changes it)

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-cred-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.pki = TestCA(d)
        bound_pair = cls.pki.leaf("bound.test", ["bound.test", "fixed.test",
            "loose.test"])
        other_pair = cls.pki.leaf("other.test", ["other.test"])
        cls.bound = EchoOrigin("bound", *bound_pair)
        cls.addClassCleanup(cls.bound.stop)
        cls.other = EchoOrigin("other", *other_pair)
        cls.addClassCleanup(cls.other.stop)
        cls.plain = EchoOrigin("plain")
        cls.addClassCleanup(cls.plain.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "bound.test", "fixed.test", "loose.test", "other.test")])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(tok=T.sha256_hex(TOKEN_B), bound=cls.bound.port,
            plain=cls.plain.port, other=cls.other.port, origin=ORIGIN_HOST,
            fixed_ph=FIXED_PH)
        cls.socks_port = T.free_port()
        cls.dns_port = T.free_port(udp_too=True)
        cls.admin_sock = os.path.join(d, "admin.sock")
        cls.gw = T.Gateway(d, cls.dns, {"creds.yaml": policy}, extra={
            "upstream": {"ca_bundle": cls.pki.cert},
            "listen": {"socks5": "127.0.0.1:%d" % cls.socks_port,
                "dns": "127.0.0.1:%d" % cls.dns_port,
                "admin": cls.admin_sock}})
        cls.gw.vault_set(("echo-secret", SECRET), ("fixed-secret", FIXED_SECRET),
                         ("loose-secret", LOOSE_SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        # The listeners may accept before the CA and the admin socket exist.
        cls.gw_ca = cls.gw.wait_admin(cls.admin_sock)
        cls.ctx = ssl.create_default_context(cafile=cls.gw_ca)
        st, _, doc = admin_request(cls.admin_sock, "GET", "/v1/sandboxes")
        if st != 200:
            raise RuntimeError("GET /v1/sandboxes: %d %r" % (st, doc))
        cls.listing = {e["id"]: e for e in doc["sandboxes"]}
        cls.ph_a = placeholders_of(cls.listing["box-a"])["echo-key"]["placeholder"]
        cls.ph_b = placeholders_of(cls.listing["box-b"])["echo-key"]["placeholder"]
        cls.loose_a = placeholders_of(cls.listing["box-a"])["loose-key"]["placeholder"]
        cls.client_data = []  # every byte of every response a client got

    # -------------------------------------------------------------- helpers

    def tls_conn(self, host, port=None, auth=None, source=None):
        """CONNECT host:port through the gateway, then TLS trusting its CA."""
        c, r = T.open_tunnel(self.gw.port, "%s:%d" % (host, port or self.bound.port),
            auth=auth, source=source)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        return c

    def fetch(self, path, headers=(), host="bound.test", port=None, auth=None,
            source=None, method="GET", body=None):
        """One request on a fresh intercepted tunnel; the Response."""
        c = self.tls_conn(host, port, auth, source)
        port = port or self.bound.port
        req = "%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (method, path, host, port)
        req += "".join("%s: %s\r\n" % kv for kv in headers)
        data = req.encode("latin-1")
        if body is not None:
            data += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        else:
            data += b"\r\n"
        c.send(data)
        return self.got(c.read_response(method))

    def got(self, resp):
        """Record a response the client saw and check it holds no secret."""
        if resp is None:
            return None
        blob = resp.raw_head + resp.body
        self.client_data.append(blob)
        self.assert_clean(blob, "response to the client")
        return resp

    def assert_clean(self, blob, where):
        for s in ALL_SECRETS:
            for form in secret_forms(s):
                self.assertNotIn(form, blob, "%s holds an encoding (%r) of a "
                    "secret: %r" % (where, form, blob[:2000]))

    def bearer(self, ph):
        return ("Authorization", "Bearer " + ph)

    def audit_row(self, pred, **match):
        rows = self.gw.wait_audit(pred=pred, **match)
        self.assertTrue(rows, "no audit row for %r; last rows: %r" % (match,
            self.gw.audit_rows()[-6:]))
        return rows[-1]

    def assert_misuse(self, resp, marker=None, cred="echo-key",
            reason="credential-misuse", host=None):
        """A 403 with the reason, and a deny row naming the credential."""
        self.assertIsNotNone(resp, "connection closed without a response")
        self.assertEqual(resp.status, 403, resp)
        self.assertEqual(resp.header("X-Sandgate-Reason"), reason, resp)

        def pred(r):
            return ((marker is None or marker in (r["path"] or "")) and
                (host is None or r["host"] == host))
        row = self.audit_row(pred, decision="deny", reason=reason)
        self.assertEqual(row["credential"], cred, row)
        self.assertEqual(row["status"], 403, row)
        return row

    def origin_seen(self, origin, marker):
        """The request the origin got for a path starting with marker."""
        reqs = origin.find(marker)
        self.assertEqual(len(reqs), 1, "origin %s got %r for %s" % (
            origin.srv.name, [r["line"] for r in reqs], marker))
        return reqs[0]

    def header_of(self, rec, name):
        vals = [v for k, v in rec["headers"] if k.lower() == name.lower()]
        return vals

    # -------------------------------------------------------------- placeholders

    def test_01_placeholders_listed(self):
        a = placeholders_of(self.listing["box-a"])
        b = placeholders_of(self.listing["box-b"])
        self.assertEqual(sorted(a), ["echo-key", "fixed-key", "loose-key"])
        self.assertEqual(sorted(b), ["echo-key", "fixed-key", "loose-key"])
        self.assertTrue(self.listing["box-a"]["static"])
        self.assertEqual(self.listing["box-a"]["policy"], "agent")
        self.assertEqual(a["echo-key"]["env"], "ECHO_KEY")
        self.assertEqual(a["fixed-key"]["env"], "FIXED_KEY")
        # Random per (sandbox, credential), fixed where the policy says so.
        for ph in (self.ph_a, self.ph_b, self.loose_a,
                b["loose-key"]["placeholder"]):
            self.assertRegex(ph, PH_RX)
        self.assertEqual(len({self.ph_a, self.ph_b, self.loose_a,
            b["loose-key"]["placeholder"]}), 4)
        self.assertEqual(a["fixed-key"]["placeholder"], FIXED_PH)
        self.assertEqual(b["fixed-key"]["placeholder"], FIXED_PH)
        # GET /v1/sandboxes/{id} gives the same, and no secret anywhere.
        st, _, doc = admin_request(self.admin_sock, "GET", "/v1/sandboxes/box-a")
        self.assertEqual(st, 200)
        self.assertEqual(placeholders_of(doc)["echo-key"]["placeholder"], self.ph_a)
        self.assert_clean(json.dumps(self.listing).encode(), "admin listing")

    # -------------------------------------------------------------- swaps

    def test_02_bearer_swapped_and_echo_scrubbed(self):
        s = T.session(self.gw.url)
        s.verify = self.gw_ca
        self.addCleanup(s.close)
        url = "https://bound.test:%d/echo/bearer?x=1" % self.bound.port
        r = s.get(url, headers={"Authorization": "Bearer " + self.ph_a},
            timeout=20 * T.SLOW)
        self.got(T.Response(r.status_code, r.reason, list(r.headers.items()),
            r.content, b"".join(("%s: %s\r\n" % kv).encode("latin-1")
            for kv in r.headers.items())))
        self.assertEqual(r.status_code, 200, r.text)
        rec = self.origin_seen(self.bound, "/echo/bearer")
        self.assertEqual(self.header_of(rec, "Authorization"),
            ["Bearer " + self.secret])
        # Bound hosts are asked for an identity encoding, once.
        self.assertEqual(self.header_of(rec, "Accept-Encoding"), ["identity"])
        # The client sees its placeholder where the origin echoed the secret.
        self.assertIn("Authorization: Bearer %s\r\n" % self.ph_a, r.text)
        self.assertEqual(r.headers.get("X-Echo-Authorization"),
            "Bearer " + self.ph_a)
        self.assertNotIn("Content-Length", r.headers)
        self.assertEqual(r.headers.get("Transfer-Encoding"), "chunked")
        row = self.audit_row(lambda x: (x["path"] or "").startswith("/echo/bearer"),
            decision="allow")
        self.assertEqual((row["credential"], row["sandbox"], row["host"],
            row["status"]), ("echo-key", "box-a", "bound.test", 200))
        # The same client to the unbound host: its Accept-Encoding unchanged.
        r = s.get("https://other.test:%d/echo/ae" % self.other.port,
            headers={"Accept-Encoding": "gzip"}, timeout=20 * T.SLOW)
        self.assertEqual(r.status_code, 200)
        rec = self.origin_seen(self.other, "/echo/ae")
        self.assertEqual(self.header_of(rec, "Accept-Encoding"), ["gzip"])
        row = self.audit_row(lambda x: (x["path"] or "").startswith("/echo/ae"),
            decision="allow")
        self.assertIsNone(row["credential"])

    def test_03_second_listed_header(self):
        r = self.fetch("/echo/apikey", [("X-Api-Key", self.ph_a)])
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, "/echo/apikey")
        self.assertEqual(self.header_of(rec, "X-Api-Key"), [self.secret])
        self.assertEqual(r.header("X-Echo-X-Api-Key"), self.ph_a)
        self.assertIn(("X-Api-Key: %s\r\n" % self.ph_a).encode(), r.body)

    def test_04_basic_swapped_curl(self):
        r = T.curl("https://bound.test:%d/echo/basic" % self.bound.port,
            proxy=self.gw.url, args=["--cacert", self.gw_ca, "-u",
            "apiuser:" + self.ph_a], tmp=self.td.path)
        self.client_data.append(r.body + json.dumps(r.headers).encode())
        self.assert_clean(r.body + json.dumps(r.headers).encode(), "curl output")
        self.assertEqual((r.rc, r.status), (0, 200), r)
        rec = self.origin_seen(self.bound, "/echo/basic")
        self.assertEqual(rec["seen"], self.secret)
        want = base64.b64encode(("apiuser:" + self.secret).encode()).decode()
        self.assertEqual(self.header_of(rec, "Authorization"), ["Basic " + want])
        # The echoed Basic value comes back scrubbed: not the secret's
        # encoding, and the placeholder's where the secret's was.
        echoed = r.header("X-Echo-Authorization")
        self.assertTrue(echoed.startswith("Basic "), echoed)
        self.assertIn(b64_core(self.ph_a.encode(), len("apiuser:") % 3), echoed)
        row = self.audit_row(lambda x: (x["path"] or "").startswith("/echo/basic"),
            decision="allow")
        self.assertEqual(row["credential"], "echo-key")

    def test_05_query_swapped_curl(self):
        r = T.curl("https://bound.test:%d/echo/query?a=1&key=%s&b=2" % (
            self.bound.port, self.ph_a), proxy=self.gw.url,
            args=["--cacert", self.gw_ca], tmp=self.td.path)
        self.client_data.append(r.body + json.dumps(r.headers).encode())
        self.assert_clean(r.body + json.dumps(r.headers).encode(), "curl output")
        self.assertEqual((r.rc, r.status), (0, 200), r)
        rec = self.origin_seen(self.bound, "/echo/query")
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(rec["path"]).query)
        self.assertEqual(q, {"a": ["1"], "key": [self.secret], "b": ["2"]})
        # Percent-encoded in the query, so no raw byte of it breaks the URL.
        self.assertNotIn(" ", rec["path"])
        self.assertIn(("key=%s&b=2" % self.ph_a).encode(), r.body)
        row = self.audit_row(lambda x: (x["path"] or "").startswith("/echo/query"),
            decision="allow")
        self.assertEqual(row["credential"], "echo-key")

    def test_06_fixed_placeholder_for_static_sandboxes(self):
        r = self.fetch("/echo/fixed-a", [("X-Api-Key", FIXED_PH)], host="fixed.test")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/fixed-a")["seen"],
            FIXED_SECRET)
        self.assertEqual(r.header("X-Echo-X-Api-Key"), FIXED_PH)
        auth = T.basic("box-b", TOKEN_B)
        r = self.fetch("/echo/fixed-b", [("X-Api-Key", FIXED_PH)],
            host="fixed.test", auth=auth)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/fixed-b")["seen"],
            FIXED_SECRET)
        row = self.audit_row(lambda x: (x["path"] or "").startswith("/echo/fixed-b"),
            decision="allow")
        self.assertEqual((row["sandbox"], row["credential"]), ("box-b", "fixed-key"))
        # box-b's own random placeholder for echo-key works for box-b.
        r = self.fetch("/echo/own-b", [self.bearer(self.ph_b)], auth=auth)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/own-b")["seen"],
            self.secret)

    def test_07_not_exclusive_passes_own_key(self):
        r = self.fetch("/echo/loose-own", [self.bearer(ATTACKER_KEY)],
            host="loose.test")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/loose-own")["seen"],
            ATTACKER_KEY)
        r = self.fetch("/echo/loose-ph", [self.bearer(self.loose_a)],
            host="loose.test")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/loose-ph")["seen"],
            LOOSE_SECRET)
        self.assertEqual(r.header("X-Echo-Authorization"), "Bearer " + self.loose_a)

    # -------------------------------------------------------------- scrubbing

    def check_leak(self, enc, mode, ph, secret, headers=None):
        path = "/leak/%s/%s/%s" % (enc, mode, time.monotonic_ns())
        r = self.fetch(path, headers or [self.bearer(ph)])
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, path)
        # Else the scrubber had nothing to do and this test proves nothing.
        self.assertEqual(rec["seen"], secret, "%s/%s" % (enc, mode))
        self.assertIsNone(r.header("Content-Length"), r)
        if mode == "close":
            self.assertIsNone(r.header("Transfer-Encoding"), r)
        else:
            self.assertEqual(r.header("Transfer-Encoding"), "chunked", r)
        text = r.body.decode("latin-1")
        m = re.fullmatch(r"begin %s\n((?:line \d \[\[[^\]]*\]\] tail\n){3})end\n"
            % enc, text)
        self.assertIsNotNone(m, "%s/%s body mangled: %r" % (enc, mode, text))
        vals = re.findall(r"\[\[([^\]]*)\]\]", m.group(1))
        vals += [r.header("X-Leak"),
            re.fullmatch(r"token=(.*); path=/", r.header("X-Leak-Wrapped")).group(1)]
        for v in vals:
            if enc in ("raw", "pct", "json"):
                # These encodings leave the placeholder's characters alone.
                self.assertEqual(v, ph, "%s/%s" % (enc, mode))
            else:
                self.assertIn(b64_core(ph.encode(), 0, url=enc == "b64url"), v,
                    "%s/%s" % (enc, mode))

    def test_10_scrub_every_encoding_split_across_chunks(self):
        for enc in ENCODERS:
            for mode in ("chunked", "length", "close"):
                with self.subTest(enc=enc, mode=mode):
                    self.check_leak(enc, mode, self.ph_a, self.secret)

    def test_11_scrub_basic_and_query_forms(self):
        # The origin saw the secret through Basic and through the query.
        self.check_leak("b64", "chunked", self.ph_a, self.secret,
            headers=[("Authorization", T.basic("u", self.ph_a))])
        r = self.fetch("/leak/json/chunked/q?key=%s" % self.ph_a)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/leak/json/chunked/q")["seen"],
            self.secret)
        self.assertEqual(r.header("X-Leak"), self.ph_a)

    # -------------------------------------------------------------- misuse

    def test_20_misuse_other_host(self):
        cases = [("/m/other-bearer", [self.bearer(self.ph_a)]),
            ("/m/other-basic", [("Authorization", T.basic("u", self.ph_a))]),
            ("/m/other-apikey", [("X-Api-Key", self.ph_a)]),
            ("/m/other-fixed", [("X-Api-Key", FIXED_PH)])]
        for marker, hdrs in cases:
            with self.subTest(marker=marker):
                r = self.fetch(marker, hdrs, host="other.test", port=self.other.port)
                self.assert_misuse(r, marker, cred="fixed-key" if "fixed" in
                    marker else "echo-key")
                self.assertEqual(self.other.find(marker), [])
        for needle in (self.ph_a, FIXED_PH, SECRET, FIXED_SECRET):
            self.assertFalse(self.other.received(needle), needle)

    def test_21_misuse_plain_http_absolute_form(self):
        for host in ("bound.test", "other.test"):
            marker = "/m/plain-abs-" + host
            r = T.raw_request(self.gw.port,
                "GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
                "Authorization: Bearer %s\r\n\r\n" % (host, self.plain.port,
                marker, host, self.plain.port, self.ph_a))
            self.got(r)
            self.assert_misuse(r, marker)
        self.assertEqual(self.plain.find("/m/plain-abs"), [])
        self.assertFalse(self.plain.received(self.ph_a))

    def test_22_misuse_plain_http_inside_connect(self):
        c, r = T.open_tunnel(self.gw.port, "bound.test:%d" % self.plain.port)
        self.addCleanup(c.close)
        self.assertEqual(r.status, 200, r)
        r = self.got(c.request("GET /m/plain-tunnel HTTP/1.1\r\nHost: bound.test:%d"
            "\r\nAuthorization: Bearer %s\r\n\r\n" % (self.plain.port, self.ph_a)))
        self.assert_misuse(r, "/m/plain-tunnel")
        self.assertEqual(self.plain.find("/m/plain-tunnel"), [])
        self.assertFalse(self.plain.received(self.secret))

    def test_23_misuse_in_path(self):
        marker = "/m/path/%s/x" % self.ph_a
        r = self.fetch(marker, [self.bearer(self.ph_a)])
        self.assert_misuse(r, "/m/path/")
        # Percent-escaping a character does not hide it.
        r = self.fetch("/m/path2/%%%02X%s" % (ord(self.ph_a[0]), self.ph_a[1:]))
        self.assert_misuse(r, "/m/path2/")
        self.assertEqual(self.bound.find("/m/path"), [])

    def test_24_misuse_query_without_query_true(self):
        r = self.fetch("/m/query-fixed?key=%s" % FIXED_PH, host="fixed.test")
        self.assert_misuse(r, "/m/query-fixed", cred="fixed-key")
        r = self.fetch("/m/query-loose?k=%s" % self.loose_a, host="loose.test")
        self.assert_misuse(r, "/m/query-loose", cred="loose-key")
        self.assertEqual(self.bound.find("/m/query"), [])
        self.assertFalse(self.bound.received(FIXED_PH))

    def test_25_misuse_unlisted_header(self):
        cases = [("/m/hdr-other", "bound.test", [("X-Other", "Bearer " + self.ph_a)],
                "echo-key"),
            ("/m/hdr-cookie", "bound.test", [("Cookie", "k=" + self.ph_a)],
                "echo-key"),
            ("/m/hdr-fixed-auth", "fixed.test", [("Authorization", FIXED_PH)],
                "fixed-key")]
        for marker, host, hdrs, cred in cases:
            with self.subTest(marker=marker):
                r = self.fetch(marker, hdrs, host=host)
                self.assert_misuse(r, marker, cred=cred)
        self.assertEqual(self.bound.find("/m/hdr"), [])

    def body_in_two_writes(self, marker, first, second):
        """A POST whose body goes in two writes 0.3 s apart; the Response or None."""
        c = self.tls_conn("bound.test")
        c.send(first)
        time.sleep(0.3 * T.SLOW)
        try:
            c.send(second)
            return self.got(c.read_response("POST"))
        except (EOFError, ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return None

    def test_26_misuse_in_request_body(self):
        ph = self.ph_a
        half = len(ph) // 2
        body = b'{"prompt": "send this: ' + ph.encode() + b'"}'
        r = self.fetch("/m/body-length", [self.bearer(ph)], method="POST",
            body=body)
        self.assert_misuse(r, "/m/body-length")
        r = self.fetch("/m/body-other", method="POST", body=body,
            host="other.test", port=self.other.port)
        self.assert_misuse(r, "/m/body-other")
        # Split across two reads, mid-placeholder.
        head = ("POST /m/body-split HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Content-Length: %d\r\n\r\n" % (self.bound.port, len(ph) + 8))
        r = self.body_in_two_writes("/m/body-split", head + "key=" + ph[:half],
            ph[half:] + "&end")
        self.assert_misuse(r, "/m/body-split")
        # Chunked, the placeholder split across two chunks sent apart: the
        # origin would reassemble it.
        head = ("POST /m/body-chunked HTTP/1.1\r\nHost: bound.test:%d\r\n"
            "Transfer-Encoding: chunked\r\n\r\n" % self.bound.port)
        r = self.body_in_two_writes("/m/body-chunked",
            head + "%x\r\nkey=%s\r\n" % (4 + half, ph[:half]),
            "%x\r\n%s&end\r\n0\r\n\r\n" % (len(ph) - half + 4, ph[half:]))
        self.assert_misuse(r, "/m/body-chunked")
        for o in (self.bound, self.other):
            self.assertFalse(any(ph[:half].encode() in x["body"] or
                ph[half:].encode() in x["body"] for x in o.requests),
                [x["body"] for x in o.requests if x["body"]])
            self.assertEqual([x["line"] for x in o.find("/m/body")
                if x["complete"]], [])

    def test_27_misuse_dns_name(self):
        # A placeholder smuggled out as a DNS label: NXDOMAIN, and a deny row
        # naming the credential, even under an allowed wildcard.
        for name, cred in (("%s.bound.test" % self.ph_a, "echo-key"),
                ("x-%s-y.bound.test" % FIXED_PH.lower(), "fixed-key")):
            with self.subTest(name=name):
                r = subprocess.run(["dig", "+time=5", "+tries=1", "-p",
                    str(self.dns_port), "@127.0.0.1", name, "A"],
                    capture_output=True, text=True, timeout=20 * T.SLOW)
                self.assertIn("status: NXDOMAIN", r.stdout, r.stdout)
                row = self.audit_row(lambda x, n=name: x["host"] == n.lower(),
                    kind="dns", decision="deny", reason="credential-misuse")
                self.assertEqual(row["credential"], cred, row)
        # The same name without a placeholder is answered.
        r = subprocess.run(["dig", "+short", "-p", str(self.dns_port),
            "@127.0.0.1", "bound.test", "A"], capture_output=True, text=True,
            timeout=20 * T.SLOW)
        self.assertEqual(r.stdout.strip(), ORIGIN_HOST)

    def test_27_misuse_connect_target(self):
        for target in ("%s.bound.test:%d" % (self.ph_a, self.bound.port),
                "x-%s-y.bound.test:%d" % (FIXED_PH, self.bound.port)):
            with self.subTest(target=target):
                c, r = T.open_tunnel(self.gw.port, target)
                c.close()
                self.got(r)
                self.assert_misuse(r, cred="fixed-key" if FIXED_PH in target
                    else "echo-key", host=target.rsplit(":", 1)[0])

    def socks_connect(self, name, port):
        s = socket.create_connection(("127.0.0.1", self.socks_port),
            timeout=10 * T.SLOW)
        self.addCleanup(s.close)
        s.sendall(b"\x05\x01\x00")
        self.assertEqual(s.recv(2), b"\x05\x00")
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name.encode() +
            struct.pack("!H", port))
        rep = b""
        while len(rep) < 2:
            b = s.recv(16)
            if not b:
                break
            rep += b
        return rep

    def test_28_misuse_socks5_target(self):
        name = "%s.bound.test" % self.ph_a
        n_before = len(self.bound.requests)
        rep = self.socks_connect(name, self.bound.port)
        self.assertEqual(rep[:2], b"\x05\x02", rep)
        row = self.audit_row(None, host=name, reason="credential-misuse",
            kind="socks5")
        self.assertEqual((row["decision"], row["kind"], row["credential"]),
            ("deny", "socks5", "echo-key"))
        self.assertEqual(len(self.bound.requests), n_before)
        # The same listener lets a clean name through (so 0x02 meant the placeholder).
        rep = self.socks_connect("bound.test", self.bound.port)
        self.assertEqual(rep[:2], b"\x05\x00", rep)

    def test_29_misuse_from_another_sandbox(self):
        auth = T.basic("box-b", TOKEN_B)
        r = self.fetch("/m/sbx-b-uses-a", [self.bearer(self.ph_a)], auth=auth)
        row = self.assert_misuse(r, "/m/sbx-b-uses-a")
        self.assertEqual(row["sandbox"], "box-b")
        r = self.fetch("/m/sbx-a-uses-b", [self.bearer(self.ph_b)])
        row = self.assert_misuse(r, "/m/sbx-a-uses-b")
        self.assertEqual(row["sandbox"], "box-a")
        self.assertEqual(self.bound.find("/m/sbx"), [])

    def test_30_foreign_credential(self):
        cases = [("/m/foreign-bearer", "bound.test", [self.bearer(ATTACKER_KEY)],
                "echo-key"),
            ("/m/foreign-basic", "bound.test",
                [("Authorization", T.basic("u", ATTACKER_KEY))], "echo-key"),
            ("/m/foreign-apikey", "bound.test",
                [self.bearer(self.ph_a), ("X-Api-Key", ATTACKER_KEY)], "echo-key"),
            ("/m/foreign-fixed", "fixed.test", [("X-Api-Key", ATTACKER_KEY)],
                "fixed-key")]
        for marker, host, hdrs, cred in cases:
            with self.subTest(marker=marker):
                r = self.fetch(marker, hdrs, host=host)
                self.assert_misuse(r, marker, cred=cred, reason="foreign-credential")
        self.assertEqual(self.bound.find("/m/foreign"), [])

    # -------------------------------------------------------------- dynamic sandbox

    def test_40_dynamic_sandbox(self):
        st, _, doc = admin_request(self.admin_sock, "POST", "/v1/sandboxes",
            {"id": "dyn-cred", "policy": "agent", "source": DYN_SOURCE})
        self.addCleanup(admin_request, self.admin_sock, "DELETE",
            "/v1/sandboxes/dyn-cred")
        self.assertEqual(st, 201, doc)
        phs = placeholders_of(doc)
        dyn_echo = phs["echo-key"]["placeholder"]
        dyn_fixed = phs["fixed-key"]["placeholder"]
        for ph in (dyn_echo, dyn_fixed):
            self.assertRegex(ph, PH_RX)
        # Its own: random, even for the credential with a fixed placeholder.
        self.assertNotIn(dyn_echo, (self.ph_a, self.ph_b))
        self.assertNotEqual(dyn_fixed, FIXED_PH)
        st, _, one = admin_request(self.admin_sock, "GET", "/v1/sandboxes/dyn-cred")
        self.assertEqual(st, 200)
        self.assertEqual(placeholders_of(one)["echo-key"]["placeholder"], dyn_echo)
        self.assertIs(one["static"], False)

        r = self.fetch("/echo/dyn-own", [self.bearer(dyn_echo)], source=DYN_SOURCE)
        self.assertEqual(r.status, 200, r)
        rec = self.origin_seen(self.bound, "/echo/dyn-own")
        self.assertEqual(rec["seen"], self.secret)
        self.assertIn(("Authorization: Bearer %s\r\n" % dyn_echo).encode(), r.body)
        row = self.audit_row(lambda x: (x["path"] or "").startswith("/echo/dyn-own"),
            decision="allow")
        self.assertEqual((row["sandbox"], row["credential"]), ("dyn-cred", "echo-key"))
        self.assertTrue(row["client"].startswith(DYN_SOURCE + ":"), row)
        r = self.fetch("/echo/dyn-fixed", [("X-Api-Key", dyn_fixed)],
            host="fixed.test", source=DYN_SOURCE)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin_seen(self.bound, "/echo/dyn-fixed")["seen"],
            FIXED_SECRET)

        # Another sandbox's placeholders from its address are misuse, the
        # fixed one included (it belongs to the static sandboxes).
        r = self.fetch("/m/dyn-uses-a", [self.bearer(self.ph_a)], source=DYN_SOURCE)
        self.assertEqual(self.assert_misuse(r, "/m/dyn-uses-a")["sandbox"], "dyn-cred")
        r = self.fetch("/m/dyn-uses-fixed", [("X-Api-Key", FIXED_PH)],
            host="fixed.test", source=DYN_SOURCE)
        self.assert_misuse(r, "/m/dyn-uses-fixed", cred="fixed-key")
        # And its placeholder from box-a is misuse.
        r = self.fetch("/m/a-uses-dyn", [self.bearer(dyn_echo)])
        self.assertEqual(self.assert_misuse(r, "/m/a-uses-dyn")["sandbox"], "box-a")

        st, _, doc = admin_request(self.admin_sock, "DELETE", "/v1/sandboxes/dyn-cred")
        self.assertEqual(st, 200, doc)
        c, r = T.open_tunnel(self.gw.port, "bound.test:%d" % self.bound.port,
            source=DYN_SOURCE)
        c.close()
        self.assertEqual(r.status, 407, r)
        # A removed sandbox's placeholder stays a placeholder: leaked, it
        # still carries nothing anywhere.
        r = self.fetch("/m/after-delete", [self.bearer(dyn_echo)],
            host="other.test", port=self.other.port)
        self.assert_misuse(r, "/m/after-delete")
        self.assertEqual(self.bound.find("/m/dyn"), [])
        self.assertEqual(self.bound.find("/m/a-uses-dyn"), [])

    # -------------------------------------------------------------- rotation

    def test_90_rotation_without_restart(self):
        pid = self.gw.proc.pid
        r = T.run_sandgate("vault", "rotate", "echo-secret", "-c", self.gw.cfg_path,
            input=SECRET2)
        self.assertEqual(r.returncode, 0, r.stderr)
        t0 = time.monotonic()
        deadline = t0 + 3.0 * T.SLOW
        n = 0
        seen = None
        while time.monotonic() < deadline:
            n += 1
            marker = "/echo/rot-%d/" % n
            resp = self.fetch(marker, [self.bearer(self.ph_a)])
            self.assertEqual(resp.status, 200, resp)
            seen = self.origin_seen(self.bound, marker)["seen"]
            if seen == SECRET2:
                break
            self.assertEqual(seen, SECRET)
            time.sleep(0.1)
        self.assertEqual(seen, SECRET2, "rotation not in effect after %.1f s" %
            (time.monotonic() - t0))
        type(self).secret = SECRET2
        self.assertEqual(self.gw.proc.pid, pid)
        self.assertTrue(self.gw.alive())
        # The new value is the one scrubbed now.
        self.check_leak("raw", "chunked", self.ph_a, SECRET2)
        self.check_leak("b64url", "length", self.ph_a, SECRET2)

    # -------------------------------------------------------------- hygiene

    def test_99_hygiene(self):
        """After everything: the secrets in no argv, log, audit or vault file."""
        # Argv of every process while the gateway runs.
        ps = run(["ps", "-eo", "args"]).stdout
        for s in ALL_SECRETS:
            self.assertNotIn(s.encode(), ps)
        # The audit log recorded the misuse it must have.
        rows = self.gw.audit_rows(reason="credential-misuse")
        self.assertGreaterEqual(len(rows), 10, rows)
        self.assertTrue(all(r["credential"] for r in rows), rows)
        self.gw.stop()
        files = [self.gw.log_path]
        var = os.path.join(self.td.path, "var")
        files += [os.path.join(var, f) for f in os.listdir(var)
            if f.startswith("audit.db") or f.startswith("vault.db")]
        for path in files:
            with open(path, "rb") as f:
                blob = f.read()
            for s in ALL_SECRETS:
                for form in secret_forms(s):
                    self.assertNotIn(form, blob, "%s holds %r" % (path, form))
        self.assertTrue(any(f.endswith("audit.db") for f in files))
        # The unbound origins never got a secret in any form.
        for origin in (self.other, self.plain):
            for sec in ALL_SECRETS:
                for form in secret_forms(sec):
                    self.assertFalse(origin.received(form.decode()),
                        "%s origin got %r" % (origin.srv.name, form))
        # Every response a client got in this run, once more.
        for blob in self.client_data:
            self.assert_clean(blob, "a response")
        key = os.path.join(self.td.path, "certs", "vault.key")
        self.assertEqual(os.stat(key).st_mode & 0o777, 0o600)


if __name__ == "__main__":
    T.main()
