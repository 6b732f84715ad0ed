// External pass glue shared by every tpc pass.
#include "pass_util.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

bool tpc_replace_functions(MlirOperation module, const char* funcs, bool and_meshes, const char* pass, const char* what) {
  tpc_text_t text = {0};
  tpc_text_printf(&text, "module {\n%s}\n", funcs ? funcs : "");
  MlirModule parsed = mlirModuleCreateParse(mlirOperationGetContext(module), mlirStringRefCreate(text.data, text.len));
  bool ok = !mlirModuleIsNull(parsed);
  if (!ok) {
    // The diagnostics point into this text; print it so the bug can be reported.
    fprintf(stderr, "%s: the %s that failed to parse:\n%s", pass, what, text.data ? text.data : "");
    char msg[256];
    snprintf(msg, sizeof msg, "%s: internal error: the %s does not parse", pass, what);
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
