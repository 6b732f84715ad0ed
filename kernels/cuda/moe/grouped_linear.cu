// tprt_cuda_grouped_linear: y[T,N] = x[T,K]·w[e,N,K]ᵀ for the rows of each expert e of w[E,N,K],
// in exact mode, bitwise equal to tprt_cpu_grouped_linear; and tprt_cuda_grouped_gemm_exact, the
// same with w[e] read k-major (w[E,K,N]: the grouped dgrad's operand as stored). group_sizes[S*E]
// (i64, device memory) splits T into S segments of capacity T/S; segment s holds
// group_sizes[s*E + j] rows of expert j for j = 0..E-1, in order, then padding rows whose outputs
// are +0.0 (all-zero bits in every dtype). Every real output element is the canonical K
// accumulation of docs/numerics.md, computed by the register-tiled GEMM tile of linear_tile.cuh
// exactly as in linear.cu: per chunk acc = +0, acc = fmaf(x, w, acc) in increasing k, acc + 0 for
// a short chunk; the pairwise tree over chunks; round once.
//
// Layouts: x [T,K], w [E,N,K] (or [E,K,N]), y [T,N] dense row-major; any alignment (16-byte
// loads where allowed, as in linear.cu). Dtypes: x, w bf16 / f16 / f32; y x's dtype or f32 (the
// unrounded partial).
//
// group_sizes is never read on the host (validation covers shapes only). Counts the CPU kernel
// would reject (negative, over T/S, a segment over capacity, S == 1 not summing to T) are a
// precondition violation: the kernel clamps them so that it never reads or writes out of bounds,
// and the values of y are then unspecified.
//
// Launch geometry: linear.cu's tiles over y (grid.x over N, grid.y over T, at most 65535 blocks,
// larger T loops). A block first finds the expert of each of its rows (a walk over the row's
// segment counts), writes +0.0 to its padding rows, then computes the tile once per expert present
// among its rows, in increasing expert order, with that expert's w, and stores only that expert's
// rows. Rows are sorted by expert within a segment, so a tile usually holds one or two experts;
// each extra expert costs one more pass over K (bounded by the number of expert runs).
#include <limits.h>

#include "gemm/linear_tile.cuh"

// Most blocks along grid.y (the CUDA limit).
#define TPRT__GL_MAX_GRID_Y 65535
// No expert left in a tile.
#define TPRT__GL_DONE INT_MAX

// ------------------------------------------------------------------------------------------------
// GPU kernel
// ------------------------------------------------------------------------------------------------

/// The expert of row |m| (or -1 for a padding row): walks the counts of m's segment, clamped to
/// [0, cap] so that invalid counts cannot index past w.
static __device__ __forceinline__ int tprt__gl_expert(const int64_t* sizes, int64_t m, int64_t cap, int64_t e) {
  const int64_t seg = m / cap;
  int64_t local = m - seg * cap, start = 0;
  for (int64_t j = 0; j < e; ++j) {
    int64_t n = sizes[seg * e + j];
    n = n < 0 ? 0 : n > cap ? cap : n;
    if (local < start + n) return (int)j;
    start += n;
  }
  return -1;
}

// The scalar kernels (the fallback) may take every register (one block per SM): the row walk of
// the experts holds more state than a dense tile, and two blocks per SM would spill.
template <class C, int D, bool VEC, int LEVELS, int LB>
static __global__ void __launch_bounds__(C::THREADS, VEC ? C::MIN_BLOCKS : 1)
    tprt__grouped_gemm_kernel(const void* __restrict__ x, const void* __restrict__ w, const int64_t* __restrict__ sizes,
                              void* __restrict__ y, int y_dtype, int64_t t, int64_t n, int64_t k, int64_t e,
                              int64_t cap, int chunks, int64_t size) {
  __shared__ __align__(16) tprt__tile_smem<C> sm;
  __shared__ int row_expert[C::BM];  // the expert of each tile row; -1 padding, -2 past T
  __shared__ int next_expert;
  const int64_t n0 = (int64_t)blockIdx.x * C::BN;
  const size_t expert_bytes = (size_t)(n * k) * tprt__elem<D>::BYTES;
  for (int64_t m0 = (int64_t)blockIdx.y * C::BM; m0 < t; m0 += (int64_t)gridDim.y * C::BM) {
    __syncthreads();  // the previous tile's row_expert and next_expert are no longer read
    for (int r = threadIdx.x; r < C::BM; r += C::THREADS)
      row_expert[r] = m0 + r < t ? tprt__gl_expert(sizes, m0 + r, cap, e) : -2;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < C::TM; ++i) {  // padding rows: +0.0, all-zero bits
      const int row = tprt__tile_row<C>(i);
      if (row_expert[row] != -1) continue;
#pragma unroll
      for (int j = 0; j < C::TN; ++j) {
        const int64_t gn = n0 + tprt__tile_col<C>(j);
        if (gn < n) tprt__cuda_st(y, y_dtype, (m0 + row) * n + gn, 0.0f);
      }
    }
    for (int ex = -1;;) {
      if (threadIdx.x < 32) {  // warp 0: the smallest expert above ex among the tile's rows
        int best = TPRT__GL_DONE;
        for (int r = threadIdx.x; r < C::BM; r += 32) {
          const int v = row_expert[r];
          if (v > ex && v < best) best = v;
        }
#pragma unroll
        for (int s = 16; s >= 1; s /= 2) best = min(best, __shfl_xor_sync(0xFFFFFFFFu, best, s));
        if (threadIdx.x == 0) next_expert = best;
      }
      __syncthreads();
      ex = next_expert;  // rewritten only after tprt__tile_gemm's barriers, or the next tile's
      if (ex == TPRT__GL_DONE) break;
      float acc[C::TM][C::TN];
      tprt__tile_gemm<C, D, VEC, LEVELS, TPRT__ROWS, LB>(x, t, m0, (const char*)w + (size_t)ex * expert_bytes, n, n0, k,
                                                         chunks, size, sm, acc);
#pragma unroll
      for (int i = 0; i < C::TM; ++i) {
        const int row = tprt__tile_row<C>(i);
        if (row_expert[row] != ex) continue;
#pragma unroll
        for (int j = 0; j < C::TN; ++j) {
          const int64_t gn = n0 + tprt__tile_col<C>(j);
          if (gn < n) tprt__cuda_st(y, y_dtype, (m0 + row) * n + gn, acc[i][j]);
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Kernel launchers
// ------------------------------------------------------------------------------------------------

/// The kernel for (tile, dtype, vector loads) and w's layout LB.
template <int LB>
static const void* tprt__gl_pick(bool large, int dtype, bool vec) {
#define TPRT__PICK(C, D)                                                                     \
  return vec ? (const void*)tprt__grouped_gemm_kernel<C, D, true, TPRT__GEMM_LEVELS_VEC, LB> \
             : (const void*)tprt__grouped_gemm_kernel<C, D, false, TPRT__GEMM_LEVELS_ANY, LB>
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

extern "C" tprt_status_t tprt_cuda_grouped_gemm_exact(const void* x, const void* w, int w_kmajor, int dtype, int64_t t,
                                                      int64_t n, int64_t k, int64_t e, const int64_t* sizes,
                                                      int64_t segs, void* y, int y_dtype, int chunks, int tile,
                                                      cudaStream_t stream) {
  if (t == 0 || n == 0) return NULL;
  const bool large = tprt__gemm_large_tile(tile, t, n);
  const bool vec = tprt__gemm_vec(x, 0, w, w_kmajor, dtype, t, n, k, chunks);
  const void* kernel =
      w_kmajor ? tprt__gl_pick<TPRT__KMAJOR>(large, dtype, vec) : tprt__gl_pick<TPRT__ROWS>(large, dtype, vec);
  if (!kernel)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "grouped_linear: no CUDA kernel for dtype %s",
                            tprt_dtype_name(dtype));
  const int bm = large ? tprt__tile_large::BM : tprt__tile_small::BM;
  const int bn = large ? tprt__tile_large::BN : tprt__tile_small::BN;
  const int threads = large ? tprt__tile_large::THREADS : tprt__tile_small::THREADS;
  int64_t blocks_n = tprt__cuda_div_up(n, bn), blocks_m = tprt__cuda_div_up(t, bm);
  if (blocks_n > INT32_MAX)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "grouped_linear: N=%lld needs more than 2^31-1 blocks",
                            (long long)n);
  dim3 grid((unsigned)blocks_n, (unsigned)(blocks_m < TPRT__GL_MAX_GRID_Y ? blocks_m : TPRT__GL_MAX_GRID_Y));
  int64_t cap = t / segs, size = tprt_kacc_chunk_size(k, chunks);
  void* args[] = {&x, &w, &sizes, &y, &y_dtype, &t, &n, &k, &e, &cap, &chunks, &size};
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(threads), args, 0, stream));
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_tiled(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                        const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks,
                                                        int tile, cudaStream_t stream) {
  int64_t segs = 1;
  // cpu_linear.c's checks and messages, but the counts: they are device data here.
  tprt_status_t s = tprt__check_grouped_linear(x, w, group_sizes, y, chunks, &segs);
  if (s) return s;
  if (x->dtype != TPRT_DTYPE_BF16 && x->dtype != TPRT_DTYPE_F16 && x->dtype != TPRT_DTYPE_F32)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "grouped_linear: no CUDA kernel for dtype %s",
                            tprt_dtype_name(x->dtype));
  return tprt_cuda_grouped_gemm_exact(x->data, w->data, 0, x->dtype, x->dims[0], w->dims[1], x->dims[1], w->dims[0],
                                      (const int64_t*)group_sizes->data, segs, y->data, y->dtype, chunks, tile, stream);
}

extern "C" tprt_status_t tprt_cuda_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                  const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks,
                                                  cudaStream_t stream) {
  return tprt_cuda_grouped_linear_tiled(x, w, group_sizes, y, chunks, TPRT_CUDA_TILE_AUTO, stream);
}
