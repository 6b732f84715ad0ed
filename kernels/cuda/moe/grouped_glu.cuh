// The GLU in the grouped GEMM's epilogue (the fused grouped MLP, docs/cuda-backend.md "Kernel choice"):
// an operator-style CUTLASS epilogue for the pointer-array grouped kernel of
// grouped_fast.cuh that writes straight from the accumulator registers to global memory.
//
//   forward   gated[rows_g, F] = glu(h), h = the FC1 product [rows_g, 2F] rounded to bf16 and
//             never written: each thread holds a gate column and its up column in its registers
//             (interleave b: the up column is b columns after the gate column, b a multiple of 8
//             and 2b dividing the tile width), so the GLU is computed where the product is.
//   backward  dh[rows_g, 2F] = glu_grad(h, dgated), dgated = the FC2 dgrad product [rows_g, F]
//             rounded to bf16 and never written; h (the saved FC1 output) is read at the gate and
//             up columns of each element (any interleave).
//
// Bits: the same as the unfused sequence (grouped GEMM with a bf16 result, then tprt_cuda_glu or
// tprt_cuda_glu_grad): the product is rounded to bf16 by CUTLASS's converter, as the unfused
// GEMM's epilogue does, and the GLU and its gradient are tprt_glu_value and tprt_glu_grad_value
// of tprt_numerics.h (the exact kernels' functions; the including file is compiled with
// --fmad=false), rounded by tprt_f32_to_bf16. test/gpu/check_fast.cu compares them bitwise.
// Internal to kernels/cuda (grouped_glu_<mode>.cu).
#ifndef TPRT_GROUPED_GLU_CUH_
#define TPRT_GROUPED_GLU_CUH_

#include <cutlass/cutlass.h>
#include <cutlass/numeric_conversion.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/epilogue/dispatch_policy.hpp>
#include <cutlass/epilogue/thread/linear_combination.h>

#include "grouped_fast.cuh"
#include "tprt_numerics.h"

/// The grouped GEMM of |plan| with the GLU epilogue: the forward (FC1, layout FWD, D = gated) or
/// the backward (FC2's dgrad, layout DGRAD, D = dh), fast (grouped_glu_fast_{fwd,bwd}.cu) or
/// invariant (grouped_glu_inv_{fwd,bwd}.cu): one CUTLASS kernel per file, so that they compile side
/// by side.
tprt_status_t tprt__grouped_glu_gemm_fast_fwd(const tprt__grouped_plan_t& plan, const tprt__glu_epi_t& glu,
                                              int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_glu_gemm_fast_bwd(const tprt__grouped_plan_t& plan, const tprt__glu_epi_t& glu,
                                              int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_glu_gemm_inv_fwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                             const tprt__glu_epi_t& glu, int sm_count, cudaStream_t stream);
tprt_status_t tprt__grouped_glu_gemm_inv_bwd(const tprt__grouped_plan_t& plan, const tprt__grouped_tree_t& tree,
                                             const tprt__glu_epi_t& glu, int sm_count, cudaStream_t stream);
static inline tprt_status_t tprt__grouped_glu_gemm_fast(bool backward, const tprt__grouped_plan_t& plan,
                                                        const tprt__glu_epi_t& glu, int sm_count, cudaStream_t stream) {
  return backward ? tprt__grouped_glu_gemm_fast_bwd(plan, glu, sm_count, stream)
                  : tprt__grouped_glu_gemm_fast_fwd(plan, glu, sm_count, stream);
}
static inline tprt_status_t tprt__grouped_glu_gemm_inv(bool backward, const tprt__grouped_plan_t& plan,
                                                       const tprt__grouped_tree_t& tree, const tprt__glu_epi_t& glu,
                                                       int sm_count, cudaStream_t stream) {
  return backward ? tprt__grouped_glu_gemm_inv_bwd(plan, tree, glu, sm_count, stream)
                  : tprt__grouped_glu_gemm_inv_fwd(plan, tree, glu, sm_count, stream);
}

template <bool Backward>
class tprt__glu_epilogue {
 public:
  using EpilogueSchedule = cutlass::epilogue::PtrArrayNoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ElementOutput = cutlass::bfloat16_t;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementC = void;
  using StrideC = cute::Stride<int64_t, cute::_1, cute::_0>*;
  using InternalStrideC = cute::Stride<int64_t, cute::_1, cute::_0>;
  using ElementD = cutlass::bfloat16_t;
  using StrideD = StrideC;
  using InternalStrideD = InternalStrideC;
  using GmemElementC = ElementD;
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<ElementD, 1, float, float>;  // named only
  struct SharedStorage {};
  using TensorMapStorage = SharedStorage;

  struct Arguments {
    ElementD** ptr_D = nullptr;
    const int64_t* ldd = nullptr;
    tprt__glu_epi_t glu{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&, int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr_D && args.ldd && (!Backward || (args.glu.h && args.glu.d_base));
  }

  CUTLASS_HOST_DEVICE tprt__glu_epilogue(Params const& p) : params(p) {}
  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    const int m = get<0>(problem_shape_mnkl), n = get<1>(problem_shape_mnkl);
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    Tensor cD = local_tile(make_identity_tensor(make_shape(m, n)), take<0, 2>(blk_shape_MNK),
                           make_coord(m_coord, n_coord));
    Tensor tCcD = tiled_mma.get_thread_slice(thread_idx).partition_C(cD);
    uint16_t* d = reinterpret_cast<uint16_t*>(params.ptr_D[l_coord]);
    const int64_t ldd = params.ldd[l_coord];
    if constexpr (Backward) {
      backward(acc, tCcD, m, n, d, ldd);
    } else {
      // The interleave as a constant, so that a gate's up column is a fixed register.
      switch (params.glu.interleave) {
        case 8:
          forward<8>(acc, tCcD, m, n, d, ldd);
          break;
        case 16:
          forward<16>(acc, tCcD, m, n, d, ldd);
          break;
        case 32:
          forward<32>(acc, tCcD, m, n, d, ldd);
          break;
        case 64:
          forward<64>(acc, tCcD, m, n, d, ldd);
          break;
        default:
          forward<128>(acc, tCcD, m, n, d, ldd);
          break;
      }
    }
  }

 private:
  /// FC1's product rounded to bf16 as the unfused GEMM's epilogue rounds it, back in f32.
  CUTLASS_DEVICE static float round_product(float v) {
    cutlass::NumericConverter<cutlass::bfloat16_t, float, cutlass::FloatRoundStyle::round_to_nearest> cvt;
    return float(cvt(v));
  }

  template <int B, class Acc, class Crd>
  CUTLASS_DEVICE void forward(Acc const& acc, Crd const& tCcD, int m, int n, uint16_t* d, int64_t ldd) {
    using namespace cute;
    constexpr int kSize = decltype(size(acc))::value;
    constexpr int kUp = B / 2;  // values from a gate column to its up column: 8 columns are 4 values
    const tprt__glu_epi_t& glu = params.glu;
    cute::for_each(cute::make_int_sequence<kSize>{}, [&](auto I) {
      constexpr int i = decltype(I)::value;
      const int r = get<0>(tCcD(i)), c = get<1>(tCcD(i));
      if (c % (2 * B) >= B) return;  // an up column: done with its gate
      if constexpr (i + kUp >= kSize) {
        __trap();  // the up column is not in this thread's registers (an unsupported tile)
      } else {
        if (get<0>(tCcD(i + kUp)) != r || get<1>(tCcD(i + kUp)) != c + B) __trap();
        if (r >= m || c >= n) return;
        const float g = round_product(acc(i)), u = round_product(acc(i + kUp));
        const int64_t j = (int64_t)(c / (2 * B)) * B + c % (2 * B);
        d[(int64_t)r * ldd + j] = tprt_f32_to_bf16(tprt_glu_value(glu.kind, g, u, glu.alpha, glu.limit));
      }
    });
  }

  template <class Acc, class Crd>
  CUTLASS_DEVICE void backward(Acc const& acc, Crd const& tCcD, int m, int n, uint16_t* d, int64_t ldd) {
    using namespace cute;
    const tprt__glu_epi_t& glu = params.glu;
    const uint16_t* h = glu.h + (d - glu.d_base);  // this group's rows of h
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); ++i) {
      const int r = get<0>(tCcD(i)), j = get<1>(tCcD(i));
      if (r >= m || j >= n) continue;
      int64_t gcol, ucol;
      tprt_glu_columns(j, glu.f, glu.interleave, &gcol, &ucol);
      const int64_t row = (int64_t)r * ldd;
      float dg, du;
      tprt_glu_grad_value(glu.kind, tprt_bf16_to_f32(h[row + gcol]), tprt_bf16_to_f32(h[row + ucol]),
                          round_product(acc(i)), glu.alpha, glu.limit, &dg, &du);
      d[row + gcol] = tprt_f32_to_bf16(dg);
      d[row + ucol] = tprt_f32_to_bf16(du);
    }
  }

  Params params;
};

#endif  // TPRT_GROUPED_GLU_CUH_
