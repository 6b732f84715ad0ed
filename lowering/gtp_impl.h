// Internal to tp-gtp (gtp.c: which weights, the cost model, the pass; gtp_emit.c: the gathers,
// quantize-then-gather and the gradients' reduce-scatters it emits).
#ifndef TPC_GTP_IMPL_H_
#define TPC_GTP_IMPL_H_

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "pass_util.h"
#include "text_buffer.h"

// The cost model of the default prefetch depth: one contraction takes 2·M·N·K / PEAK seconds and
// a gather moves (G-1)/G of the gathered bytes at BANDWIDTH (an H100's dense bf16 rate and an
// NVLink all-gather's bus bandwidth, both as measured rather than as specified).
#define TPC_GTP_PEAK_FLOPS 600e12
#define TPC_GTP_BANDWIDTH 200e9
#define TPC_GTP_MAX_AUTO_DEPTH 4
// A weight gradient's reduce-scatter sums its slices on the compute stream at this rate (an
// H100's HBM, as measured).
#define TPC_GTP_HBM_BANDWIDTH 3e12

// How a linear's weight gradient becomes a gtp shard (module attribute tp.gtp_wgrad).
typedef enum {
  TPC_GTP_WGRAD_AUTO,     // the cheaper of the two by the cost model (tpc__gtp_wgrad_gathers)
  TPC_GTP_WGRAD_SCATTER,  // each rank's partial over its tokens, reduce-scattered over gtp
  TPC_GTP_WGRAD_GATHER,   // each rank's rows over every gtp rank's tokens (x gathered, dy all-to-all)
} tpc_gtp_wgrad_t;

typedef struct {
  MlirContext ctx;
  MlirOperation func;
  MlirAttribute mesh_ref;  // flat symbol ref of the mesh
  int64_t G;               // gtp size
  int64_t depth;           // < 0: choose by the cost model
  bool keep;
  tpc_gtp_wgrad_t wgrad;
  bool ok;
  int64_t cur_depth;  // the prefetch depth of the weight being sharded
  MlirOperation* ops;  // the body's ops before the pass changed it, in order
  int num_ops;
  // Replaced reductions, erased once the function is done (P->ops still names them).
  tpc_op_list_t dead;
} tpc__gtp_t;

static inline MlirStringRef tpc__ref(const char* s) { return mlirStringRefCreateFromCString(s); }

static inline MlirNamedAttribute tpc__named(MlirContext ctx, const char* name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(ctx, tpc__ref(name)), a);
}

/// Emits |msg| (then freed) as an error at |loc| and marks the pass failed.
void tpc__gtp_fail(tpc__gtp_t* P, MlirLocation loc, tpc_text_t* msg);
/// The ops the schedule counts: contractions (linears, their gradients, attention, the fused MLP).
bool tpc__gtp_is_contraction(int kind);
/// Seconds the cost model gives |op| (0 for anything but a contraction).
double tpc__gtp_op_seconds(MlirOperation op);

// gtp_emit.c
/// The tensor type |t| with dimension |dim| divided by |by| and element type |element| (or t's).
MlirType tpc__gtp_divided(MlirType t, int dim, int64_t by, MlirType element);
/// Creates "<start_name>"(in) {mesh, axes = ["gtp"], dim, blocks (, order)} -> future<out> before
/// |before| and its "tp.wait" before |wait_before|; returns the wait's result.
MlirValue tpc__gtp_emit_async(tpc__gtp_t* P, const char* start_name, MlirValue in, MlirType out, int dim,
                              int64_t blocks, MlirAttribute order, MlirOperation before, MlirOperation wait_before,
                              MlirLocation loc);
/// |op|'s index in P->ops, or -1.
int tpc__gtp_index_of(const tpc__gtp_t* P, MlirOperation op);
/// The op before which a gather needed by the op at index |use| starts: the |depth|-th contraction
/// before it, or the first op of the body.
MlirOperation tpc__gtp_start_anchor(const tpc__gtp_t* P, int use, int64_t depth);
/// Quantize-then-gather of the quantize |q| read by |deq| (of the weight named |what| in
/// diagnostics); false after a diagnostic.
bool tpc__gtp_gather_quantized(tpc__gtp_t* P, MlirOperation q, MlirOperation deq, int dim, int64_t blocks,
                               int64_t depth, const char* what);
/// Completes tp.amax |amax| of a weight now sharded over gtp: a max all-reduce over gtp right after
/// it takes every use of its result, which is the whole (tensor-parallel) weight's amax again.
void tpc__gtp_complete_amax(tpc__gtp_t* P, MlirOperation amax);
/// Whether the string array |axes| names |name|, at |*at|.
bool tpc__gtp_axes_have(MlirAttribute axes, const char* name, intptr_t* at);
/// Whether |v| has exactly one use.
bool tpc__gtp_single_use(MlirValue v);
/// Whether the gradient of the partial tp.linear_wgrad |wgrad| of a GTP weight takes the gather
/// form (P->wgrad; auto: the cost model), with the model's seconds for its transfers in
/// |*gather_s| (may be NULL).
bool tpc__gtp_wgrad_gathers(const tpc__gtp_t* P, MlirOperation wgrad, double* gather_s);
/// The bytes of a ranked tensor type (0 for any other type).
double tpc__gtp_bytes(MlirType t);
/// Makes the gradient |v| of a weight sharded along |dim| (blocks |blocks|) a gtp shard; false after
/// a diagnostic.
bool tpc__gtp_scatter_grad(tpc__gtp_t* P, MlirValue v, int dim, int64_t blocks, const char* what);

#endif  // TPC_GTP_IMPL_H_
