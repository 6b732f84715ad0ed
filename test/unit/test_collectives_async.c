// Unit tests of runtime/tprt_collectives, asynchronous collectives: a gather, a reduce-scatter and
// an all-to-all started together, an all-reduce in between, waits in an order that depends on the rank, and a
// future that is never waited (the helpers are in test_collectives_util.h).
//
// Rank threads never assert: they store their results, and the test thread checks them after
// tprt_world_run returns (the harness's failure flag is not thread-safe).
#include <stdlib.h>
#include <string.h>

#include "test_collectives_util.h"

//===----------------------------------------------------------------------===//
// Asynchronous collectives
//===----------------------------------------------------------------------===//

typedef struct test_async_t {
  test_case_t gather, scatter, exchange;
  tprt_status_t status[TPRT_MAX_WORLD_SIZE];
} test_async_t;

// Starts a gather, a reduce-scatter and an all-to-all, runs an all-reduce in between, then waits in an order
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
  test_case_t* a = &t->exchange;
  tprt_tensor_t a_in = tprt_tensor_make(a->in[r], a->in_dtype, a->rank, a->in_dims);
  tprt_tensor_t a_out = tprt_tensor_make(a->out[r], a->out_dtype, a->rank, a->out_dims);
  tprt_future_t *fg = NULL, *fs = NULL, *fa = NULL, *dropped = NULL;
  tprt_status_t status = tprt_all_gather_start(rank, 1, &g_in, &g_out, g->dim, &fg);
  if (!status) status = tprt_reduce_scatter_start(rank, 1, &s_in, &s_out, s->dim, s->order, &fs);
  if (!status) status = tprt_all_to_all_start(rank, 1, &a_in, &a_out, a->dim, a->concat_dim, &fa);
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
      status = tprt_status_join(status, tprt_wait(rank, fa));
    } else {
      status = tprt_wait(rank, fa);
      status = tprt_status_join(status, tprt_wait(rank, fs));
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
  test_case_t* cases[3] = {&t.gather, &t.scatter, &t.exchange};
  t.gather = (test_case_t){.kind = K_ALL_GATHER, .num_axes = 1, .sizes = {4}, .mask = 1, .dim = 1};
  t.scatter = (test_case_t){
      .kind = K_REDUCE_SCATTER, .num_axes = 1, .sizes = {4}, .mask = 1, .dim = 0, .order = TPRT_ORDER_CANONICAL};
  // tp-gtp's weight-gradient exchange: each rank's columns (dim 2) of every rank's rows, stacked
  // by rank along dim 0.
  t.exchange = (test_case_t){.kind = K_ALL_TO_ALL, .num_axes = 1, .sizes = {4}, .mask = 1, .dim = 2, .concat_dim = 0};
  for (int k = 0; k < 3; ++k) {
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
    for (int k = 0; k < 3; ++k) {
      test_case_t* c = cases[k];
      for (int64_t i = 0; i < test_numel(3, c->out_dims); ++i)
        if (test_element_bits(TPRT_DTYPE_F32, c->out[r], i) != test_expected(c, r, i)) {
          TPRT__FAIL("%s rank %d element %lld differs", test_kind_names[c->kind], r, (long long)i);
          break;
        }
    }
  }
  for (int k = 0; k < 3; ++k)
    for (int r = 0; r < 4; ++r) {
      free(cases[k]->in[r]);
      free(cases[k]->original[r]);
      free(cases[k]->out[r]);
    }
  tprt_world_destroy(world);
}
