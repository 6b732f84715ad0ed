// The vocabulary-parallel embedding and its gradient in every numerics mode, bitwise
// tprt_cpu_embedding and tprt_cpu_embedding_grad (kernels/cpu/cpu_vocab.c; docs/numerics.md,
// "Embedding"). The ids' values are not checked here (the CPU kernels read them to check them): an
// id outside [start, start + rows) is a row this rank does not hold, as on the CPU for the rows of
// other ranks.
//
// embedding: one thread per element; a held row's bytes are copied, another's element is -0.0.
// embedding_grad: the tokens are sorted by row with CUB's stable radix sort (so each row's tokens
// stay in token order), dtable is zeroed (with acc: set to acc + 0.0), and one block per row that
// has tokens walks them: each thread owns columns h, sums each chunk's tokens from +0.0 in token
// order and folds the chunks into the canonical pairwise tree (tprt_kacc_tree) as they end, a
// binary counter over the chunk positions: position c merges with the pending subtrees of levels
// where c has a one bit; with acc, the row's result is acc + the tree (one addition, as the
// unfused add). An empty chunk is +0.0, which adding leaves every chunk sum unchanged (a sum from
// +0.0 is never -0.0), so an empty subtree is only marked absent.
#include <cub/device/device_radix_sort.cuh>

#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

template <typename E>
__global__ void tprt__embedding_kernel(const int32_t* __restrict__ ids, const E* __restrict__ table, int64_t t,
                                       int64_t h, int64_t start, int64_t rows, E negzero, E* __restrict__ y) {
  const int64_t n = t * h, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t v = (int64_t)ids[i / h] - start;
    y[i] = v >= 0 && v < rows ? table[v * h + i % h] : negzero;
  }
}

// keys[t] = the token's local row, or |rows| (sorted last) when this rank does not hold it.
__global__ void tprt__embedding_keys(const int32_t* __restrict__ ids, int64_t t, int64_t start, int64_t rows,
                                     int32_t* __restrict__ keys, int32_t* __restrict__ tokens) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t; i += stride) {
    int64_t v = (int64_t)ids[i] - start;
    keys[i] = (int32_t)(v >= 0 && v < rows ? v : rows);
    tokens[i] = (int32_t)i;
  }
}

template <int D>
__global__ void tprt__embedding_grad_rows(const int32_t* __restrict__ keys, const int32_t* __restrict__ tokens,
                                          int64_t t, int64_t rows, const void* __restrict__ dy, int64_t h,
                                          int chunks, int64_t size, const float* __restrict__ acc,
                                          float* __restrict__ dtable) {
  for (int64_t first = blockIdx.x; first < t; first += gridDim.x) {
    int32_t v = keys[first];
    if (v >= rows || (first > 0 && keys[first - 1] == v)) continue;  // not a held row's first token
    int64_t end = first + 1;
    while (end < t && keys[end] == v) ++end;
    for (int64_t col = threadIdx.x; col < h; col += blockDim.x) {
      float pending[32];  // the pending subtree of each level (chunks <= 2^31)
      unsigned present = 0;
      int64_t i = first;
      // The row's next kBatch tokens' values, loaded together ahead of the serial sums (a frequent
      // token's row is a long chain of dependent additions, each otherwise waiting on its load).
      constexpr int kBatch = 8;
      float vals[kBatch];
      int32_t toks[kBatch];
      int64_t loaded = first;  // vals/toks hold tokens [loaded - kBatch, loaded) once loaded > first
      auto refill = [&](int64_t from) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          toks[b] = from + b < end ? tokens[from + b] : -1;
          vals[b] = from + b < end ? tprt__cuda_ld(dy, D, (int64_t)toks[b] * h + col) : 0.0f;
        }
        loaded = from + kBatch;
      };
      for (int c = 0; c < chunks; ++c) {
        float x = 0.0f;
        bool xp = false;
        for (; i < end; ++i) {
          if (i >= loaded) refill(i);
          const int b = (int)(i - (loaded - kBatch));
          if (toks[b] / size != c) break;
          x = x + vals[b];
          xp = true;
        }
        int l = 0;
        for (; (c >> l) & 1; ++l) {  // c is a right child at level l: merge with the left subtree
          if ((present >> l) & 1u) {
            x = xp ? pending[l] + x : pending[l];
            xp = true;
          }
          present &= ~(1u << l);
        }
        pending[l] = x;
        present = xp ? present | (1u << l) : present & ~(1u << l);
      }
      int top = 0;
      while ((1 << top) < chunks) ++top;
      const float sum = (present >> top) & 1u ? pending[top] : 0.0f;
      dtable[(int64_t)v * h + col] = acc ? __fadd_rn(acc[(int64_t)v * h + col], sum) : sum;
    }
  }
}

// dtable = acc + 0.0 (what the unfused add leaves in the rows no token names: -0.0 becomes +0.0),
// four elements at a time when both are 16-byte aligned (|vec|).
__global__ void tprt__embedding_grad_start(const float* __restrict__ acc, int64_t n, bool vec,
                                           float* __restrict__ dtable) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, n4 = vec ? n / 4 : 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 a = reinterpret_cast<const float4*>(acc)[i];
    a.x = __fadd_rn(a.x, 0.0f), a.y = __fadd_rn(a.y, 0.0f), a.z = __fadd_rn(a.z, 0.0f), a.w = __fadd_rn(a.w, 0.0f);
    reinterpret_cast<float4*>(dtable)[i] = a;
  }
  for (int64_t i = n4 * 4 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dtable[i] = __fadd_rn(acc[i], 0.0f);
}

// ------------------------------------------------------------------------------------------------
// Launchers
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__launched(const char* what) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? NULL : tprt__cuda_make_status(err, what, __FILE__, __LINE__);
}

extern "C" tprt_status_t tprt_cuda_embedding(const tprt_tensor_t* ids, const tprt_tensor_t* table, tprt_tensor_t* y,
                                             int64_t start, int64_t vocab, cudaStream_t stream) {
  {
    tprt_status_t s0 = tprt__check_embedding("embedding", ids, table, y, false, start, vocab);
    if (s0) return s0;
  }
  int64_t t = ids->dims[0], rows = table->dims[0], h = table->dims[1];
  if (t * h == 0) return NULL;
  unsigned blocks = tprt__cuda_ew_blocks(t * h, TPRT__CUDA_EW_THREADS);
  const int32_t* id = (const int32_t*)ids->data;
  if (table->dtype == TPRT_DTYPE_F32)
    tprt__embedding_kernel<uint32_t><<<blocks, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        id, (const uint32_t*)table->data, t, h, start, rows, 0x80000000u, (uint32_t*)y->data);
  else  // bf16 and f16: -0.0 is the sign bit alone
    tprt__embedding_kernel<uint16_t><<<blocks, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        id, (const uint16_t*)table->data, t, h, start, rows, (uint16_t)0x8000u, (uint16_t*)y->data);
  return tprt__launched("embedding kernel");
}

static tprt_status_t tprt__embedding_grad(const tprt_tensor_t* ids, const tprt_tensor_t* dy, const tprt_tensor_t* acc,
                                          tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks,
                                          cudaStream_t stream) {
  const char* op = "embedding_grad";
  {
    tprt_status_t s0 = tprt__check_embedding(op, ids, dtable, dy, true, start, vocab);
    if (!s0 && acc) s0 = tprt_cpu_check_acc(op, acc, dtable);
    if (s0) return s0;
  }
  if (chunks < 1 || chunks > TPRT_MAX_CHUNKS || (chunks & (chunks - 1)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                            TPRT_MAX_CHUNKS, chunks);
  int64_t t = ids->dims[0], rows = dtable->dims[0], h = dtable->dims[1];
  if (rows * h == 0) return NULL;
  const float* a = acc ? (const float*)acc->data : NULL;
  if (a) {
    const bool vec = ((uintptr_t)a & 15) == 0 && ((uintptr_t)dtable->data & 15) == 0;
    tprt__embedding_grad_start<<<tprt__cuda_ew_blocks(vec ? (rows * h + 3) / 4 : rows * h, TPRT__CUDA_EW_THREADS),
                                 TPRT__CUDA_EW_THREADS, 0, stream>>>(a, rows * h, vec, (float*)dtable->data);
    TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  } else {
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtable->data, 0, (size_t)(rows * h) * sizeof(float), stream));
  }
  if (t == 0) return NULL;
  if (rows >= INT32_MAX || t >= INT32_MAX)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: more than 2^31 rows or tokens", op);
  // keys, tokens, their sorted copies, then CUB's scratch.
  int end_bit = 1;
  while (end_bit < 31 && ((int64_t)1 << end_bit) <= rows) ++end_bit;
  size_t cub_bytes = 0;
  cub::DeviceRadixSort::SortPairs(NULL, cub_bytes, (const int32_t*)NULL, (int32_t*)NULL, (const int32_t*)NULL,
                                  (int32_t*)NULL, (int)t, 0, end_bit, stream);
  size_t lists = (size_t)t * sizeof(int32_t);
  char* mem = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&mem, 4 * lists + cub_bytes + 256, stream));
  int32_t *keys = (int32_t*)mem, *tokens = keys + t, *skeys = tokens + t, *stokens = skeys + t;
  void* scratch = (void*)(((uintptr_t)(stokens + t) + 255) & ~(uintptr_t)255);
  unsigned blocks = tprt__cuda_ew_blocks(t, TPRT__CUDA_EW_THREADS);
  tprt__embedding_keys<<<blocks, TPRT__CUDA_EW_THREADS, 0, stream>>>((const int32_t*)ids->data, t, start, rows, keys,
                                                                      tokens);
  cudaError_t err = cub::DeviceRadixSort::SortPairs(scratch, cub_bytes, keys, skeys, tokens, stokens, (int)t, 0, end_bit,
                                                    stream);
  if (err == cudaSuccess) {
    int64_t size = tprt_kacc_chunk_size(t, chunks);
    unsigned grid = (unsigned)(t < 65536 ? t : 65536);
    const int threads = h >= 256 ? 256 : (int)((h + 31) / 32 * 32);
    tprt__cuda_float_dispatch(dy->dtype, [&](auto d) {
      tprt__embedding_grad_rows<decltype(d)::value><<<grid, threads, 0, stream>>>(
          skeys, stokens, t, rows, dy->data, h, chunks, size, a, (float*)dtable->data);
    });
    err = cudaGetLastError();
  }
  tprt__cuda_free_async(mem, stream);
  if (err != cudaSuccess) return tprt__cuda_make_status(err, "embedding_grad kernels", __FILE__, __LINE__);
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_embedding_grad(const tprt_tensor_t* ids, const tprt_tensor_t* dy,
                                                  tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks,
                                                  cudaStream_t stream) {
  return tprt__embedding_grad(ids, dy, NULL, dtable, start, vocab, chunks, stream);
}

extern "C" tprt_status_t tprt_cuda_embedding_grad_acc(const tprt_tensor_t* ids, const tprt_tensor_t* dy,
                                                      const tprt_tensor_t* acc, tprt_tensor_t* dtable, int64_t start,
                                                      int64_t vocab, int chunks, cudaStream_t stream) {
  if (!acc) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "embedding_grad: acc must be given");
  return tprt__embedding_grad(ids, dy, acc, dtable, start, vocab, chunks, stream);
}
