// tp-lower-runtime: lowers every function of tp ops to a function that calls the runtime ABI
// (runtime/tprt_abi.h), with all intermediate tensors placed statically in one arena.
//
//   IN:  func.func @mlp(%x: tensor<16x128xbf16>, ...) -> tensor<16x128xbf16> {
//          %h = "tp.rmsnorm"(%x, %gamma) {eps = ...} : ...
//          ...
//   OUT: llvm.mlir.global internal constant @__tpc_desc_mlp_0(dense<[...]> : tensor<Nxi64>) ...
//        func.func @tpc_entry_mlp(%exec: !llvm.ptr, %args: !llvm.ptr, %results: !llvm.ptr,
//                                 %arena: !llvm.ptr) -> i32 {
//          ... %rc = func.call @tprt_abi_rmsnorm(%exec, %slots, %desc) ...; cf.cond_br ...
//        llvm.mlir.global external constant @tpc_module_info("{...json...}\00")
//        module attributes {tp.arena_bytes = N : i64, ...}
//
// One mechanism serves every op: the op's slots (operands then results) and attributes are
// encoded from the generated op specification (dialect/tp_ops.h) into a static descriptor, so
// no op needs lowering code of its own. The pass builds the new functions as text and parses
// them (the C API has no builders for LLVM-dialect ops); upstream convert-to-llvm finishes.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower_runtime_impl.h"
#include "memory_plan.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "text_buffer.h"
#include "tpc_dialect.h"
#include "tpc_verify.h"
#include "tprt_abi.h"
#include "tprt_dtype.h"


/// Pass options: |poison| makes the lowered code overwrite every arena buffer with 0xFF bytes
/// right after its last use, so that a plan that lets a live buffer share bytes with a dead one
/// shows up as NaNs / wrong results (the memory-plan tests run both ways and compare).
typedef struct {
  bool poison;
} tpc__lower_options_t;

typedef enum { TPC_STORE_ARG, TPC_STORE_RESULT, TPC_STORE_ARENA, TPC_STORE_ALIAS } tpc__store_t;

typedef struct {
  MlirValue value;
  tpc__store_t store;
  int index;        // argument / result index, plan buffer index, or aliased value index
  MlirType tensor;  // the tensor type (for a future, the carried one)
} tpc__value_t;

typedef struct {
  MlirOperation func;
  MlirOperation module;
  tpc__value_t* values;        // cap_values entries, sized from the function (tpc_func_value_bound)
  int num_values, cap_values;  // (a plan buffer per value at most: buffers has as many)
  tpc_plan_buffer_t* buffers;
  int num_buffers;
  int64_t arena_bytes;
  int64_t arena_live_peak;  // the plan's lower bound (tpc_memory_plan_peak)
} tpc__lowering_t;

//===----------------------------------------------------------------------===//
// Types and values
//===----------------------------------------------------------------------===//

// The tensor a value holds: its own type, or the one a !tp.future carries. Null if neither.
static MlirType tpc__tensor_type(MlirValue v) {
  MlirType t = mlirValueGetType(v);
  if (mlirTypeIsARankedTensor(t) && mlirShapedTypeHasStaticShape(t)) return t;
  MlirType inner = tpc_future_get_value_type(t);
  MlirType none = {NULL};
  return !mlirTypeIsNull(inner) && mlirTypeIsARankedTensor(inner) && mlirShapedTypeHasStaticShape(inner) ? inner
                                                                                                          : none;
}

static int64_t tpc__tensor_bytes(MlirType t) {
  int64_t n = 1;
  for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i) n *= mlirShapedTypeGetDimSize(t, i);
  return (int64_t)tprt_dtype_bytes(tpc_lower_dtype_of(mlirShapedTypeGetElementType(t)), n);
}

static int tpc__find_value(const tpc__lowering_t* L, MlirValue v) {
  for (int i = 0; i < L->num_values; ++i)
    if (mlirValueEqual(L->values[i].value, v)) return i;
  return -1;
}

// Follows tp.wait aliases to the value that owns the storage.
static int tpc__storage_of(const tpc__lowering_t* L, int i) {
  while (L->values[i].store == TPC_STORE_ALIAS) i = L->values[i].index;
  return i;
}

static MlirLogicalResult tpc__add_value(tpc__lowering_t* L, MlirOperation at, MlirValue v, tpc__store_t store,
                                        int index) {
  MlirType t = tpc__tensor_type(v);
  if (mlirTypeIsNull(t) || tpc_lower_dtype_of(mlirShapedTypeGetElementType(t)) < 0) {
    mlirEmitError(mlirOperationGetLocation(at),
                  "tp-lower-runtime: every value must be a static tensor of a tp element type");
    return mlirLogicalResultFailure();
  }
  if (L->num_values == L->cap_values) {
    char msg[128];
    snprintf(msg, sizeof msg, "tp-lower-runtime: internal error: the value table of %d entries is full", L->cap_values);
    mlirEmitError(mlirOperationGetLocation(at), msg);
    return mlirLogicalResultFailure();
  }
  L->values[L->num_values++] = (tpc__value_t){v, store, index, t};
  return mlirLogicalResultSuccess();
}

//===----------------------------------------------------------------------===//
// Analysis: values, liveness, memory plan
//===----------------------------------------------------------------------===//

static bool tpc__op_is(MlirOperation op, const char* name) {
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), mlirStringRefCreateFromCString(name));
}

// Keeps the arena buffer that holds value |v| (if any) live through op |index|.
static void tpc__extend_live(tpc__lowering_t* L, int v, int index) {
  int s = tpc__storage_of(L, v);
  if (L->values[s].store == TPC_STORE_ARENA && L->buffers[L->values[s].index].last_use < index)
    L->buffers[L->values[s].index].last_use = index;
}

// Keeps the operands of the async collective that produced |future| live through op |index|: on
// the CPU the start stages its input at once, but a device backend reads it asynchronously (the
// comm stream) until the matching tp.wait, so the memory plan must not hand its bytes to an op
// placed between the two.
static void tpc__extend_start_inputs(tpc__lowering_t* L, MlirValue future, int index) {
  if (!mlirValueIsAOpResult(future)) return;
  MlirOperation start = mlirOpResultGetOwner(future);
  for (intptr_t o = 0; o < mlirOperationGetNumOperands(start); ++o) {
    int v = tpc__find_value(L, mlirOperationGetOperand(start, o));
    if (v >= 0) tpc__extend_live(L, v, index);
  }
}

static MlirLogicalResult tpc__analyze(tpc__lowering_t* L, MlirBlock body, MlirOperation* out_return) {
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(body); ++i)
    if (mlirLogicalResultIsFailure(tpc__add_value(L, L->func, mlirBlockGetArgument(body, i), TPC_STORE_ARG, (int)i)))
      return mlirLogicalResultFailure();
  int index = 0;
  out_return->ptr = NULL;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op), ++index) {
    if (tpc__op_is(op, "func.return")) {
      // Returned values live to the end: a returned tp.wait result is copied out of the future's
      // arena buffer after the last op, so no op may take those bytes before.
      for (intptr_t o = 0; o < mlirOperationGetNumOperands(op); ++o) {
        int v = tpc__find_value(L, mlirOperationGetOperand(op, o));
        if (v >= 0) tpc__extend_live(L, v, index);
      }
      *out_return = op;
      break;
    }
    int kind = tpc_op_get_kind(op);
    if (kind == TPC_OP_UNKNOWN || kind == TPC_OP_MESH) {
      MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
      char msg[256];
      snprintf(msg, sizeof msg,
               "tp-lower-runtime: '%.*s' cannot be lowered; function bodies may hold only tp ops and func.return",
               (int)n.length, n.data);
      mlirEmitError(mlirOperationGetLocation(op), msg);
      return mlirLogicalResultFailure();
    }
    for (intptr_t o = 0; o < mlirOperationGetNumOperands(op); ++o) {
      int v = tpc__find_value(L, mlirOperationGetOperand(op, o));
      if (v < 0) {
        mlirEmitError(mlirOperationGetLocation(op), "tp-lower-runtime: operand defined outside the function body");
        return mlirLogicalResultFailure();
      }
      tpc__extend_live(L, v, index);
    }
    // A device reads an async collective's input while later ops run: it stays live until the wait.
    if (kind == TPC_OP_WAIT) tpc__extend_start_inputs(L, tpc_wait_get_future(op), index);
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
      MlirValue res = mlirOperationGetResult(op, r);
      if (kind == TPC_OP_WAIT) {
        int src = tpc__find_value(L, tpc_wait_get_future(op));
        if (mlirLogicalResultIsFailure(tpc__add_value(L, op, res, TPC_STORE_ALIAS, src)))
          return mlirLogicalResultFailure();
        continue;
      }
      if (mlirLogicalResultIsFailure(tpc__add_value(L, op, res, TPC_STORE_ARENA, L->num_buffers)))
        return mlirLogicalResultFailure();
      L->buffers[L->num_buffers++] = (tpc_plan_buffer_t){tpc__tensor_bytes(L->values[L->num_values - 1].tensor),
                                                         index, index, 0};
    }
  }
  if (mlirOperationIsNull(*out_return)) {
    mlirEmitError(mlirOperationGetLocation(L->func), "tp-lower-runtime: the function has no func.return");
    return mlirLogicalResultFailure();
  }
  // A future that no tp.wait consumes completes when the step ends (tprt_exec_destroy waits for
  // it): its storage and its start's inputs stay live to the end of the function.
  for (int v = 0; v < L->num_values; ++v) {
    if (mlirTypeIsNull(tpc_future_get_value_type(mlirValueGetType(L->values[v].value)))) continue;
    bool waited = false;
    for (int w = 0; w < L->num_values && !waited; ++w)
      waited = L->values[w].store == TPC_STORE_ALIAS && L->values[w].index == v;
    if (waited) continue;
    tpc__extend_live(L, v, index);
    tpc__extend_start_inputs(L, L->values[v].value, index);
  }
  // A returned value that is produced by an op (and returned once) is written straight into the
  // caller's result buffer: a tp.wait's result too, whose async collective then writes its output
  // there (a weight gradient's reduce-scatter, a data-parallel all-reduce). Arguments and repeats
  // (a value, or two waits of one future, returned twice) are copied at the end.
  for (intptr_t j = 0; j < mlirOperationGetNumOperands(*out_return); ++j) {
    int v = tpc__find_value(L, mlirOperationGetOperand(*out_return, j));
    if (v >= 0) v = tpc__storage_of(L, v);
    if (v >= 0 && L->values[v].store == TPC_STORE_ARENA) {
      L->values[v].store = TPC_STORE_RESULT;
      L->values[v].index = (int)j;
    }
  }
  // Plan only the values that live in the arena.
  tpc_plan_buffer_t* plan = malloc(sizeof *plan * (size_t)(L->num_buffers ? L->num_buffers : 1));
  int* owner = malloc(sizeof *owner * (size_t)(L->num_buffers ? L->num_buffers : 1));
  int n = 0;
  for (int v = 0; plan && owner && v < L->num_values; ++v)
    if (L->values[v].store == TPC_STORE_ARENA) {
      owner[n] = L->values[v].index;
      plan[n++] = L->buffers[L->values[v].index];
    }
  L->arena_live_peak = plan && owner ? tpc_memory_plan_peak(plan, n, TPRT_ABI_ARENA_ALIGNMENT) : -1;
  L->arena_bytes = plan && owner ? tpc_memory_plan(plan, n, TPRT_ABI_ARENA_ALIGNMENT) : -1;
  for (int i = 0; i < n && L->arena_bytes >= 0; ++i) L->buffers[owner[i]].offset = plan[i].offset;
  free(plan);
  free(owner);
  if (L->arena_bytes < 0) {
    mlirEmitError(mlirOperationGetLocation(L->func), "tp-lower-runtime: memory planning failed");
    return mlirLogicalResultFailure();
  }
  return mlirLogicalResultSuccess();
}

//===----------------------------------------------------------------------===//
// Descriptors
//===----------------------------------------------------------------------===//

typedef struct {
  int64_t v[512];
  int n;
  bool overflow;
} tpc__desc_t;

static void tpc__desc_push(tpc__desc_t* d, int64_t x) {
  if (d->n == (int)(sizeof d->v / sizeof d->v[0]))
    d->overflow = true;
  else
    d->v[d->n++] = x;
}

static void tpc__desc_tensor(tpc__desc_t* d, MlirType t) {
  if (mlirTypeIsNull(t)) {
    tpc__desc_push(d, -1);
    tpc__desc_push(d, 0);
    return;
  }
  tpc__desc_push(d, tpc_lower_dtype_of(mlirShapedTypeGetElementType(t)));
  tpc__desc_push(d, mlirShapedTypeGetRank(t));
  for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i) tpc__desc_push(d, mlirShapedTypeGetDimSize(t, i));
}

static uint32_t tpc__f32_bits(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

// The mesh an op names through its symbol attribute, or a null op.
static MlirOperation tpc__op_mesh(MlirOperation op, const tpc_op_spec_t* spec) {
  for (int a = 0; a < spec->num_attrs; ++a) {
    MlirAttribute s = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(spec->attrs[a].name));
    if (spec->attrs[a].kind == TPC_ATTR_SYMBOL && !mlirAttributeIsNull(s) && mlirAttributeIsAFlatSymbolRef(s))
      return tpc_mesh_lookup(op, mlirFlatSymbolRefAttrGetValue(s));
  }
  MlirOperation none = {NULL};
  return none;
}

static void tpc__desc_attrs(tpc__desc_t* d, MlirOperation op, int kind) {
  const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
  MlirOperation mesh = tpc__op_mesh(op, spec);
  tpc__desc_push(d, spec->num_attrs);
  for (int a = 0; a < spec->num_attrs; ++a) {
    const tpc_attr_spec_t* as = &spec->attrs[a];
    MlirAttribute v = tpc_op_get_attr(op, kind, a);
    switch (as->kind) {
      case TPC_ATTR_BOOL:
        tpc__desc_push(d, 1);
        tpc__desc_push(d, tpc_op_get_bool(op, kind, a));
        break;
      case TPC_ATTR_I64:
        tpc__desc_push(d, 1);
        tpc__desc_push(d, tpc_op_get_i64(op, kind, a));
        break;
      case TPC_ATTR_ENUM:
        tpc__desc_push(d, 1);
        tpc__desc_push(d, tpc_op_get_enum(op, kind, a));
        break;
      case TPC_ATTR_F32:
        tpc__desc_push(d, 1);
        tpc__desc_push(d, tpc__f32_bits(tpc_op_get_f64(op, kind, a)));
        break;
      case TPC_ATTR_SYMBOL: {
        MlirAttribute shape = mlirOperationIsNull(mesh) ? (MlirAttribute){NULL} : tpc_mesh_get_shape_attr(mesh);
        intptr_t r = mlirAttributeIsNull(shape) ? 0 : mlirDenseArrayGetNumElements(shape);
        tpc__desc_push(d, r + 1);
        tpc__desc_push(d, r);
        for (intptr_t i = 0; i < r; ++i) tpc__desc_push(d, mlirDenseI64ArrayGetElement(shape, i));
        break;
      }
      case TPC_ATTR_ARRAY: {
        // Collective axes become a bitmask over the mesh's axes.
        int64_t mask = 0;
        MlirAttribute axes = mlirOperationIsNull(mesh) ? (MlirAttribute){NULL} : tpc_mesh_get_axes_attr(mesh);
        for (intptr_t i = 0; !mlirAttributeIsNull(v) && i < mlirArrayAttrGetNumElements(v); ++i)
          for (intptr_t j = 0; !mlirAttributeIsNull(axes) && j < mlirArrayAttrGetNumElements(axes); ++j)
            if (mlirAttributeEqual(mlirArrayAttrGetElement(v, i), mlirArrayAttrGetElement(axes, j)))
              mask |= (int64_t)1 << j;
        tpc__desc_push(d, 1);
        tpc__desc_push(d, mask);
        break;
      }
      case TPC_ATTR_DENSE_I64: {
        intptr_t n = mlirAttributeIsNull(v) ? 0 : mlirDenseArrayGetNumElements(v);
        tpc__desc_push(d, n);
        for (intptr_t i = 0; i < n; ++i) tpc__desc_push(d, mlirDenseI64ArrayGetElement(v, i));
        break;
      }
      default:
        tpc__desc_push(d, 0);
        break;
    }
  }
}

static void tpc__emit_desc_global(tpc_text_t* t, const char* name, const tpc__desc_t* d) {
  tpc_text_printf(t, "  llvm.mlir.global internal constant ");
  tpc_text_symbol_ref(t, "", mlirStringRefCreateFromCString(name));
  tpc_text_printf(t, "(dense<[");
  for (int i = 0; i < d->n; ++i) tpc_text_printf(t, "%s%lld", i ? ", " : "", (long long)d->v[i]);
  tpc_text_printf(t, "]> : tensor<%dxi64>) {addr_space = 0 : i32} : !llvm.array<%d x i64>\n", d->n, d->n);
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

// Writes the SSA name of the pointer that holds value |v| into |buf|.
static const char* tpc__pointer_of(const tpc__lowering_t* L, int v, char* buf, size_t size) {
  int s = tpc__storage_of(L, v);
  const tpc__value_t* val = &L->values[s];
  switch (val->store) {
    case TPC_STORE_ARG:
      snprintf(buf, size, "%%a%d", val->index);
      break;
    case TPC_STORE_RESULT:
      snprintf(buf, size, "%%r%d", val->index);
      break;
    default:
      snprintf(buf, size, "%%m%d", s);
      break;
  }
  return buf;
}

// Emits one runtime call with a slot array and a descriptor, branching to ^fail on error.
static void tpc__emit_call(tpc_text_t* body, int* block, const char* callee, char (*slots)[32], int num_slots,
                           const char* desc_global) {
  for (int s = 0; s < num_slots; ++s) tpc_text_printf(body, "    llvm.store %s, %%slot%d : !llvm.ptr, !llvm.ptr\n", slots[s], s);
  // The descriptor's name holds the function's, which may need quotes.
  tpc_text_printf(body, "    %%d%d = llvm.mlir.addressof ", *block);
  tpc_text_symbol_ref(body, "", mlirStringRefCreateFromCString(desc_global));
  tpc_text_printf(body,
                  " : !llvm.ptr\n"
                  "    %%rc%d = func.call @%s(%%exec, %%slots, %%d%d) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32\n"
                  "    %%ok%d = arith.cmpi eq, %%rc%d, %%zero : i32\n"
                  "    cf.cond_br %%ok%d, ^bb%d, ^fail(%%rc%d : i32)\n"
                  "  ^bb%d:\n",
                  *block, callee, *block, *block, *block, *block, *block + 1, *block, *block + 1);
  ++*block;
}

// The name of argument or result |i| into |t| (reset first): its tp.name attribute, whole, or
// "arg<i>" / "result<i>".
static void tpc__slot_name(MlirOperation func, bool result, intptr_t i, tpc_text_t* t) {
  t->len = 0;
  if (t->data) t->data[0] = '\0';
  MlirStringRef s = tpc_slot_tp_name(func, result, i);
  if (s.data)
    tpc_text_append_ref(s, t);
  else
    tpc_text_printf(t, "%s%ld", result ? "result" : "arg", (long)i);
}

// Lowers one function; appends globals and declarations to |globals| and the entry to |funcs|.
static MlirLogicalResult tpc__lower_func(tpc__lowering_t* L, tpc_text_t* globals, tpc_text_t* funcs,
                                         bool declared[TPC_OP_COUNT + 2], cJSON* json_funcs, bool poison) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(L->func, 0));
  MlirOperation ret;
  if (mlirLogicalResultIsFailure(tpc__analyze(L, body, &ret))) return mlirLogicalResultFailure();
  MlirStringRef fname = mlirStringAttrGetValue(
      mlirOperationGetAttributeByName(L->func, mlirStringRefCreateFromCString("sym_name")));
  int nargs = (int)mlirBlockGetNumArguments(body), nres = (int)mlirOperationGetNumOperands(ret);

  int max_slots = 2;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, ret); op = mlirOperationGetNextInBlock(op)) {
    const tpc_op_spec_t* spec = tpc_op_get_spec(tpc_op_get_kind(op));
    if (spec->num_operands + spec->num_results > max_slots) max_slots = spec->num_operands + spec->num_results;
  }
  tpc_text_t b = {0};
  tpc_text_printf(&b, "  func.func ");
  tpc_text_symbol_ref(&b, TPRT_ABI_ENTRY_PREFIX, fname);
  tpc_text_printf(&b, "(%%exec: !llvm.ptr, %%args: !llvm.ptr, %%results: !llvm.ptr, %%arena: !llvm.ptr) -> i32 {\n");
  tpc_text_printf(&b, "    %%zero = arith.constant 0 : i32\n    %%nslots = arith.constant %d : i64\n"
                      "    %%null = llvm.mlir.zero : !llvm.ptr\n"
                      "    %%slots = llvm.alloca %%nslots x !llvm.ptr : (i64) -> !llvm.ptr\n", max_slots);
  for (int s = 0; s < max_slots; ++s)
    tpc_text_printf(&b, "    %%slot%d = llvm.getelementptr %%slots[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n", s, s);
  for (int i = 0; i < nargs; ++i)
    tpc_text_printf(&b, "    %%ap%d = llvm.getelementptr %%args[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n"
                        "    %%a%d = llvm.load %%ap%d : !llvm.ptr -> !llvm.ptr\n", i, i, i, i);
  for (int j = 0; j < nres; ++j)
    tpc_text_printf(&b, "    %%rp%d = llvm.getelementptr %%results[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n"
                        "    %%r%d = llvm.load %%rp%d : !llvm.ptr -> !llvm.ptr\n", j, j, j, j);
  for (int v = 0; v < L->num_values; ++v)
    if (L->values[v].store == TPC_STORE_ARENA)
      // A 64-bit offset (the dialect's constant GEP indices are 32-bit: arenas past 2 GiB need this).
      tpc_text_printf(&b,
                      "    %%mo%d = llvm.mlir.constant(%lld : i64) : i64\n"
                      "    %%m%d = llvm.getelementptr %%arena[%%mo%d] : (!llvm.ptr, i64) -> !llvm.ptr, i8\n",
                      v, (long long)L->buffers[L->values[v].index].offset, v, v);

  int block = 0, desc_index = 0, op_index = 0;
  char slots[64][32];
  // Descriptor names hold the whole function name: a truncated one could collide with another's.
  size_t gsize = fname.length + 32;
  char* gname = malloc(gsize);
  bool ok = gname != NULL;
  if (!ok) mlirEmitError(mlirOperationGetLocation(L->func), "tp-lower-runtime: out of memory");
  for (MlirOperation op = mlirBlockGetFirstOperation(body); ok && !mlirOperationEqual(op, ret);
       op = mlirOperationGetNextInBlock(op)) {
    int kind = tpc_op_get_kind(op);
    const tpc_op_spec_t* spec = tpc_op_get_spec(kind);
    tpc__desc_t d = {{0}, 0, false};
    tpc__desc_push(&d, TPRT_ABI_DESC_MAGIC);
    tpc__desc_push(&d, spec->num_operands + spec->num_results);
    int s = 0;
    for (int k = 0; k < spec->num_operands + spec->num_results; ++k, ++s) {
      MlirValue v = k < spec->num_operands ? tpc_op_get_operand(op, kind, k) : tpc_op_get_result(op, kind, k - spec->num_operands);
      if (mlirValueIsNull(v)) {
        snprintf(slots[s], sizeof slots[s], "%%null");
        tpc__desc_tensor(&d, (MlirType){NULL});
        continue;
      }
      int vi = tpc__find_value(L, v);
      tpc__pointer_of(L, vi, slots[s], sizeof slots[s]);
      tpc__desc_tensor(&d, L->values[vi].tensor);
    }
    tpc__desc_attrs(&d, op, kind);
    if (d.overflow) {
      mlirEmitError(mlirOperationGetLocation(op), "tp-lower-runtime: op descriptor exceeds 512 entries");
      ok = false;
      break;
    }
    snprintf(gname, gsize, "__tpc_desc_%.*s_%d", (int)fname.length, fname.data, desc_index++);
    tpc__emit_desc_global(globals, gname, &d);
    char callee[96];
    snprintf(callee, sizeof callee, TPRT_ABI_OP_PREFIX "%s", spec->name + 3);
    if (!declared[kind]) {
      tpc_text_printf(globals, "  func.func private @%s(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32\n", callee);
      declared[kind] = true;
    }
    tpc__emit_call(&b, &block, callee, slots, s, gname);
    ++op_index;
    // Debug mode: poison the arena buffers that died with this op.
    for (int v = 0; poison && v < L->num_values; ++v) {
      if (L->values[v].store != TPC_STORE_ARENA || L->buffers[L->values[v].index].last_use != op_index - 1) continue;
      tpc__desc_t pd = {{0}, 0, false};
      tpc__desc_push(&pd, TPRT_ABI_DESC_MAGIC);
      tpc__desc_push(&pd, 1);
      tpc__desc_tensor(&pd, L->values[v].tensor);
      tpc__desc_push(&pd, 0);
      snprintf(gname, gsize, "__tpc_desc_%.*s_%d", (int)fname.length, fname.data, desc_index++);
      tpc__emit_desc_global(globals, gname, &pd);
      if (!declared[TPC_OP_COUNT + 1]) {
        tpc_text_printf(globals, "  func.func private @tprt_abi_poison(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32\n");
        declared[TPC_OP_COUNT + 1] = true;
      }
      tpc__pointer_of(L, v, slots[0], sizeof slots[0]);
      tpc__emit_call(&b, &block, "tprt_abi_poison", slots, 1, gname);
    }
  }
  // Results that are arguments or returned twice are copied into place.
  for (int j = 0; ok && j < nres; ++j) {
    int v = tpc__find_value(L, mlirOperationGetOperand(ret, j)), s = tpc__storage_of(L, v);
    if (L->values[s].store == TPC_STORE_RESULT && L->values[s].index == j) continue;
    tpc__desc_t d = {{0}, 0, false};
    tpc__desc_push(&d, TPRT_ABI_DESC_MAGIC);
    tpc__desc_push(&d, 2);
    tpc__desc_tensor(&d, L->values[v].tensor);
    tpc__desc_tensor(&d, L->values[v].tensor);
    tpc__desc_push(&d, 0);
    snprintf(gname, gsize, "__tpc_desc_%.*s_%d", (int)fname.length, fname.data, desc_index++);
    tpc__emit_desc_global(globals, gname, &d);
    if (!declared[TPC_OP_COUNT]) {
      tpc_text_printf(globals, "  func.func private @tprt_abi_copy(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32\n");
      declared[TPC_OP_COUNT] = true;
    }
    tpc__pointer_of(L, v, slots[0], sizeof slots[0]);
    snprintf(slots[1], sizeof slots[1], "%%r%d", j);
    tpc__emit_call(&b, &block, "tprt_abi_copy", slots, 2, gname);
  }
  tpc_text_printf(&b, "    return %%zero : i32\n  ^fail(%%code: i32):\n    return %%code : i32\n  }\n");
  if (ok) tpc_text_append_ref((MlirStringRef){b.data ? b.data : "", b.len}, funcs);
  tpc_text_free(&b);
  free(gname);
  if (!ok) return mlirLogicalResultFailure();

  cJSON* f = cJSON_CreateObject();
  // The name and the entry point in full: the runtime looks the entry up by this exact string.
  tpc_text_t fn = {0}, entry = {0};
  tpc_text_printf(&fn, "%.*s", (int)fname.length, fname.data);
  tpc_text_printf(&entry, TPRT_ABI_ENTRY_PREFIX "%.*s", (int)fname.length, fname.data);
  cJSON_AddStringToObject(f, "name", fn.data ? fn.data : "");
  cJSON_AddStringToObject(f, "entry", entry.data ? entry.data : "");
  tpc_text_free(&fn);
  tpc_text_free(&entry);
  tpc_text_t name = {0};
  cJSON_AddNumberToObject(f, "arena_bytes", (double)L->arena_bytes);
  cJSON_AddNumberToObject(f, "arena_live_peak_bytes", (double)L->arena_live_peak);
  // tp-gtp's schedule: how many contractions ahead of its use each weight's gather starts.
  MlirAttribute prefetch = mlirOperationGetAttributeByName(L->func, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_GTP_PREFETCH));
  if (!mlirAttributeIsNull(prefetch) && mlirAttributeIsAInteger(prefetch))
    cJSON_AddNumberToObject(f, "gtp_prefetch", (double)mlirIntegerAttrGetValueInt(prefetch));
  cJSON* args = cJSON_AddArrayToObject(f, "args");
  for (int i = 0; i < nargs; ++i) {
    tpc__slot_name(L->func, false, i, &name);
    tpc_manifest_tensor(args, name.data ? name.data : "", L->values[i].tensor, tpc_slot_attr(L->func, false, i, TPC_ARG_ATTR_SHARD));
  }
  cJSON* results = cJSON_AddArrayToObject(f, "results");
  for (int j = 0; j < nres; ++j) {
    tpc__slot_name(L->func, true, j, &name);
    tpc_manifest_tensor(results, name.data ? name.data : "", L->values[tpc__find_value(L, mlirOperationGetOperand(ret, j))].tensor,
                     tpc_slot_attr(L->func, true, j, TPC_ARG_ATTR_SHARD));
  }
  tpc_text_free(&name);
  cJSON_AddItemToArray(json_funcs, f);
  return mlirLogicalResultSuccess();
}

//===----------------------------------------------------------------------===//
// Pass callbacks
//===----------------------------------------------------------------------===//

// Stops a walk at the first tp op, which it stores in |user|.
static MlirWalkResult tpc__find_tp_op(MlirOperation op, void* user) {
  if (tpc_op_get_kind(op) == TPC_OP_UNKNOWN) return MlirWalkResultAdvance;
  *(MlirOperation*)user = op;
  return MlirWalkResultInterrupt;
}

// Only the bodies of top-level func.func ops are lowered, and every tp.mesh is removed: a tp op
// anywhere else would be left behind, naming a mesh that no longer exists.
static MlirLogicalResult tpc__check_placement(MlirBlock top) {
  for (MlirOperation o = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (tpc__op_is(o, "func.func") || tpc_is_mesh(o)) continue;
    MlirOperation found = {NULL};
    mlirOperationWalk(o, tpc__find_tp_op, &found, MlirWalkPreOrder);
    if (mlirOperationIsNull(found)) continue;
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(found));
    MlirStringRef outer = mlirIdentifierStr(mlirOperationGetName(o));
    char msg[256];
    snprintf(msg, sizeof msg,
             "tp-lower-runtime: '%.*s' is inside '%.*s'; only the bodies of top-level func.func ops are lowered",
             (int)n.length, n.data, (int)outer.length, outer.data);
    mlirEmitError(mlirOperationGetLocation(found), msg);
    return mlirLogicalResultFailure();
  }
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult tpc__lower_run(MlirOperation module, void* options) {
  MlirModule m = mlirModuleFromOperation(module);
  if (mlirModuleIsNull(m)) {
    mlirEmitError(mlirOperationGetLocation(module), "tp-lower-runtime runs on a builtin.module");
    return mlirLogicalResultFailure();
  }
  MlirBlock top = mlirModuleGetBody(m);
  if (mlirLogicalResultIsFailure(tpc__check_placement(top))) return mlirLogicalResultFailure();
  tpc__lowering_t* L = calloc(1, sizeof *L);
  cJSON* root = cJSON_CreateObject();
  if (!L || !root) {
    free(L);
    cJSON_Delete(root);
    return mlirLogicalResultFailure();
  }
  cJSON_AddNumberToObject(root, "abi", TPRT_ABI_VERSION);
  tpc_manifest_module_attrs(root, module);
  cJSON* json_funcs = cJSON_AddArrayToObject(root, "functions");
  tpc_text_t globals = {0}, funcs = {0};
  bool declared[TPC_OP_COUNT + 2] = {false};
  bool ok = true;
  int64_t arena = 0;
  for (MlirOperation o = mlirBlockGetFirstOperation(top); ok && !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!tpc__op_is(o, "func.func") || mlirRegionIsNull(mlirOperationGetRegion(o, 0)) ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(o, 0))))
      continue;
    memset(L, 0, sizeof *L);
    L->func = o;
    L->module = module;
    L->cap_values = tpc_func_value_bound(o, 1);
    L->values = calloc((size_t)L->cap_values, sizeof *L->values);
    L->buffers = calloc((size_t)L->cap_values, sizeof *L->buffers);
    if (!L->values || !L->buffers) {
      mlirEmitError(mlirOperationGetLocation(o), "tp-lower-runtime: out of memory for the function's value table");
      ok = false;
    }
    ok = ok && mlirLogicalResultIsSuccess(
        tpc__lower_func(L, &globals, &funcs, declared, json_funcs, options && ((tpc__lower_options_t*)options)->poison));
    if (L->arena_bytes > arena) arena = L->arena_bytes;
    free(L->values);
    free(L->buffers);
    L->values = NULL;
    L->buffers = NULL;
  }
  char* json = ok ? cJSON_PrintUnformatted(root) : NULL;
  tpc_text_t text = {0};
  if (ok && json) {
    tpc_text_printf(&text, "%s%s", globals.data ? globals.data : "", funcs.data ? funcs.data : "");
    tpc_text_printf(&text, "  llvm.mlir.global external constant @" TPRT_ABI_MODULE_INFO_SYMBOL "(\"");
    tpc_text_append_mlir_escaped(&text, json, strlen(json));
    tpc_text_printf(&text, "\\00\") {addr_space = 0 : i32} : !llvm.array<%zu x i8>\n", strlen(json) + 1);
  }
  ok = ok && json && !text.oom && !globals.oom && !funcs.oom;
  // Replace the tp functions and meshes by the lowered ops.
  ok = ok && tpc_replace_functions(module, text.data, true, "tp-lower-runtime", "lowered IR");
  if (ok) {
    MlirContext ctx = mlirOperationGetContext(module);
    mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_ARENA_BYTES),
                                    mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), arena));
  }
  cJSON_free(json);
  cJSON_Delete(root);
  tpc_text_free(&globals);
  tpc_text_free(&funcs);
  tpc_text_free(&text);
  free(L);
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

//===----------------------------------------------------------------------===//
// Public constructor
//===----------------------------------------------------------------------===//

static tpc_pass_info_t tpc__lower_runtime_info = {
    .argument = "tp-lower-runtime",
    .description = "Plan all intermediate tensors into one arena and lower tp ops to runtime ABI calls",
    .run = tpc__lower_run,
};

MlirPass tpc_create_lower_runtime_pass(void) { return tpc_pass_create(&tpc__lower_runtime_info, NULL); }

static tpc__lower_options_t tpc__poison_options = {.poison = true};
static tpc_pass_info_t tpc__lower_runtime_poison_info = {
    .argument = "tp-lower-runtime-poison",
    .description = "tp-lower-runtime, plus poisoning of every arena buffer after its last use (memory-plan debugging)",
    .run = tpc__lower_run,
};

MlirPass tpc_create_lower_runtime_poison_pass(void) {
  return tpc_pass_create(&tpc__lower_runtime_poison_info, &tpc__poison_options);
}
