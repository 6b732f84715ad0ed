// The fast-mode grouped GEMM with the GLU in the epilogue (grouped_glu.cuh), forward: FC1 writing
// glu(h); grouped_fast.cuh's kernel and tiles. The backward is grouped_glu_fast_bwd.cu's.
#include "grouped_glu.cuh"

tprt_status_t tprt__grouped_glu_gemm_fast_fwd(const tprt__grouped_plan_t& plan, const tprt__glu_epi_t& glu,
                                              int sm_count, cudaStream_t stream) {
  using R = cutlass::layout::RowMajor;
  using C = cutlass::layout::ColumnMajor;
  using Tile = tprt__grouped_fast_tile_t;
  return tprt__grouped_gemm_run<
      tprt__grouped_gemm_t<R, C, cutlass::bfloat16_t, Tile, tprt__plain_mma, tprt__glu_epilogue<false>>>(
      plan, sm_count, stream, nullptr, &glu);
}
