// A diagnostic handler in the format compilers and editors understand.
#include "diagnostics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tpc__write(MlirStringRef s, void* user) { fwrite(s.data, 1, s.length, (FILE*)user); }

// Finds a file:line:col inside |loc|, looking through names, call sites and fused locations.
static int tpc__find_position(MlirLocation loc, MlirStringRef* file, int* line, int* col, int depth) {
  if (depth > 16 || mlirLocationIsNull(loc)) return 0;
  if (mlirLocationIsAFileLineColRange(loc)) {
    *file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    *line = mlirLocationFileLineColRangeGetStartLine(loc);
    *col = mlirLocationFileLineColRangeGetStartColumn(loc);
    return 1;
  }
  if (mlirLocationIsAName(loc)) return tpc__find_position(mlirLocationNameGetChildLoc(loc), file, line, col, depth + 1);
  if (mlirLocationIsACallSite(loc))
    return tpc__find_position(mlirLocationCallSiteGetCallee(loc), file, line, col, depth + 1) ||
           tpc__find_position(mlirLocationCallSiteGetCaller(loc), file, line, col, depth + 1);
  if (mlirLocationIsAFused(loc)) {
    intptr_t n = mlirLocationFusedGetNumLocations(loc);
    MlirLocation locs[16];
    if (n > 16) n = 16;
    mlirLocationFusedGetLocations(loc, locs);
    for (intptr_t i = 0; i < n; ++i)
      if (tpc__find_position(locs[i], file, line, col, depth + 1)) return 1;
  }
  return 0;
}

// A message collected in memory for a capture function.
typedef struct {
  char* data;
  size_t len, cap;
} tpc__message_t;

static void tpc__message_append(MlirStringRef s, void* user) {
  tpc__message_t* m = user;
  if (!m->data && m->cap) return;  // an allocation failed: keep what there is
  if (m->len + s.length + 1 > m->cap) {
    size_t cap = m->cap ? m->cap : 256;
    while (cap < m->len + s.length + 1) cap *= 2;
    char* d = realloc(m->data, cap);
    if (!d) {
      free(m->data);
      m->data = NULL;
      m->cap = 1;
      return;
    }
    m->data = d;
    m->cap = cap;
  }
  memcpy(m->data + m->len, s.data, s.length);
  m->len += s.length;
  m->data[m->len] = '\0';
}

static void tpc__print_one(MlirDiagnostic d, const char* severity, const tpc_diag_counts_t* counts) {
  MlirStringRef file = mlirStringRefCreate("", 0);
  int line = 0, col = 0;
  int found = tpc__find_position(mlirDiagnosticGetLocation(d), &file, &line, &col, 0);
  // mlirModuleCreateParse names its buffer "-"; the caller knows the real name.
  if (found && counts->default_file && (file.length == 0 || (file.length == 1 && file.data[0] == '-')))
    file = mlirStringRefCreateFromCString(counts->default_file);
  if (counts->capture) {
    tpc__message_t m = {NULL, 0, 0};
    mlirDiagnosticPrint(d, tpc__message_append, &m);
    char name[1024];
    snprintf(name, sizeof name, "%.*s", (int)file.length, file.data);
    counts->capture(counts->capture_user, severity, name, found ? line : 0, found ? col : 0,
                    m.data ? m.data : "");
    free(m.data);
    return;
  }
  if (found)
    fprintf(stderr, "%.*s:%d:%d: %s: ", (int)file.length, file.data, line, col, severity);
  else
    fprintf(stderr, "%s: ", severity);
  mlirDiagnosticPrint(d, tpc__write, stderr);
  fputc('\n', stderr);
}

// The first bytes of a diagnostic's message, to recognise it.
typedef struct {
  char text[32];
  size_t len;
} tpc__prefix_t;

static void tpc__prefix_append(MlirStringRef s, void* user) {
  tpc__prefix_t* p = user;
  size_t n = s.length < sizeof p->text - 1 - p->len ? s.length : sizeof p->text - 1 - p->len;
  memcpy(p->text + p->len, s.data, n);
  p->len += n;
}

static MlirLogicalResult tpc__handle(MlirDiagnostic d, void* user) {
  tpc_diag_counts_t* counts = user;
  MlirDiagnosticSeverity sev = mlirDiagnosticGetSeverity(d);
  const char* word = sev == MlirDiagnosticError     ? "error"
                     : sev == MlirDiagnosticWarning ? "warning"
                     : sev == MlirDiagnosticNote    ? "note"
                                                    : "remark";
  if (sev == MlirDiagnosticError) counts->errors++;
  if (sev == MlirDiagnosticWarning) counts->warnings++;
  tpc__print_one(d, word, counts);
  // MLIR's own verifier attaches a "see current operation" note that dumps the whole op in
  // generic form; it repeats what the message says, so only other notes are shown.
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) {
    MlirDiagnostic note = mlirDiagnosticGetNote(d, i);
    tpc__prefix_t p = {{0}, 0};
    mlirDiagnosticPrint(note, tpc__prefix_append, &p);
    if (strncmp(p.text, "see current operation", 21) != 0) tpc__print_one(note, "note", counts);
  }
  fflush(stderr);
  return mlirLogicalResultSuccess();
}

MlirDiagnosticHandlerID tpc_diagnostics_attach(MlirContext ctx, tpc_diag_counts_t* counts) {
  return mlirContextAttachDiagnosticHandler(ctx, tpc__handle, counts, NULL);
}
