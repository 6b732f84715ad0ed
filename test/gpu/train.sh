#!/usr/bin/env bash
# The GPU machine's whole-model training check (staged by test/gpu/prepare_train.sh): tpc-train on
# the CUDA backend, ranks sharing this machine's GPUs. In invariant numerics every mesh (TP 1/2,
# SP, DP 2, TP2 x DP2 with ZeRO-1, GTP 2, DP 2 x GTP 2 with ZeRO-1, 2 micro-batches, DP 2 x 2 and
# GTP 2 x 2 micro-batches) must give the same checkpoint bytes after 6 AdamW steps; in exact
# numerics they must be the CPU backend's bytes.
# Usage: bash test/gpu/train.sh   Environment: TPC_GPU_TRAIN (default build-gpu-train), OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${TPC_GPU_TRAIN:-$ROOT/build-gpu-train}"
if [[ ! -d "$DIR" && -f "$ROOT/build-gpu-train.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-gpu-train.tar.xz"; fi
LOG="${OUT:-/tmp}/train-gpu"
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$DIR/lib:${LD_LIBRARY_PATH:-}"
D="$DIR/data"
fail=0
run() {  # name, extra flags...
  local name=$1; shift
  local t0=$SECONDS
  if ! timeout 600 "$DIR/bin/tpc-train" "$DIR/modules/$name.so" --backend cuda --share-gpus --data "$D/tokens.bin" \
      --batch 8 --steps 6 --lr 3e-3 --weights "$D/w/weights.safetensors" --inputs "$D/w/inputs.safetensors" \
      --json "$LOG/$name.jsonl" --save "$LOG/ck-$name" "$@" > "$LOG/$name.log" 2>&1; then
    echo "FAIL $name: $(tail -n 1 "$LOG/$name.log")"; fail=1; return
  fi
  sha256sum < "$LOG/ck-$name/step-00000006/model.safetensors" | cut -d' ' -f1 > "$LOG/$name.sha256"
  echo "ran $name in $((SECONDS - t0)) s: $(tail -n 1 "$LOG/$name.jsonl" | cut -c1-90)"
}
for name in inv-tp1 inv-tp2 inv-tp2-sp inv-dp2 inv-tp2dp2-zero1 inv-gtp2 inv-dp2gtp2-zero1 exact-tp1 exact-tp2 fast-tp1; do
  run "$name"
done
run inv-mb2 --micro-batches 2
run inv-dp2-mb2 --micro-batches 2
run inv-gtp2-mb2 --micro-batches 2
same() {  # what, reference, others...
  local what=$1 ref=$2; shift 2
  for n in "$@"; do
    if [[ -f "$LOG/$n.sha256" && "$(cat "$LOG/$n.sha256")" == "$(cat "$ref")" ]]; then echo "PASS $what: $n"
    else echo "FAIL $what: $n"; fail=1; fi
  done
}
same "invariant, bitwise inv-tp1" "$LOG/inv-tp1.sha256" inv-tp2 inv-tp2-sp inv-dp2 inv-tp2dp2-zero1 inv-gtp2 inv-dp2gtp2-zero1 inv-mb2 inv-dp2-mb2 \
  inv-gtp2-mb2
same "exact, bitwise the CPU backend" "$DIR/expected/exact-tp1.sha256" exact-tp1 exact-tp2
exit $fail
