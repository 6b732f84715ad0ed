// tpc's passes as a plugin of upstream MLIR tools (docs/passes.md, "In mlir-opt"):
//
//   mlir-opt --irdl-file=dialect/tp.irdl.mlir --load-pass-plugin=build/lib/libtpc_mlir_plugin.so
//            --pass-pipeline='builtin.module(tp-verify,tp-shard)' model.mlir
//
// The tp dialect itself is IRDL (dialect/tp.irdl.mlir), which mlir-opt loads with --irdl-file;
// the plugin registers every tpc pass under its tpc-opt name. The passes are written in C against
// MLIR's C API (lowering/); this file is the one piece of C++ the plugin interface requires:
// mlirGetPassPluginInfo and a pass registration per constructor.
#include <memory>

#include "mlir/CAPI/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "passes.h"

namespace {

void registerTpcPass(MlirPass (*create)()) {
  mlir::registerPass([create]() -> std::unique_ptr<mlir::Pass> { return std::unique_ptr<mlir::Pass>(unwrap(create())); });
}

void registerTpcPasses() {
  registerTpcPass(tpc_create_verify_pass);
  registerTpcPass(tpc_create_autodiff_pass);
  registerTpcPass(tpc_create_adamw_pass);
  registerTpcPass(tpc_create_shard_pass);
  registerTpcPass(tpc_create_gtp_pass);
  registerTpcPass(tpc_create_invariant_pass);
  registerTpcPass(tpc_create_micro_batch_pass);
  registerTpcPass(tpc_create_fuse_pass);
  registerTpcPass(tpc_create_lower_runtime_pass);
}

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "tpc", "0.1.0", registerTpcPasses};
}
