// Helpers shared by the CUDA kernel files (not part of libtprt's API; CUDA C++ only): the CPU
// kernels' argument validation (so that both backends reject the same inputs with the same
// messages), element loads and stores through f32 on the device, grid sizing.
#ifndef TPRT_CUDA_INTERNAL_CUH_
#define TPRT_CUDA_INTERNAL_CUH_

#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"
#include "tprt_dtype.h"
#include "tprt_numerics.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

// tprt_cpu_internal.h is a C header without C++ guards: its validation helpers (tprt__check,
// tprt__shape_str, cpu_common.c) have C linkage. Every header it includes is already included
// above, so the extern "C" block wraps only its own declarations.
extern "C" {
#include "tprt_cpu_internal.h"
}

/// ceil(n / d) for n >= 0, d > 0.
static inline int64_t tprt__cuda_div_up(int64_t n, int64_t d) { return (n + d - 1) / d; }

/// Threads per block of the bandwidth-bound kernels (GLU, add, mul): 8 warps.
#define TPRT__CUDA_EW_THREADS 256

/// Elements of a float |dtype| in a 16-byte vector (bf16, f16: 8; f32: 4): the 16-byte paths of
/// the element-wise kernels (add, mul, GLU, rope).
#define TPRT__CUDA_VEC16(dtype) ((dtype) == TPRT_DTYPE_F32 ? 4 : 8)

/// Whether |a|, |b| and |c| are all 16-byte aligned (pass a pointer twice for two).
static inline __host__ __device__ bool tprt__cuda_aligned16(const void* a, const void* b, const void* c) {
  return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16) == 0;
}

/// Position r of the segmented order of docs/numerics.md ("Segmented contractions") over n
/// elements (tprt__segmented_order in closed form): which source element comes r-th. The order
/// permutes runs of n / (chunks x segments) consecutive elements, so with runs of whole 64-wide
/// tiles the same function maps tile numbers (n and r counted in tiles).
static __host__ __device__ __forceinline__ int64_t tprt__segmented_index(int64_t r, int64_t n, tprt_cuda_order_t o) {
  const int64_t run = n / ((int64_t)o.chunks * o.segments), per_block = o.chunks / o.blocks;
  const int64_t c = r / (o.segments * run), within = r % (o.segments * run), j = within / run, i = within % run;
  return (c / per_block) * (n / o.blocks) + j * (n / o.blocks / o.segments) + (c % per_block) * run + i;
}

/// The same in 32-bit arithmetic, for n < 2^31 (the hot loops of the device: a 64-bit division is
/// dozens of instructions).
static __host__ __device__ __forceinline__ int tprt__segmented_index32(int r, int n, tprt_cuda_order_t o) {
  const int run = n / (o.chunks * o.segments), per_block = o.chunks / o.blocks, span = n / o.blocks;
  const int c = r / (o.segments * run), within = r - c * o.segments * run, j = within / run, i = within - j * run;
  return (c / per_block) * span + j * (span / o.segments) + (c % per_block) * run + i;
}

/// Most blocks a grid-stride kernel launches: 2^16 blocks of 256 threads keep every SM of an
/// H100/H200 (132 SMs, at most 8 such blocks each) busy many times over; longer tensors loop.
#define TPRT__CUDA_EW_MAX_BLOCKS 65536

/// Device helpers of the 256-thread kernels that reduce a row (norm.cu, norm_grad.cu,
/// moe_grad.cu): one thread per lane of the canonical row reduction.
/// The order of the CPU collectives' sums over |members| values (runtime/tprt_collectives_compute.c):
/// the canonical pairwise tree, or increasing member order, the sum landing in value 0; add(a, b)
/// adds value b into value a (one __fadd_rn per element). GM: the most members, a compile-time
/// bound so the loops unroll over registers.
template <int GM, typename Add>
static __device__ __forceinline__ void tprt__cuda_members_order(int members, int canonical, Add add) {
  if (canonical) {
#pragma unroll
    for (int s = 1; s < GM; s *= 2)
#pragma unroll
      for (int g = 0; g + s < GM; g += 2 * s)
        if (g + s < members) add(g, g + s);
  } else {
#pragma unroll
    for (int g = 1; g < GM; ++g)
      if (g < members) add(0, g);
  }
}

/// The canonical row tree over the block's 256 lane values |v| (tprt_row_tree): returns the sum
/// to every thread. |sm| holds TPRT_ROW_LANES / 32 + 1 floats of shared memory; the trailing
/// barrier lets the caller reuse it at once.
static __device__ __forceinline__ float tprt__cuda_row_tree(float v, float* sm) {
  const unsigned all = 0xFFFFFFFFu;  // every lane of the warp takes part
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int s = 32 / 2; s >= 1; s /= 2) v = __fadd_rn(v, __shfl_down_sync(all, v, s));
  if (lane == 0) sm[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float g = lane < (TPRT_ROW_LANES / 32) ? sm[lane] : 0.0f;
#pragma unroll
    for (int s = (TPRT_ROW_LANES / 32) / 2; s >= 1; s /= 2) g = __fadd_rn(g, __shfl_down_sync(all, g, s));
    if (lane == 0) sm[(TPRT_ROW_LANES / 32)] = g;
  }
  __syncthreads();
  float total = sm[(TPRT_ROW_LANES / 32)];
  __syncthreads();
  return total;
}

/// tprt_load_elem / tprt_store_elem of tprt_numerics.h (the integer conversions, never the
/// hardware's), in device code.
static __device__ __forceinline__ float tprt__cuda_ld(const void* p, int dtype, int64_t i) {
  return tprt_load_elem(p, dtype, i);
}

static __device__ __forceinline__ void tprt__cuda_st(void* p, int dtype, int64_t i, float v) {
  tprt_store_elem(p, dtype, i, v);
}

/// |v| rounded to dtype D and back (what a store of D then a load gives).
template <int D>
static __device__ __forceinline__ float tprt__round_to(float v) {
  uint32_t bits = 0;
  tprt__cuda_st(&bits, D, 0, v);
  return tprt__cuda_ld(&bits, D, 0);
}

/// Blocks for a grid-stride loop over |n| > 0 items with |threads| per block.
static inline unsigned tprt__cuda_ew_blocks(int64_t n, int threads) {
  int64_t blocks = tprt__cuda_div_up(n, threads);
  return (unsigned)(blocks < TPRT__CUDA_EW_MAX_BLOCKS ? blocks : TPRT__CUDA_EW_MAX_BLOCKS);
}

/// The float dtype of a tensor as a kernel's template argument: calls fn(tprt__cuda_dtype_t<D>{})
/// with D = bf16, f16, or f32 for any other dtype (the callers validated it), so a launcher writes
/// `tprt__cuda_float_dispatch(x->dtype, [&](auto d) { launch<decltype(d)::value>(...); })` once
/// instead of a switch with one case per dtype.
template <int D>
struct tprt__cuda_dtype_t {
  static constexpr int value = D;
};
template <class F>
static inline void tprt__cuda_float_dispatch(int dtype, F&& fn) {
  if (dtype == TPRT_DTYPE_BF16) {
    fn(tprt__cuda_dtype_t<TPRT_DTYPE_BF16>{});
  } else if (dtype == TPRT_DTYPE_F16) {
    fn(tprt__cuda_dtype_t<TPRT_DTYPE_F16>{});
  } else {
    fn(tprt__cuda_dtype_t<TPRT_DTYPE_F32>{});
  }
}

#endif  // TPRT_CUDA_INTERNAL_CUH_
