#!/usr/bin/python3
"""
The gateway benchmark of issue 14 in one run (bench/run.sh starts it): every
scenario against a direct connection, Squid (plain and ssl-bump), tinyproxy,
mitmproxy and sandgate, on loopback, with certificates verified everywhere;
each proxy's CPU read from /proc, its traffic checked against the origin's
access log, and a markdown table with the ratios and the targets on stdout.
Owns every process it starts and stops each by PID on every way out.
"""

import argparse
import datetime
import os
import random
import re
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import string
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORIGIN_IP = "127.0.0.2"
PROXY_IP = "127.0.0.1"
HZ = os.sysconf("SC_CLK_TCK")
BODY_BYTES = 200


T0 = time.monotonic()


def log(msg):
    print("bench: [%5.1fs] %s" % (time.monotonic() - T0, msg), file=sys.stderr, flush=True)


def machine_busy():
    """(ticks the CPUs were busy, ticks stolen by the hypervisor) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return v[0] + v[1] + v[2] + v[5] + v[6], v[7]


def own_cpu():
    """CPU seconds of this process and every child it has waited for
    (clients, and at the end the proxies and nginx with what they reaped)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


# ------------------------------------------------------------ processes

class Proc:
    """A process we started. stop() ends it and whatever it forked."""

    live = []

    def __init__(self, name, argv, logfile, **kw):
        self.name = name
        self.log = logfile
        with open(logfile, "ab") as out:
            self.p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, **kw)
        self.pid = self.p.pid
        self.kids = set()
        Proc.live.append(self)

    def alive(self):
        return self.p.poll() is None

    def remember_kids(self):
        """Helpers it forked (sandgate's monitor and keeper, Squid's
        certificate generators), so that none outlives the benchmark."""
        if self.alive():
            for pid in tree(self.pid):
                if pid != self.pid:
                    self.kids.add((pid, start_time(pid)))

    def stop(self, sig=signal.SIGTERM, wait=5.0):
        self.remember_kids()
        if self.alive():
            try:
                self.p.send_signal(sig)
                self.p.wait(wait)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
            except ProcessLookupError:
                pass
        for pid, started in sorted(self.kids):
            # Only a process that is still the one we saw (same start time),
            # not a new one that reuses its PID.
            if start_time(pid) == started and started is not None:
                try:
                    os.kill(pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        self.kids.clear()
        if self in Proc.live:
            Proc.live.remove(self)


def stop_all():
    """Every process still running: all told at once, then each waited for."""
    procs = list(reversed(Proc.live))
    for p in procs:
        p.remember_kids()
        if p.alive():
            try:
                p.p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        p.stop()


def ppid_map():
    m = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        m[int(d)] = int(st[st.rindex(")") + 2:].split()[1])
    return m


def start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    return int(st[st.rindex(")") + 2:].split()[19])


def tree(pid):
    """pid and its descendants."""
    m = ppid_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c, pp in m.items() if pp == p)
    return out


def cpu_ticks(pid):
    """{pid: user+system ticks} over the process tree (all threads, dead
    threads included: /proc/PID/stat counts them)."""
    out = {}
    for p in tree(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        out[p] = int(fields[11]) + int(fields[12])
    return out


def cpu_seconds(before, after):
    return sum(t - before.get(p, 0) for p, t in after.items()) / HZ


def rss_kib(pid):
    """VmRSS of the process, or None when it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def free_port(ip):
    s = socket.socket()
    s.bind((ip, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(ip, port, proc, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if not proc.alive():
            return False
        try:
            socket.create_connection((ip, port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def run(argv, **kw):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw).stdout


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ------------------------------------------------------------ packages

def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return "install ok installed" in r.stdout


def ensure_packages(pkgs, work):
    missing = [p for p in pkgs if not installed(p)]
    if not missing:
        return
    if os.getuid() != 0:
        log("not root: cannot install %s; those baselines are skipped" % " ".join(missing))
        return
    log("installing %s" % " ".join(missing))
    # No package may start a system service (a stray squid on :3128).
    rcd = "/usr/sbin/policy-rc.d"
    made = False
    if not os.path.exists(rcd):
        with open(rcd, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(rcd, 0o755)
        made = True
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + missing
    try:
        with open(os.path.join(work, "apt.log"), "ab") as out:
            if subprocess.call(cmd, stdout=out, stderr=out, env=env) != 0:
                subprocess.call(["apt-get", "update"], stdout=out, stderr=out, env=env)
                if subprocess.call(cmd, stdout=out, stderr=out, env=env) != 0:
                    log("apt-get failed:\n" + tail(os.path.join(work, "apt.log")))
    finally:
        if made:
            os.unlink(rcd)


# ------------------------------------------------------------ the bench

class Bench:
    def __init__(self, args):
        self.a = args
        self.work = tempfile.mkdtemp(prefix="sg-bench.")
        os.chmod(self.work, 0o755)
        self.build = os.path.abspath(args.build)
        self.sandgate = os.path.join(self.build, "sandgate")
        self.client = os.path.join(self.build, "bench", "bench_client")
        self.proxies = {}       # name -> {"addr", "pid", "proc", "ca", "socks"}
        self.sg_ports = {}      # sandgate, sandgate-dlp -> (http, socks5)
        self.missing = {}       # name -> why it is not measured
        self.results = {}       # (scenario, target) -> [per-round dict]
        self.expected = {}      # tag -> (requests the client counted ok, errors)
        self.versions = {}

    def path(self, *p):
        return os.path.join(self.work, *p)

    # -------------------------------------------------------- set-up

    def binaries(self):
        if os.access(self.sandgate, os.X_OK) and os.access(self.client, os.X_OK):
            return
        log("building sandgate and bench_client in %s" % self.build)
        run(["cmake", "-S", SRC, "-B", self.build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        run(["cmake", "--build", self.build, "-j", str(os.cpu_count() or 2),
             "--target", "sandgate", "bench_client", "bench_policy", "bench_audit"])

    def openssl(self, *argv):
        run(["openssl"] + list(argv), cwd=self.work)

    def ca(self, name):
        """An ECDSA P-256 CA: NAME.crt, NAME.key in the work directory."""
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                     "-nodes", "-days", "7", "-subj", "/CN=bench %s" % name.replace("/", " "),
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                     "-keyout", name + ".key", "-out", name + ".crt")
        return self.path(name + ".crt")

    def certificates(self):
        self.ca("origin-ca")
        # The targets are IP literals (no resolver anywhere, no SNI). Squid 5
        # checks an IP target against the CN and DNS names only: hence the CN.
        with open(self.path("origin.ext"), "w") as f:
            f.write("subjectAltName=DNS:origin.test,IP:%s\nbasicConstraints=CA:FALSE\n"
                    "extendedKeyUsage=serverAuth\n" % ORIGIN_IP)
        for name, key in (("origin-rsa", ["rsa:2048"]),
                          ("origin-ec", ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])):
            self.openssl("req", "-new", "-newkey", *key, "-nodes", "-subj", "/CN=" + ORIGIN_IP,
                         "-keyout", name + ".key", "-out", name + ".csr")
            self.openssl("x509", "-req", "-in", name + ".csr", "-CA", "origin-ca.crt",
                         "-CAkey", "origin-ca.key", "-days", "7", "-extfile", "origin.ext",
                         "-out", name + ".crt")

    def origin(self):
        """nginx, one worker: plain HTTP, TLS (RSA-2048) for tunnels, TLS
        (RSA-2048, ECDSA) for interception. Ports differ only so that each
        proxy's allowlist can say passthrough or intercept per port."""
        d = self.path("nginx")
        os.makedirs(os.path.join(d, "www"))
        self.port = {k: free_port(ORIGIN_IP) for k in ("http", "pt", "ir", "ie", "in")}
        with open(os.path.join(d, "www", "big.bin"), "wb") as f:
            f.truncate(self.a.bulk_mib << 20)
        self.upload_file = os.path.join(d, "upload.json")
        write_upload(self.upload_file, self.a.upload_mib << 20)
        body = "x" * (BODY_BYTES - 1) + "\\n"
        user = "user root;" if os.getuid() == 0 else ""

        def server(port, cert, resume=True):
            tls = ""
            if cert:
                tls = ("ssl_certificate %s/%s.crt; ssl_certificate_key %s/%s.key; "
                       "ssl_protocols TLSv1.2 TLSv1.3;" % (self.work, cert, self.work, cert))
            if cert and not resume:
                tls += " ssl_session_tickets off; ssl_session_cache off;"
            return ("server { listen %s:%d%s; %s\n"
                    "  location /r/big/ { root %s/www; try_files /big.bin =404; }\n"
                    "  location /up/ { client_max_body_size 0; return 200 \"ok\\n\"; }\n"
                    "  location / { return 200 \"%s\"; } }\n"
                    % (ORIGIN_IP, port, " ssl" if cert else "", tls, d, body))

        conf = """%s
worker_processes 1;
worker_rlimit_nofile 65536;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 16384; }
http {
  log_format bench '$request_uri $status $body_bytes_sent';
  access_log %s/access.log bench buffer=256k flush=2s;
  client_body_temp_path %s/body;
  proxy_temp_path %s/proxy;
  fastcgi_temp_path %s/fastcgi;
  uwsgi_temp_path %s/uwsgi;
  scgi_temp_path %s/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 600s;
  default_type application/octet-stream;
%s%s%s%s%s}
""" % (user, d, d, d, d, d, d, d, d,
            server(self.port["http"], None), server(self.port["pt"], "origin-rsa"),
            server(self.port["ir"], "origin-rsa"), server(self.port["ie"], "origin-ec"),
            server(self.port["in"], "origin-rsa", resume=False))
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        self.nginx = Proc("nginx", ["/usr/sbin/nginx", "-p", d, "-c", d + "/nginx.conf",
                                    "-g", "daemon off;"], os.path.join(d, "stderr.log"))
        if not wait_port(ORIGIN_IP, self.port["ie"], self.nginx):
            raise SystemExit("nginx did not start:\n" + tail(d + "/stderr.log") +
                             tail(d + "/error.log"))

    def add_proxy(self, name, proc, port, ca, logs, socks_port=None):
        if wait_port(PROXY_IP, port, proc) and (
                socks_port is None or wait_port(PROXY_IP, socks_port, proc)):
            self.proxies[name] = {"addr": "%s:%d" % (PROXY_IP, port), "pid": proc.pid,
                                  "proc": proc, "ca": ca}
            if socks_port:
                self.proxies[name + "-socks5"] = {
                    "addr": "%s:%d" % (PROXY_IP, socks_port), "pid": proc.pid,
                    "proc": proc, "ca": ca, "socks": True}
            return True
        self.missing[name] = "did not start"
        log("%s did not start:\n%s" % (name, "".join(tail(l) for l in logs)))
        proc.stop()
        return False

    def start_sandgate(self, name="sandgate", dlp=None):
        """sandgate (dlp None: no `dlp:`), or beside it sandgate-dlp, the
        same with `dlp: {mode: DLP}` -- measured in the same rounds."""
        d = self.path("sg" if name == "sandgate" else name)
        os.makedirs(d + "/policies")
        os.makedirs(d + "/var")
        port, sport = free_port(PROXY_IP), free_port(PROXY_IP)
        p = self.port
        with open(d + "/sandgate.yaml", "w") as f:
            f.write("""state_dir: {d}/var
listen:
  http: {ip}:{port}
  socks5: {ip}:{sport}
  dns: null
  transparent: null
  ingress: null
  metrics: null
  admin: null
policies: [{d}/policies]
ca: {{ cert: {d}/ca.crt, key: {d}/ca.key }}
vault: {{ db: {d}/var/vault.db, key_file: {d}/vault.key }}
upstream:
  resolvers: ["127.0.0.1:53"]   # never used: every target is an IP literal
  ca_bundle: {w}/origin-ca.crt
audit: {{ db: {d}/var/audit.db }}
# one sandbox is the whole load here: its fair share is not what is measured
limits: {{ max_connections: 100000, per_sandbox: {{ max_connections: 0, connections_per_second: 0 }} }}
workers: {workers}
user: null
""".format(d=d, w=self.work, ip=PROXY_IP, port=port, sport=sport, workers=self.a.workers))
        with open(d + "/policies/bench.yaml", "w") as f:
            f.write("""sandboxes:
  - id: bench
    policy: bench
    source: [127.0.0.1/32]
policies:
  - name: bench
    allow:
      - {{ cidr: {ip}/32, ports: [{http}], methods: [GET], paths: ["/r/*"] }}
      - {{ cidr: {ip}/32, ports: [{pt}] }}
      - {{ cidr: {ip}/32, ports: [{ir}, {ie}, {in}], tls: intercept, methods: [GET, POST], paths: ["/r/*", "/up/*"] }}
    allow_private: [{ip}/32]
{dlp}""".format(ip=ORIGIN_IP, dlp="    dlp: {mode: %s}\n" % dlp if dlp else "", **p))
        self.sg_ports[name] = port, sport
        self.launch_sandgate(name=name)

    def launch_sandgate(self, debug=False, name="sandgate"):
        d = self.path("sg" if name == "sandgate" else name)
        port, sport = self.sg_ports[name]
        proc = Proc(name, [self.sandgate, "serve", "-c", d + "/sandgate.yaml"] +
                    (["-d"] if debug else []), d + "/sandgate.log")
        if self.add_proxy(name, proc, port, d + "/ca.crt", [d + "/sandgate.log"],
                          sport if name == "sandgate" else None):
            time.sleep(0.5)
            proc.remember_kids()
            log("sandgate: network process %d, helpers %s" %
                (proc.pid, " ".join(str(k[0]) for k in sorted(proc.kids)) or "none"))

    def restart_sandgate(self, debug=False):
        """A fresh network process (same config, ports, CA and audit.db), so
        that the second idle-tunnel measurement does not reuse the heap the
        first one grew."""
        self.proxies.pop("sandgate-socks5", None)
        self.proxies.pop("sandgate")["proc"].stop()
        self.launch_sandgate(debug)

    def squid_conf(self, d, port, bump):
        p = self.port
        user = "proxy"
        try:
            run(["id", user])
        except subprocess.CalledProcessError:
            user = "nobody"
        lines = []
        if bump:
            lines += [
                "http_port %s:%d ssl-bump tls-cert=%s/ca.crt tls-key=%s/ca.key "
                "generate-host-certificates=on dynamic_cert_mem_cache_size=16MB" % (PROXY_IP, port, d, d),
                "sslcrtd_program /usr/lib/squid/security_file_certgen -s %s/ssl_db -M 16MB" % d,
                "sslcrtd_children 5 startup=1 idle=1",
                # peek at the ClientHello, stare at the origin's certificate,
                # bump: the usual server-first set-up; leaves mimic the origin's
                "acl step1 at_step SslBump1", "acl step2 at_step SslBump2",
                "acl step3 at_step SslBump3", "ssl_bump peek step1", "ssl_bump stare step2",
                "ssl_bump bump step3",
                "tls_outgoing_options cafile=%s/origin-ca.crt min-version=1.2" % self.work,
                "acl tunnel_ports port %d %d" % (p["ir"], p["ie"]),
                "acl request_ports port %d %d" % (p["ir"], p["ie"]),
            ]
        else:
            lines += ["http_port %s:%d" % (PROXY_IP, port),
                      "acl tunnel_ports port %d" % p["pt"],
                      "acl request_ports port %d" % p["http"]]
        # The same allowlist as sandgate's: the origin's address and ports,
        # GET under /r/ wherever the requests are visible.
        lines += [
            "acl origin dst %s/32" % ORIGIN_IP,
            "acl CONNECT method CONNECT", "acl get method GET",
            "acl paths urlpath_regex ^/r/",
            "http_access allow localhost CONNECT origin tunnel_ports",
            "http_access allow localhost get origin request_ports paths",
            "http_access deny all",
            "cache deny all",
            "access_log stdio:%s/access.log" % d,
            "cache_log %s/cache.log" % d,
            "pid_filename %s/squid.pid" % d,
            "coredump_dir %s" % d,
            "visible_hostname sandgate-bench",
            "shutdown_lifetime 1 seconds",
            "dns_nameservers 127.0.0.1",
            "pinger_enable off",
            "max_filedescriptors 65536",
            "cache_effective_user %s" % user,
        ]
        return "\n".join(lines) + "\n", user

    def start_squid(self, name, bump):
        if not os.path.exists("/usr/sbin/squid"):
            self.missing[name] = "squid-openssl not installed"
            return
        d = self.path(name)
        os.makedirs(d)
        port = free_port(PROXY_IP)
        ca = None
        if bump:
            self.ca(name + "/ca")
            ca = d + "/ca.crt"
            run(["/usr/lib/squid/security_file_certgen", "-c", "-s", d + "/ssl_db", "-M", "16MB"])
        conf, user = self.squid_conf(d, port, bump)
        with open(d + "/squid.conf", "w") as f:
            f.write(conf)
        run(["chown", "-R", user, d])
        proc = Proc(name, ["/usr/sbin/squid", "-N", "-f", d + "/squid.conf"], d + "/stderr.log")
        self.add_proxy(name, proc, port, ca, [d + "/stderr.log", d + "/cache.log"])

    def start_tinyproxy(self):
        if not os.path.exists("/usr/bin/tinyproxy"):
            self.missing["tinyproxy"] = "tinyproxy not installed"
            return
        d = self.path("tinyproxy")
        os.makedirs(d)
        port = free_port(PROXY_IP)
        with open(d + "/filter", "w") as f:
            f.write("^http://%s:%d/r/\n" % (re.escape(ORIGIN_IP), self.port["http"]))
        user = "User nobody\nGroup nogroup\n" if os.getuid() == 0 else ""
        with open(d + "/tinyproxy.conf", "w") as f:
            f.write("""{user}Port {port}
Listen {ip}
Timeout 600
LogFile "{d}/tinyproxy.log"
LogLevel Info
PidFile "{d}/tinyproxy.pid"
MaxClients 1000
Allow 127.0.0.1
Filter "{d}/filter"
FilterURLs Yes
FilterType ere
FilterDefaultDeny Yes
""".format(user=user, port=port, ip=PROXY_IP, d=d))
        if os.getuid() == 0:
            run(["chown", "-R", "nobody:nogroup", d])
        proc = Proc("tinyproxy", ["/usr/bin/tinyproxy", "-d", "-c", d + "/tinyproxy.conf"],
                    d + "/stderr.log")
        self.add_proxy("tinyproxy", proc, port, None, [d + "/stderr.log", d + "/tinyproxy.log"])

    def start_mitmproxy(self):
        if not shutil.which("mitmdump"):
            self.missing["mitmproxy"] = "mitmproxy not installed"
            return
        d = self.path("mitmproxy")
        os.makedirs(d)
        port = free_port(PROXY_IP)
        # An ECDSA CA of its own like the others (mitmproxy signs leaves with
        # the CA's key type).
        self.ca("mitmproxy/ca")
        with open(d + "/ca.key") as k, open(d + "/ca.crt") as c, \
                open(d + "/mitmproxy-ca.pem", "w") as out:
            out.write(k.read() + c.read())
        shutil.copy(d + "/ca.crt", d + "/mitmproxy-ca-cert.pem")
        p = self.port
        # The same allowlist as the others, as an addon: mitmproxy's own
        # allow_hosts decides what to intercept, not what to refuse.
        with open(d + "/allow.py", "w") as f:
            f.write('''from mitmproxy import http

TUNNELS = {("%(ip)s", %(ir)d), ("%(ip)s", %(ie)d)}
REQUESTS = {("%(ip)s", %(http)d), ("%(ip)s", %(ir)d), ("%(ip)s", %(ie)d)}


def http_connect(flow):
    if (flow.request.host, flow.request.port) not in TUNNELS:
        flow.response = http.Response.make(403, b"blocked\\n")


def request(flow):
    r = flow.request
    if ((r.host, r.port) not in REQUESTS or r.method != "GET"
            or not r.path.startswith("/r/")):
        flow.response = http.Response.make(403, b"blocked\\n")
''' % dict(ip=ORIGIN_IP, **p))
        proc = Proc("mitmproxy", [
            "mitmdump", "--listen-host", PROXY_IP, "--listen-port", str(port),
            "--set", "confdir=" + d, "--set", "ssl_verify_upstream_trusted_ca=%s/origin-ca.crt" % self.work,
            "--set", "flow_detail=0", "--set", "termlog_verbosity=warn",
            # stream big bodies like every other proxy does, not buffer them
            "--set", "stream_large_bodies=1m", "-s", d + "/allow.py"], d + "/mitmdump.log")
        self.add_proxy("mitmproxy", proc, port, d + "/ca.crt", [d + "/mitmdump.log"])

    def start(self):
        self.binaries()
        self.certificates()
        self.origin()
        self.start_sandgate()
        if "sandgate" not in self.proxies:
            raise SystemExit("sandgate did not start: nothing to measure")
        if self.a.dlp:
            self.start_sandgate("sandgate-dlp", self.a.dlp)
        if self.a.smoke:
            for n in ("squid", "squid-bump", "tinyproxy", "mitmproxy"):
                self.missing[n] = "not run with --smoke"
            return
        want = self.a.baselines
        for n, start in (("squid", lambda: self.start_squid("squid", False)),
                         ("squid-bump", lambda: self.start_squid("squid-bump", True)),
                         ("tinyproxy", self.start_tinyproxy),
                         ("mitmproxy", self.start_mitmproxy)):
            if want is None or n in want:
                start()
            else:
                self.missing[n] = "not selected (--baselines)"

    # -------------------------------------------------------- measuring

    def client_argv(self, scn, target, path, mode, threads, seconds, n=None):
        port = self.port[scn.port]
        argv = [self.client, "-t", "%s:%d" % (ORIGIN_IP, port), "-p", path, "-m", mode,
                "-c", str(threads), "-d", "%g" % seconds]
        if n:
            argv += ["-n", str(n)]
        if scn.tls:
            ca = self.path("origin-ca.crt")
            if scn.intercept and target != "direct":
                ca = self.proxies[target]["ca"]
            argv += ["-C", ca]
        if target != "direct":
            pr = self.proxies[target]
            argv += ["-s" if pr.get("socks") else "-x", pr["addr"]]
        return argv

    @staticmethod
    def parse(line):
        out = {}
        for kv in line.split():
            k, _, v = kv.partition("=")
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
        return out

    def pid_of(self, target):
        return self.proxies[target]["pid"] if target != "direct" else None

    def measure(self, scn, target, tag, mode, threads, seconds, n=None):
        """One client run; its numbers plus the proxy's CPU seconds."""
        path = ("/up/" if scn.upload else "/r/big/" if scn.kind == "bulk" else
                "/r/s/") + tag
        argv = self.client_argv(scn, target, path, mode, threads, seconds, n)
        if scn.upload:
            argv += ["-u", self.upload_file]
        pid = self.pid_of(target)
        t0 = cpu_ticks(pid) if pid else {}
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=seconds + 120)
            out, err = r.stdout.strip(), r.stderr.strip()
        except subprocess.TimeoutExpired:     # the client is killed
            out, err = "", "bench_client did not finish in %g s" % (seconds + 120)
        t1 = cpu_ticks(pid) if pid else {}
        res = self.parse(out.splitlines()[-1]) if out else {}
        if not out:
            res["errors"] = 1
        res.setdefault("ok", 0)
        res.setdefault("errors", 0)
        res["cpu_s"] = cpu_seconds(t0, t1) if pid else None
        res["first_error"] = err
        self.expected[tag] = (int(res["ok"]), int(res["errors"]))
        return res

    def profile(self, scn, target):
        """One more run of scn with `perf record -g` on the proxy's
        network process (all its threads, kernel and user); its top
        symbols (self time) into --perf DIR, as <scenario>-<target>.txt."""
        pid = self.pid_of(target)
        if pid is None or not self.a.perf:
            return
        name = "%s-%s" % (scn.key.replace("'", "p"), target)
        data = os.path.join(self.a.perf, name + ".data")
        rec = subprocess.Popen(["perf", "record", "-q", "-g", "-F", "1999", "-p", str(pid),
                                "-o", data], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        tag = "%s.%s.perf" % (scn.key, target)
        try:
            if scn.kind == "bulk":
                res = self.measure(scn, target, tag, "keepalive", 1, 300, self.a.downloads)
            else:
                res = self.measure(scn, target, tag, scn.mode, self.a.threads, self.a.seconds)
        finally:
            rec.send_signal(signal.SIGINT)
            try:
                rec.wait(60)
            except subprocess.TimeoutExpired:
                rec.kill()
        self.record(scn, target, res)
        rows = {}
        for sort, limit in (("dso", "0.5"), ("dso,sym", "0.4")):
            try:
                rep = run(["perf", "report", "-i", data, "--stdio", "--no-children",
                           "--sort", sort, "--percent-limit", limit, "-g", "none",
                           "--max-stack", "0"], timeout=600)
            except (subprocess.SubprocessError, OSError) as e:
                log("perf report failed: %s" % e)
                return
            rows[sort] = [ln for ln in rep.splitlines()
                          if ln.strip() and not ln.startswith("#")]
        with open(os.path.join(self.a.perf, name + ".txt"), "w") as f:
            f.write("# %s, %s: %s\n" % (scn.label, LABEL.get(target, target), scn.title))
            f.write("# by object:\n" + "\n".join(rows["dso"][:12]) + "\n")
            f.write("# by symbol:\n" + "\n".join(rows["dso,sym"][:30]) + "\n")
        if not self.a.keep:
            os.unlink(data)
        log("perf: %s" % os.path.join(self.a.perf, name + ".txt"))

    def measure_idle(self, scn, target, tag):
        """RSS of the proxy's own process before and after N idle tunnels,
        each with its TLS handshake done and one request answered."""
        pid = self.pid_of(target)
        self.measure(scn, target, tag + ".w", "sessions", 2, 30, 20)   # leaves, pools
        time.sleep(0.5)
        r0 = rss_kib(pid)
        n = self.a.tunnels
        argv = self.client_argv(scn, target, "/r/s/" + tag, "idle", 4, 600, n)
        out = self.path("idle-%s.out" % tag)
        proc = Proc("client", argv, out)
        res = {"ok": 0, "errors": 0}
        try:
            self.wait_ready(proc, out)
            # Let deferred work settle; --idle-settle past
            # upstream.keepalive_timeout (5 s) measures the tunnels once
            # their idle origin connections are gone.
            time.sleep(self.a.idle_settle)
            r1 = rss_kib(pid)
            with open(out) as f:
                text = f.read()
            for line in text.splitlines():
                if line.startswith("mode="):
                    res = self.parse(line)
                elif line.startswith("ready held="):
                    res["held"] = int(line.split("=")[1])
                elif "first error" in line:
                    res["first_error"] = line
            # N more beside them, on the heap the first N left: what a
            # tunnel adds once the heap holds what earlier connections
            # freed (the first figure includes the heap's growth).
            if self.a.idle_next and res.get("held"):
                res["held_next"], r2 = self.idle_batch(scn, target, tag + ".next", n)
                if res["held_next"] and r1 and r2:
                    res["rss_kib_next"] = (r2 - r1) / res["held_next"]
        finally:
            proc.stop()
        held = res.get("held", 0)
        res["rss_kib"] = (r1 - r0) / held if held and r0 and r1 else None
        res["rss_before"], res["rss_after"] = r0, r1
        self.expected[tag] = (int(res.get("ok", 0)), int(res.get("errors", 0)))
        return res

    @staticmethod
    def wait_ready(proc, out):
        """Until the idle client holds its tunnels (or ends); its output."""
        end = time.time() + 600
        text = ""
        while time.time() < end and proc.alive():
            with open(out) as f:
                text = f.read()
            if "ready held=" in text:
                break
            time.sleep(0.2)
        return text

    def idle_batch(self, scn, target, tag, n):
        """Open N more idle tunnels; (how many were held, RSS after)."""
        argv = self.client_argv(scn, target, "/r/s/" + tag, "idle", 4, 600, n)
        out = self.path("idle-%s.out" % tag)
        proc = Proc("client", argv, out)
        try:
            text = self.wait_ready(proc, out)
            held = int(text.split("ready held=")[1].split()[0]) \
                if "ready held=" in text else 0
            time.sleep(self.a.idle_settle)
            return held, rss_kib(self.pid_of(target))
        finally:
            proc.stop()

    def record(self, scn, target, res):
        self.results.setdefault((scn.key, target), []).append(res)
        what = {"rate": "%(rate).0f req/s p50 %(p50_us).0f us p99 %(p99_us).0f us",
                "bulk": "%(mbps).1f MB/s",
                "idle": "%(held)s tunnels, RSS %(rss_before)s -> %(rss_after)s KiB"}[scn.kind]
        try:
            msg = what % res
        except (KeyError, TypeError):
            msg = "no result"
        if res.get("cpu_s") is not None:
            msg += ", proxy CPU %.2f s" % res["cpu_s"]
        if res.get("rss_kib_next") is not None:
            msg += "; %d more beside them: %.1f KiB each" % (res["held_next"],
                                                             res["rss_kib_next"])
        if res.get("errors"):
            msg += ", %d errors (%s)" % (res["errors"], res.get("first_error", ""))
        log("%-4s %-16s %s" % (scn.label, target, msg))

    def targets(self, scn):
        return [t for t in scn.targets if t == "direct" or t in self.proxies]

    def run_all(self):
        a = self.a
        scns = [s for s in SCENARIOS if s.key in a.only]
        # Idle tunnels first, while the proxies' heaps are fresh: memory
        # freed by earlier load would otherwise hide what tunnels take.
        idled = False
        for s in scns:
            if s.kind == "idle":
                for t in self.targets(s):
                    if t == "sandgate" and idled:
                        self.restart_sandgate()
                        if "sandgate" not in self.proxies:
                            continue
                    self.record(s, t, self.measure_idle(s, t, "%s.%s.idle" % (s.key, t)))
                    idled = idled or t == "sandgate"
        for s in scns:
            if s.kind == "rate":
                for t in self.targets(s):   # warm-up: leaves minted, pools filled
                    self.measure(s, t, "%s.%s.w" % (s.key, t), s.mode, 1, 10, 20)
            elif s.kind == "bulk" and "direct" in s.targets:
                # the body into the page cache once, before anything is timed
                self.measure(s, "direct", "%s.direct.w" % s.key, "keepalive", 1, 300, 1)
        # Rounds interleave the targets, so that drift in a shared machine's
        # speed spreads over all of them instead of favouring one.
        for rnd in range(1, a.rounds + 1):
            for s in scns:
                for t in self.targets(s):
                    tag = "%s.%s.%d" % (s.key, t, rnd)
                    if s.kind == "rate":
                        res = self.measure(s, t, tag, s.mode, a.threads, a.seconds)
                    elif s.kind == "bulk":
                        res = self.measure(s, t, tag, "keepalive", 1, 300, a.downloads)
                    else:
                        continue
                    self.record(s, t, res)
        if a.perf:
            os.makedirs(a.perf, exist_ok=True)
            for s in scns:
                if s.kind in ("rate", "bulk"):
                    for t in self.targets(s):
                        if t.startswith("sandgate"):
                            self.profile(s, t)

    # -------------------------------------------------------- one session, phase by phase

    PHASES = [("CONNECT and ClientHello", None, "hello"),
              ("leaf certificate lookup", "hello", "leaf"),
              ("client handshake", "leaf", "client-tls"),
              ("client sends its request", "client-tls", "request"),
              ("decision, origin socket", "request", "origin-connect"),
              ("origin connect + handshake", "origin-connect", "origin-tls"),
              ("origin answers (head)", "origin-tls", "response-head"),
              ("rest of the response", "response-head", "response-done")]

    def breakdown(self):
        """Where one intercepted session's time goes (issue 14, point 3):
        sandgate restarted with -d logs each session's phases; sessions one
        at a time (no queueing in the figures) against the RSA origin with
        resumption, the same origin without (no tickets, no cache), and the
        ECDSA origin. Medians in microseconds."""
        if "c" not in self.a.only or "sandgate" not in self.proxies:
            return {}
        n = 40 if self.a.smoke else 300
        self.restart_sandgate(debug=True)
        if "sandgate" not in self.proxies:
            return {}
        logf = self.path("sg", "sandgate.log")
        out = {}
        for port, title in (("ir", "RSA-2048 origin"), ("in", "RSA-2048 origin without "
                            "tickets or cache"), ("ie", "ECDSA P-256 origin")):
            scn = Scn("c-" + port, title, "rate", port, ["sandgate"], intercept=True,
                      mode="sessions")
            start = os.path.getsize(logf)
            tag = "c.%s.breakdown" % port
            argv = self.client_argv(scn, "sandgate", "/r/s/" + tag, "sessions", 1, 60, n)
            try:
                r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, timeout=180)
                res = self.parse(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
            except subprocess.TimeoutExpired:
                res = {}
            self.expected[tag] = (int(res.get("ok", 0)), int(res.get("errors", 0)))
            time.sleep(0.5)
            rows = {"full": [], "resumed": []}
            with open(logf, errors="replace") as f:
                f.seek(start)
                for line in f:
                    if "phases in us after accept:" not in line:
                        continue
                    kv = dict(x.split("=", 1) for x in
                              line.split("accept:", 1)[1].split() if "=" in x)
                    if kv.get("origin-session") in rows:
                        rows[kv["origin-session"]].append(kv)
            for kind, lst in rows.items():
                if len(lst) < max(5, n // 10):
                    continue
                ph = []
                for name, a, z in self.PHASES:
                    vals = [int(kv[z]) - (int(kv[a]) if a else 0) for kv in lst
                            if z in kv and (a is None or a in kv)]
                    ph.append((name, med(vals) if vals else None))
                total = med([int(kv["response-done"]) for kv in lst if "response-done" in kv])
                out[(title, kind)] = (len(lst), ph, total)
            log("breakdown %s: %s" % (title, ", ".join("%s %d" % (k, len(v))
                                                       for k, v in rows.items())))
        self.restart_sandgate()
        return out

    # -------------------------------------------------------- micro-benchmarks

    def micro(self):
        out = {}
        if "policy" in self.a.only:
            try:
                text = run([os.path.join(self.build, "bench", "bench_policy")], timeout=300)
                m = re.search(r"decide_100001_rules_ns ([\d.]+)", text)
                out["policy_ns"] = float(m.group(1)) if m else None
                log("policy: " + " ".join(text.split("\n")[2:3]))
            except (subprocess.SubprocessError, OSError) as e:
                log("bench_policy failed: %s" % e)
        if "audit" in self.a.only:
            try:
                text = run([os.path.join(self.build, "bench", "bench_audit"),
                            str(self.a.audit_rows), "0"], timeout=600)
                m = re.search(r"committed in [\d.]+ s: (\d+) rows/s", text)
                d = re.search(r"rows: submitted (\d+), refused (\d+), dropped (\d+), "
                              r"in the file (-?\d+)", text)
                out["audit_rps"] = float(m.group(1)) if m else None
                if d:
                    sub, ref, drop, infile = map(int, d.groups())
                    out["audit_lost"] = sub - infile if infile >= 0 else None
                    out["audit_detail"] = (sub, ref, drop, infile)
                log("audit: " + text.split("\n")[0])
            except (subprocess.SubprocessError, OSError) as e:
                log("bench_audit failed: %s" % e)
        return out

    # -------------------------------------------------------- checks

    def stop_and_count(self):
        """Stop everything (nginx last, gracefully, so its log buffer is
        written) and count what the origin and sandgate's audit log saw."""
        for name, pr in list(self.proxies.items()):
            if not name.endswith("-socks5"):
                pr["proc"].stop()
        self.nginx.stop(signal.SIGQUIT, 15)
        seen = {}
        with open(self.path("nginx", "access.log")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] == "200":
                    tag = parts[0].rsplit("/", 1)[-1]
                    seen[tag] = seen.get(tag, 0) + 1
        self.seen = seen
        self.audit = {}
        db = self.path("sg", "var", "audit.db")
        if os.path.exists(db):
            c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            for path, n in c.execute("SELECT path, count(*) FROM events WHERE decision = "
                                     "'allow' AND (path LIKE '/r/%' OR path LIKE '/up/%') "
                                     "GROUP BY path"):
                self.audit[path.rsplit("/", 1)[-1]] = n
            self.audit_total = c.execute("SELECT count(*) FROM events").fetchone()[0]
            self.audit_denied = c.execute(
                "SELECT count(*) FROM events WHERE decision != 'allow'").fetchone()[0]
            c.close()

    def carried(self, scn, target):
        """None when every request the client counted reached the origin
        (and, for sandgate where it sees requests, has its audit row);
        otherwise what is wrong."""
        bad = []
        for tag, (ok, errs) in self.expected.items():
            if not tag.startswith("%s.%s." % (scn.key, target)):
                continue
            got = self.seen.get(tag, 0)
            if not ok <= got <= ok + errs:
                bad.append("origin saw %d of %d (%s)" % (got, ok, tag))
            if (target == "sandgate" and scn.visible and tag in self.seen
                    and self.audit.get(tag, 0) != got):
                bad.append("%d audit rows for %d requests (%s)" %
                           (self.audit.get(tag, 0), got, tag))
        return "; ".join(bad) or None


class Scn:
    """A scenario. key goes into request paths (no quote marks); label is
    the issue's name for it."""

    def __init__(self, label, title, kind, port, targets, tls=True, intercept=False,
                 mode="keepalive", goals=(), upload=False):
        self.label, self.title, self.kind, self.port = label, title, kind, port
        self.upload = upload
        self.key = label.replace("'", "i")
        self.targets, self.tls, self.intercept, self.mode = targets, tls, intercept, mode
        self.goals = goals
        # sandgate sees (and audits) each request: plain HTTP or intercepted
        self.visible = intercept or not tls


# goals: (who, "ratio", baseline, factor) -- who / baseline >= factor;
#        (who, "max", None, limit)       -- who's figure <= limit
SCENARIOS = [
    Scn("e", "idle passthrough tunnels, RSS each", "idle", "pt",
        ["squid", "sandgate"], goals=[("sandgate", "max", None, 8)]),
    Scn("e'", "idle intercepted tunnels, RSS each", "idle", "ir",
        ["squid-bump", "mitmproxy", "sandgate"], intercept=True,
        goals=[("sandgate", "max", None, 32)]),
    Scn("a", "absolute-form HTTP, keep-alive, 200 B", "rate", "http",
        ["direct", "squid", "tinyproxy", "mitmproxy", "sandgate"], tls=False,
        goals=[("sandgate", "ratio", "squid", 3)]),
    Scn("b", "CONNECT passthrough, TLS keep-alive", "rate", "pt",
        ["direct", "squid", "sandgate", "sandgate-socks5"],
        goals=[("sandgate", "ratio", "squid", 1.3), ("sandgate", "ratio", "direct", 0.7),
               ("sandgate-socks5", "ratio", "squid", 1.3),
               ("sandgate-socks5", "ratio", "direct", 0.7)]),
    Scn("b'", "intercepted, TLS keep-alive", "rate", "ir",
        ["direct", "squid-bump", "mitmproxy", "sandgate"], intercept=True,
        goals=[("sandgate", "ratio", "squid-bump", 3), ("sandgate", "ratio", "mitmproxy", 20)]),
    Scn("c", "intercepted, new connection + handshake per request, RSA-2048 origin", "rate",
        "ir", ["direct", "squid-bump", "mitmproxy", "sandgate"], intercept=True,
        mode="sessions", goals=[("sandgate", "ratio", "squid-bump", 2)]),
    Scn("c-ec", "intercepted, new connection + handshake per request, ECDSA origin", "rate",
        "ie", ["direct", "squid-bump", "mitmproxy", "sandgate"], intercept=True,
        mode="sessions", goals=[("sandgate", "ratio", "squid-bump", 2)]),
    Scn("d", "bulk download, passthrough tunnel", "bulk", "pt",
        ["direct", "squid", "sandgate"], goals=[("sandgate", "ratio", "direct", 0.9)]),
    Scn("d'", "bulk download, intercepted", "bulk", "ir",
        ["direct", "squid-bump", "mitmproxy", "sandgate"], intercept=True,
        goals=[("sandgate", "ratio", "squid-bump", 3)]),
    Scn("u'", "bulk upload (JSON), intercepted", "bulk", "ir",
        ["direct", "squid-bump", "sandgate"], intercept=True, upload=True),
]

# --dlp: sandgate-dlp beside sandgate in these, at least 0.9x of it (issue 27)
DLP_SCENARIOS = ("b'", "d'", "u'")


def write_upload(path, size):
    """The upload body: JSON records as an agent sends them -- prose, code,
    identifiers, 40-digit hashes, a short base64 field, escapes; no
    secrets. Deterministic."""
    rng = random.Random(27)
    words = ("the of and to in is for on that with as by this be are from or "
             "function return const value error request response config build "
             "test module import string number object array index result data "
             "update delete create server client token session cache").split()
    b64 = string.ascii_letters + string.digits + "+/"
    with open(path, "w") as f:
        n = 0
        while n < size:
            rec = ('{"id":%d,"path":"src/%s/%s.c","sha":"%040x","text":"%s",'
                   '"code":"if (x) {\\n\\treturn %s(\\"%s\\");\\n}","blob":"%s"}\n' % (
                       n, rng.choice(words), rng.choice(words), rng.getrandbits(160),
                       " ".join(rng.choice(words) for _ in range(rng.randint(8, 40))),
                       rng.choice(words), rng.choice(words),
                       "".join(rng.choice(b64) for _ in range(rng.randint(8, 24)))))
            f.write(rec)
            n += len(rec)

LABEL = {"direct": "direct", "squid": "Squid", "squid-bump": "Squid ssl-bump",
         "tinyproxy": "tinyproxy", "mitmproxy": "mitmproxy", "sandgate": "sandgate",
         "sandgate-socks5": "sandgate SOCKS5", "sandgate-dlp": "sandgate with dlp"}


# ------------------------------------------------------------ report

def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, nd=0):
    if v is None:
        return "–"
    if nd == 0:
        return "{:,.0f}".format(v).replace(",", " ")
    return "{:,.{}f}".format(v, nd).replace(",", " ")


def figure(b, scn, target):
    """The one figure a goal compares: req/s, MB/s or KiB per tunnel."""
    rs = b.results.get((scn.key, target))
    if not rs:
        return None
    key = {"rate": "rate", "bulk": "mbps", "idle": "rss_kib"}[scn.kind]
    return med(r.get(key) for r in rs)


def per_round(b, scn, target):
    rs = b.results.get((scn.key, target)) or []
    key = {"rate": "rate", "bulk": "mbps", "idle": "rss_kib"}[scn.kind]
    return [r.get(key) for r in rs]


def cpu_per_op(b, scn, target):
    """Median proxy CPU per request (s) or per MB (s)."""
    rs = b.results.get((scn.key, target)) or []
    if scn.kind == "rate":
        return med(r["cpu_s"] / r["ok"] for r in rs if r.get("cpu_s") is not None and r["ok"])
    if scn.kind == "bulk":
        return med(r["cpu_s"] / (r["bytes"] / 1e6) for r in rs
                   if r.get("cpu_s") is not None and r.get("bytes"))
    return None


def unit(scn):
    return {"rate": "req/s", "bulk": "MB/s", "idle": "KiB"}[scn.kind]


def report(b, micro, started):
    a = b.a
    out = []
    w = out.append
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    commit = b.commit
    w("## sandgate benchmark, %s%s" % (started.strftime("%Y-%m-%d %H:%M UTC"),
                                       {"smoke": " (--smoke)", "quick": " (--quick)"}.get(a.level, "")))
    w("")
    w("- machine: %s, %d cores (nproc), %.0f GiB, %s" % (cpu, os.cpu_count(), mem,
                                                        " ".join(os.uname()[i] for i in (0, 2))))
    busy, steal = machine_busy()
    wall = (time.monotonic() - b.mono0) * HZ * os.cpu_count()
    other = (busy - b.busy0[0]) / HZ - (own_cpu() - b.own0)
    w("- load average before the run: %s; during it, other processes used %.0f %% of the "
      "machine's CPU time%s" % (b.load0, max(other, 0) * HZ * 100 / wall,
                               ", the hypervisor stole %.0f %%" % ((steal - b.busy0[1]) * 100 / wall)
                               if steal > b.busy0[1] else ""))
    w("- sandgate %s, workers: %d; %s" % (commit, a.workers, ", ".join(
        "%s %s" % kv for kv in b.versions.items())))
    w("- %d client threads (bulk: 1), %s s per measurement, %d round%s (medians); %d idle "
      "tunnels; %d MiB bulk body x %d; the run took %.0f s" % (
          a.threads, fmt(a.seconds, 1), a.rounds, "" if a.rounds == 1 else "s", a.tunnels,
          a.bulk_mib, a.downloads, time.monotonic() - b.mono0))
    for n, why in sorted(b.missing.items()):
        w("- %s: %s" % (LABEL.get(n, n), why))
    w("")
    w("| scenario | via | req/s | p50 µs | p99 µs | MB/s | proxy CPU | RSS / tunnel | carried |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for s in SCENARIOS:
        if s.key not in a.only:
            continue
        for t in s.targets:
            rs = b.results.get((s.key, t))
            if not rs:
                continue
            rate = med(r.get("rate") for r in rs) if s.kind == "rate" else None
            p50 = med(r.get("p50_us") for r in rs) if s.kind == "rate" else None
            p99 = med(r.get("p99_us") for r in rs) if s.kind == "rate" else None
            mbps = med(r.get("mbps") for r in rs) if s.kind == "bulk" else None
            cpu_s = "–"
            if s.kind == "rate":
                v = med(r["cpu_s"] * 1e6 / r["ok"] for r in rs
                        if r.get("cpu_s") is not None and r["ok"])
                cpu_s = "%s µs/req" % fmt(v) if v is not None else "–"
            elif s.kind == "bulk":
                v = med(r["cpu_s"] * 1e3 / (r["bytes"] / 1e6) for r in rs
                        if r.get("cpu_s") is not None and r.get("bytes"))
                cpu_s = "%s ms/MB" % fmt(v, 2) if v is not None else "–"
            rss = med(r.get("rss_kib") for r in rs) if s.kind == "idle" else None
            errs = sum(int(r.get("errors", 0)) for r in rs)
            bad = b.carried(s, t)
            c = "✘ " + bad if bad else "✔"
            if errs:
                c += " (%d client errors)" % errs
            w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                s.label, LABEL[t], fmt(rate), fmt(p50), fmt(p99), fmt(mbps, 1), cpu_s,
                "%s KiB" % fmt(rss, 1) if rss is not None else "–", c))
    w("")
    for s in SCENARIOS:
        for t in (s.targets if s.kind == "idle" and s.key in a.only else []):
            nxt = med(r.get("rss_kib_next") for r in b.results.get((s.key, t), []))
            if nxt is not None:
                w("(%s) %s: as many tunnels again, opened beside the first on the heap "
                  "they left: %s KiB each." % (s.label, LABEL[t], fmt(nxt, 1)))
    w("")
    w("| scenario | target | sandgate | baseline | ratio | per round | holds | CPU: baseline / sandgate |")
    w("| --- | --- | ---: | ---: | ---: | ---: | :---: | ---: |")
    for s in SCENARIOS:
        if s.key not in a.only:
            continue
        for who, kind, base, lim in s.goals:
            v = figure(b, s, who)
            name = "(%s) %s" % (s.label, s.title)
            if kind == "max":
                holds = "–" if v is None else ("✔" if v <= lim else "✘")
                w("| %s | ≤ %g KiB | %s | – | – | – | %s | – |" % (
                    name, lim, "%s KiB" % fmt(v, 1) if v is not None else "n/a", holds))
                continue
            bv = figure(b, s, base)
            ratio = v / bv if v is not None and bv else None
            holds = "–" if ratio is None else ("✔" if ratio >= lim else "✘")
            bad = [x for x in (b.carried(s, who), b.carried(s, base)) if x]
            if bad and ratio is not None:
                holds = "✘ not carried"
            rounds = [x / y for x, y in zip(per_round(b, s, who), per_round(b, s, base))
                      if x is not None and y]
            span = "–"
            if len(rounds) > 1:
                span = "%s–%s" % (fmt(min(rounds), 2), fmt(max(rounds), 2))
            ca, cb = cpu_per_op(b, s, who), cpu_per_op(b, s, base)
            w("| %s | ≥ %g× %s | %s | %s | %s | %s | %s | %s |" % (
                name if who == "sandgate" else name + (" via SOCKS5" if who ==
                "sandgate-socks5" else " with dlp: %s" % a.dlp), lim,
                LABEL[base],
                "%s %s" % (fmt(v, 1 if s.kind == "bulk" else 0), unit(s)) if v is not None else "n/a",
                "%s %s" % (fmt(bv, 1 if s.kind == "bulk" else 0), unit(s)) if bv is not None else
                "n/a (%s)" % b.missing.get(base, "not measured"),
                fmt(ratio, 2) + "×" if ratio is not None else "–", span, holds,
                fmt(cb / ca, 2) + "×" if ca and cb else "–"))
    if "policy_ns" in micro:
        v = micro["policy_ns"]
        w("| policy decision, 100 001 rules | < 2 µs | %s µs | – | – | – | %s | – |" % (
            fmt(v and v / 1000, 3), "–" if v is None else "✔" if v < 2000 else "✘"))
    if "audit_rps" in micro:
        v, lost = micro["audit_rps"], micro.get("audit_lost")
        sub, ref, drop, infile = micro.get("audit_detail", (0, 0, 0, -1))
        ok = v is not None and v >= 50000 and lost == 0 and ref == 0 and drop == 0
        w("| audit rows, 2 producers, none dropped | ≥ 50 000 rows/s | %s rows/s, %s of %s "
          "rows in the file | – | – | – | %s | – |" % (fmt(v), fmt(infile), fmt(sub),
                                               "–" if v is None else "✔" if ok else "✘"))
    bd = micro.get("breakdown") or {}
    if bd:
        w("")
        w("### One intercepted session, phase by phase (median µs, sessions one at a time)")
        w("")
        keys = sorted(bd)
        w("| phase | " + " | ".join("%s: %s handshake (%d sessions)" % (
            t, "resumed" if k == "resumed" else "full", bd[(t, k)][0])
                                     for t, k in keys) + " |")
        w("| --- |" + " ---: |" * len(keys))
        for i, (name, _, _) in enumerate(Bench.PHASES):
            w("| %s | " % name + " | ".join(fmt(bd[k][1][i][1]) for k in keys) + " |")
        w("| whole session, accept to response done | " +
          " | ".join(fmt(bd[k][2]) for k in keys) + " |")
    if hasattr(b, "audit_total"):
        w("")
        w("sandgate's audit log: %d rows, %d of them not allow." %
          (b.audit_total, b.audit_denied))
    return "\n".join(out) + "\n"


def versions(b):
    """Versions of the baselines, and the commit measured (taken at the start:
    the tree may change while the benchmark runs)."""
    try:
        b.commit = run(["git", "-C", SRC, "rev-parse", "--short", "HEAD"]).strip()
        if run(["git", "-C", SRC, "status", "--porcelain", "--untracked-files=no"]).strip():
            b.commit += " plus uncommitted changes"
    except (subprocess.CalledProcessError, OSError):
        b.commit = "unknown commit"
    v = {}

    def pkg(p):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", p], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        return r.stdout.split("-")[0] if r.returncode == 0 and r.stdout else None
    for name, p in (("nginx", "nginx-light"), ("Squid", "squid-openssl"),
                    ("tinyproxy", "tinyproxy"), ("mitmproxy", "mitmproxy"),
                    ("OpenSSL", "openssl")):
        if pkg(p) and (name in ("nginx", "OpenSSL") or not b.a.smoke):
            v[name] = pkg(p)
    b.versions = v


def main():
    ap = argparse.ArgumentParser(
        prog="bench/run.sh", description="sandgate against direct, Squid, tinyproxy and "
        "mitmproxy in one run; a markdown table on stdout, progress on stderr.")
    ap.add_argument("build", nargs="?", default=os.path.join(SRC, "build"),
                    help="build directory (default: ./build)")
    lv = ap.add_mutually_exclusive_group()
    lv.add_argument("--quick", dest="level", action="store_const", const="quick",
                    help="one short round of every figure: about 2 minutes")
    lv.add_argument("--smoke", dest="level", action="store_const", const="smoke",
                    help="sandgate and direct only, tiny loads, no packages: seconds")
    ap.add_argument("--workers", type=int, default=int(os.environ.get("SANDGATE_WORKERS", 1)),
                    help="sandgate workers (env SANDGATE_WORKERS; default 1)")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--seconds", type=float, help="per rate measurement")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", 4)))
    ap.add_argument("--tunnels", type=int, help="idle tunnels per proxy (full: 2000)")
    ap.add_argument("--idle-settle", type=float, default=1.0, metavar="S",
                    help="seconds between the last idle tunnel and the RSS reading (1)")
    ap.add_argument("--idle-next", type=int, default=1, choices=(0, 1),
                    help="after the idle tunnels' reading, open as many again beside "
                    "them and read what each adds (1; 0: skip)")
    ap.add_argument("--bulk-mib", type=int, help="bulk body size (full: 256)")
    ap.add_argument("--upload-mib", type=int, help="upload body size (full: 64)")
    ap.add_argument("--dlp", choices=("block", "report"),
        help="run sandgate-dlp beside sandgate, its policy scanning requests "
        "for secrets (docs/dlp.md), in %s; its goal: 0.9x sandgate" %
        ", ".join(DLP_SCENARIOS))
    ap.add_argument("--only", help="comma-separated scenarios: " +
                    ",".join(s.label for s in SCENARIOS) + ",policy,audit")
    ap.add_argument("--no-install", action="store_true",
                    help="never apt-get: skip the baselines that are not installed")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--baselines", help="comma-separated: squid,squid-bump,tinyproxy,mitmproxy "
                    "(default all; 'none' for sandgate and direct only)")
    ap.add_argument("--perf", metavar="DIR", help="after the rounds, one more run of each "
                    "scenario under `perf record -g` on sandgate; top symbols into DIR")
    a = ap.parse_args()
    if a.dlp:
        for s in SCENARIOS:
            if s.label in DLP_SCENARIOS:
                s.targets = s.targets + ["sandgate-dlp"]
                s.goals = list(s.goals) + [("sandgate-dlp", "ratio", "sandgate", 0.9)]
    a.level = a.level or "full"
    dflt = {"full": dict(rounds=3, seconds=8, tunnels=2000, bulk_mib=256, downloads=4,
                         upload_mib=64,
                         audit_rows=500000),
            "quick": dict(rounds=1, seconds=3, tunnels=2000, bulk_mib=256, downloads=3,
                          upload_mib=64,
                          audit_rows=150000),
            "smoke": dict(rounds=1, seconds=0.3, tunnels=20, bulk_mib=4, downloads=1,
                          upload_mib=1,
                          audit_rows=0)}[a.level]
    for k, v in dflt.items():
        if getattr(a, k, None) is None:
            setattr(a, k, v)
    keys = [s.key for s in SCENARIOS] + ["policy", "audit"]
    a.smoke = a.level == "smoke"
    if a.only:
        by_label = {s.label: s.key for s in SCENARIOS}
        a.only = [by_label.get(k, k) for k in a.only.split(",")]
        unknown = set(a.only) - set(keys)
        if unknown:
            ap.error("unknown scenario %s" % ", ".join(sorted(unknown)))
    else:
        a.only = [k for k in keys if not (a.smoke and k in ("policy", "audit"))]
    if a.baselines is not None:
        a.baselines = [] if a.baselines == "none" else a.baselines.split(",")
        bad = set(a.baselines) - {"squid", "squid-bump", "tinyproxy", "mitmproxy"}
        if bad:
            ap.error("unknown baseline %s" % ", ".join(sorted(bad)))
    if a.perf:
        a.perf = os.path.abspath(a.perf)
    if not 1 <= a.workers <= 64:
        ap.error("--workers: 1 to 64")

    def bye(sig, frame):
        log("signal %d: stopping everything" % sig)
        raise SystemExit(128 + sig)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, bye)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    b = Bench(a)
    started = datetime.datetime.now(datetime.timezone.utc)
    b.load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    b.mono0, b.busy0, b.own0 = time.monotonic(), machine_busy(), own_cpu()
    try:
        if not a.smoke and not a.no_install:
            ensure_packages(["nginx-light", "squid-openssl", "tinyproxy", "mitmproxy"], b.work)
        for tool in ("/usr/sbin/nginx", "/usr/bin/openssl"):
            if not os.access(tool, os.X_OK):
                print("SKIP: %s is missing (scripts/install-deps.sh installs it)" % tool)
                return 77
        versions(b)
        b.start()
        b.run_all()
        bd = b.breakdown()
        micro = b.micro()
        micro["breakdown"] = bd
        b.stop_and_count()
        sys.stdout.write(report(b, micro, started))
        return 0
    finally:
        stop_all()
        if a.keep:
            log("kept %s" % b.work)
        else:
            shutil.rmtree(b.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
