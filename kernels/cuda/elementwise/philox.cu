// tprt_cuda_fill_philox and tprt_cuda_copy in exact mode, bitwise equal to tprt_cpu_fill_philox
// and tprt_cpu_copy:
//   fill_philox  t viewed as [rows, cols] (cols its last dimension) is the block at (row_offset,
//                col_offset) of a logical [*, logical_cols] tensor: element (i, j) gets
//                fmaf(hi - lo, u, lo), u = tprt_philox_uniform(seed, stream, (row_offset + i) ·
//                logical_cols + col_offset + j) (Philox4x32-10, the same source as the CPU build,
//                tprt_numerics.h), rounded once (RNE) to t's dtype.
//   copy         dst = src (same shape): a byte copy (cudaMemcpyAsync, device to device) when the
//                dtypes match, otherwise a conversion between bf16/f16/f32 through f32 (RNE).
//
// Layouts: dense, any rank >= 1 (fill) or any rank (copy); any alignment (scalar accesses).
// Dtypes: fill bf16 / f16 / f32; copy any dtype when the dtypes match, else bf16/f16/f32 both
// sides (dtypes are run-time arguments of one conversion kernel).
//
// Launch geometry: one thread per element, 256-thread blocks, grid-stride over the elements (at
// most 65536 blocks); consecutive threads write consecutive elements (coalesced). Philox is
// computed once per element (the CPU does the same: each element's 32 bits come from its own
// counter block; sharing a 4-word block between 4 elements would be faster and is left for later).
#include "tprt_cuda_internal.cuh"

#include <stdio.h>

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt_fill_philox_kernel(void* t, int dtype, int64_t total, int64_t cols, uint64_t seed, uint64_t stream, float lo,
                            float range, int64_t row_offset, int64_t col_offset, int64_t logical_cols) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e / cols, j = e % cols;
    const uint64_t base = (uint64_t)(row_offset + i) * (uint64_t)logical_cols + (uint64_t)col_offset;
    const float u = tprt_philox_uniform(seed, stream, base + (uint64_t)j);
    tprt__cuda_st(t, dtype, e, __fmaf_rn(range, u, lo));
  }
}

extern "C" __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt_convert_kernel(const void* src, int src_dtype, void* dst, int dst_dtype, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    tprt__cuda_st(dst, dst_dtype, i, tprt__cuda_ld(src, src_dtype, i));
}

// ------------------------------------------------------------------------------------------------
// Kernel launchers (argument checks: tprt__check_fill_philox / tprt__check_copy, shared with the
// CPU kernels)
// ------------------------------------------------------------------------------------------------

tprt_status_t tprt_cuda_fill_philox(tprt_tensor_t* t, uint64_t seed, uint64_t stream, float lo, float hi,
                                    int64_t row_offset, int64_t col_offset, int64_t logical_cols,
                                    cudaStream_t cuda_stream) {
  tprt_status_t s = tprt__check_fill_philox(t, lo, hi, row_offset, col_offset, logical_cols);
  if (s) return s;
  int64_t cols = t->dims[t->rank - 1], total = tprt_tensor_numel(t);
  if (total == 0) return NULL;
  float range = hi - lo;  // the CPU's f32 subtraction (host arithmetic, -ffp-contract=off)
  void* td = t->data;
  int dtype = t->dtype;
  void* args[] = {&td, &dtype, &total, &cols, &seed, &stream, &lo, &range, &row_offset, &col_offset, &logical_cols};
  dim3 grid(tprt__cuda_ew_blocks(total, TPRT__CUDA_EW_THREADS));
  TPRT_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel((const void*)tprt_fill_philox_kernel, grid, dim3(TPRT__CUDA_EW_THREADS), args, 0, cuda_stream));
  return NULL;
}

tprt_status_t tprt_cuda_copy(const tprt_tensor_t* src, tprt_tensor_t* dst, cudaStream_t stream) {
  tprt_status_t s = tprt__check_copy(src, dst);
  if (s) return s;
  int64_t n = tprt_tensor_numel(src);
  if (n == 0) return NULL;
  if (src->dtype == dst->dtype) {
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->data, src->data, tprt_tensor_bytes(src), cudaMemcpyDefault, stream));
    return NULL;
  }
  const void* sd = src->data;
  void* dd = dst->data;
  int sdt = src->dtype, ddt = dst->dtype;
  void* args[] = {&sd, &sdt, &dd, &ddt, &n};
  dim3 grid(tprt__cuda_ew_blocks(n, TPRT__CUDA_EW_THREADS));
  TPRT_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel((const void*)tprt_convert_kernel, grid, dim3(TPRT__CUDA_EW_THREADS), args, 0, stream));
  return NULL;
}
