// Invariant-mode GEMM on Hopper tensor cores (docs/numerics.md "Modes", "Invariant tensor-core
// kernels"): D = the canonical chunk tree over K of tensor-core partials.
//
// The contraction length K is split into C chunks of S = K / C elements (S a multiple of the 64-wide
// k tile). Each chunk's partial is one fixed WGMMA sequence: from +0 (the first MMA of the chunk
// does not accumulate), the chunk's k tiles in increasing order, each tile's four m64n128k16 MMAs
// in increasing k, f32 accumulation. The C partials are combined by the pairwise tree of
// docs/numerics.md ("Canonical K accumulation", step 4) with IEEE f32 additions as the chunks end
// (a binary counter: chunk c is added, as the right operand, to the pending left subtrees of the
// levels where c has trailing one bits). Two accumulator sets alternate between chunks, so that
// level 0 (a pair of chunks) is one register add after the pair's MMAs; level 1 (the pending pair,
// then the sum of four chunks) is kept in registers that no MMA writes, and the deeper levels
// (only when C > 4) in a per-CTA global workspace that stays in L2, merged right after the pair's
// sum while no MMA is in flight.
//
// Nothing in an element's arithmetic depends on M, on the other rows, on where the tile sits or on
// the number of chunks a rank holds (a rank of R owning chunks [r·C/R, (r+1)·C/R) computes exactly
// its subtree): the tile shape (128 x 128 x 64), the MMA instruction and the K order are fixed for
// every problem (the 1 x 2 cluster only multicasts the operand loads). So the result is invariant over batch size and,
// through the canonical collectives, over TP/SP/EP degrees; its bits are those of this kernel on sm_90 (H100 = H200).
//
// Built on CUTLASS's sm90 TMA + WGMMA warp-specialized cooperative kernel with a persistent
// data-parallel tile scheduler (never split-K or stream-K); only the consumer's main loop
// (ChunkTreeMma::mma) differs from CUTLASS's. Internal to kernels/cuda (invariant_gemm*.cu).
#ifndef TPRT_INVARIANT_GEMM_CUH_
#define TPRT_INVARIANT_GEMM_CUH_

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "cutlass_launch.cuh"
#include "tprt_cuda_internal.cuh"
#include "tprt_cuda_status.h"
#include "tprt_status.h"

/// One invariant GEMM: D[M,N] (row-major, ld N) = tree over |chunks| of A·B partials, A and B as
/// the layout's convention; |bias| (per column of D, or NULL) added to the f32 tree in the
/// epilogue before the one rounding. |tree_ws|: tree levels 2 and up (chunks > 4), (levels - 2) x
/// |tree_ctas| x 256 x 64 floats.
struct tprt__inv_gemm_t {
  int m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* d;
  int64_t ldd;
  bool d_f32;
  const void* bias;
  int chunks;
  float* tree_ws;
  int tree_ctas;
  int sm_count;
  /// A batch of |batches| independent GEMMs of this shape (1: one GEMM): batch b reads A and B
  /// |a_batch| and |b_batch| elements further and writes D |d_batch| elements further. The split
  /// schedule of invariant_linear.cu uses it to run a chunk subtree per batch.
  int batches;
  int64_t a_batch, b_batch, d_batch;
  /// The order in which the k tiles are read, counted in 64-wide tiles (chunks 0: as stored): the
  /// contraction's t-th k tile is A's and B's k tile tprt__segmented_index(t, k / 64, k_order).
  /// The dgrad's segmented order, read in place instead of from permuted copies; one batch only.
  tprt_cuda_order_t k_order;
};

/// The operand layouts of the three contractions, as in grouped_fast.cuh.
enum tprt__inv_layout_t { TPRT__INV_FWD = 0, TPRT__INV_DGRAD = 1, TPRT__INV_WGRAD = 2 };

tprt_status_t tprt__inv_gemm_fwd(const tprt__inv_gemm_t& g, cudaStream_t stream);
tprt_status_t tprt__inv_gemm_dgrad(const tprt__inv_gemm_t& g, cudaStream_t stream);
tprt_status_t tprt__inv_gemm_wgrad(const tprt__inv_gemm_t& g, cudaStream_t stream);

/// Threads of the consumer warpgroups and accumulators per thread of the 128 x 128 tile.
constexpr int kTprtInvMmaThreads = 256;
constexpr int kTprtInvAccum = 64;

/// The tree workspace of levels |first| and up (tprt__inv_first_workspace_level) for
/// |chunks| chunks of |ctas| CTAs (a persistent grid never exceeds the SM count): stream-ordered,
/// *ws NULL when none is needed.
inline tprt_status_t tprt__inv_tree_alloc(int chunks, int first, int ctas, float** ws, cudaStream_t stream) {
  int levels = 0;
  while ((1 << levels) < chunks) ++levels;
  *ws = nullptr;
  if (levels <= first) return nullptr;
  size_t bytes = (size_t)(levels - first) * (size_t)ctas * kTprtInvMmaThreads * kTprtInvAccum * sizeof(float);
  void* p = nullptr;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&p, bytes, stream));
  *ws = static_cast<float*>(p);
  return nullptr;
}

/// Workspace accesses with L2 eviction hints: a stored partial is read back once, chunks later,
/// while the operand tiles of those chunks stream through L2 (evict_last keeps the partial there
/// instead of letting the stream push it to HBM); once read it is dead (evict_first). Neither
/// allocates in L1: the consumer's few register spills live there, and 64 KB of partials passing
/// through evicted them (each k tile's stage release then waited on L2).
__device__ __forceinline__ void tprt__ws_store(float4* p, float4 v) {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w), "l"(pol)
               : "memory");
}
__device__ __forceinline__ float4 tprt__ws_load(const float4* p) {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  float4 v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p), "l"(pol)
               : "memory");
  return v;
}

/// This CTA's index in the grid (its workspace slot).
__device__ __forceinline__ int tprt__inv_cta() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }

/// Where tprt__chunk_tree_mma keeps tree level 1 (a pair's sum waiting for its right sibling):
/// registers (the dense kernels), 64 KB of shared memory added to the main loop's (the kernel's
/// builder carves kTprtInvPendSmemBytes out of its stages), or the L2 workspace with the deeper
/// levels. The pointer-array grouped kernel has no registers to spare (level 1 in registers
/// spilled a kilobyte); in the workspace it costs a 64 KB store or load per pair of chunks and tile
/// (short contractions), in shared memory two pipeline stages (long ones).
/// TPRT__PEND_REGS_SMEM: level 1 in registers and level 2 (the sum of four chunks waiting for its
/// right sibling) in those 64 KB of shared memory, for eight chunks and more. In the workspace,
/// level 2 cost a 64 KB store and a 64 KB load through L2 per tile, the load exposed at the end
/// of the tile (before this variant: TPRT_BENCH_CHUNKS=8 tprt-bench-gemm dense 4096 16384 2048
/// gave a 0.53 ms forward, 0.44 ms with TPRT_BENCH_CHUNKS=4).
enum tprt__inv_pend_t { TPRT__PEND_REGS = 0, TPRT__PEND_SMEM = 1, TPRT__PEND_WORKSPACE = 2, TPRT__PEND_REGS_SMEM = 3 };

/// The first tree level kept in the workspace under |pend|.
constexpr int tprt__inv_first_workspace_level(int pend) {
  return pend == TPRT__PEND_WORKSPACE ? 1 : pend == TPRT__PEND_REGS_SMEM ? 3 : 2;
}

/// Shared memory that tprt__chunk_tree_mma<Base, TPRT__PEND_SMEM> adds to its main loop's.
constexpr int kTprtInvPendSmemBytes = kTprtInvMmaThreads * kTprtInvAccum * (int)sizeof(float);

/// The main loop's shared tensors, with tree level 1 (|PendInSmem|) or without.
template <class BaseStorage, bool PendInSmem>
struct tprt__inv_tensor_storage : BaseStorage {
  /// Thread t's float4 i at [256 * i + t]: each warp's access is 512 contiguous bytes.
  alignas(128) float4 pend[kTprtInvMmaThreads * kTprtInvAccum / 4];
};
template <class BaseStorage>
struct tprt__inv_tensor_storage<BaseStorage, false> : BaseStorage {};

/// A CUTLASS main loop |Base| whose Arguments and Params are each extended by the fields of
/// |Extra|, which to_underlying_arguments copies from the one to the other.
template <class Base, class Extra>
struct tprt__mainloop_fields : Base {
  struct Arguments : Base::Arguments, Extra {};
  struct Params : Base::Params, Extra {};

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    static_cast<Extra&>(p) = static_cast<Extra const&>(args);
    return p;
  }
};

/// The chunk tree's fields: k tiles per chunk (0: one chunk of every k tile), the workspace of
/// the deep levels and the CTAs it is sized for.
struct tprt__chunk_tree_fields {
  int tiles_per_chunk;
  float* tree_ws;
  int tree_ctas;
};

/// CUTLASS's collective main loop |Base| with the chunk tree in the consumer's loop, tree level 1
/// where |Pend| says.
template <class Base, int Pend = TPRT__PEND_REGS>
struct tprt__chunk_tree_mma : tprt__mainloop_fields<Base, tprt__chunk_tree_fields> {
  static constexpr bool PendInRegs = Pend == TPRT__PEND_REGS || Pend == TPRT__PEND_REGS_SMEM;
  static constexpr int kFirstWorkspaceLevel = tprt__inv_first_workspace_level(Pend);
  /// The first level past registers (and past level 1's shared memory): the workspace's, or
  /// level 2 in shared memory (TPRT__PEND_REGS_SMEM).
  static constexpr int kFirstDeepLevel = Pend == TPRT__PEND_WORKSPACE ? 1 : 2;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using TensorStorage = tprt__inv_tensor_storage<typename Base::TensorStorage,
                                                 Pend == TPRT__PEND_SMEM || Pend == TPRT__PEND_REGS_SMEM>;
  using typename Base::TiledMma;

  using typename tprt__mainloop_fields<Base, tprt__chunk_tree_fields>::Arguments;
  using typename tprt__mainloop_fields<Base, tprt__chunk_tree_fields>::Params;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    return Base::can_implement(problem_shape, args) && args.tiles_per_chunk >= 0;
  }

  /// The consumer: chunk after chunk, each from +0 over its k tiles; the tree as chunks end.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const& params) {
    using namespace cute;
    static_assert(size(FrgTensorC{}) == kTprtInvAccum, "a 128 x 128 tile over two consumer warpgroups");
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});
    constexpr int MmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    Layout warp_group_thread_layout = make_layout(Int<MmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
    Tensor tCsA = thread_mma.partition_A(sA);
    Tensor tCsB = thread_mma.partition_B(sB);
    Tensor tCrA = thread_mma.make_fragment_A(tCsA);
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);

    auto acc1 = make_fragment_like(accum);
    // tiles_per_chunk 0: one chunk of every k tile of the problem (a grouped wgrad, whose K, an
    // expert's rows, is known only on the device). K = 0 never reaches here: the grouped plans give
    // such a group no rows.
    const int per_chunk = params.tiles_per_chunk > 0 ? params.tiles_per_chunk : (k_tile_count > 0 ? k_tile_count : 1);
    const int chunks = k_tile_count / per_chunk;
    if (chunks > (1 << kFirstWorkspaceLevel) && tprt__inv_cta() >= params.tree_ctas) __trap();  // sized by the host
    // Workspace level L of this CTA: 64 floats per thread, stored as 16 float4 planes of 256
    // threads so that each warp's access is 512 contiguous bytes. The thread's float4 i is
    // deep(L)[256 * i]. The CTA and the thread are read again from the special registers here
    // rather than kept live across the main loop (registers are short there: three accumulator
    // sets).
    auto deep = [&](int level) {
      return reinterpret_cast<float4*>(params.tree_ws +
                                       ((size_t)(level - kFirstWorkspaceLevel) * params.tree_ctas + tprt__inv_cta()) *
                                           kTprtInvMmaThreads * kTprtInvAccum) +
             threadIdx.x % kTprtInvMmaThreads;
    };
    // Level 1 (a pair's sum waiting for its right sibling, then the sum of four chunks) lives in
    // registers that no MMA writes (PendInRegs; unused otherwise): the code outside the MMAs never
    // defines an accumulator while MMAs are in flight, so ptxas keeps the MMAs asynchronous.
    auto pend = make_fragment_like(accum);

    PipelineState smem_pipe_release = smem_pipe_read;
    int in_flight = 0;  // tiles issued whose stage is not released yet
    // (Two ways to hide the drains were measured and dropped: copying a finished set while the
    // other set's MMAs run makes ptxas serialize every MMA (C7514) even with one set per loop,
    // and starting warpgroup 1 a few k tiles after warpgroup 0, so that the two do not drain at
    // once, changed nothing measurable.)
    // Chunk c accumulates into accum (even c) or acc1 (odd c). When an odd chunk ends, the pair's
    // sum accum + acc1 (tree level 1) goes to pend (registers, or shared memory through acc1), or
    // is added to it (level 2). The deeper merges of that node (workspace stores, and loads where
    // a left sibling waits there) follow at once, while no MMA is in flight, and the loads land in
    // an accumulator set the sums have freed (acc1 with PendInRegs, else accum): its chunk is
    // summed already and the next MMA into it starts from +0, and a WGMMA accumulator counts as
    // live for the register allocator anyway (the instruction names it even when it does not
    // accumulate). Separate temporaries raised the consumer's register peak past its budget (ptxas
    // spilled values that the main loop reads on every k tile), and defining an accumulator while
    // MMAs are in flight makes ptxas serialize the MMAs.
    // This thread's float4 i of the shared tree slot (level 1 under TPRT__PEND_SMEM, level 2
    // under TPRT__PEND_REGS_SMEM) is at smem_slot(shared_tensors) + 16 * 256 * i (a template, so
    // that the modes without the slot never name it).
    auto smem_slot = [&](auto& tensors) {
      return (uint32_t)__cvta_generic_to_shared(tensors.pend) + 16 * (threadIdx.x % kTprtInvMmaThreads);
    };
    auto smem_store = [&](auto& tensors, auto const& frag) {
      const uint32_t sp = smem_slot(tensors);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kTprtInvAccum / 4; ++i)
        asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(sp + 16 * kTprtInvMmaThreads * i),
                     "f"(frag(4 * i)), "f"(frag(4 * i + 1)), "f"(frag(4 * i + 2)), "f"(frag(4 * i + 3))
                     : "memory");
    };
    auto smem_load = [&](auto& tensors, auto& frag) {
      const uint32_t sp = smem_slot(tensors);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kTprtInvAccum / 4; ++i)
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(frag(4 * i)), "=f"(frag(4 * i + 1)), "=f"(frag(4 * i + 2)), "=f"(frag(4 * i + 3))
                     : "r"(sp + 16 * kTprtInvMmaThreads * i)
                     : "memory");
    };
    constexpr bool kSmemLevel2 = kFirstWorkspaceLevel > kFirstDeepLevel;
    // Level |level| into |stage| (load) or from |node| (store): shared memory for level 2 under
    // TPRT__PEND_REGS_SMEM, else the workspace.
    auto load_level = [&](auto& stage, int level) {
      if constexpr (kSmemLevel2) {
        if (level < kFirstWorkspaceLevel) return smem_load(shared_tensors, stage);
      }
      const float4* p = deep(level);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kTprtInvAccum / 4; ++i) {
        float4 v = tprt__ws_load(p + kTprtInvMmaThreads * i);
        stage(4 * i) = v.x, stage(4 * i + 1) = v.y, stage(4 * i + 2) = v.z, stage(4 * i + 3) = v.w;
      }
    };
    auto store_level = [&](auto& node, int level) {
      if constexpr (kSmemLevel2) {
        if (level < kFirstWorkspaceLevel) return smem_store(shared_tensors, node);
      }
      float4* p = deep(level);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kTprtInvAccum / 4; ++i)
        tprt__ws_store(p + kTprtInvMmaThreads * i,
                       make_float4(node(4 * i), node(4 * i + 1), node(4 * i + 2), node(4 * i + 3)));
    };
    // Merges |node| (the subtree ending with chunk c, at level kFirstDeepLevel) into the deeper
    // levels where c has trailing one bits, |stage| holding each loaded level, then parks it at
    // the next level.
    auto fold_into = [&](auto& node, auto& stage, int c) {
      int level = kFirstDeepLevel;
      for (; (c >> level) & 1; ++level) {
        load_level(stage, level);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kTprtInvAccum; ++i) node(i) = __fadd_rn(stage(i), node(i));
      }
      if (c + 1 == chunks) return;  // node holds the whole tree
      store_level(node, level);
    };
    auto fold_deep = [&](int c) {
      if constexpr (PendInRegs) {
        fold_into(pend, acc1, c);
      } else {
        fold_into(acc1, accum, c);
      }
    };
    // One k tile of chunk c into |acc|: from +0 at the chunk's first MMA.
    auto issue = [&](auto& acc, int t) {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      const int read_stage = smem_pipe_read.index();
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        tiled_mma.accumulate_ = (t == 0 && k_block == 0) ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
        cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), acc);
      }
      warpgroup_commit_batch();
      ++smem_pipe_read;
      ++in_flight;
    };
    auto release_one = [&]() {  // keep one MMA batch in flight
      if (in_flight == 2) {
        warpgroup_wait<1>();
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
        --in_flight;
      }
    };
    auto drain = [&]() {
      warpgroup_wait<0>();
      warpgroup_fence_operand(accum);
      warpgroup_fence_operand(acc1);
      for (; in_flight > 0; --in_flight) {
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
    };
    for (int c = 0; c < chunks; c += 2) {
      // The even chunk c, into accum, then the odd chunk c + 1, into acc1.
      for (int t = 0; t < per_chunk; ++t) {
        issue(accum, t);
        release_one();
      }
      if (c + 1 == chunks) break;  // one chunk: the tree is accum
      for (int t = 0; t < per_chunk; ++t) {
        issue(acc1, t);
        if (t + 1 < per_chunk) {
          release_one();
          continue;
        }
        // The odd chunk is complete: the pair's sum (tree level 1) from accum and acc1.
        drain();
        const int odd = c + 1;
        const bool left = ((odd >> 1) & 1) == 0;  // the pair is a left child at level 1
        if constexpr (PendInRegs) {
          if (left && odd + 1 == chunks) {  // two chunks: the whole tree, into accum
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < kTprtInvAccum; ++i) accum(i) = __fadd_rn(accum(i), acc1(i));
          } else if (left) {
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < kTprtInvAccum; ++i) pend(i) = __fadd_rn(accum(i), acc1(i));
          } else {  // a right child: pend + pair is the level-2 node
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < kTprtInvAccum; ++i) pend(i) = __fadd_rn(pend(i), __fadd_rn(accum(i), acc1(i)));
            fold_deep(odd);
          }
        } else if constexpr (Pend == TPRT__PEND_WORKSPACE) {  // the pair in acc1, then the workspace levels
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kTprtInvAccum; ++i) acc1(i) = __fadd_rn(accum(i), acc1(i));
          fold_deep(odd);
        } else {  // level 1 in shared memory: the pair in acc1, accum free to stage the pending one
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kTprtInvAccum; ++i) acc1(i) = __fadd_rn(accum(i), acc1(i));
          if (left && odd + 1 < chunks) {
            smem_store(shared_tensors, acc1);
          } else if (!left) {  // a right child: pend + pair is the level-2 node
            smem_load(shared_tensors, accum);
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < kTprtInvAccum; ++i) acc1(i) = __fadd_rn(accum(i), acc1(i));
            fold_deep(odd);
          }
        }
      }
    }
    drain();
    if constexpr (PendInRegs) {
      if (chunks > 2) {  // the tree ended in pend (one or two chunks: in accum already)
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kTprtInvAccum; ++i) accum(i) = pend(i);
      }
    } else if (chunks > 1) {  // the tree ended in acc1
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kTprtInvAccum; ++i) accum(i) = acc1(i);
    }
    warpgroup_fence_operand(accum);
  }

  /// Every stage was released by mma: nothing is left in flight.
  CUTLASS_DEVICE void mma_tail(MainloopPipeline, PipelineState, int) {}
};

/// The k-tile order and the contraction's k tiles (tprt__ordered_chunk_tree_mma).
struct tprt__k_order_fields {
  tprt_cuda_order_t k_order;
  int k_tiles;
};

/// tprt__chunk_tree_mma whose producer loads the k tiles in a permuted order (Arguments::k_order,
/// tprt__inv_gemm_t::k_order): the consumer sees the same sequence of tiles as it would in a
/// permuted copy of A and B, so the bits are those of the copy. Only the coordinate of each TMA
/// load changes (CUTLASS's producer loop is reused with a remapping k-tile iterator).
template <class Base, int Pend>
struct tprt__ordered_chunk_tree_mma : tprt__mainloop_fields<tprt__chunk_tree_mma<Base, Pend>, tprt__k_order_fields> {
  using Tree = tprt__chunk_tree_mma<Base, Pend>;
  using typename Tree::MainloopPipeline;
  using typename Tree::PipelineState;
  using typename Tree::TensorStorage;

  using typename tprt__mainloop_fields<Tree, tprt__k_order_fields>::Arguments;
  using typename tprt__mainloop_fields<Tree, tprt__k_order_fields>::Params;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    return Tree::can_implement(problem_shape, args) && (args.k_order.chunks == 0 || args.k_tiles > 0);
  }

  /// CUTLASS's k-tile iterator with each coordinate mapped through the order. The order is
  /// evaluated once per run of consecutive source tiles (the producer's one thread has a TMA load
  /// to issue every k tile: 64-bit divisions there on every tile starved the consumers).
  template <class It>
  struct remap_iter {
    It it;  // the contraction's k tile t
    tprt_cuda_order_t order;
    int k_tiles;
    int src;   // t's source tile
    int left;  // tiles of t's run from t on
    CUTLASS_DEVICE remap_iter(It i, tprt_cuda_order_t o, int n) : it(i), order(o), k_tiles(n) { seek(); }
    CUTLASS_DEVICE void seek() {
      const int t = *it;
      if (order.chunks > 0) {  // 32-bit arithmetic: the producer has few registers
        const int run = k_tiles / (order.chunks * order.segments);
        src = tprt__segmented_index32(t, k_tiles, order);
        left = run - t % run;  // runs start at multiples of run
      } else {
        src = t;
        left = k_tiles - t;
      }
    }
    CUTLASS_DEVICE int operator*() const { return src; }
    CUTLASS_DEVICE remap_iter& operator++() {
      ++it;
      if (--left > 0) {
        ++src;
      } else {
        seek();
      }
      return *this;
    }
  };

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx, uint32_t block_rank_in_cluster,
                           TensorStorage& shared_tensors) {
    Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord,
               remap_iter<KTileIterator>(k_tile_iter, params.k_order, params.k_tiles), k_tile_count, thread_idx,
               block_rank_in_cluster, shared_tensors);
  }
};

/// Where the dense kernel for |g| keeps the tree's pending levels: level 2 in shared memory for 8
/// chunks and more over a contraction of at most 32 k tiles, else registers and the workspace. The shared slot takes two of the
/// six pipeline stages; its saving, the workspace's round trip per output tile, pays for that
/// only on short contractions. Measured on an H100 with 8 chunks, 2 x 2 clusters, both variants
/// in one run of tprt-bench-gemm dense through a temporary switch that is not in the repository
/// (so these figures cannot be rerun as they are): K = 2048, 4096 x 16384 forward 0.50 ms vs 0.52, 4096 x 8192 dgrad 0.26
/// vs 0.275; K = 4096 and longer, the shared slot was 5-8% slower (the 4096 x 16384 wgrad 0.49
/// vs 0.465, the K = 8192 forward 0.266 vs 0.245).
inline int tprt__inv_pend_of(const tprt__inv_gemm_t& g) {
  return g.chunks > 4 && g.k <= 32 * 64 ? TPRT__PEND_REGS_SMEM : TPRT__PEND_REGS;
}

/// The kernel of layouts LayoutA/LayoutB, output ElementD, with a per-column bias or not.
/// Clusters of 1 x 2 CTAs: the two along N share A's loads (TMA multicast). A 2 x 2 cluster halved
/// the L2 traffic, but the GPU holds at most 29-30 clusters of four (116 of 132 SMs busy in
/// Nsight Compute's launch record: 12% of the SMs idle, and 128 tiles took two rounds); pairs fill
/// every SM. |Pend|: TPRT__PEND_REGS or TPRT__PEND_REGS_SMEM (tprt__inv_pend_of).
template <class LayoutA, class LayoutB, class ElementD, bool Bias, int Pend = TPRT__PEND_REGS>
struct tprt__inv_kernel_t {
  static constexpr bool kBias = Bias;
  using Element = cutlass::bfloat16_t;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
  static constexpr int kAlign = 8;
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  using Fusion =
      cute::conditional_t<Bias,
                          cutlass::epilogue::fusion::LinCombPerColBias<ElementD, float, Element, void, float, kAlign>,
                          cutlass::epilogue::fusion::LinearCombination<ElementD, float, void, float>>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, kAlignD, ElementD,
      cutlass::layout::RowMajor, kAlignD, cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element, LayoutB, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage)) + (Pend == TPRT__PEND_REGS_SMEM ? kTprtInvPendSmemBytes : 0)>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop = tprt__ordered_chunk_tree_mma<BaseMainloop, Pend>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, CollectiveEpilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

/// Runs kernel |K| for |g| on |stream|.
template <class K>
tprt_status_t tprt__inv_gemm_run(const tprt__inv_gemm_t& g, cudaStream_t stream) {
  using Gemm = typename K::Gemm;
  using Kernel = typename K::Kernel;
  using StrideA = typename Kernel::StrideA;
  using StrideB = typename Kernel::StrideB;
  using StrideD = typename Kernel::StrideD;
  using Element = typename K::Element;
  using ElementD = typename Gemm::ElementD;
  StrideA sa = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape((int)g.lda, (int)g.lda, 1));
  StrideB sb = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape((int)g.ldb, (int)g.ldb, 1));
  StrideD sd = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(g.m, (int)g.ldd, 1));
  const int batches = g.batches > 1 ? g.batches : 1;
  if (batches > 1) {
    cute::get<2>(sa) = g.a_batch;
    cute::get<2>(sb) = g.b_batch;
    cute::get<2>(sd) = g.d_batch;
  }
  typename K::Mainloop::Arguments mainloop{};
  static_cast<typename K::BaseMainloop::Arguments&>(mainloop) =
      typename K::BaseMainloop::Arguments{static_cast<const Element*>(g.a), sa, static_cast<const Element*>(g.b), sb};
  mainloop.tiles_per_chunk = g.k / g.chunks / 64;
  mainloop.tree_ws = g.tree_ws;
  mainloop.tree_ctas = g.tree_ctas;
  mainloop.k_order = g.k_order;
  mainloop.k_tiles = g.k / 64;
  if (g.k_order.chunks > 0 && batches > 1)
    return tprt_make_status(TPRT_STATUS_INTERNAL, "invariant GEMM: a k-tile order with %d batches", batches);
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {g.m, g.n, g.k, batches},
                                mainloop,
                                {{}, nullptr, StrideD{}, static_cast<ElementD*>(g.d), sd}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  if constexpr (K::kBias) args.epilogue.thread.bias_ptr = static_cast<const Element*>(g.bias);
  args.hw_info.sm_count = g.sm_count;
  // Tiles visited in swizzled groups (the order of tiles never touches the bits) of the largest
  // size, at most 8, that divides the tile grid: CUTLASS's persistent scheduler rounds the tile
  // rows up to a multiple of the swizzle and the tile columns to a multiple of swizzle x cluster,
  // and runs the padding tiles too (tprt-bench-gemm dense 4096 3072 2048: 32 x 24 tiles, 1024
  // work tiles with a swizzle of 8, a 0.150 ms forward; 0.104 ms with this choice. 4096 x 512:
  // twice the tiles, 0.053 ms against 0.030).
  const int tile_rows = (g.m + 127) / 128, tile_cols = (g.n + 127) / 128;
  int swizzle = 8;
  while (swizzle > 1 && (tile_rows % swizzle || tile_cols % (2 * swizzle))) swizzle /= 2;
  args.scheduler.max_swizzle_size = swizzle;
  return tprt__cutlass_launch<Gemm>(args, "invariant GEMM", stream);
}

/// Runs the instance of layouts A/B, output D, with a bias or not, that |g| selects
/// (tprt__inv_pend_of).
template <class A, class B, class D, bool Bias>
tprt_status_t tprt__inv_gemm_select(const tprt__inv_gemm_t& g, cudaStream_t stream) {
  if (tprt__inv_pend_of(g) == TPRT__PEND_REGS_SMEM)
    return tprt__inv_gemm_run<tprt__inv_kernel_t<A, B, D, Bias, TPRT__PEND_REGS_SMEM>>(g, stream);
  return tprt__inv_gemm_run<tprt__inv_kernel_t<A, B, D, Bias>>(g, stream);
}

#endif  // TPRT_INVARIANT_GEMM_CUH_
