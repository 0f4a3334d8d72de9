#!/usr/bin/env python3
"""
Attacker probes of what the launcher does with its inputs (ids, --env,
--rootfs DIR, admin registration).  Ids used here start with "prl"; every
sandbox is run with `sandbox run` (crun when installed) and checked for
leftovers.

Tried (held unless marked FINDING):
- --id "../prlx", "prl/x", upper case, leading "-", 41 chars, "", ".", " ",
  tab, newline, "_", "%2f": usage error, nothing created -- held.
- exec/rm/logs of "../../etc" and of an unknown id: error, nothing touched
  -- held.
- POST /v1/sandboxes with id "prl\u0000x", upper case, 41 chars, "..", "/",
  "-prl", ".": 400 -- held.
- POST /v1/sandboxes with a live sandbox's source in another spelling
  (::ffff:a.b.c.d, [..], inet_aton shorthand/octal/hex/decimal, leading
  zeros, spaces): 409 or 400 -- held.
- --env GH_TOKEN=<real secret>: the credential placeholder still wins --
  held.  (--env SANDGATE_SANDBOX=victim and --env SSL_CERT_FILE=/x DO
  override the launcher's values inside the sandbox; the gateway keys on
  the source address, so only noted.)
- --rootfs DIR whose etc/resolv.conf, etc/hosts and etc/ssl/certs are
  symlinks to host paths: host files and DIR unchanged, the sandbox does not
  see the host file -- held.
- FOUND, fixed (test_rootfs_resolv_conf_symlink_refused_clearly): a root
  with the common etc/resolv.conf -> ../run/systemd/resolve/stub-resolv.conf
  symlink could not start ("mkdir `/../run`: Permission denied" from the
  runtime); now refused before anything is made, the symlink named.
"""

import json
import os
import subprocess
import sys
import tempfile
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
import sbtest as S  # noqa: E402


def rid():
    return "prl" + uuid.uuid4().hex[:8]


def admin(sock, method, path, body=None):
    data = b"" if body is None else (body if isinstance(body, bytes)
        else json.dumps(body).encode())
    req = ("%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\nConnection: close\r\n\r\n" % (method, path,
        len(data))).encode() + data
    st, _, b = T.unix_http(sock, req)
    return st, b


def state_rows(cfg):
    r = T.run_sandgate("sandbox", "ls", "-c", cfg, "--format", "json")
    try:
        return [e["id"] for e in json.loads(r.stdout)]
    except ValueError:
        return []


class LaunchProbe(S.SandboxWorld):

    def rt(self):
        for rt, path in S.RUNTIMES.items():
            if os.access(path, os.X_OK):
                return rt
        self.skipTest("no runtime")

    def cleanup_sid(self, sid):
        T.run_sandgate("sandbox", "rm", "-c", self.gw.cfg_path, sid)
        admin(self.sock, "DELETE", "/v1/sandboxes/" + sid)

    # -- ids ------------------------------------------------------------
    def test_bad_ids_refused_before_anything(self):
        """An id is `[a-z0-9-]`, at most 40 characters, not starting with
        `-` (docs/sandbox.md): every other id is a usage error, and nothing
        is created for it."""
        before_ns = set(os.listdir("/run/netns")) if os.path.isdir(
            "/run/netns") else set()
        before_b = set(os.listdir("/run/sandgate/bundles")) if \
            os.path.isdir("/run/sandgate/bundles") else set()
        bad = ["../prlx", "prl/x", "PRLX", "prl" + "a" * 38, "-prlx", "",
            "prl.x", "prl x", "prl\tx", "prlx\n", "prl_x", "prl%2fx"]
        for sid in bad:
            with self.subTest(id=sid):
                r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                    "--runtime", self.rt(), "--id", sid, "--", "/bin/true")
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn("id", r.stderr)
        after_ns = set(os.listdir("/run/netns")) if os.path.isdir(
            "/run/netns") else set()
        after_b = set(os.listdir("/run/sandgate/bundles")) if \
            os.path.isdir("/run/sandgate/bundles") else set()
        self.assertFalse({n for n in after_ns - before_ns if "prl" in n})
        self.assertFalse({n for n in after_b - before_b if "prl" in n})
        self.assertFalse([i for i in self.registered() if i.startswith(
            "prl") and i not in ()])

    def test_exec_rm_bad_ids(self):
        """exec/rm of an id that is no sandbox, or a path: error, exit 1/2,
        nothing touched."""
        for sub in (["exec"], ["rm"], ["logs"]):
            for sid in ("../../etc", "prl" + uuid.uuid4().hex[:8]):
                with self.subTest(sub=sub, id=sid):
                    args = ["sandbox"] + sub + ["-c", self.gw.cfg_path, sid]
                    if sub == ["exec"]:
                        args += ["--", "/bin/true"]
                    r = T.run_sandgate(*args)
                    self.assertIn(r.returncode, (1, 2), r.stderr)
                    self.assertTrue(r.stderr.strip())

    # -- admin registration --------------------------------------------
    def test_admin_register_bad_ids(self):
        for sid in ("prl\u0000x", "PRLX", "prl" + "a" * 38, "..", "prl/x",
                "-prl", "prl.x"):
            with self.subTest(id=sid):
                st, b = admin(self.sock, "POST", "/v1/sandboxes",
                    {"id": sid, "policy": "web", "source": "198.18.250.2"})
                self.assertEqual(st, 400, b)
        self.assertNotIn("198.18.250.2", json.dumps(S.admin_get(self.sock,
            "/v1/sandboxes")))

    def test_admin_register_same_source_other_spelling(self):
        """`409`: ... a registered one has the id or the source
        (docs/admin-api.md).  The same address in another spelling is the
        same source."""
        a = rid()
        st, b = admin(self.sock, "POST", "/v1/sandboxes",
            {"id": a, "policy": "web", "source": "198.18.251.2"})
        self.assertEqual(st, 201, b)
        self.addCleanup(admin, self.sock, "DELETE", "/v1/sandboxes/" + a)
        for spelling in ("::ffff:198.18.251.2", "[::ffff:198.18.251.2]",
                "198.18.64258", "0306.022.0373.02", "0xc6.0x12.0xfb.2",
                "3323132674", "198.018.251.002", " 198.18.251.2",
                "198.18.251.2 "):
            with self.subTest(source=spelling):
                b_id = rid()
                st, body = admin(self.sock, "POST", "/v1/sandboxes",
                    {"id": b_id, "policy": "web", "source": spelling})
                if st == 201:
                    admin(self.sock, "DELETE", "/v1/sandboxes/" + b_id)
                self.assertIn(st, (400, 409), body)

    # -- environment ---------------------------------------------------
    def test_env_cannot_override_placeholder(self):
        """each credential's env variable set to this sandbox's placeholder
        (docs/sandbox.md): a --env of the same name does not put a real
        secret in its place.  (--env SANDGATE_SANDBOX=victim and
        --env SSL_CERT_FILE=... DO override the launcher's values: the
        docs list both without an order; noted, not asserted.)"""
        sid = rid()
        self.addCleanup(self.cleanup_sid, sid)
        r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", self.rt(), "--id", sid,
            "--env", "SANDGATE_SANDBOX=victim",
            "--env", "SSL_CERT_FILE=/tmp/evil.pem",
            "--env", "GH_TOKEN=ghp_real_secret_from_user",
            "--", "/bin/sh", "-c",
            "echo S=$SANDGATE_SANDBOX; echo C=$SSL_CERT_FILE; "
            "echo G=$GH_TOKEN; env | grep -c '^SANDGATE_SANDBOX='",
            timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("ghp_real_secret_from_user", r.stdout)
        self.assertEqual(S.leftovers(sid), [])

    # -- rootfs DIR ----------------------------------------------------
    def make_root(self):
        root = tempfile.mkdtemp(prefix="prl-root-")
        self.addCleanup(subprocess.run, ["rm", "-rf", root])
        os.chmod(root, 0o755)
        for d in ("bin", "etc/ssl", "proc", "dev", "tmp"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        bins = [os.path.realpath(b) for b in ("/bin/sh", "/bin/cat")]
        for b, name in zip(bins, ("sh", "cat")):
            subprocess.run(["cp", b, os.path.join(root, "bin", name)],
                check=True)
        libs = subprocess.run(["ldd"] + bins, stdout=subprocess.PIPE,
            text=True).stdout
        for w in libs.split():
            if w.startswith("/") and not w.endswith(":"):
                dst = os.path.join(root, w.lstrip("/"))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                subprocess.run(["cp", "-L", w, dst], check=False)
        return root

    def tree(self, d):
        out = []
        for base, dirs, files in os.walk(d):
            for n in dirs + files:
                p = os.path.join(base, n)
                st = os.lstat(p)
                out.append((p, st.st_mode, st.st_size))
        return sorted(out)

    def test_rootfs_symlinks_do_not_reach_host(self):
        """`--rootfs DIR`: that directory, read-only, with the generated
        resolv.conf, hosts and CA bundle bound over its own
        (docs/sandbox.md).  Symlinks in DIR to host paths (etc/resolv.conf,
        etc/hosts -> a host file, etc/ssl/certs -> a host directory) must
        neither change nor be bound over the host's files, and DIR itself
        stays as it was."""
        host = tempfile.mkdtemp(prefix="prl-host-")
        self.addCleanup(subprocess.run, ["rm", "-rf", host])
        os.chmod(host, 0o755)
        target = os.path.join(host, "resolv.target")
        with open(target, "w") as f:
            f.write("HOST-FILE\n")
        root = self.make_root()
        os.symlink(target, os.path.join(root, "etc", "resolv.conf"))
        os.symlink(target, os.path.join(root, "etc", "hosts"))
        os.symlink(host, os.path.join(root, "etc", "ssl", "certs"))
        snap_h, snap_r = self.tree(host), self.tree(root)
        sid = rid()
        self.addCleanup(self.cleanup_sid, sid)
        r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", self.rt(), "--rootfs", root,
            "--id", sid, "--", "/bin/cat", "/etc/resolv.conf", timeout=120)
        with open(target) as f:
            self.assertEqual(f.read(), "HOST-FILE\n")
        self.assertNotIn("HOST-FILE", r.stdout)
        self.assertEqual(self.tree(host), snap_h)
        self.assertEqual(self.tree(root), snap_r)
        self.assertEqual(S.leftovers(sid), [])

    def test_rootfs_resolv_conf_symlink_refused_clearly(self):
        """`--rootfs DIR`: that directory, read-only, with the generated
        resolv.conf, hosts and CA bundle bound over its own
        (docs/sandbox.md). A root whose etc/resolv.conf is a symlink (the
        common ../run/systemd/resolve/stub-resolv.conf layout) could not
        start, with the runtime's own "mkdir `/../run`: Permission
        denied". Fixed: refused before anything is made, with an error
        that names the symlink; DIR unchanged, nothing left. The same for
        etc/hosts."""
        for name, target in (("resolv.conf",
                              "../run/systemd/resolve/stub-resolv.conf"),
                             ("hosts", "../run/hosts")):
            root = self.make_root()
            os.symlink(target, os.path.join(root, "etc", name))
            snap_r = self.tree(root)
            sid = rid()
            self.addCleanup(self.cleanup_sid, sid)
            r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                "--policy", "web", "--runtime", self.rt(), "--rootfs", root,
                "--id", sid, "--", "/bin/cat", "/etc/resolv.conf",
                timeout=120)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("etc/%s is a symlink" % name, r.stderr)
            self.assertEqual(self.tree(root), snap_r)
            self.assertEqual(S.leftovers(sid), [])
            self.assertNotIn(sid, self.registered())

if __name__ == "__main__":
    S.skip_unless_root()
    T.main()
