// tp-shard rules of the whole-model ops (docs/passes.md, "tp-shard"; docs/dialect.md, "Embedding
// and loss" and "Optimizer"). With `parallel = "vocab"` the table (or the LM head) is split by
// rows over tp, Megatron's vocabulary-parallel layers:
//
//   tp.embedding     each rank looks up the tokens whose ids it holds (-0.0 for the others) and
//                    an all-reduce over tp (a reduce-scatter along the tokens under sequence
//                    parallelism) sums them: one nonzero term per element, so the sum is exact;
//   tp.cross_entropy each rank computes the statistics of its vocabulary blocks for every token
//                    (tp.cross_entropy_stats; x is first all-gathered along the tokens under
//                    sequence parallelism), an all-gather over tp brings every rank's, and
//                    tp.cross_entropy_combine finishes the block tree in rank order;
//   the gradients    embedding_grad and cross_entropy_wgrad give each rank its rows (summed over
//                    the data-parallel tokens); cross_entropy_dgrad's contraction over the
//                    vocabulary is an f32 partial completed over tp (reduce-scattered under
//                    sequence parallelism).
//
// Token ids and targets are never split over tp here: every vocabulary shard needs every token's.
// Without `parallel = "vocab"` (or on one tp rank) the ops run on the local tokens with the
// whole table, and their weight gradients are summed over the token axes.
//
// The optimizer: tp.adamw runs on each rank's share of a parameter (its master weight and moments
// are laid out like the parameter); tp.sumsq counts a gradient element on one rank only (member
// 0 of the axes it is replicated over); tp.global_norm first all-gathers every rank's accumulator.
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "shard_impl.h"
#include "tpc_dialect.h"

bool tpc__is_vocab_op(int kind) {
  switch (kind) {
    case TPC_OP_EMBEDDING:
    case TPC_OP_EMBEDDING_GRAD:
    case TPC_OP_CROSS_ENTROPY:
    case TPC_OP_CROSS_ENTROPY_DGRAD:
    case TPC_OP_CROSS_ENTROPY_WGRAD:
    case TPC_OP_SUMSQ:
    case TPC_OP_GLOBAL_NORM:
    case TPC_OP_ADAMW:
      return true;
    default:
      return false;
  }
}

static int tpc__vocab_parallel(MlirOperation op, int kind) {
  MlirAttribute a = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("parallel"));
  (void)kind;
  return !mlirAttributeIsNull(a) && mlirAttributeIsAString(a) &&
         mlirStringRefEqual(mlirStringAttrGetValue(a), mlirStringRefCreateFromCString("vocab"));
}

bool tpc__vocab_layout(tpc__shard_t* S, MlirOperation op, int kind, int slot, tpc_layout_t* l) {
  uint32_t tp = tpc__bit(S->tp);
  // The optimizer's states (re-laid out like their parameter by tpc__arg_layouts) and its
  // hyperparameters, replicated.
  if (kind == TPC_OP_ADAMW) return slot == TPC_ADAMW_SLOT_HYPER;
  if (kind == TPC_OP_SUMSQ || kind == TPC_OP_GLOBAL_NORM) return false;
  bool vocab = tpc__vocab_parallel(op, kind);
  // The table or head: rows over tp. Ids, targets and the per-token f32 vectors: the tokens of
  // the data axes only (every vocabulary shard reads every token).
  bool table = (kind == TPC_OP_EMBEDDING && slot == TPC_EMBEDDING_SLOT_TABLE) ||
               ((kind == TPC_OP_CROSS_ENTROPY || kind == TPC_OP_CROSS_ENTROPY_DGRAD ||
                 kind == TPC_OP_CROSS_ENTROPY_WGRAD) && slot == 1);
  if (table) {
    if (vocab) l->mask[0] = tp;
    return true;
  }
  bool tokens = (kind == TPC_OP_EMBEDDING && slot == TPC_EMBEDDING_SLOT_IDS) ||
                (kind == TPC_OP_EMBEDDING_GRAD && slot == TPC_EMBEDDING_GRAD_SLOT_IDS) ||
                (kind == TPC_OP_CROSS_ENTROPY && slot == TPC_CROSS_ENTROPY_SLOT_TARGETS) ||
                ((kind == TPC_OP_CROSS_ENTROPY_DGRAD || kind == TPC_OP_CROSS_ENTROPY_WGRAD) && slot >= 2);
  if (tokens && vocab) {
    l->mask[0] = tpc__data_axes(S) | tpc__bit(S->ep);
    return true;
  }
  return false;
}

// ", mesh = @m, axes = ["tp"]" (|partial| adds ", partial = true") into |t|.
static void tpc__shard_attrs(tpc__shard_t* S, tpc_text_t* t, bool partial) {
  tpc_text_printf(t, "mesh = ");
  tpc_text_symbol_ref(t, "", S->mesh.name);
  tpc_text_printf(t, ", axes = [\"%s\"]%s", S->mesh.axes[S->tp], partial ? ", partial = true" : "");
}

// Emits `"|name|"(ins) {attrs} : (...) -> (outs)` and returns its first result's value.
static tpc__sval_t* tpc__emit_named(tpc__shard_t* S, const char* name, tpc__sval_t* const* ins, int nin,
                                    const tpc_layout_t* outs, int nout, const char* attrs) {
  char base[32];
  snprintf(base, sizeof base, "%%v%d", S->counter++);
  tpc_text_printf(&S->body, "    %s%s%.0d = \"%s\"(", base, nout > 1 ? ":" : "", nout > 1 ? nout : 0, name);
  for (int i = 0; i < nin; ++i) tpc_text_printf(&S->body, "%s%s", i ? ", " : "", ins[i]->name);
  tpc_text_printf(&S->body, ") {%s} : (", attrs);
  for (int i = 0; i < nin; ++i) {
    if (i) tpc_text_printf(&S->body, ", ");
    tpc_layout_print_local_type(&ins[i]->layout, &S->mesh, &S->body);
  }
  tpc_text_printf(&S->body, ") -> (");
  for (int i = 0; i < nout; ++i) {
    if (i) tpc_text_printf(&S->body, ", ");
    tpc_layout_print_local_type(&outs[i], &S->mesh, &S->body);
  }
  tpc_text_printf(&S->body, ")");
  if (!mlirOperationIsNull(S->cur_op)) {
    tpc_text_printf(&S->body, " ");
    mlirLocationPrint(mlirOperationGetLocation(S->cur_op), tpc_text_append_ref, &S->body);
  }
  tpc_text_printf(&S->body, "\n");
  tpc__sval_t* first = NULL;
  for (int i = 0; i < nout; ++i) {
    char n[48];
    if (nout == 1)
      snprintf(n, sizeof n, "%s", base);
    else
      snprintf(n, sizeof n, "%s#%d", base, i);
    tpc__sval_t* v = tpc__new_value(S, (MlirValue){NULL}, n, &outs[i]);
    if (!first) first = v;
  }
  return first;
}

// Emits |op| (its own attributes, plus the shard's mesh and axes and `partial` when |partial|)
// with result |out|; when |reduce| is non-empty the result is an f32 partial completed by an
// all-reduce over |reduce| (a reduce-scatter along the tokens when |scatter|) into |want|.
static MlirLogicalResult tpc__emit_shard_op(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins, int nin,
                                            tpc_layout_t out, bool shard, uint32_t reduce, bool scatter) {
  tpc_text_t extra = {0};
  bool partial = reduce && tpc_mesh_group_size(&S->mesh, reduce) > 1;
  tpc_layout_t want = out;
  if (partial) out.element = mlirF32TypeGet(mlirOperationGetContext(op));
  if (shard) {
    tpc__shard_attrs(S, &extra, partial);
  } else if (partial) {
    tpc_text_printf(&extra, "partial = true");
  }
  tpc__emit_op(S, op, ins, nin, &out, 1, extra.data ? extra.data : "", "partial");
  tpc_text_free(&extra);
  if (!partial) return mlirLogicalResultSuccess();
  tpc__sval_t* p = &S->vals[S->num_vals - 1];
  MlirValue result = p->value;
  p->value = (MlirValue){NULL};
  if (scatter) want.mask[0] |= reduce;
  // ZeRO-1: a weight gradient that only the optimizer reads is reduce-scattered over dp.
  int zdim = scatter ? -1 : tpc__zero_scatter_dim(S, result, &want, reduce);
  char dim[32] = ", dim = 0 : i64";
  if (zdim >= 0) {
    want.mask[zdim] = reduce;
    snprintf(dim, sizeof dim, ", dim = %d : i64", zdim);
    scatter = true;
  }
  if (mlirLogicalResultIsFailure(tpc__check_divisible(S, op, "result", &want))) return mlirLogicalResultFailure();
  tpc__sval_t* r = tpc__emit_collective_mask(S, reduce, scatter ? TPC_OP_NAME_REDUCE_SCATTER : TPC_OP_NAME_ALL_REDUCE, p,
                                             scatter ? dim : "", &want);
  if (!r) return mlirLogicalResultFailure();
  r->value = result;
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__shard_embedding(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins, bool vocab) {
  uint32_t tp = tpc__bit(S->tp);
  tpc_layout_t y = tpc_layout_replicated(mlirValueGetType(tpc_embedding_get_y(op)));
  y.mask[0] = ins[0]->layout.mask[0];
  if (!vocab) {
    if (tpc_mesh_group_size(&S->mesh, ins[1]->layout.mask[0] | ins[1]->layout.mask[1]) > 1)
      return tpc__layout_error(S, op, "table", &ins[1]->layout,
                               "only a vocabulary-parallel embedding (parallel = \"vocab\") takes a sharded table");
    tpc__emit_op(S, op, ins, 2, &y, 1, NULL, NULL);
    return mlirLogicalResultSuccess();
  }
  if (ins[0]->layout.mask[0] & tp)
    return tpc__layout_error(S, op, "ids", &ins[0]->layout,
                             "a vocabulary-parallel embedding needs every token's id on each tp rank");
  // Each rank's lookups (-0.0 where another rank holds the row), summed exactly over tp.
  tpc_text_t extra = {0};
  tpc__shard_attrs(S, &extra, false);
  tpc__emit_op(S, op, ins, 2, &y, 1, extra.data, NULL);
  tpc_text_free(&extra);
  tpc__sval_t* p = &S->vals[S->num_vals - 1];
  MlirValue result = p->value;
  p->value = (MlirValue){NULL};
  tpc_layout_t out = y;
  bool sp = tpc_embedding_get_sequence_parallel(op);
  if (sp) out.mask[0] |= tp;
  if (mlirLogicalResultIsFailure(tpc__check_divisible(S, op, "result", &out))) return mlirLogicalResultFailure();
  tpc__sval_t* r = tpc__emit_collective(S, sp ? TPC_OP_NAME_REDUCE_SCATTER : TPC_OP_NAME_ALL_REDUCE, p,
                                        sp ? ", dim = 0 : i64" : "", &out);
  if (!r) return mlirLogicalResultFailure();
  r->value = result;
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__shard_cross_entropy(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins, bool vocab) {
  uint32_t tp = tpc__bit(S->tp);
  tpc_layout_t outs[2];
  for (int i = 0; i < 2; ++i) outs[i] = tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, i)));
  if (ins[0]->layout.mask[1])
    return tpc__layout_error(S, op, "input x", &ins[0]->layout, "the loss needs whole rows (hidden unsharded)");
  if (!vocab) {
    if (tpc_mesh_group_size(&S->mesh, ins[1]->layout.mask[0] | ins[1]->layout.mask[1]) > 1)
      return tpc__layout_error(S, op, "w", &ins[1]->layout,
                               "only a vocabulary-parallel loss (parallel = \"vocab\") takes a sharded head");
    outs[0].mask[0] = outs[1].mask[0] = ins[0]->layout.mask[0];
    tpc__emit_op(S, op, ins, 3, outs, 2, NULL, NULL);
    return mlirLogicalResultSuccess();
  }
  tpc__sval_t* x = tpc__gather_tokens(S, ins[0]);  // every token, on every vocabulary shard
  if (!x) return mlirLogicalResultFailure();
  if (x->layout.mask[0] != ins[2]->layout.mask[0])
    return tpc__layout_error(S, op, "targets", &ins[2]->layout, "the targets must be sharded like x's tokens (over the data axes)");
  tpc__sval_t* sin[3] = {x, ins[1], ins[2]};
  MlirType f32 = mlirF32TypeGet(mlirOperationGetContext(op));
  tpc_layout_t st = tpc__local_only(&x->layout, 0, 3, f32);
  st.logical[0] = x->layout.logical[0];
  st.mask[0] = x->layout.mask[0];
  tpc_text_t attrs = {0};
  tpc__shard_attrs(S, &attrs, false);
  tpc__sval_t* stats = tpc__emit_named(S, TPC_OP_NAME_CROSS_ENTROPY_STATS, sin, 3, &st, 1, attrs.data);
  tpc_text_free(&attrs);
  if (!stats) return mlirLogicalResultFailure();
  // The ranks' statistics side by side in rank order: [T, 3R].
  tpc_layout_t all = st;
  all.logical[1] = 3 * tpc_mesh_group_size(&S->mesh, tp);
  tpc__sval_t* gathered = tpc__emit_collective(S, TPC_OP_NAME_ALL_GATHER, stats, ", dim = 1 : i64", &all);
  if (!gathered) return mlirLogicalResultFailure();
  outs[0].mask[0] = outs[1].mask[0] = x->layout.mask[0];
  tpc__sval_t* cin[2] = {gathered, ins[2]};
  tpc__sval_t* r = tpc__emit_named(S, TPC_OP_NAME_CROSS_ENTROPY_COMBINE, cin, 2, outs, 2, "");
  if (!r) return mlirLogicalResultFailure();
  r[0].value = tpc_cross_entropy_get_loss(op);
  r[1].value = tpc_cross_entropy_get_lse(op);
  return mlirLogicalResultSuccess();
}

bool tpc__zero1(const tpc__shard_t* S) {
  MlirOperation module = mlirOperationGetParentOperation(S->func);
  MlirAttribute z = mlirOperationIsNull(module) ? (MlirAttribute){NULL}
                                                : mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_ZERO));
  return S->dp >= 0 && S->mesh.sizes[S->dp] > 1 && !mlirAttributeIsNull(z) && mlirAttributeIsABool(z) &&
         mlirBoolAttrGetValue(z);
}

int tpc__zero_scatter_dim(const tpc__shard_t* S, MlirValue result, const tpc_layout_t* want, uint32_t reduce) {
  if (!tpc__zero1(S) || mlirValueIsNull(result) || reduce != tpc__bit(S->dp)) return -1;
  // Its readers: the update (as its gradient) and the norm's sum of squares, nothing else.
  bool update = false;
  for (MlirOpOperand u = mlirValueGetFirstUse(result); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    int kind = tpc_op_get_kind(user), slot = (int)mlirOpOperandGetOperandNumber(u);
    if (kind == TPC_OP_ADAMW && slot == TPC_ADAMW_SLOT_GRAD)
      update = true;
    else if (!(kind == TPC_OP_SUMSQ && slot == TPC_SUMSQ_SLOT_G))
      return -1;
  }
  if (!update) return -1;
  // The dimension tpc__arg_layouts splits the optimizer's states along: the first that no other
  // axis splits, when dp divides it.
  for (int d = 0; d < want->rank; ++d) {
    if (tpc_mesh_group_size(&S->mesh, want->mask[d]) > 1 || want->blocks[d] != 1) continue;
    tpc_layout_t z = *want;
    z.mask[d] = tpc__bit(S->dp);
    return tpc_layout_local_dim(&z, &S->mesh, d) > 0 ? d : -1;
  }
  return -1;
}

// Every mesh axis with more than one rank, but mb: a micro-batch is one rank's call, so each one
// counts the whole (mb-replicated) gradient norm of its rank alone.
static uint32_t tpc__all_axes(const tpc__shard_t* S) {
  uint32_t m = 0;
  for (int i = 0; i < S->mesh.num_axes; ++i)
    if (S->mesh.sizes[i] > 1 && i != S->mb) m |= tpc__bit(i);
  return m;
}

static MlirLogicalResult tpc__shard_optimizer(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin) {
  MlirContext ctx = mlirOperationGetContext(op);
  switch (kind) {
    case TPC_OP_SUMSQ: {
      // Counted on member 0 of the axes the gradient is replicated over.
      uint32_t sharded = 0;
      for (int d = 0; d < ins[0]->layout.rank; ++d) sharded |= ins[0]->layout.mask[d];
      uint32_t replicated = tpc__all_axes(S) & ~sharded;
      tpc_layout_t out = tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, 0)));
      tpc_text_t extra = {0};
      if (replicated) {
        tpc_text_printf(&extra, "mesh = ");
        tpc_text_symbol_ref(&extra, "", S->mesh.name);
        tpc_text_printf(&extra, ", axes = [");
        bool first = true;
        for (int i = 0; i < S->mesh.num_axes; ++i)
          if (replicated & tpc__bit(i)) {
            tpc_text_printf(&extra, "%s\"%s\"", first ? "" : ", ", S->mesh.axes[i]);
            first = false;
          }
        tpc_text_printf(&extra, "]");
      }
      tpc__emit_op(S, op, ins, nin, &out, 1, extra.data ? extra.data : "", NULL);
      tpc_text_free(&extra);
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_GLOBAL_NORM: {
      uint32_t all = tpc__all_axes(S);
      tpc__sval_t* acc = ins[0];
      if (all) {
        int64_t n = acc->layout.logical[0] * tpc_mesh_group_size(&S->mesh, all);
        tpc_layout_t g = tpc_layout_replicated(mlirRankedTensorTypeGet(1, &n, mlirIntegerTypeGet(ctx, 64), mlirAttributeGetNull()));
        acc = tpc__emit_collective_mask(S, all, TPC_OP_NAME_ALL_GATHER, acc, ", dim = 0 : i64", &g);
        if (!acc) return mlirLogicalResultFailure();
      }
      tpc_layout_t out = tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, 0)));
      tpc__emit_op(S, op, &acc, 1, &out, 1, NULL, NULL);
      return mlirLogicalResultSuccess();
    }
    default: {  // TPC_OP_ADAMW
      static const int kStates[3] = {TPC_ADAMW_SLOT_MASTER, TPC_ADAMW_SLOT_M, TPC_ADAMW_SLOT_V};
      uint32_t real = tpc__all_axes(S);  // axes of one rank shard nothing
      // ZeRO-1: the states hold this rank's dp share of dim 0; the gradient is whole over dp.
      uint32_t dp = S->dp >= 0 ? tpc__bit(S->dp) & real : 0u;
      tpc_layout_t gz = ins[TPC_ADAMW_SLOT_GRAD]->layout;
      int zdim = -1;  // the dimension the states split over dp
      for (int d = 0; dp && d < gz.rank && zdim < 0; ++d)
        if ((ins[TPC_ADAMW_SLOT_MASTER]->layout.mask[d] & dp) && !(gz.mask[d] & dp)) zdim = d;
      bool zero = zdim >= 0;
      if (zero) gz.mask[zdim] = dp;
      const tpc_layout_t* g = &gz;
      for (int k = 0; k < 3; ++k) {
        tpc_layout_t a = ins[kStates[k]]->layout, b = *g;
        a.element = b.element;
        for (int d = 0; d < a.rank; ++d) {
          a.mask[d] &= real, b.mask[d] &= real;
          if (!a.mask[d]) a.blocks[d] = 1;
          if (!b.mask[d]) b.blocks[d] = 1;
        }
        if (!tpc_layout_equal(&a, &b))
          return tpc__layout_error(S, op, k == 0 ? "master" : k == 1 ? "m" : "v", &ins[kStates[k]]->layout,
                                   "the optimizer's states must be laid out like the parameter's gradient");
      }
      tpc_layout_t outs[4];
      for (int i = 0; i < 4; ++i) {
        outs[i] = *g;
        outs[i].element = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetResult(op, i)));
      }
      int gdim = -1;  // a gradient already reduce-scattered over dp (tpc__zero_scatter_dim)
      for (int d = 0; dp && d < g->rank && gdim < 0; ++d)
        if (g->mask[d] & dp) gdim = d;
      if (!zero && gdim < 0) {
        tpc__emit_op(S, op, ins, nin, outs, 4, NULL, NULL);
        return mlirLogicalResultSuccess();
      }
      if (!zero) {  // the states and the gradient are the same share: gather the new weight only
        tpc__emit_op(S, op, ins, nin, outs, 4, NULL, NULL);
        tpc__sval_t* w = &S->vals[S->num_vals - 1];
        MlirValue result = w->value;
        w->value = (MlirValue){NULL};
        tpc_layout_t whole = outs[3];
        whole.mask[gdim] &= ~dp;
        char dim[32];
        snprintf(dim, sizeof dim, ", dim = %d : i64", gdim);
        tpc__sval_t* r = tpc__emit_collective_mask(S, dp, TPC_OP_NAME_ALL_GATHER, w, dim, &whole);
        if (!r) return mlirLogicalResultFailure();
        r->value = result;
        return mlirLogicalResultSuccess();
      }
      tpc_text_t extra = {0};
      tpc_text_printf(&extra, "mesh = ");
      tpc_text_symbol_ref(&extra, "", S->mesh.name);
      tpc_text_printf(&extra, ", axes = [\"%s\"]", S->mesh.axes[S->dp]);
      tpc__emit_op(S, op, ins, nin, outs, 4, extra.data, NULL);
      tpc_text_free(&extra);
      // The new weight: every dp rank's rows, gathered.
      tpc__sval_t* w = &S->vals[S->num_vals - 1];
      MlirValue result = w->value;
      w->value = (MlirValue){NULL};
      tpc_layout_t whole = outs[3];
      whole.mask[zdim] = 0;
      char dim[32];
      snprintf(dim, sizeof dim, ", dim = %d : i64", zdim);
      tpc__sval_t* r = tpc__emit_collective_mask(S, dp, TPC_OP_NAME_ALL_GATHER, w, dim, &whole);
      if (!r) return mlirLogicalResultFailure();
      r->value = result;
      return mlirLogicalResultSuccess();
    }
  }
}

MlirLogicalResult tpc__shard_vocab(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin) {
  uint32_t tp = tpc__bit(S->tp);
  bool vocab = tpc__vocab_parallel(op, kind) && tpc_mesh_group_size(&S->mesh, tp) > 1;
  switch (kind) {
    case TPC_OP_SUMSQ:
    case TPC_OP_GLOBAL_NORM:
    case TPC_OP_ADAMW:
      return tpc__shard_optimizer(S, op, kind, ins, nin);
    case TPC_OP_EMBEDDING:
      return tpc__shard_embedding(S, op, ins, vocab);
    case TPC_OP_CROSS_ENTROPY:
      return tpc__shard_cross_entropy(S, op, ins, vocab);
    case TPC_OP_EMBEDDING_GRAD: {
      if (!tpc__no_acc(op, tpc_embedding_grad_get_acc(op))) return mlirLogicalResultFailure();
      // Every token's gradient on each vocabulary shard; the rows summed over the token axes.
      if (vocab) ins[1] = tpc__gather_tokens(S, ins[1]);
      if (!ins[1]) return mlirLogicalResultFailure();
      if (ins[1]->layout.mask[0] != ins[0]->layout.mask[0] || ins[1]->layout.mask[1])
        return tpc__layout_error(S, op, "dy", &ins[1]->layout, "its tokens must be sharded like the ids, its rows whole");
      tpc_layout_t out = tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, 0)));
      if (vocab) out.mask[0] = tp;
      return tpc__emit_shard_op(S, op, ins, nin, out, vocab, ins[0]->layout.mask[0], false);
    }
    case TPC_OP_CROSS_ENTROPY_DGRAD:
    case TPC_OP_CROSS_ENTROPY_WGRAD: {
      bool wgrad = kind == TPC_OP_CROSS_ENTROPY_WGRAD;
      tpc__sval_t* x0 = ins[0];
      if (vocab) ins[0] = tpc__gather_tokens(S, ins[0]);
      if (!ins[0]) return mlirLogicalResultFailure();
      for (int i = 2; i < 5; ++i)
        if (ins[i]->layout.mask[0] != ins[0]->layout.mask[0])
          return tpc__layout_error(S, op, i == 2 ? "targets" : i == 3 ? "lse" : "dloss", &ins[i]->layout,
                                   "the per-token operands must be sharded like x's tokens");
      tpc_layout_t out = tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, 0)));
      if (wgrad) {
        if (vocab) out.mask[0] = tp;
        return tpc__emit_shard_op(S, op, ins, nin, out, vocab, ins[0]->layout.mask[0], false);
      }
      // dx contracts the vocabulary: a partial over tp, back on x's own tokens.
      out.mask[0] = ins[0]->layout.mask[0];
      bool scatter = vocab && (x0->layout.mask[0] & tp);
      return tpc__emit_shard_op(S, op, ins, nin, out, vocab, vocab ? tp : 0u, scatter);
    }
    default:
      return mlirLogicalResultFailure();
  }
}
