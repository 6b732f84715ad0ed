// Fast-mode grouped GEMM on Hopper tensor cores: CUTLASS's sm90 pointer-array grouped kernel
// (TMA loads, WGMMA, warp-specialized cooperative schedule, persistent tile scheduler) whose
// per-group problem shapes, pointers and leading dimensions live in device memory, written by a
// small planning kernel from the device group sizes: one launch for all experts, no host sync.
//
// Operands are bf16; D is bf16 or f32 (the unrounded partial of a row-parallel shard). Three
// operand layouts cover the three contractions of a grouped linear (row-major tensors):
//   forward  y[rows_g]  = x[rows_g] · w[e]ᵀ     A row-major (x), B column-major (w[e] = [N,K])
//   dgrad    dx[rows_g] = dy[rows_g] · w[e]     A row-major (dy), B row-major (w[e] as K'=N x N'=K)
//   wgrad    dw[e]      = dy[rows_e]ᵀ · x[rows_e]  A column-major (dyᵀ), B row-major (x); K = rows
// Internal to kernels/cuda (grouped_fast.cu and grouped_fast_<layout>.cu).
#ifndef TPRT_GROUPED_FAST_CUH_
#define TPRT_GROUPED_FAST_CUH_

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <type_traits>

#include "cutlass_launch.cuh"
#include "tprt_cuda_status.h"
#include "tprt_status.h"

/// The per-group arguments of one grouped GEMM, in device memory (one allocation): |groups|
/// problems (M, N, K), operand pointers and leading dimensions (elements).
struct tprt__grouped_plan_t {
  int groups;
  cute::Shape<int, int, int>* problems;
  const void** a;
  const void** b;
  void** d;
  int64_t* lda;
  int64_t* ldb;
  int64_t* ldd;
};

/// The layouts of the three contractions (CUTLASS's A [M,K] and B [K,N] conventions).
enum tprt__grouped_layout_t { TPRT__GROUPED_FWD = 0, TPRT__GROUPED_DGRAD = 1, TPRT__GROUPED_WGRAD = 2 };

/// Runs the grouped GEMM of |layout| with D of |d_f32| ? f32 : bf16 (grouped_fast_<layout>.cu).
tprt_status_t tprt__grouped_gemm_fwd(const tprt__grouped_plan_t& plan, bool d_f32, int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_gemm_dgrad(const tprt__grouped_plan_t& plan, bool d_f32, int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_gemm_wgrad(const tprt__grouped_plan_t& plan, bool d_f32, int sm_count, cudaStream_t stream);

/// The chunk tree of an invariant grouped GEMM (grouped_invariant.cuh): |tiles_per_chunk| k tiles
/// a chunk (0: one chunk of each group's K), the workspace of the deeper levels as
/// tprt__inv_gemm_t's.
struct tprt__grouped_tree_t {
  int tiles_per_chunk;
  float* tree_ws;
  int tree_ctas;
  /// A long contraction: the kernel for those (grouped_invariant.cuh).
  bool long_k;
};

/// The GLU of a grouped GEMM with the GLU in its epilogue (grouped_glu.cuh): kind, interleave,
/// alpha, limit as tp.glu's; f = F. Backward: h is the FC1 output [T, 2F] and d_base the dh
/// tensor the plan's D pointers point into (a group's h rows sit at the same offset from h as its
/// dh rows from d_base).
struct tprt__glu_epi_t {
  int kind;
  int interleave;
  float alpha, limit;
  int64_t f;
  const uint16_t* h;
  const uint16_t* d_base;
};

/// The tiles of the fast kernels (PyTorch's choice for torch._grouped_mm's large problems) and of
/// the invariant ones (the dense invariant kernel's).
using tprt__grouped_fast_tile_t = cute::Shape<cute::_128, cute::_256, cute::_64>;
using tprt__grouped_inv_tile_t = cute::Shape<cute::_128, cute::_128, cute::_64>;

/// Whether the forward GLU epilogue can pair the gate and up columns of |interleave| in tiles
/// |tile_n| wide: b a multiple of 8 (a thread's accumulators cover columns in groups of 8) with 2b
/// dividing the tile.
constexpr bool tprt__glu_fwd_pairs(int64_t interleave, int tile_n) {
  return interleave >= 8 && interleave <= 128 && interleave % 8 == 0 && tile_n % (2 * interleave) == 0;
}

/// CUTLASS's collective main loop as it is (the fast kernels).
template <class Base>
using tprt__plain_mma = Base;

/// The CUTLASS kernel for operand layouts LayoutA/LayoutB and output element ElementD: clusters
/// of 2 x 1 (the invariant kernels: 2 x 2), pipeline stages as many as fit beside the epilogue's shared memory. The fast kernels
/// take tiles of 128 x 256 x 64 and CUTLASS's main loop; the invariant ones (grouped_invariant.cuh)
/// 128 x 128 x 64 tiles and the chunk-tree consumer loop (Wrap = tprt__grouped_chunk_tree_mma).
/// |Epi|: void for CUTLASS's TMA epilogue (D = the product), or an operator-style epilogue of
/// grouped_glu.cuh. |WrapSmemBytes|: shared memory that Wrap's main loop adds to CUTLASS's (taken
/// from the pipeline stages).
template <class LayoutA, class LayoutB, class ElementD, class TileShape_ = tprt__grouped_fast_tile_t,
          template <class> class Wrap = tprt__plain_mma, class Epi = void,
          class ClusterShape_ = cute::Shape<cute::_2, cute::_1, cute::_1>, int WrapSmemBytes = 0>
struct tprt__grouped_gemm_t {
  using Element = cutlass::bfloat16_t;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using TileShape = TileShape_;
  using ClusterShape = ClusterShape_;
  static constexpr int kAlign = 16 / sizeof(Element);
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  static constexpr bool kGlu = !std::is_void_v<Epi>;
  using CollectiveEpilogue = cute::conditional_t<
      kGlu, cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<cute::conditional_t<kGlu, Epi, int>>,
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
          cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor*, kAlignD,
          ElementD, cutlass::layout::RowMajor*, kAlignD, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
          cutlass::epilogue::fusion::LinearCombination<ElementD, float, void, float>>::CollectiveOp>;
  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlign, Element, LayoutB*, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage)) + WrapSmemBytes>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop = Wrap<BaseMainloop>;
  static constexpr bool kTree = !std::is_same_v<Mainloop, BaseMainloop>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  // The plan stores one int64 leading dimension per group: the only non-constant stride mode.
  static_assert(sizeof(StrideA) == 8 && sizeof(StrideB) == 8 && sizeof(StrideD) == 8, "one int64 per stride");
};

/// Launches the grouped GEMM |G| over |plan| on |stream| (CUTLASS's workspace stream-ordered);
/// |tree|: the chunk tree of an invariant kernel (ignored by the fast ones); |glu|: the GLU of a
/// kernel with the GLU epilogue.
template <class G>
tprt_status_t tprt__grouped_gemm_run(const tprt__grouped_plan_t& plan, int sm_count, cudaStream_t stream,
                                     const tprt__grouped_tree_t* tree = nullptr,
                                     const tprt__glu_epi_t* glu = nullptr) {
  using Gemm = typename G::Gemm;
  using ElementD = typename Gemm::ElementD;
  typename G::Mainloop::Arguments mainloop{};
  static_cast<typename G::BaseMainloop::Arguments&>(mainloop) = typename G::BaseMainloop::Arguments{
      reinterpret_cast<const typename G::Element**>(plan.a), reinterpret_cast<typename G::StrideA*>(plan.lda),
      reinterpret_cast<const typename G::Element**>(plan.b), reinterpret_cast<typename G::StrideB*>(plan.ldb)};
  if constexpr (G::kTree) {
    mainloop.tiles_per_chunk = tree->tiles_per_chunk;
    mainloop.tree_ws = tree->tree_ws;
    mainloop.tree_ctas = tree->tree_ctas;
  }
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {plan.groups, plan.problems, nullptr};
  args.mainloop = mainloop;
  if constexpr (G::kGlu) {
    args.epilogue.ptr_D = reinterpret_cast<ElementD**>(plan.d);
    args.epilogue.ldd = plan.ldd;
    args.epilogue.glu = *glu;
  } else {
    args.epilogue = {
        {}, nullptr, nullptr, reinterpret_cast<ElementD**>(plan.d), reinterpret_cast<typename G::StrideD*>(plan.ldd)};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
  }
  args.hw_info.sm_count = sm_count;
  return tprt__cutlass_launch<Gemm>(args, G::kTree ? "invariant grouped GEMM" : "fast grouped GEMM", stream);
}

#endif  // TPRT_GROUPED_FAST_CUH_
