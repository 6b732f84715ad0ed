// Collective entry points (see tprt_collectives.h): argument validation, the call signature
// that members compare, staging of the input, and the asynchronous futures. The data movement
// and reductions are in tprt_collectives_compute.c; the rendezvous is in tprt_world.c.
#include <stdio.h>
#include <string.h>

#include "tprt_collectives_impl.h"

// Returns |expr|'s failure unchanged: validation messages already name the collective.
#define TPRT__RETURN_IF_ERROR(expr) \
  do {                              \
    tprt_status_t tprt__s = (expr); \
    if (tprt__s) return tprt__s;    \
  } while (0)

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

static const char* tprt__order_name(tprt_order_t order) { return order == TPRT_ORDER_CANONICAL ? "canonical" : "any"; }

// Formats |t| as "f32[2,4]" ("f32[]" for rank 0) into |buf|.
static const char* tprt__format_tensor(const tprt_tensor_t* t, char* buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "%s[", tprt_dtype_name(t->dtype));
  for (int d = 0; d < t->rank && n < size; ++d)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? "," : "", (long long)t->dims[d]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

static tprt_status_t tprt__check_tensor(const char* name, const char* role, const tprt_tensor_t* t) {
  if (!t) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", name, role);
  if (t->dtype < 0 || t->dtype >= TPRT_DTYPE_COUNT)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s has invalid dtype %d", name, role, t->dtype);
  if (t->rank < 0 || t->rank > TPRT_MAX_RANK)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s has rank %d; expected 0 to %d", name, role, t->rank,
                            TPRT_MAX_RANK);
  for (int d = 0; d < t->rank; ++d)
    if (t->dims[d] < 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s dim %d is %lld", name, role, d,
                              (long long)t->dims[d]);
  if (!t->data && tprt_tensor_numel(t) > 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s has no data", name, role);
  return NULL;
}

static tprt_status_t tprt__check_reducible(const char* name, const char* role, const tprt_tensor_t* t) {
  if (t->dtype == TPRT_DTYPE_BF16 || t->dtype == TPRT_DTYPE_F16 || t->dtype == TPRT_DTYPE_F32) return NULL;
  return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: %s dtype %s cannot be reduced; expected bf16, f16 or f32",
                          name, role, tprt_dtype_name(t->dtype));
}

static tprt_status_t tprt__check_order(const tprt__call_t* call, const tprt_rank_t* rank) {
  if (call->order != TPRT_ORDER_ANY && call->order != TPRT_ORDER_CANONICAL)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: order %d is neither TPRT_ORDER_ANY (%d) nor TPRT_ORDER_CANONICAL (%d)", call->name,
                            call->order, TPRT_ORDER_ANY, TPRT_ORDER_CANONICAL);
  int g = call->group_size;
  if (call->order == TPRT_ORDER_CANONICAL && (g & (g - 1)) != 0) {
    char axes[160];
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: order canonical needs a power-of-two group, but the group over %s has %d ranks",
                            call->name, tprt__world_format_axes(rank->world, call->mask, axes, sizeof axes), g);
  }
  return NULL;
}

static tprt_status_t tprt__check_dim(const char* name, const char* what, int dim, const tprt_tensor_t* in) {
  if (dim >= 0 && dim < in->rank) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s %d is out of range for in of rank %d", name, what, dim,
                          in->rank);
}

static tprt_status_t tprt__check_splits(const tprt__call_t* call, const char* what, int dim) {
  int64_t size = call->in.dims[dim];
  if (size % call->group_size == 0) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                          "%s: in's %s %d has size %lld, not divisible by the group size %d", call->name, what, dim,
                          (long long)size, call->group_size);
}

// f4E2M1FN packs two elements per byte; data movement works on whole bytes, so the last dim
// of in and every slice along it must be even.
static tprt_status_t tprt__check_packed(const tprt__call_t* call, int sliced_dim, int64_t slice) {
  if (tprt_dtype_bits(call->in.dtype) >= 8 || call->in.rank == 0) return NULL;
  int last = call->in.rank - 1;
  if (call->in.dims[last] % 2 != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: %s packs two elements per byte, so in's last dim must be even, not %lld", call->name,
                            tprt_dtype_name(call->in.dtype), (long long)call->in.dims[last]);
  if (sliced_dim == last && slice % 2 != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: %s packs two elements per byte, so slices along the last dim must be even, not %lld",
                            call->name, tprt_dtype_name(call->in.dtype), (long long)slice);
  return NULL;
}

// Checks that out is |expected| (dtype and shape); |how| explains where the shape comes from.
static tprt_status_t tprt__check_out(const tprt__call_t* call, const tprt_tensor_t* expected, const char* how) {
  if (tprt_tensor_same_layout(&call->out, expected)) return NULL;
  char got[256], want[256], in[256];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: out is %s; expected %s for in %s%s", call->name,
                          tprt__format_tensor(&call->out, got, sizeof got),
                          tprt__format_tensor(expected, want, sizeof want),
                          tprt__format_tensor(&call->in, in, sizeof in), how);
}

// Validates |call|'s arguments for its kind (mask, in and out already checked).
static tprt_status_t tprt__check_call(const tprt__call_t* call, const tprt_rank_t* rank) {
  const char* name = call->name;
  tprt_tensor_t expected = call->in;
  char how[160];
  int g = call->group_size;
  switch (call->kind) {
    case TPRT__ALL_REDUCE:
      TPRT__RETURN_IF_ERROR(tprt__check_reducible(name, "in", &call->in));
      if (call->max) return tprt__check_out(call, &expected, " (a max keeps in's dtype)");
      TPRT__RETURN_IF_ERROR(tprt__check_reducible(name, "out", &call->out));
      TPRT__RETURN_IF_ERROR(tprt__check_order(call, rank));
      expected.dtype = call->out.dtype;
      return tprt__check_out(call, &expected, "");
    case TPRT__REDUCE_SCATTER:
      TPRT__RETURN_IF_ERROR(tprt__check_reducible(name, "in", &call->in));
      TPRT__RETURN_IF_ERROR(tprt__check_reducible(name, "out", &call->out));
      TPRT__RETURN_IF_ERROR(tprt__check_order(call, rank));
      TPRT__RETURN_IF_ERROR(tprt__check_dim(name, "dim", call->dim, &call->in));
      TPRT__RETURN_IF_ERROR(tprt__check_splits(call, "dim", call->dim));
      expected.dtype = call->out.dtype;
      expected.dims[call->dim] /= g;
      snprintf(how, sizeof how, " scattered along dim %d over %d ranks", call->dim, g);
      return tprt__check_out(call, &expected, how);
    case TPRT__ALL_GATHER:
      TPRT__RETURN_IF_ERROR(tprt__check_dim(name, "dim", call->dim, &call->in));
      TPRT__RETURN_IF_ERROR(tprt__check_packed(call, -1, 0));
      expected.dims[call->dim] *= g;
      snprintf(how, sizeof how, " gathered along dim %d over %d ranks", call->dim, g);
      return tprt__check_out(call, &expected, how);
    case TPRT__ALL_TO_ALL:
      TPRT__RETURN_IF_ERROR(tprt__check_dim(name, "split_dim", call->dim, &call->in));
      TPRT__RETURN_IF_ERROR(tprt__check_dim(name, "concat_dim", call->concat_dim, &call->in));
      TPRT__RETURN_IF_ERROR(tprt__check_splits(call, "split_dim", call->dim));
      TPRT__RETURN_IF_ERROR(tprt__check_packed(call, call->dim, call->in.dims[call->dim] / g));
      expected.dims[call->dim] /= g;
      expected.dims[call->concat_dim] *= g;
      snprintf(how, sizeof how, " split along dim %d and concatenated along dim %d over %d ranks", call->dim,
               call->concat_dim, g);
      return tprt__check_out(call, &expected, how);
    case TPRT__BARRIER:
      return NULL;
  }
  return tprt_make_status(TPRT_STATUS_INTERNAL, "%s: unknown collective kind %d", name, (int)call->kind);
}

// Formats what members compare: the collective with its dtypes, shapes and attributes.
static void tprt__format_signature(const tprt__call_t* call, char* buf, size_t size) {
  char in[256], out[256];
  if (call->kind == TPRT__BARRIER) {
    snprintf(buf, size, "%s()", call->name);
    return;
  }
  tprt__format_tensor(&call->in, in, sizeof in);
  tprt__format_tensor(&call->out, out, sizeof out);
  switch (call->kind) {
    case TPRT__ALL_REDUCE:
      if (call->max)
        snprintf(buf, size, "%s(in %s, out %s, max)", call->name, in, out);
      else
        snprintf(buf, size, "%s(in %s, out %s, order %s)", call->name, in, out, tprt__order_name(call->order));
      break;
    case TPRT__REDUCE_SCATTER:
      snprintf(buf, size, "%s(in %s, out %s, dim %d, order %s)", call->name, in, out, call->dim,
               tprt__order_name(call->order));
      break;
    case TPRT__ALL_GATHER:
      snprintf(buf, size, "%s(in %s, out %s, dim %d)", call->name, in, out, call->dim);
      break;
    default:
      snprintf(buf, size, "%s(in %s, out %s, split_dim %d, concat_dim %d)", call->name, in, out, call->dim,
               call->concat_dim);
      break;
  }
}

//===----------------------------------------------------------------------===//
// Start and finish
//===----------------------------------------------------------------------===//

tprt_status_t tprt__collective_start(tprt_rank_t* rank, tprt__call_t* call, const tprt_tensor_t* in,
                                     const tprt_tensor_t* out, tprt__rendezvous_t* out_rendezvous) {
  memset(out_rendezvous, 0, sizeof *out_rendezvous);
  if (!rank) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: rank is NULL", call->name);
  tprt_status_t status = tprt__rendezvous_check_mask(rank, call->mask, call->name);
  if (status) return status;
  call->group_size = tprt_rank_group_size(rank, call->mask);
  call->group_index = tprt_rank_group_index(rank, call->mask);
  if (call->kind != TPRT__BARRIER) {
    TPRT__RETURN_IF_ERROR(tprt__check_tensor(call->name, "in", in));
    TPRT__RETURN_IF_ERROR(tprt__check_tensor(call->name, "out", out));
    call->in = *in;
    call->out = *out;
    if (call->kind != TPRT__ALL_REDUCE && call->kind != TPRT__REDUCE_SCATTER && in->dtype != out->dtype)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: out dtype %s differs from in dtype %s", call->name,
                              tprt_dtype_name(out->dtype), tprt_dtype_name(in->dtype));
    if (in->rank != out->rank)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: out has rank %d but in has rank %d", call->name,
                              out->rank, in->rank);
  }
  TPRT__RETURN_IF_ERROR(tprt__check_call(call, rank));
  char signature[768];
  tprt__format_signature(call, signature, sizeof signature);

  // Stage a private copy of the input: members read it after this rank may have moved on, and
  // out may overlap in.
  void* staged = NULL;
  size_t bytes = 0;
  if (call->kind != TPRT__BARRIER) {
    bytes = tprt_tensor_bytes(&call->in);
    TPRT_RETURN_IF_ERROR(tprt_allocator_malloc_uninitialized(tprt_rank_allocator(rank), bytes, 64, &staged),
                         "%s: staging %zu bytes", call->name, bytes);
    if (bytes) memcpy(staged, call->in.data, bytes);
  }
  return tprt__rendezvous_post(rank, call->mask, call->name, signature, staged, bytes, out_rendezvous);
}

tprt_status_t tprt__collective_finish(const tprt__call_t* call, tprt__rendezvous_t* rendezvous) {
  void* const* inputs = NULL;
  tprt_status_t status = tprt__rendezvous_wait(rendezvous, &inputs);
  if (!status && call->kind != TPRT__BARRIER) tprt__collective_compute(call, inputs);
  tprt__rendezvous_release(rendezvous);
  return status;
}

// Runs |call| synchronously.
static tprt_status_t tprt__collective_run(tprt_rank_t* rank, tprt__call_t* call, const tprt_tensor_t* in,
                                          const tprt_tensor_t* out) {
  tprt__rendezvous_t rendezvous;
  tprt_status_t status = tprt__collective_start(rank, call, in, out, &rendezvous);
  if (status) return status;
  return tprt__collective_finish(call, &rendezvous);
}

//===----------------------------------------------------------------------===//
// Synchronous collectives
//===----------------------------------------------------------------------===//

tprt_status_t tprt_all_reduce(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                              tprt_order_t order) {
  tprt__call_t call = {.kind = TPRT__ALL_REDUCE, .name = "all_reduce", .mask = axes_mask, .order = order};
  return tprt__collective_run(rank, &call, in, out);
}

tprt_status_t tprt_all_reduce_max(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out) {
  tprt__call_t call = {.kind = TPRT__ALL_REDUCE, .name = "all_reduce", .mask = axes_mask, .max = true};
  return tprt__collective_run(rank, &call, in, out);
}

tprt_status_t tprt_all_gather(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                              int dim) {
  tprt__call_t call = {.kind = TPRT__ALL_GATHER, .name = "all_gather", .mask = axes_mask, .dim = dim};
  return tprt__collective_run(rank, &call, in, out);
}

tprt_status_t tprt_reduce_scatter(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                                  int dim, tprt_order_t order) {
  tprt__call_t call = {
      .kind = TPRT__REDUCE_SCATTER, .name = "reduce_scatter", .mask = axes_mask, .dim = dim, .order = order};
  return tprt__collective_run(rank, &call, in, out);
}

tprt_status_t tprt_all_to_all(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                              int split_dim, int concat_dim) {
  tprt__call_t call = {
      .kind = TPRT__ALL_TO_ALL, .name = "all_to_all", .mask = axes_mask, .dim = split_dim, .concat_dim = concat_dim};
  return tprt__collective_run(rank, &call, in, out);
}

tprt_status_t tprt_barrier(tprt_rank_t* rank, uint32_t axes_mask) {
  tprt__call_t call = {.kind = TPRT__BARRIER, .name = "barrier", .mask = axes_mask};
  return tprt__collective_run(rank, &call, NULL, NULL);
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives
//===----------------------------------------------------------------------===//

// Starts |call| and hands back a future linked into the rank's list of unwaited futures.
static tprt_status_t tprt__collective_start_async(tprt_rank_t* rank, const tprt__call_t* call, const tprt_tensor_t* in,
                                                  const tprt_tensor_t* out, tprt_future_t** out_future) {
  if (!out_future) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s_start: out_future is NULL", call->name);
  *out_future = NULL;
  if (!rank) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s_start: rank is NULL", call->name);
  tprt_future_t* future = NULL;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(tprt_rank_allocator(rank), sizeof *future, 64, (void**)&future),
                       "%s_start", call->name);
  future->call = *call;
  tprt_status_t status = tprt__collective_start(rank, &future->call, in, out, &future->rendezvous);
  if (status) {
    tprt_allocator_free(tprt_rank_allocator(rank), future);
    return status;
  }
  future->rank = rank;
  future->next = rank->futures;
  rank->futures = future;
  *out_future = future;
  return NULL;
}

tprt_status_t tprt_all_gather_start(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                                    int dim, tprt_future_t** out_future) {
  tprt__call_t call = {.kind = TPRT__ALL_GATHER, .name = "all_gather", .mask = axes_mask, .dim = dim};
  return tprt__collective_start_async(rank, &call, in, out, out_future);
}

tprt_status_t tprt_reduce_scatter_start(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in,
                                        tprt_tensor_t* out, int dim, tprt_order_t order, tprt_future_t** out_future) {
  tprt__call_t call = {
      .kind = TPRT__REDUCE_SCATTER, .name = "reduce_scatter", .mask = axes_mask, .dim = dim, .order = order};
  return tprt__collective_start_async(rank, &call, in, out, out_future);
}

tprt_status_t tprt_all_to_all_start(tprt_rank_t* rank, uint32_t axes_mask, const tprt_tensor_t* in, tprt_tensor_t* out,
                                    int split_dim, int concat_dim, tprt_future_t** out_future) {
  tprt__call_t call = {
      .kind = TPRT__ALL_TO_ALL, .name = "all_to_all", .mask = axes_mask, .dim = split_dim, .concat_dim = concat_dim};
  return tprt__collective_start_async(rank, &call, in, out, out_future);
}

tprt_status_t tprt_wait(tprt_rank_t* rank, tprt_future_t* future) {
  if (!future) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "wait: future is NULL");
  if (!rank || future->rank != rank)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "wait: the future was started by rank %d, not rank %d",
                            future->rank->index, rank ? rank->index : -1);
  tprt_future_t** link = &rank->futures;
  while (*link && *link != future) link = &(*link)->next;
  if (*link) *link = future->next;
  tprt_status_t status = tprt__collective_finish(&future->call, &future->rendezvous);
  tprt_allocator_free(tprt_rank_allocator(rank), future);
  return status;
}

void tprt__rank_drop_futures(tprt_rank_t* rank) {
  while (rank->futures) {
    tprt_future_t* future = rank->futures;
    rank->futures = future->next;
    tprt__rendezvous_release(&future->rendezvous);
    tprt_allocator_free(tprt_rank_allocator(rank), future);
  }
}
