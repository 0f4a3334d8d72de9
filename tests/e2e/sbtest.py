"""
What the launcher's end-to-end tests share (tests/e2e/test_sandbox_*.py):
a gateway with wildcard transparent and DNS listeners, dnsmasq as its
upstream, a "fake internet" namespace on a 198.19.X.0/24 with an HTTP origin,
and the inventory of everything a sandbox could leave behind.
"""

import fcntl
import json
import os
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


def _free_net():
    """A 198.19.X of no host address, so that test files run side by side."""
    taken = subprocess.run([IP, "-o", "-4", "addr", "show"],
        stdout=subprocess.PIPE, text=True).stdout
    for i in range(150):
        x = 100 + (os.getpid() + i) % 150
        if " 198.19.%d." % x not in taken:
            return "198.19.%d" % x
    raise RuntimeError("no free 198.19.X.0/24")


INET_NET = _free_net()
INET_HOST = INET_NET + ".1"
INET_ORIGIN = INET_NET + ".2"
BODY = "hello from the fake internet"
RUNTIMES = {"crun": "/usr/bin/crun", "runsc": "/usr/bin/runsc"}


def sh(*argv, check=True):
    r = subprocess.run(list(argv), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=T.clean_env(), timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), r.stdout))
    return r


def admin_get(sock_path, path):
    st, _, body = T.unix_http(sock_path, ("GET %s HTTP/1.1\r\nHost: x\r\n"
        "Connection: close\r\n\r\n" % path).encode())
    return json.loads(body)


def veth_name(sid):
    """The launcher's host-side veth name: sg + FNV-1a of the id."""
    h = 2166136261
    for c in sid.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return "sg%08x" % h


class launcher_lock:
    """Hold the launchers' lock: no launcher (of any test running beside
    this one) reconciles while a test looks at what a killed one left."""

    def __enter__(self):
        os.makedirs("/run/sandgate", exist_ok=True)
        self.f = open("/run/sandgate/sandbox.lock", "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def leftovers(sid):
    """Everything a sandbox named sid could have left behind, as text."""
    return leftovers_many([sid])


def leftovers_many(sids):
    """What any of the sandboxes sids left behind: namespaces, bundles,
    cgroups, links, addresses and nftables lines naming their veths."""
    found = []
    veths = {veth_name(sid): sid for sid in sids}
    hier = os.listdir("/sys/fs/cgroup")
    for sid in sids:
        if os.path.exists("/run/netns/sandgate-" + sid):
            found.append("netns sandgate-" + sid)
        if os.path.exists("/run/sandgate/bundles/" + sid):
            found.append("bundle of " + sid)
        for h in hier:
            if os.path.isdir(os.path.join("/sys/fs/cgroup", h, "sandgate",
                    sid)):
                found.append("cgroup %s/sandgate/%s" % (h, sid))
    links = sh(IP, "-o", "link", "show").stdout
    addrs = sh(IP, "-o", "-4", "addr", "show").stdout
    for line in links.splitlines():
        # "N: name[@peer]: ..." only: other test files run beside this one
        # (ctest -j4), and a link that goes while ip lists it prints a
        # message of its own on stderr (which sh() folds into stdout)
        parts = line.split(":")
        if len(parts) < 3 or not parts[0].strip().isdigit():
            continue
        name = parts[1].strip().split("@")[0]
        if name in veths:
            found.append("link %s (%s)" % (name, veths[name]))
    for line in addrs.splitlines():
        f = line.split()
        if len(f) > 1 and f[1] in veths:
            found.append("address: " + line.strip())
    r = sh(NFT, "list", "table", "inet", "sandgate", check=False)
    if r.returncode == 0:
        for line in r.stdout.splitlines():
            if any(v in line for v in veths):
                found.append("nft: " + line.strip())
    return found


class SandboxWorld(unittest.TestCase):
    """A gateway with wildcard transparent and DNS listeners, dnsmasq, and
    a fake internet; subclasses add tests. POLICY, EXTRA and USER (the
    account serve drops to; None: the harness's default) may be set."""

    POLICY = None
    EXTRA = {}
    USER = None
    NAMES = ()  # more names dnsmasq answers with INET_ORIGIN

    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-sandbox-")
        cls.addClassCleanup(cls.td.cleanup)
        d = cls.td.path
        os.chmod(d, 0o755)
        cls.fake_internet()
        cls.dns = T.Dnsmasq(d, [("allowed.test", INET_ORIGIN),
            ("denied.test", INET_ORIGIN)] + [(n, INET_ORIGIN)
            for n in cls.NAMES])
        cls.addClassCleanup(cls.dns.stop)
        cls.sock = os.path.join(d, "adm.sock")
        tport = T.free_port("0.0.0.0")
        dport = T.free_port("0.0.0.0", udp_too=True)
        policy = cls.POLICY or ("policies:\n"
            "  - name: web\n"
            "    allow:\n"
            "      - host: allowed.test\n"
            "        ports: [80]\n"
            "    allow_private: [%s.0/24]\n"
            "    credentials: [gh]\n"
            "credentials:\n"
            "  - name: gh\n"
            "    secret: gh-token\n"
            "    hosts: [api.gh.test]\n"
            "    env: GH_TOKEN\n") % INET_NET
        listen = {"admin": cls.sock, "transparent": "0.0.0.0:%d" % tport,
            "dns": "0.0.0.0:%d" % dport}
        listen.update(cls.EXTRA.get("listen", {}))
        extra = dict(cls.EXTRA)
        extra["listen"] = listen
        kw = {"user": cls.USER} if cls.USER is not None else {}
        cls.gw = T.Gateway(d, cls.dns, {"main.yaml": policy}, extra=extra,
            **kw)
        cls.gw.start()
        cls.addClassCleanup(cls.gw.stop)
        deadline = time.time() + 10 * T.SLOW
        while not os.path.exists(cls.sock) and time.time() < deadline:
            time.sleep(0.05)

    @classmethod
    def fake_internet(cls):
        """A namespace with an HTTP origin on INET_ORIGIN:80."""
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

    def sandgate(self, *args, timeout=120):
        return T.run_sandgate(args[0], args[1], "-c", self.gw.cfg_path,
            *args[2:], timeout=timeout)

    def registered(self):
        return [e["id"] for e in admin_get(self.sock,
            "/v1/sandboxes")["sandboxes"]]

    def start_run(self, rt, sid, cmd, out=subprocess.DEVNULL):
        """`sandbox run` in the background; returns once the gateway knows
        the sandbox and its command has had time to start."""
        p = subprocess.Popen([T.BIN, "sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", rt, "--id", sid, "--"] + cmd,
            stdout=out, stderr=out, env=T.clean_env())
        deadline = time.time() + 60 * T.SLOW
        while time.time() < deadline and p.poll() is None and \
                sid not in self.registered():
            time.sleep(0.2)
        time.sleep(2)  # let the runtime start the command
        return p

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


def skip_unless_root():
    """Exit 77 with the reason when the launcher tests cannot run here."""
    if os.geteuid() != 0:
        T.skip_file("sandbox tests need root (namespaces, nftables)")
    T.require_binary()
    for tool in (IP, NFT):
        if not os.access(tool, os.X_OK):
            T.skip_file(tool + " is not installed")
    if not any(os.access(p, os.X_OK) for p in RUNTIMES.values()):
        T.skip_file("neither crun nor runsc is installed")
