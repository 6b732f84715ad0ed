// The MoE data-movement kernels in exact mode, bitwise equal to the CPU kernels
// (docs/numerics.md, "MoE"):
//   tprt_cuda_moe_permute    y[T*k,H] = the rows of x[T,H], once per (token, slot), ordered by
//                            expert, then token, then slot; group_sizes[E] (i64) and row_map[T*k]
//                            (i32, the source slot t*k+j of every row), as tprt_cpu_moe_permute.
//   tprt_cuda_moe_unpermute  out[t] = Σ_j weights[t,j]·y[row of slot (t,j)], acc = fmaf(w, y, acc)
//                            from +0.0 in increasing j, rounded once (tprt_cpu_moe_unpermute).
//   tprt_cuda_moe_bucket     expert-sorted x[R,H] -> B zero-padded buckets y[B*R,H].
//   tprt_cuda_moe_unbucket   the inverse gather, y[R,H] from x[B*R,H].
//
// Layouts: dense row-major. Rows are moved as bytes (permute: bf16/f16/f32/fp8/i32/i64; bucket:
// any dtype, f4 with an even H) with the widest unit (16, 8, 4, 2 or 1 bytes) that divides the
// row size and both base addresses; unpermute's arithmetic is scalar f32 (bf16/f16/f32).
//
// Indices, row_map and group_sizes are device data and never read on the host: validation covers
// shapes, dtypes and parameters with the CPU kernels' messages. Data the CPU kernel would reject
// (an index outside [0, E), a row_map that is not a permutation, counts that do not sum to R) is
// a precondition violation: the kernels then never access memory out of bounds, but the outputs
// are unspecified (permute drops such slots; unpermute skips a missing slot; bucket clamps counts).
//
// Launch geometry:
// - permute: one block of 1024 threads sorts the slots (a stable counting sort, deterministic, no
//   atomics): pass 1 counts each expert's slots in shared memory, a prefix sum gives each
//   expert's first row (and group_sizes), pass 2 places every slot at its expert's next row; in
//   both passes a tile of 1024 slots is staged in shared memory and each slot's rank among the
//   tile's earlier slots of its expert is a scan of the tile. E is limited to
//   TPRT__MOE_MAX_EXPERTS (shared-memory counters). A second, wide kernel then copies the rows.
// - unpermute: a block per 32 tokens (grid-stride); its 256 threads find the block's T-tile slots
//   in row_map (one scan of row_map per block, into shared memory), then run threads over H, the
//   k terms of each output in order.
// - bucket / unbucket / the permute row copy: a block of 256 threads per destination row
//   (grid-stride over rows, at most 65535 blocks), threads over the row's units (coalesced).
#include "tprt_cuda_internal.cuh"

#include <stdio.h>

// Threads of the single sorting block (the most a block may have): also the slot tile size.
#define TPRT__MOE_SORT_THREADS 1024
// Most experts of moe_permute: 8192 i32 counters plus 8192 i32 next-row cursors are 64 KiB of
// shared memory, over the 48 KiB a static allocation may take, so the counters are reused: one
// array of 8192 (32 KiB) holds the counts, then the cursors.
#define TPRT__MOE_MAX_EXPERTS 8192
// Threads per block of the row copies and of unpermute.
#define TPRT__MOE_ROW_THREADS 256
// Most blocks of a grid-stride row kernel.
#define TPRT__MOE_MAX_BLOCKS 65535
// Tokens per unpermute block, and the most slots per token that its shared inverse map holds:
// 32 tokens x 64 slots x 8 bytes = 16 KiB.
#define TPRT__MOE_UNP_TOKENS 32
#define TPRT__MOE_UNP_MAX_K 64

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

/// Copies |bytes| (a multiple of |unit|, both addresses |unit|-aligned) from |src| to |dst| with
/// the threads of the block.
static __device__ __forceinline__ void tprt__moe_copy_row(char* dst, const char* src, int64_t bytes, int unit) {
  switch (unit) {
    case 16:
      for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) ((uint4*)dst)[i] = ((const uint4*)src)[i];
      break;
    case 8:
      for (int64_t i = threadIdx.x; i < bytes / 8; i += blockDim.x) ((uint2*)dst)[i] = ((const uint2*)src)[i];
      break;
    case 4:
      for (int64_t i = threadIdx.x; i < bytes / 4; i += blockDim.x) ((uint32_t*)dst)[i] = ((const uint32_t*)src)[i];
      break;
    case 2:
      for (int64_t i = threadIdx.x; i < bytes / 2; i += blockDim.x) ((uint16_t*)dst)[i] = ((const uint16_t*)src)[i];
      break;
    default:
      for (int64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
      break;
  }
}

/// Zeroes |bytes| at |dst| (as tprt__moe_copy_row).
static __device__ __forceinline__ void tprt__moe_zero_row(char* dst, int64_t bytes, int unit) {
  switch (unit) {
    case 16:
      for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) ((uint4*)dst)[i] = make_uint4(0, 0, 0, 0);
      break;
    case 8:
      for (int64_t i = threadIdx.x; i < bytes / 8; i += blockDim.x) ((uint2*)dst)[i] = make_uint2(0, 0);
      break;
    case 4:
      for (int64_t i = threadIdx.x; i < bytes / 4; i += blockDim.x) ((uint32_t*)dst)[i] = 0;
      break;
    case 2:
      for (int64_t i = threadIdx.x; i < bytes / 2; i += blockDim.x) ((uint16_t*)dst)[i] = 0;
      break;
    default:
      for (int64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = 0;
      break;
  }
}

/// One pass of the counting sort over the slots in tiles of the block's size: |place| false adds
/// each expert's slot count to cnt[e]; true writes row_map[cnt[e] + rank] = slot and advances
/// cnt[e] (cnt holding each expert's next row). Slots with an index outside [0, E) are skipped.
static __device__ void tprt__moe_sort_pass(const int32_t* idx, int64_t slots, int64_t e, int32_t* cnt, int32_t* tile,
                                           int32_t* row_map, bool place) {
  const int tid = threadIdx.x;
  for (int64_t t0 = 0; t0 < slots; t0 += blockDim.x) {
    const int64_t i = t0 + tid;
    const int n = (int)(slots - t0 < blockDim.x ? slots - t0 : blockDim.x);
    int32_t ex = i < slots ? idx[i] : -1;
    if (ex < 0 || ex >= e) ex = -1;
    tile[tid] = ex;
    __syncthreads();
    int rank = 0, later = 0;  // same-expert slots before and after this one in the tile
    if (ex >= 0) {
      for (int j = 0; j < n; ++j)
        if (tile[j] == ex) {
          rank += j < tid;
          later += j > tid;
        }
      if (place) row_map[cnt[ex] + rank] = (int32_t)i;
    }
    __syncthreads();  // every thread has read cnt[] before the last slot of each expert moves it
    if (ex >= 0 && later == 0) cnt[ex] += rank + 1;
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(TPRT__MOE_SORT_THREADS)
    tprt_moe_sort_kernel(const int32_t* idx, int64_t slots, int64_t e, int64_t* group_sizes, int32_t* row_map) {
  __shared__ int32_t cnt[TPRT__MOE_MAX_EXPERTS];
  __shared__ int32_t tile[TPRT__MOE_SORT_THREADS];
  for (int64_t j = threadIdx.x; j < e; j += blockDim.x) cnt[j] = 0;
  __syncthreads();
  tprt__moe_sort_pass(idx, slots, e, cnt, tile, row_map, false);
  if (threadIdx.x == 0) {  // exclusive prefix sum: counts -> first rows (E <= 8192, sequential)
    int32_t start = 0;
    for (int64_t j = 0; j < e; ++j) {
      group_sizes[j] = cnt[j];
      int32_t c = cnt[j];
      cnt[j] = start;
      start += c;
    }
  }
  __syncthreads();
  tprt__moe_sort_pass(idx, slots, e, cnt, tile, row_map, true);
}

extern "C" __global__ void __launch_bounds__(TPRT__MOE_ROW_THREADS)
    tprt_moe_gather_kernel(const char* x, const int32_t* row_map, char* y, int64_t rows, int64_t k, int64_t row_bytes,
                           int unit) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t slot = row_map[r];
    if (slot < 0 || slot >= rows) continue;  // a dropped slot (invalid index) leaves a short tail
    tprt__moe_copy_row(y + r * row_bytes, x + (slot / k) * row_bytes, row_bytes, unit);
  }
}

template <int D>
static __device__ __forceinline__ void tprt__unpermute_body(const void* __restrict__ y,
                                                            const int32_t* __restrict__ row_map,
                                                            const float* __restrict__ weights, void* __restrict__ out,
                                                            int64_t t, int64_t k, int64_t h) {
  __shared__ int64_t inv[TPRT__MOE_UNP_TOKENS * TPRT__MOE_UNP_MAX_K];
  const int64_t rows = t * k;
  for (int64_t t0 = (int64_t)blockIdx.x * TPRT__MOE_UNP_TOKENS; t0 < t;
       t0 += (int64_t)gridDim.x * TPRT__MOE_UNP_TOKENS) {
    const int64_t nt = t - t0 < TPRT__MOE_UNP_TOKENS ? t - t0 : TPRT__MOE_UNP_TOKENS;
    __syncthreads();  // the previous tile's readers are done with inv
    for (int64_t i = threadIdx.x; i < nt * k; i += blockDim.x) inv[i] = -1;
    __syncthreads();
    // Each slot appears once in a permutation, so these writes never race.
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      const int64_t slot = row_map[r] - t0 * k;
      if (slot >= 0 && slot < nt * k) inv[slot] = r;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < nt * h; i += blockDim.x) {
      const int64_t tt = i / h, col = i % h, tok = t0 + tt;
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = inv[tt * k + j];
        if (r >= 0) acc = __fmaf_rn(weights[tok * k + j], tprt__cuda_ld(y, D, r * h + col), acc);
      }
      tprt__cuda_st(out, D, tok * h + col, acc);
    }
  }
}

#define TPRT__UNPERMUTE_KERNEL(name, dtype)                                                                           \
  extern "C" __global__ void __launch_bounds__(TPRT__MOE_ROW_THREADS)                                                 \
      name(const void* y, const int32_t* row_map, const float* weights, void* out, int64_t t, int64_t k, int64_t h) { \
    tprt__unpermute_body<dtype>(y, row_map, weights, out, t, k, h);                                                   \
  }
TPRT__UNPERMUTE_KERNEL(tprt_moe_unpermute_kernel_bf16, TPRT_DTYPE_BF16)
TPRT__UNPERMUTE_KERNEL(tprt_moe_unpermute_kernel_f16, TPRT_DTYPE_F16)
TPRT__UNPERMUTE_KERNEL(tprt_moe_unpermute_kernel_f32, TPRT_DTYPE_F32)

/// Start and length of bucket |b|'s run of expert-sorted rows, with every count clamped to
/// [0, r] and the run to [0, r], so that invalid counts stay in bounds.
static __device__ __forceinline__ void tprt__bucket_run(const int64_t* sizes, int64_t per_bucket, int64_t b, int64_t r,
                                                        int64_t* out_start, int64_t* out_n) {
  int64_t start = 0, n = 0;
  for (int64_t j = 0; j < (b + 1) * per_bucket; ++j) {
    int64_t c = sizes[j];
    c = c < 0 ? 0 : c > r ? r : c;
    if (j < b * per_bucket)
      start += c;
    else
      n += c;
    if (start > r) start = r;
    if (n > r) n = r;
  }
  if (n > r - start) n = r - start;
  *out_start = start;
  *out_n = n;
}

/// moe_bucket: destination row d = b*R + i of y gets x[start_b + i] when i < n_b, else zeros.
extern "C" __global__ void __launch_bounds__(TPRT__MOE_ROW_THREADS)
    tprt_moe_bucket_kernel(const char* x, const int64_t* sizes, char* y, int64_t r, int64_t buckets, int64_t per_bucket,
                           int64_t row_bytes, int unit) {
  for (int64_t d = blockIdx.x; d < buckets * r; d += gridDim.x) {
    const int64_t b = d / r, i = d % r;
    int64_t start, n;
    tprt__bucket_run(sizes, per_bucket, b, r, &start, &n);
    if (i < n)
      tprt__moe_copy_row(y + d * row_bytes, x + (start + i) * row_bytes, row_bytes, unit);
    else
      tprt__moe_zero_row(y + d * row_bytes, row_bytes, unit);
  }
}

/// moe_unbucket: destination row s of y comes from bucket b with start_b <= s < start_b + n_b.
extern "C" __global__ void __launch_bounds__(TPRT__MOE_ROW_THREADS)
    tprt_moe_unbucket_kernel(const char* x, const int64_t* sizes, char* y, int64_t r, int64_t buckets,
                             int64_t per_bucket, int64_t row_bytes, int unit) {
  for (int64_t s = blockIdx.x; s < r; s += gridDim.x) {
    for (int64_t b = 0; b < buckets; ++b) {
      int64_t start, n;
      tprt__bucket_run(sizes, per_bucket, b, r, &start, &n);
      if (s >= start && s < start + n) {
        tprt__moe_copy_row(y + s * row_bytes, x + (b * r + s - start) * row_bytes, row_bytes, unit);
        break;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Validation (the checks and messages of cpu_moe.c and cpu_moe_bucket.c that read no data)
// ------------------------------------------------------------------------------------------------

// Dtypes that moe_permute can move: whole bytes per element (cpu_moe.c).
#define TPRT__BYTE_DTYPES                                                                                     \
  (TPRT__FLOATS | TPRT__M(TPRT_DTYPE_F8E4M3FN) | TPRT__M(TPRT_DTYPE_F8E5M2) | TPRT__M(TPRT_DTYPE_F8E8M0FNU) | \
   TPRT__M(TPRT_DTYPE_I32) | TPRT__M(TPRT_DTYPE_I64))



// ------------------------------------------------------------------------------------------------
// Kernel launchers
// ------------------------------------------------------------------------------------------------

/// The widest copy unit (16, 8, 4, 2, 1 bytes) dividing the row size and both base addresses.
static int tprt__moe_unit(const void* a, const void* b, size_t row_bytes) {
  uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)row_bytes;
  int unit = 16;
  while (unit > 1 && (bits & (uintptr_t)(unit - 1))) unit /= 2;
  return unit;
}

static unsigned tprt__moe_row_blocks(int64_t rows) {
  return (unsigned)(rows < TPRT__MOE_MAX_BLOCKS ? rows : TPRT__MOE_MAX_BLOCKS);
}

tprt_status_t tprt_cuda_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                    tprt_tensor_t* group_sizes, tprt_tensor_t* row_map, cudaStream_t stream) {
  tprt_status_t s = tprt__check_moe_permute(x, indices, y, group_sizes, row_map);
  if (s) return s;
  int64_t e = group_sizes->dims[0], k = indices->dims[1], rows = x->dims[0] * k;
  if (e > TPRT__MOE_MAX_EXPERTS)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                            "moe_permute: E=%lld experts exceed the CUDA single-block sort's limit of %d", (long long)e,
                            TPRT__MOE_MAX_EXPERTS);
  // Always sorted, so that group_sizes is written (zeros) even without slots.
  const int32_t* idx = (const int32_t*)indices->data;
  int64_t* gs = (int64_t*)group_sizes->data;
  int32_t* map = (int32_t*)row_map->data;
  void* sort_args[] = {&idx, &rows, &e, &gs, &map};
  TPRT_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel((const void*)tprt_moe_sort_kernel, dim3(1), dim3(TPRT__MOE_SORT_THREADS), sort_args, 0, stream));
  int64_t row_bytes = (int64_t)tprt_dtype_bytes(x->dtype, x->dims[1]);
  if (rows == 0 || row_bytes == 0) return NULL;
  const char* xd = (const char*)x->data;
  char* yd = (char*)y->data;
  int unit = tprt__moe_unit(xd, yd, (size_t)row_bytes);
  const int32_t* cmap = map;
  void* args[] = {&xd, &cmap, &yd, &rows, &k, &row_bytes, &unit};
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel((const void*)tprt_moe_gather_kernel, dim3(tprt__moe_row_blocks(rows)),
                                             dim3(TPRT__MOE_ROW_THREADS), args, 0, stream));
  return NULL;
}

tprt_status_t tprt_cuda_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                      const tprt_tensor_t* weights, tprt_tensor_t* out, cudaStream_t stream) {
  tprt_status_t s = tprt__check_moe_unpermute(y, row_map, weights, out);
  if (s) return s;
  int64_t t = weights->dims[0], k = weights->dims[1], h = y->dims[1];
  if (t == 0 || h == 0) return NULL;
  if (k > TPRT__MOE_UNP_MAX_K)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                            "moe_unpermute: k=%lld slots per token exceed the CUDA limit of %d", (long long)k,
                            TPRT__MOE_UNP_MAX_K);
  const void* kernel;
  switch (y->dtype) {
    case TPRT_DTYPE_BF16:
      kernel = (const void*)tprt_moe_unpermute_kernel_bf16;
      break;
    case TPRT_DTYPE_F16:
      kernel = (const void*)tprt_moe_unpermute_kernel_f16;
      break;
    default:
      kernel = (const void*)tprt_moe_unpermute_kernel_f32;
      break;
  }
  const void* yd = y->data;
  const int32_t* md = (const int32_t*)row_map->data;
  const float* wd = (const float*)weights->data;
  void* od = out->data;
  void* args[] = {&yd, &md, &wd, &od, &t, &k, &h};
  int64_t blocks = tprt__cuda_div_up(t, TPRT__MOE_UNP_TOKENS);
  TPRT_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel(kernel, dim3(tprt__moe_row_blocks(blocks)), dim3(TPRT__MOE_ROW_THREADS), args, 0, stream));
  return NULL;
}

static tprt_status_t tprt__cuda_bucket_launch(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* group_sizes,
                                              tprt_tensor_t* y, int buckets, bool bucketing, cudaStream_t stream) {
  size_t row_bytes = 0;
  tprt_status_t s = tprt__check_bucket_shapes(op, x, group_sizes, y, buckets, bucketing, &row_bytes);
  if (s || row_bytes == 0) return s;
  int64_t r = bucketing ? x->dims[0] : y->dims[0], b = buckets, per_bucket = group_sizes->dims[0] / buckets;
  int64_t dst_rows = bucketing ? b * r : r, rb = (int64_t)row_bytes;
  if (dst_rows == 0) return NULL;
  const char* xd = (const char*)x->data;
  const int64_t* sd = (const int64_t*)group_sizes->data;
  char* yd = (char*)y->data;
  int unit = tprt__moe_unit(xd, yd, row_bytes);
  void* args[] = {&xd, &sd, &yd, &r, &b, &per_bucket, &rb, &unit};
  const void* kernel = bucketing ? (const void*)tprt_moe_bucket_kernel : (const void*)tprt_moe_unbucket_kernel;
  TPRT_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel(kernel, dim3(tprt__moe_row_blocks(dst_rows)), dim3(TPRT__MOE_ROW_THREADS), args, 0, stream));
  return NULL;
}

tprt_status_t tprt_cuda_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                   int buckets, cudaStream_t stream) {
  return tprt__cuda_bucket_launch("moe_bucket", x, group_sizes, y, buckets, true, stream);
}

tprt_status_t tprt_cuda_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                     int buckets, cudaStream_t stream) {
  return tprt__cuda_bucket_launch("moe_unbucket", x, group_sizes, y, buckets, false, stream);
}
