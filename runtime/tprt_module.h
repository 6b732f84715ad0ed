// Loading a compiled tp module (a shared object from tpc-compile): its entry points and its
// description (tpc_module_info: functions, arguments, results, arena size, mesh, numerics).
// Thread safety: a loaded module is immutable and may be used from every rank thread.
#ifndef TPRT_MODULE_H_
#define TPRT_MODULE_H_

#include "tprt_abi.h"
#include "tprt_allocator.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPRT_MODULE_NAME_LEN 128

/// An argument or result: its name and per-rank layout (tensor.data is NULL), and, for modules
/// partitioned by tp-shard, where the local tensor sits in the logical one (see tprt_shard.h).
typedef struct tprt_module_tensor_t {
  char name[TPRT_MODULE_NAME_LEN];
  tprt_tensor_t layout;
  bool sharded;                          // false: the local tensor is the logical tensor
  int64_t logical[TPRT_MAX_RANK];        // the logical shape
  char axes[TPRT_MAX_RANK][32];          // per dim: comma-separated mesh axes ("" replicated)
  int64_t blocks[TPRT_MAX_RANK];
} tprt_module_tensor_t;

typedef struct tprt_module_function_t {
  char name[TPRT_MODULE_NAME_LEN];
  tprt_entry_fn_t entry;
  int64_t arena_bytes;
  int64_t arena_live_peak_bytes;  // the most arena bytes live at one op: the plan's lower bound (-1: unknown)
  int64_t gtp_prefetch;           // contractions between a GTP weight's gather and its use (-1: no tp-gtp)
  int num_args, num_results;
  tprt_module_tensor_t* args;     // num_args (any number; owned by the module)
  tprt_module_tensor_t* results;  // num_results
} tprt_module_function_t;

typedef struct tprt_module_t {
  void* handle;  // dlopen handle
  char path[1024];
  char numerics[16];
  int chunks;
  int num_functions;
  tprt_module_function_t* functions;  // num_functions (owned by the module)
  /// The first tp.mesh of the module (num_mesh_axes == 0 when it declares none).
  int num_mesh_axes;
  char mesh_axes[4][32];
  int mesh_shape[4];
} tprt_module_t;

/// Loads the shared object at |path| and reads its description; the caller owns the module and
/// releases it with tprt_module_unload. Errors name the file and the problem.
tprt_status_t tprt_module_load(const char* path, tprt_allocator_t allocator, tprt_module_t** out_module)
    TPRT_MUST_USE_RESULT;

/// Unloads |module| (NULL-safe).
void tprt_module_unload(tprt_module_t* module, tprt_allocator_t allocator);

/// Returns the function named |name| (or the first when |name| is NULL), or NULL.
const tprt_module_function_t* tprt_module_function(const tprt_module_t* module, const char* name);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_MODULE_H_
