// tprt_cpu_rmsnorm_grad and tprt_cpu_layernorm_grad (docs/numerics.md, "Backward"). Per row of
// x[M,H], in f32, recomputing the forward's r (and mean) with the same operations:
//   rmsnorm    r = 1/sqrtf(sumsq(x)/H + eps);  xhat = x·r;  g = dy·gamma;
//              c = dot(g, xhat)/H;              dx = fmaf(-xhat, c, g)·r
//   layernorm  mean = sum(x)/H;  d = x - mean;  r = 1/sqrtf(sumsq(d)/H + eps);  xhat = d·r;
//              g = dy·gamma;  a = sum(g)/H;  c = dot(g, xhat)/H;  dx = fmaf(-xhat, c, g - a)·r
// with sum / sumsq the canonical row reduction and dot the same 256 lanes with
// lane = fmaf(g, xhat, lane). dx is rounded once to x's dtype. The parameter gradients reduce
// over the rows with the canonical K accumulation (chunks of ceil(M/chunks) rows, +0.0 for a
// short chunk, the pairwise tree), from the unrounded f32 xhat:
//   dgamma[h] = Σ_m dy[m,h]·xhat[m,h]  (acc = fmaf(dy, xhat, acc))
//   dbeta[h]  = Σ_m dy[m,h]            (acc = acc + dy)
#include <math.h>
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// The canonical row reduction of a dot product: lane j (from +0.0) takes fmaf(a[i], b[i], lane)
// for i = j, j+256, ... in order, then tprt_row_tree.
static float tprt__row_dot(const float* a, const float* b, int64_t n) {
  float lanes[TPRT_ROW_LANES];
  for (int j = 0; j < TPRT_ROW_LANES; ++j) lanes[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) lanes[i % TPRT_ROW_LANES] = fmaf(a[i], b[i], lanes[i % TPRT_ROW_LANES]);
  return tprt_row_tree(lanes);
}

static tprt_status_t tprt__check_chunks(const char* op, int chunks) {
  if (chunks >= 1 && chunks <= TPRT_MAX_CHUNKS && (chunks & (chunks - 1)) == 0) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks=%d must be a power of two in [1, %d]", op, chunks,
                          TPRT_MAX_CHUNKS);
}

// A parameter gradient: [H] of gamma's dtype or f32.
static tprt_status_t tprt__check_param_grad(const char* op, const char* name, const tprt_tensor_t* t,
                                            const tprt_tensor_t* gamma) {
  tprt_status_t s = tprt__check(op, name, t, 1, TPRT__FLOATS);
  if (s) return s;
  if (t->dims[0] == gamma->dims[0] && (t->dtype == gamma->dtype || t->dtype == TPRT_DTYPE_F32)) return NULL;
  char a[96];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                          "%s: %s must be [H] = [%lld] of gamma's dtype %s (or f32); got %s", op, name,
                          (long long)gamma->dims[0], tprt_dtype_name(gamma->dtype), tprt__shape_str(t, a, sizeof a));
}

tprt_status_t tprt__check_norm_grad(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                           const tprt_tensor_t* dy, const tprt_tensor_t* dx,
                                           const tprt_tensor_t* dgamma, const tprt_tensor_t* dbeta, bool layernorm,
                                           float eps, int chunks) {
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "gamma", gamma, 1, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "dx", dx, 2, TPRT__FLOATS);
  if (!s) s = tprt__check_chunks(op, chunks);
  if (s) return s;
  int64_t h = x->dims[1];
  if (gamma->dims[0] != h)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: gamma must be [H] = [%lld] (x is %s); got %s", op,
                            (long long)h, tprt__shape_str(x, a, sizeof a), tprt__shape_str(gamma, b, sizeof b));
  if (!tprt_tensor_same_layout(x, dy))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dy must have x's shape and dtype %s; got %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(dy, b, sizeof b));
  if (!tprt_tensor_same_layout(x, dx))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dx must have x's shape and dtype %s; got %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(dx, b, sizeof b));
  s = tprt__check_param_grad(op, "dgamma", dgamma, gamma);
  if (!s && layernorm) s = tprt__check_param_grad(op, "dbeta", dbeta, gamma);
  if (s) return s;
  if (!isfinite(eps) || !(eps > 0.0f))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: eps=%g must be finite and > 0", op, (double)eps);
  return NULL;
}

// Combines the chunk partials p[chunks][h] column by column: +0.0 for each chunk shorter than
// |size| rows, then the pairwise tree; stores p[0] into |out|.
static void tprt__finish_columns(float* p, int64_t m, int64_t h, int chunks, int64_t size, tprt_tensor_t* out) {
  for (int c = 0; c < chunks; ++c) {
    int64_t m0 = (int64_t)c * size, m1 = m0 + size;
    if (m0 > m) m0 = m;
    if (m1 > m) m1 = m;
    if (m1 - m0 < size)
      for (int64_t j = 0; j < h; ++j) p[(size_t)c * h + j] = p[(size_t)c * h + j] + 0.0f;
  }
  for (int s = 1; s < chunks; s *= 2)
    for (int i = 0; i + s < chunks; i += 2 * s)
      for (int64_t j = 0; j < h; ++j) p[(size_t)i * h + j] = p[(size_t)i * h + j] + p[(size_t)(i + s) * h + j];
  tprt__st_row(out->data, out->dtype, 0, h, p);
}

// Both norms; |dbeta| NULL means RMSNorm.
static tprt_status_t tprt__norm_grad(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                     const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                     tprt_tensor_t* dbeta, float eps, int chunks) {
  bool ln = dbeta != NULL;
  int64_t m = x->dims[0], h = x->dims[1];
  if (h == 0) return NULL;
  // Row buffers xf (x, then xhat), dyf, g (dy·gamma), gam; chunk partials of dgamma and dbeta.
  size_t floats = (size_t)h * 4 + (size_t)chunks * h * (ln ? 2 : 1);
  float* buf = NULL;
  tprt_status_t s = tprt__scratch(op, floats * sizeof(float), (void**)&buf);
  if (s) return s;
  float *xf = buf, *dyf = xf + h, *g = dyf + h, *gam = g + h, *pg = gam + h, *pb = pg + (size_t)chunks * h;
  for (size_t i = 0; i < (size_t)chunks * h * (ln ? 2 : 1); ++i) pg[i] = 0.0f;
  tprt__ld_row(gamma->data, gamma->dtype, 0, h, gam);
  const float hf = (float)h;
  int64_t size = tprt_kacc_chunk_size(m, chunks);
  for (int64_t row = 0; row < m; ++row) {
    tprt__ld_row(x->data, x->dtype, row * h, h, xf);
    tprt__ld_row(dy->data, dy->dtype, row * h, h, dyf);
    float r;
    if (ln) {
      float mean = tprt_row_sum(xf, h) / hf;
      for (int64_t j = 0; j < h; ++j) xf[j] = xf[j] - mean;
    }
    r = tprt_rsqrtf(tprt_row_sumsq(xf, h) / hf + eps);
    for (int64_t j = 0; j < h; ++j) {
      xf[j] = xf[j] * r;  // xhat
      g[j] = dyf[j] * gam[j];
    }
    float a = ln ? tprt_row_sum(g, h) / hf : 0.0f;
    float c = tprt__row_dot(g, xf, h) / hf;
    for (int64_t j = 0; j < h; ++j) {
      float t = ln ? g[j] - a : g[j];
      tprt__st(dx->data, dx->dtype, row * h + j, fmaf(-xf[j], c, t) * r);
    }
    // Row |row| belongs to chunk row / size (size >= 1 whenever there is a row).
    float* accg = pg + (size_t)(row / size) * h;
    for (int64_t j = 0; j < h; ++j) accg[j] = fmaf(dyf[j], xf[j], accg[j]);
    if (ln) {
      float* accb = pb + (size_t)(row / size) * h;
      for (int64_t j = 0; j < h; ++j) accb[j] = accb[j] + dyf[j];
    }
  }
  tprt__finish_columns(pg, m, h, chunks, size, dgamma);
  if (ln) tprt__finish_columns(pb, m, h, chunks, size, dbeta);
  tprt__scratch_free(buf);
  return NULL;
}

tprt_status_t tprt_cpu_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                    tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks) {
  const char* op = "rmsnorm_grad";
  tprt_status_t s = tprt__check_norm_grad(op, x, gamma, dy, dx, dgamma, NULL, false, eps, chunks);
  if (s) return s;
  return tprt__norm_grad(op, x, gamma, dy, dx, dgamma, NULL, eps, chunks);
}

tprt_status_t tprt_cpu_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                      tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps,
                                      int chunks) {
  const char* op = "layernorm_grad";
  tprt_status_t s = tprt__check_norm_grad(op, x, gamma, dy, dx, dgamma, dbeta, true, eps, chunks);
  if (s) return s;
  return tprt__norm_grad(op, x, gamma, dy, dx, dgamma, dbeta, eps, chunks);
}
