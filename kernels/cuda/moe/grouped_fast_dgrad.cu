// The dgrad layout of the fast-mode grouped GEMM (grouped_fast.cuh): A RowMajor, B RowMajor, D bf16 or f32.
// One file per layout so that the CUTLASS instantiations compile in parallel.
#include "grouped_fast.cuh"

tprt_status_t tprt__grouped_gemm_dgrad(const tprt__grouped_plan_t& plan, bool d_f32, int sm_count,
                                       cudaStream_t stream) {
  using A = cutlass::layout::RowMajor;
  using B = cutlass::layout::RowMajor;
  return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_gemm_t<A, B, float>>(plan, sm_count, stream)
               : tprt__grouped_gemm_run<tprt__grouped_gemm_t<A, B, cutlass::bfloat16_t>>(plan, sm_count, stream);
}
