// tprt_cuda_attention_tc: the tensor-core attention forward of fast and invariant modes (the
// shared design is in attention_tc.cuh). A CTA owns 128 query rows of one (sequence, head): Q
// stays in shared memory, K and V come in 128-row blocks (double-buffered cp.async), S = Q·Kᵀ is
// one WGMMA pass from shared memory, the online softmax (running max and sum per row, exp2 on the
// SFU) rescales the output accumulator, and P (rounded to the input dtype) times V is a WGMMA with
// P in registers. The output is divided by the row sum and rounded once.
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
  using SmemQ = SmemRows<T, BM, D, 1>;
  using SmemKV = SmemRows<T, BN, D, Stages>;
  using SmemVt = SmemRowsT<T, BN, D, Stages>;
  static constexpr size_t kSmemBytes = sizeof(T) * (cosize_v<SmemQ> + 2 * cosize_v<SmemKV>);
};

/// The forward of one 128-row query tile. The grid is linear: the tile index (in decreasing
/// order, so that the longest causal tiles start first) times the (sequence, head) pairs.
template <class T, int D, bool Causal, bool kLseOnly>
__global__ void __launch_bounds__(kThreads, 1) fwd_kernel(Params p) {
  using F = Fwd<T, D>;
  constexpr int BM = F::BM, BN = F::BN;
  extern __shared__ __align__(1024) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  T* sk = sq + cosize_v<typename F::SmemQ>;
  T* sv = sk + cosize_v<typename F::SmemKV>;
  Tensor sQ = make_tensor(make_smem_ptr(sq), typename F::SmemQ{})(_, _, 0);
  Tensor sK = make_tensor(make_smem_ptr(sk), typename F::SmemKV{});
  Tensor sV = make_tensor(make_smem_ptr(sv), typename F::SmemKV{});
  Tensor sVt = make_tensor(make_smem_ptr(sv), typename F::SmemVt{});

  const int L = p.seq_len, tid = threadIdx.x;
  const int m_tiles = (L + BM - 1) / BM;
  const int64_t pairs = p.tokens / L * p.heads;
  const int m_block = m_tiles - 1 - (int)(blockIdx.x / pairs);
  const int64_t pair = blockIdx.x % pairs;
  const int h = (int)(pair % p.heads);
  const int64_t b = pair / p.heads;
  const int64_t row0 = b * L;
  const T* qp = static_cast<const T*>(p.q) + row0 * p.q_ld + (int64_t)h * D;
  const T* kp = static_cast<const T*>(p.k) + row0 * p.kv_ld + (int64_t)(h / p.group) * D;
  const T* vp = static_cast<const T*>(p.v) + row0 * p.kv_ld + (int64_t)(h / p.group) * D;
  Tensor gQ = local_tile(make_tensor(make_gmem_ptr(qp), make_shape(L, Int<D>{}), make_stride(p.q_ld, _1{})),
                         Shape<Int<BM>, Int<D>>{}, make_coord(m_block, 0));
  Tensor gK = local_tile(make_tensor(make_gmem_ptr(kp), make_shape(L, Int<D>{}), make_stride(p.kv_ld, _1{})),
                         Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));
  Tensor gV = local_tile(make_tensor(make_gmem_ptr(vp), make_shape(L, Int<D>{}), make_stride(p.kv_ld, _1{})),
                         Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));

  GmemCopy<T, D> gcopy;
  auto gthr = gcopy.get_thread_slice(tid);
  Tensor tQg = gthr.partition_S(gQ);
  Tensor tQs = gthr.partition_D(sQ);
  Tensor tQc = gthr.partition_S(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  Tensor tKg = gthr.partition_S(gK);
  Tensor tKs = gthr.partition_D(sK);
  Tensor tVg = gthr.partition_S(gV);
  Tensor tVs = gthr.partition_D(sV);
  Tensor tKc = gthr.partition_S(make_identity_tensor(Shape<Int<BN>, Int<D>>{}));

  const int q_rows = L - m_block * BM;
  const int n_total = (L + BN - 1) / BN;
  const int n_end = Causal ? min(n_total, ((m_block + 1) * BM + BN - 1) / BN) : n_total;
  // Load groups: {Q, K0}, then g_n = {K[n+1], V[n]} for n = 0, 1, ...: iteration n computes
  // S(n+1) = Q·K[n+1]ᵀ and O += P(n)·V[n], while g_(n+1) lands. K[j] and V[j] use stage j % 2.
  auto load_group = [&](int n) {
    if (n + 1 < n_end)
      load_rows(gcopy, tKg(_, _, _, n + 1), tKs(_, _, _, (n + 1) % F::Stages), tKc, L - (n + 1) * BN);
    if (!kLseOnly && n < n_end) load_rows(gcopy, tVg(_, _, _, n), tVs(_, _, _, n % F::Stages), tKc, L - n * BN);
    cp_async_fence();
  };
  load_rows(gcopy, tQg, tQs, tQc, q_rows);
  load_rows(gcopy, tKg(_, _, _, 0), tKs(_, _, _, 0), tKc, L);
  cp_async_fence();
  load_group(0);

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
  Tensor S = make_tensor(tSrS.data(), rowcol(tSrS.layout()));
  Tensor O = make_tensor(tOrO.data(), rowcol(tOrO.layout()));
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  Tensor cS = make_tensor(tScS.data(), rowcol(tScS.layout()));
  constexpr int NR = decltype(size<0>(S))::value;
  float row_max[NR], row_sum[NR], corr[NR];
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < NR; ++r) row_max[r] = -INFINITY, row_sum[r] = 0.0f;

  // The softmax of block n's scores in S: masks (keys past the sequence; causal, keys after the
  // row), the running maximum, the exponentials (in place) and the running sum; corr[r] gets the
  // factor that rescales the output accumulated so far.
  auto softmax = [&](int n) {
    if (n * BN + BN > L || (Causal && n * BN + BN - 1 > m_block * BM)) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(S); ++i) {
        int col = n * BN + get<1>(cS(i)), row = m_block * BM + get<0>(cS(i));
        if (col >= L || (Causal && col > row)) S(i) = -INFINITY;
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
  cp_async_wait<1>();
  fence_async_shared();
  __syncthreads();
  wgmma<true>(mma_qk, tSrQ, tSrK(_, _, _, 0), tSrS);
  softmax(0);
  to_p();
  // Blocks 0 .. n_end - 2: S(n+1) and P(n)·V[n] in flight together, the softmax of S(n+1) while
  // P·V runs. (The last block is peeled off so that every wgmma of the loop is unconditional:
  // ptxas serializes them otherwise.)
  for (int n = 0; n + 1 < n_end; ++n) {
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();
    load_group(n + 1);
    wgmma_issue<true>(mma_qk, tSrQ, tSrK(_, _, _, (n + 1) % F::Stages), tSrS);
    if constexpr (!kLseOnly) {
      wgmma_issue<false>(mma_pv, tOrP, tOrV(_, _, _, n % F::Stages), tOrO);
      warpgroup_wait<1>();
    } else {
      warpgroup_wait<0>();
    }
    warpgroup_fence_operand(tSrS);
    softmax(n + 1);
    warpgroup_wait<0>();
    if constexpr (!kLseOnly) {
      warpgroup_fence_operand(tOrO);
      warpgroup_fence_operand(rP);
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < NR; ++r) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(O); ++c) O(r, c) *= corr[r];
      }
    }
    to_p();
  }
  if constexpr (!kLseOnly) {
    const int n = n_end - 1;
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();
    wgmma<false>(mma_pv, tOrP, tOrV(_, _, _, n % F::Stages), tOrO);
  }

  // Epilogue: y = o / l rounded once (l = 0 or NaN: 0), and the statistic for the backward.
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  Tensor cO = make_tensor(tOcO.data(), rowcol(tOcO.layout()));
  T* yp = static_cast<T*>(p.y) + (row0 + (int64_t)m_block * BM) * p.q_ld + (int64_t)h * D;
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < NR; ++r) {
    const float l = quad_sum(row_sum[r]);
    const int row = get<0>(cS(r, 0));
    if (p.lse && (tid & 3) == 0 && row < q_rows)
      p.lse[(int64_t)h * p.tokens + row0 + (int64_t)m_block * BM + row] =
          row_max[r] == -INFINITY ? -INFINITY : fmaf(row_max[r], p.scale_log2, __log2f(l));
    const float inv = (l == 0.0f || l != l) ? 0.0f : 1.0f / l;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(O); ++c) O(r, c) *= inv;
  }
  if constexpr (!kLseOnly) store_tile(O, cO, yp, p.q_ld, q_rows, 1.0f);
}

template <class T, int D, bool Causal, bool kLseOnly>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  auto kernel = fwd_kernel<T, D, Causal, kLseOnly>;
  constexpr size_t smem = Fwd<T, D>::kSmemBytes;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  const int64_t tiles = (p.seq_len + Fwd<T, D>::BM - 1) / Fwd<T, D>::BM;
  kernel<<<(unsigned)(tiles * (p.tokens / p.seq_len) * p.heads), kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <class T, bool kLseOnly>
cudaError_t dispatch(const Params& p, int d, bool causal, cudaStream_t stream) {
  if (d == 64) return causal ? launch<T, 64, true, kLseOnly>(p, stream) : launch<T, 64, false, kLseOnly>(p, stream);
  return causal ? launch<T, 128, true, kLseOnly>(p, stream) : launch<T, 128, false, kLseOnly>(p, stream);
}

cudaError_t forward(const Params& p, int dtype, int d, bool causal, bool lse_only, cudaStream_t stream) {
  if (dtype == TPRT_DTYPE_BF16)
    return lse_only ? dispatch<cutlass::bfloat16_t, true>(p, d, causal, stream)
                    : dispatch<cutlass::bfloat16_t, false>(p, d, causal, stream);
  return lse_only ? dispatch<cutlass::half_t, true>(p, d, causal, stream)
                  : dispatch<cutlass::half_t, false>(p, d, causal, stream);
}

}  // namespace tprt_attn

/// The problems the tensor-core kernels take: bf16/f16 q, k, v (and the outputs) of one dtype, head
/// dims 64 or 128, 16-byte aligned tensors, at most 2^31 - 1 tiles, tokens a multiple of seq_len.
bool tprt_cuda_attention_tc_fits(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                 const tprt_tensor_t* y, int64_t seq_len, int64_t head_dim) {
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
  return tiles < ((int64_t)1 << 31);
}

tprt_status_t tprt_cuda_attention_tc(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                     tprt_tensor_t* y, int64_t seq_len, int64_t head_dim, bool causal, float scale,
                                     cudaStream_t stream) {
  tprt_status_t s = tprt__check_attention("attention", q, k, v, y, NULL, NULL, NULL, NULL, seq_len, head_dim, scale);
  if (s) return s;
  if (!tprt_cuda_attention_tc_fits(q, k, v, y, seq_len, head_dim))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "attention: the tensor-core kernel takes bf16/f16, head_dim 64 or 128 and 16-byte "
                            "aligned tensors");
  if (q->dims[0] == 0) return NULL;
  tprt_attn::Params p = {};
  p.q = q->data, p.k = k->data, p.v = v->data, p.y = y->data, p.lse = nullptr;
  p.q_ld = q->dims[1], p.kv_ld = k->dims[1], p.tokens = q->dims[0];
  p.seq_len = (int)seq_len, p.heads = (int)(q->dims[1] / head_dim), p.group = (int)(q->dims[1] / k->dims[1]);
  p.scale_log2 = tprt_attn_scale(scale, head_dim) * 1.44269504088896340736f;
  TPRT_CUDA_RETURN_IF_ERROR(tprt_attn::forward(p, q->dtype, (int)head_dim, causal, false, stream));
  return NULL;
}
