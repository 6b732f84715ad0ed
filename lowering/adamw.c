// tp-adamw: appends an AdamW step to a training step (a function tp-autodiff made), so that one
// call computes the loss, the gradients, the global gradient norm and every parameter's update.
//
//   IN:  func.func @lm(%ids, %targets, %emb {tp.name = "emb"}, ..., %loss_grad {tp.cotangent = 0})
//            -> (loss, emb_grad {tp.grad_of = 2}, ...)
//   OUT: func.func @lm(%ids, %targets, %emb, ..., %loss_grad,
//                      %emb.master {tp.name = "emb.master", tp.state_of = 2}, %emb.exp_avg {...},
//                      %emb.exp_avg_sq {...}, ..., %hyper {tp.name = "optimizer.hyper"})
//            -> (loss, emb {tp.next = 2}, emb.master {tp.next = N}, emb.exp_avg {...}, ...,
//                grad_norm)
//        ... the training step as it was ...
//        %a0 = "tp.sumsq"(%emb_grad)          ; the exact sum of squares of every gradient,
//        %a1 = "tp.sumsq"(%g1_grad, %a0)      ; in result order
//        %norm = "tp.global_norm"(%a_last)
//        %p:4 = "tp.adamw"(%emb.master, %emb_grad, %emb.exp_avg, %emb.exp_avg_sq, %hyper, %norm)
//
// Every parameter with a gradient gets an f32 master copy and AdamW's two moments (arguments
// marked `tp.state_of = <its argument>`, laid out like it by tp-shard); the results replace the
// gradients: the new compute weight, master and moments, each marked `tp.next = <the argument it
// becomes at the next step>`, and last the gradient norm. The hyperparameters (learning rate and
// bias corrections of this step, docs/dialect.md "tp.adamw") are one tensor<8xf32> argument, so a
// schedule never recompiles. Run it after tp-autodiff and before tp-shard (pipeline `step`).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "tpc_dialect.h"

// The three optimizer states of a parameter: names end with these.
static const char* const kStates[3] = {"master", "exp_avg", "exp_avg_sq"};

static MlirType tpc__f32_of(MlirType t) {
  intptr_t rank = mlirShapedTypeGetRank(t);
  int64_t dims[8] = {0};
  for (intptr_t i = 0; i < rank && i < 8; ++i) dims[i] = mlirShapedTypeGetDimSize(t, i);
  return mlirRankedTensorTypeGet(rank, dims, mlirF32TypeGet(mlirTypeGetContext(t)), mlirAttributeGetNull());
}

static MlirType tpc__vec(MlirContext ctx, int64_t n, MlirType element) {
  return mlirRankedTensorTypeGet(1, &n, element, mlirAttributeGetNull());
}

static MlirAttribute tpc__str(MlirContext ctx, const char* s) { return mlirStringAttrGet(ctx, tpc_ref(s)); }
static MlirAttribute tpc__i64(MlirContext ctx, int64_t v) {
  return mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), v);
}

// Creates op |name| before |before| and returns it.
static MlirOperation tpc__create(MlirOperation before, const char* name, MlirValue* operands, intptr_t nin,
                                 MlirType* results, intptr_t nout) {
  MlirLocation loc = mlirOperationGetLocation(before);
  MlirOperationState st = mlirOperationStateGet(tpc_ref(name), loc);
  mlirOperationStateAddOperands(&st, nin, operands);
  mlirOperationStateAddResults(&st, nout, results);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before, op);
  return op;
}

// The dictionary {tp.name = "<base>.<suffix>", <key> = <index>}.
static MlirAttribute tpc__state_dict(MlirContext ctx, MlirStringRef base, const char* suffix, const char* key,
                                     int64_t index) {
  char name[512];
  if (suffix)
    snprintf(name, sizeof name, "%.*s.%s", (int)(base.length < 400 ? base.length : 400), base.data, suffix);
  else
    snprintf(name, sizeof name, "%.*s", (int)(base.length < 400 ? base.length : 400), base.data);
  MlirNamedAttribute e[2] = {tpc_named_attr(ctx, TPC_ARG_ATTR_NAME, tpc__str(ctx, name)),
                             tpc_named_attr(ctx, key, tpc__i64(ctx, index))};
  return mlirDictionaryAttrGet(ctx, 2, e);
}

static MlirLogicalResult tpc__adamw_func(MlirOperation func) {
  MlirContext ctx = mlirOperationGetContext(func);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(body)) return mlirLogicalResultSuccess();
  MlirOperation ret = mlirBlockGetTerminator(body);
  intptr_t nargs = mlirBlockGetNumArguments(body), nres = mlirOperationGetNumOperands(ret);
  // The gradients: results marked tp.grad_of.
  intptr_t* of = calloc((size_t)(nres > 0 ? nres : 1), sizeof *of);
  MlirAttribute* arg_dicts = calloc((size_t)(nargs + 3 * nres + 1), sizeof *arg_dicts);
  MlirAttribute* res_dicts = calloc((size_t)(4 * nres + 1), sizeof *res_dicts);
  MlirValue* rets = calloc((size_t)(4 * nres + 1), sizeof *rets);
  if (!of || !arg_dicts || !res_dicts || !rets) {
    free(of), free(arg_dicts), free(res_dicts), free(rets);
    mlirEmitError(mlirOperationGetLocation(func), "tp-adamw: out of host memory");
    return mlirLogicalResultFailure();
  }
  int ngrads = 0;
  for (intptr_t j = 0; j < nres; ++j) {
    MlirAttribute g = tpc_slot_attr(func, true, j, TPC_RES_ATTR_GRAD_OF);
    of[j] = !mlirAttributeIsNull(g) && mlirAttributeIsAInteger(g) ? mlirIntegerAttrGetValueInt(g) : -1;
    ngrads += of[j] >= 0;
  }
  MlirLogicalResult result = mlirLogicalResultSuccess();
  if (ngrads == 0) {
    mlirEmitError(mlirOperationGetLocation(func),
                  "tp-adamw: the function returns no gradients (tp.grad_of); run tp-autodiff before tp-adamw");
    result = mlirLogicalResultFailure();
    goto done;
  }
  MlirLocation loc = mlirOperationGetLocation(func);
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirAttribute d = tpc_slot_dict(func, false, i);
    arg_dicts[i] = mlirAttributeIsNull(d) ? mlirDictionaryAttrGet(ctx, 0, NULL) : d;
  }
  intptr_t na = nargs, nr = 0;
  // The states of every parameter, in result order; then the hyperparameters.
  MlirValue* states = calloc((size_t)(3 * nres + 1), sizeof *states);
  if (!states) {
    result = mlirLogicalResultFailure();
    goto done;
  }
  for (intptr_t j = 0; j < nres; ++j) {
    if (of[j] < 0) continue;
    MlirType pt = mlirValueGetType(mlirBlockGetArgument(body, of[j]));
    MlirStringRef base = tpc_slot_tp_name(func, false, of[j]);
    char fallback[32];
    snprintf(fallback, sizeof fallback, "arg%ld", (long)of[j]);
    if (!base.data) base = tpc_ref(fallback);
    for (int k = 0; k < 3; ++k) {
      states[3 * j + k] = mlirBlockAddArgument(body, tpc__f32_of(pt), loc);
      arg_dicts[na++] = tpc__state_dict(ctx, base, kStates[k], TPC_ARG_ATTR_STATE_OF, of[j]);
    }
  }
  MlirValue hyper = mlirBlockAddArgument(body, tpc__vec(ctx, 8, mlirF32TypeGet(ctx)), loc);
  {
    MlirNamedAttribute e[2] = {tpc_named_attr(ctx, TPC_ARG_ATTR_NAME, tpc__str(ctx, "optimizer.hyper")),
                               tpc_named_attr(ctx, TPC_ARG_ATTR_GRAD, mlirBoolAttrGet(ctx, 0))};
    arg_dicts[na++] = mlirDictionaryAttrGet(ctx, 2, e);
  }
  // The exact sum of squares of every gradient, then the norm.
  MlirType acc_t = tpc__vec(ctx, 21, mlirIntegerTypeGet(ctx, 64));
  MlirValue acc = {NULL};
  for (intptr_t j = 0; j < nres; ++j) {
    if (of[j] < 0) continue;
    MlirValue ins[2] = {mlirOperationGetOperand(ret, j), acc};
    acc = mlirOperationGetResult(tpc__create(ret, TPC_OP_NAME_SUMSQ, ins, mlirValueIsNull(acc) ? 1 : 2, &acc_t, 1), 0);
  }
  MlirType norm_t = tpc__vec(ctx, 1, mlirF32TypeGet(ctx));
  MlirValue norm = mlirOperationGetResult(tpc__create(ret, TPC_OP_NAME_GLOBAL_NORM, &acc, 1, &norm_t, 1), 0);
  // The updates; results: the non-gradient results, then per parameter its weight, master and
  // moments (each the argument it replaces next step), then the norm.
  for (intptr_t j = 0; j < nres; ++j) {
    if (of[j] >= 0) continue;
    rets[nr] = mlirOperationGetOperand(ret, j);
    MlirAttribute d = tpc_slot_dict(func, true, j);
    res_dicts[nr++] = mlirAttributeIsNull(d) ? mlirDictionaryAttrGet(ctx, 0, NULL) : d;
  }
  intptr_t state_arg = nargs;
  for (intptr_t j = 0; j < nres; ++j) {
    if (of[j] < 0) continue;
    MlirType pt = mlirValueGetType(mlirBlockGetArgument(body, of[j])), f = tpc__f32_of(pt);
    MlirValue ins[6] = {states[3 * j], mlirOperationGetOperand(ret, j), states[3 * j + 1], states[3 * j + 2], hyper,
                        norm};
    MlirType outs[4] = {f, f, f, pt};
    MlirOperation u = tpc__create(ret, TPC_OP_NAME_ADAMW, ins, 6, outs, 4);
    MlirStringRef base = tpc_slot_tp_name(func, false, of[j]);
    char fallback[32];
    snprintf(fallback, sizeof fallback, "arg%ld", (long)of[j]);
    if (!base.data) base = tpc_ref(fallback);
    rets[nr] = mlirOperationGetResult(u, 3);
    res_dicts[nr++] = tpc__state_dict(ctx, base, NULL, TPC_RES_ATTR_NEXT, of[j]);
    for (int k = 0; k < 3; ++k) {
      rets[nr] = mlirOperationGetResult(u, k);
      res_dicts[nr++] = tpc__state_dict(ctx, base, kStates[k], TPC_RES_ATTR_NEXT, state_arg++);
    }
  }
  rets[nr] = norm;
  {
    MlirNamedAttribute e[1] = {tpc_named_attr(ctx, TPC_ARG_ATTR_NAME, tpc__str(ctx, "grad_norm"))};
    res_dicts[nr++] = mlirDictionaryAttrGet(ctx, 1, e);
  }
  // The new return and the function's type and slot attributes.
  {
    MlirOperationState st = mlirOperationStateGet(tpc_ref("func.return"), mlirOperationGetLocation(ret));
    mlirOperationStateAddOperands(&st, nr, rets);
    MlirOperation nret = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(body, ret, nret);
    mlirOperationDestroy(ret);
    MlirType* ins_t = calloc((size_t)na, sizeof *ins_t);
    MlirType* outs_t = calloc((size_t)nr, sizeof *outs_t);
    if (!ins_t || !outs_t) {
      free(ins_t), free(outs_t), free(states);
      result = mlirLogicalResultFailure();
      goto done;
    }
    for (intptr_t i = 0; i < na; ++i) ins_t[i] = mlirValueGetType(mlirBlockGetArgument(body, i));
    for (intptr_t j = 0; j < nr; ++j) outs_t[j] = mlirValueGetType(rets[j]);
    mlirOperationSetAttributeByName(func, tpc_ref("function_type"),
                                    mlirTypeAttrGet(mlirFunctionTypeGet(ctx, na, ins_t, nr, outs_t)));
    mlirOperationSetAttributeByName(func, tpc_ref("arg_attrs"), mlirArrayAttrGet(ctx, na, arg_dicts));
    mlirOperationSetAttributeByName(func, tpc_ref("res_attrs"), mlirArrayAttrGet(ctx, nr, res_dicts));
    free(ins_t), free(outs_t);
  }
  free(states);
done:
  free(of), free(arg_dicts), free(res_dicts), free(rets);
  return result;
}

static MlirLogicalResult tpc__adamw_run(MlirOperation module, void* options) {
  (void)options;
  MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
  for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(o)), tpc_ref("func.func"))) continue;
    if (mlirLogicalResultIsFailure(tpc__adamw_func(o))) return mlirLogicalResultFailure();
  }
  return mlirLogicalResultSuccess();
}

static tpc_pass_info_t tpc__adamw_info = {
    .argument = "tp-adamw",
    .description = "Append AdamW to a training step: the exact global gradient norm, clipping and every parameter's update",
    .run = tpc__adamw_run,
};

MlirPass tpc_create_adamw_pass(void) { return tpc_pass_create(&tpc__adamw_info, NULL); }
