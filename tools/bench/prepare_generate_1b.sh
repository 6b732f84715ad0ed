#!/usr/bin/env bash
# Runs HERE (the MLIR machine) before tools/bench/generate_1b.sh: exports the 1B Llama
# (tools/bench/llama1b_config.json) for generation with B sequence slots for each batch size (KV
# caches of P + N rows, prefill chunks of P: one call per prompt), compiles the modules in fast and
# invariant numerics (the GPU machine has no MLIR), writes each batch's prompts (2B prompts of P
# random tokens, N new tokens, greedy: two waves through the B slots, the first a warm-up) and packs build-bench-gen1b.tar.xz with bin/tpc-generate,
# modules/, data/ (the rotary tables, the prompts) and the peer. The weights come from the peer on
# the GPU machine (--write-init).
# Usage: bash tools/bench/prepare_generate_1b.sh [cpu-build-dir] [P] [N] [batch...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
P="${2:-512}" N="${3:-256}"
shift 3 2> /dev/null || shift $#
BATCHES=("$@")
[[ ${#BATCHES[@]} -gt 0 ]] || BATCHES=(1 8 64)
OUT="$ROOT/build-bench-gen1b"
PY="$ROOT/third_party/pyenv/bin/python"
cd "$ROOT"
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/modules" "$OUT/data"
cp "$BUILD/bin/tpc-generate" "$OUT/bin/"
cp tools/bench/llama1b_config.json tools/bench/generate_peer.py tools/bench/train_peer.py "$OUT/"
export PYTHONPATH="$ROOT/frontend"
for B in "${BATCHES[@]}"; do
  W=""
  [[ "$B" == "${BATCHES[0]}" ]] && W="--weights $OUT/data/w"
  # shellcheck disable=SC2086
  "$PY" -m tpc_torch.export tools/bench/llama1b_config.json --generate --kv-cache $((P + N)) --batch "$B" \
    --prefill-chunk "$P" --dtype bf16 -o "$OUT/data/gen-b$B.mlir" $W > /dev/null
  for n in fast invariant; do
    "$BUILD/bin/tpc-compile" "$OUT/data/gen-b$B.mlir" -o "$OUT/modules/$n-b$B.so" --pipeline=infer --numerics=$n --mesh=tp=1
  done
  "$PY" -c "
import json, random
random.seed($B)
with open('$OUT/data/prompts-b$B.jsonl', 'w') as f:
    for i in range(2 * $B):  # two waves: the first warms up
        f.write(json.dumps({'id': i, 'tokens': [random.randrange(128256) for _ in range($P)], 'max_tokens': $N}) + '\n')"
done
rm -f "$OUT/data/w/weights.safetensors"  # the peer writes the weights on the GPU machine
echo "$P $N ${BATCHES[*]}" > "$OUT/shape.txt"
tar -C "$ROOT" -cJf "$ROOT/build-bench-gen1b.tar.xz" build-bench-gen1b
du -sh "$OUT" "$ROOT/build-bench-gen1b.tar.xz"
