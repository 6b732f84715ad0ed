// tpc's passes as a plugin of upstream MLIR tools (docs/passes.md, "In mlir-opt"):
//
//   mlir-opt --irdl-file=dialect/tp.irdl.mlir --load-pass-plugin=build/lib/libtpc_mlir_plugin.so
//            --pass-pipeline='builtin.module(tp-verify,tp-shard)' model.mlir
//
// The tp dialect itself is IRDL (dialect/tp.irdl.mlir), which mlir-opt loads with --irdl-file;
// the plugin registers every pass of tpc-opt's table (lowering/pipeline.c) under its name. The passes are written in C against
// MLIR's C API (lowering/); this file is the one piece of C++ the plugin interface requires:
// mlirGetPassPluginInfo and a pass registration per constructor.
#include <memory>

#include "mlir/CAPI/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "pipeline.h"

namespace {

// Every pass of tpc-opt's table (lowering/pipeline.c), under the same name.
void registerTpcPasses() {
  for (const tpc_pass_entry_t* e = tpc_pass_registry; e->argument; ++e) {
    MlirPass (*create)() = e->create;
    mlir::registerPass([create]() -> std::unique_ptr<mlir::Pass> { return std::unique_ptr<mlir::Pass>(unwrap(create())); });
  }
}

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "tpc", "0.1.0", registerTpcPasses};
}
