// The CUDA fast-mode kernels of libtprt (docs/numerics.md "Modes": no bitwise promise), on tensor
// cores: the dense contractions on cuBLASLt and the grouped ones on CUTLASS. tprt_cuda_kernels.h
// includes this header; the conventions stated there (device tensors, the caller's stream, no
// synchronization or allocation, a status per launch) hold here too.
#ifndef TPRT_CUDA_FAST_H_
#define TPRT_CUDA_FAST_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Fast mode (docs/numerics.md "Modes": no bitwise promise) on tensor cores.
///
/// Dense contractions on cuBLASLt (kernels/cuda/gemm/linear_fast.c): bf16/f16 operands of one dtype,
/// results of that dtype or f32, f32 accumulation in cuBLASLt's order. A per-rank context holds
/// the handle, the workspace and the ones vector of the bias gradient. The _fits predicates say
/// whether a call can take this path (the kernel table falls back to the exact kernels when not).
#define TPRT_CUDA_LT_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct tprt_cuda_lt_t {
  void* handle;
  void* workspace;
  size_t workspace_bytes;
  void* ones;  // bias_grad: ones_count ones of ones_dtype
  int64_t ones_count;
  int ones_dtype;
} tprt_cuda_lt_t;
tprt_status_t tprt_cuda_lt_create(tprt_cuda_lt_t* lt) TPRT_MUST_USE_RESULT;
void tprt_cuda_lt_destroy(tprt_cuda_lt_t* lt);
bool tprt_cuda_linear_fast_fits(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                const tprt_tensor_t* y);
bool tprt_cuda_linear_dgrad_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* dx);
bool tprt_cuda_linear_wgrad_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* x, const tprt_tensor_t* dw);
bool tprt_cuda_bias_grad_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* db);
/// y = x·wᵀ (+ bias, added in f32 before the one rounding).
tprt_status_t tprt_cuda_linear_fast(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                    tprt_tensor_t* y, const tprt_cuda_lt_t* lt,
                                    cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// dx = dy·w (any segmented order of the exact kernels is the same sum here).
tprt_status_t tprt_cuda_linear_dgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                          const tprt_cuda_lt_t* lt, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// dx = acc + dy·w for acc of dx's shape and dtype (cuBLASLt's beta = 1 with C = acc: the product
/// and acc added in f32, once rounded; acc may be dx).
bool tprt_cuda_linear_dgrad_acc_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                          const tprt_tensor_t* dx);
tprt_status_t tprt_cuda_linear_dgrad_acc_fast(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                              tprt_tensor_t* dx, const tprt_cuda_lt_t* lt,
                                              cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// dw = dyᵀ·x.
tprt_status_t tprt_cuda_linear_wgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                          const tprt_cuda_lt_t* lt, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// dw += dyᵀ·x for an f32 dw (cuBLASLt's beta = 1: the product and dw added in f32, once rounded).
bool tprt_cuda_linear_wgrad_acc_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* x, const tprt_tensor_t* dw);
tprt_status_t tprt_cuda_linear_wgrad_acc_fast(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                              const tprt_cuda_lt_t* lt, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// db = Σ_m dy[m] (a GEMV against a ones vector, grown outside graph capture).
tprt_status_t tprt_cuda_bias_grad_fast(const tprt_tensor_t* dy, tprt_tensor_t* db, tprt_cuda_lt_t* lt,
                                       cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Grouped contractions on CUTLASS's sm90 grouped GEMM (kernels/cuda/moe/grouped_fast.cu, sm_90a):
/// bf16 operands, results bf16 or f32, the device group sizes of tprt_cuda_grouped_linear (S
/// segments of E experts); one launch for all groups, no host synchronization, stream-ordered
/// temporaries. |which|: 0 forward (a = x, w = w[E,N,K], out = y), 1 dgrad (a = dy, w, out = dx),
/// 2 wgrad (a = dy, w = x, out = dw[E,N,K]). Needs K and N multiples of 8, 16-byte aligned data.
bool tprt_cuda_grouped_fast_fits(const tprt_tensor_t* a, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes,
                                 const tprt_tensor_t* out, int which);
tprt_status_t tprt_cuda_grouped_linear_fast(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                            const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                            cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_grouped_linear_dgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                  const tprt_tensor_t* group_sizes, tprt_tensor_t* dx,
                                                  cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_grouped_linear_wgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                  const tprt_tensor_t* group_sizes, tprt_tensor_t* dw,
                                                  cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The fused grouped MLP with a caller-chosen grouped linear (the exact one, or the fast one of
/// |fast|): grouped_linear -> glu -> grouped_linear, intermediates in x's dtype.
/// kernels/cuda/moe/fused_mlp.c.
tprt_status_t tprt_cuda_fused_grouped_mlp_fast(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                               const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                               int64_t interleave, float alpha, float limit,
                                               cudaStream_t stream) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CUDA_FAST_H_
