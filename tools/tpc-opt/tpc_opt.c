// tpc-opt: the opt-style driver over textual tp IR.
//
// Reads a file or stdin, loads the tp dialect, parses, verifies (IRDL and the C verifier), runs
// the passes named by flags in order, and prints the result. Every problem is reported as
// `file:line:col: error: ...` with a non-zero exit status.
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
#include "tpc_parse.h"
#include "tpc_verify.h"

#define TPC_MAX_PASSES 64
#define TPC_MAX_CHUNKS 4096

#ifndef TPC_VERSION
#define TPC_VERSION "0.1.0"
#endif

typedef struct {
  const char* input;  // "-" for stdin
  const char* output;  // NULL for stdout
  bool split_input;
  bool verify_each;
  bool print_debuginfo;
  bool generic;
  bool has_mesh;
  tpc_mesh_spec_t mesh;
  const char* numerics;  // --numerics, overriding tp.numerics
  const char* strategy;  // --strategy, overriding tp.strategy
  bool sequence_parallel;  // --sequence-parallel
  char pipeline[2048];  // comma-separated pass arguments and "mlir:" elements, in order
  int num_passes;
} tpc_opt_options_t;

static void tpc__usage(FILE* out) {
  fprintf(out,
          "OVERVIEW: tpc-opt — parse, verify and transform tp dialect IR\n\n"
          "USAGE: tpc-opt [options] [<input file> | -]\n\n"
          "OPTIONS:\n"
          "  -o <file>                  Write the output to <file> (default: stdout)\n"
          "  --split-input-file         Process each `// -----` separated chunk on its own\n"
          "  --tp-pipeline=<name>       Run a named pipeline (see below)\n"
          "  --mesh tp=4[,dp=2]         Declare the device mesh as tp.mesh @world (replacing one of that name)\n"
          "  --numerics <mode>          Set tp.numerics: fast, invariant or exact (default: the module's)\n"
          "  --strategy <s>             Set tp.strategy for invariant numerics: canonical (default) or gather\n"
          "  --sequence-parallel        Set sequence_parallel = true on every column/row-parallel linear\n"
          "  --verify-each              Run tp-verify after every pass (default in Debug builds)\n"
          "  --no-verify-each           Do not run tp-verify between passes\n"
          "  --mlir-print-debuginfo     Print locations\n"
          "  --mlir-print-op-generic    Print every op in generic form\n"
          "  --version                  Print the version\n"
          "  -h, --help                 Print this help\n\n"
          "PASSES (run in the order given):\n");
  for (const tpc_pass_entry_t* p = tpc_pass_registry; p->argument; ++p)
    fprintf(out, "  --%-24s %s\n", p->argument, p->description);
  fprintf(out, "\nPIPELINES (--tp-pipeline=<name>):\n");
  for (const tpc_pipeline_entry_t* p = tpc_pipeline_registry; p->name; ++p)
    fprintf(out, "  %-26s %s [%s]\n", p->name, p->description, p->passes);
}

static int tpc__append(tpc_opt_options_t* o, const char* csv) {
  size_t len = strlen(o->pipeline);
  if (len + strlen(csv) + 2 > sizeof o->pipeline || o->num_passes == TPC_MAX_PASSES) {
    fprintf(stderr, "tpc-opt: error: too many passes requested\n");
    return 0;
  }
  snprintf(o->pipeline + len, sizeof o->pipeline - len, "%s%s", len ? "," : "", csv);
  ++o->num_passes;
  return 1;
}

static int tpc__add_pipeline(tpc_opt_options_t* o, const char* name) {
  const tpc_pipeline_entry_t* pl = tpc_pipeline_lookup(name);
  if (!pl) {
    fprintf(stderr, "tpc-opt: error: unknown pipeline '%s' (see --help for the list)\n", name);
    return 0;
  }
  return tpc__append(o, pl->passes);
}

// Returns 1 to continue, 0 to exit with success (help/version), -1 on a usage error.
static int tpc__parse_args(int argc, char** argv, tpc_opt_options_t* o) {
#ifdef TPC_DEBUG_BUILD
  o->verify_each = true;
#endif
  o->input = NULL;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "-help") == 0) {
      tpc__usage(stdout);
      return 0;
    }
    if (strcmp(a, "--version") == 0) {
      printf("tpc-opt %s (MLIR 22)\n", TPC_VERSION);
      return 0;
    }
    if (strcmp(a, "-o") == 0) {
      if (++i >= argc) {
        fprintf(stderr, "tpc-opt: error: -o needs a file name\n");
        return -1;
      }
      o->output = argv[i];
      continue;
    }
    if (strncmp(a, "-o", 2) == 0 && a[2] && a[1] != '-') {
      o->output = a + 2;
      continue;
    }
    // Accept MLIR's single-dash spellings of the long options too (lit tests often use them).
    const char* name = a[0] == '-' && a[1] == '-' ? a + 2 : a[0] == '-' && a[1] ? a + 1 : NULL;
    if (!name) {
      if (o->input) {
        fprintf(stderr, "tpc-opt: error: more than one input file ('%s' and '%s')\n", o->input, a);
        return -1;
      }
      o->input = a;
      continue;
    }
    if (strcmp(name, "split-input-file") == 0) {
      o->split_input = true;
    } else if (strcmp(name, "sequence-parallel") == 0) {
      o->sequence_parallel = true;
    } else if (strcmp(name, "verify-each") == 0) {
      o->verify_each = true;
    } else if (strcmp(name, "no-verify-each") == 0) {
      o->verify_each = false;
    } else if (strcmp(name, "mlir-print-debuginfo") == 0) {
      o->print_debuginfo = true;
    } else if (strcmp(name, "mlir-print-op-generic") == 0) {
      o->generic = true;
    } else if (strncmp(name, "mesh", 4) == 0 && (name[4] == '=' || name[4] == '\0')) {
      const char* value = name[4] == '=' ? name + 5 : i + 1 < argc ? argv[++i] : NULL;
      char error[256];
      if (!value || !tpc_mesh_spec_parse(value, &o->mesh, error, sizeof error)) {
        fprintf(stderr, "tpc-opt: error: %s\n", value ? error : "--mesh needs a value like tp=4");
        return -1;
      }
      o->has_mesh = true;
    } else if ((strncmp(name, "numerics", 8) == 0 || strncmp(name, "strategy", 8) == 0) &&
               (name[8] == '=' || name[8] == '\0')) {
      const char* value = name[8] == '=' ? name + 9 : i + 1 < argc ? argv[++i] : NULL;
      char error[256], flag[16];
      snprintf(flag, sizeof flag, "%.8s", name);
      if (!tpc_numerics_option_check(flag, value, error, sizeof error)) {
        fprintf(stderr, "tpc-opt: error: %s\n", error);
        return -1;
      }
      *(name[0] == 'n' ? &o->numerics : &o->strategy) = value;
    } else if (strncmp(name, "tp-pipeline", 11) == 0) {
      const char* value = name[11] == '=' ? name + 12 : name[11] == '\0' && i + 1 < argc ? argv[++i] : NULL;
      if (!value || (name[11] != '=' && name[11] != '\0')) {
        fprintf(stderr, "tpc-opt: error: --tp-pipeline needs a name, e.g. --tp-pipeline=verify\n");
        return -1;
      }
      if (!tpc__add_pipeline(o, value)) return -1;
    } else if (tpc_pass_lookup(name)) {
      if (!tpc__append(o, name)) return -1;
    } else if (strcmp(a, "-") == 0) {
      o->input = a;
    } else {
      fprintf(stderr, "tpc-opt: error: unknown option '%s' (see --help)\n", a);
      return -1;
    }
  }
  if (!o->input) o->input = "-";
  return 1;
}

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
  ok = ok && mlirLogicalResultIsSuccess(tpc_verify(root));
  if (ok && o->num_passes > 0) {
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    char error[512];
    ok = tpc_pipeline_add(pm, o->pipeline, o->verify_each, error, sizeof error);
    if (!ok) fprintf(stderr, "tpc-opt: error: %s\n", error);
    ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, root));
    mlirPassManagerDestroy(pm);
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

int main(int argc, char** argv) {
  tpc_opt_options_t opts;
  memset(&opts, 0, sizeof opts);
  int parsed = tpc__parse_args(argc, argv, &opts);
  if (parsed <= 0) return parsed == 0 ? 0 : 2;

  size_t length = 0;
  char* buffer = tpc__read_all(opts.input, &length);
  if (!buffer) return 1;
  const char* source_name = strcmp(opts.input, "-") == 0 ? "<stdin>" : opts.input;

  static tpc_chunk_t chunks[TPC_MAX_CHUNKS];
  int num_chunks = 1;
  chunks[0] = (tpc_chunk_t){buffer, length, 1};
  if (opts.split_input) num_chunks = tpc_split_input(buffer, length, chunks, TPC_MAX_CHUNKS);
  if (num_chunks < 0) {
    fprintf(stderr, "tpc-opt: error: '%s' has more than %d `// -----` chunks\n", source_name, TPC_MAX_CHUNKS);
    free(buffer);
    return 1;
  }

  tpc_pipeline_init();
  MlirContext ctx = mlirContextCreate();
  tpc_diag_counts_t diags = {0, 0, source_name};
  tpc_diagnostics_attach(ctx, &diags);
  if (mlirLogicalResultIsFailure(tpc_dialect_load(ctx))) {
    fprintf(stderr, "tpc-opt: internal error: the embedded tp dialect definition does not load\n");
    mlirContextDestroy(ctx);
    free(buffer);
    return 1;
  }

  tpc__out_t out = {NULL, 0, 0, false};
  int failures = 0, successes = 0;
  for (int i = 0; i < num_chunks; ++i) {
    if (i > 0) tpc__out_cstr(&out, "// -----\n");
    if (tpc__process_chunk(ctx, &opts, source_name, &chunks[i], &out, &diags))
      ++successes;
    else
      ++failures;
  }
  mlirContextDestroy(ctx);
  free(buffer);

  int rc = failures ? 1 : 0;
  if (out.oom) {
    fprintf(stderr, "tpc-opt: error: out of memory while printing\n");
    rc = 1;
  } else if (successes > 0 || !opts.output) {
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
  return rc;
}
