// Unit tests of tprt_cpu_add, tprt_cpu_mul, tprt_cpu_copy and tprt_cpu_fill_philox.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

// c is one rounding of the f32 result: f32 addition and multiplication are exact in double before
// their rounding to f32 (double rounding is innocuous at 53 >= 2·24 + 2 bits), then to the dtype.
TPRT_TEST(add_mul_round_once) {
  for (int d = 0; d < 3; ++d)
    for (int mul = 0; mul < 2; ++mul) {
      tc_tensor_t a = tc_make(kDtypes[d], 3, (int64_t)2, (int64_t)3, (int64_t)37);
      tc_tensor_t b = tc_make(kDtypes[d], 3, (int64_t)2, (int64_t)3, (int64_t)37);
      tc_tensor_t c = tc_make(kDtypes[d], 3, (int64_t)2, (int64_t)3, (int64_t)37);
      tc_tensor_t want = tc_make(kDtypes[d], 3, (int64_t)2, (int64_t)3, (int64_t)37);
      tc_fill(&a.t, 1, -100.0, 100.0);
      tc_fill(&b.t, 2, -100.0, 100.0);
      TPRT_EXPECT_OK(mul ? tprt_cpu_mul(&a.t, &b.t, &c.t) : tprt_cpu_add(&a.t, &b.t, &c.t));
      for (int64_t i = 0; i < tprt_tensor_numel(&a.t); ++i) {
        double x = tc_get(&a.t, i), y = tc_get(&b.t, i);
        tc_set(&want.t, i, (float)(mul ? x * y : x + y));
      }
      TPRT_EXPECT(tc_same_bytes(&c.t, &want.t));
      // c may alias a.
      TPRT_EXPECT_OK(mul ? tprt_cpu_mul(&a.t, &b.t, &a.t) : tprt_cpu_add(&a.t, &b.t, &a.t));
      TPRT_EXPECT(tc_same_bytes(&a.t, &want.t));
      tc_free(&a);
      tc_free(&b);
      tc_free(&c);
      tc_free(&want);
    }
  // bf16 tie: 1 + 2^-8 is exact in f32 and rounds to even (1.0) in bf16.
  tc_tensor_t a = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)1), b = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)1);
  tc_set(&a.t, 0, 1.0f);
  tc_set(&b.t, 0, 0x1p-8f);
  TPRT_EXPECT_OK(tprt_cpu_add(&a.t, &b.t, &a.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&a.t, 0), 0x3F80);
  tc_free(&a);
  tc_free(&b);
}

// The bias of a row-parallel linear after its f32 reduction: f32 sum + bf16 bias, rounded once to
// bf16, equals tprt_cpu_linear's bias-then-round on the same f32 sum; a c of any other dtype is
// refused.
TPRT_TEST(add_bias_to_f32_sum_rounds_once) {
  const int64_t m = 5, n = 7;
  tc_tensor_t sum = tc_make(TPRT_DTYPE_F32, 2, m, n), bias = tc_make(TPRT_DTYPE_BF16, 1, n);
  tc_tensor_t c = tc_make(TPRT_DTYPE_BF16, 2, m, n), bad = tc_make(TPRT_DTYPE_F16, 2, m, n);
  tc_fill(&sum.t, 11, -3.0, 3.0);
  tc_fill(&bias.t, 12, -1.0, 1.0);
  TPRT_EXPECT_OK(tprt_cpu_add(&sum.t, &bias.t, &c.t));
  int64_t wrong = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    float want = (float)tc_get(&sum.t, i) + (float)tc_get(&bias.t, i % n);
    wrong += tc_bits(&c.t, i) != tprt_f32_to_bf16(want);
  }
  if (wrong) TPRT__FAIL("%lld elements are not round(sum + bias)", (long long)wrong);
  TPRT_EXPECT_STATUS(tprt_cpu_add(&sum.t, &bias.t, &bad.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "add: c must have a's shape and dtype [5,7] f32 (or, for an f32 a, b's dtype); got "
                     "[5,7] f16");
  tc_free(&sum);
  tc_free(&bias);
  tc_free(&c);
  tc_free(&bad);
}

// The residual add of the fused norms: an f32 sum a plus a residual b of a's shape in storage
// precision, rounded once to b's dtype (or kept in f32), bitwise round(residual + sum) (IEEE
// addition commutes); c may alias b (the residual updated in place). Other dtype mixes are refused.
TPRT_TEST(add_f32_sum_plus_storage_residual_rounds_once) {
  const int storage[2] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16};
  for (int d = 0; d < 2; ++d) {
    tc_tensor_t sum = tc_make(TPRT_DTYPE_F32, 3, (int64_t)3, (int64_t)5, (int64_t)7);
    tc_tensor_t res = tc_make(storage[d], 3, (int64_t)3, (int64_t)5, (int64_t)7);
    tc_tensor_t c = tc_make(storage[d], 3, (int64_t)3, (int64_t)5, (int64_t)7);
    tc_tensor_t wide = tc_make(TPRT_DTYPE_F32, 3, (int64_t)3, (int64_t)5, (int64_t)7);
    tc_fill(&sum.t, 21, -8.0, 8.0);
    tc_fill(&res.t, 22, -4.0, 4.0);
    TPRT_EXPECT_OK(tprt_cpu_add(&sum.t, &res.t, &c.t));
    TPRT_EXPECT_OK(tprt_cpu_add(&sum.t, &res.t, &wide.t));
    int64_t wrong = 0;
    for (int64_t i = 0; i < tprt_tensor_numel(&sum.t); ++i) {
      float f = (float)tc_get(&res.t, i) + (float)tc_get(&sum.t, i);
      uint32_t want = storage[d] == TPRT_DTYPE_BF16 ? tprt_f32_to_bf16(f) : tprt_f32_to_f16(f);
      uint32_t fbits;
      memcpy(&fbits, &f, sizeof fbits);
      wrong += tc_bits(&c.t, i) != want || tc_bits(&wide.t, i) != fbits;
    }
    if (wrong) TPRT__FAIL("%lld elements are not round(residual + sum)", (long long)wrong);
    // In place: residual_out may be the residual.
    TPRT_EXPECT_OK(tprt_cpu_add(&sum.t, &res.t, &res.t));
    TPRT_EXPECT(tc_same_bytes(&res.t, &c.t));
    tc_free(&sum);
    tc_free(&res);
    tc_free(&c);
    tc_free(&wide);
  }
  tc_tensor_t f = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)3),
              b = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)3);
  tc_tensor_t h = tc_make(TPRT_DTYPE_F16, 2, (int64_t)2, (int64_t)3),
              bt = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)3, (int64_t)2);
  TPRT_EXPECT_STATUS(tprt_cpu_add(&f.t, &b.t, &h.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "add: c must have a's shape and dtype [2,3] f32 (or, for an f32 a, b's dtype); got [2,3] f16");
  TPRT_EXPECT_STATUS(tprt_cpu_add(&f.t, &bt.t, &b.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "add: a and b must have the same shape and dtype; a is [2,3] f32, b is [3,2] bf16");
  // Only an f32 a takes another dtype: a bf16 a plus an f16 b, and mul, are refused.
  TPRT_EXPECT_STATUS(tprt_cpu_add(&b.t, &h.t, &b.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "add: a and b must have the same shape and dtype; a is [2,3] bf16, b is [2,3] f16");
  TPRT_EXPECT_STATUS(tprt_cpu_mul(&f.t, &b.t, &b.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "mul: a and b must have the same shape and dtype; a is [2,3] f32, b is [2,3] bf16");
  tc_free(&f);
  tc_free(&b);
  tc_free(&h);
  tc_free(&bt);
}

TPRT_TEST(elementwise_invalid_arguments) {
  tc_tensor_t a = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)2, (int64_t)3),
              b = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)3, (int64_t)2);
  tc_tensor_t c = tc_make(TPRT_DTYPE_F16, 2, (int64_t)2, (int64_t)3),
              i = tc_make(TPRT_DTYPE_I32, 2, (int64_t)2, (int64_t)3);
  TPRT_EXPECT_STATUS(tprt_cpu_add(&a.t, &b.t, &a.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "add: a and b must have the same shape and dtype; a is [2,3] bf16, b is [3,2] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_mul(&a.t, &a.t, &c.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "mul: c must have a's shape and dtype [2,3] bf16; got [2,3] f16");
  TPRT_EXPECT_STATUS(tprt_cpu_add(&i.t, &i.t, &i.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "add: a must be a rank-2 bf16, f16 or f32 tensor; got [2,3] i32");
  TPRT_EXPECT_STATUS(tprt_cpu_copy(&a.t, &b.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "copy: dst must be src's shape [2,3] bf16; got [3,2] bf16");
  TPRT_EXPECT_STATUS(tprt_cpu_copy(&a.t, &i.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "copy: converting bf16 to i32 is not supported (only between bf16, f16 and f32)");
  tc_free(&a);
  tc_free(&b);
  tc_free(&c);
  tc_free(&i);
}

TPRT_TEST(copy_converts_with_rne) {
  tc_tensor_t f = tc_make(TPRT_DTYPE_F32, 1, (int64_t)4), h = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)4);
  tc_tensor_t back = tc_make(TPRT_DTYPE_F32, 1, (int64_t)4), f2 = tc_make(TPRT_DTYPE_F32, 1, (int64_t)4);
  const float v[4] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -0.0f, 65504.0f};
  memcpy(f.t.data, v, sizeof v);
  TPRT_EXPECT_OK(tprt_cpu_copy(&f.t, &h.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&h.t, 0), 0x3F80);
  TPRT_EXPECT_EQ_BITS(tc_bits(&h.t, 1), 0x3F82);
  TPRT_EXPECT_EQ_BITS(tc_bits(&h.t, 2), 0x8000);
  TPRT_EXPECT_OK(tprt_cpu_copy(&h.t, &back.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&back.t, 0), 0x3F800000u);
  TPRT_EXPECT_OK(tprt_cpu_copy(&f.t, &f2.t));
  TPRT_EXPECT(tc_same_bytes(&f.t, &f2.t));
  tc_tensor_t i1 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)3), i2 = tc_make(TPRT_DTYPE_I64, 1, (int64_t)3);
  ((int64_t*)i1.t.data)[2] = -7;
  TPRT_EXPECT_OK(tprt_cpu_copy(&i1.t, &i2.t));
  TPRT_EXPECT_EQ_I64(((int64_t*)i2.t.data)[2], -7);
  tc_free(&f);
  tc_free(&h);
  tc_free(&back);
  tc_free(&f2);
  tc_free(&i1);
  tc_free(&i2);
}

// Every sharding of a logical [6,10] tensor sees the same values: filled whole, or as 2x2 row/
// column blocks at their offsets.
TPRT_TEST(fill_philox_is_sharding_invariant) {
  for (int d = 0; d < 3; ++d) {
    tc_tensor_t full = tc_make(kDtypes[d], 2, (int64_t)6, (int64_t)10);
    TPRT_EXPECT_OK(tprt_cpu_fill_philox(&full.t, 42, 7, -0.5f, 0.5f, 0, 0, 10));
    for (int64_t i = 0; i < 60; ++i) {
      double v = tc_get(&full.t, i);
      TPRT_EXPECT(v >= -0.5 && v <= 0.5);
      // Element (i, j) is fmaf(hi - lo, u, lo) with u from counter i·10 + j, rounded.
      tc_tensor_t one = tc_make(kDtypes[d], 1, (int64_t)1);
      tc_set(&one.t, 0, fmaf(1.0f, tprt_philox_uniform(42, 7, (uint64_t)i), -0.5f));
      TPRT_EXPECT_EQ_BITS(tc_bits(&full.t, i), tc_bits(&one.t, 0));
      tc_free(&one);
    }
    for (int64_t r0 = 0; r0 < 6; r0 += 3)
      for (int64_t c0 = 0; c0 < 10; c0 += 5) {
        tc_tensor_t shard = tc_make(kDtypes[d], 2, (int64_t)3, (int64_t)5);
        TPRT_EXPECT_OK(tprt_cpu_fill_philox(&shard.t, 42, 7, -0.5f, 0.5f, r0, c0, 10));
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 5; ++j)
            TPRT_EXPECT_EQ_BITS(tc_bits(&shard.t, i * 5 + j), tc_bits(&full.t, (r0 + i) * 10 + c0 + j));
        tc_free(&shard);
      }
    // A rank-3 tensor is viewed as [rows, last dim]: [2,3,10] equals the [6,10] fill.
    tc_tensor_t t3 = tc_make(kDtypes[d], 3, (int64_t)2, (int64_t)3, (int64_t)10);
    TPRT_EXPECT_OK(tprt_cpu_fill_philox(&t3.t, 42, 7, -0.5f, 0.5f, 0, 0, 10));
    TPRT_EXPECT(tc_same_bytes(&t3.t, &full.t));
    // Another seed or stream gives other values.
    TPRT_EXPECT_OK(tprt_cpu_fill_philox(&t3.t, 42, 8, -0.5f, 0.5f, 0, 0, 10));
    TPRT_EXPECT(!tc_same_bytes(&t3.t, &full.t));
    tc_free(&t3);
    tc_free(&full);
  }
  tc_tensor_t t = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)4);
  TPRT_EXPECT_STATUS(tprt_cpu_fill_philox(&t.t, 1, 0, 0.0f, 1.0f, 0, 8, 10), TPRT_STATUS_INVALID_ARGUMENT,
                     "fill_philox: the block at (row_offset=0, col_offset=8) of t [2,4] f32 does not fit in "
                     "logical_cols=10");
  TPRT_EXPECT_STATUS(tprt_cpu_fill_philox(&t.t, 1, 0, 0.0f, INFINITY, 0, 0, 10), TPRT_STATUS_INVALID_ARGUMENT,
                     "fill_philox: lo=0 and hi=inf must be finite");
  tc_free(&t);
}
