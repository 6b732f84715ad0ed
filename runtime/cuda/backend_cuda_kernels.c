// The kernels of the CUDA backend's table (tprt_backend.h): each entry runs a CUDA launcher of
// tprt_cuda_kernels.h on the calling rank's compute stream.
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
#include "gemm/tprt_cuda_skinny.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

/// The numerics modes, as bits of a row's mask.
enum { TPRT__FAST = 1, TPRT__INVARIANT = 2, TPRT__EXACT = 4, TPRT__ANY = 7 };

// The world's tp.numerics (configure runs once, before any rank starts; exact by default).
static int tprt__numerics = TPRT__EXACT;

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

/// The contractions with a choice of kernel.
typedef enum {
  TPRT__LINEAR,
  TPRT__LINEAR_DGRAD,
  TPRT__LINEAR_DGRAD_ACC,
  TPRT__LINEAR_WGRAD,
  TPRT__LINEAR_WGRAD_ACC,
  TPRT__BIAS_GRAD,
  TPRT__GROUPED_LINEAR,
  TPRT__GROUPED_LINEAR_DGRAD,
  TPRT__GROUPED_LINEAR_WGRAD,
  TPRT__FUSED_GROUPED_MLP,
  TPRT__ATTENTION,
  TPRT__ATTENTION_GRAD,
  TPRT__GLU,
  TPRT__GLU_GRAD,
  TPRT__RMSNORM,
  TPRT__ADD_RMSNORM,
  TPRT__LAYERNORM,
  TPRT__RMSNORM_GRAD,
  TPRT__LAYERNORM_GRAD,
  TPRT__SUMSQ,
} tprt__op_t;

static const char* const tprt__op_names[] = {
    "linear",         "linear_dgrad",         "linear_dgrad_acc",     "linear_wgrad",         "linear_wgrad_acc",
    "bias_grad",
    "grouped_linear", "grouped_linear_dgrad", "grouped_linear_wgrad", "fused_grouped_mlp",
    "attention",      "attention_grad",       "glu",                  "glu_grad",             "rmsnorm",
    "add_rmsnorm",    "layernorm",      "rmsnorm_grad",         "layernorm_grad",       "sumsq"};

/// One call of a contraction, whichever op: its tensors (in the op's order; unused ones NULL) and
/// parameters. a, b: x and w (forward), dy and w (dgrad), dy and x (wgrad), dy (bias_grad), x and
/// w1 (fused MLP, with w2); q, k, v (attention: c = v), with y and dy (attention_grad: d, e) and
/// out, out2, out3 = dq, dk, dv; attention's optional lse is out2; x, gamma, dy (norm gradients:
/// a, b, c) with out, out2, out3 = dx, dgamma, dbeta and eps in scale; g, acc (sumsq: a, b) and
/// out = acc_out. |acc|: the accumulating forms' addend of out (linear_dgrad_acc, the norm
/// gradients' optional acc), NULL otherwise.
typedef struct {
  const tprt_tensor_t *a, *b, *bias, *group_sizes, *w2, *c, *d, *e, *acc;
  const tprt_kv_cache_t* cache;  // attention's KV cache, NULL without one
  const tprt_tensor_t* lse;      // attention_grad's statistics from the forward, NULL without them
  tprt_tensor_t *out, *out2, *out3;
  int64_t seq_len, head_dim;
  bool causal;
  float scale;
  int chunks, segments, blocks;
  int kind;
  int64_t interleave;
  float alpha, limit;
  bool count;  // sumsq: count g's squares (else out is the incoming accumulator b)
} tprt__call_t;

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

/// Runs the first row of the table that serves |op| for this world's numerics, this device and
/// this call.
static tprt_status_t tprt__contract(tprt__op_t op, const tprt__call_t* call) {
  TPRT__TRY(tprt__need_rank());
  for (int i = 0; i < TPRT__NUM_ROWS; ++i) {
    const tprt__row_t* row = &tprt__contraction_kernels[i];
    if (row->op != op || !(row->numerics & (unsigned)tprt__numerics)) continue;
    if ((row->min_sm && tprt__r.sm < row->min_sm) || (row->max_sm && tprt__r.sm > row->max_sm)) continue;
    if (row->fits && !row->fits(call)) continue;
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

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

tprt_status_t tprt__cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                tprt_tensor_t* y, int chunks) {
  tprt__call_t c = {.a = x, .b = w, .bias = bias, .out = y, .chunks = chunks};
  return tprt__contract(TPRT__LINEAR, &c);
}
tprt_status_t tprt__cuda_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                        const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks) {
  tprt__call_t c = {.a = x, .b = w, .group_sizes = group_sizes, .out = y, .chunks = chunks};
  return tprt__contract(TPRT__GROUPED_LINEAR, &c);
}
tprt_status_t tprt__cuda_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                                int chunks, int segments, int blocks) {
  tprt__call_t c = {.a = dy, .b = w, .out = dx, .chunks = chunks, .segments = segments, .blocks = blocks};
  return tprt__contract(TPRT__LINEAR_DGRAD, &c);
}
tprt_status_t tprt__cuda_linear_dgrad_acc(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                          tprt_tensor_t* dx, int chunks, int segments, int blocks) {
  tprt__call_t c = {.a = dy, .b = w, .acc = acc, .out = dx, .chunks = chunks, .segments = segments, .blocks = blocks};
  return tprt__contract(TPRT__LINEAR_DGRAD_ACC, &c);
}
tprt_status_t tprt__cuda_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks) {
  tprt__call_t c = {.a = dy, .b = x, .out = dw, .chunks = chunks};
  return tprt__contract(TPRT__LINEAR_WGRAD, &c);
}
tprt_status_t tprt__cuda_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks) {
  tprt__call_t c = {.a = dy, .out = db, .chunks = chunks};
  return tprt__contract(TPRT__BIAS_GRAD, &c);
}
tprt_status_t tprt__cuda_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                        const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                        int segments, int blocks) {
  tprt__call_t c = {
      .a = dy, .b = w, .group_sizes = group_sizes, .out = dx, .chunks = chunks, .segments = segments, .blocks = blocks};
  return tprt__contract(TPRT__GROUPED_LINEAR_DGRAD, &c);
}
tprt_status_t tprt__cuda_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                              const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks) {
  tprt__call_t c = {.a = dy, .b = x, .group_sizes = group_sizes, .out = dw, .chunks = chunks};
  return tprt__contract(TPRT__GROUPED_LINEAR_WGRAD, &c);
}
tprt_status_t tprt__cuda_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                           const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                           int64_t interleave, float alpha, float limit, int chunks) {
  tprt__call_t c = {.a = x,
                    .b = w1,
                    .w2 = w2,
                    .group_sizes = group_sizes,
                    .out = y,
                    .chunks = chunks,
                    .kind = kind,
                    .interleave = interleave,
                    .alpha = alpha,
                    .limit = limit};
  return tprt__contract(TPRT__FUSED_GROUPED_MLP, &c);
}

tprt_status_t tprt__cuda_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                             float limit) {
  tprt__call_t c = {.a = x, .out = y, .kind = kind, .interleave = interleave, .alpha = alpha, .limit = limit};
  return tprt__contract(TPRT__GLU, &c);
}

tprt_status_t tprt__cuda_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                  int64_t interleave, float alpha, float limit) {
  tprt__call_t c = {.a = x, .b = dy, .out = dx, .kind = kind, .interleave = interleave, .alpha = alpha, .limit = limit};
  return tprt__contract(TPRT__GLU_GRAD, &c);
}
tprt_status_t tprt__cuda_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps) {
  tprt__call_t c = {.a = x, .b = gamma, .out = y, .scale = eps};
  return tprt__contract(TPRT__RMSNORM, &c);
}
tprt_status_t tprt__cuda_add_rmsnorm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                     tprt_tensor_t* normed, tprt_tensor_t* sum, float eps) {
  tprt__call_t c = {.a = residual, .b = gamma, .c = y, .out = normed, .out2 = sum, .scale = eps};
  return tprt__contract(TPRT__ADD_RMSNORM, &c);
}
tprt_status_t tprt__cuda_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                   tprt_tensor_t* y, float eps) {
  tprt__call_t c = {.a = x, .b = gamma, .c = beta, .out = y, .scale = eps};
  return tprt__contract(TPRT__LAYERNORM, &c);
}
tprt_status_t tprt__cuda_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                      tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks) {
  tprt__call_t c = {.a = x, .b = gamma, .c = dy, .out = dx, .out2 = dgamma, .scale = eps, .chunks = chunks};
  return tprt__contract(TPRT__RMSNORM_GRAD, &c);
}
tprt_status_t tprt__cuda_rmsnorm_grad_acc(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                          const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps,
                                          int chunks) {
  if (!acc) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "rmsnorm_grad: acc must be given");
  tprt__call_t c = {.a = x, .b = gamma, .c = dy, .acc = acc, .out = dx, .out2 = dgamma, .scale = eps, .chunks = chunks};
  return tprt__contract(TPRT__RMSNORM_GRAD, &c);
}
tprt_status_t tprt__cuda_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                        tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps,
                                        int chunks) {
  tprt__call_t c = {.a = x, .b = gamma, .c = dy, .out = dx, .out2 = dgamma, .out3 = dbeta, .scale = eps, .chunks = chunks};
  return tprt__contract(TPRT__LAYERNORM_GRAD, &c);
}
tprt_status_t tprt__cuda_attention(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                   const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse, int64_t seq_len,
                                   int64_t head_dim, bool causal, float scale) {
  tprt__call_t c = {.a = q,
                    .b = k,
                    .c = v,
                    .cache = cache,
                    .out = y,
                    .out2 = lse,
                    .seq_len = seq_len,
                    .head_dim = head_dim,
                    .causal = causal,
                    .scale = scale};
  return tprt__contract(TPRT__ATTENTION, &c);
}
tprt_status_t tprt__cuda_attention_grad(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                        const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse,
                                        tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                        int64_t head_dim, bool causal, float scale) {
  tprt__call_t c = {.a = q,
                    .b = k,
                    .c = v,
                    .d = y,
                    .e = dy,
                    .lse = lse,
                    .out = dq,
                    .out2 = dk,
                    .out3 = dv,
                    .seq_len = seq_len,
                    .head_dim = head_dim,
                    .causal = causal,
                    .scale = scale};
  return tprt__contract(TPRT__ATTENTION_GRAD, &c);
}

// The whole-model ops (kernels/cuda/model): one kernel each in every numerics mode (bitwise the
// CPU's), but for the cross-entropy's GEMMs, which are the table's rows above for the module's
// numerics (tprt__ce(): cuBLASLt in fast mode, the chunk-tree WGMMA GEMMs in invariant mode), and
// in fast mode the fast-math statistics and logit gradient of cross_entropy.cu.

// The cross-entropy's GEMMs through the table (on the rank's compute stream, which the ops get).
static tprt_status_t tprt__ce_linear(void* ctx, const tprt_tensor_t* x, const tprt_tensor_t* w, tprt_tensor_t* y,
                                     int chunks, cudaStream_t stream) {
  (void)ctx, (void)stream;
  return tprt__cuda_linear(x, w, NULL, y, chunks);
}
static tprt_status_t tprt__ce_dgrad(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                    int chunks, cudaStream_t stream) {
  (void)ctx, (void)stream;
  return tprt__cuda_linear_dgrad_segmented(dy, w, dx, chunks, 1, 1);
}
static tprt_status_t tprt__ce_wgrad(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                    int chunks, cudaStream_t stream) {
  (void)ctx, (void)stream;
  return tprt__cuda_linear_wgrad(dy, x, dw, chunks);
}
static tprt_status_t tprt__ce_wgrad_acc(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                        cudaStream_t stream) {
  (void)ctx, (void)stream;
  tprt__call_t c = {.a = dy, .b = x, .out = dw};
  return tprt__contract(TPRT__LINEAR_WGRAD_ACC, &c);
}
// The statistics and the logit gradient in the numerics' math (tprt_cuda_ce_math_t); in fast
// numerics the pieces of tokens add their weight gradient into dw itself.
static const tprt_cuda_ce_gemms_t* tprt__ce(void) {
  static const tprt_cuda_ce_gemms_t exact = {tprt__ce_linear, tprt__ce_dgrad, tprt__ce_wgrad, NULL,
                                             NULL,            0,              TPRT_CUDA_CE_EXACT};
  static const tprt_cuda_ce_gemms_t invariant = {tprt__ce_linear, tprt__ce_dgrad, tprt__ce_wgrad, NULL,
                                                 NULL,            0,              TPRT_CUDA_CE_INVARIANT};
  static const tprt_cuda_ce_gemms_t fast = {tprt__ce_linear, tprt__ce_dgrad, tprt__ce_wgrad, tprt__ce_wgrad_acc,
                                            NULL,            0,              TPRT_CUDA_CE_FAST};
  return tprt__numerics == TPRT__FAST ? &fast : tprt__numerics == TPRT__INVARIANT ? &invariant : &exact;
}

tprt_status_t tprt__cuda_cross_entropy(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets,
                                       tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks) {
  TPRT__TIMED_OP("cross_entropy",
                 tprt_cuda_cross_entropy(x, w, targets, loss, lse, chunks, tprt__ce(), tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_logits(const tprt_tensor_t* z, const tprt_tensor_t* targets, tprt_tensor_t* loss,
                                              tprt_tensor_t* lse, int chunks) {
  TPRT__TIMED_OP("cross_entropy_logits",
                 tprt_cuda_cross_entropy_logits(z, targets, loss, lse, chunks, tprt__ce()->math, tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_stats(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                             const tprt_tensor_t* targets, tprt_tensor_t* stats, int64_t start,
                                             int64_t vocab, int chunks, int vocab_chunks) {
  TPRT__TIMED_OP("cross_entropy_stats", tprt_cuda_cross_entropy_stats(x, w, targets, stats, start, vocab, chunks,
                                                                      vocab_chunks, tprt__ce(), tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_dgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                             const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                             const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start,
                                             int64_t vocab, int chunks, int vocab_chunks) {
  TPRT__TIMED_OP("cross_entropy_dgrad", tprt_cuda_cross_entropy_dgrad(x, w, targets, lse, dloss, dx, start, vocab,
                                                                      chunks, vocab_chunks, tprt__ce(),
                                                                      tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_wgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                             const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                             const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start,
                                             int64_t vocab, int chunks, int token_chunks) {
  TPRT__TIMED_OP("cross_entropy_wgrad", tprt_cuda_cross_entropy_wgrad(x, w, targets, lse, dloss, dw, start, vocab,
                                                                      chunks, token_chunks, tprt__ce(),
                                                                      tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                            const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                            const tprt_tensor_t* dloss, tprt_tensor_t* dx, tprt_tensor_t* dw,
                                            int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                            int token_chunks) {
  TPRT__TIMED_OP("cross_entropy_grad", tprt_cuda_cross_entropy_grad(x, w, targets, lse, dloss, dx, dw, start, vocab,
                                                                    chunks, vocab_chunks, token_chunks,
                                                                    tprt__ce(), tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_with_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                 const tprt_tensor_t* targets, const tprt_tensor_t* dloss,
                                                 tprt_tensor_t* loss, tprt_tensor_t* lse, tprt_tensor_t* dx,
                                                 tprt_tensor_t* dw, int chunks, int vocab_chunks, int token_chunks) {
  TPRT__TIMED_OP("cross_entropy_with_grad",
                 tprt_cuda_cross_entropy_with_grad(x, w, targets, dloss, loss, lse, dx, dw, chunks, vocab_chunks,
                                                   token_chunks, tprt__ce(), tprt__r.stream));
}
tprt_status_t tprt__cuda_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out, bool count) {
  tprt__call_t c = {.a = g, .b = acc, .out = acc_out, .count = count};
  return tprt__contract(TPRT__SUMSQ, &c);
}
