// tpc-run's command line: usage text and parsing (see tpc_run_args.h).
#include "tpc_run_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tpc__usage(FILE* out) {
  fprintf(out,
          "OVERVIEW: tpc-run — run a compiled tp module on a world of ranks (CPU backend)\n\n"
          "USAGE: tpc-run <module.so | module.mlir> [options]\n\n"
          "OPTIONS:\n"
          "  --world N               Number of ranks (default: the module's mesh size, else 1)\n"
          "  --mesh tp=4[,dp=2]      Partition a .mlir for this mesh (implies --pipeline infer)\n"
          "  --pipeline infer|train  Compile a .mlir with this pipeline: infer = tp-shard + lowering;\n"
          "                          train = tp-autodiff (results and gradients) + tp-shard + lowering\n"
          "  --numerics MODE         Compile with tp.numerics = fast, invariant or exact (default: the module's;\n"
          "                          invariant/exact make every TP degree compute TP = 1's bits, docs/numerics.md)\n"
          "  --strategy S            How invariant numerics completes sharded contractions: canonical (default,\n"
          "                          f32 partials summed in the canonical tree) or gather (TransformerEngine's way)\n"
          "  --sequence-parallel     Compile with sequence_parallel = true on every column/row-parallel linear\n"
          "  --function F            Function to run (default: the first)\n"
          "  --weights FILE          Checkpoint with arguments by name: a safetensors file, or a Hugging Face\n"
          "                          index (model.safetensors.index.json) of several; each rank reads only\n"
          "                          its shard's bytes\n"
          "  --weight-names RULES    Rules naming the --weights tensors of each argument, one per line:\n"
          "                          'w1_{i} = model.layers.{i}.mlp.gate_proj.weight + model.layers.{i}.mlp.up_proj.weight'\n"
          "                          ('+' concatenates along the first dimension; docs/io.md)\n"
          "  --inputs FILE           Checkpoint with arguments by name (checked before --weights)\n"
          "  --seed S                Seed of the Philox initialisation of arguments found in no file (default 0;\n"
          "                          with --weights/--inputs, missing arguments are an error unless --seed is given)\n"
          "  --outputs FILE          Write rank 0's results to this safetensors file\n"
          "  --dump-args FILE        Write rank 0's arguments (as initialised) to this safetensors file\n"
          "                          (--outputs and --dump-args: a name ending in .json writes an index and files of\n"
          "                          at most --max-file-size bytes, default 5000000000, as Hugging Face does)\n"
          "  --hash                  Print one line per result: name, shape, dtype, FNV-1a-64 of the bytes\n"
          "  --stats                 Print per rank and step: GEMM FLOPs, and per collective family the calls\n"
          "                          and bytes sent/received (ring/direct schedule model, docs/runtime.md)\n"
          "  --graph                 (--backend cuda) run one step, capture the next as a CUDA graph, and time\n"
          "                          --repeat replays of it (ops that copy to or from the host cannot be captured)\n"
          "  --count-only            --stats without computing: no memory is allocated, no kernel runs and no\n"
          "                          data moves; for shapes too large to run here (e.g. Llama-70B layers)\n"
          "  --repeat R              Run the step R times (default 1) and report timings\n"
          "  --backend cpu|cuda      cpu (default): rank threads on this CPU. cuda: one GPU per rank, NCCL\n"
          "                          collectives (loads libtprt_backend_cuda.so from ../lib next to tpc-run,\n"
          "                          or the path in TPRT_BACKEND_CUDA)\n"
          "  --share-gpus            (--backend cuda) let a world have more ranks than GPUs: rank i on GPU\n"
          "                          i %% GPUs, collectives as device copies plus the canonical sums instead of\n"
          "                          NCCL (the same bits); for tests such as TP invariance at TP 8 on one GPU.\n"
          "                          Ranks as threads only, no --graph; a world with enough GPUs runs one GPU\n"
          "                          per rank as without it. Sets TPRT_CUDA_SHARE_DEVICES=1\n"
          "  -h, --help              Print this help\n\n"
          "RANKS AS PROCESSES:\n"
          "  Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK picks the GPU) or mpirun\n"
          "  (OMPI_COMM_WORLD_* or PMI_*; MPI only exchanges the processes' addresses), each tpc-run runs one\n"
          "  rank, with either backend; rank 0 gathers the results and prints. Launch one process per rank:\n"
          "    torchrun --nproc-per-node 4 --no-python tpc-run m.so --backend cuda --hash\n"
          "    mpirun -np 4 tpc-run m.so --backend cuda --hash\n"
          "  TPRT_RANKS=threads ignores the launcher's variables.\n");
}

// Every option tpc-run knows, and whether it takes a value (the parser below handles each).
typedef struct {
  const char* name;
  bool value;
} tpc__option_t;
static const tpc__option_t kTpcRunOptions[] = {
    {"-h", false},          {"--help", false},          {"--hash", false},         {"--stats", false},
    {"--count-only", false}, {"--graph", false},        {"--share-gpus", false},   {"--sequence-parallel", false},
    {"--world", true},      {"--repeat", true},         {"--seed", true},          {"--function", true},
    {"--weights", true},    {"--weight-names", true},   {"--max-file-size", true}, {"--inputs", true},
    {"--outputs", true},    {"--mesh", true},           {"--pipeline", true},      {"--numerics", true},
    {"--strategy", true},   {"--dump-args", true},      {"--backend", true},       {NULL, false}};

static const tpc__option_t* tpc__find_option(const char* name) {
  for (const tpc__option_t* o = kTpcRunOptions; o->name; ++o)
    if (!strcmp(name, o->name)) return o;
  return NULL;
}

// Edit distance between |a| and |b| (insertions, deletions, substitutions; short strings).
static size_t tpc__edit_distance(const char* a, const char* b) {
  size_t n = strlen(a), m = strlen(b);
  size_t* row = malloc((m + 1) * sizeof *row);
  if (!row) return (size_t)-1;
  for (size_t j = 0; j <= m; ++j) row[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  size_t d = row[m];
  free(row);
  return d;
}

// The known option closest to |name|, or NULL when none is within 3 edits.
static const char* tpc__closest_option(const char* name) {
  const char* best = NULL;
  size_t best_d = 4;
  for (const tpc__option_t* o = kTpcRunOptions; o->name; ++o) {
    size_t d = tpc__edit_distance(name, o->name);
    if (d < best_d) best_d = d, best = o->name;
  }
  return best;
}

static int tpc__parse_u64(const char* s, uint64_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || !end || *end || s[0] == '-') return 0;
  *out = v;
  return 1;
}

int tpc_run_parse_args(int argc, char** argv, tpc_run_options_t* o) {
  o->repeat = 1;
  o->max_file_size = 5000000000ull;
  char name[64];
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    // "--opt=value" is "--opt value".
    const char* eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    bool inline_value = eq != NULL;
    if (eq) {
      if ((size_t)(eq - a) >= sizeof name) {
        fprintf(stderr, "tpc-run: error: unknown option '%s' (see --help)\n", a);
        return -1;
      }
      memcpy(name, a, (size_t)(eq - a));
      name[eq - a] = '\0';
      a = name;
      v = eq + 1;
    }
    uint64_t n = 0;
    const tpc__option_t* opt = a[0] == '-' ? tpc__find_option(a) : NULL;
    if (a[0] == '-' && !opt) {
      const char* near = tpc__closest_option(a);
      if (near)
        fprintf(stderr, "tpc-run: error: unknown option '%s'; did you mean '%s'? (see --help)\n", a, near);
      else
        fprintf(stderr, "tpc-run: error: unknown option '%s' (see --help)\n", a);
      return -1;
    }
    if (opt && !opt->value && inline_value) {
      fprintf(stderr, "tpc-run: error: %s takes no value; got '%s'\n", a, argv[i]);
      return -1;
    }
    if (opt && opt->value && !v) {
      fprintf(stderr, "tpc-run: error: %s needs a value\n", a);
      return -1;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      tpc__usage(stdout);
      return 0;
    } else if (!strcmp(a, "--hash")) {
      o->hash = true;
      continue;
    } else if (!strcmp(a, "--stats")) {
      o->stats = true;
      continue;
    } else if (!strcmp(a, "--count-only")) {
      o->count_only = o->stats = true;
      continue;
    } else if (!strcmp(a, "--graph")) {
      o->graph = true;
      continue;
    } else if (!strcmp(a, "--share-gpus")) {
      o->share_gpus = true;
      continue;
    } else if (!strcmp(a, "--sequence-parallel")) {
      o->sequence_parallel = true;
      continue;
    }
    if (!strcmp(a, "--world")) {
      if (!tpc__parse_u64(v, &n) || n < 1 || n > TPC_RUN_MAX_RANKS) {
        fprintf(stderr, "tpc-run: error: --world must be 1..%d; got '%s'\n", TPC_RUN_MAX_RANKS, v);
        return -1;
      }
      o->world = (int)n;
    } else if (!strcmp(a, "--repeat")) {
      if (!tpc__parse_u64(v, &n) || n < 1 || n > 1000000) {
        fprintf(stderr, "tpc-run: error: --repeat must be 1..1000000; got '%s'\n", v);
        return -1;
      }
      o->repeat = (int)n;
    } else if (!strcmp(a, "--seed")) {
      if (!tpc__parse_u64(v, &o->seed)) {
        fprintf(stderr, "tpc-run: error: --seed must be a non-negative integer; got '%s'\n", v);
        return -1;
      }
      o->seed_given = true;
    } else if (!strcmp(a, "--function")) {
      o->function = v;
    } else if (!strcmp(a, "--weights")) {
      o->weights = v;
    } else if (!strcmp(a, "--weight-names")) {
      o->weight_names = v;
    } else if (!strcmp(a, "--max-file-size")) {
      if (!tpc__parse_u64(v, &o->max_file_size) || o->max_file_size < 1) {
        fprintf(stderr, "tpc-run: error: --max-file-size must be a positive number of bytes; got '%s'\n", v);
        return -1;
      }
    } else if (!strcmp(a, "--inputs")) {
      o->inputs = v;
    } else if (!strcmp(a, "--outputs")) {
      o->outputs = v;
    } else if (!strcmp(a, "--mesh")) {
      o->mesh = v;
    } else if (!strcmp(a, "--pipeline")) {
      o->pipeline = v;
    } else if (!strcmp(a, "--numerics") || !strcmp(a, "--strategy")) {
      *(a[2] == 'n' ? &o->numerics : &o->strategy) = v;  // tpc-compile checks the value
    } else if (!strcmp(a, "--dump-args")) {
      o->dump_args = v;
    } else if (!strcmp(a, "--backend")) {
      if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
        fprintf(stderr, "tpc-run: error: --backend must be cpu or cuda; got '%s'\n", v);
        return -1;
      }
      o->backend = v;
    } else {
      if (o->module_path) {
        fprintf(stderr, "tpc-run: error: more than one module ('%s' and '%s')\n", o->module_path, a);
        return -1;
      }
      o->module_path = a;
      continue;
    }
    if (!inline_value) ++i;  // the value was the next argument
  }
  if (!o->module_path) {
    fprintf(stderr, "tpc-run: error: no module given (see --help)\n");
    return -1;
  }
  size_t n = strlen(o->module_path);
  bool mlir = n > 5 && !strcmp(o->module_path + n - 5, ".mlir");
  bool compile_flags = o->mesh || o->pipeline || o->numerics || o->strategy || o->sequence_parallel;
  if (compile_flags && !mlir) {
    fprintf(stderr,
            "tpc-run: error: --mesh, --pipeline, --numerics, --strategy and --sequence-parallel apply to a .mlir "
            "input; '%s' is already compiled\n",
            o->module_path);
    return -1;
  }
  if (compile_flags && !o->pipeline) o->pipeline = "infer";
  if (o->graph && (!o->backend || strcmp(o->backend, "cuda") != 0)) {
    fprintf(stderr, "tpc-run: error: --graph captures CUDA graphs: it needs --backend cuda\n");
    return -1;
  }
  if (o->share_gpus && (!o->backend || strcmp(o->backend, "cuda") != 0)) {
    fprintf(stderr, "tpc-run: error: --share-gpus lets the ranks share GPUs: it needs --backend cuda\n");
    return -1;
  }
  if (o->count_only && (o->hash || o->outputs || o->dump_args || o->weights || o->inputs)) {
    fprintf(stderr, "tpc-run: error: --count-only computes nothing: it takes no --hash, --outputs, --dump-args, "
                    "--weights or --inputs\n");
    return -1;
  }
  return 1;
}
