// Counter-based random numbers: Philox4x32-10 and the uniform draws built on it
// (a part of tprt_numerics.h, which includes it; docs/numerics.md).
#ifndef TPRT_NUMERICS_PHILOX_H_
#define TPRT_NUMERICS_PHILOX_H_

#include "tprt_numerics.h"

// ------------------------------------------------------------------------------------------------
// Counter-based random numbers: Philox4x32-10 (Salmon et al., Random123 constants)
// ------------------------------------------------------------------------------------------------

/// Philox4x32 with 10 rounds: |ctr| (4 words) and |key| (2 words) -> |out| (4 words). Matches the
/// Random123 known-answer vectors.
TPRT_HD void tprt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;  // golden ratio
      k1 += 0xBB67AE85u;  // sqrt(3) - 1
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// The random bits of elements 4·block .. 4·block+3 of stream |stream| under |seed|:
/// Philox4x32-10 with key (seed lo, seed hi) and counter (block lo, block hi, stream lo, stream hi).
TPRT_HD void tprt_philox_block(uint64_t seed, uint64_t stream, uint64_t block, uint32_t out[4]) {
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
  tprt_philox4x32_10(ctr, key, out);
}

/// The 32 random bits of element |i| of stream |stream| under |seed|: word i mod 4 of its block.
TPRT_HD uint32_t tprt_philox_bits(uint64_t seed, uint64_t stream, uint64_t i) {
  uint32_t out[4];
  tprt_philox_block(seed, stream, i >> 2, out);
  return out[i & 3u];
}

/// A uniform f32 in [0, 1) from 32 random bits: the top 24 times 2^-24 (exact).
TPRT_HD float tprt_philox_uniform_of_bits(uint32_t bits) {
  return (float)(bits >> 8) * 5.9604644775390625e-08f /* 2^-24 */;
}

/// A uniform f32 in [0, 1) for element |i|: tprt_philox_uniform_of_bits of tprt_philox_bits.
TPRT_HD float tprt_philox_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  return tprt_philox_uniform_of_bits(tprt_philox_bits(seed, stream, i));
}

#endif  // TPRT_NUMERICS_PHILOX_H_
