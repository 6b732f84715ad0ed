#!/usr/bin/env bash
# The generation benchmark of the 1B Llama, on the GPU machine (staged by
# tools/bench/prepare_generate_1b.sh and test/gpu/prepare_train.sh, whose lib/ holds the runtime and
# the CUDA plugin): the PyTorch peer (plain PyTorch, static KV cache, torch.compile with CUDA graphs
# for the decode step; it writes the weights) and tpc-generate (--graph) in fast and invariant
# numerics, on the same weights, B prompts of P random tokens and N greedy new tokens for each batch
# size B. Prints prefill and decode tokens/s of each and the ratios; writes $OUT/gen-1b/*.
# Usage: bash tools/bench/generate_1b.sh     Environment: OUT, TPC_BENCH_GEN1B, TPC_GPU_TRAIN.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${TPC_BENCH_GEN1B:-$ROOT/build-bench-gen1b}"
if [[ ! -d "$DIR" && -f "$ROOT/build-bench-gen1b.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-bench-gen1b.tar.xz"; fi
GPU_TRAIN="${TPC_GPU_TRAIN:-$ROOT/build-gpu-train}"
if [[ ! -d "$GPU_TRAIN" && -f "$ROOT/build-gpu-train.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-gpu-train.tar.xz"; fi
export LD_LIBRARY_PATH="$GPU_TRAIN/lib:${LD_LIBRARY_PATH:-}" TPRT_BACKEND_CUDA="$GPU_TRAIN/lib/libtprt_backend_cuda.so"
LOG="${OUT:-/tmp}/gen-1b"
mkdir -p "$LOG"
read -r P N BATCHES < "$DIR/shape.txt"
INIT=/tmp/gen1b-init.safetensors
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$LOG/summary.txt"
# shellcheck disable=SC2086
(cd "$DIR" && timeout 600 python3 generate_peer.py llama1b_config.json --batch $BATCHES --prompt "$P" --new "$N" \
  --write-init "$INIT") 2>&1 | tee "$LOG/peer.log" | grep "^peer" | tee -a "$LOG/summary.txt"
for B in $BATCHES; do
  for n in fast invariant; do
    TPRT_CUDA_KERNELS=1 timeout 300 "$DIR/bin/tpc-generate" "$DIR/modules/$n-b$B.so" --backend cuda --graph \
      --prompts "$DIR/data/prompts-b$B.jsonl" --weights "$INIT" --inputs "$DIR/data/w/inputs.safetensors" \
      --temperature 0 -o "$LOG/$n-b$B.jsonl" --json "$LOG/$n-b$B.steps.jsonl" 2> "$LOG/$n-b$B.log" ||
      echo "FAIL tpc $n batch $B: $(tail -n 2 "$LOG/$n-b$B.log")"
    # The second wave's steps (the first warms up): the median prefill call (one prompt of P tokens)
    # and the median decode step with all B slots busy.
    python3 - "$LOG/$n-b$B.steps.jsonl" "$n" "$B" "$P" <<'PY' | tee -a "$LOG/summary.txt"
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
n, b, p = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pre = [s["ms"] for s in steps if s["kind"] == "prefill"]
dec = [s["ms"] for s in steps if s["kind"] == "decode" and s["tokens"] == b]
pre, dec = pre[len(pre) // 2:], dec[len(dec) // 2:]
if pre and dec:
    print(f"tpc {n} batch {b} prefill_tokens_per_s {p / (statistics.median(pre) / 1e3):.1f} decode_tokens_per_s "
          f"{b / (statistics.median(dec) / 1e3):.1f} prefill_ms {statistics.median(pre):.3f} decode_step_ms "
          f"{statistics.median(dec):.4f}")
else:
    print(f"tpc {n} batch {b}: no steps recorded")
PY
  done
done
