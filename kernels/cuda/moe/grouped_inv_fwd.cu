// The fwd layout of the invariant grouped GEMM (grouped_invariant.cuh): y[rows] = x[rows]·w[e]ᵀ, A row-major, B
// column-major (w[e] = [N,K]); D bf16 or an f32 partial. One file per layout so that the CUTLASS instantiations compile
// in parallel.
#include "grouped_invariant.cuh"

tprt_status_t tprt__grouped_inv_gemm_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                         int sm_count, cudaStream_t stream) {
  return tprt__grouped_inv_run<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>(plan, tree, d_f32, sm_count, stream);
}
