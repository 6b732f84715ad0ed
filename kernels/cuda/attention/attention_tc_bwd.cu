// tprt_cuda_attention_grad_tc: the tensor-core attention backward of fast and invariant modes
// (design in attention_tc.cuh). Deterministic, without atomics, in four launches:
//   1. stats: the forward's softmax statistic per row, lse = m·scale·log2(e) + log2(l) (the forward
//      kernel without P·V), [Hq, T] f32;
//   2. delta: Δ_i = Σ_d dy_i[d] · y_i[d] per row and head, f32 (16-byte loads, a shuffle tree);
//   3. dk, dv: a CTA per (sequence, key/value head, 128-key block) walks the group's query heads,
//      then the query tiles of 64 rows that see its keys, in increasing order (a TMA producer warp
//      streams the Q and dy tiles and their statistics through a pipeline to two consumer
//      warpgroups):
//        Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·scale·log2(e) - lse), dPᵀ = V·dyᵀ, dSᵀ = Pᵀ ∘ (dPᵀ - Δ),
//        dV += Pᵀ·dy, dK += dSᵀ·Q  (Pᵀ and dSᵀ rounded to the input dtype, in registers);
//      dk = scale · dK, dv = dV, rounded once;
//   4. dq: a CTA per (sequence, head, 128-row query tile) walks its key blocks of 128:
//        S = Q·Kᵀ, P, dP = dy·Vᵀ, dS = P ∘ (dP - Δ), dQ += dS·K;  dq = scale · dQ.
// Every sum runs in an order fixed by the sequence and the position, never by the batch, the
// head count or the grid, so the gradients are batch- and TP-invariant like the forward.
#include "attention_tc.cuh"
#include "tprt_attention_rows.h"
#include "tprt_cuda_internal.cuh"
#include "tprt_cuda_kernels.h"
extern "C" {
#include "tprt_cpu_internal.h"  // tprt__check_attention
}

namespace tprt_attn {

/// Gradient problem: the forward's tensors plus dy, dq, dk, dv and the per-row statistics.
struct GradParams {
  Params f;  // q, k, v, y (read), lse (read)
  const void* dy;
  void *dq, *dk, *dv;
  const float* delta;  // at stat_index, like f.lse
  float scale;         // dk and dq factor
};

// ------------------------------------------------------------------------------------------------
// 2. delta
// ------------------------------------------------------------------------------------------------

/// Δ = Σ_d dy[d]·y[d] in f32 per (token, head): D/8 threads per row, each with one 16-byte vector
/// of dy and of y, then a shuffle tree over those threads (a fixed order for every row).
template <class T, int D>
__global__ void delta_kernel(const T* dy, const T* y, float* delta, Params p) {
  constexpr int kLanes = D / 8;  // threads per row
  const int64_t tokens = p.tokens;
  const int heads = p.heads;
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
  const int lane = threadIdx.x % kLanes;
  const bool live = w < tokens * heads;
  const int64_t t = live ? w / heads : 0;
  const int h = live ? (int)(w % heads) : 0;
  float s = 0.0f;
  if (live) {
    const int64_t at = t * heads * D + (int64_t)h * D + lane * 8;
    const uint4 a = *reinterpret_cast<const uint4*>(dy + at), b = *reinterpret_cast<const uint4*>(y + at);
    const T* ae = reinterpret_cast<const T*>(&a);
    const T* be = reinterpret_cast<const T*>(&b);
    CUTLASS_PRAGMA_UNROLL
    for (int k = 0; k < 8; ++k) s = fmaf(static_cast<float>(ae[k]), static_cast<float>(be[k]), s);
  }
  CUTLASS_PRAGMA_UNROLL
  for (int o = kLanes / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  if (live && lane == 0) delta[stat_index(p, h, t / p.seq_len, t % p.seq_len)] = s;
}

// ------------------------------------------------------------------------------------------------
// 3. dk, dv
// ------------------------------------------------------------------------------------------------

template <class T, int D>
struct Dkv {
  static constexpr int BN = 128, BM = 64, Stages = 3;
  // Sᵀ = K·Qᵀ and dPᵀ = V·dyᵀ: [BN, BM] over D.
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<Int<BN>, Int<BM>, Int<D>>>(),
                                       Layout<Shape<_2, _1, _1>>{}));
  // dV += Pᵀ·dy and dK += dSᵀ·Q: [BN, D] over BM.
  using MmaG = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<Int<BN>, Int<D>, Int<BM>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));
  using SmemKV = SmemRows<T, BN, D, 1>;
  using SmemQ = SmemRows<T, BM, D, Stages>;
  using SmemQt = SmemRowsT<T, BM, D, Stages>;
  struct Shared {
    alignas(1024) cute::array_aligned<T, cosize_v<SmemKV>> k;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemKV>> v;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemQ>> q;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemQ>> dy;
    alignas(16) float lse[Stages][BM], delta[Stages][BM];  // the statistics of each stage's query rows
    alignas(16) uint64_t kv_full;
    typename Pipe<Stages>::SharedStorage q_pipe;
  };
  static constexpr size_t kSmemBytes = sizeof(Shared);
};

template <class T, int D>
struct DkvArgs {
  TmaRows<T, 128, D> tma_k, tma_v;
  TmaRows<T, 64, D> tma_q, tma_dy;
  GradParams g;
};

/// dk and dv of one 128-key block, warp-specialized: the producer loads K and V once and (Q, dy)
/// tiles of 64 rows with their softmax statistics into a three-stage pipeline; each consumer
/// warpgroup owns 64 keys.
template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kWsThreads, 1) dkv_kernel(CUTE_GRID_CONSTANT DkvArgs<T, D> const a) {
  using F = Dkv<T, D>;
  using P = Pipe<F::Stages>;
  constexpr int BN = F::BN, BM = F::BM;
  const GradParams& g = a.g;
  const Params& p = g.f;
  extern __shared__ __align__(1024) unsigned char smem[];
  auto& sh = *reinterpret_cast<typename F::Shared*>(smem);
  Tensor sK = make_tensor(make_smem_ptr(sh.k.data()), typename F::SmemKV{})(_, _, 0);
  Tensor sV = make_tensor(make_smem_ptr(sh.v.data()), typename F::SmemKV{})(_, _, 0);
  Tensor sQ = make_tensor(make_smem_ptr(sh.q.data()), typename F::SmemQ{});
  Tensor sQt = make_tensor(make_smem_ptr(sh.q.data()), typename F::SmemQt{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.dy.data()), typename F::SmemQ{});
  Tensor sdOt = make_tensor(make_smem_ptr(sh.dy.data()), typename F::SmemQt{});

  const int L = p.seq_len;
  // Causal: the first key blocks see the most query tiles, so they start first.
  const Item it = grid_item((L + BN - 1) / BN, p.heads / p.group, p.tokens / L, Causal);
  const int n_block = it.tile, hk = it.head;
  const int64_t b = it.seq, row0 = b * L;
  const int k_rows = L - n_block * BN;
  // The (query head, query tile) steps: heads of the group, then the tiles that see the block.
  const int m_tiles = (L + BM - 1) / BM;
  const int m_start = Causal ? n_block * BN / BM : 0;
  const int per_head = m_tiles - m_start;
  const int steps = p.group * per_head;
  const int warp_group = threadIdx.x / 128;

  const auto pp = pipe_params<F::Stages>(2 * BM * D * sizeof(T) + 2 * BM * sizeof(float));
  ws_init(&sh.kv_full, a.tma_k, a.tma_v, a.tma_q, a.tma_dy);
  P q_pipe(sh.q_pipe, pp, Shape<_1, _1, _1>{});
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<24>();
    if (threadIdx.x / 32 == 0 && cute::elect_one_sync()) {
      auto tile_kv = Shape<Int<BN>, Int<D>>{};
      auto tile_q = Shape<Int<BM>, Int<D>>{};
      auto [tKg, tKs] = tma_tiles(a.tma_k, sK,
                                  local_tile(tma_rows(a.tma_k, p.tokens, p.kv_ld, row0), tile_kv, make_coord(n_block, hk)));
      auto [tVg, tVs] = tma_tiles(a.tma_v, sV,
                                  local_tile(tma_rows(a.tma_v, p.tokens, p.kv_ld, row0), tile_kv, make_coord(n_block, hk)));
      // Q and dy tiles: (TMA, row tile, head).
      auto [tQg, tQs] = tma_tiles(a.tma_q, sQ,
                                  local_tile(tma_rows(a.tma_q, p.tokens, p.q_ld, row0), tile_q, make_coord(_, _)));
      auto [tdOg, tdOs] = tma_tiles(a.tma_dy, sdO,
                                    local_tile(tma_rows(a.tma_dy, p.tokens, p.q_ld, row0), tile_q, make_coord(_, _)));
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&sh.kv_full, 2 * BN * D * sizeof(T));
      copy(a.tma_k.with(sh.kv_full), tKg, tKs);
      copy(a.tma_v.with(sh.kv_full), tVg, tVs);
      auto st = cutlass::make_producer_start_state<P>();
      for (int step = 0; step < steps; ++step) {
        const int h = hk * p.group + step / per_head, m = m_start + step % per_head;
        q_pipe.producer_acquire(st);
        copy(a.tma_q.with(*q_pipe.producer_get_barrier(st)), tQg(_, m, h), tQs(_, st.index()));
        copy(a.tma_dy.with(*q_pipe.producer_get_barrier(st)), tdOg(_, m, h), tdOs(_, st.index()));
        const int64_t at = stat_index(p, h, b, (int64_t)m * BM);
        SM90_BULK_COPY_G2S::copy(p.lse + at, q_pipe.producer_get_barrier(st), sh.lse[st.index()], BM * sizeof(float));
        SM90_BULK_COPY_G2S::copy(g.delta + at, q_pipe.producer_get_barrier(st), sh.delta[st.index()],
                                 BM * sizeof(float));
        ++st;
      }
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<240>();
  const int tid = threadIdx.x - 128;
  typename F::MmaS mma_s;
  typename F::MmaG mma_g;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_g = mma_g.get_thread_slice(tid);
  Tensor tSrK = thr_s.partition_fragment_A(sK);
  Tensor tSrV = thr_s.partition_fragment_A(sV);
  Tensor tSrQ = thr_s.partition_fragment_B(sQ);
  Tensor tSrdO = thr_s.partition_fragment_B(sdO);
  Tensor tGrdOt = thr_g.partition_fragment_B(sdOt);
  Tensor tGrQt = thr_g.partition_fragment_B(sQt);
  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<BN>, Int<BM>>{});
  Tensor tSrdP = partition_fragment_C(mma_s, Shape<Int<BN>, Int<BM>>{});
  Tensor tdVrdV = partition_fragment_C(mma_g, Shape<Int<BN>, Int<D>>{});
  Tensor tdKrdK = partition_fragment_C(mma_g, Shape<Int<BN>, Int<D>>{});
  clear(tdVrdV);
  clear(tdKrdK);
  Tensor S = as_rowcol(tSrS);
  Tensor dP = as_rowcol(tSrdP);
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<BN>, Int<BM>>{}));
  Tensor cS = as_rowcol(tScS);

  cutlass::arch::ClusterTransactionBarrier::wait(&sh.kv_full, 0);
  cutlass::PipelineState<F::Stages> rd;
  for (int step = 0; step < steps; ++step, ++rd) {
    const int m = m_start + step % per_head;  // the query tile (its head's statistics came with it)
    const int st = rd.index();
    q_pipe.consumer_wait(rd);
    // Sᵀ and dPᵀ in flight together; Pᵀ is formed while dPᵀ computes, dV's MMA runs while dSᵀ is.
    wgmma_issue<true>(mma_s, tSrK, tSrQ(_, _, _, st), tSrS);
    wgmma_issue<true>(mma_s, tSrV, tSrdO(_, _, _, st), tSrdP);
    float li[decltype(size<1>(S))::value], di[decltype(size<1>(S))::value];
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(S); ++c) {
      const int col = get<1>(cS(0, c));  // the query (column) within the tile
      li[c] = sh.lse[st][col];
      di[c] = sh.delta[st][col];
    }
    warpgroup_wait<1>();
    warpgroup_fence_operand(tSrS);
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(S); ++c) {
      const int i = m * BM + get<1>(cS(0, c));
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < size<0>(S); ++r) {
        const int j = n_block * BN + get<0>(cS(r, c));  // the key (row)
        S(r, c) = grad_prob<Causal>(S(r, c), p.scale_log2, li[c], i, j, L);
      }
    }
    Tensor rP = make_tensor_like<T>(tSrS);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tSrS); ++i) rP(i) = static_cast<T>(tSrS(i));
    Tensor aP = make_tensor(rP.data(), acc_as_a(rP.layout()));
    wgmma_issue<false>(mma_g, aP, tGrdOt(_, _, _, st), tdVrdV);
    warpgroup_wait<1>();
    warpgroup_fence_operand(tSrdP);
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(S); ++c) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < size<0>(S); ++r) dP(r, c) = S(r, c) * (dP(r, c) - di[c]);
    }
    Tensor rdS = make_tensor_like<T>(tSrdP);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tSrdP); ++i) rdS(i) = static_cast<T>(tSrdP(i));
    Tensor adS = make_tensor(rdS.data(), acc_as_a(rdS.layout()));
    wgmma_issue<false>(mma_g, adS, tGrQt(_, _, _, st), tdKrdK);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tdVrdV);
    warpgroup_fence_operand(tdKrdK);
    warpgroup_fence_operand(rP);
    warpgroup_fence_operand(rdS);
    q_pipe.consumer_release(rd);
  }

  Tensor tOc = thr_g.partition_C(make_identity_tensor(Shape<Int<BN>, Int<D>>{}));
  Tensor cO = as_rowcol(tOc);
  const int64_t off = (row0 + (int64_t)n_block * BN) * p.kv_ld + (int64_t)hk * D;
  store_tile(as_rowcol(tdVrdV), cO, static_cast<T*>(g.dv) + off, p.kv_ld, k_rows,
             1.0f);
  store_tile(as_rowcol(tdKrdK), cO, static_cast<T*>(g.dk) + off, p.kv_ld, k_rows,
             g.scale);
}

// ------------------------------------------------------------------------------------------------
// 4. dq
// ------------------------------------------------------------------------------------------------

template <class T, int D>
struct Dq {
  static constexpr int BM = 128, BN = 128, Stages = 2;
  // S = Q·Kᵀ and dP = dy·Vᵀ: [BM, BN] over D.
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<Int<BM>, Int<BN>, Int<D>>>(),
                                       Layout<Shape<_2, _1, _1>>{}));
  // dQ += dS·K: [BM, D] over BN.
  using MmaG = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<Int<BM>, Int<D>, Int<BN>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));
  using SmemQ = SmemRows<T, BM, D, 1>;
  using SmemKV = SmemRows<T, BN, D, Stages>;
  using SmemKt = SmemRowsT<T, BN, D, Stages>;
  struct Shared {
    alignas(1024) cute::array_aligned<T, cosize_v<SmemQ>> q;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemQ>> dy;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemKV>> k;
    alignas(1024) cute::array_aligned<T, cosize_v<SmemKV>> v;
    alignas(16) uint64_t q_full;
    typename Pipe<Stages>::SharedStorage kv_pipe;
  };
  static constexpr size_t kSmemBytes = sizeof(Shared);
};

template <class T, int D>
struct DqArgs {
  TmaRows<T, 128, D> tma_q, tma_dy;
  TmaRows<T, Dq<T, D>::BN, D> tma_k, tma_v;
  GradParams g;
};

/// dq of one 128-row query tile, warp-specialized: the producer loads Q and dy once and (K, V)
/// blocks of 128 keys into a two-stage pipeline; each consumer warpgroup owns 64 query rows.
template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kWsThreads, 1) dq_kernel(CUTE_GRID_CONSTANT DqArgs<T, D> const a) {
  using F = Dq<T, D>;
  using P = Pipe<F::Stages>;
  constexpr int BM = F::BM, BN = F::BN;
  const GradParams& g = a.g;
  const Params& p = g.f;
  extern __shared__ __align__(1024) unsigned char smem[];
  auto& sh = *reinterpret_cast<typename F::Shared*>(smem);
  Tensor sQ = make_tensor(make_smem_ptr(sh.q.data()), typename F::SmemQ{})(_, _, 0);
  Tensor sdO = make_tensor(make_smem_ptr(sh.dy.data()), typename F::SmemQ{})(_, _, 0);
  Tensor sK = make_tensor(make_smem_ptr(sh.k.data()), typename F::SmemKV{});
  Tensor sKt = make_tensor(make_smem_ptr(sh.k.data()), typename F::SmemKt{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v.data()), typename F::SmemKV{});

  const int L = p.seq_len;
  const Item it = grid_item((L + BM - 1) / BM, p.heads, p.tokens / L, false);
  const int m_block = it.tile, h = it.head;
  const int64_t b = it.seq, row0 = b * L;
  const int64_t qoff = (row0 + (int64_t)m_block * BM) * p.q_ld + (int64_t)h * D;
  const int q_rows = L - m_block * BM;
  const int n_total = (L + BN - 1) / BN;
  const int n_end = Causal ? min(n_total, ((m_block + 1) * BM + BN - 1) / BN) : n_total;
  const int warp_group = threadIdx.x / 128;

  const auto pp = pipe_params<F::Stages>(2 * BN * D * sizeof(T));
  ws_init(&sh.q_full, a.tma_q, a.tma_dy, a.tma_k, a.tma_v);
  P kv_pipe(sh.kv_pipe, pp, Shape<_1, _1, _1>{});
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<24>();
    if (threadIdx.x / 32 == 0 && cute::elect_one_sync()) {
      auto tile_q = Shape<Int<BM>, Int<D>>{};
      auto tile_kv = Shape<Int<BN>, Int<D>>{};
      auto [tQg, tQs] = tma_tiles(a.tma_q, sQ,
                                  local_tile(tma_rows(a.tma_q, p.tokens, p.q_ld, row0), tile_q, make_coord(m_block, h)));
      auto [tdOg, tdOs] = tma_tiles(a.tma_dy, sdO,
                                    local_tile(tma_rows(a.tma_dy, p.tokens, p.q_ld, row0), tile_q, make_coord(m_block, h)));
      auto [tKg, tKs] = tma_tiles(a.tma_k, sK, local_tile(tma_rows(a.tma_k, p.tokens, p.kv_ld, row0), tile_kv,
                                                          make_coord(_, h / p.group)));
      auto [tVg, tVs] = tma_tiles(a.tma_v, sV, local_tile(tma_rows(a.tma_v, p.tokens, p.kv_ld, row0), tile_kv,
                                                          make_coord(_, h / p.group)));
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&sh.q_full, 2 * BM * D * sizeof(T));
      copy(a.tma_q.with(sh.q_full), tQg, tQs);
      copy(a.tma_dy.with(sh.q_full), tdOg, tdOs);
      auto st = cutlass::make_producer_start_state<P>();
      for (int n = 0; n < n_end; ++n, ++st) {
        kv_pipe.producer_acquire(st);
        copy(a.tma_k.with(*kv_pipe.producer_get_barrier(st)), tKg(_, n), tKs(_, st.index()));
        copy(a.tma_v.with(*kv_pipe.producer_get_barrier(st)), tVg(_, n), tVs(_, st.index()));
      }
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<240>();
  const int tid = threadIdx.x - 128;
  typename F::MmaS mma_s;
  typename F::MmaG mma_g;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_g = mma_g.get_thread_slice(tid);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);
  Tensor tSrdO = thr_s.partition_fragment_A(sdO);
  Tensor tSrK = thr_s.partition_fragment_B(sK);
  Tensor tSrV = thr_s.partition_fragment_B(sV);
  Tensor tGrKt = thr_g.partition_fragment_B(sKt);
  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  Tensor tSrdP = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  Tensor tdQ = partition_fragment_C(mma_g, Shape<Int<BM>, Int<D>>{});
  clear(tdQ);
  Tensor S = as_rowcol(tSrS);
  Tensor dP = as_rowcol(tSrdP);
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  Tensor cS = as_rowcol(tScS);
  constexpr int NR = decltype(size<0>(S))::value;
  float li[NR], di[NR];
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < NR; ++r) {
    const int i = get<0>(cS(r, 0));
    li[r] = i < q_rows ? p.lse[stat_index(p, h, b, (int64_t)m_block * BM + i)] : 0.0f;
    di[r] = i < q_rows ? g.delta[stat_index(p, h, b, (int64_t)m_block * BM + i)] : 0.0f;
  }

  cutlass::arch::ClusterTransactionBarrier::wait(&sh.q_full, 0);
  cutlass::PipelineState<F::Stages> rd;
  for (int n = 0; n < n_end; ++n, ++rd) {
    const int st = rd.index();
    kv_pipe.consumer_wait(rd);
    // S and dP in flight together; P is formed while dP computes.
    wgmma_issue<true>(mma_s, tSrQ, tSrK(_, _, _, st), tSrS);
    wgmma_issue<true>(mma_s, tSrdO, tSrV(_, _, _, st), tSrdP);
    warpgroup_wait<1>();
    warpgroup_fence_operand(tSrS);
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < NR; ++r) {
      const int i = m_block * BM + get<0>(cS(r, 0));
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(S); ++c) {
        const int j = n * BN + get<1>(cS(r, c));
        S(r, c) = grad_prob<Causal>(S(r, c), p.scale_log2, li[r], i, j, L);
      }
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrdP);
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < NR; ++r) {
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(S); ++c) dP(r, c) = S(r, c) * (dP(r, c) - di[r]);
    }
    Tensor rdS = make_tensor_like<T>(tSrdP);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tSrdP); ++i) rdS(i) = static_cast<T>(tSrdP(i));
    wgmma<false>(mma_g, make_tensor(rdS.data(), acc_as_a(rdS.layout())), tGrKt(_, _, _, st), tdQ);
    kv_pipe.consumer_release(rd);
  }

  Tensor tOc = thr_g.partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  store_tile(as_rowcol(tdQ), as_rowcol(tOc),
             static_cast<T*>(g.dq) + qoff, p.q_ld, q_rows, g.scale);
}

// ------------------------------------------------------------------------------------------------
// Launch
// ------------------------------------------------------------------------------------------------

template <class T, int D, bool Causal>
cudaError_t backward(const GradParams& g, cudaStream_t stream) {
  const Params& p = g.f;
  const int64_t seqs = p.tokens / p.seq_len;
  const int64_t rows = p.tokens * p.heads;
  delta_kernel<T, D><<<(unsigned)((rows * (D / 8) + 255) / 256), 256, 0, stream>>>(
      static_cast<const T*>(g.dy), static_cast<const T*>(p.y), const_cast<float*>(g.delta), p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  DkvArgs<T, D> da;
  da.g = g;
  da.tma_k = make_tma_rows<T, 128, D>(p.k, p.tokens, p.kv_ld);
  da.tma_v = make_tma_rows<T, 128, D>(p.v, p.tokens, p.kv_ld);
  da.tma_q = make_tma_rows<T, 64, D>(p.q, p.tokens, p.q_ld);
  da.tma_dy = make_tma_rows<T, 64, D>(g.dy, p.tokens, p.q_ld);
  const int64_t n_tiles = (p.seq_len + Dkv<T, D>::BN - 1) / Dkv<T, D>::BN;
  e = launch_ws(dkv_kernel<T, D, Causal>, Dkv<T, D>::kSmemBytes, n_tiles * seqs * (p.heads / p.group), da, stream);
  if (e != cudaSuccess) return e;
  DqArgs<T, D> qa;
  qa.g = g;
  qa.tma_q = make_tma_rows<T, 128, D>(p.q, p.tokens, p.q_ld);
  qa.tma_dy = make_tma_rows<T, 128, D>(g.dy, p.tokens, p.q_ld);
  qa.tma_k = make_tma_rows<T, Dq<T, D>::BN, D>(p.k, p.tokens, p.kv_ld);
  qa.tma_v = make_tma_rows<T, Dq<T, D>::BN, D>(p.v, p.tokens, p.kv_ld);
  const int64_t m_tiles = (p.seq_len + Dq<T, D>::BM - 1) / Dq<T, D>::BM;
  return launch_ws(dq_kernel<T, D, Causal>, Dq<T, D>::kSmemBytes, m_tiles * seqs * p.heads, qa, stream);
}

/// The kernels' log2 statistics at stat_index from tp.attention's lse (natural log, [T, Hq]): one
/// thread per (token, head).
__global__ void stats_kernel(Params p, const float* __restrict__ lse) {
  const int64_t n = p.tokens * p.heads;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / p.heads, b = t / p.seq_len;
    const int h = (int)(i % p.heads);
    p.lse[stat_index(p, h, b, t - b * p.seq_len)] = lse[i] * kLog2e;
  }
}

cudaError_t stats_from_lse(const Params& p, const float* lse, cudaStream_t stream) {
  stats_kernel<<<tprt__cuda_ew_blocks(p.tokens * p.heads, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0, stream>>>(
      p, lse);
  return cudaGetLastError();
}

template <class T>
cudaError_t backward_dispatch(const GradParams& g, int d, bool causal, cudaStream_t stream) {
  if (d == 64) return causal ? backward<T, 64, true>(g, stream) : backward<T, 64, false>(g, stream);
  return causal ? backward<T, 128, true>(g, stream) : backward<T, 128, false>(g, stream);
}

}  // namespace tprt_attn

bool tprt_cuda_attention_grad_tc_fits(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                      const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* dq,
                                      const tprt_tensor_t* dk, const tprt_tensor_t* dv, int64_t seq_len,
                                      int64_t head_dim) {
  const tprt_tensor_t* all[4] = {dy, dq, dk, dv};
  for (int i = 0; i < 4; ++i)
    if (!all[i] || !q || all[i]->dtype != q->dtype || (uintptr_t)all[i]->data % 16 != 0) return false;
  return tprt_cuda_attention_tc_fits(q, k, v, NULL, y, seq_len, head_dim);
}

tprt_status_t tprt_cuda_attention_grad_tc(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                          const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse,
                                          tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                          int64_t head_dim, bool causal, float scale, cudaStream_t stream) {
  tprt_status_t s = tprt__check_attention("attention_grad", q, k, v, y, dy, dq, dk, dv, seq_len, head_dim, scale);
  if (!s) s = tprt__check_lse("attention_grad", q, lse, head_dim);
  if (s) return s;
  if (!tprt_cuda_attention_grad_tc_fits(q, k, v, y, dy, dq, dk, dv, seq_len, head_dim))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "attention_grad: the tensor-core kernel takes bf16/f16, head_dim 64 or 128 and 16-byte "
                            "aligned tensors");
  if (q->dims[0] == 0) return NULL;
  const float sc = tprt_attn_scale(scale, head_dim);
  tprt_attn::GradParams g = {};
  tprt_attn::Params& p = g.f;
  p.q = q->data, p.k = k->data, p.v = v->data, p.y = y->data;
  p.q_ld = q->dims[1], p.kv_ld = k->dims[1], p.tokens = q->dims[0];
  p.seq_len = (int)seq_len, p.heads = (int)(q->dims[1] / head_dim), p.group = (int)(q->dims[1] / k->dims[1]);
  p.scale_log2 = sc * 1.44269504088896340736f;
  g.dy = dy->data, g.dq = dq->data, g.dk = dk->data, g.dv = dv->data, g.scale = sc;
  // lse and delta at stat_index, f32 each, stream-ordered; zeros in the padding rows (past a
  // sequence), which the kernels read as whole 64-row blocks and mask.
  void* ws = nullptr;
  const size_t rows = (size_t)(p.tokens / seq_len) * (size_t)tprt_attn::stat_rows(seq_len) * (size_t)p.heads;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&ws, 2 * rows * sizeof(float), stream));
  p.lse = static_cast<float*>(ws);
  g.delta = p.lse + rows;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws, 0, 2 * rows * sizeof(float), stream));
  // The statistics: the forward's lse when given (one pass over T·Hq floats), else recomputed by a
  // forward pass without P·V.
  cudaError_t e = lse ? tprt_attn::stats_from_lse(p, static_cast<const float*>(lse->data), stream)
                      : tprt_attn::forward(p, q->dtype, (int)head_dim, causal, true, stream);
  if (e == cudaSuccess)
    e = q->dtype == TPRT_DTYPE_BF16
            ? tprt_attn::backward_dispatch<cutlass::bfloat16_t>(g, (int)head_dim, causal, stream)
            : tprt_attn::backward_dispatch<cutlass::half_t>(g, (int)head_dim, causal, stream);
  cudaError_t fe = tprt__cuda_free_async(ws, stream);
  TPRT_CUDA_RETURN_IF_ERROR(e);
  TPRT_CUDA_RETURN_IF_ERROR(fe);
  return NULL;
}
