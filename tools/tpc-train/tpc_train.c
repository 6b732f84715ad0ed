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
// With --micro-batches K the module is compiled over one more mesh axis, mb = K, and tp-micro-batch
// cuts the step in two (docs/training.md, "Micro-batches"): the gradient function runs once per
// micro-batch, each rank sums its K partial gradients with the canonical pairwise tree, and the
// update function reduces them over dp and applies AdamW once.
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

// The buffers a rank's kernels address (tpc_train_t.kb).
typedef struct {
  void** args;   // per argument of fn_all
  void** gres;   // per result of the gradient function (the step)
  void** res;    // per result of the function whose results update the arguments
  void** acc;    // per partial gradient and tree level
  void* arena;   // one for both functions
  void** eargs;  // evaluation: per argument (the training arguments' buffers where it reads them)
  void** eres;   // per result
  void* earena;
} tpc_kbufs_t;

// The state shared by the rank threads (rank 0 writes the step's inputs and decisions between
// two meetings of the ranks; every rank reads them after the second).
typedef struct {
  const tpc_train_options_t* o;
  const tprt_backend_t* backend;
  const tprt_module_t* module;
  const tprt_module_function_t* fn;  // every argument of the functions below, by name (&fn_all)
  const tprt_module_function_t* gfn;  // the step, or with micro-batches the gradient function
  const tprt_module_function_t* ufn;  // <gfn>_update with micro-batches, else NULL
  const tprt_module_function_t* rfn;  // the function whose results update the arguments (ufn or gfn)
  tprt_module_function_t fn_all;
  int k;           // micro-batches per step
  int* garg;       // per gfn argument: its index in fn_all
  int* uarg;       // per ufn argument: its index in fn_all, or -1 - p for partial gradient p
  int npart;       // partial gradients: gfn results 1..npart
  int levels;      // log2(k) + 1: the pairwise tree's pending subtrees
  // Token arguments (ids, targets, the loss gradient, and with micro-batches every argument
  // sharded over mb): the logical tensor of the whole step (tok) and rank 0's piece of it for
  // the micro-batch being fed (micro); data NULL for the other arguments.
  tprt_tensor_t* tok;
  tprt_tensor_t* micro;
  int64_t* piece;  // per argument: rows of one data-parallel rank's micro-batch
  float* loss_all; // the step's per-token loss, in token order
  tprt_world_t* world;
  tpc_data_t train, val;
  // Evaluation (--val-data): the forward module (pipeline infer) and, per argument, the training
  // argument of the same name that it reads.
  tprt_module_t* eval_module;
  const tprt_module_function_t* efn;
  int* eval_from;
  int* eval_tok;  // per evaluation argument: the token argument it is cut from, or -1
  int eval_ids, eval_targets;
  void** eval_results_of[TPC_RUN_MAX_RANKS];
  bool eval_now;
  double val_sum;
  int64_t val_count;
  // Argument roles, by name (docs/training.md, "The module").
  int ids, targets, loss_grad, hyper, loss, norm;
  int cos_arg, sin_arg;  // --inputs' tables (also in checkpoints; a resume may take them from --inputs)
  int* next;  // per result of rfn: the argument it becomes at the next step, or -1; such a result
              // is written into that argument's own buffer (an update in place)
  // The logical per-step inputs rank 0 prepares.
  tprt_tensor_t ids_t, targets_t, loss_grad_t;
  float hyper_v[8];
  // Rank buffers: host copies (the CPU backend computes in them). args: per fn_all argument;
  // gres: gfn's results; results: rfn's (gres itself without micro-batches); acc: per partial
  // gradient, |levels| pending subtree sums (accf: which are pending).
  void** args[TPC_RUN_MAX_RANKS];
  void** gres[TPC_RUN_MAX_RANKS];
  void** results[TPC_RUN_MAX_RANKS];
  float** acc[TPC_RUN_MAX_RANKS];
  bool* accf[TPC_RUN_MAX_RANKS];
  // What the kernels address, per rank: on the CPU backend the host buffers above themselves; on a
  // device backend its own copies (tpc__rank), with the host ones as staging.
  bool device;
  tpc_kbufs_t kb[TPC_RUN_MAX_RANKS];
  void** eval_host[TPC_RUN_MAX_RANKS];  // per evaluation argument: host staging of ids and targets
  // Step bookkeeping (rank 0).
  int64_t step;       // steps done
  int64_t position;   // the next batch's first token in the data
  bool stop, save;
  double loss_mean, norm_value, t_start;
  int64_t tokens_done;
  // The model's matrix FLOPs (tprt_exec_stats' model_flops) each rank has counted so far, their
  // sum at the last step, and when this step began (rank 0): the step's MFU.
  int64_t rank_flops[TPC_RUN_MAX_RANKS], flops_before;
  double t_step;
  FILE* json;
  tprt_status_t failure;
} tpc_train_t;

static int tpc__find_arg(const tprt_module_function_t* fn, const char* name) {
  for (int a = 0; a < fn->num_args; ++a)
    if (strcmp(fn->args[a].name, name) == 0) return a;
  return -1;
}

// Whether result |j| of |fn| is updated in place: rfn's results that become arguments (the
// weights, master weights and moments) are written into the arguments' buffers, not beside them.
// AdamW leaves them unchanged at a non-finite gradient norm (tprt_adamw_applies), so a skipped
// step needs no copy of the state.
static bool tpc__in_place(const tpc_train_t* t, const tprt_module_function_t* fn, int j) {
  return fn == t->rfn && t->next && t->next[j] >= 0;
}

// Points rank buffers |res| (rfn's results) at the arguments they update.
static void tpc__alias_results(const tpc_train_t* t, void** args, void** res) {
  for (int j = 0; j < t->rfn->num_results; ++j)
    if (t->next[j] >= 0) res[j] = args[t->next[j]];
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

static tprt_status_t tpc__upload(const tpc_train_t* t, void* kernel, const void* host, size_t bytes);
static tprt_status_t tpc__download(const tpc_train_t* t, void* host, const void* kernel, size_t bytes);

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

// Copies rank |r|'s part of the logical tensor |logical| (the whole of |mt|'s data) into |local|.
static tprt_status_t tpc__to_rank(const tprt_module_tensor_t* mt, const tprt_world_t* world, int r,
                                  const void* logical, void* local) {
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

// Copies |bytes| between a host buffer and a buffer the kernels address (no copy when they are
// the same: the CPU backend). Device copies are synchronous.
static tprt_status_t tpc__upload(const tpc_train_t* t, void* kernel, const void* host, size_t bytes) {
  if (kernel == host) return NULL;
  if (!t->device) return memcpy(kernel, host, bytes), NULL;
  return t->backend->to_device(kernel, host, bytes);
}

static tprt_status_t tpc__download(const tpc_train_t* t, void* host, const void* kernel, size_t bytes) {
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

// Rank 0, after micro-batch m: its per-token loss (the gradient function's first result), placed
// at its tokens' positions in the step.
static tprt_status_t tpc__gather_loss(tpc_train_t* t, int m) {
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
    local.data = t->gres[r][0];
    if (mt->sharded)
      s = tprt_shard_insert(&shard, t->world, r, &local, &logical);
    else if (r == 0)
      memcpy(piece, local.data, tprt_tensor_bytes(&local));
  }
  for (int64_t i = 0; !s && i < logical.dims[0]; ++i) t->loss_all[tpc__row(i, m, t->k, t->piece[t->ids])] = piece[i];
  free(piece);
  return s;
}

// The step's mean loss over the global batch (in token order) and the gradient norm; decides
// whether the step is kept; logs it.
static void tpc__review(tpc_train_t* t) {
  if (t->failure) {
    t->stop = true;
    return;
  }
  double sum = 0.0;
  int64_t n = 0;
  for (int64_t i = 0; i < t->ids_t.dims[0]; ++i)
    if (((int32_t*)t->targets_t.data)[i] >= 0) sum += t->loss_all[i], ++n;
  t->loss_mean = n ? sum / (double)n : 0.0;
  t->norm_value = ((float*)t->results[0][t->norm])[0];
  int64_t step = t->step + 1;
  bool finite = isfinite(t->loss_mean) && isfinite(t->norm_value);
  // The update ran in place unless the norm was not finite (AdamW then left the state as it was):
  // a non-finite loss with a finite norm (a target's logit of -inf) has been applied.
  bool applied = isfinite(t->norm_value);
  if (!finite && !t->o->skip_nonfinite) {
    bool loss_bad = !isfinite(t->loss_mean), nan = isnan(loss_bad ? t->loss_mean : t->norm_value);
    t->failure = tprt_make_status(
        TPRT_STATUS_FAILED_PRECONDITION, "step %lld: the %s is %s; stopped %s (%s%s; --skip-nonfinite %s instead)",
        (long long)step, loss_bad ? "loss" : "gradient norm", nan ? "NaN" : "infinite",
        applied ? "after its update, which the finite gradient norm let through" : "before applying it",
        applied ? "the weights include it" : "the weights are those after the step before",
        t->o->save_dir ? ", and the last checkpoint is whole" : "", applied ? "goes on" : "skips such steps");
    t->stop = true;
    return;
  }
  int64_t T = t->ids_t.dims[0];
  t->position = tpc_data_advance(&t->train, t->position, T);
  t->step = step;
  t->tokens_done += T;
  double now = tpc_now(), elapsed = now - t->t_start, rate = elapsed > 0 ? (double)t->tokens_done / elapsed : 0.0;
  double eta = rate > 0 ? (double)(t->o->steps - step) * (double)T / rate : 0.0;
  // This step's model FLOPs over its time, per rank (every rank's device counts; eval and
  // checkpoints between steps are outside the step's time).
  int64_t flops = 0;
  for (int r = 0; r < tprt_world_size(t->world); ++r) flops += t->rank_flops[r];
  double step_flops = (double)(flops - t->flops_before), dt = now - t->t_step;
  t->flops_before = flops;
  double tflops = dt > 0 ? step_flops / dt / tprt_world_size(t->world) / 1e12 : 0.0;
  double mfu = t->o->peak_tflops > 0 ? tflops / t->o->peak_tflops : 0.0;
  char mfu_text[48] = "";
  if (t->o->peak_tflops > 0) snprintf(mfu_text, sizeof mfu_text, " | MFU %.1f%%", 100.0 * mfu);
  fprintf(stderr,
          "tpc-train: step %lld/%lld | loss %.6f | lr %.3e | grad norm %.4f%s | %.0f tok/s | %.3g TFLOP/s%s | ETA %.0fs\n",
          (long long)step, (long long)t->o->steps, t->loss_mean, tpc_lr(t->o, step), t->norm_value,
          finite ? "" : applied ? " (loss not finite; the update applied)" : " (skipped: not finite)", rate, tflops,
          mfu_text, eta);
  if (t->json) {
    fprintf(t->json, "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"tokens\": %lld, "
            "\"seconds\": %.6f, \"step_seconds\": %.6f, \"model_flops\": %.6g, \"skipped\": %s",
            (long long)step, t->loss_mean, tpc_lr(t->o, step), t->norm_value, (long long)t->tokens_done, elapsed, dt,
            step_flops, finite || applied ? "false" : "true");
    if (t->o->peak_tflops > 0) fprintf(t->json, ", \"mfu\": %.6f", mfu);
    fprintf(t->json, "}\n");
  }
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
static tprt_status_t tpc__evaluate(tpc_train_t* t, tprt_rank_t* rank, tprt_exec_t* exec) {
  int r = tprt_rank_index(rank);
  void** args = t->kb[r].eargs;
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
      if (t->eval_from[a] >= 0) args[a] = t->kb[r].args[t->eval_from[a]];
    const int which[2] = {t->eval_ids, t->eval_targets};
    const tprt_tensor_t* logical[2] = {&t->ids_t, &t->targets_t};
    for (int i = 0; i < 2 && !s; ++i) {
      const tprt_module_tensor_t* mt = &efn->args[which[i]];
      s = tpc__to_rank(mt, t->world, r, logical[i]->data, t->eval_host[r][which[i]]);
      if (!s) s = tpc__upload(t, args[which[i]], t->eval_host[r][which[i]], tprt_tensor_bytes(&mt->layout));
    }
    if (!s && efn->entry(exec, args, t->kb[r].eres, t->kb[r].earena)) {
      s = tprt_exec_take_status(exec);
      if (!s) s = tprt_make_status(TPRT_STATUS_INTERNAL, "evaluation failed");
    }
    if (!s)
      s = tpc__download(t, t->eval_results_of[r][0], t->kb[r].eres[0], tprt_tensor_bytes(&efn->results[0].layout));
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

static tprt_status_t tpc__rank(tprt_rank_t* rank, void* user) {
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
    if (r == 0) {
      t->t_step = tpc_now();
      tprt_status_t p = tpc__prepare(t);
      if (p) t->failure = p, t->stop = true;
    }
    // The micro-batches (one without --micro-batches): rank 0 cuts the pieces, every rank feeds
    // its part and computes; rank 0 collects the loss while the others wait at the next meeting.
    for (int m = 0; m < t->k && !s; ++m) {
      if (r == 0 && !t->stop) tpc__micro_pieces(t, m);
      if ((s = tpc__meet(rank)) || t->stop) break;
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
      if ((s = tpc__meet(rank))) break;
      if (r == 0) {
        tprt_status_t g = tpc__gather_loss(t, m);  // reported by tpc__review
        if (g && !t->failure) t->failure = g;
        else tprt_status_free(g);
      }
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
    if ((s = tpc__meet(rank))) break;
    if (r == 0) tpc__review(t);
    if ((s = tpc__meet(rank))) break;
    // The step's results that become the next step's arguments (weights, master weights, moments)
    // were written in place (tpc__in_place); a step with a non-finite norm left them unchanged.
    if (t->save) {
      // Each rank brings its arguments to the host; rank 0 writes them.
      for (int a = 0; !s && a < t->fn->num_args; ++a)
        if (!t->micro[a].data)
          s = tpc__download(t, t->args[r][a], k->args[a], tprt_tensor_bytes(&t->fn->args[a].layout));
      if (s || (s = tpc__meet(rank))) break;
      if (r == 0) {
        tprt_status_t c = tpc_checkpoint_save(t->o, t->fn, t->world, t->args, t->tok, tprt_world_size(t->world), t->step,
                                              t->position);
        if (c) t->failure = c, t->stop = true;
      }
      if ((s = tpc__meet(rank))) break;
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
  ro.mesh = t->o->mesh ? t->o->mesh : "tp=1";  // one call over the whole batch: no mb axis
  char so[PATH_MAX];
  snprintf(*dir, sizeof *dir, "/tmp/tpc-train-eval-XXXXXX");
  if (!tpc__compile(&ro, t->o->module_path, so, sizeof so, *dir))
    return tprt_make_status(TPRT_STATUS_INTERNAL, "%s: the evaluation module (pipeline infer) does not compile",
                            t->o->module_path);
  TPRT_RETURN_IF_ERROR(tprt_module_load(so, tprt_allocator_system(), &t->eval_module), "evaluation module");
  t->efn = &t->eval_module->functions[0];
  t->eval_from = calloc((size_t)t->efn->num_args + 1, sizeof *t->eval_from);
  t->eval_tok = calloc((size_t)t->efn->num_args + 1, sizeof *t->eval_tok);
  if (!t->eval_from || !t->eval_tok) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  t->eval_ids = t->eval_targets = -1;
  for (int a = 0; a < t->efn->num_args; ++a) {
    const tprt_module_tensor_t* e = &t->efn->args[a];
    t->eval_from[a] = t->eval_tok[a] = -1;
    if (!strcmp(e->name, "ids")) t->eval_ids = a;
    if (!strcmp(e->name, "targets")) t->eval_targets = a;
    if (a == t->eval_ids || a == t->eval_targets) continue;
    int k = tpc__find_arg(t->fn, e->name);
    if (k >= 0 && t->micro[k].data && e->layout.dtype == t->micro[k].dtype) {  // cut into micro-batches for training
      t->eval_tok[a] = k;
      continue;
    }
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
      // A table fed a micro-batch at a time (the rotary tables): read whole, kept for the pieces.
      bool table = t->micro[a].data && !t->tok[a].data;
      if (table) l.dims[0] *= t->k;
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
      if (!s && table) {
        t->tok[a] = l;
        logical[a] = NULL;
      }
      for (int r = 0; r < nranks && !s; ++r) {
        tprt_tensor_t local = mt->layout;
        if ((s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(&local) + 1, 64, &t->args[r][a]))) break;
        local.data = t->args[r][a];
        if (t->micro[a].data) continue;  // fed before each call (tpc__feed)
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
  char mesh_mb[512];
  if (o.micro_batches > 1) {  // the micro-batches as one more data axis, which tp-micro-batch cuts
    snprintf(mesh_mb, sizeof mesh_mb, "%s,mb=%lld", ro.mesh, (long long)o.micro_batches);
    ro.mesh = mesh_mb;
  }
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
  // A .mlir is compiled here (pipeline step); a .so is a step tpc-compile made already (on a
  // machine with MLIR: `tpc-compile --pipeline=step --mesh=...`, with mb=K for --micro-batches).
  size_t plen = strlen(o.module_path);
  bool precompiled = plen > 3 && strcmp(o.module_path + plen - 3, ".so") == 0;
  if (precompiled && o.val_path) {
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                         "--val-data needs the model's .mlir (its evaluation module is compiled from it); %s is compiled",
                         o.module_path);
    goto fail;
  }
  if (precompiled) snprintf(so_path, sizeof so_path, "%s", o.module_path);
  else if (!tpc__compile(&ro, o.module_path, so_path, sizeof so_path, tmpdir)) goto done;
  if (o.share_gpus) setenv("TPRT_CUDA_SHARE_DEVICES", "1", 1), setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (!(t->backend = tpc__load_backend(o.backend))) goto done;
  t->device = t->backend != tprt_backend_cpu();
  if ((s = tprt_module_load(so_path, tprt_allocator_system(), &module))) goto fail;
  t->module = module;
  t->gfn = t->rfn = &module->functions[0];
  t->k = 1;
  if (o.micro_batches > 1) {
    char uname[TPRT_MODULE_NAME_LEN + 8];
    snprintf(uname, sizeof uname, "%s_update", t->gfn->name);
    t->ufn = t->rfn = tprt_module_function(module, uname);
    if (!t->ufn) {
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                           "%s: --micro-batches %lld: the step has no gradient reduction over micro-batches to cut "
                           "(no function @%s after tp-micro-batch)",
                           o.module_path, (long long)o.micro_batches, uname);
      goto fail;
    }
    t->k = (int)o.micro_batches;
    for (int v = t->k; v > 1; v /= 2) ++t->levels;
    ++t->levels;
  }
  // Every argument of the functions, once by name: the gradient function's, then the update's
  // own (its partial gradients are the gradient function's results of the same names).
  {
    const tprt_module_function_t *g = t->gfn, *u = t->ufn;
    int cap = g->num_args + (u ? u->num_args : 0);
    t->fn_all.args = calloc((size_t)cap + 1, sizeof *t->fn_all.args);
    t->garg = calloc((size_t)g->num_args + 1, sizeof *t->garg);
    t->uarg = calloc((size_t)(u ? u->num_args : 0) + 1, sizeof *t->uarg);
    if (!t->fn_all.args || !t->garg || !t->uarg) {
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
      goto fail;
    }
    snprintf(t->fn_all.name, sizeof t->fn_all.name, "%s", g->name);
    for (int i = 0; i < g->num_args; ++i) t->fn_all.args[t->garg[i] = t->fn_all.num_args++] = g->args[i];
    t->npart = u ? g->num_results - 1 : 0;
    for (int i = 0; u && i < u->num_args; ++i) {
      int p = tpc__find_result(g, u->args[i].name);
      if (p >= 1) {
        t->uarg[i] = -1 - (p - 1);
        continue;
      }
      int a = tpc__find_arg(&t->fn_all, u->args[i].name);
      if (a < 0) t->fn_all.args[a = t->fn_all.num_args++] = u->args[i];
      t->uarg[i] = a;
    }
    t->fn = &t->fn_all;
  }
  const tprt_module_function_t* fn = t->fn;
  t->cos_arg = tpc__find_arg(fn, "cos");
  t->sin_arg = tpc__find_arg(fn, "sin");
  t->ids = tpc__find_arg(fn, "ids");
  t->targets = tpc__find_arg(fn, "targets");
  t->hyper = tpc__find_arg(fn, "optimizer.hyper");
  t->norm = tpc__find_result(t->rfn, "grad_norm");
  t->loss = 0;
  char cot[TPRT_MODULE_NAME_LEN + 8];
  snprintf(cot, sizeof cot, "%s_grad", t->gfn->num_results ? t->gfn->results[0].name : "");
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
  t->next = calloc((size_t)t->rfn->num_results + 1, sizeof *t->next);
  for (int j = 0; t->next && j < t->rfn->num_results; ++j) {
    t->next[j] = t->rfn == t->gfn && j == t->loss ? -1 : tpc__find_arg(fn, t->rfn->results[j].name);
    // A result becomes its argument at the next step: both must be the same rank-local tensor.
    const tprt_module_tensor_t *res = &t->rfn->results[j], *arg = t->next[j] >= 0 ? &fn->args[t->next[j]] : NULL;
    if (arg && (tprt_tensor_bytes(&res->layout) != tprt_tensor_bytes(&arg->layout) || res->layout.dtype != arg->layout.dtype)) {
      s = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                           "%s: the updated '%s' is not laid out like the argument it replaces (%s); tpc-train does not "
                           "support this mesh yet (GTP: docs/training.md, \"Status\")",
                           o.module_path, res->name, o.mesh ? o.mesh : "");
      goto fail;
    }
  }
  // The world: the module's mesh (with micro-batches, mb has one member now).
  tprt_world_options_t wopts;
  memset(&wopts, 0, sizeof wopts);
  wopts.num_axes = module->num_mesh_axes > 0 ? module->num_mesh_axes : 1;
  for (int i = 0; i < module->num_mesh_axes; ++i) wopts.axes[i] = (tprt_mesh_axis_t){module->mesh_axes[i], module->mesh_shape[i]};
  if (module->num_mesh_axes == 0) wopts.axes[0] = (tprt_mesh_axis_t){"world", 1};
  if ((s = tprt_world_create(&wopts, tprt_allocator_system(), &t->world))) goto fail;
  int nranks = tprt_world_size(t->world);
  // The token tensors: the step's, rank 0's micro-batch piece, the rows of a rank's micro-batch.
  t->tok = calloc((size_t)fn->num_args + 1, sizeof *t->tok);
  t->micro = calloc((size_t)fn->num_args + 1, sizeof *t->micro);
  t->piece = calloc((size_t)fn->num_args + 1, sizeof *t->piece);
  if (!t->tok || !t->micro || !t->piece) {
    s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    goto fail;
  }
  {
    tprt_shard_t sh;
    tprt_tensor_t l;
    if ((s = tpc__logical(&fn->args[t->ids], t->world, &l, &sh))) goto fail;
    int64_t T = l.dims[0] * t->k;
    if (o.batch < 1 || T % o.batch != 0) {
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--batch %lld must divide the module's %lld tokens per step",
                           (long long)o.batch, (long long)T);
      goto fail;
    }
    int64_t dims[1] = {T};
    t->ids_t = tprt_tensor_make(calloc((size_t)T, 4), TPRT_DTYPE_I32, 1, dims);
    t->targets_t = tprt_tensor_make(calloc((size_t)T, 4), TPRT_DTYPE_I32, 1, dims);
    t->loss_grad_t = tprt_tensor_make(calloc((size_t)T, 4), TPRT_DTYPE_F32, 1, dims);
    t->loss_all = calloc((size_t)T + 1, sizeof *t->loss_all);
    if (!t->ids_t.data || !t->targets_t.data || !t->loss_grad_t.data || !t->loss_all) {
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
      goto fail;
    }
    t->tok[t->ids] = t->ids_t, t->tok[t->targets] = t->targets_t, t->tok[t->loss_grad] = t->loss_grad_t;
    for (int a = 0; a < fn->num_args; ++a) {
      const tprt_module_tensor_t* mt = &fn->args[a];
      bool tok = a == t->ids || a == t->targets || a == t->loss_grad;
      bool over_mb = t->k > 1 && mt->sharded && mt->layout.rank >= 1 && strstr(mt->axes[0], "mb") != NULL;
      if (!tok && !over_mb) continue;
      if ((s = tpc__logical(mt, t->world, &l, &sh))) goto fail;
      t->micro[a] = l;
      if (!(t->micro[a].data = calloc(tprt_tensor_bytes(&l) + 1, 1))) {
        s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
        goto fail;
      }
      // A data-parallel rank's block: the piece's rows over the data axes' ranks (tp may split a
      // block further under sequence parallelism).
      int64_t group = 1;
      char axes[sizeof mt->axes[0]];
      snprintf(axes, sizeof axes, "%s", mt->axes[0]);
      for (char *save = NULL, *ax = strtok_r(axes, ",", &save); ax; ax = strtok_r(NULL, ",", &save)) {
        int i = tprt_world_find_axis(t->world, ax);
        if (i >= 0 && strcmp(ax, "tp") != 0) group *= tprt_world_axis_size(t->world, i);
      }
      t->piece[a] = l.dims[0] / group;
    }
    int64_t seq = T / o.batch;
    if (t->k > 1 && t->piece[t->ids] % seq != 0) {
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                           "--micro-batches %d: a rank's micro-batch holds %lld tokens, not whole sequences of %lld "
                           "(the step's %lld tokens over %lld data-parallel ranks and %d micro-batches); use fewer "
                           "micro-batches or more, shorter sequences (--batch)",
                           t->k, (long long)t->piece[t->ids], (long long)seq, (long long)T,
                           (long long)(T / t->k / t->piece[t->ids]), t->k);
      goto fail;
    }
    if ((s = tpc_data_configure(&t->train, o.data_path, seq, tpc_train_vocab(fn, t->world)))) goto fail;
  }
  if (o.val_path && (s = tpc__load_eval(t, &ro, &eval_so_dir))) goto fail;
  for (int r = 0; r < nranks; ++r) {
    const tprt_module_function_t* g = t->gfn;
    t->args[r] = calloc((size_t)fn->num_args + 1, sizeof(void*));
    t->gres[r] = calloc((size_t)g->num_results + 1, sizeof(void*));
    t->results[r] = t->ufn ? calloc((size_t)t->ufn->num_results + 1, sizeof(void*)) : t->gres[r];
    t->acc[r] = calloc((size_t)(t->npart * t->levels) + 1, sizeof(float*));
    t->accf[r] = calloc((size_t)(t->npart * t->levels) + 1, sizeof(bool));
    if (!t->args[r] || !t->gres[r] || !t->results[r] || !t->acc[r] || !t->accf[r]) {
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
      goto fail;
    }
    for (int j = 0; j < g->num_results; ++j)
      if (!tpc__in_place(t, g, j) &&
          (s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(&g->results[j].layout) + 1, 64,
                                     &t->gres[r][j])))
        goto fail;
    for (int j = 0; t->ufn && j < t->ufn->num_results; ++j)
      if (!tpc__in_place(t, t->ufn, j) &&
          (s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(&t->ufn->results[j].layout) + 1, 64,
                                     &t->results[r][j])))
        goto fail;
    for (int p = 0; p < t->npart; ++p) {
      const tprt_tensor_t* pl = &g->results[1 + p].layout;
      if (pl->dtype != TPRT_DTYPE_F32) {
        s = tprt_make_status(TPRT_STATUS_INTERNAL, "%s: partial gradient '%s' is not f32", o.module_path,
                             g->results[1 + p].name);
        goto fail;
      }
      for (int l = 0; !t->device && l < t->levels; ++l)  // a device backend accumulates in its memory
        if ((s = tprt_allocator_malloc(tprt_allocator_system(), tprt_tensor_bytes(pl) + 1, 64,
                                       (void**)&t->acc[r][p * t->levels + l])))
          goto fail;
    }
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
  if (t->backend->configure && (s = t->backend->configure(module->numerics))) goto fail;
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
    for (int j = 0; t->gres[r] && j < t->gfn->num_results; ++j)
      if (!tpc__in_place(t, t->gfn, j)) tprt_allocator_free(tprt_allocator_system(), t->gres[r][j]);
    for (int j = 0; t->ufn && t->results[r] && j < t->ufn->num_results; ++j)
      if (!tpc__in_place(t, t->ufn, j)) tprt_allocator_free(tprt_allocator_system(), t->results[r][j]);
    for (int p = 0; t->acc[r] && p < t->npart * t->levels; ++p) tprt_allocator_free(tprt_allocator_system(), t->acc[r][p]);
    if (t->results[r] != t->gres[r]) free(t->results[r]);
    free(t->args[r]), free(t->gres[r]), free(t->acc[r]), free(t->accf[r]);
  }
  for (int a = 0; t->fn && a < t->fn->num_args; ++a) {
    free(t->micro ? t->micro[a].data : NULL);
    if (t->tok && a != t->ids && a != t->targets && a != t->loss_grad)
      tprt_allocator_free(tprt_allocator_system(), t->tok[a].data);
  }
  free(t->tok), free(t->micro), free(t->piece), free(t->loss_all), free(t->garg), free(t->uarg), free(t->fn_all.args);
  free(t->eval_tok);
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
  if (so_path[0] && strncmp(so_path, "/tmp/tpc-train-", 15) == 0 && strcmp(so_path, o.module_path) != 0) {
    unlink(so_path);
    rmdir(tmpdir);
  }
  free(t);
  return rc;
}
