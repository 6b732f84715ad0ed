// Worlds whose ranks are processes: the ranks of one world launched by torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or by mpirun (OpenMPI's OMPI_COMM_WORLD_*,
// MPICH's PMI_RANK / PMI_SIZE), one process each, joined by a full mesh of TCP connections.
//
// The mesh carries the host-side traffic of a process world: the CPU backend's collectives (each
// one an all-gather of the members' staged inputs, then the same host arithmetic as a thread
// world, so the bits match), the NCCL unique ids of the CUDA backend's communicators, and the
// results tpc-run gathers to rank 0. Under torchrun's variables the processes meet at
// MASTER_ADDR:MASTER_PORT (rank 0 listens there); under mpirun without them, MPI is loaded at
// run time (dlopen of libmpi) only to all-gather the processes' TCP addresses: MPI_Init,
// MPI_Allgather, MPI_Finalize, nothing else.
//
// Failure: a process that fails sends its message to every peer before it exits, and a peer
// that closes its connection without the final tprt_procs_finish is reported as failed, so a
// process blocked on a dead peer returns ABORTED instead of hanging; a peer that sends nothing
// for the timeout is DEADLINE_EXCEEDED.
#ifndef TPRT_PROCS_H_
#define TPRT_PROCS_H_

#include <stdbool.h>
#include <stddef.h>

#include "tprt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tprt_procs_t tprt_procs_t;

/// Detects a launcher from the environment and joins its processes (blocking until every one of
/// them has joined, or |timeout_s| seconds, <= 0 for TPRT_COLLECTIVE_TIMEOUT_S). Stores NULL in
/// |*out| when the environment names no launcher (the caller runs ranks as threads), or when
/// TPRT_RANKS=threads asks for that. |expected_size| > 0 is the world size the caller needs; a
/// launcher of another size is INVALID_ARGUMENT.
tprt_status_t tprt_procs_from_env(int expected_size, double timeout_s, tprt_procs_t** out) TPRT_MUST_USE_RESULT;

/// This process's rank, the number of processes, its index and count on its node, the launcher
/// ("torchrun" or "mpirun").
int tprt_procs_rank(const tprt_procs_t* procs);
int tprt_procs_size(const tprt_procs_t* procs);
int tprt_procs_local_rank(const tprt_procs_t* procs);
int tprt_procs_local_size(const tprt_procs_t* procs);
const char* tprt_procs_launcher(const tprt_procs_t* procs);

/// All-gather among the |n| processes |members| (world ranks, in group order; this process is
/// members[self]): every member sends |bytes| of |data| and receives every member's message
/// (its own copied), in |out[i]| (malloc'ed, the caller frees) of |out_bytes[i]| bytes. Members
/// must call it in the same order (they do: every rank runs the same program).
tprt_status_t tprt_procs_allgather(tprt_procs_t* procs, const int* members, int n, int self, const void* data,
                                   size_t bytes, void** out, size_t* out_bytes) TPRT_MUST_USE_RESULT;

/// NULL while every peer is alive; ABORTED naming the peer once one reported a failure or
/// closed its connection early. Does not block. Only the thread that joined the world checks
/// (NULL on any other).
tprt_status_t tprt_procs_check_peers(tprt_procs_t* procs) TPRT_MUST_USE_RESULT;

/// Tells every peer that this process failed with |message| (best effort, does not block), once;
/// nothing when a peer's failure ended this process (that peer told everyone). Any thread may
/// call it: from a thread other than the one that called tprt_procs_from_env (which runs the
/// rank), the message is left for that thread, which sends it at its next exchange or
/// tprt_procs_check_peers (within a second while it waits in an exchange) and fails them with
/// ABORTED "<message>"; only that thread writes to the connections, so no message is cut.
void tprt_procs_abort(tprt_procs_t* procs, const char* message);

/// A barrier of every process before the connections close, so that no peer mistakes a normal
/// end for a failure.
tprt_status_t tprt_procs_finish(tprt_procs_t* procs) TPRT_MUST_USE_RESULT;

/// Closes the connections (and finalizes MPI when it was loaded). NULL-safe.
void tprt_procs_destroy(tprt_procs_t* procs);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_PROCS_H_
