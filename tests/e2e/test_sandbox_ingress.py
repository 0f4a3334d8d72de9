#!/usr/bin/python3
"""
Ingress into launcher sandboxes (issue 8 point 6), in both runtimes: a
sandbox made by `sandbox create --publish 8000 --publish 8001` runs a guest
(tests/e2e/data/guest_server.py: an HTTP server that describes each request
it got, and a WebSocket echo); curl and a raw client reach it through the
ingress listener by `Host: PORT-ID.sandbox.localhost`: with and without the
token, the cookie flow, an unpublished port, an unknown id, a WebSocket round
trip; the token never reaches the guest; every request has an `ingress` audit
row; after `rm` the sandbox is unknown (404). Root only (exit 77 otherwise).
"""

import base64
import json
import os
import shutil
import socket
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sgtest as T  # noqa: E402
import wsframe as W  # noqa: E402
from sbtest import SandboxWorld, skip_unless_root  # noqa: E402

DOMAIN = "sandbox.localhost"


class SandboxIngressTest(SandboxWorld):
    IPORT = T.free_port()
    EXTRA = {"listen": {"ingress": "127.0.0.1:%d" % IPORT}}

    def ingress(self, host, path="/", headers=(), method="GET", body=b""):
        """One request on a new connection: (status, headers, body)."""
        return T.tcp_http(self.IPORT, method, path, host=host,
            headers=headers, body=body, timeout=20)

    def start_guest(self, rt, sid):
        ws = self.td.join("ws-" + sid)
        os.makedirs(ws, exist_ok=True)
        shutil.copy(os.path.join(HERE, "data", "guest_server.py"), ws)
        # its framing: the sandbox sees the workspace, not tests/e2e
        shutil.copy(os.path.join(HERE, "wsframe.py"), ws)
        os.chmod(ws, 0o755)
        r = self.sandgate("sandbox", "create", "--policy", "web", "--runtime",
            rt, "--id", sid, "--publish", "8000", "--publish", "8001",
            "--workspace", ws, "--", "python3", "/workspace/guest_server.py",
            "8000", "8001")
        self.assertEqual(r.returncode, 0, r.stderr + self.gw.log_tail())
        self.addCleanup(self.sandgate, "sandbox", "rm", sid)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], sid)
        token = lines[1].split()[1]
        urls = [l.split()[1] for l in lines[2:]]
        self.assertEqual(urls, ["http://%d-%s.%s:%d/" % (p, sid, DOMAIN,
            self.IPORT) for p in (8000, 8001)])
        deadline = time.time() + 60 * T.SLOW
        while time.time() < deadline:
            if "ready" in self.sandgate("sandbox", "logs", sid).stdout:
                return token
            time.sleep(0.2)
        self.fail("the guest did not start: " + self.sandgate("sandbox",
            "logs", sid).stdout)

    def check_guest(self, rt):
        sid = "t-ing-" + rt
        token = self.start_guest(rt, sid)
        host = "8000-%s.%s:%d" % (sid, DOMAIN, self.IPORT)

        st, _, _ = self.ingress(host, "/a")
        self.assertEqual(st, 401)
        st, _, _ = self.ingress(host, "/a", [("X-Sandgate-Token", "0" * 40)])
        self.assertEqual(st, 401)

        st, _, body = self.ingress(host, "/a?x=1", [("X-Sandgate-Token",
            token)], method="POST", body=b"p" * 5000)
        self.assertEqual(st, 200, body)
        seen = json.loads(body)
        names = [k.lower() for k, _ in seen["headers"]]
        self.assertEqual((seen["method"], seen["target"], seen["body_len"]),
            ("POST", "/a?x=1", 5000))
        self.assertNotIn("x-sandgate-token", names)
        self.assertNotIn(token, body.decode())
        self.assertIn("x-forwarded-for", names)
        self.assertIn("x-forwarded-host", names)

        # the cookie flow: ?sg_token= once, a redirect without it, a cookie
        st, hs, _ = self.ingress(host, "/b?sg_token=%s&y=2" % token)
        self.assertEqual(st, 302)
        loc = hs["location"]
        self.assertNotIn("sg_token", loc)
        self.assertIn("y=2", loc)
        cookie = hs["set-cookie"]
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Lax", cookie)
        pair = cookie.split(";")[0]
        st, _, body = self.ingress(host, "/b?y=2", [("Cookie",
            pair + "; theme=dark")])
        self.assertEqual(st, 200, body)
        seen = json.loads(body)
        self.assertNotIn(token, body.decode())
        cookies = [v for k, v in seen["headers"] if k.lower() == "cookie"]
        self.assertEqual(cookies, ["theme=dark"])

        # curl, as an operator would
        r = T.curl("http://127.0.0.1:%d/c" % self.IPORT, args=["-H",
            "Host: " + host, "-H", "X-Sandgate-Token: " + token])
        self.assertEqual(r.status, 200, r)

        st, _, _ = self.ingress("9000-%s.%s" % (sid, DOMAIN), "/",
            [("X-Sandgate-Token", token)])
        self.assertEqual(st, 404)
        st, _, _ = self.ingress("8000-t-nobody.%s" % DOMAIN, "/",
            [("X-Sandgate-Token", token)])
        self.assertEqual(st, 404)

        self.websocket(sid, token)
        rows = self.gw.wait_audit(sandbox=sid, kind="ingress")
        statuses = sorted(r["status"] for r in rows if r["status"])
        self.assertIn(401, statuses)
        self.assertIn(200, statuses)
        self.assertIn(302, statuses)

        r = self.sandgate("sandbox", "rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        st, _, _ = self.ingress(host, "/", [("X-Sandgate-Token", token)])
        self.assertEqual(st, 404)
        self.check_clean(sid)

    def websocket(self, sid, token):
        c = socket.create_connection(("127.0.0.1", self.IPORT), timeout=20)
        key = base64.b64encode(os.urandom(16)).decode()
        c.sendall(("GET /ws HTTP/1.1\r\nHost: 8001-%s.%s\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
            "X-Sandgate-Token: %s\r\n\r\n" % (sid, DOMAIN, key, token)).encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            self.assertTrue(d, buf)
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 101"), head)
        msg = b"hello through the ingress"
        c.sendall(W.client_frame(W.OP_TEXT, msg))
        while len(rest) < 2 + len(msg):
            d = c.recv(4096)
            self.assertTrue(d)
            rest += d
        self.assertEqual(rest[:2 + len(msg)], bytes([0x81, len(msg)]) + msg)
        c.close()

    def test_ingress_to_launcher_sandbox(self):
        self.each_runtime(self.check_guest)


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
