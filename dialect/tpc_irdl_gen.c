// tpc-irdl-gen: reads dialect/tp.irdl.mlir and writes tp_ops.h / tp_ops.c, the op-name
// constants, attribute enumerations, op specification table and typed accessors that the rest of
// tpc uses instead of spelling op names. Run by the build; never edited by hand.
//
// Usage: tpc-irdl-gen tp.irdl.mlir out/tp_ops.h out/tp_ops.c out/tprt_ops_abi.h
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Dialect/IRDL.h"
#include "mlir-c/IR.h"

#define MAX_OPS 64
#define MAX_SLOTS 16
#define MAX_ENUM_VALUES 16
#define MAX_ENUMS 32
#define NAME_LEN 64

typedef enum { VAR_SINGLE, VAR_OPTIONAL, VAR_VARIADIC } variadicity_t;

typedef enum {
  KIND_ANY,
  KIND_BOOL,
  KIND_I64,
  KIND_F32,
  KIND_STRING,
  KIND_ENUM,
  KIND_SYMBOL,
  KIND_ARRAY,
  KIND_DENSE_I64,
} attr_kind_t;

static const char* const kind_names[] = {
    "TPC_ATTR_ANY",    "TPC_ATTR_BOOL",   "TPC_ATTR_I64",   "TPC_ATTR_F32",      "TPC_ATTR_STRING",
    "TPC_ATTR_ENUM",   "TPC_ATTR_SYMBOL", "TPC_ATTR_ARRAY", "TPC_ATTR_DENSE_I64",
};

typedef struct {
  char name[NAME_LEN];
  variadicity_t variadicity;
} slot_t;

typedef struct {
  char name[NAME_LEN];
  attr_kind_t kind;
  bool required;
  int enum_id;          // index into enums[] for KIND_ENUM
  int num_values;       // enumeration values this op allows
  char values[MAX_ENUM_VALUES][NAME_LEN];
  double default_f;     // bool, i64 and f32 defaults; enum default is values[0]
} attr_t;

typedef struct {
  char name[NAME_LEN];
  slot_t operands[MAX_SLOTS];
  int num_operands;
  slot_t results[MAX_SLOTS];
  int num_results;
  attr_t attrs[MAX_SLOTS];
  int num_attrs;
} op_t;

typedef struct {
  char name[NAME_LEN];
  int num_values;
  char values[MAX_ENUM_VALUES * 2][NAME_LEN];
} enum_t;

static op_t ops[MAX_OPS];
static int num_ops;
static enum_t enums[MAX_ENUMS];
static int num_enums;

static void die(const char* msg, const char* detail) {
  fprintf(stderr, "tpc-irdl-gen: error: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static void copy_ref(char* dst, MlirStringRef s) {
  if (s.length >= NAME_LEN) die("name too long", NULL);
  memcpy(dst, s.data, s.length);
  dst[s.length] = '\0';
}

static bool op_is(MlirOperation op, const char* name) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

typedef struct {
  char buf[512];
  size_t len;
} strbuf_t;

static void strbuf_append(MlirStringRef s, void* user) {
  strbuf_t* b = user;
  size_t n = s.length;
  if (b->len + n >= sizeof(b->buf)) n = sizeof(b->buf) - b->len - 1;
  memcpy(b->buf + b->len, s.data, n);
  b->len += n;
  b->buf[b->len] = '\0';
}

// Reads names and variadicities of irdl.operands / irdl.results. The variadicity array has no
// element getter in the C API, so its printed form (#irdl<variadicity_array[single, optional]>)
// is scanned instead.
static int read_slots(MlirOperation op, slot_t* out) {
  MlirAttribute names = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("names"));
  MlirAttribute var = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("variadicity"));
  intptr_t n = mlirArrayAttrGetNumElements(names);
  if (n > MAX_SLOTS) die("too many operands or results", NULL);
  strbuf_t b = {{0}, 0};
  mlirAttributePrint(var, strbuf_append, &b);
  const char* p = strchr(b.buf, '[');
  for (intptr_t i = 0; i < n; ++i) {
    copy_ref(out[i].name, mlirStringAttrGetValue(mlirArrayAttrGetElement(names, i)));
    while (p && *p && !isalpha((unsigned char)*p)) ++p;
    if (!p || !*p) die("cannot read variadicity", b.buf);
    out[i].variadicity = strncmp(p, "optional", 8) == 0   ? VAR_OPTIONAL
                         : strncmp(p, "variadic", 8) == 0 ? VAR_VARIADIC
                                                          : VAR_SINGLE;
    while (*p && isalpha((unsigned char)*p)) ++p;
  }
  return (int)n;
}

static int enum_intern(const char* attr_name, attr_t* a) {
  for (int i = 0; i < num_enums; ++i) {
    if (strcmp(enums[i].name, attr_name) != 0) continue;
    for (int v = 0; v < a->num_values; ++v) {
      bool found = false;
      for (int w = 0; w < enums[i].num_values; ++w) found |= strcmp(enums[i].values[w], a->values[v]) == 0;
      if (!found) strcpy(enums[i].values[enums[i].num_values++], a->values[v]);
    }
    return i;
  }
  if (num_enums == MAX_ENUMS) die("too many enumerations", NULL);
  enum_t* e = &enums[num_enums];
  strcpy(e->name, attr_name);
  for (int v = 0; v < a->num_values; ++v) strcpy(e->values[e->num_values++], a->values[v]);
  return num_enums++;
}

// Classifies a required attribute from its IRDL constraint: irdl.base of a builtin attribute,
// or irdl.any_of over irdl.is string values (an enumeration).
static void classify_constraint(MlirValue v, attr_t* a) {
  MlirOperation def = mlirOpResultGetOwner(v);
  if (op_is(def, "irdl.base")) {
    MlirAttribute base = mlirOperationGetAttributeByName(def, mlirStringRefCreateFromCString("base_name"));
    char name[NAME_LEN] = "";
    if (!mlirAttributeIsNull(base)) copy_ref(name, mlirStringAttrGetValue(base));
    a->kind = strcmp(name, "#builtin.string") == 0        ? KIND_STRING
              : strcmp(name, "#builtin.integer") == 0     ? KIND_I64
              : strcmp(name, "#builtin.float") == 0       ? KIND_F32
              : strcmp(name, "#builtin.symbol_ref") == 0  ? KIND_SYMBOL
              : strcmp(name, "#builtin.array") == 0       ? KIND_ARRAY
              : strcmp(name, "#builtin.dense_array") == 0 ? KIND_DENSE_I64
                                                          : KIND_ANY;
    return;
  }
  if (op_is(def, "irdl.any_of")) {
    a->kind = KIND_ENUM;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
      MlirOperation is = mlirOpResultGetOwner(mlirOperationGetOperand(def, i));
      MlirAttribute e = mlirOperationGetAttributeByName(is, mlirStringRefCreateFromCString("expected"));
      if (!op_is(is, "irdl.is") || !mlirAttributeIsAString(e)) die("enumeration must be irdl.is strings", a->name);
      copy_ref(a->values[a->num_values++], mlirStringAttrGetValue(e));
    }
    return;
  }
  a->kind = KIND_ANY;
}

static void read_optional(MlirAttribute dict, op_t* op) {
  for (intptr_t i = 0; i < mlirDictionaryAttrGetNumElements(dict); ++i) {
    MlirNamedAttribute na = mlirDictionaryAttrGetElement(dict, i);
    attr_t* a = &op->attrs[op->num_attrs++];
    copy_ref(a->name, mlirIdentifierStr(na.name));
    a->required = false;
    MlirAttribute v = na.attribute;
    if (mlirAttributeIsABool(v)) {
      a->kind = KIND_BOOL;
      a->default_f = mlirBoolAttrGetValue(v);
    } else if (mlirAttributeIsAInteger(v)) {
      a->kind = KIND_I64;
      a->default_f = (double)mlirIntegerAttrGetValueInt(v);
    } else if (mlirAttributeIsAFloat(v)) {
      a->kind = KIND_F32;
      a->default_f = mlirFloatAttrGetValueDouble(v);
    } else if (mlirAttributeIsAFlatSymbolRef(v)) {
      a->kind = KIND_SYMBOL;  // an optional mesh (`mesh = @none`: absent by default)
    } else if (mlirAttributeIsAArray(v) && mlirArrayAttrGetNumElements(v) == 0) {
      a->kind = KIND_ARRAY;  // an optional list of mesh axes (`axes = []`: none by default)
    } else if (mlirAttributeIsAArray(v)) {
      a->kind = KIND_ENUM;
      for (intptr_t j = 0; j < mlirArrayAttrGetNumElements(v); ++j)
        copy_ref(a->values[a->num_values++], mlirStringAttrGetValue(mlirArrayAttrGetElement(v, j)));
    } else {
      die("unsupported tp.optional_attributes value", a->name);
    }
  }
}

static void read_operation(MlirOperation def) {
  if (num_ops == MAX_OPS) die("too many ops", NULL);
  op_t* op = &ops[num_ops++];
  copy_ref(op->name, mlirStringAttrGetValue(
                         mlirOperationGetAttributeByName(def, mlirStringRefCreateFromCString("sym_name"))));
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(def, 0));
  for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (op_is(o, "irdl.operands")) op->num_operands = read_slots(o, op->operands);
    if (op_is(o, "irdl.results")) op->num_results = read_slots(o, op->results);
    if (op_is(o, "irdl.attributes")) {
      MlirAttribute names =
          mlirOperationGetAttributeByName(o, mlirStringRefCreateFromCString("attributeValueNames"));
      for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(names); ++i) {
        attr_t* a = &op->attrs[op->num_attrs++];
        copy_ref(a->name, mlirStringAttrGetValue(mlirArrayAttrGetElement(names, i)));
        a->required = true;
        classify_constraint(mlirOperationGetOperand(o, i), a);
      }
    }
  }
  MlirAttribute opt = mlirOperationGetAttributeByName(def, mlirStringRefCreateFromCString("tp.optional_attributes"));
  if (!mlirAttributeIsNull(opt)) read_optional(opt, op);
  for (int i = 0; i < op->num_attrs; ++i)
    if (op->attrs[i].kind == KIND_ENUM) op->attrs[i].enum_id = enum_intern(op->attrs[i].name, &op->attrs[i]);
}

static void upper(char* dst, const char* src) {
  while (*src) *dst++ = (char)toupper((unsigned char)*src++);
  *dst = '\0';
}

static int enum_index(const enum_t* e, const char* v) {
  for (int i = 0; i < e->num_values; ++i)
    if (strcmp(e->values[i], v) == 0) return i;
  return -1;
}

static void write_header(FILE* h) {
  char up[NAME_LEN], up2[NAME_LEN];
  fprintf(h,
          "// Generated by tpc-irdl-gen from dialect/tp.irdl.mlir; do not edit.\n"
          "#ifndef TPC_TP_OPS_H_\n#define TPC_TP_OPS_H_\n\n#include \"tpc_op_spec.h\"\n\n"
          "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
  fprintf(h, "/// Every op of the tp dialect.\ntypedef enum tpc_op_kind_e {\n  TPC_OP_UNKNOWN = 0,\n");
  for (int i = 0; i < num_ops; ++i) {
    upper(up, ops[i].name);
    fprintf(h, "  TPC_OP_%s,\n", up);
  }
  fprintf(h, "  TPC_OP_COUNT\n} tpc_op_kind_t;\n\n");
  for (int i = 0; i < num_ops; ++i) {
    upper(up, ops[i].name);
    fprintf(h, "#define TPC_OP_NAME_%s \"tp.%s\"\n", up, ops[i].name);
  }
  fprintf(h, "\n/// The op specifications, indexed by tpc_op_kind_t.\nextern const tpc_op_spec_t tpc_op_specs[TPC_OP_COUNT];\n\n");
  for (int e = 0; e < num_enums; ++e) {
    upper(up, enums[e].name);
    fprintf(h, "/// Values of the `%s` attribute.\ntypedef enum tpc_%s_e {\n", enums[e].name, enums[e].name);
    for (int v = 0; v < enums[e].num_values; ++v) {
      upper(up2, enums[e].values[v]);
      fprintf(h, "  TPC_%s_%s = %d,\n", up, up2, v);
    }
    fprintf(h, "} tpc_%s_t;\n/// The spelling of each tpc_%s_t value.\nextern const char* const tpc_%s_names[%d];\n\n",
            enums[e].name, enums[e].name, enums[e].name, enums[e].num_values);
  }
  for (int i = 0; i < num_ops; ++i) {
    const op_t* op = &ops[i];
    upper(up, op->name);
    fprintf(h, "//===--- tp.%s ---===//\n", op->name);
    fprintf(h, "static inline bool tpc_is_%s(MlirOperation op) { return tpc_op_get_kind(op) == TPC_OP_%s; }\n",
            op->name, up);
    for (int s = 0; s < op->num_operands; ++s)
      fprintf(h, "static inline MlirValue tpc_%s_get_%s(MlirOperation op) { return tpc_op_get_operand(op, TPC_OP_%s, %d); }\n",
              op->name, op->operands[s].name, up, s);
    for (int s = 0; s < op->num_results; ++s)
      fprintf(h, "static inline MlirValue tpc_%s_get_%s(MlirOperation op) { return tpc_op_get_result(op, TPC_OP_%s, %d); }\n",
              op->name, op->results[s].name, up, s);
    for (int a = 0; a < op->num_attrs; ++a) {
      upper(up2, op->attrs[a].name);
      fprintf(h, "#define TPC_%s_ATTR_%s %d\n", up, up2, a);
    }
    // Operand and result slot indices (operand positions when no optional slot precedes them).
    for (int k = 0; k < op->num_operands; ++k) {
      upper(up2, op->operands[k].name);
      fprintf(h, "#define TPC_%s_SLOT_%s %d\n", up, up2, k);
    }
    for (int a = 0; a < op->num_attrs; ++a) {
      const attr_t* at = &op->attrs[a];
      fprintf(h, "static inline MlirAttribute tpc_%s_get_%s_attr(MlirOperation op) { return tpc_op_get_attr(op, TPC_OP_%s, %d); }\n",
              op->name, at->name, up, a);
      switch (at->kind) {
        case KIND_BOOL:
          fprintf(h, "static inline bool tpc_%s_get_%s(MlirOperation op) { return tpc_op_get_bool(op, TPC_OP_%s, %d); }\n",
                  op->name, at->name, up, a);
          break;
        case KIND_I64:
          fprintf(h, "static inline int64_t tpc_%s_get_%s(MlirOperation op) { return tpc_op_get_i64(op, TPC_OP_%s, %d); }\n",
                  op->name, at->name, up, a);
          break;
        case KIND_F32:
          fprintf(h, "static inline double tpc_%s_get_%s(MlirOperation op) { return tpc_op_get_f64(op, TPC_OP_%s, %d); }\n",
                  op->name, at->name, up, a);
          break;
        case KIND_ENUM:
          fprintf(h, "static inline tpc_%s_t tpc_%s_get_%s(MlirOperation op) { return (tpc_%s_t)tpc_op_get_enum(op, TPC_OP_%s, %d); }\n",
                  at->name, op->name, at->name, at->name, up, a);
          break;
        default:
          break;
      }
    }
    fprintf(h, "\n");
  }
  fprintf(h, "#ifdef __cplusplus\n}\n#endif\n\n#endif  // TPC_TP_OPS_H_\n");
}

// The runtime side of the op ABI: slot and attribute indices and enumeration values, in plain
// C (no MLIR), so that libtprt decodes descriptors with the numbering the compiler encodes.
static void write_runtime_header(FILE* h) {
  char up[NAME_LEN], up2[NAME_LEN];
  fprintf(h,
          "// Generated by tpc-irdl-gen from dialect/tp.irdl.mlir; do not edit.\n"
          "// Slot and attribute indices of every tp op in the runtime ABI (see runtime/tprt_abi.h):\n"
          "// slots are the operands then the results in definition order; attributes are the\n"
          "// required ones then the optional ones (alphabetical), as in the op descriptor.\n"
          "#ifndef TPRT_OPS_ABI_H_\n#define TPRT_OPS_ABI_H_\n\n");
  for (int e = 0; e < num_enums; ++e) {
    upper(up, enums[e].name);
    for (int v = 0; v < enums[e].num_values; ++v) {
      upper(up2, enums[e].values[v]);
      fprintf(h, "#define TPRT_%s_%s %d\n", up, up2, v);
    }
  }
  for (int i = 0; i < num_ops; ++i) {
    const op_t* op = &ops[i];
    upper(up, op->name);
    fprintf(h, "\n// tp.%s\n#define TPRT_%s_NAME \"tp.%s\"\n#define TPRT_%s_NUM_SLOTS %d\n", op->name, up, op->name,
            up, op->num_operands + op->num_results);
    for (int s = 0; s < op->num_operands; ++s) {
      upper(up2, op->operands[s].name);
      fprintf(h, "#define TPRT_%s_SLOT_%s %d\n", up, up2, s);
    }
    for (int s = 0; s < op->num_results; ++s) {
      upper(up2, op->results[s].name);
      fprintf(h, "#define TPRT_%s_SLOT_%s %d\n", up, up2, op->num_operands + s);
    }
    fprintf(h, "#define TPRT_%s_NUM_ATTRS %d\n", up, op->num_attrs);
    for (int a = 0; a < op->num_attrs; ++a) {
      upper(up2, op->attrs[a].name);
      fprintf(h, "#define TPRT_%s_ATTR_%s %d\n", up, up2, a);
    }
  }
  // Every op that lowers to a runtime call (all but the mesh declaration): X(name).
  fprintf(h, "\n#define TPRT_ABI_OPS(X)");
  for (int i = 0; i < num_ops; ++i)
    if (strcmp(ops[i].name, "mesh") != 0) fprintf(h, " \\\n  X(%s)", ops[i].name);
  fprintf(h, "\n\n#endif  // TPRT_OPS_ABI_H_\n");
}

static const char* var_name(variadicity_t v) {
  return v == VAR_OPTIONAL ? "TPC_SLOT_OPTIONAL" : v == VAR_VARIADIC ? "TPC_SLOT_VARIADIC" : "TPC_SLOT_SINGLE";
}

static void write_source(FILE* c) {
  fprintf(c, "// Generated by tpc-irdl-gen from dialect/tp.irdl.mlir; do not edit.\n#include \"tp_ops.h\"\n\n");
  for (int e = 0; e < num_enums; ++e) {
    fprintf(c, "const char* const tpc_%s_names[%d] = {", enums[e].name, enums[e].num_values);
    for (int v = 0; v < enums[e].num_values; ++v) fprintf(c, "%s\"%s\"", v ? ", " : "", enums[e].values[v]);
    fprintf(c, "};\n");
  }
  for (int i = 0; i < num_ops; ++i) {
    const op_t* op = &ops[i];
    fprintf(c, "\nstatic const tpc_slot_spec_t tpc__%s_operands[] = {", op->name);
    for (int s = 0; s < op->num_operands; ++s)
      fprintf(c, "{\"%s\", %s}, ", op->operands[s].name, var_name(op->operands[s].variadicity));
    fprintf(c, "{0, TPC_SLOT_SINGLE}};\n");
    fprintf(c, "static const tpc_slot_spec_t tpc__%s_results[] = {", op->name);
    for (int s = 0; s < op->num_results; ++s)
      fprintf(c, "{\"%s\", %s}, ", op->results[s].name, var_name(op->results[s].variadicity));
    fprintf(c, "{0, TPC_SLOT_SINGLE}};\n");
    for (int a = 0; a < op->num_attrs; ++a) {
      const attr_t* at = &op->attrs[a];
      if (at->kind != KIND_ENUM) continue;
      fprintf(c, "static const int tpc__%s_%s_values[] = {", op->name, at->name);
      for (int v = 0; v < at->num_values; ++v) fprintf(c, "%d, ", enum_index(&enums[at->enum_id], at->values[v]));
      fprintf(c, "-1};\n");
    }
    fprintf(c, "static const tpc_attr_spec_t tpc__%s_attrs[] = {\n", op->name);
    for (int a = 0; a < op->num_attrs; ++a) {
      const attr_t* at = &op->attrs[a];
      char values[NAME_LEN * 4] = "0";
      char names[NAME_LEN * 4] = "0";
      int def = 0;
      if (at->kind == KIND_ENUM) {
        // Names are at most NAME_LEN - 1 characters, so these fit; checked all the same (and GCC's
        // -Wformat-truncation at -Os cannot see the bound).
        if (snprintf(values, sizeof values, "tpc__%s_%s_values", op->name, at->name) >= (int)sizeof values ||
            snprintf(names, sizeof names, "tpc_%s_names", at->name) >= (int)sizeof names)
          die("attribute name too long", at->name);
        def = enum_index(&enums[at->enum_id], at->values[0]);
      }
      fprintf(c, "  {\"%s\", %s, %s, %s, %s, %d, %.17g},\n", at->name, kind_names[at->kind],
              at->required ? "true" : "false", values, names, def, at->default_f);
    }
    fprintf(c, "  {0, TPC_ATTR_ANY, false, 0, 0, 0, 0}};\n");
  }
  fprintf(c, "\nconst tpc_op_spec_t tpc_op_specs[TPC_OP_COUNT] = {\n  {0, 0, 0, 0, 0, 0, 0},\n");
  for (int i = 0; i < num_ops; ++i) {
    const op_t* op = &ops[i];
    fprintf(c, "  {\"tp.%s\", tpc__%s_operands, %d, tpc__%s_results, %d, tpc__%s_attrs, %d},\n", op->name,
            op->name, op->num_operands, op->name, op->num_results, op->name, op->num_attrs);
  }
  fprintf(c, "};\n");
}

int main(int argc, char** argv) {
  if (argc != 5) die("usage: tpc-irdl-gen tp.irdl.mlir tp_ops.h tp_ops.c tprt_ops_abi.h", NULL);
  MlirContext ctx = mlirContextCreate();
  mlirContextSetAllowUnregisteredDialects(ctx, true);
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__irdl__(), ctx);
  MlirModule m = mlirModuleCreateParseFromFile(ctx, mlirStringRefCreateFromCString(argv[1]));
  if (mlirModuleIsNull(m)) die("cannot parse", argv[1]);
  for (MlirOperation d = mlirBlockGetFirstOperation(mlirModuleGetBody(m)); !mlirOperationIsNull(d);
       d = mlirOperationGetNextInBlock(d)) {
    if (!op_is(d, "irdl.dialect")) continue;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(d, 0));
    for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
      if (op_is(o, "irdl.operation")) read_operation(o);
  }
  if (num_ops == 0) die("no irdl.operation found", argv[1]);
  FILE* h = fopen(argv[2], "w");
  FILE* c = fopen(argv[3], "w");
  FILE* r = fopen(argv[4], "w");
  if (!h || !c || !r) die("cannot write outputs", NULL);
  write_header(h);
  write_source(c);
  write_runtime_header(r);
  fclose(h);
  fclose(c);
  fclose(r);
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);
  return 0;
}
