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
echo "-- the same logical module partitioned by tp-shard over 4 tensor-parallel ranks (FC1 column-,"
echo "   FC2 row-parallel with an all-reduce), one checkpoint for every mesh; traffic per rank (--stats):"
"$BUILD/bin/tpc-run" "$EX" --mesh tp=4 --seed 7 --hash --stats 2>/dev/null
echo
echo "-- a training step (tp-autodiff, then tp-shard) on tp=2 x dp=2: outputs and gradients"
"$BUILD/bin/tpc-run" "$EX" --pipeline train --mesh tp=2,dp=2 --seed 7 --hash 2>/dev/null
echo
WIDE=test/e2e/Inputs/mlp_f32_wide.mlir
echo "-- TP invariance ($WIDE, the block in f32 with FFN 2048): y at TP = 1, 2, 4, 8"
echo "   fast numerics (each degree associates FC2's f32 sum differently):"
for n in 1 2 4 8; do "$BUILD/bin/tpc-run" "$WIDE" --mesh tp=$n --seed 7 --hash 2>/dev/null | sed "s/^/   tp=$n  /"; done
echo "   --numerics invariant (tp-invariant: each rank sums a subtree of TP = 1's chunk tree, the"
echo "   all-reduce adds the f32 partials in the tree's order):"
for n in 1 2 4 8; do
  "$BUILD/bin/tpc-run" "$WIDE" --numerics invariant --mesh tp=$n --seed 7 --hash 2>/dev/null | sed "s/^/   tp=$n  /"
done
echo "   a training step with sequence parallelism at tp=8 (same output and gradients as tp=1):"
"$BUILD/bin/tpc-run" "$EX" --pipeline train --numerics invariant --sequence-parallel --mesh tp=8 --seed 7 --hash \
  2>/dev/null | sed "s/^/   /"
echo
echo "Walk-through: docs/tutorial.md. What is next (the CUDA backend, GTP, fusions): README.md."
