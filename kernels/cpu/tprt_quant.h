// The arithmetic of quantization, shared by the CPU kernels (cpu_quant.c) and the CUDA kernels
// (kernels/cuda/quant/quant.cu): scale selection and code conversion for one tensor, one block or one
// element, on values already widened to f32 (docs/numerics.md, "Quantization"). Each kernel does
// its own loads, stores and layouts around these, so both compute the same bits.
#ifndef TPRT_QUANT_H_
#define TPRT_QUANT_H_

#include <float.h>

#include "tprt_numerics.h"

/// Formats, as tprt_quant_format_t (tprt_cpu_kernels.h).
#define TPRT_QF_FP8_E4M3 0
#define TPRT_QF_FP8_E5M2 1
#define TPRT_QF_MXFP8 2
#define TPRT_QF_NVFP4 3

/// |v| (clears the sign bit; a NaN stays NaN).
TPRT_HD float tprt_quant_fabs(float v) { return tprt_f32_from_bits(tprt_f32_bits(v) & 0x7FFFFFFFu); }

/// An amax operand (the whole tensor's amax: tp.amax of each shard, then a max all-reduce) as the
/// scales read it: |a|, and 0 for NaN, so that it can never differ from the amax of a tensor
/// itself, where a NaN element counts for nothing. tp.amax never makes a NaN or a negative value.
TPRT_HD float tprt_quant_amax_operand(float a) { return a != a ? 0.0f : tprt_quant_fabs(a); }

/// Per-tensor fp8 (current scaling, TE's): the multiplier |sc| for an input whose largest
/// magnitude is |amax| (NaN never counts: callers skip it), and the stored scale_inv = 1/sc.
/// |max_finite| is the input dtype's largest finite value (TE's value_for_inf).
TPRT_HD void tprt_quant_fp8_scale(float amax, bool e4m3, float max_finite, float* out_sc, float* out_scale_inv) {
  float sc = 1.0f;
  if (amax != 0.0f && amax <= FLT_MAX) {
    sc = TPRT_DIVF(e4m3 ? 448.0f : 57344.0f, amax);
    if (sc > FLT_MAX) sc = max_finite;
  }
  *out_sc = sc;
  *out_scale_inv = TPRT_DIVF(1.0f, sc);
}

/// The largest finite value of a float storage dtype (TE's value_for_inf of the fp8 scale):
/// bf16's, f16's, else f32's.
TPRT_HD float tprt_quant_max_finite(int dtype) {
  return dtype == TPRT_DTYPE_BF16 ? tprt_bf16_to_f32(0x7F7Fu) : dtype == TPRT_DTYPE_F16 ? 65504.0f : FLT_MAX;
}
/// NVFP4's global scale from the tensor's amax: the decode factor s_dec (stored) and the factor
/// that turns a block amax into its E4M3 scale (s_enc / 6).
TPRT_HD void tprt_quant_nvfp4_global(float gamax, float* out_s_dec, float* out_sdec_mul) {
  float s_enc = TPRT_DIVF(448.0f * 6.0f, gamax);
  s_enc = fminf(s_enc, FLT_MAX);
  if (gamax == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
  // TE forms 1/S_enc in double; for binary32 operands that rounds to the same float as the f32
  // division (double rounding of a quotient is innocuous for p' >= 2p + 2).
  *out_s_dec = TPRT_DIVF(1.0f, s_enc);
  *out_sdec_mul = s_enc * TPRT_DIVF(1.0f, 6.0f);
}

/// The running block amax: |m| and |v|'s magnitude, the larger (a NaN never counts; a maximum is
/// order-free, so a block's lanes may combine in any order).
TPRT_HD float tprt_quant_amax_step(float m, float v) {
  float a = tprt_quant_fabs(v);
  return a > m ? a : m;
}

/// A block's scale byte from its amax |bamax| (mxfp8: E8M0; nvfp4: E4M3 under the global scale,
/// |s_dec| and |sdec_mul| of tprt_quant_nvfp4_global), and the multiplier its values take before
/// their codes (*out_mul).
TPRT_HD uint8_t tprt_quant_block_scale(int format, float bamax, float s_dec, float sdec_mul, float* out_mul) {
  if (format == TPRT_QF_MXFP8) {
    uint8_t se = tprt_e8m0_rceil(bamax * (float)(1.0 / 448.0));
    *out_mul = tprt_e8m0_rcp(se);
    return se;
  }
  float sdec = bamax * sdec_mul;
  uint8_t sf = tprt_f32_to_e4m3(fminf(sdec, FLT_MAX));
  float sfd = tprt_e4m3_to_f32(sf);
  *out_mul = sfd == 0.0f ? 0.0f : fminf(TPRT_DIVF(1.0f, sfd * s_dec), FLT_MAX);
  return sf;
}

/// A value's code under the multiplier |mul| (the block's, or per-tensor fp8's sc): an E4M3 byte
/// (fp8_e4m3, mxfp8), an E5M2 byte (fp8_e5m2) or an E2M1 nibble (nvfp4).
TPRT_HD uint8_t tprt_quant_code(int format, float v, float mul) {
  switch (format) {
    case TPRT_QF_FP8_E5M2:
      return tprt_f32_to_e5m2(v * mul);
    case TPRT_QF_NVFP4:
      return tprt_f32_to_e2m1(v * mul);
    default:
      return tprt_f32_to_e4m3(v * mul);
  }
}

/// One block of |bs| values |v| (mxfp8: 32, E8M0 scale; nvfp4: 16, E4M3 scale under the global
/// scale): returns the scale byte and writes each value's code (an E4M3 byte, or an E2M1 nibble).
TPRT_HD uint8_t tprt_quant_block(int format, const float* v, int bs, float s_dec, float sdec_mul, uint8_t* codes) {
  float bamax = 0.0f;
  for (int e = 0; e < bs; ++e) bamax = tprt_quant_amax_step(bamax, v[e]);
  float mul;
  uint8_t sb = tprt_quant_block_scale(format, bamax, s_dec, sdec_mul, &mul);
  for (int e = 0; e < bs; ++e) codes[e] = tprt_quant_code(format, v[e], mul);
  return sb;
}

/// One element back to f32: its code, its block's scale byte (block formats), the tensor's
/// scale_inv (fp8) and the global decode scale (nvfp4).
TPRT_HD float tprt_dequant_value(int format, uint8_t code, uint8_t scale_byte, float scale_inv, float global) {
  switch (format) {
    case TPRT_QF_FP8_E4M3:
      return tprt_e4m3_to_f32(code) * scale_inv;
    case TPRT_QF_FP8_E5M2:
      return tprt_e5m2_to_f32(code) * scale_inv;
    case TPRT_QF_MXFP8:
      return tprt_e4m3_to_f32(code) * tprt_e8m0_to_f32(scale_byte);
    default:
      return (tprt_e2m1_to_f32(code) * tprt_e4m3_to_f32(scale_byte)) * global;
  }
}

#endif  // TPRT_QUANT_H_
