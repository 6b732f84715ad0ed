// The forward layout of the invariant GEMM (invariant_gemm.cuh): y[M,N] = x[M,K]·w[N,K]ᵀ, A row-major,
// B column-major; y bf16 (with or without a bias) or an f32 partial. One file per layout so that
// the CUTLASS instantiations compile in parallel.
#include "invariant_gemm.cuh"

tprt_status_t tprt__inv_gemm_fwd(const tprt__inv_gemm_t& g, cudaStream_t stream) {
  using A = cutlass::layout::RowMajor;
  using B = cutlass::layout::ColumnMajor;
  if (g.d_f32) return tprt__inv_gemm_select<A, B, float, false>(g, stream);
  if (g.bias) return tprt__inv_gemm_select<A, B, cutlass::bfloat16_t, true>(g, stream);
  return tprt__inv_gemm_select<A, B, cutlass::bfloat16_t, false>(g, stream);
}
