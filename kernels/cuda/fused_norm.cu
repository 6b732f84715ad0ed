// tprt_cuda_fused_allreduce_add_rmsnorm: tp.fused_allreduce_add_rmsnorm as one kernel over the
// memory of a group of ranks. It is bitwise the composition the backends run
// (docs/cuda-backend.md, "Fused collective + add + RMSNorm"):
//   - the f32 sum of the members' partials, in the canonical tree order or in increasing member
//     order (tprt_cuda_reduce_staged);
//   - plus the residual, rounded once to the residual's dtype: residual_out (tprt_cuda_add);
//   - the exact RMSNorm of each row of residual_out: normed (tprt_cuda_rmsnorm, the same 256-lane
//     canonical row reduction).
//
// Algorithm: one-shot, pull. Every member copies its partial, as f32, into its own registered
// region. A flag barrier runs per block. Then every member reads each of its rows from every
// member's region and reduces it itself. That is N times the reads and no second exchange: the
// path for decode sizes.
//
// Synchronization lives in device memory, so a CUDA graph replays it:
//   - Flags: each member has flags[2][max_blocks][group]. Peers write them with st.release.sys;
//     the owner polls them with ld.acquire.sys.
//   - Epochs: a per-block count of the calls that block has made. It is the same on every member,
//     since every member runs the same calls with the same grid.
//   - Phase 0 (ready): block b of member i copies in its rows, sets flags_p[0][b][i] = e on every
//     peer p, and waits until flags_i[0][b][p] >= e.
//   - Phase 1 (done reading): after its reads, block b sets flags_p[1][b][i] = e. The next call's
//     block b waits until flags_i[1][b][p] >= e before it overwrites its region. This is a pull
//     kernel's end barrier, moved to the start of the next call.
//
// A peer that never arrives (a failed rank) leaves the call waiting until the host sets the
// group's abort word (host-mapped memory, the world's abort); the blocks then leave at once.
//
// A block spins on the same block of its peers. Where members share a GPU, every block of every
// member must therefore be resident at once: the caller caps the grid with max_blocks
// (tprt_cuda_fused_norm_resident_blocks divided by the members on the GPU). A member must also not
// queue the kernel behind work that never yields its SMs while its peers' blocks already spin (a
// persistent GEMM of a rank sharing the GPU): shared-GPU worlds are for tests of this protocol.
//
// Launch geometry: 256-thread blocks, the lanes of the canonical row reduction (as norm.cu). Block
// b handles rows b, b + grid, ... in order. Groups of 2, 4 and 8 are compile-time sizes, so each
// thread keeps its members' values in registers; other sizes loop at run time.
#include "tprt_cuda_internal.cuh"
#include "tprt_world.h"  // TPRT_MAX_WORLD_SIZE

#define TPRT__FN_THREADS TPRT_ROW_LANES

static __device__ __forceinline__ unsigned tprt__ld_acquire_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ void tprt__st_release_sys(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Waits until *p has reached |target| (wrap-around safe); false when *abort turned non-zero first.
static __device__ __forceinline__ bool tprt__wait_at_least(const unsigned* p, unsigned target,
                                                           const volatile unsigned* abort) {
  while ((int)(tprt__ld_acquire_sys(p) - target) < 0) {
    if (abort && *abort) return false;
    __nanosleep(32);
  }
  return true;
}

// |v| rounded to dtype D and back (what a store of D then a load gives).
template <int D>
static __device__ __forceinline__ float tprt__round_to(float v) {
  uint32_t bits = 0;
  tprt__cuda_st(&bits, D, 0, v);
  return tprt__cuda_ld(&bits, D, 0);
}

// Every member's value of element |i| summed in the CPU collectives' order. G > 0: the group size
// (registers); G = 0: |n| members at run time.
template <int G>
static __device__ __forceinline__ float tprt__members_sum(float* const* data, int n, int64_t i, int canonical) {
  constexpr int GM = G > 0 ? G : TPRT_MAX_WORLD_SIZE;
  const int members = G > 0 ? G : n;
  float v[GM];
#pragma unroll
  for (int p = 0; p < GM; ++p)
    if (p < members) v[p] = __ldcg(data[p] + i);  // L2, never a stale L1 line of an earlier call
  if (canonical) {
#pragma unroll
    for (int s = 1; s < GM; s *= 2)
#pragma unroll
      for (int p = 0; p + s < GM; p += 2 * s)
        if (p + s < members) v[p] = __fadd_rn(v[p], v[p + s]);
  } else {
#pragma unroll
    for (int p = 1; p < GM; ++p)
      if (p < members) v[0] = __fadd_rn(v[0], v[p]);
  }
  return v[0];
}

template <int DP, int DR, int G>
static __global__ void __launch_bounds__(TPRT__FN_THREADS)
    tprt__fused_norm_kernel(tprt_cuda_peer_group_t g, const void* __restrict__ partial,
                            const void* __restrict__ residual, const void* __restrict__ gamma, int g_dtype,
                            void* __restrict__ normed, void* __restrict__ residual_out, int64_t m, int64_t h, float hf,
                            float eps, int canonical) {
  __shared__ float sm[TPRT__FN_THREADS / 32 + 1];
  __shared__ unsigned epoch;
  __shared__ int aborted;  // a waiting thread saw the abort word: the whole block leaves
  const int b = blockIdx.x, me = g.index, n = g.group, t = threadIdx.x;
  const int64_t slots = (int64_t)g.max_blocks * n;
  if (t == 0) {
    epoch = g.epochs[b] + 1;
    aborted = 0;
  }
  __syncthreads();
  const unsigned e = epoch;
  // Every peer has finished reading this member's region in the previous call.
  if (t < n && t != me && !tprt__wait_at_least(&g.flags[me][slots + (int64_t)b * n + t], e - 1, g.abort)) aborted = 1;
  __syncthreads();
  if (aborted) return;
  float* mine = g.data[me];
  for (int64_t row = b; row < m; row += gridDim.x)
    for (int64_t j = t; j < h; j += TPRT__FN_THREADS) mine[row * h + j] = tprt__cuda_ld(partial, DP, row * h + j);
  __syncthreads();
  // Ready: the release is cumulative, so the whole block's copy-in is visible before the flag.
  if (t < n && t != me) tprt__st_release_sys(&g.flags[t][(int64_t)b * n + me], e);
  if (t < n && t != me && !tprt__wait_at_least(&g.flags[me][(int64_t)b * n + t], e, g.abort)) aborted = 1;
  __syncthreads();
  if (aborted) return;
  for (int64_t row = b; row < m; row += gridDim.x) {
    const int64_t base = row * h;
    float acc = 0.0f;
    for (int64_t j = t; j < h; j += TPRT__FN_THREADS) {
      float sum = tprt__members_sum<G>(g.data, n, base + j, canonical);
      float out = tprt__round_to<DR>(__fadd_rn(sum, tprt__cuda_ld(residual, DR, base + j)));
      tprt__cuda_st(residual_out, DR, base + j, out);
      acc = __fmaf_rn(out, out, acc);
    }
    const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
    for (int64_t j = t; j < h; j += TPRT__FN_THREADS) {
      float v = tprt__cuda_ld(residual_out, DR, base + j);  // this thread's own store above
      tprt__cuda_st(normed, DR, base + j, __fmul_rn(__fmul_rn(v, r), tprt__cuda_ld(gamma, g_dtype, j)));
    }
  }
  __syncthreads();
  // Done reading: the peers may overwrite their regions in the next call.
  if (t < n && t != me) tprt__st_release_sys(&g.flags[t][slots + (int64_t)b * n + me], e);
  if (t == 0) g.epochs[b] = e;
}

template <int DP, int DR, int G>
static void tprt__fused_norm_launch(const tprt_cuda_peer_group_t* g, int grid, const tprt_tensor_t* partial,
                                    const tprt_tensor_t* residual, const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                                    tprt_tensor_t* residual_out, int64_t m, int64_t h, float eps, int canonical,
                                    cudaStream_t stream) {
  tprt__fused_norm_kernel<DP, DR, G><<<grid, TPRT__FN_THREADS, 0, stream>>>(
      *g, partial->data, residual->data, gamma->data, gamma->dtype, normed->data, residual_out->data, m, h, (float)h,
      eps, canonical);
}

template <int DP, int DR>
static void tprt__fused_norm_pick(const tprt_cuda_peer_group_t* g, int grid, const tprt_tensor_t* partial,
                                  const tprt_tensor_t* residual, const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                                  tprt_tensor_t* residual_out, int64_t m, int64_t h, float eps, int canonical,
                                  cudaStream_t stream) {
#define TPRT__FN_ARGS g, grid, partial, residual, gamma, normed, residual_out, m, h, eps, canonical, stream
  switch (g->group) {
    case 2:
      return tprt__fused_norm_launch<DP, DR, 2>(TPRT__FN_ARGS);
    case 4:
      return tprt__fused_norm_launch<DP, DR, 4>(TPRT__FN_ARGS);
    case 8:
      return tprt__fused_norm_launch<DP, DR, 8>(TPRT__FN_ARGS);
    default:
      return tprt__fused_norm_launch<DP, DR, 0>(TPRT__FN_ARGS);
  }
#undef TPRT__FN_ARGS
}

extern "C" tprt_status_t tprt_cuda_fused_norm_resident_blocks(int* out) {
  *out = 0;
  int device = 0, sms = 0, per_sm = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // The fewest of the instantiations a call may pick (their registers differ with the group).
  const void* kernels[] = {(const void*)tprt__fused_norm_kernel<TPRT_DTYPE_F32, TPRT_DTYPE_F32, 0>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_F32, TPRT_DTYPE_F32, 8>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 0>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 8>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 8>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_BF16, TPRT_DTYPE_F32, 8>};
  per_sm = 1 << 30;
  for (const void* k : kernels) {
    int n = 0;
    TPRT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, TPRT__FN_THREADS, 0));
    if (n < per_sm) per_sm = n;
  }
  *out = sms * per_sm;
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_fused_allreduce_add_rmsnorm(const tprt_cuda_peer_group_t* g,
                                                               const tprt_tensor_t* partial,
                                                               const tprt_tensor_t* residual,
                                                               const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                                                               tprt_tensor_t* residual_out, float eps, int canonical,
                                                               cudaStream_t stream) {
  const unsigned floats = TPRT__M(TPRT_DTYPE_BF16) | TPRT__M(TPRT_DTYPE_F16) | TPRT__M(TPRT_DTYPE_F32);
  bool ok = g && g->group >= 1 && g->group <= TPRT_MAX_WORLD_SIZE && g->index >= 0 && g->index < g->group &&
            g->max_blocks >= 1 && g->epochs;
  for (int p = 0; ok && p < g->group; ++p) ok = g->data[p] && g->flags[p];
  if (!ok)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "fused_allreduce_add_rmsnorm: a registered group (1..%d members, every region, flags and "
                            "epochs, max_blocks >= 1) expected",
                            TPRT_MAX_WORLD_SIZE);
  if (partial->rank != 2 || residual->rank != 2 || gamma->rank != 1 || !((floats >> partial->dtype) & 1) ||
      !((floats >> residual->dtype) & 1) || !((floats >> gamma->dtype) & 1) ||
      partial->dims[0] != residual->dims[0] || partial->dims[1] != residual->dims[1] ||
      gamma->dims[0] != residual->dims[1] || !tprt_tensor_same_layout(residual, normed) ||
      !tprt_tensor_same_layout(residual, residual_out))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "fused_allreduce_add_rmsnorm: float partial and residual [T,H], gamma [H], normed and "
                            "residual_out of the residual's shape and dtype expected");
  const int64_t m = residual->dims[0], h = residual->dims[1];
  if (m * h > g->capacity)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "fused_allreduce_add_rmsnorm: %lld x %lld elements exceed the registered regions' %lld",
                            (long long)m, (long long)h, (long long)g->capacity);
  if (m == 0 || h == 0) return NULL;
  const int grid = (int)(m < g->max_blocks ? m : g->max_blocks);
  tprt__cuda_float_dispatch(partial->dtype, [&](auto dp) {
    tprt__cuda_float_dispatch(residual->dtype, [&](auto dr) {
      tprt__fused_norm_pick<decltype(dp)::value, decltype(dr)::value>(g, grid, partial, residual, gamma, normed,
                                                                       residual_out, m, h, eps, canonical, stream);
    });
  });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}
