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

// sigmoid(z) and sigmoid(-z) from one exp, each a single division (a NaN z gives NaN for both).
static inline void tprt__sigmoid_pair(float z, float* out_p, float* out_q) {
  float e = tprt_expf(-tprt_f32_from_bits(tprt_f32_bits(z) & 0x7FFFFFFFu));
  float d = 1.0f + e;
  float big = 1.0f / d, small = e / d;
  *out_p = z >= 0.0f ? big : small;
  *out_q = z >= 0.0f ? small : big;
}

// The gradients of one output with respect to its gate and up inputs (f32, before rounding).
static inline void tprt__glu_grad_value(int kind, float g, float u, float dy, float alpha, float limit, float* out_dg,
                                        float* out_du) {
  float p, q;
  switch (kind) {
    case TPRT_GLU_SWIGLU:
      tprt__sigmoid_pair(g, &p, &q);
      *out_du = dy * tprt_siluf(g);
      *out_dg = (dy * u) * (p * fmaf(g, q, 1.0f));
      return;
    case TPRT_GLU_GEGLU: {
      float g2 = g * g;
      float z = 1.59576912f /* 2·sqrt(2/π) */ * fmaf(0.044715f * g2, g, g);
      float dz = 1.59576912f * fmaf(0.134144992f /* 3 · 0.044715f, rounded: 0x3E095D4E */, g2, 1.0f);
      tprt__sigmoid_pair(z, &p, &q);
      *out_du = dy * tprt_gelu_tanhf(g);
      *out_dg = (dy * u) * (p * fmaf(g * q, dz, 1.0f));
      return;
    }
    default: {
      // Comparisons, as in the forward, so that a NaN input propagates.
      bool g_clamped = g > limit, u_clamped = u > limit || u < -limit;
      float gc = g_clamped ? limit : g;
      float uc = u > limit ? limit : u < -limit ? -limit : u;
      tprt__sigmoid_pair(alpha * gc, &p, &q);
      *out_du = u_clamped ? 0.0f : dy * tprt_quick_geluf(gc, alpha);
      *out_dg = g_clamped ? 0.0f : (dy * (uc + 1.0f)) * (p * fmaf(alpha * gc, q, 1.0f));
      return;
    }
  }
}

tprt_status_t tprt_cpu_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                int64_t interleave, float alpha, float limit) {
  const char* op = "glu_grad";
  char a[96], b[96];
  tprt_status_t s = tprt__check_glu(op, x, "dy", dy, kind, interleave, alpha, limit);
  if (!s) s = tprt__check(op, "dx", dx, x->rank, TPRT__FLOATS);
  if (s) return s;
  if (!tprt_tensor_same_layout(x, dx))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dx must have x's shape and dtype %s; got %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(dx, b, sizeof b));
  int64_t two_f = x->dims[x->rank - 1], f = two_f / 2;
  int64_t rows = two_f == 0 ? 0 : tprt_tensor_numel(x) / two_f;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t xo = row * two_f, yo = row * f;
    for (int64_t j = 0; j < f; ++j) {
      int64_t gcol, ucol;
      tprt_glu_columns(j, f, interleave, &gcol, &ucol);
      float g = tprt__ld(x->data, x->dtype, xo + gcol), u = tprt__ld(x->data, x->dtype, xo + ucol);
      float dg, du;
      tprt__glu_grad_value(kind, g, u, tprt__ld(dy->data, dy->dtype, yo + j), alpha, limit, &dg, &du);
      tprt__st(dx->data, dx->dtype, xo + gcol, dg);
      tprt__st(dx->data, dx->dtype, xo + ucol, du);
    }
  }
  return NULL;
}
