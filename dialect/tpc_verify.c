// The tp verifier: rules IRDL cannot express. This file holds the walk, the rules every tp op
// shares (static shapes, element types, optional attributes), the mesh and the module
// attributes; the op families are in tpc_verify_{compute,quant,collective,grad,attention}.c.
#include "tpc_verify.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "tpc_dialect.h"
#include "tpc_mesh.h"
#include "tpc_verify_util.h"

//===----------------------------------------------------------------------===//
// Rules shared by every tp op
//===----------------------------------------------------------------------===//

// The element types of DESIGN.md §3.
static bool tpc__is_allowed_element(MlirType t) {
  return mlirTypeIsABF16(t) || mlirTypeIsAF16(t) || mlirTypeIsAF32(t) || mlirTypeIsAFloat8E4M3FN(t) ||
         mlirTypeIsAFloat8E5M2(t) || mlirTypeIsAFloat8E8M0FNU(t) || mlirTypeIsAFloat4E2M1FN(t) || tpc__is_i32(t) ||
         tpc__is_i64(t);
}

static MlirLogicalResult tpc__verify_tensor_type(MlirOperation op, MlirType t, const char* role, const char* name) {
  char ts[256];
  if (!mlirTypeIsARankedTensor(t)) return mlirLogicalResultSuccess();  // IRDL checks the type base
  if (!mlirShapedTypeHasStaticShape(t))
    return tpc__rule_error(op, "tensor.static", "%s '%s' has type %s; tp ops need static shapes", role, name,
                           tpc__type_str(t, ts, sizeof ts));
  if (mlirShapedTypeGetRank(t) > TPC_MAX_RANK)
    return tpc__rule_error(op, "tensor.static", "%s '%s' has rank %lld; tp ops support rank <= %d", role, name,
                           (long long)mlirShapedTypeGetRank(t), TPC_MAX_RANK);
  if (!tpc__is_allowed_element(mlirShapedTypeGetElementType(t)))
    return tpc__rule_error(op, "tensor.element-type",
                           "%s '%s' has type %s; element types are bf16, f16, f32, f8E4M3FN, f8E5M2, "
                           "f8E8M0FNU, f4E2M1FN, i32, i64",
                           role, name, tpc__type_str(t, ts, sizeof ts));
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__verify_slots(MlirOperation op, int kind) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  bool ok = true;
  for (int s = 0; s < spec->num_operands; ++s) {
    MlirValue v = tpc_op_get_operand(op, kind, s);
    if (mlirValueIsNull(v)) continue;
    MlirType t = mlirValueGetType(v);
    MlirType inner = tpc_future_get_value_type(t);
    ok &= mlirLogicalResultIsSuccess(
        tpc__verify_tensor_type(op, mlirTypeIsNull(inner) ? t : inner, "operand", spec->operands[s].name));
  }
  for (int s = 0; s < spec->num_results; ++s) {
    MlirValue v = tpc_op_get_result(op, kind, s);
    if (mlirValueIsNull(v)) continue;
    MlirType t = mlirValueGetType(v);
    MlirType inner = tpc_future_get_value_type(t);
    ok &= mlirLogicalResultIsSuccess(
        tpc__verify_tensor_type(op, mlirTypeIsNull(inner) ? t : inner, "result", spec->results[s].name));
  }
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

static const char* const tpc__attr_kind_words[] = {
    "any attribute", "a bool", "an integer", "a float", "a string", "a string", "a flat symbol reference (@name)",
    "an array", "a dense i64 array",
};

static bool tpc__attr_has_kind(MlirAttribute a, tpc_attr_kind_t k) {
  switch (k) {
    case TPC_ATTR_BOOL:
      return mlirAttributeIsABool(a);
    case TPC_ATTR_I64:
      return mlirAttributeIsAInteger(a) && !mlirAttributeIsABool(a);
    case TPC_ATTR_F32:
      return mlirAttributeIsAFloat(a);
    case TPC_ATTR_STRING:
    case TPC_ATTR_ENUM:
      return mlirAttributeIsAString(a);
    case TPC_ATTR_SYMBOL:
      return mlirAttributeIsAFlatSymbolRef(a);
    case TPC_ATTR_ARRAY:
      return mlirAttributeIsAArray(a);
    case TPC_ATTR_DENSE_I64:
      return mlirAttributeIsADenseI64Array(a);
    default:
      return true;
  }
}

// Edit distance between two short names, for "did you mean" suggestions.
static int tpc__edit_distance(MlirStringRef a, const char* b) {
  int n = (int)strlen(b), prev[64], cur[64];
  if (a.length >= 63 || n >= 63) return 99;
  for (int j = 0; j <= n; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.length; ++i) {
    cur[0] = (int)i;
    for (int j = 1; j <= n; ++j) {
      int sub = prev[j - 1] + (a.data[i - 1] != b[j - 1]);
      int del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, sizeof(int) * (size_t)(n + 1));
  }
  return prev[n];
}

// An attribute the op does not define is almost always a misspelling ("paralel") that would
// otherwise be ignored silently. Discardable attributes carry a dialect prefix (tp.shard,
// mhlo.sharding) and are left alone, as are IRDL's segment-size attributes.
static MlirLogicalResult tpc__verify_unknown_attrs(MlirOperation op, int kind) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  bool ok = true;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(op); ++i) {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetAttribute(op, i).name);
    if (memchr(name.data, '.', name.length) || tpc_op_spec_find_attr(spec, name) >= 0 ||
        mlirStringRefEqual(name, mlirStringRefCreateFromCString("operandSegmentSizes")) ||
        mlirStringRefEqual(name, mlirStringRefCreateFromCString("resultSegmentSizes")))
      continue;
    const char* best = NULL;
    int best_d = 3;  // suggest only close names
    char known[256] = "";
    int n = 0;
    for (int j = 0; j < spec->num_attrs; ++j) {
      int d = tpc__edit_distance(name, spec->attrs[j].name);
      if (d < best_d) best_d = d, best = spec->attrs[j].name;
      if (n < (int)sizeof known)
        n += snprintf(known + n, sizeof known - (size_t)n, "%s%s", j ? ", " : "", spec->attrs[j].name);
    }
    ok = false;
    if (best)
      tpc__rule_error(op, "attr.unknown", "unknown attribute '%.*s'; did you mean '%s'?", (int)name.length,
                      name.data, best);
    else
      tpc__rule_error(op, "attr.unknown", "unknown attribute '%.*s'; this op has %s", (int)name.length, name.data,
                      spec->num_attrs ? known : "no attributes");
  }
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

// Optional attributes are invisible to IRDL, and required ones are only checked for their base
// there; both get kind and enumeration checks here so a misspelt value is named precisely.
static MlirLogicalResult tpc__verify_attrs(MlirOperation op, int kind) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  bool ok = true;
  for (int i = 0; i < spec->num_attrs; ++i) {
    const tpc_attr_spec_t* as = &spec->attrs[i];
    MlirAttribute a = tpc_op_get_attr(op, kind, i);
    if (mlirAttributeIsNull(a)) continue;  // a missing required attribute is an IRDL error
    if (!tpc__attr_has_kind(a, as->kind)) {
      ok = false;
      tpc__rule_error(op, "attr.kind", "attribute '%s' must be %s", as->name, tpc__attr_kind_words[as->kind]);
      continue;
    }
    // Every op's `chunks` (its contraction's chunk count; 0 means the module's tp.chunks).
    if (as->kind == TPC_ATTR_I64 && strcmp(as->name, "chunks") == 0) {
      int64_t c = tpc_op_get_i64(op, kind, i);
      if (c < 0 || c > 1024 || (c & (c - 1)) != 0) {
        ok = false;
        tpc__rule_error(op, "attr.chunks",
                        "attribute 'chunks' must be 0 (the module's tp.chunks) or a power of two in [1, 1024]; got %lld",
                        (long long)c);
      }
    }
    if (as->kind == TPC_ATTR_ENUM && tpc_op_get_enum(op, kind, i) < 0) {
      char allowed[256] = "";
      int n = 0;
      for (const int* v = as->enum_values; *v >= 0 && n < (int)sizeof allowed; ++v)
        n += snprintf(allowed + n, sizeof allowed - (size_t)n, "%s\"%s\"", v == as->enum_values ? "" : ", ",
                      as->enum_names[*v]);
      MlirStringRef s = mlirStringAttrGetValue(a);
      ok = false;
      tpc__rule_error(op, "attr.enum", "attribute '%s' is \"%.*s\"; allowed values are %s", as->name,
                      (int)s.length, s.data, allowed);
    }
  }
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__verify_mesh(MlirOperation op) {
  MlirAttribute axes = tpc_mesh_get_axes_attr(op);
  MlirAttribute shape = tpc_mesh_get_shape_attr(op);
  if (mlirAttributeIsNull(axes) || mlirAttributeIsNull(shape)) return mlirLogicalResultFailure();
  intptr_t n = mlirArrayAttrGetNumElements(axes);
  if (n == 0) return tpc__rule_error(op, "mesh.axes", "a mesh needs at least one axis");
  for (intptr_t i = 0; i < n; ++i) {
    MlirAttribute a = mlirArrayAttrGetElement(axes, i);
    if (!mlirAttributeIsAString(a) || mlirStringAttrGetValue(a).length == 0)
      return tpc__rule_error(op, "mesh.axes", "axis %lld must be a non-empty string", (long long)i);
    // Axis names reach the passes, the manifest and the CLI's --mesh as C strings: an identifier
    // (no NUL, space or quote that would cut or split it), short enough for their 16-byte fields.
    MlirStringRef name = mlirStringAttrGetValue(a);
    bool ident = name.length < TPC_MESH_AXIS_NAME_SIZE && (isalpha((unsigned char)name.data[0]) || name.data[0] == '_');
    for (size_t k = 1; ident && k < name.length; ++k)
      ident = isalnum((unsigned char)name.data[k]) || name.data[k] == '_';
    if (!ident)
      return tpc__rule_error(op, "mesh.axes",
                             "axis %lld must be an identifier of at most %d letters, digits and '_' (not starting "
                             "with a digit)",
                             (long long)i, TPC_MESH_AXIS_NAME_SIZE - 1);
    for (intptr_t j = 0; j < i; ++j)
      if (mlirAttributeEqual(a, mlirArrayAttrGetElement(axes, j))) {
        MlirStringRef s = mlirStringAttrGetValue(a);
        return tpc__rule_error(op, "mesh.axes", "axis \"%.*s\" appears twice", (int)s.length, s.data);
      }
  }
  if (mlirDenseArrayGetNumElements(shape) != n)
    return tpc__rule_error(op, "mesh.shape", "shape has %lld entries but there are %lld axes",
                           (long long)mlirDenseArrayGetNumElements(shape), (long long)n);
  int64_t ranks = 1;
  for (intptr_t i = 0; i < n; ++i) {
    int64_t size = mlirDenseI64ArrayGetElement(shape, i);
    MlirStringRef s = mlirStringAttrGetValue(mlirArrayAttrGetElement(axes, i));
    if (size < 1)
      return tpc__rule_error(op, "mesh.shape", "axis \"%.*s\" has size %lld; sizes must be >= 1", (int)s.length,
                             s.data, (long long)size);
    if (size > TPC_MESH_MAX_RANKS / ranks)
      return tpc__rule_error(op, "mesh.shape", "axis \"%.*s\" of size %lld makes the mesh larger than %d ranks",
                             (int)s.length, s.data, (long long)size, TPC_MESH_MAX_RANKS);
    ranks *= size;
  }
  MlirOperation parent = mlirOperationGetParentOperation(op);
  if (mlirOperationIsNull(parent) || mlirModuleIsNull(mlirModuleFromOperation(parent)))
    return tpc__rule_error(op, "mesh.placement", "a mesh must be declared directly in a module");
  MlirStringRef name = mlirStringAttrGetValue(tpc_mesh_get_sym_name_attr(op));
  for (MlirOperation o = mlirOperationGetNextInBlock(op); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!tpc_is_mesh(o)) continue;
    MlirAttribute other = tpc_mesh_get_sym_name_attr(o);
    if (!mlirAttributeIsNull(other) && mlirStringRefEqual(mlirStringAttrGetValue(other), name))
      return tpc__rule_error(o, "mesh.placement", "mesh \"%.*s\" is declared twice in this module", (int)name.length,
                             name.data);
  }
  return mlirLogicalResultSuccess();
}

MlirOperation tpc_mesh_lookup(MlirOperation from, MlirStringRef name) {
  MlirOperation none = {NULL};
  for (MlirOperation p = mlirOperationGetParentOperation(from); !mlirOperationIsNull(p);
       p = mlirOperationGetParentOperation(p)) {
    MlirModule m = mlirModuleFromOperation(p);
    if (mlirModuleIsNull(m)) continue;
    for (MlirOperation o = mlirBlockGetFirstOperation(mlirModuleGetBody(m)); !mlirOperationIsNull(o);
         o = mlirOperationGetNextInBlock(o)) {
      if (!tpc_is_mesh(o)) continue;
      MlirAttribute n = tpc_mesh_get_sym_name_attr(o);
      if (!mlirAttributeIsNull(n) && mlirAttributeIsAString(n) && mlirStringRefEqual(mlirStringAttrGetValue(n), name))
        return o;
    }
  }
  return none;
}

//===----------------------------------------------------------------------===//
// Futures
//===----------------------------------------------------------------------===//

typedef struct {
  char buf[512];
  size_t len;
  bool overflow;
} tpc__text_t;

static void tpc__text_append(MlirStringRef s, void* user) {
  tpc__text_t* t = user;
  if (t->len + s.length >= sizeof t->buf) {
    t->overflow = true;
    return;
  }
  memcpy(t->buf + t->len, s.data, s.length);
  t->len += s.length;
  t->buf[t->len] = '\0';
}

// IRDL types have no C accessor for their parameters, so the tensor type is recovered from
// the printed form "!tp.future<tensor<...>>".
MlirType tpc_future_get_value_type(MlirType t) {
  MlirType none = {NULL};
  static const char prefix[] = "!tp.future<";
  if (mlirTypeIsNull(t) || mlirTypeIsARankedTensor(t) || mlirTypeIsAUnrankedTensor(t)) return none;
  tpc__text_t text = {{0}, 0, false};
  mlirTypePrint(t, tpc__text_append, &text);
  size_t plen = sizeof prefix - 1;
  if (text.overflow || text.len <= plen + 1 || memcmp(text.buf, prefix, plen) != 0 || text.buf[text.len - 1] != '>')
    return none;
  MlirStringRef inner = {text.buf + plen, text.len - plen - 1};
  return mlirTypeParseGet(mlirTypeGetContext(t), inner);
}

//===----------------------------------------------------------------------===//
// Module attributes
//===----------------------------------------------------------------------===//

// Prints |a| as MLIR does ("8 : i64", "\"slow\"") into |text|; returns the text.
static const char* tpc__attr_text(MlirAttribute a, tpc__text_t* text) {
  mlirAttributePrint(a, tpc__text_append, text);
  return text->overflow ? "<attribute too long to print>" : text->buf;
}

static MlirLogicalResult tpc__verify_module_attrs(MlirOperation module) {
  bool ok = true;
  MlirAttribute numerics = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_NUMERICS));
  if (!mlirAttributeIsNull(numerics)) {
    bool valid = mlirAttributeIsAString(numerics);
    MlirStringRef s = valid ? mlirStringAttrGetValue(numerics) : mlirStringRefCreate("", 0);
    valid = valid && tpc_numerics_parse(s) >= 0;
    if (!valid) {
      tpc__text_t text = {{0}, 0, false};
      ok = false;
      tpc__rule_error(module, "module.numerics",
                      TPC_MODULE_ATTR_NUMERICS " must be \"fast\", \"invariant\" or \"exact\"; got %s",
                      tpc__attr_text(numerics, &text));
    }
  }
  MlirAttribute strategy = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_STRATEGY));
  if (!mlirAttributeIsNull(strategy)) {
    MlirStringRef s = mlirAttributeIsAString(strategy) ? mlirStringAttrGetValue(strategy) : mlirStringRefCreate("", 0);
    if (!mlirStringRefEqual(s, mlirStringRefCreateFromCString("canonical")) &&
        !mlirStringRefEqual(s, mlirStringRefCreateFromCString("gather"))) {
      tpc__text_t text = {{0}, 0, false};
      ok = false;
      tpc__rule_error(module, "module.strategy", TPC_MODULE_ATTR_STRATEGY " must be \"canonical\" or \"gather\"; got %s",
                      tpc__attr_text(strategy, &text));
    }
  }
  MlirAttribute recompute =
      mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_RECOMPUTE));
  if (!mlirAttributeIsNull(recompute) && !mlirAttributeIsABool(recompute)) {
    tpc__text_t text = {{0}, 0, false};
    ok = false;
    tpc__rule_error(module, "module.recompute", TPC_MODULE_ATTR_RECOMPUTE " must be true or false; got %s",
                    tpc__attr_text(recompute, &text));
  }
  MlirAttribute zero = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_ZERO));
  if (!mlirAttributeIsNull(zero) && !mlirAttributeIsABool(zero)) {
    tpc__text_t text = {{0}, 0, false};
    ok = false;
    tpc__rule_error(module, "module.zero", TPC_MODULE_ATTR_ZERO " must be true or false; got %s",
                    tpc__attr_text(zero, &text));
  }
  MlirAttribute wgrad = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_WGRAD));
  if (!mlirAttributeIsNull(wgrad)) {
    MlirStringRef v = mlirAttributeIsAString(wgrad) ? mlirStringAttrGetValue(wgrad) : (MlirStringRef){NULL, 0};
    bool known = v.data && (mlirStringRefEqual(v, mlirStringRefCreateFromCString("scatter")) ||
                            mlirStringRefEqual(v, mlirStringRefCreateFromCString("gather")) ||
                            mlirStringRefEqual(v, mlirStringRefCreateFromCString("auto")));
    if (!known) {
      tpc__text_t text = {{0}, 0, false};
      ok = false;
      tpc__rule_error(module, "module.gtp_wgrad",
                      TPC_MODULE_ATTR_GTP_WGRAD " must be \"scatter\", \"gather\" or \"auto\"; got %s",
                      tpc__attr_text(wgrad, &text));
    }
  }
  MlirAttribute keep = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_KEEP));
  if (!mlirAttributeIsNull(keep) && !mlirAttributeIsABool(keep)) {
    tpc__text_t text = {{0}, 0, false};
    ok = false;
    tpc__rule_error(module, "module.gtp_keep", TPC_MODULE_ATTR_GTP_KEEP " must be true or false; got %s",
                    tpc__attr_text(keep, &text));
  }
  MlirAttribute prefetch =
      mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_PREFETCH));
  if (!mlirAttributeIsNull(prefetch) &&
      (!mlirAttributeIsAInteger(prefetch) || mlirAttributeIsABool(prefetch) || mlirIntegerAttrGetValueInt(prefetch) < 0)) {
    tpc__text_t text = {{0}, 0, false};
    ok = false;
    tpc__rule_error(module, "module.gtp_prefetch",
                    TPC_MODULE_ATTR_GTP_PREFETCH " must be an integer >= 0 (contractions between a GTP weight's "
                    "all-gather and its use); got %s",
                    tpc__attr_text(prefetch, &text));
  }
  MlirAttribute chunks = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_CHUNKS));
  if (!mlirAttributeIsNull(chunks)) {
    int64_t c = mlirAttributeIsAInteger(chunks) && !mlirAttributeIsABool(chunks) ? mlirIntegerAttrGetValueInt(chunks) : 0;
    if (c < 1 || (c & (c - 1)) != 0) {
      tpc__text_t text = {{0}, 0, false};
      ok = false;
      tpc__rule_error(module, "module.chunks",
                      TPC_MODULE_ATTR_CHUNKS " must be a power of two >= 1 (the canonical K chunk count); got %s",
                      tpc__attr_text(chunks, &text));
    }
  }
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

int tpc_numerics_parse(MlirStringRef s) {
  for (int i = 0; i < 3; ++i)
    if (s.length == strlen(tpc_numerics_names[i]) && memcmp(s.data, tpc_numerics_names[i], s.length) == 0) return i;
  return -1;
}

//===----------------------------------------------------------------------===//
// Function arguments
//===----------------------------------------------------------------------===//

// The operands that can take a gathered GTP weight: the weight of tp.linear, tp.grouped_linear
// and their dgrad.
static bool tpc__gathered_weight_slot(MlirOperation op, unsigned slot) {
  switch (tpc_op_get_kind(op)) {
    case TPC_OP_LINEAR: return slot == TPC_LINEAR_SLOT_W;
    case TPC_OP_LINEAR_DGRAD: return slot == TPC_LINEAR_DGRAD_SLOT_W;
    case TPC_OP_GROUPED_LINEAR: return slot == TPC_GROUPED_LINEAR_SLOT_W;
    case TPC_OP_GROUPED_LINEAR_DGRAD: return slot == TPC_GROUPED_LINEAR_DGRAD_SLOT_W;
    default: return false;
  }
}

// Rule arg.gtp: `tp.gtp` on an argument is a boolean, and an argument marked true is used only as
// a weight that can be gathered (it is stored sharded over gtp and all-gathered before each use).
static MlirLogicalResult tpc__verify_func_args(MlirOperation func) {
  MlirAttribute list = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("arg_attrs"));
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirAttributeIsNull(list) || !mlirAttributeIsAArray(list) || mlirBlockIsNull(body)) return mlirLogicalResultSuccess();
  bool ok = true;
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(list) && i < mlirBlockGetNumArguments(body); ++i) {
    MlirAttribute d = mlirArrayAttrGetElement(list, i);
    MlirAttribute g = mlirAttributeIsADictionary(d)
                          ? mlirDictionaryAttrGetElementByName(d, mlirStringRefCreateFromCString(TPC_ARG_ATTR_GTP))
                          : (MlirAttribute){NULL};
    if (mlirAttributeIsNull(g)) continue;
    // "argument 2 ('w1')": the user's name of it, when it has one.
    char what[160];
    MlirAttribute name = mlirDictionaryAttrGetElementByName(d, mlirStringRefCreateFromCString(TPC_ARG_ATTR_NAME));
    MlirStringRef nm = !mlirAttributeIsNull(name) && mlirAttributeIsAString(name) ? mlirStringAttrGetValue(name)
                                                                                    : mlirStringRefCreate(NULL, 0);
    if (nm.data)
      snprintf(what, sizeof what, "argument %ld ('%.*s')", (long)i, (int)(nm.length < 100 ? nm.length : 100), nm.data);
    else
      snprintf(what, sizeof what, "argument %ld", (long)i);
    if (!mlirAttributeIsABool(g)) {
      tpc__text_t text = {{0}, 0, false};
      ok = false;
      tpc__rule_error(func, "arg.gtp", "%s: " TPC_ARG_ATTR_GTP " must be true or false; got %s", what,
                      tpc__attr_text(g, &text));
      continue;
    }
    if (!mlirBoolAttrGetValue(g)) continue;
    MlirValue arg = mlirBlockGetArgument(body, i);
    for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
      MlirOperation user = mlirOpOperandGetOwner(u);
      if (tpc__gathered_weight_slot(user, mlirOpOperandGetOperandNumber(u))) continue;
      MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(user));
      ok = false;
      tpc__rule_error(user, "arg.gtp",
                      "%s is marked " TPC_ARG_ATTR_GTP " = true (sharded over gtp, gathered before each use), but "
                      "'%.*s' operand %u cannot take a gathered weight: only the weight of tp.linear, "
                      "tp.grouped_linear and their dgrad can",
                      what, (int)n.length, n.data, mlirOpOperandGetOperandNumber(u));
      break;
    }
  }
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

//===----------------------------------------------------------------------===//
// Walk
//===----------------------------------------------------------------------===//

MlirLogicalResult tpc_verify_op(MlirOperation op) {
  int kind = tpc_op_get_kind(op);
  if (kind == TPC_OP_UNKNOWN) {
    if (mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), mlirStringRefCreateFromCString("func.func")))
      return tpc__verify_func_args(op);
    MlirModule m = mlirModuleFromOperation(op);
    return mlirModuleIsNull(m) ? mlirLogicalResultSuccess() : tpc__verify_module_attrs(op);
  }
  // Per-op rules assume well-formed slots and attributes; stop at the first family that fails.
  if (mlirLogicalResultIsFailure(tpc__verify_slots(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_unknown_attrs(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_attrs(op, kind))) return mlirLogicalResultFailure();
  if (kind == TPC_OP_MESH) return tpc__verify_mesh(op);
  if (mlirLogicalResultIsFailure(tpc__verify_compute(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_quant(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_grad(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_attention(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_model(op, kind))) return mlirLogicalResultFailure();
  if (mlirLogicalResultIsFailure(tpc__verify_generate(op, kind))) return mlirLogicalResultFailure();
  return tpc__verify_collective(op, kind);
}

static MlirWalkResult tpc__verify_walk(MlirOperation op, void* user) {
  bool* ok = user;
  *ok &= mlirLogicalResultIsSuccess(tpc_verify_op(op));
  return MlirWalkResultAdvance;
}

MlirLogicalResult tpc_verify(MlirOperation root) {
  bool ok = true;
  mlirOperationWalk(root, tpc__verify_walk, &ok, MlirWalkPreOrder);
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}
