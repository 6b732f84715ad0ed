// tpc-train's pieces beside main (tpc_train.c): the command line, the learning-rate schedule and
// AdamW's hyperparameters (tpc_train_args.c), the token file (tpc_train_data.c), the checkpoints
// (tpc_train_checkpoint.c), and the trainer's state that main shares with the rank threads: their
// step loop (tpc_train_step.c), rank 0's review of each step and the evaluation
// (tpc_train_report.c), and what the processes of a process world exchange (tpc_train_procs.c).
#ifndef TPC_TRAIN_H_
#define TPC_TRAIN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tprt_backend.h"
#include "tprt_exec.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_status.h"
#include "tprt_world.h"
#include "tpc_run_args.h"

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

/// Where a checkpoint leaves off, and the run's seed.
typedef struct {
  int64_t step, position;
  uint64_t seed;
  bool has_seed;  // false for a trainer state that records no seed
} tpc_checkpoint_state_t;

/// Writes every argument but the per-step ones (the logical tensors: weights under their names,
/// optimizer states as <name>.master / .exp_avg / .exp_avg_sq) and the trainer state (the step, the
/// data position, |o|'s seed and steps) to
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

//===----------------------------------------------------------------------===//
// The trainer: main sets it up (tpc_train.c), the rank threads run the steps (tpc_train_step.c),
// rank 0 reviews each step and the ranks evaluate (tpc_train_report.c)
//===----------------------------------------------------------------------===//

// The buffers a rank's kernels address (tpc_train_t.kb).
typedef struct {
  void** args;   // per argument of fn_all
  void** gres;   // per result of the gradient function (the step)
  void** res;    // per result of the function whose results update the arguments
  void** acc;    // per partial gradient and tree level
  void* arena;   // one for both functions
  void** eargs;  // evaluation: per argument (the training arguments' buffers where it reads them)
  void** eres;   // per result
  void* earena;
} tpc_kbufs_t;

// The state shared by the rank threads (rank 0 writes the step's inputs and decisions between
// two meetings of the ranks; every rank reads them after the second). In a process world each
// process holds its own copy for its one rank, and every process does rank 0's work on it (the
// batch, the step's loss, the decisions: tpc__leads), from what the processes exchange; rank 0
// alone prints, writes the --json records and writes the checkpoints.
typedef struct {
  const tpc_train_options_t* o;
  const tprt_backend_t* backend;
  const tprt_module_t* module;
  const tprt_module_function_t* fn;  // every argument of the functions below, by name (&fn_all)
  const tprt_module_function_t* gfn;  // the step, or with micro-batches the gradient function
  const tprt_module_function_t* ufn;  // <gfn>_update with micro-batches, else NULL
  const tprt_module_function_t* rfn;  // the function whose results update the arguments (ufn or gfn)
  tprt_module_function_t fn_all;
  int k;           // micro-batches per step
  int* garg;       // per gfn argument: its index in fn_all
  int* uarg;       // per ufn argument: its index in fn_all, or -1 - p for partial gradient p
  int npart;       // partial gradients: gfn results 1..npart
  int levels;      // log2(k) + 1: the pairwise tree's pending subtrees
  // Token arguments (ids, targets, the loss gradient, and with micro-batches every argument
  // sharded over mb): the logical tensor of the whole step (tok) and rank 0's piece of it for
  // the micro-batch being fed (micro); data NULL for the other arguments.
  tprt_tensor_t* tok;
  tprt_tensor_t* micro;
  int64_t* piece;  // per argument: rows of one data-parallel rank's micro-batch
  float* loss_all; // the step's per-token loss, in token order
  tprt_world_t* world;
  tprt_procs_t* procs;  // a process world (torchrun, mpirun: tprt_procs.h), else NULL
  int self;             // this process's rank in a process world; 0 in a world of threads
  tpc_data_t train, val;
  // Evaluation (--val-data): the forward module (pipeline infer) and, per argument, the training
  // argument of the same name that it reads.
  tprt_module_t* eval_module;
  const tprt_module_function_t* efn;
  int* eval_from;
  int* eval_tok;  // per evaluation argument: the token argument it is cut from, or -1
  int eval_ids, eval_targets;
  void** eval_results_of[TPC_RUN_MAX_RANKS];
  bool eval_now;
  double val_sum;
  int64_t val_count;
  // Argument roles, by name (docs/training.md, "The module").
  int ids, targets, loss_grad, hyper, loss, norm;
  int cos_arg, sin_arg;  // --inputs' tables (also in checkpoints; a resume may take them from --inputs)
  int* next;  // per result of rfn: the argument it becomes at the next step, or -1; such a result
              // is written into that argument's own buffer (an update in place)
  // The logical per-step inputs rank 0 prepares.
  tprt_tensor_t ids_t, targets_t, loss_grad_t;
  float hyper_v[8];
  // Rank buffers: host copies (the CPU backend computes in them). args: per fn_all argument;
  // gres: gfn's results; results: rfn's (gres itself without micro-batches); acc: per partial
  // gradient, |levels| pending subtree sums (accf: which are pending).
  void** args[TPC_RUN_MAX_RANKS];
  void** gres[TPC_RUN_MAX_RANKS];
  void** results[TPC_RUN_MAX_RANKS];
  float** acc[TPC_RUN_MAX_RANKS];
  bool* accf[TPC_RUN_MAX_RANKS];
  // What the kernels address, per rank: on the CPU backend the host buffers above themselves; on a
  // device backend its own copies (tpc__rank), with the host ones as staging.
  bool device;
  tpc_kbufs_t kb[TPC_RUN_MAX_RANKS];
  void** eval_host[TPC_RUN_MAX_RANKS];  // per evaluation argument: host staging of ids and targets
  // Step bookkeeping (rank 0).
  int64_t step;       // steps done
  int64_t position;   // the next batch's first token in the data
  bool stop, save;
  int signal;  // the SIGINT or SIGTERM that stops the run (in a process world: any process's); 0: none
  double loss_mean, norm_value, t_start;
  int64_t tokens_done;
  // The model's matrix FLOPs (tprt_exec_stats' model_flops) each rank has counted so far, their
  // sum at the last step, and when this step began (rank 0): the step's MFU.
  int64_t rank_flops[TPC_RUN_MAX_RANKS], flops_before;
  double t_step;
  FILE* json;
  tprt_status_t failure;
} tpc_train_t;

/// Whether rank |r| does rank 0's work between steps on this process's copy of the state (the
/// batch, the step's loss and decisions, the evaluation's loss): rank 0 in a world of threads,
/// every rank in a process world.
bool tpc__leads(const tpc_train_t* t, int r);
/// Whether result |j| of |fn| is updated in place: rfn's results that become arguments (the
/// weights, master weights and moments) are written into the arguments' buffers, not beside them.
/// AdamW leaves them unchanged at a non-finite gradient norm (tprt_adamw_applies), so a skipped
/// step needs no copy of the state.
bool tpc__in_place(const tpc_train_t* t, const tprt_module_function_t* fn, int j);
/// Copies rank |r|'s part of the logical tensor |logical| (the whole of |mt|'s data) into |local|.
tprt_status_t tpc__to_rank(const tprt_module_tensor_t* mt, const tprt_world_t* world, int r, const void* logical,
                           void* local) TPRT_MUST_USE_RESULT;
/// Copies |bytes| between a host buffer and a buffer the kernels address (no copy when they are
/// the same: the CPU backend). Device copies are synchronous.
tprt_status_t tpc__upload(const tpc_train_t* t, void* kernel, const void* host, size_t bytes) TPRT_MUST_USE_RESULT;
tprt_status_t tpc__download(const tpc_train_t* t, void* host, const void* kernel, size_t bytes) TPRT_MUST_USE_RESULT;
/// One rank's thread (tprt_world_run): its buffers and executors, then the steps (with the
/// checkpoints and evaluations between them) until rank 0 stops the run; a failure fails the rank.
tprt_status_t tpc__rank(tprt_rank_t* rank, void* user);
/// The step's mean loss over the global batch (in token order) and the gradient norm; decides
/// whether the step is kept; logs it.
void tpc__review(tpc_train_t* t);
/// The mean loss of --eval-batches batches of --val-data (from its start, so every evaluation
/// sees the same tokens), with the weights of this step: the forward module reads the training
/// arguments themselves. Rank 0 prints it.
tprt_status_t tpc__evaluate(tpc_train_t* t, tprt_rank_t* rank, tprt_exec_t* exec) TPRT_MUST_USE_RESULT;

//===----------------------------------------------------------------------===//
// A process world (tpc_train_procs.c): one rank per process, launched by torchrun or mpirun
//===----------------------------------------------------------------------===//

/// Per-rank buffers of |bytes| (|per_rank[q][0]|, the first buffer of each rank's table) where the
/// leaders read them: in a world of threads every rank's own, once the ranks have met (only rank
/// 0 gets them: |pieces| is left unset on the others); in a process world every process's copy
/// of every rank's, all-gathered into |*out_all| (the caller frees it).
tprt_status_t tpc__rank_pieces(tpc_train_t* t, tprt_rank_t* rank, void** const* per_rank, size_t bytes,
                               const void** pieces, void** out_all) TPRT_MUST_USE_RESULT;
/// After a step, in a process world: every rank's model FLOPs (t->rank_flops), the first signal
/// any process caught (t->signal) and rank 0's gradient norm (t->norm_value), on every process,
/// so that every process reviews the step alike.
tprt_status_t tpc__share_step(tpc_train_t* t) TPRT_MUST_USE_RESULT;
/// Before a checkpoint, in a process world: rank 0 receives every other rank's pieces of the
/// sharded arguments a checkpoint holds (into t->args[q]); the others send theirs.
tprt_status_t tpc__gather_args(tpc_train_t* t) TPRT_MUST_USE_RESULT;
/// After the checkpoint: rank 0 frees the other ranks' pieces, so that it holds them only while it
/// writes.
void tpc__drop_gathered(tpc_train_t* t);

#endif  // TPC_TRAIN_H_
