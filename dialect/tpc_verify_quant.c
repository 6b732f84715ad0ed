// Verifier rules of tp.amax, tp.quantize and tp.dequantize: element types, data layout, block
// divisibility, the amax operand and the (unswizzled, zero-padded) scale shapes of docs/numerics.md, which follow
// TransformerEngine's MXFP8Quantizer / NVFP4Quantizer.get_scale_shape:
//   fp8_e4m3 / fp8_e5m2  per-tensor: data f8 [M,K] (columnwise: [K,M]), scale f32 [1]
//   mxfp8   rowwise  data f8E4M3FN [M,K],  scale f8E8M0FNU [rup(M,128), rup(K/32,4)]
//           colwise  data f8E4M3FN [M,K],  scale f8E8M0FNU [rup(M/32,4), rup(K,128)]
//   nvfp4   rowwise  data f4E2M1FN [M,K],  scale f8E4M3FN  [rup(M,128), rup(ceil(K/16),4)]
//           colwise  data f4E2M1FN [K,M],  scale f8E4M3FN  [rup(K,128), rup(ceil(M/16),4)]
//           plus global_scale f32 [1]
#include <stdio.h>

#include "mlir-c/BuiltinTypes.h"
#include "tp_ops.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()

typedef struct {
  const char* name;            // element type spelling for messages
  bool (*is_data)(MlirType);   // data element type test
  bool (*is_scale)(MlirType);  // scale element type test
  const char* scale_name;
  int block;                   // elements per scale along the quantized axis; 0 = per tensor
  bool transposed_columnwise;  // columnwise data stored [K,M]
} tpc__format_info_t;

static bool tpc__is_e4m3(MlirType t) { return mlirTypeIsAFloat8E4M3FN(t); }
static bool tpc__is_e5m2(MlirType t) { return mlirTypeIsAFloat8E5M2(t); }
static bool tpc__is_e8m0(MlirType t) { return mlirTypeIsAFloat8E8M0FNU(t); }
static bool tpc__is_e2m1(MlirType t) { return mlirTypeIsAFloat4E2M1FN(t); }

// Indexed by tpc_format_t. Per-tensor FP8 columnwise data is transposed as on Hopper, where
// FP8 GEMMs are TN only; MXFP8 keeps [M,K] (TE's layout); NVFP4 columnwise is transposed.
static const tpc__format_info_t tpc__formats[] = {
    [TPC_FORMAT_FP8_E4M3] = {"f8E4M3FN", tpc__is_e4m3, tpc__is_f32, "f32", 0, true},
    [TPC_FORMAT_FP8_E5M2] = {"f8E5M2", tpc__is_e5m2, tpc__is_f32, "f32", 0, true},
    [TPC_FORMAT_MXFP8] = {"f8E4M3FN", tpc__is_e4m3, tpc__is_e8m0, "f8E8M0FNU", 32, false},
    [TPC_FORMAT_NVFP4] = {"f4E2M1FN", tpc__is_e2m1, tpc__is_e4m3, "f8E4M3FN", 16, true},
};

MlirLogicalResult tpc__verify_quant_layout(MlirOperation op, tpc_format_t format, tpc_axis_t axis,
                                                  MlirValue hp_v, MlirValue data_v, MlirValue scale_v,
                                                  MlirValue global_v) {
  char a[96], b[96];
  tpc_shape_t hp = tpc__shape_of(hp_v), data = tpc__shape_of(data_v), scale = tpc__shape_of(scale_v);
  if (!hp.valid || !data.valid || !scale.valid || (int)format < 0 || (int)axis < 0) return FAIL;
  const tpc__format_info_t* f = &tpc__formats[format];
  const char* fmt_name = tpc_format_names[format];
  bool columnwise = axis == TPC_AXIS_COLUMNWISE;
  if (hp.rank != 2 || !tpc__is_storage_float(hp.element))
    return tpc__rule_error(op, "quant.input", "the high-precision tensor must be a bf16, f16 or f32 [M,K]; got %s",
                           tpc__type_str(hp.type, a, sizeof a));
  int64_t m = hp.dims[0], k = hp.dims[1];
  bool transposed = columnwise && f->transposed_columnwise;
  int64_t d0 = transposed ? k : m, d1 = transposed ? m : k;
  if (!f->is_data(data.element) || data.rank != 2 || data.dims[0] != d0 || data.dims[1] != d1)
    return tpc__rule_error(op, "quant.data", "%s %s data must be tensor<%lldx%lldx%s>; got %s", fmt_name,
                           tpc_axis_names[axis], (long long)d0, (long long)d1, f->name,
                           tpc__type_str(data.type, a, sizeof a));
  if (f->block > 0 && (columnwise ? m : k) % f->block != 0)
    return tpc__rule_error(op, "quant.block", "%s %s blocks of %d need %s=%lld divisible by %d", fmt_name,
                           tpc_axis_names[axis], f->block, columnwise ? "M" : "K", (long long)(columnwise ? m : k),
                           f->block);
  int64_t s0 = 1, s1 = 1;
  int rank = 1;
  if (format == TPC_FORMAT_MXFP8) {
    rank = 2;
    s0 = columnwise ? tpc__round_up(m / 32, 4) : tpc__round_up(m, 128);
    s1 = columnwise ? tpc__round_up(k, 128) : tpc__round_up(k / 32, 4);
  } else if (format == TPC_FORMAT_NVFP4) {
    rank = 2;
    s0 = columnwise ? tpc__round_up(k, 128) : tpc__round_up(m, 128);
    s1 = tpc__round_up(tpc__ceil_div(columnwise ? m : k, 16), 4);
  }
  bool scale_ok = f->is_scale(scale.element) && scale.rank == rank && scale.dims[0] == s0 && (rank == 1 || scale.dims[1] == s1);
  if (!scale_ok) {
    if (rank == 1)
      snprintf(b, sizeof b, "tensor<1x%s>", f->scale_name);
    else
      snprintf(b, sizeof b, "tensor<%lldx%lldx%s>", (long long)s0, (long long)s1, f->scale_name);
    return tpc__rule_error(op, "quant.scale", "%s %s scales for [M,K]=[%lld,%lld] must be %s; got %s", fmt_name,
                           tpc_axis_names[axis], (long long)m, (long long)k, b, tpc__type_str(scale.type, a, sizeof a));
  }
  bool needs_global = format == TPC_FORMAT_NVFP4;
  bool has_global = !mlirValueIsNull(global_v);
  if (needs_global != has_global)
    return tpc__rule_error(op, "quant.global-scale", needs_global ? "nvfp4 needs a global_scale tensor<1xf32>"
                                                                  : "only nvfp4 has a global_scale; %s does not",
                           fmt_name);
  if (has_global) {
    tpc_shape_t g = tpc__shape_of(global_v);
    if (!g.valid || g.rank != 1 || g.dims[0] != 1 || !tpc__is_f32(g.element))
      return tpc__rule_error(op, "quant.global-scale", "global_scale must be tensor<1xf32>; got %s",
                             tpc__type_str(g.type, a, sizeof a));
  }
  return OK;
}

// tp.amax: x is any float tensor, the result the f32 [1] that tp.quantize's amax operand takes.
static MlirLogicalResult tpc__verify_amax(MlirOperation op) {
  char a[96];
  tpc_shape_t x = tpc__shape_of(tpc_amax_get_x(op)), r = tpc__shape_of(tpc_amax_get_amax(op));
  if (!x.valid || !r.valid) return FAIL;
  if (x.rank < 1 || !tpc__is_storage_float(x.element))
    return tpc__rule_error(op, "amax.input", "x must be a bf16, f16 or f32 tensor of rank >= 1; got %s",
                           tpc__type_str(x.type, a, sizeof a));
  if (r.rank != 1 || r.dims[0] != 1 || !tpc__is_f32(r.element))
    return tpc__rule_error(op, "amax.result", "the amax must be tensor<1xf32>; got %s",
                           tpc__type_str(r.type, a, sizeof a));
  return OK;
}

// tp.quantize's optional amax: a per-tensor amax (tensor<1xf32>) replaces x's own in the scale of
// the per-tensor formats; MXFP8 scales each block by the block's amax and has none.
MlirLogicalResult tpc__verify_quant_amax(MlirOperation op, tpc_format_t format, MlirValue v) {
  char a[96];
  if (mlirValueIsNull(v)) return OK;
  if (format == TPC_FORMAT_MXFP8)
    return tpc__rule_error(op, "quant.amax-format",
                           "mxfp8 scales every block by its own amax and takes no amax operand; only fp8_e4m3, "
                           "fp8_e5m2 and nvfp4 do");
  tpc_shape_t s = tpc__shape_of(v);
  if (!s.valid || s.rank != 1 || s.dims[0] != 1 || !tpc__is_f32(s.element))
    return tpc__rule_error(op, "quant.amax", "the amax operand must be tensor<1xf32>; got %s",
                           tpc__type_str(mlirValueGetType(v), a, sizeof a));
  return OK;
}

MlirLogicalResult tpc__verify_quant(MlirOperation op, int kind) {
  if (kind == TPC_OP_AMAX) return tpc__verify_amax(op);
  if (kind == TPC_OP_QUANTIZE) {
    if (mlirLogicalResultIsFailure(tpc__verify_quant_layout(
            op, tpc_quantize_get_format(op), tpc_quantize_get_axis(op), tpc_quantize_get_x(op),
            tpc_quantize_get_data(op), tpc_quantize_get_scale(op), tpc_quantize_get_global_scale(op))))
      return FAIL;
    return tpc__verify_quant_amax(op, tpc_quantize_get_format(op), tpc_quantize_get_amax(op));
  }
  if (kind == TPC_OP_DEQUANTIZE)
    return tpc__verify_quant_layout(op, tpc_dequantize_get_format(op), tpc_dequantize_get_axis(op),
                                    tpc_dequantize_get_x(op), tpc_dequantize_get_data(op), tpc_dequantize_get_scale(op),
                                    tpc_dequantize_get_global_scale(op));
  return OK;
}
