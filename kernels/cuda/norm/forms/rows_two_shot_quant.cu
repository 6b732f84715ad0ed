// One form of the fused norm kernel (fused_norm_kernel.cuh): a block per row, two-shot, quantizing
// (tp.fused_allreduce_add_rmsnorm_quantize). Its instantiations (every dtype pair and group size) in a
// translation unit of their own, so that the eight forms compile side by side.
#include "../fused_norm_kernel.cuh"

TPRT__FN_INSTANTIATE(TPRT__FN_ROW_THREADS, true, true)
