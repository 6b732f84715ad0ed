// The iteration of the GLU kernels (glu.cu, glu_grad.cu) on their fast path: output columns in
// runs of kVec consecutive columns (16 bytes of the dtype) whose gate and up input columns are
// consecutive too, one run per thread, grid stride, with a 32-bit division for the row where the
// runs fit it. The per-element arithmetic is the scalar kernels', so the bits are the same.
#ifndef TPRT_GLU_RUNS_CUH_
#define TPRT_GLU_RUNS_CUH_

#include <stdint.h>

#include "tprt_cuda_internal.cuh"

/// Whether a GLU of |f| output columns per row and |interleave| can take the runs: f and
/// interleave multiples of the vector and every tensor 16-byte aligned.
static inline bool tprt__glu_runs_fit(int dtype, int64_t f, int64_t interleave, const void* a, const void* b,
                                      const void* c) {
  const int64_t v = TPRT__CUDA_VEC16(dtype);
  return f % v == 0 && interleave % v == 0 && tprt__cuda_aligned16(a, b, c);
}

/// Blocks of a GLU launch over |total| outputs: one thread per run, or per output without runs.
static inline unsigned tprt__glu_blocks(int dtype, int64_t total, bool runs) {
  return tprt__cuda_ew_blocks(runs ? total / TPRT__CUDA_VEC16(dtype) : total, TPRT__CUDA_EW_THREADS);
}

/// Calls fn(row, j, gcol, ucol) for every run: output columns j .. j + kVec - 1 of |row|, with
/// gate columns gcol .. and up columns ucol .. of the row's 2f inputs (tprt_glu_columns of j).
template <int kVec, class Fn>
static __device__ __forceinline__ void tprt__glu_runs(int64_t rows, int64_t f, int64_t interleave, Fn fn) {
  const int64_t per_row = f / kVec, n = rows * per_row, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
    const int64_t row = n <= INT32_MAX ? (int64_t)((uint32_t)v / (uint32_t)per_row) : v / per_row;
    const int64_t j = (v - row * per_row) * kVec;
    int64_t gcol, ucol;
    tprt_glu_columns(j, f, interleave, &gcol, &ucol);
    fn(row, j, gcol, ucol);
  }
}

#endif  // TPRT_GLU_RUNS_CUH_
