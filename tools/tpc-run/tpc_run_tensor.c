// tpc-run's logical tensors (see tpc_run_tensor.h).
#define _POSIX_C_SOURCE 200809L
#include "tpc_run_tensor.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

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

// One thread's rows of a parallel Philox fill.
typedef struct {
  tprt_tensor_t view;  // rows [row0, row0 + view.dims[0]) of the logical 2-D tensor
  int64_t row0, cols;
  uint64_t seed, stream;
  float lo, hi;
  tprt_status_t status;
} tpc__fill_part_t;

static void* tpc__fill_part(void* arg) {
  tpc__fill_part_t* p = arg;
  p->status = tprt_cpu_fill_philox(&p->view, p->seed, p->stream, p->lo, p->hi, p->row0, 0, p->cols);
  return NULL;
}

// Philox-fills the 2-D |t| [rows, cols] on up to one thread per core (a weight of an 8B-class
// model is 10^8 elements; one core takes seconds). Philox is counter-based: each element's value
// depends only on its index, so the split changes no bit. Falls back to fewer threads (down to
// the calling one) when threads cannot be made.
static tprt_status_t tpc__fill(tprt_tensor_t* t, uint64_t seed, uint64_t stream, float lo, float hi) {
  int64_t rows = t->dims[0], cols = t->dims[1];
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t n = rows * cols < (1 << 22) ? 1 : cores > 1 ? (cores < 64 ? cores : 64) : 1;
  if (n > rows) n = rows;
  if (n <= 1) return tprt_cpu_fill_philox(t, seed, stream, lo, hi, 0, 0, cols);
  tpc__fill_part_t parts[64];
  pthread_t threads[64];
  bool started[64] = {false};
  size_t row_bytes = tprt_dtype_bytes(t->dtype, cols);
  for (int64_t i = 0; i < n; ++i) {
    int64_t r0 = rows * i / n, r1 = rows * (i + 1) / n;
    int64_t dims[2] = {r1 - r0, cols};
    parts[i] = (tpc__fill_part_t){tprt_tensor_make((char*)t->data + (size_t)r0 * row_bytes, t->dtype, 2, dims),
                                  r0, cols, seed, stream, lo, hi, NULL};
    if (i > 0) started[i] = pthread_create(&threads[i], NULL, tpc__fill_part, &parts[i]) == 0;
  }
  tpc__fill_part(&parts[0]);
  tprt_status_t first = parts[0].status;
  for (int64_t i = 1; i < n; ++i) {
    if (started[i])
      pthread_join(threads[i], NULL);
    else
      tpc__fill_part(&parts[i]);  // no thread: the calling one does these rows
    if (parts[i].status && !first)
      first = parts[i].status;
    else if (parts[i].status)
      tprt_status_free(parts[i].status);
  }
  return first;
}

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
  return tpc__fill(&view, o->seed, tpc__stream_of(name), lo, hi);
}

// Writes |n| tensors to |path|: one safetensors file, or an index and its files (a .json name).
tprt_status_t tpc__write(const tpc_run_options_t* o, const char* path, int n, const char** names,
                         const tprt_tensor_t* tensors) {
  size_t len = strlen(path);
  if (len > 5 && strcmp(path + len - 5, ".json") == 0)
    return tprt_checkpoint_write(path, n, names, tensors, o->max_file_size);
  return tprt_safetensors_write(path, n, names, tensors, NULL);
}
