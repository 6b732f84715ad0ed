// The invariant grouped GEMM with the GLU in the epilogue (grouped_glu.cuh), forward: the chunk-tree
// kernel of grouped_invariant.cuh, so the product (and so h) has the invariant grouped GEMM's bits.
// The backward is grouped_glu_inv_bwd.cu's.
#include "grouped_glu.cuh"
#include "grouped_invariant.cuh"

tprt_status_t tprt__grouped_glu_gemm_inv_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                             const tprt__glu_epi_t& glu, int sm_count, cudaStream_t stream) {
  using R = cutlass::layout::RowMajor;
  using C = cutlass::layout::ColumnMajor;
  using Tile = tprt__grouped_inv_tile_t;
  return tprt__grouped_gemm_run<
      tprt__grouped_gemm_t<R, C, cutlass::bfloat16_t, Tile, tprt__grouped_chunk_tree_mma, tprt__glu_epilogue<false>,
                           cute::Shape<cute::_2, cute::_1, cute::_1>, kTprtGroupedTreeSmem>>(plan, sm_count, stream,
                                                                                             &tree, &glu);
}
