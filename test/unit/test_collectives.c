// Unit tests of runtime/tprt_collectives, blocking calls: every collective at world sizes 1, 2,
// 3, 4 and 8 and on a 2x4 mesh against references computed here (each gather and reduce-scatter
// also through its *_start and tprt_wait), in-place all-reduce, and the exact bits of both
// summation orders, and the max all-reduce's exact maximum. Asynchronous interleavings are in
// test_collectives_async.c, argument errors and cross-rank mismatches in
// test_collectives_errors.c; the helpers in test_collectives_util.h.
//
// Rank threads never assert: they store their results, and the test thread checks them after
// tprt_world_run returns (the harness's failure flag is not thread-safe).
#include <stdlib.h>
#include <string.h>

#include "test_collectives_util.h"

//===----------------------------------------------------------------------===//
// Running one collective on a fresh world
//===----------------------------------------------------------------------===//

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

// Runs |t| (one element per rank) and returns the bits every rank got (checking they agree).
static uint32_t order_bits(test_order_t t, const float* values) {
  memcpy(t.values, values, sizeof(float) * (size_t)t.size);
  int size = t.size;
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

// All-reduces (sum) one element per rank.
static uint32_t reduce_bits(int size, int in_dtype, int out_dtype, const float* values, tprt_order_t order) {
  return order_bits((test_order_t){.size = size, .in_dtype = in_dtype, .out_dtype = out_dtype, .order = order}, values);
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
// The max all-reduce (tp.all_reduce {reduce = "max"}: an amax over shards)
//===----------------------------------------------------------------------===//

// Max-all-reduces one element per rank.
static uint32_t max_bits(int size, int dtype, const float* values) {
  return order_bits((test_order_t){.size = size, .in_dtype = dtype, .out_dtype = dtype, .max_ranks = 0xffu}, values);
}

/// The largest value, whichever rank holds it: NaN is skipped (NaN only when every rank has one),
/// +0 is above -0, and bf16 keeps its bits (nothing is rounded).
TPRT_TEST(all_reduce_max_is_exact_in_any_order) {
  const float a[3] = {1.5f, -3.0f, 2.25f}, b[3] = {2.25f, 1.5f, -3.0f};
  TPRT_EXPECT_EQ_BITS(max_bits(3, TPRT_DTYPE_F32, a), test_f32_bits(2.25f));
  TPRT_EXPECT_EQ_BITS(max_bits(3, TPRT_DTYPE_F32, b), test_f32_bits(2.25f));
  const float zeros[2] = {-0.0f, 0.0f}, zeros_swapped[2] = {0.0f, -0.0f};
  TPRT_EXPECT_EQ_BITS(max_bits(2, TPRT_DTYPE_F32, zeros), 0u);
  TPRT_EXPECT_EQ_BITS(max_bits(2, TPRT_DTYPE_F32, zeros_swapped), 0u);
  const float nan_first[3] = {NAN, -7.0f, NAN}, nan_last[2] = {-7.0f, NAN}, all_nan[2] = {NAN, NAN};
  TPRT_EXPECT_EQ_BITS(max_bits(3, TPRT_DTYPE_F32, nan_first), test_f32_bits(-7.0f));
  TPRT_EXPECT_EQ_BITS(max_bits(2, TPRT_DTYPE_F32, nan_last), test_f32_bits(-7.0f));
  TPRT_EXPECT((max_bits(2, TPRT_DTYPE_F32, all_nan) & 0x7fffffffu) > 0x7f800000u);
  const float infs[4] = {-INFINITY, 3.0f, 1.0f, INFINITY};
  TPRT_EXPECT_EQ_BITS(max_bits(3, TPRT_DTYPE_F32, infs), test_f32_bits(3.0f));
  TPRT_EXPECT_EQ_BITS(max_bits(4, TPRT_DTYPE_F32, infs), test_f32_bits(INFINITY));
  const float eight[8] = {5.0f, 0.5f, 7.0f, 6.0f, 0.25f, 1.0f, 2.0f, 3.0f};
  TPRT_EXPECT_EQ_BITS(max_bits(8, TPRT_DTYPE_F32, eight), test_f32_bits(7.0f));
  const float bf[3] = {0.5f, 2.0f, -4.0f};
  TPRT_EXPECT_EQ_BITS(max_bits(3, TPRT_DTYPE_BF16, bf), 0x4000u);
  TPRT_EXPECT_EQ_BITS(max_bits(1, TPRT_DTYPE_F16, bf), 0x3800u);
}

/// A sum on one member and a max on the other do not match: both fail, naming both calls.
TPRT_TEST(all_reduce_max_does_not_match_a_sum) {
  test_order_t t = {.size = 2, .in_dtype = TPRT_DTYPE_F32, .out_dtype = TPRT_DTYPE_F32, .max_ranks = 0x2u};
  tprt_world_options_t options = {.num_axes = 1, .axes = {{"x", 2}}, .collective_timeout_s = 30};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  TPRT_EXPECT_OK(tprt_world_run(world, test_order_rank, &t));
  tprt_world_destroy(world);
  for (int r = 0; r < 2; ++r)
    TPRT_EXPECT_STATUS(t.status[r], TPRT_STATUS_INVALID_ARGUMENT,
                       "group rank 0 (world rank 0) called all_reduce(in f32[1], out f32[1], order any); group rank 1 "
                       "(world rank 1) called all_reduce(in f32[1], out f32[1], max)");
}
