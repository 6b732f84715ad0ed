// A growable NUL-terminated string for building IR text and JSON in passes.
#ifndef TPC_TEXT_BUFFER_H_
#define TPC_TEXT_BUFFER_H_

#include <stdbool.h>
#include <stddef.h>

#include "mlir-c/Support.h"

typedef struct tpc_text_t {
  char* data;
  size_t len, cap;
  bool oom;  // set once an allocation failed; later appends are dropped
} tpc_text_t;

/// Appends printf-formatted text.
void tpc_text_printf(tpc_text_t* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// Appends |s| as the body of an MLIR string literal (quotes, backslashes and non-printable bytes
/// become \XX escapes).
void tpc_text_append_mlir_escaped(tpc_text_t* t, const char* s, size_t n);

/// Appends `@"<prefix><name>"` to |t|: a reference to that symbol as MLIR text, quoted and escaped
/// so that any name (spaces, quotes, any byte) reads back as itself.
void tpc_text_symbol_ref(tpc_text_t* t, const char* prefix, MlirStringRef name);

/// Appends an attribute's name as the key of an MLIR attribute dictionary: bare when it is an
/// identifier ([A-Za-z_][A-Za-z0-9_$.]*), else quoted and escaped, so that any name reads back.
void tpc_text_attr_name(tpc_text_t* t, MlirStringRef name);

/// Appends a chunk (usable as an MlirStringCallback with the buffer as user data).
void tpc_text_append_ref(MlirStringRef s, void* user);

/// Frees the storage and resets |t|.
void tpc_text_free(tpc_text_t* t);

#endif  // TPC_TEXT_BUFFER_H_
