#!/usr/bin/python3
"""
Shaped placeholders through the launcher (issue 25 point 3): `sandgate
sandbox run` puts the sandbox's placeholder of a credential with a
placeholder_shape in the credential's env variable, in that shape, and a
fresh one for each sandbox. The world is sbtest's (root, namespaces; exit 77
otherwise); test_cred_shape.py covers the swap and the checks.
"""

import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402
from sbtest import INET_NET, SandboxWorld, skip_unless_root  # noqa: E402


class ShapedRunTest(SandboxWorld):
    POLICY = ("policies:\n"
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
              "    env: GH_TOKEN\n"
              "    placeholder_shape: {prefix: \"ghp_\", length: 40, "
              "alphabet: base62}\n") % INET_NET

    def test_01_env_holds_the_shaped_placeholder(self):
        def one(rt):
            seen = []
            for n in range(2):
                sid = "t-shape-%s-%d" % (rt, n)
                r = T.run_sandgate("sandbox", "run", "-c", self.gw.cfg_path,
                                   "--policy", "web", "--runtime", rt,
                                   "--id", sid, "--", "sh", "-c",
                                   'echo "token=$GH_TOKEN"', timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                tok = [l for l in r.stdout.splitlines()
                       if l.startswith("token=")]
                self.assertEqual(len(tok), 1, r.stdout)
                self.assertRegex(tok[0], r"^token=ghp_[A-Za-z0-9]{36}$")
                seen.append(tok[0])
                self.check_clean(sid)
            self.assertNotEqual(seen[0], seen[1])
        self.each_runtime(one)


if __name__ == "__main__":
    skip_unless_root()
    unittest.main(verbosity=2)
