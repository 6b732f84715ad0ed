// The CUDA backend's kernels with one launcher each, whatever the numerics (bitwise the CPU's):
// norms, elementwise ops, the MoE permutations and routing, rope, quantization, copies, the
// embedding and the optimizer's norm and update. Each runs on the rank's compute stream and is
// timed as an op of TPRT_CUDA_TIMELINE. The kernels with a choice of implementation go through the
// table of backend_cuda_kernels.c.
#include "backend_cuda_impl.h"
#include "tprt_cuda_kernels.h"

tprt_status_t tprt__cuda_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  TPRT__TIMED_OP("add", tprt_cuda_add(a, b, c, tprt__r.stream));
}
tprt_status_t tprt__cuda_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  TPRT__TIMED_OP("mul", tprt_cuda_mul(a, b, c, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                     tprt_tensor_t* group_sizes, tprt_tensor_t* row_map) {
  TPRT__TIMED_OP("moe_permute", tprt_cuda_moe_permute(x, indices, y, group_sizes, row_map, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                    int buckets) {
  TPRT__TIMED_OP("moe_bucket", tprt_cuda_moe_bucket(x, group_sizes, y, buckets, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                      int buckets) {
  TPRT__TIMED_OP("moe_unbucket", tprt_cuda_moe_unbucket(x, group_sizes, y, buckets, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                       const tprt_tensor_t* weights, tprt_tensor_t* out) {
  TPRT__TIMED_OP("moe_unpermute", tprt_cuda_moe_unpermute(y, row_map, weights, out, tprt__r.stream));
}
tprt_status_t tprt__cuda_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request,
                               const tprt_tensor_t* position, const tprt_tensor_t* temperature,
                               const tprt_tensor_t* top_k, const tprt_tensor_t* top_p, tprt_tensor_t* token) {
  TPRT__TIMED_OP("sample",
                 tprt_cuda_sample(logits, seed, request, position, temperature, top_k, top_p, token, tprt__r.stream));
}
tprt_status_t tprt__cuda_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                       const tprt_tensor_t* cache_len, tprt_tensor_t* out, int64_t seq_len) {
  TPRT__TIMED_OP("kvcache_write", tprt_cuda_kvcache_write(cache, new_rows, cache_len, out, seq_len, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights,
                                   int top_k, bool normalize) {
  TPRT__TIMED_OP("moe_route", tprt_cuda_moe_route(logits, indices, weights, top_k, normalize, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map, tprt_tensor_t* dx,
                                          int top_k) {
  TPRT__TIMED_OP("moe_permute_grad", tprt_cuda_moe_permute_grad(dy, row_map, dx, top_k, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                            const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                            tprt_tensor_t* dy, tprt_tensor_t* dweights) {
  TPRT__TIMED_OP("moe_unpermute_grad", tprt_cuda_moe_unpermute_grad(dout, y, row_map, weights, dy, dweights, tprt__r.stream));
}
tprt_status_t tprt__cuda_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                        const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k,
                                        bool normalize) {
  TPRT__TIMED_OP("moe_route_grad", tprt_cuda_moe_route_grad(logits, indices, dweights, dlogits, top_k, normalize, tprt__r.stream));
}
tprt_status_t tprt__cuda_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                              tprt_tensor_t* y, bool inverse) {
  TPRT__TIMED_OP("rope", tprt_cuda_rope(x, cos_t, sin_t, y, inverse, tprt__r.stream));
}
tprt_status_t tprt__cuda_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                  tprt_tensor_t* global_scale, int format, int axis) {
  TPRT__TIMED_OP("quantize", tprt_cuda_quantize(x, data, scale, global_scale, format, axis, tprt__r.stream));
}
tprt_status_t tprt__cuda_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                    const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format, int axis) {
  TPRT__TIMED_OP("dequantize", tprt_cuda_dequantize(data, scale, global_scale, x, format, axis, tprt__r.stream));
}
tprt_status_t tprt__cuda_copy(const tprt_tensor_t* src, tprt_tensor_t* dst) {
  TPRT__TIMED_OP("copy", tprt_cuda_copy(src, dst, tprt__r.stream));
}
tprt_status_t tprt__cuda_embedding(const tprt_tensor_t* ids, const tprt_tensor_t* table, tprt_tensor_t* y, int64_t start,
                                   int64_t vocab) {
  TPRT__TIMED_OP("embedding", tprt_cuda_embedding(ids, table, y, start, vocab, tprt__r.stream));
}
tprt_status_t tprt__cuda_embedding_grad(const tprt_tensor_t* ids, const tprt_tensor_t* dy, tprt_tensor_t* dtable,
                                        int64_t start, int64_t vocab, int chunks) {
  TPRT__TIMED_OP("embedding_grad", tprt_cuda_embedding_grad(ids, dy, dtable, start, vocab, chunks, tprt__r.stream));
}
tprt_status_t tprt__cuda_embedding_grad_acc(const tprt_tensor_t* ids, const tprt_tensor_t* dy, const tprt_tensor_t* acc,
                                            tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks) {
  TPRT__TIMED_OP("embedding_grad", tprt_cuda_embedding_grad_acc(ids, dy, acc, dtable, start, vocab, chunks, tprt__r.stream));
}
tprt_status_t tprt__cuda_cross_entropy_combine(const tprt_tensor_t* stats, const tprt_tensor_t* targets,
                                               tprt_tensor_t* loss, tprt_tensor_t* lse) {
  TPRT__TIMED_OP("cross_entropy_combine", tprt_cuda_cross_entropy_combine(stats, targets, loss, lse, tprt__r.stream));
}
tprt_status_t tprt__cuda_global_norm(const tprt_tensor_t* acc, tprt_tensor_t* norm) {
  TPRT__TIMED_OP("global_norm", tprt_cuda_global_norm(acc, norm, tprt__r.stream));
}
tprt_status_t tprt__cuda_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                               const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                               tprt_tensor_t* master_out, tprt_tensor_t* m_out, tprt_tensor_t* v_out,
                               tprt_tensor_t* weight) {
  TPRT__TIMED_OP("adamw",
                 tprt_cuda_adamw(master, grad, m, v, hyper, norm, master_out, m_out, v_out, weight, tprt__r.stream));
}
