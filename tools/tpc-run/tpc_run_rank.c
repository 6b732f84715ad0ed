// One rank of tpc-run (see tpc_run_rank.h): device buffers where the backend's memory is not
// the host's, the step loop, and the counters of the timed steps.
#define _POSIX_C_SOURCE 200809L
#include "tpc_run_rank.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "tpc_run_load.h"
#include "tpc_run_report.h"

// Device buffers of one rank on a backend whose memory is not the host's.
typedef struct {
  void** args;
  void** results;
  void* arena;
} tpc_device_state_t;

static void tpc__device_free(const tprt_backend_t* b, const tpc_run_t* run, tpc_device_state_t* d) {
  for (int a = 0; d->args && a < run->fn->num_args; ++a) b->free(d->args[a]);
  for (int j = 0; d->results && j < run->fn->num_results; ++j) b->free(d->results[j]);
  b->free(d->arena);
  free(d->args);
  free(d->results);
}

// Allocates the rank's arena, arguments and results on the device and uploads the arguments.
static tprt_status_t tpc__device_setup(const tprt_backend_t* b, const tpc_run_t* run, const tpc_rank_state_t* st,
                                       tpc_device_state_t* d) {
  d->args = calloc((size_t)run->fn->num_args + 1, sizeof *d->args);
  d->results = calloc((size_t)run->fn->num_results + 1, sizeof *d->results);
  if (!d->args || !d->results) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  TPRT_RETURN_IF_ERROR(b->alloc((size_t)run->fn->arena_bytes, &d->arena), "arena of %lld bytes",
                       (long long)run->fn->arena_bytes);
  for (int a = 0; a < run->fn->num_args; ++a) {
    size_t bytes = tprt_tensor_bytes(&run->fn->args[a].layout);
    TPRT_RETURN_IF_ERROR(b->alloc(bytes, &d->args[a]), "argument %s", run->fn->args[a].name);
    TPRT_RETURN_IF_ERROR(b->to_device(d->args[a], st->args[a], bytes), "uploading %s", run->fn->args[a].name);
  }
  for (int j = 0; j < run->fn->num_results; ++j)
    TPRT_RETURN_IF_ERROR(b->alloc(tprt_tensor_bytes(&run->fn->results[j].layout), &d->results[j]), "result %s",
                         run->fn->results[j].name);
  return NULL;
}

// |a| - |b|: the counters of the steps after the warm-up.
static tprt_exec_stats_t tpc__stats_minus(const tprt_exec_stats_t* a, const tprt_exec_stats_t* b) {
  tprt_exec_stats_t d = *a;
  d.ops -= b->ops;
  d.gemm_flops -= b->gemm_flops;
  for (int k = 0; k < TPRT_COMM_KINDS; ++k) {
    d.comm[k].calls -= b->comm[k].calls;
    d.comm[k].bytes_sent -= b->comm[k].bytes_sent;
    d.comm[k].bytes_received -= b->comm[k].bytes_received;
  }
  return d;
}

tprt_status_t tpc__rank_main(tprt_rank_t* rank, void* user) {
  tpc_run_t* run = user;
  int r = tprt_rank_index(rank);
  tpc_rank_state_t* st = &run->ranks[r];
  const tprt_backend_t* b = run->backend;
  bool device = b != tprt_backend_cpu();
  tpc_device_state_t dev = {NULL, NULL, NULL};
  if (device && b->rank_begin) TPRT_RETURN_IF_ERROR(b->rank_begin(rank), "rank %d: %s backend", r, b->name);
  tprt_status_t status = device ? tpc__device_setup(b, run, st, &dev) : NULL;
  void** args = device ? dev.args : st->args;
  void** results = device ? dev.results : st->results;
  void* arena = device ? dev.arena : st->arena;
  tprt_exec_t* exec = NULL;
  if (!status) status = tprt_exec_create(rank, run->module->chunks, tprt_rank_allocator(rank), &exec);
  if (exec) {
    tprt_exec_set_count_only(exec, run->opts->count_only);
    tprt_exec_set_backend(exec, b);
  }
  if (!status && device && b->describe) status = b->describe(st->device, sizeof st->device);
  if (!status && !(device && b->describe)) snprintf(st->device, sizeof st->device, "%s", tpc_report_host_cpu());
  // --warmup untimed steps, then --repeat timed ones; the counters keep the timed steps only.
  const int warmup = run->opts->warmup, steps = warmup + run->opts->repeat;
  double last_report = tpc_now();
  st->steps_counted = run->opts->repeat;
  tprt_exec_stats_t base = {0};
  if (!status && run->opts->graph) {
    // A first step (it creates communicators and sizes scratch buffers), then one captured
    // step; the --warmup and timed steps below replay the graph.
    int32_t rc = run->fn->entry(exec, args, results, arena);
    if (!rc) status = b->synchronize();
    if (rc) status = tprt_exec_take_status(exec);
    if (exec) st->stats = *tprt_exec_stats(exec);
    st->steps_counted = 1;
    void* graph = NULL;
    if (!status) status = b->graph_begin();
    if (!status) {
      rc = run->fn->entry(exec, args, results, arena);
      // A failed captured step ends the world before the capture ends: ranks that capture one
      // graph together meet at its end, and a peer still inside the step would wait for this rank.
      tprt_status_t failed = NULL;
      if (rc) {
        failed = tprt_exec_take_status(exec);
        if (!failed) failed = tprt_make_status(TPRT_STATUS_INTERNAL, "step failed with code %d", rc);
        tprt_rank_fail(rank, tprt_make_status(tprt_status_code(failed), "%s", tprt_status_message(failed)));
      }
      tprt_status_t end = b->graph_end(&graph);
      status = failed ? failed : end;
      if (failed) tprt_status_free(end);
    }
    for (int i = 0; i < steps && !status; ++i) {
      double t0 = tpc_now();
      status = b->graph_launch(graph);
      if (!status) status = b->synchronize();
      if (i >= warmup) st->step_seconds[i - warmup] = tpc_now() - t0;
    }
    if (status) {  // before the graph's destruction, which meets the other ranks unless the world failed
      tprt_rank_fail(rank, status);
      status = NULL;
    }
    if (graph) b->graph_destroy(graph);
  }
  for (int i = 0; i < steps && !status && !run->opts->graph; ++i) {
    if (i == warmup && exec) base = *tprt_exec_stats(exec);
    double t0 = tpc_now();
    int32_t rc = run->fn->entry(exec, args, results, arena);
    if (!rc && device) status = b->synchronize();  // the step's time includes the device's work
    if (i >= warmup) st->step_seconds[i - warmup] = tpc_now() - t0;
    if (rc) {
      status = tprt_exec_take_status(exec);
      if (!status) status = tprt_make_status(TPRT_STATUS_INTERNAL, "step failed with code %d", rc);
    }
    // Long runs report progress every few seconds (rank 0 speaks for the world).
    if (r == 0 && tpc_now() - last_report > 5.0 && i + 1 < steps) {
      fprintf(stderr, "tpc-run: step %d/%d%s\n", i + 1, steps, i < warmup ? " (warm-up)" : "");
      last_report = tpc_now();
    }
    // A signal cancels the world (tpc_run_signal.h): stop between steps, even without collectives.
    if (!status && i + 1 < steps) status = tprt_rank_check_abort(rank);
  }
  // A failed step ends the world now, before the clean-up below (which may wait on the device):
  // the other ranks, threads or processes, learn of it at once instead of at their timeout.
  if (status) {
    tprt_rank_fail(rank, status);
    status = NULL;  // tprt_world_run reports the failure recorded by tprt_rank_fail
  }
  if (exec && !run->opts->graph) st->stats = tpc__stats_minus(tprt_exec_stats(exec), &base);
  tprt_exec_destroy(exec);
  for (int j = 0; device && !status && j < run->fn->num_results; ++j)
    status = b->to_host(st->results[j], dev.results[j], tprt_tensor_bytes(&run->fn->results[j].layout));
  if (device) {
    tpc__device_free(b, run, &dev);
    if (b->rank_end) b->rank_end(rank);
  }
  return status;
}
