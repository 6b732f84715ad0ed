// Verifier rules of the backward ops (linear_dgrad, linear_wgrad, bias_grad, the grouped
// gradients, glu_grad, the norm gradients and the MoE gradients): every shape follows from the
// forward op's, float storage types, and an f32 result where the op is a `partial` sum.
#include <stdio.h>

#include "tp_ops.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()
#define TYPE(t, buf) tpc__type_str((t), (buf), (int)sizeof(buf))

typedef struct {
  char a[96], b[96], c[96], d[96];
} tpc__gbufs_t;

static bool tpc__is_2d(const tpc_shape_t* s, int64_t d0, int64_t d1) {
  return s->valid && s->rank == 2 && s->dims[0] == d0 && s->dims[1] == d1;
}

// A gradient result is f32 (partial sums, or gradients kept in f32 like Megatron's main_grad) or
// the storage type of the incoming gradient; a `partial` one must be f32.
static bool tpc__grad_type_ok(MlirType result, MlirType storage, bool partial) {
  return tpc__is_f32(result) || (!partial && mlirTypeEqual(result, storage));
}

// `segments` and `blocks` of a dgrad (docs/numerics.md, "Segmented contractions"): both >= 1,
// and with segments > 1 the contracted N must split into blocks x segments equal parts.
static MlirLogicalResult tpc__verify_segments(MlirOperation op, int64_t segments, int64_t blocks, int64_t n) {
  if (segments < 1 || blocks < 1 || (segments > 1 && !tpc__splits(n, segments, blocks)))
    return tpc__rule_error(op, "dgrad.segments",
                           "segments (%lld) and blocks (%lld) must be >= 1, and with segments > 1 the contracted N "
                           "(%lld) must be divisible by segments x blocks",
                           (long long)segments, (long long)blocks, (long long)n);
  return OK;
}

static MlirLogicalResult tpc__verify_linear_grad(MlirOperation op, bool wgrad) {
  tpc__gbufs_t s;
  tpc_shape_t dy = tpc__shape_of(wgrad ? tpc_linear_wgrad_get_dy(op) : tpc_linear_dgrad_get_dy(op));
  tpc_shape_t other = tpc__shape_of(wgrad ? tpc_linear_wgrad_get_x(op) : tpc_linear_dgrad_get_w(op));
  tpc_shape_t out = tpc__shape_of(wgrad ? tpc_linear_wgrad_get_dw(op) : tpc_linear_dgrad_get_dx(op));
  bool partial = wgrad ? tpc_linear_wgrad_get_partial(op) : tpc_linear_dgrad_get_partial(op);
  if (!dy.valid || !other.valid || !out.valid) return FAIL;
  bool ok = dy.rank == 2 && other.rank == 2 && tpc__is_storage_float(dy.element) &&
            mlirTypeEqual(dy.element, other.element) && tpc__grad_type_ok(out.element, dy.element, partial);
  // dgrad: dy[M,N] · w[N,K] -> [M,K]; wgrad: dy[M,N]ᵀ · x[M,K] -> [N,K].
  ok = ok && (wgrad ? dy.dims[0] == other.dims[0] && tpc__is_2d(&out, dy.dims[1], other.dims[1])
                    : dy.dims[1] == other.dims[0] && tpc__is_2d(&out, dy.dims[0], other.dims[1]));
  if (!ok)
    return tpc__rule_error(op, wgrad ? "linear_wgrad.shapes" : "linear_dgrad.shapes",
                           wgrad ? "expects dy[M,N] and x[M,K] of one float type and dw[N,K] (f32, or dy's type unless "
                                   "partial); got dy %s, x %s, dw %s"
                                 : "expects dy[M,N] and w[N,K] of one float type and dx[M,K] (f32, or dy's type unless "
                                   "partial); got dy %s, w %s, dx %s",
                           TYPE(dy.type, s.a), TYPE(other.type, s.b), TYPE(out.type, s.c));
  if (wgrad) return OK;
  if (mlirLogicalResultIsFailure(tpc__verify_acc(op, partial, tpc_linear_dgrad_get_acc(op)))) return FAIL;
  return tpc__verify_segments(op, tpc_linear_dgrad_get_segments(op), tpc_linear_dgrad_get_blocks(op), dy.dims[1]);
}

static MlirLogicalResult tpc__verify_bias_grad(MlirOperation op) {
  tpc__gbufs_t s;
  tpc_shape_t dy = tpc__shape_of(tpc_bias_grad_get_dy(op)), db = tpc__shape_of(tpc_bias_grad_get_db(op));
  if (!dy.valid || !db.valid) return FAIL;
  if (dy.rank != 2 || !tpc__is_storage_float(dy.element) || db.rank != 1 || db.dims[0] != dy.dims[1] ||
      !tpc__grad_type_ok(db.element, dy.element, tpc_bias_grad_get_partial(op)))
    return tpc__rule_error(op, "bias_grad.shapes", "expects a float dy[M,N] and db[N] (f32, or dy's type unless partial); "
                           "got dy %s, db %s", TYPE(dy.type, s.a), TYPE(db.type, s.b));
  return OK;
}

static MlirLogicalResult tpc__verify_grouped_grad(MlirOperation op, bool wgrad) {
  tpc__gbufs_t s;
  tpc_shape_t dy = tpc__shape_of(wgrad ? tpc_grouped_linear_wgrad_get_dy(op) : tpc_grouped_linear_dgrad_get_dy(op));
  tpc_shape_t other = tpc__shape_of(wgrad ? tpc_grouped_linear_wgrad_get_x(op) : tpc_grouped_linear_dgrad_get_w(op));
  tpc_shape_t g = tpc__shape_of(wgrad ? tpc_grouped_linear_wgrad_get_group_sizes(op)
                                      : tpc_grouped_linear_dgrad_get_group_sizes(op));
  tpc_shape_t out = tpc__shape_of(wgrad ? tpc_grouped_linear_wgrad_get_dw(op) : tpc_grouped_linear_dgrad_get_dx(op));
  bool partial = wgrad ? tpc_grouped_linear_wgrad_get_partial(op) : tpc_grouped_linear_dgrad_get_partial(op);
  if (!dy.valid || !other.valid || !g.valid || !out.valid) return FAIL;
  // dgrad: dy[T,N], w[E,N,K] -> dx[T,K]; wgrad: dy[T,N], x[T,K] -> dw[E,N,K].
  const tpc_shape_t* w = wgrad ? &out : &other;
  bool ok = dy.rank == 2 && w->rank == 3 && tpc__is_storage_float(dy.element) && mlirTypeEqual(dy.element, other.element) &&
            tpc__grad_type_ok(out.element, dy.element, partial) && w->dims[1] == dy.dims[1];
  ok = ok && (wgrad ? other.rank == 2 && other.dims[0] == dy.dims[0] && w->dims[2] == other.dims[1]
                    : tpc__is_2d(&out, dy.dims[0], w->dims[2]));
  ok = ok && g.rank == 1 && tpc__is_i64(g.element) && w->dims[0] > 0 && g.dims[0] % w->dims[0] == 0 &&
       g.dims[0] > 0 && dy.dims[0] % (g.dims[0] / w->dims[0]) == 0;
  if (!ok)
    return tpc__rule_error(op, "grouped_linear_grad.shapes",
                           "expects dy[T,N], %s, group_sizes[S*E] i64 (T divisible by S) and %s; got dy %s, %s %s, "
                           "group_sizes %s, %s %s",
                           wgrad ? "x[T,K]" : "w[E,N,K]", wgrad ? "dw[E,N,K]" : "dx[T,K]", TYPE(dy.type, s.a),
                           wgrad ? "x" : "w", TYPE(other.type, s.b), TYPE(g.type, s.c), wgrad ? "dw" : "dx",
                           TYPE(out.type, s.d));
  if (!wgrad)
    return tpc__verify_segments(op, tpc_grouped_linear_dgrad_get_segments(op), tpc_grouped_linear_dgrad_get_blocks(op),
                                dy.dims[1]);
  return OK;
}

static MlirLogicalResult tpc__verify_glu_grad(MlirOperation op) {
  tpc__gbufs_t s;
  tpc_shape_t x = tpc__shape_of(tpc_glu_grad_get_x(op)), dy = tpc__shape_of(tpc_glu_grad_get_dy(op));
  if (!x.valid || !dy.valid) return FAIL;
  bool ok = x.rank >= 1 && tpc__is_storage_float(x.element) && dy.rank == x.rank &&
            mlirTypeEqual(dy.element, x.element) && x.dims[x.rank - 1] % 2 == 0 &&
            dy.dims[dy.rank - 1] == x.dims[x.rank - 1] / 2;
  for (int i = 0; ok && i + 1 < x.rank; ++i) ok = dy.dims[i] == x.dims[i];
  if (!ok)
    return tpc__rule_error(op, "glu_grad.shapes", "expects x[...,2F] and dy[...,F] of one float type; got x %s, dy %s",
                           TYPE(x.type, s.a), TYPE(dy.type, s.b));
  return tpc__verify_glu_params(op, TPC_GLU_GRAD_ATTR_KIND, TPC_GLU_GRAD_ATTR_INTERLEAVE, TPC_GLU_GRAD_ATTR_ALPHA,
                                TPC_GLU_GRAD_ATTR_LIMIT, TPC_OP_GLU_GRAD, x.dims[x.rank - 1] / 2);
}

static MlirLogicalResult tpc__verify_norm_grad(MlirOperation op, bool layernorm) {
  tpc__gbufs_t s;
  MlirValue xv = layernorm ? tpc_layernorm_grad_get_x(op) : tpc_rmsnorm_grad_get_x(op);
  MlirValue gv = layernorm ? tpc_layernorm_grad_get_gamma(op) : tpc_rmsnorm_grad_get_gamma(op);
  double eps = layernorm ? tpc_layernorm_grad_get_eps(op) : tpc_rmsnorm_grad_get_eps(op);
  if (mlirLogicalResultIsFailure(tpc__verify_norm_params(op, xv, gv, (MlirValue){NULL}, eps))) return FAIL;
  tpc_shape_t g = tpc__shape_of(gv);
  bool partial = layernorm ? tpc_layernorm_grad_get_partial(op) : tpc_rmsnorm_grad_get_partial(op);
  MlirValue params[2] = {layernorm ? tpc_layernorm_grad_get_dgamma(op) : tpc_rmsnorm_grad_get_dgamma(op),
                         layernorm ? tpc_layernorm_grad_get_dbeta(op) : (MlirValue){NULL}};
  for (int i = 0; i < 2; ++i) {
    if (mlirValueIsNull(params[i])) continue;
    tpc_shape_t p = tpc__shape_of(params[i]);
    if (!p.valid || p.rank != 1 || p.dims[0] != g.dims[0] || !tpc__grad_type_ok(p.element, g.element, partial))
      return tpc__rule_error(op, "norm_grad.shapes", "%s must be [H]=[%lld] in f32 (or gamma's type unless partial); "
                             "got %s", i ? "dbeta" : "dgamma", (long long)g.dims[0], TYPE(p.type, s.a));
  }
  return OK;
}

static MlirLogicalResult tpc__verify_moe_grad(MlirOperation op, int kind) {
  tpc__gbufs_t s;
  if (kind == TPC_OP_MOE_UNPERMUTE_GRAD) {
    tpc_shape_t d = tpc__shape_of(tpc_moe_unpermute_grad_get_dout(op)), y = tpc__shape_of(tpc_moe_unpermute_grad_get_y(op));
    tpc_shape_t m = tpc__shape_of(tpc_moe_unpermute_grad_get_row_map(op));
    tpc_shape_t w = tpc__shape_of(tpc_moe_unpermute_grad_get_weights(op));
    if (!d.valid || !y.valid || !m.valid || !w.valid) return FAIL;
    bool ok = d.rank == 2 && y.rank == 2 && w.rank == 2 && m.rank == 1 && tpc__is_storage_float(d.element) &&
              mlirTypeEqual(d.element, y.element) && tpc__is_f32(w.element) && tpc__is_i32(m.element) &&
              w.dims[0] == d.dims[0] && y.dims[0] == w.dims[0] * w.dims[1] && y.dims[1] == d.dims[1] &&
              m.dims[0] == y.dims[0];
    if (!ok)
      return tpc__rule_error(op, "moe_unpermute_grad.shapes",
                             "expects dout[T,H] and y[T*k,H] of one float type, row_map[T*k] i32 and weights[T,k] f32; "
                             "got dout %s, y %s, row_map %s, weights %s",
                             TYPE(d.type, s.a), TYPE(y.type, s.b), TYPE(m.type, s.c), TYPE(w.type, s.d));
    return OK;
  }
  if (kind == TPC_OP_MOE_PERMUTE_GRAD) {
    tpc_shape_t dy = tpc__shape_of(tpc_moe_permute_grad_get_dy(op)), m = tpc__shape_of(tpc_moe_permute_grad_get_row_map(op));
    tpc_shape_t dx = tpc__shape_of(tpc_moe_permute_grad_get_dx(op));
    int64_t k = tpc_moe_permute_grad_get_top_k(op);
    if (!dy.valid || !m.valid || !dx.valid) return FAIL;
    bool ok = k >= 1 && dy.rank == 2 && dx.rank == 2 && m.rank == 1 && tpc__is_i32(m.element) &&
              tpc__is_storage_float(dy.element) && mlirTypeEqual(dx.element, dy.element) &&
              dy.dims[0] == dx.dims[0] * k && dx.dims[1] == dy.dims[1] && m.dims[0] == dy.dims[0];
    if (!ok)
      return tpc__rule_error(op, "moe_permute_grad.shapes",
                             "expects dy[T*k,H], row_map[T*k] i32 and dx[T,H] of dy's float type with top_k=%lld; "
                             "got dy %s, row_map %s, dx %s",
                             (long long)k, TYPE(dy.type, s.a), TYPE(m.type, s.b), TYPE(dx.type, s.c));
    return OK;
  }
  tpc_shape_t l = tpc__shape_of(tpc_moe_route_grad_get_logits(op)), i = tpc__shape_of(tpc_moe_route_grad_get_indices(op));
  tpc_shape_t dw = tpc__shape_of(tpc_moe_route_grad_get_dweights(op));
  int64_t k = tpc_moe_route_grad_get_top_k(op);
  if (!l.valid || !i.valid || !dw.valid) return FAIL;
  bool ok = l.rank == 2 && tpc__is_storage_float(l.element) && k >= 1 && k <= l.dims[1] &&
            tpc__is_2d(&i, l.dims[0], k) && tpc__is_i32(i.element) && tpc__is_2d(&dw, l.dims[0], k) &&
            tpc__is_f32(dw.element);
  if (!ok)
    return tpc__rule_error(op, "moe_route_grad.shapes",
                           "expects float logits[T,E], indices[T,k] i32 and dweights[T,k] f32 with 1 <= top_k=%lld <= E; "
                           "got logits %s, indices %s, dweights %s",
                           (long long)k, TYPE(l.type, s.a), TYPE(i.type, s.b), TYPE(dw.type, s.c));
  return OK;
}

MlirLogicalResult tpc__verify_grad(MlirOperation op, int kind) {
  switch (kind) {
    case TPC_OP_LINEAR_DGRAD:
      return tpc__verify_linear_grad(op, false);
    case TPC_OP_LINEAR_WGRAD:
      return tpc__verify_linear_grad(op, true);
    case TPC_OP_BIAS_GRAD:
      return tpc__verify_bias_grad(op);
    case TPC_OP_GROUPED_LINEAR_DGRAD:
      return tpc__verify_grouped_grad(op, false);
    case TPC_OP_GROUPED_LINEAR_WGRAD:
      return tpc__verify_grouped_grad(op, true);
    case TPC_OP_GLU_GRAD:
      return tpc__verify_glu_grad(op);
    case TPC_OP_RMSNORM_GRAD:
      return tpc__verify_norm_grad(op, false);
    case TPC_OP_LAYERNORM_GRAD:
      return tpc__verify_norm_grad(op, true);
    case TPC_OP_MOE_UNPERMUTE_GRAD:
    case TPC_OP_MOE_PERMUTE_GRAD:
    case TPC_OP_MOE_ROUTE_GRAD:
      return tpc__verify_moe_grad(op, kind);
    default:
      return OK;
  }
}
