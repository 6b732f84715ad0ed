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
#include "gemm/invariant_gemm.cuh"

/// Runs the invariant grouped GEMM of |layout| with D of |d_f32| ? f32 : bf16 (grouped_inv_<layout>.cu).
tprt_status_t tprt__grouped_inv_gemm_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                         int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_inv_gemm_dgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_inv_gemm_wgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream);

/// The CUTLASS kernels: the dense invariant kernel's tile (128 x 128 x 64) and consumer loop in
/// grouped_fast.cuh's grouped kernel, two of them (the bits are the same; the choice is speed):
/// - short contractions (under 12288): tree level 1 in shared memory, clusters of 2 x 1. The
///   pointer-array main loop holds more state than the dense one, and level 1 in registers
///   spilled a kilobyte; in the L2 workspace it cost a 64 KB store or load per pair of chunks and
///   tile (E = 8 x 4096 tokens, 4096 x 4096 forward: 2.34 ms there, 2.13 in shared memory).
/// - long ones (tprt__grouped_tree_t::long_k): level 1 in the workspace, which keeps the two
///   pipeline stages that shared memory would take, and clusters of 2 x 2: with 128 x 128 tiles a
///   2 x 1 cluster reads 1.5 tiles' worth of operands from L2 per tile and k tile, and the dgrad of
///   an 8-expert FFN (2 x 14336, contracted over 28672) ran at the bandwidth of L2 and HBM (10.7 ms
///   against 6.2 ms). The cluster only multicasts operand loads.
template <class Base>
using tprt__grouped_chunk_tree_mma = tprt__chunk_tree_mma<Base, TPRT__PEND_SMEM>;
template <class Base>
using tprt__grouped_chunk_tree_ws_mma = tprt__chunk_tree_mma<Base, TPRT__PEND_WORKSPACE>;
/// The shared memory tprt__grouped_chunk_tree_mma adds (tprt__grouped_gemm_t's WrapSmemBytes).
constexpr int kTprtGroupedTreeSmem = kTprtInvPendSmemBytes;
template <class LayoutA, class LayoutB, class ElementD>
using tprt__grouped_inv_gemm_t = tprt__grouped_gemm_t<LayoutA, LayoutB, ElementD, tprt__grouped_inv_tile_t,
                                                      tprt__grouped_chunk_tree_mma, void,
                                                      cute::Shape<cute::_2, cute::_1, cute::_1>, kTprtGroupedTreeSmem>;
template <class LayoutA, class LayoutB, class ElementD>
using tprt__grouped_inv_long_gemm_t =
    tprt__grouped_gemm_t<LayoutA, LayoutB, ElementD, tprt__grouped_inv_tile_t, tprt__grouped_chunk_tree_ws_mma, void,
                         cute::Shape<cute::_2, cute::_2, cute::_1>>;
/// The wgrad's single chunk (an expert's rows, from +0 in k-tile order) is CUTLASS's own main
/// loop, MMA for MMA: no tree, no shared memory taken from the stages.
template <class LayoutA, class LayoutB, class ElementD>
using tprt__grouped_inv_one_chunk_gemm_t =
    tprt__grouped_gemm_t<LayoutA, LayoutB, ElementD, tprt__grouped_inv_tile_t, tprt__plain_mma>;

/// The first workspace level of the kernel that |tree| selects.
inline int tprt__grouped_inv_first_level(const tprt__grouped_tree_t& tree) {
  return tprt__inv_first_workspace_level(tree.long_k ? TPRT__PEND_WORKSPACE : TPRT__PEND_SMEM);
}

/// Runs the invariant grouped kernel of layouts A/B that |tree| selects, D f32 or bf16.
template <class A, class B>
tprt_status_t tprt__grouped_inv_run(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                    int sm_count, cudaStream_t stream) {
  using bf16 = cutlass::bfloat16_t;
  if (tree.long_k)
    return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_inv_long_gemm_t<A, B, float>>(plan, sm_count, stream, &tree)
                 : tprt__grouped_gemm_run<tprt__grouped_inv_long_gemm_t<A, B, bf16>>(plan, sm_count, stream, &tree);
  return d_f32 ? tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, float>>(plan, sm_count, stream, &tree)
               : tprt__grouped_gemm_run<tprt__grouped_inv_gemm_t<A, B, bf16>>(plan, sm_count, stream, &tree);
}

#endif  // TPRT_GROUPED_INVARIANT_CUH_
