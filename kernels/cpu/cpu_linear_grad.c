// The backward of tprt_cpu_linear and tprt_cpu_grouped_linear (docs/numerics.md, "Backward"):
//   dgrad  dx[m,k] = Σ_n dy[m,n]·w[n,k]   canonical over N
//   wgrad  dw[n,k] = Σ_m dy[m,n]·x[m,k]   canonical over M (for grouped: one expert's rows)
//   bias   db[n]   = Σ_m dy[m,n]          canonical over M with acc = acc + v
// Every output element is the canonical K accumulation of the forward applied to the contracted
// dimension R: chunk size S = ceil(R/chunks); chunk c from +0.0 in increasing r with
// acc = fmaf(a, b, acc); a short chunk then gets acc + 0.0f; the fixed pairwise tree; one
// rounding. The loops are blocked like the forward (64 output columns at a time, the second
// operand widened to f32 and laid out [R][64]) for speed only: each element sees exactly that
// sequence, whatever M, N, K or the blocking.
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// Output columns per block: 64 independent accumulators, a multiple of every SIMD width.

// An operand read as f32 through strides: element (i, r), where i indexes the output and r the
// contracted dimension, is at off + i·s_out + row(r)·s_red, row(r) = rows ? rows[r] : r.
typedef struct {
  const void* data;
  int dtype;
  int64_t off, s_out, s_red;
} tprt__opnd_t;

// Scratch of one call: bt [R][NB], af [R], part [chunks][NB].
typedef struct {
  float *bt, *af, *part;
} tprt__grad_scratch_t;

static tprt_status_t tprt__grad_scratch_create(const char* op, int64_t r, int chunks, void** out_mem,
                                               tprt__grad_scratch_t* out) {
  size_t floats = (size_t)r * TPRT__NB + (size_t)r + (size_t)chunks * TPRT__NB;
  tprt_status_t s = tprt__scratch(op, floats * sizeof(float), out_mem);
  if (s) return s;
  out->bt = (float*)*out_mem;
  out->af = out->bt + (size_t)r * TPRT__NB;
  out->part = out->af + r;
  return NULL;
}

// out[out_off + i·nj + j] = Σ_r a(i, r)·b(r, j) for i < ni, j < nj over r < nr, canonically.
static void tprt__grad_gemm(const tprt__opnd_t* a, const tprt__opnd_t* b, const int64_t* rows, int64_t ni, int64_t nj,
                            int64_t nr, tprt_tensor_t* out, int64_t out_off, int chunks, tprt__grad_scratch_t* sc) {
  int64_t size = tprt_kacc_chunk_size(nr, chunks);
  for (int64_t j0 = 0; j0 < nj; j0 += TPRT__NB) {
    int64_t nb = nj - j0 < TPRT__NB ? nj - j0 : TPRT__NB;
    for (int64_t r = 0; r < nr; ++r) {
      int64_t base = b->off + (rows ? rows[r] : r) * b->s_red + j0 * b->s_out;
      float* dst = sc->bt + r * TPRT__NB;
      if (b->s_out == 1) {
        tprt__ld_row(b->data, b->dtype, base, nb, dst);
      } else {
        for (int64_t j = 0; j < nb; ++j) dst[j] = tprt__ld(b->data, b->dtype, base + j * b->s_out);
      }
      for (int64_t j = nb; j < TPRT__NB; ++j) dst[j] = 0.0f;
    }
    for (int64_t i = 0; i < ni; ++i) {
      int64_t base = a->off + i * a->s_out;
      if (!rows && a->s_red == 1) {
        tprt__ld_row(a->data, a->dtype, base, nr, sc->af);
      } else {
        for (int64_t r = 0; r < nr; ++r)
          sc->af[r] = tprt__ld(a->data, a->dtype, base + (rows ? rows[r] : r) * a->s_red);
      }
      tprt__kacc_block(sc->af, sc->bt, nr, size, chunks, sc->part);
      for (int64_t j = 0; j < nb; ++j) tprt__st(out->data, out->dtype, out_off + i * nj + j0 + j, sc->part[j]);
    }
  }
}

static tprt_status_t tprt__check_chunks(const char* op, int chunks) {
  if (chunks >= 1 && chunks <= TPRT_MAX_CHUNKS && (chunks & (chunks - 1)) == 0) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks=%d must be a power of two in [1, %d]", op, chunks,
                          TPRT_MAX_CHUNKS);
}

// The segmented order of docs/numerics.md ("Segmented contractions"): the contracted dimension
// N is |blocks| blocks of |segments| equal segments, and chunk c visits, for each segment j of
// block c / (chunks/blocks), its c % (chunks/blocks)-th run of S = N/(chunks·segments) elements.
// segments == 1 is the plain order (rows left NULL). Needs N % (chunks·segments) == 0 and
// chunks % blocks == 0 otherwise.
tprt_status_t tprt__segmented_order(const char* op, int64_t n, int chunks, int segments, int blocks,
                                    int64_t** out_rows) {
  *out_rows = NULL;
  if (segments < 1 || blocks < 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: segments=%d and blocks=%d must be >= 1", op, segments,
                            blocks);
  if (segments == 1) return NULL;
  if (chunks % blocks != 0 || n % ((int64_t)chunks * segments) != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: a segmented contraction needs N %% (chunks*segments) == 0 and chunks %% blocks == 0; "
                            "got N=%lld, chunks=%d, segments=%d, blocks=%d",
                            op, (long long)n, chunks, segments, blocks);
  int64_t* rows = NULL;
  tprt_status_t s = tprt__scratch(op, (size_t)(n > 0 ? n : 1) * sizeof(int64_t), (void**)&rows);
  if (s) return s;
  int64_t run = n / ((int64_t)chunks * segments), per_block = chunks / blocks, r = 0;
  for (int c = 0; c < chunks; ++c) {
    int64_t base = (int64_t)(c / per_block) * (n / blocks), local = (int64_t)(c % per_block) * run;
    for (int j = 0; j < segments; ++j)
      for (int64_t i = 0; i < run; ++i) rows[r++] = base + (int64_t)j * (n / blocks / segments) + local + i;
  }
  *out_rows = rows;
  return NULL;
}

// |t| must have |name0|'s dtype.
static tprt_status_t tprt__check_dtype_of(const char* op, const char* name, const tprt_tensor_t* t, const char* name0,
                                          const tprt_tensor_t* t0) {
  if (t->dtype == t0->dtype) return NULL;
  char a[96];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must have %s's dtype %s; got %s", op, name, name0,
                          tprt_dtype_name(t0->dtype), tprt__shape_str(t, a, sizeof a));
}

// An output of |rank| dims |dims| with dy's dtype or f32. |what| spells the dims ("[M,K]").
static tprt_status_t tprt__check_out(const char* op, const char* name, const tprt_tensor_t* out, int rank,
                                     const int64_t* dims, const char* what, const tprt_tensor_t* dy) {
  bool ok = out->rank == rank && (out->dtype == dy->dtype || out->dtype == TPRT_DTYPE_F32);
  for (int i = 0; ok && i < rank; ++i) ok = out->dims[i] == dims[i];
  if (ok) return NULL;
  char a[96], d[96];
  size_t used = 0;
  d[0] = '\0';
  for (int i = 0; i < rank && used < sizeof d; ++i) {
    int n = snprintf(d + used, sizeof d - used, i ? ",%lld" : "%lld", (long long)dims[i]);
    used += n > 0 ? (size_t)n : 0;
  }
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be %s = [%s] of dy's dtype %s (or f32); got %s",
                          op, name, what, d, tprt_dtype_name(dy->dtype), tprt__shape_str(out, a, sizeof a));
}

// Two inputs disagree on a shared dimension.
static tprt_status_t tprt__mismatch(const char* op, const char* rule, const char* dim, const tprt_tensor_t* a,
                                    const char* an, int64_t av, const tprt_tensor_t* b, const char* bn, int64_t bv) {
  char sa[96], sb[96];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s disagree on %s: %s %s has %s=%lld, %s %s has %s=%lld",
                          op, rule, dim, an, tprt__shape_str(a, sa, sizeof sa), dim, (long long)av, bn,
                          tprt__shape_str(b, sb, sizeof sb), dim, (long long)bv);
}

tprt_status_t tprt_cpu_linear_dgrad(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx, int chunks) {
  return tprt_cpu_linear_dgrad_segmented(dy, w, dx, chunks, 1, 1);
}

tprt_status_t tprt_cpu_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                              int chunks, int segments, int blocks) {
  const char* op = "linear_dgrad";
  tprt_status_t s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "dx", dx, 2, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (!s) s = tprt__check_dtype_of(op, "w", w, "dy", dy);
  if (s) return s;
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1];
  if (w->dims[0] != n) return tprt__mismatch(op, "dy[M,N] and w[N,K]", "N", dy, "dy", n, w, "w", w->dims[0]);
  int64_t dims[2] = {m, k};
  s = tprt__check_out(op, "dx", dx, 2, dims, "[M,K]", dy);
  int64_t* order = NULL;
  if (!s) s = tprt__segmented_order(op, n, chunks, segments, blocks, &order);
  if (s || m == 0 || k == 0) {
    tprt__scratch_free(order);
    return s;
  }
  void* mem = NULL;
  tprt__grad_scratch_t sc;
  s = tprt__grad_scratch_create(op, n, chunks, &mem, &sc);
  if (!s) {
    tprt__opnd_t a = {dy->data, dy->dtype, 0, n, 1}, b = {w->data, w->dtype, 0, 1, k};
    tprt__grad_gemm(&a, &b, order, m, k, n, dx, 0, chunks, &sc);
    tprt__scratch_free(mem);
  }
  tprt__scratch_free(order);
  return s;
}

tprt_status_t tprt_cpu_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks) {
  const char* op = "linear_wgrad";
  tprt_status_t s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "dw", dw, 2, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (!s) s = tprt__check_dtype_of(op, "x", x, "dy", dy);
  if (s) return s;
  int64_t m = dy->dims[0], n = dy->dims[1], k = x->dims[1];
  if (x->dims[0] != m) return tprt__mismatch(op, "dy[M,N] and x[M,K]", "M", dy, "dy", m, x, "x", x->dims[0]);
  int64_t dims[2] = {n, k};
  s = tprt__check_out(op, "dw", dw, 2, dims, "[N,K]", dy);
  if (s || n == 0 || k == 0) return s;
  void* mem = NULL;
  tprt__grad_scratch_t sc;
  s = tprt__grad_scratch_create(op, m, chunks, &mem, &sc);
  if (s) return s;
  tprt__opnd_t a = {dy->data, dy->dtype, 0, 1, n}, b = {x->data, x->dtype, 0, 1, k};
  tprt__grad_gemm(&a, &b, NULL, n, k, m, dw, 0, chunks, &sc);
  tprt__scratch_free(mem);
  return NULL;
}

tprt_status_t tprt_cpu_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks) {
  const char* op = "bias_grad";
  tprt_status_t s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "db", db, 1, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (s) return s;
  int64_t m = dy->dims[0], n = dy->dims[1];
  s = tprt__check_out(op, "db", db, 1, &n, "[N]", dy);
  if (s || n == 0) return s;
  float* part = NULL;  // [chunks][N], then the row being added
  s = tprt__scratch(op, ((size_t)chunks + 1) * (size_t)n * sizeof(float), (void**)&part);
  if (s) return s;
  float* row = part + (size_t)chunks * n;
  int64_t size = tprt_kacc_chunk_size(m, chunks);
  for (int c = 0; c < chunks; ++c) {
    float* acc = part + (size_t)c * n;
    int64_t m0 = (int64_t)c * size, m1 = m0 + size;
    if (m0 > m) m0 = m;
    if (m1 > m) m1 = m;
    for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
    for (int64_t i = m0; i < m1; ++i) {
      tprt__ld_row(dy->data, dy->dtype, i * n, n, row);
      for (int64_t j = 0; j < n; ++j) acc[j] = acc[j] + row[j];
    }
    if (m1 - m0 < size)
      for (int64_t j = 0; j < n; ++j) acc[j] = acc[j] + 0.0f;
  }
  for (int st = 1; st < chunks; st *= 2)
    for (int i = 0; i + st < chunks; i += 2 * st)
      for (int64_t j = 0; j < n; ++j)
        part[(size_t)i * n + j] = part[(size_t)i * n + j] + part[(size_t)(i + st) * n + j];
  tprt__st_row(db->data, db->dtype, 0, n, part);
  tprt__scratch_free(part);
  return NULL;
}


tprt_status_t tprt_cpu_grouped_linear_dgrad(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                            const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks) {
  return tprt_cpu_grouped_linear_dgrad_segmented(dy, w, group_sizes, dx, chunks, 1, 1);
}

tprt_status_t tprt_cpu_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                      const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                      int segments, int blocks) {
  const char* op = "grouped_linear_dgrad";
  tprt_status_t s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 3, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "group_sizes", group_sizes, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check(op, "dx", dx, 2, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (!s) s = tprt__check_dtype_of(op, "w", w, "dy", dy);
  if (s) return s;
  int64_t t = dy->dims[0], n = dy->dims[1], e = w->dims[0], k = w->dims[2], segs = 1;
  if (w->dims[1] != n) return tprt__mismatch(op, "dy[T,N] and w[E,N,K]", "N", dy, "dy", n, w, "w", w->dims[1]);
  s = tprt__check_segments(op, t, w, "w", NULL, group_sizes, &segs);
  int64_t dims[2] = {t, k};
  if (!s) s = tprt__check_out(op, "dx", dx, 2, dims, "[T,K]", dy);
  int64_t* order = NULL;
  if (!s) s = tprt__segmented_order(op, n, chunks, segments, blocks, &order);
  if (s || t == 0 || k == 0) {
    tprt__scratch_free(order);
    return s;
  }
  void* mem = NULL;
  tprt__grad_scratch_t sc;
  s = tprt__grad_scratch_create(op, n, chunks, &mem, &sc);
  if (s) {
    tprt__scratch_free(order);
    return s;
  }
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t cap = t / segs;
  for (int64_t sg = 0; sg < segs; ++sg) {
    int64_t row = sg * cap;
    for (int64_t i = 0; i < e; ++i) {
      int64_t rows = sizes[sg * e + i];
      tprt__opnd_t a = {dy->data, dy->dtype, row * n, n, 1}, b = {w->data, w->dtype, i * n * k, 1, k};
      if (rows > 0) tprt__grad_gemm(&a, &b, order, rows, k, n, dx, row * k, chunks, &sc);
      row += rows;
    }
    // Padding rows get +0.0: all-zero bits in bf16, f16 and f32 alike.
    int64_t pad = (sg + 1) * cap - row;
    if (pad > 0)
      memset((char*)dx->data + tprt_dtype_bytes(dx->dtype, row * k), 0, tprt_dtype_bytes(dx->dtype, pad * k));
  }
  tprt__scratch_free(mem);
  tprt__scratch_free(order);
  return NULL;
}

tprt_status_t tprt_cpu_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                            const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks) {
  const char* op = "grouped_linear_wgrad";
  tprt_status_t s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "group_sizes", group_sizes, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check(op, "dw", dw, 3, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (!s) s = tprt__check_dtype_of(op, "x", x, "dy", dy);
  if (s) return s;
  int64_t t = dy->dims[0], n = dy->dims[1], k = x->dims[1], e = dw->dims[0], segs = 1;
  if (x->dims[0] != t) return tprt__mismatch(op, "dy[T,N] and x[T,K]", "T", dy, "dy", t, x, "x", x->dims[0]);
  int64_t dims[3] = {e, n, k};
  s = tprt__check_out(op, "dw", dw, 3, dims, "[E,N,K]", dy);
  if (!s) s = tprt__check_segments(op, t, dw, "dw", NULL, group_sizes, &segs);
  if (s || e == 0 || n == 0 || k == 0) return s;
  // The rows of one expert, gathered across segments in increasing global row order.
  int64_t* rows = NULL;
  s = tprt__scratch(op, (size_t)(t > 0 ? t : 1) * sizeof(int64_t), (void**)&rows);
  if (s) return s;
  void* mem = NULL;
  tprt__grad_scratch_t sc;
  s = tprt__grad_scratch_create(op, t, chunks, &mem, &sc);
  if (s) {
    tprt__scratch_free(rows);
    return s;
  }
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t cap = t / segs;
  for (int64_t i = 0; i < e; ++i) {
    int64_t count = 0;
    for (int64_t sg = 0; sg < segs; ++sg) {
      int64_t row = sg * cap;
      for (int64_t j = 0; j < i; ++j) row += sizes[sg * e + j];
      for (int64_t r = 0; r < sizes[sg * e + i]; ++r) rows[count++] = row + r;
    }
    tprt__opnd_t a = {dy->data, dy->dtype, 0, 1, n}, b = {x->data, x->dtype, 0, 1, k};
    tprt__grad_gemm(&a, &b, rows, n, k, count, dw, i * n * k, chunks, &sc);
  }
  tprt__scratch_free(mem);
  tprt__scratch_free(rows);
  return NULL;
}
