// The fast-mode grouped GEMMs with the GLU in the epilogue (grouped_glu.cuh): FC1's forward
// writing glu(h), FC2's dgrad writing glu_grad(h, ·); grouped_fast.cuh's kernel and tiles.
#include "grouped_glu.cuh"

tprt_status_t tprt__grouped_glu_gemm_fast(bool backward, const tprt__grouped_plan_t& plan, const tprt__glu_epi_t& glu,
                                          int sm_count, cudaStream_t stream) {
  using R = cutlass::layout::RowMajor;
  using C = cutlass::layout::ColumnMajor;
  using Tile = tprt__grouped_fast_tile_t;
  if (backward)
    return tprt__grouped_gemm_run<tprt__grouped_gemm_t<R, R, cutlass::bfloat16_t, Tile, tprt__plain_mma,
                                                       tprt__glu_epilogue<true>>>(plan, sm_count, stream, nullptr,
                                                                                  &glu);
  return tprt__grouped_gemm_run<
      tprt__grouped_gemm_t<R, C, cutlass::bfloat16_t, Tile, tprt__plain_mma, tprt__glu_epilogue<false>>>(
      plan, sm_count, stream, nullptr, &glu);
}
