// The cross-entropy ops' GEMMs as the exact kernels (gemm/linear.cu, gemm/linear_grad.c), for the
// GPU checks that set tprt_cuda_ce_gemms_t's other fields: a piece budget (tprt-cuda-check's
// 3-token pieces) or fast_math (tprt-cuda-check-fast, where only the fast math may differ).
#ifndef TPC_TEST_GPU_CE_EXACT_GEMMS_H_
#define TPC_TEST_GPU_CE_EXACT_GEMMS_H_

#include "tprt_cuda_kernels.h"

static inline tprt_status_t ce_exact_linear(void*, const tprt_tensor_t* x, const tprt_tensor_t* w, tprt_tensor_t* y,
                                            int chunks, cudaStream_t s) {
  return tprt_cuda_linear(x, w, NULL, y, chunks, s);
}
static inline tprt_status_t ce_exact_dgrad(void*, const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                           int chunks, cudaStream_t s) {
  return tprt_cuda_linear_dgrad_segmented(dy, w, dx, chunks, 1, 1, s);
}
static inline tprt_status_t ce_exact_wgrad(void*, const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                           int chunks, cudaStream_t s) {
  return tprt_cuda_linear_wgrad(dy, x, dw, chunks, s);
}

/// The exact GEMMs with |piece_bytes| (0: the default budget) and |fast_math|.
static inline tprt_cuda_ce_gemms_t ce_exact_gemms(size_t piece_bytes, bool fast_math) {
  return tprt_cuda_ce_gemms_t{ce_exact_linear, ce_exact_dgrad, ce_exact_wgrad, NULL, piece_bytes, fast_math};
}

#endif  // TPC_TEST_GPU_CE_EXACT_GEMMS_H_
