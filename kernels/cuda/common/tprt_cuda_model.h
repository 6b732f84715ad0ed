// The launchers of the whole-model ops (kernels/cuda/model/): embedding, cross-entropy, the
// optimizer's norm and update, and generation's sampling and KV cache writes. Included by
// tprt_cuda_kernels.h, which declares every other op's.
#ifndef TPRT_CUDA_MODEL_H_
#define TPRT_CUDA_MODEL_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The whole-model ops of kernels/cuda/model/ (every numerics mode), bitwise the CPU kernels of
/// cpu_vocab.c and cpu_optim.c with their validation (the ids' values are not read on the host:
/// an id outside [start, start + rows) is a row this rank does not hold). They allocate their
/// temporaries stream-ordered (tprt__cuda_malloc_async): the sort of embedding_grad, the block
/// sums of sumsq (integers, so the grid does not change them).
tprt_status_t tprt_cuda_embedding(const tprt_tensor_t* ids, const tprt_tensor_t* table, tprt_tensor_t* y,
                                  int64_t start, int64_t vocab, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_embedding_grad(const tprt_tensor_t* ids, const tprt_tensor_t* dy, tprt_tensor_t* dtable,
                                       int64_t start, int64_t vocab, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_embedding_grad starting from acc (dtable's shape, f32) instead of zeros: bitwise
/// tprt_cpu_embedding_grad_acc (the row sums added to acc once; other rows acc + 0.0).
tprt_status_t tprt_cuda_embedding_grad_acc(const tprt_tensor_t* ids, const tprt_tensor_t* dy, const tprt_tensor_t* acc,
                                           tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks,
                                           cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// How the cross-entropy ops compute their statistics and the logit gradient (docs/numerics.md,
/// "Cross-entropy"):
///   EXACT      tprt_numerics.h's exp; per token and vocabulary block the maximum, then the sum of
///              exponentials from +0.0 in increasing v: bitwise the CPU kernels.
///   INVARIANT  __expf; per token and vocabulary block one thread block's online maximum and sum in
///              a fixed order that depends only on the block's length, then the blocks' pairwise tree
///              as in EXACT: bits that no mesh, batch or piece size changes, on one architecture.
///   FAST       __expf; per token one online pass over its whole row (no vocabulary blocks): no
///              bitwise promise.
typedef enum { TPRT_CUDA_CE_EXACT = 0, TPRT_CUDA_CE_INVARIANT = 1, TPRT_CUDA_CE_FAST = 2 } tprt_cuda_ce_math_t;

/// The GEMMs of the cross-entropy ops, each on |stream|: y = x·wᵀ rounded to y's dtype (the
/// logits), dx = dy·w and dw = dyᵀ·x with the canonical accumulation over |chunks| (linear_dgrad with
/// one segment and block, linear_wgrad). NULL for the exact kernels (gemm/linear.cu,
/// gemm/linear_grad.c); the CUDA backend passes its kernel table's choice for the module's
/// numerics. |wgrad_acc| (fast numerics; NULL otherwise) adds dyᵀ·x into an f32 dw: the pieces of
/// tokens then sum into dw itself, in pieces of |piece_bytes| of logits, with no partial of dw's
/// size. |piece_bytes| bounds the logits held at a time (0: 1 GiB). |math| as above.
typedef struct tprt_cuda_ce_gemms {
  tprt_status_t (*linear)(void* ctx, const tprt_tensor_t* x, const tprt_tensor_t* w, tprt_tensor_t* y, int chunks,
                          cudaStream_t stream);
  tprt_status_t (*dgrad)(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx, int chunks,
                         cudaStream_t stream);
  tprt_status_t (*wgrad)(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks,
                         cudaStream_t stream);
  tprt_status_t (*wgrad_acc)(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                             cudaStream_t stream);
  void* ctx;
  size_t piece_bytes;
  tprt_cuda_ce_math_t math;
} tprt_cuda_ce_gemms_t;

/// The cross-entropy ops (kernels/cuda/model/cross_entropy.cu) over pieces of tokens: the logits of
/// a piece by gemms->linear, its statistics or the logits' gradient, and gemms->dgrad / ->wgrad.
/// With the exact GEMMs they are bitwise the CPU's for every piece size.
tprt_status_t tprt_cuda_cross_entropy(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets,
                                      tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks,
                                      const tprt_cuda_ce_gemms_t* gemms, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_cross_entropy_stats(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                            const tprt_tensor_t* targets, tprt_tensor_t* stats, int64_t start,
                                            int64_t vocab, int chunks, int vocab_chunks,
                                            const tprt_cuda_ce_gemms_t* gemms,
                                            cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_cross_entropy_combine(const tprt_tensor_t* stats, const tprt_tensor_t* targets,
                                              tprt_tensor_t* loss, tprt_tensor_t* lse,
                                              cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_cross_entropy's loss and lse from the logits z[T,V] themselves (the whole vocabulary,
/// |chunks| blocks), by |math|: no GEMM. Of z = the linear of the same numerics (x's dtype, the same
/// chunks) the same bits as tprt_cuda_cross_entropy; EXACT bitwise tprt_cpu_cross_entropy_logits.
tprt_status_t tprt_cuda_cross_entropy_logits(const tprt_tensor_t* z, const tprt_tensor_t* targets, tprt_tensor_t* loss,
                                             tprt_tensor_t* lse, int chunks, tprt_cuda_ce_math_t math,
                                             cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_cross_entropy_dgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                            const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                            const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start,
                                            int64_t vocab, int chunks, int vocab_chunks,
                                            const tprt_cuda_ce_gemms_t* gemms,
                                            cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_cross_entropy_wgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                            const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                            const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start,
                                            int64_t vocab, int chunks, int token_chunks,
                                            const tprt_cuda_ce_gemms_t* gemms,
                                            cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// dx as tprt_cuda_cross_entropy_dgrad and dw as tprt_cuda_cross_entropy_wgrad, bitwise, from one
/// recomputation of the logits (the wgrad's pieces of tokens).
tprt_status_t tprt_cuda_cross_entropy_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                           const tprt_tensor_t* dloss, tprt_tensor_t* dx, tprt_tensor_t* dw,
                                           int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                           int token_chunks, const tprt_cuda_ce_gemms_t* gemms,
                                           cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// tprt_cpu_cross_entropy_with_grad: the loss and lse (|chunks| vocabulary blocks, the whole
/// vocabulary), then dx and dw as tprt_cuda_cross_entropy_grad of that lse, computing each piece of
/// tokens' logits once for all four; the same bits as the two calls.
tprt_status_t tprt_cuda_cross_entropy_with_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                const tprt_tensor_t* targets, const tprt_tensor_t* dloss,
                                                tprt_tensor_t* loss, tprt_tensor_t* lse, tprt_tensor_t* dx,
                                                tprt_tensor_t* dw, int chunks, int vocab_chunks, int token_chunks,
                                                const tprt_cuda_ce_gemms_t* gemms,
                                                cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out, bool count,
                              cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_sumsq for invariant numerics: each square's 48-bit significand cut to its top 24 bits
/// (depending only on the element; less than 2^-22 of the square below it), summed exactly on the same grid.
/// Layout-independent as the exact sum (any partition of the elements, any chaining of the
/// accumulators: the same bits), at a quarter of its integer work; not the CPU's bits. Same
/// validation.
tprt_status_t tprt_cuda_sumsq_cut(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out, bool count,
                                  cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_sumsq for fast numerics: the squares summed in f64 (in a fixed order for a given
/// tensor size and GPU), the sum then added to the incoming accumulator on its grid (bits below
/// 2^-298 dropped). As exact as f64 allows, but not layout-independent: no bitwise promise. Same
/// validation.
tprt_status_t tprt_cuda_sumsq_fast(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out,
                                   bool count, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_global_norm(const tprt_tensor_t* acc, tprt_tensor_t* norm, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                              const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                              tprt_tensor_t* master_out, tprt_tensor_t* m_out, tprt_tensor_t* v_out,
                              tprt_tensor_t* weight, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// tp.sample: bitwise tprt_cpu_sample (kernels/cuda/model/sample.cu; one block of 256 threads per
/// row). The per-row parameters live on the device and are not checked here: a row out of range
/// draws per the definition's arithmetic (tpc-generate and the CPU backend refuse such rows).
tprt_status_t tprt_cuda_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request,
                               const tprt_tensor_t* position, const tprt_tensor_t* temperature,
                               const tprt_tensor_t* top_k, const tprt_tensor_t* top_p, tprt_tensor_t* token,
                               cudaStream_t stream);

/// tp.kvcache_write: tprt_cpu_kvcache_write's copy (16-byte rows where aligned); in place when out is
/// the cache. A row whose place falls outside its sequence's rows is not written (cache_len lives on
/// the device).
tprt_status_t tprt_cuda_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                      const tprt_tensor_t* cache_len, tprt_tensor_t* out, int64_t seq_len,
                                      cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CUDA_MODEL_H_
