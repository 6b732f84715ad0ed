// Status records (see tprt_status.h).
#include "tprt_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tprt_status_record_t {
  tprt_status_code_t code;
  const char* file;
  int line;
  char* message;
};

// Returned when even the record cannot be allocated: a failure must never read as success.
static struct tprt_status_record_t tprt__oom_status = {TPRT_STATUS_RESOURCE_EXHAUSTED, __FILE__, __LINE__,
                                                       (char*)"out of memory while reporting an error"};

static char* tprt__vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) n = 0;
  char* s = malloc((size_t)n + 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

tprt_status_t tprt__make_status(const char* file, int line, tprt_status_code_t code, const char* fmt, ...) {
  struct tprt_status_record_t* s = malloc(sizeof *s);
  if (!s) return &tprt__oom_status;
  va_list ap;
  va_start(ap, fmt);
  s->message = tprt__vformat(fmt, ap);
  va_end(ap);
  if (!s->message) {
    free(s);
    return &tprt__oom_status;
  }
  s->code = code == TPRT_STATUS_OK ? TPRT_STATUS_INTERNAL : code;
  s->file = file;
  s->line = line;
  return s;
}

tprt_status_t tprt_status_annotate(tprt_status_t status, const char* fmt, ...) {
  if (!status || status == &tprt__oom_status) return status;
  va_list ap;
  va_start(ap, fmt);
  char* context = tprt__vformat(fmt, ap);
  va_end(ap);
  if (!context) return status;
  if (context[0] == '\0') {
    free(context);
    return status;
  }
  size_t n = strlen(context) + 2 + strlen(status->message) + 1;
  char* joined = malloc(n);
  if (joined) {
    snprintf(joined, n, "%s: %s", context, status->message);
    free(status->message);
    status->message = joined;
  }
  free(context);
  return status;
}

tprt_status_code_t tprt_status_code(tprt_status_t status) { return status ? status->code : TPRT_STATUS_OK; }

const char* tprt_status_message(tprt_status_t status) { return status ? status->message : ""; }

const char* tprt_status_code_string(tprt_status_code_t code) {
  switch (code) {
#define TPRT__CODE_CASE(name, text) \
  case TPRT_STATUS_##name:          \
    return text;
    TPRT_STATUS_CODES(TPRT__CODE_CASE)
#undef TPRT__CODE_CASE
  }
  return "unknown";
}

const char* tprt_status_format(tprt_status_t status, char* buf, size_t size) {
  if (!status)
    snprintf(buf, size, "ok");
  else
    snprintf(buf, size, "%s:%d: %s: %s", status->file, status->line, tprt_status_code_string(status->code),
             status->message);
  return buf;
}

void tprt_status_free(tprt_status_t status) {
  if (!status || status == &tprt__oom_status) return;
  free(status->message);
  free(status);
}

tprt_status_t tprt_status_join(tprt_status_t first, tprt_status_t second) {
  if (first) {
    tprt_status_free(second);
    return first;
  }
  return second;
}
