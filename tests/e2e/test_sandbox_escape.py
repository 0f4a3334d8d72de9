#!/usr/bin/python3
"""
Escape tests (issue 7, point 7): from inside a `sandgate sandbox run` sandbox,
in both runtimes, everything but the gateway must fail, and every failure the
gateway decides must be in its audit log.

The picture: a gateway with wildcard transparent and DNS listeners; a "fake
internet" namespace on 198.19.B.0/24 and 2001:2:0:B::/64 reached through a veth
of the test's own, with an HTTPS origin (certificate from a test CA the gateway
trusts upstream), HTTP, TCP, UDP and UDP/53 listeners; listeners of the test on
the host (wildcard, 127.0.0.1, the fake-internet veth's host address, and once
the sandbox exists, its gateway address .1). One sandbox per runtime runs
data/escape_probe.py, which waits for the workspace's go.json (the targets),
runs its probes six at a time, prints JSON and waits for "done". Meanwhile the
test counts what every listener got and reads nftables counters of its own on
both sides (the probe's packets did leave the sandbox; nothing from it reached
the fake internet, no echo reply or neighbour advertisement went back); then it
checks the probes' results and the audit rows. Forwarding is switched on for
the sandbox's and the fake internet's veths, as on a host that routes: the
gateway's forward chain, not net.ipv4.ip_forward, must keep packets in.

ICMP: the sandbox has no CAP_NET_RAW, so the probe uses ICMP datagram
("ping") sockets, which the test opens in the sandbox's namespace
(net.ipv4.ping_group_range) so that the network, not a missing socket, is what
stops them. Echo requests to the gateway address .1 are dropped too, by design:
a sandbox gets no ICMP at all. Root only (exit 77 otherwise).
"""

import json
import os
import random
import shutil
import queue
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402
from escape_listeners import TcpCount, UdpCount  # noqa: E402

IP = "/usr/sbin/ip"
NFT = "/usr/sbin/nft"
PY = "/usr/bin/python3"
PROBE = os.path.join(HERE, "data", "escape_probe.py")
LISTENERS = os.path.join(HERE, "data", "escape_listeners.py")
RUNTIMES = {"crun": "/usr/bin/crun", "runsc": "/usr/bin/runsc"}
SFX = "%04x" % random.getrandbits(16)
INET_NS = "sgesc-inet-" + SFX
INET_VETH = "tesc" + SFX
TABLE = "sgt_esc_" + SFX


def sh(*argv, check=True, input=None):
    r = subprocess.run(list(argv), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=T.clean_env(), timeout=60,
        input=input)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), r.stdout))
    return r


def veth_name(sid):
    """The launcher's host-side veth name: sg + FNV-1a of the id."""
    h = 2166136261
    for c in sid.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return "sg%08x" % h


def pick_octet():
    taken = sh(IP, "-4", "-o", "addr").stdout + sh(IP, "-4", "route").stdout
    for _ in range(200):
        o = random.randint(1, 254)
        if "198.19.%d." % o not in taken:
            return o
    raise RuntimeError("no free 198.19.x.0/24")


def nft_counters(ns=None):
    """{name: packets} of the test's table (in namespace ns)."""
    pre = [IP, "netns", "exec", ns] if ns else []
    r = sh(*(pre + [NFT, "-j", "list", "table", "inet", TABLE]))
    out = {}
    for o in json.loads(r.stdout)["nftables"]:
        if "counter" in o and "name" in o["counter"]:
            out[o["counter"]["name"]] = o["counter"]["packets"]
    return out


def audit_has(rows, **match):
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


class SandboxEscapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-escape-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.chmod(d, 0o755)
        b = pick_octet()
        cls.inet_host = "198.19.%d.1" % b
        cls.origin = "198.19.%d.2" % b
        cls.bare = "198.19.%d.3" % b   # no name resolves to it
        cls.inet_host6 = "2001:2:0:%x::1" % b
        cls.origin6 = "2001:2:0:%x::2" % b
        cls.fake_internet(d)
        cls.dns = T.Dnsmasq(d, [("allowed.test", cls.origin),
            ("denied.test", cls.origin), ("v6.test", cls.origin6)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        tport = T.free_port("0.0.0.0")
        dport = T.free_port("0.0.0.0", udp_too=True)
        policy = ("policies:\n"
            "  - name: esc\n"
            "    allow:\n"
            "      - host: allowed.test\n"
            "        ports: [443]\n"
            "        tls: intercept\n"
            "      - host: v6.test\n"
            "        ports: [80]\n"
            "    deny:\n"
            "      - host: denied.test\n"
            "    allow_private: [%s/32, %s/128]\n" % (cls.origin, cls.origin6))
        cls.gw = T.Gateway(d, cls.dns, {"esc.yaml": policy}, extra={
            "listen": {"admin": cls.sock,
                "transparent": "0.0.0.0:%d" % tport,
                "dns": "0.0.0.0:%d" % dport},
            "upstream": {"ca_bundle": cls.testca}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)
        cls.tport = tport
        # the host's own services, which no sandbox may reach
        cls.host_tcp = {"wild": TcpCount("0.0.0.0", 0),
            "lo": TcpCount("127.0.0.1", 0),
            "hostaddr": TcpCount(cls.inet_host, 0),
            "wild6": TcpCount("::", 0)}
        cls.host_udp = {"wild": UdpCount("0.0.0.0", 0),
            "wild6": UdpCount("::", 0)}
        for s in list(cls.host_tcp.values()) + list(cls.host_udp.values()):
            cls.addClassCleanup(s.close)
        cls.host_counters()

    @classmethod
    def fake_internet(cls, d):
        sh(IP, "netns", "add", INET_NS)
        cls.addClassCleanup(sh, IP, "netns", "del", INET_NS, check=False)
        sh(IP, "link", "add", INET_VETH, "type", "veth", "peer", "name",
            "eth0", "netns", INET_NS)
        cls.addClassCleanup(sh, IP, "link", "del", INET_VETH, check=False)
        sh(IP, "addr", "add", cls.inet_host + "/24", "dev", INET_VETH)
        sh(IP, "addr", "add", cls.inet_host6 + "/64", "dev", INET_VETH, "nodad")
        sh(IP, "link", "set", INET_VETH, "up")
        sh("/usr/sbin/sysctl", "-qw", "net.ipv4.conf.%s.forwarding=1" % INET_VETH)
        n = [IP, "-n", INET_NS]
        sh(*(n + ["addr", "add", cls.origin + "/24", "dev", "eth0"]))
        sh(*(n + ["addr", "add", cls.bare + "/24", "dev", "eth0"]))
        sh(*(n + ["addr", "add", cls.origin6 + "/64", "dev", "eth0", "nodad"]))
        sh(*(n + ["link", "set", "eth0", "up"]))
        sh(*(n + ["link", "set", "lo", "up"]))
        # a way back to every sandbox subnet, so that only the gateway's
        # rules (not a missing route) stop a forwarded packet's answer
        sh(*(n + ["route", "add", "198.18.0.0/15", "via", cls.inet_host]))
        # what reaches the fake internet from anyone but the host itself
        sh(IP, "netns", "exec", INET_NS, NFT, "-f", "-", input=(
            "table inet %s {\n"
            " counter v4_foreign {}\n counter v6_foreign {}\n"
            " counter echo4 {}\n counter echo6 {}\n"
            " chain pre { type filter hook prerouting priority -400;"
            " policy accept;\n"
            "  iifname \"eth0\" ip saddr != %s counter name v4_foreign\n"
            "  iifname \"eth0\" ip6 saddr != { %s, fe80::/10, :: }"
            " counter name v6_foreign\n"
            "  icmp type echo-request counter name echo4\n"
            "  icmpv6 type echo-request counter name echo6\n"
            " }\n}\n" % (TABLE, cls.inet_host, cls.inet_host6)))
        cls.testca, crt, key = H.make_ca_and_leaf(d,
            ["allowed.test", "denied.test"])
        spec = [
            {"id": "https", "kind": "https", "host": cls.origin, "port": 443,
             "cert": crt, "key": key},
            {"id": "http", "kind": "http", "host": cls.origin, "port": 80},
            {"id": "bare_http", "kind": "http", "host": cls.bare, "port": 80},
            {"id": "silent", "kind": "tcp", "host": cls.bare, "port": 2323},
            {"id": "udp", "kind": "udp", "host": cls.origin, "port": 0},
            {"id": "dns", "kind": "udp", "host": cls.origin, "port": 53},
            {"id": "tcp6", "kind": "tcp", "host": cls.origin6, "port": 80},
            {"id": "udp6", "kind": "udp", "host": cls.origin6, "port": 0},
        ]
        # port 0 is fine for our own tcp/udp listeners, but the probe needs
        # the numbers: pick them here
        for s in spec:
            if s["port"] == 0:
                s["port"] = random.randint(20000, 29999)
        ports = {s["id"]: s["port"] for s in spec}
        cls.inet_udp_port, cls.inet_udp6_port = ports["udp"], ports["udp6"]
        spec_path = os.path.join(d, "inet.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        cls.status_path = os.path.join(d, "inet.status")
        cls.inet = T.Proc([IP, "netns", "exec", INET_NS, PY, LISTENERS,
            spec_path, cls.status_path], os.path.join(d, "inet.log"))
        cls.addClassCleanup(cls.inet.stop)
        deadline = time.time() + 15 * T.SLOW
        while not os.path.exists(cls.status_path):
            if not cls.inet.alive() or time.time() > deadline:
                raise RuntimeError("fake internet did not start:\n" +
                    cls.inet.log_tail())
            time.sleep(0.05)
        # control: without a sandbox in the way, the fake internet answers
        # pings and takes connections over both families
        for host, port in ((cls.origin, 80), (cls.origin6, 80)):
            socket.create_connection((host, port), 5).close()
        r = sh(PY, "-c", "import socket,sys; s=socket.socket(socket.AF_INET,"
            "socket.SOCK_RAW,socket.IPPROTO_ICMP); s.settimeout(3);"
            "s.sendto(b'\\x08\\x00\\xf7\\xfe\\x00\\x01\\x00\\x00',(sys.argv[1],0));"
            "b=s.recv(100); print(b[20])", cls.origin)
        if r.stdout.strip() != "0":
            raise RuntimeError("the fake internet does not answer ping: " +
                r.stdout)

    @classmethod
    def host_counters(cls):
        """Counters of what each sandbox's veth sent, in a table of our own."""
        rules = []
        cls.sids = {rt: "esc-%s-%s" % (rt, SFX) for rt in RUNTIMES}
        for rt, sid in cls.sids.items():
            v = veth_name(sid)
            for c, match in (
                    ("icmp4", "icmp type echo-request"),
                    ("icmp6", "icmpv6 type echo-request"),
                    ("udp", "udp dport != 53"),
                    ("ip6", "meta nfproto ipv6 meta l4proto { tcp, udp }"),
                    ("ns", "icmpv6 type nd-neighbor-solicit")):
                rules.append(" counter %s_%s {}\n" % (c, rt))
                rules.append(" chain pre_%s_%s { type filter hook prerouting"
                    " priority -400; policy accept; iifname \"%s\" %s"
                    " counter name %s_%s; }\n" % (c, rt, v, match, c, rt))
            for c, match in (("reply4", "icmp type echo-reply"),
                    ("reply6", "icmpv6 type echo-reply"),
                    ("na", "icmpv6 type nd-neighbor-advert")):
                rules.append(" counter %s_%s {}\n" % (c, rt))
                rules.append(" chain out_%s_%s { type filter hook output"
                    " priority -400; policy accept; oifname \"%s\" %s"
                    " counter name %s_%s; }\n" % (c, rt, v, match, c, rt))
        sh(NFT, "-f", "-", input="table inet %s {\n%s}\n" % (TABLE,
            "".join(rules)))
        cls.addClassCleanup(sh, NFT, "delete", "table", "inet", TABLE,
            check=False)

    # ------------------------------------------------------------ helpers

    def inet_status(self):
        for _ in range(50):
            try:
                with open(self.status_path) as f:
                    return json.load(f)["servers"]
            except (OSError, ValueError):
                time.sleep(0.02)
        raise AssertionError("cannot read the fake internet's status")

    @staticmethod
    def pump(f, kind, q):
        for line in f:
            q.put((kind, line))

    @staticmethod
    def reap(p):
        """A launcher this test gave up on: SIGTERM (it cleans up), then KILL."""
        if p.poll() is None:
            p.terminate()
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()

    def launch(self, rt, sid, ws):
        """Start the sandbox; wait for its network; give the probe its targets."""
        shutil.copy(PROBE, os.path.join(ws, "escape_probe.py"))
        p = subprocess.Popen([T.BIN, "sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "esc", "--runtime", rt, "--id", sid, "--workspace", ws,
            "--", "python3", "/workspace/escape_probe.py",
            "/workspace/go.json"], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=T.clean_env())
        self.addCleanup(self.reap, p)
        self.lines = queue.Queue()
        self.text = []
        self.readers = [threading.Thread(target=self.pump, args=(f, k,
            self.lines), daemon=True) for f, k in ((p.stdout, "out"),
            (p.stderr, "err"))]
        for t in self.readers:
            t.start()
        v = veth_name(sid)
        ns = "sandgate-" + sid
        gw = None
        deadline = time.time() + 60 * T.SLOW
        while gw is None and time.time() < deadline:
            if p.poll() is not None:
                time.sleep(0.2)
                while not self.lines.empty():
                    self.text.append(self.lines.get()[1])
                self.fail("the launcher exited early (%s): %s" % (
                    p.returncode, "".join(self.text)))
            r = sh(IP, "-o", "-4", "addr", "show", "dev", v, check=False)
            for line in r.stdout.splitlines():
                f = line.split()
                if "inet" in f:
                    gw = f[f.index("inet") + 1].split("/")[0]
            if gw is None:
                time.sleep(0.05)
        self.assertIsNotNone(gw, "no address on %s" % v)
        # the gateway address's own listeners, made now that it exists
        self.gw_tcp = TcpCount(gw, 0)
        self.gw_udp = UdpCount(gw, 0)
        self.addCleanup(self.gw_tcp.close)
        self.addCleanup(self.gw_udp.close)
        ll = None
        deadline = time.time() + 5
        while ll is None and time.time() < deadline:
            r = sh(IP, "-o", "-6", "addr", "show", "dev", v, "scope", "link",
                check=False)
            for line in r.stdout.splitlines():
                f = line.split()
                if "inet6" in f:
                    ll = f[f.index("inet6") + 1].split("/")[0]
            if ll is None:
                time.sleep(0.1)
        # When the kernel gives the sandbox's eth0 a link-local address, wait
        # until it is usable (DAD done), so that the link-local probes really
        # send their packets and the host's rules are what stops them.
        self.sb_ll = False
        deadline = time.time() + 5
        while time.time() < deadline:
            a = sh(IP, "-n", ns, "-6", "addr", "show", "dev", "eth0", "scope",
                "link", check=False).stdout
            self.sb_ll = "inet6" in a
            if "tentative" not in a:
                break
            time.sleep(0.1)
        # host-side inspection of the sandbox's namespace
        self.ns_v6 = {
            "route": sh(IP, "-n", ns, "-6", "route", "show", "table", "all",
                check=False).stdout,
            "addr": sh(IP, "-n", ns, "-6", "addr", check=False).stdout,
            "route4": sh(IP, "-n", ns, "-4", "route", check=False).stdout}
        # A host that forwards (a Docker host does): forwarding on for the
        # sandbox's veth (it goes with the veth), so the nftables forward
        # chain, not net.ipv4.ip_forward, is what keeps packets in.
        sh("/usr/sbin/sysctl", "-qw", "net.ipv4.conf.%s.forwarding=1" % v)
        # ICMP datagram sockets for every gid: the network must stop pings
        sh(IP, "netns", "exec", ns, "/usr/sbin/sysctl", "-qw",
            "net.ipv4.ping_group_range=0 2147483647")
        a = [int(x) for x in gw.split(".")]
        go = {"gw": gw, "gw_ll": ll or "fe80::1", "origin": self.origin,
            "bare": self.bare,
            "origin6": self.origin6, "inet_host": self.inet_host,
            "bcast": "%d.%d.%d.%d" % (a[0], a[1], a[2], a[3] + 2),
            "tcp": {"gw": self.gw_tcp.port, "transparent": self.tport,
                "wild": self.host_tcp["wild"].port,
                "lo": self.host_tcp["lo"].port,
                "hostaddr": self.host_tcp["hostaddr"].port,
                "wild6": self.host_tcp["wild6"].port},
            "udp": {"gw": self.gw_udp.port, "wild": self.host_udp["wild"].port,
                "wild6": self.host_udp["wild6"].port,
                "inet": self.inet_udp_port, "inet6": self.inet_udp6_port}}
        tmp = os.path.join(ws, "go.json.tmp")
        with open(tmp, "w") as f:
            json.dump(go, f)
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(ws, "go.json"))
        # The probe prints its JSON, then waits for go.json's "done" twin:
        # the test takes its counts while the sandbox and its rules still
        # exist (teardown is checked on its own).
        deadline = time.time() + 120 * T.SLOW
        line = None
        while line is None and time.time() < deadline:
            try:
                kind, text = self.lines.get(timeout=1)
            except queue.Empty:
                if p.poll() is not None and self.lines.empty():
                    break
                continue
            if kind == "out" and text.startswith("{"):
                line = text
        if line is None:
            self.finish(p, ws)
            self.fail("no JSON from the probe (exit %s): %s\n%s" % (
                p.returncode, "".join(self.text), self.gw.log_tail()))
        return go, json.loads(line), p

    def finish(self, p, ws):
        """Let the probe exit; the launcher must exit 0 and clean up."""
        with open(os.path.join(ws, "done"), "w"):
            pass
        try:
            p.wait(60 * T.SLOW)
        except subprocess.TimeoutExpired:
            self.reap(p)
        for t in self.readers:
            t.join(10)
        while not self.lines.empty():
            self.text.append(self.lines.get()[1])
        self.assertEqual(p.returncode, 0, "".join(self.text)[-4000:] +
            self.gw.log_tail())

    # ------------------------------------------------------------ the test

    def escape(self, rt):
        sid = self.sids[rt]
        ws = self.td.join("ws-" + rt)
        os.makedirs(ws)
        os.chmod(ws, 0o755)
        st0 = self.inet_status()
        inet0 = {k: v["conn_count"] for k, v in st0.items()}
        lines0 = len(st0["https"].get("request_lines", []))
        fi0 = nft_counters(INET_NS)
        hc0 = nft_counters()
        host0 = {k: s.status()["conn_count"] for k, s in
            list(self.host_tcp.items()) + [("u" + k, s) for k, s in
            self.host_udp.items()]}
        go, r, p = self.launch(rt, sid, ws)
        time.sleep(0.5)  # let the listeners' status catch up
        inet = self.inet_status()
        fi = nft_counters(INET_NS)
        hc = nft_counters()
        host = {k: s.status()["conn_count"] for k, s in
            list(self.host_tcp.items()) + [("u" + k, s) for k, s in
            self.host_udp.items()]}
        gw_seen = (self.gw_tcp.status(), self.gw_udp.status())
        self.finish(p, ws)
        # the sandbox is gone: did anything slip out while it was torn down?
        time.sleep(0.3)
        late = {"fake internet": (fi, nft_counters(INET_NS)),
            "host": (hc, nft_counters())}
        for k, (a, b) in late.items():
            if a != b:
                print("  %s: %s counters moved during teardown: %s" % (rt, k,
                    {c: b[c] - a[c] for c in b if b[c] != a.get(c)}),
                    file=sys.stderr)
        gw, org, ih = go["gw"], self.origin, self.inet_host
        dump = json.dumps(r, indent=1)[:6000]
        # what ICMP and IPv6 looked like from inside, for the log
        for k in ("ping_inet", "ping_gw", "v6_tcp_origin", "v6_tcp_gw_ll",
                "v6_udp_origin", "v6_ping_origin", "v6_ping_gw_ll"):
            print("  %s %s: %s" % (rt, k, json.dumps(r[k])[:200]),
                file=sys.stderr)

        with self.subTest("allowed HTTPS name: curl and urllib"):
            c = r["https_curl"]
            self.assertEqual(c["rc"], 0, c)
            self.assertTrue(c["out"].endswith("HTTP=200"), c)
            self.assertEqual(json.loads(c["out"].rsplit("\n", 1)[0])["host"],
                "allowed.test", c)
            u = r["https_urllib"]
            self.assertEqual(u.get("status"), 200, u)
            self.assertEqual(json.loads(u["body"])["path"], "/escape-urllib", u)

        with self.subTest("denied name: 403 + reason, TLS alert"):
            h = r["http_denied"]
            self.assertEqual(h.get("status"), 403, h)
            self.assertEqual(h.get("reason"), "policy-deny", h)
            t = r["https_denied_py"]
            self.assertFalse(t.get("handshake"), t)
            self.assertIn("ACCESS_DENIED", t.get("msg", ""), t)
            c = r["https_denied_curl"]
            self.assertEqual(c["rc"], 35, c)
            self.assertIn("access denied", c["err"], c)

        with self.subTest("bare IP nobody resolved"):
            h = r["bare_ip_http"]
            self.assertEqual(h.get("status"), 403, h)
            self.assertTrue(h.get("reason"), h)
            s = r["bare_ip_silent"]
            self.assertNotIn("status", s)
            self.assertEqual(s.get("raw", ""), "", s)

        with self.subTest("the host's own addresses and loopback services"):
            for k in ("host_gw_bound", "host_gw_wild", "host_addr_bound",
                    "host_addr_wild"):
                # redirected to the transparent listener, which refuses
                self.assertEqual(r[k].get("status"), 403, (k, r[k]))
            # the transparent listener itself, not redirected: refused too
            self.assertEqual(r["direct_transparent"].get("status"), 403,
                r["direct_transparent"])
            for k in ("host_lo_bound", "host_lo_wild"):
                # the sandbox's own loopback: nothing listens there
                self.assertFalse(r[k]["connected"], (k, r[k]))
                self.assertEqual(r[k].get("errno"), 111, (k, r[k]))

        with self.subTest("metadata address"):
            self.assertEqual(r["metadata"].get("status"), 403, r["metadata"])
            self.assertTrue(r["metadata"].get("reason"), r["metadata"])

        with self.subTest("UDP was sent"):
            for k in ("udp_inet", "udp_gw_bound", "udp_gw_wild",
                    "udp_host_addr", "udp_bcast", "udp_subnet_bcast"):
                self.assertEqual(r[k].get("sent"), 3, (k, r[k]))

        with self.subTest("DNS: denied name NXDOMAIN + EDE; other servers"):
            dg = H.DigResult(r["dns_denied"]["rc"], r["dns_denied"]["out"], "")
            self.assertEqual(dg.status, "NXDOMAIN", dg)
            self.assertIsNotNone(dg.ede, dg)
            self.assertEqual(dg.ede[0], 15, dg)
            self.assertEqual(dg.answers, [], dg)
            self.assertIn("policy esc", dg.ede[2] or "", dg)
            self.assertIn("policy-deny", dg.ede[2] or "", dg)
            # a query to another server is answered by the gateway
            de = H.DigResult(r["dns_elsewhere"]["rc"],
                r["dns_elsewhere"]["out"], "")
            self.assertEqual((de.status, de.addrs()), ("NOERROR", [org]), de)

        with self.subTest("ICMP: nothing comes back"):
            for k in ("ping_inet", "ping_host_addr", "ping_gw"):
                self.assertEqual(r[k]["replies"], 0, (k, r[k]))
            if rt == "crun":
                # the kernel's ping sockets work in the sandbox: the probes
                # really sent echo requests, and the network ate them
                for k in ("ping_inet", "ping_host_addr", "ping_gw"):
                    self.assertNotIn("socket", r[k], (k, r[k]))
                    self.assertEqual(r[k]["sent"], 3, (k, r[k]))

        with self.subTest("IPv6: no address, no route, nothing reached"):
            self.assertNotIn("global", self.ns_v6["addr"], self.ns_v6)
            self.assertNotIn("default", self.ns_v6["route"], self.ns_v6)
            self.assertNotIn("2001:", self.ns_v6["route"], self.ns_v6)
            if self.sb_ll:
                # the sandbox has a usable link-local address, so these were
                # really attempted (and never answered: no RST, no reply)
                self.assertTrue(r["v6_tcp_gw_ll"].get("error") in (
                    "TimeoutError", "timeout"), r["v6_tcp_gw_ll"])
                for k in ("v6_udp_gw_ll", "v6_udp_allnodes"):
                    self.assertEqual(r[k].get("sent"), 3, (k, r[k]))
            for k in ("v6_tcp_origin", "v6_tcp_gw_ll"):
                self.assertNotIn("status", r[k], (k, r[k]))
                self.assertEqual(r[k].get("raw", ""), "", (k, r[k]))
            self.assertNotEqual(r["v6_tcp_origin"].get("connected"), True,
                r["v6_tcp_origin"])
            self.assertNotEqual(r["v6_curl_name"]["rc"], 0, r["v6_curl_name"])
            for k in ("v6_ping_origin", "v6_ping_gw_ll"):
                self.assertEqual(r[k]["replies"], 0, (k, r[k]))

        with self.subTest("no listener saw anything"):
            for k in ("http", "bare_http", "silent", "udp", "dns", "tcp6",
                    "udp6"):
                self.assertEqual(inet[k]["conn_count"], inet0[k],
                    (k, inet[k], dump))
            # the allowed name went through the gateway, and only it: its
            # two requests, on one origin connection or two (the second
            # takes the first's from the worker's pool when it is there)
            self.assertIn(inet["https"]["conn_count"] - inet0["https"], (1, 2),
                inet["https"])
            self.assertEqual(sorted(inet["https"]["request_lines"][lines0:]),
                ["GET /escape-curl HTTP/1.1", "GET /escape-urllib HTTP/1.1"],
                inet["https"])
            self.assertEqual([x["conn_count"] for x in gw_seen], [0, 0],
                gw_seen)
            self.assertEqual(host, host0, dump)

        with self.subTest("nftables counters: sent, not delivered"):
            self.assertEqual(fi, fi0, "the fake internet got packets from "
                "elsewhere than the host")
            d = {k[:-len(rt) - 1]: hc[k] - hc0[k] for k in hc
                if k.endswith("_" + rt)}
            self.assertEqual((d["reply4"], d["reply6"], d["na"]), (0, 0, 0), d)
            # UDP probes: 6 targets x 3 datagrams left the sandbox
            self.assertGreaterEqual(d["udp"], 18, d)
            if self.sb_ll:
                # IPv6 link-local: the datagrams to all-nodes left the
                # sandbox; unicast to the host never did, because the host
                # answers no neighbour solicitation
                self.assertGreaterEqual(d["ip6"], 3, d)
                self.assertGreaterEqual(d["ns"], 1, d)
            # every echo request the probe could send left the sandbox: what
            # stopped it was the host, not the sandbox
            sent = sum(r[k]["sent"] for k in ("ping_inet", "ping_host_addr",
                "ping_gw"))
            self.assertGreaterEqual(d["icmp4"], sent, d)
            if rt == "crun":
                self.assertEqual(sent, 9, d)
            else:
                # gVisor with the host's network offers no ICMP sockets at all
                for k in ("ping_inet", "ping_host_addr", "ping_gw"):
                    self.assertTrue(r[k]["sent"] == 3 or "socket" in r[k],
                        (k, r[k]))

        with self.subTest("audit rows"):
            want = [
                ("allowed curl", dict(kind="transparent", host="allowed.test",
                    decision="allow", path="/escape-curl")),
                ("allowed urllib", dict(kind="transparent", host="allowed.test",
                    decision="allow", path="/escape-urllib")),
                ("denied http", dict(kind="transparent", host="denied.test",
                    decision="deny", port=80, status=403,
                    reason="policy-deny")),
                ("denied tls", dict(kind="transparent", host="denied.test",
                    decision="deny", port=443)),
                # a bare address is its own name: host holds it
                ("bare ip", dict(kind="transparent", host=self.bare, port=80,
                    decision="deny", status=403)),
                ("bare ip silent", dict(kind="transparent", host=self.bare,
                    port=2323, decision="deny")),
                ("gw bound", dict(kind="transparent", host=gw,
                    port=go["tcp"]["gw"], decision="deny", status=403)),
                ("gw wild", dict(kind="transparent", host=gw,
                    port=go["tcp"]["wild"], decision="deny", status=403)),
                ("host addr bound", dict(kind="transparent", host=ih,
                    port=go["tcp"]["hostaddr"], decision="deny", status=403)),
                ("host addr wild", dict(kind="transparent", host=ih,
                    port=go["tcp"]["wild"], decision="deny", status=403)),
                ("direct", dict(kind="transparent", host="allowed.test",
                    port=self.tport, decision="deny", status=403)),
                ("metadata", dict(kind="transparent", host="169.254.169.254",
                    port=80, decision="deny", status=403)),
                ("dns denied", dict(kind="dns", host="denied.test",
                    method="A", decision="deny", status=3,
                    rule="esc:deny[0]", reason="policy-deny")),
                # what the kernel drops comes back through NFLOG
                ("udp inet", dict(kind="transparent", host=self.origin,
                    port=go["udp"]["inet"], method="UDP", decision="deny",
                    rule="sandbox-network", reason="protocol-blocked")),
                ("udp gw", dict(kind="transparent", host=gw,
                    port=go["udp"]["gw"], method="UDP", decision="deny",
                    reason="protocol-blocked")),
            ]
            if rt == "crun":  # runsc has no ICMP sockets: nothing was sent
                want.append(("icmp inet", dict(kind="transparent",
                    host=self.origin, method="ICMP", decision="deny",
                    reason="protocol-blocked")))
            # the writer is asynchronous: wait for the last of them
            deadline = time.time() + 10 * T.SLOW
            while True:
                rows = self.gw.audit_rows(sandbox=sid)
                missing = [n for n, m in want if not audit_has(rows, **m)]
                if not missing or time.time() > deadline:
                    break
                time.sleep(0.1)
            self.assertEqual(missing, [], "\n".join(" ".join(str(x[k])
                for k in ("kind", "host", "ip", "port", "method", "status",
                "decision", "rule", "reason", "path")) for x in rows))
            # the gateway let through the allowed name and nothing else
            allows = {x["host"] for x in rows if x["decision"] == "allow" and
                x["kind"] == "transparent"}
            self.assertEqual(allows, {"allowed.test"}, rows)

        with self.subTest("nothing left behind"):
            self.assertFalse(os.path.exists("/run/netns/sandgate-" + sid))
            r = sh(IP, "link", "show", veth_name(sid), check=False)
            self.assertNotEqual(r.returncode, 0, r.stdout)

    def test_crun(self):
        if not os.access(RUNTIMES["crun"], os.X_OK):
            self.skipTest("crun is not installed")
        self.escape("crun")

    def test_runsc(self):
        if not os.access(RUNTIMES["runsc"], os.X_OK):
            self.skipTest("runsc is not installed")
        self.escape("runsc")


if __name__ == "__main__":
    if os.geteuid() != 0:
        T.skip_file("sandbox tests need root (namespaces, nftables)")
    T.require_binary()
    for tool in (IP, NFT, T.DIG, T.DNSMASQ, "/usr/sbin/sysctl"):
        if not os.access(tool, os.X_OK):
            T.skip_file(tool + " is not installed")
    if not any(os.access(p, os.X_OK) for p in RUNTIMES.values()):
        T.skip_file("neither crun nor runsc is installed")
    T.main()
