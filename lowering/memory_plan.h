// Static memory planning for tp-lower-runtime: every intermediate tensor of a function gets an
// offset in one per-rank arena, reusing the space of tensors that are dead (liveness-based,
// offsets aligned to 256 bytes). Two strategies run and the smaller arena is kept: first fit in
// definition order, and the largest buffers first, each at the lowest offset clear of the
// buffers live with it.
#ifndef TPC_MEMORY_PLAN_H_
#define TPC_MEMORY_PLAN_H_

#include <stdint.h>

/// One buffer to place: live from the op that defines it to the last op that reads it.
typedef struct tpc_plan_buffer_t {
  int64_t bytes;
  int def;        // index of the defining op
  int last_use;   // index of the last reading op (>= def)
  int64_t offset;  // output: the arena offset
} tpc_plan_buffer_t;

/// Places |buffers| (in any order) so that no two buffers whose live ranges overlap share bytes.
/// A buffer defined by op i may reuse the space of buffers whose last use is before i (never
/// an input of the same op). Returns the arena size (a multiple of |alignment|), or -1 when
/// |count| is negative or a size is negative.
int64_t tpc_memory_plan(tpc_plan_buffer_t* buffers, int count, int64_t alignment);

/// The lower bound of any placement of |buffers|: the largest sum of their extents (sizes
/// rounded up to |alignment|, at least one unit) over the ops where they are live together (a
/// buffer is live from |def| through |last_use|). Returns -1 on the inputs tpc_memory_plan refuses.
int64_t tpc_memory_plan_peak(const tpc_plan_buffer_t* buffers, int count, int64_t alignment);

#endif  // TPC_MEMORY_PLAN_H_
