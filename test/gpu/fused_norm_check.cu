// tprt-fused-norm-check: the fused all-reduce + residual add + RMSNorm kernel
// (kernels/cuda/norm/fused_norm.cu) against the composition it must equal bit for bit:
// tprt_cuda_reduce_staged of every member's partial, tprt_cuda_add of the residual, and
// tprt_cuda_rmsnorm. It runs R ranks as threads, rank i on GPU i mod G. Ranks that share a GPU
// address each other's memory directly; other GPUs need peer access. Each rank has its own stream
// and registered region; the regions are shared through a host table.
//
// Every case runs on every rank at once:
//   - T tokens x H hidden over 1-8192 tokens (one block's rows, several rows per block, a grid
//     capped by residency) and H 256-8192, plus a ragged 1000;
//   - partial bf16 or f32, residual bf16 or f32;
//   - canonical or increasing-rank order;
//   - the sum kept in f32, or rounded to the residual's dtype before the add (round_sum, the op's
//     sum_type = "residual"; the composition's all-reduce then writes that dtype);
//   - one-shot and two-shot, one after the other (a call of each follows a call of the other, so
//     each empties what the other filled);
//   - the residual the same on every rank (even cases) or each rank's own (odd cases);
//   - the quantizing form (tp.fused_allreduce_add_rmsnorm_quantize): normed also quantized in mxfp8,
//     nvfp4 or per-tensor fp8 (the amax operand the residual's), each rank's data and scales equal to
//     tprt_cuda_quantize's of its own normed, every padding byte written.
// Each rank's outputs must equal the composition's with its residual, computed on rank 0's GPU from
// copies of every partial. Even rounds take the kernel's shape per call (clusters below TPRT_CUDA_FUSED_ROWS_FROM
// rows, a block per row from there); odd rounds force the other shape on every case, so both
// shapes see every case, and consecutive calls switch shapes. Then every rank captures one call as a CUDA graph, and three replays with new partials
// must each equal the composition again: the counters advance on the device.
//
// A hang (a protocol bug) is reported after 20 s instead of blocking.
//
// `bench` mode times the kernel (one-shot; two-shot with FN_TWO_SHOT=1; with FN_QUANT=mxfp8 the quantizing form, against
// the unfused path followed by tprt_cuda_quantize) against the unfused path on one rank per GPU: NCCL's all-reduce
// of the f32 partial, then tprt_cuda_add and tprt_cuda_rmsnorm. Both run at hidden 8192, bf16
// residual, T in {1, 8, 32, 128, 1024, 8192}, in rounds of 50 calls: eager (launched one by one)
// and as a CUDA graph, 20 rounds each. It prints microseconds per call: the slowest rank's median
// round over 50 (tools/bench/fused_norm.py adds PyTorch's numbers). FN_SHARE=R runs R ranks sharing the
// GPUs with the fused kernel alone (the unfused columns read 0): a proxy for the kernel's own cost on one GPU.
// Usage: tprt-fused-norm-check [ranks (default 4)] [rounds (default 2)]
//        tprt-fused-norm-check bench [hidden (default 8192)]
// Exit status: 0 every case bitwise, 1 a mismatch or failure, 77 no GPU (bench: fewer than 2).
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "bench_cuda.cuh"  // TPC_BENCH_CUDA, tpc_bench_ok
#include "tprt_cuda_kernels.h"
#include "tprt_numerics.h"

#define FN_CHECK(expr) TPC_BENCH_CUDA(expr)
#define fn_status(s, what) tpc_bench_ok((s), (what))

enum { MAX_T = 8192 };

typedef struct {
  int t, h, dp, dr, canonical, round_sum;
  int quant;  // 0: none; 1 + TPRT_QUANT_*: normed quantized too, checked against tprt_cuda_quantize of normed
} case_t;

static const case_t kCases[] = {
    {1, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1, 0, 0},   {8, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1, 0, 0},
    {3, 1000, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 0, 0},    {32, 4096, TPRT_DTYPE_F32, TPRT_DTYPE_F32, 0, 0, 0},
    {128, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_F32, 1, 0, 0},  {1000, 256, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 0, 0, 0},
    {8192, 1024, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 0, 0}, {48, 12288, TPRT_DTYPE_BF16, TPRT_DTYPE_F32, 1, 0, 0},
    {200, 16384, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 0, 0, 0}, {8, 8192, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 1, 0},
    {3, 1000, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 0, 1, 0},   {128, 8192, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 1, 0},
    {9, 999, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 0, 0},  // odd rows: two-shot's bf16 rows padded to words
    // The quantizing form: mxfp8 and nvfp4 blocks over 2 (bf16 partial) and 1 (f32) columns a thread, in
    // clusters and a block per row; per-tensor fp8 with the amax operand.
    {1, 8192, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1, 0, 1 + TPRT_QUANT_MXFP8},
    {8, 8192, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 1, 1 + TPRT_QUANT_NVFP4},
    {128, 4096, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1, 0, 1 + TPRT_QUANT_FP8_E4M3},
    {1000, 256, TPRT_DTYPE_F32, TPRT_DTYPE_F32, 0, 0, 1 + TPRT_QUANT_MXFP8},
    {33, 2048, TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 1, 0, 1 + TPRT_QUANT_NVFP4},
    {200, 1024, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1, 1, 1 + TPRT_QUANT_FP8_E5M2},
    {3, 4096, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 1, 0, 1 + TPRT_QUANT_NVFP4},
};
enum { NUM_CASES = sizeof kCases / sizeof kCases[0], REPLAYS = 3 };

// What the rank threads share.
static int g_ranks, g_gpus, g_rounds;
static pthread_barrier_t g_barrier;
static void* g_data[TPRT_MAX_WORLD_SIZE];
static void* g_partial[TPRT_MAX_WORLD_SIZE];  // each rank's partial of the current case
static void* g_residual[TPRT_MAX_WORLD_SIZE];  // and its residual (odd cases: each rank's own)
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

// The ranks on each GPU (rank i on GPU i mod g_gpus).
static int ranks_per_gpu(void) { return (g_ranks + g_gpus - 1) / g_gpus; }

// The bench's form knobs: FN_TWO_SHOT=1, two-shot; FN_QUANT=mxfp8, the quantizing form.
static bool bench_two_shot(void) { return getenv("FN_TWO_SHOT") && atoi(getenv("FN_TWO_SHOT")) != 0; }
static bool bench_quant(void) { return getenv("FN_QUANT") && strcmp(getenv("FN_QUANT"), "mxfp8") == 0; }

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

// The composition on rank 0's device from every rank's partial, with rank |rank|'s residual (copied
// from its device): its normed and residual_out (host).
static void reference(const case_t* c, int rank, const void* gamma, void* normed_h, void* out_h, cudaStream_t st) {
  int64_t n = (int64_t)c->t * c->h, dims[2] = {c->t, c->h}, gd[1] = {c->h};
  size_t pb = (size_t)tprt_dtype_bytes(c->dp, n), rb = (size_t)tprt_dtype_bytes(c->dr, n);
  char* staged;
  void *sum, *out, *normed, *residual;
  FN_CHECK(cudaMalloc(&residual, rb));
  FN_CHECK(cudaMemcpyPeerAsync(residual, 0, g_residual[rank], rank % g_gpus, rb, st));
  FN_CHECK(cudaMalloc(&staged, pb * (size_t)g_ranks));
  FN_CHECK(cudaMalloc(&sum, (size_t)n * 4));
  FN_CHECK(cudaMalloc(&out, rb));
  FN_CHECK(cudaMalloc(&normed, rb));
  for (int r = 0; r < g_ranks; ++r)
    FN_CHECK(cudaMemcpyPeerAsync(staged + (size_t)r * pb, 0, g_partial[r], r % g_gpus, pb, st));
  const int sum_dtype = c->round_sum ? c->dr : TPRT_DTYPE_F32;  // round_sum: the residual's dtype
  fn_status(tprt_cuda_reduce_staged(staged, g_ranks, c->dp, n, sum, sum_dtype, c->canonical, st), "reduce");
  tprt_tensor_t s = tprt_tensor_make(sum, sum_dtype, 2, dims),
                res = tprt_tensor_make((void*)residual, c->dr, 2, dims), o = tprt_tensor_make(out, c->dr, 2, dims),
                y = tprt_tensor_make(normed, c->dr, 2, dims),
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
  cudaFree(residual);
}

// Rank |me| on |device|: peer access to the other GPUs, a stream, and its registration in |g|
// (a region of empty words for calls of |capacity| bytes a slot and zeroed counters, for the blocks that fit at once on the
// GPU divided by the |sharing| ranks on it), published to and completed from the other ranks.
static cudaStream_t register_rank(int me, int device, int64_t capacity, int sharing, tprt_cuda_peer_group_t* g) {
  FN_CHECK(cudaSetDevice(device));
  for (int d = 0; d < g_gpus; ++d)
    if (d != device && cudaDeviceEnablePeerAccess(d, 0) != cudaSuccess) (void)cudaGetLastError();
  cudaStream_t st;
  FN_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int in_clusters = 0, in_rows = 0, sms = 0;
  fn_status(tprt_cuda_fused_norm_resident_blocks(&in_clusters, &in_rows, &sms), "resident blocks");
  memset(g, 0, sizeof *g);
  g->sms = sms;
  g->group = g_ranks;
  g->index = me;
  g->capacity = capacity;
  tprt_cuda_fused_norm_budgets(in_clusters, in_rows, sharing, &g->max_blocks, &g->max_row_blocks);
  size_t region_bytes = tprt_cuda_fused_region_bytes(g_ranks, capacity);
  FN_CHECK(cudaMalloc(&g_data[me], region_bytes));
  FN_CHECK(cudaMemset(g_data[me], 0xFF, region_bytes));  // every word empty
  FN_CHECK(cudaMalloc(&g->counters, sizeof(unsigned) * TPRT_CUDA_FUSED_COUNTERS));
  FN_CHECK(cudaMemset(g->counters, 0, sizeof(unsigned) * TPRT_CUDA_FUSED_COUNTERS));
  FN_CHECK(cudaDeviceSynchronize());
  pthread_barrier_wait(&g_barrier);
  for (int p = 0; p < g_ranks; ++p) {
    g->data[p] = g_data[p];
  }
  return st;
}

static void* rank_main(void* arg) {
  const int me = (int)(intptr_t)arg;
  tprt_cuda_peer_group_t g;
  int64_t capacity = 0, elems = 0, widest = 0;  // the largest case's slot bytes, elements and rows
  for (int k = 0; k < NUM_CASES; ++k) {
    int64_t dims[2] = {kCases[k].t, kCases[k].h};
    tprt_tensor_t p = tprt_tensor_make(NULL, kCases[k].dp, 2, dims), r = tprt_tensor_make(NULL, kCases[k].dr, 2, dims);
    int64_t one = tprt_cuda_fused_call_bytes(&p, &r, 0, g_ranks, kCases[k].round_sum),
            two = tprt_cuda_fused_call_bytes(&p, &r, 1, g_ranks, kCases[k].round_sum);
    int64_t bytes = one > two ? one : two;
    if (bytes > capacity) capacity = bytes;
    if ((int64_t)kCases[k].t * kCases[k].h > elems) elems = (int64_t)kCases[k].t * kCases[k].h;
    if (kCases[k].h > widest) widest = kCases[k].h;
  }
  cudaStream_t st = register_rank(me, me % g_gpus, capacity, ranks_per_gpu(), &g);
  // Every rank's max_blocks must agree (the same grid everywhere): ranks on GPUs of one kind do.
  size_t max_bytes = (size_t)elems * 4;
  void *partial, *residual, *gamma, *normed, *out;
  FN_CHECK(cudaMalloc(&partial, max_bytes));
  FN_CHECK(cudaMalloc(&residual, max_bytes));
  FN_CHECK(cudaMalloc(&gamma, (size_t)widest * 4));
  FN_CHECK(cudaMalloc(&normed, max_bytes));
  FN_CHECK(cudaMalloc(&out, max_bytes));
  // The quantizing cases' outputs (codes of at most a byte an element; scales of at most
  // rup(T,128) x rup(H/16,4) bytes) and tprt_cuda_quantize's of the kernel's normed, and the amax operand.
  const size_t qbytes = (size_t)(elems + 128 * 4096) * 2 + 64;
  uint8_t *qdata[2], *qscale[2];
  float *qglobal[2], *amax;
  for (int i = 0; i < 2; ++i) {
    FN_CHECK(cudaMalloc(&qdata[i], qbytes));
    FN_CHECK(cudaMalloc(&qscale[i], qbytes));
    FN_CHECK(cudaMalloc(&qglobal[i], 4));
  }
  FN_CHECK(cudaMalloc(&amax, 4));
  uint8_t* qhost[2] = {(uint8_t*)malloc(qbytes), (uint8_t*)malloc(qbytes)};
  void* host = malloc(max_bytes);
  void* want_y = malloc(max_bytes);
  void* want_o = malloc(max_bytes);
  void* got = malloc(max_bytes);
  g_partial[me] = partial;
  g_residual[me] = residual;
  g_out[me][0] = normed;
  g_out[me][1] = out;
  for (int round = 0; round < g_rounds; ++round)
    for (int kk = 0; kk < 2 * NUM_CASES; ++kk) {
      const int k = kk / 2, two_shot = kk % 2;  // each case one-shot, then two-shot
      const case_t* c = &kCases[k];
      int64_t n = (int64_t)c->t * c->h, dims[2] = {c->t, c->h}, gd[1] = {c->h};
      size_t rb = (size_t)tprt_dtype_bytes(c->dr, n);
      // The partials differ between ranks; gamma is replicated; the residual too in even cases, each
      // rank's own in odd ones (two-shot's owners then send sums, not their residual_out).
      fill(host, c->dr, n, 7u + (unsigned)k + (k % 2 ? 1000u * (unsigned)me : 0u));
      FN_CHECK(cudaMemcpy(residual, host, rb, cudaMemcpyHostToDevice));
      fill(host, TPRT_DTYPE_BF16, c->h, 11u + (unsigned)k);
      FN_CHECK(cudaMemcpy(gamma, host, (size_t)c->h * 2, cudaMemcpyHostToDevice));
      tprt_tensor_t p = tprt_tensor_make(partial, c->dp, 2, dims), res = tprt_tensor_make(residual, c->dr, 2, dims),
                    gm = tprt_tensor_make(gamma, TPRT_DTYPE_BF16, 1, gd), y = tprt_tensor_make(normed, c->dr, 2, dims),
                    o = tprt_tensor_make(out, c->dr, 2, dims);
      g.rows_from = round % 2 == 0 ? 0 : c->t >= TPRT_CUDA_FUSED_ROWS_FROM ? INT_MAX : 1;
      // The quantization: the layouts of tp.quantize (rowwise) for normed [T,H]; the amax operand is
      // the residual's (a value of the same scale as normed's, as delayed scaling would give).
      const int qf = c->quant - 1, bs = qf == TPRT_QUANT_MXFP8 ? 32 : qf == TPRT_QUANT_NVFP4 ? 16 : 0;
      const int64_t qdims[2] = {c->t, c->h}, sdims[2] = {(c->t + 127) / 128 * 128, bs ? (c->h / bs + 3) / 4 * 4 : 1},
                    one[1] = {1};
      const int data_dtype = qf == TPRT_QUANT_NVFP4   ? TPRT_DTYPE_F4E2M1FN
                             : qf == TPRT_QUANT_FP8_E5M2 ? TPRT_DTYPE_F8E5M2
                                                         : TPRT_DTYPE_F8E4M3FN;
      const int scale_dtype = qf == TPRT_QUANT_MXFP8 ? TPRT_DTYPE_F8E8M0FNU
                              : qf == TPRT_QUANT_NVFP4 ? TPRT_DTYPE_F8E4M3FN
                                                       : TPRT_DTYPE_F32;
      tprt_tensor_t qd[2], qs[2], qg[2], am = tprt_tensor_make(amax, TPRT_DTYPE_F32, 1, one);
      for (int i = 0; i < 2; ++i) {
        qd[i] = tprt_tensor_make(qdata[i], data_dtype, 2, qdims);
        qs[i] = bs ? tprt_tensor_make(qscale[i], scale_dtype, 2, sdims) : tprt_tensor_make(qscale[i], scale_dtype, 1, one);
        qg[i] = tprt_tensor_make(qglobal[i], TPRT_DTYPE_F32, 1, one);
      }
      tprt_cuda_fused_quant_t quant = {qf, qf == TPRT_QUANT_MXFP8 ? NULL : &am, &qd[0], &qs[0],
                                       qf == TPRT_QUANT_NVFP4 ? &qg[0] : NULL};
      const tprt_cuda_fused_quant_t* qarg = c->quant ? &quant : NULL;
      if (c->quant) {
        fn_status(tprt_cuda_amax(&res, &am, st), "amax");
        FN_CHECK(cudaStreamSynchronize(st));
      }
      cudaGraphExec_t exec = NULL;
      for (int pass = 0; pass <= REPLAYS; ++pass) {  // pass 0 eager, then graph replays
        fill(host, c->dp, n, 1000u * (unsigned)me + 31u * (unsigned)k + 97u * (unsigned)pass + (unsigned)round);
        FN_CHECK(cudaMemcpy(partial, host, (size_t)tprt_dtype_bytes(c->dp, n), cudaMemcpyHostToDevice));
        FN_CHECK(cudaMemset(normed, 0xFF, rb));
        FN_CHECK(cudaMemset(out, 0xFF, rb));
        if (c->quant) {  // every byte the kernel must write, padding included, starts wrong
          FN_CHECK(cudaMemset(qdata[0], 0xFF, tprt_tensor_bytes(&qd[0])));
          FN_CHECK(cudaMemset(qscale[0], 0xFF, tprt_tensor_bytes(&qs[0])));
          FN_CHECK(cudaMemset(qglobal[0], 0xFF, 4));
        }
        FN_CHECK(cudaDeviceSynchronize());
        pthread_barrier_wait(&g_barrier);
        if (pass == 0) {
          fn_status(tprt_cuda_fused_allreduce_add_rmsnorm(&g, &p, &res, &gm, &y, &o, 1e-5f, c->canonical, c->round_sum,
                                                          two_shot, qarg, st),
                    "fused");
        } else {
          if (!exec) {
            cudaGraph_t graph;
            FN_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            fn_status(tprt_cuda_fused_allreduce_add_rmsnorm(&g, &p, &res, &gm, &y, &o, 1e-5f, c->canonical,
                                                            c->round_sum, two_shot, qarg, st),
                      "fused (capture)");
            FN_CHECK(cudaStreamEndCapture(st, &graph));
            FN_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            cudaGraphDestroy(graph);
          }
          FN_CHECK(cudaGraphLaunch(exec, st));
        }
        if (!drain(st)) {
          fn_fail("case %d pass %d: the fused kernel did not finish in 20 s (a hang)", k + 1000 * two_shot, pass);
          exit(1);
        }
        // Each rank: the kernel's quantized outputs against tprt_cuda_quantize(_with_amax) of its own
        // normed (itself checked against the composition below).
        if (c->quant) {
          fn_status(tprt_cuda_quantize_with_amax(&y, quant.amax, &qd[1], &qs[1], quant.global_scale ? &qg[1] : NULL,
                                                 qf, TPRT_QUANT_ROWWISE, st),
                    "quantize");
          FN_CHECK(cudaStreamSynchronize(st));
          const tprt_tensor_t* pairs[3][2] = {{&qd[0], &qd[1]}, {&qs[0], &qs[1]}, {&qg[0], &qg[1]}};
          for (int w = 0; w < (qf == TPRT_QUANT_NVFP4 ? 3 : 2); ++w) {
            const size_t bytes = tprt_tensor_bytes(pairs[w][0]);
            FN_CHECK(cudaMemcpy(qhost[0], pairs[w][0]->data, bytes, cudaMemcpyDefault));
            FN_CHECK(cudaMemcpy(qhost[1], pairs[w][1]->data, bytes, cudaMemcpyDefault));
            if (memcmp(qhost[0], qhost[1], bytes) != 0)
              fn_fail(w == 0   ? "case %d: rank %d: the quantized data differ from tprt_cuda_quantize's"
                      : w == 1 ? "case %d: rank %d: the scales differ from tprt_cuda_quantize's"
                               : "case %d: rank %d: the global scale differs from tprt_cuda_quantize's",
                      k + 100 * pass + 1000 * two_shot, me);
          }
        }
        pthread_barrier_wait(&g_barrier);
        if (me == 0) {
          for (int r = 0; r < g_ranks; ++r) {
            if (r == 0 || k % 2) reference(c, r, gamma, want_y, want_o, st);
            for (int which = 0; which < 2; ++which) {
              FN_CHECK(cudaMemcpy(got, g_out[r][which], rb, cudaMemcpyDefault));
              if (memcmp(got, which ? want_o : want_y, rb) != 0)
                fn_fail(which ? "case %d: rank %d: residual_out differs from the composition"
                              : "case %d: rank %d: normed differs from the composition",
                        k + 100 * pass + 1000 * two_shot, r);
            }
          }
        }
        pthread_barrier_wait(&g_barrier);
      }
      if (exec) cudaGraphExecDestroy(exec);
    }
  for (int i = 0; i < 2; ++i) {
    cudaFree(qdata[i]);
    cudaFree(qscale[i]);
    cudaFree(qglobal[i]);
    free(qhost[i]);
  }
  cudaFree(amax);
  free(host);
  free(want_y);
  free(want_o);
  free(got);
  return NULL;
}

// bench mode -----------------------------------------------------------------------------------

enum { BENCH_CALLS = 50, BENCH_REPLAYS = 20 };
static int BENCH_H = 8192;  // `bench H` picks another hidden size
static ncclComm_t g_comms[TPRT_MAX_WORLD_SIZE];
static const int kBenchT[] = {1, 8, 32, 128, 1024, 8192};
enum { NUM_BENCH = sizeof kBenchT / sizeof kBenchT[0] };
static int g_bench_sizes = NUM_BENCH;  // FN_MAX_T: the sizes up to that many tokens
static float g_bench_us[2][2][NUM_BENCH][TPRT_MAX_WORLD_SIZE];        // [fused, unfused][eager, graph][T][rank]
static unsigned long long g_trace[NUM_BENCH][TPRT_CUDA_FUSED_TRACE];  // rank 0's eager fused calls

static int fn_cmp(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return x < y ? -1 : x > y;
}

// Median over BENCH_REPLAYS launches of |exec|, per call, in microseconds (ranks start together).
static float bench_graph(cudaGraphExec_t exec, cudaStream_t st) {
  cudaEvent_t a, b;
  FN_CHECK(cudaEventCreate(&a));
  FN_CHECK(cudaEventCreate(&b));
  FN_CHECK(cudaGraphLaunch(exec, st));  // warm-up
  FN_CHECK(cudaStreamSynchronize(st));
  float times[BENCH_REPLAYS];
  for (int r = 0; r < BENCH_REPLAYS; ++r) {
    pthread_barrier_wait(&g_barrier);
    FN_CHECK(cudaEventRecord(a, st));
    FN_CHECK(cudaGraphLaunch(exec, st));
    FN_CHECK(cudaEventRecord(b, st));
    FN_CHECK(cudaStreamSynchronize(st));
    FN_CHECK(cudaEventElapsedTime(&times[r], a, b));
  }
  qsort(times, BENCH_REPLAYS, sizeof *times, fn_cmp);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return times[BENCH_REPLAYS / 2] * 1000.0f / BENCH_CALLS;
}

static void* bench_rank(void* arg) {
  const int me = (int)(intptr_t)arg;
  tprt_cuda_peer_group_t g;
  cudaStream_t st = register_rank(me, me % g_gpus, (int64_t)MAX_T * BENCH_H * 2, ranks_per_gpu(), &g);  // bf16 partials
  size_t n_max = (size_t)MAX_T * BENCH_H;
  void *partial, *sum, *residual, *gamma, *normed, *out;
  FN_CHECK(cudaMalloc(&partial, n_max * 2));
  FN_CHECK(cudaMalloc(&sum, n_max * 4));
  FN_CHECK(cudaMalloc(&residual, n_max * 2));
  FN_CHECK(cudaMalloc(&gamma, BENCH_H * 2));
  FN_CHECK(cudaMalloc(&normed, n_max * 2));
  FN_CHECK(cudaMalloc(&out, n_max * 2));
  FN_CHECK(cudaMemset(partial, 0, n_max * 2));
  FN_CHECK(cudaMemset(sum, 0, n_max * 4));
  FN_CHECK(cudaMemset(residual, 0, n_max * 2));
  FN_CHECK(cudaMemset(gamma, 0, BENCH_H * 2));
  // Tuning knobs of this benchmark: FN_CLUSTER, the blocks per row (0: the kernel's choice);
  // FN_ROWS_FROM, the fewest rows that take a block per row (0: the kernel's choice; more than
  // the largest size: clusters only); FN_MAX_T, the sizes up to that many tokens.
  if (getenv("FN_CLUSTER")) g.cluster = atoi(getenv("FN_CLUSTER"));
  if (getenv("FN_ROWS_FROM")) g.rows_from = atoi(getenv("FN_ROWS_FROM"));
  const int two_shot = bench_two_shot();
  // FN_QUANT=mxfp8: the quantizing form (tp.fused_allreduce_add_rmsnorm_quantize) against NCCL +
  // add + norm + tprt_cuda_quantize, normed in MXFP8 (codes [T,H], E8M0 scales padded).
  const bool quant = bench_quant();
  uint8_t *qdata = NULL, *qscale = NULL;
  if (quant) {
    FN_CHECK(cudaMalloc(&qdata, n_max));
    FN_CHECK(cudaMalloc(&qscale, (size_t)(MAX_T + 127) / 128 * 128 * (BENCH_H / 32 + 3) / 4 * 4));
  }
  if (me == 0) FN_CHECK(cudaMalloc((void**)&g.trace, sizeof(unsigned long long) * TPRT_CUDA_FUSED_TRACE));
  FN_CHECK(cudaDeviceSynchronize());
  for (int k = 0; k < g_bench_sizes; ++k) {
    if (g.trace) FN_CHECK(cudaMemset(g.trace, 0, sizeof(unsigned long long) * TPRT_CUDA_FUSED_TRACE));
    int64_t dims[2] = {kBenchT[k], BENCH_H}, gd[1] = {BENCH_H}, n = kBenchT[k] * (int64_t)BENCH_H;
    tprt_tensor_t p = tprt_tensor_make(partial, TPRT_DTYPE_BF16, 2, dims),
                  s32 = tprt_tensor_make(sum, TPRT_DTYPE_F32, 2, dims),
                  r = tprt_tensor_make(residual, TPRT_DTYPE_BF16, 2, dims),
                  gm = tprt_tensor_make(gamma, TPRT_DTYPE_BF16, 1, gd),
                  y = tprt_tensor_make(normed, TPRT_DTYPE_BF16, 2, dims),
                  o = tprt_tensor_make(out, TPRT_DTYPE_BF16, 2, dims);
    const int64_t sdims[2] = {(kBenchT[k] + 127) / 128 * 128, (BENCH_H / 32 + 3) / 4 * 4};
    tprt_tensor_t qd = tprt_tensor_make(qdata, TPRT_DTYPE_F8E4M3FN, 2, dims),
                  qs = tprt_tensor_make(qscale, TPRT_DTYPE_F8E8M0FNU, 2, sdims);
    tprt_cuda_fused_quant_t qarg = {TPRT_QUANT_MXFP8, NULL, &qd, &qs, NULL};
    // BENCH_CALLS calls of |way| (0 fused, 1 NCCL + add + norm (+ quantize)) queued on the stream.
    auto issue = [&](int way) {
      for (int c = 0; c < BENCH_CALLS; ++c) {
        if (way == 0) {
          fn_status(tprt_cuda_fused_allreduce_add_rmsnorm(&g, &p, &r, &gm, &y, &o, 1e-5f, 1, 0, two_shot,
                                                          quant ? &qarg : NULL, st),
                    "fused");
        } else {
          ncclResult_t nr = ncclAllReduce(sum, sum, (size_t)n, ncclFloat32, ncclSum, g_comms[me], st);
          if (nr != ncclSuccess) {
            fprintf(stderr, "ncclAllReduce: %s\n", ncclGetErrorString(nr));
            exit(1);
          }
          fn_status(tprt_cuda_add(&s32, &r, &o, st), "add");
          fn_status(tprt_cuda_rmsnorm(&o, &gm, &y, 1e-5f, st), "rmsnorm");
          if (quant)
            fn_status(tprt_cuda_quantize(&y, &qd, &qs, NULL, TPRT_QUANT_MXFP8, TPRT_QUANT_ROWWISE, st), "quantize");
        }
      }
    };
    // Ranks sharing a GPU (FN_SHARE) have no NCCL world: the fused kernel alone.
    for (int way = 0; way < (g_comms[me] ? 2 : 1); ++way) {
      // Eager: the median over BENCH_REPLAYS rounds of BENCH_CALLS launches (after one round).
      cudaEvent_t a, b;
      FN_CHECK(cudaEventCreate(&a));
      FN_CHECK(cudaEventCreate(&b));
      float times[BENCH_REPLAYS];
      for (int rep = -1; rep < BENCH_REPLAYS; ++rep) {
        pthread_barrier_wait(&g_barrier);
        FN_CHECK(cudaEventRecord(a, st));
        issue(way);
        FN_CHECK(cudaEventRecord(b, st));
        FN_CHECK(cudaStreamSynchronize(st));
        if (rep >= 0) FN_CHECK(cudaEventElapsedTime(&times[rep], a, b));
      }
      qsort(times, BENCH_REPLAYS, sizeof *times, fn_cmp);
      g_bench_us[way][0][k][me] = times[BENCH_REPLAYS / 2] * 1000.0f / BENCH_CALLS;
      if (way == 0 && g.trace) FN_CHECK(cudaMemcpy(g_trace[k], g.trace, sizeof g_trace[k], cudaMemcpyDeviceToHost));
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      // Graph: the same calls captured once, replayed.
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      pthread_barrier_wait(&g_barrier);
      FN_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      issue(way);
      FN_CHECK(cudaStreamEndCapture(st, &graph));
      FN_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      cudaGraphDestroy(graph);
      g_bench_us[way][1][k][me] = bench_graph(exec, st);
      cudaGraphExecDestroy(exec);
    }
  }
  return NULL;
}

static int bench_main(void) {
  // FN_SHARE=R: R ranks sharing the GPUs (rank i on GPU i mod G), the fused kernel alone (NCCL
  // takes one rank per GPU). A proxy for the kernel's own cost on one GPU, not the link's: the
  // ranks' blocks split one GPU's SMs and their pushes stay in its memory.
  const int share = getenv("FN_SHARE") ? atoi(getenv("FN_SHARE")) : 0;
  if (share != 0 && (share < 2 || share > TPRT_CUDA_FUSED_MAX_GROUP)) {
    fprintf(stderr, "fused_norm bench: FN_SHARE must be 2..%d ranks\n", TPRT_CUDA_FUSED_MAX_GROUP);
    return 1;
  }
  if (share == 0 && g_gpus < 2) {
    printf("fused_norm bench: needs 2 GPUs, found %d (FN_SHARE=2 runs 2 ranks on one)\n", g_gpus);
    return 77;
  }
  g_ranks = share ? share : g_gpus;
  if (share) {
    if (g_gpus > share) g_gpus = share;
  } else {
    int devs[TPRT_MAX_WORLD_SIZE];
    for (int d = 0; d < g_ranks; ++d) devs[d] = d;
    ncclResult_t nr = ncclCommInitAll(g_comms, g_ranks, devs);
    if (nr != ncclSuccess) {
      fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetErrorString(nr));
      return 1;
    }
  }
  pthread_barrier_init(&g_barrier, NULL, (unsigned)g_ranks);
  pthread_t threads[TPRT_MAX_WORLD_SIZE];
  for (int r = 0; r < g_ranks; ++r) pthread_create(&threads[r], NULL, bench_rank, (void*)(intptr_t)r);
  for (int r = 0; r < g_ranks; ++r) pthread_join(threads[r], NULL);
  char where[64];
  if (share)
    snprintf(where, sizeof where, "%d rank(s) sharing each of %d GPU(s); no unfused path", ranks_per_gpu(), g_gpus);
  else
    snprintf(where, sizeof where, "one GPU each");
  printf(
      "fused_norm bench: TP %d (%s), hidden %d, bf16 residual%s, %d calls per round; us per call, "
      "the slowest rank's median round%s\n",
      g_ranks, where, BENCH_H, bench_quant() ? ", mxfp8 output" : "", BENCH_CALLS, bench_two_shot() ? "; two-shot" : "");
  printf("%8s %12s %12s %8s %12s %12s %8s\n", "tokens", "fused", "unfused", "ratio", "fused-graph", "unfused-graph",
         "ratio");
  for (int k = 0; k < g_bench_sizes; ++k) {
    float us[2][2] = {{0, 0}, {0, 0}};
    for (int way = 0; way < 2; ++way)
      for (int mode = 0; mode < 2; ++mode)
        for (int r = 0; r < g_ranks; ++r)
          if (g_bench_us[way][mode][k][r] > us[way][mode]) us[way][mode] = g_bench_us[way][mode][k][r];
    printf("%8d %12.2f %12.2f %8.3f %12.2f %12.2f %8.3f\n", kBenchT[k], us[0][0], us[1][0],
           us[1][0] > 0 ? us[0][0] / us[1][0] : 0.0f, us[0][1], us[1][1], us[1][1] > 0 ? us[0][1] / us[1][1] : 0.0f);
  }
  printf(
      "rank 0's eager fused calls, block 0's first thread, us per call: push, wait for the first peer value, "
      "sums of the first row, rest, gap before the call\n");
  for (int k = 0; k < g_bench_sizes; ++k) {
    const unsigned long long* tr = g_trace[k];
    double calls = tr[4] ? (double)tr[4] : 1.0;
    printf("%8d %10.2f %10.2f %10.2f %10.2f %10.2f\n", kBenchT[k], tr[0] / calls / 1e3, tr[1] / calls / 1e3,
           tr[2] / calls / 1e3, tr[3] / calls / 1e3, tr[5] / calls / 1e3);
  }
  for (int r = 0; r < g_ranks; ++r)
    if (g_comms[r]) ncclCommDestroy(g_comms[r]);
  return 0;
}

int main(int argc, char** argv) {
  // Ranks sharing a GPU share its context: a kernel loaded lazily while a peer's fused kernel
  // waits for this rank may synchronize the context behind it (CUDA's lazy-loading hazard), so
  // every kernel loads at the first CUDA call, as under tpc-run --share-gpus.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (cudaGetDeviceCount(&g_gpus) != cudaSuccess || g_gpus < 1) {
    printf("fused_norm: no GPU\n");
    return 77;
  }
  if (argc > 1 && !strcmp(argv[1], "bench")) {
    if (argc > 2) BENCH_H = atoi(argv[2]);
    if (BENCH_H < 1) {
      fprintf(stderr, "usage: tprt-fused-norm-check bench [hidden >= 1]\n");
      return 1;
    }
    if (getenv("FN_MAX_T"))
      for (g_bench_sizes = 0; g_bench_sizes < NUM_BENCH && kBenchT[g_bench_sizes] <= atoi(getenv("FN_MAX_T"));)
        ++g_bench_sizes;
    return bench_main();
  }
  g_ranks = argc > 1 ? atoi(argv[1]) : 4;
  g_rounds = argc > 2 ? atoi(argv[2]) : 2;
  if (g_ranks < 1 || g_ranks > TPRT_CUDA_FUSED_MAX_GROUP) {
    fprintf(stderr, "usage: tprt-fused-norm-check [ranks 1..%d] [rounds]\n", TPRT_CUDA_FUSED_MAX_GROUP);
    return 2;
  }
  if (g_gpus > g_ranks) g_gpus = g_ranks;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)g_ranks);
  pthread_t threads[TPRT_MAX_WORLD_SIZE];
  for (int r = 0; r < g_ranks; ++r) pthread_create(&threads[r], NULL, rank_main, (void*)(intptr_t)r);
  for (int r = 0; r < g_ranks; ++r) pthread_join(threads[r], NULL);
  int checks = g_rounds * 2 * NUM_CASES * (REPLAYS + 1) * g_ranks * 2;
  printf(
      "fused_norm: %d ranks on %d GPU(s), %d cases x 2 algorithms x %d rounds, eager and %d graph replays: %d outputs "
      "checked, "
      "%d differ from the composition\n",
      g_ranks, g_gpus, NUM_CASES, g_rounds, REPLAYS, checks, g_failures);
  return g_failures ? 1 : 0;
}
