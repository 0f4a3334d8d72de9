#!/bin/sh
# Runs every benchmark binary of a build (bench_*), one after the other.
# Benchmarks print numbers and ratios against a baseline measured in the
# same run; they never fail on timings. Usage: bench/run.sh BUILD_DIR
set -eu
build=${1:-build}
for b in "$build"/bench/bench_*; do
	[ -x "$b" ] || continue
	echo "== $(basename "$b")"
	"$b"
done
