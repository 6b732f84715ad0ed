// The step barrier of the tools whose ranks take turns with a leader (tpc-train, tpc-generate).
#ifndef TPC_RUN_MEET_H_
#define TPC_RUN_MEET_H_

#include "tprt_status.h"
#include "tprt_world.h"

/// Every rank of the world meets (an all-reduce of one float over every axis). A failed world ends
/// the wait with its failure.
tprt_status_t tpc_meet(tprt_rank_t* rank) TPRT_MUST_USE_RESULT;

#endif  // TPC_RUN_MEET_H_
