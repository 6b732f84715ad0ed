// tpc-run's command line: the option table and the checks between options (see tpc_run_args.h).
#include "tpc_run_args.h"

#include <stdio.h>
#include <string.h>

#include "tpc_cli.h"

enum {
  OPT_WORLD, OPT_MESH, OPT_PIPELINE, OPT_NUMERICS, OPT_STRATEGY, OPT_SEQUENCE_PARALLEL, OPT_GTP_PREFETCH, OPT_GTP_KEEP, OPT_GTP_WGRAD, OPT_FUSED_NORM_ALGORITHM, OPT_FUNCTION,
  OPT_WEIGHTS, OPT_WEIGHT_NAMES, OPT_INPUTS, OPT_SEED, OPT_OUTPUTS, OPT_DUMP_ARGS, OPT_MAX_FILE_SIZE,
  OPT_HASH, OPT_STATS, OPT_JSON, OPT_GRAPH, OPT_COUNT_ONLY, OPT_WARMUP, OPT_REPEAT, OPT_BACKEND, OPT_SHARE_GPUS,
};

static const tpc_cli_option_t kOptions[] = {
    {"world", 0, "N", "Number of ranks (default: the module's mesh size, else 1)", OPT_WORLD},
    {"mesh", 0, "tp=4[,dp=2]", "Partition a .mlir for this mesh (implies --pipeline infer)", OPT_MESH},
    {"pipeline", 0, "infer|train",
     "Compile a .mlir with this pipeline: infer = tp-shard + lowering;\n"
     "train = tp-autodiff (results and gradients) + tp-shard + lowering",
     OPT_PIPELINE},
    {"numerics", 0, "MODE",
     "Compile with tp.numerics = fast, invariant or exact (default: the module's;\n"
     "invariant/exact make every TP degree compute TP = 1's bits, docs/numerics.md)",
     OPT_NUMERICS},
    {"strategy", 0, "S",
     "How invariant numerics completes sharded contractions: canonical (default,\n"
     "f32 partials summed in the canonical tree) or gather (TransformerEngine's way)",
     OPT_STRATEGY},
    {"sequence-parallel", 0, NULL, "Compile with sequence_parallel = true on every column/row-parallel linear",
     OPT_SEQUENCE_PARALLEL},
    {"gtp-prefetch", 0, "N",
     "Compile with GTP weight all-gathers started N contractions before their use\n"
     "(default: tp-gtp's cost model; 0: just before the use; docs/passes.md, \"tp-gtp\")",
     OPT_GTP_PREFETCH},
    {"gtp-keep", 0, NULL, "Compile with GTP weights gathered once and kept for the backward", OPT_GTP_KEEP},
    {"gtp-wgrad", 0, "MODE",
     "Compile with GTP linears' weight gradients reduce-scattered (scatter), contracted over\n"
     "every gtp rank's tokens (gather), or either by tp-gtp's cost model (auto, the default)",
     OPT_GTP_WGRAD},
    {"fused-norm-algorithm", 0, "A",
     "Compile with algorithm = A on every fused norm left at auto: auto, one-shot or two-shot\n"
     "(that fused kernel wherever the backend can run it) or composition",
     OPT_FUSED_NORM_ALGORITHM},
    {"function", 0, "F", "Function to run (default: the first)", OPT_FUNCTION},
    {"weights", 0, "FILE",
     "Checkpoint with arguments by name: a safetensors file, or a Hugging Face\n"
     "index (model.safetensors.index.json) of several; each rank reads only\n"
     "its shard's bytes",
     OPT_WEIGHTS},
    {"weight-names", 0, "RULES",
     "Rules naming the --weights tensors of each argument, one per line:\n"
     "'w1_{i} = model.layers.{i}.mlp.gate_proj.weight + model.layers.{i}.mlp.up_proj.weight'\n"
     "('+' concatenates along the first dimension; docs/io.md)",
     OPT_WEIGHT_NAMES},
    {"inputs", 0, "FILE", "Checkpoint with arguments by name (checked before --weights)", OPT_INPUTS},
    {"seed", 0, "S",
     "Seed of the Philox initialisation of arguments found in no file (default 0;\n"
     "with --weights/--inputs, missing arguments are an error unless --seed is given)",
     OPT_SEED},
    {"outputs", 0, "FILE", "Write rank 0's results to this safetensors file", OPT_OUTPUTS},
    {"dump-args", 0, "FILE",
     "Write rank 0's arguments (as initialised) to this safetensors file\n"
     "(--outputs and --dump-args: a name ending in .json writes an index and files of\n"
     "at most --max-file-size bytes, as Hugging Face does)",
     OPT_DUMP_ARGS},
    {"max-file-size", 0, "BYTES", "Data bytes per file of an index checkpoint written (default 5000000000)",
     OPT_MAX_FILE_SIZE},
    {"hash", 0, NULL, "Print one line per result: name, shape, dtype, FNV-1a-64 of the bytes", OPT_HASH},
    {"stats", 0, NULL,
     "Print per rank and step: GEMM FLOPs, and per collective family the calls\n"
     "and bytes sent/received (ring/direct schedule model, docs/runtime.md); with\n"
     "--repeat, the step time over ranks (min/median/p90 of the slowest rank), TFLOP/s\n"
     "and collective bus bandwidth",
     OPT_STATS},
    {"json", 0, "FILE",
     "Write one JSON record per timed step and rank (times, FLOPs, bytes, arena,\n"
     "numerics, mesh, device) to FILE ('-': stdout); docs/runtime.md",
     OPT_JSON},
    {"count-only", 0, NULL,
     "--stats without computing: no memory is allocated, no kernel runs and no\n"
     "data moves; for shapes too large to run here (e.g. Llama-70B layers)",
     OPT_COUNT_ONLY},
    {"warmup", 0, "W", "Untimed steps before the --repeat timed ones (default: 1 when --repeat > 1, else 0)",
     OPT_WARMUP},
    {"repeat", 0, "R", "Run the step R times (default 1) and report timings", OPT_REPEAT},
    {"backend", 0, "cpu|cuda",
     "cpu (default): rank threads on this CPU. cuda: one GPU per rank, NCCL\n"
     "collectives (loads libtprt_backend_cuda.so from ../lib next to tpc-run,\n"
     "or the path in TPRT_BACKEND_CUDA)",
     OPT_BACKEND},
    {"graph", 0, NULL,
     "(--backend cuda) run one step, capture the next as a CUDA graph, and time\n"
     "--repeat replays of it (ops that copy to or from the host cannot be captured)",
     OPT_GRAPH},
    {"share-gpus", 0, NULL,
     "(--backend cuda) let a world have more ranks than GPUs: rank i on GPU\n"
     "i % GPUs, collectives as device copies plus the canonical sums instead of\n"
     "NCCL (the same bits); for tests such as TP invariance at TP 8 on one GPU.\n"
     "Ranks as threads only (with --graph the world captures one CUDA graph); a\n"
     "world with enough GPUs runs one GPU per rank as without it. Sets TPRT_CUDA_SHARE_DEVICES=1 (and\n"
     "CUDA_MODULE_LOADING=EAGER unless set: a kernel loaded lazily while a peer's\n"
     "fused norm kernel waits on the same GPU could deadlock)",
     OPT_SHARE_GPUS},
    {NULL, 0, NULL, NULL, 0}};

static void tpc__more_help(FILE* out) {
  fprintf(out,
          "RANKS AS PROCESSES:\n"
          "  Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK picks the GPU) or mpirun\n"
          "  (OMPI_COMM_WORLD_* or PMI_*; MPI only exchanges the processes' addresses), each tpc-run runs one\n"
          "  rank, with either backend; rank 0 gathers the results and prints. Launch one process per rank:\n"
          "    torchrun --nproc-per-node 4 --no-python tpc-run m.so --backend cuda --hash\n"
          "    mpirun -np 4 tpc-run m.so --backend cuda --hash\n"
          "  TPRT_RANKS=threads ignores the launcher's variables.\n");
}

static const tpc_cli_t kCli = {"tpc-run", "run a compiled tp module on a world of ranks",
                               "<module.so | module.mlir> [options]", kOptions, false, NULL, tpc__more_help};

int tpc_run_parse_args(int argc, char** argv, tpc_run_options_t* o) {
  o->repeat = 1;
  o->warmup = -1;  // chosen below from --repeat
  o->max_file_size = 5000000000ull;
  tpc_cli_state_t st = {0};
  uint64_t n = 0;
  for (int id; (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END;) {
    const char* v = st.value;
    switch (id) {
      case TPC_CLI_EXIT: return 0;
      case TPC_CLI_ERROR: return -1;
      case TPC_CLI_POSITIONAL:
        if (o->module_path) {
          tpc_cli_error(&kCli, "more than one module ('%s' and '%s')", o->module_path, v);
          return -1;
        }
        o->module_path = v;
        break;
      case OPT_WORLD:
        if (!tpc_cli_u64(&kCli, &st, 1, TPC_RUN_MAX_RANKS, NULL, &n)) return -1;
        o->world = (int)n;
        break;
      case OPT_REPEAT:
        if (!tpc_cli_u64(&kCli, &st, 1, 1000000, NULL, &n)) return -1;
        o->repeat = (int)n;
        break;
      case OPT_WARMUP:
        if (!tpc_cli_u64(&kCli, &st, 0, 1000000, NULL, &n)) return -1;
        o->warmup = (int)n;
        break;
      case OPT_SEED:
        if (!tpc_cli_u64(&kCli, &st, 0, UINT64_MAX, "a non-negative integer", &o->seed)) return -1;
        o->seed_given = true;
        break;
      case OPT_MAX_FILE_SIZE:
        if (!tpc_cli_u64(&kCli, &st, 1, UINT64_MAX, "a positive number of bytes", &o->max_file_size)) return -1;
        break;
      case OPT_BACKEND:
        if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
          tpc_cli_error(&kCli, "--backend must be cpu or cuda; got '%s'", v);
          return -1;
        }
        o->backend = v;
        break;
      case OPT_FUNCTION: o->function = v; break;
      case OPT_WEIGHTS: o->weights = v; break;
      case OPT_WEIGHT_NAMES: o->weight_names = v; break;
      case OPT_INPUTS: o->inputs = v; break;
      case OPT_OUTPUTS: o->outputs = v; break;
      case OPT_DUMP_ARGS: o->dump_args = v; break;
      case OPT_JSON: o->json = v; break;
      case OPT_MESH: o->mesh = v; break;
      case OPT_PIPELINE: o->pipeline = v; break;
      case OPT_NUMERICS: o->numerics = v; break;  // tpc-compile checks the value
      case OPT_STRATEGY: o->strategy = v; break;
      case OPT_SEQUENCE_PARALLEL: o->sequence_parallel = true; break;
      case OPT_GTP_PREFETCH: o->gtp_prefetch = v; break;  // tpc-compile checks the value
      case OPT_GTP_KEEP: o->gtp_keep = true; break;
      case OPT_GTP_WGRAD: o->gtp_wgrad = v; break;  // tpc-compile checks the value
      case OPT_FUSED_NORM_ALGORITHM: o->fused_norm_algorithm = v; break;  // tpc-compile checks the value
      case OPT_HASH: o->hash = true; break;
      case OPT_STATS: o->stats = true; break;
      case OPT_COUNT_ONLY: o->count_only = o->stats = true; break;
      case OPT_GRAPH: o->graph = true; break;
      case OPT_SHARE_GPUS: o->share_gpus = true; break;
      default: tpc_cli_error(&kCli, "internal error: option %d has no handler", id); return -1;
    }
  }
  if (!o->module_path) {
    tpc_cli_error(&kCli, "no module given (see --help)");
    return -1;
  }
  if (o->warmup < 0) o->warmup = o->repeat > 1 ? 1 : 0;
  size_t len = strlen(o->module_path);
  bool mlir = len > 5 && !strcmp(o->module_path + len - 5, ".mlir");
  bool partition =
      o->mesh || o->pipeline || o->numerics || o->strategy || o->sequence_parallel || o->gtp_prefetch || o->gtp_keep ||
      o->gtp_wgrad;
  if ((partition || o->fused_norm_algorithm) && !mlir) {
    tpc_cli_error(&kCli,
                  "--mesh, --pipeline, --numerics, --strategy, --sequence-parallel, --gtp-* and "
                  "--fused-norm-algorithm apply to a .mlir input; '%s' is already compiled",
                  o->module_path);
    return -1;
  }
  // --fused-norm-algorithm alone keeps the default lowering: a per-rank module stays as it is.
  if (partition && !o->pipeline) o->pipeline = "infer";
  if (o->graph && (!o->backend || strcmp(o->backend, "cuda") != 0)) {
    tpc_cli_error(&kCli, "--graph captures CUDA graphs: it needs --backend cuda");
    return -1;
  }
  if (o->share_gpus && (!o->backend || strcmp(o->backend, "cuda") != 0)) {
    tpc_cli_error(&kCli, "--share-gpus lets the ranks share GPUs: it needs --backend cuda");
    return -1;
  }
  if (o->count_only && (o->hash || o->outputs || o->dump_args || o->weights || o->inputs)) {
    tpc_cli_error(&kCli, "--count-only computes nothing: it takes no --hash, --outputs, --dump-args, --weights or "
                         "--inputs");
    return -1;
  }
  return 1;
}
