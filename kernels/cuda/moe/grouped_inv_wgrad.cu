// The wgrad layout of the invariant grouped GEMM (grouped_invariant.cuh): dw[e] = dy[rows_e]ᵀ·x[rows_e], A column-major
// (dyᵀ), B row-major; K = the rows; D bf16 or an f32 partial. One file per layout so that the CUTLASS instantiations
// compile in parallel.
#include "grouped_invariant.cuh"

tprt_status_t tprt__grouped_inv_gemm_wgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream) {
  // One chunk per expert (tree.tiles_per_chunk 0): CUTLASS's main loop is that chunk's sequence.
  if (tree.tiles_per_chunk != 0)
    return tprt_make_status(TPRT_STATUS_INTERNAL, "invariant grouped wgrad: one chunk expected, got %d k tiles a chunk",
                            tree.tiles_per_chunk);
  using A = cutlass::layout::ColumnMajor;
  using B = cutlass::layout::RowMajor;
  return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_inv_one_chunk_gemm_t<A, B, float>>(plan, sm_count, stream)
               : tprt__grouped_gemm_run<tprt__grouped_inv_one_chunk_gemm_t<A, B, cutlass::bfloat16_t>>(plan, sm_count,
                                                                                                      stream);
}
