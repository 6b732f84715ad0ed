// The fwd layout of the invariant grouped GEMM (grouped_invariant.cuh): y[rows] = x[rows]·w[e]ᵀ, A row-major, B
// column-major (w[e] = [N,K]); D bf16 or an f32 partial. One file per layout so that the CUTLASS instantiations compile
// in parallel.
#include "grouped_invariant.cuh"

tprt_status_t tprt__grouped_inv_gemm_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                         int sm_count, cudaStream_t stream) {
  using A = cutlass::layout::RowMajor;
  using B = cutlass::layout::ColumnMajor;
  return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, float>>(plan, sm_count, stream, &tree)
               : tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, cutlass::bfloat16_t>>(plan, sm_count, stream,
                                                                                             &tree);
}
