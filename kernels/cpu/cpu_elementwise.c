// Elementwise kernels: tprt_cpu_add, tprt_cpu_mul (f32 result of the two widened operands,
// rounded once; add also takes a rank-1 b of a's last dimension, broadcast over the rows: the
// bias added once after a row-parallel reduction, and with an f32 a a b in storage precision: the
// residual added to a reduced f32 sum) and the counter-based initialiser tprt_cpu_fill_philox.
#include <math.h>
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

// Whether |a| and |b| have the same rank and dims (dtypes aside).
static bool tprt__same_dims(const tprt_tensor_t* a, const tprt_tensor_t* b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; ++d)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

tprt_status_t tprt__check_elementwise(const char* op, const tprt_tensor_t* a, const tprt_tensor_t* b,
                                      const tprt_tensor_t* c, bool mul, int64_t* out_bias_cols) {
  char sa[96], sb[96];
  *out_bias_cols = 0;
  tprt_status_t s = tprt__check(op, "a", a, a ? a->rank : 0, TPRT__FLOATS);
  // Add only: an f32 a (a reduced f32 sum) may take a b of another float dtype (the storage
  // precision of a bias or a residual); c then has a's dtype or b's, and the sum is rounded once.
  bool wide = !s && !mul && a->dtype == TPRT_DTYPE_F32;
  // Add only: a rank-1 b whose length is a's last dimension is a bias broadcast over a's rows.
  bool bias = !s && !mul && b && b->rank == 1 && a->rank > 1 && b->dims[0] == a->dims[a->rank - 1] &&
              (b->dtype == a->dtype || wide);
  if (!s) s = tprt__check(op, "b", b, bias ? 1 : a->rank, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "c", c, a->rank, TPRT__FLOATS);
  if (s) return s;
  if (!bias && !tprt_tensor_same_layout(a, b) && !(wide && tprt__same_dims(a, b)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: a and b must have the same shape and dtype; a is %s, b is %s", op,
                            tprt__shape_str(a, sa, sizeof sa), tprt__shape_str(b, sb, sizeof sb));
  if (!tprt__same_dims(a, c) || (c->dtype != a->dtype && !(wide && c->dtype == b->dtype)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: c must have a's shape and dtype %s%s; got %s", op,
                            tprt__shape_str(a, sa, sizeof sa), wide ? " (or, for an f32 a, b's dtype)" : "",
                            tprt__shape_str(c, sb, sizeof sb));
  if (bias) *out_bias_cols = b->dims[0];
  return NULL;
}

static tprt_status_t tprt__elementwise(const char* op, const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c,
                                       bool mul) {
  int64_t cols = 0;
  tprt_status_t s = tprt__check_elementwise(op, a, b, c, mul, &cols);
  if (s) return s;
  int64_t n = tprt_tensor_numel(a);
  for (int64_t i = 0; i < n; ++i) {
    float x = tprt__ld(a->data, a->dtype, i), y = tprt__ld(b->data, b->dtype, cols ? i % cols : i);
    tprt__st(c->data, c->dtype, i, mul ? x * y : x + y);
  }
  return NULL;
}

tprt_status_t tprt_cpu_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  return tprt__elementwise("add", a, b, c, false);
}

tprt_status_t tprt_cpu_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  return tprt__elementwise("mul", a, b, c, true);
}

tprt_status_t tprt__check_fill_philox(const tprt_tensor_t* t, float lo, float hi, int64_t row_offset,
                                      int64_t col_offset, int64_t logical_cols) {
  const char* op = "fill_philox";
  char a[96];
  tprt_status_t s = tprt__check(op, "t", t, -1, TPRT__FLOATS);
  if (s) return s;
  if (!isfinite(lo) || !isfinite(hi))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: lo=%g and hi=%g must be finite", op, (double)lo,
                            (double)hi);
  int64_t cols = t->dims[t->rank - 1];
  if (row_offset < 0 || col_offset < 0 || logical_cols < 0 || col_offset + cols > logical_cols)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: the block at (row_offset=%lld, col_offset=%lld) of t %s does not fit in "
                            "logical_cols=%lld",
                            op, (long long)row_offset, (long long)col_offset, tprt__shape_str(t, a, sizeof a),
                            (long long)logical_cols);
  return NULL;
}

tprt_status_t tprt_cpu_fill_philox(tprt_tensor_t* t, uint64_t seed, uint64_t stream, float lo, float hi,
                                   int64_t row_offset, int64_t col_offset, int64_t logical_cols) {
  tprt_status_t s = tprt__check_fill_philox(t, lo, hi, row_offset, col_offset, logical_cols);
  if (s) return s;
  int64_t cols = t->dims[t->rank - 1];
  int64_t rows = cols == 0 ? 0 : tprt_tensor_numel(t) / cols;
  float range = hi - lo;
  // tprt_philox_uniform element by element, with each Philox block (4 consecutive elements' bits)
  // computed once: the same values at a quarter of the work.
  uint32_t bits[4];
  uint64_t have = UINT64_MAX;  // the block in |bits|
  for (int64_t i = 0; i < rows; ++i) {
    uint64_t base = (uint64_t)(row_offset + i) * (uint64_t)logical_cols + (uint64_t)col_offset;
    for (int64_t j = 0; j < cols; ++j) {
      uint64_t e = base + (uint64_t)j, block = e >> 2;
      if (block != have) {
        tprt_philox_block(seed, stream, block, bits);
        have = block;
      }
      float u = tprt_philox_uniform_of_bits(bits[e & 3u]);
      tprt__st(t->data, t->dtype, i * cols + j, fmaf(range, u, lo));
    }
  }
  return NULL;
}
