#!/usr/bin/python3
"""
The launcher on built-in-default-style listeners (issue 16, point 5): the
gateway's transparent, DNS and metrics listeners on 127.0.0.1 only (free
ports in a temp dir), nothing on a wildcard address. `sandbox run` in both
runtimes reaches an allowed origin in the fake-internet namespace, is
refused elsewhere, and runs under the implicit deny-all `default` policy
without --policy. Then an attacker tries the host's other loopback
services: from inside the sandbox through its gateway address, and from
its network namespace (root there) by routing 127.0.0.0/8 out of eth0 and
by forging 127.0.0.1 as the source of a reply to a host loopback
conversation. Nothing but the two listeners' ports may be reached;
route_localnet is set on the sandbox's host veth and nowhere else. Last,
when the real default ports are free, the README's two commands: `sandgate
serve` with no config at all, and `sandgate sandbox run -- CMD`.
Root only (exit 77 otherwise).
"""

import ipaddress
import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from sbtest import (BODY, IP, NFT, RUNTIMES, SandboxWorld,  # noqa: E402
    leftovers, sh, skip_unless_root, veth_name)

TPORT = T.free_port("127.0.0.1")
DPORT = T.free_port("127.0.0.1", udp_too=True)
MPORT = T.free_port("127.0.0.1")

# What the sandbox runs: it reads its gateway address from resolv.conf and
# tries the host's loopback services through it. One JSON object out.
PROBE = r"""
import json, socket, sys
gw = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
svc, udp_port, metrics = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
out = {"gw": gw}
def tcp(port, send):
    try:
        s = socket.create_connection((gw, port), timeout=5)
        s.settimeout(5)
        s.sendall(send)
        data = b""
        while len(data) < 65536:
            b = s.recv(4096)
            if not b:
                break
            data += b
        return data.decode("latin-1")
    except OSError as e:
        return "error: %s" % e
out["svc"] = tcp(svc, b"hello\r\n")
out["metrics"] = tcp(metrics, ("GET /metrics HTTP/1.1\r\nHost: %s:%d\r\n"
    "Connection: close\r\n\r\n" % (gw, metrics)).encode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    u.sendto(b"PROBE", (gw, udp_port))
print(json.dumps(out))
"""

# Run in the sandbox's network namespace by the attacker, through a raw
# socket: "udp SRC SPORT DST DPORT" forges a UDP datagram (any source);
# "icmp SRC DST ISRC ISPORT IDST IDPORT" an ICMP port unreachable about the
# UDP datagram ISRC:ISPORT -> IDST:IDPORT (one the host sent).
FORGE = r"""
import socket, struct, sys
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def ip(src, dst, proto, body):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 1, 0, 64, proto,
        0, socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + body
def udp(src, sport, dst, dport, payload, checksum=True):
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    if checksum:
        c = csum(socket.inet_aton(src) + socket.inet_aton(dst) +
            struct.pack("!BBH", 0, 17, len(u)) + u) or 0xffff
        u = u[:6] + struct.pack("!H", c) + u[8:]
    return ip(src, dst, 17, u)
a = sys.argv[1:]
if a[0] == "udp":
    pkt = udp(a[1], int(a[2]), a[3], int(a[4]), b"FORGED!")
else:
    inner = udp(a[3], int(a[4]), a[5], int(a[6]), b"hello", checksum=False)
    icmp = struct.pack("!BBHI", 3, 3, 0, 0) + inner[:28]
    icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
    pkt = ip(a[1], a[2], 1, icmp)
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for _ in range(3):
    s.sendto(pkt, (a[2] if a[0] == "icmp" else a[3], 0))
"""


class LoopService:
    """A host service on 127.0.0.1 that counts what reaches it: TCP
    connections (answered with SECRET) and UDP datagrams."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp_port = self.udp.getsockname()[1]
        self.udp.settimeout(0.2)
        self.accepted = 0
        self.datagrams = []
        self.stopping = False
        self.threads = [threading.Thread(target=self._tcp, daemon=True),
            threading.Thread(target=self._udp, daemon=True)]
        for t in self.threads:
            t.start()

    def _tcp(self):
        while not self.stopping:
            try:
                c, _ = self.tcp.accept()
            except OSError:
                continue
            self.accepted += 1
            try:
                c.sendall(b"SECRET\n")
            except OSError:
                pass
            c.close()

    def _udp(self):
        while not self.stopping:
            try:
                self.datagrams.append(self.udp.recvfrom(2048))
            except OSError:
                continue

    def stop(self):
        self.stopping = True
        for t in self.threads:
            t.join()
        self.tcp.close()
        self.udp.close()


def sysctl(path):
    with open("/proc/sys/net/ipv4/conf/" + path) as f:
        return f.read().strip()


class LoopbackListenersTest(SandboxWorld):
    EXTRA = {"listen": {"transparent": "127.0.0.1:%d" % TPORT,
        "dns": "127.0.0.1:%d" % DPORT, "metrics": "127.0.0.1:%d" % MPORT}}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.svc = LoopService()
        cls.addClassCleanup(cls.svc.stop)

    def test_00_no_wildcard_listener(self):
        """Every socket the gateway listens on is on 127.0.0.1."""
        out = sh("/usr/bin/ss", "-Hltunp").stdout
        mine = [l for l in out.splitlines()
            if "pid=%d," % self.gw.proc.pid in l]
        self.assertTrue(mine, out)
        for line in mine:
            self.assertIn(" 127.0.0.1:", line)
        self.assertEqual(sysctl("all/route_localnet"), "0")

    def test_01_allowed_and_denied(self):
        def one(rt):
            sid = "t-lo-" + rt
            r = self.run_sandbox(rt, sid, ["sh", "-c",
                "curl -s -m 20 http://allowed.test/; echo; "
                "curl -s -m 20 http://denied.test/ && echo DENIED-REACHED; "
                "echo end"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr +
                self.gw.log_tail())
            self.assertEqual(r.stdout.splitlines()[0], BODY, r.stdout)
            self.assertNotIn("DENIED-REACHED", r.stdout)
            self.check_clean(sid)
            self.assertTrue(self.gw.wait_audit(sandbox=sid,
                host="allowed.test", decision="allow"))
            self.assertTrue(self.gw.wait_audit(sandbox=sid,
                host="denied.test", decision="deny"))
        self.each_runtime(one)

    def test_02_implicit_default_policy(self):
        """No --policy: the sandbox registers under `default`, which no
        file defines, and everything is denied."""
        def one(rt):
            sid = "t-lodef-" + rt
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--runtime", rt, "--id", sid, "--", "sh", "-c",
                "curl -s -m 20 http://allowed.test/ && echo REACHED; "
                "echo done", timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr + self.gw.log_tail())
            self.assertEqual(r.stdout.strip(), "done")
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, host="allowed.test",
                decision="deny")
            self.assertTrue(rows, self.gw.log_tail())
            self.assertEqual(rows[0]["rule"], "default-deny")
        self.each_runtime(one)
        r = T.run_sandgate("policy", "explain", "-c", self.gw.cfg_path,
            "--policy", "default", "allowed.test:80")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("decision: deny\nrule: default-deny\n", r.stdout)

    def test_03_host_loopback_through_gateway_address(self):
        """From inside: the gateway address's other ports (a loopback
        service, metrics, UDP) lead only to the transparent listener."""
        def one(rt):
            sid = "t-loatk-" + rt
            before = (self.svc.accepted, len(self.svc.datagrams))
            r = self.run_sandbox(rt, sid, ["python3", "-c", PROBE,
                str(self.svc.port), str(self.svc.udp_port), str(MPORT)])
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertNotIn("SECRET", out["svc"])
            self.assertNotIn("sandgate_", out["metrics"])
            self.assertIn("403", out["metrics"])
            self.check_clean(sid)
            self.assertEqual((self.svc.accepted, len(self.svc.datagrams)),
                before)
            for port in (self.svc.port, MPORT):
                rows = self.gw.wait_audit(sandbox=sid, host=out["gw"],
                    port=port, decision="deny")
                self.assertTrue(rows, "no deny row for port %d" % port)
        self.each_runtime(one)

    def attacker_runtime(self):
        for rt, path in RUNTIMES.items():
            if os.access(path, os.X_OK):
                return rt
        self.skipTest("no runtime")

    def test_04_netns_attacker(self):
        """Root in the sandbox's network namespace: 127.0.0.1 routed out
        of eth0, and 127.0.0.1 forged as a source."""
        rt = self.attacker_runtime()
        sid = "t-lons-" + rt
        ns = "sandgate-" + sid
        veth = veth_name(sid)
        p = self.start_run(rt, sid, ["sleep", "300"])
        try:
            self.assertIsNone(p.poll(), "the sandbox did not start")
            self.assertEqual(sysctl(veth + "/route_localnet"), "1")
            self.assertEqual(sysctl("all/route_localnet"), "0")
            self.assertEqual(sysctl("default/route_localnet"), "0")
            gw = sh(IP, "-n", ns, "-4", "route", "show", "default").stdout \
                .split()[2]
            # 127.0.0.0/8 leaves through eth0 to the host
            sh(IP, "-n", ns, "addr", "del", "127.0.0.1/8", "dev", "lo")
            sh(IP, "netns", "exec", ns, "/usr/sbin/sysctl", "-qw",
                "net.ipv4.conf.eth0.route_localnet=1")
            sh(IP, "-n", ns, "route", "add", "127.0.0.0/8", "via", gw,
                "dev", "eth0")
            before = (self.svc.accepted, len(self.svc.datagrams))
            for port in (self.svc.port, MPORT):
                r = sh(IP, "netns", "exec", ns, "curl", "-s", "-m", "10",
                    "http://127.0.0.1:%d/metrics" % port, check=False)
                self.assertNotIn("SECRET", r.stdout)
                self.assertNotIn("sandgate_", r.stdout)
                self.assertTrue(self.gw.wait_audit(sandbox=sid,
                    host="127.0.0.1", port=port, decision="deny"),
                    "port %d: %s" % (port, r.stdout))
            guest = str(ipaddress.ip_address(gw) + 1)
            sh(IP, "netns", "exec", ns, "/usr/bin/python3", "-c", FORGE,
                "udp", guest, "40000", "127.0.0.1", str(self.svc.udp_port))
            # A host loopback conversation, and forged replies to it from
            # the sandbox with 127.0.0.1 as their source.
            a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.addCleanup(a.close)
            self.addCleanup(b.close)
            b.bind(("127.0.0.1", 0))
            a.bind(("127.0.0.1", 0))
            a.connect(b.getsockname())
            a.send(b"hello")
            _, src = b.recvfrom(100)
            b.sendto(b"reply", src)
            self.assertEqual(a.recv(100), b"reply")
            drops0 = self.raw_drops(veth)
            sh(IP, "netns", "exec", ns, "/usr/bin/python3", "-c", FORGE,
                "udp", "127.0.0.1", str(b.getsockname()[1]), "127.0.0.1",
                str(a.getsockname()[1]))
            sh(IP, "netns", "exec", ns, "/usr/bin/python3", "-c", FORGE,
                "udp", "127.0.0.1", "40001", "127.0.0.1",
                str(self.svc.udp_port))
            # the forged packets were seen and dropped before conntrack
            self.assertGreaterEqual(self.raw_drops(veth) - drops0, 6)
            # An ICMP error from the sandbox's own address about the host's
            # datagram a -> b: conntrack calls it RELATED to that flow, in
            # its reply direction; it must not reach a (ECONNREFUSED).
            a.send(b"again")
            b.recvfrom(100)
            sh(IP, "netns", "exec", ns, "/usr/bin/python3", "-c", FORGE,
                "icmp", guest, "127.0.0.1", "127.0.0.1",
                str(a.getsockname()[1]), "127.0.0.1", str(b.getsockname()[1]))
            a.setblocking(False)
            time.sleep(1)  # the forged packets are on a local veth: gone by now
            with self.assertRaises(BlockingIOError):
                a.recv(100)
            self.assertEqual((self.svc.accepted, len(self.svc.datagrams)),
                before)
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            p.wait(timeout=60 * T.SLOW)
        self.check_clean(sid)

    def test_05_ipv6_listener_refused(self):
        """A transparent listener on IPv6 only cannot be reached (sandboxes
        get no IPv6): one line, exit 1, nothing made."""
        cfg = self.td.join("v6.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: %s\nlisten:\n  admin: %s\n"
                "  transparent: \"[::1]:%d\"\n  dns: 127.0.0.1:%d\n" % (
                self.td.join("v6state"), self.sock, TPORT, DPORT))
        sid = "t-lov6"
        r = T.run_sandgate("sandbox", "run", "-c", cfg, "--runtime",
            self.attacker_runtime(), "--id", sid, "--", "true")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(r.stderr, "sandgate: sandbox: listen.transparent "
            "and listen.dns must be enabled on an IPv4 address (default "
            "127.0.0.1:PORT)\n")
        self.assertEqual(leftovers(sid), [])
        self.assertNotIn(sid, self.registered())

    @staticmethod
    def raw_drops(veth):
        out = sh(NFT, "list", "chain", "inet", "sandgate", "raw_" + veth).stdout
        for line in out.splitlines():
            if "saddr !=" in line and "counter packets" in line:
                return int(line.split("counter packets")[1].split()[0])
        raise AssertionError("no counter in raw_%s:\n%s" % (veth, out))


DEFAULT_PORTS = {"tcp": (3128, 1080, 5353, 3129, 8080, 9090), "udp": (5353,)}


class ReadmeTest(unittest.TestCase):
    """The README's first sandbox: `sandgate serve` on built-in defaults
    (no config file), then `sandgate sandbox run -- CMD` beside it."""

    def test_readme_two_commands(self):
        busy = [p for p in DEFAULT_PORTS["tcp"] if T.port_in_use(p)] + \
            [p for p in DEFAULT_PORTS["udp"] if T.port_in_use(p, udp=True)]
        if busy:
            self.skipTest("default ports in use here: %s" % busy)
        for f in ("/etc/sandgate/sandgate.yaml",):
            if os.path.exists(f):
                self.skipTest(f + " exists: not the built-in defaults")
        if not os.access(RUNTIMES["runsc"], os.X_OK):
            self.skipTest("runsc (the built-in default runtime) is missing")
        readme = os.path.join(os.environ.get("SANDGATE_SRC") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", ".."), "README.md")
        with open(readme) as f:
            cmd = [l for l in f.read().splitlines()
                if l.startswith("sudo build/sandgate sandbox run ")]
        self.assertEqual(len(cmd), 1, "the README's first sandbox")
        argv = shlex.split(cmd[0])[2:]
        self.assertEqual(argv[:2], ["sandbox", "run"])
        td = T.TempDir("sgtest-readme-")
        self.addCleanup(td.cleanup)
        os.chmod(td.path, 0o755)
        gw = T.Proc([T.BIN, "serve"], td.join("serve.log"), cwd=td.path,
            env=T.clean_env())
        self.addCleanup(gw.stop)
        sock = td.join("var", "admin.sock")
        deadline = time.time() + 20 * T.SLOW
        while time.time() < deadline and gw.alive() and \
                not T.wait_tcp("127.0.0.1", 3129, 0.2, gw):
            pass
        while time.time() < deadline and not os.path.exists(sock):
            time.sleep(0.1)
        self.assertTrue(os.path.exists(sock), gw.log_tail())
        sid = "t-readme"
        r = T.run_sandgate(*(argv[:2] + ["--id", sid] + argv[2:]),
            cwd=td.path, timeout=120)
        self.assertEqual(r.returncode, 6, r.stderr + gw.log_tail())
        self.assertEqual(r.stdout, "hello from the sandbox\n")
        self.assertEqual(r.stderr,
            "curl: (6) Could not resolve host: example.com\n")
        self.assertEqual(leftovers(sid), [])
        self.assertIn("sandbox t-readme registered (policy default,",
            gw.log_text())
        db = td.join("var", "audit.db")
        deadline = time.time() + 10 * T.SLOW
        rows = []
        while not rows and time.time() < deadline:
            con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=2)
            rows = con.execute("SELECT rule FROM events WHERE sandbox = ? "
                "AND host = 'example.com' AND decision = 'deny'",
                (sid,)).fetchall()
            con.close()
            time.sleep(0.1)
        self.assertTrue(rows, gw.log_tail())
        self.assertEqual(rows[0][0], "default-deny")
        gw.stop()
        self.assertEqual(T.log_problems(gw.log_text()), [], gw.log_tail())


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
