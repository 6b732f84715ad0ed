// Mixture-of-experts kernels: tprt_cpu_moe_route (softmax + top-k), tprt_cpu_moe_permute (rows
// sorted by expert) and tprt_cpu_moe_unpermute (the weighted combine in fixed slot order).
// docs/numerics.md ("MoE routing") defines the arithmetic.
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

tprt_status_t tprt__check_moe_route(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                    const tprt_tensor_t* weights, int top_k) {
  const char* op = "moe_route";
  tprt_status_t s = tprt__check(op, "logits", logits, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "indices", indices, 2, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "weights", weights, 2, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = logits->dims[0], e = logits->dims[1];
  if (top_k < 1 || top_k > e)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: top_k=%d must be in [1, E=%lld]", op, top_k,
                            (long long)e);
  int64_t dims[2] = {t, top_k};
  char what[64];
  snprintf(what, sizeof what, "[T,k] = [%lld,%d]", (long long)t, top_k);
  s = tprt__check_dims(op, "indices", indices, 2, dims, what);
  if (!s) s = tprt__check_dims(op, "weights", weights, 2, dims, what);
  return s;
}

tprt_status_t tprt_cpu_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights, int top_k,
                                 bool normalize) {
  const char* op = "moe_route";
  tprt_status_t s = tprt__check_moe_route(logits, indices, weights, top_k);
  if (s) return s;
  int64_t t = logits->dims[0], e = logits->dims[1];
  if (t == 0) return NULL;
  float* buf = NULL;
  s = tprt__scratch(op, (size_t)e * (2 * sizeof(float) + 1), (void**)&buf);
  if (s) return s;
  float *p = buf, *prob = buf + e;
  unsigned char* taken = (unsigned char*)(buf + 2 * e);
  int32_t* idx = (int32_t*)indices->data;
  float* wts = (float*)weights->data;
  for (int64_t row = 0; row < t; ++row) {
    tprt__ld_row(logits->data, logits->dtype, row * e, e, p);
    tprt_moe_route_row(p, prob, taken, e, top_k, normalize, idx + row * top_k, wts + row * top_k);
  }
  tprt__scratch_free(buf);
  return NULL;
}

// Dtypes that moe_permute can move: whole bytes per element.
#define TPRT__BYTE_DTYPES                                                                                     \
  (TPRT__FLOATS | TPRT__M(TPRT_DTYPE_F8E4M3FN) | TPRT__M(TPRT_DTYPE_F8E5M2) | TPRT__M(TPRT_DTYPE_F8E8M0FNU) | \
   TPRT__M(TPRT_DTYPE_I32) | TPRT__M(TPRT_DTYPE_I64))

// The checks and messages of moe_permute and moe_unpermute, shared with kernels/cuda/moe/moe.cu.
tprt_status_t tprt__check_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, const tprt_tensor_t* y,
                                      const tprt_tensor_t* group_sizes, const tprt_tensor_t* row_map) {
  const char* op = "moe_permute";
  char a[96], b[96], what[96];
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__BYTE_DTYPES);
  if (!s) s = tprt__check(op, "indices", indices, 2, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__BYTE_DTYPES);
  if (!s) s = tprt__check(op, "group_sizes", group_sizes, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check(op, "row_map", row_map, 1, TPRT__M(TPRT_DTYPE_I32));
  if (s) return s;
  int64_t t = x->dims[0], h = x->dims[1], k = indices->dims[1], e = group_sizes->dims[0], rows = t * k;
  if (indices->dims[0] != t)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: indices must be [T,k] with T=%lld (x is %s); got %s", op,
                            (long long)t, tprt__shape_str(x, a, sizeof a), tprt__shape_str(indices, b, sizeof b));
  if (rows > INT32_MAX)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: T*k=%lld rows do not fit the i32 row_map", op,
                            (long long)rows);
  if (e < 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: group_sizes must have E >= 1 entries; got %s", op,
                            tprt__shape_str(group_sizes, a, sizeof a));
  snprintf(what, sizeof what, "[T*k,H] = [%lld,%lld] of x's dtype %s", (long long)rows, (long long)h,
           tprt_dtype_name(x->dtype));
  int64_t ydims[2] = {rows, h};
  s = tprt__check_dims(op, "y", y, 2, ydims, what);
  if (!s && y->dtype != x->dtype)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: y must be %s; got %s", op, what,
                         tprt__shape_str(y, a, sizeof a));
  if (s) return s;
  snprintf(what, sizeof what, "[T*k] = [%lld]", (long long)rows);
  return tprt__check_dims(op, "row_map", row_map, 1, &rows, what);
}

tprt_status_t tprt__check_combine_dims(const char* op, const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                       const tprt_tensor_t* weights, const tprt_tensor_t* out, const char* out_name) {
  char a[96], what[128];
  int64_t t = weights->dims[0], k = weights->dims[1], h = y->dims[1], rows = t * k;
  snprintf(what, sizeof what, "[T*k,H] = [%lld,%lld] (weights is [T,k] = [%lld,%lld])", (long long)rows, (long long)h,
           (long long)t, (long long)k);
  int64_t ydims[2] = {rows, h}, odims[2] = {t, h};
  tprt_status_t s = tprt__check_dims(op, "y", y, 2, ydims, what);
  if (s) return s;
  snprintf(what, sizeof what, "[T*k] = [%lld]", (long long)rows);
  s = tprt__check_dims(op, "row_map", row_map, 1, &rows, what);
  if (s) return s;
  snprintf(what, sizeof what, "[T,H] = [%lld,%lld] of y's dtype %s", (long long)t, (long long)h,
           tprt_dtype_name(y->dtype));
  s = tprt__check_dims(op, out_name, out, 2, odims, what);
  if (!s && out->dtype != y->dtype)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be %s; got %s", op, out_name, what,
                         tprt__shape_str(out, a, sizeof a));
  return s;
}

tprt_status_t tprt__check_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                        const tprt_tensor_t* weights, const tprt_tensor_t* out) {
  const char* op = "moe_unpermute";
  tprt_status_t s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "row_map", row_map, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "weights", weights, 2, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "out", out, 2, TPRT__FLOATS);
  if (s) return s;
  return tprt__check_combine_dims(op, y, row_map, weights, out, "out");
}

tprt_status_t tprt_cpu_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                   tprt_tensor_t* group_sizes, tprt_tensor_t* row_map) {
  const char* op = "moe_permute";
  tprt_status_t s = tprt__check_moe_permute(x, indices, y, group_sizes, row_map);
  if (s) return s;
  int64_t t = x->dims[0], h = x->dims[1], k = indices->dims[1], e = group_sizes->dims[0], rows = t * k;
  const int32_t* idx = (const int32_t*)indices->data;
  for (int64_t i = 0; i < rows; ++i)
    if (idx[i] < 0 || idx[i] >= e)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: indices[%lld,%lld]=%d is not an expert in [0, E=%lld)",
                              op, (long long)(i / k), (long long)(i % k), idx[i], (long long)e);
  int64_t* sizes = (int64_t*)group_sizes->data;
  int64_t* next = NULL;
  s = tprt__scratch(op, (size_t)e * sizeof(int64_t), (void**)&next);
  if (s) return s;
  for (int64_t i = 0; i < e; ++i) sizes[i] = 0;
  for (int64_t i = 0; i < rows; ++i) ++sizes[idx[i]];
  for (int64_t i = 0, start = 0; i < e; ++i) {
    next[i] = start;
    start += sizes[i];
  }
  // Visiting slots in (token, slot) order and appending to each expert keeps every expert's rows
  // sorted by token, then slot.
  size_t row_bytes = tprt_dtype_bytes(x->dtype, h);
  int32_t* map = (int32_t*)row_map->data;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t r = next[idx[i]]++;
    map[r] = (int32_t)i;
    if (row_bytes)
      memcpy((char*)y->data + (size_t)r * row_bytes, (const char*)x->data + (size_t)(i / k) * row_bytes, row_bytes);
  }
  tprt__scratch_free(next);
  return NULL;
}

tprt_status_t tprt_cpu_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                     tprt_tensor_t* out) {
  const char* op = "moe_unpermute";
  tprt_status_t s = tprt__check_moe_unpermute(y, row_map, weights, out);
  if (s) return s;
  int64_t t = weights->dims[0], k = weights->dims[1], h = y->dims[1], rows = t * k;
  if (t == 0 || h == 0) return NULL;
  int64_t* inv = NULL;
  s = tprt__scratch(op, (size_t)rows * sizeof(int64_t) + (size_t)h * sizeof(float), (void**)&inv);
  if (s) return s;
  float* acc = (float*)(inv + rows);
  for (int64_t i = 0; i < rows; ++i) inv[i] = -1;
  const int32_t* map = (const int32_t*)row_map->data;
  for (int64_t r = 0; r < rows; ++r) {
    if (map[r] < 0 || map[r] >= rows || inv[map[r]] >= 0) {
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                           "%s: row_map is not a permutation of the T*k=%lld slots: row_map[%lld]=%d %s", op,
                           (long long)rows, (long long)r, map[r],
                           map[r] < 0 || map[r] >= rows ? "is out of range" : "repeats a slot");
      tprt__scratch_free(inv);
      return s;
    }
    inv[map[r]] = r;
  }
  const float* w = (const float*)weights->data;
  for (int64_t tok = 0; tok < t; ++tok) {
    for (int64_t j = 0; j < h; ++j) acc[j] = 0.0f;
    for (int64_t slot = 0; slot < k; ++slot) {
      float wj = w[tok * k + slot];
      int64_t r = inv[tok * k + slot];
      for (int64_t j = 0; j < h; ++j) acc[j] = fmaf(wj, tprt__ld(y->data, y->dtype, r * h + j), acc[j]);
    }
    tprt__st_row(out->data, out->dtype, tok * h, h, acc);
  }
  tprt__scratch_free(inv);
  return NULL;
}
