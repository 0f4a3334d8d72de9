#!/usr/bin/python3
"""
End-to-end tests of `sandgate sandbox run` (SPEC §9) in both runtimes: a
real gateway with transparent and DNS listeners, an origin in a "fake
internet" network namespace on 198.19.0.0/24 reached through a veth of the
test's own, and a sandboxed curl that gets an allowed name and is refused a
denied one. After every run no namespace, veth, nftables chain, address or
registration of the sandbox is left. Root only (exit 77 otherwise).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

IP = "/usr/sbin/ip"
NFT = "/usr/sbin/nft"
INET_NS = "sgtest-inet-%d" % os.getpid()
INET_VETH = "tinet%d" % (os.getpid() % 100000)
INET_HOST = "198.19.0.1"
INET_ORIGIN = "198.19.0.2"
BODY = "hello from the fake internet"
RUNTIMES = {"crun": "/usr/bin/crun", "runsc": "/usr/bin/runsc"}


def sh(*argv, check=True):
    r = subprocess.run(list(argv), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=T.clean_env(), timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), r.stdout))
    return r


def admin_get(sock_path, path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        % path).encode())
    raw = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        raw += b
    s.close()
    return json.loads(raw.partition(b"\r\n\r\n")[2])


def veth_name(sid):
    """The launcher's host-side veth name: sg + FNV-1a of the id."""
    h = 2166136261
    for c in sid.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return "sg%08x" % h


def leftovers(sid):
    """Everything a sandbox named sid could have left behind, as text."""
    found = []
    veth = veth_name(sid)
    if os.path.exists("/run/netns/sandgate-" + sid):
        found.append("netns sandgate-" + sid)
    if os.path.exists("/run/sandgate/bundles/" + sid):
        found.append("bundle of " + sid)
    for h in os.listdir("/sys/fs/cgroup"):
        if os.path.isdir(os.path.join("/sys/fs/cgroup", h, "sandgate", sid)):
            found.append("cgroup %s/sandgate/%s" % (h, sid))
    links = sh(IP, "-o", "link", "show").stdout
    addrs = sh(IP, "-o", "-4", "addr", "show").stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name == veth:
            found.append("link " + name)
    for line in addrs.splitlines():
        if " %s " % veth in line:
            found.append("address: " + line.strip())
    r = sh(NFT, "list", "table", "inet", "sandgate", check=False)
    if r.returncode == 0:
        for line in r.stdout.splitlines():
            if veth in line:
                found.append("nft: " + line.strip())
    return found


class SandboxRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-sandbox-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.chmod(d, 0o755)
        cls.fake_internet()
        cls.dns = T.Dnsmasq(d, [("allowed.test", INET_ORIGIN),
            ("denied.test", INET_ORIGIN)])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        tport = T.free_port("0.0.0.0")
        dport = T.free_port("0.0.0.0", udp_too=True)
        policy = ("policies:\n"
            "  - name: web\n"
            "    allow:\n"
            "      - host: allowed.test\n"
            "        ports: [80]\n"
            "    allow_private: [198.19.0.0/24]\n"
            "    credentials: [gh]\n"
            "credentials:\n"
            "  - name: gh\n"
            "    secret: gh-token\n"
            "    hosts: [api.gh.test]\n"
            "    env: GH_TOKEN\n")
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": policy}, extra={
            "listen": {"admin": cls.sock,
                "transparent": "0.0.0.0:%d" % tport,
                "dns": "0.0.0.0:%d" % dport}})
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)

    @classmethod
    def fake_internet(cls):
        """A namespace with an HTTP origin on 198.19.0.2:80."""
        sh(IP, "netns", "add", INET_NS)
        cls.addClassCleanup(sh, IP, "netns", "del", INET_NS, check=False)
        sh(IP, "link", "add", INET_VETH, "type", "veth", "peer", "name",
            "eth0", "netns", INET_NS)
        cls.addClassCleanup(sh, IP, "link", "del", INET_VETH, check=False)
        sh(IP, "addr", "add", INET_HOST + "/24", "dev", INET_VETH)
        sh(IP, "link", "set", INET_VETH, "up")
        sh(IP, "-n", INET_NS, "addr", "add", INET_ORIGIN + "/24", "dev", "eth0")
        sh(IP, "-n", INET_NS, "link", "set", "eth0", "up")
        sh(IP, "-n", INET_NS, "link", "set", "lo", "up")
        www = os.path.join(cls.td.path, "www")
        os.makedirs(www)
        with open(os.path.join(www, "index.html"), "w") as f:
            f.write(BODY)
        cls.origin = T.Proc([IP, "netns", "exec", INET_NS, "/usr/bin/python3",
            "-m", "http.server", "--bind", INET_ORIGIN, "80"],
            os.path.join(cls.td.path, "origin.log"), cwd=www)
        cls.addClassCleanup(cls.origin.stop)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection((INET_ORIGIN, 80), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("fake-internet origin did not start:\n" +
            cls.origin.log_tail())

    def run_sandbox(self, runtime, sid, cmd, timeout=120):
        return T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", runtime, "--id", sid, "--",
            *cmd, timeout=timeout)

    def check_clean(self, sid):
        self.assertEqual(leftovers(sid), [])
        ids = [e["id"] for e in admin_get(self.sock, "/v1/sandboxes")["sandboxes"]]
        self.assertNotIn(sid, ids)

    def each_runtime(self, fn):
        ran = 0
        for rt, path in RUNTIMES.items():
            if not os.access(path, os.X_OK):
                continue
            with self.subTest(runtime=rt):
                fn(rt)
            ran += 1
        if ran == 0:
            self.skipTest("neither crun nor runsc is installed")

    def test_01_allowed_name(self):
        def one(rt):
            sid = "t-ok-" + rt
            r = self.run_sandbox(rt, sid, ["curl", "-s", "-m", "20",
                "http://allowed.test/"])
            self.assertEqual((r.returncode, r.stdout), (0, BODY),
                r.stderr + self.gw.log_tail())
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, host="allowed.test",
                decision="allow")
            self.assertTrue(rows, "no allow row for " + sid)
        self.each_runtime(one)

    def test_02_denied_name(self):
        def one(rt):
            sid = "t-deny-" + rt
            r = self.run_sandbox(rt, sid, ["curl", "-s", "-m", "20",
                "http://denied.test/"])
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertNotIn(BODY, r.stdout)
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, decision="deny")
            self.assertTrue(rows, "no deny row for " + sid)
            # The bare address, no name: no way around the gateway.
            sid = "t-ip-" + rt
            r = self.run_sandbox(rt, sid, ["curl", "-s", "-m", "20",
                "http://%s/" % INET_ORIGIN])
            self.assertNotIn(BODY, r.stdout)
            self.check_clean(sid)
            rows = self.gw.wait_audit(sandbox=sid, decision="deny")
            self.assertTrue(rows, "no deny row for " + sid)
        self.each_runtime(one)

    def test_03_exit_status_and_env(self):
        def one(rt):
            sid = "t-env-" + rt
            r = self.run_sandbox(rt, sid, ["sh", "-c",
                'echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS"; '
                'cat /etc/resolv.conf; touch /usr/x 2>/dev/null && echo rw; '
                'echo tmp > /tmp/x && cat /tmp/x; exit 7'])
            self.assertEqual(r.returncode, 7, r.stderr)
            ca = "/etc/ssl/certs/ca-certificates.crt"
            self.assertIn("%s %s %s" % (ca, ca, ca), r.stdout)
            self.assertRegex(r.stdout, r"nameserver 198\.18\.\d+\.\d+")
            self.assertNotIn("rw", r.stdout.split())
            self.assertIn("tmp", r.stdout.split())
            self.check_clean(sid)
        self.each_runtime(one)

    def test_04_sigterm_cleans_up(self):
        def one(rt):
            sid = "t-term-" + rt
            p = subprocess.Popen([T.BIN, "sandbox", "run", "-c",
                self.gw.cfg_path, "--policy", "web", "--runtime", rt, "--id",
                sid, "--", "sleep", "300"], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=T.clean_env())
            try:
                deadline = time.time() + 60
                while time.time() < deadline:
                    ids = [e["id"] for e in admin_get(self.sock,
                        "/v1/sandboxes")["sandboxes"]]
                    if sid in ids:
                        break
                    time.sleep(0.2)
                time.sleep(2)  # let the runtime start the command
                p.send_signal(signal.SIGTERM)
                p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
            self.assertNotEqual(p.returncode, 0)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_06_sigkill_reconciled_by_next_launcher(self):
        def one(rt):
            sid = "t-kill-" + rt
            p = subprocess.Popen([T.BIN, "sandbox", "run", "-c",
                self.gw.cfg_path, "--policy", "web", "--runtime", rt, "--id",
                sid, "--", "sleep", "300"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=T.clean_env())
            try:
                deadline = time.time() + 60
                while time.time() < deadline:
                    ids = [e["id"] for e in admin_get(self.sock,
                        "/v1/sandboxes")["sandboxes"]]
                    if sid in ids:
                        break
                    time.sleep(0.2)
                time.sleep(2)
                p.kill()
                p.wait(30)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            # a launcher killed outright leaves its sandbox behind ...
            self.assertNotEqual(leftovers(sid), [])
            # ... until the next launcher starts
            r = self.run_sandbox(rt, "t-after-" + rt, ["true"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.check_clean(sid)
            self.check_clean("t-after-" + rt)
            lst = sh(RUNTIMES[rt], "--root", "/run/sandgate/" + rt, "list",
                check=False).stdout
            self.assertNotIn(sid, lst)
        self.each_runtime(one)

    def test_07_no_way_around(self):
        """UDP to the host's addresses and onward, and the metadata address."""
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("0.0.0.0", 0))
        udp.settimeout(0.5)
        self.addCleanup(udp.close)
        uport = udp.getsockname()[1]
        script = (
            "import socket\n"
            "for a in ('%s', '%s', '198.18.0.1', '127.0.0.1'):\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
            ".sendto(b'escape', (a, %d))\n"
            "try:\n"
            "    c = socket.create_connection(('169.254.169.254', 80), 10)\n"
            "    c.sendall(b'GET /latest/meta-data/ HTTP/1.0\\r\\n"
            "Host: 169.254.169.254\\r\\n\\r\\n')\n"
            "    print('META', c.recv(200))\n"
            "except Exception as e:\n"
            "    print('META-ERR', e)\n" % (INET_HOST, INET_ORIGIN, uport))

        def one(rt):
            sid = "t-esc-" + rt
            r = self.run_sandbox(rt, sid, ["python3", "-c", script])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("META", r.stdout)
            self.assertNotIn(" 200 ", r.stdout)
            got = []
            try:
                while True:
                    got.append(udp.recvfrom(100))
            except socket.timeout:
                pass
            self.assertEqual(got, [], "UDP got out of the sandbox")
            self.check_clean(sid)
            # (the transparent listener records the bare address as host)
            rows = self.gw.wait_audit(sandbox=sid, host="169.254.169.254",
                decision="deny")
            self.assertTrue(rows, "no deny row for the metadata address")
        self.each_runtime(one)

    def test_08_workspace_env_placeholder(self):
        ws = self.td.join("ws")
        os.makedirs(ws, exist_ok=True)
        with open(os.path.join(ws, "input.txt"), "w") as f:
            f.write("from the workspace\n")
        os.chmod(ws, 0o755)

        def one(rt):
            sid = "t-ws-" + rt
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", rt, "--id", sid,
                "--workspace", ws, "--env", "GREETING=hello world", "--",
                "sh", "-c", 'pwd; cat input.txt; echo "[$GREETING]"; '
                'echo "token=$GH_TOKEN"; echo "id=$SANDGATE_SANDBOX"; '
                'test -e /etc/shadow && echo host-etc; true', timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], "/workspace")
            self.assertIn("from the workspace", lines)
            self.assertIn("[hello world]", lines)
            self.assertIn("id=" + sid, lines)
            self.assertNotIn("host-etc", lines)
            tok = [l for l in lines if l.startswith("token=")]
            self.assertRegex(tok[0], r"^token=sg-ph-[a-z2-7]{32}$")
            self.check_clean(sid)
        self.each_runtime(one)

    def test_09_memory_limit(self):
        def one(rt):
            sid = "t-mem-" + rt
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", rt, "--id", sid,
                "--memory", "64M", "--", "python3", "-c",
                "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); "
                "print('allocated')", timeout=120)
            self.assertNotIn("allocated", r.stdout)
            self.assertNotEqual(r.returncode, 0)
            self.check_clean(sid)
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", rt, "--id", sid,
                "--memory", "512M", "--", "python3", "-c",
                "b = bytearray(100 << 20); print('allocated')", timeout=120)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "allocated"),
                r.stderr)
            self.check_clean(sid)
        self.each_runtime(one)

    def test_10_usage_errors(self):
        for args in (["--", ], ["--runtime", "docker", "--", "true"],
                ["--id", "Bad_Id", "--", "true"], ["--memory", "lots", "--",
                "true"], ["--env", "1X=y", "--", "true"], ["--cpus", "0",
                "--", "true"]):
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path, *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("sandgate: "), r.stderr)

    def test_05_gateway_not_running(self):
        cfg = os.path.join(self.td.path, "down.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: %s\nlisten:\n  admin: %s\n" % (
                self.td.join("down"), self.td.join("down", "none.sock")))
        r = T.run_sandgate("sandbox", "run", "-c", cfg, "--runtime", "crun",
            "--id", "t-down", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^sandgate: .*not running")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertEqual(leftovers("t-down"), [])


if __name__ == "__main__":
    if os.geteuid() != 0:
        T.skip_file("sandbox tests need root (namespaces, nftables)")
    T.require_binary()
    for tool in (IP, NFT):
        if not os.access(tool, os.X_OK):
            T.skip_file(tool + " is not installed")
    if not any(os.access(p, os.X_OK) for p in RUNTIMES.values()):
        T.skip_file("neither crun nor runsc is installed")
    unittest.main(verbosity=2)
