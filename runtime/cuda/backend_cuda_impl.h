// Internal to the CUDA backend plugin (backend_cuda.c: ranks, memory, the backend table, kernels
// (with backend_cuda_kernels.c and backend_cuda_quant.c); backend_cuda_graph.c: CUDA graphs;
// backend_cuda_nccl.c: communicators, collectives, waiting; backend_cuda_local.c: the collectives
// of ranks that share GPUs): the per-rank state and helpers.
#ifndef TPRT_BACKEND_CUDA_IMPL_H_
#define TPRT_BACKEND_CUDA_IMPL_H_

#include <nccl.h>
#include <stdbool.h>

#include "tprt_backend.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

#define TPRT__CUDA_MAX_COMMS 16
/// In-flight async collectives per rank (tprt_exec's limit too), and the completion events made
/// at rank_begin so that the first starts of a step create nothing (CUDA graph capture).
#define TPRT__CUDA_INITIAL_FUTURES 4

typedef struct {
  uint32_t mask;
  ncclComm_t comm;  // NULL for a local group
  int size, index;
  bool local;  // the ranks share GPUs: no NCCL communicator, the collectives of backend_cuda_local.c
  bool async;  // issues the async collectives (on comm_stream) of its group
} tprt__cuda_comm_t;

/// A device buffer that grows (outside graph capture) and is reused in stream order.
typedef struct {
  void* ptr;
  size_t bytes;
} tprt__cuda_buffer_t;

/// The future of an async collective: the event recorded on the comm stream after it. In
/// copy-engine worlds the comm stream runs no kernel (a kernel there would wait for the SMs of the
/// GEMM it overlaps, and hold up every collective queued behind it): the collective leaves the
/// copy of the caller's own rows (a copy within one GPU runs on the SMs) and a reduce-scatter's sum
/// to its wait, which queues them on the compute stream, where the memory plan still keeps the
/// start's input live. A reduce-scatter's peer slices wait in the future's own staging buffer, and
/// its sum reads the caller's slice from the input in place.
typedef struct {
  cudaEvent_t done;
  bool in_flight;
  tprt__cuda_buffer_t staging;  // a deferred sum's [g][n] slices (after the packed input, if any)
  struct {
    bool pending;  // the wait copies |outer| rows of |bytes| from src (pitch src_row) to dst (dst_row)
    const char* src;
    char* dst;
    size_t bytes, src_row, dst_row;
    int64_t outer;
    const char* what;  // the timeline's name for the copy
  } own;
  struct {
    bool pending;  // then the wait queues tprt_cuda_reduce_staged_own(staged, ..., own_view)
    bool canonical;
    const char* staged;  // in |staging|
    tprt_cuda_staged_own_t own_view;  // the caller's own slice, read in place
    int group, in_dtype, out_dtype;
    int64_t n;
    void* out;
  } sum;
} tprt__cuda_future_t;

/// What a timed interval is.
typedef enum {
  TPRT__IV_CONTRACTION,  // a contraction (the kernel table's rows), on the compute stream
  TPRT__IV_COMM,         // an async collective, on the comm stream
  TPRT__IV_COLLECTIVE,   // a collective's work on the compute stream (a reduce-scatter's sum at its wait)
  TPRT__IV_OP,           // any other op's kernel on the compute stream (norms, GLU, adds, ...)
  TPRT__IV_KINDS
} tprt__interval_kind_t;

/// TPRT_CUDA_TIMELINE: timed intervals of the current step (every op on the compute stream and
/// every async collective).
typedef struct {
  cudaEvent_t begin, end;
  int kind;  // tprt__interval_kind_t
  const char* what;  // the op (a static string), for TPRT_CUDA_TIMELINE=2's list
  int64_t size;      // the bytes the collective writes, or the contraction's result elements
} tprt__cuda_interval_t;

/// A collective group's registration for the fused norm kernel (backend_cuda_fused.c): |g| holds
/// every member's region; g.data[g.index] and g.counters are this rank's.
typedef struct {
  uint32_t mask;
  tprt_cuda_peer_group_t g;
} tprt__cuda_fused_t;

typedef struct {
  bool active;
  int device;
  int sm;  // the device's compute capability, major * 10 + minor (90 on H100 and H200)
  cudaStream_t stream;       // compute: kernels, copies, synchronous collectives, in program order
  cudaStream_t comm_stream;  // highest priority: the async collectives, forked off `stream`
  cudaStream_t issue;        // where the collectives queue their work now: stream or comm_stream
  cudaEvent_t fork;          // recorded on `stream` by each start; comm_stream waits on it
  tprt__cuda_future_t** futures;  // each allocated once: a tprt_future_t* is one of them
  int num_futures, cap_futures;   // futures[0..num_futures) exist and have their event
  tprt__cuda_future_t* starting;  // the future of the start being issued (NULL outside a start)
  tprt__cuda_comm_t comms[TPRT__CUDA_MAX_COMMS];
  int num_comms;
  tprt__cuda_buffer_t scratch;       // the collectives' temporaries on `stream`
  tprt__cuda_buffer_t comm_scratch;  // the same on comm_stream (in flight beside `stream`)
  tprt__cuda_buffer_t workspace;     // the backend's workspace hook (fused norms' f32 sum)
  tprt_cuda_lt_t lt;                 // cuBLASLt handle and workspace (fast mode), made on first use
  bool capturing;  // between graph_begin and graph_end: no host copies, no synchronization
  tprt_rank_t* rank;
  int64_t collectives;  // calls so far (fault injection counts them)
  // Ranks sharing GPUs (TPRT_CUDA_SHARE_DEVICES, a thread world with more ranks than GPUs): every
  // collective group is local (backend_cuda_local.c), synchronized through these two events.
  bool shared;
  // Copy-engine collectives (TPRT_CUDA_COPY_ENGINE, a thread world on distinct GPUs with peer
  // access): the async collectives are local groups too, on the comm stream, with the same events.
  bool ce;
  cudaEvent_t local_ready;  // recorded on the issuing stream once the collective's source is written
  cudaEvent_t local_done;   // recorded on it once the rank's reads of its peers' sources are queued
  tprt__cuda_fused_t* fused;  // the fused norm's registered groups (TPRT_CUDA_FUSED_NORM)
  int num_fused;
  volatile unsigned* fused_abort;  // host-mapped word the fused kernel polls; set when the rank aborts
  // TPRT_CUDA_TIMELINE: the step's intervals (events made on demand, reused from step to step).
  tprt__cuda_interval_t* intervals;
  int num_intervals, cap_intervals;
} tprt__cuda_rank_t;

/// The calling rank thread's state (backend_cuda.c).
extern _Thread_local tprt__cuda_rank_t tprt__r;

/// TPRT_CUDA_TIMELINE: starts a timed interval of |kind| on |stream| and returns its index, or -1
/// when the timeline is off or a graph is being captured. |what| (a static string) and |size| name
/// it in TPRT_CUDA_TIMELINE=2's list of every interval.
int tprt__timeline_begin(cudaStream_t stream, tprt__interval_kind_t kind, const char* what, int64_t size);
/// Ends interval |i| (from tprt__timeline_begin; -1 does nothing) on |stream|.
void tprt__timeline_end(cudaStream_t stream, int i);

/// "<expr> failed: <NCCL error> (<last error>)".
tprt_status_t tprt__nccl_status(ncclResult_t r, const char* expr);

#define TPRT__NCCL(expr)                                                    \
  do {                                                                      \
    ncclResult_t tprt__nr = (expr);                                         \
    if (tprt__nr != ncclSuccess) return tprt__nccl_status(tprt__nr, #expr); \
  } while (0)

// Returns the status of |expr| from the enclosing function when it is a failure.
#define TPRT__TRY(expr)              \
  do {                               \
    tprt_status_t tprt__st = (expr); \
    if (tprt__st) return tprt__st;   \
  } while (0)

/// FAILED_PRECONDITION unless the calling thread began a rank.
tprt_status_t tprt__need_rank(void);

/// FAILED_PRECONDITION naming |what| while a CUDA graph is being captured.
tprt_status_t tprt__not_capturing(const char* what);

/// A device buffer of at least |bytes| reused by the collectives: the scratch of the stream they
/// issue on now (tprt__r.issue), so in-flight comm-stream work never shares bytes with the
/// compute stream's; stream order keeps the uses on one stream apart.
tprt_status_t tprt__scratch(size_t bytes, char** out);

/// A new future of the rank's pool with its event (outside graph capture only; |op| names the
/// caller in the error); |out| (may be NULL) receives it, not in flight.
tprt_status_t tprt__future_new(const char* op, tprt__cuda_future_t** out);

/// Grows |b| to at least |bytes| (outside graph capture only; |what| names it in the error), after
/// both streams have drained the old buffer's uses.
tprt_status_t tprt__buffer_reserve(tprt__cuda_buffer_t* b, size_t bytes, const char* what);

/// Waits for the rank's streams (compute and comm); NCCL errors, a world abort or the timeout
/// abort the rank's communicators and return a status (backend_cuda_nccl.c).
tprt_status_t tprt__wait_stream(void);

/// After tprt__wait_stream failed: waits up to |seconds| for the streams to drain (the failure
/// ended the collectives), so that no queued copy touches host memory its caller then frees.
void tprt__drain_after_failure(double seconds);

/// Elements before |dim| (the outer count) and bytes from |dim| on (one outer row), of |t|.
void tprt__split_at(const tprt_tensor_t* t, int dim, int64_t* outer, size_t* row_bytes);

/// Packs |in| ([outer] rows of |row| bytes, each split into |g| equal parts) as [g][outer][row/g]
/// into |packed|: part p of every row becomes the contiguous block p. On tprt__r.issue.
tprt_status_t tprt__pack_slices(const char* in, char* packed, int g, int64_t outer, size_t row);

/// The inverse placement: block p of |blocks| (|block_bytes| each, [outer] rows of |row| bytes)
/// goes to position p of every row of |out| (rows of g·|row| bytes). On tprt__r.issue.
tprt_status_t tprt__concat_blocks(const char* blocks, size_t block_bytes, int g, int64_t outer, size_t row, char* out);

/// |x| rounded up to the alignment at which scratch regions are carved (256 bytes).
size_t tprt__align_up(size_t x);

/// The collectives of a local group (|c|->local: its ranks share GPUs), on tprt__r.issue, with
/// arguments that the callers in backend_cuda_nccl.c have validated (backend_cuda_local.c).
tprt_status_t tprt__local_all_reduce(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                     tprt_tensor_t* out, tprt_order_t order);
tprt_status_t tprt__local_reduce_scatter(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                         tprt_tensor_t* out, int dim, tprt_order_t order);
/// The max all-reduce of a local group: every member's input staged, then tprt_cuda_max_staged.
tprt_status_t tprt__local_all_reduce_max(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                         tprt_tensor_t* out);
tprt_status_t tprt__local_all_gather(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                     tprt_tensor_t* out, int dim);
/// The exchange step of an all-to-all (backend_cuda_nccl.c packs and unpacks): block p of |recv|
/// (|slice| bytes each) is block |c|->index of member p's |send|.
tprt_status_t tprt__local_exchange(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const char* send, char* recv,
                                   size_t slice);

/// At a wait, on the compute stream (after the wait for |f|'s collective): a copy-engine
/// collective's deferred work, an all-gather's own rows or a reduce-scatter's sum; nothing for
/// other futures. backend_cuda_local.c.
tprt_status_t tprt__local_at_wait(tprt__cuda_future_t* f);
/// An all-to-all of ranks sharing one process whose concat dim is outermost (every dim before it
/// of size 1) and comes before |split_dim|: member p's piece of the caller's slice is one pitched
/// copy from p's input into block p of |out|.
tprt_status_t tprt__local_all_to_all(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                     tprt_tensor_t* out, int split_dim);

/// Every member of |mask|'s group gets every member's |words| words: all[p·words + i] is member
/// p's mine[i] (through the CPU world; backend_cuda_local.c).
tprt_status_t tprt__exchange_words(tprt_rank_t* rank, uint32_t mask, const int64_t* mine, int words, int64_t* all);

/// The backend's fused_norm hook (tprt_backend_t): the fused kernel where the op's algorithm is
/// one_shot, or auto and TPRT_CUDA_FUSED_NORM asks for it below the crossover, and the group's
/// ranks address each other's memory (backend_cuda_fused.c).
tprt_status_t tprt__cuda_fused_norm(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* partial,
                                    const tprt_tensor_t* residual, const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                                    tprt_tensor_t* residual_out, float eps, tprt_order_t order,
                                    tprt_fused_algorithm_t algorithm, bool round_sum, const tprt_fused_quant_t* quant,
                                    bool* done);
/// Frees the fused norm's registrations, unless the world |failed| (a peer may still read them).
void tprt__cuda_fused_end(bool failed);

/// Counts a collective call and fails it when TPRT_CUDA_FAULT="R:N" names this rank and count
/// (backend_cuda_nccl.c).
tprt_status_t tprt__fault(void);

/// Creates the rank's two local events and enables peer access from its device to the other
/// |num_devices| - 1 (best effort: copies between GPUs without it go through the host) (rank_begin).
tprt_status_t tprt__local_rank_begin(int num_devices);

/// Destroys the local events, unless the world |failed|: a peer may then still be about to name
/// them, and they are left to the process's end (rank_end).
void tprt__local_rank_end(bool failed);

/// Whether a device buffer of the calling rank (tprt__r.shared) may be freed now: after its streams
/// drain, true unless the world failed (a peer may then still read the buffer: it is left to the
/// process's end) (the backend's free).
bool tprt__local_may_free(void);

/// The CUDA graph hooks of the backend table (backend_cuda_graph.c).
tprt_status_t tprt__cuda_graph_begin(void);
tprt_status_t tprt__cuda_graph_end(void** out_graph);
tprt_status_t tprt__cuda_graph_launch(void* graph);
void tprt__cuda_graph_destroy(void* graph);

// Returns |launch| (a kernel launch on the compute stream), timed as an op of TPRT_CUDA_TIMELINE.
#define TPRT__TIMED_OP(name, launch)                                        \
  do {                                                                      \
    int tprt__t = tprt__timeline_begin(tprt__r.stream, TPRT__IV_OP, name, 0); \
    tprt_status_t tprt__s = (launch);                                       \
    tprt__timeline_end(tprt__r.stream, tprt__t);                            \
    return tprt__s;                                                         \
  } while (0)

/// The kernels of the backend table (backend_cuda_kernels.c and backend_cuda_ops.c; amax and
/// quantize_with_amax in backend_cuda_quant.c), and its numerics hook.
#define TPRT__CUDA_KERNEL_DECL(name, params, args) tprt_status_t tprt__cuda_##name params;
TPRT_BACKEND_KERNELS(TPRT__CUDA_KERNEL_DECL)
#undef TPRT__CUDA_KERNEL_DECL
tprt_status_t tprt__cuda_configure(const char* numerics);

/// The collectives of the backend table (backend_cuda_nccl.c).
#define TPRT__CUDA_COLLECTIVE_DECL(name, params, args) tprt_status_t tprt__cuda_##name params;
TPRT_BACKEND_COLLECTIVES(TPRT__CUDA_COLLECTIVE_DECL)
#undef TPRT__CUDA_COLLECTIVE_DECL

#endif  // TPRT_BACKEND_CUDA_IMPL_H_
