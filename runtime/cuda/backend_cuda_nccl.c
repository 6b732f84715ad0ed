// The CUDA backend's collectives (backend_cuda_impl.h): NCCL communicators per collective group,
// canonical reductions as NCCL data movement plus tprt_cuda_reduce_staged, max all-reduces with
// ncclMax, byte movement with strided device copies, the async starts on the comm stream with
// event futures, and the stream wait that turns NCCL failures, world aborts and timeouts into
// statuses. See backend_cuda.c for
// the backend as a whole. Every collective queues its work on tprt__r.issue: the compute stream,
// or the comm stream while a start issues it. When the ranks share GPUs (tprt__r.shared) no NCCL
// communicator exists: each collective validates its arguments here, then hands a local group to
// backend_cuda_local.c.
#define _POSIX_C_SOURCE 200809L  // nanosleep, clock_gettime
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda_impl.h"
#include "tprt_params.h"

tprt_status_t tprt__nccl_status(ncclResult_t r, const char* expr) {
  return tprt_make_status(TPRT_STATUS_INTERNAL, "%s failed: %s (%s)", expr, ncclGetErrorString(r),
                          ncclGetLastError(NULL));
}

//===----------------------------------------------------------------------===//
// Waiting for the stream: NCCL failures and hung peers end the world instead of hanging it
//===----------------------------------------------------------------------===//

static double tprt__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Aborts every communicator of the rank (their kernels return) and tells a fused norm kernel
// waiting for its peers to stop, so that no stream waits forever.
static void tprt__abort_comms(void) {
  if (tprt__r.fused_abort) *tprt__r.fused_abort = 1;
  for (int i = 0; i < tprt__r.num_comms; ++i)
    if (tprt__r.comms[i].comm) ncclCommAbort(tprt__r.comms[i].comm);
  tprt__r.num_comms = 0;
}

// Whether |stream| has finished its queued work: NULL with *done set, or a CUDA error.
static tprt_status_t tprt__stream_done(cudaStream_t stream, bool* done) {
  cudaError_t e = cudaStreamQuery(stream);
  *done = e == cudaSuccess;
  if (e == cudaSuccess || e == cudaErrorNotReady) return NULL;
  return tprt__cuda_make_status(e, "cudaStreamQuery", __FILE__, __LINE__);
}

// Waits for the rank's streams (compute and comm), polling: an NCCL asynchronous error, another
// rank's failure (the world aborted) or TPRT_COLLECTIVE_TIMEOUT_S seconds without completion
// abort the rank's NCCL communicators and return a status naming the cause.
tprt_status_t tprt__wait_stream(void) {
  const double start = tprt__now(), timeout = (double)tprt_param_collective_timeout_s();
  for (int polls = 0;; ++polls) {
    bool compute = false, comm = true;
    TPRT__TRY(tprt__stream_done(tprt__r.stream, &compute));
    if (tprt__r.comm_stream) TPRT__TRY(tprt__stream_done(tprt__r.comm_stream, &comm));
    if (compute && comm) return NULL;
    for (int i = 0; i < tprt__r.num_comms; ++i) {
      ncclResult_t async = ncclSuccess;
      if (tprt__r.comms[i].comm) ncclCommGetAsyncError(tprt__r.comms[i].comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        tprt_status_t s = tprt__nccl_status(async, "an NCCL collective (asynchronous error)");
        tprt__abort_comms();
        return s;
      }
    }
    tprt_status_t aborted = tprt__r.rank ? tprt_rank_check_abort(tprt__r.rank) : NULL;
    if (aborted) {
      tprt__abort_comms();
      return tprt_status_annotate(aborted, "while this rank waited for its GPU work; NCCL communicators aborted");
    }
    if (timeout > 0 && tprt__now() - start > timeout) {
      tprt__abort_comms();
      return tprt_make_status(TPRT_STATUS_DEADLINE_EXCEEDED,
                              "the rank's GPU work (NCCL collectives included) did not finish within %.0f s "
                              "(TPRT_COLLECTIVE_TIMEOUT_S): a peer is stuck or gone; NCCL communicators aborted",
                              timeout);
    }
    if (polls > 1000) {  // spin briefly for short steps, then sleep between polls
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
}

// After a failed wait (an abort, the timeout): waits up to |seconds| more for the streams to drain,
// without asking why. The failure aborted the communicators, and the fused norm kernels poll the
// abort word, so queued work ends; until it has, a queued copy may still read or write the
// caller's host memory, which the caller frees once the error returns.
void tprt__drain_after_failure(double seconds) {
  const double start = tprt__now();
  for (;;) {
    bool compute = false, comm = true;
    if (tprt__stream_done(tprt__r.stream, &compute)) return;  // a sticky error: nothing runs any more
    if (tprt__r.comm_stream && tprt__stream_done(tprt__r.comm_stream, &comm)) return;
    if ((compute && comm) || tprt__now() - start > seconds) return;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

// Fault injection for tests of failure handling: TPRT_CUDA_FAULT="R:N" makes world rank R fail its
// N-th collective call (counting from 1) instead of issuing it; its peers then wait in NCCL for a
// partner that never comes, and must end with the world's abort rather than hang.
tprt_status_t tprt__fault(void) {
  const char* spec = getenv("TPRT_CUDA_FAULT");
  ++tprt__r.collectives;
  int rank = -1;
  long long n = 0;
  if (!spec || sscanf(spec, "%d:%lld", &rank, &n) != 2 || !tprt__r.rank) return NULL;
  if (tprt_rank_index(tprt__r.rank) != rank || tprt__r.collectives != n) return NULL;
  return tprt_make_status(TPRT_STATUS_INTERNAL, "injected fault (TPRT_CUDA_FAULT=%s): collective %lld not issued",
                          spec, n);
}

// The communicator of the calling rank's group over |mask|, created on first use: group member 0
// makes the NCCL unique id and the CPU world's all-gather (host memory) hands it to the others.
// When the ranks share GPUs the group is local instead (no NCCL, nothing exchanged here). The async
// collectives (issued on comm_stream) of a group have a communicator of their own: NCCL orders the
// operations of one communicator, so a synchronous collective of the group on the compute stream
// would otherwise wait for every prefetch in flight, and the compute stream with it.
static tprt_status_t tprt__comm(tprt_rank_t* rank, uint32_t mask, tprt__cuda_comm_t** out) {
  TPRT__TRY(tprt__need_rank());
  bool async = tprt__r.issue == tprt__r.comm_stream && !tprt__r.shared;
  // Local groups (backend_cuda_local.c): every group of ranks that share GPUs, and the async
  // collectives' groups of copy-engine worlds.
  bool local = tprt__r.shared || (async && tprt__r.ce);
  for (int i = 0; i < tprt__r.num_comms; ++i)
    if (tprt__r.comms[i].mask == mask && tprt__r.comms[i].async == async) {
      *out = &tprt__r.comms[i];
      return NULL;
    }
  if (tprt__r.num_comms == TPRT__CUDA_MAX_COMMS)
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "more than %d collective groups", TPRT__CUDA_MAX_COMMS);
  int g = tprt_rank_group_size(rank, mask), index = tprt_rank_group_index(rank, mask);
  if (local && g > 0) {
    tprt__cuda_comm_t* c = &tprt__r.comms[tprt__r.num_comms++];
    *c = (tprt__cuda_comm_t){.mask = mask, .comm = NULL, .size = g, .index = index, .local = true, .async = async};
    *out = c;
    return NULL;
  }
  enum { WORDS = (sizeof(ncclUniqueId) + 3) / 4 };
  int32_t mine[WORDS];
  int32_t* all = calloc((size_t)g * WORDS, sizeof(int32_t));
  if (!all) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  memset(mine, 0, sizeof mine);
  ncclUniqueId id;
  if (index == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      free(all);
      return tprt__nccl_status(r, "ncclGetUniqueId");
    }
    memcpy(mine, &id, sizeof id);
  }
  int64_t dm[1] = {WORDS}, da[1] = {(int64_t)g * WORDS};
  tprt_tensor_t in = tprt_tensor_make(mine, TPRT_DTYPE_I32, 1, dm), gathered = tprt_tensor_make(all, TPRT_DTYPE_I32, 1, da);
  tprt_status_t s = tprt_all_gather(rank, mask, &in, &gathered, 0);
  if (!s) memcpy(&id, all, sizeof id);
  free(all);
  if (s) return s;
  tprt__cuda_comm_t* c = &tprt__r.comms[tprt__r.num_comms];
  // An async collective's communicator uses at most TPRT_CUDA_COMM_SMS CTAs: it then fits the SMs
  // the GEMMs leave it. A synchronous collective overlaps nothing and takes what NCCL chooses.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (async && tprt_param_cuda_comm_sms() > 0) config.maxCTAs = (int)tprt_param_cuda_comm_sms();
  TPRT__NCCL(ncclCommInitRankConfig(&c->comm, g, id, index, &config));
  c->local = false;
  c->async = async;
  c->mask = mask;
  c->size = g;
  c->index = index;
  ++tprt__r.num_comms;
  *out = c;
  return NULL;
}

static bool tprt__nccl_float(int dtype, ncclDataType_t* out) {
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      *out = ncclBfloat16;
      return true;
    case TPRT_DTYPE_F16:
      *out = ncclFloat16;
      return true;
    case TPRT_DTYPE_F32:
      *out = ncclFloat32;
      return true;
    default:
      return false;
  }
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

void tprt__split_at(const tprt_tensor_t* t, int dim, int64_t* outer, size_t* row_bytes) {
  int64_t o = 1;
  for (int d = 0; d < dim; ++d) o *= t->dims[d];
  *outer = o;
  *row_bytes = o ? tprt_tensor_bytes(t) / (size_t)o : 0;
}

// Sends block p of |send| (|bytes| each) to group member p and receives member p's block into
// block p of |recv|, for every p (a copy for the caller itself).
static tprt_status_t tprt__exchange(tprt__cuda_comm_t* c, const char* send, char* recv, size_t bytes) {
  TPRT__NCCL(ncclGroupStart());
  for (int p = 0; p < c->size; ++p) {
    if (p == c->index) continue;
    ncclResult_t r = ncclSend(send + (size_t)p * bytes, bytes, ncclUint8, p, c->comm, tprt__r.issue);
    if (r == ncclSuccess) r = ncclRecv(recv + (size_t)p * bytes, bytes, ncclUint8, p, c->comm, tprt__r.issue);
    if (r != ncclSuccess) {
      ncclGroupEnd();
      return tprt__nccl_status(r, "ncclSend/ncclRecv");
    }
  }
  TPRT__NCCL(ncclGroupEnd());
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(recv + (size_t)c->index * bytes, send + (size_t)c->index * bytes, bytes,
                                            cudaMemcpyDeviceToDevice, tprt__r.issue));
  return NULL;
}

// |in| (or an f32/storage sum of it) converted into |out|'s dtype: a device copy.
static tprt_status_t tprt__convert(const void* src, int dtype, const tprt_tensor_t* like, tprt_tensor_t* out) {
  tprt_tensor_t t = tprt_tensor_make((void*)src, dtype, like->rank, like->dims);
  return tprt_cuda_copy(&t, out, tprt__r.issue);
}

tprt_status_t tprt__cuda_all_reduce(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                           tprt_tensor_t* out, tprt_order_t order) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  int64_t n = tprt_tensor_numel(in);
  size_t bytes = tprt_tensor_bytes(in);
  ncclDataType_t dt;
  if (!tprt__nccl_float(in->dtype, &dt) || tprt_tensor_numel(out) != n)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "all_reduce: float input and an output of its size expected");
  if (c->size == 1) return tprt__convert(in->data, in->dtype, in, out);
  if (c->local) return tprt__local_all_reduce(rank, c, in, out, order);
  char* buf = NULL;
  if (order == TPRT_ORDER_CANONICAL && n % c->size == 0) {
    // Two phases, the ring's bytes (2(g-1)/g of the tensor each way): member p receives every
    // member's slice p and sums it in the canonical tree (each element's sum is the one-phase
    // sum: same members, same order, one rounding), then the reduced slices are all-gathered in
    // place.
    int g = c->size;
    size_t slice = bytes / (size_t)g, out_slice = tprt_tensor_bytes(out) / (size_t)g;
    char* mine = (char*)out->data + (size_t)c->index * out_slice;
    TPRT__TRY(tprt__scratch((size_t)g * slice, &buf));
    TPRT__TRY(tprt__exchange(c, in->data, buf, slice));
    TPRT__TRY(tprt_cuda_reduce_staged(buf, g, in->dtype, n / g, mine, out->dtype, 1, tprt__r.issue));
    TPRT__NCCL(ncclAllGather(mine, out->data, out_slice, ncclUint8, c->comm, tprt__r.issue));
    return NULL;
  }
  if (order == TPRT_ORDER_CANONICAL) {  // an element count the group does not divide: gather all
    TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &buf));
    TPRT__NCCL(ncclAllGather(in->data, buf, bytes, ncclUint8, c->comm, tprt__r.issue));
    return tprt_cuda_reduce_staged(buf, c->size, in->dtype, n, out->data, out->dtype, 1, tprt__r.issue);
  }
  if (in->dtype == out->dtype) {
    TPRT__NCCL(ncclAllReduce(in->data, out->data, (size_t)n, dt, ncclSum, c->comm, tprt__r.issue));
    return NULL;
  }
  TPRT__TRY(tprt__scratch(bytes, &buf));
  TPRT__NCCL(ncclAllReduce(in->data, buf, (size_t)n, dt, ncclSum, c->comm, tprt__r.issue));
  return tprt__convert(buf, in->dtype, in, out);
}

// The elementwise maximum (tp.all_reduce {reduce = "max"}: an amax over shards). NCCL's max keeps
// one of the values, so it is exact in any order: the CPU's bits for inputs without NaN or -0, as
// every amax is; ranks sharing GPUs take the CPU's maximum itself (tprt_cuda_max_staged).
tprt_status_t tprt__cuda_all_reduce_max(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in, tprt_tensor_t* out) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  ncclDataType_t dt;
  if (!tprt__nccl_float(in->dtype, &dt) || out->dtype != in->dtype || tprt_tensor_numel(out) != tprt_tensor_numel(in))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "all_reduce (max): a float input and an output of its size and dtype expected");
  if (c->size == 1) return tprt__convert(in->data, in->dtype, in, out);
  if (c->local) return tprt__local_all_reduce_max(rank, c, in, out);
  TPRT__NCCL(ncclAllReduce(in->data, out->data, (size_t)tprt_tensor_numel(in), dt, ncclMax, c->comm, tprt__r.issue));
  return NULL;
}

// Scratch regions are carved at this alignment.
#define TPRT__SCRATCH_ALIGN ((size_t)256)

size_t tprt__align_up(size_t x) {
  return (x + TPRT__SCRATCH_ALIGN - 1) / TPRT__SCRATCH_ALIGN * TPRT__SCRATCH_ALIGN;
}

// Along a dim with leading dims (|outer| > 1 rows of |row| bytes), the reduce-scatter (and the
// all-to-all, along its split dim) first packs its input as [R][outer, D/R, inner] into |packed| (member p's slice along the dim becomes the
// contiguous block p), so the outermost path below applies: block p holds exactly the elements of
// member p's output, in its row-major order, and every element is summed in the same tree.
tprt_status_t tprt__pack_slices(const char* in, char* packed, int g, int64_t outer, size_t row) {
  size_t part = row / (size_t)g, slice = part * (size_t)outer;
  for (int p = 0; p < g; ++p)
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(packed + (size_t)p * slice, part, in + (size_t)p * part, row, part,
                                                (size_t)outer, cudaMemcpyDeviceToDevice, tprt__r.issue));
  return NULL;
}

tprt_status_t tprt__concat_blocks(const char* blocks, size_t block_bytes, int g, int64_t outer, size_t row, char* out) {
  for (int p = 0; p < g; ++p)
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(out + (size_t)p * row, (size_t)g * row, blocks + (size_t)p * block_bytes,
                                                row, row, (size_t)outer, cudaMemcpyDeviceToDevice, tprt__r.issue));
  return NULL;
}

tprt_status_t tprt__cuda_reduce_scatter(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                               tprt_tensor_t* out, int dim, tprt_order_t order) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  ncclDataType_t dt;
  if (!tprt__nccl_float(in->dtype, &dt) || dim < 0 || dim >= in->rank || in->dims[dim] % c->size != 0 ||
      tprt_tensor_numel(out) * c->size != tprt_tensor_numel(in))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "reduce_scatter: float input whose dim %d divides over %d ranks, and an output of 1/%d "
                            "of its elements, expected",
                            dim, c->size, c->size);
  int64_t outer;
  size_t row;
  tprt__split_at(in, dim, &outer, &row);
  int64_t n = tprt_tensor_numel(in) / c->size;
  size_t bytes = tprt_tensor_bytes(in), slice = bytes / (size_t)c->size;
  if (c->size == 1) return tprt__convert(in->data, in->dtype, out, out);
  if (c->local) return tprt__local_reduce_scatter(rank, c, in, out, dim, order);
  // One scratch allocation, carved into regions: [packed input (leading dims only)][staged slices
  // (canonical) or the NCCL sum (a dtype change)].
  bool pack = outer != 1 && bytes > 0, convert = in->dtype != out->dtype;
  size_t packed_bytes = pack ? tprt__align_up(bytes) : 0;
  size_t rest = order == TPRT_ORDER_CANONICAL ? (size_t)c->size * slice : convert ? slice : 0;
  char* buf = NULL;
  if (packed_bytes + rest) TPRT__TRY(tprt__scratch(packed_bytes + rest, &buf));
  const char* src = in->data;
  if (pack) {
    TPRT__TRY(tprt__pack_slices(in->data, buf, c->size, outer, row));
    src = buf;
  }
  char* tmp = buf + packed_bytes;
  if (order == TPRT_ORDER_CANONICAL) {
    TPRT__TRY(tprt__exchange(c, src, tmp, slice));
    return tprt_cuda_reduce_staged(tmp, c->size, in->dtype, n, out->data, out->dtype, 1, tprt__r.issue);
  }
  if (!convert) {
    TPRT__NCCL(ncclReduceScatter(src, out->data, (size_t)n, dt, ncclSum, c->comm, tprt__r.issue));
    return NULL;
  }
  TPRT__NCCL(ncclReduceScatter(src, tmp, (size_t)n, dt, ncclSum, c->comm, tprt__r.issue));
  return tprt__convert(tmp, in->dtype, out, out);
}

tprt_status_t tprt__cuda_all_gather(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                           tprt_tensor_t* out, int dim) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  if (dim < 0 || dim >= in->rank || tprt_tensor_bytes(out) != (size_t)c->size * tprt_tensor_bytes(in))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "all_gather: output of %d inputs along dim %d expected",
                            c->size, dim);
  if (c->local) return tprt__local_all_gather(rank, c, in, out, dim);
  int64_t outer;
  size_t row, bytes = tprt_tensor_bytes(in);
  tprt__split_at(in, dim, &outer, &row);
  if (outer == 1) {
    TPRT__NCCL(ncclAllGather(in->data, out->data, bytes, ncclUint8, c->comm, tprt__r.issue));
    return NULL;
  }
  char* buf = NULL;
  TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &buf));
  TPRT__NCCL(ncclAllGather(in->data, buf, bytes, ncclUint8, c->comm, tprt__r.issue));
  return tprt__concat_blocks(buf, bytes, c->size, outer, row, out->data);
}

tprt_status_t tprt__cuda_all_to_all(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                           tprt_tensor_t* out, int split_dim, int concat_dim) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  int g = c->size;
  if (split_dim < 0 || split_dim >= in->rank || concat_dim < 0 || concat_dim >= in->rank ||
      in->dims[split_dim] % g != 0 || tprt_tensor_bytes(out) != tprt_tensor_bytes(in))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "all_to_all: split dim %d must divide over %d ranks",
                            split_dim, g);
  size_t bytes = tprt_tensor_bytes(in), slice = bytes / (size_t)g;
  // Ranks of one process concatenating along an outermost dim read their pieces from each peer's
  // input straight into |out| (tprt__local_all_to_all).
  int64_t before_concat = 1;
  for (int d = 0; d < concat_dim; ++d) before_concat *= in->dims[d];
  if (c->local && before_concat == 1 && split_dim > concat_dim)
    return tprt__local_all_to_all(rank, c, in, out, split_dim);
  // (Packed, exchanged and unpacked on the issuing stream: an async start's scratch is the comm
  // stream's own, which the compute stream never touches.)
  char* buf = NULL;
  TPRT__TRY(tprt__scratch(2 * bytes, &buf));
  char *send = buf, *recv = buf + bytes;
  // Pack: block p = slice p along split_dim.
  int64_t outer;
  size_t row;
  tprt__split_at(in, split_dim, &outer, &row);
  TPRT__TRY(tprt__pack_slices(in->data, send, g, outer, row));
  TPRT__TRY(c->local ? tprt__local_exchange(rank, c, send, recv, slice) : tprt__exchange(c, send, recv, slice));
  // Unpack: the slice from member p goes to position p along concat_dim.
  tprt_tensor_t piece = *in;
  piece.dims[split_dim] /= g;
  int64_t outer_c;
  size_t row_c;
  tprt__split_at(&piece, concat_dim, &outer_c, &row_c);
  return tprt__concat_blocks(recv, slice, g, outer_c, row_c, out->data);
}

//===----------------------------------------------------------------------===//
// Async collectives: the comm stream and event futures
//===----------------------------------------------------------------------===//

tprt_status_t tprt__future_new(const char* op, tprt__cuda_future_t** out) {
  if (out) *out = NULL;
  if (tprt__r.capturing)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                            "--graph: %s needs a completion event beyond the %d made before CUDA graph capture "
                            "(more async collectives in flight than in the warm-up step)",
                            op, tprt__r.num_futures);
  if (tprt__r.num_futures == tprt__r.cap_futures) {
    int cap = tprt__r.cap_futures ? 2 * tprt__r.cap_futures : 8;
    tprt__cuda_future_t** grown = realloc(tprt__r.futures, (size_t)cap * sizeof *grown);
    if (!grown) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory (futures)", op);
    tprt__r.futures = grown;
    tprt__r.cap_futures = cap;
  }
  tprt__cuda_future_t* f = calloc(1, sizeof *f);
  if (!f) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory (futures)", op);
  cudaError_t e = cudaEventCreateWithFlags(&f->done, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    free(f);
    return tprt__cuda_make_status(e, "cudaEventCreateWithFlags (a future's event)", __FILE__, __LINE__);
  }
  tprt__r.futures[tprt__r.num_futures++] = f;
  if (out) *out = f;
  return NULL;
}

// A free future of the pool, or a new one (a warm-up step grows the pool to a step's need before
// a graph capture).
static tprt_status_t tprt__future_take(const char* op, tprt__cuda_future_t** out) {
  *out = NULL;
  for (int i = 0; i < tprt__r.num_futures && !*out; ++i)
    if (!tprt__r.futures[i]->in_flight) *out = tprt__r.futures[i];
  if (!*out) TPRT__TRY(tprt__future_new(op, out));
  (*out)->in_flight = true;
  (*out)->own.pending = (*out)->sum.pending = false;
  return NULL;
}

// While any async collective is in flight, GEMMs leave TPRT_CUDA_COMM_SMS SMs free for it (NCCL
// kernels; copy-engine collectives need none).
static void tprt__update_sm_reserve(void) {
  bool any = false;
  for (int i = 0; i < tprt__r.num_futures && !tprt__r.ce; ++i) any |= tprt__r.futures[i]->in_flight;
  tprt_cuda_set_sm_reserve(any ? (int)tprt_param_cuda_comm_sms() : 0);
}

// Forks the comm stream off the compute stream (it sees every op queued so far: the start's input
// is ready), makes it the stream the collectives issue on and opens the start's timeline interval
// (|name|, |bytes|) in |*interval|.
static tprt_status_t tprt__start_begin(const char* op, const char* name, int64_t bytes, tprt__cuda_future_t** out,
                                       int* interval) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__future_take(op, out));
  cudaError_t e = cudaEventRecord(tprt__r.fork, tprt__r.stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(tprt__r.comm_stream, tprt__r.fork, 0);
  if (e != cudaSuccess) {
    (*out)->in_flight = false;
    *out = NULL;
    return tprt__cuda_make_status(e, "forking the comm stream (cudaEventRecord / cudaStreamWaitEvent)", __FILE__,
                                  __LINE__);
  }
  tprt__r.issue = tprt__r.comm_stream;
  tprt__r.starting = *out;
  *interval = tprt__timeline_begin(tprt__r.comm_stream, TPRT__IV_COMM, name, bytes);
  return NULL;
}

// Ends a start whose collective returned |s|: its timeline interval closes, collectives issue on
// the compute stream again, and the future's event marks the end of the comm stream's work. A
// failed start still records it and joins the compute stream to it (so a graph capture stays
// joined), then returns |s|.
static tprt_status_t tprt__start_end(tprt__cuda_future_t* f, int interval, tprt_status_t s,
                                     tprt_future_t** out_future) {
  tprt__timeline_end(tprt__r.comm_stream, interval);
  tprt__r.issue = tprt__r.stream;
  tprt__r.starting = NULL;
  cudaError_t e = cudaEventRecord(f->done, tprt__r.comm_stream);
  if (s || e != cudaSuccess) {
    if (e == cudaSuccess) cudaStreamWaitEvent(tprt__r.stream, f->done, 0);
    f->in_flight = false;
    f->own.pending = f->sum.pending = false;
    if (s) return s;
    return tprt__cuda_make_status(e, "cudaEventRecord (an async collective's completion)", __FILE__, __LINE__);
  }
  *out_future = (tprt_future_t*)f;
  tprt__update_sm_reserve();
  return NULL;
}

tprt_status_t tprt__cuda_all_gather_start(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                                 tprt_tensor_t* out, int dim, tprt_future_t** out_future) {
  *out_future = NULL;
  tprt__cuda_future_t* f = NULL;
  int t = -1;
  TPRT__TRY(tprt__start_begin("all_gather_start", "all_gather", (int64_t)tprt_tensor_bytes(out), &f, &t));
  return tprt__start_end(f, t, tprt__cuda_all_gather(rank, mask, in, out, dim), out_future);
}

tprt_status_t tprt__cuda_reduce_scatter_start(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                                     tprt_tensor_t* out, int dim, tprt_order_t order,
                                                     tprt_future_t** out_future) {
  *out_future = NULL;
  tprt__cuda_future_t* f = NULL;
  int t = -1;
  TPRT__TRY(tprt__start_begin("reduce_scatter_start", "reduce_scatter", (int64_t)tprt_tensor_bytes(in), &f, &t));
  return tprt__start_end(f, t, tprt__cuda_reduce_scatter(rank, mask, in, out, dim, order), out_future);
}

tprt_status_t tprt__cuda_all_to_all_start(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                          tprt_tensor_t* out, int split_dim, int concat_dim,
                                          tprt_future_t** out_future) {
  *out_future = NULL;
  tprt__cuda_future_t* f = NULL;
  int t = -1;
  TPRT__TRY(tprt__start_begin("all_to_all_start", "all_to_all", (int64_t)tprt_tensor_bytes(in), &f, &t));
  return tprt__start_end(f, t, tprt__cuda_all_to_all(rank, mask, in, out, split_dim, concat_dim), out_future);
}

// The compute stream waits for the collective (on the device; the host does not block), and the
// event returns to the pool: a later record does not change the wait queued here.
tprt_status_t tprt__cuda_wait(tprt_rank_t* rank, tprt_future_t* future) {
  (void)rank;
  TPRT__TRY(tprt__need_rank());
  tprt__cuda_future_t* f = NULL;
  for (int i = 0; i < tprt__r.num_futures; ++i)
    if ((tprt_future_t*)tprt__r.futures[i] == future) f = tprt__r.futures[i];
  if (!f || !f->in_flight)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "wait: not a future of an async collective in flight on this rank of the cuda backend "
                            "(unknown, or already waited for)");
  f->in_flight = false;
  tprt__update_sm_reserve();
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(tprt__r.stream, f->done, 0));
  return tprt__local_at_wait(f);
}
