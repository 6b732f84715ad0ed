#!/usr/bin/env bash
# The 1B Llama training benchmark, on the GPU machine (staged by tools/bench/prepare_train_1b.sh):
# the same model, initial weights and batches trained by tpc-train (fast and invariant numerics)
# and by PyTorch (eager and torch.compile; tools/bench/train_peer.py), one after the other on one
# GPU. Each run's peak GPU memory is nvidia-smi's (the whole process: context, allocator, every
# buffer), sampled every 100 ms. Prints each run's median step time, tokens/s, MFU and peak memory,
# and the ratios; writes $OUT/train-1b/*.jsonl (every step's loss), summary.txt and loss.svg (the loss
# curves, by the report).
# Usage: bash tools/bench/train_1b.sh [steps [run...]]   runs: torch-eager (first: it writes the initial
# weights), tpc-fast, tpc-invariant, torch-compile, report (default: all, in that order), and
# tpc-fast-tuned (fast numerics with TPRT_CUDA_GEMM_TUNE=1: cuBLASLt's algorithms timed per shape).
# Environment: OUT, TPC_BENCH_1B (the staged folder).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${TPC_BENCH_1B:-$ROOT/build-bench-1b}"
if [[ ! -d "$DIR" && -f "$ROOT/build-bench-1b.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-bench-1b.tar.xz"; fi
STEPS="${1:-30}"
LOG="${OUT:-/tmp}/train-1b"
mkdir -p "$LOG"
# The runtime and the CUDA plugin: test/gpu/prepare_train.sh's stage.
GPU_TRAIN="${TPC_GPU_TRAIN:-$ROOT/build-gpu-train}"
if [[ ! -d "$GPU_TRAIN" && -f "$ROOT/build-gpu-train.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-gpu-train.tar.xz"; fi
export LD_LIBRARY_PATH="$GPU_TRAIN/lib:${LD_LIBRARY_PATH:-}" TPRT_BACKEND_CUDA="$GPU_TRAIN/lib/libtprt_backend_cuda.so"
read -r B S < "$DIR/shape.txt"
CFG="$DIR/llama1b_config.json"
COMMON=(--batch "$B" --steps "$STEPS" --lr 3e-4 --warmup 5)
INIT="/tmp/llama1b-init.safetensors"

watch_mem() {  # name: samples nvidia-smi's used memory (MiB) until stop_mem
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$LOG/$1.mem" 2> /dev/null &
  MEM_PID=$!
}
stop_mem() { kill "$MEM_PID" 2> /dev/null; wait "$MEM_PID" 2> /dev/null; sort -n "$LOG/$1.mem" | tail -n 1; }

# The peer first: it draws the initial weights both sides start from.
peer() {  # mode (eager|compile), extra flags
  local mode=$1; shift
  watch_mem "torch-$mode"
  PYTHONUNBUFFERED=1 python3 "$DIR/train_peer.py" "$CFG" --data "$DIR/data/tokens.bin" --seq-len "$S" "${COMMON[@]}" \
    --json "$LOG/torch-$mode.jsonl" "$@" > "$LOG/torch-$mode.log" 2>&1 || { echo "FAIL torch-$mode: $(tail -n 2 "$LOG/torch-$mode.log")"; }
  local mib; mib=$(stop_mem "torch-$mode")
  echo "torch-$mode peak_mib $mib $(tail -n 1 "$LOG/torch-$mode.log")"
}
tpc() {  # numerics [run name]
  local n=$1 name=${2:-tpc-$1}
  watch_mem "$name"
  TPRT_CUDA_KERNELS=1 timeout "${TPC_BENCH_TIMEOUT:-300}" "$DIR/bin/tpc-train" "$DIR/modules/$n.so" --backend cuda --data "$DIR/data/tokens.bin" "${COMMON[@]}" \
    --weights "$INIT" --inputs "$DIR/data/inputs.safetensors" --peak-tflops 989 --json "$LOG/$name.jsonl" > "$LOG/$name.log" 2>&1 ||
    echo "FAIL $name: $(tail -n 2 "$LOG/$name.log")"
  local mib; mib=$(stop_mem "$name")
  echo "$name peak_mib $mib $(tail -n 1 "$LOG/$name.log")"
}
shift || true
RUNS=("$@")
[[ ${#RUNS[@]} -gt 0 ]] || RUNS=(torch-eager tpc-fast tpc-invariant torch-compile report)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
for r in "${RUNS[@]}"; do
  case "$r" in
    torch-eager) peer eager --write-init "$INIT" ;;
    torch-compile) peer compile --compile ;;
    tpc-fast) tpc fast ;;
    tpc-invariant) tpc invariant ;;
    tpc-fast-tuned) TPRT_CUDA_GEMM_TUNE=1 tpc fast tpc-fast-tuned ;;
    report) python3 "$ROOT/tools/bench/train_report.py" "$CFG" "$LOG" --batch "$B" --seq-len "$S" --svg "$LOG/loss.svg" ;;
    *) echo "train_1b.sh: unknown run '$r'"; exit 2 ;;
  esac | tee -a "$LOG/summary.txt"
done
