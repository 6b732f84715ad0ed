#!/usr/bin/env bash
# Runs HERE (the MLIR machine) before a GPU run: compiles the example modules ahead of time for
# world sizes 1, 2 and 4 in exact numerics (the GPU machine has no MLIR), records the CPU
# backend's hashes of each, and stages everything test/gpu/run.sh needs to run them with
# `tpc-run --backend cuda` into build-gpu-carry/, packed as build-gpu-carry.tar.xz (carry that
# file to the GPU machine; run.sh unpacks it):
#   bin/tpc-run, lib/libtprt.so, lib/libtprt_backend_cuda.so, lib/libcjson.so.1,
#   modules/<name>.so, modules/<name>.expected (the CPU hashes), modules/list.txt.
# Usage: bash test/gpu/prepare_modules.sh [build-dir]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="$ROOT/build-gpu-carry"
cd "$ROOT"
ninja -C "$BUILD" tpc-run tpc-compile tprt_backend_cuda tprt-bench-collectives tprt-cuda-check tprt-cuda-check-fast \
  tprt-bench-gemm tprt-bench-linear tprt-bench-attention tprt-fused-norm-check > /dev/null
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/modules"
# The kernel checkers and benchmarks are built here for sm_90a (CUTLASS's templates compile in
# minutes; the GPU machine then spends its time running, not compiling).
cp "$BUILD/bin/tpc-run" "$BUILD/bin/tprt-bench-collectives" "$BUILD/bin/tprt-cuda-check" \
  "$BUILD/bin/tprt-cuda-check-fast" "$BUILD/bin/tprt-bench-gemm" "$BUILD/bin/tprt-bench-linear" \
  "$BUILD/bin/tprt-bench-attention" "$BUILD/bin/tprt-fused-norm-check" "$OUT/bin/"
cp "$BUILD/lib/libtprt.so" "$BUILD/lib/libtprt_backend_cuda.so" "$OUT/lib/"
cp "$(ldconfig -p | awk '/libcjson.so.1 /{print $NF; exit}')" "$OUT/lib/"
# A 2-block Llama-style stack: tp-fuse makes its first block's end a fused norm, in exact numerics
# with sum_type = "residual" (run.sh runs it with the fused kernel too).
python3 tools/gen_stack.py --layers 2 --block llama --hidden 256 --ffn 512 --tokens 16 > "$OUT/modules/llama2.mlir"

# name | module | compile flags (after the pipeline's)
CONFIGS=(
  "mlp-tp1|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=1"
  "mlp-tp2|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=2"
  "mlp-tp4|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=4"
  "mlp-sp-tp2|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=2 --sequence-parallel"
  "mlp-sp-tp4|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=4 --sequence-parallel"
  "mlp-train-tp1|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=1"
  "mlp-train-tp2|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=2"
  "mlp-train-tp4|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=4"
  "mlp-train-sp-tp4|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=4 --sequence-parallel"
  "wide-tp1|test/e2e/Inputs/mlp_f32_wide.mlir|--pipeline=infer --mesh=tp=1"
  "wide-tp4|test/e2e/Inputs/mlp_f32_wide.mlir|--pipeline=infer --mesh=tp=4"
  "moe-tp1|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=1"
  "moe-tp2|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=2"
  "moe-tp4|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=4"
  "moe-ep2|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=2"
  "moe-ep4|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=4"
  "moe-ep2-tp2|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=2,tp=2"
  "moe-train-tp2|docs/examples/moe.mlir|--pipeline=train --mesh=tp=2"
  # GTP (tp-gtp): weights sharded over gtp, all-gathered before use (blocked gathers of the stride-2
  # FC1 shard), gradients reduce-scattered, beside dp and tp.
  "mlp-train-gtp2|docs/examples/mlp.mlir|--pipeline=train --mesh=gtp=2"
  "mlp-train-gtp2-tp2|docs/examples/mlp.mlir|--pipeline=train --mesh=gtp=2,tp=2"
  "mlp-train-dp2-gtp2|docs/examples/mlp.mlir|--pipeline=train --mesh=dp=2,gtp=2"
  "mlp-train-gtp4-keep|docs/examples/mlp.mlir|--pipeline=train --mesh=gtp=4 --gtp-keep"
  "moe-gtp2-tp2|docs/examples/moe.mlir|--pipeline=infer --mesh=gtp=2,tp=2"
  "attn-tp1|test/e2e/Inputs/attention_block.mlir|--pipeline=infer --mesh=tp=1"
  "attn-tp2|test/e2e/Inputs/attention_block.mlir|--pipeline=infer --mesh=tp=2"
  "attn-train-tp2|test/e2e/Inputs/attention_block.mlir|--pipeline=train --mesh=tp=2"
  "attn-full-train-tp1|test/e2e/Inputs/attention_block_full.mlir|--pipeline=train --mesh=tp=1"
  # Hand-written per-rank modules, lowered as written (lower-cpu, as test/e2e/collectives.test
  # does; their meshes fix the world): the fused collective + add + RMSNorm ops at world sizes 4
  # and 2, async starts overlapping compute with reduce-scatter along dim 1, all_gather_start.
  "fused-norm-tp4|test/e2e/Inputs/fused_norm.mlir|--pipeline=lower-cpu"
  "fused-norm-tp2|test/e2e/Inputs/fused_norm_tp2.mlir|--pipeline=lower-cpu"
  # The fused op's algorithm attribute set to one_shot: the kernel without TPRT_CUDA_FUSED_NORM.
  "fused-norm-tp2-one-shot|test/e2e/Inputs/fused_norm_tp2.mlir|--pipeline=lower-cpu --fused-norm-algorithm=one-shot"
  # ... and two_shot: rows reduced by their owners, then sent to every member.
  "fused-norm-tp4-two-shot|test/e2e/Inputs/fused_norm.mlir|--pipeline=lower-cpu --fused-norm-algorithm=two-shot"
  # The quantizing form (mxfp8, fp8 and nvfp4 with an amax, each beside its unfused chain), one-shot
  # and two-shot, and tp-fuse folding a norm's mxfp8 quantize into it at TP 2.
  "fused-norm-quant-tp2|test/e2e/Inputs/fused_norm_quant.mlir|--pipeline=lower-cpu"
  "fused-norm-quant-tp2-two-shot|test/e2e/Inputs/fused_norm_quant.mlir|--pipeline=lower-cpu --fused-norm-algorithm=two-shot"
  "fuse-mxfp8-tp2|test/e2e/Inputs/mlp_norm_mxfp8.mlir|--pipeline=infer --mesh=tp=2"
  # tp-fuse's fused norms with sum_type = "residual" (exact numerics), forward and training step.
  "fuse-llama-tp2|$OUT/modules/llama2.mlir|--pipeline=infer --mesh=tp=2"
  "fuse-llama-train-tp4|$OUT/modules/llama2.mlir|--pipeline=train --mesh=tp=4"
  "fuse-llama-train-tp4-two-shot|$OUT/modules/llama2.mlir|--pipeline=train --mesh=tp=4 --fused-norm-algorithm=two-shot"
  "async-rs-dim1-tp4|test/e2e/Inputs/async_collectives.mlir|--pipeline=lower-cpu"
  "collectives-tp4|test/e2e/Inputs/collectives.mlir|--pipeline=lower-cpu"
  # World size 8 (issue #7; skipped on machines with fewer GPUs).
  "mlp-tp8|docs/examples/mlp.mlir|--pipeline=infer --mesh=tp=8"
  "mlp-train-sp-tp8|docs/examples/mlp.mlir|--pipeline=train --mesh=tp=8 --sequence-parallel"
  "moe-tp8|docs/examples/moe.mlir|--pipeline=infer --mesh=tp=8"
  "moe-ep8|docs/examples/moe.mlir|--pipeline=infer --mesh=ep=8"
)
: > "$OUT/modules/list.txt"
for c in "${CONFIGS[@]}"; do
  IFS='|' read -r name src flags <<< "$c"
  # shellcheck disable=SC2086
  "$BUILD/bin/tpc-compile" "$src" -o "$OUT/modules/$name.so" --numerics=exact $flags
  "$BUILD/bin/tpc-run" "$OUT/modules/$name.so" --seed 7 --hash 2> /dev/null > "$OUT/modules/$name.expected"
  echo "$name" >> "$OUT/modules/list.txt"
done
# The TP-invariance matrix of test/gpu/shared_gpu.sh: the example blocks (and "-wide" versions,
# every dimension but the tokens and experts x4 (MLP) or x8 (MoE), so that invariant mode's
# tensor-core GEMMs run on the GPU) with M tokens, one training step (output and every gradient) in invariant numerics at
# TP 1/2/4/8 with and without sequence parallelism. shared/list.txt has one line per configuration,
# "model M tp sp module.so", or "model M tp sp - reason" where tp-shard refuses it (sequence
# parallelism splits the M tokens over tp ranks: M must be divisible by tp; tpc never pads);
# shared/<model>-m<M>.cpu holds the CPU backend's hashes at TP 1 (shown for comparison: the GPU's
# invariant tensor-core kernels compute other bits than the CPU's exact ones).
SHARED="$OUT/shared" VARIANTS="$OUT/shared/src"
mkdir -p "$SHARED" "$VARIANTS"
: > "$SHARED/list.txt"
for model in mlp moe mlp-wide moe-wide; do
  for m in 1 7 64 257; do
    python3 - "docs/examples/${model%-wide}.mlir" "$m" "$model" > "$VARIANTS/$model-m$m.mlir" <<'PYVARIANT'
import re, sys
src, m, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(src).read()
t = int(re.search(r"%x: tensor<(\d+)x", text).group(1))  # the tokens (16)
k = re.search(r"top_k = (\d+)", text)
sizes = {t: m}
if k:  # a MoE block's permuted rows: tokens x top_k
    sizes[t * int(k.group(1))] = m * int(k.group(1))
if model.endswith("-wide"):  # hidden and FFN sizes (64 and up; experts 8, top_k 2 stay): x4 for the
    # MLP, x8 for the MoE, so that every expert GEMM's chunk (K / tp.chunks) is a multiple of 64
    f = 8 if model.startswith("moe") else 4
    sizes.update({d: f * d for d in (64, 128, 256, 512)})
dims = lambda g: "tensor<" + "x".join(str(sizes.get(int(d), int(d))) if d.isdigit() else d
                                      for d in g.group(1).split("x")) + ">"
print(re.sub(r"tensor<([0-9a-z]+(?:x[0-9a-z]+)*)>", dims, text), end="")
PYVARIANT
    "$BUILD/bin/tpc-compile" "$VARIANTS/$model-m$m.mlir" -o "$SHARED/ref.so" --pipeline=train --mesh=tp=1 \
      --numerics=invariant
    "$BUILD/bin/tpc-run" "$SHARED/ref.so" --seed 7 --hash 2> /dev/null > "$SHARED/$model-m$m.cpu"
    for sp in off on; do
      for tp in 1 2 4 8; do
        name="$model-m$m-tp$tp" flags=(--pipeline=train --mesh=tp=$tp --numerics=invariant)
        if [[ $sp == on ]]; then name+="-sp" flags+=(--sequence-parallel); fi
        if "$BUILD/bin/tpc-compile" "$VARIANTS/$model-m$m.mlir" -o "$SHARED/$name.so" "${flags[@]}" 2> "$SHARED/err"; then
          echo "$model $m $tp $sp $name.so" >> "$SHARED/list.txt"
        elif [[ $sp == on ]] && (( m % tp != 0 )) && grep -q "is not divisible by" "$SHARED/err"; then
          echo "$model $m $tp $sp - tp-shard: $(grep -o 'dimension 0 (size [0-9]*) is not divisible by .*' "$SHARED/err")" \
            >> "$SHARED/list.txt"
        else
          cat "$SHARED/err" >&2; exit 1
        fi
      done
    done
  done
done
# The GTP matrix of shared_gpu.sh (shared/gtp_list.txt, "model M mesh module.so"): the MLP
# blocks' training step in invariant numerics with weights sharded over gtp, compared there with
# the TP = 1 row of the matrix above.
: > "$SHARED/gtp_list.txt"
for model in mlp mlp-wide; do
  python3 - "docs/examples/mlp.mlir" 64 "$model" > "$VARIANTS/$model-m64.mlir" <<'PYVARIANT'
import re, sys
src, m, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(src).read()
sizes = {16: m}
if model.endswith("-wide"):
    sizes.update({d: 4 * d for d in (64, 128, 256, 512)})
dims = lambda g: "tensor<" + "x".join(str(sizes.get(int(d), int(d))) if d.isdigit() else d
                                      for d in g.group(1).split("x")) + ">"
print(re.sub(r"tensor<([0-9a-z]+(?:x[0-9a-z]+)*)>", dims, text), end="")
PYVARIANT
  # (At 64 tokens tp-gtp's cost model gives every weight gradient the gather form; +scatter
  # compiles the reduce-scatter form.)
  for mesh in gtp=2 gtp=2,tp=2 gtp=4 dp=2,gtp=2 gtp=2,tp=4 gtp=2,tp=2+sp gtp=2,tp=2+scatter dp=2,gtp=2+scatter; do
    name="$model-m64-${mesh//[=,+]/-}" flags=(--pipeline=train --mesh="${mesh%+*}" --numerics=invariant)
    if [[ $mesh == *+sp ]]; then flags+=(--sequence-parallel); fi
    if [[ $mesh == *+scatter ]]; then flags+=(--gtp-wgrad=scatter); fi
    "$BUILD/bin/tpc-compile" "$VARIANTS/$model-m64.mlir" -o "$SHARED/$name.so" "${flags[@]}"
    echo "$model 64 $mesh $name.so" >> "$SHARED/gtp_list.txt"
  done
done
# The MoE blocks (the variants of the matrix above): the grouped expert weights' gradients in the
# gather form over gtp (each gtp rank's rows one segment), reduce-scattered with +scatter, and
# beside dp (tp-invariant gathers every rank's rows).
for model in moe moe-wide; do
  for mesh in gtp=2 gtp=2,tp=2 gtp=4 gtp=2,tp=2+scatter dp=2,gtp=2; do
    name="$model-m64-${mesh//[=,+]/-}" flags=(--pipeline=train --mesh="${mesh%+*}" --numerics=invariant)
    if [[ $mesh == *+scatter ]]; then flags+=(--gtp-wgrad=scatter); fi
    "$BUILD/bin/tpc-compile" "$VARIANTS/$model-m64.mlir" -o "$SHARED/$name.so" "${flags[@]}"
    echo "$model 64 $mesh $name.so" >> "$SHARED/gtp_list.txt"
  done
done
# The attention block at the tensor-core attention's sizes (2 sequences of 200 tokens, head_dim 64):
# TP 1/2/4 with and without sequence parallelism; tp-shard refuses TP 8 (4 key/value heads).
"$BUILD/bin/tpc-compile" test/gpu/attention_block_wide.mlir -o "$SHARED/ref.so" --pipeline=train --mesh=tp=1 \
  --numerics=invariant
"$BUILD/bin/tpc-run" "$SHARED/ref.so" --seed 7 --hash 2> /dev/null > "$SHARED/attn-wide-m400.cpu"
for sp in off on; do
  for tp in 1 2 4 8; do
    name="attn-wide-m400-tp$tp" flags=(--pipeline=train --mesh=tp=$tp --numerics=invariant)
    if [[ $sp == on ]]; then name+="-sp" flags+=(--sequence-parallel); fi
    if "$BUILD/bin/tpc-compile" test/gpu/attention_block_wide.mlir -o "$SHARED/$name.so" "${flags[@]}" 2> "$SHARED/err"; then
      echo "attn-wide 400 $tp $sp $name.so" >> "$SHARED/list.txt"
    elif (( tp == 8 )) && grep -q "cannot be split evenly" "$SHARED/err"; then
      echo "attn-wide 400 $tp $sp - tp-shard: $(grep -o '[0-9]* heads cannot be split evenly.*' "$SHARED/err")" \
        >> "$SHARED/list.txt"
    else
      cat "$SHARED/err" >&2; exit 1
    fi
  done
done
rm -rf "$SHARED/ref.so" "$SHARED/err" "$VARIANTS"

# Step-time benchmark modules (TPC_GPU_BENCH=1 test/gpu/run.sh): a Llama-3-8B-like MLP block at
# TP 1, 2, 4 in fast (cuBLASLt + NCCL) and exact (exact kernels + canonical collectives) numerics.
mkdir -p "$OUT/bench"
: > "$OUT/bench/list.txt"
for tp in 1 2 4; do
  for mode in fast exact; do
    "$BUILD/bin/tpc-compile" tools/bench/llama8b_mlp.mlir -o "$OUT/bench/mlp8b-tp$tp-$mode.so" --pipeline=infer \
      --mesh=tp=$tp --numerics=$mode
    echo "mlp8b-tp$tp-$mode $tp $mode" >> "$OUT/bench/list.txt"
  done
done
# Training steps (forward + backward) of the same block at TP 1 in each numerics.
for mode in fast invariant exact; do
  "$BUILD/bin/tpc-compile" tools/bench/llama8b_mlp.mlir -o "$OUT/bench/mlp8b-train-tp1-$mode.so" --pipeline=train \
    --mesh=tp=1 --numerics=$mode
  echo "mlp8b-train-tp1-$mode 1 $mode train" >> "$OUT/bench/list.txt"
done
# MoE block training steps (Mixtral-8x7B-like, tools/bench/mixtral_moe.mlir) at TP 1 in each
# numerics, with their own list ("name mode") and PyTorch peer (test/gpu/bench_moe_peer.py).
: > "$OUT/bench/moe_list.txt"
for mode in fast invariant exact; do
  "$BUILD/bin/tpc-compile" tools/bench/mixtral_moe.mlir -o "$OUT/bench/moe-train-tp1-$mode.so" --pipeline=train \
    --mesh=tp=1 --numerics=$mode
  echo "moe-train-tp1-$mode $mode" >> "$OUT/bench/moe_list.txt"
done
cp test/gpu/bench_moe_peer.py "$OUT/bench/"
# GTP overlap (tools/bench/gtp.py, 2 or 4 GPUs), 4096 tokens per rank: one rank alone (ref), dp = 2,
# and gtp = 2 and 4 with each gather just before its use (naive), with tp-gtp's prefetch, with it
# and every weight gradient reduce-scattered (scatter), and kept for the backward, in fast and
# invariant numerics. gtp_stack NAME DESCRIPTION GEN_STACK_ARGS...
gtp_stack() {
  local name="$1" what="$2" c="$BUILD/bin/tpc-compile" g
  shift 2
  python3 tools/gen_stack.py "$@" --tokens 4096 > "$OUT/bench/$name-1.mlir"
  for g in 2 4; do python3 tools/gen_stack.py "$@" --tokens $((4096 * g)) > "$OUT/bench/$name-$g.mlir"; done
  echo "$what, 4096 tokens per rank" > "$OUT/bench/$name.txt"
  for mode in fast invariant; do
    "$c" "$OUT/bench/$name-1.mlir" -o "$OUT/bench/$name-ref-$mode.so" --pipeline=train --mesh=tp=1 --numerics=$mode
    "$c" "$OUT/bench/$name-2.mlir" -o "$OUT/bench/$name-dp2-$mode.so" --pipeline=train --mesh=dp=2 --numerics=$mode
    for g in 2 4; do
      "$c" "$OUT/bench/$name-$g.mlir" -o "$OUT/bench/$name-gtp$g-naive-$mode.so" --pipeline=train --mesh=gtp=$g \
        --numerics=$mode --gtp-prefetch=0
      "$c" "$OUT/bench/$name-$g.mlir" -o "$OUT/bench/$name-gtp$g-$mode.so" --pipeline=train --mesh=gtp=$g \
        --numerics=$mode
      "$c" "$OUT/bench/$name-$g.mlir" -o "$OUT/bench/$name-gtp$g-scatter-$mode.so" --pipeline=train --mesh=gtp=$g \
        --numerics=$mode --gtp-wgrad=scatter
      "$c" "$OUT/bench/$name-$g.mlir" -o "$OUT/bench/$name-gtp$g-keep-$mode.so" --pipeline=train --mesh=gtp=$g \
        --numerics=$mode --gtp-keep
    done
  done
  rm "$OUT/bench/$name"-[124].mlir
}
gtp_stack gtp8b "4 Llama-3-8B-width MLP blocks (H 4096, F 14336)" --layers 4 --block llama --hidden 4096 --ffn 14336
# gtp.py --stack gtpmoe: the grouped expert weights are gathered whole per layer.
gtp_stack gtpmoe "2 Mixtral-8x7B-width MoE blocks (H 4096, 8 experts of F 14336, top 2)" --layers 2 --kind moe \
  --block llama --hidden 4096 --ffn 14336 --experts 8 --top-k 2
# Communication/compute overlap (4 ranks): the same gather + linear, sync vs async (comm stream).
for v in sync async; do
  "$BUILD/bin/tpc-compile" tools/bench/overlap_$v.mlir -o "$OUT/bench/overlap-$v.so" --numerics=fast
done
cp test/gpu/bench_mlp_peer.py "$OUT/bench/"
# The decoder-stack benchmark (tools/bench/llama_stack.py): the 1B-class Llama config's 16 decoder
# layers, one sequence of 4096 tokens, exported by the PyTorch frontend (third_party/pyenv, which
# tools/setup.sh makes; without it the benchmark is not staged), forward and training step, fast
# and invariant, and a decoding step.
if [[ -x third_party/pyenv/bin/python ]]; then
  PYTHONPATH=frontend third_party/pyenv/bin/python -m tpc_torch.export tools/bench/llama1b_config.json --batch 1 \
    --seq-len 4096 -o "$OUT/bench/llama1b.mlir" > /dev/null
  for pipeline in infer train; do
    for mode in fast invariant; do
      "$BUILD/bin/tpc-compile" "$OUT/bench/llama1b.mlir" -o "$OUT/bench/llama1b-$pipeline-$mode.so" \
        --pipeline=$pipeline --mesh=tp=1 --numerics=$mode
    done
  done
  rm "$OUT/bench/llama1b.mlir"
  # Its decoding step: one token after 4095 cached ones (KV caches of 4096 rows); the caches are
  # drawn by tpc-run --seed, cache_len = [4095] comes from an inputs file.
  PYTHONPATH=frontend third_party/pyenv/bin/python -m tpc_torch.export tools/bench/llama1b_config.json --batch 1 \
    --seq-len 1 --kv-cache 4096 -o "$OUT/bench/llama1b-decode.mlir" > /dev/null
  for mode in fast invariant; do
    "$BUILD/bin/tpc-compile" "$OUT/bench/llama1b-decode.mlir" -o "$OUT/bench/llama1b-decode-$mode.so" \
      --pipeline=infer --mesh=tp=1 --numerics=$mode
  done
  rm "$OUT/bench/llama1b-decode.mlir"
  third_party/pyenv/bin/python -c "import torch, sys; from safetensors.torch import save_file; \
    save_file({'cache_len': torch.tensor([4095], dtype=torch.int32)}, sys.argv[1])" \
    "$OUT/bench/llama1b-decode-inputs.safetensors"
  # The frontend's check against PyTorch (test/gpu/frontend_check.py): Llama layers at head_dim 64
  # (the tensor-core attention's) over 2 sequences of 256 tokens, inference and training; Mixtral's
  # inference over 2 sequences of 16 tokens (as test/frontend checks it: over hundreds of tokens
  # some top-2 choices are near ties that any two bf16 runs break differently, PyTorch's own bf16
  # against f32 included, and its expert gradients would not fit the device tool's 64 MiB carry);
  # fast and invariant, TP 1/2.
  PYTHONPATH=frontend third_party/pyenv/bin/python -m tpc_torch.check llama-tiny --seq-len 256 --tp 1 2 --train \
    --stage "$OUT/frontend/llama" --tpc-compile "$BUILD/bin/tpc-compile" > /dev/null
  PYTHONPATH=frontend third_party/pyenv/bin/python -m tpc_torch.check mixtral-tiny --tp 1 2 \
    --stage "$OUT/frontend/mixtral" --tpc-compile "$BUILD/bin/tpc-compile" > /dev/null
  # A decoding step of the Llama layers: one token after 200 cached ones (KV caches of 256 rows),
  # its caches filled from PyTorch's run (tensor-core attention with a cache in fast/invariant).
  PYTHONPATH=frontend third_party/pyenv/bin/python -m tpc_torch.check llama-tiny --seq-len 1 --kv-cache 256 \
    --past 200 --tp 1 2 --stage "$OUT/frontend/llama-decode" --tpc-compile "$BUILD/bin/tpc-compile" > /dev/null
else
  echo "prepare_modules.sh: third_party/pyenv missing: the decoder-stack benchmark and the frontend check" \
    "are not staged" >&2
fi
# Debug information stays here (the GPU machine needs none), and the whole stage travels as one
# compressed archive (the device tool carries at most 64 MiB): carry build-gpu-carry.tar.xz, and
# test/gpu/run.sh unpacks it where build-gpu-carry/ is missing.
strip --strip-debug "$OUT"/bin/* "$OUT"/lib/*.so* 2> /dev/null || true
tar -C "$ROOT" -cJf "$ROOT/build-gpu-carry.tar.xz" build-gpu-carry
echo "staged $(wc -l < "$OUT/modules/list.txt") modules and the runtime in $OUT ($(du -sh "$OUT" | cut -f1));" \
  "carry $ROOT/build-gpu-carry.tar.xz ($(du -sh "$ROOT/build-gpu-carry.tar.xz" | cut -f1))"
