// The exact GEMM kernel of linear.cu (its header says what it computes, its layouts and launch
// geometry) and the pick of one instantiation: per operand layout pair (a ROWS or KMAJOR, b ROWS
// or KMAJOR), the kernels for every dtype, tile and load width (12 each). Each layout pair's
// instantiations compile in a file of their own (layouts/), so that the four compile side by
// side; linear.cu sees only the declarations at the end.
#pragma once

#include "linear_tile.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernel
// ------------------------------------------------------------------------------------------------

template <class C, int D, bool VEC, int LEVELS, int LA, int LB>
static __global__ void __launch_bounds__(C::THREADS, C::MIN_BLOCKS)
    tprt__gemm_kernel(const void* __restrict__ a, const void* __restrict__ b, const void* __restrict__ bias,
                      void* __restrict__ y, int y_dtype, int64_t m, int64_t n, int64_t k, int chunks, int64_t size) {
  __shared__ __align__(16) tprt__tile_smem<C> sm;
  const int64_t n0 = (int64_t)blockIdx.x * C::BN;
  for (int64_t m0 = (int64_t)blockIdx.y * C::BM; m0 < m; m0 += (int64_t)gridDim.y * C::BM) {
    float acc[C::TM][C::TN];
    tprt__tile_gemm<C, D, VEC, LEVELS, LA, LB>(a, m, m0, b, n, n0, k, chunks, size, sm, acc);
#pragma unroll
    for (int i = 0; i < C::TM; ++i) {
      const int64_t gm = m0 + tprt__tile_row<C>(i);
#pragma unroll
      for (int j = 0; j < C::TN; ++j) {
        const int64_t gn = n0 + tprt__tile_col<C>(j);
        if (gm < m && gn < n) {
          float v = acc[i][j];
          if (bias) v = __fadd_rn(v, tprt__cuda_ld(bias, D, gn));
          tprt__cuda_st(y, y_dtype, gm * n + gn, v);
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Kernel launcher
// ------------------------------------------------------------------------------------------------

/// The kernel for (tile, dtype, vector loads) and the layouts LA, LB.
template <int LA, int LB>
const void* tprt__gemm_pick(bool large, int dtype, bool vec) {
#define TPRT__PICK(C, D)                                                                 \
  return vec ? (const void*)tprt__gemm_kernel<C, D, true, TPRT__GEMM_LEVELS_VEC, LA, LB> \
             : (const void*)tprt__gemm_kernel<C, D, false, TPRT__GEMM_LEVELS_ANY, LA, LB>
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      if (large) TPRT__PICK(tprt__tile_large, TPRT_DTYPE_BF16);
      TPRT__PICK(tprt__tile_small, TPRT_DTYPE_BF16);
    case TPRT_DTYPE_F16:
      if (large) TPRT__PICK(tprt__tile_large, TPRT_DTYPE_F16);
      TPRT__PICK(tprt__tile_small, TPRT_DTYPE_F16);
    case TPRT_DTYPE_F32:
      if (large) TPRT__PICK(tprt__tile_large, TPRT_DTYPE_F32);
      TPRT__PICK(tprt__tile_small, TPRT_DTYPE_F32);
    default:
      return NULL;
  }
#undef TPRT__PICK
}

// The four layout pairs, each instantiated by one file of layouts/ only.
extern template const void* tprt__gemm_pick<TPRT__ROWS, TPRT__ROWS>(bool, int, bool);
extern template const void* tprt__gemm_pick<TPRT__ROWS, TPRT__KMAJOR>(bool, int, bool);
extern template const void* tprt__gemm_pick<TPRT__KMAJOR, TPRT__ROWS>(bool, int, bool);
extern template const void* tprt__gemm_pick<TPRT__KMAJOR, TPRT__KMAJOR>(bool, int, bool);
