// tpc-train's reports (see tpc_train.h): rank 0's review of each step (the mean loss and the
// gradient norm, whether the step is kept, the progress line and the --json record, and whether
// to save, evaluate or stop next) and the evaluation on --val-data, which every rank takes part in.
// In a process world every process reviews the step and sums the held-out loss on its own copy of
// the state, from the same exchanged numbers (tpc_train_procs.c); rank 0 alone prints and writes.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run_load.h"
#include "tpc_run_signal.h"
#include "tpc_run_tensor.h"
#include "tpc_train.h"
#include "tpc_run_world.h"

// |v| as a JSON number (%.9g), or null when it is not finite (JSON has no NaN or infinity), in |buf|
// (32 bytes).
static const char* tpc__json_number(double v, char* buf) {
  snprintf(buf, 32, isfinite(v) ? "%.9g" : "null", v);
  return buf;
}

//===----------------------------------------------------------------------===//
// The step's review
//===----------------------------------------------------------------------===//

void tpc__review(tpc_train_t* t) {
  if (t->failure) {
    t->stop = true;
    return;
  }
  double sum = 0.0;
  int64_t n = 0;
  for (int64_t i = 0; i < t->ids_t.dims[0]; ++i)
    if (((int32_t*)t->targets_t.data)[i] >= 0) sum += t->loss_all[i], ++n;
  t->loss_mean = n ? sum / (double)n : 0.0;
  if (!t->procs) {  // a process world's are rank 0's norm and any process's signal (tpc__share_step)
    t->norm_value = ((float*)t->results[0][t->norm])[0];
    t->signal = tpc_signals_caught();
  }
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
  if (t->self == 0)  // in a process world every process reviews the step; rank 0 speaks
    fprintf(stderr,
            "tpc-train: step %lld/%lld | loss %.6f | lr %.3e | grad norm %.4f%s | %.0f tok/s | %.3g TFLOP/s%s | ETA %.0fs\n",
            (long long)step, (long long)t->o->steps, t->loss_mean, tpc_lr(t->o, step), t->norm_value,
            finite ? "" : applied ? " (loss not finite; the update applied)" : " (skipped: not finite)", rate, tflops,
            mfu_text, eta);
  if (t->json) {
    char loss_text[32], norm_text[32];
    fprintf(t->json, "{\"step\": %lld, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, \"tokens\": %lld, "
            "\"seconds\": %.6f, \"step_seconds\": %.6f, \"model_flops\": %.6g, \"skipped\": %s",
            (long long)step, tpc__json_number(t->loss_mean, loss_text), tpc_lr(t->o, step),
            tpc__json_number(t->norm_value, norm_text), (long long)t->tokens_done, elapsed, dt, step_flops,
            finite || applied ? "false" : "true");
    if (t->o->peak_tflops > 0) fprintf(t->json, ", \"mfu\": %.6f", mfu);
    fprintf(t->json, "}\n");
  }
  if (t->json) fflush(t->json);  // a record per line as it happens, kept if the run dies
  if (step >= t->o->steps || t->signal || (t->o->exit_after > 0 && step >= t->o->exit_after)) t->stop = true;
  t->save = t->o->save_dir && (t->stop || (t->o->save_every > 0 && step % t->o->save_every == 0));
  t->eval_now = t->efn && (t->stop || (t->o->eval_every > 0 && step % t->o->eval_every == 0));
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

tprt_status_t tpc__evaluate(tpc_train_t* t, tprt_rank_t* rank, tprt_exec_t* exec) {
  int r = tprt_rank_index(rank);
  void** args = t->kb[r].eargs;
  const tprt_module_function_t* efn = t->efn;
  int64_t T = t->ids_t.dims[0], position = 0;
  tprt_status_t s = NULL;
  if (tpc__leads(t, r)) t->val_sum = 0.0, t->val_count = 0;
  for (int64_t k = 0; k < t->o->eval_batches && !s; ++k) {
    if (tpc__leads(t, r)) {
      tprt_status_t p = tpc_data_batch(&t->val, position, T, (int32_t*)t->ids_t.data, (int32_t*)t->targets_t.data);
      if (p) t->failure = p, t->stop = true;
      position = tpc_data_advance(&t->val, position, T);
    }
    if ((s = tpc_meet(rank)) || t->failure) break;
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
    const void* pieces[TPC_RUN_MAX_RANKS];
    void* all = NULL;
    if (s || (s = tpc__rank_pieces(t, rank, t->eval_results_of, tprt_tensor_bytes(&efn->results[0].layout), pieces,
                                   &all)))
      break;
    if (tpc__leads(t, r)) {
      // The mean over the batch's tokens, as the training loss (rank pieces in logical order).
      const tprt_module_tensor_t* mt = &efn->results[0];
      tprt_tensor_t l;
      tprt_shard_t shard;
      tprt_status_t e = tpc__logical(mt, t->world, &l, &shard);
      float* loss = calloc((size_t)l.dims[0] + 1, sizeof *loss);
      l.data = loss;
      for (int q = 0; !e && loss && q < tprt_world_size(t->world); ++q) {
        tprt_tensor_t local = mt->layout;
        local.data = (void*)pieces[q];
        if (local.data) e = mt->sharded ? tprt_shard_insert(&shard, t->world, q, &local, &l) : NULL;
        if (!e && !mt->sharded && local.data) memcpy(loss, local.data, tprt_tensor_bytes(&local));
      }
      for (int64_t i = 0; loss && i < l.dims[0]; ++i)
        if (((int32_t*)t->targets_t.data)[i] >= 0) t->val_sum += loss[i], t->val_count += 1;
      free(loss);
      if (e) t->failure = e, t->stop = true;
    }
    free(all);
    if ((s = tpc_meet(rank))) break;
  }
  if (!s && r == 0 && !t->failure) {
    double v = t->val_count ? t->val_sum / (double)t->val_count : 0.0;
    fprintf(stderr, "tpc-train: eval after step %lld | val loss %.6f (%lld batches, %lld tokens)\n", (long long)t->step, v,
            (long long)t->o->eval_batches, (long long)t->val_count);
    if (t->json) {
      char val_text[32];
      fprintf(t->json, "{\"step\": %lld, \"val_loss\": %s, \"val_tokens\": %lld}\n", (long long)t->step,
              tpc__json_number(v, val_text),
              (long long)t->val_count);
      fflush(t->json);
    }
  }
  return s;
}
