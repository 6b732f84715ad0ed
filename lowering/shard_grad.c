// tp-shard rules of the backward ops: the duals of the forward rules in shard.c.
//
//   linear_dgrad (column): dy is sharded along N, so dx is an f32 partial completed by an
//                          all-reduce over tp (a reduce-scatter along tokens under sequence
//                          parallelism): the dual of the replicated input's identity.
//   linear_dgrad (row):    dx stays sharded along K like x; under sequence parallelism dy is
//                          first all-gathered along tokens.
//   linear_wgrad:          contracts the tokens; every mesh axis that shards them (dp, gtp, ep)
//                          makes dw a partial sum completed by an all-reduce over those axes,
//                          which is data parallelism's gradient synchronisation. Operands
//                          sharded over tp along tokens (sequence parallelism) are all-gathered.
//   norm / bias gradients: the parameter gradients are summed over the token axes likewise.
//   glu_grad, the MoE gradients: local, on the forward layouts.
// Expert parallelism: the grouped gradients run on dispatched rows (the forward dispatch of x is
// reused; the incoming gradient is bucketed and all-to-all'ed like the forward rows), and the
// gradients of dispatched rows are brought back before moe_permute_grad; the experts' weight
// gradients are then summed over dp and gtp (the token axes that remain after the dispatch).
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "shard_impl.h"
#include "tpc_dialect.h"

bool tpc__no_acc(MlirOperation op, MlirValue acc) {
  if (mlirValueIsNull(acc)) return true;
  mlirEmitError(mlirOperationGetLocation(op),
                "tp-shard: acc is formed by tp-fuse after partitioning; write the sum as a tp.add");
  return false;
}

bool tpc__is_grad_op(int kind) {
  switch (kind) {
    case TPC_OP_LINEAR_DGRAD:
    case TPC_OP_LINEAR_WGRAD:
    case TPC_OP_BIAS_GRAD:
    case TPC_OP_GROUPED_LINEAR_DGRAD:
    case TPC_OP_GROUPED_LINEAR_WGRAD:
    case TPC_OP_GLU_GRAD:
    case TPC_OP_RMSNORM_GRAD:
    case TPC_OP_LAYERNORM_GRAD:
    case TPC_OP_MOE_UNPERMUTE_GRAD:
    case TPC_OP_MOE_PERMUTE_GRAD:
    case TPC_OP_MOE_ROUTE_GRAD:
      return true;
    default:
      return false;
  }
}


static tpc_layout_t tpc__result_layout(MlirOperation op, int i) {
  return tpc_layout_replicated(mlirValueGetType(mlirOperationGetResult(op, i)));
}

// Emits |op| producing f32 partials of the results in |reduced| (a bit per result) when
// |reduce_mask| is non-empty, then completes each, in result order, with an all-reduce over those
// axes into its element type; else emits |op| itself.
static MlirLogicalResult tpc__emit_reduced(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins, int nin,
                                           tpc_layout_t* outs, int nout, unsigned reduced, uint32_t reduce_mask,
                                           bool scatter_tokens) {
  if (!reduce_mask || tpc_mesh_group_size(&S->mesh, reduce_mask) == 1) {
    tpc__emit_op(S, op, ins, nin, outs, nout, NULL, NULL);
    return mlirLogicalResultSuccess();
  }
  tpc_layout_t want[3];
  for (int i = 0; i < nout && i < 3; ++i) {
    want[i] = outs[i];
    if (reduced & (1u << i)) outs[i].element = mlirF32TypeGet(mlirOperationGetContext(op));
  }
  tpc__emit_op(S, op, ins, nin, outs, nout, "partial = true", "partial");
  int first = S->num_vals - nout;
  for (int i = 0; i < nout && i < 3; ++i) {
    if (!(reduced & (1u << i))) continue;
    // S->vals grows below: index it afresh each time.
    MlirValue result = S->vals[first + i].value;
    S->vals[first + i].value = (MlirValue){NULL};
    if (scatter_tokens) want[i].mask[0] |= reduce_mask;
    // ZeRO-1: a weight gradient that only the optimizer reads is reduce-scattered over dp.
    int zdim = scatter_tokens ? -1 : tpc__zero_scatter_dim(S, result, &want[i], reduce_mask);
    char dim[32] = ", dim = 0 : i64";
    if (zdim >= 0) {
      want[i].mask[zdim] = reduce_mask;
      snprintf(dim, sizeof dim, ", dim = %d : i64", zdim);
    }
    bool scatter = scatter_tokens || zdim >= 0;
    if (mlirLogicalResultIsFailure(tpc__check_divisible(S, op, "result", &want[i]))) return mlirLogicalResultFailure();
    tpc__sval_t* r = tpc__emit_collective_mask(S, reduce_mask,
                                               scatter ? TPC_OP_NAME_REDUCE_SCATTER : TPC_OP_NAME_ALL_REDUCE,
                                               &S->vals[first + i], scatter ? dim : "", &want[i]);
    if (!r) return mlirLogicalResultFailure();
    r->value = result;
  }
  return mlirLogicalResultSuccess();
}

static bool tpc__ep(tpc__shard_t* S) { return S->ep >= 0 && S->mesh.sizes[S->ep] > 1; }

// Expert parallelism: the grouped gradients run where the experts live, on dispatched rows.
static MlirLogicalResult tpc__dispatch_grouped(tpc__shard_t* S, tpc__sval_t** ins, bool wgrad) {
  if (!tpc__ep(S)) return mlirLogicalResultSuccess();
  tpc__sval_t* sizes = ins[2];
  if (!ins[0]->recv_sizes) ins[0] = tpc__dispatch(S, ins[0], sizes);
  if (wgrad && ins[0] && !ins[1]->recv_sizes) ins[1] = tpc__dispatch(S, ins[1], sizes);
  if (!ins[0] || !ins[1] || !ins[0]->recv_sizes) return mlirLogicalResultFailure();
  ins[2] = ins[0]->recv_sizes;
  return mlirLogicalResultSuccess();
}

MlirLogicalResult tpc__shard_grad(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin) {
  uint32_t tp = tpc__bit(S->tp);
  tpc_layout_t outs[3];
  int nout = (int)mlirOperationGetNumResults(op);
  for (int i = 0; i < nout && i < 3; ++i) outs[i] = tpc__result_layout(op, i);
  if ((kind == TPC_OP_LINEAR_DGRAD && !tpc__no_acc(op, tpc_linear_dgrad_get_acc(op))) ||
      (kind == TPC_OP_RMSNORM_GRAD && !tpc__no_acc(op, tpc_rmsnorm_grad_get_acc(op))))
    return mlirLogicalResultFailure();
  switch (kind) {
    case TPC_OP_LINEAR_WGRAD:
    case TPC_OP_GROUPED_LINEAR_WGRAD: {
      bool grouped = kind == TPC_OP_GROUPED_LINEAR_WGRAD;
      if (grouped && mlirLogicalResultIsFailure(tpc__dispatch_grouped(S, ins, true))) return mlirLogicalResultFailure();
      if (grouped && tpc_grouped_linear_wgrad_get_sequence_parallel(op) && ((ins[0]->layout.mask[0] | ins[1]->layout.mask[0]) & tp))
        ins[2] = tpc__gather_counts(S, ins[2]);  // rows gathered over tp: one segment of counts per rank
      // A tensor-parallel weight gradient needs every token (gather what sequence parallelism
      // sharded); a replicated one sums this rank's tokens and is reduced over them below.
      int wpar = grouped ? tpc_grouped_linear_wgrad_get_parallel(op) : tpc_linear_wgrad_get_parallel(op);
      if (wpar == TPC_PARALLEL_COLUMN || wpar == TPC_PARALLEL_ROW) {
        ins[0] = tpc__gather_tokens(S, ins[0]);
        ins[1] = tpc__gather_tokens(S, ins[1]);
      }
      if (ins[0]->layout.mask[0] != ins[1]->layout.mask[0])
        return tpc__layout_error(S, op, "dy", &ins[0]->layout, "its tokens are sharded unlike x's");
      int n = grouped ? 1 : 0, k = grouped ? 2 : 1;  // N and K dims of dw
      outs[0].mask[n] = ins[0]->layout.mask[1];
      outs[0].blocks[n] = ins[0]->layout.blocks[1];
      outs[0].mask[k] = ins[1]->layout.mask[1];
      outs[0].blocks[k] = ins[1]->layout.blocks[1];
      if (grouped) outs[0].mask[0] = tpc__bit(S->ep);  // whole experts over ep, like w
      // Dispatched rows came from every ep peer of this replica: the remaining token axes are dp, gtp.
      uint32_t tokens = ins[0]->recv_sizes ? tpc__data_axes(S) : ins[0]->layout.mask[0];
      return tpc__emit_reduced(S, op, ins, nin, outs, 1, 1u, tokens, false);
    }
    case TPC_OP_LINEAR_DGRAD:
    case TPC_OP_GROUPED_LINEAR_DGRAD: {
      bool grouped = kind == TPC_OP_GROUPED_LINEAR_DGRAD;
      if (grouped && mlirLogicalResultIsFailure(tpc__dispatch_grouped(S, ins, false))) return mlirLogicalResultFailure();
      int par = grouped ? tpc_grouped_linear_dgrad_get_parallel(op) : tpc_linear_dgrad_get_parallel(op);
      bool sp = grouped ? tpc_grouped_linear_dgrad_get_sequence_parallel(op) : tpc_linear_dgrad_get_sequence_parallel(op);
      if (grouped && sp && (ins[0]->layout.mask[0] & tp || ins[0]->seg_sizes))
        ins[2] = ins[0]->seg_sizes ? ins[0]->seg_sizes : tpc__gather_counts(S, ins[2]);
      if (par == TPC_PARALLEL_ROW) ins[0] = tpc__gather_tokens(S, ins[0]);
      const tpc_layout_t* w = &ins[1]->layout;
      // N, the contracted dimension, is sharded alike in dy and w when both follow one forward
      // plan (a weight that an argument gives this op first, say, does not).
      int n = grouped ? 1 : 0;
      if (ins[0]->layout.mask[1] != w->mask[n] || ins[0]->layout.blocks[1] != w->blocks[n])
        return tpc__layout_error(S, op, "dy", &ins[0]->layout, "its N dimension must be sharded like w's");
      outs[0].mask[0] = ins[0]->layout.mask[0];
      outs[0].mask[1] = w->mask[grouped ? 2 : 1];
      outs[0].blocks[1] = w->blocks[grouped ? 2 : 1];
      if (ins[0]->recv_sizes) outs[0].logical[0] = tpc_layout_local_dim(&ins[0]->layout, &S->mesh, 0);
      // Column: dy and w are sharded along N, the contracted dimension.
      uint32_t reduce = par == TPC_PARALLEL_COLUMN ? (ins[0]->layout.mask[1] & tp) : 0u;
      if (mlirLogicalResultIsFailure(tpc__emit_reduced(S, op, ins, nin, outs, 1, 1u, reduce, sp)))
        return mlirLogicalResultFailure();
      // Dispatched rows stay dispatched; rows gathered over tp keep their segment counts unless
      // the reduce-scatter returned them to their owners.
      tpc__sval_t* out = &S->vals[S->num_vals - 1];
      out->recv_sizes = ins[0]->recv_sizes;
      out->own_sizes = ins[0]->own_sizes;
      if (grouped && sp && !(out->layout.mask[0] & tp)) out->seg_sizes = ins[2];
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_BIAS_GRAD:
      outs[0].mask[0] = ins[0]->layout.mask[1];
      outs[0].blocks[0] = ins[0]->layout.blocks[1];
      return tpc__emit_reduced(S, op, ins, nin, outs, 1, 1u, ins[0]->layout.mask[0], false);
    case TPC_OP_GLU_GRAD: {
      const tpc_layout_t* x = &ins[0]->layout;
      for (int d = 0; d + 1 < x->rank; ++d)
        if (x->mask[d] != ins[1]->layout.mask[d])
          return tpc__layout_error(S, op, "dy", &ins[1]->layout, "it must be sharded like the GLU's input");
      outs[0] = *x;
      tpc__emit_op(S, op, ins, nin, outs, 1, NULL, NULL);
      S->vals[S->num_vals - 1].recv_sizes = ins[0]->recv_sizes;
      S->vals[S->num_vals - 1].own_sizes = ins[0]->own_sizes;
      S->vals[S->num_vals - 1].seg_sizes = ins[0]->seg_sizes;
      return mlirLogicalResultSuccess();
    }
    case TPC_OP_RMSNORM_GRAD:
    case TPC_OP_LAYERNORM_GRAD: {
      const tpc_layout_t* x = &ins[0]->layout;
      if (x->mask[1] || !tpc_layout_equal(x, &ins[2]->layout))
        return tpc__layout_error(S, op, "dy", &ins[2]->layout, "a norm gradient needs whole rows laid out like x");
      outs[0] = *x;
      // dgamma (and dbeta) sum over the tokens: reduced over the axes that shard them.
      return tpc__emit_reduced(S, op, ins, nin, outs, nout, nout == 3 ? 6u : 2u, x->mask[0], false);
    }
    case TPC_OP_MOE_UNPERMUTE_GRAD:
      // The combine reads the expert outputs back on the token's rank (as the forward did).
      if (ins[1]->recv_sizes && !(ins[1] = tpc__combine(S, ins[1]))) return mlirLogicalResultFailure();
      outs[0].mask[0] = ins[2]->layout.mask[0];
      outs[1].mask[0] = ins[3]->layout.mask[0];
      tpc__emit_op(S, op, ins, nin, outs, nout, NULL, NULL);
      return mlirLogicalResultSuccess();
    case TPC_OP_MOE_PERMUTE_GRAD:
      // Gradients of dispatched rows come back to the token's rank before the un-permutation.
      if (ins[0]->recv_sizes && !(ins[0] = tpc__combine(S, ins[0]))) return mlirLogicalResultFailure();
      outs[0].mask[0] = ins[1]->layout.mask[0];
      tpc__emit_op(S, op, ins, nin, outs, 1, NULL, NULL);
      return mlirLogicalResultSuccess();
    case TPC_OP_MOE_ROUTE_GRAD:
      outs[0].mask[0] = ins[0]->layout.mask[0];
      tpc__emit_op(S, op, ins, nin, outs, 1, NULL, NULL);
      return mlirLogicalResultSuccess();
    default:
      return mlirLogicalResultFailure();
  }
}
