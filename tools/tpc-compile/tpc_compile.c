// tpc-compile: textual tp IR -> shared object, ahead of time.
//
// Parses and verifies the module, runs a lowering pipeline (default lower-cpu: tp-lower-runtime,
// convert-to-llvm), translates to LLVM IR, emits a position-independent object for x86-64 with
// LLVM's C API and links it into a shared object with the system C compiler. The .so exports
// tpc_entry_<function> and tpc_module_info (runtime/tprt_abi.h) and resolves the tprt_abi_*
// calls from the process that loads it (tpc-run, or anything linked with libtprt).
#define _POSIX_C_SOURCE 200809L  // mkdtemp, fdopen
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "diagnostics.h"
#include "llvm-c/Analysis.h"
#include "llvm-c/Core.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Target/LLVMIR.h"
#include "pipeline.h"
#include "tpc_dialect.h"
#include "tpc_mesh.h"
#include "tpc_cli.h"
#include "tpc_parse.h"
#include "tpc_verify.h"

typedef struct {
  const char* input;
  const char* output;
  const char* pipeline;
  const char* emit;  // "so" (default), "obj", "llvm", "mlir"
  const char* cpu;
  bool has_mesh;
  tpc_mesh_spec_t mesh;
  const char* numerics;  // --numerics, overriding tp.numerics
  const char* strategy;  // --strategy, overriding tp.strategy
  bool sequence_parallel;  // --sequence-parallel
  bool zero1;              // --zero1
  int64_t gtp_prefetch;    // --gtp-prefetch (-1: not given)
  bool gtp_keep;           // --gtp-keep
  const char* gtp_wgrad;   // --gtp-wgrad (NULL: not given)
  int fused_norm_algorithm;  // --fused-norm-algorithm: a tpc_algorithm_t value (0: auto)
} tpc_compile_options_t;

enum {
  OPT_OUTPUT, OPT_PIPELINE, OPT_MESH, OPT_NUMERICS, OPT_STRATEGY, OPT_SEQUENCE_PARALLEL, OPT_GTP_PREFETCH,
  OPT_GTP_KEEP, OPT_GTP_WGRAD, OPT_FUSED_NORM_ALGORITHM, OPT_EMIT, OPT_CPU, OPT_ZERO1
};

static const tpc_cli_option_t kOptions[] = {
    {"output", 'o', "FILE", "Output path (required)", OPT_OUTPUT},
    {"pipeline", 0, "NAME", "Lowering pipeline (default: lower-cpu; infer = tp-shard + lower-cpu)", OPT_PIPELINE},
    {"mesh", 0, "tp=4[,dp=2]", "Declare the device mesh (tp.mesh @world) before the pipeline runs", OPT_MESH},
    {"numerics", 0, "MODE", "Set tp.numerics: fast, invariant or exact (default: the module's)", OPT_NUMERICS},
    {"strategy", 0, "S", "Set tp.strategy for invariant numerics: canonical (default) or gather", OPT_STRATEGY},
    {"sequence-parallel", 0, NULL, "Set sequence_parallel = true on every column/row-parallel linear",
     OPT_SEQUENCE_PARALLEL},
    {"zero1", 0, NULL, "Set tp.zero = true: shard AdamW's master weights and moments over dp (ZeRO-1)", OPT_ZERO1},
    {"gtp-prefetch", 0, "N", "Set tp.gtp_prefetch: start GTP weight all-gathers N contractions before use",
     OPT_GTP_PREFETCH},
    {"gtp-keep", 0, NULL, "Set tp.gtp_keep: gather each GTP weight once and keep it for the backward", OPT_GTP_KEEP},
    {"gtp-wgrad", 0, "MODE",
     "Set tp.gtp_wgrad: how a GTP linear's weight gradient reaches its shard: scatter, gather or\n"
     "auto (default: tp-gtp's cost model)",
     OPT_GTP_WGRAD},
    {"fused-norm-algorithm", 0, "A",
     "Set algorithm on every fused norm left at \"auto\": auto (default), one-shot, two-shot or\n"
     "composition (tp-lower-runtime's option; one-shot and two-shot leave the reduce-scatter\n"
     "form at auto)",
     OPT_FUSED_NORM_ALGORITHM},
    {"emit", 0, "KIND", "so (default), obj, llvm (LLVM IR text), mlir (lowered MLIR)", OPT_EMIT},
    {"cpu", 0, "NAME", "Target CPU (default: x86-64, portable to any x86-64 host)", OPT_CPU},
    {NULL, 0, NULL, NULL, 0}};

static const tpc_cli_t kCli = {"tpc-compile", "compile a tp module ahead of time into a shared object",
                               "<input.mlir> -o <output> [options]", kOptions, false, NULL, NULL};

static int tpc__parse_args(int argc, char** argv, tpc_compile_options_t* o) {
  o->pipeline = "lower-cpu";
  o->emit = "so";
  o->cpu = "x86-64";
  o->gtp_prefetch = -1;
  tpc_cli_state_t st = {0};
  char error[256];
  for (int id; (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END;) {
    const char* v = st.value;
    switch (id) {
      case TPC_CLI_EXIT: return 0;
      case TPC_CLI_ERROR: return -1;
      case TPC_CLI_POSITIONAL:
        if (o->input) {
          tpc_cli_error(&kCli, "more than one input ('%s' and '%s')", o->input, v);
          return -1;
        }
        o->input = v;
        break;
      case OPT_OUTPUT: o->output = v; break;
      case OPT_PIPELINE: o->pipeline = v; break;
      case OPT_MESH:
        if (!tpc_mesh_spec_parse(v, &o->mesh, error, sizeof error)) {
          tpc_cli_error(&kCli, "%s", error);
          return -1;
        }
        o->has_mesh = true;
        break;
      case OPT_NUMERICS:
      case OPT_STRATEGY:
        if (!tpc_numerics_option_check(st.option->name, v, error, sizeof error)) {
          tpc_cli_error(&kCli, "%s", error);
          return -1;
        }
        *(id == OPT_NUMERICS ? &o->numerics : &o->strategy) = v;
        break;
      case OPT_SEQUENCE_PARALLEL: o->sequence_parallel = true; break;
      case OPT_ZERO1: o->zero1 = true; break;
      case OPT_GTP_PREFETCH:
        if (!tpc_gtp_prefetch_option_check(v, &o->gtp_prefetch, error, sizeof error)) {
          tpc_cli_error(&kCli, "%s", error);
          return -1;
        }
        break;
      case OPT_GTP_KEEP: o->gtp_keep = true; break;
      case OPT_GTP_WGRAD:
        if (!tpc_gtp_wgrad_option_check(v, error, sizeof error)) {
          tpc_cli_error(&kCli, "%s", error);
          return -1;
        }
        o->gtp_wgrad = v;
        break;
      case OPT_FUSED_NORM_ALGORITHM:
        if ((o->fused_norm_algorithm = tpc_fused_norm_algorithm_option_parse(v, error, sizeof error)) < 0) {
          tpc_cli_error(&kCli, "%s", error);
          return -1;
        }
        break;
      case OPT_EMIT: o->emit = v; break;
      case OPT_CPU: o->cpu = v; break;
      default: tpc_cli_error(&kCli, "internal error: option %d has no handler", id); return -1;
    }
  }
  if (!o->input || !o->output) {
    tpc_cli_error(&kCli, "need an input file and -o <output> (see --help)");
    return -1;
  }
  if (strcmp(o->emit, "so") && strcmp(o->emit, "obj") && strcmp(o->emit, "llvm") && strcmp(o->emit, "mlir")) {
    tpc_cli_error(&kCli, "--emit must be so, obj, llvm or mlir; got '%s'", o->emit);
    return -1;
  }
  if (!tpc_pipeline_lookup(o->pipeline)) {
    tpc_cli_error(&kCli, "unknown pipeline '%s' (see tpc-opt --help)", o->pipeline);
    return -1;
  }
  return 1;
}

static char* tpc__read_file(const char* path, size_t* out_len) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tpc-compile: error: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  char* buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char* b = realloc(buf, cap);
      if (!b) break;
      buf = b;
    }
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0) break;
  }
  bool err = ferror(f) || !buf;
  fclose(f);
  if (err) {
    fprintf(stderr, "tpc-compile: error: cannot read '%s'\n", path);
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  *out_len = len;
  return buf;
}

static void tpc__write_cb(MlirStringRef s, void* user) { fwrite(s.data, 1, s.length, (FILE*)user); }

// Runs `$CC -shared -o out obj` (CC defaults to cc); returns true on success.
static bool tpc__link(const char* object, const char* output) {
  const char* cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "tpc-compile: error: cannot start the linker: %s\n", strerror(errno));
    return false;
  }
  if (pid == 0) {
    execlp(cc, cc, "-shared", "-o", output, object, (char*)NULL);
    fprintf(stderr, "tpc-compile: error: cannot run '%s': %s\n", cc, strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "tpc-compile: error: linking '%s' with '%s -shared' failed\n", output, cc);
    return false;
  }
  return true;
}

// Translates the lowered module to LLVM IR and writes the requested artifact.
static bool tpc__emit_native(MlirOperation module, const tpc_compile_options_t* o) {
  bool ok = false;
  LLVMContextRef llctx = LLVMContextCreate();
  LLVMModuleRef mod = mlirTranslateModuleToLLVMIR(module, llctx);
  LLVMTargetMachineRef tm = NULL;
  char* triple = LLVMGetDefaultTargetTriple();
  char* error = NULL;
  char tmpdir[] = "/tmp/tpc-compile-XXXXXX";
  char object[sizeof tmpdir + 16] = "";
  if (!mod) {
    fprintf(stderr, "%s: error: cannot translate the lowered module to LLVM IR\n", o->input);
    goto done;
  }
  if (!strcmp(o->emit, "llvm")) {
    if (LLVMPrintModuleToFile(mod, o->output, &error)) {
      fprintf(stderr, "tpc-compile: error: cannot write '%s': %s\n", o->output, error);
      goto done;
    }
    ok = true;
    goto done;
  }
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  LLVMTargetRef target;
  if (LLVMGetTargetFromTriple(triple, &target, &error)) {
    fprintf(stderr, "tpc-compile: error: no LLVM target for '%s': %s\n", triple, error);
    goto done;
  }
  // No optimization: the step function is a sequence of calls into libtprt (the arithmetic is in
  // the kernels), and the optimizing register allocator is superlinear in its length (a 500-layer
  // training step spent ~80% of its compile there).
  tm = LLVMCreateTargetMachine(target, triple, o->cpu, "", LLVMCodeGenLevelNone, LLVMRelocPIC, LLVMCodeModelDefault);
  if (!tm) {
    fprintf(stderr, "tpc-compile: error: cannot create a target machine for %s (cpu %s)\n", triple, o->cpu);
    goto done;
  }
  LLVMSetTarget(mod, triple);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
  char* layout_str = LLVMCopyStringRepOfTargetData(layout);
  LLVMSetDataLayout(mod, layout_str);
  LLVMDisposeMessage(layout_str);
  LLVMDisposeTargetData(layout);
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &error)) {
    fprintf(stderr, "tpc-compile: internal error: invalid LLVM IR: %s\n", error);
    goto done;
  }
  const char* obj_path = o->output;
  if (!strcmp(o->emit, "so")) {
    if (!mkdtemp(tmpdir)) {
      fprintf(stderr, "tpc-compile: error: cannot create a temporary directory: %s\n", strerror(errno));
      goto done;
    }
    snprintf(object, sizeof object, "%s/module.o", tmpdir);
    obj_path = object;
  }
  if (LLVMTargetMachineEmitToFile(tm, mod, (char*)obj_path, LLVMObjectFile, &error)) {
    fprintf(stderr, "tpc-compile: error: cannot emit '%s': %s\n", obj_path, error);
    goto done;
  }
  ok = strcmp(o->emit, "so") != 0 || tpc__link(object, o->output);

done:
  if (object[0]) {
    unlink(object);
    rmdir(tmpdir);
  }
  if (error) LLVMDisposeMessage(error);
  if (tm) LLVMDisposeTargetMachine(tm);
  if (mod) LLVMDisposeModule(mod);
  LLVMDisposeMessage(triple);
  LLVMContextDispose(llctx);
  return ok;
}

int main(int argc, char** argv) {
  tpc_compile_options_t opts;
  memset(&opts, 0, sizeof opts);
  int parsed = tpc__parse_args(argc, argv, &opts);
  if (parsed <= 0) return parsed == 0 ? 0 : 2;
  size_t len = 0;
  char* text = tpc__read_file(opts.input, &len);
  if (!text) return 1;

  tpc_pipeline_init();
  MlirContext ctx = tpc_mlir_context_create();
  tpc_diag_counts_t diags = {0, 0, opts.input, NULL, NULL};
  tpc_diagnostics_attach(ctx, &diags);
  int rc = 1;
  MlirModule module = {NULL};
  if (mlirLogicalResultIsFailure(tpc_dialect_load(ctx))) {
    fprintf(stderr, "tpc-compile: internal error: the embedded tp dialect definition does not load\n");
    goto done;
  }
  mlirRegisterAllLLVMTranslations(ctx);
  module = tpc_parse_module(ctx, text, len, opts.input);
  if (mlirModuleIsNull(module)) goto done;
  MlirOperation op = mlirModuleGetOperation(module);
  if (opts.has_mesh && mlirLogicalResultIsFailure(tpc_mesh_declare(op, &opts.mesh))) goto done;
  tpc_module_set_numerics(op, opts.numerics, opts.strategy);
  if (opts.sequence_parallel) tpc_module_set_sequence_parallel(op);
  if (opts.zero1)
    mlirOperationSetAttributeByName(op, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_ZERO),
                                    mlirBoolAttrGet(mlirOperationGetContext(op), 1));
  tpc_module_set_gtp(op, opts.gtp_prefetch, opts.gtp_keep);
  tpc_module_set_gtp_wgrad(op, opts.gtp_wgrad);
  tpc_module_set_fused_norm_algorithm(op, opts.fused_norm_algorithm);
  if (mlirLogicalResultIsFailure(tpc_verify(op))) goto done;
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  char error[512];
  bool ok = tpc_pipeline_add(pm, tpc_pipeline_lookup(opts.pipeline)->passes, false, error, sizeof error);
  if (!ok) fprintf(stderr, "tpc-compile: error: %s\n", error);
  ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, op));
  mlirPassManagerDestroy(pm);
  if (!ok) goto done;
  if (!strcmp(opts.emit, "mlir")) {
    FILE* f = fopen(opts.output, "w");
    if (!f) {
      fprintf(stderr, "tpc-compile: error: cannot write '%s': %s\n", opts.output, strerror(errno));
      goto done;
    }
    mlirOperationPrint(op, tpc__write_cb, f);
    fputc('\n', f);
    rc = fclose(f) == 0 ? 0 : 1;
    goto done;
  }
  rc = tpc__emit_native(op, &opts) ? 0 : 1;

done:
  if (!mlirModuleIsNull(module)) mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  free(text);
  return rc;
}
