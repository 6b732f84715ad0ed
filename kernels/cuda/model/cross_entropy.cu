// The LM head's cross-entropy in every numerics mode, bitwise the CPU kernels of cpu_vocab.c
// (docs/numerics.md, "Cross-entropy"), composed from the exact GEMMs of kernels/cuda/gemm and three
// small kernels:
//   logits  Z[T,V] = x·wᵀ with the canonical H accumulation over |chunks|, rounded to x's dtype
//           (tprt_cuda_linear: the CPU's tprt__logit);
//   stats   per token and vocabulary block: the block's maximum (tprt_max_keep) and its sum of
//           exp(z - max) from +0.0 in increasing v, one thread per (token, block); then per token
//           the blocks' pairwise tree (tprt_ce_tree) and the target's logit;
//   combine per token: the ranks' statistics by the same tree, lse = m + log(s), loss = lse - z_t;
//   dgrad   dZ = the logit gradient (tprt_ce_dlogit) rounded to x's dtype, then dx = dZ·w canonical
//           over V with |vocab_chunks| (tprt_cuda_linear_dgrad_segmented);
//   wgrad   the same dZ, then dw = dZᵀ·x canonical over the tokens with |token_chunks|
//           (tprt_cuda_linear_wgrad).
// Z and dZ are this rank's whole [T, V] block, stream-ordered temporaries (the CPU kernels hold a
// row at a time; the GEMMs want the block). The targets' values are not checked on the host.
#include "tprt_cuda_internal.cuh"

// ------------------------------------------------------------------------------------------------
// GPU kernels
// ------------------------------------------------------------------------------------------------

// Block b's maximum and sum of exponentials of token t's logits: bm/bs[t * blocks + b].
template <int D>
__global__ void tprt__ce_block_stats(const void* __restrict__ z, int64_t t, int64_t v, int blocks, int64_t size,
                                     float* __restrict__ bm, float* __restrict__ bs) {
  const int64_t n = t * blocks, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t tok = i / blocks, b = i % blocks, v0 = b * size, v1 = v0 + size;
    if (v0 > v) v0 = v;
    if (v1 > v) v1 = v;
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = v0; j < v1; ++j) m = tprt_max_keep(m, tprt__cuda_ld(z, D, tok * v + j));
    for (int64_t j = v0; j < v1; ++j) s = s + tprt_expf(tprt__cuda_ld(z, D, tok * v + j) - m);
    bm[i] = m;
    bs[i] = s;
  }
}

template <int D>
__global__ void tprt__ce_token_stats(const void* __restrict__ z, const int32_t* __restrict__ targets, int64_t t,
                                     int64_t v, int blocks, int64_t start, float* __restrict__ bm,
                                     float* __restrict__ bs, float* __restrict__ out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t tok = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; tok < t; tok += stride) {
    tprt_ce_tree(bm + tok * blocks, bs + tok * blocks, blocks);
    int64_t local = (int64_t)targets[tok] - start;
    out[tok * 3 + 0] = bm[tok * blocks];
    out[tok * 3 + 1] = bs[tok * blocks];
    out[tok * 3 + 2] = targets[tok] >= 0 && local >= 0 && local < v ? tprt__cuda_ld(z, D, tok * v + local) : -0.0f;
  }
}

__global__ void tprt__ce_combine(const float* __restrict__ st, const int32_t* __restrict__ targets, int64_t t, int r,
                                 float* __restrict__ work, float* __restrict__ loss, float* __restrict__ lse) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t tok = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; tok < t; tok += stride) {
    float *m = work + tok * 2 * r, *s = m + r;
    float zt = -0.0f;
    for (int q = 0; q < r; ++q) {
      m[q] = st[tok * 3 * r + 3 * q];
      s[q] = st[tok * 3 * r + 3 * q + 1];
      zt = zt + st[tok * 3 * r + 3 * q + 2];
    }
    tprt_ce_tree(m, s, r);
    float l = m[0] + tprt_logf(s[0]);
    lse[tok] = l;
    loss[tok] = targets[tok] < 0 ? 0.0f : l - zt;
  }
}

// dZ[t, v] from Z in place: the logit's gradient rounded to the dtype (0 for an ignored token).
template <int D>
__global__ void tprt__ce_dlogits(void* __restrict__ z, const int32_t* __restrict__ targets,
                                 const float* __restrict__ lse, const float* __restrict__ dloss, int64_t t, int64_t v,
                                 int64_t start) {
  const int64_t n = t * v, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t tok = i / v, j = i % v;
    int32_t target = targets[tok];
    float d = target < 0 ? 0.0f : tprt_ce_dlogit(tprt__cuda_ld(z, D, i), lse[tok], (int64_t)target == start + j, dloss[tok]);
    tprt__cuda_st(z, D, i, d);  // the store rounds to the dtype, as the CPU's tprt__round_to
  }
}

// ------------------------------------------------------------------------------------------------
// Launchers
// ------------------------------------------------------------------------------------------------

static tprt_status_t tprt__ce_check(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                    const tprt_tensor_t* targets, int chunks) {
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 2, TPRT__M(x->dtype));
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (s) return s;
  if (w->dims[1] != x->dims[1] || targets->dims[0] != x->dims[0])
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: x [T,H], w [V,H] and targets [T] disagree", op);
  if (chunks < 1 || chunks > TPRT_MAX_CHUNKS || (chunks & (chunks - 1)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                            TPRT_MAX_CHUNKS, chunks);
  return NULL;
}

// Z = x·wᵀ in x's dtype into a new stream-ordered buffer *z.
static tprt_status_t tprt__ce_logits(const tprt_tensor_t* x, const tprt_tensor_t* w, int chunks, void** z,
                                     tprt_tensor_t* zt, cudaStream_t stream) {
  int64_t dims[2] = {x->dims[0], w->dims[0]};
  *zt = tprt_tensor_make(NULL, x->dtype, 2, dims);
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(z, tprt_tensor_bytes(zt) + 16, stream));
  zt->data = *z;
  tprt_status_t s = tprt_cuda_linear(x, w, NULL, zt, chunks, stream);
  if (s) tprt__cuda_free_async(*z, stream), *z = NULL;
  return s;
}

static tprt_status_t tprt__launched(const char* what) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? NULL : tprt__cuda_make_status(err, what, __FILE__, __LINE__);
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_stats(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* targets, tprt_tensor_t* stats,
                                                       int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                                       cudaStream_t stream) {
  const char* op = "cross_entropy_stats";
  tprt_status_t s = tprt__ce_check(op, x, w, targets, chunks);
  if (!s) s = tprt__check(op, "stats", stats, 2, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = x->dims[0], v = w->dims[0];
  if (stats->dims[0] != t || stats->dims[1] != 3 || vocab_chunks < 1 || vocab_chunks > TPRT_MAX_CHUNKS ||
      start < 0 || start + v > vocab)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: stats [T,3], vocabulary blocks or rows out of range", op);
  if (t == 0) return NULL;
  void *z = NULL, *work = NULL;
  tprt_tensor_t zt;
  TPRT_RETURN_IF_ERROR(tprt__ce_logits(x, w, chunks, &z, &zt, stream), "%s", op);
  cudaError_t e = tprt__cuda_malloc_async(&work, (size_t)(2 * t * vocab_chunks) * sizeof(float), stream);
  if (e != cudaSuccess) {
    tprt__cuda_free_async(z, stream);
    return tprt__cuda_make_status(e, "cross_entropy_stats scratch", __FILE__, __LINE__);
  }
  float *bm = (float*)work, *bs = bm + t * vocab_chunks;
  int64_t size = tprt_kacc_chunk_size(v, vocab_chunks);
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    constexpr int D = decltype(d)::value;
    tprt__ce_block_stats<D><<<tprt__cuda_ew_blocks(t * vocab_chunks, 128), 128, 0, stream>>>(z, t, v, vocab_chunks,
                                                                                              size, bm, bs);
    tprt__ce_token_stats<D><<<tprt__cuda_ew_blocks(t, 128), 128, 0, stream>>>(
        z, (const int32_t*)targets->data, t, v, vocab_chunks, start, bm, bs, (float*)stats->data);
  });
  s = tprt__launched("cross_entropy_stats kernels");
  tprt__cuda_free_async(work, stream);
  tprt__cuda_free_async(z, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_combine(const tprt_tensor_t* stats, const tprt_tensor_t* targets,
                                                         tprt_tensor_t* loss, tprt_tensor_t* lse, cudaStream_t stream) {
  const char* op = "cross_entropy_combine";
  tprt_status_t s = tprt__check(op, "stats", stats, 2, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "loss", loss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = stats->dims[0], r = stats->dims[1] / 3;
  if (stats->dims[1] % 3 != 0 || r < 1 || targets->dims[0] != t || loss->dims[0] != t || lse->dims[0] != t)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: stats must be [T,3R] with targets, loss and lse [T]", op);
  if (t == 0) return NULL;
  void* work = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&work, (size_t)(2 * t * r) * sizeof(float), stream));
  tprt__ce_combine<<<tprt__cuda_ew_blocks(t, 128), 128, 0, stream>>>((const float*)stats->data,
                                                                      (const int32_t*)targets->data, t, (int)r,
                                                                      (float*)work, (float*)loss->data,
                                                                      (float*)lse->data);
  s = tprt__launched("cross_entropy_combine kernel");
  tprt__cuda_free_async(work, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                 const tprt_tensor_t* targets, tprt_tensor_t* loss, tprt_tensor_t* lse,
                                                 int chunks, cudaStream_t stream) {
  TPRT_RETURN_IF_ERROR(tprt__ce_check("cross_entropy", x, w, targets, chunks), "cross_entropy");
  int64_t dims[2] = {x->dims[0], 3};
  tprt_tensor_t st = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 2, dims);
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&st.data, tprt_tensor_bytes(&st) + 16, stream));
  tprt_status_t s = tprt_cuda_cross_entropy_stats(x, w, targets, &st, 0, w->dims[0], chunks, chunks, stream);
  if (!s) s = tprt_cuda_cross_entropy_combine(&st, targets, loss, lse, stream);
  tprt__cuda_free_async(st.data, stream);
  return s;
}

// dZ of this rank's block into a new stream-ordered buffer *z.
static tprt_status_t tprt__ce_dlogits_of(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                         const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                         const tprt_tensor_t* dloss, int64_t start, int64_t vocab, int chunks,
                                         void** z, tprt_tensor_t* zt, cudaStream_t stream) {
  tprt_status_t s = tprt__ce_check(op, x, w, targets, chunks);
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "dloss", dloss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t t = x->dims[0], v = w->dims[0];
  if (lse->dims[0] != t || dloss->dims[0] != t || start < 0 || start + v > vocab)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: lse, dloss [T] or the rows [start, start+V) disagree", op);
  TPRT_RETURN_IF_ERROR(tprt__ce_logits(x, w, chunks, z, zt, stream), "%s", op);
  if (t * v == 0) return NULL;
  tprt__cuda_float_dispatch(x->dtype, [&](auto d) {
    tprt__ce_dlogits<decltype(d)::value><<<tprt__cuda_ew_blocks(t * v, TPRT__CUDA_EW_THREADS), TPRT__CUDA_EW_THREADS, 0,
                                           stream>>>(*z, (const int32_t*)targets->data, (const float*)lse->data,
                                                     (const float*)dloss->data, t, v, start);
  });
  s = tprt__launched("cross_entropy logit gradient kernel");
  if (s) tprt__cuda_free_async(*z, stream), *z = NULL;
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_dgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                                       const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start,
                                                       int64_t vocab, int chunks, int vocab_chunks,
                                                       cudaStream_t stream) {
  void* z = NULL;
  tprt_tensor_t zt;
  TPRT_RETURN_IF_ERROR(
      tprt__ce_dlogits_of("cross_entropy_dgrad", x, w, targets, lse, dloss, start, vocab, chunks, &z, &zt, stream),
      "cross_entropy_dgrad");
  tprt_status_t s = tprt_cuda_linear_dgrad_segmented(&zt, w, dx, vocab_chunks, 1, 1, stream);
  tprt__cuda_free_async(z, stream);
  return s;
}

extern "C" tprt_status_t tprt_cuda_cross_entropy_wgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                                       const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start,
                                                       int64_t vocab, int chunks, int token_chunks,
                                                       cudaStream_t stream) {
  void* z = NULL;
  tprt_tensor_t zt;
  TPRT_RETURN_IF_ERROR(
      tprt__ce_dlogits_of("cross_entropy_wgrad", x, w, targets, lse, dloss, start, vocab, chunks, &z, &zt, stream),
      "cross_entropy_wgrad");
  tprt_status_t s = tprt_cuda_linear_wgrad(&zt, x, dw, token_chunks, stream);
  tprt__cuda_free_async(z, stream);
  return s;
}
