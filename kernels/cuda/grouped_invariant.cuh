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

/// The chunk tree of one invariant grouped GEMM (device workspace as tprt__inv_gemm_t's).
struct tprt__grouped_tree_t {
  int tiles_per_chunk;
  float* tree_ws;
  int tree_ctas;
};

/// Runs the invariant grouped GEMM of |layout| with D of |d_f32| ? f32 : bf16 (grouped_inv_<layout>.cu).
tprt_status_t tprt__grouped_inv_gemm_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree, bool d_f32,
                                         int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_inv_gemm_dgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_inv_gemm_wgrad(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                           bool d_f32, int sm_count, cudaStream_t stream);

/// The CUTLASS kernel for operand layouts LayoutA/LayoutB and output element ElementD: the dense
/// invariant kernel's tile (128 x 128 x 64) and consumer loop; clusters of 2 x 1 (multicast only).
template <class LayoutA, class LayoutB, class ElementD>
struct tprt__grouped_inv_gemm_t {
  using Element = cutlass::bfloat16_t;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
  static constexpr int kAlign = 16 / sizeof(Element);
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor*, kAlignD,
      ElementD, cutlass::layout::RowMajor*, kAlignD, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float, void, float>>::CollectiveOp;
  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlign, Element, LayoutB*, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop = tprt__chunk_tree_mma<BaseMainloop>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  static_assert(sizeof(StrideA) == 8 && sizeof(StrideB) == 8 && sizeof(StrideD) == 8, "one int64 per stride");
};

/// Launches the invariant grouped GEMM |G| over |plan| on |stream|.
template <class G>
tprt_status_t tprt__grouped_inv_gemm_run(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                         int sm_count, cudaStream_t stream) {
  using Gemm = typename G::Gemm;
  using ElementD = typename Gemm::ElementD;
  typename G::Mainloop::Arguments mainloop{};
  static_cast<typename G::BaseMainloop::Arguments&>(mainloop) = typename G::BaseMainloop::Arguments{
      reinterpret_cast<const typename G::Element**>(plan.a), reinterpret_cast<typename G::StrideA*>(plan.lda),
      reinterpret_cast<const typename G::Element**>(plan.b), reinterpret_cast<typename G::StrideB*>(plan.ldb)};
  mainloop.tiles_per_chunk = tree.tiles_per_chunk;
  mainloop.tree_ws = tree.tree_ws;
  mainloop.tree_ctas = tree.tree_ctas;
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGrouped,
      {plan.groups, plan.problems, nullptr},
      mainloop,
      {{}, nullptr, nullptr, reinterpret_cast<ElementD**>(plan.d), reinterpret_cast<typename G::StrideD*>(plan.ldd)}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.hw_info.sm_count = sm_count;
  return tprt__cutlass_launch<Gemm>(args, "invariant grouped GEMM", stream);
}

#endif  // TPRT_GROUPED_INVARIANT_CUH_
