// The register-tiled exact GEMM tile shared by the exact contractions (linear.cu: dense forward,
// dgrad and wgrad; grouped_linear.cu): one thread block computes a BM x BN tile of
//   out[m, n] = Σ_k a[m, k]·b[n, k]
// with the canonical K accumulation of docs/numerics.md, bitwise tprt_dot_canonical:
//   chunk c (S = ceil(K/C), c = 0..C-1):  acc = +0; acc = fmaf(a[m,k], b[n,k], acc) for k in
//       [c·S, min((c+1)·S, K)) increasing; acc = acc + 0 when the chunk is short (zero padding)
//   tree: p[i] = p[i] + p[i+s] for s = 1, 2, 4, ... (folded as chunks end, see below).
// Every thread owns TM x TN outputs and runs each one's fma chain itself, one __fmaf_rn per k in
// increasing k: the order is the definition's whatever the tile shape, the grid or the GPU.
//
// Operand layouts (tprt__layout_t): ROWS, the operand is [R, K] row-major (K contiguous: x and
// w of a forward linear); KMAJOR, it is [K, R] row-major (R contiguous: w of a dgrad, dy and x of
// a wgrad), read in place instead of through a transposed copy. Dtypes bf16 / f16 / f32, widened
// to f32 exactly on load (tprt_numerics.h's integer conversions).
//
// Pipeline: the K loop walks tiles of at most BK k values that never straddle a chunk boundary
// (a chunk of S values is S / BK full tiles and one partial tile of S % BK, so no padding term
// ever enters an fma chain). Each tile is loaded from global memory into registers while the
// previous one is computed from shared memory, then stored k-major (s[k][row], f32) into the
// other half of a double buffer: one barrier per tile. With VEC, global loads are 16 bytes wide
// (uint4: 8 bf16/f16 or 4 f32 along the contiguous dimension; the launcher checks alignment: base
// addresses 16-byte aligned, and for ROWS K and S multiples of the vector, so that every tile
// start is one; for KMAJOR R a multiple of it); otherwise scalar loads of any alignment. The
// k-major shared stores are conflict-free for VEC (a warp writes 32 consecutive rows, or 128
// contiguous bytes); the fragment reads are float4 (a warp reads 2 A and 16 consecutive B
// float4: no conflicts). Rows past the operand's end load zeros (their outputs are not stored).
//
// The chunk tree is folded as chunks end with a binary counter: chunk c merges with the pending
// left subtree of every level at which c has a one bit (from the bottom: left = lower chunks,
// exactly the tree's operand order), then parks the sum one level up. The pending subtrees live
// in local memory (LEVELS levels of TM x TN floats, touched once per chunk, never per k); the
// last chunk's merges leave the whole tree in the accumulators. LEVELS >= log2(chunks).
#ifndef TPRT_LINEAR_TILE_CUH_
#define TPRT_LINEAR_TILE_CUH_

#include "tprt_cuda_internal.cuh"

/// How an operand is stored (see the file comment).
enum tprt__layout_t { TPRT__ROWS = 0, TPRT__KMAJOR = 1 };

/// A tile shape: BM x BN outputs per block, BK k values per shared-memory tile, TM x TN outputs
/// per thread (multiples of 4: float4 fragments), MIN_BLOCKS for __launch_bounds__.
template <int BM_, int BN_, int BK_, int TM_, int TN_, int MIN_BLOCKS_>
struct tprt__tile_cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_, MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int TX = BN / TN, TY = BM / TM;  // threads along N and along M
  static constexpr int THREADS = TX * TY;
  // Shared row pitch in floats: +4 keeps rows 16-byte aligned for the float4 fragment reads and
  // spreads a scalar loader's k-major stores over the banks (2-way at most for BK 16).
  static constexpr int PM = BM + 4, PN = BN + 4;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "float4 fragments");
  static_assert(BM % (4 * TY) == 0 && BN % (4 * TX) == 0, "fragments tile the block");
};

/// The large tile: 128 x 128 outputs, 256 threads (16 x 16) of 8 x 8 outputs (64 fma per 16
/// bytes of fragment reads), k tiles of 16. Up to 255 registers (one block per SM), 33.8 KB of
/// shared memory.
typedef tprt__tile_cfg<128, 128, 16, 8, 8, 1> tprt__tile_large;
/// The small tile for grids too small to fill the GPU with large tiles (small M or N): 64 x 64,
/// 256 threads of 4 x 4, k tiles of 32, two blocks per SM.
typedef tprt__tile_cfg<64, 64, 32, 4, 4, 2> tprt__tile_small;

/// The shared memory of one block: the double-buffered k-major tiles of a and b.
template <class C>
struct tprt__tile_smem {
  float a[2][C::BK][C::PM];
  float b[2][C::BK][C::PN];
};

/// Element size in bytes and 16-byte vector width in elements of dtype D.
template <int D>
struct tprt__elem {
  static constexpr int BYTES = D == TPRT_DTYPE_F32 ? 4 : 2;
  static constexpr int V = 16 / BYTES;
};

/// f16 -> f32, bitwise tprt_f16_to_f32 without its branches and normalization loop: the
/// magnitude bits shifted into an f32 are the value times 2^-112 (a subnormal f16 lands on an
/// f32 subnormal, which is kept: no flush to zero), and the multiplication by 2^112 is exact; inf
/// and NaN keep their payload as in tprt_f16_to_f32.
static __device__ __forceinline__ float tprt__f16_to_f32(uint32_t h) {
  const uint32_t em = h & 0x7FFFu, sign = (h & 0x8000u) << 16;
  const uint32_t bits = em >= 0x7C00u ? 0x7F800000u | ((em & 0x3FFu) << 13)
                                      : __float_as_uint(__fmul_rn(__uint_as_float(em << 13), 0x1p112f));
  return __uint_as_float(sign | bits);
}

/// Widens the V elements of a 16-byte vector to f32 (bitwise tprt_load_elem).
template <int D>
static __device__ __forceinline__ void tprt__widen(const uint4 r, float* f) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (D == TPRT_DTYPE_F32) {
      f[i] = __uint_as_float(w[i]);
    } else if (D == TPRT_DTYPE_BF16) {  // little endian: the low half is the lower element
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    } else {
      f[2 * i] = tprt__f16_to_f32(w[i] & 0xFFFFu);
      f[2 * i + 1] = tprt__f16_to_f32(w[i] >> 16);
    }
  }
}

/// Moves one operand's tiles, global -> registers (load) -> shared memory (store): R rows of the
/// block starting at row0 of an operand with |rows| rows and contracted length |k|.
template <class C, int R, int D, bool VEC, int LAYOUT>
struct tprt__tile_loader;

// ROWS, 16-byte vectors: vector v = tid + i·THREADS is row v % R, k offset (v / R)·V, so that a
// warp's 32 lanes hold 32 consecutive rows of one k range (conflict-free k-major stores).
template <class C, int R, int D>
struct tprt__tile_loader<C, R, D, true, TPRT__ROWS> {
  static constexpr int V = tprt__elem<D>::V, NV = R * C::BK / V / C::THREADS;
  static_assert(NV >= 1 && NV * V * C::THREADS == R * C::BK, "whole vectors per thread");
  const char* row_ptr[NV];  // the row's start, or NULL past the operand's end
  uint4 r[NV];
  __device__ __forceinline__ tprt__tile_loader(const void* p, int64_t rows, int64_t row0, int64_t k) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int64_t gr = row0 + (threadIdx.x + i * C::THREADS) % R;
      row_ptr[i] = gr < rows ? (const char*)p + gr * k * tprt__elem<D>::BYTES : NULL;
    }
  }
  __device__ __forceinline__ void load(int64_t kt, int kn) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int kv = (threadIdx.x + i * C::THREADS) / R * V;
      r[i] = row_ptr[i] && kv < kn ? __ldg((const uint4*)(row_ptr[i] + (kt + kv) * tprt__elem<D>::BYTES))
                                   : make_uint4(0, 0, 0, 0);
    }
  }
  template <int P>
  __device__ __forceinline__ void store(float (*s)[P]) const {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int v = threadIdx.x + i * C::THREADS, row = v % R, kv = v / R * V;
      float f[V];
      tprt__widen<D>(r[i], f);
#pragma unroll
      for (int e = 0; e < V; ++e) s[kv + e][row] = f[e];
    }
  }
};

/// One element of dtype D at |p|, widened to f32 (bitwise tprt_load_elem).
template <int D>
static __device__ __forceinline__ float tprt__ld1(const char* p) {
  if (D == TPRT_DTYPE_F32) return *(const float*)p;
  if (D == TPRT_DTYPE_BF16) return tprt_bf16_to_f32(*(const uint16_t*)p);
  return tprt__f16_to_f32(*(const uint16_t*)p);
}

// ROWS, scalar: element e = tid + i·THREADS is row e / BK, k e % BK (consecutive lanes read
// consecutive k of a row: coalesced). THREADS is a multiple of BK, so a thread keeps one k offset
// and its rows are THREADS / BK apart.
template <class C, int R, int D>
struct tprt__tile_loader<C, R, D, false, TPRT__ROWS> {
  static constexpr int NE = R * C::BK / C::THREADS, STEP = C::THREADS / C::BK;
  static_assert(NE * C::THREADS == R * C::BK && STEP * C::BK == C::THREADS, "whole elements per thread");
  const char* p;  // the thread's first element: row row0 + tid / BK, k tid % BK
  int64_t step;   // bytes from one of the thread's rows to the next
  int64_t left;   // rows of the operand from the thread's first on
  float r[NE];
  __device__ __forceinline__ tprt__tile_loader(const void* p_, int64_t rows, int64_t row0, int64_t k)
      : p((const char*)p_ + ((row0 + threadIdx.x / C::BK) * k + threadIdx.x % C::BK) * tprt__elem<D>::BYTES),
        step(STEP * k * tprt__elem<D>::BYTES),
        left(rows - row0 - threadIdx.x / C::BK) {}
  __device__ __forceinline__ void load(int64_t kt, int kn) {
    const bool in_k = (int)(threadIdx.x % C::BK) < kn;
    const char* q = p + kt * tprt__elem<D>::BYTES;
#pragma unroll
    for (int i = 0; i < NE; ++i) r[i] = in_k && i * STEP < left ? tprt__ld1<D>(q + i * step) : 0.0f;
  }
  template <int P>
  __device__ __forceinline__ void store(float (*s)[P]) const {
#pragma unroll
    for (int i = 0; i < NE; ++i) s[threadIdx.x % C::BK][threadIdx.x / C::BK + i * STEP] = r[i];
  }
};

// KMAJOR, 16-byte vectors along the rows: vector v is k v / (R/V), rows (v % (R/V))·V.. +V (the
// operand's row count is a multiple of V, so a vector is wholly inside or wholly past its end).
template <class C, int R, int D>
struct tprt__tile_loader<C, R, D, true, TPRT__KMAJOR> {
  static constexpr int V = tprt__elem<D>::V, NV = R * C::BK / V / C::THREADS;
  static_assert(NV >= 1 && NV * V * C::THREADS == R * C::BK, "whole vectors per thread");
  const char* p;  // the block's first row at k = 0
  int64_t ld;     // bytes from one k to the next
  int64_t left;   // rows of the operand from the block's first on
  uint4 r[NV];
  __device__ __forceinline__ tprt__tile_loader(const void* p_, int64_t rows, int64_t row0, int64_t k)
      : p((const char*)p_ + row0 * tprt__elem<D>::BYTES), ld(rows * tprt__elem<D>::BYTES), left(rows - row0) {}
  __device__ __forceinline__ void load(int64_t kt, int kn) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int v = threadIdx.x + i * C::THREADS, kk = v / (R / V), row = v % (R / V) * V;
      r[i] = kk < kn && row < left ? __ldg((const uint4*)(p + (kt + kk) * ld + row * tprt__elem<D>::BYTES))
                                   : make_uint4(0, 0, 0, 0);
    }
  }
  template <int P>
  __device__ __forceinline__ void store(float (*s)[P]) const {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int v = threadIdx.x + i * C::THREADS, kk = v / (R / V), row = v % (R / V) * V;
      float f[V];
      tprt__widen<D>(r[i], f);
#pragma unroll
      for (int e = 0; e < V; e += 4) *(float4*)&s[kk][row + e] = make_float4(f[e], f[e + 1], f[e + 2], f[e + 3]);
    }
  }
};

// KMAJOR, scalar: element e = tid + i·THREADS is k e / R, row e % R (consecutive lanes read
// consecutive rows). THREADS is a multiple of R, so a thread keeps one row and its k values are
// THREADS / R apart.
template <class C, int R, int D>
struct tprt__tile_loader<C, R, D, false, TPRT__KMAJOR> {
  static constexpr int NE = R * C::BK / C::THREADS, STEP = C::THREADS / R;
  static_assert(NE * C::THREADS == R * C::BK && STEP * R == C::THREADS, "whole elements per thread");
  const char* p;  // the thread's row at k = tid / R
  int64_t ld;     // bytes from one k to the next
  bool in_rows;   // the thread's row is inside the operand
  float r[NE];
  __device__ __forceinline__ tprt__tile_loader(const void* p_, int64_t rows, int64_t row0, int64_t k)
      : p((const char*)p_ + ((int64_t)(threadIdx.x / R) * rows + row0 + threadIdx.x % R) * tprt__elem<D>::BYTES),
        ld(rows * tprt__elem<D>::BYTES),
        in_rows(row0 + threadIdx.x % R < rows) {}
  __device__ __forceinline__ void load(int64_t kt, int kn) {
    const char* q = p + kt * ld;
    const int k0 = threadIdx.x / R;
#pragma unroll
    for (int i = 0; i < NE; ++i) r[i] = in_rows && k0 + i * STEP < kn ? tprt__ld1<D>(q + i * STEP * ld) : 0.0f;
  }
  template <int P>
  __device__ __forceinline__ void store(float (*s)[P]) const {
#pragma unroll
    for (int i = 0; i < NE; ++i) s[threadIdx.x / R + i * STEP][threadIdx.x % R] = r[i];
  }
};

/// Row (within the block tile) of a thread's output i: float4 groups of 4 rows, TY apart.
template <class C>
static __device__ __forceinline__ int tprt__tile_row(int i) {
  return (i / 4) * (4 * C::TY) + (int)(threadIdx.x / C::TX) * 4 + i % 4;
}
/// Column of a thread's output j.
template <class C>
static __device__ __forceinline__ int tprt__tile_col(int j) {
  return (j / 4) * (4 * C::TX) + (int)(threadIdx.x % C::TX) * 4 + j % 4;
}

/// One k step of the tile: every output's acc = fmaf(a[row][kk], b[col][kk], acc).
template <class C>
static __device__ __forceinline__ void tprt__tile_step(const float (*sa)[C::PM], const float (*sb)[C::PN], int kk,
                                                       float (&acc)[C::TM][C::TN]) {
  const int ty = threadIdx.x / C::TX, tx = threadIdx.x % C::TX;
  float a[C::TM], b[C::TN];
#pragma unroll
  for (int h = 0; h < C::TM / 4; ++h) {
    const float4 v = *(const float4*)&sa[kk][h * 4 * C::TY + ty * 4];
    a[4 * h] = v.x, a[4 * h + 1] = v.y, a[4 * h + 2] = v.z, a[4 * h + 3] = v.w;
  }
#pragma unroll
  for (int g = 0; g < C::TN / 4; ++g) {
    const float4 v = *(const float4*)&sb[kk][g * 4 * C::TX + tx * 4];
    b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
  }
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
}

/// The end of chunk c: the padding term of a short chunk, then the binary-counter merges. For
/// every chunk but the last the sum is parked in |tree| and acc restarts from +0; after the last
/// one acc holds the whole tree.
template <class C, int LEVELS>
static __device__ __forceinline__ void tprt__tile_chunk_end(int c, bool is_short, int chunks,
                                                            float (&tree)[LEVELS][C::TM][C::TN],
                                                            float (&acc)[C::TM][C::TN]) {
  if (is_short) {  // the padded terms fmaf(0, 0, acc): -0 becomes +0
#pragma unroll
    for (int i = 0; i < C::TM; ++i)
#pragma unroll
      for (int j = 0; j < C::TN; ++j) acc[i][j] = __fadd_rn(acc[i][j], 0.0f);
  }
  int level = 0;
  for (; (c >> level) & 1; ++level) {
#pragma unroll
    for (int i = 0; i < C::TM; ++i)
#pragma unroll
      for (int j = 0; j < C::TN; ++j) acc[i][j] = __fadd_rn(tree[level][i][j], acc[i][j]);
  }
  if (c + 1 < chunks) {
#pragma unroll
    for (int i = 0; i < C::TM; ++i)
#pragma unroll
      for (int j = 0; j < C::TN; ++j) tree[level][i][j] = acc[i][j], acc[i][j] = 0.0f;
  }
}

/// The block's output tile: acc[i][j] = the canonical sum for row m0 + tprt__tile_row(i) of a
/// (|a_rows| rows, layout LA) and row n0 + tprt__tile_col(j) of b (|b_rows| rows, layout LB),
/// contracted over |k| in |chunks| chunks of |size| = ceil(k / chunks). Every thread of the block
/// must call it (it synchronizes); it leaves the shared memory free for the next call.
template <class C, int D, bool VEC, int LEVELS, int LA, int LB>
static __device__ __forceinline__ void tprt__tile_gemm(const void* __restrict__ a, int64_t a_rows, int64_t m0,
                                                       const void* __restrict__ b, int64_t b_rows, int64_t n0,
                                                       int64_t k, int chunks, int64_t size, tprt__tile_smem<C>& sm,
                                                       float (&acc)[C::TM][C::TN]) {
  float tree[LEVELS][C::TM][C::TN];  // pending left subtrees, per level
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = 0.0f;
  tprt__tile_loader<C, C::BM, D, VEC, LA> la(a, a_rows, m0, k);
  tprt__tile_loader<C, C::BN, D, VEC, LB> lb(b, b_rows, n0, k);

  // The current tile is [ks, ks + kn) of chunk c, which ends at c_end; chunks end in order, and
  // only the chunks after K's end (c·S >= K) are empty.
  int c = 0;
  int64_t c_end = size < k ? size : k, ks = 0;
  int kn = (int)(c_end < C::BK ? c_end : C::BK);
  bool have = k > 0;
  if (have) {
    la.load(0, kn);
    lb.load(0, kn);
    la.store(sm.a[0]);
    lb.store(sm.b[0]);
  }
  __syncthreads();
  int buf = 0;
  while (have) {
    const int64_t ke = ks + kn;
    const bool ends = ke == c_end;
    const int64_t next_end = ends ? (c_end + size < k ? c_end + size : k) : c_end;
    const bool next = ke < k;
    const int next_kn = next ? (int)(next_end - ke < C::BK ? next_end - ke : C::BK) : 0;
    if (next) {  // the next tile's global loads are in flight during this tile's fmas
      la.load(ke, next_kn);
      lb.load(ke, next_kn);
    }
    const float(*sa)[C::PM] = sm.a[buf];
    const float(*sb)[C::PN] = sm.b[buf];
    if (kn == C::BK) {
#pragma unroll
      for (int kk = 0; kk < C::BK; ++kk) tprt__tile_step<C>(sa, sb, kk, acc);
    } else {  // the partial tile at a chunk's end: exactly the chunk's remaining k
#pragma unroll 1
      for (int kk = 0; kk < kn; ++kk) tprt__tile_step<C>(sa, sb, kk, acc);
    }
    if (next) {
      la.store(sm.a[buf ^ 1]);
      lb.store(sm.b[buf ^ 1]);
    }
    __syncthreads();  // the stores are visible, and nobody reads sm.*[buf] any more
    buf ^= 1;
    if (ends) {
      tprt__tile_chunk_end<C, LEVELS>(c, c_end - (int64_t)c * size < size, chunks, tree, acc);
      ++c;
    }
    ks = ke, kn = next_kn, c_end = next_end, have = next;
  }
  for (; c < chunks; ++c) tprt__tile_chunk_end<C, LEVELS>(c, size > 0, chunks, tree, acc);  // empty chunks
}

/// Host side (linear.cu). Whether a GEMM's operands allow the 16-byte loads (VEC) of its
/// kernels: a is [m, k] (or k-major), b [n, k] (or k-major), |chunks| <= 2^TPRT__GEMM_LEVELS_VEC.
bool tprt__gemm_vec(const void* a, int a_kmajor, const void* b, int b_kmajor, int dtype, int64_t m, int64_t n,
                    int64_t k, int chunks);
/// Whether an m x n output takes the large tile: |tile| (TPRT_CUDA_TILE_*), or for AUTO whether
/// the large tiles make at least one block per SM of the current device.
bool tprt__gemm_large_tile(int tile, int64_t m, int64_t n);

// Levels of pending subtrees: 4 serves chunks <= 16 (the vector kernels'), 10 every chunk count
// up to TPRT_MAX_CHUNKS = 2^10 (the scalar kernels').
#define TPRT__GEMM_LEVELS_VEC 4
#define TPRT__GEMM_LEVELS_ANY 10
static_assert((1 << TPRT__GEMM_LEVELS_ANY) == TPRT_MAX_CHUNKS, "tree depth covers TPRT_MAX_CHUNKS");

#endif  // TPRT_LINEAR_TILE_CUH_
