// tprt_cuda_reduce_staged: the summing half of the CUDA backend's reducing collectives (and
// tprt_cuda_max_staged the maximum of a max all-reduce, for ranks that share GPUs). The
// group's inputs arrive by pure NCCL data movement (all-gather or send/recv) into one staged
// buffer [group][n]; this kernel adds them in the order of the CPU collectives
// (runtime/tprt_collectives_compute.c, docs/runtime.md): canonical = the fixed pairwise tree over
// group ranks (member g += member g + s for s = 1, 2, 4, ...), any = increasing group rank from
// member 0's value; f32 arithmetic (__fadd_rn), one rounding to the output dtype. So a canonical
// all-reduce on the GPU gives the CPU backend's bits.
//
// Launch geometry: 256-thread blocks, grid-stride over groups of V consecutive elements; each
// thread reads its group from every member (stride n, coalesced across the warp). Groups of 2, 4
// and 8 members (the tensor-parallel and GTP degrees) are compile-time sizes, so each thread keeps
// its members' values in registers, and V = 4 elements move as one 8- or 16-byte load and store
// wherever n, the own view and every pointer allow it; other groups loop at run time (V = 1).
#include "tprt_cuda_internal.cuh"
#include "tprt_world.h"  // TPRT_MAX_WORLD_SIZE

#include <stdint.h>

// Bytes of one element, and the raw type of 4 of them (one vector load or store).
template <int D>
struct tprt__reduce_raw {
  static constexpr int bytes = D == TPRT_DTYPE_F32 ? 4 : 2;
  using vec4 = typename std::conditional<D == TPRT_DTYPE_F32, uint4, uint2>::type;
};

// Elements [i, i + V) of member g, as floats: from the staged buffer, or through the own view.
template <int DI, int V>
static __device__ __forceinline__ void tprt__reduce_load(const char* staged, int64_t n, int g,
                                                         const tprt_cuda_staged_own_t& own, int64_t i, float* v) {
  const char* base = staged;
  int64_t at = (int64_t)g * n + i;
  if (g == own.member) {
    base = (const char*)own.src;
    at = (i / own.cols) * own.pitch + i % own.cols;
  }
  if constexpr (V == 1) {
    v[0] = tprt__cuda_ld(base, DI, at);
  } else {
    using raw_t = typename tprt__reduce_raw<DI>::vec4;
    raw_t raw = *reinterpret_cast<const raw_t*>(base + at * tprt__reduce_raw<DI>::bytes);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = tprt__cuda_ld(&raw, DI, k);
  }
}

// G > 0: the group size (registers); G = 0: |group| members at run time.
template <int DI, int DO, int G, int V>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__reduce_staged_kernel(const char* __restrict__ staged, int group, int64_t n, char* __restrict__ out,
                               int canonical, tprt_cuda_staged_own_t own) {
  constexpr int GM = G > 0 ? G : TPRT_MAX_WORLD_SIZE;
  const int members = G > 0 ? G : group;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, groups = n / V;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < groups; j += stride) {
    const int64_t i = j * V;
    float v[GM][V];
#pragma unroll
    for (int g = 0; g < GM; ++g)
      if (g < members) tprt__reduce_load<DI, V>(staged, n, g, own, i, v[g]);
    tprt__cuda_members_order<GM>(members, canonical, [&](int a, int b) {
#pragma unroll
      for (int k = 0; k < V; ++k) v[a][k] = __fadd_rn(v[a][k], v[b][k]);
    });
    if constexpr (V == 1) {
      tprt__cuda_st(out, DO, i, v[0][0]);
    } else {
      using raw_t = typename tprt__reduce_raw<DO>::vec4;
      raw_t raw;
#pragma unroll
      for (int k = 0; k < V; ++k) tprt__cuda_st(&raw, DO, k, v[0][k]);
      *reinterpret_cast<raw_t*>(out + i * tprt__reduce_raw<DO>::bytes) = raw;
    }
  }
}

template <int DI, int DO, int G, int V>
static void tprt__reduce_launch(const void* staged, int group, int64_t n, void* out, int canonical,
                                const tprt_cuda_staged_own_t& own, cudaStream_t stream) {
  dim3 grid(tprt__cuda_ew_blocks(n / V, TPRT__CUDA_EW_THREADS));
  tprt__reduce_staged_kernel<DI, DO, G, V><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(
      (const char*)staged, group, n, (char*)out, canonical, own);
}

// The vector path where every access of a group of 4 is one aligned load or store: n, the own
// view's row length and pitch multiples of 4, every pointer 16-byte aligned.
template <int DI, int DO>
static void tprt__reduce_pick(const void* staged, int group, int64_t n, void* out, int canonical,
                              const tprt_cuda_staged_own_t& own, cudaStream_t stream) {
  uintptr_t ptrs = (uintptr_t)staged | (uintptr_t)out | (own.member >= 0 ? (uintptr_t)own.src : 0);
  bool vec = n % 4 == 0 && ptrs % 16 == 0 && (own.member < 0 || (own.cols % 4 == 0 && own.pitch % 4 == 0));
  if (vec && group == 2) return tprt__reduce_launch<DI, DO, 2, 4>(staged, group, n, out, canonical, own, stream);
  if (vec && group == 4) return tprt__reduce_launch<DI, DO, 4, 4>(staged, group, n, out, canonical, own, stream);
  if (vec && group == 8) return tprt__reduce_launch<DI, DO, 8, 4>(staged, group, n, out, canonical, own, stream);
  tprt__reduce_launch<DI, DO, 0, 1>(staged, group, n, out, canonical, own, stream);
}

extern "C" tprt_status_t tprt_cuda_reduce_staged_own(const void* staged, int group, int in_dtype, int64_t n, void* out,
                                                     int out_dtype, int canonical, tprt_cuda_staged_own_t own,
                                                     cudaStream_t stream) {
  const int floats = TPRT__M(TPRT_DTYPE_BF16) | TPRT__M(TPRT_DTYPE_F16) | TPRT__M(TPRT_DTYPE_F32);
  bool dtypes = ((floats >> in_dtype) & 1) && ((floats >> out_dtype) & 1);
  if (group < 1 || group > TPRT_MAX_WORLD_SIZE || !dtypes || n < 0 || own.member >= group || (own.member >= 0 && (!own.src || own.cols < 1 || own.pitch < own.cols)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "reduce_staged: group=%d (1..%d), float dtypes %s -> %s, n=%lld >= 0 and an own view of a "
                            "member below the group (rows of cols <= pitch elements) expected",
                            group, TPRT_MAX_WORLD_SIZE, tprt_dtype_name(in_dtype), tprt_dtype_name(out_dtype),
                            (long long)n);
  if (n == 0) return NULL;
  tprt__cuda_float_dispatch(in_dtype, [&](auto di) {
    tprt__cuda_float_dispatch(out_dtype, [&](auto dout) {
      tprt__reduce_pick<decltype(di)::value, decltype(dout)::value>(staged, group, n, out, canonical, own, stream);
    });
  });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_reduce_staged(const void* staged, int group, int in_dtype, int64_t n, void* out,
                                                 int out_dtype, int canonical, cudaStream_t stream) {
  tprt_cuda_staged_own_t none = {-1, NULL, 1, 1};
  return tprt_cuda_reduce_staged_own(staged, group, in_dtype, n, out, out_dtype, canonical, none, stream);
}

// The maximum of every member's element i, kept as the CPU keeps it (tprt_max_keep); the
// values are loaded and stored in one dtype, exactly.
template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__max_staged_kernel(const void* __restrict__ staged, int group, int64_t n, void* __restrict__ out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float m = tprt__cuda_ld(staged, D, i);
    for (int g = 1; g < group; ++g) m = tprt_max_keep(m, tprt__cuda_ld(staged, D, (int64_t)g * n + i));
    tprt__cuda_st(out, D, i, m);
  }
}

extern "C" tprt_status_t tprt_cuda_max_staged(const void* staged, int group, int dtype, int64_t n, void* out,
                                              cudaStream_t stream) {
  const int floats = TPRT__M(TPRT_DTYPE_BF16) | TPRT__M(TPRT_DTYPE_F16) | TPRT__M(TPRT_DTYPE_F32);
  if (group < 1 || group > TPRT_MAX_WORLD_SIZE || dtype < 0 || !((floats >> dtype) & 1) || n < 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "max_staged: group=%d (1..%d), a float dtype (got %s) and "
                            "n=%lld >= 0 expected", group, TPRT_MAX_WORLD_SIZE, tprt_dtype_name(dtype), (long long)n);
  if (n == 0) return NULL;
  dim3 grid(tprt__cuda_ew_blocks(n, TPRT__CUDA_EW_THREADS));
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      tprt__max_staged_kernel<TPRT_DTYPE_BF16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(staged, group, n, out);
      break;
    case TPRT_DTYPE_F16:
      tprt__max_staged_kernel<TPRT_DTYPE_F16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(staged, group, n, out);
      break;
    default:
      tprt__max_staged_kernel<TPRT_DTYPE_F32><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(staged, group, n, out);
      break;
  }
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}
