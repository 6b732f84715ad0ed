// tpc-run's timing report: the step time over ranks, GEMM TFLOP/s, collective bandwidth, and
// the per-step, per-rank JSON records of --json.
#ifndef TPC_RUN_REPORT_H_
#define TPC_RUN_REPORT_H_

#include <stdint.h>
#include <stdio.h>

#include "tprt_exec.h"
#include "tprt_status.h"

/// One rank's timed steps.
typedef struct tpc_rank_times_t {
  const double* step_seconds;  // one per timed step
  tprt_exec_stats_t stats;     // the counters of |steps_counted| steps (added up)
  int64_t steps_counted;
  const char* device;          // what the backend says the rank ran on
} tpc_rank_times_t;

/// What the records say about the run besides the times.
typedef struct tpc_run_info_t {
  const char* module;
  const char* function;
  const char* backend;
  const char* numerics;
  const char* mesh;  // "tp=2,dp=2", or "world=N"
  const char* launcher;  // "threads", "mpirun", "torchrun"
  int64_t arena_bytes;
  int warmup;
  int repeat;
  double wall_seconds;
} tpc_run_info_t;

/// Prints the summary on |out|: per step the slowest rank's time (min, median, p90, mean over the
/// steps), then GEMM TFLOP/s and the collectives' bus bandwidth per rank (bytes under the
/// ring/direct model over the median step time).
void tpc_report_steps(FILE* out, const tpc_run_info_t* info, const tpc_rank_times_t* ranks, int nranks);

/// Writes one JSON object per line for each timed step and rank to |path| ("-": stdout), through a
/// temporary file renamed into place.
tprt_status_t tpc_report_json(const char* path, const tpc_run_info_t* info, const tpc_rank_times_t* ranks, int nranks)
    TPRT_MUST_USE_RESULT;

/// The host CPU's model name (/proc/cpuinfo), for the records of the CPU backend; a static buffer.
const char* tpc_report_host_cpu(void);

#endif  // TPC_RUN_REPORT_H_
