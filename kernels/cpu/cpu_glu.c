// tprt_cpu_glu: gated linear units over the last dimension (docs/numerics.md, "GLU").
//   swiglu       y = silu(g) · u
//   geglu        y = gelu_tanh(g) · u
//   quick_geglu  g' = min(g, limit), u' = clamp(u, -limit, limit),
//                y = (g' · sigmoid(alpha · g')) · (u' + 1)        (TE ClampedQGeGLU)
// each in f32 with the functions of tprt_numerics.h, in exactly this order, rounded once.
#include <math.h>
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

/// One GLU output from its gate and up inputs (f32), before rounding.
static inline float tprt__glu_value(int kind, float g, float u, float alpha, float limit) {
  switch (kind) {
    case TPRT_GLU_SWIGLU:
      return tprt_siluf(g) * u;
    case TPRT_GLU_GEGLU:
      return tprt_gelu_tanhf(g) * u;
    default: {
      // Comparisons, not fminf/fmaxf, so that a NaN input stays NaN.
      float gc = g > limit ? limit : g;
      float uc = u > limit ? limit : u < -limit ? -limit : u;
      return tprt_quick_geluf(gc, alpha) * (uc + 1.0f);
    }
  }
}

tprt_status_t tprt_cpu_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                           float limit) {
  const char* op = "glu";
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "x", x, -1, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "y", y, x->rank, TPRT__FLOATS);
  if (s) return s;
  int r = x->rank;
  int64_t two_f = x->dims[r - 1], f = two_f / 2;
  if (two_f % 2 != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: the last dimension of x must be even (2F); got x %s", op,
                            tprt__shape_str(x, a, sizeof a));
  bool y_ok = y->dtype == x->dtype && y->dims[r - 1] == f;
  for (int i = 0; i < r - 1; ++i) y_ok = y_ok && y->dims[i] == x->dims[i];
  if (!y_ok)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: y must be x's shape with the last dimension halved (F=%lld) and x's dtype; x is %s, "
                            "y is %s",
                            op, (long long)f, tprt__shape_str(x, a, sizeof a), tprt__shape_str(y, b, sizeof b));
  if (kind < 0 || kind > 2)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: kind=%d is not 0 (swiglu), 1 (geglu) or 2 (quick_geglu)",
                            op, kind);
  if (interleave < 0 || (interleave > 0 && f % interleave != 0))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: interleave=%lld must be 0 or a positive divisor of F=%lld", op, (long long)interleave,
                            (long long)f);
  if (kind == TPRT_GLU_QUICK_GEGLU && (!isfinite(alpha) || !(alpha > 0.0f) || !isfinite(limit) || !(limit > 0.0f)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: quick_geglu needs finite alpha > 0 and limit > 0; got alpha=%g, limit=%g", op,
                            (double)alpha, (double)limit);
  int64_t rows = two_f == 0 ? 0 : tprt_tensor_numel(x) / two_f;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t xo = row * two_f, yo = row * f;
    for (int64_t j = 0; j < f; ++j) {
      int64_t gcol = j, ucol = f + j;
      if (interleave > 0) {
        int64_t block = j / interleave, off = j % interleave;
        gcol = 2 * block * interleave + off;
        ucol = gcol + interleave;
      }
      float g = tprt__ld(x->data, x->dtype, xo + gcol), u = tprt__ld(x->data, x->dtype, xo + ucol);
      tprt__st(y->data, y->dtype, yo + j, tprt__glu_value(kind, g, u, alpha, limit));
    }
  }
  return NULL;
}
