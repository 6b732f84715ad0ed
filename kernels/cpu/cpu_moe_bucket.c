// tprt_cpu_moe_bucket and tprt_cpu_moe_unbucket: the static-shape halves of an expert-parallel
// all-to-all (docs/numerics.md, "MoE"). With E experts over B ranks, rank b owns experts
// [b*E/B, (b+1)*E/B); since the permuted rows are sorted by expert, the rows bound for rank b are
// one contiguous run of x. Bucketing copies each run into a zero-padded slot of R rows (the
// worst case: every row to one rank), so the all-to-all moves [R,H] per peer whatever the routing.
// Rows are opaque bytes: no arithmetic, any dtype.
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// Every dtype: rows are moved as bytes.
#define TPRT__ANY_DTYPE ((1u << TPRT_DTYPE_COUNT) - 1u)

// Checks a rank-2 tensor of any valid dtype. (tprt__check would list all nine dtypes, more than
// its message buffer holds.)
static tprt_status_t tprt__check_rows(const char* op, const char* name, const tprt_tensor_t* t) {
  if (!t || t->rank < 0 || t->rank > TPRT_MAX_RANK) return tprt__check(op, name, t, 2, TPRT__ANY_DTYPE);
  if (t->rank != 2 || t->dtype < 0 || t->dtype >= TPRT_DTYPE_COUNT) {
    char a[96];
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be a rank-2 tensor of any dtype; got %s", op,
                            name, tprt__shape_str(t, a, sizeof a));
  }
  return tprt__check(op, name, t, 2, TPRT__ANY_DTYPE);
}

tprt_status_t tprt__check_bucket_shapes(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* group_sizes,
                                        const tprt_tensor_t* y, int buckets, bool bucketing, size_t* out_row_bytes) {
  char a[96], what[128];
  tprt_status_t s = tprt__check_rows(op, "x", x);
  if (!s) s = tprt__check(op, "group_sizes", group_sizes, 1, TPRT__M(TPRT_DTYPE_I64));
  if (!s) s = tprt__check_rows(op, "y", y);
  if (s) return s;
  const tprt_tensor_t *rows = bucketing ? x : y, *padded = bucketing ? y : x;
  const char *rows_name = bucketing ? "x" : "y", *padded_name = bucketing ? "y" : "x";
  int64_t r = rows->dims[0], h = rows->dims[1], e = group_sizes->dims[0];
  if (buckets < 1) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: buckets=%d must be >= 1", op, buckets);
  if (e < 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: group_sizes must have E >= 1 entries; got %s", op,
                            tprt__shape_str(group_sizes, a, sizeof a));
  if (e % buckets != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: E=%lld experts are not divisible by buckets=%d", op,
                            (long long)e, buckets);
  if (r > INT64_MAX / buckets)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: B*R = %d*%lld rows overflows int64", op, buckets,
                            (long long)r);
  snprintf(what, sizeof what, "[B*R,H] = [%lld,%lld] of %s's dtype %s", (long long)(buckets * r), (long long)h,
           rows_name, tprt_dtype_name(rows->dtype));
  int64_t pdims[2] = {buckets * r, h};
  s = tprt__check_dims(op, padded_name, padded, 2, pdims, what);
  if (!s && padded->dtype != rows->dtype)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be %s; got %s", op, padded_name, what,
                         tprt__shape_str(padded, a, sizeof a));
  if (s) return s;
  // Sub-byte rows would start mid-byte; f4 packs two elements per byte, so an even H is whole.
  if (h % 8 * tprt_dtype_bits(rows->dtype) % 8 != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: rows of H=%lld %s elements are not whole bytes", op,
                            (long long)h, tprt_dtype_name(rows->dtype));
  *out_row_bytes = tprt_dtype_bytes(rows->dtype, h);
  return NULL;
}

// Validates either direction: |bucketing| says whether x is the expert-sorted [R,H] side (moe_bucket)
// or the [B*R,H] buckets (moe_unbucket); the shapes, then the counts (host data). On success
// returns the bytes of one row.
static tprt_status_t tprt__bucket_check(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* group_sizes,
                                        const tprt_tensor_t* y, int buckets, bool bucketing, size_t* out_row_bytes) {
  tprt_status_t s = tprt__check_bucket_shapes(op, x, group_sizes, y, buckets, bucketing, out_row_bytes);
  if (s) return s;
  const tprt_tensor_t* rows = bucketing ? x : y;
  const char* rows_name = bucketing ? "x" : "y";
  int64_t r = rows->dims[0], e = group_sizes->dims[0];
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t total = 0;
  for (int64_t i = 0; i < e; ++i) {
    if (sizes[i] < 0 || sizes[i] > r)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: group_sizes[%lld]=%lld is outside [0, R=%lld]", op,
                              (long long)i, (long long)sizes[i], (long long)r);
    total = sizes[i] > INT64_MAX - total ? INT64_MAX : total + sizes[i];  // saturate: compared with R only
  }
  if (total != r)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: group_sizes sum to %lld but %s has R=%lld rows", op,
                            (long long)total, rows_name, (long long)r);
  return NULL;
}

// Rows of bucket |b|: the count of its E/B experts.
static int64_t tprt__bucket_rows(const int64_t* sizes, int64_t per_bucket, int64_t b) {
  int64_t n = 0;
  for (int64_t j = b * per_bucket; j < (b + 1) * per_bucket; ++j) n += sizes[j];
  return n;
}

tprt_status_t tprt_cpu_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                  int buckets) {
  size_t row_bytes = 0;
  tprt_status_t s = tprt__bucket_check("moe_bucket", x, group_sizes, y, buckets, true, &row_bytes);
  if (s || row_bytes == 0) return s;
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t r = x->dims[0], per_bucket = group_sizes->dims[0] / buckets, start = 0;
  const char* src = (const char*)x->data;
  char* dst = (char*)y->data;
  for (int64_t b = 0; b < buckets; ++b) {
    int64_t n = tprt__bucket_rows(sizes, per_bucket, b);
    char* slot = dst + (size_t)(b * r) * row_bytes;
    if (n > 0) memcpy(slot, src + (size_t)start * row_bytes, (size_t)n * row_bytes);
    if (r > n) memset(slot + (size_t)n * row_bytes, 0, (size_t)(r - n) * row_bytes);
    start += n;
  }
  return NULL;
}

tprt_status_t tprt_cpu_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                    int buckets) {
  size_t row_bytes = 0;
  tprt_status_t s = tprt__bucket_check("moe_unbucket", x, group_sizes, y, buckets, false, &row_bytes);
  if (s || row_bytes == 0) return s;
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t r = y->dims[0], per_bucket = group_sizes->dims[0] / buckets, start = 0;
  const char* src = (const char*)x->data;
  char* dst = (char*)y->data;
  for (int64_t b = 0; b < buckets; ++b) {
    int64_t n = tprt__bucket_rows(sizes, per_bucket, b);
    if (n > 0) memcpy(dst + (size_t)start * row_bytes, src + (size_t)(b * r) * row_bytes, (size_t)n * row_bytes);
    start += n;
  }
  return NULL;
}
