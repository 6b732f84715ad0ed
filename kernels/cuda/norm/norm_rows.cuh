// The 16-byte row runs shared by the one-pass norm kernels of fast and invariant numerics
// (norm.cu's forward, norm_grad.cu's gradient): thread t of a 256-thread block owns the runs of
// V = 16 bytes / element size columns starting at (t + 256·k)·V, k < NV, loaded 16 bytes at a time
// when the row and the tensor are 16-byte aligned and an element at a time otherwise (the same
// values, so the same bits), and sums over the block in one fixed order. Internal to
// kernels/cuda/norm.
#ifndef TPRT_NORM_ROWS_CUH_
#define TPRT_NORM_ROWS_CUH_

#include <initializer_list>

#include "tprt_cuda_internal.cuh"

constexpr int kTprtNrMaxRuns = 4;
constexpr int kTprtNrThreads = 256;

template <int D>
struct tprt__nr_vec {
  static constexpr int kEs = D == TPRT_DTYPE_F32 ? 4 : 2;
  static constexpr int V = 16 / kEs;
};

/// The runs per thread (1, 2 or kTprtNrMaxRuns) for rows of |h| elements of |dtype|; 0 when a row
/// is wider than 256 threads' kTprtNrMaxRuns runs. Depends on H and the dtype only.
static inline int tprt__nr_runs(int64_t h, int dtype) {
  const int v = dtype == TPRT_DTYPE_F32 ? 4 : 8;
  const int64_t runs = (h + v - 1) / v;
  return runs <= kTprtNrThreads ? 1 : runs <= 2 * kTprtNrThreads ? 2 : runs <= kTprtNrMaxRuns * kTprtNrThreads ? kTprtNrMaxRuns : 0;
}

/// Whether every row of these tensors (|h| columns of |dtype|) can be read 16 bytes at a time.
static inline bool tprt__nr_aligned(int64_t h, int dtype, std::initializer_list<const void*> ptrs) {
  if (h % (dtype == TPRT_DTYPE_F32 ? 4 : 8)) return false;
  for (const void* p : ptrs)
    if (p && ((uintptr_t)p & 15)) return false;
  return true;
}

// Run |c0| (V columns from c0) of the row at element |base| of |p|: 16 bytes, zeros past H.
template <int D>
static __device__ __forceinline__ uint4 tprt__nr_run(const void* __restrict__ p, int64_t base, int64_t c0, int64_t h,
                                                     bool aligned) {
  constexpr int V = tprt__nr_vec<D>::V;
  if (c0 >= h) return make_uint4(0, 0, 0, 0);
  if (aligned) return __ldg(reinterpret_cast<const uint4*>(p) + (base + c0) / V);
  union {
    uint4 v;
    uint16_t s[8];
    uint32_t w[4];
  } u;
  u.v = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    if (c0 + e >= h) break;
    if (D == TPRT_DTYPE_F32)
      u.w[e] = static_cast<const uint32_t*>(p)[base + c0 + e];
    else
      u.s[e] = static_cast<const uint16_t*>(p)[base + c0 + e];
  }
  return u.v;
}

/// The row's floats |v| (V columns from c0) rounded to D into a 16-byte run.
template <int D>
static __device__ __forceinline__ uint4 tprt__nr_pack(const float* v) {
  uint4 out;
#pragma unroll
  for (int e = 0; e < tprt__nr_vec<D>::V; ++e) tprt_store_elem(&out, D, e, v[e]);
  return out;
}

/// Stores run |c0| of the row at element |base| of |p|: 16 bytes, or the columns below H one at a
/// time without alignment.
template <int D>
static __device__ __forceinline__ void tprt__nr_store(void* __restrict__ p, int64_t base, int64_t c0, int64_t h,
                                                      bool aligned, uint4 v) {
  constexpr int V = tprt__nr_vec<D>::V;
  if (c0 >= h) return;
  if (aligned) {
    reinterpret_cast<uint4*>(p)[(base + c0) / V] = v;
    return;
  }
#pragma unroll
  for (int e = 0; e < V; ++e) {
    if (c0 + e >= h) break;
    if (D == TPRT_DTYPE_F32)
      static_cast<uint32_t*>(p)[base + c0 + e] = reinterpret_cast<const uint32_t*>(&v)[e];
    else
      static_cast<uint16_t*>(p)[base + c0 + e] = reinterpret_cast<const uint16_t*>(&v)[e];
  }
}

/// Loads gamma's (or beta's) columns of this thread's runs, 0 past H.
template <int V, int NV>
static __device__ __forceinline__ void tprt__nr_params(const void* __restrict__ p, int dtype, const int64_t* col,
                                                       int64_t h, float* out) {
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) out[k * V + e] = col[k] + e < h ? tprt__cuda_ld(p, dtype, col[k] + e) : 0.0f;
}

// Sums each of |N| values over the block (a thread's value, the warp's butterfly, the eight warps
// in order); |sm| alternates between two halves (|parity|) so that one barrier per call suffices.
template <int N>
static __device__ __forceinline__ void tprt__nr_block_sum(float (&v)[N], float* sm, int parity) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* half = sm + parity * N * (kTprtNrThreads / 32);
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int s = 16; s >= 1; s /= 2) v[i] = __fadd_rn(v[i], __shfl_xor_sync(0xFFFFFFFFu, v[i], s));
    if (lane == 0) half[i * (kTprtNrThreads / 32) + warp] = v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float t = half[i * (kTprtNrThreads / 32)];
#pragma unroll
    for (int w = 1; w < kTprtNrThreads / 32; ++w) t = __fadd_rn(t, half[i * (kTprtNrThreads / 32) + w]);
    v[i] = t;
  }
}

/// LayerNorm's centring of a row held as the thread's columns |xv| (NV runs of V, zeros past H):
/// the block's mean (tprt__nr_block_sum, then / H), subtracted from the columns below H. Returns
/// the mean; |parity| moves on as after one tprt__nr_block_sum.
template <int V, int NV>
static __device__ __forceinline__ float tprt__nr_center(float* xv, const int64_t* col, int64_t h, float hf, float* sm,
                                                        int& parity) {
  float s[1] = {0.0f};
#pragma unroll
  for (int i = 0; i < NV * V; ++i) s[0] = __fadd_rn(s[0], xv[i]);
  tprt__nr_block_sum<1>(s, sm, parity);
  parity ^= 1;
  const float mean = __fdiv_rn(s[0], hf);
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (col[k] + e < h) xv[k * V + e] = __fsub_rn(xv[k * V + e], mean);
  return mean;
}

#endif  // TPRT_NORM_ROWS_CUH_
