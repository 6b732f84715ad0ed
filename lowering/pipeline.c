// The pass and pipeline registry. Later passes add a line here and a constructor in passes.h.
#define _POSIX_C_SOURCE 200809L  // strtok_r
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/RegisterEverything.h"

#include "passes.h"

const tpc_pass_entry_t tpc_pass_registry[] = {
    {"tp-verify", "Check the tp dialect's shape, type, mesh, quantization and module-attribute rules",
     tpc_create_verify_pass},
    {"tp-autodiff", "Turn every function into its training step: forward, then backward from result cotangents",
     tpc_create_autodiff_pass},
    {"tp-adamw", "Append AdamW to a training step: the exact global gradient norm, clipping and every parameter's update",
     tpc_create_adamw_pass},
    {"tp-shard", "Partition a logical module over the module's mesh into the per-rank program",
     tpc_create_shard_pass},
    {"tp-gtp", "Shard weights over the gtp mesh axis: prefetched all-gathers before each use, gradients reduce-scattered",
     tpc_create_gtp_pass},
    {"tp-invariant", "Apply tp.numerics invariant/exact: canonical chunk subtrees and tree-ordered collectives",
     tpc_create_invariant_pass},
    {"tp-micro-batch", "Cut a step sharded over mesh axis mb into a per-micro-batch gradient function and an update function",
     tpc_create_micro_batch_pass},
    {"tp-fuse", "Fuse all-reduce (or token reduce-scatter) + residual add + RMSNorm into one op (the chain's bits outside fast numerics), the LM head's gradients into one, and gradient sums into the gradient ops' acc",
     tpc_create_fuse_pass},
    {"tp-lower-runtime", "Plan intermediate tensors into one arena and lower tp ops to runtime ABI calls",
     tpc_create_lower_runtime_pass},
    {"tp-lower-runtime-poison", "tp-lower-runtime that poisons every arena buffer after its last use (debugging)",
     tpc_create_lower_runtime_poison_pass},
    {NULL, NULL, NULL},
};

const tpc_pipeline_entry_t tpc_pipeline_registry[] = {
    {"verify", "Verify a module and print it unchanged", "tp-verify"},
    {"shard", "Partition a logical module over its mesh (declare one with --mesh)", "tp-shard"},
    {"invariant", "Partition a logical module and apply its tp.numerics (invariant/exact) to the per-rank program",
     "tp-shard,tp-gtp,tp-invariant"},
    {"infer", "Partition a logical module and lower it for the CPU runtime (tpc-run --pipeline infer)",
     "tp-shard,tp-gtp,tp-invariant,tp-fuse,tp-lower-runtime,mlir:convert-to-llvm,mlir:reconcile-unrealized-casts"},
    {"train", "Differentiate a logical module, partition the training step and lower it (tpc-run --pipeline train)",
     "tp-autodiff,tp-shard,tp-gtp,tp-invariant,tp-fuse,tp-lower-runtime,mlir:convert-to-llvm,mlir:reconcile-unrealized-casts"},
    {"step", "Differentiate a logical module, append AdamW (tp-adamw), partition and lower it: a whole optimizer step (tpc-train)",
     "tp-autodiff,tp-adamw,tp-shard,tp-gtp,tp-invariant,tp-micro-batch,tp-fuse,tp-lower-runtime,mlir:convert-to-llvm,mlir:reconcile-unrealized-casts"},
    {"lower-cpu", "Lower a per-rank module to LLVM dialect calling the runtime ABI",
     "tp-lower-runtime,mlir:convert-to-llvm,mlir:reconcile-unrealized-casts"},
    {"lower-cpu-poison", "lower-cpu with dead arena buffers poisoned after their last use (memory-plan checks)",
     "tp-lower-runtime-poison,mlir:convert-to-llvm,mlir:reconcile-unrealized-casts"},
    {NULL, NULL, NULL},
};

const tpc_pass_entry_t* tpc_pass_lookup(const char* argument) {
  for (const tpc_pass_entry_t* e = tpc_pass_registry; e->argument; ++e)
    if (strcmp(e->argument, argument) == 0) return e;
  return NULL;
}

const tpc_pipeline_entry_t* tpc_pipeline_lookup(const char* name) {
  for (const tpc_pipeline_entry_t* e = tpc_pipeline_registry; e->name; ++e)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}

void tpc_pipeline_init(void) {
  static bool done = false;
  if (!done) mlirRegisterAllPasses();
  done = true;
}

typedef struct {
  char* buf;
  size_t size;
} tpc__error_sink_t;

static void tpc__error_append(MlirStringRef s, void* user) {
  tpc__error_sink_t* e = user;
  size_t len = strlen(e->buf);
  if (e->size > len + 1) snprintf(e->buf + len, e->size - len, "%.*s", (int)s.length, s.data);
}

bool tpc_pipeline_add_element(MlirPassManager pm, const char* element, bool verify_each, char* error,
                              size_t error_size) {
  if (error_size) error[0] = '\0';
  if (strncmp(element, "mlir:", 5) == 0) {
    tpc__error_sink_t sink = {error, error_size};
    if (mlirLogicalResultIsFailure(mlirOpPassManagerAddPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                                                mlirStringRefCreateFromCString(element + 5),
                                                                tpc__error_append, &sink))) {
      if (error_size && !error[0]) snprintf(error, error_size, "unknown MLIR pipeline '%s'", element + 5);
      return false;
    }
    return true;
  }
  const tpc_pass_entry_t* p = tpc_pass_lookup(element);
  if (!p) {
    snprintf(error, error_size, "unknown pass '%s'", element);
    return false;
  }
  mlirPassManagerAddOwnedPass(pm, p->create());
  if (verify_each && strcmp(element, "tp-verify") != 0) mlirPassManagerAddOwnedPass(pm, tpc_create_verify_pass());
  return true;
}

bool tpc_pipeline_add(MlirPassManager pm, const char* csv, bool verify_each, char* error, size_t error_size) {
  char* buf = strdup(csv);
  if (!buf) {
    snprintf(error, error_size, "out of memory");
    return false;
  }
  bool ok = true;
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok && ok; tok = strtok_r(NULL, ",", &save))
    ok = tpc_pipeline_add_element(pm, tok, verify_each, error, error_size);
  free(buf);
  return ok;
}
