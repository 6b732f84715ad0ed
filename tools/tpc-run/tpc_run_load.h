// tpc-run's argument sources: the --inputs and --weights checkpoints (one safetensors file or a
// Hugging Face index of several), the --weight-names rules, and the reads of an argument's
// tensors, whole or as one rank's shard (docs/io.md, "Checkpoints of several files").
#ifndef TPC_RUN_LOAD_H_
#define TPC_RUN_LOAD_H_

#include <stdbool.h>
#include <stdint.h>

#include "tprt_allocator.h"
#include "tprt_checkpoint.h"
#include "tprt_name_rules.h"
#include "tprt_shard.h"
#include "tprt_world.h"
#include "tpc_run_args.h"

typedef struct {
  tprt_checkpoint_t* inputs;   // --inputs, or NULL
  tprt_checkpoint_t* weights;  // --weights, or NULL
  tprt_name_rules_t* rules;    // --weight-names, or NULL
  uint64_t bytes_read;         // tensor bytes copied out of the checkpoints so far
  double seconds;              // spent copying them
} tpc_sources_t;

/// Where one argument comes from: |count| checkpoint tensors (0: none; Philox or an error),
/// concatenated along dim 0.
typedef struct {
  int count;
  char** names;               // the tensor names (tprt_name_rules_apply's array)
  tprt_safetensors_t** files; // the file that holds each
  int64_t* rows;              // each tensor's first dimension
} tpc_arg_src_t;

/// Seconds on the monotonic clock (tpc-run's step and load timings).
double tpc_now(void);

tprt_status_t tpc_sources_open(const tpc_run_options_t* o, tprt_allocator_t alloc, tpc_sources_t* out) TPRT_MUST_USE_RESULT;
void tpc_sources_close(tpc_sources_t* s);

/// Finds the tensors of argument |name| whose logical tensor is |logical| (dims and dtype): the
/// argument's own name in --inputs, else its rule-mapped names in --weights. Checks their dtype
/// and shapes against |logical|. |out| is released with tpc_arg_src_free.
tprt_status_t tpc_arg_src_find(const tpc_sources_t* s, const char* name, const tprt_tensor_t* logical,
                               tpc_arg_src_t* out) TPRT_MUST_USE_RESULT;
void tpc_arg_src_free(tpc_arg_src_t* src);

/// Reads the whole logical tensor of |src| into |logical|.
tprt_status_t tpc_arg_src_read(tpc_sources_t* s, const tpc_arg_src_t* src, const tprt_tensor_t* logical) TPRT_MUST_USE_RESULT;

/// Whether rank pieces of |shard| can be read straight from the files (dims past the first
/// unblocked, whole-byte elements); else read the logical tensor and extract.
bool tpc_arg_src_can_slice(const tprt_shard_t* shard, int dtype);

/// Reads world rank |r|'s piece of |src| (sharded as |shard|) into |local|, touching only the
/// bytes of that piece.
tprt_status_t tpc_arg_src_read_local(tpc_sources_t* s, const tpc_arg_src_t* src, const tprt_shard_t* shard,
                                     const tprt_world_t* world, int r, tprt_tensor_t* local) TPRT_MUST_USE_RESULT;

#endif  // TPC_RUN_LOAD_H_
