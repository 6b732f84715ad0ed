// tprt-fused-norm-check: the fused all-reduce + residual add + RMSNorm kernel
// (kernels/cuda/fused_norm.cu) against the composition it must equal bit for bit:
// tprt_cuda_reduce_staged of every member's partial, tprt_cuda_add of the residual, and
// tprt_cuda_rmsnorm. It runs R ranks as threads, rank i on GPU i mod G. Ranks that share a GPU
// address each other's memory directly; other GPUs need peer access. Each rank has its own stream
// and registered region; the flags are shared through a host table.
//
// Every case runs on every rank at once:
//   - T tokens x H hidden over 1-8192 tokens (one block's rows, several rows per block, a grid
//     capped by residency) and H 256-8192, plus a ragged 1000;
//   - partial bf16 or f32, residual bf16 or f32;
//   - canonical or increasing-rank order.
// Each rank's outputs must equal the composition's, computed on rank 0's GPU from copies of every
// partial. Then every rank captures one call as a CUDA graph, and three replays with new partials
// must each equal the composition again: the flags and epochs advance on the device.
//
// A hang (a protocol bug) is reported after 20 s instead of blocking.
// Usage: tprt-fused-norm-check [ranks (default 4)] [rounds (default 2)].
// Exit status: 0 every case bitwise, 1 a mismatch or failure, 77 no GPU.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cuda.cuh"  // TPC_BENCH_CUDA, tpc_bench_ok
#include "tprt_cuda_kernels.h"
#include "tprt_numerics.h"

#define FN_CHECK(expr) TPC_BENCH_CUDA(expr)
#define fn_status(s, what) tpc_bench_ok((s), (what))

enum { MAX_T = 8192, MAX_H = 8192 };

typedef struct {
  int t, h, dp, dr, canonical;
} case_t;

static const case_t kCases[] = {
    {1, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1},  {8, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1},
    {3, 1000, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1},   {32, 4096, TPRT_DTYPE_F32, TPRT_DTYPE_F32, 0},
    {128, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_F32, 1}, {1000, 256, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 0},
    {8192, 1024, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1},
};
enum { NUM_CASES = sizeof kCases / sizeof kCases[0], REPLAYS = 3 };

// What the rank threads share.
static int g_ranks, g_gpus, g_rounds;
static pthread_barrier_t g_barrier;
static float* g_data[TPRT_MAX_WORLD_SIZE];
static unsigned* g_flags[TPRT_MAX_WORLD_SIZE];
static void* g_partial[TPRT_MAX_WORLD_SIZE];  // each rank's partial of the current case
static void* g_out[TPRT_MAX_WORLD_SIZE][2];   // each rank's normed and residual_out
static int g_failures;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void fn_fail(const char* fmt, int a, int b) {
  pthread_mutex_lock(&g_mu);
  fprintf(stderr, "fused_norm: FAIL ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  ++g_failures;
  pthread_mutex_unlock(&g_mu);
}

// Values of many magnitudes and both signs; the same on every run.
static void fill(void* host, int dtype, int64_t n, unsigned seed) {
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    float u = (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
    tprt_store_elem(host, dtype, i, ldexpf(u, (int)(seed % 7) - 3));
  }
}

// Waits for |s| up to 20 s; a hang is a failure of the protocol.
static bool drain(cudaStream_t s) {
  time_t start = time(NULL);
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) FN_CHECK(e);
    if (time(NULL) - start > 20) return false;
    struct timespec d = {0, 200000};
    nanosleep(&d, NULL);
  }
}

// The composition on rank 0's device from every rank's partial: normed and residual_out (host).
static void reference(const case_t* c, const void* residual, const void* gamma, void* normed_h, void* out_h,
                      cudaStream_t st) {
  int64_t n = (int64_t)c->t * c->h, dims[2] = {c->t, c->h}, gd[1] = {c->h};
  size_t pb = (size_t)tprt_dtype_bytes(c->dp, n), rb = (size_t)tprt_dtype_bytes(c->dr, n);
  char* staged;
  void *sum, *out, *normed;
  FN_CHECK(cudaMalloc(&staged, pb * (size_t)g_ranks));
  FN_CHECK(cudaMalloc(&sum, (size_t)n * 4));
  FN_CHECK(cudaMalloc(&out, rb));
  FN_CHECK(cudaMalloc(&normed, rb));
  for (int r = 0; r < g_ranks; ++r)
    FN_CHECK(cudaMemcpyPeerAsync(staged + (size_t)r * pb, 0, g_partial[r], r % g_gpus, pb, st));
  fn_status(tprt_cuda_reduce_staged(staged, g_ranks, c->dp, n, sum, TPRT_DTYPE_F32, c->canonical, st), "reduce");
  tprt_tensor_t s = tprt_tensor_make(sum, TPRT_DTYPE_F32, 2, dims), res = tprt_tensor_make((void*)residual, c->dr, 2, dims),
                o = tprt_tensor_make(out, c->dr, 2, dims), y = tprt_tensor_make(normed, c->dr, 2, dims),
                gm = tprt_tensor_make((void*)gamma, TPRT_DTYPE_BF16, 1, gd);
  fn_status(tprt_cuda_add(&s, &res, &o, st), "add");
  fn_status(tprt_cuda_rmsnorm(&o, &gm, &y, 1e-5f, st), "rmsnorm");
  FN_CHECK(cudaMemcpyAsync(normed_h, normed, rb, cudaMemcpyDeviceToHost, st));
  FN_CHECK(cudaMemcpyAsync(out_h, out, rb, cudaMemcpyDeviceToHost, st));
  FN_CHECK(cudaStreamSynchronize(st));
  cudaFree(staged);
  cudaFree(sum);
  cudaFree(out);
  cudaFree(normed);
}

static void* rank_main(void* arg) {
  const int me = (int)(intptr_t)arg, device = me % g_gpus;
  FN_CHECK(cudaSetDevice(device));
  for (int d = 0; d < g_gpus; ++d)
    if (d != device && cudaDeviceEnablePeerAccess(d, 0) != cudaSuccess) (void)cudaGetLastError();
  cudaStream_t st;
  FN_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int resident = 0;
  fn_status(tprt_cuda_fused_norm_resident_blocks(&resident), "resident blocks");
  int sharing = (g_ranks + g_gpus - 1) / g_gpus;
  tprt_cuda_peer_group_t g;
  memset(&g, 0, sizeof g);
  g.group = g_ranks;
  g.index = me;
  g.capacity = (int64_t)MAX_T * MAX_H;
  g.max_blocks = resident / sharing;
  size_t flag_bytes = sizeof(unsigned) * 2 * (size_t)g.max_blocks * (size_t)g_ranks;
  FN_CHECK(cudaMalloc(&g_data[me], (size_t)g.capacity * 4));
  FN_CHECK(cudaMalloc(&g_flags[me], flag_bytes));
  FN_CHECK(cudaMemset(g_flags[me], 0, flag_bytes));
  FN_CHECK(cudaMalloc(&g.epochs, sizeof(unsigned) * (size_t)g.max_blocks));
  FN_CHECK(cudaMemset(g.epochs, 0, sizeof(unsigned) * (size_t)g.max_blocks));
  FN_CHECK(cudaDeviceSynchronize());
  pthread_barrier_wait(&g_barrier);
  for (int p = 0; p < g_ranks; ++p) {
    g.data[p] = g_data[p];
    g.flags[p] = g_flags[p];
  }
  // Every rank's max_blocks must agree (the same grid everywhere): ranks on GPUs of one kind do.
  size_t max_bytes = (size_t)MAX_T * MAX_H * 4;
  void *partial, *residual, *gamma, *normed, *out;
  FN_CHECK(cudaMalloc(&partial, max_bytes));
  FN_CHECK(cudaMalloc(&residual, max_bytes));
  FN_CHECK(cudaMalloc(&gamma, MAX_H * 2));
  FN_CHECK(cudaMalloc(&normed, max_bytes));
  FN_CHECK(cudaMalloc(&out, max_bytes));
  void* host = malloc(max_bytes);
  void* want_y = malloc(max_bytes);
  void* want_o = malloc(max_bytes);
  void* got = malloc(max_bytes);
  g_partial[me] = partial;
  g_out[me][0] = normed;
  g_out[me][1] = out;
  for (int round = 0; round < g_rounds; ++round)
    for (int k = 0; k < NUM_CASES; ++k) {
      const case_t* c = &kCases[k];
      int64_t n = (int64_t)c->t * c->h, dims[2] = {c->t, c->h}, gd[1] = {c->h};
      size_t rb = (size_t)tprt_dtype_bytes(c->dr, n);
      // The residual and gamma are replicated (the same on every rank); the partials differ.
      fill(host, c->dr, n, 7u + (unsigned)k);
      FN_CHECK(cudaMemcpy(residual, host, rb, cudaMemcpyHostToDevice));
      fill(host, TPRT_DTYPE_BF16, c->h, 11u + (unsigned)k);
      FN_CHECK(cudaMemcpy(gamma, host, (size_t)c->h * 2, cudaMemcpyHostToDevice));
      tprt_tensor_t p = tprt_tensor_make(partial, c->dp, 2, dims), res = tprt_tensor_make(residual, c->dr, 2, dims),
                    gm = tprt_tensor_make(gamma, TPRT_DTYPE_BF16, 1, gd), y = tprt_tensor_make(normed, c->dr, 2, dims),
                    o = tprt_tensor_make(out, c->dr, 2, dims);
      cudaGraphExec_t exec = NULL;
      for (int pass = 0; pass <= REPLAYS; ++pass) {  // pass 0 eager, then graph replays
        fill(host, c->dp, n, 1000u * (unsigned)me + 31u * (unsigned)k + 97u * (unsigned)pass + (unsigned)round);
        FN_CHECK(cudaMemcpy(partial, host, (size_t)tprt_dtype_bytes(c->dp, n), cudaMemcpyHostToDevice));
        FN_CHECK(cudaMemset(normed, 0xFF, rb));
        FN_CHECK(cudaMemset(out, 0xFF, rb));
        FN_CHECK(cudaDeviceSynchronize());
        pthread_barrier_wait(&g_barrier);
        if (pass == 0) {
          fn_status(tprt_cuda_fused_allreduce_add_rmsnorm(&g, &p, &res, &gm, &y, &o, 1e-5f, c->canonical, st),
                    "fused");
        } else {
          if (!exec) {
            cudaGraph_t graph;
            FN_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            fn_status(tprt_cuda_fused_allreduce_add_rmsnorm(&g, &p, &res, &gm, &y, &o, 1e-5f, c->canonical, st),
                      "fused (capture)");
            FN_CHECK(cudaStreamEndCapture(st, &graph));
            FN_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            cudaGraphDestroy(graph);
          }
          FN_CHECK(cudaGraphLaunch(exec, st));
        }
        if (!drain(st)) {
          fn_fail("case %d pass %d: the fused kernel did not finish in 20 s (a hang)", k, pass);
          exit(1);
        }
        pthread_barrier_wait(&g_barrier);
        if (me == 0) {
          reference(c, residual, gamma, want_y, want_o, st);
          for (int r = 0; r < g_ranks; ++r)
            for (int which = 0; which < 2; ++which) {
              FN_CHECK(cudaMemcpy(got, g_out[r][which], rb, cudaMemcpyDefault));
              if (memcmp(got, which ? want_o : want_y, rb) != 0)
                fn_fail(which ? "case %d: rank %d: residual_out differs from the composition"
                              : "case %d: rank %d: normed differs from the composition",
                        k + 100 * pass, r);
            }
        }
        pthread_barrier_wait(&g_barrier);
      }
      if (exec) cudaGraphExecDestroy(exec);
    }
  free(host);
  free(want_y);
  free(want_o);
  free(got);
  return NULL;
}

int main(int argc, char** argv) {
  g_ranks = argc > 1 ? atoi(argv[1]) : 4;
  g_rounds = argc > 2 ? atoi(argv[2]) : 2;
  if (cudaGetDeviceCount(&g_gpus) != cudaSuccess || g_gpus < 1) {
    printf("fused_norm: no GPU\n");
    return 77;
  }
  if (g_ranks < 1 || g_ranks > TPRT_MAX_WORLD_SIZE) {
    fprintf(stderr, "usage: tprt-fused-norm-check [ranks 1..%d] [rounds]\n", TPRT_MAX_WORLD_SIZE);
    return 2;
  }
  if (g_gpus > g_ranks) g_gpus = g_ranks;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)g_ranks);
  pthread_t threads[TPRT_MAX_WORLD_SIZE];
  for (int r = 0; r < g_ranks; ++r) pthread_create(&threads[r], NULL, rank_main, (void*)(intptr_t)r);
  for (int r = 0; r < g_ranks; ++r) pthread_join(threads[r], NULL);
  int checks = g_rounds * NUM_CASES * (REPLAYS + 1) * g_ranks * 2;
  printf("fused_norm: %d ranks on %d GPU(s), %d cases x %d rounds, eager and %d graph replays: %d outputs checked, "
         "%d differ from the composition\n",
         g_ranks, g_gpus, NUM_CASES, g_rounds, REPLAYS, checks, g_failures);
  return g_failures ? 1 : 0;
}
