#!/usr/bin/python3
"""
Probes of the operator tools for security-relevant misbehaviour: the admin
API on its unix socket (HTTP framing, error documents, duplicate JSON keys)
and the CLI commands that print what that socket answers (`sandgate status`,
`sandgate reload`).

The failing tests each name the promise they hold the binary to. What held
(not repeated here as tests, or kept as a single passing test):
- `sandgate audit` filters are bound parameters: `--host/--sandbox/
  --credential "x' OR '1'='1"` match nothing, `%` and `_` are literal in
  `--sandbox`, bad `--since/--limit/--kind` values are usage errors;
- `audit --format csv|json|ocsf|table` keep CR/LF, quotes, ESC, U+2028 and
  invalid UTF-8 inside one well-formed record/line (escaped for the table);
- `vault set` refuses a value in argv in every spelling tried (`--`,
  `--value=`, extra operand to rotate/rm/list) without echoing it;
- `policy check/explain` escape control characters from YAML keys and
  operands; `policy suggest` drops hosts carrying YAML syntax;
- the admin API refuses CL+TE together (400), survives 30000-deep JSON,
  and answers 404 for an unknown approval id;
- `sandgate approvals` escapes control characters in a question.
"""

import json
import os
import socket
import sys
import threading
import time
import types
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ESC = "\x1b"


def admin_raw(sock_path, data, timeout=10):
    """Send bytes, read to EOF (or timeout); the raw answer bytes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout * T.SLOW)
    s.connect(sock_path)
    out = b""
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may answer before reading everything
        while True:
            try:
                c = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not c:
                break
            out += c
    finally:
        s.close()
    return out


def admin_req(sock_path, method, path, body=b""):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return admin_raw(sock_path, ("%s %s HTTP/1.1\r\nHost: sandgate\r\n"
        "Connection: close\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (method, path, len(body))).encode()
        + body)


def split_answer(raw):
    """(status, {lower header: value}, body bytes) of the first answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


class FakeAdmin:
    """A unix socket that answers every request with one fixed response."""

    def __init__(self, path, status, body):
        self.path = path
        self.answer = (b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (
                status, len(body)) + body)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stopping = False
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                c.settimeout(2)
                buf = b""
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        break
                    buf += d
                c.sendall(self.answer)
            except OSError:
                pass
            finally:
                c.close()

    def stop(self):
        self.stopping = True
        self.sock.close()
        self.t.join(2)


POLICY = ("sandboxes:\n"
          "  - id: static-one\n"
          "    policy: alpha\n"
          "    source: [127.0.0.1/32]\n"
          "policies:\n"
          "  - name: alpha\n"
          "    allow:\n"
          "      - host: alpha.test\n"
          "        ports: [80]\n"
          "  - name: beta\n"
          "    allow:\n"
          "      - host: beta.test\n"
          "        ports: [80]\n")


class AdminApiProbe(unittest.TestCase):
    """The real admin API of a running gateway."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgprobe-cli-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.sock = cls.td.join("adm.sock")
        dns = types.SimpleNamespace(addr="127.0.0.1:%d" % T.free_port())
        cls.gw = T.Gateway(cls.td.path, dns, {"main.yaml": POLICY},
                           extra={"listen": {"admin": cls.sock}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(cls.sock)
                break
            except OSError:
                time.sleep(0.05)

    def register(self, sid, source):
        st, _, body = split_answer(admin_req(self.sock, "POST",
            "/v1/sandboxes", {"id": sid, "policy": "beta", "source": source}))
        self.assertEqual(st, 201, body)
        self.addCleanup(admin_req, self.sock, "DELETE", "/v1/sandboxes/" + sid)

    def exists(self, sid):
        st, _, _ = split_answer(admin_req(self.sock, "GET",
                                          "/v1/sandboxes/" + sid))
        return st == 200

    def test_duplicate_json_keys_audit_row_agrees(self):
        """docs/admin-api.md "POST /v1/sandboxes" and "Registering ...
        write[s] an audit row of kind admin". With a duplicate "id" key the
        id that is registered, the one answered and the one in the audit row
        must be the same (they are: the last key wins everywhere). Passes;
        kept as a guard that the audit trail cannot be split from the
        effect."""
        body = (b'{"id":"dupkey-a","id":"dupkey-b","policy":"beta",'
                b'"source":"127.0.0.22"}')
        st, _, ans = split_answer(admin_req(self.sock, "POST",
                                            "/v1/sandboxes", body))
        self.assertEqual(st, 201, ans)
        got = json.loads(ans)["id"]
        self.addCleanup(admin_req, self.sock, "DELETE", "/v1/sandboxes/" + got)
        registered = [sid for sid in ("dupkey-a", "dupkey-b")
                      if self.exists(sid)]
        self.assertEqual(registered, [got])
        rows = self.gw.wait_audit(kind="admin", method="POST",
                                  pred=lambda r: r.get("sandbox") in (
                                      "dupkey-a", "dupkey-b"))
        self.assertTrue(rows, "no admin audit row for the registration")
        self.assertEqual({r["sandbox"] for r in rows}, {got})


class StatusReloadOutputProbe(unittest.TestCase):
    """`sandgate status` and `sandgate reload` against a socket that answers
    hostile text in its error fields."""

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgprobe-fake-")
        cls.addClassCleanup(cls.td.cleanup)

    def fake(self, name, status, doc):
        path = self.td.join(name + ".sock")
        f = FakeAdmin(path, status, json.dumps(doc).encode())
        self.addCleanup(f.stop)
        return path

    def check_one_clean_line(self, r, what):
        lines = r.stderr.splitlines()
        problems = []
        if len(lines) != 1:
            problems.append("%d stderr lines" % len(lines))
        if any(not l.startswith("sandgate: ") for l in lines):
            problems.append("a line not starting with 'sandgate: '")
        if ESC in r.stderr or "\x07" in r.stderr:
            problems.append("raw ESC/BEL on the terminal")
        self.assertFalse(problems, "%s: %s; rc=%d stderr=%r" % (
            what, ", ".join(problems), r.returncode, r.stderr))

    def test_status_error_is_one_escaped_line(self):
        """SPEC.md section 2 lines 31-32 and 58: "1 failure (message
        on stderr, one line, starting with `sandgate: `)" and "Errors are one
        line each starting with `sandgate: `"; every other printer of
        foreign text (audit table, policy check, approvals, status's own
        listeners and first_error) escapes control bytes as ?/\\xNN.

        Happened: `sandgate status` prints the admin answer's "error" string
        raw: `sandgate: status: the admin API answered 500: line one\\n
        sandgate: forged second line`, and ESC ]0; / ESC [2J go to the
        terminal as they are."""
        sock = self.fake("st", 500, {"error": "line one\nsandgate: "
            "forged second line " + ESC + "]0;PWNED\x07" + ESC + "[2J"})
        r = T.run_sandgate("status", "--socket", sock)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.check_one_clean_line(r, "status")

    def test_reload_error_is_one_escaped_line(self):
        """As above (SPEC section 2), and docs/admin-api.md "POST /v1/reload":
        `sandgate reload` prints "each error as FILE:LINE:COL: message on
        stderr and exit 1" then `sandgate: reload failed: ...`.

        Happened: each error's `text` is escaped (`?`), but the top-level
        "error" string is printed raw after `sandgate: reload failed: `: a
        newline in it forges a second line (here `sandgate: reloaded fine`)
        and ESC [2J reaches the terminal."""
        sock = self.fake("rl", 400, {
            "ok": False,
            "error": "bad " + ESC + "[2J\nsandgate: reloaded fine",
            "errors": [{"file": "f.yaml", "line": 1, "col": 1,
                        "message": "m", "text": "f.yaml:1:1: m"}]})
        r = T.run_sandgate("reload", "--socket", sock)
        self.assertEqual(r.returncode, 1, r.stderr)
        # The FILE:LINE:COL lines are documented; the rest must be the one
        # `sandgate: ` line.
        rest = [l for l in r.stderr.splitlines()
                if not l.startswith("f.yaml:1:1:")]
        self.check_one_clean_line(types.SimpleNamespace(
            stderr="\n".join(rest) + "\n", returncode=r.returncode),
            "reload")

    def test_status_escapes_control_bytes_in_every_field(self):
        """docs/admin-api.md "GET /v1/status": `sandgate status` "prints the
        same on one screen". It already escapes listeners (`?[1A`) and
        last_reload.first_error, so the document's strings are treated as
        foreign text -- but not all of them.

        Happened: `version`, `started` and `last_reload.source` are printed
        raw, so an answer carrying ESC ]0;..BEL / ESC [2J retitles or clears
        the operator's terminal."""
        doc = {
            "version": "0.1.0" + ESC + "]0;PWNED\x07" + ESC + "[2J",
            "started": "2026-12-05T02:08:35Z" + ESC + "[31m",
            "uptime_s": 5, "workers": 2, "connections": 1,
            "max_connections": 10, "refused": 0,
            "listeners": {"http": "127.0.0.1:1" + ESC + "[1A",
                          "socks5": None, "dns": None, "transparent": None,
                          "ingress": None, "metrics": None, "admin": "/x"},
            "policy": "p",
            "policies": {"files": 1, "sandboxes": 1, "dynamic_sandboxes": 0,
                         "policies": 1, "rules": 1, "credentials": 0,
                         "report": 0},
            "rates": {"window_s": 60.0, "requests_per_s": 1.0,
                      "denials_per_s": 0.0, "requests_total": 1,
                      "denials_total": 0},
            "audit": {"healthy": True, "unavailable": False,
                      "rows_written": 1, "rows_waiting": 0, "rows_dropped": 0,
                      "write_failures": 0, "unavailable_episodes": 0,
                      "checkpoint_failures": 0, "stalls": 0},
            "nflog_group": 1, "keeper": {"up": True, "pid": 1, "restarts": 0},
            "last_reload": {"at": "2026-12-05T03:01:10Z", "ok": False,
                            "source": "admin" + ESC + "[2J", "errors": 1,
                            "needs_restart": 0,
                            "first_error": "f.yaml:1:1: bad " + ESC + "[K"}}
        sock = self.fake("esc", 200, doc)
        r = T.run_sandgate("status", "--socket", sock)
        self.assertEqual(r.returncode, 0, r.stderr)
        raw_lines = [l for l in r.stdout.splitlines() if ESC in l]
        self.assertFalse(raw_lines, "raw ESC in status output: %r" % raw_lines)


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
