// Unit tests of tprt_cpu_moe_bucket and tprt_cpu_moe_unbucket: hand-checked layouts, the exact
// bytes of random bucketings (zero padding included) against an independent construction, the
// round trip, a simulated expert-parallel dispatch through the segmented grouped linear, and
// argument errors.
#include "test_cpu_util.h"

static int32_t i32_at(const tprt_tensor_t* t, int64_t i) { return ((const int32_t*)t->data)[i]; }

// x[5,2] i32 holds 10*r + c; group_sizes {2, 0, 1, 2} puts rows 0-1 on expert 0, row 2 on expert 2
// and rows 3-4 on expert 3. Each case lists y row by row, -1 for a zero (padding) row.
TPRT_TEST(moe_bucket_by_hand) {
  const int64_t sv[4] = {2, 0, 1, 2};
  const int want_b1[5] = {0, 1, 2, 3, 4};
  // Buckets of R=5 rows each: B=2 gives experts {0,1} and {2,3}, B=4 one expert per bucket.
  const int want_b2[10] = {0, 1, -1, -1, -1, 2, 3, 4, -1, -1};
  const int want_b4[20] = {0, 1, -1, -1, -1, -1, -1, -1, -1, -1, 2, -1, -1, -1, -1, 3, 4, -1, -1, -1};
  const int* want[3] = {want_b1, want_b2, want_b4};
  tc_tensor_t x = tc_make(TPRT_DTYPE_I32, 2, (int64_t)5, (int64_t)2), g = tc_make(TPRT_DTYPE_I64, 1, (int64_t)4);
  memcpy(g.t.data, sv, sizeof sv);
  for (int i = 0; i < 10; ++i) ((int32_t*)x.t.data)[i] = 10 * (i / 2) + i % 2;
  for (int c = 0; c < 3; ++c) {
    int b = 1 << c;
    tc_tensor_t y = tc_make(TPRT_DTYPE_I32, 2, (int64_t)(5 * b), (int64_t)2),
                z = tc_make(TPRT_DTYPE_I32, 2, (int64_t)5, (int64_t)2);
    memset(y.t.data, 0xFF, tprt_tensor_bytes(&y.t));
    TPRT_EXPECT_OK(tprt_cpu_moe_bucket(&x.t, &g.t, &y.t, b));
    for (int r = 0; r < 5 * b; ++r)
      for (int col = 0; col < 2; ++col)
        TPRT_EXPECT_EQ_I64(i32_at(&y.t, 2 * r + col), want[c][r] < 0 ? 0 : 10 * want[c][r] + col);
    // Garbage in the padding rows is never read back.
    for (int r = 0; r < 5 * b; ++r)
      if (want[c][r] < 0) ((int32_t*)y.t.data)[2 * r] = -7;
    memset(z.t.data, 0xFF, tprt_tensor_bytes(&z.t));
    TPRT_EXPECT_OK(tprt_cpu_moe_unbucket(&y.t, &g.t, &z.t, b));
    TPRT_EXPECT(tc_same_bytes(&z.t, &x.t));
    tc_free(&y);
    tc_free(&z);
  }
  tc_free(&x);
  tc_free(&g);
}

// Fills |t| with random bytes.
static void fill_bytes(tprt_tensor_t* t, uint64_t seed) {
  unsigned char* p = (unsigned char*)t->data;
  for (size_t i = 0; i < tprt_tensor_bytes(t); ++i) p[i] = (unsigned char)tc_next(&seed);
}

// Random bucketings of every dtype: y equals an independent construction (walk the rows, find
// each one's expert and bucket, append it there; zero bytes elsewhere), and unbucketing a y
// whose padding holds garbage gives x back. Counts include experts with no rows, and some
// cases send every row to one bucket.
TPRT_TEST(moe_bucket_random_round_trip) {
  const int dtypes[] = {TPRT_DTYPE_BF16,     TPRT_DTYPE_F16,    TPRT_DTYPE_F32,
                        TPRT_DTYPE_F8E4M3FN, TPRT_DTYPE_F8E5M2, TPRT_DTYPE_F8E8M0FNU,
                        TPRT_DTYPE_F4E2M1FN, TPRT_DTYPE_I32,    TPRT_DTYPE_I64};
  uint64_t rng = 99;
  int one_bucket_cases = 0;
  for (int iter = 0; iter < 200; ++iter) {
    int dtype = dtypes[iter % 9];
    int b = 1 << (tc_next(&rng) % 4);
    int64_t e = b * (1 + (int64_t)(tc_next(&rng) % 4)), r = (int64_t)(tc_next(&rng) % 13);
    int64_t h = 2 * (int64_t)(tc_next(&rng) % 6);  // even, for f4; 0 included
    tc_tensor_t x = tc_make(dtype, 2, r, h), g = tc_make(TPRT_DTYPE_I64, 1, e);
    tc_tensor_t y = tc_make(dtype, 2, b * r, h), z = tc_make(dtype, 2, r, h);
    int64_t* sv = (int64_t*)g.t.data;
    int mode = (int)(tc_next(&rng) % 4);  // 0: every row to the last bucket's first expert
    for (int64_t i = 0, left = r; i < e; ++i) {
      int64_t c = i == e - 1 ? left : mode == 0 ? 0 : (int64_t)(tc_next(&rng) % (uint64_t)(left + 1));
      if (mode == 0 && i == e - e / b) c = left;
      if (tc_next(&rng) % 3 == 0 && i != e - 1 && mode != 0) c = 0;  // more empty experts
      sv[i] = c;
      left -= c;
    }
    one_bucket_cases += mode == 0 && b > 1 && r > 0;
    fill_bytes(&x.t, 1000 + (uint64_t)iter);
    memset(y.t.data, 0xA5, tprt_tensor_bytes(&y.t));
    TPRT_EXPECT_OK(tprt_cpu_moe_bucket(&x.t, &g.t, &y.t, b));
    // The independent construction.
    size_t rb = tprt_dtype_bytes(dtype, h);
    unsigned char* want = calloc((size_t)(b * r) * rb + 1, 1);
    int64_t* fill = calloc((size_t)b, sizeof(int64_t));
    for (int64_t row = 0, expert = 0, seen = 0; row < r; ++row) {
      while (seen + sv[expert] <= row) seen += sv[expert++];
      int64_t bucket = expert / (e / b);
      memcpy(want + (size_t)(bucket * r + fill[bucket]++) * rb, (char*)x.t.data + (size_t)row * rb, rb);
    }
    if (memcmp(y.t.data, want, (size_t)(b * r) * rb) != 0)
      TPRT__FAIL("iter %d (%s, E=%lld, B=%d, R=%lld, H=%lld): y differs from the construction", iter,
                 tprt_dtype_name(dtype), (long long)e, b, (long long)r, (long long)h);
    for (int bucket = 0; bucket < b; ++bucket)  // garbage in every padding row
      if (fill[bucket] < r)
        memset((char*)y.t.data + (size_t)(bucket * r + fill[bucket]) * rb, 0x5A, (size_t)(r - fill[bucket]) * rb);
    memset(z.t.data, 0xC3, tprt_tensor_bytes(&z.t));
    TPRT_EXPECT_OK(tprt_cpu_moe_unbucket(&y.t, &g.t, &z.t, b));
    if (!tc_same_bytes(&z.t, &x.t)) TPRT__FAIL("iter %d: unbucket(bucket(x)) != x", iter);
    free(want);
    free(fill);
    tc_free(&x);
    tc_free(&g);
    tc_free(&y);
    tc_free(&z);
  }
  TPRT_EXPECT(one_bucket_cases > 10);
}

// Expert parallelism over P simulated ranks, each with its own tokens: permute, bucket, an
// all-to-all (bucket q of rank p becomes segment p of rank q, with its E/P counts), the
// segmented grouped linear with the rank's E/P experts, the reverse all-to-all, unbucket. Every
// rank gets back, bit for bit, the grouped linear of its permuted rows with all E experts.
TPRT_TEST(moe_bucket_expert_parallel_equals_single_rank) {
  enum { P = 4, E = 8, EL = E / P };
  const int64_t t = 6, k = 2, h = 40, n = 24, rows = t * k;
  const int dtypes[2] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F32};
  for (int d = 0; d < 2; ++d) {
    int dt = dtypes[d];
    tc_tensor_t w = tc_make(dt, 3, (int64_t)E, n, h);
    tc_fill(&w.t, 77, -1.0, 1.0);
    tc_tensor_t xs[P], gs[P], send[P], recv[P], rgs[P], out[P], back[P], ys[P];
    size_t xrb = tprt_dtype_bytes(dt, h), yrb = tprt_dtype_bytes(dt, n);
    for (int p = 0; p < P; ++p) {
      tc_tensor_t x = tc_make(dt, 2, t, h), idx = tc_make(TPRT_DTYPE_I32, 2, t, k);
      tc_tensor_t map = tc_make(TPRT_DTYPE_I32, 1, rows);
      tc_fill(&x.t, 80 + (uint64_t)p, -2.0, 2.0);
      uint64_t rng = 90 + (uint64_t)p;
      for (int64_t i = 0; i < rows; ++i)  // rank 0 routes everything to rank 3's experts
        ((int32_t*)idx.t.data)[i] = p == 0 ? 6 + (int32_t)(i % 2) : (int32_t)(tc_next(&rng) % E);
      xs[p] = tc_make(dt, 2, rows, h);
      gs[p] = tc_make(TPRT_DTYPE_I64, 1, (int64_t)E);
      TPRT_EXPECT_OK(tprt_cpu_moe_permute(&x.t, &idx.t, &xs[p].t, &gs[p].t, &map.t));
      send[p] = tc_make(dt, 2, P * rows, h);
      TPRT_EXPECT_OK(tprt_cpu_moe_bucket(&xs[p].t, &gs[p].t, &send[p].t, P));
      tc_free(&x);
      tc_free(&idx);
      tc_free(&map);
    }
    for (int q = 0; q < P; ++q) {
      recv[q] = tc_make(dt, 2, P * rows, h);
      rgs[q] = tc_make(TPRT_DTYPE_I64, 1, (int64_t)(P * EL));
      for (int p = 0; p < P; ++p) {
        memcpy((char*)recv[q].t.data + (size_t)(p * rows) * xrb, (char*)send[p].t.data + (size_t)(q * rows) * xrb,
               (size_t)rows * xrb);
        memcpy((int64_t*)rgs[q].t.data + p * EL, (int64_t*)gs[p].t.data + q * EL, EL * sizeof(int64_t));
      }
      tprt_tensor_t wl = w.t;  // experts [q*EL, (q+1)*EL)
      wl.data = (char*)w.t.data + tprt_dtype_bytes(dt, q * EL * n * h);
      wl.dims[0] = EL;
      out[q] = tc_make(dt, 2, P * rows, n);
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&recv[q].t, &wl, &rgs[q].t, &out[q].t, 8));
    }
    for (int p = 0; p < P; ++p) {
      back[p] = tc_make(dt, 2, P * rows, n);
      for (int q = 0; q < P; ++q)
        memcpy((char*)back[p].t.data + (size_t)(q * rows) * yrb, (char*)out[q].t.data + (size_t)(p * rows) * yrb,
               (size_t)rows * yrb);
      ys[p] = tc_make(dt, 2, rows, n);
      TPRT_EXPECT_OK(tprt_cpu_moe_unbucket(&back[p].t, &gs[p].t, &ys[p].t, P));
      tc_tensor_t ref = tc_make(dt, 2, rows, n);
      TPRT_EXPECT_OK(tprt_cpu_grouped_linear(&xs[p].t, &w.t, &gs[p].t, &ref.t, 8));
      if (!tc_same_bytes(&ys[p].t, &ref.t))
        TPRT__FAIL("%s rank %d: expert-parallel result differs from the single-rank grouped linear",
                   tprt_dtype_name(dt), p);
      tc_free(&ref);
    }
    TPRT_EXPECT_EQ_I64(((int64_t*)rgs[3].t.data)[0], 6);  // rank 0's rows all reached rank 3
    for (int p = 0; p < P; ++p) {
      tc_tensor_t* all[] = {&xs[p], &gs[p], &send[p], &recv[p], &rgs[p], &out[p], &back[p], &ys[p]};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
    }
    tc_free(&w);
  }
}

TPRT_TEST(moe_bucket_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_I32, 2, (int64_t)5, (int64_t)2), g = tc_make(TPRT_DTYPE_I64, 1, (int64_t)4);
  tc_tensor_t y = tc_make(TPRT_DTYPE_I32, 2, (int64_t)10, (int64_t)2),
              y9 = tc_make(TPRT_DTYPE_I32, 2, (int64_t)9, (int64_t)2);
  tc_tensor_t yf = tc_make(TPRT_DTYPE_F32, 2, (int64_t)10, (int64_t)2),
              x8 = tc_make(TPRT_DTYPE_I32, 2, (int64_t)8, (int64_t)2);
  tc_tensor_t g0 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)0), gi = tc_make(TPRT_DTYPE_I32, 1, (int64_t)4);
  int64_t* s = (int64_t*)g.t.data;
  s[0] = 2;
  s[1] = 0;
  s[2] = 1;
  s[3] = 2;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(NULL, &g.t, &y.t, 2), TPRT_STATUS_INVALID_ARGUMENT, "moe_bucket: x is NULL");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &gi.t, &y.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: group_sizes must be a rank-1 i64 tensor; got [4] i32");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &g.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: y must be a rank-2 tensor of any dtype; got [4] i64");
  tprt_tensor_t bad = x.t;
  bad.dtype = TPRT_DTYPE_COUNT;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unbucket(&y.t, &g.t, &bad, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unbucket: y must be a rank-2 tensor of any dtype; got [5,2] ?");
  bad.dims[1] = -2;
  bad.dtype = TPRT_DTYPE_I32;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unbucket(&y.t, &g.t, &bad, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unbucket: y has a negative dimension: [5,-2] i32");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &y.t, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: buckets=0 must be >= 1");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g0.t, &y.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: group_sizes must have E >= 1 entries; got [0] i64");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &y.t, 3), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: E=4 experts are not divisible by buckets=3");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &y9.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: y must be [B*R,H] = [10,2] of x's dtype i32; got [9,2] i32");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &yf.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: y must be [B*R,H] = [10,2] of x's dtype i32; got [10,2] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unbucket(&x8.t, &g.t, &x.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unbucket: x must be [B*R,H] = [10,2] of y's dtype i32; got [8,2] i32");
  tc_tensor_t f4 = tc_make(TPRT_DTYPE_F4E2M1FN, 2, (int64_t)5, (int64_t)3),
              f4y = tc_make(TPRT_DTYPE_F4E2M1FN, 2, (int64_t)10, (int64_t)3);
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&f4.t, &g.t, &f4y.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: rows of H=3 f4E2M1FN elements are not whole bytes");
  tc_tensor_t huge = tc_make(TPRT_DTYPE_I32, 2, INT64_MAX / 2, (int64_t)0);  // no data: H = 0
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&huge.t, &g.t, &y.t, 4), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: B*R = 4*4611686018427387903 rows overflows int64");
  s[1] = -1;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &y.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: group_sizes[1]=-1 is outside [0, R=5]");
  s[1] = 6;
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unbucket(&y.t, &g.t, &x.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unbucket: group_sizes[1]=6 is outside [0, R=5]");
  s[1] = 0;
  s[3] = 1;
  memset(y.t.data, 0x3C, tprt_tensor_bytes(&y.t));
  TPRT_EXPECT_STATUS(tprt_cpu_moe_bucket(&x.t, &g.t, &y.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_bucket: group_sizes sum to 4 but x has R=5 rows");
  for (int i = 0; i < 20; ++i) TPRT_EXPECT_EQ_I64(i32_at(&y.t, i), 0x3C3C3C3C);  // the output is untouched
  TPRT_EXPECT_STATUS(tprt_cpu_moe_unbucket(&y.t, &g.t, &x.t, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "moe_unbucket: group_sizes sum to 4 but y has R=5 rows");
  tc_tensor_t* all[] = {&x, &g, &y, &y9, &yf, &x8, &g0, &gi, &f4, &f4y, &huge};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
