// The worlds of the tools whose ranks take turns with a leader (tpc-train, tpc-generate): the
// world of a module's mesh, and the step barrier.
#ifndef TPC_RUN_WORLD_H_
#define TPC_RUN_WORLD_H_

#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_status.h"
#include "tprt_world.h"

/// The world options of |module|'s mesh (a one-rank world named "world" when it declares none), no
/// process world set; returns the mesh's rank count.
int tpc_world_options(const tprt_module_t* module, tprt_world_options_t* out);

/// NULL when a process world (|procs|, or none) has |mesh_size| processes; else INVALID_ARGUMENT
/// naming the launcher, the counts and |mesh| (how the mesh was given: "--mesh tp=2", "the
/// module's mesh"), and that |tool| alone runs its ranks as threads.
tprt_status_t tpc_world_check_procs(const tprt_procs_t* procs, int mesh_size, const char* mesh, const char* tool);

/// Every rank of the world meets (an all-reduce of one float over every axis). A failed world ends
/// the wait with its failure.
tprt_status_t tpc_meet(tprt_rank_t* rank) TPRT_MUST_USE_RESULT;

#endif  // TPC_RUN_WORLD_H_
