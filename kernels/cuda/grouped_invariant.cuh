// Invariant-mode grouped GEMM on Hopper tensor cores: CUTLASS's sm90 pointer-array grouped kernel
// of grouped_fast.cuh (per-group shapes and pointers in device memory, written by the planning
// kernels of grouped_fast.cu; one launch, no host sync) with the chunk-tree consumer loop of
// invariant_gemm.cuh, so that every output element is computed as by the dense invariant GEMM:
// per chunk one fixed WGMMA sequence from +0 over 64-wide k tiles (m64n128k16, 128 x 128 x 64
// tiles), the canonical pairwise tree over the chunks, one rounding in the epilogue. Nothing
// depends on the group's row count, on the other groups or on where a tile sits.
//
// |tiles_per_chunk| > 0: every group's K is chunks x tiles_per_chunk x 64 (forward, dgrad);
// 0: one chunk of each group's whole K, zero-padded to the k tile by TMA (the grouped wgrad, whose
// K is an expert's row count, known only on the device).
// Internal to kernels/cuda (grouped_fast.cu and grouped_inv_<layout>.cu).
#ifndef TPRT_GROUPED_INVARIANT_CUH_
#define TPRT_GROUPED_INVARIANT_CUH_

#include "grouped_fast.cuh"
#include "invariant_gemm.cuh"

/// Runs the invariant grouped GEMM of |layout| with D of |d_f32| ? f32 : bf16 (grouped_inv_<layout>.cu).
tprt_status_t tprt__grouped_inv_gemm_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                         int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_inv_gemm_dgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_inv_gemm_wgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream);

/// The CUTLASS kernel for operand layouts LayoutA/LayoutB and output element ElementD: the dense
/// invariant kernel's tile (128 x 128 x 64) and consumer loop in grouped_fast.cuh's grouped kernel.
/// The chunk tree with every level from 1 in the workspace: the pointer-array main loop holds
/// more state than the dense one, and tree level 1 in registers would spill.
template <class Base>
using tprt__grouped_chunk_tree_mma = tprt__chunk_tree_mma<Base, false>;

/// Clusters of 2 x 1, or 2 x 2 (|tree.wide_cluster|, set for contractions of 12288 and more): with
/// 128 x 128 tiles a 2 x 1 cluster reads 1.5 tiles' worth of operands from L2 per tile and k
/// tile, and a long contraction (the dgrad of an 8-expert FFN of 14336 x 2 over 28672) ran at the
/// bandwidth of L2 and HBM (10.7 ms against 6.1 ms on an H100); at K = 4096 the 2 x 1 cluster is
/// 4-5% faster. The cluster only multicasts operand loads: the bits do not depend on it.
using tprt__grouped_inv_wide_cluster_t = cute::Shape<cute::_2, cute::_2, cute::_1>;
template <class LayoutA, class LayoutB, class ElementD, class Cluster = cute::Shape<cute::_2, cute::_1, cute::_1>>
using tprt__grouped_inv_gemm_t = tprt__grouped_gemm_t<LayoutA, LayoutB, ElementD, tprt__grouped_inv_tile_t,
                                                      tprt__grouped_chunk_tree_mma, void, Cluster>;

/// Runs the invariant grouped kernel of layouts A/B with |tree|'s cluster and D f32 or bf16.
template <class A, class B>
tprt_status_t tprt__grouped_inv_run(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                    int sm_count, cudaStream_t stream) {
  using W = tprt__grouped_inv_wide_cluster_t;
  using bf16 = cutlass::bfloat16_t;
  if (tree.wide_cluster)
    return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, float, W>>(plan, sm_count, stream, &tree)
                 : tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, bf16, W>>(plan, sm_count, stream, &tree);
  return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, float>>(plan, sm_count, stream, &tree)
               : tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, bf16>>(plan, sm_count, stream, &tree);
}

#endif  // TPRT_GROUPED_INVARIANT_CUH_
