// tprt-bench-gemm: times tpc's contraction kernels on transformer shapes, bf16 in and out, one line
// per measurement:
//   dense <pass> <mode> <M> <N> <K> <median ms>        pass: fwd (y = x·wᵀ), dgrad (dx = dy·w),
//                                                      wgrad (dw = dyᵀ·x)
//   grouped <pass> <mode> <E> <T> <N> <K> <dist> <median ms>   dist: uniform or skewed counts
//   mlp <mode> <E> <T> <H> <F> <dist> <median ms>       the fused grouped SwiGLU MLP forward
//   (grouped and mlp: modes fast and invariant)
//   glu-epilogue <fwd|bwd> <mode> <E> <T> <H> <F> <dist> <fused ms> <separate ms>   the GLU in the
//       grouped GEMM's epilogue (FC1 + GLU; FC2 dgrad + GLU gradient) against the GEMM then the GLU
//       kernel; gemm.py prints these lines as they are
//   exact <pass> <dtype> <M> <N> <K> <chunks> <median ms> <TFLOP/s>   the exact kernels (bf16 and
//       f32 operands; pass fwd, dgrad, wgrad, or grouped-fwd/-dgrad/-wgrad with M = T tokens over
//       8 experts); gemm.py ignores these lines
// mode: fast (cuBLASLt / CUTLASS; for M <= 2 also "skinny", linear_skinny.cu, the kernel fast
// numerics runs there, forward only), or exact (the CUDA-core kernels that invariant and exact
// numerics run today; only on the smaller shapes, they are ~40x slower). tools/bench/gemm.py runs
// this, times the PyTorch peers on the same shapes in the same run and prints the ratios.
//
// Method: CUDA events around each launch on one stream, median of |reps| after 3 warm-ups;
// operands are random bf16 in [-1, 1) (never zeros), several input sets rotated when they are
// small enough to sit in L2.
// Usage: tprt-bench-gemm [quick | list [quick] | exact | dense M N K [with-exact] |
//                         grouped E T N K uniform|skewed | mlp E T H F uniform|skewed]
// No argument: every case (bg_cases) in turn; quick: a few, for a smoke run; list: the cases, one
// per line, each as the arguments that run it alone (exact: the exact kernels' lines; dense,
// grouped, mlp: the lines of one shape, also for profiling a kernel). TPRT_BENCH_CHUNKS=C sets the
// chunk count of the invariant and exact kernels (default 8).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gemm/tprt_cuda_skinny.h"
#include "tpc_cli.h"
#include "tprt_cuda_kernels.h"
#include "tprt_numerics.h"
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "bench_cuda.cuh"

__global__ void bg_fill_f32(float* p, int64_t n, uint64_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = (float)((int64_t)((z ^ (z >> 31)) >> 40) - (1 << 23)) * 0x1p-23f;
  }
}

/// A device bf16 (or |dtype|) tensor of random values.
struct bg_tensor {
  tprt_tensor_t t;
  int64_t dims[3];
  bg_tensor(std::initializer_list<int64_t> d, int dtype = TPRT_DTYPE_BF16, bool random = true) {
    int r = 0;
    for (int64_t v : d) dims[r++] = v;
    void* p = nullptr;
    t = tprt_tensor_make(nullptr, dtype, r, dims);
    size_t bytes = tprt_tensor_bytes(&t);
    TPC_BENCH_CUDA(cudaMalloc(&p, bytes ? bytes : 16));
    t.data = p;
    static uint64_t seed = 1;
    if (random && dtype == TPRT_DTYPE_BF16) tpc_bench_fill_bf16<<<1024, 256>>>((uint16_t*)p, (int64_t)(bytes / 2), seed++);
    if (random && dtype == TPRT_DTYPE_F32) bg_fill_f32<<<1024, 256>>>((float*)p, (int64_t)(bytes / 4), seed++);
    TPC_BENCH_CUDA(cudaGetLastError());
  }
  ~bg_tensor() { cudaFree(t.data); }
};

static float bg_time(const std::function<void(int)>& run, int reps, cudaStream_t s) {
  cudaEvent_t e0, e1;
  TPC_BENCH_CUDA(cudaEventCreate(&e0));
  TPC_BENCH_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 3 + reps; ++i) {
    TPC_BENCH_CUDA(cudaEventRecord(e0, s));
    run(i);
    TPC_BENCH_CUDA(cudaEventRecord(e1, s));
    TPC_BENCH_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    TPC_BENCH_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms[ms.size() / 2];
}

// tp.chunks of the invariant and exact kernels (TPRT_BENCH_CHUNKS; default 8, tpc's default).
static int bg_chunks = 8;

static int bg_reps(double flops) { return flops > 5e12 ? 5 : flops > 5e11 ? 10 : 20; }

static void bg_dense(tprt_cuda_lt_t* lt, cudaStream_t s, int64_t m, int64_t n, int64_t k, bool exact) {
  // Input sets rotated when one set is small (the weights of a decode step fit in L2).
  const size_t set_bytes = (size_t)(m * k + n * k + m * n) * 2;
  const int sets = set_bytes < ((size_t)64 << 20) ? 4 : 1;
  std::vector<bg_tensor*> xs, ws, dys;
  for (int i = 0; i < sets; ++i) {
    xs.push_back(new bg_tensor({m, k}));
    ws.push_back(new bg_tensor({n, k}));
    dys.push_back(new bg_tensor({m, n}));
  }
  bg_tensor y({m, n}, TPRT_DTYPE_BF16, false), dx({m, k}, TPRT_DTYPE_BF16, false), dw({n, k}, TPRT_DTYPE_BF16, false);
  const double flops = 2.0 * m * n * k;
  // fast: cuBLASLt; invariant: the chunk-tree tensor-core GEMM where it fits (else the exact
  // kernel, as the backend's table does: the mode is printed as "invariant-exact"); exact.
  const char* modes[] = {"fast", "invariant", "exact"};
  const int chunks = bg_chunks;
  for (int mode = 0; mode < (exact ? 3 : 2); ++mode) {
    int reps = mode == 2 ? 3 : bg_reps(flops);
    bool inv_f = tprt_cuda_linear_invariant_fits(&xs[0]->t, &ws[0]->t, nullptr, &y.t, chunks);
    bool inv_d = tprt_cuda_linear_dgrad_invariant_fits(&dys[0]->t, &ws[0]->t, &dx.t, chunks);
    bool inv_w = tprt_cuda_linear_wgrad_invariant_fits(&dys[0]->t, &xs[0]->t, &dw.t, chunks);
    if (mode == 1 && (!inv_f || !inv_d || !inv_w) && flops > 1e12) continue;  // the exact fallback is too slow here
    auto label = [&](bool fits) { return mode == 1 && !fits ? "invariant-exact" : modes[mode]; };
    float f = bg_time(
        [&](int i) {
          const tprt_tensor_t *x = &xs[i % sets]->t, *w = &ws[i % sets]->t;
          tpc_bench_ok(mode == 0            ? tprt_cuda_linear_fast(x, w, nullptr, &y.t, lt, s)
                : mode == 1 && inv_f ? tprt_cuda_linear_invariant(x, w, nullptr, &y.t, chunks, s)
                                     : tprt_cuda_linear(x, w, nullptr, &y.t, chunks, s),
                "linear");
        },
        reps, s);
    printf("dense fwd %s %lld %lld %lld %.4f\n", label(inv_f), (long long)m, (long long)n, (long long)k, f);
    float d = bg_time(
        [&](int i) {
          const tprt_tensor_t *g = &dys[i % sets]->t, *w = &ws[i % sets]->t;
          tpc_bench_ok(mode == 0            ? tprt_cuda_linear_dgrad_fast(g, w, &dx.t, lt, s)
                : mode == 1 && inv_d ? tprt_cuda_linear_dgrad_invariant(g, w, &dx.t, chunks, 1, 1, s)
                                     : tprt_cuda_linear_dgrad_segmented(g, w, &dx.t, chunks, 1, 1, s),
                "dgrad");
        },
        reps, s);
    printf("dense dgrad %s %lld %lld %lld %.4f\n", label(inv_d), (long long)m, (long long)n, (long long)k, d);
    float w = bg_time(
        [&](int i) {
          const tprt_tensor_t *g = &dys[i % sets]->t, *x = &xs[i % sets]->t;
          tpc_bench_ok(mode == 0            ? tprt_cuda_linear_wgrad_fast(g, x, &dw.t, lt, s)
                : mode == 1 && inv_w ? tprt_cuda_linear_wgrad_invariant(g, x, &dw.t, chunks, s)
                                     : tprt_cuda_linear_wgrad(g, x, &dw.t, chunks, s),
                "wgrad");
        },
        reps, s);
    printf("dense wgrad %s %lld %lld %lld %.4f\n", label(inv_w), (long long)m, (long long)n, (long long)k, w);
    fflush(stdout);
  }
  // A decoding step's few rows: the skinny kernel, fast numerics' choice for M <= 2.
  if (tprt_cuda_linear_skinny_fits(&xs[0]->t, &ws[0]->t, nullptr, &y.t)) {
    float f = bg_time(
        [&](int i) {
          tpc_bench_ok(tprt_cuda_linear_skinny(&xs[i % sets]->t, &ws[i % sets]->t, nullptr, &y.t, s), "skinny");
        },
        bg_reps(flops), s);
    printf("dense fwd skinny %lld %lld %lld %.4f\n", (long long)m, (long long)n, (long long)k, f);
    fflush(stdout);
  }
  for (int i = 0; i < sets; ++i) delete xs[i], delete ws[i], delete dys[i];
}

static void bg_exact_line(const char* pass, int dtype, int64_t m, int64_t n, int64_t k, float ms) {
  printf("exact %s %s %lld %lld %lld %d %.4f %.2f\n", pass, tprt_dtype_name(dtype), (long long)m, (long long)n,
         (long long)k, bg_chunks, ms, 2.0 * m * n * k / (ms * 1e-3) / 1e12);
  fflush(stdout);
}

/// The exact kernels (exact numerics, and invariant mode's fallback) on an m x n x k product with
/// |dtype| operands and outputs: forward, dgrad (plain order), wgrad.
static void bg_exact_dense(cudaStream_t s, int dtype, int64_t m, int64_t n, int64_t k) {
  bg_tensor x({m, k}, dtype), w({n, k}, dtype), dy({m, n}, dtype);
  bg_tensor y({m, n}, dtype, false), dx({m, k}, dtype, false), dw({n, k}, dtype, false);
  const int reps = 5, chunks = bg_chunks;
  float f = bg_time([&](int) { tpc_bench_ok(tprt_cuda_linear(&x.t, &w.t, nullptr, &y.t, chunks, s), "linear"); }, reps, s);
  bg_exact_line("fwd", dtype, m, n, k, f);
  float d = bg_time([&](int) { tpc_bench_ok(tprt_cuda_linear_dgrad_segmented(&dy.t, &w.t, &dx.t, chunks, 1, 1, s), "dgrad"); },
                    reps, s);
  bg_exact_line("dgrad", dtype, m, k, n, d);
  float g = bg_time([&](int) { tpc_bench_ok(tprt_cuda_linear_wgrad(&dy.t, &x.t, &dw.t, chunks, s), "wgrad"); }, reps, s);
  bg_exact_line("wgrad", dtype, n, k, m, g);
}

static std::vector<int64_t> bg_counts(int64_t t, int64_t e, bool skewed);

/// The exact grouped kernels: t tokens over e experts (uniform counts), n x k weights.
static void bg_exact_grouped(cudaStream_t s, int dtype, int64_t e, int64_t t, int64_t n, int64_t k) {
  std::vector<int64_t> counts = bg_counts(t, e, false);
  bg_tensor gs({e}, TPRT_DTYPE_I64, false);
  TPC_BENCH_CUDA(cudaMemcpy(gs.t.data, counts.data(), counts.size() * 8, cudaMemcpyHostToDevice));
  bg_tensor x({t, k}, dtype), w({e, n, k}, dtype), dy({t, n}, dtype);
  bg_tensor y({t, n}, dtype, false), dx({t, k}, dtype, false), dw({e, n, k}, dtype, false);
  const int reps = 3, chunks = bg_chunks;
  float f =
      bg_time([&](int) { tpc_bench_ok(tprt_cuda_grouped_linear(&x.t, &w.t, &gs.t, &y.t, chunks, s), "grouped"); }, reps, s);
  bg_exact_line("grouped-fwd", dtype, t, n, k, f);
  float d = bg_time(
      [&](int) {
        tpc_bench_ok(tprt_cuda_grouped_linear_dgrad_segmented(&dy.t, &w.t, &gs.t, &dx.t, chunks, 1, 1, s), "grouped dgrad");
      },
      reps, s);
  bg_exact_line("grouped-dgrad", dtype, t, k, n, d);
  float g = bg_time(
      [&](int) { tpc_bench_ok(tprt_cuda_grouped_linear_wgrad(&dy.t, &x.t, &gs.t, &dw.t, chunks, s), "grouped wgrad"); }, reps,
      s);
  bg_exact_line("grouped-wgrad", dtype, n, k, t, g);
}

/// Counts of E experts over T rows: uniform, or skewed (Zipf-like weights 1/(j+1), shuffled).
static std::vector<int64_t> bg_counts(int64_t t, int64_t e, bool skewed) {
  std::vector<int64_t> c((size_t)e, t / e);
  if (skewed) {
    double sum = 0;
    for (int64_t j = 0; j < e; ++j) sum += 1.0 / (double)(j + 1);
    int64_t left = t;
    for (int64_t j = 0; j < e; ++j) {
      c[(size_t)j] = (int64_t)floor((double)t / (double)(j + 1) / sum);
      left -= c[(size_t)j];
    }
    c[0] += left;
    for (int64_t j = e - 1; j > 0; --j) std::swap(c[(size_t)j], c[(size_t)((j * 7919) % (j + 1))]);
  } else {
    c[0] += t - (t / e) * e;
  }
  return c;
}

static void bg_grouped(cudaStream_t s, int64_t e, int64_t t, int64_t n, int64_t k, bool skewed) {
  std::vector<int64_t> counts = bg_counts(t, e, skewed);
  bg_tensor gs({e}, TPRT_DTYPE_I64, false);
  TPC_BENCH_CUDA(cudaMemcpy(gs.t.data, counts.data(), counts.size() * 8, cudaMemcpyHostToDevice));
  bg_tensor x({t, k}), w({e, n, k}), dy({t, n});
  bg_tensor y({t, n}, TPRT_DTYPE_BF16, false), dx({t, k}, TPRT_DTYPE_BF16, false),
      dw({e, n, k}, TPRT_DTYPE_BF16, false);
  const double flops = 2.0 * t * n * k;
  const char* dist = skewed ? "skewed" : "uniform";
  const int chunks = bg_chunks;
  // fast: CUTLASS's grouped GEMM; invariant: the chunk-tree grouped GEMM (where it fits).
  for (int inv = 0; inv < 2; ++inv) {
    const char* mode = inv ? "invariant" : "fast";
    if (inv && (!tprt_cuda_grouped_invariant_fits(&x.t, &w.t, &gs.t, &y.t, 0, chunks) ||
                !tprt_cuda_grouped_invariant_fits(&dy.t, &w.t, &gs.t, &dx.t, 1, chunks)))
      continue;
    float f = bg_time(
        [&](int) {
          tpc_bench_ok(inv ? tprt_cuda_grouped_linear_invariant(&x.t, &w.t, &gs.t, &y.t, chunks, s)
                    : tprt_cuda_grouped_linear_fast(&x.t, &w.t, &gs.t, &y.t, s),
                "grouped");
        },
        bg_reps(flops), s);
    printf("grouped fwd %s %lld %lld %lld %lld %s %.4f\n", mode, (long long)e, (long long)t, (long long)n,
           (long long)k, dist, f);
    float d = bg_time(
        [&](int) {
          tpc_bench_ok(inv ? tprt_cuda_grouped_linear_dgrad_invariant(&dy.t, &w.t, &gs.t, &dx.t, chunks, 1, 1, s)
                    : tprt_cuda_grouped_linear_dgrad_fast(&dy.t, &w.t, &gs.t, &dx.t, s),
                "grouped dgrad");
        },
        bg_reps(flops), s);
    printf("grouped dgrad %s %lld %lld %lld %lld %s %.4f\n", mode, (long long)e, (long long)t, (long long)n,
           (long long)k, dist, d);
    float g = bg_time(
        [&](int) {
          tpc_bench_ok(inv ? tprt_cuda_grouped_linear_wgrad_invariant(&dy.t, &x.t, &gs.t, &dw.t, s)
                    : tprt_cuda_grouped_linear_wgrad_fast(&dy.t, &x.t, &gs.t, &dw.t, s),
                "grouped wgrad");
        },
        bg_reps(flops), s);
    printf("grouped wgrad %s %lld %lld %lld %lld %s %.4f\n", mode, (long long)e, (long long)t, (long long)n,
           (long long)k, dist, g);
    fflush(stdout);
  }
}

static void bg_mlp(cudaStream_t s, int64_t e, int64_t t, int64_t h, int64_t f, bool skewed) {
  std::vector<int64_t> counts = bg_counts(t, e, skewed);
  bg_tensor gs({e}, TPRT_DTYPE_I64, false);
  TPC_BENCH_CUDA(cudaMemcpy(gs.t.data, counts.data(), counts.size() * 8, cudaMemcpyHostToDevice));
  bg_tensor x({t, h}), w1({e, 2 * f, h}), w2({e, h, f}), y({t, h}, TPRT_DTYPE_BF16, false);
  for (int inv = 0; inv < 2; ++inv) {
    float ms = bg_time(
        [&](int) {
          tpc_bench_ok(inv ? tprt_cuda_fused_grouped_mlp_invariant(&x.t, &w1.t, &w2.t, &gs.t, &y.t, TPRT_GLU_SWIGLU, 0,
                                                            1.702f, 7.0f, bg_chunks, s)
                    : tprt_cuda_fused_grouped_mlp_fast(&x.t, &w1.t, &w2.t, &gs.t, &y.t, TPRT_GLU_SWIGLU, 0, 1.702f,
                                                       7.0f, s),
                "fused mlp");
        },
        bg_reps(6.0 * t * h * f), s);
    printf("mlp %s %lld %lld %lld %lld %s %.4f\n", inv ? "invariant" : "fast", (long long)e, (long long)t, (long long)h,
           (long long)f, skewed ? "skewed" : "uniform", ms);
    fflush(stdout);
  }
  // The GLU in the grouped GEMM's epilogue against the GEMM then the GLU kernel (gate and up in
  // blocks of 32): FC1 + GLU forward, FC2 dgrad + GLU gradient.
  bg_tensor gated({t, f}, TPRT_DTYPE_BF16, false), hh({t, 2 * f}), dh({t, 2 * f}, TPRT_DTYPE_BF16, false);
  bg_tensor dy({t, h}), dgated({t, f}, TPRT_DTYPE_BF16, false);
  const int64_t b = 32;
  for (int inv = 0; inv < 2; ++inv) {
    const int chunks = inv ? bg_chunks : 0;
    const int reps = bg_reps(4.0 * t * h * f);
    float fused = bg_time(
        [&](int) {
          tpc_bench_ok(tprt_cuda_grouped_linear_glu(&x.t, &w1.t, &gs.t, &gated.t, TPRT_GLU_SWIGLU, b, 1.702f, 7.0f, chunks, s),
                "fc1 + glu epilogue");
        },
        reps, s);
    float sep = bg_time(
        [&](int) {
          tpc_bench_ok(inv ? tprt_cuda_grouped_linear_invariant(&x.t, &w1.t, &gs.t, &hh.t, chunks, s)
                    : tprt_cuda_grouped_linear_fast(&x.t, &w1.t, &gs.t, &hh.t, s),
                "fc1");
          tpc_bench_ok(tprt_cuda_glu(&hh.t, &gated.t, TPRT_GLU_SWIGLU, b, 1.702f, 7.0f, s), "glu");
        },
        reps, s);
    float bfused = bg_time(
        [&](int) {
          tpc_bench_ok(tprt_cuda_grouped_linear_dgrad_glu(&dy.t, &w2.t, &gs.t, &hh.t, &dh.t, TPRT_GLU_SWIGLU, b, 1.702f, 7.0f,
                                                   chunks, 1, 1, s),
                "fc2 dgrad + glu_grad epilogue");
        },
        reps, s);
    float bsep = bg_time(
        [&](int) {
          tpc_bench_ok(inv ? tprt_cuda_grouped_linear_dgrad_invariant(&dy.t, &w2.t, &gs.t, &dgated.t, chunks, 1, 1, s)
                    : tprt_cuda_grouped_linear_dgrad_fast(&dy.t, &w2.t, &gs.t, &dgated.t, s),
                "fc2 dgrad");
          tpc_bench_ok(tprt_cuda_glu_grad(&hh.t, &dgated.t, &dh.t, TPRT_GLU_SWIGLU, b, 1.702f, 7.0f, s), "glu_grad");
        },
        reps, s);
    const char* mode = inv ? "invariant" : "fast";
    const char* dist = skewed ? "skewed" : "uniform";
    printf("glu-epilogue fwd %s %lld %lld %lld %lld %s %.4f %.4f\n", mode, (long long)e, (long long)t, (long long)h,
           (long long)f, dist, fused, sep);
    printf("glu-epilogue bwd %s %lld %lld %lld %lld %s %.4f %.4f\n", mode, (long long)e, (long long)t, (long long)h,
           (long long)f, dist, bfused, bsep);
    fflush(stdout);
  }
}

// Parses |n| positive sizes from |args| into |out|.
static bool bg_sizes(char* const* args, int n, long long* out) {
  for (int i = 0; i < n; ++i) {
    char* end = nullptr;
    out[i] = strtoll(args[i], &end, 10);
    if (end == args[i] || *end || out[i] < 1) return false;
  }
  return true;
}

// The benchmark's cases, each as the arguments that run it alone (`tprt-bench-gemm list` prints
// them; tools/bench/gemm.py runs them one at a time and times each one's peer right after it, so
// that both see the same clocks).
static std::vector<std::string> bg_cases(bool quick) {
  std::vector<std::string> c;
  auto add = [&](const char* fmt, auto... v) {
    char line[160];
    snprintf(line, sizeof line, fmt, v...);
    c.push_back(line);
  };
  // The exact kernels at 4096^3, bf16 and f32 operands (the exact-mode target: half the f32
  // CUDA-core peak), and grouped over 8 experts.
  add("exact");
  // Square shapes (4096^3 with the exact kernels too), then the MLP GEMMs of Llama-3-8B (h 4096,
  // ffn 14336: FC1 N = 2 x 14336) and Llama-3-70B (h 8192, ffn 28672) at M = 1 .. 16384 tokens.
  add("dense 4096 4096 4096 with-exact");
  if (!quick) add("dense 8192 8192 8192");
  const long long ms[] = {1, 16, 128, 4096, 16384};
  const long long mlp[][2] = {{28672, 4096}, {4096, 14336}, {57344, 8192}, {8192, 28672}};
  for (const auto& nk : mlp)
    for (long long m : ms)
      if (!quick || m == 128) add("dense %lld %lld %lld", m, nk[0], nk[1]);
  // Grouped: 8 experts x 4096 tokens and 64 experts x 512 tokens, 4096 x 4096 each; and a
  // Mixtral-like FFN (h 4096, ffn 14336; FC1 2 x 14336) on 8 experts.
  for (const char* dist : {"uniform", "skewed"}) {
    add("grouped 8 32768 4096 4096 %s", dist);
    if (!quick) add("grouped 64 32768 4096 4096 %s", dist);
    if (!quick) add("grouped 8 16384 28672 4096 %s", dist);
    add("mlp 8 %d 4096 %d %s", quick ? 4096 : 16384, quick ? 4096 : 14336, dist);
  }
  return c;
}

static const char* kBgUsage =
    "usage: tprt-bench-gemm [quick | list [quick] | exact | dense M N K [with-exact] |\n"
    "                        grouped E T N K uniform|skewed | mlp E T H F uniform|skewed]   (positive sizes)\n";

// Runs the case of |args| (bg_cases' form), or with |lt| NULL only checks it; false on a
// malformed case.
static bool bg_run_case(const std::vector<char*>& args, tprt_cuda_lt_t* lt, cudaStream_t s) {
  const size_t n = args.size();
  long long v[4];
  if (n == 1 && strcmp(args[0], "exact") == 0) {
    if (!lt) return true;
    for (int dtype : {TPRT_DTYPE_BF16, TPRT_DTYPE_F32}) bg_exact_dense(s, dtype, 4096, 4096, 4096);
    bg_exact_grouped(s, TPRT_DTYPE_BF16, 8, 8192, 4096, 4096);
    return true;
  }
  if ((n == 4 || n == 5) && strcmp(args[0], "dense") == 0 && bg_sizes(args.data() + 1, 3, v) &&
      (n == 4 || strcmp(args[4], "with-exact") == 0)) {
    if (lt) bg_dense(lt, s, v[0], v[1], v[2], n == 5);
    return true;
  }
  const bool grouped = n == 6 && strcmp(args[0], "grouped") == 0, mlp = n == 6 && strcmp(args[0], "mlp") == 0;
  if ((grouped || mlp) && bg_sizes(args.data() + 1, 4, v) &&
      (strcmp(args[5], "uniform") == 0 || strcmp(args[5], "skewed") == 0)) {
    const bool skewed = strcmp(args[5], "skewed") == 0;
    if (!lt) return true;
    if (grouped) bg_grouped(s, v[0], v[1], v[2], v[3], skewed);
    if (mlp) bg_mlp(s, v[0], v[1], v[2], v[3], skewed);
    return true;
  }
  return false;
}

static const tpc_cli_option_t kBgOptions[] = {{NULL, 0, NULL, NULL, 0}};
static void bg_more_help(FILE* out) {
  fputs(kBgUsage, out);
  fputs("With no case, every case runs in this process; tools/bench/gemm.py runs each alone with its\n"
        "PyTorch peer. TPRT_BENCH_CHUNKS sets the invariant kernels' tp.chunks.\n",
        out);
}
static const tpc_cli_t kBgCli = {"tprt-bench-gemm", "tpc's GEMMs (fast, invariant, exact) timed on one GPU",
                                 "[case words]", kBgOptions, false, NULL, bg_more_help};

int main(int argc, char** argv) {
  // Only -h/--help and --version are options; every other word belongs to the case.
  tpc_cli_state_t st = {};
  for (int id; (id = tpc_cli_next(&kBgCli, argc, argv, &st)) != TPC_CLI_END;) {
    if (id == TPC_CLI_EXIT) return 0;
    if (id == TPC_CLI_ERROR) return 2;
  }
  if (getenv("TPRT_BENCH_CHUNKS")) bg_chunks = atoi(getenv("TPRT_BENCH_CHUNKS"));
  const bool list = argc > 1 && strcmp(argv[1], "list") == 0;
  const bool quick = argc > 1 + list && strcmp(argv[1 + list], "quick") == 0;
  const bool all = argc == 1 || (argc == 2 && quick);  // every case, in this process
  if (list) {
    if (argc != 2 + quick) {
      fputs(kBgUsage, stderr);
      return 2;
    }
    for (const std::string& c : bg_cases(quick)) puts(c.c_str());
    return 0;
  }
  const std::vector<char*> one(argv + 1, argv + argc);
  if (!all && !bg_run_case(one, nullptr, nullptr)) {
    fputs(kBgUsage, stderr);
    return 2;
  }
  cudaStream_t s;
  TPC_BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  tprt_cuda_lt_t lt;
  tpc_bench_ok(tprt_cuda_lt_create(&lt), "cuBLASLt");
  bool ok = true;
  if (all) {
    for (const std::string& c : bg_cases(quick)) {
      std::vector<std::string> words;
      for (size_t at = 0; at < c.size();) {
        size_t end = c.find(' ', at);
        if (end == std::string::npos) end = c.size();
        words.push_back(c.substr(at, end - at));
        at = end + 1;
      }
      std::vector<char*> args;
      for (std::string& w : words) args.push_back(&w[0]);
      ok = ok && bg_run_case(args, &lt, s);
    }
  } else {
    ok = bg_run_case(one, &lt, s);
  }
  tprt_cuda_lt_destroy(&lt);
  return ok ? 0 : 2;
}
