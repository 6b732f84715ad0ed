// The quantizing form of the fused norm kernel (tp.fused_allreduce_add_rmsnorm_quantize): the
// instantiations of fused_norm_kernel.cuh with Q = true, in a translation unit of their own so that
// they compile beside the plain form's (fused_norm.cu), which keeps the registers it has without them.
#include "fused_norm_kernel.cuh"

cudaError_t tprt__fn_dispatch_quantizing(bool rows, const tprt_cuda_peer_group_t* g, int64_t grid, int cs,
                                         const tprt_tensor_t* partial, const tprt_tensor_t* residual,
                                         const tprt_tensor_t* gamma, tprt_tensor_t* normed, tprt_tensor_t* residual_out,
                                         int64_t m, int64_t h, float eps, int canonical, int round_sum, int two_shot,
                                         const tprt__fn_quant_t& q, cudaStream_t stream) {
  return tprt__fn_dispatch<true>(rows, g, grid, cs, partial, residual, gamma, normed, residual_out, m, h, eps,
                                 canonical, round_sum, two_shot, q, stream);
}

cudaError_t tprt__fn_resident_quantizing(int sms, int* fewest_clusters, int* fewest_rows) {
  return tprt__fn_resident_shapes<true>(sms, fewest_clusters, fewest_rows);
}
