# Entry points for a fresh machine. Each target installs what is missing, then builds.
#   make demo   — build and run the demo on the CPU backend
#   make test   — build and run every test; ends with "N passed, N failed"
# Variables: BUILD (build directory), SANITIZE=1 (ASan+UBSan build in build-asan).
# SANITIZE=thread: ThreadSanitizer build in build-tsan (docs/testing.md, "Races and faults").
BUILD ?= build
ifeq ($(SANITIZE),1)
BUILD := build-asan
CMAKE_FLAGS += -DTPC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
endif
# SANITIZE=thread: ThreadSanitizer in build-tsan, optimized (TSan slows code 5-15x).
ifeq ($(SANITIZE),thread)
BUILD := build-tsan
CMAKE_FLAGS += -DTPC_SANITIZE_THREAD=ON -DTPC_CUDA=OFF
endif

.PHONY: all setup configure build demo test clean
all: build

setup:
	@bash tools/setup.sh

configure: setup
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: configure
	@cmake --build $(BUILD)

demo: build
	@bash tools/scripts/demo.sh $(BUILD)

test: build
	@bash tools/scripts/run_tests.sh $(BUILD)

# libFuzzer harnesses (test/fuzz/README.md), built by clang-22 with ASan + UBSan in build-fuzz:
#   make fuzz      every harness for FUZZ_SECONDS (default 3600, 0 = no limit) or FUZZ_RUNS
#                  executions, whichever ends first; FUZZ_TARGETS="parse manifest" picks harnesses
#   make fuzz-ci   every harness for 60 s; fails on any crash, leak, timeout or sanitizer report
FUZZ_SECONDS ?= 3600
.PHONY: fuzz fuzz-ci
fuzz: setup
	@bash test/fuzz/run.sh --seconds $(FUZZ_SECONDS) $(if $(FUZZ_RUNS),--runs $(FUZZ_RUNS)) $(FUZZ_TARGETS)

fuzz-ci: setup
	@bash test/fuzz/run.sh --seconds 60 $(FUZZ_TARGETS)

clean:
	rm -rf build build-asan build-tsan
