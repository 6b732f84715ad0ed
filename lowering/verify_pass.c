// tp-verify: runs the dialect's C verifier (dialect/tpc_verify.h) over the module. tpc-opt runs
// it after parsing and, with --verify-each (the default in Debug builds), after every pass.
#include "passes.h"
#include "pass_util.h"
#include "tpc_verify.h"

static MlirLogicalResult tpc__verify_run(MlirOperation op, void* options) {
  (void)options;
  return tpc_verify(op);
}

static tpc_pass_info_t tpc__verify_pass_info = {
    .argument = "tp-verify",
    .description = "Check the tp dialect's shape, type, mesh, quantization and module-attribute rules",
    .run = tpc__verify_run,
};

MlirPass tpc_create_verify_pass(void) { return tpc_pass_create(&tpc__verify_pass_info, NULL); }
