// Unit tests of tprt_cpu_glu_grad: the analytic float64 derivatives checked against central
// finite differences of the float64 forward (so the formulas are the forward's derivatives), the
// kernel against them for every kind, layout and dtype, the documented f32 order bit for bit,
// quick_geglu's clamps, and argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};
static const double kSqrt2OverPi = 0.79788456080286535588;

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

// The forward in float64 (as test_cpu_glu.c).
static double ref_glu(int kind, double g, double u, double alpha, double limit) {
  switch (kind) {
    case TPRT_GLU_SWIGLU:
      return g * sigmoid(g) * u;
    case TPRT_GLU_GEGLU:
      return g * sigmoid(2.0 * kSqrt2OverPi * (g + 0.044715 * g * g * g)) * u;  // 0.5·g·(1 + tanh(v))
    default:
      g = g > limit ? limit : g;
      u = u > limit ? limit : u < -limit ? -limit : u;
      return g * sigmoid(alpha * g) * (u + 1.0);
  }
}

// Its analytic derivatives times dy, independently of the kernel's formulas: d/dg and d/du.
static void ref_glu_grad(int kind, double g, double u, double dy, double alpha, double limit, double* dg, double* du) {
  double a, da, v = u;
  if (kind == TPRT_GLU_SWIGLU) {
    double s = sigmoid(g);
    a = g * s;
    da = s + g * s * (1.0 - s);
  } else if (kind == TPRT_GLU_GEGLU) {
    double z = 2.0 * kSqrt2OverPi * (g + 0.044715 * g * g * g), dz = 2.0 * kSqrt2OverPi * (1.0 + 3 * 0.044715 * g * g);
    double s = sigmoid(z);
    a = g * s;
    da = s + g * s * (1.0 - s) * dz;
  } else {
    bool gc = g > limit, uc = u > limit || u < -limit;
    g = gc ? limit : g;
    v = (uc ? (u > 0 ? limit : -limit) : u) + 1.0;
    double s = sigmoid(alpha * g);
    a = g * s;
    da = gc ? 0.0 : s + alpha * g * s * (1.0 - s);
    *du = uc ? 0.0 : dy * a;
    *dg = dy * v * da;
    return;
  }
  *du = dy * a;
  *dg = dy * v * da;
}

// Column of gate (is_up = 0) or up (1) for output column j.
static int64_t glu_col(int64_t j, int64_t f, int64_t il, int is_up) {
  if (il == 0) return is_up ? f + j : j;
  return 2 * (j / il) * il + j % il + (is_up ? il : 0);
}

// The analytic references are the derivatives of the forward: central differences with step
// 2^-20 agree to 1e-7 relative (truncation ~h², cancellation ~1e-16/h), away from the clamps.
TPRT_TEST(glu_grad_reference_matches_finite_differences) {
  uint64_t s = 99;
  const double h = 0x1p-20, alpha = 1.702, limit = 7.0;
  int checked = 0;
  for (int kind = 0; kind < 3; ++kind)
    for (int i = 0; i < 2000; ++i) {
      double g = tc_uniform(&s, -10.0, 10.0), u = tc_uniform(&s, -10.0, 10.0), dy = tc_uniform(&s, -2.0, 2.0);
      if (fabs(g - limit) < 1e-3 || fabs(fabs(u) - limit) < 1e-3) continue;
      double dg, du;
      ref_glu_grad(kind, g, u, dy, alpha, limit, &dg, &du);
      double fg = dy * (ref_glu(kind, g + h, u, alpha, limit) - ref_glu(kind, g - h, u, alpha, limit)) / (2 * h);
      double fu = dy * (ref_glu(kind, g, u + h, alpha, limit) - ref_glu(kind, g, u - h, alpha, limit)) / (2 * h);
      double scale = fabs(dy) * (1.0 + fabs(g) + fabs(u)) * (1.0 + fabs(g));
      TPRT_EXPECT_NEAR(dg, fg, 1e-7 * scale, 0.0);
      TPRT_EXPECT_NEAR(du, fu, 1e-7 * scale, 0.0);
      ++checked;
    }
  TPRT_EXPECT(checked > 5900);
}

TPRT_TEST(glu_grad_matches_f64_reference) {
  const int64_t shapes[][3] = {{3, 1, 10}, {2, 3, 128}, {1, 1, 2}, {4, 5, 66}};
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
      for (int kind = 0; kind < 3; ++kind)
        for (int64_t il = 0; il <= 32; il = il ? il * 4 : 1) {
          int64_t a = shapes[sh][0], b = shapes[sh][1], two_f = shapes[sh][2], f = two_f / 2;
          if (il && f % il) continue;
          int dt = kDtypes[d];
          tc_tensor_t x = tc_make(dt, 3, a, b, two_f), dy = tc_make(dt, 3, a, b, f), dx = tc_make(dt, 3, a, b, two_f);
          double lo = kind == TPRT_GLU_QUICK_GEGLU ? -10.0 : -5.0;
          tc_fill(&x.t, 7 + sh + (uint64_t)kind, lo, -lo);
          tc_fill(&dy.t, 70 + sh, -2.0, 2.0);
          float alpha = 1.702f, limit = 7.0f;
          TPRT_EXPECT_OK(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, kind, il, alpha, limit));
          int64_t rows = a * b;
          double* ref = calloc((size_t)(rows * two_f), sizeof(double));
          double* mag = calloc((size_t)(rows * two_f), sizeof(double));
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < f; ++j) {
              int64_t gi = r * two_f + glu_col(j, f, il, 0), ui = r * two_f + glu_col(j, f, il, 1);
              double g = tc_get(&x.t, gi), u = tc_get(&x.t, ui), gy = tc_get(&dy.t, r * f + j);
              ref_glu_grad(kind, g, u, gy, alpha, limit, &ref[gi], &ref[ui]);
              // f32 slack: the sigmoid's argument z (|z| up to ~2|g|³/10 for geglu) is rounded,
              // which moves sigmoid by up to |z|·ulp; the derivative is a sum of terms of size
              // |v|·(1 + |g|·z').
              double z = kind == TPRT_GLU_GEGLU ? 1.6 * fabs(g) * (1 + 0.045 * g * g) : 1.702 * fabs(g);
              double zp = kind == TPRT_GLU_GEGLU ? 1.6 * (1 + 0.135 * g * g) : 1.702;
              mag[gi] = fabs(gy) * (fabs(u) + 1.0) * (1.0 + fabs(g) * zp) * (1.0 + z);
              mag[ui] = fabs(gy) * fabs(g) * (1.0 + z);
            }
          char what[96];
          snprintf(what, sizeof what, "glu_grad kind=%d il=%lld %s 2F=%lld", kind, (long long)il, tprt_dtype_name(dt),
                   (long long)two_f);
          // f32 measured within 2e-7 of the scale; bf16 and f16 are dominated by their one rounding.
          tc_check_near(what, &dx.t, ref, dt == TPRT_DTYPE_F32 ? mag : NULL, dt == TPRT_DTYPE_F32 ? 1e-6 : tc_rtol(dt));
          free(ref);
          free(mag);
          tc_free(&x);
          tc_free(&dy);
          tc_free(&dx);
        }
}

// sigmoid(z) and sigmoid(-z) as docs/numerics.md defines them for the backward.
static void doc_sigmoid_pair(float z, float* p, float* q) {
  float e = tprt_expf(-fabsf(z)), d = 1.0f + e;
  *p = z >= 0.0f ? 1.0f / d : e / d;
  *q = z >= 0.0f ? e / d : 1.0f / d;
}

// The documented f32 operation order, written out with the header's primitives.
static void doc_glu_grad(int kind, float g, float u, float dy, float alpha, float limit, float* dg, float* du) {
  float p, q;
  if (kind == TPRT_GLU_SWIGLU) {
    doc_sigmoid_pair(g, &p, &q);
    *du = dy * tprt_siluf(g);
    *dg = (dy * u) * (p * fmaf(g, q, 1.0f));
  } else if (kind == TPRT_GLU_GEGLU) {
    float z = 1.59576912f * fmaf(0.044715f * (g * g), g, g), dz = 1.59576912f * fmaf(3.0f * 0.044715f, g * g, 1.0f);
    doc_sigmoid_pair(z, &p, &q);
    *du = dy * tprt_gelu_tanhf(g);
    *dg = (dy * u) * (p * fmaf(g * q, dz, 1.0f));
  } else {
    float gc = g > limit ? limit : g, uc = u > limit ? limit : u < -limit ? -limit : u;
    doc_sigmoid_pair(alpha * gc, &p, &q);
    *du = u > limit || u < -limit ? 0.0f : dy * tprt_quick_geluf(gc, alpha);
    *dg = g > limit ? 0.0f : (dy * (uc + 1.0f)) * (p * fmaf(alpha * gc, q, 1.0f));
  }
}

TPRT_TEST(glu_grad_follows_documented_order_bitwise) {
  int64_t rows = 7, f = 96;
  for (int d = 0; d < 3; ++d)
    for (int kind = 0; kind < 3; ++kind)
      for (int64_t il = 0; il <= 32; il += 32) {
        int dt = kDtypes[d];
        tc_tensor_t x = tc_make(dt, 2, rows, 2 * f), dy = tc_make(dt, 2, rows, f), dx = tc_make(dt, 2, rows, 2 * f);
        tc_tensor_t want = tc_make(dt, 2, rows, 2 * f);
        tc_fill(&x.t, 300 + (uint64_t)kind, -12.0, 12.0);
        tc_fill(&dy.t, 301, -3.0, 3.0);
        TPRT_EXPECT_OK(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, kind, il, 1.702f, 7.0f));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < f; ++j) {
            int64_t gi = r * 2 * f + glu_col(j, f, il, 0), ui = r * 2 * f + glu_col(j, f, il, 1);
            float dg, du;
            doc_glu_grad(kind, (float)tc_get(&x.t, gi), (float)tc_get(&x.t, ui), (float)tc_get(&dy.t, r * f + j),
                         1.702f, 7.0f, &dg, &du);
            tc_set(&want.t, gi, dg);
            tc_set(&want.t, ui, du);
          }
        if (!tc_same_bytes(&dx.t, &want.t))
          TPRT__FAIL("glu_grad kind=%d il=%lld %s differs from the documented order", kind, (long long)il,
                     tprt_dtype_name(dt));
        tc_free(&x);
        tc_free(&dy);
        tc_free(&dx);
        tc_free(&want);
      }
}

// quick_geglu passes no gradient through a clamp: gate above the limit, up outside ±limit; the
// limit itself passes (TE's masks g <= limit, |u| <= limit). A NaN gate gives a NaN gradient.
TPRT_TEST(glu_grad_quick_geglu_clamps) {
  const float limit = 7.0f, alpha = 1.702f;
  const float gates[5] = {8.0f, 7.0f, 1.0f, -9.0f, 1.0f}, ups[5] = {1.0f, 1.0f, 7.5f, -7.0f, -7.5f};
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)5, (int64_t)2),
              dy = tc_make(TPRT_DTYPE_F32, 2, (int64_t)5, (int64_t)1);
  tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)5, (int64_t)2);
  for (int i = 0; i < 5; ++i) {
    tc_set(&x.t, 2 * i, gates[i]);
    tc_set(&x.t, 2 * i + 1, ups[i]);
    tc_set(&dy.t, i, 1.0f);
  }
  TPRT_EXPECT_OK(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, TPRT_GLU_QUICK_GEGLU, 0, alpha, limit));
  TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, 0), 0);  // gate 8 > 7: clamped
  TPRT_EXPECT(tc_get(&dx.t, 1) > 6.9);        // ... but du = quick_gelu(7) ≈ 7
  TPRT_EXPECT(tc_get(&dx.t, 2) > 1.0);        // gate 7 == limit passes
  TPRT_EXPECT(tc_get(&dx.t, 4) > 5.0);        // up 7.5 clamped to 7: dg sees u' + 1 = 8
  TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, 5), 0);  // ... and du = 0
  TPRT_EXPECT(tc_get(&dx.t, 6) != 0.0);       // gate -9 is not clamped (only from above)
  TPRT_EXPECT(tc_get(&dx.t, 7) != 0.0);       // up -7 == -limit passes
  TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, 9), 0);  // up -7.5 < -limit: clamped
  double ds = sigmoid(1.702 * 7.0);           // dg at gate = limit, u = 1: (u+1)·a'(7)
  TPRT_EXPECT_NEAR(tc_get(&dx.t, 2), 2.0 * (ds + 1.702 * 7.0 * ds * (1.0 - ds)), 0.0, 1e-6);
  tc_set(&x.t, 0, NAN);
  TPRT_EXPECT_OK(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, TPRT_GLU_QUICK_GEGLU, 0, alpha, limit));
  TPRT_EXPECT(isnan(tc_get(&dx.t, 0)));
  tc_free(&x);
  tc_free(&dy);
  tc_free(&dx);
}

TPRT_TEST(glu_grad_invalid_arguments) {
  tc_tensor_t x7 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)7),
              x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t dy = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)4),
              dy3 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)3);
  tc_tensor_t dyf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)4),
              dx = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t dxf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)8), dx1 = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)32);
  tc_tensor_t dx7 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)7);
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, NULL, &dx.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: dy is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x7.t, &dy.t, &dx7.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: the last dimension of x must be even (2F); got x [4,7] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy3.t, &dx.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: dy must be x's shape with the last dimension halved (F=4) and x's dtype; x is [4,8] "
                     "bf16, dy is [4,3] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dyf.t, &dx.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "dy is [4,4] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dxf.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: dx must have x's shape and dtype [4,8] bf16; got [4,8] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dx1.t, 0, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: dx must be a rank-2 bf16, f16 or f32 tensor; got [32] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, 3, 0, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: kind=3 is not 0 (swiglu), 1 (geglu) or 2 (quick_geglu)");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, 0, 3, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: interleave=3 must be 0 or a positive divisor of F=4");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, 0, -2, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: interleave=-2 must be 0 or a positive divisor of F=4");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, 2, 0, -1.0f, 7.0f), TPRT_STATUS_INVALID_ARGUMENT,
                     "glu_grad: quick_geglu needs finite alpha > 0 and limit > 0; got alpha=-1, limit=7");
  TPRT_EXPECT_STATUS(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, 2, 0, 1.702f, NAN), TPRT_STATUS_INVALID_ARGUMENT,
                     "got alpha=1.702, limit=nan");
  TPRT_EXPECT_OK(tprt_cpu_glu_grad(&x.t, &dy.t, &dx.t, 1, 2, NAN, NAN));  // alpha and limit unused by geglu
  tc_tensor_t* all[] = {&x7, &x, &dy, &dy3, &dyf, &dx, &dxf, &dx1, &dx7};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
