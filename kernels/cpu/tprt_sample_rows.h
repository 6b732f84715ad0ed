// The arithmetic of tp.sample (docs/numerics.md, "Sampling"), host and device: a row's Gumbel
// noise from Philox, the masked canonical sums of its nucleus search and its draw. Every function
// depends on one row and the row's own parameters only, so a request's token never depends on
// which other requests share its batch, nor on the batch's size or order.
#ifndef TPRT_SAMPLE_ROWS_H_
#define TPRT_SAMPLE_ROWS_H_

#include "tprt_numerics.h"

/// The Philox stream of a row: its request id (high word) and position (low word).
TPRT_HD uint64_t tprt_sample_stream(uint32_t request, uint32_t position) {
  return ((uint64_t)request << 32) | position;
}

/// The Gumbel noise of vocabulary id |v| of the row of (|seed|, |stream|): -ln(-ln u) with
/// u = (2·b + 1)·2^-24 from the top 23 bits b of Philox element v, so u is in (0, 1) and exact.
TPRT_HD float tprt_sample_gumbel(uint64_t seed, uint64_t stream, int64_t v) {
  uint32_t b = tprt_philox_bits(seed, stream, (uint64_t)v) >> 9;
  float u = (float)(2u * b + 1u) * 5.9604644775390625e-08f /* 2^-24 */;
  return -tprt_logf(-tprt_logf(u));
}

/// A logit as the sampler reads it: NaN counts as -inf (never drawn, no mass).
TPRT_HD float tprt_sample_logit(float z) { return z != z ? tprt_f32_from_bits(0xFF800000u) : z; }

/// The probability weight of logit |z| at temperature |t| against the row's maximum |m|:
/// exp((z - m) / t), f32, tprt_expf.
TPRT_HD float tprt_sample_weight(float z, float m, float t) { return tprt_expf(TPRT_DIVF(z - m, t)); }

/// The mass of the logits at or above |tau|: the weights w[v] of the v with z[v] >= tau summed in
/// the canonical row order (lane j adds v = j, j+256, ... in order, +0.0 for the others, then
/// tprt_row_tree). Adding +0.0 leaves a sum as it is, so the mass is nondecreasing as tau falls.
TPRT_HD float tprt_sample_mass(const float* z, const float* w, int64_t n, float tau) {
  float lanes[TPRT_ROW_LANES];
  for (int j = 0; j < TPRT_ROW_LANES; ++j) lanes[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (z[i] >= tau) lanes[i % TPRT_ROW_LANES] = lanes[i % TPRT_ROW_LANES] + w[i];
  return tprt_row_tree(lanes);
}

/// The draw's key of vocabulary id v: z / t + G (f32; -inf for an excluded or -inf logit).
TPRT_HD float tprt_sample_key(float z, float t, float gumbel) { return TPRT_DIVF(z, t) + gumbel; }

/// Whether key |a| of id |ia| beats key |b| of id |ib|: larger, ties to the lower id.
TPRT_HD bool tprt_sample_beats(float a, int64_t ia, float b, int64_t ib) { return a > b || (a == b && ia < ib); }

#endif  // TPRT_SAMPLE_ROWS_H_
