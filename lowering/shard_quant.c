// tp-shard's rules for quantized weights (tp.quantize -> tp.dequantize -> a linear's weight): the
// layout an argument gets through the casts, the casts' own layouts, and tp.amax (the per-tensor
// amax that a quantize of a sharded tensor takes).
#include "mlir-c/BuiltinTypes.h"
#include "shard_impl.h"
#include "tp_ops.h"
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

// tp.amax of x laid out as |ins[0]|: each rank's amax of its shard, completed by a max all-reduce
// over the axes that shard x (none when x is whole on every rank). The result is replicated: the
// whole tensor's amax, which a tp.quantize of the shards takes as its amax operand.
//   IN:  %a = "tp.amax"(%w) : (tensor<512x128xbf16>) -> tensor<1xf32>          (w: [tp, -])
//   OUT: %o = "tp.amax"(%w) : (tensor<256x128xbf16>) -> tensor<1xf32>
//        %s = "tp.all_reduce"(%o) {axes = ["tp"], reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
MlirLogicalResult tpc__shard_amax(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins) {
  tpc_layout_t out = tpc_layout_replicated(mlirValueGetType(tpc_amax_get_amax(op)));
  uint32_t mask = 0;
  for (int d = 0; d < ins[0]->layout.rank; ++d) mask |= ins[0]->layout.mask[d];
  for (int i = 0; i < S->mesh.num_axes; ++i)
    if (S->mesh.sizes[i] == 1) mask &= ~tpc__bit(i);  // a one-rank axis has nothing to reduce
  tpc__emit_op(S, op, ins, 1, &out, 1, NULL, NULL);
  if (!mask) return mlirLogicalResultSuccess();
  tpc__sval_t* local = &S->vals[S->num_vals - 1];
  local->value = (MlirValue){NULL};  // the op's result is the reduced amax below, not the shard's
  tpc__sval_t* r = tpc__emit_collective_mask(S, mask, TPC_OP_NAME_ALL_REDUCE, local, ", reduce = \"max\"", &out);
  if (!r) return mlirLogicalResultFailure();
  r->value = tpc_amax_get_amax(op);
  return mlirLogicalResultSuccess();
}

// Quantized weights: rowwise casts keep the data's layout; block scales are laid out like the data
// when every rank holds whole scale blocks and no padding (rows a multiple of 128, scale columns
// of 4); a per-tensor scale (and NVFP4's global scale) is the whole tensor's amax: a quantize of a
// sharded tensor needs it as its amax operand (tp.amax, completed over the shards), and then every
// rank computes the same, replicated, scale. A dequantize reads the scales it is given, so sharded
// data is fine in every format. |outs| holds the results' replicated layouts on entry.
MlirLogicalResult tpc__shard_quant(tpc__shard_t* S, MlirOperation op, int kind, const tpc_layout_t* x,
                                   tpc_layout_t* outs) {
  bool quant = kind == TPC_OP_QUANTIZE;
  int format = quant ? (int)tpc_quantize_get_format(op) : (int)tpc_dequantize_get_format(op);
  int axis = quant ? (int)tpc_quantize_get_axis(op) : (int)tpc_dequantize_get_axis(op);
  bool block = format == TPC_FORMAT_MXFP8 || format == TPC_FORMAT_NVFP4;
  // Laid out over mesh axes (the results keep x's layout), and sharded over more than one rank.
  bool laid_out = x->mask[0] || x->mask[1];
  bool rows_sharded = tpc_mesh_group_size(&S->mesh, x->mask[0]) > 1;
  bool cols_sharded = tpc_mesh_group_size(&S->mesh, x->mask[1]) > 1;
  bool sharded = rows_sharded || cols_sharded;
  const char* what = quant ? "input x" : "data";
  if (axis != TPC_AXIS_ROWWISE && sharded)
    return tpc__layout_error(S, op, what, x, "columnwise quantization of a sharded tensor is not supported yet");
  if (sharded && quant && format != TPC_FORMAT_MXFP8 && mlirValueIsNull(tpc_quantize_get_amax(op)))
    return tpc__layout_error(S, op, what, x,
                             "per-tensor scales (FP8, and NVFP4's global scale) need the whole tensor's amax, "
                             "which a sharded tensor does not have; give the quantize an amax operand (tp.amax of "
                             "the tensor: tp-shard completes it over the shards), quantize a replicated tensor, or "
                             "use mxfp8");
  if (sharded && block) {
    bool mx = format == TPC_FORMAT_MXFP8;
    int64_t block_k = mx ? 32 : 16;
    int64_t rows = tpc_layout_local_dim(x, &S->mesh, 0), cols = tpc_layout_local_dim(x, &S->mesh, 1);
    if ((rows_sharded && rows % 128 != 0) || (cols_sharded && (cols / block_k) % 4 != 0))
      return tpc__layout_error(S, op, what, x,
                               mx ? "each rank's MXFP8 scales must be whole, unpadded tiles: sharded rows a multiple "
                                    "of 128 per rank, sharded columns a multiple of 128 per rank"
                                  : "each rank's NVFP4 scales must be whole, unpadded tiles: sharded rows a multiple "
                                    "of 128 per rank, sharded columns a multiple of 64 per rank (4 blocks of 16)");
  }
  if (laid_out) {  // rowwise: data (or the dequantized tensor) has x's shape and layout
    outs[0] = *x;
    outs[0].element = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetResult(op, 0)));
    if (quant) outs[1] = tpc__scale_layout(x, mlirValueGetType(mlirOperationGetResult(op, 1)), block);
  }
  return mlirLogicalResultSuccess();
}
