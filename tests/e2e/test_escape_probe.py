#!/usr/bin/python3
"""
Escape probes against `sandgate sandbox run` sandboxes (SPEC §9,
docs/sandbox.md "The network picture"), beyond what test_sandbox_escape.py,
test_sandbox_loopback.py, test_transparent.py and test_sandbox_run.py cover.
Each test is an attempt by code inside a sandbox (or by the orchestrator
starting a second one) to reach what the sandbox's policy does not allow.

The world is sbtest.SandboxWorld's: a gateway with wildcard transparent and
DNS listeners, dnsmasq, a "fake internet" namespace on 198.19.X.0/24 with an
HTTP origin. Root only (exit 77 otherwise); every namespace, table, process
and sysctl made here is removed by its id or tag, also on failure.
"""

import itertools
import json
import os
import random
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
from sbtest import (INET_HOST, INET_NS, INET_ORIGIN,  # noqa: E402
    INET_VETH, IP, NFT, RUNTIMES, SandboxWorld, leftovers, sh, veth_name)
from escape_listeners import TcpCount, UdpCount  # noqa: E402

PY = "/usr/bin/python3"
SYSCTL = "/usr/sbin/sysctl"
TAG = "%04x" % random.getrandbits(16)

# ------------------------------------------------------------ FNV-1a ids

_FNV_P = 16777619
_FNV_PINV = pow(_FNV_P, -1, 1 << 32)
_ALPHA = b"abcdefghijklmnopqrstuvwxyz0123456789"


def fnv1a32(data, h=2166136261):
    for c in data:
        h = ((h ^ c) * _FNV_P) & 0xffffffff
    return h


def colliding_id(sid, prefix):
    """Another valid sandbox id, prefix + 8 of [a-z0-9], whose FNV-1a (and
    so whose host veth name, docs/sandbox.md) is sid's: meet in the middle,
    about a second."""
    target = fnv1a32(sid.encode())
    h0 = fnv1a32(prefix.encode())
    fwd = {}
    for x in itertools.product(_ALPHA, repeat=4):
        h = h0
        for c in x:
            h = ((h ^ c) * _FNV_P) & 0xffffffff
        fwd[h] = bytes(x)
    for y in itertools.product(_ALPHA, repeat=4):
        s = target
        for c in reversed(y):
            s = ((s * _FNV_PINV) & 0xffffffff) ^ c
        x = fwd.get(s)
        if x is not None:
            other = prefix + x.decode() + bytes(y).decode()
            assert veth_name(other) == veth_name(sid)
            return other
    raise RuntimeError("no FNV-1a collision found for " + sid)


# ------------------------------------------------------------ in-sandbox code

# Floods from inside the sandbox until /workspace/done exists: UDP to a host
# service on the gateway address and to the fake internet, TCP connections
# to a host service on the gateway address (each closed at once, so that the
# transparent listener, where they normally land, has no work with them).
FLOOD = r"""
import json, os, socket, sys, threading, time
ws = "/workspace"
while not os.path.exists(ws + "/go.json"):
    time.sleep(0.05)
g = json.load(open(ws + "/go.json"))
stop = lambda: os.path.exists(ws + "/done")
def tcp():
    while not stop():
        s = socket.socket()
        s.settimeout(0.3)
        try:
            s.connect((g["gw"], g["tcp"]))
        except OSError:
            pass
        s.close()
        time.sleep(0.005)
threading.Thread(target=tcp, daemon=True).start()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setblocking(False)
n = 0
print("flooding", flush=True)
while not stop():
    for _ in range(100):
        for dst in ((g["gw"], g["udp"]), (g["inet"], g["inet_udp"])):
            try:
                u.sendto(b"FLOOD", dst)
                n += 1
            except OSError:
                pass
    time.sleep(0.0005)
print(json.dumps({"sent": n}), flush=True)
"""

# Two sandboxes, each running this: listen on TCP and UDP 7777 (recording
# who reached them), then, once go.json names the other sandbox, try it:
# TCP and UDP to its guest address and its gateway address, and UDP-Lite
# (an unprivileged protocol that is neither TCP nor UDP) to the fake
# internet. One JSON line of results, then, after /workspace/done, one of
# what reached the listeners.
PEER = r"""
import json, os, socket, threading, time
ws = "/workspace"
got = {"tcp": [], "udp": []}
def tl():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 7777))
    s.listen(8)
    while True:
        c, a = s.accept()
        got["tcp"].append(a[0])
        c.close()
def ul():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 7777))
    while True:
        _, a = u.recvfrom(2048)
        got["udp"].append(a[0])
threading.Thread(target=tl, daemon=True).start()
threading.Thread(target=ul, daemon=True).start()
print("listening", flush=True)
while not os.path.exists(ws + "/go.json"):
    time.sleep(0.05)
g = json.load(open(ws + "/go.json"))
res = {}
for k, host in (("peer", g["peer"]), ("peer_gw", g["peer_gw"])):
    try:
        s = socket.create_connection((host, 7777), 5)
        s.settimeout(5)
        s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
            % host).encode())
        res["tcp_" + k] = s.recv(300).decode("latin-1")
        s.close()
    except OSError as e:
        res["tcp_" + k] = "error: %s" % e
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = 0
    for _ in range(5):
        try:
            u.sendto(b"PEER", (host, 7777))
            sent += 1
        except OSError as e:
            res["udp_err_" + k] = str(e)
    res["udp_" + k] = sent
try:
    l = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 136)
    sent = 0
    for _ in range(5):
        l.sendto(b"LITE", (g["inet"], g["inet_udp"]))
        sent += 1
    res["udplite"] = sent
except OSError as e:
    res["udplite"] = "error: %s" % e
print(json.dumps(res), flush=True)
while not os.path.exists(ws + "/done"):
    time.sleep(0.05)
time.sleep(0.3)
print(json.dumps({"got": got}), flush=True)
"""

# Counts datagrams in the fake internet: `python3 -c COUNTER HOST PORT OUT
# PROTO` (17 UDP, 136 UDP-Lite).
COUNTER = r"""
import json, os, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, int(sys.argv[4]))
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.05)
n, peers, last = 0, set(), 0
while True:
    try:
        _, p = s.recvfrom(2048)
        n += 1
        peers.add(p[0])
    except socket.timeout:
        pass
    if time.time() - last > 0.05:
        with open(sys.argv[3] + ".tmp", "w") as f:
            json.dump({"n": n, "peers": sorted(peers)}, f)
        os.rename(sys.argv[3] + ".tmp", sys.argv[3])
        last = time.time()
"""


def slurp(path):
    with open(path) as f:
        return f.read()


def sysctl_w(key, val):
    sh(SYSCTL, "-qw", "%s=%s" % (key, val), check=False)


class EscapeProbe(SandboxWorld):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # forwarding on the fake internet's veth (ours, it goes with it) and
        # a way back to the sandbox subnets, as on a host that routes: only
        # sandgate's rules may keep a sandbox's packets in
        sysctl_w("net.ipv4.conf.%s.forwarding" % INET_VETH, 1)
        sh(IP, "-n", INET_NS, "route", "add", "198.18.0.0/15", "via",
            INET_HOST, check=False)
        cls.inet_udp_port = random.randint(20000, 29999)
        cls.inet_count = cls.td.join("inet-udp.json")
        cls.counter = T.Proc([IP, "netns", "exec", INET_NS, PY, "-c", COUNTER,
            INET_ORIGIN, str(cls.inet_udp_port), cls.inet_count, "17"],
            cls.td.join("counter.log"))
        cls.addClassCleanup(cls.counter.stop)
        cls.lite_count = cls.td.join("inet-udplite.json")
        cls.lite = T.Proc([IP, "netns", "exec", INET_NS, PY, "-c", COUNTER,
            INET_ORIGIN, str(cls.inet_udp_port), cls.lite_count, "136"],
            cls.td.join("counter-lite.log"))
        cls.addClassCleanup(cls.lite.stop)
        deadline = time.time() + 10
        for path, proc in ((cls.inet_count, cls.counter),
                (cls.lite_count, cls.lite)):
            while not os.path.exists(path):
                if time.time() > deadline or not proc.alive():
                    raise RuntimeError("counter did not start: " +
                        proc.log_tail())
                time.sleep(0.05)

    def inet_udp(self, path=None):
        for _ in range(50):
            try:
                with open(path or self.inet_count) as f:
                    return json.load(f)
            except (OSError, ValueError):
                time.sleep(0.02)
        raise AssertionError("cannot read the fake internet's UDP count")

    def launch(self, rt, sid, cmd, ws, log):
        """`sandbox run` in the background with a workspace; returns the
        launcher and the sandbox's gateway address once its veth has one."""
        out = open(log, "w")
        p = subprocess.Popen([T.BIN, "sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", rt, "--id", sid, "--workspace",
            ws, "--"] + cmd, stdout=out, stderr=subprocess.STDOUT,
            env=T.clean_env())
        out.close()
        self.addCleanup(self.reap, p)
        v = veth_name(sid)
        deadline = time.time() + 60 * T.SLOW
        while time.time() < deadline and p.poll() is None:
            r = sh(IP, "-o", "-4", "addr", "show", "dev", v, check=False)
            for line in r.stdout.splitlines():
                f = line.split()
                if "inet" in f:
                    return p, f[f.index("inet") + 1].split("/")[0]
            time.sleep(0.05)
        self.fail("sandbox %s did not come up (exit %s): %s" % (sid,
            p.poll(), slurp(log)[-2000:]))

    @staticmethod
    def reap(p):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    @staticmethod
    def wait_line(log, text, timeout=60):
        deadline = time.time() + timeout * T.SLOW
        while time.time() < deadline:
            if text in slurp(log):
                return True
            time.sleep(0.05)
        return False

    @staticmethod
    def rules_of(v):
        """The lines of table inet sandgate that name veth v."""
        r = sh(NFT, "list", "table", "inet", "sandgate", check=False)
        return [l.strip() for l in r.stdout.splitlines() if v in l]

    def workspace(self, name):
        ws = self.td.join(name)
        os.makedirs(ws)
        os.chmod(ws, 0o755)
        return ws

    @staticmethod
    def go(ws, doc):
        tmp = os.path.join(ws, "go.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(ws, "go.json"))

    # ------------------------------------------------------------ tests

    def test_01_colliding_id_strips_running_sandbox(self):
        """
        docs/sandbox.md:113 names the host veth `sg` + 8 hex digits of a
        hash of the id; :178-180 "They are added after any leftovers under
        the same veth name are deleted and *before* the veth exists ...:
        the link is never up without its rules"; :173-174 "everything else
        -- other UDP, ..., the host's other services and addresses -- is
        dropped. Nothing is forwarded". SPEC §9 (:315-316): rules that
        "drop everything else".

        The hash is unkeyed 32-bit FNV-1a (src/sandbox/sandbox_net.c:48),
        so a second valid id with the same veth name is found in about a
        second (colliding_id). Sandbox A (crun) runs and floods UDP at a
        host service bound to its gateway address .1 and at the fake
        internet (forwarding on A's veth, as on a routing host), and opens
        TCP connections to a host TCP service on .1. Then `sandbox run --id
        B` with the colliding id.

        What happened on the current binary: B's launcher deletes A's live
        rules and map elements as "leftovers of an earlier sandbox on the
        same veth name" (sandbox_nft.c:241), adds its own (with B's guest
        address), then fails ("sandgate: sandbox: network: veth exists",
        exit 1) and deletes the veth by name -- A's. While its rules were
        gone, thousands of A's UDP datagrams (from A's guest .2) reached
        the host's UDP service on .1 and the fake internet's UDP service
        (the TCP connections did not hit the window); afterwards A has no
        veth and no rules. Asserted: nothing of A arrives; A keeps its veth
        and its rules; B leaves nothing.
        """
        rt = "crun" if os.access(RUNTIMES["crun"], os.X_OK) else "runsc"
        if not os.access(RUNTIMES[rt], os.X_OK):
            self.skipTest("neither crun nor runsc is installed")
        sid_a = "escp-%s-a" % TAG
        sid_b = colliding_id(sid_a, "escp-%s-b" % TAG)
        va = veth_name(sid_a)
        self.addCleanup(lambda: sh(T.BIN, "sandbox", "rm", "-c",
            self.gw.cfg_path, sid_b, check=False))
        ws = self.workspace("ws-flood")
        log = self.td.join("flood.log")
        p, gw = self.launch(rt, sid_a, ["python3", "-c", FLOOD], ws, log)
        host_udp, host_tcp = UdpCount(gw, 0), TcpCount(gw, 0)
        self.addCleanup(host_udp.close)
        self.addCleanup(host_tcp.close)
        # a host that forwards (a Docker host does); goes with the veth
        sysctl_w("net.ipv4.conf.%s.forwarding" % va, 1)
        guest = gw.rsplit(".", 1)[0] + ".%d" % (int(gw.rsplit(".", 1)[1]) + 1)
        self.go(ws, {"gw": gw, "udp": host_udp.port, "tcp": host_tcp.port,
            "inet": INET_ORIGIN, "inet_udp": self.inet_udp_port})
        self.assertTrue(self.wait_line(log, "flooding"), slurp(log))
        rules_before = self.rules_of(va)
        self.assertTrue(rules_before, "no rules name " + va)
        # control: while A's rules stand, its flood reaches nothing
        time.sleep(1.0)
        c0 = (host_udp.status()["conn_count"], host_tcp.status()["conn_count"],
            self.inet_udp()["n"])
        # the second sandbox, with the colliding id
        rb = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", rt, "--id", sid_b, "--", "true",
            timeout=120)
        time.sleep(1.0)
        c1 = (host_udp.status(), host_tcp.status(), self.inet_udp())
        veth_after = sh(IP, "link", "show", va, check=False).returncode == 0
        rules_after = self.rules_of(va)
        with open(os.path.join(ws, "done"), "w"):
            pass
        try:
            p.wait(60 * T.SLOW)
        except subprocess.TimeoutExpired:
            self.reap(p)
        flood = slurp(log)
        print("\n  B (%s): exit %d, %s" % (sid_b, rb.returncode,
            rb.stderr.strip()), file=sys.stderr)
        print("  A's flood: %s" % flood.strip().splitlines()[-1:],
            file=sys.stderr)
        print("  reached: host UDP %d from %s, host TCP %d from %s, fake "
            "internet UDP %d from %s" % (c1[0]["conn_count"],
            sorted(set(c1[0]["hits"]))[:3], c1[1]["conn_count"],
            sorted(set(h[1] for h in c1[1]["hits"]))[:3], c1[2]["n"],
            c1[2]["peers"][:3]), file=sys.stderr)
        print("  A's veth %s after B: %s; its rules: %s" % (va,
            "present" if veth_after else "GONE", rules_after), file=sys.stderr)
        self.assertEqual(c0, (0, 0, 0), "A's flood got through before B: "
            "the world is wrong")
        with self.subTest("nothing of A reached the host or the internet"):
            self.assertEqual((c1[0]["conn_count"], c1[1]["conn_count"],
                c1[2]["n"]), (0, 0, 0), "while `sandbox run --id %s` ran, "
                "sandbox %s (%s) reached: host UDP service %s, host TCP "
                "service %s, fake internet UDP %s" % (sid_b, sid_a, guest,
                c1[0]["conn_count"], c1[1]["conn_count"], c1[2]))
        with self.subTest("A keeps its veth and its rules"):
            self.assertTrue(veth_after, "sandbox %s lost its veth %s to "
                "the launch of %s" % (sid_a, va, sid_b))
            self.assertEqual(sorted(rules_after), sorted(rules_before))
        with self.subTest("B left nothing behind"):
            self.assertEqual([x for x in leftovers(sid_b) if va not in x], [])

    def test_02_sandbox_to_sandbox(self):
        """
        docs/sandbox.md, "Escape tests": "Not covered: sandbox-to-sandbox
        traffic beyond what the forward chain's drop implies." Two live
        sandboxes (crun and runsc when both exist), forwarding on both veths:
        each tries the other's guest address and gateway address over TCP
        and UDP port 7777, where the other listens, and sends UDP-Lite
        (neither TCP nor UDP, no capability needed) to the fake internet.
        Promised ("The network picture"): TCP to any address lands at the
        transparent listener (a 403 for a bare address), other protocols
        are dropped, nothing is forwarded. Holds on the current binary.
        """
        rts = [rt for rt in ("crun", "runsc") if os.access(RUNTIMES[rt],
            os.X_OK)]
        if not rts:
            self.skipTest("neither crun nor runsc is installed")
        rts = (rts * 2)[:2]
        sb = []
        for i, rt in enumerate(rts):
            sid = "escp-%s-p%d" % (TAG, i)
            ws = self.workspace("ws-peer%d" % i)
            log = self.td.join("peer%d.log" % i)
            p, gw = self.launch(rt, sid, ["python3", "-c", PEER], ws, log)
            sysctl_w("net.ipv4.conf.%s.forwarding" % veth_name(sid), 1)
            a = gw.split(".")
            guest = ".".join(a[:3] + [str(int(a[3]) + 1)])
            sb.append({"sid": sid, "rt": rt, "ws": ws, "log": log, "p": p,
                "gw": gw, "guest": guest})
        lite0 = self.inet_udp(self.lite_count)["n"]
        for i, me in enumerate(sb):
            self.assertTrue(self.wait_line(me["log"], "listening"),
                slurp(me["log"]))
        for i, me in enumerate(sb):
            other = sb[1 - i]
            self.go(me["ws"], {"peer": other["guest"], "peer_gw": other["gw"],
                "inet": INET_ORIGIN, "inet_udp": self.inet_udp_port})
        res = []
        for me in sb:
            self.assertTrue(self.wait_line(me["log"], '"udplite"', 90),
                slurp(me["log"]))
        time.sleep(0.5)
        lite = self.inet_udp(self.lite_count)
        for me in sb:
            with open(os.path.join(me["ws"], "done"), "w"):
                pass
        for me in sb:
            try:
                me["p"].wait(60 * T.SLOW)
            except subprocess.TimeoutExpired:
                self.reap(me["p"])
            lines = [l for l in slurp(me["log"]).splitlines()
                if l.startswith("{")]
            res.append((json.loads(lines[0]), json.loads(lines[-1])["got"]
                if len(lines) > 1 else None))
            print("\n  %s (%s): %s\n    got %s" % (me["sid"], me["rt"],
                json.dumps(res[-1][0])[:600], res[-1][1]), file=sys.stderr)
        for i, me in enumerate(sb):
            out, got = res[i]
            with self.subTest(sandbox=me["sid"], runtime=me["rt"]):
                # TCP to the other sandbox: the transparent listener's 403
                for k in ("tcp_peer", "tcp_peer_gw"):
                    self.assertIn(" 403 ", out[k].split("\r\n")[0], (k, out))
                # the other sandbox's listeners saw nothing from anyone
                self.assertEqual(got, {"tcp": [], "udp": []}, got)
        self.assertEqual(lite["n"], lite0, lite)
        for me in sb:
            self.assertEqual(leftovers(me["sid"]), [])


if __name__ == "__main__":
    if os.geteuid() != 0:
        T.skip_file("sandbox tests need root (namespaces, nftables)")
    T.require_binary()
    for tool in (IP, NFT, T.DIG, T.DNSMASQ, SYSCTL):
        if not os.access(tool, os.X_OK):
            T.skip_file(tool + " is not installed")
    if not any(os.access(p, os.X_OK) for p in RUNTIMES.values()):
        T.skip_file("neither crun nor runsc is installed")
    unittest.main(verbosity=2)
