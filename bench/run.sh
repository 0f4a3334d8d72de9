#!/bin/sh
# The gateway benchmark (issue 14): every scenario against a direct
# connection, Squid (plain and ssl-bump), tinyproxy and mitmproxy, in one
# run, on loopback; a markdown table on stdout. docs/bench.md says what it
# measures and how. Numbers are printed, never asserted.
#
#   bench/run.sh [--quick | --smoke] [--workers N] [BUILD_DIR]   (--help: all options)
#
# Installs squid-openssl, tinyproxy and mitmproxy with apt-get when they are
# missing (not with --smoke or --no-install). The body is bench/run.py,
# run with Debian's python3.
exec /usr/bin/python3 "$(dirname "$0")/run.py" "$@"
