// tprt_cpu_fused_grouped_mlp: grouped_linear(x, w1) -> glu -> grouped_linear(., w2), with the
// intermediates rounded to x's dtype, so it is bitwise the unfused sequence by construction (the
// CUDA fused kernel must match it; docs/numerics.md, "Fused grouped MLP").
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

tprt_status_t tprt__check_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                            const tprt_tensor_t* group_sizes, const tprt_tensor_t* y) {
  const char* op = "fused_grouped_mlp";
  char a[96], b[96], c[96];
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w1", w1, 3, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w2", w2, 3, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "group_sizes", group_sizes, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (s) return s;
  int64_t h = x->dims[1], e = w1->dims[0], two_f = w1->dims[1], f = two_f / 2;
  bool ok = w1->dtype == x->dtype && w2->dtype == x->dtype && w1->dims[2] == h && two_f % 2 == 0 && w2->dims[0] == e &&
            w2->dims[1] == h && w2->dims[2] == f;
  if (!ok)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: x, w1, w2 must be [T,H], [E,2F,H], [E,H,F] of one dtype; got x %s, w1 %s, w2 %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(w1, b, sizeof b),
                            tprt__shape_str(w2, c, sizeof c));
  if (!tprt_tensor_same_layout(x, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: y must have x's shape and dtype %s; got %s", op,
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(y, b, sizeof b));
  return NULL;
}

tprt_status_t tprt_cpu_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                         const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                         int64_t interleave, float alpha, float limit, int chunks) {
  const char* op = "fused_grouped_mlp";
  tprt_status_t s = tprt__check_fused_grouped_mlp(x, w1, w2, group_sizes, y);
  if (s) return s;
  int64_t t = x->dims[0], two_f = w1->dims[1], f = two_f / 2;
  size_t elem = tprt_dtype_bytes(x->dtype, 1);
  void* mem = NULL;
  s = tprt__scratch(op, (size_t)t * (size_t)(two_f + f) * elem, &mem);
  if (s) return s;
  int64_t hdims[2] = {t, two_f}, gdims[2] = {t, f};
  tprt_tensor_t hidden = tprt_tensor_make(mem, x->dtype, 2, hdims);
  tprt_tensor_t gated = tprt_tensor_make((char*)mem + (size_t)t * (size_t)two_f * elem, x->dtype, 2, gdims);
  s = tprt_cpu_grouped_linear(x, w1, group_sizes, &hidden, chunks);
  if (s) s = tprt_status_annotate(s, "%s fc1", op);
  if (!s) {
    s = tprt_cpu_glu(&hidden, &gated, kind, interleave, alpha, limit);
    if (s) s = tprt_status_annotate(s, "%s activation", op);
  }
  if (!s) {
    s = tprt_cpu_grouped_linear(&gated, w2, group_sizes, y, chunks);
    if (s) s = tprt_status_annotate(s, "%s fc2", op);
  }
  tprt__scratch_free(mem);
  return s;
}
