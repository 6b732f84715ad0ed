// Unit tests of the linear backward kernels: tprt_cpu_linear_dgrad, tprt_cpu_linear_wgrad,
// tprt_cpu_bias_grad and their grouped forms. Values against float64 references, every element
// bitwise against tprt_dot_canonical over the contracted dimension, hand-made cases where the
// tree order differs from the sequential one, determinism, the tensor- and sequence-parallel
// decompositions, segmented group sizes with padding, and every argument error.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// out[i·J + j] = Σ_r a(i, r)·b(r, j) in double with a(i, r) = a[i·asi + r·asr] and b(r, j) =
// b[r·bsr + j]; mag gets Σ |terms| for the tolerance.
static void ref_gemm(const tprt_tensor_t* a, int64_t asi, int64_t asr, const tprt_tensor_t* b, int64_t bsr, int64_t ni,
                     int64_t nj, int64_t nr, double* out, double* mag) {
  for (int64_t i = 0; i < ni; ++i)
    for (int64_t j = 0; j < nj; ++j) {
      double acc = 0.0, m = 0.0;
      for (int64_t r = 0; r < nr; ++r) {
        double p = tc_get(a, i * asi + r * asr) * (b ? tc_get(b, r * bsr + j) : 1.0);
        acc += p;
        m += fabs(p);
      }
      out[i * nj + j] = acc;
      mag[i * nj + j] = m;
    }
}

static double* dalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

TPRT_TEST(linear_grads_match_f64_reference) {
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 100}, {8, 70, 64}, {130, 5, 67}, {2, 3, 0}, {0, 4, 3}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int c = 1; c <= 8; c *= 8)
        for (int f32_out = 0; f32_out < 2; ++f32_out) {
          int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
          int od = f32_out ? TPRT_DTYPE_F32 : kDtypes[d];
          tc_tensor_t dy = tc_make(kDtypes[d], 2, m, n), w = tc_make(kDtypes[d], 2, n, k),
                      x = tc_make(kDtypes[d], 2, m, k);
          tc_tensor_t dx = tc_make(od, 2, m, k), dw = tc_make(od, 2, n, k), db = tc_make(od, 1, n);
          tc_fill(&dy.t, 1 + s, -2.0, 2.0);
          tc_fill(&w.t, 100 + s, -1.0, 1.0);
          tc_fill(&x.t, 200 + s, -1.0, 1.0);
          TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx.t, c));
          TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dw.t, c));
          TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dy.t, &db.t, c));
          double *ref = dalloc(m * k + n * k + n), *mag = dalloc(m * k + n * k + n);
          char what[128];
          snprintf(what, sizeof what, "%s [M,N,K]=[%lld,%lld,%lld] chunks=%d out %s", tprt_dtype_name(kDtypes[d]),
                   (long long)m, (long long)n, (long long)k, c, tprt_dtype_name(od));
          double rtol = tc_rtol(od);
          ref_gemm(&dy.t, n, 1, &w.t, k, m, k, n, ref, mag);
          char sub[160];
          snprintf(sub, sizeof sub, "dgrad %s", what);
          tc_check_near(sub, &dx.t, ref, mag, rtol);
          ref_gemm(&dy.t, 1, n, &x.t, k, n, k, m, ref, mag);
          snprintf(sub, sizeof sub, "wgrad %s", what);
          tc_check_near(sub, &dw.t, ref, mag, rtol);
          ref_gemm(&dy.t, 1, n, NULL, 0, n, 1, m, ref, mag);
          snprintf(sub, sizeof sub, "bias_grad %s", what);
          tc_check_near(sub, &db.t, ref, mag, rtol);
          free(ref);
          free(mag);
          tc_free(&dy);
          tc_free(&w);
          tc_free(&x);
          tc_free(&dx);
          tc_free(&dw);
          tc_free(&db);
        }
}

// Rounds |v| to |dtype| and returns the stored bits.
static uint32_t bits_in(int dtype, float v) {
  tc_tensor_t one = tc_make(dtype, 1, (int64_t)1);
  tc_set(&one.t, 0, v);
  uint32_t b = tc_bits(&one.t, 0);
  tc_free(&one);
  return b;
}

// Every element is tprt_dot_canonical over the contracted dimension (N for dgrad, M for wgrad
// and the bias, whose acc + v is bitwise fmaf(v, 1, acc)), rounded once; shapes with partial
// column blocks and contracted lengths that chunks do not divide.
TPRT_TEST(linear_grads_bits_match_canonical_definition) {
  const int64_t shapes[][3] = {{3, 9, 65}, {100, 4, 129}, {7, 1000, 2}, {33, 3, 64}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int c = 1; c <= 16; c *= 4) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        int dt = kDtypes[d];
        tc_tensor_t dy = tc_make(dt, 2, m, n), w = tc_make(dt, 2, n, k), x = tc_make(dt, 2, m, k);
        tc_tensor_t dx = tc_make(dt, 2, m, k), dw = tc_make(dt, 2, n, k), db = tc_make(dt, 1, n);
        tc_tensor_t dxp = tc_make(TPRT_DTYPE_F32, 2, m, k), dwp = tc_make(TPRT_DTYPE_F32, 2, n, k);
        tc_fill(&dy.t, 11 + s, -3.0, 3.0);
        tc_fill(&w.t, 12 + s, -3.0, 3.0);
        tc_fill(&x.t, 13 + s, -3.0, 3.0);
        TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx.t, c));
        TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dxp.t, c));
        TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dw.t, c));
        TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dwp.t, c));
        TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dy.t, &db.t, c));
        int64_t len = m > n ? m : n;
        float *va = malloc((size_t)len * sizeof(float)), *vb = malloc((size_t)len * sizeof(float));
        int64_t bad = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j) {
            for (int64_t r = 0; r < n; ++r) {
              va[r] = (float)tc_get(&dy.t, i * n + r);
              vb[r] = (float)tc_get(&w.t, r * k + j);
            }
            float dot = tprt_dot_canonical(va, vb, n, c);
            bad += tc_bits(&dx.t, i * k + j) != bits_in(dt, dot) || tc_bits(&dxp.t, i * k + j) != tprt_f32_bits(dot);
          }
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            for (int64_t r = 0; r < m; ++r) {
              va[r] = (float)tc_get(&dy.t, r * n + i);
              vb[r] = (float)tc_get(&x.t, r * k + j);
            }
            float dot = tprt_dot_canonical(va, vb, m, c);
            bad += tc_bits(&dw.t, i * k + j) != bits_in(dt, dot) || tc_bits(&dwp.t, i * k + j) != tprt_f32_bits(dot);
          }
          for (int64_t r = 0; r < m; ++r) vb[r] = 1.0f;
          bad += tc_bits(&db.t, i) != bits_in(dt, tprt_dot_canonical(va, vb, m, c));
        }
        if (bad)
          TPRT__FAIL("%s [%lld,%lld,%lld] chunks=%d: %lld elements differ from tprt_dot_canonical", tprt_dtype_name(dt),
                     (long long)m, (long long)n, (long long)k, c, (long long)bad);
        free(va);
        free(vb);
        tc_free(&dy);
        tc_free(&w);
        tc_free(&x);
        tc_free(&dx);
        tc_free(&dw);
        tc_free(&db);
        tc_free(&dxp);
        tc_free(&dwp);
      }
}

// The contracted values 1, 0, 2^-24, 2^-24, 0, 0, 0, 0 (times ±1): with chunks=4 (size 2) the
// partials are 1, 2^-23, 0, 0 and the tree gives 1 + 2^-23 = 0x3F800001; chunks=1 is the
// sequential chain, where each 2^-24 ties back to 1.0. Checked on each kernel's own contracted
// dimension: N for dgrad, M for wgrad and the bias.
TPRT_TEST(linear_grads_tree_order_exact_bits) {
  const float v[8] = {1.0f, 0.0f, 0x1p-24f, 0x1p-24f, 0, 0, 0, 0};
  tc_tensor_t dy_row = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)8),
              dy_col = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, (int64_t)1);
  tc_tensor_t pm = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, (int64_t)2);  // columns +1 and -1
  memcpy(dy_row.t.data, v, sizeof v);
  memcpy(dy_col.t.data, v, sizeof v);
  for (int i = 0; i < 8; ++i) {
    ((float*)pm.t.data)[2 * i] = 1.0f;
    ((float*)pm.t.data)[2 * i + 1] = -1.0f;
  }
  tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)2),
              dw = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)2), db = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  const uint32_t want[2][2] = {{0x3F800000u, 0xBF800000u}, {0x3F800001u, 0xBF800001u}};
  for (int tree = 0; tree < 2; ++tree) {
    int c = tree ? 4 : 1;
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy_row.t, &pm.t, &dx.t, c));
    TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy_col.t, &pm.t, &dw.t, c));
    TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dy_col.t, &db.t, c));
    for (int j = 0; j < 2; ++j) {
      TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, j), want[tree][j]);
      TPRT_EXPECT_EQ_BITS(tc_bits(&dw.t, j), want[tree][j]);
    }
    TPRT_EXPECT_EQ_BITS(tc_bits(&db.t, 0), want[tree][0]);
  }
  // The padding rule: every product -2^-200 rounds to -0, so full chunks give -0 partials and
  // -0 + -0 = -0; with 3 terms in 2 chunks the short chunk becomes +0 and the sum +0.
  for (int n = 3; n <= 4; ++n) {
    tc_tensor_t a = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)n),
                b = tc_make(TPRT_DTYPE_F32, 2, (int64_t)n, (int64_t)1);
    tc_tensor_t out = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)1);
    for (int i = 0; i < n; ++i) {
      ((float*)a.t.data)[i] = -0x1p-100f;
      ((float*)b.t.data)[i] = 0x1p-100f;
    }
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&a.t, &b.t, &out.t, 2));
    TPRT_EXPECT_EQ_BITS(tc_bits(&out.t, 0), n == 3 ? 0x00000000u : 0x80000000u);
    tprt_tensor_t at = a.t;  // the same values as a column: wgrad contracts over M
    at.dims[0] = n;
    at.dims[1] = 1;
    TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&at, &b.t, &out.t, 2));
    TPRT_EXPECT_EQ_BITS(tc_bits(&out.t, 0), n == 3 ? 0x00000000u : 0x80000000u);
    tc_free(&a);
    tc_free(&b);
    tc_free(&out);
  }
  tc_free(&dy_row);
  tc_free(&dy_col);
  tc_free(&pm);
  tc_free(&dx);
  tc_free(&dw);
  tc_free(&db);
}

TPRT_TEST(linear_grads_chunks_change_bits_deterministically) {
  int64_t m = 512, n = 512, k = 8;
  tc_tensor_t dy = tc_make(TPRT_DTYPE_F32, 2, m, n), w = tc_make(TPRT_DTYPE_F32, 2, n, k),
              x = tc_make(TPRT_DTYPE_F32, 2, m, k);
  tc_fill(&dy.t, 5, -1.0, 1.0);
  tc_fill(&w.t, 6, -1.0, 1.0);
  tc_fill(&x.t, 7, -1.0, 1.0);
  tc_tensor_t dx[3], dw[3], db[3];
  const int cs[3] = {1, 8, 8};
  for (int i = 0; i < 3; ++i) {
    dx[i] = tc_make(TPRT_DTYPE_F32, 2, m, k);
    dw[i] = tc_make(TPRT_DTYPE_F32, 2, n, k);
    db[i] = tc_make(TPRT_DTYPE_F32, 1, n);
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx[i].t, cs[i]));
    TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dw[i].t, cs[i]));
    TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dy.t, &db[i].t, cs[i]));
  }
  tc_tensor_t* all[3] = {dx, dw, db};
  const char* names[3] = {"dgrad", "wgrad", "bias_grad"};
  for (int t = 0; t < 3; ++t) {
    int64_t differ = 0, count = tprt_tensor_numel(&all[t][0].t);
    for (int64_t i = 0; i < count; ++i) differ += tc_bits(&all[t][0].t, i) != tc_bits(&all[t][1].t, i);
    printf("%s: chunks=1 and chunks=8 differ in %lld of %lld elements\n", names[t], (long long)differ,
           (long long)count);
    TPRT_EXPECT(differ > 0);
    TPRT_EXPECT(tc_same_bytes(&all[t][1].t, &all[t][2].t));
  }
  for (int i = 0; i < 3; ++i) {
    tc_free(&dx[i]);
    tc_free(&dw[i]);
    tc_free(&db[i]);
  }
  tc_free(&dy);
  tc_free(&w);
  tc_free(&x);
}

// A [rows, cols] block at (r0, c0) of a 2-D tensor, as a new tensor.
static tc_tensor_t block_of(const tprt_tensor_t* t, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  tc_tensor_t r = tc_make(t->dtype, 2, rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) tc_set(&r.t, i * cols + j, (float)tc_get(t, (r0 + i) * t->dims[1] + c0 + j));
  return r;
}

// Column-parallel dgrad (N sharded) and sequence-parallel wgrad / bias grad (M sharded): rank r
// of R computes its f32 partial with chunks/R; the top log2 R tree levels over the R partials
// give exactly the unsharded result, f32 or rounded.
TPRT_TEST(linear_grads_tp_decomposition_is_bitwise_equal) {
  const int chunks = 8;
  int64_t m = 8 * 7, n = 8 * 9, k = 70;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    tc_tensor_t dy = tc_make(dt, 2, m, n), w = tc_make(dt, 2, n, k), x = tc_make(dt, 2, m, k);
    tc_fill(&dy.t, 31, -1.0, 1.0);
    tc_fill(&w.t, 32, -1.0, 1.0);
    tc_fill(&x.t, 33, -1.0, 1.0);
    tc_tensor_t fdx = tc_make(dt, 2, m, k), fdw = tc_make(dt, 2, n, k), fdb = tc_make(dt, 1, n);
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &fdx.t, chunks));
    TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy.t, &x.t, &fdw.t, chunks));
    TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dy.t, &fdb.t, chunks));
    for (int ranks = 1; ranks <= chunks; ranks *= 2) {
      tc_tensor_t px[8], pw[8], pb[8];
      int64_t ns = n / ranks, ms = m / ranks;
      for (int r = 0; r < ranks; ++r) {
        tc_tensor_t dyc = block_of(&dy.t, 0, m, r * ns, ns), ws = block_of(&w.t, r * ns, ns, 0, k);
        tc_tensor_t dyr = block_of(&dy.t, r * ms, ms, 0, n), xs = block_of(&x.t, r * ms, ms, 0, k);
        px[r] = tc_make(TPRT_DTYPE_F32, 2, m, k);
        pw[r] = tc_make(TPRT_DTYPE_F32, 2, n, k);
        pb[r] = tc_make(TPRT_DTYPE_F32, 1, n);
        TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dyc.t, &ws.t, &px[r].t, chunks / ranks));
        TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dyr.t, &xs.t, &pw[r].t, chunks / ranks));
        TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dyr.t, &pb[r].t, chunks / ranks));
        tc_free(&dyc);
        tc_free(&ws);
        tc_free(&dyr);
        tc_free(&xs);
      }
      tc_tensor_t* parts[3] = {px, pw, pb};
      tc_tensor_t* full[3] = {&fdx, &fdw, &fdb};
      int64_t bad = 0;
      for (int q = 0; q < 3; ++q)
        for (int64_t i = 0; i < tprt_tensor_numel(&full[q]->t); ++i) {
          float p[8];
          for (int r = 0; r < ranks; ++r) p[r] = ((float*)parts[q][r].t.data)[i];
          bad += tc_bits(&full[q]->t, i) != bits_in(dt, tprt_kacc_tree(p, ranks));
        }
      if (bad) TPRT__FAIL("%s R=%d: %lld elements differ from R=1", tprt_dtype_name(dt), ranks, (long long)bad);
      for (int r = 0; r < ranks; ++r) {
        tc_free(&px[r]);
        tc_free(&pw[r]);
        tc_free(&pb[r]);
      }
    }
    tc_free(&dy);
    tc_free(&w);
    tc_free(&x);
    tc_free(&fdx);
    tc_free(&fdw);
    tc_free(&fdb);
  }
}

// ------------------------------------------------------------------------------------------------
// Grouped
// ------------------------------------------------------------------------------------------------

static tc_tensor_t make_sizes(int64_t count, const int64_t* v) {
  tc_tensor_t g = tc_make(TPRT_DTYPE_I64, 1, count);
  memcpy(g.t.data, v, (size_t)count * sizeof(int64_t));
  return g;
}

// Expert e's [N,K] matrix of w[E,N,K] as a 2-D view (no copy).
static tprt_tensor_t expert_view(const tprt_tensor_t* w, int64_t e) {
  tprt_tensor_t v = *w;
  v.rank = 2;
  v.dims[0] = w->dims[1];
  v.dims[1] = w->dims[2];
  v.data = (char*)w->data + tprt_dtype_bytes(w->dtype, e * w->dims[1] * w->dims[2]);
  return v;
}

// Rows [r0, r0+rows) of a 2-D tensor as a view.
static tprt_tensor_t rows_view(const tprt_tensor_t* t, int64_t r0, int64_t rows) {
  tprt_tensor_t v = *t;
  v.dims[0] = rows;
  v.data = (char*)t->data + tprt_dtype_bytes(t->dtype, r0 * t->dims[1]);
  return v;
}

// Two segments of capacity 6 for E=3 experts (T=12): segment 0 holds 2, 0, 3 rows and one
// padding row, segment 1 holds 1, 0, 2 rows and three padding rows. Padding rows of dy and x
// are NaN, so reading one would show. Expert 1 has no rows at all.
static const int64_t kSegSizes[6] = {2, 0, 3, 1, 0, 2};
static const int64_t kSegStart[6] = {0, 2, 2, 6, 7, 7};  // first global row of each (segment, expert)
static const int64_t kSegPad[2][2] = {{5, 1}, {9, 3}};   // (first row, count) of each segment's padding

static void poison_padding(tprt_tensor_t* t) {
  for (int sg = 0; sg < 2; ++sg)
    for (int64_t r = kSegPad[sg][0]; r < kSegPad[sg][0] + kSegPad[sg][1]; ++r)
      for (int64_t j = 0; j < t->dims[1]; ++j) tc_set(t, r * t->dims[1] + j, NAN);
}

TPRT_TEST(grouped_linear_dgrad_segments_and_padding) {
  int64_t t = 12, e = 3, n = 70, k = 9;
  tc_tensor_t g = make_sizes(6, kSegSizes);
  for (int d = 0; d < 3; ++d)
    for (int f32_out = 0; f32_out < 2; ++f32_out) {
      int dt = kDtypes[d], od = f32_out ? TPRT_DTYPE_F32 : dt;
      tc_tensor_t dy = tc_make(dt, 2, t, n), w = tc_make(dt, 3, e, n, k), dx = tc_make(od, 2, t, k);
      tc_fill(&dy.t, 41, -1.0, 1.0);
      tc_fill(&w.t, 42, -1.0, 1.0);
      poison_padding(&dy.t);
      memset(dx.t.data, 0xFF, tprt_tensor_bytes(&dx.t));  // padding rows must be overwritten
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g.t, &dx.t, 8));
      // Each run of real rows is linear_dgrad with its expert's w, bit for bit.
      for (int i = 0; i < 6; ++i) {
        int64_t rows = kSegSizes[i], r0 = kSegStart[i];
        if (!rows) continue;
        tprt_tensor_t dyv = rows_view(&dy.t, r0, rows), wv = expert_view(&w.t, i % 3);
        tc_tensor_t one = tc_make(od, 2, rows, k);
        TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dyv, &wv, &one.t, 8));
        tprt_tensor_t got = rows_view(&dx.t, r0, rows);
        TPRT_EXPECT(memcmp(got.data, one.t.data, tprt_tensor_bytes(&one.t)) == 0);
        tc_free(&one);
      }
      for (int sg = 0; sg < 2; ++sg)
        for (int64_t i = kSegPad[sg][0] * k; i < (kSegPad[sg][0] + kSegPad[sg][1]) * k; ++i)
          TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, i), 0);
      // And against float64 for the first segment's expert 2 (rows 2..4).
      double ref[3 * 9], mag[3 * 9];
      tprt_tensor_t dyv = rows_view(&dy.t, 2, 3), wv = expert_view(&w.t, 2), got = rows_view(&dx.t, 2, 3);
      ref_gemm(&dyv, n, 1, &wv, k, 3, k, n, ref, mag);
      tc_check_near("grouped dgrad vs f64", &got, ref, mag, tc_rtol(od));
      tc_free(&dy);
      tc_free(&w);
      tc_free(&dx);
    }
  tc_free(&g);
}

// Expert e's dw sums its rows of every segment as one sequence in increasing row order, so it
// is linear_wgrad on those rows gathered, and a segmented call equals the one-segment call on
// the compacted rows (expert parallelism does not change the bits). Experts without rows get +0.
TPRT_TEST(grouped_linear_wgrad_concatenates_segments) {
  int64_t t = 12, e = 3, n = 5, k = 70;
  tc_tensor_t g = make_sizes(6, kSegSizes);
  const int64_t compact_sizes[3] = {3, 0, 5};
  tc_tensor_t g1 = make_sizes(3, compact_sizes);
  for (int d = 0; d < 3; ++d)
    for (int f32_out = 0; f32_out < 2; ++f32_out)
      for (int c = 1; c <= 4; c *= 4) {
        int dt = kDtypes[d], od = f32_out ? TPRT_DTYPE_F32 : dt;
        tc_tensor_t dy = tc_make(dt, 2, t, n), x = tc_make(dt, 2, t, k), dw = tc_make(od, 3, e, n, k);
        tc_fill(&dy.t, 51, -1.0, 1.0);
        tc_fill(&x.t, 52, -1.0, 1.0);
        poison_padding(&dy.t);
        poison_padding(&x.t);
        memset(dw.t.data, 0xFF, tprt_tensor_bytes(&dw.t));
        TPRT_EXPECT_OK(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &g.t, &dw.t, c));
        // The compacted problem: expert 0's rows 0, 1, 6, then expert 2's rows 2, 3, 4, 7, 8.
        const int64_t order[8] = {0, 1, 6, 2, 3, 4, 7, 8};
        tc_tensor_t cdy = tc_make(dt, 2, (int64_t)8, n), cx = tc_make(dt, 2, (int64_t)8, k);
        for (int r = 0; r < 8; ++r) {
          memcpy((char*)cdy.t.data + tprt_dtype_bytes(dt, r * n), (char*)dy.t.data + tprt_dtype_bytes(dt, order[r] * n),
                 tprt_dtype_bytes(dt, n));
          memcpy((char*)cx.t.data + tprt_dtype_bytes(dt, r * k), (char*)x.t.data + tprt_dtype_bytes(dt, order[r] * k),
                 tprt_dtype_bytes(dt, k));
        }
        tc_tensor_t dw1 = tc_make(od, 3, e, n, k);
        TPRT_EXPECT_OK(tprt_cpu_grouped_linear_wgrad(&cdy.t, &cx.t, &g1.t, &dw1.t, c));
        TPRT_EXPECT(tc_same_bytes(&dw.t, &dw1.t));
        for (int i = 0; i < 3; ++i) {
          tprt_tensor_t got = expert_view(&dw.t, i);
          if (compact_sizes[i] == 0) {
            for (int64_t j = 0; j < n * k; ++j) TPRT_EXPECT_EQ_BITS(tc_bits(&got, j), 0);
            continue;
          }
          int64_t r0 = i == 0 ? 0 : 3, rows = compact_sizes[i];
          tprt_tensor_t dyv = rows_view(&cdy.t, r0, rows), xv = rows_view(&cx.t, r0, rows);
          tc_tensor_t one = tc_make(od, 2, n, k);
          TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dyv, &xv, &one.t, c));
          TPRT_EXPECT(memcmp(got.data, one.t.data, tprt_tensor_bytes(&one.t)) == 0);
          double ref[5 * 70], mag[5 * 70];
          ref_gemm(&dyv, 1, n, &xv, k, n, k, rows, ref, mag);
          tc_check_near("grouped wgrad vs f64", &got, ref, mag, tc_rtol(od));
          tc_free(&one);
        }
        tc_free(&dy);
        tc_free(&x);
        tc_free(&dw);
        tc_free(&dw1);
        tc_free(&cdy);
        tc_free(&cx);
      }
  tc_free(&g);
  tc_free(&g1);
}

// ------------------------------------------------------------------------------------------------
// Argument errors
// ------------------------------------------------------------------------------------------------

#define BAD(expr, text) TPRT_EXPECT_STATUS(expr, TPRT_STATUS_INVALID_ARGUMENT, text)

TPRT_TEST(linear_grads_invalid_arguments) {
  tc_tensor_t dy = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)3, (int64_t)4),
              w = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)6);
  tc_tensor_t w5 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)5, (int64_t)6),
              wf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)6);
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)3, (int64_t)6),
              x2 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)6);
  tc_tensor_t dx = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)3, (int64_t)6),
              dx5 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)3, (int64_t)5);
  tc_tensor_t dx16 = tc_make(TPRT_DTYPE_F16, 2, (int64_t)3, (int64_t)6),
              dw = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)6);
  tc_tensor_t dwt = tc_make(TPRT_DTYPE_F32, 2, (int64_t)6, (int64_t)4), db = tc_make(TPRT_DTYPE_F32, 1, (int64_t)4);
  tc_tensor_t db5 = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)5), i64 = tc_make(TPRT_DTYPE_I64, 2, (int64_t)3, (int64_t)4);
  BAD(tprt_cpu_linear_dgrad(NULL, &w.t, &dx.t, 8), "linear_dgrad: dy is NULL");
  BAD(tprt_cpu_linear_dgrad(&db.t, &w.t, &dx.t, 8),
      "linear_dgrad: dy must be a rank-2 bf16, f16 or f32 tensor; got [4] f32");
  BAD(tprt_cpu_linear_dgrad(&i64.t, &w.t, &dx.t, 8),
      "linear_dgrad: dy must be a rank-2 bf16, f16 or f32 tensor; got [3,4] i64");
  BAD(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx.t, 3), "linear_dgrad: chunks=3 must be a power of two in [1, 1024]");
  BAD(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx.t, 2048), "linear_dgrad: chunks=2048 must be a power of two in [1, 1024]");
  BAD(tprt_cpu_linear_dgrad(&dy.t, &wf.t, &dx.t, 8), "linear_dgrad: w must have dy's dtype bf16; got [4,6] f32");
  BAD(tprt_cpu_linear_dgrad(&dy.t, &w5.t, &dx.t, 8),
      "linear_dgrad: dy[M,N] and w[N,K] disagree on N: dy [3,4] bf16 has N=4, w [5,6] bf16 has N=5");
  BAD(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx5.t, 8),
      "linear_dgrad: dx must be [M,K] = [3,6] of dy's dtype bf16 (or f32); got [3,5] bf16");
  BAD(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx16.t, 8),
      "linear_dgrad: dx must be [M,K] = [3,6] of dy's dtype bf16 (or f32); got [3,6] f16");
  BAD(tprt_cpu_linear_wgrad(&dy.t, NULL, &dw.t, 8), "linear_wgrad: x is NULL");
  BAD(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dw.t, 0), "linear_wgrad: chunks=0 must be a power of two in [1, 1024]");
  BAD(tprt_cpu_linear_wgrad(&dy.t, &wf.t, &dw.t, 8), "linear_wgrad: x must have dy's dtype bf16; got [4,6] f32");
  BAD(tprt_cpu_linear_wgrad(&dy.t, &x2.t, &dw.t, 8),
      "linear_wgrad: dy[M,N] and x[M,K] disagree on M: dy [3,4] bf16 has M=3, x [2,6] bf16 has M=2");
  BAD(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dwt.t, 8),
      "linear_wgrad: dw must be [N,K] = [4,6] of dy's dtype bf16 (or f32); got [6,4] f32");
  BAD(tprt_cpu_linear_wgrad(&dy.t, &x.t, &db.t, 8),
      "linear_wgrad: dw must be a rank-2 bf16, f16 or f32 tensor; got [4] f32");
  BAD(tprt_cpu_bias_grad(&dy.t, NULL, 8), "bias_grad: db is NULL");
  BAD(tprt_cpu_bias_grad(&dy.t, &db5.t, 8),
      "bias_grad: db must be [N] = [4] of dy's dtype bf16 (or f32); got [5] bf16");
  BAD(tprt_cpu_bias_grad(&dy.t, &db.t, -8), "bias_grad: chunks=-8 must be a power of two in [1, 1024]");
  TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &dx.t, 8));
  TPRT_EXPECT_OK(tprt_cpu_linear_wgrad(&dy.t, &x.t, &dw.t, 1024));
  TPRT_EXPECT_OK(tprt_cpu_bias_grad(&dy.t, &db.t, 1));
  tc_tensor_t* all[] = {&dy, &w, &w5, &wf, &x, &x2, &dx, &dx5, &dx16, &dw, &dwt, &db, &db5, &i64};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

TPRT_TEST(grouped_linear_grads_invalid_arguments) {
  tc_tensor_t dy = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)6, (int64_t)4),
              w = tc_make(TPRT_DTYPE_BF16, 3, (int64_t)3, (int64_t)4, (int64_t)2);
  tc_tensor_t w5 = tc_make(TPRT_DTYPE_BF16, 3, (int64_t)3, (int64_t)5, (int64_t)2);
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)6, (int64_t)2),
              x7 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)7, (int64_t)2);
  tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)6, (int64_t)2),
              dx3 = tc_make(TPRT_DTYPE_F32, 2, (int64_t)6, (int64_t)3);
  tc_tensor_t dw = tc_make(TPRT_DTYPE_BF16, 3, (int64_t)3, (int64_t)4, (int64_t)2),
              dw2 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)2);
  tc_tensor_t dwb = tc_make(TPRT_DTYPE_BF16, 3, (int64_t)3, (int64_t)4, (int64_t)3);
  const int64_t ok[3] = {2, 1, 3}, bad_sum[3] = {2, 1, 2}, neg[3] = {2, 7, -3}, seg_over[6] = {2, 1, 1, 1, 1, 1},
                seg_neg[6] = {0, 1, 1, 1, 4, 0};
  tc_tensor_t g = make_sizes(3, ok), gsum = make_sizes(3, bad_sum), gneg = make_sizes(3, neg);
  tc_tensor_t gover = make_sizes(6, seg_over), gsneg = make_sizes(6, seg_neg), g4 = make_sizes(4, seg_over);
  tc_tensor_t g32 = tc_make(TPRT_DTYPE_I32, 1, (int64_t)3);
  tc_tensor_t g9 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)12);  // S=4 does not divide T=6
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, NULL, &dx.t, 8), "grouped_linear_dgrad: group_sizes is NULL");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g32.t, &dx.t, 8),
      "grouped_linear_dgrad: group_sizes must be a rank-1 i64 tensor; got [3] i32");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &x.t, &g.t, &dx.t, 8),
      "grouped_linear_dgrad: w must be a rank-3 bf16, f16 or f32 tensor; got [6,2] bf16");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g.t, &dx.t, 6),
      "grouped_linear_dgrad: chunks=6 must be a power of two in [1, 1024]");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w5.t, &g.t, &dx.t, 8),
      "grouped_linear_dgrad: dy[T,N] and w[E,N,K] disagree on N: dy [6,4] bf16 has N=4, w [3,5,2] bf16 has N=5");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g4.t, &dx.t, 8),
      "grouped_linear_dgrad: group_sizes must be [S*E] = S >= 1 segments of E=3 counts (w is [3,4,2] bf16); got [4] "
      "i64");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g9.t, &dx.t, 8),
      "grouped_linear_dgrad: T=6 rows are not divisible by S=4 segments (group_sizes is [12] i64, E=3)");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &gneg.t, &dx.t, 8),
      "grouped_linear_dgrad: group_sizes[1]=7 is outside [0, T=6]");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &gsum.t, &dx.t, 8),
      "grouped_linear_dgrad: group_sizes sum to 5 but there are T=6 rows");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &gsneg.t, &dx.t, 8),
      "grouped_linear_dgrad: group_sizes[4]=4 (segment 1, expert 1) is outside [0, T/S=3]");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &gover.t, &dx.t, 8),
      "grouped_linear_dgrad: segment 0 holds 4 rows but has capacity 3 (T=6 rows in S=2 segments)");
  BAD(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g.t, &dx3.t, 8),
      "grouped_linear_dgrad: dx must be [T,K] = [6,2] of dy's dtype bf16 (or f32); got [6,3] f32");
  TPRT_EXPECT_OK(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g.t, &dx.t, 8));
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &x7.t, &g.t, &dw.t, 8),
      "grouped_linear_wgrad: dy[T,N] and x[T,K] disagree on T: dy [6,4] bf16 has T=6, x [7,2] bf16 has T=7");
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &w.t, &g.t, &dw.t, 8),
      "grouped_linear_wgrad: x must be a rank-2 bf16, f16 or f32 tensor; got [3,4,2] bf16");
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &g.t, &dw2.t, 8),
      "grouped_linear_wgrad: dw must be a rank-3 bf16, f16 or f32 tensor; got [4,2] bf16");
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &g.t, &dwb.t, 8),
      "grouped_linear_wgrad: dw must be [E,N,K] = [3,4,2] of dy's dtype bf16 (or f32); got [3,4,3] bf16");
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &g4.t, &dw.t, 8),
      "grouped_linear_wgrad: group_sizes must be [S*E] = S >= 1 segments of E=3 counts (dw is [3,4,2] bf16); got [4] "
      "i64");
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &gover.t, &dw.t, 8),
      "grouped_linear_wgrad: segment 0 holds 4 rows but has capacity 3 (T=6 rows in S=2 segments)");
  BAD(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &g.t, &dw.t, 5),
      "grouped_linear_wgrad: chunks=5 must be a power of two");
  TPRT_EXPECT_OK(tprt_cpu_grouped_linear_wgrad(&dy.t, &x.t, &g.t, &dw.t, 8));
  tc_tensor_t* all[] = {&dy,  &w, &w5,   &x,    &x7,    &dx,    &dx3, &dw,  &dw2,
                        &dwb, &g, &gsum, &gneg, &gover, &gsneg, &g4,  &g32, &g9};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
