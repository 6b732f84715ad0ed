// tp-gtp: shards weights over the mesh's gtp axis (GTP, "generalized tensor parallelism": ZeRO-3
// on a model-parallel axis) and schedules their all-gathers and gradient reduce-scatters.
//
//   IN (per rank, after tp-shard; --mesh gtp=2,tp=2):
//     func @mlp(%x: 8x128, %w1: tensor<256x128xbf16> {tp.shard = {axes = [["tp"], []], blocks = [2, 1]}}, ...)
//       %u = "tp.linear"(%h, %w1) ...
//       %p = "tp.linear_wgrad"(...) {partial = true} -> 256x128xf32
//       %g = "tp.all_reduce"(%p) {axes = ["gtp"]} -> 256x128xf32          (returned: w1's gradient)
//   OUT:
//     func @mlp(%x, %w1: tensor<128x128xbf16> {tp.shard = {axes = [["tp", "gtp"], []], ...}}, ...)
//       %f = "tp.all_gather_start"(%w1) {axes = ["gtp"], dim = 0, blocks = 2}  (k contractions ahead)
//       ...
//       %wg = "tp.wait"(%f) -> 256x128xbf16
//       %u = "tp.linear"(%h, %wg) ...
//       %r = "tp.reduce_scatter_start"(%p) {axes = ["gtp"], dim = 0, blocks = 2}
//       ...
//       %g = "tp.wait"(%r) -> 128x128xf32                                    (returned sharded)
//
// Which weights: an argument marked {tp.gtp = true}, or, unmarked, one whose every use is the
// weight of a column- or row-parallel tp.linear (or its dgrad) or of a tp.grouped_linear (or its
// dgrad). Norm parameters, biases and replicated linears (a router) stay whole; {tp.gtp = false}
// keeps any weight whole. The weight's tensor-parallel shard is cut once more along its output
// features (dim 0 of a linear's [N, K], dim 1 of a grouped linear's [E, N, K]); gtp is the minor
// axis of that dim, and a dim stored in B blocks (a stride-2 GLU weight) is cut block by block, so
// `blocks = B` on the gather returns exactly the tensor-parallel shard.
//
// The schedule, from the static program order (no recording at step 1): every use of a weight
// gets its own gather (the backward re-gathers what the forward freed), started before the k-th
// contraction ahead of the use and waited for just before it; the memory plan frees the gathered
// copy after its last reader. Module attributes set it: `tp.gtp_prefetch = k` (k >= 0; absent:
// the smallest k whose contractions outlast the gather by a cost model, at most 4) and
// `tp.gtp_keep = true` (one gather per weight, kept from its first use to its last). The chosen
// depth is recorded on each function as `tp.gtp_prefetch`.
//
// Quantized weights (tp.quantize -> tp.dequantize -> the linear, rowwise): the quantize reads the
// shard and the gathers move its data and block scales (gtp_emit.c). FP8's per-tensor scale and
// NVFP4's global scale come from the whole weight's amax: tp.amax of the shard, a max all-reduce
// over gtp, the quantize's amax operand; a tp.amax the module already applies to the weight is
// completed over gtp the same way. So every shard quantizes as the whole weight does.
//
// Gradients: tp-shard sums a weight gradient over the token axes, gtp among them, with one
// tp.all_reduce; it becomes a tp.reduce_scatter_start over gtp (dim and blocks as the gather's),
// waited for at the gradient's first use, followed by a tp.all_reduce over the other axes when
// there are any. The sum is kept (no division by the gtp size), in the partial's f32. Tied
// weights (several uses) have their contributions scattered before tp-autodiff's tp.add, which
// then adds shards.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "gtp_impl.h"
#include "lower_runtime_impl.h"
#include "tprt_dtype.h"
#include "text_buffer.h"
#include "tpc_dialect.h"
#include "tpc_verify.h"

// "argument 'w1'" (its tp.name) or "argument 3".
static void tpc__arg_what(MlirOperation func, intptr_t i, char* buf, size_t size) {
  MlirStringRef n = tpc_slot_tp_name(func, false, i);
  if (n.data)
    snprintf(buf, size, "argument '%.*s'", (int)(n.length < 100 ? n.length : 100), n.data);
  else
    snprintf(buf, size, "argument %ld", (long)i);
}

void tpc__gtp_fail(tpc__gtp_t* P, MlirLocation loc, tpc_text_t* msg) {
  mlirEmitError(loc, msg->data ? msg->data : "tp-gtp: error");
  tpc_text_free(msg);
  P->ok = false;
}

//===----------------------------------------------------------------------===//
// Which weights, along which dimension
//===----------------------------------------------------------------------===//

// The weight operand slot of |op|, the dimension GTP shards, and whether the op's plan makes the
// weight a default GTP weight; false when |op| takes no gathered weight at |slot|.
static bool tpc__weight_use(MlirOperation op, unsigned slot, int* dim, bool* by_default) {
  switch (tpc_op_get_kind(op)) {
    case TPC_OP_LINEAR:
      if (slot != TPC_LINEAR_SLOT_W) return false;
      *dim = 0;
      *by_default = tpc_linear_get_parallel(op) != TPC_PARALLEL_NONE;
      return true;
    case TPC_OP_LINEAR_DGRAD:
      if (slot != TPC_LINEAR_DGRAD_SLOT_W) return false;
      *dim = 0;
      *by_default = tpc_linear_dgrad_get_parallel(op) != TPC_PARALLEL_NONE;
      return true;
    case TPC_OP_GROUPED_LINEAR:
      if (slot != TPC_GROUPED_LINEAR_SLOT_W) return false;
      *dim = 1;
      *by_default = true;
      return true;
    case TPC_OP_GROUPED_LINEAR_DGRAD:
      if (slot != TPC_GROUPED_LINEAR_DGRAD_SLOT_W) return false;
      *dim = 1;
      *by_default = true;
      return true;
    default:
      return false;
  }
}

// Quantize-then-gather: a weight that reaches its linear through tp.quantize -> tp.dequantize (a
// weight stored and moved in a low-precision format). Returns the dequantize when |op| is such a
// quantize of the weight (slot 0) and fills |dim| and |by_default| from the linear that reads the
// dequantized weight; |why| names what stops its gather (a columnwise layout, whose data or scales
// run along the sharded rows), or is NULL.
static MlirOperation tpc__quantized_use(MlirOperation op, unsigned slot, int* dim, bool* by_default, const char** why) {
  MlirOperation none = {NULL};
  *why = NULL;
  if (tpc_op_get_kind(op) != TPC_OP_QUANTIZE || slot != 0) return none;
  MlirOpOperand u = mlirValueGetFirstUse(tpc_quantize_get_data(op));
  if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u))) return none;
  MlirOperation deq = mlirOpOperandGetOwner(u);
  if (tpc_op_get_kind(deq) != TPC_OP_DEQUANTIZE || mlirOpOperandGetOperandNumber(u) != TPC_DEQUANTIZE_SLOT_DATA)
    return none;
  // Every reader of the dequantized weight takes it as a weight, the same way.
  MlirValue x = tpc_dequantize_get_x(deq);
  bool any = false;
  for (MlirOpOperand r = mlirValueGetFirstUse(x); !mlirOpOperandIsNull(r); r = mlirOpOperandGetNextUse(r)) {
    int d = -1;
    bool dflt = false;
    if (!tpc__weight_use(mlirOpOperandGetOwner(r), mlirOpOperandGetOperandNumber(r), &d, &dflt) || (any && d != *dim))
      return none;
    *dim = d;
    *by_default = any ? *by_default && dflt : dflt;
    any = true;
  }
  if (!any) return none;
  if (tpc_quantize_get_axis(op) != TPC_AXIS_ROWWISE)
    *why = tpc_quantize_get_format(op) == TPC_FORMAT_MXFP8
               ? "columnwise MXFP8 scales run along the sharded rows"
               : "columnwise data is stored transposed, so the sharded rows are its columns";
  return deq;
}

bool tpc__gtp_is_contraction(int kind) {
  switch (kind) {
    case TPC_OP_LINEAR:
    case TPC_OP_GROUPED_LINEAR:
    case TPC_OP_LINEAR_DGRAD:
    case TPC_OP_LINEAR_WGRAD:
    case TPC_OP_GROUPED_LINEAR_DGRAD:
    case TPC_OP_GROUPED_LINEAR_WGRAD:
    case TPC_OP_ATTENTION:
    case TPC_OP_ATTENTION_GRAD:
    case TPC_OP_FUSED_GROUPED_MLP:
      return true;
    default:
      return false;
  }
}

static double tpc__numel(MlirType t) {
  if (!mlirTypeIsARankedTensor(t)) return 0;
  double n = 1;
  for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d) n *= (double)mlirShapedTypeGetDimSize(t, d);
  return n;
}

double tpc__gtp_bytes(MlirType t) {
  if (!mlirTypeIsARankedTensor(t)) return 0;
  return tpc__numel(t) * (double)tprt_dtype_bits(tpc_lower_dtype_of(mlirShapedTypeGetElementType(t))) / 8.0;
}

// Seconds the cost model gives |op|: 2 · (result elements) · (contracted size), the contracted
// size being operand 0's last dimension (K of a linear and of attention's head dim), or the
// tokens of a weight gradient. An estimate: it orders prefetch distances, nothing else.
double tpc__gtp_op_seconds(MlirOperation op) {
  int kind = tpc_op_get_kind(op);
  if (!tpc__gtp_is_contraction(kind) || mlirOperationGetNumOperands(op) == 0 || mlirOperationGetNumResults(op) == 0)
    return 0;
  MlirType a = mlirValueGetType(mlirOperationGetOperand(op, 0));
  if (!mlirTypeIsARankedTensor(a) || mlirShapedTypeGetRank(a) < 1) return 0;
  intptr_t r = mlirShapedTypeGetRank(a);
  double k = (double)mlirShapedTypeGetDimSize(a, kind == TPC_OP_LINEAR_WGRAD || kind == TPC_OP_GROUPED_LINEAR_WGRAD ? 0 : r - 1);
  return 2.0 * tpc__numel(mlirValueGetType(mlirOperationGetResult(op, 0))) * k / TPC_GTP_PEAK_FLOPS;
}


//===----------------------------------------------------------------------===//
// tp.shard attributes
//===----------------------------------------------------------------------===//

// |shard| (a tp.shard dictionary) with "gtp" added to the axes of dimension |dim|: after the model
// axes, before "dp" when ZeRO-1 splits that dimension of an optimizer state over dp too (the
// update's dp share is then a share of the gtp shard, whose rows the dp all-gather returns).
static MlirAttribute tpc__shard_with_gtp(MlirContext ctx, MlirAttribute shard, int dim) {
  intptr_t n = mlirDictionaryAttrGetNumElements(shard);
  MlirNamedAttribute* items = calloc((size_t)n, sizeof *items);
  if (!items) return (MlirAttribute){NULL};
  for (intptr_t i = 0; i < n; ++i) {
    items[i] = mlirDictionaryAttrGetElement(shard, i);
    if (!mlirStringRefEqual(mlirIdentifierStr(items[i].name), tpc__ref("axes"))) continue;
    MlirAttribute axes = items[i].attribute;
    intptr_t rank = mlirArrayAttrGetNumElements(axes);
    MlirAttribute per_dim[8];
    for (intptr_t d = 0; d < rank && d < 8; ++d) {
      MlirAttribute list = mlirArrayAttrGetElement(axes, d);
      if (d != dim) {
        per_dim[d] = list;
        continue;
      }
      MlirAttribute names[8];
      intptr_t k = mlirArrayAttrGetNumElements(list), c = 0;
      bool placed = false;
      for (intptr_t j = 0; j < k && c < 7; ++j) {
        MlirAttribute name = mlirArrayAttrGetElement(list, j);
        if (!placed && mlirAttributeIsAString(name) && mlirStringRefEqual(mlirStringAttrGetValue(name), tpc__ref("dp"))) {
          names[c++] = mlirStringAttrGet(ctx, tpc__ref("gtp"));
          placed = true;
          if (c == 7) break;
        }
        names[c++] = name;
      }
      if (!placed && c < 8) names[c++] = mlirStringAttrGet(ctx, tpc__ref("gtp"));
      per_dim[d] = mlirArrayAttrGet(ctx, c, names);
    }
    items[i].attribute = mlirArrayAttrGet(ctx, rank < 8 ? rank : 8, per_dim);
  }
  MlirAttribute out = mlirDictionaryAttrGet(ctx, n, items);
  free(items);
  return out;
}

// Replaces attribute |name| of argument (or result) |i|'s dictionary in |func|'s arg_attrs (or
// res_attrs).
static void tpc__set_slot_attr(MlirContext ctx, MlirOperation func, bool result, intptr_t i, const char* name,
                               MlirAttribute value) {
  const char* list_name = result ? "res_attrs" : "arg_attrs";
  MlirAttribute list = mlirOperationGetAttributeByName(func, tpc__ref(list_name));
  if (mlirAttributeIsNull(list)) return;  // a tp.shard attribute lives in it, so it exists
  intptr_t n = mlirArrayAttrGetNumElements(list);
  MlirAttribute* dicts = calloc((size_t)n, sizeof *dicts);
  if (!dicts) return;
  for (intptr_t k = 0; k < n; ++k) {
    dicts[k] = mlirArrayAttrGetElement(list, k);
    if (k != i) continue;
    intptr_t m = mlirDictionaryAttrGetNumElements(dicts[k]);
    MlirNamedAttribute* items = calloc((size_t)m + 1, sizeof *items);
    if (!items) continue;
    intptr_t count = 0;
    for (intptr_t j = 0; j < m; ++j) {
      MlirNamedAttribute e = mlirDictionaryAttrGetElement(dicts[k], j);
      if (!mlirStringRefEqual(mlirIdentifierStr(e.name), tpc__ref(name))) items[count++] = e;
    }
    items[count++] = tpc__named(ctx, name, value);
    dicts[k] = mlirDictionaryAttrGet(ctx, count, items);
    free(items);
  }
  mlirOperationSetAttributeByName(func, tpc__ref(list_name), mlirArrayAttrGet(ctx, n, dicts));
  free(dicts);
}

// The depth the cost model asks for the gather of |bytes| before the op at index |use|: the
// number of contractions before it whose time covers the gather's.
static int64_t tpc__depth_needed(const tpc__gtp_t* P, int use, double bytes) {
  double need = bytes * (double)(P->G - 1) / (double)P->G / TPC_GTP_BANDWIDTH, have = 0;
  int64_t k = 0;
  for (int i = use - 1; i >= 0 && have < need; --i) {
    double t = tpc__gtp_op_seconds(P->ops[i]);
    if (t > 0) {
      have += t;
      ++k;
    }
  }
  return k < 1 ? 1 : k;
}

//===----------------------------------------------------------------------===//
// One function
//===----------------------------------------------------------------------===//

typedef struct {
  MlirOperation op;
  unsigned slot;
  int index;  // in P->ops
} tpc__use_t;

static int tpc__use_cmp(const void* a, const void* b) {
  return ((const tpc__use_t*)a)->index - ((const tpc__use_t*)b)->index;
}

// Shards argument |i| over gtp if it is a GTP weight; returns false after a diagnostic.
// A training step's update of weight |i| (tp-adamw): its gradient feeds the norm's tp.sumsq and
// tp.adamw, whose master weight and moments (arguments marked tp.state_of = i) are laid out like
// the weight. All become gtp shards like the weight: the gradient is reduce-scattered as a returned
// one is, each gtp rank counts its shard's squares (the exact sum does not depend on the split),
// and the update writes the weight's shard, the argument's layout at the next step.
static bool tpc__gtp_shard_update(tpc__gtp_t* P, MlirBlock body, intptr_t i, int dim, int64_t blocks,
                                  const char* what) {
  MlirOperation adamw = {NULL};
  for (intptr_t a = 0; a < mlirBlockGetNumArguments(body); ++a) {
    MlirAttribute of = tpc_slot_attr(P->func, false, a, TPC_ARG_ATTR_STATE_OF);
    if (mlirAttributeIsNull(of) || !mlirAttributeIsAInteger(of) || mlirIntegerAttrGetValueInt(of) != i) continue;
    MlirValue st = mlirBlockGetArgument(body, a);
    for (MlirOpOperand u = mlirValueGetFirstUse(st); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u))
      if (tpc_op_get_kind(mlirOpOperandGetOwner(u)) == TPC_OP_ADAMW) adamw = mlirOpOperandGetOwner(u);
    MlirAttribute shard = tpc_slot_attr(P->func, false, a, TPC_ARG_ATTR_SHARD);
    mlirBlockArgumentSetType(st, tpc__gtp_divided(mlirValueGetType(st), dim, P->G, (MlirType){NULL}));
    if (!mlirAttributeIsNull(shard) && mlirAttributeIsADictionary(shard))
      tpc__set_slot_attr(P->ctx, P->func, false, a, TPC_ARG_ATTR_SHARD, tpc__shard_with_gtp(P->ctx, shard, dim));
  }
  if (mlirOperationIsNull(adamw)) return true;
  // ZeRO-1 (the update's `axes`, dp): the update reads its dp share of the gradient's gtp shard,
  // and its new weight share is all-gathered over dp into the weight's gtp shard.
  if (!tpc__gtp_scatter_grad(P, mlirOperationGetOperand(adamw, TPC_ADAMW_SLOT_GRAD), dim, blocks, what)) return false;
  // The shard's readers: the norm counts it on every gtp rank now.
  MlirValue g = mlirOperationGetOperand(adamw, TPC_ADAMW_SLOT_GRAD);
  for (MlirOpOperand u = mlirValueGetFirstUse(g); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    if (tpc_op_get_kind(user) != TPC_OP_SUMSQ) continue;
    MlirAttribute axes = mlirOperationGetAttributeByName(user, tpc__ref("axes"));
    intptr_t at = -1;
    if (mlirAttributeIsNull(axes) || !tpc__gtp_axes_have(axes, "gtp", &at)) continue;
    MlirAttribute rest[8];
    intptr_t r = 0;
    for (intptr_t k = 0; k < mlirArrayAttrGetNumElements(axes) && r < 8; ++k)
      if (k != at) rest[r++] = mlirArrayAttrGetElement(axes, k);
    if (r) {
      mlirOperationSetAttributeByName(user, tpc__ref("axes"), mlirArrayAttrGet(P->ctx, r, rest));
    } else {
      mlirOperationRemoveAttributeByName(user, tpc__ref("axes"));
      mlirOperationRemoveAttributeByName(user, tpc__ref("mesh"));
    }
  }
  // The update's results, ZeRO-1's all-gathers of the new weight over dp, and the function's
  // results that return them.
  MlirOperation gathers[4] = {{NULL}, {NULL}, {NULL}, {NULL}};
  for (intptr_t r = 0; r < mlirOperationGetNumResults(adamw) && r < 4; ++r) {
    MlirValue v = mlirOperationGetResult(adamw, r);
    mlirValueSetType(v, tpc__gtp_divided(mlirValueGetType(v), dim, P->G, (MlirType){NULL}));
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u))
      if (tpc_op_get_kind(mlirOpOperandGetOwner(u)) == TPC_OP_ALL_GATHER) gathers[r] = mlirOpOperandGetOwner(u);
    if (!mlirOperationIsNull(gathers[r])) {
      MlirValue gv = mlirOperationGetResult(gathers[r], 0);
      mlirValueSetType(gv, tpc__gtp_divided(mlirValueGetType(gv), dim, P->G, (MlirType){NULL}));
    }
  }
  MlirOperation ret = mlirBlockGetTerminator(body);
  for (intptr_t j = 0; j < mlirOperationGetNumOperands(ret); ++j) {
    MlirValue v = mlirOperationGetOperand(ret, j);
    if (!mlirValueIsAOpResult(v)) continue;
    MlirOperation owner = mlirOpResultGetOwner(v);
    bool gathered = false;
    for (int r = 0; r < 4; ++r) gathered = gathered || (!mlirOperationIsNull(gathers[r]) && mlirOperationEqual(owner, gathers[r]));
    if (!mlirOperationEqual(owner, adamw) && !gathered) continue;
    MlirAttribute shard = tpc_slot_attr(P->func, true, j, TPC_ARG_ATTR_SHARD);
    if (!mlirAttributeIsNull(shard) && mlirAttributeIsADictionary(shard))
      tpc__set_slot_attr(P->ctx, P->func, true, j, TPC_ARG_ATTR_SHARD, tpc__shard_with_gtp(P->ctx, shard, dim));
  }
  return true;
}

static bool tpc__shard_arg(tpc__gtp_t* P, MlirBlock body, intptr_t i, int64_t* depth_used) {
  MlirValue arg = mlirBlockGetArgument(body, i);
  char what[160];
  tpc__arg_what(P->func, i, what, sizeof what);
  MlirAttribute mark = tpc_slot_attr(P->func, false, i, TPC_ARG_ATTR_GTP);
  bool explicit_on = !mlirAttributeIsNull(mark) && mlirAttributeIsABool(mark) && mlirBoolAttrGetValue(mark);
  if (!mlirAttributeIsNull(mark) && !explicit_on) return true;  // tp.gtp = false
  MlirAttribute shard = tpc_slot_attr(P->func, false, i, TPC_ARG_ATTR_SHARD);
  // The uses, and whether each can take a gathered weight. A tp.amax of the weight (the amax of a
  // quantize's amax operand) reads the shard instead, and is completed over gtp below.
  int num_uses = 0, num_amax = 0, dim = -1;
  bool eligible = true, by_default = true;
  for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    int d = -1;
    bool dflt = false;
    const char* why = NULL;
    MlirOperation user = mlirOpOperandGetOwner(u);
    if (tpc_op_get_kind(user) == TPC_OP_AMAX) {
      ++num_amax;
      continue;
    }
    bool quantized = !mlirOperationIsNull(tpc__quantized_use(user, mlirOpOperandGetOperandNumber(u), &d, &dflt, &why));
    if (quantized && why && (explicit_on || dflt)) {
      // Never a silently whole weight: a GTP weight whose format cannot be gathered is an error.
      tpc_text_t m = {0};
      tpc_text_printf(&m,
                      "tp-gtp: %s is quantized before its linear, and its shards cannot be gathered as quantized "
                      "bytes: %s; quantize it rowwise, or mark it {tp.gtp = false}",
                      what, why);
      tpc__gtp_fail(P, mlirOperationGetLocation(user), &m);
      return false;
    }
    if ((!quantized && !tpc__weight_use(user, mlirOpOperandGetOperandNumber(u), &d, &dflt)) || (dim >= 0 && d != dim)) {
      if (explicit_on) {
        MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(user));
        tpc_text_t m = {0};
        tpc_text_printf(&m, "tp-gtp: %s is marked tp.gtp = true, but '%.*s' operand %u cannot take a gathered "
                            "weight (only the weight of tp.linear, tp.grouped_linear and their dgrad can)",
                        what, (int)n.length, n.data, mlirOpOperandGetOperandNumber(u));
        tpc__gtp_fail(P, mlirOperationGetLocation(user), &m);
        return false;
      }
      eligible = false;
      break;
    }
    dim = d;
    by_default = by_default && dflt;
    ++num_uses;
  }
  if (!eligible || num_uses == 0 || (!explicit_on && !by_default)) {
    if (explicit_on && num_uses == 0) {
      tpc_text_t m = {0};
      tpc_text_printf(&m, "tp-gtp: %s is marked tp.gtp = true but no op uses it", what);
      tpc__gtp_fail(P, mlirOperationGetLocation(P->func), &m);
      return false;
    }
    return true;
  }
  if (mlirAttributeIsNull(shard) || !mlirAttributeIsADictionary(shard)) {
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-gtp: %s has no tp.shard layout; run tp-shard before tp-gtp", what);
    tpc__gtp_fail(P, mlirOperationGetLocation(P->func), &m);
    return false;
  }
  MlirType t = mlirValueGetType(arg);
  MlirAttribute blocks_attr = mlirDictionaryAttrGetElementByName(shard, tpc__ref("blocks"));
  int64_t blocks = !mlirAttributeIsNull(blocks_attr) && mlirAttributeIsADenseI64Array(blocks_attr) &&
                           dim < mlirDenseArrayGetNumElements(blocks_attr)
                       ? mlirDenseI64ArrayGetElement(blocks_attr, dim)
                       : 1;
  int64_t local = mlirShapedTypeGetDimSize(t, dim);
  if (blocks < 1 || local % (blocks * P->G) != 0) {
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-gtp: %s cannot be sharded over gtp = %lld: its %s (dimension %d) have %lld rows on each "
                        "tensor-parallel rank",
                    what, (long long)P->G, dim == 0 ? "output features" : "experts' output features", dim,
                    (long long)local);
    if (blocks > 1) tpc_text_printf(&m, " in %lld blocks of %lld", (long long)blocks, (long long)(local / blocks));
    tpc_text_printf(&m, ", not divisible by %lld; change the gtp size or the model's width, or mark it "
                        "{tp.gtp = false}", (long long)P->G);
    tpc__gtp_fail(P, mlirOperationGetLocation(P->func), &m);
    return false;
  }
  // The uses in program order (the gathers', then the amaxes').
  tpc__use_t* uses = calloc((size_t)(num_uses + num_amax), sizeof *uses);
  if (!uses) {
    mlirEmitError(mlirOperationGetLocation(P->func), "tp-gtp: out of memory");
    P->ok = false;
    return false;
  }
  int k = 0, a = num_uses;
  for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    bool amax = tpc_op_get_kind(user) == TPC_OP_AMAX;
    if (amax ? a == num_uses + num_amax : k == num_uses) continue;
    tpc__use_t* use = &uses[amax ? a++ : k++];
    use->op = user;
    use->slot = mlirOpOperandGetOperandNumber(u);
    use->index = tpc__gtp_index_of(P, user);
  }
  qsort(uses, (size_t)num_uses, sizeof *uses, tpc__use_cmp);
  MlirType gathered = t;
  double bytes = tpc__gtp_bytes(t);
  int64_t depth = P->depth;
  if (depth < 0) {
    depth = 1;
    for (int j = 0; j < num_uses; ++j) {
      int64_t need = tpc__depth_needed(P, uses[j].index, bytes);
      if (need > depth) depth = need;
    }
    if (depth > TPC_GTP_MAX_AUTO_DEPTH) depth = TPC_GTP_MAX_AUTO_DEPTH;
  }
  if (depth > *depth_used) *depth_used = depth;
  P->cur_depth = depth;
  // The shard: the argument's type and layout.
  mlirBlockArgumentSetType(arg, tpc__gtp_divided(t, dim, P->G, (MlirType){NULL}));
  tpc__set_slot_attr(P->ctx, P->func, false, i, TPC_ARG_ATTR_SHARD, tpc__shard_with_gtp(P->ctx, shard, dim));
  // The amax of the shard, completed over gtp: the tensor-parallel shard's, as before.
  for (int j = num_uses; j < num_uses + num_amax; ++j) tpc__gtp_complete_amax(P, uses[j].op);
  // One gather per use (or one for all, kept).
  MlirValue kept = {NULL};
  for (int j = 0; j < num_uses; ++j) {
    int qd = -1;
    bool qdflt = false;
    const char* why = NULL;
    MlirOperation deq = tpc__quantized_use(uses[j].op, uses[j].slot, &qd, &qdflt, &why);
    if (!mlirOperationIsNull(deq)) {
      if (!tpc__gtp_gather_quantized(P, uses[j].op, deq, dim, blocks, depth, what)) {
        free(uses);
        return false;
      }
      continue;
    }
    MlirValue g = kept;
    if (mlirValueIsNull(g)) {
      MlirOperation anchor = tpc__gtp_start_anchor(P, uses[j].index, depth);
      g = tpc__gtp_emit_async(P, TPC_OP_NAME_ALL_GATHER_START, arg, gathered, dim, blocks, (MlirAttribute){NULL}, anchor,
                          uses[j].op, mlirOperationGetLocation(uses[j].op));
      if (P->keep) kept = g;
    }
    mlirOperationSetOperand(uses[j].op, uses[j].slot, g);
  }
  free(uses);
  // Its gradient, if the function returns one.
  MlirOperation ret = mlirBlockGetTerminator(body);
  MlirAttribute res_attrs = mlirOperationGetAttributeByName(P->func, tpc__ref("res_attrs"));
  for (intptr_t j = 0; !mlirAttributeIsNull(res_attrs) && j < mlirArrayAttrGetNumElements(res_attrs); ++j) {
    MlirAttribute of = tpc_slot_attr(P->func, true, j, TPC_RES_ATTR_GRAD_OF);
    if (mlirAttributeIsNull(of) || !mlirAttributeIsAInteger(of) || mlirIntegerAttrGetValueInt(of) != i) continue;
    MlirValue gv = mlirOperationGetOperand(ret, j);
    if (!tpc__gtp_single_use(gv)) {
      tpc_text_t m = {0};
      tpc_text_printf(&m, "tp-gtp: the gradient of %s is also read elsewhere; it cannot become a gtp shard", what);
      tpc__gtp_fail(P, mlirOperationGetLocation(ret), &m);
      return false;
    }
    if (!tpc__gtp_scatter_grad(P, gv, dim, blocks, what)) return false;
    MlirAttribute gshard = tpc_slot_attr(P->func, true, j, TPC_ARG_ATTR_SHARD);
    if (!mlirAttributeIsNull(gshard) && mlirAttributeIsADictionary(gshard))
      tpc__set_slot_attr(P->ctx, P->func, true, j, TPC_ARG_ATTR_SHARD, tpc__shard_with_gtp(P->ctx, gshard, dim));
  }
  return tpc__gtp_shard_update(P, body, i, dim, blocks, what);
}

// The function's type from its block arguments and returned values.
static void tpc__refresh_type(tpc__gtp_t* P, MlirBlock body) {
  intptr_t nargs = mlirBlockGetNumArguments(body);
  MlirOperation ret = mlirBlockGetTerminator(body);
  intptr_t nres = mlirOperationGetNumOperands(ret);
  MlirType* types = calloc((size_t)(nargs + nres + 1), sizeof *types);
  if (!types) return;
  for (intptr_t i = 0; i < nargs; ++i) types[i] = mlirValueGetType(mlirBlockGetArgument(body, i));
  for (intptr_t j = 0; j < nres; ++j) types[nargs + j] = mlirValueGetType(mlirOperationGetOperand(ret, j));
  MlirType ft = mlirFunctionTypeGet(P->ctx, nargs, types, nres, types + nargs);
  mlirOperationSetAttributeByName(P->func, tpc__ref("function_type"), mlirTypeAttrGet(ft));
  free(types);
}

static bool tpc__gtp_func(tpc__gtp_t* P) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(P->func, 0));
  if (mlirBlockIsNull(body)) return true;
  int n = 0;
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) ++n;
  P->ops = calloc((size_t)(n + 1), sizeof *P->ops);
  if (!P->ops) {
    mlirEmitError(mlirOperationGetLocation(P->func), "tp-gtp: out of memory");
    return false;
  }
  P->num_ops = 0;
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    P->ops[P->num_ops++] = o;
  int64_t depth_used = 0;
  for (intptr_t i = 0; P->ok && i < mlirBlockGetNumArguments(body); ++i) tpc__shard_arg(P, body, i, &depth_used);
  for (intptr_t i = 0; i < P->dead.count; ++i) mlirOperationDestroy(P->dead.ops[i]);
  free(P->dead.ops);
  P->dead = (tpc_op_list_t){0};
  free(P->ops);
  P->ops = NULL;
  if (!P->ok) return false;
  tpc__refresh_type(P, body);
  mlirOperationSetAttributeByName(P->func, tpc__ref(TPC_MODULE_ATTR_GTP_PREFETCH),
                                  mlirIntegerAttrGet(mlirIntegerTypeGet(P->ctx, 64), depth_used));
  return true;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

// Argument |i| of |func| marked {tp.gtp = true}, or -1.
static intptr_t tpc__first_marked(MlirOperation func) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  for (intptr_t i = 0; !mlirBlockIsNull(body) && i < mlirBlockGetNumArguments(body); ++i) {
    MlirAttribute a = tpc_slot_attr(func, false, i, TPC_ARG_ATTR_GTP);
    if (!mlirAttributeIsNull(a) && mlirAttributeIsABool(a) && mlirBoolAttrGetValue(a)) return i;
  }
  return -1;
}

static MlirLogicalResult tpc__gtp_run(MlirOperation module, void* options) {
  (void)options;
  tpc__gtp_t P = {.ctx = mlirOperationGetContext(module), .depth = -1, .ok = true};
  MlirAttribute depth = mlirOperationGetAttributeByName(module, tpc__ref(TPC_MODULE_ATTR_GTP_PREFETCH));
  if (!mlirAttributeIsNull(depth) && mlirAttributeIsAInteger(depth)) P.depth = mlirIntegerAttrGetValueInt(depth);
  MlirAttribute keep = mlirOperationGetAttributeByName(module, tpc__ref(TPC_MODULE_ATTR_GTP_KEEP));
  P.keep = !mlirAttributeIsNull(keep) && mlirAttributeIsABool(keep) && mlirBoolAttrGetValue(keep);
  MlirAttribute wgrad = mlirOperationGetAttributeByName(module, tpc__ref(TPC_MODULE_ATTR_GTP_WGRAD));
  if (!mlirAttributeIsNull(wgrad) && mlirAttributeIsAString(wgrad)) {
    MlirStringRef v = mlirStringAttrGetValue(wgrad);
    if (mlirStringRefEqual(v, tpc__ref("scatter"))) P.wgrad = TPC_GTP_WGRAD_SCATTER;
    if (mlirStringRefEqual(v, tpc__ref("gather"))) P.wgrad = TPC_GTP_WGRAD_GATHER;
  }
  // The module's first mesh (tp-shard's), and its gtp axis.
  MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
  MlirOperation mesh = {NULL};
  for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o) && mlirOperationIsNull(mesh);
       o = mlirOperationGetNextInBlock(o))
    if (tpc_is_mesh(o)) mesh = o;
  P.G = 0;
  if (!mlirOperationIsNull(mesh)) {
    MlirAttribute axes = tpc_mesh_get_axes_attr(mesh), shape = tpc_mesh_get_shape_attr(mesh);
    intptr_t at = -1;
    if (tpc__gtp_axes_have(axes, "gtp", &at) && at < mlirDenseArrayGetNumElements(shape))
      P.G = mlirDenseI64ArrayGetElement(shape, at);
    P.mesh_ref = mlirFlatSymbolRefAttrGet(P.ctx, mlirStringAttrGetValue(tpc_mesh_get_sym_name_attr(mesh)));
  }
  for (MlirOperation o = mlirBlockGetFirstOperation(top); P.ok && !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(o)), tpc__ref("func.func"))) continue;
    if (P.G == 0) {
      intptr_t i = tpc__first_marked(o);
      if (i >= 0) {
        char what[160];
        tpc__arg_what(o, i, what, sizeof what);
        tpc_text_t m = {0};
        tpc_text_printf(&m, "tp-gtp: %s is marked tp.gtp = true, but the module's mesh has no gtp axis; add one "
                            "(--mesh tp=2,gtp=2) or drop the mark", what);
        tpc__gtp_fail(&P, mlirOperationGetLocation(o), &m);
      }
      continue;
    }
    if (P.G == 1) continue;
    P.func = o;
    tpc__gtp_func(&P);
  }
  return P.ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

static tpc_pass_info_t tpc__gtp_info = {
    .argument = "tp-gtp",
    .description = "Shard weights over the gtp mesh axis: prefetched all-gathers before each use, gradients reduce-scattered",
    .run = tpc__gtp_run,
};

MlirPass tpc_create_gtp_pass(void) { return tpc_pass_create(&tpc__gtp_info, NULL); }
