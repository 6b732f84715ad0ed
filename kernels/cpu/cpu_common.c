// Helpers shared by the CPU kernels (tprt_cpu_internal.h) and tprt_cpu_copy.
#include <stdio.h>
#include <string.h>

#include "tprt_allocator.h"
#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

void tprt__ld_row(const void* p, int dtype, int64_t offset, int64_t n, float* out) {
  switch (dtype) {
    case TPRT_DTYPE_BF16: {
      const uint16_t* s = (const uint16_t*)p + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = tprt_bf16_to_f32(s[i]);
      break;
    }
    case TPRT_DTYPE_F16: {
      const uint16_t* s = (const uint16_t*)p + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = tprt_f16_to_f32(s[i]);
      break;
    }
    default:
      if (n > 0) memcpy(out, (const float*)p + offset, (size_t)n * sizeof(float));
      break;
  }
}

void tprt__st_row(void* p, int dtype, int64_t offset, int64_t n, const float* in) {
  for (int64_t i = 0; i < n; ++i) tprt__st(p, dtype, offset + i, in[i]);
}

const char* tprt__shape_str(const tprt_tensor_t* t, char* buf, size_t size) {
  size_t used = 0;
  int n = snprintf(buf, size, "[");
  used = n > 0 ? (size_t)n : 0;
  for (int i = 0; i < t->rank && used < size; ++i) {
    n = snprintf(buf + used, size - used, i ? ",%lld" : "%lld", (long long)t->dims[i]);
    used += n > 0 ? (size_t)n : 0;
  }
  if (used < size) snprintf(buf + used, size - used, "] %s", tprt_dtype_name(t->dtype));
  return buf;
}

const char* tprt__dtypes_str(unsigned dtypes, char* buf, size_t size) {
  int names[TPRT_DTYPE_COUNT], count = 0;
  for (int d = 0; d < TPRT_DTYPE_COUNT; ++d)
    if (dtypes & TPRT__M(d)) names[count++] = d;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < count && used < size; ++i) {
    const char* sep = i == 0 ? "" : i == count - 1 ? " or " : ", ";
    int n = snprintf(buf + used, size - used, "%s%s", sep, tprt_dtype_name(names[i]));
    used += n > 0 ? (size_t)n : 0;
  }
  return buf;
}

tprt_status_t tprt__check(const char* op, const char* name, const tprt_tensor_t* t, int rank, unsigned dtypes) {
  char a[96], b[64];
  if (!t) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", op, name);
  if (t->rank < 0 || t->rank > TPRT_MAX_RANK)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s has rank %d; ranks are 0..%d", op, name, t->rank,
                            TPRT_MAX_RANK);
  bool rank_ok = rank < 0 ? t->rank >= 1 : t->rank == rank;
  bool dtype_ok = t->dtype >= 0 && t->dtype < TPRT_DTYPE_COUNT && (dtypes & TPRT__M(t->dtype));
  if (!rank_ok || !dtype_ok) {
    char r[32];
    if (rank < 0)
      snprintf(r, sizeof r, "rank >= 1");
    else
      snprintf(r, sizeof r, "rank-%d", rank);
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be a %s %s tensor; got %s", op, name, r,
                            tprt__dtypes_str(dtypes, b, sizeof b), tprt__shape_str(t, a, sizeof a));
  }
  for (int i = 0; i < t->rank; ++i)
    if (t->dims[i] < 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s has a negative dimension: %s", op, name,
                              tprt__shape_str(t, a, sizeof a));
  if (!t->data && tprt_tensor_numel(t) > 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s %s has no data", op, name,
                            tprt__shape_str(t, a, sizeof a));
  return NULL;
}

tprt_status_t tprt__check_dims(const char* op, const char* name, const tprt_tensor_t* t, int rank, const int64_t* dims,
                               const char* what) {
  bool ok = t->rank == rank;
  for (int i = 0; ok && i < rank; ++i) ok = t->dims[i] == dims[i];
  if (ok) return NULL;
  char a[96];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s must be %s; got %s", op, name, what,
                          tprt__shape_str(t, a, sizeof a));
}

tprt_status_t tprt__scratch(const char* op, size_t bytes, void** out_ptr) {
  *out_ptr = NULL;
  if (bytes == 0) bytes = 16;
  tprt_status_t s = tprt_allocator_malloc_uninitialized(tprt_allocator_system(), bytes, 64, out_ptr);
  if (s) {
    tprt_status_free(s);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: cannot allocate %zu bytes of scratch", op, bytes);
  }
  return NULL;
}

void tprt__scratch_free(void* ptr) { tprt_allocator_free(tprt_allocator_system(), ptr); }

tprt_status_t tprt__check_copy(const tprt_tensor_t* src, const tprt_tensor_t* dst) {
  const char* op = "copy";
  unsigned any = (1u << TPRT_DTYPE_COUNT) - 1u;
  tprt_status_t s = tprt__check(op, "src", src, src ? src->rank : 0, any);
  if (!s) s = tprt__check(op, "dst", dst, src->rank, any);
  if (s) return s;
  char what[112], a[96];
  snprintf(what, sizeof what, "src's shape %s", tprt__shape_str(src, a, sizeof a));
  s = tprt__check_dims(op, "dst", dst, src->rank, src->dims, what);
  if (s) return s;
  if (src->dtype != dst->dtype && (!(TPRT__FLOATS & TPRT__M(src->dtype)) || !(TPRT__FLOATS & TPRT__M(dst->dtype))))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "copy: converting %s to %s is not supported (only between bf16, f16 and f32)",
                            tprt_dtype_name(src->dtype), tprt_dtype_name(dst->dtype));
  return NULL;
}

tprt_status_t tprt_cpu_copy(const tprt_tensor_t* src, tprt_tensor_t* dst) {
  tprt_status_t s = tprt__check_copy(src, dst);
  if (s) return s;
  int64_t n = tprt_tensor_numel(src);
  if (src->dtype == dst->dtype) {
    if (n > 0) memmove(dst->data, src->data, tprt_tensor_bytes(src));
    return NULL;
  }
  for (int64_t i = 0; i < n; ++i) tprt__st(dst->data, dst->dtype, i, tprt__ld(src->data, src->dtype, i));
  return NULL;
}

// Sums a + b, saturating at INT64_MAX: counts are checked non-negative first, and the saturated
// sum is only ever compared with a row count, so absurd counts cannot overflow.
static int64_t tprt__sat_add(int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; }

tprt_status_t tprt__check_segment_shapes(const char* op, int64_t t, const tprt_tensor_t* w, const char* wname,
                                         const char* rows_of, const tprt_tensor_t* group_sizes, int64_t* out_segments) {
  char a[96], b[96], rows[32] = "";
  if (rows_of) snprintf(rows, sizeof rows, " of %s", rows_of);
  int64_t e = w->dims[0], g = group_sizes->dims[0];
  // E == 0 (an empty w) keeps the one-segment rule with no counts at all.
  if (e == 0 ? g != 0 : g == 0 || g % e != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: group_sizes must be [S*E] = S >= 1 segments of E=%lld counts (%s is %s); got %s", op,
                            (long long)e, wname, tprt__shape_str(w, a, sizeof a),
                            tprt__shape_str(group_sizes, b, sizeof b));
  int64_t segs = e == 0 ? 1 : g / e;
  if (t % segs != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: T=%lld rows%s are not divisible by S=%lld segments (group_sizes is %s, E=%lld)", op,
                            (long long)t, rows, (long long)segs, tprt__shape_str(group_sizes, a, sizeof a), (long long)e);
  *out_segments = segs;
  return NULL;
}

tprt_status_t tprt__check_segments(const char* op, int64_t t, const tprt_tensor_t* w, const char* wname,
                                   const char* rows_of, const tprt_tensor_t* group_sizes, int64_t* out_segments) {
  int64_t segs = 1;
  tprt_status_t s = tprt__check_segment_shapes(op, t, w, wname, rows_of, group_sizes, &segs);
  if (s) return s;
  return tprt__check_segment_counts(op, t, w, rows_of, group_sizes, segs, out_segments);
}

tprt_status_t tprt__check_segment_counts(const char* op, int64_t t, const tprt_tensor_t* w, const char* rows_of,
                                         const tprt_tensor_t* group_sizes, int64_t segs, int64_t* out_segments) {
  char holder[48] = "there are";
  if (rows_of) snprintf(holder, sizeof holder, "%s has", rows_of);
  int64_t e = w->dims[0];
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int64_t cap = t / segs;
  for (int64_t sg = 0; sg < segs; ++sg) {
    int64_t used = 0;
    for (int64_t j = 0; j < e; ++j) {
      int64_t i = sg * e + j;
      if (sizes[i] < 0 || sizes[i] > cap) {
        if (segs == 1)
          return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: group_sizes[%lld]=%lld is outside [0, T=%lld]", op,
                                  (long long)i, (long long)sizes[i], (long long)t);
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                                "%s: group_sizes[%lld]=%lld (segment %lld, expert %lld) is outside [0, T/S=%lld]", op,
                                (long long)i, (long long)sizes[i], (long long)sg, (long long)j, (long long)cap);
      }
      used = tprt__sat_add(used, sizes[i]);
    }
    if (segs == 1 && used != t)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: group_sizes sum to %lld but %s T=%lld rows", op,
                              (long long)used, holder, (long long)t);
    if (used > cap)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "%s: segment %lld holds %lld rows but has capacity %lld (T=%lld rows in S=%lld segments)",
                              op, (long long)sg, (long long)used, (long long)cap, (long long)t, (long long)segs);
  }
  *out_segments = segs;
  return NULL;
}

tprt_status_t tprt__check_glu(const char* op, const tprt_tensor_t* x, const char* half_name, const tprt_tensor_t* half,
                              int kind, int64_t interleave, float alpha, float limit) {
  char a[96], b[96];
  tprt_status_t s = tprt__check(op, "x", x, -1, TPRT__FLOATS);
  if (!s) s = tprt__check(op, half_name, half, x->rank, TPRT__FLOATS);
  if (s) return s;
  int r = x->rank;
  int64_t two_f = x->dims[r - 1], f = two_f / 2;
  if (two_f % 2 != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: the last dimension of x must be even (2F); got x %s", op,
                            tprt__shape_str(x, a, sizeof a));
  bool half_ok = half->dtype == x->dtype && half->dims[r - 1] == f;
  for (int i = 0; i < r - 1; ++i) half_ok = half_ok && half->dims[i] == x->dims[i];
  if (!half_ok)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: %s must be x's shape with the last dimension halved (F=%lld) and x's dtype; x is %s, "
                            "%s is %s",
                            op, half_name, (long long)f, tprt__shape_str(x, a, sizeof a), half_name,
                            tprt__shape_str(half, b, sizeof b));
  if (kind < 0 || kind > 2)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: kind=%d is not 0 (swiglu), 1 (geglu) or 2 (quick_geglu)",
                            op, kind);
  if (interleave < 0 || (interleave > 0 && f % interleave != 0))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: interleave=%lld must be 0 or a positive divisor of F=%lld", op, (long long)interleave,
                            (long long)f);
  if (kind == TPRT_GLU_QUICK_GEGLU && (!isfinite(alpha) || !(alpha > 0.0f) || !isfinite(limit) || !(limit > 0.0f)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: quick_geglu needs finite alpha > 0 and limit > 0; got alpha=%g, limit=%g", op,
                            (double)alpha, (double)limit);
  return NULL;
}
