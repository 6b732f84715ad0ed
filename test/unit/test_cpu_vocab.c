// Unit tests of the vocabulary kernels (cpu_vocab.c): embedding and embedding_grad, the
// cross-entropy (loss and lse, its statistics and their combination, the loss of given logits) and
// both of its gradients.
// They check the kernels against float64 references (themselves checked against central finite
// differences), the documented f32 order bit for bit, the vocabulary-parallel and data-parallel
// decompositions bit for bit, duplicate ids and ignored targets, and argument errors.
#include "test_cpu_util.h"

static const int kDtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

static int32_t* ids_of(tc_tensor_t* t) { return (int32_t*)t->t.data; }
static float* f32_of(tc_tensor_t* t) { return (float*)t->t.data; }

static float round_to(int dtype, float v) {
  if (dtype == TPRT_DTYPE_BF16) return tprt_bf16_to_f32(tprt_f32_to_bf16(v));
  if (dtype == TPRT_DTYPE_F16) return tprt_f16_to_f32(tprt_f32_to_f16(v));
  return v;
}

// The bits |v| has once rounded to |dtype| (16 or 32 bits, as tc_bits reads them).
static uint32_t bits_in(int dtype, float v) {
  if (dtype == TPRT_DTYPE_BF16) return tprt_f32_to_bf16(v);
  if (dtype == TPRT_DTYPE_F16) return tprt_f32_to_f16(v);
  return tprt_f32_bits(v);
}

// Rows [r0, r0 + n) of a rank-1 or rank-2 tensor, as a view of its data (a shard).
static tprt_tensor_t rows_of(const tprt_tensor_t* t, int64_t r0, int64_t n) {
  tprt_tensor_t v = *t;
  size_t row = tprt_dtype_bytes(t->dtype, t->rank == 2 ? t->dims[1] : 1);
  v.dims[0] = n;
  v.data = (char*)t->data + (size_t)r0 * row;
  return v;
}

static double* to_f64(const tprt_tensor_t* t) {
  int64_t n = tprt_tensor_numel(t);
  double* v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  for (int64_t i = 0; i < n; ++i) v[i] = tc_get(t, i);
  return v;
}

// Targets in [0, v); with |ignore|, every token t with t % 5 == 3 is ignored (-1, -2 or -3).
static void fill_targets(tc_tensor_t* tg, int64_t v, uint64_t seed, bool ignore) {
  uint64_t s = seed;
  for (int64_t t = 0; t < tg->t.dims[0]; ++t)
    ids_of(tg)[t] = ignore && t % 5 == 3 ? -1 - (int32_t)(t % 3) : (int32_t)(tc_next(&s) % (uint64_t)v);
}

// dloss in ±[0.25, 2) (random signs).
static void fill_dloss(tc_tensor_t* dl, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t t = 0; t < dl->t.dims[0]; ++t) {
    double g = tc_uniform(&s, 0.25, 2.0);
    f32_of(dl)[t] = (float)(tc_next(&s) & 1 ? g : -g);
  }
}

// Exact float64 logits z[T,V] = x·wᵀ.
static void ref_logits(const double* x, const double* w, int64_t T, int64_t V, int64_t H, double* z) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = 0; v < V; ++v) {
      double d = 0.0;
      for (int64_t h = 0; h < H; ++h) d += x[t * H + h] * w[v * H + h];
      z[t * V + v] = d;
    }
}

// The float64 cross-entropy of logits z[T,V]: lse and loss per token (0 for an ignored token),
// the analytic logits' gradient dz = (softmax - onehot)·dloss (0 for an ignored token), and the
// returned L = Σ_t dloss[t]·loss[t]. Any output may be NULL.
static double ref_ce(const double* z, const int32_t* tg, const double* g, int64_t T, int64_t V, double* lse,
                     double* loss, double* dz) {
  double total = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    const double* zr = z + t * V;
    double m = -INFINITY, s = 0.0;
    for (int64_t v = 0; v < V; ++v) m = zr[v] > m ? zr[v] : m;
    for (int64_t v = 0; v < V; ++v) s += exp(zr[v] - m);
    double l = m + log(s), lo = tg[t] < 0 ? 0.0 : l - zr[tg[t]];
    if (lse) lse[t] = l;
    if (loss) loss[t] = lo;
    total += g[t] * lo;
    for (int64_t v = 0; dz && v < V; ++v) dz[t * V + v] = tg[t] < 0 ? 0.0 : (exp(zr[v] - l) - (v == tg[t])) * g[t];
  }
  return total;
}

// dx[T,H] = dz·w and dw[V,H] = dzᵀ·x in float64, with the magnitudes of their terms (tolerances).
static void ref_grads(const double* dz, const double* x, const double* w, int64_t T, int64_t V, int64_t H, double* dx,
                      double* dxm, double* dw, double* dwm) {
  memset(dx, 0, (size_t)(T * H) * sizeof(double));
  memset(dxm, 0, (size_t)(T * H) * sizeof(double));
  memset(dw, 0, (size_t)(V * H) * sizeof(double));
  memset(dwm, 0, (size_t)(V * H) * sizeof(double));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = 0; v < V; ++v)
      for (int64_t h = 0; h < H; ++h) {
        double d = dz[t * V + v];
        dx[t * H + h] += d * w[v * H + h];
        dxm[t * H + h] += fabs(d * w[v * H + h]);
        dw[v * H + h] += d * x[t * H + h];
        dwm[v * H + h] += fabs(d * x[t * H + h]);
      }
}

// docs/numerics.md's loss of one token from its f32 logits z[0..V) with C blocks, written out with
// the header's primitives: per block the maximum and Σ exp(z - max), the pairwise tree, log.
static float doc_loss(const float* z, int64_t V, int c, int32_t target, float* lse) {
  float m[64], s[64];
  int64_t size = tprt_kacc_chunk_size(V, c);
  for (int b = 0; b < c; ++b) {
    m[b] = -INFINITY;
    s[b] = 0.0f;
    for (int64_t v = b * size; v < (b + 1) * size && v < V; ++v) m[b] = tprt_max_keep(m[b], z[v]);
    for (int64_t v = b * size; v < (b + 1) * size && v < V; ++v) s[b] = s[b] + tprt_expf(z[v] - m[b]);
  }
  tprt_ce_tree(m, s, c);
  *lse = m[0] + tprt_logf(s[0]);
  return target < 0 ? 0.0f : *lse - (-0.0f + z[target]);
}

// Odd shapes (V = 37 and V = 5 not divisible by chunks = 8; V = 5 leaves blocks empty) and one
// even shape, as {T, V, H, chunks}.
static const int64_t kShapes[][4] = {{13, 37, 19, 8}, {4, 5, 3, 8}, {16, 64, 32, 4}, {3, 1, 2, 2}};

// Per dtype and shape: cross_entropy, dgrad (x's dtype and f32) and wgrad against the float64
// reference built on the kernel's rounded logits (the rounding is part of the definition), and
// bit for bit against the documented order written out here.
TPRT_TEST(cross_entropy_matches_f64_reference_and_documented_order) {
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof kShapes / sizeof kShapes[0]; ++sh) {
      int dt = kDtypes[d];
      int64_t T = kShapes[sh][0], V = kShapes[sh][1], H = kShapes[sh][2];
      int c = (int)kShapes[sh][3];
      tc_tensor_t x = tc_make(dt, 2, T, H), w = tc_make(dt, 2, V, H), tg = tc_make(TPRT_DTYPE_I32, 1, T);
      tc_tensor_t dl = tc_make(TPRT_DTYPE_F32, 1, T), loss = tc_make(TPRT_DTYPE_F32, 1, T),
                  lse = tc_make(TPRT_DTYPE_F32, 1, T);
      tc_tensor_t dx = tc_make(dt, 2, T, H), dx32 = tc_make(TPRT_DTYPE_F32, 2, T, H),
                  dw = tc_make(TPRT_DTYPE_F32, 2, V, H);
      tc_fill(&x.t, 11 + sh, -1.0, 1.0);
      tc_fill(&w.t, 12 + sh, -1.0, 1.0);
      fill_targets(&tg, V, 13 + sh, true);
      fill_dloss(&dl, 14 + sh);
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &tg.t, &loss.t, &lse.t, c));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dx.t, 0, V, c, c));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dx32.t, 0, V, c, c));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_wgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dw.t, 0, V, c, c));
      // The kernel's logits: the canonical dot product over H, rounded to x's dtype.
      double *xv = to_f64(&x.t), *wv = to_f64(&w.t), *g = to_f64(&dl.t);
      float *zf = malloc((size_t)(T * V) * sizeof(float)), *dzf = malloc((size_t)(T * V) * sizeof(float));
      float *xr = malloc((size_t)H * sizeof(float)), *wr = malloc((size_t)H * sizeof(float));
      float *col = malloc((size_t)(T + V) * sizeof(float)), *col2 = malloc((size_t)(T + V) * sizeof(float));
      double *z = malloc((size_t)(T * V) * sizeof(double)), *dz = malloc((size_t)(T * V) * sizeof(double));
      double *rl = malloc((size_t)T * sizeof(double)), *rs = malloc((size_t)T * sizeof(double)),
             *sc = malloc((size_t)T * sizeof(double));
      double *rdx = malloc((size_t)(T * H) * sizeof(double)), *mdx = malloc((size_t)(T * H) * sizeof(double));
      double *rdw = malloc((size_t)(V * H) * sizeof(double)), *mdw = malloc((size_t)(V * H) * sizeof(double));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t v = 0; v < V; ++v) {
          for (int64_t h = 0; h < H; ++h) xr[h] = (float)xv[t * H + h], wr[h] = (float)wv[v * H + h];
          zf[t * V + v] = round_to(dt, tprt_dot_canonical(xr, wr, H, c));
          z[t * V + v] = zf[t * V + v];
        }
      ref_ce(z, ids_of(&tg), g, T, V, rs, rl, dz);
      ref_grads(dz, xv, wv, T, V, H, rdx, mdx, rdw, mdw);
      char what[96];
      snprintf(what, sizeof what, "%s [T,V,H] = [%lld,%lld,%lld] chunks %d", tprt_dtype_name(dt), (long long)T,
               (long long)V, (long long)H, c);
      char sub[160];
      // lse and the loss in f32 from exact logits: a few f32 roundings of |lse| + |z[target]|.
      for (int64_t t = 0; t < T; ++t) sc[t] = ids_of(&tg)[t] < 0 ? 0.0 : fabs(rs[t]) + fabs(z[t * V + ids_of(&tg)[t]]);
      snprintf(sub, sizeof sub, "loss %s", what);
      tc_check_near(sub, &loss.t, rl, sc, 1e-5);
      snprintf(sub, sizeof sub, "lse %s", what);
      tc_check_near(sub, &lse.t, rs, NULL, 1e-5);
      // dz is rounded to x's dtype: relative errors of that format in the terms of each sum.
      snprintf(sub, sizeof sub, "dx %s", what);
      tc_check_near(sub, &dx.t, rdx, mdx, tc_rtol(dt));
      snprintf(sub, sizeof sub, "dx f32 %s", what);
      tc_check_near(sub, &dx32.t, rdx, mdx, tc_rtol(dt));
      snprintf(sub, sizeof sub, "dw %s", what);
      tc_check_near(sub, &dw.t, rdw, mdw, tc_rtol(dt));
      // The documented order bit for bit: loss and lse, dz, then dx = dz·w over V and dw = dzᵀ·x
      // over T (canonical, |c| chunks); dx in x's dtype is the f32 value rounded once.
      int64_t bad = 0;
      for (int64_t t = 0; t < T; ++t) {
        float l, lo = doc_loss(zf + t * V, V, c, ids_of(&tg)[t], &l);
        bad += tc_bits(&loss.t, t) != tprt_f32_bits(lo);
        bad += tc_bits(&lse.t, t) != tprt_f32_bits(l);
        float ls = f32_of(&lse)[t];
        for (int64_t v = 0; v < V; ++v)
          dzf[t * V + v] = ids_of(&tg)[t] < 0
                               ? 0.0f
                               : round_to(dt, tprt_ce_dlogit(zf[t * V + v], ls, v == ids_of(&tg)[t], f32_of(&dl)[t]));
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t v = 0; v < V; ++v) col[v] = (float)wv[v * H + h];
          float want = tprt_dot_canonical(dzf + t * V, col, V, c);
          bad += tc_bits(&dx32.t, t * H + h) != tprt_f32_bits(want);
          bad += tc_bits(&dx.t, t * H + h) != bits_in(dt, want);
        }
      for (int64_t v = 0; v < V; ++v)
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t t = 0; t < T; ++t) col[t] = dzf[t * V + v], col2[t] = (float)xv[t * H + h];
          bad += tc_bits(&dw.t, v * H + h) != tprt_f32_bits(tprt_dot_canonical(col, col2, T, c));
        }
      if (bad) TPRT__FAIL("%s: %lld differences from the documented order", what, (long long)bad);
      void* bufs[] = {xv, wv, g, zf, dzf, xr, wr, col, col2, z, dz, rl, rs, sc, rdx, mdx, rdw, mdw};
      for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) free(bufs[i]);
      tc_tensor_t* all[] = {&x, &w, &tg, &dl, &loss, &lse, &dx, &dx32, &dw};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
    }
}

// The float64 analytic gradients of L = Σ_t dloss[t]·loss[t] (the reference above) against
// central finite differences of the float64 forward, for every element of x and w, with an
// ignored token among them; x, w and dloss hold f32 values (a small f32 case).
TPRT_TEST(cross_entropy_reference_matches_finite_differences) {
  enum { T = 4, V = 7, H = 5 };
  const double step = 0x1p-18;
  uint64_t s = 31;
  double x[T * H], w[V * H], g[T], z[T * V], dz[T * V], dx[T * H], dxm[T * H], dw[V * H], dwm[V * H];
  int32_t tg[T] = {3, -1, 0, 6};
  for (int i = 0; i < T * H; ++i) x[i] = (float)tc_uniform(&s, -2.0, 2.0);
  for (int i = 0; i < V * H; ++i) w[i] = (float)tc_uniform(&s, -2.0, 2.0);
  for (int i = 0; i < T; ++i) g[i] = (float)tc_uniform(&s, -1.5, 1.5);
  ref_logits(x, w, T, V, H, z);
  ref_ce(z, tg, g, T, V, NULL, NULL, dz);
  ref_grads(dz, x, w, T, V, H, dx, dxm, dw, dwm);
  double* params[2] = {x, w};
  double* grads[2] = {dx, dw};
  int counts[2] = {T * H, V * H};
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < counts[p]; ++i) {
      double keep = params[p][i];
      params[p][i] = keep + step;
      ref_logits(x, w, T, V, H, z);
      double up = ref_ce(z, tg, g, T, V, NULL, NULL, NULL);
      params[p][i] = keep - step;
      ref_logits(x, w, T, V, H, z);
      double down = ref_ce(z, tg, g, T, V, NULL, NULL, NULL);
      params[p][i] = keep;
      TPRT_EXPECT_NEAR(grads[p][i], (up - down) / (2 * step), 1e-8, 1e-6);
    }
  // The ignored token's row of dx is exactly zero in the reference too.
  for (int h = 0; h < H; ++h) TPRT_EXPECT(dx[1 * H + h] == 0.0);
}

// embedding is a byte copy (a shard writes -0.0 for the ids it does not hold); embedding_grad is
// the float64 sum within f32 rounding, +0.0 for the rows no token names.
TPRT_TEST(embedding_matches_reference) {
  int64_t T = 13, V = 37, H = 19;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    size_t es = tprt_dtype_bytes(dt, 1);
    tc_tensor_t ids = tc_make(TPRT_DTYPE_I32, 1, T), table = tc_make(dt, 2, V, H), y = tc_make(dt, 2, T, H),
                ys = tc_make(dt, 2, T, H);
    tc_tensor_t dy = tc_make(dt, 2, T, H), dtab = tc_make(TPRT_DTYPE_F32, 2, V, H);
    tc_fill(&table.t, 41 + d, -3.0, 3.0);
    tc_fill(&dy.t, 42 + d, -1.0, 1.0);
    fill_targets(&ids, V, 43 + d, false);
    ids_of(&ids)[5] = ids_of(&ids)[11] = ids_of(&ids)[2];
    TPRT_EXPECT_OK(tprt_cpu_embedding(&ids.t, &table.t, &y.t, 0, V));
    tprt_tensor_t shard = rows_of(&table.t, 10, 9);
    TPRT_EXPECT_OK(tprt_cpu_embedding(&ids.t, &shard, &ys.t, 10, V));
    for (int64_t t = 0; t < T; ++t) {
      int32_t id = ids_of(&ids)[t];
      TPRT_EXPECT(memcmp((char*)y.t.data + t * H * es, (char*)table.t.data + id * H * es, H * es) == 0);
      uint32_t neg0 = dt == TPRT_DTYPE_F32 ? 0x80000000u : 0x8000u;
      for (int64_t h = 0; h < H; ++h)
        TPRT_EXPECT_EQ_BITS(tc_bits(&ys.t, t * H + h), id >= 10 && id < 19 ? tc_bits(&y.t, t * H + h) : neg0);
    }
    TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ids.t, &dy.t, &dtab.t, 0, V, 4));
    double *ref = calloc((size_t)(V * H), sizeof(double)), *mag = calloc((size_t)(V * H), sizeof(double));
    int named[37] = {0};
    for (int64_t t = 0; t < T; ++t) {
      int32_t id = ids_of(&ids)[t];
      named[id] = 1;
      for (int64_t h = 0; h < H; ++h) {
        ref[id * H + h] += tc_get(&dy.t, t * H + h);
        mag[id * H + h] += fabs(tc_get(&dy.t, t * H + h));
      }
    }
    tc_check_near("embedding_grad", &dtab.t, ref, mag, 1e-6);  // a few f32 roundings of Σ|dy|
    for (int64_t v = 0; v < V; ++v)
      for (int64_t h = 0; !named[v] && h < H; ++h) TPRT_EXPECT_EQ_BITS(tc_bits(&dtab.t, v * H + h), 0);
    free(ref);
    free(mag);
    tc_tensor_t* all[] = {&ids, &table, &y, &ys, &dy, &dtab};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
  }
}

// Vocabulary parallelism, R in {1, 2, 4, 8} with C = 8 and C | V: the R shards' stats in rank
// order combined give loss and lse bitwise; the shards' f32 partial dx combined by the pairwise
// tree over ranks give the whole f32 dx bitwise; each shard's dw rows are the whole dw's rows.
TPRT_TEST(cross_entropy_vocab_parallel_bitwise) {
  enum { C = 8 };
  int64_t T = 20, V = 64, H = 24;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    tc_tensor_t x = tc_make(dt, 2, T, H), w = tc_make(dt, 2, V, H), tg = tc_make(TPRT_DTYPE_I32, 1, T);
    tc_tensor_t dl = tc_make(TPRT_DTYPE_F32, 1, T), loss = tc_make(TPRT_DTYPE_F32, 1, T),
                lse = tc_make(TPRT_DTYPE_F32, 1, T);
    tc_tensor_t dx = tc_make(TPRT_DTYPE_F32, 2, T, H), dxd = tc_make(dt, 2, T, H),
                dw = tc_make(TPRT_DTYPE_F32, 2, V, H);
    tc_fill(&x.t, 51 + d, -1.5, 1.5);
    tc_fill(&w.t, 52 + d, -1.5, 1.5);
    fill_targets(&tg, V, 53 + d, true);
    fill_dloss(&dl, 54 + d);
    TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &tg.t, &loss.t, &lse.t, C));
    TPRT_EXPECT_OK(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dx.t, 0, V, C, C));
    TPRT_EXPECT_OK(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dxd.t, 0, V, C, C));
    TPRT_EXPECT_OK(tprt_cpu_cross_entropy_wgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dw.t, 0, V, C, C));
    // dx in x's dtype is the f32 dx rounded once.
    int64_t differ = 0;
    for (int64_t i = 0; i < T * H; ++i) differ += tc_bits(&dxd.t, i) != bits_in(dt, f32_of(&dx)[i]);
    TPRT_EXPECT_EQ_I64(differ, 0);
    for (int R = 1; R <= C; R *= 2) {
      int64_t rows = V / R;
      tc_tensor_t st = tc_make(TPRT_DTYPE_F32, 2, T, (int64_t)(3 * R)), one = tc_make(TPRT_DTYPE_F32, 2, T, (int64_t)3);
      tc_tensor_t lo = tc_make(TPRT_DTYPE_F32, 1, T), ls = tc_make(TPRT_DTYPE_F32, 1, T);
      tc_tensor_t part[C], dws = tc_make(TPRT_DTYPE_F32, 2, rows, H);
      int64_t bad = 0;
      for (int r = 0; r < R; ++r) {
        tprt_tensor_t wr = rows_of(&w.t, r * rows, rows);
        TPRT_EXPECT_OK(tprt_cpu_cross_entropy_stats(&x.t, &wr, &tg.t, &one.t, r * rows, V, C, C / R));
        for (int64_t t = 0; t < T; ++t)
          memcpy(f32_of(&st) + t * 3 * R + 3 * r, f32_of(&one) + 3 * t, 3 * sizeof(float));
        part[r] = tc_make(TPRT_DTYPE_F32, 2, T, H);
        TPRT_EXPECT_OK(
            tprt_cpu_cross_entropy_dgrad(&x.t, &wr, &tg.t, &lse.t, &dl.t, &part[r].t, r * rows, V, C, C / R));
        TPRT_EXPECT_OK(tprt_cpu_cross_entropy_wgrad(&x.t, &wr, &tg.t, &lse.t, &dl.t, &dws.t, r * rows, V, C, C));
        bad += memcmp(dws.t.data, f32_of(&dw) + r * rows * H, (size_t)(rows * H) * sizeof(float)) != 0;
      }
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_combine(&st.t, &tg.t, &lo.t, &ls.t));
      bad += !tc_same_bytes(&lo.t, &loss.t) + !tc_same_bytes(&ls.t, &lse.t);
      for (int64_t i = 0; i < T * H; ++i) {
        float p[C];
        for (int r = 0; r < R; ++r) p[r] = f32_of(&part[r])[i];
        bad += tprt_f32_bits(tprt_kacc_tree(p, R)) != tc_bits(&dx.t, i);
      }
      if (bad)
        TPRT__FAIL("%s R=%d: %lld differences from the one-rank results", tprt_dtype_name(dt), R, (long long)bad);
      for (int r = 0; r < R; ++r) tc_free(&part[r]);
      tc_tensor_t* all[] = {&st, &one, &lo, &ls, &dws};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
    }
    tc_tensor_t* all[] = {&x, &w, &tg, &dl, &loss, &lse, &dx, &dxd, &dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
  }
}

// Data parallelism, R in {1, 2, 4, 8} with C = 8 and C | T: each rank's f32 dw (wgrad) and
// dtable (embedding_grad) of its T/R consecutive tokens with C/R chunks, combined by the pairwise
// tree over ranks, are the whole-batch results bit for bit; a vocabulary shard's dtable rows are
// the whole dtable's rows.
TPRT_TEST(wgrad_and_embedding_grad_parallel_bitwise) {
  enum { C = 8 };
  int64_t T = 32, V = 40, H = 12;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    tc_tensor_t x = tc_make(dt, 2, T, H), w = tc_make(dt, 2, V, H), tg = tc_make(TPRT_DTYPE_I32, 1, T);
    tc_tensor_t dl = tc_make(TPRT_DTYPE_F32, 1, T), loss = tc_make(TPRT_DTYPE_F32, 1, T),
                lse = tc_make(TPRT_DTYPE_F32, 1, T), dw = tc_make(TPRT_DTYPE_F32, 2, V, H);
    tc_tensor_t ids = tc_make(TPRT_DTYPE_I32, 1, T), dy = tc_make(dt, 2, T, H), dtab = tc_make(TPRT_DTYPE_F32, 2, V, H);
    tc_fill(&x.t, 61 + d, -1.5, 1.5);
    tc_fill(&w.t, 62 + d, -1.5, 1.5);
    tc_fill(&dy.t, 63 + d, -1.0, 1.0);
    fill_targets(&tg, V, 64 + d, true);
    fill_targets(&ids, 8, 65 + d, false);  // ids in [0, 8): many duplicates across the chunks
    ids_of(&ids)[30] = 39;
    fill_dloss(&dl, 66 + d);
    TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &tg.t, &loss.t, &lse.t, C));
    TPRT_EXPECT_OK(tprt_cpu_cross_entropy_wgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dw.t, 0, V, C, C));
    TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ids.t, &dy.t, &dtab.t, 0, V, C));
    for (int R = 1; R <= C; R *= 2) {
      int64_t n = T / R, bad = 0;
      tc_tensor_t pw[C], pe[C];
      for (int r = 0; r < R; ++r) {
        tprt_tensor_t xr = rows_of(&x.t, r * n, n), tr = rows_of(&tg.t, r * n, n), lr = rows_of(&lse.t, r * n, n),
                      gr = rows_of(&dl.t, r * n, n), ir = rows_of(&ids.t, r * n, n), yr = rows_of(&dy.t, r * n, n);
        pw[r] = tc_make(TPRT_DTYPE_F32, 2, V, H);
        pe[r] = tc_make(TPRT_DTYPE_F32, 2, V, H);
        TPRT_EXPECT_OK(tprt_cpu_cross_entropy_wgrad(&xr, &w.t, &tr, &lr, &gr, &pw[r].t, 0, V, C, C / R));
        TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ir, &yr, &pe[r].t, 0, V, C / R));
        // A vocabulary shard (R row blocks of V/R rows) computes its rows over every token.
        tc_tensor_t vs = tc_make(TPRT_DTYPE_F32, 2, V / R, H);
        TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ids.t, &dy.t, &vs.t, r * (V / R), V, C));
        bad += memcmp(vs.t.data, f32_of(&dtab) + r * (V / R) * H, (size_t)(V / R * H) * sizeof(float)) != 0;
        tc_free(&vs);
      }
      for (int64_t i = 0; i < V * H; ++i) {
        float p[C], q[C];
        for (int r = 0; r < R; ++r) p[r] = f32_of(&pw[r])[i], q[r] = f32_of(&pe[r])[i];
        bad += tprt_f32_bits(tprt_kacc_tree(p, R)) != tc_bits(&dw.t, i);
        bad += tprt_f32_bits(tprt_kacc_tree(q, R)) != tc_bits(&dtab.t, i);
      }
      if (bad)
        TPRT__FAIL("%s R=%d: %lld differences from the one-rank results", tprt_dtype_name(dt), R, (long long)bad);
      for (int r = 0; r < R; ++r) tc_free(&pw[r]), tc_free(&pe[r]);
    }
    tc_tensor_t* all[] = {&x, &w, &tg, &dl, &loss, &lse, &dw, &ids, &dy, &dtab};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
  }
}

// Vocabulary-parallel embedding: the R shards' y summed in rank order or in reverse (starting
// from the first shard's value, as an all-reduce does) is the whole lookup bit for bit, including
// a table row of alternating -0.0 and +0.0.
TPRT_TEST(embedding_vocab_parallel_sum_bitwise) {
  int64_t T = 12, V = 16, H = 6;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    tc_tensor_t ids = tc_make(TPRT_DTYPE_I32, 1, T), table = tc_make(dt, 2, V, H), y = tc_make(dt, 2, T, H);
    tc_fill(&table.t, 71 + d, -2.0, 2.0);
    fill_targets(&ids, V, 72 + d, false);
    for (int64_t h = 0; h < H; ++h) tc_set(&table.t, 5 * H + h, h % 2 ? 0.0f : -0.0f);
    ids_of(&ids)[0] = ids_of(&ids)[7] = 5;
    TPRT_EXPECT_OK(tprt_cpu_embedding(&ids.t, &table.t, &y.t, 0, V));
    TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 0), dt == TPRT_DTYPE_F32 ? 0x80000000u : 0x8000u);
    TPRT_EXPECT_EQ_BITS(tc_bits(&y.t, 1), 0);
    for (int R = 2; R <= 8; R *= 2) {
      tc_tensor_t ys[8];
      for (int r = 0; r < R; ++r) {
        ys[r] = tc_make(dt, 2, T, H);
        tprt_tensor_t tr = rows_of(&table.t, r * (V / R), V / R);
        TPRT_EXPECT_OK(tprt_cpu_embedding(&ids.t, &tr, &ys[r].t, r * (V / R), V));
      }
      int64_t bad = 0;
      for (int64_t i = 0; i < T * H; ++i) {
        float fwd = (float)tc_get(&ys[0].t, i), rev = (float)tc_get(&ys[R - 1].t, i);
        for (int r = 1; r < R; ++r)
          fwd = fwd + (float)tc_get(&ys[r].t, i), rev = rev + (float)tc_get(&ys[R - 1 - r].t, i);
        bad += (bits_in(dt, fwd) != tc_bits(&y.t, i)) + (bits_in(dt, rev) != tc_bits(&y.t, i));
      }
      if (bad) TPRT__FAIL("%s R=%d: %lld sums differ from the whole lookup", tprt_dtype_name(dt), R, (long long)bad);
      for (int r = 0; r < R; ++r) tc_free(&ys[r]);
    }
    tc_free(&ids);
    tc_free(&table);
    tc_free(&y);
  }
}

// Duplicate ids are summed in token order within a chunk. Row 2 is named by tokens 0, 2 and 3
// (token 1 and 4 name row 5): column 0 holds 1, 2^-24, 2^-24 (in token order 1.0, each 2^-24
// ties back to 1; largest last it would be 1 + 2^-23) and column 1 holds 2^-24, 2^-24, 1 (in token
// order 1 + 2^-23; largest first 1.0). Then a random case with many duplicates and T not
// divisible by the chunks, against the documented order written out here.
TPRT_TEST(embedding_grad_duplicate_ids_in_token_order) {
  tc_tensor_t ids = tc_make(TPRT_DTYPE_I32, 1, (int64_t)5), dy = tc_make(TPRT_DTYPE_F32, 2, (int64_t)5, (int64_t)2);
  tc_tensor_t dtab = tc_make(TPRT_DTYPE_F32, 2, (int64_t)8, (int64_t)2);
  const int32_t id[5] = {2, 5, 2, 2, 5};
  const float c0[5] = {1.0f, 7.0f, 0x1p-24f, 0x1p-24f, 3.0f}, c1[5] = {0x1p-24f, 0.5f, 0x1p-24f, 1.0f, 0.25f};
  for (int t = 0; t < 5; ++t) ids_of(&ids)[t] = id[t], f32_of(&dy)[2 * t] = c0[t], f32_of(&dy)[2 * t + 1] = c1[t];
  TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ids.t, &dy.t, &dtab.t, 0, 8, 1));
  TPRT_EXPECT_EQ_BITS(tc_bits(&dtab.t, 2 * 2), 0x3F800000u);
  TPRT_EXPECT_EQ_BITS(tc_bits(&dtab.t, 2 * 2 + 1), 0x3F800001u);
  TPRT_EXPECT_EQ_BITS(tc_bits(&dtab.t, 5 * 2), tprt_f32_bits(10.0f));
  TPRT_EXPECT_EQ_BITS(tc_bits(&dtab.t, 5 * 2 + 1), tprt_f32_bits(0.75f));
  TPRT_EXPECT_EQ_BITS(tc_bits(&dtab.t, 0), 0);
  tc_free(&ids);
  tc_free(&dy);
  tc_free(&dtab);
  int64_t T = 50, V = 7, H = 5;
  ids = tc_make(TPRT_DTYPE_I32, 1, T), dy = tc_make(TPRT_DTYPE_F32, 2, T, H);  // f32: sums that round
  dtab = tc_make(TPRT_DTYPE_F32, 2, V, H);
  fill_targets(&ids, V - 1, 81, false);  // row V-1 is never named
  tc_fill(&dy.t, 82, -4.0, 4.0);
  for (int c = 1; c <= 16; c *= 2) {
    TPRT_EXPECT_OK(tprt_cpu_embedding_grad(&ids.t, &dy.t, &dtab.t, 0, V, c));
    int64_t size = tprt_kacc_chunk_size(T, c), bad = 0;
    for (int64_t v = 0; v < V; ++v)
      for (int64_t h = 0; h < H; ++h) {
        float p[16] = {0};
        for (int64_t t = 0; t < T; ++t)
          if (ids_of(&ids)[t] == v) p[t / size] = p[t / size] + (float)tc_get(&dy.t, t * H + h);
        bad += tc_bits(&dtab.t, v * H + h) != tprt_f32_bits(tprt_kacc_tree(p, c));
      }
    if (bad) TPRT__FAIL("chunks=%d: %lld differences from the token-order sum", c, (long long)bad);
  }
  tc_free(&ids);
  tc_free(&dy);
  tc_free(&dtab);
}

// Ignored tokens (negative targets): loss exactly +0.0, target logit -0.0 in the stats, dx rows
// exactly +0.0 (f32 and x's dtype), and no contribution to dw or to the other tokens' dx: changing
// their x rows and dloss changes nothing else bit for bit.
TPRT_TEST(cross_entropy_ignored_targets_exact_zero) {
  int64_t T = 8, V = 37, H = 19;
  for (int d = 0; d < 3; ++d) {
    int dt = kDtypes[d];
    tc_tensor_t x = tc_make(dt, 2, T, H), w = tc_make(dt, 2, V, H), tg = tc_make(TPRT_DTYPE_I32, 1, T);
    tc_tensor_t dl = tc_make(TPRT_DTYPE_F32, 1, T), loss = tc_make(TPRT_DTYPE_F32, 1, T),
                lse = tc_make(TPRT_DTYPE_F32, 1, T), st = tc_make(TPRT_DTYPE_F32, 2, T, (int64_t)3);
    tc_tensor_t dx[2] = {tc_make(TPRT_DTYPE_F32, 2, T, H), tc_make(TPRT_DTYPE_F32, 2, T, H)};
    tc_tensor_t dxd = tc_make(dt, 2, T, H),
                dw[2] = {tc_make(TPRT_DTYPE_F32, 2, V, H), tc_make(TPRT_DTYPE_F32, 2, V, H)};
    tc_fill(&x.t, 91 + d, -1.0, 1.0);
    tc_fill(&w.t, 92 + d, -1.0, 1.0);
    fill_targets(&tg, V, 93 + d, false);
    ids_of(&tg)[1] = -1, ids_of(&tg)[4] = -100;
    fill_dloss(&dl, 94 + d);
    for (int pass = 0; pass < 2; ++pass) {
      if (pass) {  // Other x rows and dloss for the ignored tokens.
        for (int64_t h = 0; h < H; ++h) {
          tc_set(&x.t, 1 * H + h, 3.0f * (float)tc_get(&x.t, 1 * H + h) + 0.5f);
          tc_set(&x.t, 4 * H + h, -2.0f);
        }
        f32_of(&dl)[1] = 1e3f, f32_of(&dl)[4] = -7.0f;
      }
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &tg.t, &loss.t, &lse.t, 8));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_stats(&x.t, &w.t, &tg.t, &st.t, 0, V, 8, 8));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dx[pass].t, 0, V, 8, 8));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dxd.t, 0, V, 8, 8));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_wgrad(&x.t, &w.t, &tg.t, &lse.t, &dl.t, &dw[pass].t, 0, V, 8, 4));
      for (int k = 0; k < 2; ++k) {
        int64_t t = k ? 4 : 1;
        TPRT_EXPECT_EQ_BITS(tc_bits(&loss.t, t), 0);
        TPRT_EXPECT_EQ_BITS(tc_bits(&st.t, 3 * t + 2), 0x80000000u);
        TPRT_EXPECT(isfinite(f32_of(&lse)[t]));
        for (int64_t h = 0; h < H; ++h) {
          TPRT_EXPECT_EQ_BITS(tc_bits(&dx[pass].t, t * H + h), 0);
          TPRT_EXPECT_EQ_BITS(tc_bits(&dxd.t, t * H + h), 0);
        }
      }
    }
    TPRT_EXPECT(tc_same_bytes(&dx[0].t, &dx[1].t));
    TPRT_EXPECT(tc_same_bytes(&dw[0].t, &dw[1].t));
    tc_tensor_t* all[] = {&x, &w, &tg, &dl, &loss, &lse, &st, &dx[0], &dx[1], &dxd, &dw[0], &dw[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
  }
}

// The loss of given logits: of z = tprt_cpu_linear(x, w) (x's dtype, the same chunks),
// tprt_cpu_cross_entropy_logits is tprt_cpu_cross_entropy bit for bit, loss and lse, for every
// dtype and the odd shapes (empty blocks, a vocabulary not divisible by the blocks) with ignored
// tokens; and on logits perturbed in one place the loss moves (the kernel reads z, not x and w).
TPRT_TEST(cross_entropy_of_logits_bitwise) {
  for (int d = 0; d < 3; ++d)
    for (size_t sh = 0; sh < sizeof kShapes / sizeof kShapes[0]; ++sh) {
      int dt = kDtypes[d];
      int64_t T = kShapes[sh][0], V = kShapes[sh][1], H = kShapes[sh][2];
      int c = (int)kShapes[sh][3];
      tc_tensor_t x = tc_make(dt, 2, T, H), w = tc_make(dt, 2, V, H), tg = tc_make(TPRT_DTYPE_I32, 1, T);
      tc_tensor_t z = tc_make(dt, 2, T, V), loss = tc_make(TPRT_DTYPE_F32, 1, T), lse = tc_make(TPRT_DTYPE_F32, 1, T);
      tc_tensor_t lo = tc_make(TPRT_DTYPE_F32, 1, T), ls = tc_make(TPRT_DTYPE_F32, 1, T);
      tc_fill(&x.t, 81 + d, -2.0, 2.0);
      tc_fill(&w.t, 82 + d, -2.0, 2.0);
      fill_targets(&tg, V, 83 + d, true);
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &tg.t, &loss.t, &lse.t, c));
      TPRT_EXPECT_OK(tprt_cpu_linear(&x.t, &w.t, NULL, &z.t, c));
      TPRT_EXPECT_OK(tprt_cpu_cross_entropy_logits(&z.t, &tg.t, &lo.t, &ls.t, c));
      if (!tc_same_bytes(&lo.t, &loss.t) || !tc_same_bytes(&ls.t, &lse.t))
        TPRT__FAIL("%s T=%lld V=%lld: the loss of the logits differs from cross_entropy's", tprt_dtype_name(dt),
                   (long long)T, (long long)V);
      // The first token that is not ignored: its target's logit raised by 1 lowers its loss.
      int64_t t = 0;
      while (t < T && ids_of(&tg)[t] < 0) ++t;
      if (t < T && V > 1) {
        int64_t at = t * V + ids_of(&tg)[t];
        tc_set(&z.t, at, tc_get(&z.t, at) + 1.0);
        TPRT_EXPECT_OK(tprt_cpu_cross_entropy_logits(&z.t, &tg.t, &lo.t, &ls.t, c));
        TPRT_EXPECT(f32_of(&lo)[t] < f32_of(&loss)[t]);
      }
      tc_tensor_t* all[] = {&x, &w, &tg, &z, &loss, &lse, &lo, &ls};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
    }
}

TPRT_TEST(vocab_invalid_arguments) {
  int64_t T = 3, V = 37, H = 19;
  tc_tensor_t ids = tc_make(TPRT_DTYPE_I32, 1, T), ids64 = tc_make(TPRT_DTYPE_I64, 1, T);
  tc_tensor_t table = tc_make(TPRT_DTYPE_BF16, 2, V, H), y = tc_make(TPRT_DTYPE_BF16, 2, T, H);
  tc_tensor_t dy = tc_make(TPRT_DTYPE_BF16, 2, T, H), dtab = tc_make(TPRT_DTYPE_F32, 2, V, H);
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, T, H), w = tc_make(TPRT_DTYPE_F32, 2, V, H),
              w18 = tc_make(TPRT_DTYPE_F32, 2, V, H - 1), wb = tc_make(TPRT_DTYPE_BF16, 2, V, H);
  tc_tensor_t loss = tc_make(TPRT_DTYPE_F32, 1, T), lse = tc_make(TPRT_DTYPE_F32, 1, T),
              st4 = tc_make(TPRT_DTYPE_F32, 2, T, (int64_t)4), dx = tc_make(TPRT_DTYPE_F32, 2, T, H);
  ids_of(&ids)[0] = 4, ids_of(&ids)[1] = 36, ids_of(&ids)[2] = 0;
  TPRT_EXPECT_OK(tprt_cpu_embedding(&ids.t, &table.t, &y.t, 0, V));
  TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &ids.t, &loss.t, &lse.t, 8));
#define BAD(expr, text) TPRT_EXPECT_STATUS(expr, TPRT_STATUS_INVALID_ARGUMENT, text)
  ids_of(&ids)[2] = 37;
  BAD(tprt_cpu_embedding(&ids.t, &table.t, &y.t, 0, V), "embedding: ids[2] = 37 is outside the vocabulary [0, 37)");
  BAD(tprt_cpu_embedding_grad(&ids.t, &dy.t, &dtab.t, 0, V, 4), "embedding_grad: ids[2] = 37 is outside");
  BAD(tprt_cpu_cross_entropy(&x.t, &w.t, &ids.t, &loss.t, &lse.t, 8), "targets[2] = 37 is outside the vocabulary");
  BAD(tprt_cpu_cross_entropy_dgrad(&x.t, &w.t, &ids.t, &lse.t, &loss.t, &dx.t, 0, V, 8, 8), "targets[2] = 37");
  ids_of(&ids)[2] = 0, ids_of(&ids)[1] = -1;
  BAD(tprt_cpu_embedding(&ids.t, &table.t, &y.t, 0, V), "embedding: ids[1] = -1 is outside the vocabulary");
  TPRT_EXPECT_OK(tprt_cpu_cross_entropy(&x.t, &w.t, &ids.t, &loss.t, &lse.t, 8));  // an ignored token
  BAD(tprt_cpu_cross_entropy(&x.t, &w18.t, &ids.t, &loss.t, &lse.t, 8),
      "cross_entropy: w must be [V,19] (x's width); got [37,18]");
  BAD(tprt_cpu_cross_entropy(&x.t, &wb.t, &ids.t, &loss.t, &lse.t, 8), "cross_entropy: w must be a rank-2 f32 tensor");
  BAD(tprt_cpu_embedding(&ids64.t, &table.t, &y.t, 0, V), "embedding: ids must be a rank-1 i32 tensor; got [3] i64");
  BAD(tprt_cpu_cross_entropy(&x.t, &w.t, &ids64.t, &loss.t, &lse.t, 8), "cross_entropy: targets must be a rank-1 i32");
  BAD(tprt_cpu_cross_entropy_combine(&st4.t, &ids.t, &loss.t, &lse.t),
      "cross_entropy_combine: stats must be [T,3R] (3 values per rank); got 4 columns");
  BAD(tprt_cpu_embedding(&ids.t, &table.t, &y.t, 1, V), "embedding: this shard's rows [1, 38)");
  BAD(tprt_cpu_cross_entropy(&x.t, &w.t, &ids.t, &loss.t, &lse.t, 3), "chunks must be a power of two");
  tc_tensor_t z = tc_make(TPRT_DTYPE_BF16, 2, T, V), z2 = tc_make(TPRT_DTYPE_BF16, 2, T + 1, V);
  TPRT_EXPECT_OK(tprt_cpu_cross_entropy_logits(&z.t, &ids.t, &loss.t, &lse.t, 8));
  BAD(tprt_cpu_cross_entropy_logits(&z.t, &ids.t, &loss.t, &lse.t, 6), "cross_entropy_logits: chunks must be a power");
  BAD(tprt_cpu_cross_entropy_logits(&z2.t, &ids.t, &loss.t, &lse.t, 8), "cross_entropy_logits: targets must be [T] (z's rows); got [3] i32");
  ids_of(&ids)[0] = 37;
  BAD(tprt_cpu_cross_entropy_logits(&z.t, &ids.t, &loss.t, &lse.t, 8),
      "cross_entropy_logits: targets[0] = 37 is outside the vocabulary [0, 37)");
  tc_free(&z);
  tc_free(&z2);
#undef BAD
  tc_tensor_t* all[] = {&ids, &ids64, &table, &y, &dy, &dtab, &x, &w, &w18, &wb, &loss, &lse, &st4, &dx};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
