// Guarded parsing of textual IR (see tpc_parse.h).
#include "tpc_parse.h"

#include <string.h>

#include "mlir-c/Diagnostics.h"

static int tpc__is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int tpc__is_ident(char c) {
  return c == '_' || c == '$' || c == '.' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

// Whether |c| ends a `//` comment: MLIR's lexer ends one at a carriage return as well as at a
// line feed (a comment that ran on to the next '\n' here hid `index` from the guard).
static int tpc__ends_comment(char c) { return c == '\n' || c == '\r'; }

// Skips from |j| what MLIR's lexer skips between two tokens: whitespace, NUL bytes inside the
// buffer and `//` comments.
static size_t tpc__skip_blanks(const char* text, size_t length, size_t j) {
  while (j < length) {
    if (tpc__is_space(text[j]) || text[j] == '\0') {
      ++j;
    } else if (text[j] == '/' && j + 1 < length && text[j + 1] == '/') {
      while (j < length && !tpc__ends_comment(text[j])) ++j;
    } else {
      break;
    }
  }
  return j;
}

int tpc_find_parser_hazard(const char* text, size_t length, int* out_line, int* out_col) {
  int line = 1, col = 1, depth = 0;
  for (size_t i = 0; i < length; ++i) {
    char c = text[i];
    // Comments and string literals cannot hold the hazard; skip them so they never trigger it.
    if (c == '/' && i + 1 < length && text[i + 1] == '/') {
      while (i < length && !tpc__ends_comment(text[i])) ++i;
      ++line;
      col = 1;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      while (j < length && text[j] != '"' && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      col += (int)(j - i);
      i = j < length ? j : length;
      if (i < length && text[i] == '\n') {
        ++line;
        col = 0;
      }
      ++col;
      continue;
    }
    if (c == 'a' && length - i >= 5 && memcmp(text + i, "array", 5) == 0 &&
        (i == 0 || !tpc__is_ident(text[i - 1]))) {
      size_t j = tpc__skip_blanks(text, length, i + 5);
      if (j < length && text[j] == '<') {
        j = tpc__skip_blanks(text, length, j + 1);
        if (length - j >= 5 && memcmp(text + j, "index", 5) == 0) {
          *out_line = line;
          *out_col = col;
          return TPC_PARSER_HAZARD_INDEX_ARRAY;
        }
      }
    }
    // The nesting depth; the '>' of an arrow (->) closes nothing.
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > TPC_PARSE_MAX_NESTING) {
        *out_line = line;
        *out_col = col;
        return TPC_PARSER_HAZARD_NESTING;
      }
    } else if ((c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || text[i - 1] != '-'))) && depth > 0) {
      --depth;
    }
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return TPC_PARSER_HAZARD_NONE;
}

MlirModule tpc_parse_module(MlirContext ctx, const char* text, size_t length, const char* source_name) {
  int line = 0, col = 0;
  int hazard = tpc_find_parser_hazard(text, length, &line, &col);
  if (hazard != TPC_PARSER_HAZARD_NONE) {
    MlirLocation loc =
        mlirLocationFileLineColGet(ctx, mlirStringRefCreateFromCString(source_name), (unsigned)line, (unsigned)col);
    if (hazard == TPC_PARSER_HAZARD_INDEX_ARRAY)
      mlirEmitError(loc, "dense arrays of index type (array<index: ...>) are not supported: they crash MLIR 22's "
                         "parser; use array<i64: ...>");
    else
      mlirEmitError(loc, "brackets are nested more than 1000 deep: MLIR 22's parser would overflow its stack");
    MlirModule none = {NULL};
    return none;
  }
  return mlirModuleCreateParse(ctx, mlirStringRefCreate(text, length));
}
