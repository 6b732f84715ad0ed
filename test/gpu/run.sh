#!/usr/bin/env bash
# The GPU machine's script (no cmake, no MLIR, no package registry needed there). Stages:
#   1. kernels: builds tprt-cuda-check from the sources with plain nvcc / cc command lines and checks
#      every CUDA kernel bitwise against its CPU kernel on fresh random inputs (skip: TPC_GPU_KERNELS=0);
#   2. modules: if build-gpu-carry/ was staged on the MLIR machine (`bash test/gpu/prepare_modules.sh`,
#      carry that path), runs each precompiled example module with tpc-run --backend cuda (one GPU per
#      rank; those needing more GPUs are skipped) and compares its hashes with the CPU backend's;
#      then replays each as a CUDA graph (--graph), and checks that a rank failing a collective ends
#      the world instead of hanging (TPRT_CUDA_FAULT); the PyTorch frontend's check (Llama and Mixtral
#      layers on this GPU against PyTorch eager's staged results, test/gpu/frontend_check.py);
#   3. with TPC_GPU_BENCH=1: the exact linear vs cuBLAS SGEMM and bf16 (torch), canonical collectives
#      vs NCCL, the Llama-3-8B-like MLP block fast/exact at TP 1/2/4 vs PyTorch, the tensor-core
#      attention vs torch SDPA, a 1B-class Llama decoder stack vs PyTorch, all in the same run.
# Short tables are printed last. Needs CUDA 13 (nvcc), NCCL 2.28 and a host C compiler; H100/H200.
#
# Usage: bash test/gpu/run.sh [kernel-name filter]
# Environment: CUDA_HOME (default /usr/local/cuda), TPC_CUDA_ARCH (default sm_90a), TPC_GPU_BENCH=1
#              (with 2+ GPUs also the fused norm against NCCL),
#              TPC_GPU_PLUGIN=DIR (also link the CUDA plugin against DIR/libtprt.so),
#              TPC_GPU_KERNELS=0, TPC_GPU_MODULES=0 (process worlds only), TPC_GPU_BENCH_ONLY=1 (the
#              benchmarks alone), TPC_GPU_CARRY (default build-gpu-carry), TPC_GPU_BUILD (build
#              directory, default build-gpu), OUT (if set, logs and tables are copied there).
# Exit status: 0 when every check passed, 1 on a mismatch or failure, 77 no device.
set -euo pipefail

# House rule: NVLink multicast (NVLS) stays off on shared machines. This script never changes
# clocks or modes and never resets a GPU.
export NCCL_NVLS_ENABLE=0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="${NVCC:-$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")}"
CC="${CC:-cc}"
ARCH="${TPC_CUDA_ARCH:-sm_90a}"
BUILD="${TPC_GPU_BUILD:-$ROOT/build-gpu}"
mkdir -p "$BUILD/obj"
cd "$ROOT"
# Benchmarks alone: no kernel checks, no modules, no TP-invariance matrix.
if [[ -n "${TPC_GPU_BENCH_ONLY:-}" ]]; then export TPC_GPU_BENCH=1 TPC_GPU_MODULES=0; fi
# The stage of test/gpu/prepare_modules.sh travels as one archive: unpack it where it is missing.
if [[ -z "${TPC_GPU_CARRY:-}" && ! -d "$ROOT/build-gpu-carry" && -f "$ROOT/build-gpu-carry.tar.xz" ]]; then
  tar -C "$ROOT" -xJf "$ROOT/build-gpu-carry.tar.xz"
fi

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: unavailable"
"$NVCC" --version | tail -n 2
echo "host: $(uname -srm), $(nproc) cores; cc: $("$CC" --version | head -n 1)"

# Example modules on the CUDA backend: compiled ahead of time on the MLIR machine by
# test/gpu/prepare_modules.sh (with the CPU backend's hashes), run here with tpc-run --backend
# cuda, one GPU per rank; every output hash must equal the CPU's (exact numerics).
run_modules() {
  local carry="${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}" pass=0 fail=0 skip=0 rows=()
  [[ -f "$carry/modules/list.txt" ]] || { echo "== modules: $carry not staged (run test/gpu/prepare_modules.sh there)"; return 0; }
  local ngpu list="$carry/modules/list.txt"
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  # TPC_GPU_MODULES=0: only the process-world section below (the thread-world modules ran before).
  if [[ "${TPC_GPU_MODULES:-1}" == 0 ]]; then list=/dev/null; fi
  echo "== example modules, cuda backend vs CPU backend hashes ($ngpu GPUs)"
  while read -r name; do
    local err="$BUILD/$name.err" got="$BUILD/$name.got" t0 t1
    t0=$(date +%s.%N)
    set +e
    LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" timeout 300 \
      "$carry/bin/tpc-run" "$carry/modules/$name.so" --backend cuda --seed 7 --hash > "$got.all" 2> "$err"
    local rc=$?
    grep -v '^NCCL' "$got.all" > "$got" || true  # NCCL_DEBUG=VERSION/INFO write to stdout
    set -e
    t1=$(date +%s.%N)
    local ms
    ms=$(python3 -c "import sys; print(f'{(float(sys.argv[2])-float(sys.argv[1]))*1e3:.0f}')" "$t0" "$t1")
    if grep -q "GPUs; this machine has" "$err"; then
      skip=$((skip + 1)); rows+=("$(printf '%-18s %-6s %8s ms  %s' "$name" skip "$ms" "needs more GPUs")")
    elif [[ $rc -eq 0 ]] && diff -q "$got" "$carry/modules/$name.expected" > /dev/null; then
      pass=$((pass + 1)); rows+=("$(printf '%-18s %-6s %8s ms  %s' "$name" pass "$ms" "$(head -n 1 "$got")")")
    else
      fail=$((fail + 1)); rows+=("$(printf '%-18s %-6s %8s ms  rc=%s' "$name" FAIL "$ms" "$rc")")
      echo "-- $name (exit $rc): stderr, then got vs expected"; tail -n 20 "$err"; diff "$got" "$carry/modules/$name.expected" || true
    fi
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then mkdir -p "$OUT/detail"; cp "$got" "$err" "$OUT/detail/" 2>/dev/null || true; fi
  done < "$list"
  echo
  echo "== modules table ($(date -u +%Y-%m-%d), cuda backend, exact numerics; wall time includes start-up)"
  printf '%s\n' "${rows[@]}"
  echo "modules: $pass passed, $fail failed, $skip skipped"
  # The same modules replayed as CUDA graphs (tpc-run --graph: a warm-up step, one captured step,
  # three replays): the hashes must not change. A module whose ops copy to or from the host (the
  # host fallback, the grouped wgrad's group sizes) cannot be captured and says so: "n/a".
  local gpass=0 gfail=0 gna=0 grows=()
  while read -r name; do
    local err="$BUILD/$name.graph.err" got="$BUILD/$name.graph.got"
    set +e
    LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" timeout 300 "$carry/bin/tpc-run" "$carry/modules/$name.so" \
      --backend cuda --graph --repeat 3 --seed 7 --hash 2> "$err" | grep -v '^NCCL' > "$got"
    set -e
    if grep -q "GPUs; this machine has" "$err"; then
      continue
    elif grep -qi -- "--graph:\|capture" "$err" && ! diff -q "$got" "$carry/modules/$name.expected" > /dev/null; then
      gna=$((gna + 1)); grows+=("$(printf '%-18s %-6s %s' "$name" "n/a" "$(grep -o -- '--graph: [^(]*' "$err" | head -n 1)")")
    elif diff -q "$got" "$carry/modules/$name.expected" > /dev/null; then
      gpass=$((gpass + 1)); grows+=("$(printf '%-18s %-6s %s' "$name" pass "$(grep -o 'median [0-9.]* ms' "$err")")")
    else
      gfail=$((gfail + 1)); grows+=("$(printf '%-18s %-6s' "$name" FAIL)"); tail -n 5 "$err"
    fi
  done < "$list"
  echo
  echo "== the same modules as CUDA graphs (--graph)"
  printf '%s\n' "${grows[@]}"
  echo "graphs: $gpass passed, $gfail failed, $gna not capturable"
  # Failure handling: rank 1 fails its 3rd collective (TPRT_CUDA_FAULT, after the communicators
  # exist), so rank 0 waits in NCCL for a partner that never comes. The world must end within the
  # timeout with the injected fault's message (exit 1), not hang (timeout's 124).
  local ffail=0
  if (( ngpu >= 2 )) && [[ "$list" != /dev/null ]]; then
    echo
    echo "== failure handling: rank 1 fails a collective; rank 0 must not hang"
    local t0 t1 rc
    t0=$(date +%s)
    set +e
    LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" TPRT_CUDA_FAULT=1:3 TPRT_COLLECTIVE_TIMEOUT_S=60 timeout 180 \
      "$carry/bin/tpc-run" "$carry/modules/mlp-train-tp2.so" --backend cuda --repeat 3 --seed 7 > /dev/null 2> "$BUILD/fault.err"
    rc=$?
    set -e
    t1=$(date +%s)
    tail -n 3 "$BUILD/fault.err"
    if [[ $rc -eq 1 ]] && grep -q "injected fault" "$BUILD/fault.err"; then
      echo "failure handling: pass (exit $rc after $((t1 - t0)) s)"
    else
      echo "failure handling: FAIL (exit $rc after $((t1 - t0)) s)"; ffail=1
    fi
  fi
  run_processes "$carry" "$ngpu"
  MODULES_FAILED=$((fail + gfail + ffail + PROCS_FAILED))
  # TP invariance at TP 1/2/4/8 +- SP, M in {1, 7, 64, 257}, ranks sharing GPUs where there are fewer.
  if [[ "$list" != /dev/null ]]; then
    echo; TPC_GPU_CARRY="$carry" bash "$ROOT/test/gpu/shared_gpu.sh" || MODULES_FAILED=$((MODULES_FAILED + 1))
  fi
  if [[ -n "${TPC_GPU_BENCH:-}" && -x "$carry/bin/tprt-bench-collectives" ]] && (( ngpu >= 2 )); then
    echo
    echo "== benchmark: canonical collectives vs NCCL ($(date -u +%Y-%m-%d), $ngpu GPUs)"
    LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" "$carry/bin/tprt-bench-collectives" "$ngpu" \
      | tee "$BUILD/bench_collectives.txt"
    if [[ "$ngpu" -gt 2 ]]; then
      LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" "$carry/bin/tprt-bench-collectives" 2 | tee -a "$BUILD/bench_collectives.txt"
    fi
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_collectives.txt" "$OUT/"; fi
  fi
  if [[ -n "${TPC_GPU_BENCH:-}" && -f "$carry/bench/list.txt" ]]; then bench_blocks "$carry" "$ngpu"; fi
  if [[ -n "${TPC_GPU_BENCH:-}" && -f "$carry/bench/moe_list.txt" ]]; then bench_moe "$carry"; fi
  if [[ -n "${TPC_GPU_BENCH:-}" && -f "$carry/bench/overlap-async.so" ]] && (( ngpu >= 4 )); then bench_overlap "$carry"; fi
  if [[ -n "${TPC_GPU_BENCH:-}" && -f "$carry/bench/llama1b-train-fast.so" ]]; then bench_llama "$carry"; fi
}

# Ranks as processes: the same precompiled modules launched by mpirun (MPI only exchanges the
# processes' addresses) and by torchrun (MASTER_ADDR/MASTER_PORT), one process per GPU; rank 0's
# hashes must equal the CPU backend's. Then rank 1's process fails a collective (TPRT_CUDA_FAULT):
# every process must end with an error naming it, not hang.
PROCS_FAILED=0
run_processes() {
  local carry="$1" ngpu="$2" rows=() pass=0 fail=0
  local env=(env LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE=0)
  local torchrun=()
  if python3 -c "import torch.distributed.run" 2> /dev/null; then torchrun=(python3 -m torch.distributed.run); fi
  echo
  echo "== ranks as processes (mpirun, torchrun), cuda backend"
  for name in mlp-train-tp2 moe-ep2-tp2 mlp-train-sp-tp4 moe-ep4 mlp-train-sp-tp8 moe-ep8; do
    local n
    n=$(grep -o 'tp[0-9]*$\|ep[0-9]*$' <<< "$name" | tr -dc 0-9)
    [[ "$name" == moe-ep2-tp2 ]] && n=4
    [[ -f "$carry/modules/$name.so" ]] || continue
    (( n <= ngpu )) || continue
    for launcher in mpirun torchrun; do
      local cmd=() got="$BUILD/$name.$launcher.got" err="$BUILD/$name.$launcher.err"
      if [[ $launcher == mpirun ]]; then
        command -v mpirun > /dev/null || continue
        cmd=(mpirun --allow-run-as-root --oversubscribe -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -np "$n")
      else
        (( ${#torchrun[@]} )) || continue
        cmd=("${torchrun[@]}" --nproc-per-node "$n" --master-port $((29500 + RANDOM % 1000)) --no-python)
      fi
      set +e
      "${env[@]}" timeout 300 "${cmd[@]}" "$carry/bin/tpc-run" "$carry/modules/$name.so" --backend cuda --seed 7 \
        --hash 2> "$err" | grep -v '^NCCL' > "$got"
      local rc=${PIPESTATUS[0]}
      set -e
      if [[ $rc -eq 0 ]] && diff -q "$got" "$carry/modules/$name.expected" > /dev/null; then
        pass=$((pass + 1)); rows+=("$(printf '%-18s %-9s %-6s %s' "$name" "$launcher" pass "$(head -n 1 "$got")")")
      else
        fail=$((fail + 1)); rows+=("$(printf '%-18s %-9s %-6s rc=%s' "$name" "$launcher" FAIL "$rc")")
        echo "-- $name under $launcher (exit $rc)"; tail -n 15 "$err"; diff "$got" "$carry/modules/$name.expected" || true
      fi
    done
  done
  local ffail=0
  if (( ngpu >= 2 )) && command -v mpirun > /dev/null; then
    local t0 t1 rc
    t0=$(date +%s)
    set +e
    "${env[@]}" TPRT_CUDA_FAULT=1:3 TPRT_COLLECTIVE_TIMEOUT_S=60 timeout 180 mpirun --allow-run-as-root \
      -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TPRT_CUDA_FAULT -x TPRT_COLLECTIVE_TIMEOUT_S -np 2 \
      "$carry/bin/tpc-run" "$carry/modules/mlp-train-tp2.so" --backend cuda --repeat 3 --seed 7 > /dev/null \
      2> "$BUILD/fault-procs.err"
    rc=$?
    set -e
    t1=$(date +%s)
    grep "error" "$BUILD/fault-procs.err" | head -n 3
    if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "injected fault" "$BUILD/fault-procs.err"; then
      rows+=("$(printf '%-18s %-9s %-6s %s' "rank-1-fails" mpirun pass "every process ended in $((t1 - t0)) s")")
    else
      ffail=1; rows+=("$(printf '%-18s %-9s %-6s %s' "rank-1-fails" mpirun FAIL "exit $rc after $((t1 - t0)) s")")
    fi
  fi
  printf '%s\n' "${rows[@]}"
  echo "processes: $pass passed, $((fail + ffail)) failed"
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
    mkdir -p "$OUT/detail"; cp "$BUILD"/*.mpirun.err "$BUILD"/*.torchrun.err "$BUILD/fault-procs.err" "$OUT/detail/" 2>/dev/null || true
  fi
  PROCS_FAILED=$((fail + ffail))
}

# Communication/compute overlap through the comm stream (tools/bench/overlap_{sync,async}.mlir, 4
# ranks, fast numerics): an all-gather of 256 MB and an independent 8192^3 bf16 linear, one after
# the other (sync) or the gather on the comm stream while the linear runs (async), each also as a
# CUDA graph. The peer is the sync form in the same run.
# A 1B-class Llama decoder stack (16 layers, 4096 tokens; staged by prepare_modules.sh), forward
# and training step in fast and invariant numerics, against the same layers in PyTorch eager and
# torch.compile (tools/bench/llama_stack.py, tools/bench/llama_peer.py), in the same run.
bench_llama() {
  local carry="$1" lt_dir="$CUDA_HOME/lib64"
  echo
  echo "== benchmark: 1B-class Llama decoder stack vs PyTorch ($(date -u +%Y-%m-%d))"
  LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" python3 tools/bench/llama_stack.py \
    --tpc-run "$carry/bin/tpc-run" --modules "$carry/bench" --json "$BUILD/bench_llama.json" | tee "$BUILD/bench_llama.txt" || true
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_llama.json" "$BUILD/bench_llama.txt" "$OUT/" 2>/dev/null || true; fi
}

bench_overlap() {
  local carry="$1" lt_dir="$CUDA_HOME/lib64" sync_ms=""
  echo
  echo "== benchmark: all-gather 256 MB + linear 8192^3 bf16, sync vs async (comm stream), 4 GPUs ($(date -u +%Y-%m-%d))"
  printf '%-14s %10s %10s\n' form "median ms" "vs sync"
  for v in sync async; do
    for g in "" --graph; do
      LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" timeout 300 "$carry/bin/tpc-run" \
        "$carry/bench/overlap-$v.so" --backend cuda $g --seed 7 --repeat 20 > /dev/null 2> "$BUILD/overlap-$v$g.err" ||
        { echo "overlap-$v $g failed:"; tail -n 5 "$BUILD/overlap-$v$g.err"; continue; }
      local ms
      ms=$(grep -o 'median [0-9.]* ms' "$BUILD/overlap-$v$g.err" | awk '{print $2}')
      [[ -z "$g" && "$v" == sync ]] && sync_ms=$ms
      python3 -c "import sys; print(f'{sys.argv[1]:<14} {float(sys.argv[2]):>10.3f} {float(sys.argv[2]) / float(sys.argv[3]):>9.2f}x')" \
        "$v${g:+ graph}" "$ms" "${sync_ms:-$ms}"
    done
  done | tee "$BUILD/bench_overlap.txt"
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_overlap.txt" "$OUT/"; fi
}

# Step time of the Llama-3-8B-like MLP block (tools/bench/llama8b_mlp.mlir, 4096 tokens) at TP 1, 2,
# 4 in fast and exact numerics, with PyTorch's step on one GPU as the peer, in the same run.
bench_blocks() {
  local carry="$1" ngpu="$2" lt_dir peer
  # cuBLASLt for fast mode: the toolkit's, else the one PyTorch ships.
  lt_dir="$CUDA_HOME/lib64"
  if ! ls "$lt_dir"/libcublasLt.so.* > /dev/null 2>&1; then
    lt_dir=$(python3 -c "import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), 'lib'))" 2>/dev/null || echo "")
  fi
  python3 "$carry/bench/bench_mlp_peer.py" > "$BUILD/bench_mlp_peer.txt" 2>&1 || true
  peer=$(awk '/^peer_ms/{print $2}' "$BUILD/bench_mlp_peer.txt")
  local peer_train peer_compile
  peer_train=$(awk '/^peer_train_ms/{print $2}' "$BUILD/bench_mlp_peer.txt")
  peer_compile=$(awk '/^peer_train_compile_ms/{print $2}' "$BUILD/bench_mlp_peer.txt")
  local flops=$(( 2 * 4096 * 4096 * 28672 + 2 * 4096 * 14336 * 4096 ))
  echo
  echo "== benchmark: MLP block step, Llama-3-8B-like (h 4096, ffn 14336, 4096 tokens, bf16) ($(date -u +%Y-%m-%d))"
  printf '%4s %-6s %12s %14s %10s %12s\n' TP mode "median ms" "TFLOP/s/GPU" "vs fast" "vs torch TP1"
  declare -A fast_ms
  while read -r name tp mode step; do
    if (( tp > ngpu )); then continue; fi
    if [[ "$step" == train ]]; then  # forward + backward: three times the GEMM FLOPs, vs torch's step
      LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" timeout 300 "$carry/bin/tpc-run" "$carry/bench/$name.so" \
        --backend cuda --seed 7 --repeat 5 --json "$BUILD/$name.jsonl" > /dev/null 2> "$BUILD/$name.err" || { echo "$name failed:"; tail -n 5 "$BUILD/$name.err"; continue; }
      python3 - "$tp" "$mode" "$(grep -o 'median [0-9.]* ms' "$BUILD/$name.err" | awk '{print $2}')" "$((3 * flops))" \
        "${train_fast:-}" "$peer_train" "$peer_compile" <<'PY'
import sys
tp, mode, ms, flops = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
fast = float(sys.argv[5] or ms); eager = float(sys.argv[6] or "nan"); comp = float(sys.argv[7] or "nan")
print(f"{tp:>4} {'train '+mode:<16} {ms:>8.3f} {flops / tp / (ms * 1e-3) / 1e12:>14.1f} {ms / fast:>9.2f}x"
      f" {ms / eager:>11.2f}x (eager {eager:.3f} ms; torch.compile {comp:.3f} ms: {ms / comp:.2f}x)")
PY
      [[ "$mode" == fast ]] && train_fast=$(grep -o 'median [0-9.]* ms' "$BUILD/$name.err" | awk '{print $2}')
      continue
    fi
    LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" timeout 300 "$carry/bin/tpc-run" "$carry/bench/$name.so" \
      --backend cuda --seed 7 --repeat 10 --json "$BUILD/$name.jsonl" > /dev/null 2> "$BUILD/$name.err" || { echo "$name failed:"; tail -n 5 "$BUILD/$name.err"; continue; }
    local ms
    ms=$(grep -o 'median [0-9.]* ms' "$BUILD/$name.err" | awk '{print $2}')
    [[ "$mode" == fast ]] && fast_ms[$tp]=$ms
    if [[ "$mode" == fast ]]; then  # the same step replayed as a CUDA graph
      LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" timeout 300 "$carry/bin/tpc-run" "$carry/bench/$name.so" \
        --backend cuda --graph --seed 7 --repeat 10 --json "$BUILD/$name.graph.jsonl" > /dev/null 2> "$BUILD/$name.graph.err" || true
      local gms
      gms=$(grep -o 'median [0-9.]* ms' "$BUILD/$name.graph.err" | awk '{print $2}')
      [[ -n "$gms" ]] && python3 - "$tp" "fast+graph" "$gms" "$flops" "$ms" "$peer" <<'PY'
import sys
tp, mode, ms, flops, fast, peer = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6] or "nan")
print(f"{tp:>4} {mode:<10} {ms:>8.3f} {flops / tp / (ms * 1e-3) / 1e12:>14.1f} {ms / fast:>9.2f}x {ms / peer:>11.2f}x")
PY
    fi
    python3 - "$tp" "$mode" "$ms" "$flops" "${fast_ms[$tp]:-$ms}" "$peer" <<'PY'
import sys
tp, mode, ms, flops, fast, peer = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6] or "nan")
print(f"{tp:>4} {mode:<6} {ms:>12.3f} {flops / tp / (ms * 1e-3) / 1e12:>14.1f} {ms / fast:>9.2f}x {ms / peer:>11.2f}x")
PY
  done < "$carry/bench/list.txt" | tee "$BUILD/bench_blocks.txt"
  # The same runs from their --json records (tools/bench/run_report.py): table and chart.
  if ls "$BUILD"/*.jsonl > /dev/null 2>&1; then
    python3 tools/bench/run_report.py "$BUILD"/*.jsonl --svg "$BUILD/bench_blocks.svg" \
      --title "MLP block steps (tpc-run --json)" > "$BUILD/bench_blocks.md" || true
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD"/*.jsonl "$BUILD/bench_blocks.md" "$BUILD/bench_blocks.svg" "$OUT/" 2>/dev/null || true; fi
  fi
  tail -n 1 "$BUILD/bench_mlp_peer.txt"
  echo "torch TP1 peer: $peer ms per forward, $peer_train ms per training step (eager), $peer_compile ms (torch.compile)"
  # Fast mode has no bitwise contract: check its TP = 2 output against exact mode's within bf16
  # tolerance (test/e2e/compare.py), so a wrong cuBLASLt call cannot pass as fast.
  if (( ngpu >= 2 )); then
    for mode in fast exact; do
      LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" "$carry/bin/tpc-run" "$carry/bench/mlp8b-tp2-$mode.so" \
        --backend cuda --seed 7 --outputs "$BUILD/mlp8b-$mode.safetensors" 2> /dev/null
    done
    echo "fast vs exact output (TP = 2):"
    python3 test/e2e/compare.py "$BUILD/mlp8b-exact.safetensors" "$BUILD/mlp8b-fast.safetensors" || true
  fi
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_blocks.txt" "$BUILD/bench_mlp_peer.txt" "$OUT/"; fi
}

# Training step (forward + backward) of the Mixtral-8x7B-like MoE block (tools/bench/mixtral_moe.mlir:
# 4096 tokens, hidden 4096, 8 experts top-2, expert FFN 14336, bf16) at TP 1 in fast, invariant and
# exact numerics, with PyTorch's step on one GPU (test/gpu/bench_moe_peer.py: torch._grouped_mm,
# eager and torch.compile) as the peer, in the same run.
bench_moe() {
  local carry="$1" lt_dir peer_log="$BUILD/bench_moe_peer.txt" peer_fwd peer_train peer_compile
  lt_dir="$CUDA_HOME/lib64"
  if ! ls "$lt_dir"/libcublasLt.so.* > /dev/null 2>&1; then
    lt_dir=$(python3 -c "import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), 'lib'))" 2>/dev/null || echo "")
  fi
  timeout 600 python3 "$carry/bench/bench_moe_peer.py" > "$peer_log" 2>&1 || true
  peer_fwd=$(awk '/^peer_moe_fwd_ms/{print $2}' "$peer_log")
  peer_train=$(awk '/^peer_moe_train_ms/{print $2}' "$peer_log")
  peer_compile=$(awk '/^peer_moe_train_compile_ms/{print $2}' "$peer_log")
  # GEMM FLOPs of a step: the routed expert GEMMs (tokens x top_k rows through FC1 H -> 2F and FC2
  # F -> H) and the router (H -> E), three times for forward, dgrad and wgrad (tpc-run --count-only
  # reports the same 8659459375104).
  local flops=$(( 3 * (2 * 4096 * 2 * (4096 * 2 * 14336 + 14336 * 4096) + 2 * 4096 * 4096 * 8) ))
  echo
  echo "== benchmark: MoE block train step, Mixtral-8x7B-like (h 4096, ffn 14336, 8 experts top-2, 4096 tokens, bf16) ($(date -u +%Y-%m-%d))"
  printf '%-16s %10s %9s %9s %15s %17s\n' mode "median ms" "TFLOP/s" "vs fast" "vs torch eager" "vs torch.compile"
  local fast=""
  while read -r name mode; do
    local repeat=5 ms
    if [[ "$mode" == exact ]]; then repeat=2; fi
    LD_LIBRARY_PATH="$carry/lib:$lt_dir:${LD_LIBRARY_PATH:-}" timeout 300 "$carry/bin/tpc-run" "$carry/bench/$name.so" \
      --backend cuda --seed 7 --repeat "$repeat" > /dev/null 2> "$BUILD/$name.err" || { echo "$name failed:"; tail -n 5 "$BUILD/$name.err"; continue; }
    ms=$(grep -o 'median [0-9.]* ms' "$BUILD/$name.err" | awk '{print $2}')
    if [[ -z "$ms" ]]; then echo "$name: no median in its log"; continue; fi
    if [[ "$mode" == fast ]]; then fast=$ms; fi
    python3 - "$mode" "$ms" "$flops" "$fast" "$peer_train" "$peer_compile" <<'PY' || true
import sys
mode, ms, flops = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
fast = float(sys.argv[4] or ms); eager = float(sys.argv[5] or "nan"); comp = float(sys.argv[6] or "nan")
print(f"{'train ' + mode:<16} {ms:>10.3f} {flops / (ms * 1e-3) / 1e12:>9.1f} {ms / fast:>8.2f}x {ms / eager:>14.2f}x"
      f" {ms / comp:>16.2f}x")
PY
  done < "$carry/bench/moe_list.txt" | tee "$BUILD/bench_moe.txt"
  grep -E '^(peer_moe_group_sizes|peer:|torch.compile failed)' "$peer_log" | tee -a "$BUILD/bench_moe.txt" || true
  echo "torch TP1 peer: ${peer_fwd:-?} ms per forward, ${peer_train:-?} ms per training step (eager), ${peer_compile:-?} ms (torch.compile)" \
    | tee -a "$BUILD/bench_moe.txt"
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_moe.txt" "$peer_log" "$OUT/"; fi
}
MODULES_FAILED=0
# Per-module logs travel as one archive (the device tool fetches a limited number of files).
pack_details() {
  if [[ -n "${OUT:-}" && -d "${OUT:-}/detail" ]]; then tar czf "$OUT/detail.tgz" -C "$OUT" detail && rm -rf "$OUT/detail"; fi
}
if [[ "${TPC_GPU_KERNELS:-1}" == "0" ]]; then
  run_modules
  pack_details
  exit $(( MODULES_FAILED > 0 ))
fi

CARRY_BIN="${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}/bin"
if [[ -x "$CARRY_BIN/tprt-cuda-check" && -z "${TPC_GPU_REBUILD:-}" ]]; then
  # Built for sm_90a by prepare_modules.sh on the MLIR machine (CUTLASS's templates included).
  echo "== prebuilt checkers and benchmarks from $CARRY_BIN"
  export LD_LIBRARY_PATH="$CARRY_BIN/../lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
  cp "$CARRY_BIN"/tprt-cuda-check* "$CARRY_BIN"/tprt-bench-* "$BUILD/"
else
  echo "== build (arch $ARCH)"
  INC=(-Iruntime -Ikernels/cpu -Ikernels/cuda -Ikernels/cuda/common -Itest/gpu -Itools/common -Itools/bench)
  # The C flags of the CMake build that matter for the bits: no contraction, no fast math.
  CFLAGS=(-std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter -ffp-contract=off -fno-fast-math -fPIC)
  # Exact mode: no fused multiply-add contraction; IEEE division and sqrt; no flush to zero.
  NVFLAGS=(-std=c++17 -O3 -g -arch="$ARCH" --fmad=false -prec-div=true -prec-sqrt=true -ftz=false
           -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-ffp-contract=off,-fPIC)
  C_SOURCES=(runtime/tprt_status.c runtime/tprt_dtype.c runtime/tprt_allocator.c
             kernels/cpu/cpu_common.c kernels/cpu/cpu_linear.c kernels/cpu/cpu_norm.c
             kernels/cpu/cpu_glu.c kernels/cpu/cpu_elementwise.c kernels/cpu/cpu_moe.c
             kernels/cpu/cpu_moe_bucket.c kernels/cpu/cpu_linear_grad.c
             kernels/cpu/cpu_glu_grad.c kernels/cpu/cpu_norm_grad.c kernels/cpu/cpu_moe_grad.c
             kernels/cpu/cpu_fused_mlp.c kernels/cpu/cpu_quant.c kernels/cpu/cpu_attention.c
             kernels/cpu/cpu_vocab.c kernels/cpu/cpu_optim.c)
  CU_SOURCES=(test/gpu/cuda_check.cu test/gpu/cuda_check_dense.cu test/gpu/cuda_check_moe.cu test/gpu/cuda_check_grad.cu
              test/gpu/cuda_check_attention.cu test/gpu/cuda_check_model.cu)
  # The kernels' files, as CMake builds them: kernels/cuda/SOURCES ("<library> <path> [exact]").
  CUTLASS_SOURCES=()
  EXACT_CUTLASS=()
  while read -r lib path flag; do
    case "$lib" in
      tprt_cuda) if [[ "$path" == *.c ]]; then C_SOURCES+=("kernels/cuda/$path"); else CU_SOURCES+=("kernels/cuda/$path"); fi ;;
      tprt_cuda_cutlass) CUTLASS_SOURCES+=("kernels/cuda/$path"); [[ "${flag:-}" == exact ]] && EXACT_CUTLASS+=("kernels/cuda/$path") ;;
    esac
  done < <(grep '^[a-z]' kernels/cuda/SOURCES)
  t0=$(date +%s)
  pids=()
  objs=()
  # Object names carry the source's path, so that files of different folders never collide.
  objname() { local o="${1//\//_}"; echo "$BUILD/obj/${o%.*}_${1##*.}.o"; }
  for src in "${C_SOURCES[@]}"; do
    obj="$(objname "$src")"
    objs+=("$obj")
    "$CC" "${CFLAGS[@]}" "${INC[@]}" -I"$CUDA_HOME/include" -c "$src" -o "$obj" & pids+=($!)
  done
  for src in "${CU_SOURCES[@]}"; do
    obj="$(objname "$src")"
    objs+=("$obj")
    "$NVCC" "${NVFLAGS[@]}" "${INC[@]}" -c "$src" -o "$obj" & pids+=($!)
  done
  # The CUTLASS GEMMs (fast and invariant): headers in third_party/cutlass (tools/setup.sh), or
  # TPC_CUTLASS_DIR; no exact-mode flags (tensor cores) except where SOURCES says "exact".
  CUTLASS_INC="${TPC_CUTLASS_DIR:-$ROOT/third_party/cutlass/include}"
  [[ -f "$CUTLASS_INC/cutlass/cutlass.h" ]] || { echo "run.sh: CUTLASS headers not found in $CUTLASS_INC" >&2; exit 1; }
  for src in "${CUTLASS_SOURCES[@]}"; do
    obj="$(objname "$src")"
    objs+=("$obj")
    exact=()
    [[ " ${EXACT_CUTLASS[*]} " == *" $src "* ]] && exact=(--fmad=false -prec-div=true -prec-sqrt=true -ftz=false)
    "$NVCC" -std=c++17 -O3 -arch="$ARCH" --expt-relaxed-constexpr -DNDEBUG -Xcompiler=-fPIC "${exact[@]}" "${INC[@]}" \
      -isystem "$CUTLASS_INC" -c "$src" -o "$obj" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  kernel_objs=()
  for o in "${objs[@]}"; do [[ "$o" == */test_gpu_cuda_check* ]] || kernel_objs+=("$o"); done
  "$NVCC" -arch="$ARCH" "${objs[@]}" -o "$BUILD/tprt-cuda-check" -lm -ldl
  "$NVCC" -std=c++17 -O3 -arch="$ARCH" "${INC[@]}" test/gpu/check_fast.cu test/gpu/check_fast_invariant.cu test/gpu/check_fast_attention.cu \
    "${kernel_objs[@]}" \
    -o "$BUILD/tprt-cuda-check-fast" -lm -ldl
  # TPC_GPU_PLUGIN=DIR (a folder with the libtprt.so of a staged tpc-run or tpc-train): the CUDA
  # backend's plugin from these kernel objects and runtime/cuda's host code, for tools staged on
  # the MLIR machine with an older plugin (point TPRT_BACKEND_CUDA at $BUILD/libtprt_backend_cuda.so).
  # Everything but the plugin's entry point stays local to it, as in the CMake build.
  if [[ -n "${TPC_GPU_PLUGIN:-}" ]]; then
    plugin_objs=("${kernel_objs[@]}")
    pids=()
    for src in runtime/cuda/*.c; do
      obj="$(objname "$src")"
      plugin_objs+=("$obj")
      "$CC" "${CFLAGS[@]}" -fvisibility=hidden "${INC[@]}" -Iruntime/cuda -I"$CUDA_HOME/include" -c "$src" -o "$obj" & pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    printf '{ global: tprt_backend_cuda; local: *; };\n' > "$BUILD/plugin.map"
    "$NVCC" -shared -arch="$ARCH" "${plugin_objs[@]}" -o "$BUILD/libtprt_backend_cuda.so" \
      -Xlinker --version-script="$BUILD/plugin.map" -L"$TPC_GPU_PLUGIN" -ltprt -lnccl -ldl -lm
    echo "built $BUILD/libtprt_backend_cuda.so"
  fi
  echo "built $BUILD/tprt-cuda-check in $(( $(date +%s) - t0 )) s"
  if [[ -n "${TPC_GPU_BENCH:-}" ]]; then
    # The benchmark links the same kernel objects, without the checker's.
    bench_objs=()
    for o in "${objs[@]}"; do [[ "$o" == */test_gpu_cuda_check* ]] || bench_objs+=("$o"); done
    # The tools' option parser (its version header comes from CMake; without it, "unknown").
    "$CC" -O2 -std=c11 -Itools/common -c tools/common/tpc_cli.c -o "$BUILD/obj/tpc_cli.o"
    bench_objs+=("$BUILD/obj/tpc_cli.o")
    "$NVCC" "${NVFLAGS[@]}" "${INC[@]}" -c test/gpu/bench_linear.cu -o "$BUILD/obj/bench_linear_cu.o"
    "$NVCC" -arch="$ARCH" "${bench_objs[@]}" "$BUILD/obj/bench_linear_cu.o" -o "$BUILD/tprt-bench-linear" -lm -ldl
    "$NVCC" -std=c++17 -O3 -arch="$ARCH" "${INC[@]}" tools/bench/bench_gemm.cu "${bench_objs[@]}" \
      -o "$BUILD/tprt-bench-gemm" -lm -ldl
    "$NVCC" -std=c++17 -O3 -arch="$ARCH" "${INC[@]}" tools/bench/bench_attention.cu "${bench_objs[@]}" \
      -o "$BUILD/tprt-bench-attention" -lm -ldl
  fi
fi
rc=0
if [[ -n "${TPC_GPU_BENCH_ONLY:-}" ]]; then
  echo "== TPC_GPU_BENCH_ONLY: the kernel checks, modules and TP-invariance matrix are skipped"
else
echo "== tprt-cuda-check"
LOG="$BUILD/cuda_check.log"
set +e
"$BUILD/tprt-cuda-check" "$@" > "$LOG" 2>&1
rc=$?
set -e
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$LOG" "$OUT/"; fi
# Per-configuration rows first (failures kept in full), then the short table last.
summary_line=$(grep -n '^Summary' "$LOG" | cut -d: -f1 || true)
if [[ -n "$summary_line" ]]; then
  head -n $((summary_line - 1)) "$LOG"
  echo
  echo "== short table ($(date -u +%Y-%m-%d), $ARCH)"
  tail -n +"$summary_line" "$LOG"
else
  cat "$LOG"
fi
echo "tprt-cuda-check exit status: $rc"
# Fast-mode kernels (cuBLASLt, CUTLASS) against the exact ones, within tolerance.
if [[ -x "$BUILD/tprt-cuda-check-fast" ]]; then
  echo
  echo "== tprt-cuda-check-fast"
  set +e
  "$BUILD/tprt-cuda-check-fast" > "$BUILD/check_fast.log" 2>&1
  frc=$?
  set -e
  grep -v ' pass $' "$BUILD/check_fast.log" | tail -n 40
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/check_fast.log" "$OUT/"; fi
  if [[ $frc -ne 0 && $rc -eq 0 ]]; then rc=$frc; fi
fi
# The fused all-reduce + add + RMSNorm kernel's protocol and bits: 4 ranks sharing GPU 0, then one
# rank per GPU where there are several (tprt-fused-norm-check, built by CMake: prepare_modules.sh).
FUSED_CHECK="${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}/bin/tprt-fused-norm-check"
if [[ -x "$FUSED_CHECK" ]]; then
  # Its libraries are the carry's (TPC_GPU_REBUILD=1 builds the checkers here but not libtprt).
  export LD_LIBRARY_PATH="$(dirname "$FUSED_CHECK")/../lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
  echo
  echo "== tprt-fused-norm-check"
  set +e
  CUDA_VISIBLE_DEVICES=0 "$FUSED_CHECK" 4 2
  nrc=$?
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  if (( ngpu > 1 && nrc == 0 )); then "$FUSED_CHECK" "$ngpu" 2; nrc=$?; fi
  # TPC_GPU_BENCH=1 on several GPUs: the kernel against NCCL + add + norm at TP 2 and on every GPU
  # (the program's outputs kept as bench_fused_norm_tpN.txt, with its breakdown; fused_norm.py
  # --table makes the table, JSON and plot from them), then with PyTorch's column on every GPU.
  if [[ -n "${TPC_GPU_BENCH:-}" ]] && (( ngpu > 1 )); then
    for tp in $(printf '%s\n' 2 "$ngpu" | sort -un); do
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((tp - 1))) timeout 300 "$FUSED_CHECK" bench > "$BUILD/bench_fused_norm_tp$tp.txt"
      # The quantizing form (MXFP8 normed) against the unfused path with its quantize kernel.
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((tp - 1))) FN_QUANT=mxfp8 timeout 300 "$FUSED_CHECK" bench \
        > "$BUILD/bench_fused_norm_quant_tp$tp.txt"
      tail -n 8 "$BUILD/bench_fused_norm_quant_tp$tp.txt"
    done
    python3 tools/bench/fused_norm.py --table "$BUILD"/bench_fused_norm_tp*.txt \
      --device "${ngpu}x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)" \
      --json "$BUILD/bench_fused_norm_tables.json" --svg "$BUILD/bench_fused_norm_tables.svg"
    timeout 500 python3 tools/bench/fused_norm.py --bin "$FUSED_CHECK" --json "$BUILD/bench_fused_norm.json" \
      --svg "$BUILD/bench_fused_norm.svg" | tee "$BUILD/bench_fused_norm.txt"
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD"/bench_fused_norm* "$OUT/"; fi
  elif [[ -n "${TPC_GPU_BENCH:-}" ]]; then
    # One GPU: the kernel alone with 2 ranks sharing it, plain and quantizing: a proxy for the
    # kernel's own cost (no link, no NCCL peer).
    for q in "" mxfp8; do
      CUDA_VISIBLE_DEVICES=0 FN_SHARE=2 FN_QUANT=$q timeout 300 "$FUSED_CHECK" bench \
        > "$BUILD/bench_fused_norm_share2${q:+_$q}.txt"
      head -n 8 "$BUILD/bench_fused_norm_share2${q:+_$q}.txt"
    done
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD"/bench_fused_norm_share2* "$OUT/"; fi
  fi
  # The staged fused-norm modules (collectives, adds and norms only; and tp-fuse's fused norms of a
  # Llama-style stack, which round the sum first) with the kernel in the backend
  # (TPRT_CUDA_FUSED_NORM=1; ranks share GPUs where there are fewer GPUs than ranks): three steps,
  # the CPU backend's hashes.
  carry="${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}"
  for name in fused-norm-tp2 fused-norm-tp4 fuse-llama-tp2 fuse-llama-train-tp4 fused-norm-tp4-two-shot \
    fuse-llama-train-tp4-two-shot fused-norm-quant-tp2 fused-norm-quant-tp2-two-shot fuse-mxfp8-tp2; do
    [[ -f "$carry/modules/$name.so" ]] || continue
    TPRT_CUDA_FUSED_NORM=1 LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" timeout 120 "$carry/bin/tpc-run" \
      "$carry/modules/$name.so" --backend cuda --share-gpus --seed 7 --repeat 3 --hash 2> "$BUILD/$name.fused.err" |
      grep -v '^NCCL' > "$BUILD/$name.fused.got"
    if diff -q "$BUILD/$name.fused.got" "$carry/modules/$name.expected" > /dev/null; then
      echo "$name with TPRT_CUDA_FUSED_NORM=1: pass"
    else
      echo "$name with TPRT_CUDA_FUSED_NORM=1: FAIL"; tail -n 5 "$BUILD/$name.fused.err"; nrc=1
    fi
  done
  set -e
  if [[ $nrc -ne 0 && $rc -eq 0 ]]; then rc=$nrc; fi
fi
fi  # TPC_GPU_BENCH_ONLY
if [[ -n "${TPC_GPU_BENCH:-}" ]]; then
  # Exact-mode linear against the peer (PyTorch bf16 matmul) measured in the same run.
  echo
  echo "== benchmark: exact linear vs torch.matmul bf16 ($(date -u +%Y-%m-%d), $ARCH)"
  "$BUILD/tprt-bench-linear" > "$BUILD/bench_linear.txt"
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_linear.txt" "$OUT/"; fi
  python3 test/gpu/bench_peer.py "$BUILD/bench_linear.txt"
  if [[ -x "$BUILD/tprt-bench-gemm" ]]; then
    echo
    python3 tools/bench/gemm.py --bin "$BUILD/tprt-bench-gemm" ${TPC_GPU_BENCH_QUICK:+--quick} \
      --json "$BUILD/bench_gemm.json" | tee "$BUILD/bench_gemm.txt"
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_gemm.json" "$BUILD/bench_gemm.txt" "$OUT/"; fi
  fi
  if [[ -x "$BUILD/tprt-bench-attention" ]]; then
    echo
    echo "== benchmark: attention vs torch scaled_dot_product_attention ($(date -u +%Y-%m-%d), $ARCH)"
    python3 tools/bench/attention.py --bin "$BUILD/tprt-bench-attention" ${TPC_GPU_BENCH_QUICK:+--quick} \
      --json "$BUILD/bench_attention.json" | tee "$BUILD/bench_attention.txt"
    if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/bench_attention.json" "$BUILD/bench_attention.txt" "$OUT/"; fi
  fi
fi
run_modules
# The PyTorch frontend's check on this GPU (staged by prepare_modules.sh with PyTorch's results).
if [[ -z "${TPC_GPU_BENCH_ONLY:-}" ]] && ls "${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}"/frontend/*/stage.txt > /dev/null 2>&1; then
  echo
  echo "== frontend: tpc on this GPU vs PyTorch eager (tpc_torch.check --stage)"
  carry="${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}"
  set +e
  LD_LIBRARY_PATH="$carry/lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" python3 test/gpu/frontend_check.py \
    --tpc-run "$carry/bin/tpc-run" "$carry"/frontend/*/ > "$BUILD/frontend_check.txt" 2>&1
  frc=$?
  set -e
  cat "$BUILD/frontend_check.txt"
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$BUILD/frontend_check.txt" "$OUT/"; fi
  if [[ $frc -ne 0 && $rc -eq 0 ]]; then rc=$frc; fi
fi
pack_details
if [[ $rc -eq 0 && $MODULES_FAILED -gt 0 ]]; then rc=1; fi
exit $rc
