#!/usr/bin/python3
"""
End-to-end tests of issue 13's key keeper (docs/architecture.md,
"Processes"): `sandgate serve` started as root runs three processes -- the
network process (the PID started, unprivileged), sg-monitor and sg-keeper
(root, no capabilities, no_new_privs, seccomp). Only the keeper has the key
files open; the network process's memory holds the secret a policy binds
(the scan's positive control) but not a secret no policy binds, not the CA's
private key and not vault.key, which the keeper's memory does hold. Killed,
the keeper takes interceptions and credential swaps with it (503
keeper-unavailable, also inside a tunnel already intercepted) while plain
HTTP goes on; the monitor starts a new one, and service resumes with the
secrets handed over again.
"""

import http.client
import os
import signal
import socket
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

USER = "sandgate"
ORIGIN_HOST = "127.0.0.2"
PH = "sgtest-keeper-placeholder-0001"
SECRET = "sk-keeper-bound-0123456789abcdef"
UNBOUND = "sk-keeper-UNBOUND-fedcba9876543210"

POLICY = """\
sandboxes:
  - id: kp-box
    policy: kp
    source: [127.0.0.1/32]
policies:
  - name: kp
    allow:
      - host: plain.test
        ports: [{http}]
      - host: tls.test
        ports: [{https}]
        tls: intercept
    allow_private: [{origin}/32]
    credentials: [kp-key]
credentials:
  - name: kp-key
    secret: kp-secret
    hosts: [tls.test]
    headers: [X-Api-Key]
    placeholder: "{ph}"
"""


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            pass
    return out


def fd_targets(pid):
    d = "/proc/%d/fd" % pid
    out = []
    for fd in os.listdir(d):
        try:
            out.append(os.readlink(os.path.join(d, fd)))
        except FileNotFoundError:
            pass
    return out


def memory_has(pid, needles):
    """Which of needles (bytes) occur in pid's readable memory."""
    found = set()
    with open("/proc/%d/maps" % pid) as maps, \
            open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5] if len(parts) > 5 else ""
            if parts[1][0] != "r" or name in ("[vvar]", "[vsyscall]"):
                continue
            if hi - lo > (1 << 30):
                continue  # a sanitizer's shadow: reserved, not data
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            for n in needles:
                if n in data:
                    found.add(n)
    return found


class KeeperTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            T.skip_file("the keeper's processes are tested as root")
        cls.td = T.TempDir("sgtest-keeper-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        cls.origin = T.Origin("plain", ORIGIN_HOST)
        cls.addClassCleanup(cls.origin.stop)
        cert, key = T.make_cert(d, "tls.test")
        cls.tls_origin = T.Origin("tls", ORIGIN_HOST, cert=cert, key=key)
        cls.addClassCleanup(cls.tls_origin.stop)
        cls.dns = T.Dnsmasq(d, [("plain.test", ORIGIN_HOST),
                                ("tls.test", ORIGIN_HOST)])
        cls.addClassCleanup(cls.dns.stop)
        cls.gw = T.Gateway(d, cls.dns, {"kp.yaml": POLICY.format(
            http=cls.origin.port, https=cls.tls_origin.port,
            origin=ORIGIN_HOST, ph=PH)}, user=USER,
            extra={"upstream": {"ca_bundle": cert}})
        for name, value in (("kp-secret", SECRET), ("kp-unbound", UNBOUND)):
            r = T.run_sandgate("vault", "set", name, "-c", cls.gw.cfg_path,
                input=value)
            if r.returncode != 0:
                raise RuntimeError("vault set: " + r.stderr)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        if not cls.gw.wait_log(r"^.*ready$", 10):
            raise AssertionError("not ready:\n" + cls.gw.log_tail())
        cls.pid = cls.gw.proc.pid
        cls.certs = os.path.join(d, "certs")
        cls.ca_crt = os.path.join(cls.certs, "ca.crt")

    def tree(self):
        """(monitor pid, keeper pid), waiting for a keeper to exist."""
        deadline = time.time() + 10 * T.SLOW
        while True:
            mons = [c for c in children(self.pid) if comm(c) == "sg-monitor"]
            kps = [k for m in mons for k in children(m)
                   if comm(k) == "sg-keeper"] if mons else []
            if (len(mons) == 1 and len(kps) == 1) or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(len(mons), 1, children(self.pid))
        self.assertEqual(len(kps), 1, mons and children(mons[0]))
        return mons[0], kps[0]

    def connect_status(self):
        c, r = T.open_tunnel(self.gw.port, "tls.test:%d" % self.tls_origin.port)
        c.close()
        return r

    def fetch_tls(self, path):
        r = T.curl("https://tls.test:%d%s" % (self.tls_origin.port, path),
            proxy=self.gw.url, tmp=self.td.path,
            args=["--cacert", self.ca_crt, "-H", "X-Api-Key: " + PH])
        return r

    def seen_key(self, path):
        recs = [q for q in self.tls_origin.requests if q["path"] == path]
        self.assertEqual(len(recs), 1, recs)
        return dict((k.lower(), v) for k, v in recs[0]["headers"])["x-api-key"]

    def wait_back(self, off):
        m = self.gw.wait_log(r"key keeper \(pid (\d+)\) is back", 15,
            start=off)
        self.assertTrue(m, self.gw.log_tail())
        return int(m.group(1))

    # ----------------------------------------------------------------- tree

    def test_01_three_processes(self):
        mon, kp = self.tree()
        net = T.proc_status(self.pid)
        self.assertNotEqual(net["Uid"].split()[0], "0", net)
        self.assertEqual(net["Seccomp"], "2")
        for pid in (mon, kp):
            st = T.proc_status(pid)
            self.assertEqual(st["Uid"].split(), ["0"] * 4, st)
        st = T.proc_status(kp)
        for c in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(st[c], 16), 0, "%s %s" % (c, st[c]))
        self.assertEqual(st["NoNewPrivs"], "1", st)
        self.assertEqual(st["Seccomp"], "2", st)

    def test_02_only_the_keeper_holds_the_files(self):
        _, kp = self.tree()
        keys = {os.path.realpath(os.path.join(self.certs, k))
                for k in ("ca.key", "vault.key", "audit.key")}
        vault_db = os.path.realpath(os.path.join(self.td.path, "var",
                                                 "vault.db"))
        net = set(fd_targets(self.pid))
        self.assertFalse(net & (keys | {vault_db}), net)
        with open("/proc/%d/maps" % self.pid) as f:
            self.assertNotIn("vault.db", f.read())
        self.assertIn(vault_db, fd_targets(kp))

    def test_03_network_memory_has_only_bound_secrets(self):
        from cryptography.hazmat.primitives.serialization import \
            load_pem_private_key
        r = self.fetch_tls("/headers?kp-mem")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seen_key("/headers?kp-mem"), SECRET)
        with open(os.path.join(self.certs, "ca.key"), "rb") as f:
            ca_priv = load_pem_private_key(f.read(), None).private_numbers() \
                .private_value.to_bytes(32, "big")
        with open(os.path.join(self.certs, "vault.key"), "rb") as f:
            vault_key = f.read()
        self.assertEqual(len(vault_key), 32)
        needles = [SECRET.encode(), UNBOUND.encode(), ca_priv, vault_key]
        got = memory_has(self.pid, needles)
        # the positive control: the scan finds what must be there
        self.assertIn(SECRET.encode(), got, "the scan found nothing")
        self.assertNotIn(UNBOUND.encode(), got)
        self.assertNotIn(ca_priv, got, "the CA key is in the network process")
        self.assertNotIn(vault_key, got, "vault.key is in the network process")
        _, kp = self.tree()
        self.assertIn(vault_key, memory_has(kp, [vault_key]))

    # --------------------------------------------------------------- faults

    def test_10_keeper_killed(self):
        mon, kp = self.tree()
        r = self.fetch_tls("/headers?kp-before")
        self.assertEqual(r.status, 200, r)
        # a tunnel intercepted before the kill, kept alive across it
        sock = socket.create_connection(("127.0.0.1", self.gw.port), 10)
        sock.sendall(("CONNECT tls.test:%d HTTP/1.1\r\nHost: tls.test\r\n\r\n"
                      % self.tls_origin.port).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        ctx = ssl.create_default_context(cafile=self.ca_crt)
        tls = ctx.wrap_socket(sock, server_hostname="tls.test")
        self.addCleanup(tls.close)

        conn = http.client.HTTPConnection("tls.test", self.tls_origin.port,
                                          timeout=10)
        conn.sock = tls

        def ask(path):
            conn.request("GET", path, headers={"X-Api-Key": PH})
            resp = conn.getresponse()
            resp.read()
            return resp.status, str(resp.headers).encode()

        self.assertEqual(ask("/headers?kp-tun-1")[0], 200)
        self.assertEqual(self.seen_key("/headers?kp-tun-1"), SECRET)

        off = len(self.gw.log_text())
        os.kill(kp, signal.SIGKILL)
        self.assertTrue(self.gw.wait_log(r"key keeper lost", 5, start=off),
                        self.gw.log_tail())
        # a new interception: refused at the CONNECT
        r = self.connect_status()
        self.assertEqual(r.status, 503, r.raw_head)
        self.assertEqual(r.header("x-sandgate-reason"),
                         "keeper-unavailable")
        # a swap inside the tunnel intercepted before: refused too
        st, head = ask("/headers?kp-tun-2")
        self.assertEqual(st, 503, head)
        self.assertIn(b"keeper-unavailable", head)
        self.assertFalse([q for q in self.tls_origin.requests
                          if q["path"] == "/headers?kp-tun-2"])
        # plain HTTP needs no key: it goes on
        r = T.curl("http://plain.test:%d/kp-plain" % self.origin.port,
                   proxy=self.gw.url, tmp=self.td.path)
        self.assertEqual(r.status, 200, r)
        rows = self.gw.wait_audit(reason="keeper-unavailable")
        self.assertGreaterEqual(len(rows), 2, rows)
        self.assertTrue(all(x["decision"] == "error" for x in rows), rows)

        new = self.wait_back(off)
        self.assertNotEqual(new, kp)
        mon2, kp2 = self.tree()
        self.assertEqual((mon2, kp2), (mon, new))
        r = self.fetch_tls("/headers?kp-after")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seen_key("/headers?kp-after"), SECRET)

    def test_11_killed_again_soon_backs_off(self):
        _, kp = self.tree()
        off = len(self.gw.log_text())
        os.kill(kp, signal.SIGKILL)
        kp2 = self.wait_back(off)
        off2 = len(self.gw.log_text())
        os.kill(kp2, signal.SIGKILL)
        m = self.gw.wait_log(r"starting a new one in (\d+) ms", 5, start=off2)
        self.assertTrue(m, self.gw.log_tail())
        self.assertGreaterEqual(int(m.group(1)), 2000)
        self.wait_back(off2)
        r = self.fetch_tls("/headers?kp-again")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seen_key("/headers?kp-again"), SECRET)

    def test_12_stopped_keeper_times_out(self):
        """A keeper that hangs is as good as gone: the next request to it
        (at worst the once-a-second vault check) gives up within its
        deadline, interceptions are refused, and once it runs again it is
        replaced."""
        _, kp = self.tree()
        off = len(self.gw.log_text())
        os.kill(kp, signal.SIGSTOP)
        try:
            m = self.gw.wait_log(r"key keeper lost \(no answer in time\)", 10,
                                 start=off)
            self.assertTrue(m, self.gw.log_tail())
            r = self.connect_status()
            self.assertEqual(r.status, 503, r.raw_head)
        finally:
            os.kill(kp, signal.SIGCONT)
        self.wait_back(off)
        r = self.fetch_tls("/headers?kp-hang-after")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seen_key("/headers?kp-hang-after"), SECRET)

    def test_99_still_alive(self):
        self.assertTrue(self.gw.alive(), self.gw.log_tail())


if __name__ == "__main__":
    T.main()
