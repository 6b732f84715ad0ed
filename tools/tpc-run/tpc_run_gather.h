// tpc-run in a process world: every rank's results, step times, counters and device reach rank 0,
// which then reports as it does for a thread world.
#ifndef TPC_RUN_GATHER_H_
#define TPC_RUN_GATHER_H_

#include "tprt_allocator.h"
#include "tprt_procs.h"
#include "tpc_run.h"

/// All-gathers each result over the processes into run->ranks[r].results (allocated with |alloc|).
tprt_status_t tpc__gather_results(tpc_run_t* run, tprt_procs_t* procs, tprt_allocator_t alloc) TPRT_MUST_USE_RESULT;

/// All-gathers each process's step times, counters and device into run->ranks[r].
tprt_status_t tpc__gather_times(tpc_run_t* run, tprt_procs_t* procs) TPRT_MUST_USE_RESULT;

#endif  // TPC_RUN_GATHER_H_
