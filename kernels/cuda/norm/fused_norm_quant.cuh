// The quantizing form of the fused norm kernel (fused_norm_kernel.cuh, instantiated in
// the quantizing files of forms/; tp.fused_allreduce_add_rmsnorm_quantize): its arguments and the
// quantization of a thread's values of a row, on tprt_quant.h's arithmetic.
#pragma once

#include "fused_norm.cuh"
#include "tprt_quant.h"

// The quantization of normed (tprt_cuda_fused_quant_t) as the kernel takes it. format < 0: none.
// Block formats (mxfp8: 32 columns, nvfp4: 16) write a scale byte per block, the scale tensor
// [srows, s1] (its padding zero); the per-tensor formats' multiplier and nvfp4's global factors
// come from *amax; tensor_scale (fp8's scale_inv, nvfp4's global decode scale) is one f32.
// bs_shift is log2(bs) and row_blocks H / bs (no division in the kernel).
struct tprt__fn_quant_t {
  int format, bs;
  uint8_t* data;
  uint8_t* scale;
  float* tensor_scale;
  const float* amax;
  int64_t s1, srows;
  float max_finite;
  int bs_shift;
  int64_t row_blocks;
};

// A value as normed holds it (rounded to the residual's dtype DR), which tp.quantize reads.
template <int DR>
static __device__ __forceinline__ float tprt__fn_as_stored(float v) {
  if (DR == TPRT_DTYPE_BF16) return tprt_bf16_to_f32(tprt_f32_to_bf16(v));
  if (DR == TPRT_DTYPE_F16) return tprt_f16_to_f32(tprt_f32_to_f16(v));
  return v;
}

// Quantizes this thread's V adjacent values |y| of row |row| at column |j| (all inside the row: a
// block's columns are whole, H being a multiple of its size). A block's bs columns are bs / V
// adjacent threads of one warp (their lanes are consecutive from a multiple of bs / V, and they share
// their groups, hence their loop trips), which combine their amax by shuffles: a maximum, so any
// order gives tprt_quant_block's. |mul| is the per-tensor formats' multiplier, |s_dec| and
// |sdec_mul| nvfp4's global factors.
template <int V>
static __device__ __forceinline__ void tprt__fn_quantize(const tprt__fn_quant_t& q, int64_t row, int64_t h, int64_t j,
                                                         const float (&y)[V], float mul, float s_dec, float sdec_mul) {
  uint8_t code[V];
  const unsigned lane = threadIdx.x & 31u;
  const int gt = q.bs / V;  // threads of a block (0: per tensor)
  const unsigned mask = gt >= 32 ? 0xFFFFFFFFu : gt > 0 ? ((1u << gt) - 1u) << (lane & ~(unsigned)(gt - 1)) : 0u;
  if (gt > 0) {
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < V; ++i) m = tprt_quant_amax_step(m, y[i]);
    for (int o = gt / 2; o >= 1; o /= 2) {
      const float other = __shfl_xor_sync(mask, m, o);
      m = other > m ? other : m;
    }
    const uint8_t sb = tprt_quant_block_scale(q.format, m, s_dec, sdec_mul, &mul);
    if ((lane & (unsigned)(gt - 1)) == 0) q.scale[row * q.s1 + (j >> q.bs_shift)] = sb;
  }
#pragma unroll
  for (int i = 0; i < V; ++i) code[i] = tprt_quant_code(q.format, y[i], mul);
  const int64_t at = row * h + j;
  if (q.format != TPRT_QF_NVFP4) {
#pragma unroll
    for (int i = 0; i < V; ++i) q.data[at + i] = code[i];
  } else if (V == 2) {  // two nibbles a byte, element 2j in the low one (j is even)
    q.data[at / 2] = (uint8_t)((code[0] & 0xFu) | (uint8_t)(code[V - 1] << 4));
  } else {  // one element a thread: the even one takes its neighbour's nibble
    const unsigned odd = __shfl_down_sync(mask, (unsigned)code[0], 1);
    if ((j & 1) == 0) q.data[at / 2] = (uint8_t)((code[0] & 0xFu) | (uint8_t)(odd << 4));
  }
}

