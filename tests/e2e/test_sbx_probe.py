#!/usr/bin/python3
"""
Probes of the sandbox network (SPEC §9, docs/sandbox.md "The network
picture", "Drops are audited") beyond test_sandbox_escape.py,
test_sandbox_loopback.py, test_escape_probe.py and test_sandbox_run.py.
Each test is an attempt by code inside a `sandgate sandbox run` sandbox (or
by root in its network namespace) to get out other than through the
gateway, or to get past the gateway's rules, and each checks that it
failed and that the refusal shows where the docs promise (audit row, nft
counter).

Tried (findings are the failing tests):
- one UDP flow (one socket, one destination, 8 datagrams under the rate
  limit) -> docs promise ONE audit row per flow; got one row per datagram
  (test_01, FINDING);
- a DNS query sent straight to the DNS listener's own port on the gateway
  address (not 53): answered, as the input chain allows, but the gateway
  also writes a `deny`/`sandbox-network`/`protocol-blocked` row for it
  (test_02, FINDING);
- a one-shot `sandbox run` that sends 3 UDP datagrams and exits: the
  datagrams leave the sandbox (counted) but no audit row is ever written;
  the same with the sandbox alive 2 s longer gets its row (test_06,
  FINDING);
- DNS over TCP to an outside resolver (198.19.X.2:53), and DNS over TCP to
  the gateway address: answered by the gateway under the policy (denied name
  NXDOMAIN + EDE 15), the outside resolver sees no connection, rows of kind
  dns -- held (test_03);
- UDP with an IP option (record route), a fragmented UDP datagram (3000
  bytes, DF off) and UDP to a multicast group, to the fake internet: nothing
  arrives, each has its deny row with the right port -- held (test_04);
- root in sandbox A's network namespace takes sandbox B's guest address
  and MAC (B runs a more open policy): TCP to the allowed origin and a DNS
  query to the gateway from B's address go nowhere, A's raw-chain drop
  counter counts them, no row is written under B; a packet socket on A's
  eth0 sees none of B's own traffic -- held (test_05).
Not repeated here (the tests named above cover them): UDP/TCP to the
gateway host's other ports (metrics, sshd-like listeners: DNATed to the
transparent listener, 403), ICMP, IPv6 (link-local, all-nodes), bare
198.19.x.x addresses, UDP DNS to another resolver, broadcast,
sandbox-to-sandbox traffic, forged 127.0.0.1 sources.

The world is sbtest.SandboxWorld's (wildcard transparent and DNS listeners,
dnsmasq, a fake internet on 198.19.X.0/24) plus counting listeners in the
fake internet. Root only (exit 77 otherwise). Sandbox ids start with "prb";
every sandbox, namespace, address and process made here is removed by its
id, also on failure.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
from sbtest import (INET_HOST, INET_NET, INET_NS, INET_ORIGIN,  # noqa: E402
    INET_VETH, IP, NFT, RUNTIMES, SandboxWorld, leftovers, sh, veth_name)

PY = "/usr/bin/python3"
SYSCTL = "/usr/sbin/sysctl"
LISTENERS = os.path.join(HERE, "data", "escape_listeners.py")
TAG = "%04x" % random.getrandbits(16)
TABLE = "prb_sbx_" + TAG

POLICY = ("policies:\n"
    "  - name: web\n"
    "    allow:\n"
    "      - host: allowed.test\n"
    "        ports: [80]\n"
    "    allow_private: [%s.0/24]\n"
    "  - name: closed\n"
    "    allow:\n"
    "      - host: nothing.test\n"
    "        ports: [80]\n") % INET_NET

# One UDP flow: one socket, one destination, N datagrams GAP seconds apart.
UDPFLOW = r"""
import json, socket, sys, time
dst, port, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", 0))
sent = 0
for i in range(n):
    try:
        u.sendto(b"FLOW%d" % i, (dst, port))
        sent += 1
    except OSError as e:
        print("error", e, file=sys.stderr)
    time.sleep(gap)
print(json.dumps({"sent": sent, "sport": u.getsockname()[1]}), flush=True)
time.sleep(float(sys.argv[5]) if len(sys.argv) > 5 else 0)
"""

# UDP with an IP option, a fragmented datagram, multicast: argv DST P1 P2
# P3 GROUP.
ODD = r"""
import json, socket, sys
dst, p1, p2, p3, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
out = {}
def one(k, f):
    try:
        out[k] = f()
    except OSError as e:
        out[k] = "error: %s" % e
def opts():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # record route, room for one address, padded with EOL
    u.setsockopt(socket.IPPROTO_IP, 4, b"\x07\x07\x04\x00\x00\x00\x00\x00")
    for _ in range(2):
        u.sendto(b"OPTS", (dst, p1))
    return 2
def frag():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER: DONT
    for _ in range(2):
        u.sendto(b"F" * 3000, (dst, p2))
    return 2
def mcast():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 4)
    for _ in range(2):
        u.sendto(b"MCAST", (group, p3))
    return 2
one("opts", opts)
one("frag", frag)
one("mcast", mcast)
print(json.dumps(out), flush=True)
import time
time.sleep(3)  # the kernel batches NFLOG messages for up to 1 s
"""

# Root in a sandbox's network namespace, with another sandbox's address on
# eth0: TCP to the origin and a DNS query to the gateway, from SRC. argv:
# SRC ORIGIN GW
FORGED = r"""
import json, socket, struct, sys
src, origin, gw = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
try:
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(4)
    s.connect((origin, 80))
    s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
    out["tcp"] = s.recv(300).decode("latin-1")
except OSError as e:
    out["tcp"] = "error: %s" % e
q = struct.pack("!HHHHHH", 0x5151, 0x0100, 1, 0, 0, 0)
for label in b"allowed.test".split(b"."):
    q += bytes([len(label)]) + label
q += b"\x00" + struct.pack("!HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((src, 0))
u.settimeout(3)
try:
    for _ in range(3):
        u.sendto(q, (gw, 53))
    out["dns"] = u.recv(512).hex()
except OSError as e:
    out["dns"] = "error: %s" % e
print(json.dumps(out))
"""

# A packet socket on eth0 (root in the namespace): every frame's IPv4
# source and a marker found in it, for SECS seconds. argv: SECS MARKER
SNIFF = r"""
import json, socket, sys, time
secs, marker = float(sys.argv[1]), sys.argv[2].encode()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("eth0", 0))
s.settimeout(0.2)
srcs, marked = set(), 0
print("sniffing", flush=True)
end = time.time() + secs
while time.time() < end:
    try:
        f = s.recv(65535)
    except socket.timeout:
        continue
    if f[12:14] == b"\x08\x00":
        srcs.add(socket.inet_ntoa(f[26:30]))
    if marker in f:
        marked += 1
print(json.dumps({"srcs": sorted(srcs), "marked": marked}), flush=True)
"""


def slurp(path):
    with open(path) as f:
        return f.read()


def sysctl_w(key, val):
    sh(SYSCTL, "-qw", "%s=%s" % (key, val), check=False)


def plus1(addr):
    a = addr.split(".")
    return ".".join(a[:3] + [str(int(a[3]) + 1)])


class SbxProbe(SandboxWorld):
    POLICY = POLICY

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        m = re.search(r'dns:\s*"?0\.0\.0\.0:(\d+)', slurp(cls.gw.cfg_path))
        if m is None:
            raise RuntimeError("no DNS port in " + cls.gw.cfg_path)
        cls.dport = int(m.group(1))
        # a host that routes: forwarding on the fake internet's veth and a
        # way back to the sandboxes, so only sandgate's rules keep them in
        sysctl_w("net.ipv4.conf.%s.forwarding" % INET_VETH, 1)
        sh(IP, "-n", INET_NS, "route", "add", "198.18.0.0/15", "via",
            INET_HOST, check=False)
        ports = random.sample(range(20000, 29999), 8)
        spec = [
            {"id": "tcp53", "kind": "tcp", "host": INET_ORIGIN, "port": 53},
            {"id": "udp53", "kind": "udp", "host": INET_ORIGIN, "port": 53},
        ] + [{"id": "u%d" % i, "kind": "udp", "host": INET_ORIGIN,
            "port": p} for i, p in enumerate(ports)]
        cls.uports = ports
        # host-side counters of our own: UDP to each fake-internet port as
        # it arrives from any sandbox veth, before anything else sees it
        rules = "".join(" counter u%d {}\n" % p for p in ports)
        rules += (" chain pre { type filter hook prerouting priority -450;"
            " policy accept;\n" + "".join("  iifname \"sg*\" ip daddr %s udp"
            " dport %d counter name u%d\n" % (INET_ORIGIN, p, p)
            for p in ports) + " }\n")
        path = cls.td.join("counters.nft")
        with open(path, "w") as f:
            f.write("table inet %s {\n%s}\n" % (TABLE, rules))
        sh(NFT, "-f", path)
        cls.addClassCleanup(sh, NFT, "delete", "table", "inet", TABLE,
            check=False)
        spec_path = cls.td.join("inet.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        cls.status_path = cls.td.join("inet.status")
        cls.inet = T.Proc([IP, "netns", "exec", INET_NS, PY, LISTENERS,
            spec_path, cls.status_path], cls.td.join("inet.log"))
        cls.addClassCleanup(cls.inet.stop)
        deadline = time.time() + 15 * T.SLOW
        while not os.path.exists(cls.status_path):
            if not cls.inet.alive() or time.time() > deadline:
                raise RuntimeError("fake internet listeners did not start:\n"
                    + cls.inet.log_tail())
            time.sleep(0.05)

    # ------------------------------------------------------------ helpers

    @staticmethod
    def sent(port):
        """Packets to the fake internet's UDP port that left a sandbox."""
        r = sh(NFT, "-j", "list", "counter", "inet", TABLE, "u%d" % port)
        for o in json.loads(r.stdout)["nftables"]:
            if "counter" in o:
                return o["counter"]["packets"]
        raise AssertionError("no counter u%d" % port)

    def inet_counts(self):
        for _ in range(50):
            try:
                with open(self.status_path) as f:
                    s = json.load(f)["servers"]
                return {k: v["conn_count"] for k, v in s.items()}
            except (OSError, ValueError):
                time.sleep(0.02)
        raise AssertionError("cannot read the fake internet's counts")

    def run_in(self, rt, sid, policy, cmd, timeout=120):
        r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", policy, "--runtime", rt, "--id", sid, "--", *cmd,
            timeout=timeout)
        self.addCleanup(self.rm, sid)
        return r

    def rm(self, sid):
        if sid in self.registered() or os.path.exists(
                "/run/sandgate/bundles/" + sid):
            sh(T.BIN, "sandbox", "rm", "-c", self.gw.cfg_path, sid,
                check=False)

    def start(self, rt, sid, policy):
        """A sandbox that sleeps, in the background; its gateway address."""
        log = self.td.join(sid + ".log")
        out = open(log, "w")
        p = subprocess.Popen([T.BIN, "sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", policy, "--runtime", rt, "--id", sid, "--", "sleep",
            "300"], stdout=out, stderr=subprocess.STDOUT, env=T.clean_env())
        out.close()
        self.addCleanup(self.stop, p, sid)
        deadline = time.time() + 60 * T.SLOW
        while time.time() < deadline and p.poll() is None and \
                sid not in self.registered():
            time.sleep(0.2)
        self.assertIsNone(p.poll(), "sandbox %s did not start: %s" % (sid,
            slurp(log)))
        time.sleep(1)
        r = sh(IP, "-o", "-4", "addr", "show", "dev", veth_name(sid))
        f = r.stdout.split()
        return p, f[f.index("inet") + 1].split("/")[0]

    def stop(self, p, sid):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(60 * T.SLOW)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.rm(sid)

    def rows(self, sid, settle=2.0, **match):
        """Audit rows of sid matching, once the asynchronous writer has had
        time for the stragglers."""
        self.gw.wait_audit(sandbox=sid, **match)
        time.sleep(settle)
        return self.gw.audit_rows(sandbox=sid, **match)

    def runtimes(self):
        return [rt for rt, p in RUNTIMES.items() if os.access(p, os.X_OK)]

    @staticmethod
    def fmt(rows):
        return "\n".join(" ".join(str(x.get(k)) for k in ("kind", "host",
            "port", "method", "decision", "rule", "reason")) for x in rows)

    @staticmethod
    def raw_drops(veth):
        r = sh(NFT, "-j", "list", "chain", "inet", "sandgate", "raw_" + veth)
        n = 0
        for o in json.loads(r.stdout)["nftables"]:
            for e in o.get("rule", {}).get("expr", []):
                if "counter" in e:
                    n += e["counter"]["packets"]
        return n

    # ------------------------------------------------------------ tests

    def test_01_udp_flow_one_row(self):
        """
        docs/sandbox.md "Drops are audited": "The nat chain sees only the
        first packet of each flow, so every UDP flow (but DNS), ICMP flow
        or other protocol a sandbox tries becomes one audit row -- kind
        `transparent`, decision `deny`, rule `sandbox-network`, reason
        `protocol-blocked` ...". Also SPEC §9 / src/proxy/proxy_nflog.c
        ("the first packet of every flow").

        Sent from inside (each runtime): one UDP socket, 8 datagrams to
        198.19.X.2:P, 0.25 s apart (4/s, far under the 20/s limit), i.e.
        one flow, then it stays alive 3 s (the kernel batches NFLOG
        messages for up to a second; see test_06). Nothing reaches P
        (checked), and the rows are counted.

        What happens: one row per datagram (8), not one per flow. The
        packets are dropped by the input chain before conntrack confirms
        their entry, so every datagram is again the "first packet" of a
        new unconfirmed conntrack entry and passes the nat chain's `log`
        rule again. A sandbox can thus write 20 deny rows a second, for
        ever, with one socket (the rate limit is the only bound).
        """
        def one(rt):
            sid = "prb%s-flow-%s" % (TAG, rt)
            port = self.uports[0 if rt == "crun" else 1]
            c0 = self.inet_counts()
            r = self.run_in(rt, sid, "web", ["python3", "-c", UDPFLOW,
                INET_ORIGIN, str(port), "8", "0.25", "3"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            out = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual(out["sent"], 8, out)
            self.assertEqual(self.sent(port), 8, "the datagrams did not "
                "all leave the sandbox")
            c1 = self.inet_counts()
            self.assertEqual(c1, c0, "UDP reached the fake internet")
            rows = self.rows(sid, port=port, method="UDP")
            print("\n  %s: 8 datagrams of one flow -> %d rows" % (rt,
                len(rows)), file=sys.stderr)
            self.assertTrue(rows, "no audit row for the dropped UDP flow")
            for x in rows:
                self.assertEqual((x["decision"], x["rule"], x["reason"]),
                    ("deny", "sandbox-network", "protocol-blocked"), x)
            self.assertEqual(len(rows), 1, "one UDP flow (one socket, "
                "sport %s -> %s:%d, 8 datagrams) made %d audit rows:\n%s" % (
                out["sport"], INET_ORIGIN, port, len(rows), self.fmt(rows)))
            self.assertEqual(leftovers(sid), [])
        for rt in self.runtimes():
            with self.subTest(runtime=rt):
                one(rt)

    def test_02_dns_listener_port_direct(self):
        """
        docs/sandbox.md: the input chain accepts "to D, TCP and UDP DNS
        port" (for a wildcard listener D is the sandbox's gateway address
        .1), and "every UDP flow (but DNS) ... becomes one audit row --
        ... decision `deny` ... -- before the filter chains drop it".

        Sent from inside (each runtime): `dig -p DPORT @.1 allowed.test A`,
        i.e. a DNS query straight to the DNS listener's own port on the
        gateway address instead of port 53. The input chain lets it in and
        the gateway answers it (allowed.test -> 198.19.X.2), which is the
        gateway itself, so no escape; but the pre_ chain's `udp dport 53`
        redirect does not match, so the packet falls to the `log` rule and
        the gateway writes a row "transparent UDP .1:DPORT deny
        sandbox-network protocol-blocked" for a datagram that was delivered
        and answered: the audit log says denied for what went through
        (src/sandbox/sandbox_nft.c rules_pre logs everything that is not
        port 53 or TCP, while rules_in accepts D:dport).
        """
        def one(rt):
            sid = "prb%s-dnsp-%s" % (TAG, rt)
            r = self.run_in(rt, sid, "web", ["sh", "-c",
                "set -- $(sed -n 's/^nameserver //p' /etc/resolv.conf); gw=$1;"
                " dig +tries=1 +time=3 -p %d @$gw allowed.test A; sleep 3" %
                self.dport])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("status: NOERROR", r.stdout)
            self.assertIn(INET_ORIGIN, r.stdout)
            dns = self.gw.wait_audit(sandbox=sid, kind="dns",
                host="allowed.test")
            self.assertTrue(dns, "no dns row")
            bogus = self.rows(sid, settle=1.5, port=self.dport,
                rule="sandbox-network")
            self.assertEqual(bogus, [], "a DNS query to the DNS listener's "
                "own port was answered, yet audited as dropped:\n" +
                self.fmt(bogus))
            self.assertEqual(leftovers(sid), [])
        for rt in self.runtimes():
            with self.subTest(runtime=rt):
                one(rt)

    def test_03_dns_over_tcp_elsewhere(self):
        """
        docs/sandbox.md: "a DNS query to `.1` ... or to any address reaches
        the gateway's DNS listener, which answers only names the sandbox's
        policy allows"; pre_ chain "UDP and TCP port 53 -> dnat to D".
        docs/protocols.md: the DNS listener takes UDP and TCP.

        Sent from inside (each runtime): `dig +tcp @198.19.X.2` (a resolver
        in the fake internet, which listens on TCP and UDP 53) for
        allowed.test and denied.test, and `dig +tcp @.1` for denied.test.
        Held: the gateway answers (198.19.X.2 / NXDOMAIN + EDE 15 naming
        the policy), the outside resolver counts nothing, dns rows exist.
        """
        def one(rt):
            sid = "prb%s-dnst-%s" % (TAG, rt)
            c0 = self.inet_counts()
            r = self.run_in(rt, sid, "web", ["sh", "-c",
                "set -- $(sed -n 's/^nameserver //p' /etc/resolv.conf); gw=$1;"
                " for q in '@%s allowed.test' '@%s denied.test'"
                " \"@$gw denied.test\"; do echo ==== $q;"
                " dig +tcp +tries=1 +time=5 $q A; done" % (INET_ORIGIN,
                INET_ORIGIN)])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            parts = r.stdout.split("==== ")[1:]
            self.assertEqual(len(parts), 3, r.stdout)
            self.assertIn("status: NOERROR", parts[0], parts[0])
            self.assertRegex(parts[0], r"allowed\.test\.\s+\d+\s+IN\s+A\s+" +
                re.escape(INET_ORIGIN))
            for p in parts[1:]:
                self.assertIn("status: NXDOMAIN", p, p)
                self.assertIn("EDE: 15", p, p)
            c1 = self.inet_counts()
            self.assertEqual((c1["tcp53"], c1["udp53"]),
                (c0["tcp53"], c0["udp53"]), "the outside resolver was reached")
            self.assertTrue(self.gw.wait_audit(sandbox=sid, kind="dns",
                host="allowed.test", decision="allow"))
            self.assertTrue(self.gw.wait_audit(sandbox=sid, kind="dns",
                host="denied.test", decision="deny"))
            self.assertEqual(leftovers(sid), [])
        for rt in self.runtimes():
            with self.subTest(runtime=rt):
                one(rt)

    def test_04_ip_options_fragments_multicast(self):
        """
        docs/sandbox.md: "other UDP ... is dropped", each flow "one audit
        row ... `host`/`ip`/`port` the destination".

        Sent from inside (each runtime): UDP with an IP record-route option
        (IHL 7) to 198.19.X.2:P1; a 3000-byte UDP datagram with DF off
        (fragments on the 1500-byte veth) to :P2; UDP to 239.255.77.77:P3.
        Held: nothing reaches P1/P2; each has a deny row
        (`sandbox-network`) naming the right destination and port (under
        runsc the IP option, when gVisor refuses it, is not required).
        """
        def one(rt):
            sid = "prb%s-odd-%s" % (TAG, rt)
            p1, p2, p3 = self.uports[2], self.uports[3], self.uports[4]
            group = "239.255.77.77"
            c0 = self.inet_counts()
            r = self.run_in(rt, sid, "web", ["python3", "-c", ODD,
                INET_ORIGIN, str(p1), str(p2), str(p3), group])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            out = json.loads(r.stdout.strip().splitlines()[-1])
            print("\n  %s: %s" % (rt, out), file=sys.stderr)
            c1 = self.inet_counts()
            self.assertEqual(c1, c0, "UDP reached the fake internet")
            # they left the sandbox (first fragments, for the big one)
            self.assertGreaterEqual(self.sent(p2), 2)
            if out["opts"] == 2:
                self.assertGreaterEqual(self.sent(p1), 2)
            want = [("frag", INET_ORIGIN, p2), ("mcast", group, p3)]
            if out["opts"] == 2:
                want.append(("opts", INET_ORIGIN, p1))
            else:
                self.assertEqual(rt, "runsc", out)
            for k, host, port in want:
                self.assertEqual(out[k], 2, out)
                rows = self.gw.wait_audit(sandbox=sid, host=host, port=port,
                    method="UDP", decision="deny", rule="sandbox-network")
                self.assertTrue(rows, "%s: no deny row for %s:%d\n%s" % (k,
                    host, port, self.fmt(self.gw.audit_rows(sandbox=sid))))
            self.assertEqual(leftovers(sid), [])
        for rt in self.runtimes():
            with self.subTest(runtime=rt):
                one(rt)

    def test_06_udp_then_exit_unaudited(self):
        """
        docs/sandbox.md "Drops are audited": "every UDP flow (but DNS), ICMP
        flow or other protocol a sandbox tries becomes one audit row -- kind
        `transparent`, decision `deny`, rule `sandbox-network` ...". SPEC /
        docs/sandbox.md "Escape tests": each drop is checked in the audit
        log.

        Sent from inside (each runtime): `sandbox run -- python3 -c ...`
        that sends 3 UDP datagrams (one flow) to 198.19.X.2:P and exits at
        once -- the shape of a one-shot exfiltration attempt. A counter of
        the test's own (prerouting, before everything) shows the 3
        datagrams reached the host; the fake internet's listener got
        nothing. Control: the same with the sandbox alive 2 s after
        sending gets its row.

        What happens: no audit row at all. The kernel batches NFLOG
        messages (nfnetlink_log's defaults: flush after 1 s or 100
        packets; src/proxy/proxy_nflog.c proxy_nflog_start sets neither
        NFULA_CFG_TIMEOUT nor NFULA_CFG_QTHRESH, and the launcher's `log
        group G` rule no queue-threshold), so the message reaches the
        gateway up to a second later; by then the launcher has deleted the
        registration (DELETE /v1/sandboxes/<id>), nflog_packet's
        policy_registry_lookup finds nobody for the source address, and the
        packet is skipped as "another gateway's sandbox, or nobody's". The
        same loses the last second of drops of any sandbox (test_01 saw 5
        rows for 8 datagrams before it waited at the end).
        """
        def one(rt):
            # control: the same, but the sandbox lives 2 s longer: a row
            sid = "prb%s-slow-%s" % (TAG, rt)
            port = self.uports[7]
            r = self.run_in(rt, sid, "web", ["python3", "-c", UDPFLOW,
                INET_ORIGIN, str(port), "1", "0", "2"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(self.gw.wait_audit(sandbox=sid, port=port,
                method="UDP"), "control: no row even with the sandbox alive")
            sid = "prb%s-quick-%s" % (TAG, rt)
            port = self.uports[5 if rt == "crun" else 6]
            c0 = self.inet_counts()
            r = self.run_in(rt, sid, "web", ["python3", "-c", UDPFLOW,
                INET_ORIGIN, str(port), "3", "0"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            out = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual(out["sent"], 3, out)
            self.assertEqual(self.sent(port), 3, "the datagrams did not "
                "all leave the sandbox")
            self.assertEqual(self.inet_counts(), c0,
                "UDP reached the fake internet")
            rows = self.gw.wait_audit(timeout=5, sandbox=sid, port=port,
                method="UDP")
            print("\n  %s: 3 datagrams, then exit -> %d rows" % (rt,
                len(rows)), file=sys.stderr)
            self.assertTrue(rows, "sandbox %s sent 3 UDP datagrams to %s:%d "
                "and exited: no audit row; its rows:\n%s" % (sid,
                INET_ORIGIN, port, self.fmt(self.gw.audit_rows(sandbox=sid))))
            self.assertEqual(leftovers(sid), [])
        for rt in self.runtimes():
            with self.subTest(runtime=rt):
                one(rt)

    def test_05_take_another_sandboxs_identity(self):
        """
        docs/sandbox.md: raw chain "source not the guest (.2) drop
        (counted) before conntrack sees it"; "a packet with a forged source
        (`127.0.0.1`, the host's, another sandbox's) is dropped in the raw
        chain". The gateway knows a sandbox by its source address, so a
        sandbox that could send from another's would get that one's policy.

        Sandbox A runs policy `closed`, sandbox B policy `web` (which allows
        allowed.test). Root in A's network namespace gives eth0 B's MAC and
        B's guest address, then, from B's address: TCP to 198.19.X.2:80
        with Host allowed.test, and a UDP DNS query for allowed.test to A's
        gateway address. Meanwhile a packet socket on A's eth0 listens
        while B itself sends a marked UDP datagram and a DNS query.
        Held: no answer to either, A's raw chain counts the drops, no row
        under B, nothing of B's traffic on A's link.
        """
        rt = self.runtimes()[0]
        sid_a, sid_b = "prb%s-ida" % TAG, "prb%s-idb" % TAG
        pa, gw_a = self.start(rt, sid_a, "closed")
        pb, gw_b = self.start(rt, sid_b, "web")
        guest_b = plus1(gw_b)
        ns_a, ns_b = "sandgate-" + sid_a, "sandgate-" + sid_b
        va = veth_name(sid_a)
        # control: B itself gets allowed.test
        r = sh(T.BIN, "sandbox", "exec", "-c", self.gw.cfg_path, sid_b, "--",
            "dig", "+short", "+tries=1", "+time=3", "allowed.test", "A",
            check=False)
        self.assertEqual(r.stdout.strip(), INET_ORIGIN, r.stdout)
        # the sniffer on A's link, while B sends
        sniff = subprocess.Popen([IP, "netns", "exec", ns_a, PY, "-c", SNIFF,
            "6", "PRBMARK" + TAG], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: sniff.poll() is None and sniff.kill())
        self.assertEqual(sniff.stdout.readline().strip(), "sniffing")
        sh(T.BIN, "sandbox", "exec", "-c", self.gw.cfg_path, sid_b, "--",
            "python3", "-c", "import socket; u=socket.socket(2,2); "
            "[u.sendto(b'PRBMARK%s', (%r, 9999)) for _ in range(3)]; "
            "[u.sendto(b'PRBMARK%s', (%r, 53)) for _ in range(3)]" % (
            TAG, gw_a, TAG, gw_b), check=False)
        sniffed = json.loads(sniff.communicate(timeout=30)[0].strip()
            .splitlines()[-1])
        time.sleep(1.5)  # B's own rows (its UDP to 9999) are in by now
        rows_b0 = len(self.gw.audit_rows(sandbox=sid_b))
        # A takes B's identity
        mac_b = sh(IP, "-n", ns_b, "-j", "link", "show", "eth0").stdout
        mac_b = json.loads(mac_b)[0]["address"]
        sh(IP, "-n", ns_a, "link", "set", "eth0", "address", mac_b)
        sh(IP, "-n", ns_a, "addr", "add", guest_b + "/32", "dev", "eth0")
        drops0 = self.raw_drops(va)
        r = sh(IP, "netns", "exec", ns_a, PY, "-c", FORGED, guest_b,
            INET_ORIGIN, gw_a, check=False)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        drops = self.raw_drops(va) - drops0
        time.sleep(1.5)
        rows_b = self.gw.audit_rows(sandbox=sid_b)[rows_b0:]
        print("\n  forged from %s in %s: %s; raw drops %d; sniffed %s" % (
            guest_b, sid_a, out, drops, sniffed), file=sys.stderr)
        self.assertTrue(out["tcp"].startswith("error"), out)
        self.assertTrue(out["dns"].startswith("error"), out)
        # SYN + retransmissions and 3 DNS datagrams
        self.assertGreaterEqual(drops, 4, "raw chain did not count")
        self.assertEqual(rows_b, [], "rows under B for A's forged packets:\n"
            + self.fmt(rows_b))
        self.assertEqual(self.gw.audit_rows(sandbox=sid_a,
            host="allowed.test"), [])
        self.assertEqual(sniffed["marked"], 0, sniffed)
        self.assertNotIn(guest_b, sniffed["srcs"], sniffed)
        self.stop(pa, sid_a)
        self.stop(pb, sid_b)
        self.assertEqual(leftovers(sid_a) + leftovers(sid_b), [])


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
