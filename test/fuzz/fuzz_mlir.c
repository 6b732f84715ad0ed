// The shared MLIR context of the harnesses and guarded parsing (see fuzz_mlir.h).
#include "fuzz_mlir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnostics.h"
#include "fuzz_check.h"
#include "tpc_dialect.h"
#include "tpc_parse.h"

// Whether |message| is a pass's report of its own bug: "<pass>: internal error: ...". Only the
// prefix counts; the input's own text (a quoted attribute, a name) may say anything.
static bool tpc__is_internal_error(const char* message) {
  const char* colon = strstr(message, ": ");
  if (!colon || strcspn(message, " \"'") < (size_t)(colon - message)) return false;
  return strncmp(colon + 2, "internal error", 14) == 0;
}

// Prints every diagnostic as the tools do. One that is an internal error (a pass whose generated
// IR does not parse, a table that overflowed) is a bug whatever the input: it aborts here, inside
// the pass that emitted it, so that the crash report shows where.
static void tpc__fuzz_capture(void* user, const char* severity, const char* file, int line, int col,
                              const char* message) {
  if (line > 0)
    fprintf(stderr, "%s:%d:%d: %s: %s\n", file, line, col, severity, message);
  else
    fprintf(stderr, "%s: %s\n", severity, message);
  TPC_FUZZ_CHECK(!tpc__is_internal_error(message));
}

// Diagnostics name the input "fuzz-input"; the counts outlive every context that points at them.
static tpc_diag_counts_t tpc__fuzz_diags = {.default_file = "fuzz-input", .capture = tpc__fuzz_capture};
static MlirContext tpc__fuzz_ctx = {NULL};
static int tpc__fuzz_uses = 0;

MlirContext tpc_fuzz_context(void) {
  if (tpc__fuzz_ctx.ptr && tpc__fuzz_uses >= TPC_FUZZ_CONTEXT_INPUTS) {
    mlirContextDestroy(tpc__fuzz_ctx);
    tpc__fuzz_ctx.ptr = NULL;
  }
  if (!tpc__fuzz_ctx.ptr) {
    // One thread: libFuzzer runs one input at a time, and MLIR's thread pool would only add
    // scheduling noise to the execution speed and to what a crash depends on.
    tpc__fuzz_ctx = mlirContextCreateWithThreading(false);
    tpc_diagnostics_attach(tpc__fuzz_ctx, &tpc__fuzz_diags);
    if (mlirLogicalResultIsFailure(tpc_dialect_load(tpc__fuzz_ctx))) {
      fprintf(stderr, "fuzz: internal error: the embedded tp dialect definition does not load\n");
      abort();
    }
    tpc__fuzz_uses = 0;
  }
  ++tpc__fuzz_uses;
  return tpc__fuzz_ctx;
}

MlirModule tpc_fuzz_parse(MlirContext ctx, const uint8_t* data, size_t size) {
  char* text = malloc(size + 1);
  if (!text) {
    MlirModule none = {NULL};
    return none;
  }
  if (size) memcpy(text, data, size);
  text[size] = '\0';
  MlirModule module = tpc_parse_module(ctx, text, size, "fuzz-input");
  free(text);
  return module;
}
