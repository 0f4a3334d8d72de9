#!/usr/bin/python3
"""
End-to-end tests of the admin API (SPEC §5 "Admin"): HTTP + JSON on a unix
socket of mode 0600. Status codes and documents of every endpoint, the
register/remove life cycle of a dynamic sandbox and how it identifies
requests from its source address, and reload: a good file takes effect, a
broken one is a 400 and the old policy keeps deciding.
"""

import json
import os
import socket
import re
import stat
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

ORIGIN_HOST = "127.0.0.2"
DYN_SOURCE = "127.0.0.6"
PH_RX = re.compile(r"^sg-ph-[a-z2-7]{32}$", re.I)


def admin_raw(sock_path, data, timeout=10):
    """Send bytes on the admin socket; (status, headers, body bytes)."""
    return T.unix_http(sock_path, data, timeout)


def admin(sock_path, method, path, body=None):
    """One request; (status, headers, parsed JSON or None)."""
    data = b"" if body is None else (body if isinstance(body, bytes)
        else json.dumps(body).encode())
    st, hdrs, rest = admin_raw(sock_path, ("%s %s HTTP/1.1\r\nHost: sandgate\r\n"
        "Connection: close\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (method, path, len(data))).encode() + data)
    try:
        doc = json.loads(rest) if rest.strip() else None
    except ValueError:
        doc = None
    return st, hdrs, doc


def policy_doc(alpha_hosts, port, extra=""):
    """Two policies: alpha (the static sandbox's) and beta."""
    return ("sandboxes:\n"
        "  - id: static-one\n"
        "    policy: alpha\n"
        "    source: [127.0.0.1/32]\n"
        "policies:\n"
        "  - name: alpha\n"
        "    allow:\n" + "".join(
        "      - host: %s\n        ports: [%d]\n" % (h, port) for h in alpha_hosts) +
        "    allow_private: [%s/32]\n"
        "    credentials: [gh]\n"
        "  - name: beta\n"
        "    allow:\n"
        "      - host: beta.test\n"
        "        ports: [%d]\n"
        "    allow_private: [%s/32]\n"
        "credentials:\n"
        "  - name: gh\n"
        "    secret: gh-token\n"
        "    hosts: [api.gh.test]\n"
        "    env: GH_TOKEN\n" % (ORIGIN_HOST, port, ORIGIN_HOST)) + extra


class AdminTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-admin-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", host=ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cls.dns = T.Dnsmasq(d, [(n, ORIGIN_HOST) for n in (
            "alpha.test", "beta.test", "later.test")])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        cls.good_policy = policy_doc(["alpha.test"], cls.origin.port)
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": cls.good_policy},
            extra={"listen": {"admin": cls.sock}})
        r = T.run_sandgate("vault", "set", "gh-token", "-c", cls.gw.cfg_path,
            input="ghp_admin_test_value_0123456789")
        if r.returncode != 0:
            raise RuntimeError("vault set: " + r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        # Bound is not yet listening: wait until it takes a connection
        # (the socket file exists from bind, before its chmod and listen).
        deadline = time.time() + 10 * T.SLOW
        while time.time() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(cls.sock)
                break
            except OSError:
                time.sleep(0.05)

    # -------------------------------------------------------------- helpers

    def get(self, host, path, source=None):
        """Absolute-form GET through the proxy; the Response or None."""
        return T.raw_request(self.gw.port, "GET http://%s:%d%s HTTP/1.1\r\n"
            "Host: %s:%d\r\n\r\n" % (host, self.origin.port, path, host,
            self.origin.port), source=source)

    def listing(self):
        st, _, doc = admin(self.sock, "GET", "/v1/sandboxes")
        self.assertEqual(st, 200, doc)
        return {e["id"]: e for e in doc["sandboxes"]}

    def register(self, sid, policy, source, expect=201):
        st, hdrs, doc = admin(self.sock, "POST", "/v1/sandboxes",
            {"id": sid, "policy": policy, "source": source})
        self.assertEqual(st, expect, doc)
        if st == 201:
            self.addCleanup(admin, self.sock, "DELETE", "/v1/sandboxes/" + sid)
        return doc

    def reload_policy(self, text):
        self.gw.write_policy("main.yaml", text)
        return admin(self.sock, "POST", "/v1/reload")

    def restore_policy(self):
        st, _, doc = self.reload_policy(self.good_policy)
        self.assertEqual(st, 200, doc)

    def assert_error_doc(self, hdrs, doc):
        self.assertEqual(hdrs.get("content-type"), "application/json")
        self.assertIsInstance(doc, dict)
        self.assertIsInstance(doc.get("error"), str)
        self.assertTrue(doc["error"])

    # -------------------------------------------------------------- the socket

    def test_01_socket_mode_0600(self):
        st = os.lstat(self.sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.assertEqual(st.st_uid, os.geteuid())
        # The vault key is private too.
        key = os.path.join(self.td.path, "certs", "vault.key")
        self.assertEqual(os.stat(key).st_mode & 0o777, 0o600)

    def test_02_status(self):
        st, hdrs, doc = admin(self.sock, "GET", "/v1/status")
        self.assertEqual(st, 200, doc)
        self.assertEqual(hdrs.get("content-type"), "application/json")
        ver = T.run_sandgate("version").stdout
        self.assertTrue(doc["version"] and doc["version"] in ver, (doc, ver))
        self.assertEqual(doc["workers"], 2)
        for k in ("connections", "refused"):
            self.assertIsInstance(doc[k], int)
            self.assertGreaterEqual(doc[k], 0)
        self.assertIsInstance(doc["policy"], str)
        self.assertTrue(doc["policy"])
        self.assertIsInstance(doc["audit"]["rows_written"], int)
        self.assertIsInstance(doc["audit"]["stalls"], int)

    def test_03_curl_list_static(self):
        r = T.curl("http://x/v1/sandboxes", args=["--unix-socket", self.sock],
            tmp=self.td.path)
        self.assertEqual((r.rc, r.status), (0, 200), r)
        doc = r.json()
        self.assertEqual(list(doc), ["sandboxes"])
        one = [e for e in doc["sandboxes"] if e["id"] == "static-one"]
        self.assertEqual(len(one), 1, doc)
        one = one[0]
        self.assertIs(one["static"], True)
        self.assertEqual(one["policy"], "alpha")
        self.assertEqual(len(one["placeholders"]), 1, one)
        ph = one["placeholders"][0]
        self.assertEqual((ph["credential"], ph["env"]), ("gh", "GH_TOKEN"))
        self.assertRegex(ph["placeholder"], PH_RX)
        # One sandbox by id: the same document.
        st, _, single = admin(self.sock, "GET", "/v1/sandboxes/static-one")
        self.assertEqual(st, 200)
        self.assertEqual(single, one)
        # Stable: listing again gives the same placeholder.
        self.assertEqual(self.listing()["static-one"]["placeholders"], one["placeholders"])

    def test_04_get_unknown_is_404(self):
        st, hdrs, doc = admin(self.sock, "GET", "/v1/sandboxes/no-such-box")
        self.assertEqual(st, 404, doc)
        self.assert_error_doc(hdrs, doc)

    def test_05_unknown_endpoints_and_methods(self):
        for method, path in (("GET", "/v1/nothing"), ("GET", "/"),
                ("POST", "/v1/status"), ("GET", "/v1/reload"),
                ("DELETE", "/v1/sandboxes")):
            with self.subTest(method=method, path=path):
                st, _, doc = admin(self.sock, method, path)
                self.assertIn(st, (404, 405), doc)
        st, _, _ = admin(self.sock, "PUT", "/v1/sandboxes", {"id": "x"})
        self.assertIn(st, (405, 501))
        self.assertNotIn("x", self.listing())

    # -------------------------------------------------------------- register

    def test_10_register_bad_requests(self):
        before = self.listing()
        cases = [
            ("bad JSON", b'{"id": "bad-json", "policy": "alpha", "source": '),
            ("not an object", b'["bad-arr", "alpha", "127.0.0.9"]'),
            ("empty body", b""),
            ("missing source", {"id": "no-src", "policy": "alpha"}),
            ("missing policy", {"id": "no-pol", "source": "127.0.0.9"}),
            ("id not a string", {"id": 7, "policy": "alpha", "source": "127.0.0.9"}),
            ("id with capitals", {"id": "Bad-Id", "policy": "alpha",
                "source": "127.0.0.9"}),
            ("id starting with -", {"id": "-dash", "policy": "alpha",
                "source": "127.0.0.9"}),
            ("id too long", {"id": "a" * 41, "policy": "alpha",
                "source": "127.0.0.9"}),
            ("source not an address", {"id": "bad-src", "policy": "alpha",
                "source": "sandbox.example"}),
            ("source a range", {"id": "bad-cidr", "policy": "alpha",
                "source": "127.0.0.0/24"}),
            ("unknown policy", {"id": "bad-pol", "policy": "gamma",
                "source": "127.0.0.9"}),
        ]
        for what, body in cases:
            with self.subTest(what=what):
                st, hdrs, doc = admin(self.sock, "POST", "/v1/sandboxes", body)
                self.assertEqual(st, 400, (what, doc))
                self.assert_error_doc(hdrs, doc)
        # A body over the limit is refused on its Content-Length alone.
        st, _, _ = admin_raw(self.sock, b"POST /v1/sandboxes HTTP/1.1\r\n"
            b"Host: sandgate\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n")
        self.assertEqual(st, 413)
        self.assertEqual(self.listing(), before)
        # Nothing half-registered: the source still identifies nobody.
        r = self.get("alpha.test", "/adm/bad-req", source="127.0.0.9")
        self.assertEqual(r.status, 407, r)

    def test_11_register_get_delete(self):
        t0 = int(time.time())
        doc = self.register("dyn-life", "alpha", "127.0.0.7")
        self.assertEqual((doc["id"], doc["policy"], doc["source"]),
            ("dyn-life", "alpha", "127.0.0.7"))
        self.assertEqual(len(doc["placeholders"]), 1, doc)
        ph = doc["placeholders"][0]
        self.assertEqual((ph["credential"], ph["env"]), ("gh", "GH_TOKEN"))
        self.assertRegex(ph["placeholder"], PH_RX)
        static_ph = self.listing()["static-one"]["placeholders"][0]["placeholder"]
        self.assertNotEqual(ph["placeholder"], static_ph)
        st, _, one = admin(self.sock, "GET", "/v1/sandboxes/dyn-life")
        self.assertEqual(st, 200, one)
        self.assertIs(one["static"], False)
        self.assertEqual((one["policy"], one["source"]), ("alpha", "127.0.0.7"))
        self.assertEqual(one["placeholders"], doc["placeholders"])
        self.assertTrue(t0 - 2 <= one["created"] <= time.time() + 2, one)
        self.assertIn("dyn-life", self.listing())
        row = self.gw.wait_audit(kind="admin", sandbox="dyn-life", method="POST")
        self.assertTrue(row, self.gw.audit_rows()[-5:])
        self.assertEqual((row[0]["decision"], row[0]["status"]), ("allow", 201))

        st, _, doc = admin(self.sock, "DELETE", "/v1/sandboxes/dyn-life")
        self.assertEqual(st, 200, doc)
        self.assertNotIn("dyn-life", self.listing())
        st, _, doc = admin(self.sock, "GET", "/v1/sandboxes/dyn-life")
        self.assertEqual(st, 404, doc)
        st, hdrs, doc = admin(self.sock, "DELETE", "/v1/sandboxes/dyn-life")
        self.assertEqual(st, 404, doc)
        self.assert_error_doc(hdrs, doc)
        row = self.gw.wait_audit(kind="admin", sandbox="dyn-life", method="DELETE")
        self.assertTrue(row, self.gw.audit_rows()[-5:])
        # The id is free again, with a fresh placeholder.
        again = self.register("dyn-life", "alpha", "127.0.0.7")
        self.assertNotEqual(again["placeholders"][0]["placeholder"], ph["placeholder"])

    def test_12_delete_unknown_and_static(self):
        st, hdrs, doc = admin(self.sock, "DELETE", "/v1/sandboxes/never-was")
        self.assertEqual(st, 404, doc)
        self.assert_error_doc(hdrs, doc)
        # A static sandbox is the policy file's, not the API's to remove.
        st, _, doc = admin(self.sock, "DELETE", "/v1/sandboxes/static-one")
        self.assertGreaterEqual(st, 400, doc)
        self.assertIn("static-one", self.listing())
        r = self.get("alpha.test", "/adm/static-still")
        self.assertEqual(r.status, 200, r)

    def test_13_duplicates_conflict(self):
        self.register("dyn-dup", "alpha", "127.0.0.8")
        st, hdrs, doc = admin(self.sock, "POST", "/v1/sandboxes",
            {"id": "dyn-dup", "policy": "beta", "source": "127.0.0.9"})
        self.assertEqual(st, 409, doc)
        self.assert_error_doc(hdrs, doc)
        # The first registration is unchanged.
        e = self.listing()["dyn-dup"]
        self.assertEqual((e["policy"], e["source"]), ("alpha", "127.0.0.8"))
        # Two sandboxes cannot share a source address.
        st, _, doc = admin(self.sock, "POST", "/v1/sandboxes",
            {"id": "dyn-dup2", "policy": "beta", "source": "127.0.0.8"})
        self.assertEqual(st, 409, doc)
        self.assertNotIn("dyn-dup2", self.listing())
        # Nor take a static sandbox's id.
        st, _, doc = admin(self.sock, "POST", "/v1/sandboxes",
            {"id": "static-one", "policy": "beta", "source": "127.0.0.10"})
        if st == 201:
            admin(self.sock, "DELETE", "/v1/sandboxes/static-one")
        self.assertEqual(st, 409, doc)

    # -------------------------------------------------------------- identification

    def test_20_dynamic_sandbox_identifies_by_source(self):
        r = self.get("beta.test", "/adm/before-reg", source=DYN_SOURCE)
        self.assertEqual(r.status, 407, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "no-identity", r)
        self.register("dyn-ident", "beta", DYN_SOURCE)
        # Decided by its own policy, beta: beta.test yes, alpha.test no.
        r = self.get("beta.test", "/adm/dyn-allowed", source=DYN_SOURCE)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["path"], "/adm/dyn-allowed")
        r = self.get("alpha.test", "/adm/dyn-denied", source=DYN_SOURCE)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        row = self.gw.wait_audit(path="/adm/dyn-allowed")
        self.assertTrue(row)
        self.assertEqual((row[0]["sandbox"], row[0]["rule"], row[0]["decision"]),
            ("dyn-ident", "beta:allow[0]", "allow"))
        self.assertTrue(row[0]["client"].startswith(DYN_SOURCE + ":"), row)
        row = self.gw.wait_audit(path="/adm/dyn-denied")
        self.assertTrue(row)
        self.assertEqual((row[0]["sandbox"], row[0]["decision"]), ("dyn-ident", "deny"))
        # The static sandbox is still decided by alpha.
        self.assertEqual(self.get("alpha.test", "/adm/static-a").status, 200)
        self.assertEqual(self.get("beta.test", "/adm/static-b").status, 403)

        st, _, doc = admin(self.sock, "DELETE", "/v1/sandboxes/dyn-ident")
        self.assertEqual(st, 200, doc)
        r = self.get("beta.test", "/adm/after-delete", source=DYN_SOURCE)
        self.assertEqual(r.status, 407, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "no-identity", r)
        self.assertEqual(self.origin.requests_for("/adm/after-delete"), [])
        self.assertEqual(self.origin.requests_for("/adm/before-reg"), [])

    # -------------------------------------------------------------- reload

    def test_30_reload_good_policy(self):
        self.addCleanup(self.restore_policy)
        self.assertEqual(self.get("later.test", "/adm/later-0").status, 403)
        st, hdrs, doc = self.reload_policy(policy_doc(["alpha.test", "later.test"],
            self.origin.port))
        self.assertEqual(st, 200, doc)
        self.assertEqual(hdrs.get("content-type"), "application/json")
        self.assertIs(doc.get("ok"), True, doc)
        r = self.get("later.test", "/adm/later-1")
        self.assertEqual(r.status, 200, r)

    def test_31_reload_broken_policy_keeps_old(self):
        self.addCleanup(self.restore_policy)
        self.register("dyn-reload", "beta", "127.0.0.11")
        start = len(self.gw.log_text())
        broken = [
            # Would allow later.test and drop alpha.test, but has an unknown key.
            policy_doc(["later.test"], self.origin.port, extra="bogus_key: 1\n"),
            # Not YAML at all.
            policy_doc(["later.test"], self.origin.port) + "  - [unclosed\n",
            # A policy that names a credential nobody defined.
            policy_doc(["later.test"], self.origin.port).replace(
                "credentials: [gh]", "credentials: [gh, nope]"),
        ]
        for i, text in enumerate(broken):
            with self.subTest(case=i):
                st, hdrs, doc = self.reload_policy(text)
                self.assertEqual(st, 400, doc)
                self.assertEqual(hdrs.get("content-type"), "application/json")
                self.assertIs(doc.get("ok"), False, doc)
                self.assertTrue(doc.get("error"), doc)
                # The old policy still decides.
                r = self.get("alpha.test", "/adm/old-%d" % i)
                self.assertEqual(r.status, 200, r)
                r = self.get("later.test", "/adm/new-%d" % i)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        # The error is in the log with the file's name.
        self.assertTrue(self.gw.wait_log(r"main\.yaml:\d+:\d+", start=start),
            self.gw.log_tail())
        # The dynamic sandbox survived the attempts and a good reload.
        self.restore_policy()
        self.assertIn("dyn-reload", self.listing())
        r = self.get("beta.test", "/adm/dyn-after-reload", source="127.0.0.11")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.gw.alive())


    def test_32_reload_returns_and_logs_every_error(self):
        """Two errors in two files: POST /v1/reload answers both, each as
        FILE:LINE:COL like `policy check`, and logs both; SIGHUP logs both."""
        extra = os.path.join(self.gw.policy_dir, "zz-extra.yaml")
        self.addCleanup(self.restore_policy)
        self.addCleanup(lambda: os.path.exists(extra) and os.unlink(extra))
        self.gw.write_policy("zz-extra.yaml", "policies:\n  - name: extra\n"
            "    allow:\n      - host: x.test\n        ports: [70000]\n")
        main = os.path.join(self.gw.policy_dir, "main.yaml")
        start = len(self.gw.log_text())
        st, hdrs, doc = self.reload_policy(policy_doc(["alpha.test"],
            self.origin.port, extra="bogus_key: 1\n"))
        self.assertEqual(st, 400, doc)
        self.assertIs(doc.get("ok"), False, doc)
        self.assertIn("2 errors", doc["error"])
        errs = doc.get("errors")
        self.assertEqual(len(errs), 2, doc)
        bogus_line = len(policy_doc(["alpha.test"], 1).splitlines()) + 1
        want = {(main, bogus_line, 1), (extra, 5, 17)}
        self.assertEqual({(e["file"], e["line"], e["col"]) for e in errs},
            want, doc)
        for e in errs:
            self.assertTrue(e["message"])
            self.assertEqual(e["text"], "%s:%d:%d: %s" % (e["file"],
                e["line"], e["col"], e["message"]))
            self.assertTrue(self.gw.wait_log(re.escape("reload: " + e["text"]),
                start=start), self.gw.log_tail())
        # the same from SIGHUP, in the log
        start = len(self.gw.log_text())
        self.gw.reload()
        for e in errs:
            self.assertTrue(self.gw.wait_log(re.escape("reload: " + e["text"]),
                start=start), self.gw.log_tail())
        self.assertTrue(self.gw.wait_log("reload failed with 2 errors",
            start=start))
        # and `policy check` says the same lines
        r = T.run_sandgate("policy", "check", "-c", self.gw.cfg_path)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(sorted(r.stderr.splitlines()[:2]),
            sorted(e["text"] for e in errs), r.stderr)
        # the old policy still decides
        self.assertEqual(self.get("alpha.test", "/adm/still").status, 200)


    def test_33_reload_error_in_a_file_not_named_in_utf8(self):
        """A policy file whose name is not UTF-8: its error is still in
        the answer (the name's other bytes as '?'), not dropped."""
        name = os.fsencode(self.gw.policy_dir) + b"/zz-\xff.yaml"
        self.addCleanup(os.unlink, name)
        with open(name, "w") as f:
            f.write("bogus_key: 1\n")
        st, _, doc = admin(self.sock, "POST", "/v1/reload")
        self.assertEqual(st, 400, doc)
        self.assertEqual(len(doc["errors"]), 1, doc)
        e = doc["errors"][0]
        self.assertTrue(e["file"].endswith("/zz-?.yaml"), e)
        self.assertEqual((e["line"], e["col"]), (1, 1), e)
        self.assertTrue(e["text"].endswith(":1:1: " + e["message"]), e)


if __name__ == "__main__":
    T.main()
