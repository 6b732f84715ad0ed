// The stream-ordered temporaries of the CUDA kernels (tprt__cuda_malloc_async,
// tprt_cuda_status.h): one memory pool per device that keeps what is freed. Plain C against the
// CUDA runtime API header.
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "tprt_cuda_status.h"

// One pool per device, created on first use; the table grows to the device count once.
static pthread_mutex_t tprt__pool_mu = PTHREAD_MUTEX_INITIALIZER;
static cudaMemPool_t* tprt__pools;
static int tprt__pool_devices;

static cudaError_t tprt__cuda_pool(int dev, cudaMemPool_t* out) {
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&tprt__pool_mu);
  if (!tprt__pools) {
    int n = 0;
    err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess) {
      tprt__pools = (cudaMemPool_t*)calloc((size_t)(n > 0 ? n : 1), sizeof(cudaMemPool_t));
      if (!tprt__pools) err = cudaErrorMemoryAllocation;
      tprt__pool_devices = tprt__pools ? n : 0;
    }
  }
  if (err == cudaSuccess && (dev < 0 || dev >= tprt__pool_devices)) err = cudaErrorInvalidDevice;
  if (err == cudaSuccess && !tprt__pools[dev]) {
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = NULL;
    err = cudaMemPoolCreate(&pool, &props);
    if (err == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
      if (err == cudaSuccess) {
        tprt__pools[dev] = pool;
      } else {
        (void)cudaMemPoolDestroy(pool);
      }
    }
  }
  if (err == cudaSuccess) *out = tprt__pools[dev];
  pthread_mutex_unlock(&tprt__pool_mu);
  return err;
}


//===----------------------------------------------------------------------===//
// Temporaries served from a buffer (a CUDA graph of several ranks' streams)
//===----------------------------------------------------------------------===//
// Each thread keeps, per stream, a stack of its live temporaries as if they were placed in one
// buffer: an allocation goes on top (256-byte aligned), a free marks its block, and freed blocks
// leave the top. Its peak is what a buffer needs to hold the temporaries of the steps seen so far.
// While a buffer serves the stream, allocations are placed in it instead of the pool: a captured
// step then has no graph memory nodes (a world graph replays allocation nodes captured on several
// ranks' streams, which faulted: docs/cuda-backend.md, "CUDA graphs"). A block is reused only after
// its free on the same stream, so stream order (a graph's edges) keeps its uses apart.

typedef struct {
  void* ptr;
  size_t off, bytes;
  bool freed, served;  // served: placed in the buffer, not taken from the pool
} tprt__temp_t;

typedef struct {
  cudaStream_t stream;
  char* base;  // the serving buffer, NULL: the pool
  size_t cap, top, peak;
  tprt__temp_t* v;
  size_t n, m;
} tprt__temp_heap_t;

static _Thread_local tprt__temp_heap_t* tprt__heaps;
static _Thread_local int tprt__nheaps;

static tprt__temp_heap_t* tprt__heap(cudaStream_t stream, bool create) {
  for (int i = 0; i < tprt__nheaps; ++i)
    if (tprt__heaps[i].stream == stream) return &tprt__heaps[i];
  if (!create) return NULL;
  tprt__temp_heap_t* h = (tprt__temp_heap_t*)realloc(tprt__heaps, (size_t)(tprt__nheaps + 1) * sizeof *h);
  if (!h) return NULL;
  tprt__heaps = h;
  h = &tprt__heaps[tprt__nheaps++];
  *h = (tprt__temp_heap_t){.stream = stream};
  return h;
}

cudaError_t tprt__cuda_malloc_async(void** ptr, size_t bytes, cudaStream_t stream) {
  *ptr = NULL;
  if (!bytes) bytes = 1;
  tprt__temp_heap_t* h = tprt__heap(stream, true);
  if (!h) return cudaErrorMemoryAllocation;
  if (h->n == h->m) {
    size_t m = h->m ? 2 * h->m : 16;
    tprt__temp_t* v = (tprt__temp_t*)realloc(h->v, m * sizeof *v);
    if (!v) return cudaErrorMemoryAllocation;
    h->v = v;
    h->m = m;
  }
  size_t off = (h->top + 255) & ~(size_t)255;
  cudaError_t err = cudaSuccess;
  void* p = NULL;
  bool served = h->base != NULL;
  if (served) {
    if (off + bytes > h->cap) {
      fprintf(stderr, "tprt cuda: a CUDA graph's temporaries outgrew their buffer (%zu bytes; %zu more asked): the "
                      "captured step differs from the step before it\n", h->cap, off + bytes - h->cap);
      return cudaErrorMemoryAllocation;
    }
    p = h->base + off;
  } else {
    int dev = 0;
    cudaMemPool_t pool = NULL;
    err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = tprt__cuda_pool(dev, &pool);
    if (err == cudaSuccess) err = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
    if (err != cudaSuccess) return err;
  }
  h->v[h->n++] = (tprt__temp_t){.ptr = p, .off = off, .bytes = bytes, .served = served};
  h->top = off + bytes;
  if (h->top > h->peak) h->peak = h->top;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t tprt__cuda_free_async(void* ptr, cudaStream_t stream) {
  if (!ptr) return cudaSuccess;
  tprt__temp_heap_t* h = tprt__heap(stream, false);
  size_t i = h ? h->n : 0;
  while (i > 0 && (h->v[i - 1].ptr != ptr || h->v[i - 1].freed)) --i;
  if (!i) return cudaFreeAsync(ptr, stream);  // not a temporary of this thread and stream
  tprt__temp_t* t = &h->v[i - 1];
  cudaError_t err = t->served ? cudaSuccess : cudaFreeAsync(ptr, stream);
  t->freed = true;
  while (h->n > 0 && h->v[h->n - 1].freed) --h->n;
  h->top = h->n ? h->v[h->n - 1].off + h->v[h->n - 1].bytes : 0;
  return err;
}

size_t tprt__cuda_temps_peak(cudaStream_t stream) {
  tprt__temp_heap_t* h = tprt__heap(stream, false);
  return h ? h->peak : 0;
}

void tprt__cuda_temps_serve(cudaStream_t stream, void* base, size_t bytes) {
  tprt__temp_heap_t* h = tprt__heap(stream, base != NULL);
  if (!h) return;
  h->base = (char*)base;
  h->cap = base ? bytes : 0;
}

void tprt__cuda_temps_forget(void) {
  for (int i = 0; i < tprt__nheaps; ++i) free(tprt__heaps[i].v);
  free(tprt__heaps);
  tprt__heaps = NULL;
  tprt__nheaps = 0;
}
