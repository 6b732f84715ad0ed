// Internal helpers shared by the tp verifier files: static tensor shapes, element-type classes
// and rule diagnostics. Not part of the dialect's public API.
#ifndef TPC_VERIFY_UTIL_H_
#define TPC_VERIFY_UTIL_H_

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "tp_ops.h"

/// Largest tensor rank the dialect accepts.
#define TPC_MAX_RANK 8

/// Most ranks a mesh may have (rule mesh.shape): the runtime numbers ranks with an int, and group
/// sizes below it multiply without overflow.
#define TPC_MESH_MAX_RANKS INT32_MAX

/// A static ranked tensor type, unpacked.
typedef struct tpc_shape_t {
  bool valid;  // false for a null value or a non-tensor / dynamic / too-deep type
  int rank;
  int64_t dims[TPC_MAX_RANK];
  MlirType element;
  MlirType type;
} tpc_shape_t;

/// Unpacks the type of |v|; .valid is false for anything but a static ranked tensor.
tpc_shape_t tpc__shape_of(MlirValue v);

/// Element type classes used by the rules.
bool tpc__is_storage_float(MlirType t);  // bf16, f16, f32
bool tpc__is_f32(MlirType t);
bool tpc__is_i32(MlirType t);
bool tpc__is_i64(MlirType t);

/// Formats |s| as "[8,64]" into |buf|; returns |buf|.
const char* tpc__dims_str(const tpc_shape_t* s, char* buf, int size);

/// Formats |t| as MLIR prints it ("tensor<8x64xbf16>") into |buf|; returns |buf|.
const char* tpc__type_str(MlirType t, char* buf, int size);

/// Emits "'<op name>' op violates rule <rule>: <message>" at |op|'s location and returns
/// failure. Every rule id is listed in docs/dialect.md and has a negative test.
MlirLogicalResult tpc__rule_error(MlirOperation op, const char* rule, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// Rule grad.acc: a gradient op's optional acc (null: none) is added to a whole result, never to a
/// |partial| one (the collective that completes it would add acc once per rank).
MlirLogicalResult tpc__verify_acc(MlirOperation op, bool partial, MlirValue acc);

/// Rounds |x| up to a multiple of |m| (m > 0).
static inline int64_t tpc__round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Divides rounding up (m > 0).
static inline int64_t tpc__ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

/// True when |n| splits into |a| x |b| equal parts: a, b >= 1, a * b does not overflow and
/// divides n. Attributes and zero-sized dimensions reach the rules unchecked, so every rule that
/// divides by a product goes through here (a zero divisor or an overflowing product is UB).
static inline bool tpc__splits(int64_t n, int64_t a, int64_t b) {
  int64_t ab;
  return a >= 1 && b >= 1 && !__builtin_mul_overflow(a, b, &ab) && n % ab == 0;
}

/// Per-op verifiers, one family per file. Each returns failure after emitting its diagnostics.
MlirLogicalResult tpc__verify_compute(MlirOperation op, int kind);
MlirLogicalResult tpc__verify_quant(MlirOperation op, int kind);
MlirLogicalResult tpc__verify_collective(MlirOperation op, int kind);

/// The quantized layout rules (quant.input, quant.data, quant.block, quant.scale,
/// quant.global-scale) of |hp| quantized in |format| along |axis| to data, scale and global_scale
/// (null unless nvfp4), and the optional per-tensor amax operand |amax| (quant.amax-format,
/// quant.amax): tp.quantize's, and the fused norm's quantized outputs (tpc_verify_quant.c).
MlirLogicalResult tpc__verify_quant_layout(MlirOperation op, tpc_format_t format, tpc_axis_t axis, MlirValue hp,
                                           MlirValue data, MlirValue scale, MlirValue global_scale);
MlirLogicalResult tpc__verify_quant_amax(MlirOperation op, tpc_format_t format, MlirValue amax);

/// A collective's (or a vocabulary-parallel op's) `mesh` and `axes` (rules collective.mesh,
/// collective.axes); on success stores the group's number of ranks (tpc_verify_collective.c).
MlirLogicalResult tpc__verify_group(MlirOperation op, MlirAttribute mesh_ref, MlirAttribute axes,
                                    int64_t* out_group_size);

/// Per-op verifier of the whole-model ops: embedding, cross-entropy, optimizer (tpc_verify_model.c).
MlirLogicalResult tpc__verify_model(MlirOperation op, int kind);

/// Per-op verifier of the backward ops (tpc_verify_grad.c).
MlirLogicalResult tpc__verify_grad(MlirOperation op, int kind);

/// Per-op verifier of rope, attention and attention_grad (tpc_verify_attention.c).
MlirLogicalResult tpc__verify_attention(MlirOperation op, int kind);

/// Per-op verifier of the generation ops: kvcache_write and sample (tpc_verify_generate.c).
MlirLogicalResult tpc__verify_generate(MlirOperation op, int kind);

/// Rules on a GLU's kind/interleave/alpha/limit attributes (given by index), F = output width.
MlirLogicalResult tpc__verify_glu_params(MlirOperation op, int kind_index, int interleave_index, int alpha_index,
                                         int limit_index, int op_kind, int64_t f);

/// Rules shared by every normalization: x[M,H] float, gamma[H], beta[H] (optional), eps > 0.
MlirLogicalResult tpc__verify_norm_params(MlirOperation op, MlirValue x, MlirValue gamma, MlirValue beta, double eps);

#endif  // TPC_VERIFY_UTIL_H_
