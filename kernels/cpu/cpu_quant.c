// tprt_cpu_quantize / tprt_cpu_dequantize: FP8 (per-tensor current scaling), MXFP8 and NVFP4,
// and tprt_cpu_amax, the per-tensor amax that tprt_cpu_quantize_with_amax takes instead of x's own,
// bit for bit the algorithms of research/gtp-grouped-quant.md §(b) (TransformerEngine's), with
// the layouts of docs/dialect.md ("Quantization ops") and dialect/tpc_verify_quant.c:
//   fp8_e4m3/e5m2  data [M,K] (columnwise [K,M]), scale f32[1] = scale_inv
//   mxfp8          data [M,K] E4M3, scale E8M0 rowwise [rup(M,128), rup(K/32,4)],
//                                              columnwise [rup(M/32,4), rup(K,128)]
//   nvfp4          data E2M1 rowwise [M,K], columnwise [K,M]; scale E4M3 rowwise
//                  [rup(M,128), rup(K/16,4)], columnwise [rup(K,128), rup(M/16,4)]; global f32[1]
// Scale padding is written as zero. Amaxes ignore NaN (CUDA fmaxf semantics).
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"
#include "tprt_quant.h"

static const char* const tprt__format_names[] = {"fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4"};
static const char* const tprt__axis_names[] = {"rowwise", "columnwise"};

static int64_t tprt__rup(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

static tprt__quant_layout_t tprt__layout(int format, int axis, int64_t m, int64_t k) {
  tprt__quant_layout_t l;
  bool col = axis == TPRT_QUANT_COLUMNWISE;
  bool transposed = col && format != TPRT_QUANT_MXFP8;
  l.data_dims[0] = transposed ? k : m;
  l.data_dims[1] = transposed ? m : k;
  l.scale_rank = 2;
  switch (format) {
    case TPRT_QUANT_FP8_E4M3:
    case TPRT_QUANT_FP8_E5M2:
      l.data_dtype = format == TPRT_QUANT_FP8_E4M3 ? TPRT_DTYPE_F8E4M3FN : TPRT_DTYPE_F8E5M2;
      l.scale_dtype = TPRT_DTYPE_F32;
      l.block = 0;
      l.scale_rank = 1;
      l.scale_dims[0] = 1;
      l.scale_dims[1] = 1;
      break;
    case TPRT_QUANT_MXFP8:
      l.data_dtype = TPRT_DTYPE_F8E4M3FN;
      l.scale_dtype = TPRT_DTYPE_F8E8M0FNU;
      l.block = 32;
      l.scale_dims[0] = col ? tprt__rup(m / 32, 4) : tprt__rup(m, 128);
      l.scale_dims[1] = col ? tprt__rup(k, 128) : tprt__rup(k / 32, 4);
      break;
    default:
      l.data_dtype = TPRT_DTYPE_F4E2M1FN;
      l.scale_dtype = TPRT_DTYPE_F8E4M3FN;
      l.block = 16;
      l.scale_dims[0] = col ? tprt__rup(k, 128) : tprt__rup(m, 128);
      l.scale_dims[1] = tprt__rup(((col ? m : k) + 15) / 16, 4);
      break;
  }
  return l;
}

// Validates the operands of either direction; |x| is the high-precision side.
tprt_status_t tprt__check_quant(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* data,
                                       const tprt_tensor_t* scale, const tprt_tensor_t* global, int format, int axis,
                                       tprt__quant_layout_t* out) {
  char a[96], w[96];
  if (format < 0 || format > 3)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: format=%d is not 0 (fp8_e4m3), 1 (fp8_e5m2), 2 (mxfp8) or 3 (nvfp4)", op, format);
  if (axis < 0 || axis > 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: axis=%d is not 0 (rowwise) or 1 (columnwise)", op, axis);
  unsigned any = (1u << TPRT_DTYPE_COUNT) - 1u;
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "data", data, 2, any);
  if (!s) s = tprt__check(op, "scale", scale, -1, any);
  if (s) return s;
  const char* fname = tprt__format_names[format];
  const char* aname = tprt__axis_names[axis];
  int64_t m = x->dims[0], k = x->dims[1];
  tprt__quant_layout_t l = tprt__layout(format, axis, m, k);
  if (l.block > 0 && (axis ? m : k) % l.block != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s %s blocks of %d need %s=%lld divisible by %d", op,
                            fname, aname, l.block, axis ? "M" : "K", (long long)(axis ? m : k), l.block);
  if (data->dtype != l.data_dtype || data->dims[0] != l.data_dims[0] || data->dims[1] != l.data_dims[1])
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: %s %s data for x [%lld,%lld] must be [%lld,%lld] %s; got %s", op, fname, aname,
                            (long long)m, (long long)k, (long long)l.data_dims[0], (long long)l.data_dims[1],
                            tprt_dtype_name(l.data_dtype), tprt__shape_str(data, a, sizeof a));
  bool scale_ok = scale->dtype == l.scale_dtype && scale->rank == l.scale_rank && scale->dims[0] == l.scale_dims[0] &&
                  (l.scale_rank == 1 || scale->dims[1] == l.scale_dims[1]);
  if (!scale_ok) {
    if (l.scale_rank == 1)
      snprintf(w, sizeof w, "[1] %s", tprt_dtype_name(l.scale_dtype));
    else
      snprintf(w, sizeof w, "[%lld,%lld] %s", (long long)l.scale_dims[0], (long long)l.scale_dims[1],
               tprt_dtype_name(l.scale_dtype));
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s %s scale for x [%lld,%lld] must be %s; got %s", op,
                            fname, aname, (long long)m, (long long)k, w, tprt__shape_str(scale, a, sizeof a));
  }
  bool needs_global = format == TPRT_QUANT_NVFP4;
  if (needs_global != (global != NULL))
    return tprt_make_status(
        TPRT_STATUS_INVALID_ARGUMENT,
        needs_global ? "%s: nvfp4 needs a global_scale [1] f32" : "%s: only nvfp4 has a global_scale; %s does not", op,
        fname);
  if (global) {
    s = tprt__check(op, "global_scale", global, 1, TPRT__M(TPRT_DTYPE_F32));
    if (!s && global->dims[0] != 1)
      s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: global_scale must be [1] f32; got %s", op,
                           tprt__shape_str(global, a, sizeof a));
    if (s) return s;
  }
  *out = l;
  return NULL;
}

#define tprt__fabs tprt_quant_fabs

// Element (i, j) of the [m,k] input in the quantized layout: block-major along the scaled axis.
static inline int64_t tprt__data_index(bool transposed, int64_t m, int64_t k, int64_t i, int64_t j) {
  return transposed ? j * m + i : i * k + j;
}

static void tprt__put_nibble(uint8_t* p, int64_t e, uint8_t v) {
  if (e % 2 == 0)
    p[e / 2] = (uint8_t)((p[e / 2] & 0xF0u) | (v & 0xFu));
  else
    p[e / 2] = (uint8_t)((p[e / 2] & 0x0Fu) | (uint8_t)(v << 4));
}

static uint8_t tprt__get_nibble(const uint8_t* p, int64_t e) {
  return (uint8_t)(e % 2 == 0 ? p[e / 2] & 0xFu : p[e / 2] >> 4);
}

// The largest finite value of the input dtype (TE's value_for_inf).
tprt_status_t tprt__check_amax(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* amax, int format) {
  char a[96];
  tprt_status_t s = x ? tprt__check(op, "x", x, -1, TPRT__FLOATS) : NULL;
  if (!s) s = tprt__check(op, "amax", amax, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s && amax->dims[0] != 1)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: amax must be [1] f32; got %s", op,
                         tprt__shape_str(amax, a, sizeof a));
  if (!s && !x && format == TPRT_QUANT_MXFP8)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                         "%s: mxfp8 scales every block by its own amax and takes no amax operand", op);
  return s;
}

// max |x| over the n elements of x, NaN skipped (a NaN compares false).
static float tprt__amax_of(const tprt_tensor_t* x) {
  float amax = 0.0f;
  int64_t n = tprt_tensor_numel(x);
  for (int64_t i = 0; i < n; ++i) {
    float a = tprt__fabs(tprt__ld(x->data, x->dtype, i));
    if (a > amax) amax = a;
  }
  return amax;
}

tprt_status_t tprt_cpu_amax(const tprt_tensor_t* x, tprt_tensor_t* amax) {
  tprt_status_t s = tprt__check_amax("amax", x, amax, 0);
  if (s) return s;
  ((float*)amax->data)[0] = tprt__amax_of(x);
  return NULL;
}

tprt_status_t tprt_cpu_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                tprt_tensor_t* global_scale, int format, int axis) {
  return tprt_cpu_quantize_with_amax(x, NULL, data, scale, global_scale, format, axis);
}

tprt_status_t tprt_cpu_quantize_with_amax(const tprt_tensor_t* x, const tprt_tensor_t* amax_in, tprt_tensor_t* data,
                                          tprt_tensor_t* scale, tprt_tensor_t* global_scale, int format, int axis) {
  const char* op = "quantize";
  tprt__quant_layout_t l;
  tprt_status_t s = tprt__check_quant(op, x, data, scale, global_scale, format, axis, &l);
  if (!s && amax_in) s = tprt__check_amax(op, NULL, amax_in, format);
  if (s) return s;
  int64_t m = x->dims[0], k = x->dims[1];
  bool col = axis == TPRT_QUANT_COLUMNWISE, transposed = col && format != TPRT_QUANT_MXFP8;
  memset(scale->data, 0, tprt_tensor_bytes(scale));
  memset(data->data, 0, tprt_tensor_bytes(data));
  uint8_t* q = (uint8_t*)data->data;
  if (format == TPRT_QUANT_FP8_E4M3 || format == TPRT_QUANT_FP8_E5M2) {
    bool e4m3 = format == TPRT_QUANT_FP8_E4M3;
    float amax = amax_in ? tprt_quant_amax_operand(((const float*)amax_in->data)[0]) : tprt__amax_of(x);
    float sc, scale_inv;
    tprt_quant_fp8_scale(amax, e4m3, tprt_quant_max_finite(x->dtype), &sc, &scale_inv);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) {
        float v = tprt__ld(x->data, x->dtype, i * k + j) * sc;
        q[tprt__data_index(transposed, m, k, i, j)] = e4m3 ? tprt_f32_to_e4m3(v) : tprt_f32_to_e5m2(v);
      }
    ((float*)scale->data)[0] = scale_inv;
    return NULL;
  }
  // Block formats: blocks of |bs| consecutive elements along K (rowwise) or M (columnwise).
  int64_t bs = l.block, s1 = l.scale_dims[1];
  int64_t outer = col ? k : m, nblocks = (col ? m : k) / bs;
  float s_dec = 1.0f, sdec_mul = 0.0f;
  if (format == TPRT_QUANT_NVFP4) {
    float gamax = amax_in ? tprt_quant_amax_operand(((const float*)amax_in->data)[0]) : tprt__amax_of(x);
    tprt_quant_nvfp4_global(gamax, &s_dec, &sdec_mul);
    ((float*)global_scale->data)[0] = s_dec;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < nblocks; ++b) {
      float v[32];
      uint8_t codes[32];
      for (int64_t e = 0; e < bs; ++e) {
        int64_t i = col ? b * bs + e : o, j = col ? o : b * bs + e;
        v[e] = tprt__ld(x->data, x->dtype, i * k + j);
      }
      uint8_t sb = tprt_quant_block(format, v, (int)bs, s_dec, sdec_mul, codes);
      if (format == TPRT_QUANT_MXFP8) {
        // Rowwise scale [row, block]; columnwise [block, column].
        ((uint8_t*)scale->data)[col ? b * s1 + o : o * s1 + b] = sb;
        for (int64_t e = 0; e < bs; ++e) {
          int64_t i = col ? b * bs + e : o, j = col ? o : b * bs + e;
          q[i * k + j] = codes[e];
        }
      } else {
        ((uint8_t*)scale->data)[o * s1 + b] = sb;  // rowwise [row, block]; columnwise [column, block]
        for (int64_t e = 0; e < bs; ++e) {
          int64_t i = col ? b * bs + e : o, j = col ? o : b * bs + e;
          tprt__put_nibble(q, tprt__data_index(transposed, m, k, i, j), codes[e]);
        }
      }
    }
  return NULL;
}

tprt_status_t tprt_cpu_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                  const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format, int axis) {
  const char* op = "dequantize";
  tprt__quant_layout_t l;
  tprt_status_t s = tprt__check_quant(op, x, data, scale, global_scale, format, axis, &l);
  if (s) return s;
  int64_t m = x->dims[0], k = x->dims[1];
  bool col = axis == TPRT_QUANT_COLUMNWISE, transposed = col && format != TPRT_QUANT_MXFP8;
  const uint8_t* q = (const uint8_t*)data->data;
  const uint8_t* sb = (const uint8_t*)scale->data;
  int64_t s1 = l.scale_dims[1];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = tprt__data_index(transposed, m, k, i, j);
      float tensor_scale = format <= TPRT_QUANT_FP8_E5M2 ? ((const float*)scale->data)[0] : 0.0f;
      float global = format == TPRT_QUANT_NVFP4 ? ((const float*)global_scale->data)[0] : 0.0f;
      uint8_t code = format == TPRT_QUANT_NVFP4 ? tprt__get_nibble(q, e) : q[e];
      uint8_t scale_byte = format == TPRT_QUANT_MXFP8   ? sb[col ? (i / 32) * s1 + j : i * s1 + j / 32]
                           : format == TPRT_QUANT_NVFP4 ? sb[col ? j * s1 + i / 16 : i * s1 + j / 16]
                                                        : 0;
      tprt__st(x->data, x->dtype, i * k + j, tprt_dequant_value(format, code, scale_byte, tensor_scale, global));
    }
  return NULL;
}
