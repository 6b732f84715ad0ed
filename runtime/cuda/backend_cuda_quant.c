// The CUDA backend's entries for a shard's per-tensor quantization (backend_cuda_impl.h): tp.amax
// and tp.quantize with an amax operand, the kernels of quant.cu on the calling rank's compute
// stream. (The max all-reduce between them is in backend_cuda_nccl.c.)
#include "backend_cuda_impl.h"

tprt_status_t tprt__cuda_amax(const tprt_tensor_t* x, tprt_tensor_t* amax) {
  return tprt_cuda_amax(x, amax, tprt__r.stream);
}

tprt_status_t tprt__cuda_quantize_with_amax(const tprt_tensor_t* x, const tprt_tensor_t* amax, tprt_tensor_t* data,
                                            tprt_tensor_t* scale, tprt_tensor_t* global_scale, int format, int axis) {
  return tprt_cuda_quantize_with_amax(x, amax, data, scale, global_scale, format, axis, tprt__r.stream);
}
