// The exact GEMM's kernels (linear_kernel.cuh) for a and b read as rows: every
// dtype, tile and load width, in a translation unit of their own.
#include "../linear_kernel.cuh"

template const void* tprt__gemm_pick<TPRT__ROWS, TPRT__ROWS>(bool, int, bool);
