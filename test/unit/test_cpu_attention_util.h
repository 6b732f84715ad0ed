// Helpers shared by the attention unit tests (test_cpu_attention.c, test_cpu_grad_attention.c):
// the float64 attention reference (plain loops), the tensors of one attention call filled with
// deterministic data, and small allocation helpers.
//
// Tolerances (tc_check_near: |got - ref| <= rtol·(|ref| + scale)): rtol is a few roundings of the
// result's dtype (bf16 1e-2, f16 1e-3, f32 2e-6: rtol_of), scale the magnitude of the terms that
// were summed (rope: |x|·|cos| + |x|·|sin|; attention: the weighted |v|; gradients: the weighted
// magnitudes of their products), so cancellation in f32 is allowed for and nothing more.
#ifndef TEST_CPU_ATTENTION_UTIL_H_
#define TEST_CPU_ATTENTION_UTIL_H_

#include "test_cpu_util.h"
#include "tprt_attention_rows.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// tc_rtol, but 2e-6 for f32: rope and attention round f32 values only a few times per result
// (measured up to 2.1e-7 of the magnitude; 1.9e-3 for bf16, 2.4e-4 for f16, a quarter of tc_rtol).
static inline double rtol_of(int dtype) { return dtype == TPRT_DTYPE_F32 ? 2e-6 : tc_rtol(dtype); }

static inline double* tensor_to_f64(const tprt_tensor_t* t) {
  int64_t n = tprt_tensor_numel(t);
  double* v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  for (int64_t i = 0; i < n; ++i) v[i] = tc_get(t, i);
  return v;
}

static inline double* zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

// Frees |n| heap arrays.
static inline void free_n(int n, ...) {
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; ++i) free(va_arg(ap, void*));
  va_end(ap);
}

// Frees |n| test tensors.
static inline void tc_free_n(int n, ...) {
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; ++i) tc_free(va_arg(ap, tc_tensor_t*));
  va_end(ap);
}

// ---- Reference ----------------------------------------------------------------------------------

typedef struct {
  int64_t seqs, seq_len, hq, hkv, d;
  int causal;
  double scale;  // already resolved: never 0
} att_shape_t;

// Softmax probabilities of query i of sequence b, head h over its n visible keys (p[0..n)).
static inline int64_t ref_probs(const att_shape_t* a, const double* q, const double* k, int64_t b, int64_t h, int64_t i,
                                double* p) {
  int64_t wq = a->hq * a->d, wk = a->hkv * a->d, g = h / (a->hq / a->hkv);
  int64_t n = a->causal ? i + 1 : a->seq_len, row = b * a->seq_len;
  double mx = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    double sc = 0.0;
    for (int64_t d = 0; d < a->d; ++d) sc += q[(row + i) * wq + h * a->d + d] * k[(row + j) * wk + g * a->d + d];
    p[j] = sc * a->scale;
    if (p[j] > mx) mx = p[j];
  }
  for (int64_t j = 0; j < n; ++j) sum += p[j] = exp(p[j] - mx);
  for (int64_t j = 0; j < n; ++j) p[j] /= sum;
  return n;
}

// y = softmax(q·k^T·scale)·v per sequence and head; mag = Σ p·|v| for the tolerance.
static inline void ref_attention(const att_shape_t* a, const double* q, const double* k, const double* v, double* y,
                                 double* mag) {
  int64_t wq = a->hq * a->d, wk = a->hkv * a->d;
  double p[64];
  for (int64_t b = 0; b < a->seqs; ++b)
    for (int64_t h = 0; h < a->hq; ++h)
      for (int64_t i = 0; i < a->seq_len; ++i) {
        int64_t n = ref_probs(a, q, k, b, h, i, p), g = h / (a->hq / a->hkv), row = b * a->seq_len;
        for (int64_t d = 0; d < a->d; ++d) {
          double acc = 0.0, m = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            acc += p[j] * v[(row + j) * wk + g * a->d + d];
            m += p[j] * fabs(v[(row + j) * wk + g * a->d + d]);
          }
          y[(row + i) * wq + h * a->d + d] = acc;
          mag[(row + i) * wq + h * a->d + d] = m;
        }
      }
}

// ---- Test data ----------------------------------------------------------------------------------

// The tensors of one attention call: q, k, v, dy filled, y/dq/dk/dv outputs.
typedef struct {
  tc_tensor_t q, k, v, y, dy, dq, dk, dv;
} att_tensors_t;

static inline att_tensors_t att_make(int dt, const att_shape_t* a, uint64_t seed) {
  int64_t t = a->seqs * a->seq_len;
  att_tensors_t x;
  x.q = tc_make(dt, 2, t, a->hq * a->d);
  x.y = tc_make(dt, 2, t, a->hq * a->d);
  x.dy = tc_make(dt, 2, t, a->hq * a->d);
  x.dq = tc_make(dt, 2, t, a->hq * a->d);
  x.k = tc_make(dt, 2, t, a->hkv * a->d);
  x.v = tc_make(dt, 2, t, a->hkv * a->d);
  x.dk = tc_make(dt, 2, t, a->hkv * a->d);
  x.dv = tc_make(dt, 2, t, a->hkv * a->d);
  // Scores of a few units (|q|, |k| <= 1.5 over D <= 32 with scale 1/sqrt(D)): a peaked softmax.
  tc_fill(&x.q.t, seed, -1.5, 1.5);
  tc_fill(&x.k.t, seed + 1, -1.5, 1.5);
  tc_fill(&x.v.t, seed + 2, -2.0, 2.0);
  tc_fill(&x.dy.t, seed + 3, -1.0, 1.0);
  return x;
}

static inline void att_free(att_tensors_t* x) {
  tc_tensor_t* all[8] = {&x->q, &x->k, &x->v, &x->y, &x->dy, &x->dq, &x->dk, &x->dv};
  for (int i = 0; i < 8; ++i) tc_free(all[i]);
}

static inline tprt_status_t att_forward(att_tensors_t* x, const att_shape_t* a, float scale) {
  return tprt_cpu_attention(&x->q.t, &x->k.t, &x->v.t, NULL, &x->y.t, NULL, a->seq_len, a->d, a->causal, scale);
}

static inline tprt_status_t att_backward(att_tensors_t* x, const att_shape_t* a, float scale) {
  return tprt_cpu_attention_grad(&x->q.t, &x->k.t, &x->v.t, &x->y.t, &x->dy.t, NULL, &x->dq.t, &x->dk.t, &x->dv.t, a->seq_len,
                                 a->d, a->causal, scale);
}

// Shapes: sequences, seq_len, Hq, Hkv, D. Grouped-query (4/2, 6/2, 4/1), multi-head, one token.
static const int64_t kAttShapes[][5] = {
    {2, 5, 4, 2, 8}, {1, 7, 6, 2, 16}, {3, 4, 4, 1, 4}, {2, 6, 2, 2, 32}, {2, 1, 2, 1, 8}};

#endif  // TEST_CPU_ATTENTION_UTIL_H_
