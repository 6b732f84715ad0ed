// Unit tests of tprt_cpu_linear, tprt_cpu_grouped_linear and tprt_cpu_fused_grouped_mlp: values
// against float64 references, bits against the canonical definition of tprt_numerics.h, the TP
// decomposition of the K tree, determinism, segmented (expert-parallel) group sizes, and argument
// errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// y = x·wᵀ + b in double, and the magnitude sum |x·w| + |b| for the tolerance.
static void ref_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* b, int64_t w_off,
                       int64_t row0, int64_t rows, double* y, double* mag) {
  int64_t k = x->dims[1], n = w->dims[w->rank - 2];
  for (int64_t i = row0; i < row0 + rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b ? tc_get(b, j) : 0.0, m = b ? fabs(acc) : 0.0;
      for (int64_t kk = 0; kk < k; ++kk) {
        double p = tc_get(x, i * k + kk) * tc_get(w, w_off + j * k + kk);
        acc += p;
        m += fabs(p);
      }
      y[i * n + j] = acc;
      mag[i * n + j] = m;
    }
}

TPRT_TEST(linear_matches_f64_reference) {
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 100}, {8, 70, 64}, {5, 130, 257}, {2, 3, 0}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int c = 1; c <= 8; c *= 8)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
          tc_tensor_t x = tc_make(kDtypes[d], 2, m, k), w = tc_make(kDtypes[d], 2, n, k);
          tc_tensor_t b = tc_make(kDtypes[d], 1, n), y = tc_make(kDtypes[d], 2, m, n);
          tc_fill(&x.t, 1 + s, -2.0, 2.0);
          tc_fill(&w.t, 100 + s, -1.0, 1.0);
          tc_fill(&b.t, 200 + s, -1.0, 1.0);
          TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, with_bias ? &b.t : NULL, &y.t, c));
          double* ref = calloc((size_t)(m * n + 1), sizeof(double));
          double* mag = calloc((size_t)(m * n + 1), sizeof(double));
          ref_linear(&x.t, &w.t, with_bias ? &b.t : NULL, 0, 0, m, ref, mag);
          char what[128];
          snprintf(what, sizeof what, "linear %s [%lld,%lld,%lld] chunks=%d bias=%d", tprt_dtype_name(kDtypes[d]),
                   (long long)m, (long long)n, (long long)k, c, with_bias);
          tc_check_near(what, &y.t, ref, mag, tc_rtol(kDtypes[d]));
          free(ref);
          free(mag);
          tc_free(&x);
          tc_free(&w);
          tc_free(&b);
          tc_free(&y);
        }
}

// Every element of the blocked kernel equals tprt_dot_canonical of tprt_numerics.h (plus bias,
// then one rounding), for shapes that exercise partial column blocks and K % chunks != 0.
TPRT_TEST(linear_bits_match_canonical_definition) {
  const int64_t shapes[][3] = {{3, 65, 9}, {4, 129, 100}, {2, 7, 1000}, {1, 64, 3}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int c = 1; c <= 16; c *= 2) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        tc_tensor_t x = tc_make(kDtypes[d], 2, m, k), w = tc_make(kDtypes[d], 2, n, k);
        tc_tensor_t b = tc_make(kDtypes[d], 1, n), y = tc_make(kDtypes[d], 2, m, n),
                    p = tc_make(TPRT_DTYPE_F32, 2, m, n);
        tc_fill(&x.t, 11 + s, -3.0, 3.0);
        tc_fill(&w.t, 12 + s, -3.0, 3.0);
        tc_fill(&b.t, 13 + s, -3.0, 3.0);
        TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, &b.t, &y.t, c));
        if (kDtypes[d] != TPRT_DTYPE_F32) TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &p.t, c));
        float* xr = malloc((size_t)k * sizeof(float));
        float* wr = malloc((size_t)k * sizeof(float));
        int64_t bad = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t kk = 0; kk < k; ++kk) {
              xr[kk] = (float)tc_get(&x.t, i * k + kk);
              wr[kk] = (float)tc_get(&w.t, j * k + kk);
            }
            float dot = tprt_dot_canonical(xr, wr, k, c);
            tc_tensor_t one = tc_make(kDtypes[d], 1, (int64_t)1);
            tc_set(&one.t, 0, dot + (float)tc_get(&b.t, j));
            if (tc_bits(&y.t, i * n + j) != tc_bits(&one.t, 0) && bad++ < 3)
              TPRT__FAIL("%s [%lld,%lld,%lld] chunks=%d y[%lld,%lld]: 0x%x, canonical 0x%x",
                         tprt_dtype_name(kDtypes[d]), (long long)m, (long long)n, (long long)k, c, (long long)i,
                         (long long)j, tc_bits(&y.t, i * n + j), tc_bits(&one.t, 0));
            if (kDtypes[d] != TPRT_DTYPE_F32 && tc_bits(&p.t, i * n + j) != tprt_f32_bits(dot) && bad++ < 3)
              TPRT__FAIL("f32 partial [%lld,%lld]: 0x%x, canonical 0x%x", (long long)i, (long long)j,
                         tc_bits(&p.t, i * n + j), tprt_f32_bits(dot));
            tc_free(&one);
          }
        free(xr);
        free(wr);
        tc_free(&x);
        tc_free(&w);
        tc_free(&b);
        tc_free(&y);
        tc_free(&p);
      }
}

// K=8, chunks=4 (size 2): partials 1, 2^-23, 0, 0 and the tree gives 1 + 2^-23 = 0x3F800001;
// chunks=1 is the sequential fma chain, where each 2^-24 ties back to 1.0 = 0x3F800000.
TPRT_TEST(linear_tree_order_exact_bits) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)8),
              w = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)8);
  tc_tensor_t y = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)2);
  const float xv[8] = {1.0f, 0.0f, 0x1p-24f, 0x1p-24f, 0, 0, 0, 0};
  memcpy(x.t.data, xv, sizeof xv);
  for (int i = 0; i < 16; ++i) ((float*)w.t.data)[i] = i < 8 ? 1.0f : -1.0f;
  TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &y.t, 4));
  TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 0), 0x3F800001u);
  TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 1), 0xBF800001u);
  TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &y.t, 1));
  TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 0), 0x3F800000u);
  TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 1), 0xBF800000u);
  // The bias is added to the tree sum in f32: (1 + 2^-23) + 2^-24 is a tie between 1 + 2^-23 and
  // 1 + 2^-22, which rounds to the even 1 + 2^-22.
  tc_tensor_t b = tc_make(TPRT_DTYPE_F32, 1, (int64_t)2);
  ((float*)b.t.data)[0] = 0x1p-24f;
  TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, &b.t, &y.t, 4));
  TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 0), 0x3F800002u);
  tc_free(&x);
  tc_free(&w);
  tc_free(&y);
  tc_free(&b);
}

TPRT_TEST(linear_chunks_change_bits_deterministically) {
  int64_t m = 4, n = 16, k = 512;
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, m, k), w = tc_make(TPRT_DTYPE_F32, 2, n, k);
  tc_tensor_t y1 = tc_make(TPRT_DTYPE_F32, 2, m, n), y8 = tc_make(TPRT_DTYPE_F32, 2, m, n);
  tc_tensor_t y8b = tc_make(TPRT_DTYPE_F32, 2, m, n);
  tc_fill(&x.t, 5, -1.0, 1.0);
  tc_fill(&w.t, 6, -1.0, 1.0);
  TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &y1.t, 1));
  TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &y8.t, 8));
  TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &y8b.t, 8));
  int64_t differ = 0;
  for (int64_t i = 0; i < m * n; ++i) differ += tc_bits(&y1.t, i) != tc_bits(&y8.t, i);
  printf("chunks=1 and chunks=8 differ in %lld of %lld elements\n", (long long)differ, (long long)(m * n));
  TPRT_EXPECT(differ > 0);
  TPRT_EXPECT(tc_same_bytes(&y8.t, &y8b.t));
  tc_free(&x);
  tc_free(&w);
  tc_free(&y1);
  tc_free(&y8);
  tc_free(&y8b);
}

// Columns [c0, c0+cols) of a 2-D tensor as a new tensor.
static tc_tensor_t slice_cols(const tprt_tensor_t* t, int64_t c0, int64_t cols) {
  tc_tensor_t r = tc_make(t->dtype, 2, t->dims[0], cols);
  for (int64_t i = 0; i < t->dims[0]; ++i)
    for (int64_t j = 0; j < cols; ++j) tc_set(&r.t, i * cols + j, (float)tc_get(t, i * t->dims[1] + c0 + j));
  return r;
}

// Rank r of R computes the f32 partial of its K shard with C/R chunks; the R partials combined by
// the top log2 R levels of the tree give exactly the TP=1 result with C chunks.
TPRT_TEST(linear_tp_decomposition_is_bitwise_equal) {
  const int chunks = 8;
  int64_t m = 5, n = 70, k = 8 * 13;
  for (int d = 0; d < 3; ++d) {
    tc_tensor_t x = tc_make(kDtypes[d], 2, m, k), w = tc_make(kDtypes[d], 2, n, k), b = tc_make(kDtypes[d], 1, n);
    tc_tensor_t full = tc_make(TPRT_DTYPE_F32, 2, m, n), fullb = tc_make(kDtypes[d], 2, m, n);
    tc_fill(&x.t, 21, -1.0, 1.0);
    tc_fill(&w.t, 22, -1.0, 1.0);
    tc_fill(&b.t, 23, -1.0, 1.0);
    TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &full.t, chunks));
    TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, &b.t, &fullb.t, chunks));
    for (int r_count = 1; r_count <= chunks; r_count *= 2) {
      tc_tensor_t parts[8];
      int64_t ks = k / r_count;
      for (int r = 0; r < r_count; ++r) {
        tc_tensor_t xs = slice_cols(&x.t, r * ks, ks), ws = slice_cols(&w.t, r * ks, ks);
        parts[r] = tc_make(TPRT_DTYPE_F32, 2, m, n);
        TPRT_EXPECT_OK(tprt_cpu_linear(&xs.t, &ws.t, NULL, &parts[r].t, chunks / r_count));
        tc_free(&xs);
        tc_free(&ws);
      }
      int64_t bad = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        float p[8];
        for (int r = 0; r < r_count; ++r) p[r] = ((float*)parts[r].t.data)[i];
        float sum = tprt_kacc_tree(p, r_count);
        bad += tprt_f32_bits(sum) != tc_bits(&full.t, i);
        tc_tensor_t one = tc_make(kDtypes[d], 1, (int64_t)1);
        tc_set(&one.t, 0, sum + (float)tc_get(&b.t, i % n));
        bad += tc_bits(&one.t, 0) != tc_bits(&fullb.t, i);
        tc_free(&one);
      }
      if (bad)
        TPRT__FAIL("%s TP=%d: %lld elements differ from TP=1", tprt_dtype_name(kDtypes[d]), r_count, (long long)bad);
      for (int r = 0; r < r_count; ++r) tc_free(&parts[r]);
    }
    tc_free(&x);
    tc_free(&w);
    tc_free(&b);
    tc_free(&full);
    tc_free(&fullb);
  }
}

TPRT_TEST(grouped_linear_matches_reference_and_linear) {
  int64_t e = 4, k = 37, n = 19;
  int64_t sizes_v[4] = {3, 0, 5, 2}, t = 10;
  for (int d = 0; d < 3; ++d) {
    tc_tensor_t x = tc_make(kDtypes[d], 2, t, k), w = tc_make(kDtypes[d], 3, e, n, k);
    tc_tensor_t sizes = tc_make(TPRT_DTYPE_I64, 1, e), y = tc_make(kDtypes[d], 2, t, n);
    tc_tensor_t yp = tc_make(TPRT_DTYPE_F32, 2, t, n);
    memcpy(sizes.t.data, sizes_v, sizeof sizes_v);
    tc_fill(&x.t, 31, -1.0, 1.0);
    tc_fill(&w.t, 32, -1.0, 1.0);
    TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w.t, &sizes.t, &y.t, 4));
    TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w.t, &sizes.t, &yp.t, 4));
    double ref[10 * 19], mag[10 * 19];
    int64_t row = 0;
    for (int64_t g = 0; g < e; ++g) {
      ref_linear(&x.t, &w.t, NULL, g * n * k, row, sizes_v[g], ref, mag);
      // The rows of expert g are bitwise a tprt_cpu_linear of those rows with w[g].
      if (sizes_v[g] > 0) {
        tprt_tensor_t xg = x.t, wg = w.t, yg = y.t;
        xg.data = (char*)x.t.data + tprt_dtype_bytes(x.t.dtype, row * k);
        xg.dims[0] = sizes_v[g];
        wg.data = (char*)w.t.data + tprt_dtype_bytes(w.t.dtype, g * n * k);
        wg.rank = 2;
        wg.dims[0] = n;
        wg.dims[1] = k;
        tc_tensor_t yl = tc_make(kDtypes[d], 2, sizes_v[g], n);
        TPRT_EXPECT_OK(tprt_cpu_linear(&xg, &wg, NULL, &yl.t, 4));
        yg.data = (char*)y.t.data + tprt_dtype_bytes(y.t.dtype, row * n);
        yg.dims[0] = sizes_v[g];
        TPRT_EXPECT(tc_same_bytes(&yg, &yl.t));
        tc_free(&yl);
      }
      row += sizes_v[g];
    }
    tc_check_near("grouped_linear", &y.t, ref, mag, tc_rtol(kDtypes[d]));
    tc_check_near("grouped_linear f32 partial", &yp.t, ref, mag, 1e-5);
    tc_free(&x);
    tc_free(&w);
    tc_free(&sizes);
    tc_free(&y);
    tc_free(&yp);
  }
}

// One segment (group_sizes[E]) keeps the bits of the kernel before segments existed: these
// hashes were taken from that implementation (same data as the test above).
TPRT_TEST(grouped_linear_one_segment_bits_frozen) {
  int64_t e = 4, k = 37, n = 19, t = 10;
  const int64_t sizes_v[4] = {3, 0, 5, 2};
  const uint64_t want[3][2] = {{0x09E9945F0E472FBBull, 0x1FB380B31A95C55Cull},   // bf16: y, f32 partial
                               {0x61E1CD5A6325E303ull, 0x7C040FBCF1D92BBAull},   // f16
                               {0x494FF2D88F86DA2Cull, 0x494FF2D88F86DA2Cull}};  // f32
  for (int d = 0; d < 3; ++d)
    for (int partial = 0; partial < 2; ++partial) {
      tc_tensor_t x = tc_make(kDtypes[d], 2, t, k), w = tc_make(kDtypes[d], 3, e, n, k);
      tc_tensor_t sizes = tc_make(TPRT_DTYPE_I64, 1, e), y = tc_make(partial ? TPRT_DTYPE_F32 : kDtypes[d], 2, t, n);
      memcpy(sizes.t.data, sizes_v, sizeof sizes_v);
      tc_fill(&x.t, 31, -1.0, 1.0);
      tc_fill(&w.t, 32, -1.0, 1.0);
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w.t, &sizes.t, &y.t, 4));
      TPRT_EXPECT_EQ_BITS(tc_hash(&y.t), want[d][partial]);
      tc_free(&x);
      tc_free(&w);
      tc_free(&sizes);
      tc_free(&y);
    }
}

// S=2 segments of capacity 3 for E=2 experts, by hand: group_sizes {1,1 | 0,2} puts row 0 on
// expert 0, row 1 on expert 1, row 2 is padding; rows 3, 4 on expert 1, row 5 is padding.
// w0 = [1, 2], w1 = [-1, 1]; the products are small integers, exact in every order.
TPRT_TEST(grouped_linear_segments_by_hand) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)6, (int64_t)2),
              w = tc_make(TPRT_DTYPE_F32, 3, (int64_t)2, (int64_t)1, (int64_t)2);
  tc_tensor_t sizes = tc_make(TPRT_DTYPE_I64, 1, (int64_t)4), y = tc_make(TPRT_DTYPE_F32, 2, (int64_t)6, (int64_t)1);
  const float xv[12] = {1, 2, 3, 4, NAN, NAN, 5, 6, 7, 9, -INFINITY, NAN};  // padding rows hold garbage
  const float wv[4] = {1, 2, -1, 1};
  const int64_t sv[4] = {1, 1, 0, 2};
  memcpy(x.t.data, xv, sizeof xv);
  memcpy(w.t.data, wv, sizeof wv);
  memcpy(sizes.t.data, sv, sizeof sv);
  memset(y.t.data, 0xFF, tprt_tensor_bytes(&y.t));  // NaN everywhere: every output must be written
  TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w.t, &sizes.t, &y.t, 2));
  const float want[6] = {1 + 2 * 2, -3 + 4, 0.0f, -5 + 6, -7 + 9, 0.0f};
  for (int i = 0; i < 6; ++i) TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, i), tprt_f32_bits(want[i]));
  tc_free(&x);
  tc_free(&w);
  tc_free(&sizes);
  tc_free(&y);
}

// Rows [row0, row0+rows) of a 2-D tensor as a view.
static tprt_tensor_t rows_view(const tprt_tensor_t* t, int64_t row0, int64_t rows) {
  tprt_tensor_t v = *t;
  v.data = (char*)t->data + tprt_dtype_bytes(t->dtype, row0 * t->dims[1]);
  v.dims[0] = rows;
  return v;
}

// A segmented grouped linear equals, bit for bit, the one-segment kernel run on each segment's
// real rows with that segment's counts, and writes +0.0 on every padding row. Random counts,
// including empty segments, full segments and experts with no rows.
TPRT_TEST(grouped_linear_segments_equal_per_segment_runs) {
  uint64_t rng = 2024;
  for (int iter = 0; iter < 60; ++iter) {
    int d = iter % 3, partial = (iter / 3) % 2;
    int64_t e = 1 + (int64_t)(tc_next(&rng) % 4), segs = 2 + (int64_t)(tc_next(&rng) % 3);
    int64_t cap = (int64_t)(tc_next(&rng) % 7), k = 1 + (int64_t)(tc_next(&rng) % 70);
    int64_t n = 1 + (int64_t)(tc_next(&rng) % 80), t = segs * cap;
    int chunks = 1 << (tc_next(&rng) % 4);
    tc_tensor_t x = tc_make(kDtypes[d], 2, t, k), w = tc_make(kDtypes[d], 3, e, n, k);
    tc_tensor_t sizes = tc_make(TPRT_DTYPE_I64, 1, segs * e);
    tc_tensor_t y = tc_make(partial ? TPRT_DTYPE_F32 : kDtypes[d], 2, t, n);
    int64_t* sv = (int64_t*)sizes.t.data;
    for (int64_t sg = 0; sg < segs; ++sg) {
      // Segment 0 is full, segment 1 empty, the others hold a random number of rows.
      int64_t left = sg == 0 ? cap : sg == 1 ? 0 : (int64_t)(tc_next(&rng) % (uint64_t)(cap + 1));
      for (int64_t j = 0; j < e; ++j) {
        int64_t c = j == e - 1 ? left : (int64_t)(tc_next(&rng) % (uint64_t)(left + 1));
        sv[sg * e + j] = c;
        left -= c;
      }
    }
    tc_fill(&x.t, 500 + iter, -2.0, 2.0);
    tc_fill(&w.t, 600 + iter, -2.0, 2.0);
    memset(y.t.data, 0xFF, tprt_tensor_bytes(&y.t));
    TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w.t, &sizes.t, &y.t, chunks));
    for (int64_t sg = 0; sg < segs; ++sg) {
      int64_t used = 0;
      for (int64_t j = 0; j < e; ++j) used += sv[sg * e + j];
      tprt_tensor_t xs = rows_view(&x.t, sg * cap, used), gs = sizes.t;
      gs.data = sv + sg * e;
      gs.dims[0] = e;
      tc_tensor_t ys = tc_make(y.t.dtype, 2, used, n);
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&xs, &w.t, &gs, &ys.t, chunks));
      tprt_tensor_t got = rows_view(&y.t, sg * cap, used);
      if (!tc_same_bytes(&got, &ys.t))
        TPRT__FAIL("iter %d (%s, E=%lld, S=%lld, cap=%lld): segment %lld differs from its own run", iter,
                   tprt_dtype_name(y.t.dtype), (long long)e, (long long)segs, (long long)cap, (long long)sg);
      for (int64_t i = (sg * cap + used) * n; i < (sg + 1) * cap * n; ++i)
        if (tc_bits(&y.t, i) != 0) {
          TPRT__FAIL("iter %d: padding element %lld is 0x%x, not +0.0", iter, (long long)i, tc_bits(&y.t, i));
          break;
        }
      tc_free(&ys);
    }
    tc_free(&x);
    tc_free(&w);
    tc_free(&sizes);
    tc_free(&y);
  }
}

TPRT_TEST(fused_grouped_mlp_equals_unfused_sequence) {
  int64_t e = 3, h = 24, f = 16, t = 9;
  int64_t sizes_v[3] = {4, 2, 3};
  for (int d = 0; d < 3; d += 2)
    for (int kind = 0; kind < 3; ++kind)
      for (int64_t il = 0; il <= 8; il += 8) {
        tc_tensor_t x = tc_make(kDtypes[d], 2, t, h), w1 = tc_make(kDtypes[d], 3, e, 2 * f, h);
        tc_tensor_t w2 = tc_make(kDtypes[d], 3, e, h, f), sizes = tc_make(TPRT_DTYPE_I64, 1, e);
        tc_tensor_t y = tc_make(kDtypes[d], 2, t, h), hid = tc_make(kDtypes[d], 2, t, 2 * f);
        tc_tensor_t act = tc_make(kDtypes[d], 2, t, f), y2 = tc_make(kDtypes[d], 2, t, h);
        memcpy(sizes.t.data, sizes_v, sizeof sizes_v);
        tc_fill(&x.t, 41, -2.0, 2.0);
        tc_fill(&w1.t, 42, -0.5, 0.5);
        tc_fill(&w2.t, 43, -0.5, 0.5);
        TPRT_EXPECT_OK(tprt_cpu_fused_grouped_mlp(&x.t, &w1.t, &w2.t, &sizes.t, &y.t, kind, il, 1.702f, 7.0f, 8));
        TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w1.t, &sizes.t, &hid.t, 8));
        TPRT_EXPECT_OK(tprt_cpu_glu(&hid.t, &act.t, kind, il, 1.702f, 7.0f));
        TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&act.t, &w2.t, &sizes.t, &y2.t, 8));
        TPRT_EXPECT(tc_same_bytes(&y.t, &y2.t));
        tc_free(&x);
        tc_free(&w1);
        tc_free(&w2);
        tc_free(&sizes);
        tc_free(&y);
        tc_free(&hid);
        tc_free(&act);
        tc_free(&y2);
      }
}

// The fused MLP shares grouped_linear's segment rule: with S=3 segments it is still bitwise the
// unfused sequence, and its padding rows are +0.0.
TPRT_TEST(fused_grouped_mlp_segments_equal_unfused_sequence) {
  int64_t e = 2, h = 16, f = 8, segs = 3, cap = 4, t = segs * cap;
  const int64_t sizes_v[6] = {2, 1, 0, 0, 3, 1};  // segment 0: 3 rows + 1 padding; 1: empty; 2: full
  for (int d = 0; d < 3; ++d) {
    tc_tensor_t x = tc_make(kDtypes[d], 2, t, h), w1 = tc_make(kDtypes[d], 3, e, 2 * f, h);
    tc_tensor_t w2 = tc_make(kDtypes[d], 3, e, h, f), sizes = tc_make(TPRT_DTYPE_I64, 1, segs * e);
    tc_tensor_t y = tc_make(kDtypes[d], 2, t, h), hid = tc_make(kDtypes[d], 2, t, 2 * f);
    tc_tensor_t act = tc_make(kDtypes[d], 2, t, f), y2 = tc_make(kDtypes[d], 2, t, h);
    memcpy(sizes.t.data, sizes_v, sizeof sizes_v);
    tc_fill(&x.t, 44, -2.0, 2.0);
    tc_fill(&w1.t, 45, -0.5, 0.5);
    tc_fill(&w2.t, 46, -0.5, 0.5);
    memset(y.t.data, 0xFF, tprt_tensor_bytes(&y.t));
    TPRT_EXPECT_OK(tprt_cpu_fused_grouped_mlp(&x.t, &w1.t, &w2.t, &sizes.t, &y.t, TPRT_GLU_SWIGLU, 0, 1.702f, 7.0f, 8));
    TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&x.t, &w1.t, &sizes.t, &hid.t, 8));
    TPRT_EXPECT_OK(tprt_cpu_glu(&hid.t, &act.t, TPRT_GLU_SWIGLU, 0, 1.702f, 7.0f));
    TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&act.t, &w2.t, &sizes.t, &y2.t, 8));
    TPRT_EXPECT(tc_same_bytes(&y.t, &y2.t));
    const int64_t pad_rows[5] = {3, 4, 5, 6, 7};  // row 3 of segment 0, all of segment 1
    for (int r = 0; r < 5; ++r)
      for (int64_t c = 0; c < h; ++c) TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, pad_rows[r] * h + c), 0u);
    tc_tensor_t* all[] = {&x, &w1, &w2, &sizes, &y, &hid, &act, &y2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
  }
}

// Every rule of the segmented group sizes, with the values in the message.
TPRT_TEST(grouped_linear_segment_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)128, (int64_t)8),
              w = tc_make(TPRT_DTYPE_F32, 3, (int64_t)4, (int64_t)4, (int64_t)8);
  tc_tensor_t y = tc_make(TPRT_DTYPE_F32, 2, (int64_t)128, (int64_t)4), gs = tc_make(TPRT_DTYPE_I64, 1, (int64_t)16);
  tc_tensor_t gs0 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)0), gs6 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)6);
  tc_tensor_t gs12 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)12);
  tc_tensor_t w0 = tc_make(TPRT_DTYPE_F32, 3, (int64_t)0, (int64_t)4, (int64_t)8);
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&x.t, &w.t, &gs0.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes must be [S*E] = S >= 1 segments of E=4 counts (w is [4,4,8] f32); "
                     "got [0] i64");
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&x.t, &w.t, &gs6.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes must be [S*E] = S >= 1 segments of E=4 counts (w is [4,4,8] f32); "
                     "got [6] i64");
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&x.t, &w0.t, &gs6.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes must be [S*E] = S >= 1 segments of E=0 counts (w is [0,4,8] f32); "
                     "got [6] i64");
  TPRT_EXPECT_STATUS(
      tprt_cpu_grouped_linear(&x.t, &w.t, &gs12.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
      "grouped_linear: T=128 rows of x are not divisible by S=3 segments (group_sizes is [12] i64, E=4)");
  int64_t* s = (int64_t*)gs.t.data;  // S=4 segments of capacity 32
  for (int i = 8; i < 12; ++i) s[i] = 10;
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&x.t, &w.t, &gs.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: segment 2 holds 40 rows but has capacity 32 (T=128 rows in S=4 segments)");
  s[5] = -1;
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&x.t, &w.t, &gs.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes[5]=-1 (segment 1, expert 1) is outside [0, T/S=32]");
  s[3] = 33;
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&x.t, &w.t, &gs.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes[3]=33 (segment 0, expert 3) is outside [0, T/S=32]");
  // Counts near INT64_MAX in one segment: each is checked first and the sum saturates, so it
  // cannot overflow (K = N = 0, so these huge tensors hold no data).
  tc_tensor_t xe = tc_make(TPRT_DTYPE_F32, 2, INT64_MAX - 1, (int64_t)0),
              we = tc_make(TPRT_DTYPE_F32, 3, (int64_t)3, (int64_t)0, (int64_t)0);
  tc_tensor_t ge = tc_make(TPRT_DTYPE_I64, 1, (int64_t)6), ye = tc_make(TPRT_DTYPE_F32, 2, INT64_MAX - 1, (int64_t)0);
  int64_t* se = (int64_t*)ge.t.data;
  se[0] = se[1] = se[2] = (INT64_MAX - 1) / 2;
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&xe.t, &we.t, &ge.t, &ye.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: segment 0 holds 9223372036854775807 rows but has capacity 4611686018427387903 "
                     "(T=9223372036854775806 rows in S=2 segments)");
  // The fused MLP reports grouped_linear's message under its fc1 context.
  tc_tensor_t w1 = tc_make(TPRT_DTYPE_F32, 3, (int64_t)4, (int64_t)8, (int64_t)8),
              w2 = tc_make(TPRT_DTYPE_F32, 3, (int64_t)4, (int64_t)8, (int64_t)4);
  tc_tensor_t xm = tc_make(TPRT_DTYPE_F32, 2, (int64_t)128, (int64_t)8),
              ym = tc_make(TPRT_DTYPE_F32, 2, (int64_t)128, (int64_t)8);
  TPRT_EXPECT_STATUS(
      tprt_cpu_fused_grouped_mlp(&xm.t, &w1.t, &w2.t, &gs12.t, &ym.t, 0, 0, 1.0f, 1.0f, 8),
      TPRT_STATUS_INVALID_ARGUMENT,
      "grouped_linear: T=128 rows of x are not divisible by S=3 segments (group_sizes is [12] i64, E=4)");
  tc_tensor_t* all[] = {&x, &w, &y, &gs, &gs0, &gs6, &gs12, &w0, &xe, &we, &ge, &ye, &w1, &w2, &xm, &ym};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

TPRT_TEST(linear_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)16, (int64_t)64);
  tc_tensor_t w = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)32, (int64_t)48);
  tc_tensor_t w64 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)32, (int64_t)64);
  tc_tensor_t wf16 = tc_make(TPRT_DTYPE_F16, 2, (int64_t)32, (int64_t)64);
  tc_tensor_t y = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)16, (int64_t)32);
  tc_tensor_t y33 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)16, (int64_t)33);
  tc_tensor_t yp = tc_make(TPRT_DTYPE_F32, 2, (int64_t)16, (int64_t)32);
  tc_tensor_t b = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)32), b31 = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)31);
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &w.t, NULL, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: x[M,K] and w[N,K] disagree on K: x [16,64] bf16 has K=64, w [32,48] bf16 has K=48");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &w64.t, NULL, &y.t, 3), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: chunks=3 must be a power of two in [1, 1024]");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &w64.t, NULL, &y.t, 2048), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: chunks=2048 must be a power of two in [1, 1024]");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &wf16.t, NULL, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: w must have x's dtype bf16; got [32,64] f16");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &w64.t, NULL, &y33.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: y must be [M,N] = [16,32] of x's dtype bf16 (or f32 for a partial); got [16,33] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &w64.t, &b.t, &yp.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: an f32 partial y takes no bias (x is bf16): the bias is added once, after the reduction");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&x.t, &w64.t, &b31.t, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: bias must be [N] = [32]; got [31] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(NULL, &w64.t, NULL, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT, "linear: x is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&b.t, &w64.t, NULL, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: x must be a rank-2 bf16, f16 or f32 tensor; got [32] bf16");
  tc_tensor_t xi = tc_make(TPRT_DTYPE_I32, 2, (int64_t)16, (int64_t)64);
  TPRT_EXPECT_STATUS(tprt_cpu_linear(&xi.t, &w64.t, NULL, &y.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "linear: x must be a rank-2 bf16, f16 or f32 tensor; got [16,64] i32");
  // Grouped.
  tc_tensor_t gx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)10, (int64_t)8),
              gw = tc_make(TPRT_DTYPE_F32, 3, (int64_t)3, (int64_t)4, (int64_t)8);
  tc_tensor_t gy = tc_make(TPRT_DTYPE_F32, 2, (int64_t)10, (int64_t)4), gs = tc_make(TPRT_DTYPE_I64, 1, (int64_t)3);
  tc_tensor_t gs2 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)2);
  int64_t* s = (int64_t*)gs.t.data;
  s[0] = 4;
  s[1] = 4;
  s[2] = 1;
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&gx.t, &gw.t, &gs.t, &gy.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes sum to 9 but x has T=10 rows");
  s[2] = -2;
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&gx.t, &gw.t, &gs.t, &gy.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes[2]=-2 is outside [0, T=10]");
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&gx.t, &gw.t, &gs2.t, &gy.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes must be [S*E] = S >= 1 segments of E=3 counts (w is [3,4,8] f32); "
                     "got [2] i64");
  TPRT_EXPECT_STATUS(tprt_cpu_grouped_linear(&gx.t, &gw.t, &gy.t, &gy.t, 8), TPRT_STATUS_INVALID_ARGUMENT,
                     "grouped_linear: group_sizes must be a rank-1 i64 tensor; got [10,4] f32");
  s[2] = 2;
  tc_tensor_t w2 = tc_make(TPRT_DTYPE_F32, 3, (int64_t)3, (int64_t)8, (int64_t)5);
  TPRT_EXPECT_STATUS(tprt_cpu_fused_grouped_mlp(&gx.t, &gw.t, &w2.t, &gs.t, &gx.t, 0, 0, 1.0f, 1.0f, 8),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "fused_grouped_mlp: x, w1, w2 must be [T,H], [E,2F,H], [E,H,F] of one dtype; got x [10,8] f32, "
                     "w1 [3,4,8] f32, w2 [3,8,5] f32");
  tc_tensor_t w2ok = tc_make(TPRT_DTYPE_F32, 3, (int64_t)3, (int64_t)8, (int64_t)2);
  TPRT_EXPECT_STATUS(tprt_cpu_fused_grouped_mlp(&gx.t, &gw.t, &w2ok.t, &gs.t, &gx.t, 0, 3, 1.0f, 1.0f, 8),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "fused_grouped_mlp activation: glu: interleave=3 must be 0 or a positive divisor of F=2");
  tc_tensor_t* all[] = {&x, &w, &w64, &wf16, &y, &y33, &yp, &b, &b31, &xi, &gx, &gw, &gy, &gs, &gs2, &w2, &w2ok};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
