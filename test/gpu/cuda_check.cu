// tprt-cuda-check: every CUDA exact-mode kernel against the CPU kernel that defines its bits
// (docs/numerics.md), compared bit for bit.
//
// For each kernel and configuration (shapes with odd M/N/K and empty chunks, chunks 1/8/16/1024,
// bf16/f16/f32, every GLU kind, interleave 0 and 32, signed zeros, infinities and subnormals
// where the op defines them) it generates fresh deterministic random inputs, runs tprt_cpu_<op>
// and tprt_cuda_<op>, and prints one row: kernel, shape, dtype, parameters, elements, mismatches,
// the largest difference in units in the last place of the output dtype, the CPU time and the GPU
// time (one warm launch, CUDA events; a correctness run, not a benchmark). Two NaNs compare equal:
// NaN payloads are not part of the contract. Before any GPU work it also checks that both
// backends reject the same invalid arguments with the same code and message; two negative
// controls then show that the comparison detects a different reduction order (a linear with 1
// instead of 8 chunks, an RMSNorm with a sequential sum of squares, an attention with a sequential
// softmax sum).
//
// Output ends with a per-kernel summary table and "N passed, N failed". Exit status: 0 when
// everything passed, 1 on any mismatch or error, 77 when there is no CUDA device (the validation
// checks still ran). Usage: tprt-cuda-check [substring of kernel names to run]
#include "cuda_check.h"

#include <time.h>

// ------------------------------------------------------------------------------------------------
// Results
// ------------------------------------------------------------------------------------------------

// Kernel names in summary order.
static const char* const kKernels[] = {"validation",    "control",    "linear",       "rmsnorm",        "layernorm",
                                       "glu",           "add",        "mul",          "grouped_linear", "moe_permute",
                                       "moe_unpermute", "moe_bucket", "moe_unbucket", "fill_philox",    "copy",
                                       "linear_dgrad",  "linear_wgrad", "bias_grad",  "grouped_dgrad",  "grouped_wgrad",
                                       "glu_grad",      "rmsnorm_grad", "layernorm_grad", "moe_route",
                                       "moe_permute_grad", "moe_unpermute_grad", "moe_route_grad", "fused_grouped_mlp",
                                       "quantize",      "dequantize", "rope",         "attention",
                                       "attention_grad", "embedding", "embedding_grad", "cross_entropy", "sumsq",
                                       "global_norm", "adamw", "sample", "kvcache_write", "add_rmsnorm"};
enum { kNumKernels = sizeof kKernels / sizeof kKernels[0] };

typedef struct {
  int configs, failed;
  int64_t elements, mismatches;
  uint32_t max_ulp;
  double cpu_ms, gpu_ms;
} ct_summary_t;

static ct_summary_t g_summary[kNumKernels];
static int g_passed, g_failed;
static const char* g_filter;

static ct_summary_t* ct_summary(const char* kernel) {
  for (int i = 0; i < kNumKernels; ++i)
    if (!strcmp(kKernels[i], kernel)) return &g_summary[i];
  return &g_summary[0];
}

bool ct_selected(const char* kernel) { return !g_filter || strstr(kernel, g_filter); }

static double ct_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/// Reports an unexpected failure (a status or a CUDA error) and counts it; the run goes on.
void ct_fail_status(const char* what, tprt_status_t s) {
  char buf[512];
  printf("FAILED %s: %s\n", what, tprt_status_format(s, buf, sizeof buf));
  tprt_status_free(s);
}

// ------------------------------------------------------------------------------------------------
// Tensors: a host view, a device view and deterministic random data
// ------------------------------------------------------------------------------------------------

ct_tensor_t ct_make(int dtype, int rank, const int64_t* dims) {
  ct_tensor_t t;
  t.h = tprt_tensor_make(NULL, dtype, rank, dims);
  t.d = t.h;
  size_t bytes = tprt_tensor_bytes(&t.h);
  t.h.data = calloc(1, bytes ? bytes : 1);
  CT_CUDA(cudaMalloc(&t.d.data, bytes ? bytes : 1));
  CT_CUDA(cudaMemset(t.d.data, 0xFF, bytes ? bytes : 1));  // NaN everywhere: unwritten outputs show
  return t;
}

void ct_free(ct_tensor_t* t) {
  free(t->h.data);
  CT_CUDA(cudaFree(t->d.data));
  t->h.data = t->d.data = NULL;
}

void ct_upload(const ct_tensor_t* t) {
  CT_CUDA(cudaMemcpy(t->d.data, t->h.data, tprt_tensor_bytes(&t->h), cudaMemcpyHostToDevice));
}

/// splitmix64: the same data on every run and machine.
uint64_t ct_next(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform in [-1, 1).
static float ct_unit(uint64_t* s) { return (float)((int64_t)(ct_next(s) >> 40) - (1 << 23)) * 0x1p-23f; }

static float ct_value(uint64_t* s, ct_dist_t dist) {
  static const float kSpecial[] = {0.0f,    -0.0f,  INFINITY, -INFINITY, 65504.0f, 65520.0f, 1e-40f,
                                   -1e-45f, 6e-8f,  3e38f,    -3e38f,    88.8f,    -104.5f,  -87.5f,
                                   20.0f,   -20.0f, 0.625f,   2.44e-4f,  1e-30f,   -9.0f,    7.0f};
  uint64_t r = ct_next(s);
  switch (dist) {
    case CT_DIST_MODERATE:
    case CT_DIST_OFFSET: {
      if ((r & 31u) == 0) return (r & 32u) ? -0.0f : 0.0f;
      float v = ct_unit(s) * ldexpf(1.0f, (int)((r >> 8) % 4) - 2);
      return dist == CT_DIST_OFFSET ? 3.0f + v : v;
    }
    case CT_DIST_SPECIAL:
      if ((r & 7u) == 0) return kSpecial[(r >> 8) % (sizeof kSpecial / sizeof kSpecial[0])];
      [[fallthrough]];
    default:
      return ct_unit(s) * ldexpf(1.0f, (int)((r >> 16) % 19) - 12);
  }
}

void ct_fill(ct_tensor_t* t, uint64_t* rng, ct_dist_t dist) {
  int64_t n = tprt_tensor_numel(&t->h);
  for (int64_t i = 0; i < n; ++i) {
    float v = ct_value(rng, dist);
    switch (t->h.dtype) {
      case TPRT_DTYPE_BF16:
        ((uint16_t*)t->h.data)[i] = tprt_f32_to_bf16(v);
        break;
      case TPRT_DTYPE_F16:
        ((uint16_t*)t->h.data)[i] = tprt_f32_to_f16(v);
        break;
      default:
        ((float*)t->h.data)[i] = v;
        break;
    }
  }
  ct_upload(t);
}

// ------------------------------------------------------------------------------------------------
// Bitwise comparison
// ------------------------------------------------------------------------------------------------

/// Position of a bit pattern on the number line (sign-magnitude to two's complement).
static int64_t ct_ordinal(uint32_t bits, int width) {
  uint32_t sign = 1u << (width - 1), mag = bits & (sign - 1u);
  return (bits & sign) ? -(int64_t)mag : (int64_t)mag;
}

static bool ct_is_nan(uint32_t bits, int width) {
  return width == 16 ? (bits & 0x7FFFu) > 0x7C00u : (bits & 0x7FFFFFFFu) > 0x7F800000u;
}

/// Compares |n| elements of two host buffers of |dtype| bit for bit; returns mismatches and the
/// largest ulp distance (UINT32_MAX when one side is NaN and the other is not).
/// Other dtypes (integers, fp8, packed f4) compare their bytes; a differing element counts 1 ulp.
static int64_t ct_compare(const void* want, const void* got, int dtype, int64_t n, uint32_t* out_max_ulp) {
  int64_t mismatches = 0;
  uint32_t max_ulp = 0;
  if (dtype != TPRT_DTYPE_BF16 && dtype != TPRT_DTYPE_F16 && dtype != TPRT_DTYPE_F32) {
    size_t unit = tprt_dtype_bits(dtype) >= 8 ? (size_t)tprt_dtype_bits(dtype) / 8 : 1;
    int64_t units = (int64_t)(tprt_dtype_bytes(dtype, n) / unit);
    for (int64_t i = 0; i < units; ++i)
      if (memcmp((const char*)want + i * unit, (const char*)got + i * unit, unit)) ++mismatches;
    *out_max_ulp = mismatches ? 1 : 0;
    return mismatches;
  }
  int width = dtype == TPRT_DTYPE_F32 ? 32 : 16;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t a, b;
    if (width == 32) {
      memcpy(&a, (const char*)want + 4 * i, 4);
      memcpy(&b, (const char*)got + 4 * i, 4);
    } else {
      a = ((const uint16_t*)want)[i];
      b = ((const uint16_t*)got)[i];
    }
    if (a == b) continue;
    bool na = ct_is_nan(a, width), nb = ct_is_nan(b, width);
    if (na && nb) continue;  // NaN payloads are not part of the contract
    ++mismatches;
    uint32_t ulp = na || nb ? UINT32_MAX : (uint32_t)llabs(ct_ordinal(a, width) - ct_ordinal(b, width));
    if (ulp > max_ulp) max_ulp = ulp;
  }
  *out_max_ulp = max_ulp;
  return mismatches;
}

// ------------------------------------------------------------------------------------------------
// One configuration: CPU reference, CUDA kernel, comparison, row
// ------------------------------------------------------------------------------------------------

static void ct_print_header(void) {
  printf("%-14s %-22s %-5s %-26s %9s %9s %8s %9s %9s  %s\n", "kernel", "shape", "dtype", "params", "elements",
         "mismatch", "max_ulp", "cpu_ms", "gpu_ms", "result");
}

void ct_run_outputs(const char* kernel, const char* shape, const char* dtype, const char* params,
                    std::initializer_list<ct_tensor_t*> outputs, const std::function<tprt_status_t()>& cpu,
                    const std::function<tprt_status_t(cudaStream_t)>& gpu, bool repeatable, cudaStream_t stream) {
  ct_summary_t* sum = ct_summary(kernel);
  double t0 = ct_now_ms();
  tprt_status_t s = cpu();
  double cpu_ms = ct_now_ms() - t0;
  bool ok = true;
  if (s) {
    ct_fail_status("CPU reference", s);
    ok = false;
  }
  cudaEvent_t e0, e1;
  CT_CUDA(cudaEventCreate(&e0));
  CT_CUDA(cudaEventCreate(&e1));
  if (ok && repeatable) {
    s = gpu(stream);
    if (s) {
      ct_fail_status("CUDA kernel (warm-up)", s);
      ok = false;
    }
  }
  float gpu_ms = 0.0f;
  if (ok) {
    CT_CUDA(cudaEventRecord(e0, stream));
    s = gpu(stream);
    CT_CUDA(cudaEventRecord(e1, stream));
    if (s) {
      ct_fail_status("CUDA kernel", s);
      ok = false;
    }
  }
  cudaError_t sync = cudaStreamSynchronize(stream);
  if (sync != cudaSuccess) {
    printf("FAILED %s: cudaStreamSynchronize: %s\n", kernel, cudaGetErrorString(sync));
    exit(1);  // a fault inside a kernel poisons the context: nothing after it can be trusted
  }
  if (ok) CT_CUDA(cudaEventElapsedTime(&gpu_ms, e0, e1));
  CT_CUDA(cudaEventDestroy(e0));
  CT_CUDA(cudaEventDestroy(e1));

  int64_t n = 0, mismatches = 0;
  uint32_t max_ulp = 0;
  for (ct_tensor_t* y : outputs) {
    int64_t yn = tprt_tensor_numel(&y->h);
    size_t bytes = tprt_tensor_bytes(&y->h);
    void* got = malloc(bytes ? bytes : 1);
    CT_CUDA(cudaMemcpy(got, y->d.data, bytes, cudaMemcpyDeviceToHost));
    uint32_t yulp = 0;
    mismatches += ok ? ct_compare(y->h.data, got, y->h.dtype, yn, &yulp) : yn;
    if (yulp > max_ulp) max_ulp = yulp;
    n += yn;
    free(got);
  }
  ok = ok && mismatches == 0;

  char ulp[16];
  if (max_ulp == UINT32_MAX)
    snprintf(ulp, sizeof ulp, "nan");
  else
    snprintf(ulp, sizeof ulp, "%u", max_ulp);
  printf("%-14s %-22s %-5s %-26s %9lld %9lld %8s %9.3f %9.4f  %s\n", kernel, shape, dtype, params, (long long)n,
         (long long)mismatches, ulp, cpu_ms, gpu_ms, ok ? "ok" : "FAIL");
  fflush(stdout);
  sum->configs++;
  sum->elements += n;
  sum->mismatches += mismatches;
  if (max_ulp > sum->max_ulp) sum->max_ulp = max_ulp;
  sum->cpu_ms += cpu_ms;
  sum->gpu_ms += gpu_ms;
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    sum->failed++;
  }
}

void ct_run(const char* kernel, const char* shape, const char* dtype, const char* params, ct_tensor_t* y,
            const std::function<tprt_status_t()>& cpu, const std::function<tprt_status_t(cudaStream_t)>& gpu,
            bool repeatable, cudaStream_t stream) {
  ct_run_outputs(kernel, shape, dtype, params, {y}, cpu, gpu, repeatable, stream);
}

// ------------------------------------------------------------------------------------------------
// Negative controls: another operation order must give other bits, or the checks above prove
// nothing. Each control passes when the CUDA result differs from a reference computed in a
// different (wrong) order.
// ------------------------------------------------------------------------------------------------

void ct_control_row(const char* what, const char* shape, const char* dtype, ct_tensor_t* y, const void* wrong) {
  int64_t n = tprt_tensor_numel(&y->h);
  size_t bytes = tprt_tensor_bytes(&y->h);
  void* got = malloc(bytes);
  CT_CUDA(cudaMemcpy(got, y->d.data, bytes, cudaMemcpyDeviceToHost));
  uint32_t max_ulp = 0;
  int64_t differ = ct_compare(wrong, got, y->h.dtype, n, &max_ulp);
  free(got);
  bool ok = differ > 0;
  printf("%-14s %-22s %-5s %-26s %9lld %9lld %8u %9s %9s  %s\n", "control", shape, dtype, what, (long long)n,
         (long long)differ, max_ulp, "-", "-", ok ? "ok (differs)" : "FAIL (order not detected)");
  ct_summary_t* sum = ct_summary("control");
  sum->configs++;
  sum->elements += n;
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    sum->failed++;
  }
}

void ct_control_failed(const char* what, tprt_status_t s) {
  ct_fail_status(what, s);
  ++g_failed;
  ct_summary("control")->failed++;
}

static void ct_check_controls(cudaStream_t stream) {
  uint64_t rng = 0xC0DE;
  // Linear: the CUDA kernel with 8 chunks against the CPU kernel with 1 chunk (sequential k).
  {
    int64_t xd[2] = {65, 1000}, wd[2] = {127, 1000}, yd[2] = {65, 127};
    ct_tensor_t x = ct_make(TPRT_DTYPE_F32, 2, xd), w = ct_make(TPRT_DTYPE_F32, 2, wd),
                y = ct_make(TPRT_DTYPE_F32, 2, yd);
    ct_fill(&x, &rng, CT_DIST_MODERATE);
    ct_fill(&w, &rng, CT_DIST_MODERATE);
    tprt_status_t s = tprt_cpu_linear(&x.h, &w.h, NULL, &y.h, 1);
    if (!s) s = tprt_cuda_linear(&x.d, &w.d, NULL, &y.d, 8, stream);
    if (s) {
      ct_fail_status("control linear", s);
      ++g_failed;
    } else {
      CT_CUDA(cudaStreamSynchronize(stream));
      ct_control_row("cuda chunks=8 vs cpu 1", "M=65 N=127 K=1000", "f32", &y, y.h.data);
    }
    ct_free(&x);
    ct_free(&w);
    ct_free(&y);
  }
  // RMSNorm: the CUDA kernel against the same formula with a sequential sum of squares.
  {
    int64_t xd[2] = {64, 4096}, gd[1] = {4096};
    ct_tensor_t x = ct_make(TPRT_DTYPE_F32, 2, xd), g = ct_make(TPRT_DTYPE_F32, 1, gd),
                y = ct_make(TPRT_DTYPE_F32, 2, xd);
    ct_fill(&x, &rng, CT_DIST_MODERATE);
    ct_fill(&g, &rng, CT_DIST_MODERATE);
    const float* xv = (const float*)x.h.data;
    const float* gv = (const float*)g.h.data;
    float* wrong = (float*)y.h.data;
    for (int64_t r = 0; r < xd[0]; ++r) {
      float ss = 0.0f;
      for (int64_t j = 0; j < xd[1]; ++j) ss = fmaf(xv[r * xd[1] + j], xv[r * xd[1] + j], ss);
      float inv = tprt_rsqrtf(ss / (float)xd[1] + 1e-6f);
      for (int64_t j = 0; j < xd[1]; ++j) wrong[r * xd[1] + j] = (xv[r * xd[1] + j] * inv) * gv[j];
    }
    tprt_status_t s = tprt_cuda_rmsnorm(&x.d, &g.d, &y.d, 1e-6f, stream);
    if (s) {
      ct_fail_status("control rmsnorm", s);
      ++g_failed;
    } else {
      CT_CUDA(cudaStreamSynchronize(stream));
      ct_control_row("cuda vs sequential sumsq", "M=64 H=4096", "f32", &y, wrong);
    }
    ct_free(&x);
    ct_free(&g);
    ct_free(&y);
  }
  ct_check_attention_control(stream);
}

// ------------------------------------------------------------------------------------------------
// Validation: both backends reject the same inputs with the same code and message (no GPU needed)
// ------------------------------------------------------------------------------------------------

static int g_validation_cases, g_validation_failed;

void ct_same_status(const char* what, tprt_status_t cpu, tprt_status_t gpu) {
  ++g_validation_cases;
  bool same = cpu && gpu && tprt_status_code(cpu) == tprt_status_code(gpu) &&
              !strcmp(tprt_status_message(cpu), tprt_status_message(gpu));
  if (!same) {
    ++g_validation_failed;
    printf("FAILED validation %s:\n  cpu:  %s\n  cuda: %s\n", what, cpu ? tprt_status_message(cpu) : "(ok)",
           gpu ? tprt_status_message(gpu) : "(ok)");
  }
  tprt_status_free(cpu);
  tprt_status_free(gpu);
}

static void ct_check_validation(void) {
  static char dummy[64];  // validation never reads data, but a non-empty view needs a pointer
  auto T = [](int dtype, int rank, int64_t d0, int64_t d1, int64_t d2) {
    int64_t dims[3] = {d0, d1, d2};
    return tprt_tensor_make(dummy, dtype, rank, dims);
  };
  const int B = TPRT_DTYPE_BF16, F = TPRT_DTYPE_F32, H = TPRT_DTYPE_F16;
  tprt_tensor_t x = T(B, 2, 4, 8, 0), w = T(B, 2, 6, 8, 0), bias = T(B, 1, 6, 0, 0), y = T(B, 2, 4, 6, 0);
  tprt_tensor_t w_k = T(B, 2, 6, 9, 0), bias_f = T(F, 1, 6, 0, 0), bias_n = T(B, 1, 5, 0, 0);
  tprt_tensor_t y_f = T(F, 2, 4, 6, 0), y_bad = T(B, 2, 4, 7, 0), w_h = T(H, 2, 6, 8, 0),
                x_i = T(TPRT_DTYPE_I32, 2, 4, 8, 0);
  tprt_tensor_t nodata = T(B, 2, 4, 8, 0);
  nodata.data = NULL;
  ct_same_status("linear chunks", tprt_cpu_linear(&x, &w, NULL, &y, 3), tprt_cuda_linear(&x, &w, NULL, &y, 3, 0));
  ct_same_status("linear chunks 0", tprt_cpu_linear(&x, &w, NULL, &y, 0), tprt_cuda_linear(&x, &w, NULL, &y, 0, 0));
  ct_same_status("linear K", tprt_cpu_linear(&x, &w_k, NULL, &y, 8), tprt_cuda_linear(&x, &w_k, NULL, &y, 8, 0));
  ct_same_status("linear w dtype", tprt_cpu_linear(&x, &w_h, NULL, &y, 8), tprt_cuda_linear(&x, &w_h, NULL, &y, 8, 0));
  ct_same_status("linear bias dtype", tprt_cpu_linear(&x, &w, &bias_f, &y, 8),
                 tprt_cuda_linear(&x, &w, &bias_f, &y, 8, 0));
  ct_same_status("linear bias N", tprt_cpu_linear(&x, &w, &bias_n, &y, 8), tprt_cuda_linear(&x, &w, &bias_n, &y, 8, 0));
  ct_same_status("linear y", tprt_cpu_linear(&x, &w, NULL, &y_bad, 8), tprt_cuda_linear(&x, &w, NULL, &y_bad, 8, 0));
  ct_same_status("linear partial bias", tprt_cpu_linear(&x, &w, &bias, &y_f, 8),
                 tprt_cuda_linear(&x, &w, &bias, &y_f, 8, 0));
  ct_same_status("linear x dtype", tprt_cpu_linear(&x_i, &w, NULL, &y, 8), tprt_cuda_linear(&x_i, &w, NULL, &y, 8, 0));
  ct_same_status("linear no data", tprt_cpu_linear(&nodata, &w, NULL, &y, 8),
                 tprt_cuda_linear(&nodata, &w, NULL, &y, 8, 0));
  ct_same_status("linear NULL w", tprt_cpu_linear(&x, NULL, NULL, &y, 8), tprt_cuda_linear(&x, NULL, NULL, &y, 8, 0));

  tprt_tensor_t g = T(F, 1, 8, 0, 0), g_h = T(B, 1, 7, 0, 0), beta_b = T(B, 1, 8, 0, 0), yn = T(B, 2, 4, 8, 0);
  tprt_tensor_t yn_bad = T(H, 2, 4, 8, 0);
  ct_same_status("rmsnorm eps", tprt_cpu_rmsnorm(&x, &g, &yn, 0.0f), tprt_cuda_rmsnorm(&x, &g, &yn, 0.0f, 0));
  ct_same_status("rmsnorm eps nan", tprt_cpu_rmsnorm(&x, &g, &yn, NAN), tprt_cuda_rmsnorm(&x, &g, &yn, NAN, 0));
  ct_same_status("rmsnorm gamma", tprt_cpu_rmsnorm(&x, &g_h, &yn, 1e-5f), tprt_cuda_rmsnorm(&x, &g_h, &yn, 1e-5f, 0));
  ct_same_status("rmsnorm y", tprt_cpu_rmsnorm(&x, &g, &yn_bad, 1e-5f), tprt_cuda_rmsnorm(&x, &g, &yn_bad, 1e-5f, 0));
  ct_same_status("layernorm beta NULL", tprt_cpu_layernorm(&x, &g, NULL, &yn, 1e-5f),
                 tprt_cuda_layernorm(&x, &g, NULL, &yn, 1e-5f, 0));
  ct_same_status("layernorm beta dtype", tprt_cpu_layernorm(&x, &g, &beta_b, &yn, 1e-5f),
                 tprt_cuda_layernorm(&x, &g, &beta_b, &yn, 1e-5f, 0));

  tprt_tensor_t gx = T(B, 2, 4, 64, 0), gy = T(B, 2, 4, 32, 0), gx_odd = T(B, 2, 4, 7, 0), gy3 = T(B, 2, 4, 3, 0);
  tprt_tensor_t gy_f = T(F, 2, 4, 32, 0);
  ct_same_status("glu odd", tprt_cpu_glu(&gx_odd, &gy3, 0, 0, 1.0f, 1.0f),
                 tprt_cuda_glu(&gx_odd, &gy3, 0, 0, 1.0f, 1.0f, 0));
  ct_same_status("glu y dtype", tprt_cpu_glu(&gx, &gy_f, 0, 0, 1.0f, 1.0f),
                 tprt_cuda_glu(&gx, &gy_f, 0, 0, 1.0f, 1.0f, 0));
  ct_same_status("glu kind", tprt_cpu_glu(&gx, &gy, 5, 0, 1.0f, 1.0f), tprt_cuda_glu(&gx, &gy, 5, 0, 1.0f, 1.0f, 0));
  ct_same_status("glu interleave", tprt_cpu_glu(&gx, &gy, 0, 5, 1.0f, 1.0f),
                 tprt_cuda_glu(&gx, &gy, 0, 5, 1.0f, 1.0f, 0));
  ct_same_status("glu alpha", tprt_cpu_glu(&gx, &gy, 2, 0, 0.0f, 7.0f), tprt_cuda_glu(&gx, &gy, 2, 0, 0.0f, 7.0f, 0));

  tprt_tensor_t ea = T(B, 2, 4, 8, 0), eb = T(B, 2, 4, 9, 0), ec = T(F, 2, 4, 8, 0);
  ct_same_status("add shapes", tprt_cpu_add(&ea, &eb, &ea), tprt_cuda_add(&ea, &eb, &ea, 0));
  ct_same_status("mul c dtype", tprt_cpu_mul(&ea, &ea, &ec), tprt_cuda_mul(&ea, &ea, &ec, 0));
  ct_same_status("add NULL", tprt_cpu_add(NULL, &ea, &ea), tprt_cuda_add(NULL, &ea, &ea, 0));
  // The mixed-dtype forms: only an f32 a takes a b of another dtype, and c then has a's or b's.
  tprt_tensor_t ef = T(F, 2, 4, 8, 0), eh = T(H, 2, 4, 8, 0), ebias = T(B, 1, 8, 0, 0), ebias_h = T(H, 1, 8, 0, 0);
  ct_same_status("add residual c dtype", tprt_cpu_add(&ef, &ea, &eh), tprt_cuda_add(&ef, &ea, &eh, 0));
  ct_same_status("add residual shape", tprt_cpu_add(&ef, &eb, &ea), tprt_cuda_add(&ef, &eb, &ea, 0));
  ct_same_status("add bf16 a + f16 b", tprt_cpu_add(&ea, &eh, &ea), tprt_cuda_add(&ea, &eh, &ea, 0));
  ct_same_status("add bias dtype", tprt_cpu_add(&ea, &ebias_h, &ea), tprt_cuda_add(&ea, &ebias_h, &ea, 0));
  ct_same_status("add bias c dtype", tprt_cpu_add(&ef, &ebias, &eh), tprt_cuda_add(&ef, &ebias, &eh, 0));
  ct_same_status("mul mixed", tprt_cpu_mul(&ef, &ea, &ea), tprt_cuda_mul(&ef, &ea, &ea, 0));
  ct_check_validation_moe();
  ct_check_validation_attention();

  ct_summary_t* sum = ct_summary("validation");
  sum->configs = g_validation_cases;
  sum->failed = g_validation_failed;
  sum->mismatches = g_validation_failed;
  g_passed += g_validation_cases - g_validation_failed;
  g_failed += g_validation_failed;
  printf("%-14s %-22s %-5s %-26s %9d %9d %8s %9s %9s  %s\n", "validation", "invalid arguments", "-",
         "same code and message", g_validation_cases, g_validation_failed, "-", "-", "-",
         g_validation_failed ? "FAIL" : "ok");
}

// ------------------------------------------------------------------------------------------------
// Main
// ------------------------------------------------------------------------------------------------

static void ct_print_summary(void) {
  printf("\nSummary (correctness run: one warm launch per configuration, not a benchmark)\n");
  printf("%-14s %7s %7s %11s %10s %8s %10s %10s\n", "kernel", "configs", "failed", "elements", "mismatch", "max_ulp",
         "cpu_ms", "gpu_ms");
  for (int i = 0; i < kNumKernels; ++i) {
    const ct_summary_t* s = &g_summary[i];
    if (!s->configs) continue;
    char ulp[16];
    if (s->max_ulp == UINT32_MAX)
      snprintf(ulp, sizeof ulp, "nan");
    else
      snprintf(ulp, sizeof ulp, "%u", s->max_ulp);
    printf("%-14s %7d %7d %11lld %10lld %8s %10.2f %10.3f\n", kKernels[i], s->configs, s->failed,
           (long long)s->elements, (long long)s->mismatches, ulp, s->cpu_ms, s->gpu_ms);
  }
  printf("%d passed, %d failed\n", g_passed, g_failed);
}

int main(int argc, char** argv) {
  g_filter = argc > 1 ? argv[1] : NULL;
  ct_print_header();
  ct_check_validation();

  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    printf("no CUDA device (%s): kernel checks skipped\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    ct_print_summary();
    return g_failed ? 1 : 77;
  }
  cudaDeviceProp prop;
  CT_CUDA(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  CT_CUDA(cudaRuntimeGetVersion(&runtime));
  CT_CUDA(cudaDriverGetVersion(&driver));
  printf("device: %s (sm_%d%d, %d SMs), CUDA runtime %d, driver %d\n", prop.name, prop.major, prop.minor,
         prop.multiProcessorCount, runtime, driver);
  cudaStream_t stream;
  CT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  if (ct_selected("control")) ct_check_controls(stream);
  if (ct_selected("linear")) ct_check_linear(stream);
  if (ct_selected("linear")) ct_check_gemm_layouts(stream);
  ct_check_norms(stream);
  if (ct_selected("glu")) ct_check_glu(stream);
  ct_check_elementwise(stream);
  ct_check_add_forms(stream);
  ct_check_reduce_staged(stream);
  ct_check_moe_kernels(stream);
  ct_check_grad_kernels(stream);
  ct_check_attention_kernels(stream);
  ct_check_model_kernels(stream);

  CT_CUDA(cudaStreamDestroy(stream));
  ct_print_summary();
  return g_failed ? 1 : 0;
}
