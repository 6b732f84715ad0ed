// Unit tests of tprt_cpu_rmsnorm and tprt_cpu_layernorm: float64 references, the documented
// operation order bit for bit, batch invariance, and argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

static void ref_norm(const tprt_tensor_t* x, const tprt_tensor_t* g, const tprt_tensor_t* b, double eps, double* y) {
  int64_t m = x->dims[0], h = x->dims[1];
  for (int64_t i = 0; i < m; ++i) {
    double mean = 0.0, ss = 0.0;
    if (b) {
      for (int64_t j = 0; j < h; ++j) mean += tc_get(x, i * h + j);
      mean /= (double)h;
    }
    for (int64_t j = 0; j < h; ++j) {
      double d = tc_get(x, i * h + j) - mean;
      ss += d * d;
    }
    double r = 1.0 / sqrt(ss / (double)h + eps);
    for (int64_t j = 0; j < h; ++j)
      y[i * h + j] = (tc_get(x, i * h + j) - mean) * r * tc_get(g, j) + (b ? tc_get(b, j) : 0.0);
  }
}

TPRT_TEST(norms_match_f64_reference) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {2, 256}, {3, 300}, {2, 1000}};
  for (int d = 0; d < 3; ++d)
    for (int gd = 0; gd < 3; ++gd)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int ln = 0; ln < 2; ++ln) {
          int64_t m = shapes[s][0], h = shapes[s][1];
          tc_tensor_t x = tc_make(kDtypes[d], 2, m, h), y = tc_make(kDtypes[d], 2, m, h);
          tc_tensor_t g = tc_make(kDtypes[gd], 1, h), b = tc_make(kDtypes[gd], 1, h);
          tc_fill(&x.t, 3 + s, -2.0, 3.0);  // a nonzero mean exercises LayerNorm's centring
          tc_fill(&g.t, 4 + s, 0.5, 1.5);
          tc_fill(&b.t, 5 + s, -0.5, 0.5);
          if (ln)
            TPRT_EXPECT_OK(tprt_cpu_layernorm(&x.t, &g.t, &b.t, &y.t, 1e-5f));
          else
            TPRT_EXPECT_OK(tprt_cpu_rmsnorm(&x.t, &g.t, &y.t, 1e-5f));
          double* ref = calloc((size_t)(m * h), sizeof(double));
          ref_norm(&x.t, &g.t, ln ? &b.t : NULL, (double)1e-5f, ref);
          char what[96];
          snprintf(what, sizeof what, "%s x %s gamma %s [%lld,%lld]", ln ? "layernorm" : "rmsnorm",
                   tprt_dtype_name(kDtypes[d]), tprt_dtype_name(kDtypes[gd]), (long long)m, (long long)h);
          // Absolute slack of a few f32 roundings of the normalized magnitude (~1) per element.
          double* mag = calloc((size_t)(m * h), sizeof(double));
          for (int64_t i = 0; i < m * h; ++i) mag[i] = 4.0;
          tc_check_near(what, &y.t, ref, kDtypes[d] == TPRT_DTYPE_F32 ? mag : NULL, tc_rtol(kDtypes[d]));
          free(ref);
          free(mag);
          tc_free(&x);
          tc_free(&y);
          tc_free(&g);
          tc_free(&b);
        }
}

// docs/numerics.md's order, written out with the header's primitives.
TPRT_TEST(norms_follow_documented_order_bitwise) {
  int64_t m = 3, h = 777;
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, m, h), y = tc_make(TPRT_DTYPE_F32, 2, m, h),
              y2 = tc_make(TPRT_DTYPE_F32, 2, m, h);
  tc_tensor_t g = tc_make(TPRT_DTYPE_F32, 1, h), b = tc_make(TPRT_DTYPE_F32, 1, h);
  tc_fill(&x.t, 8, -4.0, 6.0);
  tc_fill(&g.t, 9, 0.5, 1.5);
  tc_fill(&b.t, 10, -1.0, 1.0);
  const float* xv = (const float*)x.t.data;
  const float* gv = (const float*)g.t.data;
  const float* bv = (const float*)b.t.data;
  float eps = 1e-6f, d[777];
  TPRT_EXPECT_OK(tprt_cpu_rmsnorm(&x.t, &g.t, &y.t, eps));
  TPRT_EXPECT_OK(tprt_cpu_layernorm(&x.t, &g.t, &b.t, &y2.t, eps));
  for (int64_t i = 0; i < m; ++i) {
    const float* row = xv + i * h;
    float r = 1.0f / sqrtf(tprt_row_sumsq(row, h) / (float)h + eps);
    float mean = tprt_row_sum(row, h) / (float)h;
    for (int64_t j = 0; j < h; ++j) d[j] = row[j] - mean;
    float r2 = 1.0f / sqrtf(tprt_row_sumsq(d, h) / (float)h + eps);
    for (int64_t j = 0; j < h; ++j) {
      TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, i * h + j), tprt_f32_bits((row[j] * r) * gv[j]));
      TPRT_EXPECT_EQ_BITS(tc_bits(&y2.t, i * h + j), tprt_f32_bits(((d[j] * r2) * gv[j]) + bv[j]));
    }
  }
  tc_free(&x);
  tc_free(&y);
  tc_free(&y2);
  tc_free(&g);
  tc_free(&b);
}

// A row's result does not depend on the other rows (batch invariance).
TPRT_TEST(norms_are_batch_invariant) {
  int64_t m = 6, h = 515;
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, m, h), y = tc_make(TPRT_DTYPE_BF16, 2, m, h);
  tc_tensor_t g = tc_make(TPRT_DTYPE_F32, 1, h), b = tc_make(TPRT_DTYPE_F32, 1, h);
  tc_fill(&x.t, 11, -3.0, 3.0);
  tc_fill(&g.t, 12, 0.5, 1.5);
  tc_fill(&b.t, 13, -1.0, 1.0);
  for (int ln = 0; ln < 2; ++ln) {
    TPRT_EXPECT_OK(ln ? tprt_cpu_layernorm(&x.t, &g.t, &b.t, &y.t, 1e-5f) : tprt_cpu_rmsnorm(&x.t, &g.t, &y.t, 1e-5f));
    for (int64_t i = 0; i < m; ++i) {
      tprt_tensor_t xr = x.t;
      xr.data = (uint16_t*)x.t.data + i * h;
      xr.dims[0] = 1;
      tc_tensor_t yr = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)1, h);
      TPRT_EXPECT_OK(ln ? tprt_cpu_layernorm(&xr, &g.t, &b.t, &yr.t, 1e-5f)
                        : tprt_cpu_rmsnorm(&xr, &g.t, &yr.t, 1e-5f));
      TPRT_EXPECT(memcmp(yr.t.data, (uint16_t*)y.t.data + i * h, (size_t)h * 2) == 0);
      tc_free(&yr);
    }
  }
  tc_free(&x);
  tc_free(&y);
  tc_free(&g);
  tc_free(&b);
}

TPRT_TEST(norms_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8),
              y = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t yf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t g = tc_make(TPRT_DTYPE_F32, 1, (int64_t)8), g7 = tc_make(TPRT_DTYPE_F32, 1, (int64_t)7);
  tc_tensor_t b16 = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)8);
  TPRT_EXPECT_STATUS(tprt_cpu_rmsnorm(&x.t, &g7.t, &y.t, 1e-5f), TPRT_STATUS_INVALID_ARGUMENT,
                     "rmsnorm: gamma must be [H] = [8] (x is [4,8] bf16); got [7] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_rmsnorm(&x.t, &g.t, &yf.t, 1e-5f), TPRT_STATUS_INVALID_ARGUMENT,
                     "rmsnorm: y must have x's shape and dtype [4,8] bf16; got [4,8] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_rmsnorm(&x.t, &g.t, &y.t, 0.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "rmsnorm: eps=0 must be finite and > 0");
  TPRT_EXPECT_STATUS(tprt_cpu_layernorm(&x.t, &g.t, &b16.t, &y.t, 1e-5f), TPRT_STATUS_INVALID_ARGUMENT,
                     "layernorm: beta must be [H] = [8] of gamma's dtype f32; got [8] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_layernorm(&x.t, &g.t, NULL, &y.t, 1e-5f), TPRT_STATUS_INVALID_ARGUMENT,
                     "layernorm: beta is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_layernorm(&g.t, &g.t, &g.t, &y.t, 1e-5f), TPRT_STATUS_INVALID_ARGUMENT,
                     "layernorm: x must be a rank-2 bf16, f16 or f32 tensor; got [8] f32");
  tc_free(&x);
  tc_free(&y);
  tc_free(&yf);
  tc_free(&g);
  tc_free(&g7);
  tc_free(&b16);
}

// tp.add_rmsnorm: sum is residual + y rounded once to the dtype (each element checked against its
// own f32 addition), normed is tprt_cpu_rmsnorm of that sum, bitwise; mismatched operands are refused.
TPRT_TEST(add_rmsnorm_is_the_add_then_the_norm) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {2, 300}, {4, 1000}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      const int64_t m = shapes[s][0], h = shapes[s][1];
      tc_tensor_t r = tc_make(kDtypes[d], 2, m, h), y = tc_make(kDtypes[d], 2, m, h), g = tc_make(TPRT_DTYPE_F32, 1, h);
      tc_tensor_t normed = tc_make(kDtypes[d], 2, m, h), sum = tc_make(kDtypes[d], 2, m, h),
                  want = tc_make(kDtypes[d], 2, m, h);
      tc_fill(&r.t, 21 + s, -3.0, 3.0);
      tc_fill(&y.t, 31 + s, -3.0, 3.0);
      tc_fill(&g.t, 41 + s, 0.5, 1.5);
      TPRT_EXPECT_OK(tprt_cpu_add_rmsnorm(&r.t, &y.t, &g.t, &normed.t, &sum.t, 1e-5f));
      int64_t bad = 0;
      for (int64_t i = 0; i < m * h; ++i) {
        uint32_t one = 0;
        tprt_store_elem(&one, kDtypes[d], 0, (float)tc_get(&r.t, i) + (float)tc_get(&y.t, i));
        bad += tc_bits(&sum.t, i) != tc_bits(&(tprt_tensor_t){.data = &one, .dtype = kDtypes[d]}, 0);
      }
      TPRT_EXPECT(bad == 0);
      TPRT_EXPECT_OK(tprt_cpu_rmsnorm(&sum.t, &g.t, &want.t, 1e-5f));
      TPRT_EXPECT(tc_same_bytes(&normed.t, &want.t));
      tc_free(&r), tc_free(&y), tc_free(&g), tc_free(&normed), tc_free(&sum), tc_free(&want);
    }
  tc_tensor_t a = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8), b = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)6);
  tc_tensor_t g = tc_make(TPRT_DTYPE_F32, 1, (int64_t)8), o = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8),
              o2 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  TPRT_EXPECT_STATUS(tprt_cpu_add_rmsnorm(&a.t, &b.t, &g.t, &o.t, &o2.t, 1e-5f), TPRT_STATUS_INVALID_ARGUMENT,
                     "add_rmsnorm: residual and y must be one [M,H] shape");
  tc_free(&a), tc_free(&b), tc_free(&g), tc_free(&o), tc_free(&o2);
}
