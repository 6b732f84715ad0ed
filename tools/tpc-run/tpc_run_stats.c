// tpc-run's --stats table (see tpc_run_stats.h).
#include "tpc_run_stats.h"

#include <stdio.h>

// --stats: one line per rank for the GEMM work, then one per collective family it used; per
// step (the counters add up over --repeat steps).
void tpc__print_stats(const tpc_run_t* run, int nranks) {
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
  if (fn->gtp_prefetch >= 0)
    printf("stats: gtp: each weight's all-gather starts %lld contraction%s before its use (tp-gtp's schedule: "
           "--gtp-prefetch, else its cost model)\n",
           (long long)fn->gtp_prefetch, fn->gtp_prefetch == 1 ? "" : "s");
}
