// tprt-cuda-check, backward contractions: every CUDA launcher of kernels/cuda/gemm/linear_grad.c
// against the CPU kernel of cpu_linear_grad.c, bitwise, on fresh random inputs (dgrad with the
// plain and the segmented orders, including the gathered layout blocks = R; wgrad; bias grad;
// grouped dgrad and wgrad with one and two segments of group sizes).
#include <string.h>

#include "cuda_check.h"

static ct_tensor_t ct_grad_counts(const int64_t* values, int64_t n) {
  ct_tensor_t t = ct_make(TPRT_DTYPE_I64, 1, &n);
  if (n) memcpy(t.h.data, values, (size_t)n * sizeof(int64_t));
  ct_upload(&t);
  return t;
}

static void ct_check_dense_grads(cudaStream_t stream) {
  struct {
    int64_t m, n, k;
    int chunks, segments, blocks;
  } cases[] = {
      {1, 1, 1, 1, 1, 1},      {7, 13, 29, 8, 1, 1},     {33, 64, 70, 8, 2, 1},    {33, 64, 70, 8, 2, 4},
      {16, 512, 128, 8, 2, 1}, {16, 512, 128, 4, 2, 2},  {65, 96, 257, 8, 1, 1},   {130, 256, 64, 8, 2, 8},
      {5, 48, 9, 2, 3, 2},     {64, 1024, 256, 16, 2, 1},
  };
  uint64_t rng = 0x6AD;
  for (const auto& c : cases) {
    for (int dtype : kDtypes) {
      for (int f32 = 0; f32 < 2; ++f32) {
        int od = f32 ? TPRT_DTYPE_F32 : dtype;
        int64_t dyd[2] = {c.m, c.n}, wd[2] = {c.n, c.k}, xd[2] = {c.m, c.k}, dxd[2] = {c.m, c.k}, dwd[2] = {c.n, c.k},
                dbd[1] = {c.n};
        ct_tensor_t dy = ct_make(dtype, 2, dyd), w = ct_make(dtype, 2, wd), x = ct_make(dtype, 2, xd);
        ct_tensor_t dx = ct_make(od, 2, dxd), dw = ct_make(od, 2, dwd), db = ct_make(od, 1, dbd);
        ct_fill(&dy, &rng, CT_DIST_MODERATE);
        ct_fill(&w, &rng, CT_DIST_MODERATE);
        ct_fill(&x, &rng, CT_DIST_MODERATE);
        char shape[48], params[64];
        snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld", (long long)c.m, (long long)c.n, (long long)c.k);
        snprintf(params, sizeof params, "chunks=%d seg=%d blk=%d%s", c.chunks, c.segments, c.blocks,
                 f32 ? " f32" : "");
        if (ct_selected("linear_dgrad"))
          ct_run(
              "linear_dgrad", shape, tprt_dtype_name(dtype), params, &dx,
              [&] { return tprt_cpu_linear_dgrad_segmented(&dy.h, &w.h, &dx.h, c.chunks, c.segments, c.blocks); },
              [&](cudaStream_t st) {
                return tprt_cuda_linear_dgrad_segmented(&dy.d, &w.d, &dx.d, c.chunks, c.segments, c.blocks, st);
              },
              true, stream);
        if (c.segments == 1 && ct_selected("linear_wgrad"))
          ct_run(
              "linear_wgrad", shape, tprt_dtype_name(dtype), params, &dw,
              [&] { return tprt_cpu_linear_wgrad(&dy.h, &x.h, &dw.h, c.chunks); },
              [&](cudaStream_t st) { return tprt_cuda_linear_wgrad(&dy.d, &x.d, &dw.d, c.chunks, st); }, true, stream);
        if (c.segments == 1 && ct_selected("bias_grad"))
          ct_run(
              "bias_grad", shape, tprt_dtype_name(dtype), params, &db,
              [&] { return tprt_cpu_bias_grad(&dy.h, &db.h, c.chunks); },
              [&](cudaStream_t st) { return tprt_cuda_bias_grad(&dy.d, &db.d, c.chunks, st); }, true, stream);
        ct_free(&dy);
        ct_free(&w);
        ct_free(&x);
        ct_free(&dx);
        ct_free(&dw);
        ct_free(&db);
      }
    }
  }
}

static void ct_check_grouped_grads(cudaStream_t stream) {
  struct {
    int64_t t, n, k, e;
    int64_t sizes[8];
    int64_t num_sizes;
    int segments;
  } cases[] = {
      {7, 64, 40, 3, {3, 0, 4}, 3, 1},
      {7, 64, 40, 3, {3, 0, 4}, 3, 2},
      {10, 32, 24, 3, {2, 0, 3, 1, 0, 2}, 6, 1},  // two segments of 5 rows, with padding rows
      {64, 256, 128, 2, {40, 24}, 2, 2},
  };
  uint64_t rng = 0x96AD;
  for (const auto& c : cases) {
    for (int dtype : kDtypes) {
      for (int f32 = 0; f32 < 2; ++f32) {
        int od = f32 ? TPRT_DTYPE_F32 : dtype;
        int64_t dyd[2] = {c.t, c.n}, wd[3] = {c.e, c.n, c.k}, xd[2] = {c.t, c.k}, dxd[2] = {c.t, c.k},
                dwd[3] = {c.e, c.n, c.k};
        ct_tensor_t dy = ct_make(dtype, 2, dyd), w = ct_make(dtype, 3, wd), x = ct_make(dtype, 2, xd);
        ct_tensor_t dx = ct_make(od, 2, dxd), dw = ct_make(od, 3, dwd), gs = ct_grad_counts(c.sizes, c.num_sizes);
        ct_fill(&dy, &rng, CT_DIST_MODERATE);
        ct_fill(&w, &rng, CT_DIST_MODERATE);
        ct_fill(&x, &rng, CT_DIST_MODERATE);
        char shape[48], params[64];
        snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld E=%lld", (long long)c.t, (long long)c.n, (long long)c.k,
                 (long long)c.e);
        snprintf(params, sizeof params, "S=%lld seg=%d%s", (long long)(c.num_sizes / c.e), c.segments,
                 f32 ? " f32" : "");
        if (ct_selected("grouped_dgrad"))
          ct_run(
              "grouped_dgrad", shape, tprt_dtype_name(dtype), params, &dx,
              [&] { return tprt_cpu_grouped_linear_dgrad_segmented(&dy.h, &w.h, &gs.h, &dx.h, 8, c.segments, 1); },
              [&](cudaStream_t st) {
                return tprt_cuda_grouped_linear_dgrad_segmented(&dy.d, &w.d, &gs.d, &dx.d, 8, c.segments, 1, st);
              },
              true, stream);
        if (c.segments == 1 && ct_selected("grouped_wgrad"))
          ct_run(
              "grouped_wgrad", shape, tprt_dtype_name(dtype), params, &dw,
              [&] { return tprt_cpu_grouped_linear_wgrad(&dy.h, &x.h, &gs.h, &dw.h, 8); },
              [&](cudaStream_t st) { return tprt_cuda_grouped_linear_wgrad(&dy.d, &x.d, &gs.d, &dw.d, 8, st); }, true,
              stream);
        ct_free(&dy);
        ct_free(&w);
        ct_free(&x);
        ct_free(&dx);
        ct_free(&dw);
        ct_free(&gs);
      }
    }
  }
}

static void ct_check_glu_grad(cudaStream_t stream) {
  struct {
    int64_t rows, f, interleave;
  } shapes[] = {{1, 1, 0}, {7, 33, 0}, {16, 256, 0}, {5, 96, 32}, {64, 1024, 0}, {3, 4096, 1}};
  uint64_t rng = 0x61D;
  for (const auto& sh : shapes) {
    for (int kind = 0; kind < 3; ++kind) {
      for (int dtype : kDtypes) {
        int64_t xd[2] = {sh.rows, 2 * sh.f}, yd[2] = {sh.rows, sh.f};
        ct_tensor_t x = ct_make(dtype, 2, xd), dy = ct_make(dtype, 2, yd), dx = ct_make(dtype, 2, xd);
        ct_fill(&x, &rng, CT_DIST_SPECIAL);
        ct_fill(&dy, &rng, CT_DIST_MODERATE);
        char shape[48], params[48];
        snprintf(shape, sizeof shape, "rows=%lld F=%lld", (long long)sh.rows, (long long)sh.f);
        snprintf(params, sizeof params, "kind=%d interleave=%lld", kind, (long long)sh.interleave);
        const float alpha = 1.702f, limit = 7.0f;
        ct_run(
            "glu_grad", shape, tprt_dtype_name(dtype), params, &dx,
            [&] { return tprt_cpu_glu_grad(&x.h, &dy.h, &dx.h, kind, sh.interleave, alpha, limit); },
            [&](cudaStream_t st) { return tprt_cuda_glu_grad(&x.d, &dy.d, &dx.d, kind, sh.interleave, alpha, limit, st); },
            true, stream);
        ct_free(&x);
        ct_free(&dy);
        ct_free(&dx);
      }
    }
  }
}

static void ct_check_norm_grads(cudaStream_t stream) {
  struct {
    int64_t m, h;
    int chunks;
  } shapes[] = {{1, 1, 1}, {3, 17, 8}, {16, 128, 8}, {13, 257, 8}, {64, 4096, 8}, {100, 1000, 16}, {5, 300, 1},
                 // chunks of 125 and 512 rows: long chunks, with and without a remainder of the
                 // dgamma pass's 8-row unrolled loop
                 {1000, 64, 8}, {4096, 96, 8},
                 // whole 16-byte rows (the pipelined dgamma pass): many column groups, a partial
                 // last group, short chunks, a model's shape
                 {777, 200, 4}, {33, 4104, 2}, {2048, 2048, 8}, {3, 64, 8}};
  uint64_t rng = 0x90AD;
  // layer 0: rmsnorm_grad; 1: layernorm_grad; 2: rmsnorm_grad with acc (dx = acc + the gradient,
  // tprt_cpu_rmsnorm_grad_acc's bits; the pieces form, another row reduction, is checked by
  // tprt-cuda-check-fast against this one).
  for (int layer = 0; layer < 3; ++layer) {
    for (const auto& sh : shapes) {
      for (int di = 0; di < 3; ++di) {
        for (int f32 = 0; f32 < 2; ++f32) {
          int dtype = kDtypes[di], g_dtype = kDtypes[(di + 1) % 3], od = f32 ? TPRT_DTYPE_F32 : g_dtype;
          int64_t xd[2] = {sh.m, sh.h}, gd[1] = {sh.h};
          ct_tensor_t x = ct_make(dtype, 2, xd), dy = ct_make(dtype, 2, xd), dx = ct_make(dtype, 2, xd);
          ct_tensor_t gamma = ct_make(g_dtype, 1, gd), dgamma = ct_make(od, 1, gd), dbeta = ct_make(od, 1, gd);
          ct_tensor_t acc = ct_make(dtype, 2, xd);
          ct_fill(&acc, &rng, CT_DIST_MODERATE);
          ct_fill(&x, &rng, layer == 1 ? CT_DIST_OFFSET : CT_DIST_MODERATE);
          ct_fill(&dy, &rng, CT_DIST_MODERATE);
          ct_fill(&gamma, &rng, CT_DIST_MODERATE);
          char shape[48], params[48];
          snprintf(shape, sizeof shape, "M=%lld H=%lld", (long long)sh.m, (long long)sh.h);
          snprintf(params, sizeof params, "gamma=%s chunks=%d%s", tprt_dtype_name(g_dtype), sh.chunks,
                   f32 ? " f32" : "");
          const float eps = 1e-5f;
          if (layer == 2) {
            ct_run_outputs(
                "rmsnorm_grad", shape, tprt_dtype_name(dtype), params, {&dx, &dgamma},
                [&] { return tprt_cpu_rmsnorm_grad_acc(&x.h, &gamma.h, &dy.h, &acc.h, &dx.h, &dgamma.h, eps, sh.chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_rmsnorm_grad_acc(&x.d, &gamma.d, &dy.d, &acc.d, &dx.d, &dgamma.d, eps, sh.chunks,
                                                    false, st);
                },
                true, stream);
          } else if (layer)
            ct_run_outputs(
                "layernorm_grad", shape, tprt_dtype_name(dtype), params, {&dx, &dgamma, &dbeta},
                [&] { return tprt_cpu_layernorm_grad(&x.h, &gamma.h, &dy.h, &dx.h, &dgamma.h, &dbeta.h, eps, sh.chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_layernorm_grad(&x.d, &gamma.d, &dy.d, &dx.d, &dgamma.d, &dbeta.d, eps, sh.chunks, st);
                },
                true, stream);
          else
            ct_run_outputs(
                "rmsnorm_grad", shape, tprt_dtype_name(dtype), params, {&dx, &dgamma},
                [&] { return tprt_cpu_rmsnorm_grad(&x.h, &gamma.h, &dy.h, &dx.h, &dgamma.h, eps, sh.chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_rmsnorm_grad(&x.d, &gamma.d, &dy.d, &dx.d, &dgamma.d, eps, sh.chunks, st);
                },
                true, stream);
          ct_free(&x);
          ct_free(&dy);
          ct_free(&dx);
          ct_free(&gamma);
          ct_free(&dgamma);
          ct_free(&dbeta);
          ct_free(&acc);
        }
      }
    }
  }
}

static void ct_check_moe_route(cudaStream_t stream) {
  struct {
    int64_t t, e;
    int k;
  } shapes[] = {{1, 1, 1}, {16, 8, 2}, {33, 64, 8}, {257, 128, 4}, {1000, 16, 1}, {7, 256, 256}};
  uint64_t rng = 0x9A7E;
  for (const auto& sh : shapes) {
    for (int dtype : kDtypes) {
      for (int normalize = 0; normalize < 2; ++normalize) {
        int64_t ld[2] = {sh.t, sh.e}, od[2] = {sh.t, sh.k};
        ct_tensor_t logits = ct_make(dtype, 2, ld), idx = ct_make(TPRT_DTYPE_I32, 2, od),
                    wts = ct_make(TPRT_DTYPE_F32, 2, od);
        ct_fill(&logits, &rng, CT_DIST_WIDE);
        char shape[48], params[48];
        snprintf(shape, sizeof shape, "T=%lld E=%lld", (long long)sh.t, (long long)sh.e);
        snprintf(params, sizeof params, "k=%d normalize=%d", sh.k, normalize);
        ct_run_outputs(
            "moe_route", shape, tprt_dtype_name(dtype), params, {&idx, &wts},
            [&] { return tprt_cpu_moe_route(&logits.h, &idx.h, &wts.h, sh.k, normalize != 0); },
            [&](cudaStream_t st) { return tprt_cuda_moe_route(&logits.d, &idx.d, &wts.d, sh.k, normalize != 0, st); },
            true, stream);
        ct_free(&logits);
        ct_free(&idx);
        ct_free(&wts);
      }
    }
  }
}

// A random permutation of the T*k slots (row_map) and k distinct experts per token (indices).
static void ct_moe_maps(ct_tensor_t* row_map, ct_tensor_t* indices, int64_t t, int k, int64_t e, uint64_t* rng) {
  int32_t* map = (int32_t*)row_map->h.data;
  for (int64_t i = 0; i < t * k; ++i) map[i] = (int32_t)i;
  for (int64_t i = t * k - 1; i > 0; --i) {
    int64_t j = (int64_t)(ct_next(rng) % (uint64_t)(i + 1));
    int32_t tmp = map[i];
    map[i] = map[j];
    map[j] = tmp;
  }
  ct_upload(row_map);
  if (!indices) return;
  int32_t* idx = (int32_t*)indices->h.data;
  for (int64_t r = 0; r < t; ++r)
    for (int j = 0; j < k; ++j) {
      int32_t cand;
      bool dup;
      do {
        cand = (int32_t)(ct_next(rng) % (uint64_t)e);
        dup = false;
        for (int q = 0; q < j; ++q) dup = dup || idx[r * k + q] == cand;
      } while (dup);
      idx[r * k + j] = cand;
    }
  ct_upload(indices);
}

static void ct_check_moe_grads(cudaStream_t stream) {
  struct {
    int64_t t, h, e;
    int k;
  } shapes[] = {{1, 1, 1, 1}, {16, 128, 8, 2}, {33, 257, 16, 4}, {100, 64, 8, 8}, {7, 4096, 64, 2}};
  uint64_t rng = 0x5EED;
  for (const auto& sh : shapes) {
    for (int dtype : kDtypes) {
      int64_t rows = sh.t * sh.k;
      int64_t yd[2] = {rows, sh.h}, od[2] = {sh.t, sh.h}, wd[2] = {sh.t, sh.k}, md[1] = {rows}, ld[2] = {sh.t, sh.e};
      ct_tensor_t y = ct_make(dtype, 2, yd), dout = ct_make(dtype, 2, od), w = ct_make(TPRT_DTYPE_F32, 2, wd);
      ct_tensor_t map = ct_make(TPRT_DTYPE_I32, 1, md), idx = ct_make(TPRT_DTYPE_I32, 2, wd);
      ct_tensor_t dy = ct_make(dtype, 2, yd), dw = ct_make(TPRT_DTYPE_F32, 2, wd), dx = ct_make(dtype, 2, od);
      ct_tensor_t logits = ct_make(dtype, 2, ld), dl = ct_make(dtype, 2, ld), g = ct_make(TPRT_DTYPE_F32, 2, wd);
      ct_fill(&y, &rng, CT_DIST_MODERATE);
      ct_fill(&dout, &rng, CT_DIST_MODERATE);
      ct_fill(&w, &rng, CT_DIST_MODERATE);
      ct_fill(&logits, &rng, CT_DIST_WIDE);
      ct_fill(&g, &rng, CT_DIST_MODERATE);
      ct_moe_maps(&map, &idx, sh.t, sh.k, sh.e, &rng);
      char shape[48], params[32];
      snprintf(shape, sizeof shape, "T=%lld H=%lld E=%lld", (long long)sh.t, (long long)sh.h, (long long)sh.e);
      snprintf(params, sizeof params, "k=%d", sh.k);
      if (ct_selected("moe_permute_grad"))
        ct_run(
            "moe_permute_grad", shape, tprt_dtype_name(dtype), params, &dx,
            [&] { return tprt_cpu_moe_permute_grad(&y.h, &map.h, &dx.h, sh.k); },
            [&](cudaStream_t st) { return tprt_cuda_moe_permute_grad(&y.d, &map.d, &dx.d, sh.k, st); }, true, stream);
      if (ct_selected("moe_unpermute_grad"))
        ct_run_outputs(
            "moe_unpermute_grad", shape, tprt_dtype_name(dtype), params, {&dy, &dw},
            [&] { return tprt_cpu_moe_unpermute_grad(&dout.h, &y.h, &map.h, &w.h, &dy.h, &dw.h); },
            [&](cudaStream_t st) { return tprt_cuda_moe_unpermute_grad(&dout.d, &y.d, &map.d, &w.d, &dy.d, &dw.d, st); },
            true, stream);
      for (int normalize = 0; normalize < 2 && ct_selected("moe_route_grad"); ++normalize) {
        char p2[32];
        snprintf(p2, sizeof p2, "k=%d normalize=%d", sh.k, normalize);
        ct_run(
            "moe_route_grad", shape, tprt_dtype_name(dtype), p2, &dl,
            [&] { return tprt_cpu_moe_route_grad(&logits.h, &idx.h, &g.h, &dl.h, sh.k, normalize != 0); },
            [&](cudaStream_t st) {
              return tprt_cuda_moe_route_grad(&logits.d, &idx.d, &g.d, &dl.d, sh.k, normalize != 0, st);
            },
            true, stream);
      }
      ct_tensor_t* all[] = {&y, &dout, &w, &map, &idx, &dy, &dw, &dx, &logits, &dl, &g};
      for (ct_tensor_t* t : all) ct_free(t);
    }
  }
}

static void ct_check_fused_mlp(cudaStream_t stream) {
  struct {
    int64_t t, h, f, e;
    int64_t sizes[6];
    int64_t num_sizes;
  } cases[] = {{7, 64, 32, 3, {3, 0, 4}, 3}, {10, 32, 16, 3, {2, 0, 3, 1, 0, 2}, 6}, {64, 128, 96, 2, {40, 24}, 2}};
  uint64_t rng = 0xF00D;
  for (const auto& c : cases) {
    for (int dtype : kDtypes) {
      for (int kind = 0; kind < 3; ++kind) {
        int64_t xd[2] = {c.t, c.h}, w1d[3] = {c.e, 2 * c.f, c.h}, w2d[3] = {c.e, c.h, c.f};
        ct_tensor_t x = ct_make(dtype, 2, xd), w1 = ct_make(dtype, 3, w1d), w2 = ct_make(dtype, 3, w2d),
                    y = ct_make(dtype, 2, xd), gs = ct_grad_counts(c.sizes, c.num_sizes);
        ct_fill(&x, &rng, CT_DIST_MODERATE);
        ct_fill(&w1, &rng, CT_DIST_MODERATE);
        ct_fill(&w2, &rng, CT_DIST_MODERATE);
        char shape[48], params[32];
        snprintf(shape, sizeof shape, "T=%lld H=%lld F=%lld E=%lld", (long long)c.t, (long long)c.h, (long long)c.f,
                 (long long)c.e);
        snprintf(params, sizeof params, "kind=%d S=%lld", kind, (long long)(c.num_sizes / c.e));
        ct_run(
            "fused_grouped_mlp", shape, tprt_dtype_name(dtype), params, &y,
            [&] { return tprt_cpu_fused_grouped_mlp(&x.h, &w1.h, &w2.h, &gs.h, &y.h, kind, 0, 1.702f, 7.0f, 8); },
            [&](cudaStream_t st) {
              return tprt_cuda_fused_grouped_mlp(&x.d, &w1.d, &w2.d, &gs.d, &y.d, kind, 0, 1.702f, 7.0f, 8, st);
            },
            true, stream);
        ct_tensor_t* all[] = {&x, &w1, &w2, &y, &gs};
        for (ct_tensor_t* t : all) ct_free(t);
      }
    }
  }
}

static int64_t ct_rup(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Quantize (CPU vs CUDA: data, scales, global scale) then dequantize the CPU's codes on both sides.
static void ct_check_quant(cudaStream_t stream) {
  const int64_t shapes[][2] = {{32, 32}, {64, 96}, {128, 256}, {96, 64}};
  const int data_dtypes[4] = {TPRT_DTYPE_F8E4M3FN, TPRT_DTYPE_F8E5M2, TPRT_DTYPE_F8E4M3FN, TPRT_DTYPE_F4E2M1FN};
  const int scale_dtypes[4] = {TPRT_DTYPE_F32, TPRT_DTYPE_F32, TPRT_DTYPE_F8E8M0FNU, TPRT_DTYPE_F8E4M3FN};
  uint64_t rng = 0x0A47;
  for (const auto& sh : shapes) {
    for (int format = 0; format < 4; ++format) {
      for (int axis = 0; axis < 2; ++axis) {
        for (int dtype : kDtypes) {
          int64_t m = sh[0], k = sh[1];
          bool col = axis == 1, transposed = col && format != 2;
          int64_t xd[2] = {m, k}, dd[2] = {transposed ? k : m, transposed ? m : k}, sd[2] = {1, 1}, gd[1] = {1};
          int srank = 1;
          if (format == 2) {
            srank = 2;
            sd[0] = col ? ct_rup(m / 32, 4) : ct_rup(m, 128);
            sd[1] = col ? ct_rup(k, 128) : ct_rup(k / 32, 4);
          } else if (format == 3) {
            srank = 2;
            sd[0] = col ? ct_rup(k, 128) : ct_rup(m, 128);
            sd[1] = ct_rup(((col ? m : k) + 15) / 16, 4);
          }
          ct_tensor_t x = ct_make(dtype, 2, xd), data = ct_make(data_dtypes[format], 2, dd),
                      scale = ct_make(scale_dtypes[format], srank, sd), global = ct_make(TPRT_DTYPE_F32, 1, gd),
                      back = ct_make(dtype, 2, xd);
          ct_fill(&x, &rng, (format + axis) % 2 ? CT_DIST_WIDE : CT_DIST_MODERATE);
          tprt_tensor_t* gh = format == 3 ? &global.h : NULL;
          tprt_tensor_t* gdv = format == 3 ? &global.d : NULL;
          char shape[32], params[32];
          snprintf(shape, sizeof shape, "M=%lld K=%lld", (long long)m, (long long)k);
          snprintf(params, sizeof params, "format=%d axis=%d", format, axis);
          if (ct_selected("quantize")) {
            if (format == 3)
              ct_run_outputs(
                  "quantize", shape, tprt_dtype_name(dtype), params, {&data, &scale, &global},
                  [&] { return tprt_cpu_quantize(&x.h, &data.h, &scale.h, gh, format, axis); },
                  [&](cudaStream_t st) { return tprt_cuda_quantize(&x.d, &data.d, &scale.d, gdv, format, axis, st); },
                  true, stream);
            else
              ct_run_outputs(
                  "quantize", shape, tprt_dtype_name(dtype), params, {&data, &scale},
                  [&] { return tprt_cpu_quantize(&x.h, &data.h, &scale.h, gh, format, axis); },
                  [&](cudaStream_t st) { return tprt_cuda_quantize(&x.d, &data.d, &scale.d, gdv, format, axis, st); },
                  true, stream);
          }
          if (ct_selected("dequantize")) {
            // The CPU's codes on both sides (the CUDA quantize may not have run).
            if (tprt_cpu_quantize(&x.h, &data.h, &scale.h, gh, format, axis) == NULL) {
              ct_upload(&data);
              ct_upload(&scale);
              if (format == 3) ct_upload(&global);
              ct_run(
                  "dequantize", shape, tprt_dtype_name(dtype), params, &back,
                  [&] { return tprt_cpu_dequantize(&data.h, &scale.h, gh, &back.h, format, axis); },
                  [&](cudaStream_t st) { return tprt_cuda_dequantize(&data.d, &scale.d, gdv, &back.d, format, axis, st); },
                  true, stream);
            }
          }
          // The per-tensor formats with an external amax (a whole tensor's, as a max all-reduce of
          // the shards' gives: here 3 times x's own), and the amax itself.
          ct_tensor_t amax = ct_make(TPRT_DTYPE_F32, 1, gd), own = ct_make(TPRT_DTYPE_F32, 1, gd);
          if (format != 2 && ct_selected("quantize_with_amax") && tprt_cpu_amax(&x.h, &amax.h) == NULL) {
            ((float*)amax.h.data)[0] *= 3.0f;
            ct_upload(&amax);
            if (format == 3)
              ct_run_outputs(
                  "quantize_with_amax", shape, tprt_dtype_name(dtype), params, {&data, &scale, &global},
                  [&] { return tprt_cpu_quantize_with_amax(&x.h, &amax.h, &data.h, &scale.h, gh, format, axis); },
                  [&](cudaStream_t st) {
                    return tprt_cuda_quantize_with_amax(&x.d, &amax.d, &data.d, &scale.d, gdv, format, axis, st);
                  },
                  true, stream);
            else
              ct_run_outputs(
                  "quantize_with_amax", shape, tprt_dtype_name(dtype), params, {&data, &scale},
                  [&] { return tprt_cpu_quantize_with_amax(&x.h, &amax.h, &data.h, &scale.h, gh, format, axis); },
                  [&](cudaStream_t st) {
                    return tprt_cuda_quantize_with_amax(&x.d, &amax.d, &data.d, &scale.d, gdv, format, axis, st);
                  },
                  true, stream);
          }
          if (format == 0 && axis == 0 && ct_selected("amax"))
            ct_run(
                "amax", shape, tprt_dtype_name(dtype), params, &own, [&] { return tprt_cpu_amax(&x.h, &own.h); },
                [&](cudaStream_t st) { return tprt_cuda_amax(&x.d, &own.d, st); }, true, stream);
          ct_tensor_t* all[] = {&x, &data, &scale, &global, &back, &amax, &own};
          for (ct_tensor_t* t : all) ct_free(t);
        }
      }
    }
  }
}

void ct_check_grad_kernels(cudaStream_t stream) {
  ct_check_quant(stream);
  if (ct_selected("fused_grouped_mlp")) ct_check_fused_mlp(stream);
  ct_check_moe_grads(stream);
  if (ct_selected("moe_route")) ct_check_moe_route(stream);
  ct_check_dense_grads(stream);
  ct_check_grouped_grads(stream);
  if (ct_selected("glu_grad")) ct_check_glu_grad(stream);
  if (ct_selected("rmsnorm_grad") || ct_selected("layernorm_grad")) ct_check_norm_grads(stream);
}
