// The CPU kernels of libtprt: reference implementations of every tp op in exact mode. Their
// results are tpc's bits: every CUDA exact-mode kernel must reproduce them (docs/numerics.md).
//
// Conventions shared by every kernel:
// - Tensors are dense row-major views (tprt_tensor.h) that the caller owns; inputs are const.
//   Float storage is bf16, f16 or f32; values are widened to f32 exactly, computed in f32 in the
//   order docs/numerics.md defines, and rounded once (RNE) to the output's dtype.
// - Shapes and dtypes are validated first; a violation returns INVALID_ARGUMENT with a message
//   that names the op, the tensor and the values, and leaves the outputs untouched. A failed
//   scratch allocation returns RESOURCE_EXHAUSTED. Kernels never abort.
// - Outputs must not overlap inputs, except tprt_cpu_add / tprt_cpu_mul, where c may be a or b.
// - Thread safety: a kernel runs on the calling thread only (each rank is a thread already), so
//   results cannot depend on a thread count; concurrent calls on disjoint outputs are safe.
#ifndef TPRT_CPU_KERNELS_H_
#define TPRT_CPU_KERNELS_H_

#include <stdbool.h>
#include <stdint.h>

#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Activation of tprt_cpu_glu and tprt_cpu_fused_grouped_mlp (the dialect's `kind`).
typedef enum tprt_glu_kind_e {
  TPRT_GLU_SWIGLU = 0,       // silu(gate) * up
  TPRT_GLU_GEGLU = 1,        // gelu_tanh(gate) * up
  TPRT_GLU_QUICK_GEGLU = 2,  // TE ClampedQGeGLU: g·sigmoid(alpha·g)·(u + 1), g, u clamped by limit
} tprt_glu_kind_t;

/// Formats of tprt_cpu_quantize / tprt_cpu_dequantize (the dialect's `format`).
typedef enum tprt_quant_format_e {
  TPRT_QUANT_FP8_E4M3 = 0,  // per-tensor current scaling, scale = scale_inv f32[1]
  TPRT_QUANT_FP8_E5M2 = 1,
  TPRT_QUANT_MXFP8 = 2,  // E4M3 data, E8M0 (RCEIL) scale per 32-element block
  TPRT_QUANT_NVFP4 = 3,  // E2M1 data, E4M3 scale per 16-element block, f32 global scale
} tprt_quant_format_t;

/// Scaled axis of a quantization (the dialect's `axis`).
typedef enum tprt_quant_axis_e {
  TPRT_QUANT_ROWWISE = 0,     // blocks along K
  TPRT_QUANT_COLUMNWISE = 1,  // blocks along M
} tprt_quant_axis_t;

/// y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias[N]) with the canonical K accumulation over |chunks| (a power
/// of two in [1, TPRT_MAX_CHUNKS]; K need not divide: chunk size ceil(K/chunks), short or empty
/// trailing chunks act as zero padding). x, w and bias share a float dtype D; y has D, or is f32:
/// an unreduced partial (the tree sum, unrounded; bias must then be NULL). The bias is added in
/// f32 after the tree, then the sum is rounded once.
tprt_status_t tprt_cpu_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                              tprt_tensor_t* y, int chunks) TPRT_MUST_USE_RESULT;

/// y[T,N] = x[T,K]·w[e,N,K]ᵀ for the rows of each expert e of w[E,N,K]: rows are sorted by expert
/// and group_sizes[S*E] (i64, each >= 0) counts them in S >= 1 segments of E. S == 1: the counts
/// sum to T. S > 1 (what an expert-parallel rank receives from S peers): T % S == 0 and segment s,
/// rows [s*T/S, (s+1)*T/S), holds group_sizes[s*E + j] rows of expert j for j = 0..E-1, in order,
/// at most T/S in all, then padding rows whose outputs are +0.0. Every row is computed as by
/// tprt_cpu_linear; y has x's dtype or is an f32 partial.
tprt_status_t tprt_cpu_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* group_sizes,
                                      tprt_tensor_t* y, int chunks) TPRT_MUST_USE_RESULT;

/// Gated linear unit over the last dimension: x[...,2F] -> y[...,F] of the same dtype.
/// |interleave| 0: gate = x[..., 0:F], up = x[..., F:2F]; b > 0 (dividing F): x alternates blocks
/// of b gate and b up columns. |kind| a tprt_glu_kind_t; |alpha| and |limit| (finite, > 0) are
/// read only by TPRT_GLU_QUICK_GEGLU.
tprt_status_t tprt_cpu_glu(const tprt_tensor_t* x, tprt_tensor_t* y, int kind, int64_t interleave, float alpha,
                           float limit) TPRT_MUST_USE_RESULT;

/// sum = residual + y (tprt_cpu_add), normed = tprt_cpu_rmsnorm(sum, gamma): the pair's bits.
tprt_status_t tprt_cpu_add_rmsnorm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                   tprt_tensor_t* normed, tprt_tensor_t* sum, float eps) TPRT_MUST_USE_RESULT;

/// y[M,H] = x · rsqrt(mean(x²) + eps) · gamma, row by row with the canonical row reduction.
/// gamma[H] may have any float dtype; y has x's dtype and shape; eps finite and > 0.
tprt_status_t tprt_cpu_rmsnorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, tprt_tensor_t* y,
                               float eps) TPRT_MUST_USE_RESULT;

/// y[M,H] = (x - mean) · rsqrt(var + eps) · gamma + beta, two passes (mean, then the variance of
/// x - mean) with the canonical row reduction; beta has gamma's dtype.
tprt_status_t tprt_cpu_layernorm(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* beta,
                                 tprt_tensor_t* y, float eps) TPRT_MUST_USE_RESULT;

/// c = a + b elementwise (same shapes and float dtype; f32 sum rounded once). c may alias a or b
/// (an operand of c's dtype). b may also be a rank-1 bias of a's last dimension, broadcast over
/// the rows. With an f32 a (a reduced f32 sum) b, a bias or of a's shape, keeps its own storage
/// dtype and c may have it: the sum is rounded once (the fused norms' residual add).
tprt_status_t tprt_cpu_add(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) TPRT_MUST_USE_RESULT;

/// c = a · b elementwise, as tprt_cpu_add.
tprt_status_t tprt_cpu_mul(const tprt_tensor_t* a, const tprt_tensor_t* b, tprt_tensor_t* c) TPRT_MUST_USE_RESULT;

/// Quantizes x[M,K] (bf16/f16/f32) to |format| (a tprt_quant_format_t) along |axis| (a
/// tprt_quant_axis_t), writing data, scale (and, for nvfp4, global_scale f32[1]; NULL
/// otherwise) with the layouts of docs/dialect.md: data [M,K] or, columnwise fp8 / nvfp4, [K,M];
/// f4 packed two per byte, element 2j in the low nibble; block scales unswizzled and
/// zero-padded to the dialect's shapes. The amax of fp8 and nvfp4 is taken over x.
tprt_status_t tprt_cpu_quantize(const tprt_tensor_t* x, tprt_tensor_t* data, tprt_tensor_t* scale,
                                tprt_tensor_t* global_scale, int format, int axis) TPRT_MUST_USE_RESULT;

/// tprt_cpu_quantize with the per-tensor amax taken from |amax| (f32 [1]: the amax of the whole
/// tensor x is a shard of, made by tprt_cpu_amax and a max all-reduce) instead of x's own: the
/// fp8 scale, or nvfp4's global scale and through it every E4M3 block scale. Bitwise the
/// quantization of a tensor whose amax is |amax| (a NaN |amax| counts as 0, a negative one as
/// its magnitude). |amax| NULL is tprt_cpu_quantize; mxfp8 takes none (INVALID_ARGUMENT).
tprt_status_t tprt_cpu_quantize_with_amax(const tprt_tensor_t* x, const tprt_tensor_t* amax, tprt_tensor_t* data,
                                          tprt_tensor_t* scale, tprt_tensor_t* global_scale, int format,
                                          int axis) TPRT_MUST_USE_RESULT;

/// amax f32 [1] = max |x| over every element of x (bf16/f16/f32, any rank >= 1), NaN skipped
/// (CUDA fmaxf semantics, as the quantize kernels take it); +0 for an empty or all-NaN x.
tprt_status_t tprt_cpu_amax(const tprt_tensor_t* x, tprt_tensor_t* amax) TPRT_MUST_USE_RESULT;

/// The inverse of tprt_cpu_quantize: x = data · scale (· global_scale), rounded once to x's dtype
/// (bf16/f16/f32, independent of the quantized input's).
tprt_status_t tprt_cpu_dequantize(const tprt_tensor_t* data, const tprt_tensor_t* scale,
                                  const tprt_tensor_t* global_scale, tprt_tensor_t* x, int format,
                                  int axis) TPRT_MUST_USE_RESULT;

/// Top-k routing: f32 softmax of logits[T,E] (max-subtracted, canonical row sum), then the
/// |top_k| largest probabilities in decreasing order (ties to the lower expert index) into
/// indices[T,k] i32 and weights[T,k] f32, renormalized over the k when |normalize|.
tprt_status_t tprt_cpu_moe_route(const tprt_tensor_t* logits, tprt_tensor_t* indices, tprt_tensor_t* weights, int top_k,
                                 bool normalize) TPRT_MUST_USE_RESULT;

/// Writes a step's new keys or values into the KV cache (tp.kvcache_write): row b*S + i of
/// new_rows[B*S,W] becomes row b*C + cache_len[b] + i of out[B*C,W], the other rows are cache's
/// (S = seq_len, C = the cache's rows per sequence, B = cache_len's length). With out->data ==
/// cache->data (in place) only the new rows are written. cache_len[b] + S beyond C is OUT_OF_RANGE.
tprt_status_t tprt_cpu_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                     const tprt_tensor_t* cache_len, tprt_tensor_t* out,
                                     int64_t seq_len) TPRT_MUST_USE_RESULT;

/// One token per row of logits[B,V] (tp.sample; docs/numerics.md, "Sampling"): the Gumbel-max draw
/// from softmax(logits / temperature[b]) over the row's top_k[b] largest logits (0: all) and then
/// its nucleus of mass top_p[b] (1: all), the noise Philox's of (seed[b], request[b], position[b],
/// vocabulary id); temperature 0 is greedy (the first largest logit). token[b] is -1 for a row
/// whose logits are all -inf or NaN. Rows with parameters out of range are INVALID_ARGUMENT.
tprt_status_t tprt_cpu_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request,
                              const tprt_tensor_t* position, const tprt_tensor_t* temperature,
                              const tprt_tensor_t* top_k, const tprt_tensor_t* top_p,
                              tprt_tensor_t* token) TPRT_MUST_USE_RESULT;

/// Copies each token once per selected expert: y[T*k,H] (x's dtype) holds the rows ordered by
/// expert, then token, then slot; group_sizes[E] (i64; E is its length) counts each expert's
/// rows; row_map[T*k] (i32) gives the source slot t*k+j of every row. indices must be in [0, E).
tprt_status_t tprt_cpu_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, tprt_tensor_t* y,
                                   tprt_tensor_t* group_sizes, tprt_tensor_t* row_map) TPRT_MUST_USE_RESULT;

/// Expert-parallel dispatch into |buckets| (B >= 1, dividing E) fixed-capacity buckets:
/// x[R,H] holds rows sorted by expert, counted by group_sizes[E] (i64, each >= 0, summing to R);
/// bucket b, rows [b*R, (b+1)*R) of y[B*R,H], receives the rows of experts [b*E/B, (b+1)*E/B) in
/// order, then all-zero-byte rows up to R. Byte copies: any dtype (f4 needs an even H); y has x's.
tprt_status_t tprt_cpu_moe_bucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                  int buckets) TPRT_MUST_USE_RESULT;

/// The inverse of tprt_cpu_moe_bucket: gathers the real rows of every bucket of x[B*R,H] back
/// into expert order in y[R,H] (x's dtype); the padding rows are not read.
tprt_status_t tprt_cpu_moe_unbucket(const tprt_tensor_t* x, const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                    int buckets) TPRT_MUST_USE_RESULT;

/// The weighted combine: out[t] = sum_j weights[t,j] · y[row of slot (t,j)] with acc = fmaf(w,
/// y, acc) from +0.0 in increasing j, rounded once to out's dtype (y's). row_map must be a
/// permutation of the T*k slots.
tprt_status_t tprt_cpu_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                     tprt_tensor_t* out) TPRT_MUST_USE_RESULT;

/// y[T,H] = grouped_linear(glu(grouped_linear(x, w1)), w2) with x[T,H], w1[E,2F,H], w2[E,H,F]
/// and the intermediates rounded to x's dtype: bitwise equal to the three kernels in sequence,
/// so group_sizes follows tprt_cpu_grouped_linear's segment rule (padding rows of y are +0.0).
tprt_status_t tprt_cpu_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                         const tprt_tensor_t* group_sizes, tprt_tensor_t* y, int kind,
                                         int64_t interleave, float alpha, float limit, int chunks) TPRT_MUST_USE_RESULT;

/// Copies src to dst (same shape): a byte copy when the dtypes match, otherwise a conversion
/// between float dtypes through f32 (RNE).
tprt_status_t tprt_cpu_copy(const tprt_tensor_t* src, tprt_tensor_t* dst) TPRT_MUST_USE_RESULT;

/// Fills |t| (bf16/f16/f32; rank >= 1, viewed as 2-D [rows, cols] with cols its last dimension)
/// as the block at (row_offset, col_offset) of a logical [*, logical_cols] tensor: element (i,j)
/// gets fmaf(hi - lo, u, lo), u = tprt_philox_uniform(seed, stream, (row_offset+i)·logical_cols +
/// col_offset+j), rounded to t's dtype. Every sharding of a logical tensor therefore sees the same
/// values.
tprt_status_t tprt_cpu_fill_philox(tprt_tensor_t* t, uint64_t seed, uint64_t stream, float lo, float hi,
                                   int64_t row_offset, int64_t col_offset, int64_t logical_cols) TPRT_MUST_USE_RESULT;

// ------------------------------------------------------------------------------------------------
// Backward kernels (docs/numerics.md, "Backward"). Same conventions as above: f32 arithmetic in
// a defined order, one rounding per output, validation first, the calling thread only. "chunks"
// always splits the dimension the kernel contracts (the canonical K accumulation applied to N
// for dgrad, to M for wgrad and the parameter gradients of bias and norms).
// ------------------------------------------------------------------------------------------------

/// dx[M,K] = dy[M,N]·w[N,K], the canonical accumulation over N with |chunks| (as tprt_cpu_linear,
/// fmaf(dy[m,n], w[n,k], acc) in increasing n). w has dy's dtype D; dx has D or is f32: the
/// unreduced partial of a column-parallel layer (the tree sum, unrounded).
tprt_status_t tprt_cpu_linear_dgrad(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                    int chunks) TPRT_MUST_USE_RESULT;

/// tprt_cpu_linear_dgrad with N visited in the segmented order of docs/numerics.md ("Segmented
/// contractions"): N is |blocks| blocks of |segments| segments, and chunk c takes its run of
/// N/(chunks·segments) elements from every segment of block c/(chunks/blocks) in turn. This is the
/// order in which every TP degree shares one tree when the rows of w are a stride-2 (GLU gate/up)
/// shard. segments and blocks must be >= 1; segments == 1 is tprt_cpu_linear_dgrad (blocks then
/// has no effect); otherwise N % (chunks·segments) == 0 and chunks % blocks == 0.
tprt_status_t tprt_cpu_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                              int chunks, int segments, int blocks) TPRT_MUST_USE_RESULT;

/// Checks an accumulating op's acc against its output |out|: present, with out's shape and dtype
/// ("<op>: acc must have the result's shape and dtype ..."); the CUDA kernels validate with it too.
tprt_status_t tprt_cpu_check_acc(const char* op, const tprt_tensor_t* acc,
                                 const tprt_tensor_t* out) TPRT_MUST_USE_RESULT;

/// dx = acc + tprt_cpu_linear_dgrad_segmented(dy, w) as tprt_cpu_add adds them (the product rounded
/// to dx's dtype first): the op's optional acc operand. acc has dx's shape and dtype; dx must not
/// overlap acc. cpu_accumulate.c.
tprt_status_t tprt_cpu_linear_dgrad_acc(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                        tprt_tensor_t* dx, int chunks, int segments,
                                        int blocks) TPRT_MUST_USE_RESULT;

/// dw[N,K] = dy[M,N]ᵀ·x[M,K], the canonical accumulation over M with |chunks| (fmaf(dy[m,n],
/// x[m,k], acc) in increasing m). x has dy's dtype D; dw has D or is f32 (a partial over a
/// sequence shard, or main-grad precision).
tprt_status_t tprt_cpu_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                    int chunks) TPRT_MUST_USE_RESULT;

/// db[N] = Σ_m dy[M,N], the canonical accumulation over M with acc = acc + dy[m,n] (bitwise
/// fmaf(dy, 1, acc)). db has dy's dtype or is f32.
tprt_status_t tprt_cpu_bias_grad(const tprt_tensor_t* dy, tprt_tensor_t* db, int chunks) TPRT_MUST_USE_RESULT;

/// dx[T,K] = dy[T,N]·w[e,N,K] for the rows of each expert e of w[E,N,K], group_sizes[S*E] with
/// tprt_cpu_grouped_linear's segment rule; every real row is computed as by tprt_cpu_linear_dgrad
/// and padding rows of dx are +0.0 (dy's padding rows are not read). dx has dy's dtype or is f32.
tprt_status_t tprt_cpu_grouped_linear_dgrad(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                            const tprt_tensor_t* group_sizes, tprt_tensor_t* dx,
                                            int chunks) TPRT_MUST_USE_RESULT;

/// tprt_cpu_grouped_linear_dgrad with N in the segmented order of tprt_cpu_linear_dgrad_segmented
/// (same requirements: segments, blocks >= 1; with segments > 1, N % (chunks·segments) == 0 and
/// chunks % blocks == 0).
tprt_status_t tprt_cpu_grouped_linear_dgrad_segmented(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                      const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                      int segments, int blocks) TPRT_MUST_USE_RESULT;

/// dw[e,N,K] = Σ dy[r,N]ᵀ·x[r,K] over the rows r of expert e (E is dw's first dimension) in
/// increasing global row order across all S segments of group_sizes[S*E]: one sequence of n_e
/// rows, reduced by the canonical accumulation with |chunks| (an expert without rows gets +0.0).
/// Padding rows are not read. x has dy's dtype D; dw has D or is f32.
tprt_status_t tprt_cpu_grouped_linear_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                            const tprt_tensor_t* group_sizes, tprt_tensor_t* dw,
                                            int chunks) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cpu_glu: from x[...,2F] and dy[...,F] (x's dtype) writes dx[...,2F] (x's
/// dtype and layout: the gate and up columns of |interleave|). |kind|, |alpha| and |limit| as in
/// tprt_cpu_glu; quick_geglu's clamped inputs get a zero gradient.
tprt_status_t tprt_cpu_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, tprt_tensor_t* dx, int kind,
                                int64_t interleave, float alpha, float limit) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cpu_rmsnorm: dx[M,H] (x's dtype) row by row with the canonical row
/// reduction, and dgamma[H] = Σ_m dy·xhat over M with the canonical accumulation (|chunks|).
/// dy has x's shape and dtype; dgamma has gamma's dtype or is f32 (a partial over a sequence shard).
tprt_status_t tprt_cpu_rmsnorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                    tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps,
                                    int chunks) TPRT_MUST_USE_RESULT;

/// tprt_cpu_rmsnorm_grad with dx = acc + the gradient as tprt_cpu_add adds them (the gradient
/// rounded to dx's dtype first): the op's optional acc operand. acc has dx's shape and dtype and
/// must not overlap dx. cpu_accumulate.c.
tprt_status_t tprt_cpu_rmsnorm_grad_acc(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                        const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps,
                                        int chunks) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cpu_layernorm: dx as tprt_cpu_rmsnorm_grad, dgamma[H] = Σ_m dy·xhat and
/// dbeta[H] = Σ_m dy over M with the canonical accumulation; dgamma and dbeta each have gamma's
/// dtype or are f32.
tprt_status_t tprt_cpu_layernorm_grad(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                      tprt_tensor_t* dx, tprt_tensor_t* dgamma, tprt_tensor_t* dbeta, float eps,
                                      int chunks) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cpu_moe_unpermute: dy[row of slot (t,j)] = weights[t,j]·dout[t] rounded
/// once to y's dtype, and dweights[t,j] (f32) = Σ_h y[row,h]·dout[t,h] by the canonical row
/// reduction with fmaf lanes. dout[T,H] has y's dtype; row_map must be a permutation of the T*k slots.
tprt_status_t tprt_cpu_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                          const tprt_tensor_t* row_map, const tprt_tensor_t* weights, tprt_tensor_t* dy,
                                          tprt_tensor_t* dweights) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cpu_moe_permute: dx[t] = Σ_j dy[row of slot (t,j)] from +0.0 in
/// increasing j, in f32, rounded once to dy's dtype. dy is [T*top_k,H]; row_map a permutation.
tprt_status_t tprt_cpu_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map, tprt_tensor_t* dx,
                                        int top_k) TPRT_MUST_USE_RESULT;

/// The gradient of tprt_cpu_moe_route's weights with respect to logits[T,E]: the softmax is
/// recomputed as in the forward, the selection indices[T,k] (distinct experts per token) is a
/// constant, and dweights[T,k] (f32) flows back through the optional renormalization and the
/// softmax. dlogits[T,E] has logits' dtype.
tprt_status_t tprt_cpu_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                      const tprt_tensor_t* dweights, tprt_tensor_t* dlogits, int top_k,
                                      bool normalize) TPRT_MUST_USE_RESULT;

// ------------------------------------------------------------------------------------------------
// Vocabulary kernels (cpu_vocab.c; docs/numerics.md, "Embedding" and "Cross-entropy"). |start| is
// the first logical vocabulary row the table or head holds (a vocabulary-parallel shard's offset)
// and |vocab| the logical vocabulary size; ids and targets are i32, a negative target is an
// ignored token, any other id outside [0, vocab) an error naming its position. |chunks| is the
// module's tp.chunks: the logits' K accumulation (as tprt_cpu_linear) and the vocabulary blocks.
// ------------------------------------------------------------------------------------------------

/// y[T,H] = table[ids[t] - start] (a byte copy), or -0.0 in every column for an id outside this
/// table's rows [start, start + V). y has table's dtype.
tprt_status_t tprt_cpu_embedding(const tprt_tensor_t* ids, const tprt_tensor_t* table, tprt_tensor_t* y,
                                 int64_t start, int64_t vocab) TPRT_MUST_USE_RESULT;

/// dtable[V,H] (f32) = Σ_t [ids[t] = start + v] dy[t] over the tokens with |chunks| chunks: each
/// chunk from +0.0 in increasing t, then the pairwise tree; a row no token names is +0.0.
tprt_status_t tprt_cpu_embedding_grad(const tprt_tensor_t* ids, const tprt_tensor_t* dy, tprt_tensor_t* dtable,
                                      int64_t start, int64_t vocab, int chunks) TPRT_MUST_USE_RESULT;

/// dtable = acc + tprt_cpu_embedding_grad(ids, dy) as tprt_cpu_add adds them (a row no token names
/// is acc + 0.0): the op's optional acc operand. acc has dtable's shape (f32) and must not overlap
/// it. cpu_accumulate.c.
tprt_status_t tprt_cpu_embedding_grad_acc(const tprt_tensor_t* ids, const tprt_tensor_t* dy, const tprt_tensor_t* acc,
                                          tprt_tensor_t* dtable, int64_t start, int64_t vocab,
                                          int chunks) TPRT_MUST_USE_RESULT;

/// stats[T,3] (f32) of the head rows w[V,H] (logical rows [start, start + V)) in |vocab_chunks|
/// blocks: the merged maximum m, Σ exp(z - m), and the target's logit (-0.0 when another shard
/// holds it or the token is ignored).
tprt_status_t tprt_cpu_cross_entropy_stats(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, tprt_tensor_t* stats, int64_t start,
                                           int64_t vocab, int chunks, int vocab_chunks) TPRT_MUST_USE_RESULT;

/// loss[T] and lse[T] (f32) from stats[T,3R], R shards' statistics in shard order: the pairwise
/// tree over the shards, lse = m + log s, loss = lse - (the shards' target logits summed from
/// -0.0), +0.0 for an ignored token.
tprt_status_t tprt_cpu_cross_entropy_combine(const tprt_tensor_t* stats, const tprt_tensor_t* targets,
                                             tprt_tensor_t* loss, tprt_tensor_t* lse) TPRT_MUST_USE_RESULT;

/// The whole vocabulary's loss and lse: tprt_cpu_cross_entropy_stats with |chunks| blocks, then
/// tprt_cpu_cross_entropy_combine of the one shard.
tprt_status_t tprt_cpu_cross_entropy(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets,
                                     tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks) TPRT_MUST_USE_RESULT;

/// tprt_cpu_cross_entropy's loss and lse from the logits z[T,V] themselves (any float type; the
/// whole vocabulary), |chunks| blocks: of z = tprt_cpu_linear(x, w) (x's dtype, the same chunks)
/// the same bits as tprt_cpu_cross_entropy(x, w, ...).
tprt_status_t tprt_cpu_cross_entropy_logits(const tprt_tensor_t* z, const tprt_tensor_t* targets, tprt_tensor_t* loss,
                                            tprt_tensor_t* lse, int chunks) TPRT_MUST_USE_RESULT;

/// dx[T,H] = Σ_v dz[t,v]·w[v] with the canonical accumulation over the V local rows
/// (|vocab_chunks| chunks), dz = RNE_x(tprt_ce_dlogit(z, lse[t], v = target, dloss[t])), +0.0 for
/// an ignored token. dx has x's dtype, or is f32 (a vocabulary shard's partial).
tprt_status_t tprt_cpu_cross_entropy_dgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                           const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start,
                                           int64_t vocab, int chunks, int vocab_chunks) TPRT_MUST_USE_RESULT;

/// dw[V,H] (f32) = Σ_t dz[t,v]·x[t] with the canonical accumulation over the tokens
/// (|token_chunks| chunks), dz as for tprt_cpu_cross_entropy_dgrad.
tprt_status_t tprt_cpu_cross_entropy_wgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                           const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start,
                                           int64_t vocab, int chunks, int token_chunks) TPRT_MUST_USE_RESULT;

/// dx as tprt_cpu_cross_entropy_dgrad and dw as tprt_cpu_cross_entropy_wgrad (the two, in turn).
tprt_status_t tprt_cpu_cross_entropy_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                          const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                          const tprt_tensor_t* dloss, tprt_tensor_t* dx, tprt_tensor_t* dw,
                                          int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                          int token_chunks) TPRT_MUST_USE_RESULT;

/// The whole vocabulary's loss and lse as tprt_cpu_cross_entropy (|chunks| blocks), then dx and dw
/// as tprt_cpu_cross_entropy_grad of that lse and |dloss| (the two, in turn).
tprt_status_t tprt_cpu_cross_entropy_with_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                               const tprt_tensor_t* targets, const tprt_tensor_t* dloss,
                                               tprt_tensor_t* loss, tprt_tensor_t* lse, tprt_tensor_t* dx,
                                               tprt_tensor_t* dw, int chunks, int vocab_chunks,
                                               int token_chunks) TPRT_MUST_USE_RESULT;

// ------------------------------------------------------------------------------------------------
// Optimizer kernels (cpu_optim.c; docs/numerics.md, "Optimizer")
// ------------------------------------------------------------------------------------------------

/// acc_out[TPRT_SUMSQ_WORDS] (i64) = acc (NULL: zero) plus, when |count|, the exact sum of the
/// squares of g's elements (any float dtype, any shape); normalized limbs.
tprt_status_t tprt_cpu_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, tprt_tensor_t* acc_out,
                             bool count) TPRT_MUST_USE_RESULT;

/// norm[1] (f32) = tprt_sumsq_norm of the sum of the R accumulators in acc[R·TPRT_SUMSQ_WORDS].
tprt_status_t tprt_cpu_global_norm(const tprt_tensor_t* acc, tprt_tensor_t* norm) TPRT_MUST_USE_RESULT;

/// One AdamW step of every element (tprt_adamw_elem with tprt_adamw_clip(hyper[7], norm[0])):
/// master, grad, m, v and the three outputs f32 of one shape; weight = the new master rounded to
/// weight's dtype.
tprt_status_t tprt_cpu_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                             const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                             tprt_tensor_t* master_out, tprt_tensor_t* m_out, tprt_tensor_t* v_out,
                             tprt_tensor_t* weight) TPRT_MUST_USE_RESULT;

/// Rotary position embedding (the Hugging Face rotate_half convention) of every head of x[T,H*D]:
/// per head and pair i < D/2, y[i] = x[i]·cos[t,i] - x[i+D/2]·sin[t,i] and y[i+D/2] =
/// x[i+D/2]·cos[t,i+D/2] + x[i]·sin[t,i+D/2]; |inverse| applies the transpose (rotation by -angle:
/// rope's gradient). cos and sin[T,D] share a float dtype; y has x's (docs/numerics.md, "Attention").
tprt_status_t tprt_cpu_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                            tprt_tensor_t* y, bool inverse) TPRT_MUST_USE_RESULT;

/// Scaled dot-product attention with grouped-query heads: q[T,Hq*D], k and v[T,Hkv*D] of one float
/// dtype, D = |head_dim|, T a multiple of |seq_len| (each run of seq_len rows is one sequence),
/// query head h reading key/value head h / (Hq/Hkv); y[T,Hq*D] like q. |causal| masks the keys
/// after each query; |scale| 0 means 1/sqrt(D). The softmax is exact (max, exp, canonical sum).
/// With a KV |cache| (decoding; NULL: none), sequence b's queries sit after its cache->len[b]
/// cached tokens and see them first: the keys are the cached rows, then k's, so a token's output
/// has the same bits whether its keys come from a cache or from one prefill call.
/// |lse| (NULL: not wanted), f32 [T, Hq], gets each row's m + ln(l) (tprt_attn_lse).
tprt_status_t tprt_cpu_attention(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                 const tprt_kv_cache_t* cache, tprt_tensor_t* y, tprt_tensor_t* lse, int64_t seq_len,
                                 int64_t head_dim, bool causal, float scale) TPRT_MUST_USE_RESULT;

/// The gradients dq (like q), dk and dv (like k) of tprt_cpu_attention from its inputs, its
/// output |y| and dy (like q); the probabilities are recomputed bit for bit (the forward's |lse|,
/// NULL or f32 [T, Hq], is checked and not needed).
tprt_status_t tprt_cpu_attention_grad(const tprt_tensor_t* q, const tprt_tensor_t* k, const tprt_tensor_t* v,
                                      const tprt_tensor_t* y, const tprt_tensor_t* dy, const tprt_tensor_t* lse,
                                      tprt_tensor_t* dq, tprt_tensor_t* dk, tprt_tensor_t* dv, int64_t seq_len,
                                      int64_t head_dim, bool causal, float scale) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CPU_KERNELS_H_
