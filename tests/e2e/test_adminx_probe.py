#!/usr/bin/python3
"""
Probe: what the gateway reveals or accepts outside the data path -- the
admin API, /metrics, `sandgate status`, `sandgate audit` (table, JSON, CSV,
export JSON/OCSF, stats), the syslog forwarder, the log file and the files a
default install leaves on disk -- driven by an attacker inside a sandbox who
controls header values, paths, host names, SOCKS usernames and passwords.

One gateway (default install: user sandgate, keeper) with the HTTP, SOCKS5
and metrics listeners, an admin socket, syslog (rfc5424 over TCP) to a
Python listener, a token sandbox, a source-address sandbox, and a credential
bound to an intercepted HTTPS origin with a fixed placeholder.

Found, and fixed (the test failed before; its docstring has the details):
- test_invalid_host_row_names_the_identified_sandbox: an HTTP-proxy
  request whose host holds a byte the parser refuses (`"`, `!`) was denied
  invalid-host before identity: its row (and log line, syslog, metrics)
  named no sandbox even with a valid token or an identifying source, a
  wrong password was never checked (403, not 407), and a CONNECT's row said
  kind http.

Tried (the rest held):
- the sandbox token (right and wrong Proxy-Authorization, SOCKS5 user/pass,
  the raw and base64 forms), a guessed password and the vault secret after a
  real swap: grepped in the log, /metrics, /v1/status, /v1/sandboxes,
  `sandgate status [--json]`, `audit` table/json/csv, `audit export`
  json/ocsf, `audit stats`, every syslog frame, and the raw audit.db (+WAL)
  bytes;
- Prometheus text after hostile SOCKS5 usernames/host names and HTTP hosts
  holding `"`, `\\`, `}`, newline: `promtool check metrics` parses it, and
  no label value carries a byte the sandbox chose;
- cardinality: 120 invented host names, 40 invented proxy-auth user names
  and 40 SOCKS5 user names add no series to /metrics;
- SSRF to the gateway itself: absolute-form, CONNECT and SOCKS5 toward the
  metrics port and the proxy port on 127.0.0.1 in every IP spelling
  (127.1, 2130706433, 0x7f000001, 0.0.0.0, [::1], [::ffff:127.0.0.1],
  localhost) and through names resolving to 127.0.0.1 / 0.0.0.0 under an
  allow rule: all refused, the metrics never returned;
- the proxy and SOCKS5 listeners answer no /metrics or /v1/ path in origin
  form; the metrics listener is not a proxy (absolute form, CONNECT);
- file modes: audit.db (+-wal, -shm), vault.db, state.db, ca.key,
  vault.key, audit.key, admin.sock none open to group/other;
- the log file: CR/LF/ESC in a SOCKS5 name, an HTTP path and a proxy-auth
  user name never start a forged line nor write a raw control byte.
"""

import base64
import json
import os
import socket
import ssl
import stat
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
TOKEN = "sgtok-Qv7rX2mLp9Zk4Wd8Hs3J"          # the token sandbox's token
WRONG = "sgwrong-Yt5nB8cVq2Lm7Rx4"            # a guessed password
SECRET = "sgsecret-REALKEY-9f8e7d6c5b4a3210"  # the vault value
PLACEHOLDER = "sgph-fixed-placeholder-00000001"
PROMTOOL = "/usr/bin/promtool"


class SyslogTCP(T.Recorder):
    """A TCP listener on loopback that keeps every byte it receives."""


class SyslogUDP:
    """A UDP socket on loopback that keeps every datagram."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.grams = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                b = self.sock.recv(65536)
            except OSError:
                return
            with self.lock:
                self.grams.append(b)

    def bytes(self):
        with self.lock:
            return b"\n".join(self.grams)

    def stop(self):
        try:
            self.sock.close()
        except OSError:
            pass


def socks_connect(port, name, dport, user=None, pw=None, timeout=5):
    """One SOCKS5 CONNECT to a domain name; (reply code or None, client)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    client = "127.0.0.1:%d" % s.getsockname()[1]
    try:
        if user is None:
            s.sendall(b"\x05\x01\x00")
            if s.recv(2) != b"\x05\x00":
                return None, client
        else:
            s.sendall(b"\x05\x01\x02")
            if s.recv(2) != b"\x05\x02":
                return None, client
            s.sendall(b"\x01" + bytes([len(user)]) + user +
                      bytes([len(pw)]) + pw)
            if s.recv(2) != b"\x01\x00":
                return "auth", client
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
                  struct.pack(">H", dport))
        rep = s.recv(10)
        return (rep[1] if len(rep) >= 2 else None), client
    except (OSError, socket.timeout):
        return None, client
    finally:
        s.close()


def socks_connect_ip(port, atyp_addr, dport, timeout=5):
    """SOCKS5 CONNECT with a raw ATYP+address; the reply code or None."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"\x05\x01\x00")
        if s.recv(2) != b"\x05\x00":
            return None
        s.sendall(b"\x05\x01\x00" + atyp_addr + struct.pack(">H", dport))
        rep = s.recv(10)
        if len(rep) >= 2 and rep[1] == 0:
            # Tunnel open: try to speak to what it reached.
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.3)
            try:
                rest = s.recv(65536)
            except OSError:
                rest = b""
            return (0, rest)
        return rep[1] if len(rep) >= 2 else None
    except (OSError, socket.timeout):
        return None
    finally:
        s.close()


def http_get(port, raw, timeout=5):
    """Send raw bytes to 127.0.0.1:port; everything read until close/timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        s.sendall(raw)
        while True:
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            out += b
    finally:
        s.close()
    return out


class Base:
    """Set-up and the tests both configurations run."""
    SYSLOG = "rfc5424"          # audit.syslog.format
    UDP = False
    EXTRA = {}                  # more config keys

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-adminx-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cert, key = T.make_cert(d, cn="cred.test", names=["cred.test"])
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.corigin = T.Origin("cred", host=ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.corigin.stop)
        cls.mport = T.free_port()
        cls.sport = T.free_port()
        cls.dns = T.Dnsmasq(d, [("allowed.test", ORIGIN_HOST),
                                ("cred.test", ORIGIN_HOST),
                                ("self.test", "127.0.0.1"),
                                ("zero.test", "0.0.0.0")])
        cls.addClassCleanup(cls.dns.stop)
        cls.syslog = SyslogUDP() if cls.UDP else SyslogTCP()
        cls.addClassCleanup(cls.syslog.stop)
        cls.admin_sock = os.path.join(d, "var", "admin.sock")
        p, cp = cls.origin.port, cls.corigin.port
        pol = {
            "sandboxes": [T.local_sandbox("p"),
                          T.token_sandbox("tk", TOKEN, "p")],
            "policies": [{
                "name": "p",
                "allow": [{"host": "allowed.test", "ports": [p]},
                          {"host": "cred.test", "ports": [cp],
                           "tls": "intercept"},
                          {"host": "self.test",
                           "ports": [cls.mport, p, 80]},
                          {"host": "zero.test",
                           "ports": [cls.mport, p, 80]}],
                "allow_private": [ORIGIN_HOST + "/32"],
                "credentials": ["svc"]}],
            "credentials": [{"name": "svc", "secret": "svc-secret",
                             "hosts": ["cred.test"],
                             "headers": ["Authorization"],
                             "placeholder": PLACEHOLDER}]}
        extra = {
            "listen": {"socks5": "127.0.0.1:%d" % cls.sport,
                       "metrics": "127.0.0.1:%d" % cls.mport,
                       "admin": cls.admin_sock},
            "upstream": {"ca_bundle": cert},
            "audit": {"checkpoint_interval": "1s",
                      "syslog": {"address": "127.0.0.1:%d" % cls.syslog.port,
                                 "format": cls.SYSLOG,
                                 "transport": "udp" if cls.UDP else "tcp"}}}
        extra.update(cls.EXTRA)
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": pol}, extra=extra)
        cls.gw.vault_set(("svc-secret", SECRET))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.wait_admin(cls.admin_sock)
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 not up:\n" + cls.gw.log_tail())
        if not T.wait_tcp("127.0.0.1", cls.mport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("metrics not up:\n" + cls.gw.log_tail())
        cls._traffic()

    # ------------------------------------------------------------ traffic

    @classmethod
    def _traffic(cls):
        """Everything a hostile sandbox sends, once, before the tests look."""
        gp, p = cls.gw.port, cls.origin.port
        good = T.basic("tk", TOKEN)
        bad = T.basic("tk", WRONG)
        # The right token: allowed and denied absolute form, a CONNECT.
        for host in ("allowed.test:%d" % p, "denied.test"):
            T.raw_request(gp, "GET http://%s/tok HTTP/1.1\r\nHost: %s\r\n"
                          "Proxy-Authorization: %s\r\n\r\n" % (host, host, good))
        c, _ = T.open_tunnel(gp, "denied.test:443", auth=good)
        c.close()
        # The token in other places a client may put it.
        T.raw_request(gp, "GET http://tk:%s@allowed.test:%d/ui HTTP/1.1\r\n"
                      "Host: allowed.test:%d\r\n\r\n" % (TOKEN, p, p))
        T.raw_request(gp, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test"
                      "\r\nProxy-Authorization: Bearer %s\r\n\r\n" % TOKEN)
        # A wrong password, and a guessed user whose password is the token.
        T.raw_request(gp, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: "
                      "allowed.test\r\nProxy-Authorization: %s\r\n\r\n" % (p, bad))
        T.raw_request(gp, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: "
                      "allowed.test\r\nProxy-Authorization: %s\r\n\r\n"
                      % (p, T.basic("admin", TOKEN)))
        T.raw_request(gp, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: "
                      "allowed.test\r\nProxy-Authorization: %s\r\n\r\n"
                      % (p, T.basic(WRONG, "x")))
        # SOCKS5: the right token, a wrong one, the token as user name.
        socks_connect(cls.sport, b"denied.test", 443, b"tk", TOKEN.encode())
        socks_connect(cls.sport, b"denied.test", 443, b"tk", WRONG.encode())
        socks_connect(cls.sport, b"denied.test", 443, TOKEN.encode(), b"x")
        # A real swap: the placeholder through intercepted TLS to cred.test.
        ctx = ssl.create_default_context(cafile=cls.gw_ca)
        c, r = T.open_tunnel(gp, "cred.test:%d" % cls.corigin.port)
        if r.status == 200:
            c.sock = ctx.wrap_socket(c.sock, server_hostname="cred.test")
            c.send("GET /swap HTTP/1.1\r\nHost: cred.test:%d\r\n"
                   "Authorization: Bearer %s\r\n\r\n"
                   % (cls.corigin.port, PLACEHOLDER))
            try:
                cls.swap_status = c.read_response().status
            except (EOFError, OSError, ssl.SSLError):
                cls.swap_status = None
        else:
            cls.swap_status = r.status
        c.close()
        # The placeholder toward a host it is not bound to (credential-misuse).
        T.raw_request(gp, "GET http://allowed.test:%d/mis HTTP/1.1\r\nHost: "
                      "allowed.test\r\nAuthorization: Bearer %s\r\n\r\n"
                      % (p, PLACEHOLDER))
        # Hostile bytes for labels and lines.
        for name in (b'ev"il}\nsandgate_workers 99\n.test',
                     b'bs\\x"} 1\r\n# TYPE x counter\x1b[31m.test'):
            socks_connect(cls.sport, name, 443)
            socks_connect(cls.sport, name, 443, user=name[:40], pw=b"pw")
        T.raw_request(gp, b'GET http://q"uo}te.test/ HTTP/1.1\r\n'
                      b'Host: q"uo}te.test\r\n\r\n')
        time.sleep(1.5 * T.SLOW)  # the writer's batch, syslog's 100 ms poll

    # ------------------------------------------------------------ helpers

    def scrape(self):
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport, tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        return r.body

    def cli(self, *args):
        r = T.run_sandgate(*args)
        return (r.stdout + r.stderr).encode("utf-8", "surrogateescape")

    def sample_lines(self, body):
        return sorted(set(l.rsplit(" ", 1)[0] for l in body.decode().splitlines()
                          if l and not l.startswith("#")))

    # ------------------------------------------------------------ tests

    def test_secrets_absent_from_every_output(self):
        """SPEC §7: "Secret values never appear in logs, audit rows, error
        messages ..."; docs/admin-api.md: placeholders, "never a secret".
        A sandbox token and a guessed password are secrets of the same
        kind. Sent: the token in Proxy-Authorization (Basic and Bearer), in
        URL userinfo, as SOCKS5 password and user name; a wrong password;
        a real swap of the placeholder for the vault value."""
        cfg = self.gw.cfg_path
        self.assertTrue(any(SECRET in json.dumps(r) for r in
                            self.corigin.requests),
                        "the swap did not happen (status %r): the test "
                        "would prove nothing" % self.swap_status)
        outputs = {
            "log": self.gw.log_text().encode("utf-8", "surrogateescape"),
            "metrics": self.scrape(),
            "status": T.unix_http(self.admin_sock, b"GET /v1/status HTTP/1.1"
                                  b"\r\nHost: s\r\nConnection: close\r\n\r\n")[2],
            "sandboxes": T.unix_http(self.admin_sock, b"GET /v1/sandboxes "
                                     b"HTTP/1.1\r\nHost: s\r\nConnection: "
                                     b"close\r\n\r\n")[2],
            "sandgate status": self.cli("status", "-c", cfg),
            "sandgate status --json": self.cli("status", "--json", "-c", cfg),
            "audit table": self.cli("audit", "-c", cfg, "--limit", "0"),
            "audit json": self.cli("audit", "-c", cfg, "--limit", "0",
                                   "--format", "json"),
            "audit csv": self.cli("audit", "-c", cfg, "--limit", "0",
                                  "--format", "csv"),
            "export json": self.cli("audit", "export", "-c", cfg,
                                    "--since", "1h"),
            "export ocsf": self.cli("audit", "export", "-c", cfg,
                                    "--since", "1h", "--format", "ocsf"),
            "audit stats": self.cli("audit", "stats", "-c", cfg),
            "syslog": self.syslog.bytes(),
        }
        outputs.update(self.proc_texts())
        for sub in ("var", "certs"):
            for root, _, files in os.walk(os.path.join(self.td.path, sub)):
                for n in files:
                    f = os.path.join(root, n)
                    if n.endswith(".key") or not os.path.isfile(f):
                        continue
                    with open(f, "rb") as fh:
                        outputs["file " + os.path.relpath(f, self.td.path)] = fh.read()
        self.assertIn(b"placeholder", outputs["sandboxes"])
        self.assertGreater(len(outputs["export ocsf"]), 100)
        needles = {
            "token": TOKEN.encode(),
            "wrong password": WRONG.encode(),
            "vault secret": SECRET.encode(),
            "base64 tk:token": base64.b64encode(("tk:" + TOKEN).encode()),
            "base64 tk:wrong": base64.b64encode(("tk:" + WRONG).encode()),
            "base64 secret": base64.b64encode(SECRET.encode())[:24],
        }
        for where, data in outputs.items():
            for what, needle in needles.items():
                with self.subTest(where=where, what=what):
                    i = data.find(needle)
                    self.assertEqual(i, -1, "%s found in %s: ...%r..." % (
                        what, where, data[max(0, i - 120):i + 60]))

    def proc_texts(self):
        """argv and environment of the gateway and its children."""
        out = {}
        pids = [self.gw.proc.pid]
        try:
            with open("/proc/%d/task/%d/children" % (pids[0], pids[0])) as f:
                pids += [int(x) for x in f.read().split()]
        except OSError:
            pass
        for pid in pids:
            for what in ("cmdline", "environ"):
                try:
                    with open("/proc/%d/%s" % (pid, what), "rb") as f:
                        out["%s of %d" % (what, pid)] = f.read()
                except OSError:
                    pass
        return out


class AdminxProbe(Base, unittest.TestCase):
    """text log at info, syslog rfc5424 over TCP."""

    def test_metrics_parse_with_promtool_and_carry_no_client_bytes(self):
        """docs/protocols.md "Metrics": Prometheus text exposition format
        0.0.4; docs/monitoring.md: label sets bounded by fixed tables, the
        sandbox label capped. Sent (in setUp): SOCKS5 names and user names,
        an HTTP host with `"`, `\\`, `}`, CR LF, ESC and a forged sample
        line. promtool must parse the scrape, and no sample line may name a
        value the client chose."""
        body = self.scrape()
        if os.access(PROMTOOL, os.X_OK):
            r = subprocess.run([PROMTOOL, "check", "metrics"], input=body,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=30)
            out = r.stdout.decode("utf-8", "replace")
            # Lint remarks (naming style) are not parse errors.
            self.assertNotRegex(out, r"(?i)error while linting|parse|"
                                r"unexpected|invalid", out)
        self.assertEqual(body.count(b"\nsandgate_workers "), 1, "forged sample")
        for bad in (b"ev\\\"il", b"ev\"il", b"quo}te", b"# TYPE x", b"\x1b",
                    b"\r", b"bs\\"):
            self.assertNotIn(bad, body)

    def test_metrics_cardinality_bounded(self):
        """docs/monitoring.md: "The label sets are bounded by the two fixed
        tables of src/core/reason.c"; sandbox labels only for identified
        sandboxes, capped at 100. Sent: 120 invented host names (absolute
        form, denied), 40 invented Proxy-Authorization user names and 40
        SOCKS5 user names (wrong passwords). The scrape must not grow by a
        series per invented name."""
        gp = self.gw.port
        # One of each kind first, so the reason series already exist.
        T.raw_request(gp, b"GET http://warm.test/ HTTP/1.1\r\nHost: warm.test\r\n\r\n")
        T.raw_request(gp, "GET http://warm.test/ HTTP/1.1\r\nHost: warm.test\r\n"
                      "Proxy-Authorization: %s\r\n\r\n" % T.basic("warm", "x"))
        socks_connect(self.sport, b"warm.test", 443, b"warm", b"x")
        time.sleep(1.0 * T.SLOW)
        before = self.sample_lines(self.scrape())
        for i in range(120):
            h = "inv%03d-%s.test" % (i, "x" * 10)
            T.raw_request(gp, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (h, h))
        for i in range(40):
            T.raw_request(gp, "GET http://warm.test/ HTTP/1.1\r\nHost: warm.test"
                          "\r\nProxy-Authorization: %s\r\n\r\n"
                          % T.basic("user%03d" % i, "x"))
            socks_connect(self.sport, b"warm.test", 443,
                          ("suser%03d" % i).encode(), b"x")
        time.sleep(1.5 * T.SLOW)
        body = self.scrape()
        after = self.sample_lines(body)
        new = [l for l in after if l not in before
               and not l.startswith(("sandgate_decision_seconds",
                                     "sandgate_exchange_seconds",
                                     "sandgate_audit_write_seconds",
                                     "sandgate_keeper_rtt_seconds"))]
        self.assertLess(len(new), 10, "new series: %r" % new[:20])
        self.assertNotIn(b"inv0", body)
        self.assertNotIn(b"user0", body)

    def test_no_ssrf_to_own_metrics_or_proxy(self):
        """SPEC §4: loopback and 0/8 are internal, reachable only where
        allow_private covers them ("for names and IP literals alike"); the
        policy covers only 127.0.0.2/32. Sent: absolute form, CONNECT and
        SOCKS5 toward the gateway's own metrics port and proxy port on
        127.0.0.1 in many spellings, and through allowed names that resolve
        to 127.0.0.1 and 0.0.0.0. None may be forwarded."""
        gp, mp = self.gw.port, self.mport
        hosts = ["127.0.0.1", "127.1", "2130706433", "0x7f000001",
                 "0177.0.0.1", "0.0.0.0", "0", "[::1]", "[::ffff:127.0.0.1]",
                 "[::ffff:7f00:1]", "localhost", "LOCALHOST.", "self.test",
                 "self.test.", "zero.test"]
        for port in (mp, gp):
            for h in hosts:
                auth = "%s:%d" % (h, port)
                with self.subTest(form="absolute", target=auth):
                    out = http_get(gp, ("GET http://%s/metrics HTTP/1.1\r\n"
                                        "Host: %s\r\nConnection: close\r\n\r\n"
                                        % (auth, auth)).encode())
                    self.assertNotIn(b"sandgate_workers", out)
                    self.assertFalse(out.startswith(b"HTTP/1.1 200"), out[:300])
                with self.subTest(form="CONNECT", target=auth):
                    c = T.Conn(gp, timeout=5)
                    try:
                        c.send("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                               % (auth, auth))
                        try:
                            r = c.read_response("CONNECT")
                            st = r.status
                        except (EOFError, OSError):
                            st = None
                        if st == 200:
                            c.send(b"GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n"
                                   % auth.encode())
                            time.sleep(0.3)
                            try:
                                got = c.sock.recv(65536)
                            except OSError:
                                got = b""
                            self.assertNotIn(b"sandgate_workers", got)
                    finally:
                        c.close()
                    self.assertNotEqual(st, 200, "tunnel opened to %s" % auth)
        for name in (b"127.0.0.1", b"localhost", b"self.test", b"zero.test",
                     b"0.0.0.0"):
            with self.subTest(form="SOCKS5 domain", name=name):
                rep, _ = socks_connect(self.sport, name, mp)
                self.assertNotEqual(rep, 0)
        for atyp in (b"\x01\x7f\x00\x00\x01", b"\x01\x00\x00\x00\x00",
                     b"\x04" + socket.inet_pton(socket.AF_INET6, "::1"),
                     b"\x04" + socket.inet_pton(socket.AF_INET6,
                                                "::ffff:127.0.0.1")):
            with self.subTest(form="SOCKS5 ip", addr=atyp):
                rep = socks_connect_ip(self.sport, atyp, mp)
                self.assertFalse(isinstance(rep, tuple),
                                 "SOCKS5 tunnel to own metrics: %r" % (rep,))

    def test_data_listeners_answer_no_operator_path(self):
        """docs/protocols.md "Metrics": the metrics listener "answers no
        admin path"; the data-path listeners are proxies: an origin-form
        request is not theirs to serve. Sent: GET /metrics, /v1/status,
        /v1/sandboxes in origin form to the HTTP proxy and to SOCKS5; then
        absolute form and CONNECT to the metrics listener (it must not act
        as a proxy)."""
        for path in (b"/metrics", b"/v1/status", b"/v1/sandboxes"):
            with self.subTest(listener="http", path=path):
                out = http_get(self.gw.port, b"GET " + path +
                               b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Connection: close\r\n\r\n")
                self.assertNotIn(b"sandgate_workers", out)
                self.assertNotIn(b'"version"', out)
                self.assertNotIn(b"placeholder", out)
            with self.subTest(listener="socks5", path=path):
                out = http_get(self.sport, b"GET " + path +
                               b" HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)
                self.assertNotIn(b"sandgate_workers", out)
                self.assertNotIn(b'"version"', out)
        n0 = self.origin.conn_count
        p = self.origin.port
        for raw in (b"GET http://allowed.test:%d/m HTTP/1.1\r\nHost: "
                    b"allowed.test:%d\r\nConnection: close\r\n\r\n" % (p, p),
                    b"GET http://%s:%d/m HTTP/1.1\r\nHost: %s:%d\r\n"
                    b"Connection: close\r\n\r\n" % (ORIGIN_HOST.encode(), p,
                                                  ORIGIN_HOST.encode(), p),
                    b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                    % (ORIGIN_HOST.encode(), p, ORIGIN_HOST.encode(), p)):
            with self.subTest(listener="metrics", sent=raw.split(b"\r\n")[0]):
                out = http_get(self.mport, raw, timeout=3)
                self.assertFalse(out.startswith(b"HTTP/1.1 200")
                                 and b"sandgate_workers" not in out, out[:300])
                self.assertNotIn(b'"origin"', out)
        time.sleep(0.3)
        self.assertEqual(self.origin.conn_count, n0,
                         "the metrics listener reached the origin")

    def test_file_modes_of_a_default_install(self):
        """docs/audit.md: "The file is owner-only (mode 0600)"; SPEC §3/§7:
        admin socket mode 0600, vault.key 0600, ca.key 0600; docs/audit.md
        "vault.db, certs/ and admin.sock stay 0600". Looked at after start:
        every file the gateway made under state_dir and certs/."""
        d = self.td.path
        must_private = [os.path.join(d, "var", "audit.db"),
                        os.path.join(d, "var", "vault.db"),
                        os.path.join(d, "certs", "ca.key"),
                        os.path.join(d, "certs", "vault.key"),
                        self.admin_sock]
        for f in must_private:
            with self.subTest(path=os.path.relpath(f, d)):
                self.assertTrue(os.path.exists(f), f)
                m = os.lstat(f).st_mode & 0o777
                self.assertEqual(m & 0o077, 0, "%s is %o" % (f, m))
        made = []
        for sub in ("var", "certs"):
            for root, dirs, files in os.walk(os.path.join(d, sub)):
                for n in files:
                    made.append(os.path.join(root, n))
        for f in made:
            if f.endswith((".crt", ".pub")):
                continue
            with self.subTest(path=os.path.relpath(f, d)):
                st = os.lstat(f)
                if stat.S_ISLNK(st.st_mode):
                    continue
                self.assertEqual(st.st_mode & 0o007, 0,
                                 "%s is %o" % (f, st.st_mode & 0o777))
                self.assertEqual(st.st_mode & 0o020, 0,
                                 "%s group-writable %o" % (f, st.st_mode & 0o777))
        for sub in ("var", "certs"):
            with self.subTest(dir=sub):
                m = os.stat(os.path.join(d, sub)).st_mode & 0o777
                self.assertEqual(m & 0o002, 0, "%s is %o" % (sub, m))

    def test_invalid_host_row_names_the_identified_sandbox(self):
        """docs/audit.md, column `sandbox`: "the sandbox id that made the
        request; NULL when nothing identified the client"; SPEC §4: identity
        is decision step (1), and "a wrong one is a 407"; docs/monitoring.md:
        sandgate_sandbox_requests_total counts every row of a sandbox.
        Sent with sandbox tk's right `Proxy-Authorization`:
        `GET http://q"y.test/` and `CONNECT q"z.test:443` (a `"` or `!` in
        the name), and from 127.0.0.1 (sandbox `local` by source) with no
        credentials `GET http://q!x.test/`. Controls that hold: the same
        token with `GET http://a..c/` or a SOCKS5 name `q"s.test` gives a
        403 invalid-host row naming tk. Happened: the `"`/`!` names are
        refused as invalid-host before identity is looked at: the rows say
        sandbox NULL (also rule default-deny), so `sandgate audit --sandbox
        tk`, the per-sandbox metrics and syslog never attribute them, and a
        WRONG password with such a name gets 403 invalid-host, not 407
        proxy-auth-failed (the credentials are never checked)."""
        gp = self.gw.port
        good = T.basic("tk", TOKEN).encode()
        cases = [
            ("abs token", b'GET http://q"y.test/ HTTP/1.1\r\nHost: q"y.test'
             b'\r\nProxy-Authorization: ' + good + b'\r\n\r\n', "tk"),
            ("connect token", b'CONNECT q"z.test:443 HTTP/1.1\r\nHost: '
             b'q"z.test:443\r\nProxy-Authorization: ' + good + b'\r\n\r\n',
             "tk"),
            ("abs source", b'GET http://q!x.test/ HTTP/1.1\r\nHost: q!x.test'
             b'\r\n\r\n', "local"),
            ("control a..c", b'GET http://a..c/ HTTP/1.1\r\nHost: a..c\r\n'
             b'Proxy-Authorization: ' + good + b'\r\n\r\n', "tk"),
        ]
        for label, raw, sid in cases:
            with self.subTest(label):
                c = T.Conn(gp, timeout=5)
                client = "127.0.0.1:%d" % c.sock.getsockname()[1]
                try:
                    c.send(raw)
                    try:
                        st = c.read_response("CONNECT" if raw.startswith(
                            b"CONNECT") else "GET").status
                    except (EOFError, OSError):
                        st = None
                finally:
                    c.close()
                self.assertEqual(st, 403)
                rows = self.gw.wait_audit(client=client)
                self.assertTrue(rows, "no row for %s" % client)
                self.assertEqual(rows[-1]["reason"], "invalid-host", rows[-1])
                self.assertEqual(rows[-1]["sandbox"], sid, rows[-1])
                if raw.startswith(b"CONNECT"):
                    self.assertEqual(rows[-1]["kind"], "connect", rows[-1])
        with self.subTest("wrong password"):
            bad = T.basic("tk", WRONG).encode()
            r = T.raw_request(gp, b'GET http://q"w.test/ HTTP/1.1\r\nHost: '
                              b'q"w.test\r\nProxy-Authorization: ' + bad +
                              b'\r\n\r\n')
            self.assertIsNotNone(r)
            self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                             (407, "proxy-auth-failed"))

    def test_log_lines_carry_no_client_control_bytes(self):
        """docs/config.md log_format: "Bytes a peer sent are escaped";
        docs/audit.md: a destination refused as invalid is logged
        "escaped (`\\xNN` for control bytes ...) so that it stays one word
        of the log line". Sent: a SOCKS5 name, an HTTP path (%-free raw
        ESC) and a Proxy-Authorization user name carrying CR LF, ESC and a
        forged log line. The log must hold no ESC and no line of our
        forging."""
        forged = b"2026-12-05T00:00:00.000Z info sandgate: allow http FORGED"
        socks_connect(self.sport, b"lg.test\r\n" + forged[:60] + b"\x1b[2J", 443)
        T.raw_request(self.gw.port, b"GET http://denied.test/a\x1b[2Jb HTTP/1.1"
                      b"\r\nHost: denied.test\r\n\r\n")
        T.raw_request(self.gw.port, b"GET http://denied.test/ HTTP/1.1\r\n"
                      b"Host: denied.test\r\nProxy-Authorization: Basic " +
                      base64.b64encode(b"u\r\n" + forged[:60] + b"\x1b[2J:pw") +
                      b"\r\n\r\n")
        time.sleep(0.5 * T.SLOW)
        with open(self.gw.log_path, "rb") as f:
            log = f.read()
        self.assertNotIn(b"\x1b", log)
        for line in log.split(b"\n"):
            self.assertFalse(line.startswith(b"2026-12-05T00:00:00.000Z"), line)
            self.assertNotIn(b"\r", line)


class AdminxJsonDebugProbe(Base, unittest.TestCase):
    """The same secrets, with log_format json at debug (the most the log
    ever says) and syslog format json over UDP; and each JSON line parses."""
    SYSLOG = "json"
    UDP = True
    EXTRA = {"log_format": "json", "log_level": "debug"}

    def test_json_log_and_syslog_lines_parse(self):
        """docs/config.md: `json` writes one object per line, peer bytes
        escaped; docs/audit.md "Syslog": format json's message is the row
        as `audit export` prints it. Sent (set-up): SOCKS5 names and an
        HTTP host with `"`, `\\`, CR LF, ESC. Each log line and each
        datagram's JSON part must parse and hold no raw control byte."""
        time.sleep(0.5 * T.SLOW)
        with open(self.gw.log_path, "rb") as f:
            log = f.read()
        self.assertNotIn(b"\x1b", log)
        n = 0
        for line in log.split(b"\n"):
            if not line.strip():
                continue
            with self.subTest(line=line[:120]):
                json.loads(line.decode("utf-8"))
                n += 1
        self.assertGreater(n, 10)
        with self.syslog.lock:
            grams = list(self.syslog.grams)
        self.assertGreater(len(grams), 10)
        for g in grams:
            with self.subTest(gram=g[:120]):
                self.assertRegex(g, rb"^<\d+>1 \S+ \S+ sandgate \d+ audit - \{")
                self.assertNotRegex(g, rb"[\x00-\x1f\x7f]")
                json.loads(g[g.index(b"{"):].decode("utf-8"))


if __name__ == "__main__":
    T.main()
