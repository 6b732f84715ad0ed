// Shared by the CUDA benchmark programs (bench_gemm.cu, bench_attention.cu, test/gpu/bench_linear.cu):
// fail-fast wrappers for CUDA calls and tpc statuses, and the random bf16 fill of their inputs.
#ifndef TPC_BENCH_CUDA_CUH_
#define TPC_BENCH_CUDA_CUH_

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tprt_numerics.h"
#include "tprt_status.h"

/// Exits with status 2 and the call's text when a CUDA call fails.
#define TPC_BENCH_CUDA(expr)                                                                 \
  do {                                                                                       \
    cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

/// Exits with status 1 and "<what>: <message>" when |s| is a failure.
static inline void tpc_bench_ok(tprt_status_t s, const char* what) {
  if (!s) return;
  fprintf(stderr, "%s: %s\n", what, tprt_status_message(s));
  exit(1);
}

/// Uniform values in [-1, 1) rounded to bf16, a splitmix64 hash of each index and |seed|.
__global__ void tpc_bench_fill_bf16(uint16_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    float u = (float)((int64_t)((z ^ (z >> 31)) >> 40) - (1 << 23)) * 0x1p-23f;
    p[i] = tprt_f32_to_bf16(u);
  }
}

#endif  // TPC_BENCH_CUDA_CUH_
