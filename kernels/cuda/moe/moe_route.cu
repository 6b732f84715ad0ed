// tprt_cuda_moe_route in exact mode, bitwise equal to tprt_cpu_moe_route: both run
// tprt_moe_route_row of tprt_numerics.h on each token (one implementation for host and device).
// One thread per token, with its softmax work rows in a stream-ordered scratch allocation.
#include "tprt_cuda_internal.cuh"

template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__moe_route_kernel(const void* __restrict__ logits, int64_t t, int64_t e, int top_k, int normalize,
                           float* __restrict__ work, unsigned char* __restrict__ taken, int32_t* __restrict__ idx,
                           float* __restrict__ wts) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < t; row += stride) {
    float* p = work + row * 2 * e;
    for (int64_t i = 0; i < e; ++i) p[i] = tprt__cuda_ld(logits, D, row * e + i);
    tprt_moe_route_row(p, p + e, taken + row * e, e, top_k, normalize != 0, idx + row * top_k, wts + row * top_k);
  }
}

extern "C" tprt_status_t tprt_cuda_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices,
                                             tprt_tensor_t* weights, int top_k, bool normalize, cudaStream_t stream) {
  tprt_status_t s = tprt__check_moe_route(logits, indices, weights, top_k);
  if (s) return s;
  int64_t t = logits->dims[0], e = logits->dims[1];
  if (t == 0) return NULL;
  float* work = NULL;
  unsigned char* taken = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&work, (size_t)(t * e) * (2 * sizeof(float) + 1), stream));
  taken = (unsigned char*)(work + 2 * t * e);
  // Few tokens per block: each thread walks its whole row several times.
  const int threads = 64;
  dim3 grid((unsigned)((t + threads - 1) / threads < 65536 ? (t + threads - 1) / threads : 65536));
  switch (logits->dtype) {
    case TPRT_DTYPE_BF16:
      tprt__moe_route_kernel<TPRT_DTYPE_BF16><<<grid, threads, 0, stream>>>(logits->data, t, e, top_k, normalize, work,
                                                                            taken, (int32_t*)indices->data,
                                                                            (float*)weights->data);
      break;
    case TPRT_DTYPE_F16:
      tprt__moe_route_kernel<TPRT_DTYPE_F16><<<grid, threads, 0, stream>>>(logits->data, t, e, top_k, normalize, work,
                                                                           taken, (int32_t*)indices->data,
                                                                           (float*)weights->data);
      break;
    default:
      tprt__moe_route_kernel<TPRT_DTYPE_F32><<<grid, threads, 0, stream>>>(logits->data, t, e, top_k, normalize, work,
                                                                           taken, (int32_t*)indices->data,
                                                                           (float*)weights->data);
      break;
  }
  cudaError_t err = cudaGetLastError();
  tprt__cuda_free_async(work, stream);
  if (err != cudaSuccess) return tprt__cuda_make_status(err, "moe_route kernel", __FILE__, __LINE__);
  return NULL;
}
