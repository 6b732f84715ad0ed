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
// Ranks are threads of this process, or processes: started by torchrun (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) or mpirun, each tpc-train runs one rank of the --mesh world
// (tprt_procs.h). Between steps the ranks meet through the world's own collectives (so a failed
// rank ends every rank's wait); rank 0 prepares the batch, assembles the loss and speaks for the
// world. In a process world every process reads the batch and assembles the loss itself, from the
// pieces the processes exchange (tpc_train_procs.c), and rank 0 alone prints and writes files.
//
// This file holds main: the step compiled and loaded, the arguments' roles, the token tensors and
// the ranks' host buffers, the initial arguments, and the run. The ranks' loop is in
// tpc_train_step.c, rank 0's review of each step and the evaluation in tpc_train_report.c;
// tpc_train.h lists the other pieces.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tprt_backend.h"
#include "tprt_numerics.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run_args.h"
#include "tpc_run_backend.h"
#include "tpc_run_compile.h"
#include "tpc_run_load.h"
#include "tpc_run_signal.h"
#include "tpc_run_tensor.h"
#include "tpc_train.h"
#include "tpc_run_world.h"

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

// tpc-run's words for the signal that stopped the run (in a process world perhaps another
// process's).
static const char* tpc__signal_text(int sig) { return sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"; }

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
  // The forward runs on the training world, whose axes are the step module's mesh, and a
  // collective refuses a world of other axes: with --micro-batches that mesh keeps an mb axis of
  // one member (tp-micro-batch's), so the forward is compiled over the same axes. mb = 1 splits
  // nothing: one call over the whole batch, the same bits as without micro-batches.
  char mesh[sizeof t->module->mesh_axes + 64];  // each axis: its name, "=", the size and ","
  ro.mesh = t->o->mesh ? t->o->mesh : "tp=1";
  if (t->module->num_mesh_axes > 0) {
    size_t n = 0;
    for (int i = 0; i < t->module->num_mesh_axes && n < sizeof mesh; ++i)
      n += (size_t)snprintf(mesh + n, sizeof mesh - n, "%s%s=%d", i ? "," : "", t->module->mesh_axes[i],
                            t->module->mesh_shape[i]);
    ro.mesh = mesh;
  }
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
        if (t->procs && r != t->self) continue;  // the other processes hold the other ranks
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
  bool clean = false;  // every process ends here normally: they meet once more before closing the mesh
  if (!t) return 1;
  t->o = &o;
  // Under torchrun or mpirun this process is one rank of a process world. It joins the others
  // first, so that one failing before the first step (a module that does not compile here) ends
  // the others at their first exchange rather than leaving them waiting at the meeting.
  if ((s = tprt_procs_from_env(0, 0, &t->procs))) goto fail;
  t->self = t->procs ? tprt_procs_rank(t->procs) : 0;
  t->ids = t->targets = t->loss_grad = t->hyper = t->loss = t->norm = t->cos_arg = t->sin_arg = -1;
  if (o.resume_dir) {
    // The checkpoint's tensors are the arguments by name; its trainer state says where to go on.
    // Every process reads it (a process world's checkpoints are on a file system they share).
    if ((s = tpc_checkpoint_latest(o.resume_dir, resume_file, sizeof resume_file, &resumed))) goto fail;
    ro.weights = resume_file;
    ro.weight_names = NULL;
    if (t->self == 0)
      fprintf(stderr, "tpc-train: resuming from %s (after step %lld)\n", resume_file, (long long)resumed.step);
    // The run keeps its seed (the later checkpoints record it), as it keeps its step and data
    // position; a --seed given here overrides it, as every other option given here applies.
    if (resumed.has_seed && !o.seed_given) {
      o.seed = resumed.seed;
    } else if (resumed.has_seed && o.seed != resumed.seed && t->self == 0) {
      fprintf(stderr, "tpc-train: --seed %llu overrides the checkpoint's seed %llu\n", (unsigned long long)o.seed,
              (unsigned long long)resumed.seed);
    }
    ro.seed = o.seed;  // seed_given stays the command line's: only --seed lets missing arguments be drawn
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
  // The world: the module's mesh (with micro-batches, mb has one member now); in a process world,
  // one rank per process.
  tprt_world_options_t wopts;
  int mesh_size = tpc_world_options(module, &wopts);
  {
    char mesh[300];
    snprintf(mesh, sizeof mesh, precompiled ? "the module's mesh" : "--mesh %s", o.mesh ? o.mesh : "tp=1");
    if ((s = tpc_world_check_procs(t->procs, mesh_size, mesh, "tpc-train"))) goto fail;
  }
  wopts.procs = t->procs;
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
      // The piece's rows per index of the data axes before mb, a data-parallel rank's block (the
      // axes after mb split a micro-batch's block further: gtp, and tp under sequence parallelism).
      int64_t group = 1;
      char axes[sizeof mt->axes[0]];
      snprintf(axes, sizeof axes, "%s", mt->axes[0]);
      for (char *save = NULL, *ax = strtok_r(axes, ",", &save); ax && strcmp(ax, "mb") != 0;
           ax = strtok_r(NULL, ",", &save)) {
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
    if (t->procs && r != t->self) continue;  // the other processes hold the other ranks
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
    if (t->self == 0)
      fprintf(stderr, "tpc-train: nothing to do: the checkpoint is after step %lld of %lld\n", (long long)t->step,
              (long long)o.steps);
    rc = 0;
    clean = true;
    goto done;
  }
  if (o.json && t->self == 0 && !(t->json = strcmp(o.json, "-") ? fopen(o.json, resumed.step ? "a" : "w") : stdout)) {
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--json %s: %s", o.json, strerror(errno));
    goto fail;
  }
  if (t->self == 0)
    fprintf(stderr, "tpc-train: %s: %lld tokens per step (%lld sequences of %lld) on %d rank%s (%s%s%s), numerics %s; "
            "data %s (%lld tokens)\n",
            o.module_path, (long long)t->ids_t.dims[0], (long long)o.batch, (long long)(t->ids_t.dims[0] / o.batch),
            nranks, nranks == 1 ? "" : "s", t->backend->name, t->procs ? ", one process each, launched by " : "",
            t->procs ? tprt_procs_launcher(t->procs) : "", module->numerics, o.data_path, (long long)t->train.count);
  t->t_start = tpc_now();
  // A first Ctrl-C (or SIGTERM) ends the run after the step in progress, with a checkpoint when
  // --save is given: the world is not cancelled (tpc-run's way), the ranks see the flag between
  // steps; in a process world the processes tell each other after every step, so that all stop
  // after the same one. A second Ctrl-C ends the process at once (in a process world the others
  // then end too, naming it).
  if (t->backend->configure && (s = t->backend->configure(module->numerics))) goto fail;
  s = tprt_world_run(t->world, tpc__rank, t);
  if (t->failure && !s) s = t->failure, t->failure = NULL;
  if (s) goto fail;
  clean = true;
  int sig = tpc_signals_caught() ? tpc_signals_caught() : t->signal;
  if (sig) {
    if (t->self == 0)
      fprintf(stderr, "tpc-train: %s after step %lld%s\n", tpc__signal_text(sig), (long long)t->step,
              o.save_dir ? "; the checkpoint above holds it (--resume goes on)" : "");
    rc = 128 + sig;
    goto done;
  }
  if (t->json && t->json != stdout) fclose(t->json), t->json = NULL;
  rc = 0;
  goto done;
fail:
  fprintf(stderr, "tpc-train: error: %s\n", tprt_status_message(s));
  if (t->procs) tprt_procs_abort(t->procs, tprt_status_message(s));  // the other processes end with it
  tprt_status_free(s);
  rc = tpc_signals_caught() ? 128 + tpc_signals_caught() : 1;
done:
  if (t->procs && !clean) tprt_procs_abort(t->procs, "stopped before the first step (its own error says why)");
  if (t->procs && clean && (s = tprt_procs_finish(t->procs))) {
    fprintf(stderr, "tpc-train: error: %s\n", tprt_status_message(s));
    tprt_status_free(s);
    rc = 1;
  }
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
  tprt_procs_destroy(t->procs);
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
