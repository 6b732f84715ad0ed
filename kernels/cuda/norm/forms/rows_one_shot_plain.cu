// One form of the fused norm kernel (fused_norm_kernel.cuh): a block per row, one-shot, plain. Its
// instantiations (every dtype pair and group size) in a translation unit of their own, so that the eight
// forms compile side by side.
#include "../fused_norm_kernel.cuh"

TPRT__FN_INSTANTIATE(TPRT__FN_ROW_THREADS, false, false)
