// The optimizer's kernels in every numerics mode, bitwise tprt_cpu_sumsq, tprt_cpu_global_norm and
// tprt_cpu_adamw (kernels/cpu/cpu_optim.c; docs/numerics.md, "Optimizer"), on the same helpers of
// tprt_numerics.h.
//
// sumsq: the exact sum of squares is an integer on a fixed grid (tprt_sumsq_add's limbs), so any
// partition of the elements gives the same normalized accumulator: each thread of a grid-stride
// loop adds its elements into its own limbs (two registers in front of a row of shared memory)
// and normalizes them, each
// block sums its threads' limbs (integers) into one row of a [blocks, 21] scratch, and one block
// adds the rows to the incoming accumulator (a warp per limb) and normalizes. No atomics, no floating-point sums.
// global_norm: one thread, as the CPU kernel. adamw: a thread per 4 elements (tprt_adamw_elem).
// sumsq_fast (fast numerics): f64 sums of the squares, put on the accumulator's grid at the end.
#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

constexpr int kTprtSumsqThreads = 256;
// Rows of the block's column sums: kTprtSumsqThreads / TPRT_SUMSQ_WORDS threads per word.
constexpr int kTprtSumsqCols = kTprtSumsqThreads / TPRT_SUMSQ_WORDS;

// Adds |w| (a sum of squares' significands shifted onto limb |j|'s grid) into limbs j.. of |acc|,
// 32 bits per limb: each limb gains less than 2^32, as from one tprt_sumsq_add.
static __device__ __forceinline__ void tprt__sumsq_flush(int64_t* acc, int j, unsigned __int128 w) {
#pragma unroll
  for (int k = 0; k < 4; ++k, w >>= 32)
    if (j + k < TPRT_SUMSQ_LIMBS) acc[j + k] += (int64_t)(uint64_t)(w & 0xFFFFFFFFu);
}

// A thread's running sum: two 128-bit registers in front of its row of limbs (tprt__sumsq_blocks).
typedef struct {
  int64_t* acc;
  int ja, jb;
  unsigned __int128 wa, wb;
  int64_t since;
} tprt__sumsq_thread_t;

static __device__ __forceinline__ void tprt__sumsq_elem(tprt__sumsq_thread_t* t, float x) {
  const uint32_t b = tprt_f32_bits(x), e = (b >> 23) & 0xFFu, f = b & 0x7FFFFFu;
  if (e == 0xFFu) {  // NaN or infinity: counted in the last word
    tprt_sumsq_add(t->acc, x);
    return;
  }
  if (e == 0 && f == 0) return;
  const uint32_t m = e ? (f | 0x800000u) : f;
  const int eg = e ? (int)e - 150 : -149, p = 2 * eg - TPRT_SUMSQ_BASE, j = p >> 5;
  const unsigned __int128 c = (unsigned __int128)((uint64_t)m * m) << (p & 31);
  if (j == t->ja) {
    t->wa += c;
  } else if (j == t->jb) {
    t->wb += c;
  } else {
    if (t->jb >= 0) {
      tprt__sumsq_flush(t->acc, t->jb, t->wb);
      if (++t->since == TPRT_SUMSQ_BATCH) tprt_sumsq_normalize(t->acc), t->since = 0;
    }
    t->jb = t->ja, t->wb = t->wa, t->ja = j, t->wa = c;
  }
}

// The exact accumulator as the kernel's policy: elements one at a time, nothing per step.
struct tprt__sumsq_exact_t {
  tprt__sumsq_thread_t t;
  __device__ explicit tprt__sumsq_exact_t(int64_t* acc) : t{acc, -1, -1, 0, 0, 0} {}
  __device__ __forceinline__ void elem(float x) { tprt__sumsq_elem(&t, x); }
  __device__ __forceinline__ void step(int) {}
  __device__ __forceinline__ void finish() {
    if (t.ja >= 0) tprt__sumsq_flush(t.acc, t.ja, t.wa);
    if (t.jb >= 0) tprt__sumsq_flush(t.acc, t.jb, t.wb);
    tprt_sumsq_normalize(t.acc);
  }
};

// Invariant numerics (tprt_cuda_sumsq_cut): each square's significand M = m·m (48 bits) is cut to
// its top 24 bits, M >> 24 (one multiply-high), and those are summed exactly on the limbs' grid.
// The cut depends only on the element, so the sum is an integer sum of per-element values: the
// same bits for any partition of the elements, as the exact sum (each square less than 2^-22 of
// its value below it; a square under 2^-274 is dropped). The cut squares are below 2^56 once shifted
// onto a limb, so 64-bit registers take 256 of them before they go to the limbs: a quarter of the
// exact accumulator's integer work per element. NaN and infinities are counted as tprt_sumsq_add
// counts them.
struct tprt__sumsq_cut_t {
  int64_t* acc;
  int ja = -1, jb = -1;
  uint64_t wa = 0, wb = 0;
  int64_t since = 0;  // flushes since the limbs were last normalized
  int elems = 0;      // elements since the registers were last emptied
  __device__ explicit tprt__sumsq_cut_t(int64_t* a) : acc(a) {}
  __device__ __forceinline__ void flush(int j, uint64_t w) {
    acc[j] += (int64_t)(w & 0xFFFFFFFFu);
    acc[j + 1] += (int64_t)(w >> 32);
    if (++since == TPRT_SUMSQ_BATCH) tprt_sumsq_normalize(acc), since = 0;
  }
  __device__ __forceinline__ void elem(float x) {
    const uint32_t b = tprt_f32_bits(x), e = (b >> 23) & 0xFFu, f = b & 0x7FFFFFu;
    if (e == 0xFFu) {
      tprt_sumsq_add(acc, x);
      return;
    }
    const uint32_t m = e ? (f | 0x800000u) : f;
    const uint32_t top = __umulhi(m << 4, m << 4);  // (m·m·2^8) >> 32 = M >> 24
    if (!top) return;
    const int q = 2 * (e ? (int)e - 150 : -149) - TPRT_SUMSQ_BASE + 24, j = q >> 5;
    const uint64_t c = (uint64_t)top << (q & 31);
    if (j == ja) {
      wa += c;
    } else if (j == jb) {
      wb += c;
    } else {
      if (jb >= 0) flush(jb, wb);
      jb = ja, wb = wa, ja = j, wa = c;
    }
  }
  /// |n| more elements come next (n <= 16): empties the registers before they could overflow.
  __device__ __forceinline__ void step(int n) {
    elems += n;
    if (elems + 16 > 256) {
      if (ja >= 0) flush(ja, wa);
      if (jb >= 0) flush(jb, wb);
      wa = wb = 0;
      elems = 0;
    }
  }
  __device__ __forceinline__ void finish() {
    if (ja >= 0) flush(ja, wa);
    if (jb >= 0) flush(jb, wb);
    tprt_sumsq_normalize(acc);
  }
};

// Each thread's limbs live in shared memory, a row of TPRT_SUMSQ_WORDS (odd) words per thread: the
// limb an element reaches depends on its exponent, which registers cannot index. With an odd row
// length a half-warp's 64-bit accesses to any one limb fall in different banks. In front of the
// row, two 128-bit registers each sum the squares landing on one limb index j (the square's
// significand M < 2^48 shifted by r < 32 bits: below 2^80 each, so 2^47 of them fit): a tensor's
// elements span few binades, so most squares add in a register, and a square of another j sends the
// older register's sum to the row (tprt__sumsq_flush). The same integer as tprt_sumsq_add's, so the
// same normalized words. Elements are read 16 bytes at a time when |vec| (g 16-byte aligned), two
// loads in flight per thread; the grid is the blocks the GPU holds at once (a single wave).
// The block's rows are summed by columns (kTprtSumsqCols threads per word, then one per word) into
// rows[blockIdx.x]; the last block to finish (a counter in |done|, zeroed by the launcher) adds
// every row and the incoming accumulator into |out| and normalizes. Integers: exact in any order.
// |Acc|: tprt__sumsq_exact_t (exact) or tprt__sumsq_cut_t (the cut squares of invariant numerics).
template <int D, class Acc>
__global__ void __launch_bounds__(kTprtSumsqThreads)
    tprt__sumsq_blocks(const void* __restrict__ g, int64_t n, bool vec, int64_t* __restrict__ rows,
                       unsigned* __restrict__ done, const int64_t* acc_in, int64_t* out) {
  constexpr int kElems = D == TPRT_DTYPE_F32 ? 4 : 8;  // per 16-byte load
  __shared__ int64_t sm[kTprtSumsqThreads * TPRT_SUMSQ_WORDS];
  __shared__ int64_t cols[kTprtSumsqCols][TPRT_SUMSQ_WORDS];
  __shared__ bool last;
  int64_t* limbs = sm + threadIdx.x * TPRT_SUMSQ_WORDS;
  for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) limbs[k] = 0;
  Acc t(limbs);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t nv = vec ? n / kElems : 0;
  for (int64_t q = first; q < nv; q += 2 * stride) {
    uint4 r0 = ((const uint4*)g)[q], r1 = q + stride < nv ? ((const uint4*)g)[q + stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int e = 0; e < kElems; ++e) t.elem(tprt_load_elem(&r0, D, e));
#pragma unroll
    for (int e = 0; e < kElems; ++e) t.elem(tprt_load_elem(&r1, D, e));
    t.step(2 * kElems);
  }
  for (int64_t i = nv * kElems + first; i < n; i += stride) {
    t.elem(tprt__cuda_ld(g, D, i));
    t.step(1);
  }
  t.finish();
  __syncthreads();
  // Each limb below 2^32 (the last word below 2^63 / threads in any real tensor): the block's sum
  // of 256 of them does not overflow.
  const int word = threadIdx.x % TPRT_SUMSQ_WORDS, col = threadIdx.x / TPRT_SUMSQ_WORDS;
  if (col < kTprtSumsqCols) {
    int64_t sum = 0;
    for (int r = col; r < kTprtSumsqThreads; r += kTprtSumsqCols) sum += sm[r * TPRT_SUMSQ_WORDS + word];
    cols[col][word] = sum;
  }
  __syncthreads();
  if (threadIdx.x < TPRT_SUMSQ_WORDS) {
    int64_t sum = 0;
    for (int c = 0; c < kTprtSumsqCols; ++c) sum += cols[c][threadIdx.x];
    rows[(int64_t)blockIdx.x * TPRT_SUMSQ_WORDS + threadIdx.x] = sum;
    __threadfence();
  }
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The last block: rows' limbs are below 2^40, so 2^23 rows fit in an int64 before the carries.
  if (col < kTprtSumsqCols) {
    int64_t sum = 0;
    for (int64_t r = col; r < gridDim.x; r += kTprtSumsqCols) sum += ((volatile int64_t*)rows)[r * TPRT_SUMSQ_WORDS + word];
    cols[col][word] = sum;
  }
  __syncthreads();
  if (threadIdx.x < TPRT_SUMSQ_WORDS) {
    int64_t sum = acc_in ? acc_in[threadIdx.x] : 0;
    for (int c = 0; c < kTprtSumsqCols; ++c) sum += cols[c][threadIdx.x];
    sm[threadIdx.x] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tprt_sumsq_normalize(sm);
    for (int w = 0; w < TPRT_SUMSQ_WORDS; ++w) out[w] = sm[w];
  }
}

// Fast numerics: each thread sums its elements' squares in f64 (16-byte loads when |vec|), the
// block's threads by a fixed tree of lanes and warps, into rows[blockIdx.x]; the last block to
// finish (|done|, zeroed by the launcher) sums the rows in order, puts the sum on the accumulator's
// grid (tprt__sumsq_add_f64) with the incoming accumulator, and normalizes.
constexpr int kTprtSumsqFastThreads = 256;

// Adds a sum of squares s >= 0 (or +inf / NaN) to the limbs of |acc|: s = q·2^x with q < 2^53, the
// bits below the grid's 2^TPRT_SUMSQ_BASE dropped.
static __device__ __forceinline__ void tprt__sumsq_add_f64(int64_t* acc, double s) {
  if (!(s == s)) {
    acc[TPRT_SUMSQ_LIMBS] += (int64_t)1 << 32;
    return;
  }
  if (s > 1.7976931348623157e308) {
    acc[TPRT_SUMSQ_LIMBS] += 1;
    return;
  }
  if (s <= 0.0) return;
  int x = 0;
  const double f = frexp(s, &x);                  // s = f·2^x, f in [0.5, 1)
  uint64_t q = (uint64_t)ldexp(f, 53);            // exact: 53 bits
  int p = x - 53 - TPRT_SUMSQ_BASE;               // s = q·2^(p + BASE)
  if (p < 0) {
    q = p > -64 ? q >> -p : 0;
    p = 0;
  }
  if (p / 32 >= TPRT_SUMSQ_LIMBS) {               // beyond the grid: an overflow of f32's range
    acc[TPRT_SUMSQ_LIMBS] += 1;
    return;
  }
  tprt__sumsq_flush(acc, p >> 5, (unsigned __int128)q << (p & 31));
}

template <int D>
__global__ void __launch_bounds__(kTprtSumsqFastThreads)
    tprt__sumsq_fast_blocks(const void* __restrict__ g, int64_t n, bool vec, double* __restrict__ rows,
                            unsigned* __restrict__ done, const int64_t* acc_in, int64_t* out) {
  constexpr int kElems = D == TPRT_DTYPE_F32 ? 4 : 8;
  __shared__ double warps[kTprtSumsqFastThreads / 32];
  __shared__ int64_t total[TPRT_SUMSQ_WORDS];
  __shared__ bool last;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t nv = vec ? n / kElems : 0;
  double sum = 0.0, sum2 = 0.0;
  for (int64_t q = first; q < nv; q += 2 * stride) {  // two 16-byte loads in flight, two chains
    const uint4 r = ((const uint4*)g)[q], r2 = q + stride < nv ? ((const uint4*)g)[q + stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const float v = tprt_load_elem(&r, D, e), v2 = tprt_load_elem(&r2, D, e);
      sum = fma((double)v, (double)v, sum);
      sum2 = fma((double)v2, (double)v2, sum2);
    }
  }
  sum += sum2;
  for (int64_t i = nv * kElems + first; i < n; i += stride) {
    const double v = (double)tprt__cuda_ld(g, D, i);
    sum = fma(v, v, sum);
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double b = 0.0;
    for (int w = 0; w < kTprtSumsqFastThreads / 32; ++w) b += warps[w];
    rows[blockIdx.x] = b;
    __threadfence();
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The last block: the rows in order by one warp (lanes strided, then the lanes' fixed tree).
  if (warp == 0) {
    double t = 0.0;
    for (int64_t r = lane; r < gridDim.x; r += 32) t += ((volatile double*)rows)[r];
    for (int off = 16; off > 0; off /= 2) t += __shfl_down_sync(0xFFFFFFFFu, t, off);
    if (lane == 0) {
      for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) total[k] = acc_in ? acc_in[k] : 0;
      tprt_sumsq_normalize(total);
      tprt__sumsq_add_f64(total, t);
      tprt_sumsq_normalize(total);
      for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) out[k] = total[k];
    }
  }
}

// No elements: |out| is the incoming accumulator (or zero), normalized.
__global__ void tprt__sumsq_copy(const int64_t* acc, int64_t* out) {
  int64_t total[TPRT_SUMSQ_WORDS];
  for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) total[k] = acc ? acc[k] : 0;
  tprt_sumsq_normalize(total);
  for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) out[k] = total[k];
}

__global__ void tprt__global_norm_kernel(const int64_t* __restrict__ acc, int64_t r, float* __restrict__ norm) {
  int64_t total[TPRT_SUMSQ_WORDS];
  for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) total[k] = 0;
  for (int64_t i = 0; i < r; ++i) {
    for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) total[k] += acc[i * TPRT_SUMSQ_WORDS + k];
    if ((i + 1) % TPRT_SUMSQ_BATCH == 0) tprt_sumsq_normalize(total);
  }
  tprt_sumsq_normalize(total);
  norm[0] = tprt_sumsq_norm(total);
}

// p1, m1 and v1 may be p0, m0 and v0 (an update in place): no __restrict__ on them. With |vec|
// (every pointer 16-byte aligned) a thread takes 4 consecutive elements with 16-byte loads and
// stores; the elements past the last whole 4 (and every element without |vec|) one at a time.
template <int W>
__global__ void tprt__adamw_kernel(const float* p0, const float* __restrict__ g, const float* m0, const float* v0,
                                   const float* __restrict__ hyper, const float* __restrict__ norm, int64_t n,
                                   float* p1, float* m1, float* v1, void* __restrict__ weight, bool vec) {
  float h[8];
  for (int k = 0; k < 8; ++k) h[k] = hyper[k];
  const float clip = tprt_adamw_clip(h[7], norm[0]);
  const bool apply = tprt_adamw_applies(norm[0]);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t n4 = vec ? n / 4 : 0;
  for (int64_t q = first; q < n4; q += stride) {
    float4 p = ((const float4*)p0)[q], m = ((const float4*)m0)[q], v = ((const float4*)v0)[q];
    const float4 gr = ((const float4*)g)[q];
    if (apply) {
      tprt_adamw_elem(&p.x, &m.x, &v.x, gr.x, h, clip);
      tprt_adamw_elem(&p.y, &m.y, &v.y, gr.y, h, clip);
      tprt_adamw_elem(&p.z, &m.z, &v.z, gr.z, h, clip);
      tprt_adamw_elem(&p.w, &m.w, &v.w, gr.w, h, clip);
    }
    ((float4*)p1)[q] = p;
    ((float4*)m1)[q] = m;
    ((float4*)v1)[q] = v;
    if (W == TPRT_DTYPE_F32) {
      ((float4*)weight)[q] = p;
    } else {
      uint2 packed;
      tprt__cuda_st(&packed, W, 0, p.x);
      tprt__cuda_st(&packed, W, 1, p.y);
      tprt__cuda_st(&packed, W, 2, p.z);
      tprt__cuda_st(&packed, W, 3, p.w);
      ((uint2*)weight)[q] = packed;
    }
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) {
    float p = p0[i], m = m0[i], v = v0[i];
    if (apply) tprt_adamw_elem(&p, &m, &v, g[i], h, clip);
    p1[i] = p;
    m1[i] = m;
    v1[i] = v;
    tprt__cuda_st(weight, W, i, p);
  }
}

// ------------------------------------------------------------------------------------------------
// Launchers
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__launched(const char* what) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? NULL : tprt__cuda_make_status(err, what, __FILE__, __LINE__);
}

// The device's SM count, once per process.
static int tprt__sumsq_sms(void) {
  static int sms = 0;  // benign race: every thread computes the same value
  if (!sms) {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
      (void)cudaGetLastError();
      return 132;
    }
    sms = n;
  }
  return sms;
}

// The blocks the GPU holds at once for tprt__sumsq_blocks<D, Acc> (one wave), once per process,
// dtype and accumulator.
template <int D, class Acc>
static int tprt__sumsq_wave(void) {
  static int blocks = 0;  // benign race: every thread computes the same value
  if (!blocks) {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tprt__sumsq_blocks<D, Acc>, kTprtSumsqThreads, 0) != cudaSuccess ||
        sms * per_sm < 1) {
      (void)cudaGetLastError();
      return 128;
    }
    blocks = sms * per_sm;
  }
  return blocks;
}

// The sums of squares: the integer limbs of the exact or (|mode| 1) the cut squares (the blocks the
// GPU holds at once, 2 × 16 bytes per thread and step) or, |mode| 2, the f64 sums (four blocks per
// SM). Each block writes a row
// (21 words, or one double) to a stream-ordered scratch ending with the counter of finished blocks.
static tprt_status_t tprt__sumsq_launch(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out,
                                        bool count, int mode, cudaStream_t stream) {
  const bool fast = mode == 2;
  {
    tprt_status_t s0 = tprt__check_sumsq(g, acc, acc_out);
    if (s0) return s0;
  }
  const int64_t* in = acc ? (const int64_t*)acc->data : NULL;
  int64_t* out = (int64_t*)acc_out->data;
  int64_t n = count ? tprt_tensor_numel(g) : 0;
  if (n == 0) {
    tprt__sumsq_copy<<<1, 1, 0, stream>>>(in, out);
    return tprt__launched("sumsq kernel");
  }
  const int elems = g->dtype == TPRT_DTYPE_F32 ? 4 : 8;
  const bool vec = ((uintptr_t)g->data & 15) == 0;
  int blocks = 0;
  int64_t need = 0;
  size_t row = 0;
  if (fast) {
    blocks = 4 * tprt__sumsq_sms();
    need = tprt__cuda_div_up(tprt__cuda_div_up(n, 2 * elems), kTprtSumsqFastThreads);
    row = sizeof(double);
  } else {
    tprt__cuda_float_dispatch(g->dtype, [&](auto d) {
      constexpr int D = decltype(d)::value;
      blocks = mode ? tprt__sumsq_wave<D, tprt__sumsq_cut_t>() : tprt__sumsq_wave<D, tprt__sumsq_exact_t>();
    });
    need = tprt__cuda_div_up(tprt__cuda_div_up(n, 2 * elems), kTprtSumsqThreads);
    row = TPRT_SUMSQ_WORDS * sizeof(int64_t);
  }
  if (need < blocks) blocks = (int)need;
  void* rows = NULL;
  const size_t row_bytes = (size_t)blocks * row;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&rows, row_bytes + sizeof(unsigned), stream));
  unsigned* done = (unsigned*)((char*)rows + row_bytes);
  cudaError_t err = cudaMemsetAsync(done, 0, sizeof(unsigned), stream);
  if (err == cudaSuccess)
    tprt__cuda_float_dispatch(g->dtype, [&](auto d) {
      constexpr int D = decltype(d)::value;
      if (fast)
        tprt__sumsq_fast_blocks<D><<<blocks, kTprtSumsqFastThreads, 0, stream>>>(g->data, n, vec, (double*)rows, done,
                                                                                 in, out);
      else if (mode)
        tprt__sumsq_blocks<D, tprt__sumsq_cut_t><<<blocks, kTprtSumsqThreads, 0, stream>>>(g->data, n, vec,
                                                                                         (int64_t*)rows, done, in, out);
      else
        tprt__sumsq_blocks<D, tprt__sumsq_exact_t><<<blocks, kTprtSumsqThreads, 0, stream>>>(g->data, n, vec,
                                                                                           (int64_t*)rows, done, in, out);
    });
  tprt_status_t s = err == cudaSuccess ? tprt__launched("sumsq kernel")
                                       : tprt__cuda_make_status(err, "sumsq counter", __FILE__, __LINE__);
  tprt__cuda_free_async(rows, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out,
                                         bool count, cudaStream_t stream) {
  return tprt__sumsq_launch(g, acc, acc_out, count, 0, stream);
}

extern "C" tprt_status_t tprt_cuda_sumsq_cut(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out,
                                             bool count, cudaStream_t stream) {
  return tprt__sumsq_launch(g, acc, acc_out, count, 1, stream);
}

extern "C" tprt_status_t tprt_cuda_sumsq_fast(const tprt_tensor_t* g, const tprt_tensor_t* acc,
                                              tprt_tensor_t* acc_out, bool count, cudaStream_t stream) {
  return tprt__sumsq_launch(g, acc, acc_out, count, 2, stream);
}

extern "C" tprt_status_t tprt_cuda_global_norm(const tprt_tensor_t* acc, tprt_tensor_t* norm, cudaStream_t stream) {
  {
    tprt_status_t s0 = tprt__check_global_norm(acc, norm);
    if (s0) return s0;
  }
  tprt__global_norm_kernel<<<1, 1, 0, stream>>>((const int64_t*)acc->data, acc->dims[0] / TPRT_SUMSQ_WORDS,
                                                (float*)norm->data);
  return tprt__launched("global_norm kernel");
}

extern "C" tprt_status_t tprt_cuda_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                                         const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                                         tprt_tensor_t* master_out, tprt_tensor_t* m_out, tprt_tensor_t* v_out,
                                         tprt_tensor_t* weight, cudaStream_t stream) {
  {
    tprt_status_t s0 = tprt__check_adamw(master, grad, m, v, hyper, norm, master_out, m_out, v_out, weight);
    if (s0) return s0;
  }
  int64_t n = tprt_tensor_numel(master);
  if (n == 0) return NULL;
  const void* ptrs[8] = {master->data, grad->data, m->data, v->data, master_out->data, m_out->data, v_out->data,
                         weight->data};
  bool vec = true;
  for (const void* q : ptrs) vec = vec && ((uintptr_t)q & 15) == 0;
  unsigned blocks = tprt__cuda_ew_blocks(vec ? (n + 3) / 4 : n, TPRT__CUDA_EW_THREADS);
  tprt__cuda_float_dispatch(weight->dtype, [&](auto d) {
    tprt__adamw_kernel<decltype(d)::value><<<blocks, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        (const float*)master->data, (const float*)grad->data, (const float*)m->data, (const float*)v->data,
        (const float*)hyper->data, (const float*)norm->data, n, (float*)master_out->data, (float*)m_out->data,
        (float*)v_out->data, weight->data, vec);
  });
  return tprt__launched("adamw kernel");
}
