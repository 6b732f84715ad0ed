// tprt_cpu_linear and tprt_cpu_grouped_linear: the canonical K accumulation of
// docs/numerics.md ("Canonical K accumulation"), i.e. for every output element
//   chunk c:  acc = +0; acc = fmaf(x[m,k], w[n,k], acc) for k in chunk c, increasing;
//             acc = acc + 0 when the chunk is short (zero padding)
//   tree:     p[i] = p[i] + p[i+s] for s = 1, 2, 4, ...; then (+ bias), round once.
// The loops are arranged for speed (a block of 64 output columns at a time, w widened to f32 and
// transposed so the 64 independent fmaf chains vectorize), never for a different order: every
// output element sees exactly the sequence above, whatever M, N or the blocking. The grouped
// kernel runs the same loop over each expert's rows, segment by segment, and zeroes padding rows.
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// The accumulation of one x row against one block of TPRT__NB w rows, for every chunk: |wt| is
// the block transposed ([K][NB], zero columns past the block's end), |part| gets [chunks][NB].
// Compiled twice on x86-64 (with and without FMA instructions, chosen at load time); fmaf is
// exact either way, so both clones give the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("fma", "default")))
#endif
void
tprt__kacc_block(const float* xf, const float* wt, int64_t k, int64_t size, int chunks, float* part) {
  for (int c = 0; c < chunks; ++c) {
    int64_t k0 = (int64_t)c * size, k1 = k0 + size;
    if (k0 > k) k0 = k;
    if (k1 > k) k1 = k;
    float acc[TPRT__NB];
    for (int j = 0; j < TPRT__NB; ++j) acc[j] = 0.0f;
    for (int64_t kk = k0; kk < k1; ++kk) {
      const float xv = xf[kk];
      const float* row = wt + kk * TPRT__NB;
      for (int j = 0; j < TPRT__NB; ++j) acc[j] = fmaf(xv, row[j], acc[j]);
    }
    if (k1 - k0 < size)
      for (int j = 0; j < TPRT__NB; ++j) acc[j] = acc[j] + 0.0f;  // the padded terms fmaf(0, 0, acc)
    memcpy(part + (size_t)c * TPRT__NB, acc, sizeof acc);
  }
  // The fixed pairwise tree over chunks, for the NB columns at once.
  for (int s = 1; s < chunks; s *= 2)
    for (int i = 0; i + s < chunks; i += 2 * s)
      for (int j = 0; j < TPRT__NB; ++j) part[i * TPRT__NB + j] = part[i * TPRT__NB + j] + part[(i + s) * TPRT__NB + j];
}

// Scratch shared by every block of one call.
typedef struct {
  float* wt;    // [K][NB]
  float* xf;    // [K]
  float* part;  // [chunks][NB]
  float* bias;  // [NB]
} tprt__gemm_scratch_t;

static tprt_status_t tprt__gemm_scratch_create(const char* op, int64_t k, int chunks, void** out_mem,
                                               tprt__gemm_scratch_t* out) {
  size_t floats = (size_t)k * TPRT__NB + (size_t)k + (size_t)chunks * TPRT__NB + TPRT__NB;
  tprt_status_t s = tprt__scratch(op, floats * sizeof(float), out_mem);
  if (s) return s;
  float* f = (float*)*out_mem;
  out->wt = f;
  out->xf = out->wt + (size_t)k * TPRT__NB;
  out->part = out->xf + k;
  out->bias = out->part + (size_t)chunks * TPRT__NB;
  return NULL;
}

// y[row0 + m, :] for m < rows from x rows row0.. and the n x k matrix at element |w_off| of w.
static void tprt__gemm(const tprt_tensor_t* x, int64_t row0, int64_t rows, const tprt_tensor_t* w, int64_t w_off,
                       int64_t n, int64_t k, const tprt_tensor_t* bias, tprt_tensor_t* y, int chunks,
                       tprt__gemm_scratch_t* sc) {
  int64_t size = tprt_kacc_chunk_size(k, chunks);
  for (int64_t n0 = 0; n0 < n; n0 += TPRT__NB) {
    int64_t nb = n - n0 < TPRT__NB ? n - n0 : TPRT__NB;
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < TPRT__NB; ++j)
        sc->wt[kk * TPRT__NB + j] = j < nb ? tprt__ld(w->data, w->dtype, w_off + (n0 + j) * k + kk) : 0.0f;
    if (bias) tprt__ld_row(bias->data, bias->dtype, n0, nb, sc->bias);
    for (int64_t m = row0; m < row0 + rows; ++m) {
      tprt__ld_row(x->data, x->dtype, m * k, k, sc->xf);
      tprt__kacc_block(sc->xf, sc->wt, k, size, chunks, sc->part);
      for (int64_t j = 0; j < nb; ++j) {
        float v = sc->part[j];
        if (bias) v = v + sc->bias[j];
        tprt__st(y->data, y->dtype, m * n + n0 + j, v);
      }
    }
  }
}

static tprt_status_t tprt__check_chunks(const char* op, int chunks) {
  if (chunks >= 1 && chunks <= TPRT_MAX_CHUNKS && (chunks & (chunks - 1)) == 0) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks=%d must be a power of two in [1, %d]", op, chunks,
                          TPRT_MAX_CHUNKS);
}

// y must be [rows, n] of x's dtype, or f32.
static tprt_status_t tprt__check_y(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* y, int64_t rows,
                                   int64_t n, const char* dims_name) {
  char a[96];
  bool ok =
      y->rank == 2 && y->dims[0] == rows && y->dims[1] == n && (y->dtype == x->dtype || y->dtype == TPRT_DTYPE_F32);
  if (ok) return NULL;
  return tprt_make_status(
      TPRT_STATUS_INVALID_ARGUMENT, "%s: y must be %s = [%lld,%lld] of x's dtype %s (or f32 for a partial); got %s", op,
      dims_name, (long long)rows, (long long)n, tprt_dtype_name(x->dtype), tprt__shape_str(y, a, sizeof a));
}

static tprt_status_t tprt__check_same_dtype(const char* op, const char* name, const tprt_tensor_t* t,
                                            const tprt_tensor_t* x) {
  if (t->dtype == x->dtype) return NULL;
  char a[96];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must have x's dtype %s; got %s", op, name,
                          tprt_dtype_name(x->dtype), tprt__shape_str(t, a, sizeof a));
}

tprt_status_t tprt__check_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                 const tprt_tensor_t* y, int chunks) {
  const char* op = "linear";
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 2, TPRT__FLOATS);
  if (!s && bias) s = tprt__check(op, "bias", bias, 1, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (!s) s = tprt__check_same_dtype(op, "w", w, x);
  if (s) return s;
  int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  if (w->dims[1] != k)
    return tprt_make_status(
        TPRT_STATUS_INVALID_ARGUMENT, "%s: x[M,K] and w[N,K] disagree on K: x %s has K=%lld, w %s has K=%lld", op,
        tprt__shape_str(x, a, sizeof a), (long long)k, tprt__shape_str(w, b, sizeof b), (long long)w->dims[1]);
  if (bias) {
    s = tprt__check_same_dtype(op, "bias", bias, x);
    if (!s && bias->dims[0] != n)
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: bias must be [N] = [%lld]; got %s", op, (long long)n,
                           tprt__shape_str(bias, a, sizeof a));
    if (s) return s;
  }
  s = tprt__check_y(op, x, y, m, n, "[M,N]");
  if (s) return s;
  if (bias && y->dtype == TPRT_DTYPE_F32 && x->dtype != TPRT_DTYPE_F32)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: an f32 partial y takes no bias (x is %s): the bias is added once, after the reduction",
                            op, tprt_dtype_name(x->dtype));
  return NULL;
}

tprt_status_t tprt_cpu_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                              tprt_tensor_t* y, int chunks) {
  const char* op = "linear";
  tprt_status_t s = tprt__check_linear(x, w, bias, y, chunks);
  if (s) return s;
  int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  if (m == 0 || n == 0) return NULL;
  void* mem = NULL;
  tprt__gemm_scratch_t sc;
  s = tprt__gemm_scratch_create(op, k, chunks, &mem, &sc);
  if (s) return s;
  tprt__gemm(x, 0, m, w, 0, n, k, bias, y, chunks, &sc);
  tprt__scratch_free(mem);
  return NULL;
}


tprt_status_t tprt__check_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                         const tprt_tensor_t* group_sizes, const tprt_tensor_t* y, int chunks,
                                         int64_t* out_segments) {
  const char* op = "grouped_linear";
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 3, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "group_sizes", group_sizes, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (!s) s = tprt__check_same_dtype(op, "w", w, x);
  if (s) return s;
  int64_t t = x->dims[0], k = x->dims[1], n = w->dims[1], segs = 1;
  if (w->dims[2] != k)
    return tprt_make_status(
        TPRT_STATUS_INVALID_ARGUMENT, "%s: x[T,K] and w[E,N,K] disagree on K: x %s has K=%lld, w %s has K=%lld", op,
        tprt__shape_str(x, a, sizeof a), (long long)k, tprt__shape_str(w, b, sizeof b), (long long)w->dims[2]);
  s = tprt__check_segment_shapes(op, t, w, "w", "x", group_sizes, &segs);
  if (!s) s = tprt__check_y(op, x, y, t, n, "[T,N]");
  if (!s) *out_segments = segs;
  return s;
}

tprt_status_t tprt_cpu_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes,
                                      tprt_tensor_t* y, int chunks) {
  const char* op = "grouped_linear";
  int64_t segs = 1;
  tprt_status_t s = tprt__check_grouped_linear(x, w, group_sizes, y, chunks, &segs);
  if (!s) s = tprt__check_segment_counts(op, x->dims[0], w, "x", group_sizes, segs, &segs);
  if (s) return s;
  int64_t t = x->dims[0], k = x->dims[1], e = w->dims[0], n = w->dims[1];
  if (t == 0 || n == 0) return NULL;
  void* mem = NULL;
  tprt__gemm_scratch_t sc;
  s = tprt__gemm_scratch_create(op, k, chunks, &mem, &sc);
  if (s) return s;
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t cap = t / segs;
  for (int64_t sg = 0; sg < segs; ++sg) {
    int64_t row = sg * cap;
    for (int64_t i = 0; i < e; ++i) {
      int64_t rows = sizes[sg * e + i];
      if (rows > 0) tprt__gemm(x, row, rows, w, i * n * k, n, k, NULL, y, chunks, &sc);
      row += rows;
    }
    // Padding rows get +0.0, whose encoding is all-zero bits in bf16, f16 and f32 alike.
    int64_t pad = (sg + 1) * cap - row;
    if (pad > 0) memset((char*)y->data + tprt_dtype_bytes(y->dtype, row * n), 0, tprt_dtype_bytes(y->dtype, pad * n));
  }
  tprt__scratch_free(mem);
  return NULL;
}
