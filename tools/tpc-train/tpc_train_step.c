// tpc-train's rank threads (see tpc_train.h): the loop each rank runs (tpc__rank), rank 0's work
// before each step and micro-batch (the batch, the micro-batches' pieces, the step's loss), the
// partial gradients' pairwise tree over micro-batches, the copies between host and kernel
// buffers, and each rank's kernel buffers.
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_backend.h"
#include "tprt_collectives.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run_load.h"
#include "tpc_run_tensor.h"
#include "tpc_train.h"
#include "tpc_run_world.h"

bool tpc__in_place(const tpc_train_t* t, const tprt_module_function_t* fn, int j) {
  return fn == t->rfn && t->next && t->next[j] >= 0;
}

// Points rank buffers |res| (rfn's results) at the arguments they update.
static void tpc__alias_results(const tpc_train_t* t, void** args, void** res) {
  for (int j = 0; j < t->rfn->num_results; ++j)
    if (t->next[j] >= 0) res[j] = args[t->next[j]];
}

//===----------------------------------------------------------------------===//
// Rank 0's work between steps
//===----------------------------------------------------------------------===//

// The step's batch (tokens [position, position + T] of the data), the per-token loss gradient
// (1/N for the N tokens of the global batch, so the step's loss is their mean) and AdamW's
// hyperparameters for step t = step + 1.
static tprt_status_t tpc__prepare(tpc_train_t* t) {
  int64_t T = t->ids_t.dims[0];
  TPRT_RETURN_IF_ERROR(tpc_data_batch(&t->train, t->position, T, (int32_t*)t->ids_t.data, (int32_t*)t->targets_t.data),
                       "step %lld", (long long)t->step + 1);
  int64_t n = 0;
  for (int64_t i = 0; i < T; ++i) n += ((int32_t*)t->targets_t.data)[i] >= 0;
  float g = n ? (float)(1.0 / (double)n) : 0.0f;
  for (int64_t i = 0; i < T; ++i) ((float*)t->loss_grad_t.data)[i] = ((int32_t*)t->targets_t.data)[i] >= 0 ? g : 0.0f;
  tpc_adamw_hyper(t->o, t->step + 1, t->hyper_v);
  return NULL;
}

// Row i of micro-batch m's piece of a token tensor is row tpc__row(i, m, k, P) of the step's:
// the step's rows are D * k blocks of P, one per (data-parallel rank d, micro-batch m) in the
// order d * k + m, and the piece holds micro-batch m's block of every rank, so each rank's k
// micro-batches are the k parts of its block without micro-batches.
static int64_t tpc__row(int64_t i, int m, int k, int64_t P) { return ((i / P) * k + m) * P + i % P; }

// Rank 0, before micro-batch m: the pieces of every token tensor.
static void tpc__micro_pieces(tpc_train_t* t, int m) {
  for (int a = 0; a < t->fn->num_args; ++a) {
    if (!t->tok[a].data) continue;
    int64_t rows = t->tok[a].dims[0];
    size_t rb = tprt_tensor_bytes(&t->tok[a]) / (size_t)rows;
    for (int64_t i = 0; i < rows / t->k; ++i)
      memcpy((char*)t->micro[a].data + (size_t)i * rb,
             (const char*)t->tok[a].data + (size_t)tpc__row(i, m, t->k, t->piece[a]) * rb, rb);
  }
}

tprt_status_t tpc__to_rank(const tprt_module_tensor_t* mt, const tprt_world_t* world, int r, const void* logical,
                           void* local) {
  tprt_tensor_t l, loc = mt->layout;
  tprt_shard_t shard;
  loc.data = local;
  TPRT_RETURN_IF_ERROR(tpc__logical(mt, world, &l, &shard), "%s", mt->name);
  l.data = (void*)logical;
  if (mt->sharded) return tprt_shard_extract(&shard, world, r, &l, &loc);
  memcpy(local, logical, tprt_tensor_bytes(&loc));
  return NULL;
}

// Every rank, before a call of the gradient function: its part of each token tensor's piece.
static tprt_status_t tpc__feed(tpc_train_t* t, int r) {
  for (int i = 0; i < t->gfn->num_args; ++i) {
    int a = t->garg[i];
    if (!t->tok[a].data) continue;
    const tprt_module_tensor_t* mt = &t->gfn->args[i];
    TPRT_RETURN_IF_ERROR(tpc__to_rank(mt, t->world, r, t->micro[a].data, t->args[r][a]), "step %lld",
                         (long long)t->step + 1);
    TPRT_RETURN_IF_ERROR(tpc__upload(t, t->kb[r].args[a], t->args[r][a], tprt_tensor_bytes(&mt->layout)), "%s", mt->name);
  }
  return NULL;
}

tprt_status_t tpc__upload(const tpc_train_t* t, void* kernel, const void* host, size_t bytes) {
  if (kernel == host) return NULL;
  if (!t->device) return memcpy(kernel, host, bytes), NULL;
  return t->backend->to_device(kernel, host, bytes);
}

tprt_status_t tpc__download(const tpc_train_t* t, void* host, const void* kernel, size_t bytes) {
  if (kernel == host) return NULL;
  if (!t->device) return memcpy(host, kernel, bytes), NULL;
  return t->backend->to_host(host, kernel, bytes);
}

// Every rank, after micro-batch m: its partial gradients into the pairwise tree, with the
// backend's copy and add. Level l holds a pending sum of 2^l micro-batches; a new one is added to
// the pending sums on its left, earlier first, as the canonical all-reduce adds member g + s to
// member g.
static tprt_status_t tpc__accumulate(tpc_train_t* t, int r) {
  const tprt_backend_t* b = t->backend;
  for (int p = 0; p < t->npart; ++p) {
    tprt_tensor_t x = t->gfn->results[1 + p].layout;
    x.data = t->kb[r].gres[1 + p];
    for (int l = 0; l < t->levels; ++l) {
      tprt_tensor_t slot = x;
      slot.data = t->kb[r].acc[p * t->levels + l];
      bool* pending = &t->accf[r][p * t->levels + l];
      if (!*pending) {
        *pending = true;
        TPRT_RETURN_IF_ERROR(b->copy(&x, &slot), "accumulating %s", t->gfn->results[1 + p].name);
        break;
      }
      TPRT_RETURN_IF_ERROR(b->add(&slot, &x, &slot), "accumulating %s", t->gfn->results[1 + p].name);
      *pending = false;
      x = slot;
    }
  }
  return NULL;
}

// Rank 0 (every process in a process world), after micro-batch m: every rank's per-token loss
// (the gradient function's first result; |pieces[r]| is rank r's), placed at its tokens' positions
// in the step.
static tprt_status_t tpc__gather_loss(tpc_train_t* t, int m, const void* const* pieces) {
  const tprt_module_tensor_t* mt = &t->gfn->results[0];
  tprt_tensor_t logical;
  tprt_shard_t shard;
  TPRT_RETURN_IF_ERROR(tpc__logical(mt, t->world, &logical, &shard), "the loss");
  float* piece = calloc((size_t)logical.dims[0] + 1, sizeof *piece);
  if (!piece) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  logical.data = piece;
  tprt_status_t s = NULL;
  for (int r = 0; !s && r < tprt_world_size(t->world); ++r) {
    tprt_tensor_t local = mt->layout;
    local.data = (void*)pieces[r];
    if (mt->sharded)
      s = tprt_shard_insert(&shard, t->world, r, &local, &logical);
    else if (r == 0)
      memcpy(piece, local.data, tprt_tensor_bytes(&local));
  }
  for (int64_t i = 0; !s && i < logical.dims[0]; ++i) t->loss_all[tpc__row(i, m, t->k, t->piece[t->ids])] = piece[i];
  free(piece);
  return s;
}

//===----------------------------------------------------------------------===//
// One rank
//===----------------------------------------------------------------------===//

// A rank's kernel buffers (t->kb[r]): on a device backend allocated there, the arguments uploaded
// from their host copies; on the CPU backend the host buffers themselves. The evaluation's too.
static tprt_status_t tpc__rank_buffers(tpc_train_t* t, tprt_rank_t* rank) {
  int r = tprt_rank_index(rank);
  const tprt_module_function_t *g = t->gfn, *fn = t->fn;
  tpc_kbufs_t* k = &t->kb[r];
  const tprt_backend_t* b = t->backend;
  tprt_allocator_t host = tprt_rank_allocator(rank);
  int64_t arena = g->arena_bytes > (t->ufn ? t->ufn->arena_bytes : 0) ? g->arena_bytes : t->ufn->arena_bytes;
#define TPC__ALLOC(bytes, out) \
  (t->device ? b->alloc((size_t)(bytes) + 1, (out)) : tprt_allocator_malloc(host, (size_t)(bytes) + 1, TPRT_ABI_ARENA_ALIGNMENT, (out)))
  TPRT_RETURN_IF_ERROR(TPC__ALLOC(arena, &k->arena), "the arena (%lld bytes)", (long long)arena);
  if (!t->device) {
    k->args = t->args[r], k->gres = t->gres[r], k->res = t->results[r], k->acc = (void**)t->acc[r];
  } else {
    k->args = calloc((size_t)fn->num_args + 1, sizeof(void*));
    k->gres = calloc((size_t)g->num_results + 1, sizeof(void*));
    k->res = t->ufn ? calloc((size_t)t->rfn->num_results + 1, sizeof(void*)) : k->gres;
    k->acc = calloc((size_t)(t->npart * t->levels) + 1, sizeof(void*));
    if (!k->args || !k->gres || !k->res || !k->acc) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    for (int a = 0; a < fn->num_args; ++a) {
      size_t bytes = tprt_tensor_bytes(&fn->args[a].layout);
      TPRT_RETURN_IF_ERROR(TPC__ALLOC(bytes, &k->args[a]), "argument %s", fn->args[a].name);
      TPRT_RETURN_IF_ERROR(tpc__upload(t, k->args[a], t->args[r][a], bytes), "uploading %s", fn->args[a].name);
    }
    for (int j = 0; j < g->num_results; ++j)
      if (!tpc__in_place(t, g, j))
        TPRT_RETURN_IF_ERROR(TPC__ALLOC(tprt_tensor_bytes(&g->results[j].layout), &k->gres[j]), "result %s",
                             g->results[j].name);
    for (int j = 0; t->ufn && j < t->ufn->num_results; ++j)
      if (!tpc__in_place(t, t->ufn, j))
        TPRT_RETURN_IF_ERROR(TPC__ALLOC(tprt_tensor_bytes(&t->ufn->results[j].layout), &k->res[j]), "result %s",
                             t->ufn->results[j].name);
    for (int p = 0; p < t->npart * t->levels; ++p)
      TPRT_RETURN_IF_ERROR(TPC__ALLOC(tprt_tensor_bytes(&g->results[1 + p / t->levels].layout), &k->acc[p]),
                           "accumulator of %s", g->results[1 + p / t->levels].name);
  }
  if (!t->efn) return NULL;
  const tprt_module_function_t* e = t->efn;
  k->eargs = calloc((size_t)e->num_args + 1, sizeof(void*));
  k->eres = calloc((size_t)e->num_results + 1, sizeof(void*));
  t->eval_host[r] = calloc((size_t)e->num_args + 1, sizeof(void*));
  t->eval_results_of[r] = calloc((size_t)e->num_results + 1, sizeof(void*));
  if (!k->eargs || !k->eres || !t->eval_host[r] || !t->eval_results_of[r])
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  TPRT_RETURN_IF_ERROR(TPC__ALLOC(e->arena_bytes, &k->earena), "the evaluation's arena");
  for (int a = 0; a < e->num_args; ++a) {
    if (t->eval_from[a] >= 0) continue;  // the training argument's buffer, bound at each evaluation
    const tprt_module_tensor_t* mt = &e->args[a];
    size_t bytes = tprt_tensor_bytes(&mt->layout);
    TPRT_RETURN_IF_ERROR(TPC__ALLOC(bytes, &k->eargs[a]), "evaluation argument %s", mt->name);
    TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(host, bytes + 1, 64, &t->eval_host[r][a]), "evaluation argument %s", mt->name);
    // A table cut into micro-batches for training: this rank's part of it whole.
    if (t->eval_tok[a] >= 0) {
      TPRT_RETURN_IF_ERROR(tpc__to_rank(mt, t->world, r, t->tok[t->eval_tok[a]].data, t->eval_host[r][a]), "evaluation");
      TPRT_RETURN_IF_ERROR(tpc__upload(t, k->eargs[a], t->eval_host[r][a], bytes), "uploading %s", mt->name);
    }
  }
  for (int j = 0; j < e->num_results; ++j) {
    size_t bytes = tprt_tensor_bytes(&e->results[j].layout);
    TPRT_RETURN_IF_ERROR(TPC__ALLOC(bytes, &k->eres[j]), "evaluation result %s", e->results[j].name);
    t->eval_results_of[r][j] = t->device ? malloc(bytes + 1) : k->eres[j];
    if (!t->eval_results_of[r][j]) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  }
#undef TPC__ALLOC
  return NULL;
}

static void tpc__rank_buffers_free(tpc_train_t* t, tprt_rank_t* rank) {
  int r = tprt_rank_index(rank);
  tpc_kbufs_t* k = &t->kb[r];
  tprt_allocator_t host = tprt_rank_allocator(rank);
  void (*kfree)(void*) = t->device ? t->backend->free : NULL;
#define TPC__FREE(p) (kfree ? (p ? kfree(p) : (void)0) : tprt_allocator_free(host, (p)))
  TPC__FREE(k->arena);
  if (t->device) {
    for (int a = 0; k->args && a < t->fn->num_args; ++a) TPC__FREE(k->args[a]);
    for (int j = 0; k->gres && j < t->gfn->num_results; ++j)
      if (!tpc__in_place(t, t->gfn, j)) TPC__FREE(k->gres[j]);
    for (int j = 0; t->ufn && k->res && j < t->ufn->num_results; ++j)
      if (!tpc__in_place(t, t->ufn, j)) TPC__FREE(k->res[j]);
    for (int p = 0; k->acc && p < t->npart * t->levels; ++p) TPC__FREE(k->acc[p]);
    if (k->res != k->gres) free(k->res);
    free(k->args), free(k->gres), free(k->acc);
  }
  if (t->efn) {
    TPC__FREE(k->earena);
    for (int a = 0; k->eargs && a < t->efn->num_args; ++a)
      if (t->eval_from[a] < 0) {
        TPC__FREE(k->eargs[a]);
        if (t->eval_host[r]) tprt_allocator_free(host, t->eval_host[r][a]);
      }
    for (int j = 0; k->eres && j < t->efn->num_results; ++j) {
      if (t->device && t->eval_results_of[r]) free(t->eval_results_of[r][j]);
      TPC__FREE(k->eres[j]);
    }
    free(k->eargs), free(k->eres), free(t->eval_host[r]), free(t->eval_results_of[r]);
    t->eval_results_of[r] = NULL;
  }
#undef TPC__FREE
  memset(k, 0, sizeof *k);
}

tprt_status_t tpc__rank(tprt_rank_t* rank, void* user) {
  tpc_train_t* t = user;
  int r = tprt_rank_index(rank);
  const tprt_module_function_t *gfn = t->gfn, *ufn = t->ufn;
  const tprt_backend_t* b = t->backend;
  tpc_kbufs_t* k = &t->kb[r];
  tprt_exec_t *exec = NULL, *eval_exec = NULL;
  tprt_status_t s = t->device && b->rank_begin ? b->rank_begin(rank) : NULL;
  bool begun = t->device && !s;
  if (s) s = tprt_status_annotate(s, "rank %d: the %s backend", r, b->name);
  void** gargs = calloc((size_t)gfn->num_args + 1, sizeof(void*));
  void** uargs = ufn ? calloc((size_t)ufn->num_args + 1, sizeof(void*)) : NULL;
  if (!s && (!gargs || (ufn && !uargs))) s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  if (!s) s = tpc__rank_buffers(t, rank);
  if (!s) s = tprt_exec_create(rank, t->module->chunks, tprt_rank_allocator(rank), &exec);
  if (exec) tprt_exec_set_backend(exec, b);
  if (!s && t->efn) s = tprt_exec_create(rank, t->eval_module->chunks, tprt_rank_allocator(rank), &eval_exec);
  if (eval_exec) tprt_exec_set_backend(eval_exec, b);
  while (!s) {
    if (tpc__leads(t, r)) {
      t->t_step = tpc_now();
      tprt_status_t p = tpc__prepare(t);
      if (p) t->failure = p, t->stop = true;
    }
    // The micro-batches (one without --micro-batches): rank 0 cuts the pieces, every rank feeds
    // its part and computes; rank 0 collects the loss while the others wait at the next meeting.
    // In a process world every process cuts the pieces and collects the loss itself.
    for (int m = 0; m < t->k && !s; ++m) {
      if (tpc__leads(t, r) && !t->stop) tpc__micro_pieces(t, m);
      if ((s = tpc_meet(rank)) || t->stop) break;
      if ((s = tpc__feed(t, r))) break;
      memcpy(t->args[r][t->hyper], t->hyper_v, sizeof t->hyper_v);
      if ((s = tpc__upload(t, k->args[t->hyper], t->args[r][t->hyper], sizeof t->hyper_v))) break;
      for (int i = 0; i < gfn->num_args; ++i) gargs[i] = k->args[t->garg[i]];
      if (!ufn) tpc__alias_results(t, k->args, k->gres);
      if (gfn->entry(exec, gargs, k->gres, k->arena)) {
        s = tprt_exec_take_status(exec);
        if (!s) s = tprt_make_status(TPRT_STATUS_INTERNAL, "step %lld failed", (long long)t->step + 1);
        break;
      }
      if (ufn && (s = tpc__accumulate(t, r))) break;
      if ((s = tpc__download(t, t->gres[r][0], k->gres[0], tprt_tensor_bytes(&gfn->results[0].layout)))) break;
      const void* pieces[TPC_RUN_MAX_RANKS];
      void* all = NULL;
      if ((s = tpc__rank_pieces(t, rank, t->gres, tprt_tensor_bytes(&gfn->results[0].layout), pieces, &all))) break;
      if (tpc__leads(t, r)) {
        tprt_status_t g = tpc__gather_loss(t, m, pieces);  // reported by tpc__review
        if (g && !t->failure) t->failure = g;
        else tprt_status_free(g);
      }
      free(all);
    }
    if (s || t->stop) break;  // t->stop: rank 0 set it before the meeting above
    // The update, once, on the k micro-batches' sums.
    if (ufn) {
      for (int i = 0; i < ufn->num_args; ++i)
        uargs[i] = t->uarg[i] >= 0 ? k->args[t->uarg[i]] : k->acc[(-1 - t->uarg[i]) * t->levels + t->levels - 1];
      tpc__alias_results(t, k->args, k->res);
      if (ufn->entry(exec, uargs, k->res, k->arena)) {
        s = tprt_exec_take_status(exec);
        if (!s) s = tprt_make_status(TPRT_STATUS_INTERNAL, "step %lld: the update failed", (long long)t->step + 1);
        break;
      }
      for (int p = 0; p < t->npart * t->levels; ++p) t->accf[r][p] = false;
    }
    t->rank_flops[r] = tprt_exec_stats(exec)->model_flops;
    if ((s = tpc__download(t, t->results[r][t->norm], k->res[t->norm], sizeof(float)))) break;
    if ((s = t->procs ? tpc__share_step(t) : tpc_meet(rank))) break;
    if (tpc__leads(t, r)) tpc__review(t);
    if (!t->procs && (s = tpc_meet(rank))) break;  // rank 0's decisions (a process made its own)
    // The step's results that become the next step's arguments (weights, master weights, moments)
    // were written in place (tpc__in_place); a step with a non-finite norm left them unchanged.
    if (t->save) {
      // Each rank brings its arguments to the host; rank 0 writes them (in a process world, once
      // the other processes have sent it their sharded ones). A checkpoint that cannot be written
      // stops the run: in a process world rank 0 fails, which ends every process with its message.
      for (int a = 0; !s && a < t->fn->num_args; ++a)
        if (!t->micro[a].data)
          s = tpc__download(t, t->args[r][a], k->args[a], tprt_tensor_bytes(&t->fn->args[a].layout));
      if (s || (s = t->procs ? tpc__gather_args(t) : tpc_meet(rank))) break;
      if (r == 0) {
        tprt_status_t c = tpc_checkpoint_save(t->o, t->fn, t->world, t->args, t->tok, tprt_world_size(t->world), t->step,
                                              t->position);
        if (t->procs) tpc__drop_gathered(t);
        if (c && t->procs) s = c;
        else if (c) t->failure = c, t->stop = true;
      }
      if (s || (s = tpc_meet(rank))) break;
    }
    if (t->eval_now && (s = tpc__evaluate(t, rank, eval_exec))) break;
    if (t->stop) break;
  }
  free(gargs);
  free(uargs);
  if (s) tprt_rank_fail(rank, s);
  tprt_exec_destroy(exec);
  tprt_exec_destroy(eval_exec);
  tpc__rank_buffers_free(t, rank);
  if (begun && b->rank_end) b->rank_end(rank);
  return NULL;
}
