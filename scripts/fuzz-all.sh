#!/bin/sh
# Runs every libFuzzer target for a short while from its seed corpus.
# Usage: fuzz-all.sh BUILD_DIR SECONDS [JOBS]. JOBS targets at a time (default:
# the online CPUs; libFuzzer's one worker each keeps a core busy). New inputs
# go to a scratch directory, never into the committed corpus; a crash fails
# the run and leaves its file.
set -eu
build=$1
secs=$2
jobs=${3:-$(nproc)}
src=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# One target: its result in $scratch/NAME.rc, its output in BUILD/NAME.log.
fuzz_one() {
	bin=$1
	name=$(basename "$bin")
	mkdir -p "$scratch/$name"
	echo "fuzzing $name for ${secs}s"
	rc=0
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix="$build/$name-" "$scratch/$name" \
	    "$src/tests/fuzz/corpus/$name" >"$build/$name.log" 2>&1 || rc=$?
	echo "$rc" >"$scratch/$name.rc"
}

running=0
for bin in "$build"/tests/fuzz_*; do
	case "$bin" in *_replay) continue ;; esac
	[ -x "$bin" ] || continue
	fuzz_one "$bin" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait
		running=0
	fi
done
wait

fail=0
ran=0
for rcf in "$scratch"/*.rc; do
	[ -e "$rcf" ] || continue
	name=$(basename "$rcf" .rc)
	ran=$((ran + 1))
	if [ "$(cat "$rcf")" != 0 ]; then
		echo "FAILED: $name (see $build/$name.log)"
		tail -30 "$build/$name.log"
		fail=$((fail + 1))
	fi
done
echo "fuzz: $((ran - fail)) passed, $fail failed"
[ "$ran" -gt 0 ] && [ "$fail" -eq 0 ]
