// Op specifications of the tp dialect and the generic accessors behind the typed ones.
//
// The tables are generated from tp.irdl.mlir into tp_ops.c; code outside dialect/ includes
// tp_ops.h and calls the typed accessors (tpc_linear_get_x, tpc_glu_get_kind, ...), never the
// generic functions below with literal indices.
#ifndef TPC_OP_SPEC_H_
#define TPC_OP_SPEC_H_

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// How many values an operand or result slot holds.
typedef enum tpc_slot_kind_e {
  TPC_SLOT_SINGLE = 0,
  TPC_SLOT_OPTIONAL = 1,
  TPC_SLOT_VARIADIC = 2,
} tpc_slot_kind_t;

/// One named operand or result.
typedef struct tpc_slot_spec_t {
  const char* name;
  tpc_slot_kind_t kind;
} tpc_slot_spec_t;

/// The value kind of an attribute, derived from its IRDL constraint or its default.
typedef enum tpc_attr_kind_e {
  TPC_ATTR_ANY = 0,
  TPC_ATTR_BOOL,
  TPC_ATTR_I64,
  TPC_ATTR_F32,
  TPC_ATTR_STRING,
  TPC_ATTR_ENUM,
  TPC_ATTR_SYMBOL,
  TPC_ATTR_ARRAY,
  TPC_ATTR_DENSE_I64,
} tpc_attr_kind_t;

/// One named attribute: required ones come from `irdl.attributes`, optional ones (with their
/// defaults) from `tp.optional_attributes`.
typedef struct tpc_attr_spec_t {
  const char* name;
  tpc_attr_kind_t kind;
  bool required;
  /// For enumerations: the allowed values (indices into |enum_names|), terminated by -1.
  const int* enum_values;
  /// For enumerations: the spelling of every value of the attribute's enumeration.
  const char* const* enum_names;
  /// For enumerations: the default value's index into |enum_names|.
  int enum_default;
  /// For bool, i64 and f32 attributes: the default value.
  double default_value;
} tpc_attr_spec_t;

/// One op of the dialect.
typedef struct tpc_op_spec_t {
  const char* name;  // "tp.linear"
  const tpc_slot_spec_t* operands;
  int num_operands;
  const tpc_slot_spec_t* results;
  int num_results;
  const tpc_attr_spec_t* attrs;
  int num_attrs;
} tpc_op_spec_t;

/// Returns the tpc_op_kind_t of |op|, or 0 (TPC_OP_UNKNOWN) when it is not a tp op.
int tpc_op_get_kind(MlirOperation op);

/// Returns the specification of the op kind |kind|, or NULL for TPC_OP_UNKNOWN.
const tpc_op_spec_t* tpc_op_get_spec(int kind);

/// Returns the value of operand slot |slot| of |op|, or a null value when an optional slot is
/// absent or |op| has too few operands for its spec (IRDL verification reports that).
MlirValue tpc_op_get_operand(MlirOperation op, int kind, int slot);

/// Returns the value of result slot |slot| of |op|, or a null value as for operands.
MlirValue tpc_op_get_result(MlirOperation op, int kind, int slot);

/// Returns attribute |index| of |op|'s spec, or a null attribute when it is absent.
MlirAttribute tpc_op_get_attr(MlirOperation op, int kind, int index);

/// Returns a bool attribute, or its default when absent or of the wrong kind.
bool tpc_op_get_bool(MlirOperation op, int kind, int index);

/// Returns an integer attribute, or its default when absent or of the wrong kind.
int64_t tpc_op_get_i64(MlirOperation op, int kind, int index);

/// Returns a float attribute, or its default when absent or of the wrong kind.
double tpc_op_get_f64(MlirOperation op, int kind, int index);

/// Returns the enumeration index of a string attribute, its default when absent, and -1 when the
/// string is not a value the op allows.
int tpc_op_get_enum(MlirOperation op, int kind, int index);

/// Returns the index of the attribute named |name| in |spec|, or -1.
int tpc_op_spec_find_attr(const tpc_op_spec_t* spec, MlirStringRef name);

#ifdef __cplusplus
}
#endif

#endif  // TPC_OP_SPEC_H_
