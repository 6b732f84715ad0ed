// A world of ranks over a named device mesh, the per-rank context that kernels and collectives
// run against, and failure propagation between ranks.
//
// CPU backend: every rank is a thread of this process and collectives move data through shared
// memory (tprt_collectives.h). A world is created once with its mesh; tprt_world_run runs one
// function on every rank concurrently, as an SPMD program, and returns the first failure.
//
// Mesh and groups: ranks are the row-major coordinates over the mesh axes (axis 0 slowest). A
// collective names its group with a bitmask over the axes (bit i = axis i, as in the runtime
// ABI): the group of rank r over mask m is every rank that shares r's coordinates on the axes
// NOT in m, ordered row-major by their coordinates on the axes in m. On a 2x4 mesh (dp, tp),
// mask 0b10 groups {0,1,2,3} and {4,5,6,7}; mask 0b01 groups {0,4}, {1,5}, ...; mask 0b11 is
// the whole world and mask 0 a group of one.
//
// Failure: when a rank's function returns a failure, or the rank calls tprt_rank_fail, the
// world is aborted: every rank blocked in a collective, or entering one later, returns ABORTED
// with "rank R failed: <message>", so no rank hangs on a dead peer.
//
// Equivalent to: an MPI communicator with MPI_Cart_create / MPI_Cart_sub, or one NCCL
// communicator per group (ncclCommSplit), with ncclCommAbort on failure.
#ifndef TPRT_WORLD_H_
#define TPRT_WORLD_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_allocator.h"
#include "tprt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Most axes of a mesh.
#define TPRT_MAX_MESH_AXES 4
/// Most ranks of a world.
#define TPRT_MAX_WORLD_SIZE 64
/// Longest axis name, in bytes, without the terminating NUL.
#define TPRT_MAX_AXIS_NAME 31

typedef struct tprt_world_t tprt_world_t;
typedef struct tprt_rank_t tprt_rank_t;

//===----------------------------------------------------------------------===//
// tprt_world_t
//===----------------------------------------------------------------------===//

/// One mesh axis: a name unique in the mesh (1 to TPRT_MAX_AXIS_NAME characters; copied) and
/// a size >= 1.
typedef struct tprt_mesh_axis_t {
  const char* name;
  int size;
} tprt_mesh_axis_t;

/// What tprt_world_create builds. Zero-initialize, then set the mesh.
typedef struct tprt_world_options_t {
  /// Number of mesh axes, 1 to TPRT_MAX_MESH_AXES; the world has the product of their sizes
  /// ranks (1 to TPRT_MAX_WORLD_SIZE).
  int num_axes;
  tprt_mesh_axis_t axes[TPRT_MAX_MESH_AXES];
  /// Seconds a collective waits for its group before DEADLINE_EXCEEDED: 0 takes
  /// TPRT_COLLECTIVE_TIMEOUT_S (default 600); a negative value waits forever.
  double collective_timeout_s;
  /// NULL: every rank is a thread of this process. Otherwise a process world (tprt_procs.h) of
  /// the mesh's size: this process runs rank tprt_procs_rank(procs) only, and collectives reach
  /// the other ranks through the procs' connections. Not owned by the world.
  struct tprt_procs_t* procs;
} tprt_world_options_t;

/// Creates a world with |options|' mesh; every allocation of the world, its ranks and its
/// collectives goes through |allocator|, which must be thread-safe. The caller owns
/// |*out_world| and frees it with tprt_world_destroy.
tprt_status_t tprt_world_create(const tprt_world_options_t* options, tprt_allocator_t allocator,
                                tprt_world_t** out_world) TPRT_MUST_USE_RESULT;

/// Frees |world|, its ranks' scratch and anything a failed run left behind (NULL-safe). Must
/// not be called while tprt_world_run is running on it.
void tprt_world_destroy(tprt_world_t* world);

/// Returns the number of ranks.
int tprt_world_size(const tprt_world_t* world);

/// Returns the number of mesh axes.
int tprt_world_num_axes(const tprt_world_t* world);

/// Returns the size of mesh axis |axis|, or 0 when there is no such axis.
int tprt_world_axis_size(const tprt_world_t* world, int axis);

/// Returns the name of mesh axis |axis| (owned by the world), or "" when there is no such axis.
const char* tprt_world_axis_name(const tprt_world_t* world, int axis);

/// Returns the index of the axis called |name|, or -1.
int tprt_world_find_axis(const tprt_world_t* world, const char* name);

/// The function every rank runs; |user| is tprt_world_run's. It returns NULL or a failure,
/// which it owns until it returns it.
typedef tprt_status_t (*tprt_rank_fn_t)(tprt_rank_t* rank, void* user);

/// Runs |fn| on every rank of |world| concurrently (one thread each) and waits for all of them;
/// in a process world, on this process's rank only (on the calling thread).
/// Returns NULL when every rank succeeded; otherwise the first failure in time, annotated with
/// its rank ("rank 3: ...") — every other rank's status is freed. Each run starts clean: no
/// collective, sequence number or abort survives from a previous run, but rank scratch does.
/// One run at a time per world (FAILED_PRECONDITION otherwise); |user| is shared by all ranks.
tprt_status_t tprt_world_run(tprt_world_t* world, tprt_rank_fn_t fn, void* user) TPRT_MUST_USE_RESULT;

/// Cancels |world| from outside its ranks (a signal watcher, a supervising thread): the run in
/// progress is aborted as if a rank had failed with |message| (copied) — ranks blocked in a
/// collective return ABORTED "<collective> over {..}: <message>" at once, later collectives fail
/// the same way — and tprt_world_run returns ABORTED "<message>". The world stays cancelled: a
/// later run returns the same status without starting its ranks. In a process world the other
/// processes are told ("rank R failed: <message>"). Only the first call counts. Thread-safe, but
/// not async-signal-safe: call it from a thread, not from a signal handler.
void tprt_world_cancel(tprt_world_t* world, const char* message);

//===----------------------------------------------------------------------===//
// tprt_rank_t
//===----------------------------------------------------------------------===//
// A rank is owned by its world and handed to tprt_rank_fn_t. Accessors are thread-safe; the
// functions that change state (scratch, fail, collectives) may be called only by the rank's own
// thread, except tprt_rank_fail, which any thread may call.

/// Returns the world that owns |rank|.
tprt_world_t* tprt_rank_world(const tprt_rank_t* rank);

/// Returns |rank|'s index in the world, 0 to world size - 1.
int tprt_rank_index(const tprt_rank_t* rank);

/// Returns the number of ranks in |rank|'s world.
int tprt_rank_world_size(const tprt_rank_t* rank);

/// Returns |rank|'s index among the ranks of its node and their number (the GPU a device
/// backend binds): LOCAL_RANK and LOCAL_WORLD_SIZE (or the MPI equivalents) in a process world,
/// the rank's index and the world's size in a thread world.
int tprt_rank_local_index(const tprt_rank_t* rank);
int tprt_rank_local_size(const tprt_rank_t* rank);

/// True when |rank| belongs to a process world (its peers are other processes).
bool tprt_rank_is_process(const tprt_rank_t* rank);

/// Returns |rank|'s coordinate along mesh axis |axis|, or -1 when there is no such axis.
int tprt_rank_coord(const tprt_rank_t* rank, int axis);

/// Returns the size of |rank|'s group over |axes_mask| (the product of the masked axes' sizes;
/// 1 for mask 0), or 0 when the mask names an axis the mesh lacks.
int tprt_rank_group_size(const tprt_rank_t* rank, uint32_t axes_mask);

/// Returns |rank|'s index in its group over |axes_mask| (row-major over the masked axes), or -1
/// when the mask names an axis the mesh lacks.
int tprt_rank_group_index(const tprt_rank_t* rank, uint32_t axes_mask);

/// Returns the world index of member |group_index| of |rank|'s group over |axes_mask|, or -1
/// when the mask or the index is out of range.
int tprt_rank_group_member(const tprt_rank_t* rank, uint32_t axes_mask, int group_index);

/// Returns the world's allocator (thread-safe), for per-rank allocations.
tprt_allocator_t tprt_rank_allocator(const tprt_rank_t* rank);

/// Stores in |*out_ptr| a buffer private to |rank| of at least |size| bytes, 256-byte aligned,
/// grown through the world's allocator as needed. The rank owns it; it stays valid until the
/// next call on this rank or tprt_world_destroy, and keeps its contents only while it does not
/// grow (it is not zeroed).
tprt_status_t tprt_rank_scratch(tprt_rank_t* rank, size_t size, void** out_ptr) TPRT_MUST_USE_RESULT;

/// Fails |rank| with |status| (consumed; NULL is ignored) and aborts the world at once, as if
/// the rank's function had returned |status|: tprt_world_run returns it (if it is the first
/// failure) in place of whatever the function later returns. Any thread may call it.
void tprt_rank_fail(tprt_rank_t* rank, tprt_status_t status);

/// Returns NULL while the world runs normally, or an ABORTED status "rank R failed: ..." once
/// another rank failed: lets long computations between collectives stop early.
tprt_status_t tprt_rank_check_abort(const tprt_rank_t* rank) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_WORLD_H_
