// tprt_cpu_rope, tprt_cpu_attention and tprt_cpu_attention_grad: the canonical arithmetic of
// tprt_attention_rows.h (docs/numerics.md, "Attention") over whole tensors.
//
// Layouts (row-major): x, q, y[T, H*D] hold head h in columns [h*D, (h+1)*D); k, v[T, Hkv*D];
// cos, sin[T, D]; T = B * S tokens, sequence b in rows [b*S, (b+1)*S). Query head h reads
// key/value head h / (Hq/Hkv).
//
// Forward, per sequence b, query head h and query i (n = i+1 visible keys when causal, else S):
//   s[j] = fl(dot(q_i, k_j) · scale);  m, e[j] = exp(s[j] - m), l = rowsum(e)  (softmax stats)
//   y_i[d] = RNE(o[d] / l) with o[d] = fmaf-accumulated e[j] · v_j[d] over j = 0..n-1.
// Backward, with p[j] = e[j] / l recomputed as above, dp[j] = dot(dy_i, v_j), Di = dot(dy_i, y_i):
//   ds[j] = p[j] · (dp[j] - Di)
//   dq_i[d] = RNE(scale · Σ_j ds[j] · k_j[d])                   (fmaf over j ascending)
//   dk_j[d] = RNE(scale · Σ_{h of j's group} Σ_{i sees j} ds · q_i[d])   (h, then i ascending)
//   dv_j[d] = RNE(Σ_{h of j's group} Σ_{i sees j} p · dy_i[d])
// Heads and sequences are independent, so the bits do not depend on how heads are split over
// ranks (tensor parallelism) or sequences over batches.
#include <stdio.h>
#include <string.h>

#include "tprt_attention_rows.h"
#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// The shapes an attention op reads: q[T, Hq*D], k and v[T, Hkv*D] of one float dtype, T a multiple
// of seq_len, Hq a multiple of Hkv; |y|, |dy|, |dq| like q and |dk|, |dv| like k when given.
tprt_status_t tprt__check_attention(const char* op, const tprt_tensor_t* q, const tprt_tensor_t* k,
                                    const tprt_tensor_t* v, const tprt_tensor_t* y, const tprt_tensor_t* dy,
                                    const tprt_tensor_t* dq, const tprt_tensor_t* dk, const tprt_tensor_t* dv,
                                    int64_t seq_len, int64_t head_dim, float scale) {
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "q", q, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "k", k, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "v", v, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (!s && dy) s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s && dq) s = tprt__check(op, "dq", dq, 2, TPRT__FLOATS);
  if (!s && dk) s = tprt__check(op, "dk", dk, 2, TPRT__FLOATS);
  if (!s && dv) s = tprt__check(op, "dv", dv, 2, TPRT__FLOATS);
  if (s) return s;
  if (seq_len < 1 || head_dim < 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: seq_len=%lld and head_dim=%lld must be >= 1", op,
                            (long long)seq_len, (long long)head_dim);
  if (!isfinite(scale) || scale < 0.0f)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: scale=%g must be finite and >= 0 (0: 1/sqrt(D))", op,
                            (double)scale);
  int64_t t = q->dims[0];
  if (t % seq_len != 0 || q->dims[1] % head_dim != 0 || k->dims[1] % head_dim != 0 || k->dims[1] == 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: q %s and k %s must be [B*S, Hq*D] and [B*S, Hkv*D] with S=%lld, D=%lld and Hkv >= 1",
                            op, tprt__shape_str(q, a, sizeof a), tprt__shape_str(k, b, sizeof b), (long long)seq_len,
                            (long long)head_dim);
  int64_t hq = q->dims[1] / head_dim, hkv = k->dims[1] / head_dim;
  if (hq % hkv != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: %lld query heads do not split into groups over %lld key/value heads", op,
                            (long long)hq, (long long)hkv);
  if (k->dims[0] != t || !tprt_tensor_same_layout(k, v) || k->dtype != q->dtype)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: k and v must be [%lld, Hkv*D] of q's dtype %s; got %s and %s",
                            op, (long long)t, tprt_dtype_name(q->dtype), tprt__shape_str(k, a, sizeof a),
                            tprt__shape_str(v, b, sizeof b));
  const tprt_tensor_t* like_q[3] = {y, dy, dq};
  const char* q_names[3] = {"y", "dy", "dq"};
  for (int i = 0; i < 3; ++i)
    if (like_q[i] && !tprt_tensor_same_layout(like_q[i], q))
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must have q's shape and dtype %s; got %s", op,
                              q_names[i], tprt__shape_str(q, a, sizeof a), tprt__shape_str(like_q[i], b, sizeof b));
  const tprt_tensor_t* like_k[2] = {dk, dv};
  const char* k_names[2] = {"dk", "dv"};
  for (int i = 0; i < 2; ++i)
    if (like_k[i] && !tprt_tensor_same_layout(like_k[i], k))
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must have k's shape and dtype %s; got %s", op,
                              k_names[i], tprt__shape_str(k, a, sizeof a), tprt__shape_str(like_k[i], b, sizeof b));
  return NULL;
}

tprt_status_t tprt__check_kv_cache(const char* op, const tprt_tensor_t* q, const tprt_tensor_t* k,
                                   const tprt_kv_cache_t* cache, int64_t seq_len) {
  if (!cache) return NULL;
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "k_cache", cache->k, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "v_cache", cache->v, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "cache_len", cache->len, 1, TPRT__M(TPRT_DTYPE_I32));
  if (s) return s;
  int64_t seqs = q->dims[0] / seq_len, rows = cache->k->dims[0];
  if (!tprt_tensor_same_layout(cache->k, cache->v) || cache->k->dtype != k->dtype || cache->k->dims[1] != k->dims[1] ||
      rows < seqs || (seqs > 0 && rows % seqs != 0) || (seqs == 0 && rows != 0))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: k_cache and v_cache must be [B*C, %lld] of k's dtype %s with B = %lld sequences and "
                            "C >= 1 rows each; got %s and %s",
                            op, (long long)k->dims[1], tprt_dtype_name(k->dtype), (long long)seqs,
                            tprt__shape_str(cache->k, a, sizeof a), tprt__shape_str(cache->v, b, sizeof b));
  if (cache->len->dims[0] != seqs)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: cache_len must be i32 [%lld] (one per sequence); got %s",
                            op, (long long)seqs, tprt__shape_str(cache->len, a, sizeof a));
  return NULL;
}

tprt_status_t tprt__check_lse(const char* op, const tprt_tensor_t* q, const tprt_tensor_t* lse, int64_t head_dim) {
  if (!lse) return NULL;
  char a[96];
  tprt_status_t s = tprt__check(op, "lse", lse, 2, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  if (lse->dims[0] != q->dims[0] || lse->dims[1] != q->dims[1] / head_dim)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: lse must be f32 [%lld, %lld] (tokens, query heads); got %s",
                            op, (long long)q->dims[0], (long long)(q->dims[1] / head_dim),
                            tprt__shape_str(lse, a, sizeof a));
  return NULL;
}

tprt_status_t tprt__check_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                               const tprt_tensor_t* y) {
  char a[96], b[96], c[96];
  tprt_status_t s = tprt__check("rope", "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check("rope", "cos", cos_t, 2, TPRT__FLOATS);
  if (!s) s = tprt__check("rope", "sin", sin_t, 2, TPRT__FLOATS);
  if (!s) s = tprt__check("rope", "y", y, 2, TPRT__FLOATS);
  if (s) return s;
  int64_t d = cos_t->dims[1];
  if (!tprt_tensor_same_layout(cos_t, sin_t) || cos_t->dims[0] != x->dims[0] || d < 2 || d % 2 != 0 ||
      x->dims[1] % d != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "rope: cos and sin must be [T, D] of one dtype with T = %lld rows of x %s and an even D "
                            "dividing its width; got cos %s and sin %s",
                            (long long)x->dims[0], tprt__shape_str(x, a, sizeof a), tprt__shape_str(cos_t, b, sizeof b),
                            tprt__shape_str(sin_t, c, sizeof c));
  if (!tprt_tensor_same_layout(x, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "rope: y must have x's shape and dtype %s; got %s",
                            tprt__shape_str(x, a, sizeof a), tprt__shape_str(y, b, sizeof b));
  return NULL;
}

tprt_status_t tprt_cpu_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                            tprt_tensor_t* y, bool inverse) {
  tprt_status_t s = tprt__check_rope(x, cos_t, sin_t, y);
  if (s) return s;
  int64_t t = x->dims[0], w = x->dims[1], d = cos_t->dims[1], half = d / 2;
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < w; c += d)
      for (int64_t i = 0; i < half; ++i) {
        float ya, yb;
        tprt_rope_pair(tprt__ld(x->data, x->dtype, r * w + c + i), tprt__ld(x->data, x->dtype, r * w + c + i + half),
                       tprt__ld(cos_t->data, cos_t->dtype, r * d + i), tprt__ld(cos_t->data, cos_t->dtype, r * d + i + half),
                       tprt__ld(sin_t->data, sin_t->dtype, r * d + i), tprt__ld(sin_t->data, sin_t->dtype, r * d + i + half),
                       inverse, &ya, &yb);
        tprt__st(y->data, y->dtype, r * w + c + i, ya);
        tprt__st(y->data, y->dtype, r * w + c + i + half, yb);
      }
  return NULL;
}

// One sequence's rows of one head of a [T, H*D] tensor, widened: out[i*D + d] for i < S.
static void tprt__ld_head(const tprt_tensor_t* t, int64_t row0, int64_t seq_len, int64_t head, int64_t head_dim,
                          float* out) {
  int64_t w = t->dims[1];
  for (int64_t i = 0; i < seq_len; ++i) tprt__ld_row(t->data, t->dtype, (row0 + i) * w + head * head_dim, head_dim, out + i * head_dim);
}

// The unnormalized probabilities e[j] of query row |qi| against the first n rows of |kh| and their
// sum |l|: the scores s[j] = fl(dot(q_i, k_j) · scale), then the softmax statistics. The forward
// and the backward both call it, so the backward recomputes the forward's e bit for bit.
static float tprt__row_exps(const float* qi, const float* kh, int64_t n, int64_t head_dim, float scale, float* e,
                            float* m) {
  for (int64_t j = 0; j < n; ++j) e[j] = tprt_attn_dot(qi, kh + j * head_dim, head_dim) * scale;
  float l;
  tprt_attn_softmax_stats(e, e, n, m, &l);
  return l;
}

tprt_status_t tprt_cpu_attention(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                 const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse, int64_t seq_len,
                                 int64_t head_dim, bool causal, float scale) {
  tprt_status_t s = tprt__check_attention("attention", q, k, v, y, NULL, NULL, NULL, NULL, seq_len, head_dim, scale);
  if (!s) s = tprt__check_kv_cache("attention", q, k, cache, seq_len);
  if (!s) s = tprt__check_lse("attention", q, lse, head_dim);
  if (s) return s;
  int64_t t = q->dims[0], hq = q->dims[1] / head_dim, hkv = k->dims[1] / head_dim, group = hq / hkv;
  if (t == 0 || hq == 0) return NULL;
  const int64_t seqs = t / seq_len, rows = cache ? tprt__cache_rows(cache, seqs) : 0;
  const int32_t* lens = cache ? (const int32_t*)cache->len->data : NULL;
  for (int64_t b = 0; b < seqs && lens; ++b)
    if (lens[b] < 0 || lens[b] > rows)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "attention: cache_len[%lld] = %d is outside the cache's %lld rows per sequence",
                              (long long)b, (int)lens[b], (long long)rows);
  const float sc = tprt_attn_scale(scale, head_dim);
  // Keys of one sequence and kv head: its cached rows, then its seq_len new ones.
  const int64_t sd = seq_len * head_dim, kd = (rows + seq_len) * head_dim;
  float* buf = NULL;
  s = tprt__scratch("attention", (size_t)(sd + 2 * kd + rows + seq_len + head_dim) * sizeof(float), (void**)&buf);
  if (s) return s;
  float *qh = buf, *kh = qh + sd, *vh = kh + kd, *e = vh + kd, *o = e + rows + seq_len;
  for (int64_t b = 0; b < seqs; ++b) {
    const int64_t row0 = b * seq_len, past = lens ? lens[b] : 0;
    for (int64_t h = 0; h < hq; ++h) {
      tprt__ld_head(q, row0, seq_len, h, head_dim, qh);
      if (h % group == 0) {
        if (past > 0) {
          tprt__ld_head(cache->k, b * rows, past, h / group, head_dim, kh);
          tprt__ld_head(cache->v, b * rows, past, h / group, head_dim, vh);
        }
        tprt__ld_head(k, row0, seq_len, h / group, head_dim, kh + past * head_dim);
        tprt__ld_head(v, row0, seq_len, h / group, head_dim, vh + past * head_dim);
      }
      for (int64_t i = 0; i < seq_len; ++i) {
        // Query i sits at position past + i and sees the cached keys, then new keys as in prefill.
        int64_t n = past + tprt_attn_visible(i, seq_len, causal);
        float m, l = tprt__row_exps(qh + i * head_dim, kh, n, head_dim, sc, e, &m);
        if (lse) ((float*)lse->data)[(row0 + i) * hq + h] = tprt_attn_lse(m, l);
        for (int64_t d = 0; d < head_dim; ++d) o[d] = 0.0f;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t d = 0; d < head_dim; ++d) o[d] = TPRT_FMAF(e[j], vh[j * head_dim + d], o[d]);
        for (int64_t d = 0; d < head_dim; ++d) o[d] = TPRT_DIVF(o[d], l);
        tprt__st_row(y->data, y->dtype, (row0 + i) * q->dims[1] + h * head_dim, head_dim, o);
      }
    }
  }
  tprt__scratch_free(buf);
  return NULL;
}

tprt_status_t tprt_cpu_attention_grad(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                      const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse,
                                      tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                      int64_t head_dim, bool causal, float scale) {
  if (!dy || !dq || !dk || !dv)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "attention_grad: dy, dq, dk and dv must not be NULL");
  tprt_status_t s = tprt__check_attention("attention_grad", q, k, v, y, dy, dq, dk, dv, seq_len, head_dim, scale);
  // The exact backward recomputes the statistics (the same bits as the forward's): lse is checked only.
  if (!s) s = tprt__check_lse("attention_grad", q, lse, head_dim);
  if (s) return s;
  int64_t t = q->dims[0], hq = q->dims[1] / head_dim, hkv = k->dims[1] / head_dim, group = hq / hkv;
  if (t == 0 || hq == 0) return NULL;
  const float sc = tprt_attn_scale(scale, head_dim);
  const int64_t sd = seq_len * head_dim;
  // Per sequence and key/value head: its k and v, f32 accumulators for dk and dv; per query head:
  // q, y and dy; per query: the probabilities, ds and dq.
  float* buf = NULL;
  s = tprt__scratch("attention_grad", (size_t)(7 * sd + 2 * seq_len + head_dim) * sizeof(float), (void**)&buf);
  if (s) return s;
  float *kh = buf, *vh = kh + sd, *dkh = vh + sd, *dvh = dkh + sd, *qh = dvh + sd, *yh = qh + sd, *dyh = yh + sd;
  float *p = dyh + sd, *ds = p + seq_len, *dqi = ds + seq_len;
  for (int64_t row0 = 0; row0 < t; row0 += seq_len)
    for (int64_t g = 0; g < hkv; ++g) {
      tprt__ld_head(k, row0, seq_len, g, head_dim, kh);
      tprt__ld_head(v, row0, seq_len, g, head_dim, vh);
      memset(dkh, 0, (size_t)sd * sizeof(float));
      memset(dvh, 0, (size_t)sd * sizeof(float));
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        tprt__ld_head(q, row0, seq_len, h, head_dim, qh);
        tprt__ld_head(y, row0, seq_len, h, head_dim, yh);
        tprt__ld_head(dy, row0, seq_len, h, head_dim, dyh);
        for (int64_t i = 0; i < seq_len; ++i) {
          int64_t n = tprt_attn_visible(i, seq_len, causal);
          const float *qi = qh + i * head_dim, *dyi = dyh + i * head_dim;
          float m, l = tprt__row_exps(qi, kh, n, head_dim, sc, p, &m);
          float di = tprt_attn_dot(dyi, yh + i * head_dim, head_dim);
          for (int64_t j = 0; j < n; ++j) {
            p[j] = TPRT_DIVF(p[j], l);
            ds[j] = p[j] * (tprt_attn_dot(dyi, vh + j * head_dim, head_dim) - di);
          }
          for (int64_t d = 0; d < head_dim; ++d) dqi[d] = 0.0f;
          for (int64_t j = 0; j < n; ++j)
            for (int64_t d = 0; d < head_dim; ++d) {
              dqi[d] = TPRT_FMAF(ds[j], kh[j * head_dim + d], dqi[d]);
              dkh[j * head_dim + d] = TPRT_FMAF(ds[j], qi[d], dkh[j * head_dim + d]);
              dvh[j * head_dim + d] = TPRT_FMAF(p[j], dyi[d], dvh[j * head_dim + d]);
            }
          for (int64_t d = 0; d < head_dim; ++d) dqi[d] = sc * dqi[d];
          tprt__st_row(dq->data, dq->dtype, (row0 + i) * q->dims[1] + h * head_dim, head_dim, dqi);
        }
      }
      for (int64_t x = 0; x < sd; ++x) dkh[x] = sc * dkh[x];
      for (int64_t i = 0; i < seq_len; ++i) {
        tprt__st_row(dk->data, dk->dtype, (row0 + i) * k->dims[1] + g * head_dim, head_dim, dkh + i * head_dim);
        tprt__st_row(dv->data, dv->dtype, (row0 + i) * k->dims[1] + g * head_dim, head_dim, dvh + i * head_dim);
      }
    }
  tprt__scratch_free(buf);
  return NULL;
}
