// Helpers for the CPU kernel unit tests (test_cpu_*.c): owned test tensors, deterministic random
// data rounded to a dtype, and comparison against float64 references with a tolerance per dtype.
#ifndef TEST_CPU_UTIL_H_
#define TEST_CPU_UTIL_H_

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_cpu_kernels.h"
#include "tprt_numerics.h"
#include "tprt_test.h"

/// A tensor view plus the buffer it owns (free with tc_free).
typedef struct {
  tprt_tensor_t t;
} tc_tensor_t;

/// Allocates a zeroed tensor of |rank| dims given as varargs (int64_t).
static inline tc_tensor_t tc_make(int dtype, int rank, ...) {
  int64_t dims[TPRT_MAX_RANK];
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; ++i) dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  tc_tensor_t r;
  r.t = tprt_tensor_make(NULL, dtype, rank, dims);
  size_t bytes = tprt_tensor_bytes(&r.t);
  r.t.data = calloc(1, bytes ? bytes : 1);
  return r;
}

static inline void tc_free(tc_tensor_t* t) {
  free(t->t.data);
  t->t.data = NULL;
}

/// Reads element i of a float tensor as double.
static inline double tc_get(const tprt_tensor_t* t, int64_t i) {
  switch (t->dtype) {
    case TPRT_DTYPE_BF16:
      return tprt_bf16_to_f32(((const uint16_t*)t->data)[i]);
    case TPRT_DTYPE_F16:
      return tprt_f16_to_f32(((const uint16_t*)t->data)[i]);
    default:
      return ((const float*)t->data)[i];
  }
}

/// Writes float |v| rounded to the tensor's dtype.
static inline void tc_set(tprt_tensor_t* t, int64_t i, float v) {
  switch (t->dtype) {
    case TPRT_DTYPE_BF16:
      ((uint16_t*)t->data)[i] = tprt_f32_to_bf16(v);
      break;
    case TPRT_DTYPE_F16:
      ((uint16_t*)t->data)[i] = tprt_f32_to_f16(v);
      break;
    default:
      ((float*)t->data)[i] = v;
      break;
  }
}

/// Raw bits of element i (16 or 32 bits) for bitwise comparisons.
static inline uint32_t tc_bits(const tprt_tensor_t* t, int64_t i) {
  // memcpy, not a uint32_t* read: the data was written as float (strict aliasing).
  if (t->dtype == TPRT_DTYPE_F32) {
    uint32_t u;
    memcpy(&u, (const char*)t->data + 4 * i, 4);
    return u;
  }
  return ((const uint16_t*)t->data)[i];
}

/// A small deterministic generator (splitmix64) so every run sees the same data.
static inline uint64_t tc_next(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform double in [lo, hi).
static inline double tc_uniform(uint64_t* s, double lo, double hi) {
  return lo + (hi - lo) * (double)(tc_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/// Fills a float tensor with uniform values in [lo, hi), rounded to its dtype.
static inline void tc_fill(tprt_tensor_t* t, uint64_t seed, double lo, double hi) {
  uint64_t s = seed;
  int64_t n = tprt_tensor_numel(t);
  for (int64_t i = 0; i < n; ++i) tc_set(t, i, (float)tc_uniform(&s, lo, hi));
}

/// Relative tolerance of a result stored in |dtype|: a few roundings of that format.
static inline double tc_rtol(int dtype) {
  return dtype == TPRT_DTYPE_BF16 ? 1e-2 : dtype == TPRT_DTYPE_F16 ? 1e-3 : 1e-5;
}

/// Compares every element of |got| against ref[i] with |got - ref| <= rtol·(|ref| + scale[i]) +
/// atol (scale: the magnitude of the terms that were summed, NULL for 0; atol: half the spacing
/// of f16 subnormals for f16 results, else negligible). Reports the first few mismatches and
/// returns their count.
static inline int64_t tc_check_near(const char* what, const tprt_tensor_t* got, const double* ref, const double* scale,
                                    double rtol) {
  int64_t n = tprt_tensor_numel(got), bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = tc_get(got, i), r = ref[i], m = fabs(r) + (scale ? scale[i] : 0.0);
    double atol = got->dtype == TPRT_DTYPE_F16 ? 0x1p-25 : 1e-30;
    if (!(fabs(g - r) <= rtol * m + atol)) {
      if (bad < 5)
        fprintf(stderr, "%s: element %lld: got %.9g, reference %.9g (rtol %g)\n", what, (long long)i, g, r, rtol);
      ++bad;
    }
  }
  if (bad) TPRT__FAIL("%s: %lld of %lld elements outside tolerance", what, (long long)bad, (long long)n);
  return bad;
}

/// True when two tensors hold the same bytes.
static inline bool tc_same_bytes(const tprt_tensor_t* a, const tprt_tensor_t* b) {
  size_t n = tprt_tensor_bytes(a);
  return n == tprt_tensor_bytes(b) && memcmp(a->data, b->data, n) == 0;
}

/// FNV-1a over the bytes of a tensor (frozen-bits regression checks).
static inline uint64_t tc_hash(const tprt_tensor_t* t) {
  uint64_t h = 0xCBF29CE484222325ull;
  const unsigned char* p = (const unsigned char*)t->data;
  for (size_t i = 0; i < tprt_tensor_bytes(t); ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

#endif  // TEST_CPU_UTIL_H_
