// libFuzzer harness: the pass pipelines on modules that parse and verify.
//
// Input: one control byte, then the text of a module. The control byte picks what tpc-opt's and
// tpc-run's options would:
//   bits 0-1  pipeline: infer, train, invariant, lower-cpu (tp-lower-runtime and LLVM conversion)
//   bits 2-4  mesh declared as tp.mesh @world: the module's own, tp=1, tp=2, tp=4, tp=2,dp=2,
//             ep=2, ep=2,tp=2, tp=8
//   bit  5    tp-verify after every pass (--verify-each)
//   bits 6-7  numerics: the module's, invariant, exact, invariant with strategy gather
// A module that parses, takes the mesh and verifies is run through the pipeline (lowering/
// pipeline.c). Passes may refuse a module with a diagnostic; they must never crash, hang, leak or
// trip a sanitizer. What a pipeline that succeeds produces must verify (tpc_verify), and when it
// lowered the module, the manifest it embedded (the tpc_module_info global) must load in the
// runtime's reader: the compiler and the runtime agree on it.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_mlir.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Pass.h"
#include "pipeline.h"
#include "tpc_mesh.h"
#include "tpc_verify.h"
#include "tprt_abi.h"
#include "tprt_module_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static const char* const tpc__fuzz_pipelines[4] = {"infer", "train", "invariant", "lower-cpu"};
// NULL keeps the module's own meshes.
static const char* const tpc__fuzz_meshes[8] = {NULL, "tp=1", "tp=2", "tp=4", "tp=2,dp=2", "ep=2", "ep=2,tp=2", "tp=8"};
static const char* const tpc__fuzz_numerics[4] = {NULL, "invariant", "exact", "invariant"};

// Every entry point resolves: only the description is under test, not the code it names.
static void* tpc__fuzz_resolve(void* user, const char* symbol) { return user; }

// Returns the number of func.func ops at the top level of |module|.
static int tpc__fuzz_count_functions(MlirModule module) {
  int n = 0;
  MlirStringRef func = mlirStringRefCreateFromCString("func.func");
  for (MlirOperation op = mlirBlockGetFirstOperation(mlirModuleGetBody(module)); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    n += mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), func);
  return n;
}

// Returns the string value of the LLVM global @tpc_module_info in |module|'s body, or a null
// string ref when the pipeline did not produce one.
static MlirStringRef tpc__fuzz_manifest(MlirModule module) {
  MlirStringRef none = {NULL, 0};
  MlirStringRef global = mlirStringRefCreateFromCString("llvm.mlir.global");
  for (MlirOperation op = mlirBlockGetFirstOperation(mlirModuleGetBody(module)); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), global)) continue;
    MlirAttribute name = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("sym_name"));
    MlirAttribute value = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("value"));
    if (mlirAttributeIsNull(name) || !mlirAttributeIsAString(name) || mlirAttributeIsNull(value) ||
        !mlirAttributeIsAString(value))
      continue;
    if (mlirStringRefEqual(mlirStringAttrGetValue(name), mlirStringRefCreateFromCString(TPRT_ABI_MODULE_INFO_SYMBOL)))
      return mlirStringAttrGetValue(value);
  }
  return none;
}

// Reads the manifest |json| (not NUL-terminated; the global's value ends in one) as
// tprt_module_load would. A module the compiler produced from functions must load, or be refused
// only as UNIMPLEMENTED (what this runtime cannot run, such as a mesh of more than 4 axes). (A
// module without functions compiles too, and the runtime refuses it: it has nothing to run.)
static void tpc__fuzz_check_manifest(MlirStringRef json) {
  char* text = malloc(json.length + 1);
  tprt_module_t* m = NULL;
  tprt_allocator_t allocator = tprt_allocator_system();
  tprt_status_t status = tprt_allocator_malloc(allocator, sizeof *m, 16, (void**)&m);
  TPC_FUZZ_CHECK(text && !status);
  memcpy(text, json.data, json.length);
  text[json.length] = '\0';
  snprintf(m->path, sizeof m->path, "fuzz-pipeline");
  static int entry;  // any non-null address
  status = tprt__module_parse_info(m, text, tpc__fuzz_resolve, &entry);
  if (status) {
    char message[1024];
    fprintf(stderr, "fuzz: the compiled manifest does not load: %s\n",
            tprt_status_format(status, message, sizeof message));
  }
  TPC_FUZZ_CHECK(!status || tprt_status_code(status) == TPRT_STATUS_UNIMPLEMENTED);
  TPC_FUZZ_CHECK(status || m->num_functions > 0);
  tprt_status_free(status);
  tprt_module_unload(m, allocator);  // no dlopen handle: it frees the tables and |m|
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t control = data[0];
  const char* pipeline = tpc__fuzz_pipelines[control & 3];
  const char* mesh = tpc__fuzz_meshes[(control >> 2) & 7];
  bool verify_each = (control >> 5) & 1;
  int numerics = (control >> 6) & 3;

  tpc_pipeline_init();
  MlirContext ctx = tpc_fuzz_context();
  MlirModule module = tpc_fuzz_parse(ctx, data + 1, size - 1);
  if (mlirModuleIsNull(module)) return 0;
  MlirOperation root = mlirModuleGetOperation(module);
  bool ok = true;
  if (mesh) {
    tpc_mesh_spec_t spec;
    char error[256];
    TPC_FUZZ_CHECK(tpc_mesh_spec_parse(mesh, &spec, error, sizeof error));
    ok = mlirLogicalResultIsSuccess(tpc_mesh_declare(root, &spec));
  }
  tpc_module_set_numerics(root, tpc__fuzz_numerics[numerics], numerics == 3 ? "gather" : NULL);
  ok = ok && mlirLogicalResultIsSuccess(tpc_verify(root));
  if (ok) {
    int functions = tpc__fuzz_count_functions(module);
    const tpc_pipeline_entry_t* entry = tpc_pipeline_lookup(pipeline);
    TPC_FUZZ_CHECK(entry != NULL);
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    char error[512];
    TPC_FUZZ_CHECK(tpc_pipeline_add(pm, entry->passes, verify_each, error, sizeof error));
    bool lowered = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, root));
    mlirPassManagerDestroy(pm);
    // A pass that succeeds leaves IR that keeps every rule of the dialect (what --verify-each
    // would check after it): the per-rank program of tp-shard and tp-invariant verifies.
    if (lowered) TPC_FUZZ_CHECK(mlirLogicalResultIsSuccess(tpc_verify(root)));
    // Every pipeline but invariant ends in tp-lower-runtime and the LLVM conversion.
    MlirStringRef manifest = tpc__fuzz_manifest(module);
    if (lowered && strcmp(pipeline, "invariant") != 0) TPC_FUZZ_CHECK(manifest.data != NULL);
    if (lowered && manifest.data && functions > 0) tpc__fuzz_check_manifest(manifest);
  }
  mlirModuleDestroy(module);
  return 0;
}
