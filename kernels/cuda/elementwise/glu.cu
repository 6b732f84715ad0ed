// tprt_cuda_glu: gated linear units over the last dimension in exact mode, bitwise equal to
// tprt_cpu_glu (docs/numerics.md, "GLU"). For output column j of a row:
//   swiglu       y = silu(g) · u
//   geglu        y = gelu_tanh(g) · u
//   quick_geglu  g' = g > limit ? limit : g;  u' = clamp(u, -limit, limit) by comparisons;
//                y = quick_gelu(g', alpha) · (u' + 1)                      (TE ClampedQGeGLU)
// in f32 with the special functions of tprt_numerics.h (the same source as the CPU build), rounded
// once. interleave 0: g = x[row, j], u = x[row, F + j]; interleave b: g = x[row, 2b·⌊j/b⌋ + j mod
// b], u = the element b columns later.
//
// Layouts: x [..., 2F], y [..., F] dense row-major, any rank >= 1; any alignment (16-byte vector
// loads where F, the interleave and the pointers allow, else scalar ones).
// Dtypes: x and y the same, bf16 / f16 / f32 (tprt_glu_kernel_<dtype>); kind, alpha, limit and
// interleave are run-time arguments. tprt_cuda_glu_fast (fast numerics; tprt_glu_fast_kernel_<dtype>)
// is the same iteration with the approximate formulas of glu_fast.cuh.
//
// Launch geometry: 256-thread blocks, grid-stride (at most 65536 blocks). Usually (glu_runs.cuh:
// F and the interleave multiples of 8 bf16/f16 or 4 f32 columns, 16-byte aligned tensors) one
// thread per run of 16 bytes of output columns, else one per output element. Consecutive threads
// produce consecutive columns of a row, so gate, up and y accesses are coalesced (interleaving
// only moves whole runs of b columns).
#include "glu_fast.cuh"
#include "glu_runs.cuh"
#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

template <int D, bool kFast>
static __device__ __forceinline__ void tprt__glu_body(const void* __restrict__ x, void* __restrict__ y, int64_t total,
                                                      int64_t f, int64_t interleave, int kind, float alpha,
                                                      float limit) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / f, j = i % f;
    int64_t gcol, ucol;
    tprt_glu_columns(j, f, interleave, &gcol, &ucol);
    const int64_t xo = row * 2 * f;
    const float g = tprt__cuda_ld(x, D, xo + gcol), u = tprt__cuda_ld(x, D, xo + ucol);
    tprt__cuda_st(y, D, i, tprt__glu_value_of<kFast>(kind, g, u, alpha, limit));
  }
}

/// The runs of glu_runs.cuh: the same arithmetic per element, 16-byte loads and stores.
template <int D, bool kFast>
static __device__ __forceinline__ void tprt__glu_runs_body(const void* __restrict__ x, void* __restrict__ y,
                                                           int64_t total, int64_t f, int64_t interleave, int kind,
                                                           float alpha, float limit) {
  constexpr int kVec = TPRT__CUDA_VEC16(D);
  const uint4* xv = static_cast<const uint4*>(x);
  tprt__glu_runs<kVec>(total / f, f, interleave, [&](int64_t row, int64_t j, int64_t gcol, int64_t ucol) {
    const uint4 vg = xv[(row * 2 * f + gcol) / kVec], vu = xv[(row * 2 * f + ucol) / kVec];
    uint4 vy;
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      tprt__cuda_st(&vy, D, k,
                    tprt__glu_value_of<kFast>(kind, tprt__cuda_ld(&vg, D, k), tprt__cuda_ld(&vu, D, k), alpha, limit));
    static_cast<uint4*>(y)[(row * f + j) / kVec] = vy;
  });
}

#define TPRT__GLU_KERNEL(name, dtype, fast)                                                                          \
  extern "C" __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)                                                \
      name(const void* x, void* y, int64_t total, int64_t f, int64_t interleave, int kind, float alpha, float limit, \
           int runs) {                                                                                               \
    if (runs)                                                                                                        \
      tprt__glu_runs_body<dtype, fast>(x, y, total, f, interleave, kind, alpha, limit);                              \
    else                                                                                                             \
      tprt__glu_body<dtype, fast>(x, y, total, f, interleave, kind, alpha, limit);                                   \
  }
TPRT__GLU_KERNEL(tprt_glu_kernel_bf16, TPRT_DTYPE_BF16, false)
TPRT__GLU_KERNEL(tprt_glu_kernel_f16, TPRT_DTYPE_F16, false)
TPRT__GLU_KERNEL(tprt_glu_kernel_f32, TPRT_DTYPE_F32, false)
TPRT__GLU_KERNEL(tprt_glu_fast_kernel_bf16, TPRT_DTYPE_BF16, true)
TPRT__GLU_KERNEL(tprt_glu_fast_kernel_f16, TPRT_DTYPE_F16, true)
TPRT__GLU_KERNEL(tprt_glu_fast_kernel_f32, TPRT_DTYPE_F32, true)

// ------------------------------------------------------------------------------------------------
// Validation (the checks and messages of cpu_glu.c)
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__cuda_check_glu(const tprt_tensor_t* x, const tprt_tensor_t* y, int kind, int64_t interleave,
                                          float alpha, float limit) {
  return tprt__check_glu("glu", x, "y", y, kind, interleave, alpha, limit);
}

// ------------------------------------------------------------------------------------------------
// Kernel launcher
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__cuda_glu_launch(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave,
                                           float alpha, float limit, bool fast, cudaStream_t stream) {
  tprt_status_t s = tprt__cuda_check_glu(x, y, kind, interleave, alpha, limit);
  if (s) return s;
  int64_t f = x->dims[x->rank - 1] / 2;
  int64_t total = tprt_tensor_numel(y);
  if (total == 0) return NULL;
  const void* kernel;
  switch (x->dtype) {
    case TPRT_DTYPE_BF16:
      kernel = fast ? (const void*)tprt_glu_fast_kernel_bf16 : (const void*)tprt_glu_kernel_bf16;
      break;
    case TPRT_DTYPE_F16:
      kernel = fast ? (const void*)tprt_glu_fast_kernel_f16 : (const void*)tprt_glu_kernel_f16;
      break;
    case TPRT_DTYPE_F32:
      kernel = fast ? (const void*)tprt_glu_fast_kernel_f32 : (const void*)tprt_glu_kernel_f32;
      break;
    default:
      return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "glu: no CUDA kernel for dtype %s", tprt_dtype_name(x->dtype));
  }
  const void* xd = x->data;
  void* yd = y->data;
  int runs = tprt__glu_runs_fit(x->dtype, f, interleave, xd, yd, yd);
  void* args[] = {&xd, &yd, &total, &f, &interleave, &kind, &alpha, &limit, &runs};
  dim3 grid(tprt__glu_blocks(x->dtype, total, runs));
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(TPRT__CUDA_EW_THREADS), args, 0, stream));
  return NULL;
}

tprt_status_t tprt_cuda_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                            float limit, cudaStream_t stream) {
  return tprt__cuda_glu_launch(x, y, kind, interleave, alpha, limit, false, stream);
}

tprt_status_t tprt_cuda_glu_fast(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                                 float limit, cudaStream_t stream) {
  return tprt__cuda_glu_launch(x, y, kind, interleave, alpha, limit, true, stream);
}
