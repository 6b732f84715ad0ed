// tpc-train: trains a whole model. The module is a logical training function (token ids and
// targets in, the per-token loss out: docs/training.md); tpc-train compiles it with the `step`
// pipeline (tp-autodiff, tp-adamw, tp-shard, ...), so one call of the compiled step computes the
// loss, the gradients, the exact global gradient norm and every parameter's AdamW update, on
// every rank of the mesh. Around it tpc-train feeds batches from a token file, runs the
// learning-rate schedule, logs every step, writes checkpoints atomically and resumes them bit
// for bit.
//
//   tpc-train model.mlir --data train.bin --batch 8 --steps 200 --lr 3e-3 [--mesh tp=2,dp=2]
//             [--weights ckpt.safetensors | --seed S] [--save DIR --save-every N] [--resume DIR]
//
// Ranks are threads of this process. Between steps the ranks meet through the world's own
// collectives (so a failed rank or a signal ends every rank's wait); rank 0 prepares the batch,
// assembles the loss and speaks for the world.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tprt_backend.h"
#include "tprt_collectives.h"
#include "tprt_exec.h"
#include "tprt_numerics.h"
#include "tprt_module.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run_args.h"
#include "tpc_run_backend.h"
#include "tpc_run_compile.h"
#include "tpc_run_load.h"
#include "tpc_run_signal.h"
#include "tpc_run_tensor.h"
#include "tpc_train.h"

// The state shared by the rank threads (rank 0 writes the step's inputs and decisions between
// two meetings of the ranks; every rank reads them after the second).
typedef struct {
  const tpc_train_options_t* o;
  const tprt_backend_t* backend;
  const tprt_module_t* module;
  const tprt_module_function_t* fn;
  tprt_world_t* world;
  tpc_data_t train, val;
  // Evaluation (--val-data): the forward module (pipeline infer) and, per argument, the training
  // argument of the same name that it reads.
  tprt_module_t* eval_module;
  const tprt_module_function_t* efn;
  int* eval_from;
  int eval_ids, eval_targets;
  void** eval_results_of[TPC_RUN_MAX_RANKS];
  bool eval_now;
  double val_sum;
  int64_t val_count;
  // Argument roles, by name (docs/training.md, "The module").
  int ids, targets, loss_grad, hyper, loss, norm;
  int cos_arg, sin_arg;  // --inputs' tables (also in checkpoints; a resume may take them from --inputs)
  int* next;  // per result: the argument it becomes at the next step, or -1
  // The logical per-step inputs rank 0 prepares.
  tprt_tensor_t ids_t, targets_t, loss_grad_t;
  float hyper_v[8];
  // Rank buffers: host copies (the CPU backend computes in them).
  void** args[TPC_RUN_MAX_RANKS];
  void** results[TPC_RUN_MAX_RANKS];
  // Step bookkeeping (rank 0).
  int64_t step;       // steps done
  int64_t position;   // the next batch's first token in the data
  bool stop, accept, save;
  double loss_mean, norm_value, t_start;
  int64_t tokens_done;
  FILE* json;
  tprt_status_t failure;
} tpc_train_t;

static int tpc__find_arg(const tprt_module_function_t* fn, const char* name) {
  for (int a = 0; a < fn->num_args; ++a)
    if (strcmp(fn->args[a].name, name) == 0) return a;
  return -1;
}

static int tpc__find_result(const tprt_module_function_t* fn, const char* name) {
  for (int j = 0; j < fn->num_results; ++j)
    if (strcmp(fn->results[j].name, name) == 0) return j;
  return -1;
}

static bool tpc__ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

// All ranks meet; false (the world failed) lets the rank leave its loop.
static tprt_status_t tpc__meet(tprt_rank_t* rank) {
  float one = 1.0f, sum = 0.0f;
  int64_t dims[1] = {1};
  tprt_tensor_t in = tprt_tensor_make(&one, TPRT_DTYPE_F32, 1, dims), out = tprt_tensor_make(&sum, TPRT_DTYPE_F32, 1, dims);
  uint32_t all = 0;
  for (int i = 0; i < tprt_world_num_axes(tprt_rank_world(rank)); ++i) all |= 1u << i;
  return tprt_all_reduce(rank, all, &in, &out, TPRT_ORDER_ANY);
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

// The step's mean loss over the global batch (in token order) and the gradient norm; decides
// whether the step is kept; logs it.
static void tpc__review(tpc_train_t* t) {
  const tprt_module_tensor_t* mt = &t->fn->results[t->loss];
  tprt_tensor_t logical;
  tprt_shard_t shard;
  tprt_status_t s = tpc__logical(mt, t->world, &logical, &shard);
  float* loss = calloc((size_t)logical.dims[0] + 1, sizeof *loss);
  logical.data = loss;
  for (int r = 0; !s && loss && r < tprt_world_size(t->world); ++r) {
    tprt_tensor_t local = mt->layout;
    local.data = t->results[r][t->loss];
    s = mt->sharded ? tprt_shard_insert(&shard, t->world, r, &local, &logical) : NULL;
    if (!mt->sharded) memcpy(loss, local.data, tprt_tensor_bytes(&local));
  }
  double sum = 0.0;
  int64_t n = 0;
  for (int64_t i = 0; loss && i < logical.dims[0]; ++i)
    if (((int32_t*)t->targets_t.data)[i] >= 0) sum += loss[i], ++n;
  free(loss);
  t->loss_mean = n ? sum / (double)n : 0.0;
  t->norm_value = ((float*)t->results[0][t->norm])[0];
  int64_t step = t->step + 1;
  bool finite = isfinite(t->loss_mean) && isfinite(t->norm_value);
  t->accept = finite;
  if (s) {
    t->failure = s;
    t->stop = true;
    return;
  }
  if (!finite && !t->o->skip_nonfinite) {
    t->failure = tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                                  "step %lld: the %s is %s; stopped before applying it (the weights are those after "
                                  "step %lld%s; --skip-nonfinite skips such steps instead)",
                                  (long long)step, isfinite(t->loss_mean) ? "gradient norm" : "loss",
                                  isnan(isfinite(t->loss_mean) ? t->norm_value : t->loss_mean) ? "NaN" : "infinite",
                                  (long long)t->step, t->o->save_dir ? ", and the last checkpoint is whole" : "");
    t->stop = true;
    return;
  }
  int64_t T = t->ids_t.dims[0];
  t->position = tpc_data_advance(&t->train, t->position, T);
  t->step = step;
  t->tokens_done += T;
  double elapsed = tpc_now() - t->t_start, rate = elapsed > 0 ? (double)t->tokens_done / elapsed : 0.0;
  double eta = rate > 0 ? (double)(t->o->steps - step) * (double)T / rate : 0.0;
  fprintf(stderr, "tpc-train: step %lld/%lld | loss %.6f | lr %.3e | grad norm %.4f%s | %.0f tok/s | ETA %.0fs\n",
          (long long)step, (long long)t->o->steps, t->loss_mean, tpc_lr(t->o, step), t->norm_value,
          finite ? "" : " (skipped: not finite)", rate, eta);
  if (t->json)
    fprintf(t->json, "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"tokens\": %lld, "
            "\"seconds\": %.6f, \"skipped\": %s}\n",
            (long long)step, t->loss_mean, tpc_lr(t->o, step), t->norm_value, (long long)t->tokens_done, elapsed,
            finite ? "false" : "true");
  if (t->json) fflush(t->json);  // a record per line as it happens, kept if the run dies
  if (step >= t->o->steps || tpc_signals_caught() || (t->o->exit_after > 0 && step >= t->o->exit_after)) t->stop = true;
  t->save = t->o->save_dir && (t->stop || (t->o->save_every > 0 && step % t->o->save_every == 0));
  t->eval_now = t->efn && (t->stop || (t->o->eval_every > 0 && step % t->o->eval_every == 0));
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

// The mean loss of --eval-batches batches of --val-data (from its start, so every evaluation
// sees the same tokens), with the weights of this step: the forward module reads the training
// arguments themselves. Rank 0 prints it.
static tprt_status_t tpc__evaluate(tpc_train_t* t, tprt_rank_t* rank, tprt_exec_t* exec, void* arena, void** args,
                                   void** results) {
  int r = tprt_rank_index(rank);
  const tprt_module_function_t* efn = t->efn;
  int64_t T = t->ids_t.dims[0], position = 0;
  tprt_status_t s = NULL;
  if (r == 0) t->val_sum = 0.0, t->val_count = 0;
  for (int64_t k = 0; k < t->o->eval_batches && !s; ++k) {
    if (r == 0) {
      tprt_status_t p = tpc_data_batch(&t->val, position, T, (int32_t*)t->ids_t.data, (int32_t*)t->targets_t.data);
      if (p) t->failure = p, t->stop = true;
      position = tpc_data_advance(&t->val, position, T);
    }
    if ((s = tpc__meet(rank)) || t->failure) break;
    for (int a = 0; a < efn->num_args; ++a)
      if (t->eval_from[a] >= 0) args[a] = t->args[r][t->eval_from[a]];
    const int which[2] = {t->eval_ids, t->eval_targets};
    const tprt_tensor_t* logical[2] = {&t->ids_t, &t->targets_t};
    for (int i = 0; i < 2 && !s; ++i) {
      const tprt_module_tensor_t* mt = &efn->args[which[i]];
      tprt_tensor_t l = *logical[i], local = mt->layout;
      tprt_shard_t shard;
      local.data = args[which[i]];
      s = tpc__logical(mt, t->world, &l, &shard);
      l.data = logical[i]->data;
      if (!s) s = mt->sharded ? tprt_shard_extract(&shard, t->world, r, &l, &local) : NULL;
      if (!s && !mt->sharded) memcpy(local.data, l.data, tprt_tensor_bytes(&local));
    }
    if (!s && efn->entry(exec, args, results, arena)) {
      s = tprt_exec_take_status(exec);
      if (!s) s = tprt_make_status(TPRT_STATUS_INTERNAL, "evaluation failed");
    }
    if (s || (s = tpc__meet(rank))) break;
    if (r == 0) {
      // The mean over the batch's tokens, as the training loss (rank pieces in logical order).
      const tprt_module_tensor_t* mt = &efn->results[0];
      tprt_tensor_t l;
      tprt_shard_t shard;
      tprt_status_t e = tpc__logical(mt, t->world, &l, &shard);
      float* loss = calloc((size_t)l.dims[0] + 1, sizeof *loss);
      l.data = loss;
      for (int q = 0; !e && loss && q < tprt_world_size(t->world); ++q) {
        tprt_tensor_t local = mt->layout;
        local.data = t->eval_results_of[q] ? t->eval_results_of[q][0] : NULL;
        if (local.data) e = mt->sharded ? tprt_shard_insert(&shard, t->world, q, &local, &l) : NULL;
        if (!e && !mt->sharded && local.data) memcpy(loss, local.data, tprt_tensor_bytes(&local));
      }
      for (int64_t i = 0; loss && i < l.dims[0]; ++i)
        if (((int32_t*)t->targets_t.data)[i] >= 0) t->val_sum += loss[i], t->val_count += 1;
      free(loss);
      if (e) t->failure = e, t->stop = true;
    }
    if ((s = tpc__meet(rank))) break;
  }
  if (!s && r == 0 && !t->failure) {
    double v = t->val_count ? t->val_sum / (double)t->val_count : 0.0;
    fprintf(stderr, "tpc-train: eval after step %lld | val loss %.6f (%lld batches, %lld tokens)\n", (long long)t->step, v,
            (long long)t->o->eval_batches, (long long)t->val_count);
    if (t->json) {
      fprintf(t->json, "{\"step\": %lld, \"val_loss\": %.9g, \"val_tokens\": %lld}\n", (long long)t->step, v,
              (long long)t->val_count);
      fflush(t->json);
    }
  }
  return s;
}

//===----------------------------------------------------------------------===//
// One rank
//===----------------------------------------------------------------------===//

static tprt_status_t tpc__rank(tprt_rank_t* rank, void* user) {
  tpc_train_t* t = user;
  int r = tprt_rank_index(rank);
  const tprt_module_function_t* fn = t->fn;
  void** args = t->args[r];
  void** results = t->results[r];
  void* arena = NULL;
  tprt_exec_t* exec = NULL;
  tprt_status_t s = tprt_allocator_malloc(tprt_rank_allocator(rank), (size_t)fn->arena_bytes, TPRT_ABI_ARENA_ALIGNMENT,
                                          &arena);
  if (!s) s = tprt_exec_create(rank, t->module->chunks, tprt_rank_allocator(rank), &exec);
  if (exec) tprt_exec_set_backend(exec, t->backend);
  // The evaluation module's own arena and buffers (its weights are the training arguments).
  tprt_exec_t* eval_exec = NULL;
  void *eval_arena = NULL, **eval_args = NULL, **eval_results = NULL;
  if (!s && t->efn) {
    eval_args = calloc((size_t)t->efn->num_args + 1, sizeof(void*));
    eval_results = calloc((size_t)t->efn->num_results + 1, sizeof(void*));
    if (!eval_args || !eval_results) s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    if (!s) s = tprt_allocator_malloc(tprt_rank_allocator(rank), (size_t)t->efn->arena_bytes + 1, TPRT_ABI_ARENA_ALIGNMENT,
                                      &eval_arena);
    for (int a = 0; !s && a < t->efn->num_args; ++a)
      if (t->eval_from[a] < 0)
        s = tprt_allocator_malloc(tprt_rank_allocator(rank), tprt_tensor_bytes(&t->efn->args[a].layout) + 1, 64,
                                  &eval_args[a]);
    for (int j = 0; !s && j < t->efn->num_results; ++j)
      s = tprt_allocator_malloc(tprt_rank_allocator(rank), tprt_tensor_bytes(&t->efn->results[j].layout) + 1, 64,
                                &eval_results[j]);
    t->eval_results_of[r] = eval_results;
    if (!s) s = tprt_exec_create(rank, t->eval_module->chunks, tprt_rank_allocator(rank), &eval_exec);
    if (eval_exec) tprt_exec_set_backend(eval_exec, t->backend);
  }
  const int per_step[3] = {t->ids, t->targets, t->loss_grad};
  const tprt_tensor_t* logical[3] = {&t->ids_t, &t->targets_t, &t->loss_grad_t};
  while (!s) {
    if (r == 0) {
      tprt_status_t p = tpc__prepare(t);
      if (p) t->failure = p, t->stop = true;
    }
    if ((s = tpc__meet(rank))) break;
    if (t->stop) break;
    // This rank's piece of the batch, and the hyperparameters.
    for (int k = 0; k < 3 && !s; ++k) {
      const tprt_module_tensor_t* mt = &fn->args[per_step[k]];
      tprt_tensor_t l = *logical[k], local = mt->layout;
      tprt_shard_t shard;
      local.data = args[per_step[k]];
      s = tpc__logical(mt, t->world, &l, &shard);
      l.data = logical[k]->data;
      if (!s) s = mt->sharded ? tprt_shard_extract(&shard, t->world, r, &l, &local) : NULL;
      if (!s && !mt->sharded) memcpy(local.data, l.data, tprt_tensor_bytes(&local));
    }
    if (!s) memcpy(args[t->hyper], t->hyper_v, sizeof t->hyper_v);
    if (!s && fn->entry(exec, args, results, arena)) {
      s = tprt_exec_take_status(exec);
      if (!s) s = tprt_make_status(TPRT_STATUS_INTERNAL, "step %lld failed", (long long)t->step + 1);
    }
    if (s) break;
    if ((s = tpc__meet(rank))) break;
    if (r == 0) tpc__review(t);
    if ((s = tpc__meet(rank))) break;
    // A kept step's results become the next step's arguments (weights, master weights, moments).
    for (int j = 0; t->accept && j < fn->num_results; ++j)
      if (t->next[j] >= 0) {
        void* tmp = args[t->next[j]];
        args[t->next[j]] = results[j];
        results[j] = tmp;
      }
    if (t->save) {
      if ((s = tpc__meet(rank))) break;
      if (r == 0) {
        tprt_status_t c = tpc_checkpoint_save(t->o, fn, t->world, t->args, tprt_world_size(t->world), t->step,
                                              t->position);
        if (c) t->failure = c, t->stop = true;
      }
      if ((s = tpc__meet(rank))) break;
    }
    if (t->eval_now && (s = tpc__evaluate(t, rank, eval_exec, eval_arena, eval_args, eval_results))) break;
    if (t->stop) break;
  }
  if (s) tprt_rank_fail(rank, s);
  tprt_exec_destroy(exec);
  tprt_allocator_free(tprt_rank_allocator(rank), arena);
  if (t->efn) {
    tprt_exec_destroy(eval_exec);
    tprt_allocator_free(tprt_rank_allocator(rank), eval_arena);
    for (int a = 0; eval_args && a < t->efn->num_args; ++a)
      if (t->eval_from[a] < 0) tprt_allocator_free(tprt_rank_allocator(rank), eval_args[a]);
    for (int j = 0; eval_results && j < t->efn->num_results; ++j)
      tprt_allocator_free(tprt_rank_allocator(rank), eval_results[j]);
    free(eval_args);
    free(eval_results);
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

// --val-data: the held-out tokens and the forward module (the same .mlir through the `infer`
// pipeline), whose weights are the training arguments of the same names and layouts.
static tprt_status_t tpc__load_eval(tpc_train_t* t, const tpc_run_options_t* train_ro, char (*dir)[64]) {
  TPRT_RETURN_IF_ERROR(tpc_data_open(t->o->val_path, &t->val), "--val-data");
  tpc_run_options_t ro = *train_ro;
  ro.pipeline = "infer";
  ro.zero1 = false;
  char so[PATH_MAX];
  snprintf(*dir, sizeof *dir, "/tmp/tpc-train-eval-XXXXXX");
  if (!tpc__compile(&ro, t->o->module_path, so, sizeof so, *dir))
    return tprt_make_status(TPRT_STATUS_INTERNAL, "%s: the evaluation module (pipeline infer) does not compile",
                            t->o->module_path);
  TPRT_RETURN_IF_ERROR(tprt_module_load(so, tprt_allocator_system(), &t->eval_module), "evaluation module");
  t->efn = &t->eval_module->functions[0];
  t->eval_from = calloc((size_t)t->efn->num_args + 1, sizeof *t->eval_from);
  if (!t->eval_from) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  t->eval_ids = t->eval_targets = -1;
  for (int a = 0; a < t->efn->num_args; ++a) {
    const tprt_module_tensor_t* e = &t->efn->args[a];
    t->eval_from[a] = -1;
    if (!strcmp(e->name, "ids")) t->eval_ids = a;
    if (!strcmp(e->name, "targets")) t->eval_targets = a;
    if (a == t->eval_ids || a == t->eval_targets) continue;
    int k = tpc__find_arg(t->fn, e->name);
    if (k < 0 || tprt_tensor_bytes(&e->layout) != tprt_tensor_bytes(&t->fn->args[k].layout) ||
        e->layout.dtype != t->fn->args[k].layout.dtype)
      return tprt_make_status(TPRT_STATUS_INTERNAL,
                              "evaluation: argument '%s' of the forward module has no training argument of its name "
                              "and layout",
                              e->name);
    t->eval_from[a] = k;
  }
  if (t->eval_ids < 0 || t->eval_targets < 0 || t->efn->num_results < 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "evaluation: the forward module lacks ids, targets or a loss");
  return NULL;
}

// The initial value of every argument: from --resume's checkpoint, --weights, or Philox (--seed);
// an optimizer state from its parameter (the master weight) or zero (the moments).
static tprt_status_t tpc__init_args(tpc_train_t* t, tpc_sources_t* src, const tpc_run_options_t* ro) {
  const tprt_module_function_t* fn = t->fn;
  int nranks = tprt_world_size(t->world);
  void** logical = calloc((size_t)fn->num_args + 1, sizeof *logical);
  if (!logical) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  tprt_status_t s = NULL;
  for (int pass = 0; pass < 2 && !s; ++pass)  // parameters first, then the states made from them
    for (int a = 0; a < fn->num_args && !s; ++a) {
      const tprt_module_tensor_t* mt = &fn->args[a];
      const char* state = tpc__ends_with(mt->name, ".master")       ? ".master"
                          : tpc__ends_with(mt->name, ".exp_avg_sq") ? ".exp_avg_sq"
                          : tpc__ends_with(mt->name, ".exp_avg")    ? ".exp_avg"
                                                                    : NULL;
      if ((pass == 0) != (state == NULL)) continue;
      tprt_tensor_t l;
      tprt_shard_t shard;
      if ((s = tpc__logical(mt, t->world, &l, &shard))) break;
      if ((s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(&l) + 1, 64, &logical[a]))) break;
      l.data = logical[a];
      memset(l.data, 0, tprt_tensor_bytes(&l));
      bool per_step = a == t->ids || a == t->targets || a == t->loss_grad || a == t->hyper;
      tpc_arg_src_t as = {0};
      if (!per_step && (s = tpc_arg_src_find(src, mt->name, &l, &as))) break;
      if (as.count) {
        s = tpc_arg_src_read(src, &as, &l);
      } else if (t->o->resume_dir && !per_step && a != t->cos_arg && a != t->sin_arg) {
        // A resumed run goes on bit for bit only from every tensor of the state.
        s = tprt_make_status(TPRT_STATUS_NOT_FOUND,
                             "--resume %s: the checkpoint holds no tensor '%s' (a checkpoint of another model?)",
                             t->o->resume_dir, mt->name);
      } else if (state && strcmp(state, ".master") == 0) {
        char pname[TPRT_MODULE_NAME_LEN];
        snprintf(pname, sizeof pname, "%.*s", (int)(strlen(mt->name) - strlen(state)), mt->name);
        int p = tpc__find_arg(fn, pname);
        if (p < 0) {
          s = tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s: no parameter named '%s'", mt->name, pname);
        } else {
          tprt_tensor_t pl;
          tprt_shard_t ps;
          s = tpc__logical(&fn->args[p], t->world, &pl, &ps);
          pl.data = logical[p];
          for (int64_t i = 0; !s && i < tprt_tensor_numel(&l); ++i)
            ((float*)l.data)[i] = tprt_load_elem(pl.data, pl.dtype, i);
        }
      } else if (!state && !per_step) {
        s = tpc__init_arg(ro, src, mt->name, &l);
      }
      tpc_arg_src_free(&as);
      for (int r = 0; r < nranks && !s; ++r) {
        tprt_tensor_t local = mt->layout;
        if ((s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(&local) + 1, 64, &t->args[r][a]))) break;
        local.data = t->args[r][a];
        s = mt->sharded ? tprt_shard_extract(&shard, t->world, r, &l, &local) : NULL;
        if (!s && !mt->sharded) memcpy(local.data, l.data, tprt_tensor_bytes(&local));
      }
    }
  for (int a = 0; a < fn->num_args; ++a) tprt_allocator_free(tprt_allocator_system(), logical[a]);
  free(logical);
  return s;
}

int main(int argc, char** argv) {
  tpc_train_options_t o;
  int parsed = tpc_train_parse_args(argc, argv, &o);
  if (parsed <= 0) return parsed == 0 ? 0 : 2;
  tpc_signals_install();
  tpc_train_t* t = calloc(1, sizeof *t);
  tpc_run_options_t ro;  // what tpc-run's pieces read: compilation, argument sources, Philox
  memset(&ro, 0, sizeof ro);
  ro.module_path = o.module_path;
  ro.pipeline = "step";
  ro.mesh = o.mesh ? o.mesh : "tp=1";
  ro.numerics = o.numerics;
  ro.strategy = o.strategy;
  ro.sequence_parallel = o.sequence_parallel;
  ro.zero1 = o.zero1;
  ro.weights = o.weights;
  ro.weight_names = o.weight_names;
  ro.inputs = o.inputs;
  ro.seed = o.seed;
  ro.seed_given = o.seed_given;
  char tmpdir[] = "/tmp/tpc-train-XXXXXX", so_path[PATH_MAX] = "", resume_file[PATH_MAX] = "";
  char eval_so_dir[64] = "";
  tprt_module_t* module = NULL;
  tpc_sources_t sources = {0};
  tprt_status_t s = NULL;
  int rc = 1;
  tpc_checkpoint_state_t resumed = {0};
  if (!t) return 1;
  t->o = &o;
  // Ranks are threads of this process: a launcher's world of processes would train one copy each.
  const char* launched[2] = {getenv("WORLD_SIZE"), getenv("OMPI_COMM_WORLD_SIZE")};
  for (int i = 0; i < 2; ++i)
    if (launched[i] && atoi(launched[i]) > 1) {
      s = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                           "tpc-train runs its ranks as threads of one process for now (docs/training.md, \"Status\"); "
                           "start it once, without torchrun or mpirun, with --mesh");
      goto fail;
    }
  t->ids = t->targets = t->loss_grad = t->hyper = t->loss = t->norm = t->cos_arg = t->sin_arg = -1;
  if (o.resume_dir) {
    // The checkpoint's tensors are the arguments by name; its trainer state says where to go on.
    if ((s = tpc_checkpoint_latest(o.resume_dir, resume_file, sizeof resume_file, &resumed))) goto fail;
    ro.weights = resume_file;
    ro.weight_names = NULL;
    fprintf(stderr, "tpc-train: resuming from %s (after step %lld)\n", resume_file, (long long)resumed.step);
  }
  if ((s = tpc_data_open(o.data_path, &t->train))) goto fail;
  if (!tpc__compile(&ro, o.module_path, so_path, sizeof so_path, tmpdir)) goto done;
  if (!(t->backend = tpc__load_backend(o.backend))) goto done;
  if (t->backend != tprt_backend_cpu()) {
    s = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                         "--backend %s: tpc-train runs on the CPU backend for now (docs/training.md, \"Status\")", o.backend);
    goto fail;
  }
  if ((s = tprt_module_load(so_path, tprt_allocator_system(), &module))) goto fail;
  t->module = module;
  t->fn = &module->functions[0];
  const tprt_module_function_t* fn = t->fn;
  t->cos_arg = tpc__find_arg(fn, "cos");
  t->sin_arg = tpc__find_arg(fn, "sin");
  t->ids = tpc__find_arg(fn, "ids");
  t->targets = tpc__find_arg(fn, "targets");
  t->hyper = tpc__find_arg(fn, "optimizer.hyper");
  t->norm = tpc__find_result(fn, "grad_norm");
  t->loss = 0;
  char cot[TPRT_MODULE_NAME_LEN + 8];
  snprintf(cot, sizeof cot, "%s_grad", fn->num_results ? fn->results[0].name : "");
  t->loss_grad = tpc__find_arg(fn, cot);
  if (t->ids < 0 || t->targets < 0 || t->loss_grad < 0 || t->hyper < 0 || t->norm < 0 ||
      fn->args[t->ids].layout.dtype != TPRT_DTYPE_I32 || fn->args[t->targets].layout.dtype != TPRT_DTYPE_I32) {
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                         "%s: a training module takes arguments 'ids' and 'targets' (tensor<Txi32>, T = batch x "
                         "sequence) and returns the per-token loss first (tensor<Txf32>, the cross-entropy of "
                         "tp.cross_entropy); docs/training.md, \"The module\"",
                         o.module_path);
    goto fail;
  }
  if (o.val_path && (s = tpc__load_eval(t, &ro, &eval_so_dir))) goto fail;
  t->next = calloc((size_t)fn->num_results + 1, sizeof *t->next);
  for (int j = 0; t->next && j < fn->num_results; ++j) {
    t->next[j] = j == t->loss ? -1 : tpc__find_arg(fn, fn->results[j].name);
    // A result becomes its argument at the next step: both must be the same rank-local tensor.
    const tprt_module_tensor_t *res = &fn->results[j], *arg = t->next[j] >= 0 ? &fn->args[t->next[j]] : NULL;
    if (arg && (tprt_tensor_bytes(&res->layout) != tprt_tensor_bytes(&arg->layout) || res->layout.dtype != arg->layout.dtype)) {
      s = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                           "%s: the updated '%s' is not laid out like the argument it replaces (%s); tpc-train does not "
                           "support this mesh yet (GTP: docs/training.md, \"Status\")",
                           o.module_path, res->name, o.mesh ? o.mesh : "");
      goto fail;
    }
  }
  // The world: the module's mesh.
  tprt_world_options_t wopts;
  memset(&wopts, 0, sizeof wopts);
  wopts.num_axes = module->num_mesh_axes > 0 ? module->num_mesh_axes : 1;
  for (int i = 0; i < module->num_mesh_axes; ++i) wopts.axes[i] = (tprt_mesh_axis_t){module->mesh_axes[i], module->mesh_shape[i]};
  if (module->num_mesh_axes == 0) wopts.axes[0] = (tprt_mesh_axis_t){"world", 1};
  if ((s = tprt_world_create(&wopts, tprt_allocator_system(), &t->world))) goto fail;
  int nranks = tprt_world_size(t->world);
  // The logical per-step inputs.
  {
    tprt_shard_t sh;
    int64_t T = 0;
    tprt_tensor_t l;
    if ((s = tpc__logical(&fn->args[t->ids], t->world, &l, &sh))) goto fail;
    T = l.dims[0];
    if (o.batch < 1 || T % o.batch != 0) {
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--batch %lld must divide the module's %lld tokens per step",
                           (long long)o.batch, (long long)T);
      goto fail;
    }
    int64_t dims[1] = {T};
    t->ids_t = tprt_tensor_make(calloc((size_t)T, 4), TPRT_DTYPE_I32, 1, dims);
    t->targets_t = tprt_tensor_make(calloc((size_t)T, 4), TPRT_DTYPE_I32, 1, dims);
    t->loss_grad_t = tprt_tensor_make(calloc((size_t)T, 4), TPRT_DTYPE_F32, 1, dims);
    if ((s = tpc_data_configure(&t->train, o.data_path, T / o.batch, tpc_train_vocab(fn, t->world)))) goto fail;
  }
  for (int r = 0; r < nranks; ++r) {
    t->args[r] = calloc((size_t)fn->num_args + 1, sizeof(void*));
    t->results[r] = calloc((size_t)fn->num_results + 1, sizeof(void*));
    for (int j = 0; t->results[r] && j < fn->num_results; ++j)
      if ((s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(&fn->results[j].layout) + 1, 64,
                                     &t->results[r][j])))
        goto fail;
  }
  if ((s = tpc_sources_open(&ro, tprt_allocator_system(), &sources))) goto fail;
  if ((s = tpc__init_args(t, &sources, &ro))) goto fail;
  t->step = resumed.step;
  t->position = resumed.step ? resumed.position : 0;
  if (t->step >= o.steps) {
    fprintf(stderr, "tpc-train: nothing to do: the checkpoint is after step %lld of %lld\n", (long long)t->step,
            (long long)o.steps);
    rc = 0;
    goto done;
  }
  if (o.json && !(t->json = strcmp(o.json, "-") ? fopen(o.json, resumed.step ? "a" : "w") : stdout)) {
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--json %s: %s", o.json, strerror(errno));
    goto fail;
  }
  fprintf(stderr, "tpc-train: %s: %lld tokens per step (%lld sequences of %lld) on %d rank%s (%s), numerics %s; data %s "
          "(%lld tokens)\n",
          o.module_path, (long long)t->ids_t.dims[0], (long long)o.batch, (long long)(t->ids_t.dims[0] / o.batch),
          nranks, nranks == 1 ? "" : "s", t->backend->name, module->numerics, o.data_path, (long long)t->train.count);
  t->t_start = tpc_now();
  // A first Ctrl-C (or SIGTERM) ends the run after the step in progress, with a checkpoint when
  // --save is given: the world is not cancelled (tpc-run's way), the ranks see the flag between
  // steps. A second Ctrl-C ends the process at once.
  s = tprt_world_run(t->world, tpc__rank, t);
  if (t->failure && !s) s = t->failure, t->failure = NULL;
  if (s) goto fail;
  if (tpc_signals_caught()) {
    fprintf(stderr, "tpc-train: %s after step %lld%s\n", tpc_signals_message(), (long long)t->step,
            o.save_dir ? "; the checkpoint above holds it (--resume goes on)" : "");
    rc = 128 + tpc_signals_caught();
    goto done;
  }
  if (t->json && t->json != stdout) fclose(t->json), t->json = NULL;
  rc = 0;
  goto done;
fail:
  fprintf(stderr, "tpc-train: error: %s\n", tprt_status_message(s));
  tprt_status_free(s);
  rc = tpc_signals_caught() ? 128 + tpc_signals_caught() : 1;
done:
  if (t->json && t->json != stdout) fclose(t->json);
  tprt_status_free(t->failure);
  for (int r = 0; t->fn && r < TPC_RUN_MAX_RANKS; ++r) {
    for (int a = 0; t->args[r] && a < t->fn->num_args; ++a) tprt_allocator_free(tprt_allocator_system(), t->args[r][a]);
    for (int j = 0; t->results[r] && j < t->fn->num_results; ++j)
      tprt_allocator_free(tprt_allocator_system(), t->results[r][j]);
    free(t->args[r]);
    free(t->results[r]);
  }
  free(t->ids_t.data), free(t->targets_t.data), free(t->loss_grad_t.data), free(t->next);
  tpc_sources_close(&sources);
  tpc_data_close(&t->train);
  tprt_world_destroy(t->world);
  tprt_module_unload(module, tprt_allocator_system());
  tprt_module_unload(t->eval_module, tprt_allocator_system());
  free(t->eval_from);
  tpc_data_close(&t->val);
  if (eval_so_dir[0]) {
    char p[128];
    snprintf(p, sizeof p, "%s/module.so", eval_so_dir);
    unlink(p);
    rmdir(eval_so_dir);
  }
  if (so_path[0] && strncmp(so_path, "/tmp/tpc-train-", 15) == 0) {
    unlink(so_path);
    rmdir(tmpdir);
  }
  free(t);
  return rc;
}
