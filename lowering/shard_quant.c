// tp-shard's rules for quantized weights (tp.quantize -> tp.dequantize -> a linear's weight): the
// layout an argument gets through the casts, and the casts' own layouts.
#include "mlir-c/BuiltinTypes.h"
#include "shard_impl.h"
#include "tpc_dialect.h"

// A weight that reaches its linear through tp.dequantize (a quantized weight: quantized in the
// module, or stored quantized): the layout of |v| (the dequantized weight, or the quantized data)
// is the layout its first reader's plan gives the weight; false when no weight reader follows.
bool tpc__weight_through_quant(tpc__shard_t* S, MlirValue v, tpc_layout_t* l) {
  MlirOpOperand u = mlirValueGetFirstUse(v);
  if (mlirOpOperandIsNull(u)) return false;
  MlirOperation user = mlirOpOperandGetOwner(u);
  int kind = tpc_op_get_kind(user);
  int slot = (int)mlirOpOperandGetOperandNumber(u);
  if (kind == TPC_OP_DEQUANTIZE)
    return slot == TPC_DEQUANTIZE_SLOT_DATA && tpc__weight_through_quant(S, tpc_dequantize_get_x(user), l);
  if (kind == TPC_OP_QUANTIZE || (kind != TPC_OP_LINEAR && kind != TPC_OP_GROUPED_LINEAR)) return false;
  return tpc__weight_layout(S, user, kind, slot, l);
}

// The layout a block-scaled format's scale tensor has beside data laid out as |data|: the same
// axes and blocks on both dims (every rank's rows and columns hold whole blocks, checked by the
// quantize rule); a per-tensor scale is replicated.
tpc_layout_t tpc__scale_layout(const tpc_layout_t* data, MlirType scale_type, bool block_scaled) {
  tpc_layout_t s = tpc_layout_replicated(scale_type);
  if (block_scaled && s.rank == data->rank)
    for (int d = 0; d < s.rank; ++d) {
      s.mask[d] = data->mask[d];
      s.blocks[d] = data->blocks[d];
    }
  return s;
}

// Quantized weights: rowwise casts keep the data's layout; block scales are laid out like the data
// when every rank holds whole scale blocks and no padding (rows a multiple of 128, scale columns
// of 4); a per-tensor scale (and NVFP4's global scale) is the whole tensor's amax, so the tensor
// must not be sharded. |outs| holds the results' replicated layouts on entry.
MlirLogicalResult tpc__shard_quant(tpc__shard_t* S, MlirOperation op, int kind, const tpc_layout_t* x,
                                   tpc_layout_t* outs) {
  bool quant = kind == TPC_OP_QUANTIZE;
  int format = quant ? (int)tpc_quantize_get_format(op) : (int)tpc_dequantize_get_format(op);
  int axis = quant ? (int)tpc_quantize_get_axis(op) : (int)tpc_dequantize_get_axis(op);
  bool block = format == TPC_FORMAT_MXFP8 || format == TPC_FORMAT_NVFP4;
  bool sharded = x->mask[0] || x->mask[1];
  if (axis != TPC_AXIS_ROWWISE && sharded)
    return tpc__layout_error(S, op, quant ? "input x" : "data", x,
                             "columnwise quantization of a sharded tensor is not supported yet");
  if (sharded && (!block || format == TPC_FORMAT_NVFP4))
    return tpc__layout_error(S, op, quant ? "input x" : "data", x,
                             "per-tensor scales (FP8, and NVFP4's global scale) need the whole tensor's amax, "
                             "which a sharded tensor does not have yet; quantize a replicated tensor, or use mxfp8");
  if (sharded) {
    int64_t block_k = 32;
    int64_t rows = tpc_layout_local_dim(x, &S->mesh, 0), cols = tpc_layout_local_dim(x, &S->mesh, 1);
    if ((x->mask[0] && rows % (128 * 1) != 0) || (x->mask[1] && (cols / block_k) % 4 != 0))
      return tpc__layout_error(S, op, quant ? "input x" : "data", x,
                               "each rank's MXFP8 scales must be whole, unpadded tiles: sharded rows a multiple "
                               "of 128 per rank, sharded columns a multiple of 128 per rank");
  }
  if (sharded) {  // rowwise: data (or the dequantized tensor) has x's shape and layout
    outs[0] = *x;
    outs[0].element = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetResult(op, 0)));
    if (quant) outs[1] = tpc__scale_layout(x, mlirValueGetType(mlirOperationGetResult(op, 1)), block);
  }
  return mlirLogicalResultSuccess();
}
