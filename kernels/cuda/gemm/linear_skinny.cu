// Fast numerics' linear of a few rows: y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias) for M ≤ 2, bf16 or f16
// (tprt_cuda_skinny.h). A decoding step's linears have one row per sequence: a tiled GEMM fills a
// 64- or 128-row tile with a few real rows, and cuBLASLt's choices for these shapes read the
// weight at about half the memory's rate (docs/performance.md). Here the weight is the stream:
//   - a block of 256 threads takes 4 columns n of y (4 rows of w) for all M rows of x;
//   - thread i reads 16-byte runs i, i + 256, ... of each of the 4 weight rows (evict-first
//     loads: the weight is read once a step) and the same runs of every x row (cached: every block
//     reads x), two runs of each row in flight, and accumulates the M x 4 dot products in f32;
//   - the partial sums meet by a warp shuffle tree, then the 8 warps' in shared memory, and 4·M
//     threads write y (+ bias) rounded once.
// The order of the additions depends on K only (not on M or the batch), but nothing here is
// promised beyond fast numerics'; invariant numerics keeps the chunk-tree GEMM.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gemm/tprt_cuda_skinny.h"
#include "tprt_cuda_internal.cuh"

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kCols = 4;    // columns of y (rows of w) per block
constexpr int kUnroll = 2;  // 16-byte runs of each row in flight per thread

template <bool kBf16>
__device__ __forceinline__ void tprt__widen8(const uint4& v, float* out) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (kBf16) {
      out[2 * i] = __uint_as_float(u[i] << 16);
      out[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
    } else {
      const __half2 h = *reinterpret_cast<const __half2*>(&u[i]);
      const float2 f = __half22float2(h);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

template <bool kBf16>
__device__ __forceinline__ uint16_t tprt__narrow(float v) {
  if (kBf16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  return __half_as_ushort(__float2half_rn(v));
}

template <int M, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    tprt__linear_skinny(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                        const uint16_t* __restrict__ bias, uint16_t* __restrict__ y, int64_t n, int64_t k) {
  __shared__ float part[kWarps][kCols * M];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n0 = (int64_t)blockIdx.x * kCols, runs = k / 8;
  const int cols = n - n0 < kCols ? (int)(n - n0) : kCols;
  float acc[kCols][M];
#pragma unroll
  for (int c = 0; c < kCols; ++c)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[c][m] = 0.0f;
  const uint4* wr[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) wr[c] = reinterpret_cast<const uint4*>(w + (n0 + (c < cols ? c : 0)) * k);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  for (int64_t r0 = threadIdx.x; r0 < runs; r0 += (int64_t)kThreads * kUnroll) {
    uint4 wv[kUnroll][kCols];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t r = r0 + (int64_t)u * kThreads;
#pragma unroll
      for (int c = 0; c < kCols; ++c) wv[u][c] = r < runs && c < cols ? __ldcs(wr[c] + r) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t r = r0 + (int64_t)u * kThreads;
      if (r >= runs) break;
      float wf[kCols][8];
#pragma unroll
      for (int c = 0; c < kCols; ++c) tprt__widen8<kBf16>(wv[u][c], wf[c]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        tprt__widen8<kBf16>(__ldg(xr + m * runs + r), xf);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[c][m] = fmaf(xf[e], wf[c][e], acc[c][m]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = acc[c][m];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
      if (lane == 0) part[warp][c * M + m] = v;
    }
  __syncthreads();
  if (threadIdx.x < kCols * M) {
    const int c = threadIdx.x / M, m = threadIdx.x % M;
    if (c < cols) {
      float v = part[0][threadIdx.x];
#pragma unroll
      for (int i = 1; i < kWarps; ++i) v += part[i][threadIdx.x];
      if (bias) {
        const uint16_t b = bias[n0 + c];
        v += kBf16 ? __uint_as_float((uint32_t)b << 16) : __half2float(__ushort_as_half(b));
      }
      y[m * n + n0 + c] = tprt__narrow<kBf16>(v);
    }
  }
}

template <int M>
void tprt__launch_skinny(bool bf16, const void* x, const void* w, const void* bias, void* y, int64_t n, int64_t k,
                         cudaStream_t stream) {
  const dim3 grid((unsigned)((n + kCols - 1) / kCols));
  auto args = [&](auto kernel) {
    kernel<<<grid, kThreads, 0, stream>>>((const uint16_t*)x, (const uint16_t*)w, (const uint16_t*)bias, (uint16_t*)y,
                                          n, k);
  };
  if (bf16)
    args(tprt__linear_skinny<M, true>);
  else
    args(tprt__linear_skinny<M, false>);
}

}  // namespace

extern "C" bool tprt_cuda_linear_skinny_fits(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                             const tprt_tensor_t* y) {
  if (!x || !w || !y || x->rank != 2 || w->rank != 2 || y->rank != 2) return false;
  const int dt = x->dtype;
  if ((dt != TPRT_DTYPE_BF16 && dt != TPRT_DTYPE_F16) || w->dtype != dt || y->dtype != dt) return false;
  const int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  if (m < 1 || m > TPRT_CUDA_SKINNY_MAX_ROWS || k < 8 || k % 8 != 0 || w->dims[1] != k || y->dims[0] != m ||
      y->dims[1] != n || n < 1 || n > (int64_t)kCols * 0x7FFFFFFF)
    return false;
  if (bias && (bias->rank != 1 || bias->dtype != dt || bias->dims[0] != n)) return false;
  return tprt__cuda_aligned16(x->data, w->data, w->data);
}

extern "C" tprt_status_t tprt_cuda_linear_skinny(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                 const tprt_tensor_t* bias, tprt_tensor_t* y, cudaStream_t stream) {
  if (!tprt_cuda_linear_skinny_fits(x, w, bias, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "linear (skinny): x[M,K] with 1 <= M <= %d and K a multiple of 8, w[N,K], y[M,N] and bias "
                            "of one 16-bit float type, x and w 16-byte aligned",
                            TPRT_CUDA_SKINNY_MAX_ROWS);
  const bool bf16 = x->dtype == TPRT_DTYPE_BF16;
  const int64_t n = w->dims[0], k = x->dims[1];
  const void* b = bias ? bias->data : nullptr;
  switch (x->dims[0]) {
    case 1: tprt__launch_skinny<1>(bf16, x->data, w->data, b, y->data, n, k, stream); break;
    default: tprt__launch_skinny<2>(bf16, x->data, w->data, b, y->data, n, k, stream); break;
  }
  static_assert(TPRT_CUDA_SKINNY_MAX_ROWS == 2, "one instantiation per row count");
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? NULL : tprt__cuda_make_status(e, "linear (skinny) kernel", __FILE__, __LINE__);
}
