#!/usr/bin/python3
"""
Probes: can one sandbox's traffic be decided under another sandbox's identity
or policy, or can the transparent listener be made to connect somewhere its
policy does not allow? (SPEC §4 "Identity", §5 "Transparent", §9; docs/policy.md
"sandboxes", "How a decision is made"; docs/protocols.md "SOCKS5",
"Transparent", "First bytes of a tunnel"; docs/admin-api.md "POST
/v1/sandboxes".)

IdentityProbe: loopback only -- HTTP proxy, SOCKS5 and the admin socket, with
static sandboxes on 127.0.0.11-13 and origins on 127.0.0.2 that record the
Host of each request they get.

TransparentProbe: the namespaces of test_transparent.py (Topology, 198.18.x /
198.19.x, torn down with the class), a sandbox registered over the admin
socket, origins in the fake internet that record what reached them.
"""

import json
import os
import socket
import struct
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402

PID = os.getpid()
TOK_A = "token-of-sandbox-a-%d" % PID
TOK_B = "token-of-sandbox-b-%d" % PID


def admin(sock, method, path, body=None):
    data = b"" if body is None else json.dumps(body).encode()
    req = ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
           "Content-Length: %d\r\n\r\n" % (method, path, len(data))).encode()
    st, _, out = T.unix_http(sock, req + data)
    try:
        return st, json.loads(out or b"{}")
    except ValueError:
        return st, out


def socks_connect(port, host, dport, methods=(0,), user=None, pw=None,
                  source=None):
    """A SOCKS5 CONNECT by hand. Returns (conn, steps): steps records the
    method the gateway chose, the RFC 1929 status and the CONNECT reply
    code (None where the exchange stopped before)."""
    c = T.Conn(port, source=source, timeout=10)
    steps = {"method": None, "auth": None, "reply": None}
    try:
        c.send(bytes([5, len(methods)] + list(methods)))
        m = c.read_exact(2)
        steps["method"] = m[1]
        if m[1] == 2:
            u, p = (user or "").encode(), (pw or "").encode()
            c.send(bytes([1, len(u)]) + u + bytes([len(p)]) + p)
            a = c.read_exact(2)
            steps["auth"] = a[1]
            if a[1] != 0:
                return c, steps
        elif m[1] != 0:
            return c, steps
        h = host.encode()
        c.send(bytes([5, 1, 0, 3, len(h)]) + h + struct.pack("!H", dport))
        r = c.read_exact(10)
        steps["reply"] = r[1]
    except (EOFError, ConnectionResetError, socket.timeout):
        pass
    return c, steps


# =====================================================================
# Identity on the explicit listeners and the admin socket (loopback)
# =====================================================================

class IdentityProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-ident-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.o = T.Origin("origin", host="127.0.0.2")
        cls.addClassCleanup(cls.o.stop)
        p = cls.oport = cls.o.port
        cls.dns = T.Dnsmasq(d, [("a.test", "127.0.0.2"),
                                ("b.test", "127.0.0.2")])
        cls.addClassCleanup(cls.dns.stop)
        policies = {
            "sandboxes": [
                {"id": "sa", "policy": "pol-a", "source": ["127.0.0.11/32"],
                 "token_sha256": T.sha256_hex(TOK_A)},
                {"id": "sb", "policy": "pol-b", "source": ["127.0.0.12/32"],
                 "token_sha256": T.sha256_hex(TOK_B)},
                # identified by source only: no token exists for it
                {"id": "sc", "policy": "pol-b", "source": ["127.0.0.13/32"]},
            ],
            "policies": [
                {"name": "pol-a", "allow": [{"host": "a.test", "ports": [p]}],
                 "allow_private": ["127.0.0.2/32"]},
                {"name": "pol-b", "allow": [{"host": "b.test", "ports": [p]}],
                 "allow_private": ["127.0.0.2/32"]},
            ],
        }
        cls.sock = os.path.join(d, "adm.sock")
        cls.sport = T.free_port()
        cls.gw = T.Gateway(d, cls.dns, {"p.yaml": policies}, extra={
            "listen": {"socks5": "127.0.0.1:%d" % cls.sport,
                       "admin": cls.sock}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp("127.0.0.1", cls.sport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("SOCKS5 listener not up:\n" + cls.gw.log_tail())
        cls.gw.wait_admin(cls.sock)

    def get(self, host, source, path, auth=None):
        req = "GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n" % (
            host, self.oport, path, host, self.oport)
        if auth:
            req += "Proxy-Authorization: %s\r\n" % auth
        req += "Connection: close\r\n\r\n"
        return T.raw_request(self.gw.port, req, source=source)

    def reached(self, path):
        time.sleep(0.2)
        return [r["host"] for r in self.o.requests if r["path"] == path]

    def register(self, sid, policy, source):
        st, body = admin(self.sock, "POST", "/v1/sandboxes",
                         {"id": sid, "policy": policy, "source": source})
        if st in (200, 201):
            self.addCleanup(admin, self.sock, "DELETE", "/v1/sandboxes/" + sid)
        return st, body

    def rows(self, path):
        return [(r["sandbox"], r["host"], r["decision"], r["reason"])
                for r in self.gw.wait_audit(path=path)]

    # --------------------------------------------------- credentials

    def test_http_basic_of_tokenless_sandbox_refused(self):
        """docs/policy.md `sandboxes`: token_sha256 (default none) is what
        `Proxy-Authorization: Basic id:token` is checked against; a sandbox
        without one can only be identified by source. protocols.md: a
        Proxy-Authorization with an unknown id or a wrong token is 407
        proxy-auth-failed. Sent from 127.0.0.1 (no sandbox's source):
        `Basic sc:` and `Basic sc:anything` for the source-only sandbox sc."""
        for i, pw in enumerate(("", "anything")):
            path = "/tokless-http-%d-%d" % (PID, i)
            r = self.get("b.test", "127.0.0.1", path, T.basic("sc", pw))
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 407, (pw, r, self.reached(path)))
            self.assertEqual(self.reached(path), [])

    def test_socks_both_methods_wrong_pass_from_owned_source(self):
        """docs/protocols.md SOCKS5: offered both no-auth and user/pass, the
        gateway picks user/pass, and a wrong pair fails and closes -- the
        source address (sandbox sa's) does not stand in for it. Also: another
        sandbox's right pair from sa's address is decided as that sandbox
        (SPEC §4: credentials present decide)."""
        c, steps = socks_connect(self.sport, "a.test", self.oport,
                                 methods=(0, 2), user="sa", pw="wrong",
                                 source="127.0.0.11")
        self.addCleanup(c.close)
        self.assertEqual(steps["method"], 2, steps)
        self.assertNotEqual(steps["auth"], 0, steps)
        self.assertTrue(c.closed_by_peer(5), steps)
        # sb's credentials from sa's address: sb's policy (b.test), not sa's
        c, steps = socks_connect(self.sport, "a.test", self.oport,
                                 methods=(0, 2), user="sb", pw=TOK_B,
                                 source="127.0.0.11")
        self.addCleanup(c.close)
        self.assertEqual((steps["auth"], steps["reply"]), (0, 2), steps)
        c, steps = socks_connect(self.sport, "b.test", self.oport,
                                 methods=(0, 2), user="sb", pw=TOK_B,
                                 source="127.0.0.11")
        self.addCleanup(c.close)
        self.assertEqual((steps["auth"], steps["reply"]), (0, 0), steps)

    # --------------------------------------------------- registration

    def test_register_static_sandbox_source_refused(self):
        """docs/policy.md `sandboxes`: "A source prefix may belong to one
        sandbox only." POST /v1/sandboxes with the source of the static
        sandbox sa (127.0.0.11) under another policy (pol-b); then a request
        from 127.0.0.11 to b.test (pol-b allows it, sa's pol-a does not)."""
        sid = "dyn-static-%d" % PID
        st, body = self.register(sid, "pol-b", "127.0.0.11")
        path = "/static-src-%d" % PID
        r = self.get("b.test", "127.0.0.11", path)
        self.assertEqual(st, 409, "registration of sa's source accepted (%s "
            "%r); then b.test from sa's address: %r, origin saw %r, rows %r"
            % (st, body, r and r.status, self.reached(path), self.rows(path)))

    def test_register_mapped_form_of_registered_source_refused(self):
        """docs/admin-api.md: 409 when a registered sandbox has the source;
        SPEC §4: IPv4-mapped IPv6 addresses are the IPv4 address everywhere.
        Register d1 (pol-a) at 127.0.0.21, then d2 (pol-b) at
        ::ffff:127.0.0.21; then a request from 127.0.0.21 to b.test."""
        st1, b1 = self.register("dm1-%d" % PID, "pol-a", "127.0.0.21")
        self.assertIn(st1, (200, 201), b1)
        st2, b2 = self.register("dm2-%d" % PID, "pol-b", "::ffff:127.0.0.21")
        path = "/mapped-dup-%d" % PID
        r = self.get("b.test", "127.0.0.21", path)
        self.assertEqual(st2, 409, "second registration accepted (%s %r); "
            "b.test from 127.0.0.21: %r, origin saw %r, rows %r" % (st2, b2,
            r and r.status, self.reached(path), self.rows(path)))

    def test_policy_check_same_source_in_two_forms(self):
        """docs/policy.md: "A source prefix may belong to one sandbox only";
        SPEC §4: IPv4-mapped IPv6 is the IPv4 address everywhere. Two static
        sandboxes, one at 127.0.0.15/32, one at ::ffff:127.0.0.15/128:
        `policy check` must refuse the file."""
        d = os.path.join(self.td.path, "pc-%d" % PID)
        os.makedirs(os.path.join(d, "policies"))
        with open(os.path.join(d, "policies", "p.yaml"), "w") as f:
            f.write(T.to_yaml({
                "sandboxes": [
                    {"id": "one", "policy": "pa", "source": ["127.0.0.15/32"]},
                    {"id": "two", "policy": "pb",
                     "source": ["::ffff:127.0.0.15/128"]}],
                "policies": [{"name": "pa"}, {"name": "pb"}]}) + "\n")
        cfg = os.path.join(d, "sg.yaml")
        with open(cfg, "w") as f:
            f.write("policies: [%s]\nstate_dir: %s\n" % (
                os.path.join(d, "policies"), os.path.join(d, "var")))
        r = T.run_sandgate("policy", "check", "-c", cfg)
        self.assertNotEqual(r.returncode, 0, (r.stdout, r.stderr))
        self.assertIn("already claimed", r.stdout + r.stderr)


# =====================================================================
# The transparent listener
# =====================================================================

# Inside the sandbox: connect to host:port, send each chunk in turn (\x00
# separates them), after each read for up to `wait` s; print what came back.
SEQ_CLIENT = r"""
import json, socket, sys, time
host, port, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
chunks = [bytes.fromhex(x) for x in sys.argv[4:]]
out = {"answers": [], "end": None}
s = socket.create_connection((host, port), timeout=wait)
try:
    for c in chunks:
        s.sendall(c)
        got = b""
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                out["end"] = "eof"
                break
            got += b
            if b"\r\n\r\n" in got:
                hl = got.split(b"\r\n\r\n", 1)
                cl = [l for l in hl[0].split(b"\r\n")
                      if l.lower().startswith(b"content-length:")]
                if cl and len(hl[1]) >= int(cl[0].split(b":")[1]):
                    break
        out["answers"].append(got.decode("latin-1"))
        if out["end"]:
            break
except ConnectionResetError:
    out["end"] = "reset"
print(json.dumps(out))
"""


class TransparentProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import test_transparent as TT
        cls.TT = TT
        d = TT.class_topology(cls, "sgt-ident-")
        topo = cls.topo
        n = topo.net_ip
        cls.main_ip, cls.evil_ip = n[2], n[3]
        cls.testca, crt, key = H.make_ca_and_leaf(d,
            ["allowed.test", "intercept.test", "other.test"])
        spec = [
            {"id": "http-main", "kind": "http", "host": n[2], "port": 80},
            {"id": "https-main", "kind": "https", "host": n[2], "port": 443,
             "cert": crt, "key": key},
            {"id": "rec-main", "kind": "record", "host": n[2], "port": 2323},
            {"id": "http-evil", "kind": "http", "host": n[3], "port": 80},
        ]
        cls.origins, cls.status_path = H.start_origins(d, topo.net,
            TT.ORIGINS, spec, "origins", cls.addClassCleanup)
        recs = [("allowed.test", n[2]), ("intercept.test", n[2]),
                ("opq.test", n[2]), ("forbidden.test", n[3]),
                ("other.test", n[3])]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)
        cls.tport = TT.TransparentTest.free_gw_port.__func__(cls)
        cls.dport = TT.TransparentTest.free_gw_port.__func__(cls, udp=True,
            avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)
        cls.pol = "tp"
        policy = {
            "policies": [{
                "name": cls.pol,
                "allow": [
                    {"host": "allowed.test", "ports": [80, 443]},       # 0
                    {"host": "intercept.test", "ports": [443],          # 1
                     "tls": "intercept", "paths": ["/ok/*"]},
                    {"host": "opq.test", "ports": [2323], "opaque": True},  # 2
                    {"host": "other.test", "ports": [80]},              # 3
                ],
                "deny": [{"host": "forbidden.test"}],
                "allow_private": ["198.19.0.0/16"],
            }],
        }
        cls.sock = os.path.join(d, "adm.sock")
        cls.gw = T.Gateway(d, cls.dns, {"tp.yaml": policy}, extra={
            "listen": {"transparent": "%s:%d" % (topo.gw_ip, cls.tport),
                       "dns": "%s:%d" % (topo.gw_ip, cls.dport),
                       "admin": cls.sock},
            "upstream": {"ca_bundle": cls.testca},
        })
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gwca = cls.gw.wait_admin(cls.sock)
        if not T.wait_tcp(topo.gw_ip, cls.tport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("transparent listener not up:\n" +
                cls.gw.log_tail())
        cls.sid = "main-%d" % PID
        st, body = admin(cls.sock, "POST", "/v1/sandboxes",
            {"id": cls.sid, "policy": cls.pol, "source": topo.sb_ip})
        if st not in (200, 201):
            raise RuntimeError("register: %s %r" % (st, body))

    # ------------------------------------------------------------ helpers

    def status(self, oid):
        for _ in range(50):
            try:
                with open(self.status_path) as f:
                    return json.load(f)["servers"][oid]
            except (OSError, ValueError):
                time.sleep(0.02)
        raise AssertionError("cannot read the origins' status")

    def lines(self, oid):
        time.sleep(0.2)
        return self.status(oid).get("request_lines", [])

    def seq(self, host, port, chunks, wait=2.0):
        args = [c.encode("latin-1").hex() if isinstance(c, str) else c.hex()
                for c in chunks]
        r = self.TT.run(self.nsx + [self.TT.PY, "-c", SEQ_CLIENT, host,
            str(port), str(wait)] + args, timeout=wait * len(chunks) + 20)
        return json.loads(r.stdout.decode())

    def rows(self, **m):
        return [(r["sandbox"], r["kind"], r["host"], r["ip"], r["port"],
                 r["path"], r["decision"], r["reason"])
                for r in self.gw.audit_rows(**m)][-12:]

    def sb_curl(self, url, args=()):
        return H.curl(url, prefix=self.nsx, args=list(args), tmp=self.td.path,
            timeout=15)

    # ------------------------------------------------------------ probes

    def test_keepalive_second_host_denied_name(self):
        """docs/protocols.md "First bytes": HTTP in a tunnel -- the
        transparent listener's included -- must carry a Host equal to the
        tunnel's name in *every* request (host-mismatch otherwise); SPEC §5
        Transparent: the name must be allowed. Sent to main_ip:80 (an
        address of allowed.test): `GET /ka1` Host allowed.test, then on the
        same connection `GET /ka2` Host forbidden.test (a deny rule)."""
        tag = "ka-%d" % PID
        out = self.seq(self.main_ip, 80, [
            "GET /%s-1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % tag,
            "GET /%s-2 HTTP/1.1\r\nHost: forbidden.test\r\n\r\n" % tag])
        main = [l for l in self.lines("http-main") if tag in l]
        evil = [l for l in self.lines("http-evil") if tag in l]
        self.assertTrue(main and "-1" in main[0], (out, main))
        self.assertEqual((main[1:], evil), ([], []), (out, self.rows()))

    def test_h2_prior_knowledge_connects_nowhere_without_a_name(self):
        """SPEC §5 Transparent: the first bytes tell the name (SNI, Host);
        SPEC §4: HTTP must carry a Host equal to the tunnel's name; the
        gateway connects onward only after the first bytes passed. An
        HTTP/2 prior-knowledge preface (`PRI * HTTP/2.0`, which
        protocols.md counts as HTTP) carries no Host: to main_ip:80 after
        the sandbox resolved allowed.test; the origin must see nothing."""
        H.dig(["allowed.test"], prefix=self.nsx)
        before = self.status("http-main")["conn_count"]
        out = self.seq(self.main_ip, 80,
            [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex(
                "000000040000000000")])
        time.sleep(0.3)
        st = self.status("http-main")
        self.assertEqual(st["conn_count"], before, (out, st["request_lines"]
            [-3:], self.rows()))

    def test_intercepted_sni_with_other_host_inside(self):
        """docs/protocols.md "First bytes": inside a tunnel every request's
        Host must equal the tunnel's name (host-mismatch); Transparent: with
        the address of an intercepted name, the requests inside are decided
        one by one. SNI intercept.test (paths /ok/* only) to main_ip:443,
        inside `GET /fronted-...` with Host allowed.test (HTTP/1.1 and h2)."""
        H.dig(["intercept.test"], prefix=self.nsx)
        got = []
        for v in ("--http1.1", "--http2"):
            path = "/fronted-%d%s" % (PID, v.replace("-", ""))
            r = self.sb_curl("https://intercept.test" + path,
                ["--cacert", self.gwca, v, "-H", "Host: allowed.test"])
            seen = [l for l in self.lines("https-main") if path in l]
            got.append((v, r.status, r.header("X-Sandgate-Reason"), seen))
        self.assertEqual([g[3] for g in got], [[], []], (got, self.rows()))

    def test_address_memory_of_removed_sandbox(self):
        """docs/protocols.md DNS "Address memory": per sandbox, the addresses
        handed out; Transparent: without a name the address must be one the
        DNS listener handed *this* sandbox. SPEC §9: everything a sandbox
        made is removed when it ends. Sandbox A (policy tp) resolves
        opq.test (opaque rule, 2323); A is removed (DELETE) and B registered
        at the same address; B sends bare bytes to opq.test's address
        without asking DNS. Control first: a fresh sandbox is refused."""
        ip, tag = self.main_ip, "mem-%d" % PID
        sa, sb0, sb = "mema-%d" % PID, "mem0-%d" % PID, "memb-%d" % PID
        src = self.topo.sb_ip
        admin(self.sock, "DELETE", "/v1/sandboxes/" + self.sid)
        self.addCleanup(admin, self.sock, "POST", "/v1/sandboxes",
            {"id": self.sid, "policy": self.pol, "source": src})
        try:
            def reg(sid):
                st, b = admin(self.sock, "POST", "/v1/sandboxes",
                              {"id": sid, "policy": self.pol, "source": src})
                self.assertIn(st, (200, 201), b)

            def probe(label):
                before = self.status("rec-main")["conn_count"]
                self.seq(ip, 2323, ["%s-%s\n" % (tag, label)], wait=1.0)
                time.sleep(0.3)
                return self.status("rec-main")["conn_count"] - before

            reg(sb0)
            control = probe("control")
            admin(self.sock, "DELETE", "/v1/sandboxes/" + sb0)
            reg(sa)
            r = H.dig(["opq.test"], prefix=self.nsx)
            self.assertEqual(r.addrs(), [ip], r)
            a_ok = probe("a")
            admin(self.sock, "DELETE", "/v1/sandboxes/" + sa)
            reg(sb)
            b_got = probe("b")
            admin(self.sock, "DELETE", "/v1/sandboxes/" + sb)
        finally:
            for s in (sa, sb0, sb):
                admin(self.sock, "DELETE", "/v1/sandboxes/" + s)
        self.assertEqual((control, a_ok), (0, 1), "setup")
        self.assertEqual(b_got, 0, "B reached opq.test's address on A's DNS "
            "answer: %r" % self.rows(port=2323))


if __name__ == "__main__":
    T.require_binary()
    if os.geteuid() != 0:
        T.skip_file("needs root (network namespaces, nftables)")
    import test_transparent as _TT
    _TT.preflight()
    unittest.main(verbosity=2)
