// The CUDA backend's graphs (backend_cuda.c describes the backend): the graph_begin, graph_end,
// graph_launch and graph_destroy hooks of its table, each rank capturing its own compute stream,
// or the ranks of a world whose streams wait on each other's events capturing one graph together.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend_cuda_impl.h"
#include "tprt_cuda_status.h"

//===----------------------------------------------------------------------===//
// CUDA graphs
//===----------------------------------------------------------------------===//
// A rank whose collectives are NCCL calls captures its own compute stream into a graph of its own.
// Ranks whose streams wait on each other's events (ranks sharing a GPU, copy-engine collectives)
// cannot be captured apart (an edge between two captures is refused), so such a world of threads
// captures one graph, the world graph:
//   - begin: rank 0's compute stream begins the capture and records `fork`; every other rank's
//     compute stream waits on it, which joins it to the capture (its comm stream joins through its
//     own forks, as under a per-rank capture); the step's event waits between ranks become edges;
//   - end: every other rank records `join` on its stream, rank 0's stream waits on them all and
//     ends the capture (the graph holds every rank's step, on every rank's GPU);
//   - launch, a rendezvous of the world's threads: each rank records `before` after its earlier
//     work; rank 0's stream waits on every `before`, launches the graph and records `after`, which
//     every other rank's stream waits on: each rank's stream sees the whole step behind it;
//   - temporaries: the kernels' stream-ordered ones are served from one buffer per rank and stream,
//     sized by the steps before (tprt__cuda_temps_serve), not made graph memory nodes, whose
//     replays faulted when captured on several ranks' streams of one GPU.
// The events are exchanged once, at begin, through the CPU world.

enum { TPRT__GE_FORK, TPRT__GE_JOIN, TPRT__GE_BEFORE, TPRT__GE_AFTER, TPRT__GE_COUNT };

typedef struct {
  cudaGraphExec_t exec;  // a rank's own graph, or rank 0's world graph (NULL on its other ranks)
  bool world;
  int size, index;       // the world's ranks, this rank's index
  uint32_t mask;         // every axis of the mesh
  cudaEvent_t own[TPRT__GE_COUNT];  // this rank's events (fork and after: rank 0's only)
  cudaEvent_t* all;                 // [size][TPRT__GE_COUNT]: every rank's, as exchanged
  void* temps[2];                   // the step's temporaries on the compute and comm streams
  int* arrived;                     // rank 0's count of the other ranks done with the captured step
} tprt__cuda_graph_t;

// The graph being captured on this rank's thread (between graph_begin and graph_end).
static _Thread_local tprt__cuda_graph_t* tprt__capture;

static void tprt__graph_free(tprt__cuda_graph_t* g, bool events) {
  if (!g) return;
  if (g->exec) cudaGraphExecDestroy(g->exec);
  for (int i = 0; events && i < TPRT__GE_COUNT; ++i)
    if (g->own[i]) cudaEventDestroy(g->own[i]);
  for (int i = 0; events && i < 2; ++i)
    if (g->temps[i]) cudaFree(g->temps[i]);
  free(g->all);
  free(g);
}

// Whether the calling rank captures into the world graph: a world of threads of several ranks
// whose streams wait on each other's events.
static bool tprt__world_graph(void) {
  return (tprt__r.shared || tprt__r.ce) && tprt_rank_world_size(tprt__r.rank) > 1;
}

// The streams' temporaries go back to the pool (the graph keeps its buffers for its replays).
static void tprt__world_graph_temps_end(void) {
  tprt__cuda_temps_serve(tprt__r.stream, NULL, 0);
  if (tprt__r.comm_stream) tprt__cuda_temps_serve(tprt__r.comm_stream, NULL, 0);
}

static void tprt__world_graph_arrive(tprt__cuda_graph_t* g);

static tprt_status_t tprt__world_graph_begin(tprt__cuda_graph_t* g) {
  tprt_rank_t* rank = tprt__r.rank;
  g->world = true;
  g->size = tprt_rank_world_size(rank);
  g->index = tprt_rank_index(rank);
  g->mask = (uint32_t)((1ull << tprt_world_num_axes(tprt_rank_world(rank))) - 1);
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < TPRT__GE_COUNT && e == cudaSuccess; ++i)
    if (g->index == 0 || (i != TPRT__GE_FORK && i != TPRT__GE_AFTER))
      e = cudaEventCreateWithFlags(&g->own[i], cudaEventDisableTiming);
  // The kernels' temporaries, placed in buffers of the step before's size instead of graph memory
  // nodes (tprt__cuda_temps_serve): allocation nodes captured on several ranks' streams of one GPU
  // made replays fault (cudaErrorIllegalAddress in a kernel writing its temporary, on one H200).
  cudaStream_t streams[2] = {tprt__r.stream, tprt__r.comm_stream};
  for (int i = 0; i < 2 && e == cudaSuccess; ++i) {
    size_t peak = streams[i] ? tprt__cuda_temps_peak(streams[i]) : 0;
    if (peak) e = cudaMalloc(&g->temps[i], peak);
    if (e == cudaSuccess && peak) tprt__cuda_temps_serve(streams[i], g->temps[i], peak);
  }
  // Every rank has finished its work before the capture (a global capture makes another thread's
  // synchronization fail while it lasts).
  tprt_status_t s = tprt_barrier(rank, g->mask);
  if (s) return s;
  bool began = false;
  if (e == cudaSuccess && g->index == 0) {
    // Global: every rank thread's calls that a capture cannot hold (allocation, synchronization,
    // host copies from pageable memory) fail while it lasts, instead of escaping it.
    e = cudaStreamBeginCapture(tprt__r.stream, cudaStreamCaptureModeGlobal);
    began = e == cudaSuccess;
    if (began) e = cudaEventRecord(g->own[TPRT__GE_FORK], tprt__r.stream);
  }
  // Every rank's events, with word 0 of a rank: whether it is ready (rank 0: the capture began),
  // and last rank 0's arrival count (graph_end).
  enum { W = 2 + TPRT__GE_COUNT };
  if (g->index == 0) g->arrived = calloc(1, sizeof *g->arrived);
  int64_t mine[W] = {e == cudaSuccess && (g->index != 0 || g->arrived)};
  for (int i = 0; i < TPRT__GE_COUNT; ++i) mine[1 + i] = (int64_t)(intptr_t)g->own[i];
  mine[W - 1] = (int64_t)(intptr_t)g->arrived;
  int64_t* words = malloc((size_t)g->size * sizeof mine);
  g->all = malloc((size_t)g->size * TPRT__GE_COUNT * sizeof *g->all);
  s = words && g->all ? NULL : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "graph_begin: out of memory");
  if (!s) s = tprt__exchange_words(rank, g->mask, mine, W, words);
  bool ready = true;
  for (int r = 0; !s && r < g->size; ++r) {
    ready &= words[r * W] != 0;
    for (int i = 0; i < TPRT__GE_COUNT; ++i) g->all[r * TPRT__GE_COUNT + i] = (cudaEvent_t)(intptr_t)words[r * W + 1 + i];
  }
  if (!s && g->index != 0) g->arrived = (int*)(intptr_t)words[W - 1];
  free(words);
  if (!s && e != cudaSuccess)
    s = tprt__cuda_make_status(e, "beginning the world's CUDA graph capture", __FILE__, __LINE__);
  if (!s && !ready)
    s = tprt_make_status(TPRT_STATUS_ABORTED, "--graph: another rank could not begin the world's CUDA graph capture");
  if (!s && g->index != 0) {
    e = cudaStreamWaitEvent(tprt__r.stream, g->all[TPRT__GE_FORK], 0);  // rank 0's fork: joins the capture
    if (e != cudaSuccess) s = tprt__cuda_make_status(e, "joining the world's CUDA graph capture", __FILE__, __LINE__);
  }
  if (s && began) {
    cudaGraph_t graph = NULL;
    if (cudaStreamEndCapture(tprt__r.stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
  // A rank that could not join adds nothing to the capture: counted in for rank 0's graph_end.
  if (s && g->index != 0) tprt__world_graph_arrive(g);
  return s;
}

tprt_status_t tprt__cuda_graph_begin(void) {
  TPRT__TRY(tprt__need_rank());
  if (tprt__capture)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "graph_begin: a capture is already in progress");
  tprt__cuda_graph_t* g = calloc(1, sizeof *g);
  if (!g) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "graph_begin: out of memory");
  tprt_status_t s = NULL;
  if (tprt__world_graph()) {
    s = tprt__world_graph_begin(g);
  } else {
    cudaError_t e = cudaStreamBeginCapture(tprt__r.stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) s = tprt__cuda_make_status(e, "cudaStreamBeginCapture", __FILE__, __LINE__);
  }
  if (s) {
    // A failed world begin may leave events that peers were told of: left to the process's end.
    if (g->world) tprt__world_graph_temps_end();
    tprt__graph_free(g, !g->world);
    return s;
  }
  tprt__capture = g;
  tprt__r.capturing = true;
  return NULL;
}

// TPRT_CUDA_GRAPH_DOT=PREFIX: the captured graph, every node with its parameters, written to
// PREFIX<rank>.dot (cudaGraphDebugDotPrint), for a look at its edges; a world graph is rank 0's.
static void tprt__graph_dot(cudaGraph_t graph) {
  const char* prefix = getenv("TPRT_CUDA_GRAPH_DOT");
  if (!prefix || !*prefix) return;
  char path[4096];
  snprintf(path, sizeof path, "%s%d.dot", prefix, tprt_rank_index(tprt__r.rank));
  if (cudaGraphDebugDotPrint(graph, path, cudaGraphDebugDotFlagsVerbose) != cudaSuccess) {
    (void)cudaGetLastError();
    fprintf(stderr, "tprt cuda: TPRT_CUDA_GRAPH_DOT: could not write %s\n", path);
  }
}

// Waits (up to 30 s) until rank 0 has ended the world's capture, which this rank's streams joined:
// until then they may not be synchronized or given more work. Rank 0 ends it in its graph_end
// whatever happened; after a failure this rank may get here first.
static void tprt__await_capture_end(void) {
  for (int i = 0; i < 300000; ++i) {
    enum cudaStreamCaptureStatus a = cudaStreamCaptureStatusNone, b = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(tprt__r.stream, &a) != cudaSuccess ||
        cudaStreamIsCapturing(tprt__r.comm_stream, &b) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (a == cudaStreamCaptureStatusNone && b == cudaStreamCaptureStatusNone) return;
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
  }
}

// Rank 0 ends the capture only once every other rank has stopped adding work to it, in a failed
// world too (whose rendezvous return at once): a stream that another thread is still capturing
// into while the capture ends crashed or hung on an H200. Each other rank counts itself in after
// its join; rank 0 waits for the count (up to 300 s, then ends the capture anyway).
static void tprt__world_graph_arrive(tprt__cuda_graph_t* g) {
  if (!g->arrived) return;
  if (g->index != 0) {
    __atomic_add_fetch(g->arrived, 1, __ATOMIC_RELEASE);
    return;
  }
  for (long i = 0; __atomic_load_n(g->arrived, __ATOMIC_ACQUIRE) < g->size - 1; ++i) {
    if (i == 3000000) {
      fprintf(stderr, "tprt cuda: --graph: after 300 s %d of %d ranks have ended their captured step; ending the "
                      "capture without the others\n", __atomic_load_n(g->arrived, __ATOMIC_ACQUIRE) + 1, g->size);
      g->arrived = NULL;  // a late rank may still count itself in: left to the process's end
      return;
    }
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
  }
  free(g->arrived);
  g->arrived = NULL;
}

static tprt_status_t tprt__world_graph_end(tprt__cuda_graph_t* g) {
  cudaError_t e = cudaSuccess;
  if (g->index != 0) e = cudaEventRecord(g->own[TPRT__GE_JOIN], tprt__r.stream);
  tprt__world_graph_arrive(g);
  int64_t mine = e == cudaSuccess, *ok = malloc((size_t)g->size * sizeof *ok);
  tprt_status_t s = ok ? NULL : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "graph_end: out of memory");
  // Every rank has queued its step and its join (or failed: then the world is aborted).
  if (!s) s = tprt__exchange_words(tprt__r.rank, g->mask, &mine, 1, ok);
  bool joined = !s;
  for (int r = 0; joined && r < g->size; ++r) joined = ok[r] != 0;
  if (g->index == 0) {  // the capture ends whatever happened, so that the stream leaves it
    for (int r = 1; joined && r < g->size && e == cudaSuccess; ++r)
      e = cudaStreamWaitEvent(tprt__r.stream, g->all[r * TPRT__GE_COUNT + TPRT__GE_JOIN], 0);
    cudaGraph_t graph = NULL;
    cudaError_t ended = cudaStreamEndCapture(tprt__r.stream, &graph);
    if (e == cudaSuccess) e = ended;
    if (e == cudaSuccess) tprt__graph_dot(graph);
    if (e == cudaSuccess && joined) e = cudaGraphInstantiate(&g->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) (void)cudaGetLastError();
  }
  // Rank 0 tells the others whether the graph was made (they stay in the capture until it ends).
  int64_t made = g->index == 0 ? (e == cudaSuccess && g->exec != NULL) : 1;
  if (!s) s = tprt__exchange_words(tprt__r.rank, g->mask, &made, 1, ok);
  if (!s && e != cudaSuccess)
    s = tprt__cuda_make_status(e, g->index == 0 ? "ending the world's CUDA graph capture" : "cudaEventRecord (a join)",
                               __FILE__, __LINE__);
  if (!s && !joined) s = tprt_make_status(TPRT_STATUS_ABORTED, "--graph: another rank failed its captured step");
  if (!s && !ok[0]) s = tprt_make_status(TPRT_STATUS_ABORTED, "--graph: rank 0 could not make the world's CUDA graph");
  free(ok);
  if (g->index != 0) tprt__await_capture_end();
  return s;
}

tprt_status_t tprt__cuda_graph_end(void** out_graph) {
  *out_graph = NULL;
  TPRT__TRY(tprt__need_rank());
  tprt__cuda_graph_t* g = tprt__capture;
  if (!g) return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "graph_end without graph_begin");
  tprt__capture = NULL;
  tprt__r.capturing = false;
  tprt_status_t s = NULL;
  if (g->world) {
    tprt__world_graph_temps_end();
    s = tprt__world_graph_end(g);
  } else {
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(tprt__r.stream, &graph);
    if (e == cudaSuccess) tprt__graph_dot(graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&g->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) s = tprt__cuda_make_status(e, "ending the CUDA graph capture", __FILE__, __LINE__);
  }
  if (s) {
    tprt__graph_free(g, !g->world);
    return s;
  }
  *out_graph = g;
  return NULL;
}

tprt_status_t tprt__cuda_graph_launch(void* graph) {
  tprt__cuda_graph_t* g = graph;
  if (!g) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "graph_launch: no graph");
  if (!g->world) {
    TPRT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(g->exec, tprt__r.stream));
    return NULL;
  }
  TPRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(g->own[TPRT__GE_BEFORE], tprt__r.stream));
  TPRT__TRY(tprt_barrier(tprt__r.rank, g->mask));  // every rank's `before` is recorded
  if (g->index == 0) {
    for (int r = 1; r < g->size; ++r)
      TPRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(tprt__r.stream, g->all[r * TPRT__GE_COUNT + TPRT__GE_BEFORE], 0));
    TPRT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(g->exec, tprt__r.stream));
    TPRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(g->own[TPRT__GE_AFTER], tprt__r.stream));
  }
  TPRT__TRY(tprt_barrier(tprt__r.rank, g->mask));  // rank 0 has launched the graph and recorded `after`
  if (g->index != 0) TPRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(tprt__r.stream, g->all[TPRT__GE_AFTER], 0));
  return NULL;
}

void tprt__cuda_graph_destroy(void* graph) {
  tprt__cuda_graph_t* g = graph;
  if (!g) return;
  if (!g->world) {
    tprt__graph_free(g, true);
    return;
  }
  // Peers name this rank's events in their waits: destroyed once every rank has queued its last
  // wait (a barrier); after a failure a peer may never arrive, and the events are left to the
  // process's end.
  tprt_status_t failed = tprt_rank_check_abort(tprt__r.rank);
  if (!failed) failed = tprt_barrier(tprt__r.rank, g->mask);
  tprt__graph_free(g, failed == NULL);
  tprt_status_free(failed);
}
