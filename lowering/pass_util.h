// Building external MLIR passes from plain C functions.
//
// LLVM 22's C API has external passes but no pass registry, so every tpc pass is an external
// pass made here and listed in pipeline.c, which the tools consult to map flags to passes.
#ifndef TPC_PASS_UTIL_H_
#define TPC_PASS_UTIL_H_

#include <stdbool.h>

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The body of a pass: transforms or checks |op| and returns failure to stop the pipeline.
/// Diagnostics are emitted at the ops concerned before returning failure.
typedef MlirLogicalResult (*tpc_pass_run_fn_t)(MlirOperation op, void* options);

/// What a pass is; one static instance per pass file.
typedef struct tpc_pass_info_t {
  const char* argument;     // command-line name, e.g. "tp-verify"
  const char* description;  // one sentence for --help
  tpc_pass_run_fn_t run;
  /// Unique per pass and 8-byte aligned: its address is the pass's MlirTypeID.
  _Alignas(8) char type_id_storage[8];
} tpc_pass_info_t;

/// Creates a pass over any op (normally the top-level module) that calls |info|->run with
/// |options|; ownership of the pass goes to the caller (usually a pass manager). |info| and
/// |options| must outlive the pass.
MlirPass tpc_pass_create(tpc_pass_info_t* info, void* options);

/// The passes that rewrite whole functions as text (tp-shard, tp-autodiff, tp-lower-runtime):
/// parses |funcs| (the new top-level ops) and replaces every func.func of |module| (and every
/// tp.mesh, when |and_meshes|) by them. When the text does not
/// parse (an internal error), prints it to stderr, emits "<pass>: internal error: the <what> does
/// not parse" at |module| and returns false, leaving the module unchanged.
bool tpc_replace_functions(MlirOperation module, const char* funcs, bool and_meshes, const char* pass, const char* what);

/// A bound on the values a pass creates for function |func|: |per_op| per op of its body plus its
/// arguments plus a margin. Passes size their value tables with it (allocated once, so pointers
/// into them stay valid): no fixed cap on the function's size.
int tpc_func_value_bound(MlirOperation func, int per_op);

/// The attribute dictionary of argument (|result| false) or result |i| of |func| (its arg_attrs
/// or res_attrs entry), or a null attribute.
MlirAttribute tpc_slot_dict(MlirOperation func, bool result, intptr_t i);
/// Attribute |name| of that dictionary, or a null attribute.
MlirAttribute tpc_slot_attr(MlirOperation func, bool result, intptr_t i, const char* name);
/// Its tp.name (the user's and the checkpoint's name of the tensor), or a null string ref.
MlirStringRef tpc_slot_tp_name(MlirOperation func, bool result, intptr_t i);

/// |s| as a string ref, and a named attribute |name| = |a|: the building blocks of the ops a pass
/// creates.
static inline MlirStringRef tpc_ref(const char* s) { return mlirStringRefCreateFromCString(s); }
static inline MlirNamedAttribute tpc_named_attr(MlirContext ctx, const char* name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(ctx, tpc_ref(name)), a);
}

/// The op that uses |v| once, or a null op when |v| has no use or several.
static inline MlirOperation tpc_only_user(MlirValue v) {
  MlirOpOperand use = mlirValueGetFirstUse(v);
  if (mlirOpOperandIsNull(use) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use))) return (MlirOperation){NULL};
  return mlirOpOperandGetOwner(use);
}

/// A growable list of ops: zero-initialize it, push with tpc_op_list_push, free |ops|.
typedef struct {
  MlirOperation* ops;
  intptr_t count, cap;
} tpc_op_list_t;

/// Appends |op| to |list|; false when out of host memory (the list is unchanged).
bool tpc_op_list_push(tpc_op_list_t* list, MlirOperation op);

/// Whether |list| holds |op|.
bool tpc_op_list_has(const tpc_op_list_t* list, MlirOperation op);

/// The tp ops under |root| in pre-order, those whose kind |keep| accepts (|keep| NULL: every tp
/// op), as an array the caller frees, with their number in *|count|. NULL when there is none, or
/// when out of host memory (then *|count| is -1).
MlirOperation* tpc_collect_ops(MlirOperation root, bool (*keep)(int kind), intptr_t* count);

#ifdef __cplusplus
}
#endif

#endif  // TPC_PASS_UTIL_H_
