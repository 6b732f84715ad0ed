// Exact mode's optimizer numerics: the exact sum of squares of the gradient norm and AdamW's update
// (a part of tprt_numerics.h, which includes it; docs/numerics.md).
#ifndef TPRT_NUMERICS_OPTIM_H_
#define TPRT_NUMERICS_OPTIM_H_

#include "tprt_numerics.h"

// ------------------------------------------------------------------------------------------------
// The exact sum of squares of the gradient norm (docs/numerics.md, "Optimizer")
// ------------------------------------------------------------------------------------------------

/// An accumulator: TPRT_SUMSQ_LIMBS limbs, limb k worth 2^(32k + TPRT_SUMSQ_BASE) (32 bits each once
/// normalized, carries pending before), and a count of infinite (low 32 bits) and NaN (high 32
/// bits) elements in the last word. The square of every finite f32 is exact in f64 and lands on
/// whole bits of this grid (2^-298 is the square of the smallest subnormal), so the sum is exact:
/// no order, partition or rank count changes it.
#define TPRT_SUMSQ_LIMBS 20
#define TPRT_SUMSQ_WORDS (TPRT_SUMSQ_LIMBS + 1)
#define TPRT_SUMSQ_BASE (-298)
/// Elements a limb absorbs before tprt_sumsq_normalize must run (each adds < 2^32).
#define TPRT_SUMSQ_BATCH ((int64_t)1 << 30)

/// Adds g·g, exactly, to |acc| (limbs not normalized).
TPRT_HD void tprt_sumsq_add(int64_t* acc, float g) {
  uint32_t b = tprt_f32_bits(g), e = (b >> 23) & 0xFFu, f = b & 0x7FFFFFu;
  if (e == 0xFFu) {
    acc[TPRT_SUMSQ_LIMBS] += f ? ((int64_t)1 << 32) : 1;
    return;
  }
  if (e == 0 && f == 0) return;
  uint64_t m = e ? (f | 0x800000u) : f, M = m * m;  // g = m·2^eg, g·g = M·2^(2eg), M < 2^48
  int eg = e ? (int)e - 150 : -149, p = 2 * eg - TPRT_SUMSQ_BASE, j = p >> 5, r = p & 31;
  uint64_t mask = 0xFFFFFFFFu;
  acc[j] += (int64_t)((M << r) & mask);
  acc[j + 1] += (int64_t)((r ? M >> (32 - r) : M >> 32) & mask);
  if (r) acc[j + 2] += (int64_t)((M >> (64 - r)) & mask);
}

/// Propagates the carries: every limb but the last below 2^32.
TPRT_HD void tprt_sumsq_normalize(int64_t* acc) {
  for (int k = 0; k + 1 < TPRT_SUMSQ_LIMBS; ++k) {
    acc[k + 1] += acc[k] >> 32;
    acc[k] &= 0xFFFFFFFF;
  }
}

/// sqrt of the exact sum held by a normalized |acc|: the sum rounded once to f64 (to nearest,
/// ties to even), sqrt in f64, rounded to f32. NaN if a NaN was added, +inf if an infinity was.
TPRT_HD float tprt_sumsq_norm(const int64_t* acc) {
  int64_t nonfinite = acc[TPRT_SUMSQ_LIMBS];
  if (nonfinite >> 32) return tprt_f32_from_bits(0x7FC00000u);
  if (nonfinite) return tprt_f32_from_bits(0x7F800000u);
  int t = TPRT_SUMSQ_LIMBS - 1;
  while (t >= 0 && acc[t] == 0) --t;
  if (t < 0) return 0.0f;
  if ((uint64_t)acc[t] >> 32) return tprt_f32_from_bits(0x7F800000u);  // beyond 2^342: overflows f32 anyway
  uint64_t top = (uint64_t)acc[t], l1 = t >= 1 ? (uint64_t)acc[t - 1] : 0, l2 = t >= 2 ? (uint64_t)acc[t - 2] : 0;
  bool sticky = false;
  for (int k = 0; k < t - 2; ++k) sticky = sticky || acc[k] != 0;
  int lz = 0;
  while (lz < 63 && !((top << lz) & 0x80000000u)) ++lz;  // top < 2^32 after normalizing (t < LIMBS-1)
  // The 96 bits top·2^64 + l1·2^32 + l2 shifted so that their first one is bit 95.
  uint64_t hi = (top << 32 | l1), lo = l2;
  if (lz) {
    hi = hi << lz | lo >> (32 - lz);
    lo = (lo << lz) & 0xFFFFFFFFu;
  }
  // hi holds bits 95..32 (64 bits, bit 63 set); round to 53.
  uint64_t q = hi >> 11, rem = hi & 0x7FFu;
  bool rest = lo != 0 || sticky;
  if (rem > 0x400u || (rem == 0x400u && (rest || (q & 1)))) q += 1;
  int pos = 32 * t + 31 - lz;  // the first one's bit, from the grid's origin
  if (q >> 53) {
    q >>= 1;
    pos += 1;
  }
  // q·2^(pos - 52 + BASE), exact: q < 2^53 and the exponent is within f64's normal range.
  int ex = pos - 52 + TPRT_SUMSQ_BASE;
  double d = (double)q;
  while (ex > 0) {
    int s = ex > 60 ? 60 : ex;
    d *= (double)((uint64_t)1 << s);
    ex -= s;
  }
  while (ex < 0) {
    int s = -ex > 60 ? 60 : -ex;
    d /= (double)((uint64_t)1 << s);
    ex += s;
  }
#ifdef __CUDA_ARCH__
  return __double2float_rn(__dsqrt_rn(d));
#else
  return (float)sqrt(d);
#endif
}

// ------------------------------------------------------------------------------------------------
// AdamW (docs/numerics.md, "Optimizer")
// ------------------------------------------------------------------------------------------------

/// The gradient's clipping factor: min(1, max_norm / (norm + 1e-6)) when max_norm > 0 (PyTorch's
/// clip_grad_norm_), else 1.
TPRT_HD float tprt_adamw_clip(float max_norm, float norm) {
  if (!(max_norm > 0.0f)) return 1.0f;
  float c = TPRT_DIVF(max_norm, norm + 1e-6f);
  return c < 1.0f ? c : 1.0f;
}

/// Whether AdamW applies a step whose gradient norm is |norm|: at a NaN or infinite norm (some
/// gradient element not finite) the master weights and moments stay as they were (and the weights
/// are written as the master weights rounded), so a step can be skipped with its state updated in
/// place.
TPRT_HD bool tprt_adamw_applies(float norm) { return (tprt_f32_bits(norm) & 0x7F800000u) != 0x7F800000u; }

/// One element's AdamW step; h = [step size, 1-beta1, beta2, 1-beta2, eps, 1-lr·wd, sqrt(1-beta2^t),
/// (max_norm)], |clip| from tprt_adamw_clip. Updates *p, *m, *v.
TPRT_HD void tprt_adamw_elem(float* p, float* m, float* v, float grad, const float* h, float clip) {
  float g = grad * clip;
  float m1 = *m + h[1] * (g - *m);
  float v1 = *v * h[2] + h[3] * (g * g);
  float denom = TPRT_DIVF(TPRT_SQRTF(v1), h[6]) + h[4];
  float p1 = *p * h[5];
  *p = p1 + (-h[0]) * TPRT_DIVF(m1, denom);
  *m = m1;
  *v = v1;
}

#endif  // TPRT_NUMERICS_OPTIM_H_
