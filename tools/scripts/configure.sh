#!/usr/bin/env bash
# Configures a build directory once, and again only when it must: the Makefile's targets call it
# before each build. Usage: configure.sh BUILD [cmake -D options...]
#   - no BUILD/build.ninja yet: cmake -S . -B BUILD -G Ninja with the options;
#   - the CUDA kernels were left out only because CUTLASS's headers were missing (`make demo`
#     configures before they are fetched) and they are there now: cmake runs again;
#   - an option given here differs from the cache's value (`make cuda` asks for -DTPC_CUDA=ON):
#     cmake runs again with the options.
# Otherwise it does nothing, and the build re-runs cmake itself when a CMakeLists.txt changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: configure.sh BUILD [cmake -D options...]}
shift
if [ ! -f "$BUILD/build.ninja" ]; then
  exec cmake -S . -B "$BUILD" -G Ninja "$@"
fi
cache="$BUILD/CMakeCache.txt"
cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
for opt in "$@"; do
  case "$opt" in
    -D*=*)
      name=${opt#-D}; name=${name%%=*}; name=${name%%:*}; value=${opt#*=}
      if [ "$(cached "$name")" != "$value" ]; then exec cmake -S . -B "$BUILD" "$@"; fi ;;
  esac
done
cutlass=$(cached TPC_CUTLASS_DIR)
if [ "$(cached TPC_CUDA_PENDING)" = ON ] && [ -f "${cutlass:-third_party/cutlass/include}/cutlass/cutlass.h" ]; then
  exec cmake -S . -B "$BUILD"
fi
