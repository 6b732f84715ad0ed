// tprt_cpu_glu_grad: the gradient of tprt_cpu_glu (docs/numerics.md, "Backward"). With the
// forward y = a(g)·v(u), where a is the activation and v the up factor (u, or u' + 1 for
// quick_geglu), the gradients are
//   du = dy · a(g)                       (a computed exactly as the forward computes it)
//   dg = (dy · v) · a'(g)
// and a' is built from one exp: with p = sigmoid(z) and q = sigmoid(-z) = 1 - p for the
// sigmoid's argument z (e = exp(-|z|); z >= 0: p = 1/(1+e), q = e/(1+e); z < 0: p = e/(1+e),
// q = 1/(1+e)), so that neither is computed as a difference 1 - p:
//   swiglu       z = g                      a'(g) = p · fmaf(g, q, 1)
//   geglu        z = 1.59576912·fmaf(0.044715·g², g, g) (the forward's v),
//                z' = 1.59576912·fmaf(0.134144992, g², 1)   (0.134144992 = RNE(3·0.044715f))
//                                           a'(g) = p · fmaf(g·q, z', 1)
//   quick_geglu  z = alpha·g'               a'(g') = p · fmaf(alpha·g', q, 1)
// quick_geglu's clamps pass no gradient: dg = +0 where g > limit, du = +0 where u > limit or
// u < -limit (TE's masks: the boundary value itself passes). Every result is rounded once.
#include <math.h>
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

tprt_status_t tprt__check_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, const tprt_tensor_t* dx, int kind,
                                   int64_t interleave, float alpha, float limit) {
  const char* op = "glu_grad";
  char a[96], b[96];
  tprt_status_t s = tprt__check_glu(op, x, "dy", dy, kind, interleave, alpha, limit);
  if (!s) s = tprt__check(op, "dx", dx, x->rank, TPRT__FLOATS);
  if (s) return s;
  if (!tprt_tensor_same_layout(x, dx))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dx must have x's shape and dtype %s; got %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(dx, b, sizeof b));
  return NULL;
}

tprt_status_t tprt_cpu_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                int64_t interleave, float alpha, float limit) {
  tprt_status_t s = tprt__check_glu_grad(x, dy, dx, kind, interleave, alpha, limit);
  if (s) return s;
  int64_t two_f = x->dims[x->rank - 1], f = two_f / 2;
  int64_t rows = two_f == 0 ? 0 : tprt_tensor_numel(x) / two_f;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t xo = row * two_f, yo = row * f;
    for (int64_t j = 0; j < f; ++j) {
      int64_t gcol, ucol;
      tprt_glu_columns(j, f, interleave, &gcol, &ucol);
      float g = tprt__ld(x->data, x->dtype, xo + gcol), u = tprt__ld(x->data, x->dtype, xo + ucol);
      float dg, du;
      tprt_glu_grad_value(kind, g, u, tprt__ld(dy->data, dy->dtype, yo + j), alpha, limit, &dg, &du);
      tprt__st(dx->data, dx->dtype, xo + gcol, dg);
      tprt__st(dx->data, dx->dtype, xo + ucol, du);
    }
  }
  return NULL;
}
