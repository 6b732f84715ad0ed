// tprt-cuda-check-fast, the kernels of a decoding step: fast numerics' skinny linear against the
// exact kernel, and tp.add_rmsnorm's one-launch fast form against the add and norm it fuses
// (check_fast.h).
#include "check_fast.h"
#include "gemm/tprt_cuda_skinny.h"

// The skinny linear of a decoding step (linear_skinny.cu) against the exact kernel, M = 1 to its most,
// bf16 and f16, with and without the bias, N not a multiple of the block's 4 columns and K not a
// multiple of its 256 threads' 16-byte runs; the 1B model's head shape once.
void fc_check_skinny(cudaStream_t s) {
  const int64_t shapes[][2] = {{2048, 2048}, {514, 2056}, {16384, 2048}, {2048, 8192}, {1, 8}, {7, 24}};  // N, K
  for (const auto& sh : shapes)
    for (int64_t m = 1; m <= TPRT_CUDA_SKINNY_MAX_ROWS; ++m)
      for (int dt : {TPRT_DTYPE_BF16, TPRT_DTYPE_F16})
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          const int64_t n = sh[0], k = sh[1];
          char shape[64];
          snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld%s", (long long)m, (long long)n, (long long)k,
                   dt == TPRT_DTYPE_F16 ? " f16" : "");
          fc_tensor x(dt, {m, k}), w(dt, {n, k}), bias(dt, {n}), y(dt, {m, n}), ref(dt, {m, n});
          x.fill(), w.fill(), bias.fill(), y.poison(), ref.poison();
          const tprt_tensor_t* b = with_bias ? &bias.t : nullptr;
          tprt_status_t fs = tprt_cuda_linear_skinny_fits(&x.t, &w.t, b, &y.t)
                                 ? tprt_cuda_linear_skinny(&x.t, &w.t, b, &y.t, s)
                                 : tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "skinny: does not fit");
          tprt_status_t es = tprt_cuda_linear(&x.t, &w.t, b, &ref.t, 8, s);
          fc_compare(with_bias ? "skinny linear+bias" : "skinny linear", shape, y, ref, fs, es);
        }
  {  // the 1B model's head at one row
    const int64_t m = 1, n = 128256, k = 2048;
    fc_tensor x(TPRT_DTYPE_BF16, {m, k}), w(TPRT_DTYPE_BF16, {n, k}), y(TPRT_DTYPE_BF16, {m, n}),
        ref(TPRT_DTYPE_BF16, {m, n});
    x.fill(), w.fill(), y.poison(), ref.poison();
    tprt_status_t fs = tprt_cuda_linear_skinny(&x.t, &w.t, nullptr, &y.t, s);
    tprt_status_t es = tprt_cuda_linear(&x.t, &w.t, nullptr, &ref.t, 8, s);
    fc_compare("skinny linear", "M=1 N=128256 K=2048", y, ref, fs, es);
  }
  // One row too many, an f32 output, an odd K: not the skinny kernel's.
  const int64_t m9 = TPRT_CUDA_SKINNY_MAX_ROWS + 1;
  fc_tensor x9(TPRT_DTYPE_BF16, {m9, 64}), w(TPRT_DTYPE_BF16, {32, 64}), y9(TPRT_DTYPE_BF16, {m9, 32});
  fc_tensor x1(TPRT_DTYPE_BF16, {1, 64}), y32(TPRT_DTYPE_F32, {1, 32});
  fc_tensor x5(TPRT_DTYPE_BF16, {1, 60}), w5(TPRT_DTYPE_BF16, {32, 60}), y5(TPRT_DTYPE_BF16, {1, 32});
  const bool refused = !tprt_cuda_linear_skinny_fits(&x9.t, &w.t, nullptr, &y9.t) &&
                       !tprt_cuda_linear_skinny_fits(&x1.t, &w.t, nullptr, &y32.t) &&
                       !tprt_cuda_linear_skinny_fits(&x5.t, &w5.t, nullptr, &y5.t);
  fc_bitwise_row("skinny fits", "M=max+1, f32 y, K=60 refused", refused ? 0 : 1, NULL);
}

// tp.add_rmsnorm in fast numerics (one launch) against the pair it fuses, tprt_cuda_add then
// tprt_cuda_rmsnorm_fast: normed and sum bitwise. 16-byte rows and odd H, one to four runs per
// thread, rows wider than that (the canonical kernel), more rows than the grid.
void fc_check_add_norm_fast(cudaStream_t s) {
  const int64_t shapes[][2] = {{1, 2048}, {64, 2048}, {5000, 64}, {33, 200}, {257, 8192}, {3, 8200}, {7, 1}};
  for (const auto& sh : shapes)
    for (int dt : {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32}) {
      const int64_t m = sh[0], h = sh[1];
      fc_tensor r(dt, {m, h}), x(dt, {m, h}), gamma(TPRT_DTYPE_BF16, {h});
      fc_tensor y(dt, {m, h}), sum(dt, {m, h}), ry(dt, {m, h}), rsum(dt, {m, h});
      r.fill(), x.fill(), gamma.fill(), y.poison(), sum.poison(), ry.poison(), rsum.poison();
      tprt_status_t fs = tprt_cuda_add_rmsnorm_fast(&r.t, &x.t, &gamma.t, &y.t, &sum.t, 1e-5f, s);
      tprt_status_t es = tprt_cuda_add(&r.t, &x.t, &rsum.t, s);
      if (!es) es = tprt_cuda_rmsnorm_fast(&rsum.t, &gamma.t, &ry.t, 1e-5f, s);
      FC_CUDA(cudaStreamSynchronize(s));
      char what[80];
      snprintf(what, sizeof what, "%s M=%lld H=%lld = add, rmsnorm fast", tprt_dtype_name(dt), (long long)m, (long long)h);
      int64_t bad = 0;
      if (!fs && !es) {
        const int64_t e = tprt_dtype_bytes(dt, 1);
        bad = fc_diff_rows(y.t.data, h, ry.t.data, h, m, h, (int)e) +
              fc_diff_rows(sum.t.data, h, rsum.t.data, h, m, h, (int)e);
      }
      if (es && !fs) fs = es, es = NULL;
      fc_bitwise_row("add_rmsnorm fast", what, bad, fs);
      if (es) tprt_status_free(es);
    }
}
