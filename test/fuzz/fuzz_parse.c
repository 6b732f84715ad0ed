// libFuzzer harness: parse and verify tp IR text, the first thing every tool does with a file.
//
// The input is the text of a module. It goes through tpc_parse_module (the guard against inputs
// known to crash MLIR 22's parser, then MLIR's parser with every upstream dialect and tp loaded)
// and, when it parses, through tpc_verify, every rule of dialect/tpc_verify*.c. Diagnostics go
// through the tools' handler (tools/common/diagnostics.c), which walks their locations. The only
// acceptable outcomes are success or diagnostics: a crash, hang, leak or sanitizer report is a bug.
#include <stddef.h>
#include <stdint.h>

#include "fuzz_check.h"
#include "fuzz_mlir.h"
#include "tpc_verify.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MlirContext ctx = tpc_fuzz_context();
  MlirModule module = tpc_fuzz_parse(ctx, data, size);
  if (mlirModuleIsNull(module)) return 0;
  // Verifying twice must give the same answer: the verifier reads the IR and never changes it.
  MlirOperation root = mlirModuleGetOperation(module);
  MlirLogicalResult first = tpc_verify(root);
  MlirLogicalResult second = tpc_verify(root);
  TPC_FUZZ_CHECK(mlirLogicalResultIsSuccess(first) == mlirLogicalResultIsSuccess(second));
  mlirModuleDestroy(module);
  return 0;
}
