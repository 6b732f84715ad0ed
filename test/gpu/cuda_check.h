// Shared parts of tprt-cuda-check (cuda_check.cu: harness, controls, validation, main;
// cuda_check_dense.cu: linear, norms, GLU, elementwise;
// cuda_check_moe.cu: grouped linear, MoE data movement, Philox fill and copy;
// cuda_check_grad.cu: the backward kernels, quantization; cuda_check_attention.cu: rope and
// attention with its gradient): host/device test
// tensors, deterministic inputs, the bitwise CPU-vs-CUDA run and the validation comparison.
#ifndef TPC_TEST_GPU_CUDA_CHECK_H_
#define TPC_TEST_GPU_CUDA_CHECK_H_

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <functional>
#include <initializer_list>

#include "tprt_cpu_kernels.h"
#include "tprt_cuda_kernels.h"
#include "tprt_dtype.h"
#include "tprt_numerics.h"
#include "tprt_status.h"

/// Exits on a failed CUDA runtime call of the harness itself (not of a kernel under test).
#define CT_CUDA(expr)                                                                                 \
  do {                                                                                                \
    cudaError_t ct_e = (expr);                                                                        \
    if (ct_e != cudaSuccess) {                                                                        \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(ct_e)); \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

/// A host view and a device view of the same shape.
typedef struct {
  tprt_tensor_t h;  // host memory
  tprt_tensor_t d;  // device memory, same shape
} ct_tensor_t;

/// Value distributions of the generated inputs.
typedef enum {
  CT_DIST_MODERATE,  // u·2^e, u in [-1,1), e in [-2, 1]; 1 in 32 values is +-0
  CT_DIST_OFFSET,    // 3 + moderate: a mean far from 0 (LayerNorm's cancellation)
  CT_DIST_WIDE,      // u·2^e, e in [-12, 6] (every branch of the special functions)
  CT_DIST_SPECIAL,   // wide, and 1 in 8 values from a list of edge cases (+-0, +-inf, subnormals, overflow)
} ct_dist_t;

static const int kDtypes[] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};

/// Whether the command line's filter selects |kernel|.
bool ct_selected(const char* kernel);

/// Reports an unexpected failure (a status or a CUDA error) and frees |s|; the run goes on.
void ct_fail_status(const char* what, tprt_status_t s);

/// Allocates both views (host zeroed, device 0xFF bytes so that unwritten outputs show).
ct_tensor_t ct_make(int dtype, int rank, const int64_t* dims);
void ct_free(ct_tensor_t* t);

/// Copies the host view to the device view.
void ct_upload(const ct_tensor_t* t);

/// splitmix64: the same data on every run and machine.
uint64_t ct_next(uint64_t* s);

/// Fills a float tensor (host, then device) with values of |dist|.
void ct_fill(ct_tensor_t* t, uint64_t* rng, ct_dist_t dist);

/// Runs |cpu| (writing the host views of |outputs|) and |gpu| (their device views), compares every
/// output bit for bit and prints one row. |repeatable|: the GPU call may run twice (it does not
/// read its own outputs); the second, warm launch is timed.
void ct_run_outputs(const char* kernel, const char* shape, const char* dtype, const char* params,
                    std::initializer_list<ct_tensor_t*> outputs, const std::function<tprt_status_t()>& cpu,
                    const std::function<tprt_status_t(cudaStream_t)>& gpu, bool repeatable, cudaStream_t stream);

/// ct_run_outputs with one output.
void ct_run(const char* kernel, const char* shape, const char* dtype, const char* params, ct_tensor_t* y,
            const std::function<tprt_status_t()>& cpu, const std::function<tprt_status_t(cudaStream_t)>& gpu,
            bool repeatable, cudaStream_t stream);

/// A negative control's row: passes when the CUDA output |y| (device view) differs from |wrong|,
/// a reference computed in another order (cuda_check.cu).
void ct_control_row(const char* what, const char* shape, const char* dtype, ct_tensor_t* y, const void* wrong);
/// A negative control whose CUDA call failed with |s|: reported and counted as a failure (frees |s|).
void ct_control_failed(const char* what, tprt_status_t s);

/// Counts a validation case: both statuses must be errors with the same code and message (frees both).
void ct_same_status(const char* what, tprt_status_t cpu, tprt_status_t gpu);

/// cuda_check_moe.cu: the validation cases and the kernel checks of its kernels.
void ct_check_validation_moe(void);
void ct_check_moe_kernels(cudaStream_t stream);

/// The dense forward kernels (cuda_check_dense.cu).
void ct_check_linear(cudaStream_t stream);
void ct_check_gemm_layouts(cudaStream_t stream);
void ct_check_norms(cudaStream_t stream);
void ct_check_glu(cudaStream_t stream);
void ct_check_elementwise(cudaStream_t stream);
void ct_check_add_forms(cudaStream_t stream);
/// The collectives' staged sums (tprt_cuda_reduce_staged_own), cuda_check_dense.cu.
void ct_check_reduce_staged(cudaStream_t stream);

/// The backward contractions (cuda_check_grad.cu).
void ct_check_grad_kernels(cudaStream_t stream);

/// Rope, attention and attention_grad (cuda_check_attention.cu): the validation cases and the
/// kernel checks.
/// cuda_check_model.cu: the whole-model kernels (embedding, its gradient, sumsq, global norm, AdamW).
void ct_check_model_kernels(cudaStream_t stream);

void ct_check_validation_attention(void);
void ct_check_attention_kernels(cudaStream_t stream);
/// The negative control of attention: a sequential softmax sum must give other bits.
void ct_check_attention_control(cudaStream_t stream);

#endif  // TPC_TEST_GPU_CUDA_CHECK_H_
