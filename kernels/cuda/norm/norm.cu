// tprt_cuda_rmsnorm and tprt_cuda_layernorm in exact mode, bitwise equal to tprt_cpu_rmsnorm and
// tprt_cpu_layernorm. Per row of x[M,H], in f32, with the canonical row reduction of
// docs/numerics.md:
//   rmsnorm    ms = sumsq(x) / H;              r = 1 / sqrtf(ms + eps);  y = (x · r) · gamma
//   layernorm  mean = sum(x) / H;  d = x - mean;  var = sumsq(d) / H;
//              r = 1 / sqrtf(var + eps);  y = ((d · r) · gamma) + beta
// then one rounding to x's dtype. H is converted to f32 on the host (RNE, exact below 2^24).
//
// Layouts: x, y [M,H] dense row-major; gamma, beta [H]. Any alignment (scalar loads).
// Dtypes: x and y bf16 / f16 / f32 (one kernel per dtype and op: tprt_<op>_kernel_<dtype>);
// gamma (and beta, same dtype) any of the three, chosen at run time.
//
// Launch geometry: one 256-thread block per row, which is exactly the 256 lanes of the canonical
// reduction: thread j accumulates elements j, j+256, j+512, ... in order (coalesced: a warp reads
// 32 consecutive elements per step), each warp reduces its 32 lanes with __shfl_down_sync at
// offsets 16, 8, 4, 2, 1 (lane j += lane j+s), and warp 0 reduces the 8 warp results at offsets
// 4, 2, 1. Second and third passes re-read the row (it is in L1/L2). Grid: min(M, 65536) blocks,
// larger M loops over rows.
#include "norm_rows.cuh"
#include "tprt_cuda_internal.cuh"

// Threads per block: the 256 lanes of the canonical row reduction (8 warps of 32).
#define TPRT__NORM_THREADS TPRT_ROW_LANES
// Lanes per warp: also the size of a group of the canonical reduction's first level.
#define TPRT__NORM_WARP_SIZE 32
// Warps per block, the number of group results combined at the second level.
#define TPRT__NORM_WARPS (TPRT__NORM_THREADS / TPRT__NORM_WARP_SIZE)
// Most blocks launched; rows beyond loop (grid stride). See TPRT__CUDA_EW_MAX_BLOCKS.
#define TPRT__NORM_MAX_BLOCKS 65536

static_assert(TPRT__NORM_THREADS == 256 && TPRT__NORM_WARPS == 8, "the canonical reduction has 256 lanes");

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

// Loads a thread issues before it uses them: the lane's elements in flight together rather than
// one load, then its arithmetic, at a time (a row of a decoding step is one block's work, so
// nothing else hides the latency).
#define TPRT__NORM_BATCH 8

/// Thread t's elements of a row of h, t, t + 256, t + 512, ... in increasing order (the canonical
/// lane order): |load|(j) for a batch of them, then |use|(j, value) for each in order.
template <class Load, class Use>
static __device__ __forceinline__ void tprt__norm_lanes(int64_t h, Load load, Use use) {
  for (int64_t j0 = threadIdx.x; j0 < h; j0 += (int64_t)TPRT__NORM_BATCH * TPRT__NORM_THREADS) {
    float v[TPRT__NORM_BATCH];
#pragma unroll
    for (int i = 0; i < TPRT__NORM_BATCH; ++i) {
      const int64_t j = j0 + (int64_t)i * TPRT__NORM_THREADS;
      v[i] = j < h ? load(j) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < TPRT__NORM_BATCH; ++i) {
      const int64_t j = j0 + (int64_t)i * TPRT__NORM_THREADS;
      if (j < h) use(j, v[i]);
    }
  }
}

/// One row loop for both norms; |beta| NULL means RMSNorm.
template <int D>
static __device__ __forceinline__ void tprt__norm_body(const void* __restrict__ x, const void* __restrict__ gamma,
                                                       const void* __restrict__ beta, int g_dtype, void* __restrict__ y,
                                                       int64_t m, int64_t h, float hf, float eps) {
  __shared__ float sm[TPRT__NORM_WARPS + 1];
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t base = row * h;
    auto ld_x = [&](int64_t j) { return tprt__cuda_ld(x, D, base + j); };
    if (!beta) {
      float acc = 0.0f;
      tprt__norm_lanes(h, ld_x, [&](int64_t, float v) { acc = __fmaf_rn(v, v, acc); });
      const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
      tprt__norm_lanes(h, ld_x, [&](int64_t j, float v) {
        tprt__cuda_st(y, D, base + j, __fmul_rn(__fmul_rn(v, r), tprt__cuda_ld(gamma, g_dtype, j)));
      });
    } else {
      float acc = 0.0f;
      tprt__norm_lanes(h, ld_x, [&](int64_t, float v) { acc = __fadd_rn(acc, v); });
      const float mean = __fdiv_rn(tprt__cuda_row_tree(acc, sm), hf);
      acc = 0.0f;
      tprt__norm_lanes(h, ld_x, [&](int64_t, float v) {
        const float d = __fsub_rn(v, mean);
        acc = __fmaf_rn(d, d, acc);
      });
      const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
      tprt__norm_lanes(h, ld_x, [&](int64_t j, float v) {
        const float d = __fsub_rn(v, mean);
        const float o = __fmul_rn(__fmul_rn(d, r), tprt__cuda_ld(gamma, g_dtype, j));
        tprt__cuda_st(y, D, base + j, __fadd_rn(o, tprt__cuda_ld(beta, g_dtype, j)));
      });
    }
  }
}

#define TPRT__NORM_KERNEL(name, dtype)                                                                               \
  extern "C" __global__ void __launch_bounds__(TPRT__NORM_THREADS)                                                   \
      name(const void* x, const void* gamma, const void* beta, int g_dtype, void* y, int64_t m, int64_t h, float hf, \
           float eps) {                                                                                              \
    tprt__norm_body<dtype>(x, gamma, beta, g_dtype, y, m, h, hf, eps);                                               \
  }
// RMSNorm and LayerNorm share a body (beta NULL selects RMSNorm) but keep their own entry points,
// so that a profile names the op.
TPRT__NORM_KERNEL(tprt_rmsnorm_kernel_bf16, TPRT_DTYPE_BF16)
TPRT__NORM_KERNEL(tprt_rmsnorm_kernel_f16, TPRT_DTYPE_F16)
TPRT__NORM_KERNEL(tprt_rmsnorm_kernel_f32, TPRT_DTYPE_F32)
TPRT__NORM_KERNEL(tprt_layernorm_kernel_bf16, TPRT_DTYPE_BF16)
TPRT__NORM_KERNEL(tprt_layernorm_kernel_f16, TPRT_DTYPE_F16)
TPRT__NORM_KERNEL(tprt_layernorm_kernel_f32, TPRT_DTYPE_F32)

/// tp.add_rmsnorm: sum = x + res rounded to D (tprt_cpu_add's element), normed = the canonical
/// rmsnorm of sum (tprt__norm_body's arithmetic on the rounded sum): the pair's bits in one
/// launch, sum written once and recomputed (not re-read) for the second pass.
template <int D>
static __device__ __forceinline__ void tprt__add_norm_body(const void* __restrict__ x, const void* __restrict__ res,
                                                           const void* __restrict__ gamma, int g_dtype,
                                                           void* __restrict__ y, void* __restrict__ sum, int64_t m,
                                                           int64_t h, float hf, float eps) {
  __shared__ float sm[TPRT__NORM_WARPS + 1];
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t base = row * h;
    auto ld_sum = [&](int64_t j) {
      return tprt__round_to<D>(__fadd_rn(tprt__cuda_ld(x, D, base + j), tprt__cuda_ld(res, D, base + j)));
    };
    float acc = 0.0f;
    tprt__norm_lanes(h, ld_sum, [&](int64_t j, float v) {
      tprt__cuda_st(sum, D, base + j, v);
      acc = __fmaf_rn(v, v, acc);
    });
    const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
    tprt__norm_lanes(h, ld_sum, [&](int64_t j, float v) {
      tprt__cuda_st(y, D, base + j, __fmul_rn(__fmul_rn(v, r), tprt__cuda_ld(gamma, g_dtype, j)));
    });
  }
}

template <int D>
static __global__ void __launch_bounds__(TPRT__NORM_THREADS)
    tprt__add_rmsnorm_kernel(const void* x, const void* res, const void* gamma, int g_dtype, void* y, void* sum,
                             int64_t m, int64_t h, float hf, float eps) {
  tprt__add_norm_body<D>(x, res, gamma, g_dtype, y, sum, m, h, hf, eps);
}

// ------------------------------------------------------------------------------------------------
// Kernel launcher (one for both ops; beta NULL is RMSNorm)
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__cuda_norm(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                     const tprt_tensor_t* beta, tprt_tensor_t* y, float eps, cudaStream_t stream) {
  tprt_status_t s = tprt__check_norm(op, x, gamma, beta, y, eps);
  if (s) return s;
  int64_t m = x->dims[0], h = x->dims[1];
  if (m == 0 || h == 0) return NULL;
  const void* kernel;
  switch (x->dtype) {
    case TPRT_DTYPE_BF16:
      kernel = beta ? (const void*)tprt_layernorm_kernel_bf16 : (const void*)tprt_rmsnorm_kernel_bf16;
      break;
    case TPRT_DTYPE_F16:
      kernel = beta ? (const void*)tprt_layernorm_kernel_f16 : (const void*)tprt_rmsnorm_kernel_f16;
      break;
    case TPRT_DTYPE_F32:
      kernel = beta ? (const void*)tprt_layernorm_kernel_f32 : (const void*)tprt_rmsnorm_kernel_f32;
      break;
    default:
      return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: no CUDA kernel for dtype %s", op,
                              tprt_dtype_name(x->dtype));
  }
  const void* xd = x->data;
  const void* gd = gamma->data;
  const void* bd = beta ? beta->data : NULL;
  void* yd = y->data;
  int g_dtype = gamma->dtype;
  float hf = (float)h;  // RNE, as the CPU kernel's conversion
  dim3 grid((unsigned)(m < TPRT__NORM_MAX_BLOCKS ? m : TPRT__NORM_MAX_BLOCKS));
  void* args[] = {&xd, &gd, &bd, &g_dtype, &yd, &m, &h, &hf, &eps};
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(TPRT__NORM_THREADS), args, 0, stream));
  return NULL;
}

tprt_status_t tprt_cuda_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps,
                                cudaStream_t stream) {
  return tprt__cuda_norm("rmsnorm", x, gamma, NULL, y, eps, stream);
}

tprt_status_t tprt_cuda_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                  tprt_tensor_t* y, float eps, cudaStream_t stream) {
  if (!beta) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "layernorm: beta is NULL");
  return tprt__cuda_norm("layernorm", x, gamma, beta, y, eps, stream);
}

tprt_status_t tprt_cuda_add_rmsnorm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                    tprt_tensor_t* normed, tprt_tensor_t* sum, float eps, cudaStream_t stream) {
  tprt_status_t s = tprt__check_add_norm(residual, y, gamma, normed, sum, eps);
  if (s) return s;
  const int64_t m = y->dims[0], h = y->dims[1];
  if (m == 0 || h == 0) return NULL;
  const unsigned grid = (unsigned)(m < TPRT__NORM_MAX_BLOCKS ? m : TPRT__NORM_MAX_BLOCKS);
  tprt__cuda_float_dispatch(y->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value;
    tprt__add_rmsnorm_kernel<D><<<grid, TPRT__NORM_THREADS, 0, stream>>>(
        y->data, residual->data, gamma->data, gamma->dtype, normed->data, sum->data, m, h, (float)h, eps);
  });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

// ------------------------------------------------------------------------------------------------
// Fast numerics: each row read once, into registers (norm_rows.cuh's runs), the next row's loads in
// flight; grid-stride over rows. Per row, in f32: rmsnorm r = rsqrtf(Σx² / H + eps),
// y = (x·r)·gamma; layernorm mean = Σx / H, d = x − mean, r = rsqrtf(Σd² / H + eps),
// y = (d·r)·gamma + beta; the sums in norm_rows.cuh's order. No bitwise promise (the hardware's
// rsqrtf, another reduction order than the canonical one).
// ------------------------------------------------------------------------------------------------

/// ADD (rmsnorm only): tp.add_rmsnorm, the row x + res rounded to D first (tprt_cpu_add's element),
/// stored to |sum| and normalized as the rmsnorm above normalizes a row: the unfused pair's bits.
template <int D, int NV, bool LN, bool ADD = false>
static __global__ void __launch_bounds__(kTprtNrThreads)
    tprt__norm_fast(const void* __restrict__ x, const void* __restrict__ gamma, const void* __restrict__ beta,
                    int g_dtype, void* __restrict__ y, int64_t m, int64_t h, float hf, float eps, bool aligned,
                    const void* __restrict__ res, void* __restrict__ sum) {
  static_assert(!(ADD && LN), "the add is fused with rmsnorm only");
  constexpr int V = tprt__nr_vec<D>::V, E = NV * V;
  __shared__ float sm[2 * 2 * (kTprtNrThreads / 32)];
  int64_t col[NV];
#pragma unroll
  for (int k = 0; k < NV; ++k) col[k] = (int64_t)(threadIdx.x + kTprtNrThreads * k) * V;
  float gam[E], bet[E];
  tprt__nr_params<V, NV>(gamma, g_dtype, col, h, gam);
  if (LN) tprt__nr_params<V, NV>(beta, g_dtype, col, h, bet);
  uint4 rx[NV], rr[NV];
  int64_t row = blockIdx.x;
  if (row < m)
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      rx[k] = tprt__nr_run<D>(x, row * h, col[k], h, aligned);
      if (ADD) rr[k] = tprt__nr_run<D>(res, row * h, col[k], h, aligned);
    }
  int parity = 0;
  for (; row < m; row += gridDim.x) {
    uint4 nx[NV], nr[NV];
    const int64_t next = row + gridDim.x;
    if (next < m)
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        nx[k] = tprt__nr_run<D>(x, next * h, col[k], h, aligned);
        if (ADD) nr[k] = tprt__nr_run<D>(res, next * h, col[k], h, aligned);
      }
    float xv[E];
#pragma unroll
    for (int k = 0; k < NV; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e) xv[k * V + e] = tprt_load_elem(&rx[k], D, e);
    if (ADD) {  // zeros past H stay zeros
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        float sv[V];
#pragma unroll
        for (int e = 0; e < V; ++e) sv[e] = __fadd_rn(xv[k * V + e], tprt_load_elem(&rr[k], D, e));
        const uint4 packed = tprt__nr_pack<D>(sv);
        tprt__nr_store<D>(sum, row * h, col[k], h, aligned, packed);
#pragma unroll
        for (int e = 0; e < V; ++e) xv[k * V + e] = tprt_load_elem(&packed, D, e);
      }
    }
    if (LN) tprt__nr_center<V, NV>(xv, col, h, hf, sm, parity);
    float s[1] = {0.0f};
#pragma unroll
    for (int i = 0; i < E; ++i) s[0] = __fmaf_rn(xv[i], xv[i], s[0]);
    tprt__nr_block_sum<1>(s, sm, parity);
    parity ^= 1;
    const float r = rsqrtf(__fadd_rn(__fdiv_rn(s[0], hf), eps));
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      float out[V];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        out[e] = __fmul_rn(__fmul_rn(xv[k * V + e], r), gam[k * V + e]);
        if (LN) out[e] = __fadd_rn(out[e], bet[k * V + e]);
      }
      tprt__nr_store<D>(y, row * h, col[k], h, aligned, tprt__nr_pack<D>(out));
    }
    if (next < m)
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        rx[k] = nx[k];
        if (ADD) rr[k] = nr[k];
      }
  }
}

template <int D, int NV>
static void tprt__norm_fast_launch(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                   tprt_tensor_t* y, float eps, int sms, cudaStream_t stream) {
  const int64_t m = x->dims[0], h = x->dims[1];
  const bool aligned = tprt__nr_aligned(h, D, {x->data, y->data});
  const int64_t most = (int64_t)sms * (2048 / kTprtNrThreads);
  const unsigned grid = (unsigned)(m < most ? m : most);
  auto kernel = beta ? tprt__norm_fast<D, NV, true> : tprt__norm_fast<D, NV, false>;
  kernel<<<grid, kTprtNrThreads, 0, stream>>>(x->data, gamma->data, beta ? beta->data : NULL, gamma->dtype, y->data,
                                              m, h, (float)h, eps, aligned, nullptr, nullptr);
}

static tprt_status_t tprt__cuda_norm_fast(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                          const tprt_tensor_t* beta, tprt_tensor_t* y, float eps,
                                          cudaStream_t stream) {
  tprt_status_t s = tprt__check_norm(op, x, gamma, beta, y, eps);
  if (s) return s;
  const int64_t m = x->dims[0], h = x->dims[1];
  const int nv = tprt__nr_runs(h, x->dtype);
  if (!nv) return tprt__cuda_norm(op, x, gamma, beta, y, eps, stream);  // rows too wide: the exact kernel
  if (m == 0 || h == 0) return NULL;
  int sms = 0;
  s = tprt_cuda_gemm_sms(&sms);  // the SMs left to compute kernels
  if (s) return s;
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (nv == 1)
      tprt__norm_fast_launch<D, 1>(x, gamma, beta, y, eps, sms, stream);
    else if (nv == 2)
      tprt__norm_fast_launch<D, 2>(x, gamma, beta, y, eps, sms, stream);
    else
      tprt__norm_fast_launch<D, kTprtNrMaxRuns>(x, gamma, beta, y, eps, sms, stream);
  });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

tprt_status_t tprt_cuda_rmsnorm_fast(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps,
                                     cudaStream_t stream) {
  return tprt__cuda_norm_fast("rmsnorm", x, gamma, NULL, y, eps, stream);
}

tprt_status_t tprt_cuda_layernorm_fast(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                       tprt_tensor_t* y, float eps, cudaStream_t stream) {
  if (!beta) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "layernorm: beta is NULL");
  return tprt__cuda_norm_fast("layernorm", x, gamma, beta, y, eps, stream);
}

template <int D, int NV>
static void tprt__add_norm_fast_launch(const tprt_tensor_t* res, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                       tprt_tensor_t* y, tprt_tensor_t* sum, float eps, int sms, cudaStream_t stream) {
  const int64_t m = x->dims[0], h = x->dims[1];
  const bool aligned = tprt__nr_aligned(h, D, {x->data, y->data, res->data, sum->data});
  const int64_t most = (int64_t)sms * (2048 / kTprtNrThreads);
  const unsigned grid = (unsigned)(m < most ? m : most);
  tprt__norm_fast<D, NV, false, true><<<grid, kTprtNrThreads, 0, stream>>>(
      x->data, gamma->data, NULL, gamma->dtype, y->data, m, h, (float)h, eps, aligned, res->data, sum->data);
}

tprt_status_t tprt_cuda_add_rmsnorm_fast(const tprt_tensor_t* residual, const tprt_tensor_t* y,
                                         const tprt_tensor_t* gamma, tprt_tensor_t* normed, tprt_tensor_t* sum,
                                         float eps, cudaStream_t stream) {
  tprt_status_t s = tprt__check_add_norm(residual, y, gamma, normed, sum, eps);
  if (s) return s;
  const int64_t m = y->dims[0], h = y->dims[1];
  const int nv = tprt__nr_runs(h, y->dtype);
  if (!nv) return tprt_cuda_add_rmsnorm(residual, y, gamma, normed, sum, eps, stream);  // rows too wide
  if (m == 0 || h == 0) return NULL;
  int sms = 0;
  s = tprt_cuda_gemm_sms(&sms);
  if (s) return s;
  tprt__cuda_float_dispatch(y->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (nv == 1)
      tprt__add_norm_fast_launch<D, 1>(residual, y, gamma, normed, sum, eps, sms, stream);
    else if (nv == 2)
      tprt__add_norm_fast_launch<D, 2>(residual, y, gamma, normed, sum, eps, sms, stream);
    else
      tprt__add_norm_fast_launch<D, kTprtNrMaxRuns>(residual, y, gamma, normed, sum, eps, sms, stream);
  });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}
