// tpc-opt: the opt-style driver over textual tp IR.
//
// Reads a file or stdin, loads the tp dialect, parses, verifies (IRDL and the C verifier), runs
// the passes named by flags or a textual pipeline in order, and prints the result. Every problem
// is reported as `file:line:col: error: ...` with a non-zero exit status; with
// --verify-diagnostics the problems are checked against the input's expected-* comments instead.
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "pipeline.h"
#include "split_input.h"
#include "tpc_dialect.h"
#include "tpc_mesh.h"
#include "tpc_opt_args.h"
#include "tpc_parse.h"
#include "tpc_verify.h"
#include "verify_diagnostics.h"

// Reads all of |path| ("-" for stdin) into a NUL-terminated heap buffer.
static char* tpc__read_all(const char* path, size_t* out_length) {
  FILE* f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tpc-opt: error: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char* buf = malloc(cap);
  while (buf) {
    if (len + 1 >= cap) {
      char* bigger = realloc(buf, cap *= 2);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
    }
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0) break;
  }
  bool failed = ferror(f);
  if (f != stdin) fclose(f);
  if (!buf || failed) {
    fprintf(stderr, "tpc-opt: error: cannot read '%s'%s\n", path, buf ? "" : ": out of memory");
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  *out_length = len;
  return buf;
}

// Output accumulated in memory, so that -o never leaves a half-written file behind.
typedef struct {
  char* data;
  size_t len, cap;
  bool oom;
} tpc__out_t;

static void tpc__out_append(MlirStringRef s, void* user) {
  tpc__out_t* o = user;
  if (o->oom) return;
  if (o->len + s.length + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + s.length + 1) cap *= 2;
    char* d = realloc(o->data, cap);
    if (!d) {
      o->oom = true;
      return;
    }
    o->data = d;
    o->cap = cap;
  }
  memcpy(o->data + o->len, s.data, s.length);
  o->len += s.length;
}

static void tpc__out_cstr(tpc__out_t* o, const char* s) { tpc__out_append(mlirStringRefCreateFromCString(s), o); }

// Parses, verifies, transforms and prints one chunk. Returns true on success.
static bool tpc__process_chunk(MlirContext ctx, const tpc_opt_options_t* o, const char* source_name,
                               const tpc_chunk_t* chunk, tpc__out_t* out, tpc_diag_counts_t* diags) {
  // Leading newlines make the parser's line numbers those of the whole file.
  size_t pad = (size_t)(chunk->first_line - 1);
  char* text = malloc(pad + chunk->length + 1);
  if (!text) {
    fprintf(stderr, "tpc-opt: error: out of memory\n");
    return false;
  }
  memset(text, '\n', pad);
  memcpy(text + pad, chunk->text, chunk->length);
  text[pad + chunk->length] = '\0';
  int errors_before = diags->errors;
  // Parsing wraps several top-level ops (a tp.mesh and a func.func, say) into an
  // implicit module as mlir-opt does; its locations carry an empty file name, which the
  // diagnostic handler replaces by |source_name|.
  MlirModule module = tpc_parse_module(ctx, text, pad + chunk->length, source_name);
  free(text);
  if (mlirModuleIsNull(module)) {
    if (diags->errors == errors_before) fprintf(stderr, "%s: error: cannot parse the input\n", source_name);
    return false;
  }
  MlirOperation root = mlirModuleGetOperation(module);
  bool ok = !o->has_mesh || mlirLogicalResultIsSuccess(tpc_mesh_declare(root, &o->mesh));
  tpc_module_set_numerics(root, o->numerics, o->strategy);
  if (o->sequence_parallel) tpc_module_set_sequence_parallel(root);
  tpc_module_set_gtp(root, o->has_gtp_prefetch ? o->gtp_prefetch : -1, o->gtp_keep);
  tpc_module_set_gtp_wgrad(root, o->gtp_wgrad);
  tpc_module_set_fused_norm_algorithm(root, o->fused_norm_algorithm);
  ok = ok && mlirLogicalResultIsSuccess(tpc_verify(root));
  if (ok && o->num_elements > 0) {
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    char error[512];
    for (int i = 0; ok && i < o->num_elements; ++i)  // checked by tpc__check_pipeline already
      ok = tpc_pipeline_add_element(pm, o->elements[i], o->verify_each, error, sizeof error);
    if (o->print_before_all || o->print_after_all || o->print_after_failure) {
      // mlir-opt's --mlir-print-ir-after-failure is "after every pass, but only on failure".
      MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
      if (o->print_debuginfo) mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
      mlirPassManagerEnableIRPrinting(pm, o->print_before_all, o->print_after_all || o->print_after_failure,
                                      o->print_module_scope, o->print_after_change, o->print_after_failure, flags,
                                      mlirStringRefCreate(NULL, 0));
      mlirOpPrintingFlagsDestroy(flags);
    }
    if (o->timing) mlirPassManagerEnableTiming(pm);
    ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, root));
    mlirPassManagerDestroy(pm);  // prints the --mlir-timing report
  }
  if (ok) {
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    if (o->print_debuginfo) mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
    if (o->generic) mlirOpPrintingFlagsPrintGenericOpForm(flags);
    mlirOperationPrintWithFlags(root, flags, tpc__out_append, out);
    tpc__out_cstr(out, "\n");
    mlirOpPrintingFlagsDestroy(flags);
  }
  mlirModuleDestroy(module);
  return ok;
}

// Checks once, before any input is processed, that every pipeline element names a pass: a bad
// --pass-pipeline is one usage error, not one per chunk. Prints the first line of the problem.
static bool tpc__check_pipeline(MlirContext ctx, const tpc_opt_options_t* o) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  char error[512];
  bool ok = true;
  for (int i = 0; ok && i < o->num_elements; ++i) {
    ok = tpc_pipeline_add_element(pm, o->elements[i], false, error, sizeof error);
    if (!ok) {
      // MLIR's pipeline parser adds the element and a caret on further lines.
      error[strcspn(error, "\n")] = '\0';
      const char* parser = "MLIR Textual PassPipeline Parser:1:1: error: ";
      fprintf(stderr, "tpc-opt: error: %s\n", strncmp(error, parser, strlen(parser)) ? error : error + strlen(parser));
    }
  }
  mlirPassManagerDestroy(pm);
  return ok;
}

// Processes one chunk under --verify-diagnostics: its diagnostics are recorded instead of printed
// and must be the ones its comments expect. Returns true when they are.
static bool tpc__verify_chunk(MlirContext ctx, const tpc_opt_options_t* o, const char* source_name,
                              const tpc_chunk_t* chunk, tpc__out_t* out, tpc_diag_counts_t* diags) {
  tpc_diag_verifier_t* v = tpc_diag_verifier_create(source_name, chunk->text, chunk->length, chunk->first_line);
  if (!v) {
    fprintf(stderr, "tpc-opt: error: out of memory\n");
    return false;
  }
  diags->capture = tpc_diag_verifier_capture;
  diags->capture_user = v;
  tpc__process_chunk(ctx, o, source_name, chunk, out, diags);
  diags->capture = NULL;
  diags->capture_user = NULL;
  int problems = tpc_diag_verifier_finish(v);
  tpc_diag_verifier_destroy(v);
  return problems == 0;
}

int main(int argc, char** argv) {
  tpc_opt_options_t opts;
  memset(&opts, 0, sizeof opts);
  int parsed = tpc_opt_parse_args(argc, argv, &opts);
  if (parsed <= 0) {
    tpc_opt_options_free(&opts);
    return parsed == 0 ? 0 : 2;
  }

  size_t length = 0;
  char* buffer = tpc__read_all(opts.input, &length);
  if (!buffer) {
    tpc_opt_options_free(&opts);
    return 1;
  }
  const char* source_name = strcmp(opts.input, "-") == 0 ? "<stdin>" : opts.input;

  // As many chunks as the input has separators (counted first).
  int num_chunks = opts.split_input ? tpc_split_input(buffer, length, NULL, 0) : 1;
  tpc_chunk_t* chunks = calloc((size_t)num_chunks, sizeof *chunks);
  if (!chunks) {
    fprintf(stderr, "tpc-opt: error: out of memory for %d chunks\n", num_chunks);
    free(buffer);
    tpc_opt_options_free(&opts);
    return 1;
  }
  chunks[0] = (tpc_chunk_t){buffer, length, 1};
  if (opts.split_input) tpc_split_input(buffer, length, chunks, num_chunks);

  tpc_pipeline_init();
  MlirContext ctx = tpc_mlir_context_create();
  // IR printing of the whole module needs the passes to run one at a time.
  if (opts.print_module_scope) mlirContextEnableMultithreading(ctx, false);
  tpc_diag_counts_t diags = {0, 0, source_name, NULL, NULL};
  tpc_diagnostics_attach(ctx, &diags);
  int rc = 0;
  if (mlirLogicalResultIsFailure(tpc_dialect_load(ctx))) {
    fprintf(stderr, "tpc-opt: internal error: the embedded tp dialect definition does not load\n");
    rc = 1;
  } else if (!tpc__check_pipeline(ctx, &opts)) {
    rc = 2;
  }

  tpc__out_t out = {NULL, 0, 0, false};
  int failures = 0, successes = 0;
  for (int i = 0; i < num_chunks && rc == 0; ++i) {
    if (i > 0) tpc__out_cstr(&out, "// -----\n");
    bool ok = opts.verify_diagnostics ? tpc__verify_chunk(ctx, &opts, source_name, &chunks[i], &out, &diags)
                                      : tpc__process_chunk(ctx, &opts, source_name, &chunks[i], &out, &diags);
    if (ok)
      ++successes;
    else
      ++failures;
  }
  mlirContextDestroy(ctx);
  free(chunks);
  free(buffer);

  if (failures) rc = 1;
  if (rc == 2) {
    // a usage error: nothing to print
  } else if (out.oom) {
    fprintf(stderr, "tpc-opt: error: out of memory while printing\n");
    rc = 1;
  } else if (rc == 0 || successes > 0 || !opts.output) {
    FILE* f = opts.output ? fopen(opts.output, "wb") : stdout;
    if (!f) {
      fprintf(stderr, "tpc-opt: error: cannot write '%s': %s\n", opts.output, strerror(errno));
      rc = 1;
    } else {
      if (out.len && fwrite(out.data, 1, out.len, f) != out.len) rc = 1;
      if (f != stdout ? fclose(f) != 0 : fflush(f) != 0) {
        fprintf(stderr, "tpc-opt: error: cannot write '%s'\n", opts.output ? opts.output : "<stdout>");
        rc = 1;
      }
    }
  }
  free(out.data);
  tpc_opt_options_free(&opts);
  return rc;
}
