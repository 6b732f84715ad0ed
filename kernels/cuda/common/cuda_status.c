// cudaError_t -> tprt_status_t (tprt_cuda_status.h). Plain C against the CUDA runtime API header;
// compiled by the C compiler with the CUDA include directory.
#include "tprt_cuda_status.h"

tprt_status_code_t tprt_cuda_status_code(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return TPRT_STATUS_OK;
    case cudaErrorMemoryAllocation:
      return TPRT_STATUS_RESOURCE_EXHAUSTED;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorCudartUnloading:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return TPRT_STATUS_UNAVAILABLE;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return TPRT_STATUS_INVALID_ARGUMENT;
    case cudaErrorNotSupported:
      return TPRT_STATUS_UNIMPLEMENTED;
    default:
      return TPRT_STATUS_INTERNAL;
  }
}

tprt_status_t tprt__cuda_make_status(cudaError_t err, const char* expr, const char* file, int line) {
  // Clear the thread's last error so that it is reported once, here (NCCL's CUDACHECK). Errors
  // that corrupt the context cannot be cleared and keep failing later calls.
  (void)cudaGetLastError();
  if (err == cudaSuccess)  // a misuse: a success must never read as a failure, nor the reverse
    return tprt__make_status(file, line, TPRT_STATUS_INTERNAL, "%s: converted cudaSuccess to a status", expr);
  return tprt__make_status(file, line, tprt_cuda_status_code(err), "%s failed: %s (%s)", expr, cudaGetErrorName(err),
                           cudaGetErrorString(err));
}


// The GEMMs' SM reserve (tprt_cuda_kernels.h): kept here, in the one C file that every build of
// the backend links, kernels and the host checks alike.
static _Thread_local int tprt__sm_reserve;

void tprt_cuda_set_sm_reserve(int sms) { tprt__sm_reserve = sms > 0 ? sms : 0; }

int tprt_cuda_sm_reserve(void) { return tprt__sm_reserve; }

tprt_status_t tprt_cuda_gemm_sms(int* out) {
  int dev = 0, sms = 0;
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&dev));
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  int keep = tprt__sm_reserve < sms / 2 ? tprt__sm_reserve : sms / 2;
  *out = sms - keep;
  return NULL;
}
