// tpc-run's compilation of a .mlir module: tpc-compile, run as a child process, writes a
// module.so into a temporary directory.
#ifndef TPC_RUN_COMPILE_H_
#define TPC_RUN_COMPILE_H_

#include <stddef.h>

#include "tpc_run_args.h"

/// Compiles |mlir| with the options of |o| into |out_so| (of |size| bytes), in the directory
/// made from the mkdtemp template |tmpdir|. Returns 1 on success, 0 after printing the error.
int tpc__compile(const tpc_run_options_t* o, const char* mlir, char* out_so, size_t size, char* tmpdir);

#endif  // TPC_RUN_COMPILE_H_
