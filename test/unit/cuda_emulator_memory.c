// The CUDA emulator's device memory, copies, devices and errors (see cuda_emulator.c for what it
// emulates and checks), its stream-ordered allocation, and the entry points that must not be
// reached: the kernels it does not run (cuda_emulator_kernels.c runs the collectives') and NCCL.
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_impl.h"
#include "cuda_emulator.h"

//===----------------------------------------------------------------------===//
// Failures and device memory
//===----------------------------------------------------------------------===//

// Ends the process: an emulated GPU would have faulted, or produced garbage.
void emu__fail(const char* what, const void* p) {
  fprintf(stderr, "cuda emulator: %s (%p)\n", what, p);
  fflush(stderr);
  abort();
}

typedef struct {
  char* ptr;
  size_t bytes;
  int device;
} emu__alloc_t;

enum { EMU__MAX_ALLOCS = 4096 };
static pthread_mutex_t emu__mem_mu = PTHREAD_MUTEX_INITIALIZER;
static emu__alloc_t emu__allocs[EMU__MAX_ALLOCS];
static int emu__num_allocs;
_Thread_local int emu__device;
static _Thread_local cudaError_t emu__last_error;

int emu__device_of(const void* p, size_t bytes) {
  int device = -1;
  pthread_mutex_lock(&emu__mem_mu);
  for (int i = 0; i < emu__num_allocs; ++i) {
    const emu__alloc_t* a = &emu__allocs[i];
    if ((const char*)p >= a->ptr && (const char*)p + bytes <= a->ptr + a->bytes) device = a->device;
  }
  pthread_mutex_unlock(&emu__mem_mu);
  return device;
}

// Fails unless [p, p + bytes) is live memory of |device|; empty ranges and host memory (|device|
// -1) pass.
void emu__check(const void* p, size_t bytes, int device, const char* what) {
  if (!bytes || device < 0) return;
  int d = emu__device_of(p, bytes);
  if (d < 0) emu__fail(what, p);
  if (d != device) emu__fail("device memory used on another device than its own", p);
}

cudaError_t cudaMalloc(void** out, size_t bytes) {
  char* p = malloc(bytes ? bytes : 1);
  if (!p) return cudaErrorMemoryAllocation;
  memset(p, 0xA5, bytes);
  pthread_mutex_lock(&emu__mem_mu);
  if (emu__num_allocs == EMU__MAX_ALLOCS) emu__fail("too many allocations", p);
  emu__allocs[emu__num_allocs++] = (emu__alloc_t){p, bytes ? bytes : 1, emu__device};
  pthread_mutex_unlock(&emu__mem_mu);
  *out = p;
  return cudaSuccess;
}

// Each emulated GPU has 80 GiB; what is free is that less the live allocations on it.
#define EMU__DEVICE_BYTES ((size_t)80 << 30)
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  size_t used = 0;
  pthread_mutex_lock(&emu__mem_mu);
  for (int i = 0; i < emu__num_allocs; ++i)
    if (emu__allocs[i].device == emu__device) used += emu__allocs[i].bytes;
  pthread_mutex_unlock(&emu__mem_mu);
  *total_bytes = EMU__DEVICE_BYTES;
  *free_bytes = used < EMU__DEVICE_BYTES ? EMU__DEVICE_BYTES - used : 0;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  pthread_mutex_lock(&emu__mem_mu);
  int i = 0;
  while (i < emu__num_allocs && emu__allocs[i].ptr != p) ++i;
  if (i == emu__num_allocs) emu__fail("cudaFree of memory that cudaMalloc did not return", p);
  emu__allocs[i] = emu__allocs[--emu__num_allocs];
  pthread_mutex_unlock(&emu__mem_mu);
  free(p);
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
  bool dd = kind == cudaMemcpyDeviceToDevice, hd = kind == cudaMemcpyHostToDevice, dh = kind == cudaMemcpyDeviceToHost;
  if (!dd && !hd && !dh) emu__fail("a copy of a kind the backend does not use", dst);
  return emu__enqueue(s, (emu__op_t){.kind = EMU__COPY,
                                     .dst = dst,
                                     .src = src,
                                     .bytes = bytes,
                                     .dst_device = dh ? -1 : s->device,
                                     .src_device = hd ? -1 : s->device});
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t s) {
  if (dst_device != s->device) emu__fail("a peer copy into another device than its stream's", dst);
  return emu__enqueue(s, (emu__op_t){.kind = EMU__COPY,
                                     .dst = dst,
                                     .src = src,
                                     .bytes = bytes,
                                     .dst_device = dst_device,
                                     .src_device = src_device});
}

// A batch: each copy into the stream's device, from memory of any device (peer copies); the
// attributes must be the ones the backend passes (stream-ordered sources).
cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,
                                 struct cudaMemcpyAttributes* attrs, size_t* attrs_idxs, size_t num_attrs,
                                 cudaStream_t s) {
  if (num_attrs != 1 || attrs_idxs[0] != 0 || attrs[0].srcAccessOrder != cudaMemcpySrcAccessOrderStream)
    emu__fail("a copy batch without one stream-ordered attribute for all its copies", dsts);
  if (s->capture) return cudaErrorStreamCaptureUnsupported;  // CUDA has no graph node for a copy batch
  for (size_t i = 0; i < count; ++i) {
    int src_device = emu__device_of(srcs[i], sizes[i]);
    if (sizes[i] && src_device < 0) emu__fail("a batched copy reads memory that is not allocated", srcs[i]);
    cudaError_t e = emu__enqueue(s, (emu__op_t){.kind = EMU__COPY,
                                                .dst = dsts[i],
                                                .src = srcs[i],
                                                .bytes = sizes[i],
                                                .dst_device = s->device,
                                                .src_device = src_device});
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t s) {
  if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    emu__fail("a 2D copy that is neither device to device nor between devices by unified addressing", dst);
  // cudaMemcpyDefault: each pointer's device is the one its allocation is on (checked as it runs).
  int src_device = s->device, dst_device = s->device;
  if (kind == cudaMemcpyDefault) {
    src_device = height ? emu__device_of(src, (height - 1) * spitch + width) : s->device;
    dst_device = height ? emu__device_of(dst, (height - 1) * dpitch + width) : s->device;
    if (height && (src_device < 0 || dst_device < 0)) emu__fail("a 2D copy of memory that is not allocated", dst);
  }
  return emu__enqueue(s, (emu__op_t){.kind = EMU__COPY_2D,
                                     .dst = dst,
                                     .src = src,
                                     .dpitch = dpitch,
                                     .spitch = spitch,
                                     .width = width,
                                     .height = height,
                                     .dst_device = dst_device,
                                     .src_device = src_device});
}

// A pitched copy between devices (or within one): one layer, linear memory only, into the
// stream's device.
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms* p, cudaStream_t s) {
  if (s->capture) return cudaErrorStreamCaptureUnsupported;  // as on an H200 (CUDA 13.0)
  if (p->srcArray || p->dstArray || p->extent.depth != 1 || p->srcPos.x || p->srcPos.y || p->srcPos.z ||
      p->dstPos.x || p->dstPos.y || p->dstPos.z)
    emu__fail("a 3D peer copy that is not one layer of linear memory", p->dstPtr.ptr);
  if (p->dstDevice != s->device) emu__fail("a peer copy into another device than its stream's", p->dstPtr.ptr);
  if (p->extent.width > p->srcPtr.pitch || p->extent.width > p->dstPtr.pitch)
    emu__fail("a 3D peer copy wider than its pitch", p->dstPtr.ptr);
  return emu__enqueue(s, (emu__op_t){.kind = EMU__COPY_2D,
                                     .dst = p->dstPtr.ptr,
                                     .src = p->srcPtr.ptr,
                                     .dpitch = p->dstPtr.pitch,
                                     .spitch = p->srcPtr.pitch,
                                     .width = p->extent.width,
                                     .height = p->extent.height,
                                     .dst_device = p->dstDevice,
                                     .src_device = p->srcDevice});
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t s) {
  return emu__enqueue(s, (emu__op_t){.kind = EMU__SET, .dst = dst, .value = value, .bytes = bytes});
}

//===----------------------------------------------------------------------===//
// Devices and errors
//===----------------------------------------------------------------------===//

// Mapped host memory (the fused norm's abort word): plain host memory, the same pointer on the device.
cudaError_t cudaHostAlloc(void** out, size_t bytes, unsigned int flags) {
  (void)flags;
  *out = calloc(1, bytes ? bytes : 1);
  return *out ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaHostGetDevicePointer(void** out, void* host, unsigned int flags) {
  (void)flags;
  *out = host;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* out) {
  const char* n = getenv("TPRT_EMU_DEVICES");
  *out = n ? atoi(n) : 1;
  return *out > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  emu__device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = emu__device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* out, enum cudaDeviceAttr attr, int device) {
  (void)device;
  *out = attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* out, int device, int peer) {
  *out = device != peer;
  return cudaSuccess;
}

static pthread_mutex_t emu__peer_mu = PTHREAD_MUTEX_INITIALIZER;
static bool emu__peer[64][64];

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&emu__peer_mu);
  bool already = emu__peer[emu__device & 63][peer & 63];
  emu__peer[emu__device & 63][peer & 63] = true;
  pthread_mutex_unlock(&emu__peer_mu);
  if (already) emu__last_error = cudaErrorPeerAccessAlreadyEnabled;
  return already ? cudaErrorPeerAccessAlreadyEnabled : cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = emu__last_error;
  emu__last_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorName(cudaError_t e) { return e == cudaErrorNotSupported ? "cudaErrorNotSupported" : "cudaError"; }

const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }

// Stream-ordered allocation (tprt__cuda_malloc_async's pool): cudaMalloc at once, cudaFree when
// the stream reaches the free. In a capture CUDA would make graph memory nodes, which the emulator
// does not model: refused, so a world graph's step must take its temporaries from the buffers the
// backend serves them from (tprt__cuda_temps_serve).
cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const struct cudaMemPoolProps* props) {
  (void)props;
  *pool = (cudaMemPool_t)calloc(1, 16);
  return *pool ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  (void)pool;
  (void)attr;
  (void)value;
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  free(pool);
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  (void)pool;
  if (stream && stream->capture) return cudaErrorStreamCaptureUnsupported;  // a graph memory node
  return cudaMalloc(ptr, bytes);
}

static void emu__free_call(void* p) { cudaFree(p); }

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (!ptr) return cudaSuccess;
  if (stream->capture) return cudaErrorStreamCaptureUnsupported;  // a graph memory node
  return emu__enqueue(stream, (emu__op_t){.kind = EMU__CALL, .fn = emu__free_call, .arg = ptr, .keep_arg = true});
}
#define EMU__KERNEL_STUB(name, params, args)                                                   \
  tprt_status_t tprt__cuda_##name params {                                                    \
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "cuda emulator: no kernel %s", #name); \
  }
TPRT_BACKEND_KERNELS(EMU__KERNEL_STUB)
#undef EMU__KERNEL_STUB

// NCCL: the local collectives must not reach it.
#define EMU__NCCL_FAIL emu__fail("NCCL called", NULL)
const char* ncclGetErrorString(ncclResult_t r) {
  (void)r;
  return "emulated NCCL";
}
const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return "";
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  (void)id;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int n, ncclUniqueId id, int rank) {
  (void)comm, (void)n, (void)id, (void)rank;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int n, ncclUniqueId id, int rank, ncclConfig_t* config) {
  (void)comm, (void)n, (void)id, (void)rank, (void)config;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  (void)comm;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  (void)comm;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* out) {
  (void)comm, (void)out;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclGroupStart(void) {
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclGroupEnd(void) {
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclSend(const void* buf, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
  (void)buf, (void)n, (void)t, (void)peer, (void)comm, (void)s;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclRecv(void* buf, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
  (void)buf, (void)n, (void)t, (void)peer, (void)comm, (void)s;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t s) {
  (void)in, (void)out, (void)n, (void)t, (void)comm, (void)s;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclAllReduce(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t s) {
  (void)in, (void)out, (void)n, (void)t, (void)op, (void)comm, (void)s;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t s) {
  (void)in, (void)out, (void)n, (void)t, (void)op, (void)comm, (void)s;
  EMU__NCCL_FAIL;
  return ncclInternalError;
}
