// The CUDA backend of the runtime ABI (runtime/tprt_backend.h), built as the plugin
// libtprt_backend_cuda.so that `tpc-run --backend cuda` loads: one GPU per rank (rank i of the
// world of threads uses device i), two non-blocking streams per rank (the compute stream, on which
// every kernel, synchronous collective and copy is queued in program order, and a highest-priority
// comm stream for the async collectives), NCCL communicators per collective group, and device
// buffers from cudaMalloc.
//
// Collectives (numerics as the CPU backend's, docs/runtime.md):
// - canonical all-reduce / reduce-scatter: NCCL moves the f32 (or storage) partials unchanged
//   (all-gather, or grouped send/recv of the slices) into a staged [group][n] buffer, then
//   tprt_cuda_reduce_staged adds them in the CPU collectives' tree order: the CPU backend's bits.
// - order "any": ncclAllReduce / ncclReduceScatter (NCCL's own order; fast mode's contract).
// - all-gather, all-to-all: byte movement (NCCL all-gather, grouped send/recv) and strided
//   device copies where a dimension other than the outermost is concatenated or split.
// - the async starts fork the comm stream off the compute stream (an event: the collective sees
//   every earlier op), issue the collective there with its own scratch, and record a completion
//   event (the future, from a per-rank pool); wait makes the compute stream wait on that event.
//   Compute queued between the two overlaps the collective. Under CUDA graph capture the comm
//   stream joins the capture through the fork event and rejoins the compute stream at the wait.
// Every compute op has a CUDA kernel; the ABI's host fallback (tprt_abi_impl.h) remains for
// backends or ops added later without one.
//
// Ranks sharing GPUs (tpc-run --share-gpus, TPRT_CUDA_SHARE_DEVICES=1): a world of threads with
// more ranks than GPUs puts rank i on device i % GPUs, and its collectives copy between the ranks'
// buffers instead of using NCCL (backend_cuda_local.c); a test mode. Such ranks, and those of
// copy-engine worlds, capture one CUDA graph for the whole world (backend_cuda_graph.c, "CUDA
// graphs", which holds the graph hooks of the table below: a rank's own graph or the world's).
//
// Thread safety: each rank thread has its own state (thread-local): device, streams, events,
// communicators.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_impl.h"
#include "tprt_backend.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"
#include "tprt_params.h"

_Thread_local tprt__cuda_rank_t tprt__r;

tprt_status_t tprt__need_rank(void) {
  if (tprt__r.active) return NULL;
  return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                          "the cuda backend was called on a thread that did not begin a rank (rank_begin)");
}

//===----------------------------------------------------------------------===//
// Ranks and memory
//===----------------------------------------------------------------------===//

static void tprt__cuda_rank_end(tprt_rank_t* rank);

// The comm stream, with the highest priority (its kernels are scheduled ahead of the compute
// stream's queued blocks, so communication is not starved by the compute it overlaps), the fork
// event and the first completion events of the futures.
static tprt_status_t tprt__cuda_rank_streams(void) {
  int least = 0, greatest = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&tprt__r.comm_stream, cudaStreamNonBlocking, greatest));
  TPRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&tprt__r.fork, cudaEventDisableTiming));
  while (tprt__r.num_futures < TPRT__CUDA_INITIAL_FUTURES) TPRT__TRY(tprt__future_new("rank_begin", NULL));
  return NULL;
}

// Whether every pair of the first |n| GPUs has peer access (copies between them run on the copy
// engines over NVLink or PCIe, without staging through the host).
static bool tprt__all_peers(int n) {
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      int can = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can)) {
        (void)cudaGetLastError();
        return false;
      }
    }
  return true;
}

static tprt_status_t tprt__cuda_rank_begin(tprt_rank_t* rank) {
  int n = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n));
  // One GPU per rank: the rank's index on its node (LOCAL_RANK for a process world). Threads of
  // one process may share GPUs when asked to (their buffers are then addressable by each other).
  int local = tprt_rank_local_size(rank), index = tprt_rank_local_index(rank);
  bool process = tprt_rank_is_process(rank);
  bool shared = local > n && n > 0 && !process && tprt_param_cuda_share_devices() != 0;
  if (local > n && process)
    return tprt_make_status(TPRT_STATUS_UNAVAILABLE,
                            "the cuda backend runs one rank per GPU: this node's %d ranks need %d GPUs; this machine "
                            "has %d%s",
                            local, local, n,
                            tprt_param_cuda_share_devices() ? " (--share-gpus lets the ranks of one process share "
                                                              "GPUs, not ranks run as processes)"
                                                            : "");
  if (local > n && !shared)
    return tprt_make_status(TPRT_STATUS_UNAVAILABLE,
                            "the cuda backend runs one rank per GPU: a world of %d ranks needs %d GPUs; this machine "
                            "has %d (--share-gpus or TPRT_CUDA_SHARE_DEVICES=1 lets ranks share GPUs, for tests)",
                            local, local, n);
  // Every rank of the world decides alike (the same GPUs, the same knob): a collective is local on
  // all its members or on none.
  bool ce = !process && !shared && local > 1 && tprt_param_cuda_copy_engine() != 0 && tprt__all_peers(local);
  memset(&tprt__r, 0, sizeof tprt__r);
  tprt__r.device = shared ? index % n : index;
  tprt__r.shared = shared;
  tprt__r.ce = ce;
  tprt__r.rank = rank;
  TPRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(tprt__r.device));
  int major = 0, minor = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, tprt__r.device));
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, tprt__r.device));
  tprt__r.sm = major * 10 + minor;
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&tprt__r.stream, cudaStreamNonBlocking));
  tprt__r.issue = tprt__r.stream;
  tprt__r.active = true;
  tprt_status_t s = tprt__cuda_rank_streams();
  if (!s && (shared || ce)) s = tprt__local_rank_begin(n);
  if (s) tprt__cuda_rank_end(rank);
  return s;
}

static void tprt__buffer_free(tprt__cuda_buffer_t* b) {
  if (b->ptr) cudaFree(b->ptr);
  b->ptr = NULL;
  b->bytes = 0;
}

static void tprt__cuda_rank_end(tprt_rank_t* rank) {
  (void)rank;
  if (!tprt__r.active) return;
  // A fused norm kernel still waiting for a peer of a failed world returns (its abort word).
  if (tprt__r.fused_abort && tprt__r.rank) {
    tprt_status_t aborted = tprt_rank_check_abort(tprt__r.rank);
    if (aborted) *tprt__r.fused_abort = 1;
    tprt_status_free(aborted);
  }
  cudaStreamSynchronize(tprt__r.stream);
  if (tprt__r.comm_stream) cudaStreamSynchronize(tprt__r.comm_stream);
  // After a failure a peer may never take part again: abort (returns at once) rather than destroy.
  tprt_status_t failed = tprt__r.rank ? tprt_rank_check_abort(tprt__r.rank) : NULL;
  for (int i = 0; i < tprt__r.num_comms; ++i)
    if (tprt__r.comms[i].comm) failed ? ncclCommAbort(tprt__r.comms[i].comm) : ncclCommDestroy(tprt__r.comms[i].comm);
  tprt__local_rank_end(failed != NULL);
  tprt__cuda_temps_forget();
  // Ranks that share GPUs read each other's scratch (a packed source): after a failure a peer may
  // still read it (backend_cuda_local.c), so it is left to the process's end.
  bool keep = (tprt__r.shared || tprt__r.ce) && failed;
  tprt__cuda_fused_end(keep);
  if (!keep) {
    tprt__buffer_free(&tprt__r.scratch);
    tprt__buffer_free(&tprt__r.comm_scratch);
  }
  tprt_status_free(failed);
  tprt__buffer_free(&tprt__r.workspace);
  tprt_cuda_lt_destroy(&tprt__r.lt);
  for (int i = 0; i < tprt__r.num_futures; ++i) {
    cudaEventDestroy(tprt__r.futures[i]->done);
    if (!keep) tprt__buffer_free(&tprt__r.futures[i]->staging);  // a packed source is read by peers
    free(tprt__r.futures[i]);
  }
  free(tprt__r.futures);
  for (int i = 0; i < tprt__r.cap_intervals; ++i) {
    cudaEventDestroy(tprt__r.intervals[i].begin);
    cudaEventDestroy(tprt__r.intervals[i].end);
  }
  free(tprt__r.intervals);
  if (tprt__r.fork) cudaEventDestroy(tprt__r.fork);
  if (tprt__r.comm_stream) cudaStreamDestroy(tprt__r.comm_stream);
  cudaStreamDestroy(tprt__r.stream);
  memset(&tprt__r, 0, sizeof tprt__r);
}

// "needs X GiB of GPU memory; GPU d has F GiB free of T GiB" when |bytes| cannot be had.
static tprt_status_t tprt__cuda_no_room(size_t bytes, size_t free_bytes, size_t total_bytes) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED,
                          "needs %.2f GiB (%zu bytes) of GPU memory; GPU %d has %.2f GiB free of %.2f GiB", bytes / gib,
                          bytes, tprt__r.device, free_bytes / gib, total_bytes / gib);
}

// Device memory for the runtime (arenas, arguments, results): checked against the free memory
// first, so that a plan too large for the GPU fails with what it needs and what there is.
static tprt_status_t tprt__cuda_alloc(size_t bytes, void** out) {
  *out = NULL;
  TPRT__TRY(tprt__need_rank());
  size_t free_bytes = 0, total_bytes = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes > free_bytes) return tprt__cuda_no_room(bytes, free_bytes, total_bytes);
  cudaError_t err = cudaMalloc(out, bytes > 0 ? bytes : 1);
  if (err == cudaErrorMemoryAllocation) {  // free memory is fragmented, or another process took it
    (void)cudaGetLastError();
    *out = NULL;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) free_bytes = total_bytes = 0;
    return tprt__cuda_no_room(bytes, free_bytes, total_bytes);
  }
  TPRT_CUDA_RETURN_IF_ERROR(err);
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(*out, 0, bytes > 0 ? bytes : 1, tprt__r.stream));
  return NULL;
}

static void tprt__cuda_free(void* ptr) {
  if (!ptr) return;
  // Ranks that share GPUs read each other's buffers (backend_cuda_local.c decides when that is over).
  if (tprt__r.active && (tprt__r.shared || tprt__r.ce) && !tprt__local_may_free()) return;
  cudaFree(ptr);
}

// Host copies and synchronization cannot be captured into a CUDA graph.
tprt_status_t tprt__not_capturing(const char* what) {
  if (!tprt__r.capturing) return NULL;
  return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                          "--graph: %s during CUDA graph capture (an op without a CUDA kernel runs on the host, or a "
                          "kernel reads device data back); run without --graph",
                          what);
}

// The wait of a host copy. When it fails (a peer's failure, the timeout) the copy may still be
// queued behind work the failure is ending; it must not touch |dst| or |src| after the caller has
// the error and frees them (found by the emulator's check of an absent rank under ASan).
static tprt_status_t tprt__copy_wait(void) {
  tprt_status_t s = tprt__wait_stream();
  if (s) tprt__drain_after_failure(10.0);
  return s;
}

static tprt_status_t tprt__cuda_to_device(void* dst, const void* src, size_t bytes) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__not_capturing("a host-to-device copy"));
  if (!bytes) return NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, tprt__r.stream));
  return tprt__copy_wait();
}

static tprt_status_t tprt__cuda_to_host(void* dst, const void* src, size_t bytes) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__not_capturing("a device-to-host copy"));
  if (!bytes) return NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, tprt__r.stream));
  return tprt__copy_wait();
}

//===----------------------------------------------------------------------===//
// TPRT_CUDA_TIMELINE
//===----------------------------------------------------------------------===//

int tprt__timeline_begin(cudaStream_t stream, tprt__interval_kind_t kind, const char* what, int64_t size) {
  if (!tprt_param_cuda_timeline() || tprt__r.capturing) return -1;
  if (tprt__r.num_intervals == tprt__r.cap_intervals) {
    int cap = tprt__r.cap_intervals ? 2 * tprt__r.cap_intervals : 64;
    tprt__cuda_interval_t* grown = realloc(tprt__r.intervals, (size_t)cap * sizeof *grown);
    if (!grown) return -1;
    for (int i = tprt__r.cap_intervals; i < cap; ++i) {
      grown[i].begin = grown[i].end = NULL;
      if (cudaEventCreate(&grown[i].begin) != cudaSuccess || cudaEventCreate(&grown[i].end) != cudaSuccess) {
        (void)cudaGetLastError();
        tprt__r.intervals = grown;
        tprt__r.cap_intervals = i;
        return -1;
      }
    }
    tprt__r.intervals = grown;
    tprt__r.cap_intervals = cap;
  }
  int i = tprt__r.num_intervals++;
  tprt__r.intervals[i].kind = kind;
  tprt__r.intervals[i].what = what;
  tprt__r.intervals[i].size = size;
  if (cudaEventRecord(tprt__r.intervals[i].begin, stream) != cudaSuccess) (void)cudaGetLastError();
  return i;
}

void tprt__timeline_end(cudaStream_t stream, int i) {
  if (i < 0) return;
  if (cudaEventRecord(tprt__r.intervals[i].end, stream) != cudaSuccess) (void)cudaGetLastError();
}

// Orders intervals (begin, end, kind) by their begin.
static int tprt__interval_cmp(const void* x, const void* y) {
  float a = ((const float*)x)[0], b = ((const float*)y)[0];
  return a < b ? -1 : a > b;
}

// The union of the intervals of |kind| (-1: of every kind but the comm stream's) in |iv| (sorted by
// begin) as merged segments into |seg|; returns their count and adds their total length to |*busy|.
static int tprt__interval_union(float (*iv)[3], int n, int kind, float (*seg)[2], double* busy) {
  int ns = 0;
  for (int i = 0; i < n; ++i) {
    int k = (int)iv[i][2];
    if (kind >= 0 ? k != kind : k == TPRT__IV_COMM) continue;
    if (ns && iv[i][0] <= seg[ns - 1][1]) {
      if (iv[i][1] > seg[ns - 1][1]) seg[ns - 1][1] = iv[i][1];
    } else {
      seg[ns][0] = iv[i][0];
      seg[ns][1] = iv[i][1];
      ++ns;
    }
  }
  for (int j = 0; j < ns; ++j) *busy += seg[j][1] - seg[j][0];
  return ns;
}

// After the step's synchronization: per kind, the busy time (the union of its intervals), and the
// async collectives' busy time under the compute stream's work (any kind but theirs); one line on
// stderr, then the intervals are reused.
static void tprt__timeline_report(void) {
  int n = tprt__r.num_intervals;
  tprt__r.num_intervals = 0;
  if (n <= 0) return;
  size_t count = (size_t)n;
  float (*iv)[3] = malloc(count * sizeof *iv);  // begin, end, kind
  float (*seg[2])[2] = {malloc(count * sizeof(float[2])), malloc(count * sizeof(float[2]))};
  if (!iv || !seg[0] || !seg[1]) {
    free(iv);
    free(seg[0]);
    free(seg[1]);
    return;
  }
  int rank = tprt__r.rank ? tprt_rank_index(tprt__r.rank) : 0, num[TPRT__IV_KINDS] = {0};
  for (int i = 0; i < n; ++i) {
    float b = 0, e = 0;
    if (cudaEventElapsedTime(&b, tprt__r.intervals[0].begin, tprt__r.intervals[i].begin) != cudaSuccess ||
        cudaEventElapsedTime(&e, tprt__r.intervals[0].begin, tprt__r.intervals[i].end) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
      break;
    }
    int kind = tprt__r.intervals[i].kind;
    ++num[kind];
    iv[i][0] = b;
    iv[i][1] = e;
    iv[i][2] = (float)kind;
    if (tprt_param_cuda_timeline() >= 2)  // every interval, in issue order per stream
      fprintf(stderr, "tprt cuda timeline: rank %d: %s %.3f %.3f %lld %s\n", rank,
              kind == TPRT__IV_COMM ? "comm" : "compute", b, e, (long long)tprt__r.intervals[i].size,
              tprt__r.intervals[i].what);
  }
  if (n > 0) {
    qsort(iv, count, sizeof *iv, tprt__interval_cmp);
    double busy[TPRT__IV_KINDS] = {0}, compute = 0, both = 0;
    for (int k = 0; k < TPRT__IV_KINDS; ++k)
      if (k != TPRT__IV_COMM) (void)tprt__interval_union(iv, n, k, seg[0], &busy[k]);
    int ns0 = tprt__interval_union(iv, n, -1, seg[0], &compute);  // every kind but the comm stream's
    int ns1 = tprt__interval_union(iv, n, TPRT__IV_COMM, seg[1], &busy[TPRT__IV_COMM]);
    for (int a = 0, c = 0; a < ns0 && c < ns1;) {  // the intersection of the two unions
      float lo = seg[0][a][0] > seg[1][c][0] ? seg[0][a][0] : seg[1][c][0];
      float hi = seg[0][a][1] < seg[1][c][1] ? seg[0][a][1] : seg[1][c][1];
      if (hi > lo) both += hi - lo;
      if (seg[0][a][1] < seg[1][c][1]) ++a; else ++c;
    }
    double comm = busy[TPRT__IV_COMM];
    fprintf(stderr,
            "tprt cuda timeline: rank %d: contractions %.3f ms (%d), other ops %.3f ms (%d), async collectives "
            "%.3f ms (%d), %.3f ms of them under compute (%.0f%%), their work on the compute stream %.3f ms (%d)\n",
            rank, busy[TPRT__IV_CONTRACTION], num[TPRT__IV_CONTRACTION], busy[TPRT__IV_OP], num[TPRT__IV_OP], comm,
            num[TPRT__IV_COMM], both, comm > 0 ? 100.0 * both / comm : 0.0, busy[TPRT__IV_COLLECTIVE],
            num[TPRT__IV_COLLECTIVE]);
  }
  free(seg[0]);
  free(seg[1]);
  free(iv);
}

static tprt_status_t tprt__cuda_synchronize(void) {
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__not_capturing("a stream synchronization"));
  TPRT__TRY(tprt__wait_stream());
  tprt__timeline_report();
  return NULL;
}

//===----------------------------------------------------------------------===//
// Buffers and the backend table
//===----------------------------------------------------------------------===//

// The old buffer may still be read by queued work on either stream: wait for both before freeing it.
tprt_status_t tprt__buffer_reserve(tprt__cuda_buffer_t* b, size_t bytes, const char* what) {
  if (bytes <= b->bytes) return NULL;
  TPRT__TRY(tprt__not_capturing(what));
  if (b->ptr) {
    TPRT__TRY(tprt__wait_stream());
    TPRT_CUDA_RETURN_IF_ERROR(cudaFree(b->ptr));
    b->ptr = NULL;
    b->bytes = 0;
  }
  TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->ptr, bytes));
  b->bytes = bytes;
  return NULL;
}

tprt_status_t tprt__scratch(size_t bytes, char** out) {
  *out = NULL;
  bool comm = tprt__r.issue == tprt__r.comm_stream;
  tprt__cuda_buffer_t* b = comm ? &tprt__r.comm_scratch : &tprt__r.scratch;
  TPRT__TRY(tprt__buffer_reserve(
      b, bytes, comm ? "growing the async collectives' scratch buffer" : "growing the collective scratch buffer"));
  *out = (char*)b->ptr;
  return NULL;
}

// The workspace hook of the backend table: one per-rank buffer, used on the compute stream.
static tprt_status_t tprt__cuda_workspace(size_t bytes, void** out) {
  *out = NULL;
  TPRT__TRY(tprt__need_rank());
  TPRT__TRY(tprt__buffer_reserve(&tprt__r.workspace, bytes > 0 ? bytes : 1, "growing the backend workspace"));
  *out = tprt__r.workspace.ptr;
  return NULL;
}

// The describe hook of the backend table: the rank's GPU by its attributes (the emulator of the
// host tests has no device properties, so no name).
static tprt_status_t tprt__cuda_describe(char* buf, size_t size) {
  TPRT__TRY(tprt__need_rank());
  int sms = 0;
  size_t free_bytes = 0, total_bytes = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, tprt__r.device));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  snprintf(buf, size, "GPU %d: sm_%d, %d SMs, %.0f GiB", tprt__r.device, tprt__r.sm, sms,
           (double)total_bytes / (1ull << 30));
  return NULL;
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
    .workspace = tprt__cuda_workspace,
    .graph_begin = tprt__cuda_graph_begin,
    .graph_end = tprt__cuda_graph_end,
    .graph_launch = tprt__cuda_graph_launch,
    .graph_destroy = tprt__cuda_graph_destroy,
    .describe = tprt__cuda_describe,
    .fused_norm = tprt__cuda_fused_norm,
    .linear = tprt__cuda_linear,
    .grouped_linear = tprt__cuda_grouped_linear,
    .glu = tprt__cuda_glu,
    .rmsnorm = tprt__cuda_rmsnorm,
    .add_rmsnorm = tprt__cuda_add_rmsnorm,
    .layernorm = tprt__cuda_layernorm,
    .add = tprt__cuda_add,
    .mul = tprt__cuda_mul,
    .moe_permute = tprt__cuda_moe_permute,
    .moe_bucket = tprt__cuda_moe_bucket,
    .moe_unbucket = tprt__cuda_moe_unbucket,
    .moe_unpermute = tprt__cuda_moe_unpermute,
    .copy = tprt__cuda_copy,
    .rope = tprt__cuda_rope,
    .attention = tprt__cuda_attention,
    .attention_grad = tprt__cuda_attention_grad,
    .linear_dgrad_segmented = tprt__cuda_linear_dgrad_segmented,
    .linear_dgrad_acc = tprt__cuda_linear_dgrad_acc,
    .linear_wgrad = tprt__cuda_linear_wgrad,
    .bias_grad = tprt__cuda_bias_grad,
    .grouped_linear_dgrad_segmented = tprt__cuda_grouped_linear_dgrad_segmented,
    .grouped_linear_wgrad = tprt__cuda_grouped_linear_wgrad,
    .glu_grad = tprt__cuda_glu_grad,
    .moe_route = tprt__cuda_moe_route,
    .sample = tprt__cuda_sample,
    .kvcache_write = tprt__cuda_kvcache_write,
    .quantize = tprt__cuda_quantize,
    .quantize_with_amax = tprt__cuda_quantize_with_amax,
    .amax = tprt__cuda_amax,
    .dequantize = tprt__cuda_dequantize,
    .fused_grouped_mlp = tprt__cuda_fused_grouped_mlp,
    .moe_permute_grad = tprt__cuda_moe_permute_grad,
    .moe_unpermute_grad = tprt__cuda_moe_unpermute_grad,
    .moe_route_grad = tprt__cuda_moe_route_grad,
    .rmsnorm_grad = tprt__cuda_rmsnorm_grad,
    .rmsnorm_grad_acc = tprt__cuda_rmsnorm_grad_acc,
    .embedding_grad_acc = tprt__cuda_embedding_grad_acc,
    .layernorm_grad = tprt__cuda_layernorm_grad,
    .embedding = tprt__cuda_embedding,
    .embedding_grad = tprt__cuda_embedding_grad,
    .cross_entropy = tprt__cuda_cross_entropy,
    .cross_entropy_logits = tprt__cuda_cross_entropy_logits,
    .cross_entropy_stats = tprt__cuda_cross_entropy_stats,
    .cross_entropy_combine = tprt__cuda_cross_entropy_combine,
    .cross_entropy_dgrad = tprt__cuda_cross_entropy_dgrad,
    .cross_entropy_wgrad = tprt__cuda_cross_entropy_wgrad,
    .cross_entropy_grad = tprt__cuda_cross_entropy_grad,
    .cross_entropy_with_grad = tprt__cuda_cross_entropy_with_grad,
    .sumsq = tprt__cuda_sumsq,
    .global_norm = tprt__cuda_global_norm,
    .adamw = tprt__cuda_adamw,
    .all_reduce = tprt__cuda_all_reduce,
    .all_reduce_max = tprt__cuda_all_reduce_max,
    .all_gather = tprt__cuda_all_gather,
    .reduce_scatter = tprt__cuda_reduce_scatter,
    .all_to_all = tprt__cuda_all_to_all,
    .all_gather_start = tprt__cuda_all_gather_start,
    .reduce_scatter_start = tprt__cuda_reduce_scatter_start,
    .all_to_all_start = tprt__cuda_all_to_all_start,
    .wait = tprt__cuda_wait,
};

/// The plugin's entry point: tpc-run --backend cuda looks it up with dlsym.
// The plugin's one exported symbol (the library is built with hidden visibility).
__attribute__((visibility("default"))) const tprt_backend_t* tprt_backend_cuda(void) { return &tprt__cuda_backend; }
