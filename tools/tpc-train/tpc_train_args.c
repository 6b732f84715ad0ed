// tpc-train's command line (see tpc_train.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cli.h"
#include "tpc_train.h"

enum {
  OPT_DATA, OPT_MESH, OPT_NUMERICS, OPT_STRATEGY, OPT_SP, OPT_BACKEND, OPT_WEIGHTS, OPT_WEIGHT_NAMES, OPT_SEED,
  OPT_BATCH, OPT_STEPS, OPT_LR, OPT_MIN_LR, OPT_WARMUP, OPT_SCHEDULE, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_WD,
  OPT_CLIP, OPT_VAL, OPT_EVAL_EVERY, OPT_EVAL_BATCHES, OPT_ZERO1, OPT_INPUTS, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME, OPT_JSON, OPT_SKIP_NONFINITE, OPT_EXIT_AFTER,
  OPT_MICRO, OPT_SHARE_GPUS, OPT_PEAK,
};

static const tpc_cli_option_t kOptions[] = {
    {"data", 0, "FILE", "Token file to train on (docs/training.md, \"Token files\"); required", OPT_DATA},
    {"val-data", 0, "FILE", "Held-out token file: the mean loss of --eval-batches batches of it is\n"
     "printed every --eval-every steps and at the end",
     OPT_VAL},
    {"eval-every", 0, "N", "Evaluate on --val-data every N steps (default: only at the end)", OPT_EVAL_EVERY},
    {"eval-batches", 0, "K", "Batches of --val-data per evaluation, from its start (default 8)", OPT_EVAL_BATCHES},
    {"mesh", 0, "tp=2[,dp=2]",
     "Partition the model over this mesh (default: one rank); its ranks are threads, or under\n"
     "torchrun or mpirun one process each (below)",
     OPT_MESH},
    {"numerics", 0, "MODE", "fast, invariant or exact (default: the module's)", OPT_NUMERICS},
    {"strategy", 0, "S", "How invariant numerics completes sharded sums: canonical (default) or gather", OPT_STRATEGY},
    {"sequence-parallel", 0, NULL, "Sequence parallelism for every tp-parallel op", OPT_SP},
    {"micro-batches", 0, "K",
     "Accumulate the gradients of K micro-batches (a power of two) per step: the module's tokens\n"
     "are the global batch, each call computes 1/K of them; bitwise the K = 1 step in invariant numerics",
     OPT_MICRO},
    {"zero1", 0, NULL, "Shard AdamW's master weights and moments over the dp ranks (ZeRO-1)", OPT_ZERO1},
    {"backend", 0, "B", "cpu (default) or cuda (one GPU per rank; the model may be a .so from\n"
     "tpc-compile --pipeline=step on a machine without MLIR)", OPT_BACKEND},
    {"share-gpus", 0, NULL, "With --backend cuda: ranks share the GPUs (rank i on GPU i mod count; a test mode)",
     OPT_SHARE_GPUS},
    {"weights", 0, "FILE", "Initial weights by name: a safetensors file or a Hugging Face index", OPT_WEIGHTS},
    {"weight-names", 0, "RULES", "Rules naming the --weights tensors of each argument (docs/io.md)", OPT_WEIGHT_NAMES},
    {"inputs", 0, "FILE",
     "Arguments by name that are neither weights nor tokens (the rotary tables cos and sin of an\n"
     "exported model: tpc_torch.export --whole --weights DIR writes DIR/inputs.safetensors)",
     OPT_INPUTS},
    {"seed", 0, "S",
     "Seed of the Philox initialisation of weights found in no file (default 0;\n"
     "with --resume, the checkpoint's, which a --seed given overrides)",
     OPT_SEED},
    {"batch", 0, "B", "Sequences per step, of the module's tokens per step (default 1)", OPT_BATCH},
    {"steps", 0, "N", "Steps to train (default 100)", OPT_STEPS},
    {"lr", 0, "LR", "Peak learning rate (default 3e-4)", OPT_LR},
    {"min-lr", 0, "LR", "Learning rate at the end of the cosine schedule (default lr/10)", OPT_MIN_LR},
    {"warmup", 0, "N", "Steps of linear warm-up (default 0)", OPT_WARMUP},
    {"schedule", 0, "S", "cosine (default) or constant after the warm-up", OPT_SCHEDULE},
    {"beta1", 0, "B", "AdamW's beta1 (default 0.9)", OPT_BETA1},
    {"beta2", 0, "B", "AdamW's beta2 (default 0.95)", OPT_BETA2},
    {"eps", 0, "E", "AdamW's epsilon (default 1e-8)", OPT_EPS},
    {"weight-decay", 0, "W", "Decoupled weight decay (default 0.1)", OPT_WD},
    {"clip", 0, "C", "Clip the global gradient norm to C (default 1.0; 0: no clipping)", OPT_CLIP},
    {"save", 0, "DIR", "Write checkpoints into DIR (step-N/ directories and DIR/latest)", OPT_SAVE},
    {"save-every", 0, "N", "A checkpoint every N steps (default: only at the end or on Ctrl-C)", OPT_SAVE_EVERY},
    {"exit-after", 0, "N",
     "Stop after step N of the --steps schedule, with a checkpoint (a job's time slot);\n"
     "--resume goes on",
     OPT_EXIT_AFTER},
    {"resume", 0, "DIR", "Continue from DIR's latest checkpoint, bit for bit as if never stopped", OPT_RESUME},
    {"json", 0, "FILE", "One JSON record per step (JSON Lines; '-' for stdout)", OPT_JSON},
    {"skip-nonfinite", 0, NULL, "Skip a step whose gradient norm is not finite (default: stop)",
     OPT_SKIP_NONFINITE},
    {"peak-tflops", 0, "P",
     "A device's dense peak in TFLOP/s (989 for an H100 or H200 SXM in bf16): each step's MFU,\n"
     "the model's matrix FLOPs over the step time and P per rank",
     OPT_PEAK},
    {NULL, 0, NULL, NULL, 0},
};

static void tpc__more_help(FILE* out) {
  fprintf(out,
          "\nRANKS AS PROCESSES:\n"
          "  Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK picks the GPU) or mpirun\n"
          "  (OMPI_COMM_WORLD_* or PMI_*; MPI only exchanges the processes' addresses), each tpc-train runs one\n"
          "  rank of the --mesh world, which must have as many ranks as there are processes. Every process\n"
          "  reads --data, --weights and --resume itself (the same files: one file system); rank 0 prints,\n"
          "  writes --json and the checkpoints, which are those of a world of threads, byte for byte:\n"
          "    torchrun --nproc-per-node 4 --no-python tpc-train m.mlir --data t.bin --mesh tp=2,dp=2 --save ck\n"
          "    mpirun -np 4 tpc-train m.mlir --data t.bin --mesh tp=2,dp=2 --save ck\n"
          "  Ctrl-C or SIGTERM stops every process after the same step, with a checkpoint (--save); a process\n"
          "  that fails or dies ends the others. TPRT_RANKS=threads ignores the launcher's variables.\n");
}

static const tpc_cli_t kCli = {
    .tool = "tpc-train",
    .overview = "Train a whole model: a tp module's loss, its gradients and AdamW, step after step",
    .usage = "<model.mlir> --data FILE [options]",
    .options = kOptions,
    .print_more_help = tpc__more_help,
};

int tpc_train_parse_args(int argc, char** argv, tpc_train_options_t* o) {
  memset(o, 0, sizeof *o);
  o->backend = "cpu";
  o->batch = 1;
  o->micro_batches = 1;
  o->steps = 100;
  o->lr = 3e-4;
  o->min_lr = -1.0;
  o->cosine = true;
  o->beta1 = 0.9;
  o->beta2 = 0.95;
  o->eps = 1e-8;
  o->weight_decay = 0.1;
  o->clip = 1.0;
  o->eval_batches = 8;
  tpc_cli_state_t st = {0};
  int id;
  bool ok = true;
  int64_t seed = 0;
  while (ok && (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END) {
    const char* v = st.value;
    switch (id) {
      case TPC_CLI_EXIT: return 0;
      case TPC_CLI_ERROR: return -1;
      case TPC_CLI_POSITIONAL:
        if (o->module_path) {
          fprintf(stderr, "tpc-train: error: one module; got '%s' and '%s'\n", o->module_path, v);
          return -1;
        }
        o->module_path = v;
        break;
      case OPT_DATA: o->data_path = v; break;
      case OPT_VAL: o->val_path = v; break;
      case OPT_EVAL_EVERY: ok = tpc_cli_count(&kCli, &st, 1, &o->eval_every); break;
      case OPT_EVAL_BATCHES: ok = tpc_cli_count(&kCli, &st, 1, &o->eval_batches); break;
      case OPT_MESH: o->mesh = v; break;
      case OPT_NUMERICS: o->numerics = v; break;
      case OPT_STRATEGY: o->strategy = v; break;
      case OPT_SP: o->sequence_parallel = true; break;
      case OPT_ZERO1: o->zero1 = true; break;
      case OPT_MICRO:
        ok = tpc_cli_count(&kCli, &st, 1, &o->micro_batches);
        if (ok && (o->micro_batches & (o->micro_batches - 1))) {
          fprintf(stderr, "tpc-train: error: --micro-batches must be a power of two (the gradients' canonical sum is a "
                          "pairwise tree); got %lld\n", (long long)o->micro_batches);
          ok = false;
        }
        break;
      case OPT_BACKEND: o->backend = v; break;
      case OPT_SHARE_GPUS: o->share_gpus = true; break;
      case OPT_WEIGHTS: o->weights = v; break;
      case OPT_WEIGHT_NAMES: o->weight_names = v; break;
      case OPT_INPUTS: o->inputs = v; break;
      case OPT_SEED: ok = tpc_cli_count(&kCli, &st, 0, &seed), o->seed = (uint64_t)seed, o->seed_given = true; break;
      case OPT_BATCH: ok = tpc_cli_count(&kCli, &st, 1, &o->batch); break;
      case OPT_STEPS: ok = tpc_cli_count(&kCli, &st, 1, &o->steps); break;
      case OPT_LR: ok = tpc_cli_number(&kCli, &st, 0.0, 10.0, &o->lr); break;
      case OPT_PEAK: ok = tpc_cli_number(&kCli, &st, 1e-6, 1e9, &o->peak_tflops); break;
      case OPT_MIN_LR: ok = tpc_cli_number(&kCli, &st, 0.0, 10.0, &o->min_lr); break;
      case OPT_WARMUP: ok = tpc_cli_count(&kCli, &st, 0, &o->warmup); break;
      case OPT_SCHEDULE:
        ok = !strcmp(v, "cosine") || !strcmp(v, "constant");
        o->cosine = !strcmp(v, "cosine");
        if (!ok) fprintf(stderr, "tpc-train: error: --schedule must be cosine or constant; got '%s'\n", v);
        break;
      case OPT_BETA1: ok = tpc_cli_number(&kCli, &st, 0.0, 0.999999, &o->beta1); break;
      case OPT_BETA2: ok = tpc_cli_number(&kCli, &st, 0.0, 0.999999, &o->beta2); break;
      case OPT_EPS: ok = tpc_cli_number(&kCli, &st, 0.0, 1.0, &o->eps); break;
      case OPT_WD: ok = tpc_cli_number(&kCli, &st, 0.0, 10.0, &o->weight_decay); break;
      case OPT_CLIP: ok = tpc_cli_number(&kCli, &st, 0.0, 1e30, &o->clip); break;
      case OPT_SAVE: o->save_dir = v; break;
      case OPT_SAVE_EVERY: ok = tpc_cli_count(&kCli, &st, 1, &o->save_every); break;
      case OPT_RESUME: o->resume_dir = v; break;
      case OPT_EXIT_AFTER: ok = tpc_cli_count(&kCli, &st, 1, &o->exit_after); break;
      case OPT_JSON: o->json = v; break;
      case OPT_SKIP_NONFINITE: o->skip_nonfinite = true; break;
      default: break;
    }
  }
  if (!ok) return -1;
  if (!o->module_path || !o->data_path) {
    fprintf(stderr, "tpc-train: error: give a module and --data FILE (tpc-train --help)\n");
    return -1;
  }
  if (o->min_lr < 0) o->min_lr = o->lr / 10.0;
  if (o->resume_dir && !o->save_dir) o->save_dir = o->resume_dir;
  return 1;
}

double tpc_lr(const tpc_train_options_t* o, int64_t t) {
  if (o->warmup > 0 && t <= o->warmup) return o->lr * (double)t / (double)o->warmup;
  if (!o->cosine || o->steps <= o->warmup) return o->lr;
  double p = (double)(t - o->warmup) / (double)(o->steps - o->warmup);
  return o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(3.14159265358979323846 * p));
}

void tpc_adamw_hyper(const tpc_train_options_t* o, int64_t t, float h[8]) {
  double lr = tpc_lr(o, t);
  h[0] = (float)(lr / (1.0 - pow(o->beta1, (double)t)));
  h[1] = (float)(1.0 - o->beta1);
  h[2] = (float)o->beta2;
  h[3] = (float)(1.0 - o->beta2);
  h[4] = (float)o->eps;
  h[5] = (float)(1.0 - lr * o->weight_decay);
  h[6] = (float)sqrt(1.0 - pow(o->beta2, (double)t));
  h[7] = (float)o->clip;
}
