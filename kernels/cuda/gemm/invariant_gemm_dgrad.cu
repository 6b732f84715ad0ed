// The dgrad layout of the invariant GEMM (invariant_gemm.cuh): dx[M,K] = dy[M,N]·w[N,K], A row-major,
// B row-major (w as stored); the result bf16 or an f32 partial. One file per layout so that the
// CUTLASS instantiations compile in parallel.
#include "invariant_gemm.cuh"

tprt_status_t tprt__inv_gemm_dgrad(const tprt__inv_gemm_t& g, cudaStream_t stream) {
  using A = cutlass::layout::RowMajor;
  using B = cutlass::layout::RowMajor;
  if (g.d_f32) return tprt__inv_gemm_select<A, B, float, false>(g, stream);
  return tprt__inv_gemm_select<A, B, cutlass::bfloat16_t, false>(g, stream);
}
