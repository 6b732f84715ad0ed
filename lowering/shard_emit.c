// Helpers of tp-shard shared by its rule files: value lookup, diagnostics, and the emission of
// ops, collectives and MoE buckets into the per-rank function's text (see shard_impl.h).
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "shard_impl.h"
#include "tp_ops.h"

uint32_t tpc__bit(int axis) { return axis >= 0 ? 1u << axis : 0u; }

uint32_t tpc__data_axes(const tpc__shard_t* S) { return tpc__bit(S->dp) | tpc__bit(S->gtp) | tpc__bit(S->mb); }

// Ends an emitted op's line with the location of the op being sharded, so that diagnostics on
// the per-rank program point into the user's file.
static void tpc__end_line(tpc__shard_t* S) {
  if (!mlirOperationIsNull(S->cur_op)) {
    tpc_text_printf(&S->body, " ");
    mlirLocationPrint(mlirOperationGetLocation(S->cur_op), tpc_text_append_ref, &S->body);
  }
  tpc_text_printf(&S->body, "\n");
}

tpc__sval_t* tpc__find(tpc__shard_t* S, MlirValue v) {
  for (int i = 0; i < S->num_vals; ++i)
    if (mlirValueEqual(S->vals[i].value, v)) return &S->vals[i];
  return NULL;
}

MlirLogicalResult tpc__error(MlirOperation op, tpc_text_t* msg) {
  mlirEmitError(mlirOperationGetLocation(op), msg->data ? msg->data : "tp-shard: error");
  tpc_text_free(msg);
  return mlirLogicalResultFailure();
}

// "tp-shard: <op> <what>: has layout [...]; <why>" at |op|.
MlirLogicalResult tpc__layout_error(tpc__shard_t* S, MlirOperation op, const char* what,
                                           const tpc_layout_t* l, const char* why) {
  tpc_text_t m = {0};
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  tpc_text_printf(&m, "tp-shard: '%.*s' %s is laid out ", (int)n.length, n.data, what);
  tpc_layout_describe(l, &S->mesh, &m);
  tpc_text_printf(&m, "; %s", why);
  return tpc__error(op, &m);
}

MlirLogicalResult tpc__check_divisible(tpc__shard_t* S, MlirOperation op, const char* what,
                                              const tpc_layout_t* l) {
  for (int d = 0; d < l->rank; ++d)
    if (tpc_layout_local_dim(l, &S->mesh, d) < 0) {
      tpc_text_t m = {0};
      MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
      tpc_text_printf(&m, "tp-shard: '%.*s' %s: dimension %d (size %lld) is not divisible by ", (int)n.length, n.data,
                      what, d, (long long)l->logical[d]);
      tpc_layout_t one = *l;
      for (int e = 0; e < one.rank; ++e) one.mask[e] = e == d ? l->mask[d] : 0, one.blocks[e] = e == d ? l->blocks[d] : 1;
      tpc_layout_describe(&one, &S->mesh, &m);
      tpc_text_printf(&m, " = %lld ranks × %lld blocks", (long long)tpc_mesh_group_size(&S->mesh, l->mask[d]),
                      (long long)l->blocks[d]);
      return tpc__error(op, &m);
    }
  return mlirLogicalResultSuccess();
}

tpc__sval_t* tpc__new_value(tpc__shard_t* S, MlirValue v, const char* name, const tpc_layout_t* l) {
  if (S->num_vals == S->cap_vals) return NULL;
  tpc__sval_t* s = &S->vals[S->num_vals++];
  s->value = v;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->layout = *l;
  s->recv_sizes = s->own_sizes = NULL;
  s->gathered = s->dispatched = s->combined = s->seg_sizes = NULL;
  return s;
}

//===----------------------------------------------------------------------===//
// Emission helpers
//===----------------------------------------------------------------------===//

// Prints the op's attributes (minus |skip|) as dictionary entries; returns how many.
static int tpc__print_attr_entries(tpc_text_t* t, MlirOperation op, const char* skip) {
  bool first = true;
  int count = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(op); ++i) {
    MlirNamedAttribute na = mlirOperationGetAttribute(op, i);
    MlirStringRef n = mlirIdentifierStr(na.name);
    if (skip && mlirStringRefEqual(n, mlirStringRefCreateFromCString(skip))) continue;
    tpc_text_printf(t, "%s", first ? "" : ", ");
    tpc_text_attr_name(t, n);
    tpc_text_printf(t, " = ");
    mlirAttributePrint(na.attribute, tpc_text_append_ref, t);
    first = false;
    ++count;
  }
  return count;
}

// Emits a collective and returns the value it defines.
tpc__sval_t* tpc__emit_collective_mask(tpc__shard_t* S, uint32_t mask, const char* op_name, const tpc__sval_t* in,
                                       const char* extra_attrs, const tpc_layout_t* out) {
  char name[32];
  snprintf(name, sizeof name, "%%s%d", S->counter++);
  tpc_text_printf(&S->body, "    %s = \"%s\"(%s) {mesh = ", name, op_name, in->name);
  tpc_text_symbol_ref(&S->body, "", S->mesh.name);
  tpc_text_printf(&S->body, ", axes = [");
  bool first = true;
  for (int i = 0; i < S->mesh.num_axes; ++i)
    if (mask & (1u << i)) {
      tpc_text_printf(&S->body, "%s\"%s\"", first ? "" : ", ", S->mesh.axes[i]);
      first = false;
    }
  tpc_text_printf(&S->body, "]%s} : (", extra_attrs);
  tpc_layout_print_local_type(&in->layout, &S->mesh, &S->body);
  tpc_text_printf(&S->body, ") -> ");
  tpc_layout_print_local_type(out, &S->mesh, &S->body);
  tpc__end_line(S);
  MlirValue none = {NULL};
  return tpc__new_value(S, none, name, out);
}

tpc__sval_t* tpc__emit_collective_on(tpc__shard_t* S, int axis, const char* op_name, const tpc__sval_t* in,
                                            const char* extra_attrs, const tpc_layout_t* out) {
  return tpc__emit_collective_mask(S, tpc__bit(axis), op_name, in, extra_attrs, out);
}

// A collective over the tp axis.
tpc__sval_t* tpc__emit_collective(tpc__shard_t* S, const char* op_name, const tpc__sval_t* in,
                                         const char* extra_attrs, const tpc_layout_t* out) {
  return tpc__emit_collective_on(S, S->tp, op_name, in, extra_attrs, out);
}

// A layout for values that exist on one rank only (dispatched expert rows): its local shape.
tpc_layout_t tpc__local_only(const tpc_layout_t* like, int64_t rows, int64_t cols, MlirType element) {
  tpc_layout_t l = *like;
  l.rank = 2;
  l.logical[0] = rows;
  l.logical[1] = cols;
  l.mask[0] = l.mask[1] = 0;
  l.blocks[0] = l.blocks[1] = 1;
  l.element = element;
  return l;
}

// Emits "tp.moe_bucket" / "tp.moe_unbucket" of |x| with |sizes| into |buckets| buckets.
tpc__sval_t* tpc__emit_bucket(tpc__shard_t* S, const char* op_name, const tpc__sval_t* x,
                                     const tpc__sval_t* sizes, int64_t buckets, const tpc_layout_t* out) {
  char name[32];
  snprintf(name, sizeof name, "%%s%d", S->counter++);
  tpc_text_printf(&S->body, "    %s = \"%s\"(%s, %s) {buckets = %lld : i64} : (", name, op_name, x->name, sizes->name,
                  (long long)buckets);
  tpc_layout_print_local_type(&x->layout, &S->mesh, &S->body);
  tpc_text_printf(&S->body, ", ");
  tpc_layout_print_local_type(&sizes->layout, &S->mesh, &S->body);
  tpc_text_printf(&S->body, ") -> ");
  tpc_layout_print_local_type(out, &S->mesh, &S->body);
  tpc__end_line(S);
  MlirValue none = {NULL};
  return tpc__new_value(S, none, name, out);
}

// Emits |op| with operands |ins| and results |outs| (local types), extra attributes appended.
void tpc__emit_op(tpc__shard_t* S, MlirOperation op, tpc__sval_t* const* ins, int nin,
                         const tpc_layout_t* outs, int nout, const char* extra_attrs, const char* skip_attr) {
  char base[32];
  snprintf(base, sizeof base, "%%o%d", S->counter++);
  tpc_text_printf(&S->body, "    ");
  if (nout == 1) tpc_text_printf(&S->body, "%s = ", base);
  if (nout > 1) tpc_text_printf(&S->body, "%s:%d = ", base, nout);
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  tpc_text_printf(&S->body, "\"%.*s\"(", (int)n.length, n.data);
  for (int i = 0; i < nin; ++i) tpc_text_printf(&S->body, "%s%s", i ? ", " : "", ins[i]->name);
  tpc_text_printf(&S->body, ") {");
  int printed = tpc__print_attr_entries(&S->body, op, skip_attr);
  if (extra_attrs && *extra_attrs) tpc_text_printf(&S->body, "%s%s", printed ? ", " : "", extra_attrs);
  tpc_text_printf(&S->body, "} : (");
  for (int i = 0; i < nin; ++i) {
    if (i) tpc_text_printf(&S->body, ", ");
    tpc_layout_print_local_type(&ins[i]->layout, &S->mesh, &S->body);
  }
  tpc_text_printf(&S->body, ") -> (");
  for (int i = 0; i < nout; ++i) {
    if (i) tpc_text_printf(&S->body, ", ");
    tpc_layout_print_local_type(&outs[i], &S->mesh, &S->body);
  }
  tpc_text_printf(&S->body, ")");
  tpc__end_line(S);
  for (int i = 0; i < nout; ++i) {
    char name[48];
    if (nout == 1)
      snprintf(name, sizeof name, "%s", base);
    else
      snprintf(name, sizeof name, "%s#%d", base, i);
    tpc__new_value(S, mlirOperationGetResult(op, i), name, &outs[i]);
  }
}


tpc__sval_t* tpc__gather_tokens(tpc__shard_t* S, tpc__sval_t* v) {
  uint32_t tp = tpc__bit(S->tp);
  if (!(v->layout.mask[0] & tp) || tpc_mesh_group_size(&S->mesh, tp) == 1) return v;
  if (v->gathered) return v->gathered;
  tpc_layout_t g = v->layout;
  g.mask[0] &= ~tp;
  tpc__sval_t* out = tpc__emit_collective_mask(S, tp, TPC_OP_NAME_ALL_GATHER, v, ", dim = 0 : i64", &g);
  v->gathered = out;
  return out;
}

tpc__sval_t* tpc__gather_counts(tpc__shard_t* S, tpc__sval_t* sizes) {
  if (sizes->seg_sizes) return sizes->seg_sizes;
  tpc_layout_t g = sizes->layout;
  g.logical[0] *= tpc_mesh_group_size(&S->mesh, tpc__bit(S->tp));
  sizes->seg_sizes = tpc__emit_collective_mask(S, tpc__bit(S->tp), TPC_OP_NAME_ALL_GATHER, sizes, ", dim = 0 : i64", &g);
  return sizes->seg_sizes;
}
