// Unit tests of tprt_cpu_attention_grad: a float64 analytic reference (plain loops) checked against
// central finite differences of the float64 forward, the kernel against it, the documented f32
// order bit for bit, and argument errors. Prefill/decode, sequence independence and the
// grouped-query mapping of the gradients are checked with the forward in test_cpu_attention.c;
// the tolerances are explained in test_cpu_attention_util.h.
#include "test_cpu_attention_util.h"

// ---- Reference ----------------------------------------------------------------------------------

// The analytic gradients of sum(dy·y): with dp[j] = dy_i·v_j and Di = Σ_j p[j]·dp[j],
// ds[j] = p[j]·(dp[j] - Di); dq_i = scale·Σ_j ds[j]·k_j, dk_j = scale·Σ_i ds·q_i, dv_j = Σ_i p·dy_i
// (dk and dv summed over the query heads of j's group). m* get the magnitudes of the terms, with
// |dp| + Σ|dy·y| bounding |dp - Di| whatever rounding y had.
static void ref_attention_grad(const att_shape_t* a, const double* q, const double* k, const double* v,
                               const double* dy, double* dq, double* dk, double* dv, double* mq, double* mk,
                               double* mv) {
  int64_t wq = a->hq * a->d, wk = a->hkv * a->d, t = a->seqs * a->seq_len;
  for (int64_t i = 0; i < t * wk; ++i) dk[i] = dv[i] = mk[i] = mv[i] = 0.0;
  double p[64], dp[64], y[64];
  for (int64_t b = 0; b < a->seqs; ++b)
    for (int64_t h = 0; h < a->hq; ++h)
      for (int64_t i = 0; i < a->seq_len; ++i) {
        int64_t n = ref_probs(a, q, k, b, h, i, p), g = h / (a->hq / a->hkv), row = b * a->seq_len;
        const double* dyi = dy + (row + i) * wq + h * a->d;
        const double* qi = q + (row + i) * wq + h * a->d;
        double di = 0.0, dabs = 0.0;
        for (int64_t d = 0; d < a->d; ++d) {
          y[d] = 0.0;
          for (int64_t j = 0; j < n; ++j) y[d] += p[j] * v[(row + j) * wk + g * a->d + d];
          dabs += fabs(dyi[d] * y[d]);
        }
        for (int64_t j = 0; j < n; ++j) {
          dp[j] = 0.0;
          for (int64_t d = 0; d < a->d; ++d) dp[j] += dyi[d] * v[(row + j) * wk + g * a->d + d];
          di += p[j] * dp[j];
        }
        for (int64_t d = 0; d < a->d; ++d) dq[(row + i) * wq + h * a->d + d] = mq[(row + i) * wq + h * a->d + d] = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          double ds = p[j] * (dp[j] - di), dsm = p[j] * (fabs(dp[j]) + dabs);
          for (int64_t d = 0; d < a->d; ++d) {
            int64_t kj = (row + j) * wk + g * a->d + d, qd = (row + i) * wq + h * a->d + d;
            dq[qd] += a->scale * ds * k[kj];
            mq[qd] += a->scale * dsm * fabs(k[kj]);
            dk[kj] += a->scale * ds * qi[d];
            mk[kj] += a->scale * dsm * fabs(qi[d]);
            dv[kj] += p[j] * dyi[d];
            mv[kj] += p[j] * fabs(dyi[d]);
          }
        }
      }
}

static double ref_loss(const att_shape_t* a, const double* q, const double* k, const double* v, const double* dy) {
  int64_t n = a->seqs * a->seq_len * a->hq * a->d;
  double *y = zeros(n), *mag = zeros(n), loss = 0.0;
  ref_attention(a, q, k, v, y, mag);
  for (int64_t i = 0; i < n; ++i) loss += y[i] * dy[i];
  free_n(2, y, mag);
  return loss;
}

// ---- Gradient -----------------------------------------------------------------------------------

TPRT_TEST(attention_grad_reference_matches_finite_differences) {
  const double step = 0x1p-18;
  for (int causal = 0; causal < 2; ++causal) {
    att_shape_t a = {2, 3, 4, 2, 4, causal, 0.7};
    int64_t nq = 6 * 16, nk = 6 * 8;
    double q[96], k[48], v[48], dy[96], dq[96], dk[48], dv[48], mq[96], mk[48], mv[48];
    uint64_t s = 9;
    for (int64_t i = 0; i < nq; ++i) {
      q[i] = tc_uniform(&s, -1.5, 1.5);
      dy[i] = tc_uniform(&s, -1.0, 1.0);
    }
    for (int64_t i = 0; i < nk; ++i) {
      k[i] = tc_uniform(&s, -1.5, 1.5);
      v[i] = tc_uniform(&s, -2.0, 2.0);
    }
    ref_attention_grad(&a, q, k, v, dy, dq, dk, dv, mq, mk, mv);
    double* params[3] = {q, k, v};
    double* grads[3] = {dq, dk, dv};
    int64_t counts[3] = {nq, nk, nk};
    for (int p = 0; p < 3; ++p)
      for (int64_t i = 0; i < counts[p]; ++i) {
        double keep = params[p][i];
        params[p][i] = keep + step;
        double up = ref_loss(&a, q, k, v, dy);
        params[p][i] = keep - step;
        double down = ref_loss(&a, q, k, v, dy);
        params[p][i] = keep;
        TPRT_EXPECT_NEAR(grads[p][i], (up - down) / (2 * step), 1e-7, 1e-6);
      }
  }
}

TPRT_TEST(attention_grad_matches_f64_reference) {
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof kAttShapes / sizeof kAttShapes[0]; ++sh)
      for (int causal = 0; causal < 2; ++causal) {
        const int64_t* z = kAttShapes[sh];
        float scale = causal ? 0.0f : 0.3f;
        att_shape_t a = {z[0], z[1], z[2], z[3], z[4], causal, causal ? 1.0 / sqrt((double)z[4]) : (double)0.3f};
        att_tensors_t x = att_make(kDtypes[d], &a, 60 + sh);
        TPRT_EXPECT_OK(att_forward(&x, &a, scale));
        TPRT_EXPECT_OK(att_backward(&x, &a, scale));
        int64_t nq = tprt_tensor_numel(&x.q.t), nk = tprt_tensor_numel(&x.k.t);
        double *q = tensor_to_f64(&x.q.t), *k = tensor_to_f64(&x.k.t), *v = tensor_to_f64(&x.v.t),
               *dy = tensor_to_f64(&x.dy.t);
        double *dq = zeros(nq), *mq = zeros(nq), *dk = zeros(nk), *mk = zeros(nk), *dv = zeros(nk), *mv = zeros(nk);
        ref_attention_grad(&a, q, k, v, dy, dq, dk, dv, mq, mk, mv);
        char what[160], sub[176];
        snprintf(what, sizeof what, "%s B=%lld S=%lld Hq=%lld Hkv=%lld D=%lld causal=%d", tprt_dtype_name(kDtypes[d]),
                 (long long)z[0], (long long)z[1], (long long)z[2], (long long)z[3], (long long)z[4], causal);
        snprintf(sub, sizeof sub, "dq %s", what);
        tc_check_near(sub, &x.dq.t, dq, mq, rtol_of(kDtypes[d]));
        snprintf(sub, sizeof sub, "dk %s", what);
        tc_check_near(sub, &x.dk.t, dk, mk, rtol_of(kDtypes[d]));
        snprintf(sub, sizeof sub, "dv %s", what);
        tc_check_near(sub, &x.dv.t, dv, mv, rtol_of(kDtypes[d]));
        free_n(10, q, k, v, dy, dq, mq, dk, mk, dv, mv);
        att_free(&x);
      }
}

// The backward's order: p = e / l recomputed; ds[j] = p·(dot(dy_i, v_j) - dot(dy_i, y_i));
// dq_i = RNE(scale · fmaf-sum of ds·k_j over j); dk and dv accumulate in f32 with fmaf over the
// group's heads, then the queries, ascending, scaled (dk) and rounded once.
TPRT_TEST(attention_grad_follows_documented_order_bitwise) {
  att_shape_t a = {2, 6, 4, 2, 8, 1, 0.0};
  for (int d = 0; d < 3; ++d)
    for (int causal = 0; causal < 2; ++causal) {
      a.causal = causal;
      int dt = kDtypes[d];
      const float sc = 0.45f;
      att_tensors_t x = att_make(dt, &a, 90);
      TPRT_EXPECT_OK(att_forward(&x, &a, sc));
      TPRT_EXPECT_OK(att_backward(&x, &a, sc));
      int64_t t = a.seqs * a.seq_len, wq = a.hq * a.d, wk = a.hkv * a.d, sd = a.seq_len * a.d;
      tc_tensor_t wdq = tc_make(dt, 2, t, wq), wdk = tc_make(dt, 2, t, wk), wdv = tc_make(dt, 2, t, wk);
      float qh[48], kh[48], vh[48], yh[48], dyh[48], dkh[48], dvh[48], p[6], ds[6], dqi[8];
      for (int64_t b = 0; b < a.seqs; ++b)
        for (int64_t g = 0; g < a.hkv; ++g) {
          int64_t row = b * a.seq_len;
          for (int64_t i = 0; i < sd; ++i) {
            kh[i] = (float)tc_get(&x.k.t, (row + i / a.d) * wk + g * a.d + i % a.d);
            vh[i] = (float)tc_get(&x.v.t, (row + i / a.d) * wk + g * a.d + i % a.d);
            dkh[i] = dvh[i] = 0.0f;
          }
          for (int64_t h = g * 2; h < g * 2 + 2; ++h) {
            for (int64_t i = 0; i < sd; ++i) {
              int64_t at = (row + i / a.d) * wq + h * a.d + i % a.d;
              qh[i] = (float)tc_get(&x.q.t, at);
              yh[i] = (float)tc_get(&x.y.t, at);
              dyh[i] = (float)tc_get(&x.dy.t, at);
            }
            for (int64_t i = 0; i < a.seq_len; ++i) {
              int64_t n = tprt_attn_visible(i, a.seq_len, causal);
              float m, l;
              for (int64_t j = 0; j < n; ++j) p[j] = tprt_attn_dot(qh + i * a.d, kh + j * a.d, a.d) * sc;
              tprt_attn_softmax_stats(p, p, n, &m, &l);
              float di = tprt_attn_dot(dyh + i * a.d, yh + i * a.d, a.d);
              for (int64_t j = 0; j < n; ++j) {
                p[j] = p[j] / l;
                ds[j] = p[j] * (tprt_attn_dot(dyh + i * a.d, vh + j * a.d, a.d) - di);
              }
              for (int64_t dd = 0; dd < a.d; ++dd) dqi[dd] = 0.0f;
              for (int64_t j = 0; j < n; ++j)
                for (int64_t dd = 0; dd < a.d; ++dd) {
                  dqi[dd] = fmaf(ds[j], kh[j * a.d + dd], dqi[dd]);
                  dkh[j * a.d + dd] = fmaf(ds[j], qh[i * a.d + dd], dkh[j * a.d + dd]);
                  dvh[j * a.d + dd] = fmaf(p[j], dyh[i * a.d + dd], dvh[j * a.d + dd]);
                }
              for (int64_t dd = 0; dd < a.d; ++dd) tc_set(&wdq.t, (row + i) * wq + h * a.d + dd, sc * dqi[dd]);
            }
          }
          for (int64_t i = 0; i < sd; ++i) {
            tc_set(&wdk.t, (row + i / a.d) * wk + g * a.d + i % a.d, sc * dkh[i]);
            tc_set(&wdv.t, (row + i / a.d) * wk + g * a.d + i % a.d, dvh[i]);
          }
        }
      int64_t bad_q = 0, bad_k = 0, bad_v = 0;
      for (int64_t i = 0; i < t * wq; ++i) bad_q += tc_bits(&x.dq.t, i) != tc_bits(&wdq.t, i);
      for (int64_t i = 0; i < t * wk; ++i) {
        bad_k += tc_bits(&x.dk.t, i) != tc_bits(&wdk.t, i);
        bad_v += tc_bits(&x.dv.t, i) != tc_bits(&wdv.t, i);
      }
      TPRT_EXPECT_EQ_I64(bad_q, 0);
      TPRT_EXPECT_EQ_I64(bad_k, 0);
      TPRT_EXPECT_EQ_I64(bad_v, 0);
      tc_free_n(3, &wdq, &wdk, &wdv);
      att_free(&x);
    }
}

// ---- Argument errors ----------------------------------------------------------------------------

TPRT_TEST(attention_grad_invalid_arguments) {
  const int bf = TPRT_DTYPE_BF16;
  // q [8, 4 heads of 16], k and v [8, 2 heads of 16], sequences of 4.
  tc_tensor_t q = tc_make(bf, 2, 8, 64), k = tc_make(bf, 2, 8, 32), v = tc_make(bf, 2, 8, 32),
              y = tc_make(bf, 2, 8, 64), dy = tc_make(bf, 2, 8, 64), dq = tc_make(bf, 2, 8, 64),
              dk = tc_make(bf, 2, 8, 32), dv = tc_make(bf, 2, 8, 32);
  tc_tensor_t q3 = tc_make(bf, 2, 8, 48), y3 = tc_make(bf, 2, 8, 48), kf = tc_make(TPRT_DTYPE_F32, 2, 8, 32),
              v7 = tc_make(bf, 2, 7, 32), yt = tc_make(bf, 2, 8, 32);
  // Every gradient present and shaped like its input.
  TPRT_EXPECT_OK(tprt_cpu_attention_grad(&q.t, &k.t, &v.t, &y.t, &dy.t, NULL, &dq.t, &dk.t, &dv.t, 4, 16, true, 0.0f));
  TPRT_EXPECT_STATUS(tprt_cpu_attention_grad(&q.t, &k.t, &v.t, &y.t, &dy.t, NULL, NULL, &dk.t, &dv.t, 4, 16, true, 0.0f),
                     TPRT_STATUS_INVALID_ARGUMENT, "attention_grad: dy, dq, dk and dv must not be NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_attention_grad(&q.t, &k.t, &v.t, &y.t, &yt.t, NULL, &dq.t, &dk.t, &dv.t, 4, 16, true, 0.0f),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "attention_grad: dy must have q's shape and dtype [8,64] bf16; got [8,32] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_attention_grad(&q.t, &k.t, &v.t, &y.t, &dy.t, NULL, &yt.t, &dk.t, &dv.t, 4, 16, true, 0.0f),
                     TPRT_STATUS_INVALID_ARGUMENT, "attention_grad: dq must have q's shape and dtype");
  TPRT_EXPECT_STATUS(tprt_cpu_attention_grad(&q.t, &k.t, &v.t, &y.t, &dy.t, NULL, &dq.t, &v7.t, &dv.t, 4, 16, true, 0.0f),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "attention_grad: dk must have k's shape and dtype [8,32] bf16; got [7,32] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_attention_grad(&q.t, &k.t, &v.t, &y.t, &dy.t, NULL, &dq.t, &dk.t, &kf.t, 4, 16, true, 0.0f),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "attention_grad: dv must have k's shape and dtype [8,32] bf16; got [8,32] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_attention_grad(&q3.t, &k.t, &v.t, &y3.t, &y3.t, NULL, &y3.t, &dk.t, &dv.t, 4, 16, true, 0.0f),
                     TPRT_STATUS_INVALID_ARGUMENT, "attention_grad: 3 query heads do not split into groups over 2");
  tc_tensor_t* all[13] = {&q, &k, &v, &y, &dy, &dq, &dk, &dv, &q3, &y3, &kf, &v7, &yt};
  for (int i = 0; i < 13; ++i) tc_free(all[i]);
}
