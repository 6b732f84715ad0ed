// The worlds of the leader-driven tools (see tpc_run_world.h).
#include "tpc_run_world.h"

#include <string.h>

#include "tprt_collectives.h"

tprt_status_t tpc_meet(tprt_rank_t* rank) {
  float one = 1.0f, sum = 0.0f;
  int64_t dims[1] = {1};
  tprt_tensor_t in = tprt_tensor_make(&one, TPRT_DTYPE_F32, 1, dims), out = tprt_tensor_make(&sum, TPRT_DTYPE_F32, 1, dims);
  uint32_t all = 0;
  for (int i = 0; i < tprt_world_num_axes(tprt_rank_world(rank)); ++i) all |= 1u << i;
  return tprt_all_reduce(rank, all, &in, &out, TPRT_ORDER_ANY);
}

int tpc_world_options(const tprt_module_t* module, tprt_world_options_t* out) {
  memset(out, 0, sizeof *out);
  out->num_axes = module->num_mesh_axes > 0 ? module->num_mesh_axes : 1;
  int size = 1;
  for (int i = 0; i < module->num_mesh_axes; ++i) {
    out->axes[i] = (tprt_mesh_axis_t){module->mesh_axes[i], module->mesh_shape[i]};
    size *= module->mesh_shape[i];
  }
  if (module->num_mesh_axes == 0) out->axes[0] = (tprt_mesh_axis_t){"world", 1};
  return size;
}

tprt_status_t tpc_world_check_procs(const tprt_procs_t* procs, int mesh_size, const char* mesh, const char* tool) {
  if (!procs || tprt_procs_size(procs) == mesh_size) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                          "%s started %d processes but %s has %d rank%s: launch one process per rank (or %s alone, "
                          "whose ranks are then threads)",
                          tprt_procs_launcher(procs), tprt_procs_size(procs), mesh, mesh_size, mesh_size == 1 ? "" : "s",
                          tool);
}
