#!/usr/bin/env bash
# The generation benchmark of the 1B Llama, on the GPU machine (staged by
# tools/bench/prepare_generate_1b.sh and test/gpu/prepare_generate.sh, whose lib/ holds the runtime
# and the CUDA plugin; tools/bench/generate_1b_env.sh finds them): the PyTorch peer (plain
# PyTorch, static KV cache, torch.compile with CUDA graphs for the decode step; it writes the
# weights) and tpc-generate (--graph) in fast and invariant
# numerics, on the same weights, B prompts of P random tokens and N greedy new tokens for each batch
# size B. Prints prefill and decode tokens/s of each; writes $OUT/gen-1b/* (summary.txt: the lines
# tools/bench/generate_report.py plots).
# Usage: bash tools/bench/generate_1b.sh [tpc] [peer] [hf]   (all by default: the peers' compilation
# takes minutes, so a lease may run them as separate commands). "hf" is transformers' generate with
# a static cache (tools/bench/generate_hf_peer.py), installed first from build-wheels/ (wheels
# fetched on a machine with a package index: tools/bench/fetch_wheels.sh) where the GPU machine
# lacks it.
# Environment: OUT, TPC_BENCH_GEN1B, TPC_GPU_GENERATE, TPC_PEER_TIMEOUT (seconds, default 500),
# TPC_GEN_NUMERICS (tpc's numerics, default "fast invariant").
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tools/bench/generate_1b_env.sh
source "$ROOT/tools/bench/generate_1b_env.sh"
LOG="${OUT:-/tmp}/gen-1b"
mkdir -p "$LOG"
read -r P N BATCHES < "$DIR/shape.txt"
PARTS="${*:-tpc peer hf}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$LOG/summary.txt"
if [[ $PARTS == *tpc* ]]; then
# The weights first (seconds), so that tpc's runs do not wait for the peer's compilation.
(cd "$DIR" && timeout 300 python3 generate_peer.py llama1b_config.json --init-only --write-init "$INIT") > "$LOG/init.log" 2>&1 ||
  echo "FAIL peer --init-only: $(tail -n 2 "$LOG/init.log")"
# Greedy runs for every batch and numerics, then one sampled run (temperature 0.8, top-k 50, top-p
# 0.9) of the largest batch in each numerics: the cost of the draw.
RUNS=()
NUMERICS="${TPC_GEN_NUMERICS:-fast invariant}"
for B in $BATCHES; do for n in $NUMERICS; do RUNS+=("$n $B greedy"); done; done
for n in $NUMERICS; do RUNS+=("$n ${BATCHES##* } sampled"); done
for r in "${RUNS[@]}"; do
  read -r n B how <<< "$r"
  name="$n-b$B"; flags=(--temperature 0)
  [[ $how == sampled ]] && name="$n-b$B-sampled" flags=(--temperature 0.8 --top-k 50 --top-p 0.9 --seed 3)
  run() {
    TPRT_CUDA_KERNELS=1 timeout 300 "$DIR/bin/tpc-generate" "$DIR/modules/$n-b$B.so" --backend cuda "$@" \
      --prompts "$DIR/data/prompts-b$B.jsonl" --weights "$INIT" --inputs "$DIR/data/w/inputs.safetensors" \
      "${flags[@]}" -o "$LOG/$name.jsonl" --json "$LOG/$name.steps.jsonl" 2> "$LOG/$name.log"
  }
  if ! run --graph; then  # then without the graph, so that the run still gives a number
    echo "FAIL tpc $name --graph: $(tail -n 2 "$LOG/$name.log")"
    mv "$LOG/$name.log" "$LOG/$name.graph.log"
    how="$how,no-graph"
    run || echo "FAIL tpc $name: $(tail -n 2 "$LOG/$name.log")"
  fi
  # The second wave's steps (the first warms up): the median prefill call (one prompt of P tokens)
  # and the median decode step with all B slots busy.
  python3 - "$LOG/$name.steps.jsonl" "$n" "$B" "$P" "$how" <<'PY' | tee -a "$LOG/summary.txt"
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
n, b, p, how = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
pre = [s["ms"] for s in steps if s["kind"] == "prefill"]
dec = [s["ms"] for s in steps if s["kind"] == "decode" and s["tokens"] == b]
pre, dec = pre[len(pre) // 2:], dec[len(dec) // 2:]
if pre and dec:
    print(f"tpc {n} batch {b} {how} prefill_tokens_per_s {p / (statistics.median(pre) / 1e3):.1f} decode_tokens_per_s "
          f"{b / (statistics.median(dec) / 1e3):.1f} prefill_ms {statistics.median(pre):.3f} decode_step_ms "
          f"{statistics.median(dec):.4f}")
else:
    print(f"tpc {n} batch {b} {how}: no steps recorded")
PY
done
fi
# The peer last: torch.compile takes minutes per batch size.
if [[ $PARTS == *peer* ]]; then
  # shellcheck disable=SC2086
  (cd "$DIR" && timeout "${TPC_PEER_TIMEOUT:-500}" python3 generate_peer.py llama1b_config.json --batch $BATCHES \
    --prompt "$P" --new "$N") 2>&1 | tee "$LOG/peer.log" | grep "^peer" | tee -a "$LOG/summary.txt"
fi
if [[ $PARTS == *hf* ]]; then
  if ! python3 -c "import transformers" 2> /dev/null; then
    python3 -m pip install -q --no-index --find-links "$ROOT/build-wheels" --target /tmp/hf-peer-py transformers \
      > "$LOG/hf-install.log" 2>&1 || echo "FAIL installing transformers: $(tail -n 2 "$LOG/hf-install.log")"
    export PYTHONPATH="/tmp/hf-peer-py${PYTHONPATH:+:$PYTHONPATH}"
  fi
  # shellcheck disable=SC2086
  timeout "${TPC_PEER_TIMEOUT:-500}" python3 "$ROOT/tools/bench/generate_hf_peer.py" "$DIR/llama1b_config.json" \
    --batch $BATCHES --prompt "$P" --new "$N" --repeat "${TPC_HF_REPEAT:-3}" 2>&1 | tee "$LOG/peer-hf.log" | grep "^peer" | tee -a "$LOG/summary.txt"
fi
