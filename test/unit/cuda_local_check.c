// Checks the CUDA backend's collectives for ranks that share GPUs (backend_cuda_local.c) on the
// host: the backend's C files run against the CUDA emulator of cuda_emulator.c, whose streams are
// threads with random delays, so missing stream/event ordering shows up as wrong bytes or as a
// reported use of freed memory. Every result must equal the CPU collectives' bits (the canonical
// tree and the "any" order of tprt_collectives.h).
//
// Usage: tprt-cuda-local-check share [R] (TPRT_CUDA_SHARE_DEVICES=1; TPRT_EMU_DEVICES GPUs): every
//          collective over each group of a dp=2 x tp=4 mesh, issued back to back, async starts
//          overlapping synchronous collectives; then the same step captured as one CUDA graph of
//          the world and replayed 3 times. R runs (default 1), each with other random delays
//        tprt-cuda-local-check ce [R] (TPRT_EMU_DEVICES=8, TPRT_CUDA_COPY_ENGINE=1): one rank per GPU,
//          the async collectives only, as copy-engine local groups; then as one CUDA graph
//        tprt-cuda-local-check refuse  (TPRT_CUDA_SHARE_DEVICES unset): rank_begin's message
//        tprt-cuda-local-check fault   (TPRT_CUDA_FAULT set): the world ends with the fault
//        tprt-cuda-local-check room    (TPRT_CUDA_SHARE_DEVICES=1): an allocation larger than the
//          GPU's free memory fails with what it needs and what is free (rank 0 prints it); a small
//          one still succeeds
//        tprt-cuda-local-check fused|fused-fault [R]: the fused norm hook (below)
//        tprt-cuda-local-check fused-one-shot [R]: the same calls with algorithm = "one_shot", which
//          must take the fused kernel whatever TPRT_CUDA_FUSED_NORM and the crossover say
//        tprt-cuda-local-check fused-two-shot [R]: the same calls with algorithm = "two_shot" and
//          "one_shot" in turn, each form emptying what the other filled
//        tprt-cuda-local-check fused-composition [R]: algorithm = "composition", which the hook
//          must decline, with no fused kernel launched
// Prints one line per check; exit status 0 when every check passed.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda_impl.h"
#include "cuda_emulator.h"
#include "tprt_collectives.h"
#include "tprt_numerics.h"
#include "tprt_world.h"

const tprt_backend_t* tprt_backend_cuda(void);

typedef enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, ALL_REDUCE_MAX } kind_t;

// One collective call: the same on every rank.
typedef struct {
  kind_t kind;
  uint32_t mask;  // bit 0: dp (2), bit 1: tp (4)
  int in_dtype, out_dtype;
  int dim, concat_dim;
  tprt_order_t order;
  bool async;    // all_gather_start / reduce_scatter_start / all_to_all_start, waited at the end of the batch
  bool inplace;  // all-reduce into its input
} case_t;

#define BF16 TPRT_DTYPE_BF16
#define F32 TPRT_DTYPE_F32
#define CANON TPRT_ORDER_CANONICAL
#define ANY TPRT_ORDER_ANY

// Issued back to back without a host synchronization, in this order.
static const case_t kCases[] = {
    {ALL_REDUCE, 2, BF16, F32, 0, 0, CANON, false, false},
    {ALL_REDUCE, 1, BF16, BF16, 0, 0, CANON, false, true},
    {REDUCE_SCATTER, 2, BF16, BF16, 1, 0, CANON, true, false},  // in flight over the next ones
    {ALL_REDUCE, 3, F32, F32, 0, 0, ANY, false, false},
    {ALL_REDUCE, 3, BF16, BF16, 0, 0, CANON, false, true},
    {REDUCE_SCATTER, 3, BF16, BF16, 0, 0, CANON, false, false},
    {ALL_GATHER, 1, F32, F32, 0, 0, 0, true, false},  // a second start in flight
    {REDUCE_SCATTER, 1, F32, BF16, 1, 0, CANON, false, false},
    {REDUCE_SCATTER, 2, BF16, F32, 1, 0, ANY, false, false},
    {ALL_GATHER, 2, BF16, BF16, 0, 0, 0, false, false},
    {ALL_GATHER, 3, BF16, BF16, 1, 0, 0, false, false},
    {ALL_TO_ALL, 2, BF16, BF16, 1, 0, 0, false, false},
    {ALL_TO_ALL, 3, F32, F32, 0, 1, 0, false, false},
    {ALL_TO_ALL, 2, BF16, BF16, 1, 0, 0, true, false},  // async, pitched copies straight into the output
    {ALL_TO_ALL, 1, F32, F32, 0, 1, 0, true, false},    // async, packed on the comm stream
    {REDUCE_SCATTER, 3, F32, F32, 1, 0, CANON, true, false},
    {ALL_GATHER, 3, BF16, BF16, 1, 0, 0, true, false},
    {ALL_REDUCE, 2, F32, BF16, 0, 0, CANON, false, false},
    {ALL_REDUCE_MAX, 3, F32, F32, 0, 0, ANY, false, false},  // the amax all-reduce (tp.all_reduce max)
    {ALL_REDUCE_MAX, 2, BF16, BF16, 0, 0, ANY, false, true},
    {REDUCE_SCATTER, 1, BF16, F32, 0, 0, ANY, true, false},  // async, one leading row, a dtype change
    {ALL_GATHER, 2, BF16, BF16, 0, 0, 0, true, false},  // async, last: its output clobbered soon after
};
enum { NUM_CASES = sizeof kCases / sizeof kCases[0], ROWS = 16, COLS = 24 };

// A rank's buffers of one case.
typedef struct {
  tprt_tensor_t in, out;  // host views: the input and the CPU collectives' output
  void* dev_in;
  void* dev_out;
  void* dev_result;  // an async case's output, copied at its wait
  void* dev_src;     // the input on the device (the graph phase copies it into dev_stage before each replay)
  void* dev_stage;   // what the captured step copies into dev_in
  void* got;  // the device output, downloaded
  tprt_future_t* future;
} slot_t;

// The ce mode: only the async cases (copy-engine collectives, one rank per GPU: the synchronous ones
// would need NCCL, which the emulator lacks).
static bool g_async_only;

// The output view of |c| on a group of |g| ranks, of |in|'s [ROWS, COLS].
static tprt_tensor_t out_view(const case_t* c, int g, void* data) {
  int64_t dims[2] = {ROWS, COLS};
  if (c->kind == REDUCE_SCATTER) dims[c->dim] /= g;
  if (c->kind == ALL_GATHER) dims[c->dim] *= g;
  if (c->kind == ALL_TO_ALL) {
    dims[c->dim] /= g;
    dims[c->concat_dim] *= g;
  }
  return tprt_tensor_make(data, c->out_dtype, 2, dims);
}

// Inputs whose sums depend on the order: values of many magnitudes and both signs.
static void fill(tprt_tensor_t* t, int rank, int which) {
  for (int64_t i = 0; i < tprt_tensor_numel(t); ++i) {
    double v = sin(0.37 * (double)i + 1.3 * rank + 0.71 * which) * ldexp(1.0, (int)((i * 7 + rank * 3) % 11) - 5);
    tprt_store_elem(t->data, t->dtype, i, (float)v);
  }
}

// The CPU collectives' output of |c| (the reference bits).
static tprt_status_t cpu_reference(tprt_rank_t* rank, const case_t* c, slot_t* s) {
  switch (c->kind) {
    case ALL_REDUCE:
      return tprt_all_reduce(rank, c->mask, &s->in, &s->out, c->order);
    case REDUCE_SCATTER:
      return tprt_reduce_scatter(rank, c->mask, &s->in, &s->out, c->dim, c->order);
    case ALL_GATHER:
      return tprt_all_gather(rank, c->mask, &s->in, &s->out, c->dim);
    case ALL_REDUCE_MAX:
      return tprt_all_reduce_max(rank, c->mask, &s->in, &s->out);
    default:
      return tprt_all_to_all(rank, c->mask, &s->in, &s->out, c->dim, c->concat_dim);
  }
}

// Issues the collective of |c| on s->dev_in and s->dev_out; after a synchronous one, the input is
// clobbered (a peer reading it late reads garbage).
static tprt_status_t issue_collective(const tprt_backend_t* b, tprt_rank_t* rank, const case_t* c, slot_t* s) {
  size_t in_bytes = tprt_tensor_bytes(&s->in);
  tprt_tensor_t din = s->in, dout = s->out;
  din.data = s->dev_in;
  dout.data = s->dev_out;
  if (c->async && c->kind == ALL_GATHER) return b->all_gather_start(rank, c->mask, &din, &dout, c->dim, &s->future);
  if (c->async && c->kind == ALL_TO_ALL)
    return b->all_to_all_start(rank, c->mask, &din, &dout, c->dim, c->concat_dim, &s->future);
  if (c->async) return b->reduce_scatter_start(rank, c->mask, &din, &dout, c->dim, c->order, &s->future);
  switch (c->kind) {
    case ALL_REDUCE:
      TPRT__TRY(b->all_reduce(rank, c->mask, &din, &dout, c->order));
      break;
    case REDUCE_SCATTER:
      TPRT__TRY(b->reduce_scatter(rank, c->mask, &din, &dout, c->dim, c->order));
      break;
    case ALL_GATHER:
      TPRT__TRY(b->all_gather(rank, c->mask, &din, &dout, c->dim));
      break;
    case ALL_REDUCE_MAX:
      TPRT__TRY(b->all_reduce_max(rank, c->mask, &din, &dout));
      break;
    default:
      TPRT__TRY(b->all_to_all(rank, c->mask, &din, &dout, c->dim, c->concat_dim));
      break;
  }
  if (!c->inplace) TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->dev_in, 0xEE, in_bytes, tprt__r.stream));
  return NULL;
}

// Issues |c| on the device: the input is rewritten asynchronously just before (garbage, then the
// values), so a peer that reads it early reads garbage.
static tprt_status_t issue(const tprt_backend_t* b, tprt_rank_t* rank, const case_t* c, slot_t* s) {
  size_t in_bytes = tprt_tensor_bytes(&s->in), out_bytes = tprt_tensor_bytes(&s->out);
  TPRT_RETURN_IF_ERROR(b->alloc(in_bytes, &s->dev_in), "alloc");
  if (!c->inplace) TPRT_RETURN_IF_ERROR(b->alloc(out_bytes, &s->dev_out), "alloc");
  if (c->inplace) s->dev_out = s->dev_in;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->dev_in, 0xEE, in_bytes, tprt__r.stream));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->dev_in, s->in.data, in_bytes, cudaMemcpyHostToDevice, tprt__r.stream));
  return issue_collective(b, rank, c, s);
}

// Every case, issued back to back; then the waits, the downloads and the comparisons.
static tprt_status_t run_cases(const tprt_backend_t* b, tprt_rank_t* rank, slot_t* slots) {
  for (int k = 0; k < NUM_CASES; ++k) {
    const case_t* c = &kCases[k];
    slot_t* s = &slots[k];
    if (g_async_only && !c->async) continue;
    int64_t dims[2] = {ROWS, COLS};
    int g = tprt_rank_group_size(rank, c->mask);
    s->in = tprt_tensor_make(malloc(tprt_dtype_bytes(c->in_dtype, ROWS * COLS)), c->in_dtype, 2, dims);
    s->out = out_view(c, g, NULL);
    s->out.data = malloc(tprt_tensor_bytes(&s->out));
    s->got = malloc(tprt_tensor_bytes(&s->out));
    fill(&s->in, tprt_rank_index(rank), k);
    TPRT_RETURN_IF_ERROR(cpu_reference(rank, c, s), "case %d: the CPU reference", k);
  }
  for (int k = 0; k < NUM_CASES; ++k)
    if (!g_async_only || kCases[k].async) TPRT_RETURN_IF_ERROR(issue(b, rank, &kCases[k], &slots[k]), "case %d", k);
  // Newest first: the last start's output is clobbered while its peers may still be reading it.
  for (int k = NUM_CASES - 1; k >= 0; --k) {
    if (!slots[k].future) continue;
    tprt_future_t* f = slots[k].future;
    slots[k].future = NULL;
    TPRT_RETURN_IF_ERROR(b->wait(rank, f), "case %d: wait", k);
    TPRT_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(slots[k].dev_in, 0xEE, tprt_tensor_bytes(&slots[k].in), tprt__r.stream));
    // The output is the rank's own after the wait: keep the result, then clobber the output (a peer
    // still reading it, as a gather's pull of its own rows, would read garbage).
    size_t out_bytes = tprt_tensor_bytes(&slots[k].out);
    TPRT_RETURN_IF_ERROR(b->alloc(out_bytes, &slots[k].dev_result), "alloc");
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slots[k].dev_result, slots[k].dev_out, out_bytes,
                                              cudaMemcpyDeviceToDevice, tprt__r.stream));
    TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(slots[k].dev_out, 0xEE, out_bytes, tprt__r.stream));
  }
  for (int k = 0; k < NUM_CASES; ++k) {
    slot_t* s = &slots[k];
    if (!s->got) continue;  // not run (the ce mode)
    size_t bytes = tprt_tensor_bytes(&s->out);
    TPRT_RETURN_IF_ERROR(b->to_host(s->got, s->dev_result ? s->dev_result : s->dev_out, bytes), "case %d: download", k);
    for (size_t i = 0; i < bytes; ++i)
      if (((const unsigned char*)s->got)[i] != ((const unsigned char*)s->out.data)[i])
        return tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: byte %zu of %zu differs from the CPU collective's", k,
                                i, bytes);
  }
  // The step's end, as tpc-run's: with TPRT_CUDA_TIMELINE, one line of every interval kind's count.
  return b->synchronize();
}

// An emulated kernel that runs 50 ms: queued before a replay's copies on every rank but the one that
// launches the graph, so that a graph not ordered after their work reads them unfinished.
static void slow_kernel(void* arg) {
  (void)arg;
  struct timespec delay = {0, 50 * 1000 * 1000};
  nanosleep(&delay, NULL);
}

// The device buffer holding case |k|'s result after its step.
static void* result_of(const slot_t* s) { return s->dev_result ? s->dev_result : s->dev_out; }

// The cases of run_cases as one captured step (tpc-run --graph): these ranks' streams wait on each
// other's events, so the world captures one graph (backend_cuda_graph.c, "CUDA graphs"); replayed
// |replays| times, each replay's results the CPU collectives' bits.
static tprt_status_t run_graph(const tprt_backend_t* b, tprt_rank_t* rank, slot_t* slots, int replays) {
  for (int k = 0; k < NUM_CASES; ++k) {
    slot_t* s = &slots[k];
    if (!s->got) continue;
    size_t bytes = tprt_tensor_bytes(&s->in);
    TPRT_RETURN_IF_ERROR(b->alloc(bytes, &s->dev_src), "alloc");
    TPRT_RETURN_IF_ERROR(b->alloc(bytes, &s->dev_stage), "alloc");
    TPRT_RETURN_IF_ERROR(b->to_device(s->dev_src, s->in.data, bytes), "case %d: upload", k);
  }
  // The step before the capture takes the temporaries the captured one takes (a kernel's, through
  // tprt__cuda_malloc_async): they size the buffer the captured step's are placed in (the emulator
  // refuses stream-ordered allocation in a capture, as the backend must not make graph memory nodes).
  for (int k = 0; k < NUM_CASES; ++k) {
    void* tmp = NULL;
    if (!slots[k].got) continue;
    if (tprt__cuda_malloc_async(&tmp, tprt_tensor_bytes(&slots[k].in), tprt__r.stream) != cudaSuccess ||
        tprt__cuda_free_async(tmp, tprt__r.stream) != cudaSuccess)
      return tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: a temporary before the capture failed", k);
  }
  TPRT_RETURN_IF_ERROR(b->graph_begin(), "graph_begin");
  tprt_status_t s = NULL;
  for (int k = 0; k < NUM_CASES && !s; ++k) {
    slot_t* sl = &slots[k];
    if (!sl->got) continue;
    size_t bytes = tprt_tensor_bytes(&sl->in);
    // The staged input reaches the collective's input through a temporary, as a kernel's would.
    void* tmp = NULL;
    cudaError_t e = tprt__cuda_malloc_async(&tmp, bytes, tprt__r.stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(sl->dev_in, 0xEE, bytes, tprt__r.stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(tmp, sl->dev_stage, bytes, cudaMemcpyDeviceToDevice, tprt__r.stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(sl->dev_in, tmp, bytes, cudaMemcpyDeviceToDevice, tprt__r.stream);
    if (e == cudaSuccess) e = tprt__cuda_free_async(tmp, tprt__r.stream);
    s = e != cudaSuccess ? tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: a captured copy failed", k)
                         : issue_collective(b, rank, &kCases[k], sl);
  }
  for (int k = NUM_CASES - 1; k >= 0 && !s; --k) {
    slot_t* sl = &slots[k];
    if (!sl->future) continue;
    tprt_future_t* f = sl->future;
    sl->future = NULL;
    s = b->wait(rank, f);
    size_t out_bytes = tprt_tensor_bytes(&sl->out);
    if (!s && (cudaMemsetAsync(sl->dev_in, 0xEE, tprt_tensor_bytes(&sl->in), tprt__r.stream) != cudaSuccess ||
               cudaMemcpyAsync(sl->dev_result, sl->dev_out, out_bytes, cudaMemcpyDeviceToDevice, tprt__r.stream) !=
                   cudaSuccess ||
               cudaMemsetAsync(sl->dev_out, 0xEE, out_bytes, tprt__r.stream) != cudaSuccess))
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: a captured copy failed", k);
  }
  // A failed captured step ends the world before the capture ends, as tpc-run does, so that no
  // peer waits in the capture's rendezvous for this rank.
  if (s) tprt_rank_fail(rank, tprt_make_status(tprt_status_code(s), "%s", tprt_status_message(s)));
  void* graph = NULL;
  tprt_status_t end = b->graph_end(&graph);
  if (!s) s = end;
  else tprt_status_free(end);
  // Between replays the staged inputs are garbage; before each replay, on the rank's stream, a slow
  // kernel (but on rank 0, which launches), the results clobbered and the inputs staged: a graph that
  // does not start after every rank's work reads garbage.
  for (int k = 0; k < NUM_CASES && !s; ++k)
    if (slots[k].got && cudaMemsetAsync(slots[k].dev_stage, 0xEE, tprt_tensor_bytes(&slots[k].in), tprt__r.stream))
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: clobbering the staged input failed", k);
  for (int r = 0; r < replays && !s; ++r) {
    if (tprt_rank_index(rank) != 0) emu__call(tprt__r.stream, slow_kernel, malloc(1));  // rank 0 launches
    for (int k = 0; k < NUM_CASES && !s; ++k) {
      slot_t* sl = &slots[k];
      size_t bytes = tprt_tensor_bytes(&sl->in);
      if (sl->got && (cudaMemsetAsync(result_of(sl), 0xEE, tprt_tensor_bytes(&sl->out), tprt__r.stream) != cudaSuccess ||
                      cudaMemcpyAsync(sl->dev_stage, sl->dev_src, bytes, cudaMemcpyDeviceToDevice, tprt__r.stream) !=
                          cudaSuccess))
        s = tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: the replay's copies failed", k);
    }
    if (!s) s = b->graph_launch(graph);
    if (!s) s = b->synchronize();
    for (int k = 0; k < NUM_CASES && !s; ++k) {
      slot_t* sl = &slots[k];
      if (!sl->got) continue;
      size_t bytes = tprt_tensor_bytes(&sl->out);
      s = b->to_host(sl->got, result_of(sl), bytes);
      for (size_t i = 0; i < bytes && !s; ++i)
        if (((const unsigned char*)sl->got)[i] != ((const unsigned char*)sl->out.data)[i])
          s = tprt_make_status(TPRT_STATUS_INTERNAL,
                               "replay %d of the graph: case %d: byte %zu of %zu differs from the CPU collective's", r,
                               k, i, bytes);
      if (!s && cudaMemsetAsync(sl->dev_stage, 0xEE, tprt_tensor_bytes(&sl->in), tprt__r.stream) != cudaSuccess)
        s = tprt_make_status(TPRT_STATUS_INTERNAL, "case %d: clobbering the staged input failed", k);
    }
  }
  if (s) tprt_rank_fail(rank, tprt_make_status(tprt_status_code(s), "%s", tprt_status_message(s)));  // before the destroy's rendezvous
  if (graph) b->graph_destroy(graph);
  return s;
}

// The rank function of the share and fault modes.
static tprt_status_t check_rank(tprt_rank_t* rank, void* user) {
  int run = *(const int*)user;
  const tprt_backend_t* b = tprt_backend_cuda();
  TPRT_RETURN_IF_ERROR(b->rank_begin(rank), "rank_begin");
  slot_t slots[NUM_CASES];
  memset(slots, 0, sizeof slots);
  tprt_status_t s = run_cases(b, rank, slots);
  if (!s) {
    enum { REPLAYS = 3 };
    s = run_graph(b, rank, slots, REPLAYS);
    int cases = 0;
    for (int k = 0; k < NUM_CASES; ++k) cases += slots[k].got != NULL;
    if (!s && tprt_rank_index(rank) == 0 && run == 0)
      printf("graph: %d replays of one world graph of %d collectives on %d ranks: the CPU collectives' bits\n", REPLAYS,
             cases, tprt_rank_world_size(rank));
  }
  if (s) {  // end the world now, as tpc-run does, so that no peer waits for this rank's cleanup
    tprt_rank_fail(rank, s);
    s = NULL;
  }
  for (int k = 0; k < NUM_CASES; ++k) {
    if (slots[k].future) tprt_status_ignore(b->wait(rank, slots[k].future));
    if (slots[k].dev_result) b->free(slots[k].dev_result);
    if (slots[k].dev_out != slots[k].dev_in) b->free(slots[k].dev_out);
    b->free(slots[k].dev_in);
    b->free(slots[k].dev_src);
    b->free(slots[k].dev_stage);
    free(slots[k].in.data);
    free(slots[k].out.data);
    free(slots[k].got);
  }
  b->rank_end(rank);
  return s;
}

static tprt_status_t begin_only(tprt_rank_t* rank, void* user) {
  (void)user;
  const tprt_backend_t* b = tprt_backend_cuda();
  TPRT__TRY(b->rank_begin(rank));
  b->rank_end(rank);
  return NULL;
}

// The rank function of the room mode.
static tprt_status_t room_rank(tprt_rank_t* rank, void* user) {
  (void)user;
  const tprt_backend_t* b = tprt_backend_cuda();
  TPRT__TRY(b->rank_begin(rank));
  void* p = NULL;
  tprt_status_t big = b->alloc((size_t)1 << 50, &p);  // 1 PiB
  tprt_status_t s = NULL;
  if (!big || tprt_status_code(big) != TPRT_STATUS_RESOURCE_EXHAUSTED || p)
    s = tprt_make_status(TPRT_STATUS_INTERNAL, "a 1 PiB allocation did not fail as out of memory");
  else if (tprt_rank_index(rank) == 0)
    printf("room: %s\n", tprt_status_message(big));
  tprt_status_free(big);
  if (!s) s = b->alloc(1 << 20, &p);
  if (p) b->free(p);
  b->rank_end(rank);
  return s;
}

// The fused mode (TPRT_CUDA_FUSED_NORM=1): tp.fused_allreduce_add_rmsnorm through the backend's
// fused_norm hook, over the tp groups (4 ranks) and the whole world (8), T x H shapes that grow (so
// that the groups register again) and rows that wrap around the grid, bf16 and f32 partials and
// residuals, canonical and increasing order, the sum kept in f32 or rounded to the residual's
// dtype (round_sum, sum_type = "residual"): every output the CPU composition's bits (its
// all-reduce into f32, or into the residual's dtype, the add rounded once, the rmsnorm).
typedef struct {
  uint32_t mask;
  int64_t t, h;
  int dp, dr;
  tprt_order_t order;
  bool round_sum;
  int quant;  // 0: none; 1 + TPRT_FORMAT_*: the quantizing form, normed rowwise (fp8 and nvfp4 with an amax)
} fused_case_t;

static const fused_case_t kFused[] = {
    {2, 1, 24, BF16, BF16, CANON, false, 0}, {3, 5, 24, F32, BF16, CANON, true, 0},   {2, 7, 300, BF16, F32, ANY, false, 0},
    {3, 16, 40, F32, F32, ANY, false, 0},    {2, 9, 300, F32, BF16, ANY, true, 0},    {3, 16, 64, BF16, BF16, CANON, true, 1 + TPRT_FORMAT_MXFP8},
    {2, 3, 24, BF16, BF16, CANON, false, 0}, {2, 4, 32, F32, BF16, CANON, false, 1 + TPRT_FORMAT_NVFP4},
    {3, 6, 25, F32, BF16, CANON, false, 0},  // odd rows: half-word padding
    // The fused-fault mode's call: its copies to the host, queued behind the kernel that waits for the
    // absent rank, must have run before the error returns (their buffers are freed then).
    {3, 2, 64, BF16, F32, ANY, false, 1 + TPRT_FORMAT_FP8_E4M3},
};
enum { NUM_FUSED = sizeof kFused / sizeof kFused[0] };

// The fused-fault mode: world rank 1 computes the reference of the last call (one that needs no
// new registration, whose rendezvous would catch the absence first) but never makes the call; it
// fails 0.2 s later, once its peers' kernels wait for it. Their waits must end with the world's
// abort (the abort word the kernel polls), not hang.
static bool g_absent;
// The fused norm's algorithm in every call (fused-one-shot, fused-composition; else auto); fused-two-shot
// alternates two-shot and one-shot (two-shot on even calls in even runs, odd calls in odd runs), so
// each form follows the other and every case runs in both.
static tprt_fused_algorithm_t g_algorithm = TPRT_ALGORITHM_AUTO;
static bool g_alternate;

// The hook's call for case |c| (device operands given), with its quantization where the case has
// one: the hook's data, scales and global scale must then equal the CPU's quantize of |want_y|, the
// composition's normed (the amax operand 2.5).
static tprt_status_t fused_quant_call(const tprt_backend_t* b, tprt_rank_t* rank, const fused_case_t* c,
                                      const tprt_tensor_t* want_y, const tprt_tensor_t* dpt, const tprt_tensor_t* drt,
                                      const tprt_tensor_t* dgt, tprt_tensor_t* dyt, tprt_tensor_t* dot,
                                      tprt_fused_algorithm_t algorithm, bool* done) {
  if (!c->quant)
    return b->fused_norm(rank, c->mask, dpt, drt, dgt, dyt, dot, 1e-5f, c->order, algorithm, c->round_sum, NULL, done);
  const int f = c->quant - 1, bs = f == TPRT_FORMAT_MXFP8 ? 32 : f == TPRT_FORMAT_NVFP4 ? 16 : 0;
  const int64_t dims[2] = {c->t, c->h}, sdims[2] = {(c->t + 127) / 128 * 128, bs ? (c->h / bs + 3) / 4 * 4 : 1},
                one[1] = {1};
  const int data_dtype = f == TPRT_FORMAT_NVFP4 ? TPRT_DTYPE_F4E2M1FN : TPRT_DTYPE_F8E4M3FN;
  const int scale_dtype = f == TPRT_FORMAT_MXFP8 ? TPRT_DTYPE_F8E8M0FNU : f == TPRT_FORMAT_NVFP4 ? TPRT_DTYPE_F8E4M3FN : F32;
  tprt_tensor_t t[2][3];  // [want, device][data, scale, global]
  float amax_value = 2.5f;
  void* dev_amax = NULL;
  tprt_status_t s = b->alloc(4, &dev_amax);
  if (!s) s = b->to_device(dev_amax, &amax_value, 4);
  for (int d = 0; d < 2; ++d) {
    t[d][0] = tprt_tensor_make(NULL, data_dtype, 2, dims);
    t[d][1] = bs ? tprt_tensor_make(NULL, scale_dtype, 2, sdims) : tprt_tensor_make(NULL, F32, 1, one);
    t[d][2] = tprt_tensor_make(NULL, F32, 1, one);
    for (int k = 0; k < 3; ++k) {
      size_t bytes = tprt_tensor_bytes(&t[d][k]);
      if (s) break;
      if (d == 0 && !(t[d][k].data = calloc(1, bytes))) s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
      if (d == 1) s = b->alloc(bytes, &t[d][k].data);
    }
  }
  tprt_tensor_t host_amax = tprt_tensor_make(&amax_value, F32, 1, one), dev_amax_t = tprt_tensor_make(dev_amax, F32, 1, one);
  bool global = f == TPRT_FORMAT_NVFP4, with_amax = f != TPRT_FORMAT_MXFP8;
  if (!s)
    s = tprt_cpu_quantize_with_amax(want_y, with_amax ? &host_amax : NULL, &t[0][0], &t[0][1], global ? &t[0][2] : NULL,
                                    f, TPRT_QUANT_ROWWISE);
  tprt_fused_quant_t q = {f, with_amax ? &dev_amax_t : NULL, &t[1][0], &t[1][1], global ? &t[1][2] : NULL};
  if (!s) s = b->fused_norm(rank, c->mask, dpt, drt, dgt, dyt, dot, 1e-5f, c->order, algorithm, c->round_sum, &q, done);
  for (int k = 0; k < (global ? 3 : 2) && !s && *done; ++k) {
    size_t bytes = tprt_tensor_bytes(&t[0][k]);
    void* got = malloc(bytes);
    s = got ? b->to_host(got, t[1][k].data, bytes) : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
    if (!s && memcmp(got, t[0][k].data, bytes) != 0)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "fused case with %s: the %s differ from the CPU quantize's",
                           tprt_dtype_name(data_dtype), k == 0 ? "data" : k == 1 ? "scales" : "global scales");
    free(got);
  }
  for (int k = 0; k < 3; ++k) {
    free(t[0][k].data);
    if (t[1][k].data) b->free(t[1][k].data);
  }
  if (dev_amax) b->free(dev_amax);
  return s;
}

static tprt_status_t fused_case(const tprt_backend_t* b, tprt_rank_t* rank, const fused_case_t* c, int which,
                                int run) {
  int64_t dims[2] = {c->t, c->h}, gd[1] = {c->h}, n = c->t * c->h;
  size_t pb = (size_t)tprt_dtype_bytes(c->dp, n), rb = (size_t)tprt_dtype_bytes(c->dr, n), gb = (size_t)c->h * 2;
  void *hp = malloc(pb), *hr = malloc(rb), *hg = malloc(gb), *sum = malloc((size_t)n * 4), *want_o = malloc(rb),
       *want_y = malloc(rb), *got = malloc(rb);
  void *dp = NULL, *dr = NULL, *dg = NULL, *dy = NULL, *dout = NULL;
  tprt_status_t s = NULL;
  if (!hp || !hr || !hg || !sum || !want_o || !want_y || !got)
    s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  tprt_tensor_t p = tprt_tensor_make(hp, c->dp, 2, dims), r = tprt_tensor_make(hr, c->dr, 2, dims),
                gm = tprt_tensor_make(hg, BF16, 1, gd), sm = tprt_tensor_make(sum, F32, 2, dims),
                o = tprt_tensor_make(want_o, c->dr, 2, dims), y = tprt_tensor_make(want_y, c->dr, 2, dims);
  if (!s) {
    fill(&p, tprt_rank_index(rank), 40 + which);
    fill(&r, tprt_rank_index(rank) / 4, 60 + which);  // differs between the dp halves
    fill(&gm, 0, 80 + which);
    // round_sum: the all-reduce writes the residual's dtype (sum's first bytes), as the op's
    // composition does.
    if (c->round_sum) sm = tprt_tensor_make(sum, c->dr, 2, dims);
    s = tprt_all_reduce(rank, c->mask, &p, &sm, c->order);
  }
  if (!s) s = tprt_cpu_add(&sm, &r, &o);
  if (!s) s = tprt_cpu_rmsnorm(&o, &gm, &y, 1e-5f);
  if (!s) s = b->alloc(pb, &dp);
  if (!s) s = b->alloc(rb, &dr);
  if (!s) s = b->alloc(gb, &dg);
  if (!s) s = b->alloc(rb, &dy);
  if (!s) s = b->alloc(rb, &dout);
  if (!s) s = b->to_device(dp, hp, pb);
  if (!s) s = b->to_device(dr, hr, rb);
  if (!s) s = b->to_device(dg, hg, gb);
  bool done = false;
  if (!s && g_absent && which == NUM_FUSED - 1 && tprt_rank_index(rank) == 1) {  // the fused-fault mode
    struct timespec d = {0, 200000000};
    nanosleep(&d, NULL);
    s = tprt_make_status(TPRT_STATUS_INTERNAL, "rank 1 stayed away from fused call %d", which);
  }
  if (!s) {
    tprt_tensor_t dpt = tprt_tensor_make(dp, c->dp, 2, dims), drt = tprt_tensor_make(dr, c->dr, 2, dims),
                  dgt = tprt_tensor_make(dg, BF16, 1, gd), dyt = tprt_tensor_make(dy, c->dr, 2, dims),
                  dot = tprt_tensor_make(dout, c->dr, 2, dims);
    tprt_fused_algorithm_t algorithm =
        g_alternate ? ((which + run) % 2 ? TPRT_ALGORITHM_ONE_SHOT : TPRT_ALGORITHM_TWO_SHOT) : g_algorithm;
    s = fused_quant_call(b, rank, c, &y, &dpt, &drt, &dgt, &dyt, &dot, algorithm, &done);
  }
  bool composition = g_algorithm == TPRT_ALGORITHM_COMPOSITION;
  if (!s && composition && done)
    s = tprt_make_status(TPRT_STATUS_INTERNAL, "fused case %d: the fused_norm hook took a call whose algorithm is "
                         "composition", which);
  if (!s && !composition && !done) s = tprt_make_status(TPRT_STATUS_INTERNAL, "the fused_norm hook declined the call");
  for (int k = 1; k >= 0 && !s && !composition; --k) {
    s = b->to_host(got, k ? dout : dy, rb);
    if (!s && memcmp(got, k ? want_o : want_y, rb) != 0)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "fused case %d: %s differs from the CPU composition's", which,
                           k ? "residual_out" : "normed");
  }
  // Freed only once every member is done: a peer's kernel reads this rank's region, not these.
  void* dev[] = {dp, dr, dg, dy, dout};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; ++i)
    if (dev[i]) b->free(dev[i]);
  free(hp), free(hr), free(hg), free(sum), free(want_o), free(want_y), free(got);
  return s;
}

static tprt_status_t fused_rank(tprt_rank_t* rank, void* user) {
  const int run = user ? *(const int*)user : 0;
  const tprt_backend_t* b = tprt_backend_cuda();
  TPRT__TRY(b->rank_begin(rank));
  tprt_status_t s = NULL;
  for (int k = 0; k < NUM_FUSED && !s; ++k) s = fused_case(b, rank, &kFused[k], k, run);
  if (s) {
    tprt_rank_fail(rank, s);
    s = NULL;
  }
  b->rank_end(rank);
  return tprt_rank_check_abort(rank);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  bool refuse = !strcmp(mode, "refuse"), fault = !strcmp(mode, "fault"), room = !strcmp(mode, "room");
  bool one_shot = !strcmp(mode, "fused-one-shot"), composition = !strcmp(mode, "fused-composition");
  g_alternate = !strcmp(mode, "fused-two-shot");
  bool fused = !strcmp(mode, "fused") || !strcmp(mode, "fused-fault") || one_shot || composition || g_alternate;
  g_absent = !strcmp(mode, "fused-fault");
  g_algorithm = one_shot ? TPRT_ALGORITHM_ONE_SHOT : composition ? TPRT_ALGORITHM_COMPOSITION : TPRT_ALGORITHM_AUTO;
  g_async_only = !strcmp(mode, "ce");
  if (!refuse && !fault && !room && !fused && !g_async_only && strcmp(mode, "share") != 0) {
    fprintf(stderr, "usage: tprt-cuda-local-check "
                    "share|ce|fused|fused-fault|fused-one-shot|fused-two-shot|fused-composition|refuse|fault|room\n");
    return 2;
  }
  tprt_world_options_t o;
  memset(&o, 0, sizeof o);
  o.num_axes = 2;
  o.axes[0] = (tprt_mesh_axis_t){"dp", 2};
  o.axes[1] = (tprt_mesh_axis_t){"tp", 4};
  o.collective_timeout_s = 60;
  int runs = argc > 2 ? atoi(argv[2]) : 1;
  tprt_world_t* world = NULL;
  tprt_status_t s = tprt_world_create(&o, tprt_allocator_system(), &world);
  for (int run = 0; !s && run < runs; ++run)
    s = tprt_world_run(world, refuse ? begin_only : room ? room_rank : fused ? fused_rank : check_rank, &run);
  tprt_world_destroy(world);
  int devices = 0;
  cudaGetDeviceCount(&devices);
  int rc = 0;
  if (room) {
    if (s) printf("room: FAIL: %s\n", tprt_status_message(s));
    rc = s ? 1 : 0;
  } else if (fault || refuse) {  // the run must fail, with the message the lit test checks
    printf("%s: %s\n", mode, s ? tprt_status_message(s) : "the run succeeded");
    rc = s ? 0 : 1;
  } else if (s) {
    printf("%s: FAIL on %d GPU(s): %s\n", mode, devices, tprt_status_message(s));
    rc = 1;
  } else if (composition) {
    // Every call declined: the ABI would run the composition; no fused kernel ran.
    printf("%s: %d runs of %d calls on 8 ranks on %d GPU(s): the hook declined every one, %d fused kernel "
           "launches\n",
           mode, runs, NUM_FUSED, devices, emu__fused_launches());
    rc = emu__fused_launches() == 0 ? 0 : 1;
  } else if (fused) {
    printf("%s: %d runs of %d fused all-reduce + add + rmsnorm calls on 8 ranks on %d GPU(s): the CPU "
           "composition's bits, %d fused kernel launches\n",
           mode, runs, NUM_FUSED, devices, emu__fused_launches());
  } else if (g_async_only) {
    int n = 0;
    for (int k = 0; k < NUM_CASES; ++k) n += kCases[k].async;
    printf(
        "ce: %d runs of %d async collectives on 8 ranks on %d GPU(s) over copy engines: the CPU collectives' "
        "bits\n",
        runs, n, devices);
  } else {
    printf("share: %d runs of %d collectives on 8 ranks sharing %d GPU(s): the CPU collectives' bits\n", runs,
           NUM_CASES, devices);
  }
  tprt_status_free(s);
  return rc;
}
