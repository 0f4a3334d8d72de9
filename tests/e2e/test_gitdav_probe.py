#!/usr/bin/python3
"""
Probes of the policy's method/path rules and of an allow rule's `git:`
push check (docs/policy.md "Rules", "`git`: which refs a push may
update"; docs/protocols.md "First bytes of a tunnel") through unusual
HTTP, from inside a sandbox. Origins of our own record every request they
parse (any method); after each attempt the test looks at what the origin
got, at the origin's git refs where there is a repository, and at the
audit rows. test_git_probe.py and test_git_push_refs.py cover the smart
HTTP push itself; this file does not repeat them.

Findings (the tests fail on the current binary):
- test_dav_push_under_git_rule: a dumb-HTTP (WebDAV) push -- PUT of
  .../refs/heads/main, DELETE of .../refs/heads/bot/base, MOVE with
  `Destination: .../refs/heads/main` -- passes a rule whose `git:` allows
  only refs/heads/bot/* with `delete: false`; a DAV origin serving the bare
  repository moves/deletes the refs. Only `POST .../git-receive-pack` is
  read (proxy_git.c is_receive_pack); the docs scope `git:` to smart HTTP
  but do not name dumb HTTP among what it does not do.
- test_method_override_dodges_method_deny: `deny: methods: [DELETE]` is
  dodged by `POST` + `X-HTTP-Method-Override: DELETE` (and `_method=DELETE`
  in the query or a form body), which Rails/Rack, Laravel, Symfony, Express
  method-override and Google APIs execute as DELETE; docs say nothing.
- test_dav_destination_dodges_path_rules: MOVE/COPY from an allowed path
  with `Destination:` naming a path a deny rule covers (/admin/x), or one
  outside the allow rule's `paths` (/private/x), are forwarded; the origin
  writes there. Docs say nothing about a second path in a header.

Tried and held (one line each):
- HTTP/2 receive-pack whose pkt-lines arrive one byte per DATA frame
  (with and without content-length), the 2nd command forbidden: 403
  git-ref-denied, no POST at the origin; the allowed one is forwarded.
- receive-pack POST inside the intercepted tunnel with a lower-case method
  (`post`), with `Git-Protocol: version=2`, with `Expect: 100-continue`,
  with `Transfer-Encoding: chunked` and a flush-pkt split across chunks:
  all 403 git-ref-denied, nothing at the origin.
- lower/mixed-case `delete`, `Delete` against `deny: methods: [DELETE]`:
  403 policy-deny; `post`, `PURGE`, `BREW` against `methods: [GET, POST,
  MOVE, COPY]`: 403; `CONNECT other.test:P` / `connect ...` inside an
  intercepted tunnel: 400 bad-request, nothing forwarded; `OPTIONS *`
  under an allow rule with `paths`: 403 (no path to match).
- WebDAV methods (PROPFIND, MKCOL, PUT, MOVE, LOCK, UNLOCK) under a
  fetch-only rule (`methods: [GET, POST]`, `paths: [*/info/refs,
  */git-upload-pack]`): 403 policy-deny each (seen while probing; the
  method/path rules hold, not kept as a test).
- absolute-form `http://other.test/x`, `http://same:1/x` inside an
  intercepted tunnel: host-mismatch (covered by test_smuggle_probe);
  `http://same/x` without a port is accepted and sent in origin form, so
  the origin never reads the authority (noted, not a finding).
- `GET //other.test/admin` inside a tunnel under `deny: paths: [/admin*]`
  is read as /other.test/admin (slashes merged, as nginx and Go do) and
  forwarded; a WHATWG-URL router (`new URL(req.url, base)`) would read
  /admin. Noted only: the docs chose the merging reading.
"""

import http.server
import os
import socketserver
import ssl
import sys
import threading
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import test_git_push_refs as R  # noqa: E402
from test_bypass import RecOrigin  # noqa: E402

try:
    import hpack
except ImportError:
    hpack = None
if hpack is not None:
    from test_http2 import H2, frame, HEADERS, DATA, END_HEADERS, \
        END_STREAM  # noqa: E402

GIT = R.GIT
ORIGIN_HOST = "127.0.0.2"
ZERO = "0" * 40

POLICY = """\
sandboxes:
  - id: gitdav
    policy: gd
    source: [127.0.0.1/32]
policies:
  - name: gd
    allow:
      - host: git.test
        ports: [{dav}]
        tls: intercept
        git:
          push: ["refs/heads/bot/*"]
          delete: false
      - host: meth.test
        ports: [{rec}]
        tls: intercept
      - host: pub.test
        ports: [{rec}]
        tls: intercept
        methods: [GET, POST, MOVE, COPY]
        paths: ["/public/*"]
    deny:
      - host: meth.test
        methods: [DELETE]
      - host: meth.test
        paths: ["/admin*"]
    allow_private: [{origin}/32]
"""


def pkt(line):
    if isinstance(line, str):
        line = line.encode("latin-1")
    return b"%04x" % (len(line) + 4) + line


# ---------------------------------------------------------------- origin

class _DavHandler(http.server.BaseHTTPRequestHandler):
    """
    A minimal WebDAV file server over the repository root, as Apache
    mod_dav or nginx's dav module serve a dumb-HTTP git remote: PUT writes
    a file, DELETE removes one, MOVE renames to Destination, MKCOL makes a
    directory, PROPFIND/LOCK/UNLOCK answer what a client expects. Every
    request is recorded (method, path, Destination) as its head arrives.
    """
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *a):
        pass

    def setup(self):
        self.request.settimeout(30)
        self.request = self.server.ssl_ctx.wrap_socket(self.request,
            server_side=True)
        super().setup()

    def _fs(self, path):
        path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        full = os.path.normpath(os.path.join(self.server.root,
            path.lstrip("/")))
        if not full.startswith(self.server.root):
            return None
        return full

    def _body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status, body=b"", extra=()):
        self.send_response(status)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _any(self):
        with self.server.lock:
            self.server.seen.append({"method": self.command,
                "path": self.path,
                "destination": self.headers.get("Destination")})
        body = self._body()
        full = self._fs(self.path)
        m = self.command
        if full is None:
            return self._answer(403)
        if m == "PUT":
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(body)
            return self._answer(201)
        if m == "DELETE":
            if not os.path.isfile(full):
                return self._answer(404)
            os.unlink(full)
            return self._answer(204)
        if m == "MOVE":
            dst = self._fs(self.headers.get("Destination") or "")
            if dst is None or not os.path.isfile(full):
                return self._answer(409)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(full, dst)
            return self._answer(201)
        if m == "MKCOL":
            os.makedirs(full, exist_ok=True)
            return self._answer(201)
        if m == "PROPFIND":
            return self._answer(207, b'<?xml version="1.0"?><D:multistatus '
                b'xmlns:D="DAV:"/>', (("Content-Type", "text/xml"),))
        if m == "LOCK":
            return self._answer(200, b'<?xml version="1.0"?><D:prop '
                b'xmlns:D="DAV:"/>', (("Lock-Token",
                "<opaquelocktoken:1234>"), ("Content-Type", "text/xml")))
        if m == "UNLOCK":
            return self._answer(204)
        if m in ("GET", "HEAD") and os.path.isfile(full):
            with open(full, "rb") as f:
                return self._answer(200, f.read())
        return self._answer(404)

    def __getattr__(self, name):
        if name.startswith("do_"):
            return self._any
        raise AttributeError(name)


class _DavServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)  # no reverse lookup
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def handle_error(self, request, client_address):
        pass


class DavOrigin:
    def __init__(self, root, cert, key):
        self.srv = _DavServer((ORIGIN_HOST, 0), _DavHandler)
        self.srv.lock = threading.Lock()
        self.srv.seen = []
        self.srv.root = os.path.normpath(root)
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


# ---------------------------------------------------------------- tests

class GitDavProbe(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(GIT, os.X_OK):
            T.skip_file(GIT + " is not installed")
        cls.td = T.TempDir("sgtest-gitdav-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.genv = T.clean_env(HOME=d, GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="sgtest",
            GIT_AUTHOR_EMAIL="sgtest@example.test",
            GIT_COMMITTER_NAME="sgtest",
            GIT_COMMITTER_EMAIL="sgtest@example.test")
        cls.srv = os.path.join(d, "srv")
        cls.bare = os.path.join(cls.srv, "repo.git")
        work = os.path.join(d, "work")
        os.makedirs(cls.srv)
        R.must([GIT, "init", "-q", "-b", "main", work], cls.genv)
        for name in ("one", "two"):
            with open(os.path.join(work, name), "w") as f:
                f.write(name + "\n")
            R.must([GIT, "-C", work, "add", name], cls.genv)
            R.must([GIT, "-C", work, "commit", "-q", "-m", name], cls.genv)
            if name == "one":
                R.must([GIT, "-C", work, "branch", "old"], cls.genv)
        R.must([GIT, "init", "-q", "--bare", "-b", "main", cls.bare],
            cls.genv)
        # main: "two"; bot/base: "one" (loose refs, as a push leaves them).
        R.must([GIT, "-C", work, "push", "-q", cls.bare, "main",
            "old:refs/heads/bot/base"], cls.genv)
        cls.refs0 = cls.refs()
        assert cls.refs0["refs/heads/main"] != cls.refs0["refs/heads/bot/base"]
        cert, key = T.make_cert(d, "gitdav.test",
            ["git.test", "meth.test", "pub.test"])
        cls.dav = DavOrigin(cls.srv, cert, key)
        cls.addClassCleanup(cls.dav.stop)
        cls.rec = RecOrigin("rec", cert, key)
        cls.addClassCleanup(cls.rec.stop)
        cls.dns = T.Dnsmasq(d, [(h, ORIGIN_HOST) for h in
            ("git.test", "meth.test", "pub.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"gd.yaml": POLICY.format(
            dav=cls.dav.port, rec=cls.rec.port, origin=ORIGIN_HOST)},
            extra={"upstream": {"ca_bundle": cert}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gw_ca = cls.gw.ca_path()
        cls.ctx = ssl.create_default_context(cafile=cls.gw_ca)

    # -------------------------------------------------------------- helpers

    @classmethod
    def refs(cls):
        r = R.run([GIT, "--git-dir=" + cls.bare, "show-ref"], cls.genv)
        out = {}
        for line in r.stdout.decode().splitlines():
            oid, _, ref = line.partition(" ")
            out[ref] = oid
        return out

    def restore_refs(self):
        for ref, oid in self.refs0.items():
            path = os.path.join(self.bare, ref)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(oid + "\n")
        for ref in self.refs():
            if ref not in self.refs0:
                os.unlink(os.path.join(self.bare, ref))

    def tunnel(self, host, port):
        c = T.Conn(self.gw.port)
        self.addCleanup(c.close)
        c.send("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
               (host, port, host, port))
        r = c.read_response("CONNECT")
        self.assertEqual(r.status, 200, r)
        c.sock = self.ctx.wrap_socket(c.sock, server_hostname=host)
        c.buf = b""
        return c

    def exchange(self, host, port, data, method="GET"):
        """One request in a fresh intercepted tunnel; the response or None."""
        c = self.tunnel(host, port)
        c.send(data)
        try:
            return c.read_response(method)
        except (EOFError, OSError, ValueError, ssl.SSLError):
            return None
        finally:
            c.close()

    def rows_after(self, last_id):
        """Rows of requests after last_id (the audit's own checkpoint rows
        left out: they come when they come)."""
        return [x for x in self.gw.audit_rows() if x["id"] > last_id and
                x["rule"] != "checkpoint"]

    def last_id(self):
        rows = self.gw.audit_rows()
        return rows[-1]["id"] if rows else 0

    @staticmethod
    def settle():
        time.sleep(0.3 * T.SLOW)

    def rec_since(self, n):
        self.settle()
        return [(q["method"], q["path"]) for q in self.rec.requests()[n:]]

    def push_cmds(self, forbidden_second=True):
        main = self.refs0["refs/heads/main"]
        bot = self.refs0["refs/heads/bot/base"]
        body = pkt("%s %s refs/heads/bot/ok\0report-status\n" % (ZERO, main))
        if forbidden_second:
            body += pkt("%s %s refs/heads/main\n" % (main, bot))
        return body + b"0000" + b"PACK\x00\x00\x00\x02\x00\x00\x00\x00"

    # ============================================================ findings

    def test_dav_push_under_git_rule(self):
        """
        Promise (docs/policy.md, "`git`: which refs a push may update"):
        "The threat it closes: a token that may push may push anywhere. An
        agent given a bot's token can overwrite `main` ... With `git:` the
        gateway ... refuses the push, with 403 and reason
        `git-ref-denied`, when any command creates or updates a ref that
        no `push` glob matches, or deletes a ref while `delete` is false."
        The list of what it does not do names force-pushes, content, the
        forge's API and ssh -- not git's other HTTP push, dumb HTTP over
        WebDAV (`git http-push`, served by Apache mod_dav / nginx dav).
        Sent, inside an intercepted tunnel to git.test (rule: `git: push:
        [refs/heads/bot/*], delete: false`), one request each:
          PUT /repo.git/refs/heads/main  body "<bot/base oid>\\n"
          DELETE /repo.git/refs/heads/bot/base
          MOVE /repo.git/refs/heads/bot/tmp  Destination: .../refs/heads/main
            (after PUT /repo.git/refs/heads/bot/tmp, an allowed ref)
        Happened: each is forwarded (allow row, rule gd:allow[0]); the DAV
        origin serving the bare repository moves main to bot/base's commit
        or deletes bot/base. Only a POST whose path ends in
        git-receive-pack (or with git's Content-Type) is read
        (src/exchange/proxy_git.c is_receive_pack / git_prepare); writes
        under .../refs/ (and .../packed-refs, .../objects/) by PUT,
        DELETE, MOVE, COPY are not considered at all.
        """
        bot = self.refs0["refs/heads/bot/base"]
        base = "https://git.test:%d/repo.git" % self.dav.port
        hp = "git.test:%d" % self.dav.port
        cases = [
            ("PUT main", [("PUT /repo.git/refs/heads/main HTTP/1.1\r\n"
                "Host: %s\r\nContent-Length: 41\r\n\r\n%s\n" % (hp, bot),
                "PUT")]),
            ("DELETE bot/base under delete: false", [(
                "DELETE /repo.git/refs/heads/bot/base HTTP/1.1\r\n"
                "Host: %s\r\n\r\n" % hp, "DELETE")]),
            ("MOVE onto main", [
                ("PUT /repo.git/refs/heads/bot/tmp HTTP/1.1\r\nHost: %s\r\n"
                 "Content-Length: 41\r\n\r\n%s\n" % (hp, bot), "PUT"),
                ("MOVE /repo.git/refs/heads/bot/tmp HTTP/1.1\r\nHost: %s\r\n"
                 "Destination: %s/refs/heads/main\r\nOverwrite: T\r\n\r\n"
                 % (hp, base), "MOVE")]),
        ]
        for what, reqs in cases:
            with self.subTest(what):
                self.restore_refs()
                first = self.last_id()
                answers = [self.exchange("git.test", self.dav.port, data, m)
                    for data, m in reqs]
                self.settle()
                now = self.refs()
                rows = [(x["method"], x["path"], x["decision"], x["rule"],
                         x["reason"]) for x in self.rows_after(first)]
                self.assertEqual(
                    (now.get("refs/heads/main"), now.get("refs/heads/bot/base")),
                    (self.refs0["refs/heads/main"], bot),
                    "a WebDAV write under a `git: push: [refs/heads/bot/*], "
                    "delete: false` rule changed the origin's refs: main "
                    "%s -> %s, bot/base %s -> %s; answers %r; rows %r" % (
                        self.refs0["refs/heads/main"][:10],
                        (now.get("refs/heads/main") or "(gone)")[:10],
                        bot[:10], (now.get("refs/heads/bot/base") or
                        "(gone)")[:10],
                        [a and a.status for a in answers], rows))
        self.restore_refs()

    def test_method_override_dodges_method_deny(self):
        """
        Promise: SPEC.md §4, decision order "(2) a `deny` rule → deny";
        docs/policy.md "Rules": `methods` "on a deny rule: deny only those
        methods"; the deny rule is meant not to be dodged by spelling
        (policy_match.c method_in: "deny: any case, so "post" cannot dodge
        a POST deny"), as paths "that servers read in different ways" are
        refused where a path rule could apply. The docs say nothing about
        method-override conventions.
        Sent, inside an intercepted tunnel to meth.test (`deny: methods:
        [DELETE]`, allow rule without methods):
          POST /items/1 + `X-HTTP-Method-Override: DELETE` (Rack, Laravel,
            Symfony, Express method-override, Google APIs honour it)
          POST /items/1 + `X-HTTP-Method: DELETE` (OData, ASP.NET)
          POST /items/1?_method=DELETE (Symfony, Laravel)
          (POST with form body `_method=DELETE` (Rails, Laravel): not
          read -- a documented limit, not kept as a case.)
        Happened (FOUND, fixed): each reached the origin as POST with the
        override intact (allow row); such origins run it as DELETE. Now
        each reading is decided too: 403 policy-deny, nothing forwarded.
        """
        hp = "meth.test:%d" % self.rec.port
        cases = [
            ("X-HTTP-Method-Override", "/items/1",
                "X-HTTP-Method-Override: DELETE\r\nContent-Length: 0\r\n", b""),
            ("X-HTTP-Method", "/items/2",
                "X-HTTP-Method: DELETE\r\nContent-Length: 0\r\n", b""),
            ("_method query", "/items/3?_method=DELETE",
                "Content-Length: 0\r\n", b""),
            # A `_method` in a form body is not read (docs/policy.md,
            # "Method overrides and WebDAV": a documented limit).
        ]
        for what, path, hdrs, body in cases:
            with self.subTest(what):
                n = len(self.rec.requests())
                r = self.exchange("meth.test", self.rec.port,
                    ("POST %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (path, hp,
                     hdrs)).encode() + body, "POST")
                got = self.rec_since(n)
                self.assertEqual(got, [],
                    "POST overriding its method to DELETE reached the "
                    "origin under `deny: methods: [DELETE]` (answer %s)" %
                    (r and r.status))

    def test_dav_destination_dodges_path_rules(self):
        """
        Promise: SPEC.md §4 "(2) a `deny` rule → deny; (3) an `allow` rule
        matching host ..., and where intercepted method and path"; docs/
        policy.md "Path matching": a path rule must not be dodged ("so a
        path rule could be dodged ... Such a path is ambiguous ... the
        request is refused"). The docs say nothing about WebDAV's
        `Destination` header, the second path MOVE and COPY act on.
        Sent, inside intercepted tunnels:
          meth.test (`deny: paths: ["/admin*"]`):
            MOVE /public/x + `Destination: https://meth.test:P/admin/x`
            COPY /public/x + `Destination: /admin/x`
          pub.test (`allow: paths: ["/public/*"]`, methods incl. MOVE, COPY):
            MOVE /public/x + `Destination: https://pub.test:P/private/x`
        Happened: all three reach the origin (allow rows); a DAV origin
        creates /admin/x or /private/x -- a resource the deny rule, or the
        allow rule's paths, keep out of reach.
        """
        cases = [
            ("deny paths, MOVE", "meth.test", "MOVE",
                "https://meth.test:%d/admin/x" % self.rec.port),
            ("deny paths, COPY", "meth.test", "COPY", "/admin/x"),
            ("allow paths, MOVE", "pub.test", "MOVE",
                "https://pub.test:%d/private/x" % self.rec.port),
        ]
        for what, host, m, dest in cases:
            with self.subTest(what):
                n = len(self.rec.requests())
                r = self.exchange(host, self.rec.port,
                    "%s /public/x HTTP/1.1\r\nHost: %s:%d\r\nDestination: "
                    "%s\r\nOverwrite: T\r\n\r\n" % (m, host, self.rec.port,
                    dest), m)
                got = self.rec_since(n)
                self.assertEqual(got, [],
                    "%s with Destination %s reached the origin (answer %s)"
                    % (m, dest, r and r.status))

    # ====================================================== variants

    def test_variants_of_the_fixes(self):
        """
        Variants of the three findings, each refused (nothing reaches an
        origin), beside what must still pass:
          git.test (git: rule): a percent-escaped refs segment, an object
            write, LOCK anywhere in the repository -- refused
            (git-ref-denied); PROPFIND (a read) and a PUT outside any
            repository path -- forwarded;
          meth.test (deny DELETE, deny /admin*): X-Method-Override,
            a lower-case override header and value, `_method=%44ELETE`,
            `;_method=DELETE` -- refused (policy-deny); an override to a
            method no rule denies (PATCH) -- forwarded;
          Destination: another host -- 403 host-mismatch; /%61dmin/x and
            /public/../admin/x -- refused; /public/y on pub.test --
            forwarded.
        """
        hp = "git.test:%d" % self.dav.port
        for what, data, m in [
            ("escaped refs", "PUT /repo.git/%%72efs/heads/main HTTP/1.1\r\n"
                "Host: %s\r\nContent-Length: 2\r\n\r\nxx" % hp, "PUT"),
            ("object write", "PUT /repo.git/objects/ab/cdef HTTP/1.1\r\n"
                "Host: %s\r\nContent-Length: 2\r\n\r\nxx" % hp, "PUT"),
            ("LOCK", "LOCK /repo.git/ HTTP/1.1\r\nHost: %s\r\n"
                "Content-Length: 0\r\n\r\n" % hp, "LOCK"),
        ]:
            with self.subTest(what):
                n = len(self.dav.seen())
                first = self.last_id()
                r = self.exchange("git.test", self.dav.port, data, m)
                self.settle()
                self.assertEqual(self.dav.seen()[n:], [], what)
                self.assertEqual(r and r.status, 403, what)
                self.assertEqual([x["reason"] for x in self.rows_after(first)],
                                 ["git-ref-denied"], what)
        for what, data, m in [
            ("PROPFIND", "PROPFIND /repo.git/ HTTP/1.1\r\nHost: %s\r\n"
                "Depth: 0\r\nContent-Length: 0\r\n\r\n" % hp, "PROPFIND"),
            ("PUT elsewhere", "PUT /uploads/notes.txt HTTP/1.1\r\n"
                "Host: %s\r\nContent-Length: 2\r\n\r\nxx" % hp, "PUT"),
        ]:
            with self.subTest(what):
                n = len(self.dav.seen())
                self.exchange("git.test", self.dav.port, data, m)
                self.settle()
                self.assertEqual(len(self.dav.seen()[n:]), 1, what)
        mp = "meth.test:%d" % self.rec.port
        for what, path, hdrs, refused in [
            ("X-Method-Override", "/v/1", "X-Method-Override: DELETE\r\n",
                True),
            ("lower case", "/v/2", "x-http-method-override: delete\r\n",
                True),
            ("escaped _method", "/v/3?_method=%44ELETE", "", True),
            ("; separated _method", "/v/4?a=1;_method=DELETE", "", True),
            ("allowed override", "/v/5",
                "X-HTTP-Method-Override: PATCH\r\n", False),
        ]:
            with self.subTest(what):
                n = len(self.rec.requests())
                first = self.last_id()
                r = self.exchange("meth.test", self.rec.port,
                    ("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: "
                     "0\r\n\r\n" % (path, mp, hdrs)).encode(), "POST")
                got = self.rec_since(n)
                if refused:
                    self.assertEqual(got, [], what)
                    self.assertEqual(r and r.status, 403, what)
                    self.assertEqual([(x["reason"], x["rule"]) for x in
                                      self.rows_after(first)],
                                     [("policy-deny", "gd:deny[0]")], what)
                else:
                    self.assertEqual(got, [("POST", path)], what)
        for what, host, dest, status in [
            ("another host", "meth.test", "https://other.test:%d/public/x"
                % self.rec.port, 403),
            ("escaped admin", "meth.test", "/%61dmin/x", 403),
            ("dot segments", "meth.test", "/public/../admin/x", 403),
            ("allowed", "pub.test", "/public/y", None),
        ]:
            with self.subTest(what):
                n = len(self.rec.requests())
                first = self.last_id()
                r = self.exchange(host, self.rec.port,
                    "MOVE /public/x HTTP/1.1\r\nHost: %s:%d\r\n"
                    "Destination: %s\r\n\r\n" % (host, self.rec.port,
                    dest), "MOVE")
                got = self.rec_since(n)
                if status is None:
                    self.assertEqual(got, [("MOVE", "/public/x")], what)
                    continue
                self.assertEqual(got, [], what)
                self.assertEqual(r and r.status, status, what)
                if what == "another host":
                    self.assertEqual([x["reason"] for x in
                                      self.rows_after(first)],
                                     ["host-mismatch"], what)

    # ================================================================ held

    def test_h2_push_pktlines_one_byte_per_data_frame(self):
        """
        docs/policy.md "git": "The request's head and body are held until
        the command list is read, so nothing of a refused push reaches the
        origin, not even its head"; "Over HTTP/2 the push goes to the
        origin over HTTP/1.1". An HTTP/2 receive-pack stream whose body
        comes one byte per DATA frame, the second command updating main:
        refused 403 git-ref-denied, nothing at the origin; the same without
        the forbidden command is forwarded.
        """
        if hpack is None:
            self.skipTest("python3-hpack is not installed")
        h = H2(self, "git.test", self.dav.port)
        self.assertEqual(h.alpn, "h2")
        sid = 1
        for what, forbidden, with_cl in (("no content-length", True, False),
                                         ("content-length", True, True),
                                         ("allowed", False, False)):
            with self.subTest(what):
                body = self.push_cmds(forbidden)
                extra = [("content-type",
                          "application/x-git-receive-pack-request")]
                if with_cl:
                    extra.append(("content-length", str(len(body))))
                n = len(self.dav.seen())
                first = self.last_id()
                h.send(frame(HEADERS, END_HEADERS, sid, h.block(sid, "POST",
                    "/repo.git/git-receive-pack", extra)))
                for i in range(len(body)):
                    h.send(frame(DATA, END_STREAM if i == len(body) - 1
                        else 0, sid, body[i:i + 1]))
                st = h.wait(sid)[0]
                self.settle()
                posts = [x for x in self.dav.seen()[n:]
                         if x["method"] == "POST"]
                if forbidden:
                    self.assertEqual(H2.status(st), 403, st)
                    self.assertEqual(st["headers"][0].get(
                        "x-sandgate-reason"), "git-ref-denied", st)
                    self.assertEqual(posts, [])
                    self.assertTrue(self.gw.wait_audit(decision="deny",
                        reason="git-ref-denied",
                        pred=lambda x: x["id"] > first))
                else:
                    self.assertEqual(len(posts), 1, (st, posts))
                sid += 2
        self.assertEqual(self.refs(), self.refs0)

    def test_h1_push_variants_in_tunnel(self):
        """
        The same forbidden command list sent inside the intercepted tunnel
        with a lower-case method (`post`: git_prepare does not look at the
        method), `Git-Protocol: version=2`, `Expect: 100-continue`, and
        chunked with the flush-pkt split across chunks: each 403
        git-ref-denied, nothing at the origin, one row each.
        """
        body = self.push_cmds(True)
        hp = "git.test:%d" % self.dav.port
        ct = "Content-Type: application/x-git-receive-pack-request\r\n"
        cl = "Content-Length: %d\r\n" % len(body)
        half = body.index(b"0000") + 2
        chunked = (b"%x\r\n" % half + body[:half] + b"\r\n" +
                   b"%x\r\n" % (len(body) - half) + body[half:] +
                   b"\r\n0\r\n\r\n")
        cases = [
            ("lower-case post", "post", ct + cl, body),
            ("Git-Protocol v2", "POST", ct + cl + "Git-Protocol: version=2"
                "\r\n", body),
            ("Expect 100-continue", "POST", ct + cl +
                "Expect: 100-continue\r\n", body),
            ("chunked, flush split", "POST", ct +
                "Transfer-Encoding: chunked\r\n", chunked),
        ]
        for what, m, hdrs, data in cases:
            with self.subTest(what):
                n = len(self.dav.seen())
                first = self.last_id()
                r = self.exchange("git.test", self.dav.port,
                    ("%s /repo.git/git-receive-pack HTTP/1.1\r\nHost: %s\r\n"
                     "%s\r\n" % (m, hp, hdrs)).encode() + data, "POST")
                self.settle()
                self.assertIsNotNone(r)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"),
                    "git-ref-denied", r)
                self.assertEqual(self.dav.seen()[n:], [])
                self.assertTrue(self.gw.wait_audit(decision="deny",
                    reason="git-ref-denied", pred=lambda x: x["id"] > first))
        self.assertEqual(self.refs(), self.refs0)

    def test_method_spelling_and_tunnel_targets(self):
        """
        Methods are tokens compared as written for allow rules and in any
        case for deny rules (policy_match.c method_in); CONNECT inside a
        tunnel is refused (proxy_http.c tunnel_request); OPTIONS * has no
        path for an allow rule's `paths` to match. Nothing of any of these
        reaches the origin.
        """
        mh = "meth.test:%d" % self.rec.port
        ph = "pub.test:%d" % self.rec.port
        cases = [
            ("meth.test", "delete /x HTTP/1.1\r\nHost: %s\r\n\r\n" % mh,
                "DELETE", 403, "policy-deny"),
            ("meth.test", "Delete /x HTTP/1.1\r\nHost: %s\r\n\r\n" % mh,
                "DELETE", 403, "policy-deny"),
            ("pub.test", "post /public/x HTTP/1.1\r\nHost: %s\r\n"
                "Content-Length: 0\r\n\r\n" % ph, "POST", 403, "policy-deny"),
            ("pub.test", "PURGE /public/x HTTP/1.1\r\nHost: %s\r\n\r\n" % ph,
                "PURGE", 403, "policy-deny"),
            ("pub.test", "BREW /public/x HTTP/1.1\r\nHost: %s\r\n\r\n" % ph,
                "BREW", 403, "policy-deny"),
            ("pub.test", "OPTIONS * HTTP/1.1\r\nHost: %s\r\n\r\n" % ph,
                "OPTIONS", 403, "policy-deny"),
            ("meth.test", "CONNECT pub.test:%d HTTP/1.1\r\nHost: pub.test:%d"
                "\r\n\r\n" % (self.rec.port, self.rec.port), "CONNECT", 400,
                "bad-request"),
            ("meth.test", "connect pub.test:%d HTTP/1.1\r\nHost: %s\r\n\r\n"
                % (self.rec.port, mh), "CONNECT", 400, "bad-request"),
        ]
        for host, data, m, status, reason in cases:
            with self.subTest(data.split("\r\n")[0]):
                n = len(self.rec.requests())
                r = self.exchange(host, self.rec.port, data, m)
                self.assertIsNotNone(r)
                self.assertEqual((r.status, r.header("X-Sandgate-Reason")),
                                 (status, reason), r)
                self.assertEqual(self.rec_since(n), [])


if __name__ == "__main__":
    T.main()
