// The CUDA backward contractions, bitwise equal to the CPU kernels of cpu_linear_grad.c. Each is
// the exact GEMM of the forward kernels (tprt_cuda_gemm_exact / tprt_cuda_grouped_gemm_exact,
// linear.cu / grouped_linear.cu) with operands laid out so that its K loop visits the contracted
// dimension in the canonical order of the gradient:
//   dgrad  dx = dy·w:   gemm(a = dy [M,N], b = w read k-major ([N,K]: N contracted))
//   wgrad  dw = dyᵀ·x:  gemm(a = dy read k-major, b = x read k-major; M contracted)
//   bias   db = Σ_m dy: gemm(a = dy read k-major, b = ones [M,1] k-major)   (acc + v == fmaf(v, 1, acc))
// The GEMM computes fmaf(a[i,r], b[j,r], acc) over r in chunk order and the gradient's definition
// is fmaf(a[r], b[r], acc) over the same r (fmaf is commutative in its factors), so the bits are
// the CPU's (test/gpu/cuda_check_grad.cu checks them). The operands are read where they are, with
// two exceptions that make copies: a segmented dgrad order (dy's columns and w's rows permuted
// into a transposed copy, tprt_cuda_dgrad_operands), and a grouped wgrad expert whose rows are
// not one contiguous range (several segments: its rows gathered, transposed).
//
// Unlike the single-kernel launchers these allocate their temporaries with the stream-ordered
// allocator (tprt__cuda_malloc_async / tprt__cuda_free_async on |stream|), and the grouped wgrad reads the group
// sizes back to the host (one synchronization) to list each expert's rows.
#include <stdlib.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

#define TPRT__TRY(expr)              \
  do {                               \
    tprt_status_t tprt__st = (expr); \
    if (tprt__st) return tprt__st;   \
  } while (0)

static int tprt__elem(int dtype) { return dtype == TPRT_DTYPE_F32 ? 4 : 2; }

static tprt_status_t tprt__check_2d(const char* op, const char* name, const tprt_tensor_t* t, int rank) {
  bool ok =
      t && t->rank == rank && (t->dtype == TPRT_DTYPE_BF16 || t->dtype == TPRT_DTYPE_F16 || t->dtype == TPRT_DTYPE_F32);
  return ok ? NULL
            : tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be a rank-%d bf16, f16 or f32 tensor", op,
                               name, rank);
}

// A device copy of |n| host int64 values (freed by the caller with tprt__cuda_free_async).
static tprt_status_t tprt__upload_index(const int64_t* host, int64_t n, int64_t** out, cudaStream_t stream) {
  *out = NULL;
  if (!host || n <= 0) return NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)out, (size_t)n * sizeof(int64_t), stream));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(*out, host, (size_t)n * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  // Pageable host memory: the copy has been staged when cudaMemcpyAsync returns; the caller may
  // free |host| now.
  return NULL;
}

// dy (and w, or w[e] for each expert) in the segmented order: dyp [T,N] (dy itself when the order
// is plain) and wt [E][K][N]. |op| names the caller. (Also the invariant tensor-core dgrad's.)
tprt_status_t tprt_cuda_dgrad_operands(const char* op, const tprt_tensor_t* dy, const tprt_tensor_t* w, int64_t e,
                                       int64_t n, int64_t k, int chunks, int segments, int blocks, void** dyp,
                                       void** wt, cudaStream_t stream) {
  // The host order only validates (same checks and messages as the CPU kernel); the device
  // computes the same order in closed form (tprt_cuda_gather_2d), so nothing is uploaded.
  int64_t* order = NULL;
  TPRT__TRY(tprt__segmented_order(op, n, chunks, segments, blocks, &order));
  bool segmented = order != NULL;
  tprt__scratch_free(order);
  tprt_cuda_order_t o = {segmented ? chunks : 0, segments, blocks};
  int elem = tprt__elem(dy->dtype);
  tprt_status_t s = NULL;
  *dyp = dy->data;
  *wt = NULL;
  cudaError_t err = tprt__cuda_malloc_async(wt, (size_t)(e * k * n > 0 ? e * k * n : 1) * (size_t)elem, stream);
  if (err == cudaSuccess && segmented)
    err = tprt__cuda_malloc_async(dyp, (size_t)(dy->dims[0] * n > 0 ? dy->dims[0] * n : 1) * (size_t)elem, stream);
  if (err != cudaSuccess) s = tprt__cuda_make_status(err, "tprt__cuda_malloc_async", __FILE__, __LINE__);
  for (int64_t i = 0; !s && i < e; ++i)
    s = tprt_cuda_gather_2d((const char*)w->data + (size_t)(i * n * k) * (size_t)elem, n, k, elem, NULL, o, n, 1,
                            (char*)*wt + (size_t)(i * k * n) * (size_t)elem, stream);
  if (!s && segmented) s = tprt_cuda_gather_2d(dy->data, dy->dims[0], n, elem, NULL, o, n, 0, *dyp, stream);
  return s;
}

// Whether the dgrad's order is segmented (validated as by the CPU kernel).
static tprt_status_t tprt__dgrad_segmented(const char* op, int64_t n, int chunks, int segments, int blocks,
                                           bool* out_segmented) {
  int64_t* order = NULL;
  TPRT__TRY(tprt__segmented_order(op, n, chunks, segments, blocks, &order));
  *out_segmented = order != NULL;
  tprt__scratch_free(order);
  return NULL;
}

tprt_status_t tprt_cuda_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                               int chunks, int segments, int blocks, cudaStream_t stream) {
  const char* op = "linear_dgrad";
  TPRT__TRY(tprt__check_2d(op, "dy", dy, 2));
  TPRT__TRY(tprt__check_2d(op, "w", w, 2));
  TPRT__TRY(tprt__check_2d(op, "dx", dx, 2));
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1];
  if (w->dims[0] != n || w->dtype != dy->dtype || dx->dims[0] != m || dx->dims[1] != k)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dy[M,N], w[N,K] (dy's dtype) and dx[M,K] disagree", op);
  if (m == 0 || k == 0) return NULL;
  bool segmented = false;
  TPRT__TRY(tprt__dgrad_segmented(op, n, chunks, segments, blocks, &segmented));
  int64_t xd[2] = {m, n}, wd[2] = {k, n};
  if (!segmented) {  // dy as stored, w read k-major: no copies
    tprt_tensor_t xv = tprt_tensor_make(dy->data, dy->dtype, 2, xd), wv = tprt_tensor_make(w->data, dy->dtype, 2, wd);
    TPRT__TRY(tprt__check_linear(&xv, &wv, NULL, dx, chunks));
    return tprt_cuda_gemm_exact(dy->data, 0, w->data, 1, dy->dtype, m, k, n, NULL, dx->data, dx->dtype, chunks,
                                TPRT_CUDA_TILE_AUTO, stream);
  }
  void *dyp = NULL, *wt = NULL;
  tprt_status_t s = tprt_cuda_dgrad_operands(op, dy, w, 1, n, k, chunks, segments, blocks, &dyp, &wt, stream);
  tprt_tensor_t xv = tprt_tensor_make(dyp, dy->dtype, 2, xd), wv = tprt_tensor_make(wt, dy->dtype, 2, wd);
  if (!s) s = tprt_cuda_linear(&xv, &wv, NULL, dx, chunks, stream);
  if (wt) tprt__cuda_free_async(wt, stream);
  if (dyp && dyp != dy->data) tprt__cuda_free_async(dyp, stream);
  return s;
}

tprt_status_t tprt_cuda_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                       int segments, int blocks, cudaStream_t stream) {
  const char* op = "grouped_linear_dgrad";
  TPRT__TRY(tprt__check_2d(op, "dy", dy, 2));
  TPRT__TRY(tprt__check_2d(op, "w", w, 3));
  TPRT__TRY(tprt__check_2d(op, "dx", dx, 2));
  int64_t t = dy->dims[0], n = dy->dims[1], e = w->dims[0], k = w->dims[2];
  if (w->dims[1] != n || w->dtype != dy->dtype || dx->dims[0] != t || dx->dims[1] != k)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dy[T,N], w[E,N,K] (dy's dtype) and dx[T,K] disagree",
                            op);
  if (t == 0 || k == 0) return NULL;
  bool segmented = false;
  TPRT__TRY(tprt__dgrad_segmented(op, n, chunks, segments, blocks, &segmented));
  int64_t xd[2] = {t, n}, wd[3] = {e, k, n};
  if (!segmented) {  // dy as stored, w[e] read k-major: no copies
    tprt_tensor_t xv = tprt_tensor_make(dy->data, dy->dtype, 2, xd), wv = tprt_tensor_make(w->data, dy->dtype, 3, wd);
    int64_t segs = 1;
    TPRT__TRY(tprt__check_grouped_linear(&xv, &wv, group_sizes, dx, chunks, &segs));
    return tprt_cuda_grouped_gemm_exact(dy->data, w->data, 1, dy->dtype, t, k, n, e, (const int64_t*)group_sizes->data,
                                        segs, dx->data, dx->dtype, chunks, TPRT_CUDA_TILE_AUTO, stream);
  }
  void *dyp = NULL, *wt = NULL;
  tprt_status_t s = tprt_cuda_dgrad_operands(op, dy, w, e, n, k, chunks, segments, blocks, &dyp, &wt, stream);
  tprt_tensor_t xv = tprt_tensor_make(dyp, dy->dtype, 2, xd), wv = tprt_tensor_make(wt, dy->dtype, 3, wd);
  if (!s) s = tprt_cuda_grouped_linear(&xv, &wv, group_sizes, dx, chunks, stream);
  if (wt) tprt__cuda_free_async(wt, stream);
  if (dyp && dyp != dy->data) tprt__cuda_free_async(dyp, stream);
  return s;
}

// out [rows_out, len] = the transposed rows |index| (or all) of src [rows, cols]; a stream-ordered
// allocation the caller frees.
static tprt_status_t tprt__transposed(const tprt_tensor_t* src, const int64_t* d_index, int64_t len, void** out,
                                      cudaStream_t stream) {
  int elem = tprt__elem(src->dtype);
  size_t bytes = (size_t)(src->dims[1] * len > 0 ? src->dims[1] * len : 1) * (size_t)elem;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(out, bytes, stream));
  tprt_cuda_order_t none = {0, 1, 1};
  return tprt_cuda_gather_2d(src->data, src->dims[0], src->dims[1], elem, d_index, none, len, 1, *out, stream);
}

// dw [N,K] = Σ over |len| rows (|d_index|, or all) of dyᵀ·x, canonical over those rows: with an
// index, on transposed copies of the rows; without, dy and x read k-major where they are.
static tprt_status_t tprt__wgrad_rows(const tprt_tensor_t* dy, const tprt_tensor_t* x, const int64_t* d_index,
                                      int64_t len, tprt_tensor_t* dw, int chunks, cudaStream_t stream) {
  int64_t ad[2] = {dy->dims[1], len}, bd[2] = {x->dims[1], len};
  if (!d_index) {
    tprt_tensor_t av = tprt_tensor_make(dy->data, dy->dtype, 2, ad), bv = tprt_tensor_make(x->data, x->dtype, 2, bd);
    TPRT__TRY(tprt__check_linear(&av, &bv, NULL, dw, chunks));
    return tprt_cuda_gemm_exact(dy->data, 1, x->data, 1, dy->dtype, dy->dims[1], x->dims[1], len, NULL, dw->data,
                                dw->dtype, chunks, TPRT_CUDA_TILE_AUTO, stream);
  }
  void *dyt = NULL, *xt = NULL;
  tprt_status_t s = tprt__transposed(dy, d_index, len, &dyt, stream);
  if (!s) s = tprt__transposed(x, d_index, len, &xt, stream);
  tprt_tensor_t av = tprt_tensor_make(dyt, dy->dtype, 2, ad), bv = tprt_tensor_make(xt, x->dtype, 2, bd);
  if (!s) s = tprt_cuda_linear(&av, &bv, NULL, dw, chunks, stream);
  if (dyt) tprt__cuda_free_async(dyt, stream);
  if (xt) tprt__cuda_free_async(xt, stream);
  return s;
}

tprt_status_t tprt_cuda_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks,
                                     cudaStream_t stream) {
  const char* op = "linear_wgrad";
  TPRT__TRY(tprt__check_2d(op, "dy", dy, 2));
  TPRT__TRY(tprt__check_2d(op, "x", x, 2));
  TPRT__TRY(tprt__check_2d(op, "dw", dw, 2));
  int64_t m = dy->dims[0], n = dy->dims[1], k = x->dims[1];
  if (x->dims[0] != m || x->dtype != dy->dtype || dw->dims[0] != n || dw->dims[1] != k)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dy[M,N], x[M,K] (dy's dtype) and dw[N,K] disagree", op);
  if (n == 0 || k == 0) return NULL;
  if (m == 0) {  // an empty sum is +0.0
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dw->data, 0, tprt_tensor_bytes(dw), stream));
    return NULL;
  }
  return tprt__wgrad_rows(dy, x, NULL, m, dw, chunks, stream);
}

tprt_status_t tprt_cuda_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks, cudaStream_t stream) {
  const char* op = "bias_grad";
  TPRT__TRY(tprt__check_2d(op, "dy", dy, 2));
  TPRT__TRY(tprt__check_2d(op, "db", db, 1));
  int64_t m = dy->dims[0], n = dy->dims[1];
  if (db->dims[0] != n) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: db must be [N] for dy[M,N]", op);
  if (n == 0) return NULL;
  if (m == 0) {
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(db->data, 0, tprt_tensor_bytes(db), stream));
    return NULL;
  }
  // ones[1,M] in dy's dtype: 1.0 is 0x3F80 in bf16, 0x3C00 in f16, 0x3F800000 in f32.
  int elem = tprt__elem(dy->dtype);
  uint32_t one = dy->dtype == TPRT_DTYPE_F32 ? 0x3F800000u : dy->dtype == TPRT_DTYPE_BF16 ? 0x3F80u : 0x3C00u;
  void* ones = NULL;
  tprt_status_t s = NULL;
  cudaError_t err = tprt__cuda_malloc_async(&ones, (size_t)m * (size_t)elem, stream);
  if (err != cudaSuccess) s = tprt__cuda_make_status(err, "bias_grad: ones", __FILE__, __LINE__);
  if (!s) s = tprt_cuda_fill_bits(ones, m, elem, one, stream);
  // dy read k-major against ones[M,1] read k-major: db[N,1] = Σ_m fmaf(dy[m,n], 1, acc).
  int64_t ad[2] = {n, m}, od[2] = {1, m}, yd[2] = {n, 1};
  tprt_tensor_t av = tprt_tensor_make(dy->data, dy->dtype, 2, ad), ov = tprt_tensor_make(ones, dy->dtype, 2, od);
  tprt_tensor_t yv = tprt_tensor_make(db->data, db->dtype, 2, yd);
  if (!s) s = tprt__check_linear(&av, &ov, NULL, &yv, chunks);
  if (!s)
    s = tprt_cuda_gemm_exact(dy->data, 1, ones, 1, dy->dtype, n, 1, m, NULL, db->data, db->dtype, chunks,
                             TPRT_CUDA_TILE_AUTO, stream);
  if (ones) tprt__cuda_free_async(ones, stream);
  return s;
}

tprt_status_t tprt_cuda_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                             const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks,
                                             cudaStream_t stream) {
  const char* op = "grouped_linear_wgrad";
  TPRT__TRY(tprt__check_2d(op, "dy", dy, 2));
  TPRT__TRY(tprt__check_2d(op, "x", x, 2));
  TPRT__TRY(tprt__check_2d(op, "dw", dw, 3));
  int64_t t = dy->dims[0], n = dy->dims[1], k = x->dims[1], e = dw->dims[0];
  int64_t g = group_sizes && group_sizes->rank == 1 ? group_sizes->dims[0] : 0;
  if (x->dims[0] != t || x->dtype != dy->dtype || dw->dims[1] != n || dw->dims[2] != k || e <= 0 || g % e != 0 ||
      g == 0 || group_sizes->dtype != TPRT_DTYPE_I64 || t % (g / e) != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: dy[T,N], x[T,K], group_sizes[S*E] i64 (T divisible by S) and dw[E,N,K] disagree", op);
  if (n == 0 || k == 0) return NULL;
  int64_t segs = g / e, cap = t / segs;
  enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                            "--graph: %s reads the group sizes back to the host to list each expert's rows, which a "
                            "CUDA graph cannot capture; run without --graph",
                            op);
  int64_t* sizes = malloc((size_t)g * sizeof(int64_t));
  int64_t* rows = malloc((size_t)(t > 0 ? t : 1) * sizeof(int64_t));
  tprt_status_t s = sizes && rows ? NULL : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory", op);
  cudaError_t err = cudaSuccess;
  if (!s) err = cudaMemcpyAsync(sizes, group_sizes->data, (size_t)g * sizeof(int64_t), cudaMemcpyDeviceToHost, stream);
  if (!s && err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (!s && err != cudaSuccess)
    s = tprt__cuda_make_status(err, "grouped_linear_wgrad: group sizes", __FILE__, __LINE__);
  // Each expert's rows in increasing global row order across the segments (the CPU's order).
  size_t expert_bytes = (size_t)(n * k) * (size_t)tprt_dtype_bytes(dw->dtype, 1);
  for (int64_t i = 0; !s && i < e; ++i) {
    int64_t count = 0;
    for (int64_t sg = 0; sg < segs; ++sg) {
      int64_t row = sg * cap;
      for (int64_t j = 0; j < i; ++j) row += sizes[sg * e + j];
      for (int64_t r = 0; r < sizes[sg * e + i] && count < t; ++r) rows[count++] = row + r;
    }
    void* out = (char*)dw->data + (size_t)i * expert_bytes;
    if (count == 0) {
      err = cudaMemsetAsync(out, 0, expert_bytes, stream);
      if (err != cudaSuccess) s = tprt__cuda_make_status(err, "cudaMemsetAsync", __FILE__, __LINE__);
      continue;
    }
    int64_t od[2] = {n, k};
    tprt_tensor_t ov = tprt_tensor_make(out, dw->dtype, 2, od);
    if (rows[0] >= 0 && rows[count - 1] < t && rows[count - 1] - rows[0] == count - 1) {
      // One contiguous range of rows (always so with one segment): dy and x read where they are.
      size_t elem = tprt_dtype_bytes(dy->dtype, 1);
      int64_t dyd[2] = {count, n}, xd[2] = {count, k};
      tprt_tensor_t dys = tprt_tensor_make((char*)dy->data + (size_t)(rows[0] * n) * elem, dy->dtype, 2, dyd);
      tprt_tensor_t xs = tprt_tensor_make((char*)x->data + (size_t)(rows[0] * k) * elem, x->dtype, 2, xd);
      s = tprt__wgrad_rows(&dys, &xs, NULL, count, &ov, chunks, stream);
      continue;
    }
    int64_t* d_rows = NULL;
    s = tprt__upload_index(rows, count, &d_rows, stream);
    if (!s) s = tprt__wgrad_rows(dy, x, d_rows, count, &ov, chunks, stream);
    if (d_rows) tprt__cuda_free_async(d_rows, stream);
  }
  free(sizes);
  free(rows);
  return s;
}
