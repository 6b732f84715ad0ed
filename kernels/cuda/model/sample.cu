// The generation kernels on the GPU: tprt_cuda_kvcache_write (a step's new rows into the KV
// caches) and tprt_cuda_sample (one token per row of logits), bitwise tprt_cpu_sample in every
// numerics mode: the same per-row arithmetic (kernels/cpu/tprt_sample_rows.h) in the same order.
//
// tp.sample runs one block of TPRT_ROW_LANES = 256 threads per row, thread j being lane j of the
// canonical row order, so the masked sums of the nucleus search are tprt_sample_mass's:
//   1. the maximum (exact in any order), then greedy or +inf rows (the first index of the maximum);
//   2. top-k: the k-th largest logit as an order-preserving integer key of the logits (±0 one key,
//      so the comparisons are the float ones): the largest key c with at least k logits at or above
//      it, found a byte at a time (a radix select: four passes with a 256-bin histogram);
//   3. top-p: bit by bit the largest key c with mass(c) >= p · mass(τ_k), each mass lane j's
//      strided sum of the weights exp((z - m) / t) then tprt_row_tree: the set at or above c is the
//      CPU's nucleus. When top-k left at most kPool logits, they are first gathered into shared
//      memory, lane by lane in row order, so that each of the 33 masses reads only them (the
//      logits below τ_k add nothing to any of the sums, so every sum is the same); otherwise the
//      weights go once into a scratch row and each mass reads the whole row;
//   4. the draw: the largest z / t + Gumbel over the allowed ids, ties to the lower id.
#include "tprt_cuda_internal.cuh"
#include "tprt_sample_rows.h"
extern "C" {
#include "tprt_cpu_internal.h"  // tprt__check_sample, tprt__check_kvcache_write
}

namespace {

constexpr int kLanes = TPRT_ROW_LANES;
constexpr int kPool = 2048;  // the logits top-k may leave for the top-p search in shared memory
constexpr int kBatch = 8;    // loads a lane issues before using them (the maximum, the greedy index)

// An order-preserving key of a non-NaN float (-0.0 shares +0.0's key).
__device__ __forceinline__ uint32_t tprt__key(float z) {
  uint32_t u = tprt_f32_bits(z);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct Shared {
  float lanes[kLanes];
  unsigned hist[256];
  int start[kLanes + 1];  // the pool: lane j's logits at [start[j], start[j + 1]), in row order
  float pz[kPool], pw[kPool];
  int32_t pi[kPool];
  uint32_t digit_pick;
  unsigned long long digit_left;
  float f[kLanes / 32];
  int64_t i[kLanes / 32];
  float total;
};

// The block's best (key, index): the larger key, ties to the lower index (tprt_sample_beats).
__device__ void tprt__block_best(Shared& sh, float* key, int64_t* idx) {
  float k = *key;
  int64_t i = *idx;
  for (int o = 16; o > 0; o /= 2) {
    float k2 = __shfl_down_sync(0xFFFFFFFFu, k, o);
    int64_t i2 = __shfl_down_sync(0xFFFFFFFFu, i, o);
    if (i2 >= 0 && (i < 0 || tprt_sample_beats(k2, i2, k, i))) k = k2, i = i2;
  }
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sh.f[w] = k, sh.i[w] = i;
  __syncthreads();
  k = sh.f[0], i = sh.i[0];
  for (int q = 1; q < kLanes / 32; ++q)
    if (sh.i[q] >= 0 && (i < 0 || tprt_sample_beats(sh.f[q], sh.i[q], k, i))) k = sh.f[q], i = sh.i[q];
  __syncthreads();
  *key = k, *idx = i;
}

// The row's total of the lanes' sums (thread j holds lane j's): tprt_row_tree, for every thread.
__device__ float tprt__lanes_total(Shared& sh, float acc) {
  sh.lanes[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) sh.total = tprt_row_tree(sh.lanes);
  __syncthreads();
  float t = sh.total;
  __syncthreads();
  return t;
}

// tprt_sample_mass of the logits whose key is at least c: lane j's strided sum, then the tree.
template <int D>
__device__ float tprt__mass(Shared& sh, const void* z, int64_t base, const float* w, int64_t n, uint32_t c) {
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kLanes) {
    float v = tprt_sample_logit(tprt__cuda_ld(z, D, base + i));
    if (tprt__key(v) >= c) acc = acc + w[i];
  }
  return tprt__lanes_total(sh, acc);
}

// The same masses over the pool: lane j's own logits, in row order, then the tree.
__device__ float tprt__pool_mass(Shared& sh, uint32_t c) {
  float acc = 0.0f;
  for (int q = sh.start[threadIdx.x]; q < sh.start[threadIdx.x + 1]; ++q)
    if (tprt__key(sh.pz[q]) >= c) acc = acc + sh.pw[q];
  return tprt__lanes_total(sh, acc);
}

template <int D>
__global__ void __launch_bounds__(kLanes)
    tprt__sample_kernel(const void* __restrict__ logits, int64_t n, const int64_t* __restrict__ seed,
                        const int32_t* __restrict__ request, const int32_t* __restrict__ position,
                        const float* __restrict__ temperature, const int32_t* __restrict__ top_k,
                        const float* __restrict__ top_p, float* __restrict__ weights, int32_t* __restrict__ token) {
  __shared__ Shared sh;
  const int64_t row = blockIdx.x, base = row * n;
  const float inf = tprt_f32_from_bits(0x7F800000u);
  // 1. The maximum (exact in any order) and, for greedy and +inf rows, its first index.
  // Each lane's logits kBatch loads at a time (one block reads a whole row of a decoding step,
  // so nothing else hides the load latency); the maximum and the first index are exact in any order.
  auto lane_batch = [&](int64_t i0, float* z) {
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int64_t i = i0 + (int64_t)q * kLanes;
      z[q] = i < n ? tprt_sample_logit(tprt__cuda_ld(logits, D, base + i)) : -inf;
    }
  };
  float m = -inf;
  for (int64_t i0 = threadIdx.x; i0 < n; i0 += (int64_t)kBatch * kLanes) {
    float z[kBatch];
    lane_batch(i0, z);
#pragma unroll
    for (int q = 0; q < kBatch; ++q) m = fmaxf(m, z[q]);
  }
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_down_sync(0xFFFFFFFFu, m, o));
  if (threadIdx.x % 32 == 0) sh.f[threadIdx.x / 32] = m;
  __syncthreads();
  m = sh.f[0];
  for (int q = 1; q < kLanes / 32; ++q) m = fmaxf(m, sh.f[q]);
  __syncthreads();
  const float t = temperature[row];
  if (m == -inf) {
    if (threadIdx.x == 0) token[row] = -1;
    return;
  }
  if (t == 0.0f || m == inf) {
    float k = -inf;
    int64_t idx = -1;
    for (int64_t i0 = threadIdx.x; i0 < n && idx < 0; i0 += (int64_t)kBatch * kLanes) {
      float z[kBatch];
      lane_batch(i0, z);
#pragma unroll
      for (int q = 0; q < kBatch; ++q)
        if (idx < 0 && i0 + (int64_t)q * kLanes < n && z[q] == m) idx = i0 + (int64_t)q * kLanes, k = 0.0f;
    }
    tprt__block_best(sh, &k, &idx);
    if (threadIdx.x == 0) token[row] = (int32_t)idx;
    return;
  }
  // 2. top-k: the largest key c with at least k logits at or above it.
  uint32_t c = 0;
  const int32_t k = top_k[row];
  const bool top = k > 0 && k < n;
  if (top) {  // byte by byte from the top: the k-th largest key among those sharing c's upper bytes
    unsigned long long left = (unsigned long long)k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      sh.hist[threadIdx.x] = 0;  // kLanes == 256 bins
      __syncthreads();
      const uint32_t high = shift == 24 ? 0u : ~0u << (shift + 8);
      for (int64_t i = threadIdx.x; i < n; i += kLanes) {
        uint32_t key = tprt__key(tprt_sample_logit(tprt__cuda_ld(logits, D, base + i)));
        if ((key & high) == (c & high)) atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      if (threadIdx.x == 0) {  // the largest byte v with at least |left| keys at or above it
        unsigned long long above = 0;
        int v = 255;
        for (; v > 0 && above + sh.hist[v] < left; --v) above += sh.hist[v];
        sh.digit_pick = (uint32_t)v;
        sh.digit_left = left - above;
      }
      __syncthreads();
      c |= sh.digit_pick << shift;
      left = sh.digit_left;
      __syncthreads();
    }
  }
  // 3. top-p: the largest key c' >= c whose mass reaches p · mass(c).
  const float p = top_p[row];
  bool pooled = false;
  if (p < 1.0f && top) {  // the logits at or above τ_k into the pool, if they fit
    unsigned long long mine = 0;
    for (int64_t i = threadIdx.x; i < n; i += kLanes)
      mine += tprt__key(tprt_sample_logit(tprt__cuda_ld(logits, D, base + i))) >= c;
    sh.start[threadIdx.x + 1] = (int)(mine < (unsigned long long)kPool ? mine : kPool + 1ull);
    if (threadIdx.x == 0) sh.start[0] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
      long long run = 0;
      for (int j = 1; j <= kLanes; ++j) {
        run += sh.start[j];
        sh.start[j] = run > kPool ? kPool + 1 : (int)run;
      }
    }
    __syncthreads();
    pooled = sh.start[kLanes] <= kPool;
    if (pooled) {
      int q = sh.start[threadIdx.x];
      for (int64_t i = threadIdx.x; i < n; i += kLanes) {
        float z = tprt_sample_logit(tprt__cuda_ld(logits, D, base + i));
        if (tprt__key(z) < c) continue;
        sh.pz[q] = z, sh.pw[q] = tprt_sample_weight(z, m, t), sh.pi[q] = (int32_t)i;
        ++q;
      }
      __syncthreads();
      const float target = p * tprt__pool_mass(sh, c);
      uint32_t cp = 0;
      for (int b = 31; b >= 0; --b) {
        uint32_t trial = cp | (1u << b);
        uint32_t at = trial > c ? trial : c;
        if (tprt__pool_mass(sh, at) >= target) cp = trial;
      }
      if (cp > c) c = cp;
    }
  }
  if (p < 1.0f && !pooled) {
    float* w = weights + base;
    for (int64_t i = threadIdx.x; i < n; i += kLanes)
      w[i] = tprt_sample_weight(tprt_sample_logit(tprt__cuda_ld(logits, D, base + i)), m, t);
    __syncthreads();
    const float target = p * tprt__mass<D>(sh, logits, base, w, n, c);
    uint32_t cp = 0;
    for (int b = 31; b >= 0; --b) {
      uint32_t trial = cp | (1u << b);
      uint32_t at = trial > c ? trial : c;
      if (tprt__mass<D>(sh, logits, base, w, n, at) >= target) cp = trial;
    }
    if (cp > c) c = cp;
  }
  // 4. The draw over the logits at or above c (and above -inf).
  float best = -inf;
  int64_t idx = -1;
  const uint64_t sd = (uint64_t)seed[row];
  const uint64_t stream = tprt_sample_stream((uint32_t)request[row], (uint32_t)position[row]);
  if (pooled) {
    for (int q = sh.start[threadIdx.x]; q < sh.start[threadIdx.x + 1]; ++q) {
      float z = sh.pz[q];
      int64_t i = sh.pi[q];
      if (z == -inf || tprt__key(z) < c) continue;
      float key = tprt_sample_key(z, t, tprt_sample_gumbel(sd, stream, i));
      if (idx < 0 || tprt_sample_beats(key, i, best, idx)) best = key, idx = i;
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += kLanes) {
      float z = tprt_sample_logit(tprt__cuda_ld(logits, D, base + i));
      if (z == -inf || tprt__key(z) < c) continue;
      float key = tprt_sample_key(z, t, tprt_sample_gumbel(sd, stream, i));
      if (idx < 0 || tprt_sample_beats(key, i, best, idx)) best = key, idx = i;
    }
  }
  tprt__block_best(sh, &best, &idx);
  if (threadIdx.x == 0) token[row] = (int32_t)idx;
}

__global__ void tprt__kvcache_write_kernel(const uint4* __restrict__ fresh, uint4* __restrict__ out,
                                           const int32_t* __restrict__ cache_len, int64_t seq_len, int64_t rows_per_seq,
                                           int64_t row_vecs, int64_t total) {
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = q / row_vecs, v = q % row_vecs, b = r / seq_len, i = r % seq_len;
    int64_t at = (int64_t)cache_len[b] + i;
    if (at < 0 || at >= rows_per_seq) continue;  // outside the sequence's rows: nothing written
    out[(b * rows_per_seq + at) * row_vecs + v] = fresh[q];
  }
}

__global__ void tprt__kvcache_write_bytes(const unsigned char* __restrict__ fresh, unsigned char* __restrict__ out,
                                          const int32_t* __restrict__ cache_len, int64_t seq_len, int64_t rows_per_seq,
                                          int64_t row_bytes, int64_t total) {
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = q / row_bytes, v = q % row_bytes, b = r / seq_len, i = r % seq_len;
    int64_t at = (int64_t)cache_len[b] + i;
    if (at < 0 || at >= rows_per_seq) continue;
    out[(b * rows_per_seq + at) * row_bytes + v] = fresh[q];
  }
}

}  // namespace

extern "C" tprt_status_t tprt_cuda_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed,
                                          const tprt_tensor_t* request, const tprt_tensor_t* position,
                                          const tprt_tensor_t* temperature, const tprt_tensor_t* top_k,
                                          const tprt_tensor_t* top_p, tprt_tensor_t* token, cudaStream_t stream) {
  const char* op = "sample";
  tprt_status_t s = tprt__check(op, "logits", logits, 2, TPRT__FLOATS);
  if (s) return s;
  const int64_t b = logits->dims[0], n = logits->dims[1];
  // The per-row checks of the CPU kernel read the parameters: here they live on the device, so the
  // shapes are checked here and the values by the kernel's definition (out-of-range rows are
  // refused by tpc-generate and by the CPU backend).
  const tprt_tensor_t* rows[] = {seed, request, position, temperature, top_k, top_p, token};
  for (const tprt_tensor_t* r : rows)
    if (!r || r->rank != 1 || r->dims[0] != b)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "sample: every per-row operand must have %lld elements",
                              (long long)b);
  if (b == 0) return NULL;
  float* w = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&w, (size_t)(b * n) * sizeof(float), stream));
  tprt__cuda_float_dispatch(logits->dtype, [&](auto d) {
    tprt__sample_kernel<decltype(d)::value><<<(unsigned)b, kLanes, 0, stream>>>(
        logits->data, n, (const int64_t*)seed->data, (const int32_t*)request->data, (const int32_t*)position->data,
        (const float*)temperature->data, (const int32_t*)top_k->data, (const float*)top_p->data, w,
        (int32_t*)token->data);
  });
  cudaError_t err = cudaGetLastError();
  tprt__cuda_free_async(w, stream);
  if (err != cudaSuccess) return tprt__cuda_make_status(err, "sample kernel", __FILE__, __LINE__);
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                                 const tprt_tensor_t* cache_len, tprt_tensor_t* out, int64_t seq_len,
                                                 cudaStream_t stream) {
  tprt_status_t s = tprt__check_kvcache_write(cache, new_rows, cache_len, out, seq_len);
  if (s) return s;
  const int64_t b = cache_len->dims[0];
  if (b == 0) return NULL;
  const size_t row = tprt_dtype_bytes(cache->dtype, cache->dims[1]);
  if (out->data != cache->data)
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->data, cache->data, row * (size_t)cache->dims[0],
                                              cudaMemcpyDeviceToDevice, stream));
  const int64_t rows_per_seq = cache->dims[0] / b, rows = b * seq_len;
  const bool vec = row % 16 == 0 && ((uintptr_t)new_rows->data & 15) == 0 && ((uintptr_t)out->data & 15) == 0;
  const int64_t units = vec ? (int64_t)(row / 16) : (int64_t)row, total = rows * units;
  const unsigned blocks = tprt__cuda_ew_blocks(total, TPRT__CUDA_EW_THREADS);
  if (vec)
    tprt__kvcache_write_kernel<<<blocks, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        (const uint4*)new_rows->data, (uint4*)out->data, (const int32_t*)cache_len->data, seq_len, rows_per_seq, units,
        total);
  else
    tprt__kvcache_write_bytes<<<blocks, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        (const unsigned char*)new_rows->data, (unsigned char*)out->data, (const int32_t*)cache_len->data, seq_len,
        rows_per_seq, units, total);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? NULL : tprt__cuda_make_status(err, "kvcache_write kernel", __FILE__, __LINE__);
}
