// tp-shard rules of tp.rope, tp.attention, tp.attention_kvcache and tp.attention_grad: attention
// is partitioned by heads, as in Megatron-LM.
//
//   IN (--mesh tp=2):  %q = "tp.linear"(%h, %wq) {parallel = "column"}       -> 16x64   (4 heads of 16)
//                      %k = "tp.linear"(%h, %wk) {parallel = "column"}       -> 16x32   (2 kv heads)
//                      %a = "tp.attention"(%q, %k, %v) {seq_len = 8, head_dim = 16} -> 16x64
//                      %o = "tp.linear"(%a, %wo) {parallel = "row"}
//   OUT: the same ops on 16x32 (2 heads) and 16x16 (1 kv head) per rank; the row-parallel output
//        projection's partial is all-reduced as for any row-parallel linear.
//
// Column-parallel q/k/v projections give every rank a contiguous block of whole heads, so each
// rank's query heads read exactly its own key/value heads and the op runs unchanged on local
// shapes (bitwise as on one rank: heads are independent). Tokens may be sharded over dp and ep in
// whole sequences; sequence parallelism's tp sharding of tokens is undone by the column-parallel
// projections' all-gather before attention. cos and sin are per token: sharded like the tokens,
// never over tp (tpc__attention_table_layout). A KV cache (tp.attention_kvcache, tp.kvcache_write)
// is sharded like k: its sequences over dp and ep, its kv heads over tp; cache_len like the
// sequences. tp.sample's per-row operands (seed, request, position, temperature, top_k, top_p) and
// tp.cross_entropy_logits's targets are laid out like the tokens.
#include <stdio.h>

#include "mlir-c/BuiltinTypes.h"
#include "shard_impl.h"
#include "tpc_dialect.h"

bool tpc__is_attention_op(int kind) {
  return kind == TPC_OP_ROPE || kind == TPC_OP_ATTENTION || kind == TPC_OP_ATTENTION_KVCACHE ||
         kind == TPC_OP_ATTENTION_GRAD || kind == TPC_OP_KVCACHE_WRITE;
}

bool tpc__attention_table_layout(tpc__shard_t* S, int kind, int slot, tpc_layout_t* l) {
  bool table = kind == TPC_OP_ROPE && (slot == TPC_ROPE_SLOT_COS || slot == TPC_ROPE_SLOT_SIN);
  // A KV cache holds whole sequences (over dp and ep, as the tokens) and the rank's kv heads (over
  // tp, as the column-parallel k and v); cache_len one count per sequence.
  bool cache = (kind == TPC_OP_ATTENTION_KVCACHE &&
                (slot == TPC_ATTENTION_KVCACHE_SLOT_K_CACHE || slot == TPC_ATTENTION_KVCACHE_SLOT_V_CACHE)) ||
               (kind == TPC_OP_KVCACHE_WRITE && slot != TPC_KVCACHE_WRITE_SLOT_CACHE_LEN);
  bool lens = (kind == TPC_OP_ATTENTION_KVCACHE && slot == TPC_ATTENTION_KVCACHE_SLOT_CACHE_LEN) ||
              (kind == TPC_OP_KVCACHE_WRITE && slot == TPC_KVCACHE_WRITE_SLOT_CACHE_LEN) ||
              (kind == TPC_OP_SAMPLE && slot != TPC_SAMPLE_SLOT_LOGITS) ||
              (kind == TPC_OP_CROSS_ENTROPY_LOGITS && slot == TPC_CROSS_ENTROPY_LOGITS_SLOT_TARGETS);
  if (!table && !cache && !lens) return false;
  if (l->rank >= 1) l->mask[0] = tpc__data_axes(S) | tpc__bit(S->ep);
  if (cache && l->rank >= 2) l->mask[1] = tpc__bit(S->tp);
  return true;
}

// |mask| without the mesh axes of size 1, which shard nothing (sequence parallelism at tp=1 keeps
// its tp bit on the tokens).
static uint32_t tpc__sharding(const tpc__shard_t* S, uint32_t mask) {
  uint32_t out = 0;
  for (int a = 0; a < S->mesh.num_axes; ++a)
    if ((mask & (1u << a)) && S->mesh.sizes[a] > 1) out |= 1u << a;
  return out;
}

// Checks that |v| holds whole heads of |head_dim| columns on every rank, sharded like |like|.
static MlirLogicalResult tpc__check_heads(tpc__shard_t* S, MlirOperation op, const char* what, const tpc_layout_t* l,
                                          const tpc_layout_t* like, int64_t head_dim) {
  char why[256];
  if (tpc__sharding(S, l->mask[0]) & tpc__bit(S->tp)) {
    snprintf(why, sizeof why, "attention needs whole sequences, but its tokens are sharded over tp (sequence "
                              "parallelism gathers them in the column-parallel projections before it)");
    return tpc__layout_error(S, op, what, l, why);
  }
  if (l->blocks[1] != 1 || tpc_layout_local_dim(l, &S->mesh, 1) % head_dim != 0) {
    int64_t heads = l->logical[1] / head_dim;
    snprintf(why, sizeof why, "every rank must hold whole heads of %lld columns: %lld head%s cannot be split evenly "
                              "over the ranks that shard %s",
             (long long)head_dim, (long long)heads, heads == 1 ? "" : "s", heads == 1 ? "it" : "them");
    return tpc__layout_error(S, op, what, l, why);
  }
  if (like && (tpc__sharding(S, l->mask[0]) != tpc__sharding(S, like->mask[0]) ||
               tpc__sharding(S, l->mask[1]) != tpc__sharding(S, like->mask[1]))) {
    snprintf(why, sizeof why, "it must be sharded like the queries (the same token and head sharding)");
    return tpc__layout_error(S, op, what, l, why);
  }
  return mlirLogicalResultSuccess();
}

MlirLogicalResult tpc__shard_attention(tpc__shard_t* S, MlirOperation op, int kind, tpc__sval_t** ins, int nin) {
  const tpc_layout_t* x = &ins[0]->layout;
  tpc_layout_t outs[3];
  int nout = (int)mlirOperationGetNumResults(op);
  if (kind == TPC_OP_KVCACHE_WRITE) {
    // The cache and the new rows hold the rank's kv heads and sequences alike.
    int64_t head_dim = tpc_kvcache_write_get_head_dim(op);
    if (head_dim < 1) return mlirLogicalResultFailure();  // the verifier reports it
    if (mlirLogicalResultIsFailure(tpc__check_heads(S, op, "new", &ins[1]->layout, NULL, head_dim)) ||
        mlirLogicalResultIsFailure(tpc__check_heads(S, op, "cache", x, &ins[1]->layout, head_dim)))
      return mlirLogicalResultFailure();
    if (tpc__sharding(S, ins[2]->layout.mask[0]) != tpc__sharding(S, x->mask[0]))
      return tpc__layout_error(S, op, "cache_len", &ins[2]->layout,
                               "it must be sharded like the cache's sequences (over dp and ep only)");
    outs[0] = *x;
    outs[0].element = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetResult(op, 0)));
    tpc__emit_op(S, op, ins, nin, outs, nout, NULL, NULL);
    return mlirLogicalResultSuccess();
  }
  if (kind == TPC_OP_ROPE) {
    int64_t d = ins[1]->layout.logical[1];
    if (mlirLogicalResultIsFailure(tpc__check_heads(S, op, "input x", x, NULL, d > 0 ? d : 1)))
      return mlirLogicalResultFailure();
    for (int i = 1; i < 3; ++i)
      if (tpc__sharding(S, ins[i]->layout.mask[0]) != tpc__sharding(S, x->mask[0]) ||
          tpc__sharding(S, ins[i]->layout.mask[1]))
        return tpc__layout_error(S, op, i == 1 ? "cos" : "sin", &ins[i]->layout,
                                 "the table must hold the same tokens as x, with every column");
    outs[0] = *x;
  } else {
    bool grad = kind == TPC_OP_ATTENTION_GRAD;
    int64_t seq_len = grad                                ? tpc_attention_grad_get_seq_len(op)
                      : kind == TPC_OP_ATTENTION_KVCACHE ? tpc_attention_kvcache_get_seq_len(op)
                                                         : tpc_attention_get_seq_len(op);
    int64_t head_dim = grad                                ? tpc_attention_grad_get_head_dim(op)
                       : kind == TPC_OP_ATTENTION_KVCACHE ? tpc_attention_kvcache_get_head_dim(op)
                                                          : tpc_attention_get_head_dim(op);
    if (seq_len < 1 || head_dim < 1) return mlirLogicalResultFailure();  // the verifier reports it
    static const char* const names[2][5] = {{"q", "k", "v", "k_cache", "v_cache"}, {"q", "k", "v", "y", "dy"}};
    for (int i = 0; i < nin && i < 5; ++i)
      if (mlirLogicalResultIsFailure(
              tpc__check_heads(S, op, names[grad][i], &ins[i]->layout, i ? x : NULL, head_dim)))
        return mlirLogicalResultFailure();
    // cache_len: one count per sequence, the sequences sharded as q's tokens.
    if (!grad && nin == 6 && tpc__sharding(S, ins[5]->layout.mask[0]) != tpc__sharding(S, x->mask[0]))
      return tpc__layout_error(S, op, "cache_len", &ins[5]->layout,
                               "it must be sharded like the queries' sequences (over dp and ep only)");
    // attention_grad's lse[T, Hq]: a column per query head, sharded like q's tokens and heads.
    if (grad && nin == 6 &&
        mlirLogicalResultIsFailure(tpc__check_heads(S, op, "lse", &ins[5]->layout, x, 1)))
      return mlirLogicalResultFailure();
    int64_t tokens = tpc_layout_local_dim(x, &S->mesh, 0);
    if (tokens % seq_len != 0) {
      char why[200];
      snprintf(why, sizeof why, "every rank must hold whole sequences: %lld tokens per rank is not a multiple of "
                                "seq_len = %lld", (long long)tokens, (long long)seq_len);
      return tpc__layout_error(S, op, "q", x, why);
    }
    int64_t hq = tpc_layout_local_dim(x, &S->mesh, 1) / head_dim;
    int64_t hkv = tpc_layout_local_dim(&ins[1]->layout, &S->mesh, 1) / head_dim;
    if (hkv == 0 || hq % hkv != 0) {
      char why[200];
      snprintf(why, sizeof why, "%lld query heads per rank do not group over %lld key/value heads per rank",
               (long long)hq, (long long)hkv);
      return tpc__layout_error(S, op, "k", &ins[1]->layout, why);
    }
    for (int i = 0; i < nout && i < 3; ++i) outs[i] = i == 0 ? *x : ins[1]->layout;
    // attention's lse[T, Hq]: q's layout with one column per head.
    if (kind == TPC_OP_ATTENTION && nout == 2) {
      outs[1] = *x;
      outs[1].logical[1] = x->logical[1] / head_dim;
    }
  }
  for (int i = 0; i < nout && i < 3; ++i) outs[i].element = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetResult(op, i)));
  tpc__emit_op(S, op, ins, nin, outs, nout, NULL, NULL);
  return mlirLogicalResultSuccess();
}
