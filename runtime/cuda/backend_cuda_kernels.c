// The CUDA backend's kernel table: each row runs a CUDA launcher of tprt_cuda_kernels.h on the
// calling rank's compute stream; the backend's entry points (backend_cuda_calls.c) describe a call
// and hand it to tprt__contract here.
//
// The contractions (dense and grouped linears, their gradients, the fused grouped MLP, attention
// and its gradient) and the GLU and its gradient have
// several implementations; which one runs is decided by ONE table, tprt__contraction_kernels
// below: for an op, the module's numerics (tp.numerics, given to configure), the device's
// compute capability and the call's dtypes and shapes, the first row that matches wins. A new
// kernel is one row plus its file. TPRT_CUDA_KERNELS=1 prints each choice once to stderr
// ("tprt cuda: linear [fast, sm_90, bf16] -> cuBLASLt matmul (linear_fast.c)"). Every op has an
// exact row last, for any numerics: the exact kernels are also TP- and batch-invariant, so they
// serve invariant mode until a tensor-core invariant kernel has a row, and fast-mode calls that
// no faster kernel fits (f32 operands, odd alignment). In invariant mode the dense contractions
// run the chunk-tree tensor-core GEMMs where the chunk length allows (a multiple of 64); whether a
// call fits depends only on its logical problem, never on M or the TP degree.
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_impl.h"
#include "backend_cuda_table.h"
#include "gemm/tprt_cuda_skinny.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

// The world's tp.numerics (configure runs once, before any rank starts; exact by default).
int tprt__numerics = TPRT__EXACT;

static const char* tprt__numerics_name(int mode) {
  return mode == TPRT__FAST ? "fast" : mode == TPRT__INVARIANT ? "invariant" : "exact";
}

tprt_status_t tprt__cuda_configure(const char* numerics) {
  if (!numerics || strcmp(numerics, "exact") == 0) {
    tprt__numerics = TPRT__EXACT;
  } else if (strcmp(numerics, "fast") == 0) {
    tprt__numerics = TPRT__FAST;
  } else if (strcmp(numerics, "invariant") == 0) {
    tprt__numerics = TPRT__INVARIANT;
  } else {
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "the cuda backend knows numerics fast, invariant and exact, not '%s'", numerics);
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// The contraction table
//===----------------------------------------------------------------------===//

static const char* const tprt__op_names[] = {
    "linear",         "linear_dgrad",         "linear_dgrad_acc",     "linear_wgrad",         "linear_wgrad_acc",
    "bias_grad",
    "grouped_linear", "grouped_linear_dgrad", "grouped_linear_wgrad", "fused_grouped_mlp",
    "attention",      "attention_grad",       "glu",                  "glu_grad",             "rmsnorm",
    "add_rmsnorm",    "layernorm",      "rmsnorm_grad",         "layernorm_grad",       "sumsq"};


/// A row: |run| serves |op| in the |numerics| modes on devices of compute capability
/// [min_sm, max_sm] (0: no bound) for the calls |fits| accepts (NULL: every call; the kernel
/// validates and reports bad input). |dtypes| and |kernel| are for the reader and the trace.
typedef struct {
  tprt__op_t op;
  unsigned numerics;
  int min_sm, max_sm;
  const char* dtypes;
  bool (*fits)(const tprt__call_t*);
  tprt_status_t (*run)(const tprt__call_t*);
  const char* kernel;
} tprt__row_t;

// The cuBLASLt context of the calling rank, created on first use.
static tprt_status_t tprt__lt(tprt_cuda_lt_t** out) {
  if (!tprt__r.lt.handle) TPRT__TRY(tprt_cuda_lt_create(&tprt__r.lt));
  *out = &tprt__r.lt;
  return NULL;
}

// Fast mode: cuBLASLt (linear_fast.c).
static bool tprt__lt_linear_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_fast_fits(c->a, c->b, c->bias, c->out);
}
static tprt_status_t tprt__lt_linear(const tprt__call_t* c) {
  tprt_cuda_lt_t* lt;
  TPRT__TRY(tprt__lt(&lt));
  return tprt_cuda_linear_fast(c->a, c->b, c->bias, c->out, lt, tprt__r.stream);
}
// Fast mode, a few rows (a decoding step): the weight streamed once (linear_skinny.cu).
static bool tprt__skinny_linear_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_skinny_fits(c->a, c->b, c->bias, c->out);
}
static tprt_status_t tprt__skinny_linear(const tprt__call_t* c) {
  return tprt_cuda_linear_skinny(c->a, c->b, c->bias, c->out, tprt__r.stream);
}
static bool tprt__lt_dgrad_fits(const tprt__call_t* c) { return tprt_cuda_linear_dgrad_fast_fits(c->a, c->b, c->out); }
static tprt_status_t tprt__lt_dgrad(const tprt__call_t* c) {
  tprt_cuda_lt_t* lt;
  TPRT__TRY(tprt__lt(&lt));
  return tprt_cuda_linear_dgrad_fast(c->a, c->b, c->out, lt, tprt__r.stream);
}
static bool tprt__lt_dgrad_acc_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_dgrad_acc_fast_fits(c->a, c->b, c->acc, c->out);
}
static tprt_status_t tprt__lt_dgrad_acc(const tprt__call_t* c) {
  tprt_cuda_lt_t* lt;
  TPRT__TRY(tprt__lt(&lt));
  return tprt_cuda_linear_dgrad_acc_fast(c->a, c->b, c->acc, c->out, lt, tprt__r.stream);
}
// dx = acc + dy·w where no row fuses the add: the table's dgrad into dx, then dx + acc in place
// (dx never overlaps acc: the arena keeps an op's inputs live through it), tprt_cuda_add's bits.
static tprt_status_t tprt__dgrad_then_add(const tprt__call_t* c) {
  tprt_status_t s = tprt_cpu_check_acc("linear_dgrad", c->acc, c->out);
  if (!s) s = tprt__cuda_linear_dgrad_segmented(c->a, c->b, c->out, c->chunks, c->segments, c->blocks);
  if (!s) s = tprt_cuda_add(c->out, c->acc, c->out, tprt__r.stream);
  return s;
}
static bool tprt__lt_wgrad_fits(const tprt__call_t* c) { return tprt_cuda_linear_wgrad_fast_fits(c->a, c->b, c->out); }
static tprt_status_t tprt__lt_wgrad(const tprt__call_t* c) {
  tprt_cuda_lt_t* lt;
  TPRT__TRY(tprt__lt(&lt));
  return tprt_cuda_linear_wgrad_fast(c->a, c->b, c->out, lt, tprt__r.stream);
}
static bool tprt__lt_wgrad_acc_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_wgrad_acc_fast_fits(c->a, c->b, c->out);
}
static tprt_status_t tprt__lt_wgrad_acc(const tprt__call_t* c) {
  tprt_cuda_lt_t* lt;
  TPRT__TRY(tprt__lt(&lt));
  return tprt_cuda_linear_wgrad_acc_fast(c->a, c->b, c->out, lt, tprt__r.stream);
}
// dw += dyᵀ·x where no row accumulates: the table's wgrad (one chunk) into a stream-ordered
// temporary, then dw + it.
static tprt_status_t tprt__wgrad_then_add(const tprt__call_t* c) {
  tprt_tensor_t part = *c->out;
  cudaError_t e = tprt__cuda_malloc_async(&part.data, tprt_tensor_bytes(c->out) + 16, tprt__r.stream);
  if (e != cudaSuccess) return tprt__cuda_make_status(e, "linear_wgrad accumulate temporary", __FILE__, __LINE__);
  tprt_status_t s = tprt__cuda_linear_wgrad(c->a, c->b, &part, 1);
  if (!s) s = tprt_cuda_add(c->out, &part, c->out, tprt__r.stream);
  tprt__cuda_free_async(part.data, tprt__r.stream);
  return s;
}
static bool tprt__lt_bias_grad_fits(const tprt__call_t* c) { return tprt_cuda_bias_grad_fast_fits(c->a, c->out); }
static tprt_status_t tprt__lt_bias_grad(const tprt__call_t* c) {
  tprt_cuda_lt_t* lt;
  TPRT__TRY(tprt__lt(&lt));
  return tprt_cuda_bias_grad_fast(c->a, c->out, lt, tprt__r.stream);
}

// Fast mode: CUTLASS grouped GEMM (grouped_fast.cu).
static bool tprt__cutlass_grouped_fits(const tprt__call_t* c) {
  return tprt_cuda_grouped_fast_fits(c->a, c->b, c->group_sizes, c->out, 0);
}
static tprt_status_t tprt__cutlass_grouped(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_fast(c->a, c->b, c->group_sizes, c->out, tprt__r.stream);
}
static bool tprt__cutlass_grouped_dgrad_fits(const tprt__call_t* c) {
  return tprt_cuda_grouped_fast_fits(c->a, c->b, c->group_sizes, c->out, 1);
}
static tprt_status_t tprt__cutlass_grouped_dgrad(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_dgrad_fast(c->a, c->b, c->group_sizes, c->out, tprt__r.stream);
}
static bool tprt__cutlass_grouped_wgrad_fits(const tprt__call_t* c) {
  return tprt_cuda_grouped_fast_fits(c->a, c->b, c->group_sizes, c->out, 2);
}
static tprt_status_t tprt__cutlass_grouped_wgrad(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_wgrad_fast(c->a, c->b, c->group_sizes, c->out, tprt__r.stream);
}
static bool tprt__cutlass_mlp_fits(const tprt__call_t* c);
static tprt_status_t tprt__cutlass_mlp(const tprt__call_t* c) {
  return tprt_cuda_fused_grouped_mlp_fast(c->a, c->b, c->w2, c->group_sizes, c->out, c->kind, c->interleave, c->alpha,
                                          c->limit, tprt__r.stream);
}

static bool tprt__mlp_fits(const tprt__call_t* c, bool invariant);
static bool tprt__cutlass_mlp_fits(const tprt__call_t* c) { return tprt__mlp_fits(c, false); }

// Invariant mode: the chunk-tree GEMMs on tensor cores (invariant_linear.cu).
static bool tprt__inv_linear_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_invariant_fits(c->a, c->b, c->bias, c->out, c->chunks);
}
static tprt_status_t tprt__inv_linear(const tprt__call_t* c) {
  return tprt_cuda_linear_invariant(c->a, c->b, c->bias, c->out, c->chunks, tprt__r.stream);
}
static bool tprt__inv_dgrad_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_dgrad_invariant_fits(c->a, c->b, c->out, c->chunks);
}
static tprt_status_t tprt__inv_dgrad(const tprt__call_t* c) {
  return tprt_cuda_linear_dgrad_invariant(c->a, c->b, c->out, c->chunks, c->segments, c->blocks, tprt__r.stream);
}
static bool tprt__inv_wgrad_fits(const tprt__call_t* c) {
  return tprt_cuda_linear_wgrad_invariant_fits(c->a, c->b, c->out, c->chunks);
}
static tprt_status_t tprt__inv_wgrad(const tprt__call_t* c) {
  return tprt_cuda_linear_wgrad_invariant(c->a, c->b, c->out, c->chunks, tprt__r.stream);
}

// Invariant mode: the grouped chunk-tree GEMMs (grouped_fast.cu, grouped_invariant.cuh).
static bool tprt__inv_grouped_fits(const tprt__call_t* c) {
  return tprt_cuda_grouped_invariant_fits(c->a, c->b, c->group_sizes, c->out, 0, c->chunks);
}
static tprt_status_t tprt__inv_grouped(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_invariant(c->a, c->b, c->group_sizes, c->out, c->chunks, tprt__r.stream);
}
static bool tprt__inv_grouped_dgrad_fits(const tprt__call_t* c) {
  return tprt_cuda_grouped_invariant_fits(c->a, c->b, c->group_sizes, c->out, 1, c->chunks);
}
static tprt_status_t tprt__inv_grouped_dgrad(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_dgrad_invariant(c->a, c->b, c->group_sizes, c->out, c->chunks, c->segments, c->blocks,
                                                  tprt__r.stream);
}
static bool tprt__inv_grouped_wgrad_fits(const tprt__call_t* c) {
  return tprt_cuda_grouped_invariant_fits(c->a, c->b, c->group_sizes, c->out, 2, c->chunks);
}
static tprt_status_t tprt__inv_grouped_wgrad(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_wgrad_invariant(c->a, c->b, c->group_sizes, c->out, tprt__r.stream);
}
// Both GEMMs of the MLP fit the grouped kind |fits| (0: fast; else invariant with the call's
// chunks): x[T,H]·w1[E,2F,H]ᵀ -> [T,2F], then [T,F]·w2[E,H,F]ᵀ -> y (the intermediates are fresh
// allocations, aligned).
static bool tprt__mlp_fits(const tprt__call_t* c, bool invariant) {
  const tprt_tensor_t *x = c->a, *w1 = c->b, *w2 = c->w2;
  if (!x || !w1 || !w2 || !c->out || x->rank != 2 || w1->rank != 3 || w2->rank != 3 || w1->dims[1] % 2 != 0)
    return false;
  int64_t t = x->dims[0], f = w1->dims[1] / 2;
  int64_t hd[2] = {t, 2 * f}, gd[2] = {t, f};
  tprt_tensor_t hidden = tprt_tensor_make(c->out->data, x->dtype, 2, hd),
                gated = tprt_tensor_make(c->out->data, x->dtype, 2, gd);
  if (c->out->dtype != x->dtype || f % 8 != 0) return false;
  if (invariant)
    return tprt_cuda_grouped_invariant_fits(x, w1, c->group_sizes, &hidden, 0, c->chunks) &&
           tprt_cuda_grouped_invariant_fits(&gated, w2, c->group_sizes, c->out, 0, c->chunks);
  return tprt_cuda_grouped_fast_fits(x, w1, c->group_sizes, &hidden, 0) &&
         tprt_cuda_grouped_fast_fits(&gated, w2, c->group_sizes, c->out, 0);
}
static bool tprt__inv_mlp_fits(const tprt__call_t* c) { return tprt__mlp_fits(c, true); }
static tprt_status_t tprt__inv_mlp(const tprt__call_t* c) {
  return tprt_cuda_fused_grouped_mlp_invariant(c->a, c->b, c->w2, c->group_sizes, c->out, c->kind, c->interleave,
                                               c->alpha, c->limit, c->chunks, tprt__r.stream);
}

// Every mode: the exact kernels (bitwise the CPU's; linear.cu, grouped_linear.cu, linear_grad.c,
// fused_mlp.c), which validate their input.
static tprt_status_t tprt__exact_linear(const tprt__call_t* c) {
  return tprt_cuda_linear(c->a, c->b, c->bias, c->out, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__exact_dgrad(const tprt__call_t* c) {
  return tprt_cuda_linear_dgrad_segmented(c->a, c->b, c->out, c->chunks, c->segments, c->blocks, tprt__r.stream);
}
static tprt_status_t tprt__exact_wgrad(const tprt__call_t* c) {
  return tprt_cuda_linear_wgrad(c->a, c->b, c->out, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__exact_bias_grad(const tprt__call_t* c) {
  return tprt_cuda_bias_grad(c->a, c->out, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__exact_grouped(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear(c->a, c->b, c->group_sizes, c->out, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__exact_grouped_dgrad(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_dgrad_segmented(c->a, c->b, c->group_sizes, c->out, c->chunks, c->segments, c->blocks,
                                                  tprt__r.stream);
}
static tprt_status_t tprt__exact_grouped_wgrad(const tprt__call_t* c) {
  return tprt_cuda_grouped_linear_wgrad(c->a, c->b, c->group_sizes, c->out, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__exact_mlp(const tprt__call_t* c) {
  return tprt_cuda_fused_grouped_mlp(c->a, c->b, c->w2, c->group_sizes, c->out, c->kind, c->interleave, c->alpha,
                                     c->limit, c->chunks, tprt__r.stream);
}

// Fast and invariant modes: the tensor-core attention (attention_tc_fwd.cu, attention_tc_bwd.cu).
static bool tprt__tc_attention_fits(const tprt__call_t* c) {
  return tprt_cuda_attention_tc_fits(c->a, c->b, c->c, c->cache, c->out, c->seq_len, c->head_dim);
}
static tprt_status_t tprt__tc_attention(const tprt__call_t* c) {
  return tprt_cuda_attention_tc(c->a, c->b, c->c, c->cache, c->out, c->out2, c->seq_len, c->head_dim, c->causal,
                                c->scale, tprt__r.stream);
}
static bool tprt__tc_attention_grad_fits(const tprt__call_t* c) {
  return tprt_cuda_attention_grad_tc_fits(c->a, c->b, c->c, c->d, c->e, c->out, c->out2, c->out3, c->seq_len,
                                          c->head_dim);
}
static tprt_status_t tprt__tc_attention_grad(const tprt__call_t* c) {
  return tprt_cuda_attention_grad_tc(c->a, c->b, c->c, c->d, c->e, c->lse, c->out, c->out2, c->out3, c->seq_len,
                                     c->head_dim, c->causal, c->scale, tprt__r.stream);
}
static tprt_status_t tprt__exact_attention(const tprt__call_t* c) {
  return tprt_cuda_attention(c->a, c->b, c->c, c->cache, c->out, c->out2, c->seq_len, c->head_dim, c->causal,
                             c->scale, tprt__r.stream);
}
static tprt_status_t tprt__exact_attention_grad(const tprt__call_t* c) {
  return tprt_cuda_attention_grad(c->a, c->b, c->c, c->d, c->e, c->lse, c->out, c->out2, c->out3, c->seq_len,
                                  c->head_dim, c->causal, c->scale, tprt__r.stream);
}

// Fast and invariant modes: the GLU with the hardware's approximate exponential and division
// (glu_fast.cuh). Elementwise, so invariant still: an element's bits depend only on its inputs and
// the GPU architecture, never on the batch, the mesh or the tiling. Exact mode: tprt_numerics.h's
// special functions, bitwise the CPU.
static tprt_status_t tprt__fast_glu(const tprt__call_t* c) {
  return tprt_cuda_glu_fast(c->a, c->out, c->kind, c->interleave, c->alpha, c->limit, tprt__r.stream);
}
static tprt_status_t tprt__exact_glu(const tprt__call_t* c) {
  return tprt_cuda_glu(c->a, c->out, c->kind, c->interleave, c->alpha, c->limit, tprt__r.stream);
}
static tprt_status_t tprt__fast_glu_grad(const tprt__call_t* c) {
  return tprt_cuda_glu_grad_fast(c->a, c->b, c->out, c->kind, c->interleave, c->alpha, c->limit, tprt__r.stream);
}
static tprt_status_t tprt__exact_glu_grad(const tprt__call_t* c) {
  return tprt_cuda_glu_grad(c->a, c->b, c->out, c->kind, c->interleave, c->alpha, c->limit, tprt__r.stream);
}

// The norms: one read of each row in fast numerics; the canonical row reduction (bitwise the CPU)
// otherwise, which the fused all-reduce + add + rmsnorm of tp-fuse reproduces in invariant numerics.
static tprt_status_t tprt__fast_rmsnorm(const tprt__call_t* c) {
  return tprt_cuda_rmsnorm_fast(c->a, c->b, c->out, c->scale, tprt__r.stream);
}
static tprt_status_t tprt__exact_rmsnorm(const tprt__call_t* c) {
  return tprt_cuda_rmsnorm(c->a, c->b, c->out, c->scale, tprt__r.stream);
}
// tp.add_rmsnorm (a = residual, c = y, b = gamma; out = normed, out2 = sum): the add and the
// norm's row kernel in one launch, the pair's bits in each mode.
static tprt_status_t tprt__fast_add_rmsnorm(const tprt__call_t* c) {
  return tprt_cuda_add_rmsnorm_fast(c->a, c->c, c->b, c->out, c->out2, c->scale, tprt__r.stream);
}
static tprt_status_t tprt__exact_add_rmsnorm(const tprt__call_t* c) {
  return tprt_cuda_add_rmsnorm(c->a, c->c, c->b, c->out, c->out2, c->scale, tprt__r.stream);
}
static tprt_status_t tprt__fast_layernorm(const tprt__call_t* c) {
  return tprt_cuda_layernorm_fast(c->a, c->b, c->c, c->out, c->scale, tprt__r.stream);
}
static tprt_status_t tprt__exact_layernorm(const tprt__call_t* c) {
  return tprt_cuda_layernorm(c->a, c->b, c->c, c->out, c->scale, tprt__r.stream);
}

// The norm gradients: dgamma over pieces of each chunk in fast and invariant modes (the order
// depends only on the chunk's length), one serial sum per chunk in exact mode (bitwise the CPU).
static tprt_status_t tprt__pieces_rmsnorm_grad(const tprt__call_t* c) {
  if (c->acc)
    return tprt_cuda_rmsnorm_grad_acc(c->a, c->b, c->c, c->acc, c->out, c->out2, c->scale, c->chunks, true,
                                      tprt__r.stream);
  return tprt_cuda_rmsnorm_grad_pieces(c->a, c->b, c->c, c->out, c->out2, c->scale, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__exact_rmsnorm_grad(const tprt__call_t* c) {
  if (c->acc)
    return tprt_cuda_rmsnorm_grad_acc(c->a, c->b, c->c, c->acc, c->out, c->out2, c->scale, c->chunks, false,
                                      tprt__r.stream);
  return tprt_cuda_rmsnorm_grad(c->a, c->b, c->c, c->out, c->out2, c->scale, c->chunks, tprt__r.stream);
}
static tprt_status_t tprt__pieces_layernorm_grad(const tprt__call_t* c) {
  return tprt_cuda_layernorm_grad_pieces(c->a, c->b, c->c, c->out, c->out2, c->out3, c->scale, c->chunks,
                                         tprt__r.stream);
}
static tprt_status_t tprt__exact_layernorm_grad(const tprt__call_t* c) {
  return tprt_cuda_layernorm_grad(c->a, c->b, c->c, c->out, c->out2, c->out3, c->scale, c->chunks, tprt__r.stream);
}

// The gradient norm's sum of squares: integer limbs, any layout the same bits, of the exact
// squares (exact numerics, bitwise the CPU) or of the squares cut to 24 bits (invariant); summed
// in f64 in fast numerics.
static tprt_status_t tprt__fast_sumsq(const tprt__call_t* c) {
  return tprt_cuda_sumsq_fast(c->a, c->b, c->out, c->count, tprt__r.stream);
}
static tprt_status_t tprt__cut_sumsq(const tprt__call_t* c) {
  return tprt_cuda_sumsq_cut(c->a, c->b, c->out, c->count, tprt__r.stream);
}
static tprt_status_t tprt__exact_sumsq(const tprt__call_t* c) {
  return tprt_cuda_sumsq(c->a, c->b, c->out, c->count, tprt__r.stream);
}

#define TPRT__EXACT_KERNEL "exact f32 fma chains on CUDA cores, bitwise the CPU"
// clang-format off
static const tprt__row_t tprt__contraction_kernels[] = {
  // op                          modes        sm       dtypes (a, b -> out)          fits                              run                          kernel (file)
  {TPRT__LINEAR,               TPRT__FAST,  80, 0,  "bf16/f16 -> same, M <= 2", tprt__skinny_linear_fits,       tprt__skinny_linear,         "skinny: the weight streamed once, f32 sums (linear_skinny.cu)"},
  {TPRT__LINEAR,               TPRT__FAST,  0,  0,  "bf16/f16 -> same or f32", tprt__lt_linear_fits,            tprt__lt_linear,             "cuBLASLt matmul, bias epilogue (linear_fast.c)"},
  {TPRT__LINEAR,               TPRT__INVARIANT, 90, 90, "bf16 -> bf16 or f32", tprt__inv_linear_fits,      tprt__inv_linear,            "chunk-tree WGMMA GEMM, bias epilogue (invariant_linear.cu)"},
  {TPRT__LINEAR,               TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_linear,          TPRT__EXACT_KERNEL " (linear.cu)"},
  {TPRT__LINEAR_DGRAD,         TPRT__FAST,  0,  0,  "bf16/f16 -> same or f32", tprt__lt_dgrad_fits,             tprt__lt_dgrad,              "cuBLASLt matmul (linear_fast.c)"},
  {TPRT__LINEAR_DGRAD,         TPRT__INVARIANT, 90, 90, "bf16 -> bf16 or f32", tprt__inv_dgrad_fits,       tprt__inv_dgrad,             "chunk-tree WGMMA GEMM on ordered operands (invariant_linear.cu)"},
  {TPRT__LINEAR_DGRAD,         TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_dgrad,           TPRT__EXACT_KERNEL " (linear_grad.c)"},
  {TPRT__LINEAR_DGRAD_ACC,     TPRT__FAST,  0,  0,  "bf16/f16 -> same or f32", tprt__lt_dgrad_acc_fits,         tprt__lt_dgrad_acc,          "cuBLASLt matmul, beta = 1 with C = acc (linear_fast.c)"},
  {TPRT__LINEAR_DGRAD_ACC,     TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__dgrad_then_add,        "the table's linear_dgrad, then add acc (the unfused bits)"},
  {TPRT__LINEAR_WGRAD,         TPRT__FAST,  0,  0,  "bf16/f16 -> same or f32", tprt__lt_wgrad_fits,             tprt__lt_wgrad,              "cuBLASLt matmul (linear_fast.c)"},
  {TPRT__LINEAR_WGRAD,         TPRT__INVARIANT, 90, 90, "bf16 -> bf16 or f32", tprt__inv_wgrad_fits,       tprt__inv_wgrad,             "chunk-tree WGMMA GEMM over tokens (invariant_linear.cu)"},
  {TPRT__LINEAR_WGRAD,         TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_wgrad,           TPRT__EXACT_KERNEL " (linear_grad.c)"},
  {TPRT__LINEAR_WGRAD_ACC,     TPRT__FAST,  0,  0,  "bf16/f16 -> f32",         tprt__lt_wgrad_acc_fits,         tprt__lt_wgrad_acc,          "cuBLASLt matmul, beta = 1 (linear_fast.c)"},
  {TPRT__LINEAR_WGRAD_ACC,     TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__wgrad_then_add,        "the table's linear_wgrad into a temporary, then add"},
  {TPRT__BIAS_GRAD,            TPRT__FAST,  0,  0,  "bf16/f16 -> same or f32", tprt__lt_bias_grad_fits,         tprt__lt_bias_grad,          "cuBLASLt GEMV with ones (linear_fast.c)"},
  {TPRT__BIAS_GRAD,            TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_bias_grad,       TPRT__EXACT_KERNEL " (linear_grad.c)"},
  {TPRT__GROUPED_LINEAR,       TPRT__FAST,  90, 90, "bf16 -> bf16 or f32",     tprt__cutlass_grouped_fits,      tprt__cutlass_grouped,       "CUTLASS sm90 grouped GEMM, TMA + WGMMA (grouped_fast.cu)"},
  {TPRT__GROUPED_LINEAR,       TPRT__INVARIANT, 90, 90, "bf16 -> bf16 or f32", tprt__inv_grouped_fits,   tprt__inv_grouped,           "chunk-tree WGMMA grouped GEMM (grouped_fast.cu)"},
  {TPRT__GROUPED_LINEAR,       TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_grouped,         TPRT__EXACT_KERNEL " (grouped_linear.cu)"},
  {TPRT__GROUPED_LINEAR_DGRAD, TPRT__FAST,  90, 90, "bf16 -> bf16 or f32",     tprt__cutlass_grouped_dgrad_fits, tprt__cutlass_grouped_dgrad, "CUTLASS sm90 grouped GEMM, TMA + WGMMA (grouped_fast.cu)"},
  {TPRT__GROUPED_LINEAR_DGRAD, TPRT__INVARIANT, 90, 90, "bf16 -> bf16 or f32", tprt__inv_grouped_dgrad_fits, tprt__inv_grouped_dgrad, "chunk-tree WGMMA grouped GEMM on ordered operands (grouped_fast.cu)"},
  {TPRT__GROUPED_LINEAR_DGRAD, TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_grouped_dgrad,   TPRT__EXACT_KERNEL " (linear_grad.c)"},
  {TPRT__GROUPED_LINEAR_WGRAD, TPRT__FAST,  90, 90, "bf16 -> bf16 or f32",     tprt__cutlass_grouped_wgrad_fits, tprt__cutlass_grouped_wgrad, "CUTLASS sm90 grouped GEMM, K = rows (grouped_fast.cu)"},
  {TPRT__GROUPED_LINEAR_WGRAD, TPRT__INVARIANT, 90, 90, "bf16 -> bf16 or f32", tprt__inv_grouped_wgrad_fits, tprt__inv_grouped_wgrad, "WGMMA grouped GEMM, one chunk over an expert's rows (grouped_fast.cu)"},
  {TPRT__GROUPED_LINEAR_WGRAD, TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_grouped_wgrad,   TPRT__EXACT_KERNEL " (linear_grad.c)"},
  {TPRT__FUSED_GROUPED_MLP,    TPRT__FAST,  90, 90, "bf16",                    tprt__cutlass_mlp_fits,          tprt__cutlass_mlp,           "CUTLASS grouped GEMM, GLU, CUTLASS grouped GEMM (fused_mlp.c)"},
  {TPRT__FUSED_GROUPED_MLP,    TPRT__INVARIANT, 90, 90, "bf16",          tprt__inv_mlp_fits,              tprt__inv_mlp,               "invariant grouped GEMM, GLU, invariant grouped GEMM (fused_mlp.c)"},
  {TPRT__FUSED_GROUPED_MLP,    TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_mlp,             TPRT__EXACT_KERNEL " (fused_mlp.c)"},
  {TPRT__ATTENTION,            TPRT__FAST | TPRT__INVARIANT, 90, 90, "bf16/f16, D 64/128", tprt__tc_attention_fits, tprt__tc_attention, "WGMMA flash attention, fixed 128-token blocks (attention_tc_fwd.cu)"},
  {TPRT__ATTENTION,            TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_attention,       TPRT__EXACT_KERNEL " (attention.cu)"},
  {TPRT__ATTENTION_GRAD,       TPRT__FAST | TPRT__INVARIANT, 90, 90, "bf16/f16, D 64/128", tprt__tc_attention_grad_fits, tprt__tc_attention_grad, "WGMMA flash attention backward, deterministic (attention_tc_bwd.cu)"},
  {TPRT__ATTENTION_GRAD,       TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_attention_grad,  TPRT__EXACT_KERNEL " (attention.cu)"},
  {TPRT__GLU,                  TPRT__FAST | TPRT__INVARIANT, 0, 0, "bf16/f16/f32", NULL,                   tprt__fast_glu,              "__expf and __fdividef, 16-byte runs (glu.cu, glu_fast.cuh)"},
  {TPRT__GLU,                  TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_glu,             "tprt_numerics.h's exp and IEEE division, bitwise the CPU (glu.cu)"},
  {TPRT__GLU_GRAD,             TPRT__FAST | TPRT__INVARIANT, 0, 0, "bf16/f16/f32", NULL,                   tprt__fast_glu_grad,         "__expf and __fdividef, 16-byte runs (glu_grad.cu, glu_fast.cuh)"},
  {TPRT__GLU_GRAD,             TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_glu_grad,        "tprt_numerics.h's exp and IEEE division, bitwise the CPU (glu_grad.cu)"},
  {TPRT__RMSNORM,              TPRT__FAST,  0,  0,  "bf16/f16/f32",            NULL,                            tprt__fast_rmsnorm,          "one read of each row, 16-byte runs, rsqrtf (norm.cu)"},
  {TPRT__RMSNORM,              TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_rmsnorm,         "canonical row reduction, bitwise the CPU (norm.cu)"},
  {TPRT__ADD_RMSNORM,          TPRT__FAST,  0,  0,  "bf16/f16/f32",            NULL,                            tprt__fast_add_rmsnorm,      "the fast rmsnorm of the rounded sum, one launch (norm.cu)"},
  {TPRT__ADD_RMSNORM,          TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_add_rmsnorm,     "canonical rmsnorm of the rounded sum, bitwise the CPU (norm.cu)"},
  {TPRT__LAYERNORM,            TPRT__FAST,  0,  0,  "bf16/f16/f32",            NULL,                            tprt__fast_layernorm,        "one read of each row, 16-byte runs, rsqrtf (norm.cu)"},
  {TPRT__LAYERNORM,            TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_layernorm,       "canonical row reduction, bitwise the CPU (norm.cu)"},
  {TPRT__RMSNORM_GRAD,         TPRT__FAST | TPRT__INVARIANT, 0, 0, "bf16/f16/f32", NULL,                   tprt__pieces_rmsnorm_grad,   "one read of each row; dgamma in pieces of 16 rows of each chunk (norm_grad.cu)"},
  {TPRT__RMSNORM_GRAD,         TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_rmsnorm_grad,    "dgamma one serial sum per chunk, bitwise the CPU (norm_grad.cu)"},
  {TPRT__LAYERNORM_GRAD,       TPRT__FAST | TPRT__INVARIANT, 0, 0, "bf16/f16/f32", NULL,                   tprt__pieces_layernorm_grad, "one read of each row; dgamma, dbeta in pieces of 16 rows (norm_grad.cu)"},
  {TPRT__LAYERNORM_GRAD,       TPRT__ANY,   0,  0,  "bf16/f16/f32",            NULL,                            tprt__exact_layernorm_grad,  "dgamma, dbeta one serial sum per chunk, bitwise the CPU (norm_grad.cu)"},
  {TPRT__SUMSQ,                TPRT__FAST,  0,  0,  "bf16/f16/f32 -> i64",     NULL,                            tprt__fast_sumsq,            "f64 sums, one launch (optim.cu)"},
  {TPRT__SUMSQ,                TPRT__INVARIANT, 0, 0, "bf16/f16/f32 -> i64",   NULL,                            tprt__cut_sumsq,             "squares cut to 24 bits, exact integer limbs (optim.cu)"},
  {TPRT__SUMSQ,                TPRT__ANY,   0,  0,  "bf16/f16/f32 -> i64",     NULL,                            tprt__exact_sumsq,           "exact integer limbs, bitwise the CPU (optim.cu)"},
};
// clang-format on
#define TPRT__NUM_ROWS ((int)(sizeof tprt__contraction_kernels / sizeof tprt__contraction_kernels[0]))

// TPRT_CUDA_KERNELS=1: each row's first use is printed once per process.
static atomic_bool tprt__traced[TPRT__NUM_ROWS];

static bool tprt__trace_on(void) {
  static int on = -1;  // benign race: every thread computes the same value
  if (on < 0) {
    const char* v = getenv("TPRT_CUDA_KERNELS");
    on = v && *v && strcmp(v, "0") != 0;
  }
  return on;
}

// TPRT_CUDA_SKIP=file[,file...]: rows whose kernel lives in one of those files (the name in the
// row's parentheses, e.g. linear_skinny.cu) are passed over, so that a kernel can be compared
// with the row after it in one process or ruled out when hunting a fault. Read once per row.
static atomic_int tprt__skip_state[TPRT__NUM_ROWS];  // 0 not yet read, 1 used, 2 skipped

static bool tprt__skipped(int i) {
  int st = atomic_load(&tprt__skip_state[i]);
  if (st) return st == 2;
  const char* list = getenv("TPRT_CUDA_SKIP");
  const char* file = strrchr(tprt__contraction_kernels[i].kernel, '(');
  bool skip = false;
  if (list && *list && file) {
    ++file;
    const size_t flen = strcspn(file, ")");
    for (const char* p = list; *p;) {
      const size_t len = strcspn(p, ",");
      if (len == flen && strncmp(p, file, len) == 0) skip = true;
      p += len;
      if (*p == ',') ++p;
    }
  }
  atomic_store(&tprt__skip_state[i], skip ? 2 : 1);
  return skip;
}

/// Runs the first row of the table that serves |op| for this world's numerics, this device and
/// this call.
tprt_status_t tprt__contract(tprt__op_t op, const tprt__call_t* call) {
  TPRT__TRY(tprt__need_rank());
  for (int i = 0; i < TPRT__NUM_ROWS; ++i) {
    const tprt__row_t* row = &tprt__contraction_kernels[i];
    if (row->op != op || !(row->numerics & (unsigned)tprt__numerics)) continue;
    if ((row->min_sm && tprt__r.sm < row->min_sm) || (row->max_sm && tprt__r.sm > row->max_sm)) continue;
    if (row->fits && !row->fits(call)) continue;
    if (tprt__skipped(i)) continue;
    if (tprt__trace_on() && !atomic_exchange(&tprt__traced[i], true))
      fprintf(stderr, "tprt cuda: %s [%s, sm_%d, %s] -> %s\n", tprt__op_names[op], tprt__numerics_name(tprt__numerics),
              tprt__r.sm, call->a ? tprt_dtype_name(call->a->dtype) : "?", row->kernel);
    int t = tprt__timeline_begin(tprt__r.stream, op >= TPRT__GLU ? TPRT__IV_OP : TPRT__IV_CONTRACTION,
                                 op >= TPRT__GLU ? tprt__op_names[op] : row->kernel,
                                 call->out ? (int64_t)tprt_tensor_numel(call->out) : 0);
    tprt_status_t s = row->run(call);
    tprt__timeline_end(tprt__r.stream, t);
    return s;
  }
  return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "the cuda backend has no %s kernel for numerics %s on sm_%d",
                          tprt__op_names[op], tprt__numerics_name(tprt__numerics), tprt__r.sm);
}
