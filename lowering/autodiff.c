// tp-autodiff: turns every function into its joint training step: the forward ops, then the
// backward ops from a cotangent argument per result, returning the results and the gradients.
//
//   IN:  func.func @mlp(%x, %gamma, %w1, %w2) -> (%y)
//   OUT: func.func @mlp(%x, %gamma, %w1, %w2, %y_grad) -> (%y, %x_grad, %gamma_grad, %w1_grad, %w2_grad)
//        forward ops as before, then in reverse order each op's gradient rule:
//          tp.add        -> the cotangent flows to both operands
//          tp.mul        -> two tp.mul
//          tp.linear     -> tp.linear_dgrad, tp.linear_wgrad (+ tp.bias_grad)
//          tp.grouped_linear -> tp.grouped_linear_dgrad, tp.grouped_linear_wgrad
//          tp.glu        -> tp.glu_grad;  tp.rmsnorm / tp.layernorm -> their _grad ops
//          tp.moe_unpermute / tp.moe_permute / tp.moe_route -> their _grad ops
// Every float argument gets a gradient unless its argument attributes say `tp.grad = false`.
// Gradients of weights (and norm parameters) are f32, the precision Megatron-LM keeps in
// main_grad; activation gradients keep the activation's type. A value used several times sums
// its gradient contributions with tp.add in reverse program order, so the result is
// deterministic. The backward ops repeat the forward op's `parallel` / `sequence_parallel`, so
// tp-shard partitions the training step like the forward. Ops without a gradient rule
// (collectives, quantization, fused ops) are refused at the op.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "autodiff_impl.h"
#include "passes.h"
#include "text_buffer.h"
#include "tpc_dialect.h"

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

// The name of argument or result |i| for messages: its tp.name, else <fallback><i>.
static void tpc__slot_name(MlirOperation func, bool result, intptr_t i, const char* fallback, char* buf,
                           size_t size) {
  MlirStringRef s = tpc_slot_tp_name(func, result, i);
  if (s.data)
    snprintf(buf, size, "%.*s", (int)s.length, s.data);
  else
    snprintf(buf, size, "%s%ld", fallback, (long)i);
}

// Appends `tp.name = "<name>_grad"` for argument or result |i| (its tp.name, else <fallback><i>),
// the name quoted and escaped whatever bytes it holds.
static void tpc__print_grad_name(tpc_text_t* out, MlirOperation func, bool result, intptr_t i,
                                 const char* fallback) {
  MlirStringRef name = tpc_slot_tp_name(func, result, i);
  tpc_text_printf(out, "%s = \"", TPC_ARG_ATTR_NAME);
  if (name.data)
    tpc_text_append_mlir_escaped(out, name.data, name.length);
  else
    tpc_text_printf(out, "%s%ld", fallback, (long)i);
  tpc_text_printf(out, "_grad\"");
}

// True when every use of |v| is a rotary table (tp.rope's cos or sin): positions, not parameters.
static bool tpc__only_rope_table(MlirValue v) {
  MlirOpOperand u = mlirValueGetFirstUse(v);
  if (mlirOpOperandIsNull(u)) return false;
  for (; !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    unsigned slot = mlirOpOperandGetOperandNumber(u);
    if (!tpc_is_rope(mlirOpOperandGetOwner(u)) || (slot != TPC_ROPE_SLOT_COS && slot != TPC_ROPE_SLOT_SIN))
      return false;
  }
  return true;
}

static bool tpc__wants_grad(MlirOperation func, intptr_t i, MlirType t) {
  MlirType e = mlirShapedTypeGetElementType(t);
  if (!(mlirTypeIsABF16(e) || mlirTypeIsAF16(e) || mlirTypeIsAF32(e))) return false;
  // cos and sin tables get no gradient unless asked for with tp.grad = true.
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  bool table = !mlirBlockIsNull(body) && i < mlirBlockGetNumArguments(body) &&
               tpc__only_rope_table(mlirBlockGetArgument(body, i));
  MlirAttribute g = tpc_slot_attr(func, false, i, TPC_ARG_ATTR_GRAD);
  if (mlirAttributeIsNull(g) || !mlirAttributeIsABool(g)) return !table;
  return mlirBoolAttrGetValue(g);
}

// Appends ", tp.shard = ..." when |d| (an argument's or result's attributes) has one: a gradient
// or cotangent is laid out like its value.
static void tpc__print_shard(tpc_text_t* t, MlirAttribute d) {
  MlirAttribute sh = !mlirAttributeIsNull(d) && mlirAttributeIsADictionary(d)
                         ? mlirDictionaryAttrGetElementByName(d, mlirStringRefCreateFromCString(TPC_ARG_ATTR_SHARD))
                         : (MlirAttribute){NULL};
  if (mlirAttributeIsNull(sh)) return;
  tpc_text_printf(t, ", " TPC_ARG_ATTR_SHARD " = ");
  mlirAttributePrint(sh, tpc_text_append_ref, t);
}

static void tpc__print_dict(tpc_text_t* t, MlirAttribute d) {
  if (mlirAttributeIsNull(d) || !mlirAttributeIsADictionary(d) || mlirDictionaryAttrGetNumElements(d) == 0) return;
  tpc_text_printf(t, " ");
  mlirAttributePrint(d, tpc_text_append_ref, t);
}

// Emits forward op |op| again with its operands' current names; |base| receives its result name
// ("<base>" for one result, "<base>#i" for result i of several). A tp.attention also returns its
// softmax statistics (lse; added when the op has no lse result), whose name goes to |stats| ("":
// none), so that its gradient takes them instead of recomputing them.
static MlirLogicalResult tpc__ad_forward(tpc__ad_t* A, MlirOperation op, char* base, size_t size, char* stats,
                                         size_t stats_size) {
  A->loc_op = op;
  const char* operands[16];
  MlirType operand_types[16], result_types[8];
  int nin = (int)mlirOperationGetNumOperands(op), nout = (int)mlirOperationGetNumResults(op);
  if (nin > 16 || nout > 8) return mlirLogicalResultFailure();
  for (int i = 0; i < nin; ++i) {
    operands[i] = tpc__ad_name(A, mlirOperationGetOperand(op, i));
    operand_types[i] = mlirValueGetType(mlirOperationGetOperand(op, i));
  }
  for (int i = 0; i < nout; ++i) result_types[i] = mlirValueGetType(mlirOperationGetResult(op, i));
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  char opname[64];
  snprintf(opname, sizeof opname, "%.*s", (int)n.length, n.data);
  bool add_stats = tpc_op_get_kind(op) == TPC_OP_ATTENTION && nout == 1;
  if (add_stats) result_types[1] = tpc__ad_lse_type(A, op);
  tpc__ad_emit(A, opname, operands, operand_types, nin, result_types, nout + add_stats, op, NULL, NULL, base, size);
  stats[0] = '\0';
  if (tpc_op_get_kind(op) == TPC_OP_ATTENTION) {
    snprintf(stats, stats_size, "%s#1", base);
    // y's name: result 0 of the two.
    if (add_stats) snprintf(base + strlen(base), size - strlen(base), "#0");
  }
  return mlirLogicalResultSuccess();
}

// The name of result |i| of an op with |nout| results whose base name is |base| ("<base>", or
// "<base>#i" of several; tpc__ad_forward admits at most 8).
static void tpc__ad_result_name(const char* base, int nout, int i, char* out, size_t size) {
  if (nout == 1)
    snprintf(out, size, "%s", base);
  else
    snprintf(out, size, "%s#%d", base, i & 7);
}

// The op's tp.layer (recomputation), or -1.
static int64_t tpc__ad_layer(MlirOperation op) {
  MlirAttribute l = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(TPC_OP_ATTR_LAYER));
  return !mlirAttributeIsNull(l) && mlirAttributeIsAInteger(l) && !mlirAttributeIsABool(l) ? mlirIntegerAttrGetValueInt(l)
                                                                                           : -1;
}

// Activation recomputation: the layer that ends at backward position |k| (ops[lo..k], one
// tp.layer value) is emitted again and its results renamed to the new values, so that its
// gradients read those and the forward's own activations of the layer die after the forward.
// The original names go to |saved| (one per result, in order) for tpc__ad_unrecompute.
typedef struct {
  int lo, hi;           // the recomputed ops, or lo > hi
  char (*saved)[48];    // the forward's names of their results
} tpc__ad_recomputed_t;

static void tpc__ad_unrecompute(tpc__ad_t* A, MlirOperation* ops, tpc__ad_recomputed_t* rc) {
  int r = 0;
  for (int i = rc->lo; i <= rc->hi; ++i)
    for (intptr_t j = 0; j < mlirOperationGetNumResults(ops[i]); ++j) {
      tpc__adval_t* a = tpc__ad_find(A, mlirOperationGetResult(ops[i], j));
      if (a) snprintf(a->name, sizeof a->name, "%s", rc->saved[r]);
      ++r;
    }
  free(rc->saved);
  rc->saved = NULL;
  rc->lo = 0, rc->hi = -1;
}

static MlirLogicalResult tpc__ad_recompute(tpc__ad_t* A, MlirOperation* ops, int k, tpc__ad_recomputed_t* rc) {
  int64_t layer = tpc__ad_layer(ops[k]);
  int lo = k, results = 0;
  while (lo > 0 && tpc__ad_layer(ops[lo - 1]) == layer) --lo;
  for (int i = lo; i <= k; ++i) results += (int)mlirOperationGetNumResults(ops[i]);
  rc->saved = calloc((size_t)results + 1, sizeof *rc->saved);
  if (!rc->saved) {
    mlirEmitError(mlirOperationGetLocation(ops[k]), "tp-autodiff: out of memory recomputing a layer");
    return mlirLogicalResultFailure();
  }
  rc->lo = lo, rc->hi = k;
  int r = 0;
  for (int i = lo; i <= k; ++i) {
    char base[40], stats[48];
    if (mlirLogicalResultIsFailure(tpc__ad_forward(A, ops[i], base, sizeof base, stats, sizeof stats)))
      return mlirLogicalResultFailure();
    intptr_t nout = mlirOperationGetNumResults(ops[i]);
    for (intptr_t j = 0; j < nout; ++j) {
      tpc__adval_t* a = tpc__ad_find(A, mlirOperationGetResult(ops[i], j));
      snprintf(rc->saved[r++], sizeof rc->saved[0], "%s", a ? a->name : "");
      if (a) tpc__ad_result_name(base, (int)nout, (int)j, a->name, sizeof a->name);
      // The gradient reads the recomputed statistics.
      if (a && j == 0 && stats[0]) snprintf(a->stats, sizeof a->stats, "%s", stats);
    }
  }
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__ad_func_ops(tpc__ad_t* A, tpc_text_t* out, MlirOperation* ops) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(A->func, 0));
  intptr_t nargs = mlirBlockGetNumArguments(body);
  for (intptr_t i = 0; i < nargs; ++i) {
    char n[32];
    snprintf(n, sizeof n, "%%a%ld", (long)i);
    tpc__adval_t* a = tpc__ad_add(A, mlirBlockGetArgument(body, i), n);
    // A per-rank argument's tokens are sharded over the axes its tp.shard lists for dim 0.
    MlirAttribute sh = tpc_slot_attr(A->func, false, i, TPC_ARG_ATTR_SHARD);
    MlirAttribute axes = !mlirAttributeIsNull(sh) && mlirAttributeIsADictionary(sh)
                             ? mlirDictionaryAttrGetElementByName(sh, mlirStringRefCreateFromCString("axes"))
                             : (MlirAttribute){NULL};
    if (a && !mlirAttributeIsNull(axes) && mlirAttributeIsAArray(axes) && mlirArrayAttrGetNumElements(axes) > 0) {
      MlirAttribute dim0 = mlirArrayAttrGetElement(axes, 0);
      for (intptr_t k = 0; mlirAttributeIsAArray(dim0) && k < mlirArrayAttrGetNumElements(dim0); ++k) {
        MlirStringRef an = mlirStringAttrGetValue(mlirArrayAttrGetElement(dim0, k));
        for (int m = 0; m < A->num_axes; ++m)
          if (mlirStringRefEqual(an, mlirStringRefCreateFromCString(A->axes[m]))) a->tokens |= 1u << m;
      }
    }
  }
  MlirOperation ret = {NULL};
  int nops = 0;  // ops: the caller's table of cap_vals entries (at least one per op)
  // Forward: the ops as they were, with fresh names.
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef opn = mlirIdentifierStr(mlirOperationGetName(op));
    if (mlirStringRefEqual(opn, mlirStringRefCreateFromCString("func.return"))) {
      ret = op;
      break;
    }
    if (tpc_op_get_kind(op) == TPC_OP_UNKNOWN || nops == A->cap_vals) {
      mlirEmitError(mlirOperationGetLocation(op), "tp-autodiff: only tp ops can be differentiated");
      return mlirLogicalResultFailure();
    }
    ops[nops++] = op;
    char base[40], name[48], stats[48];
    if (mlirLogicalResultIsFailure(tpc__ad_forward(A, op, base, sizeof base, stats, sizeof stats)))
      return mlirLogicalResultFailure();
    int nin = (int)mlirOperationGetNumOperands(op), nout = (int)mlirOperationGetNumResults(op);
    // Token sharding flows through ops; the sequence-parallel collectives change it.
    uint32_t tokens = nin ? tpc__ad_tokens(A, mlirOperationGetOperand(op, 0)) : 0u;
    int kind = tpc_op_get_kind(op);
    if (kind == TPC_OP_ALL_GATHER) tokens &= ~tpc__ad_axes_mask(A, op);
    if (kind == TPC_OP_REDUCE_SCATTER) tokens |= tpc__ad_axes_mask(A, op);
    if (kind == TPC_OP_ALL_TO_ALL) tokens &= ~tpc__ad_axes_mask(A, op);
    if (kind == TPC_OP_MOE_UNBUCKET) tokens = tpc__ad_tokens(A, mlirOperationGetOperand(op, 1));
    for (int i = 0; i < nout; ++i) {
      tpc__ad_result_name(base, nout, i, name, sizeof name);
      tpc__adval_t* r = tpc__ad_add(A, mlirOperationGetResult(op, i), name);
      if (r) r->tokens = tokens;
      if (r && i == 0) snprintf(r->stats, sizeof r->stats, "%s", stats);
    }
  }
  if (mlirOperationIsNull(ret)) {
    mlirEmitError(mlirOperationGetLocation(A->func), "tp-autodiff: the function has no func.return");
    return mlirLogicalResultFailure();
  }
  // Seed: one cotangent argument per result (its additions carry the return's location).
  A->loc_op = ret;
  intptr_t nres = mlirOperationGetNumOperands(ret);
  if (nres == 0) {
    mlirEmitError(mlirOperationGetLocation(A->func),
                  "tp-autodiff: the function returns nothing, so there is nothing to differentiate: return its "
                  "outputs (or its loss)");
    return mlirLogicalResultFailure();
  }
  for (intptr_t j = 0; j < nres; ++j) {
    char n[32];
    snprintf(n, sizeof n, "%%c%ld", (long)j);
    MlirValue r = mlirOperationGetOperand(ret, j);
    tpc__ad_accumulate(A, r, n, mlirValueGetType(r));
  }
  // Backward, in reverse program order; with tp.recompute, each layer is emitted again first.
  tpc__ad_recomputed_t rc = {0, -1, NULL};
  bool failed = false;
  for (int k = nops - 1; k >= 0 && !failed; --k) {
    if (A->recompute && k < rc.lo) tpc__ad_unrecompute(A, ops, &rc);
    if (A->recompute && rc.lo > rc.hi && tpc__ad_layer(ops[k]) >= 0)
      failed = mlirLogicalResultIsFailure(tpc__ad_recompute(A, ops, k, &rc));
    A->loc_op = ops[k];
    failed = failed || mlirLogicalResultIsFailure(tpc__ad_rule(A, ops[k], tpc_op_get_kind(ops[k])));
  }
  if (rc.lo <= rc.hi) tpc__ad_unrecompute(A, ops, &rc);
  if (failed) return mlirLogicalResultFailure();

  MlirStringRef fname = mlirStringAttrGetValue(mlirOperationGetAttributeByName(A->func, mlirStringRefCreateFromCString("sym_name")));
  tpc_text_printf(out, "  func.func ");
  tpc_text_symbol_ref(out, "", fname);
  tpc_text_printf(out, "(");
  for (intptr_t i = 0; i < nargs; ++i) {
    tpc_text_printf(out, "%s%%a%ld: ", i ? ", " : "", (long)i);
    mlirTypePrint(mlirValueGetType(mlirBlockGetArgument(body, i)), tpc_text_append_ref, out);
    tpc__print_dict(out, tpc_slot_dict(A->func, false, i));
  }
  for (intptr_t j = 0; j < nres; ++j) {
    tpc_text_printf(out, "%s%%c%ld: ", nargs + j ? ", " : "", (long)j);
    mlirTypePrint(mlirValueGetType(mlirOperationGetOperand(ret, j)), tpc_text_append_ref, out);
    tpc_text_printf(out, " {");
    tpc__print_grad_name(out, A->func, true, j, "result");
    tpc_text_printf(out, ", %s = %ld : i64", TPC_ARG_ATTR_COTANGENT, (long)j);
    tpc__print_shard(out, tpc_slot_dict(A->func, true, j));
    tpc_text_printf(out, "}");
  }
  tpc_text_printf(out, ") -> (");
  tpc_text_t rets = {0}, types = {0};
  int nout = 0;
  for (intptr_t j = 0; j < nres; ++j) {
    MlirValue r = mlirOperationGetOperand(ret, j);
    tpc_text_printf(out, "%s", nout ? ", " : "");
    mlirTypePrint(mlirValueGetType(r), tpc_text_append_ref, out);
    tpc__print_dict(out, tpc_slot_dict(A->func, true, j));
    tpc_text_printf(&rets, "%s%s", nout ? ", " : "", tpc__ad_name(A, r));
    tpc_text_printf(&types, "%s", nout ? ", " : "");
    mlirTypePrint(mlirValueGetType(r), tpc_text_append_ref, &types);
    ++nout;
  }
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirValue a = mlirBlockGetArgument(body, i);
    if (!tpc__wants_grad(A->func, i, mlirValueGetType(a))) continue;
    const tpc__adval_t* av = tpc__ad_find(A, a);
    char an[128];
    tpc__slot_name(A->func, false, i, "arg", an, sizeof an);
    if (!av->adjoint[0]) {
      char msg[256];
      snprintf(msg, sizeof msg, "tp-autodiff: argument '%s' does not affect the results, so it has no gradient; mark it "
               "{tp.grad = false}", an);
      mlirEmitError(mlirOperationGetLocation(A->func), msg);
      tpc_text_free(&rets);
      tpc_text_free(&types);
      return mlirLogicalResultFailure();
    }
    // The gradient's type is the one its last contribution produced (f32 for weights).
    MlirType gt = tpc__f32_like(A, a);
    tpc_text_printf(out, ", ");
    // The gradient rules make weight and norm-parameter gradients f32 and keep the type of every
    // other gradient; an argument's gradient type follows from the slots that use it.
    MlirType t = mlirValueGetType(a);
    bool f32 = false;
    for (MlirOpOperand u = mlirValueGetFirstUse(a); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
      MlirOperation user = mlirOpOperandGetOwner(u);
      int kind = tpc_op_get_kind(user);
      unsigned slot = mlirOpOperandGetOperandNumber(u);
      f32 |= (kind == TPC_OP_LINEAR && slot >= 1) || (kind == TPC_OP_GROUPED_LINEAR && slot == 1) ||
             ((kind == TPC_OP_RMSNORM || kind == TPC_OP_LAYERNORM) && slot >= 1) ||
             ((kind == TPC_OP_EMBEDDING || kind == TPC_OP_CROSS_ENTROPY) && slot == 1) ||
             (kind == TPC_OP_ADD && slot == 1 && mlirShapedTypeGetRank(t) == 1 &&
              mlirShapedTypeGetRank(mlirValueGetType(mlirOperationGetOperand(user, 0))) > 1);
    }
    MlirType out_t = f32 ? gt : t;
    mlirTypePrint(out_t, tpc_text_append_ref, out);
    tpc_text_printf(out, " {%s = %ld : i64, ", TPC_RES_ATTR_GRAD_OF, (long)i);
    tpc__print_grad_name(out, A->func, false, i, "arg");
    tpc__print_shard(out, tpc_slot_dict(A->func, false, i));
    tpc_text_printf(out, "}");
    tpc_text_printf(&rets, ", %s", av->adjoint);
    tpc_text_printf(&types, ", ");
    mlirTypePrint(out_t, tpc_text_append_ref, &types);
  }
  tpc_text_printf(out, ") {\n%s    return %s : %s ", A->body.data ? A->body.data : "", rets.data ? rets.data : "",
                  types.data ? types.data : "");
  // The return and the function keep the user's locations, for the diagnostics of later passes.
  mlirLocationPrint(mlirOperationGetLocation(mlirOperationIsNull(ret) ? A->func : ret), tpc_text_append_ref, out);
  tpc_text_printf(out, "\n  } ");
  mlirLocationPrint(mlirOperationGetLocation(A->func), tpc_text_append_ref, out);
  tpc_text_printf(out, "\n");
  tpc_text_free(&rets);
  tpc_text_free(&types);
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__ad_func(tpc__ad_t* A, tpc_text_t* out) {
  MlirOperation* ops = calloc((size_t)A->cap_vals, sizeof *ops);
  if (!ops) {
    mlirEmitError(mlirOperationGetLocation(A->func), "tp-autodiff: out of memory for the function's ops");
    return mlirLogicalResultFailure();
  }
  MlirLogicalResult r = tpc__ad_func_ops(A, out, ops);
  free(ops);
  return r;
}

//===----------------------------------------------------------------------===//
// Pass callbacks
//===----------------------------------------------------------------------===//

// A function whose arguments carry tp.shard is a per-rank program (tp-shard ran first): its
// gradients need the duals of the collectives and the token reductions tp-shard would insert.
static MlirLogicalResult tpc__ad_read_mesh(tpc__ad_t* A, MlirOperation module) {
  MlirAttribute args = mlirOperationGetAttributeByName(A->func, mlirStringRefCreateFromCString("arg_attrs"));
  for (intptr_t i = 0; !mlirAttributeIsNull(args) && i < mlirArrayAttrGetNumElements(args); ++i) {
    MlirAttribute d = mlirArrayAttrGetElement(args, i);
    if (mlirAttributeIsADictionary(d) &&
        !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(d, mlirStringRefCreateFromCString(TPC_ARG_ATTR_SHARD))))
      A->per_rank = true;
  }
  if (!A->per_rank) return mlirLogicalResultSuccess();
  for (MlirOperation o = mlirBlockGetFirstOperation(mlirModuleGetBody(mlirModuleFromOperation(module)));
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!tpc_is_mesh(o)) continue;
    MlirStringRef n = mlirStringAttrGetValue(tpc_mesh_get_sym_name_attr(o));
    A->mesh_name = n;
    MlirAttribute axes = tpc_mesh_get_axes_attr(o), shape = tpc_mesh_get_shape_attr(o);
    A->num_axes = (int)mlirArrayAttrGetNumElements(axes);
    if (A->num_axes > 4) A->num_axes = 4;
    for (int k = 0; k < A->num_axes; ++k) {
      MlirStringRef a = mlirStringAttrGetValue(mlirArrayAttrGetElement(axes, k));
      snprintf(A->axes[k], sizeof A->axes[k], "%.*s", (int)a.length, a.data);
      A->sizes[k] = mlirDenseI64ArrayGetElement(shape, k);
      if (!strcmp(A->axes[k], "tp")) A->tp = k;
    }
    return mlirLogicalResultSuccess();
  }
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__autodiff_run(MlirOperation module, void* options) {
  (void)options;
  tpc__ad_t* A = calloc(1, sizeof *A);
  if (!A) return mlirLogicalResultFailure();
  MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
  tpc_text_t funcs = {0};
  bool ok = true;
  for (MlirOperation o = mlirBlockGetFirstOperation(top); ok && !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(o));
    if (!mlirStringRefEqual(n, mlirStringRefCreateFromCString("func.func")) ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(o, 0))))
      continue;
    memset(A, 0, sizeof *A);
    A->func = o;
    A->ctx = mlirOperationGetContext(module);
    A->tp = -1;
    MlirAttribute rc = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_RECOMPUTE));
    A->recompute = !mlirAttributeIsNull(rc) && mlirAttributeIsABool(rc) && mlirBoolAttrGetValue(rc);
    if (mlirLogicalResultIsFailure(tpc__ad_read_mesh(A, module))) {
      ok = false;
      break;
    }
    A->cap_vals = tpc_func_value_bound(o, 16);
    A->vals = calloc((size_t)A->cap_vals, sizeof *A->vals);
    if (!A->vals) {
      mlirEmitError(mlirOperationGetLocation(o), "tp-autodiff: out of memory for the function's value table");
      ok = false;
      break;
    }
    ok = mlirLogicalResultIsSuccess(tpc__ad_func(A, &funcs));
    tpc_text_free(&A->body);
    free(A->vals);
    A->vals = NULL;
  }
  if (ok) ok = tpc_replace_functions(module, funcs.data, false, "tp-autodiff", "training step");
  tpc_text_free(&funcs);
  free(A);
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

static tpc_pass_info_t tpc__autodiff_info = {
    .argument = "tp-autodiff",
    .description = "Turn every function into its training step: forward, then backward from result cotangents",
    .run = tpc__autodiff_run,
};

MlirPass tpc_create_autodiff_pass(void) { return tpc_pass_create(&tpc__autodiff_info, NULL); }
