# Entry points for a fresh machine. Each target installs what is missing, then builds.
#   make demo   — build the tools the demo needs (CPU backend only) and run it
#   make test   — build everything (the CUDA kernels too, where nvcc is) and run every test; ends
#                 with "N passed, N failed"
#   make cuda   — build the CUDA backend plugin, its checks and benchmarks (needs nvcc and NCCL)
# Variables:
#   BUILD=dir        build directory (default build)
#   TYPE=Release     CMake build type (Debug, Release, RelWithDebInfo (the default), MinSizeRel)
#   WERROR=1         warnings are errors (CI and developers' builds)
#   CUDA_ARCHS=...   CMAKE_CUDA_ARCHITECTURES (default 90a: H100/H200)
#   SANITIZE=1       ASan + UBSan, a Debug build in build-asan (the CUDA backend's host code only)
#   SANITIZE=thread  ThreadSanitizer in build-tsan (docs/testing.md, "Races and faults")
# These apply when a build directory is first configured (tools/scripts/configure.sh).
BUILD ?= build
ifeq ($(SANITIZE),1)
BUILD := build-asan
TYPE ?= Debug
# Device code cannot run under the sanitizers: the backend's host code is checked against the
# emulated CUDA runtime, and the kernels are compiled once, by the normal build.
CMAKE_FLAGS += -DTPC_SANITIZE=ON -DTPC_CUDA_KERNELS=OFF
endif
# SANITIZE=thread: optimized (TSan slows code 5-15x), the CPU backend only.
ifeq ($(SANITIZE),thread)
BUILD := build-tsan
CMAKE_FLAGS += -DTPC_SANITIZE_THREAD=ON -DTPC_CUDA=OFF
endif
ifneq ($(TYPE),)
CMAKE_FLAGS += -DCMAKE_BUILD_TYPE=$(TYPE)
endif
ifeq ($(WERROR),1)
CMAKE_FLAGS += -DTPC_WERROR=ON
endif
ifneq ($(CUDA_ARCHS),)
CMAKE_FLAGS += -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCHS)
endif
CONFIGURE = bash tools/scripts/configure.sh $(BUILD) $(CMAKE_FLAGS)

.PHONY: all build demo test cuda clean
all: build

build:
	@bash tools/setup.sh
	@$(CONFIGURE)
	@cmake --build $(BUILD)

# The demo runs on the CPU backend: no CUDA, no Python environment; the three tools (the tutorials
# use tpc-opt too).
demo:
	@bash tools/setup.sh demo
	@$(CONFIGURE)
	@cmake --build $(BUILD) --target tpc-opt tpc-compile tpc-run
	@bash tools/scripts/demo.sh $(BUILD)

test: build
	@bash tools/scripts/run_tests.sh $(BUILD)

cuda:
	@bash tools/setup.sh cuda
	@$(CONFIGURE) -DTPC_CUDA=ON
	@cmake --build $(BUILD) --target tpc-cuda

# libFuzzer harnesses (test/fuzz/README.md), built by clang-22 with ASan + UBSan in build-fuzz:
#   make fuzz      every harness for FUZZ_SECONDS (default 3600, 0 = no limit) or FUZZ_RUNS
#                  executions, whichever ends first; FUZZ_TARGETS="parse manifest" picks harnesses
#   make fuzz-ci   every harness for 60 s, two at a time; fails on any crash, leak, timeout or
#                  sanitizer report
FUZZ_SECONDS ?= 3600
.PHONY: fuzz fuzz-ci
fuzz:
	@bash tools/setup.sh
	@bash test/fuzz/run.sh --seconds $(FUZZ_SECONDS) $(if $(FUZZ_RUNS),--runs $(FUZZ_RUNS)) $(FUZZ_TARGETS)

fuzz-ci:
	@bash tools/setup.sh
	@bash test/fuzz/run.sh --seconds 60 --jobs 2 $(FUZZ_TARGETS)

clean:
	rm -rf build build-asan build-tsan build-fuzz
