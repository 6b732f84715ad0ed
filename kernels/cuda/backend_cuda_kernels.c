// The kernels of the CUDA backend's table (tprt_backend.h): each entry runs the CUDA launcher of
// tprt_cuda_kernels.h on the calling rank's compute stream. The numerics of the module
// (configure: "fast", "invariant", "exact") choose among the contraction kernels.
#include <string.h>

#include "backend_cuda_impl.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

#define TPRT__LT_WORKSPACE_BYTES ((size_t)32 << 20)

// tp.numerics == "fast": linears go to cuBLASLt (configure, before any rank starts).
static bool tprt__cuda_fast;

tprt_status_t tprt__cuda_configure(const char* numerics) {
  tprt__cuda_fast = numerics && strcmp(numerics, "fast") == 0;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

tprt_status_t tprt__cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                tprt_tensor_t* y, int chunks) {
  if (!tprt__cuda_fast || !tprt_cuda_linear_fast_supported(x, w, bias, y))
    return tprt_cuda_linear(x, w, bias, y, chunks, tprt__r.stream);
  if (!tprt__r.lt) {
    TPRT__TRY(tprt_cuda_lt_handle(&tprt__r.lt));
    TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tprt__r.lt_workspace, TPRT__LT_WORKSPACE_BYTES));
  }
  return tprt_cuda_linear_fast(x, w, y, tprt__r.lt, tprt__r.lt_workspace, TPRT__LT_WORKSPACE_BYTES, tprt__r.stream);
}
tprt_status_t tprt__cuda_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                        const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks) {
  return tprt_cuda_grouped_linear(x, w, group_sizes, y, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                             float limit) {
  return tprt_cuda_glu(x, y, kind, interleave, alpha, limit, tprt__r.stream);
}
tprt_status_t tprt__cuda_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps) {
  return tprt_cuda_rmsnorm(x, gamma, y, eps, tprt__r.stream);
}
tprt_status_t tprt__cuda_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                   tprt_tensor_t* y, float eps) {
  return tprt_cuda_layernorm(x, gamma, beta, y, eps, tprt__r.stream);
}

tprt_status_t tprt__cuda_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  return tprt_cuda_add(a, b, c, tprt__r.stream);
}
tprt_status_t tprt__cuda_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  return tprt_cuda_mul(a, b, c, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                     tprt_tensor_t* group_sizes, tprt_tensor_t* row_map) {
  return tprt_cuda_moe_permute(x, indices, y, group_sizes, row_map, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                    int buckets) {
  return tprt_cuda_moe_bucket(x, group_sizes, y, buckets, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                      int buckets) {
  return tprt_cuda_moe_unbucket(x, group_sizes, y, buckets, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                       const tprt_tensor_t* weights, tprt_tensor_t* out) {
  return tprt_cuda_moe_unpermute(y, row_map, weights, out, tprt__r.stream);
}
tprt_status_t tprt__cuda_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                                int chunks, int segments, int blocks) {
  return tprt_cuda_linear_dgrad_segmented(dy, w, dx, chunks, segments, blocks, tprt__r.stream);
}
tprt_status_t tprt__cuda_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks) {
  return tprt_cuda_linear_wgrad(dy, x, dw, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks) {
  return tprt_cuda_bias_grad(dy, db, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                        const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                        int segments, int blocks) {
  return tprt_cuda_grouped_linear_dgrad_segmented(dy, w, group_sizes, dx, chunks, segments, blocks, tprt__r.stream);
}
tprt_status_t tprt__cuda_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                              const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks) {
  return tprt_cuda_grouped_linear_wgrad(dy, x, group_sizes, dw, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                  int64_t interleave, float alpha, float limit) {
  return tprt_cuda_glu_grad(x, dy, dx, kind, interleave, alpha, limit, tprt__r.stream);
}
tprt_status_t tprt__cuda_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                      tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks) {
  return tprt_cuda_rmsnorm_grad(x, gamma, dy, dx, dgamma, eps, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                        tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps,
                                        int chunks) {
  return tprt_cuda_layernorm_grad(x, gamma, dy, dx, dgamma, dbeta, eps, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights,
                                   int top_k, bool normalize) {
  return tprt_cuda_moe_route(logits, indices, weights, top_k, normalize, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map, tprt_tensor_t* dx,
                                          int top_k) {
  return tprt_cuda_moe_permute_grad(dy, row_map, dx, top_k, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                            const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                            tprt_tensor_t* dy, tprt_tensor_t* dweights) {
  return tprt_cuda_moe_unpermute_grad(dout, y, row_map, weights, dy, dweights, tprt__r.stream);
}
tprt_status_t tprt__cuda_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                        const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k,
                                        bool normalize) {
  return tprt_cuda_moe_route_grad(logits, indices, dweights, dlogits, top_k, normalize, tprt__r.stream);
}
tprt_status_t tprt__cuda_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                           const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                           int64_t interleave, float alpha, float limit, int chunks) {
  return tprt_cuda_fused_grouped_mlp(x, w1, w2, group_sizes, y, kind, interleave, alpha, limit, chunks, tprt__r.stream);
}
tprt_status_t tprt__cuda_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                  tprt_tensor_t* global_scale, int format, int axis) {
  return tprt_cuda_quantize(x, data, scale, global_scale, format, axis, tprt__r.stream);
}
tprt_status_t tprt__cuda_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                    const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format, int axis) {
  return tprt_cuda_dequantize(data, scale, global_scale, x, format, axis, tprt__r.stream);
}
tprt_status_t tprt__cuda_copy(const tprt_tensor_t* src, tprt_tensor_t* dst) {
  return tprt_cuda_copy(src, dst, tprt__r.stream);
}
