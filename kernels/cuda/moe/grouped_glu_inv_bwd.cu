// The invariant grouped GEMM with the GLU in the epilogue (grouped_glu.cuh), backward: FC2's dgrad
// writing glu_grad(h, ·) on the chunk-tree kernel of grouped_invariant.cuh. The forward is
// grouped_glu_inv_fwd.cu's.
#include "grouped_glu.cuh"
#include "grouped_invariant.cuh"

tprt_status_t tprt__grouped_glu_gemm_inv_bwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                             const tprt__glu_epi_t& glu, int sm_count, cudaStream_t stream) {
  using R = cutlass::layout::RowMajor;
  using Tile = tprt__grouped_inv_tile_t;
  return tprt__grouped_gemm_run<
      tprt__grouped_gemm_t<R, R, cutlass::bfloat16_t, Tile, tprt__grouped_chunk_tree_mma, tprt__glu_epilogue<true>,
                           cute::Shape<cute::_2, cute::_1, cute::_1>, kTprtGroupedTreeSmem>>(plan, sm_count, stream,
                                                                                             &tree, &glu);
}
