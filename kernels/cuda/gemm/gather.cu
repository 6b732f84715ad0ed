// tprt_cuda_gather_2d: the data movement under the CUDA backward launchers (linear_grad.c): a
// row-major [rows, cols] source with elements of |elem| bytes (2 or 4) is copied, optionally
// transposed, with its rows (transpose) or columns (no transpose) taken through an index:
//   transpose:  dst[c, r] = src[idx(r), c]   dst is [cols, len]
//   otherwise:  dst[m, r] = src[m, idx(r)]   dst is [rows, len]
// idx(r) = index ? index[r] : the segmented order of docs/numerics.md ("Segmented contractions")
// when |order| has chunks > 0 (computed on the device, so that a CUDA graph can capture it), else
// r. Byte copies: no arithmetic, so any float dtype passes unchanged. Also a constant fill.
//
// Launch geometry: one thread per destination element, 256-thread blocks, grid-stride; a column
// gather whose order keeps 16-byte vectors whole: one thread per vector.
#include "tprt_cuda_internal.cuh"

template <typename T>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__gather_2d_kernel(const T* __restrict__ src, int64_t rows, int64_t cols, const int64_t* __restrict__ index,
                           tprt_cuda_order_t order, int64_t len, int transpose, T* __restrict__ dst) {
  const int64_t total = (transpose ? cols : rows) * len, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    int64_t a = i / len, r = i % len;
    int64_t j = index ? index[r] : order.chunks > 0 ? tprt__segmented_index(r, len, order) : r;
    dst[i] = transpose ? src[j * cols + a] : src[a * cols + j];
  }
}

// The column gather in 16-byte vectors: dst[m, 8v..8v+8) (bf16; 4 for f32) = src[m, idx(8v)...],
// for an order whose runs are whole vectors (so a vector's elements stay consecutive in src).
// 32-bit arithmetic: the caller checks that rows x len fits.
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__gather_cols_vec_kernel(const uint4* __restrict__ src, int rows, int cols_v, tprt_cuda_order_t order,
                                 int len, int vec, uint4* __restrict__ dst) {
  const int len_v = len / vec, total = rows * len_v, stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int a = i / len_v, r = (i - a * len_v) * vec;
    const int j = order.chunks > 0 ? tprt__segmented_index32(r, len, order) : r;
    dst[i] = src[(int64_t)a * cols_v + j / vec];
  }
}

extern "C" tprt_status_t tprt_cuda_gather_2d(const void* src, int64_t rows, int64_t cols, int elem,
                                             const int64_t* index, tprt_cuda_order_t order, int64_t len, int transpose,
                                             void* dst, cudaStream_t stream) {
  int64_t total = (transpose ? cols : rows) * len;
  if (total <= 0) return NULL;
  // Columns in 16-byte vectors where the order keeps vectors whole and everything is aligned.
  const int vec = 16 / elem;  // when elem is 2 or 4
  const bool vec_order = order.chunks == 0 || (len / ((int64_t)order.chunks * order.segments)) % vec == 0;
  if (!transpose && !index && (elem == 2 || elem == 4) && vec_order && cols % vec == 0 && len % vec == 0 &&
      rows * len < INT32_MAX - TPRT__CUDA_EW_THREADS * (int64_t)TPRT__CUDA_EW_MAX_BLOCKS &&
      tprt__cuda_aligned16(src, dst, dst)) {
    tprt__gather_cols_vec_kernel<<<tprt__cuda_ew_blocks(total / vec, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0,
                                   stream>>>((const uint4*)src, (int)rows, (int)(cols / vec), order, (int)len, vec,
                                             (uint4*)dst);
    TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return NULL;
  }
  dim3 grid(tprt__cuda_ew_blocks(total, TPRT__CUDA_EW_THREADS));
  if (elem == 2)
    tprt__gather_2d_kernel<uint16_t><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        (const uint16_t*)src, rows, cols, index, order, len, transpose, (uint16_t*)dst);
  else if (elem == 4)
    tprt__gather_2d_kernel<uint32_t><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        (const uint32_t*)src, rows, cols, index, order, len, transpose, (uint32_t*)dst);
  else
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "gather_2d: elements of %d bytes (2 or 4 expected)", elem);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

// dst row b·rows + r = src row b·rows + idx(r) (the segmented order within each of the batches of
// |rows| rows), |words| 16-byte words a row; one block of threads per destination row.
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__gather_rows_kernel(const uint4* __restrict__ src, int64_t total, int64_t rows, int64_t words,
                             tprt_cuda_order_t order, uint4* __restrict__ dst) {
  for (int64_t r = blockIdx.x; r < total; r += gridDim.x) {
    const int64_t b = r / rows, i = r - b * rows;
    const int64_t j = b * rows + (order.chunks > 0 ? tprt__segmented_index(i, rows, order) : i);
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) dst[r * words + w] = src[j * words + w];
  }
}

extern "C" tprt_status_t tprt_cuda_gather_rows_batched(const void* src, int64_t batches, int64_t rows,
                                                       int64_t row_bytes, tprt_cuda_order_t order, void* dst,
                                                       cudaStream_t stream) {
  if (batches <= 0 || rows <= 0 || row_bytes <= 0) return NULL;
  if (row_bytes % 16 || ((uintptr_t)src | (uintptr_t)dst) % 16)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "gather_rows: rows of %lld bytes at %p and %p are not "
                            "16-byte aligned",
                            (long long)row_bytes, src, dst);
  const int64_t total = batches * rows;
  unsigned grid = (unsigned)(total < 65535 ? total : 65535);
  tprt__gather_rows_kernel<<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>((const uint4*)src, total, rows, row_bytes / 16,
                                                                       order, (uint4*)dst);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_gather_rows(const void* src, int64_t rows, int64_t row_bytes,
                                               tprt_cuda_order_t order, void* dst, cudaStream_t stream) {
  return tprt_cuda_gather_rows_batched(src, 1, rows, row_bytes, order, dst, stream);
}

template <typename T>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS) tprt__fill_kernel(T* dst, int64_t n, T value) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = value;
}

extern "C" tprt_status_t tprt_cuda_fill_bits(void* dst, int64_t n, int elem, uint32_t bits, cudaStream_t stream) {
  if (n <= 0) return NULL;
  dim3 grid(tprt__cuda_ew_blocks(n, TPRT__CUDA_EW_THREADS));
  if (elem == 2)
    tprt__fill_kernel<uint16_t><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>((uint16_t*)dst, n, (uint16_t)bits);
  else
    tprt__fill_kernel<uint32_t><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>((uint32_t*)dst, n, bits);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}
