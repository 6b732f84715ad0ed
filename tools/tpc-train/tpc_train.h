// tpc-train's pieces beside main (tpc_train.c): the command line (tpc_train_args.c), the token
// file (tpc_train_data.c), the learning-rate schedule and AdamW's hyperparameters, and the
// checkpoints (tpc_train_checkpoint.c).
#ifndef TPC_TRAIN_H_
#define TPC_TRAIN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_module.h"
#include "tprt_status.h"
#include "tprt_world.h"

typedef struct {
  const char* module_path;
  const char* data_path;
  const char* val_path;     // --val-data: held-out tokens
  int64_t eval_every;       // --eval-every N (0: only at the end when --val-data is given)
  int64_t eval_batches;     // --eval-batches K (default 8)
  const char* mesh;
  const char* numerics;
  const char* strategy;
  bool sequence_parallel;
  bool zero1;  // --zero1: optimizer states sharded over dp
  int64_t micro_batches;  // --micro-batches K: gradient accumulation (1: none)
  const char* backend;
  bool share_gpus;  // --share-gpus: ranks share the GPUs (a test mode of the CUDA backend)
  const char* weights;
  const char* weight_names;
  const char* inputs;  // --inputs: tensors by argument name, checked before --weights (the rotary tables)
  uint64_t seed;
  bool seed_given;
  int64_t batch;  // sequences per step (global)
  int64_t steps;
  int64_t exit_after;  // --exit-after: stop (with a checkpoint) after this step; 0: never
  double lr, min_lr;
  double peak_tflops;  // --peak-tflops: a rank's device peak (0: no MFU)
  int64_t warmup;
  bool cosine;
  double beta1, beta2, eps, weight_decay, clip;
  const char* save_dir;
  int64_t save_every;
  const char* resume_dir;
  const char* json;
  bool skip_nonfinite;
} tpc_train_options_t;

/// Parses argv into |o| (defaults first). 1: train; 0: --help/--version printed; -1: an error.
int tpc_train_parse_args(int argc, char** argv, tpc_train_options_t* o);

/// A token file (docs/training.md, "Token files"): a header of 256 int32 (magic 20240520, version
/// 1 for uint16 tokens or 2 for uint32, the token count), then the tokens.
typedef struct {
  const char* path;
  int fd;
  void* map;
  size_t size;
  int width;         // bytes per token
  int64_t count;
  const unsigned char* tokens;
  int64_t seq;       // tokens per sequence of a batch
} tpc_data_t;

tprt_status_t tpc_data_open(const char* path, tpc_data_t* d) TPRT_MUST_USE_RESULT;
/// Sets the sequence length; checks that one batch of |tokens| fits and, when |vocab| > 0, that
/// every token is below it (the error names the file and the token's offset).
tprt_status_t tpc_data_configure(tpc_data_t* d, const char* path, int64_t seq, int64_t vocab) TPRT_MUST_USE_RESULT;
/// The batch of |tokens| (tokens / seq sequences) starting at |position|: ids and the targets
/// (each id's next token).
tprt_status_t tpc_data_batch(const tpc_data_t* d, int64_t position, int64_t tokens, int32_t* ids,
                             int32_t* targets) TPRT_MUST_USE_RESULT;
/// The next batch's position (back to 0 when the next batch would run past the end: an epoch).
int64_t tpc_data_advance(const tpc_data_t* d, int64_t position, int64_t tokens);
void tpc_data_close(tpc_data_t* d);

/// The learning rate of step |t| (1-based): linear warm-up, then cosine decay to min_lr or
/// constant.
double tpc_lr(const tpc_train_options_t* o, int64_t t);
/// tp.adamw's hyperparameters for step |t| (docs/dialect.md, "tp.adamw").
void tpc_adamw_hyper(const tpc_train_options_t* o, int64_t t, float hyper[8]);
/// The model's vocabulary (the rows of its embedding table: an argument whose name holds
/// "embed" or is "emb"/"wte"), or 0 when none is recognised.
int64_t tpc_train_vocab(const tprt_module_function_t* fn, const tprt_world_t* world);

/// Where a checkpoint leaves off.
typedef struct {
  int64_t step, position;
} tpc_checkpoint_state_t;

/// Writes every argument but the per-step ones (the logical tensors: weights under their names,
/// optimizer states as <name>.master / .exp_avg / .exp_avg_sq) and the trainer state to
/// <save_dir>/step-<N>, atomically (a temporary directory renamed), then points
/// <save_dir>/latest at it. An argument whose |logical| entry has data is written from it (a
/// table fed to the ranks a micro-batch at a time); the others are assembled from the ranks'
/// pieces. On failure the earlier checkpoints stay as they were.
tprt_status_t tpc_checkpoint_save(const tpc_train_options_t* o, const tprt_module_function_t* fn,
                                  const tprt_world_t* world, void** const* rank_args, const tprt_tensor_t* logical,
                                  int nranks, int64_t step, int64_t position) TPRT_MUST_USE_RESULT;
/// The tensor file of the latest whole checkpoint of |dir| and its trainer state.
tprt_status_t tpc_checkpoint_latest(const char* dir, char* file, size_t size,
                                    tpc_checkpoint_state_t* out) TPRT_MUST_USE_RESULT;

#endif  // TPC_TRAIN_H_
