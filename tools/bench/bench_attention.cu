// tprt-bench-attention: tpc's attention kernels timed on one GPU, one case per run:
//   tprt-bench-attention B S HQ HKV D causal|full
// prints "attention fwd <kernel> <median ms>" and "attention bwd <kernel> <median ms>" for the
// tensor-core kernels (fast and invariant modes; the forward writes the softmax statistics that the
// backward reads, as in a training step) and, for small problems, the exact ones.
// tools/bench/attention.py times PyTorch's scaled_dot_product_attention on the same case right
// after, and prints the ratios. Inputs: random bf16 in [-1, 1); CUDA events, median of 10 after 3
// warm-ups.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "tpc_cli.h"
#include "tprt_cuda_kernels.h"
#include "tprt_numerics.h"
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "bench_cuda.cuh"

/// A device bf16 [rows, cols] tensor of random values (seed 0: an f32 tensor, left unset).
struct ba_tensor {
  tprt_tensor_t t;
  int64_t dims[2];
  ba_tensor(int64_t rows, int64_t cols, uint64_t seed) {
    dims[0] = rows, dims[1] = cols;
    void* p = nullptr;
    TPC_BENCH_CUDA(cudaMalloc(&p, (size_t)(rows * cols) * (seed ? 2 : 4)));
    t = tprt_tensor_make(p, seed ? TPRT_DTYPE_BF16 : TPRT_DTYPE_F32, 2, dims);
    if (seed == 0) return;
    tpc_bench_fill_bf16<<<1024, 256>>>((uint16_t*)p, rows * cols, seed);
    TPC_BENCH_CUDA(cudaGetLastError());
  }
  ba_tensor(const ba_tensor&) = delete;
  ba_tensor& operator=(const ba_tensor&) = delete;
  ~ba_tensor() { cudaFree(t.data); }
};

/// Median milliseconds of |fn| over 10 runs after 3 warm-ups.
template <class F>
static double ba_time(F fn, cudaStream_t s) {
  cudaEvent_t e0, e1;
  TPC_BENCH_CUDA(cudaEventCreate(&e0));
  TPC_BENCH_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 13; ++i) {
    TPC_BENCH_CUDA(cudaEventRecord(e0, s));
    fn();
    TPC_BENCH_CUDA(cudaEventRecord(e1, s));
    TPC_BENCH_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    TPC_BENCH_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

static const char kBaUsage[] = "usage: tprt-bench-attention B S HQ HKV D causal|full\n";
static const tpc_cli_option_t kBaOptions[] = {{NULL, 0, NULL, NULL, 0}};
static void ba_more_help(FILE* out) {
  fputs(kBaUsage, out);
  fputs("tools/bench/attention.py runs the cases with PyTorch's scaled_dot_product_attention as the peer.\n", out);
}
static const tpc_cli_t kBaCli = {"tprt-bench-attention", "tpc's attention kernels timed on one GPU",
                                 "B S HQ HKV D causal|full", kBaOptions, false, NULL, ba_more_help};

int main(int argc, char** argv) {
  tpc_cli_state_t st = {};
  for (int id; (id = tpc_cli_next(&kBaCli, argc, argv, &st)) != TPC_CLI_END;) {
    if (id == TPC_CLI_EXIT) return 0;
    if (id == TPC_CLI_ERROR) return 2;
  }
  if (argc != 7 || (strcmp(argv[6], "causal") != 0 && strcmp(argv[6], "full") != 0)) {
    fputs(kBaUsage, stderr);
    return 2;
  }
  const int64_t b = atoll(argv[1]), l = atoll(argv[2]), hq = atoll(argv[3]), hkv = atoll(argv[4]), d = atoll(argv[5]);
  const bool causal = strcmp(argv[6], "causal") == 0;
  if (b < 1 || l < 1 || hq < 1 || hkv < 1 || d < 1 || hq % hkv != 0) {
    fputs(kBaUsage, stderr);
    return 2;
  }
  const int64_t t = b * l;
  cudaStream_t s;
  TPC_BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ba_tensor q(t, hq * d, 1), k(t, hkv * d, 2), v(t, hkv * d, 3), dy(t, hq * d, 4);
  ba_tensor y(t, hq * d, 5), dq(t, hq * d, 6), dk(t, hkv * d, 7), dv(t, hkv * d, 8), lse(t, hq, 0);
  TPC_BENCH_CUDA(cudaDeviceSynchronize());
  // As in a training step: the forward keeps its softmax statistics (lse) and the backward reads them.
  double f = ba_time([&] { tpc_bench_ok(tprt_cuda_attention_tc(&q.t, &k.t, &v.t, NULL, &y.t, &lse.t, l, d, causal, 0.0f, s), "fwd"); }, s);
  printf("attention fwd tc %.4f\n", f);
  double g = ba_time(
      [&] {
        tpc_bench_ok(tprt_cuda_attention_grad_tc(&q.t, &k.t, &v.t, &y.t, &dy.t, &lse.t, &dq.t, &dk.t, &dv.t, l, d, causal, 0.0f, s),
              "bwd");
      },
      s);
  printf("attention bwd tc %.4f\n", g);
  // The exact kernels (CUDA cores) for problems where they take well under a second.
  if ((double)t * (double)l * (double)hq * (double)d <= 4e11) {
    double e = ba_time([&] { tpc_bench_ok(tprt_cuda_attention(&q.t, &k.t, &v.t, NULL, &y.t, NULL, l, d, causal, 0.0f, s), "exact"); }, s);
    printf("attention fwd exact %.4f\n", e);
  }
  TPC_BENCH_CUDA(cudaStreamDestroy(s));
  return 0;
}
