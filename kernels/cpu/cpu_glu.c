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

tprt_status_t tprt_cpu_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                           float limit) {
  tprt_status_t s = tprt__check_glu("glu", x, "y", y, kind, interleave, alpha, limit);
  if (s) return s;
  int64_t two_f = x->dims[x->rank - 1], f = two_f / 2;
  int64_t rows = two_f == 0 ? 0 : tprt_tensor_numel(x) / two_f;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t xo = row * two_f, yo = row * f;
    for (int64_t j = 0; j < f; ++j) {
      int64_t gcol, ucol;
      tprt_glu_columns(j, f, interleave, &gcol, &ucol);
      float g = tprt__ld(x->data, x->dtype, xo + gcol), u = tprt__ld(x->data, x->dtype, xo + ucol);
      tprt__st(y->data, y->dtype, yo + j, tprt_glu_value(kind, g, u, alpha, limit));
    }
  }
  return NULL;
}
