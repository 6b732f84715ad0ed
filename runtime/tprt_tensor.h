// A view of a dense, row-major tensor in host memory: what kernels and collectives take.
// The view does not own |data|.
#ifndef TPRT_TENSOR_H_
#define TPRT_TENSOR_H_

#include <stdbool.h>
#include <stdint.h>

#include "tprt_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Largest rank of a runtime tensor (the dialect's limit too).
#define TPRT_MAX_RANK 8

typedef struct tprt_tensor_t {
  void* data;
  int dtype;  // tprt_dtype_t
  int rank;
  int64_t dims[TPRT_MAX_RANK];
} tprt_tensor_t;

/// The KV cache a decoding attention reads (tp.attention's k_cache, v_cache and cache_len): k and
/// v [B*C, Hkv*D] hold C rows per sequence, of which the first len[b] (an i32 tensor [B]) are
/// sequence b's earlier tokens. Kernels take a NULL cache for attention without one.
typedef struct tprt_kv_cache_t {
  const tprt_tensor_t* k;
  const tprt_tensor_t* v;
  const tprt_tensor_t* len;
} tprt_kv_cache_t;

/// Returns the number of elements (1 for rank 0).
static inline int64_t tprt_tensor_numel(const tprt_tensor_t* t) {
  // An empty tensor may have other dimensions whose product alone overflows (a safetensors file
  // may hold shape [2^40, 2^40, 0]); it has no elements.
  for (int i = 0; i < t->rank; ++i)
    if (t->dims[i] == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i) n *= t->dims[i];
  return n;
}

/// Returns the bytes the elements occupy.
static inline size_t tprt_tensor_bytes(const tprt_tensor_t* t) { return tprt_dtype_bytes(t->dtype, tprt_tensor_numel(t)); }

/// Makes a rank-|rank| view of |data|.
static inline tprt_tensor_t tprt_tensor_make(void* data, int dtype, int rank, const int64_t* dims) {
  tprt_tensor_t t;
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  for (int i = 0; i < TPRT_MAX_RANK; ++i) t.dims[i] = i < rank ? dims[i] : 1;
  return t;
}

/// True when both have the same dtype and shape.
static inline bool tprt_tensor_same_layout(const tprt_tensor_t* a, const tprt_tensor_t* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; ++i)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

#ifdef __cplusplus
}
#endif

#endif  // TPRT_TENSOR_H_
