"""
Helpers shared by test_transparent.py and test_dns_socks.py on top of
sgtest: a dnsmasq upstream with a chosen TTL, a dig runner that parses the
status, answers and Extended DNS Error, a small test CA, and curl run with a
command prefix (ip netns exec) that still returns sgtest's CurlResult.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import sgtest as T


class TtlDnsmasq(T.Dnsmasq):
    """sgtest's dnsmasq, but its records carry local_ttl (dnsmasq's default is 0)."""

    def __init__(self, tmp, records, cnames=(), host="127.0.0.1",
                 local_ttl=300, extra=()):
        self.host = host
        self.port = T.free_port(host, udp_too=True)
        argv = [T.DNSMASQ, "-k", "--port=%d" % self.port,
            "--listen-address=" + host, "--bind-interfaces",
            "--no-resolv", "--no-hosts", "--conf-file=/dev/null",
            "--log-facility=-", "--pid-file=", "--local=/test/",
            "--local-ttl=%d" % local_ttl,
            "--host-record=ready.sgtest.test,127.0.0.1"]
        for name, ip in records:
            argv.append("--host-record=%s,%s" % (name, ip))
        for alias, target in cnames:
            argv.append("--cname=%s,%s" % (alias, target))
        argv.extend(extra)
        self.proc = T.Proc(argv, os.path.join(tmp, "dnsmasq-%d.log" % self.port))
        deadline = time.time() + 10
        while time.time() < deadline:
            if not self.proc.alive():
                break
            r = subprocess.run([T.DIG, "+short", "+time=1", "+tries=1",
                "@" + host, "-p", str(self.port), "ready.sgtest.test", "A"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=T.clean_env())
            if r.stdout.strip() == b"127.0.0.1":
                return
            time.sleep(0.1)
        tail = self.proc.log_tail()
        self.proc.stop()
        raise RuntimeError("dnsmasq did not answer:\n" + tail)


# ---------------------------------------------------------------- dig

class DigResult:
    def __init__(self, rc, out, err):
        self.rc = rc
        self.out = out
        self.err = err
        m = re.search(r"status: ([A-Z]+)", out)
        self.status = m.group(1) if m else None
        m = re.search(r";; flags: ([a-z ]*);", out)
        self.flags = m.group(1).split() if m else []
        m = re.search(r"; EDE: (\d+)(?: \(([^)]*)\))?(?:: \((.*)\))?\s*$",
            out, re.M)
        self.ede = (int(m.group(1)), m.group(2), m.group(3)) if m else None
        self.has_opt = "OPT PSEUDOSECTION" in out
        self.answers = []
        sec = None
        for line in out.splitlines():
            if line.startswith(";; ANSWER SECTION"):
                sec = "answer"
                continue
            if line.startswith(";;") or not line.strip():
                sec = None if line.startswith(";;") else sec
                continue
            if sec == "answer" and not line.startswith(";"):
                f = line.split()
                if len(f) >= 5:
                    self.answers.append((f[0], int(f[1]), f[3], f[4]))

    def addrs(self, rtype="A"):
        return [a[3] for a in self.answers if a[2] == rtype]

    def __repr__(self):
        return "<dig rc=%d status=%s ede=%r answers=%r out=%r err=%r>" % (
            self.rc, self.status, self.ede, self.answers, self.out[-1500:],
            self.err[-300:])


def dig(args, prefix=(), timeout=15):
    """Run dig with args (one try, 2 s); prefix runs it elsewhere (ip netns exec)."""
    argv = list(prefix) + [T.DIG, "+time=2", "+tries=1"] + list(args)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=T.clean_env(), timeout=timeout * T.SLOW)
    return DigResult(r.returncode, r.stdout.decode("utf-8", "replace"),
        r.stderr.decode("utf-8", "replace"))


# ---------------------------------------------------------------- test CA

def _must(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=T.clean_env(), timeout=30 * T.SLOW)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(argv),
            r.stdout.decode(errors="replace")))


def make_ca_and_leaf(d, names):
    """A test CA and a leaf for names signed by it: (ca_crt, leaf_crt, leaf_key)."""
    ca_crt, ca_key = os.path.join(d, "testca.crt"), os.path.join(d, "testca.key")
    _must([T.OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
        "-subj", "/CN=sgtest transparent CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", ca_key, "-out", ca_crt])
    key, csr, crt, ext = (os.path.join(d, "origin" + s)
        for s in (".key", ".csr", ".crt", ".ext"))
    _must([T.OPENSSL, "req", "-new", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + names[0],
        "-keyout", key, "-out", csr])
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
            % ",".join("DNS:" + n for n in names))
    _must([T.OPENSSL, "x509", "-req", "-in", csr, "-CA", ca_crt,
        "-CAkey", ca_key, "-CAcreateserial", "-days", "2", "-sha256",
        "-extfile", ext, "-out", crt])
    return ca_crt, crt, key


# ---------------------------------------------------------------- curl

def curl(url, prefix=(), args=(), timeout=20, tmp=None):
    """sgtest.curl, run behind prefix (e.g. ip netns exec NS); no proxy."""
    d = tempfile.mkdtemp(prefix="sgcurl-", dir=tmp)
    try:
        bodyf, hdrf = os.path.join(d, "body"), os.path.join(d, "hdr")
        argv = list(prefix) + [T.CURL, "-sS", "--noproxy", "*",
            "--max-time", str(timeout * T.SLOW), "-o", bodyf, "-D", hdrf,
            "-w", "%{json}"] + list(args) + [url]
        r = subprocess.run(argv, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=T.clean_env(),
            timeout=timeout * T.SLOW + 10)
        try:
            info = json.loads(r.stdout.decode() or "{}")
        except ValueError:
            info = {}
        body = b""
        if os.path.exists(bodyf):
            with open(bodyf, "rb") as f:
                body = f.read()
        blocks = []
        if os.path.exists(hdrf):
            with open(hdrf, "rb") as f:
                blocks = T._parse_header_blocks(f.read())
        return T.CurlResult(r.returncode, info, blocks, body,
            r.stderr.decode("utf-8", "replace"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def start_origins(d, netns, script, spec, name, cleanup):
    """Run an origins script (transparent_origins*.py) inside netns with the
    spec written to d/NAME.json; wait for its status file; stopped through
    cleanup. Returns (Proc, status path)."""
    spec_path = os.path.join(d, name + ".json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    status_path = os.path.join(d, name + ".status")
    proc = T.Proc(["/usr/sbin/ip", "netns", "exec", netns, "/usr/bin/python3",
        script, spec_path, status_path], os.path.join(d, name + ".log"))
    cleanup(proc.stop)
    deadline = time.time() + 15 * T.SLOW
    while not os.path.exists(status_path):
        if not proc.alive() or time.time() > deadline:
            raise RuntimeError("origins did not start:\n" + proc.log_tail())
        time.sleep(0.05)
    return proc, status_path
