// Per-rank execution state (see tprt_exec.h).
#define _POSIX_C_SOURCE 200809L  // nanosleep

#include "tprt_exec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tprt_backend.h"

// In-flight async collectives per rank; lowered code keeps few (one per prefetch distance).
#define TPRT_EXEC_MAX_FUTURES 64

struct tprt_exec_t {
  tprt_allocator_t allocator;
  void* future_keys[TPRT_EXEC_MAX_FUTURES];
  tprt_future_t* futures[TPRT_EXEC_MAX_FUTURES];
  tprt_rank_t* rank;
  int chunks;
  bool count_only;
  const tprt_backend_t* backend;
  tprt_status_t status;
  tprt_exec_stats_t stats;
  int64_t fail_op, stop_op;  // TPRT_TEST_FAIL_RANK, TPRT_TEST_STOP_RANK: this rank's op to fault at (0: none)
};

// Fault injection for the tests of failing ranks (test/e2e/rank-faults*.test), in the manner of
// TPRT_TEST_KILL_AFTER_TENSORS: TPRT_TEST_FAIL_RANK=R[:K] makes world rank R's K-th op (default
// 1; ops count over steps) fail with INTERNAL "injected failure"; TPRT_TEST_STOP_RANK=R[:K] makes
// rank R stop there: a process-world rank kills its process (SIGKILL, as a crash or the OOM killer
// would), a thread rank stops taking part (it blocks, as a hung rank would, until the world is
// aborted). Returns the op index for |rank_index| (0: no fault for this rank).
static int64_t tprt__fault_op(const char* var, int rank_index) {
  const char* text = getenv(var);
  if (!text || !*text) return 0;
  char* end = NULL;
  long rank = strtol(text, &end, 10), op = 1;
  bool ok = end != text && rank >= 0;
  if (ok && *end == ':') {
    const char* k = end + 1;
    op = strtol(k, &end, 10);
    ok = end != k && op >= 1;
  }
  if (!ok || *end) {
    fprintf(stderr, "tprt: warning: ignoring %s='%s' (expected RANK or RANK:OP)\n", var, text);
    return 0;
  }
  return rank == rank_index ? op : 0;
}

// TPRT_TEST_STOP_RANK's stop (see tprt__fault_op).
static void tprt__stop_rank(tprt_exec_t* exec) {
  if (!exec->rank || tprt_rank_is_process(exec->rank)) raise(SIGKILL);
  for (;;) {
    tprt_status_t aborted = tprt_rank_check_abort(exec->rank);
    if (aborted) {
      tprt_status_free(aborted);
      return;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

tprt_status_t tprt_exec_create(tprt_rank_t* rank, int chunks, tprt_allocator_t allocator, tprt_exec_t** out_exec) {
  *out_exec = NULL;
  if (chunks < 1 || (chunks & (chunks - 1)) != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "tp.chunks=%d must be a power of two >= 1", chunks);
  tprt_exec_t* e = NULL;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(allocator, sizeof *e, 16, (void**)&e), "creating an exec");
  e->allocator = allocator;
  e->rank = rank;
  e->chunks = chunks;
  e->backend = tprt_backend_cpu();
  e->fail_op = tprt__fault_op("TPRT_TEST_FAIL_RANK", rank ? tprt_rank_index(rank) : 0);
  e->stop_op = tprt__fault_op("TPRT_TEST_STOP_RANK", rank ? tprt_rank_index(rank) : 0);
  *out_exec = e;
  return NULL;
}

void tprt_exec_destroy(tprt_exec_t* exec) {
  if (!exec) return;
  tprt_allocator_t a = exec->allocator;
  // A step that failed between a start and its wait leaves the collective in flight; complete
  // it so that its resources are released (its status no longer matters).
  for (int i = 0; i < TPRT_EXEC_MAX_FUTURES; ++i)
    if (exec->futures[i]) tprt_status_ignore(exec->backend->wait(exec->rank, exec->futures[i]));
  tprt_status_free(exec->status);
  tprt_allocator_free(a, exec);
}

tprt_rank_t* tprt_exec_rank(const tprt_exec_t* exec) { return exec->rank; }
int tprt_exec_chunks(const tprt_exec_t* exec) { return exec->chunks; }
tprt_exec_stats_t* tprt_exec_stats(tprt_exec_t* exec) { return &exec->stats; }
void tprt_exec_set_count_only(tprt_exec_t* exec, bool count_only) { exec->count_only = count_only; }
void tprt_exec_set_backend(tprt_exec_t* exec, const struct tprt_backend_t* backend) {
  exec->backend = backend ? backend : tprt_backend_cpu();
}
const struct tprt_backend_t* tprt_exec_backend(const tprt_exec_t* exec) { return exec->backend; }
bool tprt_exec_count_only(const tprt_exec_t* exec) { return exec->count_only; }

int32_t tprt_exec_record(tprt_exec_t* exec, tprt_status_t status, const char* op) {
  exec->stats.ops++;
  if (exec->stats.ops == exec->stop_op) tprt__stop_rank(exec);
  if (exec->stats.ops == exec->fail_op && !status)
    status = tprt_make_status(TPRT_STATUS_INTERNAL, "injected failure at op %lld (TPRT_TEST_FAIL_RANK)",
                              (long long)exec->fail_op);
  if (exec->stats.ops == exec->stop_op && !status)
    status =
        tprt_make_status(TPRT_STATUS_ABORTED, "stopped at op %lld (TPRT_TEST_STOP_RANK)", (long long)exec->stop_op);
  if (!status) return 0;
  int32_t code = (int32_t)tprt_status_code(status);
  if (exec->status)
    tprt_status_free(status);
  else
    exec->status = tprt_status_annotate(status, "%s", op);
  return code ? code : (int32_t)TPRT_STATUS_INTERNAL;
}

tprt_status_t tprt_exec_take_status(tprt_exec_t* exec) {
  tprt_status_t s = exec->status;
  exec->status = NULL;
  return s;
}

tprt_status_t tprt_exec_push_future(tprt_exec_t* exec, void* key, tprt_future_t* future) {
  for (int i = 0; i < TPRT_EXEC_MAX_FUTURES; ++i)
    if (!exec->futures[i]) {
      exec->future_keys[i] = key;
      exec->futures[i] = future;
      return NULL;
    }
  if (exec->backend->wait) tprt_status_ignore(exec->backend->wait(exec->rank, future));  // the backend's future
  return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "more than %d collectives in flight on one rank",
                          TPRT_EXEC_MAX_FUTURES);
}

tprt_future_t* tprt_exec_pop_future(tprt_exec_t* exec, void* key) {
  for (int i = 0; i < TPRT_EXEC_MAX_FUTURES; ++i)
    if (exec->futures[i] && exec->future_keys[i] == key) {
      tprt_future_t* f = exec->futures[i];
      exec->futures[i] = NULL;
      return f;
    }
  return NULL;
}

const char* tprt_comm_kind_name(tprt_comm_kind_t kind) {
  switch (kind) {
    case TPRT_COMM_ALL_REDUCE:
      return "all_reduce";
    case TPRT_COMM_ALL_GATHER:
      return "all_gather";
    case TPRT_COMM_REDUCE_SCATTER:
      return "reduce_scatter";
    case TPRT_COMM_ALL_TO_ALL:
      return "all_to_all";
    default:
      return "?";
  }
}

int64_t tprt_comm_bytes(tprt_comm_kind_t kind, int group, int64_t in_bytes, int64_t out_bytes) {
  if (group <= 1) return 0;
  int64_t g = group;
  switch (kind) {
    case TPRT_COMM_ALL_REDUCE:
      return 2 * (g - 1) * in_bytes / g;
    case TPRT_COMM_ALL_GATHER:
      return (g - 1) * out_bytes / g;
    case TPRT_COMM_REDUCE_SCATTER:
    case TPRT_COMM_ALL_TO_ALL:
      return (g - 1) * in_bytes / g;
    default:
      return 0;
  }
}
