// Shared helpers of the tprt_collectives unit tests (test_collectives*.c): references computed
// independently of the runtime's implementation, the test_case_t description of one collective on
// every rank with its expected output bits, and the one-element all-reduce used for the exact
// summation orders.
//
// Rank threads never assert: they store their results, and the test thread checks them after
// tprt_world_run returns (the harness's failure flag is not thread-safe).
#ifndef TEST_COLLECTIVES_UTIL_H_
#define TEST_COLLECTIVES_UTIL_H_

#include <stdlib.h>
#include <string.h>

#include "tprt_collectives.h"
#include "tprt_test.h"

//===----------------------------------------------------------------------===//
// Reference helpers (independent of the runtime's implementation)
//===----------------------------------------------------------------------===//

static inline uint32_t test_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float test_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// bf16 round to nearest even by comparing the distances to both neighbours (finite values).
static inline uint16_t test_round_bf16(float f) {
  uint32_t lo = test_f32_bits(f) & 0xffff0000u, hi = lo + 0x10000u;
  double d_lo = fabs((double)f - (double)test_f32_from_bits(lo));
  double d_hi = fabs((double)test_f32_from_bits(hi) - (double)f);
  if (d_lo != d_hi) return (uint16_t)((d_lo < d_hi ? lo : hi) >> 16);
  return (uint16_t)((((lo >> 16) & 1u) ? hi : lo) >> 16);
}

// The value of f16 bit pattern |h| from its fields (0x7c00 reads as 65536, which is what
// rounding to infinity compares against).
static inline double test_f16_value(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude = ldexp(exponent ? 1024 + mantissa : mantissa, (exponent ? exponent : 1) - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// f16 round to nearest even by binary search over the ordered positive bit patterns.
static inline uint16_t test_round_f16(float f) {
  double x = fabs((double)f);
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  uint16_t lo = 0, hi = 0x7c00;  // the largest pattern <= x lies in [lo, hi]
  if (x >= test_f16_value(hi)) return sign | 0x7c00;
  while (lo < hi) {
    uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
    if (test_f16_value(mid) <= x)
      lo = mid;
    else
      hi = (uint16_t)(mid - 1);
  }
  double d_lo = x - test_f16_value(lo), d_hi = test_f16_value((uint16_t)(lo + 1)) - x;
  uint16_t q = d_lo < d_hi ? lo : d_hi < d_lo ? (uint16_t)(lo + 1) : (lo & 1) ? (uint16_t)(lo + 1) : lo;
  return sign | q;
}

static inline float test_load(int dtype, const void* data, int64_t i) {
  if (dtype == TPRT_DTYPE_F32) return ((const float*)data)[i];
  uint16_t h = ((const uint16_t*)data)[i];
  if (dtype == TPRT_DTYPE_BF16) return test_f32_from_bits((uint32_t)h << 16);
  return (float)test_f16_value(h);
}

// The bits |f| has once stored as |dtype|.
static inline uint32_t test_rounded_bits(int dtype, float f) {
  if (dtype == TPRT_DTYPE_F32) return test_f32_bits(f);
  return dtype == TPRT_DTYPE_BF16 ? test_round_bf16(f) : test_round_f16(f);
}

// The raw bits of element |i| of |data| (element size 1, 2, 4 or 8 bytes).
static inline uint64_t test_element_bits(int dtype, const void* data, int64_t i) {
  size_t size = (size_t)tprt_dtype_bits(dtype) / 8;
  uint64_t u = 0;
  memcpy(&u, (const char*)data + (size_t)i * size, size);
  return u;
}

static inline uint32_t test_hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// A value exactly representable in |dtype| whose exponent varies widely, so that sums depend on
// their order.
static inline float test_value(int dtype, int rank, int64_t i) {
  uint32_t h = test_hash((uint32_t)rank * 1000003u + (uint32_t)i * 7919u + 17u);
  int m = (int)(h % 255u) - 127;
  int e = dtype == TPRT_DTYPE_F16 ? (int)((h >> 8) % 19u) - 14 : (int)((h >> 8) % 41u) - 30;
  return ldexpf((float)m, e);
}

static inline void test_store(int dtype, void* data, int64_t i, float f) {
  if (dtype == TPRT_DTYPE_F32) {
    ((float*)data)[i] = f;
    return;
  }
  ((uint16_t*)data)[i] = (uint16_t)test_rounded_bits(dtype, f);  // exact for test_value's values
}

static inline float test_tree_sum(const float* v, int n) {
  return n == 1 ? v[0] : test_tree_sum(v, n / 2) + test_tree_sum(v + n / 2, n / 2);
}

// The documented orders: ANY is ((v0 + v1) + v2) + ...; CANONICAL the pairwise tree.
static inline float test_sum(const float* v, int n, tprt_order_t order) {
  if (order == TPRT_ORDER_CANONICAL) return test_tree_sum(v, n);
  float acc = v[0];
  for (int g = 1; g < n; ++g) acc = acc + v[g];
  return acc;
}

// The group of world rank |r| over |mask| on a mesh: the ranks that share r's coordinates off
// the mask, in increasing world index (which is row-major order over the masked coordinates).
// Returns the group size and stores r's index in |*out_index|.
static inline int test_group(int num_axes, const int* sizes, uint32_t mask, int r, int* members, int* out_index) {
  int world = 1;
  for (int a = 0; a < num_axes; ++a) world *= sizes[a];
  int n = 0;
  for (int q = 0; q < world; ++q) {
    bool same = true;
    for (int a = num_axes - 1, rq = q, rr = r; a >= 0; --a) {
      if (!(mask & (1u << a)) && rq % sizes[a] != rr % sizes[a]) same = false;
      rq /= sizes[a];
      rr /= sizes[a];
    }
    if (!same) continue;
    if (q == r) *out_index = n;
    members[n++] = q;
  }
  return n;
}

static inline int64_t test_numel(int rank, const int64_t* dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

//===----------------------------------------------------------------------===//
// One collective on every rank, checked against the reference
//===----------------------------------------------------------------------===//

typedef enum { K_ALL_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_ALL_TO_ALL } test_kind_t;

static const char* const test_kind_names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};

typedef struct test_case_t {
  test_kind_t kind;
  int num_axes;
  int sizes[TPRT_MAX_MESH_AXES];
  uint32_t mask;
  int in_dtype, out_dtype;
  tprt_order_t order;
  int dim, concat_dim;
  int rank;
  int64_t in_dims[TPRT_MAX_RANK], out_dims[TPRT_MAX_RANK];
  bool async;     // *_start, a barrier, then tprt_wait
  bool in_place;  // all_reduce with out == in
  // Filled by run_case.
  int world_size;
  void* in[TPRT_MAX_WORLD_SIZE];
  void* original[TPRT_MAX_WORLD_SIZE];  // the inputs before the run
  void* out[TPRT_MAX_WORLD_SIZE];
  tprt_status_t status[TPRT_MAX_WORLD_SIZE];  // each rank writes its own slot
} test_case_t;

// Unravels |i| over |dims| into |index|.
static inline void test_unravel(int64_t i, int rank, const int64_t* dims, int64_t* index) {
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
}

static inline int64_t test_ravel(int rank, const int64_t* dims, const int64_t* index) {
  int64_t i = 0;
  for (int d = 0; d < rank; ++d) i = i * dims[d] + index[d];
  return i;
}

// The expected bits of element |i| of world rank |r|'s output.
static inline uint64_t test_expected(const test_case_t* c, int r, int64_t i) {
  int members[TPRT_MAX_WORLD_SIZE], gi = 0;
  int g = test_group(c->num_axes, c->sizes, c->mask, r, members, &gi);
  int64_t index[TPRT_MAX_RANK] = {0};
  test_unravel(i, c->rank, c->out_dims, index);
  int source = -1;  // data movement: the member whose input holds the element
  switch (c->kind) {
    case K_ALL_REDUCE:
      break;
    case K_REDUCE_SCATTER:
      index[c->dim] += gi * c->out_dims[c->dim];
      break;
    case K_ALL_GATHER:
      source = (int)(index[c->dim] / c->in_dims[c->dim]);
      index[c->dim] %= c->in_dims[c->dim];
      break;
    case K_ALL_TO_ALL: {
      int64_t box[TPRT_MAX_RANK];
      memcpy(box, c->in_dims, sizeof box);
      box[c->dim] /= g;
      source = (int)(index[c->concat_dim] / box[c->concat_dim]);
      index[c->concat_dim] %= box[c->concat_dim];
      index[c->dim] += gi * box[c->dim];
      break;
    }
  }
  int64_t j = test_ravel(c->rank, c->in_dims, index);
  if (source >= 0) return test_element_bits(c->in_dtype, c->original[members[source]], j);
  float v[TPRT_MAX_WORLD_SIZE] = {0};
  for (int m = 0; m < g; ++m) v[m] = test_load(c->in_dtype, c->original[members[m]], j);
  return test_rounded_bits(c->out_dtype, test_sum(v, g, c->order));
}

// Sets |c|'s shapes for its kind from a base shape of rank 3 and group size |g|.
static inline void set_shapes(test_case_t* c, int g, int64_t d0, int64_t d1, int64_t d2) {
  c->rank = 3;
  int64_t base[3] = {d0, d1, d2};
  memcpy(c->in_dims, base, sizeof base);
  memcpy(c->out_dims, base, sizeof base);
  switch (c->kind) {
    case K_ALL_REDUCE:
      break;
    case K_ALL_GATHER:
      c->out_dims[c->dim] *= g;
      break;
    case K_REDUCE_SCATTER:
      c->in_dims[c->dim] *= g;
      break;
    case K_ALL_TO_ALL:
      c->in_dims[c->dim] *= g;
      c->out_dims[c->dim] = c->in_dims[c->dim] / g;
      c->out_dims[c->concat_dim] *= g;
      break;
  }
}

//===----------------------------------------------------------------------===//
// Exact summation orders: one element per rank
//===----------------------------------------------------------------------===//

typedef struct test_order_t {
  int size;
  int in_dtype, out_dtype;
  float values[8];  // rank r contributes values[r]
  tprt_order_t order;
  uint32_t max_ranks;  // bit r: rank r calls tprt_all_reduce_max instead
  uint32_t bits[8];    // each rank's result
  tprt_status_t status[8];
} test_order_t;

static inline tprt_status_t test_order_rank(tprt_rank_t* rank, void* user) {
  test_order_t* t = user;
  int r = tprt_rank_index(rank);
  uint32_t in_storage = 0, out_storage = 0;
  if (t->in_dtype == TPRT_DTYPE_F32)
    memcpy(&in_storage, &t->values[r], 4);
  else
    in_storage = test_rounded_bits(t->in_dtype, t->values[r]);
  int64_t one = 1;
  tprt_tensor_t in = tprt_tensor_make(&in_storage, t->in_dtype, 1, &one);
  tprt_tensor_t out = tprt_tensor_make(&out_storage, t->out_dtype, 1, &one);
  t->status[r] =
      (t->max_ranks >> r) & 1 ? tprt_all_reduce_max(rank, 1, &in, &out) : tprt_all_reduce(rank, 1, &in, &out, t->order);
  t->bits[r] = out_storage;
  return NULL;
}

#endif  // TEST_COLLECTIVES_UTIL_H_
