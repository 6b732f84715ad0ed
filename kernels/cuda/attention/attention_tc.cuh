// Tensor-core attention on Hopper (fast and invariant modes; docs/numerics.md "Attention on
// tensor cores"): the pieces shared by the forward (attention_tc_fwd.cu) and the backward
// (attention_tc_bwd.cu). Internal to kernels/cuda.
//
// The kernels are FlashAttention style, written with CuTe's sm90 WGMMA atoms and warp-specialized as
// in FlashAttention-3: a producer warpgroup (one thread issues TMA loads into mbarrier pipelines)
// and two consumer warpgroups (256 threads) that own a tile of query rows (forward, dq) or keys
// (dk, dv) of one (sequence, head) and walk the other side's blocks of that sequence in increasing
// order. Scores and probabilities stay in registers (P feeds the second WGMMA as its register
// operand). Blocks are fixed: query tiles and key blocks start at the sequence's first token and
// have one size for every problem, and no key range is ever split across CTAs. So the arithmetic of
// a query row (which WGMMAs, in which order, with which masked entries) depends only on its
// sequence's keys and its position in the sequence: never on the batch, on the other sequences,
// on the number of heads a rank holds, or on where a decode step ends a prefix. Rows past a
// sequence's end (the next sequence's, or TMA's zeros past the tensor) are loaded and masked.
#ifndef TPRT_ATTENTION_TC_CUH_
#define TPRT_ATTENTION_TC_CUH_

#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

namespace tprt_attn {

using namespace cute;

/// Threads of the two consumer warpgroups, each owning 64 rows of the 128-row tiles.
constexpr int kThreads = 256;

/// Issues one WGMMA pass c (+)= a · b over the k blocks of the fragments as one commit group,
/// without waiting: the caller waits with warpgroup_wait<N>() and then fences c with
/// warpgroup_fence_operand (and a register operand a, which must stay untouched until then).
/// |ZeroInit|: the first MMA overwrites c. Works for both operand kinds (A in shared memory, or in
/// registers).
template <bool ZeroInit, class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void wgmma_issue(Mma& mma, TA const& a, TB const& b, TC& c) {
  constexpr bool kRegA = !cute::is_base_of<cute::GMMA::DescriptorIterator, typename Mma::FrgTypeA>::value;
  if constexpr (kRegA) warpgroup_fence_operand(const_cast<TA&>(a));
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = ZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    cute::gemm(mma, a(_, _, kb), b(_, _, kb), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

/// wgmma_issue, then waits for it.
template <bool ZeroInit, class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void wgmma(Mma& mma, TA const& a, TB const& b, TC& c) {
  wgmma_issue<ZeroInit>(mma, a, b, c);
  warpgroup_wait<0>();
  warpgroup_fence_operand(c);
  constexpr bool kRegA = !cute::is_base_of<cute::GMMA::DescriptorIterator, typename Mma::FrgTypeA>::value;
  if constexpr (kRegA) warpgroup_fence_operand(const_cast<TA&>(a));
}

/// An sm90 accumulator layout ((2, 2, N/8), MMA_M, MMA_N) viewed as (rows, cols) of the thread:
/// ((2, MMA_M), (2, N/8, MMA_N)).
template <class L>
__device__ __forceinline__ auto rowcol(L l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}

/// A register accumulator (or its identity-coordinate partition) viewed as (rows, cols) of the thread.
template <class T>
__device__ __forceinline__ auto as_rowcol(T&& t) {
  return make_tensor(t.data(), rowcol(t.layout()));
}

/// The same accumulator layout as the register A operand of a 16-bit WGMMA with k = 16:
/// ((2, 2, 2), MMA_M, (N/16, MMA_N)).
template <class L>
__device__ __forceinline__ auto acc_as_a(L l) {
  auto d = logical_divide(get<0, 2>(l), Tile<_2>{});
  return make_layout(make_layout(get<0, 0>(l), get<0, 1>(l), get<0, 0>(d)), get<1>(l),
                     coalesce(make_layout(get<0, 1>(d), get<2>(l))));
}

/// 2^x on the special function unit (ex2.approx: +0 for -inf, exactly 1 for 0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// The probability the backward recomputes for query i and key j of a sequence of L tokens from
/// the score s and the row's statistic lse: +0 for a masked pair (past the sequence; causal, a key
/// after the query).
template <bool Causal>
__device__ __forceinline__ float grad_prob(float s, float scale_log2, float lse, int i, int j, int L) {
  const bool masked = i >= L || j >= L || (Causal && j > i);
  return masked ? 0.0f : exp2_approx(fmaf(s, scale_log2, -lse));
}

/// The reduction over the 4 threads of a quad (the threads that hold one accumulator row).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
  return v + __shfl_xor_sync(0xFFFFFFFFu, v, 2);
}

/// Shared-memory layouts of a [rows, D] operand tile, D contiguous (128-byte swizzle), with
/// |Stages| copies; and the same bytes viewed [D, rows] (D contiguous: "MN-major") for an operand
/// that is contracted over its rows.
template <class T, int Rows, int D, int Stages>
using SmemRows = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<Int<Rows>, Int<D>, Int<Stages>>{}));
template <class T, int Rows, int D, int Stages>
using SmemRowsT = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, Shape<Int<D>, Int<Rows>, Int<Stages>>{},
                                         Step<_2, _1, _3>{}));

/// Writes the rows < |rows| of a (rows, cols) accumulator view |acc| (coordinates |coord|, from
/// the identity partition) times |mul|, rounded once to T, into the row-major |base| of row stride
/// |ld|: two adjacent columns per 4-byte store.
template <class T, class A, class C>
__device__ __forceinline__ void store_tile(A const& acc, C const& coord, T* base, int64_t ld, int rows, float mul) {
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < size<0>(acc); ++r) {
    const int row = get<0>(coord(r, 0));
    if (row >= rows) continue;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(acc); c += 2) {
      T pair[2] = {static_cast<T>(acc(r, c) * mul), static_cast<T>(acc(r, c + 1) * mul)};
      *reinterpret_cast<uint32_t*>(base + (int64_t)row * ld + get<1>(coord(r, c))) =
          *reinterpret_cast<uint32_t*>(pair);
    }
  }
}

/// A row-major [rows, cols] global tensor of T with a runtime row stride (TMA's view of q, k, v).
template <class T>
auto gmem_rows(const void* p, int rows, int cols, int64_t ld) {
  return make_tensor(make_gmem_ptr(static_cast<const T*>(p)), make_shape(rows, cols), make_stride(ld, _1{}));
}

/// The TMA load of [Rows, D] tiles of a gmem_rows tensor into one stage of SmemRows.
template <class T, int Rows, int D>
using TmaRows = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_rows<T>(nullptr, 1, 1, 1),
                                       take<0, 2>(SmemRows<T, Rows, D, 1>{}), Shape<Int<Rows>, Int<D>>{}, _1{}));
template <class T, int Rows, int D>
TmaRows<T, Rows, D> make_tma_rows(const void* p, int64_t rows, int64_t ld) {
  return make_tma_copy(SM90_TMA_LOAD{}, gmem_rows<T>(p, (int)rows, (int)ld, ld), take<0, 2>(SmemRows<T, Rows, D, 1>{}),
                       Shape<Int<Rows>, Int<D>>{}, _1{});
}

/// Threads of a warp-specialized CTA: a producer warpgroup (one thread issues the TMA loads),
/// then two consumer warpgroups.
constexpr int kWsThreads = kThreads + 128;

/// The pipeline of the TMA loads (full/empty mbarriers per stage) and its parameters for this
/// thread: warpgroup 0 produces (thread 0 issues), the 256 consumer threads consume, |bytes| land
/// per stage.
template <int Stages>
using Pipe = cutlass::PipelineTmaAsync<Stages>;
template <int Stages>
__device__ __forceinline__ typename Pipe<Stages>::Params pipe_params(uint32_t bytes, int consumers = kThreads) {
  typename Pipe<Stages>::Params pp;
  pp.role = threadIdx.x < 128 ? Pipe<Stages>::ThreadCategory::Producer : Pipe<Stages>::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = consumers;
  pp.transaction_bytes = bytes;
  return pp;
}

/// The work item of a CTA of a linear grid over (tile, head, sequence): the tile index varies
/// slowest, in decreasing order unless |increasing| (longest causal work first: the last query
/// tiles of the forward and dq, the first key blocks of dk/dv), then the head, then the sequence.
struct Item {
  int tile, head;
  int64_t seq;
};
__device__ __forceinline__ Item grid_item(int tiles, int heads, int64_t seqs, bool increasing) {
  const int64_t pairs = seqs * heads;
  const int t = (int)(blockIdx.x / pairs);
  const int64_t pair = blockIdx.x % pairs;
  return {increasing ? t : tiles - 1 - t, (int)(pair % heads), pair / heads};
}

/// A TMA tensor of rows of a [tokens, ld] operand, its origin moved to row |row0| (a sequence's
/// first token), and its (tile, tile column) partition for copies into the smem tensor |s|
/// (whose last mode, if any, is the stage): (gmem side, smem side).
template <class Tma>
__device__ __forceinline__ auto tma_rows(const Tma& tma, int64_t tokens, int64_t ld, int64_t row0) {
  return domain_offset(make_coord((int)row0, 0), tma.get_tma_tensor(make_shape((int)tokens, (int)ld)));
}
template <class Tma, class S, class G>
__device__ __forceinline__ auto tma_tiles(const Tma& tma, S&& s, G&& g) {
  return tma_partition(tma, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
}

/// Thread 0 prefetches the TMA descriptors and initializes the one-shot barrier |bar| (one
/// arrival plus the transaction bytes) of the operands loaded once.
template <class... Tma>
__device__ __forceinline__ void ws_init(uint64_t* bar, const Tma&... tma) {
  if (threadIdx.x == 0) {
    (prefetch_tma_descriptor(tma.get_tma_descriptor()), ...);
    cutlass::arch::ClusterTransactionBarrier::init(bar, 1);
  }
}

/// Launches a warp-specialized kernel of |smem| dynamic shared memory bytes on |blocks| CTAs.
template <class K, class A>
cudaError_t launch_ws(K kernel, size_t smem, int64_t blocks, const A& args, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  kernel<<<(unsigned)blocks, kWsThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

/// One attention problem: q, y[T, Hq·D], k, v[T, Hkv·D] (element pointers of type T); sequences
/// of |seq_len| tokens; |lse| (NULL: not wanted) gets each row's log2-domain softmax statistic
/// m·scale·log2(e) + log2(l), f32, at stat_index: [Hq, B, stat_rows(S)]; |lse_tokens| (NULL: not
/// wanted) the same statistic in the natural log (times ln 2), f32 [T, Hq]: tp.attention's lse.
struct Params {
  const void *q, *k, *v;
  void* y;
  float* lse;
  float* lse_tokens;
  int64_t q_ld, kv_ld;  // row strides in elements: Hq·D and Hkv·D
  int64_t tokens;       // T
  int seq_len, heads, group;  // S, Hq, Hq / Hkv
  float scale_log2;           // scale · log2(e)
  // Decoding with a KV cache (the forward only; k_cache NULL: none). Sequence b's keys are its
  // cache_len[b] cached rows of k_cache, v_cache[B·C, Hkv·D] (C = cache_rows per sequence), then its
  // seq_len new ones. k and v are then each sequence's tail of that key list: tail_rows rows from
  // its last 128-key boundary at or before cache_len[b] (the cached rows after the boundary, the
  // new rows, zeros), built by tails_kernel, so that every 128-key block comes from one tensor.
  const void *k_cache, *v_cache;
  const int32_t* cache_len;
  int64_t cache_rows, tail_rows;
  // A decoding step of one token per sequence with grouped-query heads (seq_len 1, group > 1): a
  // CTA owns one KV head of one sequence, its |group| query heads being rows 0 .. group - 1 of the
  // tile (q viewed as [tokens · heads, D] rows), so each K, V block is loaded once for the group,
  // not once per query head. A row's arithmetic is that of the same row alone in a tile.
  bool packed;
};

/// The rows of the k and v tensors the forward's TMA reads: the call's tokens, or (kCached) the
/// sequences' tails.
__host__ __device__ __forceinline__ int64_t kv_rows(const Params& p, bool cached) {
  return cached ? p.tokens / p.seq_len * p.tail_rows : p.tokens;
}

/// Sequence |b|'s cached tokens: cache_len[b] clamped to [0, C] (0 without a cache).
__device__ __forceinline__ int cached_tokens(const Params& p, int64_t b) {
  if (!p.k_cache) return 0;
  const int64_t n = p.cache_len[b];
  return (int)(n < 0 ? 0 : n > p.cache_rows ? p.cache_rows : n);
}

/// The rows of a sequence's statistics: its length rounded up to 64, so that a 64-row tile's
/// statistics are one aligned 256-byte block.
__host__ __device__ __forceinline__ int64_t stat_rows(int64_t seq_len) { return (seq_len + 63) / 64 * 64; }

/// Where the statistic of row |row| of sequence |b|, head |h| lives (Params::lse).
__host__ __device__ __forceinline__ int64_t stat_index(const Params& p, int h, int64_t b, int64_t row) {
  return ((int64_t)h * (p.tokens / p.seq_len) + b) * stat_rows(p.seq_len) + row;
}

/// ln 2 and log2(e) in f32: tp.attention's lse (natural log) from and to the kernels' log2 statistic.
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kLog2e = 1.44269504088896340736f;

/// The forward (attention_tc_fwd.cu) for |dtype| (bf16 or f16) and head dim |d| (64 or 128);
/// |lse_only|: only the statistics (p.lse), no P·V and no output.
cudaError_t forward(const Params& p, int dtype, int d, bool causal, bool lse_only, cudaStream_t stream);

/// p.lse (the statistics at stat_index) from tp.attention's lse[T, Hq] (attention_tc_bwd.cu).
cudaError_t stats_from_lse(const Params& p, const float* lse, cudaStream_t stream);

}  // namespace tprt_attn

#endif  // TPRT_ATTENTION_TC_CUH_
