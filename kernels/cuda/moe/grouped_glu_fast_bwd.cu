// The fast-mode grouped GEMM with the GLU in the epilogue (grouped_glu.cuh), backward: FC2's dgrad
// writing glu_grad(h, ·); grouped_fast.cuh's kernel and tiles. The forward is grouped_glu_fast_fwd.cu's.
#include "grouped_glu.cuh"

tprt_status_t tprt__grouped_glu_gemm_fast_bwd(const tprt__grouped_plan_t& plan, const tprt__glu_epi_t& glu,
                                              int sm_count, cudaStream_t stream) {
  using R = cutlass::layout::RowMajor;
  using Tile = tprt__grouped_fast_tile_t;
  return tprt__grouped_gemm_run<
      tprt__grouped_gemm_t<R, R, cutlass::bfloat16_t, Tile, tprt__plain_mma, tprt__glu_epilogue<true>>>(
      plan, sm_count, stream, nullptr, &glu);
}
