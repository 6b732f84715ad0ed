// A compiled module ready to call on logical tensors (tprt_session.h).
#include "tprt_session.h"

#include <stdlib.h>
#include <string.h>

#include "tprt_abi.h"
#include "tprt_allocator.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_shard.h"
#include "tprt_tensor.h"
#include "tprt_world.h"

enum { TPRT__SESSION_ALIGN = 64 };

/// One argument or result: its logical tensor (data NULL) and, when sharded, its shard.
typedef struct {
  tprt_tensor_t logical;
  tprt_shard_t shard;
  bool sharded;
} tprt__session_tensor_t;

struct tprt_session_t {
  tprt_allocator_t alloc;
  tprt_module_t* module;
  const tprt_module_function_t* fn;
  tprt_world_t* world;
  tprt_procs_t* procs;  // under torchrun or mpirun: this process is rank |self| alone; else NULL
  int ranks, self;
  tprt__session_tensor_t* args;     // fn->num_args
  tprt__session_tensor_t* results;  // fn->num_results
  void** own_args;                  // ranks x num_args: each rank's own argument buffers
  void** own_results;               // ranks x num_results
  void** arena;                     // ranks
  void** call_args;                 // ranks x num_args: what the call passes (own or the caller's)
  void** call_results;              // ranks x num_results
};

static tprt_status_t tprt__session_describe(const tprt_module_tensor_t* mt, const tprt_world_t* world,
                                            tprt__session_tensor_t* out) {
  out->logical = mt->layout;
  out->logical.data = NULL;
  out->sharded = mt->sharded;
  if (!mt->sharded) return NULL;
  const char* names[TPRT_MAX_RANK];
  for (int d = 0; d < mt->layout.rank; ++d) names[d] = mt->axes[d];
  tprt_status_t s = tprt_shard_from_names(mt->layout.rank, mt->logical, names, mt->blocks, world, &out->shard);
  if (s) return tprt_status_annotate(s, "'%s'", mt->name);
  out->logical = tprt_tensor_make(NULL, mt->layout.dtype, mt->layout.rank, mt->logical);
  return NULL;
}

tprt_status_t tprt_session_open(const char* module_path, const char* function, tprt_session_t** out) {
  if (!module_path || !out) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "session: no module path");
  *out = NULL;
  tprt_allocator_t alloc = tprt_allocator_system();
  tprt_session_t* s = calloc(1, sizeof *s);
  if (!s) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "session: out of memory");
  s->alloc = alloc;
  tprt_status_t st = tprt_module_load(module_path, alloc, &s->module);
  if (st) goto fail;
  s->fn = tprt_module_function(s->module, function);
  if (!s->fn) {
    st = function ? tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s has no function '%s'", module_path, function)
                  : tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s has no function", module_path);
    goto fail;
  }
  // The world: the module's mesh, or one rank; as threads, or under a launcher (torchrun, mpirun)
  // this process as one of its ranks.
  tprt_world_options_t wopts;
  memset(&wopts, 0, sizeof wopts);
  wopts.num_axes = s->module->num_mesh_axes ? s->module->num_mesh_axes : 1;
  wopts.axes[0] = (tprt_mesh_axis_t){"world", 1};
  int mesh_size = 1;
  for (int i = 0; i < s->module->num_mesh_axes; ++i) {
    wopts.axes[i] = (tprt_mesh_axis_t){s->module->mesh_axes[i], s->module->mesh_shape[i]};
    mesh_size *= (int)s->module->mesh_shape[i];
  }
  if ((st = tprt_procs_from_env(mesh_size, 0, &s->procs))) goto fail;
  wopts.procs = s->procs;
  s->self = s->procs ? tprt_procs_rank(s->procs) : -1;
  if ((st = tprt_world_create(&wopts, alloc, &s->world))) goto fail;
  s->ranks = tprt_world_size(s->world);
  const int na = s->fn->num_args, nr = s->fn->num_results, R = s->ranks;
  s->args = calloc((size_t)na + 1, sizeof *s->args);
  s->results = calloc((size_t)nr + 1, sizeof *s->results);
  s->own_args = calloc((size_t)R * na + 1, sizeof(void*));
  s->own_results = calloc((size_t)R * nr + 1, sizeof(void*));
  s->call_args = calloc((size_t)R * na + 1, sizeof(void*));
  s->call_results = calloc((size_t)R * nr + 1, sizeof(void*));
  s->arena = calloc((size_t)R, sizeof(void*));
  if (!s->args || !s->results || !s->own_args || !s->own_results || !s->call_args || !s->call_results || !s->arena) {
    st = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "session: out of memory");
    goto fail;
  }
  for (int a = 0; a < na; ++a)
    if ((st = tprt__session_describe(&s->fn->args[a], s->world, &s->args[a]))) goto fail;
  for (int j = 0; j < nr; ++j)
    if ((st = tprt__session_describe(&s->fn->results[j], s->world, &s->results[j]))) goto fail;
  for (int r = 0; r < R; ++r) {
    if (s->procs && r != s->self) continue;  // the other processes hold the other ranks
    if ((st = tprt_allocator_malloc(alloc, (size_t)s->fn->arena_bytes, TPRT_ABI_ARENA_ALIGNMENT, &s->arena[r])))
      goto fail;
    for (int a = 0; a < na; ++a)
      if ((st = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&s->fn->args[a].layout), TPRT__SESSION_ALIGN,
                                      &s->own_args[r * na + a])))
        goto fail;
    for (int j = 0; j < nr; ++j)
      if ((st = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&s->fn->results[j].layout), TPRT__SESSION_ALIGN,
                                      &s->own_results[r * nr + j])))
        goto fail;
  }
  *out = s;
  return NULL;
fail:
  tprt_session_close(s);
  return tprt_status_annotate(st, "opening %s", module_path);
}

void tprt_session_close(tprt_session_t* s) {
  if (!s) return;
  if (s->fn) {
    const int na = s->fn->num_args, nr = s->fn->num_results;
    for (int r = 0; r < s->ranks; ++r) {
      for (int a = 0; s->own_args && a < na; ++a) tprt_allocator_free(s->alloc, s->own_args[r * na + a]);
      for (int j = 0; s->own_results && j < nr; ++j) tprt_allocator_free(s->alloc, s->own_results[r * nr + j]);
      if (s->arena) tprt_allocator_free(s->alloc, s->arena[r]);
    }
  }
  free(s->args), free(s->results), free(s->own_args), free(s->own_results);
  free(s->call_args), free(s->call_results), free(s->arena);
  tprt_world_destroy(s->world);
  if (s->procs) {  // every process closes its session: a barrier, so none mistakes the end for a failure
    tprt_status_free(tprt_procs_finish(s->procs));
    tprt_procs_destroy(s->procs);
  }
  tprt_module_unload(s->module, s->alloc);
  free(s);
}

int tprt_session_process_rank(const tprt_session_t* s) { return s && s->procs ? s->self : -1; }

const char* tprt_session_function(const tprt_session_t* s) { return s->fn->name; }
int tprt_session_ranks(const tprt_session_t* s) { return s->ranks; }
int tprt_session_count(const tprt_session_t* s, int result) { return result ? s->fn->num_results : s->fn->num_args; }

static const tprt__session_tensor_t* tprt__session_tensor(const tprt_session_t* s, int result, int i) {
  if (i < 0 || i >= tprt_session_count(s, result)) return NULL;
  return result ? &s->results[i] : &s->args[i];
}
const char* tprt_session_tensor_name(const tprt_session_t* s, int result, int i) {
  if (!tprt__session_tensor(s, result, i)) return NULL;
  return result ? s->fn->results[i].name : s->fn->args[i].name;
}
int tprt_session_tensor_dtype(const tprt_session_t* s, int result, int i) {
  const tprt__session_tensor_t* t = tprt__session_tensor(s, result, i);
  return t ? t->logical.dtype : -1;
}
int tprt_session_tensor_rank(const tprt_session_t* s, int result, int i) {
  const tprt__session_tensor_t* t = tprt__session_tensor(s, result, i);
  return t ? t->logical.rank : -1;
}
void tprt_session_tensor_dims(const tprt_session_t* s, int result, int i, int64_t* dims) {
  const tprt__session_tensor_t* t = tprt__session_tensor(s, result, i);
  if (t) memcpy(dims, t->logical.dims, sizeof(int64_t) * (size_t)t->logical.rank);
}

static tprt_status_t tprt__session_rank(tprt_rank_t* rank, void* user) {
  tprt_session_t* s = user;
  const int r = tprt_rank_index(rank);
  tprt_exec_t* exec = NULL;
  tprt_status_t st = tprt_exec_create(rank, s->module->chunks, tprt_rank_allocator(rank), &exec);
  if (!st && s->fn->entry(exec, &s->call_args[r * s->fn->num_args], &s->call_results[r * s->fn->num_results],
                          s->arena[r]) != 0)
    st = tprt_exec_take_status(exec);
  tprt_exec_destroy(exec);
  return st;
}

// A process world's sharded result j: every process's piece, all-gathered, into |whole|.
static tprt_status_t tprt__session_gather(tprt_session_t* s, int j, tprt_tensor_t* whole) {
  const int R = s->ranks, nr = s->fn->num_results;
  tprt_tensor_t local = s->fn->results[j].layout;
  local.data = s->call_results[s->self * nr + j];
  int* members = malloc(sizeof(int) * (size_t)R);
  void** got = calloc((size_t)R, sizeof(void*));
  size_t* sizes = calloc((size_t)R, sizeof(size_t));
  tprt_status_t st = NULL;
  if (!members || !got || !sizes) {
    st = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory gathering %d pieces", R);
  } else {
    for (int r = 0; r < R; ++r) members[r] = r;
    st = tprt_procs_allgather(s->procs, members, R, s->self, local.data, tprt_tensor_bytes(&local), got, sizes);
    for (int r = 0; r < R && !st; ++r) {
      local.data = got[r];
      if (sizes[r] != tprt_tensor_bytes(&local))
        st = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes for a %zu-byte piece", r, sizes[r],
                              tprt_tensor_bytes(&local));
      else
        st = tprt_shard_insert(&s->results[j].shard, s->world, r, &local, whole);
    }
  }
  for (int r = 0; got && r < R; ++r) free(got[r]);
  free(members), free(got), free(sizes);
  return st;
}

static bool tprt__aligned(const void* p) { return ((uintptr_t)p % TPRT__SESSION_ALIGN) == 0; }

tprt_status_t tprt_session_call(tprt_session_t* s, const void* const* args, void* const* results) {
  if (!s) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "session: NULL session");
  const int na = s->fn->num_args, nr = s->fn->num_results, R = s->ranks;
  if ((na && !args) || (nr && !results))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "session %s: NULL argument or result list", s->fn->name);
  tprt_status_t st = NULL;
  // Arguments: one rank reads an aligned caller buffer in place; otherwise each rank gets its piece.
  for (int a = 0; a < na; ++a) {
    if (!args[a])
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "session %s: argument %d ('%s') is NULL", s->fn->name, a,
                              s->fn->args[a].name);
    tprt_tensor_t whole = s->args[a].logical;
    whole.data = (void*)args[a];
    for (int r = 0; r < R; ++r) {
      if (s->procs && r != s->self) continue;
      void** slot = &s->call_args[r * na + a];
      if (R == 1 && tprt__aligned(args[a])) {
        *slot = (void*)args[a];
        continue;
      }
      tprt_tensor_t local = s->fn->args[a].layout;
      local.data = *slot = s->own_args[r * na + a];
      if (s->args[a].sharded) {
        if ((st = tprt_shard_extract(&s->args[a].shard, s->world, r, &whole, &local)))
          return tprt_status_annotate(st, "session %s: argument '%s'", s->fn->name, s->fn->args[a].name);
      } else {
        memcpy(local.data, whole.data, tprt_tensor_bytes(&local));
      }
    }
  }
  for (int j = 0; j < nr; ++j) {
    if (!results[j])
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "session %s: result %d ('%s') is NULL", s->fn->name, j,
                              s->fn->results[j].name);
    for (int r = 0; r < R; ++r)
      s->call_results[r * nr + j] = R == 1 && tprt__aligned(results[j]) ? results[j] : s->own_results[r * nr + j];
  }
  if ((st = tprt_world_run(s->world, tprt__session_rank, s))) return st;
  // Results: sharded ones reassembled from every rank, replicated ones rank 0's (in a process
  // world, this process's rank's: every rank computed the same tensor).
  const int first = s->procs ? s->self : 0;
  for (int j = 0; j < nr; ++j) {
    if (s->call_results[first * nr + j] == results[j]) continue;  // written in place
    tprt_tensor_t whole = s->results[j].logical;
    whole.data = results[j];
    if (!s->results[j].sharded) {
      memcpy(whole.data, s->call_results[first * nr + j], tprt_tensor_bytes(&whole));
      continue;
    }
    if (s->procs) {
      if ((st = tprt__session_gather(s, j, &whole)))
        return tprt_status_annotate(st, "session %s: result '%s'", s->fn->name, s->fn->results[j].name);
      continue;
    }
    for (int r = 0; r < R; ++r) {
      tprt_tensor_t local = s->fn->results[j].layout;
      local.data = s->call_results[r * nr + j];
      if ((st = tprt_shard_insert(&s->results[j].shard, s->world, r, &local, &whole)))
        return tprt_status_annotate(st, "session %s: result '%s'", s->fn->name, s->fn->results[j].name);
    }
  }
  return NULL;
}
