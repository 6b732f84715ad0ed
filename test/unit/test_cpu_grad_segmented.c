// Unit tests of the segmented dgrad kernels, tprt_cpu_linear_dgrad_segmented and
// tprt_cpu_grouped_linear_dgrad_segmented: segments=1 is the plain kernel, every element is
// tprt_dot_canonical over N permuted into the segmented order (and near float64), hand-made cases
// where the segmented order changes the bits, the GLU gate/up stride-2 tensor-parallel
// decomposition (per-rank partials + tree over ranks, and the all-gathered layout with blocks=R)
// for the plain and the grouped kernel, and the argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// Rounds |v| to |dtype| and returns the stored bits.
static uint32_t bits_in(int dtype, float v) {
  tc_tensor_t one = tc_make(dtype, 1, (int64_t)1);
  tc_set(&one.t, 0, v);
  uint32_t b = tc_bits(&one.t, 0);
  tc_free(&one);
  return b;
}

// The indices idx[0..count) of dimension |axis| of a rank-2 or rank-3 tensor, as a new tensor
// (bytes copied, so NaN padding stays NaN).
static tc_tensor_t gather(const tprt_tensor_t* t, int axis, const int64_t* idx, int64_t count) {
  int64_t outer = 1, inner = 1, n = t->dims[axis];
  for (int i = 0; i < axis; ++i) outer *= t->dims[i];
  for (int i = axis + 1; i < t->rank; ++i) inner *= t->dims[i];
  tc_tensor_t r = t->rank == 3 ? tc_make(t->dtype, 3, t->dims[0], count, t->dims[2])
                  : axis == 0  ? tc_make(t->dtype, 2, count, t->dims[1])
                               : tc_make(t->dtype, 2, t->dims[0], count);
  size_t row = tprt_dtype_bytes(t->dtype, inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < count; ++c)
      memcpy((char*)r.t.data + (size_t)(o * count + c) * row, (const char*)t->data + (size_t)(o * n + idx[c]) * row,
             row);
  return r;
}

// The stride-2 (GLU gate/up) shard of rank r of R over N = 2F: gate rows [r·F/R, (r+1)·F/R),
// then up rows [F + r·F/R, F + (r+1)·F/R); 2F/R indices.
static void shard_index(int64_t f, int ranks, int r, int64_t* idx) {
  int64_t fs = f / ranks;
  for (int64_t i = 0; i < fs; ++i) {
    idx[i] = r * fs + i;
    idx[fs + i] = f + r * fs + i;
  }
}

// The segmented order written position by position: position p is in chunk c = p / (N/chunks),
// segment j = q / run of that chunk's q = p % (N/chunks) and run element q % run; segments == 1
// is the identity.
static void ref_order(int64_t n, int chunks, int segments, int blocks, int64_t* ord) {
  for (int64_t p = 0; p < n; ++p) ord[p] = p;
  if (segments == 1) return;
  int64_t len = n / chunks, run = len / segments, per = chunks / blocks, bsz = n / blocks, ssz = bsz / segments;
  for (int64_t p = 0; p < n; ++p) {
    int64_t c = p / len, q = p % len;
    ord[p] = (c / per) * bsz + (q / run) * ssz + (c % per) * run + q % run;
  }
}

// Counts the elements of dx (rounded) and dxp (f32) that are not tprt_dot_canonical over N in
// the order |ord|; checks dx against float64 within the dtype's tolerance.
static int64_t check_definition(const char* what, const tprt_tensor_t* dy, const tprt_tensor_t* w, const int64_t* ord,
                                int chunks, const tprt_tensor_t* dx, const tprt_tensor_t* dxp) {
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1], bad = 0;
  float *va = malloc((size_t)(n + 1) * sizeof(float)), *vb = malloc((size_t)(n + 1) * sizeof(float));
  double *ref = malloc((size_t)(m * k + 1) * sizeof(double)), *mag = malloc((size_t)(m * k + 1) * sizeof(double));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double acc = 0.0, sum = 0.0;
      for (int64_t p = 0; p < n; ++p) {
        va[p] = (float)tc_get(dy, i * n + ord[p]);
        vb[p] = (float)tc_get(w, ord[p] * k + j);
        acc += (double)va[p] * vb[p];
        sum += fabs((double)va[p] * vb[p]);
      }
      ref[i * k + j] = acc;
      mag[i * k + j] = sum;
      float dot = tprt_dot_canonical(va, vb, n, chunks);
      bad += tc_bits(dx, i * k + j) != bits_in(dx->dtype, dot) || tc_bits(dxp, i * k + j) != tprt_f32_bits(dot);
    }
  tc_check_near(what, dx, ref, mag, tc_rtol(dx->dtype));
  tc_check_near(what, dxp, ref, mag, tc_rtol(TPRT_DTYPE_F32));
  free(va);
  free(vb);
  free(ref);
  free(mag);
  return bad;
}

TPRT_TEST(dgrad_segmented_one_segment_is_plain) {
  const int64_t shapes[][3] = {{3, 9, 65}, {7, 1000, 2}, {5, 64, 70}, {2, 0, 3}, {4, 6, 0}, {0, 8, 4}};
  for (int d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int c = 1; c <= 8; c *= 8)
        for (int f32_out = 0; f32_out < 2; ++f32_out) {
          int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
          int dt = kDtypes[d], od = f32_out ? TPRT_DTYPE_F32 : dt;
          tc_tensor_t dy = tc_make(dt, 2, m, n), w = tc_make(dt, 2, n, k), plain = tc_make(od, 2, m, k);
          tc_fill(&dy.t, 1 + s, -2.0, 2.0);
          tc_fill(&w.t, 100 + s, -1.0, 1.0);
          TPRT_EXPECT_OK(tprt_cpu_linear_dgrad(&dy.t, &w.t, &plain.t, c));
          const int blocks[3] = {1, 3, 16};  // ignored with one segment, even when chunks % blocks != 0
          for (int b = 0; b < 3; ++b) {
            tc_tensor_t dx = tc_make(od, 2, m, k);
            TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &dx.t, c, 1, blocks[b]));
            if (!tc_same_bytes(&dx.t, &plain.t))
              TPRT__FAIL("%s [%lld,%lld,%lld] chunks=%d blocks=%d out %s: segments=1 differs from plain",
                         tprt_dtype_name(dt), (long long)m, (long long)n, (long long)k, c, blocks[b],
                         tprt_dtype_name(od));
            tc_free(&dx);
          }
          tc_free(&dy);
          tc_free(&w);
          tc_free(&plain);
        }
}

// Every element is tprt_dot_canonical over N permuted into the segmented order (chunks all
// full), rounded once, and near the float64 sum; partial 64-column blocks (K=67).
TPRT_TEST(dgrad_segmented_bits_match_definition_and_f64) {
  const int cfg[][4] = {{8, 2, 1, 64}, {8, 2, 4, 64}, {8, 2, 8, 64},  {4, 3, 2, 48},
                        {2, 4, 1, 16}, {1, 2, 1, 6},  {16, 2, 8, 96}, {4, 2, 2, 0}};
  int64_t m = 5, k = 67;
  for (int d = 0; d < 3; ++d)
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; ++i) {
      int c = cfg[i][0], sg = cfg[i][1], b = cfg[i][2], dt = kDtypes[d];
      int64_t n = cfg[i][3];
      tc_tensor_t dy = tc_make(dt, 2, m, n), w = tc_make(dt, 2, n, k);
      tc_tensor_t dx = tc_make(dt, 2, m, k), dxp = tc_make(TPRT_DTYPE_F32, 2, m, k);
      tc_fill(&dy.t, 7 + i, -3.0, 3.0);
      tc_fill(&w.t, 70 + i, -3.0, 3.0);
      memset(dx.t.data, 0xFF, tprt_tensor_bytes(&dx.t));
      TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &dx.t, c, sg, b));
      TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &dxp.t, c, sg, b));
      int64_t* ord = malloc((size_t)(n + 1) * sizeof(int64_t));
      ref_order(n, c, sg, b, ord);
      char what[96];
      snprintf(what, sizeof what, "%s N=%lld (chunks,segments,blocks)=(%d,%d,%d)", tprt_dtype_name(dt), (long long)n, c,
               sg, b);
      int64_t bad = check_definition(what, &dy.t, &w.t, ord, c, &dx.t, &dxp.t);
      if (bad) TPRT__FAIL("%s: %lld elements differ from the segmented definition", what, (long long)bad);
      free(ord);
      tc_free(&dy);
      tc_free(&w);
      tc_free(&dx);
      tc_free(&dxp);
    }
}

// dy rows against w = [+1 | -1] columns, f32: returns the two bits of dx[0, :].
static void pm_dgrad(const float* v, int64_t n, int c, int sg, int b, uint32_t out[2]) {
  tc_tensor_t dy = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, n), w = tc_make(TPRT_DTYPE_F32, 2, n, (int64_t)2);
  tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)2);
  memcpy(dy.t.data, v, (size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    ((float*)w.t.data)[2 * i] = 1.0f;
    ((float*)w.t.data)[2 * i + 1] = -1.0f;
  }
  TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &dx.t, c, sg, b));
  out[0] = tc_bits(&dx.t, 0);
  out[1] = tc_bits(&dx.t, 1);
  tc_free(&dy);
  tc_free(&w);
  tc_free(&dx);
}

// v = 1, 2^-24, -1, 2^-24 with chunks=2: plain chunks (1 + 2^-24 = 1 by ties-to-even) and
// (-1 + 2^-24) give 2^-24; the segmented chunks (1 - 1) and (2^-24 + 2^-24) give 2^-23; blocks ==
// chunks is the plain order again. Over N=8 with chunks=4, segments=2, blocks 1 and 2 pair
// different elements and differ too. Then random data: the orders change bits, deterministically.
TPRT_TEST(dgrad_segmented_order_exact_bits) {
  const float a[4] = {1.0f, 0x1p-24f, -1.0f, 0x1p-24f};
  const float b8[8] = {1.0f, 0.0f, 0x1p-24f, 0.0f, -1.0f, 0.0f, 0x1p-24f, 0.0f};
  const uint32_t lo[2] = {0x33800000u, 0xB3800000u}, hi[2] = {0x34000000u, 0xB4000000u};
  const struct {
    const float* v;
    int64_t n;
    int c, sg, b;
    const uint32_t* want;
  } cases[] = {{a, 4, 2, 1, 1, lo},  {a, 4, 2, 2, 1, hi},  {a, 4, 2, 2, 2, lo}, {b8, 8, 4, 1, 1, lo},
               {b8, 8, 4, 2, 1, hi}, {b8, 8, 4, 2, 2, lo}, {b8, 8, 4, 2, 4, lo}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    uint32_t got[2];
    pm_dgrad(cases[i].v, cases[i].n, cases[i].c, cases[i].sg, cases[i].b, got);
    for (int j = 0; j < 2; ++j)
      if (got[j] != cases[i].want[j])
        TPRT__FAIL("case %zu (chunks,segments,blocks)=(%d,%d,%d) column %d: 0x%08x, want 0x%08x", i, cases[i].c,
                   cases[i].sg, cases[i].b, j, (unsigned)got[j], (unsigned)cases[i].want[j]);
  }
  int64_t m = 64, n = 512, k = 8;
  tc_tensor_t dy = tc_make(TPRT_DTYPE_F32, 2, m, n), w = tc_make(TPRT_DTYPE_F32, 2, n, k);
  tc_fill(&dy.t, 5, -1.0, 1.0);
  tc_fill(&w.t, 6, -1.0, 1.0);
  tc_tensor_t dx[3];
  for (int i = 0; i < 3; ++i) {
    dx[i] = tc_make(TPRT_DTYPE_F32, 2, m, k);
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &dx[i].t, 8, i ? 2 : 1, 1));
  }
  int64_t differ = 0;
  for (int64_t i = 0; i < m * k; ++i) differ += tc_bits(&dx[0].t, i) != tc_bits(&dx[1].t, i);
  printf("segments=1 and segments=2 (chunks=8) differ in %lld of %lld elements\n", (long long)differ,
         (long long)(m * k));
  TPRT_EXPECT(differ > 0);
  TPRT_EXPECT(tc_same_bytes(&dx[1].t, &dx[2].t));
  for (int i = 0; i < 3; ++i) tc_free(&dx[i]);
  tc_free(&dy);
  tc_free(&w);
}

// The plain and the grouped kernel behind one signature (g unused by the plain one).
typedef tprt_status_t (*dgrad_fn_t)(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* g,
                                    tprt_tensor_t* dx, int chunks, int segments, int blocks);
static tprt_status_t plain_fn(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* g,
                              tprt_tensor_t* dx, int chunks, int segments, int blocks) {
  (void)g;
  return tprt_cpu_linear_dgrad_segmented(dy, w, dx, chunks, segments, blocks);
}
static tprt_status_t grouped_fn(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* g,
                                tprt_tensor_t* dx, int chunks, int segments, int blocks) {
  return tprt_cpu_grouped_linear_dgrad_segmented(dy, w, g, dx, chunks, segments, blocks);
}

// dy[T,2F], w[...,2F,K]: rank r of R (R = 1..chunks) computes its f32 partial with
// (chunks/R, 2, 1) on its stride-2 shard; the tree over the R partials is the unsharded
// (chunks, 2, 1) result, f32 or rounded; the gathered layout [g0 u0 g1 u1 ...] with blocks=R is
// it bytewise. Returns the full rounded result (for the caller's own checks).
static tc_tensor_t check_tp(const char* what, dgrad_fn_t fn, const tprt_tensor_t* dy, const tprt_tensor_t* w,
                            const tprt_tensor_t* g, int64_t f, int chunks) {
  int dt = dy->dtype, wax = w->rank - 2;
  int64_t t = dy->dims[0], k = w->dims[w->rank - 1];
  tc_tensor_t full = tc_make(dt, 2, t, k), fullp = tc_make(TPRT_DTYPE_F32, 2, t, k);
  TPRT_EXPECT_OK(fn(dy, w, g, &full.t, chunks, 2, 1));
  TPRT_EXPECT_OK(fn(dy, w, g, &fullp.t, chunks, 2, 1));
  int64_t* idx = malloc((size_t)(2 * f) * sizeof(int64_t));
  for (int ranks = 1; ranks <= chunks; ranks *= 2) {
    tc_tensor_t part[16];
    int64_t ns = 2 * f / ranks;
    for (int r = 0; r < ranks; ++r) {
      shard_index(f, ranks, r, idx);
      tc_tensor_t dys = gather(dy, 1, idx, ns), ws = gather(w, wax, idx, ns);
      part[r] = tc_make(TPRT_DTYPE_F32, 2, t, k);
      TPRT_EXPECT_OK(fn(&dys.t, &ws.t, g, &part[r].t, chunks / ranks, 2, 1));
      tc_free(&dys);
      tc_free(&ws);
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < t * k; ++i) {
      float p[16];
      for (int r = 0; r < ranks; ++r) p[r] = ((float*)part[r].t.data)[i];
      float s = tprt_kacc_tree(p, ranks);
      bad += tc_bits(&full.t, i) != bits_in(dt, s) || tc_bits(&fullp.t, i) != tprt_f32_bits(s);
    }
    if (bad) TPRT__FAIL("%s R=%d: %lld elements of the tree over ranks differ from R=1", what, ranks, (long long)bad);
    for (int r = 0; r < ranks; ++r) shard_index(f, ranks, r, idx + r * ns);
    tc_tensor_t dyg = gather(dy, 1, idx, 2 * f), wg = gather(w, wax, idx, 2 * f);
    tc_tensor_t gx = tc_make(dt, 2, t, k), gxp = tc_make(TPRT_DTYPE_F32, 2, t, k);
    TPRT_EXPECT_OK(fn(&dyg.t, &wg.t, g, &gx.t, chunks, 2, ranks));
    TPRT_EXPECT_OK(fn(&dyg.t, &wg.t, g, &gxp.t, chunks, 2, ranks));
    if (!tc_same_bytes(&gx.t, &full.t) || !tc_same_bytes(&gxp.t, &fullp.t))
      TPRT__FAIL("%s R=%d: the gathered layout with blocks=R differs from the unsharded result", what, ranks);
    for (int r = 0; r < ranks; ++r) tc_free(&part[r]);
    tc_free(&dyg);
    tc_free(&wg);
    tc_free(&gx);
    tc_free(&gxp);
  }
  free(idx);
  tc_free(&fullp);
  return full;
}

TPRT_TEST(dgrad_segmented_tp_decomposition_is_bitwise_equal) {
  int64_t m = 7, f = 32, k = 70;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    tc_tensor_t dy = tc_make(dt, 2, m, 2 * f), w = tc_make(dt, 2, 2 * f, k);
    tc_fill(&dy.t, 31, -1.0, 1.0);
    tc_fill(&w.t, 32, -1.0, 1.0);
    char what[64];
    snprintf(what, sizeof what, "linear_dgrad_segmented %s", tprt_dtype_name(dt));
    tc_tensor_t full = check_tp(what, plain_fn, &dy.t, &w.t, NULL, f, 8);
    tc_free(&full);
    tc_free(&dy);
    tc_free(&w);
  }
}

// E=3 experts, one segment {3,0,4} (T=7) and two segments of capacity 5 {2,0,3 | 1,0,2} (rows 8
// and 9 padding, NaN in dy): the TP decomposition as above; every run of real rows is
// linear_dgrad_segmented with its expert's w; padding rows are +0; segments=1 is the plain kernel.
TPRT_TEST(grouped_dgrad_segmented_tp_decomposition_and_segments) {
  const int64_t sizes1[3] = {3, 0, 4}, sizes2[6] = {2, 0, 3, 1, 0, 2};
  const int64_t start1[3] = {0, 3, 3}, start2[6] = {0, 2, 2, 5, 6, 6};
  const struct {
    const int64_t *sizes, *start;
    int64_t count, t, pad0, pad1;
  } cfg[2] = {{sizes1, start1, 3, 7, 7, 7}, {sizes2, start2, 6, 10, 8, 10}};
  int64_t e = 3, f = 32, k = 70;
  for (int q = 0; q < 2; ++q)
    for (int d = 0; d < 3; ++d) {
      int dt = kDtypes[d];
      int64_t t = cfg[q].t;
      tc_tensor_t g = tc_make(TPRT_DTYPE_I64, 1, cfg[q].count);
      memcpy(g.t.data, cfg[q].sizes, (size_t)cfg[q].count * sizeof(int64_t));
      tc_tensor_t dy = tc_make(dt, 2, t, 2 * f), w = tc_make(dt, 3, e, 2 * f, k);
      tc_fill(&dy.t, 41 + q, -1.0, 1.0);
      tc_fill(&w.t, 42 + q, -1.0, 1.0);
      for (int64_t i = cfg[q].pad0 * 2 * f; i < cfg[q].pad1 * 2 * f; ++i) tc_set(&dy.t, i, NAN);
      char what[64];
      snprintf(what, sizeof what, "grouped_linear_dgrad_segmented S=%d %s", q + 1, tprt_dtype_name(dt));
      tc_tensor_t full = check_tp(what, grouped_fn, &dy.t, &w.t, &g.t, f, 8);
      for (int64_t i = 0; i < cfg[q].count; ++i) {
        int64_t rows = cfg[q].sizes[i], r0 = cfg[q].start[i];
        if (!rows) continue;
        tprt_tensor_t dyv = dy.t, wv = w.t, got = full.t;
        dyv.dims[0] = got.dims[0] = rows;
        dyv.data = (char*)dy.t.data + tprt_dtype_bytes(dt, r0 * 2 * f);
        got.data = (char*)full.t.data + tprt_dtype_bytes(dt, r0 * k);
        wv.rank = 2;
        wv.dims[0] = 2 * f;
        wv.dims[1] = k;
        wv.data = (char*)w.t.data + tprt_dtype_bytes(dt, (i % e) * 2 * f * k);
        tc_tensor_t one = tc_make(dt, 2, rows, k);
        TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dyv, &wv, &one.t, 8, 2, 1));
        if (memcmp(got.data, one.t.data, tprt_tensor_bytes(&one.t)) != 0)
          TPRT__FAIL("%s: expert %lld's rows differ from linear_dgrad_segmented", what, (long long)(i % e));
        tc_free(&one);
      }
      tc_tensor_t dx = tc_make(dt, 2, t, k), plain = tc_make(dt, 2, t, k);
      memset(dx.t.data, 0xFF, tprt_tensor_bytes(&dx.t));
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear_dgrad_segmented(&dy.t, &w.t, &g.t, &dx.t, 8, 2, 4));
      for (int64_t i = cfg[q].pad0 * k; i < cfg[q].pad1 * k; ++i) TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, i), 0);
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear_dgrad(&dy.t, &w.t, &g.t, &plain.t, 8));
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear_dgrad_segmented(&dy.t, &w.t, &g.t, &dx.t, 8, 1, 3));
      TPRT_EXPECT(tc_same_bytes(&dx.t, &plain.t));
      tc_free(&dx);
      tc_free(&plain);
      tc_free(&full);
      tc_free(&dy);
      tc_free(&w);
      tc_free(&g);
    }
}

// The exact messages of the segmented-order checks (after the shared chunks check), for both
// kernels; every error leaves dx untouched (validation first); segments=1 ignores blocks >= 1.
TPRT_TEST(dgrad_segmented_invalid_arguments) {
  tc_tensor_t dy = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)6, (int64_t)12),
              w = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)12, (int64_t)2);
  tc_tensor_t we = tc_make(TPRT_DTYPE_BF16, 3, (int64_t)3, (int64_t)12, (int64_t)2);
  tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)6, (int64_t)2), g = tc_make(TPRT_DTYPE_I64, 1, (int64_t)3);
  const int64_t sizes[3] = {2, 1, 3};
  memcpy(g.t.data, sizes, sizeof sizes);
  memset(dx.t.data, 0xAB, tprt_tensor_bytes(&dx.t));
  const char* seg = "a segmented contraction needs N % (chunks*segments) == 0 and chunks % blocks == 0; got ";
  const struct {
    int c, sg, b;
    const char* msg;  // NULL: accepted
  } cases[] = {{8, 2, 1, "N=12, chunks=8, segments=2, blocks=1"},
               {4, 3, 3, "N=12, chunks=4, segments=3, blocks=3"},
               {2, 2, 4, "N=12, chunks=2, segments=2, blocks=4"},
               {1, 5, 1, "N=12, chunks=1, segments=5, blocks=1"},
               {2, 0, 1, "segments=0 and blocks=1 must be >= 1"},
               {2, -1, 1, "segments=-1 and blocks=1 must be >= 1"},
               {2, 2, 0, "segments=2 and blocks=0 must be >= 1"},
               {8, 1, 0, "segments=1 and blocks=0 must be >= 1"},
               {2, 2, -2, "segments=2 and blocks=-2 must be >= 1"},
               {3, 0, 0, "chunks=3 must be a power of two in [1, 1024]"},
               {4, 3, 2, NULL},
               {2, 3, 1, NULL},
               {8, 1, 3, NULL},
               {2, 6, 2, NULL},
               {1, 12, 1, NULL}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int grouped = 0; grouped < 2; ++grouped) {
      const char* op = grouped ? "grouped_linear_dgrad" : "linear_dgrad";
      tprt_status_t s =
          grouped
              ? tprt_cpu_grouped_linear_dgrad_segmented(&dy.t, &we.t, &g.t, &dx.t, cases[i].c, cases[i].sg, cases[i].b)
              : tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &dx.t, cases[i].c, cases[i].sg, cases[i].b);
      char want[256];
      bool is_seg = cases[i].msg && strncmp(cases[i].msg, "N=", 2) == 0;
      snprintf(want, sizeof want, "%s: %s%s", op, is_seg ? seg : "", cases[i].msg ? cases[i].msg : "");
      if (!cases[i].msg) {
        TPRT_EXPECT_OK(s);
        memset(dx.t.data, 0xAB, tprt_tensor_bytes(&dx.t));
        continue;
      }
      if (!s) {
        TPRT__FAIL("%s (%d,%d,%d) succeeded; expected \"%s\"", op, cases[i].c, cases[i].sg, cases[i].b, want);
        continue;
      }
      TPRT_EXPECT_EQ_I64(tprt_status_code(s), TPRT_STATUS_INVALID_ARGUMENT);
      TPRT_EXPECT_STREQ(tprt_status_message(s), want);
      tprt_status_free(s);
      for (int64_t j = 0; j < 12; ++j) TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, j), 0xABABABABu);
    }
  tc_free(&dy);
  tc_free(&w);
  tc_free(&we);
  tc_free(&dx);
  tc_free(&g);
}
