// tpc-opt's command line: the options, and the pass pipeline they describe.
#ifndef TPC_OPT_ARGS_H_
#define TPC_OPT_ARGS_H_

#include <stdbool.h>

#include "tpc_mesh.h"

typedef struct tpc_opt_options_t {
  const char* input;   // "-" for stdin
  const char* output;  // NULL for stdout
  bool split_input;
  bool verify_each;
  bool verify_diagnostics;  // check the diagnostics against expected-* comments
  bool print_debuginfo;
  bool generic;
  bool print_before_all;    // --mlir-print-ir-before-all
  bool print_after_all;     // --mlir-print-ir-after-all
  bool print_after_change;  // --mlir-print-ir-after-change
  bool print_after_failure; // --mlir-print-ir-after-failure
  bool print_module_scope;  // --mlir-print-ir-module-scope
  bool timing;              // --mlir-timing
  bool has_mesh;
  tpc_mesh_spec_t mesh;
  const char* numerics;    // --numerics or a pass option, overriding tp.numerics
  const char* strategy;    // --strategy or a pass option, overriding tp.strategy
  bool sequence_parallel;  // --sequence-parallel or tp-shard{sequence-parallel=true}
  bool has_gtp_prefetch;   // --gtp-prefetch or tp-gtp{prefetch=N} given
  int64_t gtp_prefetch;
  bool gtp_keep;           // --gtp-keep or tp-gtp{keep=true}
  const char* gtp_wgrad;   // --gtp-wgrad or tp-gtp{wgrad=...} (NULL: not given)
  int fused_norm_algorithm;  // --fused-norm-algorithm or tp-lower-runtime{fused-norm-algorithm=...}: a
                             // tpc_algorithm_t value (0, "auto", leaves the fused norms as they are)
  /// The pipeline in order: tpc pass arguments ("tp-shard") and upstream elements ("mlir:cse").
  char** elements;
  int num_elements;
} tpc_opt_options_t;

/// Parses argv into |o| (zeroed by the caller). Returns 1 to run, 0 after --help or --version
/// (printed), -1 on a usage error (printed on stderr). Free with tpc_opt_options_free.
int tpc_opt_parse_args(int argc, char** argv, tpc_opt_options_t* o);

/// Releases what tpc_opt_parse_args allocated in |o|.
void tpc_opt_options_free(tpc_opt_options_t* o);

#endif  // TPC_OPT_ARGS_H_
