// tprt_cuda_reduce_staged: the summing half of the CUDA backend's reducing collectives (and
// tprt_cuda_max_staged the maximum of a max all-reduce, for ranks that share GPUs). The
// group's inputs arrive by pure NCCL data movement (all-gather or send/recv) into one staged
// buffer [group][n]; this kernel adds them in the order of the CPU collectives
// (runtime/tprt_collectives_compute.c, docs/runtime.md): canonical = the fixed pairwise tree over
// group ranks (member g += member g + s for s = 1, 2, 4, ...), any = increasing group rank from
// member 0's value; f32 arithmetic (__fadd_rn), one rounding to the output dtype. So a canonical
// all-reduce on the GPU gives the CPU backend's bits.
//
// Launch geometry: one thread per element, 256-thread blocks, grid-stride; each thread reads its
// element from every member (stride n, coalesced across the warp).
#include "tprt_cuda_internal.cuh"
#include "tprt_world.h"  // TPRT_MAX_WORLD_SIZE

template <int DI, int DO>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__reduce_staged_kernel(const void* __restrict__ staged, int group, int64_t n, void* __restrict__ out,
                               int canonical) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v[TPRT_MAX_WORLD_SIZE];
    for (int g = 0; g < group; ++g) v[g] = tprt__cuda_ld(staged, DI, (int64_t)g * n + i);
    if (canonical) {
      for (int s = 1; s < group; s *= 2)
        for (int g = 0; g + s < group; g += 2 * s) v[g] = __fadd_rn(v[g], v[g + s]);
    } else {
      for (int g = 1; g < group; ++g) v[0] = __fadd_rn(v[0], v[g]);
    }
    tprt__cuda_st(out, DO, i, v[0]);
  }
}

template <int DI>
static tprt_status_t tprt__reduce_launch_out(const void* staged, int group, int64_t n, void* out, int out_dtype,
                                             int canonical, cudaStream_t stream) {
  dim3 grid(tprt__cuda_ew_blocks(n, TPRT__CUDA_EW_THREADS));
  switch (out_dtype) {
    case TPRT_DTYPE_BF16:
      tprt__reduce_staged_kernel<DI, TPRT_DTYPE_BF16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(staged, group, n, out,
                                                                                                   canonical);
      break;
    case TPRT_DTYPE_F16:
      tprt__reduce_staged_kernel<DI, TPRT_DTYPE_F16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(staged, group, n, out,
                                                                                                  canonical);
      break;
    default:
      tprt__reduce_staged_kernel<DI, TPRT_DTYPE_F32><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(staged, group, n, out,
                                                                                                  canonical);
      break;
  }
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_reduce_staged(const void* staged, int group, int in_dtype, int64_t n, void* out,
                                                 int out_dtype, int canonical, cudaStream_t stream) {
  const int floats = TPRT__M(TPRT_DTYPE_BF16) | TPRT__M(TPRT_DTYPE_F16) | TPRT__M(TPRT_DTYPE_F32);
  if (group < 1 || group > TPRT_MAX_WORLD_SIZE || !((floats >> in_dtype) & 1) || !((floats >> out_dtype) & 1) || n < 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "reduce_staged: group=%d (1..%d), float dtypes %s -> %s and n=%lld >= 0 expected", group,
                            TPRT_MAX_WORLD_SIZE, tprt_dtype_name(in_dtype), tprt_dtype_name(out_dtype), (long long)n);
  if (n == 0) return NULL;
  switch (in_dtype) {
    case TPRT_DTYPE_BF16:
      return tprt__reduce_launch_out<TPRT_DTYPE_BF16>(staged, group, n, out, out_dtype, canonical, stream);
    case TPRT_DTYPE_F16:
      return tprt__reduce_launch_out<TPRT_DTYPE_F16>(staged, group, n, out, out_dtype, canonical, stream);
    default:
      return tprt__reduce_launch_out<TPRT_DTYPE_F32>(staged, group, n, out, out_dtype, canonical, stream);
  }
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
