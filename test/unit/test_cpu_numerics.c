// Unit tests of kernels/cpu/tprt_numerics.h: RNE storage conversions, the OCP low-precision
// formats (against the research note's reference encoder, copied verbatim below), special
// functions (max ulp against double, reported and bounded; frozen bits), the canonical K
// accumulation and row reduction (exact bit patterns), and Philox4x32-10 (Random123 vectors).
//
// `test_cpu_numerics special_function_accuracy` prints the accuracy table of docs/numerics.md.
// TPRT_EXHAUSTIVE=1 in the environment checks every f32 bit pattern in the conversion tests;
// TPRT_ULP_STRIDE=n measures the special functions on every n-th float (default 61).
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "test_cpu_util.h"
#include "tprt_numerics.h"
#include "tprt_test.h"

static float f_bits(uint32_t u) { return tprt_f32_from_bits(u); }
static int exhaustive(void) { return getenv("TPRT_EXHAUSTIVE") != NULL; }

// ------------------------------------------------------------------------------------------------
// bf16 / f16
// ------------------------------------------------------------------------------------------------

// Independent RNE reference: pick the nearer of the two bf16 neighbours in double arithmetic.
static uint16_t ref_f32_to_bf16(float f) {
  uint32_t u = tprt_f32_bits(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  uint16_t lo = (uint16_t)(u >> 16);  // truncation toward zero
  if ((u & 0xFFFF) == 0) return lo;
  uint16_t hi = (uint16_t)(lo + 1);  // next magnitude (may be inf)
  double dl = fabs((double)tprt_bf16_to_f32(lo) - (double)f);
  double dh = fabs((double)tprt_bf16_to_f32(hi) - (double)f);
  if ((hi & 0x7FFF) == 0x7F80) dh = fabs(ldexp(1.0, 128) - fabs((double)f));  // overflow threshold
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

TPRT_TEST(bf16_rne_edge_cases) {
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(1.0f), 0x3F80);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x3F808000)), 0x3F80);  // tie, even below
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x3F818000)), 0x3F82);  // tie, even above
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x3F808001)), 0x3F81);  // above the tie
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x3F807FFF)), 0x3F80);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(-0.0f), 0x8000);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(INFINITY), 0x7F80);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(-INFINITY), 0xFF80);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(FLT_MAX), 0x7F80);             // rounds up past the largest bf16
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x7F7F7FFF)), 0x7F7F);  // just below the overflow tie
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x7FC00001)), 0x7FC0);  // quiet NaN
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x7F800001)), 0x7FC0);  // signalling NaN made quiet, not inf
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0xFFA50000)), 0xFFE5);  // sign and payload kept
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x00010000)), 0x0001);  // subnormal
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x00008000)), 0x0000);  // subnormal tie to even (0)
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x00018000)), 0x0002);  // subnormal tie to even (2)
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f_bits(0x007FFFFF)), 0x0080);  // largest subnormal -> smallest normal
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = tprt_bf16_to_f32((uint16_t)h);
    if (!isnan(f)) TPRT_EXPECT_EQ_BITS(tprt_f32_to_bf16(f), h);
  }
}

TPRT_TEST(bf16_matches_reference_on_sampled_bits) {
  uint64_t step = exhaustive() ? 1 : 4099, bad = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += step) {
    float f = f_bits((uint32_t)u);
    if (tprt_f32_to_bf16(f) != ref_f32_to_bf16(f) && bad++ < 5)
      TPRT__FAIL("bf16(0x%08x) = 0x%04x, reference 0x%04x", (unsigned)u, tprt_f32_to_bf16(f), ref_f32_to_bf16(f));
  }
  TPRT_EXPECT_EQ_I64(bad, 0);
}

TPRT_TEST(f16_rne_edge_cases) {
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(1.0f), 0x3C00);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(65504.0f), 0x7BFF);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(f_bits(0x477FEFFF)), 0x7BFF);  // just below 65520
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(65520.0f), 0x7C00);            // the overflow tie rounds to inf
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(-1e10f), 0xFC00);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(INFINITY), 0x7C00);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);         // smallest subnormal
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);         // tie to even: zero
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(f_bits(0x33000001)), 0x0001);        // just above the tie
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);         // tie between 1 and 2 units: 2
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(ldexpf(5.0f, -25)), 0x0002);         // tie between 2 and 3 units: 2
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(ldexpf(1023.5f, -24)), 0x0400);      // rounds into the first normal
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00);  // tie, even below
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(1.0f + ldexpf(3.0f, -11)), 0x3C02);  // tie, even above
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(-0.0f), 0x8000);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(ldexpf(1.0f, -140)), 0x0000);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(f_bits(0x7FC00000)), 0x7E00);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(f_bits(0x7F800001)), 0x7E00);  // signalling NaN made quiet
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(f_bits(0xFFD02000)), 0xFE81);  // sign and top payload kept
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = tprt_f16_to_f32((uint16_t)h);
    if (!isnan(f)) TPRT_EXPECT_EQ_BITS(tprt_f32_to_f16(f), h);
  }
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_f16_to_f32(0x0001)), tprt_f32_bits(ldexpf(1.0f, -24)));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_f16_to_f32(0x03FF)), tprt_f32_bits(ldexpf(1023.0f, -24)));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_f16_to_f32(0xFC00)), 0xFF800000u);
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 conversions (IEEE RNE) are an independent reference.
TPRT_TEST(f16_matches_compiler_float16) {
  uint64_t step = exhaustive() ? 1 : 4099, bad = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += step) {
    float f = f_bits((uint32_t)u);
    if (isnan(f)) continue;
    _Float16 h = (_Float16)f;
    uint16_t hb;
    memcpy(&hb, &h, 2);
    if (tprt_f32_to_f16(f) != hb && bad++ < 5)
      TPRT__FAIL("f16(0x%08x) = 0x%04x, _Float16 0x%04x", (unsigned)u, tprt_f32_to_f16(f), hb);
  }
  for (uint32_t b = 0; b < 0x10000; ++b) {
    _Float16 h;
    uint16_t hb = (uint16_t)b;
    memcpy(&h, &hb, 2);
    if (!isnan((float)h)) TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_f16_to_f32(hb)), tprt_f32_bits((float)h));
  }
  TPRT_EXPECT_EQ_I64(bad, 0);
}
#endif

// ------------------------------------------------------------------------------------------------
// OCP formats. The reference below is the research note's encoder, verbatim (frexpf, ldexpf and
// nearbyintf under the default FE_TONEAREST); tprt_numerics.h's integer version must match it.
// ------------------------------------------------------------------------------------------------

/* RNE+satfinite encode (brute-force-checked on 2M values). (eb,mb,bias,maxv): E4M3 (4,3,7,448) E5M2 (5,2,15,57344) E2M1
 * (2,1,1,6) */
static uint8_t f32_to_fpx(float x, int eb, int mb, int bias, float maxv) {
  uint8_t s = signbit(x) ? 1u << (eb + mb) : 0;     /* FP4: sign is bit 3 */
  if (isnan(x)) return s | ((1u << (eb + mb)) - 1); /* E4M3 0x7F; E5M2: check cuda_fp8.h; E2M1 has no NaN */
  float a = fminf(fabsf(x), maxv);
  int e;
  frexpf(a, &e);
  int E = e - 1;
  if (a == 0.f || E < 1 - bias) E = 1 - bias;                           /* subnormal quantum 2^(1-bias-mb) */
  float q = fminf(ldexpf(nearbyintf(ldexpf(a, mb - E)), E - mb), maxv); /* FE_TONEAREST; may carry up a binade */
  if (q == 0.f) return s;
  frexpf(q, &e);
  E = e - 1;
  if (E < 1 - bias) return s | (uint8_t)ldexpf(q, bias - 1 + mb); /* exp field 0 */
  return s | (uint8_t)((E + bias) << mb) | (uint8_t)(ldexpf(q, mb - E) - (1 << mb));
}

static int check_fpx_against_note(float f) {
  int bad = 0;
  if (tprt_f32_to_e4m3(f) != f32_to_fpx(f, 4, 3, 7, 448.f)) bad |= 1;
  if (tprt_f32_to_e5m2(f) != f32_to_fpx(f, 5, 2, 15, 57344.f)) bad |= 2;
  if (tprt_f32_to_e2m1(f) != f32_to_fpx(f, 2, 1, 1, 6.f)) bad |= 4;
  return bad;
}

TPRT_TEST(fp8_fp4_encoders_match_research_note) {
  uint64_t step = exhaustive() ? 1 : 997, bad = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += step) {
    int b = check_fpx_against_note(f_bits((uint32_t)u));
    if (b && bad++ < 5) TPRT__FAIL("encoders disagree with the note on 0x%08x (mask %d)", (unsigned)u, b);
  }
  // Every grid point, every midpoint and their neighbours, for each format.
  float (*dec[3])(uint8_t) = {tprt_e4m3_to_f32, tprt_e5m2_to_f32, tprt_e2m1_to_f32};
  int codes[3] = {256, 256, 16};
  for (int fmt = 0; fmt < 3; ++fmt)
    for (int c = 0; c + 1 < codes[fmt]; ++c) {
      float v0 = dec[fmt]((uint8_t)c), v1 = dec[fmt]((uint8_t)(c + 1));
      if (!isfinite(v0) || !isfinite(v1)) continue;
      float pts[3] = {v0, (float)(((double)v0 + (double)v1) / 2), v1};
      for (int p = 0; p < 3; ++p)
        for (int d = -2; d <= 2; ++d) {
          uint32_t u = tprt_f32_bits(pts[p]) + (uint32_t)d;
          int b = check_fpx_against_note(f_bits(u));
          if (b && bad++ < 5) TPRT__FAIL("encoders disagree with the note on 0x%08x (mask %d)", (unsigned)u, b);
        }
    }
  TPRT_EXPECT_EQ_I64(bad, 0);
}

TPRT_TEST(e4m3_bit_patterns) {
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(1.0f), 0x38);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(-2.0f), 0xC0);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(448.0f), 0x7E);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(464.0f), 0x7E);  // satfinite: clamped before rounding
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(1e9f), 0x7E);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(INFINITY), 0x7E);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(-INFINITY), 0xFE);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(NAN), 0x7F);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(-NAN), 0xFF);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(1.0625f), 0x38);             // tie between 1 and 1.125: even
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(1.1875f), 0x3A);             // tie between 1.125 and 1.25: even
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(ldexpf(1.0f, -9)), 0x01);    // smallest subnormal
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00);   // tie to zero
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(ldexpf(3.0f, -10)), 0x02);   // tie between 1 and 2 units
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(ldexpf(-1.0f, -12)), 0x80);  // underflow keeps the sign
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(ldexpf(15.0f, -10)), 0x08);  // 7.5 units rounds up to 2^-6
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e4m3_to_f32(0x7E)), tprt_f32_bits(448.0f));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e4m3_to_f32(0x01)), tprt_f32_bits(ldexpf(1.0f, -9)));
  TPRT_EXPECT(isnan(tprt_e4m3_to_f32(0x7F)) && isnan(tprt_e4m3_to_f32(0xFF)));
  for (int c = 0; c < 256; ++c) TPRT_EXPECT_EQ_BITS(tprt_f32_to_e4m3(tprt_e4m3_to_f32((uint8_t)c)), c);
}

TPRT_TEST(e5m2_bit_patterns) {
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(1.0f), 0x3C);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(57344.0f), 0x7B);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(61440.0f), 0x7B);  // the tie above the max saturates
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(INFINITY), 0x7B);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(-INFINITY), 0xFB);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(NAN), 0x7F);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(1.125f), 0x3C);  // tie between 1 and 1.25: even
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(1.375f), 0x3E);  // tie between 1.25 and 1.5: even
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(ldexpf(1.0f, -16)), 0x01);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e5m2(ldexpf(1.0f, -17)), 0x00);
  TPRT_EXPECT(isinf(tprt_e5m2_to_f32(0x7C)) && tprt_e5m2_to_f32(0xFC) < 0);
  TPRT_EXPECT(isnan(tprt_e5m2_to_f32(0x7D)) && isnan(tprt_e5m2_to_f32(0xFF)));
  for (int c = 0; c < 256; ++c) {
    float v = tprt_e5m2_to_f32((uint8_t)c);
    uint8_t back = tprt_f32_to_e5m2(v);
    if (isinf(v))
      TPRT_EXPECT_EQ_BITS(back, (c & 0x80) | 0x7B);  // satfinite
    else if (isnan(v))
      TPRT_EXPECT_EQ_BITS(back, (c & 0x80) | 0x7F);
    else
      TPRT_EXPECT_EQ_BITS(back, c);
  }
}

TPRT_TEST(e2m1_ties_from_research_note) {
  // The ties of TE's reference cast_to_fp4x2, listed in the note.
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float out[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
  for (int i = 0; i < 7; ++i) {
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e2m1_to_f32(tprt_f32_to_e2m1(in[i]))), tprt_f32_bits(out[i]));
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e2m1_to_f32(tprt_f32_to_e2m1(-in[i]))), tprt_f32_bits(-out[i]));
  }
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(6.0f), 0x7);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(100.0f), 0x7);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(-INFINITY), 0xF);
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(NAN), 0x7);    // no NaN in E2M1: the note's encoder gives +-6
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(-0.1f), 0x8);  // negative zero
  TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(0.5f), 0x1);
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    float v = tprt_e2m1_to_f32((uint8_t)c);
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(v), tprt_f32_bits(c & 8 ? -grid[c & 7] : grid[c & 7]));
    TPRT_EXPECT_EQ_BITS(tprt_f32_to_e2m1(v), c);
  }
}

TPRT_TEST(e8m0_rceil_and_reciprocal) {
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(1.0f), 127);
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(1.5f), 128);  // rounds up
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(0.75f), 127);
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(f_bits(0x00400000)), 0);  // 2^-127 is representable
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(f_bits(0x00400001)), 1);
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(f_bits(0x00000001)), 0);
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(0.0f), 0);
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(FLT_MAX), 0xFE);  // satfinite
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(INFINITY), 0xFE);
  TPRT_EXPECT_EQ_BITS(tprt_e8m0_rceil(NAN), 0xFF);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e8m0_rcp(127)), tprt_f32_bits(1.0f));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e8m0_rcp(0)), tprt_f32_bits(ldexpf(1.0f, 127)));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e8m0_rcp(254)), 0x00400000u);
  TPRT_EXPECT(isnan(tprt_e8m0_rcp(255)));
  for (int e = 0; e < 255; ++e) {
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_e8m0_to_f32((uint8_t)e)), tprt_f32_bits(ldexpf(1.0f, e - 127)));
    if (e < 254) TPRT_EXPECT(tprt_e8m0_to_f32((uint8_t)e) * tprt_e8m0_rcp((uint8_t)e) == 1.0f);
  }
  TPRT_EXPECT(isnan(tprt_e8m0_to_f32(255)));
}

// ------------------------------------------------------------------------------------------------
// Special functions
// ------------------------------------------------------------------------------------------------

// |got - ref| in units of the f32 ulp at ref (2^-149 below the normal range).
static double ulp_error(float got, double ref) {
  if (isnan(ref)) return isnan(got) ? 0.0 : INFINITY;
  float rf = (float)ref;
  if (isinf(got) || isinf(rf)) return got == rf ? 0.0 : INFINITY;
  int e;
  frexp(fabs(ref), &e);
  double ulp = ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
  return fabs((double)got - ref) / ulp;
}

typedef struct {
  const char* name;
  float (*f)(float);
  double (*ref)(double);
  double lo, hi;  // measured range (both signs when lo == -hi)
  double bound;   // asserted max ulp
} special_case_t;

static float f_gelu(float x) { return tprt_gelu_tanhf(x); }
static double d_exp(double x) { return exp(x); }
static double d_log(double x) { return log(x); }
static double d_tanh(double x) { return tanh(x); }
static double d_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double d_silu(double x) { return x / (1.0 + exp(-x)); }
// The tanh form 0.5·x·(1 + tanh(u)), evaluated in double as x·sigmoid(2u) to avoid the
// cancellation of 1 + tanh(u) for negative u.
static double d_gelu(double x) {
  double u = sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
  return x / (1.0 + exp(-2.0 * u));
}
static double d_rsqrt(double x) { return 1.0 / sqrt(x); }

static double max_ulp(const special_case_t* c, uint32_t stride, double* worst_x) {
  double worst = 0.0;
  *worst_x = 0.0;
  // Walk the f32 bit patterns of [lo, hi]: positive patterns up, negative patterns up.
  for (int sign = 0; sign < 2; ++sign) {
    double a = sign ? -c->lo : c->hi;  // the magnitude bound on this side
    if (a <= 0) continue;
    uint32_t top = tprt_f32_bits((float)a);
    for (uint64_t u = 0; u <= top; u += stride) {
      float x = f_bits((uint32_t)u | (sign ? 0x80000000u : 0u));
      if (x < c->lo || x > c->hi) continue;
      double err = ulp_error(c->f(x), c->ref((double)x));
      if (err > worst) {
        worst = err;
        *worst_x = x;
      }
    }
  }
  return worst;
}

TPRT_TEST(special_function_accuracy) {
  const special_case_t cases[] = {
      {"exp", tprt_expf, d_exp, -104.0, 88.7, 1.0},
      {"tanh", tprt_tanhf, d_tanh, -20.0, 20.0, 2.0},
      {"sigmoid", tprt_sigmoidf, d_sigmoid, -104.0, 104.0, 2.5},
      // Below -87.3, e^x is subnormal and silu = x·sigmoid(x) keeps only its absolute accuracy.
      {"silu", tprt_siluf, d_silu, -87.0, 100.0, 3.5},
      {"gelu_tanh", f_gelu, d_gelu, -4.0, 4.0, 24.0},
      {"rsqrt", tprt_rsqrtf, d_rsqrt, 0.0, 3.0e38, 1.5},
      {"log", tprt_logf, d_log, 0.0, FLT_MAX, 1.0},
  };
  const char* env = getenv("TPRT_ULP_STRIDE");
  uint32_t stride = env ? (uint32_t)strtoul(env, NULL, 10) : 61;
  if (stride == 0) stride = 1;
  printf("special functions: max error in f32 ulp against double, every %u-th float in range\n", stride);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    double wx;
    double e = max_ulp(&cases[i], stride, &wx);
    printf("  %-18s [%g, %g]: %.3f ulp (at x = %.9g)\n", cases[i].name, cases[i].lo, cases[i].hi, e, wx);
    if (!(e <= cases[i].bound)) TPRT__FAIL("%s: %.3f ulp exceeds the bound %.1f", cases[i].name, e, cases[i].bound);
  }
  // GELU for large negative x: the rounding of the argument v = 1.5958·(x + 0.044715·x³) is
  // amplified by |v| (sigmoid's relative condition number); bound the error relative to that.
  double worst = 0.0, worst_x = 0.0;
  for (uint32_t u = 0; u <= tprt_f32_bits(10.0f); u += stride)
    for (int sign = 0; sign < 2; ++sign) {
      float x = sign ? -f_bits(u) : f_bits(u);
      double v = 1.5957691216057308 * (x + 0.044715 * (double)x * x * x);
      double e = ulp_error(f_gelu(x), d_gelu(x)) / (2.0 + fabs(v));
      if (e > worst) {
        worst = e;
        worst_x = x;
      }
    }
  printf("  %-18s [-10, 10]: %.3f ulp per unit of (2 + |v|) (at x = %.9g)\n", "gelu_tanh", worst, worst_x);
  TPRT_EXPECT(worst <= 2.5);
}

TPRT_TEST(special_function_values) {
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_expf(0.0f)), tprt_f32_bits(1.0f));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_expf(-0.0f)), tprt_f32_bits(1.0f));
  TPRT_EXPECT(tprt_expf(INFINITY) == INFINITY);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_expf(-INFINITY)), 0);
  TPRT_EXPECT(isnan(tprt_expf(NAN)));
  TPRT_EXPECT(tprt_expf(88.7f) < INFINITY && tprt_expf(88.75f) == INFINITY && tprt_expf(89.0f) == INFINITY);
  TPRT_EXPECT(tprt_expf(-103.0f) > 0.0f && tprt_expf(-103.0f) < FLT_MIN);  // a subnormal result
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_expf(-104.5f)), 0);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_tanhf(-0.0f)), 0x80000000u);
  TPRT_EXPECT(tprt_tanhf(INFINITY) == 1.0f && tprt_tanhf(-INFINITY) == -1.0f && tprt_tanhf(10.0f) == 1.0f);
  TPRT_EXPECT(isnan(tprt_tanhf(NAN)));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_sigmoidf(0.0f)), tprt_f32_bits(0.5f));
  TPRT_EXPECT(tprt_sigmoidf(INFINITY) == 1.0f && tprt_sigmoidf(-INFINITY) == 0.0f);
  TPRT_EXPECT(tprt_sigmoidf(-100.0f) > 0.0f);  // e/(1+e) keeps tiny results
  TPRT_EXPECT(isnan(tprt_sigmoidf(NAN)) && isnan(tprt_siluf(NAN)) && isnan(tprt_gelu_tanhf(NAN)));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_siluf(-0.0f)), 0x80000000u);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_gelu_tanhf(0.0f)), 0);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_rsqrtf(4.0f)), tprt_f32_bits(0.5f));
  TPRT_EXPECT(tprt_rsqrtf(0.0f) == INFINITY && isnan(tprt_rsqrtf(-1.0f)));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_logf(1.0f)), 0);
  TPRT_EXPECT(tprt_logf(0.0f) == -INFINITY && tprt_logf(-0.0f) == -INFINITY && tprt_logf(INFINITY) == INFINITY);
  TPRT_EXPECT(isnan(tprt_logf(-1.0f)) && isnan(tprt_logf(NAN)) && isnan(tprt_logf(-INFINITY)));
  // Subnormals: the smallest is 2^-149.
  TPRT_EXPECT(fabs((double)tprt_logf(f_bits(1)) - (-149.0 * log(2.0))) < 1e-5);
  TPRT_EXPECT(fabs((double)tprt_logf(f_bits(0x00400000u)) - (-127.0 * log(2.0))) < 1e-5);
}

// Frozen bits: a hash of each function over 100003 inputs in [-30, 30]. A change to any of these
// changes tpc's exact-mode bits everywhere (CPU and CUDA) and must be deliberate: update the
// constants and say so in docs/numerics.md.
TPRT_TEST(special_function_frozen_bits) {
  float (*fs[])(float) = {tprt_expf, tprt_tanhf, tprt_sigmoidf, tprt_siluf, f_gelu, tprt_rsqrtf, tprt_logf};
  const char* names[] = {"exp", "tanh", "sigmoid", "silu", "gelu_tanh", "rsqrt", "log"};
  const uint64_t expected[] = {0x134694127cea1585ull, 0x7d8e8f3354707588ull, 0x391e18de417b241bull,
                               0x1396d6722ea50cd9ull, 0xe0afe072faedf0beull, 0x60d4fdbe5998fe4cull,
                               0xde9cab301139ac15ull};
  for (int f = 0; f < 7; ++f) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int i = 0; i <= 100002; ++i) {
      float x = -30.0f + 60.0f * (float)i / 100002.0f;
      if (f >= 5) x = fabsf(x) + 1e-3f;
      uint32_t b = tprt_f32_bits(fs[f](x));
      for (int k = 0; k < 4; ++k) h = (h ^ ((b >> (8 * k)) & 0xFF)) * 0x100000001B3ull;
    }
    printf("  frozen %-10s 0x%016llx\n", names[f], (unsigned long long)h);
    TPRT_EXPECT_EQ_BITS(h, expected[f]);
  }
}

// ------------------------------------------------------------------------------------------------
// Canonical K accumulation and row reduction
// ------------------------------------------------------------------------------------------------

TPRT_TEST(kacc_tree_order_differs_from_sequential) {
  // K=8, 4 chunks of 2: chunks (1+0), (2^-24+2^-24), 0, 0; the tree adds 1 + 2^-23 = 0x3F800001,
  // while a sequential sum loses each 2^-24 against 1 (ties to even) and stays 1.0.
  const float x[8] = {1.0f, 0.0f, 0x1p-24f, 0x1p-24f, 0, 0, 0, 0};
  const float w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 8, 4)), 0x3F800001u);
  float seq = 0.0f;
  for (int k = 0; k < 8; ++k) seq = fmaf(x[k], w[k], seq);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(seq), 0x3F800000u);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 8, 1)), 0x3F800000u);
  // chunks=8: (1+0)+(2^-24+2^-24) at level 2 as well.
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 8, 8)), 0x3F800001u);
  // The pairwise tree of 4 partials is ((p0+p1)+(p2+p3)): with p = 1, -1, 2^-30, 2^-30 it is
  // exactly 2^-29, where ((p0+p2)+...) or a left-to-right sum of (p0+p2) would differ.
  float p[4] = {1.0f, -1.0f, 0x1p-30f, 0x1p-30f};
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_kacc_tree(p, 4)), tprt_f32_bits(0x1p-29f));
  float q[4] = {1.0f, 0x1p-24f, 0x1p-24f, -1.0f};  // (1 + 2^-24) + (2^-24 - 1) = 1 + (-1 + 2^-24) = 2^-24
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_kacc_tree(q, 4)), tprt_f32_bits(0x1p-24f));
}

TPRT_TEST(kacc_chunk_uses_fma) {
  // acc = -(1+2^-11); fmaf((1+2^-12), (1+2^-12), acc) = 2^-24 exactly, a separate multiply and add
  // would round the product to 1+2^-11 and give 0.
  const float x[2] = {1.0f, 1.0f + 0x1p-12f};
  const float w[2] = {-(1.0f + 0x1p-11f), 1.0f + 0x1p-12f};
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 2, 1)), tprt_f32_bits(0x1p-24f));
  volatile float prod = x[1] * w[1];
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(x[0] * w[0] + prod), 0);
}

TPRT_TEST(kacc_padding_rule) {
  // K=9, 8 chunks: size ceil(9/8)=2, chunks [0,2) [2,4) [4,6) [6,8) [8,9) and three empty ones.
  TPRT_EXPECT_EQ_I64(tprt_kacc_chunk_size(9, 8), 2);
  TPRT_EXPECT_EQ_I64(tprt_kacc_chunk_size(64, 8), 8);
  TPRT_EXPECT_EQ_I64(tprt_kacc_chunk_size(0, 8), 0);
  // Padding terms are fmaf(0, 0, acc): they turn a -0 partial into +0. With K=2 and one chunk the
  // two underflowing negative products leave -0; with 4 chunks the empty ones are +0.
  const float x[2] = {-1e-30f, -1e-30f}, w[2] = {1e-30f, 1e-30f};
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 2, 1)), 0x80000000u);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 2, 2)), 0x80000000u);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_dot_canonical(x, w, 2, 4)), 0x00000000u);
  // K=3 with 2 chunks of 2: the short second chunk gets + 0.0f, so its -0 becomes +0.
  const float x3[3] = {1.0f, 1.0f, -1e-30f}, w3[3] = {-1.0f, 1.0f, 1e-30f};
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_kacc_chunk(x3, w3, 2, 3, 2)), 0x00000000u);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_kacc_chunk(x3, w3, 2, 3, 1)), 0x80000000u);
}

// An independent formulation of the row reduction: a warp of 32 shuffle-down steps per group
// (lane j reads lane j+s before anyone writes, as __shfl_down_sync does), then the groups.
static float ref_row_reduce(const float* v, int64_t n, int squares) {
  float lane[256];
  for (int j = 0; j < 256; ++j) {
    float acc = 0.0f;
    for (int64_t i = j; i < n; i += 256) acc = squares ? fmaf(v[i], v[i], acc) : acc + v[i];
    lane[j] = acc;
  }
  float group[8];
  for (int g = 0; g < 8; ++g) {
    float reg[32], next[32];
    for (int j = 0; j < 32; ++j) reg[j] = lane[32 * g + j];
    for (int s = 16; s >= 1; s /= 2) {
      for (int j = 0; j < 32; ++j) next[j] = j + s < 32 ? reg[j] + reg[j + s] : reg[j];
      memcpy(reg, next, sizeof reg);
    }
    group[g] = reg[0];
  }
  for (int s = 4; s >= 1; s /= 2) {
    float next[8];
    for (int j = 0; j < 8; ++j) next[j] = j + s < 8 ? group[j] + group[j + s] : group[j];
    memcpy(group, next, sizeof group);
  }
  return group[0];
}

TPRT_TEST(row_reduction_exact_bits) {
  // Lanes 0, 1, 16, 17 hold 1, 2^-24, 2^-24, 2^-24: step s=16 gives lane0 = 1 (tie), lane1 =
  // 2^-23; step s=1 gives 1 + 2^-23. A sequential sum stays 1.0.
  float v[18] = {0};
  v[0] = 1.0f;
  v[1] = v[16] = v[17] = 0x1p-24f;
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sum(v, 18)), 0x3F800001u);
  float seq = 0.0f;
  for (int i = 0; i < 18; ++i) seq += v[i];
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(seq), 0x3F800000u);
  // In-warp order 16, 8, 4, 2, 1 (not 1, 2, ..., 16): lanes 0, 16, 24 hold 1, 2^-24, 2^-24. s=16
  // gives lane0 = 1 (tie) and lane8 = 2^-24, s=8 gives lane0 = 1 (tie): 1.0. The reversed order
  // would first make lane16 = 2^-23 and end at 1 + 2^-23.
  float w[25] = {0};
  w[0] = 1.0f;
  w[16] = w[24] = 0x1p-24f;
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sum(w, 25)), 0x3F800000u);
  // Across groups, offsets 4, 2, 1: groups 0, 4, 6 hold 1, 2^-24, 2^-24, so the tree computes
  // ((g0+g4)+(g2+g6)) + ... = (1 + 2^-24) + 2^-24 = 1.0, where offsets 1, 2, 4 would compute
  // 1 + (g4+g6) = 1 + 2^-23.
  float u[256] = {0};
  u[0] = 1.0f;
  u[32 * 4] = u[32 * 6] = 0x1p-24f;
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sum(u, 256)), 0x3F800000u);
  // Lane j accumulates j, j+256, ... in order: lane 0 gets 1 + 2^-24 + 2^-24 = 1.
  float t3[513] = {0};
  t3[0] = 1.0f;
  t3[256] = t3[512] = 0x1p-24f;
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sum(t3, 513)), 0x3F800000u);
  // Random rows of many lengths against the independent formulation.
  uint64_t s = 7;
  static float r[3000];
  for (int t = 0; t < 300; ++t) {
    int64_t n = (int64_t)(tc_next(&s) % 3000) + (t < 5 ? 0 : 1);
    for (int64_t i = 0; i < n; ++i)
      r[i] = (float)tc_uniform(&s, -1.0, 1.0) * (float)ldexp(1.0, (int)(tc_next(&s) % 20));
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sum(r, n)), tprt_f32_bits(ref_row_reduce(r, n, 0)));
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sumsq(r, n)), tprt_f32_bits(ref_row_reduce(r, n, 1)));
  }
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_row_sum(r, 0)), 0);
}

// ------------------------------------------------------------------------------------------------
// Philox
// ------------------------------------------------------------------------------------------------

TPRT_TEST(philox_random123_known_answers) {
  const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                              {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu},
                              {0x243F6A88u, 0x85A308D3u, 0x13198A2Eu, 0x03707344u}};
  const uint32_t key[3][2] = {{0, 0}, {0xFFFFFFFFu, 0xFFFFFFFFu}, {0xA4093822u, 0x299F31D0u}};
  const uint32_t want[3][4] = {{0x6627E8D5u, 0xE169C58Du, 0xBC57AC4Cu, 0x9B00DBD8u},
                               {0x408F276Du, 0x41C83B0Eu, 0xA20BC7C6u, 0x6D5451FDu},
                               {0xD16CFE09u, 0x94FDCCEBu, 0x5001E420u, 0x24126EA1u}};
  for (int i = 0; i < 3; ++i) {
    uint32_t out[4];
    tprt_philox4x32_10(ctr[i], key[i], out);
    for (int j = 0; j < 4; ++j) TPRT_EXPECT_EQ_BITS(out[j], want[i][j]);
  }
}

TPRT_TEST(philox_uniform_layout_and_range) {
  // Element i is word i%4 of block i/4 with key (seed lo, hi) and counter (block lo, hi, stream lo, hi).
  uint64_t seed = 0x0123456789ABCDEFull, stream = 0xFEDCBA9876543210ull, i = 0x100000007ull;
  uint32_t key[2] = {0x89ABCDEFu, 0x01234567u}, ctr[4] = {0x40000001u, 0, 0x76543210u, 0xFEDCBA98u}, out[4];
  tprt_philox4x32_10(ctr, key, out);
  TPRT_EXPECT_EQ_BITS(tprt_philox_bits(seed, stream, i), out[3]);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(tprt_philox_uniform(seed, stream, i)),
                      tprt_f32_bits((float)(out[3] >> 8) * 0x1p-24f));
  double sum = 0.0;
  float lo = 1.0f, hi = 0.0f;
  for (uint64_t k = 0; k < 100000; ++k) {
    float u = tprt_philox_uniform(1, 2, k);
    sum += u;
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
  }
  TPRT_EXPECT(lo >= 0.0f && hi < 1.0f);
  TPRT_EXPECT_NEAR(sum / 100000.0, 0.5, 0.005, 0.0);
  TPRT_EXPECT(tprt_philox_uniform(1, 2, 5) != tprt_philox_uniform(1, 3, 5));
  TPRT_EXPECT(tprt_philox_uniform(1, 2, 5) != tprt_philox_uniform(2, 2, 5));
}
