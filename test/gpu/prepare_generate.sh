#!/usr/bin/env bash
# Runs HERE (the MLIR machine) before test/gpu/generate.sh: exports llama-tiny for generation (bf16,
# 3 slots, caches of 32 rows, prefill chunks of 4) and as a scoring function (one sequence of 16
# tokens), compiles them ahead of time (the GPU machine has no MLIR) and stages everything into
# build-gpu-generate/, packed as build-gpu-generate.tar.xz (carry that): bin/tpc-generate and
# bin/tpc-run, lib/ (the runtime and the CUDA plugin), modules/<name>.so, data/ (weights, tables,
# prompts).
# Usage: bash test/gpu/prepare_generate.sh [cpu-build-dir] [cuda-build-dir (for the plugin)]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
CUDA_BUILD="${2:-$BUILD}"
OUT="$ROOT/build-gpu-generate"
PY="$ROOT/third_party/pyenv/bin/python"
cd "$ROOT"
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/modules" "$OUT/data"
cp "$BUILD/bin/tpc-generate" "$BUILD/bin/tpc-run" "$OUT/bin/"
cp "$CUDA_BUILD/lib/libtprt.so" "$CUDA_BUILD/lib/libtprt_backend_cuda.so" "$OUT/lib/"
cp "$(ldconfig -p | awk '/libcjson.so.1 /{print $NF; exit}')" "$OUT/lib/"
export PYTHONPATH="$ROOT/frontend"
"$PY" -m tpc_torch.export llama-tiny --generate --kv-cache 32 --batch 3 --prefill-chunk 4 --dtype bf16 \
  -o "$OUT/data/gen.mlir" --weights "$OUT/data/w" > /dev/null
"$PY" -m tpc_torch.export llama-tiny --generate --kv-cache 32 --batch 1 --prefill-chunk 3 --dtype bf16 \
  -o "$OUT/data/gen1.mlir" > /dev/null
"$PY" -m tpc_torch.export llama-tiny --whole --batch 1 --seq-len 16 --dtype bf16 -o "$OUT/data/whole.mlir" > /dev/null
# name | module | compile flags
CONFIGS=(
  "gen-inv-tp1|gen|--numerics=invariant --mesh=tp=1"
  "gen-inv-tp2|gen|--numerics=invariant --mesh=tp=2"
  "gen1-inv-tp1|gen1|--numerics=invariant --mesh=tp=1"
  "gen-fast-tp2|gen|--numerics=fast --mesh=tp=2"
  "whole-inv-tp1|whole|--numerics=invariant --mesh=tp=1"
  "whole-inv-tp2|whole|--numerics=invariant --mesh=tp=2"
)
for c in "${CONFIGS[@]}"; do
  IFS='|' read -r name module flags <<< "$c"
  # shellcheck disable=SC2086
  "$BUILD/bin/tpc-compile" "$OUT/data/$module.mlir" -o "$OUT/modules/$name.so" --pipeline=infer $flags
done
/usr/bin/python3 test/e2e/generate_check.py prompts "$OUT/data/p.jsonl" --prompts 5,3,7,2,6 --new 6
/usr/bin/python3 test/e2e/generate_check.py prompts "$OUT/data/p-rev.jsonl" --prompts 5,3,7,2,6 --new 6 --order 4,2,0,3,1
tar -C "$ROOT" -cJf "$ROOT/build-gpu-generate.tar.xz" build-gpu-generate
du -sh "$OUT" "$ROOT/build-gpu-generate.tar.xz"
