// The stream-ordered temporaries of the CUDA kernels (tprt__cuda_malloc_async,
// tprt_cuda_status.h): one memory pool per device that keeps what is freed. Plain C against the
// CUDA runtime API header.
#include <pthread.h>
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

cudaError_t tprt__cuda_malloc_async(void** ptr, size_t bytes, cudaStream_t stream) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  cudaMemPool_t pool = NULL;
  if (err == cudaSuccess) err = tprt__cuda_pool(dev, &pool);
  if (err != cudaSuccess) return err;
  return cudaMallocFromPoolAsync(ptr, bytes ? bytes : 1, pool, stream);
}
