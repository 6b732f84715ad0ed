// The runtime ABI of the collectives and the fused collective + add + RMSNorm ops (see
// tprt_abi.h): descriptor decoding is shared with tprt_abi.c through tprt_abi_impl.h.
#include "tprt_abi_impl.h"
#include "tprt_allocator.h"
#include "tprt_collectives.h"

// Data-movement accounting for tpc-run --stats (the schedule model of tprt_comm_bytes).
static void tprt__count_comm(tprt_exec_t* exec, tprt_comm_kind_t kind, const tprt_tensor_t* in,
                             const tprt_tensor_t* out, uint32_t mask) {
  int g = tprt_rank_group_size(tprt_exec_rank(exec), mask);
  int64_t bytes = tprt_comm_bytes(kind, g, (int64_t)tprt_tensor_bytes(in), (int64_t)tprt_tensor_bytes(out));
  tprt_comm_stats_t* st = &tprt_exec_stats(exec)->comm[kind];
  st->calls += 1;
  st->bytes_sent += bytes;
  st->bytes_received += bytes;
}

// `blocks` = B on a gather or scatter along |*dim|: the dim is B equal blocks, each gathered or
// scattered on its own. Row-major tensors view dim d as [outer, B, d / B, inner] at no cost, and
// gathering or scattering that view's dim 2 is the blocked collective; |*in| and |*out| become
// those views (in place in the call's slots, so that the host fallback copies them) and |*dim|
// 2. With B = 1 nothing changes.
static tprt_status_t tprt__blocked_views(tprt_tensor_t* in, tprt_tensor_t* out, int* dim, int64_t blocks) {
  if (blocks == 1) return NULL;
  int d = *dim;
  if (blocks < 1 || d < 0 || d >= in->rank || in->dims[d] % blocks != 0 || out->dims[d] % blocks != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "blocks = %lld must divide dim %d of in (%lld) and out (%lld)",
                            (long long)blocks, d, (long long)(d >= 0 && d < in->rank ? in->dims[d] : -1),
                            (long long)(d >= 0 && d < out->rank ? out->dims[d] : -1));
  tprt_tensor_t* views[2] = {in, out};
  for (int i = 0; i < 2; ++i) {
    tprt_tensor_t* t = views[i];
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < d; ++k) outer *= t->dims[k];
    for (int k = d + 1; k < t->rank; ++k) inner *= t->dims[k];
    int64_t dims[4] = {outer, blocks, t->dims[d] / blocks, inner};
    *t = tprt_tensor_make(t->data, t->dtype, 4, dims);
  }
  *dim = 2;
  return NULL;
}

// `blocks` = B on an all-to-all: split_dim is B equal blocks and slice r is the r-th piece of each.
// The views insert B before split_dim (no dims merged: the concat dim stays what it is), the split
// moves to the piece dim after it.
static tprt_status_t tprt__blocked_split_views(tprt_tensor_t* in, tprt_tensor_t* out, int* split, int* concat,
                                               int64_t blocks) {
  if (blocks == 1) return NULL;
  int d = *split;
  if (blocks < 1 || d < 0 || d >= in->rank || *split == *concat || in->rank >= TPRT_MAX_RANK ||
      in->dims[d] % blocks != 0 || out->dims[d] % blocks != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "all_to_all: blocks = %lld must divide split dim %d of in and out, differ from the concat "
                            "dim and leave room for one more dim",
                            (long long)blocks, d);
  tprt_tensor_t* views[2] = {in, out};
  for (int i = 0; i < 2; ++i) {
    tprt_tensor_t* t = views[i];
    int64_t dims[TPRT_MAX_RANK] = {0};  // GCC -O3 cannot see that the loop writes rank + 1 of them
    for (int k = 0, j = 0; k < t->rank; ++k) {
      if (k == d) {
        dims[j++] = blocks;
        dims[j++] = t->dims[k] / blocks;
      } else {
        dims[j++] = t->dims[k];
      }
    }
    *t = tprt_tensor_make(t->data, t->dtype, t->rank + 1, dims);
  }
  *split = d + 1;
  if (*concat > d) *concat += 1;
  return NULL;
}

#define TPRT__COLLECTIVE_PROLOGUE(OP)                                                   \
  tprt_call_t c;                                                                        \
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_##OP##_NUM_SLOTS, &c);              \
  if (!s) s = tprt__check_mesh(exec, &c, TPRT_##OP##_ATTR_MESH);                         \
  tprt_rank_t* rank = tprt_exec_rank(exec);                                             \
  (void)rank;                                                                           \
  uint32_t mask = (uint32_t)tprt__attr(&c, TPRT_##OP##_ATTR_AXES)

// reduce = "max" (an amax over shards) is the backend's all_reduce_max; order means nothing to it.
int32_t tprt_abi_all_reduce(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(ALL_REDUCE);
  if (!s) {
    const tprt_tensor_t* in = &c.slot[TPRT_ALL_REDUCE_SLOT_INPUT];
    tprt_tensor_t* out = &c.slot[TPRT_ALL_REDUCE_SLOT_OUTPUT];
    s = tprt__attr(&c, TPRT_ALL_REDUCE_ATTR_REDUCE) == TPRT_REDUCE_MAX
            ? TPRT__KERNEL(exec, all_reduce_max, (rank, mask, in, out))
            : TPRT__KERNEL(exec, all_reduce,
                           (rank, mask, in, out, (tprt_order_t)tprt__attr(&c, TPRT_ALL_REDUCE_ATTR_ORDER)));
    if (!s) tprt__count_comm(exec, TPRT_COMM_ALL_REDUCE, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_ALL_REDUCE_NAME);
}

int32_t tprt_abi_all_gather(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(ALL_GATHER);
  if (!s) {
    tprt_tensor_t *in = &c.slot[TPRT_ALL_GATHER_SLOT_INPUT], *out = &c.slot[TPRT_ALL_GATHER_SLOT_OUTPUT];
    int dim = (int)tprt__attr(&c, TPRT_ALL_GATHER_ATTR_DIM);
    s = tprt__blocked_views(in, out, &dim, tprt__attr(&c, TPRT_ALL_GATHER_ATTR_BLOCKS));
    if (!s) s = TPRT__KERNEL(exec, all_gather, (rank, mask, in, out, dim));
    if (!s) tprt__count_comm(exec, TPRT_COMM_ALL_GATHER, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_ALL_GATHER_NAME);
}

int32_t tprt_abi_reduce_scatter(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(REDUCE_SCATTER);
  if (!s) {
    tprt_tensor_t *in = &c.slot[TPRT_REDUCE_SCATTER_SLOT_INPUT], *out = &c.slot[TPRT_REDUCE_SCATTER_SLOT_OUTPUT];
    int dim = (int)tprt__attr(&c, TPRT_REDUCE_SCATTER_ATTR_DIM);
    s = tprt__blocked_views(in, out, &dim, tprt__attr(&c, TPRT_REDUCE_SCATTER_ATTR_BLOCKS));
    if (!s)
      s = TPRT__KERNEL(exec, reduce_scatter,
                       (rank, mask, in, out, dim, (tprt_order_t)tprt__attr(&c, TPRT_REDUCE_SCATTER_ATTR_ORDER)));
    if (!s) tprt__count_comm(exec, TPRT_COMM_REDUCE_SCATTER, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_REDUCE_SCATTER_NAME);
}

int32_t tprt_abi_all_to_all(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(ALL_TO_ALL);
  if (!s) {
    tprt_tensor_t *in = &c.slot[TPRT_ALL_TO_ALL_SLOT_INPUT], *out = &c.slot[TPRT_ALL_TO_ALL_SLOT_OUTPUT];
    int split = (int)tprt__attr(&c, TPRT_ALL_TO_ALL_ATTR_SPLIT_DIM), concat = (int)tprt__attr(&c, TPRT_ALL_TO_ALL_ATTR_CONCAT_DIM);
    s = tprt__blocked_split_views(in, out, &split, &concat, tprt__attr(&c, TPRT_ALL_TO_ALL_ATTR_BLOCKS));
    if (!s) s = TPRT__KERNEL(exec, all_to_all, (rank, mask, in, out, split, concat));
    if (!s) tprt__count_comm(exec, TPRT_COMM_ALL_TO_ALL, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_ALL_TO_ALL_NAME);
}

int32_t tprt_abi_all_gather_start(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(ALL_GATHER_START);
  if (!s) {
    tprt_tensor_t *in = &c.slot[TPRT_ALL_GATHER_START_SLOT_INPUT], *out = &c.slot[TPRT_ALL_GATHER_START_SLOT_FUTURE];
    int dim = (int)tprt__attr(&c, TPRT_ALL_GATHER_START_ATTR_DIM);
    tprt_future_t* f = NULL;
    s = tprt__blocked_views(in, out, &dim, tprt__attr(&c, TPRT_ALL_GATHER_START_ATTR_BLOCKS));
    if (!s) s = TPRT__KERNEL(exec, all_gather_start, (rank, mask, in, out, dim, &f));
    if (!s) s = TPRT__COMPUTE(exec, tprt_exec_push_future(exec, out->data, f));
    if (!s) tprt__count_comm(exec, TPRT_COMM_ALL_GATHER, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_ALL_GATHER_START_NAME);
}

int32_t tprt_abi_reduce_scatter_start(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(REDUCE_SCATTER_START);
  if (!s) {
    tprt_tensor_t *in = &c.slot[TPRT_REDUCE_SCATTER_START_SLOT_INPUT], *out = &c.slot[TPRT_REDUCE_SCATTER_START_SLOT_FUTURE];
    int dim = (int)tprt__attr(&c, TPRT_REDUCE_SCATTER_START_ATTR_DIM);
    tprt_future_t* f = NULL;
    s = tprt__blocked_views(in, out, &dim, tprt__attr(&c, TPRT_REDUCE_SCATTER_START_ATTR_BLOCKS));
    if (!s)
      s = TPRT__KERNEL(exec, reduce_scatter_start,
                       (rank, mask, in, out, dim, (tprt_order_t)tprt__attr(&c, TPRT_REDUCE_SCATTER_START_ATTR_ORDER), &f));
    if (!s) s = TPRT__COMPUTE(exec, tprt_exec_push_future(exec, out->data, f));
    if (!s) tprt__count_comm(exec, TPRT_COMM_REDUCE_SCATTER, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_REDUCE_SCATTER_START_NAME);
}

int32_t tprt_abi_all_to_all_start(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(ALL_TO_ALL_START);
  if (!s) {
    tprt_tensor_t *in = &c.slot[TPRT_ALL_TO_ALL_START_SLOT_INPUT], *out = &c.slot[TPRT_ALL_TO_ALL_START_SLOT_FUTURE];
    int split = (int)tprt__attr(&c, TPRT_ALL_TO_ALL_START_ATTR_SPLIT_DIM);
    int concat = (int)tprt__attr(&c, TPRT_ALL_TO_ALL_START_ATTR_CONCAT_DIM);
    tprt_future_t* f = NULL;
    s = tprt__blocked_split_views(in, out, &split, &concat, tprt__attr(&c, TPRT_ALL_TO_ALL_START_ATTR_BLOCKS));
    if (!s) s = TPRT__KERNEL(exec, all_to_all_start, (rank, mask, in, out, split, concat, &f));
    if (!s) s = TPRT__COMPUTE(exec, tprt_exec_push_future(exec, out->data, f));
    if (!s) tprt__count_comm(exec, TPRT_COMM_ALL_TO_ALL, in, out, mask);
  }
  return tprt_exec_record(exec, s, TPRT_ALL_TO_ALL_START_NAME);
}

int32_t tprt_abi_wait(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_WAIT_NUM_SLOTS, &c);
  if (!s) {
    tprt_future_t* f = tprt_exec_pop_future(exec, c.slot[TPRT_WAIT_SLOT_FUTURE].data);
    s = f                            ? TPRT__KERNEL(exec, wait, (tprt_exec_rank(exec), f))
        : tprt_exec_count_only(exec) ? NULL
                                     : tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                                                        "no collective is in flight for this future");
  }
  return tprt_exec_record(exec, s, TPRT_WAIT_NAME);
}

// residual_out = round(Σ partial + residual), the sum in f32 (sum_type "f32"); normed =
// rmsnorm(residual_out). A backend's fused_norm hook when it takes the call (the all-reduce form),
// else one mechanism for every backend: its all-reduce (reduce-scatter along tokens when
// |scatter|) into a temporary (the backend's workspace, else the rank's allocator), its add (the
// sum plus the residual, each widened to f32, rounded once to the residual's dtype; IEEE addition
// commutes, so this is
// round(residual + sum)), then its rmsnorm. The op's |algorithm| goes to the hook, which declines
// "composition" (the verifier refuses "one_shot" and "two_shot" on the reduce-scatter form). With
// |sum_type| "residual" the temporary has the residual's dtype: the all-reduce rounds the sum into
// it, as tp.all_reduce then tp.add do, so the op has the chain's bits; the hook is asked to round
// alike.
static tprt_status_t tprt__fused_norm(tprt_exec_t* exec, tprt_call_t* c, uint32_t mask, int order,
                                      int algorithm, int sum_type, bool scatter, int slot_partial, int slot_residual,
                                      int slot_gamma, int slot_normed, int slot_residual_out, float eps,
                                      const tprt_fused_quant_t* quant, bool* quantized) {
  *quantized = false;
  tprt_rank_t* rank = tprt_exec_rank(exec);
  const tprt_tensor_t* residual = &c->slot[slot_residual];
  tprt_tensor_t* out = &c->slot[slot_residual_out];
  tprt_dtype_t sum_dtype = sum_type == TPRT_SUM_TYPE_RESIDUAL ? residual->dtype : TPRT_DTYPE_F32;
  tprt_tensor_t sum = tprt_tensor_make(NULL, sum_dtype, residual->rank, residual->dims);
  if (tprt_exec_count_only(exec)) {
    tprt__count_comm(exec, scatter ? TPRT_COMM_REDUCE_SCATTER : TPRT_COMM_ALL_REDUCE, &c->slot[slot_partial], &sum, mask);
    return NULL;
  }
  const tprt_backend_t* b = tprt_exec_backend(exec);
  if (!(scatter ? b->reduce_scatter != NULL : b->all_reduce != NULL) || !b->add || !b->rmsnorm)
    return tprt__no_kernel(b, scatter ? "fused_reduce_scatter_add_rmsnorm" : "fused_allreduce_add_rmsnorm");
  if (!scatter && b->fused_norm) {
    bool done = false;
    tprt_status_t s = b->fused_norm(rank, mask, &c->slot[slot_partial], residual, &c->slot[slot_gamma],
                                    &c->slot[slot_normed], out, eps, (tprt_order_t)order,
                                    (tprt_fused_algorithm_t)algorithm, sum_type == TPRT_SUM_TYPE_RESIDUAL, quant,
                                    &done);
    if (!s && done) tprt__count_comm(exec, TPRT_COMM_ALL_REDUCE, &c->slot[slot_partial], &sum, mask);
    *quantized = done && quant;
    if (s || done) return s;
  }
  tprt_allocator_t a = tprt_rank_allocator(rank);
  if (b->workspace)
    TPRT_RETURN_IF_ERROR(b->workspace(tprt_tensor_bytes(&sum), &sum.data), "fused norm");
  else
    TPRT_RETURN_IF_ERROR(tprt_allocator_malloc_uninitialized(a, tprt_tensor_bytes(&sum), 64, &sum.data), "fused norm");
  tprt_status_t s = scatter ? b->reduce_scatter(rank, mask, &c->slot[slot_partial], &sum, 0, (tprt_order_t)order)
                            : b->all_reduce(rank, mask, &c->slot[slot_partial], &sum, (tprt_order_t)order);
  if (!s) {
    tprt__count_comm(exec, scatter ? TPRT_COMM_REDUCE_SCATTER : TPRT_COMM_ALL_REDUCE, &c->slot[slot_partial], &sum, mask);
    if (!tprt_tensor_same_layout(residual, out))
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "residual_out must have the residual's shape and dtype");
    else
      s = b->add(&sum, residual, out);
  }
  if (!s) s = b->rmsnorm(out, &c->slot[slot_gamma], &c->slot[slot_normed], eps);
  if (!b->workspace) tprt_allocator_free(a, sum.data);
  return s;
}

int32_t tprt_abi_fused_allreduce_add_rmsnorm(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(FUSED_ALLREDUCE_ADD_RMSNORM);
  bool quantized;
  if (!s)
    s = tprt__fused_norm(exec, &c, mask, (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_ATTR_ORDER),
                         (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_ATTR_ALGORITHM),
                         (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_ATTR_SUM_TYPE), false,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_SLOT_PARTIAL, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_SLOT_RESIDUAL,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_SLOT_GAMMA, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_SLOT_NORMED,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_SLOT_RESIDUAL_OUT,
                         tprt__attr_f32(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_ATTR_EPS), NULL, &quantized);
  return tprt_exec_record(exec, s, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_NAME);
}

// tp.fused_allreduce_add_rmsnorm_quantize: the fused norm above with the quantization of normed
// (rowwise, with the amax operand when given), which the backend's fused step does where it takes
// the call; else tp.quantize's kernel after the composition. Either way the quantize's bits.
int32_t tprt_abi_fused_allreduce_add_rmsnorm_quantize(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE);
  tprt_fused_quant_t q = {0};
  bool quantized = false;
  if (!s) {
    q.format = (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_ATTR_FORMAT);
    q.amax = tprt__opt(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_AMAX);
    q.data = &c.slot[TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_DATA];
    q.scale = &c.slot[TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_SCALE];
    q.global_scale = c.present[TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_GLOBAL_SCALE]
                         ? &c.slot[TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_GLOBAL_SCALE]
                         : NULL;
    s = tprt__fused_norm(exec, &c, mask, (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_ATTR_ORDER),
                         (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_ATTR_ALGORITHM),
                         (int)tprt__attr(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_ATTR_SUM_TYPE), false,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_PARTIAL,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_RESIDUAL,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_GAMMA,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_NORMED,
                         TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_RESIDUAL_OUT,
                         tprt__attr_f32(&c, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_ATTR_EPS), &q, &quantized);
  }
  if (!s && !quantized) {
    const tprt_tensor_t* normed = &c.slot[TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_SLOT_NORMED];
    s = q.amax ? TPRT__KERNEL(exec, quantize_with_amax,
                              (normed, q.amax, q.data, q.scale, q.global_scale, q.format, TPRT_AXIS_ROWWISE))
               : TPRT__KERNEL(exec, quantize, (normed, q.data, q.scale, q.global_scale, q.format, TPRT_AXIS_ROWWISE));
  }
  return tprt_exec_record(exec, s, TPRT_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE_NAME);
}

int32_t tprt_abi_fused_reduce_scatter_add_rmsnorm(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__COLLECTIVE_PROLOGUE(FUSED_REDUCE_SCATTER_ADD_RMSNORM);
  bool quantized;
  if (!s)
    s = tprt__fused_norm(exec, &c, mask, (int)tprt__attr(&c, TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_ATTR_ORDER),
                         (int)tprt__attr(&c, TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_ATTR_ALGORITHM),
                         (int)tprt__attr(&c, TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_ATTR_SUM_TYPE), true,
                         TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_SLOT_PARTIAL,
                         TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_SLOT_RESIDUAL,
                         TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_SLOT_GAMMA,
                         TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_SLOT_NORMED,
                         TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_SLOT_RESIDUAL_OUT,
                         tprt__attr_f32(&c, TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_ATTR_EPS), NULL, &quantized);
  return tprt_exec_record(exec, s, TPRT_FUSED_REDUCE_SCATTER_ADD_RMSNORM_NAME);
}
