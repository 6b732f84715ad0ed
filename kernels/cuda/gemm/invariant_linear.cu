// Invariant-mode dense contractions on tensor cores (invariant_gemm.cuh): the linear's forward
// (bias in the epilogue), dgrad and wgrad, each one invariant GEMM whose per-element arithmetic is
// the chunk tree over the contracted length of fixed WGMMA sequences.
//
//   forward  y[M,N]  = x[M,K]·w[N,K]ᵀ        chunks over K
//   dgrad    dx[M,K] = dy[M,N]·w[N,K]        chunks over N, in the op's segmented order: with runs
//            of whole k tiles and one unsplit launch the kernel loads the k tiles in that order
//            where they are; otherwise dy's columns and w's rows are copied into it first. The
//            GEMM reads w as it is stored (B row-major), one instruction layout for every dgrad
//   wgrad    dw[N,K] = dy[M,N]ᵀ·x[M,K]       chunks over M (the tokens)
//
// Requirements (the _fits predicates): bf16 operands, results bf16 or f32 (a bias only with a
// bf16 result), the contracted length a multiple of chunks x 64, row lengths multiples of 8 (TMA),
// 16-byte aligned data, sizes below 2^31. They depend on the logical problem only (the chunk
// length K/C is the same at every TP degree), so a model takes this path at every degree or at
// none.
#include <cuda_bf16.h>

#include <algorithm>

#include "invariant_gemm.cuh"
#include "tprt_cuda_kernels.h"
extern "C" {
#include "tprt_cpu_internal.h"  // tprt__segmented_order (a C header)
}

namespace {

bool tprt__inv_aligned(const void* p) { return ((uintptr_t)p & 15) == 0; }

bool tprt__inv_operands(const tprt_tensor_t* a, const tprt_tensor_t* b, const tprt_tensor_t* out) {
  return a && b && out && a->rank == 2 && b->rank == 2 && out->rank == 2 && a->dtype == TPRT_DTYPE_BF16 &&
         b->dtype == TPRT_DTYPE_BF16 && (out->dtype == TPRT_DTYPE_BF16 || out->dtype == TPRT_DTYPE_F32) &&
         tprt__inv_aligned(a->data) && tprt__inv_aligned(b->data) && tprt__inv_aligned(out->data);
}

/// |len| (the contracted length) splits into |chunks| chunks of whole 64-wide k tiles; the other
/// sizes are TMA-friendly.
bool tprt__inv_sizes(int64_t len, int chunks, std::initializer_list<int64_t> rows) {
  if (chunks < 1 || chunks > 1024 || (chunks & (chunks - 1)) || len <= 0 || len % chunks || (len / chunks) % 64)
    return false;
  for (int64_t r : rows)
    if (r <= 0 || r >= INT32_MAX || r % 8) return false;
  return len < INT32_MAX;
}

/// The tree workspace (stream-ordered) of |g|, whose sm_count is set.
tprt_status_t tprt__inv_prepare(tprt__inv_gemm_t* g, cudaStream_t stream) {
  g->tree_ctas = g->sm_count;  // the persistent grid never exceeds the SM count
  return tprt__inv_tree_alloc(g->chunks, tprt__inv_first_workspace_level(tprt__inv_pend_of(*g)), g->tree_ctas,
                              &g->tree_ws, stream);
}

/// The top of the chunk tree of the split schedule: d = the pairwise tree (binary counter, left +
/// right, as in tprt__chunk_tree_mma) over the |batches| f32 subtree partials part[b][m][n]
/// (plane m·n), plus the bias, rounded once to D's type: what the epilogue of the unsplit kernel
/// computes from the same tree.
template <class ElementD>
__global__ void tprt__inv_tree_top(const float* __restrict__ part, int batches, int m, int n,
                                   const __nv_bfloat16* __restrict__ bias, ElementD* __restrict__ d, int64_t ldd) {
  const int64_t plane = (int64_t)m * n;
  constexpr int kLoads = 8;  // partials loaded together: one memory latency for up to 8 subtrees
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < plane; i += (int64_t)gridDim.x * blockDim.x) {
    float stack[32];
    int top = 0;
    for (int b0 = 0; b0 < batches; b0 += kLoads) {
      float loaded[kLoads];
#pragma unroll
      for (int j = 0; j < kLoads; ++j) loaded[j] = b0 + j < batches ? part[(b0 + j) * plane + i] : 0.0f;
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        const int b = b0 + j;
        if (b >= batches) break;
        float v = loaded[j];
        int level = 0;
        for (; (b >> level) & 1; ++level) v = __fadd_rn(stack[level], v);
        stack[level] = v;
        top = level;
      }
    }
    float v = stack[top];
    const int64_t row = i / n, col = i % n;
    if (bias) v = __fadd_rn(v, __bfloat162float(bias[col]));
    if constexpr (sizeof(ElementD) == 4) {
      d[row * ldd + col] = v;
    } else {
      d[row * ldd + col] = __float2bfloat16_rn(v);
    }
  }
}

/// Sets g->sm_count to the SMs a GEMM may use now (tprt_cuda_gemm_sms: the device's, less those an
/// asynchronous collective in flight keeps). The chunk tree fixes the arithmetic, so the bits do
/// not depend on it.
tprt_status_t tprt__inv_set_sm_count(tprt__inv_gemm_t* g) { return tprt_cuda_gemm_sms(&g->sm_count); }

/// The schedule of one invariant GEMM. The chunk tree fixes every element's arithmetic, so the
/// work may be cut along it without changing a bit: when the output has too few 128 x 128 tiles
/// to fill the GPU (small M: decode, or a narrow layer; for more than one row of tiles, fewer
/// tiles than SMs and only when the persistent grid's rounds x chunks per item gets strictly
/// smaller), the chunks are split into |batches| = C / per subtrees of |per| chunks, computed in
/// parallel as f32 partials (one batched launch of the same kernel, each batch from +0 over its
/// subtree's chunks) and combined by the tree's top
/// levels in tprt__inv_tree_top. A single row of tiles always takes this path.
/// test/gpu/check_fast.cu checks that a row alone, through this path, has the
/// bits it has in a large batch, which does not split.
/// Returns the chunks of each subtree (g.chunks: no split unless a single row of tiles);
/// |g|'s sm_count is set.
int tprt__inv_subtree_chunks(const tprt__inv_gemm_t& g) {
  const int64_t m_tiles = (g.m + 127) / 128, tiles = m_tiles * ((g.n + 127) / 128);
  int per = g.chunks;
  if (m_tiles == 1) {
    // A single row of tiles (decoding): at least twice the SM count of (tile, subtree) items.
    while (per > 1 && tiles * (g.chunks / per) < 2 * (int64_t)g.sm_count) per /= 2;
  } else if (tiles < g.sm_count) {
    // Fewer tiles than SMs: the persistent grid takes ceil(items / SMs) rounds of |per| chunks
    // each; split where that is strictly shorter (a tie keeps the larger subtrees: no partials to
    // write and combine). With a tile for every SM the partials' traffic would cost more than the
    // last round's idle SMs.
    auto cost = [&](int p) { return ((tiles * (g.chunks / p) + g.sm_count - 1) / g.sm_count) * p; };
    for (int p = g.chunks / 2; p >= 1; p /= 2)
      if (cost(p) < cost(per)) per = p;
  }
  return per;
}

/// Whether |g|'s schedule (sm_count set) runs one unsplit launch.
bool tprt__inv_unsplit(const tprt__inv_gemm_t& g) { return g.m > 128 && tprt__inv_subtree_chunks(g) == g.chunks; }

/// Runs |g| (of layout |layout|) on that schedule.
tprt_status_t tprt__inv_launch(int layout, tprt__inv_gemm_t g, cudaStream_t stream) {
  g.tree_ws = nullptr;
  g.batches = 1;
  if (!g.sm_count) {  // the dgrad sets it when it chooses between the in-place order and copies
    if (tprt_status_t s = tprt__inv_set_sm_count(&g)) return s;
  }
  auto run = [&](tprt__inv_gemm_t& h) {
    tprt_status_t s = tprt__inv_prepare(&h, stream);
    if (!s) {
      s = layout == TPRT__INV_FWD     ? tprt__inv_gemm_fwd(h, stream)
          : layout == TPRT__INV_DGRAD ? tprt__inv_gemm_dgrad(h, stream)
                                      : tprt__inv_gemm_wgrad(h, stream);
    }
    if (h.tree_ws) tprt__cuda_free_async(h.tree_ws, stream);
    return s;
  };
  if (tprt__inv_unsplit(g)) return run(g);
  const int per = tprt__inv_subtree_chunks(g);
  // Split: batch b holds chunks [b·per, (b+1)·per), a contiguous slice of the contracted length.
  const int batches = g.chunks / per;
  const int64_t len = g.k / batches;  // contracted elements per batch
  tprt__inv_gemm_t h = g;
  h.k = (int)len, h.chunks = per, h.batches = batches;
  // FWD contracts A's and B's contiguous dimension; DGRAD A's contiguous one and B's rows; WGRAD
  // the rows of both.
  h.a_batch = layout == TPRT__INV_WGRAD ? len * g.lda : len;
  h.b_batch = layout == TPRT__INV_FWD ? len : len * g.ldb;
  h.d_batch = (int64_t)g.m * g.n;
  h.ldd = g.n, h.d_f32 = true, h.bias = nullptr;
  void* part = nullptr;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&part, (size_t)batches * (size_t)h.d_batch * sizeof(float), stream));
  h.d = part;
  tprt_status_t s = run(h);
  if (!s) {
    const int64_t plane = (int64_t)g.m * g.n;
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((plane + threads - 1) / threads, (int64_t)g.sm_count * 16);
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(g.bias);
    if (g.d_f32) {
      tprt__inv_tree_top<<<(unsigned)blocks, threads, 0, stream>>>(static_cast<const float*>(part), batches, g.m, g.n,
                                                                    bias, static_cast<float*>(g.d), g.ldd);
    } else {
      tprt__inv_tree_top<<<(unsigned)blocks, threads, 0, stream>>>(static_cast<const float*>(part), batches, g.m, g.n,
                                                                    bias, static_cast<__nv_bfloat16*>(g.d), g.ldd);
    }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) s = tprt__cuda_make_status(err, "tprt__inv_tree_top<<<>>>", __FILE__, __LINE__);
  }
  tprt__cuda_free_async(part, stream);
  return s;
}

}  // namespace

extern "C" bool tprt_cuda_linear_invariant_fits(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                const tprt_tensor_t* bias, const tprt_tensor_t* y, int chunks) {
  if (!tprt__inv_operands(x, w, y)) return false;
  int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  if (w->dims[1] != k || y->dims[0] != m || y->dims[1] != n || m <= 0 || m >= INT32_MAX) return false;
  if (bias && (bias->rank != 1 || bias->dims[0] != n || bias->dtype != TPRT_DTYPE_BF16 || y->dtype != TPRT_DTYPE_BF16 ||
               !tprt__inv_aligned(bias->data)))
    return false;
  return tprt__inv_sizes(k, chunks, {n});
}

extern "C" tprt_status_t tprt_cuda_linear_invariant(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                    const tprt_tensor_t* bias, tprt_tensor_t* y, int chunks,
                                                    cudaStream_t stream) {
  if (!tprt_cuda_linear_invariant_fits(x, w, bias, y, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "linear (invariant): unsupported shapes, dtypes or chunks");
  tprt__inv_gemm_t g{};
  g.m = (int)x->dims[0], g.n = (int)w->dims[0], g.k = (int)x->dims[1];
  g.a = x->data, g.lda = g.k, g.b = w->data, g.ldb = g.k, g.d = y->data, g.ldd = g.n;
  g.d_f32 = y->dtype == TPRT_DTYPE_F32, g.bias = bias ? bias->data : nullptr, g.chunks = chunks;
  tprt_status_t s = tprt__inv_launch(TPRT__INV_FWD, g, stream);
  return s ? tprt_status_annotate(s, "linear (invariant)") : nullptr;
}

extern "C" bool tprt_cuda_linear_dgrad_invariant_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                      const tprt_tensor_t* dx, int chunks) {
  if (!tprt__inv_operands(dy, w, dx)) return false;
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1];
  if (w->dims[0] != n || dx->dims[0] != m || dx->dims[1] != k || m <= 0 || m >= INT32_MAX) return false;
  return tprt__inv_sizes(n, chunks, {k});
}

extern "C" tprt_status_t tprt_cuda_linear_dgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                          tprt_tensor_t* dx, int chunks, int segments, int blocks,
                                                          cudaStream_t stream) {
  const char* op = "linear_dgrad (invariant)";
  if (!tprt_cuda_linear_dgrad_invariant_fits(dy, w, dx, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported shapes, dtypes or chunks", op);
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1];
  // The host order only validates (the CPU kernel's checks and messages); the device computes it.
  int64_t* order = nullptr;
  tprt_status_t s = tprt__segmented_order(op, n, chunks, segments, blocks, &order);
  if (s) return s;
  const bool segmented = order != nullptr;
  tprt__scratch_free(order);
  tprt__inv_gemm_t g{};
  g.m = (int)m, g.n = (int)k, g.k = (int)n;
  g.a = dy->data, g.lda = n, g.b = w->data, g.ldb = k, g.d = dx->data, g.ldd = k;
  g.d_f32 = dx->dtype == TPRT_DTYPE_F32, g.chunks = chunks;
  void *dyp = nullptr, *wp = nullptr;
  if (segmented) {
    tprt_cuda_order_t o = {chunks, segments, blocks};
    s = tprt__inv_set_sm_count(&g);
    // Runs of whole k tiles in an unsplit launch: the kernel reads the tiles in the order where
    // they are. Otherwise dy's columns and w's rows are copied into that order first.
    if (!s && (n / ((int64_t)chunks * segments)) % 64 == 0 && tprt__inv_unsplit(g)) {
      g.k_order = o;
    } else if (!s) {
      cudaError_t err = tprt__cuda_malloc_async(&dyp, (size_t)(m * n) * 2, stream);
      if (err == cudaSuccess) err = tprt__cuda_malloc_async(&wp, (size_t)(n * k) * 2, stream);
      if (err != cudaSuccess) s = tprt__cuda_make_status(err, "tprt__cuda_malloc_async", __FILE__, __LINE__);
      if (!s) s = tprt_cuda_gather_2d(dy->data, m, n, 2, nullptr, o, n, 0, dyp, stream);
      if (!s) s = tprt_cuda_gather_rows(w->data, n, k * 2, o, wp, stream);
      g.a = dyp, g.b = wp;
    }
  }
  if (!s) s = tprt__inv_launch(TPRT__INV_DGRAD, g, stream);
  if (dyp) tprt__cuda_free_async(dyp, stream);
  if (wp) tprt__cuda_free_async(wp, stream);
  return s ? tprt_status_annotate(s, "%s", op) : nullptr;
}

extern "C" bool tprt_cuda_linear_wgrad_invariant_fits(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                      const tprt_tensor_t* dw, int chunks) {
  if (!tprt__inv_operands(dy, x, dw)) return false;
  int64_t m = dy->dims[0], n = dy->dims[1], k = x->dims[1];
  if (x->dims[0] != m || dw->dims[0] != n || dw->dims[1] != k) return false;
  return tprt__inv_sizes(m, chunks, {n, k});
}

extern "C" tprt_status_t tprt_cuda_linear_wgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                          tprt_tensor_t* dw, int chunks, cudaStream_t stream) {
  if (!tprt_cuda_linear_wgrad_invariant_fits(dy, x, dw, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "linear_wgrad (invariant): unsupported shapes, dtypes or chunks");
  tprt__inv_gemm_t g{};
  g.m = (int)dy->dims[1], g.n = (int)x->dims[1], g.k = (int)dy->dims[0];
  g.a = dy->data, g.lda = g.m, g.b = x->data, g.ldb = g.n, g.d = dw->data, g.ldd = g.n;
  g.d_f32 = dw->dtype == TPRT_DTYPE_F32, g.chunks = chunks;
  tprt_status_t s = tprt__inv_launch(TPRT__INV_WGRAD, g, stream);
  return s ? tprt_status_annotate(s, "linear_wgrad (invariant)") : nullptr;
}
