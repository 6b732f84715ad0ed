// Printing MLIR diagnostics as `file:line:col: error: message` on stderr.
#ifndef TPC_DIAGNOSTICS_H_
#define TPC_DIAGNOSTICS_H_

#include "mlir-c/Diagnostics.h"

/// Counts what the handler printed.
typedef struct tpc_diag_counts_t {
  int errors;
  int warnings;
  /// Printed for locations whose file name is empty or "-" (buffers parsed without a name).
  const char* default_file;
  /// When set, every diagnostic (notes included) goes to this function instead of stderr, with its
  /// severity word ("error", "warning", "note", "remark"), file, line and column (0 when it has no
  /// position) and message (tpc-opt --verify-diagnostics).
  void (*capture)(void* user, const char* severity, const char* file, int line, int col, const char* message);
  void* capture_user;
} tpc_diag_counts_t;

/// Attaches a handler to |ctx| that prints every diagnostic (and its notes) to stderr and counts
/// errors in |counts|, which must outlive the context.
MlirDiagnosticHandlerID tpc_diagnostics_attach(MlirContext ctx, tpc_diag_counts_t* counts);

#endif  // TPC_DIAGNOSTICS_H_
