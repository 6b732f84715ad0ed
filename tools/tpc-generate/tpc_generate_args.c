// tpc-generate's command line (see tpc_generate.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cli.h"
#include "tpc_generate.h"

enum {
  OPT_PROMPTS, OPT_OUTPUT, OPT_JSON, OPT_MESH, OPT_NUMERICS, OPT_BACKEND, OPT_SHARE_GPUS, OPT_WEIGHTS, OPT_WEIGHT_NAMES,
  OPT_INPUTS, OPT_TOKENIZER, OPT_GRAPH, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SEED, OPT_EOS,
};

static const tpc_cli_option_t kOptions[] = {
    {"prompts", 0, "FILE",
     "Requests, one JSON object per line: {\"tokens\": [ids...]} and optionally \"id\", \"max_tokens\",\n"
     "\"temperature\", \"top_k\", \"top_p\", \"seed\", \"eos\" (docs/generation.md); required",
     OPT_PROMPTS},
    {"output", 'o', "FILE", "One JSON line per finished request (default '-': stdout)", OPT_OUTPUT},
    {"json", 0, "FILE", "One JSON timing record per prefill or decode step (JSON Lines)", OPT_JSON},
    {"mesh", 0, "tp=2", "Partition the model over this mesh (default: one rank); its ranks are threads, or\n"
     "under torchrun or mpirun one process each",
     OPT_MESH},
    {"numerics", 0, "MODE", "fast, invariant or exact (default: the module's)", OPT_NUMERICS},
    {"backend", 0, "B", "cpu (default) or cuda (one GPU per rank; the model may be a .so from tpc-compile)",
     OPT_BACKEND},
    {"share-gpus", 0, NULL, "With --backend cuda: ranks share the GPUs (rank i on GPU i mod count; a test mode)",
     OPT_SHARE_GPUS},
    {"graph", 0, NULL,
     "(--backend cuda) run the first decode step, capture the second as a CUDA graph and replay it\n"
     "for every later one (the prefill steps run as they are)",
     OPT_GRAPH},
    {"weights", 0, "FILE", "Weights by name: a safetensors file or a Hugging Face index", OPT_WEIGHTS},
    {"weight-names", 0, "RULES", "Rules naming the --weights tensors of each argument (docs/io.md)", OPT_WEIGHT_NAMES},
    {"inputs", 0, "FILE",
     "Tables by name: the rotary tables rope_cos and rope_sin (tpc_torch.export --generate --weights DIR\n"
     "writes DIR/inputs.safetensors)",
     OPT_INPUTS},
    {"tokenizer", 0, "FILE",
     "tools/tokenize.py's PREFIX.tokenizer.json: lines may give \"text\" instead of \"tokens\", and each\n"
     "result has the drawn tokens' \"text\"",
     OPT_TOKENIZER},
    {"max-tokens", 0, "N", "Tokens to draw per request unless its line says (default 16)", OPT_MAX_TOKENS},
    {"temperature", 0, "T", "Sampling temperature; 0 is greedy (default 1)", OPT_TEMPERATURE},
    {"top-k", 0, "K", "Draw among the K largest logits; 0: all (default 0)", OPT_TOP_K},
    {"top-p", 0, "P", "Draw from the nucleus of mass P; 1: all (default 1)", OPT_TOP_P},
    {"seed", 0, "S", "Seed of the draws (default 0); a request's tokens depend on it, its id and positions only",
     OPT_SEED},
    {"eos", 0, "ID", "Stop a request when it draws this token (default: none)", OPT_EOS},
    {NULL, 0, NULL, NULL, 0},
};

static void tpc__more_help(FILE* out) {
  fprintf(out,
          "\nTHE MODULE:\n"
          "  tpc_torch.export MODEL --generate --kv-cache C --batch B --prefill-chunk P writes its @decode\n"
          "  (one token for each of B sequence slots) and @prefill (P prompt tokens of one sequence);\n"
          "  requests join free slots between decode steps and leave when they finish (docs/generation.md).\n"
          "  Progress and tokens/s go to stderr.\n");
}

static const tpc_cli_t kCli = {
    .tool = "tpc-generate",
    .overview = "Sample from a whole model: batched decoding over KV caches, with each token's log-probability",
    .usage = "<model.mlir | model.so> --prompts FILE [options]",
    .options = kOptions,
    .print_more_help = tpc__more_help,
};

int tpc_gen_parse_args(int argc, char** argv, tpc_gen_options_t* o) {
  memset(o, 0, sizeof *o);
  o->backend = "cpu";
  o->output_path = "-";
  o->max_tokens = 16;
  o->temperature = 1.0;
  o->top_p = 1.0;
  o->eos = -1;
  tpc_cli_state_t st = {0};
  int id;
  bool ok = true;
  int64_t n = 0;
  while (ok && (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END) {
    const char* v = st.value;
    switch (id) {
      case TPC_CLI_EXIT: return 0;
      case TPC_CLI_ERROR: return -1;
      case TPC_CLI_POSITIONAL:
        if (o->module_path) {
          fprintf(stderr, "tpc-generate: error: one module; got '%s' and '%s'\n", o->module_path, v);
          return -1;
        }
        o->module_path = v;
        break;
      case OPT_PROMPTS: o->prompts_path = v; break;
      case OPT_OUTPUT: o->output_path = v; break;
      case OPT_JSON: o->json_path = v; break;
      case OPT_MESH: o->mesh = v; break;
      case OPT_NUMERICS: o->numerics = v; break;
      case OPT_BACKEND: o->backend = v; break;
      case OPT_SHARE_GPUS: o->share_gpus = true; break;
      case OPT_GRAPH: o->graph = true; break;
      case OPT_WEIGHTS: o->weights = v; break;
      case OPT_WEIGHT_NAMES: o->weight_names = v; break;
      case OPT_INPUTS: o->inputs = v; break;
      case OPT_TOKENIZER: o->tokenizer = v; break;
      case OPT_MAX_TOKENS: ok = tpc_cli_count(&kCli, &st, 1, &o->max_tokens); break;
      case OPT_TEMPERATURE: ok = tpc_cli_number(&kCli, &st, 0.0, 1e30, &o->temperature); break;
      case OPT_TOP_K: ok = tpc_cli_count(&kCli, &st, 0, &o->top_k); break;
      case OPT_TOP_P:
        ok = tpc_cli_number(&kCli, &st, 0.0, 1.0, &o->top_p);
        if (ok && o->top_p == 0.0) {
          fprintf(stderr, "tpc-generate: error: --top-p must be in (0, 1]; got '%s'\n", v);
          ok = false;
        }
        break;
      case OPT_SEED: ok = tpc_cli_count(&kCli, &st, 0, &n), o->seed = (uint64_t)n; break;
      case OPT_EOS: ok = tpc_cli_count(&kCli, &st, 0, &o->eos); break;
      default: break;
    }
  }
  if (!ok) return -1;
  if (o->graph && strcmp(o->backend, "cuda") != 0) {
    fprintf(stderr, "tpc-generate: error: --graph needs --backend cuda\n");
    return -1;
  }
  if (!o->module_path || !o->prompts_path) {
    fprintf(stderr, "tpc-generate: error: give a module and --prompts FILE (tpc-generate --help)\n");
    return -1;
  }
  return 1;
}
