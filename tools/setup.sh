#!/usr/bin/env bash
# Installs what tpc needs, and nothing when it is all there (idempotent: a second run takes well
# under a second). Debian 12 / Ubuntu with apt; run as root or with sudo available.
#   bash tools/setup.sh        everything `make test` uses: the build, the test tools, clang and
#                              libFuzzer, CUTLASS's headers where nvcc is, the PyTorch environment
#   bash tools/setup.sh demo   only what the CPU backend's build needs (`make demo`): no CUDA, no
#                              Python environment
#   bash tools/setup.sh cuda   the build's packages and CUTLASS's headers (`make cuda`)
set -euo pipefail
mode=${1:-test}
case "$mode" in
  demo|cuda|test) ;;
  *) echo "setup: error: unknown mode '$mode' (demo, cuda or test)" >&2; exit 2 ;;
esac

LLVM=/usr/lib/llvm-22
need=()
have() { command -v "$1" >/dev/null 2>&1; }
# The build (every mode).
have cmake || need+=(cmake)
have ninja || need+=(ninja-build)
have cc || need+=(gcc)
have make || need+=(make)
[ -f "$LLVM/include/mlir-c/IR.h" ] && [ -f "$LLVM/lib/libMLIRCAPIIR.a" ] || need+=(libmlir-22-dev)
[ -f "$LLVM/lib/libLLVM.so" ] || need+=(llvm-22-dev)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
if [ "$mode" != demo ]; then
  have python3 || need+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)  # the CUTLASS wheel, the PyTorch environment
fi
if [ "$mode" = test ]; then
  [ -x "$LLVM/bin/mlir-opt" ] || need+=(mlir-22-tools)
  /usr/bin/python3 -c "import numpy" 2>/dev/null || need+=(python3-numpy)
  have mpirun || need+=(openmpi-bin)  # ranks as processes (test/e2e/processes-mpirun.test)
  have pkg-config || need+=(pkg-config)  # building against the installed libtprt (test/e2e/install.test)
  [ -x "$LLVM/bin/FileCheck" ] && [ -x "$LLVM/bin/lit" ] && [ -x "$LLVM/bin/not" ] || need+=(llvm-22-tools)
  # clang and its libFuzzer and sanitizer runtimes build the fuzz harnesses (make fuzz-ci, build-fuzz).
  have clang-22 || need+=(clang-22)
  compgen -G "$LLVM/lib/clang/*/lib/*/libclang_rt.fuzzer*.a" >/dev/null || need+=(libclang-rt-22-dev)

  python3 -c "import ensurepip, venv" 2>/dev/null || need+=(python3-venv)  # third_party/pyenv below
fi

# CUTLASS/CuTe headers for the tensor-core kernels (fast-mode grouped GEMM), only where nvcc is:
# the nvidia-cutlass wheel from PyPI ships them; unpacked once into third_party/cutlass/include.
fetch_cutlass() {
  local root version=4.2.0.0 dest tmp
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  dest="$root/third_party/cutlass"
  [ -f "$dest/include/cutlass/cutlass.h" ] && [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$version" ] && return 0
  have nvcc || [ -x /usr/local/cuda/bin/nvcc ] || return 0
  echo "setup: fetching CUTLASS $version headers (nvidia-cutlass wheel) into third_party/cutlass"
  tmp=$(mktemp -d)
  if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cutlass==$version" >&2; then
    echo "setup: error: could not download nvidia-cutlass==$version from PyPI (the CUDA tensor-core kernels need it)" >&2
    rm -rf "$tmp"; exit 1
  fi
  python3 - "$tmp"/nvidia_cutlass-*.whl "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(("cutlass_library/source/include/",
                                                                        "cutlass_library/source/tools/util/include/"))])
PY
  rm -rf "$dest" && mkdir -p "$dest"
  mv "$tmp/x/cutlass_library/source/include" "$dest/include"
  cp -r "$tmp/x/cutlass_library/source/tools/util/include/cutlass/util" "$dest/include/cutlass/"  # packed_stride.hpp
  echo "$version" > "$dest/VERSION"
  rm -rf "$tmp"
}

# The PyTorch frontend's Python (frontend/tpc_torch, test/frontend, docs/frontend.md): a venv with
# these pinned packages (about 5 GB), made once per machine in the user's cache
# ($TPC_CACHE_DIR, default ~/.cache/tpc) and linked as third_party/pyenv, so that a fresh clone
# (CI's, a second checkout) reuses it; PINS records what was installed, so a second run does
# nothing. TPC_SETUP_PYENV=0 skips it (the frontend tests are then unsupported).
PYENV_PINS="torch==2.11.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6"
PYENV_BUILD_PINS="setuptools==80.9.0 wheel==0.45.1"
make_pyenv() {
  local root link cache dest
  [ "${TPC_SETUP_PYENV:-1}" = 0 ] && return 0
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  link="$root/third_party/pyenv"
  # A venv made in place by an earlier version of this script stays where it is.
  if [ -d "$link" ] && [ ! -L "$link" ]; then
    [ -x "$link/bin/python" ] && [ -f "$link/PINS" ] && [ "$(cat "$link/PINS")" = "$PYENV_PINS" ] && return 0
    rm -rf "$link"
  fi
  cache="${TPC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tpc}"
  dest="$cache/pyenv-$(echo "$PYENV_PINS" | cksum | cut -d' ' -f1)"
  mkdir -p "$cache" "$root/third_party"
  # One installer at a time per cache (two clones set up at once wait for each other).
  exec 9>"$cache/pyenv.lock"
  flock 9
  if ! { [ -x "$dest/bin/python" ] && [ -f "$dest/PINS" ] && [ "$(cat "$dest/PINS")" = "$PYENV_PINS" ]; }; then
    echo "setup: installing $PYENV_PINS into $dest (linked as third_party/pyenv)"
    [ -x "$dest/bin/python" ] || python3 -m venv "$dest"
    # shellcheck disable=SC2086  # the pins are separate words
    if ! "$dest/bin/python" -m pip install -q $PYENV_PINS >&2; then
      echo "setup: error: pip could not install $PYENV_PINS into $dest" >&2
      exit 1
    fi
    echo "$PYENV_PINS" > "$dest/PINS"
  fi
  # The build backend's wheels, kept beside the venv (about 1.3 MB), so that `pip install ./frontend`
  # into a fresh venv (test/frontend/pip-install.test) builds offline: --no-index --find-links.
  if [ "$(cat "$dest/wheels/PINS" 2> /dev/null)" != "$PYENV_BUILD_PINS" ]; then
    rm -rf "$dest/wheels"
    # shellcheck disable=SC2086  # the pins are separate words
    if ! "$dest/bin/python" -m pip download -q --only-binary=:all: --no-deps $PYENV_BUILD_PINS -d "$dest/wheels" >&2; then
      echo "setup: error: pip could not download $PYENV_BUILD_PINS into $dest/wheels" >&2
      exit 1
    fi
    echo "$PYENV_BUILD_PINS" > "$dest/wheels/PINS"
  fi
  flock -u 9
  ln -sfn "$dest" "$link"
}

# What each mode fetches besides packages.
fetch_rest() {
  case "$mode" in
    cuda) fetch_cutlass ;;
    test) fetch_cutlass; make_pyenv ;;
  esac
}

if [ ${#need[@]} -eq 0 ]; then
  fetch_rest
  exit 0
fi

echo "setup: installing ${need[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  have sudo || { echo "setup: error: need root or sudo to install: ${need[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if ! $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"; then
  echo "setup: error: apt-get could not install: ${need[*]}" >&2
  echo "setup: MLIR/LLVM 22 packages come from Debian 12 (bookworm-security) or apt.llvm.org." >&2
  exit 1
fi
fetch_rest
echo "setup: done"
