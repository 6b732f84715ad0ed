// Unit tests of runtime/tprt_collectives, errors: the exact messages of argument errors, of
// canonical order on a group that is not a power of two, and of cross-rank mismatches (the
// helpers are in test_collectives_util.h).
//
// Rank threads never assert: they store their results, and the test thread checks them after
// tprt_world_run returns (the harness's failure flag is not thread-safe).
#include <stdlib.h>
#include <string.h>

#include "test_collectives_util.h"

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
