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

/// Brackets ((, [, { and <) nested deeper than this are refused: MLIR 22's parser recurses once
/// per level and overflows the stack a few thousand levels down (nested regions first, at about
/// 2,000 levels of `({`). Real IR nests a few dozen levels.
#define TPC_PARSE_MAX_NESTING 1000

/// The constructs known to crash MLIR 22's parser.
typedef enum tpc_parser_hazard_e {
  TPC_PARSER_HAZARD_NONE = 0,
  /// `array<index ...>`: a dense array of index type dereferences a null float semantics in
  /// mlir::FloatType::getWidth.
  TPC_PARSER_HAZARD_INDEX_ARRAY = 1,
  /// Brackets nested deeper than TPC_PARSE_MAX_NESTING.
  TPC_PARSER_HAZARD_NESTING = 2,
} tpc_parser_hazard_t;

/// Returns the tpc_parser_hazard_t of the first construct in |text| that crashes MLIR 22's parser
/// and its 1-based line and column, or TPC_PARSER_HAZARD_NONE (0) when there is none. Comments and
/// string literals are skipped, as MLIR's lexer skips them.
int tpc_find_parser_hazard(const char* text, size_t length, int* out_line, int* out_col);

#ifdef __cplusplus
}
#endif

#endif  // TPC_PARSE_H_
