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
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tprt_backend.h"
#include "tprt_cpu_kernels.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_safetensors.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run_args.h"
#include "tpc_run_load.h"
#include "tpc_run_report.h"
#include "tpc_run_signal.h"
#include "tprt_checkpoint.h"

typedef struct {
  void** args;     // the function's num_args host buffers
  void** results;  // its num_results host buffers
  void* arena;
  double* step_seconds;  // --repeat timed steps
  char device[160];      // what the rank ran on (the backend's describe, or the host CPU)
  tprt_exec_stats_t stats;
  int64_t steps_counted;  // the steps whose calls the counters hold (--graph: the warm-up step)
} tpc_rank_state_t;

typedef struct {
  const tpc_run_options_t* opts;
  const tprt_backend_t* backend;
  const tprt_module_t* module;
  const tprt_module_function_t* fn;
  tpc_rank_state_t ranks[TPC_RUN_MAX_RANKS];
  // Logical (whole) arguments and results: what checkpoints hold, what --hash and --outputs see.
  void** logical_args;     // num_args
  void** logical_results;  // num_results
} tpc_run_t;

// The logical tensor of a module argument or result (its local layout when not sharded), and the
// shard that maps it to ranks.
static tprt_status_t tpc__logical(const tprt_module_tensor_t* mt, const tprt_world_t* world, tprt_tensor_t* out,
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


// The directory of this executable, with a trailing slash.
static void tpc__self_dir(char* out, size_t size) {
  ssize_t n = readlink("/proc/self/exe", out, size - 1);
  out[n > 0 ? n : 0] = '\0';
  char* slash = strrchr(out, '/');
  if (slash) slash[1] = '\0';
}

// The backend named by --backend: the CPU one, or the CUDA plugin (dlopen), which is only built
// where nvcc and NCCL exist and only runs where GPUs do.
static const tprt_backend_t* tpc__load_backend(const char* name) {
  if (!name || !strcmp(name, "cpu")) return tprt_backend_cpu();
  char dir[PATH_MAX], candidates[2][PATH_MAX + 64];
  tpc__self_dir(dir, sizeof dir);
  const char* env = getenv("TPRT_BACKEND_CUDA");
  snprintf(candidates[0], sizeof candidates[0], "%s../lib/libtprt_backend_cuda.so", dir);
  snprintf(candidates[1], sizeof candidates[1], "%slibtprt_backend_cuda.so", dir);
  void* handle = NULL;
  const char* tried = env ? env : candidates[0];
  char error[512] = "";
  if (env) {
    handle = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!handle) snprintf(error, sizeof error, "%s", dlerror());
  }
  for (int i = 0; !env && !handle && i < 2; ++i) {
    handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (!handle && i == 0) snprintf(error, sizeof error, "%s", dlerror());
  }
  if (!handle) {
    fprintf(stderr,
            "tpc-run: error: --backend cuda: cannot load %s (%s); it is built where nvcc and NCCL exist "
            "(build/lib), or set TPRT_BACKEND_CUDA to its path\n",
            tried, error);
    return NULL;
  }
  const tprt_backend_t* (*entry)(void) = (const tprt_backend_t* (*)(void))dlsym(handle, "tprt_backend_cuda");
  if (!entry) {
    fprintf(stderr, "tpc-run: error: --backend cuda: %s has no tprt_backend_cuda\n", tried);
    return NULL;
  }
  return entry();
}

// Compiles a .mlir with the tpc-compile that sits next to this executable.
static int tpc__compile(const tpc_run_options_t* o, const char* mlir, char* out_so, size_t size, char* tmpdir) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "tpc-run: error: cannot locate tpc-compile\n");
    return 0;
  }
  self[n] = '\0';
  char* slash = strrchr(self, '/');
  if (slash) slash[1] = '\0';
  char compiler[PATH_MAX + 16];
  snprintf(compiler, sizeof compiler, "%stpc-compile", self);
  if (!mkdtemp(tmpdir)) {
    fprintf(stderr, "tpc-run: error: cannot create a temporary directory: %s\n", strerror(errno));
    return 0;
  }
  snprintf(out_so, size, "%s/module.so", tmpdir);
  pid_t pid = fork();
  if (pid == 0) {
    char pipeline[128], mesh[128], numerics[64], strategy[64];
    char* argv[10] = {compiler, (char*)mlir, "-o", out_so, pipeline};
    int argc = 5;
    snprintf(pipeline, sizeof pipeline, "--pipeline=%s", o->pipeline ? o->pipeline : "lower-cpu");
    snprintf(mesh, sizeof mesh, "--mesh=%s", o->mesh ? o->mesh : "");
    snprintf(numerics, sizeof numerics, "--numerics=%s", o->numerics ? o->numerics : "");
    snprintf(strategy, sizeof strategy, "--strategy=%s", o->strategy ? o->strategy : "");
    if (o->mesh) argv[argc++] = mesh;
    if (o->numerics) argv[argc++] = numerics;
    if (o->strategy) argv[argc++] = strategy;
    if (o->sequence_parallel) argv[argc++] = "--sequence-parallel";
    argv[argc] = NULL;
    execv(compiler, argv);
    fprintf(stderr, "tpc-run: error: cannot run %s: %s\n", compiler, strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static uint64_t tpc__fnv1a(const void* data, size_t n) {
  const unsigned char* p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// The Philox stream of an argument: a hash of its name, so that every sharding and every
// rank derives the same values for the same logical tensor.
static uint64_t tpc__stream_of(const char* name) { return tpc__fnv1a(name, strlen(name)); }

// Fills argument |t| named |name|, found in no checkpoint, from Philox.
static tprt_status_t tpc__init_arg(const tpc_run_options_t* o, const tpc_sources_t* src, const char* name,
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
  return tprt_cpu_fill_philox(&view, o->seed, tpc__stream_of(name), lo, hi, 0, 0, cols);
}

// Writes |n| tensors to |path|: one safetensors file, or an index and its files (a .json name).
static tprt_status_t tpc__write(const tpc_run_options_t* o, const char* path, int n, const char** names,
                                const tprt_tensor_t* tensors) {
  size_t len = strlen(path);
  if (len > 5 && strcmp(path + len - 5, ".json") == 0)
    return tprt_checkpoint_write(path, n, names, tensors, o->max_file_size);
  return tprt_safetensors_write(path, n, names, tensors, NULL);
}

// Device buffers of one rank on a backend whose memory is not the host's.
typedef struct {
  void** args;
  void** results;
  void* arena;
} tpc_device_state_t;

static void tpc__device_free(const tprt_backend_t* b, const tpc_run_t* run, tpc_device_state_t* d) {
  for (int a = 0; d->args && a < run->fn->num_args; ++a) b->free(d->args[a]);
  for (int j = 0; d->results && j < run->fn->num_results; ++j) b->free(d->results[j]);
  b->free(d->arena);
  free(d->args);
  free(d->results);
}

// Allocates the rank's arena, arguments and results on the device and uploads the arguments.
static tprt_status_t tpc__device_setup(const tprt_backend_t* b, const tpc_run_t* run, const tpc_rank_state_t* st,
                                       tpc_device_state_t* d) {
  d->args = calloc((size_t)run->fn->num_args + 1, sizeof *d->args);
  d->results = calloc((size_t)run->fn->num_results + 1, sizeof *d->results);
  if (!d->args || !d->results) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  TPRT_RETURN_IF_ERROR(b->alloc((size_t)run->fn->arena_bytes, &d->arena), "arena of %lld bytes",
                       (long long)run->fn->arena_bytes);
  for (int a = 0; a < run->fn->num_args; ++a) {
    size_t bytes = tprt_tensor_bytes(&run->fn->args[a].layout);
    TPRT_RETURN_IF_ERROR(b->alloc(bytes, &d->args[a]), "argument %s", run->fn->args[a].name);
    TPRT_RETURN_IF_ERROR(b->to_device(d->args[a], st->args[a], bytes), "uploading %s", run->fn->args[a].name);
  }
  for (int j = 0; j < run->fn->num_results; ++j)
    TPRT_RETURN_IF_ERROR(b->alloc(tprt_tensor_bytes(&run->fn->results[j].layout), &d->results[j]), "result %s",
                         run->fn->results[j].name);
  return NULL;
}

// |a| - |b|: the counters of the steps after the warm-up.
static tprt_exec_stats_t tpc__stats_minus(const tprt_exec_stats_t* a, const tprt_exec_stats_t* b) {
  tprt_exec_stats_t d = *a;
  d.ops -= b->ops;
  d.gemm_flops -= b->gemm_flops;
  for (int k = 0; k < TPRT_COMM_KINDS; ++k) {
    d.comm[k].calls -= b->comm[k].calls;
    d.comm[k].bytes_sent -= b->comm[k].bytes_sent;
    d.comm[k].bytes_received -= b->comm[k].bytes_received;
  }
  return d;
}

static tprt_status_t tpc__rank_main(tprt_rank_t* rank, void* user) {
  tpc_run_t* run = user;
  int r = tprt_rank_index(rank);
  tpc_rank_state_t* st = &run->ranks[r];
  const tprt_backend_t* b = run->backend;
  bool device = b != tprt_backend_cpu();
  tpc_device_state_t dev = {NULL, NULL, NULL};
  if (device && b->rank_begin) TPRT_RETURN_IF_ERROR(b->rank_begin(rank), "rank %d: %s backend", r, b->name);
  tprt_status_t status = device ? tpc__device_setup(b, run, st, &dev) : NULL;
  void** args = device ? dev.args : st->args;
  void** results = device ? dev.results : st->results;
  void* arena = device ? dev.arena : st->arena;
  tprt_exec_t* exec = NULL;
  if (!status) status = tprt_exec_create(rank, run->module->chunks, tprt_rank_allocator(rank), &exec);
  if (exec) {
    tprt_exec_set_count_only(exec, run->opts->count_only);
    tprt_exec_set_backend(exec, b);
  }
  if (!status && device && b->describe) status = b->describe(st->device, sizeof st->device);
  if (!status && !(device && b->describe)) snprintf(st->device, sizeof st->device, "%s", tpc_report_host_cpu());
  // --warmup untimed steps, then --repeat timed ones; the counters keep the timed steps only.
  const int warmup = run->opts->warmup, steps = warmup + run->opts->repeat;
  double last_report = tpc_now();
  st->steps_counted = run->opts->repeat;
  tprt_exec_stats_t base = {0};
  if (!status && run->opts->graph) {
    // A first step (it creates communicators and sizes scratch buffers), then one captured
    // step; the --warmup and timed steps below replay the graph.
    int32_t rc = run->fn->entry(exec, args, results, arena);
    if (!rc) status = b->synchronize();
    if (rc) status = tprt_exec_take_status(exec);
    if (exec) st->stats = *tprt_exec_stats(exec);
    st->steps_counted = 1;
    void* graph = NULL;
    if (!status) status = b->graph_begin();
    if (!status) {
      rc = run->fn->entry(exec, args, results, arena);
      tprt_status_t end = b->graph_end(&graph);
      status = rc ? tprt_exec_take_status(exec) : end;
      if (rc) tprt_status_free(end);
    }
    for (int i = 0; i < steps && !status; ++i) {
      double t0 = tpc_now();
      status = b->graph_launch(graph);
      if (!status) status = b->synchronize();
      if (i >= warmup) st->step_seconds[i - warmup] = tpc_now() - t0;
    }
    if (graph) b->graph_destroy(graph);
  }
  for (int i = 0; i < steps && !status && !run->opts->graph; ++i) {
    if (i == warmup && exec) base = *tprt_exec_stats(exec);
    double t0 = tpc_now();
    int32_t rc = run->fn->entry(exec, args, results, arena);
    if (!rc && device) status = b->synchronize();  // the step's time includes the device's work
    if (i >= warmup) st->step_seconds[i - warmup] = tpc_now() - t0;
    if (rc) {
      status = tprt_exec_take_status(exec);
      if (!status) status = tprt_make_status(TPRT_STATUS_INTERNAL, "step failed with code %d", rc);
    }
    // Long runs report progress every few seconds (rank 0 speaks for the world).
    if (r == 0 && tpc_now() - last_report > 5.0 && i + 1 < steps) {
      fprintf(stderr, "tpc-run: step %d/%d%s\n", i + 1, steps, i < warmup ? " (warm-up)" : "");
      last_report = tpc_now();
    }
    // A signal cancels the world (tpc_run_signal.h): stop between steps, even without collectives.
    if (!status && i + 1 < steps) status = tprt_rank_check_abort(rank);
  }
  // A failed step ends the world now, before the clean-up below (which may wait on the device):
  // the other ranks, threads or processes, learn of it at once instead of at their timeout.
  if (status) {
    tprt_rank_fail(rank, status);
    status = NULL;  // tprt_world_run reports the failure recorded by tprt_rank_fail
  }
  if (exec && !run->opts->graph) st->stats = tpc__stats_minus(tprt_exec_stats(exec), &base);
  tprt_exec_destroy(exec);
  for (int j = 0; device && !status && j < run->fn->num_results; ++j)
    status = b->to_host(st->results[j], dev.results[j], tprt_tensor_bytes(&run->fn->results[j].layout));
  if (device) {
    tpc__device_free(b, run, &dev);
    if (b->rank_end) b->rank_end(rank);
  }
  return status;
}

// --stats: one line per rank for the GEMM work, then one per collective family it used; per
// step (the counters add up over --repeat steps).
static void tpc__print_stats(const tpc_run_t* run, int nranks) {
  int64_t steps = run->ranks[0].steps_counted > 0 ? run->ranks[0].steps_counted : 1;
  printf("stats: per step; collective bytes under the ring/direct schedule model (docs/runtime.md)\n");
  printf("stats: %-5s %-15s %6s %14s %14s %16s\n", "rank", "what", "calls", "bytes_sent", "bytes_received",
         "gemm_flops");
  for (int r = 0; r < nranks; ++r) {
    const tprt_exec_stats_t* st = &run->ranks[r].stats;
    printf("stats: %-5d %-15s %6s %14s %14s %16lld\n", r, "gemm", "-", "-", "-",
           (long long)(st->gemm_flops / steps));
    for (int k = 0; k < TPRT_COMM_KINDS; ++k) {
      const tprt_comm_stats_t* c = &st->comm[k];
      if (!c->calls) continue;
      printf("stats: %-5d %-15s %6lld %14lld %14lld %16s\n", r, tprt_comm_kind_name((tprt_comm_kind_t)k),
             (long long)(c->calls / steps), (long long)(c->bytes_sent / steps),
             (long long)(c->bytes_received / steps), "-");
    }
  }
  // Memory of one rank (every rank of a module has the same shapes): the planned arena against
  // its lower bound, the most intermediate bytes live at one op, plus the argument and result
  // buffers (weights, inputs, gradients, optimizer state: whatever the function takes and returns).
  const tprt_module_function_t* fn = run->fn;
  int64_t args = 0, results = 0;
  for (int a = 0; a < fn->num_args; ++a) args += (int64_t)tprt_tensor_bytes(&fn->args[a].layout);
  for (int j = 0; j < fn->num_results; ++j) results += (int64_t)tprt_tensor_bytes(&fn->results[j].layout);
  printf("stats: memory per rank: arena %lld bytes", (long long)fn->arena_bytes);
  if (fn->arena_live_peak_bytes > 0)
    printf(" (live peak %lld, %.3fx of it)", (long long)fn->arena_live_peak_bytes,
           (double)fn->arena_bytes / (double)fn->arena_live_peak_bytes);
  printf(", arguments %lld, results %lld, total %lld bytes\n", (long long)args, (long long)results,
         (long long)(fn->arena_bytes + args + results));
}

// A process world: every rank's results (and step times) reach rank 0, which then holds them as
// a thread world would (run->ranks[r].results). An all-gather of each result over the processes.
static tprt_status_t tpc__gather_results(tpc_run_t* run, tprt_procs_t* procs, tprt_allocator_t alloc) {
  int n = tprt_procs_size(procs), self = tprt_procs_rank(procs), members[TPC_RUN_MAX_RANKS];
  for (int r = 0; r < n; ++r) members[r] = r;
  void* got[TPC_RUN_MAX_RANKS];
  size_t sizes[TPC_RUN_MAX_RANKS];
  for (int j = 0; j < run->fn->num_results && !run->opts->count_only; ++j) {
    size_t bytes = tprt_tensor_bytes(&run->fn->results[j].layout);
    TPRT_RETURN_IF_ERROR(tprt_procs_allgather(procs, members, n, self, run->ranks[self].results[j], bytes, got, sizes),
                         "gathering result %s", run->fn->results[j].name);
    tprt_status_t s = NULL;
    for (int r = 0; r < n; ++r) {
      if (!s && r != self) {
        if (sizes[r] != bytes)
          s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes of result %s; expected %zu", r, sizes[r],
                               run->fn->results[j].name, bytes);
        else if (!(s = tprt_allocator_malloc(alloc, bytes, 64, &run->ranks[r].results[j])))
          memcpy(run->ranks[r].results[j], got[r], bytes);
      }
      free(got[r]);
    }
    if (s) return s;
  }
  return NULL;
}

// Sends this process's step times, counters and device to every process, so that rank 0 reports
// the world's steps (the slowest rank's time) and every rank's counters.
static tprt_status_t tpc__gather_times(tpc_run_t* run, tprt_procs_t* procs) {
  int n = tprt_procs_size(procs), self = tprt_procs_rank(procs), members[TPC_RUN_MAX_RANKS];
  for (int r = 0; r < n; ++r) members[r] = r;
  const tpc_rank_state_t* mine = &run->ranks[self];
  const size_t times = (size_t)run->opts->repeat * sizeof(double);
  const size_t bytes = sizeof mine->stats + sizeof mine->steps_counted + sizeof mine->device + times;
  char* msg = malloc(bytes);
  if (!msg) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  memcpy(msg, &mine->stats, sizeof mine->stats);
  memcpy(msg + sizeof mine->stats, &mine->steps_counted, sizeof mine->steps_counted);
  memcpy(msg + sizeof mine->stats + sizeof mine->steps_counted, mine->device, sizeof mine->device);
  memcpy(msg + bytes - times, mine->step_seconds, times);
  void* got[TPC_RUN_MAX_RANKS];
  size_t sizes[TPC_RUN_MAX_RANKS];
  tprt_status_t s = tprt_procs_allgather(procs, members, n, self, msg, bytes, got, sizes);
  free(msg);
  TPRT_RETURN_IF_ERROR(s, "gathering the step times");
  for (int r = 0; r < n; ++r) {
    tpc_rank_state_t* st = &run->ranks[r];
    if (!s && r != self && sizes[r] != bytes)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes of step times; expected %zu", r, sizes[r], bytes);
    if (!s && r != self && !st->step_seconds && !(st->step_seconds = malloc(times)))
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    if (!s && r != self) {
      const char* m = got[r];
      memcpy(&st->stats, m, sizeof st->stats);
      memcpy(&st->steps_counted, m + sizeof st->stats, sizeof st->steps_counted);
      memcpy(st->device, m + sizeof st->stats + sizeof st->steps_counted, sizeof st->device);
      st->device[sizeof st->device - 1] = '\0';
      memcpy(st->step_seconds, m + bytes - times, times);
    }
    free(got[r]);
  }
  return s;
}

int main(int argc, char** argv) {
  tpc_run_options_t opts;
  memset(&opts, 0, sizeof opts);
  int parsed = tpc_run_parse_args(argc, argv, &opts);
  if (parsed <= 0) return parsed == 0 ? 0 : 2;
  tpc_signals_install();
  // The CUDA backend reads the knob when its first rank begins (tprt_params.h), after this.
  if (opts.share_gpus) setenv("TPRT_CUDA_SHARE_DEVICES", "1", 1);

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
