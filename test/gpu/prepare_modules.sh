#!/usr/bin/env bash
# Runs HERE (the MLIR machine) before a GPU run: compiles the example modules ahead of time for
# world sizes 1, 2 and 4 in exact numerics (the GPU machine has no MLIR), records the CPU
# backend's hashes of each, and stages everything test/gpu/run.sh needs to run them with
# `tpc-run --backend cuda` into build-gpu-carry/ (carry that path to the GPU machine):
#   bin/tpc-run, lib/libtprt.so, lib/libtprt_backend_cuda.so, lib/libcjson.so.1,
#   modules/<name>.so, modules/<name>.expected (the CPU hashes), modules/list.txt.
# Usage: bash test/gpu/prepare_modules.sh [build-dir]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="$ROOT/build-gpu-carry"
cd "$ROOT"
ninja -C "$BUILD" tpc-run tpc-compile tprt_backend_cuda tprt-bench-collectives tprt-cuda-check tprt-cuda-check-fast \
  tprt-bench-gemm tprt-bench-linear > /dev/null
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/modules"
# The kernel checkers and benchmarks are built here for sm_90a (CUTLASS's templates compile in
# minutes; the GPU machine then spends its time running, not compiling).
cp "$BUILD/bin/tpc-run" "$BUILD/bin/tprt-bench-collectives" "$BUILD/bin/tprt-cuda-check" \
  "$BUILD/bin/tprt-cuda-check-fast" "$BUILD/bin/tprt-bench-gemm" "$BUILD/bin/tprt-bench-linear" "$OUT/bin/"
cp "$BUILD/runtime/libtprt.so" "$BUILD/lib/libtprt_backend_cuda.so" "$OUT/lib/" 2>/dev/null ||
  cp "$(find "$BUILD" -name libtprt.so | head -n 1)" "$BUILD/lib/libtprt_backend_cuda.so" "$OUT/lib/"
cp "$(ldconfig -p | awk '/libcjson.so.1 /{print $NF; exit}')" "$OUT/lib/"

# name | module | compile flags (after the pipeline's)
CONFIGS=(
  "mlp-tp1|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=1"
  "mlp-tp2|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=2"
  "mlp-tp4|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=4"
  "mlp-sp-tp2|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=2 --sequence-parallel"
  "mlp-sp-tp4|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=4 --sequence-parallel"
  "mlp-train-tp1|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=1"
  "mlp-train-tp2|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=2"
  "mlp-train-tp4|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=4"
  "mlp-train-sp-tp4|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=4 --sequence-parallel"
  "wide-tp1|test/e2e/Inputs/mlp_f32_wide.mlir|--pipeline=infer --mesh=tp=1"
  "wide-tp4|test/e2e/Inputs/mlp_f32_wide.mlir|--pipeline=infer --mesh=tp=4"
  "moe-tp1|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=1"
  "moe-tp2|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=2"
  "moe-tp4|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=4"
  "moe-ep2|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=2"
  "moe-ep4|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=4"
  "moe-ep2-tp2|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=2,tp=2"
  "moe-train-tp2|docs/examples/moe.mlir|--pipeline=train --mesh=tp=2"
  # Hand-written per-rank modules, lowered as written (lower-cpu, as test/e2e/collectives.test
  # does; their meshes fix the world): the fused collective + add + RMSNorm ops at world sizes 4
  # and 2, async starts overlapping compute with reduce-scatter along dim 1, all_gather_start.
  "fused-norm-tp4|test/e2e/Inputs/fused_norm.mlir|--pipeline=lower-cpu"
  "fused-norm-tp2|test/e2e/Inputs/fused_norm_tp2.mlir|--pipeline=lower-cpu"
  "async-rs-dim1-tp4|test/e2e/Inputs/async_collectives.mlir|--pipeline=lower-cpu"
  "collectives-tp4|test/e2e/Inputs/collectives.mlir|--pipeline=lower-cpu"
  # World size 8 (issue #7; skipped on machines with fewer GPUs).
  "mlp-tp8|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=8"
  "mlp-train-sp-tp8|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=8 --sequence-parallel"
  "moe-tp8|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=8"
  "moe-ep8|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=8"
)
: > "$OUT/modules/list.txt"
for c in "${CONFIGS[@]}"; do
  IFS='|' read -r name src flags <<< "$c"
  # shellcheck disable=SC2086
  "$BUILD/bin/tpc-compile" "$src" -o "$OUT/modules/$name.so" --numerics=exact $flags
  "$BUILD/bin/tpc-run" "$OUT/modules/$name.so" --seed 7 --hash 2> /dev/null > "$OUT/modules/$name.expected"
  echo "$name" >> "$OUT/modules/list.txt"
done
# Step-time benchmark modules (TPC_GPU_BENCH=1 test/gpu/run.sh): a Llama-3-8B-like MLP block at
# TP 1, 2, 4 in fast (cuBLASLt + NCCL) and exact (exact kernels + canonical collectives) numerics.
mkdir -p "$OUT/bench"
: > "$OUT/bench/list.txt"
for tp in 1 2 4; do
  for mode in fast exact; do
    "$BUILD/bin/tpc-compile" tools/bench/llama8b_mlp.mlir -o "$OUT/bench/mlp8b-tp$tp-$mode.so" --pipeline=infer \
      --mesh=tp=$tp --numerics=$mode
    echo "mlp8b-tp$tp-$mode $tp $mode" >> "$OUT/bench/list.txt"
  done
done
# Training steps (forward + backward) of the same block at TP 1 in each numerics.
for mode in fast invariant exact; do
  "$BUILD/bin/tpc-compile" tools/bench/llama8b_mlp.mlir -o "$OUT/bench/mlp8b-train-tp1-$mode.so" --pipeline=train \
    --mesh=tp=1 --numerics=$mode
  echo "mlp8b-train-tp1-$mode 1 $mode train" >> "$OUT/bench/list.txt"
done
# Communication/compute overlap (4 ranks): the same gather + linear, sync vs async (comm stream).
for v in sync async; do
  "$BUILD/bin/tpc-compile" tools/bench/overlap_$v.mlir -o "$OUT/bench/overlap-$v.so" --numerics=fast
done
cp test/gpu/bench_mlp_peer.py "$OUT/bench/"
echo "staged $(wc -l < "$OUT/modules/list.txt") modules and the runtime in $OUT ($(du -sh "$OUT" | cut -f1))"
