// tpc-run's logical tensors (see tpc_run_tensor.h).
#define _POSIX_C_SOURCE 200809L
#include "tpc_run_tensor.h"

#include <math.h>
#include <string.h>

#include "tprt_checkpoint.h"
#include "tprt_cpu_kernels.h"
#include "tprt_safetensors.h"

// The logical tensor of a module argument or result (its local layout when not sharded), and the
// shard that maps it to ranks.
tprt_status_t tpc__logical(const tprt_module_tensor_t* mt, const tprt_world_t* world, tprt_tensor_t* out,
                           tprt_shard_t* out_shard) {
  *out = mt->layout;
  if (!mt->sharded) return NULL;
  const char* names[TPRT_MAX_RANK];
  for (int d = 0; d < mt->layout.rank; ++d) names[d] = mt->axes[d];
  TPRT_RETURN_IF_ERROR(tprt_shard_from_names(mt->layout.rank, mt->logical, names, mt->blocks, world, out_shard),
                       "'%s'", mt->name);
  *out = tprt_tensor_make(NULL, mt->layout.dtype, mt->layout.rank, mt->logical);
  return NULL;
}

uint64_t tpc__fnv1a(const void* data, size_t n) {
  const unsigned char* p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// The Philox stream of an argument: a hash of its name, so that every sharding and every
// rank derives the same values for the same logical tensor.
static uint64_t tpc__stream_of(const char* name) { return tpc__fnv1a(name, strlen(name)); }

// Fills argument |t| named |name|, found in no checkpoint, from Philox.
tprt_status_t tpc__init_arg(const tpc_run_options_t* o, const tpc_sources_t* src, const char* name,
                            tprt_tensor_t* t) {
  // With a checkpoint, a missing tensor is an error (a silently random weight would be lost
  // work); --seed states that the remaining arguments may be drawn at random.
  if ((src->inputs || src->weights) && !o->seed_given)
    return tprt_make_status(TPRT_STATUS_NOT_FOUND,
                            "argument '%s' is %s %s%s%s%s; add it, or pass --seed to initialise missing arguments", name,
                            src->inputs && src->weights ? "in neither" : "not in",
                            src->inputs ? tprt_checkpoint_path(src->inputs) : "",
                            src->inputs && src->weights ? " nor " : "",
                            src->weights ? tprt_checkpoint_path(src->weights) : "",
                            src->rules ? " (and no --weight-names rule matches it)" : "");
  if (t->dtype == TPRT_DTYPE_I32 || t->dtype == TPRT_DTYPE_I64)
    return tprt_make_status(TPRT_STATUS_NOT_FOUND,
                            "argument '%s' (%s) has no random initialisation; give it in --inputs or --weights", name,
                            tprt_dtype_name(t->dtype));
  // Matrices get U(-1/sqrt(cols), 1/sqrt(cols)) (a fan-in scale); vectors, the norm scales and
  // biases, get U(0.5, 1.5).
  int64_t cols = t->rank ? t->dims[t->rank - 1] : 1;
  float a = t->rank >= 2 ? 1.0f / sqrtf((float)cols) : 0.5f;
  float lo = t->rank >= 2 ? -a : 0.5f, hi = t->rank >= 2 ? a : 1.5f;
  tprt_tensor_t view = *t;
  // Philox fills a 2-D view; fold leading dimensions into rows.
  int64_t rows = tprt_tensor_numel(t) / (cols ? cols : 1);
  int64_t dims[2] = {rows, cols};
  view = tprt_tensor_make(t->data, t->dtype, 2, dims);
  return tprt_cpu_fill_philox(&view, o->seed, tpc__stream_of(name), lo, hi, 0, 0, cols);
}

// Writes |n| tensors to |path|: one safetensors file, or an index and its files (a .json name).
tprt_status_t tpc__write(const tpc_run_options_t* o, const char* path, int n, const char** names,
                         const tprt_tensor_t* tensors) {
  size_t len = strlen(path);
  if (len > 5 && strcmp(path + len - 5, ".json") == 0)
    return tprt_checkpoint_write(path, n, names, tensors, o->max_file_size);
  return tprt_safetensors_write(path, n, names, tensors, NULL);
}
