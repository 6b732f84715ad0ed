// Unit tests of tprt_cpu_moe_route, tprt_cpu_moe_permute and tprt_cpu_moe_unpermute.
#include "test_cpu_util.h"

static int32_t i32_at(const tprt_tensor_t* t, int64_t i) { return ((const int32_t*)t->data)[i]; }
static float f32_at(const tprt_tensor_t* t, int64_t i) { return (float)tc_get(t, i); }

TPRT_TEST(moe_route_ties_and_normalization) {
  // Experts 1 and 2 tie for the largest probability: the lower index comes first.
  tc_tensor_t logits = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)4);
  const float l[4] = {1.0f, 3.0f, 3.0f, 2.0f};
  memcpy(logits.t.data, l, sizeof l);
  tc_tensor_t idx = tc_make(TPRT_DTYPE_I32, 2, (int64_t)1, (int64_t)2),
              w = tc_make(TPRT_DTYPE_F32, 2, (int64_t)1, (int64_t)2);
  TPRT_EXPECT_OK(tprt_cpu_moe_route(&logits.t, &idx.t, &w.t, 2, true));
  TPRT_EXPECT_EQ_I64(i32_at(&idx.t, 0), 1);
  TPRT_EXPECT_EQ_I64(i32_at(&idx.t, 1), 2);
  TPRT_EXPECT_EQ_BITS(tc_bits(&w.t, 0), tprt_f32_bits(0.5f));  // p / (p + p) is exactly 1/2
  TPRT_EXPECT_EQ_BITS(tc_bits(&w.t, 1), tprt_f32_bits(0.5f));
  TPRT_EXPECT_OK(tprt_cpu_moe_route(&logits.t, &idx.t, &w.t, 2, false));
  double z = exp(-2.0) + 2.0 + exp(-1.0);  // softmax with the max subtracted
  TPRT_EXPECT_NEAR(f32_at(&w.t, 0), 1.0 / z, 0.0, 1e-6);
  // The f32 arithmetic, written out: exp of max-subtracted logits, canonical row sum, division.
  float e[4], p = 0.0f;
  for (int i = 0; i < 4; ++i) e[i] = tprt_expf(l[i] - 3.0f);
  p = e[1] / tprt_row_sum(e, 4);
  TPRT_EXPECT_EQ_BITS(tc_bits(&w.t, 0), tprt_f32_bits(p));
  tc_free(&logits);
  tc_free(&idx);
  tc_free(&w);
}

TPRT_TEST(moe_route_matches_f64_reference) {
  const int dtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};
  int64_t t = 9, e = 300, k = 5;  // E > 256 exercises lanes holding two elements
  for (int d = 0; d < 3; ++d)
    for (int norm = 0; norm < 2; ++norm) {
      tc_tensor_t logits = tc_make(dtypes[d], 2, t, e);
      tc_tensor_t idx = tc_make(TPRT_DTYPE_I32, 2, t, k), w = tc_make(TPRT_DTYPE_F32, 2, t, k);
      tc_fill(&logits.t, 17 + d, -4.0, 4.0);
      TPRT_EXPECT_OK(tprt_cpu_moe_route(&logits.t, &idx.t, &w.t, (int)k, norm));
      for (int64_t row = 0; row < t; ++row) {
        double mx = -INFINITY, z = 0.0, sel = 0.0;
        for (int64_t i = 0; i < e; ++i) mx = fmax(mx, tc_get(&logits.t, row * e + i));
        for (int64_t i = 0; i < e; ++i) z += exp(tc_get(&logits.t, row * e + i) - mx);
        // Reference top-k by logit (probability order), ties to the lower index.
        int taken[300] = {0};
        int64_t want[5];
        for (int64_t j = 0; j < k; ++j) {
          int64_t best = -1;
          for (int64_t i = 0; i < e; ++i)
            if (!taken[i] && (best < 0 || tc_get(&logits.t, row * e + i) > tc_get(&logits.t, row * e + best))) best = i;
          taken[best] = 1;
          want[j] = best;
          sel += exp(tc_get(&logits.t, row * e + best) - mx) / z;
        }
        for (int64_t j = 0; j < k; ++j) {
          TPRT_EXPECT_EQ_I64(i32_at(&idx.t, row * k + j), want[j]);
          double pr = exp(tc_get(&logits.t, row * e + want[j]) - mx) / z;
          TPRT_EXPECT_NEAR(f32_at(&w.t, row * k + j), norm ? pr / sel : pr, 0.0, 1e-5);
        }
      }
      tc_free(&logits);
      tc_free(&idx);
      tc_free(&w);
    }
}

TPRT_TEST(moe_permute_orders_by_expert_token_slot) {
  // T=4, k=2, E=3. Slots (t,j): (0,0)=2 (0,1)=0 (1,0)=0 (1,1)=2 (2,0)=1 (2,1)=0 (3,0)=2 (3,1)=2.
  const int32_t sel[8] = {2, 0, 0, 2, 1, 0, 2, 2};
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)3),
              idx = tc_make(TPRT_DTYPE_I32, 2, (int64_t)4, (int64_t)2);
  tc_tensor_t y = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)8, (int64_t)3), sizes = tc_make(TPRT_DTYPE_I64, 1, (int64_t)3);
  tc_tensor_t map = tc_make(TPRT_DTYPE_I32, 1, (int64_t)8);
  memcpy(idx.t.data, sel, sizeof sel);
  for (int i = 0; i < 12; ++i) tc_set(&x.t, i, (float)(10 * (i / 3) + i % 3));
  TPRT_EXPECT_OK(tprt_cpu_moe_permute(&x.t, &idx.t, &y.t, &sizes.t, &map.t));
  const int64_t want_sizes[3] = {3, 1, 4};
  const int32_t want_map[8] = {1, 2, 5, 4,
                               0, 3, 6, 7};  // expert 0: (0,1) (1,0) (2,1); 1: (2,0); 2: (0,0) (1,1) (3,0) (3,1)
  for (int i = 0; i < 3; ++i) TPRT_EXPECT_EQ_I64(((int64_t*)sizes.t.data)[i], want_sizes[i]);
  for (int r = 0; r < 8; ++r) {
    TPRT_EXPECT_EQ_I64(i32_at(&map.t, r), want_map[r]);
    for (int c = 0; c < 3; ++c) TPRT_EXPECT_EQ_I64((int64_t)tc_get(&y.t, r * 3 + c), 10 * (want_map[r] / 2) + c);
  }
  // Unpermute with weights: out[t] = w[t,0]·y[row(t,0)] + w[t,1]·y[row(t,1)], one rounding.
  tc_tensor_t w = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)2),
              out = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)4, (int64_t)3);
  const float wv[8] = {0.25f, 0.75f, 0.5f, 0.5f, 1.0f, 0.0f, 0.3f, 0.7f};
  memcpy(w.t.data, wv, sizeof wv);
  TPRT_EXPECT_OK(tprt_cpu_moe_unpermute(&y.t, &map.t, &w.t, &out.t));
  for (int t = 0; t < 4; ++t)
    for (int c = 0; c < 3; ++c) {
      float xv = (float)tc_get(&x.t, t * 3 + c);
      float want = fmaf(wv[2 * t + 1], xv, fmaf(wv[2 * t], xv, 0.0f));
      tc_tensor_t one = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)1);
      tc_set(&one.t, 0, want);
      TPRT_EXPECT_EQ_BITS(tc_bits(&out.t, t * 3 + c), tc_bits(&one.t, 0));
      tc_free(&one);
    }
  tc_tensor_t* all[] = {&x, &idx, &y, &sizes, &map, &w, &out};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

// The combine does not depend on where rows were placed (experts, ranks): shuffling y's rows and
// row_map together leaves out unchanged bit for bit; values match a float64 reference.
TPRT_TEST(moe_unpermute_is_placement_invariant) {
  int64_t t = 7, k = 3, h = 33, rows = t * k;
  tc_tensor_t y = tc_make(TPRT_DTYPE_F32, 2, rows, h), y2 = tc_make(TPRT_DTYPE_F32, 2, rows, h);
  tc_tensor_t map = tc_make(TPRT_DTYPE_I32, 1, rows), map2 = tc_make(TPRT_DTYPE_I32, 1, rows);
  tc_tensor_t w = tc_make(TPRT_DTYPE_F32, 2, t, k), out = tc_make(TPRT_DTYPE_F32, 2, t, h),
              out2 = tc_make(TPRT_DTYPE_F32, 2, t, h);
  tc_fill(&y.t, 3, -2.0, 2.0);
  tc_fill(&w.t, 4, 0.0, 1.0);
  for (int64_t r = 0; r < rows; ++r) ((int32_t*)map.t.data)[r] = (int32_t)((r * 5) % rows);  // 5 is coprime to 21
  TPRT_EXPECT_OK(tprt_cpu_moe_unpermute(&y.t, &map.t, &w.t, &out.t));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t dst = (r * 8 + 3) % rows;  // another permutation of the rows
    ((int32_t*)map2.t.data)[dst] = i32_at(&map.t, r);
    memcpy((float*)y2.t.data + dst * h, (float*)y.t.data + r * h, (size_t)h * 4);
  }
  TPRT_EXPECT_OK(tprt_cpu_moe_unpermute(&y2.t, &map2.t, &w.t, &out2.t));
  TPRT_EXPECT(tc_same_bytes(&out.t, &out2.t));
  double ref[7 * 33], mag[7 * 33];
  for (int64_t tok = 0; tok < t; ++tok)
    for (int64_t c = 0; c < h; ++c) {
      double acc = 0.0, m = 0.0;
      for (int64_t r = 0; r < rows; ++r)
        if (i32_at(&map.t, r) / k == tok) {
          double p = tc_get(&w.t, i32_at(&map.t, r)) * tc_get(&y.t, r * h + c);
          acc += p;
          m += fabs(p);
        }
      ref[tok * h + c] = acc;
      mag[tok * h + c] = m;
    }
  tc_check_near("moe_unpermute", &out.t, ref, mag, 1e-5);
  tc_tensor_t* all[] = {&y, &y2, &map, &map2, &w, &out, &out2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

TPRT_TEST(moe_invalid_arguments) {
  tc_tensor_t logits = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)4);
  tc_tensor_t idx = tc_make(TPRT_DTYPE_I32, 2, (int64_t)2, (int64_t)2),
              w = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)2);
  tc_tensor_t idx3 = tc_make(TPRT_DTYPE_I32, 2, (int64_t)2, (int64_t)3);
  TPRT_EXPECT_STATUS(tprt_cpu_moe_route(&logits.t, &idx.t, &w.t, 5, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_route: top_k=5 must be in [1, E=4]");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_route(&logits.t, &idx3.t, &w.t, 2, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_route: indices must be [T,k] = [2,2]; got [2,3] i32");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_route(&logits.t, &w.t, &w.t, 2, false), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_route: indices must be a rank-2 i32 tensor; got [2,2] f32");
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)3),
              y = tc_make(TPRT_DTYPE_F32, 2, (int64_t)4, (int64_t)3);
  tc_tensor_t sizes = tc_make(TPRT_DTYPE_I64, 1, (int64_t)3), map = tc_make(TPRT_DTYPE_I32, 1, (int64_t)4);
  ((int32_t*)idx.t.data)[3] = 3;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_permute(&x.t, &idx.t, &y.t, &sizes.t, &map.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_permute: indices[1,1]=3 is not an expert in [0, E=3)");
  tc_tensor_t y5 = tc_make(TPRT_DTYPE_F32, 2, (int64_t)5, (int64_t)3);
  TPRT_EXPECT_STATUS(tprt_cpu_moe_permute(&x.t, &idx.t, &y5.t, &sizes.t, &map.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_permute: y must be [T*k,H] = [4,3] of x's dtype f32; got [5,3] f32");
  int32_t* m = (int32_t*)map.t.data;
  m[0] = 0;
  m[1] = 1;
  m[2] = 1;
  m[3] = 2;
  tc_tensor_t out = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)3);
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unpermute(&y.t, &map.t, &w.t, &out.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unpermute: row_map is not a permutation of the T*k=4 slots: row_map[2]=1 repeats a slot");
  m[2] = 9;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unpermute(&y.t, &map.t, &w.t, &out.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "row_map[2]=9 is out of range");
  tc_tensor_t outb = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)3);
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unpermute(&y.t, &map.t, &w.t, &outb.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unpermute: out must be [T,H] = [2,3] of y's dtype f32; got [2,3] bf16");
  tc_tensor_t* all[] = {&logits, &idx, &w, &idx3, &x, &y, &sizes, &map, &y5, &out, &outb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
