#!/bin/sh
# Runs every libFuzzer target for a short while from its seed corpus.
# Usage: fuzz-all.sh BUILD_DIR SECONDS. New inputs go to a scratch directory,
# never into the committed corpus; a crash fails the run and leaves its file.
set -eu
build=$1
secs=$2
src=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail=0
ran=0
for bin in "$build"/tests/fuzz_*; do
	case "$bin" in *_replay) continue ;; esac
	[ -x "$bin" ] || continue
	name=$(basename "$bin")
	mkdir -p "$scratch/$name"
	echo "fuzzing $name for ${secs}s"
	if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix="$build/$name-" "$scratch/$name" \
	    "$src/tests/fuzz/corpus/$name" >"$build/$name.log" 2>&1; then
		echo "FAILED: $name (see $build/$name.log)"
		tail -30 "$build/$name.log"
		fail=$((fail + 1))
	fi
	ran=$((ran + 1))
done
echo "fuzz: $((ran - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
