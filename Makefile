# Front door for a fresh Debian 12 machine:
#   make run   install what building and running need, build the binary alone,
#              run the gateway on built-in defaults
#   make test  install that and the tests' packages, build everything, run the
#              whole CTest suite, then again
#              under ASan + UBSan, then replay and briefly fuzz every parser
#   make fuzz-long  fuzz the whole-worker target (fuzz_worker) for 10 minutes
#   make deb   the Debian package build-deb/sandgate_VERSION_ARCH.deb
#              (dpkg-buildpackage -us -uc -b; docs/packaging.md)
#   make bench  the benchmark against Squid, tinyproxy and mitmproxy (bench/run.sh,
#              about 10 minutes; BENCH_ARGS=--quick for about 2, --workers 2 ...)
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 6
FUZZ_LONG_SECONDS ?= 600

DEB_BUILD  ?= build-deb

.PHONY: all deps deps-run build build-run build-asan run test test-plain test-asan fuzz fuzz-build fuzz-long bench deb clean

all: build

deps:
	@./scripts/install-deps.sh test

deps-run:
	@./scripts/install-deps.sh run

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSANDGATE_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# The binary alone: no test, fuzz replay or benchmark is compiled.
build-run: deps-run
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS) --target sandgate

run: build-run
	$(BUILD)/sandgate serve

test: test-plain test-asan fuzz

# Six tests at a time on two cores: the end-to-end tests mostly wait (on
# sandboxes, timeouts, their servers); on 233 tests -j6 took the plain run
# from 450 s to 319 s and the ASan one from 573 s to 415 s here
# (docs/benchmarks.md, "CI time").
CTEST_JOBS ?= 6

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_JOBS)

test-asan: build-asan
	cd $(ASAN_BUILD) && SANDGATE_ASAN=1 ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(CTEST_JOBS)

fuzz-build: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSANDGATE_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: fuzz-build
	./scripts/fuzz-all.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# New inputs go to a scratch directory; a broken promise stops the run and
# leaves its input as $(FUZZ_BUILD)/fuzz_worker-crash-*. The final stats
# give the executions (stat::number_of_executed_units).
fuzz-long: fuzz-build
	@scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT && \
	$(FUZZ_BUILD)/tests/fuzz_worker -max_total_time=$(FUZZ_LONG_SECONDS) \
	    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/fuzz_worker- "$$scratch" \
	    tests/fuzz/corpus/fuzz_worker

BENCH_ARGS ?=
bench: build
	./bench/run.sh $(BENCH_ARGS) $(BUILD)

deb: deps
	./scripts/build-deb.sh $(DEB_BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(DEB_BUILD)
