// tpc-run's logical tensors, what checkpoints hold and what --hash and --outputs see: the logical
// tensor of a module argument or result and its shard, the seeded Philox values of an argument
// found in no checkpoint, the FNV-1a hash --hash prints, and writing tensors to a checkpoint.
#ifndef TPC_RUN_TENSOR_H_
#define TPC_RUN_TENSOR_H_

#include <stddef.h>
#include <stdint.h>

#include "tprt_module.h"
#include "tprt_shard.h"
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "tprt_world.h"
#include "tpc_run_args.h"
#include "tpc_run_load.h"

/// The logical tensor of |mt| in |out| (no data) and, when |mt| is sharded, its shard over |world|.
tprt_status_t tpc__logical(const tprt_module_tensor_t* mt, const tprt_world_t* world, tprt_tensor_t* out,
                           tprt_shard_t* out_shard) TPRT_MUST_USE_RESULT;

/// The 64-bit FNV-1a hash of |n| bytes of |data|.
uint64_t tpc__fnv1a(const void* data, size_t n);

/// Fills |t|, the argument |name| that no checkpoint of |src| holds, from Philox (--seed).
tprt_status_t tpc__init_arg(const tpc_run_options_t* o, const tpc_sources_t* src, const char* name,
                            tprt_tensor_t* t) TPRT_MUST_USE_RESULT;

/// Writes |n| tensors named |names| to |path| (--outputs, --dump-args).
tprt_status_t tpc__write(const tpc_run_options_t* o, const char* path, int n, const char** names,
                         const tprt_tensor_t* tensors) TPRT_MUST_USE_RESULT;

#endif  // TPC_RUN_TENSOR_H_
