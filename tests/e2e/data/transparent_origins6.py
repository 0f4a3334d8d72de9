#!/usr/bin/python3
"""
The IPv6 origins of test_transparent.py: transparent_origins.py (same SPEC
and STATUS arguments, same status file) with its HTTP and HTTPS servers
bound to IPv6 addresses. Run in the fake internet namespace with
`ip netns exec NS /usr/bin/python3 transparent_origins6.py SPEC STATUS`.
"""

import os
import socket
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import sgtest as T  # noqa: E402
import transparent_origins as O  # noqa: E402


class _OriginServer6(T._OriginServer):
    address_family = socket.AF_INET6


# This process serves IPv6 only: every Origin it builds binds an IPv6 socket.
T._OriginServer = _OriginServer6

if __name__ == "__main__":
    O.main()
