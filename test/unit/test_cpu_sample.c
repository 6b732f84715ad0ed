// Unit tests of the generation kernels (cpu_sample.c): kvcache_write in place and into a copy,
// and tp.sample's per-row properties: a row's token depends on its own logits and parameters only,
// greedy and the thresholds of top_k and top_p, a temperature that sharpens, the row's Philox
// stream, and argument errors.
#include "test_cpu_util.h"
#include "tprt_sample_rows.h"

// A cache of B sequences x C rows of width W, every element its row index + column / 100.
static tc_tensor_t make_cache(int64_t b, int64_t c, int64_t w) {
  tc_tensor_t t = tc_make(TPRT_DTYPE_F32, 2, b * c, w);
  for (int64_t i = 0; i < b * c * w; ++i) ((float*)t.t.data)[i] = (float)(i / w) + (float)(i % w) / 100.0f;
  return t;
}

TPRT_TEST(kvcache_write_in_place_and_copied) {
  const int64_t B = 3, C = 6, W = 4, S = 2;
  tc_tensor_t cache = make_cache(B, C, W), copy = tc_make(TPRT_DTYPE_F32, 2, B * C, W);
  tc_tensor_t fresh = tc_make(TPRT_DTYPE_F32, 2, B * S, W), len = tc_make(TPRT_DTYPE_I32, 1, B);
  for (int64_t i = 0; i < B * S * W; ++i) ((float*)fresh.t.data)[i] = -1.0f - (float)i;
  int32_t lens[3] = {0, 4, 2};
  memcpy(len.t.data, lens, sizeof lens);
  tc_tensor_t before = make_cache(B, C, W);
  TPRT_EXPECT_OK(tprt_cpu_kvcache_write(&cache.t, &fresh.t, &len.t, &copy.t, S));
  TPRT_EXPECT(tc_same_bytes(&cache.t, &before.t));  // a copy leaves the cache as it was
  TPRT_EXPECT_OK(tprt_cpu_kvcache_write(&cache.t, &fresh.t, &len.t, &cache.t, S));  // in place
  TPRT_EXPECT(tc_same_bytes(&cache.t, &copy.t));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < C; ++r)
      for (int64_t j = 0; j < W; ++j) {
        float got = ((float*)cache.t.data)[(b * C + r) * W + j];
        int64_t i = r - lens[b];
        float want = i >= 0 && i < S ? ((float*)fresh.t.data)[(b * S + i) * W + j] : ((float*)before.t.data)[(b * C + r) * W + j];
        TPRT_EXPECT(got == want);
      }
  lens[1] = 5;  // 5 + 2 > 6 rows
  memcpy(len.t.data, lens, sizeof lens);
  TPRT_EXPECT_STATUS(tprt_cpu_kvcache_write(&cache.t, &fresh.t, &len.t, &cache.t, S), TPRT_STATUS_OUT_OF_RANGE,
                     "cache_len[1] = 5 plus the 2 new rows is outside the cache's 6 rows per sequence");
  TPRT_EXPECT_STATUS(tprt_cpu_kvcache_write(&cache.t, &fresh.t, &len.t, &cache.t, 3), TPRT_STATUS_INVALID_ARGUMENT,
                     "new must be [B*seq_len, W]");
  tc_free(&cache), tc_free(&copy), tc_free(&fresh), tc_free(&len), tc_free(&before);
}

typedef struct {
  tc_tensor_t logits, seed, request, position, temperature, top_k, top_p, token;
} sample_t;

static sample_t make_sample(int64_t b, int64_t v) {
  sample_t s = {tc_make(TPRT_DTYPE_F32, 2, b, v), tc_make(TPRT_DTYPE_I64, 1, b), tc_make(TPRT_DTYPE_I32, 1, b),
                tc_make(TPRT_DTYPE_I32, 1, b),    tc_make(TPRT_DTYPE_F32, 1, b), tc_make(TPRT_DTYPE_I32, 1, b),
                tc_make(TPRT_DTYPE_F32, 1, b),    tc_make(TPRT_DTYPE_I32, 1, b)};
  for (int64_t i = 0; i < b; ++i) {
    ((int64_t*)s.seed.t.data)[i] = 42;
    ((int32_t*)s.request.t.data)[i] = (int32_t)i;
    ((float*)s.temperature.t.data)[i] = 1.0f;
    ((float*)s.top_p.t.data)[i] = 1.0f;
  }
  tc_fill(&s.logits.t, 3, -4.0, 4.0);
  return s;
}

static tprt_status_t run_sample(sample_t* s) {
  return tprt_cpu_sample(&s->logits.t, &s->seed.t, &s->request.t, &s->position.t, &s->temperature.t, &s->top_k.t,
                         &s->top_p.t, &s->token.t);
}

static void free_sample(sample_t* s) {
  tc_tensor_t* all[] = {&s->logits, &s->seed, &s->request, &s->position, &s->temperature, &s->top_k, &s->top_p, &s->token};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

static int32_t tok(sample_t* s, int64_t i) { return ((int32_t*)s->token.t.data)[i]; }

TPRT_TEST(sample_rows_are_independent) {
  const int64_t B = 48, V = 50;
  sample_t all = make_sample(B, V);
  for (int64_t i = 0; i < B; ++i) {
    ((int32_t*)all.top_k.t.data)[i] = (int32_t)(i % 4) * 5;
    ((float*)all.top_p.t.data)[i] = i % 3 == 0 ? 0.7f : 1.0f;
    ((float*)all.temperature.t.data)[i] = 0.25f * (float)(i % 5);
  }
  TPRT_EXPECT_OK(run_sample(&all));
  // Each row alone (a batch of 1, with its own parameters) draws the same token.
  for (int64_t i = 0; i < B; ++i) {
    sample_t one = make_sample(1, V);
    memcpy(one.logits.t.data, (float*)all.logits.t.data + i * V, (size_t)V * sizeof(float));
    ((int32_t*)one.request.t.data)[0] = (int32_t)i;
    ((int32_t*)one.top_k.t.data)[0] = ((int32_t*)all.top_k.t.data)[i];
    ((float*)one.top_p.t.data)[0] = ((float*)all.top_p.t.data)[i];
    ((float*)one.temperature.t.data)[0] = ((float*)all.temperature.t.data)[i];
    TPRT_EXPECT_OK(run_sample(&one));
    TPRT_EXPECT_EQ_I64(tok(&one, 0), tok(&all, i));
    free_sample(&one);
  }
  free_sample(&all);
}

TPRT_TEST(sample_thresholds_and_streams) {
  const int64_t B = 400, V = 30;
  sample_t s = make_sample(B, V);
  for (int64_t i = 0; i < B; ++i) memcpy((float*)s.logits.t.data + i * V, s.logits.t.data, (size_t)V * sizeof(float));
  const float* z = (const float*)s.logits.t.data;
  // Greedy: the largest logit.
  int64_t arg = 0;
  for (int64_t j = 1; j < V; ++j)
    if (z[j] > z[arg]) arg = j;
  for (int64_t i = 0; i < B; ++i) ((float*)s.temperature.t.data)[i] = 0.0f;
  TPRT_EXPECT_OK(run_sample(&s));
  for (int64_t i = 0; i < B; ++i) TPRT_EXPECT_EQ_I64(tok(&s, i), arg);
  // top_k = 4: only the 4 largest logits, and (400 draws) each of them at least once.
  float sorted[30];
  memcpy(sorted, z, sizeof sorted);
  for (int a = 0; a < V; ++a)
    for (int b = a + 1; b < V; ++b)
      if (sorted[b] > sorted[a]) {
        float t = sorted[a];
        sorted[a] = sorted[b];
        sorted[b] = t;
      }
  for (int64_t i = 0; i < B; ++i) {
    ((float*)s.temperature.t.data)[i] = 2.0f;
    ((int32_t*)s.top_k.t.data)[i] = 4;
  }
  TPRT_EXPECT_OK(run_sample(&s));
  int seen[30] = {0};
  for (int64_t i = 0; i < B; ++i) {
    TPRT_EXPECT(tok(&s, i) >= 0 && z[tok(&s, i)] >= sorted[3]);
    if (tok(&s, i) >= 0) seen[tok(&s, i)] = 1;
  }
  int distinct = 0;
  for (int j = 0; j < V; ++j) distinct += seen[j];
  TPRT_EXPECT_EQ_I64(distinct, 4);
  // top_p tiny: the nucleus is the largest logit alone.
  for (int64_t i = 0; i < B; ++i) {
    ((int32_t*)s.top_k.t.data)[i] = 0;
    ((float*)s.top_p.t.data)[i] = 1e-6f;
  }
  TPRT_EXPECT_OK(run_sample(&s));
  for (int64_t i = 0; i < B; ++i) TPRT_EXPECT_EQ_I64(tok(&s, i), arg);
  // The stream: another position or seed draws other tokens for some rows; the same, the same.
  for (int64_t i = 0; i < B; ++i) ((float*)s.top_p.t.data)[i] = 1.0f;
  TPRT_EXPECT_OK(run_sample(&s));
  int32_t first[400];
  for (int64_t i = 0; i < B; ++i) first[i] = tok(&s, i);
  TPRT_EXPECT_OK(run_sample(&s));
  int moved = 0;
  for (int64_t i = 0; i < B; ++i) TPRT_EXPECT_EQ_I64(tok(&s, i), first[i]);
  for (int64_t i = 0; i < B; ++i) ((int32_t*)s.position.t.data)[i] = 1;
  TPRT_EXPECT_OK(run_sample(&s));
  for (int64_t i = 0; i < B; ++i) moved += tok(&s, i) != first[i];
  TPRT_EXPECT(moved > B / 4);
  TPRT_EXPECT(tprt_sample_stream(3, 1) != tprt_sample_stream(1, 3));
  free_sample(&s);
}

TPRT_TEST(sample_argument_errors) {
  sample_t s = make_sample(3, 8);
  ((float*)s.top_p.t.data)[1] = 0.0f;
  TPRT_EXPECT_STATUS(run_sample(&s), TPRT_STATUS_INVALID_ARGUMENT, "row 1: top_p = 0 must be in (0, 1]");
  ((float*)s.top_p.t.data)[1] = 1.0f;
  ((float*)s.temperature.t.data)[2] = -1.0f;
  TPRT_EXPECT_STATUS(run_sample(&s), TPRT_STATUS_INVALID_ARGUMENT, "row 2: temperature = -1 must be finite and >= 0");
  ((float*)s.temperature.t.data)[2] = 1.0f;
  ((int32_t*)s.top_k.t.data)[0] = -2;
  TPRT_EXPECT_STATUS(run_sample(&s), TPRT_STATUS_INVALID_ARGUMENT, "row 0: top_k = -2 must be >= 0");
  ((int32_t*)s.top_k.t.data)[0] = 0;
  s.token.t.dims[0] = 2;
  TPRT_EXPECT_STATUS(run_sample(&s), TPRT_STATUS_INVALID_ARGUMENT, "token");
  s.token.t.dims[0] = 3;
  free_sample(&s);
}
