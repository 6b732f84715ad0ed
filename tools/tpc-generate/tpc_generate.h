// tpc-generate's pieces beside main (tpc_generate.c): the command line (tpc_generate_args.c) and
// the requests, read from a JSONL file and written as JSONL (tpc_generate_requests.c).
#ifndef TPC_GENERATE_H_
#define TPC_GENERATE_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tprt_status.h"

typedef struct {
  const char* module_path;
  const char* prompts_path;  // --prompts: JSONL, one request per line
  const char* output_path;   // --output: JSONL, one result per request ("-": stdout)
  const char* json_path;     // --json: one timing record per step (JSONL)
  const char* mesh;
  const char* numerics;
  const char* backend;
  bool share_gpus;
  bool graph;  // --graph: the decode step replayed as a CUDA graph
  const char* weights;
  const char* weight_names;
  const char* inputs;
  // Request defaults (a prompt line may set its own).
  int64_t max_tokens;
  double temperature, top_p;
  int64_t top_k;
  uint64_t seed;
  int64_t eos;  // -1: none
} tpc_gen_options_t;

/// Parses argv into |o| (defaults first). 1: generate; 0: --help/--version printed; -1: an error.
int tpc_gen_parse_args(int argc, char** argv, tpc_gen_options_t* o);

/// One request: its prompt line's fields, then what was drawn.
typedef struct {
  int64_t index;  // its line's place among the requests (0-based)
  int line;       // its line number in the prompt file
  char* id;       // the line's "id" as JSON text, or NULL
  int32_t* tokens;  // the prompt, then the drawn tokens
  int64_t prompt_len, len;
  int64_t max_new;
  float temperature, top_p;
  int32_t top_k;
  uint64_t seed;
  int64_t eos;
  float* logprobs;  // per drawn token
  const char* finish;  // "stop" (eos), "length" (max_tokens) or "error"
  char error[256];
} tpc_request_t;

/// Reads every request of |path| (JSONL: {"tokens": [...], "id", "max_tokens", "temperature",
/// "top_k", "top_p", "seed", "eos"}), with |o|'s defaults; checks each against the vocabulary
/// |vocab| and the rows a sequence's KV cache holds (|cache| rows, prefill chunks of |chunk|). The
/// error names the file and line.
tprt_status_t tpc_gen_read_requests(const char* path, const tpc_gen_options_t* o, int64_t vocab, int64_t cache,
                                    int64_t chunk, tpc_request_t** out, int64_t* count) TPRT_MUST_USE_RESULT;
void tpc_gen_free_requests(tpc_request_t* r, int64_t count);

/// Writes a finished request as one JSON line: index, id, prompt_tokens, tokens (the drawn ones),
/// logprobs (f32, printed so that they read back to the same bits), finish_reason and error.
void tpc_gen_write_result(FILE* out, const tpc_request_t* r);

#endif  // TPC_GENERATE_H_
