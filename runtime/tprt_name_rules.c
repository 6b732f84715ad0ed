// Tensor-name rules (tprt_name_rules.h): parsing, matching and substitution.
#define _POSIX_C_SOURCE 200809L

#include "tprt_name_rules.h"
#include "tprt_safetensors_impl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char* dest;
  int num_sources;
  char** sources;
} tprt__rule_t;

struct tprt_name_rules_t {
  int count;
  tprt__rule_t* rules;
};

void tprt_name_rules_free(tprt_name_rules_t* rules) {
  if (!rules) return;
  for (int r = 0; r < rules->count; ++r) {
    free(rules->rules[r].dest);
    for (int s = 0; s < rules->rules[r].num_sources; ++s) free(rules->rules[r].sources[s]);
    free(rules->rules[r].sources);
  }
  free(rules->rules);
  free(rules);
}

void tprt_name_rules_free_names(char** names) {
  for (char** n = names; n && *n; ++n) free(*n);
  free(names);
}

// A copy of [b, e) without surrounding blanks.
static char* tprt__rule_trim(const char* b, const char* e) {
  while (b < e && isspace((unsigned char)*b)) ++b;
  while (e > b && isspace((unsigned char)e[-1])) --e;
  char* s = malloc((size_t)(e - b) + 1);
  if (s) {
    memcpy(s, b, (size_t)(e - b));
    s[e - b] = '\0';
  }
  return s;
}

// Checks the placeholders of |pat|: "{name}" with a name of letters, digits and '_'. Returns
// NULL or a static description of what is wrong. |dest|: no two placeholders side by side.
static const char* tprt__rule_check(const char* pat, bool dest) {
  if (!*pat) return "an empty name";
  for (const char* p = pat; *p; ++p) {
    if (*p == '}') return "a '}' without its '{'";
    if (*p != '{') continue;
    const char* q = p + 1;
    while (isalnum((unsigned char)*q) || *q == '_') ++q;
    if (*q != '}' || q == p + 1) return "a '{' not followed by a name and '}'";
    if (dest && q[1] == '{') return "two placeholders side by side (which digits belong to which?)";
    p = q;
  }
  return NULL;
}

// Whether placeholder "{name}" (|len| bytes from |ph|) occurs in |pat|.
static bool tprt__rule_has(const char* pat, const char* ph, size_t len) {
  for (const char* p = strchr(pat, '{'); p; p = strchr(p + 1, '{'))
    if (strncmp(p, ph, len) == 0) return true;
  return false;
}

tprt_status_t tprt_name_rules_parse(const char* path, const char* text, tprt_name_rules_t** out) {
  *out = NULL;
  tprt_name_rules_t* rules = calloc(1, sizeof *rules);
  if (!rules) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
  int cap = 0, line = 0;
  tprt_status_t status = NULL;
  for (const char* p = text; *p && !status;) {
    const char* end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    ++line;
    const char* hash = memchr(p, '#', (size_t)(end - p));
    const char* stop = hash ? hash : end;
    const char* eq = memchr(p, '=', (size_t)(stop - p));
    char* whole = tprt__rule_trim(p, stop);
    if (!whole) {
      status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
      break;
    }
    bool blank = !*whole;
    free(whole);
    if (!blank && (!eq || memchr(eq + 1, '=', (size_t)(stop - eq - 1)))) {
      status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                                "%s:%d: a rule is '<argument> = <tensor> [+ <tensor> ...]' with one '='", path, line);
      break;
    }
    if (!blank) {
      if (rules->count == cap) {
        cap = cap ? 2 * cap : 16;
        tprt__rule_t* grown = realloc(rules->rules, (size_t)cap * sizeof *grown);
        if (!grown) {
          status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
          break;
        }
        rules->rules = grown;
      }
      tprt__rule_t* r = &rules->rules[rules->count++];
      memset(r, 0, sizeof *r);
      r->dest = tprt__rule_trim(p, eq);
      int n = 1;
      for (const char* q = eq + 1; q < stop; ++q) n += *q == '+';
      r->sources = calloc((size_t)n, sizeof *r->sources);
      if (!r->dest || !r->sources) {
        status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
        break;
      }
      const char* why = tprt__rule_check(r->dest, true);
      if (why) status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s:%d: the argument pattern has %s", path, line, why);
      for (const char* ph = strchr(r->dest, '{'); ph && !status; ph = strchr(ph + 1, '{')) {
        size_t len = (size_t)(strchr(ph, '}') - ph) + 1;
        if (tprt__rule_has(ph + 1, ph, len))
          status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s:%d: '%.*s' appears twice in '%s'", path, line,
                                    (int)len, ph, r->dest);
      }
      for (const char* q = eq + 1; !status && r->num_sources < n;) {
        const char* plus = memchr(q, '+', (size_t)(stop - q));
        const char* e = plus ? plus : stop;
        char* src = tprt__rule_trim(q, e);
        if (!src) {
          status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
          break;
        }
        r->sources[r->num_sources++] = src;
        if ((why = tprt__rule_check(src, false))) {
          status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s:%d: tensor pattern %d has %s", path, line,
                                    r->num_sources, why);
          break;
        }
        for (const char* ph = strchr(src, '{'); ph && !status; ph = strchr(ph + 1, '{')) {
          size_t len = (size_t)(strchr(ph, '}') - ph) + 1;
          if (!tprt__rule_has(r->dest, ph, len))
            status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s:%d: '%.*s' in '%s' does not appear in '%s'", path,
                                      line, (int)len, ph, src, r->dest);
        }
        q = e + 1;
      }
    }
    p = *end ? end + 1 : end;
  }
  if (status) {
    tprt_name_rules_free(rules);
    return status;
  }
  *out = rules;
  return NULL;
}

tprt_status_t tprt_name_rules_load(const char* path, tprt_name_rules_t** out) {
  *out = NULL;
  char* text = NULL;
  size_t size = 0;
  tprt_status_t status = tprt__read_file(path, &text, &size);
  if (status) return status;
  if (memchr(text, '\0', size)) {
    free(text);
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: not a text file (it holds a NUL byte)", path);
  }
  status = tprt_name_rules_parse(path, text, out);
  free(text);
  return status;
}

// Matches pattern |pat| against the whole of |s|; placeholders match one or more digits, whose
// spans are recorded in |caps| (placeholder start in the pattern, value start and length).
typedef struct {
  const char* ph;
  const char* value;
  size_t len;
} tprt__capture_t;

static bool tprt__rule_match(const char* pat, const char* s, tprt__capture_t* caps, int* n) {
  for (;;) {
    if (!*pat) return !*s;
    if (*pat != '{') {
      if (*pat != *s) return false;
      ++pat, ++s;
      continue;
    }
    const char* after = strchr(pat, '}') + 1;
    size_t digits = 0;
    while (isdigit((unsigned char)s[digits])) ++digits;
    for (size_t take = digits; take >= 1; --take) {  // longest first; backtrack on failure
      int mark = *n;
      caps[*n] = (tprt__capture_t){pat, s, take};
      ++*n;
      if (tprt__rule_match(after, s + take, caps, n)) return true;
      *n = mark;
    }
    return false;
  }
}

// |pat| with every placeholder replaced by the value captured for it.
static char* tprt__rule_subst(const char* pat, const tprt__capture_t* caps, int n) {
  size_t len = 0;
  for (int pass = 0; pass < 2; ++pass) {
    char* out = pass ? malloc(len + 1) : NULL;
    if (pass && !out) return NULL;
    size_t at = 0;
    for (const char* p = pat; *p;) {
      if (*p != '{') {
        if (out) out[at] = *p;
        ++at, ++p;
        continue;
      }
      size_t plen = (size_t)(strchr(p, '}') - p) + 1;
      for (int c = 0; c < n; ++c) {
        size_t clen = (size_t)(strchr(caps[c].ph, '}') - caps[c].ph) + 1;
        if (clen == plen && strncmp(caps[c].ph, p, plen) == 0) {
          if (out) memcpy(out + at, caps[c].value, caps[c].len);
          at += caps[c].len;
          break;
        }
      }
      p += plen;
    }
    if (out) {
      out[at] = '\0';
      return out;
    }
    len = at;
  }
  return NULL;
}

tprt_status_t tprt_name_rules_apply(const tprt_name_rules_t* rules, const char* name, int* out_count,
                                    char*** out_names) {
  *out_count = 0;
  *out_names = NULL;
  for (int r = 0; rules && r < rules->count; ++r) {
    const tprt__rule_t* rule = &rules->rules[r];
    size_t places = 1;
    for (const char* p = rule->dest; *p; ++p) places += *p == '{';
    tprt__capture_t* caps = calloc(places, sizeof *caps);
    if (!caps) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    int n = 0;
    const bool hit = tprt__rule_match(rule->dest, name, caps, &n);
    char** names = hit ? calloc((size_t)rule->num_sources + 1, sizeof *names) : NULL;
    for (int s = 0; names && s < rule->num_sources; ++s)
      if (!(names[s] = tprt__rule_subst(rule->sources[s], caps, n))) {
        tprt_name_rules_free_names(names);
        names = NULL;
      }
    free(caps);
    if (!hit) continue;
    if (!names) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    *out_names = names;
    *out_count = rule->num_sources;
    return NULL;
  }
  char** names = calloc(2, sizeof *names);
  if (!names || !(names[0] = strdup(name))) {
    free(names);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  }
  *out_names = names;
  *out_count = 1;
  return NULL;
}
