// tprt_cuda_add and tprt_cuda_mul in exact mode, bitwise equal to tprt_cpu_add / tprt_cpu_mul:
// c[i] = RNE_dtype(a[i] ⊕ b[i]), the f32 operation (__fadd_rn / __fmul_rn) on the exactly widened
// operands, rounded once to the dtype (docs/numerics.md, "Elementwise ops").
//
// Layouts: a, b, c dense with the same shape (any rank) and dtype; c may be a or b (each element
// is read before it is written, by the same thread). Any alignment (scalar loads). Add also takes
// the forms tprt_cpu_add does (the shared check tprt__check_elementwise): a rank-1 b of a's last
// dimension broadcast over the rows (a bias), and an f32 a plus a b in storage precision, with c
// in a's or b's dtype (the fused norms' residual add); those run tprt_add_kernel_mixed.
// Dtypes: bf16 / f16 / f32, one kernel per op and dtype: tprt_<op>_kernel_<dtype>; the mixed
// forms select the dtypes at run time.
//
// Launch geometry: 256-thread blocks, grid-stride (at most 65536 blocks); one thread per element,
// or on the 16-byte path (aligned tensors, the same dtype) one thread per 4 vectors of 16 bytes a
// grid stride apart; consecutive threads touch consecutive elements (coalesced).
#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

/// Vectors each thread of the 16-byte path handles.
constexpr int kTprtEwUnroll = 4;

/// Whether the same-dtype kernels of |dtype| take 16-byte vectors: every tensor 16-byte aligned
/// and n a multiple of the vector (the usual case).
static __host__ __device__ __forceinline__ bool tprt__ew_vectors(const void* a, const void* b, const void* c, int64_t n,
                                                                 int dtype) {
  return tprt__cuda_aligned16(a, b, c) && n % TPRT__CUDA_VEC16(dtype) == 0;
}

template <int D, bool MUL>
static __device__ __forceinline__ void tprt__elementwise_body(const void* a, const void* b, void* c, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  // 16-byte vectors when every tensor is 16-byte aligned and n fills them (the usual case): the
  // same elementwise arithmetic, fewer memory transactions. Each thread loads kTprtEwUnroll vectors (a grid stride apart, so every access stays coalesced) before
  // it computes and stores them: more loads in flight than one vector per thread, whose single
  // memory round trip bounded the kernel. Each element is still read before it is written, by the
  // same thread.
  constexpr int kVec = TPRT__CUDA_VEC16(D);
  if (tprt__ew_vectors(a, b, c, n, D)) {
    const int64_t nv = n / kVec;
    for (int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < nv; i0 += stride * kTprtEwUnroll) {
      uint4 va[kTprtEwUnroll], vb[kTprtEwUnroll];
#pragma unroll
      for (int u = 0; u < kTprtEwUnroll; ++u) {
        const int64_t i = i0 + u * stride;
        if (i < nv) va[u] = static_cast<const uint4*>(a)[i], vb[u] = static_cast<const uint4*>(b)[i];
      }
#pragma unroll
      for (int u = 0; u < kTprtEwUnroll; ++u) {
        const int64_t i = i0 + u * stride;
        if (i >= nv) break;
        uint4 vc;
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float x = tprt__cuda_ld(&va[u], D, k), y = tprt__cuda_ld(&vb[u], D, k);
          tprt__cuda_st(&vc, D, k, MUL ? __fmul_rn(x, y) : __fadd_rn(x, y));
        }
        static_cast<uint4*>(c)[i] = vc;
      }
    }
    return;
  }
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = tprt__cuda_ld(a, D, i), y = tprt__cuda_ld(b, D, i);
    tprt__cuda_st(c, D, i, MUL ? __fmul_rn(x, y) : __fadd_rn(x, y));
  }
}

// No __restrict__: c may alias a or b.
#define TPRT__ELEMENTWISE_KERNEL(name, dtype, mul)                    \
  extern "C" __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS) \
      name(const void* a, const void* b, void* c, int64_t n) {        \
    tprt__elementwise_body<dtype, mul>(a, b, c, n);                   \
  }
TPRT__ELEMENTWISE_KERNEL(tprt_add_kernel_bf16, TPRT_DTYPE_BF16, false)
TPRT__ELEMENTWISE_KERNEL(tprt_add_kernel_f16, TPRT_DTYPE_F16, false)
TPRT__ELEMENTWISE_KERNEL(tprt_add_kernel_f32, TPRT_DTYPE_F32, false)
TPRT__ELEMENTWISE_KERNEL(tprt_mul_kernel_bf16, TPRT_DTYPE_BF16, true)
TPRT__ELEMENTWISE_KERNEL(tprt_mul_kernel_f16, TPRT_DTYPE_F16, true)
TPRT__ELEMENTWISE_KERNEL(tprt_mul_kernel_f32, TPRT_DTYPE_F32, true)

// c[i] = a[i] + b[cols ? i % cols : i], each with its own dtype (the bias and mixed-dtype forms of
// add): the same f32 addition, rounded once to c's dtype. c may alias an operand of its dtype.
extern "C" __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt_add_kernel_mixed(const void* a, int a_dtype, const void* b, int b_dtype, int64_t cols, void* c, int c_dtype,
                          int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = tprt__cuda_ld(a, a_dtype, i), y = tprt__cuda_ld(b, b_dtype, cols ? i % cols : i);
    tprt__cuda_st(c, c_dtype, i, __fadd_rn(x, y));
  }
}

// ------------------------------------------------------------------------------------------------
// Kernel launcher (one for both ops)
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__cuda_elementwise(const char* op, const tprt_tensor_t* a, const tprt_tensor_t* b,
                                            tprt_tensor_t* c, bool mul, cudaStream_t stream) {
  int64_t cols = 0;
  tprt_status_t s = tprt__check_elementwise(op, a, b, c, mul, &cols);
  if (s) return s;
  int64_t n = tprt_tensor_numel(a);
  if (n == 0) return NULL;
  dim3 grid(tprt__cuda_ew_blocks(n, TPRT__CUDA_EW_THREADS));
  if (cols || b->dtype != a->dtype || c->dtype != a->dtype) {  // add's bias and mixed-dtype forms
    const void* ad = a->data;
    const void* bd = b->data;
    void* cd = c->data;
    int da = a->dtype, db = b->dtype, dc = c->dtype;
    void* args[] = {&ad, &da, &bd, &db, &cols, &cd, &dc, &n};
    TPRT_CUDA_RETURN_IF_ERROR(
        cudaLaunchKernel((const void*)tprt_add_kernel_mixed, grid, dim3(TPRT__CUDA_EW_THREADS), args, 0, stream));
    return NULL;
  }
  const void* kernel;
  switch (a->dtype) {
    case TPRT_DTYPE_BF16:
      kernel = mul ? (const void*)tprt_mul_kernel_bf16 : (const void*)tprt_add_kernel_bf16;
      break;
    case TPRT_DTYPE_F16:
      kernel = mul ? (const void*)tprt_mul_kernel_f16 : (const void*)tprt_add_kernel_f16;
      break;
    case TPRT_DTYPE_F32:
      kernel = mul ? (const void*)tprt_mul_kernel_f32 : (const void*)tprt_add_kernel_f32;
      break;
    default:
      return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: no CUDA kernel for dtype %s", op,
                              tprt_dtype_name(a->dtype));
  }
  const void* ad = a->data;
  const void* bd = b->data;
  void* cd = c->data;
  void* args[] = {&ad, &bd, &cd, &n};
  if (tprt__ew_vectors(ad, bd, cd, n, a->dtype))
    grid = dim3(tprt__cuda_ew_blocks(tprt__cuda_div_up(n / TPRT__CUDA_VEC16(a->dtype), kTprtEwUnroll),
                                     TPRT__CUDA_EW_THREADS));
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(TPRT__CUDA_EW_THREADS), args, 0, stream));
  return NULL;
}

tprt_status_t tprt_cuda_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c, cudaStream_t stream) {
  return tprt__cuda_elementwise("add", a, b, c, false, stream);
}

tprt_status_t tprt_cuda_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c, cudaStream_t stream) {
  return tprt__cuda_elementwise("mul", a, b, c, true, stream);
}
