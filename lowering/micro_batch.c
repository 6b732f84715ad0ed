// tp-micro-batch: cuts a training step sharded over an "mb" mesh axis (micro-batches) in two, so
// that a driver can accumulate the gradients of k micro-batches before one optimizer update,
// bitwise as if the k micro-batches were k data-parallel ranks.
//
//   IN (after tp-shard and tp-invariant, mesh dp=2,mb=4,tp=2):
//     func.func @lm(%ids {tp.shard = {axes = [["dp", "mb"]], logical = [T]}}, %w1, ..., %w1.master, ...,
//                   %hyper) -> (loss, w1 {tp.next}, w1.master {tp.next}, ..., grad_norm) {
//       ... forward and backward of T / 8 tokens ...
//       %p = "tp.linear_wgrad"(...) {partial = true, chunks = C / 8}          ; f32, this call's tokens
//       %g = "tp.all_reduce"(%p) {axes = ["dp", "mb"], order = "canonical"}   ; the cut
//       ... tp.sumsq, tp.global_norm, tp.adamw ...
//   OUT (mesh dp=2,mb=1,tp=2):
//     func.func @lm(%ids {tp.shard = {axes = [["dp", "mb"]], logical = [T / 4]}}, %w1, ...)
//         -> (loss, %p {tp.name = "grad_partial.0"}, ...)                    ; one call per micro-batch
//     func.func @lm_update(%w1.master, ..., %hyper, %acc {tp.name = "grad_partial.0"}, ...)
//         -> (w1, w1.master, ..., grad_norm) {
//       %g = "tp.all_reduce"(%acc) {axes = ["dp", "mb"], order = "canonical"} ; now over dp alone
//       ... the update as it was ...
//
// The cut is every all-reduce over mb (tp-shard's reductions of the gradients over the token
// axes); @lm keeps what does not depend on them (the loss and the partial gradients: f32, each
// over this call's tokens), @lm_update takes the rest with the partials as arguments. The driver
// calls @lm once per micro-batch, sums each rank's k partials with the canonical pairwise tree
// (member m of micro-batch m: the collectives' own tree, TPRT_ORDER_CANONICAL) and calls
// @lm_update once. A canonical all-reduce over dp and mb of D * k partials is the tree over dp
// of the trees over mb, so the result is the bits of the step on D * k data-parallel ranks, which
// tp-invariant makes the bits of any other split of the same global batch. The pass sets mb's size
// to 1 (the functions now run on the real ranks) and divides the logical token count of every
// argument and result sharded over mb by k. A step that communicates over mb anywhere else (a
// reduce-scatter, an all-gather) or whose update reads a value of the backward is refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "tpc_dialect.h"

#define TPC__MB "mb"

static bool tpc__is_func(MlirOperation o) {
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(o)), tpc_ref("func.func"));
}

// Whether |axes| (an array of strings) names mb.
static bool tpc__axes_have_mb(MlirAttribute axes) {
  if (mlirAttributeIsNull(axes) || !mlirAttributeIsAArray(axes)) return false;
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes); ++i) {
    MlirAttribute a = mlirArrayAttrGetElement(axes, i);
    if (mlirAttributeIsAString(a) && mlirStringRefEqual(mlirStringAttrGetValue(a), tpc_ref(TPC__MB))) return true;
  }
  return false;
}

static bool tpc__op_over_mb(MlirOperation op) { return tpc__axes_have_mb(mlirOperationGetAttributeByName(op, tpc_ref("axes"))); }

static void tpc__op_error(MlirOperation op, const char* fmt, const char* a) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  char name[96];
  snprintf(name, sizeof name, "%.*s", (int)(n.length < 90 ? n.length : 90), n.data);
  int len = snprintf(NULL, 0, fmt, name, a);
  char* msg = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (msg) snprintf(msg, (size_t)len + 1, fmt, name, a);
  mlirEmitError(mlirOperationGetLocation(op), msg ? msg : "tp-micro-batch: out of host memory");
  free(msg);
}

// The axes of |axes| that |mesh_axes| orders after mb (|inner|) or before it (|outer|, with mb
// appended), as string arrays.
static void tpc__split_axes(MlirContext ctx, MlirAttribute axes, MlirAttribute mesh_axes, MlirAttribute* inner,
                            MlirAttribute* outer) {
  intptr_t n = mlirArrayAttrGetNumElements(axes), ni = 0, no = 0;
  MlirAttribute* in = calloc((size_t)n + 1, sizeof *in);
  MlirAttribute* out = calloc((size_t)n + 1, sizeof *out);
  bool after = false;
  for (intptr_t j = 0; in && out && j < mlirArrayAttrGetNumElements(mesh_axes); ++j) {
    MlirAttribute m = mlirArrayAttrGetElement(mesh_axes, j);
    bool is_mb = mlirStringRefEqual(mlirStringAttrGetValue(m), tpc_ref(TPC__MB));
    for (intptr_t i = 0; i < n; ++i)
      if (mlirAttributeEqual(mlirArrayAttrGetElement(axes, i), m)) {
        if (is_mb || !after) out[no++] = m;
        else in[ni++] = m;
      }
    after = after || is_mb;
  }
  *inner = mlirArrayAttrGet(ctx, ni, in);
  *outer = mlirArrayAttrGet(ctx, no, out);
  free(in), free(out);
}

// |dict| (a slot's attribute dictionary) with its tp.shard's logical size divided by |k| along
// every dimension sharded over mb.
static MlirAttribute tpc__fix_shard(MlirContext ctx, MlirAttribute dict, int64_t k) {
  if (mlirAttributeIsNull(dict) || !mlirAttributeIsADictionary(dict)) return dict;
  MlirAttribute shard = mlirDictionaryAttrGetElementByName(dict, tpc_ref(TPC_ARG_ATTR_SHARD));
  if (mlirAttributeIsNull(shard) || !mlirAttributeIsADictionary(shard)) return dict;
  MlirAttribute axes = mlirDictionaryAttrGetElementByName(shard, tpc_ref("axes"));
  MlirAttribute logical = mlirDictionaryAttrGetElementByName(shard, tpc_ref("logical"));
  if (mlirAttributeIsNull(axes) || mlirAttributeIsNull(logical) || !mlirAttributeIsADenseI64Array(logical)) return dict;
  intptr_t rank = mlirDenseArrayGetNumElements(logical);
  int64_t* dims = calloc((size_t)rank + 1, sizeof *dims);
  if (!dims) return dict;
  bool changed = false;
  for (intptr_t d = 0; d < rank; ++d) {
    dims[d] = mlirDenseI64ArrayGetElement(logical, d);
    if (d < mlirArrayAttrGetNumElements(axes) && tpc__axes_have_mb(mlirArrayAttrGetElement(axes, d))) {
      dims[d] /= k;
      changed = true;
    }
  }
  if (!changed) {
    free(dims);
    return dict;
  }
  intptr_t n = mlirDictionaryAttrGetNumElements(shard);
  MlirNamedAttribute* e = calloc((size_t)n + 1, sizeof *e);
  intptr_t m = mlirDictionaryAttrGetNumElements(dict);
  MlirNamedAttribute* f = calloc((size_t)m + 1, sizeof *f);
  if (!e || !f) {
    free(dims), free(e), free(f);
    return dict;
  }
  for (intptr_t i = 0; i < n; ++i) {
    e[i] = mlirDictionaryAttrGetElement(shard, i);
    if (mlirStringRefEqual(mlirIdentifierStr(e[i].name), tpc_ref("logical")))
      e[i].attribute = mlirDenseI64ArrayGet(ctx, rank, dims);
  }
  MlirAttribute nshard = mlirDictionaryAttrGet(ctx, n, e);
  for (intptr_t i = 0; i < m; ++i) {
    f[i] = mlirDictionaryAttrGetElement(dict, i);
    if (mlirStringRefEqual(mlirIdentifierStr(f[i].name), tpc_ref(TPC_ARG_ATTR_SHARD))) f[i].attribute = nshard;
  }
  MlirAttribute out = mlirDictionaryAttrGet(ctx, m, f);
  free(dims), free(e), free(f);
  return out;
}

// |dict| without tp.next (the split functions pair results with arguments by tp.name).
static MlirAttribute tpc__drop_next(MlirContext ctx, MlirAttribute dict) {
  if (mlirAttributeIsNull(dict) || !mlirAttributeIsADictionary(dict)) return mlirDictionaryAttrGet(ctx, 0, NULL);
  intptr_t m = mlirDictionaryAttrGetNumElements(dict), n = 0;
  MlirNamedAttribute* f = calloc((size_t)m + 1, sizeof *f);
  if (!f) return dict;
  for (intptr_t i = 0; i < m; ++i) {
    MlirNamedAttribute a = mlirDictionaryAttrGetElement(dict, i);
    if (!mlirStringRefEqual(mlirIdentifierStr(a.name), tpc_ref(TPC_RES_ATTR_NEXT))) f[n++] = a;
  }
  MlirAttribute out = mlirDictionaryAttrGet(ctx, n, f);
  free(f);
  return out;
}

static MlirAttribute tpc__name_dict(MlirContext ctx, const char* name) {
  MlirNamedAttribute e[1] = {tpc_named_attr(ctx, TPC_ARG_ATTR_NAME, mlirStringAttrGet(ctx, tpc_ref(name)))};
  return mlirDictionaryAttrGet(ctx, 1, e);
}

// Erases the arguments of |func| that nothing reads, then sets its type from its block and
// return, with |arg_dicts| (one per argument before the erasure) and |res_dicts|, each with the
// tp.shard fix of |k|.
static bool tpc__finish_func(MlirOperation func, MlirAttribute* arg_dicts, MlirAttribute* res_dicts, intptr_t nres,
                             int64_t k, bool erase) {
  MlirContext ctx = mlirOperationGetContext(func);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  intptr_t nargs = mlirBlockGetNumArguments(body);
  for (intptr_t i = nargs - 1; erase && i >= 0; --i) {
    if (!mlirOpOperandIsNull(mlirValueGetFirstUse(mlirBlockGetArgument(body, i)))) continue;
    mlirBlockEraseArgument(body, (unsigned)i);
    memmove(arg_dicts + i, arg_dicts + i + 1, sizeof *arg_dicts * (size_t)(nargs - i - 1));
    --nargs;
  }
  MlirOperation ret = mlirBlockGetTerminator(body);
  MlirType* ins = calloc((size_t)nargs + 1, sizeof *ins);
  MlirType* outs = calloc((size_t)nres + 1, sizeof *outs);
  if (!ins || !outs) {
    free(ins), free(outs);
    return false;
  }
  for (intptr_t i = 0; i < nargs; ++i) {
    ins[i] = mlirValueGetType(mlirBlockGetArgument(body, i));
    if (mlirAttributeIsNull(arg_dicts[i])) arg_dicts[i] = mlirDictionaryAttrGet(ctx, 0, NULL);
    arg_dicts[i] = tpc__fix_shard(ctx, arg_dicts[i], k);
  }
  for (intptr_t j = 0; j < nres; ++j) {
    outs[j] = mlirValueGetType(mlirOperationGetOperand(ret, j));
    if (mlirAttributeIsNull(res_dicts[j])) res_dicts[j] = mlirDictionaryAttrGet(ctx, 0, NULL);
    res_dicts[j] = tpc__fix_shard(ctx, res_dicts[j], k);
  }
  mlirOperationSetAttributeByName(func, tpc_ref("function_type"),
                                  mlirTypeAttrGet(mlirFunctionTypeGet(ctx, nargs, ins, nres, outs)));
  mlirOperationSetAttributeByName(func, tpc_ref("arg_attrs"), mlirArrayAttrGet(ctx, nargs, arg_dicts));
  mlirOperationSetAttributeByName(func, tpc_ref("res_attrs"), mlirArrayAttrGet(ctx, nres, res_dicts));
  free(ins), free(outs);
  return true;
}

// Replaces |ret| by a func.return of |values|.
static void tpc__set_return(MlirBlock body, MlirOperation ret, MlirValue* values, intptr_t n) {
  MlirOperationState st = mlirOperationStateGet(tpc_ref("func.return"), mlirOperationGetLocation(ret));
  mlirOperationStateAddOperands(&st, n, values);
  MlirOperation nret = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(body, ret, nret);
  mlirOperationDestroy(ret);
}

// Splits |func| at its all-reduces over mb into |func| (the micro-batch's forward, backward and
// partial gradients) and <func>_update.
static MlirLogicalResult tpc__split_func(MlirOperation module, MlirOperation func, MlirAttribute mesh_axes, int64_t k) {
  MlirContext ctx = mlirOperationGetContext(func);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(body)) return mlirLogicalResultSuccess();
  MlirLocation loc = mlirOperationGetLocation(func);
  MlirOperation ret = mlirBlockGetTerminator(body);
  intptr_t nargs = mlirBlockGetNumArguments(body), nres = mlirOperationGetNumOperands(ret);
  // The cuts.
  tpc_op_list_t cuts = {0};
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    if (tpc_op_get_kind(o) == TPC_OP_ALL_REDUCE && tpc__op_over_mb(o) && !tpc_op_list_push(&cuts, o)) {
      free(cuts.ops);
      mlirEmitError(loc, "tp-micro-batch: out of host memory");
      return mlirLogicalResultFailure();
    }
  MlirLogicalResult result = mlirLogicalResultSuccess();
  MlirAttribute* arg_dicts = calloc((size_t)(2 * nargs + cuts.count + 1), sizeof *arg_dicts);
  MlirAttribute* res_dicts = calloc((size_t)(nres + cuts.count + 1), sizeof *res_dicts);
  MlirAttribute* upd_res_dicts = calloc((size_t)nres + 1, sizeof *upd_res_dicts);
  MlirValue* grad_rets = calloc((size_t)(nres + cuts.count + 1), sizeof *grad_rets);
  MlirValue* upd_rets = calloc((size_t)nres + 1, sizeof *upd_rets);
  MlirType* upd_types = calloc((size_t)(nargs + cuts.count + 1), sizeof *upd_types);
  MlirLocation* upd_locs = calloc((size_t)(nargs + cuts.count + 1), sizeof *upd_locs);
  MlirValue* partials = calloc((size_t)cuts.count + 1, sizeof *partials);
  if (!partials || !arg_dicts || !res_dicts || !upd_res_dicts || !grad_rets || !upd_rets || !upd_types || !upd_locs) {
    mlirEmitError(loc, "tp-micro-batch: out of host memory");
    result = mlirLogicalResultFailure();
    goto done;
  }
  // Every communication over mb but the cuts would now run over one member: refused.
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    if (tpc__op_over_mb(o) && !tpc_op_list_has(&cuts, o)) {
      int kind = tpc_op_get_kind(o);
      tpc__op_error(o,
                    "tp-micro-batch: %s communicates across micro-batches (over mesh axis mb); only the gradients' "
                    "all-reduces may%s",
                    kind == TPC_OP_ALL_GATHER ? " (tp-invariant gathers over mb the partial sums of the gather strategy, or "
                                                "the rows of an expert weight's gradient, which needs every token of the step: "
                                                "use the canonical strategy; a MoE model accumulates micro-batches in fast "
                                                "numerics only, for now)"
                                              : " (GTP's reduce-scatters are not supported with micro-batches yet)");
      result = mlirLogicalResultFailure();
      goto done;
    }
  if (cuts.count == 0) {
    // Nothing to accumulate: only the shapes change.
    for (intptr_t i = 0; i < nargs; ++i) arg_dicts[i] = tpc_slot_dict(func, false, i);
    for (intptr_t j = 0; j < nres; ++j) res_dicts[j] = tpc_slot_dict(func, true, j);
    if (!tpc__finish_func(func, arg_dicts, res_dicts, nres, k, false)) result = mlirLogicalResultFailure();
    goto done;
  }
  {
    // The update function: every original argument (the unused ones erased at the end), then one
    // accumulated partial per cut.
    MlirAttribute* grad_arg_dicts = arg_dicts + nargs + cuts.count;
    for (intptr_t i = 0; i < nargs; ++i) {
      upd_types[i] = mlirValueGetType(mlirBlockGetArgument(body, i));
      upd_locs[i] = loc;
      MlirAttribute d = tpc_slot_dict(func, false, i);
      arg_dicts[i] = grad_arg_dicts[i] = mlirAttributeIsNull(d) ? mlirDictionaryAttrGet(ctx, 0, NULL) : d;
    }
    for (intptr_t c = 0; c < cuts.count; ++c) {
      // The cut's group in canonical order is (axes before mb) x mb x (axes after mb): the axes
      // after mb are reduced per micro-batch, here; the driver sums over mb; the update
      // reduces over the axes before it.
      MlirOperation cut = cuts.ops[c];
      MlirAttribute inner, outer;
      tpc__split_axes(ctx, mlirOperationGetAttributeByName(cut, tpc_ref("axes")), mesh_axes, &inner, &outer);
      partials[c] = mlirOperationGetOperand(cut, 0);
      if (mlirArrayAttrGetNumElements(inner) > 0) {
        MlirOperation pre = mlirOperationClone(cut);
        mlirBlockInsertOwnedOperationBefore(body, cut, pre);
        mlirOperationSetAttributeByName(pre, tpc_ref("axes"), inner);
        mlirValueSetType(mlirOperationGetResult(pre, 0), mlirValueGetType(partials[c]));
        partials[c] = mlirOperationGetResult(pre, 0);
      }
      mlirOperationSetAttributeByName(cut, tpc_ref("axes"), outer);
      upd_types[nargs + c] = mlirValueGetType(partials[c]);
      upd_locs[nargs + c] = mlirOperationGetLocation(cuts.ops[c]);
      char name[48];
      snprintf(name, sizeof name, "grad_partial.%ld", (long)c);
      arg_dicts[nargs + c] = tpc__name_dict(ctx, name);
    }
    MlirStringRef fname = mlirStringAttrGetValue(mlirOperationGetAttributeByName(func, tpc_ref("sym_name")));
    char uname[512];
    snprintf(uname, sizeof uname, "%.*s_update", (int)(fname.length < 480 ? fname.length : 480), fname.data);
    MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
    for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
      MlirAttribute s = mlirOperationGetAttributeByName(o, tpc_ref("sym_name"));
      if (!mlirAttributeIsNull(s) && mlirAttributeIsAString(s) &&
          mlirStringRefEqual(mlirStringAttrGetValue(s), tpc_ref(uname))) {
        tpc__op_error(o, "tp-micro-batch: %s @%s already exists; rename it", uname);
        result = mlirLogicalResultFailure();
        goto done;
      }
    }
    MlirBlock ub = mlirBlockCreate(nargs + cuts.count, upd_types, upd_locs);
    MlirRegion region = mlirRegionCreate();
    mlirRegionAppendOwnedBlock(region, ub);
    MlirOperationState st = mlirOperationStateGet(tpc_ref("func.func"), loc);
    MlirNamedAttribute a[2] = {
        tpc_named_attr(ctx, "sym_name", mlirStringAttrGet(ctx, tpc_ref(uname))),
        tpc_named_attr(ctx, "function_type", mlirTypeAttrGet(mlirFunctionTypeGet(ctx, 0, NULL, 0, NULL)))};
    mlirOperationStateAddAttributes(&st, 2, a);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation ufunc = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationAfter(top, func, ufunc);
    // Move the cuts and everything that depends on them, in block order (so a value's producer
    // moves before its readers).
    MlirOperation next = {NULL};
    for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o) && !mlirOperationEqual(o, ret);
         o = next) {
      next = mlirOperationGetNextInBlock(o);
      intptr_t cut = -1;
      for (intptr_t c = 0; c < cuts.count && cut < 0; ++c)
        if (mlirOperationEqual(cuts.ops[c], o)) cut = c;
      bool update = cut >= 0;
      for (intptr_t i = 0; !update && i < mlirOperationGetNumOperands(o); ++i) {
        MlirValue v = mlirOperationGetOperand(o, i);
        update = mlirValueIsAOpResult(v) && mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(v)), ub);
      }
      if (!update) continue;
      mlirOperationRemoveFromParent(o);
      mlirBlockAppendOwnedOperation(ub, o);
      for (intptr_t i = 0; i < mlirOperationGetNumOperands(o); ++i) {
        MlirValue v = mlirOperationGetOperand(o, i);
        if (cut >= 0) {
          mlirOperationSetOperand(o, i, mlirBlockGetArgument(ub, nargs + cut));
        } else if (mlirValueIsABlockArgument(v)) {
          mlirOperationSetOperand(o, i, mlirBlockGetArgument(ub, mlirBlockArgumentGetArgNumber(v)));
        } else if (!mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(v)), ub)) {
          tpc__op_error(o,
                        "tp-micro-batch: %s, after the gradients' reduction over micro-batches, reads a value of the "
                        "forward or backward%s (one per micro-batch); such a step cannot accumulate micro-batches",
                        "");
          result = mlirLogicalResultFailure();
          goto done;
        }
      }
    }
    // The results the update computes go to it; the rest (the loss) stay, then the partials.
    intptr_t ng = 0, nu = 0;
    for (intptr_t j = 0; j < nres; ++j) {
      MlirValue v = mlirOperationGetOperand(ret, j);
      MlirAttribute d = tpc_slot_dict(func, true, j);
      d = tpc__drop_next(ctx, d);
      if (mlirValueIsAOpResult(v) && mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(v)), ub)) {
        upd_rets[nu] = v;
        upd_res_dicts[nu++] = d;
      } else {
        grad_rets[ng] = v;
        res_dicts[ng++] = d;
      }
    }
    for (intptr_t c = 0; c < cuts.count; ++c) {
      grad_rets[ng] = partials[c];
      res_dicts[ng++] = arg_dicts[nargs + c];
    }
    tpc__set_return(body, ret, grad_rets, ng);
    {
      MlirOperationState rs = mlirOperationStateGet(tpc_ref("func.return"), loc);
      mlirOperationStateAddOperands(&rs, nu, upd_rets);
      mlirBlockAppendOwnedOperation(ub, mlirOperationCreate(&rs));
    }
    if (!tpc__finish_func(func, grad_arg_dicts, res_dicts, ng, k, true) ||
        !tpc__finish_func(ufunc, arg_dicts, upd_res_dicts, nu, k, true)) {
      mlirEmitError(loc, "tp-micro-batch: out of host memory");
      result = mlirLogicalResultFailure();
    }
  }
done:
  free(cuts.ops), free(arg_dicts), free(res_dicts), free(upd_res_dicts), free(grad_rets), free(upd_rets);
  free(upd_types), free(upd_locs), free(partials);
  return result;
}

static MlirLogicalResult tpc__micro_batch_run(MlirOperation module, void* options) {
  (void)options;
  MlirContext ctx = mlirOperationGetContext(module);
  MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
  // The mesh with an mb axis of more than one member.
  MlirOperation mesh = {NULL};
  intptr_t at = -1;
  int64_t k = 1;
  for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o) && at < 0;
       o = mlirOperationGetNextInBlock(o)) {
    if (tpc_op_get_kind(o) != TPC_OP_MESH) continue;
    MlirAttribute axes = tpc_mesh_get_axes_attr(o), shape = tpc_mesh_get_shape_attr(o);
    for (intptr_t i = 0; !mlirAttributeIsNull(axes) && i < mlirArrayAttrGetNumElements(axes); ++i) {
      MlirAttribute a = mlirArrayAttrGetElement(axes, i);
      if (mlirAttributeIsAString(a) && mlirStringRefEqual(mlirStringAttrGetValue(a), tpc_ref(TPC__MB)) &&
          i < mlirDenseArrayGetNumElements(shape)) {
        mesh = o, at = i, k = mlirDenseI64ArrayGetElement(shape, i);
        break;
      }
    }
  }
  if (at < 0 || k <= 1) return mlirLogicalResultSuccess();
  // GTP reduce-scatters a weight's gradient over gtp in the micro-batch's call, before the sum over
  // mb. That is the canonical order only with gtp inner to mb (after it in the mesh: a micro-batch's
  // tokens split over gtp), which is where --mesh puts it; a mesh declared with gtp first is refused.
  {
    MlirAttribute axes = tpc_mesh_get_axes_attr(mesh), shape = tpc_mesh_get_shape_attr(mesh);
    for (intptr_t i = 0; i < at && i < mlirDenseArrayGetNumElements(shape); ++i) {
      MlirAttribute a = mlirArrayAttrGetElement(axes, i);
      if (mlirAttributeIsAString(a) && mlirStringRefEqual(mlirStringAttrGetValue(a), tpc_ref("gtp")) &&
          mlirDenseI64ArrayGetElement(shape, i) > 1) {
        mlirEmitError(mlirOperationGetLocation(mesh),
                      "tp-micro-batch: the mesh declares gtp before mb: tp-gtp reduce-scatters the gradients over "
                      "gtp inside a micro-batch's call, which is the canonical order only with gtp after mb (as "
                      "--mesh orders them)");
        return mlirLogicalResultFailure();
      }
    }
  }
  // The functions as they are now (the pass adds the update functions after them).
  tpc_op_list_t funcs = {0};
  for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    if (tpc__is_func(o) && !tpc_op_list_push(&funcs, o)) {
      free(funcs.ops);
      return mlirLogicalResultFailure();
    }
  MlirLogicalResult result = mlirLogicalResultSuccess();
  for (intptr_t f = 0; f < funcs.count && mlirLogicalResultIsSuccess(result); ++f)
    result = tpc__split_func(module, funcs.ops[f], tpc_mesh_get_axes_attr(mesh), k);
  free(funcs.ops);
  if (mlirLogicalResultIsFailure(result)) return result;
  // The functions now run once per micro-batch on the real ranks: mb has one member.
  MlirAttribute shape = tpc_mesh_get_shape_attr(mesh);
  intptr_t n = mlirDenseArrayGetNumElements(shape);
  int64_t* dims = calloc((size_t)n + 1, sizeof *dims);
  if (!dims) return mlirLogicalResultFailure();
  for (intptr_t i = 0; i < n; ++i) dims[i] = i == at ? 1 : mlirDenseI64ArrayGetElement(shape, i);
  mlirOperationSetAttributeByName(mesh, tpc_ref("shape"), mlirDenseI64ArrayGet(ctx, n, dims));
  free(dims);
  return mlirLogicalResultSuccess();
}

static tpc_pass_info_t tpc__micro_batch_info = {
    .argument = "tp-micro-batch",
    .description = "Cut a step sharded over mesh axis mb into a per-micro-batch gradient function and an update function",
    .run = tpc__micro_batch_run,
};

MlirPass tpc_create_micro_batch_pass(void) { return tpc_pass_create(&tpc__micro_batch_info, NULL); }
