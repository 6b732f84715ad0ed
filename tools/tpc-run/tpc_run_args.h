// tpc-run's command line: the options and their parser (tpc_run.c runs them).
#ifndef TPC_RUN_ARGS_H_
#define TPC_RUN_ARGS_H_

#include <stdbool.h>
#include <stdint.h>

/// Most ranks tpc-run runs (the runtime's TPRT_MAX_WORLD_SIZE).
#define TPC_RUN_MAX_RANKS 64

typedef struct {
  const char* module_path;
  const char* function;
  const char* weights;
  const char* weight_names;  // --weight-names: rules mapping argument names to --weights tensors
  uint64_t max_file_size;    // --max-file-size: data bytes per file of an index checkpoint written
  const char* inputs;
  const char* outputs;
  const char* dump_args;
  const char* mesh;      // --mesh, passed to tpc-compile
  const char* pipeline;  // --pipeline, passed to tpc-compile
  const char* numerics;  // --numerics, passed to tpc-compile
  const char* strategy;  // --strategy, passed to tpc-compile
  bool sequence_parallel;  // --sequence-parallel, passed to tpc-compile
  bool zero1;              // tpc-train's --zero1, passed to tpc-compile
  const char* gtp_prefetch;  // --gtp-prefetch, passed to tpc-compile
  bool gtp_keep;
  const char* gtp_wgrad;     // --gtp-wgrad, passed to tpc-compile             // --gtp-keep, passed to tpc-compile
  const char* fused_norm_algorithm;  // --fused-norm-algorithm, passed to tpc-compile
  uint64_t seed;
  bool seed_given;
  int world;
  int repeat;
  int warmup;           // --warmup: untimed steps before the timed ones
  const char* json;     // --json: per step and rank records (JSON Lines; "-" for stdout)
  bool hash;
  bool stats;
  bool count_only;  // --count-only: counters without computing (implies --stats)
  const char* backend;  // --backend: "cpu" (default) or "cuda"
  bool graph;           // --graph: capture one step as a CUDA graph and replay it
  bool share_gpus;      // --share-gpus: ranks of a thread world may share GPUs (TPRT_CUDA_SHARE_DEVICES=1)
} tpc_run_options_t;

/// Parses argv into |o| (zeroed by the caller). Returns 1 to run, 0 after --help or --version
/// (printed), -1 on an error (printed on stderr).
int tpc_run_parse_args(int argc, char** argv, tpc_run_options_t* o);

#endif  // TPC_RUN_ARGS_H_
