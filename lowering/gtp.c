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
#include "text_buffer.h"
#include "tpc_dialect.h"
#include "tpc_verify.h"

// The cost model of the default prefetch depth: one contraction takes 2·M·N·K / PEAK seconds and
// a gather moves (G-1)/G of the gathered bytes at BANDWIDTH (an H100's dense bf16 rate and an
// NVLink all-gather's bus bandwidth, both as measured rather than as specified).
#define TPC_GTP_PEAK_FLOPS 600e12
#define TPC_GTP_BANDWIDTH 200e9
#define TPC_GTP_MAX_AUTO_DEPTH 4

typedef struct {
  MlirContext ctx;
  MlirOperation func;
  MlirAttribute mesh_ref;  // flat symbol ref of the mesh
  int64_t G;               // gtp size
  int64_t depth;           // < 0: choose by the cost model
  bool keep;
  bool ok;
  int64_t cur_depth;  // the prefetch depth of the weight being sharded
  MlirOperation* ops;  // the body's ops before the pass changed it, in order
  int num_ops;
  // Replaced reductions, erased once the function is done (P->ops still names them).
  MlirOperation* dead;
  int num_dead, cap_dead;
} tpc__gtp_t;

static MlirStringRef tpc__ref(const char* s) { return mlirStringRefCreateFromCString(s); }

static MlirNamedAttribute tpc__named(MlirContext ctx, const char* name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(ctx, tpc__ref(name)), a);
}

// "argument 'w1'" (its tp.name) or "argument 3".
static void tpc__arg_what(MlirOperation func, intptr_t i, char* buf, size_t size) {
  MlirStringRef n = tpc_slot_tp_name(func, false, i);
  if (n.data)
    snprintf(buf, size, "argument '%.*s'", (int)(n.length < 100 ? n.length : 100), n.data);
  else
    snprintf(buf, size, "argument %ld", (long)i);
}

static void tpc__fail(tpc__gtp_t* P, MlirLocation loc, tpc_text_t* msg) {
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
// dequantized weight; |why| names what stops its gather (a format whose scale needs the whole
// tensor's amax), or is NULL.
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
  if (tpc_quantize_get_format(op) != TPC_FORMAT_MXFP8 || tpc_quantize_get_axis(op) != TPC_AXIS_ROWWISE)
    *why = tpc_quantize_get_format(op) == TPC_FORMAT_MXFP8
               ? "columnwise MXFP8 scales run along the sharded rows"
               : "its per-tensor scale (FP8, NVFP4's global scale) needs the whole weight's amax, which the gtp shards "
                 "do not share yet";
  return deq;
}

static bool tpc__is_contraction(int kind) {
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

// Seconds the cost model gives |op|: 2 · (result elements) · (contracted size), the contracted
// size being operand 0's last dimension (K of a linear and of attention's head dim), or the
// tokens of a weight gradient. An estimate: it orders prefetch distances, nothing else.
static double tpc__op_seconds(MlirOperation op) {
  int kind = tpc_op_get_kind(op);
  if (!tpc__is_contraction(kind) || mlirOperationGetNumOperands(op) == 0 || mlirOperationGetNumResults(op) == 0)
    return 0;
  MlirType a = mlirValueGetType(mlirOperationGetOperand(op, 0));
  if (!mlirTypeIsARankedTensor(a) || mlirShapedTypeGetRank(a) < 1) return 0;
  intptr_t r = mlirShapedTypeGetRank(a);
  double k = (double)mlirShapedTypeGetDimSize(a, kind == TPC_OP_LINEAR_WGRAD || kind == TPC_OP_GROUPED_LINEAR_WGRAD ? 0 : r - 1);
  return 2.0 * tpc__numel(mlirValueGetType(mlirOperationGetResult(op, 0))) * k / TPC_GTP_PEAK_FLOPS;
}

static int64_t tpc__elem_bytes_x2(MlirType e) {  // twice the bytes of one element (f4 is half a byte)
  if (mlirTypeIsAInteger(e)) return 2 * (int64_t)mlirIntegerTypeGetWidth(e) / 8;
  if (mlirTypeIsAF32(e)) return 8;
  if (mlirTypeIsABF16(e) || mlirTypeIsAF16(e)) return 4;
  if (mlirTypeIsAFloat4E2M1FN(e)) return 1;
  return 2;  // the 8-bit float formats
}

//===----------------------------------------------------------------------===//
// tp.shard attributes
//===----------------------------------------------------------------------===//

// |shard| (a tp.shard dictionary) with "gtp" appended to the axes of dimension |dim|.
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
      intptr_t k = mlirArrayAttrGetNumElements(list);
      for (intptr_t j = 0; j < k && j < 7; ++j) names[j] = mlirArrayAttrGetElement(list, j);
      names[k < 7 ? k : 7] = mlirStringAttrGet(ctx, tpc__ref("gtp"));
      per_dim[d] = mlirArrayAttrGet(ctx, (k < 7 ? k : 7) + 1, names);
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

// The tensor type |t| with dimension |dim| divided by |by| and element type |element| (or t's).
static MlirType tpc__divided(MlirType t, int dim, int64_t by, MlirType element) {
  int64_t shape[8];
  intptr_t rank = mlirShapedTypeGetRank(t);
  for (intptr_t d = 0; d < rank && d < 8; ++d) shape[d] = mlirShapedTypeGetDimSize(t, d);
  shape[dim] /= by;
  return mlirRankedTensorTypeGet(rank, shape, mlirTypeIsNull(element) ? mlirShapedTypeGetElementType(t) : element,
                                 mlirAttributeGetNull());
}

static MlirType tpc__future_of(MlirContext ctx, MlirType t) {
  tpc_text_t s = {0};
  tpc_text_printf(&s, "!tp.future<");
  mlirTypePrint(t, tpc_text_append_ref, &s);
  tpc_text_printf(&s, ">");
  MlirType f = mlirTypeParseGet(ctx, mlirStringRefCreate(s.data, s.len));
  tpc_text_free(&s);
  return f;
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

// Creates "tp.<start>"(in) {mesh, axes = [<axes>], dim, blocks (, order)} -> future<out> before
// |before| and "tp.wait" before |wait_before|; returns the wait's result.
static MlirValue tpc__emit_async(tpc__gtp_t* P, const char* start_name, MlirValue in, MlirType out, int dim,
                                 int64_t blocks, MlirAttribute order, MlirOperation before, MlirOperation wait_before,
                                 MlirLocation loc) {
  MlirType i64 = mlirIntegerTypeGet(P->ctx, 64);
  MlirAttribute gtp = mlirStringAttrGet(P->ctx, tpc__ref("gtp"));
  MlirNamedAttribute attrs[5] = {
      tpc__named(P->ctx, "mesh", P->mesh_ref),
      tpc__named(P->ctx, "axes", mlirArrayAttrGet(P->ctx, 1, &gtp)),
      tpc__named(P->ctx, "dim", mlirIntegerAttrGet(i64, dim)),
      tpc__named(P->ctx, "blocks", mlirIntegerAttrGet(i64, blocks)),
      tpc__named(P->ctx, "order", order),
  };
  MlirType future = tpc__future_of(P->ctx, out);
  MlirOperationState st = mlirOperationStateGet(tpc__ref(start_name), loc);
  mlirOperationStateAddOperands(&st, 1, &in);
  mlirOperationStateAddResults(&st, 1, &future);
  mlirOperationStateAddAttributes(&st, mlirAttributeIsNull(order) ? 4 : 5, attrs);
  MlirOperation start = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before, start);
  MlirValue f = mlirOperationGetResult(start, 0);
  MlirOperationState ws = mlirOperationStateGet(tpc__ref(TPC_OP_NAME_WAIT), loc);
  mlirOperationStateAddOperands(&ws, 1, &f);
  mlirOperationStateAddResults(&ws, 1, &out);
  MlirOperation wait = mlirOperationCreate(&ws);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(wait_before), wait_before, wait);
  return mlirOperationGetResult(wait, 0);
}

static int tpc__index_of(const tpc__gtp_t* P, MlirOperation op) {
  for (int i = 0; i < P->num_ops; ++i)
    if (mlirOperationEqual(P->ops[i], op)) return i;
  return -1;
}

// The op before which a gather needed by the op at index |use| starts: the |depth|-th
// contraction before it, or the first op of the body.
static MlirOperation tpc__start_anchor(const tpc__gtp_t* P, int use, int64_t depth) {
  if (use < 0) return P->ops[0];  // not in the body's op list (cannot happen for tp-shard's output)
  if (depth == 0) return P->ops[use];
  int64_t seen = 0;
  for (int i = use - 1; i >= 0; --i)
    if (tpc__is_contraction(tpc_op_get_kind(P->ops[i])) && ++seen == depth) return P->ops[i];
  return P->ops[0];
}

// The depth the cost model asks for the gather of |bytes| before the op at index |use|: the
// number of contractions before it whose time covers the gather's.
static int64_t tpc__depth_needed(const tpc__gtp_t* P, int use, double bytes) {
  double need = bytes * (double)(P->G - 1) / (double)P->G / TPC_GTP_BANDWIDTH, have = 0;
  int64_t k = 0;
  for (int i = use - 1; i >= 0 && have < need; --i) {
    double t = tpc__op_seconds(P->ops[i]);
    if (t > 0) {
      have += t;
      ++k;
    }
  }
  return k < 1 ? 1 : k;
}

// Quantize-then-gather: the quantize |q| now reads the gtp shard; its data and block scales are
// the shard's rows of the whole weight's (rowwise MXFP8 scales one row's blocks along K, so a row
// quantizes alike in any shard), and all-gathering both, dim and blocks as the weight's, gives the
// tensor-parallel shard's data and scales bitwise: the gather moves 8-bit data and 1/32 of it in
// scales instead of 16-bit weights. The quantize moves to where the gather starts, |depth|
// contractions before the dequantize; the waits go right before the dequantize.
static bool tpc__gather_quantized(tpc__gtp_t* P, MlirOperation q, MlirOperation deq, int dim, int64_t blocks,
                                  int64_t depth) {
  MlirValue data = tpc_quantize_get_data(q), scale = tpc_quantize_get_scale(q);
  MlirType data_t = mlirValueGetType(data), scale_t = mlirValueGetType(scale);
  int64_t rows = mlirShapedTypeGetDimSize(data_t, dim);
  if (dim != 0 || (rows / blocks / P->G) % 128 != 0 || mlirShapedTypeGetDimSize(scale_t, 0) != rows) {
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-gtp: the MXFP8 scales of a gtp shard are gathered whole only when every shard holds a "
                        "multiple of 128 rows (unpadded scale tiles); this weight's shard holds %lld",
                    (long long)(rows / P->G));
    tpc__fail(P, mlirOperationGetLocation(q), &m);
    return false;
  }
  mlirValueSetType(data, tpc__divided(data_t, dim, P->G, (MlirType){NULL}));
  mlirValueSetType(scale, tpc__divided(scale_t, dim, P->G, (MlirType){NULL}));
  MlirOperation anchor = tpc__start_anchor(P, tpc__index_of(P, deq), depth);
  if (!mlirOperationEqual(anchor, q) && mlirOperationIsBeforeInBlock(anchor, q)) mlirOperationMoveBefore(q, anchor);
  MlirOperation after = mlirOperationGetNextInBlock(q);
  MlirLocation loc = mlirOperationGetLocation(q);
  MlirValue gd = tpc__emit_async(P, TPC_OP_NAME_ALL_GATHER_START, data, data_t, dim, blocks, (MlirAttribute){NULL},
                                 after, deq, loc);
  // The scales' gather starts beside the data's, before the data's wait.
  MlirValue gs = tpc__emit_async(P, TPC_OP_NAME_ALL_GATHER_START, scale, scale_t, dim, blocks, (MlirAttribute){NULL},
                                 mlirOpResultGetOwner(gd), deq, loc);
  mlirOperationSetOperand(deq, TPC_DEQUANTIZE_SLOT_DATA, gd);
  mlirOperationSetOperand(deq, TPC_DEQUANTIZE_SLOT_SCALE, gs);
  return true;
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

static bool tpc__axes_have(MlirAttribute axes, const char* name, intptr_t* at) {
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes); ++i) {
    MlirAttribute a = mlirArrayAttrGetElement(axes, i);
    if (mlirAttributeIsAString(a) && mlirStringRefEqual(mlirStringAttrGetValue(a), tpc__ref(name))) {
      *at = i;
      return true;
    }
  }
  return false;
}

static bool tpc__single_use(MlirValue v) {
  MlirOpOperand u = mlirValueGetFirstUse(v);
  return !mlirOpOperandIsNull(u) && mlirOpOperandIsNull(mlirOpOperandGetNextUse(u));
}

// Makes the gradient |v| of a weight sharded along |dim| (blocks |blocks|) a gtp shard: the
// all-reduce over the token axes that completes each contribution becomes a reduce-scatter over
// gtp (then an all-reduce over the other axes); tp.add of contributions adds shards. Returns
// false after a diagnostic.
static bool tpc__scatter_grad(tpc__gtp_t* P, MlirValue v, int dim, int64_t blocks, const char* what) {
  MlirOperation op = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
  int kind = mlirOperationIsNull(op) ? TPC_OP_UNKNOWN : tpc_op_get_kind(op);
  MlirType t = mlirValueGetType(v);
  if (kind == TPC_OP_ADD && tpc__single_use(v)) {
    for (int k = 0; k < 2; ++k)
      if (!tpc__single_use(mlirOperationGetOperand(op, k)) ||
          !tpc__scatter_grad(P, mlirOperationGetOperand(op, k), dim, blocks, what))
        return false;
    mlirValueSetType(v, tpc__divided(t, dim, P->G, (MlirType){NULL}));
    return true;
  }
  intptr_t at = -1;
  MlirAttribute axes = kind == TPC_OP_ALL_REDUCE ? tpc_all_reduce_get_axes_attr(op) : (MlirAttribute){NULL};
  if (kind != TPC_OP_ALL_REDUCE || !tpc__axes_have(axes, "gtp", &at)) {
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-gtp: the gradient of %s is not summed over the gtp axis here, so it cannot be "
                        "reduce-scattered to the weight's gtp shards (is the weight used on tokens that are not "
                        "sharded over gtp?)", what);
    tpc__fail(P, mlirOperationGetLocation(mlirOperationIsNull(op) ? P->func : op), &m);
    return false;
  }
  MlirValue partial = tpc_all_reduce_get_input(op);
  MlirLocation loc = mlirOperationGetLocation(op);
  // The wait: before the first reader of the sum, or earlier, before the (depth + 1)-th
  // contraction after the reduction, so that only a few full-size f32 partials are live at once
  // (the backward's next contractions overlap the reduce-scatter).
  MlirOperation first = {NULL};
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    if (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(user, first)) first = user;
  }
  // (Depth 0, the unoverlapped schedule: before the op that follows the reduction.)
  int64_t seen = 0;
  for (int i = tpc__index_of(P, op) + 1; i > 0 && i < P->num_ops; ++i) {
    if (P->cur_depth > 0 && (!tpc__is_contraction(tpc_op_get_kind(P->ops[i])) || ++seen <= P->cur_depth)) continue;
    if (mlirOperationIsBeforeInBlock(P->ops[i], first)) first = P->ops[i];
    break;
  }
  intptr_t n = mlirArrayAttrGetNumElements(axes);
  MlirAttribute order = mlirOperationGetAttributeByName(op, tpc__ref("order"));
  MlirType final = tpc__divided(t, dim, P->G, (MlirType){NULL});
  MlirType scattered = n > 1 ? tpc__divided(t, dim, P->G, mlirShapedTypeGetElementType(mlirValueGetType(partial))) : final;
  MlirValue shard = tpc__emit_async(P, TPC_OP_NAME_REDUCE_SCATTER_START, partial, scattered, dim, blocks, order, op,
                                    first, loc);
  if (n > 1) {
    MlirAttribute rest[8];
    intptr_t r = 0;
    for (intptr_t i = 0; i < n && r < 8; ++i)
      if (i != at) rest[r++] = mlirArrayAttrGetElement(axes, i);
    MlirNamedAttribute attrs[3] = {
        tpc__named(P->ctx, "mesh", tpc_all_reduce_get_mesh_attr(op)),
        tpc__named(P->ctx, "axes", mlirArrayAttrGet(P->ctx, r, rest)),
        tpc__named(P->ctx, "order", order),
    };
    MlirOperationState st = mlirOperationStateGet(tpc__ref(TPC_OP_NAME_ALL_REDUCE), loc);
    mlirOperationStateAddOperands(&st, 1, &shard);
    mlirOperationStateAddResults(&st, 1, &final);
    mlirOperationStateAddAttributes(&st, mlirAttributeIsNull(order) ? 2 : 3, attrs);
    MlirOperation ar = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(first), first, ar);
    shard = mlirOperationGetResult(ar, 0);
  }
  mlirValueReplaceAllUsesOfWith(v, shard);
  if (P->num_dead == P->cap_dead) {
    int cap = P->cap_dead ? 2 * P->cap_dead : 16;
    MlirOperation* grown = realloc(P->dead, (size_t)cap * sizeof *grown);
    if (!grown) {
      mlirEmitError(loc, "tp-gtp: out of memory");
      P->ok = false;
      return false;
    }
    P->dead = grown;
    P->cap_dead = cap;
  }
  P->dead[P->num_dead++] = op;
  return true;
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
static bool tpc__shard_arg(tpc__gtp_t* P, MlirBlock body, intptr_t i, int64_t* depth_used) {
  MlirValue arg = mlirBlockGetArgument(body, i);
  char what[160];
  tpc__arg_what(P->func, i, what, sizeof what);
  MlirAttribute mark = tpc_slot_attr(P->func, false, i, TPC_ARG_ATTR_GTP);
  bool explicit_on = !mlirAttributeIsNull(mark) && mlirAttributeIsABool(mark) && mlirBoolAttrGetValue(mark);
  if (!mlirAttributeIsNull(mark) && !explicit_on) return true;  // tp.gtp = false
  MlirAttribute shard = tpc_slot_attr(P->func, false, i, TPC_ARG_ATTR_SHARD);
  // The uses, and whether each can take a gathered weight.
  int num_uses = 0, dim = -1;
  bool eligible = true, by_default = true;
  for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    int d = -1;
    bool dflt = false;
    const char* why = NULL;
    MlirOperation user = mlirOpOperandGetOwner(u);
    bool quantized = !mlirOperationIsNull(tpc__quantized_use(user, mlirOpOperandGetOperandNumber(u), &d, &dflt, &why));
    if (quantized && why && (explicit_on || dflt)) {
      // Never a silently whole weight: a GTP weight whose format cannot be gathered is an error.
      tpc_text_t m = {0};
      tpc_text_printf(&m, "tp-gtp: %s is quantized before its linear, and its shards cannot be gathered as quantized "
                          "bytes: %s; use mxfp8 (rowwise), or mark it {tp.gtp = false}", what, why);
      tpc__fail(P, mlirOperationGetLocation(user), &m);
      return false;
    }
    if ((!quantized && !tpc__weight_use(user, mlirOpOperandGetOperandNumber(u), &d, &dflt)) || (dim >= 0 && d != dim)) {
      if (explicit_on) {
        MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(user));
        tpc_text_t m = {0};
        tpc_text_printf(&m, "tp-gtp: %s is marked tp.gtp = true, but '%.*s' operand %u cannot take a gathered "
                            "weight (only the weight of tp.linear, tp.grouped_linear and their dgrad can)",
                        what, (int)n.length, n.data, mlirOpOperandGetOperandNumber(u));
        tpc__fail(P, mlirOperationGetLocation(user), &m);
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
      tpc__fail(P, mlirOperationGetLocation(P->func), &m);
      return false;
    }
    return true;
  }
  if (mlirAttributeIsNull(shard) || !mlirAttributeIsADictionary(shard)) {
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-gtp: %s has no tp.shard layout; run tp-shard before tp-gtp", what);
    tpc__fail(P, mlirOperationGetLocation(P->func), &m);
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
    tpc__fail(P, mlirOperationGetLocation(P->func), &m);
    return false;
  }
  // The uses in program order.
  tpc__use_t* uses = calloc((size_t)num_uses, sizeof *uses);
  if (!uses) {
    mlirEmitError(mlirOperationGetLocation(P->func), "tp-gtp: out of memory");
    P->ok = false;
    return false;
  }
  int k = 0;
  for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u) && k < num_uses;
       u = mlirOpOperandGetNextUse(u), ++k) {
    uses[k].op = mlirOpOperandGetOwner(u);
    uses[k].slot = mlirOpOperandGetOperandNumber(u);
    uses[k].index = tpc__index_of(P, uses[k].op);
  }
  qsort(uses, (size_t)num_uses, sizeof *uses, tpc__use_cmp);
  MlirType gathered = t;
  double bytes = tpc__numel(t) * (double)tpc__elem_bytes_x2(mlirShapedTypeGetElementType(t)) / 2.0;
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
  mlirBlockArgumentSetType(arg, tpc__divided(t, dim, P->G, (MlirType){NULL}));
  tpc__set_slot_attr(P->ctx, P->func, false, i, TPC_ARG_ATTR_SHARD, tpc__shard_with_gtp(P->ctx, shard, dim));
  // One gather per use (or one for all, kept).
  MlirValue kept = {NULL};
  for (int j = 0; j < num_uses; ++j) {
    int qd = -1;
    bool qdflt = false;
    const char* why = NULL;
    MlirOperation deq = tpc__quantized_use(uses[j].op, uses[j].slot, &qd, &qdflt, &why);
    if (!mlirOperationIsNull(deq)) {
      if (!tpc__gather_quantized(P, uses[j].op, deq, dim, blocks, depth)) {
        free(uses);
        return false;
      }
      continue;
    }
    MlirValue g = kept;
    if (mlirValueIsNull(g)) {
      MlirOperation anchor = tpc__start_anchor(P, uses[j].index, depth);
      g = tpc__emit_async(P, TPC_OP_NAME_ALL_GATHER_START, arg, gathered, dim, blocks, (MlirAttribute){NULL}, anchor,
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
    if (!tpc__single_use(gv)) {
      tpc_text_t m = {0};
      tpc_text_printf(&m, "tp-gtp: the gradient of %s is also read elsewhere; it cannot become a gtp shard", what);
      tpc__fail(P, mlirOperationGetLocation(ret), &m);
      return false;
    }
    if (!tpc__scatter_grad(P, gv, dim, blocks, what)) return false;
    MlirAttribute gshard = tpc_slot_attr(P->func, true, j, TPC_ARG_ATTR_SHARD);
    if (!mlirAttributeIsNull(gshard) && mlirAttributeIsADictionary(gshard))
      tpc__set_slot_attr(P->ctx, P->func, true, j, TPC_ARG_ATTR_SHARD, tpc__shard_with_gtp(P->ctx, gshard, dim));
  }
  return true;
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
  for (int i = 0; i < P->num_dead; ++i) mlirOperationDestroy(P->dead[i]);
  free(P->dead);
  P->dead = NULL;
  P->num_dead = P->cap_dead = 0;
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
    if (tpc__axes_have(axes, "gtp", &at) && at < mlirDenseArrayGetNumElements(shape))
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
        tpc__fail(&P, mlirOperationGetLocation(o), &m);
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
