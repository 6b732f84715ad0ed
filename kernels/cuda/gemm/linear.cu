// tprt_cuda_linear: y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias[N]) in exact mode, bitwise equal to
// tprt_cpu_linear; and tprt_cuda_gemm_exact, the same GEMM with either operand read k-major,
// under the exact dgrad, wgrad and bias gradient (linear_grad.c). Every output element is the
// canonical K accumulation of docs/numerics.md (per chunk fmaf in increasing k from +0, acc + 0
// for a short chunk, the pairwise chunk tree), then (+ bias in f32) one rounding to y's dtype;
// the register-tiled GEMM tile of linear_tile.cuh computes it.
//
// Layouts: a [M,K] (ROWS) or [K,M] (KMAJOR), b [N,K] or [K,N], y [M,N], all dense row-major; bias
// [N]. Any alignment: 16-byte vector loads where the addresses and lengths allow them
// (tprt__gemm_vec), scalar loads otherwise. Dtypes: a, b, bias bf16 / f16 / f32 (one kernel
// each); y has their dtype, or is f32 (a partial: the tree sum itself, no bias).
//
// Launch geometry: a block of 256 threads computes one BM x BN tile of y: 128 x 128 (8 x 8 per
// thread) when that gives at least one block per SM, else 64 x 64 (4 x 4 per thread; small M or
// N, such as decode steps). grid.x covers N, grid.y covers M (at most 65535 blocks; larger M
// loops). The bits never depend on the tile: every output's chain is the same sequence.
#include "linear_kernel.cuh"

// Most blocks along grid.y (the CUDA limit).
#define TPRT__GEMM_MAX_GRID_Y 65535

/// Whether an operand allows the 16-byte loads of tprt__tile_loader<VEC = true>: a 16-byte
/// aligned base; ROWS: K and the chunk size multiples of the vector (every tile starts on one);
/// KMAJOR: its row count a multiple of the vector.
static bool tprt__gemm_vec_operand(const void* p, int kmajor, int64_t rows, int64_t k, int64_t size, int elem) {
  const int64_t v = 16 / elem;
  if ((uintptr_t)p % 16 != 0) return false;
  return kmajor ? rows % v == 0 : k % v == 0 && size % v == 0;
}

bool tprt__gemm_vec(const void* a, int a_kmajor, const void* b, int b_kmajor, int dtype, int64_t m, int64_t n,
                    int64_t k, int chunks) {
  const int elem = dtype == TPRT_DTYPE_F32 ? 4 : 2;
  const int64_t size = tprt_kacc_chunk_size(k, chunks);
  return chunks <= (1 << TPRT__GEMM_LEVELS_VEC) && tprt__gemm_vec_operand(a, a_kmajor, m, k, size, elem) &&
         tprt__gemm_vec_operand(b, b_kmajor, n, k, size, elem);
}

bool tprt__gemm_large_tile(int tile, int64_t m, int64_t n) {
  if (tile != TPRT_CUDA_TILE_AUTO) return tile == TPRT_CUDA_TILE_LARGE;
  int dev = 0, sms = 132;  // an H100's SM count if the query fails
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 132;
  }
  const int64_t blocks = tprt__cuda_div_up(m, tprt__tile_large::BM) * tprt__cuda_div_up(n, tprt__tile_large::BN);
  return blocks >= sms;
}

extern "C" tprt_status_t tprt_cuda_gemm_exact(const void* a, int a_kmajor, const void* b, int b_kmajor, int dtype,
                                              int64_t m, int64_t n, int64_t k, const void* bias, void* y, int y_dtype,
                                              int chunks, int tile, cudaStream_t stream) {
  if (m == 0 || n == 0) return NULL;  // K = 0 is computed: y = bias (or +0)
  const bool large = tprt__gemm_large_tile(tile, m, n);
  const bool vec = tprt__gemm_vec(a, a_kmajor, b, b_kmajor, dtype, m, n, k, chunks);
  const void* kernel = a_kmajor ? (b_kmajor ? tprt__gemm_pick<TPRT__KMAJOR, TPRT__KMAJOR>(large, dtype, vec)
                                            : tprt__gemm_pick<TPRT__KMAJOR, TPRT__ROWS>(large, dtype, vec))
                                : (b_kmajor ? tprt__gemm_pick<TPRT__ROWS, TPRT__KMAJOR>(large, dtype, vec)
                                            : tprt__gemm_pick<TPRT__ROWS, TPRT__ROWS>(large, dtype, vec));
  if (!kernel)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "linear: no CUDA kernel for dtype %s", tprt_dtype_name(dtype));
  const int bm = large ? tprt__tile_large::BM : tprt__tile_small::BM;
  const int bn = large ? tprt__tile_large::BN : tprt__tile_small::BN;
  const int threads = large ? tprt__tile_large::THREADS : tprt__tile_small::THREADS;
  int64_t blocks_n = tprt__cuda_div_up(n, bn), blocks_m = tprt__cuda_div_up(m, bm);
  if (blocks_n > INT32_MAX)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "linear: N=%lld needs more than 2^31-1 blocks", (long long)n);
  dim3 grid((unsigned)blocks_n, (unsigned)(blocks_m < TPRT__GEMM_MAX_GRID_Y ? blocks_m : TPRT__GEMM_MAX_GRID_Y));
  int64_t size = tprt_kacc_chunk_size(k, chunks);
  void* args[] = {&a, &b, &bias, &y, &y_dtype, &m, &n, &k, &chunks, &size};
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(threads), args, 0, stream));
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_linear_tiled(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                const tprt_tensor_t* bias, tprt_tensor_t* y, int chunks, int tile,
                                                cudaStream_t stream) {
  tprt_status_t s = tprt__check_linear(x, w, bias, y, chunks);  // cpu_linear.c's checks and messages
  if (s) return s;
  if (x->dtype != TPRT_DTYPE_BF16 && x->dtype != TPRT_DTYPE_F16 && x->dtype != TPRT_DTYPE_F32)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "linear: no CUDA kernel for dtype %s",
                            tprt_dtype_name(x->dtype));
  return tprt_cuda_gemm_exact(x->data, 0, w->data, 0, x->dtype, x->dims[0], w->dims[0], x->dims[1],
                              bias ? bias->data : NULL, y->data, y->dtype, chunks, tile, stream);
}

extern "C" tprt_status_t tprt_cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                          tprt_tensor_t* y, int chunks, cudaStream_t stream) {
  return tprt_cuda_linear_tiled(x, w, bias, y, chunks, TPRT_CUDA_TILE_AUTO, stream);
}
