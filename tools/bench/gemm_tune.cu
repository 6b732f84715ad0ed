// tprt-bench-gemm-tune: how much a fast-mode contraction gains when the cuBLASLt algorithm is timed
// among the heuristic's candidates instead of taking its first answer. For each case (the 1B Llama
// training step's linears by default), the same column-major call as kernels/cuda/gemm/linear_fast.c
// (bf16 operands, f32 accumulation; wgrad results in f32), one line:
//   tune <pass> <M> <N> <K> <first ms> <best ms> <best index> <candidates> <first/best>
// and a last line with the sums weighted by the given call counts.
// Method: CUDA events around 10 back-to-back launches after 3 warm-ups, median of 5 such runs.
// Usage: tprt-bench-gemm-tune [M N K pass count]...   (pass: fwd, dgrad, wgrad, dgrad-acc, wgrad-acc)
// Built by `make cuda` (test/gpu/CMakeLists.txt); its 2026-12-07 H100 run: docs/bench/gemm-tune-1xh100-2026-12-07.txt.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)
#define LK(x)                                                                    \
  do {                                                                           \
    cublasStatus_t s_ = (x);                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
      fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned z = (unsigned)i * 2654435761u ^ seed;
    z ^= z >> 13;
    z *= 0x5bd1e995u;
    z ^= z >> 15;
    p[i] = __float2bfloat16(((float)(z & 0xffff) / 32768.0f - 1.0f));
  }
}

struct Case {
  std::string pass;
  long m, n, k, count;
};

int main(int argc, char** argv) {
  std::vector<Case> cases;
  if (argc > 1) {
    for (int i = 1; i + 4 < argc; i += 5)
      cases.push_back({argv[i + 3], atol(argv[i]), atol(argv[i + 1]), atol(argv[i + 2]), atol(argv[i + 4])});
  } else {
    // The 1B Llama step (8192 tokens, hidden 2048, kv 512, FFN 8192, vocabulary 128256 in two pieces), 16
    // layers: y[M,N] = x[M,K]·w[N,K]ᵀ; dgrad dx[M,K] = dy[M,N]·w; wgrad dw[N,K] = dyᵀ·x.
    const long M = 8192;
    struct L { long n, k, per_layer; } lin[] = {{2048, 2048, 2}, {512, 2048, 2}, {8192, 2048, 2}, {2048, 8192, 1}};
    for (auto& l : lin) {
      cases.push_back({"fwd", M, l.n, l.k, 16 * l.per_layer});
      cases.push_back({"dgrad", M, l.n, l.k, 16 * l.per_layer});
      cases.push_back({"wgrad", M, l.n, l.k, 16 * l.per_layer});
    }
    cases.push_back({"fwd", 4096, 128256, 2048, 2});
    cases.push_back({"dgrad", 4096, 128256, 2048, 2});
    cases.push_back({"wgrad-acc", 4096, 128256, 2048, 2});
  }
  cublasLtHandle_t h;
  LK(cublasLtCreate(&h));
  size_t ws_bytes = 64ull << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  double sum_first = 0, sum_best = 0;
  for (const Case& c : cases) {
    bool wgrad = c.pass.rfind("wgrad", 0) == 0, dgrad = c.pass.rfind("dgrad", 0) == 0;
    bool acc = c.pass.find("-acc") != std::string::npos;
    // Column-major (as linear_fast.c): fwd yᵀ[N,M] = (w as KxN)ᵀ(x as KxM); dgrad dxᵀ[K,M] = (w as KxN)(dy as NxM);
    // wgrad dwᵀ[K,N] = (x as KxM)(dy as NxM)ᵀ.
    cublasOperation_t opa, opb;
    long m, n, k, lda, ldb, ldd;
    if (wgrad) { opa = CUBLAS_OP_N; opb = CUBLAS_OP_T; m = c.k; n = c.n; k = c.m; lda = c.k; ldb = c.n; ldd = c.k; }
    else if (dgrad) { opa = CUBLAS_OP_N; opb = CUBLAS_OP_N; m = c.k; n = c.m; k = c.n; lda = c.k; ldb = c.n; ldd = c.k; }
    else { opa = CUBLAS_OP_T; opb = CUBLAS_OP_N; m = c.n; n = c.m; k = c.k; lda = c.k; ldb = c.k; ldd = c.n; }
    cudaDataType_t dt = wgrad ? CUDA_R_32F : CUDA_R_16BF;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nd = (size_t)m * n;
    __nv_bfloat16 *a, *b;
    void* d;
    CK(cudaMalloc(&a, na * 2));
    CK(cudaMalloc(&b, nb * 2));
    CK(cudaMalloc(&d, nd * (wgrad ? 4 : 2)));
    fill<<<1024, 256>>>(a, na, 1);
    fill<<<1024, 256>>>(b, nb, 2);
    CK(cudaMemset(d, 0, nd * (wgrad ? 4 : 2)));
    cublasLtMatmulDesc_t desc;
    LK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    bool ta = opa == CUBLAS_OP_T, tb = opb == CUBLAS_OP_T;
    cublasLtMatrixLayout_t la, lb, lc;
    LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    LK(cublasLtMatrixLayoutCreate(&lc, dt, m, n, ldd));
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t res[32];
    int found = 0;
    LK(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 32, res, &found));
    float alpha = 1, beta = acc ? 1 : 0;
    auto time_algo = [&](int i) -> double {
      for (int w = 0; w < 3; ++w)
        if (cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, d, lc, d, lc, &res[i].algo, ws, ws_bytes, st) !=
            CUBLAS_STATUS_SUCCESS)
          return -1;
      std::vector<double> runs;
      for (int r = 0; r < 5; ++r) {
        CK(cudaEventRecord(e0, st));
        for (int j = 0; j < 10; ++j) cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, d, lc, d, lc, &res[i].algo, ws, ws_bytes, st);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        runs.push_back(ms / 10);
      }
      std::sort(runs.begin(), runs.end());
      return runs[2];
    };
    double first = time_algo(0), best = first;
    int best_i = 0;
    for (int i = 1; i < found; ++i) {
      double t = time_algo(i);
      if (t > 0 && t < best) best = t, best_i = i;
    }
    double flops = 2.0 * c.m * c.n * c.k;
    printf("tune %-9s %6ld %6ld %6ld  %8.4f %8.4f  %2d of %2d  %.3f  (%.0f / %.0f TF/s)\n", c.pass.c_str(), c.m, c.n, c.k,
           first, best, best_i, found, first / best, flops / first / 1e9, flops / best / 1e9);
    fflush(stdout);
    sum_first += first * c.count;
    sum_best += best * c.count;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(d));
  }
  printf("total (weighted by call counts): first %.3f ms, best %.3f ms, %.3f\n", sum_first, sum_best, sum_first / sum_best);
  return 0;
}
