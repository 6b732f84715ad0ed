// CUDA runtime errors as tprt statuses: the one place where a cudaError_t becomes a
// tprt_status_t (STYLE.md, "Errors"). Every CUDA call of libtprt goes through
// TPRT_CUDA_RETURN_IF_ERROR or TPRT_CUDA_GOTO_IF_ERROR, so a failure carries the failing call's
// text, cudaGetErrorName/cudaGetErrorString and the caller's file and line, and never aborts.
//
// Usable from C and from CUDA C++. Thread safety: reentrant; cudaGetLastError clears the calling
// thread's last error only.
#ifndef TPRT_CUDA_STATUS_H_
#define TPRT_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "tprt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Returns the status code for |err|: RESOURCE_EXHAUSTED for allocation failures, UNAVAILABLE
/// when no usable device or driver exists (or no kernel image fits the device), INVALID_ARGUMENT
/// for invalid values, configurations and pointers, INTERNAL otherwise. OK for cudaSuccess.
tprt_status_code_t tprt_cuda_status_code(cudaError_t err);

/// Converts |err| (not cudaSuccess) from the call spelled |expr| into a status owned by the
/// caller, recorded at |file|:|line|: "<expr> failed: cudaErrorX (string)". It also clears the
/// thread's last CUDA error (cudaGetLastError), as NCCL's CUDACHECK does, so that the next
/// unrelated call does not report this failure again. An error that corrupts the context (an
/// illegal address in a kernel, say) stays sticky: every later call of the process fails too, and
/// says so. Use the macros below rather than calling this directly.
tprt_status_t tprt__cuda_make_status(cudaError_t err, const char* expr, const char* file,
                                     int line) TPRT_MUST_USE_RESULT;

/// Evaluates the CUDA call |expr| once and returns its failure, as a status, from the enclosing
/// function.
#define TPRT_CUDA_RETURN_IF_ERROR(expr)                                                                      \
  do {                                                                                                       \
    cudaError_t tprt__cuda_e = (expr);                                                                       \
    if (tprt__cuda_e != cudaSuccess) return tprt__cuda_make_status(tprt__cuda_e, #expr, __FILE__, __LINE__); \
  } while (0)

/// The goto twin: stores |expr|'s failure in |status_var| and jumps to |label| (single-exit
/// cleanup). |status_var| must be OK (NULL) on entry.
#define TPRT_CUDA_GOTO_IF_ERROR(status_var, expr, label)                              \
  do {                                                                                \
    cudaError_t tprt__cuda_e = (expr);                                                \
    if (tprt__cuda_e != cudaSuccess) {                                                \
      (status_var) = tprt__cuda_make_status(tprt__cuda_e, #expr, __FILE__, __LINE__); \
      goto label;                                                                     \
    }                                                                                 \
  } while (0)

/// SMs that GEMM launches leave free on the calling thread's device (0 by default). The backend
/// sets it while an asynchronous collective is in flight on its comm stream, so that the
/// collective's CTAs find SMs beside the GEMMs' persistent grids (a GEMM that holds every SM
/// starves it: docs/performance.md, "GTP"); per thread, as each rank is a thread.
void tprt_cuda_set_sm_reserve(int sms);
int tprt_cuda_sm_reserve(void);
/// The SMs a GEMM launch may use: the current device's SM count less the reserve (at least half
/// of them).
tprt_status_t tprt_cuda_gemm_sms(int* out) TPRT_MUST_USE_RESULT;

/// Stream-ordered temporaries of the CUDA kernels (workspaces, reordered copies, plans): like
/// cudaMallocAsync, from a memory pool of libtprt's own per device whose release threshold is
/// unbounded, so that memory freed with tprt__cuda_free_async is reused by the next call instead of being
/// returned to the driver at every synchronization (the default pool's behaviour: then each call
/// after a synchronization maps fresh memory, tens of microseconds on the host before the kernel
/// can start). The pool keeps at most the largest set of temporaries live at once; it is not
/// shared with the application's allocations. Thread-safe. Free with tprt__cuda_free_async on
/// the same stream.
cudaError_t tprt__cuda_malloc_async(void** ptr, size_t bytes, cudaStream_t stream);
/// Frees a temporary of tprt__cuda_malloc_async (other pointers: cudaFreeAsync).
cudaError_t tprt__cuda_free_async(void* ptr, cudaStream_t stream);
/// The calling thread's temporaries on |stream| as if placed in one buffer (a stack: a block is
/// reused after its free on the stream): the size such a buffer needs for the steps so far.
size_t tprt__cuda_temps_peak(cudaStream_t stream);
/// From now on the calling thread's temporaries on |stream| are placed in [base, base + bytes)
/// instead of the pool (NULL: the pool again); one that does not fit fails with
/// cudaErrorMemoryAllocation and a line on stderr. A captured step then has no graph memory
/// nodes: the CUDA backend's world graphs (backend_cuda_graph.c).
void tprt__cuda_temps_serve(cudaStream_t stream, void* base, size_t bytes);
/// Releases the calling thread's bookkeeping (at a rank's end).
void tprt__cuda_temps_forget(void);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CUDA_STATUS_H_
