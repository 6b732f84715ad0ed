// A host emulation of the part of the CUDA runtime that the CUDA backend's collectives use (the
// kernels they launch, the summing, maximum, copy and fused norm kernels, are in
// cuda_emulator_kernels.c), so that backend_cuda.c, backend_cuda_graph.c, backend_cuda_nccl.c,
// backend_cuda_local.c and backend_cuda_fused.c can be checked on a machine without a GPU
// (cuda_local_check.c).
//
// Streams are worker threads that run their queue in order, each op after a random delay of up
// to 50 us, so work on different streams interleaves differently on every run. Events follow
// CUDA's semantics: cudaEventRecord queues a marker that completes when the stream reaches it;
// cudaStreamWaitEvent makes the stream wait for the event's latest record at the time of the
// call (none: no wait). "Device memory" is host memory from malloc, filled with 0xA5 garbage and
// tagged with the current device. The emulator reports, and fails the process for, what a GPU
// would get wrong or fault on silently: a copy (or kernel) touching device memory that is not
// allocated at the moment it runs (use after free), a same-device copy between GPUs or a peer copy
// whose pointers are not on the devices named, an event recorded on another device's stream, and
// any use of a destroyed event. NCCL must never be called (every NCCL entry point fails).
//
// Knobs: TPRT_EMU_DEVICES (the GPU count, default 1).
//
// This file holds the streams, events and CUDA graphs; cuda_emulator_memory.c the device memory,
// copies, devices and errors, and the entry points that must not be reached (NCCL, kernels the
// emulator does not run).
#define _POSIX_C_SOURCE 200809L  // nanosleep, rand_r
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda_impl.h"
#include "cuda_emulator.h"

//===----------------------------------------------------------------------===//
// Events and streams
//===----------------------------------------------------------------------===//

struct CUevent_st {
  emu__token_t* latest;
  int device;
  bool destroyed;
};

// Event completion: one lock and condition for every event of the process.
static pthread_mutex_t emu__event_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t emu__event_cv = PTHREAD_COND_INITIALIZER;
static emu__token_t* emu__tokens;  // every record, freed at exit

// A random delay: mostly under 50 us, one time in 16 a straggler of up to 1.5 ms.
static void emu__delay(unsigned* seed) {
  unsigned r = (unsigned)rand_r(seed);
  long us = r % 16 == 0 ? 500 + (long)(r / 16 % 1000) : (long)(r / 16 % 50);
  struct timespec delay = {0, us * 1000};
  nanosleep(&delay, NULL);
}

static void emu__run(struct CUstream_st* s, emu__op_t* op) {
  emu__delay(&s->seed);
  switch (op->kind) {
    case EMU__COPY:
      emu__check(op->dst, op->bytes, op->dst_device, "a copy writes memory that is not allocated");
      emu__check(op->src, op->bytes, op->src_device, "a copy reads memory that is not allocated");
      if (op->bytes) memmove(op->dst, op->src, op->bytes);
      break;
    case EMU__COPY_2D:
      for (size_t r = 0; r < op->height; ++r) {
        emu__check(op->dst + r * op->dpitch, op->width, op->dst_device, "a 2D copy writes memory that is not allocated");
        emu__check(op->src + r * op->spitch, op->width, op->src_device, "a 2D copy reads memory that is not allocated");
        if (op->width) memmove(op->dst + r * op->dpitch, op->src + r * op->spitch, op->width);
      }
      break;
    case EMU__SET:
      emu__check(op->dst, op->bytes, s->device, "a memset writes memory that is not allocated");
      memset(op->dst, op->value, op->bytes);
      break;
    case EMU__RECORD:
      pthread_mutex_lock(&emu__event_mu);
      op->token->done = true;
      pthread_cond_broadcast(&emu__event_cv);
      pthread_mutex_unlock(&emu__event_mu);
      break;
    case EMU__WAIT:
      pthread_mutex_lock(&emu__event_mu);
      while (!op->token->done) pthread_cond_wait(&emu__event_cv, &emu__event_mu);
      pthread_mutex_unlock(&emu__event_mu);
      break;
    case EMU__CALL:
      op->fn(op->arg);
      if (!op->keep_arg) free(op->arg);
      break;
  }
}

static void* emu__worker(void* arg) {
  struct CUstream_st* s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->head) break;
    emu__op_t* op = s->head;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    emu__run(s, op);
    free(op);
    pthread_mutex_lock(&s->mu);
    --s->pending;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

// A random pause of the calling host thread, so that the rank threads' calls interleave
// differently on every run too.
static void emu__jitter(void) {
  static _Thread_local unsigned seed;
  if (!seed) seed = (unsigned)(uintptr_t)&seed | 1u;
  emu__delay(&seed);
}

static void emu__capture_op(struct CUgraph_st* g, const emu__op_t* op);
static void emu__join(struct CUstream_st* s, struct CUgraph_st* g);

// A graph launch queues its nodes in one host call (no pause between them).
static _Thread_local bool emu__launching;

cudaError_t emu__enqueue(cudaStream_t s, emu__op_t op) {
  if (!s) emu__fail("work queued on the legacy default stream", NULL);
  if (!emu__launching) emu__jitter();
  // Captured: a node of the graph, not run now. Under the event lock, which cudaStreamEndCapture
  // holds while it ends a capture (another thread's: rank 0's, in a world graph).
  pthread_mutex_lock(&emu__event_mu);
  struct CUgraph_st* g = s->capture;
  if (g) {
    op.stream = s;
    emu__capture_op(g, &op);
  }
  pthread_mutex_unlock(&emu__event_mu);
  if (g) return cudaSuccess;
  emu__op_t* o = malloc(sizeof *o);
  *o = op;
  o->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  ++s->pending;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return cudaSuccess;
}

static unsigned emu__seeds;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned int flags) {
  (void)flags;
  struct CUstream_st* s = calloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->device = emu__device;
  s->seed = __atomic_add_fetch(&emu__seeds, 7919u, __ATOMIC_RELAXED);
  pthread_create(&s->thread, NULL, emu__worker, s);
  *out = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* out, unsigned int flags, int priority) {
  (void)priority;
  return cudaStreamCreateWithFlags(out, flags);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -1;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s->capture) emu__fail("cudaStreamSynchronize of a stream in a graph capture", s);
  pthread_mutex_lock(&s->mu);
  while (s->pending) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  pthread_mutex_lock(&s->mu);
  int pending = s->pending;
  pthread_mutex_unlock(&s->mu);
  return pending ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  cudaStreamSynchronize(s);
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
  return cudaSuccess;
}

// Destroyed events stay allocated (so that a late use is reported, not undefined); freed at exit.
enum { EMU__MAX_EVENTS = 4096 };
static struct CUevent_st* emu__events[EMU__MAX_EVENTS];
static int emu__num_events;

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* out, unsigned int flags) {
  (void)flags;
  struct CUevent_st* e = calloc(1, sizeof *e);
  e->device = emu__device;
  pthread_mutex_lock(&emu__event_mu);
  if (emu__num_events == EMU__MAX_EVENTS) emu__fail("too many events", e);
  emu__events[emu__num_events++] = e;
  pthread_mutex_unlock(&emu__event_mu);
  *out = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

// The emulated streams keep no clock: every interval reads as 0 ms (TPRT_CUDA_TIMELINE prints zeros).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  (void)start, (void)end;
  *ms = 0.0f;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  pthread_mutex_lock(&emu__event_mu);
  if (e->destroyed) emu__fail("an event destroyed twice", e);
  e->destroyed = true;
  pthread_mutex_unlock(&emu__event_mu);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  emu__jitter();
  emu__token_t* t = calloc(1, sizeof *t);
  pthread_mutex_lock(&emu__event_mu);
  if (e->destroyed) emu__fail("cudaEventRecord of a destroyed event", e);
  if (e->device != s->device) emu__fail("cudaEventRecord of an event of another device than the stream's", e);
  t->graph = s->capture;  // read, and captured, under the lock cudaStreamEndCapture holds
  t->next = emu__tokens;
  emu__tokens = t;
  e->latest = t;
  if (t->graph) emu__capture_op(t->graph, &(emu__op_t){.kind = EMU__RECORD, .token = t, .stream = s});
  bool captured = t->graph != NULL;
  pthread_mutex_unlock(&emu__event_mu);
  return captured ? cudaSuccess : emu__enqueue(s, (emu__op_t){.kind = EMU__RECORD, .token = t});
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  (void)flags;
  emu__jitter();
  pthread_mutex_lock(&emu__event_mu);
  if (e->destroyed) emu__fail("cudaStreamWaitEvent on a destroyed event", e);
  emu__token_t* t = e->latest;
  // Stream capture: a wait on a captured record joins the waiting stream to that capture; a
  // capturing stream may not wait on work outside its capture (CUDA: cudaErrorStreamCaptureIsolation).
  // (A record made in a capture that has ended never completes outside its graph: an error, which a
  // correct step never meets; a failed world's ranks may, when rank 0 ends the capture while they
  // are still in their step.) Decided and captured under the event lock, which
  // cudaStreamEndCapture holds while it ends a capture, so that a wait never joins an ended capture
  // nor waits outside one on a record that never completes.
  cudaError_t err = cudaSuccess;
  bool captured = false;
  if (t && t->ended && !s->capture) err = cudaErrorInvalidResourceHandle;
  if (!err && t && t->graph && !s->capture) emu__join(s, t->graph);
  if (!err && s->capture && t && (t->graph != s->capture || t->ended)) err = cudaErrorStreamCaptureIsolation;
  if (!err && t && s->capture) {
    emu__capture_op(s->capture, &(emu__op_t){.kind = EMU__WAIT, .token = t, .stream = s});
    captured = true;
  }
  pthread_mutex_unlock(&emu__event_mu);
  if (err || !t || captured) return err;
  return emu__enqueue(s, (emu__op_t){.kind = EMU__WAIT, .token = t});
}

//===----------------------------------------------------------------------===//
// CUDA graphs
//===----------------------------------------------------------------------===//
// Stream capture: a capture begun on a stream records what is queued on it, and on every stream that
// joins it by waiting on an event recorded in it, as a list of ops in the order they were queued
// (the host order of the rank threads' calls). cudaStreamEndCapture requires every joined stream's
// last op (past its waits) to be a record that a later op of the capture waits on (CUDA:
// cudaErrorStreamCaptureUnjoined). A launch replays the ops on streams of the graph's own (one per
// captured stream, on its device; a graph's nodes do not wait on the captured streams' later work),
// each record a fresh one, after the launching stream's work so far; the launching stream then waits
// for all of them.

enum { EMU__GRAPH_STREAMS = 64 };

struct CUgraph_st {
  pthread_mutex_t mu;
  emu__op_t *head, *tail;
  struct CUstream_st* origin;
  struct CUstream_st* streams[EMU__GRAPH_STREAMS];  // [0] the origin, then the joined ones
  int num_streams;
};

struct CUgraphExec_st {
  emu__op_t* ops;
  struct CUstream_st* captured[EMU__GRAPH_STREAMS];
  struct CUstream_st* own[EMU__GRAPH_STREAMS];
  int num_streams;
};

static void emu__capture_op(struct CUgraph_st* g, const emu__op_t* op) {
  emu__op_t* o = malloc(sizeof *o);
  *o = *op;
  o->keep_arg = true;
  o->next = NULL;
  pthread_mutex_lock(&g->mu);
  if (g->tail)
    g->tail->next = o;
  else
    g->head = o;
  g->tail = o;
  pthread_mutex_unlock(&g->mu);
}

static void emu__join(struct CUstream_st* s, struct CUgraph_st* g) {
  pthread_mutex_lock(&g->mu);
  if (g->num_streams == EMU__GRAPH_STREAMS) emu__fail("too many streams in one capture", s);
  g->streams[g->num_streams++] = s;
  s->capture = g;
  pthread_mutex_unlock(&g->mu);
}

static void emu__free_ops(emu__op_t* o) {
  while (o) {
    emu__op_t* next = o->next;
    if (o->kind == EMU__CALL) free(o->arg);
    free(o);
    o = next;
  }
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* status) {
  *status = __atomic_load_n(&s->capture, __ATOMIC_ACQUIRE) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  (void)mode;
  if (s->capture) return cudaErrorIllegalState;
  struct CUgraph_st* g = calloc(1, sizeof *g);
  pthread_mutex_init(&g->mu, NULL);
  g->origin = s;
  emu__join(s, g);
  return cudaSuccess;
}

// Whether |s|'s captured work is joined back: its last op past its waits is a record that a later
// op of the capture waits on (a stream with only waits added no work).
static bool emu__joined(const struct CUgraph_st* g, const struct CUstream_st* s) {
  const emu__op_t* last = NULL;
  for (const emu__op_t* o = g->head; o; o = o->next)
    if (o->stream == s && o->kind != EMU__WAIT) last = o;
  if (!last) return true;
  if (last->kind != EMU__RECORD) return false;
  for (const emu__op_t* o = last->next; o; o = o->next)
    if (o->kind == EMU__WAIT && o->token == last->token && o->stream != s) return true;
  return false;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* out) {
  *out = NULL;
  struct CUgraph_st* g = s->capture;
  if (!g || g->origin != s) return cudaErrorIllegalState;
  bool joined = true;
  // Under the event lock (then the graph's, the order cudaStreamWaitEvent takes them): no wait
  // joins or captures into this graph once it ends.
  pthread_mutex_lock(&emu__event_mu);
  pthread_mutex_lock(&g->mu);
  for (int i = 1; i < g->num_streams; ++i) joined &= emu__joined(g, g->streams[i]);
  for (int i = 0; i < g->num_streams; ++i) __atomic_store_n(&g->streams[i]->capture, NULL, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g->mu);
  for (emu__token_t* t = emu__tokens; t; t = t->next)
    if (t->graph == g) {
      t->graph = NULL;
      t->ended = true;
    }
  pthread_mutex_unlock(&emu__event_mu);
  if (!joined) {
    emu__free_ops(g->head);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return cudaErrorStreamCaptureUnjoined;
  }
  *out = g;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* out, cudaGraph_t graph, unsigned long long flags) {
  (void)flags;
  struct CUgraphExec_st* x = calloc(1, sizeof *x);
  pthread_mutex_lock(&graph->mu);
  x->ops = graph->head;  // the graph gives its ops to its one instantiation
  graph->head = graph->tail = NULL;
  x->num_streams = graph->num_streams;
  pthread_mutex_unlock(&graph->mu);
  int device = emu__device;
  for (int i = 0; i < x->num_streams; ++i) {
    x->captured[i] = graph->streams[i];
    emu__device = graph->streams[i]->device;
    cudaStreamCreateWithFlags(&x->own[i], cudaStreamNonBlocking);
  }
  emu__device = device;
  *out = x;
  return cudaSuccess;
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int flags) {
  (void)graph;
  (void)path;
  (void)flags;
  return cudaErrorNotSupported;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return cudaSuccess;
  emu__free_ops(graph->head);
  pthread_mutex_destroy(&graph->mu);
  free(graph);
  return cudaSuccess;
}

// A fresh record on |s|, outside any capture.
static emu__token_t* emu__record(cudaStream_t s) {
  emu__token_t* t = calloc(1, sizeof *t);
  pthread_mutex_lock(&emu__event_mu);
  t->next = emu__tokens;
  emu__tokens = t;
  pthread_mutex_unlock(&emu__event_mu);
  emu__enqueue(s, (emu__op_t){.kind = EMU__RECORD, .token = t});
  return t;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
  if (s->capture) emu__fail("a graph launched into a capture", s);
  emu__token_t* start = emu__record(s);
  emu__launching = true;

  for (int i = 0; i < x->num_streams; ++i) emu__enqueue(x->own[i], (emu__op_t){.kind = EMU__WAIT, .token = start});
  // Each captured record is recorded afresh; a captured wait names the fresh record of its token.
  int cap = 0, n = 0;
  emu__token_t **from = NULL, **to = NULL;
  for (const emu__op_t* o = x->ops; o; o = o->next) {
    int k = 0;
    while (k < x->num_streams && x->captured[k] != o->stream) ++k;
    if (k == x->num_streams) emu__fail("a captured op of a stream outside the graph", o->stream);
    if (o->kind == EMU__RECORD) {
      if (n == cap) {
        cap = cap ? 2 * cap : 64;
        from = realloc(from, (size_t)cap * sizeof *from);
        to = realloc(to, (size_t)cap * sizeof *to);
      }
      from[n] = o->token;
      to[n++] = emu__record(x->own[k]);
      continue;
    }
    emu__op_t op = *o;
    op.next = NULL;
    op.stream = NULL;
    if (o->kind == EMU__WAIT) {
      int r = n - 1;
      while (r >= 0 && from[r] != o->token) --r;
      if (r < 0) emu__fail("a captured wait on a record the graph does not hold", o->token);
      op.token = to[r];
    }
    emu__enqueue(x->own[k], op);
  }
  free(from);
  free(to);
  for (int i = 0; i < x->num_streams; ++i)
    emu__enqueue(s, (emu__op_t){.kind = EMU__WAIT, .token = emu__record(x->own[i])});
  emu__launching = false;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  if (!x) return cudaSuccess;
  for (int i = 0; i < x->num_streams; ++i) cudaStreamDestroy(x->own[i]);  // each drains first
  emu__free_ops(x->ops);
  free(x);
  return cudaSuccess;
}

// Frees what the emulator kept for its checks (run at exit, after every stream was destroyed).
__attribute__((destructor)) static void emu__free_all(void) {
  for (int i = 0; i < emu__num_events; ++i) free(emu__events[i]);
  while (emu__tokens) {
    emu__token_t* t = emu__tokens;
    emu__tokens = t->next;
    free(t);
  }
}


void emu__call(cudaStream_t stream, void (*fn)(void*), void* arg) {
  emu__enqueue(stream, (emu__op_t){.kind = EMU__CALL, .fn = fn, .arg = arg});
}

int emu__stream_device(cudaStream_t stream) { return stream->device; }
