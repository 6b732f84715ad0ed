// tp-shard: a logical module with a sharding plan -> the program every rank runs.
//
//   IN:  %u = "tp.linear"(%h, %w1) {parallel = "column"} : (...x128xbf16, 512x128xbf16) -> 16x512xbf16
//        %a = "tp.glu"(%u) {kind = "swiglu"} ...
//        %d = "tp.linear"(%a, %w2) {parallel = "row"} : (16x256xbf16, 128x256xbf16) -> 16x128xbf16
//   OUT (--mesh tp=4):
//        func.func @mlp(..., %w1: tensor<128x128xbf16> {tp.shard = {axes = [["tp"], []], blocks = array<i64: 2, 1>, ...}}, ...)
//        %u = "tp.linear"(%h, %w1) {parallel = "column"} : (16x128, 128x128) -> 16x128
//        %a = "tp.glu"(%u) ...                                               -> 16x64
//        %p = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (16x64, 128x64) -> 16x128xf32
//        %d = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (16x128xf32) -> 16x128xbf16
//
// The mesh is the module's first tp.mesh (tpc-opt/tpc-compile --mesh declares it). Its axes have
// roles by name: "tp" shards linears (column: N, row: K; sequence parallel: tokens), "dp" shards
// the tokens of activations, "ep" spreads experts, and "gtp" shards tokens as dp does (its ranks
// take their own batch; tp-gtp, after this pass, shards the weights over it), and "mb" shards the
// tokens into micro-batches as dp does, but its members are one rank's successive calls: the
// gradient reductions over it are where tp-micro-batch later cuts the step in two. A layout is tracked for every value (shard_layout.h); each op's rule
// checks its operands' layouts, inserts the collectives the plan implies and gives its results
// their layouts. Function arguments take the layout of their first use (shard_args.c: weights as
// the op's parallel attribute says, activations sharded over dp, and over tp under sequence
// parallelism), and every argument and result records it as `tp.shard`, from which the runtime
// slices checkpoints and reassembles outputs. A plan that cannot be realised is an error at the op.
// Like tp-lower-runtime, the pass writes the new function as text and parses it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "shard_impl.h"
#include "shard_layout.h"
#include "text_buffer.h"
#include "tpc_dialect.h"
#include "tpc_verify.h"

//===----------------------------------------------------------------------===//
// Op rules
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__shard_linear(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins, int nin) {
  uint32_t tp = tpc__bit(S->tp);
  int64_t tp_size = tpc_mesh_group_size(&S->mesh, tp);
  int par = tpc_linear_get_parallel(op);
  bool sp = tpc_linear_get_sequence_parallel(op);
  tpc__sval_t* x = ins[0];
  MlirType yt = mlirValueGetType(tpc_linear_get_y(op));
  tpc_layout_t y = tpc_layout_replicated(yt);
  if (x->layout.mask[1] && par != TPC_PARALLEL_ROW)
    return tpc__layout_error(S, op, "input x", &x->layout,
                             "only a row-parallel linear takes an input sharded along K (set parallel = \"row\")");
  if (sp && tp_size > 1 && par == TPC_PARALLEL_COLUMN) {
    if (!(x->layout.mask[0] & tp))
      return tpc__layout_error(S, op, "input x", &x->layout,
                               "sequence parallelism needs the tokens sharded over tp before the column-parallel linear");
    x = tpc__gather_tokens(S, x);
    ins[0] = x;
  } else if ((x->layout.mask[0] & tp) && tp_size > 1 && par == TPC_PARALLEL_COLUMN) {
    // A replicated linear (a router) simply runs on the local tokens.
    return tpc__layout_error(S, op, "input x", &x->layout,
                             "its tokens are sharded over tp; set sequence_parallel = true on this linear");
  }
  y.mask[0] = x->layout.mask[0];
  if (par == TPC_PARALLEL_COLUMN) {
    y.mask[1] = ins[1]->layout.mask[0];
    y.blocks[1] = ins[1]->layout.blocks[0];
    tpc__emit_op(S, op, ins, nin, &y, 1, NULL, NULL);
    return mlirLogicalResultSuccess();
  }
  if (par != TPC_PARALLEL_ROW || tp_size == 1) {
    tpc__emit_op(S, op, ins, nin, &y, 1, NULL, NULL);
    return mlirLogicalResultSuccess();
  }
  // Row parallel: each rank sums its K slice into an f32 partial; the collective completes it.
  if (!(x->layout.mask[1] & tp) || x->layout.blocks[1] != 1)
    return tpc__layout_error(S, op, "input x", &x->layout,
                             "a row-parallel linear needs its input sharded along K over tp (the output of a "
                             "column-parallel linear or of the GLU after it)");
  tpc_layout_t partial = y;
  partial.element = mlirF32TypeGet(mlirOperationGetContext(op));
  // The bias is added once, after the reduction, not by every rank's partial.
  tpc__emit_op(S, op, ins, 2, &partial, 1, "partial = true", "partial");
  tpc__sval_t* p = &S->vals[S->num_vals - 1];
  p->value = (MlirValue){NULL};  // the op's result is the reduced value below, not the partial
  tpc_layout_t out = y;
  const char* coll = TPC_OP_NAME_ALL_REDUCE;
  const char* extra = "";
  if (sp) {
    out.mask[0] |= tp;
    coll = TPC_OP_NAME_REDUCE_SCATTER;
    extra = ", dim = 0 : i64";
  }
  if (mlirLogicalResultIsFailure(tpc__check_divisible(S, op, "result", &out))) return mlirLogicalResultFailure();
  tpc__sval_t* r = tpc__emit_collective(S, coll, p, extra, &out);
  if (!r) return mlirLogicalResultFailure();
  if (nin > 2) {
    // "tp.add"(reduced, bias): a rank-1 bias broadcast over the rows.
    char name[32];
    snprintf(name, sizeof name, "%%b%d", S->counter++);
    tpc_text_printf(&S->body, "    %s = \"%s\"(%s, %s) : (", name, TPC_OP_NAME_ADD, r->name, ins[2]->name);
    tpc_layout_print_local_type(&out, &S->mesh, &S->body);
    tpc_text_printf(&S->body, ", ");
    tpc_layout_print_local_type(&ins[2]->layout, &S->mesh, &S->body);
    tpc_text_printf(&S->body, ") -> ");
    tpc_layout_print_local_type(&out, &S->mesh, &S->body);
    tpc_text_printf(&S->body, "\n");
    r = tpc__new_value(S, (MlirValue){NULL}, name, &out);
    if (!r) return mlirLogicalResultFailure();
  }
  r->value = tpc_linear_get_y(op);
  return mlirLogicalResultSuccess();
}

tpc__sval_t* tpc__dispatch(tpc__shard_t* S, tpc__sval_t* x, tpc__sval_t* sizes) {
  if (x->dispatched) return x->dispatched;
  int64_t P = S->mesh.sizes[S->ep];
  int64_t rows = tpc_layout_local_dim(&x->layout, &S->mesh, 0), cols = tpc_layout_local_dim(&x->layout, &S->mesh, 1);
  tpc_layout_t buf = tpc__local_only(&x->layout, P * rows, cols, x->layout.element);
  tpc__sval_t* b = tpc__emit_bucket(S, TPC_OP_NAME_MOE_BUCKET, x, sizes, P, &buf);
  tpc__sval_t* recv = tpc__emit_collective_on(S, S->ep, TPC_OP_NAME_ALL_TO_ALL, b, ", split_dim = 0 : i64, concat_dim = 0 : i64", &buf);
  if (!recv) return NULL;
  // Every rank learns how many rows each peer sends per local expert, once per permutation.
  if (!sizes->recv_sizes)
    sizes->recv_sizes = tpc__emit_collective_on(S, S->ep, TPC_OP_NAME_ALL_TO_ALL, sizes,
                                                ", split_dim = 0 : i64, concat_dim = 0 : i64", &sizes->layout);
  if (!sizes->recv_sizes) return NULL;
  recv->recv_sizes = sizes->recv_sizes;
  recv->own_sizes = sizes;
  x->dispatched = recv;
  return recv;
}

tpc__sval_t* tpc__combine(tpc__shard_t* S, tpc__sval_t* x) {
  if (x->combined) return x->combined;
  int64_t P = S->mesh.sizes[S->ep];
  tpc__sval_t* back = tpc__emit_collective_on(S, S->ep, TPC_OP_NAME_ALL_TO_ALL, x,
                                              ", split_dim = 0 : i64, concat_dim = 0 : i64", &x->layout);
  if (!back) return NULL;
  tpc_layout_t rows = tpc__local_only(&x->layout, tpc_layout_local_dim(&x->layout, &S->mesh, 0) / P,
                                      tpc_layout_local_dim(&x->layout, &S->mesh, 1), x->layout.element);
  x->combined = tpc__emit_bucket(S, TPC_OP_NAME_MOE_UNBUCKET, back, x->own_sizes, P, &rows);
  return x->combined;
}

static MlirLogicalResult tpc__shard_grouped_linear(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins, int nin) {
  uint32_t tp = tpc__bit(S->tp);
  int64_t tp_size = tpc_mesh_group_size(&S->mesh, tp);
  int par = tpc_grouped_linear_get_parallel(op);
  tpc__sval_t* x = ins[0];
  bool ep = S->ep >= 0 && S->mesh.sizes[S->ep] > 1;
  if (ep && tp_size > 1 && tpc_grouped_linear_get_sequence_parallel(op)) {
    // The dispatched rows would have to be gathered over tp inside each ep bucket; until then
    // refuse rather than compute the wrong rows.
    tpc_text_t m = {0};
    tpc_text_printf(&m,
                    "tp-shard: sequence parallelism inside expert-parallel experts (ep=%lld with tp=%lld) is not "
                    "supported yet; drop sequence_parallel on the grouped linears, or use ep alone",
                    (long long)S->mesh.sizes[S->ep], (long long)tp_size);
    return tpc__error(op, &m);
  }
  if (ep && !x->recv_sizes) {
    if (S->mesh.sizes[S->ep] > 1 && tpc_layout_local_dim(&ins[2]->layout, &S->mesh, 0) % S->mesh.sizes[S->ep] != 0) {
      tpc_text_t m = {0};
      tpc_text_printf(&m, "tp-shard: %lld experts cannot be spread over ep=%lld", (long long)ins[2]->layout.logical[0],
                      (long long)S->mesh.sizes[S->ep]);
      return tpc__error(op, &m);
    }
    x = tpc__dispatch(S, x, ins[2]);
    if (!x) return mlirLogicalResultFailure();
  }
  tpc__sval_t* recv_sizes = x->recv_sizes;
  tpc__sval_t* own_sizes = x->own_sizes;
  if (recv_sizes) {
    ins[0] = x;
    ins[2] = recv_sizes;
  }
  // Sequence parallelism: every tp rank routed its own tokens; the column-parallel grouped linear
  // all-gathers the rows and their counts (one segment per rank), the row-parallel one
  // reduce-scatters its partial back to the rank that owns the rows.
  bool sp = tpc_grouped_linear_get_sequence_parallel(op) && tp_size > 1;
  tpc__sval_t* seg = x->seg_sizes;
  if (sp && !seg && (x->layout.mask[0] & tp)) {
    ins[2] = tpc__gather_counts(S, ins[2]);
    x = ins[0] = tpc__gather_tokens(S, x);
    seg = ins[2];
  } else if (seg) {
    ins[2] = seg;
  }
  if ((x->layout.mask[0] & tp) && tp_size > 1)  // a size-1 axis shards nothing
    return tpc__layout_error(S, op, "input x", &x->layout,
                             "its tokens are sharded over tp; set sequence_parallel = true on this grouped linear");
  tpc_layout_t y = tpc_layout_replicated(mlirValueGetType(tpc_grouped_linear_get_y(op)));
  y.mask[0] = x->layout.mask[0];
  if (recv_sizes) y.logical[0] = tpc_layout_local_dim(&x->layout, &S->mesh, 0);
  if (par == TPC_PARALLEL_COLUMN) {
    y.mask[1] = ins[1]->layout.mask[1];
    y.blocks[1] = ins[1]->layout.blocks[1];
  }
  if (par != TPC_PARALLEL_ROW || tp_size == 1) {
    if (x->layout.mask[1] && par != TPC_PARALLEL_ROW)
      return tpc__layout_error(S, op, "input x", &x->layout, "only a row-parallel grouped linear takes K sharded");
    tpc__emit_op(S, op, ins, nin, &y, 1, NULL, NULL);
    S->vals[S->num_vals - 1].recv_sizes = recv_sizes;
    S->vals[S->num_vals - 1].own_sizes = own_sizes;
    S->vals[S->num_vals - 1].seg_sizes = seg;
    return mlirLogicalResultSuccess();
  }
  if (!(x->layout.mask[1] & tp))
    return tpc__layout_error(S, op, "input x", &x->layout,
                             "a row-parallel grouped linear needs its input sharded along K over tp");
  tpc_layout_t partial = y;
  partial.element = mlirF32TypeGet(mlirOperationGetContext(op));
  tpc__emit_op(S, op, ins, nin, &partial, 1, "partial = true", "partial");
  S->vals[S->num_vals - 1].value = (MlirValue){NULL};  // the result is the reduced value
  if (seg) y.mask[0] |= tp;  // reduce-scattered back to the rows' owners
  tpc__sval_t* r = tpc__emit_collective(S, seg ? TPC_OP_NAME_REDUCE_SCATTER : TPC_OP_NAME_ALL_REDUCE,
                                        &S->vals[S->num_vals - 1], seg ? ", dim = 0 : i64" : "", &y);
  if (!r) return mlirLogicalResultFailure();
  r->value = tpc_grouped_linear_get_y(op);
  r->recv_sizes = recv_sizes;
  r->own_sizes = own_sizes;
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__shard_glu(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins) {
  const tpc_layout_t* x = &ins[0]->layout;
  int last = x->rank - 1;
  int64_t interleave = tpc_glu_get_interleave(op);
  tpc_layout_t y = *x;
  y.logical[last] /= 2;
  y.blocks[last] = 1;
  if (x->mask[last]) {
    if (interleave == 0 && x->blocks[last] != 2)
      return tpc__layout_error(S, op, "input x", x,
                               "with interleave = 0 the gate and up halves must be sharded in 2 blocks (stride 2)");
    if (interleave > 0 && (x->blocks[last] != 1 || tpc_layout_local_dim(x, &S->mesh, last) % (2 * interleave) != 0))
      return tpc__layout_error(S, op, "input x", x, "each rank must hold whole interleaved gate/up blocks");
  }
  tpc__emit_op(S, op, ins, 1, &y, 1, NULL, NULL);
  S->vals[S->num_vals - 1].recv_sizes = ins[0]->recv_sizes;
  S->vals[S->num_vals - 1].own_sizes = ins[0]->own_sizes;
  S->vals[S->num_vals - 1].seg_sizes = ins[0]->seg_sizes;
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__shard_other(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin) {
  const tpc_layout_t* x = &ins[0]->layout;
  tpc_layout_t outs[4];
  int nout = (int)mlirOperationGetNumResults(op);
  for (int i = 0; i < nout && i < 4; ++i) outs[i] = tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, i)));
  switch (kind) {
    case TPC_OP_RMSNORM:
    case TPC_OP_LAYERNORM:
      if (x->mask[1]) return tpc__layout_error(S, op, "input x", x, "a norm needs whole rows (hidden unsharded)");
      for (int i = 1; i < nin; ++i)
        if (ins[i]->layout.mask[0])
          return tpc__layout_error(S, op, "gamma/beta", &ins[i]->layout, "norm parameters are replicated");
      outs[0] = *x;
      break;
    case TPC_OP_ADD:
    case TPC_OP_MUL:
      if (kind == TPC_OP_ADD && ins[1]->layout.rank == 1 && x->rank > 1) {
        // A bias: replicated, or sharded like lhs's last dimension.
        if (ins[1]->layout.mask[0] != x->mask[x->rank - 1] || ins[1]->layout.blocks[0] != x->blocks[x->rank - 1])
          return tpc__layout_error(S, op, "bias", &ins[1]->layout, "it must be sharded like lhs's last dimension");
        outs[0] = *x;
        break;
      }
      if (!tpc_layout_equal(x, &ins[1]->layout)) {
        tpc_text_t m = {0};
        tpc_text_printf(&m, "tp-shard: the operands are laid out differently: lhs ");
        tpc_layout_describe(x, &S->mesh, &m);
        tpc_text_printf(&m, ", rhs ");
        tpc_layout_describe(&ins[1]->layout, &S->mesh, &m);
        return tpc__error(op, &m);
      }
      outs[0] = *x;
      break;
    case TPC_OP_QUANTIZE:
    case TPC_OP_DEQUANTIZE:
      if (mlirLogicalResultIsFailure(tpc__shard_quant(S, op, kind, x, outs))) return mlirLogicalResultFailure();
      break;
    case TPC_OP_MOE_ROUTE:
      if (x->mask[1]) return tpc__layout_error(S, op, "logits", x, "routing needs every expert's logit");
      for (int i = 0; i < 2; ++i) outs[i].mask[0] = x->mask[0];
      break;
    case TPC_OP_SAMPLE:
    case TPC_OP_CROSS_ENTROPY_LOGITS: {
      // Every rank draws from (or takes the loss of) whole rows: a vocabulary-parallel head's
      // logits are gathered first, so the draw (and its token) is the one of a single rank at every
      // TP degree, and the loss has the one rank's bits.
      tpc__sval_t* l = tpc__gather_tokens(S, ins[0]);
      uint32_t tp = tpc__bit(S->tp);
      if (l->layout.mask[1] & ~tp)
        return tpc__layout_error(S, op, "logits", &l->layout, "only tp may shard the vocabulary of the logits");
      if ((l->layout.mask[1] & tp) && tpc_mesh_group_size(&S->mesh, tp) > 1) {
        if (l->layout.blocks[1] != 1)
          return tpc__layout_error(S, op, "logits", &l->layout, "the vocabulary must be one contiguous block per rank");
        tpc_layout_t g = l->layout;
        g.mask[1] &= ~tp;
        l = tpc__emit_collective_mask(S, tp, TPC_OP_NAME_ALL_GATHER, l, ", dim = 1 : i64", &g);
      }
      ins[0] = l;
      for (int i = 1; i < nin; ++i)
        if (ins[i]->layout.mask[0] != l->layout.mask[0])
          return tpc__layout_error(S, op, "a per-row operand", &ins[i]->layout,
                                   "it must be sharded like the rows of logits");
      for (int i = 0; i < nout; ++i) outs[i].mask[0] = l->layout.mask[0];
      break;
    }
    case TPC_OP_MOE_PERMUTE:
      if (x->mask[1]) return tpc__layout_error(S, op, "input x", x, "permuting needs whole rows");
      outs[0].mask[0] = x->mask[0];
      outs[2].mask[0] = x->mask[0];
      break;
    case TPC_OP_MOE_UNPERMUTE:
      if (x->mask[1]) return tpc__layout_error(S, op, "input y", x, "the combine needs whole rows");
      if (ins[0]->own_sizes) {
        // Bring the expert outputs back to the ranks that own the tokens, in expert order.
        ins[0] = tpc__combine(S, ins[0]);
        if (!ins[0]) return mlirLogicalResultFailure();
        outs[0].mask[0] = ins[1]->layout.mask[0];
      } else {
        outs[0].mask[0] = x->mask[0];
      }
      break;
    default: {
      MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
      tpc_text_t m = {0};
      tpc_text_printf(&m, "tp-shard: '%.*s' has no sharding rule; a logical module holds compute ops only "
                          "(tp-shard inserts the collectives)", (int)n.length, n.data);
      return tpc__error(op, &m);
    }
  }
  for (int i = 0; i < nout; ++i)
    if (mlirLogicalResultIsFailure(tpc__check_divisible(S, op, "result", &outs[i]))) return mlirLogicalResultFailure();
  tpc__emit_op(S, op, ins, nin, outs, nout, NULL, NULL);
  return mlirLogicalResultSuccess();
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

static void tpc__print_slot_attrs(tpc__shard_t* S, tpc_text_t* t, MlirOperation func, bool result, intptr_t i,
                                  const tpc_layout_t* l) {
  tpc_text_printf(t, " {");
  MlirAttribute dict = tpc_slot_dict(func, result, i);
  bool first = true;
  for (intptr_t k = 0; !mlirAttributeIsNull(dict) && mlirAttributeIsADictionary(dict) &&
                       k < mlirDictionaryAttrGetNumElements(dict);
       ++k) {
    MlirNamedAttribute na = mlirDictionaryAttrGetElement(dict, k);
    MlirStringRef n = mlirIdentifierStr(na.name);
    if (mlirStringRefEqual(n, mlirStringRefCreateFromCString(TPC_ARG_ATTR_SHARD))) continue;
    tpc_text_printf(t, "%s", first ? "" : ", ");
    tpc_text_attr_name(t, n);
    tpc_text_printf(t, " = ");
    mlirAttributePrint(na.attribute, tpc_text_append_ref, t);
    first = false;
  }
  tpc_text_printf(t, "%s" TPC_ARG_ATTR_SHARD " = ", first ? "" : ", ");
  tpc_layout_print_attr(l, &S->mesh, t);
  tpc_text_printf(t, "}");
}

static MlirLogicalResult tpc__shard_func(tpc__shard_t* S, tpc_text_t* out) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(S->func, 0));
  S->sp = false;
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    if ((tpc_is_linear(o) && tpc_linear_get_sequence_parallel(o)) ||
        (tpc_is_grouped_linear(o) && tpc_grouped_linear_get_sequence_parallel(o)) ||
        (tpc_is_embedding(o) && tpc_embedding_get_sequence_parallel(o)))
      S->sp = true;
  if (mlirLogicalResultIsFailure(tpc__arg_layouts(S, body))) return mlirLogicalResultFailure();
  MlirOperation ret = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    if (mlirStringRefEqual(n, mlirStringRefCreateFromCString("func.return"))) {
      ret = op;
      break;
    }
    int kind = tpc_op_get_kind(op);
    S->cur_op = op;
    tpc__sval_t* ins[16];
    int nin = (int)mlirOperationGetNumOperands(op);
    if (kind == TPC_OP_UNKNOWN || nin > 16) {
      mlirEmitError(mlirOperationGetLocation(op), "tp-shard: only tp ops can be sharded");
      return mlirLogicalResultFailure();
    }
    for (int i = 0; i < nin; ++i) {
      ins[i] = tpc__find(S, mlirOperationGetOperand(op, i));
      if (!ins[i]) {
        mlirEmitError(mlirOperationGetLocation(op), "tp-shard: operand defined outside the function");
        return mlirLogicalResultFailure();
      }
    }
    // Weight operands must have the layout the op's plan gives them.
    for (int i = 0; i < nin; ++i) {
      tpc_layout_t want = tpc_layout_replicated(mlirValueGetType(mlirOperationGetOperand(op, i)));
      if (tpc__weight_layout(S, op, kind, i, &want) && !tpc_layout_equal(&want, &ins[i]->layout)) {
        tpc_text_t m = {0};
        tpc_text_printf(&m, "tp-shard: operand %d is laid out ", i);
        tpc_layout_describe(&ins[i]->layout, &S->mesh, &m);
        tpc_text_printf(&m, " but this op's plan needs ");
        tpc_layout_describe(&want, &S->mesh, &m);
        tpc_text_printf(&m, " (a weight shared by ops with different plans?)");
        return tpc__error(op, &m);
      }
    }
    MlirLogicalResult r;
    if (kind == TPC_OP_LINEAR)
      r = tpc__shard_linear(S, op, ins, nin);
    else if (kind == TPC_OP_GROUPED_LINEAR)
      r = tpc__shard_grouped_linear(S, op, ins, nin);
    else if (kind == TPC_OP_GLU)
      r = tpc__shard_glu(S, op, ins);
    else if (kind == TPC_OP_AMAX)
      r = tpc__shard_amax(S, op, ins);
    else if (tpc__is_attention_op(kind))
      r = tpc__shard_attention(S, op, kind, ins, nin);
    else if (tpc__is_vocab_op(kind))
      r = tpc__shard_vocab(S, op, kind, ins, nin);
    else if (tpc__is_grad_op(kind))
      r = tpc__shard_grad(S, op, kind, ins, nin);
    else
      r = tpc__shard_other(S, op, kind, ins, nin);
    if (mlirLogicalResultIsFailure(r)) return r;
  }
  if (mlirOperationIsNull(ret)) {
    mlirEmitError(mlirOperationGetLocation(S->func), "tp-shard: the function has no func.return");
    return mlirLogicalResultFailure();
  }
  // A training step's cotangent arguments were laid out like activations; each must match its
  // result's layout, or the backward ops consumed it with the wrong shape.
  MlirAttribute arg_attrs = mlirOperationGetAttributeByName(S->func, mlirStringRefCreateFromCString("arg_attrs"));
  for (intptr_t i = 0; !mlirAttributeIsNull(arg_attrs) && i < mlirArrayAttrGetNumElements(arg_attrs); ++i) {
    MlirAttribute d = mlirArrayAttrGetElement(arg_attrs, i);
    MlirAttribute cj = mlirAttributeIsADictionary(d)
                           ? mlirDictionaryAttrGetElementByName(d, mlirStringRefCreateFromCString(TPC_ARG_ATTR_COTANGENT))
                           : (MlirAttribute){NULL};
    if (mlirAttributeIsNull(cj) || !mlirAttributeIsAInteger(cj)) continue;
    int64_t j = mlirIntegerAttrGetValueInt(cj);
    if (j < 0 || j >= mlirOperationGetNumOperands(ret)) continue;
    const tpc__sval_t* res = tpc__find(S, mlirOperationGetOperand(ret, j));
    const tpc__sval_t* cot = &S->vals[i];
    if (!res || tpc_layout_equal(&res->layout, &cot->layout)) continue;
    tpc_text_t m = {0};
    tpc_text_printf(&m, "tp-shard: training step: result %lld is laid out ", (long long)j);
    tpc_layout_describe(&res->layout, &S->mesh, &m);
    tpc_text_printf(&m, ", but its cotangent argument is laid out like an activation, ");
    tpc_layout_describe(&cot->layout, &S->mesh, &m);
    tpc_text_printf(&m, "; return a value that is replicated or sharded along the tokens only (e.g. after a "
                        "row-parallel linear)");
    return tpc__error(ret, &m);
  }
  MlirStringRef fname = mlirStringAttrGetValue(mlirOperationGetAttributeByName(S->func, mlirStringRefCreateFromCString("sym_name")));
  tpc_text_printf(out, "  func.func ");
  tpc_text_symbol_ref(out, "", fname);
  tpc_text_printf(out, "(");
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(body); ++i) {
    const tpc__sval_t* a = &S->vals[i];
    tpc_text_printf(out, "%s%s: ", i ? ", " : "", a->name);
    tpc_layout_print_local_type(&a->layout, &S->mesh, out);
    tpc__print_slot_attrs(S, out, S->func, false, i, &a->layout);
  }
  tpc_text_printf(out, ") -> (");
  intptr_t nres = mlirOperationGetNumOperands(ret);
  for (intptr_t j = 0; j < nres; ++j) {
    const tpc__sval_t* v = tpc__find(S, mlirOperationGetOperand(ret, j));
    if (j) tpc_text_printf(out, ", ");
    tpc_layout_print_local_type(&v->layout, &S->mesh, out);
    tpc__print_slot_attrs(S, out, S->func, true, j, &v->layout);
  }
  tpc_text_printf(out, ") {\n%s    return", S->body.data ? S->body.data : "");
  for (intptr_t j = 0; j < nres; ++j) tpc_text_printf(out, "%s %s", j ? "," : "", tpc__find(S, mlirOperationGetOperand(ret, j))->name);
  if (nres) tpc_text_printf(out, " :");
  for (intptr_t j = 0; j < nres; ++j) {
    tpc_text_printf(out, "%s ", j ? "," : "");
    tpc_layout_print_local_type(&tpc__find(S, mlirOperationGetOperand(ret, j))->layout, &S->mesh, out);
  }
  // The return and the function keep the user's locations, for the diagnostics of later passes.
  tpc_text_printf(out, " ");
  mlirLocationPrint(mlirOperationGetLocation(ret), tpc_text_append_ref, out);
  tpc_text_printf(out, "\n  } ");
  mlirLocationPrint(mlirOperationGetLocation(S->func), tpc_text_append_ref, out);
  tpc_text_printf(out, "\n");
  return mlirLogicalResultSuccess();
}

//===----------------------------------------------------------------------===//
// Pass callbacks
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__read_mesh(MlirOperation module, tpc_mesh_t* mesh, MlirOperation* out_mesh) {
  MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
  for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!tpc_is_mesh(o)) continue;
    MlirAttribute axes = tpc_mesh_get_axes_attr(o), shape = tpc_mesh_get_shape_attr(o);
    MlirStringRef name = mlirStringAttrGetValue(tpc_mesh_get_sym_name_attr(o));
    mesh->name = name;
    mesh->num_axes = (int)mlirArrayAttrGetNumElements(axes);
    if (mesh->num_axes > TPC_LAYOUT_MAX_AXES) {
      char msg[160];
      snprintf(msg, sizeof msg, "tp-shard: mesh '%.*s' has %d axes; tp-shard partitions over at most %d (tp, dp, ep, gtp)",
               (int)name.length, name.data, mesh->num_axes, TPC_LAYOUT_MAX_AXES);
      mlirEmitError(mlirOperationGetLocation(o), msg);
      return mlirLogicalResultFailure();
    }
    for (int i = 0; i < mesh->num_axes; ++i) {
      MlirStringRef a = mlirStringAttrGetValue(mlirArrayAttrGetElement(axes, i));
      snprintf(mesh->axes[i], sizeof mesh->axes[i], "%.*s", (int)a.length, a.data);
      mesh->sizes[i] = mlirDenseI64ArrayGetElement(shape, i);
    }
    *out_mesh = o;
    return mlirLogicalResultSuccess();
  }
  mlirEmitError(mlirOperationGetLocation(module),
                "tp-shard: the module declares no tp.mesh; pass --mesh tp=N (and dp=M) or declare one");
  return mlirLogicalResultFailure();
}

static MlirLogicalResult tpc__shard_run(MlirOperation module, void* options) {
  (void)options;
  tpc__shard_t* S = calloc(1, sizeof *S);
  if (!S) return mlirLogicalResultFailure();
  MlirOperation mesh_op = {NULL};
  bool ok = mlirLogicalResultIsSuccess(tpc__read_mesh(module, &S->mesh, &mesh_op));
  S->tp = S->dp = S->ep = S->gtp = S->mb = -1;
  for (int i = 0; ok && i < S->mesh.num_axes; ++i) {
    if (!strcmp(S->mesh.axes[i], "tp")) {
      S->tp = i;
    } else if (!strcmp(S->mesh.axes[i], "dp")) {
      S->dp = i;
    } else if (!strcmp(S->mesh.axes[i], "ep")) {
      S->ep = i;
    } else if (!strcmp(S->mesh.axes[i], "gtp")) {
      S->gtp = i;
    } else if (!strcmp(S->mesh.axes[i], "mb")) {
      S->mb = i;
    } else if (S->mesh.sizes[i] > 1) {
      char msg[256];
      snprintf(msg, sizeof msg, "tp-shard: mesh axis '%s' (size %lld) has no sharding role; tp-shard knows tp, dp, ep, gtp and mb",
               S->mesh.axes[i], (long long)S->mesh.sizes[i]);
      mlirEmitError(mlirOperationGetLocation(mesh_op), msg);
      ok = false;
    }
  }
  tpc_text_t funcs = {0};
  MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
  for (MlirOperation o = mlirBlockGetFirstOperation(top); ok && !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(o));
    if (!mlirStringRefEqual(n, mlirStringRefCreateFromCString("func.func")) ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(o, 0))))
      continue;
    tpc_mesh_t mesh = S->mesh;
    int tp = S->tp, dp = S->dp, ep = S->ep, gtp = S->gtp, mb = S->mb;
    memset(S, 0, sizeof *S);
    S->mesh = mesh;
    S->tp = tp;
    S->dp = dp;
    S->ep = ep;
    S->gtp = gtp;
    S->mb = mb;
    S->func = o;
    S->cap_vals = tpc_func_value_bound(o, 16);
    S->vals = calloc((size_t)S->cap_vals, sizeof *S->vals);
    if (!S->vals) {
      mlirEmitError(mlirOperationGetLocation(o), "tp-shard: out of memory for the function's value table");
      ok = false;
      break;
    }
    ok = mlirLogicalResultIsSuccess(tpc__shard_func(S, &funcs));
    tpc_text_free(&S->body);
    free(S->vals);
    S->vals = NULL;
  }
  if (ok) ok = tpc_replace_functions(module, funcs.data, false, "tp-shard", "sharded IR");
  tpc_text_free(&funcs);
  free(S);
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

//===----------------------------------------------------------------------===//
// Public constructor
//===----------------------------------------------------------------------===//

static tpc_pass_info_t tpc__shard_info = {
    .argument = "tp-shard",
    .description = "Partition a logical module over the module's mesh into the per-rank program",
    .run = tpc__shard_run,
};

MlirPass tpc_create_shard_pass(void) { return tpc_pass_create(&tpc__shard_info, NULL); }
