#!/usr/bin/python3
"""
The Debian package (issue 16, docs/packaging.md): scripts/build-deb.sh builds
it with dpkg-buildpackage; lintian must find no error and no warning that
debian/sandgate.lintian-overrides does not explain; the contents, conffiles
and unit directives are checked. Then, as root, the package is installed
with dpkg into a copy-on-write root (an overlay of this machine's / in a
mount namespace of the test's own, so nothing here changes): the maintainer
scripts create the user (sysusers.d) and /var/lib/sandgate (tmpfiles.d),
`sandgate policy check` passes on the installed config, `systemd-analyze
verify` passes on the installed unit, and `sandgate serve` runs from the
installed files under the unit's own confinement (capability bounding set,
NoNewPrivileges, a read-only root but for ReadWritePaths, a network
namespace) until it says READY=1 on NOTIFY_SOCKET. Finally it is purged.
Skips (with the reason) only when dpkg-buildpackage or lintian is missing.
Its `sandgate serve` under strace runs as a default install does (user:
sandgate) when the test is root; a test that is not root cannot switch
users, so there the gateway keeps the test's own unprivileged user
(user: null), never root.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest
import json

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT = "/lib/systemd/system/sandgate.service"
CAPS = {"CAP_NET_BIND_SERVICE", "CAP_NET_ADMIN", "CAP_SETUID", "CAP_SETGID",
        "CAP_SETPCAP", "CAP_CHOWN"}
FILES = ["usr/sbin/sandgate", "etc/sandgate/sandgate.yaml",
         "etc/sandgate/policies/README", "var/lib/sandgate",
         "lib/systemd/system/sandgate.service",
         "usr/lib/sysusers.d/sandgate.conf", "usr/lib/tmpfiles.d/sandgate.conf",
         "usr/share/man/man8/sandgate.8.gz",
         "usr/share/man/man5/sandgate.yaml.5.gz",
         "usr/share/man/man5/sandgate-policy.5.gz",
         "usr/share/bash-completion/completions/sandgate",
         "usr/share/doc/sandgate/copyright",
         "usr/share/doc/sandgate/examples/policies/coding-agent.yaml"]


# What dpkg-buildpackage (debhelper, cmake) writes into the source tree.
BUILD_OUTPUT = re.compile(r"^(obj-[^/]+/|debian/\.debhelper/|debian/sandgate/|"
                          r"debian/tmp/|debian/(files|debhelper-build-stamp)$|"
                          r"debian/sandgate\.(substvars|debhelper\.log|"
                          r"[a-z]+\.debhelper)$)")


def run(argv, timeout=300, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, **kw)


def cmake_version():
    with open(os.path.join(T.SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(sandgate VERSION (\d+\.\d+\.\d+)", f.read()).group(1)


def unit_directives(text):
    d = {}
    for line in text.splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            d.setdefault(k, []).append(v)
    return d


_built = []


def build_once():
    """The .deb, built once for the whole file into BUILD/deb."""
    if not _built:
        build = os.path.dirname(T.BIN) if T.BIN else os.path.join(T.SRC, "build")
        t0 = time.time()
        r = run([os.path.join(T.SRC, "scripts", "build-deb.sh"),
                 os.path.join(build, "deb")], timeout=600)
        if r.returncode != 0:
            raise AssertionError("build-deb.sh failed:\n" + r.stdout + r.stderr)
        _built.append(r.stdout.strip().splitlines()[-1])
        print("built %s in %.0f s" % (_built[0], time.time() - t0), flush=True)
    return _built[0]


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.deb = build_once()

    def test_name_and_version(self):
        arch = run(["dpkg-architecture", "-qDEB_HOST_ARCH"]).stdout.strip()
        self.assertEqual(os.path.basename(self.deb),
                         "sandgate_%s_%s.deb" % (cmake_version(), arch))
        r = run(["dpkg-deb", "-f", self.deb, "Package", "Version", "Depends"])
        self.assertIn("Package: sandgate", r.stdout)
        self.assertIn("Version: " + cmake_version(), r.stdout)
        # sd_notify and sysusers.d need these at run time.
        self.assertIn("libsystemd0", r.stdout)
        self.assertIn("systemd | systemd-standalone-sysusers", r.stdout)

    def test_lintian(self):
        changes = self.deb[:-len(".deb")] + ".changes"
        r = run(["lintian", "--fail-on", "error,warning", "--pedantic",
                 "--display-info", "--show-overrides", changes])
        print(r.stdout + r.stderr, flush=True)
        self.assertEqual(r.returncode, 0, "lintian:\n" + r.stdout + r.stderr)
        tags = [l for l in r.stdout.splitlines() if re.match(r"^[EWIPXO]: ", l)]
        self.assertFalse([t for t in tags if t.startswith(("E:", "W:"))], tags)
        # Every override says why, on the comment lines above it.
        with open(os.path.join(T.SRC, "debian", "sandgate.lintian-overrides")) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if line and not line.startswith("#"):
                self.assertTrue(i > 0 and lines[i - 1].startswith("#"),
                                "override without a reason: " + line)

    def test_sources_are_tracked_files(self):
        """The tree the package was built in holds what git tracks and what
        the build made, nothing else: no key make run left in certs/, no
        untracked file (docs/packaging.md, "What the package is built
        from"; test_tree_clean.py plants some)."""
        r = run(["git", "-C", T.SRC, "ls-files", "-z"])
        if r.returncode != 0:
            self.skipTest("%s is not a git checkout" % T.SRC)
        tracked = {f for f in r.stdout.split("\0")
                   if f and os.path.lexists(os.path.join(T.SRC, f))}
        tree = os.path.join(os.path.dirname(self.deb),
                            "sandgate-" + cmake_version())
        got = set()
        for top, dirs, files in os.walk(tree):
            for f in files:
                got.add(os.path.relpath(os.path.join(top, f), tree))
        self.assertEqual(sorted(tracked - got), [])
        extra = sorted(f for f in got - tracked if not BUILD_OUTPUT.match(f))
        self.assertEqual(extra, [])
        self.assertFalse([f for f in got if f.startswith(("certs/", "var/"))
                          and f != "certs/README.md"])

    def test_contents(self):
        listing = run(["dpkg-deb", "-c", self.deb]).stdout
        paths = {l.split()[-1].lstrip("./").rstrip("/") for l in listing.splitlines()}
        for f in FILES:
            self.assertIn(f, paths)
        d = T.TempDir()
        self.addCleanup(d.cleanup)
        run(["dpkg-deb", "-e", self.deb, d.join("ctl")], check=True)
        with open(d.join("ctl", "conffiles")) as f:
            self.assertEqual(sorted(f.read().split()),
                             ["/etc/sandgate/policies/README",
                              "/etc/sandgate/sandgate.yaml"])
        with open(d.join("ctl", "postinst")) as f:
            post = f.read()
        self.assertIn("systemd-sysusers", post)
        self.assertIn("systemd-tmpfiles", post)
        # the unit's promises (docs/packaging.md explains each)
        run(["dpkg-deb", "-x", self.deb, d.join("root")], check=True)
        with open(d.join("root", UNIT.lstrip("/"))) as f:
            u = unit_directives(f.read())
        self.assertEqual(u["Type"], ["notify"])
        self.assertTrue(re.search(r"kill -HUP \$MAINPID", u["ExecReload"][0]), u)
        self.assertEqual(u["ProtectSystem"], ["strict"])
        self.assertEqual(u["ReadWritePaths"], ["/var/lib/sandgate"])
        self.assertEqual(u["NoNewPrivileges"], ["yes"])
        self.assertEqual(set(" ".join(u["CapabilityBoundingSet"]).split()), CAPS)
        with open(d.join("root", "etc", "sandgate", "sandgate.yaml")) as f:
            cfg = f.read()
        self.assertRegex(cfg, r"(?m)^state_dir: /var/lib/sandgate$")
        self.assertRegex(cfg, r"(?m)^policies: \[/etc/sandgate/policies\]$")
        self.assertRegex(cfg, r"(?m)^  key: /var/lib/sandgate/certs/ca.key$")
        self.assertRegex(cfg, r"(?m)^  key_file: /var/lib/sandgate/certs/vault.key$")
        self.assertRegex(cfg, r"(?m)^user: sandgate$")
        # The packaged binary is the one built from these sources.
        r = run([d.join("root", "usr", "sbin", "sandgate"), "version"])
        self.assertEqual(r.stdout.strip(), "sandgate " + cmake_version(), r)

    def test_syscalls_within_the_unit_filter(self):
        """Every system call serve makes (start as root, drop, a request, a
        reload, stop) is in the unit's SystemCallFilter."""
        if shutil.which("strace") is None:
            self.skipTest("strace is not installed")
        d = T.TempDir()
        self.addCleanup(d.cleanup)
        run(["dpkg-deb", "-x", self.deb, d.join("root")], check=True)
        with open(d.join("root", UNIT.lstrip("/"))) as f:
            groups = " ".join(unit_directives(f.read())["SystemCallFilter"]).split()
        allowed = set()
        for g in groups:
            if not g.startswith("@"):
                allowed.add(g)
                continue
            out = run(["systemd-analyze", "syscall-filter", g]).stdout
            for l in out.splitlines()[1:]:
                l = l.strip()
                if l and not l.startswith("#"):
                    allowed.add(l)
        while any(a.startswith("@") for a in allowed):
            for a in [a for a in allowed if a.startswith("@")]:
                allowed.discard(a)
                for l in run(["systemd-analyze", "syscall-filter", a]).stdout.splitlines()[1:]:
                    l = l.strip()
                    if l and not l.startswith("#"):
                        allowed.add(l)
        gw = T.Gateway(d.path, type("R", (), {"addr": "127.0.0.1:9"})(), {},
                       user="sandgate" if os.geteuid() == 0 else None)
        trace = d.join("trace")
        gw.proc = T.Proc(["strace", "-f", "-qq", "-o", trace,
                          d.join("root", "usr", "sbin", "sandgate"), "serve",
                          "-c", gw.cfg_path], gw.log_path, cwd=d.path)
        try:
            self.assertTrue(T.wait_tcp("127.0.0.1", gw.port, 30, gw.proc), gw.log_tail())
            T.curl("https://pkgs.example.com/", proxy=gw.url, timeout=10)
            pids = [int(p) for p in run(["pgrep", "-f", "-P", str(gw.proc.pid),
                                         "sandgate serve"]).stdout.split()]
            self.assertTrue(pids, "no sandgate under strace")
            os.kill(pids[0], signal.SIGHUP)
            self.assertTrue(gw.wait_log(r"reload: new policy in force"), gw.log_tail())
            os.kill(pids[0], signal.SIGTERM)
            gw.proc.p.wait(30)
        finally:
            gw.proc.stop()
        used = set()
        with open(trace) as f:
            for line in f:
                m = re.match(r"^\d+\s+([a-z0-9_]+)\(", line)
                if m:
                    used.add(m.group(1))
        self.assertIn("setresuid", used)
        self.assertFalse(used - allowed, "not in SystemCallFilter=%s" % groups)


class PackageInstallTest(unittest.TestCase):
    """dpkg -i into an overlay of / in a mount namespace of this test."""

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("installing needs root (mount namespaces)")
        cls.deb = build_once()
        cls.td = T.TempDir()
        cls.addClassCleanup(cls.td.cleanup)
        for d in ("upper", "work", "root"):
            os.makedirs(cls.td.join(d))
        cls.root = cls.td.join("root")
        # The namespace lives as long as this process: killed by PID at the end.
        cls.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             "mount -t overlay overlay -o lowerdir=/,upperdir=%s,workdir=%s %s"
             " && mount -t proc proc %s/proc && mount --rbind /dev %s/dev"
             " && mount -t tmpfs tmpfs %s/run && mount -t tmpfs tmpfs %s/tmp"
             " && echo up && exec sleep 3600" % (
                 cls.td.join("upper"), cls.td.join("work"), cls.root,
                 cls.root, cls.root, cls.root, cls.root)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cls.addClassCleanup(cls.stop_holder)
        line = cls.holder.stdout.readline().strip()
        if line != "up":
            err = cls.holder.stderr.read()
            raise unittest.SkipTest("no overlay root here: %s" % err.strip())
        # A root where sysusers must create the user itself.
        cls.chroot("userdel", "sandgate")
        # The package goes into the root first: the overlay holds / alone
        # (and a tmpfs on /tmp), so a checkout under /tmp or on another
        # file system is not visible from inside.
        r = cls.ns("cp", cls.deb, os.path.join(cls.root, "sandgate-test.deb"))
        if r.returncode != 0:
            raise AssertionError("cannot copy the package into the root: " +
                                 r.stdout + r.stderr)
        cls.install = cls.chroot("dpkg", "-i", "/sandgate-test.deb")

    @classmethod
    def stop_holder(cls):
        cls.holder.kill()
        cls.holder.wait()

    @classmethod
    def ns(cls, *argv, **kw):
        return run(["nsenter", "-t", str(cls.holder.pid), "-m"] + list(argv), **kw)

    @classmethod
    def chroot(cls, *argv, **kw):
        return cls.ns("chroot", cls.root, *argv, **kw)

    def test_1_installed(self):
        r = self.install
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        pw = self.chroot("getent", "passwd", "sandgate").stdout.strip().split(":")
        self.assertEqual(pw[5:], ["/var/lib/sandgate", "/usr/sbin/nologin"], pw)
        self.assertNotEqual(pw[2], "0")
        st = self.chroot("stat", "-c", "%a %U %G", "/var/lib/sandgate").stdout.split()
        self.assertEqual(st, ["710", "root", "sandgate-audit"])
        gr = self.chroot("getent", "group", "sandgate-audit").stdout.strip()
        self.assertTrue(gr.startswith("sandgate-audit:"), gr)
        r = self.chroot("dpkg-query", "-W", "-f=${Conffiles}", "sandgate")
        self.assertIn("/etc/sandgate/sandgate.yaml", r.stdout)
        self.assertIn("/etc/sandgate/policies/README", r.stdout)
        r = self.chroot("readlink",
                        "/etc/systemd/system/multi-user.target.wants/sandgate.service")
        self.assertEqual(r.stdout.strip(), UNIT, "enabled at installation")

    def test_2_policy_check(self):
        # No -c, from /: the search order finds /etc/sandgate/sandgate.yaml.
        r = self.chroot("sh", "-c", "cd / && sandgate policy check")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("/etc/sandgate/sandgate.yaml: ok: 0 files", r.stdout)
        # The shipped example, copied in as the README says, is valid there.
        r = self.chroot("cp", "/usr/share/doc/sandgate/examples/policies/"
                        "coding-agent.yaml", "/etc/sandgate/policies/")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.chroot("sandgate", "policy", "check", "-c", "/etc/sandgate/sandgate.yaml")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok: 1 file, 2 sandboxes", r.stdout)
        self.chroot("rm", "/etc/sandgate/policies/coding-agent.yaml")

    def test_3_unit_verify(self):
        r = self.chroot("systemd-analyze", "verify", UNIT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("sandgate.service", r.stdout + r.stderr)

    def test_4_man_and_completion(self):
        for page in ("sandgate.8", "sandgate.yaml.5", "sandgate-policy.5"):
            sect = page.rsplit(".", 1)[1]
            path = "/usr/share/man/man%s/%s.gz" % (sect, page)
            r = self.chroot("sh", "-c", "zcat %s | mandoc -T utf8 | head -3" % path)
            self.assertIn(page.rsplit(".", 1)[0].upper(), r.stdout.replace("\b", ""), r)
        r = self.chroot("bash", "-c",
                        ". /usr/share/bash-completion/bash_completion; "
                        ". /usr/share/bash-completion/completions/sandgate; "
                        "COMP_WORDS=(sandgate sandbox ''); COMP_CWORD=2; "
                        "COMP_LINE='sandgate sandbox '; COMP_POINT=17; _sandgate; "
                        "echo ${COMPREPLY[@]}")
        self.assertEqual(sorted(r.stdout.split()),
                         ["create", "exec", "logs", "ls", "rm", "run"], r)

    def test_5_serve_confined(self):
        """sandgate.service's confinement, applied by hand: it still runs."""
        with open(os.path.join(HERE, "pkg_confined.py"), "rb") as f:
            r = self.ns("sh", "-c", "cat > %s/run/pkg_confined.py" % self.root,
                        input=f.read().decode())
        self.assertEqual(r.returncode, 0, r.stderr)
        # ProtectSystem=strict + ReadWritePaths=/var/lib/sandgate
        r = self.ns("sh", "-c", "mount --bind {0}/var/lib/sandgate "
                    "{0}/var/lib/sandgate && mount -o remount,bind,ro {0}".format(self.root))
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.assertNotEqual(self.chroot("touch", "/etc/sandgate/x").returncode, 0)
            r = self.ns("unshare", "--net", "chroot", self.root, "/usr/bin/python3",
                        "/run/pkg_confined.py", UNIT, timeout=120)
        finally:
            self.ns("mount", "-o", "remount,bind,rw", self.root)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        log = out.pop("log")
        msgs = out["messages"]
        self.assertNotIn("error", out, "%s\nlog:\n%s" % (out, log))
        self.assertTrue(msgs and msgs[0].startswith("READY=1"), (out, log))
        self.assertTrue(msgs[1].startswith("RELOADING=1"), (out, log))
        self.assertTrue(msgs[2].startswith("READY=1"), (out, log))
        self.assertEqual(msgs[3], "STOPPING=1", (out, log))
        self.assertEqual(out["exit"], 0, log)
        self.assertEqual(out["connect_answer"].split()[1], "407", out)
        self.assertNotEqual(out["uid"], "0", "dropped to the user sandgate")
        self.assertEqual(int(out["cap_eff"], 16), 0)
        self.assertEqual(out["no_new_privs"], "1")
        self.assertIn("privileges: running as sandgate", log)
        # The keys it made on first start: in /var/lib/sandgate, root's, 0600.
        r = self.chroot("stat", "-c", "%a %U", "/var/lib/sandgate/certs/ca.key",
                        "/var/lib/sandgate/certs/vault.key")
        self.assertEqual(r.stdout.split(), ["600", "root", "600", "root"], r)
        # audit.read_group: sandgate-audit, as the packaged config says.
        r = self.chroot("stat", "-c", "%a %U %G", "/var/lib/sandgate/audit.db")
        self.assertEqual(r.stdout.split(), ["640", "root", "sandgate-audit"], r)
        self.assertIn("audit.read_group: /var/lib/sandgate/audit.db is "
                      "root:sandgate-audit 0640", log)

    def test_6_purge(self):
        r = self.chroot("dpkg", "--purge", "sandgate")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for gone in ("/usr/sbin/sandgate", "/etc/sandgate/sandgate.yaml",
                     "/etc/systemd/system/multi-user.target.wants/sandgate.service"):
            self.assertNotEqual(self.chroot("test", "-e", gone).returncode, 0, gone)


if __name__ == "__main__":
    for tool in ("dpkg-buildpackage", "lintian"):
        if shutil.which(tool) is None:
            T.skip_file("%s is not installed (scripts/install-deps.sh installs "
                        "it)" % tool)
    unittest.main(verbosity=2)
