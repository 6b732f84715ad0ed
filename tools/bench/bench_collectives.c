// tprt-bench-collectives: the CUDA backend's canonical all-reduce and reduce-scatter (NCCL data
// movement + the tree-sum kernel, bitwise the CPU backend's) against NCCL's own ncclAllReduce /
// ncclReduceScatter (the backend's order "any"), measured in the same run on the same buffers,
// for f32 messages of 1 KB to 256 MB per rank on every GPU of the machine (one rank thread per GPU).
//
// Bus bandwidth as nccl-tests reports it: all-reduce busbw = S/t · 2(g-1)/g, reduce-scatter busbw =
// S/t · (g-1)/g, S the per-rank input bytes, t the mean time of one call after warm-up. The last
// column is canonical time / NCCL time (> 1: canonical is slower).
//
// Usage: tprt-bench-collectives [--ranks N (default: all GPUs)] [--max-mb M (default 256)]
// (or the same two numbers as positional arguments)
// Needs libtprt_backend_cuda.so next to it (../lib) or in TPRT_BACKEND_CUDA; NCCL_NVLS_ENABLE=0 is
// set before any NCCL call (house rule: NVLink multicast stays off).
#define _GNU_SOURCE  // readlink, popen, setenv, clock_gettime
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tpc_cli.h"
#include "tprt_backend.h"
#include "tprt_world.h"

#define MAX_SIZES 32

typedef struct {
  const tprt_backend_t* b;
  int64_t sizes[MAX_SIZES];  // per-rank input bytes
  int num_sizes;
  double us[MAX_SIZES][4];  // all_reduce canonical, any; reduce_scatter canonical, any (rank 0)
} bench_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tprt_status_t time_op(const tprt_backend_t* b, tprt_rank_t* rank, int which, tprt_tensor_t* in,
                             tprt_tensor_t* out, tprt_tensor_t* out_rs, double* us) {
  uint32_t mask = 1u;  // the world's single axis
  int iters = in->dims[0] * 4 > (64 << 20) ? 5 : 20;
  for (int i = -3; i < iters; ++i) {  // three warm-up calls (the first creates the communicator)
    if (i == 0) {
      TPRT_RETURN_IF_ERROR(b->synchronize(), "sync");
      TPRT_RETURN_IF_ERROR(tprt_barrier(rank, mask), "barrier");
      *us = now();
    }
    tprt_order_t order = (which & 1) ? TPRT_ORDER_ANY : TPRT_ORDER_CANONICAL;
    tprt_status_t s = which < 2 ? b->all_reduce(rank, mask, in, out, order)
                                : b->reduce_scatter(rank, mask, in, out_rs, 0, order);
    if (s) return s;
  }
  TPRT_RETURN_IF_ERROR(b->synchronize(), "sync");
  *us = (now() - *us) * 1e6 / iters;
  return NULL;
}

static tprt_status_t rank_main(tprt_rank_t* rank, void* user) {
  bench_t* B = user;
  const tprt_backend_t* b = B->b;
  TPRT_RETURN_IF_ERROR(b->rank_begin(rank), "rank_begin");
  int g = tprt_rank_world_size(rank);
  int64_t max = B->sizes[B->num_sizes - 1];
  void *in = NULL, *out = NULL, *out_rs = NULL;
  tprt_status_t s = b->alloc((size_t)max, &in);
  if (!s) s = b->alloc((size_t)max, &out);
  if (!s) s = b->alloc((size_t)max / (size_t)g + 4, &out_rs);
  for (int k = 0; k < B->num_sizes && !s; ++k) {
    int64_t n = B->sizes[k] / 4;
    n -= n % g;  // reduce-scatter splits the elements evenly
    int64_t dn[1] = {n}, dr[1] = {n / g};
    tprt_tensor_t ti = tprt_tensor_make(in, TPRT_DTYPE_F32, 1, dn), to = tprt_tensor_make(out, TPRT_DTYPE_F32, 1, dn);
    tprt_tensor_t tr = tprt_tensor_make(out_rs, TPRT_DTYPE_F32, 1, dr);
    for (int w = 0; w < 4 && !s; ++w) {
      double us = 0;
      s = time_op(b, rank, w, &ti, &to, &tr, &us);
      if (!s && tprt_rank_index(rank) == 0) B->us[k][w] = us;
    }
  }
  b->free(in);
  b->free(out);
  b->free(out_rs);
  b->rank_end(rank);
  return s;
}

enum { OPT_RANKS, OPT_MAX_MB };
static const tpc_cli_option_t kOptions[] = {
    {"ranks", 0, "N", "Ranks, one GPU each (default: every GPU of the machine)", OPT_RANKS},
    {"max-mb", 0, "M", "Largest per-rank message in MiB (default 256); sizes go 1 KiB, 4 KiB, ... up to it",
     OPT_MAX_MB},
    {NULL, 0, NULL, NULL, 0}};

static void bench_more_help(FILE* out) {
  fprintf(out,
          "Canonical all-reduce and reduce-scatter (bitwise the CPU backend's) against NCCL's own, f32, bus\n"
          "bandwidth as nccl-tests reports it. Loads libtprt_backend_cuda.so from ../lib or TPRT_BACKEND_CUDA.\n"
          "The two numbers may also be given as positional arguments: tprt-bench-collectives [N [M]].\n");
}

static const tpc_cli_t kCli = {"tprt-bench-collectives", "the CUDA backend's collectives against NCCL's",
                               "[--ranks N] [--max-mb M]", kOptions, false, NULL, bench_more_help};

int main(int argc, char** argv) {
  uint64_t ranks_opt = 0, max_mb_opt = 256;
  int positional = 0;
  tpc_cli_state_t st = {0};
  for (int id; (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END;) {
    if (id == TPC_CLI_EXIT) return 0;
    if (id == TPC_CLI_ERROR) return 2;
    if (id == TPC_CLI_POSITIONAL && positional < 2) {
      id = positional++ == 0 ? OPT_RANKS : OPT_MAX_MB;
      st.option = &kOptions[id];  // errors name the option the number stands for
    }
    if (id == TPC_CLI_POSITIONAL) {
      tpc_cli_error(&kCli, "unexpected argument '%s' (see --help)", st.value);
      return 2;
    }
    if (id == OPT_RANKS && !tpc_cli_u64(&kCli, &st, 1, 1024, "a number of ranks, 1..1024", &ranks_opt)) return 2;
    if (id == OPT_MAX_MB && !tpc_cli_u64(&kCli, &st, 1, 1 << 20, "a size in MiB, 1..1048576", &max_mb_opt)) return 2;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  char self[PATH_MAX], path[PATH_MAX + 64];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  self[len > 0 ? len : 0] = '\0';
  char* slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  snprintf(path, sizeof path, "%s/../lib/libtprt_backend_cuda.so", self);
  const char* lib = getenv("TPRT_BACKEND_CUDA") ? getenv("TPRT_BACKEND_CUDA") : path;
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "tprt-bench-collectives: cannot load %s: %s\n", lib, dlerror());
    return 1;
  }
  const tprt_backend_t* (*entry)(void) = (const tprt_backend_t* (*)(void))dlsym(h, "tprt_backend_cuda");
  bench_t B;
  memset(&B, 0, sizeof B);
  B.b = entry();
  int ranks = (int)ranks_opt;
  if (ranks <= 0) {
    FILE* p = popen("nvidia-smi -L 2>/dev/null | wc -l", "r");
    if (!p || fscanf(p, "%d", &ranks) != 1) ranks = 1;
    if (p) pclose(p);
  }
  int64_t max_mb = (int64_t)max_mb_opt;
  for (int64_t s = 1024; s <= max_mb * (1 << 20) && B.num_sizes < MAX_SIZES; s *= 4) B.sizes[B.num_sizes++] = s;
  tprt_world_options_t wo;
  memset(&wo, 0, sizeof wo);
  wo.num_axes = 1;
  wo.axes[0] = (tprt_mesh_axis_t){"world", ranks};
  tprt_world_t* world = NULL;
  tprt_status_t s = tprt_world_create(&wo, tprt_allocator_system(), &world);
  if (!s) s = tprt_world_run(world, rank_main, &B);
  if (s) {
    fprintf(stderr, "tprt-bench-collectives: %s\n", tprt_status_message(s));
    return 1;
  }
  tprt_world_destroy(world);
  double g = ranks;
  printf("collectives: %d ranks, f32, per-rank input size; busbw in GB/s (nccl-tests convention)\n", ranks);
  printf("%10s | %12s %12s %8s | %12s %12s %8s\n", "size", "AR canon", "AR nccl", "ratio", "RS canon", "RS nccl",
         "ratio");
  for (int k = 0; k < B.num_sizes; ++k) {
    double S = (double)(B.sizes[k] / 4 - (B.sizes[k] / 4) % ranks) * 4;
    double ar = 2 * (g - 1) / g, rs = (g - 1) / g;
    char size[32];
    if (S >= (1 << 20))
      snprintf(size, sizeof size, "%.0f MB", S / (1 << 20));
    else
      snprintf(size, sizeof size, "%.0f KB", S / 1024);
    printf("%10s | %12.2f %12.2f %7.2fx | %12.2f %12.2f %7.2fx\n", size, S / B.us[k][0] * 1e-3 * ar,
           S / B.us[k][1] * 1e-3 * ar, B.us[k][0] / B.us[k][1], S / B.us[k][2] * 1e-3 * rs, S / B.us[k][3] * 1e-3 * rs,
           B.us[k][2] / B.us[k][3]);
  }
  return 0;
}
