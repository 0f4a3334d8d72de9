#!/usr/bin/python3
"""
Example hosts in the README, docs/ and policies/examples/ are names under
example.com (or .example, .test, .localhost), never a real package registry,
mirror or forge (issue 16, point 6): every `host:` / `hosts:` name in the
example policies and in the docs' YAML blocks, and no known registry name
anywhere in their text. The vendor APIs of the credential recipes
(api.openai.com, which SPEC itself uses, and api.anthropic.com) are the
only real names.
"""

import glob
import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

SRC = os.environ.get("SANDGATE_SRC") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
REAL_APIS = {"api.openai.com", "api.anthropic.com"}
EXAMPLE_SUFFIXES = ("example.com", ".example", ".test", ".localhost")
# Registries, mirrors and forges a package manager or git talks to.
REGISTRY_RX = re.compile(r"(?i)\b(pypi\.org|pythonhosted\.org|npmjs\.(org|com)|"
    r"yarnpkg\.com|debian\.org|ubuntu\.com|alpinelinux\.org|github\.com|"
    r"githubusercontent\.com|gitlab\.com|bitbucket\.org|crates\.io|"
    r"rubygems\.org|golang\.org|go\.dev|maven\.org|gradle\.org|docker\.io|"
    r"docker\.com|quay\.io|gcr\.io|ghcr\.io|nuget\.org|packagist\.org|"
    r"anaconda\.(org|com)|conda\.io|cpan\.org|hackage\.haskell\.org)\b")
HOST_RX = re.compile(r"^\s*-?\s*hosts?:\s*(.*?)\s*(#.*)?$")


def files():
    out = [os.path.join(SRC, "README.md")]
    out += sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))
    out += sorted(glob.glob(os.path.join(SRC, "policies", "examples", "*")))
    return [f for f in out if os.path.isfile(f)]


def yaml_lines(path, text):
    """(line number, line) of the YAML: the whole file, or a doc's
    ```yaml blocks."""
    lines = text.splitlines()
    if not path.endswith(".md"):
        return list(enumerate(lines, 1))
    out, inside = [], False
    for n, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            inside = line.strip() == "```yaml" if not inside else False
            continue
        if inside:
            out.append((n, line))
    return out


def names(value):
    value = value.strip().strip("[]")
    return [v.strip().strip("\"'") for v in value.split(",") if v.strip()]


class DocsHostsTest(unittest.TestCase):
    def test_no_registry_names(self):
        bad = []
        for path in files():
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    for m in REGISTRY_RX.finditer(line):
                        bad.append("%s:%d: %s" % (os.path.relpath(path, SRC),
                            n, m.group(0)))
        self.assertEqual(bad, [])

    def test_example_hosts(self):
        bad, seen = [], 0
        for path in files():
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for n, line in yaml_lines(path, text):
                m = HOST_RX.match(line)
                if not m:
                    continue
                for name in names(m.group(1)):
                    seen += 1
                    bare = name[2:] if name.startswith("*.") else name
                    if bare in REAL_APIS or bare.endswith(EXAMPLE_SUFFIXES):
                        continue
                    bad.append("%s:%d: %s" % (os.path.relpath(path, SRC), n,
                        name))
        self.assertGreater(seen, 20)
        self.assertEqual(bad, [])


if __name__ == "__main__":
    T.main()
