#!/usr/bin/python3
"""
Sandbox launcher benchmark (issue 7 point 8): for each runtime,

  - start latency: from exec of `sandgate sandbox run` to the first
    instruction of the command (`/usr/bin/date +%s%N` prints the clock when
    it runs; host and sandbox share CLOCK_REALTIME), and the whole `run`
    (start, command, teardown);
  - `create` + `rm` cycles per minute, one at a time and four at a time;

against a baseline measured in the same run: the runtime alone running the
same command from a minimal bundle (read-only host /usr, /bin, /lib*, a new
network namespace with nothing in it) — what any launcher on that runtime
pays — so the table shows what sandgate adds (netns, veth, nftables,
registration, bundle, state, teardown).

Run by hand as root, not by CTest:  bench/bench_sandbox.py [BUILD_DIR]
Environment: BENCH_ROUNDS (10) runs per latency figure, BENCH_CYCLES (40).
Loopback and namespaces only; every process it starts is stopped by PID.
"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build")
SANDGATE = os.path.join(BUILD, "sandgate")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
CYCLES = int(os.environ.get("BENCH_CYCLES", "40"))
RUNTIMES = {"crun": "/usr/bin/crun", "runsc": "/usr/bin/runsc"}
DATE = ["/usr/bin/date", "+%s%N"]


def log(msg):
    print("bench_sandbox: " + msg, file=sys.stderr, flush=True)


def free_port():
    t = socket.socket()
    t.bind(("0.0.0.0", 0))
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    port = t.getsockname()[1]
    try:
        u.bind(("0.0.0.0", port))
    except OSError:
        t.close()
        return free_port()
    t.close()
    u.close()
    return port


def gateway(work):
    """sandgate serve with wildcard transparent and DNS listeners."""
    cfg = os.path.join(work, "sandgate.yaml")
    pol = os.path.join(work, "policies")
    os.makedirs(pol)
    with open(os.path.join(pol, "bench.yaml"), "w") as f:
        f.write("policies:\n  - name: bench\n    allow: []\n")
    with open(cfg, "w") as f:
        f.write("state_dir: %s/var\npolicies: [%s]\n"
            "ca: { cert: %s/ca.crt, key: %s/ca.key }\n"
            "vault: { db: %s/var/vault.db, key_file: %s/vault.key }\n"
            "listen:\n  http: 127.0.0.1:%d\n  socks5: null\n  ingress: null\n"
            "  metrics: null\n  transparent: 0.0.0.0:%d\n  dns: 0.0.0.0:%d\n"
            "  admin: %s/admin.sock\nupstream:\n  resolvers: [127.0.0.1:9]\n"
            % (work, pol, work, work, work, work, free_port(), free_port(),
               free_port(), work))
    logf = open(os.path.join(work, "gateway.log"), "wb")
    p = subprocess.Popen([SANDGATE, "serve", "-c", cfg], stdout=logf,
        stderr=subprocess.STDOUT)
    sock = os.path.join(work, "admin.sock")
    for _ in range(200):
        if os.path.exists(sock):
            return p, cfg
        if p.poll() is not None:
            break
        time.sleep(0.05)
    stop(p)
    raise SystemExit("bench_sandbox: the gateway did not start; see "
        + os.path.join(work, "gateway.log"))


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def baseline_bundle(work, rt):
    """A minimal bundle: the same command, host binaries, an empty netns."""
    b = os.path.join(work, "base-" + rt)
    os.makedirs(os.path.join(b, "rootfs"))
    mounts = [{"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "mode=755"]}]
    for d in ("/usr", "/bin", "/sbin", "/lib", "/lib64"):
        if os.path.isdir(d) and not os.path.islink(d):
            os.makedirs(os.path.join(b, "rootfs", d[1:]))
            mounts.append({"destination": d, "type": "bind", "source": d,
                "options": ["rbind", "ro"]})
        elif os.path.islink(d):
            os.symlink(os.readlink(d), os.path.join(b, "rootfs", d[1:]))
    ns = [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network")]
    cfg = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": True},
        "process": {"args": DATE, "cwd": "/", "user": {"uid": 0, "gid": 0},
            "env": ["PATH=/usr/bin:/bin"], "terminal": False,
            "noNewPrivileges": True},
        "hostname": "base", "mounts": mounts,
        "linux": {"namespaces": ns}}
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    return b


def baseline_argv(rt, bundle, root, cid):
    if rt == "runsc":
        return [RUNTIMES[rt], "--root", root, "--network=none",
            "--platform=ptrace", "run", "--bundle", bundle, cid]
    # crun on a hybrid cgroup host: as the launcher does, in a private mount
    # namespace without the cgroup2 mount (fixed script, arguments as argv)
    return ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
        'umount -l /sys/fs/cgroup/unified 2>/dev/null; exec "$@"', "sh",
        RUNTIMES[rt], "--root", root, "run", "--bundle", bundle, cid]


def timed(argv):
    """(ms to the command's first instruction, ms for the whole run)."""
    t0 = time.time_ns()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, timeout=120)
    t1 = time.time_ns()
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv[:4]), r.stderr.strip()))
    first = int(r.stdout.split()[0])
    return (first - t0) / 1e6, (t1 - t0) / 1e6


def cycles(cfg, rt, n, parallel):
    ids = ["bn-%s-%d-%d" % (rt, parallel, i) for i in range(n)]
    lock = threading.Lock()
    errors = []

    def worker():
        while True:
            with lock:
                if not ids:
                    return
                sid = ids.pop()
            for sub in (["create", "--policy", "bench", "--runtime", rt,
                    "--id", sid], ["rm", sid]):
                r = subprocess.run([SANDGATE, "sandbox", sub[0], "-c", cfg]
                    + sub[1:], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, timeout=120)
                if r.returncode != 0:
                    errors.append(r.stderr.strip())
    t0 = time.time()
    ts = [threading.Thread(target=worker) for _ in range(parallel)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return n * 60 / (time.time() - t0)


def med(xs):
    return statistics.median(xs)


def main():
    if os.geteuid() != 0:
        raise SystemExit("bench_sandbox: needs root")
    if not os.access(SANDGATE, os.X_OK):
        raise SystemExit("bench_sandbox: build first (%s)" % SANDGATE)
    work = tempfile.mkdtemp(prefix="sg-bench-sb-")
    os.chmod(work, 0o755)
    gw, cfg = gateway(work)
    rows = []
    try:
        for rt, path in RUNTIMES.items():
            if not os.access(path, os.X_OK):
                log("%s is not installed: skipped" % rt)
                continue
            log("%s: %d runs each way" % (rt, ROUNDS))
            b = baseline_bundle(work, rt)
            root = os.path.join(work, "root-" + rt)
            os.makedirs(root)
            base, sg = [], []
            for i in range(ROUNDS):  # interleaved: the same noise for both
                base.append(timed(baseline_argv(rt, b, root, "base%d" % i)))
                sg.append(timed([SANDGATE, "sandbox", "run", "-c", cfg,
                    "--policy", "bench", "--runtime", rt, "--id",
                    "bs-%s-%d" % (rt, i), "--"] + DATE))
            log("%s: %d create/rm cycles, 1 and 4 at a time" % (rt, CYCLES))
            c1 = cycles(cfg, rt, CYCLES, 1)
            c4 = cycles(cfg, rt, CYCLES, 4)
            rows.append((rt, med([x[0] for x in base]), med([x[1] for x in
                base]), med([x[0] for x in sg]), med([x[1] for x in sg]),
                c1, c4))
    finally:
        stop(gw)
        shutil.rmtree(work, ignore_errors=True)
    print("| runtime | runtime alone: to first instruction | whole run "
        "| sandgate run: to first instruction | whole run | ratio (first "
        "instr.) | create+rm / min (1 at a time) | (4 at a time) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for rt, b0, b1, s0, s1, c1, c4 in rows:
        print("| %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.2f | %.0f "
            "| %.0f |" % (rt, b0, b1, s0, s1, s0 / b0, c1, c4))


if __name__ == "__main__":
    main()
