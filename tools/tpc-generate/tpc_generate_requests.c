// tpc-generate's requests: the prompt file (JSON Lines) read and checked, and the results written
// (see tpc_generate.h).
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tpc_generate.h"

static const char* const kKeys[] = {"tokens", "text", "id", "max_tokens", "temperature", "top_k", "top_p", "seed", "eos"};

// A number field of |obj| in [lo, hi] (an integer when |integer|), or |dflt| when absent.
static tprt_status_t tpc__field(const cJSON* obj, const char* key, double lo, double hi, bool integer, double dflt,
                                const char* where, double* out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = dflt;
  if (!v) return NULL;
  double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!(x >= lo && x <= hi) || (integer && x != floor(x)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: \"%s\" must be %s in [%g, %g]", where, key,
                            integer ? "an integer" : "a number", lo, hi);
  *out = x;
  return NULL;
}

static tprt_status_t tpc__parse_line(const char* text, const tpc_gen_options_t* o, const tpc_tokenizer_t* tok,
                                     int64_t vocab, int64_t cache, int64_t chunk, const char* where, tpc_request_t* r) {
  cJSON* obj = cJSON_Parse(text);
  if (!obj || !cJSON_IsObject(obj)) {
    cJSON_Delete(obj);
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: not a JSON object (one request per line: "
                            "{\"tokens\": [1, 2, 3]})", where);
  }
  tprt_status_t s = NULL;
  for (const cJSON* it = obj->child; it && !s; it = it->next) {
    bool known = false;
    for (size_t k = 0; k < sizeof kKeys / sizeof kKeys[0]; ++k) known = known || !strcmp(it->string, kKeys[k]);
    if (!known)
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unknown field \"%s\" (known: tokens, text, id, "
                           "max_tokens, temperature, top_k, top_p, seed, eos)", where, it->string);
  }
  const cJSON* toks = cJSON_GetObjectItemCaseSensitive(obj, "tokens");
  const cJSON* words = cJSON_GetObjectItemCaseSensitive(obj, "text");
  int32_t* encoded = NULL;
  int64_t n = 0;
  if (!s && words && toks)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: give \"tokens\" or \"text\", not both", where);
  else if (!s && words && !tok)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: a \"text\" prompt needs --tokenizer (tools/tokenize.py's "
                         "PREFIX.tokenizer.json)", where);
  else if (!s && words && !cJSON_IsString(words))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: \"text\" must be a string", where);
  else if (!s && words)
    s = tpc_tokenizer_encode(tok, words->valuestring, &encoded, &n);
  else if (!s && !cJSON_IsArray(toks))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: \"tokens\" must be an array of token ids%s", where,
                         tok ? " (or \"text\" a string)" : "");
  else if (!s)
    n = cJSON_GetArraySize(toks);
  if (!s && n == 0) s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: the prompt is empty", where);
  double max_new = 0, t = 0, k = 0, p = 0, seed = 0, eos = 0;
  if (!s) s = tpc__field(obj, "max_tokens", 1, 1e15, true, (double)o->max_tokens, where, &max_new);
  if (!s) s = tpc__field(obj, "temperature", 0, 1e30, false, o->temperature, where, &t);
  if (!s) s = tpc__field(obj, "top_k", 0, 2147483647.0, true, (double)o->top_k, where, &k);
  if (!s) s = tpc__field(obj, "top_p", 1e-30, 1, false, o->top_p, where, &p);
  if (!s) s = tpc__field(obj, "seed", 0, 9007199254740992.0, true, (double)o->seed, where, &seed);
  if (!s) s = tpc__field(obj, "eos", -1, 2147483647.0, true, (double)o->eos, where, &eos);
  if (!s) {
    // Rows of the sequence's cache: the prefill writes whole chunks up to the prompt's token L-2,
    // each decode step one row at its position; the last drawn token is never fed back.
    int64_t last_chunk = n >= 2 ? (n - 2) / chunk * chunk + chunk : 0;
    int64_t rows = n + (int64_t)max_new - 1;
    if (last_chunk > rows) rows = last_chunk;
    if (rows > cache)
      s = tprt_make_status(TPRT_STATUS_OUT_OF_RANGE,
                           "%s: a prompt of %lld tokens and %lld new ones needs %lld cache rows; the module's caches "
                           "hold %lld per sequence (export with a larger --kv-cache, or ask for fewer tokens)",
                           where, (long long)n, (long long)max_new, (long long)rows, (long long)cache);
  }
  if (!s) {
    r->tokens = malloc((size_t)(n + (int64_t)max_new) * sizeof *r->tokens);
    r->logprobs = malloc((size_t)max_new * sizeof *r->logprobs);
    if (!r->tokens || !r->logprobs) s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory", where);
  }
  for (int64_t i = 0; !s && encoded && i < n; ++i) {
    if (encoded[i] >= vocab)
      s = tprt_make_status(TPRT_STATUS_OUT_OF_RANGE, "%s: the text's token %lld is %d, outside the model's vocabulary "
                           "[0, %lld): the tokenizer is not the model's", where, (long long)i, encoded[i], (long long)vocab);
    else
      r->tokens[i] = encoded[i];
  }
  for (int64_t i = 0; !s && !encoded && i < n; ++i) {
    const cJSON* v = cJSON_GetArrayItem(toks, (int)i);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(x >= 0 && x < (double)vocab) || x != floor(x))
      s = tprt_make_status(TPRT_STATUS_OUT_OF_RANGE, "%s: token %lld of the prompt is %s, outside the vocabulary "
                           "[0, %lld)", where, (long long)i, cJSON_IsNumber(v) ? "" : "not a number",
                           (long long)vocab);
    if (s && cJSON_IsNumber(v)) {
      tprt_status_free(s);
      s = tprt_make_status(TPRT_STATUS_OUT_OF_RANGE, "%s: token %lld of the prompt is %.17g, outside the "
                           "vocabulary [0, %lld)", where, (long long)i, x, (long long)vocab);
    }
    if (!s) r->tokens[i] = (int32_t)x;
  }
  if (!s) {
    const cJSON* id = cJSON_GetObjectItemCaseSensitive(obj, "id");
    r->id = id ? cJSON_PrintUnformatted(id) : NULL;
    r->prompt_len = r->len = n;
    r->max_new = (int64_t)max_new;
    r->temperature = (float)t;
    r->top_k = (int32_t)k;
    r->top_p = (float)p;
    r->seed = (uint64_t)seed;
    r->eos = (int64_t)eos;
  }
  free(encoded);
  cJSON_Delete(obj);
  return s;
}

tprt_status_t tpc_gen_read_requests(const char* path, const tpc_gen_options_t* o, const tpc_tokenizer_t* tok,
                                    int64_t vocab, int64_t cache, int64_t chunk, tpc_request_t** out,
                                    int64_t* count) {
  FILE* f = strcmp(path, "-") ? fopen(path, "r") : stdin;
  if (!f) return tprt_make_status(TPRT_STATUS_NOT_FOUND, "--prompts %s: cannot open it", path);
  tpc_request_t* reqs = NULL;
  int64_t n = 0, cap = 0;
  char* line = NULL;
  size_t size = 0;
  ssize_t got;
  int lineno = 0;
  tprt_status_t s = NULL;
  while (!s && (got = getline(&line, &size, f)) >= 0) {
    ++lineno;
    size_t len = (size_t)got;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = 0;
    if (len == 0) continue;  // blank lines separate nothing
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      tpc_request_t* grown = realloc(reqs, (size_t)cap * sizeof *reqs);
      if (!grown) {
        s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "--prompts: out of memory at line %d", lineno);
        break;
      }
      reqs = grown;
    }
    memset(&reqs[n], 0, sizeof reqs[n]);
    char where[4096 + 32];
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    s = tpc__parse_line(line, o, tok, vocab, cache, chunk, where, &reqs[n]);
    reqs[n].index = n;
    reqs[n].line = lineno;
    ++n;
  }
  free(line);
  if (f != stdin) fclose(f);
  if (!s && n == 0) s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--prompts %s: no requests", path);
  if (s) {
    tpc_gen_free_requests(reqs, n);
    return s;
  }
  *out = reqs;
  *count = n;
  return NULL;
}

void tpc_gen_free_requests(tpc_request_t* r, int64_t count) {
  for (int64_t i = 0; r && i < count; ++i) {
    free(r[i].tokens);
    free(r[i].logprobs);
    free(r[i].id);
  }
  free(r);
}

// |s| with every invalid UTF-8 sequence replaced by U+FFFD (malloc'd).
static char* tpc__utf8(const char* s) {
  size_t n = strlen(s);
  unsigned char* o = malloc(3 * n + 1);
  if (!o) return NULL;
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    const unsigned char* u = (const unsigned char*)s + i;
    size_t len = u[0] < 0x80 ? 1 : (u[0] >> 5) == 6 ? 2 : (u[0] >> 4) == 14 ? 3 : (u[0] >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (u[k] & 0xC0) == 0x80;
    if (ok) {
      memcpy(o + w, u, len);
      w += len;
      i += len;
    } else {
      o[w++] = 0xEF, o[w++] = 0xBF, o[w++] = 0xBD;
      i += 1;
    }
  }
  o[w] = 0;
  return (char*)o;
}

void tpc_gen_write_result(FILE* out, const tpc_request_t* r, const tpc_tokenizer_t* tok) {
  fprintf(out, "{\"index\": %lld", (long long)r->index);
  if (r->id) fprintf(out, ", \"id\": %s", r->id);
  fprintf(out, ", \"prompt_tokens\": %lld, \"tokens\": [", (long long)r->prompt_len);
  for (int64_t i = r->prompt_len; i < r->len; ++i) fprintf(out, "%s%d", i > r->prompt_len ? ", " : "", r->tokens[i]);
  fprintf(out, "], \"logprobs\": [");
  // %.9g reads back to the same f32.
  for (int64_t i = 0; i < r->len - r->prompt_len; ++i) fprintf(out, "%s%.9g", i ? ", " : "", (double)r->logprobs[i]);
  fprintf(out, "], \"finish_reason\": \"%s\"", r->finish ? r->finish : "length");
  if (tok) {
    char* raw = tpc_tokenizer_decode(tok, r->tokens + r->prompt_len, r->len - r->prompt_len);
    char* clean = raw ? tpc__utf8(raw) : NULL;
    cJSON* t = cJSON_CreateString(clean ? clean : "");
    char* text = cJSON_PrintUnformatted(t);
    fprintf(out, ", \"text\": %s", text ? text : "\"\"");
    free(text);
    cJSON_Delete(t);
    free(clean);
    free(raw);
  }
  if (r->error[0]) {
    cJSON* e = cJSON_CreateString(r->error);
    char* text = cJSON_PrintUnformatted(e);
    fprintf(out, ", \"error\": %s", text ? text : "\"\"");
    free(text);
    cJSON_Delete(e);
  }
  fprintf(out, "}\n");
  fflush(out);
}
