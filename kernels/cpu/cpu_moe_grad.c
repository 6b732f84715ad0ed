// The backward of the MoE kernels of cpu_moe.c (docs/numerics.md, "Backward"), in f32:
//   unpermute  dy[row(t,j)] = RNE(weights[t,j]·dout[t]);
//              dweights[t,j] = dot(y[row(t,j)], dout[t])   (canonical row reduction, fmaf lanes)
//   permute    dx[t] = RNE(((+0 + dy[row(t,0)]) + dy[row(t,1)]) + ...)
//   route      p recomputed as the forward does (max, exp, canonical row sum, division); the
//              selection is a constant. Without normalize: c = Σ_j p[i_j]·dw_j (fmaf from +0.0 in
//              slot order), dl_i = p_i·(dp_i - c) with dp_i = dw_j for i = i_j, else 0.
//              With normalize: w_j = p[i_j]/t as in the forward, c = Σ_j w_j·dw_j (same order),
//              dl_{i_j} = w_j·(dw_j - c) and dl_i = +0.0 for the experts not selected (the
//              renormalized weights are a softmax over the selected logits alone).
// row(t,j) is the row whose row_map entry is t·k + j.
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// The canonical row reduction of a dot product: lane j (from +0.0) takes fmaf(a[i], b[i], lane)
// for i = j, j+256, ... in order, then tprt_row_tree.
static float tprt__row_dot(const float* a, const float* b, int64_t n) {
  float lanes[TPRT_ROW_LANES];
  for (int j = 0; j < TPRT_ROW_LANES; ++j) lanes[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) lanes[i % TPRT_ROW_LANES] = fmaf(a[i], b[i], lanes[i % TPRT_ROW_LANES]);
  return tprt_row_tree(lanes);
}

// Inverts row_map[rows] (a permutation of the slots) into inv[slot] = row, or explains why not.
static tprt_status_t tprt__invert_row_map(const char* op, const tprt_tensor_t* row_map, int64_t rows, int64_t* inv) {
  for (int64_t i = 0; i < rows; ++i) inv[i] = -1;
  const int32_t* map = (const int32_t*)row_map->data;
  for (int64_t r = 0; r < rows; ++r) {
    if (map[r] < 0 || map[r] >= rows || inv[map[r]] >= 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "%s: row_map is not a permutation of the T*k=%lld slots: row_map[%lld]=%d %s", op,
                              (long long)rows, (long long)r, map[r],
                              map[r] < 0 || map[r] >= rows ? "is out of range" : "repeats a slot");
    inv[map[r]] = r;
  }
  return NULL;
}

tprt_status_t tprt__check_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                             const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                             const tprt_tensor_t* dy, const tprt_tensor_t* dweights) {
  const char* op = "moe_unpermute_grad";
  char a[96], what[128];
  tprt_status_t s = tprt__check(op, "dout", dout, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "y", y, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "row_map", row_map, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "weights", weights, 2, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "dweights", dweights, 2, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  s = tprt__check_combine_dims(op, y, row_map, weights, dout, "dout");
  if (s) return s;
  int64_t t = weights->dims[0], k = weights->dims[1], h = y->dims[1], rows = t * k;
  int64_t ydims[2] = {rows, h};
  snprintf(what, sizeof what, "y's shape and dtype [%lld,%lld] %s", (long long)rows, (long long)h,
           tprt_dtype_name(y->dtype));
  s = tprt__check_dims(op, "dy", dy, 2, ydims, what);
  if (!s && dy->dtype != y->dtype)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dy must be %s; got %s", op, what,
                         tprt__shape_str(dy, a, sizeof a));
  if (s) return s;
  snprintf(what, sizeof what, "weights' shape [T,k] = [%lld,%lld]", (long long)t, (long long)k);
  return tprt__check_dims(op, "dweights", dweights, 2, weights->dims, what);
}

tprt_status_t tprt_cpu_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                          const tprt_tensor_t* row_map, const tprt_tensor_t* weights, tprt_tensor_t* dy,
                                          tprt_tensor_t* dweights) {
  const char* op = "moe_unpermute_grad";
  tprt_status_t s = tprt__check_moe_unpermute_grad(dout, y, row_map, weights, dy, dweights);
  int64_t t = weights->dims[0], k = weights->dims[1], h = y->dims[1], rows = t * k;
  if (s || rows == 0) return s;
  int64_t* inv = NULL;
  s = tprt__scratch(op, (size_t)rows * sizeof(int64_t) + (size_t)h * 2 * sizeof(float), (void**)&inv);
  if (s) return s;
  float *of = (float*)(inv + rows), *yf = of + h;
  s = tprt__invert_row_map(op, row_map, rows, inv);
  if (s) {
    tprt__scratch_free(inv);
    return s;
  }
  const float* w = (const float*)weights->data;
  float* dw = (float*)dweights->data;
  for (int64_t tok = 0; tok < t; ++tok) {
    tprt__ld_row(dout->data, dout->dtype, tok * h, h, of);
    for (int64_t slot = 0; slot < k; ++slot) {
      float wj = w[tok * k + slot];
      int64_t r = inv[tok * k + slot];
      tprt__ld_row(y->data, y->dtype, r * h, h, yf);
      for (int64_t j = 0; j < h; ++j) tprt__st(dy->data, dy->dtype, r * h + j, wj * of[j]);
      dw[tok * k + slot] = tprt__row_dot(yf, of, h);
    }
  }
  tprt__scratch_free(inv);
  return NULL;
}

tprt_status_t tprt__check_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map,
                                           const tprt_tensor_t* dx, int top_k) {
  const char* op = "moe_permute_grad";
  char a[96], what[128];
  tprt_status_t s = tprt__check(op, "dy", dy, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "row_map", row_map, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "dx", dx, 2, TPRT__FLOATS);
  if (s) return s;
  if (top_k < 1) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: top_k=%d must be >= 1", op, top_k);
  int64_t t = dx->dims[0], h = dx->dims[1], k = top_k, rows = t * k;
  int64_t ydims[2] = {rows, h};
  snprintf(what, sizeof what, "[T*k,H] = [%lld,%lld] (dx is [T,H] = [%lld,%lld], k=%d) of dx's dtype %s",
           (long long)rows, (long long)h, (long long)t, (long long)h, top_k, tprt_dtype_name(dx->dtype));
  s = tprt__check_dims(op, "dy", dy, 2, ydims, what);
  if (!s && dy->dtype != dx->dtype)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dy must be %s; got %s", op, what,
                         tprt__shape_str(dy, a, sizeof a));
  if (s) return s;
  snprintf(what, sizeof what, "[T*k] = [%lld]", (long long)rows);
  return tprt__check_dims(op, "row_map", row_map, 1, &rows, what);
}

tprt_status_t tprt_cpu_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map, tprt_tensor_t* dx,
                                        int top_k) {
  const char* op = "moe_permute_grad";
  tprt_status_t s = tprt__check_moe_permute_grad(dy, row_map, dx, top_k);
  if (s) return s;
  int64_t t = dx->dims[0], h = dx->dims[1], k = top_k, rows = t * k;
  if (rows == 0) return NULL;
  int64_t* inv = NULL;
  s = tprt__scratch(op, (size_t)rows * sizeof(int64_t) + (size_t)h * 2 * sizeof(float), (void**)&inv);
  if (s) return s;
  float *acc = (float*)(inv + rows), *row = acc + h;
  s = tprt__invert_row_map(op, row_map, rows, inv);
  if (s) {
    tprt__scratch_free(inv);
    return s;
  }
  for (int64_t tok = 0; tok < t; ++tok) {
    for (int64_t j = 0; j < h; ++j) acc[j] = 0.0f;
    for (int64_t slot = 0; slot < k; ++slot) {
      tprt__ld_row(dy->data, dy->dtype, inv[tok * k + slot] * h, h, row);
      for (int64_t j = 0; j < h; ++j) acc[j] = acc[j] + row[j];
    }
    tprt__st_row(dx->data, dx->dtype, tok * h, h, acc);
  }
  tprt__scratch_free(inv);
  return NULL;
}

tprt_status_t tprt__check_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                         const tprt_tensor_t* dweights, const tprt_tensor_t* dlogits, int top_k) {
  const char* op = "moe_route_grad";
  char a[96], what[96];
  tprt_status_t s = tprt__check(op, "logits", logits, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "indices", indices, 2, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "dweights", dweights, 2, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "dlogits", dlogits, 2, TPRT__FLOATS);
  if (s) return s;
  int64_t t = logits->dims[0], e = logits->dims[1];
  if (top_k < 1 || top_k > e)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: top_k=%d must be in [1, E=%lld]", op, top_k,
                            (long long)e);
  int64_t dims[2] = {t, top_k};
  snprintf(what, sizeof what, "[T,k] = [%lld,%d]", (long long)t, top_k);
  s = tprt__check_dims(op, "indices", indices, 2, dims, what);
  if (!s) s = tprt__check_dims(op, "dweights", dweights, 2, dims, what);
  if (!s && !tprt_tensor_same_layout(logits, dlogits))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: dlogits must have logits' shape and dtype %s; got %s", op,
                         tprt__shape_str(logits, what, sizeof what), tprt__shape_str(dlogits, a, sizeof a));
  return s;
}

tprt_status_t tprt_cpu_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                      const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k,
                                      bool normalize) {
  const char* op = "moe_route_grad";
  tprt_status_t s = tprt__check_moe_route_grad(logits, indices, dweights, dlogits, top_k);
  int64_t t = logits->dims[0], e = logits->dims[1];
  if (s || t == 0) return s;
  float* buf = NULL;
  s = tprt__scratch(op, (size_t)e * (2 * sizeof(float) + 1), (void**)&buf);
  if (s) return s;
  float *p = buf, *dl = buf + e;
  unsigned char* taken = (unsigned char*)(buf + 2 * e);
  const int32_t* idx = (const int32_t*)indices->data;
  const float* dw = (const float*)dweights->data;
  // The selection first, so that a bad index leaves dlogits untouched.
  for (int64_t row = 0; row < t && !s; ++row) {
    memset(taken, 0, (size_t)e);
    for (int j = 0; j < top_k && !s; ++j) {
      int32_t i = idx[row * top_k + j];
      if (i < 0 || i >= e)
        s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: indices[%lld,%d]=%d is not an expert in [0, E=%lld)",
                             op, (long long)row, j, i, (long long)e);
      else if (taken[i])
        s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: indices[%lld,%d]=%d repeats an expert of token %lld",
                             op, (long long)row, j, i, (long long)row);
      else
        taken[i] = 1;
    }
  }
  for (int64_t row = 0; row < t && !s; ++row) {
    tprt__ld_row(logits->data, logits->dtype, row * e, e, p);
    tprt_moe_route_grad_row(p, dl, e, idx + row * top_k, dw + row * top_k, top_k, normalize);
    tprt__st_row(dlogits->data, dlogits->dtype, row * e, e, dl);
  }
  tprt__scratch_free(buf);
  return s;
}
