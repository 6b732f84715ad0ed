// The shared MLIR context of the harnesses and guarded parsing (see fuzz_mlir.h).
#include "fuzz_mlir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnostics.h"
#include "tpc_dialect.h"
#include "tpc_parse.h"

// Diagnostics name the input "fuzz-input"; the counts outlive every context that points at them.
static tpc_diag_counts_t tpc__fuzz_diags = {.default_file = "fuzz-input"};
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
