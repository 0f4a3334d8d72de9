# Front door for a fresh Debian 12 machine:
#   make run   install packages, build, run the gateway on built-in defaults
#   make test  install packages, build, run the whole CTest suite, then again
#              under ASan + UBSan, then replay and briefly fuzz every parser
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 10

.PHONY: all deps build build-asan run test test-plain test-asan fuzz bench clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSANDGATE_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)

run: build
	$(BUILD)/sandgate serve

test: test-plain test-asan fuzz

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j 2

test-asan: build-asan
	cd $(ASAN_BUILD) && SANDGATE_ASAN=1 ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j 2

fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSANDGATE_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	./scripts/fuzz-all.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	./bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
