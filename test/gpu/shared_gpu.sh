#!/usr/bin/env bash
# TP invariance on the CUDA backend with any number of GPUs, one included (issue #13). Runs, on the
# GPU machine, the modules that test/gpu/prepare_modules.sh staged in build-gpu-carry/shared: one
# training step (the output and every gradient) of the MLP and MoE example blocks, and of "-wide"
# versions on which invariant mode's tensor-core GEMM runs, for M in {1, 7, 64, 257} tokens at
# TP 1/2/4/8 with and without sequence parallelism (and of an attention block on which the
# tensor-core attention runs, test/gpu/attention_block_wide.mlir, 400 tokens at TP 1/2/4), in invariant numerics, with
# `tpc-run --backend cuda --seed 7 --hash`. A world with more ranks than GPUs runs with
# --share-gpus (rank i on GPU i % GPUs, its collectives as device copies plus the canonical sums,
# runtime/cuda/backend_cuda_local.c); one with as many GPUs as ranks runs one GPU per rank with
# NCCL, as test/gpu/run.sh does. For each model and M, every configuration must print the same
# hashes (docs/numerics.md, "TP invariance"). Sequence parallelism splits the tokens over the tp
# ranks, so tp-shard refuses an M that tp does not divide (tpc never pads): those configurations
# are counted as skipped, with the compiler's message (prepare_modules.sh records it).
#
# Then, where some world has more ranks than GPUs: the staged exact-numerics modules of
# build-gpu-carry/modules that need more GPUs than there are run with --share-gpus and must give the
# CPU backend's hashes (every collective kind, async starts, the fused norms); each shared world that
# passed (the GTP ones, the staged modules, mlp-m64-tp8) runs again with --graph (one CUDA graph of
# the whole world, replayed) and must print the same hashes, a module whose step cannot be captured
# (a host copy, named in its message) being counted as skipped; a rank failing a collective
# (TPRT_CUDA_FAULT), eagerly and in the captured step of a world graph, must end the shared world
# with its message, not hang.
#
# Prints a compact table, one row per model and M: "ref" is the row's reference (TP 1 without
# sequence parallelism, or the first configuration that ran if that one failed), "=" the same
# hashes as ref, DIFF or FAIL a failure, "skip" refused by the compiler; the cpu column compares
# ref with the CPU backend's TP 1 hashes (information only on the cuda backend: the invariant
# tensor-core kernels compute other bits than the CPU's exact kernels; with today's kernel table
# the examples' shapes run only exact kernels, so "=", and the -wide ones differ). Last line:
# "N passed, N failed" (one check per configuration that ran, per staged module, and per check of
# the last section).
#
# Usage: bash test/gpu/shared_gpu.sh [--gpus N] [--backend cuda|cpu] [--models REGEX]
#   --gpus N         use the first N visible GPUs (sets CUDA_VISIBLE_DEVICES); default: all. On a
#                    machine with several GPUs the default runs one GPU per rank wherever there are
#                    enough GPUs (the rest shared), and --gpus 1 checks the shared path throughout
#   --backend cpu    the same matrix on the CPU backend (checks this script where there is no GPU;
#                    the cpu column must then be "=" and counts as a check)
#   --models REGEX   only the models whose name matches (mlp, moe, mlp-wide, moe-wide, attn-wide)
# Environment: TPC_GPU_CARRY (default build-gpu-carry), OUT (if set, the log is copied there).
# Exit status: 0 when every check passed, 1 on a mismatch or failure, 77 no GPU (cuda), 2 usage.
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # house rule: NVLink multicast stays off on shared machines

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CARRY="${TPC_GPU_CARRY:-$ROOT/build-gpu-carry}"
BACKEND=cuda GPUS="" MODELS="."
while (( $# )); do
  case "$1" in
    --gpus) GPUS="${2:-}"; shift 2 || shift ;;
    --backend) BACKEND="${2:-}"; shift 2 || shift ;;
    --models) MODELS="${2:-}"; shift 2 || shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "shared_gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$BACKEND" == cuda || "$BACKEND" == cpu ]] || { echo "shared_gpu.sh: --backend takes cuda or cpu" >&2; exit 2; }
LIST="$CARRY/shared/list.txt"
if [[ ! -f "$LIST" ]]; then
  echo "== shared-GPU TP invariance: $CARRY/shared is not staged (run test/gpu/prepare_modules.sh on the MLIR machine)"
  exit 0
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/shared-gpu-XXXXXX")"
LOG="$WORK/log.txt"
export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
TPC_RUN="$CARRY/bin/tpc-run"

# Prints its arguments, one per line, and keeps them in the log.
say() { printf '%s\n' "$@" | tee -a "$LOG"; }

# The GPUs the ranks may use.
NGPU=0 DEVICE="" WHERE="CPU"
if [[ "$BACKEND" == cuda ]]; then
  visible=()
  if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
    IFS=',' read -r -a visible <<< "$CUDA_VISIBLE_DEVICES"
  else
    n=$(nvidia-smi -L 2> /dev/null | wc -l)
    for (( i = 0; i < n; ++i )); do visible+=("$i"); done
  fi
  if [[ -n "$GPUS" ]]; then
    if ! [[ "$GPUS" =~ ^[1-9][0-9]*$ ]] || (( GPUS > ${#visible[@]} )); then
      echo "shared_gpu.sh: --gpus '$GPUS': ${#visible[@]} GPU(s) visible" >&2
      exit 2
    fi
    visible=("${visible[@]:0:GPUS}")
  fi
  NGPU=${#visible[@]}
  (( NGPU > 0 )) || { echo "shared_gpu.sh: no GPU visible (nvidia-smi -L lists none)"; exit 77; }
  CUDA_VISIBLE_DEVICES="$(IFS=','; echo "${visible[*]}")"
  export CUDA_VISIBLE_DEVICES
  DEVICE="$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${visible[0]}" 2> /dev/null | head -n 1)"
  WHERE="$NGPU GPU(s)${DEVICE:+, $DEVICE}"
fi

PASS=0 FAIL=0
RUN_ENV=()  # extra environment of the next run_module
GRAPHS=()   # "tag module ranks" of the shared worlds that passed, run again with --graph at the end

# Runs tpc-run on |module| (a world of |ranks|) with --seed 7 --hash and the extra arguments:
# stdout without NCCL's lines in $WORK/<tag>.out, stderr in $WORK/<tag>.err; sets RC, and MODE
# (how the ranks sit on the GPUs: cpu, 1/gpu, shared).
run_module() {
  local tag="$1" module="$2" ranks="$3"
  shift 3
  local flags=()
  if [[ "$BACKEND" == cpu ]]; then
    MODE="cpu"
  elif (( ranks > NGPU )); then
    flags=(--backend cuda --share-gpus) MODE="shared"
  else
    flags=(--backend cuda) MODE="1/gpu"
  fi
  env TPRT_COLLECTIVE_TIMEOUT_S="${TPRT_COLLECTIVE_TIMEOUT_S:-120}" "${RUN_ENV[@]}" timeout 300 "$TPC_RUN" "$module" \
    --seed 7 --hash "${flags[@]}" "$@" > "$WORK/$tag.all" 2> "$WORK/$tag.err"
  RC=$?
  grep -v '^NCCL' "$WORK/$tag.all" > "$WORK/$tag.out"
}

#===------------------------------------------------------------------------===#
# The TP-invariance matrix
#===------------------------------------------------------------------------===#

CONFIGS=("1 off" "2 off" "4 off" "8 off" "1 on" "2 on" "4 on" "8 on")
declare -A FILE REASON SEEN
ROWS=()  # "model M", in the list's order
while read -r model m tp sp file reason; do
  [[ "$model" =~ $MODELS ]] || continue
  if [[ -z "${SEEN["$model $m"]:-}" ]]; then SEEN["$model $m"]=1; ROWS+=("$model $m"); fi
  FILE["$model $m $tp $sp"]="$file"
  REASON["$model $m $tp $sp"]="$reason"
done < "$LIST"

say "== TP invariance, $BACKEND backend, $WHERE ($(date -u +%Y-%m-%d))" \
  "   one training step in invariant numerics (hashes of y and every gradient) per model and M tokens, at" \
  "   tp 1/2/4/8 without and with sequence parallelism (sp); worlds of more ranks than GPUs share them (--share-gpus)" ""
FORMAT='%-9s %4s  %-4s %-4s %-4s %-4s  %-5s %-5s %-5s %-5s  %-4s %s'
# shellcheck disable=SC2059
say "$(printf "$FORMAT" model M tp1 tp2 tp4 tp8 tp1sp tp2sp tp4sp tp8sp cpu "y hash (ref)")"
SKIPS=() DETAILS=()
for row in "${ROWS[@]}"; do
  read -r model m <<< "$row"
  ref="" refhash="" cells=()
  for c in "${CONFIGS[@]}"; do
    read -r tp sp <<< "$c"
    k="$row $tp $sp" tag="$model-m$m-tp$tp-$sp"
    file="${FILE[$k]:-}"
    if [[ -z "$file" ]]; then
      cells+=("n/a")  # not staged (an older build-gpu-carry)
    elif [[ "$file" == - ]]; then
      cells+=("skip")
      SKIPS+=("$model M=$m tp=$tp sp=$sp: ${REASON[$k]}")
    else
      run_module "$tag" "$CARRY/shared/$file" "$tp"
      if (( RC != 0 )) || [[ ! -s "$WORK/$tag.out" ]]; then
        cells+=("FAIL")
        FAIL=$((FAIL + 1))
        DETAILS+=("-- $model M=$m tp=$tp sp=$sp ($MODE): tpc-run exit $RC" "$(tail -n 4 "$WORK/$tag.err")")
      elif [[ -z "$ref" ]]; then
        ref="$tag" refhash="$(awk '$1 == "y" {print $4}' "$WORK/$tag.out")"
        cells+=("ref")
        PASS=$((PASS + 1))
      elif cmp -s "$WORK/$tag.out" "$WORK/$ref.out"; then
        cells+=("=")
        PASS=$((PASS + 1))
      else
        cells+=("DIFF")
        FAIL=$((FAIL + 1))
        DETAILS+=("-- $model M=$m tp=$tp sp=$sp ($MODE) differs from $ref in: $(diff "$WORK/$ref.out" "$WORK/$tag.out" |
          awk '/^>/ {printf "%s ", $2}')")
      fi
    fi
  done
  cpu="-"
  if [[ -n "$ref" && -f "$CARRY/shared/$model-m$m.cpu" ]]; then
    if cmp -s "$WORK/$ref.out" "$CARRY/shared/$model-m$m.cpu"; then cpu="="; else cpu="!="; fi
    if [[ "$BACKEND" == cpu && "$cpu" == "=" ]]; then
      PASS=$((PASS + 1))
    elif [[ "$BACKEND" == cpu ]]; then  # the same backend must reproduce the staged hashes
      FAIL=$((FAIL + 1))
      DETAILS+=("-- $model M=$m: the CPU backend's hashes differ from the staged $model-m$m.cpu")
    fi
  fi
  # shellcheck disable=SC2059
  say "$(printf "$FORMAT" "$model" "$m" "${cells[@]}" "$cpu" "${refhash:--}")"
done
say "(=: the ref's hashes; DIFF, FAIL: failures; skip: refused by tp-shard; cpu: ref vs the CPU backend's TP 1 hashes)"
if (( ${#SKIPS[@]} )); then
  say "skipped ${#SKIPS[@]} configurations that tp-shard refuses (sequence parallelism needs tp to divide M; heads must split over tp), e.g." \
    "  ${SKIPS[0]}"
fi
if (( ${#DETAILS[@]} )); then say "${DETAILS[@]}"; fi

#===------------------------------------------------------------------------===#
# GTP: weights sharded over gtp (tp-gtp) must not change a bit of the TP = 1 training step
#===------------------------------------------------------------------------===#

if [[ -f "$CARRY/shared/gtp_list.txt" ]]; then
  say "" "== GTP (weights sharded over gtp, gathered before use; gradients in either form, +scatter: reduce-scattered) vs the tp1 ref above"
  while read -r model m mesh file; do
    [[ "$model" =~ $MODELS ]] || continue
    ref="$WORK/$model-m$m-tp1-off.out" tag="gtp-$model-m$m-${mesh//[=,+]/-}"
    ranks=1
    for part in ${mesh//[,+]/ }; do [[ $part == *=* ]] && ranks=$(( ranks * ${part#*=} )); done
    run_module "$tag" "$CARRY/shared/$file" "$ranks"
    if (( RC == 0 )) && [[ -s "$WORK/$tag.out" && -f "$ref" ]] && cmp -s "$WORK/$tag.out" "$ref"; then
      PASS=$((PASS + 1))
      [[ "$MODE" == shared ]] && GRAPHS+=("$tag $CARRY/shared/$file $ranks")
      say "$(printf '%-9s %4s  %-18s %2s ranks %-6s =' "$model" "$m" "$mesh" "$ranks" "$MODE")"
    else
      FAIL=$((FAIL + 1))
      say "$(printf '%-9s %4s  %-18s %2s ranks %-6s FAIL (exit %s)' "$model" "$m" "$mesh" "$ranks" "$MODE" "$RC")" \
        "$(tail -n 3 "$WORK/$tag.err")"
      [[ -f "$ref" ]] && say "$(diff "$ref" "$WORK/$tag.out" | head -n 6)"
    fi
  done < "$CARRY/shared/gtp_list.txt"
fi

#===------------------------------------------------------------------------===#
# Shared worlds: every collective against the CPU's bits, as CUDA graphs, failures end the world
#===------------------------------------------------------------------------===#

# The world size of a compiled module: the product of its first mesh's shape, from the module's
# tpc_module_info JSON string (docs/runtime.md, "Compiled modules").
world_of() {
  python3 - "$1" << 'EOF'
import json, sys
data = open(sys.argv[1], "rb").read()
start = data.find(b'{"abi"')
info = json.loads(data[start:data.index(b"\0", start)]) if start >= 0 else {}
size = 1
for d in (info.get("meshes") or [{"shape": [1]}])[0]["shape"]:
    size *= d
print(size)
EOF
}

if [[ -f "$CARRY/modules/list.txt" ]] && { [[ "$BACKEND" == cpu ]] || (( NGPU < 8 )); }; then
  say "" "== staged exact-numerics modules (build-gpu-carry/modules) vs the CPU backend's hashes, ranks sharing GPUs" \
    "   (those whose world fits one GPU per rank are test/gpu/run.sh's)"
  while read -r name; do
    [[ -f "$CARRY/modules/$name.so" ]] || continue
    ranks=$(world_of "$CARRY/modules/$name.so")
    if [[ "$BACKEND" == cuda ]] && (( ranks <= NGPU )); then continue; fi
    run_module "mod-$name" "$CARRY/modules/$name.so" "$ranks"
    if (( RC == 0 )) && cmp -s "$WORK/mod-$name.out" "$CARRY/modules/$name.expected"; then
      PASS=$((PASS + 1))
      [[ "$MODE" == shared ]] && GRAPHS+=("mod-$name $CARRY/modules/$name.so $ranks")
      say "$(printf '%-20s %2s ranks %-6s pass  %s' "$name" "$ranks" "$MODE" "$(head -n 1 "$WORK/mod-$name.out")")"
    else
      FAIL=$((FAIL + 1))
      say "$(printf '%-20s %2s ranks %-6s FAIL  exit %s' "$name" "$ranks" "$MODE" "$RC")" \
        "$(tail -n 3 "$WORK/mod-$name.err")" "$(diff "$WORK/mod-$name.out" "$CARRY/modules/$name.expected" | head -n 6)"
    fi
  done < "$CARRY/modules/list.txt"
fi

# Each shared world that passed, as one CUDA graph of the world (tpc-run --graph: a first step, one
# captured, then replays): the same hashes. A step that cannot be captured (an op copying to the
# host, such as the exact grouped wgrad's group sizes) fails with its message: skipped.
SHARED_MODULE="$CARRY/shared/mlp-m64-tp8.so"
if [[ "$BACKEND" == cuda && -f "$SHARED_MODULE" ]] && (( NGPU < 8 )); then
  run_module mlp-m64-tp8 "$SHARED_MODULE" 8
  (( RC == 0 )) && GRAPHS+=("mlp-m64-tp8 $SHARED_MODULE 8")
fi
if [[ "$BACKEND" == cuda ]] && (( ${#GRAPHS[@]} )); then
  say "" "== shared worlds as one CUDA graph (--graph --repeat 3) vs their eager hashes above"
  for entry in "${GRAPHS[@]}"; do
    read -r tag module ranks <<< "$entry"
    run_module "$tag-graph" "$module" "$ranks" --graph --repeat 3
    if (( RC == 0 )) && [[ -s "$WORK/$tag-graph.out" ]] && cmp -s "$WORK/$tag-graph.out" "$WORK/$tag.out"; then
      PASS=$((PASS + 1))
      say "$(printf '%-34s %2s ranks graph =' "$tag" "$ranks")"
    elif grep -q -- "--graph: .*\(during CUDA graph capture\|a CUDA graph cannot capture\)" "$WORK/$tag-graph.err"; then
      say "$(printf '%-34s %2s ranks graph skip (%s)' "$tag" "$ranks" \
        "$(grep -o -- '--graph: [^,;(]*' "$WORK/$tag-graph.err" | head -n 1)")"
    else
      FAIL=$((FAIL + 1))
      say "$(printf '%-34s %2s ranks graph FAIL (exit %s)' "$tag" "$ranks" "$RC")" "$(tail -n 3 "$WORK/$tag-graph.err")" \
        "$(diff "$WORK/$tag.out" "$WORK/$tag-graph.out" | head -n 6)"
    fi
  done
fi

# A rank failing its 3rd collective ends the shared world with the injected fault's message (exit 1)
# instead of hanging (124); also as a CUDA graph of the world, failing in the captured step.
if [[ "$BACKEND" == cuda && -f "$SHARED_MODULE" ]] && (( NGPU < 8 )); then
  say "" "== shared world (mlp-m64-tp8, 8 ranks on $NGPU GPU(s)): a failing rank ends the world"
  t0=$(date +%s)
  RUN_ENV=(TPRT_CUDA_FAULT=1:3 TPRT_COLLECTIVE_TIMEOUT_S=60)
  run_module fault "$SHARED_MODULE" 8 --repeat 3
  RUN_ENV=()
  if (( RC == 1 )) && grep -q "injected fault" "$WORK/fault.err"; then
    PASS=$((PASS + 1))
    say "failing rank: pass (exit $RC after $(( $(date +%s) - t0 )) s: $(grep -o 'injected fault[^)]*)' "$WORK/fault.err" | head -n 1))"
  else
    FAIL=$((FAIL + 1))
    say "failing rank: FAIL (exit $RC after $(( $(date +%s) - t0 )) s)" "$(tail -n 3 "$WORK/fault.err")"
  fi
  # The same in the captured step of the world graph (--graph): rank 1 fails the 2nd collective after
  # the first step's (its calls per step from the CPU backend's --stats), and rank 0 must end the
  # capture so that the world ends instead of waiting in it.
  calls=$("$TPC_RUN" "$SHARED_MODULE" --seed 7 --stats 2> /dev/null |
    awk '$1 == "stats:" && $2 == 1 && $4 ~ /^[0-9]+$/ { n += $4 } END { print n + 0 }')
  t0=$(date +%s)
  RUN_ENV=(TPRT_CUDA_FAULT=1:$((calls + 2)) TPRT_COLLECTIVE_TIMEOUT_S=60)
  run_module fault-graph "$SHARED_MODULE" 8 --graph --repeat 3
  RUN_ENV=()
  if (( calls > 1 && RC == 1 )) && grep -q "injected fault" "$WORK/fault-graph.err"; then
    PASS=$((PASS + 1))
    say "failing rank in the captured step: pass (exit $RC after $(( $(date +%s) - t0 )) s: $(grep -o 'injected fault[^)]*)' "$WORK/fault-graph.err" | head -n 1))"
  else
    FAIL=$((FAIL + 1))
    say "failing rank in the captured step: FAIL ($calls calls per step; exit $RC after $(( $(date +%s) - t0 )) s)" \
      "$(tail -n 3 "$WORK/fault-graph.err")"
  fi
fi

say "" "$PASS passed, $FAIL failed"
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$LOG" "$OUT/shared_gpu.txt"; fi
rm -rf "$WORK"
exit $(( FAIL > 0 ))
