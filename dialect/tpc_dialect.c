// Loads the tp dialect from its embedded IRDL definition.
#include "tpc_dialect.h"

#include "mlir-c/Dialect/IRDL.h"
#include "mlir-c/RegisterEverything.h"

const char* const tpc_numerics_names[3] = {"fast", "invariant", "exact"};

MlirLogicalResult tpc_dialect_load(MlirContext ctx) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__irdl__(), ctx);
  // The builtin and func dialects are what every tp module is written in; loading them up front
  // lets the parser accept `func.func` without a registry lookup per file.
  mlirContextGetOrLoadDialect(ctx, mlirStringRefCreateFromCString("func"));
  MlirStringRef text = {tpc_tp_irdl_text, tpc_tp_irdl_text_size};
  MlirModule def = mlirModuleCreateParse(ctx, text);
  if (mlirModuleIsNull(def)) return mlirLogicalResultFailure();
  MlirLogicalResult r = mlirLoadIRDLDialects(def);
  mlirModuleDestroy(def);
  return r;
}

MlirContext tpc_mlir_context_create(void) {
#ifdef TPC_TSAN_BUILD
  return mlirContextCreateWithThreading(false);
#else
  return mlirContextCreate();
#endif
}

MlirContext tpc_context_create(void) {
  MlirContext ctx = tpc_mlir_context_create();
  if (mlirLogicalResultIsFailure(tpc_dialect_load(ctx))) {
    mlirContextDestroy(ctx);
    MlirContext none = {NULL};
    return none;
  }
  return ctx;
}
