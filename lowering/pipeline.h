// The registry of passes and named pipelines that tools expose as flags.
//
// LLVM 22's C API cannot register passes by name, so this table is the single place that maps
// a command-line argument ("tp-verify") to a pass constructor, and a pipeline name to its passes.
#ifndef TPC_PIPELINE_H_
#define TPC_PIPELINE_H_

#include <stdbool.h>
#include <stddef.h>

#include "mlir-c/Pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/// One registered pass.
typedef struct tpc_pass_entry_t {
  const char* argument;
  const char* description;
  MlirPass (*create)(void);
} tpc_pass_entry_t;

/// One named pipeline: a comma-separated list of pass arguments. An element "mlir:<pipeline>"
/// names an upstream MLIR pass pipeline (e.g. "mlir:convert-to-llvm").
typedef struct tpc_pipeline_entry_t {
  const char* name;
  const char* description;
  const char* passes;
} tpc_pipeline_entry_t;

/// The registered passes, terminated by an entry whose argument is NULL.
extern const tpc_pass_entry_t tpc_pass_registry[];

/// The named pipelines, terminated by an entry whose name is NULL.
extern const tpc_pipeline_entry_t tpc_pipeline_registry[];

/// Returns the pass registered as |argument|, or NULL.
const tpc_pass_entry_t* tpc_pass_lookup(const char* argument);

/// Returns the pipeline named |name|, or NULL.
const tpc_pipeline_entry_t* tpc_pipeline_lookup(const char* name);

/// Appends the passes of |csv| (pass arguments and "mlir:" elements, comma-separated) to |pm|;
/// with |verify_each|, tp-verify runs after every tpc pass. On an unknown element, writes a
/// message to |error| (of |error_size| bytes) and returns false. Call tpc_pipeline_init first.
bool tpc_pipeline_add(MlirPassManager pm, const char* csv, bool verify_each, char* error, size_t error_size);

/// Appends one element to |pm|: a pass argument ("tp-shard") or "mlir:<element>", an upstream
/// pipeline element as MLIR's textual pipelines write it ("func.func(cse,canonicalize)"); with
/// |verify_each|, tp-verify runs after a tpc pass. On failure, writes a message to |error| and
/// returns false. Call tpc_pipeline_init first.
bool tpc_pipeline_add_element(MlirPassManager pm, const char* element, bool verify_each, char* error,
                              size_t error_size);

/// Registers the upstream MLIR passes so that "mlir:" elements resolve. Idempotent.
void tpc_pipeline_init(void);

#ifdef __cplusplus
}
#endif

#endif  // TPC_PIPELINE_H_
