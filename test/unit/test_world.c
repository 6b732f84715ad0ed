// Unit tests of runtime/tprt_world: mesh validation, rank coordinates and groups, scratch, the
// first-failure rule of tprt_world_run, abort propagation into blocked collectives, cancelling
// from another thread, and collective timeouts.
//
// Rank threads never assert: they store what they saw, and the test thread checks it after
// tprt_world_run returns (the harness's failure flag is not thread-safe).
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tprt_collectives.h"
#include "tprt_params.h"
#include "tprt_test.h"
#include "tprt_world.h"

static double test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static tprt_world_t* test_world(int num_axes, const char* const* names, const int* sizes, double timeout_s) {
  tprt_world_options_t options = {.num_axes = num_axes, .collective_timeout_s = timeout_s};
  for (int a = 0; a < num_axes; ++a) options.axes[a] = (tprt_mesh_axis_t){names[a], sizes[a]};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  return world;
}

//===----------------------------------------------------------------------===//
// Creation and the mesh
//===----------------------------------------------------------------------===//

static tprt_status_t test_create(int num_axes, const char* n0, int s0, const char* n1, int s1, double timeout) {
  tprt_world_options_t options = {.num_axes = num_axes, .collective_timeout_s = timeout};
  options.axes[0] = (tprt_mesh_axis_t){n0, s0};
  options.axes[1] = (tprt_mesh_axis_t){n1, s1};
  for (int a = 2; a < TPRT_MAX_MESH_AXES; ++a) options.axes[a] = (tprt_mesh_axis_t){a == 2 ? "c" : "d", 1};
  tprt_world_t* world = (tprt_world_t*)&options;  // must be reset to NULL on failure
  tprt_status_t s = tprt_world_create(&options, tprt_allocator_system(), &world);
  if (s) {
    if (world) TPRT__FAIL("*out_world was not reset on failure");
  }
  tprt_world_destroy(s ? NULL : world);
  return s;
}

TPRT_TEST(world_create_validates_the_mesh) {
  const char* long_name = "a_name_that_is_32_characters_xxx";
  TPRT_EXPECT_STATUS(tprt_world_create(NULL, tprt_allocator_system(), &(tprt_world_t*){NULL}),
                     TPRT_STATUS_INVALID_ARGUMENT, "creating a world: options is NULL");
  TPRT_EXPECT_STATUS(test_create(0, "dp", 2, "tp", 2, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh has 0 axes; expected 1 to 4");
  TPRT_EXPECT_STATUS(test_create(5, "dp", 2, "tp", 2, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh has 5 axes; expected 1 to 4");
  TPRT_EXPECT_STATUS(test_create(2, "dp", 2, NULL, 2, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh axis 1 has no name");
  TPRT_EXPECT_STATUS(test_create(2, "dp", 2, "", 2, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh axis 1 has no name");
  TPRT_EXPECT_STATUS(test_create(1, long_name, 2, "tp", 2, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh axis 0 name 'a_name_that_is_32_characters_xxx' is longer than 31 "
                     "characters");
  TPRT_EXPECT_STATUS(test_create(2, "tp", 2, "tp", 2, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh axes 0 and 1 are both named 'tp'");
  TPRT_EXPECT_STATUS(test_create(2, "dp", 2, "tp", 0, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh axis 'tp' has size 0; expected >= 1");
  TPRT_EXPECT_STATUS(test_create(2, "dp", 8, "tp", 16, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: mesh 8x16 has more than 64 ranks");
  TPRT_EXPECT_STATUS(test_create(2, "dp", 2, "tp", 2, NAN), TPRT_STATUS_INVALID_ARGUMENT,
                     "creating a world: collective_timeout_s is NaN");
  tprt_world_options_t options = {.num_axes = 1, .axes = {{"tp", 2}}};
  TPRT_EXPECT_STATUS(tprt_world_create(&options, tprt_allocator_system(), NULL), TPRT_STATUS_INVALID_ARGUMENT,
                     "out_world is NULL");
  // The largest world and a 4-D mesh are accepted.
  TPRT_EXPECT_OK(test_create(2, "dp", 1, "tp", 64, -1));
  TPRT_EXPECT_OK(test_create(4, "a", 2, "b", 2, 0));
  tprt_world_destroy(NULL);
}

TPRT_TEST(world_reports_its_mesh) {
  const char* names[] = {"dp", "tp"};
  const int sizes[] = {2, 4};
  tprt_world_t* world = test_world(2, names, sizes, 0);
  if (!world) return;
  TPRT_EXPECT_EQ_I64(tprt_world_size(world), 8);
  TPRT_EXPECT_EQ_I64(tprt_world_num_axes(world), 2);
  TPRT_EXPECT_EQ_I64(tprt_world_axis_size(world, 1), 4);
  TPRT_EXPECT_EQ_I64(tprt_world_axis_size(world, 2), 0);
  TPRT_EXPECT_STREQ(tprt_world_axis_name(world, 0), "dp");
  TPRT_EXPECT_STREQ(tprt_world_axis_name(world, -1), "");
  TPRT_EXPECT_EQ_I64(tprt_world_find_axis(world, "tp"), 1);
  TPRT_EXPECT_EQ_I64(tprt_world_find_axis(world, "ep"), -1);
  tprt_world_destroy(world);
}

TPRT_TEST(collective_timeout_knob_defaults_to_600_seconds) {
  if (getenv("TPRT_COLLECTIVE_TIMEOUT_S")) return;  // the environment overrides the default
  TPRT_EXPECT_EQ_I64(tprt_param_collective_timeout_s(), 600);
}

//===----------------------------------------------------------------------===//
// Ranks and groups
//===----------------------------------------------------------------------===//

#define TEST_AXES 3
#define TEST_MASKS (1 << TEST_AXES)

typedef struct test_ranks_t {
  int world_size[TPRT_MAX_WORLD_SIZE];
  int coords[TPRT_MAX_WORLD_SIZE][TEST_AXES + 1];  // the last one is an invalid axis
  int group_size[TPRT_MAX_WORLD_SIZE][TEST_MASKS + 1];
  int group_index[TPRT_MAX_WORLD_SIZE][TEST_MASKS + 1];
  int members[TPRT_MAX_WORLD_SIZE][TEST_MASKS][TPRT_MAX_WORLD_SIZE + 1];
} test_ranks_t;

static tprt_status_t test_ranks_rank(tprt_rank_t* rank, void* user) {
  test_ranks_t* t = user;
  int r = tprt_rank_index(rank);
  t->world_size[r] = tprt_rank_world_size(rank);
  for (int a = 0; a <= TEST_AXES; ++a) t->coords[r][a] = tprt_rank_coord(rank, a);
  for (uint32_t m = 0; m <= TEST_MASKS; ++m) {
    t->group_size[r][m] = tprt_rank_group_size(rank, m);
    t->group_index[r][m] = tprt_rank_group_index(rank, m);
    if (m == TEST_MASKS) continue;
    for (int g = 0; g <= t->group_size[r][m]; ++g) t->members[r][m][g] = tprt_rank_group_member(rank, m, g);
  }
  return NULL;
}

/// On a 2x3x2 mesh, coordinates are row-major and a group over a mask is the ranks sharing the
/// other coordinates, ordered by the masked ones.
TPRT_TEST(ranks_have_row_major_coordinates_and_groups) {
  const char* names[] = {"pp", "dp", "tp"};
  const int sizes[] = {2, 3, 2};
  tprt_world_t* world = test_world(TEST_AXES, names, sizes, 0);
  if (!world) return;
  test_ranks_t* t = calloc(1, sizeof *t);
  TPRT_EXPECT_OK(tprt_world_run(world, test_ranks_rank, t));
  for (int r = 0; r < 12; ++r) {
    int c[TEST_AXES] = {r / 6, r / 2 % 3, r % 2};
    TPRT_EXPECT_EQ_I64(t->world_size[r], 12);
    for (int a = 0; a < TEST_AXES; ++a) TPRT_EXPECT_EQ_I64(t->coords[r][a], c[a]);
    TPRT_EXPECT_EQ_I64(t->coords[r][TEST_AXES], -1);
    TPRT_EXPECT_EQ_I64(t->group_size[r][TEST_MASKS], 0);
    TPRT_EXPECT_EQ_I64(t->group_index[r][TEST_MASKS], -1);
    for (int m = 0; m < TEST_MASKS; ++m) {
      // The reference: ranks q that agree with r off the mask, in increasing q.
      int expected[TPRT_MAX_WORLD_SIZE], n = 0, index = -1;
      for (int q = 0; q < 12; ++q) {
        int d[TEST_AXES] = {q / 6, q / 2 % 3, q % 2};
        bool same = true;
        for (int a = 0; a < TEST_AXES; ++a)
          if (!(m & (1 << a)) && d[a] != c[a]) same = false;
        if (!same) continue;
        if (q == r) index = n;
        expected[n++] = q;
      }
      TPRT_EXPECT_EQ_I64(t->group_size[r][m], n);
      TPRT_EXPECT_EQ_I64(t->group_index[r][m], index);
      for (int g = 0; g < n; ++g) TPRT_EXPECT_EQ_I64(t->members[r][m][g], expected[g]);
      TPRT_EXPECT_EQ_I64(t->members[r][m][n], -1);
    }
  }
  // Spot checks written out: rank 7 is (1, 0, 1); over dp its group is {7, 9, 11}.
  TPRT_EXPECT_EQ_I64(t->group_index[7][2], 0);
  TPRT_EXPECT_EQ_I64(t->members[7][2][2], 11);
  // Over pp and tp (mask 0b101), rank 7's group is the dp=0 ranks {0, 1, 6, 7}.
  TPRT_EXPECT_EQ_I64(t->members[7][5][0], 0);
  TPRT_EXPECT_EQ_I64(t->members[7][5][2], 6);
  TPRT_EXPECT_EQ_I64(t->group_index[7][5], 3);
  free(t);
  tprt_world_destroy(world);
}

typedef struct test_scratch_t {
  tprt_status_t status[2];
  bool aligned[2], same_when_smaller[2], kept_contents[2];
} test_scratch_t;

static tprt_status_t test_scratch_rank(tprt_rank_t* rank, void* user) {
  test_scratch_t* t = user;
  int r = tprt_rank_index(rank);
  void *a = NULL, *b = NULL, *c = NULL;
  tprt_status_t s = tprt_rank_scratch(rank, 1000, &a);
  if (!s) {
    memset(a, 0x5a, 1000);
    s = tprt_rank_scratch(rank, 10, &b);
  }
  if (!s) {
    // A smaller request returns the same buffer with its contents.
    t->same_when_smaller[r] = a == b;
    t->kept_contents[r] = ((unsigned char*)b)[999] == 0x5a;
    s = tprt_rank_scratch(rank, 1 << 20, &c);
  }
  if (!s) {
    t->aligned[r] = (uintptr_t)a % 256 == 0 && (uintptr_t)c % 256 == 0;
    memset(c, r, 1 << 20);  // the whole buffer is usable (ASan checks)
  }
  t->status[r] = s;
  return NULL;
}

TPRT_TEST(rank_scratch_grows_and_is_aligned) {
  const char* names[] = {"tp"};
  const int sizes[] = {2};
  tprt_world_t* world = test_world(1, names, sizes, 0);
  if (!world) return;
  test_scratch_t t;
  memset(&t, 0, sizeof t);
  TPRT_EXPECT_OK(tprt_world_run(world, test_scratch_rank, &t));
  for (int r = 0; r < 2; ++r) {
    TPRT_EXPECT_OK(t.status[r]);
    TPRT_EXPECT(t.aligned[r]);
    TPRT_EXPECT(t.same_when_smaller[r]);
    TPRT_EXPECT(t.kept_contents[r]);
  }
  tprt_world_destroy(world);
}

//===----------------------------------------------------------------------===//
// Runs and failures
//===----------------------------------------------------------------------===//

static tprt_status_t test_rank_2_fails(tprt_rank_t* rank, void* user) {
  if (tprt_rank_index(rank) == 2) return tprt_make_status(TPRT_STATUS_NOT_FOUND, "tensor 'w1' is missing");
  return NULL;
}

static tprt_status_t test_nested_run(tprt_rank_t* rank, void* user) {
  tprt_status_t* out = user;
  if (tprt_rank_index(rank) == 0) out[0] = tprt_world_run(tprt_rank_world(rank), test_rank_2_fails, NULL);
  return NULL;
}

TPRT_TEST(run_returns_the_failure_annotated_with_its_rank) {
  const char* names[] = {"tp"};
  const int sizes[] = {4};
  tprt_world_t* world = test_world(1, names, sizes, 0);
  if (!world) return;
  tprt_status_t s = tprt_world_run(world, test_rank_2_fails, NULL);
  TPRT_EXPECT_EQ_I64(tprt_status_code(s), TPRT_STATUS_NOT_FOUND);
  TPRT_EXPECT_STREQ(tprt_status_message(s), "rank 2: tensor 'w1' is missing");
  tprt_status_free(s);
  tprt_status_t nested = NULL;
  TPRT_EXPECT_OK(tprt_world_run(world, test_nested_run, &nested));
  TPRT_EXPECT_STATUS(nested, TPRT_STATUS_FAILED_PRECONDITION, "tprt_world_run is already running on this world");
  TPRT_EXPECT_STATUS(tprt_world_run(world, NULL, NULL), TPRT_STATUS_INVALID_ARGUMENT, "fn is NULL");
  tprt_world_destroy(world);
}

typedef struct test_abort_t {
  int victim;                                 // the rank that fails
  bool use_rank_fail;                         // it calls tprt_rank_fail instead of returning the failure
  atomic_int blocked;                         // ranks about to enter the all-reduce
  tprt_status_t first[TPRT_MAX_WORLD_SIZE];   // the all-reduce
  tprt_status_t second[TPRT_MAX_WORLD_SIZE];  // a barrier entered after the abort
  tprt_status_t check[TPRT_MAX_WORLD_SIZE];   // tprt_rank_check_abort after the abort
} test_abort_t;

// Every rank but the victim enters an all-reduce over the world; the victim waits until they
// are all in it, then fails.
static tprt_status_t test_abort_rank(tprt_rank_t* rank, void* user) {
  test_abort_t* t = user;
  int r = tprt_rank_index(rank), n = tprt_rank_world_size(rank);
  if (r == t->victim) {
    while (atomic_load(&t->blocked) < n - 1) test_sleep_ms(1);
    test_sleep_ms(20);  // let them reach the wait
    tprt_status_t failure = tprt_make_status(TPRT_STATUS_DATA_LOSS, "injected failure");
    if (!t->use_rank_fail) return failure;
    tprt_rank_fail(rank, failure);
    // A second failure of the same rank is dropped; the function's own result is ignored too.
    tprt_rank_fail(rank, tprt_make_status(TPRT_STATUS_INTERNAL, "second failure"));
    return tprt_make_status(TPRT_STATUS_INTERNAL, "ignored");
  }
  float x[16] = {0};
  int64_t dims[1] = {16};
  tprt_tensor_t v = tprt_tensor_make(x, TPRT_DTYPE_F32, 1, dims);
  atomic_fetch_add(&t->blocked, 1);
  t->first[r] = tprt_all_reduce(rank, 1, &v, &v, TPRT_ORDER_ANY);
  t->second[r] = tprt_barrier(rank, 1);
  t->check[r] = tprt_rank_check_abort(rank);
  return NULL;
}

static tprt_status_t test_all_reduce_ok(tprt_rank_t* rank, void* user) {
  float x = 1.0f, y = 0.0f;
  int64_t one = 1;
  tprt_tensor_t in = tprt_tensor_make(&x, TPRT_DTYPE_F32, 1, &one), out = tprt_tensor_make(&y, TPRT_DTYPE_F32, 1, &one);
  TPRT_RETURN_IF_ERROR(tprt_all_reduce(rank, 1, &in, &out, TPRT_ORDER_ANY), "rank %d", tprt_rank_index(rank));
  if (y != (float)tprt_rank_world_size(rank)) return tprt_make_status(TPRT_STATUS_INTERNAL, "sum is %g", (double)y);
  return tprt_rank_check_abort(rank);
}

static void check_abort(int size, int victim, bool use_rank_fail) {
  const char* names[] = {"tp"};
  const int sizes[] = {size};
  // A long timeout: the ranks must return because of the abort, not the deadline.
  tprt_world_t* world = test_world(1, names, sizes, 60);
  if (!world) return;
  test_abort_t* t = calloc(1, sizeof *t);
  t->victim = victim;
  t->use_rank_fail = use_rank_fail;
  double start = test_now();
  tprt_status_t s = tprt_world_run(world, test_abort_rank, t);
  double elapsed = test_now() - start;
  TPRT_EXPECT(elapsed < 5.0);
  TPRT_EXPECT_EQ_I64(tprt_status_code(s), TPRT_STATUS_DATA_LOSS);
  char expected[64];
  snprintf(expected, sizeof expected, "rank %d: injected failure", victim);
  TPRT_EXPECT_STREQ(tprt_status_message(s), expected);
  tprt_status_free(s);
  snprintf(expected, sizeof expected, "rank %d failed: injected failure", victim);
  char all_reduce[96], barrier[96];
  snprintf(all_reduce, sizeof all_reduce, "all_reduce over {tp}: %s", expected);
  snprintf(barrier, sizeof barrier, "barrier over {tp}: %s", expected);
  for (int r = 0; r < size; ++r) {
    if (r == victim) continue;
    TPRT_EXPECT_EQ_I64(tprt_status_code(t->first[r]), TPRT_STATUS_ABORTED);
    TPRT_EXPECT_STREQ(tprt_status_message(t->first[r]), all_reduce);
    TPRT_EXPECT_EQ_I64(tprt_status_code(t->second[r]), TPRT_STATUS_ABORTED);
    TPRT_EXPECT_STREQ(tprt_status_message(t->second[r]), barrier);
    TPRT_EXPECT_EQ_I64(tprt_status_code(t->check[r]), TPRT_STATUS_ABORTED);
    TPRT_EXPECT_STREQ(tprt_status_message(t->check[r]), expected);
    tprt_status_free(t->first[r]);
    tprt_status_free(t->second[r]);
    tprt_status_free(t->check[r]);
  }
  // The next run starts clean: collectives work again.
  TPRT_EXPECT_OK(tprt_world_run(world, test_all_reduce_ok, NULL));
  free(t);
  tprt_world_destroy(world);
}

/// A rank that fails while the others are blocked in an all-reduce aborts them at once.
TPRT_TEST(a_failing_rank_aborts_the_blocked_collectives) {
  check_abort(4, 3, false);
  check_abort(8, 0, false);
  check_abort(2, 1, false);
}

/// tprt_rank_fail aborts the world as returning the failure would, and its status wins.
TPRT_TEST(rank_fail_aborts_the_world) { check_abort(4, 1, true); }

typedef struct test_cancel_t {
  tprt_world_t* world;
  atomic_int blocked;                   // ranks about to enter the all-reduce
  atomic_int started;                   // rank functions started (a cancelled run starts none)
  char seen[TPRT_MAX_WORLD_SIZE][128];  // what each rank's all-reduce or abort check returned
} test_cancel_t;

// Rank 0 computes until the cancel reaches it (tprt_rank_check_abort); the others block in an
// all-reduce that waits for rank 0, and return what it gives them.
static tprt_status_t test_cancel_rank(tprt_rank_t* rank, void* user) {
  test_cancel_t* t = user;
  int r = tprt_rank_index(rank);
  atomic_fetch_add(&t->started, 1);
  tprt_status_t s = NULL;
  if (r == 0) {
    while (!(s = tprt_rank_check_abort(rank))) test_sleep_ms(1);
  } else {
    float x[4] = {0};
    int64_t dims[1] = {4};
    tprt_tensor_t v = tprt_tensor_make(x, TPRT_DTYPE_F32, 1, dims);
    atomic_fetch_add(&t->blocked, 1);
    s = tprt_all_reduce(rank, 1, &v, &v, TPRT_ORDER_ANY);
  }
  snprintf(t->seen[r], sizeof t->seen[r], "%s", tprt_status_message(s));
  return s;
}

// The controlling thread: cancels the world once ranks 1.. are blocked (as tpc-run's signal
// watcher does); a second cancel is ignored.
static void* test_cancel_thread(void* arg) {
  test_cancel_t* t = arg;
  while (atomic_load(&t->blocked) < tprt_world_size(t->world) - 1) test_sleep_ms(1);
  test_sleep_ms(20);  // let them reach the wait
  tprt_world_cancel(t->world, "interrupted (SIGINT)");
  tprt_world_cancel(t->world, "a second cancel");
  return NULL;
}

/// tprt_world_cancel from another thread aborts the ranks blocked in collectives and those that
/// check, the run returns the cancel's message rather than the ranks' echoes of it, and every later
/// run returns it too without starting a rank.
TPRT_TEST(cancel_aborts_the_run_and_every_later_one) {
  const char* names[] = {"tp"};
  const int sizes[] = {4};
  tprt_world_t* world = test_world(1, names, sizes, 60);  // the cancel, not the timeout, must end it
  if (!world) return;
  test_cancel_t* t = calloc(1, sizeof *t);
  t->world = world;
  pthread_t canceller;
  TPRT_EXPECT_EQ_I64(pthread_create(&canceller, NULL, test_cancel_thread, t), 0);
  double start = test_now();
  TPRT_EXPECT_STATUS(tprt_world_run(world, test_cancel_rank, t), TPRT_STATUS_ABORTED, "interrupted (SIGINT)");
  TPRT_EXPECT(test_now() - start < 5.0);
  pthread_join(canceller, NULL);
  TPRT_EXPECT_STREQ(t->seen[0], "interrupted (SIGINT)");
  for (int r = 1; r < 4; ++r) TPRT_EXPECT_STREQ(t->seen[r], "all_reduce over {tp}: interrupted (SIGINT)");
  atomic_store(&t->started, 0);
  TPRT_EXPECT_STATUS(tprt_world_run(world, test_cancel_rank, t), TPRT_STATUS_ABORTED, "interrupted (SIGINT)");
  TPRT_EXPECT_EQ_I64(atomic_load(&t->started), 0);
  free(t);
  tprt_world_destroy(world);
}

typedef struct test_timeout_t {
  uint32_t mask;
  bool absent[TPRT_MAX_WORLD_SIZE];  // these ranks never call the collective
  tprt_status_t status[TPRT_MAX_WORLD_SIZE];
} test_timeout_t;

static tprt_status_t test_timeout_rank(tprt_rank_t* rank, void* user) {
  test_timeout_t* t = user;
  int r = tprt_rank_index(rank);
  if (t->absent[r]) return NULL;
  float x[4] = {0};
  int64_t dims[1] = {4};
  tprt_tensor_t v = tprt_tensor_make(x, TPRT_DTYPE_F32, 1, dims);
  // Record rather than return the failure, so that no abort races with the other deadlines.
  t->status[r] = tprt_all_reduce(rank, t->mask, &v, &v, TPRT_ORDER_ANY);
  return NULL;
}

/// A collective whose group never fills fails after the world's timeout, naming the absentees.
TPRT_TEST(a_collective_times_out_naming_the_missing_ranks) {
  const char* names[] = {"dp", "tp"};
  const int sizes[] = {2, 4};
  tprt_world_t* world = test_world(2, names, sizes, 0.2);
  if (!world) return;
  test_timeout_t t;
  memset(&t, 0, sizeof t);
  t.mask = 2;  // tp: groups {0, 1, 2, 3} and {4, 5, 6, 7}
  t.absent[5] = t.absent[7] = true;
  double start = test_now();
  TPRT_EXPECT_OK(tprt_world_run(world, test_timeout_rank, &t));
  double elapsed = test_now() - start;
  TPRT_EXPECT(elapsed >= 0.2 && elapsed < 3.0);
  for (int r = 0; r < 4; ++r) TPRT_EXPECT_OK(t.status[r]);  // the full group is unaffected
  for (int r = 4; r <= 6; r += 2)
    TPRT_EXPECT_STATUS(t.status[r], TPRT_STATUS_DEADLINE_EXCEEDED,
                       "all_reduce over {tp} timed out after 0.2 s: group ranks 1, 3 (world ranks 5, 7) never "
                       "arrived (2 of 4 did)");
  // One absentee over the whole world.
  memset(&t, 0, sizeof t);
  t.mask = 3;
  t.absent[6] = true;
  TPRT_EXPECT_OK(tprt_world_run(world, test_timeout_rank, &t));
  for (int r = 0; r < 8; ++r) {
    if (r == 6) continue;
    TPRT_EXPECT_STATUS(t.status[r], TPRT_STATUS_DEADLINE_EXCEEDED,
                       "all_reduce over {dp,tp} timed out after 0.2 s: group rank 6 (world rank 6) never arrived (7 "
                       "of 8 did)");
  }
  tprt_world_destroy(world);
}
