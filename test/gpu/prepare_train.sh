#!/usr/bin/env bash
# Runs HERE (the MLIR machine) before test/gpu/train.sh: compiles the whole-model training steps of
# the exported llama-tiny ahead of time (the GPU machine has no MLIR) for the meshes train.sh runs,
# runs the exact-numerics ones on the CPU backend to record their checkpoints' hashes, and stages
# everything into build-gpu-train/, packed as build-gpu-train.tar.xz (carry that): bin/tpc-train, lib/ (the runtime and the
# CUDA plugin), modules/<name>.so, data/ (tokens, weights, rotary tables), expected/<name>.sha256.
# Usage: bash test/gpu/prepare_train.sh [cpu-build-dir] [cuda-build-dir (for the plugin)]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
CUDA_BUILD="${2:-$BUILD}"
OUT="$ROOT/build-gpu-train"
PY="$ROOT/third_party/pyenv/bin/python"
cd "$ROOT"
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/modules" "$OUT/data" "$OUT/expected"
cp "$BUILD/bin/tpc-train" "$OUT/bin/"
cp "$CUDA_BUILD/lib/libtprt.so" "$CUDA_BUILD/lib/libtprt_backend_cuda.so" "$OUT/lib/"
cp "$(ldconfig -p | awk '/libcjson.so.1 /{print $NF; exit}')" "$OUT/lib/"
# The model (f32, 8 sequences of 16 tokens per step) and its data.
PYTHONPATH="$ROOT/frontend" "$PY" -m tpc_torch.export llama-tiny --whole --dtype f32 --batch 8 --seq-len 16 \
  -o "$OUT/data/llama.mlir" --weights "$OUT/data/w" > /dev/null
/usr/bin/python3 test/e2e/lm_check.py --write-tokens "$OUT/data/tokens.bin" --tokens 6000 --vocab 256
# name | compile flags
CONFIGS=(
  "inv-tp1|--numerics=invariant --mesh=tp=1"
  "inv-tp2|--numerics=invariant --mesh=tp=2"
  "inv-tp2-sp|--numerics=invariant --mesh=tp=2 --sequence-parallel"
  "inv-dp2|--numerics=invariant --mesh=dp=2"
  "inv-tp2dp2-zero1|--numerics=invariant --mesh=tp=2,dp=2 --zero1"
  "inv-gtp2|--numerics=invariant --mesh=gtp=2"
  "inv-mb2|--numerics=invariant --mesh=mb=2"
  "inv-dp2-mb2|--numerics=invariant --mesh=dp=2,mb=2"
  "inv-gtp2-mb2|--numerics=invariant --mesh=gtp=2,mb=2"
  "inv-dp2gtp2-zero1|--numerics=invariant --mesh=dp=2,gtp=2 --zero1"
  "exact-tp1|--numerics=exact --mesh=tp=1"
  "exact-tp2|--numerics=exact --mesh=tp=2"
  "fast-tp1|--numerics=fast --mesh=tp=1"
)
for c in "${CONFIGS[@]}"; do
  name="${c%%|*}" flags="${c#*|}"
  # shellcheck disable=SC2086
  "$BUILD/bin/tpc-compile" "$OUT/data/llama.mlir" -o "$OUT/modules/$name.so" --pipeline=step $flags
  echo "$name" >> "$OUT/modules/list.txt"
done
# The CPU backend's checkpoints of the exact steps: the GPU's must be the same bytes.
for name in exact-tp1 exact-tp2; do
  "$BUILD/bin/tpc-train" "$OUT/modules/$name.so" --data "$OUT/data/tokens.bin" --batch 8 --steps 6 --lr 3e-3 \
    --weights "$OUT/data/w/weights.safetensors" --inputs "$OUT/data/w/inputs.safetensors" --save "/tmp/tpc-prep-$name" 2> /dev/null
  sha256sum < "/tmp/tpc-prep-$name/step-00000006/model.safetensors" | cut -d' ' -f1 > "$OUT/expected/$name.sha256"
  rm -rf "/tmp/tpc-prep-$name"
done
# The GPU checker too when this build has it (the kernels' bitwise checks without a rebuild there).
if [[ -x "$CUDA_BUILD/bin/tprt-cuda-check" ]]; then cp "$CUDA_BUILD/bin/tprt-cuda-check" "$OUT/bin/"; fi
# One archive (the CUDA plugin's fatbin compresses well): carry build-gpu-train.tar.xz, train.sh
# unpacks it.
tar -C "$ROOT" -cJf "$ROOT/build-gpu-train.tar.xz" build-gpu-train
du -sh "$OUT" "$ROOT/build-gpu-train.tar.xz"
