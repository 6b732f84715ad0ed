// tpc-generate's pieces beside main (tpc_generate.c): the command line (tpc_generate_args.c), the
// requests, read from a JSONL file and written as JSONL (tpc_generate_requests.c), and the
// scheduler between steps (tpc_generate_schedule.c).
#ifndef TPC_GENERATE_H_
#define TPC_GENERATE_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tprt_backend.h"
#include "tprt_module.h"
#include "tprt_procs.h"
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "tprt_world.h"
#include "tpc_run_args.h"  // TPC_RUN_MAX_RANKS

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
  const char* tokenizer;  // --tokenizer: tools/tokenize.py's PREFIX.tokenizer.json, for "text" prompts
  // Request defaults (a prompt line may set its own).
  int64_t max_tokens;
  double temperature, top_p;
  int64_t top_k;
  uint64_t seed;
  int64_t eos;  // -1: none
} tpc_gen_options_t;

/// Parses argv into |o| (defaults first). 1: generate; 0: --help/--version printed; -1: an error.
int tpc_gen_parse_args(int argc, char** argv, tpc_gen_options_t* o);

/// tools/tokenize.py's byte-level BPE (tpc_generate_text.c): PREFIX.tokenizer.json's merges.
typedef struct tpc_tokenizer_t tpc_tokenizer_t;
tprt_status_t tpc_tokenizer_load(const char* path, tpc_tokenizer_t** out) TPRT_MUST_USE_RESULT;
void tpc_tokenizer_free(tpc_tokenizer_t* t);
int64_t tpc_tokenizer_vocab(const tpc_tokenizer_t* t);
/// |text|'s tokens, as tools/tokenize.py's encode makes them (malloc'd into *out).
tprt_status_t tpc_tokenizer_encode(const tpc_tokenizer_t* t, const char* text, int32_t** out,
                                   int64_t* count) TPRT_MUST_USE_RESULT;
/// The bytes of |count| tokens (ids outside the vocabulary skipped), NUL-terminated (malloc'd).
char* tpc_tokenizer_decode(const tpc_tokenizer_t* t, const int32_t* tokens, int64_t count);

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
/// With |tok| a line may give "text" instead of "tokens".
tprt_status_t tpc_gen_read_requests(const char* path, const tpc_gen_options_t* o, const tpc_tokenizer_t* tok,
                                    int64_t vocab, int64_t cache, int64_t chunk, tpc_request_t** out,
                                    int64_t* count) TPRT_MUST_USE_RESULT;
void tpc_gen_free_requests(tpc_request_t* r, int64_t count);

/// Writes a finished request as one JSON line: index, id, prompt_tokens, tokens (the drawn ones),
/// logprobs (f32, printed so that they read back to the same bits), finish_reason, error and, with
/// |tok|, text (the drawn tokens decoded; invalid UTF-8 replaced by U+FFFD).
void tpc_gen_write_result(FILE* out, const tpc_request_t* r, const tpc_tokenizer_t* tok);

//===----------------------------------------------------------------------===//
// The run: main sets it up (tpc_generate.c), the ranks run its steps, and between steps the
// scheduler (tpc_generate_schedule.c) takes their results and sets the next one
//===----------------------------------------------------------------------===//

// The per-step arguments of both functions, by name (docs/generation.md).
enum { R_IDS, R_POSITIONS, R_CACHE_LEN, R_SEED, R_REQUEST, R_TEMPERATURE, R_TOP_K, R_TOP_P, R_NUM };
enum { F_DECODE, F_PREFILL };
enum { K_STOP = -1, K_DECODE = F_DECODE, K_PREFILL = F_PREFILL };

typedef struct {
  const tpc_gen_options_t* o;
  const tprt_backend_t* backend;
  bool device;
  const tprt_module_t* module;
  const tprt_module_function_t* fn[2];
  tprt_world_t* world;
  tprt_procs_t* procs;  // a process world (torchrun, mpirun), else NULL
  int self;             // this process's rank in a process world; 0 in a world of threads
  int nranks;
  int64_t slots, cache, chunk, vocab;
  int role[2][R_NUM];       // per function and role: the argument's index, or -1
  int res_token, res_loss;  // @decode's results
  int* in_place[2];         // per result: the argument whose buffer it is (a cache), or -1
  int* cache_of;            // per @prefill argument: the @decode cache it views (one slot's rows), or -1
  int* shared;              // per @prefill argument: the @decode argument of the same name and bytes, or -1
  bool* is_cache;           // per @decode argument
  void** host_args[TPC_RUN_MAX_RANKS];  // @decode's weights and tables, per rank (host)
  // The step rank 0 prepares: its kind, @prefill's slot, the logical per-step inputs.
  int kind;
  int64_t slot;
  tprt_tensor_t in[2][R_NUM];
  void* token_host;  // rank 0's @decode results
  void* loss_host;
  // Scheduling (rank 0).
  tpc_request_t* reqs;
  tpc_tokenizer_t* tokenizer;
  int64_t nreqs, next_req, done, *slot_req;  // slot_req[s]: the request in slot s, or -1
  int64_t prefilling, prefill_at;            // the request being prefilled and its next chunk's start, or -1
  int64_t steps, prefill_tokens, decode_tokens;
  double prefill_s, decode_s, t_step, t0, last_report;
  FILE* out;
  FILE* json;
  tprt_status_t failure;
} tpc_gen_t;

/// Between steps: the results of the step just run into their requests (finished ones written),
/// waiting requests into free slots, then the next step's kind and inputs. Returns that kind.
int tpc__schedule(tpc_gen_t* g);
/// Progress on stderr (every 2 seconds, and at the end with |last|); rank 0's process only.
void tpc__progress(tpc_gen_t* g, bool last);

#endif  // TPC_GENERATE_H_
