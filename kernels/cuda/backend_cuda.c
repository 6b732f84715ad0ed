// The CUDA backend of the runtime ABI (runtime/tprt_backend.h), built as the plugin
// libtprt_backend_cuda.so that `tpc-run --backend cuda` loads: one GPU per rank (rank i of the
// world of threads uses device i), one non-blocking stream per rank on which every kernel,
// collective and copy is queued in program order, NCCL communicators per collective group, and
// device buffers from cudaMalloc.
//
// Collectives (numerics as the CPU backend's, docs/runtime.md):
// - canonical all-reduce / reduce-scatter: NCCL moves the f32 (or storage) partials unchanged
//   (all-gather, or grouped send/recv of the slices) into a staged [group][n] buffer, then
//   tprt_cuda_reduce_staged adds them in the CPU collectives' tree order: the CPU backend's bits.
// - order "any": ncclAllReduce / ncclReduceScatter (NCCL's own order; fast mode's contract).
// - all-gather, all-to-all: byte movement (NCCL all-gather, grouped send/recv) and strided
//   device copies where a dimension other than the outermost is concatenated or split.
// - the async starts run on the rank's stream at once (stream order makes the result ready for
//   every later op); wait is a no-op.
// Every compute op has a CUDA kernel; the ABI's host fallback (tprt_abi_impl.h) remains for
// backends or ops added later without one.
//
// Thread safety: each rank thread has its own state (thread-local): device, stream, communicators.
#define _POSIX_C_SOURCE 200809L  // nanosleep, clock_gettime
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tprt_allocator.h"
#include "tprt_backend.h"
#include "tprt_cpu_kernels.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"
#include "tprt_params.h"

#define TPRT__CUDA_MAX_COMMS 16

typedef struct {
  uint32_t mask;
  ncclComm_t comm;
  int size, index;
} tprt__cuda_comm_t;

typedef struct {
  bool active;
  int device;
  cudaStream_t stream;
  tprt__cuda_comm_t comms[TPRT__CUDA_MAX_COMMS];
  int num_comms;
  void* scratch;
  size_t scratch_bytes;
  void* lt;  // cuBLASLt handle (fast mode), and its workspace
  void* lt_workspace;
  bool capturing;  // between graph_begin and graph_end: no host copies, no synchronization
  tprt_rank_t* rank;
  int64_t collectives;  // calls so far (fault injection counts them)
} tprt__cuda_rank_t;

#define TPRT__LT_WORKSPACE_BYTES ((size_t)32 << 20)

// tp.numerics == "fast": linears go to cuBLASLt (configure, before any rank starts).
static bool tprt__cuda_fast;

static tprt_status_t tprt__cuda_configure(const char* numerics) {
  tprt__cuda_fast = numerics && strcmp(numerics, "fast") == 0;
  return NULL;
}

static _Thread_local tprt__cuda_rank_t tprt__r;

static tprt_status_t tprt__nccl_status(ncclResult_t r, const char* expr) {
  return tprt_make_status(TPRT_STATUS_INTERNAL, "%s failed: %s (%s)", expr, ncclGetErrorString(r),
                          ncclGetLastError(NULL));
}

#define TPRT__NCCL(expr)                                            \
  do {                                                              \
    ncclResult_t tprt__nr = (expr);                                 \
    if (tprt__nr != ncclSuccess) return tprt__nccl_status(tprt__nr, #expr); \
  } while (0)

// Returns the status of |expr| from the enclosing function when it is a failure.
#define TPRT__TRY(expr)                  \
  do {                                   \
    tprt_status_t tprt__st = (expr);     \
    if (tprt__st) return tprt__st;       \
  } while (0)

static tprt_status_t tprt__need_rank(void) {
  if (tprt__r.active) return NULL;
  return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                          "the cuda backend was called on a thread that did not begin a rank (rank_begin)");
}

//===----------------------------------------------------------------------===//
// Waiting for the stream: NCCL failures and hung peers end the world instead of hanging it
//===----------------------------------------------------------------------===//

static double tprt__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Aborts every communicator of the rank (their kernels return), so that no stream waits forever.
static void tprt__abort_comms(void) {
  for (int i = 0; i < tprt__r.num_comms; ++i) ncclCommAbort(tprt__r.comms[i].comm);
  tprt__r.num_comms = 0;
}

// Waits for the rank's stream, polling: an NCCL asynchronous error, another rank's failure (the
// world aborted) or TPRT_COLLECTIVE_TIMEOUT_S seconds without completion abort the rank's NCCL
// communicators and return a status naming the cause.
static tprt_status_t tprt__wait_stream(void) {
  const double start = tprt__now(), timeout = (double)tprt_param_collective_timeout_s();
  for (int polls = 0;; ++polls) {
    cudaError_t e = cudaStreamQuery(tprt__r.stream);
    if (e == cudaSuccess) return NULL;
    if (e != cudaErrorNotReady) return tprt__cuda_make_status(e, "cudaStreamQuery", __FILE__, __LINE__);
    for (int i = 0; i < tprt__r.num_comms; ++i) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(tprt__r.comms[i].comm, &async);
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

//===----------------------------------------------------------------------===//
// Ranks and memory
//===----------------------------------------------------------------------===//

static tprt_status_t tprt__cuda_rank_begin(tprt_rank_t* rank) {
  int n = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n));
  int world = tprt_rank_world_size(rank), index = tprt_rank_index(rank);
  if (world > n)
    return tprt_make_status(TPRT_STATUS_UNAVAILABLE,
                            "the cuda backend runs one rank per GPU: a world of %d ranks needs %d GPUs; this machine "
                            "has %d",
                            world, world, n);
  memset(&tprt__r, 0, sizeof tprt__r);
  tprt__r.device = index;
  tprt__r.rank = rank;
  TPRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(tprt__r.device));
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&tprt__r.stream, cudaStreamNonBlocking));
  tprt__r.active = true;
  return NULL;
}

static void tprt__cuda_rank_end(tprt_rank_t* rank) {
  (void)rank;
  if (!tprt__r.active) return;
  cudaStreamSynchronize(tprt__r.stream);
  for (int i = 0; i < tprt__r.num_comms; ++i) ncclCommDestroy(tprt__r.comms[i].comm);
  if (tprt__r.scratch) cudaFree(tprt__r.scratch);
  if (tprt__r.lt_workspace) cudaFree(tprt__r.lt_workspace);
  tprt_cuda_lt_handle_destroy(tprt__r.lt);
  cudaStreamDestroy(tprt__r.stream);
  memset(&tprt__r, 0, sizeof tprt__r);
}

static tprt_status_t tprt__cuda_alloc(size_t bytes, void** out) {
  *out = NULL;
  TPRT__TRY(tprt__need_rank());
  TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(out, bytes > 0 ? bytes : 1));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(*out, 0, bytes > 0 ? bytes : 1, tprt__r.stream));
  return NULL;
}

static void tprt__cuda_free(void* ptr) {
  if (ptr) cudaFree(ptr);
}

// Host copies and synchronization cannot be captured into a CUDA graph.
static tprt_status_t tprt__not_capturing(const char* what) {
  if (!tprt__r.capturing) return NULL;
  return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                          "--graph: %s during CUDA graph capture (an op without a CUDA kernel runs on the host, or a "
                          "kernel reads device data back); run without --graph",
                          what);
}

static tprt_status_t tprt__cuda_to_device(void* dst, const void* src, size_t bytes) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__not_capturing("a host-to-device copy"));
  if (!bytes) return NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, tprt__r.stream));
  return tprt__wait_stream();
}

static tprt_status_t tprt__cuda_to_host(void* dst, const void* src, size_t bytes) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__not_capturing("a device-to-host copy"));
  if (!bytes) return NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, tprt__r.stream));
  return tprt__wait_stream();
}

static tprt_status_t tprt__cuda_synchronize(void) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__not_capturing("a stream synchronization"));
  return tprt__wait_stream();
}

static tprt_status_t tprt__cuda_graph_begin(void) {
  TPRT__TRY(tprt__need_rank());
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(tprt__r.stream, cudaStreamCaptureModeThreadLocal));
  tprt__r.capturing = true;
  return NULL;
}

static tprt_status_t tprt__cuda_graph_end(void** out_graph) {
  *out_graph = NULL;
  TPRT__TRY(tprt__need_rank());
  tprt__r.capturing = false;
  cudaGraph_t graph = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(tprt__r.stream, &graph));
  cudaGraphExec_t exec = NULL;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) return tprt__cuda_make_status(err, "cudaGraphInstantiate", __FILE__, __LINE__);
  *out_graph = exec;
  return NULL;
}

static tprt_status_t tprt__cuda_graph_launch(void* graph) {
  TPRT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch((cudaGraphExec_t)graph, tprt__r.stream));
  return NULL;
}

static void tprt__cuda_graph_destroy(void* graph) {
  if (graph) cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

// A device buffer of at least |bytes| reused by the collectives (stream order keeps uses apart).
static tprt_status_t tprt__scratch(size_t bytes, char** out) {
  if (bytes > tprt__r.scratch_bytes) {
    TPRT__TRY(tprt__not_capturing("growing the collective scratch buffer"));
    if (tprt__r.scratch) {
      TPRT__TRY(tprt__wait_stream());
      TPRT_CUDA_RETURN_IF_ERROR(cudaFree(tprt__r.scratch));
      tprt__r.scratch = NULL;
      tprt__r.scratch_bytes = 0;
    }
    TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tprt__r.scratch, bytes));
    tprt__r.scratch_bytes = bytes;
  }
  *out = (char*)tprt__r.scratch;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

// Fault injection for tests of failure handling: TPRT_CUDA_FAULT="R:N" makes world rank R fail its
// N-th collective call (counting from 1) instead of issuing it; its peers then wait in NCCL for a
// partner that never comes, and must end with the world's abort rather than hang.
static tprt_status_t tprt__fault(void) {
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
static tprt_status_t tprt__comm(tprt_rank_t* rank, uint32_t mask, tprt__cuda_comm_t** out) {
  TPRT__TRY(tprt__need_rank());
  for (int i = 0; i < tprt__r.num_comms; ++i)
    if (tprt__r.comms[i].mask == mask) {
      *out = &tprt__r.comms[i];
      return NULL;
    }
  if (tprt__r.num_comms == TPRT__CUDA_MAX_COMMS)
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "more than %d collective groups", TPRT__CUDA_MAX_COMMS);
  int g = tprt_rank_group_size(rank, mask), index = tprt_rank_group_index(rank, mask);
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
  TPRT__NCCL(ncclCommInitRank(&c->comm, g, id, index));
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

// Elements before |dim| (the outer count) and bytes from |dim| on (one outer row), of |t|.
static void tprt__split_at(const tprt_tensor_t* t, int dim, int64_t* outer, size_t* row_bytes) {
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
    ncclResult_t r = ncclSend(send + (size_t)p * bytes, bytes, ncclUint8, p, c->comm, tprt__r.stream);
    if (r == ncclSuccess) r = ncclRecv(recv + (size_t)p * bytes, bytes, ncclUint8, p, c->comm, tprt__r.stream);
    if (r != ncclSuccess) {
      ncclGroupEnd();
      return tprt__nccl_status(r, "ncclSend/ncclRecv");
    }
  }
  TPRT__NCCL(ncclGroupEnd());
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(recv + (size_t)c->index * bytes, send + (size_t)c->index * bytes, bytes,
                                            cudaMemcpyDeviceToDevice, tprt__r.stream));
  return NULL;
}

// |in| (or an f32/storage sum of it) converted into |out|'s dtype: a device copy.
static tprt_status_t tprt__convert(const void* src, int dtype, const tprt_tensor_t* like, tprt_tensor_t* out) {
  tprt_tensor_t t = tprt_tensor_make((void*)src, dtype, like->rank, like->dims);
  return tprt_cuda_copy(&t, out, tprt__r.stream);
}

static tprt_status_t tprt__cuda_all_reduce(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
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
  char* buf = NULL;
  if (order == TPRT_ORDER_CANONICAL) {
    TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &buf));
    TPRT__NCCL(ncclAllGather(in->data, buf, bytes, ncclUint8, c->comm, tprt__r.stream));
    return tprt_cuda_reduce_staged(buf, c->size, in->dtype, n, out->data, out->dtype, 1, tprt__r.stream);
  }
  if (in->dtype == out->dtype) {
    TPRT__NCCL(ncclAllReduce(in->data, out->data, (size_t)n, dt, ncclSum, c->comm, tprt__r.stream));
    return NULL;
  }
  TPRT__TRY(tprt__scratch(bytes, &buf));
  TPRT__NCCL(ncclAllReduce(in->data, buf, (size_t)n, dt, ncclSum, c->comm, tprt__r.stream));
  return tprt__convert(buf, in->dtype, in, out);
}

static tprt_status_t tprt__cuda_reduce_scatter(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                               tprt_tensor_t* out, int dim, tprt_order_t order) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  int64_t outer;
  size_t row;
  tprt__split_at(in, dim, &outer, &row);
  ncclDataType_t dt;
  if (!tprt__nccl_float(in->dtype, &dt) || dim < 0 || dim >= in->rank || in->dims[dim] % c->size != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "reduce_scatter: float input whose dim %d divides over %d ranks expected", dim, c->size);
  if (outer != 1)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                            "reduce_scatter along dim %d with leading dims of %lld elements: the cuda backend "
                            "scatters the outermost dimension only",
                            dim, (long long)outer);
  int64_t n = tprt_tensor_numel(in) / c->size;
  size_t slice = tprt_tensor_bytes(in) / (size_t)c->size;
  if (c->size == 1) return tprt__convert(in->data, in->dtype, out, out);
  char* buf = NULL;
  if (order == TPRT_ORDER_CANONICAL) {
    TPRT__TRY(tprt__scratch((size_t)c->size * slice, &buf));
    TPRT__TRY(tprt__exchange(c, in->data, buf, slice));
    return tprt_cuda_reduce_staged(buf, c->size, in->dtype, n, out->data, out->dtype, 1, tprt__r.stream);
  }
  if (in->dtype == out->dtype) {
    TPRT__NCCL(ncclReduceScatter(in->data, out->data, (size_t)n, dt, ncclSum, c->comm, tprt__r.stream));
    return NULL;
  }
  TPRT__TRY(tprt__scratch(slice, &buf));
  TPRT__NCCL(ncclReduceScatter(in->data, buf, (size_t)n, dt, ncclSum, c->comm, tprt__r.stream));
  return tprt__convert(buf, in->dtype, out, out);
}

static tprt_status_t tprt__cuda_all_gather(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                           tprt_tensor_t* out, int dim) {
  TPRT__TRY(tprt__fault());
  tprt__cuda_comm_t* c = NULL;
  TPRT__TRY(tprt__comm(rank, mask, &c));
  if (dim < 0 || dim >= in->rank || tprt_tensor_bytes(out) != (size_t)c->size * tprt_tensor_bytes(in))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "all_gather: output of %d inputs along dim %d expected",
                            c->size, dim);
  int64_t outer;
  size_t row, bytes = tprt_tensor_bytes(in);
  tprt__split_at(in, dim, &outer, &row);
  if (outer == 1) {
    TPRT__NCCL(ncclAllGather(in->data, out->data, bytes, ncclUint8, c->comm, tprt__r.stream));
    return NULL;
  }
  char* buf = NULL;
  TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &buf));
  TPRT__NCCL(ncclAllGather(in->data, buf, bytes, ncclUint8, c->comm, tprt__r.stream));
  for (int p = 0; p < c->size; ++p)
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync((char*)out->data + (size_t)p * row, (size_t)c->size * row,
                                                buf + (size_t)p * bytes, row, row, (size_t)outer,
                                                cudaMemcpyDeviceToDevice, tprt__r.stream));
  return NULL;
}

static tprt_status_t tprt__cuda_all_to_all(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
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
  char* buf = NULL;
  TPRT__TRY(tprt__scratch(2 * bytes, &buf));
  char *send = buf, *recv = buf + bytes;
  // Pack: block p = slice p along split_dim.
  int64_t outer;
  size_t row;
  tprt__split_at(in, split_dim, &outer, &row);
  size_t part = row / (size_t)g;
  for (int p = 0; p < g; ++p)
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(send + (size_t)p * slice, part, (const char*)in->data + (size_t)p * part,
                                                row, part, (size_t)outer, cudaMemcpyDeviceToDevice, tprt__r.stream));
  TPRT__TRY(tprt__exchange(c, send, recv, slice));
  // Unpack: the slice from member p goes to position p along concat_dim.
  tprt_tensor_t piece = *in;
  piece.dims[split_dim] /= g;
  int64_t outer_c;
  size_t row_c;
  tprt__split_at(&piece, concat_dim, &outer_c, &row_c);
  for (int p = 0; p < g; ++p)
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync((char*)out->data + (size_t)p * row_c, (size_t)g * row_c,
                                                recv + (size_t)p * slice, row_c, row_c, (size_t)outer_c,
                                                cudaMemcpyDeviceToDevice, tprt__r.stream));
  return NULL;
}

// The async forms run at once on the rank's stream; the future is a marker that wait accepts.
static char tprt__cuda_done;

static tprt_status_t tprt__cuda_all_gather_start(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                                 tprt_tensor_t* out, int dim, tprt_future_t** out_future) {
  *out_future = (tprt_future_t*)&tprt__cuda_done;
  return tprt__cuda_all_gather(rank, mask, in, out, dim);
}

static tprt_status_t tprt__cuda_reduce_scatter_start(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* in,
                                                     tprt_tensor_t* out, int dim, tprt_order_t order,
                                                     tprt_future_t** out_future) {
  *out_future = (tprt_future_t*)&tprt__cuda_done;
  return tprt__cuda_reduce_scatter(rank, mask, in, out, dim, order);
}

static tprt_status_t tprt__cuda_wait(tprt_rank_t* rank, tprt_future_t* future) {
  (void)rank;
  if (future == (tprt_future_t*)&tprt__cuda_done) return NULL;
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "wait: not a future of the cuda backend");
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

static tprt_status_t tprt__cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                       tprt_tensor_t* y, int chunks) {
  if (!tprt__cuda_fast || !tprt_cuda_linear_fast_supported(x, w, bias, y))
    return tprt_cuda_linear(x, w, bias, y, chunks, tprt__r.stream);
  if (!tprt__r.lt) {
    TPRT__TRY(tprt_cuda_lt_handle(&tprt__r.lt));
    TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tprt__r.lt_workspace, TPRT__LT_WORKSPACE_BYTES));
  }
  return tprt_cuda_linear_fast(x, w, y, tprt__r.lt, tprt__r.lt_workspace, TPRT__LT_WORKSPACE_BYTES, tprt__r.stream);
}
static tprt_status_t tprt__cuda_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                               const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks) {
  return tprt_cuda_grouped_linear(x, w, group_sizes, y, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                                    float limit) {
  return tprt_cuda_glu(x, y, kind, interleave, alpha, limit, tprt__r.stream);
}
static tprt_status_t tprt__cuda_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y,
                                        float eps) {
  return tprt_cuda_rmsnorm(x, gamma, y, eps, tprt__r.stream);
}
static tprt_status_t tprt__cuda_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                          tprt_tensor_t* y, float eps) {
  return tprt_cuda_layernorm(x, gamma, beta, y, eps, tprt__r.stream);
}

// The CPU kernel of an elementwise op on host copies (the bias forms the CUDA kernels do not
// cover yet): bitwise the CPU result.
static tprt_status_t tprt__cuda_host_elementwise(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c,
                                                 bool mul) {
  tprt_tensor_t h[3] = {*a, *b, *c};
  const tprt_tensor_t* dev[3] = {a, b, c};
  tprt_status_t s = NULL;
  for (int i = 0; i < 3; ++i) h[i].data = NULL;
  for (int i = 0; i < 3 && !s; ++i) {
    size_t bytes = tprt_tensor_bytes(dev[i]);
    s = tprt_allocator_malloc(tprt_allocator_system(), bytes ? bytes : 1, 64, &h[i].data);
    if (!s) s = tprt__cuda_to_host(h[i].data, dev[i]->data, bytes);
  }
  if (!s) s = mul ? tprt_cpu_mul(&h[0], &h[1], &h[2]) : tprt_cpu_add(&h[0], &h[1], &h[2]);
  if (!s) s = tprt__cuda_to_device(c->data, h[2].data, tprt_tensor_bytes(c));
  for (int i = 0; i < 3; ++i) tprt_allocator_free(tprt_allocator_system(), h[i].data);
  return s;
}

static tprt_status_t tprt__cuda_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  if (tprt_tensor_same_layout(a, b) && tprt_tensor_same_layout(a, c)) return tprt_cuda_add(a, b, c, tprt__r.stream);
  return tprt__cuda_host_elementwise(a, b, c, false);
}
static tprt_status_t tprt__cuda_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) {
  return tprt_cuda_mul(a, b, c, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                            tprt_tensor_t* group_sizes, tprt_tensor_t* row_map) {
  return tprt_cuda_moe_permute(x, indices, y, group_sizes, row_map, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                           int buckets) {
  return tprt_cuda_moe_bucket(x, group_sizes, y, buckets, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes,
                                             tprt_tensor_t* y, int buckets) {
  return tprt_cuda_moe_unbucket(x, group_sizes, y, buckets, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                              const tprt_tensor_t* weights, tprt_tensor_t* out) {
  return tprt_cuda_moe_unpermute(y, row_map, weights, out, tprt__r.stream);
}
static tprt_status_t tprt__cuda_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                       tprt_tensor_t* dx, int chunks, int segments, int blocks) {
  return tprt_cuda_linear_dgrad_segmented(dy, w, dx, chunks, segments, blocks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                             int chunks) {
  return tprt_cuda_linear_wgrad(dy, x, dw, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks) {
  return tprt_cuda_bias_grad(dy, db, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                               const tprt_tensor_t* group_sizes, tprt_tensor_t* dx,
                                                               int chunks, int segments, int blocks) {
  return tprt_cuda_grouped_linear_dgrad_segmented(dy, w, group_sizes, dx, chunks, segments, blocks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                     const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks) {
  return tprt_cuda_grouped_linear_wgrad(dy, x, group_sizes, dw, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                         int64_t interleave, float alpha, float limit) {
  return tprt_cuda_glu_grad(x, dy, dx, kind, interleave, alpha, limit, tprt__r.stream);
}
static tprt_status_t tprt__cuda_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                             const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                             float eps, int chunks) {
  return tprt_cuda_rmsnorm_grad(x, gamma, dy, dx, dgamma, eps, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                               const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                               tprt_tensor_t* dbeta, float eps, int chunks) {
  return tprt_cuda_layernorm_grad(x, gamma, dy, dx, dgamma, dbeta, eps, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights,
                                          int top_k, bool normalize) {
  return tprt_cuda_moe_route(logits, indices, weights, top_k, normalize, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map,
                                                 tprt_tensor_t* dx, int top_k) {
  return tprt_cuda_moe_permute_grad(dy, row_map, dx, top_k, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                                   const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                                   tprt_tensor_t* dy, tprt_tensor_t* dweights) {
  return tprt_cuda_moe_unpermute_grad(dout, y, row_map, weights, dy, dweights, tprt__r.stream);
}
static tprt_status_t tprt__cuda_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                               const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k,
                                               bool normalize) {
  return tprt_cuda_moe_route_grad(logits, indices, dweights, dlogits, top_k, normalize, tprt__r.stream);
}
static tprt_status_t tprt__cuda_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                                  const tprt_tensor_t* w2, const tprt_tensor_t* group_sizes,
                                                  tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                                                  float limit, int chunks) {
  return tprt_cuda_fused_grouped_mlp(x, w1, w2, group_sizes, y, kind, interleave, alpha, limit, chunks, tprt__r.stream);
}
static tprt_status_t tprt__cuda_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                         tprt_tensor_t* global_scale, int format, int axis) {
  return tprt_cuda_quantize(x, data, scale, global_scale, format, axis, tprt__r.stream);
}
static tprt_status_t tprt__cuda_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                           const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format, int axis) {
  return tprt_cuda_dequantize(data, scale, global_scale, x, format, axis, tprt__r.stream);
}
static tprt_status_t tprt__cuda_copy(const tprt_tensor_t* src, tprt_tensor_t* dst) {
  return tprt_cuda_copy(src, dst, tprt__r.stream);
}

static const tprt_backend_t tprt__cuda_backend = {
    .name = "cuda",
    .rank_begin = tprt__cuda_rank_begin,
    .rank_end = tprt__cuda_rank_end,
    .configure = tprt__cuda_configure,
    .alloc = tprt__cuda_alloc,
    .free = tprt__cuda_free,
    .to_device = tprt__cuda_to_device,
    .to_host = tprt__cuda_to_host,
    .synchronize = tprt__cuda_synchronize,
    .graph_begin = tprt__cuda_graph_begin,
    .graph_end = tprt__cuda_graph_end,
    .graph_launch = tprt__cuda_graph_launch,
    .graph_destroy = tprt__cuda_graph_destroy,
    .linear = tprt__cuda_linear,
    .grouped_linear = tprt__cuda_grouped_linear,
    .glu = tprt__cuda_glu,
    .rmsnorm = tprt__cuda_rmsnorm,
    .layernorm = tprt__cuda_layernorm,
    .add = tprt__cuda_add,
    .mul = tprt__cuda_mul,
    .moe_permute = tprt__cuda_moe_permute,
    .moe_bucket = tprt__cuda_moe_bucket,
    .moe_unbucket = tprt__cuda_moe_unbucket,
    .moe_unpermute = tprt__cuda_moe_unpermute,
    .copy = tprt__cuda_copy,
    .linear_dgrad_segmented = tprt__cuda_linear_dgrad_segmented,
    .linear_wgrad = tprt__cuda_linear_wgrad,
    .bias_grad = tprt__cuda_bias_grad,
    .grouped_linear_dgrad_segmented = tprt__cuda_grouped_linear_dgrad_segmented,
    .grouped_linear_wgrad = tprt__cuda_grouped_linear_wgrad,
    .glu_grad = tprt__cuda_glu_grad,
    .moe_route = tprt__cuda_moe_route,
    .quantize = tprt__cuda_quantize,
    .dequantize = tprt__cuda_dequantize,
    .fused_grouped_mlp = tprt__cuda_fused_grouped_mlp,
    .moe_permute_grad = tprt__cuda_moe_permute_grad,
    .moe_unpermute_grad = tprt__cuda_moe_unpermute_grad,
    .moe_route_grad = tprt__cuda_moe_route_grad,
    .rmsnorm_grad = tprt__cuda_rmsnorm_grad,
    .layernorm_grad = tprt__cuda_layernorm_grad,
    .all_reduce = tprt__cuda_all_reduce,
    .all_gather = tprt__cuda_all_gather,
    .reduce_scatter = tprt__cuda_reduce_scatter,
    .all_to_all = tprt__cuda_all_to_all,
    .all_gather_start = tprt__cuda_all_gather_start,
    .reduce_scatter_start = tprt__cuda_reduce_scatter_start,
    .wait = tprt__cuda_wait,
};

/// The plugin's entry point: tpc-run --backend cuda looks it up with dlsym.
const tprt_backend_t* tprt_backend_cuda(void) { return &tprt__cuda_backend; }
