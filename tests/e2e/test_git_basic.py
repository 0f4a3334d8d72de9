#!/usr/bin/python3
"""
End-to-end tests of the placeholder swap inside `Authorization: Basic`
(SPEC §7; issue 12, acceptance 7) with real clients: `git clone
https://git:PLACEHOLDER@host/repo.git` and `curl -u` through the gateway to
an HTTPS origin of our own that serves a bare repository over git's dumb
HTTP protocol and answers 401 unless it gets `Basic base64(git:SECRET)`
byte for byte (canonical, padded). Three credentials, one host each, with
placeholder and secret lengths chosen so that the token the client sends
and the one the origin must get end in every mix of no, one and two `=`.
A placeholder sent where it is not bound is refused and audited.
"""

import base64
import functools
import http.server
import os
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
ORIGIN_HOST = "127.0.0.2"
USER = "git"

# name: (host, fixed placeholder, secret). "git:" is 4 bytes; the comments
# give len("git:" + x) % 3 for the placeholder -> for the secret.
CREDS = {
    # 0 -> 1: the reported bug, an unpadded token that needs "==" after.
    "git-a": ("a.git.test", "sgtest-git-ph-a-0002",
        "ghs_A/longer+than=the-placeholder_0123456789a"),
    # 2 -> 1: "=" in, "==" out; a secret shorter than the placeholder.
    "git-b": ("b.git.test", "sgtest-git-ph-b-000003",
        "sh0rt/+=Secr"),
    # 1 -> 0: "==" in, none out; a colon inside the password.
    "git-c": ("c.git.test", "sgtest-git-ph-c-00000004",
        "pw:with/colon+and=equals_0123456789abcdefghi"),
}
OTHER_HOST = "other.test"  # allowed and intercepted, bound to nothing


def basic(user, password):
    return "Basic " + base64.b64encode(
        ("%s:%s" % (user, password)).encode()).decode()


def pad_of(user, password):
    return (-len(("%s:%s" % (user, password)).encode())) % 3


def run(argv, env=None, timeout=60, cwd=None):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env or T.clean_env(), timeout=timeout * T.SLOW, cwd=cwd)
    return r


def must(argv, env=None, cwd=None):
    r = run(argv, env=env, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(argv),
            r.stderr.decode(errors="replace")))
    return r.stdout.decode().strip()


# ---------------------------------------------------------------- origin

class _GitHandler(http.server.SimpleHTTPRequestHandler):
    """Static files (dumb HTTP) to whoever sends the host's real Basic."""
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *a):
        pass

    def setup(self):
        self.request.settimeout(10)
        self.request = self.server.ssl_ctx.wrap_socket(self.request,
            server_side=True)
        super().setup()

    def _allowed(self):
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        auth = self.headers.get("Authorization")
        with self.server.lock:
            self.server.seen.append((host, self.path, auth))
        if auth is not None and auth == self.server.expect.get(host):
            return True
        body = b"authentication required\n"
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return False

    def do_GET(self):
        if self._allowed():
            super().do_GET()

    def do_HEAD(self):
        if self._allowed():
            super().do_HEAD()


class _GitServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)  # no reverse lookup
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def handle_error(self, request, client_address):
        pass  # a client that went away mid-handshake or mid-response


class GitOrigin:
    def __init__(self, root, cert, key, expect):
        handler = functools.partial(_GitHandler, directory=root)
        self.srv = _GitServer((ORIGIN_HOST, 0), handler)
        self.srv.lock = threading.Lock()
        self.srv.seen = []
        self.srv.expect = expect
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.srv.ssl_ctx = ctx
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever,
            kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def seen(self, host=None):
        with self.srv.lock:
            return [s for s in self.srv.seen if host is None or s[0] == host]

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


# ---------------------------------------------------------------- the tests

POLICY = """\
sandboxes:
  - id: gitbox
    policy: gitpol
    source: [127.0.0.1/32]
policies:
  - name: gitpol
    allow:
      - host: "*.git.test"
        ports: [{port}]
        tls: intercept
      - host: {other}
        ports: [{port}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [git-a, git-b, git-c]
credentials:
{creds}"""

CRED = """\
  - name: {name}
    secret: {name}-secret
    hosts: [{host}]
    headers: [Authorization]
    placeholder: "{ph}"
"""


class GitBasicTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(GIT, os.X_OK):
            T.skip_file("git is not installed")
        cls.td = T.TempDir("sgtest-git-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.genv = T.clean_env(HOME=d, GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false",
            GIT_AUTHOR_NAME="sgtest", GIT_AUTHOR_EMAIL="sgtest@example.test",
            GIT_COMMITTER_NAME="sgtest",
            GIT_COMMITTER_EMAIL="sgtest@example.test")
        cls.commit = cls.make_repo(os.path.join(d, "srv"))
        names = [h for h, _, _ in CREDS.values()] + [OTHER_HOST]
        cert, key = T.make_cert(d, "git.test", names)
        cls.origin = GitOrigin(os.path.join(d, "srv"), cert, key,
            {h: basic(USER, s) for h, _, s in CREDS.values()})
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in names])
        cls.addClassCleanup(cls.dns.stop)
        policy = POLICY.format(port=cls.origin.port, other=OTHER_HOST,
            origin=ORIGIN_HOST, creds="".join(CRED.format(name=n, host=h,
            ph=p) for n, (h, p, _) in CREDS.items()))
        cls.gw = T.Gateway(d, cls.dns, {"git.yaml": policy},
            extra={"upstream": {"ca_bundle": cert}})
        for name, (_, _, secret) in CREDS.items():
            r = T.run_sandgate("vault", "set", name + "-secret", "-c",
                cls.gw.cfg_path, input=secret)
            if r.returncode != 0:
                raise RuntimeError("vault set %s: %s" % (name, r.stderr))
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.genv["GIT_SSL_CAINFO"] = cls.gw_ca

    @classmethod
    def make_repo(cls, srv):
        """srv/repo.git, bare, one commit, ready for dumb HTTP."""
        work = os.path.join(cls.td.path, "work")
        bare = os.path.join(srv, "repo.git")
        os.makedirs(srv)
        must([GIT, "init", "-q", "-b", "main", work], env=cls.genv)
        with open(os.path.join(work, "README"), "w") as f:
            f.write("cloned through sandgate\n")
        must([GIT, "-C", work, "add", "README"], env=cls.genv)
        must([GIT, "-C", work, "commit", "-q", "-m", "first"], env=cls.genv)
        must([GIT, "init", "-q", "--bare", "-b", "main", bare], env=cls.genv)
        must([GIT, "-C", work, "push", "-q", bare, "main"], env=cls.genv)
        must([GIT, "-C", bare, "update-server-info"], env=cls.genv)
        return must([GIT, "-C", work, "rev-parse", "HEAD"], env=cls.genv)

    # -------------------------------------------------------------- helpers

    def url(self, host, path="/repo.git"):
        return "https://%s:%d%s" % (host, self.origin.port, path)

    def clone(self, host, password, dest):
        userinfo = "%s:%s@" % (USER, password)
        return run([GIT, "-c", "http.proxy=" + self.gw.url,
            "-c", "credential.helper=", "clone", "-q",
            self.url(host).replace("https://", "https://" + userinfo), dest],
            env=self.genv)

    def curl_u(self, host, password, path="/repo.git/HEAD", args=()):
        return T.curl(self.url(host, path), proxy=self.gw.url,
            args=["--cacert", self.gw_ca, "-u", "%s:%s" % (USER, password)] +
            list(args), tmp=self.td.path)

    def assert_origin_saw_only_secret(self, host, secret, since):
        auths = [a for _, _, a in self.origin.seen(host)[since:]
            if a is not None]
        self.assertTrue(auths, "the origin got no Authorization for " + host)
        self.assertEqual(set(auths), {basic(USER, secret)})
        tok = auths[0][len("Basic "):]
        self.assertEqual(len(tok) % 4, 0)
        self.assertEqual(base64.b64encode(base64.b64decode(tok,
            validate=True)).decode(), tok, "not canonical")

    def assert_refused(self, r, cred, host):
        self.assertEqual(r.status, 403, (r.rc, r.info, r.stderr))
        self.assertEqual(r.header("X-Sandgate-Reason"), "credential-misuse")
        rows = self.gw.wait_audit(decision="deny", reason="credential-misuse",
            pred=lambda x: x["host"] == host and x["credential"] == cred)
        self.assertTrue(rows, "no deny row for %s on %s; last rows: %r" % (
            cred, host, self.gw.audit_rows()[-4:]))
        self.assertEqual(rows[-1]["status"], 403)

    # -------------------------------------------------------------- clones

    def test_01_lengths_cover_every_padding(self):
        ins = {pad_of(USER, p) for _, p, _ in CREDS.values()}
        outs = {(pad_of(USER, p), pad_of(USER, s))
            for _, p, s in CREDS.values()}
        self.assertEqual(ins, {0, 1, 2})
        self.assertEqual(outs, {(0, 2), (1, 2), (2, 0)})
        self.assertTrue(any(len(s) > len(p) for _, p, s in CREDS.values()))
        self.assertTrue(any(len(s) < len(p) for _, p, s in CREDS.values()))

    def test_02_git_clone(self):
        for name, (host, ph, secret) in CREDS.items():
            with self.subTest(credential=name):
                since = len(self.origin.seen(host))
                dest = os.path.join(self.td.path, "clone-" + name)
                r = self.clone(host, ph, dest)
                self.assertEqual(r.returncode, 0, r.stderr.decode(
                    errors="replace") + self.gw.log_tail(10))
                self.assertEqual(must([GIT, "-C", dest, "rev-parse", "HEAD"],
                    env=self.genv), self.commit)
                with open(os.path.join(dest, "README")) as f:
                    self.assertEqual(f.read(), "cloned through sandgate\n")
                self.assert_origin_saw_only_secret(host, secret, since)
                # The clone keeps the URL it was given: the placeholder.
                remote = must([GIT, "-C", dest, "remote", "get-url",
                    "origin"], env=self.genv)
                self.assertIn(ph, remote)
                self.assertNotIn(secret, remote)
                rows = self.gw.wait_audit(decision="allow",
                    pred=lambda x: x["host"] == host and
                    x["credential"] == name)
                self.assertTrue(rows, "no allow row naming " + name)

    def test_03_curl_u(self):
        for name, (host, ph, secret) in CREDS.items():
            with self.subTest(credential=name):
                since = len(self.origin.seen(host))
                r = self.curl_u(host, ph)
                self.assertEqual((r.rc, r.status), (0, 200), r.stderr)
                self.assertEqual(r.body, b"ref: refs/heads/main\n")
                self.assert_origin_saw_only_secret(host, secret, since)
                self.assertNotIn(secret.encode(), r.body)
                rows = self.gw.wait_audit(decision="allow", pred=lambda x:
                    x["host"] == host and x["credential"] == name and
                    (x["path"] or "").endswith("/repo.git/HEAD"))
                self.assertTrue(rows, "no allow row naming " + name)

    # -------------------------------------------------------------- refusals

    def test_04_placeholder_to_unbound_host(self):
        _, ph, _ = CREDS["git-a"]
        before = len(self.origin.seen(OTHER_HOST))
        r = self.curl_u(OTHER_HOST, ph)
        self.assert_refused(r, "git-a", OTHER_HOST)
        dest = os.path.join(self.td.path, "clone-other")
        g = self.clone(OTHER_HOST, ph, dest)
        self.assertNotEqual(g.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(dest, "README")))
        # Whatever reached the origin carried no credential at all.
        self.assertEqual([a for _, _, a in
            self.origin.seen(OTHER_HOST)[before:] if a is not None], [])

    def test_05_another_credentials_placeholder(self):
        # git-b's placeholder sent to git-a's host: not swapped, refused.
        host = CREDS["git-a"][0]
        before = len(self.origin.seen(host))
        r = self.curl_u(host, CREDS["git-b"][1])
        self.assert_refused(r, "git-b", host)
        self.assertEqual(self.origin.seen(host)[before:], [])

    def test_06_unknown_value_is_a_foreign_credential(self):
        # A value the gateway never issued, in the bound header of an
        # exclusive credential: the sandbox's own key, refused.
        host = CREDS["git-a"][0]
        before = len(self.origin.seen(host))
        r = self.curl_u(host, "sgtest-git-ph-a-0003")
        self.assertEqual(r.status, 403, r.stderr)
        self.assertEqual(r.header("X-Sandgate-Reason"), "foreign-credential")
        self.assertTrue(self.gw.wait_audit(decision="deny",
            reason="foreign-credential", credential="git-a",
            pred=lambda x: x["host"] == host))
        self.assertEqual(self.origin.seen(host)[before:], [])

    def test_07_non_canonical_token_refused(self):
        # The placeholder in an unpadded token is not swapped, and the
        # request does not reach the origin.
        host, ph, _ = CREDS["git-a"]
        tok = base64.b64encode(("%s:%sx" % (USER, ph)).encode()).decode()
        self.assertTrue(tok.endswith("="))
        before = len(self.origin.seen(host))
        r = T.curl(self.url(host, "/repo.git/HEAD"), proxy=self.gw.url,
            args=["--cacert", self.gw_ca, "-H", "Authorization: Basic " +
            tok.rstrip("=")], tmp=self.td.path)
        self.assertIn(r.status, (403, 502), r.stderr)
        self.assertEqual(self.origin.seen(host)[before:], [])

    def test_99_secrets_nowhere_else(self):
        blob = self.gw.log_text()
        for _, _, secret in CREDS.values():
            self.assertNotIn(secret, blob)
            for row in self.gw.audit_rows():
                self.assertNotIn(secret, repr(row))


if __name__ == "__main__":
    T.main()
