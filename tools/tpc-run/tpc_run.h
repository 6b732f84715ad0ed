// tpc-run's state of one run: the module function, the backend, and every rank's host buffers,
// step times and counters. main (tpc_run.c) fills it; the rank step (tpc_run_rank.h), the process
// world's gathers (tpc_run_gather.h) and --stats (tpc_run_stats.h) read and complete it.
#ifndef TPC_RUN_H_
#define TPC_RUN_H_

#include <stdint.h>

#include "tprt_backend.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tpc_run_args.h"

typedef struct {
  void** args;     // the function's num_args host buffers
  void** results;  // its num_results host buffers
  void* arena;
  double* step_seconds;  // --repeat timed steps
  char device[160];      // what the rank ran on (the backend's describe, or the host CPU)
  tprt_exec_stats_t stats;
  int64_t steps_counted;  // the steps whose calls the counters hold (--graph: the warm-up step)
} tpc_rank_state_t;

typedef struct {
  const tpc_run_options_t* opts;
  const tprt_backend_t* backend;
  const tprt_module_t* module;
  const tprt_module_function_t* fn;
  tpc_rank_state_t ranks[TPC_RUN_MAX_RANKS];
  // Logical (whole) arguments and results: what checkpoints hold, what --hash and --outputs see.
  void** logical_args;     // num_args
  void** logical_results;  // num_results
} tpc_run_t;

#endif  // TPC_RUN_H_
