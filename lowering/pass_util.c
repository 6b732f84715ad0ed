#define _POSIX_C_SOURCE 200809L  // getpid
// External pass glue shared by every tpc pass.
#include "pass_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "text_buffer.h"
#include "tpc_dialect.h"

typedef struct {
  tpc_pass_info_t* info;
  void* options;
} tpc__pass_state_t;

// The state is immutable and owned by the pass info table, so the pass's construct/destruct
// pair (run once per clone) has nothing to do and clones share it.
static void tpc__pass_construct(void* user) { (void)user; }
static void tpc__pass_destruct(void* user) { (void)user; }
static void* tpc__pass_clone(void* user) { return user; }

static void tpc__pass_run(MlirOperation op, MlirExternalPass pass, void* user) {
  tpc__pass_state_t* state = user;
  if (mlirLogicalResultIsFailure(state->info->run(op, state->options))) mlirExternalPassSignalFailure(pass);
}

// Each (info, options) pair needs state that outlives the pass. Tools create a handful of
// passes per run, so a small fixed pool avoids an ownership protocol for them.
#define TPC_MAX_PASS_INSTANCES 256
static tpc__pass_state_t tpc__pass_states[TPC_MAX_PASS_INSTANCES];
static int tpc__num_pass_states;

MlirPass tpc_pass_create(tpc_pass_info_t* info, void* options) {
  tpc__pass_state_t* state = NULL;
  for (int i = 0; i < tpc__num_pass_states && !state; ++i)
    if (tpc__pass_states[i].info == info && tpc__pass_states[i].options == options) state = &tpc__pass_states[i];
  if (!state) {
    if (tpc__num_pass_states == TPC_MAX_PASS_INSTANCES) {
      MlirPass none = {NULL};
      return none;
    }
    state = &tpc__pass_states[tpc__num_pass_states++];
    state->info = info;
    state->options = options;
  }
  MlirExternalPassCallbacks callbacks = {tpc__pass_construct, tpc__pass_destruct, NULL, tpc__pass_clone, tpc__pass_run};
  MlirStringRef arg = mlirStringRefCreateFromCString(info->argument);
  return mlirCreateExternalPass(mlirTypeIDCreate(info->type_id_storage), arg, arg,
                                mlirStringRefCreateFromCString(info->description), mlirStringRefCreate("", 0), 0,
                                NULL, callbacks, state);
}

// The first error MLIR reports while parsing a pass's generated text: its message and position.
typedef struct {
  char msg[200];
  size_t len;
  int line, col;
  bool have;
} tpc__parse_error_t;

static void tpc__parse_error_append(MlirStringRef s, void* user) {
  tpc__parse_error_t* p = user;
  size_t n = s.length < sizeof p->msg - 1 - p->len ? s.length : sizeof p->msg - 1 - p->len;
  memcpy(p->msg + p->len, s.data, n);
  p->len += n;
  p->msg[p->len] = '\0';
}

// Keeps the first error and swallows every diagnostic of the parse: their positions refer to the
// generated text, not to the user's file, so they are reported once, by tpc_replace_functions.
static MlirLogicalResult tpc__parse_error_capture(MlirDiagnostic d, void* user) {
  tpc__parse_error_t* p = user;
  if (!p->have && mlirDiagnosticGetSeverity(d) == MlirDiagnosticError) {
    p->have = true;
    mlirDiagnosticPrint(d, tpc__parse_error_append, p);
    MlirLocation loc = mlirDiagnosticGetLocation(d);
    if (mlirLocationIsAFileLineColRange(loc)) {
      p->line = mlirLocationFileLineColRangeGetStartLine(loc);
      p->col = mlirLocationFileLineColRangeGetStartColumn(loc);
    }
  }
  return mlirLogicalResultSuccess();
}

bool tpc_replace_functions(MlirOperation module, const char* funcs, bool and_meshes, const char* pass, const char* what) {
  tpc_text_t text = {0};
  tpc_text_printf(&text, "module {\n%s}\n", funcs ? funcs : "");
  // Fault injection for the test of this error path (test/e2e/internal-errors.test):
  // TPC_TEST_BREAK_IR=<pass> makes that pass's generated text unparsable.
  const char* brk = getenv("TPC_TEST_BREAK_IR");
  if (brk && strcmp(brk, pass) == 0) tpc_text_printf(&text, "this is not MLIR\n");
  MlirContext ctx = mlirOperationGetContext(module);
  tpc__parse_error_t perr = {{0}, 0, 0, 0, false};
  MlirDiagnosticHandlerID handler = mlirContextAttachDiagnosticHandler(ctx, tpc__parse_error_capture, &perr, NULL);
  MlirModule parsed = mlirModuleCreateParse(ctx, mlirStringRefCreate(text.data, text.len));
  mlirContextDetachDiagnosticHandler(ctx, handler);
  bool ok = !mlirModuleIsNull(parsed);
  if (!ok) {
    // One short error; the generated text goes to a file for a bug report (on stderr too with
    // TPC_PRINT_IR_ON_FAILURE=1), never to the terminal by default.
    char path[256];
    const char* dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/tpc-%s-%ld.mlir", dir && *dir ? dir : "/tmp", pass, (long)getpid());
    FILE* f = fopen(path, "w");
    if (f) {
      fwrite(text.data ? text.data : "", 1, text.len, f);
      fclose(f);
    }
    const char* print = getenv("TPC_PRINT_IR_ON_FAILURE");
    if (print && *print && strcmp(print, "0") != 0)
      fprintf(stderr, "%s: the %s that failed to parse:\n%s", pass, what, text.data ? text.data : "");
    char msg[768];
    snprintf(msg, sizeof msg, "%s: internal error: the %s does not parse: %s (line %d, column %d of %s; please report it)",
             pass, what, perr.have ? perr.msg : "no message", perr.line, perr.col, f ? path : "the text could not be saved");
    mlirEmitError(mlirOperationGetLocation(module), msg);
  } else {
    MlirBlock top = mlirModuleGetBody(mlirModuleFromOperation(module));
    MlirOperation o = mlirBlockGetFirstOperation(top);
    while (!mlirOperationIsNull(o)) {
      MlirOperation next = mlirOperationGetNextInBlock(o);
      if (mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(o)), mlirStringRefCreateFromCString("func.func")) ||
          (and_meshes && tpc_is_mesh(o)))
        mlirOperationDestroy(o);
      o = next;
    }
    MlirBlock src = mlirModuleGetBody(parsed);
    for (MlirOperation f = mlirBlockGetFirstOperation(src); !mlirOperationIsNull(f); f = mlirBlockGetFirstOperation(src)) {
      mlirOperationRemoveFromParent(f);
      mlirBlockAppendOwnedOperation(top, f);
    }
    mlirModuleDestroy(parsed);
  }
  tpc_text_free(&text);
  return ok;
}

int tpc_func_value_bound(MlirOperation func, int per_op) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(body)) return 64;
  int64_t n = 64 + (int64_t)mlirBlockGetNumArguments(body);
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    n += per_op + (int64_t)mlirOperationGetNumResults(op);
  return n > INT32_MAX / 2 ? INT32_MAX / 2 : (int)n;
}

MlirAttribute tpc_slot_dict(MlirOperation func, bool result, intptr_t i) {
  MlirAttribute all = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString(result ? "res_attrs" : "arg_attrs"));
  if (mlirAttributeIsNull(all) || !mlirAttributeIsAArray(all) || i >= mlirArrayAttrGetNumElements(all))
    return (MlirAttribute){NULL};
  return mlirArrayAttrGetElement(all, i);
}

MlirAttribute tpc_slot_attr(MlirOperation func, bool result, intptr_t i, const char* name) {
  MlirAttribute dict = tpc_slot_dict(func, result, i);
  return !mlirAttributeIsNull(dict) && mlirAttributeIsADictionary(dict)
             ? mlirDictionaryAttrGetElementByName(dict, mlirStringRefCreateFromCString(name))
             : (MlirAttribute){NULL};
}

MlirStringRef tpc_slot_tp_name(MlirOperation func, bool result, intptr_t i) {
  MlirAttribute n = tpc_slot_attr(func, result, i, TPC_ARG_ATTR_NAME);
  return !mlirAttributeIsNull(n) && mlirAttributeIsAString(n) ? mlirStringAttrGetValue(n) : (MlirStringRef){NULL, 0};
}

bool tpc_op_list_push(tpc_op_list_t* list, MlirOperation op) {
  if (list->count == list->cap) {
    intptr_t cap = list->cap ? 2 * list->cap : 64;
    MlirOperation* grown = realloc(list->ops, (size_t)cap * sizeof *grown);
    if (!grown) return false;
    list->ops = grown;
    list->cap = cap;
  }
  list->ops[list->count++] = op;
  return true;
}

bool tpc_op_list_has(const tpc_op_list_t* list, MlirOperation op) {
  for (intptr_t i = 0; i < list->count; ++i)
    if (list->ops[i].ptr == op.ptr) return true;
  return false;
}

typedef struct {
  bool (*keep)(int kind);
  tpc_op_list_t list;
  bool oom;
} tpc__collected_t;

static MlirWalkResult tpc__collect_op(MlirOperation op, void* user) {
  tpc__collected_t* c = user;
  int kind = tpc_op_get_kind(op);
  if (kind == TPC_OP_UNKNOWN || (c->keep && !c->keep(kind))) return MlirWalkResultAdvance;
  if (!tpc_op_list_push(&c->list, op)) {
    c->oom = true;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

MlirOperation* tpc_collect_ops(MlirOperation root, bool (*keep)(int kind), intptr_t* count) {
  tpc__collected_t c = {.keep = keep};
  mlirOperationWalk(root, tpc__collect_op, &c, MlirWalkPreOrder);
  if (c.oom) {
    free(c.list.ops);
    *count = -1;
    return NULL;
  }
  *count = c.list.count;
  return c.list.ops;
}
