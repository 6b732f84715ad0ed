// The generation kernels: tprt_cpu_kvcache_write (a step's new keys or values into the KV cache)
// and tprt_cpu_sample (one token per row of logits). docs/numerics.md ("Sampling") defines the
// draw; kernels/cpu/tprt_sample_rows.h holds its per-row arithmetic, shared with the device.
#include <stdlib.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"
#include "tprt_sample_rows.h"

tprt_status_t tprt__check_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                        const tprt_tensor_t* cache_len, const tprt_tensor_t* out, int64_t seq_len) {
  const char* op = "kvcache_write";
  tprt_status_t s = tprt__check(op, "cache", cache, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "new", new_rows, 2, TPRT__M(cache->dtype));
  if (!s) s = tprt__check(op, "cache_len", cache_len, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check_dims(op, "out", out, 2, cache->dims, "cache's shape");
  if (s) return s;
  if (out->dtype != cache->dtype)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "kvcache_write: out must have the cache's dtype");
  int64_t b = cache_len->dims[0];
  if (seq_len < 1 || new_rows->dims[0] != b * seq_len || new_rows->dims[1] != cache->dims[1] ||
      (b > 0 && (cache->dims[0] % b != 0 || cache->dims[0] / b < seq_len)) || (b == 0 && cache->dims[0] != 0))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "kvcache_write: new must be [B*seq_len, W] = [%lld*%lld, %lld] and the cache [B*C, W] with "
                            "C >= seq_len; got new [%lld, %lld], cache [%lld, %lld]",
                            (long long)b, (long long)seq_len, (long long)cache->dims[1], (long long)new_rows->dims[0],
                            (long long)new_rows->dims[1], (long long)cache->dims[0], (long long)cache->dims[1]);
  return NULL;
}

tprt_status_t tprt_cpu_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                     const tprt_tensor_t* cache_len, tprt_tensor_t* out, int64_t seq_len) {
  tprt_status_t s = tprt__check_kvcache_write(cache, new_rows, cache_len, out, seq_len);
  if (s) return s;
  int64_t b = cache_len->dims[0];
  if (b == 0) return NULL;
  int64_t c = cache->dims[0] / b;
  const int32_t* len = (const int32_t*)cache_len->data;
  for (int64_t i = 0; i < b; ++i)
    if (len[i] < 0 || (int64_t)len[i] + seq_len > c)
      return tprt_make_status(TPRT_STATUS_OUT_OF_RANGE,
                              "kvcache_write: cache_len[%lld] = %d plus the %lld new rows is outside the cache's %lld "
                              "rows per sequence",
                              (long long)i, len[i], (long long)seq_len, (long long)c);
  size_t row = tprt_dtype_bytes(cache->dtype, cache->dims[1]);
  // In place (out is the cache's buffer) only the new rows move.
  if (out->data != cache->data) memcpy(out->data, cache->data, row * (size_t)cache->dims[0]);
  for (int64_t i = 0; i < b; ++i)
    memcpy((char*)out->data + (size_t)(i * c + len[i]) * row, (const char*)new_rows->data + (size_t)(i * seq_len) * row,
           row * (size_t)seq_len);
  return NULL;
}

tprt_status_t tprt__check_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request,
                                 const tprt_tensor_t* position, const tprt_tensor_t* temperature,
                                 const tprt_tensor_t* top_k, const tprt_tensor_t* top_p, const tprt_tensor_t* token) {
  const char* op = "sample";
  tprt_status_t s = tprt__check(op, "logits", logits, 2, TPRT__FLOATS);
  if (s) return s;
  int64_t b = logits->dims[0];
  struct {
    const char* name;
    const tprt_tensor_t* t;
    int dtype;
  } rows[] = {{"seed", seed, TPRT_DTYPE_I64},       {"request", request, TPRT_DTYPE_I32},
              {"position", position, TPRT_DTYPE_I32}, {"temperature", temperature, TPRT_DTYPE_F32},
              {"top_k", top_k, TPRT_DTYPE_I32},     {"top_p", top_p, TPRT_DTYPE_F32},
              {"token", token, TPRT_DTYPE_I32}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0] && !s; ++i)
    s = tprt__check_dims(op, rows[i].name, rows[i].t, 1, &b, "one per row of logits");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0] && !s; ++i)
    s = tprt__check(op, rows[i].name, rows[i].t, 1, TPRT__M(rows[i].dtype));
  if (s) return s;
  if (logits->dims[1] < 1 && b > 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "sample: logits must have at least one column");
  const float *t = (const float*)temperature->data, *p = (const float*)top_p->data;
  const int32_t* k = (const int32_t*)top_k->data;
  for (int64_t i = 0; i < b; ++i) {
    if (!(t[i] >= 0.0f) || tprt_f32_bits(t[i]) == 0x7F800000u)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "sample: row %lld: temperature = %g must be finite and >= 0 "
                              "(0: greedy)", (long long)i, (double)t[i]);
    if (k[i] < 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "sample: row %lld: top_k = %d must be >= 0 (0: every token)",
                              (long long)i, k[i]);
    if (!(p[i] > 0.0f && p[i] <= 1.0f))
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "sample: row %lld: top_p = %g must be in (0, 1] (1: every "
                              "token)", (long long)i, (double)p[i]);
  }
  return NULL;
}

static int tprt__desc(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

// One row (docs/numerics.md, "Sampling"): |z| the row's n logits (NaN read as -inf), |w| and |d|
// scratch of n floats each.
static int32_t tprt__sample_row(float* z, float* w, float* d, int64_t n, uint64_t seed, uint64_t stream, float t,
                                int32_t top_k, float top_p) {
  float m = z[0];
  for (int64_t i = 1; i < n; ++i)
    if (z[i] > m) m = z[i];
  const float inf = tprt_f32_from_bits(0x7F800000u);
  if (m == -inf) return -1;  // no token has any probability
  if (t == 0.0f || m == inf) {
    for (int64_t i = 0; i < n; ++i)
      if (z[i] == m) return (int32_t)i;
  }
  // The top-k threshold: the k-th largest logit (ties at it stay in).
  float tau = -inf;
  bool by_k = top_k > 0 && top_k < n, by_p = top_p < 1.0f;
  if (by_k || by_p) {
    memcpy(d, z, (size_t)n * sizeof(float));
    qsort(d, (size_t)n, sizeof(float), tprt__desc);
    if (by_k) tau = d[top_k - 1];
  }
  if (by_p) {
    for (int64_t i = 0; i < n; ++i) w[i] = tprt_sample_weight(z[i], m, t);
    const float target = top_p * tprt_sample_mass(z, w, n, tau);
    // The distinct logits at or above tau, largest first; the nucleus threshold is the first whose
    // mass reaches the target (the mass only grows along the list; the last one's is the whole).
    int64_t nd = 0;
    for (int64_t i = 0; i < n && d[i] >= tau; ++i)
      if (nd == 0 || d[i] != d[nd - 1]) d[nd++] = d[i];
    int64_t lo = 0, hi = nd - 1;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (tprt_sample_mass(z, w, n, d[mid]) >= target)
        hi = mid;
      else
        lo = mid + 1;
    }
    tau = d[lo];
  }
  int64_t best = -1;
  float best_key = -inf;
  for (int64_t i = 0; i < n; ++i) {
    if (z[i] < tau || z[i] == -inf) continue;
    float key = tprt_sample_key(z[i], t, tprt_sample_gumbel(seed, stream, i));
    if (best < 0 || tprt_sample_beats(key, i, best_key, best)) {
      best = i;
      best_key = key;
    }
  }
  return (int32_t)best;
}

tprt_status_t tprt_cpu_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request,
                              const tprt_tensor_t* position, const tprt_tensor_t* temperature,
                              const tprt_tensor_t* top_k, const tprt_tensor_t* top_p, tprt_tensor_t* token) {
  tprt_status_t s = tprt__check_sample(logits, seed, request, position, temperature, top_k, top_p, token);
  if (s) return s;
  int64_t b = logits->dims[0], n = logits->dims[1];
  if (b == 0) return NULL;
  float* buf = NULL;
  s = tprt__scratch("sample", (size_t)n * 3 * sizeof(float), (void**)&buf);
  if (s) return s;
  const int64_t* sd = (const int64_t*)seed->data;
  const int32_t *req = (const int32_t*)request->data, *pos = (const int32_t*)position->data;
  const int32_t* k = (const int32_t*)top_k->data;
  const float *t = (const float*)temperature->data, *p = (const float*)top_p->data;
  int32_t* out = (int32_t*)token->data;
  for (int64_t i = 0; i < b; ++i) {
    tprt__ld_row(logits->data, logits->dtype, i * n, n, buf);
    for (int64_t j = 0; j < n; ++j) buf[j] = tprt_sample_logit(buf[j]);
    out[i] = tprt__sample_row(buf, buf + n, buf + 2 * n, n, (uint64_t)sd[i],
                              tprt_sample_stream((uint32_t)req[i], (uint32_t)pos[i]), t[i], k[i], p[i]);
  }
  tprt__scratch_free(buf);
  return NULL;
}
