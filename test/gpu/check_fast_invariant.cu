// tprt-cuda-check-fast, invariant mode: the chunk-tree tensor-core GEMMs (dense and grouped,
// forward, dgrad, wgrad, the fused grouped MLP, the GLU epilogue) close to the exact kernels and
// bitwise invariant over the batch, column and K shards, segments and experts (check_fast.h).
#include "check_fast.h"

/// Invariant-mode tensor-core kernels: close to the exact ones, and bitwise invariant over the
/// batch (rows alone = rows in a batch), column shards, and row-parallel K shards (R ranks each
/// computing its chunk subtree as an f32 partial, summed by the canonical tree) for R = 2, 4, 8.
void fc_check_invariant(cudaStream_t s) {
  const int64_t m = 4096 + 37, n = 1024 + 64, k = 4096, chunks = 8;
  fc_tensor x(TPRT_DTYPE_BF16, {m, k}), w(TPRT_DTYPE_BF16, {n, k}), bias(TPRT_DTYPE_BF16, {n});
  x.fill(), w.fill(), bias.fill();
  fc_tensor y(TPRT_DTYPE_BF16, {m, n}), ref(TPRT_DTYPE_BF16, {m, n}), yf(TPRT_DTYPE_F32, {m, n});
  y.poison(), ref.poison(), yf.poison();
  tprt_status_t is = tprt_cuda_linear_invariant(&x.t, &w.t, &bias.t, &y.t, chunks, s);
  tprt_status_t es = tprt_cuda_linear(&x.t, &w.t, &bias.t, &ref.t, chunks, s);
  fc_compare("linear inv+bias", "M=4133 N=1088 K=4096 C=8", y, ref, is, es);
  tprt_status_t fs = tprt_cuda_linear_invariant(&x.t, &w.t, nullptr, &yf.t, chunks, s);
  {
    fc_tensor rf(TPRT_DTYPE_F32, {m, n});
    rf.poison();
    fc_compare("linear inv f32", "M=4133 N=1088 K=4096 C=8", yf, rf, fs,
               tprt_cuda_linear(&x.t, &w.t, nullptr, &rf.t, chunks, s));
  }
  // Batch invariance: rows [r0, r0 + rows) alone, bf16 with the bias, then f32 partials without
  // it (what a row-parallel rank produces).
  const int64_t subs[][2] = {{0, 1}, {5, 7}, {128, 64}, {1000, 257}, {3, 4096}};
  for (int f32 = 0; f32 < 2; ++f32) {
    const int dt = f32 ? TPRT_DTYPE_F32 : TPRT_DTYPE_BF16, elem = f32 ? 4 : 2;
    const fc_tensor& full = f32 ? yf : y;
    for (const auto& sub : subs) {
      int64_t r0 = sub[0], rows = sub[1];
      int64_t xd[2] = {rows, k}, yd[2] = {rows, n};
      fc_tensor ys(dt, {rows, n});
      ys.poison();
      tprt_tensor_t xs = tprt_tensor_make((char*)x.t.data + r0 * k * 2, TPRT_DTYPE_BF16, 2, xd);
      tprt_tensor_t yv = tprt_tensor_make(ys.t.data, dt, 2, yd);
      tprt_status_t st = tprt_cuda_linear_invariant(&xs, &w.t, f32 ? nullptr : &bias.t, &yv, chunks, s);
      FC_CUDA(cudaDeviceSynchronize());
      char what[64];
      snprintf(what, sizeof what, "%sbatch: rows %lld..+%lld alone", f32 ? "f32 " : "", (long long)r0,
               (long long)rows);
      fc_bitwise_row("linear inv", what,
                     st ? 0 : fc_diff_rows((char*)full.t.data + r0 * n * elem, n, ys.t.data, n, rows, n, elem), st);
    }
  }
  // Column shards (column-parallel): N/R columns of w.
  for (int r = 2; r <= 8; r *= 2) {
    int64_t nl = n / r, wd[2] = {nl, k}, yd[2] = {m, nl}, bd[1] = {nl};
    fc_tensor ys(TPRT_DTYPE_BF16, {m, nl});
    ys.poison();
    int64_t j = r - 1;  // the last shard
    tprt_tensor_t wv = tprt_tensor_make((char*)w.t.data + j * nl * k * 2, TPRT_DTYPE_BF16, 2, wd);
    tprt_tensor_t bv = tprt_tensor_make((char*)bias.t.data + j * nl * 2, TPRT_DTYPE_BF16, 1, bd);
    tprt_tensor_t yv = tprt_tensor_make(ys.t.data, TPRT_DTYPE_BF16, 2, yd);
    tprt_status_t st = tprt_cuda_linear_invariant(&x.t, &wv, &bv, &yv, chunks, s);
    FC_CUDA(cudaDeviceSynchronize());
    char what[64];
    snprintf(what, sizeof what, "column shard %lld of %d", (long long)j, r);
    fc_bitwise_row("linear inv", what, st ? 0 : fc_diff_rows((char*)y.t.data + j * nl * 2, n, ys.t.data, nl, m, nl, 2),
                   st);
  }
  // Row-parallel K shards: rank q computes chunks [q·C/R, (q+1)·C/R) over x[:, K slice] and w[:, K slice].
  // The x and w slices are strided views: copy them into dense tensors first.
  auto slice_cols = [&](const fc_tensor& src, int64_t rows, int64_t c0, int64_t cols) {
    fc_tensor* d = new fc_tensor(TPRT_DTYPE_BF16, {rows, cols});
    FC_CUDA(cudaMemcpy2D(d->t.data, (size_t)(cols * 2), (char*)src.t.data + c0 * 2, (size_t)(src.t.dims[1] * 2),
                         (size_t)(cols * 2), (size_t)rows, cudaMemcpyDeviceToDevice));
    return d;
  };
  std::vector<double> tp1f = yf.host();
  for (int r = 2; r <= 8; r *= 2) {
    std::vector<std::vector<double>> parts;
    tprt_status_t st = nullptr;
    for (int q = 0; q < r && !st; ++q) {
      fc_tensor *xs = slice_cols(x, m, q * k / r, k / r), *ws = slice_cols(w, n, q * k / r, k / r);
      fc_tensor p(TPRT_DTYPE_F32, {m, n});
      p.poison();
      st = tprt_cuda_linear_invariant(&xs->t, &ws->t, nullptr, &p.t, (int)(chunks / r), s);
      FC_CUDA(cudaDeviceSynchronize());
      parts.push_back(p.host());
      delete xs;
      delete ws;
    }
    fc_tree_row("linear inv", "row-parallel TP", tp1f, parts, st);
  }
  // dgrad and wgrad: close to the exact kernels; wgrad's token shards (sequence parallel) sum to TP 1.
  {
    fc_tensor dx(TPRT_DTYPE_BF16, {m - 37, k}), rdx(TPRT_DTYPE_BF16, {m - 37, k});
    fc_tensor dy2(TPRT_DTYPE_BF16, {m - 37, n - 64}), w2(TPRT_DTYPE_BF16, {n - 64, k});
    dy2.fill(), w2.fill();
    dx.poison(), rdx.poison();
    fc_compare("linear_dgrad inv", "M=4096 N=1024 K=4096 C=8", dx, rdx,
               tprt_cuda_linear_dgrad_invariant(&dy2.t, &w2.t, &dx.t, chunks, 1, 1, s),
               tprt_cuda_linear_dgrad_segmented(&dy2.t, &w2.t, &rdx.t, chunks, 1, 1, s));
    // Batch invariance of the dgrad: rows alone (small M: the split schedule) = rows in the batch.
    for (const auto& sub : subs) {
      int64_t r0 = sub[0], rows = sub[1];
      if (r0 + rows > m - 37) continue;
      int64_t dd[2] = {rows, n - 64}, xd[2] = {rows, k};
      fc_tensor dxs(TPRT_DTYPE_BF16, {rows, k});
      dxs.poison();
      tprt_tensor_t dv = tprt_tensor_make((char*)dy2.t.data + r0 * (n - 64) * 2, TPRT_DTYPE_BF16, 2, dd);
      tprt_tensor_t xv = tprt_tensor_make(dxs.t.data, TPRT_DTYPE_BF16, 2, xd);
      tprt_status_t st = tprt_cuda_linear_dgrad_invariant(&dv, &w2.t, &xv, chunks, 1, 1, s);
      FC_CUDA(cudaDeviceSynchronize());
      char what[64];
      snprintf(what, sizeof what, "batch: rows %lld..+%lld alone", (long long)r0, (long long)rows);
      fc_bitwise_row("linear_dgrad inv", what,
                     st ? 0 : fc_diff_rows((char*)dx.t.data + r0 * k * 2, k, dxs.t.data, k, rows, k, 2), st);
    }
    fc_tensor sdx(TPRT_DTYPE_BF16, {m - 37, k}), srdx(TPRT_DTYPE_BF16, {m - 37, k});
    sdx.poison(), srdx.poison();
    fc_compare("linear_dgrad inv seg2", "M=4096 N=1024 K=4096 C=8 segments=2", sdx, srdx,
               tprt_cuda_linear_dgrad_invariant(&dy2.t, &w2.t, &sdx.t, chunks, 2, 1, s),
               tprt_cuda_linear_dgrad_segmented(&dy2.t, &w2.t, &srdx.t, chunks, 2, 1, s));
    // A segmented order with runs of whole k tiles (dy's 2048 columns: runs of 128), which an
    // unsplit launch reads in place: bitwise the dgrad of dy and w permuted into that order; rows
    // alone (the split schedule, which reads permuted copies) bitwise those rows in the batch.
    {
      const int64_t ns = 2048, ms = m - 37;
      fc_tensor dy3(TPRT_DTYPE_BF16, {ms, ns}), w3(TPRT_DTYPE_BF16, {ns, k});
      dy3.fill(), w3.fill();
      for (int blocks = 1; blocks <= 2; blocks *= 2) {
        const tprt_cuda_order_t o = {(int)chunks, 2, blocks};
        fc_tensor got(TPRT_DTYPE_BF16, {ms, k}), want(TPRT_DTYPE_BF16, {ms, k});
        fc_tensor dyp(TPRT_DTYPE_BF16, {ms, ns}), wp(TPRT_DTYPE_BF16, {ns, k});
        got.poison(), want.poison();
        tprt_status_t st = tprt_cuda_linear_dgrad_invariant(&dy3.t, &w3.t, &got.t, chunks, 2, blocks, s);
        if (!st) st = tprt_cuda_gather_2d(dy3.t.data, ms, ns, 2, nullptr, o, ns, 0, dyp.t.data, s);
        if (!st) st = tprt_cuda_gather_rows(w3.t.data, ns, k * 2, o, wp.t.data, s);
        if (!st) st = tprt_cuda_linear_dgrad_invariant(&dyp.t, &wp.t, &want.t, chunks, 1, 1, s);
        FC_CUDA(cudaDeviceSynchronize());
        char what[96];
        snprintf(what, sizeof what, "seg2 blocks=%d in place = permuted copies", blocks);
        fc_bitwise_row("linear_dgrad inv", what, st ? 0 : fc_diff_rows(got.t.data, k, want.t.data, k, ms, k, 2), st);
        for (const auto& sub : subs) {
          int64_t r0 = sub[0], rows = sub[1];
          if (r0 + rows > ms) continue;
          int64_t dd[2] = {rows, ns}, xd[2] = {rows, k};
          fc_tensor dxs(TPRT_DTYPE_BF16, {rows, k});
          dxs.poison();
          tprt_tensor_t dv = tprt_tensor_make((char*)dy3.t.data + r0 * ns * 2, TPRT_DTYPE_BF16, 2, dd);
          tprt_tensor_t xv = tprt_tensor_make(dxs.t.data, TPRT_DTYPE_BF16, 2, xd);
          tprt_status_t rs = tprt_cuda_linear_dgrad_invariant(&dv, &w3.t, &xv, chunks, 2, blocks, s);
          FC_CUDA(cudaDeviceSynchronize());
          snprintf(what, sizeof what, "seg2 blocks=%d batch: rows %lld..+%lld alone", blocks, (long long)r0,
                   (long long)rows);
          fc_bitwise_row("linear_dgrad inv", what,
                         rs ? 0 : fc_diff_rows((char*)got.t.data + r0 * k * 2, k, dxs.t.data, k, rows, k, 2), rs);
        }
      }
    }
    fc_tensor dw(TPRT_DTYPE_F32, {n - 64, k}), rdw(TPRT_DTYPE_F32, {n - 64, k});
    dw.poison(), rdw.poison();
    fc_tensor xx(TPRT_DTYPE_BF16, {m - 37, k});
    xx.fill();
    fc_compare("linear_wgrad inv", "M=4096 N=1024 K=4096 C=8", dw, rdw,
               tprt_cuda_linear_wgrad_invariant(&dy2.t, &xx.t, &dw.t, chunks, s),
               tprt_cuda_linear_wgrad(&dy2.t, &xx.t, &rdw.t, chunks, s));
    std::vector<double> full = dw.host();
    for (int r = 2; r <= 8; r *= 2) {
      std::vector<std::vector<double>> parts;
      tprt_status_t st = nullptr;
      int64_t ml = (m - 37) / r;
      for (int q = 0; q < r && !st; ++q) {
        int64_t dd[2] = {ml, n - 64}, xd[2] = {ml, k};
        tprt_tensor_t dv = tprt_tensor_make((char*)dy2.t.data + q * ml * (n - 64) * 2, TPRT_DTYPE_BF16, 2, dd);
        tprt_tensor_t xv = tprt_tensor_make((char*)xx.t.data + q * ml * k * 2, TPRT_DTYPE_BF16, 2, xd);
        fc_tensor p(TPRT_DTYPE_F32, {n - 64, k});
        p.poison();
        st = tprt_cuda_linear_wgrad_invariant(&dv, &xv, &p.t, (int)(chunks / r), s);
        FC_CUDA(cudaDeviceSynchronize());
        parts.push_back(p.host());
      }
      fc_tree_row("linear_wgrad inv", "token shards SP", full, parts, st);
    }
  }
}

/// The GLU in the grouped GEMM's epilogue: the forward (FC1 + GLU) and the backward (FC2's dgrad +
/// GLU gradient), fast and invariant, bitwise the unfused sequence of the same mode (the grouped
/// GEMM with a bf16 product, then tprt_cuda_glu / tprt_cuda_glu_grad), over kinds, interleaves,
/// skewed counts with empty experts, and segments (padding rows).
void fc_check_grouped_glu(cudaStream_t s) {
  struct Case {
    int64_t t, h, f, e, segs, interleave;
    int kind, pattern, chunks;  // chunks 0: fast
  };
  const Case cases[] = {{1024, 512, 512, 8, 1, 32, TPRT_GLU_SWIGLU, 1, 0},
                        {777, 256, 256, 4, 1, 8, TPRT_GLU_QUICK_GEGLU, 1, 0},
                        {1024, 512, 512, 4, 2, 128, TPRT_GLU_GEGLU, 1, 0},
                        {1024, 512, 512, 8, 1, 64, TPRT_GLU_SWIGLU, 1, 4},
                        {512, 512, 1024, 4, 2, 32, TPRT_GLU_QUICK_GEGLU, 1, 8},
                        {256, 512, 512, 8, 1, 16, TPRT_GLU_SWIGLU, 2, 8}};
  const char* kinds[] = {"swiglu", "geglu", "quick_geglu"};
  for (const Case& c : cases) {
    std::vector<int64_t> counts = fc_counts(c.t, c.e, c.segs, c.pattern);
    fc_tensor gs(counts);
    char shape[112];
    snprintf(shape, sizeof shape, "T=%lld H=%lld F=%lld E=%lld S=%lld b=%lld %s %s", (long long)c.t, (long long)c.h,
             (long long)c.f, (long long)c.e, (long long)c.segs, (long long)c.interleave, kinds[c.kind],
             c.chunks ? "inv" : "fast");
    const float alpha = 1.702f, limit = 7.0f;
    fc_tensor x(TPRT_DTYPE_BF16, {c.t, c.h}), w1(TPRT_DTYPE_BF16, {c.e, 2 * c.f, c.h});
    fc_tensor w2(TPRT_DTYPE_BF16, {c.e, c.h, c.f}), dy(TPRT_DTYPE_BF16, {c.t, c.h});
    x.fill(), w1.fill(), w2.fill(), dy.fill();
    // Forward: unfused h = FC1, gated = glu(h); fused straight to gated.
    fc_tensor h(TPRT_DTYPE_BF16, {c.t, 2 * c.f}), ref(TPRT_DTYPE_BF16, {c.t, c.f}), got(TPRT_DTYPE_BF16, {c.t, c.f});
    h.poison(), ref.poison(), got.poison();
    tprt_status_t st = c.chunks ? tprt_cuda_grouped_linear_invariant(&x.t, &w1.t, &gs.t, &h.t, c.chunks, s)
                                : tprt_cuda_grouped_linear_fast(&x.t, &w1.t, &gs.t, &h.t, s);
    if (!st) st = tprt_cuda_glu(&h.t, &ref.t, c.kind, c.interleave, alpha, limit, s);
    bool fits = tprt_cuda_grouped_linear_glu_fits(&x.t, &w1.t, &gs.t, &got.t, c.interleave, c.chunks);
    tprt_status_t gst = fits ? tprt_cuda_grouped_linear_glu(&x.t, &w1.t, &gs.t, &got.t, c.kind, c.interleave, alpha,
                                                            limit, c.chunks, s)
                             : tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "does not fit");
    FC_CUDA(cudaDeviceSynchronize());
    if (st) gst = st;
    fc_bitwise_row("grouped_linear_glu", shape, gst ? 0 : fc_diff_rows(got.t.data, c.f, ref.t.data, c.f, c.t, c.f, 2),
                   gst);
    // Backward on the same h (its padding rows +0.0): unfused dgated = FC2 dgrad, dh =
    // glu_grad(h, dgated); fused straight to dh; with the case's interleave and with 0.
    fc_tensor dg(TPRT_DTYPE_BF16, {c.t, c.f}), dref(TPRT_DTYPE_BF16, {c.t, 2 * c.f});
    fc_tensor dgot(TPRT_DTYPE_BF16, {c.t, 2 * c.f});
    dg.poison(), dref.poison(), dgot.poison();
    for (int64_t b : {c.interleave, (int64_t)0}) {
      st = c.chunks ? tprt_cuda_grouped_linear_dgrad_invariant(&dy.t, &w2.t, &gs.t, &dg.t, c.chunks, 1, 1, s)
                    : tprt_cuda_grouped_linear_dgrad_fast(&dy.t, &w2.t, &gs.t, &dg.t, s);
      if (!st) st = tprt_cuda_glu_grad(&h.t, &dg.t, &dref.t, c.kind, b, alpha, limit, s);
      tprt_status_t bst = tprt_cuda_grouped_linear_dgrad_glu(&dy.t, &w2.t, &gs.t, &h.t, &dgot.t, c.kind, b, alpha,
                                                             limit, c.chunks, 1, 1, s);
      FC_CUDA(cudaDeviceSynchronize());
      if (st) bst = st;
      char what[128];
      snprintf(what, sizeof what, "%s b'=%lld", shape, (long long)b);
      fc_bitwise_row("grouped_linear_dgrad_glu", what,
                     bst ? 0 : fc_diff_rows(dgot.t.data, 2 * c.f, dref.t.data, 2 * c.f, c.t, 2 * c.f, 2), bst);
    }
  }
}

/// Invariant grouped GEMMs (forward, dgrad with and without a segmented order, wgrad, the fused
/// MLP): close to the exact kernels; every group's rows bitwise the dense invariant GEMM of those
/// rows with the group's expert (so a row does not depend on its group's size, the other groups,
/// segments or E), padding rows +0.0; row-parallel K shards (C/R chunks each, f32 partials summed
/// by the canonical tree) bitwise TP 1; an expert-parallel (segmented) wgrad bitwise the
/// one-segment wgrad of the compacted rows, and an expert with 64·j rows bitwise the dense wgrad.
void fc_check_grouped_invariant(cudaStream_t s) {
  const fc_grouped_case cases[] = {{512, 256, 512, 8, 1, 0}, {777, 512, 256, 4, 1, 1},  {1024, 256, 512, 16, 1, 1},
                        {1024, 512, 256, 4, 4, 1}, {256, 256, 256, 8, 1, 2}, {16, 256, 512, 8, 1, 1}};
  const int chunks = 4;
  for (const fc_grouped_case& c : cases) {
    std::vector<int64_t> counts = c.counts();
    fc_tensor gs(counts);
    const std::string label = c.label();
    const char* shape = label.c_str();
    fc_tensor x(TPRT_DTYPE_BF16, {c.t, c.k}), w(TPRT_DTYPE_BF16, {c.e, c.n, c.k}), dy(TPRT_DTYPE_BF16, {c.t, c.n});
    x.fill(), w.fill(), dy.fill();
    const int64_t cap = c.t / c.segs;
    // Every (segment, expert) group's rows against the dense kernel |dense| (rows x -> y of |cols|),
    // and the padding rows of the segments against +0.0.
    auto per_group = [&](const fc_tensor& got, int64_t in_cols, const fc_tensor& in, int64_t cols,
                         tprt_status_t (*dense)(const tprt_tensor_t*, const tprt_tensor_t*, tprt_tensor_t*, int64_t,
                                                int64_t, cudaStream_t),
                         const tprt_tensor_t* wt) {
      int64_t bad = 0;
      tprt_status_t st = nullptr;
      const int elem = got.t.dtype == TPRT_DTYPE_F32 ? 4 : 2;
      for (int64_t sg = 0; sg < c.segs && !st; ++sg) {
        int64_t row = sg * cap;
        for (int64_t j = 0; j < c.e && !st; ++j) {
          int64_t rows = counts[(size_t)(sg * c.e + j)];
          if (rows > 0) {
            int64_t xd[2] = {rows, in_cols}, yd[2] = {rows, cols};
            fc_tensor ys(got.t.dtype, {rows, cols});
            ys.poison();
            tprt_tensor_t xv = tprt_tensor_make((char*)in.t.data + row * in_cols * 2, TPRT_DTYPE_BF16, 2, xd);
            tprt_tensor_t yv = tprt_tensor_make(ys.t.data, got.t.dtype, 2, yd);
            st = dense(&xv, wt, &yv, j, cols, s);
            FC_CUDA(cudaDeviceSynchronize());
            if (!st) bad += fc_diff_rows((char*)got.t.data + row * cols * elem, cols, ys.t.data, cols, rows, cols, elem);
          }
          row += rows;
        }
        int64_t pad = (sg + 1) * cap - row;
        if (pad > 0 && !st) {
          fc_tensor z(got.t.dtype, {pad, cols});
          FC_CUDA(cudaMemset(z.t.data, 0, z.bytes()));
          bad += fc_diff_rows((char*)got.t.data + row * cols * elem, cols, z.t.data, cols, pad, cols, elem);
        }
      }
      return std::make_pair(bad, st);
    };
    static int64_t s_n, s_k;
    static int s_chunks, s_segments;
    s_n = c.n, s_k = c.k, s_chunks = chunks;
    // The dense kernels for one expert j of w[E,N,K].
    auto dense_fwd = [](const tprt_tensor_t* xv, const tprt_tensor_t* w3, tprt_tensor_t* yv, int64_t j, int64_t,
                        cudaStream_t st) {
      int64_t wd[2] = {s_n, s_k};
      tprt_tensor_t wj = tprt_tensor_make((char*)w3->data + j * s_n * s_k * 2, TPRT_DTYPE_BF16, 2, wd);
      return tprt_cuda_linear_invariant(xv, &wj, nullptr, yv, s_chunks, st);
    };
    auto dense_dgrad = [](const tprt_tensor_t* dyv, const tprt_tensor_t* w3, tprt_tensor_t* dxv, int64_t j, int64_t,
                          cudaStream_t st) {
      int64_t wd[2] = {s_n, s_k};
      tprt_tensor_t wj = tprt_tensor_make((char*)w3->data + j * s_n * s_k * 2, TPRT_DTYPE_BF16, 2, wd);
      return tprt_cuda_linear_dgrad_invariant(dyv, &wj, dxv, s_chunks, s_segments, 1, st);
    };
    for (int out_f32 = 0; out_f32 < 2; ++out_f32) {
      int od = out_f32 ? TPRT_DTYPE_F32 : TPRT_DTYPE_BF16;
      fc_tensor y(od, {c.t, c.n}), ref(od, {c.t, c.n});
      y.poison(), ref.poison();
      tprt_status_t is = tprt_cuda_grouped_linear_invariant(&x.t, &w.t, &gs.t, &y.t, chunks, s);
      fc_compare("grouped_linear inv", shape, y, ref, is, tprt_cuda_grouped_linear(&x.t, &w.t, &gs.t, &ref.t, chunks, s));
      auto [bad, st] = per_group(y, c.k, x, c.n, dense_fwd, &w.t);
      fc_bitwise_row("grouped_linear inv", "groups = dense inv linear, pads +0", bad, st);
    }
    for (int segments = 1; segments <= 2; ++segments) {
      s_segments = segments;
      fc_tensor dx(TPRT_DTYPE_BF16, {c.t, c.k}), ref(TPRT_DTYPE_BF16, {c.t, c.k});
      dx.poison(), ref.poison();
      tprt_status_t is = tprt_cuda_grouped_linear_dgrad_invariant(&dy.t, &w.t, &gs.t, &dx.t, chunks, segments, 1, s);
      char sh[112];
      snprintf(sh, sizeof sh, "%s seg%d", shape, segments);
      fc_compare("grouped_dgrad inv", sh, dx, ref, is,
                 tprt_cuda_grouped_linear_dgrad_segmented(&dy.t, &w.t, &gs.t, &ref.t, chunks, segments, 1, s));
      auto [bad, st] = per_group(dx, c.n, dy, c.k, dense_dgrad, &w.t);
      fc_bitwise_row("grouped_dgrad inv", segments == 1 ? "groups = dense inv dgrad" : "groups = dense inv dgrad, seg2",
                     bad, st);
    }
    {
      fc_tensor dw(TPRT_DTYPE_F32, {c.e, c.n, c.k}), ref(TPRT_DTYPE_F32, {c.e, c.n, c.k});
      dw.poison(), ref.poison();
      tprt_status_t is = tprt_cuda_grouped_linear_wgrad_invariant(&dy.t, &x.t, &gs.t, &dw.t, s);
      fc_compare("grouped_wgrad inv", shape, dw, ref, is, tprt_cuda_grouped_linear_wgrad(&dy.t, &x.t, &gs.t, &ref.t, chunks, s));
      // Experts whose rows are one range of 64·j rows (one segment): the dense wgrad with one chunk.
      int64_t bad = 0, checked = 0, row = 0;
      tprt_status_t st = nullptr;
      for (int64_t j = 0; j < c.e && c.segs == 1 && !st; ++j) {
        int64_t rows = counts[(size_t)j];
        if (rows > 0 && rows % 64 == 0) {
          int64_t dd[2] = {rows, c.n}, xd[2] = {rows, c.k};
          tprt_tensor_t dv = tprt_tensor_make((char*)dy.t.data + row * c.n * 2, TPRT_DTYPE_BF16, 2, dd);
          tprt_tensor_t xv = tprt_tensor_make((char*)x.t.data + row * c.k * 2, TPRT_DTYPE_BF16, 2, xd);
          fc_tensor dj(TPRT_DTYPE_F32, {c.n, c.k});
          dj.poison();
          st = tprt_cuda_linear_wgrad_invariant(&dv, &xv, &dj.t, 1, s);
          FC_CUDA(cudaDeviceSynchronize());
          if (!st) bad += fc_diff_rows((char*)dw.t.data + j * c.n * c.k * 4, c.k, dj.t.data, c.k, c.n, c.k, 4);
          ++checked;
        }
        row += rows;
      }
      if (checked) fc_bitwise_row("grouped_wgrad inv", "experts of 64j rows = dense inv wgrad", bad, st);
      // Segments: the one-segment wgrad of the rows compacted in expert-major order.
      if (c.segs > 1) {
        std::vector<int64_t> one((size_t)c.e, 0);
        int64_t total = 0;
        for (int64_t j = 0; j < c.e; ++j)
          for (int64_t sg = 0; sg < c.segs; ++sg) one[(size_t)j] += counts[(size_t)(sg * c.e + j)];
        for (int64_t v : one) total += v;
        fc_tensor dyc(TPRT_DTYPE_BF16, {c.t, c.n}), xc(TPRT_DTYPE_BF16, {c.t, c.k}), gs1(TPRT_DTYPE_I64, {c.e});
        FC_CUDA(cudaMemset(dyc.t.data, 0, dyc.bytes()));
        FC_CUDA(cudaMemset(xc.t.data, 0, xc.bytes()));
        one[(size_t)(c.e - 1)] += 0;  // the rows past |total| are not any expert's (trailing padding)
        FC_CUDA(cudaMemcpy(gs1.t.data, one.data(), one.size() * 8, cudaMemcpyHostToDevice));
        int64_t to = 0;
        for (int64_t j = 0; j < c.e; ++j)
          for (int64_t sg = 0; sg < c.segs; ++sg) {
            int64_t from = sg * cap;
            for (int64_t i = 0; i < j; ++i) from += counts[(size_t)(sg * c.e + i)];
            int64_t rows = counts[(size_t)(sg * c.e + j)];
            if (rows == 0) continue;
            FC_CUDA(cudaMemcpy((char*)dyc.t.data + to * c.n * 2, (char*)dy.t.data + from * c.n * 2, rows * c.n * 2,
                               cudaMemcpyDeviceToDevice));
            FC_CUDA(cudaMemcpy((char*)xc.t.data + to * c.k * 2, (char*)x.t.data + from * c.k * 2, rows * c.k * 2,
                               cudaMemcpyDeviceToDevice));
            to += rows;
          }
        fc_tensor dw1(TPRT_DTYPE_F32, {c.e, c.n, c.k});
        dw1.poison();
        tprt_status_t st1 = tprt_cuda_grouped_linear_wgrad_invariant(&dyc.t, &xc.t, &gs1.t, &dw1.t, s);
        FC_CUDA(cudaDeviceSynchronize());
        (void)total;
        fc_bitwise_row("grouped_wgrad inv", "segments = compacted one segment",
                       st1 ? 0 : fc_diff_rows(dw.t.data, c.k, dw1.t.data, c.k, c.e * c.n, c.k, 4), st1);
      }
    }
    // Row-parallel K shards (expert tensor parallelism of a row-parallel expert linear).
    if (c.segs == 1 && c.t >= 512) {
      fc_tensor yf(TPRT_DTYPE_F32, {c.t, c.n});
      yf.poison();
      tprt_status_t st = tprt_cuda_grouped_linear_invariant(&x.t, &w.t, &gs.t, &yf.t, chunks, s);
      FC_CUDA(cudaDeviceSynchronize());
      std::vector<double> tp1 = yf.host();
      for (int r = 2; r <= chunks && !st; r *= 2) {
        std::vector<std::vector<double>> parts;
        int64_t kl = c.k / r;
        for (int q = 0; q < r && !st; ++q) {
          fc_tensor xs(TPRT_DTYPE_BF16, {c.t, kl}), ws(TPRT_DTYPE_BF16, {c.e, c.n, kl}), p(TPRT_DTYPE_F32, {c.t, c.n});
          FC_CUDA(cudaMemcpy2D(xs.t.data, kl * 2, (char*)x.t.data + q * kl * 2, c.k * 2, kl * 2, c.t,
                               cudaMemcpyDeviceToDevice));
          FC_CUDA(cudaMemcpy2D(ws.t.data, kl * 2, (char*)w.t.data + q * kl * 2, c.k * 2, kl * 2, c.e * c.n,
                               cudaMemcpyDeviceToDevice));
          p.poison();
          st = tprt_cuda_grouped_linear_invariant(&xs.t, &ws.t, &gs.t, &p.t, chunks / r, s);
          FC_CUDA(cudaDeviceSynchronize());
          parts.push_back(p.host());
        }
        fc_tree_row("grouped_linear inv", "row-parallel TP", tp1, parts, st);
        st = nullptr;
      }
      tprt_status_free(st);
    }
  }
  // The fused grouped MLP on the invariant grouped GEMM: close to the exact one.
  {
    const int64_t t = 512, h = 256, f = 512, e = 8;
    std::vector<int64_t> counts = fc_counts(t, e, 1, 1);
    fc_tensor gs(counts);
    fc_tensor x(TPRT_DTYPE_BF16, {t, h}), w1(TPRT_DTYPE_BF16, {e, 2 * f, h}), w2(TPRT_DTYPE_BF16, {e, h, f});
    x.fill(), w1.fill(), w2.fill();
    fc_tensor y(TPRT_DTYPE_BF16, {t, h}), ref(TPRT_DTYPE_BF16, {t, h});
    y.poison(), ref.poison();
    tprt_status_t is =
        tprt_cuda_fused_grouped_mlp_invariant(&x.t, &w1.t, &w2.t, &gs.t, &y.t, 0, 0, 1.702f, 7.0f, chunks, s);
    tprt_status_t es = tprt_cuda_fused_grouped_mlp(&x.t, &w1.t, &w2.t, &gs.t, &ref.t, 0, 0, 1.702f, 7.0f, chunks, s);
    fc_compare("fused_grouped_mlp inv", "T=512 H=256 F=512 E=8 swiglu", y, ref, is, es);
  }
}
