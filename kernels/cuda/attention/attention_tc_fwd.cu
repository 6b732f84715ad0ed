// tprt_cuda_attention_tc: the tensor-core attention forward of fast and invariant modes (the
// shared design is in attention_tc.cuh), warp-specialized as in FlashAttention-3. A CTA owns 128
// query rows of one (sequence, head) and has three warpgroups: a producer warp loads Q once and
// K, V in 128-row blocks by TMA into a two-stage pipeline (mbarriers: "full" when a block has
// landed, "empty" when both consumers are done with it); two consumer warpgroups own 64 query rows
// each. A consumer step computes S(n+1) = Q·K[n+1]ᵀ and O += P(n)·V[n] on the tensor cores, then
// the online softmax of S(n+1) (running max and sum per row, exp2 on the SFU) while P(n)·V[n] runs;
// the two consumers take turns issuing their WGMMAs (named barriers), so one's softmax overlaps
// the other's matrix products. A tile of at most 64 query rows (a decoding step's) runs on the
// first consumer alone, without turns. The output is divided by the row sum and rounded once.
#include "attention_tc.cuh"
#include "tprt_attention_rows.h"
#include "tprt_cuda_internal.cuh"
#include "tprt_cuda_kernels.h"
extern "C" {
#include "tprt_cpu_internal.h"  // tprt__check_attention
}

namespace tprt_attn {

template <class T, int D>
struct Fwd {
  static constexpr int BM = 128, BN = 128, Stages = 2;
  using MmaQK = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<Int<BM>, Int<BN>, Int<D>>>(),
                                        Layout<Shape<_2, _1, _1>>{}));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<Int<BM>, Int<D>, Int<BN>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));
  using SmemQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<Int<BM>, Int<D>>{}));
  using SmemKV = SmemRows<T, BN, D, Stages>;
  using SmemVt = SmemRowsT<T, BN, D, Stages>;
  using TmaQ = TmaRows<T, BM, D>;
  using TmaKV = TmaRows<T, BN, D>;
  using Pipe = tprt_attn::Pipe<Stages>;
  struct Shared {
    alignas(1024) cute::array_aligned<T, cosize_v<SmemQ>> q;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemKV>> k;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemKV>> v;
    alignas(16) uint64_t q_full;
    typename Pipe::SharedStorage k_pipe, v_pipe;
  };
  static constexpr size_t kSmemBytes = sizeof(Shared);
};

template <class T, int D>
struct FwdArgs {
  typename Fwd<T, D>::TmaQ tma_q;
  typename Fwd<T, D>::TmaKV tma_k, tma_v;
  typename Fwd<T, D>::TmaKV tma_kc, tma_vc;  // the KV cache (kCached)
  Params p;
};

/// The per-sequence tails of a decoding call's key list (Params): row r of sequence b's tail is
/// key j = base + r, base = cache_len[b] rounded down to 128: cached row b·C + j below cache_len[b],
/// then new row b·S + (j - cache_len[b]), zeros past the sequence. One thread per 16 bytes.
template <class T>
__global__ void tails_kernel(Params p, T* __restrict__ k_tail, T* __restrict__ v_tail) {
  const int64_t vecs = p.kv_ld * (int64_t)sizeof(T) / 16, n = kv_rows(p, true) * vecs;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % vecs, r = (i / vecs) % p.tail_rows, b = i / vecs / p.tail_rows;
    const int past = cached_tokens(p, b);
    const int64_t j = (int64_t)(past / 128 * 128) + r;
    uint4 kx = make_uint4(0, 0, 0, 0), vx = kx;
    if (j < past) {
      const int64_t at = (b * p.cache_rows + j) * p.kv_ld * (int64_t)sizeof(T) / 16 + c;
      kx = static_cast<const uint4*>(p.k_cache)[at];
      vx = static_cast<const uint4*>(p.v_cache)[at];
    } else if (j - past < p.seq_len) {
      const int64_t at = (b * p.seq_len + (j - past)) * p.kv_ld * (int64_t)sizeof(T) / 16 + c;
      kx = static_cast<const uint4*>(p.k)[at];
      vx = static_cast<const uint4*>(p.v)[at];
    }
    const int64_t out = (b * p.tail_rows + r) * vecs + c;
    reinterpret_cast<uint4*>(k_tail)[out] = kx;
    reinterpret_cast<uint4*>(v_tail)[out] = vx;
  }
}

/// The forward of one 128-row query tile. The grid is linear: the tile index (in decreasing
/// order, so that the longest causal tiles start first) times the (sequence, head) pairs. kCached:
/// a decoding call, the queries at positions past.. after the sequence's past cached keys; its
/// 128-key blocks start at key 0 as a prefill's do (the cache's below the tail, then the tail's),
/// so every row has the arithmetic of the same row in a prefill of the whole sequence.
template <class T, int D, bool Causal, bool kLseOnly, bool kCached = false>
__global__ void __launch_bounds__(kWsThreads, 1) fwd_kernel(CUTE_GRID_CONSTANT FwdArgs<T, D> const a) {
  using F = Fwd<T, D>;
  using Pipe = typename F::Pipe;
  constexpr int BM = F::BM, BN = F::BN;
  const Params& p = a.p;
  extern __shared__ __align__(1024) unsigned char smem[];
  auto& sh = *reinterpret_cast<typename F::Shared*>(smem);
  Tensor sQ = make_tensor(make_smem_ptr(sh.q.data()), typename F::SmemQ{});
  Tensor sK = make_tensor(make_smem_ptr(sh.k.data()), typename F::SmemKV{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v.data()), typename F::SmemKV{});
  Tensor sVt = make_tensor(make_smem_ptr(sh.v.data()), typename F::SmemVt{});

  const int L = p.seq_len;
  // kCached and p.packed: the CTA's rows are the query heads of KV head it.head (L = 1).
  const bool packed = kCached && p.packed;
  const Item it = grid_item((L + BM - 1) / BM, packed ? p.heads / p.group : p.heads, p.tokens / L, false);
  const int m_block = it.tile, h = it.head, kv_head = packed ? h : h / p.group;
  const int64_t b = it.seq, row0 = b * L;
  const int q_rows = packed ? p.group : L - m_block * BM;
  // Keys: past cached ones (kCached), then the L new ones; the queries sit at positions past + i.
  const int past = kCached ? cached_tokens(p, b) : 0, Lk = past + L;
  const int tail_block = past / BN;  // kCached: the first block loaded from the tail
  const int n_total = (Lk + BN - 1) / BN;
  const int n_end = Causal ? min(n_total, (past + (m_block + 1) * BM - 1) / BN + 1) : n_total;
  const int warp_group = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;

  // A tile of at most 64 query rows (decoding) has them all in the first consumer warpgroup: the
  // second one leaves at once, and the first runs alone, without turns. Its rows' arithmetic is
  // the same, so are their bits.
  const bool solo = q_rows <= BM / 2;
  // Barriers: Q's, and the K and V pipelines (full/empty per stage, TMA transaction counts; a
  // stage is empty once every consumer thread has released it).
  const auto pp = pipe_params<F::Stages>(BN * D * sizeof(T), solo ? kThreads / 2 : kThreads);
  ws_init(&sh.q_full, a.tma_q, a.tma_k, a.tma_v);
  Pipe k_pipe(sh.k_pipe, pp, Shape<_1, _1, _1>{});
  Pipe v_pipe(sh.v_pipe, pp, Shape<_1, _1, _1>{});
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  if (warp_group == 0) {
    // Producer: one thread issues every TMA load.
    cutlass::arch::warpgroup_reg_dealloc<24>();
    if (warp == 0 && cute::elect_one_sync()) {
      // The tiles of this (sequence, head): rows from the sequence's first token; rows past it
      // are the next sequence's (masked) or TMA's zeros past the tensor.
      auto tile_q = Shape<Int<BM>, Int<D>>{};
      auto tile_kv = Shape<Int<BN>, Int<D>>{};
      // packed: q as [tokens · heads, D], the group's heads from row row0 · heads + h · group.
      auto [tQg, tQs] = tma_tiles(
          a.tma_q, sQ,
          packed ? local_tile(tma_rows(a.tma_q, p.tokens * p.heads, D, row0 * p.heads + (int64_t)h * p.group), tile_q,
                              make_coord(0, 0))
                 : local_tile(tma_rows(a.tma_q, p.tokens, p.q_ld, row0), tile_q, make_coord(m_block, h)));
      // k and v: the call's rows from the sequence's first token, or (kCached) its tail.
      const int64_t kv_all = kv_rows(p, kCached), kv_row0 = kCached ? b * p.tail_rows : row0;
      auto [tKg, tKs] = tma_tiles(a.tma_k, sK, local_tile(tma_rows(a.tma_k, kv_all, p.kv_ld, kv_row0), tile_kv,
                                                          make_coord(_, kv_head)));
      auto [tVg, tVs] = tma_tiles(a.tma_v, sV, local_tile(tma_rows(a.tma_v, kv_all, p.kv_ld, kv_row0), tile_kv,
                                                          make_coord(_, kv_head)));
      const int64_t cache_all = kCached ? p.tokens / L * p.cache_rows : 1;
      auto [tKcg, tKcs] = tma_tiles(a.tma_kc, sK, local_tile(tma_rows(a.tma_kc, cache_all, p.kv_ld, b * p.cache_rows),
                                                             tile_kv, make_coord(_, kv_head)));
      auto [tVcg, tVcs] = tma_tiles(a.tma_vc, sV, local_tile(tma_rows(a.tma_vc, cache_all, p.kv_ld, b * p.cache_rows),
                                                             tile_kv, make_coord(_, kv_head)));
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&sh.q_full, BM * D * sizeof(T));
      copy(a.tma_q.with(sh.q_full), tQg, tQs);
      auto st = cutlass::make_producer_start_state<Pipe>();
      for (int n = 0; n < n_end; ++n) {
        // kCached: blocks below the tail from the cache, the rest from the tail.
        const bool from_cache = kCached && n < tail_block;
        const int tn = kCached ? n - tail_block : n;
        k_pipe.producer_acquire(st);
        if (from_cache)
          copy(a.tma_kc.with(*k_pipe.producer_get_barrier(st)), tKcg(_, n), tKcs(_, st.index()));
        else
          copy(a.tma_k.with(*k_pipe.producer_get_barrier(st)), tKg(_, tn), tKs(_, st.index()));
        if constexpr (!kLseOnly) {
          v_pipe.producer_acquire(st);
          if (from_cache)
            copy(a.tma_vc.with(*v_pipe.producer_get_barrier(st)), tVcg(_, n), tVcs(_, st.index()));
          else
            copy(a.tma_v.with(*v_pipe.producer_get_barrier(st)), tVg(_, tn), tVs(_, st.index()));
        }
        ++st;
      }
    }
    return;
  }

  // Consumers: warpgroups 1 and 2, 64 query rows each.
  if (solo && warp_group == 2) return;
  cutlass::arch::warpgroup_reg_alloc<240>();
  const int tid = threadIdx.x - 128;
  // Turns between the two consumers for issuing WGMMAs: named barriers 0 and 1 (warpgroup 1 waits
  // on 0, warpgroup 2 on 1); warpgroup 1 goes first. None when solo.
  auto my_turn = [&] {
    if (!solo) cutlass::arch::NamedBarrier::sync(kThreads, warp_group - 1);
  };
  auto next_turn = [&] {
    if (!solo) cutlass::arch::NamedBarrier::arrive(kThreads, 2 - warp_group);
  };
  if (warp_group == 1 && !solo) cutlass::arch::NamedBarrier::arrive(kThreads, 0);

  typename F::MmaQK mma_qk;
  typename F::MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(tid);
  auto thr_pv = mma_pv.get_thread_slice(tid);
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);
  Tensor tSrK = thr_qk.partition_fragment_B(sK);
  Tensor tOrV = thr_pv.partition_fragment_B(sVt);
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<BM>, Int<BN>>{});
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<BM>, Int<D>>{});
  clear(tOrO);
  Tensor S = as_rowcol(tSrS);
  Tensor O = as_rowcol(tOrO);
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  Tensor cS = as_rowcol(tScS);
  constexpr int NR = decltype(size<0>(S))::value;
  float row_max[NR], row_sum[NR], corr[NR];
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < NR; ++r) row_max[r] = -INFINITY, row_sum[r] = 0.0f;

  // The softmax of block n's scores in S: masks (keys past the sequence; causal, keys after the
  // row), the running maximum, the exponentials (in place) and the running sum; corr[r] gets the
  // factor that rescales the output accumulated so far.
  auto softmax = [&](int n) {
    if (n * BN + BN > Lk || (Causal && n * BN + BN - 1 > past + m_block * BM)) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(S); ++i) {
        int col = n * BN + get<1>(cS(i)), row = past + (packed ? 0 : m_block * BM + get<0>(cS(i)));
        if (col >= Lk || (Causal && col > row)) S(i) = -INFINITY;
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < NR; ++r) {
      float mx = row_max[r];
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(S); ++c) mx = fmaxf(mx, S(r, c));
      mx = quad_max(mx);
      // A row with every key masked so far keeps m = -inf: its exponentials are +0 (bias 0). An
      // unchanged maximum rescales by exactly 1.
      const float bias = mx == -INFINITY ? 0.0f : mx * p.scale_log2;
      corr[r] = mx == row_max[r] ? 1.0f : exp2_approx((row_max[r] - mx) * p.scale_log2);
      row_max[r] = mx;
      float sum = 0.0f;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(S); ++c) {
        float e = exp2_approx(fmaf(S(r, c), p.scale_log2, -bias));
        S(r, c) = e;
        sum += e;
      }
      row_sum[r] = fmaf(row_sum[r], corr[r], sum);
    }
  };
  Tensor rP = make_tensor_like<T>(tSrS);
  Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
  auto to_p = [&] {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tSrS); ++i) rP(i) = static_cast<T>(tSrS(i));
  };

  // Block 0's scores and probabilities.
  cutlass::arch::ClusterTransactionBarrier::wait(&sh.q_full, 0);
  cutlass::PipelineState<F::Stages> rd;
  k_pipe.consumer_wait(rd);
  wgmma<true>(mma_qk, tSrQ, tSrK(_, _, _, rd.index()), tSrS);
  k_pipe.consumer_release(rd);
  softmax(0);
  to_p();
  // Blocks 0 .. n_end - 2: S(n+1) and P(n)·V[n] in flight together, the softmax of S(n+1) while
  // P·V runs. (The last block is peeled off so that every wgmma of the loop is unconditional:
  // ptxas serializes them otherwise.)
  for (int n = 0; n + 1 < n_end; ++n) {
    auto rd_v = rd;
    ++rd;
    k_pipe.consumer_wait(rd);
    my_turn();
    wgmma_issue<true>(mma_qk, tSrQ, tSrK(_, _, _, rd.index()), tSrS);
    if constexpr (!kLseOnly) {
      v_pipe.consumer_wait(rd_v);
      wgmma_issue<false>(mma_pv, tOrP, tOrV(_, _, _, rd_v.index()), tOrO);
    }
    next_turn();
    warpgroup_wait<kLseOnly ? 0 : 1>();
    warpgroup_fence_operand(tSrS);
    k_pipe.consumer_release(rd);
    softmax(n + 1);
    warpgroup_wait<0>();
    if constexpr (!kLseOnly) {
      warpgroup_fence_operand(tOrO);
      warpgroup_fence_operand(rP);
      v_pipe.consumer_release(rd_v);
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < NR; ++r) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(O); ++c) O(r, c) *= corr[r];
      }
    }
    to_p();
  }
  if constexpr (!kLseOnly) {
    v_pipe.consumer_wait(rd);
    wgmma<false>(mma_pv, tOrP, tOrV(_, _, _, rd.index()), tOrO);
    v_pipe.consumer_release(rd);
  }

  // Epilogue: y = o / l rounded once (l = 0 or NaN: 0), and the statistic for the backward.
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  Tensor cO = as_rowcol(tOcO);
  // packed: tile row r is head h · group + r of the token (rows D apart).
  T* yp = static_cast<T*>(p.y) + (row0 + (int64_t)m_block * BM) * p.q_ld + (int64_t)h * (packed ? p.group : 1) * D;
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < NR; ++r) {
    const float l = quad_sum(row_sum[r]);
    const int row = get<0>(cS(r, 0));
    const float stat = row_max[r] == -INFINITY ? -INFINITY : fmaf(row_max[r], p.scale_log2, __log2f(l));
    if (p.lse && (tid & 3) == 0 && row < q_rows)
      p.lse[packed ? stat_index(p, h * p.group + row, b, 0) : stat_index(p, h, b, (int64_t)m_block * BM + row)] = stat;
    if (p.lse_tokens && (tid & 3) == 0 && row < q_rows)
      p.lse_tokens[packed ? row0 * p.heads + h * p.group + row : (row0 + (int64_t)m_block * BM + row) * p.heads + h] =
          stat * kLn2;
    const float inv = (l == 0.0f || l != l) ? 0.0f : 1.0f / l;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(O); ++c) O(r, c) *= inv;
  }
  if constexpr (!kLseOnly) store_tile(O, cO, yp, packed ? D : p.q_ld, q_rows, 1.0f);
}

template <class T, int D, bool Causal, bool kLseOnly, bool kCached>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  using F = Fwd<T, D>;
  FwdArgs<T, D> a;
  a.p = p;
  const int64_t seqs = p.tokens / p.seq_len;
  const bool packed = kCached && p.packed;
  a.tma_q = packed ? make_tma_rows<T, F::BM, D>(p.q, p.tokens * p.heads, D) : make_tma_rows<T, F::BM, D>(p.q, p.tokens, p.q_ld);
  a.tma_k = make_tma_rows<T, F::BN, D>(p.k, kv_rows(p, kCached), p.kv_ld);
  a.tma_v = make_tma_rows<T, F::BN, D>(p.v, kv_rows(p, kCached), p.kv_ld);
  a.tma_kc = kCached ? make_tma_rows<T, F::BN, D>(p.k_cache, seqs * p.cache_rows, p.kv_ld) : a.tma_k;
  a.tma_vc = kCached ? make_tma_rows<T, F::BN, D>(p.v_cache, seqs * p.cache_rows, p.kv_ld) : a.tma_v;
  const int64_t tiles = (p.seq_len + F::BM - 1) / F::BM;
  return launch_ws(fwd_kernel<T, D, Causal, kLseOnly, kCached>, F::kSmemBytes,
                   tiles * seqs * (packed ? p.heads / p.group : p.heads), a, stream);
}

template <class T, bool kLseOnly, bool kCached>
cudaError_t dispatch(const Params& p, int d, bool causal, cudaStream_t stream) {
  if (d == 64)
    return causal ? launch<T, 64, true, kLseOnly, kCached>(p, stream) : launch<T, 64, false, kLseOnly, kCached>(p, stream);
  return causal ? launch<T, 128, true, kLseOnly, kCached>(p, stream) : launch<T, 128, false, kLseOnly, kCached>(p, stream);
}

cudaError_t forward(const Params& p, int dtype, int d, bool causal, bool lse_only, cudaStream_t stream) {
  if (dtype == TPRT_DTYPE_BF16)
    return lse_only ? dispatch<cutlass::bfloat16_t, true, false>(p, d, causal, stream)
                    : dispatch<cutlass::bfloat16_t, false, false>(p, d, causal, stream);
  return lse_only ? dispatch<cutlass::half_t, true, false>(p, d, causal, stream)
                  : dispatch<cutlass::half_t, false, false>(p, d, causal, stream);
}

/// The forward of a decoding call (Params' KV cache): the tails into |k_tail|, |v_tail|
/// (seqs·tail_rows rows of kv_ld each), then the kernel on them and the cache.
template <class T>
cudaError_t forward_cached(Params p, void* k_tail, void* v_tail, int d, bool causal, cudaStream_t stream) {
  const int64_t n = kv_rows(p, true) * (p.kv_ld * (int64_t)sizeof(T) / 16);
  tails_kernel<T><<<tprt__cuda_ew_blocks(n, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0, stream>>>(
      p, static_cast<T*>(k_tail), static_cast<T*>(v_tail));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  p.k = k_tail, p.v = v_tail;
  return dispatch<T, false, true>(p, d, causal, stream);
}

}  // namespace tprt_attn

/// Rows per sequence of a decoding call's tails: the cached rows after the last 128-key boundary
/// (at most 127), then the seq_len new ones, rounded up to whole 128-key blocks.
static int64_t tprt__tail_rows(int64_t seq_len) { return (127 + seq_len + 127) / 128 * 128; }

/// The problems the tensor-core kernels take: bf16/f16 q, k, v (and the outputs) of one dtype, head
/// dims 64 or 128, 16-byte aligned tensors, at most 2^31 - 1 tiles, tokens a multiple of seq_len;
/// a KV cache of k's dtype, 16-byte aligned, its rows and the tails' below 2^31.
bool tprt_cuda_attention_tc_fits(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                 const tprt_kv_cache_t* cache, const tprt_tensor_t* y, int64_t seq_len,
                                 int64_t head_dim) {
  if (!q || !k || !v || !y || q->rank != 2 || k->rank != 2 || v->rank != 2 || y->rank != 2) return false;
  if (q->dtype != TPRT_DTYPE_BF16 && q->dtype != TPRT_DTYPE_F16) return false;
  if (k->dtype != q->dtype || v->dtype != q->dtype || y->dtype != q->dtype) return false;
  if (head_dim != 64 && head_dim != 128) return false;
  if (seq_len < 1 || seq_len > (1 << 30) || q->dims[0] % seq_len != 0 || q->dims[1] % head_dim != 0 ||
      k->dims[1] % head_dim != 0 || k->dims[1] == 0)
    return false;
  const tprt_tensor_t* all[4] = {q, k, v, y};
  for (int i = 0; i < 4; ++i)
    if ((uintptr_t)all[i]->data % 16 != 0) return false;
  int64_t tiles = (seq_len + 127) / 128 * (q->dims[0] / seq_len) * (q->dims[1] / head_dim);
  if (tiles >= ((int64_t)1 << 31)) return false;
  if (!cache) return true;
  if (!cache->k || !cache->v || !cache->len || cache->k->rank != 2 || cache->v->rank != 2 ||
      cache->k->dtype != q->dtype || cache->v->dtype != q->dtype || cache->k->dims[1] != k->dims[1] ||
      cache->v->dims[1] != k->dims[1] || (uintptr_t)cache->k->data % 16 != 0 || (uintptr_t)cache->v->data % 16 != 0)
    return false;
  const int64_t limit = (int64_t)1 << 31;
  return cache->k->dims[0] < limit && q->dims[0] / seq_len * tprt__tail_rows(seq_len) < limit;
}

tprt_status_t tprt_cuda_attention_tc(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                     const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse,
                                     int64_t seq_len, int64_t head_dim, bool causal, float scale, cudaStream_t stream) {
  tprt_status_t s = tprt__check_attention("attention", q, k, v, y, NULL, NULL, NULL, NULL, seq_len, head_dim, scale);
  if (!s) s = tprt__check_kv_cache("attention", q, k, cache, seq_len);
  if (!s) s = tprt__check_lse("attention", q, lse, head_dim);
  if (s) return s;
  if (!tprt_cuda_attention_tc_fits(q, k, v, cache, y, seq_len, head_dim))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "attention: the tensor-core kernel takes bf16/f16, head_dim 64 or 128 and 16-byte "
                            "aligned tensors");
  if (q->dims[0] == 0) return NULL;
  tprt_attn::Params p = {};
  p.q = q->data, p.k = k->data, p.v = v->data, p.y = y->data, p.lse = nullptr;
  p.lse_tokens = lse ? static_cast<float*>(lse->data) : nullptr;
  p.q_ld = q->dims[1], p.kv_ld = k->dims[1], p.tokens = q->dims[0];
  p.seq_len = (int)seq_len, p.heads = (int)(q->dims[1] / head_dim), p.group = (int)(q->dims[1] / k->dims[1]);
  p.scale_log2 = tprt_attn_scale(scale, head_dim) * 1.44269504088896340736f;
  if (!cache) {
    TPRT_CUDA_RETURN_IF_ERROR(tprt_attn::forward(p, q->dtype, (int)head_dim, causal, false, stream));
    return NULL;
  }
  // Decoding: the per-sequence tails (stream-ordered scratch), then the kernel.
  const int64_t seqs = q->dims[0] / seq_len;
  p.k_cache = cache->k->data, p.v_cache = cache->v->data;
  p.cache_len = static_cast<const int32_t*>(cache->len->data);
  p.cache_rows = tprt__cache_rows(cache, seqs);
  p.tail_rows = tprt__tail_rows(seq_len);
  // One token per sequence with grouped-query heads: a CTA per KV head (q's rows contiguous).
  p.packed = seq_len == 1 && p.group > 1 && p.group <= 64 && q->dims[1] == p.heads * head_dim;
  const size_t tail_bytes = (size_t)(tprt_attn::kv_rows(p, true) * p.kv_ld) * (size_t)tprt_dtype_bytes(q->dtype, 1);
  void* tails = nullptr;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&tails, 2 * tail_bytes, stream));
  void* v_tail = static_cast<char*>(tails) + tail_bytes;
  cudaError_t e = q->dtype == TPRT_DTYPE_BF16
                      ? tprt_attn::forward_cached<cutlass::bfloat16_t>(p, tails, v_tail, (int)head_dim, causal, stream)
                      : tprt_attn::forward_cached<cutlass::half_t>(p, tails, v_tail, (int)head_dim, causal, stream);
  cudaError_t fe = tprt__cuda_free_async(tails, stream);
  TPRT_CUDA_RETURN_IF_ERROR(e);
  TPRT_CUDA_RETURN_IF_ERROR(fe);
  return NULL;
}
