// Collectives over the groups of a world's mesh (tprt_world.h): all-reduce (sum or max), all-gather,
// reduce-scatter, all-to-all, their asynchronous forms and a barrier.
//
// Every member of a group must call the same collectives on that group in the same order, with
// the same dtypes, shapes and attributes; the k-th call of each member is matched with the k-th
// call of the others. A call whose own arguments are invalid fails with INVALID_ARGUMENT before
// taking part (it is not counted). Calls that match in order but differ in kind, shape or
// attributes all fail with INVALID_ARGUMENT naming both calls; no memory is touched. A call
// fails with ABORTED when another rank of the world failed ("rank R failed: ...") and with
// DEADLINE_EXCEEDED, naming the members that never arrived, after the world's timeout.
//
// Numerics (docs/numerics.md, "Canonical collectives"): reductions take bf16, f16 or f32 inputs,
// convert every element to f32, sum in f32 in the order chosen by |order| and round once, to
// nearest even, to out's dtype (which may differ from in's). TPRT_ORDER_ANY sums in increasing
// group rank starting from rank 0's value: ((v0 + v1) + v2) + ...; TPRT_ORDER_CANONICAL sums by
// the fixed pairwise tree: level 1 adds (v0,v1), (v2,v3), ..., level 2 adds pairs of those, and
// so on, which needs a power-of-two group. On the CPU backend both are bitwise deterministic and
// every member gets the same bits. Data movement takes any dtype, in and out alike; for
// f4E2M1FN (two elements per byte) the last dim and every slice along it must be even.
//
// Buffers: |in| and |out| are views (tprt_tensor.h) that the caller owns. On the CPU backend each
// call copies |in| before any member reads it, so |out| may alias or overlap |in| (in-place
// all-reduce) and |in| may be reused as soon as a *_start returns; portable callers keep |in|
// unchanged and do not read |out| until tprt_wait.
//
// Thread safety: a rank's collectives are called from its own thread (tprt_world_run's).
#ifndef TPRT_COLLECTIVES_H_
#define TPRT_COLLECTIVES_H_

#include <stdint.h>

#include "tprt_ops_abi.h"
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "tprt_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The summation order of a reduction: TPRT_ORDER_ANY or TPRT_ORDER_CANONICAL (the ABI
/// numbering of tprt_ops_abi.h).
typedef int tprt_order_t;

/// An asynchronous collective in flight; created by a *_start call, consumed by tprt_wait.
typedef struct tprt_future_t tprt_future_t;

//===----------------------------------------------------------------------===//
// Synchronous collectives
//===----------------------------------------------------------------------===//

/// Sums |in| over |rank|'s group over |axes_mask| into |out| (same shape; bf16, f16 or f32 each)
/// on every member, in |order|. |out| may be |in|.
/// Equivalent to: ncclAllReduce with ncclSum (deterministic).
tprt_status_t tprt_all_reduce(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                              tprt_order_t order) TPRT_MUST_USE_RESULT;

/// The elementwise maximum of |in| over the group into |out| (in's shape and dtype: bf16, f16 or
/// f32) on every member. Exact, so the order does not matter: the largest value with NaN skipped
/// (NaN only where every member has one) and +0 above -0. tp.all_reduce {reduce = "max"}: the
/// whole tensor's amax from the amaxes of its shards.
/// Equivalent to: ncclAllReduce with ncclMax (for inputs without NaN and signed zeros).
tprt_status_t tprt_all_reduce_max(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in,
                                  tprt_tensor_t* out) TPRT_MUST_USE_RESULT;

/// Concatenates the members' |in| along |dim| in group-rank order into |out|, whose dim |dim| is
/// the group size times in's and whose other dims and dtype are in's.
/// Equivalent to: ncclAllGather (along dim 0) / torch.distributed.all_gather_into_tensor.
tprt_status_t tprt_all_gather(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                              int dim) TPRT_MUST_USE_RESULT;

/// Sums |in| over the group as tprt_all_reduce does, splits the sum along |dim| into group-size
/// equal slices and stores slice tprt_rank_group_index into |out|.
/// Equivalent to: ncclReduceScatter with ncclSum (along dim 0).
tprt_status_t tprt_reduce_scatter(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                                  int dim, tprt_order_t order) TPRT_MUST_USE_RESULT;

/// Splits |in| along |split_dim| into group-size equal slices and sends slice g to group rank
/// g; concatenates the slices received along |concat_dim| in source group-rank order into |out|
/// (in's shape with split_dim divided and concat_dim multiplied by the group size).
/// Equivalent to: torch.distributed.all_to_all_single.
tprt_status_t tprt_all_to_all(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                              int split_dim, int concat_dim) TPRT_MUST_USE_RESULT;

/// Returns once every member of the group over |axes_mask| has called it.
/// Equivalent to: MPI_Barrier.
tprt_status_t tprt_barrier(tprt_rank_t* rank, uint32_t axes_mask) TPRT_MUST_USE_RESULT;

//===----------------------------------------------------------------------===//
// Asynchronous collectives
//===----------------------------------------------------------------------===//
// A start validates its arguments and enters the collective without waiting for the group;
// tprt_wait blocks until the group has arrived and fills |out|. A start matches the same
// synchronous collective on other members. Ranks may interleave starts, other collectives,
// computation and waits in any order without deadlock, as long as every member issues its
// calls on each group in the same order. A future never waited is released when the rank's
// function returns.

/// Starts tprt_all_gather; stores a future that the caller owns in |*out_future| and must pass
/// to tprt_wait exactly once. |out|'s memory must stay valid until then.
tprt_status_t tprt_all_gather_start(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                                    int dim, tprt_future_t** out_future) TPRT_MUST_USE_RESULT;

/// Starts tprt_reduce_scatter; see tprt_all_gather_start.
tprt_status_t tprt_reduce_scatter_start(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in,
                                        tprt_tensor_t* out, int dim, tprt_order_t order,
                                        tprt_future_t** out_future) TPRT_MUST_USE_RESULT;

/// Starts tprt_all_to_all; see tprt_all_gather_start.
tprt_status_t tprt_all_to_all_start(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                                    int split_dim, int concat_dim, tprt_future_t** out_future) TPRT_MUST_USE_RESULT;

/// Completes |future| (consumed, even on failure): waits for the group and fills the started
/// collective's |out|. Returns the collective's status. A future started by another rank is
/// refused with INVALID_ARGUMENT and left alone.
tprt_status_t tprt_wait(tprt_rank_t* rank, tprt_future_t* future) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_COLLECTIVES_H_
