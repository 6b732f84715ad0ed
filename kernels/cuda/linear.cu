// tprt_cuda_linear: y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias[N]) in exact mode, bitwise equal to
// tprt_cpu_linear. Every output element is the canonical K accumulation of docs/numerics.md:
//   chunk c (S = ceil(K/C), c = 0..C-1):  acc = +0; acc = fmaf(x[m,k], w[n,k], acc) for k in
//       [c·S, min((c+1)·S, K)) increasing; acc = acc + 0 when the chunk is short (zero padding)
//   tree: p[i] = p[i] + p[i+s] for s = 1, 2, 4, ...;  then (+ bias in f32), round once.
//
// Layouts: x [M,K], w [N,K], y [M,N] dense row-major; bias [N]. Any alignment (scalar loads).
// Dtypes: x, w, bias bf16 / f16 / f32 (one kernel each, tprt_linear_kernel_<dtype>); y has x's
// dtype, or is f32: the unreduced partial (the tree sum itself, no bias).
//
// Launch geometry: a 256-thread block computes a 64x64 tile of y; thread (tx, ty) = (tid % 16,
// tid / 16) owns the 4x4 outputs (ty + 16i, tx + 16j), so that a warp's stores are rows of 16
// consecutive columns. grid.x covers N, grid.y covers M (at most 65535, larger M loops). For each
// chunk in turn the block walks the chunk's k range in tiles of 32: x and w tiles are loaded
// with consecutive threads reading consecutive k (coalesced), widened to f32 and stored k-major
// in shared memory; then every thread runs the tile's k steps in order, one __fmaf_rn per output.
// Tiles start at the chunk's first k and stop at its last, so no padding term ever enters an fma
// chain. When a chunk ends, its 16 partials are folded into the pairwise tree with a binary
// counter: chunk c is the right operand of the merges at the levels where c has trailing one
// bits, in the tree's order (left = lower chunks). The tree state lives in local memory (touched
// once per chunk, not per k).
#include "tprt_cuda_internal.cuh"

// Output tile of a block: 64 rows x 64 columns (16 x 16 threads, 4 x 4 outputs each).
#define TPRT__LIN_BM 64
#define TPRT__LIN_BN 64
// k per shared-memory tile: 32 consecutive elements (64 B of bf16, 128 B of f32) per row load.
#define TPRT__LIN_BK 32
// Threads per block and the 16 x 16 thread grid inside it.
#define TPRT__LIN_THREADS 256
#define TPRT__LIN_TDIM 16
// Outputs per thread along each axis: 64 / 16.
#define TPRT__LIN_TM 4
// Levels of the binary-counter tree: log2(TPRT_MAX_CHUNKS) + 1 = 11.
#define TPRT__LIN_LEVELS 11
// Most blocks along grid.y (the CUDA limit).
#define TPRT__LIN_MAX_GRID_Y 65535

static_assert(TPRT__LIN_TDIM * TPRT__LIN_TDIM == TPRT__LIN_THREADS, "16 x 16 threads");
static_assert(TPRT__LIN_TM * TPRT__LIN_TDIM == TPRT__LIN_BM && TPRT__LIN_BM == TPRT__LIN_BN, "square 64 tile");
static_assert((TPRT__LIN_BM * TPRT__LIN_BK) % TPRT__LIN_THREADS == 0, "whole tile loads");
static_assert((1 << (TPRT__LIN_LEVELS - 1)) == TPRT_MAX_CHUNKS, "tree depth covers TPRT_MAX_CHUNKS");

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

/// Loads the tile rows [r0, r0 + 64) x k [kt, kt + kn) of a [rows, k] matrix into s[kk][r] as
/// f32, zeros outside it. Consecutive threads read consecutive k of one row (coalesced); the
/// k-major store has a 65-float row pitch, so a warp's 32 stores hit 32 different banks.
template <int D>
static __device__ __forceinline__ void tprt__linear_load_tile(float (*s)[TPRT__LIN_BM + 1], const void* p, int64_t rows,
                                                              int64_t k, int64_t r0, int64_t kt, int kn) {
#pragma unroll
  for (int e = threadIdx.x; e < TPRT__LIN_BM * TPRT__LIN_BK; e += TPRT__LIN_THREADS) {
    int r = e / TPRT__LIN_BK, kk = e % TPRT__LIN_BK;
    int64_t gr = r0 + r;
    s[kk][r] = gr < rows && kk < kn ? tprt__cuda_ld(p, D, gr * k + kt + kk) : 0.0f;
  }
}

template <int D>
static __device__ __forceinline__ void tprt__linear_body(const void* __restrict__ x, const void* __restrict__ w,
                                                         const void* __restrict__ bias, void* __restrict__ y,
                                                         int y_dtype, int64_t m, int64_t n, int64_t k, int chunks,
                                                         int64_t size) {
  __shared__ float xs[TPRT__LIN_BK][TPRT__LIN_BM + 1];  // +1: conflict-free k-major stores
  __shared__ float ws[TPRT__LIN_BK][TPRT__LIN_BN + 1];
  const int tx = threadIdx.x % TPRT__LIN_TDIM, ty = threadIdx.x / TPRT__LIN_TDIM;
  const int64_t n0 = (int64_t)blockIdx.x * TPRT__LIN_BN;
  int top = 0;  // log2(chunks): the level that holds the finished tree
  while ((1 << top) < chunks) ++top;

  for (int64_t m0 = (int64_t)blockIdx.y * TPRT__LIN_BM; m0 < m; m0 += (int64_t)gridDim.y * TPRT__LIN_BM) {
    float tree[TPRT__LIN_LEVELS][TPRT__LIN_TM][TPRT__LIN_TM];  // pending left subtrees, per level
    for (int c = 0; c < chunks; ++c) {
      int64_t k0 = (int64_t)c * size, k1 = k0 + size;
      if (k0 > k) k0 = k;
      if (k1 > k) k1 = k;
      float acc[TPRT__LIN_TM][TPRT__LIN_TM];
#pragma unroll
      for (int i = 0; i < TPRT__LIN_TM; ++i)
#pragma unroll
        for (int j = 0; j < TPRT__LIN_TM; ++j) acc[i][j] = 0.0f;

      for (int64_t kt = k0; kt < k1; kt += TPRT__LIN_BK) {
        const int kn = (int)(k1 - kt < TPRT__LIN_BK ? k1 - kt : TPRT__LIN_BK);
        tprt__linear_load_tile<D>(xs, x, m, k, m0, kt, kn);
        tprt__linear_load_tile<D>(ws, w, n, k, n0, kt, kn);
        __syncthreads();
        for (int kk = 0; kk < kn; ++kk) {  // exactly the chunk's k, in increasing order
          float a[TPRT__LIN_TM], b[TPRT__LIN_TM];
#pragma unroll
          for (int i = 0; i < TPRT__LIN_TM; ++i) a[i] = xs[kk][ty + TPRT__LIN_TDIM * i];
#pragma unroll
          for (int j = 0; j < TPRT__LIN_TM; ++j) b[j] = ws[kk][tx + TPRT__LIN_TDIM * j];
#pragma unroll
          for (int i = 0; i < TPRT__LIN_TM; ++i)
#pragma unroll
            for (int j = 0; j < TPRT__LIN_TM; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        }
        __syncthreads();  // the next tile overwrites xs and ws
      }
      if (k1 - k0 < size) {  // the padded terms fmaf(0, 0, acc): -0 becomes +0
#pragma unroll
        for (int i = 0; i < TPRT__LIN_TM; ++i)
#pragma unroll
          for (int j = 0; j < TPRT__LIN_TM; ++j) acc[i][j] = __fadd_rn(acc[i][j], 0.0f);
      }

      // Binary counter over the pairwise tree: merge with the pending left subtree of every level
      // at which c has a one bit (from the bottom), then park the result one level up.
      int level = 0;
      for (; (c >> level) & 1; ++level) {
#pragma unroll
        for (int i = 0; i < TPRT__LIN_TM; ++i)
#pragma unroll
          for (int j = 0; j < TPRT__LIN_TM; ++j) acc[i][j] = __fadd_rn(tree[level][i][j], acc[i][j]);
      }
#pragma unroll
      for (int i = 0; i < TPRT__LIN_TM; ++i)
#pragma unroll
        for (int j = 0; j < TPRT__LIN_TM; ++j) tree[level][i][j] = acc[i][j];
    }

#pragma unroll
    for (int i = 0; i < TPRT__LIN_TM; ++i) {
      const int64_t gm = m0 + ty + TPRT__LIN_TDIM * i;
#pragma unroll
      for (int j = 0; j < TPRT__LIN_TM; ++j) {
        const int64_t gn = n0 + tx + TPRT__LIN_TDIM * j;
        if (gm < m && gn < n) {
          float v = tree[top][i][j];
          if (bias) v = __fadd_rn(v, tprt__cuda_ld(bias, D, gn));
          tprt__cuda_st(y, y_dtype, gm * n + gn, v);
        }
      }
    }
  }
}

#define TPRT__LINEAR_KERNEL(name, dtype)                                                                          \
  extern "C" __global__ void __launch_bounds__(TPRT__LIN_THREADS)                                                 \
      name(const void* x, const void* w, const void* bias, void* y, int y_dtype, int64_t m, int64_t n, int64_t k, \
           int chunks, int64_t size) {                                                                            \
    tprt__linear_body<dtype>(x, w, bias, y, y_dtype, m, n, k, chunks, size);                                      \
  }
TPRT__LINEAR_KERNEL(tprt_linear_kernel_bf16, TPRT_DTYPE_BF16)
TPRT__LINEAR_KERNEL(tprt_linear_kernel_f16, TPRT_DTYPE_F16)
TPRT__LINEAR_KERNEL(tprt_linear_kernel_f32, TPRT_DTYPE_F32)

// ------------------------------------------------------------------------------------------------
// Kernel launcher
// ------------------------------------------------------------------------------------------------

tprt_status_t tprt_cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                               tprt_tensor_t* y, int chunks, cudaStream_t stream) {
  tprt_status_t s = tprt__check_linear(x, w, bias, y, chunks);  // cpu_linear.c's checks and messages
  if (s) return s;
  int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  if (m == 0 || n == 0) return NULL;  // K = 0 is computed: y = bias (or +0)
  const void* kernel;
  switch (x->dtype) {
    case TPRT_DTYPE_BF16:
      kernel = (const void*)tprt_linear_kernel_bf16;
      break;
    case TPRT_DTYPE_F16:
      kernel = (const void*)tprt_linear_kernel_f16;
      break;
    case TPRT_DTYPE_F32:
      kernel = (const void*)tprt_linear_kernel_f32;
      break;
    default:
      return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "linear: no CUDA kernel for dtype %s",
                              tprt_dtype_name(x->dtype));
  }
  int64_t blocks_n = tprt__cuda_div_up(n, TPRT__LIN_BN), blocks_m = tprt__cuda_div_up(m, TPRT__LIN_BM);
  if (blocks_n > INT32_MAX)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "linear: N=%lld needs more than 2^31-1 blocks", (long long)n);
  dim3 grid((unsigned)blocks_n, (unsigned)(blocks_m < TPRT__LIN_MAX_GRID_Y ? blocks_m : TPRT__LIN_MAX_GRID_Y));
  const void* xd = x->data;
  const void* wd = w->data;
  const void* bd = bias ? bias->data : NULL;
  void* yd = y->data;
  int y_dtype = y->dtype;
  int64_t size = tprt_kacc_chunk_size(k, chunks);
  void* args[] = {&xd, &wd, &bd, &yd, &y_dtype, &m, &n, &k, &chunks, &size};
  TPRT_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel, grid, dim3(TPRT__LIN_THREADS), args, 0, stream));
  return NULL;
}
