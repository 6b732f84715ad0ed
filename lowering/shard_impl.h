// Internal to tp-shard (shard.c, shard_args.c, shard_grad.c, shard_attention.c): the per-function state and the emission helpers
// shared by the forward and backward sharding rules.
#ifndef TPC_SHARD_IMPL_H_
#define TPC_SHARD_IMPL_H_

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "shard_layout.h"
#include "text_buffer.h"


typedef struct tpc__sval_t tpc__sval_t;
struct tpc__sval_t {
  MlirValue value;
  char name[48];  // SSA name in the emitted text
  tpc_layout_t layout;
  // Expert parallelism: rows that were dispatched to the ranks owning their experts carry the
  // received counts (for the grouped linears) and the rank's own counts (to bring them back).
  tpc__sval_t* recv_sizes;
  tpc__sval_t* own_sizes;
  // The all-gather of this value along tokens over tp, once emitted (reused by later readers).
  tpc__sval_t* gathered;
  // Expert parallelism: a local expert-sorted value's dispatched rows, and a dispatched value's
  // rows brought back (both emitted once and reused by the backward rules).
  tpc__sval_t* dispatched;
  tpc__sval_t* combined;
  // Sequence-parallel MoE: rows all-gathered over tp carry the all-gathered counts (one segment
  // per tp rank); on a count tensor, its all-gather once emitted.
  tpc__sval_t* seg_sizes;
};

typedef struct {
  tpc_mesh_t mesh;
  int tp, dp, ep, gtp, mb;  // mesh axis indices of the roles, or -1
  bool sp;     // some linear of the function is sequence parallel
  MlirOperation func;
  MlirOperation cur_op;  // the op being sharded: emitted ops and collectives carry its location
  tpc__sval_t* vals;  // cap_vals entries, sized from the function (tpc_func_value_bound)
  int num_vals, cap_vals;
  int counter;
  tpc_text_t body;
} tpc__shard_t;

uint32_t tpc__bit(int axis);
/// The axes that shard the tokens of activations as data parallelism does: dp, and gtp (whose
/// ranks also take their own tokens; tp-gtp then shards the weights over it).
uint32_t tpc__data_axes(const tpc__shard_t* S);
tpc__sval_t* tpc__find(tpc__shard_t* S, MlirValue v);
tpc__sval_t* tpc__new_value(tpc__shard_t* S, MlirValue v, const char* name, const tpc_layout_t* l);
MlirLogicalResult tpc__error(MlirOperation op, tpc_text_t* msg);
MlirLogicalResult tpc__layout_error(tpc__shard_t* S, MlirOperation op, const char* what, const tpc_layout_t* l,
                                    const char* why);
MlirLogicalResult tpc__check_divisible(tpc__shard_t* S, MlirOperation op, const char* what, const tpc_layout_t* l);
/// Emits a collective over the mesh axes in |mask| and returns the value it defines.
tpc__sval_t* tpc__emit_collective_mask(tpc__shard_t* S, uint32_t mask, const char* op_name, const tpc__sval_t* in,
                                       const char* extra_attrs, const tpc_layout_t* out);
/// Emits |op| with operands |ins| and results |outs| (local types), |extra_attrs| appended and
/// the attribute named |skip_attr| dropped.
void tpc__emit_op(tpc__shard_t* S, MlirOperation op, tpc__sval_t* const* ins, int nin, const tpc_layout_t* outs,
                  int nout, const char* extra_attrs, const char* skip_attr);
/// All-gathers |v| along tokens over tp when sequence parallelism shards them there; the gather is
/// emitted once per value and reused.
tpc__sval_t* tpc__gather_tokens(tpc__shard_t* S, tpc__sval_t* v);
/// Emits a collective over one mesh axis, or over tp.
tpc__sval_t* tpc__emit_collective_on(tpc__shard_t* S, int axis, const char* op_name, const tpc__sval_t* in,
                                     const char* extra_attrs, const tpc_layout_t* out);
tpc__sval_t* tpc__emit_collective(tpc__shard_t* S, const char* op_name, const tpc__sval_t* in,
                                  const char* extra_attrs, const tpc_layout_t* out);
/// A layout for values that exist on one rank only (dispatched expert rows): its local shape.
tpc_layout_t tpc__local_only(const tpc_layout_t* like, int64_t rows, int64_t cols, MlirType element);
/// Emits "tp.moe_bucket" / "tp.moe_unbucket" of |x| with |sizes| into |buckets| buckets.
tpc__sval_t* tpc__emit_bucket(tpc__shard_t* S, const char* op_name, const tpc__sval_t* x, const tpc__sval_t* sizes,
                              int64_t buckets, const tpc_layout_t* out);
/// Sequence-parallel MoE: all-gathers |sizes| over tp (one segment of counts per rank); cached.
tpc__sval_t* tpc__gather_counts(tpc__shard_t* S, tpc__sval_t* sizes);
/// Expert parallelism: sends the expert-sorted rows |x| (counts |sizes|) to the ranks owning their
/// experts (bucket + all-to-all; the counts' all-to-all is emitted once per |sizes|); cached.
tpc__sval_t* tpc__dispatch(tpc__shard_t* S, tpc__sval_t* x, tpc__sval_t* sizes);
/// The inverse: brings dispatched rows back to the ranks owning the tokens, in expert order.
tpc__sval_t* tpc__combine(tpc__shard_t* S, tpc__sval_t* x);
/// Gives every argument of the function's |body| the layout of its first use (shard_args.c).
MlirLogicalResult tpc__arg_layouts(tpc__shard_t* S, MlirBlock body);
/// The layout a weight-like operand of |op| must have, or false for activation operands (shard_args.c).
bool tpc__weight_layout(tpc__shard_t* S, MlirOperation op, int kind, int slot, tpc_layout_t* l);
/// Quantized weights (shard_quant.c): the layout of |v| (a weight's data, or its dequantized form)
/// that its first weight reader's plan gives it; false when no weight reader follows.
bool tpc__weight_through_quant(tpc__shard_t* S, MlirValue v, tpc_layout_t* l);
/// The layout of a scale tensor of type |scale_type| beside data laid out as |data|.
tpc_layout_t tpc__scale_layout(const tpc_layout_t* data, MlirType scale_type, bool block_scaled);
/// The rule of tp.quantize / tp.dequantize: fills |outs| (replicated on entry) or fails at the op.
MlirLogicalResult tpc__shard_quant(tpc__shard_t* S, MlirOperation op, int kind, const tpc_layout_t* x,
                                   tpc_layout_t* outs);
/// The rule of tp.amax: the shard's amax, then a max all-reduce over the axes sharding x.
MlirLogicalResult tpc__shard_amax(tpc__shard_t* S, MlirOperation op, tpc__sval_t** ins);
/// Sharding rules of the backward ops; returns failure after emitting a diagnostic.
MlirLogicalResult tpc__shard_grad(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin);
/// True when a gradient op's optional |acc| is absent; else emits the error (acc is tp-fuse's,
/// formed after partitioning from a tp.add, which tp-shard lays out itself) and returns false.
bool tpc__no_acc(MlirOperation op, MlirValue acc);
/// True for the backward ops tpc__shard_grad handles.
bool tpc__is_grad_op(int kind);
/// Whether the module asks for ZeRO-1 (tp.zero) on a mesh with more than one dp rank.
bool tpc__zero1(const tpc__shard_t* S);
/// ZeRO-1: when the gradient |result| (laid out |want| once reduced over |reduce|) goes straight
/// into tp.adamw (and the norm's tp.sumsq) and |reduce| is the dp axis, the dimension to reduce-scatter it along (that of
/// the optimizer's states); else -1 (an all-reduce).
int tpc__zero_scatter_dim(const tpc__shard_t* S, MlirValue result, const tpc_layout_t* want, uint32_t reduce);
/// Sharding rules of the embedding and cross-entropy ops and their gradients (shard_vocab.c).
MlirLogicalResult tpc__shard_vocab(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin);
bool tpc__is_vocab_op(int kind);
/// The layout of a vocabulary op's table or head (rows over tp with parallel = "vocab") and, for a
/// vocabulary-parallel op, of its ids, targets and per-token vectors; false for other operands.
bool tpc__vocab_layout(tpc__shard_t* S, MlirOperation op, int kind, int slot, tpc_layout_t* l);
/// Sharding rules of tp.rope, tp.attention and tp.attention_grad (shard_attention.c): by heads.
MlirLogicalResult tpc__shard_attention(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin);
bool tpc__is_attention_op(int kind);
/// The layout of rope's cos and sin operands (tokens like the activations, never over tp); false
/// for every other operand.
bool tpc__attention_table_layout(tpc__shard_t* S, int kind, int slot, tpc_layout_t* l);

#endif  // TPC_SHARD_IMPL_H_
