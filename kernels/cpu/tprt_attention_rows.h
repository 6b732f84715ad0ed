// The canonical arithmetic of tp.rope and tp.attention (docs/numerics.md, "Attention"), one row at
// a time, in f32 on widened operands. Shared by the CPU kernels (cpu_attention.c) and the CUDA
// exact-mode kernels, so both produce the same bits; faster kernels may order differently only
// in fast and invariant modes.
#ifndef TPRT_ATTENTION_ROWS_H_
#define TPRT_ATTENTION_ROWS_H_

#include <stdint.h>

#include "tprt_numerics.h"

/// One rotated pair of a head: a = x[i], b = x[i + D/2] with the table entries c1 = cos[i],
/// c2 = cos[i + D/2], s1 = sin[i], s2 = sin[i + D/2]. Forward (rotate_half):
///   y[i] = a·c1 - b·s1,   y[i + D/2] = b·c2 + a·s2
/// Inverse (the transpose of that map, rope's gradient):
///   y[i] = a·c1 + b·s2,   y[i + D/2] = b·c2 - a·s1
/// Each product is rounded to f32, then the sum (no fused multiply-add).
TPRT_HD void tprt_rope_pair(float a, float b, float c1, float c2, float s1, float s2, int inverse, float* ya,
                            float* yb) {
  if (!inverse) {
    float p = a * c1, q = b * s1, r = b * c2, t = a * s2;
    *ya = p - q;
    *yb = r + t;
  } else {
    float p = a * c1, q = b * s2, r = b * c2, t = a * s1;
    *ya = p + q;
    *yb = r - t;
  }
}

/// The dot product of attention: from +0.0, acc = fmaf(a[d], b[d], acc) for d = 0..n-1.
TPRT_HD float tprt_attn_dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t d = 0; d < n; ++d) acc = TPRT_FMAF(a[d], b[d], acc);
  return acc;
}

/// The softmax statistics of one query row from its n >= 1 visible scores s[0..n): the maximum m
/// (a left-to-right scan with >, so a NaN first score propagates), e[j] = exp(s[j] - m) (e may be
/// s) and l, the canonical row sum of e (tprt_row_sum). Probabilities are e[j] / l.
TPRT_HD void tprt_attn_softmax_stats(const float* s, float* e, int64_t n, float* out_m, float* out_l) {
  float m = s[0];
  for (int64_t j = 1; j < n; ++j)
    if (s[j] > m) m = s[j];
  for (int64_t j = 0; j < n; ++j) e[j] = tprt_expf(s[j] - m);
  *out_m = m;
  *out_l = tprt_row_sum(e, n);
}

/// A row's log-sum-exp of its scaled scores from its softmax statistics: m + ln(l).
TPRT_HD float tprt_attn_lse(float m, float l) { return m + tprt_logf(l); }

/// The number of keys query |i| (0-based within its sequence of |seq_len| tokens) sees.
TPRT_HD int64_t tprt_attn_visible(int64_t i, int64_t seq_len, int causal) { return causal ? i + 1 : seq_len; }

/// 1/sqrt(D) when |scale| is 0 (the dialect's default), else |scale|.
TPRT_HD float tprt_attn_scale(float scale, int64_t head_dim) {
  return scale != 0.0f ? scale : tprt_rsqrtf((float)head_dim);
}

#endif  // TPRT_ATTENTION_ROWS_H_
