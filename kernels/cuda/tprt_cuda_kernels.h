// The CUDA exact-mode kernels of libtprt: host launchers whose results are bitwise equal to the
// CPU kernels of tprt_cpu_kernels.h (which define tpc's bits, docs/numerics.md) on any GPU.
//
// Conventions shared by every launcher:
// - Tensors are dense row-major views (tprt_tensor.h) whose |data| is device memory (or memory
//   the device can address); the caller owns them. Shapes, dtypes and the op's parameters are
//   validated on the host exactly as by the CPU kernel of the same name, with the same status
//   code and message ("linear: chunks=3 must be a power of two in [1, 1024]"); validation never
//   reads tensor data and never calls CUDA.
// - Arithmetic is f32 on CUDA cores in the CPU kernel's order, with explicit __fmaf_rn,
//   __fadd_rn, __fmul_rn, __fdiv_rn and __fsqrt_rn; the sources are also built with --fmad=false.
//   No tensor cores, no atomics, no split reductions: the bits never depend on the GPU, the grid
//   or the shape.
// - The work is enqueued on |stream|; launchers never synchronize, allocate or copy. A launch
//   failure comes back as a status (tprt_cuda_status.h); a fault inside a kernel surfaces at the
//   caller's next synchronization. Empty outputs launch nothing.
// - Outputs must not overlap inputs, except tprt_cuda_add / tprt_cuda_mul, where c may be a or b.
// - Thread safety: launchers keep no state; concurrent calls on disjoint outputs are safe.
#ifndef TPRT_CUDA_KERNELS_H_
#define TPRT_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tprt_cpu_kernels.h"  // tprt_glu_kind_t
#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias[N]) with the canonical K accumulation over |chunks|: bitwise
/// tprt_cpu_linear. x, w and bias share a float dtype; y has it too, or is an f32 partial (the
/// unrounded tree sum, without bias). kernels/cuda/linear.cu.
tprt_status_t tprt_cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                               tprt_tensor_t* y, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// y[M,H] = x · rsqrt(mean(x²) + eps) · gamma with the canonical row reduction: bitwise
/// tprt_cpu_rmsnorm. gamma[H] may have any float dtype. kernels/cuda/norm.cu.
tprt_status_t tprt_cuda_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps,
                                cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// y[M,H] = (x - mean) · rsqrt(var + eps) · gamma + beta, two passes: bitwise
/// tprt_cpu_layernorm. beta has gamma's dtype. kernels/cuda/norm.cu.
tprt_status_t tprt_cuda_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                  tprt_tensor_t* y, float eps, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Gated linear unit over the last dimension, x[...,2F] -> y[...,F]: bitwise tprt_cpu_glu for
/// every |kind| (tprt_glu_kind_t) and |interleave| (0, or a block size dividing F).
/// kernels/cuda/glu.cu.
tprt_status_t tprt_cuda_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                            float limit, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// c = a + b elementwise (same shape and float dtype), rounded once: bitwise tprt_cpu_add. c may
/// alias a or b. kernels/cuda/elementwise.cu.
tprt_status_t tprt_cuda_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c,
                            cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// c = a · b elementwise, as tprt_cuda_add: bitwise tprt_cpu_mul. kernels/cuda/elementwise.cu.
tprt_status_t tprt_cuda_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c,
                            cudaStream_t stream) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CUDA_KERNELS_H_
