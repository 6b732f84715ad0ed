// One CUTLASS device-level GEMM launch with tpc's statuses, shared by the CUTLASS kernels of
// kernels/cuda (grouped_fast.cuh, invariant_gemm.cuh): can_implement, a stream-ordered workspace,
// initialize and run on |stream|. |what| names the kernel in messages.
#ifndef TPRT_CUTLASS_LAUNCH_CUH_
#define TPRT_CUTLASS_LAUNCH_CUH_

#include <cutlass/cutlass.h>

#include "tprt_cuda_status.h"
#include "tprt_status.h"

template <class Gemm>
tprt_status_t tprt__cutlass_launch(const typename Gemm::Arguments& args, const char* what, cudaStream_t stream) {
  Gemm gemm;
  cutlass::Status st = gemm.can_implement(args);
  if (st != cutlass::Status::kSuccess)
    return tprt_make_status(TPRT_STATUS_INTERNAL, "%s: CUTLASS cannot implement it (%s)", what,
                            cutlassGetStatusString(st));
  size_t bytes = Gemm::get_workspace_size(args);
  void* workspace = nullptr;
  if (bytes) TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&workspace, bytes, stream));
  st = gemm.initialize(args, workspace, stream);
  if (st == cutlass::Status::kSuccess) st = gemm.run(stream);
  if (workspace) tprt__cuda_free_async(workspace, stream);
  if (st != cutlass::Status::kSuccess)
    return tprt_make_status(TPRT_STATUS_INTERNAL, "%s: CUTLASS launch failed (%s): %s", what,
                            cutlassGetStatusString(st), cudaGetErrorString(cudaGetLastError()));
  return nullptr;
}

#endif  // TPRT_CUTLASS_LAUNCH_CUH_
