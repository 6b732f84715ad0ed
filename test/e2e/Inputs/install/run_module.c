// run_module: a C program built against an installed libtprt (test/e2e/install.test builds it
// with pkg-config and with find_package(tprt)). It loads a module compiled by tpc-compile, runs
// one step on the world of the module's mesh (one rank when it declares none), with the
// arguments `tpc-run --seed S` draws, and prints one line per result in the format of
// `tpc-run --hash`: name, logical shape, dtype and the FNV-1a-64 hash of the bytes.
//
//   usage: run_module MODULE.so SEED
//
// It uses the public headers only: the module and its function table (tprt_module.h), a world
// of rank threads (tprt_world.h), one exec per rank (tprt_exec.h), the shards that map logical
// arguments and results to ranks (tprt_shard.h) and tpc-run's Philox initialisation
// (tprt_cpu_kernels.h).
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_cpu_kernels.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_shard.h"
#include "tprt_world.h"

typedef struct {
  const tprt_module_t* module;
  const tprt_module_function_t* fn;
  void** args[TPRT_MAX_WORLD_SIZE];     // per rank: fn->num_args local buffers
  void** results[TPRT_MAX_WORLD_SIZE];  // per rank: fn->num_results local buffers
  void* arena[TPRT_MAX_WORLD_SIZE];
} run_t;

static uint64_t fnv1a(const void* data, size_t n) {
  const unsigned char* p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// The logical tensor of an argument or result (data NULL) and, when it is sharded, its shard.
static tprt_status_t logical_of(const tprt_module_tensor_t* mt, const tprt_world_t* world, tprt_tensor_t* out,
                                tprt_shard_t* out_shard) {
  *out = mt->layout;
  if (!mt->sharded) return NULL;
  const char* names[TPRT_MAX_RANK];
  for (int d = 0; d < mt->layout.rank; ++d) names[d] = mt->axes[d];
  tprt_status_t s = tprt_shard_from_names(mt->layout.rank, mt->logical, names, mt->blocks, world, out_shard);
  if (s) return tprt_status_annotate(s, "'%s'", mt->name);
  *out = tprt_tensor_make(NULL, mt->layout.dtype, mt->layout.rank, mt->logical);
  return NULL;
}

// tpc-run's seeded arguments (docs/runtime.md, "Running with tpc-run"): Philox stream = FNV-1a
// of the name; matrices uniform in +-1/sqrt(columns), vectors in [0.5, 1.5].
static tprt_status_t fill_seeded(const char* name, uint64_t seed, tprt_tensor_t* t) {
  int64_t cols = t->rank ? t->dims[t->rank - 1] : 1;
  float a = t->rank >= 2 ? 1.0f / sqrtf((float)cols) : 0.5f;
  float lo = t->rank >= 2 ? -a : 0.5f, hi = t->rank >= 2 ? a : 1.5f;
  int64_t dims[2] = {tprt_tensor_numel(t) / (cols ? cols : 1), cols};
  tprt_tensor_t view = tprt_tensor_make(t->data, t->dtype, 2, dims);
  return tprt_cpu_fill_philox(&view, seed, fnv1a(name, strlen(name)), lo, hi, 0, 0, cols);
}

static tprt_status_t rank_main(tprt_rank_t* rank, void* user) {
  run_t* run = user;
  int r = tprt_rank_index(rank);
  tprt_exec_t* exec = NULL;
  tprt_status_t s = tprt_exec_create(rank, run->module->chunks, tprt_rank_allocator(rank), &exec);
  if (!s && run->fn->entry(exec, run->args[r], run->results[r], run->arena[r]) != 0) s = tprt_exec_take_status(exec);
  tprt_exec_destroy(exec);
  return s;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: run_module MODULE.so SEED\n");
    return 2;
  }
  const uint64_t seed = strtoull(argv[2], NULL, 10);
  tprt_allocator_t alloc = tprt_allocator_system();
  tprt_module_t* module = NULL;
  tprt_world_t* world = NULL;
  run_t run;
  memset(&run, 0, sizeof run);
  void* logical = NULL;
  int nranks = 0, rc = 1;
  tprt_status_t s = tprt_module_load(argv[1], alloc, &module);
  if (s) goto done;
  run.module = module;
  run.fn = tprt_module_function(module, NULL);
  if (!run.fn) {
    fprintf(stderr, "run_module: %s has no function\n", argv[1]);
    goto done;
  }
  // The world: the module's mesh, or one rank.
  tprt_world_options_t wopts;
  memset(&wopts, 0, sizeof wopts);
  wopts.num_axes = module->num_mesh_axes ? module->num_mesh_axes : 1;
  wopts.axes[0] = (tprt_mesh_axis_t){"world", 1};
  for (int i = 0; i < module->num_mesh_axes; ++i)
    wopts.axes[i] = (tprt_mesh_axis_t){module->mesh_axes[i], module->mesh_shape[i]};
  if ((s = tprt_world_create(&wopts, alloc, &world))) goto done;
  nranks = tprt_world_size(world);
  const tprt_module_function_t* fn = run.fn;
  for (int r = 0; r < nranks; ++r) {
    run.args[r] = calloc((size_t)fn->num_args + 1, sizeof(void*));
    run.results[r] = calloc((size_t)fn->num_results + 1, sizeof(void*));
    if (!run.args[r] || !run.results[r]) {
      fprintf(stderr, "run_module: out of memory\n");
      goto done;
    }
    if ((s = tprt_allocator_malloc(alloc, (size_t)fn->arena_bytes, TPRT_ABI_ARENA_ALIGNMENT, &run.arena[r]))) goto done;
    for (int j = 0; j < fn->num_results; ++j)
      if ((s = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&fn->results[j].layout), 64, &run.results[r][j])))
        goto done;
  }
  // Each argument is drawn once as a logical tensor; every rank receives its piece.
  for (int a = 0; a < fn->num_args; ++a) {
    const tprt_module_tensor_t* mt = &fn->args[a];
    tprt_tensor_t whole;
    tprt_shard_t shard;
    if ((s = logical_of(mt, world, &whole, &shard))) goto done;
    if ((s = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&whole), 64, &logical))) goto done;
    whole.data = logical;
    if ((s = fill_seeded(mt->name, seed, &whole))) goto done;
    for (int r = 0; r < nranks; ++r) {
      tprt_tensor_t local = mt->layout;
      if ((s = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&local), 64, &run.args[r][a]))) goto done;
      local.data = run.args[r][a];
      if (mt->sharded && (s = tprt_shard_extract(&shard, world, r, &whole, &local))) goto done;
      if (!mt->sharded) memcpy(local.data, whole.data, tprt_tensor_bytes(&local));
    }
    tprt_allocator_free(alloc, logical);
    logical = NULL;
  }
  if ((s = tprt_world_run(world, rank_main, &run))) goto done;
  // Sharded results are reassembled from every rank; replicated ones are rank 0's.
  for (int j = 0; j < fn->num_results; ++j) {
    const tprt_module_tensor_t* mt = &fn->results[j];
    tprt_tensor_t whole;
    tprt_shard_t shard;
    if ((s = logical_of(mt, world, &whole, &shard))) goto done;
    whole.data = run.results[0][j];
    if (mt->sharded) {
      if ((s = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&whole), 64, &logical))) goto done;
      whole.data = logical;
      for (int r = 0; r < nranks; ++r) {
        tprt_tensor_t local = mt->layout;
        local.data = run.results[r][j];
        if ((s = tprt_shard_insert(&shard, world, r, &local, &whole))) goto done;
      }
    }
    printf("%s [", mt->name);
    for (int d = 0; d < whole.rank; ++d) printf(d ? ",%" PRId64 : "%" PRId64, whole.dims[d]);
    printf("] %s %016" PRIx64 "\n", tprt_dtype_name(whole.dtype), fnv1a(whole.data, tprt_tensor_bytes(&whole)));
    tprt_allocator_free(alloc, logical);
    logical = NULL;
  }
  fprintf(stderr, "run_module: %s: function %s on %d rank%s\n", argv[1], fn->name, nranks, nranks == 1 ? "" : "s");
  rc = 0;

done:
  if (s) {
    char buf[1024];
    fprintf(stderr, "run_module: error: %s\n", tprt_status_format(s, buf, sizeof buf));
    tprt_status_free(s);
  }
  tprt_allocator_free(alloc, logical);
  for (int r = 0; r < nranks; ++r) {
    for (int a = 0; run.args[r] && a < run.fn->num_args; ++a) tprt_allocator_free(alloc, run.args[r][a]);
    for (int j = 0; run.results[r] && j < run.fn->num_results; ++j) tprt_allocator_free(alloc, run.results[r][j]);
    free(run.args[r]);
    free(run.results[r]);
    tprt_allocator_free(alloc, run.arena[r]);
  }
  tprt_world_destroy(world);
  tprt_module_unload(module, alloc);
  return rc;
}
