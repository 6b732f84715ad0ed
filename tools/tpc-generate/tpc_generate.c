// tpc-generate: samples from a whole model. The module is tpc_torch.export --generate's: @decode
// draws one token for each of B sequence slots (with the token's log-probability, the trainer's
// own per-token loss) and writes the new keys and values into the KV caches; @prefill caches P
// prompt tokens of one sequence (docs/generation.md). tpc-generate reads requests from a JSONL
// file and runs continuous batching over the slots: a request takes a free slot between decode
// steps, its prompt is prefilled in chunks into that slot's cache rows, it decodes with the others
// until it draws its eos token or max_tokens, and leaves; its result line is written at once.
//
//   tpc-generate gen.mlir --prompts prompts.jsonl --weights w/weights.safetensors
//                --inputs w/inputs.safetensors [--mesh tp=2] [--backend cuda] [-o out.jsonl]
//
// Ranks are threads of this process, or processes started by torchrun or mpirun (tprt_procs.h),
// one rank each. Rank 0 of a world of threads schedules between steps; in a process world every
// process schedules on its own copy of the requests, from the same prompt file and the same tokens
// (@decode's token and loss are whole on every rank of a tp mesh), so they take the same
// decisions without exchanging them, and rank 0's process alone writes. Every rank uploads its
// piece of the step's inputs and runs the step; the ranks meet through the world's collectives
// before and after each step. The caches stay where the kernels address them: @decode's cache results are
// its cache arguments' buffers (updated in place), and @prefill's caches are views of one slot's
// rows of those buffers.
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tprt_backend.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_generate.h"
#include "tpc_run_args.h"
#include "tpc_run_backend.h"
#include "tpc_run_compile.h"
#include "tpc_run_load.h"
#include "tpc_run_world.h"
#include "tpc_run_signal.h"
#include "tpc_run_tensor.h"

static const char* const kRoles[R_NUM] = {"ids", "positions", "cache_len", "seed", "request", "temperature", "top_k", "top_p"};

static int tpc__find(const tprt_module_function_t* fn, const char* name, bool result) {
  int n = result ? fn->num_results : fn->num_args;
  for (int i = 0; i < n; ++i)
    if (!strcmp((result ? fn->results : fn->args)[i].name, name)) return i;
  return -1;
}
#define FIND_ARG(fn, name) tpc__find((fn), (name), false)
#define FIND_RES(fn, name) tpc__find((fn), (name), true)

//===----------------------------------------------------------------------===//
// The module's interface
//===----------------------------------------------------------------------===//

// Whether argument |a| of function |f| is one of the per-step inputs (a role).
static bool tpc__is_role(const tpc_gen_t* g, int f, int a) {
  for (int q = 0; q < R_NUM; ++q)
    if (g->role[f][q] == a) return true;
  return false;
}

static tprt_status_t tpc__interface(tpc_gen_t* g) {
  const char* path = g->o->module_path;
  static const char* const names[2] = {"decode", "prefill"};
  for (int f = 0; f < 2; ++f) {
    g->fn[f] = tprt_module_function(g->module, names[f]);
    if (!g->fn[f])
      return tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s has no function @%s: export the model with tpc_torch.export "
                              "--generate", path, names[f]);
    for (int k = 0; k < R_NUM; ++k) {
      g->role[f][k] = FIND_ARG(g->fn[f], kRoles[k]);
      bool needed = k <= R_CACHE_LEN || f == F_DECODE;
      if (needed && g->role[f][k] < 0)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @%s has no argument '%s' (docs/generation.md)", path,
                                names[f], kRoles[k]);
    }
  }
  const tprt_module_function_t *dec = g->fn[F_DECODE], *pre = g->fn[F_PREFILL];
  g->res_token = FIND_RES(dec, "token");
  g->res_loss = FIND_RES(dec, "loss");
  if (g->res_token < 0 || g->res_loss < 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @decode must return 'token' and 'loss'", path);
  for (int f = 0; f < 2; ++f) {
    g->in_place[f] = calloc((size_t)g->fn[f]->num_results + 1, sizeof(int));
    if (!g->in_place[f]) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  }
  g->is_cache = calloc((size_t)dec->num_args + 1, sizeof(bool));
  g->cache_of = calloc((size_t)pre->num_args + 1, sizeof(int));
  g->shared = calloc((size_t)pre->num_args + 1, sizeof(int));
  if (!g->is_cache || !g->cache_of || !g->shared) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  // A result named like an argument is that argument updated: a cache, written in place.
  for (int f = 0; f < 2; ++f)
    for (int j = 0; j < g->fn[f]->num_results; ++j) {
      int a = FIND_ARG(g->fn[f], g->fn[f]->results[j].name);
      g->in_place[f][j] = a;
      if (a >= 0 && tprt_tensor_bytes(&g->fn[f]->args[a].layout) != tprt_tensor_bytes(&g->fn[f]->results[j].layout))
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @%s's result %s does not have its argument's shape",
                                path, names[f], g->fn[f]->results[j].name);
      if (a >= 0 && f == F_DECODE) g->is_cache[a] = true;
    }
  const tprt_module_tensor_t* ids = &dec->args[g->role[F_DECODE][R_IDS]];
  g->slots = ids->logical[0];
  g->chunk = pre->args[g->role[F_PREFILL][R_IDS]].logical[0];
  if (pre->args[g->role[F_PREFILL][R_CACHE_LEN]].logical[0] != 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @prefill must take one sequence", path);
  g->cache = 0;
  for (int a = 0; a < dec->num_args; ++a) {
    if (!g->is_cache[a]) continue;
    const tprt_module_tensor_t* mt = &dec->args[a];
    if (mt->layout.dims[0] != mt->logical[0])
      return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: the caches are sharded over sequences (%s); tpc-generate "
                              "runs meshes of tp only", path, mt->axes[0]);
    g->cache = mt->logical[0] / g->slots;
  }
  if (g->cache < 1) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @decode writes no KV cache", path);
  // @prefill's arguments: its caches view one slot of @decode's; the weights and tables are @decode's.
  for (int a = 0; a < pre->num_args; ++a) {
    g->cache_of[a] = g->shared[a] = -1;
    if (tpc__is_role(g, F_PREFILL, a)) continue;
    int d = FIND_ARG(dec, pre->args[a].name);
    if (d < 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @prefill's argument %s is not one of @decode's", path,
                              pre->args[a].name);
    if (g->is_cache[d]) {
      if (pre->args[a].layout.dims[0] * g->slots != dec->args[d].layout.dims[0] ||
          pre->args[a].layout.dims[1] != dec->args[d].layout.dims[1] || pre->args[a].layout.dtype != dec->args[d].layout.dtype)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @prefill's %s is not one sequence's rows of @decode's",
                                path, pre->args[a].name);
      g->cache_of[a] = d;
    } else {
      if (tprt_tensor_bytes(&pre->args[a].layout) != tprt_tensor_bytes(&dec->args[d].layout))
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: @prefill's %s differs from @decode's", path,
                                pre->args[a].name);
      g->shared[a] = d;
    }
  }
  int e = FIND_ARG(dec, "embed_tokens.weight");
  g->vocab = e >= 0 ? dec->args[e].logical[0] : INT32_MAX;
  return NULL;
}

//===----------------------------------------------------------------------===//
// The ranks
//===----------------------------------------------------------------------===//

typedef struct {
  void** args[2];
  void** res[2];
  void* arena;
  // Each function's per-step inputs live in one block (uploaded by one copy from |stage|), and
  // @decode's token and loss in another (brought back by one copy into |outstage|): a step costs
  // two transfers, not one per tensor.
  void* in_block[2];
  size_t in_off[2][R_NUM], in_bytes[2];
  void* out_block;
  size_t loss_off;
  void* stage;
  void* outstage;
  int64_t decodes;  // decode steps run so far (--graph: the first runs as it is, the second is captured)
  void* graph;
} tpc_kbuf_t;

static tprt_status_t tpc__kalloc(tpc_gen_t* g, size_t bytes, void** out) {
  if (g->device) return g->backend->alloc(bytes ? bytes : 1, out);
  *out = calloc(1, bytes ? bytes : 1);
  return *out ? NULL : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for %zu bytes", bytes);
}

static void tpc__kfree(tpc_gen_t* g, void* p) {
  if (g->device)
    g->backend->free(p);
  else
    free(p);
}

static tprt_status_t tpc__put(tpc_gen_t* g, void* k, const void* host, size_t bytes) {
  if (g->device) return g->backend->to_device(k, host, bytes);
  memcpy(k, host, bytes);
  return NULL;
}

// The rank's buffers: weights and tables uploaded, caches zeroed, @prefill's shared ones aliased.
static size_t tpc__align(size_t n) { return (n + 255) & ~(size_t)255; }

static tprt_status_t tpc__rank_setup(tpc_gen_t* g, int r, tpc_kbuf_t* k) {
  const tprt_module_function_t *dec = g->fn[F_DECODE], *pre = g->fn[F_PREFILL];
  size_t stage = 0;
  for (int f = 0; f < 2; ++f) {
    k->args[f] = calloc((size_t)g->fn[f]->num_args + 1, sizeof(void*));
    k->res[f] = calloc((size_t)g->fn[f]->num_results + 1, sizeof(void*));
    if (!k->args[f] || !k->res[f]) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    for (int q = 0; q < R_NUM; ++q) {
      int a = g->role[f][q];
      if (a < 0) continue;
      k->in_off[f][q] = k->in_bytes[f];
      k->in_bytes[f] += tpc__align(tprt_tensor_bytes(&g->fn[f]->args[a].layout));
    }
    if (k->in_bytes[f] > stage) stage = k->in_bytes[f];
    TPRT_RETURN_IF_ERROR(tpc__kalloc(g, k->in_bytes[f], &k->in_block[f]), "the per-step inputs (%zu bytes)",
                         k->in_bytes[f]);
    for (int q = 0; q < R_NUM; ++q)
      if (g->role[f][q] >= 0) k->args[f][g->role[f][q]] = (char*)k->in_block[f] + k->in_off[f][q];
  }
  size_t tb = tprt_tensor_bytes(&dec->results[g->res_token].layout);
  k->loss_off = tpc__align(tb);
  size_t out = k->loss_off + tprt_tensor_bytes(&dec->results[g->res_loss].layout);
  TPRT_RETURN_IF_ERROR(tpc__kalloc(g, out, &k->out_block), "the token and loss (%zu bytes)", out);
  k->res[F_DECODE][g->res_token] = k->out_block;
  k->res[F_DECODE][g->res_loss] = (char*)k->out_block + k->loss_off;
  int64_t arena = dec->arena_bytes > pre->arena_bytes ? dec->arena_bytes : pre->arena_bytes;
  TPRT_RETURN_IF_ERROR(tpc__kalloc(g, (size_t)arena, &k->arena), "the arena of %lld bytes", (long long)arena);
  k->stage = malloc(stage ? stage : 1);
  k->outstage = malloc(out);
  if (!k->stage || !k->outstage) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  for (int a = 0; a < dec->num_args; ++a) {
    if (tpc__is_role(g, F_DECODE, a)) continue;
    size_t bytes = tprt_tensor_bytes(&dec->args[a].layout);
    TPRT_RETURN_IF_ERROR(tpc__kalloc(g, bytes, &k->args[F_DECODE][a]), "argument %s (%zu bytes)", dec->args[a].name,
                         bytes);
    if (g->host_args[r][a]) {
      TPRT_RETURN_IF_ERROR(tpc__put(g, k->args[F_DECODE][a], g->host_args[r][a], bytes), "uploading %s",
                           dec->args[a].name);
    } else if (g->is_cache[a] && g->device) {
      void* zeros = calloc(1, bytes ? bytes : 1);
      if (!zeros) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
      tprt_status_t s = tpc__put(g, k->args[F_DECODE][a], zeros, bytes);
      free(zeros);
      TPRT_RETURN_IF_ERROR(s, "clearing %s", dec->args[a].name);
    }
  }
  for (int a = 0; a < pre->num_args; ++a) {
    if (g->shared[a] >= 0)
      k->args[F_PREFILL][a] = k->args[F_DECODE][g->shared[a]];
    else if (g->cache_of[a] < 0 && !tpc__is_role(g, F_PREFILL, a))
      TPRT_RETURN_IF_ERROR(tpc__kalloc(g, tprt_tensor_bytes(&pre->args[a].layout), &k->args[F_PREFILL][a]),
                           "argument %s", pre->args[a].name);
  }
  for (int f = 0; f < 2; ++f)
    for (int j = 0; j < g->fn[f]->num_results; ++j)
      if (g->in_place[f][j] < 0 && !k->res[f][j])
        TPRT_RETURN_IF_ERROR(tpc__kalloc(g, tprt_tensor_bytes(&g->fn[f]->results[j].layout), &k->res[f][j]),
                             "result %s", g->fn[f]->results[j].name);
  return NULL;
}

static void tpc__rank_free(tpc_gen_t* g, tpc_kbuf_t* k) {
  for (int f = 0; f < 2; ++f) {
    for (int a = 0; k->args[f] && a < g->fn[f]->num_args; ++a) {
      bool owned = (f == F_DECODE || (g->shared[a] < 0 && g->cache_of[a] < 0)) && !tpc__is_role(g, f, a);
      if (owned && k->args[f][a]) tpc__kfree(g, k->args[f][a]);
    }
    for (int j = 0; k->res[f] && j < g->fn[f]->num_results; ++j) {
      bool block = f == F_DECODE && (j == g->res_token || j == g->res_loss);
      if (g->in_place[f][j] < 0 && k->res[f][j] && !block) tpc__kfree(g, k->res[f][j]);
    }
    free(k->args[f]);
    free(k->res[f]);
    if (k->in_block[f]) tpc__kfree(g, k->in_block[f]);
  }
  if (k->out_block) tpc__kfree(g, k->out_block);
  if (k->arena) tpc__kfree(g, k->arena);
  free(k->stage);
  free(k->outstage);
}

// One step on one rank: its pieces of the inputs uploaded, the function run, @decode's token and
// loss brought back (rank 0).
static tprt_status_t tpc__rank_step(tpc_gen_t* g, int r, tpc_kbuf_t* k, tprt_exec_t* exec) {
  int f = g->kind;
  const tprt_module_function_t* fn = g->fn[f];
  for (int q = 0; q < R_NUM; ++q) {
    int a = g->role[f][q];
    if (a < 0) continue;
    const tprt_module_tensor_t* mt = &fn->args[a];
    tprt_tensor_t local = mt->layout;
    local.data = (char*)k->stage + k->in_off[f][q];
    if (mt->sharded) {
      tprt_tensor_t logical;
      tprt_shard_t shard;
      TPRT_RETURN_IF_ERROR(tpc__logical(mt, g->world, &logical, &shard), "%s", mt->name);
      TPRT_RETURN_IF_ERROR(tprt_shard_extract(&shard, g->world, r, &g->in[f][q], &local), "%s", mt->name);
    } else {
      memcpy(local.data, g->in[f][q].data, tprt_tensor_bytes(&local));
    }
  }
  TPRT_RETURN_IF_ERROR(tpc__put(g, k->in_block[f], k->stage, k->in_bytes[f]), "uploading @%s's inputs", fn->name);
  if (f == F_PREFILL)  // the slot's rows of every cache
    for (int a = 0; a < fn->num_args; ++a)
      if (g->cache_of[a] >= 0)
        k->args[f][a] = (char*)k->args[F_DECODE][g->cache_of[a]] + (size_t)g->slot * tprt_tensor_bytes(&fn->args[a].layout);
  for (int j = 0; j < fn->num_results; ++j)
    if (g->in_place[f][j] >= 0) k->res[f][j] = k->args[f][g->in_place[f][j]];
  if (f == F_DECODE && g->o->graph && k->decodes > 0) {
    if (!k->graph) {  // capture the step, then replay it (its buffers never move)
      TPRT_RETURN_IF_ERROR(g->backend->graph_begin(), "--graph: capturing @decode");
      tprt_status_t failed = NULL;
      if (fn->entry(exec, k->args[f], k->res[f], k->arena)) {
        failed = tprt_exec_take_status(exec);
        if (!failed) failed = tprt_make_status(TPRT_STATUS_INTERNAL, "@decode failed during capture");
      }
      tprt_status_t end = g->backend->graph_end(&k->graph);
      if (failed) {
        tprt_status_free(end);
        return failed;
      }
      TPRT_RETURN_IF_ERROR(end, "--graph: capturing @decode");
    }
    TPRT_RETURN_IF_ERROR(g->backend->graph_launch(k->graph), "--graph: @decode");
  } else if (fn->entry(exec, k->args[f], k->res[f], k->arena)) {
    tprt_status_t s = tprt_exec_take_status(exec);
    return s ? s : tprt_make_status(TPRT_STATUS_INTERNAL, "@%s failed", fn->name);
  }
  if (f == F_DECODE) ++k->decodes;
  if (g->device) TPRT_RETURN_IF_ERROR(g->backend->synchronize(), "@%s", fn->name);
  if (f == F_DECODE && (r == 0 || g->procs)) {  // each process's scheduler reads its own rank's copy
    size_t tb = tprt_tensor_bytes(&fn->results[g->res_token].layout), lb = tprt_tensor_bytes(&fn->results[g->res_loss].layout);
    if (g->device)
      TPRT_RETURN_IF_ERROR(g->backend->to_host(k->outstage, k->out_block, k->loss_off + lb), "token and loss");
    else
      memcpy(k->outstage, k->out_block, k->loss_off + lb);
    memcpy(g->token_host, k->outstage, tb);
    memcpy(g->loss_host, (char*)k->outstage + k->loss_off, lb);
  }
  return NULL;
}

static double tpc__rank_bytes(const tpc_gen_t* g);

static tprt_status_t tpc__rank(tprt_rank_t* rank, void* user) {
  tpc_gen_t* g = user;
  int r = tprt_rank_index(rank);
  const tprt_backend_t* b = g->backend;
  if (g->device && b->rank_begin) TPRT_RETURN_IF_ERROR(b->rank_begin(rank), "rank %d: %s backend", r, b->name);
  tpc_kbuf_t k;
  memset(&k, 0, sizeof k);
  tprt_exec_t* exec = NULL;
  tprt_status_t s = tpc__rank_setup(g, r, &k);
  if (s)  // the memory the run needs, beside what failed
    s = tprt_status_annotate(s, "rank %d: setting up %.3f GiB of arguments, caches, results and arena", r,
                             tpc__rank_bytes(g) / (1u << 30));
  if (!s) s = tprt_exec_create(rank, g->module->chunks, tprt_rank_allocator(rank), &exec);
  if (exec) tprt_exec_set_backend(exec, b);
  const bool lead = r == 0 || g->procs != NULL;  // the scheduler of this process's copy
  while (!s) {
    if (lead) tpc__schedule(g);
    if ((s = tpc_meet(rank))) break;
    if (g->kind == K_STOP) break;
    if ((s = tpc__rank_step(g, r, &k, exec))) break;
    if ((s = tpc_meet(rank))) break;
    s = tprt_rank_check_abort(rank);  // a signal stops the run between steps
  }
  if (s) {
    tprt_rank_fail(rank, s);
    s = NULL;
  }
  if (k.graph) g->backend->graph_destroy(k.graph);
  tprt_exec_destroy(exec);
  tpc__rank_free(g, &k);
  if (g->device && b->rank_end) b->rank_end(rank);
  return s;
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

// Reads @decode's weights and tables for every rank (each rank's piece), from --weights/--inputs.
static tprt_status_t tpc__load_args(tpc_gen_t* g, tpc_sources_t* src) {
  const tprt_module_function_t* dec = g->fn[F_DECODE];
  for (int r = 0; r < g->nranks; ++r) {
    g->host_args[r] = calloc((size_t)dec->num_args + 1, sizeof(void*));
    if (!g->host_args[r]) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (int a = 0; a < dec->num_args; ++a) {
    if (tpc__is_role(g, F_DECODE, a) || g->is_cache[a]) continue;
    const tprt_module_tensor_t* mt = &dec->args[a];
    tprt_tensor_t logical;
    tprt_shard_t shard;
    tpc_arg_src_t as;
    TPRT_RETURN_IF_ERROR(tpc__logical(mt, g->world, &logical, &shard), "%s", mt->name);
    TPRT_RETURN_IF_ERROR(tpc_arg_src_find(src, mt->name, &logical, &as), "%s", mt->name);
    if (as.count == 0) {
      tpc_arg_src_free(&as);
      return tprt_make_status(TPRT_STATUS_NOT_FOUND, "argument '%s' is in neither --weights nor --inputs (the export's "
                              "DIR/weights.safetensors and DIR/inputs.safetensors)", mt->name);
    }
    tprt_status_t s = NULL;
    int first = -1;  // the first rank of this process holding the argument
    for (int r = 0; r < g->nranks && !s; ++r) {
      if (g->procs && r != g->self) continue;  // the other processes hold the other ranks
      tprt_tensor_t local = mt->layout;
      local.data = g->host_args[r][a] = malloc(tprt_tensor_bytes(&local) ? tprt_tensor_bytes(&local) : 1);
      if (!local.data) s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for %s", mt->name);
      else if (mt->sharded && tpc_arg_src_can_slice(&shard, logical.dtype))
        s = tpc_arg_src_read_local(src, &as, &shard, g->world, r, &local);
      else if (mt->sharded) {
        logical.data = malloc(tprt_tensor_bytes(&logical));
        s = logical.data ? tpc_arg_src_read(src, &as, &logical)
                         : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for %s", mt->name);
        if (!s) s = tprt_shard_extract(&shard, g->world, r, &logical, &local);
        free(logical.data);
      } else if (first >= 0) {
        memcpy(local.data, g->host_args[first][a], tprt_tensor_bytes(&local));
      } else {
        s = tpc_arg_src_read(src, &as, &local);
        first = r;
      }
    }
    tpc_arg_src_free(&as);
    TPRT_RETURN_IF_ERROR(s, "%s", mt->name);
  }
  return NULL;
}

// The logical per-step inputs rank 0 fills.
static tprt_status_t tpc__inputs(tpc_gen_t* g) {
  for (int f = 0; f < 2; ++f)
    for (int q = 0; q < R_NUM; ++q) {
      int a = g->role[f][q];
      if (a < 0) continue;
      tprt_shard_t shard;
      TPRT_RETURN_IF_ERROR(tpc__logical(&g->fn[f]->args[a], g->world, &g->in[f][q], &shard), "%s", kRoles[q]);
      g->in[f][q].data = calloc(1, tprt_tensor_bytes(&g->in[f][q]) + 1);
      if (!g->in[f][q].data) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    }
  g->token_host = calloc(1, tprt_tensor_bytes(&g->fn[F_DECODE]->results[g->res_token].layout) + 1);
  g->loss_host = calloc(1, tprt_tensor_bytes(&g->fn[F_DECODE]->results[g->res_loss].layout) + 1);
  g->slot_req = malloc((size_t)g->slots * sizeof *g->slot_req);
  if (!g->token_host || !g->loss_host || !g->slot_req)
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  for (int64_t s = 0; s < g->slots; ++s) g->slot_req[s] = -1;
  const tprt_module_tensor_t *tok = &g->fn[F_DECODE]->results[g->res_token], *loss = &g->fn[F_DECODE]->results[g->res_loss];
  if (tok->layout.dims[0] != tok->logical[0] || loss->layout.dims[0] != loss->logical[0])
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "@decode's token and loss are sharded; tpc-generate runs meshes "
                            "of tp only");
  return NULL;
}

// The bytes one rank holds: both functions' arguments and results (shared ones once) and the arena.
static double tpc__rank_bytes(const tpc_gen_t* g) {
  double total = 0;
  const tprt_module_function_t *dec = g->fn[F_DECODE], *pre = g->fn[F_PREFILL];
  for (int a = 0; a < dec->num_args; ++a) total += (double)tprt_tensor_bytes(&dec->args[a].layout);
  for (int a = 0; a < pre->num_args; ++a)
    if (g->shared[a] < 0 && g->cache_of[a] < 0) total += (double)tprt_tensor_bytes(&pre->args[a].layout);
  for (int f = 0; f < 2; ++f)
    for (int j = 0; j < g->fn[f]->num_results; ++j)
      if (g->in_place[f][j] < 0) total += (double)tprt_tensor_bytes(&g->fn[f]->results[j].layout);
  total += (double)(dec->arena_bytes > pre->arena_bytes ? dec->arena_bytes : pre->arena_bytes);
  return total;
}

int main(int argc, char** argv) {
  tpc_gen_options_t o;
  int parsed = tpc_gen_parse_args(argc, argv, &o);
  if (parsed <= 0) return parsed == 0 ? 0 : 2;
  tpc_signals_install();
  if (o.share_gpus) setenv("TPRT_CUDA_SHARE_DEVICES", "1", 1);
  if (o.share_gpus) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  // A world of threads on several GPUs captures each rank's NCCL collectives on its own (as tpc-run --graph).
  if (o.graph) setenv("TPRT_CUDA_COPY_ENGINE", "0", 0);
  tpc_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.module_path = o.module_path;
  ro.weights = o.weights;
  ro.weight_names = o.weight_names;
  ro.inputs = o.inputs;
  ro.mesh = o.mesh;
  ro.numerics = o.numerics;
  ro.pipeline = "infer";
  ro.backend = o.backend;
  tpc_gen_t* g = calloc(1, sizeof *g);
  if (!g) return 1;
  g->o = &o;
  g->kind = K_STOP;
  g->prefilling = -1;
  tprt_allocator_t alloc = tprt_allocator_system();
  char tmpdir[] = "/tmp/tpc-generate-XXXXXX", so_path[PATH_MAX];
  const char* path = o.module_path;
  size_t plen = strlen(path);
  bool compiled = plen > 5 && !strcmp(path + plen - 5, ".mlir");
  if (compiled && !ro.mesh) ro.mesh = "tp=1";
  if (compiled) {
    if (!tpc__compile(&ro, path, so_path, sizeof so_path, tmpdir)) return 1;
    path = so_path;
  }
  tprt_module_t* module = NULL;
  tpc_sources_t src = {0};
  tprt_status_t status = NULL;
  int rc = 1;
  g->backend = tpc__load_backend(o.backend);
  if (!g->backend) goto out;
  g->device = g->backend != tprt_backend_cpu();
  if ((status = tprt_module_load(path, alloc, &module))) goto out;
  g->module = module;
  if ((status = tpc__interface(g))) goto out;
  {
    tprt_world_options_t w;
    int mesh_size = tpc_world_options(module, &w);
    if ((status = tprt_procs_from_env(0, 0, &g->procs))) goto out;
    if ((status = tpc_world_check_procs(g->procs, mesh_size, "the module's mesh", "tpc-generate"))) goto out;
    g->self = g->procs ? tprt_procs_rank(g->procs) : 0;
    w.procs = g->procs;
    if ((status = tprt_world_create(&w, alloc, &g->world))) goto out;
  }
  g->nranks = tprt_world_size(g->world);
  if (o.tokenizer && (status = tpc_tokenizer_load(o.tokenizer, &g->tokenizer))) goto out;
  if ((status = tpc_gen_read_requests(o.prompts_path, &o, g->tokenizer, g->vocab, g->cache, g->chunk, &g->reqs,
                                      &g->nreqs)))
    goto out;
  if ((status = tpc__inputs(g))) goto out;
  if ((status = tpc_sources_open(&ro, alloc, &src))) goto out;
  if ((status = tpc__load_args(g, &src))) goto out;
  // Rank 0's process writes the results (the others run the same schedule without writing).
  g->out = g->self != 0 ? NULL : strcmp(o.output_path, "-") ? fopen(o.output_path, "w") : stdout;
  if (g->self != 0) goto opened;
  if (!g->out) {
    status = tprt_make_status(TPRT_STATUS_NOT_FOUND, "--output %s: cannot write it", o.output_path);
    goto out;
  }
  if (o.json_path && !(g->json = fopen(o.json_path, "w"))) {
    status = tprt_make_status(TPRT_STATUS_NOT_FOUND, "--json %s: cannot write it", o.json_path);
    goto out;
  }
opened:
  if (g->self == 0)
    fprintf(stderr, "tpc-generate: %s: %lld requests, %lld slots, caches of %lld rows, prefill chunks of %lld; %d rank%s "
            "(%s%s%s), %.3f GiB per rank, numerics %s\n", o.module_path, (long long)g->nreqs, (long long)g->slots,
            (long long)g->cache, (long long)g->chunk, g->nranks, g->nranks == 1 ? "" : "s", g->backend->name,
            g->procs ? ", one process each, launched by " : "", g->procs ? tprt_procs_launcher(g->procs) : "",
            tpc__rank_bytes(g) / (1u << 30), module->numerics);
  if (g->backend->configure && (status = g->backend->configure(module->numerics))) goto out;
  g->t0 = g->last_report = tpc_now();
  tpc_signals_watch(g->world);
  status = tprt_world_run(g->world, tpc__rank, g);
  tpc_signals_watch(NULL);
  if (status || tpc_signals_caught()) goto out;
  tpc__progress(g, true);
  if (g->self == 0)
    fprintf(stderr, "tpc-generate: %lld requests in %.3f s: %lld prompt tokens prefilled in %.3f s, %lld tokens drawn in "
          "%.3f s of decode steps\n", (long long)g->nreqs, tpc_now() - g->t0, (long long)g->prefill_tokens, g->prefill_s,
          (long long)g->decode_tokens, g->decode_s);
  rc = 0;
out:
  if (status) {
    fprintf(stderr, "tpc-generate: error: %s\n", tprt_status_message(status));
    if (g->procs) tprt_procs_abort(g->procs, tprt_status_message(status));  // the other processes end with it
    tprt_status_free(status);
  } else if (rc && tpc_signals_caught()) {
    fprintf(stderr, "tpc-generate: %s\n", tpc_signals_message());
    rc = 128 + tpc_signals_caught();
  } else if (rc && g->backend) {
    fprintf(stderr, "tpc-generate: error: the run failed\n");
  }
  if (g->procs && rc == 0 && (status = tprt_procs_finish(g->procs))) {
    fprintf(stderr, "tpc-generate: error: %s\n", tprt_status_message(status));
    tprt_status_free(status);
    rc = 1;
  }
  if (g->out && g->out != stdout) fclose(g->out);
  if (g->json) fclose(g->json);
  for (int r = 0; r < g->nranks; ++r) {
    for (int a = 0; g->host_args[r] && a < g->fn[F_DECODE]->num_args; ++a) free(g->host_args[r][a]);
    free(g->host_args[r]);
  }
  for (int f = 0; f < 2; ++f) {
    for (int q = 0; q < R_NUM; ++q) free(g->in[f][q].data);
    free(g->in_place[f]);
  }
  free(g->token_host);
  free(g->loss_host);
  free(g->slot_req);
  free(g->is_cache);
  free(g->cache_of);
  free(g->shared);
  tpc_gen_free_requests(g->reqs, g->nreqs);
  tpc_tokenizer_free(g->tokenizer);
  tpc_sources_close(&src);
  tprt_world_destroy(g->world);
  tprt_procs_destroy(g->procs);
  if (module) tprt_module_unload(module, alloc);
  free(g);
  if (compiled) {
    unlink(so_path);
    rmdir(tmpdir);
  }
  return rc;
}
