// Unit tests of tprt_cpu_rope and tprt_cpu_attention: float64 references (rope as Hugging Face's
// x·cos + rotate_half(x)·sin and its transpose from the rotation matrix; attention as plain loops
// in test_cpu_attention_util.h), the documented f32 order bit for bit, prefill/decode consistency
// of causal attention, independence of sequences, the grouped-query head mapping (forward and
// backward), empty tensors, and argument errors. The gradient's own tests are in
// test_cpu_grad_attention.c; the tolerances are explained in test_cpu_attention_util.h.
#include "test_cpu_attention_util.h"

// ---- References ---------------------------------------------------------------------------------

// The rotation of one token's head of D values as a D x D matrix: y = R·x with
// y = x·cos + rotate_half(x)·sin and rotate_half(x) = [-x[D/2:], x[:D/2]].
static void ref_rope_matrix(const double* c, const double* s, int64_t d, double* r) {
  int64_t h = d / 2;
  for (int64_t i = 0; i < d * d; ++i) r[i] = 0.0;
  for (int64_t j = 0; j < d; ++j) {
    r[j * d + j] += c[j];
    if (j < h)
      r[j * d + j + h] -= s[j];  // rotate_half(x)[j] = -x[j + D/2]
    else
      r[j * d + j - h] += s[j];  // rotate_half(x)[j] = x[j - D/2]
  }
}

// y = R·x per head (|inverse|: R^T·x); mag gets Σ|R||x| for the tolerance.
static void ref_rope(const double* x, const double* cs, const double* sn, int64_t t, int64_t w, int64_t d, int inverse,
                     double* y, double* mag) {
  double r[64 * 64];
  for (int64_t row = 0; row < t; ++row) {
    ref_rope_matrix(cs + row * d, sn + row * d, d, r);
    for (int64_t c0 = 0; c0 < w; c0 += d)
      for (int64_t j = 0; j < d; ++j) {
        double acc = 0.0, m = 0.0;
        for (int64_t k = 0; k < d; ++k) {
          double rjk = inverse ? r[k * d + j] : r[j * d + k];
          acc += rjk * x[row * w + c0 + k];
          m += fabs(rjk * x[row * w + c0 + k]);
        }
        y[row * w + c0 + j] = acc;
        mag[row * w + c0 + j] = m;
      }
  }
}

// ---- Rope ---------------------------------------------------------------------------------------

TPRT_TEST(rope_matches_f64_reference) {
  const int64_t shapes[][3] = {{5, 3, 8}, {4, 1, 2}, {3, 2, 32}, {7, 4, 16}};  // T, heads, D
  for (int d = 0; d < 3; ++d)
    for (int tdt = 0; tdt < 3; ++tdt)
      for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
        for (int inverse = 0; inverse < 2; ++inverse) {
          int64_t t = shapes[sh][0], w = shapes[sh][1] * shapes[sh][2], hd = shapes[sh][2];
          tc_tensor_t x = tc_make(kDtypes[d], 2, t, w), y = tc_make(kDtypes[d], 2, t, w);
          tc_tensor_t c = tc_make(kDtypes[tdt], 2, t, hd), s = tc_make(kDtypes[tdt], 2, t, hd);
          tc_fill(&x.t, 11 + sh, -3.0, 3.0);
          // Tables need not be a rotation: any values check the formula.
          tc_fill(&c.t, 12 + sh, -1.0, 1.0);
          tc_fill(&s.t, 13 + sh, -1.0, 1.0);
          TPRT_EXPECT_OK(tprt_cpu_rope(&x.t, &c.t, &s.t, &y.t, inverse));
          double *xv = tensor_to_f64(&x.t), *cv = tensor_to_f64(&c.t), *sv = tensor_to_f64(&s.t);
          double *ref = zeros(t * w), *mag = zeros(t * w);
          ref_rope(xv, cv, sv, t, w, hd, inverse, ref, mag);
          char what[128];
          snprintf(what, sizeof what, "rope%s x %s tables %s [%lld,%lld] D=%lld", inverse ? " inverse" : "",
                   tprt_dtype_name(kDtypes[d]), tprt_dtype_name(kDtypes[tdt]), (long long)t, (long long)w,
                   (long long)hd);
          tc_check_near(what, &y.t, ref, mag, rtol_of(kDtypes[d]));
          free_n(5, xv, cv, sv, ref, mag);
          tc_free_n(4, &x, &y, &c, &s);
        }
}

// Each output is two f32 products, each rounded, then their sum or difference (no fused multiply-add):
// forward y[i] = a·c1 - b·s1, y[i+D/2] = b·c2 + a·s2; inverse y[i] = a·c1 + b·s2, y[i+D/2] = b·c2 - a·s1.
TPRT_TEST(rope_follows_documented_order_bitwise) {
  int64_t t = 6, hd = 16, w = 3 * 16, half = 8;
  for (int d = 0; d < 3; ++d)
    for (int inverse = 0; inverse < 2; ++inverse) {
      int dt = kDtypes[d];
      tc_tensor_t x = tc_make(dt, 2, t, w), y = tc_make(dt, 2, t, w), want = tc_make(dt, 2, t, w);
      tc_tensor_t c = tc_make(TPRT_DTYPE_F32, 2, t, hd), s = tc_make(TPRT_DTYPE_F32, 2, t, hd);
      tc_fill(&x.t, 21, -3.0, 3.0);
      tc_fill(&c.t, 22, -1.0, 1.0);
      tc_fill(&s.t, 23, -1.0, 1.0);
      TPRT_EXPECT_OK(tprt_cpu_rope(&x.t, &c.t, &s.t, &y.t, inverse));
      for (int64_t r = 0; r < t; ++r)
        for (int64_t c0 = 0; c0 < w; c0 += hd)
          for (int64_t i = 0; i < half; ++i) {
            float a = (float)tc_get(&x.t, r * w + c0 + i), b = (float)tc_get(&x.t, r * w + c0 + i + half);
            float c1 = (float)tc_get(&c.t, r * hd + i), c2 = (float)tc_get(&c.t, r * hd + i + half);
            float s1 = (float)tc_get(&s.t, r * hd + i), s2 = (float)tc_get(&s.t, r * hd + i + half);
            volatile float p1 = a * c1, p2 = b * (inverse ? s2 : s1), p3 = b * c2, p4 = a * (inverse ? s1 : s2);
            tc_set(&want.t, r * w + c0 + i, inverse ? p1 + p2 : p1 - p2);
            tc_set(&want.t, r * w + c0 + i + half, inverse ? p3 - p4 : p3 + p4);
          }
      for (int64_t i = 0; i < t * w; ++i) TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, i), tc_bits(&want.t, i));
      tc_free_n(5, &x, &y, &want, &c, &s);
    }
}

// With real tables (cos² + sin² = 1 per pair, cos[i] = cos[i + D/2]) the inverse undoes the
// rotation, and a rotation keeps each pair's norm.
TPRT_TEST(rope_inverse_undoes_rotation) {
  int64_t t = 9, hd = 32, w = 2 * 32;
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, t, w), y = tc_make(TPRT_DTYPE_F32, 2, t, w),
              back = tc_make(TPRT_DTYPE_F32, 2, t, w);
  tc_tensor_t c = tc_make(TPRT_DTYPE_F32, 2, t, hd), s = tc_make(TPRT_DTYPE_F32, 2, t, hd);
  tc_fill(&x.t, 31, -2.0, 2.0);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < hd; ++i) {
      double angle = (double)r * pow(10000.0, -2.0 * (double)(i % (hd / 2)) / (double)hd);
      tc_set(&c.t, r * hd + i, (float)cos(angle));
      tc_set(&s.t, r * hd + i, (float)sin(angle));
    }
  TPRT_EXPECT_OK(tprt_cpu_rope(&x.t, &c.t, &s.t, &y.t, false));
  TPRT_EXPECT_OK(tprt_cpu_rope(&y.t, &c.t, &s.t, &back.t, true));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < w; ++j) {
      TPRT_EXPECT_NEAR(tc_get(&back.t, r * w + j), tc_get(&x.t, r * w + j), 1e-6, 1e-6);
      if (j % hd < hd / 2) {
        double a = tc_get(&x.t, r * w + j), b = tc_get(&x.t, r * w + j + hd / 2);
        double ya = tc_get(&y.t, r * w + j), yb = tc_get(&y.t, r * w + j + hd / 2);
        TPRT_EXPECT_NEAR(ya * ya + yb * yb, a * a + b * b, 1e-6, 1e-6);
      }
    }
  // Row 0 is position 0: cos 1, sin 0, the identity.
  for (int64_t j = 0; j < w; ++j) TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, j), tc_bits(&x.t, j));
  tc_free_n(5, &x, &y, &back, &c, &s);
}

// ---- Attention ----------------------------------------------------------------------------------

TPRT_TEST(attention_matches_f64_reference) {
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof kAttShapes / sizeof kAttShapes[0]; ++sh)
      for (int causal = 0; causal < 2; ++causal)
        for (int sc = 0; sc < 2; ++sc) {
          const int64_t* z = kAttShapes[sh];
          float scale = sc ? 0.3f : 0.0f;
          att_shape_t a = {z[0], z[1], z[2], z[3], z[4], causal, sc ? (double)0.3f : 1.0 / sqrt((double)z[4])};
          att_tensors_t x = att_make(kDtypes[d], &a, 40 + sh);
          TPRT_EXPECT_OK(att_forward(&x, &a, scale));
          int64_t n = tprt_tensor_numel(&x.y.t);
          double *q = tensor_to_f64(&x.q.t), *k = tensor_to_f64(&x.k.t), *v = tensor_to_f64(&x.v.t);
          double *ref = zeros(n), *mag = zeros(n);
          ref_attention(&a, q, k, v, ref, mag);
          char what[160];
          snprintf(what, sizeof what, "attention %s B=%lld S=%lld Hq=%lld Hkv=%lld D=%lld causal=%d scale=%g",
                   tprt_dtype_name(kDtypes[d]), (long long)z[0], (long long)z[1], (long long)z[2], (long long)z[3],
                   (long long)z[4], causal, (double)scale);
          tc_check_near(what, &x.y.t, ref, mag, rtol_of(kDtypes[d]));
          free_n(5, q, k, v, ref, mag);
          att_free(&x);
        }
}

// cpu_attention.c's order, written out with tprt_attention_rows.h's primitives for one query row:
// s[j] = fl(dot·scale), the softmax statistics, o[d] = fmaf(e[j], v_j[d], o[d]) over j ascending,
// y = RNE(o / l). The CUDA exact kernels must produce these bits too.
TPRT_TEST(attention_follows_documented_order_bitwise) {
  att_shape_t a = {2, 9, 4, 2, 16, 1, 0.0};
  for (int d = 0; d < 3; ++d)
    for (int causal = 0; causal < 2; ++causal) {
      a.causal = causal;
      int dt = kDtypes[d];
      att_tensors_t x = att_make(dt, &a, 80);
      TPRT_EXPECT_OK(att_forward(&x, &a, 0.0f));
      tc_tensor_t want = tc_make(dt, 2, a.seqs * a.seq_len, a.hq * a.d);
      const float sc = tprt_attn_scale(0.0f, a.d);
      TPRT_EXPECT(sc == 0.25f);  // scale 0 means 1/sqrt(D), exactly 0.25 for D = 16
      int64_t wq = a.hq * a.d, wk = a.hkv * a.d;
      float qi[16], kj[16], s[9], e[9], o[16];
      for (int64_t b = 0; b < a.seqs; ++b)
        for (int64_t h = 0; h < a.hq; ++h)
          for (int64_t i = 0; i < a.seq_len; ++i) {
            int64_t row = b * a.seq_len, g = h / 2, n = tprt_attn_visible(i, a.seq_len, causal);
            for (int64_t dd = 0; dd < a.d; ++dd) qi[dd] = (float)tc_get(&x.q.t, (row + i) * wq + h * a.d + dd);
            for (int64_t j = 0; j < n; ++j) {
              for (int64_t dd = 0; dd < a.d; ++dd) kj[dd] = (float)tc_get(&x.k.t, (row + j) * wk + g * a.d + dd);
              s[j] = tprt_attn_dot(qi, kj, a.d) * sc;
            }
            float m, l;
            tprt_attn_softmax_stats(s, e, n, &m, &l);
            for (int64_t dd = 0; dd < a.d; ++dd) {
              o[dd] = 0.0f;
              for (int64_t j = 0; j < n; ++j)
                o[dd] = fmaf(e[j], (float)tc_get(&x.v.t, (row + j) * wk + g * a.d + dd), o[dd]);
              tc_set(&want.t, (row + i) * wq + h * a.d + dd, o[dd] / l);
            }
          }
      int64_t bad = 0;
      for (int64_t i = 0; i < tprt_tensor_numel(&want.t); ++i) bad += tc_bits(&x.y.t, i) != tc_bits(&want.t, i);
      TPRT_EXPECT_EQ_I64(bad, 0);
      tc_free(&want);
      att_free(&x);
    }
}

// Copies rows [r0, r0 + n) of |src| into a new tensor of n rows.
static tc_tensor_t rows_of(const tprt_tensor_t* src, int64_t r0, int64_t n) {
  tc_tensor_t out = tc_make(src->dtype, 2, n, src->dims[1]);
  size_t row = tprt_dtype_bytes(src->dtype, src->dims[1]);
  if (n > 0) memcpy(out.t.data, (const char*)src->data + (size_t)r0 * row, (size_t)n * row);
  return out;
}

static bool same_rows(const tprt_tensor_t* a, int64_t ra, const tprt_tensor_t* b, int64_t rb, int64_t n) {
  size_t row = tprt_dtype_bytes(a->dtype, a->dims[1]);
  return a->dtype == b->dtype && a->dims[1] == b->dims[1] &&
         memcmp((const char*)a->data + (size_t)ra * row, (const char*)b->data + (size_t)rb * row, (size_t)n * row) == 0;
}

// Prefill/decode: under a causal mask, the first n rows of a sequence's output (and of dq) are the
// same bits whether the sequence has n tokens or S, and whatever the later tokens hold: a decoder
// that appends tokens never changes the outputs of the earlier ones. Without the mask they differ.
TPRT_TEST(attention_causal_prefix_is_bitwise_invariant) {
  att_shape_t a = {1, 9, 4, 2, 16, 1, 0.0};
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    att_tensors_t full = att_make(dt, &a, 100);
    TPRT_EXPECT_OK(att_forward(&full, &a, 0.0f));
    TPRT_EXPECT_OK(att_backward(&full, &a, 0.0f));
    for (int64_t n = 1; n <= a.seq_len; ++n) {
      att_shape_t pa = a;
      pa.seq_len = n;
      att_tensors_t pre;
      pre.q = rows_of(&full.q.t, 0, n);
      pre.k = rows_of(&full.k.t, 0, n);
      pre.v = rows_of(&full.v.t, 0, n);
      pre.dy = rows_of(&full.dy.t, 0, n);
      pre.y = rows_of(&full.y.t, 0, n);  // overwritten by the forward
      pre.dq = rows_of(&full.dq.t, 0, n);
      pre.dk = rows_of(&full.dk.t, 0, n);
      pre.dv = rows_of(&full.dv.t, 0, n);
      memset(pre.y.t.data, 0xFF, tprt_tensor_bytes(&pre.y.t));
      memset(pre.dq.t.data, 0xFF, tprt_tensor_bytes(&pre.dq.t));
      TPRT_EXPECT_OK(att_forward(&pre, &pa, 0.0f));
      TPRT_EXPECT_OK(att_backward(&pre, &pa, 0.0f));
      if (!same_rows(&pre.y.t, 0, &full.y.t, 0, n))
        TPRT__FAIL("%s: y of a %lld-token prefix differs", tprt_dtype_name(dt), (long long)n);
      if (!same_rows(&pre.dq.t, 0, &full.dq.t, 0, n))
        TPRT__FAIL("%s: dq of a %lld-token prefix differs", tprt_dtype_name(dt), (long long)n);
      // The same call as a decoder's: S tokens with the later ones changed.
      att_tensors_t later = att_make(dt, &a, 200 + (uint64_t)n);
      size_t qrow = tprt_dtype_bytes(dt, a.hq * a.d), krow = tprt_dtype_bytes(dt, a.hkv * a.d);
      memcpy(later.q.t.data, full.q.t.data, (size_t)n * qrow);
      memcpy(later.k.t.data, full.k.t.data, (size_t)n * krow);
      memcpy(later.v.t.data, full.v.t.data, (size_t)n * krow);
      TPRT_EXPECT_OK(att_forward(&later, &a, 0.0f));
      if (!same_rows(&later.y.t, 0, &full.y.t, 0, n))
        TPRT__FAIL("%s: y of the first %lld tokens depends on later tokens", tprt_dtype_name(dt), (long long)n);
      if (n < a.seq_len && same_rows(&later.y.t, n, &full.y.t, n, 1))
        TPRT__FAIL("%s: token %lld did not change with its inputs", tprt_dtype_name(dt), (long long)n);
      att_free(&later);
      att_free(&pre);
    }
    // Without the mask the first token sees the others: its output changes with the length.
    att_shape_t fa = a, fp = a;
    fa.causal = fp.causal = 0;
    fp.seq_len = 4;
    att_tensors_t all = att_make(dt, &fa, 100), pre = att_make(dt, &fp, 100);
    memcpy(pre.q.t.data, all.q.t.data, tprt_tensor_bytes(&pre.q.t));
    memcpy(pre.k.t.data, all.k.t.data, tprt_tensor_bytes(&pre.k.t));
    memcpy(pre.v.t.data, all.v.t.data, tprt_tensor_bytes(&pre.v.t));
    TPRT_EXPECT_OK(att_forward(&all, &fa, 0.0f));
    TPRT_EXPECT_OK(att_forward(&pre, &fp, 0.0f));
    TPRT_EXPECT(!same_rows(&all.y.t, 0, &pre.y.t, 0, 1));
    att_free(&all);
    att_free(&pre);
    att_free(&full);
  }
}

// The optional lse: each row's log-sum-exp of its scaled scores (a float64 reference within a few
// f32 roundings), and the backward gives the same bits with or without it (the exact kernels
// recompute the statistics).
TPRT_TEST(attention_lse_and_backward_with_it) {
  att_shape_t a = {2, 7, 4, 2, 16, 1, 0.25};
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    att_tensors_t x = att_make(dt, &a, 77);
    tc_tensor_t lse = tc_make(TPRT_DTYPE_F32, 2, a.seqs * a.seq_len, a.hq);
    TPRT_EXPECT_OK(tprt_cpu_attention(&x.q.t, &x.k.t, &x.v.t, NULL, &x.y.t, &lse.t, a.seq_len, a.d, true, 0.25f));
    double *q = tensor_to_f64(&x.q.t), *k = tensor_to_f64(&x.k.t);
    double worst = 0.0;
    for (int64_t b = 0; b < a.seqs; ++b)
      for (int64_t h = 0; h < a.hq; ++h)
        for (int64_t i = 0; i < a.seq_len; ++i) {
          int64_t g = h / (a.hq / a.hkv), row = b * a.seq_len, wq = a.hq * a.d, wk = a.hkv * a.d;
          double sum = 0.0;
          for (int64_t j = 0; j <= i; ++j) {
            double sc = 0.0;
            for (int64_t e = 0; e < a.d; ++e) sc += q[(row + i) * wq + h * a.d + e] * k[(row + j) * wk + g * a.d + e];
            sum += exp(sc * 0.25);
          }
          double got = tc_get(&lse.t, (row + i) * a.hq + h), want = log(sum);
          double err = fabs(got - want) / (fabs(want) + 1.0);
          if (err > worst) worst = err;
        }
    if (!(worst < 2e-6)) TPRT__FAIL("%s: lse off the float64 reference by %.3g", tprt_dtype_name(dt), worst);
    tc_tensor_t dq2 = tc_make(dt, 2, a.seqs * a.seq_len, a.hq * a.d), dk2 = tc_make(dt, 2, a.seqs * a.seq_len, a.hkv * a.d);
    tc_tensor_t dv2 = tc_make(dt, 2, a.seqs * a.seq_len, a.hkv * a.d);
    TPRT_EXPECT_OK(tprt_cpu_attention_grad(&x.q.t, &x.k.t, &x.v.t, &x.y.t, &x.dy.t, NULL, &x.dq.t, &x.dk.t, &x.dv.t,
                                           a.seq_len, a.d, true, 0.25f));
    TPRT_EXPECT_OK(tprt_cpu_attention_grad(&x.q.t, &x.k.t, &x.v.t, &x.y.t, &x.dy.t, &lse.t, &dq2.t, &dk2.t, &dv2.t,
                                           a.seq_len, a.d, true, 0.25f));
    TPRT_EXPECT(memcmp(x.dq.t.data, dq2.t.data, tprt_tensor_bytes(&dq2.t)) == 0);
    TPRT_EXPECT(memcmp(x.dk.t.data, dk2.t.data, tprt_tensor_bytes(&dk2.t)) == 0);
    TPRT_EXPECT(memcmp(x.dv.t.data, dv2.t.data, tprt_tensor_bytes(&dv2.t)) == 0);
    // Wrong shapes are refused.
    tc_tensor_t bad = tc_make(TPRT_DTYPE_F32, 2, a.hq, a.seqs * a.seq_len);
    TPRT_EXPECT_STATUS(tprt_cpu_attention(&x.q.t, &x.k.t, &x.v.t, NULL, &x.y.t, &bad.t, a.seq_len, a.d, true, 0.25f),
                       TPRT_STATUS_INVALID_ARGUMENT, "lse must be f32 [14, 4] (tokens, query heads)");
    free_n(2, q, k);
    tc_free_n(5, &lse, &dq2, &dk2, &dv2, &bad);
    att_free(&x);
  }
}

// Decoding with a KV cache: sequence b's queries at positions L_b .. L_b+s-1, with its first L_b
// keys and values in the cache (C rows per sequence, the rest garbage), give the bits of the
// prefill of the whole sequence at those positions: causal with any split (a decode step, s = 1,
// or a chunk), and without the mask when the chunk ends the sequence. Sequences of one call may
// have different cache lengths.
TPRT_TEST(attention_kv_cache_decode_matches_prefill) {
  const int64_t cap = 12;
  for (int d = 0; d < 3; ++d)
    for (int causal = 1; causal >= 0; --causal) {
      int dt = kDtypes[d];
      att_shape_t a = {2, 9, 4, 2, 16, causal, 0.0};
      att_tensors_t full = att_make(dt, &a, 300);
      TPRT_EXPECT_OK(att_forward(&full, &a, 0.0f));
      size_t qrow = tprt_dtype_bytes(dt, a.hq * a.d), krow = tprt_dtype_bytes(dt, a.hkv * a.d);
      // (L_0, L_1, s): cached tokens of each sequence and new tokens per sequence.
      static const int64_t splits[][3] = {{0, 0, 9}, {8, 8, 1}, {4, 7, 1}, {0, 5, 1}, {3, 6, 3}, {6, 2, 3}};
      for (size_t c = 0; c < sizeof splits / sizeof splits[0]; ++c) {
        int64_t s = splits[c][2];
        if (!causal && (splits[c][0] + s != a.seq_len || splits[c][1] + s != a.seq_len)) continue;
        tc_tensor_t q = tc_make(dt, 2, 2 * s, a.hq * a.d), k = tc_make(dt, 2, 2 * s, a.hkv * a.d);
        tc_tensor_t v = tc_make(dt, 2, 2 * s, a.hkv * a.d), y = tc_make(dt, 2, 2 * s, a.hq * a.d);
        tc_tensor_t kc = tc_make(dt, 2, 2 * cap, a.hkv * a.d), vc = tc_make(dt, 2, 2 * cap, a.hkv * a.d);
        tc_tensor_t len = tc_make(TPRT_DTYPE_I32, 1, (int64_t)2);
        tc_fill(&kc.t, 900 + c, -3.0, 3.0);  // rows past cache_len must not be read
        tc_fill(&vc.t, 901 + c, -3.0, 3.0);
        for (int64_t b = 0; b < 2; ++b) {
          int64_t past = splits[c][b], src = b * a.seq_len;
          ((int32_t*)len.t.data)[b] = (int32_t)past;
          memcpy((char*)kc.t.data + (size_t)(b * cap) * krow, (char*)full.k.t.data + (size_t)src * krow, (size_t)past * krow);
          memcpy((char*)vc.t.data + (size_t)(b * cap) * krow, (char*)full.v.t.data + (size_t)src * krow, (size_t)past * krow);
          memcpy((char*)q.t.data + (size_t)(b * s) * qrow, (char*)full.q.t.data + (size_t)(src + past) * qrow, (size_t)s * qrow);
          memcpy((char*)k.t.data + (size_t)(b * s) * krow, (char*)full.k.t.data + (size_t)(src + past) * krow, (size_t)s * krow);
          memcpy((char*)v.t.data + (size_t)(b * s) * krow, (char*)full.v.t.data + (size_t)(src + past) * krow, (size_t)s * krow);
        }
        tprt_kv_cache_t cache = {&kc.t, &vc.t, &len.t};
        TPRT_EXPECT_OK(tprt_cpu_attention(&q.t, &k.t, &v.t, &cache, &y.t, NULL, s, a.d, causal, 0.0f));
        for (int64_t b = 0; b < 2; ++b)
          if (!same_rows(&y.t, b * s, &full.y.t, b * a.seq_len + splits[c][b], s))
            TPRT__FAIL("%s causal=%d: sequence %lld decoded after %lld cached tokens (%lld new) differs from its "
                       "prefill", tprt_dtype_name(dt), causal, (long long)b, (long long)splits[c][b], (long long)s);
        tc_free_n(7, &q, &k, &v, &y, &kc, &vc, &len);
      }
      att_free(&full);
    }
}

// The KV cache's checks: shapes, dtypes and cache_len values in [0, C].
TPRT_TEST(attention_kv_cache_invalid_arguments) {
  tc_tensor_t q = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)64), k = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)32);
  tc_tensor_t v = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)32), y = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)64);
  tc_tensor_t kc = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)8, (int64_t)32), vc = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)8, (int64_t)32);
  tc_tensor_t len = tc_make(TPRT_DTYPE_I32, 1, (int64_t)2), len3 = tc_make(TPRT_DTYPE_I32, 1, (int64_t)3);
  tc_tensor_t len64 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)2), kw = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)8, (int64_t)16);
  tc_tensor_t kf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, (int64_t)32), k7 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)7, (int64_t)32);
  tc_fill(&q.t, 1, -1.0, 1.0);
  tc_fill(&k.t, 2, -1.0, 1.0);
  tc_fill(&v.t, 3, -1.0, 1.0);
  tc_fill(&kc.t, 4, -1.0, 1.0);
  tc_fill(&vc.t, 5, -1.0, 1.0);
  int32_t* n = (int32_t*)len.t.data;
  n[0] = 4;
  n[1] = 0;
  tprt_kv_cache_t ok = {&kc.t, &vc.t, &len.t};
  TPRT_EXPECT_OK(tprt_cpu_attention(&q.t, &k.t, &v.t, &ok, &y.t, NULL, 1, 16, true, 0.0f));
  n[1] = 4;  // C = 4 rows per sequence: a full cache is allowed
  TPRT_EXPECT_OK(tprt_cpu_attention(&q.t, &k.t, &v.t, &ok, &y.t, NULL, 1, 16, true, 0.0f));
  n[1] = 5;
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, &ok, &y.t, NULL, 1, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "cache_len[1] = 5 is outside the cache's 4 rows per sequence");
  n[1] = -1;
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, &ok, &y.t, NULL, 1, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "cache_len[1] = -1");
  n[1] = 0;
  tprt_kv_cache_t bad[5] = {{&kc.t, &vc.t, &len3.t}, {&kc.t, &vc.t, &len64.t}, {&kw.t, &kw.t, &len.t},
                            {&kf.t, &kf.t, &len.t}, {&k7.t, &k7.t, &len.t}};
  const char* why[5] = {"cache_len must be i32 [2]", "cache_len", "k_cache and v_cache must be [B*C, 32]",
                        "k_cache and v_cache must be [B*C, 32] of k's dtype bf16", "C >= 1 rows each; got [7,32] bf16"};
  for (int i = 0; i < 5; ++i)
    TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, &bad[i], &y.t, NULL, 1, 16, true, 0.0f),
                       TPRT_STATUS_INVALID_ARGUMENT, why[i]);
  tprt_kv_cache_t mixed = {&kc.t, &kw.t, &len.t};
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, &mixed, &y.t, NULL, 1, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "k_cache and v_cache");
  tc_free_n(12, &q, &k, &v, &y, &kc, &vc, &len, &len3, &len64, &kw, &kf, &k7);
}

// Sequences are independent: a batch of 3 gives each sequence the bits it gets alone, forward and
// backward.
TPRT_TEST(attention_sequences_are_independent) {
  att_shape_t a = {3, 5, 4, 2, 8, 1, 0.0}, one = a;
  one.seqs = 1;
  for (int d = 0; d < 3; ++d)
    for (int causal = 0; causal < 2; ++causal) {
      a.causal = one.causal = causal;
      int dt = kDtypes[d];
      att_tensors_t batch = att_make(dt, &a, 300);
      TPRT_EXPECT_OK(att_forward(&batch, &a, 0.0f));
      TPRT_EXPECT_OK(att_backward(&batch, &a, 0.0f));
      for (int64_t b = 0; b < a.seqs; ++b) {
        int64_t r0 = b * a.seq_len, s = a.seq_len;
        att_tensors_t x = {rows_of(&batch.q.t, r0, s),  rows_of(&batch.k.t, r0, s),  rows_of(&batch.v.t, r0, s),
                           rows_of(&batch.y.t, r0, s),  rows_of(&batch.dy.t, r0, s), rows_of(&batch.dq.t, r0, s),
                           rows_of(&batch.dk.t, r0, s), rows_of(&batch.dv.t, r0, s)};
        tc_tensor_t* outs[4] = {&x.y, &x.dq, &x.dk, &x.dv};
        for (int i = 0; i < 4; ++i) memset(outs[i]->t.data, 0, tprt_tensor_bytes(&outs[i]->t));
        TPRT_EXPECT_OK(att_forward(&x, &one, 0.0f));
        TPRT_EXPECT_OK(att_backward(&x, &one, 0.0f));
        TPRT_EXPECT(same_rows(&x.y.t, 0, &batch.y.t, r0, s));
        TPRT_EXPECT(same_rows(&x.dq.t, 0, &batch.dq.t, r0, s));
        TPRT_EXPECT(same_rows(&x.dk.t, 0, &batch.dk.t, r0, s));
        TPRT_EXPECT(same_rows(&x.dv.t, 0, &batch.dv.t, r0, s));
        att_free(&x);
      }
      att_free(&batch);
    }
}

// Copies head |from| of a [T, H*D] tensor into head |to| of another.
static void copy_head(const tprt_tensor_t* src, int64_t from, tprt_tensor_t* dst, int64_t to, int64_t hd) {
  for (int64_t r = 0; r < src->dims[0]; ++r)
    for (int64_t c = 0; c < hd; ++c)
      tc_set(dst, r * dst->dims[1] + to * hd + c, (float)tc_get(src, r * src->dims[1] + from * hd + c));
}

// Query head h reads key/value head h / (Hq/Hkv): with 4 query heads over 2 kv heads, the result is
// bitwise that of multi-head attention whose kv heads are [kv0, kv0, kv1, kv1], not
// [kv0, kv1, kv0, kv1]. dq matches bitwise too; dk and dv of a kv head are the sums of the two
// query heads' (accumulated in f32 in one sum, so within f32 rounding of the expanded heads' sum).
TPRT_TEST(attention_gqa_maps_query_heads_to_kv_groups) {
  att_shape_t gqa = {2, 6, 4, 2, 8, 1, 0.0}, mha = gqa;
  mha.hkv = 4;
  int64_t t = 12, hd = 8;
  for (int order = 0; order < 2; ++order) {  // 0: h / 2 (the contract), 1: h % 2 (wrong)
    att_tensors_t g = att_make(TPRT_DTYPE_F32, &gqa, 400), m = att_make(TPRT_DTYPE_F32, &mha, 999);
    memcpy(m.q.t.data, g.q.t.data, tprt_tensor_bytes(&g.q.t));
    memcpy(m.dy.t.data, g.dy.t.data, tprt_tensor_bytes(&g.dy.t));
    for (int64_t h = 0; h < 4; ++h) {
      int64_t src = order == 0 ? h / 2 : h % 2;
      copy_head(&g.k.t, src, &m.k.t, h, hd);
      copy_head(&g.v.t, src, &m.v.t, h, hd);
    }
    TPRT_EXPECT_OK(att_forward(&g, &gqa, 0.0f));
    TPRT_EXPECT_OK(att_forward(&m, &mha, 0.0f));
    bool same = tc_same_bytes(&g.y.t, &m.y.t);
    if (order == 0) {
      TPRT_EXPECT(same);
      TPRT_EXPECT_OK(att_backward(&g, &gqa, 0.0f));
      TPRT_EXPECT_OK(att_backward(&m, &mha, 0.0f));
      TPRT_EXPECT(tc_same_bytes(&g.dq.t, &m.dq.t));
      // One f32 sum over both heads against two sums added: within f32 rounding of the largest.
      double big = 0.0;
      for (int64_t i = 0; i < t * 32; ++i) big = fmax(big, fmax(fabs(tc_get(&m.dk.t, i)), fabs(tc_get(&m.dv.t, i))));
      for (int64_t r = 0; r < t; ++r)
        for (int64_t kvh = 0; kvh < 2; ++kvh)
          for (int64_t c = 0; c < hd; ++c) {
            int64_t at = r * 16 + kvh * hd + c, a0 = r * 32 + 2 * kvh * hd + c, a1 = a0 + hd;
            double dk = tc_get(&m.dk.t, a0) + tc_get(&m.dk.t, a1), dv = tc_get(&m.dv.t, a0) + tc_get(&m.dv.t, a1);
            TPRT_EXPECT_NEAR(tc_get(&g.dk.t, at), dk, 1e-5 * big, 0.0);
            TPRT_EXPECT_NEAR(tc_get(&g.dv.t, at), dv, 1e-5 * big, 0.0);
          }
    } else {
      TPRT_EXPECT(!same);
    }
    att_free(&g);
    att_free(&m);
  }
}

// No tokens, or no heads: nothing to compute, and success.
TPRT_TEST(attention_and_rope_accept_empty_tensors) {
  att_shape_t a = {0, 4, 4, 2, 8, 1, 0.0};
  att_tensors_t x = att_make(TPRT_DTYPE_BF16, &a, 1);
  TPRT_EXPECT_OK(att_forward(&x, &a, 0.0f));
  TPRT_EXPECT_OK(att_backward(&x, &a, 0.0f));
  att_free(&x);
  tc_tensor_t q = tc_make(TPRT_DTYPE_F32, 2, 4, 0), y = tc_make(TPRT_DTYPE_F32, 2, 4, 0),
              k = tc_make(TPRT_DTYPE_F32, 2, 4, 8), v = tc_make(TPRT_DTYPE_F32, 2, 4, 8);
  TPRT_EXPECT_OK(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 8, true, 0.0f));
  tc_tensor_t c = tc_make(TPRT_DTYPE_F32, 2, 0, 8), s = tc_make(TPRT_DTYPE_F32, 2, 0, 8);
  tc_tensor_t rx = tc_make(TPRT_DTYPE_F32, 2, 0, 16), ry = tc_make(TPRT_DTYPE_F32, 2, 0, 16);
  TPRT_EXPECT_OK(tprt_cpu_rope(&rx.t, &c.t, &s.t, &ry.t, false));
  tc_tensor_t* all[8] = {&q, &y, &k, &v, &c, &s, &rx, &ry};
  for (int i = 0; i < 8; ++i) tc_free(all[i]);
}

// ---- Argument errors ----------------------------------------------------------------------------

TPRT_TEST(attention_invalid_arguments) {
  const int bf = TPRT_DTYPE_BF16;
  // q [8, 4 heads of 16], k and v [8, 2 heads of 16], sequences of 4.
  tc_tensor_t q = tc_make(bf, 2, 8, 64), k = tc_make(bf, 2, 8, 32), v = tc_make(bf, 2, 8, 32),
              y = tc_make(bf, 2, 8, 64);
  tc_tensor_t q3 = tc_make(bf, 2, 8, 48), y3 = tc_make(bf, 2, 8, 48), kf = tc_make(TPRT_DTYPE_F32, 2, 8, 32),
              vf = tc_make(TPRT_DTYPE_F32, 2, 8, 32), v7 = tc_make(bf, 2, 7, 32), k7 = tc_make(bf, 2, 7, 32),
              yt = tc_make(bf, 2, 8, 32), q1 = tc_make(bf, 1, 512), qi = tc_make(TPRT_DTYPE_I32, 2, 8, 64),
              k0 = tc_make(bf, 2, 8, 0);
  TPRT_EXPECT_OK(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, 0.0f));
  TPRT_EXPECT_STATUS(tprt_cpu_attention(NULL, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: q is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, NULL, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: y is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q1.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: q must be a rank-2 bf16, f16 or f32 tensor; got [512] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&qi.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: q must be a rank-2");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 0, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: seq_len=0 and head_dim=16 must be >= 1");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 0, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: seq_len=4 and head_dim=0 must be >= 1");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, -1.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: scale=-1 must be finite and >= 0 (0: 1/sqrt(D))");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, NAN), TPRT_STATUS_INVALID_ARGUMENT,
                     "must be finite and >= 0");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 16, true, INFINITY), TPRT_STATUS_INVALID_ARGUMENT,
                     "must be finite and >= 0");
  // 8 tokens are not whole sequences of 3; 64 columns are not heads of 24.
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 3, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: q [8,64] bf16 and k [8,32] bf16 must be [B*S, Hq*D] and [B*S, Hkv*D] with S=3, D=16 "
                     "and Hkv >= 1");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, 4, 24, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "with S=4, D=24 and Hkv >= 1");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k0.t, &k0.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "and Hkv >= 1");
  // 3 query heads over 2 kv heads.
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q3.t, &k.t, &v.t, NULL, &y3.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: 3 query heads do not split into groups over 2 key/value heads");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v7.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: k and v must be [8, Hkv*D] of q's dtype bf16; got [8,32] bf16 and [7,32] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k7.t, &v7.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: k and v must be [8, Hkv*D] of q's dtype bf16; got [7,32] bf16 and [7,32] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &kf.t, &vf.t, NULL, &y.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "got [8,32] f32 and [8,32] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_attention(&q.t, &k.t, &v.t, NULL, &yt.t, NULL, 4, 16, true, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "attention: y must have q's shape and dtype [8,64] bf16; got [8,32] bf16");
  tc_tensor_t* all[14] = {&q, &k, &v, &y, &q3, &y3, &kf, &vf, &v7, &k7, &yt, &q1, &qi, &k0};
  for (int i = 0; i < 14; ++i) tc_free(all[i]);
}

TPRT_TEST(rope_invalid_arguments) {
  const int bf = TPRT_DTYPE_BF16;
  // x [4, 2 heads of 8], tables [4, 8].
  tc_tensor_t x = tc_make(bf, 2, 4, 16), y = tc_make(bf, 2, 4, 16), c = tc_make(bf, 2, 4, 8), s = tc_make(bf, 2, 4, 8);
  tc_tensor_t c5 = tc_make(bf, 2, 5, 8), s5 = tc_make(bf, 2, 5, 8), c7 = tc_make(bf, 2, 4, 7),
              s7 = tc_make(bf, 2, 4, 7), c6 = tc_make(bf, 2, 4, 6), s6 = tc_make(bf, 2, 4, 6),
              sf = tc_make(TPRT_DTYPE_F32, 2, 4, 8), yf = tc_make(TPRT_DTYPE_F32, 2, 4, 16), x1 = tc_make(bf, 1, 64),
              xi = tc_make(TPRT_DTYPE_I64, 2, 4, 16);
  TPRT_EXPECT_OK(tprt_cpu_rope(&x.t, &c.t, &s.t, &y.t, false));
  TPRT_EXPECT_STATUS(tprt_cpu_rope(NULL, &c.t, &s.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT, "rope: x is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c.t, NULL, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT, "rope: sin is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x1.t, &c.t, &s.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "rope: x must be a rank-2 bf16, f16 or f32 tensor; got [64] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&xi.t, &c.t, &s.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "rope: x must be a rank-2 bf16, f16 or f32 tensor; got [4,16] i64");
  // Tables of another length, an odd D, a D that does not divide the width, mixed dtypes. Only the
  // tables' shapes are asserted in full: the message prints x's shape and sin's through one buffer
  // (reported: tprt__check_rope passes |a| twice).
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c5.t, &s5.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "rope: cos and sin must be [T, D] of one dtype with T = 4 rows of x");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c5.t, &s5.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "an even D dividing its width; got cos [5,8] bf16 and sin");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c7.t, &s7.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "got cos [4,7] bf16 and sin");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c6.t, &s6.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "got cos [4,6] bf16 and sin");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c.t, &sf.t, &y.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "rope: cos and sin must be [T, D] of one dtype");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c.t, &c5.t, &y.t, true), TPRT_STATUS_INVALID_ARGUMENT,
                     "rope: cos and sin must be [T, D] of one dtype");
  TPRT_EXPECT_STATUS(tprt_cpu_rope(&x.t, &c.t, &s.t, &yf.t, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "rope: y must have x's shape and dtype [4,16] bf16; got [4,16] f32");
  // Tables of another float dtype than x are accepted.
  tc_tensor_t cf = tc_make(TPRT_DTYPE_F32, 2, 4, 8);
  TPRT_EXPECT_OK(tprt_cpu_rope(&x.t, &cf.t, &sf.t, &y.t, false));
  tc_tensor_t* all[15] = {&x, &y, &c, &s, &c5, &s5, &c7, &s7, &c6, &s6, &sf, &yf, &x1, &xi, &cf};
  for (int i = 0; i < 15; ++i) tc_free(all[i]);
}
