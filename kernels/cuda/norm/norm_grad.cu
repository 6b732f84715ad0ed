// tprt_cuda_rmsnorm_grad and tprt_cuda_layernorm_grad in exact mode, bitwise equal to the CPU
// kernels of cpu_norm_grad.c (the formulas are there). Two kernels:
//   1. one 256-thread block per row (the 256 lanes of the canonical row reduction, as in norm.cu):
//      mean (layernorm), r, xhat (kept in an f32 scratch row for the parameter gradients),
//      g = dy·gamma, the lane sums of g (layernorm) and of g·xhat (fmaf), their row trees, and dx.
//   2. dgamma (and dbeta): the canonical K accumulation over the rows, in two kernels: one thread
//      per (chunk, column) sums its chunk's rows in increasing order into an f32 partial, then one
//      thread per column combines the partials by the pairwise tree, built as a binary counter
//      (merging equal-level partials as they complete: the same pairs as the tree, in order).
// The launcher allocates the xhat scratch and the chunk partials with the stream-ordered allocator.
#include "tprt_cuda_internal.cuh"

#define TPRT__NG_THREADS TPRT_ROW_LANES

template <int D>
static __global__ void __launch_bounds__(TPRT__NG_THREADS)
    tprt__norm_grad_rows(const void* __restrict__ x, const void* __restrict__ gamma, int g_dtype,
                         const void* __restrict__ dy, void* __restrict__ dx, float* __restrict__ xh, int64_t m,
                         int64_t h, float hf, float eps, int layernorm) {
  __shared__ float sm[TPRT_ROW_LANES / 32 + 1];
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t base = row * h;
    float mean = 0.0f;
    if (layernorm) {
      float acc = 0.0f;
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) acc = __fadd_rn(acc, tprt__cuda_ld(x, D, base + j));
      mean = __fdiv_rn(tprt__cuda_row_tree(acc, sm), hf);
    }
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) {
      float d = tprt__cuda_ld(x, D, base + j);
      if (layernorm) d = __fsub_rn(d, mean);
      acc = __fmaf_rn(d, d, acc);
    }
    const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
    float sum_g = 0.0f, dot = 0.0f;
    for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) {
      float d = tprt__cuda_ld(x, D, base + j);
      if (layernorm) d = __fsub_rn(d, mean);
      const float xhat = __fmul_rn(d, r);
      const float g = __fmul_rn(tprt__cuda_ld(dy, D, base + j), tprt__cuda_ld(gamma, g_dtype, j));
      xh[base + j] = xhat;
      sum_g = __fadd_rn(sum_g, g);
      dot = __fmaf_rn(g, xhat, dot);
    }
    const float a = layernorm ? __fdiv_rn(tprt__cuda_row_tree(sum_g, sm), hf) : 0.0f;
    const float c = __fdiv_rn(tprt__cuda_row_tree(dot, sm), hf);
    for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) {
      const float g = __fmul_rn(tprt__cuda_ld(dy, D, base + j), tprt__cuda_ld(gamma, g_dtype, j));
      const float t = layernorm ? __fsub_rn(g, a) : g;
      tprt__cuda_st(dx, D, base + j, __fmul_rn(__fmaf_rn(-xh[base + j], c, t), r));
    }
  }
}

// dgamma (and dbeta when |dbeta|), pass 1: one thread per (chunk, column) computes the chunk's
// partial sums over its rows in increasing order (+0.0 added to a short chunk) into pg[c, col]
// (pb[c, col]). Columns vary fastest across threads, so a warp reads consecutive columns of a row.
template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__norm_grad_chunks(const void* __restrict__ dy, const float* __restrict__ xh, float* __restrict__ pg,
                           float* __restrict__ pb, int64_t m, int64_t h, int chunks) {
  const int64_t size = tprt_kacc_chunk_size(m, chunks), stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)chunks * h; i += stride) {
    const int64_t col = i % h, c = i / h;
    int64_t m0 = c * size, m1 = m0 + size;
    if (m0 > m) m0 = m;
    if (m1 > m) m1 = m;
    float ag = 0.0f, ab = 0.0f;
#pragma unroll 8
    for (int64_t row = m0; row < m1; ++row) {
      const float d = tprt__cuda_ld(dy, D, row * h + col);
      ag = __fmaf_rn(d, xh[row * h + col], ag);
      ab = __fadd_rn(ab, d);
    }
    if (m1 - m0 < size) {
      ag = __fadd_rn(ag, 0.0f);
      ab = __fadd_rn(ab, 0.0f);
    }
    pg[i] = ag;
    if (pb) pb[i] = ab;
  }
}

// Pass 2: one thread per column combines its chunk partials by the pairwise tree, built as a
// binary counter (merging equal-level partials as they complete: the same pairs as the tree, in
// order), and rounds once.
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__norm_grad_tree(const float* __restrict__ pg, const float* __restrict__ pb, void* __restrict__ dgamma,
                         int dg_dtype, void* __restrict__ dbeta, int db_dtype, int64_t h, int chunks) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < h; col += stride) {
    float vg[12], vb[12];
    int lev[12], n = 0;
    for (int c = 0; c < chunks; ++c) {
      vg[n] = pg[(int64_t)c * h + col];
      vb[n] = pb ? pb[(int64_t)c * h + col] : 0.0f;
      lev[n++] = 0;
      while (n >= 2 && lev[n - 1] == lev[n - 2]) {  // p[i] = p[i] + p[i + s], as the tree does
        vg[n - 2] = __fadd_rn(vg[n - 2], vg[n - 1]);
        vb[n - 2] = __fadd_rn(vb[n - 2], vb[n - 1]);
        ++lev[n - 2];
        --n;
      }
    }
    tprt__cuda_st(dgamma, dg_dtype, col, vg[0]);
    if (dbeta) tprt__cuda_st(dbeta, db_dtype, col, vb[0]);
  }
}

/// |xh|: the xhat scratch [m, h] followed by the chunk partials [chunks, h] (twice with dbeta).
template <int D>
static void tprt__norm_grad_launch(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                   tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float* xh, float eps,
                                   int chunks, cudaStream_t stream) {
  const int64_t m = x->dims[0], h = x->dims[1];
  const float hf = (float)h;
  if (m > 0) {
    dim3 rows((unsigned)(m < 65536 ? m : 65536));
    tprt__norm_grad_rows<D><<<rows, TPRT__NG_THREADS, 0, stream>>>(x->data, gamma->data, gamma->dtype, dy->data,
                                                                   dx->data, xh, m, h, hf, eps, dbeta != NULL);
  }
  float* pg = xh + m * h;
  float* pb = dbeta ? pg + (int64_t)chunks * h : NULL;
  tprt__norm_grad_chunks<D><<<tprt__cuda_ew_blocks((int64_t)chunks * h, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS,
                              0, stream>>>(dy->data, xh, pg, pb, m, h, chunks);
  tprt__norm_grad_tree<<<tprt__cuda_ew_blocks(h, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0, stream>>>(
      pg, pb, dgamma->data, dgamma->dtype, dbeta ? dbeta->data : NULL, dbeta ? dbeta->dtype : 0, h, chunks);
}

static tprt_status_t tprt__cuda_norm_grad(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                          const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                          tprt_tensor_t* dbeta, float eps, int chunks, cudaStream_t stream) {
  tprt_status_t s = tprt__check_norm_grad(op, x, gamma, dy, dx, dgamma, dbeta, dbeta != NULL, eps, chunks);
  if (s) return s;
  const int64_t m = x->dims[0], h = x->dims[1];
  if (h == 0) return NULL;
  float* xh = NULL;
  const size_t scratch = (size_t)(m * h) + (size_t)(dbeta ? 2 : 1) * (size_t)chunks * (size_t)h;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&xh, scratch * sizeof(float), stream));
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    tprt__norm_grad_launch<decltype(d)::value>(x, gamma, dy, dx, dgamma, dbeta, xh, eps, chunks, stream);
  });
  cudaError_t e = cudaGetLastError();
  tprt__cuda_free_async(xh, stream);
  if (e != cudaSuccess) return tprt__cuda_make_status(e, "norm_grad kernels", __FILE__, __LINE__);
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                                float eps, int chunks, cudaStream_t stream) {
  return tprt__cuda_norm_grad("rmsnorm_grad", x, gamma, dy, dx, dgamma, NULL, eps, chunks, stream);
}

extern "C" tprt_status_t tprt_cuda_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                  const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                                  tprt_tensor_t* dbeta, float eps, int chunks, cudaStream_t stream) {
  return tprt__cuda_norm_grad("layernorm_grad", x, gamma, dy, dx, dgamma, dbeta, eps, chunks, stream);
}
