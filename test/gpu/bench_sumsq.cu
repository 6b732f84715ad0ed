// tprt-bench-sumsq: times tprt_cuda_sumsq (the exact sum of squares of the gradient norm,
// kernels/cuda/model/optim.cu), tprt_cuda_sumsq_cut (invariant numerics: the squares cut to 24
// bits) and tprt_cuda_sumsq_fast (fast numerics' f64 sums) on one tensor of
// each size given, and on the 130 gradients of the 1B Llama (tools/bench/llama1b_config.json) one
// after the other, as a training step chains them. One line per kernel and case:
//   sumsq <kernel> <case> elements median_us GB/s norm
// f32 elements drawn N(0, 1e-3) (a gradient's spread of binades). Median of 20 runs after 3
// warm-ups, CUDA events on one stream. Also checks that every grid gives the accumulator of one
// block (the sum is exact: no partition changes it).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_cuda_kernels.h"
#include "tprt_numerics.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));     \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static int cmp_f(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return (x > y) - (x < y);
}

__global__ void fill_normal(float* p, int64_t n, float sigma, uint32_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    // Box-Muller on a hashed counter: a spread of magnitudes like a gradient's.
    uint32_t a = (uint32_t)i * 2654435761u ^ seed, b = (uint32_t)(i >> 32) * 40503u + a * 747796405u + 2891336453u;
    a ^= a >> 16, a *= 0x7feb352du, a ^= a >> 15, b ^= b >> 16, b *= 0x846ca68bu, b ^= b >> 13;
    float u1 = ((a >> 8) + 1) * (1.0f / 16777217.0f), u2 = (b >> 8) * (1.0f / 16777216.0f);
    p[i] = sigma * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
  }
}

// The whole chain of |k| tensors: acc0 -> acc1 -> ... as tp.sumsq ops do; returns the microseconds
// (median) and leaves the final accumulator in |out|.
typedef tprt_status_t (*sumsq_fn)(const tprt_tensor_t*, const tprt_tensor_t*, tprt_tensor_t*, bool, cudaStream_t);
static float time_chain(sumsq_fn fn, float** g, const int64_t* n, int k, int64_t* acc_a, int64_t* acc_b,
                        int64_t* out, cudaStream_t s) {
  float ms[20];
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int rep = -3; rep < 20; ++rep) {
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < k; ++i) {
      int64_t dg[1] = {n[i]}, dw[1] = {TPRT_SUMSQ_WORDS};
      tprt_tensor_t gt = tprt_tensor_make(g[i], TPRT_DTYPE_F32, 1, dg);
      tprt_tensor_t in = tprt_tensor_make(i % 2 ? acc_a : acc_b, TPRT_DTYPE_I64, 1, dw);
      tprt_tensor_t ot = tprt_tensor_make(i % 2 ? acc_b : acc_a, TPRT_DTYPE_I64, 1, dw);
      tprt_status_t st = fn(&gt, i ? &in : NULL, &ot, true, s);
      if (st) {
        fprintf(stderr, "sumsq: %s\n", tprt_status_message(st));
        exit(1);
      }
    }
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    if (rep >= 0) CK(cudaEventElapsedTime(&ms[rep], e0, e1));
  }
  qsort(ms, 20, sizeof(float), cmp_f);
  CK(cudaMemcpy(out, (k - 1) % 2 ? acc_b : acc_a, TPRT_SUMSQ_WORDS * sizeof(int64_t), cudaMemcpyDeviceToHost));
  return ms[10] * 1000.0f;
}

int main(int argc, char** argv) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int64_t *acc_a, *acc_b;
  CK(cudaMalloc(&acc_a, TPRT_SUMSQ_WORDS * sizeof(int64_t)));
  CK(cudaMalloc(&acc_b, TPRT_SUMSQ_WORDS * sizeof(int64_t)));
  // Single tensors.
  int64_t sizes[8] = {262668288, 33554432, 4194304, 2048};
  int nsizes = 4;
  for (int a = 1; a < argc && nsizes < 8; ++a) sizes[nsizes++] = atoll(argv[a]);
  const struct {
    const char* name;
    sumsq_fn fn;
  } kernels[] = {{"exact", tprt_cuda_sumsq}, {"cut", tprt_cuda_sumsq_cut}, {"fast", tprt_cuda_sumsq_fast}};
  for (int c = 0; c < nsizes; ++c) {
    float* g;
    CK(cudaMalloc(&g, (size_t)sizes[c] * 4));
    fill_normal<<<1024, 256, 0, s>>>(g, sizes[c], 1e-3f, 7u + c);
    for (const auto& kn : kernels) {
      int64_t out[TPRT_SUMSQ_WORDS];
      float us = time_chain(kn.fn, &g, &sizes[c], 1, acc_a, acc_b, out, s);
      printf("sumsq %s one %lld %.1f us %.0f GB/s norm %.9g\n", kn.name, (long long)sizes[c], us,
             sizes[c] * 4.0 / us / 1e3, (double)tprt_sumsq_norm(out));
    }
    CK(cudaFree(g));
  }
  // The 1B Llama's 130 gradients (16 layers of q, k, v, o, fc1, fc2 and two norms; the tied
  // embedding; the final norm), one allocation.
  int64_t n[130];
  int k = 0;
  n[k++] = 128256LL * 2048;
  for (int l = 0; l < 16; ++l) {
    int64_t layer[8] = {2048, 2048LL * 2048, 512LL * 2048, 512LL * 2048, 2048LL * 2048, 2048, 16384LL * 2048, 2048LL * 8192};
    for (int j = 0; j < 8; ++j) n[k++] = layer[j];
  }
  n[k++] = 2048;
  int64_t total = 0;
  for (int i = 0; i < k; ++i) total += n[i];
  float* all;
  CK(cudaMalloc(&all, (size_t)total * 4));
  fill_normal<<<1024, 256, 0, s>>>(all, total, 1e-3f, 99u);
  float* g[130];
  for (int i = 0; i < k; ++i) g[i] = i ? g[i - 1] + n[i - 1] : all;
  int fails = 0;
  for (const auto& kn : kernels) {
    int64_t out[TPRT_SUMSQ_WORDS];
    float us = time_chain(kn.fn, g, n, k, acc_a, acc_b, out, s);
    printf("sumsq %s llama1b %d tensors %lld elements %.1f us %.0f GB/s norm %.9g\n", kn.name, k, (long long)total,
           us, total * 4.0 / us / 1e3, (double)tprt_sumsq_norm(out));
    // The exact and cut sums over one tensor: the same words (no partition changes them).
    if (kn.fn != tprt_cuda_sumsq_fast) {
      int64_t one[TPRT_SUMSQ_WORDS];
      time_chain(kn.fn, &all, &total, 1, acc_a, acc_b, one, s);
      bool same = memcmp(out, one, sizeof out) == 0;
      printf("sumsq %s chain == one tensor: %s\n", kn.name, same ? "PASS" : "FAIL");
      fails += !same;
    }
  }
  return fails != 0;
}
