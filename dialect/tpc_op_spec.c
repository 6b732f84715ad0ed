// Generic accessors over the generated op specification table (see tpc_op_spec.h).
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "tp_ops.h"

static bool tpc__ref_eq(MlirStringRef a, const char* b) {
  return a.length == strlen(b) && memcmp(a.data, b, a.length) == 0;
}

int tpc_op_get_kind(MlirOperation op) {
  if (mlirOperationIsNull(op)) return TPC_OP_UNKNOWN;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  // Every tp op name starts with "tp."; this test keeps the table scan off foreign ops.
  if (name.length < 4 || memcmp(name.data, "tp.", 3) != 0) return TPC_OP_UNKNOWN;
  for (int k = 1; k < TPC_OP_COUNT; ++k)
    if (tpc__ref_eq(name, tpc_op_specs[k].name)) return k;
  return TPC_OP_UNKNOWN;
}

const tpc_op_spec_t* tpc_op_get_spec(int kind) {
  return kind > TPC_OP_UNKNOWN && kind < TPC_OP_COUNT ? &tpc_op_specs[kind] : NULL;
}

// Maps a slot index to the position of its value. With at most one optional or variadic slot
// its size is what the other slots leave over; with several, IRDL requires the segment-size
// attribute (operandSegmentSizes / resultSegmentSizes) and we read it.
static intptr_t tpc__slot_position(MlirOperation op, const tpc_slot_spec_t* slots, int num_slots,
                                   int slot, intptr_t num_values, const char* segment_attr) {
  int non_single = 0;
  for (int i = 0; i < num_slots; ++i) non_single += slots[i].kind != TPC_SLOT_SINGLE;
  if (non_single <= 1) {
    intptr_t extra = num_values - (num_slots - non_single);
    intptr_t pos = 0;
    for (int i = 0; i < slot; ++i) pos += slots[i].kind == TPC_SLOT_SINGLE ? 1 : extra;
    intptr_t size = slots[slot].kind == TPC_SLOT_SINGLE ? 1 : extra;
    return size >= 1 && pos < num_values ? pos : -1;
  }
  MlirAttribute seg = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(segment_attr));
  if (mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
      mlirDenseArrayGetNumElements(seg) != num_slots)
    return -1;
  intptr_t pos = 0;
  for (int i = 0; i < slot; ++i) pos += mlirDenseI32ArrayGetElement(seg, i);
  return mlirDenseI32ArrayGetElement(seg, slot) >= 1 && pos < num_values ? pos : -1;
}

MlirValue tpc_op_get_operand(MlirOperation op, int kind, int slot) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  MlirValue none = {NULL};
  if (!spec || slot < 0 || slot >= spec->num_operands) return none;
  intptr_t pos = tpc__slot_position(op, spec->operands, spec->num_operands, slot,
                                    mlirOperationGetNumOperands(op), "operandSegmentSizes");
  return pos < 0 ? none : mlirOperationGetOperand(op, pos);
}

MlirValue tpc_op_get_result(MlirOperation op, int kind, int slot) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  MlirValue none = {NULL};
  if (!spec || slot < 0 || slot >= spec->num_results) return none;
  intptr_t pos = tpc__slot_position(op, spec->results, spec->num_results, slot,
                                    mlirOperationGetNumResults(op), "resultSegmentSizes");
  return pos < 0 ? none : mlirOperationGetResult(op, pos);
}

MlirAttribute tpc_op_get_attr(MlirOperation op, int kind, int index) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  MlirAttribute none = {NULL};
  if (!spec || index < 0 || index >= spec->num_attrs) return none;
  return mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(spec->attrs[index].name));
}

bool tpc_op_get_bool(MlirOperation op, int kind, int index) {
  MlirAttribute a = tpc_op_get_attr(op, kind, index);
  if (!mlirAttributeIsNull(a) && mlirAttributeIsABool(a)) return mlirBoolAttrGetValue(a);
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  return spec && index >= 0 && index < spec->num_attrs && spec->attrs[index].default_value != 0.0;
}

int64_t tpc_op_get_i64(MlirOperation op, int kind, int index) {
  MlirAttribute a = tpc_op_get_attr(op, kind, index);
  if (!mlirAttributeIsNull(a) && mlirAttributeIsAInteger(a)) return mlirIntegerAttrGetValueInt(a);
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  return spec && index >= 0 && index < spec->num_attrs ? (int64_t)spec->attrs[index].default_value : 0;
}

double tpc_op_get_f64(MlirOperation op, int kind, int index) {
  MlirAttribute a = tpc_op_get_attr(op, kind, index);
  if (!mlirAttributeIsNull(a) && mlirAttributeIsAFloat(a)) return mlirFloatAttrGetValueDouble(a);
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  return spec && index >= 0 && index < spec->num_attrs ? spec->attrs[index].default_value : 0.0;
}

int tpc_op_get_enum(MlirOperation op, int kind, int index) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  if (!spec || index < 0 || index >= spec->num_attrs || spec->attrs[index].kind != TPC_ATTR_ENUM) return -1;
  const tpc_attr_spec_t* as = &spec->attrs[index];
  MlirAttribute a = tpc_op_get_attr(op, kind, index);
  if (mlirAttributeIsNull(a)) return as->enum_default;
  if (!mlirAttributeIsAString(a)) return -1;
  MlirStringRef s = mlirStringAttrGetValue(a);
  for (const int* v = as->enum_values; *v >= 0; ++v)
    if (tpc__ref_eq(s, as->enum_names[*v])) return *v;
  return -1;
}

int tpc_op_spec_find_attr(const tpc_op_spec_t* spec, MlirStringRef name) {
  for (int i = 0; spec && i < spec->num_attrs; ++i)
    if (tpc__ref_eq(name, spec->attrs[i].name)) return i;
  return -1;
}
