#!/usr/bin/python3
"""
End-to-end tests of an allow rule's `git: {push: [...], delete: ...}`
(issue 25, point 5): a real `git push` through the gateway (intercepted
TLS) to a repository served by `git http-backend` behind an HTTPS origin
of our own. A push to refs/heads/bot/* lands; a push to main, a delete
with delete: false, and a push of several refs of which one is outside
are refused whole with 403 git-ref-denied before the receive-pack POST
reaches the origin (its request log shows none, and its refs are
unchanged); a large push, which git sends chunked, lands. Over HTTP/2 and
HTTP/1.1 inside the intercepted tunnel, and over plain HTTP.
"""

import http.server
import json
import os
import re
import socketserver
import ssl
import subprocess
import sys
import threading
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

GIT = "/usr/bin/git"
BACKEND = "/usr/lib/git-core/git-http-backend"
ORIGIN_HOST = "127.0.0.2"
HOST = "push.git.test"


def run(argv, env, cwd=None, timeout=60):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, timeout=timeout * T.SLOW, cwd=cwd)


def must(argv, env, cwd=None):
    r = run(argv, env, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(argv),
            r.stderr.decode(errors="replace")))
    return r.stdout.decode().strip()


# ---------------------------------------------------------------- origin

class _BackendHandler(http.server.BaseHTTPRequestHandler):
    """Smart HTTP: every request to git http-backend (CGI), logged."""
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *a):
        pass

    def setup(self):
        self.request.settimeout(60)
        if self.server.ssl_ctx is not None:
            self.request = self.server.ssl_ctx.wrap_socket(self.request,
                server_side=True)
        super().setup()

    def _body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out, True
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n), False

    def _cgi(self):
        # Logged as the head arrives: a head without its body counts too.
        path, _, query = self.path.partition("?")
        seen = {"method": self.command, "path": path, "query": query,
            "chunked": None, "body": None}
        with self.server.lock:
            self.server.seen.append(seen)
        body, chunked = self._body()
        with self.server.lock:
            seen["chunked"], seen["body"] = chunked, len(body)
        env = dict(T.clean_env(), GIT_PROJECT_ROOT=self.server.root,
            GIT_HTTP_EXPORT_ALL="1", REQUEST_METHOD=self.command,
            PATH_INFO=path, QUERY_STRING=query, REMOTE_ADDR="127.0.0.1",
            CONTENT_TYPE=self.headers.get("Content-Type") or "",
            CONTENT_LENGTH=str(len(body)), GATEWAY_INTERFACE="CGI/1.1",
            SERVER_PROTOCOL="HTTP/1.1")
        r = subprocess.run([BACKEND], input=body, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, timeout=60)
        raw = r.stdout
        sep = raw.find(b"\r\n\r\n")
        head, out = (raw[:sep], raw[sep + 4:]) if sep >= 0 else \
            raw.split(b"\n\n", 1) if b"\n\n" in raw else (b"", raw)
        status, hdrs = 200, []
        for line in head.decode(errors="replace").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k and k.lower() != "content-length":
                hdrs.append((k, v.strip()))
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        self._cgi()

    def do_POST(self):
        self._cgi()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)  # no reverse lookup
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def handle_error(self, request, client_address):
        pass  # a client that went away (a refused push)


class BackendOrigin:
    def __init__(self, root, cert, key, tls=True):
        self.srv = _Server((ORIGIN_HOST, 0), _BackendHandler)
        self.srv.lock = threading.Lock()
        self.srv.seen = []
        self.srv.root = root
        self.srv.ssl_ctx = None
        if tls:
            self.srv.ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.srv.ssl_ctx.load_cert_chain(cert, key)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
            kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def seen(self):
        with self.srv.lock:
            return list(self.srv.seen)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


# ---------------------------------------------------------------- the tests

POLICY = """\
sandboxes:
  - id: pushbox
    policy: pushpol
    source: [127.0.0.1/32]
policies:
  - name: pushpol
    allow:
      - host: {host}
        ports: [{port}]
        tls: intercept
        git:
          push: ["refs/heads/bot/*", "refs/tags/bot-*"]
          delete: false
    allow_private: [{origin}/32]
"""


class GitPushRefsTest(unittest.TestCase):
    """HTTPS, intercepted; git's curl speaks HTTP/2 to the gateway."""
    SCHEME = "https"
    VERSION = "HTTP/2"

    @classmethod
    def setUpClass(cls):
        for p in (GIT, BACKEND):
            if not os.access(p, os.X_OK):
                T.skip_file(p + " is not installed")
        cls.td = T.TempDir("sgtest-gitpush-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.genv = T.clean_env(HOME=d, GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false",
            GIT_AUTHOR_NAME="sgtest", GIT_AUTHOR_EMAIL="sgtest@example.test",
            GIT_COMMITTER_NAME="sgtest",
            GIT_COMMITTER_EMAIL="sgtest@example.test")
        cls.srv = os.path.join(d, "srv")
        cls.bare = os.path.join(cls.srv, "repo.git")
        cls.work = os.path.join(d, "work")
        os.makedirs(cls.srv)
        must([GIT, "init", "-q", "-b", "main", cls.work], cls.genv)
        cls.main0 = cls.commit("README", "pushed through sandgate\n", "first")
        must([GIT, "init", "-q", "--bare", "-b", "main", cls.bare], cls.genv)
        must([GIT, "-C", cls.bare, "config", "http.receivepack", "true"],
            cls.genv)
        must([GIT, "-C", cls.work, "push", "-q", cls.bare, "main"], cls.genv)
        cert, key = T.make_cert(d, "git.test", [HOST])
        cls.origin = BackendOrigin(cls.srv, cert, key,
            tls=cls.SCHEME == "https")
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(HOST, ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.mport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"push.yaml": POLICY.format(
            host=HOST, port=cls.origin.port, origin=ORIGIN_HOST)},
            extra={"upstream": {"ca_bundle": cert},
                   "listen": {"metrics": "127.0.0.1:%d" % cls.mport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.genv["GIT_SSL_CAINFO"] = cls.gw.ca_path()
        cls.url = "%s://%s:%d/repo.git" % (cls.SCHEME, HOST,
            cls.origin.port)

    @classmethod
    def commit(cls, name, content, msg):
        with open(os.path.join(cls.work, name), "w") as f:
            f.write(content)
        must([GIT, "-C", cls.work, "add", name], cls.genv)
        must([GIT, "-C", cls.work, "commit", "-q", "-m", msg], cls.genv)
        return must([GIT, "-C", cls.work, "rev-parse", "HEAD"], cls.genv)

    # -------------------------------------------------------------- helpers

    def push(self, *refspecs, extra=()):
        return run([GIT, "-c", "http.proxy=" + self.gw.url,
            "-c", "http.version=" + self.VERSION] + list(extra) +
            ["-C", self.work, "push", "--porcelain", self.url] +
            list(refspecs), self.genv, timeout=120)

    def origin_ref(self, ref):
        r = run([GIT, "-C", self.bare, "rev-parse", "--verify", "-q", ref],
            self.genv)
        return r.stdout.decode().strip() if r.returncode == 0 else None

    def posts_since(self, since):
        return [x for x in self.origin.seen()[since:]
            if x["method"] == "POST" and x["path"].endswith("git-receive-pack")]

    def requests_total(self, reason):
        r = T.curl("http://127.0.0.1:%d/metrics" % self.mport,
            tmp=self.td.path)
        n = 0
        for m in re.finditer(r'(?m)^sandgate_requests_total\{([^}]*)\} (\d+)$',
                r.body.decode()):
            if 'reason="%s"' % reason in m.group(1):
                n += int(m.group(2))
        return n

    def denied_ids(self):
        return {x["id"] for x in self.gw.audit_rows(decision="deny",
            reason="git-ref-denied")}

    def assert_refused(self, r, since, ids_before):
        err = r.stderr.decode(errors="replace") + r.stdout.decode(
            errors="replace")
        self.assertNotEqual(r.returncode, 0, err)
        self.assertIn("403", err)
        self.assertEqual(self.posts_since(since), [],
            "a refused push's POST reached the origin")
        rows = self.gw.wait_audit(decision="deny", reason="git-ref-denied",
            pred=lambda x: x["id"] not in ids_before)
        self.assertEqual(len(rows), 1, "git-ref-denied rows: %r; last rows: "
            "%r" % (rows, self.gw.audit_rows()[-3:]))
        self.assertEqual(rows[0]["status"], 403)
        self.assertEqual(rows[0]["host"], HOST)
        self.assertTrue((rows[0]["path"] or "").endswith("/git-receive-pack"))

    # -------------------------------------------------------------- pushes

    def test_01_push_to_allowed_ref_lands(self):
        since = len(self.origin.seen())
        c = self.commit("a.txt", "for bot/x\n", "bot x")
        r = self.push("HEAD:refs/heads/bot/x")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace") +
            self.gw.log_tail(10))
        self.assertEqual(self.origin_ref("refs/heads/bot/x"), c)
        seen = self.origin.seen()[since:]
        self.assertTrue(any(x["method"] == "GET" and
            x["query"] == "service=git-receive-pack" for x in seen), seen)
        self.assertEqual(len(self.posts_since(since)), 1, seen)
        self.assertTrue(self.gw.wait_audit(decision="allow", pred=lambda x:
            (x["path"] or "").endswith("/git-receive-pack")))

    def test_02_push_to_main_refused(self):
        since = len(self.origin.seen())
        before = self.requests_total("git-ref-denied")
        self.commit("b.txt", "for main\n", "main")
        ids = self.denied_ids()
        r = self.push("HEAD:refs/heads/main")
        self.assert_refused(r, since, ids)
        self.assertEqual(self.origin_ref("refs/heads/main"), self.main0)
        self.assertEqual(self.requests_total("git-ref-denied"), before + 1)

    def test_03_delete_refused(self):
        if self.origin_ref("refs/heads/bot/x") is None:
            self.assertEqual(self.push("HEAD:refs/heads/bot/x").returncode, 0)
        keep = self.origin_ref("refs/heads/bot/x")
        since = len(self.origin.seen())
        ids = self.denied_ids()
        r = self.push(":refs/heads/bot/x")
        self.assert_refused(r, since, ids)
        self.assertEqual(self.origin_ref("refs/heads/bot/x"), keep)

    def test_04_one_ref_outside_refuses_all(self):
        since = len(self.origin.seen())
        c = self.commit("c.txt", "several refs\n", "several")
        ids = self.denied_ids()
        r = self.push("HEAD:refs/heads/bot/y", "HEAD:refs/tags/bot-1",
            "HEAD:refs/heads/release")
        self.assert_refused(r, since, ids)
        self.assertIsNone(self.origin_ref("refs/heads/bot/y"))
        self.assertIsNone(self.origin_ref("refs/tags/bot-1"))
        self.assertIsNone(self.origin_ref("refs/heads/release"))
        # The same push without the outside ref lands whole.
        r = self.push("HEAD:refs/heads/bot/y", "HEAD:refs/tags/bot-1")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(self.origin_ref("refs/heads/bot/y"), c)
        self.assertEqual(self.origin_ref("refs/tags/bot-1"), c)

    def test_05_large_chunked_push_lands(self):
        since = len(self.origin.seen())
        c = self.commit("big.bin", os.urandom(3 * 1024 * 1024).hex(), "big")
        # Over http.postBuffer: git sends the pack with chunked encoding.
        r = self.push("HEAD:refs/heads/bot/big",
            extra=["-c", "http.postBuffer=65536"])
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace") +
            self.gw.log_tail(10))
        self.assertEqual(self.origin_ref("refs/heads/bot/big"), c)
        posts = self.posts_since(since)
        self.assertTrue(any(x["chunked"] and x["body"] > 1024 * 1024
            for x in posts), posts)

    def test_06_large_chunked_push_outside_refused(self):
        since = len(self.origin.seen())
        self.commit("big2.bin", os.urandom(1024 * 1024).hex(), "big2")
        r = self.push("HEAD:refs/heads/main",
            extra=["-c", "http.postBuffer=65536"])
        err = r.stderr.decode(errors="replace")
        self.assertNotEqual(r.returncode, 0, err)
        # git's probe POST ("0000", no command) may pass; nothing else.
        for x in self.posts_since(since):
            self.assertIsNotNone(x["body"], x)
            self.assertLessEqual(x["body"], 4, x)
        self.assertEqual(self.origin_ref("refs/heads/main"), self.main0)
        self.assertTrue(self.gw.wait_audit(decision="deny",
            reason="git-ref-denied"))

    def raw_post(self, path, body, headers=()):
        """A hand-made receive-pack POST through the gateway with curl."""
        bodyf = os.path.join(self.td.path, "raw-body")
        with open(bodyf, "wb") as f:
            f.write(body)
        args = ["--http1.1", "-X", "POST", "--data-binary", "@" + bodyf]
        if not any(h.lower().startswith("content-type:") for h in headers):
            args += ["-H", "Content-Type: application/octet-stream"]
        if self.SCHEME == "https":
            args += ["--cacert", self.genv["GIT_SSL_CAINFO"]]
        for h in headers:
            args += ["-H", h]
        return T.curl("%s://%s:%d%s" % (self.SCHEME, HOST, self.origin.port,
            path), proxy=self.gw.url, args=args, tmp=self.td.path)

    def test_08_hand_made_requests(self):
        main = self.origin_ref("refs/heads/main")
        bot = self.origin_ref("refs/heads/bot/x") or "1" * 40

        def pkt(line):
            return b"%04x" % (len(line) + 4) + line

        to_main = pkt(("%s %s refs/heads/main\0report-status\n" % (
            main, bot)).encode()) + b"0000"
        to_bot = pkt(("%s %s refs/heads/bot/raw\0report-status\n" % (
            "0" * 40, main)).encode()) + b"0000"
        cases = [
            # (what, path, body, extra headers)
            ("escaped path", "/repo.git/git-receive-pac%6B", to_main, ()),
            ("trailing slash, query", "/repo.git/git-receive-pack/?x=1",
                to_main, ()),
            ("content-type alone", "/repo.git/elsewhere", to_main,
                ("Content-Type: application/x-git-receive-pack-request",)),
            ("second content-type", "/repo.git/elsewhere", to_main,
                ("Content-Type: text/plain", "Content-Type: "
                 "application/x-git-receive-pack-request")),
            ("encoded body", "/repo.git/git-receive-pack", to_bot,
                ("Content-Encoding: gzip",)),
            ("push certificate", "/repo.git/git-receive-pack",
                pkt(b"push-cert\0report-status\n") + b"0000", ()),
            ("malformed list", "/repo.git/git-receive-pack",
                pkt(b"not a command\n") + b"0000", ()),
            ("list cut short", "/repo.git/git-receive-pack", to_bot[:30], ()),
        ]
        for what, path, body, hdrs in cases:
            with self.subTest(what):
                since = len(self.origin.seen())
                ids = self.denied_ids()
                r = self.raw_post(path, body, hdrs)
                self.assertEqual(r.status, 403, (r.rc, r.stderr, r.body))
                self.assertEqual(r.header("X-Sandgate-Reason"),
                    "git-ref-denied")
                self.assertEqual(self.origin.seen()[since:], [])
                self.assertTrue(self.gw.wait_audit(decision="deny",
                    reason="git-ref-denied",
                    pred=lambda x: x["id"] not in ids))
        self.assertEqual(self.origin_ref("refs/heads/main"), main)
        self.assertIsNone(self.origin_ref("refs/heads/bot/raw"))
        # The same hand-made request to an allowed ref reaches the origin.
        since = len(self.origin.seen())
        r = self.raw_post("/repo.git/git-receive-pack", to_bot)
        self.assertEqual(len(self.posts_since(since)), 1, (r.status, r.body))

    def test_07_policy_explain_shows_git(self):
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
            "--sandbox", "pushbox", "--format", "json",
            "%s:%d" % (HOST, self.origin.port))
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["git"], {"push": ["refs/heads/bot/*",
            "refs/tags/bot-*"], "delete": False})
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
            "--sandbox", "pushbox", "%s:%d" % (HOST, self.origin.port))
        self.assertIn("git push: refs refs/heads/bot/*, refs/tags/bot-*; "
            "delete: no", r.stdout)


class GitPushRefsHttp1Test(GitPushRefsTest):
    """The same over HTTP/1.1 inside the intercepted tunnel."""
    VERSION = "HTTP/1.1"


class GitPushRefsPlainTest(GitPushRefsTest):
    """The same over plain HTTP (absolute-form requests to the proxy)."""
    SCHEME = "http"
    VERSION = "HTTP/1.1"


if __name__ == "__main__":
    T.main()
