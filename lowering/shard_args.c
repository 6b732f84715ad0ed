// tp-shard's argument layouts: every function argument takes the layout of its first use (a
// weight's as its op's parallel attribute says, a backward op's weight as the forward op's would,
// activations sharded over the token axes), which tp-shard records as `tp.shard`.
#include <stdio.h>
#include <stdlib.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "shard_impl.h"
#include "tpc_dialect.h"

// With interleave 0 a GLU reads [gate; up] halves, so the rows that feed it are sharded in two
// blocks (stride 2): every rank then holds gate rows and the up rows that pair with them.
static int64_t tpc__glu_blocks(MlirValue produced) {
  for (MlirOpOperand use = mlirValueGetFirstUse(produced); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
    MlirOperation user = mlirOpOperandGetOwner(use);
    // The GLU reads the rows, and in a training step its gradient reads them again.
    if (tpc_is_glu(user)) return tpc_glu_get_interleave(user) == 0 ? 2 : 1;
    if (tpc_is_glu_grad(user) && mlirOpOperandGetOperandNumber(use) == TPC_GLU_GRAD_SLOT_X)
      return tpc_glu_grad_get_interleave(user) == 0 ? 2 : 1;
  }
  return 1;
}

// The layout a weight-like operand must have, or false for activation operands.
bool tpc__weight_layout(tpc__shard_t* S, MlirOperation op, int kind, int slot, tpc_layout_t* l) {
  uint32_t tp = tpc__bit(S->tp);
  if (tpc__is_vocab_op(kind)) return tpc__vocab_layout(S, op, kind, slot, l);
  switch (kind) {
    case TPC_OP_LINEAR: {
      if (slot == TPC_LINEAR_SLOT_X) return false;
      int par = tpc_linear_get_parallel(op);
      int64_t blocks = tpc__glu_blocks(tpc_linear_get_y(op));
      if (par == TPC_PARALLEL_COLUMN) {
        l->mask[0] = tp;
        l->blocks[0] = tp ? blocks : 1;
      } else if (par == TPC_PARALLEL_ROW && slot == TPC_LINEAR_SLOT_W) {
        l->mask[1] = tp;
      }
      return true;
    }
    case TPC_OP_GROUPED_LINEAR: {
      if (slot == TPC_GROUPED_LINEAR_SLOT_X) return false;
      if (slot == TPC_GROUPED_LINEAR_SLOT_GROUP_SIZES) return true;
      int par = tpc_grouped_linear_get_parallel(op);
      l->mask[0] = tpc__bit(S->ep);  // whole experts over ep
      if (par == TPC_PARALLEL_COLUMN) {
        l->mask[1] = tp;
        l->blocks[1] = tp ? tpc__glu_blocks(tpc_grouped_linear_get_y(op)) : 1;
      } else if (par == TPC_PARALLEL_ROW) {
        l->mask[2] = tp;
      }
      return true;
    }
    case TPC_OP_QUANTIZE:
      // The amax operand is the whole tensor's, the same on every rank (tp.amax's rule).
      if (slot == TPC_QUANTIZE_SLOT_AMAX) return true;
      return tpc__weight_through_quant(S, tpc_quantize_get_data(op), l);
    case TPC_OP_DEQUANTIZE: {
      // A weight stored quantized: its data as the weight, the scales beside it.
      tpc_layout_t data = tpc_layout_replicated(mlirValueGetType(tpc_dequantize_get_data(op)));
      if (!tpc__weight_through_quant(S, tpc_dequantize_get_x(op), &data)) return false;
      int format = tpc_dequantize_get_format(op);
      if (slot == TPC_DEQUANTIZE_SLOT_DATA)
        *l = data;
      else if (slot == TPC_DEQUANTIZE_SLOT_SCALE)
        *l = tpc__scale_layout(&data, mlirValueGetType(mlirOperationGetOperand(op, slot)),
                               format == TPC_FORMAT_MXFP8 || format == TPC_FORMAT_NVFP4);
      return true;
    }
    case TPC_OP_RMSNORM:
      return slot == TPC_RMSNORM_SLOT_GAMMA;
    case TPC_OP_LAYERNORM:
      return slot != TPC_LAYERNORM_SLOT_X;
    // The norm gradients read the same replicated gamma (an argument may reach them first).
    case TPC_OP_RMSNORM_GRAD:
      return slot == TPC_RMSNORM_GRAD_SLOT_GAMMA;
    case TPC_OP_LAYERNORM_GRAD:
      return slot == TPC_LAYERNORM_GRAD_SLOT_GAMMA;
    default:
      return tpc__attention_table_layout(S, kind, slot, l);
  }
}

// A dgrad's dy argument: a column-parallel one has the forward output's layout (tokens like the
// activations, N sharded over tp like w's); false (the activations' layout) otherwise.
static bool tpc__column_dy_layout(tpc__shard_t* S, int par, tpc_layout_t* l) {
  if (par != TPC_PARALLEL_COLUMN) return false;
  l->mask[0] = tpc__data_axes(S) | tpc__bit(S->ep);
  l->mask[1] = tpc__bit(S->tp);
  return true;
}

// The layout of an argument whose first use is a backward op's weight or group sizes (a module
// of gradients alone): the forward op's for the same parallel attribute, never the activations'.
// Only for arguments: a value that reaches these ops from the forward keeps its own layout, which
// the op's rule checks (shard_grad.c).
static bool tpc__grad_arg_layout(tpc__shard_t* S, MlirOperation op, int kind, int slot, tpc_layout_t* l) {
  uint32_t tp = tpc__bit(S->tp);
  switch (kind) {
    case TPC_OP_LINEAR_DGRAD: {
      int par = tpc_linear_dgrad_get_parallel(op);
      if (slot == TPC_LINEAR_DGRAD_SLOT_DY) return tpc__column_dy_layout(S, par, l);
      if (par == TPC_PARALLEL_COLUMN) l->mask[0] = tp;
      if (par == TPC_PARALLEL_ROW) l->mask[1] = tp;
      return true;
    }
    case TPC_OP_GROUPED_LINEAR_DGRAD: {
      int par = tpc_grouped_linear_dgrad_get_parallel(op);
      if (slot == TPC_GROUPED_LINEAR_DGRAD_SLOT_DY) return tpc__column_dy_layout(S, par, l);
      if (slot == TPC_GROUPED_LINEAR_DGRAD_SLOT_GROUP_SIZES) return true;
      l->mask[0] = tpc__bit(S->ep);
      if (par == TPC_PARALLEL_COLUMN) l->mask[1] = tp;
      if (par == TPC_PARALLEL_ROW) l->mask[2] = tp;
      return true;
    }
    case TPC_OP_GROUPED_LINEAR_WGRAD:
      return slot == TPC_GROUPED_LINEAR_WGRAD_SLOT_GROUP_SIZES;
    default:
      return false;
  }
}

// Gives every block argument the layout of its first use in program order (any number of
// arguments: the per-argument state is allocated).
MlirLogicalResult tpc__arg_layouts(tpc__shard_t* S, MlirBlock body) {
  intptr_t nargs = mlirBlockGetNumArguments(body);
  bool* decided = calloc((size_t)(nargs > 0 ? nargs : 1), sizeof *decided);
  tpc_layout_t* layouts = calloc((size_t)(nargs > 0 ? nargs : 1), sizeof *layouts);
  MlirLogicalResult result = mlirLogicalResultSuccess();
  if (!decided || !layouts) {
    mlirEmitError(mlirOperationGetLocation(S->func), "tp-shard: out of memory for the function's arguments");
    result = mlirLogicalResultFailure();
    goto done;
  }
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirType t = mlirValueGetType(mlirBlockGetArgument(body, i));
    if (!mlirTypeIsARankedTensor(t)) {
      mlirEmitError(mlirOperationGetLocation(S->func), "tp-shard: function arguments must be tensors");
      result = mlirLogicalResultFailure();
      goto done;
    }
    layouts[i] = tpc_layout_replicated(t);
  }
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    int kind = tpc_op_get_kind(op);
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
      MlirValue v = mlirOperationGetOperand(op, k);
      if (!mlirValueIsABlockArgument(v)) continue;
      intptr_t i = mlirBlockArgumentGetArgNumber(v);
      // tp.amax reads any layout: the argument's comes from its other uses (a quantized weight's).
      if (i >= nargs || decided[i] || kind == TPC_OP_AMAX) continue;
      decided[i] = true;
      tpc_layout_t* l = &layouts[i];
      if (!tpc__weight_layout(S, op, kind, (int)k, l) && !tpc__grad_arg_layout(S, op, kind, (int)k, l) && l->rank >= 1)
        // Activations: tokens over dp (and gtp, ep), and over tp too when the residual stream is
        // sequence parallel.
        l->mask[0] = tpc__data_axes(S) | tpc__bit(S->ep) | (S->sp ? tpc__bit(S->tp) : 0u);
    }
  }
  // tp-adamw's optimizer states: laid out like their parameter, in f32.
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirAttribute of = tpc_slot_attr(S->func, false, i, TPC_ARG_ATTR_STATE_OF);
    if (mlirAttributeIsNull(of) || !mlirAttributeIsAInteger(of)) continue;
    int64_t p = mlirIntegerAttrGetValueInt(of);
    if (p < 0 || p >= nargs) continue;
    MlirType element = layouts[i].element;
    layouts[i] = layouts[p];
    layouts[i].element = element;
    // ZeRO-1: the states are split over dp as well, along their first dimension that no other
    // axis splits (a share of the rank's own piece of the parameter), when it divides evenly.
    for (int d = 0; tpc__zero1(S) && d < layouts[i].rank; ++d) {
      if (tpc_mesh_group_size(&S->mesh, layouts[i].mask[d]) > 1 || layouts[i].blocks[d] != 1) continue;
      tpc_layout_t z = layouts[i];
      z.mask[d] = tpc__bit(S->dp);
      if (tpc_layout_local_dim(&z, &S->mesh, d) > 0) layouts[i] = z;
      break;
    }
  }
  for (intptr_t i = 0; i < nargs; ++i) {
    char name[32];
    snprintf(name, sizeof name, "%%a%ld", (long)i);
    if (!decided[i] && layouts[i].rank >= 1)
      layouts[i].mask[0] = tpc__data_axes(S) | tpc__bit(S->ep) | (S->sp ? tpc__bit(S->tp) : 0u);
    // Errors name the argument as the user does: its tp.name (the checkpoint's name), else its number.
    char what[160];
    snprintf(what, sizeof what, "argument %ld", (long)i);
    MlirStringRef v = tpc_slot_tp_name(S->func, false, i);
    if (v.data) snprintf(what, sizeof what, "argument '%.*s'", (int)(v.length < 100 ? v.length : 100), v.data);
    if (!tpc__new_value(S, mlirBlockGetArgument(body, i), name, &layouts[i]) ||
        mlirLogicalResultIsFailure(tpc__check_divisible(S, S->func, what, &layouts[i]))) {
      result = mlirLogicalResultFailure();
      goto done;
    }
  }
done:
  free(decided);
  free(layouts);
  return result;
}
