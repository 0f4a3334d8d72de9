#!/usr/bin/python3
"""
Helper of test_package.py, run inside the root the package was installed in
(a chroot, a network namespace of its own, the root read-only but for
ReadWritePaths): starts the installed `sandgate serve` the way
sandgate.service would (its capability bounding set and NoNewPrivileges
through setpriv, NOTIFY_SOCKET), and prints what happened as one JSON line.
argv: the unit file's path.
"""

import json
import os
import signal
import socket
import subprocess
import sys


def unit_values(path, key):
    vals = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(key + "="):
                vals.append(line.split("=", 1)[1])
    return vals


def main():
    unit = sys.argv[1]
    out = {"messages": []}
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    caps = " ".join(unit_values(unit, "CapabilityBoundingSet")).split()
    bset = "-all" + "".join(",+" + c.lower()[len("cap_"):] for c in caps)
    argv = unit_values(unit, "ExecStart")[0].split()
    nnp = unit_values(unit, "NoNewPrivileges") == ["yes"]
    path = "/run/sandgate-notify.sock"
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    os.chmod(path, 0o777)
    s.settimeout(30)
    cmd = ["setpriv", "--bounding-set=" + bset] + \
        (["--no-new-privs"] if nnp else []) + argv
    out["argv"] = cmd
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NOTIFY_SOCKET": path}
    log = open("/run/sandgate.log", "wb")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, env=env, cwd="/")
    try:
        def recv():
            m = s.recv(4096).decode()
            out["messages"].append(m)
            return m
        try:
            recv()
            c = socket.create_connection(("127.0.0.1", 3128), timeout=10)
            c.sendall(b"CONNECT pkgs.example.com:443 HTTP/1.1\r\n"
                      b"Host: pkgs.example.com:443\r\n\r\n")
            out["connect_answer"] = c.recv(200).decode("latin-1").split("\r\n")[0]
            c.close()
            with open("/proc/%d/status" % p.pid) as f:
                st = dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
            out["uid"] = st["Uid"].split()[0]
            out["cap_eff"] = st["CapEff"]
            out["no_new_privs"] = st.get("NoNewPrivs")
            os.kill(p.pid, signal.SIGHUP)
            recv()
            recv()
            os.kill(p.pid, signal.SIGTERM)
            recv()
        except (socket.timeout, OSError) as e:
            out["error"] = repr(e)
        try:
            out["exit"] = p.wait(30)
        except subprocess.TimeoutExpired:
            out["exit"] = "hung"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
    with open("/run/sandgate.log", "rb") as f:
        out["log"] = f.read().decode("utf-8", "replace")[-4000:]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
