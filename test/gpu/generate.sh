#!/usr/bin/env bash
# The GPU machine's generation check (staged by test/gpu/prepare_generate.sh): tpc-generate on the
# CUDA backend in invariant numerics, ranks sharing the GPU. 5 requests (prompts of 5, 3, 7, 2 and
# 6 tokens, 6 new tokens each, top-k 50, top-p 0.9) must draw the same tokens with the same
# log-probability bits with 3 slots at TP 1, with 3 slots at TP 2 and the prompt lines in another
# order, with 1 slot, and with the decode step replayed as a CUDA graph (--graph); every
# log-probability must be the scoring forward's (the training
# function on the GPU, TP 1 and TP 2) bit for bit; fast numerics at TP 2 must differ.
# Usage: bash test/gpu/generate.sh   Environment: TPC_GPU_GENERATE (default build-gpu-generate), OUT,
# PYTHON (one with numpy; default python3).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${TPC_GPU_GENERATE:-$ROOT/build-gpu-generate}"
if [[ ! -d "$DIR" && -f "$ROOT/build-gpu-generate.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-gpu-generate.tar.xz"; fi
LOG="${OUT:-/tmp}/generate-gpu"
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$DIR/lib:${LD_LIBRARY_PATH:-}" TPRT_BACKEND_CUDA="$DIR/lib/libtprt_backend_cuda.so"
export TPC_RUN="$DIR/bin/tpc-run"
D="$DIR/data"
CHECK=("${PYTHON:-python3}" "$ROOT/test/e2e/generate_check.py")
fail=0
gen() {  # name module prompts [flags]
  local t0=$SECONDS
  if ! timeout 600 "$DIR/bin/tpc-generate" "$DIR/modules/$2.so" --backend cuda --share-gpus ${4:-} --prompts "$D/$3.jsonl" \
      --weights "$D/w/weights.safetensors" --inputs "$D/w/inputs.safetensors" --seed 5 --temperature 0.8 --top-k 50 \
      --top-p 0.9 -o "$LOG/$1.jsonl" --json "$LOG/$1.steps.jsonl" 2> "$LOG/$1.log"; then
    echo "FAIL $1: $(tail -n 2 "$LOG/$1.log")"; fail=1; return
  fi
  "${CHECK[@]}" import "$D/$3.jsonl" "$LOG/$1.jsonl" "$LOG/$1.json"
  echo "ran $1 in $((SECONDS - t0)) s: $(tail -n 1 "$LOG/$1.log")"
}
gen inv-tp1 gen-inv-tp1 p
gen inv-tp2 gen-inv-tp2 p-rev
gen inv-1slot gen1-inv-tp1 p
gen fast-tp2 gen-fast-tp2 p
gen inv-tp1-graph gen-inv-tp1 p --graph
for n in inv-tp2 inv-1slot inv-tp1-graph; do
  if "${CHECK[@]}" same "$LOG/inv-tp1.json" "$LOG/$n.json" > "$LOG/same-$n.txt"; then echo "PASS same tokens and log-probabilities: $n"
  else echo "FAIL same tokens and log-probabilities: $n: $(head -n 1 "$LOG/same-$n.txt")"; fail=1; fi
done
"${CHECK[@]}" same "$LOG/inv-tp1.json" "$LOG/fast-tp2.json" > "$LOG/same-fast.txt" 2>&1
if grep -q "^FAIL" "$LOG/same-fast.txt"; then echo "PASS fast numerics at TP 2 differs: $(head -n 1 "$LOG/same-fast.txt")"
else echo "FAIL fast numerics: $(head -n 1 "$LOG/same-fast.txt")"; fail=1; fi
for m in whole-inv-tp1 whole-inv-tp2; do
  if "${CHECK[@]}" score "$DIR/modules/$m.so" "$D/w" "$D/w" "$LOG/inv-tp1.json" --tokens 16 --backend cuda > "$LOG/score-$m.txt"; then
    echo "PASS scoring forward $m: every log-probability bitwise"
  else echo "FAIL scoring forward $m: $(grep -v ' 0 log' "$LOG/score-$m.txt" | head -n 2)"; fail=1; fi
done
exit $fail
