// tprt_cpu_rmsnorm and tprt_cpu_layernorm with the canonical row reduction of docs/numerics.md
// (256 lanes, lane j accumulates elements j, j+256, ...; then the fixed in-warp and cross-warp
// trees: tprt_row_sum / tprt_row_sumsq of tprt_numerics.h). Per row, in f32:
//   rmsnorm    ms = sumsq(x) / H;              r = 1 / sqrtf(ms + eps);  y = (x · r) · gamma
//   layernorm  mean = sum(x) / H;  d = x - mean;  var = sumsq(d) / H;
//              r = 1 / sqrtf(var + eps);  y = ((d · r) · gamma) + beta
// then one rounding to x's dtype. H is converted to f32 by RNE (exact below 2^24).
#include <math.h>
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// Shared checks (also kernels/cuda/norm/norm.cu): x[M,H] float, gamma[H] float, beta[H] of gamma's
// dtype, y like x, eps > 0.
tprt_status_t tprt__check_norm(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                               const tprt_tensor_t* beta, const tprt_tensor_t* y, float eps) {
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "gamma", gamma, 1, TPRT__FLOATS);
  if (!s && beta) s = tprt__check(op, "beta", beta, 1, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (s) return s;
  int64_t h = x->dims[1];
  if (gamma->dims[0] != h)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: gamma must be [H] = [%lld] (x is %s); got %s", op,
                            (long long)h, tprt__shape_str(x, a, sizeof a), tprt__shape_str(gamma, b, sizeof b));
  if (beta && (beta->dims[0] != h || beta->dtype != gamma->dtype))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: beta must be [H] = [%lld] of gamma's dtype %s; got %s",
                            op, (long long)h, tprt_dtype_name(gamma->dtype), tprt__shape_str(beta, b, sizeof b));
  if (!tprt_tensor_same_layout(x, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: y must have x's shape and dtype %s; got %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(y, b, sizeof b));
  if (!isfinite(eps) || !(eps > 0.0f))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: eps=%g must be finite and > 0", op, (double)eps);
  return NULL;
}

// One pass over the rows; |beta| NULL means RMSNorm.
static tprt_status_t tprt__norm(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                const tprt_tensor_t* beta, tprt_tensor_t* y, float eps) {
  tprt_status_t s = tprt__check_norm(op, x, gamma, beta, y, eps);
  if (s) return s;
  int64_t m = x->dims[0], h = x->dims[1];
  if (m == 0 || h == 0) return NULL;
  float* buf = NULL;
  s = tprt__scratch(op, (size_t)h * 3 * sizeof(float), (void**)&buf);
  if (s) return s;
  float *xf = buf, *g = buf + h, *bt = buf + 2 * h;
  tprt__ld_row(gamma->data, gamma->dtype, 0, h, g);
  if (beta) tprt__ld_row(beta->data, beta->dtype, 0, h, bt);
  const float hf = (float)h;
  for (int64_t row = 0; row < m; ++row) {
    tprt__ld_row(x->data, x->dtype, row * h, h, xf);
    if (!beta) {
      float r = tprt_rsqrtf(tprt_row_sumsq(xf, h) / hf + eps);
      for (int64_t j = 0; j < h; ++j) tprt__st(y->data, y->dtype, row * h + j, (xf[j] * r) * g[j]);
    } else {
      float mean = tprt_row_sum(xf, h) / hf;
      for (int64_t j = 0; j < h; ++j) xf[j] = xf[j] - mean;
      float r = tprt_rsqrtf(tprt_row_sumsq(xf, h) / hf + eps);
      for (int64_t j = 0; j < h; ++j) tprt__st(y->data, y->dtype, row * h + j, ((xf[j] * r) * g[j]) + bt[j]);
    }
  }
  tprt__scratch_free(buf);
  return NULL;
}

tprt_status_t tprt_cpu_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps) {
  return tprt__norm("rmsnorm", x, gamma, NULL, y, eps);
}

// Shared check of tp.add_rmsnorm (also kernels/cuda/norm/norm.cu): residual, y and sum one [M,H]
// layout, then the norm's rules on sum, gamma and normed.
tprt_status_t tprt__check_add_norm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                   const tprt_tensor_t* normed, const tprt_tensor_t* sum, float eps) {
  if (!residual || !y || residual->rank != 2 || !tprt_tensor_same_layout(residual, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "add_rmsnorm: residual and y must be one [M,H] shape");
  if (!sum || !tprt_tensor_same_layout(residual, sum))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "add_rmsnorm: sum must have residual's shape and dtype");
  return tprt__check_norm("add_rmsnorm", sum, gamma, NULL, normed, eps);
}

tprt_status_t tprt_cpu_add_rmsnorm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                   tprt_tensor_t* normed, tprt_tensor_t* sum, float eps) {
  // The pair as written: the add's rounding, then the norm of the rounded sum.
  tprt_status_t s = tprt__check_add_norm(residual, y, gamma, normed, sum, eps);
  if (!s) s = tprt_cpu_add(residual, y, sum);
  return s ? s : tprt_cpu_rmsnorm(sum, gamma, normed, eps);
}

tprt_status_t tprt_cpu_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                 tprt_tensor_t* y, float eps) {
  if (!beta) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "layernorm: beta is NULL");
  return tprt__norm("layernorm", x, gamma, beta, y, eps);
}
