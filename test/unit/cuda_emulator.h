// Shared by the CUDA emulator's files (cuda_emulator.c: streams, events, graphs;
// cuda_emulator_memory.c: memory, copies, devices, errors; cuda_emulator_kernels.c: the kernels
// the collectives launch). See cuda_emulator.c.
#ifndef TPC_CUDA_EMULATOR_H_
#define TPC_CUDA_EMULATOR_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "backend_cuda_impl.h"

/// Reports what an emulated GPU would have got wrong or faulted on, and ends the process.
void emu__fail(const char* what, const void* p);
/// Fails unless [p, p + bytes) lies in memory allocated on |device| now.
void emu__check(const void* p, size_t bytes, int device, const char* what);
/// Queues fn(arg) on |stream| after the work queued so far; |arg| is freed after the call.
void emu__call(cudaStream_t stream, void (*fn)(void*), void* arg);
/// The device |stream| belongs to.
int emu__stream_device(cudaStream_t stream);
/// How many times tprt_cuda_fused_allreduce_add_rmsnorm was launched, on every rank together.
int emu__fused_launches(void);

//===----------------------------------------------------------------------===//
// The streams' work (cuda_emulator.c), queued by both files
//===----------------------------------------------------------------------===//

/// One record of an event; never freed before the process ends (a wait may name an old one).
typedef struct emu__token_t {
  bool done;
  struct CUgraph_st* graph;  // the capture it was recorded in (it never completes), or NULL
  bool ended;                // recorded in a capture that has ended: a wait on it fails
  struct emu__token_t* next;
} emu__token_t;

typedef enum { EMU__COPY, EMU__COPY_2D, EMU__SET, EMU__RECORD, EMU__WAIT, EMU__CALL } emu__kind_t;

typedef struct emu__op_t {
  emu__kind_t kind;
  char* dst;
  const char* src;
  size_t bytes, dpitch, spitch, width, height;
  int value, dst_device, src_device;  // -1: host memory, not checked
  emu__token_t* token;
  void (*fn)(void* arg);
  void* arg;
  bool keep_arg;                // a graph's call: the graph frees |arg|
  struct CUstream_st* stream;   // a captured op's stream
  struct emu__op_t* next;
} emu__op_t;

/// A stream: a worker thread that runs its queue in order.
struct CUstream_st {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  emu__op_t *head, *tail;
  int pending;  // queued or running
  bool stop;
  int device;
  unsigned seed;
  struct CUgraph_st* capture;  // the capture it is part of (it began it, or joined it), or NULL
};

/// The calling thread's current device (cudaSetDevice); new streams, events and allocations are its.
extern _Thread_local int emu__device;
/// The device of the live allocation holding [p, p + bytes), or -1 when none holds it.
int emu__device_of(const void* p, size_t bytes);
/// Queues |op| on |s| after the work queued so far, or adds it to the graph |s| is capturing into.
cudaError_t emu__enqueue(cudaStream_t s, emu__op_t op);

#endif  // TPC_CUDA_EMULATOR_H_
