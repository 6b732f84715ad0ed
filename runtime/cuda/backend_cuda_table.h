// The CUDA backend's kernel table, shared by its two halves (internal to runtime/cuda): the table
// itself, its rows and the dispatch (backend_cuda_kernels.c), and the backend's entry points that
// describe a call and hand it to the table (backend_cuda_calls.c).
#ifndef TPRT_BACKEND_CUDA_TABLE_H_
#define TPRT_BACKEND_CUDA_TABLE_H_

#include <stdbool.h>
#include <stdint.h>

#include "backend_cuda_impl.h"

/// The numerics modes, as bits of a row's mask.
enum { TPRT__FAST = 1, TPRT__INVARIANT = 2, TPRT__EXACT = 4, TPRT__ANY = 7 };

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

/// The world's tp.numerics, one of TPRT__FAST, TPRT__INVARIANT, TPRT__EXACT (tprt__cuda_configure).
extern int tprt__numerics;

/// Runs the first row of the table that serves |op| for this world's numerics, this device and
/// |call|; an UNIMPLEMENTED status names the op where no row does.
tprt_status_t tprt__contract(tprt__op_t op, const tprt__call_t* call);

#endif  // TPRT_BACKEND_CUDA_TABLE_H_
