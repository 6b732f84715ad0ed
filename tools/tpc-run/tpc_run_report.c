// tpc-run's timing report (see tpc_run_report.h).
#define _POSIX_C_SOURCE 200809L  // fsync, fileno
#include "tpc_run_report.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tpc__cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// A rank's counters for one step: the sums over the steps they hold, divided by their number.
static int64_t tpc__per_step(int64_t total, int64_t steps) { return steps > 0 ? total / steps : total; }

static int64_t tpc__comm_total(const tprt_exec_stats_t* s, int which) {
  int64_t sum = 0;
  for (int k = 0; k < TPRT_COMM_KINDS; ++k)
    sum += which == 0 ? s->comm[k].calls : which == 1 ? s->comm[k].bytes_sent : s->comm[k].bytes_received;
  return sum;
}

void tpc_report_steps(FILE* out, const tpc_run_info_t* info, const tpc_rank_times_t* ranks, int nranks) {
  const int n = info->repeat;
  double* worst = malloc((size_t)n * sizeof *worst);
  if (!worst) {
    fprintf(out, "tpc-run: (no timing report: out of memory)\n");
    return;
  }
  // A step of the world lasts as long as its slowest rank.
  for (int i = 0; i < n; ++i) {
    worst[i] = 0;
    for (int r = 0; r < nranks; ++r)
      if (ranks[r].step_seconds[i] > worst[i]) worst[i] = ranks[r].step_seconds[i];
  }
  qsort(worst, (size_t)n, sizeof *worst, tpc__cmp_double);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += worst[i];
  int p90 = (9 * n + 9) / 10 - 1;  // the ceil(0.9 n)-th smallest
  double median = worst[n / 2];
  char warm[48] = "";
  if (info->warmup > 0) snprintf(warm, sizeof warm, " after %d warm-up%s", info->warmup, info->warmup == 1 ? "" : "s");
  char over[48] = "";
  if (nranks > 1) snprintf(over, sizeof over, " (the slowest of %d ranks each step)", nranks);
  fprintf(out,
          "tpc-run: %d step%s%s%s: min %.3f ms, median %.3f ms, p90 %.3f ms, mean %.3f ms (wall %.3f s); rank 0: %lld "
          "GEMM FLOPs/step\n",
          n, n == 1 ? "" : "s", warm, over, 1e3 * worst[0], 1e3 * median, 1e3 * worst[p90], 1e3 * sum / n,
          info->wall_seconds, (long long)tpc__per_step(ranks[0].stats.gemm_flops, ranks[0].steps_counted));
  free(worst);
  // Rates over the median step: the mean rank's GEMM work and collective bytes.
  double flops = 0, bytes = 0;
  for (int r = 0; r < nranks; ++r) {
    flops += (double)tpc__per_step(ranks[r].stats.gemm_flops, ranks[r].steps_counted);
    bytes += (double)tpc__per_step(tpc__comm_total(&ranks[r].stats, 1), ranks[r].steps_counted);
  }
  if (median > 0 && (flops > 0 || bytes > 0)) {
    fprintf(out, "tpc-run: GEMM %.3f TFLOP/s per rank (%.3f in all)", flops / nranks / median / 1e12,
            flops / median / 1e12);
    if (bytes > 0)
      fprintf(out, "; collectives %.3f GB/s bus bandwidth per rank, averaged over the step (%.0f bytes sent)",
              bytes / nranks / median / 1e9, bytes / nranks);
    fputc('\n', out);
  }
}

// Writes |s| as a JSON string.
static void tpc__json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (const unsigned char* p = (const unsigned char*)(s ? s : ""); *p; ++p) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static void tpc__json_records(FILE* f, const tpc_run_info_t* info, const tpc_rank_times_t* ranks, int nranks) {
  for (int i = 0; i < info->repeat; ++i) {
    for (int r = 0; r < nranks; ++r) {
      const tpc_rank_times_t* t = &ranks[r];
      fprintf(f, "{\"step\": %d, \"rank\": %d, \"seconds\": %.9f, \"gemm_flops\": %lld, \"comm_calls\": %lld, ", i, r,
              t->step_seconds[i], (long long)tpc__per_step(t->stats.gemm_flops, t->steps_counted),
              (long long)tpc__per_step(tpc__comm_total(&t->stats, 0), t->steps_counted));
      fprintf(f, "\"comm_bytes_sent\": %lld, \"comm_bytes_received\": %lld, \"arena_bytes\": %lld, \"world\": %d, ",
              (long long)tpc__per_step(tpc__comm_total(&t->stats, 1), t->steps_counted),
              (long long)tpc__per_step(tpc__comm_total(&t->stats, 2), t->steps_counted), (long long)info->arena_bytes,
              nranks);
      fprintf(f, "\"warmup\": %d, \"mesh\": ", info->warmup);
      tpc__json_string(f, info->mesh);
      fprintf(f, ", \"numerics\": ");
      tpc__json_string(f, info->numerics);
      fprintf(f, ", \"backend\": ");
      tpc__json_string(f, info->backend);
      fprintf(f, ", \"device\": ");
      tpc__json_string(f, t->device);
      fprintf(f, ", \"launcher\": ");
      tpc__json_string(f, info->launcher);
      fprintf(f, ", \"module\": ");
      tpc__json_string(f, info->module);
      fprintf(f, ", \"function\": ");
      tpc__json_string(f, info->function);
      fprintf(f, "}\n");
    }
  }
}

tprt_status_t tpc_report_json(const char* path, const tpc_run_info_t* info, const tpc_rank_times_t* ranks,
                              int nranks) {
  if (!strcmp(path, "-")) {
    tpc__json_records(stdout, info, ranks, nranks);
    return fflush(stdout) ? tprt_make_status(TPRT_STATUS_UNAVAILABLE, "writing the --json records to stdout failed") : NULL;
  }
  // Written next to the destination and renamed over it: never a half-written file in its place.
  size_t len = strlen(path) + 32;
  char* tmp = malloc(len);
  if (!tmp) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  snprintf(tmp, len, "%s.partial.%ld", path, (long)getpid());
  FILE* f = fopen(tmp, "wb");
  if (!f) {
    tprt_status_t s = tprt_make_status(TPRT_STATUS_UNAVAILABLE, "%s: cannot create: %s", tmp, strerror(errno));
    free(tmp);
    return s;
  }
  tpc__json_records(f, info, ranks, nranks);
  bool ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
  ok = fclose(f) == 0 && ok;
  tprt_status_t s = NULL;
  if (!ok || rename(tmp, path) != 0) {
    s = tprt_make_status(TPRT_STATUS_UNAVAILABLE, "%s: cannot write: %s", path, strerror(errno));
    unlink(tmp);
  }
  free(tmp);
  return s;
}

static char tpc__host_cpu[160];

// Fills tpc__host_cpu once (pthread_once): every rank thread asks for it at once.
static void tpc__read_host_cpu(void) {
  char* name = tpc__host_cpu;
  snprintf(name, sizeof tpc__host_cpu, "CPU");
  FILE* f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    const char* colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    colon += 1 + (colon[1] == ' ');
    snprintf(name, sizeof tpc__host_cpu, "CPU: %.*s", (int)strcspn(colon, "\n"), colon);
    break;
  }
  if (f) fclose(f);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t used = strlen(name);
  if (cores > 0) snprintf(name + used, sizeof tpc__host_cpu - used, ", %ld cores", cores);
}

const char* tpc_report_host_cpu(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, tpc__read_host_cpu);
  return tpc__host_cpu;
}
