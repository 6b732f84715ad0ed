// tp-autodiff's gradient rules (see autodiff.c): one case per op, emitting its backward ops from
// the adjoints of its results, plus the duals of tp-shard's collectives for per-rank programs.
#include <stdio.h>
#include <string.h>

#include "autodiff_impl.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "tpc_dialect.h"

tpc__adval_t* tpc__ad_find(tpc__ad_t* A, MlirValue v) {
  for (int i = 0; i < A->num_vals; ++i)
    if (mlirValueEqual(A->vals[i].value, v)) return &A->vals[i];
  return NULL;
}

tpc__adval_t* tpc__ad_add(tpc__ad_t* A, MlirValue v, const char* name) {
  if (A->num_vals == A->cap_vals) return NULL;
  tpc__adval_t* a = &A->vals[A->num_vals++];
  a->value = v;
  snprintf(a->name, sizeof a->name, "%s", name);
  a->adjoint[0] = '\0';
  a->stats[0] = '\0';
  a->tokens = 0;
  return a;
}

static void tpc__ad_type(tpc__ad_t* A, MlirType t) { mlirTypePrint(t, tpc_text_append_ref, &A->body); }

MlirType tpc__ad_lse_type(tpc__ad_t* A, MlirOperation op) {
  MlirType q = mlirValueGetType(tpc_attention_get_q(op));
  int64_t head_dim = tpc_attention_get_head_dim(op);
  int64_t dims[2] = {mlirShapedTypeGetDimSize(q, 0), head_dim > 0 ? mlirShapedTypeGetDimSize(q, 1) / head_dim : 0};
  return mlirRankedTensorTypeGet(2, dims, mlirF32TypeGet(A->ctx), mlirAttributeGetNull());
}

// The type of |v| with element type f32 (weight gradients).
MlirType tpc__f32_like(tpc__ad_t* A, MlirValue v) {
  MlirType t = mlirValueGetType(v);
  intptr_t rank = mlirShapedTypeGetRank(t);
  int64_t dims[8];
  for (intptr_t i = 0; i < rank && i < 8; ++i) dims[i] = mlirShapedTypeGetDimSize(t, i);
  return mlirRankedTensorTypeGet(rank, dims, mlirF32TypeGet(A->ctx), mlirAttributeGetNull());
}

// Appends "name = value" entries of |op|'s attributes whose names are in |keep| (NULL: all).
static int tpc__ad_attrs(tpc__ad_t* A, MlirOperation op, const char* const* keep, int first) {
  int printed = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(op); ++i) {
    MlirNamedAttribute na = mlirOperationGetAttribute(op, i);
    MlirStringRef n = mlirIdentifierStr(na.name);
    bool wanted = keep == NULL;
    for (int k = 0; keep && keep[k]; ++k) wanted |= mlirStringRefEqual(n, mlirStringRefCreateFromCString(keep[k]));
    if (!wanted) continue;
    tpc_text_printf(&A->body, "%s", first + printed ? ", " : "");
    tpc_text_attr_name(&A->body, n);
    tpc_text_printf(&A->body, " = ");
    mlirAttributePrint(na.attribute, tpc_text_append_ref, &A->body);
    ++printed;
  }
  return printed;
}

// Emits `%gN(:n) = "op"(operands) {attrs of |src| in |keep|, extra} : (types) -> (result types)`
// and returns the base name.
const char* tpc__ad_emit(tpc__ad_t* A, const char* op_name, const char* const* operands,
                                const MlirType* operand_types, int nin, const MlirType* result_types, int nout,
                                MlirOperation src, const char* const* keep, const char* extra, char* out_base,
                                size_t size) {
  snprintf(out_base, size, "%%g%d", A->counter++);
  tpc_text_printf(&A->body, "    %s%s%.0d = \"%s\"(", out_base, nout > 1 ? ":" : "", nout > 1 ? nout : 0, op_name);
  for (int i = 0; i < nin; ++i) tpc_text_printf(&A->body, "%s%s", i ? ", " : "", operands[i]);
  tpc_text_printf(&A->body, ") {");
  int n = mlirOperationIsNull(src) ? 0 : tpc__ad_attrs(A, src, keep, 0);
  if (extra && *extra) tpc_text_printf(&A->body, "%s%s", n ? ", " : "", extra);
  tpc_text_printf(&A->body, "} : (");
  for (int i = 0; i < nin; ++i) {
    if (i) tpc_text_printf(&A->body, ", ");
    tpc__ad_type(A, operand_types[i]);
  }
  tpc_text_printf(&A->body, ") -> (");
  for (int i = 0; i < nout; ++i) {
    if (i) tpc_text_printf(&A->body, ", ");
    tpc__ad_type(A, result_types[i]);
  }
  // Gradients carry their forward op's location, so diagnostics point into the user's file.
  tpc_text_printf(&A->body, ") ");
  if (!mlirOperationIsNull(A->loc_op)) mlirLocationPrint(mlirOperationGetLocation(A->loc_op), tpc_text_append_ref, &A->body);
  tpc_text_printf(&A->body, "\n");
  return out_base;
}

// Adds the gradient |g| (of type |t|) to |v|'s adjoint.
void tpc__ad_accumulate(tpc__ad_t* A, MlirValue v, const char* g, MlirType t) {
  tpc__adval_t* a = tpc__ad_find(A, v);
  if (!a) return;
  if (!a->adjoint[0]) {
    snprintf(a->adjoint, sizeof a->adjoint, "%s", g);
    a->adjoint_type = t;
    return;
  }
  const char* ops[2] = {a->adjoint, g};
  MlirType types[2] = {t, t};
  char base[40];
  tpc__ad_emit(A, TPC_OP_NAME_ADD, ops, types, 2, &t, 1, (MlirOperation){NULL}, NULL, NULL, base, sizeof base);
  snprintf(a->adjoint, sizeof a->adjoint, "%s", base);
}

uint32_t tpc__ad_tokens(tpc__ad_t* A, MlirValue v) {
  tpc__adval_t* a = tpc__ad_find(A, v);
  return a ? a->tokens : 0u;
}

const char* tpc__ad_name(tpc__ad_t* A, MlirValue v) {
  tpc__adval_t* a = tpc__ad_find(A, v);
  return a ? a->name : "%undefined";
}

//===----------------------------------------------------------------------===//
// Per-rank programs
//===----------------------------------------------------------------------===//

static int64_t tpc__ad_group(const tpc__ad_t* A, uint32_t mask) {
  int64_t g = 1;
  for (int i = 0; i < A->num_axes; ++i)
    if (mask & (1u << i)) g *= A->sizes[i];
  return g;
}

static uint32_t tpc__ad_tp(const tpc__ad_t* A) { return A->tp >= 0 ? 1u << A->tp : 0u; }

// The mesh-axis mask of a collective's `axes` attribute.
uint32_t tpc__ad_axes_mask(const tpc__ad_t* A, MlirOperation op) {
  MlirAttribute axes = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("axes"));
  uint32_t m = 0;
  for (intptr_t i = 0; !mlirAttributeIsNull(axes) && mlirAttributeIsAArray(axes) && i < mlirArrayAttrGetNumElements(axes); ++i) {
    MlirStringRef n = mlirStringAttrGetValue(mlirArrayAttrGetElement(axes, i));
    for (int k = 0; k < A->num_axes; ++k)
      if (mlirStringRefEqual(n, mlirStringRefCreateFromCString(A->axes[k]))) m |= 1u << k;
  }
  return m;
}

// Emits a collective over |mask| of |in| (type |in_t|) into type |out_t|; returns its name.
static const char* tpc__ad_collective(tpc__ad_t* A, const char* op_name, uint32_t mask, const char* dim_attr,
                                      const char* in, MlirType in_t, MlirType out_t, char* out_base, size_t size) {
  tpc_text_t extra = {0};
  tpc_text_printf(&extra, "mesh = ");
  tpc_text_symbol_ref(&extra, "", A->mesh_name);
  tpc_text_printf(&extra, ", axes = [");
  bool first = true;
  for (int k = 0; k < A->num_axes; ++k)
    if (mask & (1u << k)) {
      tpc_text_printf(&extra, "%s\"%s\"", first ? "" : ", ", A->axes[k]);
      first = false;
    }
  tpc_text_printf(&extra, "]%s", dim_attr);
  const char* ops[1] = {in};
  const char* r = tpc__ad_emit(A, op_name, ops, &in_t, 1, &out_t, 1, (MlirOperation){NULL}, NULL,
                               extra.data ? extra.data : "", out_base, size);
  tpc_text_free(&extra);
  return r;
}

// Emits a gradient whose result |reduced| is summed over the token axes |tokens| when they hold
// several ranks: the op as a partial, then an all-reduce (data parallelism's gradient sync).
static const char* tpc__ad_emit_token_reduced(tpc__ad_t* A, const char* op_name, const char* const* operands,
                                              const MlirType* operand_types, int nin, const MlirType* result_types,
                                              int nout, int reduced, MlirOperation src, const char* const* keep,
                                              uint32_t tokens, char* out, size_t size) {
  bool reduce = A->per_rank && tpc__ad_group(A, tokens) > 1;
  char base[40];
  tpc__ad_emit(A, op_name, operands, operand_types, nin, result_types, nout, src, keep, reduce ? "partial = true" : NULL,
               base, sizeof base);
  if (nout > 1)
    snprintf(out, size, "%s#%d", base, reduced);
  else
    snprintf(out, size, "%s", base);
  if (!reduce) return out;
  char sum[40], partial[48];
  snprintf(partial, sizeof partial, "%s", out);
  tpc__ad_collective(A, TPC_OP_NAME_ALL_REDUCE, tokens, "", partial, result_types[reduced], result_types[reduced], sum,
                     sizeof sum);
  snprintf(out, size, "%s", sum);
  return out;
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

static const char* const tpc__plan_attrs[] = {"parallel", "sequence_parallel", NULL};
static const char* const tpc__glu_attrs[] = {"kind", "interleave", "alpha", "limit", NULL};
static const char* const tpc__eps_attrs[] = {"eps", NULL};
static const char* const tpc__route_attrs[] = {"top_k", "normalize", NULL};
static const char* const tpc__attention_attrs[] = {"seq_len", "head_dim", "causal", "scale", NULL};
static const char* const tpc__vocab_attrs[] = {"parallel", "sequence_parallel", "mesh", "axes", NULL};

// Emits the gradient of |op| given the adjoints of its results.
MlirLogicalResult tpc__ad_rule(tpc__ad_t* A, MlirOperation op, int kind) {
  char b1[40], b2[40], name[48];
  MlirValue r0 = mlirOperationGetNumResults(op) ? mlirOperationGetResult(op, 0) : (MlirValue){NULL};
  tpc__adval_t* out = mlirValueIsNull(r0) ? NULL : tpc__ad_find(A, r0);
  const char* dy = out ? out->adjoint : "";
  MlirType ty = out && *dy ? out->adjoint_type : mlirValueIsNull(r0) ? (MlirType){NULL} : mlirValueGetType(r0);
  switch (kind) {
    case TPC_OP_ADD: {
      if (!*dy) return mlirLogicalResultSuccess();
      snprintf(name, sizeof name, "%s", dy);
      MlirValue rhs = mlirOperationGetOperand(op, 1);
      if (mlirShapedTypeGetRank(mlirValueGetType(rhs)) == 1 && mlirShapedTypeGetRank(ty) > 1) {
        // A broadcast bias: its gradient sums the rows (f32, like tp.linear's bias).
        MlirType db_t = tpc__f32_like(A, rhs);
        const char* bops[1] = {dy};
        tpc__ad_emit_token_reduced(A, TPC_OP_NAME_BIAS_GRAD, bops, &ty, 1, &db_t, 1, 0, (MlirOperation){NULL}, NULL,
                                   tpc__ad_tokens(A, mlirOperationGetOperand(op, 0)), b1, sizeof b1);
        tpc__ad_accumulate(A, rhs, b1, db_t);
      } else {
        tpc__ad_accumulate(A, rhs, name, ty);
      }
      tpc__ad_accumulate(A, mlirOperationGetOperand(op, 0), name, ty);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_MUL: {
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue a = mlirOperationGetOperand(op, 0), b = mlirOperationGetOperand(op, 1);
      const char* ops_b[2] = {dy, tpc__ad_name(A, a)};
      const char* ops_a[2] = {dy, tpc__ad_name(A, b)};
      MlirType types[2] = {ty, ty};
      tpc__ad_emit(A, TPC_OP_NAME_MUL, ops_b, types, 2, &ty, 1, (MlirOperation){NULL}, NULL, NULL, b1, sizeof b1);
      tpc__ad_emit(A, TPC_OP_NAME_MUL, ops_a, types, 2, &ty, 1, (MlirOperation){NULL}, NULL, NULL, b2, sizeof b2);
      tpc__ad_accumulate(A, b, b1, ty);
      tpc__ad_accumulate(A, a, b2, ty);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_LINEAR: {
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue x = tpc_linear_get_x(op), w = tpc_linear_get_w(op), bias = tpc_linear_get_bias(op);
      MlirType tx = mlirValueGetType(x), tw = mlirValueGetType(w);
      uint32_t tokens = tpc__ad_tokens(A, x);
      const char* dgrad_ops[2] = {dy, tpc__ad_name(A, w)};
      MlirType dgrad_types[2] = {ty, tw};
      const char* wgrad_ops[2] = {dy, tpc__ad_name(A, x)};
      MlirType wgrad_types[2] = {ty, tx};
      MlirType dw_t = tpc__f32_like(A, w);
      if (!mlirValueIsNull(bias)) {
        MlirType db_t = tpc__f32_like(A, bias);
        const char* bops[1] = {dy};
        tpc__ad_emit_token_reduced(A, TPC_OP_NAME_BIAS_GRAD, bops, &ty, 1, &db_t, 1, 0, (MlirOperation){NULL}, NULL,
                                   tokens, b1, sizeof b1);
        tpc__ad_accumulate(A, bias, b1, db_t);
      }
      tpc__ad_emit_token_reduced(A, TPC_OP_NAME_LINEAR_WGRAD, wgrad_ops, wgrad_types, 2, &dw_t, 1, 0, op,
                                 tpc__plan_attrs, tokens, b1, sizeof b1);
      tpc__ad_accumulate(A, w, b1, dw_t);
      // Per rank, a column-parallel linear's input gradient sums over the sharded N: an f32
      // partial completed by the dual of the input's replication (an all-reduce over tp), or by
      // the reduce-scatter that is the dual of a sequence-parallel all-gather.
      bool column = A->per_rank && tpc_linear_get_parallel(op) == TPC_PARALLEL_COLUMN &&
                    tpc__ad_group(A, tpc__ad_tp(A)) > 1;
      if (!column) {
        tpc__ad_emit(A, TPC_OP_NAME_LINEAR_DGRAD, dgrad_ops, dgrad_types, 2, &tx, 1, op, tpc__plan_attrs, NULL, b2, sizeof b2);
        tpc__ad_accumulate(A, x, b2, tx);
        return mlirLogicalResultSuccess();
      }
      MlirType partial_t = tpc__f32_like(A, x);
      tpc__ad_emit(A, TPC_OP_NAME_LINEAR_DGRAD, dgrad_ops, dgrad_types, 2, &partial_t, 1, op, tpc__plan_attrs,
                   "partial = true", b2, sizeof b2);
      MlirOperation def = mlirOpResultGetOwner(x);
      if (mlirValueIsAOpResult(x) && tpc_is_all_gather(def)) {
        tpc__ad_accumulate(A, x, b2, partial_t);
      } else {
        tpc__ad_collective(A, TPC_OP_NAME_ALL_REDUCE, tpc__ad_tp(A), "", b2, partial_t, tx, b1, sizeof b1);
        tpc__ad_accumulate(A, x, b1, tx);
      }
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_GROUPED_LINEAR: {
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue x = tpc_grouped_linear_get_x(op), w = tpc_grouped_linear_get_w(op), g = tpc_grouped_linear_get_group_sizes(op);
      MlirType tx = mlirValueGetType(x), tw = mlirValueGetType(w), tg = mlirValueGetType(g);
      const char* dgrad_ops[3] = {dy, tpc__ad_name(A, w), tpc__ad_name(A, g)};
      MlirType dgrad_types[3] = {ty, tw, tg};
      const char* wgrad_ops[3] = {dy, tpc__ad_name(A, x), tpc__ad_name(A, g)};
      MlirType wgrad_types[3] = {ty, tx, tg};
      static const char* const keep[] = {"parallel", "sequence_parallel", NULL};
      MlirType dw_t = tpc__f32_like(A, w);
      tpc__ad_emit_token_reduced(A, TPC_OP_NAME_GROUPED_LINEAR_WGRAD, wgrad_ops, wgrad_types, 3, &dw_t, 1, 0, op, keep,
                                 tpc__ad_tokens(A, x), b1, sizeof b1);
      tpc__ad_accumulate(A, w, b1, dw_t);
      bool column = A->per_rank && tpc_grouped_linear_get_parallel(op) == TPC_PARALLEL_COLUMN &&
                    tpc__ad_group(A, tpc__ad_tp(A)) > 1;
      if (!column) {
        tpc__ad_emit(A, TPC_OP_NAME_GROUPED_LINEAR_DGRAD, dgrad_ops, dgrad_types, 3, &tx, 1, op, keep, NULL, b2, sizeof b2);
        tpc__ad_accumulate(A, x, b2, tx);
        return mlirLogicalResultSuccess();
      }
      MlirType partial_t = tpc__f32_like(A, x);
      tpc__ad_emit(A, TPC_OP_NAME_GROUPED_LINEAR_DGRAD, dgrad_ops, dgrad_types, 3, &partial_t, 1, op, keep,
                   "partial = true", b2, sizeof b2);
      // As for tp.linear: a sequence-parallel all-gather's dual reduce-scatters the partial.
      if (mlirValueIsAOpResult(x) && tpc_is_all_gather(mlirOpResultGetOwner(x))) {
        tpc__ad_accumulate(A, x, b2, partial_t);
        return mlirLogicalResultSuccess();
      }
      tpc__ad_collective(A, TPC_OP_NAME_ALL_REDUCE, tpc__ad_tp(A), "", b2, partial_t, tx, b1, sizeof b1);
      tpc__ad_accumulate(A, x, b1, tx);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_GLU: {
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue x = tpc_glu_get_x(op);
      MlirType tx = mlirValueGetType(x);
      const char* ops[2] = {tpc__ad_name(A, x), dy};
      MlirType types[2] = {tx, ty};
      tpc__ad_emit(A, TPC_OP_NAME_GLU_GRAD, ops, types, 2, &tx, 1, op, tpc__glu_attrs, NULL, b1, sizeof b1);
      tpc__ad_accumulate(A, x, b1, tx);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_ROPE: {
      // A rotation: its gradient rotates back (the transpose). The tables get none.
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue x = tpc_rope_get_x(op), c = tpc_rope_get_cos(op), s = tpc_rope_get_sin(op);
      MlirType tc = mlirValueGetType(c);
      const char* ops[3] = {dy, tpc__ad_name(A, c), tpc__ad_name(A, s)};
      MlirType types[3] = {ty, tc, tc};
      tpc__ad_emit(A, TPC_OP_NAME_ROPE, ops, types, 3, &ty, 1, (MlirOperation){NULL}, NULL,
                   tpc_rope_get_inverse(op) ? NULL : "inverse = true", b1, sizeof b1);
      tpc__ad_accumulate(A, x, b1, ty);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_ATTENTION: {
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue q = tpc_attention_get_q(op), k = tpc_attention_get_k(op), v = tpc_attention_get_v(op);
      MlirType tq = mlirValueGetType(q), tk = mlirValueGetType(k);
      // The forward's softmax statistics (tpc__ad_forward gives every tp.attention an lse).
      tpc__adval_t* y = tpc__ad_find(A, r0);
      const char* ops[6] = {tpc__ad_name(A, q), tpc__ad_name(A, k), tpc__ad_name(A, v), tpc__ad_name(A, r0), dy,
                            y && y->stats[0] ? y->stats : NULL};
      MlirType types[6] = {tq, tk, tk, tq, ty, tpc__ad_lse_type(A, op)};
      MlirType results[3] = {tq, tk, tk};
      tpc__ad_emit(A, TPC_OP_NAME_ATTENTION_GRAD, ops, types, ops[5] ? 6 : 5, results, 3, op, tpc__attention_attrs,
                   NULL, b1, sizeof b1);
      MlirValue ins[3] = {q, k, v};
      for (int i = 0; i < 3; ++i) {
        snprintf(name, sizeof name, "%s#%d", b1, i);
        tpc__ad_accumulate(A, ins[i], name, results[i]);
      }
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_EMBEDDING: {
      // A deterministic scatter-add of dy into the table's rows (f32, like every weight
      // gradient), summed over the tokens of the ranks that share them.
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue ids = tpc_embedding_get_ids(op), table = tpc_embedding_get_table(op);
      MlirType dt = tpc__f32_like(A, table);
      const char* ops[2] = {tpc__ad_name(A, ids), dy};
      MlirType types[2] = {mlirValueGetType(ids), ty};
      tpc__ad_emit_token_reduced(A, TPC_OP_NAME_EMBEDDING_GRAD, ops, types, 2, &dt, 1, 0, op, tpc__vocab_attrs,
                                 tpc__ad_tokens(A, ids), b1, sizeof b1);
      tpc__ad_accumulate(A, table, b1, dt);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_CROSS_ENTROPY: {
      tpc__adval_t* lse = tpc__ad_find(A, tpc_cross_entropy_get_lse(op));
      if (lse && lse->adjoint[0]) {
        mlirEmitError(mlirOperationGetLocation(op),
                      "tp-autodiff: tp.cross_entropy's lse is a saved statistic with no gradient; return the loss "
                      "(or mark the function's lse result out of the training step)");
        return mlirLogicalResultFailure();
      }
      if (!*dy) return mlirLogicalResultSuccess();
      // Both gradients recompute the logits from x, w and lse: the [T,V] logits are never kept.
      MlirValue x = tpc_cross_entropy_get_x(op), w = tpc_cross_entropy_get_w(op), t = tpc_cross_entropy_get_targets(op);
      MlirType tx = mlirValueGetType(x), tw = mlirValueGetType(w), dw_t = tpc__f32_like(A, w);
      const char* ops[5] = {tpc__ad_name(A, x), tpc__ad_name(A, w), tpc__ad_name(A, t),
                            tpc__ad_name(A, tpc_cross_entropy_get_lse(op)), dy};
      MlirType types[5] = {tx, tw, mlirValueGetType(t), ty, ty};
      tpc__ad_emit_token_reduced(A, TPC_OP_NAME_CROSS_ENTROPY_WGRAD, ops, types, 5, &dw_t, 1, 0, op, tpc__vocab_attrs,
                                 tpc__ad_tokens(A, x), b1, sizeof b1);
      tpc__ad_accumulate(A, w, b1, dw_t);
      tpc__ad_emit(A, TPC_OP_NAME_CROSS_ENTROPY_DGRAD, ops, types, 5, &tx, 1, op, tpc__vocab_attrs, NULL, b2, sizeof b2);
      tpc__ad_accumulate(A, x, b2, tx);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_ATTENTION_KVCACHE:
      mlirEmitError(mlirOperationGetLocation(op),
                    "tp-autodiff: tp.attention_kvcache (decoding with a KV cache) has no gradient; train with "
                    "tp.attention on whole sequences");
      return mlirLogicalResultFailure();
    case TPC_OP_KVCACHE_WRITE:
    case TPC_OP_SAMPLE:
      mlirEmitError(mlirOperationGetLocation(op),
                    kind == TPC_OP_SAMPLE ? "tp-autodiff: tp.sample (a draw of token ids) has no gradient; score the "
                                            "sampled tokens with tp.cross_entropy"
                                          : "tp-autodiff: tp.kvcache_write (decoding with a KV cache) has no gradient");
      return mlirLogicalResultFailure();
    case TPC_OP_CROSS_ENTROPY_LOGITS:
      mlirEmitError(mlirOperationGetLocation(op),
                    "tp-autodiff: tp.cross_entropy_logits has no gradient; train with tp.cross_entropy of the head's "
                    "input and weight, whose gradients never hold the [T,V] logits");
      return mlirLogicalResultFailure();
    case TPC_OP_RMSNORM:
    case TPC_OP_LAYERNORM: {
      if (!*dy) return mlirLogicalResultSuccess();
      bool ln = kind == TPC_OP_LAYERNORM;
      MlirValue x = mlirOperationGetOperand(op, 0), gamma = mlirOperationGetOperand(op, 1);
      MlirType tx = mlirValueGetType(x), tg = mlirValueGetType(gamma), dg = tpc__f32_like(A, gamma);
      const char* ops[3] = {tpc__ad_name(A, x), tpc__ad_name(A, gamma), dy};
      MlirType types[3] = {tx, tg, ty};
      MlirType results[3] = {tx, dg, dg};
      uint32_t tokens = tpc__ad_tokens(A, x);
      bool reduce = A->per_rank && tpc__ad_group(A, tokens) > 1;
      char dgamma[48];
      tpc__ad_emit_token_reduced(A, ln ? TPC_OP_NAME_LAYERNORM_GRAD : TPC_OP_NAME_RMSNORM_GRAD, ops, types, 3, results,
                                 ln ? 3 : 2, 1, op, tpc__eps_attrs, tokens, dgamma, sizeof dgamma);
      // The op itself is the base name of its results, before any reduction.
      snprintf(b1, sizeof b1, "%%g%d", A->counter - (reduce ? 2 : 1));
      tpc__ad_accumulate(A, gamma, dgamma, dg);
      if (ln) {
        // dbeta sums over the tokens too: its own all-reduce, after dgamma's (as tp-shard emits them).
        snprintf(name, sizeof name, "%s#2", b1);
        if (reduce) {
          char partial[48];
          snprintf(partial, sizeof partial, "%s", name);
          tpc__ad_collective(A, TPC_OP_NAME_ALL_REDUCE, tokens, "", partial, dg, dg, name, sizeof name);
        }
        tpc__ad_accumulate(A, mlirOperationGetOperand(op, 2), name, dg);
      }
      snprintf(name, sizeof name, "%s#0", b1);
      tpc__ad_accumulate(A, x, name, tx);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_MOE_UNPERMUTE: {
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue y = tpc_moe_unpermute_get_y(op), map = tpc_moe_unpermute_get_row_map(op), w = tpc_moe_unpermute_get_weights(op);
      MlirType t_y = mlirValueGetType(y), t_m = mlirValueGetType(map), t_w = mlirValueGetType(w);
      const char* ops[4] = {dy, tpc__ad_name(A, y), tpc__ad_name(A, map), tpc__ad_name(A, w)};
      MlirType types[4] = {ty, t_y, t_m, t_w};
      MlirType results[2] = {t_y, t_w};
      tpc__ad_emit(A, TPC_OP_NAME_MOE_UNPERMUTE_GRAD, ops, types, 4, results, 2, (MlirOperation){NULL}, NULL, NULL, b1,
                   sizeof b1);
      snprintf(name, sizeof name, "%s#1", b1);
      tpc__ad_accumulate(A, w, name, t_w);
      snprintf(name, sizeof name, "%s#0", b1);
      tpc__ad_accumulate(A, y, name, t_y);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_MOE_PERMUTE: {
      if (!*dy) return mlirLogicalResultSuccess();  // only the permuted rows carry a gradient
      MlirValue x = tpc_moe_permute_get_x(op), map = tpc_moe_permute_get_row_map(op), idx = tpc_moe_permute_get_indices(op);
      MlirType tx = mlirValueGetType(x), t_m = mlirValueGetType(map);
      const char* ops[2] = {dy, tpc__ad_name(A, map)};
      MlirType types[2] = {ty, t_m};
      char extra[64];
      snprintf(extra, sizeof extra, "top_k = %lld : i64", (long long)mlirShapedTypeGetDimSize(mlirValueGetType(idx), 1));
      tpc__ad_emit(A, TPC_OP_NAME_MOE_PERMUTE_GRAD, ops, types, 2, &tx, 1, (MlirOperation){NULL}, NULL, extra, b1, sizeof b1);
      tpc__ad_accumulate(A, x, b1, tx);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_MOE_ROUTE: {
      tpc__adval_t* wa = tpc__ad_find(A, tpc_moe_route_get_weights(op));
      if (!wa || !wa->adjoint[0]) return mlirLogicalResultSuccess();
      MlirValue logits = tpc_moe_route_get_logits(op), idx = tpc_moe_route_get_indices(op), w = tpc_moe_route_get_weights(op);
      MlirType tl = mlirValueGetType(logits);
      const char* ops[3] = {tpc__ad_name(A, logits), tpc__ad_name(A, idx), wa->adjoint};
      MlirType types[3] = {tl, mlirValueGetType(idx), mlirValueGetType(w)};
      tpc__ad_emit(A, TPC_OP_NAME_MOE_ROUTE_GRAD, ops, types, 3, &tl, 1, op, tpc__route_attrs, NULL, b1, sizeof b1);
      tpc__ad_accumulate(A, logits, b1, tl);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_ALL_TO_ALL:
    case TPC_OP_MOE_BUCKET:
    case TPC_OP_MOE_UNBUCKET: {
      // Expert parallelism's dispatch and combine are permutations: the all-to-all along dim 0
      // is its own transpose, and bucketing and unbucketing are each other's.
      if (!A->per_rank) break;
      if (!*dy) return mlirLogicalResultSuccess();  // the counts' all-to-all carries no gradient
      MlirValue in = mlirOperationGetOperand(op, 0);
      MlirType tin = mlirValueGetType(in);
      if (kind == TPC_OP_ALL_TO_ALL) {
        tpc__ad_collective(A, TPC_OP_NAME_ALL_TO_ALL, tpc__ad_axes_mask(A, op), ", split_dim = 0 : i64, concat_dim = 0 : i64",
                           dy, ty, tin, b1, sizeof b1);
      } else {
        MlirValue sizes = mlirOperationGetOperand(op, 1);
        const char* ops[2] = {dy, tpc__ad_name(A, sizes)};
        MlirType types[2] = {ty, mlirValueGetType(sizes)};
        tpc__ad_emit(A, kind == TPC_OP_MOE_BUCKET ? TPC_OP_NAME_MOE_UNBUCKET : TPC_OP_NAME_MOE_BUCKET, ops, types, 2, &tin,
                     1, op, NULL, NULL, b1, sizeof b1);
      }
      tpc__ad_accumulate(A, in, b1, tin);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_ALL_REDUCE:
    case TPC_OP_REDUCE_SCATTER:
    case TPC_OP_ALL_GATHER: {
      // The duals of tp-shard's collectives (per-rank programs). The reduction completing a
      // row-parallel partial passes the gradient through (every rank holds the same y); a
      // sequence-parallel reduce-scatter's dual all-gathers it; an all-gather's dual
      // reduce-scatters the (f32 partial) gradient of the gathered tokens.
      if (!A->per_rank) break;
      // A max all-reduce (an amax, which feeds quantization only) has no gradient rule.
      if (kind == TPC_OP_ALL_REDUCE && tpc_all_reduce_get_reduce(op) == TPC_REDUCE_MAX) break;
      if (!*dy) return mlirLogicalResultSuccess();
      MlirValue in = mlirOperationGetOperand(op, 0);
      MlirType tin = mlirValueGetType(in);
      uint32_t mask = tpc__ad_axes_mask(A, op);
      if (kind == TPC_OP_ALL_REDUCE) {
        snprintf(name, sizeof name, "%s", dy);
        tpc__ad_accumulate(A, in, name, ty);
        return mlirLogicalResultSuccess();
      }
      MlirAttribute dim = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("dim"));
      if (mlirAttributeIsNull(dim) || mlirIntegerAttrGetValueInt(dim) != 0) break;
      if (kind == TPC_OP_REDUCE_SCATTER) {
        // The gathered gradient has the partial's shape and the gradient's element type.
        intptr_t rank = mlirShapedTypeGetRank(tin);
        int64_t dims[8];
        for (intptr_t i = 0; i < rank && i < 8; ++i) dims[i] = mlirShapedTypeGetDimSize(tin, i);
        MlirType g_t = mlirRankedTensorTypeGet(rank, dims, mlirShapedTypeGetElementType(ty), mlirAttributeGetNull());
        tpc__ad_collective(A, TPC_OP_NAME_ALL_GATHER, mask, ", dim = 0 : i64", out->adjoint, ty, g_t, b1, sizeof b1);
        tpc__ad_accumulate(A, in, b1, g_t);
        return mlirLogicalResultSuccess();
      }
      // all_gather: the adjoint of the gathered value is an f32 partial (a column dgrad).
      MlirType partial_t = tpc__f32_like(A, r0);
      tpc__ad_collective(A, TPC_OP_NAME_REDUCE_SCATTER, mask, ", dim = 0 : i64", out->adjoint, partial_t, tin, b1, sizeof b1);
      tpc__ad_accumulate(A, in, b1, tin);
      return mlirLogicalResultSuccess();
    }
    default:
      break;
  }
  {
    {
      MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
      char msg[256];
      snprintf(msg, sizeof msg, "tp-autodiff: '%.*s' has no gradient rule (differentiate the logical module, before "
               "collectives, quantization and fusions are introduced)", (int)n.length, n.data);
      mlirEmitError(mlirOperationGetLocation(op), msg);
      return mlirLogicalResultFailure();
    }
  }
}

