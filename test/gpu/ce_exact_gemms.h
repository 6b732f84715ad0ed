// The cross-entropy ops' GEMMs as the exact kernels (gemm/linear.cu, gemm/linear_grad.c), for the
// GPU checks that set tprt_cuda_ce_gemms_t's other fields: a piece budget (tprt-cuda-check's
// 3-token pieces), the math and the accumulating wgrad (tprt-cuda-check-fast, where only those may
// differ).
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

/// dw += dyᵀ·x: the exact wgrad (one chunk) into a temporary, then the exact add.
static inline tprt_status_t ce_exact_wgrad_acc(void*, const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                               tprt_tensor_t* dw, cudaStream_t s) {
  tprt_tensor_t part = *dw;
  if (cudaMalloc(&part.data, tprt_tensor_bytes(dw) + 16) != cudaSuccess)
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "ce_exact_wgrad_acc: no memory");
  tprt_status_t st = tprt_cuda_linear_wgrad(dy, x, &part, 1, s);
  if (!st) st = tprt_cuda_add(dw, &part, dw, s);
  cudaStreamSynchronize(s);
  cudaFree(part.data);
  return st;
}

/// The exact GEMMs with |piece_bytes| (0: the default budget), |math| and, with |acc|, the
/// accumulating wgrad.
static inline tprt_cuda_ce_gemms_t ce_exact_gemms(size_t piece_bytes, tprt_cuda_ce_math_t math, bool acc = false) {
  return tprt_cuda_ce_gemms_t{ce_exact_linear, ce_exact_dgrad,    ce_exact_wgrad, acc ? ce_exact_wgrad_acc : NULL,
                              NULL,            piece_bytes,       math};
}

#endif  // TPC_TEST_GPU_CE_EXACT_GEMMS_H_
