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

/// One row loop for both norms; |beta| NULL means RMSNorm.
template <int D>
static __device__ __forceinline__ void tprt__norm_body(const void* __restrict__ x, const void* __restrict__ gamma,
                                                       const void* __restrict__ beta, int g_dtype, void* __restrict__ y,
                                                       int64_t m, int64_t h, float hf, float eps) {
  __shared__ float sm[TPRT__NORM_WARPS + 1];
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t base = row * h;
    if (!beta) {
      float acc = 0.0f;
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NORM_THREADS) {
        float v = tprt__cuda_ld(x, D, base + j);
        acc = __fmaf_rn(v, v, acc);
      }
      const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NORM_THREADS) {
        float v = tprt__cuda_ld(x, D, base + j);
        tprt__cuda_st(y, D, base + j, __fmul_rn(__fmul_rn(v, r), tprt__cuda_ld(gamma, g_dtype, j)));
      }
    } else {
      float acc = 0.0f;
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NORM_THREADS) acc = __fadd_rn(acc, tprt__cuda_ld(x, D, base + j));
      const float mean = __fdiv_rn(tprt__cuda_row_tree(acc, sm), hf);
      acc = 0.0f;
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NORM_THREADS) {
        float d = __fsub_rn(tprt__cuda_ld(x, D, base + j), mean);
        acc = __fmaf_rn(d, d, acc);
      }
      const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NORM_THREADS) {
        float d = __fsub_rn(tprt__cuda_ld(x, D, base + j), mean);
        float v = __fmul_rn(__fmul_rn(d, r), tprt__cuda_ld(gamma, g_dtype, j));
        tprt__cuda_st(y, D, base + j, __fadd_rn(v, tprt__cuda_ld(beta, g_dtype, j)));
      }
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
