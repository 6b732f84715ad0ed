// tpc-train in a process world (see tpc_train.h): one rank per process, launched by torchrun or
// mpirun (tprt_procs.h). Every process reads the token file and does rank 0's work between steps
// on its own copy of the trainer's state (tpc__leads), so what a world of threads shares in memory
// crosses the processes' mesh instead: each micro-batch's per-token loss and each evaluation's
// (tpc__rank_pieces), the step's FLOPs, signals and gradient norm (tpc__share_step), and the
// sharded arguments rank 0 writes into a checkpoint (tpc__gather_args). The exchanges go through
// tprt_procs_allgather, which every process calls at the same point of the same loop, between the
// world's collectives; a peer that failed or died ends them with its message.
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "tprt_allocator.h"
#include "tprt_procs.h"
#include "tprt_world.h"
#include "tpc_run_signal.h"
#include "tpc_train.h"
#include "tpc_run_world.h"

bool tpc__leads(const tpc_train_t* t, int r) { return r == 0 || t->procs != NULL; }

// Every process's |bytes| at |mine|, rank q's at |all| + q * bytes.
static tprt_status_t tpc__allgather(tpc_train_t* t, const void* mine, size_t bytes, char* all) {
  int n = tprt_procs_size(t->procs), members[TPC_RUN_MAX_RANKS];
  for (int q = 0; q < n; ++q) members[q] = q;
  void* got[TPC_RUN_MAX_RANKS];
  size_t sizes[TPC_RUN_MAX_RANKS];
  tprt_status_t s = tprt_procs_allgather(t->procs, members, n, t->self, mine, bytes, got, sizes);
  if (s) return s;
  for (int q = 0; q < n; ++q) {
    if (!s && sizes[q] != bytes)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes; expected %zu", q, sizes[q], bytes);
    if (!s) memcpy(all + (size_t)q * bytes, got[q], bytes);
    free(got[q]);
  }
  return s;
}

tprt_status_t tpc__rank_pieces(tpc_train_t* t, tprt_rank_t* rank, void** const* per_rank, size_t bytes,
                               const void** pieces, void** out_all) {
  int n = tprt_world_size(t->world);
  *out_all = NULL;
  if (!t->procs) {
    tprt_status_t s = tpc_meet(rank);
    for (int q = 0; !s && q < n && tprt_rank_index(rank) == 0; ++q) pieces[q] = per_rank[q] ? per_rank[q][0] : NULL;
    return s;
  }
  char* all = malloc((size_t)n * bytes + 1);
  if (!all) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  tprt_status_t s = tpc__allgather(t, per_rank[t->self][0], bytes, all);
  if (s) {
    free(all);
    return s;
  }
  for (int q = 0; q < n; ++q) pieces[q] = all + (size_t)q * bytes;
  *out_all = all;
  return NULL;
}

// What each process tells the others after a step.
typedef struct {
  int64_t model_flops;  // tprt_exec_stats' counter so far
  float norm;           // the step's gradient norm (rank 0's is the one every process reviews)
  int32_t signal;       // the signal this process caught, or 0
} tpc__step_note_t;

tprt_status_t tpc__share_step(tpc_train_t* t) {
  int n = tprt_procs_size(t->procs);
  tpc__step_note_t mine = {t->rank_flops[t->self], ((const float*)t->results[t->self][t->norm])[0],
                           tpc_signals_caught()};
  tpc__step_note_t all[TPC_RUN_MAX_RANKS];
  TPRT_RETURN_IF_ERROR(tpc__allgather(t, &mine, sizeof mine, (char*)all), "step %lld", (long long)t->step + 1);
  for (int q = 0; q < n; ++q) {
    t->rank_flops[q] = all[q].model_flops;
    if (!t->signal) t->signal = all[q].signal;  // the lowest rank's, the same on every process
  }
  t->norm_value = all[0].norm;
  return NULL;
}

// Whether a checkpoint takes argument |a| from every rank: a sharded one that is not fed to the
// ranks from a logical tensor (the tokens, a table cut into micro-batches: rank 0 holds those
// whole).
static bool tpc__gathered(const tpc_train_t* t, int a) { return t->fn->args[a].sharded && !t->micro[a].data; }

tprt_status_t tpc__gather_args(tpc_train_t* t) {
  const tprt_module_function_t* fn = t->fn;
  int n = tprt_procs_size(t->procs);
  size_t total = 0;
  for (int a = 0; a < fn->num_args; ++a)
    if (tpc__gathered(t, a)) total += tprt_tensor_bytes(&fn->args[a].layout);
  tprt_allocator_t alloc = tprt_allocator_system();
  void* got[2];
  size_t sizes[2];
  if (t->self != 0) {  // one message to rank 0 with every piece, in argument order
    char* msg = malloc(total + 1);
    if (!msg) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for the checkpoint");
    size_t at = 0;
    for (int a = 0; a < fn->num_args; ++a)
      if (tpc__gathered(t, a)) {
        memcpy(msg + at, t->args[t->self][a], tprt_tensor_bytes(&fn->args[a].layout));
        at += tprt_tensor_bytes(&fn->args[a].layout);
      }
    const int members[2] = {0, t->self};
    tprt_status_t s = tprt_procs_allgather(t->procs, members, 2, 1, msg, total, got, sizes);
    free(msg);
    if (!s) free(got[0]), free(got[1]);
    return tprt_status_annotate(s, "the checkpoint of step %lld: sending this rank's part to rank 0", (long long)t->step);
  }
  // Rank 0 hears from each other rank in turn (sending nothing back).
  for (int q = 1; q < n; ++q) {
    const int members[2] = {0, q};
    TPRT_RETURN_IF_ERROR(tprt_procs_allgather(t->procs, members, 2, 0, "", 0, got, sizes),
                         "the checkpoint of step %lld: receiving rank %d's part", (long long)t->step, q);
    tprt_status_t s = NULL;
    if (sizes[1] != total)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d sent %zu bytes of its checkpoint part; expected %zu", q,
                           sizes[1], total);
    if (!s && !t->args[q] && !(t->args[q] = calloc((size_t)fn->num_args + 1, sizeof(void*))))
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    size_t at = 0;
    for (int a = 0; !s && a < fn->num_args; ++a) {
      if (!tpc__gathered(t, a)) continue;
      size_t bytes = tprt_tensor_bytes(&fn->args[a].layout);
      if (!t->args[q][a]) s = tprt_allocator_malloc(alloc, bytes + 1, 64, &t->args[q][a]);
      if (!s) memcpy(t->args[q][a], (const char*)got[1] + at, bytes);
      at += bytes;
    }
    free(got[0]), free(got[1]);
    if (s) return s;
  }
  return NULL;
}

void tpc__drop_gathered(tpc_train_t* t) {
  for (int q = 0; q < TPC_RUN_MAX_RANKS; ++q)
    for (int a = 0; q != t->self && t->args[q] && a < t->fn->num_args; ++a)
      if (tpc__gathered(t, a)) {
        tprt_allocator_free(tprt_allocator_system(), t->args[q][a]);
        t->args[q][a] = NULL;
      }
}
