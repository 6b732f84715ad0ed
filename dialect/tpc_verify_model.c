// Verifier rules of the whole-model ops: tp.embedding and tp.embedding_grad, tp.cross_entropy, its
// vocabulary-parallel pair (stats, combine), its form over given logits (tp.cross_entropy_logits)
// and its gradients, and the optimizer's tp.sumsq, tp.global_norm and tp.adamw. They mirror the runtime's checks (kernels/cpu/cpu_vocab.c,
// cpu_optim.c), so a module that verifies fails there only on token ids out of range, which only
// the data can show. Rules: vocab.ids (ids and targets), embedding.shapes, embedding_grad.shapes,
// cross_entropy.shapes (every cross-entropy op), vocab.mesh (the optional mesh and axes of a
// vocabulary shard or of a replicated gradient), optimizer.shapes.
#include <stdio.h>

#include "mlir-c/BuiltinAttributes.h"
#include "tp_ops.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()
#define TYPE(t, buf) tpc__type_str((t), (buf), (int)sizeof(buf))

typedef struct {
  char a[96], b[96], c[96], d[96];
} tpc__vbufs_t;

static bool tpc__is_vec(const tpc_shape_t* s, int64_t n) { return s->valid && s->rank == 1 && s->dims[0] == n; }
static bool tpc__is_mat(const tpc_shape_t* s, int64_t d0, int64_t d1) {
  return s->valid && s->rank == 2 && s->dims[0] == d0 && s->dims[1] == d1;
}

// ids / targets: tensor<Txi32>.
static MlirLogicalResult tpc__verify_ids(MlirOperation op, const char* name, const tpc_shape_t* ids) {
  char b[96];
  if (ids->rank != 1 || !tpc__is_i32(ids->element))
    return tpc__rule_error(op, "vocab.ids", "%s must be a rank-1 tensor of i32 token ids (tensor<Txi32>); got %s", name,
                           TYPE(ids->type, b));
  return OK;
}

// The optional mesh and axes of a vocabulary shard: both or neither, naming a declared mesh.
static MlirLogicalResult tpc__verify_shard_attrs(MlirOperation op, MlirAttribute mesh, MlirAttribute axes) {
  if (mlirAttributeIsNull(mesh) && mlirAttributeIsNull(axes)) return OK;
  if (mlirAttributeIsNull(mesh) || mlirAttributeIsNull(axes) || !mlirAttributeIsAFlatSymbolRef(mesh) ||
      !mlirAttributeIsAArray(axes))
    return tpc__rule_error(op, "vocab.mesh",
                           "a vocabulary shard names both `mesh` (a tp.mesh symbol) and `axes` (its group), or neither");
  int64_t group = 0;
  return tpc__verify_group(op, mesh, axes, &group);
}

static MlirLogicalResult tpc__verify_embedding(MlirOperation op, bool grad) {
  tpc__vbufs_t s;
  tpc_shape_t ids = tpc__shape_of(grad ? tpc_embedding_grad_get_ids(op) : tpc_embedding_get_ids(op));
  tpc_shape_t rows = tpc__shape_of(grad ? tpc_embedding_grad_get_dy(op) : tpc_embedding_get_y(op));
  tpc_shape_t table = tpc__shape_of(grad ? tpc_embedding_grad_get_dtable(op) : tpc_embedding_get_table(op));
  if (!ids.valid || !rows.valid || !table.valid) return FAIL;
  if (mlirLogicalResultIsFailure(tpc__verify_ids(op, "ids", &ids))) return FAIL;
  if (!grad) {
    if (table.rank != 2 || !tpc__is_storage_float(table.element) || !tpc__is_mat(&rows, ids.dims[0], table.dims[1]) ||
        !mlirTypeEqual(rows.element, table.element))
      return tpc__rule_error(op, "embedding.shapes",
                             "expects a float table[V,H] and y[T,H] of its type for ids[T]; got ids %s, table %s, y %s",
                             TYPE(ids.type, s.a), TYPE(table.type, s.b), TYPE(rows.type, s.c));
    return tpc__verify_shard_attrs(op, tpc_embedding_get_mesh_attr(op), tpc_embedding_get_axes_attr(op));
  }
  if (rows.rank != 2 || rows.dims[0] != ids.dims[0] || !tpc__is_storage_float(rows.element) || table.rank != 2 ||
      table.dims[1] != rows.dims[1] || !tpc__is_f32(table.element))
    return tpc__rule_error(op, "embedding_grad.shapes",
                           "expects a float dy[T,H] for ids[T] and an f32 dtable[V,H]; got ids %s, dy %s, dtable %s",
                           TYPE(ids.type, s.a), TYPE(rows.type, s.b), TYPE(table.type, s.c));
  if (mlirLogicalResultIsFailure(
          tpc__verify_acc(op, tpc_embedding_grad_get_partial(op), tpc_embedding_grad_get_acc(op))))
    return FAIL;
  return tpc__verify_shard_attrs(op, tpc_embedding_grad_get_mesh_attr(op), tpc_embedding_grad_get_axes_attr(op));
}

// x[T,H] float, w[V,H] of x's type, targets[T] i32: every cross-entropy op but the combine.
static MlirLogicalResult tpc__verify_head(MlirOperation op, const tpc_shape_t* x, const tpc_shape_t* w,
                                          const tpc_shape_t* targets) {
  tpc__vbufs_t s;
  if (mlirLogicalResultIsFailure(tpc__verify_ids(op, "targets", targets))) return FAIL;
  if (x->rank != 2 || !tpc__is_storage_float(x->element) || w->rank != 2 || w->dims[1] != x->dims[1] ||
      !mlirTypeEqual(w->element, x->element) || targets->dims[0] != x->dims[0])
    return tpc__rule_error(op, "cross_entropy.shapes",
                           "expects x[T,H] (float), w[V,H] of x's type and targets[T]; got x %s, w %s, targets %s",
                           TYPE(x->type, s.a), TYPE(w->type, s.b), TYPE(targets->type, s.c));
  return OK;
}

// loss and lse (or lse and dloss): f32 [T].
static MlirLogicalResult tpc__verify_f32_vecs(MlirOperation op, const char* what, const tpc_shape_t* a,
                                              const tpc_shape_t* b, int64_t t) {
  tpc__vbufs_t s;
  if (!tpc__is_vec(a, t) || !tpc__is_vec(b, t) || !tpc__is_f32(a->element) || !tpc__is_f32(b->element))
    return tpc__rule_error(op, "cross_entropy.shapes", "expects %s of type tensor<%lldxf32>; got %s and %s", what,
                           (long long)t, TYPE(a->type, s.a), TYPE(b->type, s.b));
  return OK;
}

static MlirLogicalResult tpc__verify_cross_entropy(MlirOperation op, int kind) {
  tpc__vbufs_t s;
  switch (kind) {
    case TPC_OP_CROSS_ENTROPY: {
      tpc_shape_t x = tpc__shape_of(tpc_cross_entropy_get_x(op)), w = tpc__shape_of(tpc_cross_entropy_get_w(op));
      tpc_shape_t t = tpc__shape_of(tpc_cross_entropy_get_targets(op));
      tpc_shape_t loss = tpc__shape_of(tpc_cross_entropy_get_loss(op)), lse = tpc__shape_of(tpc_cross_entropy_get_lse(op));
      if (!x.valid || !w.valid || !t.valid || !loss.valid || !lse.valid) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_head(op, &x, &w, &t))) return FAIL;
      return tpc__verify_f32_vecs(op, "loss and lse", &loss, &lse, x.dims[0]);
    }
    case TPC_OP_CROSS_ENTROPY_STATS: {
      tpc_shape_t x = tpc__shape_of(tpc_cross_entropy_stats_get_x(op)), w = tpc__shape_of(tpc_cross_entropy_stats_get_w(op));
      tpc_shape_t t = tpc__shape_of(tpc_cross_entropy_stats_get_targets(op));
      tpc_shape_t st = tpc__shape_of(tpc_cross_entropy_stats_get_stats(op));
      if (!x.valid || !w.valid || !t.valid || !st.valid) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_head(op, &x, &w, &t))) return FAIL;
      if (!tpc__is_mat(&st, x.dims[0], 3) || !tpc__is_f32(st.element))
        return tpc__rule_error(op, "cross_entropy.shapes", "expects stats of type tensor<%lldx3xf32>; got %s",
                               (long long)x.dims[0], TYPE(st.type, s.a));
      return tpc__verify_shard_attrs(op, tpc_cross_entropy_stats_get_mesh_attr(op),
                                     tpc_cross_entropy_stats_get_axes_attr(op));
    }
    case TPC_OP_CROSS_ENTROPY_LOGITS: {
      tpc_shape_t z = tpc__shape_of(tpc_cross_entropy_logits_get_z(op));
      tpc_shape_t t = tpc__shape_of(tpc_cross_entropy_logits_get_targets(op));
      tpc_shape_t loss = tpc__shape_of(tpc_cross_entropy_logits_get_loss(op));
      tpc_shape_t lse = tpc__shape_of(tpc_cross_entropy_logits_get_lse(op));
      if (!z.valid || !t.valid || !loss.valid || !lse.valid) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_ids(op, "targets", &t))) return FAIL;
      if (z.rank != 2 || !tpc__is_storage_float(z.element) || z.dims[0] != t.dims[0])
        return tpc__rule_error(op, "cross_entropy.shapes", "expects logits z[T,V] (float) and targets[T]; got z %s, targets %s",
                               TYPE(z.type, s.a), TYPE(t.type, s.b));
      return tpc__verify_f32_vecs(op, "loss and lse", &loss, &lse, z.dims[0]);
    }
    case TPC_OP_CROSS_ENTROPY_COMBINE: {
      tpc_shape_t st = tpc__shape_of(tpc_cross_entropy_combine_get_stats(op));
      tpc_shape_t t = tpc__shape_of(tpc_cross_entropy_combine_get_targets(op));
      tpc_shape_t loss = tpc__shape_of(tpc_cross_entropy_combine_get_loss(op));
      tpc_shape_t lse = tpc__shape_of(tpc_cross_entropy_combine_get_lse(op));
      if (!st.valid || !t.valid || !loss.valid || !lse.valid) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_ids(op, "targets", &t))) return FAIL;
      if (st.rank != 2 || st.dims[1] < 3 || st.dims[1] % 3 != 0 || !tpc__is_f32(st.element) || st.dims[0] != t.dims[0])
        return tpc__rule_error(op, "cross_entropy.shapes",
                               "expects stats[T,3R] (f32: 3 values from each of R shards) and targets[T]; got stats %s, "
                               "targets %s",
                               TYPE(st.type, s.a), TYPE(t.type, s.b));
      return tpc__verify_f32_vecs(op, "loss and lse", &loss, &lse, st.dims[0]);
    }
    case TPC_OP_CROSS_ENTROPY_WITH_GRAD: {
      tpc_shape_t x = tpc__shape_of(tpc_cross_entropy_with_grad_get_x(op));
      tpc_shape_t w = tpc__shape_of(tpc_cross_entropy_with_grad_get_w(op));
      tpc_shape_t t = tpc__shape_of(tpc_cross_entropy_with_grad_get_targets(op));
      tpc_shape_t dloss = tpc__shape_of(tpc_cross_entropy_with_grad_get_dloss(op));
      tpc_shape_t loss = tpc__shape_of(tpc_cross_entropy_with_grad_get_loss(op));
      tpc_shape_t lse = tpc__shape_of(tpc_cross_entropy_with_grad_get_lse(op));
      tpc_shape_t dx = tpc__shape_of(tpc_cross_entropy_with_grad_get_dx(op));
      tpc_shape_t dw = tpc__shape_of(tpc_cross_entropy_with_grad_get_dw(op));
      if (!x.valid || !w.valid || !t.valid || !dloss.valid || !loss.valid || !lse.valid || !dx.valid || !dw.valid)
        return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_head(op, &x, &w, &t))) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_f32_vecs(op, "loss and lse", &loss, &lse, x.dims[0]))) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_f32_vecs(op, "dloss and lse", &dloss, &lse, x.dims[0]))) return FAIL;
      if (!tpc__is_mat(&dx, x.dims[0], x.dims[1]) || !(tpc__is_f32(dx.element) || mlirTypeEqual(dx.element, x.element)))
        return tpc__rule_error(op, "cross_entropy.shapes", "expects dx of x's shape, f32 or x's type; got x %s, dx %s",
                               TYPE(x.type, s.a), TYPE(dx.type, s.b));
      if (!tpc__is_mat(&dw, w.dims[0], w.dims[1]) || !tpc__is_f32(dw.element))
        return tpc__rule_error(op, "cross_entropy.shapes", "expects dw of w's shape in f32; got w %s, dw %s",
                               TYPE(w.type, s.a), TYPE(dw.type, s.b));
      return OK;
    }
    case TPC_OP_CROSS_ENTROPY_DGRAD:
    case TPC_OP_CROSS_ENTROPY_WGRAD:
    case TPC_OP_CROSS_ENTROPY_GRAD: {
      int k = kind;
      tpc_shape_t x = tpc__shape_of(tpc_op_get_operand(op, k, 0)), w = tpc__shape_of(tpc_op_get_operand(op, k, 1));
      tpc_shape_t t = tpc__shape_of(tpc_op_get_operand(op, k, 2)), lse = tpc__shape_of(tpc_op_get_operand(op, k, 3));
      tpc_shape_t dloss = tpc__shape_of(tpc_op_get_operand(op, k, 4));
      if (!x.valid || !w.valid || !t.valid || !lse.valid || !dloss.valid) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_head(op, &x, &w, &t))) return FAIL;
      if (mlirLogicalResultIsFailure(tpc__verify_f32_vecs(op, "lse and dloss", &lse, &dloss, x.dims[0]))) return FAIL;
      bool partial = tpc_op_get_bool(op, k, k == TPC_OP_CROSS_ENTROPY_WGRAD  ? TPC_CROSS_ENTROPY_WGRAD_ATTR_PARTIAL
                                            : k == TPC_OP_CROSS_ENTROPY_DGRAD ? TPC_CROSS_ENTROPY_DGRAD_ATTR_PARTIAL
                                                                              : TPC_CROSS_ENTROPY_GRAD_ATTR_PARTIAL);
      // The results: dx (the dgrad's and the fused op's first), dw (the wgrad's, the fused op's second).
      for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
        bool wgrad = k == TPC_OP_CROSS_ENTROPY_WGRAD || r == 1;
        tpc_shape_t out = tpc__shape_of(mlirOperationGetResult(op, r));
        if (!out.valid) return FAIL;
        const tpc_shape_t* like = wgrad ? &w : &x;
        bool type_ok = tpc__is_f32(out.element) || (!wgrad && !partial && mlirTypeEqual(out.element, x.element));
        if (!tpc__is_mat(&out, like->dims[0], like->dims[1]) || !type_ok)
          return tpc__rule_error(op, "cross_entropy.shapes",
                                 wgrad ? "expects dw of w's shape in f32; got w %s, dw %s"
                                       : "expects dx of x's shape, f32 or (unless partial) x's type; got x %s, dx %s",
                                 TYPE(like->type, s.a), TYPE(out.type, s.b));
      }
      int mesh = k == TPC_OP_CROSS_ENTROPY_WGRAD   ? TPC_CROSS_ENTROPY_WGRAD_ATTR_MESH
                 : k == TPC_OP_CROSS_ENTROPY_DGRAD ? TPC_CROSS_ENTROPY_DGRAD_ATTR_MESH
                                                   : TPC_CROSS_ENTROPY_GRAD_ATTR_MESH;
      int axes = k == TPC_OP_CROSS_ENTROPY_WGRAD   ? TPC_CROSS_ENTROPY_WGRAD_ATTR_AXES
                 : k == TPC_OP_CROSS_ENTROPY_DGRAD ? TPC_CROSS_ENTROPY_DGRAD_ATTR_AXES
                                                   : TPC_CROSS_ENTROPY_GRAD_ATTR_AXES;
      return tpc__verify_shard_attrs(op, tpc_op_get_attr(op, k, mesh), tpc_op_get_attr(op, k, axes));
    }
    default:
      return OK;
  }
}

// The accumulator of the exact sum of squares: 21 i64 words (kernels/cpu/tprt_numerics.h).
#define TPC_SUMSQ_WORDS 21

static MlirLogicalResult tpc__verify_optimizer(MlirOperation op, int kind) {
  tpc__vbufs_t s;
  if (kind == TPC_OP_SUMSQ) {
    tpc_shape_t g = tpc__shape_of(tpc_sumsq_get_g(op)), out = tpc__shape_of(tpc_sumsq_get_acc_out(op));
    if (!g.valid || !out.valid) return FAIL;
    if (!tpc__is_storage_float(g.element) || !tpc__is_vec(&out, TPC_SUMSQ_WORDS) || !tpc__is_i64(out.element))
      return tpc__rule_error(op, "optimizer.shapes",
                             "expects a float gradient and an accumulator of type tensor<%dxi64>; got g %s, acc %s",
                             TPC_SUMSQ_WORDS, TYPE(g.type, s.a), TYPE(out.type, s.b));
    return tpc__verify_shard_attrs(op, tpc_sumsq_get_mesh_attr(op), tpc_sumsq_get_axes_attr(op));
  }
  if (kind == TPC_OP_GLOBAL_NORM) {
    tpc_shape_t acc = tpc__shape_of(tpc_global_norm_get_acc(op)), n = tpc__shape_of(tpc_global_norm_get_norm(op));
    if (!acc.valid || !n.valid) return FAIL;
    if (acc.rank != 1 || acc.dims[0] < TPC_SUMSQ_WORDS || acc.dims[0] % TPC_SUMSQ_WORDS != 0 || !tpc__is_i64(acc.element) ||
        !tpc__is_vec(&n, 1) || !tpc__is_f32(n.element))
      return tpc__rule_error(op, "optimizer.shapes",
                             "expects acc[R*%d] (i64: R accumulators) and norm of type tensor<1xf32>; got acc %s, norm %s",
                             TPC_SUMSQ_WORDS, TYPE(acc.type, s.a), TYPE(n.type, s.b));
    return OK;
  }
  if (kind != TPC_OP_ADAMW) return OK;
  tpc_shape_t p = tpc__shape_of(tpc_adamw_get_master(op)), w = tpc__shape_of(tpc_adamw_get_weight(op));
  tpc_shape_t h = tpc__shape_of(tpc_adamw_get_hyper(op)), n = tpc__shape_of(tpc_adamw_get_norm(op));
  tpc_shape_t g = tpc__shape_of(tpc_adamw_get_grad(op));
  if (!p.valid || !w.valid || !h.valid || !n.valid || !g.valid) return FAIL;
  bool ok = tpc__is_f32(p.element) && tpc__is_f32(g.element) && tpc__is_storage_float(w.element) && w.rank == p.rank &&
            g.rank == p.rank;
  for (int i = 0; ok && i < p.rank; ++i) ok = w.dims[i] == p.dims[i];
  // The gradient has the states' shape, or (a ZeRO-1 share, with axes) a multiple of their dim 0.
  bool shared = !mlirAttributeIsNull(tpc_adamw_get_axes_attr(op));
  for (int i = 0; ok && i < p.rank; ++i)
    ok = g.dims[i] == p.dims[i] || (shared && p.dims[i] > 0 && g.dims[i] % p.dims[i] == 0);
  if (!ok || !tpc__is_vec(&h, 8) || !tpc__is_f32(h.element) || !tpc__is_vec(&n, 1) || !tpc__is_f32(n.element))
    return tpc__rule_error(op, "optimizer.shapes",
                           "expects f32 master, grad, m, v of one shape (grad: a multiple along one dim for a ZeRO-1 share), "
                           "hyper tensor<8xf32>, norm tensor<1xf32> and a float weight of master's shape; got master %s, "
                           "hyper %s, norm %s, weight %s",
                           TYPE(p.type, s.a), TYPE(h.type, s.b), TYPE(n.type, s.c), TYPE(w.type, s.d));
  return tpc__verify_shard_attrs(op, tpc_adamw_get_mesh_attr(op), tpc_adamw_get_axes_attr(op));
}

MlirLogicalResult tpc__verify_model(MlirOperation op, int kind) {
  switch (kind) {
    case TPC_OP_SUMSQ:
    case TPC_OP_GLOBAL_NORM:
    case TPC_OP_ADAMW:
      return tpc__verify_optimizer(op, kind);
    case TPC_OP_EMBEDDING:
      return tpc__verify_embedding(op, false);
    case TPC_OP_EMBEDDING_GRAD:
      return tpc__verify_embedding(op, true);
    default:
      return tpc__verify_cross_entropy(op, kind);
  }
}
