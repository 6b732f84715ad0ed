// tprt_cuda_fused_grouped_mlp: bitwise tprt_cpu_fused_grouped_mlp, which is by definition
// grouped_linear -> glu -> grouped_linear with both intermediates rounded to x's dtype: the same
// three CUDA kernels in sequence, the intermediates in stream-ordered temporaries.
// tprt_cuda_fused_grouped_mlp_fast and _invariant are the same sequence with the fast-mode grouped
// linear (tensor cores, no bitwise promise) or the invariant one (tensor cores, the invariant
// grouped GEMM's bits), and the GLU of those modes' kernel table rows (tprt_cuda_glu_fast: the
// hardware's exponential and division; elementwise, so the fused op stays bitwise the unfused
// sequence of its mode). The GLU in FC1's epilogue (tprt_cuda_grouped_linear_glu, same bits) is not
// used here: in CUTLASS's cooperative kernel the epilogue's GLU arithmetic runs on two warpgroups
// with the tensor cores idle, and FC1 + GLU measured ~2.5x slower than FC1 and the GLU kernel
// (tprt-bench-gemm's glu-epilogue lines, docs/performance.md).
#include "tprt_cpu_internal.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

// A grouped linear launcher: the exact one (chunks) or the fast one.
typedef enum { TPRT__MLP_EXACT, TPRT__MLP_FAST, TPRT__MLP_INVARIANT } tprt__mlp_mode_t;
typedef struct {
  tprt__mlp_mode_t mode;
  int chunks;  // the exact and invariant ones'
} tprt__mlp_gl_t;

static tprt_status_t tprt__mlp_grouped_linear(const tprt__mlp_gl_t* gl, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                              const tprt_tensor_t* group_sizes, tprt_tensor_t* y, cudaStream_t stream) {
  switch (gl->mode) {
    case TPRT__MLP_FAST:
      return tprt_cuda_grouped_linear_fast(x, w, group_sizes, y, stream);
    case TPRT__MLP_INVARIANT:
      return tprt_cuda_grouped_linear_invariant(x, w, group_sizes, y, gl->chunks, stream);
    default:
      return tprt_cuda_grouped_linear(x, w, group_sizes, y, gl->chunks, stream);
  }
}

static tprt_status_t tprt__fused_grouped_mlp(const tprt__mlp_gl_t* gl, const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                             const tprt_tensor_t* w2, const tprt_tensor_t* group_sizes,
                                             tprt_tensor_t* y, int kind, int64_t interleave, float alpha, float limit,
                                             cudaStream_t stream) {
  const char* op = "fused_grouped_mlp";
  tprt_status_t s = tprt__check_fused_grouped_mlp(x, w1, w2, group_sizes, y);
  if (s) return s;
  int64_t t = x->dims[0], two_f = w1->dims[1], f = two_f / 2;
  size_t elem = tprt_dtype_bytes(x->dtype, 1);
  void* mem = NULL;
  size_t bytes = (size_t)t * (size_t)(two_f + f) * elem;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&mem, bytes ? bytes : 1, stream));
  int64_t hdims[2] = {t, two_f}, gdims[2] = {t, f};
  tprt_tensor_t hidden = tprt_tensor_make(mem, x->dtype, 2, hdims);
  tprt_tensor_t gated = tprt_tensor_make((char*)mem + (size_t)t * (size_t)two_f * elem, x->dtype, 2, gdims);
  s = tprt__mlp_grouped_linear(gl, x, w1, group_sizes, &hidden, stream);
  if (s) s = tprt_status_annotate(s, "%s fc1", op);
  if (!s) {
    s = gl->mode == TPRT__MLP_EXACT ? tprt_cuda_glu(&hidden, &gated, kind, interleave, alpha, limit, stream)
                                    : tprt_cuda_glu_fast(&hidden, &gated, kind, interleave, alpha, limit, stream);
    if (s) s = tprt_status_annotate(s, "%s activation", op);
  }
  if (!s) {
    s = tprt__mlp_grouped_linear(gl, &gated, w2, group_sizes, y, stream);
    if (s) s = tprt_status_annotate(s, "%s fc2", op);
  }
  tprt__cuda_free_async(mem, stream);
  return s;
}

tprt_status_t tprt_cuda_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                          const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                          int64_t interleave, float alpha, float limit, int chunks,
                                          cudaStream_t stream) {
  tprt__mlp_gl_t gl = {TPRT__MLP_EXACT, chunks};
  return tprt__fused_grouped_mlp(&gl, x, w1, w2, group_sizes, y, kind, interleave, alpha, limit, stream);
}

tprt_status_t tprt_cuda_fused_grouped_mlp_fast(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                               const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                               int64_t interleave, float alpha, float limit, cudaStream_t stream) {
  tprt__mlp_gl_t gl = {TPRT__MLP_FAST, 0};
  return tprt__fused_grouped_mlp(&gl, x, w1, w2, group_sizes, y, kind, interleave, alpha, limit, stream);
}

tprt_status_t tprt_cuda_fused_grouped_mlp_invariant(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                                    const tprt_tensor_t* w2, const tprt_tensor_t* group_sizes,
                                                    tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                                                    float limit, int chunks, cudaStream_t stream) {
  tprt__mlp_gl_t gl = {TPRT__MLP_INVARIANT, chunks};
  return tprt__fused_grouped_mlp(&gl, x, w1, w2, group_sizes, y, kind, interleave, alpha, limit, stream);
}
