// Unit tests of runtime/tprt_collectives: every collective at world sizes 1, 2, 3, 4 and 8 and
// on a 2x4 mesh against references computed here, the exact bits of both summation orders,
// in-place all-reduce, asynchronous starts and waits in interleaved orders, and the exact
// messages of argument errors and cross-rank mismatches.
//
// Rank threads never assert: they store their results, and the test thread checks them after
// tprt_world_run returns (the harness's failure flag is not thread-safe).
#include <stdlib.h>
#include <string.h>

#include "tprt_collectives.h"
#include "tprt_test.h"

//===----------------------------------------------------------------------===//
// Reference helpers (independent of the runtime's implementation)
//===----------------------------------------------------------------------===//

static uint32_t test_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float test_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// bf16 round to nearest even by comparing the distances to both neighbours (finite values).
static uint16_t test_round_bf16(float f) {
  uint32_t lo = test_f32_bits(f) & 0xffff0000u, hi = lo + 0x10000u;
  double d_lo = fabs((double)f - (double)test_f32_from_bits(lo));
  double d_hi = fabs((double)test_f32_from_bits(hi) - (double)f);
  if (d_lo != d_hi) return (uint16_t)((d_lo < d_hi ? lo : hi) >> 16);
  return (uint16_t)((((lo >> 16) & 1u) ? hi : lo) >> 16);
}

// The value of f16 bit pattern |h| from its fields (0x7c00 reads as 65536, which is what
// rounding to infinity compares against).
static double test_f16_value(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude = ldexp(exponent ? 1024 + mantissa : mantissa, (exponent ? exponent : 1) - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// f16 round to nearest even by binary search over the ordered positive bit patterns.
static uint16_t test_round_f16(float f) {
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

static float test_load(int dtype, const void* data, int64_t i) {
  if (dtype == TPRT_DTYPE_F32) return ((const float*)data)[i];
  uint16_t h = ((const uint16_t*)data)[i];
  if (dtype == TPRT_DTYPE_BF16) return test_f32_from_bits((uint32_t)h << 16);
  return (float)test_f16_value(h);
}

// The bits |f| has once stored as |dtype|.
static uint32_t test_rounded_bits(int dtype, float f) {
  if (dtype == TPRT_DTYPE_F32) return test_f32_bits(f);
  return dtype == TPRT_DTYPE_BF16 ? test_round_bf16(f) : test_round_f16(f);
}

// The raw bits of element |i| of |data| (element size 1, 2, 4 or 8 bytes).
static uint64_t test_element_bits(int dtype, const void* data, int64_t i) {
  size_t size = (size_t)tprt_dtype_bits(dtype) / 8;
  uint64_t u = 0;
  memcpy(&u, (const char*)data + (size_t)i * size, size);
  return u;
}

static uint32_t test_hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// A value exactly representable in |dtype| whose exponent varies widely, so that sums depend on
// their order.
static float test_value(int dtype, int rank, int64_t i) {
  uint32_t h = test_hash((uint32_t)rank * 1000003u + (uint32_t)i * 7919u + 17u);
  int m = (int)(h % 255u) - 127;
  int e = dtype == TPRT_DTYPE_F16 ? (int)((h >> 8) % 19u) - 14 : (int)((h >> 8) % 41u) - 30;
  return ldexpf((float)m, e);
}

static void test_store(int dtype, void* data, int64_t i, float f) {
  if (dtype == TPRT_DTYPE_F32) {
    ((float*)data)[i] = f;
    return;
  }
  ((uint16_t*)data)[i] = (uint16_t)test_rounded_bits(dtype, f);  // exact for test_value's values
}

static float test_tree_sum(const float* v, int n) {
  return n == 1 ? v[0] : test_tree_sum(v, n / 2) + test_tree_sum(v + n / 2, n / 2);
}

// The documented orders: ANY is ((v0 + v1) + v2) + ...; CANONICAL the pairwise tree.
static float test_sum(const float* v, int n, tprt_order_t order) {
  if (order == TPRT_ORDER_CANONICAL) return test_tree_sum(v, n);
  float acc = v[0];
  for (int g = 1; g < n; ++g) acc = acc + v[g];
  return acc;
}

// The group of world rank |r| over |mask| on a mesh: the ranks that share r's coordinates off
// the mask, in increasing world index (which is row-major order over the masked coordinates).
// Returns the group size and stores r's index in |*out_index|.
static int test_group(int num_axes, const int* sizes, uint32_t mask, int r, int* members, int* out_index) {
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

static int64_t test_numel(int rank, const int64_t* dims) {
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

static tprt_status_t test_call(tprt_rank_t* rank, const test_case_t* c, const tprt_tensor_t* in, tprt_tensor_t* out) {
  if (c->async) {
    tprt_future_t* future = NULL;
    tprt_status_t s = c->kind == K_ALL_GATHER
                          ? tprt_all_gather_start(rank, c->mask, in, out, c->dim, &future)
                          : tprt_reduce_scatter_start(rank, c->mask, in, out, c->dim, c->order, &future);
    if (s) return s;
    // Another collective on the same group while this one is in flight.
    s = tprt_barrier(rank, c->mask);
    return tprt_status_join(s, tprt_wait(rank, future));
  }
  switch (c->kind) {
    case K_ALL_REDUCE:
      return tprt_all_reduce(rank, c->mask, in, out, c->order);
    case K_ALL_GATHER:
      return tprt_all_gather(rank, c->mask, in, out, c->dim);
    case K_REDUCE_SCATTER:
      return tprt_reduce_scatter(rank, c->mask, in, out, c->dim, c->order);
    case K_ALL_TO_ALL:
      return tprt_all_to_all(rank, c->mask, in, out, c->dim, c->concat_dim);
  }
  return NULL;
}

static tprt_status_t test_case_rank(tprt_rank_t* rank, void* user) {
  test_case_t* c = user;
  int r = tprt_rank_index(rank);
  tprt_tensor_t in = tprt_tensor_make(c->in[r], c->in_dtype, c->rank, c->in_dims);
  tprt_tensor_t out = tprt_tensor_make(c->out[r], c->out_dtype, c->rank, c->out_dims);
  c->status[r] = test_call(rank, c, &in, c->in_place ? &in : &out);
  return NULL;
}

// Unravels |i| over |dims| into |index|.
static void test_unravel(int64_t i, int rank, const int64_t* dims, int64_t* index) {
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
}

static int64_t test_ravel(int rank, const int64_t* dims, const int64_t* index) {
  int64_t i = 0;
  for (int d = 0; d < rank; ++d) i = i * dims[d] + index[d];
  return i;
}

// The expected bits of element |i| of world rank |r|'s output.
static uint64_t test_expected(const test_case_t* c, int r, int64_t i) {
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

// Runs |c| on a fresh world and checks every rank's output bit for bit; |label| names the case
// in failure messages.
static void run_case(test_case_t* c, const char* label) {
  tprt_world_options_t options = {0};
  static const char* const names[TPRT_MAX_MESH_AXES] = {"a0", "a1", "a2", "a3"};
  options.num_axes = c->num_axes;
  for (int a = 0; a < c->num_axes; ++a) options.axes[a] = (tprt_mesh_axis_t){names[a], c->sizes[a]};
  options.collective_timeout_s = 30;
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  if (!world) return;
  c->world_size = tprt_world_size(world);
  int64_t in_n = test_numel(c->rank, c->in_dims), out_n = test_numel(c->rank, c->out_dims);
  size_t in_bytes = tprt_dtype_bytes(c->in_dtype, in_n), out_bytes = tprt_dtype_bytes(c->out_dtype, out_n);
  bool is_float = c->in_dtype == TPRT_DTYPE_F32 || c->in_dtype == TPRT_DTYPE_BF16 || c->in_dtype == TPRT_DTYPE_F16;
  for (int r = 0; r < c->world_size; ++r) {
    c->in[r] = malloc(in_bytes + 1);
    c->original[r] = malloc(in_bytes + 1);
    c->out[r] = c->in_place ? c->in[r] : malloc(out_bytes + 1);
    c->status[r] = NULL;
    if (is_float) {
      for (int64_t i = 0; i < in_n; ++i) test_store(c->in_dtype, c->in[r], i, test_value(c->in_dtype, r, i));
    } else {
      for (size_t i = 0; i < in_bytes; ++i)
        ((unsigned char*)c->in[r])[i] = (unsigned char)test_hash((uint32_t)(r * 7777 + (int)i));
    }
    memcpy(c->original[r], c->in[r], in_bytes);
    if (!c->in_place) memset(c->out[r], 0xa5, out_bytes);
  }
  TPRT_EXPECT_OK(tprt_world_run(world, test_case_rank, c));
  for (int r = 0; r < c->world_size; ++r) {
    if (c->status[r]) {
      char buf[1024];
      TPRT__FAIL("%s: rank %d: %s", label, r, tprt_status_format(c->status[r], buf, sizeof buf));
      tprt_status_free(c->status[r]);
      continue;
    }
    for (int64_t i = 0; i < out_n; ++i) {
      uint64_t got = test_element_bits(c->out_dtype, c->out[r], i), want = test_expected(c, r, i);
      if (got != want) {
        TPRT__FAIL("%s: rank %d element %lld: 0x%llx, expected 0x%llx", label, r, (long long)i, (unsigned long long)got,
                   (unsigned long long)want);
        break;
      }
    }
    if (!c->in_place && memcmp(c->in[r], c->original[r], in_bytes) != 0)
      TPRT__FAIL("%s: rank %d: the collective changed its input", label, r);
  }
  for (int r = 0; r < c->world_size; ++r) {
    if (!c->in_place) free(c->out[r]);
    free(c->in[r]);
    free(c->original[r]);
  }
  tprt_world_destroy(world);
}

// Sets |c|'s shapes for its kind from a base shape of rank 3 and group size |g|.
static void set_shapes(test_case_t* c, int g, int64_t d0, int64_t d1, int64_t d2) {
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

static const int test_world_sizes[] = {1, 2, 3, 4, 8};

//===----------------------------------------------------------------------===//
// Results against the reference
//===----------------------------------------------------------------------===//

TPRT_TEST(all_reduce_every_size_dtype_and_order) {
  static const int dtypes[][2] = {{TPRT_DTYPE_F32, TPRT_DTYPE_F32},
                                  {TPRT_DTYPE_BF16, TPRT_DTYPE_BF16},
                                  {TPRT_DTYPE_F16, TPRT_DTYPE_F16},
                                  {TPRT_DTYPE_F32, TPRT_DTYPE_BF16},
                                  {TPRT_DTYPE_BF16, TPRT_DTYPE_F32}};
  for (size_t s = 0; s < sizeof test_world_sizes / sizeof *test_world_sizes; ++s)
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; ++t)
      for (tprt_order_t order = TPRT_ORDER_ANY; order <= TPRT_ORDER_CANONICAL; ++order) {
        int g = test_world_sizes[s];
        if (order == TPRT_ORDER_CANONICAL && (g & (g - 1))) continue;
        test_case_t c = {.kind = K_ALL_REDUCE, .num_axes = 1, .sizes = {g}, .mask = 1, .order = order};
        c.in_dtype = dtypes[t][0];
        c.out_dtype = dtypes[t][1];
        set_shapes(&c, g, 3, 5, 7);  // 105 elements: more than one reduction block
        char label[128];
        snprintf(label, sizeof label, "all_reduce world %d %s->%s order %d", g, tprt_dtype_name(c.in_dtype),
                 tprt_dtype_name(c.out_dtype), order);
        run_case(&c, label);
      }
}

TPRT_TEST(all_reduce_in_place) {
  for (size_t s = 0; s < sizeof test_world_sizes / sizeof *test_world_sizes; ++s) {
    int g = test_world_sizes[s];
    test_case_t c = {.kind = K_ALL_REDUCE, .num_axes = 1, .sizes = {g}, .mask = 1, .in_place = true};
    c.in_dtype = c.out_dtype = TPRT_DTYPE_BF16;
    c.order = (g & (g - 1)) ? TPRT_ORDER_ANY : TPRT_ORDER_CANONICAL;
    set_shapes(&c, g, 2, 3, 50);
    char label[64];
    snprintf(label, sizeof label, "in-place all_reduce world %d", g);
    run_case(&c, label);
  }
}

TPRT_TEST(all_gather_every_size_and_dim) {
  static const int dtypes[] = {TPRT_DTYPE_F32, TPRT_DTYPE_BF16, TPRT_DTYPE_F8E4M3FN, TPRT_DTYPE_I64};
  for (size_t s = 0; s < sizeof test_world_sizes / sizeof *test_world_sizes; ++s)
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; ++t)
      for (int dim = 0; dim < 3; ++dim) {
        int g = test_world_sizes[s];
        test_case_t c = {.kind = K_ALL_GATHER, .num_axes = 1, .sizes = {g}, .mask = 1, .dim = dim};
        c.in_dtype = c.out_dtype = dtypes[t];
        set_shapes(&c, g, 2, 3, 4);
        char label[128];
        snprintf(label, sizeof label, "all_gather world %d %s dim %d", g, tprt_dtype_name(c.in_dtype), dim);
        run_case(&c, label);
        c.async = true;
        snprintf(label, sizeof label, "all_gather_start world %d %s dim %d", g, tprt_dtype_name(c.in_dtype), dim);
        run_case(&c, label);
      }
}

TPRT_TEST(reduce_scatter_every_size_dim_and_order) {
  for (size_t s = 0; s < sizeof test_world_sizes / sizeof *test_world_sizes; ++s)
    for (int dim = 0; dim < 3; ++dim)
      for (tprt_order_t order = TPRT_ORDER_ANY; order <= TPRT_ORDER_CANONICAL; ++order) {
        int g = test_world_sizes[s];
        if (order == TPRT_ORDER_CANONICAL && (g & (g - 1))) continue;
        test_case_t c = {.kind = K_REDUCE_SCATTER, .num_axes = 1, .sizes = {g}, .mask = 1, .dim = dim, .order = order};
        c.in_dtype = TPRT_DTYPE_F32;
        c.out_dtype = dim == 1 ? TPRT_DTYPE_BF16 : TPRT_DTYPE_F32;
        set_shapes(&c, g, 2, 3, 20);
        char label[128];
        snprintf(label, sizeof label, "reduce_scatter world %d dim %d order %d", g, dim, order);
        run_case(&c, label);
        c.async = true;
        snprintf(label, sizeof label, "reduce_scatter_start world %d dim %d order %d", g, dim, order);
        run_case(&c, label);
      }
}

TPRT_TEST(all_to_all_every_size_and_dims) {
  static const int dims[][2] = {{0, 1}, {1, 0}, {2, 0}, {0, 2}, {1, 1}, {2, 2}};
  for (size_t s = 0; s < sizeof test_world_sizes / sizeof *test_world_sizes; ++s)
    for (size_t d = 0; d < sizeof dims / sizeof *dims; ++d) {
      int g = test_world_sizes[s];
      test_case_t c = {.kind = K_ALL_TO_ALL, .num_axes = 1, .sizes = {g}, .mask = 1};
      c.dim = dims[d][0];
      c.concat_dim = dims[d][1];
      c.in_dtype = c.out_dtype = d % 2 ? TPRT_DTYPE_BF16 : TPRT_DTYPE_I32;
      set_shapes(&c, g, 2, 3, 4);
      char label[128];
      snprintf(label, sizeof label, "all_to_all world %d split %d concat %d", g, c.dim, c.concat_dim);
      run_case(&c, label);
    }
}

/// On a 2x4 mesh every collective works over each axis alone and over both.
TPRT_TEST(collectives_on_a_2x4_mesh) {
  for (uint32_t mask = 1; mask <= 3; ++mask)
    for (int k = K_ALL_REDUCE; k <= K_ALL_TO_ALL; ++k) {
      int g = (mask & 1 ? 2 : 1) * (mask & 2 ? 4 : 1);
      test_case_t c = {.kind = (test_kind_t)k, .num_axes = 2, .sizes = {2, 4}, .mask = mask};
      c.in_dtype = c.out_dtype = TPRT_DTYPE_F32;
      c.order = TPRT_ORDER_CANONICAL;
      c.dim = 1;
      c.concat_dim = 0;
      set_shapes(&c, g, 3, 2, 5);
      char label[128];
      snprintf(label, sizeof label, "%s on 2x4 mask %u", test_kind_names[k], mask);
      run_case(&c, label);
    }
}

/// A 64-rank world on a 4-D mesh, over a mixed mask and over everything.
TPRT_TEST(collectives_on_a_64_rank_4d_mesh) {
  static const uint32_t masks[] = {0x5, 0xf, 0x0};
  for (size_t m = 0; m < sizeof masks / sizeof *masks; ++m) {
    test_case_t c = {.kind = K_ALL_REDUCE, .num_axes = 4, .sizes = {4, 2, 4, 2}, .mask = masks[m]};
    c.in_dtype = c.out_dtype = TPRT_DTYPE_BF16;
    c.order = TPRT_ORDER_CANONICAL;
    set_shapes(&c, 1, 1, 1, 70);
    char label[64];
    snprintf(label, sizeof label, "all_reduce 4x2x4x2 mask 0x%x", masks[m]);
    run_case(&c, label);
    test_case_t gather = {.kind = K_ALL_GATHER, .num_axes = 4, .sizes = {4, 2, 4, 2}, .mask = masks[m]};
    gather.in_dtype = gather.out_dtype = TPRT_DTYPE_F32;
    int g = masks[m] == 0xf ? 64 : masks[m] == 0x5 ? 16 : 1;
    set_shapes(&gather, g, 2, 1, 3);
    snprintf(label, sizeof label, "all_gather 4x2x4x2 mask 0x%x", masks[m]);
    run_case(&gather, label);
  }
}

//===----------------------------------------------------------------------===//
// Exact summation orders
//===----------------------------------------------------------------------===//

typedef struct test_order_t {
  int size;
  int in_dtype, out_dtype;
  float values[8];  // rank r contributes values[r]
  tprt_order_t order;
  uint32_t bits[8];  // each rank's result
  tprt_status_t status[8];
} test_order_t;

static tprt_status_t test_order_rank(tprt_rank_t* rank, void* user) {
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
  t->status[r] = tprt_all_reduce(rank, 1, &in, &out, t->order);
  t->bits[r] = out_storage;
  return NULL;
}

// All-reduces one element per rank and returns the bits every rank got (checking they agree).
static uint32_t reduce_bits(int size, int in_dtype, int out_dtype, const float* values, tprt_order_t order) {
  test_order_t t = {.size = size, .in_dtype = in_dtype, .out_dtype = out_dtype, .order = order};
  memcpy(t.values, values, sizeof(float) * (size_t)size);
  tprt_world_options_t options = {.num_axes = 1, .axes = {{"x", size}}, .collective_timeout_s = 30};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  TPRT_EXPECT_OK(tprt_world_run(world, test_order_rank, &t));
  tprt_world_destroy(world);
  for (int r = 0; r < size; ++r) {
    TPRT_EXPECT_OK(t.status[r]);
    TPRT_EXPECT_EQ_BITS(t.bits[r], t.bits[0]);
  }
  return t.bits[0];
}

/// 1 + 2^-24 rounds back to 1, so adding three 2^-24 one by one (ANY) keeps 1, while the tree
/// adds 2^-24 + 2^-24 = 2^-23 first and 1 + 2^-23 is representable.
TPRT_TEST(orders_any_and_canonical_give_their_documented_bits) {
  const float four[4] = {1.0f, 0x1p-24f, 0x1p-24f, 0x1p-24f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(4, TPRT_DTYPE_F32, TPRT_DTYPE_F32, four, TPRT_ORDER_ANY), 0x3f800000u);
  TPRT_EXPECT_EQ_BITS(reduce_bits(4, TPRT_DTYPE_F32, TPRT_DTYPE_F32, four, TPRT_ORDER_CANONICAL), 0x3f800001u);
  // Eight ranks, three tree levels. ANY: 1 absorbs every 2^-24 one at a time, then + 2^-22.
  // CANONICAL: level 1 gives 1, 2^-23, 2^-23, 2^-22; level 2 gives 1 + 2^-23 and 3 * 2^-23;
  // level 3 gives 1 + 4 * 2^-23 exactly. (A stride tree, (v0+v4), (v1+v5), ..., would give
  // 1 + 3 * 2^-23.)
  const float eight[8] = {1.0f, 0.0f, 0x1p-24f, 0x1p-24f, 0x1p-24f, 0x1p-24f, 0x1p-22f, 0.0f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(8, TPRT_DTYPE_F32, TPRT_DTYPE_F32, eight, TPRT_ORDER_ANY), 0x3f800002u);
  TPRT_EXPECT_EQ_BITS(reduce_bits(8, TPRT_DTYPE_F32, TPRT_DTYPE_F32, eight, TPRT_ORDER_CANONICAL), 0x3f800004u);
  // ANY starts from rank 0's value, not from +0: -0 + -0 + -0 is -0.
  const float zeros[3] = {-0.0f, -0.0f, -0.0f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(3, TPRT_DTYPE_F32, TPRT_DTYPE_F32, zeros, TPRT_ORDER_ANY), 0x80000000u);
  TPRT_EXPECT_EQ_BITS(reduce_bits(2, TPRT_DTYPE_F32, TPRT_DTYPE_F32, zeros, TPRT_ORDER_CANONICAL), 0x80000000u);
  // Three ranks: ANY is ((v0 + v1) + v2); the other association would give 0.
  const float three[3] = {0x1p30f, -0x1p30f, 1.0f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(3, TPRT_DTYPE_F32, TPRT_DTYPE_F32, three, TPRT_ORDER_ANY), 0x3f800000u);
}

/// The sum is rounded once, at the end: 1 + 2^-8 + 2^-9 is 1 + 0.75 ulp of bf16 and rounds up,
/// where rounding after each add would tie 1 + 2^-8 down to 1 and stay there.
TPRT_TEST(reductions_round_once_to_nearest_even) {
  const float bf[4] = {1.0f, 0x1p-8f, 0x1p-9f, 0.0f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(4, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, bf, TPRT_ORDER_ANY), 0x3f81u);
  TPRT_EXPECT_EQ_BITS(reduce_bits(4, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, bf, TPRT_ORDER_CANONICAL), 0x3f81u);
  const float f16[4] = {1.0f, 0x1p-11f, 0x1p-12f, 0.0f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(4, TPRT_DTYPE_F16, TPRT_DTYPE_F16, f16, TPRT_ORDER_ANY), 0x3c01u);
  // Ties go to even: 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7; 1 + 3*2^-8 rounds up.
  const float tie_down[2] = {1.0f, 0x1p-8f}, tie_up[2] = {1.0f, 0x1.8p-7f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(2, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, tie_down, TPRT_ORDER_ANY), 0x3f80u);
  TPRT_EXPECT_EQ_BITS(reduce_bits(2, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, tie_up, TPRT_ORDER_ANY), 0x3f82u);
  const float f16_tie[2] = {1.0f, 0x1p-11f}, f16_up[2] = {1.0f, 0x1.8p-10f};
  TPRT_EXPECT_EQ_BITS(reduce_bits(2, TPRT_DTYPE_F32, TPRT_DTYPE_F16, f16_tie, TPRT_ORDER_ANY), 0x3c00u);
  TPRT_EXPECT_EQ_BITS(reduce_bits(2, TPRT_DTYPE_F32, TPRT_DTYPE_F16, f16_up, TPRT_ORDER_ANY), 0x3c02u);
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives
//===----------------------------------------------------------------------===//

typedef struct test_async_t {
  test_case_t gather, scatter;
  tprt_status_t status[TPRT_MAX_WORLD_SIZE];
} test_async_t;

// Starts a gather and a reduce-scatter, runs an all-reduce in between, then waits in an order
// that depends on the rank; rank 3 also starts and never waits one (released at return).
static tprt_status_t test_async_rank(tprt_rank_t* rank, void* user) {
  test_async_t* t = user;
  int r = tprt_rank_index(rank);
  test_case_t* g = &t->gather;
  test_case_t* s = &t->scatter;
  tprt_tensor_t g_in = tprt_tensor_make(g->in[r], g->in_dtype, g->rank, g->in_dims);
  tprt_tensor_t g_out = tprt_tensor_make(g->out[r], g->out_dtype, g->rank, g->out_dims);
  tprt_tensor_t s_in = tprt_tensor_make(s->in[r], s->in_dtype, s->rank, s->in_dims);
  tprt_tensor_t s_out = tprt_tensor_make(s->out[r], s->out_dtype, s->rank, s->out_dims);
  tprt_future_t *fg = NULL, *fs = NULL, *dropped = NULL;
  tprt_status_t status = tprt_all_gather_start(rank, 1, &g_in, &g_out, g->dim, &fg);
  if (!status) status = tprt_reduce_scatter_start(rank, 1, &s_in, &s_out, s->dim, s->order, &fs);
  float x = (float)r, sum = 0;
  int64_t one = 1;
  tprt_tensor_t xin = tprt_tensor_make(&x, TPRT_DTYPE_F32, 1, &one),
                xout = tprt_tensor_make(&sum, TPRT_DTYPE_F32, 1, &one);
  if (!status) status = tprt_all_reduce(rank, 1, &xin, &xout, TPRT_ORDER_ANY);
  if (!status && sum != 6.0f) status = tprt_make_status(TPRT_STATUS_INTERNAL, "all_reduce gave %g", (double)sum);
  if (!status) {
    // The gather's input may be overwritten once the start returned (the CPU backend staged it).
    memset(g->in[r], 0, tprt_tensor_bytes(&g_in));
    if (r % 2 == 0) {
      status = tprt_wait(rank, fg);
      status = tprt_status_join(status, tprt_wait(rank, fs));
    } else {
      status = tprt_wait(rank, fs);
      status = tprt_status_join(status, tprt_wait(rank, fg));
    }
  }
  // A future that is never waited: every rank starts it, only rank 3 skips the wait.
  float small_in = 1.0f, small_out[4];
  int64_t four = 4;
  tprt_tensor_t d_in = tprt_tensor_make(&small_in, TPRT_DTYPE_F32, 1, &one);
  tprt_tensor_t d_out = tprt_tensor_make(small_out, TPRT_DTYPE_F32, 1, &four);
  if (!status) status = tprt_all_gather_start(rank, 1, &d_in, &d_out, 0, &dropped);
  if (!status && r != 3) status = tprt_wait(rank, dropped);
  t->status[r] = status;
  return NULL;
}

TPRT_TEST(async_starts_and_waits_interleave_in_any_order) {
  test_async_t t = {0};
  tprt_world_options_t options = {.num_axes = 1, .axes = {{"tp", 4}}, .collective_timeout_s = 30};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  test_case_t* cases[2] = {&t.gather, &t.scatter};
  t.gather = (test_case_t){.kind = K_ALL_GATHER, .num_axes = 1, .sizes = {4}, .mask = 1, .dim = 1};
  t.scatter = (test_case_t){
      .kind = K_REDUCE_SCATTER, .num_axes = 1, .sizes = {4}, .mask = 1, .dim = 0, .order = TPRT_ORDER_CANONICAL};
  for (int k = 0; k < 2; ++k) {
    test_case_t* c = cases[k];
    c->in_dtype = c->out_dtype = TPRT_DTYPE_F32;
    set_shapes(c, 4, 2, 3, 4);
    for (int r = 0; r < 4; ++r) {
      size_t in_bytes = (size_t)test_numel(3, c->in_dims) * 4, out_bytes = (size_t)test_numel(3, c->out_dims) * 4;
      c->in[r] = malloc(in_bytes);
      c->original[r] = malloc(in_bytes);
      c->out[r] = calloc(1, out_bytes);
      for (int64_t i = 0; i < test_numel(3, c->in_dims); ++i)
        ((float*)c->in[r])[i] = test_value(TPRT_DTYPE_F32, r, i + k);
      memcpy(c->original[r], c->in[r], in_bytes);
    }
  }
  TPRT_EXPECT_OK(tprt_world_run(world, test_async_rank, &t));
  for (int r = 0; r < 4; ++r) {
    TPRT_EXPECT_OK(t.status[r]);
    for (int k = 0; k < 2; ++k) {
      test_case_t* c = cases[k];
      for (int64_t i = 0; i < test_numel(3, c->out_dims); ++i)
        if (test_element_bits(TPRT_DTYPE_F32, c->out[r], i) != test_expected(c, r, i)) {
          TPRT__FAIL("%s rank %d element %lld differs", test_kind_names[c->kind], r, (long long)i);
          break;
        }
    }
  }
  for (int k = 0; k < 2; ++k)
    for (int r = 0; r < 4; ++r) {
      free(cases[k]->in[r]);
      free(cases[k]->original[r]);
      free(cases[k]->out[r]);
    }
  tprt_world_destroy(world);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

#define TEST_MAX_ERRORS 32

typedef struct test_errors_t {
  tprt_status_t status[TEST_MAX_ERRORS];  // rank 0's statuses, in call order
  int count;
  tprt_status_t final_status[TPRT_MAX_WORLD_SIZE];
} test_errors_t;

// Every rank makes the same invalid calls (each fails locally, before taking part); rank 0 keeps
// the statuses. A final barrier shows that none of them consumed a sequence number.
static tprt_status_t test_errors_rank(tprt_rank_t* rank, void* user) {
  test_errors_t* t = user;
  int r = tprt_rank_index(rank);
  float a[24] = {0}, b[96] = {0};
  int64_t d4x8[2] = {4, 8}, d4x7[2] = {4, 7}, d2x4[2] = {2, 4}, d6x4[2] = {6, 4}, d8x4[2] = {8, 4}, d3x4[2] = {3, 4},
          d3[1] = {3}, d6[1] = {6};
  tprt_tensor_t t4x8 = tprt_tensor_make(b, TPRT_DTYPE_F32, 2, d4x8),
                t4x7 = tprt_tensor_make(b, TPRT_DTYPE_F32, 2, d4x7);
  tprt_tensor_t t2x4 = tprt_tensor_make(a, TPRT_DTYPE_F32, 2, d2x4),
                t6x4 = tprt_tensor_make(b, TPRT_DTYPE_F32, 2, d6x4);
  tprt_tensor_t t8x4 = tprt_tensor_make(b, TPRT_DTYPE_F32, 2, d8x4),
                t3x4 = tprt_tensor_make(b, TPRT_DTYPE_F32, 2, d3x4);
  tprt_tensor_t i32 = tprt_tensor_make(a, TPRT_DTYPE_I32, 2, d2x4), f16 = tprt_tensor_make(b, TPRT_DTYPE_F16, 2, d8x4);
  tprt_tensor_t f4_odd = tprt_tensor_make(a, TPRT_DTYPE_F4E2M1FN, 1, d3),
                f4_6 = tprt_tensor_make(a, TPRT_DTYPE_F4E2M1FN, 1, d6);
  tprt_tensor_t no_data = t2x4, bad_dtype = t2x4, bad_dim = t2x4;
  no_data.data = NULL;
  bad_dtype.dtype = 42;
  bad_dim.dims[1] = -3;
  tprt_future_t* future = NULL;
  tprt_status_t s[TEST_MAX_ERRORS];
  int n = 0;
  s[n++] = tprt_all_reduce(rank, 2, NULL, &t2x4, TPRT_ORDER_ANY);
  s[n++] = tprt_all_reduce(rank, 2, &t4x8, &t4x7, TPRT_ORDER_ANY);
  s[n++] = tprt_all_reduce(rank, 2, &i32, &i32, TPRT_ORDER_ANY);
  s[n++] = tprt_all_reduce(rank, 2, &t2x4, &t2x4, 7);
  s[n++] = tprt_all_reduce(rank, 2, &no_data, &t2x4, TPRT_ORDER_ANY);
  s[n++] = tprt_all_reduce(rank, 2, &bad_dtype, &t2x4, TPRT_ORDER_ANY);
  s[n++] = tprt_all_reduce(rank, 2, &bad_dim, &t2x4, TPRT_ORDER_ANY);
  s[n++] = tprt_all_gather(rank, 4, &t2x4, &t8x4, 0);
  s[n++] = tprt_all_gather(rank, 2, &t2x4, &t8x4, 2);
  s[n++] = tprt_all_gather(rank, 2, &t2x4, &t6x4, 0);
  s[n++] = tprt_all_gather(rank, 2, &t2x4, &f16, 0);
  s[n++] = tprt_all_gather(rank, 2, &f4_odd, &f4_odd, 0);
  s[n++] = tprt_reduce_scatter(rank, 2, &t6x4, &t2x4, 0, TPRT_ORDER_ANY);
  s[n++] = tprt_reduce_scatter(rank, 2, &t8x4, &t4x8, 0, TPRT_ORDER_ANY);
  s[n++] = tprt_reduce_scatter(rank, 2, &t3x4, &t3x4, 0, TPRT_ORDER_ANY);
  s[n++] = tprt_all_to_all(rank, 2, &t3x4, &t3x4, 0, 1);
  s[n++] = tprt_all_to_all(rank, 2, &t8x4, &t8x4, 0, 3);
  s[n++] = tprt_all_to_all(rank, 2, &t6x4, &t6x4, 0, 1);
  s[n++] = tprt_all_to_all(rank, 2, &t8x4, &t8x4, 0, 1);
  s[n++] = tprt_all_to_all(rank, 2, &f4_6, &f4_6, 0, 0);
  s[n++] = tprt_all_gather_start(rank, 2, &t2x4, &t8x4, 0, NULL);
  s[n++] = tprt_reduce_scatter_start(rank, 2, &t8x4, &t2x4, 1, TPRT_ORDER_ANY, &future);
  s[n++] = tprt_wait(rank, NULL);
  s[n++] = tprt_barrier(rank, 0x10);
  for (int i = 0; i < n; ++i) {
    if (r == 0)
      t->status[i] = s[i];
    else
      tprt_status_free(s[i]);
  }
  if (r == 0) t->count = n;
  t->final_status[r] = tprt_barrier(rank, 3);
  return NULL;
}

TPRT_TEST(argument_errors_have_exact_messages) {
  static const struct {
    tprt_status_code_t code;
    const char* message;
  } expected[] = {
      {TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: in is NULL"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: out is f32[4,7]; expected f32[4,8] for in f32[4,8]"},
      {TPRT_STATUS_UNIMPLEMENTED, "all_reduce: in dtype i32 cannot be reduced; expected bf16, f16 or f32"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: order 7 is neither TPRT_ORDER_ANY (0) nor TPRT_ORDER_CANONICAL (1)"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: in has no data"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: in has invalid dtype 42"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: in dim 1 is -3"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_gather: axes mask 0x4 names axis 2, but the mesh's axes are {dp,tp}"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_gather: dim 2 is out of range for in of rank 2"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "all_gather: out is f32[6,4]; expected f32[4,4] for in f32[2,4] gathered along dim 0 over 2 ranks"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_gather: out dtype f16 differs from in dtype f32"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "all_gather: f4E2M1FN packs two elements per byte, so in's last dim must be even, not 3"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "reduce_scatter: out is f32[2,4]; expected f32[3,4] for in f32[6,4] scattered along dim 0 over 2 ranks"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "reduce_scatter: out is f32[4,8]; expected f32[4,4] for in f32[8,4] scattered along dim 0 over 2 ranks"},
      {TPRT_STATUS_INVALID_ARGUMENT, "reduce_scatter: in's dim 0 has size 3, not divisible by the group size 2"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_to_all: in's split_dim 0 has size 3, not divisible by the group size 2"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_to_all: concat_dim 3 is out of range for in of rank 2"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "all_to_all: out is f32[6,4]; expected f32[3,8] for in f32[6,4] split along dim 0 and concatenated along dim 1 "
       "over 2 ranks"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "all_to_all: out is f32[8,4]; expected f32[4,8] for in f32[8,4] split along dim 0 and concatenated along dim 1 "
       "over 2 ranks"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "all_to_all: f4E2M1FN packs two elements per byte, so slices along the last dim must be even, not 3"},
      {TPRT_STATUS_INVALID_ARGUMENT, "all_gather_start: out_future is NULL"},
      {TPRT_STATUS_INVALID_ARGUMENT,
       "reduce_scatter: out is f32[2,4]; expected f32[8,2] for in f32[8,4] scattered along dim 1 over 2 ranks"},
      {TPRT_STATUS_INVALID_ARGUMENT, "wait: future is NULL"},
      {TPRT_STATUS_INVALID_ARGUMENT, "barrier: axes mask 0x10 names axis 4, but the mesh's axes are {dp,tp}"},
  };
  test_errors_t t = {0};
  // dp is 1, so groups over tp have 2 ranks.
  tprt_world_options_t options = {.num_axes = 2, .axes = {{"dp", 1}, {"tp", 2}}, .collective_timeout_s = 30};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  TPRT_EXPECT_OK(tprt_world_run(world, test_errors_rank, &t));
  int n = (int)(sizeof expected / sizeof *expected);
  TPRT_EXPECT_EQ_I64(t.count, n);
  for (int i = 0; i < t.count && i < n; ++i) {
    TPRT_EXPECT_EQ_I64(tprt_status_code(t.status[i]), expected[i].code);
    TPRT_EXPECT_STREQ(tprt_status_message(t.status[i]), expected[i].message);
    tprt_status_free(t.status[i]);
  }
  for (int r = 0; r < 2; ++r) TPRT_EXPECT_OK(t.final_status[r]);
  tprt_world_destroy(world);
}

/// Canonical order needs a power-of-two group; the message names the group.
TPRT_TEST(canonical_order_refuses_a_group_of_three) {
  test_order_t t = {.size = 3, .in_dtype = TPRT_DTYPE_F32, .out_dtype = TPRT_DTYPE_F32, .order = TPRT_ORDER_CANONICAL};
  tprt_world_options_t options = {.num_axes = 1, .axes = {{"tp", 3}}, .collective_timeout_s = 30};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  TPRT_EXPECT_OK(tprt_world_run(world, test_order_rank, &t));
  for (int r = 0; r < 3; ++r)
    TPRT_EXPECT_STATUS(t.status[r], TPRT_STATUS_INVALID_ARGUMENT,
                       "all_reduce: order canonical needs a power-of-two group, but the group over {tp} has 3 ranks");
  tprt_world_destroy(world);
}

typedef struct test_mismatch_t {
  float out[2][16];
  tprt_status_t shape_status[2], kind_status[2], after_status[2];
} test_mismatch_t;

// Rank 0 gathers f32[2,3] and rank 1 f32[2,4]; then rank 0 all-reduces while rank 1 calls a
// barrier; then both all-reduce correctly.
static tprt_status_t test_mismatch_rank(tprt_rank_t* rank, void* user) {
  test_mismatch_t* t = user;
  int r = tprt_rank_index(rank);
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t in_dims[2] = {2, 3 + r}, out_dims[2] = {4, 3 + r}, four = 4;
  tprt_tensor_t gin = tprt_tensor_make(in, TPRT_DTYPE_F32, 2, in_dims);
  tprt_tensor_t gout = tprt_tensor_make(t->out[r], TPRT_DTYPE_F32, 2, out_dims);
  t->shape_status[r] = tprt_all_gather(rank, 1, &gin, &gout, 0);
  tprt_tensor_t v = tprt_tensor_make(in, TPRT_DTYPE_F32, 1, &four);
  t->kind_status[r] = r == 0 ? tprt_all_reduce(rank, 1, &v, &v, TPRT_ORDER_ANY) : tprt_barrier(rank, 1);
  tprt_tensor_t w = tprt_tensor_make(t->out[r] + 12, TPRT_DTYPE_F32, 1, &four);
  t->after_status[r] = tprt_all_reduce(rank, 1, &v, &w, TPRT_ORDER_ANY);
  return NULL;
}

TPRT_TEST(mismatched_calls_fail_on_every_member_without_writing) {
  test_mismatch_t t;
  memset(&t, 0, sizeof t);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 16; ++i) t.out[r][i] = -1.0f;
  tprt_world_options_t options = {.num_axes = 1, .axes = {{"tp", 2}}, .collective_timeout_s = 30};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  TPRT_EXPECT_OK(tprt_world_run(world, test_mismatch_rank, &t));
  for (int r = 0; r < 2; ++r) {
    TPRT_EXPECT_STATUS(t.shape_status[r], TPRT_STATUS_INVALID_ARGUMENT,
                       "all_gather over {tp}: group members called different collectives: group rank 0 (world rank "
                       "0) called all_gather(in f32[2,3], out f32[4,3], dim 0); group rank 1 (world rank 1) called "
                       "all_gather(in f32[2,4], out f32[4,4], dim 0)");
    TPRT_EXPECT_STATUS(t.kind_status[r], TPRT_STATUS_INVALID_ARGUMENT,
                       "group rank 0 (world rank 0) called all_reduce(in f32[4], out f32[4], order any); group rank 1 "
                       "(world rank 1) called barrier()");
    for (int i = 0; i < 12; ++i) TPRT_EXPECT_EQ_BITS(test_f32_bits(t.out[r][i]), 0xbf800000u);
    // The group is usable again: 1+1, 2+2, ...
    TPRT_EXPECT_OK(t.after_status[r]);
    for (int i = 0; i < 4; ++i)
      TPRT_EXPECT_EQ_BITS(test_f32_bits(t.out[r][12 + i]), test_f32_bits(2.0f * (float)(i + 1)));
  }
  tprt_world_destroy(world);
}
