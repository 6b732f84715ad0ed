// tprt_cuda_grouped_linear: y[T,N] = x[T,K]·w[e,N,K]ᵀ for the rows of each expert e of w[E,N,K],
// in exact mode, bitwise equal to tprt_cpu_grouped_linear. group_sizes[S*E] (i64, device memory)
// splits T into S segments of capacity T/S; segment s holds group_sizes[s*E + j] rows of expert j
// for j = 0..E-1, in order, then padding rows whose outputs are +0.0 (all-zero bits in every
// dtype). Every real output element is the canonical K accumulation of docs/numerics.md, exactly
// as in linear.cu: per chunk acc = +0, acc = fmaf(x, w, acc) in increasing k, acc + 0 for a short
// chunk; the pairwise tree over chunks by a binary counter; round once.
//
// Layouts: x [T,K], w [E,N,K], y [T,N] dense row-major; any alignment (scalar loads).
// Dtypes: x, w bf16 / f16 / f32 (tprt_grouped_linear_kernel_<dtype>); y x's dtype or f32 (the
// unrounded partial).
//
// group_sizes is never read on the host (validation covers shapes only). Counts the CPU kernel
// would reject (negative, over T/S, a segment over capacity, S == 1 not summing to T) are a
// precondition violation: the kernel clamps them so that it never reads or writes out of bounds,
// and the values of y are then unspecified.
//
// Launch geometry (correctness first, not tuned): one block of 128 threads per output row
// (grid.y, at most 65535, larger T loops), threads over N (grid.x tiles N by 128). All threads of
// a block share the row, hence the expert (found by a walk over the segment's E counts, uniform
// across the block) and the x[row, k] loads (broadcast). Every thread runs one output's chains
// straight from global memory (w rows through L1/L2) and keeps the 11-level tree in registers /
// local memory. A tiled, tensor-core-free version like linear.cu is the next step.
#include "tprt_cuda_internal.cuh"

// Threads per block: 4 warps over N.
#define TPRT__GL_THREADS 128
// Levels of the binary-counter tree: log2(TPRT_MAX_CHUNKS) + 1 = 11.
#define TPRT__GL_LEVELS 11
// Most blocks along grid.y (the CUDA limit).
#define TPRT__GL_MAX_GRID_Y 65535

static_assert((1 << (TPRT__GL_LEVELS - 1)) == TPRT_MAX_CHUNKS, "tree depth covers TPRT_MAX_CHUNKS");

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

/// The expert of row |m| (or -1 for a padding row): walks the counts of m's segment, clamped to
/// [0, cap] so that invalid counts cannot index past w.
static __device__ __forceinline__ int64_t tprt__gl_expert(const int64_t* sizes, int64_t m, int64_t cap, int64_t e) {
  const int64_t seg = m / cap;
  int64_t local = m - seg * cap, start = 0;
  for (int64_t j = 0; j < e; ++j) {
    int64_t n = sizes[seg * e + j];
    n = n < 0 ? 0 : n > cap ? cap : n;
    if (local < start + n) return j;
    start += n;
  }
  return -1;
}

template <int D>
static __device__ __forceinline__ void tprt__gl_body(const void* __restrict__ x, const void* __restrict__ w,
                                                     const int64_t* __restrict__ sizes, void* __restrict__ y,
                                                     int y_dtype, int64_t t, int64_t n, int64_t k, int64_t e,
                                                     int64_t cap, int chunks, int64_t size) {
  const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int top = 0;  // log2(chunks): the level that holds the finished tree
  while ((1 << top) < chunks) ++top;
  for (int64_t m = blockIdx.y; m < t; m += gridDim.y) {
    if (col >= n) continue;
    const int64_t ex = tprt__gl_expert(sizes, m, cap, e);
    if (ex < 0) {  // padding row: +0.0, all-zero bits
      tprt__cuda_st(y, y_dtype, m * n + col, 0.0f);
      continue;
    }
    const int64_t xo = m * k, wo = (ex * n + col) * k;
    float tree[TPRT__GL_LEVELS];
    for (int c = 0; c < chunks; ++c) {
      int64_t k0 = (int64_t)c * size, k1 = k0 + size;
      if (k0 > k) k0 = k;
      if (k1 > k) k1 = k;
      float acc = 0.0f;
      for (int64_t kk = k0; kk < k1; ++kk)
        acc = __fmaf_rn(tprt__cuda_ld(x, D, xo + kk), tprt__cuda_ld(w, D, wo + kk), acc);
      if (k1 - k0 < size) acc = __fadd_rn(acc, 0.0f);  // the padded terms fmaf(0, 0, acc)
      int level = 0;
      for (; (c >> level) & 1; ++level) acc = __fadd_rn(tree[level], acc);
      tree[level] = acc;
    }
    tprt__cuda_st(y, y_dtype, m * n + col, tree[top]);
  }
}

#define TPRT__GL_KERNEL(name, dtype)                                                                                  \
  extern "C" __global__ void __launch_bounds__(TPRT__GL_THREADS)                                                      \
      name(const void* x, const void* w, const int64_t* sizes, void* y, int y_dtype, int64_t t, int64_t n, int64_t k, \
           int64_t e, int64_t cap, int chunks, int64_t size) {                                                        \
    tprt__gl_body<dtype>(x, w, sizes, y, y_dtype, t, n, k, e, cap, chunks, size);                                     \
  }
TPRT__GL_KERNEL(tprt_grouped_linear_kernel_bf16, TPRT_DTYPE_BF16)
TPRT__GL_KERNEL(tprt_grouped_linear_kernel_f16, TPRT_DTYPE_F16)
TPRT__GL_KERNEL(tprt_grouped_linear_kernel_f32, TPRT_DTYPE_F32)

// ------------------------------------------------------------------------------------------------
// Kernel launcher
// ------------------------------------------------------------------------------------------------

tprt_status_t tprt_cuda_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes,
                                       tprt_tensor_t* y, int chunks, cudaStream_t stream) {
  int64_t segs = 1;
  // cpu_linear.c's checks and messages, but the counts: they are device data here.
  tprt_status_t s = tprt__check_grouped_linear(x, w, group_sizes, y, chunks, &segs);
  if (s) return s;
  int64_t t = x->dims[0], k = x->dims[1], e = w->dims[0], n = w->dims[1];
  if (t == 0 || n == 0) return NULL;
  const void* kernel;
  switch (x->dtype) {
    case TPRT_DTYPE_BF16:
      kernel = (const void*)tprt_grouped_linear_kernel_bf16;
      break;
    case TPRT_DTYPE_F16:
      kernel = (const void*)tprt_grouped_linear_kernel_f16;
      break;
    case TPRT_DTYPE_F32:
      kernel = (const void*)tprt_grouped_linear_kernel_f32;
      break;
    default:
      return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "grouped_linear: no CUDA kernel for dtype %s",
                              tprt_dtype_name(x->dtype));
  }
  int64_t blocks_n = tprt__cuda_div_up(n, TPRT__GL_THREADS);
  if (blocks_n > INT32_MAX)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "grouped_linear: N=%lld needs more than 2^31-1 blocks",
                            (long long)n);
  dim3 grid((unsigned)blocks_n, (unsigned)(t < TPRT__GL_MAX_GRID_Y ? t : TPRT__GL_MAX_GRID_Y));
  const void* xd = x->data;
  const void* wd = w->data;
  const int64_t* sd = (const int64_t*)group_sizes->data;
  void* yd = y->data;
  int y_dtype = y->dtype;
  int64_t cap = t / segs, size = tprt_kacc_chunk_size(k, chunks);
  void* args[] = {&xd, &wd, &sd, &yd, &y_dtype, &t, &n, &k, &e, &cap, &chunks, &size};
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(TPRT__GL_THREADS), args, 0, stream));
  return NULL;
}
