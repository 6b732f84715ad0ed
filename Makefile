# Entry points for a fresh machine. Each target installs what is missing, then builds.
#   make demo   — build and run the demo on the CPU backend
#   make test   — build and run every test; ends with "N passed, N failed"
# Variables: BUILD (build directory), SANITIZE=1 (ASan+UBSan build in build-asan).
BUILD ?= build
ifeq ($(SANITIZE),1)
BUILD := build-asan
CMAKE_FLAGS += -DTPC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
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

clean:
	rm -rf build build-asan
