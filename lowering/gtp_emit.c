// tp-gtp's emission (see gtp.c for the pass): the all-gathers of a weight before its uses, the
// quantize-then-gather of a quantized weight (with the amax all-reduce of the per-tensor formats),
// and the reduce-scatters of its gradient.
#include <stdio.h>
#include <stdlib.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "gtp_impl.h"
#include "lower_runtime_impl.h"
#include "tpc_dialect.h"
#include "tprt_dtype.h"

// The tensor type |t| with dimension |dim| divided by |by| and element type |element| (or t's).
MlirType tpc__gtp_divided(MlirType t, int dim, int64_t by, MlirType element) {
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

// Creates "<start_name>"(in) {attrs} -> future<out> before |before| and "tp.wait" before
// |wait_before|; returns the wait's result.
static MlirValue tpc__gtp_emit_start(tpc__gtp_t* P, const char* start_name, MlirValue in, MlirType out,
                                     const MlirNamedAttribute* attrs, intptr_t num_attrs, MlirOperation before,
                                     MlirOperation wait_before, MlirLocation loc) {
  MlirType future = tpc__future_of(P->ctx, out);
  MlirOperationState st = mlirOperationStateGet(tpc__ref(start_name), loc);
  mlirOperationStateAddOperands(&st, 1, &in);
  mlirOperationStateAddResults(&st, 1, &future);
  mlirOperationStateAddAttributes(&st, num_attrs, attrs);
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

// Creates "tp.<start>"(in) {mesh, axes = [<axes>], dim, blocks (, order)} -> future<out> before
// |before| and "tp.wait" before |wait_before|; returns the wait's result.
MlirValue tpc__gtp_emit_async(tpc__gtp_t* P, const char* start_name, MlirValue in, MlirType out, int dim,
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
  return tpc__gtp_emit_start(P, start_name, in, out, attrs, mlirAttributeIsNull(order) ? 4 : 5, before, wait_before,
                             loc);
}

int tpc__gtp_index_of(const tpc__gtp_t* P, MlirOperation op) {
  for (int i = 0; i < P->num_ops; ++i)
    if (mlirOperationEqual(P->ops[i], op)) return i;
  return -1;
}

// The op before which a gather needed by the op at index |use| starts: the |depth|-th
// contraction before it, or the first op of the body.
MlirOperation tpc__gtp_start_anchor(const tpc__gtp_t* P, int use, int64_t depth) {
  if (use < 0) return P->ops[0];  // not in the body's op list (cannot happen for tp-shard's output)
  if (depth == 0) return P->ops[use];
  int64_t seen = 0;
  for (int i = use - 1; i >= 0; --i)
    if (tpc__gtp_is_contraction(tpc_op_get_kind(P->ops[i])) && ++seen == depth) return P->ops[i];
  return P->ops[0];
}

// Creates "tp.all_reduce"(in) {mesh, axes = ["gtp"], reduce = "max"} before |before|.
static MlirValue tpc__gtp_emit_max(tpc__gtp_t* P, MlirValue in, MlirOperation before, MlirLocation loc) {
  MlirAttribute gtp = mlirStringAttrGet(P->ctx, tpc__ref("gtp"));
  MlirNamedAttribute attrs[3] = {
      tpc__named(P->ctx, "mesh", P->mesh_ref),
      tpc__named(P->ctx, "axes", mlirArrayAttrGet(P->ctx, 1, &gtp)),
      tpc__named(P->ctx, "reduce", mlirStringAttrGet(P->ctx, tpc__ref("max"))),
  };
  MlirType t = mlirValueGetType(in);
  MlirOperationState st = mlirOperationStateGet(tpc__ref(TPC_OP_NAME_ALL_REDUCE), loc);
  mlirOperationStateAddOperands(&st, 1, &in);
  mlirOperationStateAddResults(&st, 1, &t);
  mlirOperationStateAddAttributes(&st, 3, attrs);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before, op);
  return mlirOperationGetResult(op, 0);
}

void tpc__gtp_complete_amax(tpc__gtp_t* P, MlirOperation amax) {
  MlirValue a = tpc_amax_get_amax(amax);
  MlirOperation next = mlirOperationGetNextInBlock(amax);
  MlirValue m = tpc__gtp_emit_max(P, a, next, mlirOperationGetLocation(amax));
  MlirOperation except = mlirOpResultGetOwner(m);
  mlirValueReplaceAllUsesExcept(a, m, 1, &except);
}

// Whether |v| (a quantize's amax operand) is made from a function argument by a tp.amax and max
// all-reduces only (tp-shard's over tp, tp-gtp's over gtp): ops that can move anywhere earlier.
static bool tpc__amax_of_arg(MlirValue v) {
  while (!mlirValueIsNull(v) && mlirValueIsAOpResult(v)) {
    MlirOperation p = mlirOpResultGetOwner(v);
    int kind = tpc_op_get_kind(p);
    if (kind == TPC_OP_AMAX) return mlirValueIsABlockArgument(tpc_amax_get_x(p));
    if (kind != TPC_OP_ALL_REDUCE || tpc_all_reduce_get_reduce(p) != TPC_REDUCE_MAX) return false;
    v = tpc_all_reduce_get_input(p);
  }
  return false;
}

// Moves the op that makes |v|, after the ops that make its operand, right before |*anchor| when it
// comes later; an op that is the anchor stays, and the anchor moves past it.
static void tpc__move_amax_chain(MlirValue v, MlirOperation* anchor) {
  MlirOperation p = mlirOpResultGetOwner(v);
  if (tpc_op_get_kind(p) == TPC_OP_ALL_REDUCE) tpc__move_amax_chain(tpc_all_reduce_get_input(p), anchor);
  if (mlirOperationEqual(p, *anchor))
    *anchor = mlirOperationGetNextInBlock(p);
  else if (mlirOperationIsBeforeInBlock(*anchor, p))
    mlirOperationMoveBefore(p, *anchor);
}

// Moves the quantize |q| to |anchor| (where its gathers start), with the ops that make its amax
// operand: an amax of the weight moves too (its ops read nothing but the weight); an operand made
// otherwise keeps its place, and the quantize then goes no earlier than right after it.
static void tpc__move_quantize(MlirOperation q, MlirOperation anchor) {
  if (mlirOperationEqual(anchor, q) || !mlirOperationIsBeforeInBlock(anchor, q)) return;
  MlirValue amax = tpc_quantize_get_amax(q);
  if (tpc__amax_of_arg(amax)) {
    tpc__move_amax_chain(amax, &anchor);
  } else if (!mlirValueIsNull(amax) && mlirValueIsAOpResult(amax)) {
    MlirOperation def = mlirOpResultGetOwner(amax);
    if (mlirOperationIsBeforeInBlock(anchor, def)) anchor = mlirOperationGetNextInBlock(def);
  }
  if (!mlirOperationEqual(anchor, q)) mlirOperationMoveBefore(q, anchor);
}

// Quantize-then-gather: the quantize |q| now reads the gtp shard, and its data and block scales
// are the shard's rows of the whole weight's: rowwise block scales (MXFP8's, NVFP4's) scale one
// row's blocks along K, and the per-tensor scale (FP8's, NVFP4's global scale, which every E4M3
// block scale is divided by) comes from the whole weight's amax: the shard's tp.amax completed by a
// max all-reduce over gtp (exact, so every rank gets the whole weight's), the quantize's amax
// operand. So every rank computes the same per-tensor scale, and all-gathering the data and the
// block scales, dim and blocks as the weight's, gives the tensor-parallel shard's data and scales
// bitwise: the gathers move 8-bit (4-bit) data and 1/32 (1/16) of it in scales instead of 16-bit
// weights. The quantize (and its amax) moves to where the gathers start, |depth| contractions
// before the dequantize; the waits go right before the dequantize.
bool tpc__gtp_gather_quantized(tpc__gtp_t* P, MlirOperation q, MlirOperation deq, int dim, int64_t blocks,
                               int64_t depth, const char* what) {
  int format = tpc_quantize_get_format(q);
  bool block = format == TPC_FORMAT_MXFP8 || format == TPC_FORMAT_NVFP4;
  MlirValue data = tpc_quantize_get_data(q), scale = tpc_quantize_get_scale(q);
  MlirType data_t = mlirValueGetType(data), scale_t = mlirValueGetType(scale);
  int64_t rows = mlirShapedTypeGetDimSize(data_t, dim);
  if (dim != 0 || (block && ((rows / blocks / P->G) % 128 != 0 || mlirShapedTypeGetDimSize(scale_t, 0) != rows))) {
    tpc_text_t m = {0};
    tpc_text_printf(&m,
                    "tp-gtp: %s is quantized to %s, whose scales come in tiles of 128 rows: a gtp shard is "
                    "gathered with its scales only when it holds whole, unpadded tiles (a multiple of 128 rows",
                    what, tpc_format_names[format]);
    if (blocks > 1) tpc_text_printf(&m, " in each of its %lld blocks", (long long)blocks);
    tpc_text_printf(&m,
                    "); this weight's shard holds %lld rows%s; change the gtp size or the width, or mark it "
                    "{tp.gtp = false}",
                    (long long)(rows / blocks / P->G), blocks > 1 ? " in each" : "");
    tpc__gtp_fail(P, mlirOperationGetLocation(q), &m);
    return false;
  }
  mlirValueSetType(data, tpc__gtp_divided(data_t, dim, P->G, (MlirType){NULL}));
  if (block) mlirValueSetType(scale, tpc__gtp_divided(scale_t, dim, P->G, (MlirType){NULL}));
  tpc__move_quantize(q, tpc__gtp_start_anchor(P, tpc__gtp_index_of(P, deq), depth));
  MlirLocation loc = mlirOperationGetLocation(q);
  if (format != TPC_FORMAT_MXFP8 && mlirValueIsNull(tpc_quantize_get_amax(q))) {
    // The per-tensor formats: the shard's amax, then the whole weight's over gtp, right before the
    // quantize, which takes it as its amax operand.
    MlirValue x = tpc_quantize_get_x(q);
    MlirType f32x1 = mlirRankedTensorTypeGet(1, (int64_t[]){1}, mlirF32TypeGet(P->ctx), mlirAttributeGetNull());
    MlirOperationState st = mlirOperationStateGet(tpc__ref(TPC_OP_NAME_AMAX), loc);
    mlirOperationStateAddOperands(&st, 1, &x);
    mlirOperationStateAddResults(&st, 1, &f32x1);
    MlirOperation amax = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(q), q, amax);
    MlirValue operands[2] = {x, tpc__gtp_emit_max(P, mlirOperationGetResult(amax, 0), q, loc)};
    mlirOperationSetOperands(q, 2, operands);
  }
  MlirOperation after = mlirOperationGetNextInBlock(q);
  MlirValue gd = tpc__gtp_emit_async(P, TPC_OP_NAME_ALL_GATHER_START, data, data_t, dim, blocks, (MlirAttribute){NULL},
                                     after, deq, loc);
  mlirOperationSetOperand(deq, TPC_DEQUANTIZE_SLOT_DATA, gd);
  if (block) {
    // The block scales' gather starts right after the data's (both overlap the same contractions)
    // and is waited for after it; a per-tensor scale (and NVFP4's global scale) is the same on
    // every rank and stays.
    MlirOperation data_start = mlirOpResultGetOwner(mlirOperationGetOperand(mlirOpResultGetOwner(gd), 0));
    MlirValue gs = tpc__gtp_emit_async(P, TPC_OP_NAME_ALL_GATHER_START, scale, scale_t, dim, blocks,
                                       (MlirAttribute){NULL}, mlirOperationGetNextInBlock(data_start), deq, loc);
    mlirOperationSetOperand(deq, TPC_DEQUANTIZE_SLOT_SCALE, gs);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

bool tpc__gtp_axes_have(MlirAttribute axes, const char* name, intptr_t* at) {
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes); ++i) {
    MlirAttribute a = mlirArrayAttrGetElement(axes, i);
    if (mlirAttributeIsAString(a) && mlirStringRefEqual(mlirStringAttrGetValue(a), tpc__ref(name))) {
      *at = i;
      return true;
    }
  }
  return false;
}

bool tpc__gtp_single_use(MlirValue v) {
  MlirOpOperand u = mlirValueGetFirstUse(v);
  return !mlirOpOperandIsNull(u) && mlirOpOperandIsNull(mlirOpOperandGetNextUse(u));
}

// Creates "tp.all_reduce"(in) -> |final| over |axes| but the one at |at| (the gtp axis), on |ar|'s
// mesh and with its order, before |before|: the sum over the other token axes of a gtp shard.
static MlirValue tpc__gtp_rest_all_reduce(tpc__gtp_t* P, MlirOperation ar, MlirAttribute axes, intptr_t at,
                                          MlirValue in, MlirType final, MlirOperation before) {
  MlirAttribute rest[8];
  intptr_t r = 0;
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes) && r < 8; ++i)
    if (i != at) rest[r++] = mlirArrayAttrGetElement(axes, i);
  MlirAttribute order = mlirOperationGetAttributeByName(ar, tpc__ref("order"));
  MlirNamedAttribute attrs[3] = {
      tpc__named(P->ctx, "mesh", tpc_all_reduce_get_mesh_attr(ar)),
      tpc__named(P->ctx, "axes", mlirArrayAttrGet(P->ctx, r, rest)),
      tpc__named(P->ctx, "order", order),
  };
  MlirOperationState st = mlirOperationStateGet(tpc__ref(TPC_OP_NAME_ALL_REDUCE), mlirOperationGetLocation(ar));
  mlirOperationStateAddOperands(&st, 1, &in);
  mlirOperationStateAddResults(&st, 1, &final);
  mlirOperationStateAddAttributes(&st, mlirAttributeIsNull(order) ? 2 : 3, attrs);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before, op);
  return mlirOperationGetResult(op, 0);
}

// Queues |op| for erasure once the function is done (P->ops still names it); false when out of memory.
static bool tpc__gtp_mark_dead(tpc__gtp_t* P, MlirOperation op) {
  if (tpc_op_list_push(&P->dead, op)) return true;
  mlirEmitError(mlirOperationGetLocation(op), "tp-gtp: out of memory");
  P->ok = false;
  return false;
}

bool tpc__gtp_wgrad_gathers(const tpc__gtp_t* P, MlirOperation wgrad, double* gather_s) {
  double G = (double)P->G;
  // (tp.linear_wgrad and tp.grouped_linear_wgrad: operands dy, x (then the group sizes), result dw.)
  double partial = tpc__gtp_bytes(mlirValueGetType(mlirOperationGetResult(wgrad, 0)));
  double x = tpc__gtp_bytes(mlirValueGetType(mlirOperationGetOperand(wgrad, 1)));
  double dy = tpc__gtp_bytes(mlirValueGetType(mlirOperationGetOperand(wgrad, 0)));
  // The reduce-scatter moves (G-1)/G of the f32 partial and its sum reads G slices of the shard and
  // writes one, on the compute stream; the gathers move G-1 copies of x and (G-1)/G of dy.
  double s = partial * (G - 1) / G / TPC_GTP_BANDWIDTH + partial * (G + 1) / G / TPC_GTP_HBM_BANDWIDTH;
  double g = (x * (G - 1) + dy * (G - 1) / G) / TPC_GTP_BANDWIDTH;
  if (gather_s) *gather_s = g;
  if (P->wgrad == TPC_GTP_WGRAD_GATHER) return true;
  if (P->wgrad == TPC_GTP_WGRAD_SCATTER) return false;
  return g <= s;
}

// The gather form of the gradient |ar| (an all-reduce over |axes|, gtp at |at|) of the partial
// tp.linear_wgrad (or tp.grouped_linear_wgrad) |wg| of a weight sharded along its output features
// in |blocks| blocks: every rank contracts the tokens of every gtp rank for its shard's rows,
//   x_all = all_gather(x) over gtp along the tokens,
//   dy_own = all_to_all(dy) over gtp, split along N (block by block), concatenated along the tokens
//            (both started where the partial was computed),
//   dw = tp.linear_wgrad(dy_own, x_all)             (before |first|, with the waits),
// then an all-reduce over the other axes, if any. Returns the shard (the chain's final value).
static MlirValue tpc__gtp_gather_wgrad(tpc__gtp_t* P, MlirOperation ar, MlirOperation wg, MlirAttribute axes,
                                       intptr_t at, int64_t blocks, MlirOperation first) {
  MlirLocation loc = mlirOperationGetLocation(wg);
  MlirType i64 = mlirIntegerTypeGet(P->ctx, 64);
  bool grouped = tpc_op_get_kind(wg) == TPC_OP_GROUPED_LINEAR_WGRAD;
  MlirValue dy = mlirOperationGetOperand(wg, 0), x = mlirOperationGetOperand(wg, 1);
  MlirType xt = mlirValueGetType(x), dyt = mlirValueGetType(dy);
  int64_t xs[2] = {mlirShapedTypeGetDimSize(xt, 0) * P->G, mlirShapedTypeGetDimSize(xt, 1)};
  int64_t ds[2] = {mlirShapedTypeGetDimSize(dyt, 0) * P->G, mlirShapedTypeGetDimSize(dyt, 1) / P->G};
  MlirType x_all = mlirRankedTensorTypeGet(2, xs, mlirShapedTypeGetElementType(xt), mlirAttributeGetNull());
  MlirType dy_own = mlirRankedTensorTypeGet(2, ds, mlirShapedTypeGetElementType(dyt), mlirAttributeGetNull());
  // Both transfers start where the partial was computed and have until |first| (the contractions
  // the reduce-scatter would have overlapped); starting x's earlier would only keep the gathered
  // copy, g times x, live longer.
  // (Before the reduction, after the partial: an earlier gradient's wgrad that waits at the
  // partial comes first, and frees its gathered operands before these are allocated.)
  MlirValue xg = tpc__gtp_emit_async(P, TPC_OP_NAME_ALL_GATHER_START, x, x_all, 0, 1, (MlirAttribute){NULL}, ar,
                                     first, loc);
  MlirAttribute gtp = mlirStringAttrGet(P->ctx, tpc__ref("gtp"));
  MlirNamedAttribute a2a[5] = {
      tpc__named(P->ctx, "mesh", P->mesh_ref),
      tpc__named(P->ctx, "axes", mlirArrayAttrGet(P->ctx, 1, &gtp)),
      tpc__named(P->ctx, "split_dim", mlirIntegerAttrGet(i64, 1)),
      tpc__named(P->ctx, "concat_dim", mlirIntegerAttrGet(i64, 0)),
      tpc__named(P->ctx, "blocks", mlirIntegerAttrGet(i64, blocks)),
  };
  MlirValue dg = tpc__gtp_emit_start(P, TPC_OP_NAME_ALL_TO_ALL_START, dy, dy_own, a2a, 5, ar, first, loc);
  // A grouped wgrad's rows arrive as one segment per gtp rank (in rank order, which is token
  // order): its [E] counts gathered into [G·E], segment by segment.
  MlirValue counts = {NULL};
  if (grouped) {
    MlirValue sizes = tpc_grouped_linear_wgrad_get_group_sizes(wg);
    MlirType st = mlirValueGetType(sizes);
    int64_t cs[1] = {mlirShapedTypeGetDimSize(st, 0) * P->G};
    counts = tpc__gtp_emit_async(P, TPC_OP_NAME_ALL_GATHER_START, sizes,
                                 mlirRankedTensorTypeGet(1, cs, mlirShapedTypeGetElementType(st), mlirAttributeGetNull()),
                                 0, 1, (MlirAttribute){NULL}, ar, first, loc);
  }
  // The contraction over every gtp rank's tokens: the partial's attributes (partial only when
  // other axes still sum it), the shard's type.
  intptr_t n = mlirArrayAttrGetNumElements(axes);
  int wdim = grouped ? 1 : 0;  // the weight's output features
  MlirType final = tpc__gtp_divided(mlirValueGetType(mlirOperationGetResult(ar, 0)), wdim, P->G, (MlirType){NULL});
  MlirType out = n > 1 ? tpc__gtp_divided(mlirValueGetType(mlirOperationGetResult(wg, 0)), wdim, P->G, (MlirType){NULL})
                       : final;
  MlirNamedAttribute attrs[16];
  intptr_t na = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(wg) && na < 15; ++i) {
    MlirNamedAttribute e = mlirOperationGetAttribute(wg, i);
    MlirStringRef name = mlirIdentifierStr(e.name);
    if (mlirStringRefEqual(name, tpc__ref("partial")) || mlirStringRefEqual(name, tpc__ref("chunks"))) continue;
    attrs[na++] = e;
  }
  if (n > 1) attrs[na++] = tpc__named(P->ctx, "partial", mlirBoolAttrGet(P->ctx, 1));
  MlirOperationState st = mlirOperationStateGet(mlirIdentifierStr(mlirOperationGetName(wg)), loc);
  MlirValue operands[3] = {dg, xg, counts};
  mlirOperationStateAddOperands(&st, grouped ? 3 : 2, operands);
  mlirOperationStateAddResults(&st, 1, &out);
  mlirOperationStateAddAttributes(&st, na, attrs);
  MlirOperation whole = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(first), first, whole);
  MlirValue shard = mlirOperationGetResult(whole, 0);
  return n > 1 ? tpc__gtp_rest_all_reduce(P, ar, axes, at, shard, final, first) : shard;
}

// Whether the partial |wg| of a weight sharded along |dim|, summed over |axes|, has a gather form:
// a linear's weight gradient; a grouped linear's over gtp alone, whose rows are its own tokens'
// (counts [E], not segments already), so that the gtp ranks' rows are one segment each. (Over dp
// too, an expert's rows would have to come from every rank of the reduction: tp-invariant's
// gather of them, docs/numerics.md.)
static bool tpc__gtp_has_gather_form(const tpc__gtp_t* P, MlirOperation wg, int dim, MlirAttribute axes) {
  (void)P;
  int kind = tpc_op_get_kind(wg);
  if (kind == TPC_OP_LINEAR_WGRAD) return dim == 0;
  if (kind != TPC_OP_GROUPED_LINEAR_WGRAD || dim != 1 || mlirArrayAttrGetNumElements(axes) != 1) return false;
  MlirType sizes = mlirValueGetType(tpc_grouped_linear_wgrad_get_group_sizes(wg));
  MlirType dw = mlirValueGetType(tpc_grouped_linear_wgrad_get_dw(wg));
  return mlirShapedTypeGetRank(sizes) == 1 && mlirShapedTypeGetDimSize(sizes, 0) == mlirShapedTypeGetDimSize(dw, 0);
}

// Makes the gradient |v| of a weight sharded along |dim| (blocks |blocks|) a gtp shard: the
// all-reduce over the token axes that completes each contribution becomes a reduce-scatter over
// gtp (then an all-reduce over the other axes); tp.add of contributions adds shards. Returns
// false after a diagnostic.
bool tpc__gtp_scatter_grad(tpc__gtp_t* P, MlirValue v, int dim, int64_t blocks, const char* what) {
  MlirOperation op = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
  int kind = mlirOperationIsNull(op) ? TPC_OP_UNKNOWN : tpc_op_get_kind(op);
  MlirType t = mlirValueGetType(v);
  if (kind == TPC_OP_ADD && tpc__gtp_single_use(v)) {
    for (int k = 0; k < 2; ++k)
      if (!tpc__gtp_single_use(mlirOperationGetOperand(op, k)) ||
          !tpc__gtp_scatter_grad(P, mlirOperationGetOperand(op, k), dim, blocks, what))
        return false;
    mlirValueSetType(v, tpc__gtp_divided(t, dim, P->G, (MlirType){NULL}));
    return true;
  }
  intptr_t at = -1;
  MlirAttribute axes = kind == TPC_OP_ALL_REDUCE ? tpc_all_reduce_get_axes_attr(op) : (MlirAttribute){NULL};
  if (kind != TPC_OP_ALL_REDUCE || !tpc__gtp_axes_have(axes, "gtp", &at)) {
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-gtp: the gradient of %s is not summed over the gtp axis here, so it cannot be "
                        "reduce-scattered to the weight's gtp shards (is the weight used on tokens that are not "
                        "sharded over gtp?)", what);
    tpc__gtp_fail(P, mlirOperationGetLocation(mlirOperationIsNull(op) ? P->func : op), &m);
    return false;
  }
  MlirValue partial = tpc_all_reduce_get_input(op);
  MlirLocation loc = mlirOperationGetLocation(op);
  // A linear's weight gradient may instead contract every gtp rank's tokens for this rank's rows.
  MlirOperation wg = mlirValueIsAOpResult(partial) ? mlirOpResultGetOwner(partial) : (MlirOperation){NULL};
  double gather_s = 0;
  bool gather = !mlirOperationIsNull(wg) && tpc__gtp_has_gather_form(P, wg, dim, axes) &&
                tpc__gtp_single_use(partial) && tpc__gtp_index_of(P, wg) >= 0 &&
                tpc__gtp_wgrad_gathers(P, wg, &gather_s);
  // The wait: before the first reader of the sum, or earlier, before the (k + 1)-th contraction
  // after the reduction, so that the k contractions in between overlap the transfers: k is the
  // depth, so that only a few full-size f32 partials are live at once; for the gather form, whose
  // inputs (x and dy) stay live until the wait, the fewest contractions (at least one) that the
  // cost model says outlast its transfers, at most the depth.
  int64_t k = P->cur_depth;
  if (gather && k > 1) {
    double have = 0;
    int64_t need = 0;
    for (int i = tpc__gtp_index_of(P, op) + 1; i > 0 && i < P->num_ops && (need == 0 || have < gather_s); ++i) {
      double sec = tpc__gtp_op_seconds(P->ops[i]);
      if (sec > 0) {
        have += sec;
        ++need;
      }
    }
    if (need >= 1 && need < k) k = need;
  }
  MlirOperation first = {NULL};
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    if (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(user, first)) first = user;
  }
  // (Depth 0, the unoverlapped schedule: before the op that follows the reduction.)
  int64_t seen = 0;
  for (int i = tpc__gtp_index_of(P, op) + 1; i > 0 && i < P->num_ops; ++i) {
    if (k > 0 && (!tpc__gtp_is_contraction(tpc_op_get_kind(P->ops[i])) || ++seen <= k)) continue;
    if (mlirOperationIsBeforeInBlock(P->ops[i], first)) first = P->ops[i];
    break;
  }
  intptr_t n = mlirArrayAttrGetNumElements(axes);
  MlirAttribute order = mlirOperationGetAttributeByName(op, tpc__ref("order"));
  MlirType final = tpc__gtp_divided(t, dim, P->G, (MlirType){NULL});
  MlirType scattered = n > 1 ? tpc__gtp_divided(t, dim, P->G, mlirShapedTypeGetElementType(mlirValueGetType(partial))) : final;
  if (gather) {
    mlirValueReplaceAllUsesOfWith(v, tpc__gtp_gather_wgrad(P, op, wg, axes, at, blocks, first));
    return tpc__gtp_mark_dead(P, op) && tpc__gtp_mark_dead(P, wg);  // the reduction first: it reads wg
  }
  MlirValue shard = tpc__gtp_emit_async(P, TPC_OP_NAME_REDUCE_SCATTER_START, partial, scattered, dim, blocks, order,
                                        op, first, loc);
  if (n > 1) shard = tpc__gtp_rest_all_reduce(P, op, axes, at, shard, final, first);
  mlirValueReplaceAllUsesOfWith(v, shard);
  return tpc__gtp_mark_dead(P, op);
}
