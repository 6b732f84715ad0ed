// tprt_cuda_glu_grad in exact mode, bitwise equal to tprt_cpu_glu_grad: both evaluate
// tprt_glu_grad_value of tprt_numerics.h (one implementation, compiled for the host and the
// device; --fmad=false keeps its plain * and + the IEEE operations), rounded once per output.
//
// Launch geometry: one thread per output column j of a row (it writes the gate and the up
// gradient of that column), 256-thread blocks, grid-stride; usually (glu_runs.cuh) one thread per
// run of 16 bytes of columns instead, with 16-byte loads and stores. tprt_cuda_glu_grad_fast (fast
// numerics) is the same iteration with the approximate formulas of glu_fast.cuh.
#include "glu_fast.cuh"
#include "glu_runs.cuh"
#include "tprt_cuda_internal.cuh"

template <int D, bool kFast>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__glu_grad_kernel(const void* __restrict__ x, const void* __restrict__ dy, void* __restrict__ dx, int64_t total,
                          int64_t f, int64_t interleave, int kind, float alpha, float limit, int runs) {
  if (runs) {
    constexpr int kVec = TPRT__CUDA_VEC16(D);
    const uint4* xv = static_cast<const uint4*>(x);
    uint4* dxv = static_cast<uint4*>(dx);
    tprt__glu_runs<kVec>(total / f, f, interleave, [&](int64_t row, int64_t j, int64_t gcol, int64_t ucol) {
      const int64_t g = (row * 2 * f + gcol) / kVec, u = (row * 2 * f + ucol) / kVec;
      const uint4 vg = xv[g], vu = xv[u], vdy = static_cast<const uint4*>(dy)[(row * f + j) / kVec];
      uint4 vdg, vdu;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        float dg, du;
        tprt__glu_grad_value_of<kFast>(kind, tprt__cuda_ld(&vg, D, k), tprt__cuda_ld(&vu, D, k),
                                       tprt__cuda_ld(&vdy, D, k), alpha, limit, &dg, &du);
        tprt__cuda_st(&vdg, D, k, dg);
        tprt__cuda_st(&vdu, D, k, du);
      }
      dxv[g] = vdg;
      dxv[u] = vdu;
    });
    return;
  }
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / f, j = i % f, xo = row * 2 * f;
    int64_t gcol, ucol;
    tprt_glu_columns(j, f, interleave, &gcol, &ucol);
    float dg, du;
    tprt__glu_grad_value_of<kFast>(kind, tprt__cuda_ld(x, D, xo + gcol), tprt__cuda_ld(x, D, xo + ucol),
                                   tprt__cuda_ld(dy, D, i), alpha, limit, &dg, &du);
    tprt__cuda_st(dx, D, xo + gcol, dg);
    tprt__cuda_st(dx, D, xo + ucol, du);
  }
}

template <bool kFast>
static tprt_status_t tprt__cuda_glu_grad_launch(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx,
                                                int kind, int64_t interleave, float alpha, float limit,
                                                cudaStream_t stream) {
  tprt_status_t s = tprt__check_glu_grad(x, dy, dx, kind, interleave, alpha, limit);
  if (s) return s;
  int64_t f = x->dims[x->rank - 1] / 2, total = tprt_tensor_numel(dy);
  if (total == 0 || f == 0) return NULL;
  const int runs = tprt__glu_runs_fit(x->dtype, f, interleave, x->data, dy->data, dx->data);
  dim3 grid(tprt__glu_blocks(x->dtype, total, runs));
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    tprt__glu_grad_kernel<decltype(d)::value, kFast><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(
        x->data, dy->data, dx->data, total, f, interleave, kind, alpha, limit, runs);
  });
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx,
                                            int kind, int64_t interleave, float alpha, float limit,
                                            cudaStream_t stream) {
  return tprt__cuda_glu_grad_launch<false>(x, dy, dx, kind, interleave, alpha, limit, stream);
}

extern "C" tprt_status_t tprt_cuda_glu_grad_fast(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx,
                                                 int kind, int64_t interleave, float alpha, float limit,
                                                 cudaStream_t stream) {
  return tprt__cuda_glu_grad_launch<true>(x, dy, dx, kind, interleave, alpha, limit, stream);
}
