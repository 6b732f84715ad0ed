// The runtime ABI of the whole-model ops (see tprt_abi.h): tp.embedding, tp.cross_entropy and
// their vocabulary-parallel forms and gradients, and the optimizer (tp.sumsq, tp.global_norm,
// tp.adamw). A vocabulary op with `axes` holds one group member's share
// of the vocabulary: member g of a group of R holds logical rows [g·V, (g+1)·V) of the R·V.
#include <stdlib.h>
#include <string.h>

#include "tprt_abi_impl.h"

// This rank's share of the vocabulary: the first logical row, the logical size and the group's
// size (1 without axes). Fails when the op names a mesh other than the world's.
typedef struct {
  int64_t start, vocab;
  int ranks;
} tprt__vocab_t;

static tprt_status_t tprt__vocab(tprt_exec_t* exec, const tprt_call_t* c, int mesh_attr, int axes_attr, int64_t rows,
                                 tprt__vocab_t* out) {
  uint32_t mask = (uint32_t)tprt__attr(c, axes_attr);
  *out = (tprt__vocab_t){0, rows, 1};
  if (!mask) return NULL;
  tprt_status_t s = tprt__check_mesh(exec, c, mesh_attr);
  if (s) return s;
  tprt_rank_t* rank = tprt_exec_rank(exec);
  out->ranks = tprt_rank_group_size(rank, mask);
  out->start = (int64_t)tprt_rank_group_index(rank, mask) * rows;
  out->vocab = rows * out->ranks;
  return NULL;
}

int32_t tprt_abi_embedding(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt__vocab_t v;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_EMBEDDING_NUM_SLOTS, &c);
  const tprt_tensor_t* table = &c.slot[TPRT_EMBEDDING_SLOT_TABLE];
  if (!s) s = tprt__vocab(exec, &c, TPRT_EMBEDDING_ATTR_MESH, TPRT_EMBEDDING_ATTR_AXES, table->dims[0], &v);
  if (!s)
    s = TPRT__KERNEL(exec, embedding, (&c.slot[TPRT_EMBEDDING_SLOT_IDS], table, &c.slot[TPRT_EMBEDDING_SLOT_Y], v.start,
                                       v.vocab));
  return tprt_exec_record(exec, s, TPRT_EMBEDDING_NAME);
}

int32_t tprt_abi_embedding_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt__vocab_t v;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_EMBEDDING_GRAD_NUM_SLOTS, &c);
  tprt_tensor_t* dtable = &c.slot[TPRT_EMBEDDING_GRAD_SLOT_DTABLE];
  if (!s) s = tprt__vocab(exec, &c, TPRT_EMBEDDING_GRAD_ATTR_MESH, TPRT_EMBEDDING_GRAD_ATTR_AXES, dtable->dims[0], &v);
  if (!s) {
    const tprt_tensor_t *ids = &c.slot[TPRT_EMBEDDING_GRAD_SLOT_IDS], *dy = &c.slot[TPRT_EMBEDDING_GRAD_SLOT_DY];
    const tprt_tensor_t* acc = tprt__opt(&c, TPRT_EMBEDDING_GRAD_SLOT_ACC);
    int chunks = tprt__chunks(exec, &c, TPRT_EMBEDDING_GRAD_ATTR_CHUNKS);
    s = acc ? TPRT__KERNEL(exec, embedding_grad_acc, (ids, dy, acc, dtable, v.start, v.vocab, chunks))
            : TPRT__KERNEL(exec, embedding_grad, (ids, dy, dtable, v.start, v.vocab, chunks));
  }
  return tprt_exec_record(exec, s, TPRT_EMBEDDING_GRAD_NAME);
}

int32_t tprt_abi_cross_entropy(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_NUM_SLOTS, &c);
  if (!s) {
    const tprt_tensor_t *x = &c.slot[TPRT_CROSS_ENTROPY_SLOT_X], *w = &c.slot[TPRT_CROSS_ENTROPY_SLOT_W];
    s = TPRT__KERNEL(exec, cross_entropy, (x, w, &c.slot[TPRT_CROSS_ENTROPY_SLOT_TARGETS],
                                           &c.slot[TPRT_CROSS_ENTROPY_SLOT_LOSS], &c.slot[TPRT_CROSS_ENTROPY_SLOT_LSE],
                                           tprt_exec_chunks(exec)));
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_NAME);
}

// The loss of given logits (tp-fuse's form where the head's logits are computed anyway): no GEMM.
int32_t tprt_abi_cross_entropy_logits(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_LOGITS_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, cross_entropy_logits, (&c.slot[TPRT_CROSS_ENTROPY_LOGITS_SLOT_Z],
                                                  &c.slot[TPRT_CROSS_ENTROPY_LOGITS_SLOT_TARGETS],
                                                  &c.slot[TPRT_CROSS_ENTROPY_LOGITS_SLOT_LOSS],
                                                  &c.slot[TPRT_CROSS_ENTROPY_LOGITS_SLOT_LSE], tprt_exec_chunks(exec)));
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_LOGITS_NAME);
}

int32_t tprt_abi_cross_entropy_stats(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt__vocab_t v;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_STATS_NUM_SLOTS, &c);
  const tprt_tensor_t *x = &c.slot[TPRT_CROSS_ENTROPY_STATS_SLOT_X], *w = &c.slot[TPRT_CROSS_ENTROPY_STATS_SLOT_W];
  if (!s) s = tprt__vocab(exec, &c, TPRT_CROSS_ENTROPY_STATS_ATTR_MESH, TPRT_CROSS_ENTROPY_STATS_ATTR_AXES, w->dims[0], &v);
  if (!s) {
    // The rank's subtree of the C vocabulary blocks (C / R of them; at least one in fast mode,
    // where R need not divide C).
    int C = tprt_exec_chunks(exec), blocks = C / v.ranks > 0 ? C / v.ranks : 1;
    s = TPRT__KERNEL(exec, cross_entropy_stats, (x, w, &c.slot[TPRT_CROSS_ENTROPY_STATS_SLOT_TARGETS],
                                                 &c.slot[TPRT_CROSS_ENTROPY_STATS_SLOT_STATS], v.start, v.vocab, C,
                                                 blocks));
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_STATS_NAME);
}

int32_t tprt_abi_cross_entropy_combine(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_COMBINE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, cross_entropy_combine, (&c.slot[TPRT_CROSS_ENTROPY_COMBINE_SLOT_STATS],
                                                   &c.slot[TPRT_CROSS_ENTROPY_COMBINE_SLOT_TARGETS],
                                                   &c.slot[TPRT_CROSS_ENTROPY_COMBINE_SLOT_LOSS],
                                                   &c.slot[TPRT_CROSS_ENTROPY_COMBINE_SLOT_LSE]));
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_COMBINE_NAME);
}

// Both gradients recompute the logits (one GEMM) and contract dz with w or x (another).
int32_t tprt_abi_cross_entropy_dgrad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt__vocab_t v;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_DGRAD_NUM_SLOTS, &c);
  const tprt_tensor_t *x = &c.slot[TPRT_CROSS_ENTROPY_DGRAD_SLOT_X], *w = &c.slot[TPRT_CROSS_ENTROPY_DGRAD_SLOT_W];
  if (!s) s = tprt__vocab(exec, &c, TPRT_CROSS_ENTROPY_DGRAD_ATTR_MESH, TPRT_CROSS_ENTROPY_DGRAD_ATTR_AXES, w->dims[0], &v);
  if (!s) {
    s = TPRT__KERNEL(exec, cross_entropy_dgrad, (x, w, &c.slot[TPRT_CROSS_ENTROPY_DGRAD_SLOT_TARGETS],
                                                 &c.slot[TPRT_CROSS_ENTROPY_DGRAD_SLOT_LSE],
                                                 &c.slot[TPRT_CROSS_ENTROPY_DGRAD_SLOT_DLOSS],
                                                 &c.slot[TPRT_CROSS_ENTROPY_DGRAD_SLOT_DX], v.start, v.vocab,
                                                 tprt_exec_chunks(exec),
                                                 tprt__chunks(exec, &c, TPRT_CROSS_ENTROPY_DGRAD_ATTR_CHUNKS)));
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], false);
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], true);  // the logits, recomputed
  }
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_DGRAD_NAME);
}

int32_t tprt_abi_cross_entropy_wgrad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt__vocab_t v;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_WGRAD_NUM_SLOTS, &c);
  const tprt_tensor_t *x = &c.slot[TPRT_CROSS_ENTROPY_WGRAD_SLOT_X], *w = &c.slot[TPRT_CROSS_ENTROPY_WGRAD_SLOT_W];
  if (!s) s = tprt__vocab(exec, &c, TPRT_CROSS_ENTROPY_WGRAD_ATTR_MESH, TPRT_CROSS_ENTROPY_WGRAD_ATTR_AXES, w->dims[0], &v);
  if (!s) {
    s = TPRT__KERNEL(exec, cross_entropy_wgrad, (x, w, &c.slot[TPRT_CROSS_ENTROPY_WGRAD_SLOT_TARGETS],
                                                 &c.slot[TPRT_CROSS_ENTROPY_WGRAD_SLOT_LSE],
                                                 &c.slot[TPRT_CROSS_ENTROPY_WGRAD_SLOT_DLOSS],
                                                 &c.slot[TPRT_CROSS_ENTROPY_WGRAD_SLOT_DW], v.start, v.vocab,
                                                 tprt_exec_chunks(exec),
                                                 tprt__chunks(exec, &c, TPRT_CROSS_ENTROPY_WGRAD_ATTR_CHUNKS)));
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], false);
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], true);  // the logits, recomputed
  }
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_WGRAD_NAME);
}

// Both gradients from one recomputation of the logits (tp-fuse's rewrite of the two ops above).
int32_t tprt_abi_cross_entropy_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt__vocab_t v;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_GRAD_NUM_SLOTS, &c);
  const tprt_tensor_t *x = &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_X], *w = &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_W];
  if (!s) s = tprt__vocab(exec, &c, TPRT_CROSS_ENTROPY_GRAD_ATTR_MESH, TPRT_CROSS_ENTROPY_GRAD_ATTR_AXES, w->dims[0], &v);
  if (!s) {
    s = TPRT__KERNEL(exec, cross_entropy_grad, (x, w, &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_TARGETS],
                                                &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_LSE],
                                                &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_DLOSS],
                                                &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_DX],
                                                &c.slot[TPRT_CROSS_ENTROPY_GRAD_SLOT_DW], v.start, v.vocab,
                                                tprt_exec_chunks(exec),
                                                tprt__chunks(exec, &c, TPRT_CROSS_ENTROPY_GRAD_ATTR_CHUNKS),
                                                tprt__chunks(exec, &c, TPRT_CROSS_ENTROPY_GRAD_ATTR_TOKEN_CHUNKS)));
    tprt__count_gemm(exec, 2 * x->dims[0], w->dims[0], x->dims[1], false);
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], true);  // the logits, recomputed
  }
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_GRAD_NAME);
}

// The loss and both gradients from one computation of the logits (tp-fuse's rewrite of
// tp.cross_entropy and the tp.cross_entropy_grad of its lse; the whole vocabulary on this rank).
int32_t tprt_abi_cross_entropy_with_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_CROSS_ENTROPY_WITH_GRAD_NUM_SLOTS, &c);
  const tprt_tensor_t *x = &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_X], *w = &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_W];
  if (!s) {
    s = TPRT__KERNEL(exec, cross_entropy_with_grad,
                     (x, w, &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_TARGETS],
                      &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_DLOSS], &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_LOSS],
                      &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_LSE], &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_DX],
                      &c.slot[TPRT_CROSS_ENTROPY_WITH_GRAD_SLOT_DW], tprt_exec_chunks(exec),
                      tprt__chunks(exec, &c, TPRT_CROSS_ENTROPY_WITH_GRAD_ATTR_CHUNKS),
                      tprt__chunks(exec, &c, TPRT_CROSS_ENTROPY_WITH_GRAD_ATTR_TOKEN_CHUNKS)));
    tprt__count_gemm(exec, 3 * x->dims[0], w->dims[0], x->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_CROSS_ENTROPY_WITH_GRAD_NAME);
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

int32_t tprt_abi_sumsq(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_SUMSQ_NUM_SLOTS, &c);
  bool count = true;
  if (!s && tprt__attr(&c, TPRT_SUMSQ_ATTR_AXES)) {
    // g is replicated over these axes: member 0 of the group counts it, the others pass acc on.
    s = tprt__check_mesh(exec, &c, TPRT_SUMSQ_ATTR_MESH);
    if (!s) count = tprt_rank_group_index(tprt_exec_rank(exec), (uint32_t)tprt__attr(&c, TPRT_SUMSQ_ATTR_AXES)) == 0;
  }
  if (!s)
    s = TPRT__KERNEL(exec, sumsq, (&c.slot[TPRT_SUMSQ_SLOT_G], tprt__opt(&c, TPRT_SUMSQ_SLOT_ACC),
                                   &c.slot[TPRT_SUMSQ_SLOT_ACC_OUT], count));
  return tprt_exec_record(exec, s, TPRT_SUMSQ_NAME);
}

int32_t tprt_abi_global_norm(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_GLOBAL_NORM_NUM_SLOTS, &c);
  if (!s) s = TPRT__KERNEL(exec, global_norm, (&c.slot[TPRT_GLOBAL_NORM_SLOT_ACC], &c.slot[TPRT_GLOBAL_NORM_SLOT_NORM]));
  return tprt_exec_record(exec, s, TPRT_GLOBAL_NORM_NAME);
}

int32_t tprt_abi_adamw(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_ADAMW_NUM_SLOTS, &c);
  tprt_tensor_t* grad = &c.slot[TPRT_ADAMW_SLOT_GRAD];
  void* scratch = NULL;
  if (!s && tprt__attr(&c, TPRT_ADAMW_ATTR_AXES)) {
    // ZeRO-1: the states are this rank's share of one dimension d of the gradient (the one where
    // the sizes differ); the update reads the same elements of the gradient: a view when d is the
    // outermost, else a copy of them.
    s = tprt__check_mesh(exec, &c, TPRT_ADAMW_ATTR_MESH);
    const tprt_tensor_t* master = &c.slot[TPRT_ADAMW_SLOT_MASTER];
    int d = -1;
    for (int i = 0; !s && i < master->rank && master->rank == grad->rank; ++i)
      if (master->dims[i] != grad->dims[i]) d = d < 0 ? i : -2;
    if (!s && (d < 0 || master->dims[d] < 1 || grad->dims[d] % master->dims[d] != 0))
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                           "adamw: a ZeRO-1 share of the states differs from the gradient in one dimension, by a whole "
                           "factor");
    int64_t g = s ? 0 : tprt_rank_group_index(tprt_exec_rank(exec), (uint32_t)tprt__attr(&c, TPRT_ADAMW_ATTR_AXES));
    int64_t outer = 1, inner = 1;
    for (int i = 0; !s && i < d; ++i) outer *= grad->dims[i];
    for (int i = d + 1; !s && i < grad->rank; ++i) inner *= grad->dims[i];
    if (!s && d == 0) {
      *grad = tprt_tensor_make((char*)grad->data + (size_t)(g * master->dims[0] * inner) * sizeof(float), grad->dtype,
                               master->rank, master->dims);
    } else if (!s && tprt_exec_backend(exec) != tprt_backend_cpu()) {
      s = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                           "adamw: a ZeRO-1 share along dimension %d runs on the CPU backend only for now", d);
    } else if (!s) {
      size_t piece = (size_t)(master->dims[d] * inner) * sizeof(float);
      scratch = malloc(piece * (size_t)outer + 1);
      if (!scratch) s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "adamw: out of host memory");
      for (int64_t o = 0; !s && o < outer; ++o)
        memcpy((char*)scratch + (size_t)o * piece,
               (const char*)grad->data + ((size_t)(o * grad->dims[d] + g * master->dims[d]) * (size_t)inner) * sizeof(float),
               piece);
      if (!s) *grad = tprt_tensor_make(scratch, grad->dtype, master->rank, master->dims);
    }
  }
  if (!s)
    s = TPRT__KERNEL(exec, adamw, (&c.slot[TPRT_ADAMW_SLOT_MASTER], grad, &c.slot[TPRT_ADAMW_SLOT_M],
                                   &c.slot[TPRT_ADAMW_SLOT_V], &c.slot[TPRT_ADAMW_SLOT_HYPER], &c.slot[TPRT_ADAMW_SLOT_NORM],
                                   &c.slot[TPRT_ADAMW_SLOT_MASTER_OUT], &c.slot[TPRT_ADAMW_SLOT_M_OUT],
                                   &c.slot[TPRT_ADAMW_SLOT_V_OUT], &c.slot[TPRT_ADAMW_SLOT_WEIGHT]));
  free(scratch);
  return tprt_exec_record(exec, s, TPRT_ADAMW_NAME);
}
