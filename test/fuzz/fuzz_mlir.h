// What the MLIR harnesses (fuzz_parse.c, fuzz_pipeline.c) share: one context with the tp dialect
// loaded, reused across inputs and recreated every few thousand of them, and guarded parsing of
// the input bytes exactly as the tools parse a file.
//
// Thread safety: none; libFuzzer calls the harness from one thread.
#ifndef TPC_FUZZ_MLIR_H_
#define TPC_FUZZ_MLIR_H_

#include <stddef.h>
#include <stdint.h>

#include "mlir-c/IR.h"

/// Inputs parsed in one context before it is destroyed and created again. Every attribute and
/// type the parser sees is uniqued in the context for its lifetime, so a context that lived for
/// the whole campaign would grow without bound; creating one costs about 17 ms (every upstream
/// dialect registered, the tp IRDL parsed), a few microseconds per input at this rate.
#define TPC_FUZZ_CONTEXT_INPUTS 5000

/// Returns the shared context (threads off, every upstream dialect registered, tp loaded, the
/// tools' diagnostic handler attached), creating it or replacing a worn-out one first. Aborts when
/// the embedded dialect does not load: no input could be tested. Its diagnostics go to stderr, and
/// one that reports an "internal error" aborts: no input may cause one.
MlirContext tpc_fuzz_context(void);

/// Parses |size| bytes of |data| as tpc-opt parses a file: tpc_parse_module on a NUL-terminated
/// copy, the form the tools pass. Returns a module owned by the caller, or a null module after
/// diagnostics.
MlirModule tpc_fuzz_parse(MlirContext ctx, const uint8_t* data, size_t size);

#endif  // TPC_FUZZ_MLIR_H_
