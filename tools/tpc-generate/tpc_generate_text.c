// Text prompts (see tpc_generate.h): the byte-level BPE of tools/tokenize.py, read from its
// PREFIX.tokenizer.json. Encoding cuts the text into pieces as tokenize.py's PIECE pattern does
// (` ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+`, the first alternative that matches, each as long as
// it goes; whitespace is ASCII's, and every byte of a multi-byte character is a non-space,
// non-alphanumeric one), then merges each piece's bytes lowest rank first, as tokenize.py's encode.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tpc_generate.h"

struct tpc_tokenizer_t {
  int64_t merges;    // tokens 256 .. 256 + merges - 1
  int32_t (*pair)[2];  // token 256 + i is pair[i][0] followed by pair[i][1]
  int32_t* bytes_len;  // per token: its bytes' length
};

tprt_status_t tpc_tokenizer_load(const char* path, tpc_tokenizer_t** out) {
  FILE* f = fopen(path, "rb");
  if (!f) return tprt_make_status(TPRT_STATUS_NOT_FOUND, "--tokenizer %s: cannot open it", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = malloc((size_t)size + 1);
  size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
  fclose(f);
  if (!text || got != (size_t)size) {
    free(text);
    return tprt_make_status(TPRT_STATUS_INTERNAL, "--tokenizer %s: cannot read it", path);
  }
  text[size] = 0;
  cJSON* root = cJSON_Parse(text);
  free(text);
  const cJSON* merges = root ? cJSON_GetObjectItemCaseSensitive(root, "merges") : NULL;
  if (!cJSON_IsArray(merges)) {
    bool hf = root && cJSON_GetObjectItemCaseSensitive(root, "hf");
    cJSON_Delete(root);
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--tokenizer %s: %s", path,
                            hf ? "a Hugging Face tokenizer; give token ids, or use python -m tpc_torch.generate"
                               : "not a tools/tokenize.py tokenizer (no \"merges\")");
  }
  tpc_tokenizer_t* t = calloc(1, sizeof *t);
  int64_t n = cJSON_GetArraySize(merges);
  if (t) t->pair = malloc((size_t)(n + 1) * sizeof *t->pair), t->bytes_len = malloc((size_t)(256 + n) * sizeof(int32_t));
  if (!t || !t->pair || !t->bytes_len) {
    cJSON_Delete(root);
    tpc_tokenizer_free(t);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "--tokenizer: out of memory");
  }
  t->merges = n;
  for (int i = 0; i < 256; ++i) t->bytes_len[i] = 1;
  for (int64_t i = 0; i < n; ++i) {
    const cJSON* m = cJSON_GetArrayItem(merges, (int)i);
    const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valueint < 0 || b->valueint < 0 || a->valueint >= 256 + i ||
        b->valueint >= 256 + i) {
      cJSON_Delete(root);
      tpc_tokenizer_free(t);
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--tokenizer %s: merge %lld is not a pair of earlier tokens",
                              path, (long long)i);
    }
    t->pair[i][0] = a->valueint;
    t->pair[i][1] = b->valueint;
    t->bytes_len[256 + i] = t->bytes_len[a->valueint] + t->bytes_len[b->valueint];
  }
  cJSON_Delete(root);
  *out = t;
  return NULL;
}

void tpc_tokenizer_free(tpc_tokenizer_t* t) {
  if (!t) return;
  free(t->pair);
  free(t->bytes_len);
  free(t);
}

int64_t tpc_tokenizer_vocab(const tpc_tokenizer_t* t) { return 256 + t->merges; }

static bool tpc__space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }
static bool tpc__alpha(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static bool tpc__digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool tpc__other(unsigned char c) { return !tpc__space(c) && !tpc__alpha(c) && !tpc__digit(c); }

// The length of the piece at s[0..n): PIECE's first matching alternative.
static size_t tpc__piece(const unsigned char* s, size_t n) {
  bool (*const cls[3])(unsigned char) = {tpc__alpha, tpc__digit, tpc__other};
  for (int k = 0; k < 3; ++k) {
    size_t at = s[0] == ' ' && n > 1 && cls[k](s[1]) ? 1 : 0;  // the optional space, when the class follows
    if (!cls[k](s[at])) continue;
    size_t e = at;
    while (e < n && cls[k](s[e])) ++e;
    return e;
  }
  size_t e = 0;
  while (e < n && tpc__space(s[e])) ++e;
  return e ? e : 1;
}

tprt_status_t tpc_tokenizer_encode(const tpc_tokenizer_t* t, const char* text, int32_t** out, int64_t* count) {
  const unsigned char* s = (const unsigned char*)text;
  size_t n = strlen(text);
  int32_t* tok = malloc((n + 1) * sizeof *tok);
  if (!tok) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  int64_t m = 0;
  for (size_t i = 0; i < n;) {
    size_t len = tpc__piece(s + i, n - i);
    int32_t* p = tok + m;  // the piece's tokens, merged in place
    int64_t k = (int64_t)len;
    for (size_t j = 0; j < len; ++j) p[j] = s[i + j];
    while (k > 1) {
      int64_t best = -1;  // the lowest-ranked adjacent pair, the first of equal ones
      for (int64_t j = 0; j + 1 < k; ++j)
        for (int64_t r = 0; r < t->merges && (best < 0 || r < best); ++r)
          if (t->pair[r][0] == p[j] && t->pair[r][1] == p[j + 1]) {
            best = r;
            break;
          }
      if (best < 0) break;
      int64_t w = 0;
      for (int64_t j = 0; j < k;) {
        if (j + 1 < k && p[j] == t->pair[best][0] && p[j + 1] == t->pair[best][1]) {
          p[w++] = (int32_t)(256 + best);
          j += 2;
        } else {
          p[w++] = p[j++];
        }
      }
      k = w;
    }
    m += k;
    i += len;
  }
  *out = tok;
  *count = m;
  return NULL;
}

static void tpc__bytes(const tpc_tokenizer_t* t, int32_t id, unsigned char* out, size_t* n) {
  if (id < 256) {
    out[(*n)++] = (unsigned char)id;
    return;
  }
  tpc__bytes(t, t->pair[id - 256][0], out, n);
  tpc__bytes(t, t->pair[id - 256][1], out, n);
}

char* tpc_tokenizer_decode(const tpc_tokenizer_t* t, const int32_t* tokens, int64_t count) {
  size_t total = 0;
  for (int64_t i = 0; i < count; ++i)
    total += tokens[i] >= 0 && tokens[i] < 256 + t->merges ? (size_t)t->bytes_len[tokens[i]] : 0;
  unsigned char* b = malloc(total + 1);
  if (!b) return NULL;
  size_t n = 0;
  for (int64_t i = 0; i < count; ++i)
    if (tokens[i] >= 0 && tokens[i] < 256 + t->merges) tpc__bytes(t, tokens[i], b, &n);
  b[n] = 0;
  return (char*)b;
}
