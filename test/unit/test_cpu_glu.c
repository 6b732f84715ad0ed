// Unit tests of tprt_cpu_glu: the three kinds against float64 references, the gate/up layout of
// both interleave modes bit for bit, clamping, and argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

static double ref_glu(int kind, double g, double u, double alpha, double limit) {
  switch (kind) {
    case TPRT_GLU_SWIGLU:
      return g / (1.0 + exp(-g)) * u;
    case TPRT_GLU_GEGLU: {
      double v = sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g);
      return g / (1.0 + exp(-2.0 * v)) * u;  // = 0.5·g·(1 + tanh(v))
    }
    default:
      g = g > limit ? limit : g;
      u = u > limit ? limit : u < -limit ? -limit : u;
      return g / (1.0 + exp(-alpha * g)) * (u + 1.0);
  }
}

// Column of gate (is_up = 0) or up (1) for output column j.
static int64_t glu_col(int64_t j, int64_t f, int64_t il, int is_up) {
  if (il == 0) return is_up ? f + j : j;
  return 2 * (j / il) * il + j % il + (is_up ? il : 0);
}

TPRT_TEST(glu_matches_f64_reference) {
  const int64_t shapes[][3] = {{3, 1, 10}, {2, 3, 128}, {1, 1, 2}, {4, 5, 64}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int kind = 0; kind < 3; ++kind)
        for (int64_t il = 0; il <= 32; il = il ? il * 4 : 2) {
          int64_t a = shapes[s][0], b = shapes[s][1], two_f = shapes[s][2], f = two_f / 2;
          if (il && f % il) continue;
          tc_tensor_t x = tc_make(kDtypes[d], 3, a, b, two_f), y = tc_make(kDtypes[d], 3, a, b, f);
          double lo = kind == TPRT_GLU_QUICK_GEGLU ? -10.0 : -5.0, hi = -lo;
          tc_fill(&x.t, 7 + s + (uint64_t)kind, lo, hi);
          float alpha = 1.702f, limit = 7.0f;
          TPRT_EXPECT_OK(tprt_cpu_glu(&x.t, &y.t, kind, il, alpha, limit));
          int64_t rows = a * b;
          double* ref = calloc((size_t)(rows * f), sizeof(double));
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < f; ++j)
              ref[r * f + j] = ref_glu(kind, tc_get(&x.t, r * two_f + glu_col(j, f, il, 0)),
                                       tc_get(&x.t, r * two_f + glu_col(j, f, il, 1)), alpha, limit);
          char what[96];
          snprintf(what, sizeof what, "glu kind=%d il=%lld %s 2F=%lld", kind, (long long)il,
                   tprt_dtype_name(kDtypes[d]), (long long)two_f);
          // The f32 tolerance allows GELU's argument rounding (docs/numerics.md: ~20 ulp for |x| <= 4).
          tc_check_near(what, &y.t, ref, NULL, kDtypes[d] == TPRT_DTYPE_F32 ? 1e-5 : tc_rtol(kDtypes[d]));
          free(ref);
          tc_free(&x);
          tc_free(&y);
        }
}

// The layout, bit for bit: x row [g0 g1 | u0 u1 | g2 g3 | u2 u3] with interleave 2, and the
// contiguous halves with interleave 0; each y is one f32 expression rounded once.
TPRT_TEST(glu_layout_and_formula_bits) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)8),
              y = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)4);
  const float v[8] = {-1.5f, 0.25f, 2.0f, -3.0f, 0.75f, 8.0f, 1.5f, -9.0f};
  memcpy(x.t.data, v, sizeof v);
  const int64_t gi[2][4] = {{0, 1, 2, 3}, {0, 1, 4, 5}}, ui[2][4] = {{4, 5, 6, 7}, {2, 3, 6, 7}};
  for (int m = 0; m < 2; ++m)
    for (int kind = 0; kind < 3; ++kind) {
      TPRT_EXPECT_OK(tprt_cpu_glu(&x.t, &y.t, kind, m ? 2 : 0, 1.702f, 7.0f));
      for (int j = 0; j < 4; ++j) {
        float g = v[gi[m][j]], u = v[ui[m][j]], want;
        if (kind == 0)
          want = tprt_siluf(g) * u;
        else if (kind == 1)
          want = tprt_gelu_tanhf(g) * u;
        else
          want = tprt_quick_geluf(g > 7.0f ? 7.0f : g, 1.702f) * ((u > 7.0f ? 7.0f : u < -7.0f ? -7.0f : u) + 1.0f);
        TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, j), tprt_f32_bits(want));
      }
    }
  // quick_geglu clamps: gate 8 -> 7 and up -9 -> -7 give 7·sigmoid(1.702·7)·(-6).
  TPRT_EXPECT_OK(tprt_cpu_glu(&x.t, &y.t, TPRT_GLU_QUICK_GEGLU, 2, 1.702f, 7.0f));
  TPRT_EXPECT_NEAR(tc_get(&y.t, 3), 7.0 / (1.0 + exp(-1.702 * 7.0)) * -6.0, 0.0, 1e-6);
  // A NaN gate stays NaN (no fminf).
  ((float*)x.t.data)[0] = NAN;
  TPRT_EXPECT_OK(tprt_cpu_glu(&x.t, &y.t, TPRT_GLU_QUICK_GEGLU, 0, 1.702f, 7.0f));
  TPRT_EXPECT(isnan(tc_get(&y.t, 0)));
  tc_free(&x);
  tc_free(&y);
}

TPRT_TEST(glu_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)7),
              x2 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t y = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)4),
              y3 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)3);
  tc_tensor_t yf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)4);
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x.t, &y.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu: the last dimension of x must be even (2F); got x [4,7] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x2.t, &y3.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu: y must be x's shape with the last dimension halved (F=4) and x's dtype; x is [4,8] bf16, y "
                     "is [4,3] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x2.t, &yf.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT, "y is [4,4] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x2.t, &y.t, 5, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu: kind=5 is not 0 (swiglu), 1 (geglu) or 2 (quick_geglu)");
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x2.t, &y.t, 0, 3, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu: interleave=3 must be 0 or a positive divisor of F=4");
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x2.t, &y.t, 2, 0, 0.0f, 7.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu: quick_geglu needs finite alpha > 0 and limit > 0; got alpha=0, limit=7");
  TPRT_EXPECT_STATUS(tprt_cpu_glu(&x2.t, &y.t, 2, 0, 1.702f, INFINITY), TPRT_STATUS_INVALID_ARGUMENT,
                     "got alpha=1.702, limit=inf");
  TPRT_EXPECT_OK(tprt_cpu_glu(&x2.t, &y.t, 0, 0, NAN, NAN));  // alpha and limit are unused by swiglu
  tc_free(&x);
  tc_free(&x2);
  tc_free(&y);
  tc_free(&y3);
  tc_free(&yf);
}
