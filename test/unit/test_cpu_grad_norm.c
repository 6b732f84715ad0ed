// Unit tests of tprt_cpu_rmsnorm_grad and tprt_cpu_layernorm_grad: float64 analytic references
// checked against central finite differences of the float64 forward, the kernels against them,
// the documented f32 order bit for bit (dgamma and dbeta as tprt_dot_canonical over the rows),
// the tree order of the parameter gradients on a hand-made case, chunks, the sequence-parallel
// decomposition, batch invariance of dx, and argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// sum_m sum_h dy·y for the float64 forward (layernorm when |b|), with x, gamma and beta given
// as doubles; the finite differences differentiate this.
static double ref_loss(const double* x, const double* g, const double* b, const double* dy, int64_t m, int64_t h,
                       double eps) {
  double loss = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    double mean = 0.0, ss = 0.0;
    if (b) {
      for (int64_t j = 0; j < h; ++j) mean += x[i * h + j];
      mean /= (double)h;
    }
    for (int64_t j = 0; j < h; ++j) ss += (x[i * h + j] - mean) * (x[i * h + j] - mean);
    double r = 1.0 / sqrt(ss / (double)h + eps);
    for (int64_t j = 0; j < h; ++j) loss += dy[i * h + j] * ((x[i * h + j] - mean) * r * g[j] + (b ? b[j] : 0.0));
  }
  return loss;
}

// The analytic gradients in float64: dx = r·(g - mean(g) - xhat·mean(g·xhat)) with g = dy·gamma
// (no mean(g) term for RMSNorm), dgamma = Σ dy·xhat, dbeta = Σ dy. mag gets the magnitude of the
// terms of dx for the tolerance.
static void ref_norm_grad(const double* x, const double* gam, bool ln, const double* dy, int64_t m, int64_t h,
                          double eps, double* dx, double* mag, double* dg, double* db) {
  for (int64_t j = 0; j < h; ++j) dg[j] = db[j] = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    const double *xr = x + i * h, *dr = dy + i * h;
    double mean = 0.0, ss = 0.0, sg = 0.0, sgx = 0.0, sabs = 0.0;
    if (ln) {
      for (int64_t j = 0; j < h; ++j) mean += xr[j];
      mean /= (double)h;
    }
    for (int64_t j = 0; j < h; ++j) ss += (xr[j] - mean) * (xr[j] - mean);
    double r = 1.0 / sqrt(ss / (double)h + eps);
    for (int64_t j = 0; j < h; ++j) {
      double xh = (xr[j] - mean) * r, g = dr[j] * gam[j];
      sg += g;
      sgx += g * xh;
      sabs += fabs(g) * (1.0 + fabs(xh));
      dg[j] += dr[j] * xh;
      db[j] += dr[j];
    }
    for (int64_t j = 0; j < h; ++j) {
      double xh = (xr[j] - mean) * r, g = dr[j] * gam[j];
      dx[i * h + j] = r * (g - (ln ? sg / (double)h : 0.0) - xh * sgx / (double)h);
      mag[i * h + j] = r * (fabs(g) + (1.0 + fabs(xh)) * sabs / (double)h);
    }
  }
}

static double* tensor_to_f64(const tprt_tensor_t* t) {
  int64_t n = tprt_tensor_numel(t);
  double* v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  for (int64_t i = 0; i < n; ++i) v[i] = tc_get(t, i);
  return v;
}

TPRT_TEST(norm_grad_reference_matches_finite_differences) {
  int64_t m = 3, h = 37;
  const double eps = 1e-5, step = 0x1p-18;
  uint64_t s = 5;
  double x[3 * 37], dy[3 * 37], g[37], b[37], dx[3 * 37], mag[3 * 37], dg[37], db[37];
  for (int i = 0; i < m * h; ++i) {
    x[i] = tc_uniform(&s, -2.0, 3.0);
    dy[i] = tc_uniform(&s, -1.0, 1.0);
  }
  for (int j = 0; j < h; ++j) {
    g[j] = tc_uniform(&s, 0.5, 1.5);
    b[j] = tc_uniform(&s, -0.5, 0.5);
  }
  for (int ln = 0; ln < 2; ++ln) {
    ref_norm_grad(x, g, ln, dy, m, h, eps, dx, mag, dg, db);
    double* params[3] = {x, g, b};
    double* grads[3] = {dx, dg, db};
    int64_t counts[3] = {m * h, h, h};
    for (int p = 0; p < (ln ? 3 : 2); ++p)
      for (int64_t i = 0; i < counts[p]; ++i) {
        double keep = params[p][i];
        params[p][i] = keep + step;
        double up = ref_loss(x, g, ln ? b : NULL, dy, m, h, eps);
        params[p][i] = keep - step;
        double down = ref_loss(x, g, ln ? b : NULL, dy, m, h, eps);
        params[p][i] = keep;
        TPRT_EXPECT_NEAR(grads[p][i], (up - down) / (2 * step), 1e-7, 1e-6);
      }
  }
}

TPRT_TEST(norm_grad_matches_f64_reference) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {2, 256}, {5, 300}, {2, 1000}, {0, 4}};
  for (int d = 0; d < 3; ++d)
    for (int gd = 0; gd < 3; ++gd)
      for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
        for (int ln = 0; ln < 2; ++ln)
          for (int f32_params = 0; f32_params < 2; ++f32_params) {
            int64_t m = shapes[sh][0], h = shapes[sh][1];
            int dt = kDtypes[d], pt = f32_params ? TPRT_DTYPE_F32 : kDtypes[gd];
            tc_tensor_t x = tc_make(dt, 2, m, h), dy = tc_make(dt, 2, m, h), dx = tc_make(dt, 2, m, h);
            tc_tensor_t g = tc_make(kDtypes[gd], 1, h), dg = tc_make(pt, 1, h), db = tc_make(pt, 1, h);
            tc_fill(&x.t, 3 + sh, -2.0, 3.0);
            tc_fill(&dy.t, 4 + sh, -1.0, 1.0);
            tc_fill(&g.t, 5 + sh, 0.5, 1.5);
            if (ln)
              TPRT_EXPECT_OK(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, &db.t, 1e-5f, 8));
            else
              TPRT_EXPECT_OK(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, 1e-5f, 8));
            double *xv = tensor_to_f64(&x.t), *dyv = tensor_to_f64(&dy.t), *gv = tensor_to_f64(&g.t);
            double *rdx = calloc((size_t)(m * h + 1), sizeof(double)),
                   *mag = calloc((size_t)(m * h + 1), sizeof(double));
            double *rdg = calloc((size_t)h, sizeof(double)), *rdb = calloc((size_t)h, sizeof(double));
            double *mg = calloc((size_t)h, sizeof(double)), *mb = calloc((size_t)h, sizeof(double));
            ref_norm_grad(xv, gv, ln, dyv, m, h, (double)1e-5f, rdx, mag, rdg, rdb);
            // Parameter gradients sum m terms |dy·xhat| <= |dy|·sqrt(H) each.
            for (int64_t j = 0; j < h; ++j)
              for (int64_t i = 0; i < m; ++i) {
                mg[j] += fabs(dyv[i * h + j]) * 2.0 * sqrt((double)h);
                mb[j] += fabs(dyv[i * h + j]);
              }
            char what[128];
            snprintf(what, sizeof what, "%s x %s gamma %s grads %s [%lld,%lld]", ln ? "layernorm" : "rmsnorm",
                     tprt_dtype_name(dt), tprt_dtype_name(kDtypes[gd]), tprt_dtype_name(pt), (long long)m,
                     (long long)h);
            char sub[160];
            // dx cancels (exactly, for H = 1): allow 1e-6 of the terms' magnitude on top of the
            // dtype's relative tolerance, since tc_check_near scales by rtol·(|ref| + scale).
            for (int64_t i = 0; i < m * h; ++i) mag[i] *= 1e-6 / tc_rtol(dt);
            snprintf(sub, sizeof sub, "dx %s", what);
            tc_check_near(sub, &dx.t, rdx, mag, tc_rtol(dt));
            snprintf(sub, sizeof sub, "dgamma %s", what);
            tc_check_near(sub, &dg.t, rdg, pt == TPRT_DTYPE_F32 ? mg : NULL, tc_rtol(pt));
            if (ln) {
              snprintf(sub, sizeof sub, "dbeta %s", what);
              tc_check_near(sub, &db.t, rdb, pt == TPRT_DTYPE_F32 ? mb : NULL, tc_rtol(pt));
            }
            free(xv);
            free(dyv);
            free(gv);
            free(rdx);
            free(mag);
            free(rdg);
            free(rdb);
            free(mg);
            free(mb);
            tc_free(&x);
            tc_free(&dy);
            tc_free(&dx);
            tc_free(&g);
            tc_free(&dg);
            tc_free(&db);
          }
}

// The canonical row reduction of a dot product, written independently: lane j accumulates
// fmaf(a, b, lane) over j, j+256, ...; then the in-warp and cross-warp trees.
static float doc_row_dot(const float* a, const float* b, int64_t n) {
  float lanes[256] = {0};
  for (int64_t i = 0; i < n; ++i) lanes[i % 256] = fmaf(a[i], b[i], lanes[i % 256]);
  return tprt_row_tree(lanes);
}

// docs/numerics.md's backward order, written out with the header's primitives; dgamma and dbeta
// are tprt_dot_canonical over the M rows of each column.
TPRT_TEST(norm_grad_follows_documented_order_bitwise) {
  int64_t m = 37, h = 777;
  const int chunks = 8;
  float eps = 1e-6f;
  for (int d = 0; d < 3; ++d)
    for (int ln = 0; ln < 2; ++ln) {
      int dt = kDtypes[d];
      tc_tensor_t x = tc_make(dt, 2, m, h), dy = tc_make(dt, 2, m, h), dx = tc_make(dt, 2, m, h),
                  want = tc_make(dt, 2, m, h);
      tc_tensor_t g = tc_make(TPRT_DTYPE_BF16, 1, h), dg = tc_make(TPRT_DTYPE_F32, 1, h),
                  db = tc_make(TPRT_DTYPE_F32, 1, h);
      tc_fill(&x.t, 8, -4.0, 6.0);
      tc_fill(&dy.t, 9, -1.0, 1.0);
      tc_fill(&g.t, 10, 0.5, 1.5);
      if (ln)
        TPRT_EXPECT_OK(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, &db.t, eps, chunks));
      else
        TPRT_EXPECT_OK(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, eps, chunks));
      float *xh = malloc((size_t)(m * h) * sizeof(float)), *dyf = malloc((size_t)(m * h) * sizeof(float));
      float row[777], gg[777], col_a[37], col_b[37], ones[37];
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < h; ++j) {
          row[j] = (float)tc_get(&x.t, i * h + j);
          dyf[i * h + j] = (float)tc_get(&dy.t, i * h + j);
        }
        if (ln) {
          float mean = tprt_row_sum(row, h) / (float)h;
          for (int64_t j = 0; j < h; ++j) row[j] = row[j] - mean;
        }
        float r = 1.0f / sqrtf(tprt_row_sumsq(row, h) / (float)h + eps);
        for (int64_t j = 0; j < h; ++j) {
          xh[i * h + j] = row[j] * r;
          gg[j] = dyf[i * h + j] * (float)tc_get(&g.t, j);
        }
        float a = ln ? tprt_row_sum(gg, h) / (float)h : 0.0f;
        float c = doc_row_dot(gg, xh + i * h, h) / (float)h;
        for (int64_t j = 0; j < h; ++j) tc_set(&want.t, i * h + j, fmaf(-xh[i * h + j], c, ln ? gg[j] - a : gg[j]) * r);
      }
      int64_t bad = !tc_same_bytes(&dx.t, &want.t);
      for (int64_t i = 0; i < m; ++i) ones[i] = 1.0f;
      for (int64_t j = 0; j < h; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          col_a[i] = dyf[i * h + j];
          col_b[i] = xh[i * h + j];
        }
        bad += tc_bits(&dg.t, j) != tprt_f32_bits(tprt_dot_canonical(col_a, col_b, m, chunks));
        if (ln) bad += tc_bits(&db.t, j) != tprt_f32_bits(tprt_dot_canonical(col_a, ones, m, chunks));
      }
      if (bad)
        TPRT__FAIL("%s %s: %lld differences from the documented order", ln ? "layernorm" : "rmsnorm",
                   tprt_dtype_name(dt), (long long)bad);
      free(xh);
      free(dyf);
      tc_free(&x);
      tc_free(&dy);
      tc_free(&dx);
      tc_free(&want);
      tc_free(&g);
      tc_free(&dg);
      tc_free(&db);
    }
}

// dgamma and dbeta reduce over M by the K tree: rows with xhat = ±1 exactly (RMSNorm of a
// one-element row of 1; LayerNorm of the row [1, -1]; eps far below half an ulp of 1) and the
// column dy = 1, 0, 2^-24, 2^-24, 0, 0, 0, 0 give 1 + 2^-23 with chunks=4 (partials 1, 2^-23, 0,
// 0) and 1.0 with chunks=1 (each 2^-24 ties back to 1).
TPRT_TEST(norm_grad_param_tree_order_exact_bits) {
  const float col[8] = {1.0f, 0.0f, 0x1p-24f, 0x1p-24f, 0, 0, 0, 0};
  for (int ln = 0; ln < 2; ++ln) {
    int64_t h = ln ? 2 : 1;
    tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, h), dy = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, h);
    tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, h), g = tc_make(TPRT_DTYPE_F32, 1, h);
    tc_tensor_t dg = tc_make(TPRT_DTYPE_F32, 1, h), db = tc_make(TPRT_DTYPE_F32, 1, h);
    for (int64_t i = 0; i < 8; ++i) {
      tc_set(&x.t, i * h, 1.0f);
      if (ln) tc_set(&x.t, i * h + 1, -1.0f);
      tc_set(&dy.t, i * h, col[i]);
    }
    for (int64_t j = 0; j < h; ++j) tc_set(&g.t, j, 1.0f);
    for (int tree = 0; tree < 2; ++tree) {
      int c = tree ? 4 : 1;
      uint32_t want = tree ? 0x3F800001u : 0x3F800000u;
      if (ln) {
        TPRT_EXPECT_OK(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, &db.t, 1e-30f, c));
        TPRT_EXPECT_EQ_BITS(tc_bits(&db.t, 0), want);
        TPRT_EXPECT_EQ_BITS(tc_bits(&db.t, 1), 0);
      } else {
        TPRT_EXPECT_OK(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, 1e-30f, c));
      }
      TPRT_EXPECT_EQ_BITS(tc_bits(&dg.t, 0), want);
    }
    tc_free(&x);
    tc_free(&dy);
    tc_free(&dx);
    tc_free(&g);
    tc_free(&dg);
    tc_free(&db);
  }
}

// chunks=1 and chunks=8 give different dgamma bits, each deterministic; dx does not depend on
// chunks at all; with M sharded over R ranks (sequence parallelism), each rank's f32 partial
// with chunks/R combined by the top tree levels is the unsharded result bit for bit; and a row's
// dx does not depend on the other rows.
TPRT_TEST(norm_grad_chunks_sequence_parallel_and_batch_invariance) {
  int64_t m = 512, h = 65;
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, m, h), dy = tc_make(TPRT_DTYPE_BF16, 2, m, h),
              g = tc_make(TPRT_DTYPE_F32, 1, h);
  tc_fill(&x.t, 21, -3.0, 3.0);
  tc_fill(&dy.t, 22, -1.0, 1.0);
  tc_fill(&g.t, 23, 0.5, 1.5);
  for (int ln = 0; ln < 2; ++ln) {
    tc_tensor_t dx[3], dg[3], db[3];
    const int cs[3] = {1, 8, 8};
    for (int i = 0; i < 3; ++i) {
      dx[i] = tc_make(TPRT_DTYPE_BF16, 2, m, h);
      dg[i] = tc_make(TPRT_DTYPE_F32, 1, h);
      db[i] = tc_make(TPRT_DTYPE_F32, 1, h);
      TPRT_EXPECT_OK(ln ? tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx[i].t, &dg[i].t, &db[i].t, 1e-5f, cs[i])
                        : tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx[i].t, &dg[i].t, 1e-5f, cs[i]));
    }
    int64_t differ = 0;
    for (int64_t j = 0; j < h; ++j) differ += tc_bits(&dg[0].t, j) != tc_bits(&dg[1].t, j);
    printf("%s dgamma: chunks=1 and chunks=8 differ in %lld of %lld elements\n", ln ? "layernorm" : "rmsnorm",
           (long long)differ, (long long)h);
    TPRT_EXPECT(differ > 0);
    TPRT_EXPECT(tc_same_bytes(&dg[1].t, &dg[2].t));
    TPRT_EXPECT(tc_same_bytes(&dx[0].t, &dx[1].t));
    if (ln) TPRT_EXPECT(tc_same_bytes(&db[1].t, &db[2].t));
    for (int ranks = 2; ranks <= 8; ranks *= 2) {
      tc_tensor_t pg[8], pb[8];
      int64_t ms = m / ranks;
      for (int r = 0; r < ranks; ++r) {
        tprt_tensor_t xs = x.t, dys = dy.t;
        xs.dims[0] = dys.dims[0] = ms;
        xs.data = (uint16_t*)x.t.data + r * ms * h;
        dys.data = (uint16_t*)dy.t.data + r * ms * h;
        tc_tensor_t dxs = tc_make(TPRT_DTYPE_BF16, 2, ms, h);
        pg[r] = tc_make(TPRT_DTYPE_F32, 1, h);
        pb[r] = tc_make(TPRT_DTYPE_F32, 1, h);
        TPRT_EXPECT_OK(ln ? tprt_cpu_layernorm_grad(&xs, &g.t, &dys, &dxs.t, &pg[r].t, &pb[r].t, 1e-5f, 8 / ranks)
                          : tprt_cpu_rmsnorm_grad(&xs, &g.t, &dys, &dxs.t, &pg[r].t, 1e-5f, 8 / ranks));
        // Batch invariance: the shard's dx rows are the full call's rows.
        TPRT_EXPECT(memcmp(dxs.t.data, (uint16_t*)dx[1].t.data + r * ms * h, (size_t)(ms * h) * 2) == 0);
        tc_free(&dxs);
      }
      int64_t bad = 0;
      for (int64_t j = 0; j < h; ++j) {
        float p[8], q[8];
        for (int r = 0; r < ranks; ++r) {
          p[r] = ((float*)pg[r].t.data)[j];
          q[r] = ((float*)pb[r].t.data)[j];
        }
        bad += tprt_f32_bits(tprt_kacc_tree(p, ranks)) != tc_bits(&dg[1].t, j);
        if (ln) bad += tprt_f32_bits(tprt_kacc_tree(q, ranks)) != tc_bits(&db[1].t, j);
      }
      if (bad)
        TPRT__FAIL("%s R=%d: %lld parameter gradients differ", ln ? "layernorm" : "rmsnorm", ranks, (long long)bad);
      for (int r = 0; r < ranks; ++r) {
        tc_free(&pg[r]);
        tc_free(&pb[r]);
      }
    }
    for (int i = 0; i < 3; ++i) {
      tc_free(&dx[i]);
      tc_free(&dg[i]);
      tc_free(&db[i]);
    }
  }
  tc_free(&x);
  tc_free(&dy);
  tc_free(&g);
}

// The acc forms (cpu_accumulate.c) are the op, then tprt_cpu_add of acc: bitwise, every dtype; a
// bad acc is named.
TPRT_TEST(acc_forms_are_the_op_then_the_add) {
  const int dtypes[] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};
  for (int i = 0; i < 3; ++i) {
    int d = dtypes[i];
    tc_tensor_t x = tc_make(d, 2, (int64_t)24, (int64_t)40), dy = tc_make(d, 2, (int64_t)24, (int64_t)40);
    tc_tensor_t acc = tc_make(d, 2, (int64_t)24, (int64_t)40), g = tc_make(d, 1, (int64_t)40);
    tc_tensor_t dx = tc_make(d, 2, (int64_t)24, (int64_t)40), want = tc_make(d, 2, (int64_t)24, (int64_t)40);
    tc_tensor_t dg = tc_make(TPRT_DTYPE_F32, 1, (int64_t)40), dg2 = tc_make(TPRT_DTYPE_F32, 1, (int64_t)40);
    tc_tensor_t w = tc_make(d, 2, (int64_t)40, (int64_t)40);
    tc_fill(&x.t, 1 + i, -2, 2), tc_fill(&dy.t, 2 + i, -1, 1), tc_fill(&acc.t, 3 + i, -1, 1);
    tc_fill(&g.t, 4 + i, 0.5, 1.5), tc_fill(&w.t, 5 + i, -1, 1);
    TPRT_EXPECT_OK(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &want.t, &dg.t, 1e-5f, 8));
    TPRT_EXPECT_OK(tprt_cpu_add(&acc.t, &want.t, &want.t));
    TPRT_EXPECT_OK(tprt_cpu_rmsnorm_grad_acc(&x.t, &g.t, &dy.t, &acc.t, &dx.t, &dg2.t, 1e-5f, 8));
    TPRT_EXPECT(tc_same_bytes(&dx.t, &want.t));
    TPRT_EXPECT(tc_same_bytes(&dg.t, &dg2.t));
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_segmented(&dy.t, &w.t, &want.t, 4, 1, 1));
    TPRT_EXPECT_OK(tprt_cpu_add(&acc.t, &want.t, &want.t));
    TPRT_EXPECT_OK(tprt_cpu_linear_dgrad_acc(&dy.t, &w.t, &acc.t, &dx.t, 4, 1, 1));
    TPRT_EXPECT(tc_same_bytes(&dx.t, &want.t));
    {  // embedding_grad: 24 tokens over 50 rows (most rows untouched: acc + 0.0, so -0.0 becomes +0.0)
      tc_tensor_t ids = tc_make(TPRT_DTYPE_I32, 1, (int64_t)24), tab = tc_make(TPRT_DTYPE_F32, 2, (int64_t)50, (int64_t)40);
      tc_tensor_t tacc = tc_make(TPRT_DTYPE_F32, 2, (int64_t)50, (int64_t)40), tw = tc_make(TPRT_DTYPE_F32, 2, (int64_t)50, (int64_t)40);
      for (int64_t t = 0; t < 24; ++t) ((int32_t*)ids.t.data)[t] = (int32_t)((t * 7) % 11);
      tc_fill(&tacc.t, 6 + i, -1, 1);
      ((float*)tacc.t.data)[45 * 40] = -0.0f;
      TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ids.t, &dy.t, &tw.t, 0, 50, 4));
      TPRT_EXPECT_OK(tprt_cpu_add(&tacc.t, &tw.t, &tw.t));
      TPRT_EXPECT_OK(tprt_cpu_embedding_grad_acc(&ids.t, &dy.t, &tacc.t, &tab.t, 0, 50, 4));
      TPRT_EXPECT(tc_same_bytes(&tab.t, &tw.t));
      TPRT_EXPECT_EQ_BITS(tc_bits(&tab.t, 45 * 40), 0);
      tc_free(&ids), tc_free(&tab), tc_free(&tacc), tc_free(&tw);
    }
    if (d == TPRT_DTYPE_BF16) {
      TPRT_EXPECT_STATUS(tprt_cpu_rmsnorm_grad_acc(&x.t, &g.t, &dy.t, &g.t, &dx.t, &dg2.t, 1e-5f, 8),
                         TPRT_STATUS_INVALID_ARGUMENT,
                         "rmsnorm_grad: acc must have the result's shape and dtype [24,40] bf16; got [40] bf16");
      TPRT_EXPECT_STATUS(tprt_cpu_linear_dgrad_acc(&dy.t, &w.t, NULL, &dx.t, 4, 1, 1), TPRT_STATUS_INVALID_ARGUMENT,
                         "linear_dgrad: acc must have the result's shape and dtype [24,40] bf16; got (none)");
    }
    tc_tensor_t* all[] = {&x, &dy, &acc, &g, &dx, &want, &dg, &dg2, &w};
    for (size_t j = 0; j < sizeof all / sizeof all[0]; ++j) tc_free(all[j]);
  }
}

TPRT_TEST(norm_grad_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8),
              dy = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t dyf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)8),
              dx = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)8);
  tc_tensor_t dx7 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)7), g = tc_make(TPRT_DTYPE_F16, 1, (int64_t)8);
  tc_tensor_t g7 = tc_make(TPRT_DTYPE_F16, 1, (int64_t)7), dg = tc_make(TPRT_DTYPE_F16, 1, (int64_t)8);
  tc_tensor_t dgb = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)8), dg7 = tc_make(TPRT_DTYPE_F32, 1, (int64_t)7);
  tc_tensor_t db = tc_make(TPRT_DTYPE_F32, 1, (int64_t)8);
#define BAD(expr, text) TPRT_EXPECT_STATUS(expr, TPRT_STATUS_INVALID_ARGUMENT, text)
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, NULL, &dx.t, &dg.t, 1e-5f, 8), "rmsnorm_grad: dy is NULL");
  BAD(tprt_cpu_rmsnorm_grad(&g.t, &g.t, &dy.t, &dx.t, &dg.t, 1e-5f, 8),
      "rmsnorm_grad: x must be a rank-2 bf16, f16 or f32 tensor; got [8] f16");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, 1e-5f, 12),
      "rmsnorm_grad: chunks=12 must be a power of two in [1, 1024]");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g7.t, &dy.t, &dx.t, &dg.t, 1e-5f, 8),
      "rmsnorm_grad: gamma must be [H] = [8] (x is [4,8] bf16); got [7] f16");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dyf.t, &dx.t, &dg.t, 1e-5f, 8),
      "rmsnorm_grad: dy must have x's shape and dtype [4,8] bf16; got [4,8] f32");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx7.t, &dg.t, 1e-5f, 8),
      "rmsnorm_grad: dx must have x's shape and dtype [4,8] bf16; got [4,7] bf16");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dgb.t, 1e-5f, 8),
      "rmsnorm_grad: dgamma must be [H] = [8] of gamma's dtype f16 (or f32); got [8] bf16");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg7.t, 1e-5f, 8),
      "rmsnorm_grad: dgamma must be [H] = [8] of gamma's dtype f16 (or f32); got [7] f32");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, NULL, 1e-5f, 8), "rmsnorm_grad: dgamma is NULL");
  BAD(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, -1.0f, 8), "rmsnorm_grad: eps=-1 must be finite and > 0");
  BAD(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, NULL, 1e-5f, 8), "layernorm_grad: dbeta is NULL");
  BAD(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, &dg7.t, 1e-5f, 8),
      "layernorm_grad: dbeta must be [H] = [8] of gamma's dtype f16 (or f32); got [7] f32");
  BAD(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, &db.t, INFINITY, 8),
      "layernorm_grad: eps=inf must be finite and > 0");
  TPRT_EXPECT_OK(tprt_cpu_rmsnorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, 1e-5f, 8));
  TPRT_EXPECT_OK(tprt_cpu_layernorm_grad(&x.t, &g.t, &dy.t, &dx.t, &dg.t, &db.t, 1e-5f, 1));
  tc_tensor_t* all[] = {&x, &dy, &dyf, &dx, &dx7, &g, &g7, &dg, &dgb, &dg7, &db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
