// The optimizer kernels (docs/numerics.md, "Optimizer"): the exact sum of squares behind the global
// gradient norm, the norm itself, and AdamW's elementwise step. Nothing here depends on how the
// elements are split between calls or ranks: the sum of squares is exact (integer limbs), the
// update touches each element alone.
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

static tprt_status_t tprt__check_acc(const char* op, const char* name, const tprt_tensor_t* acc, int64_t words) {
  tprt_status_t s = tprt__check(op, name, acc, 1, TPRT__M(TPRT_DTYPE_I64));
  if (s) return s;
  if (acc->dims[0] != words)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be [%lld] i64 (%s); got [%lld]", op, name,
                            (long long)words, words == TPRT_SUMSQ_WORDS ? "one accumulator" : "R accumulators",
                            (long long)acc->dims[0]);
  return NULL;
}

tprt_status_t tprt__check_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, const tprt_tensor_t* acc_out) {
  const char* op = "sumsq";
  tprt_status_t s = tprt__check(op, "g", g, -1, TPRT__FLOATS);
  if (!s && acc) s = tprt__check_acc(op, "acc", acc, TPRT_SUMSQ_WORDS);
  if (!s) s = tprt__check_acc(op, "acc_out", acc_out, TPRT_SUMSQ_WORDS);
  return s;
}

tprt_status_t tprt_cpu_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out, bool count) {
  tprt_status_t s = tprt__check_sumsq(g, acc, acc_out);
  if (s) return s;
  int64_t* out = (int64_t*)acc_out->data;
  if (acc && acc->data != acc_out->data) memcpy(out, acc->data, TPRT_SUMSQ_WORDS * sizeof(int64_t));
  if (!acc) memset(out, 0, TPRT_SUMSQ_WORDS * sizeof(int64_t));
  if (count) {
    int64_t n = tprt_tensor_numel(g);
    for (int64_t i = 0; i < n; ++i) {
      tprt_sumsq_add(out, tprt__ld(g->data, g->dtype, i));
      if ((i + 1) % TPRT_SUMSQ_BATCH == 0) tprt_sumsq_normalize(out);
    }
  }
  tprt_sumsq_normalize(out);
  return NULL;
}

tprt_status_t tprt__check_global_norm(const tprt_tensor_t* acc, const tprt_tensor_t* norm) {
  const char* op = "global_norm";
  tprt_status_t s = tprt__check(op, "acc", acc, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check(op, "norm", norm, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  if (acc->dims[0] < TPRT_SUMSQ_WORDS || acc->dims[0] % TPRT_SUMSQ_WORDS != 0 || norm->dims[0] != 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: acc must be R accumulators of %d i64 words and norm [1] f32; got acc [%lld], norm [%lld]",
                            op, TPRT_SUMSQ_WORDS, (long long)acc->dims[0], (long long)norm->dims[0]);
  return NULL;
}

tprt_status_t tprt_cpu_global_norm(const tprt_tensor_t* acc, tprt_tensor_t* norm) {
  tprt_status_t s = tprt__check_global_norm(acc, norm);
  if (s) return s;
  int64_t total[TPRT_SUMSQ_WORDS] = {0};
  const int64_t* a = (const int64_t*)acc->data;
  for (int64_t r = 0; r < acc->dims[0] / TPRT_SUMSQ_WORDS; ++r) {
    for (int k = 0; k < TPRT_SUMSQ_WORDS; ++k) total[k] += a[r * TPRT_SUMSQ_WORDS + k];
    if ((r + 1) % TPRT_SUMSQ_BATCH == 0) tprt_sumsq_normalize(total);
  }
  tprt_sumsq_normalize(total);
  ((float*)norm->data)[0] = tprt_sumsq_norm(total);
  return NULL;
}

tprt_status_t tprt__check_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                                const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                                const tprt_tensor_t* master_out, const tprt_tensor_t* m_out, const tprt_tensor_t* v_out,
                                const tprt_tensor_t* weight) {
  const char* op = "adamw";
  const tprt_tensor_t* f32s[7] = {master, grad, m, v, master_out, m_out, v_out};
  static const char* const names[7] = {"master", "grad", "m", "v", "master_out", "m_out", "v_out"};
  tprt_status_t s = NULL;
  for (int i = 0; !s && i < 7; ++i) {
    s = tprt__check(op, names[i], f32s[i], -1, TPRT__M(TPRT_DTYPE_F32));
    if (!s && i) s = tprt__check_dims(op, names[i], f32s[i], master->rank, master->dims, "master's shape");
  }
  if (!s) s = tprt__check(op, "weight", weight, -1, TPRT__FLOATS);
  if (!s) s = tprt__check_dims(op, "weight", weight, master->rank, master->dims, "master's shape");
  if (!s) s = tprt__check(op, "hyper", hyper, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "norm", norm, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s && (hyper->dims[0] != 8 || norm->dims[0] != 1))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: hyper must be [8] and norm [1] (f32); got [%lld] and [%lld]",
                         op, (long long)hyper->dims[0], (long long)norm->dims[0]);
  return s;
}

tprt_status_t tprt_cpu_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                             const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                             tprt_tensor_t* master_out, tprt_tensor_t* m_out, tprt_tensor_t* v_out,
                             tprt_tensor_t* weight) {
  tprt_status_t s = tprt__check_adamw(master, grad, m, v, hyper, norm, master_out, m_out, v_out, weight);
  if (s) return s;
  const float* h = (const float*)hyper->data;
  const float nv = ((const float*)norm->data)[0];
  const float clip = tprt_adamw_clip(h[7], nv);
  const bool apply = tprt_adamw_applies(nv);
  int64_t n = tprt_tensor_numel(master);
  const float *p0 = (const float*)master->data, *g = (const float*)grad->data;
  const float *m0 = (const float*)m->data, *v0 = (const float*)v->data;
  float *p1 = (float*)master_out->data, *m1 = (float*)m_out->data, *v1 = (float*)v_out->data;
  for (int64_t i = 0; i < n; ++i) {
    float p = p0[i], mm = m0[i], vv = v0[i];
    if (apply) tprt_adamw_elem(&p, &mm, &vv, g[i], h, clip);
    p1[i] = p;
    m1[i] = mm;
    v1[i] = vv;
    tprt__st(weight->data, weight->dtype, i, p);
  }
  return NULL;
}
