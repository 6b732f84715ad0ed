// The numerics of tpc's exact mode, shared by the C kernels and the CUDA kernels: this header and
// the two it includes at its end (tprt_numerics_optim.h, tprt_numerics_philox.h).
//
// Everything here is a defined sequence of IEEE-754 binary32 operations (round to nearest even,
// subnormals kept): +, -, *, fmaf, correctly rounded division and sqrtf, and integer bit
// manipulation. No libm transcendental, no hardware format conversion and no compiler
// contraction is relied on, so a C build with -ffp-contract=off and a CUDA build with
// --fmad=false (and without --use_fast_math, -ftz=true, -prec-div=false or -prec-sqrt=false)
// compute the same bits. docs/numerics.md is the normative description of every function here;
// test/unit/test_cpu_numerics.c measures the accuracy figures quoted below.
//
// Thread safety: every function is pure (no state).
#ifndef TPRT_NUMERICS_H_
#define TPRT_NUMERICS_H_

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tprt_dtype.h"

#ifdef __CUDACC__
#define TPRT_HD static __host__ __device__ __forceinline__
#else
#define TPRT_HD static inline
#endif

// Explicit IEEE operations. In device code the _rn intrinsics make the rounding independent of
// compiler flags; on the host they are the C library's correctly rounded functions.
#if defined(__CUDA_ARCH__)
#define TPRT_FMAF(a, b, c) __fmaf_rn((a), (b), (c))
#define TPRT_DIVF(a, b) __fdiv_rn((a), (b))
#define TPRT_SQRTF(a) __fsqrt_rn(a)
#else
#define TPRT_FMAF(a, b, c) fmaf((a), (b), (c))
#define TPRT_DIVF(a, b) ((a) / (b))
#define TPRT_SQRTF(a) sqrtf(a)
#endif

// ------------------------------------------------------------------------------------------------
// Bits
// ------------------------------------------------------------------------------------------------

/// Returns the IEEE-754 bit pattern of |f|.
TPRT_HD uint32_t tprt_f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

/// Returns the float whose bit pattern is |u|.
TPRT_HD float tprt_f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// What the max all-reduce keeps of |m| (the maximum so far) and |v|: the larger, NaN skipped (NaN
/// only when both are), +0 above -0. A total order on the non-NaN values, so the members' values
/// give one maximum in any order (runtime/tprt_collectives_compute.c, kernels/cuda/elementwise/reduce.cu).
TPRT_HD float tprt_max_keep(float m, float v) {
  bool zeros = v == 0.0f && m == 0.0f && (tprt_f32_bits(m) >> 31) > (tprt_f32_bits(v) >> 31);
  return (m != m || v > m || zeros) ? v : m;
}

// ------------------------------------------------------------------------------------------------
// Storage conversions: f32 <-> bf16 / f16 (round to nearest even, NaN preserving)
// ------------------------------------------------------------------------------------------------

/// f32 -> bf16, RNE. Overflow rounds to +-inf as IEEE requires; a NaN keeps its sign and the top
/// of its payload and is made quiet.
TPRT_HD uint16_t tprt_f32_to_bf16(float f) {
  uint32_t u = tprt_f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);  // ties go to the even upper half
  return (uint16_t)(u >> 16);
}

/// bf16 -> f32, exact.
TPRT_HD float tprt_bf16_to_f32(uint16_t h) { return tprt_f32_from_bits((uint32_t)h << 16); }

/// f32 -> f16 (IEEE binary16), RNE with gradual underflow; overflow (|x| >= 65520) gives +-inf;
/// a NaN keeps its sign and the top 9 payload bits and is made quiet.
TPRT_HD uint16_t tprt_f32_to_f16(float f) {
  uint32_t u = tprt_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x1FFu));
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // >= 65520 (the tie above 65504) or inf
  if (a >= 0x38800000u) {                                   // >= 2^-14: a normal f16
    uint32_t r = a - (112u << 23);                          // rebias the exponent from 127 to 15
    r += 0xFFFu + ((r >> 13) & 1u);                         // RNE at bit 13; a carry bumps the exponent
    return (uint16_t)(sign | (r >> 13));
  }
  uint32_t e = a >> 23;
  if (e < 102u) return sign;  // < 2^-25: rounds to zero (2^-25 itself is the tie, handled below)
  // A subnormal f16 counts units of 2^-24: value = m * 2^(e-150), so the unit count is m >> (126-e).
  uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  uint32_t shift = 126u - e;  // 14..24
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // q == 0x400 is the smallest normal: still right
  return (uint16_t)(sign | q);
}

/// f16 -> f32, exact (NaN payloads kept).
TPRT_HD float tprt_f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1Fu) return tprt_f32_from_bits(s | 0x7F800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return tprt_f32_from_bits(s);
    e = 113;  // normalize m * 2^-24: the exponent of 2^-14 (127 - 14) minus one per shift
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    return tprt_f32_from_bits(s | (e << 23) | ((m & 0x3FFu) << 13));
  }
  return tprt_f32_from_bits(s | ((e + 112u) << 23) | (m << 13));
}

// ------------------------------------------------------------------------------------------------
// Low-precision formats: E4M3 (fn), E5M2, E2M1 (fp4), E8M0 (OCP OFP8 / MX)
// ------------------------------------------------------------------------------------------------

/// Encodes |x| in a format with |eb| exponent bits, |mb| mantissa bits and |bias|, rounding to
/// nearest even with "satfinite": |x| is first clamped to the largest finite value |max_bits| (the
/// f32 bits of 448, 57344 or 6; +-inf clamps too), NaN becomes s.111..1 (E4M3 0x7F, E5M2 0x7F,
/// E2M1 +-6 since it has no NaN). Bit for bit the research note's f32_to_fpx (checked against it
/// in test_cpu_numerics.c), written with integer operations.
TPRT_HD uint8_t tprt__f32_to_fpx(float x, int eb, int mb, int bias, uint32_t max_bits) {
  uint32_t u = tprt_f32_bits(x);
  uint32_t s = (u >> 31) ? (1u << (eb + mb)) : 0u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint8_t)(s | ((1u << (eb + mb)) - 1u));
  if (a > max_bits) a = max_bits;
  int ef = (int)(a >> 23);
  uint32_t mant = (a & 0x7FFFFFu) | (ef ? 0x800000u : 0u);
  int e = ef ? ef - 127 : -126;          // |x| = mant * 2^(e-23)
  int et = e < 1 - bias ? 1 - bias : e;  // target binade; the subnormal quantum is 2^(1-bias-mb)
  int shift = (et - mb) - (e - 23);      // quantum 2^(et-mb): n = RNE(mant / 2^shift), shift >= 20
  uint32_t n = 0;
  if (shift < 32) {
    uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    n = mant >> shift;
    if (rem > half || (rem == half && (n & 1u))) ++n;
  }
  // n is in [0, 2^(mb+1)]; adding it to (et+bias-1) << mb yields the exponent field and mantissa,
  // including the carry into the next binade and the subnormal -> normal boundary.
  return (uint8_t)(s | ((((uint32_t)(et + bias - 1)) << mb) + n));
}

/// f32 -> E4M3 ("fn": max 448, no inf, NaN 0x7F/0xFF), RNE, satfinite.
TPRT_HD uint8_t tprt_f32_to_e4m3(float x) { return tprt__f32_to_fpx(x, 4, 3, 7, 0x43E00000u /* 448 */); }

/// f32 -> E5M2 (max 57344), RNE, satfinite (inf clamps to 57344), NaN 0x7F/0xFF.
TPRT_HD uint8_t tprt_f32_to_e5m2(float x) { return tprt__f32_to_fpx(x, 5, 2, 15, 0x47600000u /* 57344 */); }

/// f32 -> E2M1 (values 0, .5, 1, 1.5, 2, 3, 4, 6), RNE, satfinite, NaN -> +-6; in the low nibble.
TPRT_HD uint8_t tprt_f32_to_e2m1(float x) { return tprt__f32_to_fpx(x, 2, 1, 1, 0x40C00000u /* 6 */); }

/// E4M3 -> f32, exact.
TPRT_HD float tprt_e4m3_to_f32(uint8_t b) {
  uint32_t s = (uint32_t)(b & 0x80u) << 24, e = (b >> 3) & 0xFu, m = b & 7u;
  if (e == 15u && m == 7u) return tprt_f32_from_bits(s | 0x7FC00000u);
  if (e == 0) return tprt_f32_from_bits(s | tprt_f32_bits((float)m * 0.001953125f /* 2^-9 */));
  return tprt_f32_from_bits(s | ((e + 120u) << 23) | (m << 20));
}

/// E5M2 -> f32, exact.
TPRT_HD float tprt_e5m2_to_f32(uint8_t b) {
  uint32_t s = (uint32_t)(b & 0x80u) << 24, e = (b >> 2) & 0x1Fu, m = b & 3u;
  if (e == 31u) return tprt_f32_from_bits(s | 0x7F800000u | (m << 21) | (m ? 0x400000u : 0u));
  if (e == 0) return tprt_f32_from_bits(s | tprt_f32_bits((float)m * 1.52587890625e-05f /* 2^-16 */));
  return tprt_f32_from_bits(s | ((e + 112u) << 23) | (m << 21));
}

/// E2M1 (low nibble of |b|) -> f32, exact.
TPRT_HD float tprt_e2m1_to_f32(uint8_t b) {
  uint32_t s = (uint32_t)(b & 0x8u) << 28, e = (b >> 1) & 3u, m = b & 1u;
  if (e == 0) return tprt_f32_from_bits(s | (m ? 0x3F000000u /* 0.5 */ : 0u));
  return tprt_f32_from_bits(s | ((e + 126u) << 23) | (m << 22));
}

/// E8M0 scale for |v| rounding up ("RCEIL", PTX cvt.rp.satfinite.ue8m0x2.f32), TE's CPU twin from
/// the research note: the smallest 2^(e-127) >= v; NaN -> 0xFF, inf -> 0xFE, 0 -> 0.
TPRT_HD uint8_t tprt_e8m0_rceil(float v) {
  uint32_t u = tprt_f32_bits(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFF;
  if ((u & 0x7FFFFFFFu) == 0x7F800000u) return 0xFE;
  if ((u & 0x7FFFFFFFu) == 0) return 0;
  uint8_t e = (uint8_t)(u >> 23);
  uint32_t m = u & 0x7FFFFFu;
  if (m && e != 0xFE && !(e == 0 && m <= 0x400000u)) ++e;
  return e;
}

/// 2^(127-e) as f32, the multiplier that quantizes a block with scale |e| (note's e8m0_rcp):
/// 0xFF -> NaN, 0xFE -> 2^-127 (subnormal).
TPRT_HD float tprt_e8m0_rcp(uint8_t e) {
  uint32_t u = e == 255 ? 0x7FFFFFFFu : e == 254 ? 0x00400000u : (uint32_t)(254 - e) << 23;
  return tprt_f32_from_bits(u);
}

/// E8M0 -> f32: 2^(e-127), exact (0 -> 2^-127, a subnormal); 0xFF -> NaN.
TPRT_HD float tprt_e8m0_to_f32(uint8_t e) {
  if (e == 255) return tprt_f32_from_bits(0x7FC00000u);
  if (e == 0) return tprt_f32_from_bits(0x00400000u);
  return tprt_f32_from_bits((uint32_t)e << 23);
}

// ------------------------------------------------------------------------------------------------
// Special functions (fma, +, *, IEEE division and sqrtf only). Max errors against a double
// reference, measured by `build/unit/test_cpu_numerics special_function_accuracy` over every
// 64th float in the stated range (docs/numerics.md has the table).
// ------------------------------------------------------------------------------------------------

/// 2^k for an integer k in [-126, 127], exact.
TPRT_HD float tprt__exp2i(int k) { return tprt_f32_from_bits((uint32_t)(k + 127) << 23); }

/// e^x. Reduction x = k·ln2 + r with k = RNE(x·log2e) (one fmaf against 1.5·2^23), r by two
/// fmaf with ln2 split hi/lo (|r| <= 0.35); e^r = 1 + (r + r²·Q(r)), Q a degree-5 least-squares
/// fit evaluated by Horner with fmaf; scaled by 2^(k/2)·2^(k-k/2) so that a subnormal result is
/// rounded once. x > 88.8 -> +inf, x < -104 -> +0, NaN -> NaN. Max error 1 ulp (docs/numerics.md).
TPRT_HD float tprt_expf(float x) {
  if (x != x) return x + x;
  if (x > 88.8f) return tprt_f32_from_bits(0x7F800000u);
  if (x < -104.0f) return 0.0f;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (RNE)
  float kf = TPRT_FMAF(x, 1.44269502f /* log2(e) */, magic) - magic;
  float r = TPRT_FMAF(-kf, 0.693147182f /* ln2 hi: float(ln 2) */, x);
  r = TPRT_FMAF(-kf, -1.90465430e-09f /* ln2 lo: ln 2 - hi */, r);
  float q = 1.98264955e-04f;
  q = TPRT_FMAF(q, r, 1.39460212e-03f);
  q = TPRT_FMAF(q, r, 8.33342969e-03f);
  q = TPRT_FMAF(q, r, 4.16662693e-02f);
  q = TPRT_FMAF(q, r, 1.66666657e-01f);
  q = TPRT_FMAF(q, r, 0.5f);
  float p = 1.0f + TPRT_FMAF(q, r * r, r);
  int k = (int)kf;  // exact: kf is an integer in [-150, 129]
  int k1 = k / 2;
  return (p * tprt__exp2i(k1)) * tprt__exp2i(k - k1);
}

/// ln x. x = 2^k·m with m in [sqrt(1/2), sqrt(2)) (a subnormal x scaled by 2^25 first), f = m - 1
/// (exact), s = f / (2 + f), z = s², w = z², R = z·(L1 + w·L3) + w·(L2 + w·L4) (fdlibm's logf
/// polynomial), ln x = k·ln2_hi - ((f²/2 - (s·(f²/2 + R) + k·ln2_lo)) - f); products and sums
/// rounded one by one (no fmaf). x = 0 -> -inf, x < 0 -> NaN, +inf -> +inf, NaN -> NaN. Max error
/// 1 ulp (docs/numerics.md).
TPRT_HD float tprt_logf(float x) {
  uint32_t u = tprt_f32_bits(x);
  int k = 0;
  if (x != x) return x + x;
  if (x < 0.0f) return tprt_f32_from_bits(0x7FC00000u);
  if (x == 0.0f) return tprt_f32_from_bits(0xFF800000u);
  if (u == 0x7F800000u) return x;
  if (u < 0x00800000u) {  // subnormal: scale into the normal range
    x = x * 33554432.0f;  // 2^25, exact
    u = tprt_f32_bits(x);
    k = -25;
  }
  // m in [sqrt(1/2), sqrt(2)): bias the exponent split so that the mantissa's upper part rounds.
  u += 0x3F800000u - 0x3F3504F3u;
  k += (int)(u >> 23) - 127;
  u = (u & 0x007FFFFFu) + 0x3F3504F3u;
  float f = tprt_f32_from_bits(u) - 1.0f;
  float hfsq = 0.5f * f * f;
  float s = TPRT_DIVF(f, 2.0f + f);
  float z = s * s, w = z * z;
  float t1 = w * (0.40000972152f + w * 0.24279078841f);
  float t2 = z * (0.66666662693f + w * 0.28498786688f);
  float r = t2 + t1;
  float dk = (float)k;
  return dk * 6.9313812256e-01f /* ln2 hi */ - ((hfsq - (s * (hfsq + r) + dk * 9.0580006145e-06f /* ln2 lo */)) - f);
}

/// tanh(x). |x| < 2^-12: x. |x| < 0.625: x + x·s·P(s), s = x², P a degree-5 fit (Horner, fmaf), the last step
/// one fmaf; otherwise 1 - 2/(e^(2|x|) + 1) with the sign of x. Max error 1.5 ulp.
TPRT_HD float tprt_tanhf(float x) {
  float a = tprt_f32_from_bits(tprt_f32_bits(x) & 0x7FFFFFFFu);
  float y;
  if (a < 2.44140625e-04f) return x;  // |x| < 2^-12: x·x²/3 is below half an ulp of x (keeps -0)
  if (a < 0.625f) {
    float s = x * x;
    float p = 2.13822629e-03f;
    p = TPRT_FMAF(p, s, -8.17178842e-03f);
    p = TPRT_FMAF(p, s, 2.16982104e-02f);
    p = TPRT_FMAF(p, s, -5.39462529e-02f);
    p = TPRT_FMAF(p, s, 1.33332014e-01f);
    p = TPRT_FMAF(p, s, -3.33333313e-01f);
    return TPRT_FMAF(x * s, p, x);
  }
  y = 1.0f - TPRT_DIVF(2.0f, tprt_expf(a + a) + 1.0f);  // NaN propagates through expf
  return tprt_f32_from_bits(tprt_f32_bits(y) | (tprt_f32_bits(x) & 0x80000000u));
}

/// 1 / (1 + e^-x), computed as 1/(1+e) for x >= 0 and e/(1+e) for x < 0 with e = e^-|x|, so that
/// the result keeps its relative accuracy down to subnormals. Max error 2.5 ulp.
TPRT_HD float tprt_sigmoidf(float x) {
  float a = tprt_f32_from_bits(tprt_f32_bits(x) & 0x7FFFFFFFu);
  float e = tprt_expf(-a);
  float d = 1.0f + e;
  return x >= 0.0f ? TPRT_DIVF(1.0f, d) : TPRT_DIVF(e, d);  // NaN: the comparison fails, e/d is NaN
}

/// x · sigmoid(v) with one division: x/(1+e) for v >= 0 and (x·e)/(1+e) for v < 0, e = e^-|v|.
TPRT_HD float tprt__mul_sigmoidf(float x, float v) {
  float a = tprt_f32_from_bits(tprt_f32_bits(v) & 0x7FFFFFFFu);
  float e = tprt_expf(-a);
  return TPRT_DIVF(v >= 0.0f ? x : x * e, 1.0f + e);
}

/// SiLU: x · sigmoid(x), as tprt__mul_sigmoidf(x, x). Max error 3.5 ulp while e^x is normal
/// (x >= -87); below, the subnormal e^x limits it to an absolute error of about |x|·2^-149.
TPRT_HD float tprt_siluf(float x) { return tprt__mul_sigmoidf(x, x); }

/// GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), computed through the identity
/// 0.5·(1 + tanh(u)) = sigmoid(2u) (no cancellation for negative x) as
///   v = 1.59576912 · fmaf(0.044715 · (x·x), x, x);  gelu = tprt__mul_sigmoidf(x, v).
/// The rounding of v is amplified by |v| in the relative error for negative x (docs/numerics.md).
TPRT_HD float tprt_gelu_tanhf(float x) {
  float v = 1.59576912f /* 2·sqrt(2/π) */ * TPRT_FMAF(0.044715f * (x * x), x, x);
  return tprt__mul_sigmoidf(x, v);
}

/// Quick GELU with slope |alpha|: x · sigmoid(alpha · x), as tprt__mul_sigmoidf(x, alpha · x).
TPRT_HD float tprt_quick_geluf(float x, float alpha) { return tprt__mul_sigmoidf(x, alpha * x); }

/// sigmoid(z) and sigmoid(-z) from one exp, each a single division (a NaN z gives NaN for both).
TPRT_HD void tprt__sigmoid_pair(float z, float* out_p, float* out_q) {
  float e = tprt_expf(-tprt_f32_from_bits(tprt_f32_bits(z) & 0x7FFFFFFFu));
  float d = 1.0f + e;
  float big = TPRT_DIVF(1.0f, d), small = TPRT_DIVF(e, d);
  *out_p = z >= 0.0f ? big : small;
  *out_q = z >= 0.0f ? small : big;
}

/// One GLU output from its gate and up inputs (f32, before rounding; docs/numerics.md "GLU"):
/// |kind| a tprt_glu_kind_t (0 swiglu: silu(g)·u, 1 geglu: gelu_tanh(g)·u, 2 quick_geglu:
/// quick_gelu(min(g, limit), alpha)·(clamp(u, -limit, limit) + 1)). Shared by the CPU and CUDA
/// kernels and the fused GLU epilogue of the grouped GEMM.
TPRT_HD float tprt_glu_value(int kind, float g, float u, float alpha, float limit) {
  if (kind == 0) return tprt_siluf(g) * u;
  if (kind == 1) return tprt_gelu_tanhf(g) * u;
  // Comparisons, not fminf/fmaxf, so that a NaN input stays NaN.
  float gc = g > limit ? limit : g;
  float uc = u > limit ? limit : u < -limit ? -limit : u;
  return tprt_quick_geluf(gc, alpha) * (uc + 1.0f);
}

/// The gradients of one GLU output with respect to its gate and up inputs (f32, before rounding):
/// du = dy·a(g), dg = (dy·v)·a'(g), the formulas of kernels/cpu/cpu_glu_grad.c (docs/numerics.md,
/// "Backward"); |kind| a tprt_glu_kind_t (0 swiglu, 1 geglu, 2 quick_geglu). Shared by the CPU
/// and CUDA kernels.
TPRT_HD void tprt_glu_grad_value(int kind, float g, float u, float dy, float alpha, float limit, float* out_dg,
                                 float* out_du) {
  float p, q;
  if (kind == 0) {
    tprt__sigmoid_pair(g, &p, &q);
    *out_du = dy * tprt_siluf(g);
    *out_dg = (dy * u) * (p * TPRT_FMAF(g, q, 1.0f));
  } else if (kind == 1) {
    float g2 = g * g;
    float z = 1.59576912f /* 2·sqrt(2/π) */ * TPRT_FMAF(0.044715f * g2, g, g);
    float dz = 1.59576912f * TPRT_FMAF(0.134144992f /* 3 · 0.044715f, rounded: 0x3E095D4E */, g2, 1.0f);
    tprt__sigmoid_pair(z, &p, &q);
    *out_du = dy * tprt_gelu_tanhf(g);
    *out_dg = (dy * u) * (p * TPRT_FMAF(g * q, dz, 1.0f));
  } else {
    // Comparisons, as in the forward, so that a NaN input propagates.
    bool g_clamped = g > limit, u_clamped = u > limit || u < -limit;
    float gc = g_clamped ? limit : g;
    float uc = u > limit ? limit : u < -limit ? -limit : u;
    tprt__sigmoid_pair(alpha * gc, &p, &q);
    *out_du = u_clamped ? 0.0f : dy * tprt_quick_geluf(gc, alpha);
    *out_dg = g_clamped ? 0.0f : (dy * (uc + 1.0f)) * (p * TPRT_FMAF(alpha * gc, q, 1.0f));
  }
}

/// True when probability |a| is preferred over |b| in MoE top-k: larger, with NaN below every
/// number. Ties are not preferred, so a scan in increasing expert order keeps the lower index.
TPRT_HD bool tprt__moe_prefer(float a, float b) { return a > b || (b != b && a == a); }

/// One token of tprt_cpu_moe_route (docs/numerics.md, "MoE routing"): |p| holds the row's E logits
/// in f32 and is overwritten (exp); |prob| (E floats) and |taken| (E bytes) are work space. Writes
/// the top-k expert indices and weights in decreasing probability (ties to the lower index),
/// renormalized over the k when |normalize|. Shared by the CPU and CUDA kernels.
TPRT_HD void tprt_moe_route_row(float* p, float* prob, unsigned char* taken, int64_t e, int top_k, bool normalize,
                                int32_t* idx, float* wts);

/// 1 / sqrtf(x): two correctly rounded operations, max error 1.5 ulp.
TPRT_HD float tprt_rsqrtf(float x) { return TPRT_DIVF(1.0f, TPRT_SQRTF(x)); }

// ------------------------------------------------------------------------------------------------
// Canonical K accumulation (linear, grouped linear, dgrad, wgrad)
// ------------------------------------------------------------------------------------------------

/// Largest number of canonical chunks a kernel accepts.
#define TPRT_MAX_CHUNKS 1024

/// Chunk size S = ceil(K / C); chunk c covers k in [c·S, min((c+1)·S, K)).
TPRT_HD int64_t tprt_kacc_chunk_size(int64_t k, int chunks) { return (k + chunks - 1) / chunks; }

/// Accumulates chunk [k0, k1) of a dot product: acc from +0.0, acc = fmaf(x[k], w[k], acc) in
/// increasing k; a chunk shorter than |size| (the zero padding of the last chunks) then gets
/// acc + 0.0f, which is what the padded terms fmaf(0, 0, acc) compute (it turns -0 into +0).
TPRT_HD float tprt_kacc_chunk(const float* x, const float* w, int64_t k0, int64_t k1, int64_t size) {
  float acc = 0.0f;
  for (int64_t k = k0; k < k1; ++k) acc = TPRT_FMAF(x[k], w[k], acc);
  if (k1 - k0 < size) acc = acc + 0.0f;
  return acc;
}

/// Combines |chunks| (a power of two) partials by the fixed pairwise tree, in place: level 1 adds
/// (0,1) (2,3) ..., level 2 the pairs, and so on; p[i] = p[i] + p[i+s]. Returns p[0].
TPRT_HD float tprt_kacc_tree(float* p, int chunks) {
  for (int s = 1; s < chunks; s *= 2)
    for (int i = 0; i + s < chunks; i += 2 * s) p[i] = p[i] + p[i + s];
  return p[0];
}

/// The canonical dot product sum_k x[k]·w[k] over K with |chunks| (a power of two, at most
/// TPRT_MAX_CHUNKS) chunks: every chunk by tprt_kacc_chunk, then tprt_kacc_tree.
TPRT_HD float tprt_dot_canonical(const float* x, const float* w, int64_t k, int chunks) {
  float p[TPRT_MAX_CHUNKS];
  int64_t size = tprt_kacc_chunk_size(k, chunks);
  for (int c = 0; c < chunks; ++c) {
    int64_t k0 = (int64_t)c * size, k1 = k0 + size;
    if (k0 > k) k0 = k;
    if (k1 > k) k1 = k;
    p[c] = tprt_kacc_chunk(x, w, k0, k1, size);
  }
  return tprt_kacc_tree(p, chunks);
}

// ------------------------------------------------------------------------------------------------
// Cross-entropy over the vocabulary (docs/numerics.md, "Cross-entropy")
// ------------------------------------------------------------------------------------------------

/// Merges the softmax statistics of a right vocabulary block (m2, s2) into the left one (*m, *s):
/// M = the larger maximum (tprt_max_keep), s = s·e + s2·e2 with e = 1 where that block's maximum
/// is M, else exp(its maximum - M). An empty block is (-inf, +0).
TPRT_HD void tprt_ce_merge(float* m, float* s, float m2, float s2) {
  float M = tprt_max_keep(*m, m2);
  float a = *m == M ? *s : *s * tprt_expf(*m - M);
  float b = m2 == M ? s2 : s2 * tprt_expf(m2 - M);
  *m = M;
  *s = a + b;
}

/// The pairwise tree of tprt_kacc_tree over |n| blocks' statistics, in place; the result lands in
/// m[0], s[0].
TPRT_HD void tprt_ce_tree(float* m, float* s, int n) {
  for (int st = 1; st < n; st *= 2)
    for (int i = 0; i + st < n; i += 2 * st) tprt_ce_merge(&m[i], &s[i], m[i + st], s[i + st]);
}

/// The gradient of one logit z of a token with log-sum-exp |lse| and loss gradient |g| (before
/// rounding to the logits' dtype): (exp(z - lse) - 1) · g for the target, exp(z - lse) · g else.
TPRT_HD float tprt_ce_dlogit(float z, float lse, bool target, float g) {
  float p = tprt_expf(z - lse);
  return (target ? p - 1.0f : p) * g;
}

// ------------------------------------------------------------------------------------------------
// Canonical row reduction (RMSNorm, LayerNorm, softmax, loss)
// ------------------------------------------------------------------------------------------------

/// Lanes of the canonical row reduction (8 groups of 32: a warp's lanes and a block's warps).
#define TPRT_ROW_LANES 256

/// Reduces the 256 lane accumulators in place and returns the sum: within each group of 32
/// lanes, lane j += lane j+s for s = 16, 8, 4, 2, 1; then the 8 group results g j += g j+s for
/// s = 4, 2, 1. (A warp's shuffle-down tree, then the block's tree over warps.)
TPRT_HD float tprt_row_tree(float* lanes) {
  for (int g = 0; g < TPRT_ROW_LANES; g += 32)
    for (int s = 16; s >= 1; s /= 2)
      for (int j = 0; j < s; ++j) lanes[g + j] = lanes[g + j] + lanes[g + j + s];
  for (int s = 4; s >= 1; s /= 2)
    for (int j = 0; j < s; ++j) lanes[32 * j] = lanes[32 * j] + lanes[32 * (j + s)];
  return lanes[0];
}

/// Canonical sum of v[0..n): lane j (from +0.0) adds v[j], v[j+256], ... in order, then
/// tprt_row_tree. Missing lanes of short rows stay +0.0.
TPRT_HD float tprt_row_sum(const float* v, int64_t n) {
  float lanes[TPRT_ROW_LANES];
  for (int j = 0; j < TPRT_ROW_LANES; ++j) lanes[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) lanes[i % TPRT_ROW_LANES] = lanes[i % TPRT_ROW_LANES] + v[i];
  return tprt_row_tree(lanes);
}

/// The routing softmax of a token (docs/numerics.md, "MoE routing"): prob[i] = exp(p[i] - max) /
/// (canonical row sum); |p| gets the exponentials (prob may be p).
TPRT_HD void tprt__moe_softmax(float* p, float* prob, int64_t e) {
  float mx = p[0];
  for (int64_t i = 1; i < e; ++i)
    if (p[i] > mx) mx = p[i];
  for (int64_t i = 0; i < e; ++i) p[i] = tprt_expf(p[i] - mx);
  float sum = tprt_row_sum(p, e);
  for (int64_t i = 0; i < e; ++i) prob[i] = TPRT_DIVF(p[i], sum);
}

TPRT_HD void tprt_moe_route_row(float* p, float* prob, unsigned char* taken, int64_t e, int top_k, bool normalize,
                                int32_t* idx, float* wts) {
  tprt__moe_softmax(p, prob, e);
  for (int64_t i = 0; i < e; ++i) taken[i] = 0;
  for (int j = 0; j < top_k; ++j) {
    int64_t best = -1;
    for (int64_t i = 0; i < e; ++i)
      if (!taken[i] && (best < 0 || tprt__moe_prefer(prob[i], prob[best]))) best = i;
    taken[best] = 1;
    idx[j] = (int32_t)best;
    wts[j] = prob[best];
  }
  if (normalize) {
    float total = 0.0f;
    for (int j = 0; j < top_k; ++j) total = total + wts[j];
    for (int j = 0; j < top_k; ++j) wts[j] = TPRT_DIVF(wts[j], total);
  }
}

/// One token of tprt_cpu_moe_route_grad (docs/numerics.md, "Backward"): |p| holds the row's E
/// logits in f32 and becomes the forward's probabilities bit for bit; writes dl[E] for the
/// selection sel[k] and the weight gradients g[k]. Shared by the CPU and CUDA kernels.
TPRT_HD void tprt_moe_route_grad_row(float* p, float* dl, int64_t e, const int32_t* sel, const float* g, int top_k,
                                     bool normalize) {
  tprt__moe_softmax(p, p, e);
  float c = 0.0f;
  if (normalize) {
    float total = 0.0f;
    for (int j = 0; j < top_k; ++j) total = total + p[sel[j]];
    for (int j = 0; j < top_k; ++j) c = TPRT_FMAF(TPRT_DIVF(p[sel[j]], total), g[j], c);
    for (int64_t i = 0; i < e; ++i) dl[i] = 0.0f;
    for (int j = 0; j < top_k; ++j) dl[sel[j]] = TPRT_DIVF(p[sel[j]], total) * (g[j] - c);
  } else {
    for (int j = 0; j < top_k; ++j) c = TPRT_FMAF(p[sel[j]], g[j], c);
    for (int64_t i = 0; i < e; ++i) dl[i] = 0.0f;  // dp, then dl in place
    for (int j = 0; j < top_k; ++j) dl[sel[j]] = g[j];
    for (int64_t i = 0; i < e; ++i) dl[i] = p[i] * (dl[i] - c);
  }
}

/// Canonical sum of squares of v[0..n): as tprt_row_sum with lane = fmaf(v[i], v[i], lane).
TPRT_HD float tprt_row_sumsq(const float* v, int64_t n) {
  float lanes[TPRT_ROW_LANES];
  for (int j = 0; j < TPRT_ROW_LANES; ++j) lanes[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float* l = &lanes[i % TPRT_ROW_LANES];
    *l = TPRT_FMAF(v[i], v[i], *l);
  }
  return tprt_row_tree(lanes);
}

// ------------------------------------------------------------------------------------------------
// GLU column layout
// ------------------------------------------------------------------------------------------------

/// The gate and up input columns of GLU output column j in a row of 2F inputs: the [gate | up]
/// halves, or with |interleave| = b > 0 alternating blocks of b gate and b up columns.
TPRT_HD void tprt_glu_columns(int64_t j, int64_t f, int64_t interleave, int64_t* gcol, int64_t* ucol) {
  if (interleave > 0) {
    const int64_t block = j / interleave, off = j % interleave;
    *gcol = 2 * block * interleave + off;
    *ucol = *gcol + interleave;
  } else {
    *gcol = j;
    *ucol = f + j;
  }
}

/// Element |i| of float storage |p| of |dtype| (bf16, f16, else f32) widened to f32 exactly, and
/// |v| rounded (RNE) into it: the loads and stores of every kernel, host and device (the integer
/// conversions above, never the hardware's). A compile-time |dtype| folds the switch away.
TPRT_HD float tprt_load_elem(const void* p, int dtype, int64_t i) {
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      return tprt_bf16_to_f32(((const uint16_t*)p)[i]);
    case TPRT_DTYPE_F16:
      return tprt_f16_to_f32(((const uint16_t*)p)[i]);
    default:
      return ((const float*)p)[i];
  }
}

TPRT_HD void tprt_store_elem(void* p, int dtype, int64_t i, float v) {
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      ((uint16_t*)p)[i] = tprt_f32_to_bf16(v);
      break;
    case TPRT_DTYPE_F16:
      ((uint16_t*)p)[i] = tprt_f32_to_f16(v);
      break;
    default:
      ((float*)p)[i] = v;
      break;
  }
}

// The optimizer's and the random numbers' sections, in files of their own; every includer of this
// header still gets them.
#include "tprt_numerics_optim.h"
#include "tprt_numerics_philox.h"

#endif  // TPRT_NUMERICS_H_
