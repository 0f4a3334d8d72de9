#!/usr/bin/python3
"""
Every reason word the gateway can write (the table in src/core/reason.c)
is explained in docs/audit.md, and the docs name no reason the code lacks
in the reasons table: the vocabulary a security team queries by is one.
"""

import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


def table_words():
    with open(os.path.join(T.SRC, "src", "core", "reason.c")) as f:
        return set(re.findall(r'\[REASON_[A-Z_]+\]\s*=\s*\{\s*"([a-z-]+)"',
                              f.read()))


def doc_words():
    """Words in the first column of docs/audit.md's "Reasons" table."""
    with open(os.path.join(T.SRC, "docs", "audit.md")) as f:
        text = f.read()
    part = text.split("## Reasons", 1)[1].split("\n## ", 1)[0]
    words = set()
    for line in part.splitlines():
        if line.startswith("| `"):
            words |= set(re.findall(r"`([a-z-]+)`", line.split("|")[1]))
    return words


class DocsReasonsTest(unittest.TestCase):
    def test_every_reason_documented(self):
        missing = sorted(table_words() - doc_words())
        self.assertEqual(missing, [], "reasons not in docs/audit.md")

    def test_no_documented_reason_the_code_lacks(self):
        # rows the gateway writes with words outside the request table
        own = {"retention", "checkpoint"}
        extra = sorted(doc_words() - table_words() - own)
        self.assertEqual(extra, [], "docs/audit.md names reasons the code lacks")


if __name__ == "__main__":
    T.main()
