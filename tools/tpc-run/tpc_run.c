// tpc-run: runs a compiled tp module (or a .mlir, compiled on the fly with tpc-compile) on a
// world of ranks on the CPU backend.
//
//   tpc-run model.so|model.mlir [--world N] [--function F] [--weights ckpt.safetensors]
//           [--inputs in.safetensors] [--seed S] [--outputs out.safetensors] [--hash] [--stats]
//           [--repeat R] [--backend cpu|cuda] [--graph] [--share-gpus]
//
// Arguments come from --inputs, then --weights (by name), then seeded Philox initialisation
// (element (i,j) of a tensor depends only on the seed, the tensor's name and (i,j)). Prints the
// hash of every output of rank 0, step timings and the arena size.
//
// Ranks are threads of this process, or processes: started by torchrun (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) or mpirun, each tpc-run runs its own rank, and rank 0 gathers the
// results and prints what a thread world prints (tprt_procs.h).
//
// This file is main: it loads the module and the backend, builds the world and every rank's
// arguments, runs the ranks and reports. The pieces live beside it: the command line
// (tpc_run_args.h), the module's compilation (tpc_run_compile.h), the backend (tpc_run_backend.h),
// the checkpoints arguments come from (tpc_run_load.h), logical tensors (tpc_run_tensor.h), one
// rank's steps (tpc_run_rank.h), a process world's gathers (tpc_run_gather.h), --stats
// (tpc_run_stats.h), the timing report (tpc_run_report.h) and signals (tpc_run_signal.h).
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tprt_backend.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run.h"
#include "tpc_run_args.h"
#include "tpc_run_backend.h"
#include "tpc_run_compile.h"
#include "tpc_run_gather.h"
#include "tpc_run_load.h"
#include "tpc_run_rank.h"
#include "tpc_run_report.h"
#include "tpc_run_signal.h"
#include "tpc_run_stats.h"
#include "tpc_run_tensor.h"
#include "tprt_checkpoint.h"

int main(int argc, char** argv) {
  tpc_run_options_t opts;
  memset(&opts, 0, sizeof opts);
  int parsed = tpc_run_parse_args(argc, argv, &opts);
  if (parsed <= 0) return parsed == 0 ? 0 : 2;
  tpc_signals_install();
  // The CUDA backend reads the knob when its first rank begins (tprt_params.h), after this.
  if (opts.share_gpus) setenv("TPRT_CUDA_SHARE_DEVICES", "1", 1);
  // Ranks sharing a GPU share its context. A fused norm kernel of one rank spins until a peer's
  // kernel runs, and a kernel launched meanwhile for the first time is loaded then (CUDA's lazy
  // loading), which may synchronize the context and so wait for the spinning kernel: a deadlock
  // (the CUDA programming guide's "Lazy Loading" hazards). Every kernel is loaded up front
  // instead, unless the caller chose a mode.
  if (opts.share_gpus) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  // CUDA graphs of a world on several GPUs capture each rank's NCCL collectives on its own, unless
  // the caller asks for copy-engine collectives (TPRT_CUDA_COPY_ENGINE=1): then the world's ranks
  // capture one graph together (docs/cuda-backend.md, "CUDA graphs"), as ranks sharing a GPU do.
  if (opts.graph) setenv("TPRT_CUDA_COPY_ENGINE", "0", 0);

  tprt_allocator_t alloc = tprt_allocator_system();
  char tmpdir[] = "/tmp/tpc-run-XXXXXX";
  char so_path[PATH_MAX];
  const char* path = opts.module_path;
  size_t plen = strlen(path);
  bool compiled = plen > 5 && strcmp(path + plen - 5, ".mlir") == 0;
  if (compiled) {
    if (!tpc__compile(&opts, path, so_path, sizeof so_path, tmpdir)) return 1;
    path = so_path;
  }
  // --count-only touches no memory, so it never needs a device.
  const tprt_backend_t* backend = tpc__load_backend(opts.count_only ? "cpu" : opts.backend);
  if (!backend) return 1;
  tpc_run_t* run = calloc(1, sizeof *run);
  tprt_module_t* module = NULL;
  tprt_world_t* world = NULL;
  tprt_procs_t* procs = NULL;
  tpc_sources_t sources = {0};
  int rc = 1;
  tprt_tensor_t* outs = NULL;  // the results as logical tensors, and their names
  const char** names = NULL;
  tprt_status_t status = tprt_module_load(path, alloc, &module);
  if (status) goto fail;
  run->opts = &opts;
  run->backend = backend;
  run->module = module;
  run->fn = tprt_module_function(module, opts.function);
  if (!run->fn) {
    status = tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s: no function named '%s'", opts.module_path,
                              opts.function ? opts.function : "");
    goto fail;
  }
  // The world: the module's mesh, or a 1-D world of --world ranks that all run the same step.
  tprt_world_options_t wopts;
  memset(&wopts, 0, sizeof wopts);
  int mesh_size = 1;
  for (int i = 0; i < module->num_mesh_axes; ++i) mesh_size *= module->mesh_shape[i];
  if (module->num_mesh_axes > 0) {
    if (opts.world && opts.world != mesh_size) {
      status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--world %d does not match the module's mesh of %d ranks",
                                opts.world, mesh_size);
      goto fail;
    }
    wopts.num_axes = module->num_mesh_axes;
    for (int i = 0; i < module->num_mesh_axes; ++i)
      wopts.axes[i] = (tprt_mesh_axis_t){module->mesh_axes[i], module->mesh_shape[i]};
  } else {
    wopts.num_axes = 1;
    wopts.axes[0] = (tprt_mesh_axis_t){"world", opts.world ? opts.world : 1};
  }
  // Under torchrun or mpirun this process is one rank of a process world.
  status = tprt_procs_from_env(module->num_mesh_axes > 0 ? mesh_size : opts.world, 0, &procs);
  if (status) goto fail;
  wopts.procs = procs;
  int self = procs ? tprt_procs_rank(procs) : 0;
  status = tprt_world_create(&wopts, alloc, &world);
  if (status) goto fail;
  int nranks = tprt_world_size(world);
  // Per-argument and per-result buffer tables, as long as the function's lists (no fixed cap).
  run->logical_args = calloc((size_t)run->fn->num_args + 1, sizeof(void*));
  run->logical_results = calloc((size_t)run->fn->num_results + 1, sizeof(void*));
  for (int r = 0; r < nranks && run->logical_args && run->logical_results; ++r) {
    run->ranks[r].args = calloc((size_t)run->fn->num_args + 1, sizeof(void*));
    run->ranks[r].results = calloc((size_t)run->fn->num_results + 1, sizeof(void*));
    if (!run->ranks[r].args || !run->ranks[r].results) break;
  }
  if (!run->logical_args || !run->logical_results || !run->ranks[nranks - 1].results) {
    status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for %d arguments and %d results",
                              run->fn->num_args, run->fn->num_results);
    goto fail;
  }
  if ((status = tpc_sources_open(&opts, alloc, &sources))) goto fail;
  for (int r = 0; r < nranks; ++r) {
    if (procs && r != self) continue;  // the other processes hold the other ranks
    tpc_rank_state_t* st = &run->ranks[r];
    st->step_seconds = calloc((size_t)opts.repeat, sizeof(double));
    if (!st->step_seconds) {
      status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
      goto fail;
    }
    if (opts.count_only) continue;  // nothing is read or written
    // A device backend has its own arena (tpc__device_setup); the host keeps arguments and results.
    if (backend == tprt_backend_cpu() &&
        (status = tprt_allocator_malloc(alloc, (size_t)run->fn->arena_bytes, TPRT_ABI_ARENA_ALIGNMENT, &st->arena)))
      goto fail;
    for (int j = 0; j < run->fn->num_results; ++j)
      if ((status = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&run->fn->results[j].layout), 64, &st->results[j])))
        goto fail;
  }
  // Every argument comes from the checkpoints or Philox, the same logical tensor for every mesh.
  // From a checkpoint each rank reads only its piece; otherwise the logical tensor is made once
  // and each rank receives its shard (and --dump-args writes the logical tensors).
  for (int a = 0; a < run->fn->num_args && !opts.count_only; ++a) {
    const tprt_module_tensor_t* mt = &run->fn->args[a];
    tprt_tensor_t logical;
    tprt_shard_t shard;
    tpc_arg_src_t src;
    if ((status = tpc__logical(mt, world, &logical, &shard))) goto fail;
    if ((status = tpc_arg_src_find(&sources, mt->name, &logical, &src))) goto fail;
    const bool direct = src.count > 0 && !opts.dump_args && (!mt->sharded || tpc_arg_src_can_slice(&shard, logical.dtype));
    if (!direct) {
      status = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&logical), 64, &run->logical_args[a]);
      logical.data = run->logical_args[a];
      if (!status)
        status = src.count ? tpc_arg_src_read(&sources, &src, &logical) : tpc__init_arg(&opts, &sources, mt->name, &logical);
    }
    int first_rank = -1;  // the first rank of this process that holds a replicated argument
    for (int r = 0; r < nranks && !status; ++r) {
      if (procs && r != self) continue;
      tprt_tensor_t local = mt->layout;
      if ((status = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&local), 64, &run->ranks[r].args[a]))) break;
      local.data = run->ranks[r].args[a];
      if (!direct && mt->sharded) {
        status = tprt_shard_extract(&shard, world, r, &logical, &local);
      } else if (!direct) {
        memcpy(local.data, logical.data, tprt_tensor_bytes(&local));
      } else if (mt->sharded) {
        status = tpc_arg_src_read_local(&sources, &src, &shard, world, r, &local);
      } else if (first_rank >= 0) {  // replicated: read once, copied to the other ranks
        memcpy(local.data, run->ranks[first_rank].args[a], tprt_tensor_bytes(&local));
      } else {
        status = tpc_arg_src_read(&sources, &src, &local);
        first_rank = r;
      }
    }
    tpc_arg_src_free(&src);
    if (status) goto fail;
  }
  if (opts.stats && sources.bytes_read && self == 0) {
    int files = (sources.inputs ? tprt_checkpoint_num_files(sources.inputs) : 0) +
                (sources.weights ? tprt_checkpoint_num_files(sources.weights) : 0);
    fprintf(stderr, "tpc-run: read %.3f MiB of arguments from %d checkpoint file%s in %.3f s (%.2f GB/s)\n",
            (double)sources.bytes_read / (1u << 20), files, files == 1 ? "" : "s", sources.seconds,
            sources.seconds > 0 ? (double)sources.bytes_read / sources.seconds / 1e9 : 0.0);
  }
  if (opts.dump_args && self == 0) {
    tprt_tensor_t* args = calloc((size_t)run->fn->num_args + 1, sizeof *args);
    const char** arg_names = calloc((size_t)run->fn->num_args + 1, sizeof *arg_names);
    if (!args || !arg_names) status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    for (int a = 0; !status && a < run->fn->num_args; ++a) {
      tprt_shard_t shard;
      status = tpc__logical(&run->fn->args[a], world, &args[a], &shard);
      args[a].data = run->logical_args[a];
      arg_names[a] = run->fn->args[a].name;
    }
    if (!status) status = tpc__write(&opts, opts.dump_args, run->fn->num_args, arg_names, args);
    free(args);
    free(arg_names);
    if (status) goto fail;
  }
  if (self == 0)
    fprintf(stderr, "tpc-run: %s: function %s on %d rank%s (%s%s%s%s), arena %lld bytes per rank, numerics %s\n",
            opts.module_path, run->fn->name, nranks, nranks == 1 ? "" : "s", backend->name,
            procs ? ", one process each, launched by " : "", procs ? tprt_procs_launcher(procs) : "",
            opts.count_only ? ", count only" : "", (long long)run->fn->arena_bytes, module->numerics);
  if (backend->configure && (status = backend->configure(module->numerics))) goto fail;
  double t0 = tpc_now();
  tpc_signals_watch(world);
  status = tprt_world_run(world, tpc__rank_main, run);
  tpc_signals_watch(NULL);
  double wall = tpc_now() - t0;
  if (status || tpc_signals_caught()) goto fail;
  if (procs && (status = tpc__gather_results(run, procs, alloc))) goto fail;
  if (procs && (status = tpc__gather_times(run, procs))) goto fail;
  if (self != 0) {  // rank 0 reports for the world
    rc = 0;
    goto done;
  }

  outs = calloc((size_t)run->fn->num_results + 1, sizeof *outs);
  names = calloc((size_t)run->fn->num_results + 1, sizeof *names);
  if (!outs || !names) {
    status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    goto fail;
  }
  for (int j = 0; j < run->fn->num_results && !opts.count_only; ++j) {
    // Reassemble sharded results from every rank; replicated ones are rank 0's.
    const tprt_module_tensor_t* mt = &run->fn->results[j];
    tprt_shard_t shard;
    if ((status = tpc__logical(mt, world, &outs[j], &shard))) goto fail;
    if (mt->sharded) {
      if ((status = tprt_allocator_malloc(alloc, tprt_tensor_bytes(&outs[j]), 64, &run->logical_results[j]))) goto fail;
      outs[j].data = run->logical_results[j];
      for (int r = 0; r < nranks && !status; ++r) {
        tprt_tensor_t local = mt->layout;
        local.data = run->ranks[r].results[j];
        status = tprt_shard_insert(&shard, world, r, &local, &outs[j]);
      }
      if (status) goto fail;
    } else {
      outs[j].data = run->ranks[0].results[j];
    }
    names[j] = mt->name;
    if (opts.hash) {
      char shape[128] = "[";
      for (int d = 0; d < outs[j].rank; ++d)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? ",%lld" : "%lld", (long long)outs[j].dims[d]);
      strcat(shape, "]");
      printf("%s %s %s %016llx\n", names[j], shape, tprt_dtype_name(outs[j].dtype),
             (unsigned long long)tpc__fnv1a(outs[j].data, tprt_tensor_bytes(&outs[j])));
    }
  }
  if (opts.stats) tpc__print_stats(run, nranks);
  if (tpc_signals_caught()) goto fail;  // no output file after a signal
  if (opts.outputs && (status = tpc__write(&opts, opts.outputs, run->fn->num_results, names, outs))) goto fail;
  {
    // The timing report over every rank (a process world gathered its ranks' times above).
    char mesh[256] = "";
    for (int i = 0; i < wopts.num_axes; ++i)
      snprintf(mesh + strlen(mesh), sizeof mesh - strlen(mesh), "%s%s=%d", i ? "," : "", wopts.axes[i].name,
               wopts.axes[i].size);
    tpc_run_info_t info = {opts.module_path, run->fn->name, backend->name, module->numerics, mesh,
                           procs ? tprt_procs_launcher(procs) : "threads", run->fn->arena_bytes, opts.warmup,
                           opts.repeat, wall};
    tpc_rank_times_t* times = calloc((size_t)nranks, sizeof *times);
    if (!times) {
      status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
      goto fail;
    }
    for (int r = 0; r < nranks; ++r)
      times[r] = (tpc_rank_times_t){run->ranks[r].step_seconds, run->ranks[r].stats, run->ranks[r].steps_counted,
                                    run->ranks[r].device};
    tpc_report_steps(stderr, &info, times, nranks);
    if (opts.json) status = tpc_report_json(opts.json, &info, times, nranks);
    free(times);
    if (status) goto fail;
  }
  rc = 0;
  goto done;

fail:
  if (status && !tpc_signals_caught()) tpc_signals_await_after_peer(tprt_status_message(status), 300);
  if (tpc_signals_caught()) {  // one line, and the status a shell gives a process the signal ended
    rc = 128 + tpc_signals_caught();
    fprintf(stderr, "tpc-run: %s\n", tpc_signals_message());
    if (procs) tprt_procs_abort(procs, tpc_signals_message());
  } else {
    fprintf(stderr, "tpc-run: error: %s\n", tprt_status_message(status));
    if (procs) tprt_procs_abort(procs, tprt_status_message(status));
  }
  tprt_status_free(status);
done:
  if (procs && rc == 0 && (status = tprt_procs_finish(procs))) {
    fprintf(stderr, "tpc-run: error: %s\n", tprt_status_message(status));
    tprt_status_free(status);
    rc = 1;
  }
  free(outs);
  free(names);
  const int num_args = run->fn ? run->fn->num_args : 0, num_results = run->fn ? run->fn->num_results : 0;
  for (int a = 0; run->logical_args && a < num_args; ++a) tprt_allocator_free(alloc, run->logical_args[a]);
  for (int j = 0; run->logical_results && j < num_results; ++j) tprt_allocator_free(alloc, run->logical_results[j]);
  free(run->logical_args);
  free(run->logical_results);
  for (int r = 0; r < TPC_RUN_MAX_RANKS; ++r) {
    tpc_rank_state_t* st = &run->ranks[r];
    for (int a = 0; st->args && a < num_args; ++a) tprt_allocator_free(alloc, st->args[a]);
    for (int j = 0; st->results && j < num_results; ++j) tprt_allocator_free(alloc, st->results[j]);
    free(st->args);
    free(st->results);
    tprt_allocator_free(alloc, st->arena);
    free(st->step_seconds);
  }
  tpc_sources_close(&sources);
  tprt_world_destroy(world);
  tprt_procs_destroy(procs);
  tprt_module_unload(module, alloc);
  free(run);
  if (compiled) {
    unlink(so_path);
    rmdir(tmpdir);
  }
  return rc;
}
