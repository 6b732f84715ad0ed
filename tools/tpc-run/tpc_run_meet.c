// The step barrier (see tpc_run_meet.h).
#include "tpc_run_meet.h"

#include "tprt_collectives.h"

tprt_status_t tpc_meet(tprt_rank_t* rank) {
  float one = 1.0f, sum = 0.0f;
  int64_t dims[1] = {1};
  tprt_tensor_t in = tprt_tensor_make(&one, TPRT_DTYPE_F32, 1, dims), out = tprt_tensor_make(&sum, TPRT_DTYPE_F32, 1, dims);
  uint32_t all = 0;
  for (int i = 0; i < tprt_world_num_axes(tprt_rank_world(rank)); ++i) all |= 1u << i;
  return tprt_all_reduce(rank, all, &in, &out, TPRT_ORDER_ANY);
}
