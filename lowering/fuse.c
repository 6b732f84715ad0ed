// tp-fuse: rewrites the end of a tensor-parallel block into one fused op:
//
//   %s = tp.all_reduce(%partial)           %normed, %y = tp.fused_allreduce_add_rmsnorm(
//   %y = tp.add(%residual, %s)       ==>         %partial, %residual, %gamma)
//   %n = tp.rmsnorm(%y, %gamma)
//
// and the sequence-parallel form, a reduce-scatter along the tokens (dim 0, one block) into
// tp.fused_reduce_scatter_add_rmsnorm. The chain rounds the sum to its result type before the
// add. In fast numerics (tp.numerics "fast" or absent) the fused op keeps the sum in f32 and
// rounds once, after the add (sum_type "f32", the default: other bits, and the one-shot kernel's
// form). In invariant and exact numerics it takes sum_type = "residual", which rounds the sum
// first as the chain does: the same bits, so the promise (TP = 1's bits, CPU ≡ GPU) still holds.
//
// Where it applies (every other chain is left as it is):
//   - a sum over ranks (not a max), whose result has one use: the add;
//   - the add's other operand, the residual, of the sum's type and shape (2-D), which the add keeps;
//   - the partial in f32 or in the residual's type (the fused op's rule);
//   - a tp.rmsnorm of the add's result, whose gamma is defined before the add (the fused op takes
//     the add's place); the first such norm in the block when there are several.
// The add's result keeps its other uses (the next block's residual): they take the fused op's
// residual_out. The collective's mesh, axes and order and the norm's eps carry over; the
// algorithm is left to tp-lower-runtime's option (default "auto").
//
// A rowwise tp.quantize of the all-reduce form's normed then joins it, as
// tp.fused_allreduce_add_rmsnorm_quantize (the fused kernel quantizes where it normalizes), when
// its quantization is local to a row: mxfp8, or a per-tensor format with an amax operand defined
// before the fused op (delayed or static scaling; an amax of normed itself needs every row first).
// The first such quantize in the block; normed keeps its other uses. The bits are the quantize's.
//
// The LM head's two gradients, tp.cross_entropy_dgrad and tp.cross_entropy_wgrad of the same
// operands (x, w, targets, lse, dloss) and sharding, become one tp.cross_entropy_grad, which
// recomputes the [T,V] logits once instead of twice: the same bits in every numerics.
//
// Then a tp.cross_entropy whose lse feeds a tp.cross_entropy_grad of the same x, w and targets,
// with the gradient's dloss defined before the loss (a training step's cotangent argument) and
// the whole vocabulary on the rank (no mesh axes, no partial), becomes one
// tp.cross_entropy_with_grad at the loss's place: the logits are computed once for the loss and
// both gradients, not once for each, with the same bits in every numerics.
//
// Then gradient sums: a tp.add whose operand is a tp.linear_dgrad or tp.embedding_grad (not
// partial) or the dx of a tp.rmsnorm_grad, used by the add alone and of the add's type, with the other operand defined
// before that op, becomes the op with acc = the other operand (the later-defined operand of the
// add takes acc when both could). In exact and invariant numerics the op rounds its result and
// then adds acc as tp.add does: the add's bits. Fast numerics may add before the one rounding
// (cuBLASLt's beta = 1). The q, k and v input gradients then chain through acc, each norm's dx
// takes the residual's gradient, and a tied embedding's gradient takes the LM head's: no separate
// add, and no extra pass over the tensor.
//
// Last, a residual add and the next norm where no collective comes first (one rank, or a sum
// another rule left): a tp.add of two operands of one 2-D type whose result feeds a tp.rmsnorm
// (the first in the block) with gamma defined before the add becomes tp.add_rmsnorm at the add's
// place; the add's other uses (the next residual) take its sum. The pair's bits in every numerics:
// the sum is rounded as tp.add rounds it and normalized as tp.rmsnorm does.
#include <stdbool.h>
#include <stdlib.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "tpc_dialect.h"
#include "tpc_verify.h"

// The first tp.rmsnorm (in block order) of |add|'s block whose x is |y|, or a null op.
static MlirOperation tpc__norm_of(MlirValue y, MlirOperation add) {
  MlirOperation first = {NULL};
  for (MlirOpOperand use = mlirValueGetFirstUse(y); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
    MlirOperation user = mlirOpOperandGetOwner(use);
    if (tpc_op_get_kind(user) != TPC_OP_RMSNORM || mlirOpOperandGetOperandNumber(use) != TPC_RMSNORM_SLOT_X ||
        !mlirBlockEqual(mlirOperationGetBlock(user), mlirOperationGetBlock(add)))
      continue;
    if (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(user, first)) first = user;
  }
  return first;
}

// |v| is defined before |op| in |op|'s block (or is an argument of its block).
static bool tpc__defined_before(MlirValue v, MlirOperation op) {
  if (mlirValueIsABlockArgument(v))
    return mlirBlockEqual(mlirBlockArgumentGetOwner(v), mlirOperationGetBlock(op));
  MlirOperation def = mlirOpResultGetOwner(v);
  return mlirBlockEqual(mlirOperationGetBlock(def), mlirOperationGetBlock(op)) && mlirOperationIsBeforeInBlock(def, op);
}

static bool tpc__is_2d(MlirType t) { return mlirTypeIsARankedTensor(t) && mlirShapedTypeGetRank(t) == 2; }

// The first tp.quantize (in block order) of |normed| in |fused|'s block that can join the fused op:
// rowwise, and local to a row (mxfp8, or a per-tensor format whose amax operand is defined before
// |fused|, so the fused op can take it); else a null op.
static MlirOperation tpc__quantize_of(MlirValue normed, MlirOperation fused) {
  MlirOperation first = {NULL};
  for (MlirOpOperand use = mlirValueGetFirstUse(normed); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
    MlirOperation q = mlirOpOperandGetOwner(use);
    if (tpc_op_get_kind(q) != TPC_OP_QUANTIZE || mlirOpOperandGetOperandNumber(use) != TPC_QUANTIZE_SLOT_X ||
        !mlirBlockEqual(mlirOperationGetBlock(q), mlirOperationGetBlock(fused)) ||
        tpc_quantize_get_axis(q) != TPC_AXIS_ROWWISE || (int)tpc_quantize_get_format(q) < 0 ||
        mlirOperationGetNumResults(q) < 2 || mlirOperationGetNumResults(q) > 3 || mlirOperationGetNumOperands(q) > 2)
      continue;  // (a quantize of unexpected arity, which a pipeline on unverified IR may meet, is left alone)
    MlirValue amax = tpc_quantize_get_amax(q);
    bool local = mlirValueIsNull(amax) ? tpc_quantize_get_format(q) == TPC_FORMAT_MXFP8 : tpc__defined_before(amax, fused);
    if (local && (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(q, first))) first = q;
  }
  return first;
}

// Folds the first tp.quantize of |fused|'s normed that qualifies (tpc__quantize_of) into
// tp.fused_allreduce_add_rmsnorm_quantize at |fused|'s place: its attributes, plus the format.
static void tpc__fuse_quantize(MlirOperation fused) {
  MlirValue normed = mlirOperationGetResult(fused, 0);
  MlirOperation q = tpc__quantize_of(normed, fused);
  if (mlirOperationIsNull(q)) return;
  MlirContext ctx = mlirOperationGetContext(fused);
  MlirOperationState st =
      mlirOperationStateGet(tpc_ref(TPC_OP_NAME_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE), mlirOperationGetLocation(q));
  MlirValue operands[4] = {mlirOperationGetOperand(fused, 0), mlirOperationGetOperand(fused, 1),
                           mlirOperationGetOperand(fused, 2), tpc_quantize_get_amax(q)};
  intptr_t nq = mlirOperationGetNumResults(q);
  MlirType results[5] = {mlirValueGetType(normed), mlirValueGetType(mlirOperationGetResult(fused, 1))};
  for (intptr_t i = 0; i < nq && i < 3; ++i) results[2 + i] = mlirValueGetType(mlirOperationGetResult(q, i));
  MlirNamedAttribute attrs[8];
  intptr_t n = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(fused) && n < 7; ++i)
    attrs[n++] = mlirOperationGetAttribute(fused, i);
  attrs[n++] = tpc_named_attr(ctx, "format", mlirOperationGetAttributeByName(q, tpc_ref("format")));
  mlirOperationStateAddOperands(&st, mlirValueIsNull(operands[3]) ? 3 : 4, operands);
  mlirOperationStateAddResults(&st, 2 + (nq < 3 ? nq : 3), results);
  mlirOperationStateAddAttributes(&st, n, attrs);
  MlirOperation fq = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(fused), fused, fq);
  for (intptr_t i = 0; i < nq && i < 3; ++i)
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(q, i), mlirOperationGetResult(fq, 2 + i));
  mlirOperationDestroy(q);
  mlirValueReplaceAllUsesOfWith(normed, mlirOperationGetResult(fq, 0));
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(fused, 1), mlirOperationGetResult(fq, 1));
  mlirOperationDestroy(fused);
}

// Rewrites the chain that starts at collective |coll| (an all-reduce, or a reduce-scatter when
// |scatter|) when it qualifies; returns whether it did.
static bool tpc__fuse(MlirOperation coll, bool scatter, bool round_sum) {
  const int kind = scatter ? TPC_OP_REDUCE_SCATTER : TPC_OP_ALL_REDUCE;
  if (!scatter && tpc_all_reduce_get_reduce(coll) != TPC_REDUCE_SUM) return false;
  if (scatter && (tpc_op_get_i64(coll, kind, TPC_REDUCE_SCATTER_ATTR_DIM) != 0 ||
                  tpc_op_get_i64(coll, kind, TPC_REDUCE_SCATTER_ATTR_BLOCKS) != 1))
    return false;
  // Shapes of ops the verifier would refuse (a pipeline may run unverified) are left alone.
  if (mlirOperationGetNumOperands(coll) != 1 || mlirOperationGetNumResults(coll) != 1) return false;
  MlirValue partial = mlirOperationGetOperand(coll, 0), sum = mlirOperationGetResult(coll, 0);
  MlirOperation add = tpc_only_user(sum);
  if (mlirOperationIsNull(add) || tpc_op_get_kind(add) != TPC_OP_ADD || mlirOperationGetNumOperands(add) != 2 ||
      mlirOperationGetNumResults(add) != 1)
    return false;
  MlirValue lhs = mlirOperationGetOperand(add, 0);
  MlirValue residual = mlirValueEqual(lhs, sum) ? mlirOperationGetOperand(add, 1) : lhs;
  MlirValue y = mlirOperationGetResult(add, 0);
  MlirType rt = mlirValueGetType(residual), pt = mlirValueGetType(partial);
  if (!tpc__is_2d(rt) || !mlirTypeEqual(rt, mlirValueGetType(sum)) || !mlirTypeEqual(rt, mlirValueGetType(y)) ||
      !tpc__is_2d(pt))
    return false;
  MlirType pe = mlirShapedTypeGetElementType(pt);
  if (!mlirTypeIsAF32(pe) && !mlirTypeEqual(pe, mlirShapedTypeGetElementType(rt))) return false;
  MlirOperation norm = tpc__norm_of(y, add);
  if (mlirOperationIsNull(norm) || mlirOperationGetNumOperands(norm) != 2 || mlirOperationGetNumResults(norm) != 1)
    return false;
  MlirValue gamma = mlirOperationGetOperand(norm, TPC_RMSNORM_SLOT_GAMMA);
  if (!tpc__defined_before(gamma, add)) return false;
  MlirValue normed_old = mlirOperationGetResult(norm, 0);
  if (!mlirTypeEqual(mlirValueGetType(normed_old), rt)) return false;

  MlirContext ctx = mlirOperationGetContext(coll);
  MlirOperationState st = mlirOperationStateGet(
      tpc_ref(scatter ? TPC_OP_NAME_FUSED_REDUCE_SCATTER_ADD_RMSNORM : TPC_OP_NAME_FUSED_ALLREDUCE_ADD_RMSNORM),
      mlirOperationGetLocation(add));
  MlirValue operands[3] = {partial, residual, gamma};
  MlirType results[2] = {rt, rt};
  MlirNamedAttribute attrs[5];
  intptr_t n = 0;
  const char* carried[] = {"mesh", "axes", "order"};
  for (int i = 0; i < 3; ++i) {
    MlirAttribute a = mlirOperationGetAttributeByName(coll, tpc_ref(carried[i]));
    if (!mlirAttributeIsNull(a)) attrs[n++] = tpc_named_attr(ctx, carried[i], a);
  }
  MlirAttribute eps = mlirOperationGetAttributeByName(norm, tpc_ref("eps"));
  if (!mlirAttributeIsNull(eps)) attrs[n++] = tpc_named_attr(ctx, "eps", eps);
  if (round_sum) attrs[n++] = tpc_named_attr(ctx, "sum_type", mlirStringAttrGet(ctx, tpc_ref("residual")));
  mlirOperationStateAddOperands(&st, 3, operands);
  mlirOperationStateAddResults(&st, 2, results);
  mlirOperationStateAddAttributes(&st, n, attrs);
  MlirOperation fused = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(add), add, fused);
  mlirValueReplaceAllUsesOfWith(normed_old, mlirOperationGetResult(fused, 0));
  mlirOperationDestroy(norm);
  mlirValueReplaceAllUsesOfWith(y, mlirOperationGetResult(fused, 1));
  mlirOperationDestroy(add);
  mlirOperationDestroy(coll);
  if (!scatter) tpc__fuse_quantize(fused);
  return true;
}

static bool tpc__is_sum_collective(int kind) { return kind == TPC_OP_ALL_REDUCE || kind == TPC_OP_REDUCE_SCATTER; }

// Both named attributes absent, or equal.
static bool tpc__same_attr(MlirOperation a, MlirOperation b, const char* name) {
  MlirAttribute x = mlirOperationGetAttributeByName(a, tpc_ref(name)), y = mlirOperationGetAttributeByName(b, tpc_ref(name));
  return mlirAttributeIsNull(x) ? mlirAttributeIsNull(y) : !mlirAttributeIsNull(y) && mlirAttributeEqual(x, y);
}

// Rewrites the cross-entropy's weight gradient |wgrad| and an input gradient of the same five
// operands and sharding attributes in its block into one tp.cross_entropy_grad, at the place of
// the earlier of the two (their operands are defined before both), which recomputes the logits
// once for both: the same bits, any numerics. Returns whether it did.
static bool tpc__fuse_cross_entropy(MlirOperation wgrad) {
  if (mlirOperationGetNumOperands(wgrad) != 5 || mlirOperationGetNumResults(wgrad) != 1) return false;
  MlirOperation dgrad = {NULL};
  MlirValue x = mlirOperationGetOperand(wgrad, 0);
  for (MlirOpOperand use = mlirValueGetFirstUse(x); !mlirOpOperandIsNull(use) && mlirOperationIsNull(dgrad);
       use = mlirOpOperandGetNextUse(use)) {
    MlirOperation user = mlirOpOperandGetOwner(use);
    if (tpc_op_get_kind(user) != TPC_OP_CROSS_ENTROPY_DGRAD || mlirOpOperandGetOperandNumber(use) != 0 ||
        mlirOperationGetNumOperands(user) != 5 || mlirOperationGetNumResults(user) != 1 ||
        !mlirBlockEqual(mlirOperationGetBlock(user), mlirOperationGetBlock(wgrad)))
      continue;
    bool same = true;
    for (int i = 1; i < 5 && same; ++i)
      same = mlirValueEqual(mlirOperationGetOperand(user, i), mlirOperationGetOperand(wgrad, i));
    const char* attrs[] = {"parallel", "sequence_parallel", "mesh", "axes"};
    for (int i = 0; i < 4 && same; ++i) same = tpc__same_attr(user, wgrad, attrs[i]);
    if (same) dgrad = user;
  }
  if (mlirOperationIsNull(dgrad)) return false;
  MlirOperation first = mlirOperationIsBeforeInBlock(dgrad, wgrad) ? dgrad : wgrad;
  MlirContext ctx = mlirOperationGetContext(wgrad);
  MlirOperationState st = mlirOperationStateGet(tpc_ref(TPC_OP_NAME_CROSS_ENTROPY_GRAD), mlirOperationGetLocation(dgrad));
  MlirValue operands[5];
  for (int i = 0; i < 5; ++i) operands[i] = mlirOperationGetOperand(dgrad, i);
  MlirValue dx = mlirOperationGetResult(dgrad, 0), dw = mlirOperationGetResult(wgrad, 0);
  MlirType results[2] = {mlirValueGetType(dx), mlirValueGetType(dw)};
  MlirNamedAttribute attrs[8];
  intptr_t n = 0;
  const char* carried[] = {"parallel", "sequence_parallel", "partial", "chunks", "mesh", "axes"};
  for (int i = 0; i < 6; ++i) {
    MlirAttribute a = mlirOperationGetAttributeByName(dgrad, tpc_ref(carried[i]));
    if (!mlirAttributeIsNull(a)) attrs[n++] = tpc_named_attr(ctx, carried[i], a);
  }
  MlirAttribute tc = mlirOperationGetAttributeByName(wgrad, tpc_ref("chunks"));
  if (!mlirAttributeIsNull(tc)) attrs[n++] = tpc_named_attr(ctx, "token_chunks", tc);
  mlirOperationStateAddOperands(&st, 5, operands);
  mlirOperationStateAddResults(&st, 2, results);
  mlirOperationStateAddAttributes(&st, n, attrs);
  MlirOperation fused = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(first), first, fused);
  mlirValueReplaceAllUsesOfWith(dx, mlirOperationGetResult(fused, 0));
  mlirValueReplaceAllUsesOfWith(dw, mlirOperationGetResult(fused, 1));
  mlirOperationDestroy(dgrad);
  mlirOperationDestroy(wgrad);
  return true;
}

static bool tpc__is_ce_wgrad(int kind) { return kind == TPC_OP_CROSS_ENTROPY_WGRAD; }
static bool tpc__is_ce_forward(int kind) { return kind == TPC_OP_CROSS_ENTROPY; }

// |op| has no mesh axes (absent or an empty array) and is not partial.
static bool tpc__whole_vocab(MlirOperation op) {
  MlirAttribute axes = mlirOperationGetAttributeByName(op, tpc_ref("axes"));
  MlirAttribute partial = mlirOperationGetAttributeByName(op, tpc_ref("partial"));
  return (mlirAttributeIsNull(axes) || (mlirAttributeIsAArray(axes) && mlirArrayAttrGetNumElements(axes) == 0)) &&
         (mlirAttributeIsNull(partial) || (mlirAttributeIsABool(partial) && !mlirBoolAttrGetValue(partial)));
}

// Rewrites the loss |fwd| (tp.cross_entropy) and a tp.cross_entropy_grad of its operands and lse
// into one tp.cross_entropy_with_grad at |fwd|'s place (the rule in the header). Returns whether
// it did.
static bool tpc__fuse_cross_entropy_forward(MlirOperation fwd) {
  if (mlirOperationGetNumOperands(fwd) != 3 || mlirOperationGetNumResults(fwd) != 2) return false;
  MlirValue lse = mlirOperationGetResult(fwd, 1);
  MlirOperation grad = {NULL};
  for (MlirOpOperand use = mlirValueGetFirstUse(lse); !mlirOpOperandIsNull(use) && mlirOperationIsNull(grad);
       use = mlirOpOperandGetNextUse(use)) {
    MlirOperation user = mlirOpOperandGetOwner(use);
    if (tpc_op_get_kind(user) != TPC_OP_CROSS_ENTROPY_GRAD || mlirOpOperandGetOperandNumber(use) != 3 ||
        mlirOperationGetNumOperands(user) != 5 || mlirOperationGetNumResults(user) != 2 ||
        !mlirBlockEqual(mlirOperationGetBlock(user), mlirOperationGetBlock(fwd)) || !tpc__whole_vocab(user) ||
        !tpc__defined_before(mlirOperationGetOperand(user, 4), fwd))
      continue;
    bool same = tpc__same_attr(user, fwd, "parallel") && tpc__same_attr(user, fwd, "sequence_parallel");
    for (int i = 0; i < 3 && same; ++i) same = mlirValueEqual(mlirOperationGetOperand(user, i), mlirOperationGetOperand(fwd, i));
    if (same) grad = user;
  }
  if (mlirOperationIsNull(grad)) return false;
  MlirContext ctx = mlirOperationGetContext(fwd);
  MlirOperationState st =
      mlirOperationStateGet(tpc_ref(TPC_OP_NAME_CROSS_ENTROPY_WITH_GRAD), mlirOperationGetLocation(fwd));
  MlirValue operands[4] = {mlirOperationGetOperand(fwd, 0), mlirOperationGetOperand(fwd, 1),
                           mlirOperationGetOperand(fwd, 2), mlirOperationGetOperand(grad, 4)};
  MlirValue olds[4] = {mlirOperationGetResult(fwd, 0), lse, mlirOperationGetResult(grad, 0),
                       mlirOperationGetResult(grad, 1)};
  MlirType results[4];
  for (int i = 0; i < 4; ++i) results[i] = mlirValueGetType(olds[i]);
  MlirNamedAttribute attrs[4];
  intptr_t n = 0;
  const char* carried[] = {"parallel", "sequence_parallel", "chunks", "token_chunks"};
  for (int i = 0; i < 4; ++i) {
    MlirAttribute a = mlirOperationGetAttributeByName(i < 2 ? fwd : grad, tpc_ref(carried[i]));
    if (!mlirAttributeIsNull(a)) attrs[n++] = tpc_named_attr(ctx, carried[i], a);
  }
  mlirOperationStateAddOperands(&st, 4, operands);
  mlirOperationStateAddResults(&st, 4, results);
  mlirOperationStateAddAttributes(&st, n, attrs);
  MlirOperation fused = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(fwd), fwd, fused);
  for (int i = 0; i < 4; ++i) mlirValueReplaceAllUsesOfWith(olds[i], mlirOperationGetResult(fused, i));
  mlirOperationDestroy(grad);
  mlirOperationDestroy(fwd);
  return true;
}

// The logits of the head: a tp.linear(x, w) in |before|'s block and before it, without bias, of
// the module-wide chunks (no chunks of its own), not partial nor sequence-parallel, whose result
// has x's element type (tp.cross_entropy's logits are rounded to x's type); else a null value.
static MlirValue tpc__head_logits(MlirValue x, MlirValue w, MlirOperation before) {
  for (MlirOpOperand use = mlirValueGetFirstUse(x); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
    MlirOperation lin = mlirOpOperandGetOwner(use);
    if (tpc_op_get_kind(lin) != TPC_OP_LINEAR || mlirOpOperandGetOperandNumber(use) != 0 ||
        mlirOperationGetNumOperands(lin) != 2 || mlirOperationGetNumResults(lin) != 1 ||
        !mlirValueEqual(mlirOperationGetOperand(lin, 1), w) ||
        !mlirBlockEqual(mlirOperationGetBlock(lin), mlirOperationGetBlock(before)) ||
        !mlirOperationIsBeforeInBlock(lin, before) || tpc_linear_get_chunks(lin) != 0 || tpc_linear_get_partial(lin) ||
        tpc_linear_get_sequence_parallel(lin))
      continue;
    MlirValue z = mlirOperationGetResult(lin, 0);
    MlirType zt = mlirValueGetType(z), xt = mlirValueGetType(x);
    if (tpc__is_2d(zt) && tpc__is_2d(xt) && mlirTypeEqual(mlirShapedTypeGetElementType(zt), mlirShapedTypeGetElementType(xt)))
      return z;
  }
  return (MlirValue){NULL};
}

// The all-gather of |v| along dim 1 in one block per rank over |like|'s mesh and axes (a
// vocabulary shard's rows in rank order), in |before|'s block and before it; else a null value.
static MlirValue tpc__vocab_gather(MlirValue v, MlirOperation like, MlirOperation before) {
  for (MlirOpOperand use = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
    MlirOperation g = mlirOpOperandGetOwner(use);
    if (tpc_op_get_kind(g) == TPC_OP_ALL_GATHER && tpc_all_gather_get_dim(g) == 1 && tpc_all_gather_get_blocks(g) == 1 &&
        tpc__same_attr(g, like, "mesh") && tpc__same_attr(g, like, "axes") &&
        mlirBlockEqual(mlirOperationGetBlock(g), mlirOperationGetBlock(before)) && mlirOperationIsBeforeInBlock(g, before))
      return mlirOperationGetResult(g, 0);
  }
  return (MlirValue){NULL};
}

// Replaces |op|'s two results (loss, lse) with tp.cross_entropy_logits(z, targets) at its place
// and erases |op|.
static void tpc__loss_of_logits(MlirOperation op, MlirValue z, MlirValue targets) {
  MlirOperationState st =
      mlirOperationStateGet(tpc_ref(TPC_OP_NAME_CROSS_ENTROPY_LOGITS), mlirOperationGetLocation(op));
  MlirValue operands[2] = {z, targets};
  MlirType results[2] = {mlirValueGetType(mlirOperationGetResult(op, 0)), mlirValueGetType(mlirOperationGetResult(op, 1))};
  mlirOperationStateAddOperands(&st, 2, operands);
  mlirOperationStateAddResults(&st, 2, results);
  MlirOperation fused = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, fused);
  for (int i = 0; i < 2; ++i) mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, i), mlirOperationGetResult(fused, i));
  mlirOperationDestroy(op);
}

// The loss of logits the module computes anyway (the rule in the header): a whole-vocabulary
// tp.cross_entropy(x, w, t) with a head tp.linear(x, w) before it, or a vocabulary shard's
// tp.cross_entropy_combine(all_gather(tp.cross_entropy_stats(x, w, t)), t) with the gathered
// logits all_gather(tp.linear(x, w)) before it, becomes tp.cross_entropy_logits(those logits, t).
// Returns whether it did.
static bool tpc__fuse_loss_of_logits(MlirOperation op) {
  if (mlirOperationGetNumResults(op) != 2) return false;
  if (tpc_op_get_kind(op) == TPC_OP_CROSS_ENTROPY) {
    if (mlirOperationGetNumOperands(op) != 3 || tpc_cross_entropy_get_sequence_parallel(op)) return false;
    MlirValue z = tpc__head_logits(tpc_cross_entropy_get_x(op), tpc_cross_entropy_get_w(op), op);
    if (mlirValueIsNull(z)) return false;
    tpc__loss_of_logits(op, z, tpc_cross_entropy_get_targets(op));
    return true;
  }
  if (mlirOperationGetNumOperands(op) != 2) return false;
  MlirValue gathered = tpc_cross_entropy_combine_get_stats(op), targets = tpc_cross_entropy_combine_get_targets(op);
  if (mlirValueIsABlockArgument(gathered)) return false;
  MlirOperation g = mlirOpResultGetOwner(gathered);
  if (tpc_op_get_kind(g) != TPC_OP_ALL_GATHER || tpc_all_gather_get_dim(g) != 1 || tpc_all_gather_get_blocks(g) != 1 ||
      mlirValueIsABlockArgument(tpc_all_gather_get_input(g)))
    return false;
  MlirOperation stats = mlirOpResultGetOwner(tpc_all_gather_get_input(g));
  if (tpc_op_get_kind(stats) != TPC_OP_CROSS_ENTROPY_STATS || mlirOperationGetNumOperands(stats) != 3 ||
      !mlirValueEqual(tpc_cross_entropy_stats_get_targets(stats), targets) || !tpc__same_attr(g, stats, "mesh") ||
      !tpc__same_attr(g, stats, "axes"))
    return false;
  MlirValue z = tpc__head_logits(tpc_cross_entropy_stats_get_x(stats), tpc_cross_entropy_stats_get_w(stats), op);
  MlirValue whole = mlirValueIsNull(z) ? z : tpc__vocab_gather(z, stats, op);
  if (mlirValueIsNull(whole)) return false;
  tpc__loss_of_logits(op, whole, targets);
  if (mlirOpOperandIsNull(mlirValueGetFirstUse(gathered))) mlirOperationDestroy(g);
  if (mlirOpOperandIsNull(mlirValueGetFirstUse(tpc_cross_entropy_stats_get_stats(stats)))) mlirOperationDestroy(stats);
  return true;
}

// The producer |p| of an add's operand that can take the add's other operand |other| as its acc:
// a tp.linear_dgrad or tp.embedding_grad (not partial) or the dx of a tp.rmsnorm_grad, without an
// acc yet, whose result
// is used only by the add, of the add's type, with |other| defined before |p| in its block.
static bool tpc__takes_acc(MlirValue v, MlirValue other, MlirOperation add) {
  if (mlirValueIsABlockArgument(v)) return false;
  MlirOperation p = mlirOpResultGetOwner(v);
  int kind = tpc_op_get_kind(p);
  if (kind == TPC_OP_LINEAR_DGRAD) {
    if (tpc_linear_dgrad_get_partial(p) || !mlirValueIsNull(tpc_linear_dgrad_get_acc(p))) return false;
  } else if (kind == TPC_OP_RMSNORM_GRAD) {
    if (!mlirValueIsNull(tpc_rmsnorm_grad_get_acc(p)) || !mlirValueEqual(v, tpc_rmsnorm_grad_get_dx(p))) return false;
  } else if (kind == TPC_OP_EMBEDDING_GRAD) {
    if (tpc_embedding_grad_get_partial(p) || !mlirValueIsNull(tpc_embedding_grad_get_acc(p))) return false;
  } else {
    return false;
  }
  MlirType t = mlirValueGetType(mlirOperationGetResult(add, 0));
  return mlirOperationEqual(tpc_only_user(v), add) && mlirTypeEqual(mlirValueGetType(v), t) &&
         mlirTypeEqual(mlirValueGetType(other), t) && tpc__defined_before(other, p) &&
         mlirBlockEqual(mlirOperationGetBlock(p), mlirOperationGetBlock(add));
}

// Rewrites |add| = tp.add(a, b) whose operand is a gradient that can accumulate the other
// (tpc__takes_acc) into that gradient op with acc = the other operand, at the gradient's place:
// the add's bits in exact and invariant numerics (the gradient is rounded first, then added).
// The later-defined operand is tried first. Returns whether it did.
static bool tpc__fuse_accumulate(MlirOperation add) {
  if (mlirOperationGetNumOperands(add) != 2 || mlirOperationGetNumResults(add) != 1) return false;
  MlirValue a = mlirOperationGetOperand(add, 0), b = mlirOperationGetOperand(add, 1);
  MlirValue v, other;
  if (tpc__takes_acc(b, a, add)) {
    v = b, other = a;
  } else if (tpc__takes_acc(a, b, add)) {
    v = a, other = b;
  } else {
    return false;
  }
  MlirOperation p = mlirOpResultGetOwner(v);
  intptr_t nin = mlirOperationGetNumOperands(p), nout = mlirOperationGetNumResults(p);
  MlirValue operands[4];
  MlirType results[2];
  if (nin > 3 || nout > 2) return false;
  for (intptr_t i = 0; i < nin; ++i) operands[i] = mlirOperationGetOperand(p, i);
  operands[nin] = other;
  for (intptr_t i = 0; i < nout; ++i) results[i] = mlirValueGetType(mlirOperationGetResult(p, i));
  MlirOperationState st = mlirOperationStateGet(mlirIdentifierStr(mlirOperationGetName(p)), mlirOperationGetLocation(p));
  mlirOperationStateAddOperands(&st, nin + 1, operands);
  mlirOperationStateAddResults(&st, nout, results);
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(p); ++i) {
    MlirNamedAttribute na = mlirOperationGetAttribute(p, i);
    mlirOperationStateAddAttributes(&st, 1, &na);
  }
  MlirOperation fused = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(p), p, fused);
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(add, 0), mlirOperationGetResult(fused, 0));
  mlirOperationDestroy(add);
  for (intptr_t i = 0; i < nout; ++i) mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(p, i), mlirOperationGetResult(fused, i));
  mlirOperationDestroy(p);
  return true;
}

// Rewrites |add| = tp.add(a, b) whose result feeds a tp.rmsnorm (the first in its block), with
// the norm's gamma defined before the add, into one tp.add_rmsnorm(a, b, gamma) at the add's
// place (the rule in the header): the norm's result becomes normed, the add's other uses take sum.
// Returns whether it did.
static bool tpc__fuse_add_norm(MlirOperation add) {
  if (mlirOperationGetNumOperands(add) != 2 || mlirOperationGetNumResults(add) != 1) return false;
  MlirValue a = mlirOperationGetOperand(add, 0), b = mlirOperationGetOperand(add, 1), sum = mlirOperationGetResult(add, 0);
  if (!tpc__is_2d(mlirValueGetType(a)) || !mlirTypeEqual(mlirValueGetType(a), mlirValueGetType(b)) ||
      !mlirTypeEqual(mlirValueGetType(a), mlirValueGetType(sum)))
    return false;
  MlirOperation norm = tpc__norm_of(sum, add);
  if (mlirOperationIsNull(norm) || !tpc__defined_before(tpc_rmsnorm_get_gamma(norm), add)) return false;
  MlirContext ctx = mlirOperationGetContext(add);
  MlirOperationState st = mlirOperationStateGet(tpc_ref(TPC_OP_NAME_ADD_RMSNORM), mlirOperationGetLocation(add));
  MlirValue operands[3] = {a, b, tpc_rmsnorm_get_gamma(norm)};
  MlirType results[2] = {mlirValueGetType(mlirOperationGetResult(norm, 0)), mlirValueGetType(sum)};
  MlirNamedAttribute eps = tpc_named_attr(ctx, "eps", mlirOperationGetAttributeByName(norm, tpc_ref("eps")));
  mlirOperationStateAddOperands(&st, 3, operands);
  mlirOperationStateAddResults(&st, 2, results);
  mlirOperationStateAddAttributes(&st, 1, &eps);
  MlirOperation fused = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(add), add, fused);
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(norm, 0), mlirOperationGetResult(fused, 0));
  mlirOperationDestroy(norm);
  mlirValueReplaceAllUsesOfWith(sum, mlirOperationGetResult(fused, 1));
  mlirOperationDestroy(add);
  return true;
}

static bool tpc__is_add(int kind) { return kind == TPC_OP_ADD; }
static bool tpc__is_loss(int kind) { return kind == TPC_OP_CROSS_ENTROPY || kind == TPC_OP_CROSS_ENTROPY_COMBINE; }

// Calls |rewrite| on every op of |module| whose kind |pick| accepts, listed first (a rewrite
// erases ops). False when the list could not be allocated.
static bool tpc__rewrite_each(MlirOperation module, bool (*pick)(int), bool (*rewrite)(MlirOperation)) {
  intptr_t count = 0;
  MlirOperation* ops = tpc_collect_ops(module, pick, &count);
  if (count < 0) return false;
  for (intptr_t i = 0; i < count; ++i) rewrite(ops[i]);
  free(ops);
  return true;
}

static MlirLogicalResult tpc__fuse_run(MlirOperation module, void* options) {
  (void)options;
  MlirAttribute numerics = mlirOperationGetAttributeByName(module, tpc_ref(TPC_MODULE_ATTR_NUMERICS));
  bool round_sum = !mlirAttributeIsNull(numerics) && mlirAttributeIsAString(numerics) &&
                   tpc_numerics_parse(mlirStringAttrGetValue(numerics)) != TPC_NUMERICS_FAST;
  intptr_t count = 0;
  MlirOperation* colls = tpc_collect_ops(module, tpc__is_sum_collective, &count);
  if (count < 0) {
    mlirEmitError(mlirOperationGetLocation(module), "tp-fuse: out of host memory");
    return mlirLogicalResultFailure();
  }
  // Each rewrite erases only its own collective, add and norm: the other listed collectives stay.
  for (intptr_t i = 0; i < count; ++i) tpc__fuse(colls[i], tpc_op_get_kind(colls[i]) == TPC_OP_REDUCE_SCATTER, round_sum);
  free(colls);
  // Each rewrite erases only its own ops (a wgrad and a dgrad; a loss and its gradient): the
  // other listed ops stay.
  if (!tpc__rewrite_each(module, tpc__is_ce_wgrad, tpc__fuse_cross_entropy) ||
      !tpc__rewrite_each(module, tpc__is_ce_forward, tpc__fuse_cross_entropy_forward) ||
      !tpc__rewrite_each(module, tpc__is_loss, tpc__fuse_loss_of_logits) ||
      !tpc__rewrite_each(module, tpc__is_add, tpc__fuse_accumulate) ||
      !tpc__rewrite_each(module, tpc__is_add, tpc__fuse_add_norm)) {
    mlirEmitError(mlirOperationGetLocation(module), "tp-fuse: out of host memory");
    return mlirLogicalResultFailure();
  }
  return mlirLogicalResultSuccess();
}

static tpc_pass_info_t tpc__fuse_info = {
    .argument = "tp-fuse",
    .description = "Fuse all-reduce (or token reduce-scatter) + residual add + RMSNorm into one op (the chain's bits outside fast numerics), the LM head's loss and gradients into one, and gradient sums into the gradient ops' acc",
    .run = tpc__fuse_run,
};

MlirPass tpc_create_fuse_pass(void) { return tpc_pass_create(&tpc__fuse_info, NULL); }
