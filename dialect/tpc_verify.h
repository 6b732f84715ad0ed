// The tp verifier: every rule of the dialect that IRDL cannot express (shapes, element types,
// divisibility, mesh axes, quantization layouts, module attributes). Each violated rule emits
// one diagnostic "'tp.<op>' op violates rule <id>: ..." at the op; docs/dialect.md lists the ids.
#ifndef TPC_VERIFY_H_
#define TPC_VERIFY_H_

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Verifies |root| and every op nested in it; reports every violation, not just the first.
MlirLogicalResult tpc_verify(MlirOperation root);

/// Verifies the rules of the single op |op| (a tp op or a module's attributes).
MlirLogicalResult tpc_verify_op(MlirOperation op);

/// Returns the tp.mesh named |name| in the nearest enclosing module of |from|, or a null op.
MlirOperation tpc_mesh_lookup(MlirOperation from, MlirStringRef name);

/// Returns the tensor type carried by a !tp.future<...> type, or a null type for other types.
MlirType tpc_future_get_value_type(MlirType t);

/// Returns the tpc_numerics_t of a tp.numerics spelling, or -1.
int tpc_numerics_parse(MlirStringRef s);

#ifdef __cplusplus
}
#endif

#endif  // TPC_VERIFY_H_
