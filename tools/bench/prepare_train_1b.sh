#!/usr/bin/env bash
# Runs HERE (the MLIR machine) before tools/bench/train_1b.sh: exports the 1B Llama
# (tools/bench/llama1b_config.json, its real vocabulary of 128,256) as a whole-model training step of
# B sequences of S tokens, compiles it ahead of time in fast and invariant numerics (the GPU machine
# has no MLIR), tokenizes the Debian license texts, and packs everything into
# build-bench-1b.tar.xz (carry it with build-gpu-train.tar.xz of test/gpu/prepare_train.sh, whose
# lib/ holds the runtime and the CUDA plugin): bin/tpc-train, modules/<numerics>.so, data/ (tokens,
# rotary tables), the config and the peer.
# Usage: bash tools/bench/prepare_train_1b.sh [cpu-build-dir] [B] [S]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
B="${2:-4}" S="${3:-2048}"
OUT="$ROOT/build-bench-1b"
PY="$ROOT/third_party/pyenv/bin/python"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/modules" "$OUT/data"
cp "$BUILD/bin/tpc-train" "$OUT/bin/"
cp tools/bench/llama1b_config.json tools/bench/train_peer.py "$OUT/"
# The model (its weights come from the peer's --write-init on the GPU machine: 2.5 GB).
PYTHONPATH="$ROOT/frontend" "$PY" -m tpc_torch.export tools/bench/llama1b_config.json --whole --dtype bf16 \
  --batch "$B" --seq-len "$S" -o "$WORK/llama1b.mlir" --weights "$WORK/w" > /dev/null
cp "$WORK/w/inputs.safetensors" "$OUT/data/"
# Invariant numerics runs a contraction on the chunk-tree tensor-core GEMMs when its chunks are whole
# 64-element tiles: the LM head's dgrad sums over the vocabulary, 128256 = 4 x 32064 = 4 x 501 x 64,
# so the module takes tp.chunks = 4 (8 chunks of 16032 would run the head's dgrad on CUDA cores).
sed 's/^module {/module attributes {tp.chunks = 4 : i64} {/' "$WORK/llama1b.mlir" > "$WORK/llama1b-c4.mlir"
"$BUILD/bin/tpc-compile" "$WORK/llama1b.mlir" -o "$OUT/modules/fast.so" --pipeline=step --numerics=fast --mesh=tp=1
"$BUILD/bin/tpc-compile" "$WORK/llama1b-c4.mlir" -o "$OUT/modules/invariant.so" --pipeline=step --numerics=invariant --mesh=tp=1
python3 tools/tokenize.py --vocab 512 --out "$WORK/lic" > /dev/null
cp "$WORK/lic.train.bin" "$OUT/data/tokens.bin"
echo "$B $S" > "$OUT/shape.txt"
tar -C "$ROOT" -cJf "$ROOT/build-bench-1b.tar.xz" build-bench-1b
du -sh "$OUT" "$ROOT/build-bench-1b.tar.xz"
