// Verifier rules of the compute ops: linear, grouped_linear, glu, rmsnorm, layernorm, add, mul,
// moe_route, moe_permute, moe_unpermute and fused_grouped_mlp.
#include <math.h>
#include <stdio.h>

#include "mlir-c/BuiltinAttributes.h"
#include "tp_ops.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()

// Scratch buffers for the shapes and types quoted in a message.
typedef struct {
  char a[96], b[96], c[96], d[96];
} tpc__bufs_t;
#define DIMS(s, buf) tpc__dims_str(&(s), (buf), (int)sizeof(buf))
#define TYPE(t, buf) tpc__type_str((t), (buf), (int)sizeof(buf))

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__verify_linear(MlirOperation op) {
  tpc__bufs_t s;
  MlirValue bias_v = tpc_linear_get_bias(op);
  tpc_shape_t x = tpc__shape_of(tpc_linear_get_x(op)), w = tpc__shape_of(tpc_linear_get_w(op));
  tpc_shape_t y = tpc__shape_of(tpc_linear_get_y(op)), b = tpc__shape_of(bias_v);
  bool has_bias = !mlirValueIsNull(bias_v);
  bool partial = tpc_linear_get_partial(op);
  if (!x.valid || !w.valid || !y.valid || (has_bias && !b.valid)) return FAIL;
  if (x.rank != 2 || w.rank != 2 || y.rank != 2 || (has_bias && b.rank != 1))
    return tpc__rule_error(op, "linear.rank", "expects x[M,K], w[N,K], bias[N], y[M,N]; got x %s, w %s, bias %s, y %s",
                           DIMS(x, s.a), DIMS(w, s.b), has_bias ? DIMS(b, s.d) : "none", DIMS(y, s.c));
  if (!tpc__is_storage_float(x.element) || !mlirTypeEqual(x.element, w.element) ||
      (has_bias && !mlirTypeEqual(b.element, x.element)))
    return tpc__rule_error(op, "linear.dtype",
                           "x, w and bias must share one bf16, f16 or f32 element type; got x %s, w %s, bias %s",
                           TYPE(x.type, s.a), TYPE(w.type, s.b), has_bias ? TYPE(b.type, s.c) : "none");
  if (x.dims[1] != w.dims[1])
    return tpc__rule_error(op, "linear.k", "x[M,K] and w[N,K] disagree on K: x %s has K=%lld, w %s has K=%lld",
                           DIMS(x, s.a), (long long)x.dims[1], DIMS(w, s.b), (long long)w.dims[1]);
  if (partial && has_bias)
    return tpc__rule_error(op, "linear.partial",
                           "a partial linear cannot add a bias; the bias is added once, after the reduction");
  if (partial && !tpc__is_f32(y.element))
    return tpc__rule_error(op, "linear.partial", "a partial linear returns an unreduced f32 sum; y is %s",
                           TYPE(y.type, s.a));
  if (!partial && !mlirTypeEqual(y.element, x.element))
    return tpc__rule_error(op, "linear.dtype", "y must have x's element type %s; y is %s", TYPE(x.element, s.a),
                           TYPE(y.type, s.b));
  if (y.dims[0] != x.dims[0] || y.dims[1] != w.dims[0])
    return tpc__rule_error(op, "linear.result", "y must be [M,N]=[%lld,%lld] for x %s and w %s; got %s",
                           (long long)x.dims[0], (long long)w.dims[0], DIMS(x, s.a), DIMS(w, s.b), DIMS(y, s.c));
  if (has_bias && b.dims[0] != w.dims[0])
    return tpc__rule_error(op, "linear.bias", "bias must be [N]=[%lld] for w %s; got %s", (long long)w.dims[0],
                           DIMS(w, s.a), DIMS(b, s.b));
  if (tpc_linear_get_sequence_parallel(op) && tpc_linear_get_parallel(op) == TPC_PARALLEL_NONE)
    return tpc__rule_error(op, "linear.sequence-parallel",
                           "sequence_parallel needs parallel = \"column\" or \"row\"; this linear is not sharded");
  return OK;
}

//===----------------------------------------------------------------------===//
// grouped_linear
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__verify_group_sizes(MlirOperation op, const char* rule, MlirValue v, int64_t experts) {
  tpc__bufs_t s;
  tpc_shape_t g = tpc__shape_of(v);
  if (!g.valid) return FAIL;
  if (g.rank != 1 || g.dims[0] != experts || !tpc__is_i64(g.element))
    return tpc__rule_error(op, rule, "group_sizes must be tensor<%lldxi64> (one count per expert); got %s",
                           (long long)experts, TYPE(g.type, s.a));
  return OK;
}

static MlirLogicalResult tpc__verify_grouped_linear(MlirOperation op) {
  tpc__bufs_t s;
  tpc_shape_t x = tpc__shape_of(tpc_grouped_linear_get_x(op)), w = tpc__shape_of(tpc_grouped_linear_get_w(op));
  tpc_shape_t y = tpc__shape_of(tpc_grouped_linear_get_y(op));
  if (!x.valid || !w.valid || !y.valid) return FAIL;
  if (x.rank != 2 || w.rank != 3 || y.rank != 2)
    return tpc__rule_error(op, "grouped_linear.rank", "expects x[T,K], w[E,N,K], y[T,N]; got x %s, w %s, y %s",
                           DIMS(x, s.a), DIMS(w, s.b), DIMS(y, s.c));
  if (!tpc__is_storage_float(x.element) || !mlirTypeEqual(x.element, w.element))
    return tpc__rule_error(op, "grouped_linear.dtype", "x and w must share one bf16, f16 or f32 element type; got x %s, w %s",
                           TYPE(x.type, s.a), TYPE(w.type, s.b));
  if (x.dims[1] != w.dims[2])
    return tpc__rule_error(op, "grouped_linear.k", "x[T,K] and w[E,N,K] disagree on K: x %s has K=%lld, w %s has K=%lld",
                           DIMS(x, s.a), (long long)x.dims[1], DIMS(w, s.b), (long long)w.dims[2]);
  tpc_shape_t g = tpc__shape_of(tpc_grouped_linear_get_group_sizes(op));
  if (!g.valid) return FAIL;
  if (w.dims[0] < 1)
    return tpc__rule_error(op, "grouped_linear.groups", "w[E,N,K] must hold at least one expert; got w %s",
                           DIMS(w, s.a));
  if (g.rank != 1 || !tpc__is_i64(g.element) || !tpc__splits(g.dims[0], w.dims[0], 1) ||
      !tpc__splits(x.dims[0], g.dims[0] / w.dims[0], 1))
    return tpc__rule_error(op, "grouped_linear.groups",
                           "group_sizes must be tensor<Gxi64> with G a multiple of the %lld experts of w and the %lld "
                           "rows of x divisible into G/%lld segments; got %s",
                           (long long)w.dims[0], (long long)x.dims[0], (long long)w.dims[0], TYPE(g.type, s.a));
  bool partial = tpc_grouped_linear_get_partial(op);
  if (partial && !tpc__is_f32(y.element))
    return tpc__rule_error(op, "grouped_linear.partial",
                           "a partial grouped linear returns an unreduced f32 sum; y is %s", TYPE(y.type, s.a));
  if (!partial && !mlirTypeEqual(y.element, x.element))
    return tpc__rule_error(op, "grouped_linear.dtype", "y must have x's element type %s; y is %s",
                           TYPE(x.element, s.a), TYPE(y.type, s.b));
  if (y.dims[0] != x.dims[0] || y.dims[1] != w.dims[1])
    return tpc__rule_error(op, "grouped_linear.result", "y must be [T,N]=[%lld,%lld] for x %s and w %s; got %s",
                           (long long)x.dims[0], (long long)w.dims[1], DIMS(x, s.a), DIMS(w, s.b), DIMS(y, s.c));
  int par = tpc_grouped_linear_get_parallel(op);
  if (tpc_grouped_linear_get_sequence_parallel(op) && par != TPC_PARALLEL_COLUMN && par != TPC_PARALLEL_ROW)
    return tpc__rule_error(op, "grouped_linear.sequence-parallel",
                           "sequence_parallel needs parallel = \"column\" or \"row\" (expert tensor parallelism)");
  return OK;
}

//===----------------------------------------------------------------------===//
// glu and the fused grouped MLP
//===----------------------------------------------------------------------===//

// Rules on kind/interleave/alpha/limit shared by tp.glu and tp.fused_grouped_mlp. |f| is the
// GLU output width (half of FC1's rows).
MlirLogicalResult tpc__verify_glu_params(MlirOperation op, int kind_index, int interleave_index,
                                                int alpha_index, int limit_index, int op_kind, int64_t f) {
  int64_t interleave = tpc_op_get_i64(op, op_kind, interleave_index);
  if (interleave < 0 || (interleave > 0 && f % interleave != 0))
    return tpc__rule_error(op, "glu.interleave",
                           "interleave=%lld must be 0 (gate and up halves) or a block size dividing F=%lld",
                           (long long)interleave, (long long)f);
  bool quick = tpc_op_get_enum(op, op_kind, kind_index) == TPC_KIND_QUICK_GEGLU;
  bool has_alpha = !mlirAttributeIsNull(tpc_op_get_attr(op, op_kind, alpha_index));
  bool has_limit = !mlirAttributeIsNull(tpc_op_get_attr(op, op_kind, limit_index));
  if (!quick && (has_alpha || has_limit))
    return tpc__rule_error(op, "glu.params", "alpha and limit apply only to kind = \"quick_geglu\"");
  double alpha = tpc_op_get_f64(op, op_kind, alpha_index), limit = tpc_op_get_f64(op, op_kind, limit_index);
  if (!(alpha > 0.0) || !isfinite(alpha) || !(limit > 0.0) || !isfinite(limit))
    return tpc__rule_error(op, "glu.params", "alpha=%g and limit=%g must be finite and > 0", alpha, limit);
  return OK;
}

static MlirLogicalResult tpc__verify_glu(MlirOperation op) {
  tpc__bufs_t s;
  tpc_shape_t x = tpc__shape_of(tpc_glu_get_x(op)), y = tpc__shape_of(tpc_glu_get_y(op));
  if (!x.valid || !y.valid) return FAIL;
  if (x.rank < 1 || !tpc__is_storage_float(x.element))
    return tpc__rule_error(op, "glu.dtype", "x must be a bf16, f16 or f32 tensor of rank >= 1; got %s", TYPE(x.type, s.a));
  int64_t two_f = x.dims[x.rank - 1];
  if (two_f % 2 != 0)
    return tpc__rule_error(op, "glu.even", "the last dimension of x holds gate and up and must be even; got %lld",
                           (long long)two_f);
  bool shape_ok = y.rank == x.rank && mlirTypeEqual(y.element, x.element) && y.dims[y.rank - 1] == two_f / 2;
  for (int i = 0; shape_ok && i + 1 < x.rank; ++i) shape_ok = y.dims[i] == x.dims[i];
  if (!shape_ok)
    return tpc__rule_error(op, "glu.result", "y must be x's shape with the last dimension halved (%lld -> %lld); got %s",
                           (long long)two_f, (long long)two_f / 2, TYPE(y.type, s.a));
  return tpc__verify_glu_params(op, TPC_GLU_ATTR_KIND, TPC_GLU_ATTR_INTERLEAVE, TPC_GLU_ATTR_ALPHA,
                                TPC_GLU_ATTR_LIMIT, TPC_OP_GLU, two_f / 2);
}

static MlirLogicalResult tpc__verify_fused_grouped_mlp(MlirOperation op) {
  tpc__bufs_t s;
  tpc_shape_t x = tpc__shape_of(tpc_fused_grouped_mlp_get_x(op));
  tpc_shape_t w1 = tpc__shape_of(tpc_fused_grouped_mlp_get_w1(op)), w2 = tpc__shape_of(tpc_fused_grouped_mlp_get_w2(op));
  if (!x.valid || !w1.valid || !w2.valid) return FAIL;
  bool ok = x.rank == 2 && w1.rank == 3 && w2.rank == 3 && tpc__is_storage_float(x.element) &&
            mlirTypeEqual(w1.element, x.element) && mlirTypeEqual(w2.element, x.element);
  ok = ok && w1.dims[1] % 2 == 0 && w1.dims[2] == x.dims[1] && w2.dims[0] == w1.dims[0] &&
       w2.dims[1] == x.dims[1] && w2.dims[2] == w1.dims[1] / 2;
  if (!ok)
    return tpc__rule_error(op, "fused_grouped_mlp.shapes",
                           "expects x[T,H], w1[E,2F,H], w2[E,H,F] of one float type; got x %s, w1 %s, w2 %s",
                           TYPE(x.type, s.a), TYPE(w1.type, s.b), TYPE(w2.type, s.c));
  if (mlirLogicalResultIsFailure(
          tpc__verify_group_sizes(op, "fused_grouped_mlp.groups", tpc_fused_grouped_mlp_get_group_sizes(op), w1.dims[0])))
    return FAIL;
  return tpc__verify_glu_params(op, TPC_FUSED_GROUPED_MLP_ATTR_KIND, TPC_FUSED_GROUPED_MLP_ATTR_INTERLEAVE,
                                TPC_FUSED_GROUPED_MLP_ATTR_ALPHA, TPC_FUSED_GROUPED_MLP_ATTR_LIMIT,
                                TPC_OP_FUSED_GROUPED_MLP, w1.dims[1] / 2);
}

//===----------------------------------------------------------------------===//
// Norms and elementwise ops
//===----------------------------------------------------------------------===//

// Rules shared by rmsnorm, layernorm and the fused all-reduce/reduce-scatter + RMSNorm ops.
MlirLogicalResult tpc__verify_norm_params(MlirOperation op, MlirValue x_v, MlirValue gamma_v, MlirValue beta_v, double eps) {
  tpc__bufs_t s;
  tpc_shape_t x = tpc__shape_of(x_v), g = tpc__shape_of(gamma_v), b = tpc__shape_of(beta_v);
  if (!x.valid || !g.valid) return FAIL;
  if (x.rank != 2 || !tpc__is_storage_float(x.element))
    return tpc__rule_error(op, "norm.input", "the normalized tensor must be a bf16, f16 or f32 [M,H]; got %s",
                           TYPE(x.type, s.a));
  if (g.rank != 1 || g.dims[0] != x.dims[1] || !tpc__is_storage_float(g.element))
    return tpc__rule_error(op, "norm.gamma", "gamma must be a float [H]=[%lld]; got %s", (long long)x.dims[1],
                           TYPE(g.type, s.a));
  if (!mlirValueIsNull(beta_v) && (!b.valid || b.rank != 1 || b.dims[0] != x.dims[1] || !mlirTypeEqual(b.element, g.element)))
    return tpc__rule_error(op, "norm.beta", "beta must be [H]=[%lld] with gamma's element type; got %s",
                           (long long)x.dims[1], TYPE(b.type, s.a));
  if (!(eps > 0.0) || !isfinite(eps)) return tpc__rule_error(op, "norm.eps", "eps=%g must be finite and > 0", eps);
  return OK;
}

static MlirLogicalResult tpc__verify_elementwise(MlirOperation op, MlirValue lhs, MlirValue rhs, MlirValue result) {
  tpc__bufs_t s;
  tpc_shape_t a = tpc__shape_of(lhs), b = tpc__shape_of(rhs), r = tpc__shape_of(result);
  if (!a.valid || !b.valid || !r.valid) return FAIL;
  if (!tpc__is_storage_float(a.element))
    return tpc__rule_error(op, "elementwise.dtype", "operands must be bf16, f16 or f32 tensors; got %s", TYPE(a.type, s.a));
  // tp.add also adds a bias: a rank-1 rhs of lhs's last dimension, broadcast over the rows.
  // An f32 lhs is a reduced f32 sum; its bias keeps the storage type and the sum rounds once.
  bool bias = tpc_is_add(op) && b.rank == 1 && a.rank > 1 && b.dims[0] == a.dims[a.rank - 1] &&
              (mlirTypeEqual(a.element, b.element) || (tpc__is_f32(a.element) && tpc__is_storage_float(b.element)));
  if (!bias && !mlirTypeEqual(a.type, b.type))
    return tpc__rule_error(op, "elementwise.shapes",
                           "rhs must have lhs's type %s%s; got %s", TYPE(a.type, s.a),
                           tpc_is_add(op) ? " (or be a bias of its last dimension)" : "", TYPE(b.type, s.b));
  bool same_shape = r.rank == a.rank;
  for (int i = 0; same_shape && i < a.rank; ++i) same_shape = r.dims[i] == a.dims[i];
  if (!mlirTypeEqual(r.type, a.type) && !(bias && same_shape && mlirTypeEqual(r.element, b.element)))
    return tpc__rule_error(op, "elementwise.result",
                           "the result must have lhs's type %s (an f32 lhs plus a bias may instead round to the "
                           "bias's element type); got %s",
                           TYPE(a.type, s.a), TYPE(r.type, s.b));
  return OK;
}

//===----------------------------------------------------------------------===//
// MoE routing
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__verify_moe_route(MlirOperation op) {
  tpc__bufs_t s;
  tpc_shape_t l = tpc__shape_of(tpc_moe_route_get_logits(op));
  tpc_shape_t idx = tpc__shape_of(tpc_moe_route_get_indices(op)), w = tpc__shape_of(tpc_moe_route_get_weights(op));
  if (!l.valid || !idx.valid || !w.valid) return FAIL;
  if (l.rank != 2 || !tpc__is_storage_float(l.element))
    return tpc__rule_error(op, "moe_route.logits", "logits must be a float [T,E]; got %s", TYPE(l.type, s.a));
  int64_t k = tpc_moe_route_get_top_k(op), e = l.dims[1];
  if (k < 1 || k > e)
    return tpc__rule_error(op, "moe_route.top_k", "top_k=%lld must be in [1, E] with E=%lld experts", (long long)k,
                           (long long)e);
  bool ok = idx.rank == 2 && idx.dims[0] == l.dims[0] && idx.dims[1] == k && tpc__is_i32(idx.element) &&
            w.rank == 2 && w.dims[0] == l.dims[0] && w.dims[1] == k && tpc__is_f32(w.element);
  if (!ok)
    return tpc__rule_error(op, "moe_route.results", "expects indices tensor<%lldx%lldxi32> and weights tensor<%lldx%lldxf32>; got %s and %s",
                           (long long)l.dims[0], (long long)k, (long long)l.dims[0], (long long)k,
                           TYPE(idx.type, s.a), TYPE(w.type, s.b));
  return OK;
}

static MlirLogicalResult tpc__verify_moe_permute(MlirOperation op) {
  tpc__bufs_t s;
  tpc_shape_t x = tpc__shape_of(tpc_moe_permute_get_x(op)), idx = tpc__shape_of(tpc_moe_permute_get_indices(op));
  tpc_shape_t y = tpc__shape_of(tpc_moe_permute_get_y(op)), g = tpc__shape_of(tpc_moe_permute_get_group_sizes(op));
  tpc_shape_t map = tpc__shape_of(tpc_moe_permute_get_row_map(op));
  if (!x.valid || !idx.valid || !y.valid || !g.valid || !map.valid) return FAIL;
  bool ok = x.rank == 2 && idx.rank == 2 && idx.dims[0] == x.dims[0] && tpc__is_i32(idx.element);
  int64_t rows = ok ? x.dims[0] * idx.dims[1] : 0;
  ok = ok && y.rank == 2 && y.dims[0] == rows && y.dims[1] == x.dims[1] && mlirTypeEqual(y.element, x.element) &&
       map.rank == 1 && map.dims[0] == rows && tpc__is_i32(map.element);
  if (!ok)
    return tpc__rule_error(op, "moe_permute.shapes",
                           "expects x[T,H], indices[T,k] i32, y[T*k,H] with x's type and row_map[T*k] i32; "
                           "got x %s, indices %s, y %s, row_map %s",
                           TYPE(x.type, s.a), TYPE(idx.type, s.b), TYPE(y.type, s.c), TYPE(map.type, s.d));
  if (g.rank != 1 || !tpc__is_i64(g.element) || g.dims[0] < idx.dims[1])
    return tpc__rule_error(op, "moe_permute.groups",
                           "group_sizes must be [E] i64 with top_k=%lld <= E; got %s", (long long)idx.dims[1],
                           TYPE(g.type, s.a));
  return OK;
}

// Rules of tp.moe_bucket (|bucket|) and tp.moe_unbucket: rows [R,H] <-> buckets [B*R,H].
static MlirLogicalResult tpc__verify_moe_bucket(MlirOperation op, bool bucket) {
  tpc__bufs_t s;
  MlirValue xv = bucket ? tpc_moe_bucket_get_x(op) : tpc_moe_unbucket_get_x(op);
  MlirValue yv = bucket ? tpc_moe_bucket_get_y(op) : tpc_moe_unbucket_get_y(op);
  MlirValue gv = bucket ? tpc_moe_bucket_get_group_sizes(op) : tpc_moe_unbucket_get_group_sizes(op);
  int64_t b = bucket ? tpc_moe_bucket_get_buckets(op) : tpc_moe_unbucket_get_buckets(op);
  tpc_shape_t x = tpc__shape_of(xv), y = tpc__shape_of(yv), g = tpc__shape_of(gv);
  if (!x.valid || !y.valid || !g.valid) return FAIL;
  const tpc_shape_t* rows = bucket ? &x : &y;
  const tpc_shape_t* buckets = bucket ? &y : &x;
  if (b < 1 || g.rank != 1 || !tpc__is_i64(g.element) || g.dims[0] % b != 0)
    return tpc__rule_error(op, "moe_bucket.groups",
                           "group_sizes must be tensor<Exi64> with E divisible by buckets=%lld; got %s",
                           (long long)b, TYPE(g.type, s.a));
  bool ok = rows->rank == 2 && buckets->rank == 2 && buckets->dims[0] == b * rows->dims[0] &&
            buckets->dims[1] == rows->dims[1] && mlirTypeEqual(x.element, y.element);
  if (!ok)
    return tpc__rule_error(op, "moe_bucket.shapes",
                           "expects rows [R,H] and buckets [%lld*R,H] of one element type; got x %s, y %s", (long long)b,
                           TYPE(x.type, s.a), TYPE(y.type, s.b));
  return OK;
}

static MlirLogicalResult tpc__verify_moe_unpermute(MlirOperation op) {
  tpc__bufs_t s;
  tpc_shape_t y = tpc__shape_of(tpc_moe_unpermute_get_y(op)), map = tpc__shape_of(tpc_moe_unpermute_get_row_map(op));
  tpc_shape_t w = tpc__shape_of(tpc_moe_unpermute_get_weights(op)), out = tpc__shape_of(tpc_moe_unpermute_get_out(op));
  if (!y.valid || !map.valid || !w.valid || !out.valid) return FAIL;
  bool ok = y.rank == 2 && tpc__is_storage_float(y.element) && w.rank == 2 && tpc__is_f32(w.element) &&
            y.dims[0] == w.dims[0] * w.dims[1] &&
            map.rank == 1 && map.dims[0] == y.dims[0] && tpc__is_i32(map.element) && out.rank == 2 &&
            out.dims[0] == w.dims[0] && out.dims[1] == y.dims[1] && mlirTypeEqual(out.element, y.element);
  if (!ok)
    return tpc__rule_error(op, "moe_unpermute.shapes",
                           "expects a float y[T*k,H], row_map[T*k] i32, weights[T,k] f32 and out[T,H] with y's type; "
                           "got y %s, row_map %s, weights %s, out %s",
                           TYPE(y.type, s.a), TYPE(map.type, s.b), TYPE(w.type, s.c), TYPE(out.type, s.d));
  return OK;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

MlirLogicalResult tpc__verify_compute(MlirOperation op, int kind) {
  switch (kind) {
    case TPC_OP_LINEAR:
      return tpc__verify_linear(op);
    case TPC_OP_GROUPED_LINEAR:
      return tpc__verify_grouped_linear(op);
    case TPC_OP_GLU:
      return tpc__verify_glu(op);
    case TPC_OP_FUSED_GROUPED_MLP:
      return tpc__verify_fused_grouped_mlp(op);
    case TPC_OP_RMSNORM:
      return tpc__verify_norm_params(op, tpc_rmsnorm_get_x(op), tpc_rmsnorm_get_gamma(op), (MlirValue){NULL},
                                     tpc_rmsnorm_get_eps(op));
    case TPC_OP_ADD_RMSNORM:  // residual and y share a type (the op's definition): the norm's rules
      return tpc__verify_norm_params(op, tpc_add_rmsnorm_get_residual(op), tpc_add_rmsnorm_get_gamma(op),
                                     (MlirValue){NULL}, tpc_add_rmsnorm_get_eps(op));
    case TPC_OP_LAYERNORM:
      return tpc__verify_norm_params(op, tpc_layernorm_get_x(op), tpc_layernorm_get_gamma(op),
                                     tpc_layernorm_get_beta(op), tpc_layernorm_get_eps(op));
    case TPC_OP_ADD:
      return tpc__verify_elementwise(op, tpc_add_get_lhs(op), tpc_add_get_rhs(op), tpc_add_get_result(op));
    case TPC_OP_MUL:
      return tpc__verify_elementwise(op, tpc_mul_get_lhs(op), tpc_mul_get_rhs(op), tpc_mul_get_result(op));
    case TPC_OP_MOE_ROUTE:
      return tpc__verify_moe_route(op);
    case TPC_OP_MOE_PERMUTE:
      return tpc__verify_moe_permute(op);
    case TPC_OP_MOE_UNPERMUTE:
      return tpc__verify_moe_unpermute(op);
    case TPC_OP_MOE_BUCKET:
      return tpc__verify_moe_bucket(op, true);
    case TPC_OP_MOE_UNBUCKET:
      return tpc__verify_moe_bucket(op, false);
    default:
      return OK;
  }
}
