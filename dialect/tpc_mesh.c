// --mesh specifications and their tp.mesh declaration (see tpc_mesh.h).
#define _POSIX_C_SOURCE 200809L  // strtok_r
#include "tpc_mesh.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "tp_ops.h"
#include "tpc_dialect.h"

static int tpc__axis_rank(const char* name) {
  // mb (micro-batches) sits between dp/ep and gtp/tp: the canonical group order of a reduction
  // over dp, mb, gtp and tp is then the token order the micro-batches take, and a micro-batch's
  // tokens are split over gtp, whose gradient reduce-scatter runs inside the micro-batch's call.
  static const char* const order[] = {"dp", "ep", "mb", "gtp", "tp"};
  for (int i = 0; i < 5; ++i)
    if (strcmp(name, order[i]) == 0) return i;
  return 5;
}

int tpc_mesh_spec_parse(const char* text, tpc_mesh_spec_t* out, char* error, size_t error_size) {
  memset(out, 0, sizeof *out);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  char* save = NULL;
  for (char* item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char* eq = strchr(item, '=');
    char* end = NULL;
    long long size = eq ? strtoll(eq + 1, &end, 10) : 0;
    if (!eq || eq == item || !end || *end || size < 1 || size > 1024 || eq - item >= 16) {
      snprintf(error, error_size, "--mesh expects axis=size pairs like tp=4,dp=2; got '%s'", item);
      return 0;
    }
    *eq = '\0';
    // The verifier's rule mesh.axes: an identifier (letters, digits, '_'; not a digit first).
    bool ident = isalpha((unsigned char)item[0]) || item[0] == '_';
    for (const char* ch = item + 1; ident && *ch; ++ch) ident = isalnum((unsigned char)*ch) || *ch == '_';
    if (!ident) {
      snprintf(error, error_size, "--mesh axis '%s' is not a name: letters, digits and '_', not starting with a digit",
               item);
      return 0;
    }
    for (int i = 0; i < out->num_axes; ++i)
      if (strcmp(out->axes[i], item) == 0) {
        snprintf(error, error_size, "--mesh names axis '%s' twice", item);
        return 0;
      }
    if (out->num_axes == TPC_MESH_MAX_AXES) {
      snprintf(error, error_size, "--mesh allows at most %d axes", TPC_MESH_MAX_AXES);
      return 0;
    }
    snprintf(out->axes[out->num_axes], sizeof out->axes[0], "%s", item);
    out->shape[out->num_axes++] = size;
  }
  if (out->num_axes == 0) {
    snprintf(error, error_size, "--mesh is empty; expected axis=size pairs like tp=4");
    return 0;
  }
  // Stable insertion sort into dp, ep, gtp, mb, tp, others order.
  for (int i = 1; i < out->num_axes; ++i)
    for (int j = i; j > 0 && tpc__axis_rank(out->axes[j]) < tpc__axis_rank(out->axes[j - 1]); --j) {
      char tmp[16];
      memcpy(tmp, out->axes[j], sizeof tmp);
      memcpy(out->axes[j], out->axes[j - 1], sizeof tmp);
      memcpy(out->axes[j - 1], tmp, sizeof tmp);
      int64_t s = out->shape[j];
      out->shape[j] = out->shape[j - 1];
      out->shape[j - 1] = s;
    }
  return 1;
}

MlirLogicalResult tpc_mesh_declare(MlirOperation module, const tpc_mesh_spec_t* spec) {
  MlirContext ctx = mlirOperationGetContext(module);
  MlirBlock body = mlirModuleGetBody(mlirModuleFromOperation(module));
  char text[512];
  int n = snprintf(text, sizeof text, "\"%s\"() {sym_name = \"%s\", axes = [", TPC_OP_NAME_MESH, TPC_MESH_DEFAULT_NAME);
  for (int i = 0; i < spec->num_axes; ++i) n += snprintf(text + n, sizeof text - (size_t)n, "%s\"%s\"", i ? ", " : "", spec->axes[i]);
  n += snprintf(text + n, sizeof text - (size_t)n, "], shape = array<i64: ");
  for (int i = 0; i < spec->num_axes; ++i)
    n += snprintf(text + n, sizeof text - (size_t)n, "%s%lld", i ? ", " : "", (long long)spec->shape[i]);
  snprintf(text + n, sizeof text - (size_t)n, ">} : () -> ()");
  MlirOperation mesh = mlirOperationCreateParse(ctx, mlirStringRefCreateFromCString(text),
                                                mlirStringRefCreateFromCString("--mesh"));
  if (mlirOperationIsNull(mesh)) return mlirLogicalResultFailure();
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!tpc_is_mesh(o)) continue;
    MlirAttribute name = tpc_mesh_get_sym_name_attr(o);
    if (!mlirAttributeIsNull(name) &&
        mlirStringRefEqual(mlirStringAttrGetValue(name), mlirStringRefCreateFromCString(TPC_MESH_DEFAULT_NAME))) {
      mlirOperationDestroy(o);
      break;
    }
  }
  mlirBlockInsertOwnedOperation(body, 0, mesh);
  return mlirLogicalResultSuccess();
}

int tpc_numerics_option_check(const char* flag, const char* value, char* error, size_t error_size) {
  bool numerics = strcmp(flag, "numerics") == 0;
  const char* const* allowed = numerics ? (const char* const[]){"fast", "invariant", "exact", NULL}
                                        : (const char* const[]){"canonical", "gather", NULL};
  for (int i = 0; value && allowed[i]; ++i)
    if (strcmp(value, allowed[i]) == 0) return 1;
  if (!value || !*value)
    snprintf(error, error_size, "--%s needs a value: %s", flag, numerics ? "fast, invariant or exact" : "canonical or gather");
  else
    snprintf(error, error_size, "--%s must be %s; got '%s'", flag,
             numerics ? "fast, invariant or exact" : "canonical or gather", value);
  return 0;
}

void tpc_module_set_numerics(MlirOperation module, const char* numerics, const char* strategy) {
  MlirContext ctx = mlirOperationGetContext(module);
  if (numerics)
    mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_NUMERICS),
                                    mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(numerics)));
  if (strategy)
    mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_STRATEGY),
                                    mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(strategy)));
}

int tpc_gtp_prefetch_option_check(const char* value, int64_t* out, char* error, size_t error_size) {
  char* end = NULL;
  long long v = value ? strtoll(value, &end, 10) : -1;
  if (!value || !*value || !end || *end || v < 0 || v > 1000000) {
    snprintf(error, error_size, "--gtp-prefetch must be a count of contractions >= 0 (0: start each gather just "
             "before its use); got '%s'", value ? value : "");
    return 0;
  }
  *out = v;
  return 1;
}

void tpc_module_set_gtp(MlirOperation module, int64_t prefetch, bool keep) {
  MlirContext ctx = mlirOperationGetContext(module);
  if (prefetch >= 0)
    mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_PREFETCH),
                                    mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), prefetch));
  if (keep)
    mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_KEEP),
                                    mlirBoolAttrGet(ctx, 1));
}

int tpc_gtp_wgrad_option_check(const char* value, char* error, size_t error_size) {
  if (value && (!strcmp(value, "scatter") || !strcmp(value, "gather") || !strcmp(value, "auto"))) return 1;
  snprintf(error, error_size,
           "--gtp-wgrad must be scatter (reduce-scatter each rank's partial), gather (contract every gtp rank's "
           "tokens for this rank's rows) or auto; got '%s'",
           value ? value : "");
  return 0;
}

void tpc_module_set_gtp_wgrad(MlirOperation module, const char* mode) {
  if (!mode) return;
  MlirContext ctx = mlirOperationGetContext(module);
  mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_WGRAD),
                                  mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(mode)));
}

static MlirWalkResult tpc__set_sp(MlirOperation op, void* user) {
  int kind = tpc_op_get_kind(op);
  int parallel = -1;
  if (kind == TPC_OP_LINEAR) parallel = (int)tpc_linear_get_parallel(op);
  if (kind == TPC_OP_GROUPED_LINEAR) parallel = (int)tpc_grouped_linear_get_parallel(op);
  // The vocabulary-parallel ends of a model: the embedding scatters its tokens over tp, the loss
  // gathers them.
  if (kind == TPC_OP_EMBEDDING) parallel = (int)tpc_embedding_get_parallel(op);
  if (kind == TPC_OP_CROSS_ENTROPY) parallel = (int)tpc_cross_entropy_get_parallel(op);
  if (parallel == TPC_PARALLEL_COLUMN || parallel == TPC_PARALLEL_ROW || parallel == TPC_PARALLEL_VOCAB) {
    mlirOperationSetAttributeByName(op, mlirStringRefCreateFromCString("sequence_parallel"),
                                    mlirBoolAttrGet(mlirOperationGetContext(op), 1));
    ++*(int*)user;
  }
  return MlirWalkResultAdvance;
}

int tpc_module_set_sequence_parallel(MlirOperation module) {
  int n = 0;
  mlirOperationWalk(module, tpc__set_sp, &n, MlirWalkPreOrder);
  return n;
}

int tpc_fused_norm_algorithm_option_parse(const char* value, char* error, size_t error_size) {
  // The option spells values with dashes, as other options do; the attribute with underscores.
  static const struct {
    const char* option;
    int algorithm;
  } kValues[] = {{"auto", TPC_ALGORITHM_AUTO},
                 {"one-shot", TPC_ALGORITHM_ONE_SHOT},
                 {"two-shot", TPC_ALGORITHM_TWO_SHOT},
                 {"composition", TPC_ALGORITHM_COMPOSITION}};
  for (size_t i = 0; value && i < sizeof kValues / sizeof kValues[0]; ++i)
    if (strcmp(value, kValues[i].option) == 0) return kValues[i].algorithm;
  snprintf(error, error_size, "--fused-norm-algorithm must be auto, one-shot, two-shot or composition; got '%s'",
           value ? value : "");
  return -1;
}

typedef struct {
  int algorithm;
  int changed;
} tpc__fused_norm_setting_t;

static MlirWalkResult tpc__set_fused_norm_algorithm(MlirOperation op, void* user) {
  tpc__fused_norm_setting_t* s = user;
  int kind = tpc_op_get_kind(op);
  int index = kind == TPC_OP_FUSED_ALLREDUCE_ADD_RMSNORM        ? TPC_FUSED_ALLREDUCE_ADD_RMSNORM_ATTR_ALGORITHM
              : kind == TPC_OP_FUSED_REDUCE_SCATTER_ADD_RMSNORM ? TPC_FUSED_REDUCE_SCATTER_ADD_RMSNORM_ATTR_ALGORITHM
              : kind == TPC_OP_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE
                  ? TPC_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_ATTR_ALGORITHM
                  : -1;
  if (index < 0 || tpc_op_get_enum(op, kind, index) != TPC_ALGORITHM_AUTO) return MlirWalkResultAdvance;
  // The reduce-scatter form has neither fused kernel (rule fused_norm.algorithm): it stays "auto".
  if (kind == TPC_OP_FUSED_REDUCE_SCATTER_ADD_RMSNORM &&
      (s->algorithm == TPC_ALGORITHM_ONE_SHOT || s->algorithm == TPC_ALGORITHM_TWO_SHOT))
    return MlirWalkResultAdvance;
  mlirOperationSetAttributeByName(
      op, mlirStringRefCreateFromCString(tpc_op_get_spec(kind)->attrs[index].name),
      mlirStringAttrGet(mlirOperationGetContext(op), mlirStringRefCreateFromCString(tpc_algorithm_names[s->algorithm])));
  ++s->changed;
  return MlirWalkResultAdvance;
}

int tpc_module_set_fused_norm_algorithm(MlirOperation module, int algorithm) {
  tpc__fused_norm_setting_t s = {algorithm, 0};
  if (algorithm == TPC_ALGORITHM_AUTO) return 0;
  mlirOperationWalk(module, tpc__set_fused_norm_algorithm, &s, MlirWalkPreOrder);
  return s.changed;
}
