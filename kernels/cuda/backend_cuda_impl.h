// Internal to the CUDA backend plugin (backend_cuda.c: ranks, memory, graphs, kernels;
// backend_cuda_nccl.c: communicators, collectives, waiting): the per-rank state and helpers.
#ifndef TPRT_BACKEND_CUDA_IMPL_H_
#define TPRT_BACKEND_CUDA_IMPL_H_

#include <nccl.h>
#include <stdbool.h>

#include "tprt_backend.h"
#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

#define TPRT__CUDA_MAX_COMMS 16

typedef struct {
  uint32_t mask;
  ncclComm_t comm;
  int size, index;
} tprt__cuda_comm_t;

typedef struct {
  bool active;
  int device;
  cudaStream_t stream;
  tprt__cuda_comm_t comms[TPRT__CUDA_MAX_COMMS];
  int num_comms;
  void* scratch;
  size_t scratch_bytes;
  void* lt;  // cuBLASLt handle (fast mode), and its workspace
  void* lt_workspace;
  bool capturing;  // between graph_begin and graph_end: no host copies, no synchronization
  tprt_rank_t* rank;
  int64_t collectives;  // calls so far (fault injection counts them)
} tprt__cuda_rank_t;


/// The calling rank thread's state (backend_cuda.c).
extern _Thread_local tprt__cuda_rank_t tprt__r;

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

/// A device buffer of at least |bytes| reused by the collectives (stream order keeps uses apart).
tprt_status_t tprt__scratch(size_t bytes, char** out);

/// Waits for the rank's stream; NCCL errors, a world abort or the timeout abort the rank's
/// communicators and return a status (backend_cuda_nccl.c).
tprt_status_t tprt__wait_stream(void);

/// The collectives of the backend table (backend_cuda_nccl.c).
#define TPRT__CUDA_COLLECTIVE_DECL(name, params, args) tprt_status_t tprt__cuda_##name params;
TPRT_BACKEND_COLLECTIVES(TPRT__CUDA_COLLECTIVE_DECL)
#undef TPRT__CUDA_COLLECTIVE_DECL

#endif  // TPRT_BACKEND_CUDA_IMPL_H_
