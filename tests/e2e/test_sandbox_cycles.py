#!/usr/bin/python3
"""
Nothing leaks (issue 7 point 6): 200 `sandbox create` / `sandbox rm` cycles
in each runtime, four at a time, with every tenth supervisor killed with
SIGKILL while it builds its sandbox and every tenth killed once its sandbox
runs; then no namespace, link, address, nftables rule, cgroup, bundle,
runtime container, runsc process, registration or state row of any of them
is left. Under ASan (SANDGATE_ASAN=1) it runs 25 cycles per runtime, and
says so. Root only (exit 77 otherwise).
"""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from sbtest import (RUNTIMES, SandboxWorld, leftovers_many, sh,  # noqa: E402
    skip_unless_root)

CYCLES = 25 if os.environ.get("SANDGATE_ASAN") else 200
PARALLEL = 4


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def pids_naming(ids):
    """Processes whose command line names one of ids (runsc, crun)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) in (b"runsc", b"crun",
                b"runsc-sandbox", b"runsc-gofer", b"exe") and \
                any(a.decode(errors="replace") in ids for a in argv):
            found.append((int(d), b" ".join(argv[:6]).decode(errors="replace")))
    return found


class SandboxCyclesTest(SandboxWorld):
    def cycle(self, rt, sid, how, errors):
        argv = [T.BIN, "sandbox", "create", "-c", self.gw.cfg_path,
            "--policy", "web", "--runtime", rt, "--id", sid]
        if how == "kill-building":
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=T.clean_env())
            deadline = time.time() + 30
            sup = []
            while not sup and time.time() < deadline and p.poll() is None:
                sup = children(p.pid)
            time.sleep(random.uniform(0, 0.4))
            for c in sup:
                os.kill(c, signal.SIGKILL)
            p.wait(120)
        else:
            r = subprocess.run(argv, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=T.clean_env(), text=True,
                timeout=120 * T.SLOW)
            if r.returncode != 0:
                errors.append("%s create: %s" % (sid, r.stderr.strip()))
                return
            if how == "kill-running":
                with open("/run/sandgate/bundles/%s/owner.json" % sid) as f:
                    os.kill(json.load(f)["pid"], signal.SIGKILL)
        r = subprocess.run([T.BIN, "sandbox", "rm", "-c", self.gw.cfg_path,
            sid], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=T.clean_env(), text=True, timeout=120 * T.SLOW)
        # a supervisor killed before it claimed the id may leave nothing;
        # one killed while running may be reaped first by another
        # launcher's reconciliation (every start makes one): then rm finds
        # no sandbox, and nothing of it may be left
        if r.returncode != 0 and how == "kill-running" and \
                "no sandbox %s" % sid in r.stderr:
            left = [p for p in ("/run/sandgate/bundles/" + sid,
                                "/run/netns/sandgate-" + sid)
                    if os.path.exists(p)]
            if left:
                errors.append("%s rm: %s, yet %s left" %
                              (sid, r.stderr.strip(), left))
        elif r.returncode != 0 and how != "kill-building":
            errors.append("%s rm: %s" % (sid, r.stderr.strip()))

    def run_cycles(self, rt):
        ids = ["cy%d-%s-%d" % (os.getpid(), rt, i) for i in range(CYCLES)]
        errors = []
        work = list(enumerate(ids))
        lock = threading.Lock()

        def worker():
            while True:
                with lock:
                    if not work:
                        return
                    i, sid = work.pop(0)
                how = {3: "kill-building", 7: "kill-running"}.get(i % 10,
                    "plain")
                try:
                    self.cycle(rt, sid, how, errors)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append("%s: %r" % (sid, e))

        started = time.time()
        threads = [threading.Thread(target=worker) for _ in range(PARALLEL)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - started
        print("%s: %d create/rm cycles in %.1f s (%.0f per minute, %d at a "
            "time)" % (rt, CYCLES, took, CYCLES * 60 / took, PARALLEL),
            file=sys.stderr)
        self.assertEqual(errors, [])
        # one more launcher start reconciles what the killed ones left
        r = self.sandgate("sandbox", "ls", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([e["id"] for e in json.loads(r.stdout)
            if e["id"] in ids], [])
        self.assertEqual(leftovers_many(ids), [])
        reg = set(self.registered())
        self.assertEqual([i for i in ids if i in reg], [])
        db = sqlite3.connect(self.td.join("var", "state.db"))
        rows = db.execute("SELECT id FROM sandboxes").fetchall()
        db.close()
        self.assertEqual([r[0] for r in rows if r[0] in ids], [])
        lst = sh(RUNTIMES[rt], "--root", "/run/sandgate/" + rt, "list",
            check=False).stdout
        self.assertEqual([i for i in ids if i in lst.split()], [])
        self.assertEqual(pids_naming(set(ids)), [])
        with open("/run/sandgate/sandbox.lock"):
            pass  # the lock file stays; it is the only thing that does

    def test_cycles(self):
        if CYCLES < 200:
            print("SANDGATE_ASAN is set: %d cycles per runtime instead of 200"
                % CYCLES, file=sys.stderr)
        self.each_runtime(self.run_cycles)


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
