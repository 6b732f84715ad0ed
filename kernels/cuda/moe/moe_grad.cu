// The CUDA MoE backward kernels, bitwise equal to cpu_moe_grad.c (the formulas are there):
//   moe_permute_grad    dx[t] = ((+0 + dy[row(t,0)]) + dy[row(t,1)]) + ..., one thread per element
//   moe_unpermute_grad  dy[row(t,j)] = w[t,j]·dout[t] (one thread per element), and
//                       dweights[t,j] = the canonical row dot of y[row(t,j)] and dout[t] (one
//                       256-thread block per slot: the 256 lanes of the row reduction)
//   moe_route_grad      tprt_moe_route_grad_row of tprt_numerics.h per token (one thread each)
// row(t,j) is the row whose row_map entry is t·k + j: a first kernel inverts row_map on the device.
// Shapes are validated as by the CPU kernels; the data (row_map a permutation, indices distinct
// experts) is not (device memory): a bad row_map leaves outputs unspecified, never reads out of
// bounds. Work space is allocated stream-ordered.
#include "tprt_cuda_internal.cuh"

#define TPRT__RETURN_IF_ERROR_CUDA_CHECK(expr) \
  do {                                        \
    tprt_status_t tprt__st = (expr);          \
    if (tprt__st) return tprt__st;            \
  } while (0)

static __global__ void tprt__invert_map_kernel(const int32_t* __restrict__ map, int64_t rows, int64_t* __restrict__ inv) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
    int32_t s = map[r];
    if (s >= 0 && s < rows) inv[s] = r;
  }
}

// inv[slot] = row, stream-ordered allocation (rows entries, zero-filled so that a bad map stays in
// bounds).
static tprt_status_t tprt__invert_map(const tprt_tensor_t* row_map, int64_t rows, int64_t** inv, cudaStream_t stream) {
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)inv, (size_t)rows * sizeof(int64_t), stream));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(*inv, 0, (size_t)rows * sizeof(int64_t), stream));
  dim3 grid(tprt__cuda_ew_blocks(rows, TPRT__CUDA_EW_THREADS));
  tprt__invert_map_kernel<<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>((const int32_t*)row_map->data, rows, *inv);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}

template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__permute_grad_kernel(const void* __restrict__ dy, const int64_t* __restrict__ inv, void* __restrict__ dx,
                              int64_t t, int64_t h, int k) {
  const int64_t total = t * h, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t tok = i / h, j = i % h;
    float acc = 0.0f;
    for (int s = 0; s < k; ++s) acc = __fadd_rn(acc, tprt__cuda_ld(dy, D, inv[tok * k + s] * h + j));
    tprt__cuda_st(dx, D, i, acc);
  }
}

extern "C" tprt_status_t tprt_cuda_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map,
                                                    tprt_tensor_t* dx, int top_k, cudaStream_t stream) {
  TPRT__RETURN_IF_ERROR_CUDA_CHECK(tprt__check_moe_permute_grad(dy, row_map, dx, top_k));
  const int64_t t = dx->dims[0], h = dx->dims[1], rows = t * top_k;
  if (rows == 0 || h == 0) return NULL;
  int64_t* inv = NULL;
  tprt_status_t s = tprt__invert_map(row_map, rows, &inv, stream);
  if (!s) {
    dim3 grid(tprt__cuda_ew_blocks(t * h, TPRT__CUDA_EW_THREADS));
    switch (dx->dtype) {
      case TPRT_DTYPE_BF16:
        tprt__permute_grad_kernel<TPRT_DTYPE_BF16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(dy->data, inv, dx->data,
                                                                                               t, h, top_k);
        break;
      case TPRT_DTYPE_F16:
        tprt__permute_grad_kernel<TPRT_DTYPE_F16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(dy->data, inv, dx->data,
                                                                                              t, h, top_k);
        break;
      default:
        tprt__permute_grad_kernel<TPRT_DTYPE_F32><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(dy->data, inv, dx->data,
                                                                                              t, h, top_k);
        break;
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) s = tprt__cuda_make_status(e, "moe_permute_grad kernel", __FILE__, __LINE__);
  }
  if (inv) tprt__cuda_free_async(inv, stream);
  return s;
}

template <int D>
static __global__ void __launch_bounds__(TPRT__CUDA_EW_THREADS)
    tprt__unpermute_dy_kernel(const void* __restrict__ dout, const float* __restrict__ w, const int64_t* __restrict__ inv,
                              void* __restrict__ dy, int64_t t, int64_t h, int64_t k) {
  const int64_t total = t * k * h, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t slot = i / h, j = i % h, tok = slot / k;
    tprt__cuda_st(dy, D, inv[slot] * h + j, __fmul_rn(w[slot], tprt__cuda_ld(dout, D, tok * h + j)));
  }
}

// One block per slot: lane j takes fmaf(y[i], dout[i], lane) for i = j, j+256, ..., then the row tree.
template <int D>
static __global__ void __launch_bounds__(TPRT_ROW_LANES)
    tprt__unpermute_dw_kernel(const void* __restrict__ dout, const void* __restrict__ y, const int64_t* __restrict__ inv,
                              float* __restrict__ dw, int64_t slots, int64_t h, int64_t k) {
  __shared__ float sm[TPRT_ROW_LANES / 32 + 1];
  for (int64_t slot = blockIdx.x; slot < slots; slot += gridDim.x) {
    const int64_t r = inv[slot], tok = slot / k;
    float v = 0.0f;
    for (int64_t i = threadIdx.x; i < h; i += TPRT_ROW_LANES)
      v = __fmaf_rn(tprt__cuda_ld(y, D, r * h + i), tprt__cuda_ld(dout, D, tok * h + i), v);
    const float total = tprt__cuda_row_tree(v, sm);
    if (threadIdx.x == 0) dw[slot] = total;
  }
}

extern "C" tprt_status_t tprt_cuda_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                                      const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                                      tprt_tensor_t* dy, tprt_tensor_t* dweights, cudaStream_t stream) {
  TPRT__RETURN_IF_ERROR_CUDA_CHECK(tprt__check_moe_unpermute_grad(dout, y, row_map, weights, dy, dweights));
  const int64_t t = weights->dims[0], k = weights->dims[1], h = y->dims[1], rows = t * k;
  if (rows == 0) return NULL;
  int64_t* inv = NULL;
  tprt_status_t s = tprt__invert_map(row_map, rows, &inv, stream);
  if (!s) {
    const float* w = (const float*)weights->data;
    float* dw = (float*)dweights->data;
    dim3 grid(tprt__cuda_ew_blocks(rows * (h > 0 ? h : 1), TPRT__CUDA_EW_THREADS));
    dim3 slots((unsigned)(rows < 65536 ? rows : 65536));
    switch (y->dtype) {
      case TPRT_DTYPE_BF16:
        if (h) tprt__unpermute_dy_kernel<TPRT_DTYPE_BF16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(dout->data, w, inv, dy->data, t, h, k);
        tprt__unpermute_dw_kernel<TPRT_DTYPE_BF16><<<slots, TPRT_ROW_LANES, 0, stream>>>(dout->data, y->data, inv, dw, rows, h, k);
        break;
      case TPRT_DTYPE_F16:
        if (h) tprt__unpermute_dy_kernel<TPRT_DTYPE_F16><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(dout->data, w, inv, dy->data, t, h, k);
        tprt__unpermute_dw_kernel<TPRT_DTYPE_F16><<<slots, TPRT_ROW_LANES, 0, stream>>>(dout->data, y->data, inv, dw, rows, h, k);
        break;
      default:
        if (h) tprt__unpermute_dy_kernel<TPRT_DTYPE_F32><<<grid, TPRT__CUDA_EW_THREADS, 0, stream>>>(dout->data, w, inv, dy->data, t, h, k);
        tprt__unpermute_dw_kernel<TPRT_DTYPE_F32><<<slots, TPRT_ROW_LANES, 0, stream>>>(dout->data, y->data, inv, dw, rows, h, k);
        break;
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) s = tprt__cuda_make_status(e, "moe_unpermute_grad kernels", __FILE__, __LINE__);
  }
  if (inv) tprt__cuda_free_async(inv, stream);
  return s;
}

template <int D>
static __global__ void __launch_bounds__(64)
    tprt__route_grad_kernel(const void* __restrict__ logits, const int32_t* __restrict__ idx,
                            const float* __restrict__ dw, void* __restrict__ dlogits, float* __restrict__ work,
                            int64_t t, int64_t e, int top_k, int normalize) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < t; row += stride) {
    float *p = work + row * 2 * e, *dl = p + e;
    for (int64_t i = 0; i < e; ++i) p[i] = tprt__cuda_ld(logits, D, row * e + i);
    tprt_moe_route_grad_row(p, dl, e, idx + row * top_k, dw + row * top_k, top_k, normalize != 0);
    for (int64_t i = 0; i < e; ++i) tprt__cuda_st(dlogits, D, row * e + i, dl[i]);
  }
}

extern "C" tprt_status_t tprt_cuda_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                                  const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k,
                                                  bool normalize, cudaStream_t stream) {
  TPRT__RETURN_IF_ERROR_CUDA_CHECK(tprt__check_moe_route_grad(logits, indices, dweights, dlogits, top_k));
  const int64_t t = logits->dims[0], e = logits->dims[1];
  if (t == 0) return NULL;
  float* work = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async((void**)&work, (size_t)(t * e) * 2 * sizeof(float), stream));
  dim3 grid((unsigned)((t + 63) / 64 < 65536 ? (t + 63) / 64 : 65536));
  const int32_t* idx = (const int32_t*)indices->data;
  const float* dw = (const float*)dweights->data;
  switch (logits->dtype) {
    case TPRT_DTYPE_BF16:
      tprt__route_grad_kernel<TPRT_DTYPE_BF16><<<grid, 64, 0, stream>>>(logits->data, idx, dw, dlogits->data, work, t, e,
                                                                        top_k, normalize);
      break;
    case TPRT_DTYPE_F16:
      tprt__route_grad_kernel<TPRT_DTYPE_F16><<<grid, 64, 0, stream>>>(logits->data, idx, dw, dlogits->data, work, t, e,
                                                                       top_k, normalize);
      break;
    default:
      tprt__route_grad_kernel<TPRT_DTYPE_F32><<<grid, 64, 0, stream>>>(logits->data, idx, dw, dlogits->data, work, t, e,
                                                                       top_k, normalize);
      break;
  }
  cudaError_t err = cudaGetLastError();
  tprt__cuda_free_async(work, stream);
  if (err != cudaSuccess) return tprt__cuda_make_status(err, "moe_route_grad kernel", __FILE__, __LINE__);
  return NULL;
}
