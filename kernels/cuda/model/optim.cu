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
#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

constexpr int kTprtSumsqThreads = 256;
constexpr int kTprtSumsqMaxBlocks = 1024;
constexpr int kTprtSumsqLoads = 8;

// Adds |w| (a sum of squares' significands shifted onto limb |j|'s grid) into limbs j.. of |acc|,
// 32 bits per limb: each limb gains less than 2^32, as from one tprt_sumsq_add.
static __device__ __forceinline__ void tprt__sumsq_flush(int64_t* acc, int j, unsigned __int128 w) {
#pragma unroll
  for (int k = 0; k < 4; ++k, w >>= 32)
    if (j + k < TPRT_SUMSQ_LIMBS) acc[j + k] += (int64_t)(uint64_t)(w & 0xFFFFFFFFu);
}

// Each thread's limbs live in shared memory, a row of TPRT_SUMSQ_WORDS (odd) words per thread: the
// limb an element reaches depends on its exponent, which registers cannot index. With an odd row
// length a half-warp's 64-bit accesses to any one limb fall in different banks. In front of the
// row, two 128-bit registers each sum the squares landing on one limb index j (the square's
// significand M < 2^48 shifted by r < 32 bits: below 2^80 each, so 2^47 of them fit): a tensor's
// elements span few binades, so most squares add in a register, and a square of another j sends the
// older register's sum to the row (tprt__sumsq_flush). The same integer as tprt_sumsq_add's, so the
// same normalized words.
template <int D>
__global__ void __launch_bounds__(kTprtSumsqThreads) tprt__sumsq_blocks(const void* __restrict__ g, int64_t n,
                                                                       int64_t* __restrict__ rows) {
  __shared__ int64_t sm[kTprtSumsqThreads * TPRT_SUMSQ_WORDS];
  int64_t* acc = sm + threadIdx.x * TPRT_SUMSQ_WORDS;
  for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) acc[k] = 0;
  int ja = -1, jb = -1;
  unsigned __int128 wa = 0, wb = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t since = 0;
  // kTprtSumsqLoads elements a stride apart per step, loaded together: one load in flight per
  // thread would leave the loop waiting on memory.
  for (int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < n; i0 += kTprtSumsqLoads * stride) {
    float xs[kTprtSumsqLoads];
#pragma unroll
    for (int u = 0; u < kTprtSumsqLoads; ++u) xs[u] = i0 + u * stride < n ? tprt__cuda_ld(g, D, i0 + u * stride) : 0.0f;
#pragma unroll
    for (int u = 0; u < kTprtSumsqLoads; ++u) {
      const float x = xs[u];
      const uint32_t b = tprt_f32_bits(x), e = (b >> 23) & 0xFFu, f = b & 0x7FFFFFu;
      if (e == 0xFFu) {  // NaN or infinity: counted in the last word
        tprt_sumsq_add(acc, x);
        continue;
      }
      if (e == 0 && f == 0) continue;
      const uint64_t m = e ? (f | 0x800000u) : f;
      const int eg = e ? (int)e - 150 : -149, p = 2 * eg - TPRT_SUMSQ_BASE, j = p >> 5;
      const unsigned __int128 c = (unsigned __int128)(m * m) << (p & 31);
      if (j == ja) {
        wa += c;
      } else if (j == jb) {
        wb += c;
      } else {
        if (jb >= 0) {
          tprt__sumsq_flush(acc, jb, wb);
          if (++since == TPRT_SUMSQ_BATCH) tprt_sumsq_normalize(acc), since = 0;
        }
        jb = ja, wb = wa, ja = j, wa = c;
      }
    }
  }
  if (ja >= 0) tprt__sumsq_flush(acc, ja, wa);
  if (jb >= 0) tprt__sumsq_flush(acc, jb, wb);
  tprt_sumsq_normalize(acc);
  __syncthreads();
  // Each limb below 2^32 (the last word below 2^63 / threads in any real tensor): the block's sum
  // of 256 of them does not overflow.
  if (threadIdx.x < TPRT_SUMSQ_WORDS) {
    int64_t sum = 0;
    for (int t = 0; t < kTprtSumsqThreads; ++t) sum += sm[t * TPRT_SUMSQ_WORDS + threadIdx.x];
    rows[(int64_t)blockIdx.x * TPRT_SUMSQ_WORDS + threadIdx.x] = sum;
  }
}

// The incoming accumulator plus the blocks' rows: thread (lane, k) of a [32, WORDS] block sums limb
// k of rows lane, lane + 32, ... (integers: exact in any order; a row's limbs are below 2^40, so
// 2^23 rows fit in an int64 before the carries), a warp shuffle sums the lanes, and one thread
// normalizes. The same integer, so the same normalized words, as any other order.
__global__ void tprt__sumsq_finish(const int64_t* __restrict__ acc, const int64_t* __restrict__ rows, int blocks,
                                   int64_t* __restrict__ out) {
  __shared__ int64_t total[TPRT_SUMSQ_WORDS];
  const int lane = threadIdx.x, k = threadIdx.y;
  int64_t sum = 0;
  for (int b = lane; b < blocks; b += 32) sum += rows[(int64_t)b * TPRT_SUMSQ_WORDS + k];
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, off);
  if (lane == 0) total[k] = sum + (acc ? acc[k] : 0);
  __syncthreads();
  if (lane == 0 && k == 0) {
    tprt_sumsq_normalize(total);
    for (int w = 0; w < TPRT_SUMSQ_WORDS; ++w) out[w] = total[w];
  }
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

extern "C" tprt_status_t tprt_cuda_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out,
                                         bool count, cudaStream_t stream) {
  {
    tprt_status_t s0 = tprt__check_sumsq(g, acc, acc_out);
    if (s0) return s0;
  }
  int64_t n = count ? tprt_tensor_numel(g) : 0;
  int blocks = n > 0 ? (int)tprt__cuda_div_up(n, kTprtSumsqThreads) : 0;
  if (blocks > kTprtSumsqMaxBlocks) blocks = kTprtSumsqMaxBlocks;
  int64_t* rows = NULL;
  if (blocks) {
    TPRT_CUDA_RETURN_IF_ERROR(
        tprt__cuda_malloc_async((void**)&rows, (size_t)blocks * TPRT_SUMSQ_WORDS * sizeof(int64_t), stream));
    tprt__cuda_float_dispatch(g->dtype, [&](auto d) {
      tprt__sumsq_blocks<decltype(d)::value><<<blocks, kTprtSumsqThreads, 0, stream>>>(g->data, n, rows);
    });
  }
  tprt__sumsq_finish<<<1, dim3(32, TPRT_SUMSQ_WORDS), 0, stream>>>(acc ? (const int64_t*)acc->data : NULL, rows, blocks, (int64_t*)acc_out->data);
  tprt_status_t s = tprt__launched("sumsq kernel");
  if (rows) tprt__cuda_free_async(rows, stream);
  return s;
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
