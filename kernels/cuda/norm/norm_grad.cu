// tprt_cuda_rmsnorm_grad and tprt_cuda_layernorm_grad in exact mode, bitwise equal to the CPU
// kernels of cpu_norm_grad.c (the formulas are there). Three kernels:
//   1. one 256-thread block per row (the 256 lanes of the canonical row reduction, as in norm.cu):
//      mean (layernorm), r, g = dy·gamma, the lane sums of g (layernorm) and of g·xhat (fmaf),
//      their row trees, and dx; the row's r (and mean) go to an f32 scratch of 2·M floats, from
//      which the next kernel recomputes xhat = (x - mean)·r, the same rounding, instead of reading
//      an f32 copy of it.
//   2. dgamma (and dbeta): the canonical K accumulation over the rows. One thread per (chunk,
//      column) sums its chunk's rows in increasing order into an f32 partial. The sums are serial
//      chains (chunks × H of them), so the rows come through shared memory: a block takes 64
//      columns of one chunk and copies tiles of rows × 64 columns of dy and x ahead of the chains
//      with cp.async, four tiles in flight, enough loads to keep the memory busy with few threads.
//      Without 16-byte alignment (H not a multiple of 16 bytes of elements) each thread loads its
//      own column instead.
//   3. one thread per column combines the partials by the pairwise tree, built as a binary counter
//      (merging equal-level partials as they complete: the same pairs as the tree, in order).
// The _pieces entry points (fast and invariant numerics) cut each chunk into pieces of
// TPRT_CUDA_NORM_GRAD_PIECE rows: kernel 2 sums each (piece, column) in row order, kernel 3 adds a
// chunk's pieces in order before the tree. The pieces depend only on the chunk's length, so every
// split of the tokens into whole chunks gives the same bits; with one piece per chunk (short chunks)
// they are the exact kernels' bits.
// The launcher allocates the scratch and the chunk partials with the stream-ordered allocator.
#include "norm_rows.cuh"
#include "tprt_cuda_internal.cuh"

#define TPRT__NG_THREADS TPRT_ROW_LANES

// |v| rounded (RNE) to |dtype| and widened back: what a store and a load of it give.
static __device__ __forceinline__ float tprt__ng_rounded(int dtype, float v) {
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      return tprt_bf16_to_f32(tprt_f32_to_bf16(v));
    case TPRT_DTYPE_F16:
      return tprt_f16_to_f32(tprt_f32_to_f16(v));
    default:
      return v;
  }
}

template <int D>
static __global__ void __launch_bounds__(TPRT__NG_THREADS)
    tprt__norm_grad_rows(const void* __restrict__ x, const void* __restrict__ gamma, int g_dtype,
                         const void* __restrict__ dy, const void* __restrict__ addend, void* __restrict__ dx,
                         float* __restrict__ rs, int64_t m, int64_t h, float hf, float eps, int layernorm) {
  __shared__ float sm[TPRT_ROW_LANES / 32 + 1];
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t base = row * h;
    float mean = 0.0f;
    if (layernorm) {
      float acc = 0.0f;
      for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) acc = __fadd_rn(acc, tprt__cuda_ld(x, D, base + j));
      mean = __fdiv_rn(tprt__cuda_row_tree(acc, sm), hf);
    }
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) {
      float d = tprt__cuda_ld(x, D, base + j);
      if (layernorm) d = __fsub_rn(d, mean);
      acc = __fmaf_rn(d, d, acc);
    }
    const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(tprt__cuda_row_tree(acc, sm), hf), eps));
    if (threadIdx.x == 0) {
      rs[row] = r;
      rs[m + row] = mean;
    }
    float sum_g = 0.0f, dot = 0.0f;
    for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) {
      float d = tprt__cuda_ld(x, D, base + j);
      if (layernorm) d = __fsub_rn(d, mean);
      const float xhat = __fmul_rn(d, r);
      const float g = __fmul_rn(tprt__cuda_ld(dy, D, base + j), tprt__cuda_ld(gamma, g_dtype, j));
      sum_g = __fadd_rn(sum_g, g);
      dot = __fmaf_rn(g, xhat, dot);
    }
    const float a = layernorm ? __fdiv_rn(tprt__cuda_row_tree(sum_g, sm), hf) : 0.0f;
    const float c = __fdiv_rn(tprt__cuda_row_tree(dot, sm), hf);
    for (int64_t j = threadIdx.x; j < h; j += TPRT__NG_THREADS) {
      float d = tprt__cuda_ld(x, D, base + j);
      if (layernorm) d = __fsub_rn(d, mean);
      const float xhat = __fmul_rn(d, r);
      const float g = __fmul_rn(tprt__cuda_ld(dy, D, base + j), tprt__cuda_ld(gamma, g_dtype, j));
      const float t = layernorm ? __fsub_rn(g, a) : g;
      float v = __fmul_rn(__fmaf_rn(-xhat, c, t), r);
      // addend (the op's acc): dx rounded to its dtype, then acc added in f32, rounded once (tprt_cpu_add).
      if (addend) v = __fadd_rn(tprt__ng_rounded(D, v), tprt__cuda_ld(addend, D, base + j));
      tprt__cuda_st(dx, D, base + j, v);
    }
  }
}

// One row of a chunk's column sums: dgamma's fmaf(dy, xhat) and dbeta's dy, xhat as the rows
// kernel rounds it.
static __device__ __forceinline__ void tprt__norm_grad_step(float d, float xv, const float* __restrict__ rs, int64_t m,
                                                            int64_t row, int layernorm, float* ag, float* ab) {
  if (layernorm) xv = __fsub_rn(xv, rs[m + row]);
  *ag = __fmaf_rn(d, __fmul_rn(xv, rs[row]), *ag);
  *ab = __fadd_rn(*ab, d);
}

// The rows [m0, m1) of unit |u|: piece u % pieces of chunk u / pieces, a chunk being |size| =
// tprt_kacc_chunk_size(m, chunks) rows and a piece |piece| rows of it (clamped to the chunk and to
// m); |full| is the rows the unit would have in a long enough matrix. One piece of |size| rows per
// chunk (pieces = 1, piece = size) is the chunk itself.
static __device__ __forceinline__ void tprt__norm_grad_unit(int64_t m, int chunks, int pieces, int64_t piece, int64_t u,
                                                            int64_t* m0, int64_t* m1, int64_t* full) {
  const int64_t size = tprt_kacc_chunk_size(m, chunks), c = u / pieces, p = u % pieces;
  const int64_t c0 = c * size, c1 = c0 + size;                 // the chunk, unclamped
  const int64_t p0 = c0 + p * piece, p1 = p0 + piece < c1 ? p0 + piece : c1;  // the piece, in the chunk
  *full = p1 > p0 ? p1 - p0 : 0;
  *m0 = p0 < m ? p0 : m;
  *m1 = p1 < m ? p1 : m;
}

// dgamma (and dbeta when |pb|), pass 1 without alignment: one thread per (chunk, column)
// computes the chunk's partial sums over its rows in increasing order (+0.0 added to a short
// chunk) into pg[c, col] (pb[c, col]). Columns vary fastest across threads, so a warp reads
// consecutive columns of a row.
template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__norm_grad_chunks(const void* __restrict__ dy, const void* __restrict__ x, const float* __restrict__ rs,
                           float* __restrict__ pg, float* __restrict__ pb, int64_t m, int64_t h, int chunks,
                           int pieces, int64_t piece, int layernorm) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)chunks * pieces * h; i += stride) {
    const int64_t col = i % h;
    int64_t m0, m1, size;
    tprt__norm_grad_unit(m, chunks, pieces, piece, i / h, &m0, &m1, &size);
    float ag = 0.0f, ab = 0.0f;
#pragma unroll 8
    for (int64_t row = m0; row < m1; ++row)
      tprt__norm_grad_step(tprt__cuda_ld(dy, D, row * h + col), tprt__cuda_ld(x, D, row * h + col), rs, m, row,
                           layernorm, &ag, &ab);
    if (m1 - m0 < size) {
      ag = __fadd_rn(ag, 0.0f);
      ab = __fadd_rn(ab, 0.0f);
    }
    pg[i] = ag;
    if (pb) pb[i] = ab;
  }
}

// Pass 1 with 16-byte aligned rows: block (column group, chunk) of kTprtNgCols threads, one per
// column; tiles of kRows rows × kTprtNgCols columns of dy and x are copied into shared memory by
// cp.async, kTprtNgStages - 1 tiles ahead of the chains (columns past H are zero-filled and
// unused).
constexpr int kTprtNgCols = 64;
constexpr int kTprtNgStages = 4;

static __device__ __forceinline__ void tprt__cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}

// One unit of tprt__norm_grad_tiles (a block's 64 columns of one chunk's piece).
template <int D>
static __device__ __forceinline__ void tprt__norm_grad_tile_unit(
    const void* __restrict__ dy, const void* __restrict__ x, const float* __restrict__ rs, float* __restrict__ pg,
    float* __restrict__ pb, int64_t m, int64_t h, int chunks, int pieces, int64_t piece, int layernorm, int64_t u,
    unsigned char (*sdy)[(64 / (D == TPRT_DTYPE_F32 ? 4 : 2)) * kTprtNgCols * (D == TPRT_DTYPE_F32 ? 4 : 2)],
    unsigned char (*sx)[(64 / (D == TPRT_DTYPE_F32 ? 4 : 2)) * kTprtNgCols * (D == TPRT_DTYPE_F32 ? 4 : 2)]) {
  constexpr int kEs = D == TPRT_DTYPE_F32 ? 4 : 2, kVec = 16 / kEs, kRows = 64 / kEs, kPer = kTprtNgCols / kVec;
  const int64_t c = u, c0 = (int64_t)blockIdx.x * kTprtNgCols, col = c0 + threadIdx.x;
  int64_t m0, m1, size;
  tprt__norm_grad_unit(m, chunks, pieces, piece, u, &m0, &m1, &size);
  const int64_t tiles = (m1 - m0 + kRows - 1) / kRows;
  auto issue = [&](int64_t tile) {
    const int buf = (int)(tile % kTprtNgStages);
    const int64_t r0 = m0 + tile * kRows;
    for (int q = threadIdx.x; q < kRows * kPer; q += kTprtNgCols) {
      const int rr = q / kPer, vv = q % kPer;
      const int64_t row = r0 + rr, cc = c0 + (int64_t)vv * kVec;
      const bool ok = row < m1 && cc < h;
      const int64_t off = ok ? (row * h + cc) * kEs : 0;
      const int at = (rr * kTprtNgCols + vv * kVec) * kEs;
      tprt__cp_async16(&sdy[buf][at], static_cast<const unsigned char*>(dy) + off, ok);
      tprt__cp_async16(&sx[buf][at], static_cast<const unsigned char*>(x) + off, ok);
    }
  };
#pragma unroll
  for (int s = 0; s < kTprtNgStages - 1; ++s) {
    if (s < tiles) issue(s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  float ag = 0.0f, ab = 0.0f;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kTprtNgStages - 2));
    __syncthreads();  // the tile is in, and every chain is done with the buffer refilled next
    if (tile + kTprtNgStages - 1 < tiles) issue(tile + kTprtNgStages - 1);
    asm volatile("cp.async.commit_group;\n" ::);
    const int buf = (int)(tile % kTprtNgStages);
    const int64_t r0 = m0 + tile * kRows;
    const int rows = m1 - r0 < kRows ? (int)(m1 - r0) : kRows;
#pragma unroll 8
    for (int i = 0; i < rows; ++i)
      tprt__norm_grad_step(tprt__cuda_ld(sdy[buf], D, i * kTprtNgCols + threadIdx.x),
                           tprt__cuda_ld(sx[buf], D, i * kTprtNgCols + threadIdx.x), rs, m, r0 + i, layernorm, &ag,
                           &ab);
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  if (m1 - m0 < size) {
    ag = __fadd_rn(ag, 0.0f);
    ab = __fadd_rn(ab, 0.0f);
  }
  if (col < h) {
    pg[c * h + col] = ag;
    if (pb) pb[c * h + col] = ab;
  }
}

template <int D>
static __global__ void __launch_bounds__(kTprtNgCols)
    tprt__norm_grad_tiles(const void* __restrict__ dy, const void* __restrict__ x, const float* __restrict__ rs,
                          float* __restrict__ pg, float* __restrict__ pb, int64_t m, int64_t h, int chunks,
                          int pieces, int64_t piece, int layernorm) {
  constexpr int kEs = D == TPRT_DTYPE_F32 ? 4 : 2;
  constexpr int kTile = (64 / kEs) * kTprtNgCols * kEs;  // bytes of one tensor's tile
  __shared__ __align__(16) unsigned char sdy[kTprtNgStages][kTile], sx[kTprtNgStages][kTile];
  for (int64_t u = blockIdx.y; u < (int64_t)chunks * pieces; u += gridDim.y) {
    tprt__norm_grad_tile_unit<D>(dy, x, rs, pg, pb, m, h, chunks, pieces, piece, layernorm, u, sdy, sx);
    __syncthreads();  // the buffers are the next unit's
  }
}

// Pass 2 (every path): a block of 256 threads per 32 columns, lane = column. Warp w adds the
// pieces of chunks w, w + 8, ... in order (one piece: the chunk's partial); warp 0 then combines
// the chunk partials, in chunk order, by the pairwise tree built as a binary counter (merging
// equal-level partials as they complete: the same pairs as the tree, in order), and rounds once.
constexpr int kTprtNgTreeWarps = 8;
static __global__ void __launch_bounds__(kTprtNgTreeWarps * 32)
    tprt__norm_grad_tree(const float* __restrict__ pg, const float* __restrict__ pb, void* __restrict__ dgamma,
                         int dg_dtype, void* __restrict__ dbeta, int db_dtype, int64_t h, int chunks, int pieces) {
  __shared__ float part[2][kTprtNgTreeWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = (int64_t)blockIdx.x * 32 + lane;
  float vg[33], vb[33];
  int lev[33], n = 0;
  for (int c0 = 0; c0 < chunks; c0 += kTprtNgTreeWarps) {
    const int c = c0 + warp;
    if (c < chunks && col < h) {
      for (int t = 0; t < (pb ? 2 : 1); ++t) {
        const float* p = (t ? pb : pg) + (int64_t)c * pieces * h + col;
        float v = p[0];
#pragma unroll 8
        for (int q = 1; q < pieces; ++q) v = __fadd_rn(v, p[(int64_t)q * h]);
        part[t][warp][lane] = v;
      }
    }
    __syncthreads();
    if (warp == 0 && col < h) {
      for (int w = 0; w < kTprtNgTreeWarps && c0 + w < chunks; ++w) {
        vg[n] = part[0][w][lane];
        vb[n] = pb ? part[1][w][lane] : 0.0f;
        lev[n++] = 0;
        while (n >= 2 && lev[n - 1] == lev[n - 2]) {  // p[i] = p[i] + p[i + s], as the tree does
          vg[n - 2] = __fadd_rn(vg[n - 2], vg[n - 1]);
          vb[n - 2] = __fadd_rn(vb[n - 2], vb[n - 1]);
          ++lev[n - 2];
          --n;
        }
      }
    }
    __syncthreads();
  }
  if (warp == 0 && col < h) {
    tprt__cuda_st(dgamma, dg_dtype, col, vg[0]);
    if (dbeta) tprt__cuda_st(dbeta, db_dtype, col, vb[0]);
  }
}

static void tprt__norm_grad_tree_launch(const float* pg, const float* pb, tprt_tensor_t* dgamma,
                                        tprt_tensor_t* dbeta, int64_t h, int chunks, int pieces,
                                        cudaStream_t stream) {
  tprt__norm_grad_tree<<<(unsigned)((h + 31) / 32), kTprtNgTreeWarps * 32, 0, stream>>>(
      pg, pb, dgamma->data, dgamma->dtype, dbeta ? dbeta->data : NULL, dbeta ? dbeta->dtype : 0, h, chunks, pieces);
}

// ------------------------------------------------------------------------------------------------
// Fast and invariant numerics (the _pieces entry points) for H up to 256 threads x kTprtNrMaxRuns
// runs of 16 bytes: one kernel reads each row once and writes dx and the pieces' dgamma (dbeta)
// partials. A block takes one piece of kTprtNgVecPiece rows of one chunk and walks its rows in
// increasing order, the next row's loads in flight while the current one is reduced; thread t owns
// the runs of V = 16 bytes / element size columns starting at (t + 256·k)·V. Per row, in f32:
//   rmsnorm    r = rsqrtf(Σx² / H + eps), xhat = x·r, g = dy·gamma, c = Σg·x · r / H,
//              dx = (g − xhat·c)·r
//   layernorm  mean = Σx / H, d = x − mean, r = rsqrtf(Σd² / H + eps), xhat = d·r, a = Σg / H,
//              c = Σg·d · r / H, dx = (g − a − xhat·c)·r
// each Σ a thread's columns in increasing order, then the warps' butterfly (xor 16 .. 1) and the
// eight warps in order. The thread sums dgamma's dy·xhat (fmaf) and dbeta's dy for its columns
// over the piece's rows in row order. Every value depends only on the row and the piece, and the
// pieces only on the chunk's length: invariant under any split of the tokens into whole chunks.
// The bits differ from the exact kernels' (another row reduction, the hardware's rsqrtf). Without
// 16-byte alignment (H not a multiple of V, or an operand's address) the same runs are loaded an
// element at a time: the same bits.
constexpr int kTprtNgVecPiece = 16;

template <int D, int NV, bool LN>
static __global__ void __launch_bounds__(kTprtNrThreads)
    tprt__norm_grad_vec(const void* __restrict__ x, const void* __restrict__ gamma, int g_dtype,
                        const void* __restrict__ dy, const void* __restrict__ addend, void* __restrict__ dx,
                        float* __restrict__ pg, float* __restrict__ pb, int64_t m, int64_t h, float hf, float eps,
                        int chunks, int pieces, int64_t piece, bool aligned) {
  constexpr int V = tprt__nr_vec<D>::V, E = NV * V;
  __shared__ float sm[2 * 3 * (kTprtNrThreads / 32)];
  const int64_t u = blockIdx.x;
  int64_t m0, m1, full;
  tprt__norm_grad_unit(m, chunks, pieces, piece, u, &m0, &m1, &full);
  int64_t col[NV];
#pragma unroll
  for (int k = 0; k < NV; ++k) col[k] = (int64_t)(threadIdx.x + kTprtNrThreads * k) * V;
  float gam[E], ag[E], ab[E];
  tprt__nr_params<V, NV>(gamma, g_dtype, col, h, gam);
#pragma unroll
  for (int i = 0; i < E; ++i) ag[i] = ab[i] = 0.0f;
  uint4 rx[NV], rd[NV], ra[NV];
  auto load = [&](int64_t row, uint4(&ox)[NV], uint4(&od)[NV], uint4(&oa)[NV]) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      ox[k] = tprt__nr_run<D>(x, row * h, col[k], h, aligned);
      od[k] = tprt__nr_run<D>(dy, row * h, col[k], h, aligned);
      if (addend) oa[k] = tprt__nr_run<D>(addend, row * h, col[k], h, aligned);
    }
  };
  if (m0 < m1) load(m0, rx, rd, ra);
  int parity = 0;
  for (int64_t row = m0; row < m1; ++row) {
    uint4 nx[NV], nd[NV], na[NV];
    if (row + 1 < m1) load(row + 1, nx, nd, na);
    float xv[E], g[E];
#pragma unroll
    for (int k = 0; k < NV; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e) {
        xv[k * V + e] = tprt_load_elem(&rx[k], D, e);
        g[k * V + e] = __fmul_rn(tprt_load_elem(&rd[k], D, e), gam[k * V + e]);
      }
    if (LN) tprt__nr_center<V, NV>(xv, col, h, hf, sm, parity);
    constexpr int NS = LN ? 3 : 2;
    float s[NS];
#pragma unroll
    for (int i = 0; i < NS; ++i) s[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) {
      s[0] = __fmaf_rn(xv[i], xv[i], s[0]);
      s[1] = __fmaf_rn(g[i], xv[i], s[1]);
      if (LN) s[NS - 1] = __fadd_rn(s[NS - 1], g[i]);
    }
    tprt__nr_block_sum<NS>(s, sm, parity);
    parity ^= 1;
    const float r = rsqrtf(__fadd_rn(__fdiv_rn(s[0], hf), eps));
    const float c = __fdiv_rn(__fmul_rn(s[1], r), hf);
    const float a = LN ? __fdiv_rn(s[NS - 1], hf) : 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      float out[V];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int i = k * V + e;
        const float xhat = __fmul_rn(xv[i], r);
        const float d = tprt_load_elem(&rd[k], D, e);
        ag[i] = __fmaf_rn(d, xhat, ag[i]);
        if (LN) ab[i] = __fadd_rn(ab[i], d);
        float v = __fmul_rn(__fmaf_rn(-xhat, c, LN ? __fsub_rn(g[i], a) : g[i]), r);
        if (addend) v = __fadd_rn(tprt__ng_rounded(D, v), tprt_load_elem(&ra[k], D, e));
        out[e] = v;
      }
      tprt__nr_store<D>(dx, row * h, col[k], h, aligned, tprt__nr_pack<D>(out));
    }
    if (row + 1 < m1)
#pragma unroll
      for (int k = 0; k < NV; ++k) rx[k] = nx[k], rd[k] = nd[k], ra[k] = na[k];
  }
  const bool pad = m1 - m0 < full;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int64_t c = col[k] + e;
      if (c >= h) continue;
      const int i = k * V + e;
      pg[u * h + c] = pad ? __fadd_rn(ag[i], 0.0f) : ag[i];
      if (LN) pb[u * h + c] = pad ? __fadd_rn(ab[i], 0.0f) : ab[i];
    }
}

/// |rs|: r and mean per row [2, m], followed by the unit partials [chunks·pieces, h] (twice with
/// dbeta).
template <int D>
static void tprt__norm_grad_launch(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                   const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                   tprt_tensor_t* dbeta, float* rs, float eps, int chunks, int pieces, int64_t piece,
                                   cudaStream_t stream) {
  const int64_t m = x->dims[0], h = x->dims[1];
  const float hf = (float)h;
  const int ln = dbeta != NULL;
  if (m > 0) {
    dim3 rows((unsigned)(m < 65536 ? m : 65536));
    tprt__norm_grad_rows<D><<<rows, TPRT__NG_THREADS, 0, stream>>>(
        x->data, gamma->data, gamma->dtype, dy->data, acc ? acc->data : NULL, dx->data, rs, m, h, hf, eps, ln);
  }
  const int64_t units = (int64_t)chunks * pieces;
  float* pg = rs + 2 * m;
  float* pb = dbeta ? pg + units * h : NULL;
  constexpr int kVec = D == TPRT_DTYPE_F32 ? 4 : 8;
  const bool aligned = h % kVec == 0 && ((uintptr_t)x->data & 15) == 0 && ((uintptr_t)dy->data & 15) == 0;
  if (aligned && (h + kTprtNgCols - 1) / kTprtNgCols <= 0x7FFFFFFF) {
    dim3 grid((unsigned)((h + kTprtNgCols - 1) / kTprtNgCols), (unsigned)(units < 65535 ? units : 65535));
    tprt__norm_grad_tiles<D><<<grid, kTprtNgCols, 0, stream>>>(dy->data, x->data, rs, pg, pb, m, h, chunks, pieces,
                                                               piece, ln);
  } else {
    tprt__norm_grad_chunks<D><<<tprt__cuda_ew_blocks(units * h, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0,
                                stream>>>(dy->data, x->data, rs, pg, pb, m, h, chunks, pieces, piece, ln);
  }
  tprt__norm_grad_tree_launch(pg, pb, dgamma, dbeta, h, chunks, pieces, stream);
}

/// The one-pass kernel (fast and invariant numerics) with its runs per thread |NV|, then the tree.
/// |pg|: the unit partials [chunks·pieces, h] (twice with dbeta).
template <int D, int NV>
static void tprt__norm_grad_vec_launch(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                       const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                       tprt_tensor_t* dbeta, float* pg, float eps, int chunks, int pieces,
                                       int64_t piece, cudaStream_t stream) {
  const int64_t m = x->dims[0], h = x->dims[1], units = (int64_t)chunks * pieces;
  float* pb = dbeta ? pg + units * h : NULL;
  const bool aligned = tprt__nr_aligned(h, D, {x->data, dy->data, dx->data, acc ? acc->data : NULL});
  auto kernel = dbeta ? tprt__norm_grad_vec<D, NV, true> : tprt__norm_grad_vec<D, NV, false>;
  kernel<<<(unsigned)units, kTprtNrThreads, 0, stream>>>(x->data, gamma->data, gamma->dtype, dy->data,
                                                             acc ? acc->data : NULL, dx->data, pg, pb, m, h, (float)h,
                                                             eps, chunks, pieces, piece, aligned);
  tprt__norm_grad_tree_launch(pg, pb, dgamma, dbeta, h, chunks, pieces, stream);
}

// |in_pieces|: the chunks in pieces of TPRT_CUDA_NORM_GRAD_PIECE rows (the _pieces entry points),
// else each chunk one serial sum (exact).
static tprt_status_t tprt__cuda_norm_grad(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                          const tprt_tensor_t* dy, const tprt_tensor_t* acc, tprt_tensor_t* dx,
                                          tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps, int chunks,
                                          bool in_pieces, cudaStream_t stream) {
  tprt_status_t s = tprt__check_norm_grad(op, x, gamma, dy, dx, dgamma, dbeta, dbeta != NULL, eps, chunks);
  if (!s && acc) s = tprt_cpu_check_acc(op, acc, dx);
  if (s) return s;
  const int64_t m = x->dims[0], h = x->dims[1];
  if (h == 0) return NULL;
  const int64_t size = tprt_kacc_chunk_size(m, chunks);
  // The one-pass kernel's runs per thread (0: H too wide for it; the choice depends on H and the
  // dtype only, so every layout of one model takes the same kernel).
  const int nv = in_pieces ? tprt__nr_runs(h, x->dtype) : 0;
  const int64_t cut = nv ? kTprtNgVecPiece : TPRT_CUDA_NORM_GRAD_PIECE;
  int64_t piece = size > 0 ? size : 1, pieces = 1;
  if (in_pieces && size > cut) {
    piece = cut;
    pieces = (size + piece - 1) / piece;
  }
  if (pieces > INT32_MAX / chunks)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %lld rows make too many pieces", op, (long long)m);
  float* rs = NULL;
  const size_t scratch = (size_t)(nv ? 0 : 2 * m) + (size_t)(dbeta ? 2 : 1) * (size_t)(chunks * pieces) * (size_t)h;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&rs, scratch * sizeof(float), stream));
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (nv == 1)
      tprt__norm_grad_vec_launch<D, 1>(x, gamma, dy, acc, dx, dgamma, dbeta, rs, eps, chunks, (int)pieces, piece, stream);
    else if (nv == 2)
      tprt__norm_grad_vec_launch<D, 2>(x, gamma, dy, acc, dx, dgamma, dbeta, rs, eps, chunks, (int)pieces, piece, stream);
    else if (nv)
      tprt__norm_grad_vec_launch<D, kTprtNrMaxRuns>(x, gamma, dy, acc, dx, dgamma, dbeta, rs, eps, chunks, (int)pieces,
                                                   piece, stream);
    else
      tprt__norm_grad_launch<D>(x, gamma, dy, acc, dx, dgamma, dbeta, rs, eps, chunks, (int)pieces, piece, stream);
  });
  cudaError_t e = cudaGetLastError();
  tprt__cuda_free_async(rs, stream);
  if (e != cudaSuccess) return tprt__cuda_make_status(e, "norm_grad kernels", __FILE__, __LINE__);
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                                float eps, int chunks, cudaStream_t stream) {
  return tprt__cuda_norm_grad("rmsnorm_grad", x, gamma, dy, NULL, dx, dgamma, NULL, eps, chunks, false, stream);
}

extern "C" tprt_status_t tprt_cuda_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                  const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                                  tprt_tensor_t* dbeta, float eps, int chunks, cudaStream_t stream) {
  return tprt__cuda_norm_grad("layernorm_grad", x, gamma, dy, NULL, dx, dgamma, dbeta, eps, chunks, false, stream);
}

extern "C" tprt_status_t tprt_cuda_rmsnorm_grad_pieces(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                       const tprt_tensor_t* dy, tprt_tensor_t* dx,
                                                       tprt_tensor_t* dgamma, float eps, int chunks,
                                                       cudaStream_t stream) {
  return tprt__cuda_norm_grad("rmsnorm_grad", x, gamma, dy, NULL, dx, dgamma, NULL, eps, chunks, true, stream);
}

extern "C" tprt_status_t tprt_cuda_layernorm_grad_pieces(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                         const tprt_tensor_t* dy, tprt_tensor_t* dx,
                                                         tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps,
                                                         int chunks, cudaStream_t stream) {
  return tprt__cuda_norm_grad("layernorm_grad", x, gamma, dy, NULL, dx, dgamma, dbeta, eps, chunks, true, stream);
}

extern "C" tprt_status_t tprt_cuda_rmsnorm_grad_acc(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                                    const tprt_tensor_t* dy, const tprt_tensor_t* acc,
                                                    tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks,
                                                    bool pieces, cudaStream_t stream) {
  if (!acc) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "rmsnorm_grad: acc must be given");
  return tprt__cuda_norm_grad("rmsnorm_grad", x, gamma, dy, acc, dx, dgamma, NULL, eps, chunks, pieces, stream);
}
