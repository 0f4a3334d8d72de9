"""
Shared harness for sandgate's end-to-end tests: temp dirs, free ports, a
dnsmasq upstream, HTTP/TLS/raw origins, the gateway process, and clients (curl,
raw sockets, requests). Every process is started here and stopped by PID.
"""

import atexit
import base64
import fcntl
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import socketserver
import sqlite3
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import requests

SKIP = 77
ASAN = os.environ.get("SANDGATE_ASAN") == "1"
SLOW = 3.0 if ASAN else 1.0  # time multiplier for sanitizer builds
SRC = os.environ.get("SANDGATE_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
DNSMASQ = "/usr/sbin/dnsmasq"
CURL = "/usr/bin/curl"
OPENSSL = "/usr/bin/openssl"
DIG = "/usr/bin/dig"


def _find_bin():
    b = os.environ.get("SANDGATE_BIN")
    if b:
        return b
    for cand in ("/tmp/build-e2e/sandgate", os.path.join(SRC, "build", "sandgate")):
        if os.access(cand, os.X_OK):
            return cand
    return None


BIN = _find_bin()
# tests/helpers/sg_fault_exec: runs a program with some system calls failing.
FAULT_EXEC = os.environ.get("SANDGATE_FAULT_EXEC") or (
    os.path.join(os.path.dirname(BIN), "tests", "sg_fault_exec") if BIN else None)


def skip_file(reason):
    """Skip a whole test file: print why and exit 77 (CTest: skipped)."""
    print("SKIP: " + reason, flush=True)
    sys.exit(SKIP)


def require_binary():
    if BIN is None:
        skip_file("SANDGATE_BIN is not set and no built sandgate was found")
    if not os.access(BIN, os.X_OK):
        print("FAIL: SANDGATE_BIN=%s is not an executable" % BIN, flush=True)
        sys.exit(1)


def clean_env(**extra):
    """The environment for clients: no proxy variables leak into a test."""
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and k.lower() != "no_proxy"}
    env.update(extra)
    return env


# ---------------------------------------------------------------- processes

_live = set()  # every Proc still running, for atexit and failure logs


class Proc:
    """A child process with a log file, stopped by PID."""

    def __init__(self, argv, log_path, cwd=None, env=None):
        self.argv = argv
        self.log_path = log_path
        self.logf = open(log_path, "ab")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
            stdout=self.logf, stderr=subprocess.STDOUT, cwd=cwd,
            env=env if env is not None else clean_env())
        self.pid = self.p.pid
        self.killed = False
        _live.add(self)

    def alive(self):
        return self.p.poll() is None

    def stop(self, grace=5.0):
        """SIGTERM, then SIGKILL after grace seconds; returns the exit status."""
        if self.p.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                self.p.wait()
        _live.discard(self)
        self.logf.close()
        return self.p.returncode

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])


@atexit.register
def _stop_all():
    for p in list(_live):
        try:
            p.stop(grace=2.0)
        except Exception:
            pass


def proc_status(path_or_pid):
    """/proc/PID/status (or a task's status file) as {key: value}."""
    path = path_or_pid if isinstance(path_or_pid, str) else \
        "/proc/%d/status" % path_or_pid
    with open(path) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f
                    if ":\t" in line)


# ---------------------------------------------------------------- temp, ports

class TempDir:
    def __init__(self, prefix="sgtest-"):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def join(self, *p):
        return os.path.join(self.path, *p)

    def cleanup(self):
        if os.environ.get("SGTEST_KEEP") == "1":
            print("kept temp dir " + self.path, file=sys.stderr)
            return
        shutil.rmtree(self.path, ignore_errors=True)


def _ephemeral_low():
    """The lowest port the kernel hands out for bind(0) and connect()."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORT_DIR = os.path.join(tempfile.gettempdir(), "sgtest-ports")


def _reserve_port(port):
    """Claim port for this process among the tests running beside it (CTest
    runs four at once): two of them drawing the same free port, each to
    bind it later, is "Address already in use" for the second (seen in CI).
    A claim is a file made with O_EXCL, removed when the process exits; one
    older than an hour is a killed run's, and is taken over."""
    try:
        os.makedirs(_PORT_DIR, exist_ok=True)
    except OSError:
        return True
    path = os.path.join(_PORT_DIR, str(port))
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime < 3600:
                return False
            os.utime(path)
        except OSError:
            return False
        fd = None
    except OSError:
        return True
    if fd is not None:
        os.close(fd)
    atexit.register(_release_port, path)
    return True


def _release_port(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def free_port(host="127.0.0.1", udp_too=False):
    """
    A port free for TCP (and UDP when udp_too) on host right now, for a
    server the test starts later. Drawn below the ephemeral range: a port
    from bind(0) is in that range, where every client connection of every
    test running beside this one takes its source port too, and one could
    take it before the server binds it ("Address already in use").
    """
    low = _ephemeral_low()
    top = low - 1 if low > 12000 else 65535
    bottom = 10000 if low > 12000 else low + 1
    for _ in range(200):
        port = random.randint(bottom, top)
        if not _reserve_port(port):
            continue
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind((host, port))
        except OSError:
            t.close()
            continue
        if udp_too:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                u.bind((host, port))
            except OSError:
                t.close()
                continue
            finally:
                u.close()
        t.close()
        return port
    raise RuntimeError("no free port")


def port_in_use(port, host="127.0.0.1", udp=False):
    s = socket.socket(socket.AF_INET,
        socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def wait_tcp(host, port, timeout, proc=None):
    """Poll until host:port accepts a TCP connection."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            return False
        try:
            s = socket.create_connection((host, port), timeout=0.5)
            s.close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


# ---------------------------------------------------------------- YAML writer

def _yscalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(str(v))


def _yscalar_list(v):
    return all(not isinstance(x, (dict, list)) for x in v)


def to_yaml(obj, indent=0):
    """Block-style YAML for dicts/lists of plain values (strings quoted)."""
    pad = " " * indent
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                out.append("%s%s:" % (pad, k))
                out.append(to_yaml(v, indent + 2))
            elif isinstance(v, list) and v and not _yscalar_list(v):
                out.append("%s%s:" % (pad, k))
                out.append(to_yaml(v, indent + 2))
            elif isinstance(v, list):
                out.append("%s%s: [%s]" % (pad, k,
                    ", ".join(_yscalar(x) for x in v)))
            elif isinstance(v, dict):
                out.append("%s%s: {}" % (pad, k))
            else:
                out.append("%s%s: %s" % (pad, k, _yscalar(v)))
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, dict):
                body = to_yaml(item, indent + 2).splitlines()
                out.append(pad + "- " + body[0][indent + 2:])
                out.extend(body[1:])
            else:
                out.append("%s- %s" % (pad, _yscalar(item)))
    return "\n".join(out)


def sha256_hex(s):
    if isinstance(s, str):
        s = s.encode()
    return hashlib.sha256(s).hexdigest()


def local_sandbox(policy, sid="local", source="127.0.0.1/32"):
    return {"id": sid, "policy": policy, "source": [source]}


def token_sandbox(sid, token, policy):
    return {"id": sid, "policy": policy, "token_sha256": sha256_hex(token)}


# ---------------------------------------------------------------- certificates

def make_cert(dirpath, cn="allowed.test", names=None):
    """A self-signed P-256 certificate; returns (cert_path, key_path)."""
    names = names or [cn]
    cert = os.path.join(dirpath, cn + ".crt")
    key = os.path.join(dirpath, cn + ".key")
    san = ",".join("DNS:" + n for n in names)
    r = subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=" + cn,
        "-addext", "subjectAltName=" + san, "-keyout", key, "-out", cert],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(),
        timeout=30)
    if r.returncode != 0:
        raise RuntimeError("openssl req failed: " + r.stdout.decode())
    return cert, key


# ---------------------------------------------------------------- dnsmasq

class Dnsmasq:
    """
    An authoritative-only dnsmasq for *.test: records is a list of
    (name, ip) pairs (a name may repeat for several answers), cnames a list
    of (alias, target). Every other name under .test is NXDOMAIN.
    """

    def __init__(self, tmp, records, cnames=(), host="127.0.0.1"):
        self.host = host
        self.port = free_port(host, udp_too=True)
        argv = [DNSMASQ, "-k", "--port=%d" % self.port,
            "--listen-address=" + host, "--bind-interfaces",
            "--no-resolv", "--no-hosts", "--conf-file=/dev/null",
            "--log-facility=-", "--pid-file=", "--local=/test/",
            "--host-record=ready.sgtest.test,127.0.0.1"]
        for name, ip in records:
            argv.append("--host-record=%s,%s" % (name, ip))
        for alias, target in cnames:
            argv.append("--cname=%s,%s" % (alias, target))
        # dnsmasq lists the interfaces when it starts; one that goes away
        # meanwhile (a sandbox test's veth) fails it with ENODEV: again.
        for attempt in range(3):
            self.proc = Proc(argv, os.path.join(tmp, "dnsmasq-%d-%d.log" % (
                self.port, attempt)))
            if self._answers():
                return
            tail = self.proc.log_tail()
            self.proc.stop()
            if "failed to find list of interfaces" not in tail:
                break
        raise RuntimeError("dnsmasq did not answer:\n" + tail)

    def _answers(self):
        deadline = time.time() + 10
        while time.time() < deadline:
            if not self.proc.alive():
                return False
            r = subprocess.run([DIG, "+short", "+time=1", "+tries=1",
                "@" + self.host, "-p", str(self.port), "ready.sgtest.test",
                "A"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=clean_env())
            if r.stdout.strip() == b"127.0.0.1":
                return True
            time.sleep(0.1)
        return False

    @property
    def addr(self):
        return "%s:%d" % (self.host, self.port)

    def stop(self):
        self.proc.stop()


# ---------------------------------------------------------------- origins

def pattern_block():
    # 256 KiB of a period-251 pattern, so shifted or dropped data shows.
    return bytes((i * 7 + 3) % 251 for i in range(256 * 1024))


_PATTERN = pattern_block()


def pattern_sha256(n):
    """SHA-256 of what /bytes/n serves."""
    h = hashlib.sha256()
    mv = memoryview(_PATTERN)
    while n > 0:
        k = min(n, len(mv))
        h.update(mv[:k])
        n -= k
    return h.hexdigest()


class _OriginHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *a):
        pass

    def setup(self):
        srv = self.server
        if srv.ssl_ctx is not None:
            self.request.settimeout(10)
            self.request = srv.ssl_ctx.wrap_socket(self.request,
                server_side=True)
        with srv.lock:
            srv.open_socks.add(self.request)
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.lock:
                self.server.open_socks.discard(self.request)

    def parse_request(self):
        with self.server.lock:
            self.server.request_lines.append(
                self.raw_requestline.decode("latin-1").rstrip("\r\n"))
        return super().parse_request()

    def _read_body(self):
        h = hashlib.sha256()
        n = 0
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    b = self.rfile.read(min(left, 65536))
                    if not b:
                        raise ConnectionError("short chunk")
                    h.update(b)
                    n += len(b)
                    left -= len(b)
                self.rfile.readline(16)
        elif self.headers.get("Content-Length"):
            left = int(self.headers["Content-Length"])
            while left:
                b = self.rfile.read(min(left, 65536))
                if not b:
                    raise ConnectionError("short body")
                h.update(b)
                n += len(b)
                left -= len(b)
        return n, h.hexdigest()

    def _handle(self, method):
        srv = self.server
        path = self.path
        blen, bsha = self._read_body()
        rec = {"method": method, "path": path,
            "host": self.headers.get("Host"),
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": blen, "body_sha256": bsha,
            "peer": list(self.client_address[:2])}
        with srv.lock:
            srv.requests.append(rec)
        m = re.match(r"^/bytes/(\d+)$", path)
        if m and method in ("GET", "HEAD"):
            n = int(m.group(1))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            if method == "HEAD":
                return
            mv = memoryview(_PATTERN)
            while n > 0:
                k = min(n, len(mv))
                self.wfile.write(mv[:k])
                n -= k
                with srv.lock:
                    srv.bytes_sent += k
            return
        doc = {"origin": srv.name, "method": method, "path": path,
            "host": rec["host"], "body_len": blen, "body_sha256": bsha,
            "te": self.headers.get("Transfer-Encoding"),
            "cl": self.headers.get("Content-Length")}
        if path.split("?")[0] == "/headers":
            doc["headers"] = rec["headers"]
        body = (json.dumps(doc) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Origin", srv.name)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self._handle("GET")

    def do_HEAD(self):
        self._handle("HEAD")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_DELETE(self):
        self._handle("DELETE")


class _OriginServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_bind(self):
        # HTTPServer.server_bind would do a reverse lookup (getfqdn).
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def verify_request(self, request, client_address):
        with self.lock:
            self.conn_count += 1
        return True

    def handle_error(self, request, client_address):
        with self.lock:
            self.errors.append(repr(sys.exc_info()[1]))


class Origin:
    """
    A threaded HTTP/1.1 origin (TLS when cert/key are given) on host:port
    (port 0: any). Answers every method with JSON naming itself, the path
    and the Host it saw; /headers adds the request headers; /bytes/N
    streams N bytes. Counts accepted connections and records requests.
    """

    def __init__(self, name, host="127.0.0.2", port=0, cert=None, key=None):
        self.srv = _OriginServer((host, port), _OriginHandler,
            bind_and_activate=True)
        self.srv.name = name
        self.srv.lock = threading.Lock()
        self.srv.conn_count = 0
        self.srv.bytes_sent = 0       # body bytes /bytes/N has written so far
        self.srv.requests = []
        self.srv.request_lines = []
        self.srv.errors = []
        self.srv.open_socks = set()
        self.srv.ssl_ctx = None
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.srv.ssl_ctx = ctx
        self.name = name
        self.host = host
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
            kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def conn_count(self):
        with self.srv.lock:
            return self.srv.conn_count

    @property
    def bytes_sent(self):
        with self.srv.lock:
            return self.srv.bytes_sent

    @property
    def requests(self):
        with self.srv.lock:
            return list(self.srv.requests)

    @property
    def request_lines(self):
        with self.srv.lock:
            return list(self.srv.request_lines)

    def saw_path(self, fragment):
        return any(fragment in l for l in self.request_lines)

    def requests_for(self, path):
        return [r for r in self.requests if r["path"] == path]

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


class Listener:
    """
    A TCP listener on host (port 0: any), each connection served in a
    thread of its own by serve(conn, idx), which a subclass writes (idx:
    the connection's number, from 0); accepted(conn, idx) runs first, under
    .lock. The connection is closed when serve returns; OSError, ssl.SSLError,
    ValueError and EOFError end it quietly. stop() closes the listener and
    shuts every connection down. A subclass sets its own fields, then calls
    Listener.__init__ (the thread starts there).
    """

    def __init__(self, host="127.0.0.2", port=0, backlog=64, rcvbuf=None):
        if not hasattr(self, "lock"):
            self.lock = threading.Lock()
        self.conns = []
        self.stopping = False
        self.sock = socket.socket(socket.AF_INET6 if ":" in host
                                  else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind((host, port))
        self.sock.listen(backlog)
        self.sock.settimeout(0.1)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def accepted(self, conn, idx):
        pass

    def serve(self, conn, idx):
        raise NotImplementedError

    def _loop(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                idx = len(self.conns)
                self.conns.append(c)
                self.accepted(c, idx)
            threading.Thread(target=self._run, args=(c, idx),
                             daemon=True).start()

    def _run(self, c, idx):
        try:
            self.serve(c, idx)
        except (OSError, ssl.SSLError, ValueError, EOFError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def stop(self):
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(2)


class Recorder(Listener):
    """A TCP listener on host that keeps every byte it receives, all
    connections together, in .data, and sends nothing."""

    def __init__(self, host="127.0.0.1", backlog=4):
        self.data = b""
        super().__init__(host, backlog=backlog)

    def serve(self, c, idx):
        while True:
            b = c.recv(65536)
            if not b:
                return
            with self.lock:
                self.data += b

    def bytes(self):
        with self.lock:
            return self.data


class _ScriptedHandler(socketserver.BaseRequestHandler):
    def handle(self):
        self.server.origin._serve(self.request)


class ThreadedServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A thread a connection (daemons), the address reused."""
    daemon_threads = True
    allow_reuse_address = True


class ScriptedOrigin:
    """
    An HTTP/1.1 origin over TLS (cert/key) on host whose answers a subclass
    writes: answer(req) returns (bytes to send, close after). Every request
    is recorded in .requests, a dict each: line, method, path, head (the
    request head as bytes, with its blank line), headers [(name, value)],
    hmap {lower-case name: value}, body (by Content-Length, or the chunked
    bytes up to "0\r\n\r\n" as they came: tests send no trailers), sni.
    record(req) may add to it (called under .lock). Keep-alive: requests
    are read until the client closes or answer says close.
    """

    def __init__(self, cert, key, host="127.0.0.2", alpn=("http/1.1",)):
        self.lock = threading.Lock()
        self.requests = []
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        if alpn:
            self.ctx.set_alpn_protocols(list(alpn))
        self.srv = ThreadedServer((host, 0), _ScriptedHandler)
        self.srv.origin = self
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
            kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def answer(self, req):
        raise NotImplementedError

    def record(self, req):
        pass

    def _serve(self, sock):
        sock.settimeout(10)
        try:
            sock = self.ctx.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError):
            return
        buf = b""

        def more():
            b = sock.recv(65536)
            if not b:
                raise EOFError
            return b
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    buf += more()
                head, buf = buf.split(b"\r\n\r\n", 1)
                head += b"\r\n\r\n"
                lines = head.decode("latin-1").split("\r\n")
                hdrs = []
                for line in lines[1:]:
                    if line and ":" in line:
                        k, v = line.split(":", 1)
                        hdrs.append((k.strip(), v.strip()))
                hmap = {k.lower(): v for k, v in hdrs}
                body = b""
                try:
                    if "chunked" in hmap.get("transfer-encoding",
                                             "").lower():
                        while b"\r\n0\r\n\r\n" not in b"\r\n" + buf:
                            buf += more()
                        end = (b"\r\n" + buf).find(b"\r\n0\r\n\r\n") + 5
                        body, buf = buf[:end], buf[end:]
                    elif "content-length" in hmap:
                        n = int(hmap["content-length"])
                        while len(buf) < n:
                            buf += more()
                        body, buf = buf[:n], buf[n:]
                except EOFError:
                    body, buf = buf, b""
                words = lines[0].split(" ")
                req = {"line": lines[0], "method": words[0],
                       "path": words[1] if len(words) > 1 else "",
                       "head": head, "headers": hdrs, "hmap": hmap,
                       "body": body, "sni": getattr(sock, "sni", None)}
                with self.lock:
                    self.requests.append(req)
                    self.record(req)
                out, close = self.answer(req)
                sock.sendall(out)
                if close:
                    return
        except (OSError, ssl.SSLError, ValueError, EOFError):
            return
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def find(self, marker):
        """The requests whose request line holds marker."""
        with self.lock:
            return [r for r in self.requests if marker in r["line"]]

    def got(self, needle, marker=""):
        """needle (bytes or str) in the head or body of a request whose
        request line holds marker."""
        if isinstance(needle, str):
            needle = needle.encode()
        with self.lock:
            return any(needle in r["head"] + r["body"]
                       for r in self.requests if marker in r["line"])

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class RawServer:
    """
    A raw TCP listener. mode "record": accept and keep what arrives;
    "echo": send back what arrives; "banner": send banner at once, then echo.
    Counts connections so a test can prove nobody reached it.
    """

    def __init__(self, host="127.0.0.2", mode="record", banner=b""):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.mode = mode
        self.banner = banner
        self.lock = threading.Lock()
        self._count = 0
        self.received = []
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self._count += 1
                idx = len(self.received)
                self.received.append(b"")
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c, idx),
                daemon=True).start()

    def _serve(self, c, idx):
        c.settimeout(60)
        try:
            if self.mode == "banner":
                c.sendall(self.banner)
            while True:
                b = c.recv(65536)
                if not b:
                    break
                with self.lock:
                    self.received[idx] += b
                if self.mode in ("echo", "banner"):
                    c.sendall(b)
        except OSError:
            pass
        finally:
            c.close()

    @property
    def conn_count(self):
        with self.lock:
            return self._count

    def stop(self):
        self.stopping = True
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(2)


class Blackhole:
    """
    A listener whose accept queue is full, so further SYNs are dropped and
    connecting to it times out (for 504 tests) without leaving loopback.
    """

    def __init__(self, host="127.0.0.2"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(0)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.fill = []
        for _ in range(4):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect((host, self.port))
            except (BlockingIOError, OSError):
                pass
            self.fill.append(c)
        time.sleep(0.2)

    def works(self):
        """True when a connect to it really times out on this kernel."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(0.5)
        try:
            s.connect((self.host, self.port))
            return False
        except socket.timeout:
            return True
        except OSError:
            return False
        finally:
            s.close()

    def stop(self):
        for c in self.fill:
            c.close()
        self.sock.close()


# ---------------------------------------------------------------- sqlite locks

# Where SQLite (os_unix.c) keeps the locks a live connection holds all along:
# the shared lock on a WAL database file (SHARED_FIRST, 510 bytes from
# 0x40000002) and the "dead-man switch" byte of its -shm (offset 128).
SQLITE_SHARED = (0x40000002, 510)
SQLITE_SHM_DMS = (128, 1)


def lock_takeover(path, start, length):
    """Whether this process could take an exclusive POSIX lock on those
    bytes of path: what an SQLite connection opening the file tries before
    it takes a database or -shm for abandoned (and truncates the -shm)."""
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
        except OSError:
            return False
        fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
        return True
    finally:
        os.close(fd)


def posix_locks(pid, path):
    """The POSIX locks /proc/locks shows pid holding on path's inode."""
    ino = os.stat(path).st_ino
    out = []
    with open("/proc/locks") as f:
        for line in f:
            w = line.split()
            if "->" in w or len(w) < 8 or w[1] != "POSIX":
                continue
            if int(w[4]) == pid and int(w[5].split(":")[2]) == ino:
                out.append("%s %s-%s" % (w[3], w[6], w[7]))
    return out


# ---------------------------------------------------------------- gateway

def open_to_others(path):
    """Let other users search path and the temp dirs above it, and read it."""
    top = tempfile.gettempdir()
    os.chmod(path, os.stat(path).st_mode | 0o755)
    d = os.path.dirname(os.path.abspath(path))
    while d.startswith(top + os.sep):
        os.chmod(d, os.stat(d).st_mode | 0o011)
        d = os.path.dirname(d)


# What a default install runs: the network process drops to this user, under
# the seccomp filter, with the keeper. $SANDGATE_TEST_USER names another
# account; "none" keeps every harness gateway root (to compare, never in CI).
DEFAULT_USER = os.environ.get("SANDGATE_TEST_USER") or "sandgate"
if DEFAULT_USER == "none":
    DEFAULT_USER = None

REFUSED_RX = re.compile(r"seccomp: refused system call (\S+) \((-?\d+)\)")


def refused_calls(text):
    """The system calls a gateway's log says its seccomp filter refused."""
    return sorted({"%s (%s)" % m.groups() for m in REFUSED_RX.finditer(text)})


def log_problems(text):
    """
    What makes a stopped gateway's log a failure whatever the test asserted:
    a sanitizer report, or a system call its seccomp filter refused (a call
    missing from the allow-list breaks some path of a default install).
    For every file that starts serve without the Gateway class too.
    """
    problems = []
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:"):
        if marker in text:
            problems.append("sanitizer report in the log: " + marker)
    calls = refused_calls(text)
    if calls:
        problems.append("the seccomp filter refused system calls: " +
                        ", ".join(calls) + " (add them to the allow-list "
                        "in src/daemon/privdrop_seccomp.c, or find out why "
                        "the gateway makes them)")
    return problems


class Gateway:
    """
    sandgate serve with a config in tmp: only the HTTP listener enabled,
    upstream DNS from the given dnsmasq, policies from tmp/policies.
    policies: {filename: dict or YAML text}; extra: config keys merged in.
    user: the account serve drops to (config user:), by default "sandgate"
    as in a default install (DEFAULT_USER); None keeps it root, for a test
    that says in its docstring why it needs that. With a user, tmp is opened
    to it for reading, as /etc/sandgate is.
    """

    def __init__(self, tmp, dns, policies, extra=None, workers=2,
                 user=DEFAULT_USER):
        self.tmp = tmp
        self.user = user
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.policy_dir = os.path.join(tmp, "policies")
        self.cfg_path = os.path.join(tmp, "sandgate.yaml")
        self.log_path = os.path.join(tmp, "sandgate.log")
        os.makedirs(self.policy_dir, exist_ok=True)
        os.makedirs(os.path.join(tmp, "certs"), exist_ok=True)
        cfg = {
            "state_dir": os.path.join(tmp, "var"),
            "listen": {
            "http": "127.0.0.1:%d" % self.port,
            "socks5": None, "dns": None, "transparent": None,
            "ingress": None, "metrics": None, "admin": None,
            },
            "policies": [self.policy_dir],
            "ca": {"cert": os.path.join(tmp, "certs", "ca.crt"),
            "key": os.path.join(tmp, "certs", "ca.key")},
            "vault": {"db": os.path.join(tmp, "var", "vault.db"),
            "key_file": os.path.join(tmp, "certs", "vault.key")},
            "upstream": {"resolvers": [dns.addr], "connect_timeout": "3s"},
            "audit": {"db": os.path.join(tmp, "var", "audit.db")},
            "workers": workers,
            "user": user,
        }
        if user is not None:
            open_to_others(tmp)
        for k, v in (extra or {}).items():
            if isinstance(v, dict) and isinstance(cfg.get(k), dict):
                cfg[k].update(v)
            else:
                cfg[k] = v
        with open(self.cfg_path, "w") as f:
            f.write(to_yaml(cfg) + "\n")
        for name, doc in policies.items():
            self.write_policy(name, doc)
        self.proc = None

    def write_policy(self, name, doc):
        text = doc if isinstance(doc, str) else to_yaml(doc) + "\n"
        path = os.path.join(self.policy_dir, name)
        tmp = path + ".tmp~"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, path)
        return path

    def start(self, timeout=10.0, wrap=(), args=()):
        """wrap: argv that execs serve (e.g. FAULT_EXEC with its options);
        args: more options of serve."""
        self.proc = Proc(list(wrap) + [BIN, "serve", "-c", self.cfg_path]
            + list(args),
            self.log_path, cwd=self.tmp, env=clean_env())
        if not wait_tcp("127.0.0.1", self.port, timeout * SLOW, self.proc):
            tail = self.proc.log_tail()
            rc = self.proc.stop()
            raise AssertionError("sandgate did not accept on port %d "
                "(exit %s); log tail:\n%s" % (self.port, rc, tail))
        return self

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def ca_path(self, timeout=10.0):
        """The interception CA's certificate, once serve has written it."""
        path = os.path.join(self.tmp, "certs", "ca.crt")
        deadline = time.time() + timeout * SLOW
        while time.time() < deadline and not os.path.exists(path):
            time.sleep(0.05)
        return path

    def vault_set(self, *pairs):
        """`sandgate vault set NAME` for each (name, value), before start()."""
        for name, value in pairs:
            r = run_sandgate("vault", "set", name, "-c", self.cfg_path,
                input=value)
            if r.returncode != 0:
                raise RuntimeError("vault set %s: %s" % (name, r.stderr))

    def wait_admin(self, sock, timeout=10.0):
        """The CA's path, once it is written and the admin socket at sock
        takes a connection (its file exists from bind(), before listen())."""
        ca = self.ca_path(timeout)
        deadline = time.time() + timeout * SLOW
        while time.time() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(sock)
                return ca
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the admin socket %s takes no connection" % sock)

    def client_context(self):
        """A TLS client context that trusts the gateway's CA (as a sandbox does)."""
        return ssl.create_default_context(cafile=self.ca_path())

    def reload(self):
        os.kill(self.proc.pid, signal.SIGHUP)

    def rss_peak_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    def log_text(self):
        return self.proc.log_text() if self.proc else ""

    def log_tail(self, n=40):
        return self.proc.log_tail(n) if self.proc else ""

    def wait_log(self, pattern, timeout=5.0, start=0):
        """Wait for a regex in the log (from byte offset start); the match or None."""
        deadline = time.time() + timeout * SLOW
        rx = re.compile(pattern, re.M)
        while time.time() < deadline:
            m = rx.search(self.log_text()[start:])
            if m:
                return m
            time.sleep(0.1)
        return None

    def audit_rows(self, **match):
        """Rows of the audit log's events table whose columns equal match."""
        db = os.path.join(self.tmp, "var", "audit.db")
        if not os.path.exists(db):
            return []
        try:
            con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=2)
        except sqlite3.Error:
            return []
        try:
            con.row_factory = sqlite3.Row
            rows = [dict(r) for r in con.execute("SELECT * FROM events ORDER BY id")]
        except sqlite3.Error:
            return []
        finally:
            con.close()
        return [r for r in rows
                if all(r.get(k) == v for k, v in match.items())]

    def wait_audit(self, timeout=5.0, pred=None, **match):
        """Poll until an audit row matches, and pred(row) if given (the writer is asynchronous)."""
        deadline = time.time() + timeout * SLOW
        while True:
            rows = [r for r in self.audit_rows(**match) if pred is None or pred(r)]
            if rows or time.time() > deadline:
                return rows
            time.sleep(0.1)

    def stop(self):
        """Stop it; raise when it crashed, hung on SIGTERM or reported a sanitizer error."""
        if self.proc is None:
            return
        was_alive = self.proc.alive()
        rc = self.proc.stop()
        text = self.proc.log_text()
        problems = []
        if not was_alive:
            problems.append("sandgate exited during the test (status %s)" % rc)
        elif self.proc.killed:
            problems.append("sandgate did not exit within 5 s of SIGTERM")
        elif rc not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
            why = " (%s)" % signal.Signals(-rc).name if rc < 0 else ""
            problems.append("sandgate exit status %s%s after SIGTERM" % (rc, why))
        problems += log_problems(text)
        self.proc = None
        if problems:
            tail = "\n".join(text.splitlines()[-60:])
            raise AssertionError("; ".join(problems) + "\nlog tail:\n" + tail)


def run_sandgate(*args, cwd=None, timeout=30, input=None):
    """Run a sandgate subcommand; returns CompletedProcess with str out/err."""
    return subprocess.run([BIN] + list(args), cwd=cwd, input=input,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(),
        timeout=timeout * SLOW, text=True)


# ---------------------------------------------------------------- clients

class CurlResult:
    def __init__(self, rc, info, blocks, body, stderr):
        self.rc = rc
        self.info = info
        self.blocks = blocks  # [(status, {lower-name: [values]})] in order
        self.body = body
        self.stderr = stderr

    @property
    def status(self):
        """The final response's status (a CONNECT refusal's status when that ended it)."""
        if self.info.get("http_code"):
            return self.info["http_code"]
        return self.info.get("http_connect") or 0

    @property
    def headers(self):
        return self.blocks[-1][1] if self.blocks else {}

    def header(self, name):
        v = self.headers.get(name.lower())
        return v[0] if v else None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<curl rc=%d status=%s headers=%r body=%r stderr=%r>" % (
            self.rc, self.status, self.headers, self.body[:300],
            self.stderr[-600:])


def _parse_header_blocks(raw):
    blocks = []
    for line in raw.decode("latin-1").split("\r\n"):
        if line.startswith("HTTP/"):
            parts = line.split(" ", 2)
            blocks.append((int(parts[1]), {}))
        elif ":" in line and blocks:
            k, v = line.split(":", 1)
            blocks[-1][1].setdefault(k.strip().lower(), []).append(v.strip())
    return blocks


def metric(port, name, tmp=None):
    """The value of an unlabelled counter or gauge at GET /metrics on port."""
    r = curl("http://127.0.0.1:%d/metrics" % port, tmp=tmp)
    m = re.search(r"(?m)^%s (\d+)$" % re.escape(name), r.body.decode())
    if m is None:
        raise AssertionError("no %s in /metrics: %r" % (name, r.body[:2000]))
    return int(m.group(1))


def curl(url, proxy=None, args=(), timeout=20, tmp=None, discard_body=False):
    """Run curl; body to a file (or /dev/null), headers parsed, -w %{json} as info."""
    d = tempfile.mkdtemp(prefix="sgcurl-", dir=tmp)
    try:
        bodyf = os.path.join(d, "body")
        hdrf = os.path.join(d, "hdr")
        argv = [CURL, "-sS", "--max-time", str(timeout * SLOW),
            "-o", "/dev/null" if discard_body else bodyf,
            "-D", hdrf, "-w", "%{json}"]
        if proxy:
            argv += ["-x", proxy]
        argv += list(args) + [url]
        r = subprocess.run(argv, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=clean_env(),
            timeout=timeout * SLOW + 10)
        try:
            info = json.loads(r.stdout.decode() or "{}")
        except ValueError:
            info = {}
        body = b""
        if os.path.exists(bodyf):
            with open(bodyf, "rb") as f:
                body = f.read()
        blocks = []
        if os.path.exists(hdrf):
            with open(hdrf, "rb") as f:
                blocks = _parse_header_blocks(f.read())
        return CurlResult(r.returncode, info, blocks, body,
            r.stderr.decode("utf-8", "replace"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Response:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)]
        self.body = body
        self.raw_head = raw_head

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<response %d %r %r body=%r>" % (self.status, self.reason,
            self.headers, self.body[:300])


class Conn:
    """A client socket with a read buffer, for hand-written requests."""

    def __init__(self, port, host="127.0.0.1", source=None, timeout=10):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(timeout * SLOW)
        if source:
            self.sock.bind((source, 0))
        self.sock.connect((host, port))
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def _fill(self):
        b = self.sock.recv(65536)
        if not b:
            raise EOFError("connection closed")
        self.buf += b

    def read_until(self, sep, limit=1 << 20):
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise ValueError("no %r within %d bytes" % (sep, limit))
            self._fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_some(self):
        if not self.buf:
            self._fill()
        out, self.buf = self.buf, b""
        return out

    def read_to_eof(self, limit=1 << 26):
        while len(self.buf) < limit:
            try:
                b = self.sock.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            self.buf += b
        out, self.buf = self.buf, b""
        return out

    def closed_by_peer(self, timeout=10):
        """True when the peer closes (EOF or RST) within timeout; data is discarded."""
        self.sock.settimeout(timeout * SLOW)
        try:
            while True:
                b = self.sock.recv(65536)
                if not b:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def read_response(self, method="GET"):
        head = self.read_until(b"\r\n\r\n", limit=1 << 17)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        for l in lines[1:]:
            if l:
                k, v = l.split(":", 1)
                headers.append((k.strip(), v.strip()))
        hmap = {k.lower(): v for k, v in headers}
        body = b""
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200 or \
            (method == "CONNECT" and 200 <= status < 300):
            pass
        elif "chunked" in hmap.get("transfer-encoding", "").lower():
            while True:
                line = self.read_until(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.read_until(b"\r\n") != b"\r\n":
                        pass
                    break
                body += self.read_exact(size)
                self.read_until(b"\r\n")
        elif "content-length" in hmap:
            body = self.read_exact(int(hmap["content-length"]))
        else:
            body = self.read_to_eof()
        return Response(status, reason, headers, body, head)

    def request(self, data, method="GET"):
        self.send(data)
        return self.read_response(method)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def raw_request(port, data, method="GET", source=None, timeout=10):
    """Send data on a fresh connection; the response, or None when closed without one."""
    c = Conn(port, source=source, timeout=timeout)
    try:
        c.send(data)
        try:
            return c.read_response(method)
        except (EOFError, ConnectionResetError):
            return None
    finally:
        c.close()


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def open_tunnel(port, target, auth=None, source=None, timeout=10):
    """CONNECT target ("host:port"); returns (Conn, Response)."""
    c = Conn(port, source=source, timeout=timeout)
    req = "CONNECT %s HTTP/1.1\r\nHost: %s\r\n" % (target, target)
    if auth:
        req += "Proxy-Authorization: %s\r\n" % auth
    c.send(req + "\r\n")
    return c, c.read_response("CONNECT")


def socks5_tunnel(port, name, dport, timeout=10):
    """A SOCKS5 CONNECT to name (bytes, a domain) : dport through the
    SOCKS5 listener on 127.0.0.1:port, no authentication: (Conn on the
    tunnel, the reply's first ten bytes)."""
    c = Conn.__new__(Conn)
    c.sock, c.buf = socket.create_connection(("127.0.0.1", port),
                                             timeout=timeout * SLOW), b""
    c.sock.sendall(b"\x05\x01\x00")
    if c.sock.recv(2) != b"\x05\x00":
        c.close()
        raise AssertionError("SOCKS5: no-authentication not chosen")
    c.sock.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
                   struct.pack(">H", dport))
    rep = b""
    while len(rep) < 10:
        b = c.sock.recv(10 - len(rep))
        if not b:
            break
        rep += b
    return c, rep


def session(proxy_url):
    """A requests Session using only the given proxy (environment ignored)."""
    s = requests.Session()
    s.trust_env = False
    s.proxies = {"http": proxy_url, "https": proxy_url}
    return s


# ---------------------------------------------------------------- runner

class _LogResult(unittest.TextTestResult):
    """Prints the tail of every running gateway's log when a test fails."""

    def _tails(self):
        for p in list(_live):
            if os.path.basename(p.argv[0]) == "sandgate" or (
                BIN and p.argv[0] == BIN):
                self.stream.writeln("---- sandgate log tail (%s) ----" %
                    p.log_path)
                self.stream.writeln(p.log_tail(40))
                self.stream.writeln("---- end of log ----")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._tails()

    def addError(self, test, err):
        super().addError(test, err)
        self._tails()



# ---------------------------------------------------------------- admin socket

def http_exchange(sock, data):
    """Send raw bytes on a connected socket and read to EOF; (status,
    lower-case headers, body bytes with chunking undone). Closes sock."""
    try:
        sock.sendall(data)
        raw = b""
        while True:
            b = sock.recv(65536)
            if not b:
                break
            raw += b
    finally:
        sock.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if "chunked" in hdrs.get("transfer-encoding", "").lower():
        out = b""
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        rest = out
    elif "content-length" in hdrs:
        rest = rest[:int(hdrs["content-length"])]
    return status, hdrs, rest


def unix_http(sock_path, data, timeout=10):
    """Send raw bytes on a unix-socket HTTP server (the admin API); read to
    EOF; (status, lower-case headers, body bytes with chunking undone)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout * SLOW)
    try:
        s.connect(sock_path)
    except OSError:
        s.close()
        raise
    return http_exchange(s, data)


def admin_request(sock_path, method, path, body=None, timeout=10):
    """One HTTP/1.1 request on the admin socket: (status, headers, json or
    None); body: bytes as they are, anything else as JSON."""
    data = b"" if body is None else (body if isinstance(body, bytes)
        else json.dumps(body).encode())
    status, hdrs, rest = unix_http(sock_path,
        ("%s %s HTTP/1.1\r\nHost: sandgate\r\nConnection: close\r\n"
         "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" %
         (method, path, len(data))).encode() + data, timeout)
    try:
        doc = json.loads(rest) if rest.strip() else None
    except ValueError:
        doc = None
    return status, hdrs, doc


def admin(sock_path, method, path, body=None):
    """admin_request's (status, json or None)."""
    status, _, doc = admin_request(sock_path, method, path, body)
    return status, doc


def tcp_http(port, method, path, host=None, headers=(), body=None,
             timeout=10):
    """One request to 127.0.0.1:port on a fresh connection (Connection:
    close); (status, lower-case headers, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
    req = "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (
        method, path, host or "127.0.0.1:%d" % port)
    for k, v in headers:
        req += "%s: %s\r\n" % (k, v)
    data = b"" if body is None else body
    if body is not None:
        req += "Content-Length: %d\r\n" % len(data)
    return http_exchange(s, req.encode() + b"\r\n" + data)


def main():
    require_binary()
    runner = unittest.TextTestRunner(resultclass=_LogResult, verbosity=2,
        stream=sys.stdout)
    prog = unittest.main(testRunner=runner, exit=False)
    res = prog.result
    if not res.wasSuccessful():
        sys.exit(1)
    if res.testsRun > 0 and len(res.skipped) == res.testsRun:
        sys.exit(SKIP)
    sys.exit(0)


def one_origin_gateway(cleanup, sid, origin_name="origin", host="127.0.0.2",
                       extra=None, workers=2):
    """
    What many tests start with: a temp dir, one origin on host, dnsmasq
    answering allowed.test with host, and a started gateway whose one local
    sandbox sid may reach allowed.test on the origin's port (policy sid, in
    sid.yaml). cleanup is addCleanup or addClassCleanup: each part is
    stopped through it, the gateway first. Returns (td, origin, dns, gw).
    """
    td = TempDir()
    cleanup(td.cleanup)
    origin = Origin(origin_name, host=host)
    cleanup(origin.stop)
    dns = Dnsmasq(td.path, [("allowed.test", host)])
    cleanup(dns.stop)
    policy = {"sandboxes": [local_sandbox(sid)],
              "policies": [{"name": sid,
                            "allow": [{"host": "allowed.test",
                                       "ports": [origin.port]}],
                            "allow_private": [host + "/32"]}]}
    gw = Gateway(td.path, dns, {sid + ".yaml": policy}, extra=extra,
                 workers=workers)
    gw.start()
    cleanup(gw.stop)
    return td, origin, dns, gw
