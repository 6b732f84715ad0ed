// How a per-rank tensor maps into its logical (full) tensor, and copies between the two.
//
// tp-shard turns a logical program into per-rank programs; each per-rank argument and result
// records a tprt_shard_t that says which piece of the logical tensor the rank holds. Dimension d
// is sharded over the mesh axes axes[d][0..num_axes[d]) (major first): the rank's composite
// coordinate is c = ((coord(a0) * size(a1) + coord(a1)) * size(a2) + ...) and the number of
// shards is S = size(a0) * size(a1) * ... . The dimension is cut into blocks[d] equal contiguous
// blocks; each block is split evenly over the S shards, and the local dimension is the
// concatenation of the rank's piece of every block:
//
//   local[d]  = logical[d] / S,   piece = logical[d] / (blocks[d] * S)
//   local index i  ->  logical index (i / piece) * (logical[d] / blocks[d]) + c * piece + i % piece
//
// blocks = 1 is the ordinary contiguous split; blocks = 2 is Megatron's "stride 2" split of a
// fused SwiGLU FC1 weight [gate; up], where rank r holds gate rows r and up rows r. A dimension
// with no axes is replicated: local == logical and blocks must be 1.
//
// Ranks are numbered row-major over the world's mesh axes (tprt_world.h), so these functions need
// only the world's mesh, never a tprt_rank_t: tools use them to split checkpoints and to
// reassemble results outside any tprt_world_run.
//
// Thread safety: the functions are reentrant and read |shard| and |world| only. Calls that write
// distinct tensors may run concurrently; concurrent inserts into one logical tensor are a data
// race (replicated ranks write the same bytes, and f4E2M1FN pieces may share a byte).
#ifndef TPRT_SHARD_H_
#define TPRT_SHARD_H_

#include <stdint.h>

#include "tprt_status.h"
#include "tprt_tensor.h"
#include "tprt_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Most mesh axes that shard one dimension (every axis of the largest mesh).
#define TPRT_SHARD_MAX_DIM_AXES 4

/// The sharding of one per-rank tensor; a plain value, owned by whoever holds it.
typedef struct tprt_shard_t {
  int rank;                                          // tensor rank, 0 to TPRT_MAX_RANK
  int64_t logical[TPRT_MAX_RANK];                    // the logical (full) shape
  int num_axes[TPRT_MAX_RANK];                       // mesh axes per dim, 0 (replicated) to 4
  int axes[TPRT_MAX_RANK][TPRT_SHARD_MAX_DIM_AXES];  // world axis indices, major first
  int64_t blocks[TPRT_MAX_RANK];                     // >= 1; 1 on replicated dims
} tprt_shard_t;

/// Validates |shard| against |world|'s mesh and stores the local dims in |out_dims| (the first
/// shard->rank entries). Fails with INVALID_ARGUMENT when an axis index does not exist, an axis
/// shards two dims or one dim twice, blocks < 1, a replicated dim has blocks != 1, or a logical
/// size is not divisible by blocks x S; the message names the dim, the sizes and the axes. The
/// f4E2M1FN rule (a sharded last dim must give even pieces) needs the dtype and is checked by
/// tprt_shard_extract and tprt_shard_insert.
tprt_status_t tprt_shard_local_dims(const tprt_shard_t* shard, const tprt_world_t* world,
                                    int64_t out_dims[TPRT_MAX_RANK]) TPRT_MUST_USE_RESULT;

/// Copies world rank |rank_index|'s piece of |logical| (dims == shard->logical) into |local|
/// (dims == the local dims, same dtype; any dtype). Neither view is retained. For f4E2M1FN with
/// a sharded last dim, every piece along it must be even; an unused high nibble at the end of
/// |local| is cleared.
tprt_status_t tprt_shard_extract(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index,
                                 const tprt_tensor_t* logical, tprt_tensor_t* local) TPRT_MUST_USE_RESULT;

/// The inverse of tprt_shard_extract: writes |local| into rank |rank_index|'s place in |logical|
/// and leaves every other element (nibble, for f4E2M1FN) untouched. Replicated ranks write
/// identical data, so inserting every rank's piece reassembles the full tensor.
tprt_status_t tprt_shard_insert(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index,
                                const tprt_tensor_t* local, tprt_tensor_t* logical) TPRT_MUST_USE_RESULT;

/// Rank |rank_index|'s piece of dim |d| of a valid |shard| (tprt_shard_local_dims succeeded):
/// local index j * |*piece| + i (block j, 0 <= i < |*piece|) is logical index
/// j * logical[d] / blocks[d] + |*first| + i. A replicated dim gives first 0, piece logical[d].
void tprt_shard_dim_piece(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index, int d, int64_t* first,
                          int64_t* piece);

/// Builds and validates a shard from axis names, as tools read them from a module description:
/// |axis_names[d]| is a comma-separated list of |world|'s axis names, major first ("dp,tp";
/// spaces around names are ignored; "" or NULL for a replicated dim). |axis_names| may be NULL
/// (all replicated) and |blocks| NULL (all 1). Stores the shard in |out_shard| only on success.
tprt_status_t tprt_shard_from_names(int rank, const int64_t* logical, const char* const* axis_names,
                                    const int64_t* blocks, const tprt_world_t* world,
                                    tprt_shard_t* out_shard) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_SHARD_H_
