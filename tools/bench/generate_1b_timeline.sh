#!/usr/bin/env bash
# Where a decode step of the 1B generation benchmark goes (staged as tools/bench/generate_1b.sh):
# tpc-generate without a graph, TPRT_CUDA_TIMELINE=2, B prompts of the benchmark's with 8 new tokens
# each; writes every interval of the run to $OUT/gen-1b-timeline/NUMERICS-bB.log, and the peer's
# torch.compile performance hints (a decode step that does not become a CUDA graph says why) to
# $OUT/gen-1b-timeline/peer-hints.log.
# Usage: bash tools/bench/generate_1b_timeline.sh [numerics-batch ...]   (default fast-64 fast-1)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tools/bench/generate_1b_env.sh
source "$ROOT/tools/bench/generate_1b_env.sh"
LOG="${OUT:-/tmp}/gen-1b-timeline"
mkdir -p "$LOG"
[[ -f $INIT ]] || (cd "$DIR" && python3 generate_peer.py llama1b_config.json --init-only --write-init "$INIT")
NB=("$@"); [[ ${#NB[@]} -gt 0 ]] || NB=(fast-64 fast-1)
for nb in "${NB[@]}"; do
  n=${nb%-*} B=${nb#*-}
  head -n "$B" "$DIR/data/prompts-b$B.jsonl" | sed 's/"max_tokens": [0-9]*/"max_tokens": 8/' > "/tmp/tl-b$B.jsonl"
  TPRT_CUDA_TIMELINE=2 TPRT_CUDA_KERNELS=1 timeout 120 "$DIR/bin/tpc-generate" "$DIR/modules/$n-b$B.so" --backend cuda \
    --prompts "/tmp/tl-b$B.jsonl" --weights "$INIT" --inputs "$DIR/data/w/inputs.safetensors" --temperature 0 \
    -o /dev/null 2> "$LOG/$n-b$B.log" || echo "FAIL $nb: $(tail -n 2 "$LOG/$n-b$B.log")"
  grep -c "timeline" "$LOG/$n-b$B.log"
done
read -r P N _ < "$DIR/shape.txt"
(cd "$DIR" && TORCH_LOGS=perf_hints timeout 300 python3 generate_peer.py llama1b_config.json --batch 1 --prompt "$P" \
  --new 32 --repeat 1) > "$LOG/peer-hints.log" 2>&1
grep -i "skip\|cudagraph\|^peer" "$LOG/peer-hints.log" | head -20
