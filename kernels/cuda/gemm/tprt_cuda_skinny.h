// Fast numerics' linear of a few rows (kernels/cuda/gemm/linear_skinny.cu): a decoding step's
// y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias) for M ≤ TPRT_CUDA_SKINNY_MAX_ROWS, which streams the weight
// once at close to the memory's rate where a tiled GEMM leaves most of its tile empty.
#ifndef TPRT_CUDA_SKINNY_H_
#define TPRT_CUDA_SKINNY_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The most rows of x the skinny kernel takes. Each block reads every row of x once per weight
/// run of its 4 columns, so x's share of the loads grows with M: on an H100 (tprt-bench-gemm dense
/// M N K, docs/performance.md) one row streams the 1B model's MLP weight 12% faster than
/// cuBLASLt; four rows were 8% slower and eight 54% slower (a build that took up to 8 rows, not
/// in the repository).
#define TPRT_CUDA_SKINNY_MAX_ROWS 2

/// x[M,K] and w[N,K] of one 16-bit float type (bf16 or f16), y[M,N] and the optional bias[N] of
/// that type too, 1 ≤ M ≤ TPRT_CUDA_SKINNY_MAX_ROWS, K a multiple of 8 and x, w 16-byte aligned.
bool tprt_cuda_linear_skinny_fits(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                  const tprt_tensor_t* y);

/// y = x·wᵀ (+ bias) rounded once to y's type, f32 accumulation in no promised order (fast
/// numerics): each block takes 4 columns of y for every row, its 256 threads split K in 16-byte
/// runs of w and x, and the partial sums meet by warp shuffles and shared memory.
tprt_status_t tprt_cuda_linear_skinny(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                      tprt_tensor_t* y, cudaStream_t stream) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CUDA_SKINNY_H_
