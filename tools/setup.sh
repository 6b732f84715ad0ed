#!/usr/bin/env bash
# Installs what tpc needs to build and test, and nothing when it is all there (idempotent).
# Debian 12 / Ubuntu with apt; run as root or with sudo available.
set -euo pipefail

LLVM=/usr/lib/llvm-22
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have cmake || need+=(cmake)
have ninja || need+=(ninja-build)
have cc || need+=(gcc)
have make || need+=(make)
have python3 || need+=(python3)
[ -f "$LLVM/include/mlir-c/IR.h" ] && [ -f "$LLVM/lib/libMLIRCAPIIR.a" ] || need+=(libmlir-22-dev)
[ -x "$LLVM/bin/mlir-opt" ] || need+=(mlir-22-tools)
[ -f "$LLVM/lib/libLLVM.so" ] || need+=(llvm-22-dev)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
/usr/bin/python3 -c "import numpy" 2>/dev/null || need+=(python3-numpy)
have mpirun || need+=(openmpi-bin)  # ranks as processes (test/e2e/processes-mpirun.test)
[ -x "$LLVM/bin/FileCheck" ] && [ -x "$LLVM/bin/lit" ] && [ -x "$LLVM/bin/not" ] || need+=(llvm-22-tools)

if [ ${#need[@]} -eq 0 ]; then
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
echo "setup: done"
