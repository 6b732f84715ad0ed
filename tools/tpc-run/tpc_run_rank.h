// One rank of tpc-run: its --warmup and --repeat steps (replayed as a CUDA graph with --graph),
// timed, on the host or in device buffers it uploads to and downloads from.
#ifndef TPC_RUN_RANK_H_
#define TPC_RUN_RANK_H_

#include "tprt_world.h"
#include "tpc_run.h"

/// The rank function tprt_world_run runs for each rank; |user| is the tpc_run_t. Fills the rank's
/// results, step times, counters and device in run->ranks[rank].
tprt_status_t tpc__rank_main(tprt_rank_t* rank, void* user);

#endif  // TPC_RUN_RANK_H_
