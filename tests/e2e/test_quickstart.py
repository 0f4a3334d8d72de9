#!/usr/bin/python3
"""
docs/quickstart.md, run as it is written (issue 24 point 7): every ```sh block
of the page in order, by bash, as root, in a scratch directory that stands for
the checkout (its build/ is the build under test), and checks of what each
step printed.

- A block whose first line is "# terminal 1" is `make run`: here the build
  exists already, so the test starts what make run ends with,
  `build/sandgate serve`, in the background (and stops the one before, as the
  reader's Ctrl-C does). The block must say exactly `make run`.
- Every other block is "# step: NAME" and runs to its end with bash -e; what it
  prints is checked below under NAME. A step of the page without checks here,
  or checks of a step the page lost, fail the test.

The page uses the built-in defaults' fixed ports (3128, 5353, ...) and creates
a namespace and veth of fixed names, so the test runs in a network and mount
namespace of its own (unshare), with /run/netns a tmpfs of its own: nothing
it binds or creates can meet another test's. Everything it started is killed
by PID at the end, the cleanup step included or not.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sgtest as T  # noqa: E402
import test_ocsf_schema as O  # noqa: E402  (its schemas and checks)

DOC = os.path.join(HERE, "..", "..", "docs", "quickstart.md")
INNER = "SGTEST_QUICKSTART_INNER"
SECRET = "sk-demo-0123456789abcdef"


def blocks(text):
    """The ```sh blocks of the page: [(kind, name, body)]."""
    out = []
    for m in re.finditer(r"(?ms)^```sh\n(.*?)^```\n", text):
        body = m.group(1)
        first = body.split("\n", 1)[0].strip()
        if first == "# terminal 1":
            out.append(("serve", None, body))
            continue
        s = re.match(r"# step: ([a-z-]+)$", first)
        if not s:
            raise AssertionError("a ```sh block without '# step: NAME' or "
                                 "'# terminal 1': %r" % first)
        out.append(("step", s.group(1), body))
    return out


class Quickstart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.td = T.TempDir("sgtest-quickstart-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.dir = cls.td.path
        os.chmod(cls.dir, 0o755)
        os.symlink(os.path.dirname(os.path.abspath(T.BIN)),
                   os.path.join(cls.dir, "build"))
        cls.serve = None
        cls.addClassCleanup(cls.stop_all)
        with open(DOC) as f:
            cls.steps = blocks(f.read())

    @classmethod
    def stop_all(cls):
        cls.stop_serve()
        for name in ("api.pid", "www.pid", "dnsmasq.pid"):
            p = os.path.join(cls.dir, "origin", name)
            try:
                with open(p) as f:
                    pid = int(f.read().split()[0])
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError, IndexError):
                pass
        for sid in ("qs-agent",):
            subprocess.run([T.BIN, "sandbox", "rm", sid], cwd=cls.dir,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=T.clean_env(), timeout=60)

    @classmethod
    def stop_serve(cls):
        if cls.serve is None:
            return
        was_alive = cls.serve.alive()
        if was_alive:
            cls.serve.p.send_signal(signal.SIGINT)   # the reader's Ctrl-C
            try:
                cls.serve.p.wait(timeout=10 * T.SLOW)
            except subprocess.TimeoutExpired:
                pass
        cls.serve.stop()
        text = cls.serve.log_text()
        cls.serve = None
        problems = T.log_problems(text)
        if not was_alive or problems:
            raise AssertionError("the gateway %s: %s\n%s" % (
                "died" if not was_alive else "logged problems", problems,
                "\n".join(text.splitlines()[-40:])))

    def start_serve(self, body):
        lines = [l for l in body.splitlines()[1:] if l.strip()]
        self.assertEqual(lines, ["make run"], "a terminal-1 block is make run")
        type(self).stop_serve()
        log = os.path.join(self.dir, "serve-%d.log" % time.time_ns())
        type(self).serve = T.Proc([os.path.join(self.dir, "build", "sandgate"),
                                   "serve"], log, cwd=self.dir)
        deadline = time.time() + 30 * T.SLOW
        while time.time() < deadline:
            if re.search(r"(?m) info: ready$", self.serve.log_text()):
                return
            self.assertTrue(self.serve.alive(), self.serve.log_tail())
            time.sleep(0.1)
        self.fail("the gateway did not get ready:\n" + self.serve.log_tail())

    def run_step(self, body):
        return subprocess.run(["bash", "-e", "-c", body], cwd=self.dir,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=240 * T.SLOW, env=T.clean_env())

    # ------------------------------------------------------------ checks

    def check_status(self, r):
        self.assertRegex(r.stdout, r"(?m)^keeper +up \(pid \d+")
        self.assertRegex(r.stdout, r"(?m)^listeners +http 127\.0\.0\.1:3128,")
        self.assertRegex(r.stdout, r"(?m)^policies +0 files, 0 sandboxes")

    def check_fake_internet(self, r):
        deadline = time.time() + 15 * T.SLOW
        while True:   # the origins start in the background
            out = subprocess.run(["curl", "-sS", "--cacert", "origin/cert.pem",
                "--resolve", "api.example.test:443:198.19.7.2",
                "https://api.example.test/probe"], cwd=self.dir,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                timeout=30)
            www = subprocess.run(["curl", "-sS",
                "http://198.19.7.2/guide.txt"], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, timeout=30)
            if ('"demo-1"' in out.stdout and www.stdout == "the guide\n") or \
                    time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertIn('"demo-1"', out.stdout, out.stderr)
        self.assertEqual(www.stdout, "the guide\n", www.stderr)
        dig = subprocess.run(["dig", "+short", "@127.0.0.1", "-p", "5354",
            "docs.example.test"], stdout=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual(dig.stdout.strip(), "198.19.7.2")
        os.unlink(os.path.join(self.dir, "origin", "seen.log"))

    def check_config(self, r):
        self.assertTrue(os.path.exists(os.path.join(self.dir, "sandgate.yaml")))

    def check_policy(self, r):
        self.assertRegex(r.stdout, r"sandgate\.yaml: ok: 1 file, 0 sandboxes, "
                         r"1 policy .*1 rule, 1 credential")

    def check_swap(self, r):
        m = re.search(r"(?m)^the sandbox has: (sg-ph-[a-z2-7]{32})$", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        self.assertNotIn(SECRET, r.stdout.split("\n")[0])
        self.assertIn('{"models": ["demo-1"]}', r.stdout)
        self.assertRegex(r.stdout, r"(?m)^GET /v1/models Authorization: "
                         r"Bearer %s$" % SECRET)
        with open(os.path.join(self.dir, "origin", "seen.log")) as f:
            self.assertNotIn(m.group(1), f.read())

    def check_denied(self, r):
        self.assertIn("Could not resolve host: docs.example.test", r.stderr)
        self.assertNotIn("the guide", r.stdout)

    def check_report(self, r):
        self.assertIn("reloaded: new policy in force", r.stdout)
        self.assertRegex(r.stdout, r"(?m)^the guide$")
        self.assertRegex(r.stdout, r"(?m)^# sandgate policy suggest --sandbox "
                         r"qs-agent: \d+ rows? denied or reported")
        self.assertRegex(r.stdout, r"(?m)^      - host: docs\.example\.test +#.*"
                         r"\n        ports: \[80\]$")
        self.assertNotIn("api.example.test", r.stdout.split("policies:")[1])

    def check_enforce(self, r):
        self.assertIn("reloaded: new policy in force", r.stdout)
        self.assertRegex(r.stdout, r"(?m)^the guide$")

    def check_audit(self, r):
        out = r.stdout
        rows = [l for l in out.splitlines() if " qs-agent " in l]
        self.assertEqual([(l.split()[3], l.split()[4], l.split()[7])
                          for l in rows],
                         [("allow", "api.example.test", "/v1/models"),
                          ("report", "docs.example.test", "/guide.txt"),
                          ("allow", "docs.example.test", "/guide.txt")], out)
        cred = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        self.assertEqual([(c["host"], c["path"], c["credential"])
                          for c in cred],
                         [("api.example.test", "/v1/models", "demo")], out)
        self.assertNotIn(SECRET, out)
        self.assertRegex(out, r"(?m)^last reload +ok at \S+ \(admin\)$")
        m = re.search(r"(?m)^traffic .*; (\d+) requests, (\d+) denied", out)
        self.assertIsNotNone(m, out)
        self.assertGreaterEqual(int(m.group(2)), 1)

    def check_cleanup(self, r):
        self.assertNotIn("qs-inet", subprocess.run(["ip", "netns", "list"],
            stdout=subprocess.PIPE, text=True).stdout)

    # ------------------------------------------------------------ the page

    def test_the_page_runs(self):
        names = [n for k, n, _ in self.steps if k == "step"]
        checks = {n[len("check_"):].replace("_", "-") for n in dir(self)
                  if n.startswith("check_")}
        self.assertEqual(set(names), checks, "the page's steps and the "
                         "test's checks differ")
        self.assertEqual(self.steps[0][0], "serve")
        for kind, name, body in self.steps:
            if kind == "serve":
                self.start_serve(body)
                continue
            r = self.run_step(body)
            self.assertEqual(r.returncode, 0, "step %s failed:\n%s\n%s\n"
                             "gateway log:\n%s" % (name, r.stdout, r.stderr,
                             self.serve.log_tail() if self.serve else ""))
            getattr(self, "check_" + name.replace("-", "_"))(r)
        type(self).stop_serve()
        self.ocsf_of_the_run()

    def ocsf_of_the_run(self):
        """The rows this page made (transparent and DNS ones, from a real
        sandbox) exported as OCSF, each valid for its class's schema."""
        if O.jsonschema is None:
            print("OCSF check skipped: python3-jsonschema is not installed",
                  file=sys.stderr)
            return
        r = subprocess.run([os.path.join(self.dir, "build", "sandgate"),
            "audit", "export", "--format", "ocsf"], cwd=self.dir,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=60, env=T.clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        validators = O.load_validators()
        events = [json.loads(l) for l in r.stdout.splitlines()]
        classes = {e["class_uid"] for e in events}
        self.assertTrue({4002, 4003} <= classes, classes)
        for e in events:
            errs = sorted(str(x.message) for x in
                          validators[e["class_uid"]].iter_errors(e))
            self.assertEqual(errs, [], e)
            self.assertEqual(O.bad_ips(e), [], e)
        http = [e for e in events if e["class_uid"] == 4002]
        self.assertIn("https://api.example.test/v1/models",
                      [e["http_request"]["url"]["url_string"] for e in http])


def enter_namespace():
    """Run this file again in a network and mount namespace of its own."""
    if os.environ.get(INNER) == "1":
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run/netns"],
                       check=True)
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    os.makedirs("/run/netns", exist_ok=True)
    env = dict(os.environ)
    env[INNER] = "1"
    r = subprocess.run(["unshare", "--net", "--mount", "--propagation",
        "private", "--", sys.executable] + sys.argv, env=env)
    sys.exit(r.returncode)


if __name__ == "__main__":
    T.require_binary()
    if os.geteuid() != 0:
        T.skip_file("needs root: the page's commands make a namespace and "
                    "run sandboxes")
    for tool in ("unshare", "ip", "dnsmasq", "openssl", "curl", "dig"):
        if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
            T.skip_file("%s is missing" % tool)
    if not (os.access("/usr/bin/runsc", os.X_OK)):
        T.skip_file("runsc is not installed (the page's sandboxes use gVisor)")
    enter_namespace()
    unittest.main(verbosity=2)
