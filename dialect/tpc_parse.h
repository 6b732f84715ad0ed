// Parsing textual IR the way every tpc tool does: guards against inputs known to crash MLIR 22's
// parser, then parses into a module (several top-level ops become an implicit module).
#ifndef TPC_PARSE_H_
#define TPC_PARSE_H_

#include <stddef.h>

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Parses |text| (|length| bytes) into a module owned by the caller, or returns a null module
/// after emitting diagnostics. Locations carry the file name "-" (MLIR's default for buffers);
/// diagnostic handlers substitute the real name, which is also used for the guard's own errors.
MlirModule tpc_parse_module(MlirContext ctx, const char* text, size_t length, const char* source_name);

/// Returns 1 and the 1-based line and column of the first construct in |text| that crashes
/// MLIR 22's parser, or 0 when there is none. Known: `array<index ...>` (a dense array of index
/// type dereferences a null float semantics in mlir::FloatType::getWidth).
int tpc_find_parser_hazard(const char* text, size_t length, int* out_line, int* out_col);

#ifdef __cplusplus
}
#endif

#endif  // TPC_PARSE_H_
