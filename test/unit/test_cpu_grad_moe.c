// Unit tests of the MoE backward kernels: tprt_cpu_moe_unpermute_grad, tprt_cpu_moe_permute_grad
// and tprt_cpu_moe_route_grad. Float64 references (for route: checked against central finite
// differences of the float64 forward), the documented f32 order bit for bit, slot order and
// placement invariance, and argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// A routed problem: indices[T,k] from tprt_cpu_moe_route on random logits, then moe_permute of
// x[T,H] into y[T*k,H] with its row_map, and f32 weights.
typedef struct {
  tc_tensor_t logits, indices, weights, x, y, sizes, row_map;
} routed_t;

static routed_t make_routed(int dtype, int64_t t, int64_t e, int64_t k, int64_t h, uint64_t seed) {
  routed_t r;
  r.logits = tc_make(TPRT_DTYPE_F32, 2, t, e);
  r.indices = tc_make(TPRT_DTYPE_I32, 2, t, k);
  r.weights = tc_make(TPRT_DTYPE_F32, 2, t, k);
  r.x = tc_make(dtype, 2, t, h);
  r.y = tc_make(dtype, 2, t * k, h);
  r.sizes = tc_make(TPRT_DTYPE_I64, 1, e);
  r.row_map = tc_make(TPRT_DTYPE_I32, 1, t * k);
  tc_fill(&r.logits.t, seed, -3.0, 3.0);
  tc_fill(&r.x.t, seed + 1, -2.0, 2.0);
  TPRT_EXPECT_OK(tprt_cpu_moe_route(&r.logits.t, &r.indices.t, &r.weights.t, (int)k, true));
  TPRT_EXPECT_OK(tprt_cpu_moe_permute(&r.x.t, &r.indices.t, &r.y.t, &r.sizes.t, &r.row_map.t));
  return r;
}

static void free_routed(routed_t* r) {
  tc_free(&r->logits);
  tc_free(&r->indices);
  tc_free(&r->weights);
  tc_free(&r->x);
  tc_free(&r->y);
  tc_free(&r->sizes);
  tc_free(&r->row_map);
}

static int32_t map_at(const tprt_tensor_t* t, int64_t i) { return ((const int32_t*)t->data)[i]; }

// The row holding slot s (the inverse of row_map).
static int64_t row_of(const tprt_tensor_t* row_map, int64_t s) {
  for (int64_t r = 0; r < row_map->dims[0]; ++r)
    if (map_at(row_map, r) == s) return r;
  return -1;
}

// The canonical row reduction of a dot product, written independently.
static float doc_row_dot(const float* a, const float* b, int64_t n) {
  float lanes[256] = {0};
  for (int64_t i = 0; i < n; ++i) lanes[i % 256] = fmaf(a[i], b[i], lanes[i % 256]);
  return tprt_row_tree(lanes);
}

TPRT_TEST(moe_unpermute_grad_values_and_bits) {
  const int64_t shapes[][4] = {{5, 8, 2, 300}, {7, 4, 3, 33}, {1, 3, 1, 1}};  // T, E, k, H
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh) {
      int64_t t = shapes[sh][0], e = shapes[sh][1], k = shapes[sh][2], h = shapes[sh][3];
      int dt = kDtypes[d];
      routed_t r = make_routed(dt, t, e, k, h, 10 + sh);
      tc_tensor_t dout = tc_make(dt, 2, t, h), dy = tc_make(dt, 2, t * k, h), dw = tc_make(TPRT_DTYPE_F32, 2, t, k);
      tc_tensor_t want_dy = tc_make(dt, 2, t * k, h);
      tc_fill(&dout.t, 20 + sh, -1.0, 1.0);
      TPRT_EXPECT_OK(tprt_cpu_moe_unpermute_grad(&dout.t, &r.y.t, &r.row_map.t, &r.weights.t, &dy.t, &dw.t));
      float* a = malloc((size_t)h * sizeof(float));
      float* b = malloc((size_t)h * sizeof(float));
      for (int64_t tok = 0; tok < t; ++tok)
        for (int64_t j = 0; j < k; ++j) {
          int64_t row = row_of(&r.row_map.t, tok * k + j);
          float w = (float)tc_get(&r.weights.t, tok * k + j);
          double ref = 0.0, mag = 0.0;
          for (int64_t c = 0; c < h; ++c) {
            a[c] = (float)tc_get(&r.y.t, row * h + c);
            b[c] = (float)tc_get(&dout.t, tok * h + c);
            tc_set(&want_dy.t, row * h + c, w * b[c]);
            ref += (double)a[c] * b[c];
            mag += fabs((double)a[c] * b[c]);
          }
          TPRT_EXPECT_EQ_BITS(tc_bits(&dw.t, tok * k + j), tprt_f32_bits(doc_row_dot(a, b, h)));
          TPRT_EXPECT_NEAR(tc_get(&dw.t, tok * k + j), ref, 1e-6 * mag, 0.0);
        }
      TPRT_EXPECT(tc_same_bytes(&dy.t, &want_dy.t));
      free(a);
      free(b);
      tc_free(&dout);
      tc_free(&dy);
      tc_free(&dw);
      tc_free(&want_dy);
      free_routed(&r);
    }
}

// The gradient does not depend on where the rows were placed: reversing the rows of y (and
// row_map) moves the rows of dy the same way and leaves dweights bit for bit.
TPRT_TEST(moe_unpermute_grad_is_placement_invariant) {
  int64_t t = 6, e = 5, k = 2, h = 513;
  routed_t r = make_routed(TPRT_DTYPE_BF16, t, e, k, h, 40);
  int64_t rows = t * k;
  tc_tensor_t y2 = tc_make(TPRT_DTYPE_BF16, 2, rows, h), map2 = tc_make(TPRT_DTYPE_I32, 1, rows);
  for (int64_t i = 0; i < rows; ++i) {
    memcpy((uint16_t*)y2.t.data + i * h, (uint16_t*)r.y.t.data + (rows - 1 - i) * h, (size_t)h * 2);
    ((int32_t*)map2.t.data)[i] = map_at(&r.row_map.t, rows - 1 - i);
  }
  tc_tensor_t dout = tc_make(TPRT_DTYPE_BF16, 2, t, h);
  tc_fill(&dout.t, 41, -1.0, 1.0);
  tc_tensor_t dy1 = tc_make(TPRT_DTYPE_BF16, 2, rows, h), dy2 = tc_make(TPRT_DTYPE_BF16, 2, rows, h);
  tc_tensor_t dw1 = tc_make(TPRT_DTYPE_F32, 2, t, k), dw2 = tc_make(TPRT_DTYPE_F32, 2, t, k);
  TPRT_EXPECT_OK(tprt_cpu_moe_unpermute_grad(&dout.t, &r.y.t, &r.row_map.t, &r.weights.t, &dy1.t, &dw1.t));
  TPRT_EXPECT_OK(tprt_cpu_moe_unpermute_grad(&dout.t, &y2.t, &map2.t, &r.weights.t, &dy2.t, &dw2.t));
  TPRT_EXPECT(tc_same_bytes(&dw1.t, &dw2.t));
  for (int64_t i = 0; i < rows; ++i)
    TPRT_EXPECT(memcmp((uint16_t*)dy2.t.data + i * h, (uint16_t*)dy1.t.data + (rows - 1 - i) * h, (size_t)h * 2) == 0);
  tc_tensor_t* all[] = {&y2, &map2, &dout, &dy1, &dy2, &dw1, &dw2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
  free_routed(&r);
}

TPRT_TEST(moe_permute_grad_values_and_bits) {
  const int64_t shapes[][4] = {{5, 8, 2, 30}, {7, 4, 3, 1}, {3, 3, 3, 64}};  // T, E, k, H
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh) {
      int64_t t = shapes[sh][0], e = shapes[sh][1], k = shapes[sh][2], h = shapes[sh][3];
      int dt = kDtypes[d];
      routed_t r = make_routed(dt, t, e, k, h, 50 + sh);
      tc_tensor_t dy = tc_make(dt, 2, t * k, h), dx = tc_make(dt, 2, t, h), want = tc_make(dt, 2, t, h);
      tc_fill(&dy.t, 60 + sh, -1.0, 1.0);
      TPRT_EXPECT_OK(tprt_cpu_moe_permute_grad(&dy.t, &r.row_map.t, &dx.t, (int)k));
      double* ref = calloc((size_t)(t * h), sizeof(double));
      double* mag = calloc((size_t)(t * h), sizeof(double));
      for (int64_t tok = 0; tok < t; ++tok)
        for (int64_t c = 0; c < h; ++c) {
          float acc = 0.0f;
          for (int64_t j = 0; j < k; ++j) {
            double v = tc_get(&dy.t, row_of(&r.row_map.t, tok * k + j) * h + c);
            acc = acc + (float)v;
            ref[tok * h + c] += v;
            mag[tok * h + c] += fabs(v);
          }
          tc_set(&want.t, tok * h + c, acc);
        }
      TPRT_EXPECT(tc_same_bytes(&dx.t, &want.t));
      tc_check_near("moe_permute_grad vs f64", &dx.t, ref, mag, tc_rtol(dt));
      free(ref);
      free(mag);
      tc_free(&dy);
      tc_free(&dx);
      tc_free(&want);
      free_routed(&r);
    }
}

// The sum follows slot order, not row order: slots 0, 1, 2 of the one token hold 1, 2^-24, 2^-24
// in rows 2, 1, 0. ((0 + 1) + 2^-24) + 2^-24 = 1.0 (each addition ties to even), where the row
// order would give 1 + 2^-23. A single slot's -0 becomes +0 (the sum starts at +0).
TPRT_TEST(moe_permute_grad_slot_order_exact_bits) {
  tc_tensor_t dy = tc_make(TPRT_DTYPE_F32, 2, (int64_t)3, (int64_t)2), map = tc_make(TPRT_DTYPE_I32, 1, (int64_t)3);
  tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)2);
  const float v[6] = {0x1p-24f, -0.0f, 0x1p-24f, -0.0f, 1.0f, -0.0f};
  const int32_t m[3] = {2, 1, 0};
  memcpy(dy.t.data, v, sizeof v);
  memcpy(map.t.data, m, sizeof m);
  TPRT_EXPECT_OK(tprt_cpu_moe_permute_grad(&dy.t, &map.t, &dx.t, 3));
  TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, 0), 0x3F800000u);
  TPRT_EXPECT_EQ_BITS(tc_bits(&dx.t, 1), 0x00000000u);
  tc_free(&dy);
  tc_free(&map);
  tc_free(&dx);
}

// ------------------------------------------------------------------------------------------------
// moe_route_grad
// ------------------------------------------------------------------------------------------------

// The forward's weights for a fixed selection, in float64.
static void ref_route_weights(const double* l, int64_t e, const int32_t* sel, int64_t k, bool norm, double* w) {
  double mx = l[0], z = 0.0, t = 0.0;
  for (int64_t i = 1; i < e; ++i) mx = fmax(mx, l[i]);
  for (int64_t i = 0; i < e; ++i) z += exp(l[i] - mx);
  for (int64_t j = 0; j < k; ++j) t += w[j] = exp(l[sel[j]] - mx) / z;
  if (norm)
    for (int64_t j = 0; j < k; ++j) w[j] /= t;
}

// The analytic gradient in float64, from the chain rule through the softmax (and the
// renormalization), written without the kernel's simplification: dp = ∂L/∂p, then
// dl_i = p_i·(dp_i - Σ_l p_l·dp_l).
// mag (may be NULL) gets the magnitude of the terms, p_i·(|dp_i| + Σ_l p_l·|dp_l|) with |dp| the
// sum of its terms' magnitudes, for the tolerance.
static void ref_route_grad(const double* l, int64_t e, const int32_t* sel, int64_t k, bool norm, const float* dw,
                           double* dl, double* mag) {
  double mx = l[0], z = 0.0, t = 0.0, dot = 0.0, dotm = 0.0;
  double p[64], dp[64] = {0}, dpm[64] = {0};
  for (int64_t i = 1; i < e; ++i) mx = fmax(mx, l[i]);
  for (int64_t i = 0; i < e; ++i) z += exp(l[i] - mx);
  for (int64_t i = 0; i < e; ++i) p[i] = exp(l[i] - mx) / z;
  for (int64_t j = 0; j < k; ++j) t += p[sel[j]];
  for (int64_t j = 0; j < k; ++j) {
    if (!norm) {
      dp[sel[j]] = dw[j];
      dpm[sel[j]] = fabs(dw[j]);
      continue;
    }
    // w_j = p_j / t: ∂w_j/∂p_j = 1/t - p_j/t², ∂w_l/∂p_j = -p_l/t² (l != j).
    for (int64_t q = 0; q < k; ++q) {
      dp[sel[j]] += dw[q] * ((q == j ? 1.0 / t : 0.0) - p[sel[q]] / (t * t));
      dpm[sel[j]] += fabs(dw[q]) * ((q == j ? 1.0 / t : 0.0) + p[sel[q]] / (t * t));
    }
  }
  for (int64_t i = 0; i < e; ++i) {
    dot += p[i] * dp[i];
    dotm += p[i] * dpm[i];
  }
  for (int64_t i = 0; i < e; ++i) {
    dl[i] = p[i] * (dp[i] - dot);
    if (mag) mag[i] = p[i] * (dpm[i] + dotm);
  }
}

TPRT_TEST(moe_route_grad_reference_matches_finite_differences) {
  int64_t e = 9, k = 3;
  uint64_t s = 77;
  const double step = 0x1p-18;
  for (int trial = 0; trial < 20; ++trial)
    for (int norm = 0; norm < 2; ++norm) {
      double l[9], w[3], wu[3], wd[3], dl[9];
      float dw[3];
      for (int i = 0; i < e; ++i) l[i] = tc_uniform(&s, -3.0, 3.0);
      for (int j = 0; j < k; ++j) dw[j] = (float)tc_uniform(&s, -1.0, 1.0);
      const int32_t sel[3] = {(int32_t)(trial % 9), (int32_t)((trial + 4) % 9), (int32_t)((trial + 7) % 9)};
      ref_route_weights(l, e, sel, k, norm, w);
      ref_route_grad(l, e, sel, k, norm, dw, dl, NULL);
      for (int i = 0; i < e; ++i) {
        double keep = l[i], up = 0.0, down = 0.0;
        l[i] = keep + step;
        ref_route_weights(l, e, sel, k, norm, wu);
        l[i] = keep - step;
        ref_route_weights(l, e, sel, k, norm, wd);
        l[i] = keep;
        for (int j = 0; j < k; ++j) {
          up += dw[j] * wu[j];
          down += dw[j] * wd[j];
        }
        TPRT_EXPECT_NEAR(dl[i], (up - down) / (2 * step), 1e-9, 1e-7);
      }
      // With normalize, only the selected logits get a gradient.
      if (norm)
        for (int i = 0; i < e; ++i)
          if (i != sel[0] && i != sel[1] && i != sel[2]) TPRT_EXPECT_NEAR(dl[i], 0.0, 1e-15, 0.0);
    }
}

// docs/numerics.md's order, written out (f32 probabilities exactly as the forward).
static void doc_route_grad(const float* l, int64_t e, const int32_t* sel, int k, bool norm, const float* g, float* dl) {
  float p[64], mx = l[0], c = 0.0f;
  for (int64_t i = 1; i < e; ++i)
    if (l[i] > mx) mx = l[i];
  for (int64_t i = 0; i < e; ++i) p[i] = tprt_expf(l[i] - mx);
  float sum = tprt_row_sum(p, e);
  for (int64_t i = 0; i < e; ++i) p[i] = p[i] / sum;
  for (int64_t i = 0; i < e; ++i) dl[i] = 0.0f;
  if (norm) {
    float t = 0.0f, w[8];
    for (int j = 0; j < k; ++j) t = t + p[sel[j]];
    for (int j = 0; j < k; ++j) c = fmaf(w[j] = p[sel[j]] / t, g[j], c);
    for (int j = 0; j < k; ++j) dl[sel[j]] = w[j] * (g[j] - c);
  } else {
    for (int j = 0; j < k; ++j) c = fmaf(p[sel[j]], g[j], c);
    for (int j = 0; j < k; ++j) dl[sel[j]] = g[j];
    for (int64_t i = 0; i < e; ++i) dl[i] = p[i] * (dl[i] - c);
  }
}

TPRT_TEST(moe_route_grad_values_and_bits) {
  int64_t t = 11, e = 40, k = 4;
  for (int d = 0; d < 3; ++d)
    for (int norm = 0; norm < 2; ++norm) {
      int dt = kDtypes[d];
      tc_tensor_t logits = tc_make(dt, 2, t, e), idx = tc_make(TPRT_DTYPE_I32, 2, t, k);
      tc_tensor_t w = tc_make(TPRT_DTYPE_F32, 2, t, k), dw = tc_make(TPRT_DTYPE_F32, 2, t, k);
      tc_tensor_t dl = tc_make(dt, 2, t, e), want = tc_make(dt, 2, t, e);
      tc_fill(&logits.t, 80 + d, -4.0, 4.0);
      tc_fill(&dw.t, 90, -1.0, 1.0);
      TPRT_EXPECT_OK(tprt_cpu_moe_route(&logits.t, &idx.t, &w.t, (int)k, norm));
      TPRT_EXPECT_OK(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dl.t, (int)k, norm));
      double* ref = calloc((size_t)(t * e), sizeof(double));
      double* mag = calloc((size_t)(t * e), sizeof(double));
      for (int64_t row = 0; row < t; ++row) {
        double l[40];
        float lf[40], out[40];
        for (int64_t i = 0; i < e; ++i) lf[i] = (float)(l[i] = tc_get(&logits.t, row * e + i));
        const int32_t* sel = (const int32_t*)idx.t.data + row * k;
        const float* g = (const float*)dw.t.data + row * k;
        ref_route_grad(l, e, sel, k, norm, g, ref + row * e, mag + row * e);
        doc_route_grad(lf, e, sel, (int)k, norm, g, out);
        for (int64_t i = 0; i < e; ++i) tc_set(&want.t, row * e + i, out[i]);
      }
      TPRT_EXPECT(tc_same_bytes(&dl.t, &want.t));
      char what[64];
      snprintf(what, sizeof what, "moe_route_grad %s normalize=%d", tprt_dtype_name(dt), norm);
      // dp - c may cancel: allow 1e-6 of the terms' magnitude on top of the dtype's tolerance.
      for (int64_t i = 0; i < t * e; ++i) mag[i] *= 1e-6 / tc_rtol(dt);
      tc_check_near(what, &dl.t, ref, mag, tc_rtol(dt));
      free(ref);
      free(mag);
      tc_tensor_t* all[] = {&logits, &idx, &w, &dw, &dl, &want};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
    }
}

// ------------------------------------------------------------------------------------------------
// Argument errors
// ------------------------------------------------------------------------------------------------

#define BAD(expr, text) TPRT_EXPECT_STATUS(expr, TPRT_STATUS_INVALID_ARGUMENT, text)

TPRT_TEST(moe_grads_invalid_arguments) {
  // T=2, k=2, H=3, E=4.
  tc_tensor_t dout = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)3),
              y = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)3);
  tc_tensor_t y5 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)5, (int64_t)3), map = tc_make(TPRT_DTYPE_I32, 1, (int64_t)4);
  tc_tensor_t map3 = tc_make(TPRT_DTYPE_I32, 1, (int64_t)3), w = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)2);
  tc_tensor_t dy = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)3),
              dyf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)3);
  tc_tensor_t dw = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)2),
              dw3 = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)3);
  tc_tensor_t doutf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)3),
              dx = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)3);
  tc_tensor_t wb = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)2);
  tc_tensor_t logits = tc_make(TPRT_DTYPE_F16, 2, (int64_t)2, (int64_t)4),
              idx = tc_make(TPRT_DTYPE_I32, 2, (int64_t)2, (int64_t)2);
  tc_tensor_t dl = tc_make(TPRT_DTYPE_F16, 2, (int64_t)2, (int64_t)4),
              dlf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)4);
  tc_tensor_t idx64 = tc_make(TPRT_DTYPE_I64, 2, (int64_t)2, (int64_t)2);
  const int32_t perm[4] = {3, 1, 0, 2}, dup[4] = {3, 1, 3, 2}, out_of_range[4] = {0, 1, 4, 2};
  memcpy(map.t.data, perm, sizeof perm);
  BAD(tprt_cpu_moe_unpermute_grad(NULL, &y.t, &map.t, &w.t, &dy.t, &dw.t), "moe_unpermute_grad: dout is NULL");
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map.t, &wb.t, &dy.t, &dw.t),
      "moe_unpermute_grad: weights must be a rank-2 f32 tensor; got [2,2] bf16");
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y5.t, &map.t, &w.t, &dy.t, &dw.t),
      "moe_unpermute_grad: y must be [T*k,H] = [4,3] (weights is [T,k] = [2,2]); got [5,3] bf16");
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map3.t, &w.t, &dy.t, &dw.t),
      "moe_unpermute_grad: row_map must be [T*k] = [4]; got [3] i32");
  BAD(tprt_cpu_moe_unpermute_grad(&doutf.t, &y.t, &map.t, &w.t, &dy.t, &dw.t),
      "moe_unpermute_grad: dout must be [T,H] = [2,3] of y's dtype bf16; got [2,3] f32");
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map.t, &w.t, &dyf.t, &dw.t),
      "moe_unpermute_grad: dy must be y's shape and dtype [4,3] bf16; got [4,3] f32");
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map.t, &w.t, &dy.t, &dw3.t),
      "moe_unpermute_grad: dweights must be weights' shape [T,k] = [2,2]; got [2,3] f32");
  memcpy(map.t.data, dup, sizeof dup);
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map.t, &w.t, &dy.t, &dw.t),
      "moe_unpermute_grad: row_map is not a permutation of the T*k=4 slots: row_map[2]=3 repeats a slot");
  BAD(tprt_cpu_moe_permute_grad(&dy.t, &map.t, &dx.t, 2),
      "moe_permute_grad: row_map is not a permutation of the T*k=4 slots: row_map[2]=3 repeats a slot");
  memcpy(map.t.data, out_of_range, sizeof out_of_range);
  BAD(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map.t, &w.t, &dy.t, &dw.t),
      "moe_unpermute_grad: row_map is not a permutation of the T*k=4 slots: row_map[2]=4 is out of range");
  memcpy(map.t.data, perm, sizeof perm);
  TPRT_EXPECT_OK(tprt_cpu_moe_unpermute_grad(&dout.t, &y.t, &map.t, &w.t, &dy.t, &dw.t));
  BAD(tprt_cpu_moe_permute_grad(&dy.t, &map.t, NULL, 2), "moe_permute_grad: dx is NULL");
  BAD(tprt_cpu_moe_permute_grad(&dy.t, &map.t, &dx.t, 0), "moe_permute_grad: top_k=0 must be >= 1");
  BAD(tprt_cpu_moe_permute_grad(&dy.t, &map.t, &dx.t, 3),
      "moe_permute_grad: dy must be [T*k,H] = [6,3] (dx is [T,H] = [2,3], k=3) of dx's dtype bf16; got [4,3] bf16");
  BAD(tprt_cpu_moe_permute_grad(&dyf.t, &map.t, &dx.t, 2),
      "moe_permute_grad: dy must be [T*k,H] = [4,3] (dx is [T,H] = [2,3], k=2) of dx's dtype bf16; got [4,3] f32");
  BAD(tprt_cpu_moe_permute_grad(&dy.t, &map3.t, &dx.t, 2),
      "moe_permute_grad: row_map must be [T*k] = [4]; got [3] i32");
  TPRT_EXPECT_OK(tprt_cpu_moe_permute_grad(&dy.t, &map.t, &dx.t, 2));
  const int32_t good[4] = {1, 3, 0, 2}, bad_e[4] = {1, 3, 0, 4}, rep[4] = {1, 3, 2, 2};
  memcpy(idx.t.data, good, sizeof good);
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx64.t, &dw.t, &dl.t, 2, true),
      "moe_route_grad: indices must be a rank-2 i32 tensor; got [2,2] i64");
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dl.t, 5, true), "moe_route_grad: top_k=5 must be in [1, E=4]");
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dl.t, 3, true),
      "moe_route_grad: indices must be [T,k] = [2,3]; got [2,2] i32");
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw3.t, &dl.t, 2, true),
      "moe_route_grad: dweights must be [T,k] = [2,2]; got [2,3] f32");
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dlf.t, 2, true),
      "moe_route_grad: dlogits must have logits' shape and dtype [2,4] f16; got [2,4] f32");
  memcpy(idx.t.data, bad_e, sizeof bad_e);
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dl.t, 2, false),
      "moe_route_grad: indices[1,1]=4 is not an expert in [0, E=4)");
  memcpy(idx.t.data, rep, sizeof rep);
  BAD(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dl.t, 2, false),
      "moe_route_grad: indices[1,1]=2 repeats an expert of token 1");
  memcpy(idx.t.data, good, sizeof good);
  TPRT_EXPECT_OK(tprt_cpu_moe_route_grad(&logits.t, &idx.t, &dw.t, &dl.t, 2, false));
  tc_tensor_t* all[] = {&dout, &y,     &y5, &map, &map3,   &w,   &dy, &dyf, &dw,
                        &dw3,  &doutf, &dx, &wb,  &logits, &idx, &dl, &dlf, &idx64};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
