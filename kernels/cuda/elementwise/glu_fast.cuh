// The GLU's values and gradients for fast numerics (glu.cu, glu_grad.cu with kFast): the formulas
// of tprt_glu_value and tprt_glu_grad_value (tprt_numerics.h) with the hardware's approximate
// exponential (__expf: ex2.approx, about 2 ulp) and division (__fdividef), one exponential per
// element in the forward and in the backward, and silu(g) = g·sigmoid(g) from the same sigmoid.
// No bitwise promise: a few ulp from the exact kernels, which fast numerics allows. NaN in, NaN
// out, as the exact formulas.
#ifndef TPRT_GLU_FAST_CUH_
#define TPRT_GLU_FAST_CUH_

#include "tprt_cuda_internal.cuh"

/// sigmoid(z) and sigmoid(-z) from one __expf of -|z| and one approximate reciprocal.
static __device__ __forceinline__ void tprt__sigmoid_pair_fast(float z, float* p, float* q) {
  const float e = __expf(-fabsf(z));
  const float big = __fdividef(1.0f, 1.0f + e), small = e * big;
  *p = z >= 0.0f ? big : small;
  *q = z >= 0.0f ? small : big;
}

/// The activation's argument z (sigmoid(z) scales the gate) and the gate it scales, per kind:
/// swiglu z = g; geglu z = 1.59576912·(g + 0.044715·g³) (tanh form); quick_geglu z = alpha·min(g,
/// limit).
static __device__ __forceinline__ float tprt__glu_arg_fast(int kind, float g, float alpha, float limit) {
  if (kind == 0) return g;
  if (kind == 1) return 1.59576912f * fmaf(0.044715f * (g * g), g, g);
  return alpha * (g > limit ? limit : g);
}

/// tprt_glu_value, fast.
static __device__ __forceinline__ float tprt__glu_value_fast(int kind, float g, float u, float alpha, float limit) {
  float p, q;
  tprt__sigmoid_pair_fast(tprt__glu_arg_fast(kind, g, alpha, limit), &p, &q);
  if (kind != 2) return (g * p) * u;
  const float gc = g > limit ? limit : g, uc = u > limit ? limit : u < -limit ? -limit : u;
  return (gc * p) * (uc + 1.0f);
}

/// tprt_glu_grad_value, fast.
static __device__ __forceinline__ void tprt__glu_grad_value_fast(int kind, float g, float u, float dy, float alpha,
                                                                 float limit, float* out_dg, float* out_du) {
  float p, q;
  tprt__sigmoid_pair_fast(tprt__glu_arg_fast(kind, g, alpha, limit), &p, &q);
  if (kind == 0) {
    *out_du = dy * (g * p);
    *out_dg = (dy * u) * (p * fmaf(g, q, 1.0f));
  } else if (kind == 1) {
    const float dz = 1.59576912f * fmaf(0.134144992f, g * g, 1.0f);
    *out_du = dy * (g * p);
    *out_dg = (dy * u) * (p * fmaf(g * q, dz, 1.0f));
  } else {
    const bool g_clamped = g > limit, u_clamped = u > limit || u < -limit;
    const float gc = g_clamped ? limit : g, uc = u > limit ? limit : u < -limit ? -limit : u;
    *out_du = u_clamped ? 0.0f : dy * (gc * p);
    *out_dg = g_clamped ? 0.0f : (dy * (uc + 1.0f)) * (p * fmaf(alpha * gc, q, 1.0f));
  }
}

/// The value of |kind| at (g, u): the exact formula, or the fast one with kFast.
template <bool kFast>
static __device__ __forceinline__ float tprt__glu_value_of(int kind, float g, float u, float alpha, float limit) {
  return kFast ? tprt__glu_value_fast(kind, g, u, alpha, limit) : tprt_glu_value(kind, g, u, alpha, limit);
}

/// The gradients of |kind| at (g, u, dy): the exact formulas, or the fast ones with kFast.
template <bool kFast>
static __device__ __forceinline__ void tprt__glu_grad_value_of(int kind, float g, float u, float dy, float alpha,
                                                               float limit, float* dg, float* du) {
  if (kFast)
    tprt__glu_grad_value_fast(kind, g, u, dy, alpha, limit, dg, du);
  else
    tprt_glu_grad_value(kind, g, u, dy, alpha, limit, dg, du);
}

#endif  // TPRT_GLU_FAST_CUH_
