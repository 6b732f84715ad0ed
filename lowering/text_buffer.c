// Growable text buffer (see text_buffer.h).
#include "text_buffer.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool tpc__text_reserve(tpc_text_t* t, size_t extra) {
  if (t->oom) return false;
  if (t->len + extra + 1 <= t->cap) return true;
  size_t cap = t->cap ? t->cap : 1024;
  while (cap < t->len + extra + 1) cap *= 2;
  char* d = realloc(t->data, cap);
  if (!d) {
    t->oom = true;
    return false;
  }
  t->data = d;
  t->cap = cap;
  return true;
}

void tpc_text_printf(tpc_text_t* t, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n > 0 && tpc__text_reserve(t, (size_t)n)) {
    vsnprintf(t->data + t->len, (size_t)n + 1, fmt, ap);
    t->len += (size_t)n;
  }
  va_end(ap);
}

void tpc_text_append_mlir_escaped(tpc_text_t* t, const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
      tpc_text_printf(t, "%c", c);
    else
      tpc_text_printf(t, "\\%02X", c);
  }
}

void tpc_text_append_ref(MlirStringRef s, void* user) {
  tpc_text_t* t = user;
  if (s.length == 0 || !tpc__text_reserve(t, s.length)) return;  // an empty ref may have no data
  memcpy(t->data + t->len, s.data, s.length);
  t->len += s.length;
  t->data[t->len] = '\0';
}

void tpc_text_free(tpc_text_t* t) {
  free(t->data);
  memset(t, 0, sizeof *t);
}

void tpc_text_attr_name(tpc_text_t* t, MlirStringRef name) {
  bool bare = name.length > 0 && (isalpha((unsigned char)name.data[0]) || name.data[0] == '_');
  for (size_t i = 1; bare && i < name.length; ++i) {
    unsigned char c = (unsigned char)name.data[i];
    bare = isalnum(c) || c == '_' || c == '$' || c == '.';
  }
  if (bare) {
    tpc_text_printf(t, "%.*s", (int)name.length, name.data);
    return;
  }
  tpc_text_printf(t, "\"");
  tpc_text_append_mlir_escaped(t, name.data, name.length);
  tpc_text_printf(t, "\"");
}

void tpc_text_symbol_ref(tpc_text_t* t, const char* prefix, MlirStringRef name) {
  tpc_text_printf(t, "@\"");
  tpc_text_append_mlir_escaped(t, prefix, strlen(prefix));
  tpc_text_append_mlir_escaped(t, name.data, name.length);
  tpc_text_printf(t, "\"");
}
