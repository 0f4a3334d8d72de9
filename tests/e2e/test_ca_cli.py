#!/usr/bin/python3
"""
End-to-end tests of `sandgate ca init` (SPEC §2, §6): the files it writes and
their modes, refusing to overwrite without --force, the certificate as
OpenSSL sees it (a P-256 CA that can issue a server certificate), and
`sandgate serve` refusing a CA key that group or others can read.
"""

import os
import re
import stat
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def openssl(*args, input=None):
    return subprocess.run([T.OPENSSL] + list(args), input=input,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=T.clean_env(),
        timeout=30)


def one_error_line(testcase, r):
    """stderr is exactly one line, starting with 'sandgate: '."""
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    testcase.assertEqual(len(lines), 1, r)
    testcase.assertTrue(lines[0].startswith("sandgate: "), r)
    return lines[0]


class CaCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir(prefix="sgca-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.n = 0

    def sg(self, *args, **kw):
        return T.run_sandgate(*args, **kw)

    def setup_dir(self, cert="certs/ca.crt", key="private/ca.key"):
        """A fresh directory with a sandgate.yaml naming the CA paths."""
        CaCliTest.n += 1
        d = self.td.join("t%d" % CaCliTest.n)
        os.makedirs(d)
        cfg = os.path.join(d, "sandgate.yaml")
        with open(cfg, "w") as f:
            f.write(T.to_yaml({"state_dir": "./var",
                "ca": {"cert": cert, "key": key}}) + "\n")
        return d, cfg

    # ---------------------------------------------------------- usage

    def test_help(self):
        for args in (["ca", "--help"], ["ca", "init", "--help"], ["help", "ca"]):
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 0, r)
                self.assertIn("ca init", r.stdout)
                self.assertRegex(r.stdout, r"(?i)usage")
        self.assertIn("--force", self.sg("ca", "--help").stdout)

    def test_usage_errors(self):
        d, cfg = self.setup_dir()
        for args in (["ca"], ["ca", "frobnicate"], ["ca", "init", "--bogus"],
                     ["ca", "init", "-c", cfg, "extra"], ["ca", "init", "-c"],
                     ["ca", "init", "--force=yes", "-c", cfg]):
            with self.subTest(args=args):
                r = self.sg(*args, cwd=d)
                self.assertEqual(r.returncode, 2, r)
                self.assertTrue(r.stderr.startswith("sandgate: "), r)
        # nothing was written by any of them
        self.assertFalse(os.path.exists(os.path.join(d, "certs")))
        self.assertFalse(os.path.exists(os.path.join(d, "private")))

    def test_bad_config_is_exit_1(self):
        d, cfg = self.setup_dir()
        with open(cfg, "a") as f:
            f.write("no_such_key: 1\n")
        r = self.sg("ca", "init", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("no_such_key", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "certs")))

    # ---------------------------------------------------------- init

    def test_init_creates_files(self):
        d, cfg = self.setup_dir(cert="out/certs/ca.crt", key="out/keys/ca.key")
        # relative paths are relative to the config file, not the cwd
        r = self.sg("ca", "init", "-c", cfg, cwd=self.td.path)
        self.assertEqual(r.returncode, 0, r)
        cert = os.path.join(d, "out", "certs", "ca.crt")
        key = os.path.join(d, "out", "keys", "ca.key")
        self.assertEqual(mode(key), 0o600)
        self.assertEqual(mode(cert), 0o644)
        for sub in ("out", "out/certs", "out/keys"):
            self.assertEqual(mode(os.path.join(d, sub)), 0o700, sub)
        self.assertIn(cert, r.stdout)
        self.assertIn(key, r.stdout)
        self.assertRegex(r.stdout, r"SHA-256 fingerprint: ([0-9A-F]{2}:){31}[0-9A-F]{2}")
        self.assertTrue(read(key).startswith(b"-----BEGIN PRIVATE KEY-----\n"))
        self.assertTrue(read(cert).startswith(b"-----BEGIN CERTIFICATE-----\n"))
        self.assertEqual(r.stderr, "")
        # the fingerprint printed is the certificate's
        fp = openssl("x509", "-in", cert, "-noout", "-fingerprint", "-sha256")
        self.assertIn(fp.stdout.decode().strip().split("=", 1)[1], r.stdout)

    def test_refuses_second_init(self):
        d, cfg = self.setup_dir()
        self.assertEqual(self.sg("ca", "init", "-c", cfg).returncode, 0)
        cert = os.path.join(d, "certs", "ca.crt")
        key = os.path.join(d, "private", "ca.key")
        before = (read(cert), read(key))
        r = self.sg("ca", "init", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        line = one_error_line(self, r)
        self.assertIn("already exists", line)
        self.assertIn("--force", line)
        self.assertEqual((read(cert), read(key)), before)
        # one file missing is still a refusal, and nothing is created
        os.unlink(key)
        r = self.sg("ca", "init", "-c", cfg)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn(cert, one_error_line(self, r))
        self.assertFalse(os.path.exists(key))
        self.assertEqual(read(cert), before[0])

    def test_force_overwrites(self):
        d, cfg = self.setup_dir()
        cert = os.path.join(d, "certs", "ca.crt")
        key = os.path.join(d, "private", "ca.key")
        self.assertEqual(self.sg("ca", "init", "-c", cfg).returncode, 0)
        seen = {read(key)}
        audit_key = os.path.join(d, "private", "audit.key")
        audit_first = read(audit_key)
        # options before and after the operand
        for args in (["ca", "init", "-c", cfg, "--force"],
                     ["ca", "--force", "init", "-c", cfg],
                     ["ca", "-c", cfg, "init", "--force"]):
            with self.subTest(args=args):
                r = self.sg(*args)
                self.assertEqual(r.returncode, 0, r)
                k = read(key)
                self.assertNotIn(k, seen)
                seen.add(k)
                self.assertEqual(mode(key), 0o600)
                self.assertEqual(mode(cert), 0o644)
                # the new key belongs to the new certificate
                self.assertEqual(
                    openssl("pkey", "-in", key, "-pubout").stdout,
                    openssl("x509", "-in", cert, "-noout", "-pubkey").stdout)
        # --force replaces the CA, never the audit signing key beside it
        # (the checkpoints it signed must stay verifiable)
        self.assertEqual(read(audit_key), audit_first)
        self.assertEqual(mode(audit_key), 0o600)
        # no temporary files left next to them
        self.assertEqual(sorted(os.listdir(os.path.join(d, "private"))),
                         ["audit.key", "audit.pub", "ca.key"])
        self.assertEqual(os.listdir(os.path.join(d, "certs")), ["ca.crt"])

    def test_umask_does_not_matter(self):
        d, cfg = self.setup_dir()
        for extra in ([], ["--force"]):
            r = subprocess.run([T.BIN, "ca", "init", "-c", cfg] + extra,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=T.clean_env(), preexec_fn=lambda: os.umask(0), timeout=30)
            self.assertEqual(r.returncode, 0, r)
            self.assertEqual(mode(os.path.join(d, "private", "ca.key")), 0o600)
            self.assertEqual(mode(os.path.join(d, "certs", "ca.crt")), 0o644)
            self.assertEqual(mode(os.path.join(d, "private")), 0o700)

    def test_builtin_defaults(self):
        if os.path.exists("/etc/sandgate/sandgate.yaml"):
            self.skipTest("/etc/sandgate/sandgate.yaml exists and would be used")
        CaCliTest.n += 1
        d = self.td.join("t%d" % CaCliTest.n)
        os.makedirs(d)
        r = self.sg("ca", "init", cwd=d)
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(mode(os.path.join(d, "certs", "ca.key")), 0o600)
        self.assertEqual(mode(os.path.join(d, "certs", "ca.crt")), 0o644)
        self.assertIn("certs/ca.crt", r.stdout)

    # ---------------------------------------------------------- the certificate

    def test_certificate_is_a_p256_ca(self):
        d, cfg = self.setup_dir()
        self.assertEqual(self.sg("ca", "init", "-c", cfg).returncode, 0)
        cert = os.path.join(d, "certs", "ca.crt")
        key = os.path.join(d, "private", "ca.key")
        r = openssl("x509", "-in", cert, "-noout", "-text")
        self.assertEqual(r.returncode, 0, r)
        text = r.stdout.decode()
        self.assertRegex(text, r"Version: 3 ")
        self.assertRegex(text, r"X509v3 Basic Constraints: critical\s+CA:TRUE, pathlen:0")
        self.assertRegex(text, r"X509v3 Key Usage: critical\s+Certificate Sign, CRL Sign")
        self.assertIn("X509v3 Subject Key Identifier", text)
        self.assertIn("NIST CURVE: P-256", text)
        self.assertIn("id-ecPublicKey", text)
        self.assertRegex(text, r"Signature Algorithm: ecdsa-with-SHA256")
        self.assertRegex(text, r"Subject: O ?= ?sandgate, CN ?= ?sandgate interception CA")
        self.assertRegex(text, r"Issuer: O ?= ?sandgate, CN ?= ?sandgate interception CA")
        # valid now, for about ten years
        self.assertEqual(openssl("x509", "-in", cert, "-noout", "-checkend",
            str(9 * 366 * 86400)).returncode, 0)
        self.assertNotEqual(openssl("x509", "-in", cert, "-noout", "-checkend",
            str(11 * 366 * 86400)).returncode, 0)
        # a random 128-bit serial (16 octets, positive)
        ser = openssl("x509", "-in", cert, "-noout", "-serial").stdout.decode()
        hexs = ser.strip().split("=", 1)[1]
        self.assertEqual(len(hexs), 32, ser)
        self.assertLess(int(hexs[0], 16), 8, ser)
        # self-signed and trusted as a root
        r = openssl("verify", "-x509_strict", "-CAfile", cert, cert)
        self.assertEqual(r.returncode, 0, r)
        # the key is PKCS#8, unencrypted, P-256, and matches
        r = openssl("pkey", "-in", key, "-noout", "-text")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("prime256v1", r.stdout.decode())
        self.assertEqual(openssl("pkey", "-in", key, "-pubout").stdout,
            openssl("x509", "-in", cert, "-noout", "-pubkey").stdout)

    def test_certificate_can_issue_a_server_leaf(self):
        """The CA signs a server certificate that OpenSSL then accepts."""
        d, cfg = self.setup_dir()
        self.assertEqual(self.sg("ca", "init", "-c", cfg).returncode, 0)
        cert = os.path.join(d, "certs", "ca.crt")
        key = os.path.join(d, "private", "ca.key")
        lkey, csr, leaf, ext = (os.path.join(d, n) for n in
            ("leaf.key", "leaf.csr", "leaf.crt", "leaf.ext"))
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectAltName=DNS:api.example.test\n"
                    "authorityKeyIdentifier=keyid\n")
        r = openssl("req", "-new", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", lkey,
            "-subj", "/CN=api.example.test", "-out", csr)
        self.assertEqual(r.returncode, 0, r)
        r = openssl("x509", "-req", "-in", csr, "-CA", cert, "-CAkey", key,
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext,
            "-out", leaf)
        self.assertEqual(r.returncode, 0, r)
        r = openssl("verify", "-x509_strict", "-purpose", "sslserver",
            "-verify_hostname", "api.example.test", "-CAfile", cert, leaf)
        self.assertEqual(r.returncode, 0, r)
        r = openssl("verify", "-purpose", "sslserver",
            "-verify_hostname", "other.example.test", "-CAfile", cert, leaf)
        self.assertNotEqual(r.returncode, 0, r)
        # pathlen:0 -- an intermediate under this CA is not accepted
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:TRUE\n"
                    "keyUsage=critical,keyCertSign\n")
        inter = os.path.join(d, "inter.crt")
        r = openssl("x509", "-req", "-in", csr, "-CA", cert, "-CAkey", key,
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext,
            "-out", inter)
        self.assertEqual(r.returncode, 0, r)
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:deep.example.test\n")
        deep = os.path.join(d, "deep.crt")
        r = openssl("req", "-new", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            os.path.join(d, "deep.key"), "-subj", "/CN=deep.example.test",
            "-out", csr)
        self.assertEqual(r.returncode, 0, r)
        r = openssl("x509", "-req", "-in", csr, "-CA", inter, "-CAkey", lkey,
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext,
            "-out", deep)
        self.assertEqual(r.returncode, 0, r)
        r = openssl("verify", "-CAfile", cert, "-untrusted", inter, deep)
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn(b"path length", r.stdout + r.stderr)

    # ---------------------------------------------------------- serve

    def test_serve_refuses_open_key(self):
        """
        A key file that group or others can read makes serve refuse to start
        (exit 1), saying so once.
        """
        d, cfg = self.setup_dir()
        port = T.free_port()
        with open(cfg, "w") as f:
            f.write(T.to_yaml({
                "state_dir": "./var",
                "listen": {"http": "127.0.0.1:%d" % port, "socks5": None,
                    "dns": None, "transparent": None, "ingress": None,
                    "metrics": None, "admin": None},
                "policies": ["./policies"],
                "ca": {"cert": "certs/ca.crt", "key": "private/ca.key"},
                "upstream": {"resolvers": ["127.0.0.1:9"]},
                "workers": 1}) + "\n")
        os.makedirs(os.path.join(d, "policies"))
        self.assertEqual(self.sg("ca", "init", "-c", cfg).returncode, 0)
        key = os.path.join(d, "private", "ca.key")
        os.chmod(key, 0o644)
        log = os.path.join(d, "serve.log")
        p = T.Proc([T.BIN, "serve", "-c", cfg], log, cwd=d)
        deadline = time.time() + 10 * T.SLOW
        while p.alive() and time.time() < deadline:
            time.sleep(0.1)
        alive = p.alive()
        rc = p.stop()
        text = p.log_text()
        self.assertFalse(alive, "serve started with a 0644 CA key; log:\n" + text)
        self.assertEqual(rc, 1, text)
        # the reason once, naming the key and the fix; the exit line as
        # every command error is
        errs = [l for l in text.splitlines() if "readable by group or others" in l]
        self.assertEqual(len(errs), 1, text)
        self.assertRegex(errs[0], r"\bsandgate\b.*%s.*chmod 600" % re.escape(key),
            text)
        self.assertTrue(any(l.startswith("sandgate: ") for l in text.splitlines()),
            text)
        self.assertFalse(T.port_in_use(port), "serve left its port bound")
        # and the key was not touched (serve does not "fix" it)
        self.assertEqual(mode(key), 0o644)


if __name__ == "__main__":
    T.main()
