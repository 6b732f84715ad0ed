// tprt-cuda-check, the whole-model kernels of kernels/cuda/model against the CPU kernels of
// cpu_vocab.c and cpu_optim.c, bitwise, on fresh random inputs: the embedding (rows held and not
// held, every dtype), its gradient (duplicate ids, 1 to 64 chunks, ragged last chunk), the exact sum
// of squares (with and without an incoming accumulator, special values: infinities and NaN, a
// count-only call), the global norm over several accumulators, and AdamW (clipping on and off,
// every weight dtype), and the generation kernels (tp.sample's token, tp.kvcache_write).
#include <string.h>

#include "ce_exact_gemms.h"
#include "cuda_check.h"

static ct_tensor_t ct_ids(int64_t t, int64_t vocab, int64_t distinct, uint64_t* rng) {
  ct_tensor_t ids = ct_make(TPRT_DTYPE_I32, 1, &t);
  for (int64_t i = 0; i < t; ++i) ((int32_t*)ids.h.data)[i] = (int32_t)(ct_next(rng) % (uint64_t)distinct % (uint64_t)vocab);
  ct_upload(&ids);
  return ids;
}

static void ct_check_embedding(cudaStream_t stream) {
  struct {
    int64_t t, h, vocab, start, rows, distinct;
    int chunks;
  } cases[] = {{1, 1, 1, 0, 1, 1, 1},        {16, 32, 64, 0, 64, 64, 8},     {16, 32, 64, 32, 32, 5, 4},
               {257, 96, 512, 128, 128, 300, 8}, {1000, 33, 200, 0, 100, 7, 64}, {64, 300, 1000, 500, 500, 1000, 2}};
  uint64_t rng = 0xE3B;
  for (const auto& c : cases) {
    ct_tensor_t ids = ct_ids(c.t, c.vocab, c.distinct, &rng);
    char shape[64], params[64];
    snprintf(shape, sizeof shape, "T=%lld H=%lld V=%lld", (long long)c.t, (long long)c.h, (long long)c.vocab);
    snprintf(params, sizeof params, "rows [%lld,%lld) chunks=%d", (long long)c.start, (long long)(c.start + c.rows),
             c.chunks);
    for (int dtype : kDtypes) {
      int64_t td[2] = {c.rows, c.h}, yd[2] = {c.t, c.h};
      ct_tensor_t table = ct_make(dtype, 2, td), y = ct_make(dtype, 2, yd), dy = ct_make(dtype, 2, yd);
      ct_tensor_t dtable = ct_make(TPRT_DTYPE_F32, 2, td);
      ct_fill(&table, &rng, CT_DIST_SPECIAL);
      ct_fill(&dy, &rng, CT_DIST_MODERATE);
      if (ct_selected("embedding"))
        ct_run(
            "embedding", shape, tprt_dtype_name(dtype), params, &y,
            [&] { return tprt_cpu_embedding(&ids.h, &table.h, &y.h, c.start, c.vocab); },
            [&](cudaStream_t st) { return tprt_cuda_embedding(&ids.d, &table.d, &y.d, c.start, c.vocab, st); }, true,
            stream);
      if (ct_selected("embedding_grad"))
        ct_run(
            "embedding_grad", shape, tprt_dtype_name(dtype), params, &dtable,
            [&] { return tprt_cpu_embedding_grad(&ids.h, &dy.h, &dtable.h, c.start, c.vocab, c.chunks); },
            [&](cudaStream_t st) {
              return tprt_cuda_embedding_grad(&ids.d, &dy.d, &dtable.d, c.start, c.vocab, c.chunks, st);
            },
            true, stream);
      // With acc (a tied head's gradient; +-0 among its values: a row no token names is acc + 0.0).
      ct_tensor_t acc = ct_make(TPRT_DTYPE_F32, 2, td);
      ct_fill(&acc, &rng, CT_DIST_MODERATE);
      if (ct_selected("embedding_grad"))
        ct_run(
            "embedding_grad", shape, tprt_dtype_name(dtype), "acc", &dtable,
            [&] { return tprt_cpu_embedding_grad_acc(&ids.h, &dy.h, &acc.h, &dtable.h, c.start, c.vocab, c.chunks); },
            [&](cudaStream_t st) {
              return tprt_cuda_embedding_grad_acc(&ids.d, &dy.d, &acc.d, &dtable.d, c.start, c.vocab, c.chunks, st);
            },
            true, stream);
      ct_free(&table), ct_free(&y), ct_free(&dy), ct_free(&dtable), ct_free(&acc);
    }
    ct_free(&ids);
  }
}

static void ct_check_optimizer(cudaStream_t stream) {
  const int64_t sizes[] = {1, 7, 1000, 65536 + 3, 3000000};
  uint64_t rng = 0x0471;
  const int64_t words = TPRT_SUMSQ_WORDS;
  for (int64_t n : sizes) {
    char shape[48];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    for (int dtype : kDtypes) {
      for (int special = 0; special < 2; ++special) {
        ct_tensor_t g = ct_make(dtype, 1, &n), seed = ct_make(TPRT_DTYPE_F32, 1, &n);
        ct_tensor_t acc = ct_make(TPRT_DTYPE_I64, 1, &words), out = ct_make(TPRT_DTYPE_I64, 1, &words);
        ct_fill(&g, &rng, special ? CT_DIST_SPECIAL : CT_DIST_WIDE);
        ct_fill(&seed, &rng, CT_DIST_WIDE);
        // An incoming accumulator: another tensor's exact sum of squares.
        tprt_status_t s = tprt_cpu_sumsq(&seed.h, NULL, &acc.h, true);
        if (s) ct_fail_status("sumsq seed", s);
        ct_upload(&acc);
        if (ct_selected("sumsq")) {
          for (int with_acc = 0; with_acc < 2; ++with_acc)
            for (int count = 0; count < 2; ++count) {
              char params[48];
              snprintf(params, sizeof params, "%s%s%s", with_acc ? "acc" : "no acc", count ? "" : " count=false",
                       special ? " special" : "");
              ct_run(
                  "sumsq", shape, tprt_dtype_name(dtype), params, &out,
                  [&] { return tprt_cpu_sumsq(&g.h, with_acc ? &acc.h : NULL, &out.h, count != 0); },
                  [&](cudaStream_t st) { return tprt_cuda_sumsq(&g.d, with_acc ? &acc.d : NULL, &out.d, count != 0, st); },
                  true, stream);
            }
          // The tensor from its second element: not 16-byte aligned, so element by element.
          if (n > 1) {
            tprt_tensor_t gh = g.h, gd = g.d;
            size_t elem = tprt_dtype_bytes(dtype, 1);
            gh.data = (char*)gh.data + elem, gd.data = (char*)gd.data + elem;
            gh.dims[0] = gd.dims[0] = n - 1;
            ct_run(
                "sumsq", shape, tprt_dtype_name(dtype), special ? "unaligned special" : "unaligned", &out,
                [&] { return tprt_cpu_sumsq(&gh, &acc.h, &out.h, true); },
                [&](cudaStream_t st) { return tprt_cuda_sumsq(&gd, &acc.d, &out.d, true, st); }, true, stream);
          }
        }
        ct_free(&g), ct_free(&seed), ct_free(&acc), ct_free(&out);
      }
      // AdamW: f32 states, the weight in |dtype|; clipping off, on (a large norm), on with a NaN
      // norm (the state unchanged), and on in place (the outputs the inputs' buffers).
      for (int mode = 0; mode < 4 && ct_selected("adamw"); ++mode) {
        const bool clip = mode > 0, in_place = mode == 3;
        ct_tensor_t p = ct_make(TPRT_DTYPE_F32, 1, &n), gr = ct_make(TPRT_DTYPE_F32, 1, &n),
                    m = ct_make(TPRT_DTYPE_F32, 1, &n), v = ct_make(TPRT_DTYPE_F32, 1, &n);
        ct_tensor_t p1 = ct_make(TPRT_DTYPE_F32, 1, &n), m1 = ct_make(TPRT_DTYPE_F32, 1, &n),
                    v1 = ct_make(TPRT_DTYPE_F32, 1, &n), w = ct_make(dtype, 1, &n);
        int64_t eight = 8, one = 1;
        ct_tensor_t hyper = ct_make(TPRT_DTYPE_F32, 1, &eight), norm = ct_make(TPRT_DTYPE_F32, 1, &one);
        ct_fill(&p, &rng, CT_DIST_MODERATE);
        ct_fill(&gr, &rng, CT_DIST_WIDE);
        ct_fill(&m, &rng, CT_DIST_MODERATE);
        ct_fill(&v, &rng, CT_DIST_MODERATE);
        for (int64_t i = 0; i < n; ++i) ((float*)v.h.data)[i] = fabsf(((float*)v.h.data)[i]);
        ct_upload(&v);
        const float h[8] = {3e-3f / 0.19f, 0.1f, 0.95f, 0.05f, 1e-8f, 1.0f - 3e-4f, 0.2236068f, clip ? 1.0f : 0.0f};
        memcpy(hyper.h.data, h, sizeof h);
        ((float*)norm.h.data)[0] = mode == 2 ? NAN : 7.5f;
        ct_upload(&hyper), ct_upload(&norm);
        const char* what[4] = {"no clip", "clip 1 (norm 7.5)", "clip 1, norm NaN (unchanged)", "clip 1, in place"};
        ct_run_outputs(
            "adamw", shape, tprt_dtype_name(dtype), what[mode], {&p1, &m1, &v1, &w},
            [&] { return tprt_cpu_adamw(&p.h, &gr.h, &m.h, &v.h, &hyper.h, &norm.h, &p1.h, &m1.h, &v1.h, &w.h); },
            [&](cudaStream_t st) {
              if (!in_place)
                return tprt_cuda_adamw(&p.d, &gr.d, &m.d, &v.d, &hyper.d, &norm.d, &p1.d, &m1.d, &v1.d, &w.d, st);
              size_t bytes = (size_t)n * sizeof(float);
              cudaMemcpyAsync(p1.d.data, p.d.data, bytes, cudaMemcpyDeviceToDevice, st);
              cudaMemcpyAsync(m1.d.data, m.d.data, bytes, cudaMemcpyDeviceToDevice, st);
              cudaMemcpyAsync(v1.d.data, v.d.data, bytes, cudaMemcpyDeviceToDevice, st);
              return tprt_cuda_adamw(&p1.d, &gr.d, &m1.d, &v1.d, &hyper.d, &norm.d, &p1.d, &m1.d, &v1.d, &w.d, st);
            },
            true, stream);
        ct_tensor_t* all[10] = {&p, &gr, &m, &v, &p1, &m1, &v1, &w, &hyper, &norm};
        for (auto* x : all) ct_free(x);
      }
    }
  }
  // The global norm of R accumulators (each a CPU sum of squares), with and without a NaN.
  for (int64_t r : {1, 3, 8}) {
    for (int nan = 0; nan < 2 && ct_selected("global_norm"); ++nan) {
      int64_t wd = r * words, one = 1, n = 4099;
      ct_tensor_t acc = ct_make(TPRT_DTYPE_I64, 1, &wd), norm = ct_make(TPRT_DTYPE_F32, 1, &one);
      for (int64_t i = 0; i < r; ++i) {
        ct_tensor_t g = ct_make(TPRT_DTYPE_F32, 1, &n);
        ct_fill(&g, &rng, CT_DIST_WIDE);
        if (nan && i == r - 1) ((uint32_t*)g.h.data)[5] = 0x7FC00000u;
        tprt_tensor_t slot = tprt_tensor_make((int64_t*)acc.h.data + i * words, TPRT_DTYPE_I64, 1, &words);
        tprt_status_t s = tprt_cpu_sumsq(&g.h, NULL, &slot, true);
        if (s) ct_fail_status("global_norm input", s);
        ct_free(&g);
      }
      ct_upload(&acc);
      char shape[48];
      snprintf(shape, sizeof shape, "R=%lld", (long long)r);
      ct_run(
          "global_norm", shape, "i64", nan ? "a NaN" : "finite", &norm,
          [&] { return tprt_cpu_global_norm(&acc.h, &norm.h); },
          [&](cudaStream_t st) { return tprt_cuda_global_norm(&acc.d, &norm.d, st); }, true, stream);
      ct_free(&acc), ct_free(&norm);
    }
  }
}

// The exact GEMMs with a budget of three tokens' logits (ce_exact_gemms.h): the ops' pieces of
// tokens (and the wgrad's tree of whole-chunk pieces) must give the CPU's bits too.

// The cross-entropy ops on one rank's vocabulary block (rows [start, start + V) of |vocab|), with
// ignored (-1) targets and targets other ranks hold; each whole (one piece of tokens) and in
// pieces of three tokens' logits. The last case spans two warps' groups of 32 tokens and three
// 64-column tiles of the statistics kernel per block.
static void ct_check_cross_entropy(cudaStream_t stream) {
  struct {
    int64_t t, h, v, vocab, start;
    int chunks, vchunks, tchunks;
  } cases[] = {{1, 1, 1, 1, 0, 1, 1, 1},         {16, 32, 64, 64, 0, 8, 8, 8},      {16, 32, 32, 64, 32, 4, 2, 4},
               {33, 96, 200, 400, 200, 8, 16, 2}, {130, 64, 100, 100, 0, 16, 4, 32}, {64, 64, 96, 192, 96, 8, 4, 8},
               {40, 16, 300, 300, 0, 8, 2, 8}};
  uint64_t rng = 0xCE5;
  for (const auto& c : cases) {
    ct_tensor_t tg = ct_make(TPRT_DTYPE_I32, 1, &c.t);
    for (int64_t i = 0; i < c.t; ++i)
      ((int32_t*)tg.h.data)[i] = i % 7 == 3 ? -1 : (int32_t)(ct_next(&rng) % (uint64_t)c.vocab);
    ct_upload(&tg);
    for (int dtype : kDtypes) {
      int64_t xd[2] = {c.t, c.h}, wd[2] = {c.v, c.h}, sd[2] = {c.t, 3};
      ct_tensor_t x = ct_make(dtype, 2, xd), w = ct_make(dtype, 2, wd), st = ct_make(TPRT_DTYPE_F32, 2, sd);
      ct_tensor_t loss = ct_make(TPRT_DTYPE_F32, 1, &c.t), lse = ct_make(TPRT_DTYPE_F32, 1, &c.t),
                  g = ct_make(TPRT_DTYPE_F32, 1, &c.t);
      ct_tensor_t dx = ct_make(dtype, 2, xd), dw = ct_make(TPRT_DTYPE_F32, 2, wd);
      ct_fill(&x, &rng, CT_DIST_MODERATE);
      ct_fill(&w, &rng, CT_DIST_MODERATE);
      ct_fill(&g, &rng, CT_DIST_MODERATE);
      const tprt_cuda_ce_gemms_t pieces = ce_exact_gemms((size_t)(3 * c.v) * tprt_dtype_bytes(dtype, 1), TPRT_CUDA_CE_EXACT);
      for (const tprt_cuda_ce_gemms_t* gm : {(const tprt_cuda_ce_gemms_t*)NULL, &pieces}) {
        if (!ct_selected("cross_entropy")) break;
        char shape[64], params[80];
        snprintf(shape, sizeof shape, "T=%lld H=%lld V=%lld", (long long)c.t, (long long)c.h, (long long)c.v);
        snprintf(params, sizeof params, "rows [%lld,+V) of %lld, chunks %d/%d/%d%s", (long long)c.start,
                 (long long)c.vocab, c.chunks, c.vchunks, c.tchunks, gm ? ", 3-token pieces" : "");
        ct_run(
            "cross_entropy", shape, tprt_dtype_name(dtype), params, &st,
            [&] { return tprt_cpu_cross_entropy_stats(&x.h, &w.h, &tg.h, &st.h, c.start, c.vocab, c.chunks, c.vchunks); },
            [&](cudaStream_t s) {
              return tprt_cuda_cross_entropy_stats(&x.d, &w.d, &tg.d, &st.d, c.start, c.vocab, c.chunks, c.vchunks, gm,
                                                   s);
            },
            true, stream);
        // The loss of the stats (one rank): lse feeds the gradients below.
        ct_run_outputs(
            "cross_entropy", shape, tprt_dtype_name(dtype), "combine", {&loss, &lse},
            [&] { return tprt_cpu_cross_entropy_combine(&st.h, &tg.h, &loss.h, &lse.h); },
            [&](cudaStream_t s) { return tprt_cuda_cross_entropy_combine(&st.d, &tg.d, &loss.d, &lse.d, s); }, true,
            stream);
        ct_run(
            "cross_entropy", shape, tprt_dtype_name(dtype), gm ? "dgrad, 3-token pieces" : "dgrad", &dx,
            [&] {
              return tprt_cpu_cross_entropy_dgrad(&x.h, &w.h, &tg.h, &lse.h, &g.h, &dx.h, c.start, c.vocab, c.chunks,
                                                  c.vchunks);
            },
            [&](cudaStream_t s) {
              return tprt_cuda_cross_entropy_dgrad(&x.d, &w.d, &tg.d, &lse.d, &g.d, &dx.d, c.start, c.vocab, c.chunks,
                                                   c.vchunks, gm, s);
            },
            true, stream);
        ct_run(
            "cross_entropy", shape, tprt_dtype_name(dtype), gm ? "wgrad, whole-chunk pieces" : "wgrad", &dw,
            [&] {
              return tprt_cpu_cross_entropy_wgrad(&x.h, &w.h, &tg.h, &lse.h, &g.h, &dw.h, c.start, c.vocab, c.chunks,
                                                  c.tchunks);
            },
            [&](cudaStream_t s) {
              return tprt_cuda_cross_entropy_wgrad(&x.d, &w.d, &tg.d, &lse.d, &g.d, &dw.d, c.start, c.vocab, c.chunks,
                                                   c.tchunks, gm, s);
            },
            true, stream);
        ct_run_outputs(
            "cross_entropy", shape, tprt_dtype_name(dtype), gm ? "grad (both), whole-chunk pieces" : "grad (both)",
            {&dx, &dw},
            [&] {
              return tprt_cpu_cross_entropy_grad(&x.h, &w.h, &tg.h, &lse.h, &g.h, &dx.h, &dw.h, c.start, c.vocab,
                                                 c.chunks, c.vchunks, c.tchunks);
            },
            [&](cudaStream_t s) {
              return tprt_cuda_cross_entropy_grad(&x.d, &w.d, &tg.d, &lse.d, &g.d, &dx.d, &dw.d, c.start, c.vocab,
                                                  c.chunks, c.vchunks, c.tchunks, gm, s);
            },
            true, stream);
        // The loss and both gradients in one pass (the whole vocabulary on the rank).
        if (c.start == 0 && c.v == c.vocab)
          ct_run_outputs(
              "cross_entropy", shape, tprt_dtype_name(dtype),
              gm ? "with_grad (loss, lse, dx, dw), whole-chunk pieces" : "with_grad (loss, lse, dx, dw)",
              {&loss, &lse, &dx, &dw},
              [&] {
                return tprt_cpu_cross_entropy_with_grad(&x.h, &w.h, &tg.h, &g.h, &loss.h, &lse.h, &dx.h, &dw.h, c.chunks,
                                                        c.vchunks, c.tchunks);
              },
              [&](cudaStream_t s) {
                return tprt_cuda_cross_entropy_with_grad(&x.d, &w.d, &tg.d, &g.d, &loss.d, &lse.d, &dx.d, &dw.d,
                                                         c.chunks, c.vchunks, c.tchunks, gm, s);
              },
              true, stream);
      }
      // The loss of given logits (any values, the whole vocabulary): bitwise the CPU's.
      if (ct_selected("cross_entropy")) {
        int64_t zd[2] = {c.t, c.vocab};
        ct_tensor_t z = ct_make(dtype, 2, zd);
        ct_fill(&z, &rng, CT_DIST_MODERATE);
        char shape[64], params[48];
        snprintf(shape, sizeof shape, "T=%lld V=%lld", (long long)c.t, (long long)c.vocab);
        snprintf(params, sizeof params, "of logits, chunks %d", c.chunks);
        ct_run_outputs(
            "cross_entropy", shape, tprt_dtype_name(dtype), params, {&loss, &lse},
            [&] { return tprt_cpu_cross_entropy_logits(&z.h, &tg.h, &loss.h, &lse.h, c.chunks); },
            [&](cudaStream_t s) {
              return tprt_cuda_cross_entropy_logits(&z.d, &tg.d, &loss.d, &lse.d, c.chunks, TPRT_CUDA_CE_EXACT, s);
            },
            true, stream);
        ct_free(&z);
      }
      ct_tensor_t* all[8] = {&x, &w, &st, &loss, &lse, &g, &dx, &dw};
      for (auto* p : all) ct_free(p);
    }
    ct_free(&tg);
  }
}

// tp.sample, bitwise the CPU's token for every row: greedy, temperature alone, top-k, top-p, both
// (one row with a top-k of about 2048, the size of the GPU kernel's shared-memory pool),
// +-inf and NaN logits (CT_DIST_SPECIAL), ties, one column; and tp.kvcache_write in place.
static void ct_check_generation(cudaStream_t stream) {
  const int64_t shapes[][2] = {{1, 1}, {7, 33}, {64, 1000}, {16, 32000}, {4, 128256}};
  uint64_t rng = 0x5A3;
  for (const auto& sh : shapes) {
    const int64_t b = sh[0], v = sh[1];
    for (int dtype : kDtypes) {
      for (int dist = 0; dist < 2; ++dist) {
        int64_t ld[2] = {b, v};
        ct_tensor_t logits = ct_make(dtype, 2, ld), seed = ct_make(TPRT_DTYPE_I64, 1, &b),
                    request = ct_make(TPRT_DTYPE_I32, 1, &b), position = ct_make(TPRT_DTYPE_I32, 1, &b),
                    temperature = ct_make(TPRT_DTYPE_F32, 1, &b), top_k = ct_make(TPRT_DTYPE_I32, 1, &b),
                    top_p = ct_make(TPRT_DTYPE_F32, 1, &b), token = ct_make(TPRT_DTYPE_I32, 1, &b);
        ct_fill(&logits, &rng, dist ? CT_DIST_SPECIAL : CT_DIST_WIDE);
        for (int64_t i = 0; i < b; ++i) {
          ((int64_t*)seed.h.data)[i] = (int64_t)(ct_next(&rng) >> 1);
          ((int32_t*)request.h.data)[i] = (int32_t)(ct_next(&rng) & 0x7FFFFFFF);
          ((int32_t*)position.h.data)[i] = (int32_t)(ct_next(&rng) % 4096);
          const int kind = (int)(i % 5);  // greedy, plain, top-k, top-p, both
          ((float*)temperature.h.data)[i] = kind == 0 ? 0.0f : 0.25f + (float)(ct_next(&rng) % 8) * 0.25f;
          // Row 9 keeps about 2048 logits: the GPU's top-p search in shared memory or over the row.
          ((int32_t*)top_k.h.data)[i] = kind == 2 || kind == 4
                                            ? (int32_t)(i == 9 ? 2040 + ct_next(&rng) % 20 : 1 + ct_next(&rng) % 64)
                                            : 0;
          ((float*)top_p.h.data)[i] = kind == 3 || kind == 4 ? 0.05f + (float)(ct_next(&rng) % 19) * 0.05f : 1.0f;
        }
        for (ct_tensor_t* t : {&seed, &request, &position, &temperature, &top_k, &top_p}) ct_upload(t);
        char shape[64];
        snprintf(shape, sizeof shape, "B=%lld V=%lld", (long long)b, (long long)v);
        if (ct_selected("sample"))
          ct_run(
              "sample", shape, tprt_dtype_name(dtype), dist ? "special values" : "wide", &token,
              [&] {
                return tprt_cpu_sample(&logits.h, &seed.h, &request.h, &position.h, &temperature.h, &top_k.h,
                                       &top_p.h, &token.h);
              },
              [&](cudaStream_t st) {
                return tprt_cuda_sample(&logits.d, &seed.d, &request.d, &position.d, &temperature.d, &top_k.d,
                                        &top_p.d, &token.d, st);
              },
              true, stream);
        for (ct_tensor_t* t : {&logits, &seed, &request, &position, &temperature, &top_k, &top_p, &token}) ct_free(t);
      }
    }
  }
  if (!ct_selected("kvcache_write")) return;
  const int64_t b = 5, c = 40, w = 24, s = 3;
  for (int dtype : kDtypes) {
    int64_t cd[2] = {b * c, w}, nd[2] = {b * s, w};
    ct_tensor_t cache = ct_make(dtype, 2, cd), fresh = ct_make(dtype, 2, nd), len = ct_make(TPRT_DTYPE_I32, 1, &b);
    ct_fill(&cache, &rng, CT_DIST_SPECIAL);
    ct_fill(&fresh, &rng, CT_DIST_SPECIAL);
    for (int64_t i = 0; i < b; ++i) ((int32_t*)len.h.data)[i] = (int32_t)(ct_next(&rng) % (uint64_t)(c - s + 1));
    ct_upload(&len);
    // In place: the CPU and the GPU write into their own copies of the cache (not repeatable).
    ct_run(
        "kvcache_write", "B=5 C=40 W=24 S=3", tprt_dtype_name(dtype), "in place", &cache,
        [&] { return tprt_cpu_kvcache_write(&cache.h, &fresh.h, &len.h, &cache.h, s); },
        [&](cudaStream_t st) { return tprt_cuda_kvcache_write(&cache.d, &fresh.d, &len.d, &cache.d, s, st); }, false,
        stream);
    ct_free(&cache), ct_free(&fresh), ct_free(&len);
  }
}

void ct_check_model_kernels(cudaStream_t stream) {
  ct_check_embedding(stream);
  ct_check_cross_entropy(stream);
  ct_check_optimizer(stream);
  ct_check_generation(stream);
}
