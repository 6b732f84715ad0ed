// tpc-run's --stats table: per rank and step, the GEMM work and each collective family's calls
// and bytes, then the memory of one rank.
#ifndef TPC_RUN_STATS_H_
#define TPC_RUN_STATS_H_

#include "tpc_run.h"

/// Prints the table of the |nranks| ranks of |run| on stdout.
void tpc__print_stats(const tpc_run_t* run, int nranks);

#endif  // TPC_RUN_STATS_H_
