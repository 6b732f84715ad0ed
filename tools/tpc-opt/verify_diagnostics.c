// tpc-opt --verify-diagnostics (see verify_diagnostics.h).
#define _POSIX_C_SOURCE 200809L  // strdup, strndup
#include "verify_diagnostics.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char severity[8];  // "error", "warning", "note", "remark"
  int line;          // the line the diagnostic must be on
  int comment_line;  // the line of the comment, for "was not produced"
  char* text;        // a substring of the message
  bool seen;
} tpc__expected_t;

typedef struct {
  char severity[8];
  int line, col;
  char* message;
} tpc__emitted_t;

struct tpc_diag_verifier_t {
  char* file;
  tpc__expected_t* expected;
  int num_expected, cap_expected;
  tpc__emitted_t* emitted;
  int num_emitted, cap_emitted;
  int malformed;  // expectations that could not be read (reported when created)
  bool oom;
};

static const char* const kSeverities[] = {"error", "warning", "note", "remark"};

// Grows |*array| of |size|-byte items to hold one more than |*count|.
static bool tpc__reserve(void** array, int* cap, int count, size_t size) {
  if (count < *cap) return true;
  int n = *cap ? *cap * 2 : 16;
  void* grown = realloc(*array, (size_t)n * size);
  if (!grown) return false;
  *array = grown;
  *cap = n;
  return true;
}

// Reads one expectation at |p| (just past "expected-"), on |line|. Returns the end of what it read.
static const char* tpc__read_expectation(tpc_diag_verifier_t* v, const char* p, const char* eol, int line) {
  const char* severity = NULL;
  for (size_t i = 0; i < sizeof kSeverities / sizeof kSeverities[0]; ++i) {
    size_t n = strlen(kSeverities[i]);
    if ((size_t)(eol - p) >= n && !strncmp(p, kSeverities[i], n)) {
      severity = kSeverities[i];
      p += n;
      break;
    }
  }
  if (!severity) return p;  // "expected-" in some other word
  int target = line;
  if (*p == '@') {
    ++p;
    char* end = NULL;
    if (!strncmp(p, "above", 5)) {
      target = line - 1, p += 5;
    } else if (!strncmp(p, "below", 5)) {
      target = line + 1, p += 5;
    } else if (!strncmp(p, "unknown", 7)) {
      target = 0, p += 7;  // a diagnostic without a position (the implicit module's, say)
    } else if (*p == '+' || *p == '-' || (*p >= '0' && *p <= '9')) {
      long n = strtol(p, &end, 10);
      target = *p == '+' || *p == '-' ? line + (int)n : (int)n;
      p = end;
    } else {
      fprintf(stderr, "%s:%d: error: expected-%s@ needs +N, -N, above, below, unknown or a line number\n", v->file, line,
              severity);
      ++v->malformed;
      return p;
    }
  }
  while (p < eol && (*p == ' ' || *p == '\t')) ++p;
  const char* close = p + 2 <= eol && !strncmp(p, "{{", 2) ? strstr(p + 2, "}}") : NULL;
  if (!close || close > eol) {
    fprintf(stderr, "%s:%d: error: expected-%s needs its message in {{...}} on the same line\n", v->file, line,
            severity);
    ++v->malformed;
    return p;
  }
  if (!tpc__reserve((void**)&v->expected, &v->cap_expected, v->num_expected, sizeof *v->expected)) {
    v->oom = true;
    return eol;
  }
  tpc__expected_t* e = &v->expected[v->num_expected];
  snprintf(e->severity, sizeof e->severity, "%s", severity);
  e->line = target;
  e->comment_line = line;
  e->seen = false;
  e->text = strndup(p + 2, (size_t)(close - p - 2));
  if (!e->text) {
    v->oom = true;
    return eol;
  }
  ++v->num_expected;
  return close + 2;
}

tpc_diag_verifier_t* tpc_diag_verifier_create(const char* file, const char* text, size_t length, int first_line) {
  tpc_diag_verifier_t* v = calloc(1, sizeof *v);
  if (!v || !(v->file = strdup(file))) {
    free(v);
    return NULL;
  }
  const char* end = text + length;
  int line = first_line;
  for (const char* p = text; p < end; ++line) {
    const char* eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    for (const char* q = p; q < eol && !v->oom;) {
      const char* hit = memchr(q, 'e', (size_t)(eol - q));
      if (!hit) break;
      q = (size_t)(eol - hit) > 9 && !strncmp(hit, "expected-", 9) ? tpc__read_expectation(v, hit + 9, eol, line)
                                                                   : hit + 1;
    }
    p = eol + 1;
  }
  if (v->oom) {
    tpc_diag_verifier_destroy(v);
    return NULL;
  }
  return v;
}

void tpc_diag_verifier_capture(void* user, const char* severity, const char* file, int line, int col,
                               const char* message) {
  tpc_diag_verifier_t* v = user;
  if (!tpc__reserve((void**)&v->emitted, &v->cap_emitted, v->num_emitted, sizeof *v->emitted)) {
    v->oom = true;
    return;
  }
  tpc__emitted_t* e = &v->emitted[v->num_emitted];
  snprintf(e->severity, sizeof e->severity, "%s", severity);
  e->line = line;
  e->col = col;
  e->message = strdup(message);
  if (!e->message) {
    v->oom = true;
    return;
  }
  ++v->num_emitted;
  (void)file;  // expectations are in the file being checked; locations elsewhere cannot match by line
}

int tpc_diag_verifier_finish(tpc_diag_verifier_t* v) {
  if (v->oom) {
    fprintf(stderr, "%s: error: out of memory while verifying diagnostics\n", v->file);
    return 1;
  }
  int problems = v->malformed;
  for (int i = 0; i < v->num_emitted; ++i) {
    tpc__emitted_t* d = &v->emitted[i];
    tpc__expected_t* match = NULL;
    for (int j = 0; j < v->num_expected && !match; ++j) {
      tpc__expected_t* e = &v->expected[j];
      if (!e->seen && e->line == d->line && !strcmp(e->severity, d->severity) && strstr(d->message, e->text))
        match = e;
    }
    if (match) {
      match->seen = true;
    } else {
      ++problems;
      if (d->line > 0)
        fprintf(stderr, "%s:%d:%d: error: unexpected %s: %s\n", v->file, d->line, d->col, d->severity, d->message);
      else
        fprintf(stderr, "%s: error: unexpected %s: %s\n", v->file, d->severity, d->message);
    }
  }
  for (int j = 0; j < v->num_expected; ++j) {
    tpc__expected_t* e = &v->expected[j];
    if (e->seen) continue;
    ++problems;
    fprintf(stderr, "%s:%d: error: expected %s \"%s\" on line %d was not produced\n", v->file, e->comment_line,
            e->severity, e->text, e->line);
  }
  return problems;
}

void tpc_diag_verifier_destroy(tpc_diag_verifier_t* v) {
  if (!v) return;
  for (int i = 0; i < v->num_expected; ++i) free(v->expected[i].text);
  for (int i = 0; i < v->num_emitted; ++i) free(v->emitted[i].message);
  free(v->expected);
  free(v->emitted);
  free(v->file);
  free(v);
}
