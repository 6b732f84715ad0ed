// tprt_cuda_rope, tprt_cuda_attention and tprt_cuda_attention_grad in exact mode, bitwise equal to
// tprt_cpu_rope / tprt_cpu_attention / tprt_cpu_attention_grad (kernels/cpu/cpu_attention.c; the
// arithmetic is docs/numerics.md, "Attention", and tprt_attention_rows.h):
//   rope       per pair i < D/2 of every head: tprt_rope_pair (products rounded, then the sum)
//   attention  s_j = fl(dot(q_i, k_j) · scale); m = scan max; e_j = exp(s_j - m); l = canonical row
//              sum of e; y_i[d] = RNE(o[d] / l), o[d] = fmaf over j ascending of e_j · v_j[d]
//   grad       p_j = e_j / l, Di = dot(dy_i, y_i), ds_j = p_j · (dp_j - Di), dp_j = dot(dy_i, v_j);
//              dq_i[d] = RNE(scale · Σ_j ds_j k_j[d]) (j ascending); dk_j[d] = RNE(scale · Σ ds q_i[d])
//              and dv_j[d] = RNE(Σ p dy_i[d]) over the group's query heads ascending, then the queries
//              that see j ascending. Every dot is sequential fmaf over d from +0.0.
//
// Layouts (dense row-major, any alignment: scalar loads): x, y, q, dy, dq [T, H·D] with head h in
// columns [h·D, (h+1)·D); k, v, dk, dv [T, Hkv·D]; cos, sin [T, D]. T = B·S tokens, sequence b in
// rows [b·S, (b+1)·S); query head h reads key/value head h / (Hq/Hkv).
// Dtypes: bf16 / f16 / f32, one kernel per dtype of x (rope) or q (attention); rope's cos and sin
// may have any of the three, chosen at run time. All arithmetic is f32 on widened values.
//
// Launch geometry:
// - rope: one thread per run of 8 (f32: 4) rotated pairs of a head with 16-byte loads and stores
//   when the half head and the pointers allow, else one per pair; 256-thread blocks, grid stride.
// - attention: one 256-thread block per (token, query head) row, grid stride over rows (at most
//   TPRT__ATT_MAX_BLOCKS blocks, each with its own S floats of scores (C + S with a KV cache of C
//   rows per sequence, whose cached keys come first: tprt__att_rows_t) in a stream-ordered
//   workspace). q_i is widened into shared memory; thread t scores keys t, t+256, ... (that is the
//   canonical lane assignment), the block reduces the scan maximum as (value, first index) pairs,
//   thread t then turns its scores into e_j and sums them as lane t; tprt__cuda_row_tree gives l.
//   Finally thread t owns output columns d = t, t+256, ... and accumulates o[d] over j in order.
// - attention_grad, two kernels:
//   1. rows: one block per (token, query head) as above: scores, m, l, Di (thread 0), then
//      ds_j = p_j (dp_j - Di) for the keys in parallel, dq per column d sequentially over j; the
//      row's m, l and Di go to a workspace for kernel 2.
//   2. keys: one block per (sequence, kv head, key j), k_j and v_j widened into shared memory;
//      over the group's heads and chunks of 256 queries, thread t computes p and ds of query
//      i0 + t into shared memory, then thread t accumulates columns d = t, t+256, ... of dk_j and
//      dv_j over the chunk's queries in order (f32 accumulators in shared memory).
// Per-block vectors (q_i, dy_i, k_j, v_j, accumulators) live in dynamic shared memory when they fit
// in 32 KiB (D <= 8192 forward, 4096 and 2048 for the two backward kernels), else in the workspace
// (the same code through a generic pointer). The workspaces are allocated stream-ordered
// (tprt__cuda_malloc_async) and freed after the launches.
#include "tprt_attention_rows.h"
#include "tprt_cuda_internal.cuh"

// Threads per block: the 256 lanes of the canonical row reduction (8 warps of 32).
#define TPRT__ATT_THREADS TPRT_ROW_LANES
// Lanes of a warp.
#define TPRT__ATT_WARP 32
// Most blocks of the row and key kernels: each holds S floats of workspace, so this bounds the
// workspace at 4 KiB · S; 1024 blocks of 256 threads still fill the 132 SMs of an H100/H200
// (at most 8 such blocks resident per SM) about once.
#define TPRT__ATT_MAX_BLOCKS 1024
// Most dynamic shared memory of a block's vectors: with the kernels' static shared memory (at most
// 2 KiB) it stays inside the 48 KiB a block gets without opting in to more
// (cudaFuncAttributeMaxDynamicSharedMemorySize); larger vectors go to the workspace.
#define TPRT__ATT_SMEM_BYTES (32 * 1024)

static_assert(TPRT__ATT_THREADS == 256, "the canonical reduction has 256 lanes");

// ------------------------------------------------------------------------------------------------
// Device helpers
// ------------------------------------------------------------------------------------------------

/// The scan maximum of tprt_attn_softmax_stats as a reduction: among the non-NaN scores, the
/// largest by `>`, ties (±0) going to the first index. A NaN first score is handled by the caller
/// (it makes m NaN, as the scan keeps it). |i| < 0: no score yet.
struct tprt__att_max_t {
  float v;
  long long i;
};

static __device__ __forceinline__ tprt__att_max_t tprt__att_max_pick(tprt__att_max_t a, tprt__att_max_t b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  if (b.v > a.v) return b;
  if (a.v > b.v) return a;
  return a.i < b.i ? a : b;
}

/// The block's scan maximum from each thread's |mine| (its own keys scanned in increasing order);
/// |first| is s_0 (meaningful in thread 0, which owns key 0). Returns m to every thread. |sm|
/// holds TPRT__ATT_THREADS / 32 + 1 pairs; the trailing barrier lets the caller reuse it.
static __device__ __forceinline__ float tprt__att_block_max(tprt__att_max_t mine, float first, tprt__att_max_t* sm) {
  const unsigned all = 0xFFFFFFFFu;  // every lane of the warp takes part
  const int lane = threadIdx.x % TPRT__ATT_WARP, warp = threadIdx.x / TPRT__ATT_WARP;
#pragma unroll
  for (int s = TPRT__ATT_WARP / 2; s >= 1; s /= 2) {
    tprt__att_max_t o;
    o.v = __shfl_down_sync(all, mine.v, s);
    o.i = __shfl_down_sync(all, mine.i, s);
    mine = tprt__att_max_pick(mine, o);
  }
  if (lane == 0) sm[warp] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    tprt__att_max_t best = sm[0];
    for (int w = 1; w < TPRT__ATT_THREADS / TPRT__ATT_WARP; ++w) best = tprt__att_max_pick(best, sm[w]);
    // The scan starts at s_0: a NaN there is never replaced (nothing compares > NaN).
    sm[TPRT__ATT_THREADS / TPRT__ATT_WARP].v = isnan(first) ? first : best.v;
  }
  __syncthreads();
  const float m = sm[TPRT__ATT_THREADS / TPRT__ATT_WARP].v;
  __syncthreads();
  return m;
}

/// dot(a, b) over |n| elements, a widened in f32 (shared or global), b of dtype D at |b|[off..]:
/// tprt_attn_dot's order, acc = fmaf(a[d], b[d], acc) from +0.0.
template <int D>
static __device__ __forceinline__ float tprt__att_dot(const float* a, const void* b, int64_t off, int64_t n) {
  float acc = 0.0f;
  for (int64_t d = 0; d < n; ++d) acc = __fmaf_rn(a[d], tprt__cuda_ld(b, D, off + d), acc);
  return acc;
}

/// The keys (or values) of one sequence and kv head: the first |past| from a KV cache's rows at
/// |cache_row0|, then the call's own rows at |row0|; |w| is the row width (both tensors have it)
/// and |col| the head's first column. Without a cache |past| is 0.
struct tprt__att_rows_t {
  const void* own;
  const void* cache;
  int64_t row0, cache_row0, past, w, col;
  /// Key j's tensor, with its first element's offset in *off.
  __device__ __forceinline__ const void* row(int64_t j, int64_t* off) const {
    if (j < past) {
      *off = (cache_row0 + j) * w + col;
      return cache;
    }
    *off = (row0 + j - past) * w + col;
    return own;
  }
};

/// The scores of query row |q_row| (widened, |hd| floats) against keys [0, n) of |keys| into s[j],
/// and the block's softmax statistics: m, e[j] =
/// exp(s_j - m) in place and l (returned in *out_l, to every thread). Thread t owns keys t, t+256, ...
/// throughout, so s and e need no barrier between the two phases.
template <int D>
static __device__ __forceinline__ float tprt__att_softmax(const float* q_row, const tprt__att_rows_t& keys,
                                                          int64_t hd, int64_t n, float sc, float* s,
                                                          tprt__att_max_t* msm, float* rsm, float* out_l) {
  tprt__att_max_t mine = {0.0f, -1};
  float first = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += TPRT__ATT_THREADS) {
    int64_t off;
    const void* kj = keys.row(j, &off);
    const float sj = __fmul_rn(tprt__att_dot<D>(q_row, kj, off, hd), sc);
    s[j] = sj;
    if (j == 0) first = sj;
    if (!isnan(sj) && (mine.i < 0 || sj > mine.v)) mine = {sj, (long long)j};
  }
  const float m = tprt__att_block_max(mine, first, msm);
  float lane = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += TPRT__ATT_THREADS) {
    const float e = tprt_expf(__fsub_rn(s[j], m));
    s[j] = e;
    lane = __fadd_rn(lane, e);
  }
  *out_l = tprt__cuda_row_tree(lane, rsm);  // ends with barriers: e[] is visible to the block
  return m;
}

/// A per-block f32 vector region: dynamic shared memory when |in_smem|, else the block's slice of
/// the workspace |ws| (|stride| floats per block).
extern __shared__ float tprt__att_smem[];
static __device__ __forceinline__ float* tprt__att_vectors(int in_smem, float* ws, int64_t stride) {
  return in_smem ? tprt__att_smem : ws + (int64_t)blockIdx.x * stride;
}

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

/// rope: |pairs| = T·W/2 rotated pairs, pair p in row p / (W/2), head (p % (W/2)) / (D/2), index
/// i = p % (D/2).
template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__rope_kernel(const void* __restrict__ x, const void* __restrict__ cs, const void* __restrict__ sn,
                      int cs_dtype, void* __restrict__ y, int64_t pairs, int64_t w, int64_t hd, int inverse) {
  const int64_t half = hd / 2, row_pairs = w / 2, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
    const int64_t r = p / row_pairs, c = p % row_pairs, head = c / half, i = c % half;
    const int64_t xa = r * w + head * hd + i, ta = r * hd + i;
    float ya, yb;
    tprt_rope_pair(tprt__cuda_ld(x, D, xa), tprt__cuda_ld(x, D, xa + half), tprt__cuda_ld(cs, cs_dtype, ta),
                   tprt__cuda_ld(cs, cs_dtype, ta + half), tprt__cuda_ld(sn, cs_dtype, ta),
                   tprt__cuda_ld(sn, cs_dtype, ta + half), inverse, &ya, &yb);
    tprt__cuda_st(y, D, xa, ya);
    tprt__cuda_st(y, D, xa + half, yb);
  }
}

/// rope on runs of kVec consecutive pairs of one head (16 bytes of x at each end of the rotation):
/// the same per-pair arithmetic as tprt__rope_kernel, 16-byte loads and stores of x and y, and
/// kVec times fewer threads (the scalar kernel ran one pair per thread, bound by memory latency).
/// |runs| = T·W/2/kVec; needs D/2 a multiple of kVec and 16-byte aligned x and y. |cs_vec|: cos and
/// sin have x's element size and 16-byte alignment, so their kVec values of a run are 16-byte loads
/// too (else one load per value); the values, and so the bits, are the same.
template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__rope_runs_kernel(const void* __restrict__ x, const void* __restrict__ cs, const void* __restrict__ sn,
                           int cs_dtype, void* __restrict__ y, int64_t runs, int64_t w, int64_t hd, int inverse,
                           int cs_vec) {
  constexpr int kVec = TPRT__CUDA_VEC16(D);
  const int64_t half = hd / 2, head_runs = half / kVec, row_runs = w / 2 / kVec;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const uint4* xv = static_cast<const uint4*>(x);
  uint4* yv = static_cast<uint4*>(y);
  for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < runs; v += stride) {
    const int64_t r = v / row_runs, c = v % row_runs, head = c / head_runs, i = (c % head_runs) * kVec;
    const int64_t xa = r * w + head * hd + i, ta = r * hd + i;
    const uint4 va = xv[xa / kVec], vb = xv[(xa + half) / kVec];
    uint4 oa, ob;
    if (cs_vec) {
      const uint4 ca = static_cast<const uint4*>(cs)[ta / kVec], cb = static_cast<const uint4*>(cs)[(ta + half) / kVec];
      const uint4 sa = static_cast<const uint4*>(sn)[ta / kVec], sb = static_cast<const uint4*>(sn)[(ta + half) / kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        float ya, yb;
        tprt_rope_pair(tprt__cuda_ld(&va, D, k), tprt__cuda_ld(&vb, D, k), tprt__cuda_ld(&ca, cs_dtype, k),
                       tprt__cuda_ld(&cb, cs_dtype, k), tprt__cuda_ld(&sa, cs_dtype, k),
                       tprt__cuda_ld(&sb, cs_dtype, k), inverse, &ya, &yb);
        tprt__cuda_st(&oa, D, k, ya);
        tprt__cuda_st(&ob, D, k, yb);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        float ya, yb;
        tprt_rope_pair(tprt__cuda_ld(&va, D, k), tprt__cuda_ld(&vb, D, k), tprt__cuda_ld(cs, cs_dtype, ta + k),
                       tprt__cuda_ld(cs, cs_dtype, ta + half + k), tprt__cuda_ld(sn, cs_dtype, ta + k),
                       tprt__cuda_ld(sn, cs_dtype, ta + half + k), inverse, &ya, &yb);
        tprt__cuda_st(&oa, D, k, ya);
        tprt__cuda_st(&ob, D, k, yb);
      }
    }
    yv[xa / kVec] = oa;
    yv[(xa + half) / kVec] = ob;
  }
}

/// The shape of an attention call, as the kernels read it.
struct tprt__att_shape_t {
  int64_t t, seq_len, hd, hq, hkv, group;  // tokens, S, D, query heads, kv heads, Hq / Hkv
  int causal;
  float sc;  // the scale in use (tprt_attn_scale)
  // A KV cache (forward only): rows per sequence, each sequence's cached count; NULL k_cache: none.
  const void *k_cache, *v_cache;
  const int32_t* cache_len;
  int64_t cache_rows;
};

/// Forward: one block per row (token, query head). |ws| holds each block's S scores, then (when
/// q_i does not fit shared memory) its widened q_i.
template <int D>
static __global__ void __launch_bounds__(TPRT__ATT_THREADS)
    tprt__attention_kernel(const void* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v,
                           void* __restrict__ y, float* __restrict__ lse, tprt__att_shape_t sh, float* __restrict__ ws,
                           int vec_in_smem) {
  __shared__ tprt__att_max_t msm[TPRT__ATT_THREADS / TPRT__ATT_WARP + 1];
  __shared__ float rsm[TPRT__ATT_THREADS / TPRT__ATT_WARP + 1];
  const int64_t qw = sh.hq * sh.hd, kw = sh.hkv * sh.hd, rows = sh.t * sh.hq, keys_max = sh.cache_rows + sh.seq_len;
  float* e = ws + (int64_t)blockIdx.x * keys_max;
  float* qv = tprt__att_vectors(vec_in_smem, ws + (int64_t)gridDim.x * keys_max, sh.hd);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t tok = row / sh.hq, h = row % sh.hq, i = tok % sh.seq_len, row0 = tok - i, g = h / sh.group;
    // With a cache, the sequence's cached tokens come first (cache_len clamped to the cache's rows;
    // the CPU backend refuses such values, a kernel cannot).
    const int64_t b = tok / sh.seq_len;
    int64_t past = sh.k_cache ? (int64_t)sh.cache_len[b] : 0;
    past = past < 0 ? 0 : past > sh.cache_rows ? sh.cache_rows : past;
    const tprt__att_rows_t keys = {k, sh.k_cache, row0, b * sh.cache_rows, past, kw, g * sh.hd};
    const tprt__att_rows_t vals = {v, sh.v_cache, row0, b * sh.cache_rows, past, kw, g * sh.hd};
    const int64_t n = past + tprt_attn_visible(i, sh.seq_len, sh.causal);
    for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS)
      qv[d] = tprt__cuda_ld(q, D, tok * qw + h * sh.hd + d);
    __syncthreads();
    float l;
    const float m = tprt__att_softmax<D>(qv, keys, sh.hd, n, sh.sc, e, msm, rsm, &l);
    if (lse && threadIdx.x == 0) lse[tok * sh.hq + h] = tprt_attn_lse(m, l);
    for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS) {
      float o = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        int64_t off;
        const void* vj = vals.row(j, &off);
        o = __fmaf_rn(e[j], tprt__cuda_ld(vj, D, off + d), o);
      }
      tprt__cuda_st(y, D, tok * qw + h * sh.hd + d, __fdiv_rn(o, l));
    }
    __syncthreads();  // e and qv are rewritten by the next row
  }
}

/// Backward, kernel 1: one block per row (token, query head): dq and the row's statistics m, l,
/// Di into stats[0..rows), stats[rows..2 rows), stats[2 rows..3 rows). |ws|: each block's S floats
/// (e, then ds), then (when they do not fit shared memory) its widened q_i and dy_i.
template <int D>
static __global__ void __launch_bounds__(TPRT__ATT_THREADS)
    tprt__attention_grad_rows(const void* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v,
                              const void* __restrict__ y, const void* __restrict__ dy, void* __restrict__ dq,
                              tprt__att_shape_t sh, float* __restrict__ stats, float* __restrict__ ws,
                              int vec_in_smem) {
  __shared__ tprt__att_max_t msm[TPRT__ATT_THREADS / TPRT__ATT_WARP + 1];
  __shared__ float rsm[TPRT__ATT_THREADS / TPRT__ATT_WARP + 1];
  __shared__ float di_sm;
  const int64_t qw = sh.hq * sh.hd, kw = sh.hkv * sh.hd, rows = sh.t * sh.hq;
  float* e = ws + (int64_t)blockIdx.x * sh.seq_len;
  float* qv = tprt__att_vectors(vec_in_smem, ws + (int64_t)gridDim.x * sh.seq_len, 2 * sh.hd);
  float* dyv = qv + sh.hd;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t tok = row / sh.hq, h = row % sh.hq, i = tok % sh.seq_len, row0 = tok - i, g = h / sh.group;
    const int64_t n = tprt_attn_visible(i, sh.seq_len, sh.causal), qoff = tok * qw + h * sh.hd;
    for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS) {
      qv[d] = tprt__cuda_ld(q, D, qoff + d);
      dyv[d] = tprt__cuda_ld(dy, D, qoff + d);
    }
    __syncthreads();
    if (threadIdx.x == 0) di_sm = tprt__att_dot<D>(dyv, y, qoff, sh.hd);  // Di = dot(dy_i, y_i)
    float l;
    const tprt__att_rows_t keys = {k, NULL, row0, 0, 0, kw, g * sh.hd};
    const float m = tprt__att_softmax<D>(qv, keys, sh.hd, n, sh.sc, e, msm, rsm, &l);  // barriers: di_sm
    const float di = di_sm;
    for (int64_t j = threadIdx.x; j < n; j += TPRT__ATT_THREADS) {
      const float p = __fdiv_rn(e[j], l);
      const float dp = tprt__att_dot<D>(dyv, v, (row0 + j) * kw + g * sh.hd, sh.hd);
      e[j] = __fmul_rn(p, __fsub_rn(dp, di));  // ds_j
    }
    __syncthreads();
    for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS) {
      float a = 0.0f;
      for (int64_t j = 0; j < n; ++j) a = __fmaf_rn(e[j], tprt__cuda_ld(k, D, (row0 + j) * kw + g * sh.hd + d), a);
      tprt__cuda_st(dq, D, qoff + d, __fmul_rn(sh.sc, a));
    }
    if (threadIdx.x == 0) {
      stats[row] = m;
      stats[rows + row] = l;
      stats[2 * rows + row] = di;
    }
    __syncthreads();  // e, qv, dyv and di_sm are rewritten by the next row
  }
}

/// Backward, kernel 2: one block per key (sequence, kv head g, key j): dk_j and dv_j from the
/// statistics of kernel 1. Per-block vectors k_j, v_j and the two accumulators (4·D floats) are in
/// shared memory or |ws|.
template <int D>
static __global__ void __launch_bounds__(TPRT__ATT_THREADS)
    tprt__attention_grad_keys(const void* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v,
                              const void* __restrict__ dy, void* __restrict__ dk, void* __restrict__ dv,
                              tprt__att_shape_t sh, const float* __restrict__ stats, float* __restrict__ ws,
                              int vec_in_smem) {
  __shared__ float p_sm[TPRT__ATT_THREADS], ds_sm[TPRT__ATT_THREADS];  // one chunk of queries
  const int64_t qw = sh.hq * sh.hd, kw = sh.hkv * sh.hd, rows = sh.t * sh.hq, keys = sh.t * sh.hkv;
  float* kv = tprt__att_vectors(vec_in_smem, ws, 4 * sh.hd);
  float *vv = kv + sh.hd, *acc_k = vv + sh.hd, *acc_v = acc_k + sh.hd;
  for (int64_t key = blockIdx.x; key < keys; key += gridDim.x) {
    // key = (sequence · Hkv + g) · S + j
    const int64_t j = key % sh.seq_len, g = (key / sh.seq_len) % sh.hkv,
                  row0 = (key / sh.seq_len / sh.hkv) * sh.seq_len;
    const int64_t koff = (row0 + j) * kw + g * sh.hd;
    for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS) {
      kv[d] = tprt__cuda_ld(k, D, koff + d);
      vv[d] = tprt__cuda_ld(v, D, koff + d);
      acc_k[d] = 0.0f;  // thread t owns columns t, t+256, ... of the accumulators throughout
      acc_v[d] = 0.0f;
    }
    __syncthreads();
    for (int64_t h = g * sh.group; h < (g + 1) * sh.group; ++h) {
      // The queries that see key j: i >= j when causal, else all, in increasing order.
      for (int64_t i0 = sh.causal ? j : 0; i0 < sh.seq_len; i0 += TPRT__ATT_THREADS) {
        const int64_t i = i0 + threadIdx.x;
        if (i < sh.seq_len) {
          const int64_t row = (row0 + i) * sh.hq + h, qoff = (row0 + i) * qw + h * sh.hd;
          const float s = __fmul_rn(tprt__att_dot<D>(kv, q, qoff, sh.hd), sh.sc);  // fmaf(k, q) = fmaf(q, k)
          const float p = __fdiv_rn(tprt_expf(__fsub_rn(s, stats[row])), stats[rows + row]);
          const float dp = tprt__att_dot<D>(vv, dy, qoff, sh.hd);
          p_sm[threadIdx.x] = p;
          ds_sm[threadIdx.x] = __fmul_rn(p, __fsub_rn(dp, stats[2 * rows + row]));
        }
        __syncthreads();
        const int64_t count = sh.seq_len - i0 < TPRT__ATT_THREADS ? sh.seq_len - i0 : TPRT__ATT_THREADS;
        for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS) {
          float ak = acc_k[d], av = acc_v[d];
          for (int64_t c = 0; c < count; ++c) {
            const int64_t qoff = (row0 + i0 + c) * qw + h * sh.hd + d;
            ak = __fmaf_rn(ds_sm[c], tprt__cuda_ld(q, D, qoff), ak);
            av = __fmaf_rn(p_sm[c], tprt__cuda_ld(dy, D, qoff), av);
          }
          acc_k[d] = ak;
          acc_v[d] = av;
        }
        __syncthreads();  // p_sm and ds_sm are rewritten by the next chunk
      }
    }
    for (int64_t d = threadIdx.x; d < sh.hd; d += TPRT__ATT_THREADS) {
      tprt__cuda_st(dk, D, koff + d, __fmul_rn(sh.sc, acc_k[d]));
      tprt__cuda_st(dv, D, koff + d, acc_v[d]);
    }
    __syncthreads();  // kv, vv and the accumulators are rewritten by the next key
  }
}

// ------------------------------------------------------------------------------------------------
// Kernel launchers
// ------------------------------------------------------------------------------------------------

/// Blocks of the row and key kernels for |items| > 0 rows or keys.
static unsigned tprt__att_blocks(int64_t items) {
  return (unsigned)(items < TPRT__ATT_MAX_BLOCKS ? items : TPRT__ATT_MAX_BLOCKS);
}

/// The per-block vectors of |floats| floats: shared memory bytes (0 when they go to the workspace)
/// and workspace floats for |blocks| blocks.
static void tprt__att_vector_place(int64_t floats, unsigned blocks, size_t* smem, int64_t* ws_floats, int* in_smem) {
  const size_t bytes = (size_t)floats * sizeof(float);
  *in_smem = bytes <= TPRT__ATT_SMEM_BYTES;
  *smem = *in_smem ? bytes : 0;
  *ws_floats = *in_smem ? 0 : floats * (int64_t)blocks;
}

template <int D>
static void tprt__rope_launch(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                              tprt_tensor_t* y, int64_t pairs, int inverse, cudaStream_t stream) {
  constexpr int kVec = TPRT__CUDA_VEC16(D);
  if ((cos_t->dims[1] / 2) % kVec == 0 && tprt__cuda_aligned16(x->data, y->data, y->data)) {
    const int64_t runs = pairs / kVec;
    // cos/sin as 16-byte runs when their elements are x's size (bf16/f16 cos for bf16/f16 x, or
    // f32 for f32): a 16-byte load holds kVec of them.
    const int cs_vec = tprt_dtype_bytes(cos_t->dtype, 1) == tprt_dtype_bytes(x->dtype, 1) &&
                       tprt__cuda_aligned16(cos_t->data, sin_t->data, sin_t->data);
    tprt__rope_runs_kernel<D><<<tprt__cuda_ew_blocks(runs, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0, stream>>>(
        x->data, cos_t->data, sin_t->data, cos_t->dtype, y->data, runs, x->dims[1], cos_t->dims[1], inverse, cs_vec);
    return;
  }
  tprt__rope_kernel<D><<<tprt__cuda_ew_blocks(pairs, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0, stream>>>(
      x->data, cos_t->data, sin_t->data, cos_t->dtype, y->data, pairs, x->dims[1], cos_t->dims[1], inverse);
}

extern "C" tprt_status_t tprt_cuda_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                                        tprt_tensor_t* y, bool inverse, cudaStream_t stream) {
  tprt_status_t s = tprt__check_rope(x, cos_t, sin_t, y);
  if (s) return s;
  const int64_t pairs = x->dims[0] * (x->dims[1] / 2);
  if (pairs == 0) return NULL;
  tprt__cuda_float_dispatch(
      x->dtype, [&](auto d) { tprt__rope_launch<decltype(d)::value>(x, cos_t, sin_t, y, pairs, inverse, stream); });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

static tprt__att_shape_t tprt__att_shape(const tprt_tensor_t* q, const tprt_tensor_t* k, int64_t seq_len,
                                         int64_t head_dim, bool causal, float scale) {
  tprt__att_shape_t sh;
  sh.t = q->dims[0];
  sh.seq_len = seq_len;
  sh.hd = head_dim;
  sh.hq = q->dims[1] / head_dim;
  sh.hkv = k->dims[1] / head_dim;
  sh.group = sh.hq / sh.hkv;
  sh.causal = causal;
  sh.sc = tprt_attn_scale(scale, head_dim);  // the host's 1/sqrtf(D): the same IEEE operations
  sh.k_cache = sh.v_cache = NULL;
  sh.cache_len = NULL;
  sh.cache_rows = 0;
  return sh;
}

template <int D>
static void tprt__attention_launch(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                   tprt_tensor_t* y, tprt_tensor_t* lse, const tprt__att_shape_t& sh, unsigned blocks,
                                   float* ws, size_t smem, int in_smem, cudaStream_t stream) {
  tprt__attention_kernel<D><<<blocks, TPRT__ATT_THREADS, smem, stream>>>(
      q->data, k->data, v->data, y->data, lse ? (float*)lse->data : NULL, sh, ws, in_smem);
}

extern "C" tprt_status_t tprt_cuda_attention(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                             const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse,
                                             int64_t seq_len, int64_t head_dim, bool causal, float scale,
                                             cudaStream_t stream) {
  tprt_status_t s = tprt__check_attention("attention", q, k, v, y, NULL, NULL, NULL, NULL, seq_len, head_dim, scale);
  if (!s) s = tprt__check_kv_cache("attention", q, k, cache, seq_len);
  if (!s) s = tprt__check_lse("attention", q, lse, head_dim);
  if (s) return s;
  tprt__att_shape_t sh = tprt__att_shape(q, k, seq_len, head_dim, causal, scale);
  if (sh.t == 0 || sh.hq == 0) return NULL;
  if (cache) {
    sh.k_cache = cache->k->data;
    sh.v_cache = cache->v->data;
    sh.cache_len = (const int32_t*)cache->len->data;
    sh.cache_rows = tprt__cache_rows(cache, sh.t / seq_len);
  }
  const unsigned blocks = tprt__att_blocks(sh.t * sh.hq);
  size_t smem;
  int64_t vec_floats;
  int in_smem;
  tprt__att_vector_place(sh.hd, blocks, &smem, &vec_floats, &in_smem);
  float* ws = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(
      (void**)&ws, (size_t)((int64_t)blocks * (sh.cache_rows + sh.seq_len) + vec_floats) * sizeof(float), stream));
  tprt__cuda_float_dispatch(q->dtype, [&](auto d) {
    tprt__attention_launch<decltype(d)::value>(q, k, v, y, lse, sh, blocks, ws, smem, in_smem, stream);
  });
  cudaError_t e = cudaGetLastError();
  tprt__cuda_free_async(ws, stream);
  if (e != cudaSuccess) return tprt__cuda_make_status(e, "attention kernel", __FILE__, __LINE__);
  return NULL;
}

template <int D>
static void tprt__attention_grad_launch(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                        const tprt_tensor_t* y, const tprt_tensor_t* dy, tprt_tensor_t* dq,
                                        tprt_tensor_t* dk, tprt_tensor_t* dv, const tprt__att_shape_t& sh,
                                        unsigned row_blocks, unsigned key_blocks, float* stats, float* row_ws,
                                        float* key_ws, size_t row_smem, int row_in_smem, size_t key_smem,
                                        int key_in_smem, cudaStream_t stream) {
  tprt__attention_grad_rows<D><<<row_blocks, TPRT__ATT_THREADS, row_smem, stream>>>(
      q->data, k->data, v->data, y->data, dy->data, dq->data, sh, stats, row_ws, row_in_smem);
  tprt__attention_grad_keys<D><<<key_blocks, TPRT__ATT_THREADS, key_smem, stream>>>(
      q->data, k->data, v->data, dy->data, dk->data, dv->data, sh, stats, key_ws, key_in_smem);
}

extern "C" tprt_status_t tprt_cuda_attention_grad(const tprt_tensor_t* q, const tprt_tensor_t* k,
                                                  const tprt_tensor_t* v, const tprt_tensor_t* y,
                                                  const tprt_tensor_t* dy, const tprt_tensor_t* lse, tprt_tensor_t* dq,
                                                  tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                                  int64_t head_dim, bool causal, float scale, cudaStream_t stream) {
  if (!dy || !dq || !dk || !dv)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "attention_grad: dy, dq, dk and dv must not be NULL");
  tprt_status_t s = tprt__check_attention("attention_grad", q, k, v, y, dy, dq, dk, dv, seq_len, head_dim, scale);
  // As on the CPU, the exact backward recomputes the statistics: lse is checked only.
  if (!s) s = tprt__check_lse("attention_grad", q, lse, head_dim);
  if (s) return s;
  const tprt__att_shape_t sh = tprt__att_shape(q, k, seq_len, head_dim, causal, scale);
  if (sh.t == 0 || sh.hq == 0) return NULL;
  const int64_t rows = sh.t * sh.hq;
  const unsigned row_blocks = tprt__att_blocks(rows), key_blocks = tprt__att_blocks(sh.t * sh.hkv);
  size_t row_smem, key_smem;
  int64_t row_vec, key_vec;
  int row_in_smem, key_in_smem;
  tprt__att_vector_place(2 * sh.hd, row_blocks, &row_smem, &row_vec, &row_in_smem);
  tprt__att_vector_place(4 * sh.hd, key_blocks, &key_smem, &key_vec, &key_in_smem);
  // One workspace: the rows' statistics (3 floats a row), the row kernel's scores and vectors,
  // the key kernel's vectors.
  const int64_t row_ws = (int64_t)row_blocks * sh.seq_len + row_vec;
  float* stats = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(
      tprt__cuda_malloc_async((void**)&stats, (size_t)(3 * rows + row_ws + key_vec) * sizeof(float), stream));
  float *rws = stats + 3 * rows, *kws = rws + row_ws;
  tprt__cuda_float_dispatch(q->dtype, [&](auto d) {
    tprt__attention_grad_launch<decltype(d)::value>(q, k, v, y, dy, dq, dk, dv, sh, row_blocks, key_blocks, stats, rws,
                                                    kws, row_smem, row_in_smem, key_smem, key_in_smem, stream);
  });
  cudaError_t e = cudaGetLastError();
  tprt__cuda_free_async(stats, stream);
  if (e != cudaSuccess) return tprt__cuda_make_status(e, "attention_grad kernels", __FILE__, __LINE__);
  return NULL;
}
