// tprt_cuda_amax, tprt_cuda_quantize(_with_amax) and tprt_cuda_dequantize, bitwise equal to
// cpu_quant.c: the arithmetic is
// tprt_quant.h's, shared with the CPU kernels; the layouts (rowwise, columnwise, transposed packed
// data, padded scale tensors) are the CPU kernels' loops, one thread per element or per block.
//   per-tensor fp8:  amax (a max is order-free: an atomic max of the non-negative bit patterns,
//                    NaN skipped as the CPU's comparison skips it; or the amax operand, read as
//                    tprt_quant_amax_operand reads it) -> one thread computes the scale
//                    -> one thread per element;
//   mxfp8 / nvfp4:   (nvfp4: global amax and scale first) one thread per block of 32 / 16 values,
//                    which writes the block's scale byte and its codes (a block's nibbles are whole
//                    bytes, so no two threads share a byte).
// Output tensors are zeroed first (padding of the scale tensors, unused nibbles), as on the CPU.
#include "tprt_cuda_internal.cuh"
#include "tprt_quant.h"

static __global__ void tprt__amax_kernel(const void* __restrict__ x, int dtype, int64_t n, unsigned* __restrict__ out) {
  __shared__ unsigned block_max;
  if (threadIdx.x == 0) block_max = 0;
  __syncthreads();
  unsigned m = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float a = tprt_quant_fabs(tprt__cuda_ld(x, dtype, i));
    if (a > 0.0f && tprt_f32_bits(a) > m) m = tprt_f32_bits(a);  // non-negative floats order as their bits
  }
  atomicMax(&block_max, m);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(out, block_max);
}

// scalars[0] = amax bits (in), or |amax_in| (an amax operand) when given; fp8: scalars[1] = sc,
// scale[0] = 1/sc; nvfp4: s_dec, sdec_mul.
static __global__ void tprt__scales_kernel(unsigned* __restrict__ scalars, const float* __restrict__ amax_in,
                                           int format, float max_finite, float* __restrict__ scale,
                                           float* __restrict__ global) {
  const float amax = amax_in ? tprt_quant_amax_operand(*amax_in) : tprt_f32_from_bits(scalars[0]);
  float* f = (float*)scalars;
  if (format == TPRT_QF_NVFP4) {
    float s_dec, mul;
    tprt_quant_nvfp4_global(amax, &s_dec, &mul);
    f[1] = s_dec;
    f[2] = mul;
    *global = s_dec;
  } else {
    float sc, inv;
    tprt_quant_fp8_scale(amax, format == TPRT_QF_FP8_E4M3, max_finite, &sc, &inv);
    f[1] = sc;
    *scale = inv;
  }
}

static __device__ __forceinline__ int64_t tprt__qidx(bool transposed, int64_t m, int64_t k, int64_t i, int64_t j) {
  return transposed ? j * m + i : i * k + j;
}

static __global__ void tprt__quant_fp8_kernel(const void* __restrict__ x, int dtype, int64_t m, int64_t k,
                                              bool transposed, bool e4m3, const unsigned* __restrict__ scalars,
                                              uint8_t* __restrict__ q) {
  const float sc = tprt_f32_from_bits(scalars[1]);
  const int64_t n = m * k, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += stride) {
    const int64_t i = t / k, j = t % k;
    const float v = tprt__cuda_ld(x, dtype, t) * sc;
    q[tprt__qidx(transposed, m, k, i, j)] = e4m3 ? tprt_f32_to_e4m3(v) : tprt_f32_to_e5m2(v);
  }
}

static __global__ void tprt__quant_block_kernel(const void* __restrict__ x, int dtype, int64_t m, int64_t k, int format,
                                                bool col, bool transposed, int bs, int64_t s1,
                                                const unsigned* __restrict__ scalars, uint8_t* __restrict__ q,
                                                uint8_t* __restrict__ scale) {
  const int64_t outer = col ? k : m, nblocks = (col ? m : k) / bs, total = outer * nblocks;
  const float s_dec = format == TPRT_QF_NVFP4 ? tprt_f32_from_bits(scalars[1]) : 1.0f;
  const float sdec_mul = format == TPRT_QF_NVFP4 ? tprt_f32_from_bits(scalars[2]) : 0.0f;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t o = t / nblocks, b = t % nblocks;
    float v[32];
    uint8_t codes[32];
    for (int e = 0; e < bs; ++e) {
      const int64_t i = col ? b * bs + e : o, j = col ? o : b * bs + e;
      v[e] = tprt__cuda_ld(x, dtype, i * k + j);
    }
    const uint8_t sb = tprt_quant_block(format, v, bs, s_dec, sdec_mul, codes);
    if (format == TPRT_QF_MXFP8) {
      scale[col ? b * s1 + o : o * s1 + b] = sb;
      for (int e = 0; e < bs; ++e) {
        const int64_t i = col ? b * bs + e : o, j = col ? o : b * bs + e;
        q[i * k + j] = codes[e];
      }
    } else {
      scale[o * s1 + b] = sb;
      for (int e = 0; e < bs; e += 2) {  // two nibbles per byte, element 2j in the low one
        const int64_t i = col ? b * bs + e : o, j = col ? o : b * bs + e;
        q[tprt__qidx(transposed, m, k, i, j) / 2] = (uint8_t)((codes[e] & 0xFu) | (uint8_t)(codes[e + 1] << 4));
      }
    }
  }
}

extern "C" tprt_status_t tprt_cuda_amax(const tprt_tensor_t* x, tprt_tensor_t* amax, cudaStream_t stream) {
  tprt_status_t s = tprt__check_amax("amax", x, amax, 0);
  if (s) return s;
  const int64_t n = tprt_tensor_numel(x);
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax->data, 0, sizeof(float), stream));  // +0: an empty x's amax
  if (n == 0) return NULL;
  const unsigned threads = TPRT__CUDA_EW_THREADS;
  tprt__amax_kernel<<<tprt__cuda_ew_blocks(n, threads), threads, 0, stream>>>(x->data, x->dtype, n,
                                                                              (unsigned*)amax->data);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                            tprt_tensor_t* global_scale, int format, int axis, cudaStream_t stream) {
  return tprt_cuda_quantize_with_amax(x, NULL, data, scale, global_scale, format, axis, stream);
}

extern "C" tprt_status_t tprt_cuda_quantize_with_amax(const tprt_tensor_t* x, const tprt_tensor_t* amax,
                                                      tprt_tensor_t* data, tprt_tensor_t* scale,
                                                      tprt_tensor_t* global_scale, int format, int axis,
                                                      cudaStream_t stream) {
  tprt__quant_layout_t l;
  tprt_status_t s = tprt__check_quant("quantize", x, data, scale, global_scale, format, axis, &l);
  if (!s && amax) s = tprt__check_amax("quantize", NULL, amax, format);
  if (s) return s;
  const int64_t m = x->dims[0], k = x->dims[1], n = m * k;
  const bool col = axis == TPRT_QUANT_COLUMNWISE, transposed = col && format != TPRT_QUANT_MXFP8;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scale->data, 0, tprt_tensor_bytes(scale), stream));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data->data, 0, tprt_tensor_bytes(data), stream));
  unsigned* scalars = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&scalars, 4 * sizeof(unsigned), stream));
  cudaError_t err = cudaMemsetAsync(scalars, 0, 4 * sizeof(unsigned), stream);
  const bool per_tensor = format == TPRT_QUANT_FP8_E4M3 || format == TPRT_QUANT_FP8_E5M2;
  const unsigned threads = TPRT__CUDA_EW_THREADS;
  // The per-tensor amax: the operand's, or x's own (an empty x keeps the zeroed scalars: amax 0).
  const float* amax_in = amax ? (const float*)amax->data : NULL;
  if (err == cudaSuccess && (per_tensor || format == TPRT_QUANT_NVFP4)) {
    if (n > 0 && !amax_in)
      tprt__amax_kernel<<<tprt__cuda_ew_blocks(n, threads), threads, 0, stream>>>(x->data, x->dtype, n, scalars);
    tprt__scales_kernel<<<1, 1, 0, stream>>>(scalars, amax_in, format, per_tensor ? tprt_quant_max_finite(x->dtype) : 0.0f,
                                             per_tensor ? (float*)scale->data : NULL,
                                             per_tensor ? NULL : (float*)global_scale->data);
  }
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err == cudaSuccess && n > 0) {
    if (per_tensor) {
      tprt__quant_fp8_kernel<<<tprt__cuda_ew_blocks(n, threads), threads, 0, stream>>>(
          x->data, x->dtype, m, k, transposed, format == TPRT_QUANT_FP8_E4M3, scalars, (uint8_t*)data->data);
    } else {
      const int64_t blocks = n / l.block;
      tprt__quant_block_kernel<<<tprt__cuda_ew_blocks(blocks, threads), threads, 0, stream>>>(
          x->data, x->dtype, m, k, format, col, transposed, l.block, l.scale_dims[1], scalars, (uint8_t*)data->data,
          (uint8_t*)scale->data);
    }
    err = cudaGetLastError();
  }
  tprt__cuda_free_async(scalars, stream);
  if (err != cudaSuccess) return tprt__cuda_make_status(err, "quantize kernels", __FILE__, __LINE__);
  return NULL;
}

static __global__ void tprt__dequant_kernel(const uint8_t* __restrict__ q, const uint8_t* __restrict__ sb,
                                            const float* __restrict__ tensor_scale, const float* __restrict__ global,
                                            void* __restrict__ x, int dtype, int64_t m, int64_t k, int format, bool col,
                                            bool transposed, int64_t s1) {
  const int64_t n = m * k, stride = (int64_t)gridDim.x * blockDim.x;
  const float ts = tensor_scale ? *tensor_scale : 0.0f, gs = global ? *global : 0.0f;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += stride) {
    const int64_t i = t / k, j = t % k, e = tprt__qidx(transposed, m, k, i, j);
    const uint8_t code = format == TPRT_QF_NVFP4 ? (uint8_t)(e % 2 == 0 ? q[e / 2] & 0xFu : q[e / 2] >> 4) : q[e];
    const uint8_t scale_byte = format == TPRT_QF_MXFP8   ? sb[col ? (i / 32) * s1 + j : i * s1 + j / 32]
                               : format == TPRT_QF_NVFP4 ? sb[col ? j * s1 + i / 16 : i * s1 + j / 16]
                                                         : 0;
    tprt__cuda_st(x, dtype, t, tprt_dequant_value(format, code, scale_byte, ts, gs));
  }
}

extern "C" tprt_status_t tprt_cuda_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                              const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format,
                                              int axis, cudaStream_t stream) {
  tprt__quant_layout_t l;
  tprt_status_t s = tprt__check_quant("dequantize", x, data, scale, global_scale, format, axis, &l);
  if (s) return s;
  const int64_t m = x->dims[0], k = x->dims[1];
  if (m * k == 0) return NULL;
  const bool col = axis == TPRT_QUANT_COLUMNWISE, transposed = col && format != TPRT_QUANT_MXFP8;
  const bool per_tensor = format == TPRT_QUANT_FP8_E4M3 || format == TPRT_QUANT_FP8_E5M2;
  tprt__dequant_kernel<<<tprt__cuda_ew_blocks(m * k, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0, stream>>>(
      (const uint8_t*)data->data, (const uint8_t*)scale->data, per_tensor ? (const float*)scale->data : NULL,
      format == TPRT_QUANT_NVFP4 ? (const float*)global_scale->data : NULL, x->data, x->dtype, m, k, format, col,
      transposed, l.scale_dims[1]);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}
