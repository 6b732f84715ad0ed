// The backends of the runtime ABI: one table of kernels, collectives and memory operations per
// device kind. The ABI functions (tprt_abi*.c) decode an op's descriptor and call the exec's
// backend, so one lowered module runs on the CPU backend (tprt_backend_cpu, the kernels of
// tprt_cpu_kernels.h and the thread-world collectives of tprt_collectives.h) or on a device
// backend (the CUDA one lives in runtime/cuda/, outside libtprt, and registers its own table).
//
// Every kernel and collective entry has exactly the signature of the CPU function of the same
// name (tprt_cpu_<name> / tprt_<name>); a device backend runs it on the calling rank's device and
// stream (its own per-thread state, set up by rank_begin). A NULL entry means the backend has no
// implementation of that op yet: the ABI reports UNIMPLEMENTED naming the op and the backend.
#ifndef TPRT_BACKEND_H_
#define TPRT_BACKEND_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_collectives.h"
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "tprt_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The compute kernels: X(name, (parameters), (arguments)), in the CPU kernels' signatures.
#define TPRT_BACKEND_KERNELS(X) \
  X(linear, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias, tprt_tensor_t* y, int chunks), \
    (x, w, bias, y, chunks)) \
  X(grouped_linear, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks), \
    (x, w, group_sizes, y, chunks)) \
  X(glu, (const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha, float limit), \
    (x, y, kind, interleave, alpha, limit)) \
  X(rmsnorm, (const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps), (x, gamma, y, eps)) \
  X(add_rmsnorm, (const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma, tprt_tensor_t* normed, tprt_tensor_t* sum, float eps), \
    (residual, y, gamma, normed, sum, eps)) \
  X(layernorm, (const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta, tprt_tensor_t* y, float eps), \
    (x, gamma, beta, y, eps)) \
  X(add, (const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c), (a, b, c)) \
  X(mul, (const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c), (a, b, c)) \
  X(quantize, (const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale, tprt_tensor_t* global_scale, int format, int axis), \
    (x, data, scale, global_scale, format, axis)) \
  X(amax, (const tprt_tensor_t* x, tprt_tensor_t* amax), (x, amax)) \
  X(quantize_with_amax, (const tprt_tensor_t* x, const tprt_tensor_t* amax, tprt_tensor_t* data, tprt_tensor_t* scale, tprt_tensor_t* global_scale, int format, int axis), \
    (x, amax, data, scale, global_scale, format, axis)) \
  X(dequantize, (const tprt_tensor_t* data, const tprt_tensor_t* scale, const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format, int axis), \
    (data, scale, global_scale, x, format, axis)) \
  X(moe_route, (const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights, int top_k, bool normalize), \
    (logits, indices, weights, top_k, normalize)) \
  X(moe_permute, (const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y, tprt_tensor_t* group_sizes, tprt_tensor_t* row_map), \
    (x, indices, y, group_sizes, row_map)) \
  X(moe_bucket, (const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int buckets), \
    (x, group_sizes, y, buckets)) \
  X(moe_unbucket, (const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int buckets), \
    (x, group_sizes, y, buckets)) \
  X(moe_unpermute, (const tprt_tensor_t* y, const tprt_tensor_t* row_map, const tprt_tensor_t* weights, tprt_tensor_t* out), \
    (y, row_map, weights, out)) \
  X(fused_grouped_mlp, (const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2, const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind, int64_t interleave, float alpha, float limit, int chunks), \
    (x, w1, w2, group_sizes, y, kind, interleave, alpha, limit, chunks)) \
  X(copy, (const tprt_tensor_t* src, tprt_tensor_t* dst), (src, dst)) \
  X(rope, (const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t, tprt_tensor_t* y, bool inverse), \
    (x, cos_t, sin_t, y, inverse)) \
  X(attention, (const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v, const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse, int64_t seq_len, int64_t head_dim, bool causal, float scale), \
    (q, k, v, cache, y, lse, seq_len, head_dim, causal, scale)) \
  X(attention_grad, (const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v, const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse, tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len, int64_t head_dim, bool causal, float scale), \
    (q, k, v, y, dy, lse, dq, dk, dv, seq_len, head_dim, causal, scale)) \
  X(linear_dgrad_segmented, (const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx, int chunks, int segments, int blocks), \
    (dy, w, dx, chunks, segments, blocks)) \
  X(linear_dgrad_acc, (const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc, tprt_tensor_t* dx, int chunks, int segments, int blocks), \
    (dy, w, acc, dx, chunks, segments, blocks)) \
  X(linear_wgrad, (const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks), \
    (dy, x, dw, chunks)) \
  X(bias_grad, (const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks), (dy, db, chunks)) \
  X(grouped_linear_dgrad_segmented, (const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks, int segments, int blocks), \
    (dy, w, group_sizes, dx, chunks, segments, blocks)) \
  X(grouped_linear_wgrad, (const tprt_tensor_t* dy, const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks), \
    (dy, x, group_sizes, dw, chunks)) \
  X(glu_grad, (const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind, int64_t interleave, float alpha, float limit), \
    (x, dy, dx, kind, interleave, alpha, limit)) \
  X(rmsnorm_grad, (const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks), \
    (x, gamma, dy, dx, dgamma, eps, chunks)) \
  X(rmsnorm_grad_acc, (const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy, const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks), \
    (x, gamma, dy, acc, dx, dgamma, eps, chunks)) \
  X(layernorm_grad, (const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps, int chunks), \
    (x, gamma, dy, dx, dgamma, dbeta, eps, chunks)) \
  X(moe_unpermute_grad, (const tprt_tensor_t* dout, const tprt_tensor_t* y, const tprt_tensor_t* row_map, const tprt_tensor_t* weights, tprt_tensor_t* dy, tprt_tensor_t* dweights), \
    (dout, y, row_map, weights, dy, dweights)) \
  X(moe_permute_grad, (const tprt_tensor_t* dy, const tprt_tensor_t* row_map, tprt_tensor_t* dx, int top_k), \
    (dy, row_map, dx, top_k)) \
  X(moe_route_grad, (const tprt_tensor_t* logits, const tprt_tensor_t* indices, const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k, bool normalize), \
    (logits, indices, dweights, dlogits, top_k, normalize)) \
  X(embedding, (const tprt_tensor_t* ids, const tprt_tensor_t* table, tprt_tensor_t* y, int64_t start, int64_t vocab), \
    (ids, table, y, start, vocab)) \
  X(embedding_grad, (const tprt_tensor_t* ids, const tprt_tensor_t* dy, tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks), \
    (ids, dy, dtable, start, vocab, chunks)) \
  X(embedding_grad_acc, (const tprt_tensor_t* ids, const tprt_tensor_t* dy, const tprt_tensor_t* acc, tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks), \
    (ids, dy, acc, dtable, start, vocab, chunks)) \
  X(cross_entropy, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets, tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks), \
    (x, w, targets, loss, lse, chunks)) \
  X(cross_entropy_logits, (const tprt_tensor_t* z, const tprt_tensor_t* targets, tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks), \
    (z, targets, loss, lse, chunks)) \
  X(cross_entropy_stats, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets, tprt_tensor_t* stats, int64_t start, int64_t vocab, int chunks, int vocab_chunks), \
    (x, w, targets, stats, start, vocab, chunks, vocab_chunks)) \
  X(cross_entropy_combine, (const tprt_tensor_t* stats, const tprt_tensor_t* targets, tprt_tensor_t* loss, tprt_tensor_t* lse), \
    (stats, targets, loss, lse)) \
  X(cross_entropy_dgrad, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets, const tprt_tensor_t* lse, const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start, int64_t vocab, int chunks, int vocab_chunks), \
    (x, w, targets, lse, dloss, dx, start, vocab, chunks, vocab_chunks)) \
  X(cross_entropy_wgrad, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets, const tprt_tensor_t* lse, const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start, int64_t vocab, int chunks, int token_chunks), \
    (x, w, targets, lse, dloss, dw, start, vocab, chunks, token_chunks)) \
  X(cross_entropy_grad, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets, const tprt_tensor_t* lse, const tprt_tensor_t* dloss, tprt_tensor_t* dx, tprt_tensor_t* dw, int64_t start, int64_t vocab, int chunks, int vocab_chunks, int token_chunks), \
    (x, w, targets, lse, dloss, dx, dw, start, vocab, chunks, vocab_chunks, token_chunks)) \
  X(cross_entropy_with_grad, (const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets, const tprt_tensor_t* dloss, tprt_tensor_t* loss, tprt_tensor_t* lse, tprt_tensor_t* dx, tprt_tensor_t* dw, int chunks, int vocab_chunks, int token_chunks), \
    (x, w, targets, dloss, loss, lse, dx, dw, chunks, vocab_chunks, token_chunks)) \
  X(kvcache_write, (const tprt_tensor_t* cache, const tprt_tensor_t* new_rows, const tprt_tensor_t* cache_len, tprt_tensor_t* out, int64_t seq_len), \
    (cache, new_rows, cache_len, out, seq_len)) \
  X(sample, (const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request, const tprt_tensor_t* position, const tprt_tensor_t* temperature, const tprt_tensor_t* top_k, const tprt_tensor_t* top_p, tprt_tensor_t* token), \
    (logits, seed, request, position, temperature, top_k, top_p, token)) \
  X(sumsq, (const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out, bool count), (g, acc, acc_out, count)) \
  X(global_norm, (const tprt_tensor_t* acc, tprt_tensor_t* norm), (acc, norm)) \
  X(adamw, (const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m, const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm, tprt_tensor_t* master_out, tprt_tensor_t* m_out, tprt_tensor_t* v_out, tprt_tensor_t* weight), \
    (master, grad, m, v, hyper, norm, master_out, m_out, v_out, weight))

/// The collectives: X(name, (parameters), (arguments)), in tprt_collectives.h's signatures.
#define TPRT_BACKEND_COLLECTIVES(X) \
  X(all_reduce, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, tprt_order_t order), \
    (rank, axes_mask, in, out, order)) \
  X(all_reduce_max, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out), \
    (rank, axes_mask, in, out)) \
  X(all_gather, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, int dim), \
    (rank, axes_mask, in, out, dim)) \
  X(reduce_scatter, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, int dim, tprt_order_t order), \
    (rank, axes_mask, in, out, dim, order)) \
  X(all_to_all, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, int split_dim, int concat_dim), \
    (rank, axes_mask, in, out, split_dim, concat_dim)) \
  X(all_gather_start, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, int dim, tprt_future_t** out_future), \
    (rank, axes_mask, in, out, dim, out_future)) \
  X(reduce_scatter_start, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, int dim, tprt_order_t order, tprt_future_t** out_future), \
    (rank, axes_mask, in, out, dim, order, out_future)) \
  X(all_to_all_start, (tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out, int split_dim, int concat_dim, tprt_future_t** out_future), \
    (rank, axes_mask, in, out, split_dim, concat_dim, out_future)) \
  X(wait, (tprt_rank_t* rank, tprt_future_t* future), (rank, future))

/// How a fused norm runs (the op's `algorithm`): TPRT_ALGORITHM_AUTO (the backend chooses),
/// TPRT_ALGORITHM_ONE_SHOT (the one-shot fused kernel wherever the backend can run it),
/// TPRT_ALGORITHM_TWO_SHOT (the two-shot fused kernel, a reduce-scatter of the partial to row
/// owners, which add and normalize, then an all-gather of their rows, wherever the backend can run
/// it) or TPRT_ALGORITHM_COMPOSITION (the all-reduce, add and rmsnorm), numbered as in
/// tprt_ops_abi.h.
typedef int tprt_fused_algorithm_t;

/// The quantization tp.fused_allreduce_add_rmsnorm_quantize adds to a fused norm: normed quantized
/// rowwise in |format| (TPRT_FORMAT_*) into |data|, |scale| and (nvfp4) |global_scale|, with the
/// per-tensor formats' |amax| operand (NULL for mxfp8); bitwise the backend's quantize of normed.
typedef struct {
  int format;
  const tprt_tensor_t* amax;
  tprt_tensor_t* data;
  tprt_tensor_t* scale;
  tprt_tensor_t* global_scale;
} tprt_fused_quant_t;

typedef struct tprt_backend_t {
  const char* name;  // "cpu", "cuda"
  /// Called on each rank's thread before its first step (binds the device, creates streams and
  /// communicators) and after its last; both may be NULL.
  tprt_status_t (*rank_begin)(tprt_rank_t* rank);
  /// Called once before the world runs with the module's tp.numerics ("fast", "invariant",
  /// "exact"): a device backend may use faster, order-free kernels in fast mode. May be NULL.
  tprt_status_t (*configure)(const char* numerics);
  void (*rank_end)(tprt_rank_t* rank);
  /// Memory the kernels address: device buffers of |bytes| (zeroed), copies from and to host
  /// memory, and a wait for the calling rank's queued work. Called on the rank's thread (or, for
  /// the CPU backend, any thread).
  tprt_status_t (*alloc)(size_t bytes, void** out);
  void (*free)(void* ptr);
  tprt_status_t (*to_device)(void* dst, const void* src, size_t bytes);
  tprt_status_t (*to_host)(void* dst, const void* src, size_t bytes);
  tprt_status_t (*synchronize)(void);
  /// A per-rank device buffer of at least |bytes| for an ABI function's temporaries (the fused
  /// norms' f32 sum), reused by the next call: not zeroed, valid until then, used in the rank's
  /// program order. Grows only outside CUDA graph capture. NULL: use the rank's host allocator.
  tprt_status_t (*workspace)(size_t bytes, void** out);
  /// CUDA graphs (tpc-run --graph), on the rank's thread: capture the work queued between begin
  /// and end into an executable graph, launch it, destroy it. NULL for backends without graphs.
  tprt_status_t (*graph_begin)(void);
  tprt_status_t (*graph_end)(void** out_graph);
  tprt_status_t (*graph_launch)(void* graph);
  void (*graph_destroy)(void* graph);
  /// tp.fused_allreduce_add_rmsnorm in one step (a fused kernel over the group's memory): sets
  /// |*done| when it ran the op, bitwise the composition (the all-reduce into f32, the add rounded
  /// once to the residual's dtype, the rmsnorm); leaves it false when the call or the world does
  /// not suit it, and the caller runs the composition. |algorithm| is the op's: COMPOSITION
  /// declines, ONE_SHOT runs the one-shot kernel and TWO_SHOT the two-shot one wherever the world
  /// and shapes allow it, AUTO leaves the choice to the backend. |round_sum| (the op's sum_type =
  /// "residual"): the f32 sum is rounded to the residual's dtype before the add, as the
  /// composition's all-reduce into that dtype does. Every member decides alike (the module, and so
  /// the attributes, are the same on every rank). With |quant| (else NULL) the step also
  /// quantizes normed as |quant| says (tp.fused_allreduce_add_rmsnorm_quantize); a hook that
  /// cannot declines, and the caller quantizes after the composition. May be NULL.
  tprt_status_t (*fused_norm)(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* partial,
                              const tprt_tensor_t* residual, const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                              tprt_tensor_t* residual_out, float eps, tprt_order_t order,
                              tprt_fused_algorithm_t algorithm, bool round_sum, const tprt_fused_quant_t* quant,
                              bool* done);
  /// Writes a one-line description of the calling rank's device to |buf| (tpc-run's reports:
  /// "GPU 0: sm_90, 132 SMs, 79 GiB"), on the rank's thread after rank_begin. NULL: the host CPU.
  tprt_status_t (*describe)(char* buf, size_t size);
#define TPRT__BACKEND_ENTRY(name, params, args) tprt_status_t(*name) params;
  TPRT_BACKEND_KERNELS(TPRT__BACKEND_ENTRY)
  TPRT_BACKEND_COLLECTIVES(TPRT__BACKEND_ENTRY)
#undef TPRT__BACKEND_ENTRY
} tprt_backend_t;

/// The CPU backend: host memory, the exact CPU kernels and the thread-world collectives.
const tprt_backend_t* tprt_backend_cpu(void);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_BACKEND_H_
