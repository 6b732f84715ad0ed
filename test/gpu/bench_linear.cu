// tprt-bench-linear: times tprt_cuda_linear (exact mode: canonical K chunks, fma in a fixed
// order, no tensor cores) on transformer GEMM shapes, bf16 in and out. One line per shape:
//   linear M N K chunks median_ms tflops
// test/gpu/bench_peer.py times the peer (PyTorch bf16 matmul, i.e. cuBLAS with tensor cores) on
// the same shapes in the same run and prints the ratios. Median of 20 launches after 3 warm-ups,
// CUDA events on one stream.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_cuda.cuh"
#include "tpc_cli.h"
#include "tprt_cuda_kernels.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

static int bench_cmp(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return (x > y) - (x < y);
}

static const tpc_cli_option_t kOptions[] = {{NULL, 0, NULL, NULL, 0}};
static const tpc_cli_t kCli = {"tprt-bench-linear", "the dense linear kernels at Llama-70B MLP shapes",
                               "[M N K]   (one more shape to time)", kOptions, false, NULL, NULL};

int main(int argc, char** argv) {
  tpc_cli_state_t st = {};
  int words = 0;
  for (int id; (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END; ++words) {
    if (id == TPC_CLI_EXIT) return 0;
    if (id == TPC_CLI_ERROR) return 2;
  }
  if (words != 0 && words != 3) {
    tpc_cli_error(&kCli, "give no shape or one as M N K (see --help)");
    return 2;
  }
  // Llama-70B-like MLP GEMMs (h = 8192, ffn = 28672, 4096 tokens): FC1 and FC2 at TP = 8, and a
  // square h x h projection at TP = 1. argv may give one more "M N K".
  long long shapes[4][3] = {{4096, 7168, 8192}, {4096, 8192, 3584}, {4096, 8192, 8192}, {0, 0, 0}};
  int nshapes = 3;
  if (argc == 4) {
    shapes[3][0] = atoll(argv[1]), shapes[3][1] = atoll(argv[2]), shapes[3][2] = atoll(argv[3]);
    nshapes = 4;
  }
  const int chunks = 8, warm = 3, reps = 20;
  cudaStream_t stream;
  TPC_BENCH_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  TPC_BENCH_CUDA(cudaEventCreate(&e0));
  TPC_BENCH_CUDA(cudaEventCreate(&e1));
  for (int s = 0; s < nshapes; ++s) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    void *xd, *wd, *yd;
    TPC_BENCH_CUDA(cudaMalloc(&xd, (size_t)(m * k * 2)));
    TPC_BENCH_CUDA(cudaMalloc(&wd, (size_t)(n * k * 2)));
    TPC_BENCH_CUDA(cudaMalloc(&yd, (size_t)(m * n * 2)));
    // 0x3c00 patterns: small finite bf16 values (the timing does not depend on them).
    TPC_BENCH_CUDA(cudaMemset(xd, 0x3c, (size_t)(m * k * 2)));
    TPC_BENCH_CUDA(cudaMemset(wd, 0x3b, (size_t)(n * k * 2)));
    int64_t xdims[2] = {m, k}, wdims[2] = {n, k}, ydims[2] = {m, n};
    tprt_tensor_t x = tprt_tensor_make(xd, TPRT_DTYPE_BF16, 2, xdims);
    tprt_tensor_t w = tprt_tensor_make(wd, TPRT_DTYPE_BF16, 2, wdims);
    tprt_tensor_t y = tprt_tensor_make(yd, TPRT_DTYPE_BF16, 2, ydims);
    float ms[64];
    for (int i = 0; i < warm + reps; ++i) {
      TPC_BENCH_CUDA(cudaEventRecord(e0, stream));
      tprt_status_t st = tprt_cuda_linear(&x, &w, NULL, &y, chunks, stream);
      if (st) {
        fprintf(stderr, "tprt_cuda_linear: %s\n", tprt_status_message(st));
        tprt_status_free(st);
        return 1;
      }
      TPC_BENCH_CUDA(cudaEventRecord(e1, stream));
      TPC_BENCH_CUDA(cudaEventSynchronize(e1));
      if (i >= warm) TPC_BENCH_CUDA(cudaEventElapsedTime(&ms[i - warm], e0, e1));
    }
    qsort(ms, reps, sizeof ms[0], bench_cmp);
    float med = ms[reps / 2];
    printf("linear %lld %lld %lld %d %.4f %.2f\n", (long long)m, (long long)n, (long long)k, chunks, med,
           2.0 * m * n * k / (med * 1e-3) / 1e12);
    fflush(stdout);
    TPC_BENCH_CUDA(cudaFree(xd));
    TPC_BENCH_CUDA(cudaFree(wd));
    TPC_BENCH_CUDA(cudaFree(yd));
  }
  return 0;
}
