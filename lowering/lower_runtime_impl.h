// Internal to tp-lower-runtime (lower_runtime.c): the dtype mapping and the module manifest (the
// JSON in @tpc_module_info that tprt_module_load reads: meshes, numerics, arguments, results).
#ifndef TPC_LOWER_RUNTIME_IMPL_H_
#define TPC_LOWER_RUNTIME_IMPL_H_

#include <cjson/cJSON.h>

#include "mlir-c/IR.h"

/// The tprt dtype (TPRT_DTYPE_*) of element type |t|, or -1.
int tpc_lower_dtype_of(MlirType t);

/// Appends to |list| the manifest entry of a tensor: name, dtype, shape and, for a sharded one,
/// its tp.shard attribute ({axes, blocks, logical}; |shard| may be null).
void tpc_manifest_tensor(cJSON* list, const char* name, MlirType t, MlirAttribute shard);

/// Adds the module's numerics, chunk count and meshes to the manifest |root|.
void tpc_manifest_module_attrs(cJSON* root, MlirOperation module);

#endif  // TPC_LOWER_RUNTIME_IMPL_H_
