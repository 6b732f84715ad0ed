// The CUDA exact-mode kernels of libtprt: host launchers whose results are bitwise equal to the
// CPU kernels of tprt_cpu_kernels.h (which define tpc's bits, docs/numerics.md) on any GPU.
//
// Conventions shared by every launcher:
// - Tensors are dense row-major views (tprt_tensor.h) whose |data| is device memory (or memory
//   the device can address); the caller owns them. Shapes, dtypes and the op's parameters are
//   validated on the host exactly as by the CPU kernel of the same name, with the same status
//   code and message ("linear: chunks=3 must be a power of two in [1, 1024]"); validation never
//   reads tensor data and never calls CUDA.
// - Arithmetic is f32 on CUDA cores in the CPU kernel's order, with explicit __fmaf_rn,
//   __fadd_rn, __fmul_rn, __fdiv_rn and __fsqrt_rn; the sources are also built with --fmad=false.
//   No tensor cores, no atomics, no split reductions: the bits never depend on the GPU, the grid
//   or the shape.
// - The work is enqueued on |stream|; launchers never synchronize, allocate or copy. A launch
//   failure comes back as a status (tprt_cuda_status.h); a fault inside a kernel surfaces at the
//   caller's next synchronization. Empty outputs launch nothing.
// - Outputs must not overlap inputs, except tprt_cuda_add / tprt_cuda_mul, where c may be a or b.
// - Thread safety: launchers keep no state; concurrent calls on disjoint outputs are safe.
#ifndef TPRT_CUDA_KERNELS_H_
#define TPRT_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_cpu_kernels.h"  // tprt_glu_kind_t
#include "tprt_cuda_fast.h"   // the fast-mode (cuBLASLt, CUTLASS) launchers
#include "tprt_status.h"
#include "tprt_tensor.h"
#include "tprt_world.h"  // TPRT_MAX_WORLD_SIZE

#ifdef __cplusplus
extern "C" {
#endif

/// y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias[N]) with the canonical K accumulation over |chunks|: bitwise
/// tprt_cpu_linear. x, w and bias share a float dtype; y has it too, or is an f32 partial (the
/// unrounded tree sum, without bias). kernels/cuda/gemm/linear.cu.
tprt_status_t tprt_cuda_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                               tprt_tensor_t* y, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The output tile of the exact contraction kernels: chosen from the grid size (AUTO), or forced
/// (the checks run every shape with both). The bits never depend on it.
enum { TPRT_CUDA_TILE_AUTO = 0, TPRT_CUDA_TILE_SMALL = 1, TPRT_CUDA_TILE_LARGE = 2 };

/// tprt_cuda_linear with the output tile |tile| (TPRT_CUDA_TILE_*). kernels/cuda/gemm/linear.cu.
tprt_status_t tprt_cuda_linear_tiled(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                     tprt_tensor_t* y, int chunks, int tile, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The exact GEMM under tprt_cuda_linear and the backward contractions: out[M,N] = Σ_k a·b with
/// the canonical K accumulation (+ bias[N], then one rounding to |out_dtype|), where a is [M,K]
/// row-major, or [K,M] when |a_kmajor|, and b is [N,K], or [K,N] when |b_kmajor|; a, b and bias
/// (NULL: none) of the float |dtype|, out [M,N] of |dtype| or f32. No validation (the callers
/// validate); any alignment. kernels/cuda/gemm/linear.cu.
tprt_status_t tprt_cuda_gemm_exact(const void* a, int a_kmajor, const void* b, int b_kmajor, int dtype, int64_t m,
                                   int64_t n, int64_t k, const void* bias, void* out, int out_dtype, int chunks,
                                   int tile, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// y[M,H] = x · rsqrt(mean(x²) + eps) · gamma with the canonical row reduction: bitwise
/// tprt_cpu_rmsnorm. gamma[H] may have any float dtype. kernels/cuda/norm/norm.cu.
tprt_status_t tprt_cuda_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps,
                                cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// y[M,H] = (x - mean) · rsqrt(var + eps) · gamma + beta, two passes: bitwise
/// tprt_cpu_layernorm. beta has gamma's dtype. kernels/cuda/norm/norm.cu.
tprt_status_t tprt_cuda_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                  tprt_tensor_t* y, float eps, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// The norms of fast numerics: each row read once into registers, summed in another order than
/// the canonical one, the hardware's rsqrtf; no bitwise promise. Rows wider than 8192 bf16 / f16
/// or 4096 f32 elements take the exact kernels. Same validation. kernels/cuda/norm/norm.cu.
tprt_status_t tprt_cuda_rmsnorm_fast(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y, float eps,
                                     cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_layernorm_fast(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                       tprt_tensor_t* y, float eps, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// tp.add_rmsnorm: sum = residual + y (tprt_cuda_add's elements), normed = the rmsnorm of sum, in
/// one launch. tprt_cuda_add_rmsnorm: the canonical row reduction, bitwise tprt_cpu_add_rmsnorm;
/// tprt_cuda_add_rmsnorm_fast: bitwise tprt_cuda_add then tprt_cuda_rmsnorm_fast. residual, y and
/// sum one [M,H] shape and dtype. kernels/cuda/norm/norm.cu.
tprt_status_t tprt_cuda_add_rmsnorm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                    tprt_tensor_t* normed, tprt_tensor_t* sum, float eps,
                                    cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_add_rmsnorm_fast(const tprt_tensor_t* residual, const tprt_tensor_t* y,
                                         const tprt_tensor_t* gamma, tprt_tensor_t* normed, tprt_tensor_t* sum,
                                         float eps, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Gated linear unit over the last dimension, x[...,2F] -> y[...,F]: bitwise tprt_cpu_glu for
/// every |kind| (tprt_glu_kind_t) and |interleave| (0, or a block size dividing F).
/// kernels/cuda/elementwise/glu.cu.
tprt_status_t tprt_cuda_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                            float limit, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_glu for fast numerics: the approximate exponential and division of glu_fast.cuh, a few
/// ulp from the exact values (no bitwise promise); same validation.
tprt_status_t tprt_cuda_glu_fast(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                                 float limit, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// c = a + b elementwise (same shape and float dtype), rounded once: bitwise tprt_cpu_add. c may
/// alias a or b. Also tprt_cpu_add's other forms: a rank-1 bias b, and an f32 a plus a b in
/// storage precision with c in a's or b's dtype. kernels/cuda/elementwise/elementwise.cu.
tprt_status_t tprt_cuda_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c,
                            cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// c = a · b elementwise, as tprt_cuda_add: bitwise tprt_cpu_mul. kernels/cuda/elementwise/elementwise.cu.
tprt_status_t tprt_cuda_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c,
                            cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// y[T,N] = x[T,K]·w[e,N,K]ᵀ for the rows of each expert, with tprt_cpu_grouped_linear's segment
/// rule for group_sizes[S*E] (i64, device memory; padding rows of y get +0.0): bitwise
/// tprt_cpu_grouped_linear. The counts are not validated (device data): counts the CPU kernel
/// rejects leave y unspecified, never an out-of-bounds access. kernels/cuda/moe/grouped_linear.cu.
tprt_status_t tprt_cuda_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes,
                                       tprt_tensor_t* y, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// tprt_cuda_grouped_linear with the output tile |tile| (TPRT_CUDA_TILE_*).
/// kernels/cuda/moe/grouped_linear.cu.
tprt_status_t tprt_cuda_grouped_linear_tiled(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                             const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks, int tile,
                                             cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The exact grouped GEMM under tprt_cuda_grouped_linear and the grouped dgrad: y[T,N] = x[T,K]
/// against w[e] of each row's expert, w[E,N,K], or w[E,K,N] when |w_kmajor|; |sizes| the device
/// counts of |segs| segments of E experts. No validation (the callers validate); any alignment.
/// kernels/cuda/moe/grouped_linear.cu.
tprt_status_t tprt_cuda_grouped_gemm_exact(const void* x, const void* w, int w_kmajor, int dtype, int64_t t, int64_t n,
                                           int64_t k, int64_t e, const int64_t* sizes, int64_t segs, void* y,
                                           int y_dtype, int chunks, int tile, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Copies each token once per selected expert, rows ordered by expert, token, slot; writes
/// group_sizes[E] and row_map[T*k]: bitwise tprt_cpu_moe_permute (the order is computed on the
/// device by a deterministic single-block counting sort; E <= 8192, else UNIMPLEMENTED). Indices
/// are not validated (device data): one outside [0, E) drops its slot. kernels/cuda/moe/moe.cu.
tprt_status_t tprt_cuda_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                    tprt_tensor_t* group_sizes, tprt_tensor_t* row_map,
                                    cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The weighted combine out[t] = Σ_j weights[t,j]·y[row of slot (t,j)] in increasing j: bitwise
/// tprt_cpu_moe_unpermute (k <= 64, else UNIMPLEMENTED). row_map must be a permutation (not
/// checked: device data). kernels/cuda/moe/moe.cu.
tprt_status_t tprt_cuda_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                      const tprt_tensor_t* weights, tprt_tensor_t* out,
                                      cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Expert-parallel dispatch of expert-sorted x[R,H] into |buckets| zero-padded buckets y[B*R,H]:
/// bitwise tprt_cpu_moe_bucket (counts not validated: device data). kernels/cuda/moe/moe.cu.
tprt_status_t tprt_cuda_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                   int buckets, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The inverse of tprt_cuda_moe_bucket, y[R,H] from x[B*R,H]: bitwise tprt_cpu_moe_unbucket.
/// kernels/cuda/moe/moe.cu.
tprt_status_t tprt_cuda_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                     int buckets, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Fills t with fmaf(hi - lo, u, lo), u the Philox uniform of each element's logical position:
/// bitwise tprt_cpu_fill_philox (|stream| is the Philox stream, |cuda_stream| the CUDA one).
/// kernels/cuda/elementwise/philox.cu.
tprt_status_t tprt_cuda_fill_philox(tprt_tensor_t* t, uint64_t seed, uint64_t stream, float lo, float hi,
                                    int64_t row_offset, int64_t col_offset, int64_t logical_cols,
                                    cudaStream_t cuda_stream) TPRT_MUST_USE_RESULT;

/// A segmented order (docs/numerics.md, "Segmented contractions"); chunks = 0 means none.
typedef struct tprt_cuda_order_t {
  int chunks, segments, blocks;
} tprt_cuda_order_t;

/// Byte-moving helpers of the backward launchers (kernels/cuda/gemm/gather.cu): dst = src [rows, cols]
/// (elements of |elem| = 2 or 4 bytes) with rows (|transpose|: dst[c, r] = src[idx(r), c]) or
/// columns (dst[m, r] = src[m, idx(r)]) taken through idx = |index|, or |order|, or identity; and
/// a fill of |n| elements with the bit pattern |bits|.
tprt_status_t tprt_cuda_gather_2d(const void* src, int64_t rows, int64_t cols, int elem, const int64_t* index,
                                  tprt_cuda_order_t order, int64_t len, int transpose, void* dst,
                                  cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_fill_bits(void* dst, int64_t n, int elem, uint32_t bits,
                                  cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// Whole rows in |order| (identity when order.chunks == 0): dst row r = src row idx(r) of |rows|
/// rows of |row_bytes| (a multiple of 16; 16-byte aligned buffers). kernels/cuda/gemm/gather.cu.
tprt_status_t tprt_cuda_gather_rows(const void* src, int64_t rows, int64_t row_bytes, tprt_cuda_order_t order,
                                    void* dst, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// The same for |batches| consecutive blocks of |rows| rows, each permuted alone (w[E,N,K]'s experts).
tprt_status_t tprt_cuda_gather_rows_batched(const void* src, int64_t batches, int64_t rows, int64_t row_bytes,
                                            tprt_cuda_order_t order, void* dst, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The backward contractions, bitwise tprt_cpu_linear_dgrad_segmented, tprt_cpu_linear_wgrad,
/// tprt_cpu_bias_grad, tprt_cpu_grouped_linear_dgrad_segmented and tprt_cpu_grouped_linear_wgrad:
/// the exact GEMMs of the forward kernels reading the operands where they are (k-major), or, for
/// a segmented dgrad order and a grouped wgrad expert spread over several segments, on permuted
/// copies. They allocate their temporaries stream-ordered (tprt__cuda_malloc_async), and the grouped
/// wgrad reads the group sizes back to the host (it synchronizes |stream|). Validation is their
/// own (messages may differ from the CPU kernels'). kernels/cuda/gemm/linear_grad.c.
tprt_status_t tprt_cuda_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                               int chunks, int segments, int blocks,
                                               cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw, int chunks,
                                     cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks,
                                  cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                       int segments, int blocks,
                                                       cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                             const tprt_tensor_t* group_sizes, tprt_tensor_t* dw, int chunks,
                                             cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The operands of a dgrad in its segmented order (kernels/cuda/gemm/linear_grad.c): *dyp [T,N] (dy
/// itself, or a stream-ordered permuted copy) and *wt [E][K][N] (w[e] transposed and permuted, a
/// stream-ordered allocation); the caller frees both (tprt__cuda_free_async; *dyp only if not dy->data).
tprt_status_t tprt_cuda_dgrad_operands(const char* op, const tprt_tensor_t* dy, const tprt_tensor_t* w, int64_t e,
                                       int64_t n, int64_t k, int chunks, int segments, int blocks, void** dyp,
                                       void** wt, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Invariant mode on tensor cores (kernels/cuda/gemm/invariant_linear.cu, sm_90a; docs/numerics.md
/// "Invariant tensor-core kernels"): bf16 operands, results bf16 or f32; the contracted length
/// must split into |chunks| chunks of a multiple of 64 (the _fits predicates; otherwise the exact
/// kernels, which are invariant too, serve the call). The bits depend on the logical problem
/// only: not on M, the other rows, or the TP degree that owns a subtree of the chunks.
bool tprt_cuda_linear_invariant_fits(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                     const tprt_tensor_t* y, int chunks);
tprt_status_t tprt_cuda_linear_invariant(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                         tprt_tensor_t* y, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;
bool tprt_cuda_linear_dgrad_invariant_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* dx,
                                           int chunks);
tprt_status_t tprt_cuda_linear_dgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                               int chunks, int segments, int blocks,
                                               cudaStream_t stream) TPRT_MUST_USE_RESULT;
bool tprt_cuda_linear_wgrad_invariant_fits(const tprt_tensor_t* dy, const tprt_tensor_t* x, const tprt_tensor_t* dw,
                                           int chunks);
tprt_status_t tprt_cuda_linear_wgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                               int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Invariant grouped contractions on tensor cores (kernels/cuda/moe/grouped_fast.cu with
/// grouped_invariant.cuh, sm_90a): the planning of the fast grouped GEMMs (device group sizes, one
/// launch, segments, empty experts) with the dense invariant GEMM's per-element arithmetic. Fits
/// as tprt_cuda_grouped_fast_fits, and for the forward and dgrad the contracted length (K, N)
/// must split into |chunks| chunks of a multiple of 64. The wgrad contracts an expert's rows (never
/// split across ranks: tp-invariant refuses expert weight gradients summed over ranks) as one
/// chunk, whatever |chunks|. The dgrad takes the op's segmented order (copies of dy and w in that
/// order first, as the dense invariant dgrad).
bool tprt_cuda_grouped_invariant_fits(const tprt_tensor_t* a, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes,
                                      const tprt_tensor_t* out, int which, int chunks);
tprt_status_t tprt_cuda_grouped_linear_invariant(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                 const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int chunks,
                                                 cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_grouped_linear_dgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                       int segments, int blocks,
                                                       cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_grouped_linear_wgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                       const tprt_tensor_t* group_sizes, tprt_tensor_t* dw,
                                                       cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// The fused grouped MLP on the invariant grouped GEMM (both GEMMs must fit with |chunks|).
tprt_status_t tprt_cuda_fused_grouped_mlp_invariant(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                                    const tprt_tensor_t* w2, const tprt_tensor_t* group_sizes,
                                                    tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                                                    float limit, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The GLU in the grouped GEMM's epilogue (kernels/cuda/moe/grouped_glu.cuh), fast (|chunks| 0) or
/// invariant (|chunks| chunks), bitwise the unfused sequence of the same mode:
///   tprt_cuda_grouped_linear_glu: gated [T, F] = glu(grouped_linear(x, w1)) with the product
///     h [T, 2F] rounded to bf16 and never written. Needs interleave b with b a multiple of 8 and
///     2b dividing the kernel's tile width (256 fast, 128 invariant); interleave 0 does not fit.
///   tprt_cuda_grouped_linear_dgrad_glu: dh [T, 2F] = glu_grad(h, grouped_linear_dgrad(dy, w2))
///     with the product [T, F] rounded to bf16 and never written (any interleave).
/// The _fits predicates say whether a call can take this path (else: the unfused sequence).
bool tprt_cuda_grouped_linear_glu_fits(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                       const tprt_tensor_t* group_sizes, const tprt_tensor_t* gated,
                                       int64_t interleave, int chunks);
tprt_status_t tprt_cuda_grouped_linear_glu(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                           const tprt_tensor_t* group_sizes, tprt_tensor_t* gated, int kind,
                                           int64_t interleave, float alpha, float limit, int chunks,
                                           cudaStream_t stream) TPRT_MUST_USE_RESULT;
bool tprt_cuda_grouped_linear_dgrad_glu_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w2,
                                             const tprt_tensor_t* group_sizes, const tprt_tensor_t* h,
                                             const tprt_tensor_t* dh, int chunks);
tprt_status_t tprt_cuda_grouped_linear_dgrad_glu(const tprt_tensor_t* dy, const tprt_tensor_t* w2,
                                                 const tprt_tensor_t* group_sizes, const tprt_tensor_t* h,
                                                 tprt_tensor_t* dh, int kind, int64_t interleave, float alpha,
                                                 float limit, int chunks, int segments, int blocks,
                                                 cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cuda_glu: bitwise tprt_cpu_glu_grad (both evaluate tprt_glu_grad_value of
/// tprt_numerics.h), same validation. kernels/cuda/elementwise/glu_grad.cu.
tprt_status_t tprt_cuda_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                 int64_t interleave, float alpha, float limit,
                                 cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_glu_grad for fast numerics (glu_fast.cuh; no bitwise promise); same validation.
tprt_status_t tprt_cuda_glu_grad_fast(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                      int64_t interleave, float alpha, float limit,
                                      cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The norm gradients: bitwise tprt_cpu_rmsnorm_grad / tprt_cpu_layernorm_grad, same validation;
/// an f32 xhat scratch of M·H floats is allocated stream-ordered. kernels/cuda/norm/norm_grad.cu.
tprt_status_t tprt_cuda_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                     tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps, int chunks,
                                     cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                       tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps,
                                       int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// The norm gradients of fast and invariant numerics: dgamma (and dbeta) with each of the |chunks|
/// canonical token chunks cut into pieces, each piece summed in row order, a chunk's pieces added
/// in order, then the chunks by the canonical tree. Rows up to 8192 bf16 / f16 or 4096 f32
/// elements: one read of each row (another row reduction than the exact kernels', the hardware's
/// rsqrtf; dx and dgamma's pieces in one kernel), pieces of 16 rows; wider rows: dx as above and
/// pieces of TPRT_CUDA_NORM_GRAD_PIECE rows. The order depends only on the chunks' length and H
/// (invariant: a data-parallel or micro-batch split keeps whole chunks). Same validation.
#define TPRT_CUDA_NORM_GRAD_PIECE 256
tprt_status_t tprt_cuda_rmsnorm_grad_pieces(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                            const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                            float eps, int chunks, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_layernorm_grad_pieces(const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                              const tprt_tensor_t* dy, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                              tprt_tensor_t* dbeta, float eps, int chunks,
                                              cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cuda_rmsnorm_grad (|pieces| false) or tprt_cuda_rmsnorm_grad_pieces (true) with
/// dx = acc + the gradient, added as tprt_cuda_add adds them after dx's rounding: bitwise
/// tprt_cpu_rmsnorm_grad_acc when the dgamma order is (exact). acc has dx's shape and dtype.
tprt_status_t tprt_cuda_rmsnorm_grad_acc(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                         const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma,
                                         float eps, int chunks, bool pieces, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Top-k routing: bitwise tprt_cpu_moe_route (both run tprt_moe_route_row of tprt_numerics.h),
/// same validation; one thread per token, softmax work space allocated stream-ordered.
/// kernels/cuda/moe/moe_route.cu.
tprt_status_t tprt_cuda_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights,
                                  int top_k, bool normalize, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The MoE backward kernels: bitwise tprt_cpu_moe_permute_grad, tprt_cpu_moe_unpermute_grad and
/// tprt_cpu_moe_route_grad (the route gradient of a token is tprt_moe_route_grad_row of
/// tprt_numerics.h on both sides). Shapes validated as by the CPU; the data (row_map a
/// permutation, indices distinct experts) is not. kernels/cuda/moe/moe_grad.cu.
tprt_status_t tprt_cuda_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map, tprt_tensor_t* dx,
                                         int top_k, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                           const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                           tprt_tensor_t* dy, tprt_tensor_t* dweights,
                                           cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                       const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k, bool normalize,
                                       cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// grouped_linear -> glu -> grouped_linear with intermediates in x's dtype: bitwise
/// tprt_cpu_fused_grouped_mlp (same validation). kernels/cuda/moe/fused_mlp.c.
tprt_status_t tprt_cuda_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                          const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                          int64_t interleave, float alpha, float limit, int chunks,
                                          cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Rotary position embedding of every head of x[T,H*D] (|inverse|: its transpose): bitwise
/// tprt_cpu_rope (tprt_rope_pair of tprt_attention_rows.h on both sides), same validation; one
/// thread per rotated pair. kernels/cuda/attention/attention.cu.
tprt_status_t tprt_cuda_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                             tprt_tensor_t* y, bool inverse, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Scaled dot-product attention with grouped-query heads and the exact softmax: bitwise
/// tprt_cpu_attention, same validation; one 256-thread block per (token, query head), scores in
/// a workspace allocated stream-ordered. With a KV |cache| (NULL: none; cache->len in device
/// memory) the keys are the cached rows then k's, as in tprt_cpu_attention; a cache_len outside
/// [0, C] is clamped to it (the CPU backend refuses it). kernels/cuda/attention/attention.cu.
tprt_status_t tprt_cuda_attention(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                  const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse, int64_t seq_len,
                                  int64_t head_dim, bool causal, float scale, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The gradients dq, dk and dv of tprt_cuda_attention: bitwise tprt_cpu_attention_grad, same
/// validation; a row kernel (dq and each row's softmax statistics) and a key kernel (dk, dv), with
/// a workspace allocated stream-ordered. kernels/cuda/attention/attention.cu.
tprt_status_t tprt_cuda_attention_grad(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                       const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse,
                                       tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                       int64_t head_dim, bool causal, float scale,
                                       cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Attention on tensor cores (fast and invariant modes; docs/numerics.md "Attention on tensor
/// cores"), sm_90a: warp-specialized WGMMA kernels (a TMA producer, two consumer warpgroups) with
/// fixed 128-token query tiles and key blocks from each sequence's start, so a row's bits depend
/// only on its sequence and position (batch-, TP- and prefix-invariant). The _fits predicate: bf16/f16 tensors of one dtype, head_dim
/// 64 or 128, 16-byte aligned data. Same validation as the exact kernels otherwise.
/// kernels/cuda/attention/attention_tc_fwd.cu, attention_tc_bwd.cu.
bool tprt_cuda_attention_tc_fits(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                 const tprt_kv_cache_t* cache, const tprt_tensor_t* y, int64_t seq_len,
                                 int64_t head_dim);
/// |lse| (NULL: not wanted), f32 [T, Hq]: each row's natural log-sum-exp of its scaled scores.
/// With a KV |cache| (decoding; cache->len in device memory, clamped to [0, C]) the keys are the
/// cached rows then k's, in the prefill's 128-key blocks: a decoded row has its prefill bits.
tprt_status_t tprt_cuda_attention_tc(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                     const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse,
                                     int64_t seq_len, int64_t head_dim, bool causal, float scale,
                                     cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// The gradients' predicate: the forward's, and dy, dq, dk, dv of q's dtype and 16-byte aligned.
bool tprt_cuda_attention_grad_tc_fits(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                      const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* dq,
                                      const tprt_tensor_t* dk, const tprt_tensor_t* dv, int64_t seq_len,
                                      int64_t head_dim);
/// The gradients on tensor cores, deterministic: the softmax statistics from the forward's |lse|
/// (f32 [T, Hq]) or, when it is NULL, recomputed (a forward pass without P·V); dk and dv by a
/// kernel per key block summing its query heads and query tiles in a fixed order, dq by a kernel
/// per query tile over its key blocks; no atomics.
tprt_status_t tprt_cuda_attention_grad_tc(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                          const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse,
                                          tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                          int64_t head_dim, bool causal, float scale,
                                          cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Quantization: bitwise tprt_cpu_quantize / tprt_cpu_dequantize (the arithmetic of
/// kernels/cpu/tprt_quant.h on both sides), same validation and layouts. kernels/cuda/quant/quant.cu.
tprt_status_t tprt_cuda_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                 tprt_tensor_t* global_scale, int format, int axis,
                                 cudaStream_t stream) TPRT_MUST_USE_RESULT;
/// tprt_cpu_quantize_with_amax and tprt_cpu_amax, bitwise (kernels/cuda/quant/quant.cu).
tprt_status_t tprt_cuda_quantize_with_amax(const tprt_tensor_t* x, const tprt_tensor_t* amax, tprt_tensor_t* data,
                                           tprt_tensor_t* scale, tprt_tensor_t* global_scale, int format, int axis,
                                           cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_amax(const tprt_tensor_t* x, tprt_tensor_t* amax, cudaStream_t stream) TPRT_MUST_USE_RESULT;
tprt_status_t tprt_cuda_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                   const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format, int axis,
                                   cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The summing half of a reducing collective: out[i] = Σ_g staged[g·n + i] over |group| members
/// (<= TPRT_MAX_WORLD_SIZE) in the CPU collectives' order (|canonical|: the pairwise tree over
/// members; else increasing member from member 0), f32 arithmetic, one rounding to |out_dtype|.
/// Float dtypes only. kernels/cuda/elementwise/reduce.cu.
tprt_status_t tprt_cuda_reduce_staged(const void* staged, int group, int in_dtype, int64_t n, void* out, int out_dtype,
                                      int canonical, cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// Where one member's block of a staged sum is read from instead of the staged buffer: element i of
/// member |member| is src[(i / cols)·pitch + i % cols] (in the input dtype), so a reduce-scatter
/// reads the caller's own slice of its input in place (rows of |cols| elements, |pitch| apart).
typedef struct {
  int member;  // -1: none (every member from the staged buffer)
  const void* src;
  int64_t cols, pitch;
} tprt_cuda_staged_own_t;

/// tprt_cuda_reduce_staged with member |own|.member read through |own| (its staged block is not
/// read); the same arithmetic and bits. kernels/cuda/elementwise/reduce.cu.
tprt_status_t tprt_cuda_reduce_staged_own(const void* staged, int group, int in_dtype, int64_t n, void* out,
                                          int out_dtype, int canonical, tprt_cuda_staged_own_t own,
                                          cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The most members a group may have (each thread keeps a value per member in registers).
#define TPRT_CUDA_FUSED_MAX_GROUP 8

/// A group's registered memory for tprt_cuda_fused_allreduce_add_rmsnorm: every member's region
/// as pointers the caller's device can address (one GPU, or peers with access), made once per
/// group; regions start with every byte 0xFF (every word empty), counters at zero. Sizes:
/// tprt_cuda_fused_region_bytes.
/// kernels/cuda/norm/fused_norm.cu.
typedef struct {
  int group, index;                       // members (1..TPRT_CUDA_FUSED_MAX_GROUP), the caller's index
  void* data[TPRT_CUDA_FUSED_MAX_GROUP];  // each member's region: [3 buffers][2 areas][group][slot]
  unsigned* counters;                     // the caller's, TPRT_CUDA_FUSED_COUNTERS words
  int64_t capacity;                       // bytes a slot holds (tprt_cuda_fused_call_bytes of the largest call)
  int max_blocks;                         // the most blocks a call in clusters launches (all resident at once)
  int max_row_blocks;                     // the most blocks a call of a block per row launches (the same)
  int sms;                                // the members' fewest SMs (the launch geometry's room)
  const volatile unsigned* abort;         // host-mapped; non-zero: stop waiting for peers (may be NULL)
  unsigned long long* trace;              // NULL, or TPRT_CUDA_FUSED_TRACE sums of block 0's phases (ns)
  int cluster;    // blocks per row (1, 2, 4 or 8, a row of at most 8192 per block); 0: the kernel's
                  // choice. Every member the same
  int rows_from;  // the fewest rows that take a block of 512 threads per row, without a cluster
                  // (rows of at most TPRT_CUDA_FUSED_ROWS_MAX_HIDDEN); 0: TPRT_CUDA_FUSED_ROWS_FROM.
                  // Every member the same
} tprt_cuda_peer_group_t;

/// The trace's words, summed over calls by block 0's first thread (the benchmark's breakdown):
/// push, wait (from the push's end until its first peer value arrived), sums (until the first
/// row's sum of squares is reduced over the cluster), rest (the norm of its rows), calls, gap (from
/// the previous call's end to this one's start), and the last call's end (globaltimer ns).
enum { TPRT_CUDA_FUSED_TRACE = 7 };

/// Bytes of one member's slot: |capacity| rounded up to 16.
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int64_t tprt_cuda_fused_slot_bytes(int64_t capacity) { return (capacity + 15) / 16 * 16; }

/// Bytes of each member's region: three buffers of two areas (the partials; two-shot's rows) of a slot
/// per member.
static inline size_t tprt_cuda_fused_region_bytes(int group, int64_t capacity) {
  return (size_t)3 * (size_t)group * 2 * (size_t)tprt_cuda_fused_slot_bytes(capacity);
}

/// Words of the caller's counters; the largest capacity (4-byte words counted in 32 bits).
enum { TPRT_CUDA_FUSED_COUNTERS = 6 };
#define TPRT_CUDA_FUSED_MAX_CAPACITY ((int64_t)4 * 0x7FFFFFFF)
/// The widest row the kernel takes (a row's f32 values live in its cluster's shared memory: 32 KiB
/// a block at most).
#define TPRT_CUDA_FUSED_MAX_HIDDEN 65536
/// The blocks that share a row (a thread block cluster); max_blocks must hold at least one cluster.
#define TPRT_CUDA_FUSED_CLUSTER 8
/// From this many rows, a row takes one block of 512 threads (its row in shared memory, up to
/// TPRT_CUDA_FUSED_ROWS_MAX_HIDDEN elements) instead of a cluster: the rows then fill the SMs and a
/// cluster's exchange is pure cost.
#define TPRT_CUDA_FUSED_ROWS_FROM 64
#define TPRT_CUDA_FUSED_ROWS_MAX_HIDDEN 49152

/// The shapes the kernel takes: NULL, or the rule a call breaks (a phrase). Contiguous [T,H] partial
/// and residual of one shape, the partial on a 4-byte boundary, rows of even length for 2-byte partials, rows of at most
/// TPRT_CUDA_FUSED_MAX_HIDDEN, partials of at most TPRT_CUDA_FUSED_MAX_CAPACITY bytes. The backend's
/// hook declines such calls; the kernel's entry refuses them.
static inline const char* tprt_cuda_fused_norm_unfit(const tprt_tensor_t* partial, const tprt_tensor_t* residual) {
  if (partial->rank != 2 || residual->rank != 2 || partial->dims[0] != residual->dims[0] ||
      partial->dims[1] != residual->dims[1])
    return "the partial and the residual must be [T,H] of one shape";
  if ((uintptr_t)partial->data % 4 != 0) return "the partial must start on a 4-byte boundary";
  if (tprt_dtype_bytes(partial->dtype, 1) == 2 && partial->dims[1] % 2 != 0)
    return "rows of a 2-byte partial must have an even length (a thread reduces the two elements of a 4-byte word)";
  if (residual->dims[1] > TPRT_CUDA_FUSED_MAX_HIDDEN)
    return "rows may hold at most TPRT_CUDA_FUSED_MAX_HIDDEN (65536) elements (a block's share of a row lives in "
           "its shared memory)";
  if (tprt_dtype_bytes(partial->dtype, partial->dims[0] * partial->dims[1]) > TPRT_CUDA_FUSED_MAX_CAPACITY)
    return "a partial may hold at most TPRT_CUDA_FUSED_MAX_CAPACITY bytes";
  return NULL;
}

/// The bytes a call needs of each slot among |group| members: one-shot, the partial's; two-shot, a
/// member's share of the rows (ceil(T / group)), of the partial or of the sums, whichever is longer
/// (an owner sends its rows' sums: f32, or with |round_sum| rounded to a 2-byte residual's dtype,
/// each row padded to whole 4-byte words).
static inline int64_t tprt_cuda_fused_call_bytes(const tprt_tensor_t* partial, const tprt_tensor_t* residual,
                                                 int two_shot, int group, int round_sum) {
  int64_t m = residual->dims[0], h = residual->dims[1];
  if (!two_shot || group < 1) return tprt_dtype_bytes(partial->dtype, m * h);
  int64_t rows = (m + group - 1) / group, in = tprt_dtype_bytes(partial->dtype, h),
          out = round_sum && tprt_dtype_bytes(residual->dtype, 1) == 2 ? (2 * h + 3) / 4 * 4 : 4 * h;
  return rows * (in > out ? in : out);
}

/// The quantization of normed that tp.fused_allreduce_add_rmsnorm_quantize asks of the fused
/// kernel: every row quantized rowwise in |format| (TPRT_QUANT_*) into tp.quantize's layouts,
/// bitwise tprt_cuda_quantize(_with_amax) of normed. The per-tensor formats take |amax| (f32 [1]:
/// fp8's scale, nvfp4's global scale); mxfp8 none.
typedef struct {
  int format;
  const tprt_tensor_t* amax;
  tprt_tensor_t* data;          // [T,H] codes: bytes, or two nibbles a byte (nvfp4)
  tprt_tensor_t* scale;         // mxfp8 / nvfp4: [rup(T,128), rup(H/bs,4)], padding zero; fp8: f32 [1]
  tprt_tensor_t* global_scale;  // nvfp4: f32 [1]; else NULL
} tprt_cuda_fused_quant_t;

/// tp.fused_allreduce_add_rmsnorm in one kernel over |g|'s memory, bitwise the composition:
/// residual_out = round(Σ partial + residual) (the f32 sum in the canonical tree order, or in
/// increasing member order; with |round_sum| that sum is first rounded to the residual's dtype,
/// as the op's sum_type = "residual" asks), normed = rmsnorm(residual_out, gamma, eps). Every member calls it
/// with the same shapes; partial and residual [T,H], gamma [H], float dtypes; normed and
/// residual_out as the residual; tprt_cuda_fused_call_bytes of the call at most |g|->capacity.
/// |two_shot|: member o reduces only the rows r with r mod group = o and sends their sums to the
/// others, which add their own residuals (fewer bytes than one-shot's from 4 members; the same
/// bits); 0: every member reduces every row (one-shot). Consecutive calls may take either form. A peer that never arrives leaves
/// the call waiting until *|g|->abort turns non-zero (the world's abort); the outputs are then
/// undefined. With |quant| (else NULL) the kernel also quantizes normed where it normalizes it.
/// kernels/cuda/norm/fused_norm.cu.
tprt_status_t tprt_cuda_fused_allreduce_add_rmsnorm(const tprt_cuda_peer_group_t* g, const tprt_tensor_t* partial,
                                                    const tprt_tensor_t* residual, const tprt_tensor_t* gamma,
                                                    tprt_tensor_t* normed, tprt_tensor_t* residual_out, float eps,
                                                    int canonical, int round_sum, int two_shot,
                                                    const tprt_cuda_fused_quant_t* quant,
                                                    cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// The fused norm kernel's blocks that fit on the current device at once, in each launch shape:
/// |clusters| in clusters of TPRT_CUDA_FUSED_CLUSTER, |rows| a block per row
/// (tprt_cuda_fused_norm_budgets makes max_blocks and max_row_blocks of them); and its |sms|.
tprt_status_t tprt_cuda_fused_norm_resident_blocks(int* clusters, int* rows, int* sms) TPRT_MUST_USE_RESULT;

/// A member's block budgets from the resident blocks of each shape and the |sharing| members on its
/// GPU. With a GPU each, a call's grid must fit by itself (the stream runs one call at a time).
/// Members sharing a GPU may run different calls at once, in either shape: each gets its share of
/// the smaller count, in both shapes.
static inline void tprt_cuda_fused_norm_budgets(int clusters, int rows, int sharing, int* max_blocks,
                                                int* max_row_blocks) {
  if (sharing > 1) clusters = rows = (clusters < rows ? clusters : rows) / sharing;
  *max_blocks = clusters > 1 ? clusters : 1;
  *max_row_blocks = rows > 1 ? rows : 1;
}

/// The maximum half of a max all-reduce: out[i] = the maximum of staged[g·n + i] over the |group|
/// members as the CPU collectives keep it (tprt_max_keep: NaN skipped, +0 above -0), in |dtype|
/// (bf16, f16 or f32) for both. kernels/cuda/elementwise/reduce.cu.
tprt_status_t tprt_cuda_max_staged(const void* staged, int group, int dtype, int64_t n, void* out,
                                   cudaStream_t stream) TPRT_MUST_USE_RESULT;

/// dst = src: a byte copy when the dtypes match, else a bf16/f16/f32 conversion through f32 (RNE):
/// bitwise tprt_cpu_copy. kernels/cuda/elementwise/philox.cu.
tprt_status_t tprt_cuda_copy(const tprt_tensor_t* src, tprt_tensor_t* dst, cudaStream_t stream) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#include "tprt_cuda_model.h"  // the whole-model ops of kernels/cuda/model/

#endif  // TPRT_CUDA_KERNELS_H_
