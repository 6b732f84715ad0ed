// tp-invariant: applies the module's tp.numerics ("invariant" or "exact") to a per-rank module,
// so that every TP degree, sequence-parallel setting and batch size computes the expression that
// TP = 1 computes (docs/numerics.md, "TP invariance"). With tp.numerics = "fast" (or absent) the
// pass changes nothing.
//
// One mechanism serves every op. tp-shard completes each cross-rank contraction the same way: an
// op marked `partial` computes an unreduced f32 sum over its local share of the contracted
// dimension and a reducing collective (tp.all_reduce, tp.reduce_scatter and their async and fused
// forms) over R ranks finishes it. The canonical K accumulation splits the logical dimension into
// C = tp.chunks chunks combined by a fixed pairwise tree; when the R ranks own consecutive equal
// shares, rank r owns chunks [r·C/R, (r+1)·C/R), i.e. one subtree. So the pass
//   - sets the producer's `chunks` to C/R: its partial is exactly its subtree's sum;
//   - sets the collective's `order` to "canonical": the partials travel as f32 by pure data
//     movement and are summed in the same pairwise tree over ranks, i.e. the top log2(R) levels.
// The dgrad of a linear that feeds a gate/up GLU (interleave 0) contracts N = [gate | up], whose
// TP shard is stride-2 (F/R gate rows and F/R up rows); it gets `segments = 2`, the order in which
// every chunk holds matching runs of gate and up rows, so every TP degree's shard is again a
// subtree (docs/numerics.md, "Segmented contractions"). Padding keeps the TP = 1 definition
// (chunk size ceil(K/C)); where a shard boundary would fall inside a chunk the pass refuses.
//
// strategy = "gather" (module attribute tp.strategy) is TransformerEngine's method instead: the
// operands of a row-parallel linear, a column-parallel dgrad or a token-sharded wgrad are
// gathered along the contracted dimension and every rank runs the full TP = 1 contraction
// (under sequence parallelism an all-to-all brings each rank its own tokens with every K column,
// instead of computing all tokens and keeping a slice). Reductions with no GEMM (norm parameter
// gradients) stay canonical.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "pass_util.h"
#include "passes.h"
#include "tpc_dialect.h"
#include "tpc_verify.h"

typedef struct {
  MlirContext ctx;
  int64_t chunks;  // C
  bool gather;
  bool ok;
  // Ops erased ahead of the walk (a chain of collectives rewritten from its first one).
  tpc_op_list_t dead;
} tpc__inv_t;

// Erases |op| and remembers it, so that the walk over the ops listed before skips it.
static void tpc__erase(tpc__inv_t* I, MlirOperation op) {
  if (!tpc_op_list_push(&I->dead, op)) {
    I->ok = false;
    return;
  }
  mlirOperationDestroy(op);
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static int tpc__attr_index(int kind, const char* name) {
  return tpc_op_spec_find_attr(tpc_op_get_spec(kind), tpc_ref(name));
}

static int64_t tpc__get_i64(MlirOperation op, int kind, const char* name, int64_t fallback) {
  int i = tpc__attr_index(kind, name);
  return i < 0 ? fallback : tpc_op_get_i64(op, kind, i);
}

static bool tpc__get_bool(MlirOperation op, int kind, const char* name) {
  int i = tpc__attr_index(kind, name);
  return i >= 0 && tpc_op_get_bool(op, kind, i);
}

static void tpc__set_i64(tpc__inv_t* I, MlirOperation op, const char* name, int64_t v) {
  mlirOperationSetAttributeByName(op, tpc_ref(name), mlirIntegerAttrGet(mlirIntegerTypeGet(I->ctx, 64), v));
}

static void tpc__set_str(tpc__inv_t* I, MlirOperation op, const char* name, const char* v) {
  mlirOperationSetAttributeByName(op, tpc_ref(name), mlirStringAttrGet(I->ctx, tpc_ref(v)));
}

static const char* tpc__op_name(MlirOperation op, char* buf, size_t size) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  snprintf(buf, size, "%.*s", (int)n.length, n.data);
  return buf;
}

// Emits "'<op>' op: tp-invariant: <message>" at |op| and marks the pass failed.
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void tpc__refuse(tpc__inv_t* I, MlirOperation op, const char* fmt, ...) {
  char msg[768], name[64];
  int n = snprintf(msg, sizeof msg, "'%s' op: tp-invariant: ", tpc__op_name(op, name, sizeof name));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  mlirEmitError(mlirOperationGetLocation(op), msg);
  I->ok = false;
}

static MlirOperation tpc__producer(MlirValue v) {
  MlirOperation none = {NULL};
  return mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : none;
}

// The static shape of a ranked tensor type (rank <= 8), in a buffer valid until the next call.
static const int64_t* tpc__dims(MlirType t) {
  static _Thread_local int64_t dims[8];
  for (intptr_t i = 0; i < mlirShapedTypeGetRank(t) && i < 8; ++i) dims[i] = mlirShapedTypeGetDimSize(t, i);
  return dims;
}

static int64_t tpc__dim(MlirValue v, intptr_t d) {
  MlirType t = mlirValueGetType(v);
  return mlirTypeIsARankedTensor(t) && d < mlirShapedTypeGetRank(t) ? mlirShapedTypeGetDimSize(t, d) : -1;
}

// The tp.add that adds a rank-1 bias to |v| when that is |v|'s only use (tp-shard's bias of a
// row-parallel linear, added once after the reduction), or a null op.
static MlirOperation tpc__bias_add(MlirValue v) {
  MlirOperation none = {NULL};
  MlirOpOperand u = mlirValueGetFirstUse(v);
  if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u))) return none;
  MlirOperation add = mlirOpOperandGetOwner(u);
  if (tpc_op_get_kind(add) != TPC_OP_ADD || mlirOpOperandGetOperandNumber(u) != 0) return none;
  MlirType b = mlirValueGetType(tpc_add_get_rhs(add));
  return mlirTypeIsARankedTensor(b) && mlirShapedTypeGetRank(b) == 1 ? add : none;
}

// The number of ranks a collective's `axes` span on its mesh, or -1 (with a diagnostic).
static int64_t tpc__group_size(tpc__inv_t* I, MlirOperation op) {
  MlirAttribute mesh_ref = mlirOperationGetAttributeByName(op, tpc_ref("mesh"));
  MlirAttribute axes = mlirOperationGetAttributeByName(op, tpc_ref("axes"));
  MlirOperation mesh = {NULL};
  if (!mlirAttributeIsNull(mesh_ref) && mlirAttributeIsAFlatSymbolRef(mesh_ref))
    mesh = tpc_mesh_lookup(op, mlirFlatSymbolRefAttrGetValue(mesh_ref));
  if (mlirOperationIsNull(mesh) || mlirAttributeIsNull(axes) || !mlirAttributeIsAArray(axes)) {
    tpc__refuse(I, op, "the collective names no tp.mesh of this module");
    return -1;
  }
  MlirAttribute mesh_axes = tpc_mesh_get_axes_attr(mesh), shape = tpc_mesh_get_shape_attr(mesh);
  int64_t size = 1;
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes); ++i)
    for (intptr_t j = 0; j < mlirArrayAttrGetNumElements(mesh_axes); ++j)
      if (mlirAttributeEqual(mlirArrayAttrGetElement(axes, i), mlirArrayAttrGetElement(mesh_axes, j)))
        size *= mlirDenseI64ArrayGetElement(shape, j);
  return size;
}

//===----------------------------------------------------------------------===//
// The canonical contractions
//===----------------------------------------------------------------------===//

// What a contraction op reduces: the local size of its contracted dimension and its name.
typedef struct {
  int64_t size;
  const char* dim;
  bool dgrad;   // contracts N of a linear's dgrad (may be segmented)
  bool tokens;  // contracts the tokens (padding means more tokens, not a wider model)
} tpc__contraction_t;

// Fills |c| for the ops whose partial sum the canonical tree can split; false for any other op.
static bool tpc__contraction(MlirOperation op, int kind, tpc__contraction_t* c) {
  memset(c, 0, sizeof *c);
  switch (kind) {
    case TPC_OP_LINEAR:
    case TPC_OP_GROUPED_LINEAR:
      c->size = tpc__dim(tpc_op_get_operand(op, kind, 0), 1);
      c->dim = "K";
      return true;
    case TPC_OP_LINEAR_DGRAD:
    case TPC_OP_GROUPED_LINEAR_DGRAD:
      c->size = tpc__dim(tpc_op_get_operand(op, kind, 0), 1);
      c->dim = "N";
      c->dgrad = true;
      return true;
    case TPC_OP_LINEAR_WGRAD:
    case TPC_OP_BIAS_GRAD:
    case TPC_OP_RMSNORM_GRAD:
    case TPC_OP_LAYERNORM_GRAD:
    case TPC_OP_EMBEDDING_GRAD:
    case TPC_OP_CROSS_ENTROPY_WGRAD:
      c->size = tpc__dim(tpc_op_get_operand(op, kind, 0), 0);
      c->dim = "token count M";
      c->tokens = true;
      return true;
    case TPC_OP_CROSS_ENTROPY_DGRAD:  // contracts the head's rows: the vocabulary
      c->size = tpc__dim(tpc_op_get_operand(op, kind, 1), 0);
      c->dim = "vocabulary V";
      return true;
    default:
      return false;
  }
}

// A dgrad whose dy comes from the gradient of a gate/up (interleave 0) GLU contracts [gate | up].
static bool tpc__dgrad_of_glu(MlirOperation op, int kind) {
  MlirOperation p = tpc__producer(tpc_op_get_operand(op, kind, 0));
  if (mlirOperationIsNull(p) || tpc_op_get_kind(p) != TPC_OP_GLU_GRAD) return false;
  return tpc_op_get_i64(p, TPC_OP_GLU_GRAD, TPC_GLU_GRAD_ATTR_INTERLEAVE) == 0;
}

// Makes |producer|'s contraction the subtree of C/R chunks that an R-rank canonical reduction
// completes (R = 1: the whole tree). |coll| is the collective (for messages), or a null op.
static void tpc__canonical_producer(tpc__inv_t* I, MlirOperation producer, MlirOperation coll, int64_t ranks) {
  int kind = tpc_op_get_kind(producer);
  tpc__contraction_t c;
  char cname[64];
  if (!tpc__contraction(producer, kind, &c)) return;
  int64_t C = I->chunks, local = C / ranks, segments = 1;
  if (c.dgrad && tpc__dgrad_of_glu(producer, kind)) {
    // Stride-2 rows: chunks hold matching gate and up runs. Needs N % (2C) == 0 over all ranks.
    if (c.size % (2 * local) == 0) {
      segments = 2;
      tpc__set_i64(I, producer, "segments", 2);
    } else if (ranks > 1) {
      tpc__refuse(I, producer,
                  "this dgrad contracts the gate and up rows of a GLU (N = %lld on each of %lld ranks, stride-2 "
                  "shards), whose canonical order needs the logical N = %lld divisible by 2 x tp.chunks = %lld; "
                  "change tp.chunks or the FFN size",
                  (long long)c.size, (long long)ranks, (long long)(c.size * ranks), (long long)(2 * C));
      return;
    }
  }
  if (ranks == 1) return;  // the module-wide tree already is the op's (chunks stays 0)
  if (c.size % (local * segments) != 0) {
    tpc__refuse(I, producer,
                "its contracted %s is split over %lld ranks (%lld each, summed by '%s'); the shares are subtrees "
                "of the canonical tree only if the whole %s, %lld, is a multiple of tp.chunks = %lld%s. %s, or "
                "change tp.chunks (docs/numerics.md, \"Padding rules\")",
                c.dim, (long long)ranks, (long long)c.size, tpc__op_name(coll, cname, sizeof cname), c.dim,
                (long long)(c.size * ranks), (long long)C, segments > 1 ? " x 2 (gate and up segments)" : "",
                c.tokens ? "Pad the batch to a multiple of that many tokens" : "Pad the model dimension with zeros");
    return;
  }
  int64_t have = tpc__get_i64(producer, kind, "chunks", 0);
  if (have != 0 && have != local) {
    tpc__refuse(I, producer,
                "its partial is summed by reductions over different rank counts (%lld and %lld ranks), so no "
                "single split of the chunk tree serves both; reduce it once",
                (long long)(C / have), (long long)ranks);
    return;
  }
  tpc__set_i64(I, producer, "chunks", local);
}

//===----------------------------------------------------------------------===//
// strategy = "gather"
//===----------------------------------------------------------------------===//

// |v|'s tensor type with dimension |grow| multiplied by |ranks| and, if |shrink| >= 0, dimension
// |shrink| divided by it.
static MlirType tpc__shaped_like(MlirValue v, int64_t grow, int64_t ranks, int64_t shrink) {
  MlirType t = mlirValueGetType(v);
  intptr_t rank = mlirShapedTypeGetRank(t);
  int64_t shape[8];
  for (intptr_t i = 0; i < rank && i < 8; ++i) shape[i] = mlirShapedTypeGetDimSize(t, i);
  shape[grow] *= ranks;
  if (shrink >= 0) shape[shrink] /= ranks;
  return mlirRankedTensorTypeGet(rank, shape, mlirShapedTypeGetElementType(t), mlirAttributeGetNull());
}

// The attributes of |op| but `partial` and `chunks`, into |attrs| (at most |cap|): the whole
// contraction that replaces a partial one. Returns how many.
static intptr_t tpc__whole_attrs(MlirOperation op, MlirNamedAttribute* attrs, intptr_t cap) {
  intptr_t n = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(op) && n < cap; ++i) {
    MlirNamedAttribute at = mlirOperationGetAttribute(op, i);
    MlirStringRef name = mlirIdentifierStr(at.name);
    if (mlirStringRefEqual(name, tpc_ref("partial")) || mlirStringRefEqual(name, tpc_ref("chunks"))) continue;
    attrs[n++] = at;
  }
  return n;
}

// Inserts before |before| a data-movement collective of |v| over |axes| (a string array of |mesh|'s
// axes, |ranks| ranks): an all_gather along |dim| (|split| < 0), or an all_to_all that splits
// |split| and concatenates |dim|; `blocks` is written when |blocks| > 0.
static MlirValue tpc__data_move(tpc__inv_t* I, MlirOperation before, MlirValue v, MlirAttribute mesh, MlirAttribute axes,
                                int64_t ranks, int64_t dim, int64_t split, int64_t blocks) {
  MlirType i64 = mlirIntegerTypeGet(I->ctx, 64);
  MlirOperationState st = mlirOperationStateGet(tpc_ref(split < 0 ? TPC_OP_NAME_ALL_GATHER : TPC_OP_NAME_ALL_TO_ALL),
                                                mlirOperationGetLocation(before));
  MlirType out = tpc__shaped_like(v, dim, ranks, split);
  MlirNamedAttribute attrs[5];
  intptr_t n = 0;
  attrs[n++] = tpc_named_attr(I->ctx, "mesh", mesh);
  attrs[n++] = tpc_named_attr(I->ctx, "axes", axes);
  attrs[n++] = tpc_named_attr(I->ctx, split < 0 ? "dim" : "concat_dim", mlirIntegerAttrGet(i64, dim));
  if (split >= 0) attrs[n++] = tpc_named_attr(I->ctx, "split_dim", mlirIntegerAttrGet(i64, split));
  if (blocks > 0) attrs[n++] = tpc_named_attr(I->ctx, "blocks", mlirIntegerAttrGet(i64, blocks));
  mlirOperationStateAddOperands(&st, 1, &v);
  mlirOperationStateAddResults(&st, 1, &out);
  mlirOperationStateAddAttributes(&st, n, attrs);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before, op);
  return mlirOperationGetResult(op, 0);
}

// The same over |coll|'s mesh and axes, before |coll| (the gather strategy's operand moves).
static MlirValue tpc__move(tpc__inv_t* I, MlirOperation coll, MlirValue v, int64_t dim, int64_t split, int64_t ranks) {
  return tpc__data_move(I, coll, v, mlirOperationGetAttributeByName(coll, tpc_ref("mesh")),
                        mlirOperationGetAttributeByName(coll, tpc_ref("axes")), ranks, dim, split, -1);
}

// Replaces |producer| + |coll| (an all_reduce, or a reduce_scatter along the tokens) by gathers of
// the contraction's operands and the whole contraction on every rank. Returns false when the pair
// has no gather form, leaving it to the canonical strategy.
static bool tpc__gather(tpc__inv_t* I, MlirOperation coll, int ckind, MlirOperation producer, int64_t ranks) {
  int kind = tpc_op_get_kind(producer);
  bool scatter = ckind == TPC_OP_REDUCE_SCATTER;
  if (ckind != TPC_OP_ALL_REDUCE && !scatter) return false;
  if (scatter && tpc_op_get_i64(coll, TPC_OP_REDUCE_SCATTER, TPC_REDUCE_SCATTER_ATTR_DIM) != 0) return false;
  MlirValue a = tpc_op_get_operand(producer, kind, 0), b = tpc_op_get_operand(producer, kind, 1);
  MlirValue ga, gb;
  bool segmented = false;
  switch (kind) {
    case TPC_OP_LINEAR:  // x[M,K/R], w[N,K/R]: gather K
      if (!mlirValueIsNull(tpc_op_get_operand(producer, kind, TPC_LINEAR_SLOT_BIAS))) return false;
      ga = tpc__move(I, coll, a, 1, scatter ? 0 : -1, ranks);
      gb = tpc__move(I, coll, b, 1, -1, ranks);
      break;
    case TPC_OP_LINEAR_DGRAD:  // dy[M,N/R], w[N/R,K]: gather N
    case TPC_OP_GROUPED_LINEAR_DGRAD:  // dy[T,N/R], w[E,N/R,K]
      if (scatter && kind == TPC_OP_GROUPED_LINEAR_DGRAD) return false;
      segmented = tpc__dgrad_of_glu(producer, kind);
      ga = tpc__move(I, coll, a, 1, scatter ? 0 : -1, ranks);
      gb = tpc__move(I, coll, b, kind == TPC_OP_LINEAR_DGRAD ? 0 : 1, -1, ranks);
      break;
    case TPC_OP_GROUPED_LINEAR:  // x[T,K/R], w[E,N,K/R]
      if (scatter) return false;
      ga = tpc__move(I, coll, a, 1, -1, ranks);
      gb = tpc__move(I, coll, b, 2, -1, ranks);
      break;
    case TPC_OP_LINEAR_WGRAD:  // dy[M/R,N], x[M/R,K]: gather the tokens
      if (scatter) return false;
      ga = tpc__move(I, coll, a, 0, -1, ranks);
      gb = tpc__move(I, coll, b, 0, -1, ranks);
      break;
    default:
      return false;
  }
  // The whole contraction: the producer's op with the gathered operands, its attributes but
  // `partial` and `chunks`, and the collective's result type. A bias that tp-shard adds after
  // the reduction goes back into the linear, which adds it to the f32 sum before its rounding.
  MlirOperation bias_add = kind == TPC_OP_LINEAR ? tpc__bias_add(mlirOperationGetResult(coll, 0)) : (MlirOperation){NULL};
  MlirOperationState st = mlirOperationStateGet(mlirIdentifierStr(mlirOperationGetName(producer)),
                                                mlirOperationGetLocation(producer));
  intptr_t nops = mlirOperationGetNumOperands(producer);
  MlirValue operands[4] = {ga, gb};
  for (intptr_t i = 2; i < nops && i < 4; ++i) operands[i] = mlirOperationGetOperand(producer, i);
  if (!mlirOperationIsNull(bias_add)) operands[nops++] = tpc_add_get_rhs(bias_add);
  mlirOperationStateAddOperands(&st, nops, operands);
  MlirType out = mlirValueGetType(mlirOperationGetResult(mlirOperationIsNull(bias_add) ? coll : bias_add, 0));
  mlirOperationStateAddResults(&st, 1, &out);
  MlirNamedAttribute attrs[16];
  intptr_t na = tpc__whole_attrs(producer, attrs, 14);
  MlirType i64 = mlirIntegerTypeGet(I->ctx, 64);
  if (segmented) {
    attrs[na++] = tpc_named_attr(I->ctx, "segments", mlirIntegerAttrGet(i64, 2));
    attrs[na++] = tpc_named_attr(I->ctx, "blocks", mlirIntegerAttrGet(i64, ranks));
  }
  mlirOperationStateAddAttributes(&st, na, attrs);
  MlirOperation full = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(coll), coll, full);
  if (segmented) {
    tpc__contraction_t c;
    tpc__contraction(full, kind, &c);
    if (c.size % (2 * I->chunks) != 0)
      tpc__refuse(I, full,
                  "this dgrad contracts the gate and up rows of a GLU (N = %lld), whose canonical order needs N "
                  "divisible by 2 x tp.chunks = %lld; change tp.chunks or the FFN size",
                  (long long)c.size, (long long)(2 * I->chunks));
  }
  if (!mlirOperationIsNull(bias_add)) {
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(bias_add, 0), mlirOperationGetResult(full, 0));
    mlirOperationDestroy(bias_add);
  }
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(coll, 0), mlirOperationGetResult(full, 0));
  mlirOperationDestroy(coll);
  if (mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(producer, 0)))) mlirOperationDestroy(producer);
  return true;
}

// The reducing collectives and their reduced operand.
static int tpc__reduced_slot(int kind) {
  switch (kind) {
    case TPC_OP_ALL_REDUCE:
      return TPC_ALL_REDUCE_SLOT_INPUT;
    case TPC_OP_REDUCE_SCATTER:
      return TPC_REDUCE_SCATTER_SLOT_INPUT;
    case TPC_OP_REDUCE_SCATTER_START:
      return TPC_REDUCE_SCATTER_START_SLOT_INPUT;
    case TPC_OP_FUSED_ALLREDUCE_ADD_RMSNORM:
      return TPC_FUSED_ALLREDUCE_ADD_RMSNORM_SLOT_PARTIAL;
    case TPC_OP_FUSED_REDUCE_SCATTER_ADD_RMSNORM:
      return TPC_FUSED_REDUCE_SCATTER_ADD_RMSNORM_SLOT_PARTIAL;
    case TPC_OP_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE:
      return TPC_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_PARTIAL;
    default:
      return -1;
  }
}

// The value a reducing collective makes available: its result, or its tp.wait's (an async start).
static MlirValue tpc__completed(MlirOperation coll, int kind) {
  MlirValue r = mlirOperationGetResult(coll, 0);
  if (kind != TPC_OP_REDUCE_SCATTER_START) return r;
  MlirOpOperand u = mlirValueGetFirstUse(r);
  if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u))) return (MlirValue){NULL};
  MlirOperation w = mlirOpOperandGetOwner(u);
  return tpc_op_get_kind(w) == TPC_OP_WAIT ? mlirOperationGetResult(w, 0) : (MlirValue){NULL};
}

// True when |v| is the sum another reducing collective completed (directly or through tp.wait):
// a reduction over more axes continuing a chain (tp-gtp's reduce-scatter over gtp, then an
// all-reduce over dp, is one reduction over [dp, gtp] in the tree order).
static bool tpc__continues_chain(MlirValue v) {
  MlirOperation p = tpc__producer(v);
  int kind = mlirOperationIsNull(p) ? TPC_OP_UNKNOWN : tpc_op_get_kind(p);
  if (kind == TPC_OP_WAIT) {
    p = tpc__producer(mlirOperationGetOperand(p, 0));
    kind = mlirOperationIsNull(p) ? TPC_OP_UNKNOWN : tpc_op_get_kind(p);
  }
  return kind == TPC_OP_ALL_REDUCE || kind == TPC_OP_REDUCE_SCATTER || kind == TPC_OP_REDUCE_SCATTER_START;
}

// The ranks of the reductions that continue |coll|'s sum: the product of the group sizes of the
// all-reduces that are the single reader of its completed value, one after the other (1: none).
static int64_t tpc__chain_ranks(tpc__inv_t* I, MlirOperation coll, int kind) {
  int64_t ranks = 1;
  for (MlirValue v = tpc__completed(coll, kind); !mlirValueIsNull(v);) {
    MlirOpOperand u = mlirValueGetFirstUse(v);
    if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u))) break;
    MlirOperation next = mlirOpOperandGetOwner(u);
    if (tpc_op_get_kind(next) != TPC_OP_ALL_REDUCE) break;
    int64_t g = tpc__group_size(I, next);
    if (g < 1) break;
    ranks *= g;
    v = mlirOperationGetResult(next, 0);
  }
  return ranks;
}

// An expert weight gradient summed over the token ranks of dp or gtp has no canonical split: each
// expert's rows are one sequence, and where the ranks' shares cut it depends on the routing. So
// every rank gathers the rows instead, as sequence parallelism does: the expert counts and x over
// all R ranks (one segment of rows per rank, in rank order: the tokens' order, which is TP = 1's
// order of each expert's rows), and dy likewise; or, when tp-gtp scatters the gradient over gtp,
// the columns of dy of this rank's gtp shard from every gtp rank (an all-to-all, block by block),
// then the other ranks' rows. The whole contraction over those rows replaces the partial and its
// chain of reductions (all-reduce; or reduce-scatter over gtp, wait, all-reduce over the rest).
// Returns false, changing nothing, where the chain has another shape.
static bool tpc__gather_expert_wgrad(tpc__inv_t* I, MlirOperation coll, int kind, MlirOperation p) {
  MlirValue sizes = tpc_grouped_linear_wgrad_get_group_sizes(p), dw = tpc_grouped_linear_wgrad_get_dw(p);
  MlirAttribute mesh = mlirOperationGetAttributeByName(coll, tpc_ref("mesh"));
  MlirAttribute axes = mlirOperationGetAttributeByName(coll, tpc_ref("axes"));
  // Rows in segments already (S x E counts): the tp ranks' rows under sequence parallelism (an
  // all-gather over tp, the innermost token axis: gathered further they stay in token order), or
  // the rows dispatched from the ep peers (an all-to-all over ep: in token order only while the
  // remaining axes, dp, come before ep in the mesh; not with gtp, which comes after).
  if (tpc__dim(sizes, 0) != tpc__dim(dw, 0)) {
    MlirOperation from = tpc__producer(sizes);
    int fk = mlirOperationIsNull(from) ? TPC_OP_UNKNOWN : tpc_op_get_kind(from);
    bool gtp = false;
    for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes); ++i) {
      MlirAttribute a = mlirArrayAttrGetElement(axes, i);
      gtp |= mlirAttributeIsAString(a) && mlirStringRefEqual(mlirStringAttrGetValue(a), tpc_ref("gtp"));
    }
    if (fk != TPC_OP_ALL_GATHER && !(fk == TPC_OP_ALL_TO_ALL && !gtp && kind == TPC_OP_ALL_REDUCE)) return false;
  }
  MlirOperation chain[3] = {coll}, last = coll;
  int n = 1;
  int64_t split = -1, blocks = 1, scatter_ranks = 1;
  MlirAttribute rest = {NULL};
  if (kind == TPC_OP_REDUCE_SCATTER_START) {
    split = tpc_op_get_i64(coll, kind, TPC_REDUCE_SCATTER_START_ATTR_DIM);
    blocks = tpc_op_get_i64(coll, kind, TPC_REDUCE_SCATTER_START_ATTR_BLOCKS);
    if (split != 1) return false;
    MlirOperation wait = tpc_only_user(mlirOperationGetResult(coll, 0));
    if (mlirOperationIsNull(wait) || tpc_op_get_kind(wait) != TPC_OP_WAIT) return false;
    chain[n++] = last = wait;
    MlirOperation ar = tpc_only_user(mlirOperationGetResult(wait, 0));
    if (!mlirOperationIsNull(ar) && tpc_op_get_kind(ar) == TPC_OP_ALL_REDUCE) {
      chain[n++] = last = ar;
      rest = mlirOperationGetAttributeByName(ar, tpc_ref("axes"));
    }
    scatter_ranks = tpc__group_size(I, coll);
  } else if (kind != TPC_OP_ALL_REDUCE) {
    return false;
  }
  // Every axis of the chain, in the mesh's order (the token axes dp, ep before gtp).
  MlirAttribute all[8];
  intptr_t na = 0;
  for (intptr_t i = 0; !mlirAttributeIsNull(rest) && i < mlirArrayAttrGetNumElements(rest) && na < 7; ++i)
    all[na++] = mlirArrayAttrGetElement(rest, i);
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(axes) && na < 8; ++i) all[na++] = mlirArrayAttrGetElement(axes, i);
  MlirAttribute all_axes = mlirArrayAttrGet(I->ctx, na, all);
  int64_t rest_ranks = mlirAttributeIsNull(rest) ? 1 : tpc__group_size(I, chain[n - 1]);
  int64_t ranks = split >= 0 ? scatter_ranks * rest_ranks : tpc__group_size(I, coll);
  if (ranks < 1 || scatter_ranks < 1 || rest_ranks < 1) return false;
  // The rows: counts and x of every rank; dy of every rank (or this gtp shard's columns of it).
  MlirValue counts = tpc__data_move(I, coll, sizes, mesh, all_axes, ranks, 0, -1, 1);
  MlirValue x = tpc__data_move(I, coll, tpc_grouped_linear_wgrad_get_x(p), mesh, all_axes, ranks, 0, -1, 1);
  MlirValue dy = tpc_grouped_linear_wgrad_get_dy(p);
  if (split >= 0) {
    dy = tpc__data_move(I, coll, dy, mesh, axes, scatter_ranks, 0, 1, blocks);
    if (!mlirAttributeIsNull(rest)) dy = tpc__data_move(I, coll, dy, mesh, rest, rest_ranks, 0, -1, 1);
  } else {
    dy = tpc__data_move(I, coll, dy, mesh, all_axes, ranks, 0, -1, 1);
  }
  // The whole contraction: the producer's attributes but partial and chunks; the chain's type.
  MlirValue final = mlirOperationGetResult(last, 0);
  MlirOperationState st = mlirOperationStateGet(mlirIdentifierStr(mlirOperationGetName(p)), mlirOperationGetLocation(p));
  MlirValue operands[3] = {dy, x, counts};
  mlirOperationStateAddOperands(&st, 3, operands);
  MlirType out = mlirValueGetType(final);
  mlirOperationStateAddResults(&st, 1, &out);
  MlirNamedAttribute attrs[16];
  intptr_t nattr = tpc__whole_attrs(p, attrs, 16);
  mlirOperationStateAddAttributes(&st, nattr, attrs);
  MlirOperation whole = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(coll), coll, whole);
  mlirValueReplaceAllUsesOfWith(final, mlirOperationGetResult(whole, 0));
  for (int i = n - 1; i >= 0; --i) tpc__erase(I, chain[i]);
  if (mlirOpOperandIsNull(mlirValueGetFirstUse(dw))) tpc__erase(I, p);
  return true;
}

static void tpc__canonical_collective(tpc__inv_t* I, MlirOperation coll, int kind) {
  MlirValue in = tpc_op_get_operand(coll, kind, tpc__reduced_slot(kind));
  int64_t ranks = tpc__group_size(I, coll);
  if (ranks < 0) return;
  tpc__set_str(I, coll, "order", "canonical");
  // The upper levels of a chained reduction: the chain's first collective set the producer's
  // subtree for every rank of the chain.
  if (kind == TPC_OP_ALL_REDUCE && tpc__continues_chain(in)) return;
  ranks *= tpc__chain_ranks(I, coll, kind);
  MlirOperation p = tpc__producer(in);
  int pkind = mlirOperationIsNull(p) ? TPC_OP_UNKNOWN : tpc_op_get_kind(p);
  tpc__contraction_t c;
  char pname[64];
  // A vocabulary-parallel embedding's lookups: one rank's row and -0.0 from every other, whose
  // sum is exact in any order (docs/numerics.md, "Embedding").
  if (pkind == TPC_OP_EMBEDDING) {
    tpc__set_str(I, coll, "order", "any");
    return;
  }
  if (ranks == 1) {
    if (!mlirOperationIsNull(p) && tpc__contraction(p, pkind, &c)) tpc__canonical_producer(I, p, coll, 1);
    return;
  }
  if (pkind == TPC_OP_GROUPED_LINEAR_WGRAD && tpc__get_bool(p, pkind, "partial") &&
      tpc__gather_expert_wgrad(I, coll, kind, p))
    return;
  if (pkind == TPC_OP_GROUPED_LINEAR_WGRAD) {
    tpc__refuse(I, p,
                "no canonical implementation for this expert weight gradient summed over %lld ranks: its order runs "
                "over each expert's rows in token order, and the rows dispatched from the ep peers, gathered over "
                "gtp, would not be in that order (expert parallelism works beside dp, not beside gtp, in invariant "
                "numerics); drop gtp or ep, or use fast numerics",
                (long long)ranks);
    return;
  }
  if (mlirOperationIsNull(p) || !tpc__contraction(p, pkind, &c) || !tpc__get_bool(p, pkind, "partial")) {
    bool contraction = !mlirOperationIsNull(p) && tpc__contraction(p, pkind, &c);
    tpc__refuse(I, coll,
                "no canonical implementation: it sums %s%s over %lld ranks, but only the f32 partial of a "
                "contraction (tp.linear, tp.grouped_linear, their dgrad and wgrad, bias and norm parameter "
                "gradients, marked partial = true) has a canonical order to continue",
                mlirOperationIsNull(p) ? "a function argument" : tpc__op_name(p, pname, sizeof pname),
                contraction ? " (not marked partial = true)" : "", (long long)ranks);
    return;
  }
  if (I->gather && tpc__gather(I, coll, kind, p, ranks)) return;
  if (I->chunks % ranks != 0) {
    tpc__refuse(I, coll,
                "the reduction spans %lld ranks, which does not divide tp.chunks = %lld: a rank's share would not be a "
                "subtree of the canonical tree (use a power-of-two axis size <= tp.chunks, or raise tp.chunks)",
                (long long)ranks, (long long)I->chunks);
    return;
  }
  tpc__canonical_producer(I, p, coll, ranks);
  // The bias is added to the f32 sum and the result rounded once, as TP = 1's linear does. (The
  // fused ops' results are the normalized rows, not the sum.)
  if (kind != TPC_OP_ALL_REDUCE && kind != TPC_OP_REDUCE_SCATTER) return;
  MlirValue sum = mlirOperationGetResult(coll, 0);
  MlirOperation bias_add = tpc__bias_add(sum);
  if (!mlirOperationIsNull(bias_add) && mlirTypeIsARankedTensor(mlirValueGetType(in)))
    mlirValueSetType(sum, mlirRankedTensorTypeGet(mlirShapedTypeGetRank(mlirValueGetType(sum)),
                                                  tpc__dims(mlirValueGetType(sum)),
                                                  mlirShapedTypeGetElementType(mlirValueGetType(in)),
                                                  mlirAttributeGetNull()));
}

// A vocabulary shard's loss statistics are a subtree of the C vocabulary blocks only when its
// group's R ranks divide C and C divides the vocabulary (docs/numerics.md, "Cross-entropy").
static void tpc__vocab_blocks(tpc__inv_t* I, MlirOperation op) {
  int64_t ranks = tpc__group_size(I, op);
  if (ranks < 1) return;
  int64_t vocab = tpc__dim(tpc_cross_entropy_stats_get_w(op), 0) * ranks;
  if (I->chunks % ranks != 0 || vocab % I->chunks != 0)
    tpc__refuse(I, op,
                "the vocabulary (%lld rows over %lld ranks) is not split into whole blocks of the canonical tree: "
                "the rank count must divide tp.chunks = %lld and tp.chunks the vocabulary. Pad the vocabulary to a "
                "multiple of %lld (rows for tokens that never occur, as Megatron-LM's --make-vocab-size-divisible-by "
                "does), or change tp.chunks",
                (long long)vocab, (long long)ranks, (long long)I->chunks, (long long)I->chunks);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__invariant_run(MlirOperation module, void* options) {
  (void)options;
  MlirAttribute numerics = mlirOperationGetAttributeByName(module, tpc_ref(TPC_MODULE_ATTR_NUMERICS));
  if (mlirAttributeIsNull(numerics) || !mlirAttributeIsAString(numerics) ||
      tpc_numerics_parse(mlirStringAttrGetValue(numerics)) == TPC_NUMERICS_FAST)
    return mlirLogicalResultSuccess();
  tpc__inv_t I = {.ctx = mlirOperationGetContext(module), .chunks = 8, .ok = true};
  MlirAttribute chunks = mlirOperationGetAttributeByName(module, tpc_ref(TPC_MODULE_ATTR_CHUNKS));
  if (!mlirAttributeIsNull(chunks) && mlirAttributeIsAInteger(chunks)) I.chunks = mlirIntegerAttrGetValueInt(chunks);
  MlirAttribute strategy = mlirOperationGetAttributeByName(module, tpc_ref(TPC_MODULE_ATTR_STRATEGY));
  I.gather = !mlirAttributeIsNull(strategy) && mlirAttributeIsAString(strategy) &&
             mlirStringRefEqual(mlirStringAttrGetValue(strategy), tpc_ref("gather"));
  intptr_t count = 0;
  MlirOperation* ops = tpc_collect_ops(module, NULL, &count);
  // Reductions over ranks first (they fix their producers' chunks, or are replaced by gathers:
  // each collective is visited once, and only it and its producer can be erased), then every
  // remaining dgrad of a GLU gets the segmented order of the whole tree.
  for (intptr_t i = 0; i < count; ++i) {
    if (tpc_op_list_has(&I.dead, ops[i])) continue;
    int kind = tpc_op_get_kind(ops[i]);
    // A max all-reduce (an amax over shards) is exact in any order: nothing to make canonical.
    if (kind == TPC_OP_ALL_REDUCE && tpc_all_reduce_get_reduce(ops[i]) == TPC_REDUCE_MAX) continue;
    if (tpc__reduced_slot(kind) >= 0) tpc__canonical_collective(&I, ops[i], kind);
  }
  free(ops);
  if (count >= 0) ops = tpc_collect_ops(module, NULL, &count);
  if (count < 0) {
    mlirEmitError(mlirOperationGetLocation(module), "tp-invariant: out of host memory");
    I.ok = false;
  }
  for (intptr_t i = 0; I.ok && i < count; ++i) {
    int kind = tpc_op_get_kind(ops[i]);
    if (kind == TPC_OP_CROSS_ENTROPY_STATS) tpc__vocab_blocks(&I, ops[i]);
    if ((kind == TPC_OP_LINEAR_DGRAD || kind == TPC_OP_GROUPED_LINEAR_DGRAD) &&
        tpc__get_i64(ops[i], kind, "chunks", 0) == 0 && !tpc__get_bool(ops[i], kind, "partial"))
      tpc__canonical_producer(&I, ops[i], ops[i], 1);
  }
  free(ops);
  free(I.dead.ops);
  return I.ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

static tpc_pass_info_t tpc__invariant_info = {
    .argument = "tp-invariant",
    .description = "Apply tp.numerics invariant/exact: canonical chunk subtrees and tree-ordered collectives",
    .run = tpc__invariant_run,
};

MlirPass tpc_create_invariant_pass(void) { return tpc_pass_create(&tpc__invariant_info, NULL); }
