// tpc-run in a process world (see tpc_run_gather.h).
#include "tpc_run_gather.h"

#include <stdlib.h>
#include <string.h>

// A process world: every rank's results (and step times) reach rank 0, which then holds them as
// a thread world would (run->ranks[r].results). An all-gather of each result over the processes.
tprt_status_t tpc__gather_results(tpc_run_t* run, tprt_procs_t* procs, tprt_allocator_t alloc) {
  int n = tprt_procs_size(procs), self = tprt_procs_rank(procs), members[TPC_RUN_MAX_RANKS];
  for (int r = 0; r < n; ++r) members[r] = r;
  void* got[TPC_RUN_MAX_RANKS];
  size_t sizes[TPC_RUN_MAX_RANKS];
  for (int j = 0; j < run->fn->num_results && !run->opts->count_only; ++j) {
    size_t bytes = tprt_tensor_bytes(&run->fn->results[j].layout);
    TPRT_RETURN_IF_ERROR(tprt_procs_allgather(procs, members, n, self, run->ranks[self].results[j], bytes, got, sizes),
                         "gathering result %s", run->fn->results[j].name);
    tprt_status_t s = NULL;
    for (int r = 0; r < n; ++r) {
      if (!s && r != self) {
        if (sizes[r] != bytes)
          s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes of result %s; expected %zu", r, sizes[r],
                               run->fn->results[j].name, bytes);
        else if (!(s = tprt_allocator_malloc(alloc, bytes, 64, &run->ranks[r].results[j])))
          memcpy(run->ranks[r].results[j], got[r], bytes);
      }
      free(got[r]);
    }
    if (s) return s;
  }
  return NULL;
}

// Sends this process's step times, counters and device to every process, so that rank 0 reports
// the world's steps (the slowest rank's time) and every rank's counters.
tprt_status_t tpc__gather_times(tpc_run_t* run, tprt_procs_t* procs) {
  int n = tprt_procs_size(procs), self = tprt_procs_rank(procs), members[TPC_RUN_MAX_RANKS];
  for (int r = 0; r < n; ++r) members[r] = r;
  const tpc_rank_state_t* mine = &run->ranks[self];
  const size_t times = (size_t)run->opts->repeat * sizeof(double);
  const size_t bytes = sizeof mine->stats + sizeof mine->steps_counted + sizeof mine->device + times;
  char* msg = malloc(bytes);
  if (!msg) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  memcpy(msg, &mine->stats, sizeof mine->stats);
  memcpy(msg + sizeof mine->stats, &mine->steps_counted, sizeof mine->steps_counted);
  memcpy(msg + sizeof mine->stats + sizeof mine->steps_counted, mine->device, sizeof mine->device);
  memcpy(msg + bytes - times, mine->step_seconds, times);
  void* got[TPC_RUN_MAX_RANKS];
  size_t sizes[TPC_RUN_MAX_RANKS];
  tprt_status_t s = tprt_procs_allgather(procs, members, n, self, msg, bytes, got, sizes);
  free(msg);
  TPRT_RETURN_IF_ERROR(s, "gathering the step times");
  for (int r = 0; r < n; ++r) {
    tpc_rank_state_t* st = &run->ranks[r];
    if (!s && r != self && sizes[r] != bytes)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes of step times; expected %zu", r, sizes[r], bytes);
    if (!s && r != self && !st->step_seconds && !(st->step_seconds = malloc(times)))
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    if (!s && r != self) {
      const char* m = got[r];
      memcpy(&st->stats, m, sizeof st->stats);
      memcpy(&st->steps_counted, m + sizeof st->stats, sizeof st->steps_counted);
      memcpy(st->device, m + sizeof st->stats + sizeof st->steps_counted, sizeof st->device);
      st->device[sizeof st->device - 1] = '\0';
      memcpy(st->step_seconds, m + bytes - times, times);
    }
    free(got[r]);
  }
  return s;
}
