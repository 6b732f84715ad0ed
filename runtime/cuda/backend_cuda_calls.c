// The CUDA backend's entry points for the ops with a choice of kernel (backend_cuda_impl.h): each
// describes its call (tprt__call_t) and hands it to the kernel table of backend_cuda_kernels.c,
// which picks the kernel; and the whole-model ops, whose cross-entropy runs its GEMMs through the
// same table.
#include "backend_cuda_impl.h"
#include "backend_cuda_table.h"
#include "tprt_cuda_kernels.h"

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
