// Internals shared by the collective files: a validated call, and the data movement and
// reductions that turn the group's staged inputs into one member's output. Not part of the API.
#ifndef TPRT_COLLECTIVES_IMPL_H_
#define TPRT_COLLECTIVES_IMPL_H_

#include "tprt_collectives.h"
#include "tprt_world_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tprt__collective_kind_e {
  TPRT__ALL_REDUCE,
  TPRT__ALL_GATHER,
  TPRT__REDUCE_SCATTER,
  TPRT__ALL_TO_ALL,
  TPRT__BARRIER,
} tprt__collective_kind_t;

// One member's collective call after validation: the views, attributes and place in the group.
typedef struct tprt__call_t {
  tprt__collective_kind_t kind;
  const char* name;
  uint32_t mask;
  tprt_tensor_t in;
  tprt_tensor_t out;
  int dim;         // gather, scatter and split dim
  int concat_dim;  // all_to_all only
  tprt_order_t order;
  bool max;  // all_reduce only: the elementwise maximum instead of the sum
  int group_size;
  int group_index;
} tprt__call_t;

struct tprt_future_t {
  struct tprt_future_t* next;  // in the rank's list of unwaited futures
  tprt_rank_t* rank;
  tprt__call_t call;
  tprt__rendezvous_t rendezvous;
};

// Validates a call and posts it: fills |call| (whose kind, name, mask, dims and order the caller
// set, and whose in/out it copies from |in|/|out|), copies in's data and posts it.
tprt_status_t tprt__collective_start(tprt_rank_t* rank, tprt__call_t* call, const tprt_tensor_t* in,
                                     const tprt_tensor_t* out, tprt__rendezvous_t* out_rendezvous);

// Waits for the group, computes |call|'s output and releases |rendezvous|, whatever happens.
tprt_status_t tprt__collective_finish(const tprt__call_t* call, tprt__rendezvous_t* rendezvous);

// Writes |call|'s output from the group's staged inputs (tprt_collectives_compute.c). The call
// has been validated; |inputs| holds each member's copy of its input, by group rank.
void tprt__collective_compute(const tprt__call_t* call, void* const* inputs);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_COLLECTIVES_IMPL_H_
