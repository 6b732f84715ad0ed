// Shard descriptors and the copies between a logical tensor and one rank's piece (tprt_shard.h).
//
// A copy views each dimension d of the logical tensor as [blocks, S, piece] and the local
// dimension as [blocks, piece], with the rank's composite coordinate c fixed along S. The local
// tensor is then a dense row-major tensor of up to 2 * TPRT_MAX_RANK "expanded" dimensions, each
// with a stride into the logical tensor, plus a base offset (the sum of c * piece * pitch).
// Expanded dimensions of size 1 are dropped, and an outer dimension is merged into its inner
// neighbour whenever the logical side is contiguous across them, so that an unblocked last dim
// (with any fully covered inner dims) is one memcpy per run; the copy walks the outer
// dimensions with an odometer.
#include "tprt_shard.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

//===----------------------------------------------------------------------===//
// Formatting for messages
//===----------------------------------------------------------------------===//

// Appends printf output to |buf| at |*len|, truncating.
static void tprt__shard_append(char* buf, size_t size, size_t* len, const char* fmt, ...) TPRT_PRINTF(4, 5);
static void tprt__shard_append(char* buf, size_t size, size_t* len, const char* fmt, ...) {
  if (*len >= size) return;
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(buf + *len, size - *len, fmt, args);
  va_end(args);
  if (n > 0) *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

// "[8,2]"; a rank outside 0..TPRT_MAX_RANK prints as "[?]".
static const char* tprt__shard_format_dims(int rank, const int64_t* dims, char* buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  if (rank < 0 || rank > TPRT_MAX_RANK) {
    tprt__shard_append(buf, size, &len, "[?]");
    return buf;
  }
  tprt__shard_append(buf, size, &len, "[");
  for (int d = 0; d < rank; ++d) tprt__shard_append(buf, size, &len, "%s%" PRId64, d ? "," : "", dims[d]);
  tprt__shard_append(buf, size, &len, "]");
  return buf;
}

// "{dp,tp}": the names of |count| world axes |axes| in the given order.
static const char* tprt__shard_format_axes(const tprt_world_t* world, int count, const int* axes, char* buf,
                                           size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  tprt__shard_append(buf, size, &len, "{");
  for (int k = 0; k < count; ++k)
    tprt__shard_append(buf, size, &len, "%s%s", k ? "," : "", tprt_world_axis_name(world, axes[k]));
  tprt__shard_append(buf, size, &len, "}");
  return buf;
}

// "{dp,tp}": every axis of the world's mesh.
static const char* tprt__shard_format_mesh(const tprt_world_t* world, char* buf, size_t size) {
  int all[TPRT_MAX_MESH_AXES];
  int n = tprt_world_num_axes(world);
  for (int a = 0; a < n; ++a) all[a] = a;
  return tprt__shard_format_axes(world, n, all, buf, size);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

// The number of shards of dim |d| (1 when replicated); |shard| must be valid.
static int64_t tprt__shard_count(const tprt_shard_t* shard, const tprt_world_t* world, int d) {
  int64_t s = 1;
  for (int k = 0; k < shard->num_axes[d]; ++k) s *= tprt_world_axis_size(world, shard->axes[d][k]);
  return s;
}

tprt_status_t tprt_shard_local_dims(const tprt_shard_t* shard, const tprt_world_t* world,
                                    int64_t out_dims[TPRT_MAX_RANK]) {
  if (!shard || !world || !out_dims)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard, world or out_dims is NULL");
  if (shard->rank < 0 || shard->rank > TPRT_MAX_RANK)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard has rank %d; expected 0 to %d", shard->rank,
                            TPRT_MAX_RANK);
  int mesh_axes = tprt_world_num_axes(world);
  int used_by[TPRT_MAX_MESH_AXES];  // the dim that uses each axis, or -1
  for (int a = 0; a < TPRT_MAX_MESH_AXES; ++a) used_by[a] = -1;
  int64_t dims[TPRT_MAX_RANK];
  char names[160];
  for (int d = 0; d < shard->rank; ++d) {
    int64_t size = shard->logical[d], blocks = shard->blocks[d];
    int n = shard->num_axes[d];
    if (size < 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dim %d has logical size %" PRId64 "; expected >= 0",
                              d, size);
    if (n < 0 || n > TPRT_SHARD_MAX_DIM_AXES)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dim %d has %d mesh axes; expected 0 to %d", d, n,
                              TPRT_SHARD_MAX_DIM_AXES);
    for (int k = 0; k < n; ++k) {
      int a = shard->axes[d][k];
      if (a < 0 || a >= mesh_axes)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                                "shard dim %d names mesh axis %d, but the mesh's axes are %s", d, a,
                                tprt__shard_format_mesh(world, names, sizeof names));
      if (used_by[a] == d)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dim %d names mesh axis '%s' twice", d,
                                tprt_world_axis_name(world, a));
      if (used_by[a] >= 0)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dims %d and %d both use mesh axis '%s'",
                                used_by[a], d, tprt_world_axis_name(world, a));
      used_by[a] = d;
    }
    if (blocks < 1)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dim %d has blocks %" PRId64 "; expected >= 1", d,
                              blocks);
    if (n == 0 && blocks != 1)
      return tprt_make_status(
          TPRT_STATUS_INVALID_ARGUMENT,
          "shard dim %d is replicated but has blocks %" PRId64 "; only a sharded dim can be blocked", d, blocks);
    int64_t s = tprt__shard_count(shard, world, d);
    // size % (blocks * s) == 0, without forming a product that could overflow.
    if (size % blocks != 0 || (size / blocks) % s != 0)
      return tprt_make_status(
          TPRT_STATUS_INVALID_ARGUMENT,
          "shard dim %d has logical size %" PRId64 ", not divisible by blocks %" PRId64 " x %" PRId64 " shards over %s",
          d, size, blocks, s, tprt__shard_format_axes(world, n, shard->axes[d], names, sizeof names));
    dims[d] = size / s;
  }
  for (int d = 0; d < shard->rank; ++d) out_dims[d] = dims[d];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Copy plan
//===----------------------------------------------------------------------===//

// The local tensor as a dense row-major tensor of |n| expanded dims with logical strides.
typedef struct tprt__shard_plan_t {
  int n;
  int64_t size[2 * TPRT_MAX_RANK];
  int64_t stride[2 * TPRT_MAX_RANK];  // in logical elements
  int64_t base;                       // logical element of local element 0
  int64_t total;                      // local elements
} tprt__shard_plan_t;

// Adds an expanded dim inside those already added: drops size 1, merges when contiguous.
static void tprt__shard_plan_push(tprt__shard_plan_t* plan, int64_t size, int64_t stride) {
  if (size == 1) return;
  if (plan->n > 0 && plan->stride[plan->n - 1] == size * stride) {
    plan->size[plan->n - 1] *= size;
    plan->stride[plan->n - 1] = stride;
    return;
  }
  plan->size[plan->n] = size;
  plan->stride[plan->n] = stride;
  ++plan->n;
}

// The composite coordinate and the shard count of dim |d| of a valid |shard| for world rank
// |rank_index| (coordinates from the row-major rank index, last axis fastest).
static void tprt__shard_coord(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index, int d, int64_t* c,
                              int64_t* s) {
  int coord[TPRT_MAX_MESH_AXES] = {0};
  for (int a = tprt_world_num_axes(world) - 1, rest = rank_index; a >= 0; --a) {
    int size = tprt_world_axis_size(world, a);
    coord[a] = rest % size;
    rest /= size;
  }
  *c = 0, *s = 1;
  for (int k = 0; k < shard->num_axes[d]; ++k) {
    int64_t size = tprt_world_axis_size(world, shard->axes[d][k]);
    *c = *c * size + coord[shard->axes[d][k]];
    *s *= size;
  }
}

void tprt_shard_dim_piece(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index, int d, int64_t* first,
                          int64_t* piece) {
  int64_t c, s;
  tprt__shard_coord(shard, world, rank_index, d, &c, &s);
  *piece = shard->logical[d] / (shard->blocks[d] * s);
  *first = c * *piece;
}

// Builds the plan of a valid |shard| for world rank |rank_index|.
static void tprt__shard_plan(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index,
                             tprt__shard_plan_t* plan) {
  memset(plan, 0, sizeof *plan);
  plan->total = 1;
  int64_t pitch[TPRT_MAX_RANK], p = 1;
  for (int d = shard->rank - 1; d >= 0; --d) {
    pitch[d] = p;
    p *= shard->logical[d];
  }
  for (int d = 0; d < shard->rank; ++d) {
    int64_t first, piece, blocks = shard->blocks[d];
    tprt_shard_dim_piece(shard, world, rank_index, d, &first, &piece);
    plan->base += first * pitch[d];
    plan->total *= blocks * piece;
    tprt__shard_plan_push(plan, blocks, shard->logical[d] / blocks * pitch[d]);
    tprt__shard_plan_push(plan, piece, pitch[d]);
  }
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

// Copies |count| elements of |bits| bits from source element |src_elem| (then every |src_step|-th)
// to destination element |dst_elem| (then every |dst_step|-th). Only 4-bit and whole-byte element
// types exist; a 4-bit copy leaves the destination's other nibbles alone.
static void tprt__shard_copy_run(uint8_t* dst, int64_t dst_elem, int64_t dst_step, const uint8_t* src, int64_t src_elem,
                                 int64_t src_step, int64_t count, int bits) {
  if (bits % 8 == 0) {
    size_t esize = (size_t)bits / 8;
    uint8_t* d = dst + (size_t)dst_elem * esize;
    const uint8_t* s = src + (size_t)src_elem * esize;
    if (dst_step == 1 && src_step == 1) {
      memcpy(d, s, (size_t)count * esize);
      return;
    }
    for (int64_t i = 0; i < count; ++i, d += (size_t)dst_step * esize, s += (size_t)src_step * esize)
      memcpy(d, s, esize);
    return;
  }
  // f4E2M1FN: element j lives in byte j / 2, in the low nibble when j is even. When both ends are
  // byte-aligned and the run is dense, whole bytes move at once; an odd tail goes nibble-wise.
  if (dst_step == 1 && src_step == 1 && dst_elem % 2 == 0 && src_elem % 2 == 0) {
    memcpy(dst + dst_elem / 2, src + src_elem / 2, (size_t)(count / 2));
    if (count % 2 == 0) return;
    dst_elem += count - 1;
    src_elem += count - 1;
    count = 1;
  }
  for (int64_t i = 0; i < count; ++i, dst_elem += dst_step, src_elem += src_step) {
    unsigned v = (src[src_elem / 2] >> (4 * (src_elem % 2))) & 0xFu;
    uint8_t* d = &dst[dst_elem / 2];
    unsigned shift = 4u * (unsigned)(dst_elem % 2);
    *d = (uint8_t)((*d & ~(0xFu << shift)) | (v << shift));
  }
}

// Checks everything extract and insert need, and builds the plan. |fn| names the caller.
static tprt_status_t tprt__shard_prepare(const char* fn, const tprt_shard_t* shard, const tprt_world_t* world,
                                         int rank_index, const tprt_tensor_t* logical, const tprt_tensor_t* local,
                                         tprt__shard_plan_t* plan) {
  if (!shard || !world || !logical || !local)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: shard, world, logical or local is NULL", fn);
  int64_t dims[TPRT_MAX_RANK];
  TPRT_RETURN_IF_ERROR(tprt_shard_local_dims(shard, world, dims), "%s", fn);
  int world_size = tprt_world_size(world);
  if (rank_index < 0 || rank_index >= world_size)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: rank index %d is outside the world's ranks 0 to %d", fn,
                            rank_index, world_size - 1);
  int bits = tprt_dtype_bits(logical->dtype);
  if (bits == 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: logical has invalid dtype %d", fn, logical->dtype);
  const char* dtype = tprt_dtype_name(logical->dtype);
  char got[160], want[160];
  tprt_tensor_t expected = tprt_tensor_make(NULL, logical->dtype, shard->rank, shard->logical);
  if (!tprt_tensor_same_layout(logical, &expected))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: logical is %s%s; expected %s%s, the shard's logical shape", fn, dtype,
                            tprt__shard_format_dims(logical->rank, logical->dims, got, sizeof got), dtype,
                            tprt__shard_format_dims(shard->rank, shard->logical, want, sizeof want));
  expected.rank = shard->rank;
  for (int d = 0; d < shard->rank; ++d) expected.dims[d] = dims[d];
  if (!tprt_tensor_same_layout(local, &expected)) {
    char full[160];
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: local is %s%s; expected %s%s, rank %d's piece of %s%s",
                            fn, tprt_dtype_name(local->dtype),
                            tprt__shard_format_dims(local->rank, local->dims, got, sizeof got), dtype,
                            tprt__shard_format_dims(shard->rank, dims, want, sizeof want), rank_index, dtype,
                            tprt__shard_format_dims(shard->rank, shard->logical, full, sizeof full));
  }
  int last = shard->rank - 1;
  if (bits == 4 && last >= 0 && shard->num_axes[last] > 0) {
    int64_t s = tprt__shard_count(shard, world, last);
    int64_t piece = shard->logical[last] / (shard->blocks[last] * s);
    if (piece % 2 != 0)
      return tprt_make_status(
          TPRT_STATUS_INVALID_ARGUMENT,
          "%s: the last dim (%d) of %s%s is cut into pieces of %" PRId64 " elements (blocks %" PRId64 " x %" PRId64
          " shards over %s); %s packs two elements per byte, so pieces must be even",
          fn, last, dtype, tprt__shard_format_dims(shard->rank, shard->logical, got, sizeof got), piece,
          shard->blocks[last], s,
          tprt__shard_format_axes(world, shard->num_axes[last], shard->axes[last], want, sizeof want), dtype);
  }
  tprt__shard_plan(shard, world, rank_index, plan);
  if (plan->total > 0 && (!logical->data || !local->data))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s data is NULL", fn,
                            !logical->data ? "logical" : "local");
  return NULL;
}

// Runs the plan: extract copies logical -> local, insert local -> logical.
static void tprt__shard_copy(const tprt__shard_plan_t* plan, int bits, bool extract, uint8_t* logical, uint8_t* local) {
  if (plan->total == 0) return;
  // The innermost expanded dim is the run; a rank-0 or all-ones shape is one run of one element.
  int outer = plan->n > 0 ? plan->n - 1 : 0;
  int64_t run = plan->n > 0 ? plan->size[outer] : 1, step = plan->n > 0 ? plan->stride[outer] : 1;
  int64_t index[2 * TPRT_MAX_RANK] = {0};
  for (int64_t local_elem = 0; local_elem < plan->total; local_elem += run) {
    int64_t logical_elem = plan->base;
    for (int e = 0; e < outer; ++e) logical_elem += index[e] * plan->stride[e];
    if (extract)
      tprt__shard_copy_run(local, local_elem, 1, logical, logical_elem, step, run, bits);
    else
      tprt__shard_copy_run(logical, logical_elem, step, local, local_elem, 1, run, bits);
    for (int e = outer - 1; e >= 0 && ++index[e] == plan->size[e]; --e) index[e] = 0;
  }
}

tprt_status_t tprt_shard_extract(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index,
                                 const tprt_tensor_t* logical, tprt_tensor_t* local) {
  tprt__shard_plan_t plan;
  tprt_status_t status = tprt__shard_prepare("shard_extract", shard, world, rank_index, logical, local, &plan);
  if (status) return status;
  int bits = tprt_dtype_bits(local->dtype);
  tprt__shard_copy(&plan, bits, true, logical->data, local->data);
  // Packed f4 with an odd count: the byte that holds the last element has an unused high nibble.
  if (bits == 4 && plan.total % 2 == 1) ((uint8_t*)local->data)[plan.total / 2] &= 0x0F;
  return NULL;
}

tprt_status_t tprt_shard_insert(const tprt_shard_t* shard, const tprt_world_t* world, int rank_index,
                                const tprt_tensor_t* local, tprt_tensor_t* logical) {
  tprt__shard_plan_t plan;
  tprt_status_t status = tprt__shard_prepare("shard_insert", shard, world, rank_index, logical, local, &plan);
  if (status) return status;
  tprt__shard_copy(&plan, tprt_dtype_bits(logical->dtype), false, logical->data, local->data);
  return NULL;
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

static bool tprt__shard_is_space(char c) { return c == ' ' || c == '\t'; }

// Resolves the comma-separated axis names |list| of dim |d| into |shard|'s axes.
static tprt_status_t tprt__shard_parse_axes(const char* list, int d, const tprt_world_t* world, tprt_shard_t* shard) {
  const char* p = list;
  while (tprt__shard_is_space(*p)) ++p;
  if (*p == '\0') return NULL;  // "" or blanks: replicated
  for (;;) {
    while (tprt__shard_is_space(*p)) ++p;
    const char* end = p;
    while (*end != ',' && *end != '\0') ++end;
    size_t len = (size_t)(end - p);
    while (len > 0 && tprt__shard_is_space(p[len - 1])) --len;
    if (len == 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dim %d: axis list '%s' has an empty name", d, list);
    if (shard->num_axes[d] == TPRT_SHARD_MAX_DIM_AXES)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard dim %d: axis list '%s' names more than %d mesh axes",
                              d, list, TPRT_SHARD_MAX_DIM_AXES);
    char name[TPRT_MAX_AXIS_NAME + 1];
    int axis = -1;
    if (len <= TPRT_MAX_AXIS_NAME) {  // a longer name cannot be an axis
      memcpy(name, p, len);
      name[len] = '\0';
      axis = tprt_world_find_axis(world, name);
    }
    if (axis < 0) {
      char mesh[160];
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "shard dim %d: axis list '%s' names axis '%.*s', but the mesh's axes are %s", d, list,
                              (int)len, p, tprt__shard_format_mesh(world, mesh, sizeof mesh));
    }
    shard->axes[d][shard->num_axes[d]++] = axis;
    if (*end == '\0') return NULL;
    p = end + 1;
  }
}

tprt_status_t tprt_shard_from_names(int rank, const int64_t* logical, const char* const* axis_names,
                                    const int64_t* blocks, const tprt_world_t* world, tprt_shard_t* out_shard) {
  if (!world || !out_shard)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard_from_names: world or out_shard is NULL");
  if (rank < 0 || rank > TPRT_MAX_RANK)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard has rank %d; expected 0 to %d", rank, TPRT_MAX_RANK);
  if (rank > 0 && !logical)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "shard has rank %d, but its logical shape is NULL", rank);
  tprt_shard_t shard;
  memset(&shard, 0, sizeof shard);
  shard.rank = rank;
  for (int d = 0; d < TPRT_MAX_RANK; ++d) shard.blocks[d] = 1;
  for (int d = 0; d < rank; ++d) {
    shard.logical[d] = logical[d];
    if (blocks) shard.blocks[d] = blocks[d];
    if (axis_names && axis_names[d]) {
      tprt_status_t status = tprt__shard_parse_axes(axis_names[d], d, world, &shard);
      if (status) return status;
    }
  }
  int64_t dims[TPRT_MAX_RANK];
  tprt_status_t status = tprt_shard_local_dims(&shard, world, dims);
  if (status) return status;
  *out_shard = shard;
  return NULL;
}
