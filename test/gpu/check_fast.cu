// tprt-cuda-check-fast: checks the fast-mode contraction kernels (cuBLASLt dense linears and their
// gradients, the CUTLASS grouped GEMMs, the fast fused grouped MLP) and the fast GLU against the exact CUDA kernels,
// which are bitwise the CPU's (tprt-cuda-check proves that), on fresh random inputs each run.
// Fast mode promises no bits, so each output must be close: ‖fast − exact‖ / ‖exact‖ below the
// output dtype's rounding (bf16 1e-2, f16 2e-3, f32 1e-4: the two accumulate the same f32
// products in different orders, then round once), every element finite. Outputs are poisoned
// (0xFF bytes: NaN in every float dtype) before each run, so an unwritten element fails.
// Grouped cases cover empty experts, skewed and uniform counts, segments with padding rows (expert
// parallelism) and a replay as a CUDA graph (no host synchronization inside).
//
// One row per case, a summary last: "N passed, N failed". Exit status 0 only when all passed,
// 77 when there is no GPU.
#include <time.h>

#include "ce_exact_gemms.h"
#include "check_fast.h"

int g_passed, g_failed;
uint64_t g_rng;

static double fc_tolerance(int dtype) {
  return dtype == TPRT_DTYPE_BF16 ? 1e-2 : dtype == TPRT_DTYPE_F16 ? 2e-3 : 1e-4;
}

/// Compares |got| with |want| and prints a row.
void fc_compare(const char* kernel, const char* shape, const fc_tensor& got, const fc_tensor& want,
                tprt_status_t fast_status, tprt_status_t exact_status, double tolerance) {
  if (tolerance <= 0) tolerance = fc_tolerance(got.t.dtype);
  char why[256] = "";
  double err = NAN;
  if (fast_status || exact_status) {
    snprintf(why, sizeof why, "%s: %s", fast_status ? "fast" : "exact",
             tprt_status_message(fast_status ? fast_status : exact_status));
  } else {
    FC_CUDA(cudaDeviceSynchronize());
    std::vector<double> g = got.host(), w = want.host();
    double num = 0, den = 0;
    int64_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      if (!isfinite(g[i]) || !isfinite(w[i])) ++bad;
      num += (g[i] - w[i]) * (g[i] - w[i]);
      den += w[i] * w[i];
    }
    err = den > 0 ? sqrt(num / den) : sqrt(num);
    if (bad)
      snprintf(why, sizeof why, "%lld non-finite elements (unwritten?)", (long long)bad);
    else if (!(err <= tolerance))
      snprintf(why, sizeof why, "relative error over %.0e", tolerance);
  }
  bool ok = why[0] == 0;
  ok ? ++g_passed : ++g_failed;
  printf("%-22s %-34s %-5s %10.2e  %s %s\n", kernel, shape, tprt_dtype_name(got.t.dtype), err, ok ? "pass" : "FAIL",
         why);
  tprt_status_free(fast_status);
  tprt_status_free(exact_status);
}

static void fc_check_dense(tprt_cuda_lt_t* lt, cudaStream_t s) {
  const int64_t shapes[][3] = {{1, 256, 512},    {7, 384, 1024},     {64, 512, 256},
                               {257, 1024, 768}, {1024, 1024, 4096}, {300, 520, 136}};
  const int dtypes[] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16};
  for (const auto& sh : shapes) {
    int64_t m = sh[0], n = sh[1], k = sh[2];
    for (int dt : dtypes) {
      for (int out_f32 = 0; out_f32 < 2; ++out_f32) {
        int od = out_f32 ? TPRT_DTYPE_F32 : dt;
        char shape[64];
        snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld", (long long)m, (long long)n, (long long)k);
        fc_tensor x(dt, {m, k}), w(dt, {n, k}), bias(dt, {n}), dy(dt, {m, n});
        x.fill(), w.fill(), bias.fill(), dy.fill();
        {  // forward (with the bias when y has x's dtype)
          fc_tensor y(od, {m, n}), ref(od, {m, n});
          y.poison(), ref.poison();
          const tprt_tensor_t* b = out_f32 ? nullptr : &bias.t;
          tprt_status_t fs = tprt_cuda_linear_fast(&x.t, &w.t, b, &y.t, lt, s);
          tprt_status_t es = tprt_cuda_linear(&x.t, &w.t, b, &ref.t, 8, s);
          fc_compare(out_f32 ? "linear" : "linear+bias", shape, y, ref, fs, es);
        }
        {  // dgrad
          fc_tensor dx(od, {m, k}), ref(od, {m, k});
          dx.poison(), ref.poison();
          tprt_status_t fs = tprt_cuda_linear_dgrad_fast(&dy.t, &w.t, &dx.t, lt, s);
          tprt_status_t es = tprt_cuda_linear_dgrad_segmented(&dy.t, &w.t, &ref.t, 8, 1, 1, s);
          fc_compare("linear_dgrad", shape, dx, ref, fs, es);
          // dx = acc + dy·w with acc = the exact product (out of place: acc is ref, dx a fresh
          // tensor), against the exact product added to itself (doubling is exact).
          fc_tensor dx2(od, {m, k}), ref2(od, {m, k});
          dx2.poison(), ref2.poison();
          fs = tprt_cuda_linear_dgrad_acc_fast(&dy.t, &w.t, &ref.t, &dx2.t, lt, s);
          es = tprt_cuda_add(&ref.t, &ref.t, &ref2.t, s);
          fc_compare("linear_dgrad acc", shape, dx2, ref2, fs, es);
        }
        {  // wgrad
          fc_tensor dw(od, {n, k}), ref(od, {n, k});
          dw.poison(), ref.poison();
          tprt_status_t fs = tprt_cuda_linear_wgrad_fast(&dy.t, &x.t, &dw.t, lt, s);
          tprt_status_t es = tprt_cuda_linear_wgrad(&dy.t, &x.t, &ref.t, 8, s);
          fc_compare("linear_wgrad", shape, dw, ref, fs, es);
          if (out_f32) {  // dw += dyᵀ·x again: twice the exact product (doubling is exact)
            fs = tprt_cuda_linear_wgrad_acc_fast(&dy.t, &x.t, &dw.t, lt, s);
            es = tprt_cuda_add(&ref.t, &ref.t, &ref.t, s);
            fc_compare("linear_wgrad acc", shape, dw, ref, fs, es);
          }
        }
        {  // bias gradient
          fc_tensor db(od, {n}), ref(od, {n});
          db.poison(), ref.poison();
          tprt_status_t fs = tprt_cuda_bias_grad_fast(&dy.t, &db.t, lt, s);
          tprt_status_t es = tprt_cuda_bias_grad(&dy.t, &ref.t, 8, s);
          fc_compare("bias_grad", shape, db, ref, fs, es);
        }
      }
    }
  }
}

/// group_sizes[S*E] for T rows: |pattern| 0 uniform, 1 skewed (a few experts take most rows, some
/// none), 2 one expert takes all; with S > 1 each segment is filled to a random part of its
/// capacity (the rest is padding).
std::vector<int64_t> fc_counts(int64_t t, int64_t e, int64_t segs, int pattern) {
  std::vector<int64_t> c((size_t)(segs * e), 0);
  int64_t cap = t / segs;
  for (int64_t s = 0; s < segs; ++s) {
    int64_t rows = segs == 1 ? cap : cap - (int64_t)(fc_next() % (uint64_t)(cap / 2 + 1));
    if (pattern == 2) {
      c[(size_t)(s * e + (e - 1))] = rows;
      continue;
    }
    std::vector<double> wgt((size_t)e);
    double sum = 0;
    for (int64_t j = 0; j < e; ++j) {
      double u = (double)(fc_next() >> 11) * 0x1p-53;
      wgt[(size_t)j] = pattern == 0 ? 1.0 : (u < 0.3 ? 0.0 : pow(u, 4.0));
      sum += wgt[(size_t)j];
    }
    int64_t left = rows;
    for (int64_t j = 0; j < e; ++j) {
      int64_t n = sum > 0 ? (int64_t)floor((double)rows * wgt[(size_t)j] / sum) : 0;
      if (n > left) n = left;
      c[(size_t)(s * e + j)] = n;
      left -= n;
    }
    c[(size_t)(s * e + (e - 1))] += left;  // what rounding left over
  }
  return c;
}

static void fc_check_grouped(cudaStream_t s) {
  const fc_grouped_case cases[] = {{512, 256, 128, 8, 1, 0},   {512, 256, 128, 8, 1, 1},   {777, 384, 256, 4, 1, 1},
                        {1024, 512, 512, 64, 1, 1}, {1024, 512, 512, 64, 1, 0}, {256, 128, 64, 8, 1, 2},
                        {1024, 256, 384, 4, 4, 1},  {768, 384, 128, 8, 2, 0},   {16, 128, 256, 8, 1, 1}};
  for (const fc_grouped_case& c : cases) {
    for (int out_f32 = 0; out_f32 < 2; ++out_f32) {
      int od = out_f32 ? TPRT_DTYPE_F32 : TPRT_DTYPE_BF16;
      std::vector<int64_t> counts = c.counts();
      fc_tensor gs(counts);
      const std::string label = c.label();
      const char* shape = label.c_str();
      fc_tensor x(TPRT_DTYPE_BF16, {c.t, c.k}), w(TPRT_DTYPE_BF16, {c.e, c.n, c.k}), dy(TPRT_DTYPE_BF16, {c.t, c.n});
      x.fill(), w.fill(), dy.fill();
      {
        fc_tensor y(od, {c.t, c.n}), ref(od, {c.t, c.n});
        y.poison(), ref.poison();
        tprt_status_t fs = tprt_cuda_grouped_linear_fast(&x.t, &w.t, &gs.t, &y.t, s);
        tprt_status_t es = tprt_cuda_grouped_linear(&x.t, &w.t, &gs.t, &ref.t, 8, s);
        fc_compare("grouped_linear", shape, y, ref, fs, es);
      }
      {
        fc_tensor dx(od, {c.t, c.k}), ref(od, {c.t, c.k});
        dx.poison(), ref.poison();
        tprt_status_t fs = tprt_cuda_grouped_linear_dgrad_fast(&dy.t, &w.t, &gs.t, &dx.t, s);
        tprt_status_t es = tprt_cuda_grouped_linear_dgrad_segmented(&dy.t, &w.t, &gs.t, &ref.t, 8, 1, 1, s);
        fc_compare("grouped_linear_dgrad", shape, dx, ref, fs, es);
      }
      {
        fc_tensor dw(od, {c.e, c.n, c.k}), ref(od, {c.e, c.n, c.k});
        dw.poison(), ref.poison();
        tprt_status_t fs = tprt_cuda_grouped_linear_wgrad_fast(&dy.t, &x.t, &gs.t, &dw.t, s);
        tprt_status_t es = tprt_cuda_grouped_linear_wgrad(&dy.t, &x.t, &gs.t, &ref.t, 8, s);
        fc_compare("grouped_linear_wgrad", shape, dw, ref, fs, es);
      }
    }
  }
}

static void fc_check_mlp_and_graph(cudaStream_t s) {
  const int64_t t = 512, h = 256, f = 384, e = 8;
  std::vector<int64_t> counts = fc_counts(t, e, 1, 1);
  fc_tensor gs(counts);
  fc_tensor x(TPRT_DTYPE_BF16, {t, h}), w1(TPRT_DTYPE_BF16, {e, 2 * f, h}), w2(TPRT_DTYPE_BF16, {e, h, f});
  x.fill(), w1.fill(), w2.fill();
  fc_tensor y(TPRT_DTYPE_BF16, {t, h}), ref(TPRT_DTYPE_BF16, {t, h});
  y.poison(), ref.poison();
  tprt_status_t fs = tprt_cuda_fused_grouped_mlp_fast(&x.t, &w1.t, &w2.t, &gs.t, &y.t, 0, 0, 1.702f, 7.0f, s);
  tprt_status_t es = tprt_cuda_fused_grouped_mlp(&x.t, &w1.t, &w2.t, &gs.t, &ref.t, 0, 0, 1.702f, 7.0f, 8, s);
  fc_compare("fused_grouped_mlp", "T=512 H=256 F=384 E=8 swiglu", y, ref, fs, es);

  // The grouped forward captured into a CUDA graph and replayed: no host synchronization inside,
  // and new counts written between replays are honoured (they are read on the device).
  fc_tensor g(TPRT_DTYPE_BF16, {t, 2 * f}), gref(TPRT_DTYPE_BF16, {t, 2 * f});
  cudaStream_t cs;
  FC_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraph_t graph;
  FC_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  tprt_status_t cap = tprt_cuda_grouped_linear_fast(&x.t, &w1.t, &gs.t, &g.t, cs);
  FC_CUDA(cudaStreamEndCapture(cs, &graph));
  if (cap) {
    fc_compare("grouped_linear graph", "capture", g, gref, cap, nullptr);
  } else {
    cudaGraphExec_t exec;
    FC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<int64_t> c2 = fc_counts(t, e, 1, pattern);
      FC_CUDA(cudaMemcpy(gs.t.data, c2.data(), c2.size() * 8, cudaMemcpyHostToDevice));
      g.poison(), gref.poison();
      FC_CUDA(cudaGraphLaunch(exec, cs));
      FC_CUDA(cudaStreamSynchronize(cs));
      tprt_status_t es2 = tprt_cuda_grouped_linear(&x.t, &w1.t, &gs.t, &gref.t, 8, s);
      char what[64];
      snprintf(what, sizeof what, "replay, new counts %d", pattern);
      fc_compare("grouped_linear graph", what, g, gref, nullptr, es2);
    }
    FC_CUDA(cudaGraphExecDestroy(exec));
  }
  FC_CUDA(cudaGraphDestroy(graph));
  FC_CUDA(cudaStreamDestroy(cs));
}

/// Bitwise comparison of |n| elements of two device buffers of |dtype| (strided rows: |rows| rows
/// of |cols| at pitches |pa|, |pb| elements).
int64_t fc_diff_rows(const void* a, int64_t pa, const void* b, int64_t pb, int64_t rows, int64_t cols,
                            int elem) {
  std::vector<uint8_t> ha((size_t)(rows * cols * elem)), hb(ha.size());
  FC_CUDA(cudaMemcpy2D(ha.data(), (size_t)(cols * elem), a, (size_t)(pa * elem), (size_t)(cols * elem), (size_t)rows,
                       cudaMemcpyDeviceToHost));
  FC_CUDA(cudaMemcpy2D(hb.data(), (size_t)(cols * elem), b, (size_t)(pb * elem), (size_t)(cols * elem), (size_t)rows,
                       cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (size_t i = 0; i < ha.size(); i += (size_t)elem) bad += memcmp(&ha[i], &hb[i], (size_t)elem) != 0;
  return bad;
}

void fc_bitwise_row(const char* kernel, const char* what, int64_t bad, tprt_status_t s) {
  bool ok = !s && bad == 0;
  ok ? ++g_passed : ++g_failed;
  printf("%-22s %-34s %-5s %10lld  %s %s\n", kernel, what, "bits", (long long)bad, ok ? "pass" : "FAIL",
         s     ? tprt_status_message(s)
         : bad ? "elements differ"
               : "");
  tprt_status_free(s);
}

void fc_tree_row(const char* kernel, const char* shards, const std::vector<double>& tp1,
                 const std::vector<std::vector<double>>& parts, tprt_status_t s) {
  int64_t bad = 0;
  if (!s) {
    std::vector<std::vector<float>> p(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) p[i].assign(parts[i].begin(), parts[i].end());
    for (size_t step = 1; step < p.size(); step *= 2)
      for (size_t i = 0; i + step < p.size(); i += 2 * step)
        for (size_t j = 0; j < p[i].size(); ++j) p[i][j] = p[i][j] + p[i + step][j];
    for (size_t i = 0; i < p[0].size(); ++i) bad += (float)tp1[i] != p[0][i] && !(isnan(p[0][i]) && isnan(tp1[i]));
  }
  char what[64];
  snprintf(what, sizeof what, "%s=%zu partials + tree", shards, parts.size());
  fc_bitwise_row(kernel, what, bad, s);
}

std::string fc_grouped_case::label() const {
  const char* names[] = {"uniform", "skewed", "one expert"};
  char out[96];
  snprintf(out, sizeof out, "T=%lld N=%lld K=%lld E=%lld S=%lld %s", (long long)t, (long long)n, (long long)k,
           (long long)e, (long long)segs, names[pattern]);
  return out;
}

// The GLU and its gradient with the approximate exponential and division (fast numerics) against
// the exact kernels: every kind, the 16-byte runs (F a multiple of 8) and the scalar path (odd F),
// interleaved gate/up blocks.
static void fc_check_glu(cudaStream_t s) {
  const int64_t shapes[][3] = {{64, 512, 0}, {33, 1000, 8}, {7, 101, 0}, {256, 4096, 0}};  // rows, F, interleave
  const int dtypes[] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};
  const char* kinds[] = {"swiglu", "geglu", "quick_geglu"};
  for (const auto& sh : shapes) {
    for (int dt : dtypes) {
      for (int kind = 0; kind < 3; ++kind) {
        int64_t rows = sh[0], f = sh[1], il = sh[2];
        char shape[64];
        snprintf(shape, sizeof shape, "%s T=%lld F=%lld il=%lld", kinds[kind], (long long)rows, (long long)f,
                 (long long)il);
        fc_tensor x(dt, {rows, 2 * f}), dy(dt, {rows, f});
        x.fill(), dy.fill();
        fc_tensor y(dt, {rows, f}), ref(dt, {rows, f}), dx(dt, {rows, 2 * f}), dref(dt, {rows, 2 * f});
        y.poison(), ref.poison(), dx.poison(), dref.poison();
        const float alpha = 1.702f, limit = 0.75f;  // limit inside the inputs' range: both clamps taken
        tprt_status_t fs = tprt_cuda_glu_fast(&x.t, &y.t, kind, il, alpha, limit, s);
        tprt_status_t es = tprt_cuda_glu(&x.t, &ref.t, kind, il, alpha, limit, s);
        fc_compare("glu", shape, y, ref, fs, es);
        fs = tprt_cuda_glu_grad_fast(&x.t, &dy.t, &dx.t, kind, il, alpha, limit, s);
        es = tprt_cuda_glu_grad(&x.t, &dy.t, &dref.t, kind, il, alpha, limit, s);
        fc_compare("glu_grad", shape, dx, dref, fs, es);
      }
    }
  }
}

// The gradient norm's sum of squares in f64 (fast numerics) against the exact integer sum: the
// norms of g with and without an incoming accumulator agree to f32's rounding; a NaN element gives
// a NaN norm and an infinite one +inf, as the exact kernel's.
static void fc_check_sumsq(cudaStream_t s) {
  const int64_t sizes[] = {1, 7, 1000, 3000000 + 5};
  for (int64_t n : sizes) {
    for (int dt : {TPRT_DTYPE_F32, TPRT_DTYPE_BF16}) {
      for (int special = 0; special < 3; ++special) {
        fc_tensor g(dt, {n}), seed(TPRT_DTYPE_F32, {n}), acc(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS});
        fc_tensor fa(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS}), ea(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS});
        fc_tensor fnorm(TPRT_DTYPE_F32, {1}), enorm(TPRT_DTYPE_F32, {1});
        g.fill(), seed.fill();
        if (special) {  // one element NaN (1) or +inf (2)
          std::vector<uint8_t> h(g.bytes());
          FC_CUDA(cudaMemcpy(h.data(), g.t.data, g.bytes(), cudaMemcpyDeviceToHost));
          tprt_store_elem(h.data(), dt, n / 2, special == 1 ? NAN : INFINITY);
          FC_CUDA(cudaMemcpy(g.t.data, h.data(), g.bytes(), cudaMemcpyHostToDevice));
        }
        tprt_status_t st = tprt_cuda_sumsq(&seed.t, NULL, &acc.t, true, s);
        tprt_status_t fs = st ? st : tprt_cuda_sumsq_fast(&g.t, &acc.t, &fa.t, true, s);
        tprt_status_t es = st ? NULL : tprt_cuda_sumsq(&g.t, &acc.t, &ea.t, true, s);
        if (!fs) fs = tprt_cuda_global_norm(&fa.t, &fnorm.t, s);
        if (!es) es = tprt_cuda_global_norm(&ea.t, &enorm.t, s);
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld%s", (long long)n, special == 1 ? " NaN" : special == 2 ? " inf" : "");
        if (special) {
          FC_CUDA(cudaStreamSynchronize(s));
          const double f = fnorm.host()[0], e = enorm.host()[0];
          const bool same = special == 1 ? (isnan(f) && isnan(e)) : (isinf(f) && isinf(e) && f > 0 && e > 0);
          fc_bitwise_row("sumsq fast", shape, fs || es ? 0 : !same, fs ? fs : es);
          if (fs && es) tprt_status_free(es);
        } else {
          fc_compare("sumsq fast norm", shape, fnorm, enorm, fs, es, 1e-6);
        }
      }
    }
  }
}

// Invariant numerics' sum of squares (the squares cut to 24 bits): its norm against the exact
// one, its layout independence (the tensor in three unaligned parts, chained through the
// accumulator, must give the whole tensor's words bit for bit), NaN and inf as the exact sum
// counts them, and a long run of equal squares (every thread's registers emptied many times
// before they could overflow).
static void fc_check_sumsq_cut(cudaStream_t s) {
  const int64_t sizes[] = {1, 7, 1000, 3000000 + 5, 200000000};
  for (int64_t n : sizes) {
    for (int dt : {TPRT_DTYPE_F32, TPRT_DTYPE_BF16}) {
      for (int special = 0; special < (n == 200000000 ? 1 : 3); ++special) {
        fc_tensor g(dt, {n}), whole(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS}), ea(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS});
        fc_tensor a1(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS}), a2(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS});
        fc_tensor a3(TPRT_DTYPE_I64, {TPRT_SUMSQ_WORDS});
        fc_tensor cnorm(TPRT_DTYPE_F32, {1}), enorm(TPRT_DTYPE_F32, {1});
        if (n == 200000000) {  // every element 1.99 (the largest bf16 significand): equal squares
          std::vector<uint8_t> h(g.bytes());
          for (int64_t i = 0; i < n; ++i) tprt_store_elem(h.data(), dt, i, 1.9921875f);
          FC_CUDA(cudaMemcpy(g.t.data, h.data(), g.bytes(), cudaMemcpyHostToDevice));
        } else {
          std::vector<uint8_t> h(g.bytes());
          for (int64_t i = 0; i < n; ++i) {  // [-1, 1) times 2^-40 .. 2^20: many binades and limbs
            const float v = (float)((int64_t)(fc_next() >> 40) - (1 << 23)) * 0x1p-23f;
            tprt_store_elem(h.data(), dt, i, ldexpf(v, (int)(fc_next() % 61) - 40));
          }
          if (special) tprt_store_elem(h.data(), dt, n / 2, special == 1 ? NAN : INFINITY);
          FC_CUDA(cudaMemcpy(g.t.data, h.data(), g.bytes(), cudaMemcpyHostToDevice));
        }
        tprt_status_t cs = tprt_cuda_sumsq_cut(&g.t, NULL, &whole.t, true, s);
        tprt_status_t es = tprt_cuda_sumsq(&g.t, NULL, &ea.t, true, s);
        // Three parts at unaligned cuts, chained.
        const int64_t c1 = n / 3 + (n > 3), c2 = 2 * n / 3 + (n > 6);
        const int64_t lens[3] = {c1, c2 - c1, n - c2};
        tprt_status_t ps = NULL;
        int64_t off = 0;
        fc_tensor* outs[3] = {&a1, &a2, &a3};
        for (int q = 0; q < 3 && !ps; ++q) {
          int64_t d[1] = {lens[q]};
          tprt_tensor_t part = tprt_tensor_make((char*)g.t.data + off * tprt_dtype_bytes(dt, 1), dt, 1, d);
          ps = tprt_cuda_sumsq_cut(&part, q ? &outs[q - 1]->t : NULL, &outs[q]->t, true, s);
          off += lens[q];
        }
        if (!cs) cs = tprt_cuda_global_norm(&whole.t, &cnorm.t, s);
        if (!es) es = tprt_cuda_global_norm(&ea.t, &enorm.t, s);
        FC_CUDA(cudaStreamSynchronize(s));
        char shape[64];
        snprintf(shape, sizeof shape, "%s n=%lld%s", tprt_dtype_name(dt), (long long)n,
                 special == 1 ? " NaN" : special == 2 ? " inf" : "");
        fc_bitwise_row("sumsq cut parts", shape,
                       cs || ps ? 0 : fc_diff_rows(whole.t.data, 0, a3.t.data, 0, 1, TPRT_SUMSQ_WORDS, 8), ps);
        if (special) {
          const double c = cnorm.host()[0], e = enorm.host()[0];
          const bool same = special == 1 ? (isnan(c) && isnan(e)) : (isinf(c) && isinf(e) && c > 0 && e > 0);
          fc_bitwise_row("sumsq cut", shape, cs || es ? 0 : !same, cs ? cs : es);
          if (cs && es) tprt_status_free(es);
        } else {
          fc_compare("sumsq cut norm", shape, cnorm, enorm, cs, es, 1e-6);
        }
      }
    }
  }
}

// The norms of fast numerics against the exact kernels: rows read once (16-byte runs, or an
// element at a time for odd H and an unaligned view), one to four runs per thread, rows wider than
// that (the exact kernel), more rows than the grid (grid-stride with the next row prefetched).
static void fc_check_norm_fast(cudaStream_t s) {
  const int64_t shapes[][2] = {{4096, 2048}, {3000, 4104}, {257, 8192}, {64, 8200}, {33, 200}, {5000, 64}, {7, 1}};
  for (const auto& sh : shapes) {
    const int64_t m = sh[0], h = sh[1];
    for (int dt : {TPRT_DTYPE_BF16, TPRT_DTYPE_F32})
      for (int ln = 0; ln < 2; ++ln)
        for (int offset = 0; offset < 2; ++offset) {
          fc_tensor x(dt, {m + 1, h}), gamma(TPRT_DTYPE_BF16, {h}), beta(TPRT_DTYPE_BF16, {h});
          fc_tensor y(dt, {m, h}), ry(dt, {m, h});
          x.fill(), gamma.fill(), beta.fill(), y.poison(), ry.poison();
          int64_t xd[2] = {m, h};
          // |offset|: rows starting one element into the allocation (not 16-byte aligned).
          tprt_tensor_t xv = tprt_tensor_make((char*)x.t.data + offset * tprt_dtype_bytes(dt, 1), dt, 2, xd);
          tprt_status_t fs = ln ? tprt_cuda_layernorm_fast(&xv, &gamma.t, &beta.t, &y.t, 1e-5f, s)
                                : tprt_cuda_rmsnorm_fast(&xv, &gamma.t, &y.t, 1e-5f, s);
          tprt_status_t es = ln ? tprt_cuda_layernorm(&xv, &gamma.t, &beta.t, &ry.t, 1e-5f, s)
                                : tprt_cuda_rmsnorm(&xv, &gamma.t, &ry.t, 1e-5f, s);
          FC_CUDA(cudaStreamSynchronize(s));
          char shape[80];
          snprintf(shape, sizeof shape, "%s %s M=%lld H=%lld%s", ln ? "layernorm" : "rmsnorm", tprt_dtype_name(dt),
                   (long long)m, (long long)h, offset ? " unaligned" : "");
          fc_compare("norm fast", shape, y, ry, fs, es, dt == TPRT_DTYPE_F32 ? 1e-5 : 1e-2);
        }
  }
}

// The norm gradients of fast and invariant numerics against the exact kernels (dx and dgamma
// within the dtype's rounding: another row reduction) and their invariance: the tokens split into
// R = 2, 4 shards of whole chunks (data parallelism), each shard's f32 dgamma summed by the
// canonical tree, must give the whole batch's bits; the accumulating form (rmsnorm) must be the
// plain one followed by tprt_cuda_add, bitwise. Short chunks (one piece) and long ones, 16-byte
// rows and odd H, one to four runs per thread and rows wider than that (the exact rows kernel).
static void fc_check_norm_grad_pieces(cudaStream_t s) {
  const int64_t shapes[][3] = {{8192, 512, 4},  {4096 + 64, 200, 8}, {96, 64, 2},     {2048, 1000, 1},
                               {8192, 2048, 8}, {1024, 4104, 4},     {512, 8192, 8},   {256, 9000, 2},  {600, 1001, 4}};  // M, H, C
  for (const auto& sh : shapes) {
    const int64_t m = sh[0], h = sh[1];
    const int chunks = (int)sh[2];
    for (int ln = 0; ln < 2; ++ln) {
      fc_tensor x(TPRT_DTYPE_BF16, {m, h}), gamma(TPRT_DTYPE_BF16, {h}), dy(TPRT_DTYPE_BF16, {m, h});
      x.fill(), gamma.fill(), dy.fill();
      fc_tensor dx(TPRT_DTYPE_BF16, {m, h}), dg(TPRT_DTYPE_F32, {h}), db(TPRT_DTYPE_F32, {h});
      fc_tensor rdx(TPRT_DTYPE_BF16, {m, h}), rdg(TPRT_DTYPE_F32, {h}), rdb(TPRT_DTYPE_F32, {h});
      for (fc_tensor* t : {&dx, &dg, &db, &rdx, &rdg, &rdb}) t->poison();
      auto run = [&](bool pieces, const tprt_tensor_t* xx, const tprt_tensor_t* dd, tprt_tensor_t* ox,
                     tprt_tensor_t* og, tprt_tensor_t* ob, int c) {
        if (ln)
          return pieces ? tprt_cuda_layernorm_grad_pieces(xx, &gamma.t, dd, ox, og, ob, 1e-5f, c, s)
                        : tprt_cuda_layernorm_grad(xx, &gamma.t, dd, ox, og, ob, 1e-5f, c, s);
        return pieces ? tprt_cuda_rmsnorm_grad_pieces(xx, &gamma.t, dd, ox, og, 1e-5f, c, s)
                      : tprt_cuda_rmsnorm_grad(xx, &gamma.t, dd, ox, og, 1e-5f, c, s);
      };
      char shape[80];
      snprintf(shape, sizeof shape, "%s M=%lld H=%lld C=%d", ln ? "layernorm" : "rmsnorm", (long long)m, (long long)h,
               chunks);
      tprt_status_t ps = run(true, &x.t, &dy.t, &dx.t, &dg.t, &db.t, chunks);
      tprt_status_t es = run(false, &x.t, &dy.t, &rdx.t, &rdg.t, &rdb.t, chunks);
      FC_CUDA(cudaStreamSynchronize(s));
      fc_compare("norm_grad pieces dx", shape, dx, rdx, ps, es, 1e-2);
      fc_compare("norm_grad pieces dg", shape, dg, rdg, NULL, NULL, 1e-4);
      if (!ln) {  // the accumulating form: the plain one, then the add
        fc_tensor acc(TPRT_DTYPE_BF16, {m, h}), sum(TPRT_DTYPE_BF16, {m, h}), adx(TPRT_DTYPE_BF16, {m, h});
        fc_tensor adg(TPRT_DTYPE_F32, {h});
        acc.fill(), sum.poison(), adx.poison(), adg.poison();
        tprt_status_t as = tprt_cuda_add(&dx.t, &acc.t, &sum.t, s);
        if (!as) as = tprt_cuda_rmsnorm_grad_acc(&x.t, &gamma.t, &dy.t, &acc.t, &adx.t, &adg.t, 1e-5f, chunks, true, s);
        FC_CUDA(cudaStreamSynchronize(s));
        fc_bitwise_row("norm_grad pieces acc dx", shape, as ? 0 : fc_diff_rows(adx.t.data, h, sum.t.data, h, m, h, 2), as);
        fc_bitwise_row("norm_grad pieces acc dg", shape, as ? 0 : fc_diff_rows(adg.t.data, h, dg.t.data, h, 1, h, 4), NULL);
      }
      if (ln) fc_compare("norm_grad pieces db", shape, db, rdb, NULL, NULL, 1e-5);
      for (int r = 2; r <= chunks; r *= 2) {
        std::vector<std::vector<double>> parts_g, parts_b;
        tprt_status_t st = NULL;
        for (int q = 0; q < r && !st; ++q) {
          const int64_t rows = m / r;
          int64_t xd[2] = {rows, h};
          tprt_tensor_t xs = tprt_tensor_make((char*)x.t.data + q * rows * h * 2, TPRT_DTYPE_BF16, 2, xd);
          tprt_tensor_t ds = tprt_tensor_make((char*)dy.t.data + q * rows * h * 2, TPRT_DTYPE_BF16, 2, xd);
          fc_tensor sx(TPRT_DTYPE_BF16, {rows, h}), sg(TPRT_DTYPE_F32, {h}), sb(TPRT_DTYPE_F32, {h});
          st = run(true, &xs, &ds, &sx.t, &sg.t, &sb.t, chunks / r);
          FC_CUDA(cudaStreamSynchronize(s));
          parts_g.push_back(sg.host());
          parts_b.push_back(sb.host());
        }
        fc_tree_row(ln ? "layernorm_grad dg" : "rmsnorm_grad dg", "token shards DP", dg.host(), parts_g, st);
        if (ln) fc_tree_row("layernorm_grad db", "token shards DP", db.host(), parts_b, NULL);
      }
    }
  }
}

// The cross-entropy's FAST and INVARIANT math (and FAST's pieces accumulating into dw) against the
// exact kernels, all on the exact GEMMs (so only the math differs): the loss, lse, dx and dw of
// tprt_cuda_cross_entropy_with_grad, with ignored targets, rows of 16-byte runs and odd rows, one
// piece and pieces of three tokens; the vocabulary-parallel statistics with another rank's rows.
// INVARIANT must also give the same bits for any piece size and for two vocabulary shards combined
// as two ranks; in every math the loss of the logits themselves is the loss's bits. The GEMMs are
// the exact ones of ce_exact_gemms.h.
static void fc_check_cross_entropy(cudaStream_t s) {
  const int64_t shapes[][3] = {{64, 64, 1000}, {257, 128, 4096}, {33, 32, 777}};  // T, H, V
  const int dtypes[] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F32};
  // The maths against EXACT: FAST (also with the accumulating wgrad) and INVARIANT.
  const struct {
    tprt_cuda_ce_math_t math;
    bool acc;
    const char* name;
  } maths[] = {{TPRT_CUDA_CE_FAST, false, "fast"}, {TPRT_CUDA_CE_FAST, true, "fast acc"},
               {TPRT_CUDA_CE_INVARIANT, false, "invariant"}};
  for (const auto& sh : shapes) {
    const int64_t t = sh[0], h = sh[1], v = sh[2];
    std::vector<int32_t> tg(t);
    for (int64_t i = 0; i < t; ++i) tg[i] = i % 5 == 2 ? -1 : (int32_t)(fc_next() % (uint64_t)v);
    fc_tensor targets(TPRT_DTYPE_I32, {t});
    FC_CUDA(cudaMemcpy(targets.t.data, tg.data(), t * sizeof(int32_t), cudaMemcpyHostToDevice));
    for (int dt : dtypes) {
      fc_tensor x(dt, {t, h}), w(dt, {v, h}), g(TPRT_DTYPE_F32, {t});
      x.fill(), w.fill(), g.fill();
      // INVARIANT's outputs without pieces: every piece size must give their bits.
      fc_tensor iloss(TPRT_DTYPE_F32, {t}), ilse(TPRT_DTYPE_F32, {t}), idx(dt, {t, h}), idw(TPRT_DTYPE_F32, {v, h});
      for (const auto& mt : maths) {
        for (int piece = 0; piece < 2; ++piece) {
          const size_t budget = piece ? (size_t)(3 * v) * tprt_dtype_bytes(dt, 1) : 0;
          const tprt_cuda_ce_gemms_t got = ce_exact_gemms(budget, mt.math, mt.acc),
                                     exact = ce_exact_gemms(budget, TPRT_CUDA_CE_EXACT);
          char shape[80];
          snprintf(shape, sizeof shape, "%s T=%lld H=%lld V=%lld%s", mt.name, (long long)t, (long long)h, (long long)v,
                   piece ? " pieces" : "");
          fc_tensor loss(TPRT_DTYPE_F32, {t}), lse(TPRT_DTYPE_F32, {t}), dx(dt, {t, h}), dw(TPRT_DTYPE_F32, {v, h});
          fc_tensor rloss(TPRT_DTYPE_F32, {t}), rlse(TPRT_DTYPE_F32, {t}), rdx(dt, {t, h}), rdw(TPRT_DTYPE_F32, {v, h});
          for (fc_tensor* p : {&loss, &lse, &dx, &dw, &rloss, &rlse, &rdx, &rdw}) p->poison();
          tprt_status_t fs = tprt_cuda_cross_entropy_with_grad(&x.t, &w.t, &targets.t, &g.t, &loss.t, &lse.t, &dx.t,
                                                               &dw.t, 4, 4, 4, &got, s);
          tprt_status_t es = tprt_cuda_cross_entropy_with_grad(&x.t, &w.t, &targets.t, &g.t, &rloss.t, &rlse.t,
                                                               &rdx.t, &rdw.t, 4, 4, 4, &exact, s);
          // The gradients' tolerance is the inputs' dtype's: dZ rounds to it before the products.
          const double grad_tol = dt == TPRT_DTYPE_BF16 ? 1e-2 : 1e-4;
          fc_compare("ce_with_grad loss", shape, loss, rloss, fs, es);
          fc_compare("ce_with_grad lse", shape, lse, rlse, NULL, NULL);
          fc_compare("ce_with_grad dx", shape, dx, rdx, NULL, NULL, grad_tol);
          fc_compare("ce_with_grad dw", shape, dw, rdw, NULL, NULL, grad_tol);
          if (mt.math == TPRT_CUDA_CE_INVARIANT) {
            if (!piece) {
              fc_tensor* keep[4][2] = {{&iloss, &loss}, {&ilse, &lse}, {&idx, &dx}, {&idw, &dw}};
              for (auto& k : keep)  // on s: the kernels that wrote them run there
                FC_CUDA(cudaMemcpyAsync(k[0]->t.data, k[1]->t.data, k[1]->bytes(), cudaMemcpyDeviceToDevice, s));
            } else {
              int64_t bad = fc_diff_rows(loss.t.data, t, iloss.t.data, t, 1, t, 4) +
                            fc_diff_rows(lse.t.data, t, ilse.t.data, t, 1, t, 4) +
                            fc_diff_rows(dx.t.data, h, idx.t.data, h, t, h, (int)tprt_dtype_bytes(dt, 1)) +
                            fc_diff_rows(dw.t.data, h, idw.t.data, h, v, h, 4);
              fc_bitwise_row("ce_with_grad inv", "pieces = one piece", bad, NULL);
            }
          }
          // A vocabulary shard (rows [v/2, v) of a 2v-row vocabulary, half the targets elsewhere).
          fc_tensor st(TPRT_DTYPE_F32, {t, 3}), rst(TPRT_DTYPE_F32, {t, 3});
          st.poison(), rst.poison();
          fs = tprt_cuda_cross_entropy_stats(&x.t, &w.t, &targets.t, &st.t, v / 2, 2 * v, 4, 4, &got, s);
          es = tprt_cuda_cross_entropy_stats(&x.t, &w.t, &targets.t, &rst.t, v / 2, 2 * v, 4, 4, &exact, s);
          fc_compare("ce_stats shard", shape, st, rst, fs, es);
        }
      }
      // Two vocabulary shards of two blocks each, combined as two ranks: bitwise the whole
      // vocabulary's four blocks (stats and combine as one rank, and, for INVARIANT, the lse of
      // ce_with_grad above) when the blocks are whole shards' halves (4 divides V). EXACT too: the
      // property the invariant math keeps.
      for (tprt_cuda_ce_math_t math : {TPRT_CUDA_CE_EXACT, TPRT_CUDA_CE_INVARIANT}) {
        if (v % 4 != 0) break;
        const tprt_cuda_ce_gemms_t gm = ce_exact_gemms(0, math);
        fc_tensor st1(TPRT_DTYPE_F32, {t, 3}), st2(TPRT_DTYPE_F32, {t, 6}), part(TPRT_DTYPE_F32, {t, 3});
        fc_tensor loss1(TPRT_DTYPE_F32, {t}), lse1(TPRT_DTYPE_F32, {t}), loss(TPRT_DTYPE_F32, {t}), lse(TPRT_DTYPE_F32, {t});
        tprt_status_t st = tprt_cuda_cross_entropy_stats(&x.t, &w.t, &targets.t, &st1.t, 0, v, 4, 4, &gm, s);
        if (!st) st = tprt_cuda_cross_entropy_combine(&st1.t, &targets.t, &loss1.t, &lse1.t, s);
        for (int q = 0; q < 2 && !st; ++q) {
          tprt_tensor_t wq = w.t;
          wq.dims[0] = v / 2;
          wq.data = (char*)w.t.data + (size_t)(q * (v / 2) * h) * tprt_dtype_bytes(dt, 1);
          st = tprt_cuda_cross_entropy_stats(&x.t, &wq, &targets.t, &part.t, q * (v / 2), v, 4, 2, &gm, s);
          if (!st)
            FC_CUDA(cudaMemcpy2DAsync((char*)st2.t.data + 12 * q, 24, part.t.data, 12, 12, (size_t)t,
                                      cudaMemcpyDeviceToDevice, s));
        }
        if (!st) st = tprt_cuda_cross_entropy_combine(&st2.t, &targets.t, &loss.t, &lse.t, s);
        FC_CUDA(cudaStreamSynchronize(s));
        char what[64];
        snprintf(what, sizeof what, "%s 2 shards T=%lld V=%lld %s", math == TPRT_CUDA_CE_EXACT ? "exact" : "inv",
                 (long long)t, (long long)v, tprt_dtype_name(dt));
        fc_bitwise_row("ce vocab shards", what, st ? 0 : fc_diff_rows(lse.t.data, t, lse1.t.data, t, 1, t, 4) +
                                                       fc_diff_rows(loss.t.data, t, loss1.t.data, t, 1, t, 4), st);
        if (math == TPRT_CUDA_CE_INVARIANT && !st) {
          snprintf(what, sizeof what, "stats = with_grad T=%lld V=%lld %s", (long long)t, (long long)v,
                   tprt_dtype_name(dt));
          fc_bitwise_row("ce inv", what, fc_diff_rows(lse1.t.data, t, ilse.t.data, t, 1, t, 4), NULL);
        }
      }
      // The loss of given logits (tp.cross_entropy_logits): of z = the GEMMs' linear, in each math,
      // the cross-entropy's own loss and lse bit for bit (a decoding step's head computes z once).
      for (tprt_cuda_ce_math_t math : {TPRT_CUDA_CE_EXACT, TPRT_CUDA_CE_INVARIANT, TPRT_CUDA_CE_FAST}) {
        const tprt_cuda_ce_gemms_t gm = ce_exact_gemms(0, math);
        fc_tensor z(dt, {t, v}), loss1(TPRT_DTYPE_F32, {t}), lse1(TPRT_DTYPE_F32, {t});
        fc_tensor loss(TPRT_DTYPE_F32, {t}), lse(TPRT_DTYPE_F32, {t});
        for (fc_tensor* p : {&loss1, &lse1, &loss, &lse}) p->poison();
        tprt_status_t st = tprt_cuda_cross_entropy(&x.t, &w.t, &targets.t, &loss1.t, &lse1.t, 4, &gm, s);
        if (!st) st = gm.linear(gm.ctx, &x.t, &w.t, &z.t, 4, s);
        if (!st) st = tprt_cuda_cross_entropy_logits(&z.t, &targets.t, &loss.t, &lse.t, 4, math, s);
        FC_CUDA(cudaStreamSynchronize(s));
        char what[64];
        snprintf(what, sizeof what, "%s T=%lld V=%lld %s",
                 math == TPRT_CUDA_CE_EXACT ? "exact" : math == TPRT_CUDA_CE_FAST ? "fast" : "inv", (long long)t,
                 (long long)v, tprt_dtype_name(dt));
        fc_bitwise_row("ce of logits", what, st ? 0 : fc_diff_rows(lse.t.data, t, lse1.t.data, t, 1, t, 4) +
                                                    fc_diff_rows(loss.t.data, t, loss1.t.data, t, 1, t, 4), st);
      }
    }
  }
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("tprt-cuda-check-fast: no CUDA device\n");
    return 77;
  }
  g_rng = argc > 1 ? strtoull(argv[1], nullptr, 0) : (uint64_t)time(nullptr);
  printf("tprt-cuda-check-fast: seed %llu (pass it as the argument to repeat a run)\n", (unsigned long long)g_rng);
  printf("%-22s %-34s %-5s %10s\n", "kernel", "shape", "out", "rel. err");
  cudaStream_t s;
  FC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  tprt_cuda_lt_t lt;
  tprt_status_t st = tprt_cuda_lt_create(&lt);
  if (st) {
    printf("cuBLASLt: %s\n", tprt_status_message(st));
    tprt_status_free(st);
    ++g_failed;
  } else {
    fc_check_dense(&lt, s);
  }
  fc_check_skinny(s);
  fc_check_grouped(s);
  fc_check_mlp_and_graph(s);
  fc_check_invariant(s);
  fc_check_grouped_invariant(s);
  fc_check_grouped_glu(s);
  fc_check_attention(s);
  fc_check_glu(s);
  fc_check_cross_entropy(s);
  fc_check_norm_fast(s);
  fc_check_add_norm_fast(s);
  fc_check_norm_grad_pieces(s);
  fc_check_sumsq(s);
  fc_check_sumsq_cut(s);
  FC_CUDA(cudaStreamSynchronize(s));
  tprt_cuda_lt_destroy(&lt);
  printf("fast kernels: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
