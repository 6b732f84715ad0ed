// The iteration of the GLU kernels (glu.cu, glu_grad.cu) on their fast path: output columns in
// runs of kVec consecutive columns (16 bytes of the dtype) whose gate and up input columns are
// consecutive too, one run per thread, grid stride, with 32-bit index arithmetic where the runs fit
// it. The per-element arithmetic is the scalar kernels', so the bits are the same.
#ifndef TPRT_GLU_RUNS_CUH_
#define TPRT_GLU_RUNS_CUH_

#include <stdint.h>

#include "tprt_cuda_internal.cuh"

/// Elements of |dtype| in a 16-byte vector.
#define TPRT__GLU_VEC(dtype) ((dtype) == TPRT_DTYPE_F32 ? 4 : 8)

/// Whether a GLU of |f| output columns per row and |interleave| can take the runs: f and
/// interleave multiples of the vector and every tensor 16-byte aligned.
static inline bool tprt__glu_runs_fit(int dtype, int64_t f, int64_t interleave, const void* a, const void* b,
                                      const void* c) {
  const int64_t v = TPRT__GLU_VEC(dtype);
  return f % v == 0 && interleave % v == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16) == 0;
}

/// Calls fn(row, j, gcol, ucol) for every run: output columns j .. j + kVec - 1 of |row|, with
/// gate columns gcol .. and up columns ucol .. of the row's 2f inputs.
template <int kVec, class Fn>
static __device__ __forceinline__ void tprt__glu_runs(int64_t rows, int64_t f, int64_t interleave, Fn fn) {
  const int64_t per_row = f / kVec, n = rows * per_row, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
    int64_t row, run;
    if (n <= INT32_MAX) {
      row = (uint32_t)v / (uint32_t)per_row;
      run = v - row * per_row;
    } else {
      row = v / per_row;
      run = v % per_row;
    }
    const int64_t j = run * kVec;
    int64_t gcol, ucol;
    if (interleave > 0 && f <= INT32_MAX) {
      const int64_t block = (uint32_t)j / (uint32_t)interleave, off = j - block * interleave;
      gcol = 2 * block * interleave + off;
      ucol = gcol + interleave;
    } else {
      tprt_glu_columns(j, f, interleave, &gcol, &ucol);
    }
    fn(row, j, gcol, ucol);
  }
}

#endif  // TPRT_GLU_RUNS_CUH_
