// The ABI between compiled tp modules and libtprt: the single source of the names and
// signatures that lowered code calls (tp-lower-runtime emits calls that match this header).
//
// A compiled module (a shared object made by tpc-compile) exports, per lowered function F:
//   int32_t tpc_entry_F(tprt_exec_t* exec, void* const* args, void* const* results, void* arena);
// and one NUL-terminated JSON string `tpc_module_info` describing its functions, arguments,
// results, arena size, mesh and numerics (see docs/runtime.md). The entry returns 0 on success
// or the failing op's status code; the status itself is kept in |exec|.
//
// Each tp op lowers to one call
//   int32_t tprt_abi_<op>(tprt_exec_t* exec, void* const* buffers, const int64_t* desc);
// |buffers| holds one pointer per slot of the op (its operands then its results, in the order of
// dialect/tp.irdl.mlir; NULL for an absent optional operand; a !tp.future slot points at the
// buffer the collective fills). |desc| is a static descriptor:
//   desc[0]  TPRT_ABI_DESC_MAGIC
//   desc[1]  S, the number of slots, then for each slot: dtype (-1 if absent), rank, dims[rank]
//   then A, the number of attributes, then for each attribute (in the op's spec order): L, then
//   L values: bool/integer/enumeration -> 1 value (enumerations use the TPRT_<ATTR>_<VALUE>
//   numbering of tprt_ops_abi.h); float -> 1 value holding the f32 bit pattern; mesh symbol ->
//   the mesh rank then its axis sizes; axes array -> 1 value, a bitmask over the mesh axes;
//   string -> 0 values. Absent optional attributes are encoded with their defaults.
// Slot and attribute indices are the TPRT_<OP>_SLOT_* / TPRT_<OP>_ATTR_* of tprt_ops_abi.h.
#ifndef TPRT_ABI_H_
#define TPRT_ABI_H_

#include <stdint.h>

#include "tprt_ops_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Bumped whenever a signature, the descriptor layout or an enum attribute's values change (an
/// older runtime refuses a module that may carry a value it does not know).
#define TPRT_ABI_VERSION 6
/// desc[0] of every op descriptor: "tpc" and the ABI version.
#define TPRT_ABI_DESC_MAGIC (0x7470630000000000LL | TPRT_ABI_VERSION)
/// Alignment of every arena offset the compiler plans.
#define TPRT_ABI_ARENA_ALIGNMENT 256
/// Name of the module's JSON description.
#define TPRT_ABI_MODULE_INFO_SYMBOL "tpc_module_info"
/// Prefix of every op's runtime function: tprt_abi_<op name without "tp.">.
#define TPRT_ABI_OP_PREFIX "tprt_abi_"
/// Prefix of every entry point.
#define TPRT_ABI_ENTRY_PREFIX "tpc_entry_"

/// The per-rank execution state a compiled step runs against (see tprt_exec.h).
typedef struct tprt_exec_t tprt_exec_t;

/// The signature of tpc_entry_<F>.
typedef int32_t (*tprt_entry_fn_t)(tprt_exec_t* exec, void* const* args, void* const* results, void* arena);

#define TPRT__ABI_DECLARE(name) int32_t tprt_abi_##name(tprt_exec_t* exec, void* const* buffers, const int64_t* desc);
TPRT_ABI_OPS(TPRT__ABI_DECLARE)
#undef TPRT__ABI_DECLARE

/// Copies slot 0 into slot 1 (same dtype and shape); used when a function returns an argument
/// or the same value twice.
int32_t tprt_abi_copy(tprt_exec_t* exec, void* const* buffers, const int64_t* desc);

/// Fills slot 0 with 0xFF bytes (NaN for floats); emitted after a buffer's last use by the
/// tp-lower-runtime-poison pass to prove that the memory plan never reuses live bytes.
int32_t tprt_abi_poison(tprt_exec_t* exec, void* const* buffers, const int64_t* desc);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_ABI_H_
