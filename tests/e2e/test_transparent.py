#!/usr/bin/python3
"""
End-to-end test of the transparent and DNS listeners together (SPEC §5
"DNS", "Transparent"; issue 6 points 4 and 6): a sandbox network namespace
whose only way out is nftables redirection to the gateway, a "fake
internet" namespace with the origins, and clients inside the sandbox with no
proxy settings at all. Needs root, `ip netns` and `nft`; exits 77 otherwise.

Topology (names and subnets random per run, all torn down at the end):
  sgt-sb-XXXX   198.18.A.2/30 --veth-- 198.18.A.1/30  host (sandgate)
  sgt-net-XXXX  198.19.B.2-.5/29 --veth-- 198.19.B.1/29  host
The IPv6 case (TransparentV6Test) builds its own, dual-stack, adding
  sgt-sb-XXXX   2001:2:0:C::2/64 --veth-- 2001:2:0:C::1/64  host
  sgt-net-XXXX  2001:2:0:D::2-5/64 --veth-- 2001:2:0:D::1/64  host
with a second gateway whose transparent listener is on [::] (IPv6 only);
its DNS stays on IPv4, the AAAA answers are what matter.
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "data"))
import sgtest as T  # noqa: E402
import transparent_helpers as H  # noqa: E402

IP = "/usr/sbin/ip"
NFT = "/usr/sbin/nft"
PY = "/usr/bin/python3"
SYSCTL = "/usr/sbin/sysctl"
ORIGINS = os.path.join(HERE, "data", "transparent_origins.py")
ORIGINS6 = os.path.join(HERE, "data", "transparent_origins6.py")
ALERT_ACCESS_DENIED = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31])

# A raw client run inside the sandbox: connect, send, read what comes back.
RAW_CLIENT = r"""
import json, socket, sys, time
host, port, send, wait = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
out = {"connected": False, "received": "", "end": None}
s = socket.socket()
s.settimeout(wait)
try:
    s.connect((host, port))
    out["connected"] = True
    if send:
        s.sendall(send.encode("latin-1"))
    deadline = time.time() + wait
    while time.time() < deadline:
        b = s.recv(65536)
        if not b:
            out["end"] = "eof"
            break
        out["received"] += b.decode("latin-1")
        if "\n" in out["received"] and len(out["received"]) >= len(send) + 1 \
                and out["received"].count("\n") >= 2:
            out["end"] = "data"
            break
except ConnectionResetError:
    out["end"] = "reset"
except ConnectionRefusedError:
    out["end"] = "refused"
except socket.timeout:
    out["end"] = out["end"] or "timeout"
except OSError as e:
    out["end"] = "error: %s" % e
print(json.dumps(out))
"""

# Connect, read the server's banner, say nothing for `quiet` seconds, then
# send either a real ClientHello (for `sni`) or raw bytes; what came back.
LATE_CLIENT = r"""
import json, socket, ssl, sys, time
host, port, quiet, what = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
out = {"banner": "", "received": "", "end": None}
s = socket.create_connection((host, port), timeout=10)
try:
    out["banner"] = s.recv(4096).decode("latin-1")
    time.sleep(quiet)
    if what.startswith("tls:"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        inc, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, outb, server_hostname=what[4:])
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        s.sendall(outb.read())
    else:
        s.sendall(what.encode("latin-1"))
    while True:
        b = s.recv(65536)
        if not b:
            out["end"] = "eof"
            break
        out["received"] += b.decode("latin-1")
        if what in out["received"]:
            out["end"] = "data"
            break
except ConnectionResetError:
    out["end"] = "reset"
except socket.timeout:
    out["end"] = out["end"] or "timeout"
except OSError as e:
    out["end"] = "error: %s" % e
print(json.dumps(out))
"""

RAW_UDP = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(5):
    s.sendto(b"leak-%d" % i, (sys.argv[1], int(sys.argv[2])))
"""


def run(argv, check=True, input=None, timeout=30):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=T.clean_env(), timeout=timeout * T.SLOW, input=input)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s%s" % (" ".join(argv), r.returncode,
            r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")))
    return r


def preflight():
    if os.geteuid() != 0:
        T.skip_file("needs root (network namespaces, veth, nftables)")
    for tool in (IP, NFT, SYSCTL):
        if not os.access(tool, os.X_OK):
            T.skip_file("%s is not installed (apt-get install iproute2 nftables)"
                % tool)
    probe = "sgt-probe-%04x" % random.getrandbits(16)
    r = subprocess.run([IP, "netns", "add", probe], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    if r.returncode != 0:
        T.skip_file("`ip netns add` does not work here: %s" %
            r.stderr.decode(errors="replace").strip())
    subprocess.run([IP, "netns", "del", probe])
    tbl = "sgt_probe_%04x" % random.getrandbits(16)
    r = subprocess.run([NFT, "-f", "-"], input=(
        "table inet %s {\n chain p { type nat hook prerouting priority dstnat; "
        "policy accept; tcp dport 1 redirect to :2; }\n}\n" % tbl).encode(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        T.skip_file("nftables nat does not work here: %s" %
            r.stderr.decode(errors="replace").strip())
    subprocess.run([NFT, "delete", "table", "inet", tbl])


def pick_octet(prefix, taken):
    """A third octet under prefix that no local address or route uses."""
    for _ in range(200):
        o = random.randint(1, 254)
        if "%s.%d." % (prefix, o) not in taken:
            return o
    raise RuntimeError("no free %s.x subnet" % prefix)


def pick_v6_subnet(taken, avoid=()):
    """A /64 under 2001:2::/48 (the benchmarking prefix) not in use here."""
    for _ in range(200):
        pfx = "2001:2:0:%x::" % random.randint(1, 0xfffe)
        if pfx not in taken and pfx not in avoid:
            return pfx
    raise RuntimeError("no free 2001:2:0:x::/64")


class Topology:
    """The namespaces, veths, nftables table and resolv.conf; teardown() undoes all."""

    def __init__(self, tmp, v6=False):
        self.tmp = tmp
        self.v6 = v6
        self.sfx = "%04x" % random.getrandbits(16)
        self.sb = "sgt-sb-" + self.sfx
        self.net = "sgt-net-" + self.sfx
        self.veth_sb = "sgtsb" + self.sfx           # host side, sandbox link
        self.veth_net = "sgtnt" + self.sfx          # host side, fake internet
        self.table = "sgt_" + self.sfx
        taken = run([IP, "-4", "-o", "addr"]).stdout.decode() + \
            run([IP, "-4", "route"]).stdout.decode()
        a = pick_octet("198.18", taken)
        b = pick_octet("198.19", taken)
        self.gw_ip = "198.18.%d.1" % a              # host side of the sandbox
        self.sb_ip = "198.18.%d.2" % a
        self.host_net_ip = "198.19.%d.1" % b
        self.net_ip = ["198.19.%d.%d" % (b, i) for i in range(0, 8)]
        if v6:
            taken6 = run([IP, "-6", "-o", "addr"]).stdout.decode() + \
                run([IP, "-6", "route"]).stdout.decode()
            c = pick_v6_subnet(taken6)
            d = pick_v6_subnet(taken6, (c,))
            self.gw_ip6, self.sb_ip6 = c + "1", c + "2"
            self.host_net_ip6 = d + "1"
            self.net_ip6 = [d + "%d" % i for i in range(0, 8)]
        self.netns_etc = "/etc/netns/" + self.sb
        self.made_etc_netns = False
        self.done = []        # undo actions, run in reverse
        self.nft_loaded = False

    def sh(self, *argv):
        return run(list(argv))

    def build(self):
        ip = IP
        self.sh(ip, "netns", "add", self.sb)
        self.done.append(lambda: run([ip, "netns", "del", self.sb], check=False))
        self.sh(ip, "netns", "add", self.net)
        self.done.append(lambda: run([ip, "netns", "del", self.net], check=False))
        for ns in (self.sb, self.net):
            self.sh(ip, "-n", ns, "link", "set", "lo", "up")
            if self.v6:
                # links moved in get these: no duplicate address detection
                run([ip, "netns", "exec", ns, SYSCTL, "-qw",
                    "net.ipv6.conf.default.accept_dad=0",
                    "net.ipv6.conf.all.accept_dad=0"])
            else:
                run([ip, "netns", "exec", ns, SYSCTL, "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        # the sandbox link
        self.sh(ip, "link", "add", self.veth_sb, "type", "veth", "peer",
            "name", self.veth_sb + "p")
        self.done.append(lambda: run([ip, "link", "del", self.veth_sb],
            check=False))
        self.v6_off_or_nodad(self.veth_sb)
        self.sh(ip, "link", "set", self.veth_sb + "p", "netns", self.sb)
        self.sh(ip, "addr", "add", self.gw_ip + "/30", "dev", self.veth_sb)
        self.sh(ip, "link", "set", self.veth_sb, "up")
        self.sh(ip, "-n", self.sb, "addr", "add", self.sb_ip + "/30", "dev",
            self.veth_sb + "p")
        self.sh(ip, "-n", self.sb, "link", "set", self.veth_sb + "p", "up")
        self.sh(ip, "-n", self.sb, "route", "add", "default", "via", self.gw_ip)
        if self.v6:
            self.sh(ip, "addr", "add", self.gw_ip6 + "/64", "dev",
                self.veth_sb, "nodad")
            self.sh(ip, "-n", self.sb, "addr", "add", self.sb_ip6 + "/64",
                "dev", self.veth_sb + "p", "nodad")
            self.sh(ip, "-n", self.sb, "-6", "route", "add", "default", "via",
                self.gw_ip6)
        # the fake internet link
        self.sh(ip, "link", "add", self.veth_net, "type", "veth", "peer",
            "name", self.veth_net + "p")
        self.done.append(lambda: run([ip, "link", "del", self.veth_net],
            check=False))
        self.v6_off_or_nodad(self.veth_net)
        self.sh(ip, "link", "set", self.veth_net + "p", "netns", self.net)
        self.sh(ip, "addr", "add", self.host_net_ip + "/29", "dev", self.veth_net)
        self.sh(ip, "link", "set", self.veth_net, "up")
        for i in (2, 3, 4, 5):
            self.sh(ip, "-n", self.net, "addr", "add", self.net_ip[i] + "/29",
                "dev", self.veth_net + "p")
        self.sh(ip, "-n", self.net, "link", "set", self.veth_net + "p", "up")
        if self.v6:
            self.sh(ip, "addr", "add", self.host_net_ip6 + "/64", "dev",
                self.veth_net, "nodad")
            for i in (2, 3, 4, 5):
                self.sh(ip, "-n", self.net, "addr", "add",
                    self.net_ip6[i] + "/64", "dev", self.veth_net + "p",
                    "nodad")
        # Forwarding on for these two links only (net.ipv4.ip_forward
        # untouched): the nftables forward chain alone must stop leaks.
        for v in (self.veth_sb, self.veth_net):
            run([SYSCTL, "-qw", "net.ipv4.conf.%s.forwarding=1" % v])
        # resolv.conf for processes run with ip netns exec in the sandbox
        if not os.path.isdir("/etc/netns"):
            os.makedirs("/etc/netns")
            self.made_etc_netns = True
        os.makedirs(self.netns_etc)
        self.done.append(self._rm_etc)
        with open(os.path.join(self.netns_etc, "resolv.conf"), "w") as f:
            f.write("nameserver %s\noptions timeout:2 attempts:1\n" % self.gw_ip)
        # wait until the links are up (veth carrier)
        deadline = time.time() + 5
        while time.time() < deadline:
            r = run([IP, "netns", "exec", self.sb, IP, "route", "get",
                self.net_ip[2]], check=False)
            if r.returncode == 0:
                break
            time.sleep(0.05)
        if self.v6:
            self.wait_v6()

    def v6_off_or_nodad(self, dev):
        """The host side of a veth: no IPv6 at all, or IPv6 without DAD."""
        if self.v6:
            run([SYSCTL, "-qw", "net.ipv6.conf.%s.accept_dad=0" % dev])
        else:
            run([SYSCTL, "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % dev],
                check=False)

    def wait_v6(self):
        """Until no address is tentative and the sandbox has a route out."""
        deadline = time.time() + 10
        while time.time() < deadline:
            out = run([IP, "-6", "addr"]).stdout.decode()
            for ns in (self.sb, self.net):
                out += run([IP, "-n", ns, "-6", "addr"]).stdout.decode()
            r = run([IP, "netns", "exec", self.sb, IP, "-6", "route", "get",
                self.net_ip6[2]], check=False)
            if "tentative" not in out and r.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("IPv6 addresses not ready")

    def _rm_etc(self):
        shutil.rmtree(self.netns_etc, ignore_errors=True)
        if self.made_etc_netns:
            try:
                os.rmdir("/etc/netns")
            except OSError:
                pass

    def load_nft(self, tport, dport):
        v = self.veth_sb
        # IPv6: whatever address the redirect picked on the link, and
        # neighbour discovery, which the drop below would otherwise eat
        v6 = ("""iifname "%(v)s" meta nfproto ipv6 tcp dport %(tp)d accept
        iifname "%(v)s" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept
""" % {"v": v, "tp": tport}) if self.v6 else ""
        rules = """
table inet %(t)s {
    chain prerouting {
        type nat hook prerouting priority dstnat; policy accept;
        iifname "%(v)s" udp dport 53 redirect to :%(d)d
        iifname "%(v)s" tcp dport 53 redirect to :%(d)d
        iifname "%(v)s" tcp dport != %(tp)d redirect to :%(tp)d
    }
    chain input {
        type filter hook input priority filter; policy accept;
        iifname "%(v)s" ip daddr %(gw)s tcp dport { %(tp)d, %(d)d } accept
        iifname "%(v)s" ip daddr %(gw)s udp dport %(d)d accept
        %(v6)s
        iifname "%(v)s" counter drop
    }
    chain forward {
        type filter hook forward priority filter; policy accept;
        iifname "%(v)s" counter drop
        oifname "%(v)s" drop
    }
}
""" % {"t": self.table, "v": v, "d": dport, "tp": tport, "gw": self.gw_ip,
       "v6": v6}
        with open(os.path.join(self.tmp, "nft.rules"), "w") as f:
            f.write(rules)
        run([NFT, "-f", "-"], input=rules.encode())
        self.done.append(lambda: run([NFT, "delete", "table", "inet",
            self.table], check=False))

    def counter(self, chain):
        """Packets counted by the drop rule of chain."""
        r = run([NFT, "-j", "list", "chain", "inet", self.table, chain])
        for item in json.loads(r.stdout)["nftables"]:
            rule = item.get("rule")
            if not rule:
                continue
            for e in rule["expr"]:
                if "counter" in e:
                    return e["counter"]["packets"]
        raise AssertionError("no counter in chain " + chain)

    def teardown(self):
        while self.done:
            f = self.done.pop()
            try:
                f()
            except Exception as e:  # keep tearing down the rest
                print("teardown: %r" % e, file=sys.stderr)


_topo = []


def _teardown_all():
    # after an interrupt unittest has not run the class cleanups
    for cls in (TransparentTest, TransparentV6Test):
        try:
            cls.doClassCleanups()
        except Exception as e:
            print("cleanup: %r" % e, file=sys.stderr)
    for t in _topo:
        t.teardown()


def _on_signal(signum, frame):
    # unittest re-raises KeyboardInterrupt, so the run stops at once
    raise KeyboardInterrupt("signal %d" % signum)


def class_topology(cls, prefix):
    """For another file's test class: a temp dir (0755, for the gateway's
    user) and a built Topology in it, both torn down with the class; sets
    cls.td, cls.topo, cls.nsx. Returns the directory."""
    cls.td = T.TempDir(prefix=prefix)
    cls.addClassCleanup(cls.td.cleanup)
    d = cls.td.path
    os.chmod(d, 0o755)
    topo = cls.topo = Topology(d)
    _topo.append(topo)
    cls.addClassCleanup(topo.teardown)
    topo.build()
    cls.nsx = [IP, "netns", "exec", topo.sb]
    return d


def run_main():
    """Another file's main: preflight, signals end the run, topologies go."""
    preflight()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _on_signal)
    try:
        T.main()
    finally:
        for t in _topo:
            t.teardown()


class TransparentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir(prefix="sgt-transparent-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.chmod(d, 0o755)
        topo = cls.topo = Topology(d)
        _topo.append(topo)
        cls.addClassCleanup(topo.teardown)
        topo.build()
        cls.nsx = [IP, "netns", "exec", topo.sb]
        n = topo.net_ip
        cls.main_ip, cls.evil_ip, cls.cidr_ip, cls.ssh_ip = n[2], n[3], n[4], n[5]

        # origins in the fake internet
        cls.testca, crt, key = H.make_ca_and_leaf(d,
            ["allowed.test", "intercept.test"])
        spec = [
            {"id": "http-main", "kind": "http", "host": n[2], "port": 80},
            {"id": "https-main", "kind": "https", "host": n[2], "port": 443,
             "cert": crt, "key": key},
            {"id": "rec-main", "kind": "record", "host": n[2], "port": 2323},
            {"id": "udp-main", "kind": "udp", "host": n[2], "port": 9999},
            {"id": "http-evil", "kind": "http", "host": n[3], "port": 80},
            {"id": "https-evil", "kind": "https", "host": n[3], "port": 443,
             "cert": crt, "key": key},
            {"id": "banner-cidr", "kind": "banner", "host": n[4], "port": 2222,
             "banner": "SSH-2.0-cidr-origin\r\n"},
            {"id": "banner-ssh", "kind": "banner", "host": n[5], "port": 22,
             "banner": "SSH-2.0-named-origin\r\n"},
        ]
        cls.origins, cls.status_path = H.start_origins(d, topo.net, ORIGINS,
            spec, "origins", cls.addClassCleanup)

        # upstream DNS for the gateway (records with a real TTL)
        recs = [("allowed.test", n[2]), ("intercept.test", n[2]),
                ("forbidden.test", n[3]), ("ssh.test", n[5])]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)

        cls.tport = cls.free_gw_port()
        cls.dport = cls.free_gw_port(udp=True, avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)

        cls.pol = "transp"
        policy = {
            "sandboxes": [{"id": "sbx", "policy": cls.pol,
                           "source": [topo.sb_ip + "/32"]}],
            "policies": [{
                "name": cls.pol,
                "allow": [
                    {"host": "allowed.test", "ports": [80, 443, 2323]},  # 0
                    {"host": "intercept.test", "ports": [443],           # 1
                     "tls": "intercept", "paths": ["/ok/*"]},
                    {"cidr": n[4] + "/32", "ports": [2222],              # 2
                     "opaque": True},
                    {"host": "ssh.test", "ports": [22], "opaque": True}, # 3
                ],
                "deny": [{"host": "denied-by-rule.test"}],
                "allow_private": ["198.19.0.0/16"],
            }],
        }
        cls.gw = T.Gateway(d, cls.dns, {"transp.yaml": policy}, extra={
            "listen": {"transparent": "%s:%d" % (topo.gw_ip, cls.tport),
                       "dns": "%s:%d" % (topo.gw_ip, cls.dport)},
            "upstream": {"ca_bundle": cls.testca},
        })
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        cls.gwca = os.path.join(d, "certs", "ca.crt")
        if not T.wait_tcp(topo.gw_ip, cls.tport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("transparent listener not up:\n" +
                cls.gw.log_tail())

    @classmethod
    def free_gw_port(cls, udp=False, avoid=None):
        for _ in range(50):
            p = T.free_port()
            if p == avoid:
                continue
            if not T.port_in_use(p, cls.topo.gw_ip) and not (
                    udp and T.port_in_use(p, cls.topo.gw_ip, udp=True)):
                return p
        raise RuntimeError("no free port on " + cls.topo.gw_ip)

    # ------------------------------------------------------------ helpers

    def status(self, sid):
        for _ in range(50):
            try:
                with open(self.status_path) as f:
                    return json.load(f)["servers"][sid]
            except (OSError, ValueError):
                time.sleep(0.02)
        raise AssertionError("cannot read the origins' status")

    def conns(self, sid):
        return self.status(sid)["conn_count"]

    def wait_conns(self, sid, n, timeout=3.0):
        """Poll until the origin counted n connections; the last count."""
        deadline = time.time() + timeout * T.SLOW
        while True:
            c = self.conns(sid)
            if c >= n or time.time() > deadline:
                return c
            time.sleep(0.05)

    def settled_conns(self, sid):
        """The count after the status file had time to catch up (100 ms)."""
        time.sleep(0.15)
        return self.conns(sid)

    def sb_curl(self, url, args=()):
        return H.curl(url, prefix=self.nsx, args=list(args), tmp=self.td.path,
            timeout=15)

    def sb_dig(self, *args):
        return H.dig(list(args), prefix=self.nsx)

    def sb_raw(self, host, port, send, wait=3.0):
        r = run(self.nsx + [PY, "-c", RAW_CLIENT, host, str(port), send,
            str(wait)], timeout=wait + 20)
        return json.loads(r.stdout.decode())

    def audit(self, pred=None, **match):
        rows = self.gw.wait_audit(pred=pred, **match)
        self.assertTrue(rows, "no audit row %r; all rows: %r" % (match,
            [(r["kind"], r["host"], r["ip"], r["port"], r["decision"],
              r["reason"]) for r in self.gw.audit_rows()][-30:]))
        return rows[-1]

    def assert_row(self, row, **want):
        for k, v in want.items():
            self.assertEqual(row[k], v, "%s: %r" % (k, row))

    # ------------------------------------------------------------ DNS

    def test_dns_allowed_via_resolv_conf(self):
        r = self.sb_dig("allowed.test", "A")            # resolv.conf, udp 53
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs(), [self.main_ip], r)
        self.assertIn("ra", r.flags, r)
        self.assertNotIn("aa", r.flags, r)
        row = self.audit(kind="dns", host="allowed.test", method="A",
            decision="allow")
        self.assert_row(row, sandbox="sbx", ip=self.main_ip, status=0,
            rule=self.pol + ":allow[0]")
        self.assertTrue(row["client"].startswith(self.topo.sb_ip + ":"), row)

    def test_dns_tcp_and_any_nameserver(self):
        # TCP 53, and a query aimed at some other server: both redirected.
        r = self.sb_dig("+tcp", "allowed.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs(), [self.main_ip], r)
        r = self.sb_dig("@" + self.topo.net_ip[2], "allowed.test", "A")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs(), [self.main_ip], r)
        self.audit(kind="dns", host="allowed.test", decision="allow",
            pred=lambda row: row["client"].startswith(self.topo.sb_ip + ":"))

    def test_dns_denied_name_ede(self):
        r = self.sb_dig("forbidden.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.answers, [], r)
        self.assertIsNotNone(r.ede, r)
        self.assertEqual(r.ede[0], 15, r)
        self.assertIn("policy " + self.pol, r.ede[2] or "", r)
        self.assertIn("policy-deny", r.ede[2] or "", r)
        row = self.audit(kind="dns", host="forbidden.test", decision="deny")
        self.assert_row(row, sandbox="sbx", status=3, reason="policy-deny",
            rule="default-deny", method="A")
        r = self.sb_dig("denied-by-rule.test", "A")
        self.assertEqual(r.status, "NXDOMAIN", r)
        self.assertEqual(r.ede[0] if r.ede else None, 15, r)
        self.assertIn(self.pol + ":deny[0]", r.ede[2] or "", r)
        self.audit(kind="dns", host="denied-by-rule.test", decision="deny",
            rule=self.pol + ":deny[0]", reason="policy-deny")

    # ------------------------------------------------------------ HTTP, TLS

    def test_http_allowed(self):
        before = self.conns("http-main")
        r = self.sb_curl("http://allowed.test/plain-http")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["origin"], "http-main", r)
        self.assertEqual(doc["path"], "/plain-http")
        self.assertEqual(doc["host"], "allowed.test")
        self.assertGreater(self.wait_conns("http-main", before + 1), before)
        row = self.audit(kind="transparent", host="allowed.test",
            path="/plain-http")
        self.assert_row(row, sandbox="sbx", decision="allow", port=80,
            ip=self.main_ip, method="GET", status=200,
            rule=self.pol + ":allow[0]")

    def test_https_passthrough(self):
        last = max([0] + [x["id"] for x in self.gw.audit_rows()])
        r = self.sb_curl("https://allowed.test/tls-pass",
            ["--cacert", self.testca])
        # verified against the test CA alone: the origin's own certificate
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.info.get("ssl_verify_result"), 0, r)
        self.assertEqual(r.json()["origin"], "https-main", r)
        row = self.audit(kind="transparent", host="allowed.test", port=443,
            decision="allow", pred=lambda x: x["id"] > last)
        self.assert_row(row, sandbox="sbx", ip=self.main_ip,
            rule=self.pol + ":allow[0]")
        self.assertIsNone(row["path"], row)    # passthrough: nothing seen

    def test_https_intercepted(self):
        r = self.sb_curl("https://intercept.test/ok/inside",
            ["--cacert", self.gwca, "--http2"])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        # ALPN offers h2 on the transparent listener too (issue 15)
        self.assertEqual(r.info.get("http_version"), "2", r)
        doc = r.json()
        self.assertEqual(doc["origin"], "https-main", r)
        self.assertEqual(doc["path"], "/ok/inside")
        self.audit(kind="transparent", host="intercept.test", path="/ok/inside",
            decision="allow", port=443, ip=self.main_ip)
        # the path rule is enforced inside the intercepted session
        r = self.sb_curl("https://intercept.test/not-ok", ["--cacert", self.gwca])
        if r.rc != 0:
            raw = self.sb_curl("https://intercept.test/not-ok",
                ["--cacert", self.gwca, "--http0.9", "--http1.1"])
            self.fail("no HTTP answer to a denied request inside the "
                "intercepted session (%r); what arrived inside TLS: %r"
                % (r, raw.body))
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        self.audit(kind="transparent", host="intercept.test", path="/not-ok",
            decision="deny", reason="policy-deny")
        # the origin's certificate is not what the client sees
        r = self.sb_curl("https://intercept.test/ok/x", ["--cacert", self.testca])
        self.assertNotEqual(r.rc, 0, r)

    # ------------------------------------------------------------ refusals

    def test_denied_name_by_ip(self):
        ev = self.conns("http-evil")
        evs = self.conns("https-evil")
        r = self.sb_curl("http://forbidden.test/by-ip",
            ["--resolve", "forbidden.test:80:" + self.evil_ip])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        row = self.audit(kind="transparent", host="forbidden.test", port=80)
        self.assert_row(row, sandbox="sbx", decision="deny",
            reason="policy-deny", status=403)
        r = self.sb_curl("https://forbidden.test/by-ip-tls",
            ["--cacert", self.testca,
             "--resolve", "forbidden.test:443:" + self.evil_ip])
        self.assertNotEqual(r.rc, 0, r)
        self.assertEqual(r.status, 0, r)
        row = self.audit(kind="transparent", host="forbidden.test", port=443)
        self.assert_row(row, decision="deny", reason="policy-deny")
        self.assertEqual(self.settled_conns("http-evil"), ev)
        self.assertEqual(self.conns("https-evil"), evs)

    def test_bare_ip_refused(self):
        ev = self.conns("http-evil")
        evs = self.conns("https-evil")
        r = self.sb_curl("http://%s/bare" % self.evil_ip)
        self.assertTrue(r.status == 403 or r.rc in (52, 56), r)
        if r.status == 403:
            self.assertEqual(r.header("X-Sandgate-Reason"), "policy-deny", r)
        row = self.audit(kind="transparent", host=self.evil_ip, port=80)
        self.assert_row(row, sandbox="sbx", decision="deny")
        # TLS to a bare IP: no SNI, no cidr rule
        r = self.sb_curl("https://%s/bare-tls" % self.evil_ip, ["-k"])
        self.assertNotEqual(r.rc, 0, r)
        row = self.audit(kind="transparent", host=self.evil_ip, port=443)
        self.assert_row(row, sandbox="sbx", decision="deny")
        # an address the sandbox resolved is no name either for HTTP
        self.sb_dig("allowed.test")
        hm = self.conns("http-main")
        r = self.sb_curl("http://%s/bare-main" % self.main_ip)
        self.assertTrue(r.status == 403 or r.rc in (52, 56), r)
        self.audit(kind="transparent", host=self.main_ip, port=80,
            decision="deny")
        self.assertEqual(self.settled_conns("http-evil"), ev)
        self.assertEqual(self.conns("https-evil"), evs)
        self.assertEqual(self.conns("http-main"), hm)

    def test_allowed_sni_to_forbidden_ip(self):
        evs = self.conns("https-evil")
        ev = self.conns("http-evil")
        r = self.sb_curl("https://allowed.test/sni-attack",
            ["--cacert", self.testca,
             "--resolve", "allowed.test:443:" + self.evil_ip])
        self.assertNotEqual(r.rc, 0, r)
        self.assertEqual(r.status, 0, r)
        row = self.audit(kind="transparent", host="allowed.test", port=443,
            decision="deny")
        self.assert_row(row, sandbox="sbx", reason="destination-ip-prohibited")
        # the same with a Host header
        r = self.sb_curl("http://allowed.test/host-attack",
            ["--resolve", "allowed.test:80:" + self.evil_ip])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"),
            "destination-ip-prohibited", r)
        row = self.audit(kind="transparent", host="allowed.test", port=80,
            decision="deny")
        self.assert_row(row, reason="destination-ip-prohibited", status=403)
        self.assertEqual(self.settled_conns("https-evil"), evs)
        self.assertEqual(self.conns("http-evil"), ev)

    def test_tls_alert_on_refusal(self):
        # a hand-made ClientHello for allowed.test aimed at the forbidden
        # address: the gateway answers with an access_denied alert
        script = (
            "import socket, ssl, sys\n"
            "ctx = ssl.create_default_context()\n"
            "ctx.check_hostname = False\nctx.verify_mode = ssl.CERT_NONE\n"
            "inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()\n"
            "o = ctx.wrap_bio(inc, out, server_hostname='allowed.test')\n"
            "try:\n    o.do_handshake()\nexcept ssl.SSLWantReadError:\n    pass\n"
            "s = socket.create_connection((sys.argv[1], 443), timeout=10)\n"
            "s.sendall(out.read())\nbuf = b''\n"
            "try:\n    while True:\n        b = s.recv(4096)\n"
            "        if not b:\n            break\n        buf += b\n"
            "except (ConnectionResetError, socket.timeout):\n    pass\n"
            "sys.stdout.write(buf.hex())\n")
        r = run(self.nsx + [PY, "-c", script, self.evil_ip])
        self.assertEqual(bytes.fromhex(r.stdout.decode()), ALERT_ACCESS_DENIED)

    def test_smuggling_through_connection(self):
        # Connection naming Content-Length must not strip the framing the
        # gateway relayed by: the body is no second request at the origin
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        inner = "GET /smuggled-t HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
        for conn in ("keep-alive, Content-Length", "content-length"):
            req = ("POST /smug-t HTTP/1.1\r\nHost: allowed.test\r\n"
                "Connection: %s\r\nContent-Length: %d\r\n\r\n%s" %
                (conn, len(inner), inner))
            out = self.sb_raw(self.main_ip, 80, req, wait=2.0)
            self.assertEqual(out["received"].count("HTTP/1.1 "), 1, out)
            self.assertNotIn("smuggled-t", out["received"], out)
            time.sleep(0.2)
            lines = self.status("http-main")["request_lines"]
            self.assertIn("POST /smug-t HTTP/1.1", lines)
            self.assertFalse([l for l in lines if "smuggled-t" in l], lines)
            self.audit(kind="transparent", host="allowed.test", path="/smug-t",
                decision="allow")

    # ------------------------------------------------------------ TLS names

    NOSNI_CLIENT = (
        "import json, socket, ssl, sys\n"
        "host, port, path, hhost = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]\n"
        "ctx = ssl.create_default_context(cafile=sys.argv[5])\n"
        "ctx.check_hostname = False\n"
        "out = {'handshake': False, 'issuer': None, 'alert': None, 'resp': ''}\n"
        "s = socket.create_connection((host, port), timeout=10)\n"
        "try:\n"
        "    t = ctx.wrap_socket(s, server_hostname=None)\n"
        "    out['handshake'] = True\n"
        "    out['issuer'] = dict(x[0] for x in t.getpeercert()['issuer'])\n"
        "    t.sendall(('GET %s HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close'\n"
        "               '\\r\\n\\r\\n' % (path, hhost)).encode())\n"
        "    buf = b''\n"
        "    while True:\n"
        "        b = t.recv(65536)\n"
        "        if not b:\n"
        "            break\n"
        "        buf += b\n"
        "    out['resp'] = buf.decode('latin-1')\n"
        "except (ssl.SSLError, OSError) as e:\n"
        "    out['alert'] = str(e)\n"
        "sys.stdout.write(json.dumps(out))\n")

    def nosni(self, ip, port=443, path="/", hhost="x", cafile=None):
        r = run(self.nsx + [PY, "-c", self.NOSNI_CLIENT, ip, str(port), path,
            hhost, cafile or self.gwca], timeout=30)
        return json.loads(r.stdout.decode())

    def test_tls_without_sni_refused_to_handed_out_address(self):
        # allowed.test's rule passes TLS through; without a name nothing
        # says which site on that address the client wants
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        before = self.conns("https-main")
        out = self.nosni(self.main_ip, cafile=self.testca)
        self.assertFalse(out["handshake"], out)
        row = self.audit(kind="transparent", port=443, reason="sni-missing",
            ip=self.main_ip)
        self.assert_row(row, sandbox="sbx", decision="deny")
        self.assertEqual(self.settled_conns("https-main"), before)

    def test_tls_without_sni_refused_to_unknown_address(self):
        before = self.conns("https-evil")
        out = self.nosni(self.evil_ip, cafile=self.testca)
        self.assertFalse(out["handshake"], out)
        self.audit(kind="transparent", port=443, reason="sni-missing",
            ip=self.evil_ip)
        self.assertEqual(self.settled_conns("https-evil"), before)

    def test_tls_without_sni_passes_opaque_cidr_rule(self):
        # a cidr rule with opaque: true is the one way for nameless TLS;
        # the banner origin there is no TLS server: the bytes just pass
        before = self.conns("banner-cidr")
        self.nosni(self.cidr_ip, port=2222)
        self.assertEqual(self.wait_conns("banner-cidr", before + 1), before + 1)
        self.audit(kind="transparent", host=self.cidr_ip, port=2222,
            decision="allow", rule=self.pol + ":allow[2]")

    def test_address_of_intercepted_name_intercepted_without_sni(self):
        # intercept.test and allowed.test share an address; handed out last
        # for intercept.test, that address is always intercepted
        self.assertEqual(self.sb_dig("intercept.test").status, "NOERROR")
        out = self.nosni(self.main_ip, path="/ok/nosni", hhost="intercept.test")
        self.assertTrue(out["handshake"], out)
        self.assertIn("sandgate", json.dumps(out["issuer"]).lower(), out)
        self.assertIn(" 200 ", out["resp"].split("\r\n")[0], out)
        self.audit(kind="transparent", host="intercept.test", path="/ok/nosni",
            decision="allow")
        out = self.nosni(self.main_ip, path="/not-ok-nosni",
            hhost="intercept.test")
        self.assertIn(" 403 ", out["resp"].split("\r\n")[0], out)
        self.audit(kind="transparent", host="intercept.test",
            path="/not-ok-nosni", decision="deny", reason="policy-deny")

    def test_address_of_intercepted_name_intercepted_with_other_sni(self):
        # domain fronting: SNI of a passthrough name, address handed out
        # for an intercepted one -> intercepted, so the path is seen
        self.assertEqual(self.sb_dig("intercept.test").status, "NOERROR")
        r = self.sb_curl("https://allowed.test/fronted",
            ["--cacert", self.gwca,
             "--resolve", "allowed.test:443:" + self.main_ip])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.audit(kind="transparent", host="allowed.test", path="/fronted",
            decision="allow")

    # ------------------------------------------------------------ opaque

    def test_opaque_cidr_rule(self):
        before = self.conns("banner-cidr")
        out = self.sb_raw(self.cidr_ip, 2222, "SSH-2.0-client\r\n")
        self.assertTrue(out["received"].startswith("SSH-2.0-cidr-origin\r\n"), out)
        self.assertIn("SSH-2.0-client", out["received"], out)   # echoed
        self.assertEqual(self.wait_conns("banner-cidr", before + 1), before + 1)
        self.audit(kind="transparent", host=self.cidr_ip, port=2222,
            decision="allow", rule=self.pol + ":allow[2]")

    def test_opaque_silence_is_no_way_around(self):
        # After 5 s of the client's silence the address alone decides
        # (opaque) and the server speaks; what the client sends then is
        # still looked at: TLS (naming another site) is refused, other
        # bytes pass.
        def late(what):
            r = run(self.nsx + [PY, "-c", LATE_CLIENT, self.cidr_ip, "2222",
                "6", what], timeout=40)
            return json.loads(r.stdout.decode())
        out = late("tls:fronted.test")
        self.assertTrue(out["banner"].startswith("SSH-2.0-cidr-origin"), out)
        self.assertIn(out["end"], ("reset", "eof"), out)
        row = self.audit(kind="transparent", host=self.cidr_ip, port=2222,
            decision="deny", reason="protocol-not-allowed")
        self.assert_row(row, sandbox="sbx")
        out = late("SSH-2.0-late-client\r\n")
        self.assertTrue(out["banner"].startswith("SSH-2.0-cidr-origin"), out)
        self.assertEqual(out["end"], "data", out)    # echoed back

    def test_opaque_refused_without_opaque_rule(self):
        # allowed.test allows port 2323, but not opaque: raw bytes refused
        self.assertEqual(self.sb_dig("allowed.test").status, "NOERROR")
        before = self.conns("rec-main")
        out = self.sb_raw(self.main_ip, 2323, "SSH-2.0-client\r\n")
        self.assertEqual(out["received"], "", out)
        self.assertIn(out["end"], ("reset", "eof"), out)
        row = self.audit(kind="transparent", port=2323, decision="deny")
        self.assert_row(row, sandbox="sbx", reason="protocol-not-allowed")
        # not covered by any rule at all (port 2222 on the main address)
        out = self.sb_raw(self.main_ip, 2222, "SSH-2.0-client\r\n")
        self.assertEqual(out["received"], "", out)
        self.assertIn(out["end"], ("reset", "eof"), out)
        self.audit(kind="transparent", port=2222, decision="deny",
            pred=lambda r: r["host"] in (self.main_ip, "allowed.test"))
        self.assertEqual(self.settled_conns("rec-main"), before)

    def test_opaque_by_name_needs_dns(self):
        # ssh.test (opaque rule by name): the bare address is only known
        # once the DNS listener handed it to this sandbox
        before = self.conns("banner-ssh")
        out = self.sb_raw(self.ssh_ip, 22, "SSH-2.0-client\r\n")
        self.assertEqual(out["received"], "", out)
        self.assertIn(out["end"], ("reset", "eof"), out)
        self.audit(kind="transparent", host=self.ssh_ip, port=22,
            decision="deny")
        self.assertEqual(self.settled_conns("banner-ssh"), before)
        r = self.sb_dig("ssh.test", "A")
        self.assertEqual(r.addrs(), [self.ssh_ip], r)
        out = self.sb_raw(self.ssh_ip, 22, "SSH-2.0-client\r\n")
        self.assertTrue(out["received"].startswith("SSH-2.0-named-origin\r\n"),
            out)
        self.assertEqual(self.wait_conns("banner-ssh", before + 1), before + 1)
        self.audit(kind="transparent", host="ssh.test", port=22,
            decision="allow", rule=self.pol + ":allow[3]")

    # ------------------------------------------------------------ isolation

    def test_no_other_way_out(self):
        # UDP other than DNS is not redirected: the forward chain drops it
        # even with forwarding enabled on the sandbox's link.
        before = self.topo.counter("forward")
        run(self.nsx + [PY, "-c", RAW_UDP, self.main_ip, "9999"])
        time.sleep(0.3)
        self.assertEqual(self.conns("udp-main"), 0)
        self.assertGreaterEqual(self.topo.counter("forward") - before, 5)
        # the host's own services are closed to the sandbox
        dropped = self.topo.counter("input")
        run(self.nsx + [PY, "-c", RAW_UDP, self.topo.gw_ip, "9999"])
        time.sleep(0.1)
        self.assertGreaterEqual(self.topo.counter("input") - dropped, 5)


def v6_port_free(port):
    """port is free for TCP on [::] (the IPv6 transparent listener)."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        s.bind(("::", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class TransparentV6Test(unittest.TestCase):
    """
    The same redirection over IPv6 (SO_ORIGINAL_DST for IPv6): curl -6 in
    the sandbox, no proxy settings, nftables (table inet) redirecting its
    IPv6 TCP to a transparent listener on [::].
    """

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir(prefix="sgt-transparent6-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.chmod(d, 0o755)
        topo = cls.topo = Topology(d, v6=True)
        _topo.append(topo)
        cls.addClassCleanup(topo.teardown)
        topo.build()
        cls.nsx = [IP, "netns", "exec", topo.sb]
        n6 = topo.net_ip6
        cls.main_ip, cls.evil_ip = n6[2], n6[3]

        cls.testca, crt, key = H.make_ca_and_leaf(d, ["allowed6.test"])
        spec = [
            {"id": "http-main6", "kind": "http", "host": n6[2], "port": 80},
            {"id": "https-main6", "kind": "https", "host": n6[2], "port": 443,
             "cert": crt, "key": key},
            {"id": "http-evil6", "kind": "http", "host": n6[3], "port": 80},
            {"id": "https-evil6", "kind": "https", "host": n6[3], "port": 443,
             "cert": crt, "key": key},
        ]
        cls.origins, cls.status_path = H.start_origins(d, topo.net, ORIGINS6,
            spec, "origins6", cls.addClassCleanup)

        # AAAA only: nothing can fall back to IPv4
        recs = [("allowed6.test", n6[2]), ("forbidden6.test", n6[3])]
        cls.dns = H.TtlDnsmasq(d, recs, local_ttl=300)
        cls.addClassCleanup(cls.dns.stop)

        for _ in range(50):
            cls.tport = T.free_port()
            if v6_port_free(cls.tport) and not T.port_in_use(cls.tport,
                    topo.gw_ip):
                break
        else:
            raise RuntimeError("no free port on [::]")
        cls.dport = TransparentTest.free_gw_port.__func__(cls, udp=True,
            avoid=cls.tport)
        topo.load_nft(cls.tport, cls.dport)

        cls.pol = "transp6"
        policy = {
            "sandboxes": [{"id": "sbx6", "policy": cls.pol,
                           "source": [topo.sb_ip + "/32",
                                      topo.sb_ip6 + "/128"]}],
            "policies": [{
                "name": cls.pol,
                "allow": [
                    {"host": "allowed6.test", "ports": [80, 443]},      # 0
                ],
                "allow_private": ["2001:2::/48", "198.19.0.0/16"],
            }],
        }
        cls.gw = T.Gateway(d, cls.dns, {"transp6.yaml": policy}, extra={
            "listen": {"transparent": "[::]:%d" % cls.tport,
                       "dns": "%s:%d" % (topo.gw_ip, cls.dport)},
            "upstream": {"ca_bundle": cls.testca},
        })
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not T.wait_tcp(topo.gw_ip6, cls.tport, 5 * T.SLOW, cls.gw.proc):
            raise RuntimeError("transparent listener not up on [::]:\n" +
                cls.gw.log_tail())

    status = TransparentTest.status
    conns = TransparentTest.conns
    wait_conns = TransparentTest.wait_conns
    settled_conns = TransparentTest.settled_conns
    sb_dig = TransparentTest.sb_dig
    audit = TransparentTest.audit
    assert_row = TransparentTest.assert_row

    def sb_curl(self, url, args=()):
        return H.curl(url, prefix=self.nsx, args=["-6"] + list(args),
            tmp=self.td.path, timeout=15)

    def url_ip(self, scheme, ip, path):
        return "%s://[%s]%s" % (scheme, ip, path)

    def test_dns_aaaa(self):
        r = self.sb_dig("allowed6.test", "AAAA")
        self.assertEqual(r.status, "NOERROR", r)
        self.assertEqual(r.addrs("AAAA"), [self.main_ip], r)
        self.audit(kind="dns", host="allowed6.test", method="AAAA",
            decision="allow", ip=self.main_ip, sandbox="sbx6")

    def test_http_allowed_v6(self):
        before = self.conns("http-main6")
        r = self.sb_curl("http://allowed6.test/plain-v6")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["origin"], "http-main6", r)
        self.assertEqual(doc["host"], "allowed6.test", r)
        self.assertEqual(doc["path"], "/plain-v6", r)
        self.assertGreater(self.wait_conns("http-main6", before + 1), before)
        row = self.audit(kind="transparent", host="allowed6.test",
            path="/plain-v6")
        self.assert_row(row, sandbox="sbx6", decision="allow", port=80,
            ip=self.main_ip, status=200, rule=self.pol + ":allow[0]")
        # identified by its IPv6 source address
        self.assertTrue(row["client"].startswith("[%s]:" % self.topo.sb_ip6),
            row)

    def test_https_passthrough_v6(self):
        r = self.sb_curl("https://allowed6.test/tls-v6",
            ["--cacert", self.testca])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["origin"], "https-main6", r)
        row = self.audit(kind="transparent", host="allowed6.test", port=443,
            decision="allow")
        self.assert_row(row, sandbox="sbx6", ip=self.main_ip,
            rule=self.pol + ":allow[0]")

    def test_bare_ipv6_refused(self):
        ev, evs = self.conns("http-evil6"), self.conns("https-evil6")
        r = self.sb_curl(self.url_ip("http", self.evil_ip, "/bare6"))
        self.assertTrue(r.status == 403 or r.rc in (52, 56), r)
        row = self.audit(kind="transparent", host=self.evil_ip, port=80)
        self.assert_row(row, sandbox="sbx6", decision="deny")
        r = self.sb_curl(self.url_ip("https", self.evil_ip, "/bare6-tls"),
            ["-k"])
        self.assertNotEqual(r.rc, 0, r)
        row = self.audit(kind="transparent", host=self.evil_ip, port=443)
        self.assert_row(row, sandbox="sbx6", decision="deny")
        # resolved or not, a bare address is no name for HTTP
        self.sb_dig("allowed6.test", "AAAA")
        hm = self.conns("http-main6")
        r = self.sb_curl(self.url_ip("http", self.main_ip, "/bare6-main"))
        self.assertTrue(r.status == 403 or r.rc in (52, 56), r)
        self.audit(kind="transparent", host=self.main_ip, port=80,
            decision="deny")
        self.assertEqual(self.settled_conns("http-evil6"), ev)
        self.assertEqual(self.conns("https-evil6"), evs)
        self.assertEqual(self.conns("http-main6"), hm)

    def test_allowed_name_to_forbidden_ipv6(self):
        ev, evs = self.conns("http-evil6"), self.conns("https-evil6")
        r = self.sb_curl("https://allowed6.test/sni-attack6",
            ["--cacert", self.testca,
             "--resolve", "allowed6.test:443:[%s]" % self.evil_ip])
        self.assertNotEqual(r.rc, 0, r)
        self.assertEqual(r.status, 0, r)
        row = self.audit(kind="transparent", host="allowed6.test", port=443,
            decision="deny")
        self.assert_row(row, sandbox="sbx6", ip=self.evil_ip,
            reason="destination-ip-prohibited")
        r = self.sb_curl("http://allowed6.test/host-attack6",
            ["--resolve", "allowed6.test:80:[%s]" % self.evil_ip])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("X-Sandgate-Reason"),
            "destination-ip-prohibited", r)
        row = self.audit(kind="transparent", host="allowed6.test", port=80,
            decision="deny")
        self.assert_row(row, reason="destination-ip-prohibited", status=403)
        self.assertEqual(self.settled_conns("https-evil6"), evs)
        self.assertEqual(self.conns("http-evil6"), ev)


def main():
    preflight()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _on_signal)
    try:
        T.main()
    finally:
        _teardown_all()


if __name__ == "__main__":
    main()
