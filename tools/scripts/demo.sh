#!/usr/bin/env bash
# The demo: compile docs/examples/mlp.mlir ahead of time and run it on the CPU backend.
# Usage: demo.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
EX=docs/examples/mlp.mlir
SO=$(mktemp -d)/mlp.so
trap 'rm -rf "$(dirname "$SO")"' EXIT
echo "== tpc demo: $EX =="
echo "-- the logical MLP block (rmsnorm -> column-parallel FC1 -> swiglu -> row-parallel FC2 -> residual add):"
sed -n '/func.func/,$p' "$EX"
echo
echo "-- tpc-compile: verify, plan the arena, lower to runtime calls, LLVM -> $SO"
"$BUILD/bin/tpc-compile" "$EX" -o "$SO"
echo "-- tpc-run: 1 rank on the CPU backend, seeded Philox weights, output hashes (FNV-1a-64):"
"$BUILD/bin/tpc-run" "$SO" --world 1 --seed 7 --hash --repeat 20
echo
echo "The module is logical (no sharding yet): tp-shard, which partitions it over a mesh, is the"
echo "next piece of work; see the table in README.md."
