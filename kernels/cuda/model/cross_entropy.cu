// The LM head's cross-entropy in every numerics mode (docs/numerics.md, "Cross-entropy"): three
// GEMMs and four small kernels, over pieces of tokens so that this rank's [T, V] logits are never
// held whole (at most TPRT__CE_PIECE_BYTES of them at a time, or the gemms' piece_bytes):
//   logits  Z[piece, V] = x·wᵀ rounded to x's dtype, by the gemms' linear (the backend passes its
//           kernel table: cuBLASLt in fast mode, the chunk-tree WGMMA GEMM in invariant mode);
//   stats   per token and vocabulary block: the block's maximum (tprt_max_keep) and its sum of
//           exp(z - max) from +0.0 in increasing v (the exponentials by a block of threads, the
//           additions by a lane per (token, block)); then per token
//           the blocks' pairwise tree (tprt_ce_tree) and the target's logit;
//   combine per token: the ranks' statistics by the same tree, lse = m + log(s), loss = lse - z_t;
//   dgrad   dZ = the logit gradient (tprt_ce_dlogit) rounded to x's dtype, then dx[piece] = dZ·w over
//           V with |vocab_chunks| (a token's row needs no other token: any piece size);
//   wgrad   the same dZ, then dw = dZᵀ·x over the tokens with |token_chunks|: a piece is 2^j whole
//           chunks, aligned, so its f32 result is one node of the chunk tree, and the pieces' nodes
//           are added by the tree's upper levels (when the chunks divide T; else one piece);
//   grad    both gradients from one dZ per piece (the wgrad's pieces): one logits GEMM, not two;
//   with_grad the loss too: per piece, the logits, their statistics, the combine (one shard: the
//           whole vocabulary), then dZ and both gradients from the same logits.
// With the exact GEMMs (gemms NULL) every op is bitwise the CPU kernels of cpu_vocab.c, whatever
// the pieces. gemms->math (tprt_cuda_ce_math_t) INVARIANT takes each (token, vocabulary block)'s
// statistics as one thread block's online maximum and sum of __expf in a fixed order
// (tprt__ce_online: it depends only on the block's length, so a vocabulary shard of whole blocks, a
// piece size or a batch never changes them) and the logit gradient with __expf; FAST takes a token's
// statistics over its whole row at once (the same [T,3] (m, s, z_t) for the combine, no vocabulary
// blocks), no bitwise promise, and with gemms->wgrad_acc its pieces add their dw into dw itself.
// The targets' values are not checked on the host.
#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

// Block b's maximum and sum of exponentials of token t's logits: bm/bs[t * blocks + b]. A thread
// block takes 32 tokens and one vocabulary block. First each warp reduces whole rows to their
// maximum, lanes over the columns (tprt_max_keep is a total order: any order gives the one
// maximum). Then, tile by tile of kTprtCeTile columns, every thread computes its share of the
// tile's exp(z - max) into shared memory (two buffers), and warp 0's lane r adds row r's in
// increasing v: the sequential sum of the CPU kernel, bit for bit, with the exponentials (the
// work) spread over the four warps and only the additions in one lane per token.
constexpr int kTprtCeTile = 64;
constexpr int kTprtCeWarps = 4;
template <int D>
__global__ void __launch_bounds__(32 * kTprtCeWarps)
    tprt__ce_block_stats(const void* __restrict__ z, int64_t t, int64_t v, int blocks, int64_t size,
                         float* __restrict__ bm, float* __restrict__ bs) {
  __shared__ float tile[2][32][kTprtCeTile + 1];
  __shared__ float mx[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t items = (t + 31) / 32 * blocks;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t tok0 = item / blocks * 32;
    const int b = (int)(item % blocks), n = t - tok0 < 32 ? (int)(t - tok0) : 32;
    int64_t v0 = b * size, v1 = v0 + size;
    if (v0 > v) v0 = v;
    if (v1 > v) v1 = v;
    for (int r = warp; r < n; r += kTprtCeWarps) {
      const int64_t at = (tok0 + r) * v;
      float m = -INFINITY;
#pragma unroll 8
      for (int64_t c = v0 + lane; c < v1; c += 32) m = tprt_max_keep(m, tprt__cuda_ld(z, D, at + c));
      for (int off = 16; off > 0; off /= 2) m = tprt_max_keep(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
      if (lane == 0) mx[r] = m;
    }
    __syncthreads();
    // Rows 8·warp .. 8·warp + 7 of each tile, columns lane and lane + 32; the next tile's values
    // are loaded into registers while this tile's sums run.
    constexpr int kRows = 32 / kTprtCeWarps;
    float lo[kRows], hi[kRows];
    auto load = [&](int64_t c0) {
      const int cols = v1 - c0 < kTprtCeTile ? (int)(v1 - c0) : kTprtCeTile;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = warp * kRows + i;
        const int64_t at = (tok0 + r) * v + c0;
        lo[i] = r < n && lane < cols ? tprt__cuda_ld(z, D, at + lane) : 0.0f;
        hi[i] = r < n && lane + 32 < cols ? tprt__cuda_ld(z, D, at + lane + 32) : 0.0f;
      }
    };
    if (v0 < v1) load(v0);
    float s = 0.0f;
    int k = 0;
    for (int64_t c0 = v0; c0 < v1; c0 += kTprtCeTile, ++k) {
      const int cols = v1 - c0 < kTprtCeTile ? (int)(v1 - c0) : kTprtCeTile;
      float(*buf)[kTprtCeTile + 1] = tile[k & 1];
      // Buffer k & 1 was last read at tile k - 2, before the barrier of tile k - 1.
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = warp * kRows + i;
        const float m = r < n ? mx[r] : 0.0f;
        buf[r][lane] = r < n && lane < cols ? tprt_expf(lo[i] - m) : 0.0f;
        buf[r][lane + 32] = r < n && lane + 32 < cols ? tprt_expf(hi[i] - m) : 0.0f;
      }
      if (c0 + kTprtCeTile < v1) load(c0 + kTprtCeTile);
      __syncthreads();
      if (warp == 0 && lane < n) {
#pragma unroll 16
        for (int c = 0; c < cols; ++c) s = s + buf[lane][c];
      }
    }
    if (warp == 0 && lane < n) {
      bm[(tok0 + lane) * blocks + b] = mx[lane];
      bs[(tok0 + lane) * blocks + b] = s;
    }
    __syncthreads();  // mx and the tiles are the next item's
  }
}

template <int D>
__global__ void tprt__ce_token_stats(const void* __restrict__ z, const int32_t* __restrict__ targets, int64_t t,
                                     int64_t v, int blocks, int64_t start, float* __restrict__ bm,
                                     float* __restrict__ bs, float* __restrict__ out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t tok = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; tok < t; tok += stride) {
    tprt_ce_tree(bm + tok * blocks, bs + tok * blocks, blocks);
    int64_t local = (int64_t)targets[tok] - start;
    out[tok * 3 + 0] = bm[tok * blocks];
    out[tok * 3 + 1] = bs[tok * blocks];
    out[tok * 3 + 2] = targets[tok] >= 0 && local >= 0 && local < v ? tprt__cuda_ld(z, D, tok * v + local) : -0.0f;
  }
}

__global__ void tprt__ce_combine(const float* __restrict__ st, const int32_t* __restrict__ targets, int64_t t, int r,
                                 float* __restrict__ work, float* __restrict__ loss, float* __restrict__ lse) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t tok = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; tok < t; tok += stride) {
    float *m = work + tok * 2 * r, *s = m + r;
    float zt = -0.0f;
    for (int q = 0; q < r; ++q) {
      m[q] = st[tok * 3 * r + 3 * q];
      s[q] = st[tok * 3 * r + 3 * q + 1];
      zt = zt + st[tok * 3 * r + 3 * q + 2];
    }
    tprt_ce_tree(m, s, r);
    float l = m[0] + tprt_logf(s[0]);
    lse[tok] = l;
    loss[tok] = targets[tok] < 0 ? 0.0f : l - zt;
  }
}

// The online statistics of INVARIANT and FAST math: one 256-thread block's maximum and sum of
// __expf(z - max) over row[v0, v1) (D elements). Thread i takes pairs of groups of kVec consecutive
// elements, v0 + kVec·i and v0 + kVec·(i + 256), then v0 + kVec·(i + 512) and v0 + kVec·(i + 768),
// ... (one 16-byte load per group where the groups are aligned), takes each pair's maximum and sum
// of exponentials and merges them into its running pair (the sum rescaled when the maximum grows); then the lanes merge by a fixed xor tree and the warps in
// increasing order. Which element meets which in that order depends only on v1 - v0: the bits are
// the same wherever the elements lie (a shard's block, a piece's token). tprt_max_keep, so a NaN
// logit gives a NaN maximum and sum. The pair is returned in thread 0; |sm| holds [2][8] floats.
constexpr int kTprtCeFastThreads = 256;
static __device__ __forceinline__ void tprt__ce_merge(float* m, float* s, float m2, float s2) {
  const float mm = tprt_max_keep(*m, m2);
  const float a = *m == -INFINITY ? 0.0f : *s * __expf(*m - mm), b = m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm);
  *m = mm;
  *s = a + b;
}
template <int D>
static __device__ __forceinline__ void tprt__ce_online(const char* row, int64_t v0, int64_t v1,
                                                       float (*sm)[kTprtCeFastThreads / 32], float* om, float* os) {
  constexpr int kBytes = D == TPRT_DTYPE_F32 ? 4 : 2, kVec = 16 / kBytes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const char* base = row + v0 * kBytes;
  const int64_t len = v1 - v0;
  const bool vec = len % kVec == 0 && ((uintptr_t)base & 15) == 0;
  float m = -INFINITY, s = 0.0f;
  // Two groups per step (the second 256 groups further), both loads in flight before either is
  // used, one merge per pair.
  for (int64_t j0 = (int64_t)threadIdx.x * kVec; j0 < len; j0 += (int64_t)2 * kTprtCeFastThreads * kVec) {
    float x[2 * kVec];
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const int64_t j = j0 + (int64_t)g * kTprtCeFastThreads * kVec;
      if (vec && j < len) {
        const uint4 raw = *(const uint4*)(base + j * kBytes);
#pragma unroll
        for (int e = 0; e < kVec; ++e) x[g * kVec + e] = tprt_load_elem(&raw, D, e);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) x[g * kVec + e] = j + e < len ? tprt_load_elem(base, D, j + e) : -INFINITY;
      }
    }
    float lm = x[0];
#pragma unroll
    for (int e = 1; e < 2 * kVec; ++e) lm = tprt_max_keep(lm, x[e]);
    float ls = 0.0f;
    if (lm != -INFINITY) {
#pragma unroll
      for (int e = 0; e < 2 * kVec; ++e) ls += __expf(x[e] - lm);
    }
    tprt__ce_merge(&m, &s, lm, ls);
  }
  for (int off = 16; off > 0; off /= 2)
    tprt__ce_merge(&m, &s, __shfl_xor_sync(0xFFFFFFFFu, m, off), __shfl_xor_sync(0xFFFFFFFFu, s, off));
  if (lane == 0) sm[0][warp] = m, sm[1][warp] = s;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kTprtCeFastThreads / 32; ++w) tprt__ce_merge(&m, &s, sm[0][w], sm[1][w]);
  *om = m, *os = s;
  __syncthreads();  // sm is the next call's
}

// FAST: token t's (m, s, z_t) over its whole row, one thread block per token (grid stride).
template <int D>
__global__ void __launch_bounds__(kTprtCeFastThreads)
    tprt__ce_row_stats_fast(const void* __restrict__ z, const int32_t* __restrict__ targets, int64_t t, int64_t v,
                            int64_t start, float* __restrict__ out) {
  constexpr int kBytes = D == TPRT_DTYPE_F32 ? 4 : 2;
  __shared__ float sm[2][kTprtCeFastThreads / 32];
  for (int64_t tok = blockIdx.x; tok < t; tok += gridDim.x) {
    const char* row = (const char*)z + tok * v * kBytes;
    float m, s;
    tprt__ce_online<D>(row, 0, v, sm, &m, &s);
    if (threadIdx.x == 0) {
      const int64_t local = (int64_t)targets[tok] - start;
      out[tok * 3 + 0] = m;
      out[tok * 3 + 1] = s;
      out[tok * 3 + 2] = targets[tok] >= 0 && local >= 0 && local < v ? tprt_load_elem(row, D, local) : -0.0f;
    }
  }
}

// INVARIANT: block b's (m, s) of token t, bm/bs[t * blocks + b], one thread block per (token, block)
// (grid stride); tprt__ce_token_stats then takes the blocks' tree and the target's logit.
template <int D>
__global__ void __launch_bounds__(kTprtCeFastThreads)
    tprt__ce_block_stats_online(const void* __restrict__ z, int64_t t, int64_t v, int blocks, int64_t size,
                                float* __restrict__ bm, float* __restrict__ bs) {
  constexpr int kBytes = D == TPRT_DTYPE_F32 ? 4 : 2;
  __shared__ float sm[2][kTprtCeFastThreads / 32];
  for (int64_t item = blockIdx.x; item < t * blocks; item += gridDim.x) {
    const int64_t tok = item / blocks;
    const int b = (int)(item % blocks);
    int64_t v0 = b * size, v1 = v0 + size;
    if (v0 > v) v0 = v;
    if (v1 > v) v1 = v;
    float m, s;
    tprt__ce_online<D>((const char*)z + tok * v * kBytes, v0, v1, sm, &m, &s);
    if (threadIdx.x == 0) bm[item] = m, bs[item] = s;
  }
}

// tprt_ce_dlogit, or with kFast its formula with __expf.
template <bool kFast>
static __device__ __forceinline__ float tprt__ce_dlogit_of(float z, float lse, bool target, float g) {
  if (!kFast) return tprt_ce_dlogit(z, lse, target, g);
  const float p = __expf(z - lse);
  return (target ? p - 1.0f : p) * g;
}

// dZ[t, v] from Z in place: the logit's gradient rounded to the dtype (0 for an ignored token). A
// grid row per token (strided), a thread per kTprtCeVec consecutive elements: one 16-byte load and
// store when every row starts 16-byte aligned (|vec|), else element by element.
template <int D, bool kFast>
__global__ void tprt__ce_dlogits(void* __restrict__ z, const int32_t* __restrict__ targets,
                                 const float* __restrict__ lse, const float* __restrict__ dloss, int64_t t, int64_t v,
                                 int64_t start, bool vec) {
  constexpr int kBytes = D == TPRT_DTYPE_F32 ? 4 : 2, kVec = 16 / kBytes;
  for (int64_t tok = blockIdx.y; tok < t; tok += gridDim.y) {
    const int32_t target = targets[tok];
    const float l = lse[tok], g = dloss[tok];
    const int64_t local = (int64_t)target - start;
    char* row = (char*)z + tok * v * kBytes;
    for (int64_t j0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * kVec; j0 < v;
         j0 += (int64_t)gridDim.x * blockDim.x * kVec) {
      if (vec) {
        uint4 raw = *(const uint4*)(row + j0 * kBytes);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float d = target < 0 ? 0.0f : tprt__ce_dlogit_of<kFast>(tprt_load_elem(&raw, D, e), l, local == j0 + e, g);
          tprt_store_elem(&raw, D, e, d);  // the store rounds to the dtype, as the CPU's tprt__round_to
        }
        *(uint4*)(row + j0 * kBytes) = raw;
      } else {
        for (int e = 0; e < kVec && j0 + e < v; ++e) {
          float d = target < 0 ? 0.0f : tprt__ce_dlogit_of<kFast>(tprt_load_elem(row, D, j0 + e), l, local == j0 + e, g);
          tprt_store_elem(row, D, j0 + e, d);
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Launchers
// ------------------------------------------------------------------------------------------------

// The most bytes of logits a piece of tokens holds when the gemms name no budget.
#define TPRT__CE_PIECE_BYTES ((size_t)1 << 30)

// The exact GEMMs (gemm/linear.cu, gemm/linear_grad.c): the default of every op.
static tprt_status_t tprt__ce_exact_linear(void* ctx, const tprt_tensor_t* x, const tprt_tensor_t* w, tprt_tensor_t* y,
                                           int chunks, cudaStream_t stream) {
  (void)ctx;
  return tprt_cuda_linear(x, w, NULL, y, chunks, stream);
}
static tprt_status_t tprt__ce_exact_dgrad(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                          tprt_tensor_t* dx, int chunks, cudaStream_t stream) {
  (void)ctx;
  return tprt_cuda_linear_dgrad_segmented(dy, w, dx, chunks, 1, 1, stream);
}
static tprt_status_t tprt__ce_exact_wgrad(void* ctx, const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                          tprt_tensor_t* dw, int chunks, cudaStream_t stream) {
  (void)ctx;
  return tprt_cuda_linear_wgrad(dy, x, dw, chunks, stream);
}
static const tprt_cuda_ce_gemms_t tprt__ce_exact = {tprt__ce_exact_linear, tprt__ce_exact_dgrad, tprt__ce_exact_wgrad,
                                                    NULL, NULL, 0, TPRT_CUDA_CE_EXACT};

static size_t tprt__ce_budget(const tprt_cuda_ce_gemms_t* g) {
  return g->piece_bytes ? g->piece_bytes : TPRT__CE_PIECE_BYTES;
}

// Rows [r0, r0 + n) of a [rows, cols] tensor, as a view.
static tprt_tensor_t tprt__rows(const tprt_tensor_t* t, int64_t r0, int64_t n) {
  tprt_tensor_t v = *t;
  v.data = (char*)t->data + tprt_dtype_bytes(t->dtype, r0 * t->dims[1]);
  v.dims[0] = n;
  return v;
}

// Tokens per piece: as many as |budget| bytes of [n, v] logits hold, a multiple of 64 where
// more than 64 fit, at least 1, at most t.
static int64_t tprt__ce_piece_rows(int64_t t, int64_t v, int elem, size_t budget) {
  int64_t row = v * elem > 0 ? v * elem : 1;
  int64_t n = (int64_t)(budget / (size_t)row);
  if (n > 64) n -= n % 64;
  if (n < 1) n = 1;
  return n < t ? n : t;
}

static tprt_status_t tprt__ce_check(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                    const tprt_tensor_t* targets, int chunks) {
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 2, TPRT__M(x->dtype));
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (s) return s;
  if (w->dims[1] != x->dims[1] || targets->dims[0] != x->dims[0])
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: x [T,H], w [V,H] and targets [T] disagree", op);
  if (chunks < 1 || chunks > TPRT_MAX_CHUNKS || (chunks & (chunks - 1)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                            TPRT_MAX_CHUNKS, chunks);
  return NULL;
}

static tprt_status_t tprt__launched(const char* what) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? NULL : tprt__cuda_make_status(err, what, __FILE__, __LINE__);
}

// A stream-ordered [rows, v] logits buffer in x's dtype for pieces of up to |rows| tokens.
static tprt_status_t tprt__ce_logits_buffer(const tprt_tensor_t* x, int64_t rows, int64_t v, tprt_tensor_t* z,
                                            cudaStream_t stream) {
  int64_t dims[2] = {rows, v};
  *z = tprt_tensor_make(NULL, x->dtype, 2, dims);
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&z->data, tprt_tensor_bytes(z) + 16, stream));
  return NULL;
}

// The statistics of the n tokens of the logits piece z (stats [n, 3]), |blocks| vocabulary blocks of
// |size|, by |math|; bm and bs hold n·blocks floats each.
static tprt_status_t tprt__ce_piece_stats(const tprt_tensor_t* z, int64_t n, int blocks, int64_t size, int64_t start,
                                          const int32_t* targets, float* bm, float* bs, float* stats,
                                          tprt_cuda_ce_math_t math, cudaStream_t stream) {
  int64_t v = z->dims[1];
  tprt__cuda_float_dispatch(z->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (math == TPRT_CUDA_CE_FAST) {
      tprt__ce_row_stats_fast<D><<<(unsigned)(n < 65535 ? n : 65535), kTprtCeFastThreads, 0, stream>>>(
          z->data, targets, n, v, start, stats);
      return;
    }
    if (math == TPRT_CUDA_CE_INVARIANT) {
      const int64_t items = n * blocks;
      tprt__ce_block_stats_online<D><<<(unsigned)(items < 65535 * 8 ? items : 65535 * 8), kTprtCeFastThreads, 0,
                                       stream>>>(z->data, n, v, blocks, size, bm, bs);
    } else {
      int64_t items = (n + 31) / 32 * blocks;
      tprt__ce_block_stats<D><<<tprt__cuda_ew_blocks(items, 1), 32 * kTprtCeWarps, 0, stream>>>(z->data, n, v, blocks,
                                                                                                  size, bm, bs);
    }
    tprt__ce_token_stats<D><<<tprt__cuda_ew_blocks(n, 128), 128, 0, stream>>>(z->data, targets, n, v, blocks, start,
                                                                               bm, bs, stats);
  });
  return tprt__launched("cross_entropy_stats kernels");
}

// The loss half of tprt_cuda_cross_entropy_with_grad: its outputs and work space (bm, bs: the
// piece's block statistics, st: its token statistics, work: the combine's).
typedef struct {
  tprt_tensor_t *loss, *lse;
  float *bm, *bs, *st, *work;
} tprt__ce_forward_t;

// Z = x[t0, t0 + n)·wᵀ into z's first n rows; with |fwd|, then the tokens' loss and lse (the whole
// vocabulary: |chunks| blocks, one shard); with |targets| (the dgrad and wgrad), then dZ in place.
static tprt_status_t tprt__ce_piece(const tprt_cuda_ce_gemms_t* g, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                    int64_t t0, int64_t n, int chunks, const tprt_tensor_t* targets,
                                    const tprt_tensor_t* lse, const tprt_tensor_t* dloss, int64_t start,
                                    tprt_tensor_t* z, const tprt__ce_forward_t* fwd, cudaStream_t stream) {
  tprt_tensor_t xp = tprt__rows(x, t0, n);
  z->dims[0] = n;
  tprt_status_t s = g->linear(g->ctx, &xp, w, z, chunks, stream);
  if (s) return s;
  if (fwd && n > 0) {
    const int32_t* tg = (const int32_t*)targets->data + t0;
    s = tprt__ce_piece_stats(z, n, chunks, tprt_kacc_chunk_size(z->dims[1], chunks), 0, tg, fwd->bm, fwd->bs, fwd->st,
                             g->math, stream);
    if (s) return s;
    tprt__ce_combine<<<tprt__cuda_ew_blocks(n, 128), 128, 0, stream>>>(
        fwd->st, tg, n, 1, fwd->work, (float*)fwd->loss->data + t0, (float*)fwd->lse->data + t0);
    TPRT_RETURN_IF_ERROR(tprt__launched("cross_entropy combine kernel"), "cross_entropy_with_grad");
  }
  if (!targets || n * z->dims[1] == 0) return NULL;
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value, kVec = D == TPRT_DTYPE_F32 ? 4 : 8;
    int64_t v = z->dims[1], span = (int64_t)TPRT__CUDA_EW_THREADS * kVec, bx = (v + span - 1) / span;
    bool vec = v % kVec == 0 && ((uintptr_t)z->data & 15) == 0;
    dim3 grid((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(n < 65535 ? n : 65535));
    auto launch = [&](auto kernel) {
      kernel<<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(z->data, (const int32_t*)targets->data + t0,
                                                         (const float*)lse->data + t0,
                                                         (const float*)dloss->data + t0, n, v, start, vec);
    };
    if (g->math != TPRT_CUDA_CE_EXACT)  // elementwise: invariant with __expf too
      launch(tprt__ce_dlogits<D, true>);
    else
      launch(tprt__ce_dlogits<D, false>);
  });
  return tprt__launched("cross_entropy logit gradient kernel");
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_stats(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* targets, tprt_tensor_t* stats,
                                                       int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                                       const tprt_cuda_ce_gemms_t* gemms, cudaStream_t stream) {
  const char* op = "cross_entropy_stats";
  const tprt_cuda_ce_gemms_t* g = gemms ? gemms : &tprt__ce_exact;
  tprt_status_t s = tprt__ce_check(op, x, w, targets, chunks);
  if (!s) s = tprt__check(op, "stats", stats, 2, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = x->dims[0], v = w->dims[0];
  if (stats->dims[0] != t || stats->dims[1] != 3 || vocab_chunks < 1 || vocab_chunks > TPRT_MAX_CHUNKS ||
      start < 0 || start + v > vocab)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: stats [T,3], vocabulary blocks or rows out of range", op);
  if (t == 0) return NULL;
  int64_t rows = tprt__ce_piece_rows(t, v, (int)tprt_dtype_bytes(x->dtype, 1), tprt__ce_budget(g));
  tprt_tensor_t z;
  TPRT_RETURN_IF_ERROR(tprt__ce_logits_buffer(x, rows, v, &z, stream), "%s", op);
  void* work = NULL;
  cudaError_t e = tprt__cuda_malloc_async(&work, (size_t)(2 * rows * vocab_chunks) * sizeof(float), stream);
  if (e != cudaSuccess) {
    tprt__cuda_free_async(z.data, stream);
    return tprt__cuda_make_status(e, "cross_entropy_stats scratch", __FILE__, __LINE__);
  }
  float *bm = (float*)work, *bs = bm + rows * vocab_chunks;
  int64_t size = tprt_kacc_chunk_size(v, vocab_chunks);
  for (int64_t t0 = 0; t0 < t && !s; t0 += rows) {
    int64_t n = t - t0 < rows ? t - t0 : rows;
    s = tprt__ce_piece(g, x, w, t0, n, chunks, NULL, NULL, NULL, start, &z, NULL, stream);
    if (s) break;
    s = tprt__ce_piece_stats(&z, n, vocab_chunks, size, start, (const int32_t*)targets->data + t0, bm, bs,
                             (float*)stats->data + 3 * t0, g->math, stream);
  }
  tprt__cuda_free_async(work, stream);
  tprt__cuda_free_async(z.data, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_combine(const tprt_tensor_t* stats, const tprt_tensor_t* targets,
                                                         tprt_tensor_t* loss, tprt_tensor_t* lse, cudaStream_t stream) {
  const char* op = "cross_entropy_combine";
  tprt_status_t s = tprt__check(op, "stats", stats, 2, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "loss", loss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = stats->dims[0], r = stats->dims[1] / 3;
  if (stats->dims[1] % 3 != 0 || r < 1 || targets->dims[0] != t || loss->dims[0] != t || lse->dims[0] != t)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: stats must be [T,3R] with targets, loss and lse [T]", op);
  if (t == 0) return NULL;
  void* work = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&work, (size_t)(2 * t * r) * sizeof(float), stream));
  tprt__ce_combine<<<tprt__cuda_ew_blocks(t, 128), 128, 0, stream>>>((const float*)stats->data,
                                                                      (const int32_t*)targets->data, t, (int)r,
                                                                      (float*)work, (float*)loss->data,
                                                                      (float*)lse->data);
  s = tprt__launched("cross_entropy_combine kernel");
  tprt__cuda_free_async(work, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                 const tprt_tensor_t* targets, tprt_tensor_t* loss, tprt_tensor_t* lse,
                                                 int chunks, const tprt_cuda_ce_gemms_t* gemms, cudaStream_t stream) {
  TPRT_RETURN_IF_ERROR(tprt__ce_check("cross_entropy", x, w, targets, chunks), "cross_entropy");
  int64_t dims[2] = {x->dims[0], 3};
  tprt_tensor_t st = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 2, dims);
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&st.data, tprt_tensor_bytes(&st) + 16, stream));
  tprt_status_t s = tprt_cuda_cross_entropy_stats(x, w, targets, &st, 0, w->dims[0], chunks, chunks, gemms, stream);
  if (!s) s = tprt_cuda_cross_entropy_combine(&st, targets, loss, lse, stream);
  tprt__cuda_free_async(st.data, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_logits(const tprt_tensor_t* z, const tprt_tensor_t* targets,
                                                        tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks,
                                                        tprt_cuda_ce_math_t math, cudaStream_t stream) {
  const char* op = "cross_entropy_logits";
  tprt_status_t s = tprt__check(op, "z", z, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "loss", loss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = z->dims[0], v = z->dims[1];
  if (targets->dims[0] != t || loss->dims[0] != t || lse->dims[0] != t || chunks < 1 || chunks > TPRT_MAX_CHUNKS ||
      (chunks & (chunks - 1)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: z [T,V] with targets, loss and lse [T], and chunks a power of two in [1, %d]", op,
                            TPRT_MAX_CHUNKS);
  if (t == 0) return NULL;
  // The block statistics (bm, bs: T·chunks each), the token statistics (st: [T,3]) and the
  // combine's work (2T): the steps of tprt_cuda_cross_entropy after its logits GEMM.
  void* work = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&work, (size_t)(t * (2 * chunks + 5)) * sizeof(float), stream));
  float *bm = (float*)work, *bs = bm + t * chunks, *st = bs + t * chunks, *cw = st + 3 * t;
  const int32_t* tg = (const int32_t*)targets->data;
  s = tprt__ce_piece_stats(z, t, chunks, tprt_kacc_chunk_size(v, chunks), 0, tg, bm, bs, st, math, stream);
  if (!s) {
    tprt__ce_combine<<<tprt__cuda_ew_blocks(t, 128), 128, 0, stream>>>(st, tg, t, 1, cw, (float*)loss->data,
                                                                        (float*)lse->data);
    s = tprt__launched("cross_entropy_logits combine kernel");
  }
  tprt__cuda_free_async(work, stream);
  return s;
}

// The gradients' common checks.
static tprt_status_t tprt__ce_grad_check(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                         const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                         const tprt_tensor_t* dloss, int64_t start, int64_t vocab, int chunks,
                                         const char* name, const tprt_tensor_t* out, const tprt_tensor_t* like) {
  tprt_status_t s = tprt__ce_check(op, x, w, targets, chunks);
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "dloss", dloss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, name, out, 2, TPRT__FLOATS);
  if (s) return s;
  int64_t t = x->dims[0], v = w->dims[0];
  if (lse->dims[0] != t || dloss->dims[0] != t || start < 0 || start + v > vocab)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: lse, dloss [T] or the rows [start, start+V) disagree", op);
  if (out->dims[0] != like->dims[0] || out->dims[1] != like->dims[1])
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be [%s] as %s", op, name,
                            like == x ? "T,H" : "V,H", like == x ? "x" : "w");
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_dgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                                       const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start,
                                                       int64_t vocab, int chunks, int vocab_chunks,
                                                       const tprt_cuda_ce_gemms_t* gemms, cudaStream_t stream) {
  const char* op = "cross_entropy_dgrad";
  const tprt_cuda_ce_gemms_t* g = gemms ? gemms : &tprt__ce_exact;
  tprt_status_t s = tprt__ce_grad_check(op, x, w, targets, lse, dloss, start, vocab, chunks, "dx", dx, x);
  if (s) return s;
  int64_t t = x->dims[0], v = w->dims[0];
  if (t == 0) return NULL;
  if (v == 0) {  // the empty sum: +0.0
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx->data, 0, tprt_tensor_bytes(dx), stream));
    return NULL;
  }
  int64_t rows = tprt__ce_piece_rows(t, v, (int)tprt_dtype_bytes(x->dtype, 1), tprt__ce_budget(g));
  tprt_tensor_t z;
  TPRT_RETURN_IF_ERROR(tprt__ce_logits_buffer(x, rows, v, &z, stream), "%s", op);
  for (int64_t t0 = 0; t0 < t && !s; t0 += rows) {
    int64_t n = t - t0 < rows ? t - t0 : rows;
    s = tprt__ce_piece(g, x, w, t0, n, chunks, targets, lse, dloss, start, &z, NULL, stream);
    tprt_tensor_t dxp = tprt__rows(dx, t0, n);
    if (!s) s = g->dgrad(g->ctx, &z, w, &dxp, vocab_chunks, stream);
  }
  tprt__cuda_free_async(z.data, stream);
  return s;
}

// dw (and, with |dx|, dx) by pieces of tokens: each piece's logits are computed once, turned into
// dZ in place, and contracted with w into the piece's rows of dx and with x into a node of dw's
// token tree. A piece is k = 2^j whole chunks of S = T/C tokens, the most that fit the budget; one
// piece (k = C) when C does not divide T, when dw is not f32 (a node of the tree is f32), or when
// everything fits the budget plus dw's bytes (what a second piece's partial would take). dx's rows
// need no other token, so its bits are the same for any piece size. With g->wgrad_acc and an f32 dw
// (fast numerics) the pieces are the budget's (tprt__ce_piece_rows) and each adds its product into
// dw (the first one writes it): no tree, no partial.
// With |fwd| (tprt_cuda_cross_entropy_with_grad: T, V and H not 0), each piece's logits first
// give its tokens' loss and lse (fwd->lse, which |lse| then is).
static tprt_status_t tprt__ce_backward(const char* op, const tprt_cuda_ce_gemms_t* g, const tprt_tensor_t* x,
                                       const tprt_tensor_t* w, const tprt_tensor_t* targets,
                                       const tprt_tensor_t* lse, const tprt_tensor_t* dloss, tprt_tensor_t* dx,
                                       tprt_tensor_t* dw, int64_t start, int chunks, int vocab_chunks,
                                       int token_chunks, tprt__ce_forward_t* fwd, cudaStream_t stream) {
  int64_t t = x->dims[0], v = w->dims[0], h = x->dims[1];
  if (token_chunks < 1 || token_chunks > TPRT_MAX_CHUNKS || (token_chunks & (token_chunks - 1)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: token chunks must be a power of two in [1, %d]; got %d",
                            op, TPRT_MAX_CHUNKS, token_chunks);
  if (dx && v == 0 && t * h > 0)  // the empty sum: +0.0
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx->data, 0, tprt_tensor_bytes(dx), stream));
  if (v * h == 0) return NULL;
  if (t == 0) {  // the empty sum: +0.0
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dw->data, 0, tprt_tensor_bytes(dw), stream));
    return NULL;
  }
  // Splitting costs a dw-sized f32 partial besides the pieces' logits: one piece is no larger
  // while its logits fit the budget plus that partial.
  int64_t k = token_chunks, c = token_chunks, size = t / (c ? c : 1);
  size_t budget = tprt__ce_budget(g), row = (size_t)v * (int)tprt_dtype_bytes(x->dtype, 1);
  if (t % c == 0 && dw->dtype == TPRT_DTYPE_F32 && (size_t)t * row > budget + tprt_tensor_bytes(dw))
    while (k > 1 && (size_t)(k * size) * row > budget) k /= 2;
  int64_t rows = k == c ? t : k * size;
  const bool acc = g->wgrad_acc && dw->dtype == TPRT_DTYPE_F32;
  if (acc) rows = tprt__ce_piece_rows(t, v, (int)tprt_dtype_bytes(x->dtype, 1), budget);
  tprt_tensor_t z;
  tprt_status_t s = NULL;
  TPRT_RETURN_IF_ERROR(tprt__ce_logits_buffer(x, rows, v, &z, stream), "%s", op);
  void* fwork = NULL;
  if (fwd) {  // bm, bs [rows, chunks], st [rows, 3], the combine's [rows, 2]
    cudaError_t e = tprt__cuda_malloc_async(&fwork, (size_t)(rows * (2 * (int64_t)chunks + 5)) * sizeof(float), stream);
    if (e != cudaSuccess) {
      tprt__cuda_free_async(z.data, stream);
      return tprt__cuda_make_status(e, "cross_entropy_with_grad statistics", __FILE__, __LINE__);
    }
    fwd->bm = (float*)fwork;
    fwd->bs = fwd->bm + rows * chunks;
    fwd->st = fwd->bs + rows * chunks;
    fwd->work = fwd->st + 3 * rows;
  }
  // The pieces' tree nodes: node[i] at level[i] (the pairwise tree's upper levels, as a binary
  // counter; the left-most node is dw itself).
  void* node[64];
  int level[64], nodes = 0;
  for (int64_t t0 = 0; t0 < t; t0 += rows) {
    int64_t n = t - t0 < rows ? t - t0 : rows;
    s = tprt__ce_piece(g, x, w, t0, n, chunks, targets, lse, dloss, start, &z, fwd, stream);
    if (!s && dx) {
      tprt_tensor_t dxp = tprt__rows(dx, t0, n);
      s = g->dgrad(g->ctx, &z, w, &dxp, vocab_chunks, stream);
    }
    if (s) break;
    tprt_tensor_t part = *dw, xp = tprt__rows(x, t0, n);
    if (acc) {
      s = t0 == 0 ? g->wgrad(g->ctx, &z, &xp, dw, token_chunks, stream) : g->wgrad_acc(g->ctx, &z, &xp, dw, stream);
      if (s) break;
      continue;
    }
    if (nodes > 0) {
      cudaError_t e = tprt__cuda_malloc_async(&part.data, tprt_tensor_bytes(dw) + 16, stream);
      if (e != cudaSuccess) {
        s = tprt__cuda_make_status(e, "cross_entropy_wgrad partial", __FILE__, __LINE__);
        break;
      }
    }
    s = g->wgrad(g->ctx, &z, &xp, &part, k == c ? token_chunks : (int)k, stream);
    int lv = 0;
    while (!s && nodes > 0 && level[nodes - 1] == lv) {  // left + right, into the left
      tprt_tensor_t left = *dw;
      left.data = node[nodes - 1];
      s = tprt_cuda_add(&left, &part, &left, stream);
      tprt__cuda_free_async(part.data, stream);
      part.data = node[--nodes];
      ++lv;
    }
    if (s) {
      if (part.data != dw->data) tprt__cuda_free_async(part.data, stream);
      break;
    }
    node[nodes] = part.data, level[nodes++] = lv;
  }
  for (int i = 0; i < nodes; ++i)
    if (node[i] != dw->data) tprt__cuda_free_async(node[i], stream);
  if (fwork) tprt__cuda_free_async(fwork, stream);
  tprt__cuda_free_async(z.data, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_wgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                                       const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start,
                                                       int64_t vocab, int chunks, int token_chunks,
                                                       const tprt_cuda_ce_gemms_t* gemms, cudaStream_t stream) {
  const char* op = "cross_entropy_wgrad";
  const tprt_cuda_ce_gemms_t* g = gemms ? gemms : &tprt__ce_exact;
  tprt_status_t s = tprt__ce_grad_check(op, x, w, targets, lse, dloss, start, vocab, chunks, "dw", dw, w);
  if (s) return s;
  return tprt__ce_backward(op, g, x, w, targets, lse, dloss, NULL, dw, start, chunks, 1, token_chunks, NULL, stream);
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                      const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                                      const tprt_tensor_t* dloss, tprt_tensor_t* dx, tprt_tensor_t* dw,
                                                      int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                                      int token_chunks, const tprt_cuda_ce_gemms_t* gemms,
                                                      cudaStream_t stream) {
  const char* op = "cross_entropy_grad";
  const tprt_cuda_ce_gemms_t* g = gemms ? gemms : &tprt__ce_exact;
  tprt_status_t s = tprt__ce_grad_check(op, x, w, targets, lse, dloss, start, vocab, chunks, "dx", dx, x);
  if (!s) s = tprt__ce_grad_check(op, x, w, targets, lse, dloss, start, vocab, chunks, "dw", dw, w);
  if (s) return s;
  return tprt__ce_backward(op, g, x, w, targets, lse, dloss, dx, dw, start, chunks, vocab_chunks, token_chunks, NULL,
                           stream);
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_with_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                           const tprt_tensor_t* targets, const tprt_tensor_t* dloss,
                                                           tprt_tensor_t* loss, tprt_tensor_t* lse, tprt_tensor_t* dx,
                                                           tprt_tensor_t* dw, int chunks, int vocab_chunks,
                                                           int token_chunks, const tprt_cuda_ce_gemms_t* gemms,
                                                           cudaStream_t stream) {
  const char* op = "cross_entropy_with_grad";
  const tprt_cuda_ce_gemms_t* g = gemms ? gemms : &tprt__ce_exact;
  tprt_status_t s = tprt__ce_check(op, x, w, targets, chunks);
  if (!s) s = tprt__check(op, "loss", loss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s && loss->dims[0] != x->dims[0])
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: loss must be [T] as x's rows", op);
  if (!s) s = tprt__ce_grad_check(op, x, w, targets, lse, dloss, 0, w->dims[0], chunks, "dx", dx, x);
  if (!s) s = tprt__ce_grad_check(op, x, w, targets, lse, dloss, 0, w->dims[0], chunks, "dw", dw, w);
  if (s) return s;
  int64_t t = x->dims[0], v = w->dims[0], h = x->dims[1];
  if (t == 0 || v == 0 || h == 0) {  // the empty cases, as the two ops
    s = tprt_cuda_cross_entropy(x, w, targets, loss, lse, chunks, g, stream);
    return s ? s : tprt__ce_backward(op, g, x, w, targets, lse, dloss, dx, dw, 0, chunks, vocab_chunks, token_chunks,
                                     NULL, stream);
  }
  tprt__ce_forward_t fwd = {loss, lse, NULL, NULL, NULL, NULL};
  return tprt__ce_backward(op, g, x, w, targets, lse, dloss, dx, dw, 0, chunks, vocab_chunks, token_chunks, &fwd,
                           stream);
}
