// Helpers shared by the CPU kernel files (not part of libtprt's API): element loads and stores
// through f32, argument validation with precise messages, scratch memory.
#ifndef TPRT_CPU_INTERNAL_H_
#define TPRT_CPU_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_dtype.h"
#include "tprt_numerics.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

/// Dtype masks for validation.
#define TPRT__M(d) (1u << (d))
#define TPRT__FLOATS (TPRT__M(TPRT_DTYPE_BF16) | TPRT__M(TPRT_DTYPE_F16) | TPRT__M(TPRT_DTYPE_F32))

/// Loads element |i| of float storage |p| of |dtype| (bf16, f16 or f32) as f32, exactly.
static inline float tprt__ld(const void* p, int dtype, int64_t i) { return tprt_load_elem(p, dtype, i); }

/// Stores |v| rounded (RNE) to |dtype| at element |i| of |p|.
static inline void tprt__st(void* p, int dtype, int64_t i, float v) { tprt_store_elem(p, dtype, i, v); }

/// Widens n elements starting at element |offset| of |p| into out[0..n).
void tprt__ld_row(const void* p, int dtype, int64_t offset, int64_t n, float* out);

/// Rounds in[0..n) into n elements of |p| starting at element |offset|.
void tprt__st_row(void* p, int dtype, int64_t offset, int64_t n, const float* in);

/// Formats |t|'s shape and dtype as "[16,64] bf16" into |buf| and returns it.
const char* tprt__shape_str(const tprt_tensor_t* t, char* buf, size_t size);

/// Checks that |t| is non-NULL, has |rank| (or any rank >= 1 when rank < 0), a dtype in |dtypes|,
/// non-negative dims and data unless empty. Messages read "<op>: <name> must be ...; got ...".
tprt_status_t tprt__check(const char* op, const char* name, const tprt_tensor_t* t, int rank, unsigned dtypes);

/// Output columns per block of the CPU GEMMs: 64 independent accumulators, a multiple of every
/// SIMD width.
#define TPRT__NB 64

/// The canonical accumulation of one row a[0..k) against a block of TPRT__NB columns: |bt| is the
/// block transposed ([k][NB], zero columns past the block's end); |part| ([chunks][NB]) gets every
/// chunk of |size| terms summed from +0.0 with fmaf in increasing k (+0.0 for a short chunk's
/// padded terms), then the pairwise tree over chunks, whose result lands in part[0..NB).
/// Shared by linear (x against w) and its gradients (dgrad and wgrad), so all accumulate alike.
void tprt__kacc_block(const float* a, const float* bt, int64_t k, int64_t size, int chunks, float* part);

/// The operand checks of rmsnorm (|beta| NULL) and layernorm: x[M,H] and y like x of a float
/// dtype, gamma[H] float, beta[H] of gamma's dtype, eps finite > 0 (cpu_norm.c; CUDA uses it too).
tprt_status_t tprt__check_norm(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                               const tprt_tensor_t* beta, const tprt_tensor_t* y, float eps);
/// tp.add_rmsnorm's operands: residual, y and sum one [M,H] layout; tprt__check_norm on sum, gamma
/// and normed (cpu_norm.c).
tprt_status_t tprt__check_add_norm(const tprt_tensor_t* residual, const tprt_tensor_t* y, const tprt_tensor_t* gamma,
                                   const tprt_tensor_t* normed, const tprt_tensor_t* sum, float eps);

/// The operand checks of moe_permute (x[T,H], indices[T,k] i32, y[T*k,H] of x's dtype,
/// group_sizes[E] i64 with E >= 1, row_map[T*k] i32) and moe_unpermute (y[T*k,H], row_map[T*k],
/// weights[T,k] f32, out[T,H] of y's dtype): the CPU and CUDA kernels' first step.
tprt_status_t tprt__check_moe_permute(const tprt_tensor_t* x, const tprt_tensor_t* indices, const tprt_tensor_t* y,
                                      const tprt_tensor_t* group_sizes, const tprt_tensor_t* row_map);
tprt_status_t tprt__check_moe_unpermute(const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                        const tprt_tensor_t* weights, const tprt_tensor_t* out);

/// Checks the operands and attributes shared by glu and glu_grad: x[...,2F] of a float dtype,
/// |half| (named |half_name|: y or dy) x's shape with the last dimension F and x's dtype, |kind|
/// a tprt_glu_kind_t, |interleave| 0 or a divisor of F, quick_geglu's alpha and limit finite > 0.
tprt_status_t tprt__check_glu(const char* op, const tprt_tensor_t* x, const char* half_name, const tprt_tensor_t* half,
                              int kind, int64_t interleave, float alpha, float limit);

/// Checks that |t| has exactly |rank| dims equal to |dims|; |what| says where they come from
/// ("[M,N] = [4,8]"). Message: "<op>: <name> must be <what>; got [..] dtype".
tprt_status_t tprt__check_dims(const char* op, const char* name, const tprt_tensor_t* t, int rank, const int64_t* dims,
                               const char* what);

/// Returns the spelling of a set of dtypes ("bf16, f16 or f32").
const char* tprt__dtypes_str(unsigned dtypes, char* buf, size_t size);

/// Allocates |bytes| of uninitialized scratch with the system allocator (RESOURCE_EXHAUSTED).
tprt_status_t tprt__scratch(const char* op, size_t bytes, void** out_ptr);

/// Frees scratch from tprt__scratch (NULL-safe).
void tprt__scratch_free(void* ptr);

/// The argument checks of rope and of attention (|dy|, |dq|, |dk|, |dv| NULL for the forward),
/// shared with the CUDA kernels (cpu_attention.c).
tprt_status_t tprt__check_rope(const tprt_tensor_t* x, const tprt_tensor_t* cos_t, const tprt_tensor_t* sin_t,
                               const tprt_tensor_t* y);
tprt_status_t tprt__check_attention(const char* op, const tprt_tensor_t* q, const tprt_tensor_t* k,
                                    const tprt_tensor_t* v, const tprt_tensor_t* y, const tprt_tensor_t* dy,
                                    const tprt_tensor_t* dq, const tprt_tensor_t* dk, const tprt_tensor_t* dv,
                                    int64_t seq_len, int64_t head_dim, float scale);
/// lse (NULL passes): f32 [T, Hq] for q[T, Hq*D]. Called after tprt__check_attention.
tprt_status_t tprt__check_lse(const char* op, const tprt_tensor_t* q, const tprt_tensor_t* lse, int64_t head_dim);
/// The shapes of a decoding attention's KV cache (tprt_kv_cache_t; NULL passes): k and v
/// [B*C, Hkv*D] of k's dtype and width with B = q's rows / seq_len and C >= 1, len i32 [B]. Its
/// values are checked where they are read (tprt__cache_len).
tprt_status_t tprt__check_kv_cache(const char* op, const tprt_tensor_t* q, const tprt_tensor_t* k,
                                   const tprt_kv_cache_t* cache, int64_t seq_len);
/// Rows per sequence (C) of a checked cache whose queries come in |seqs| sequences.
static inline int64_t tprt__cache_rows(const tprt_kv_cache_t* cache, int64_t seqs) {
  return seqs > 0 ? cache->k->dims[0] / seqs : 0;
}

/// The argument checks of tprt_cpu_rmsnorm_grad / tprt_cpu_layernorm_grad (|layernorm| selects
/// dbeta), shared with the CUDA kernels so both reject the same inputs with the same messages.
tprt_status_t tprt__check_norm_grad(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* gamma,
                                    const tprt_tensor_t* dy, const tprt_tensor_t* dx, const tprt_tensor_t* dgamma,
                                    const tprt_tensor_t* dbeta, bool layernorm, float eps, int chunks);

/// The argument checks of tprt_cpu_moe_route, shared with the CUDA kernel.
tprt_status_t tprt__check_moe_route(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                    const tprt_tensor_t* weights, int top_k);

/// The argument checks of tprt_cpu_kvcache_write and tprt_cpu_sample (shapes, dtypes and, for
/// sample, every row's parameters), shared with the device kernels.
tprt_status_t tprt__check_kvcache_write(const tprt_tensor_t* cache, const tprt_tensor_t* new_rows,
                                        const tprt_tensor_t* cache_len, const tprt_tensor_t* out, int64_t seq_len);
tprt_status_t tprt__check_sample(const tprt_tensor_t* logits, const tprt_tensor_t* seed, const tprt_tensor_t* request,
                                 const tprt_tensor_t* position, const tprt_tensor_t* temperature,
                                 const tprt_tensor_t* top_k, const tprt_tensor_t* top_p, const tprt_tensor_t* token);

/// The argument checks of tprt_cpu_add / tprt_cpu_mul (|mul| selects mul), shared with the CUDA
/// kernels. b has a's shape and dtype, or (add only) is a rank-1 bias of a's last dimension
/// (|out_bias_cols| gets its length, else 0), or (add only, f32 a) has a's shape or the bias's in
/// any float dtype; c has a's shape and a's dtype, or (add, f32 a) b's.
tprt_status_t tprt__check_elementwise(const char* op, const tprt_tensor_t* a, const tprt_tensor_t* b,
                                      const tprt_tensor_t* c, bool mul, int64_t* out_bias_cols);

/// The argument checks of tprt_cpu_copy and tprt_cpu_fill_philox, shared with the CUDA kernels.
tprt_status_t tprt__check_copy(const tprt_tensor_t* src, const tprt_tensor_t* dst);
tprt_status_t tprt__check_fill_philox(const tprt_tensor_t* t, float lo, float hi, int64_t row_offset,
                                      int64_t col_offset, int64_t logical_cols);

/// The shape checks of tprt_cpu_moe_bucket / tprt_cpu_moe_unbucket (|bucketing| selects the
/// direction), without the check of the counts, which are host data only on the CPU; shared with
/// the CUDA kernels. On success returns the bytes of one row.
tprt_status_t tprt__check_bucket_shapes(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* group_sizes,
                                        const tprt_tensor_t* y, int buckets, bool bucketing, size_t* out_row_bytes);

/// The shape checks shared by moe_unpermute and its gradient: y [T*k,H], row_map [T*k] and the
/// combined rows |out| [T,H] of y's dtype (named |out_name| in messages), for weights [T,k].
tprt_status_t tprt__check_combine_dims(const char* op, const tprt_tensor_t* y, const tprt_tensor_t* row_map,
                                       const tprt_tensor_t* weights, const tprt_tensor_t* out, const char* out_name);

/// The shape checks of the MoE backward kernels (cpu_moe_grad.c), shared with the CUDA kernels;
/// the CPU kernels then also check the data (row_map a permutation, indices distinct experts).
tprt_status_t tprt__check_moe_unpermute_grad(const tprt_tensor_t* dout, const tprt_tensor_t* y,
                                             const tprt_tensor_t* row_map, const tprt_tensor_t* weights,
                                             const tprt_tensor_t* dy, const tprt_tensor_t* dweights);
tprt_status_t tprt__check_moe_permute_grad(const tprt_tensor_t* dy, const tprt_tensor_t* row_map,
                                           const tprt_tensor_t* dx, int top_k);
tprt_status_t tprt__check_moe_route_grad(const tprt_tensor_t* logits, const tprt_tensor_t* indices,
                                         const tprt_tensor_t* dweights, const tprt_tensor_t* dlogits, int top_k);

/// The argument checks of tprt_cpu_fused_grouped_mlp, shared with the CUDA kernel.
tprt_status_t tprt__check_fused_grouped_mlp(const tprt_tensor_t* x, const tprt_tensor_t* w1, const tprt_tensor_t* w2,
                                            const tprt_tensor_t* group_sizes, const tprt_tensor_t* y);

/// The argument checks of tprt_cpu_glu_grad, shared with the CUDA kernel.
tprt_status_t tprt__check_glu_grad(const tprt_tensor_t* x, const tprt_tensor_t* dy, const tprt_tensor_t* dx, int kind,
                                   int64_t interleave, float alpha, float limit);

/// The layout of one quantization (format, axis) for an x of [m,k] (cpu_quant.c).
typedef struct {
  int data_dtype, scale_dtype;
  int block;             // elements per block scale along the scaled axis; 0 = per tensor
  int64_t data_dims[2];  // [M,K] or, transposed, [K,M]
  int scale_rank;
  int64_t scale_dims[2];
} tprt__quant_layout_t;

/// The argument checks of tprt_cpu_quantize / tprt_cpu_dequantize (|op| names the direction;
/// |x| is the high-precision side), shared with the CUDA kernels; fills |out| with the layout.
tprt_status_t tprt__check_quant(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* data,
                                const tprt_tensor_t* scale, const tprt_tensor_t* global, int format, int axis,
                                tprt__quant_layout_t* out);

/// The argument checks of tprt_cpu_amax (|x| a float tensor of rank >= 1; |amax| f32 [1]) and of
/// the |amax| operand of tprt_cpu_quantize_with_amax (|x| NULL: f32 [1], and |format| fp8 or nvfp4),
/// shared with the CUDA kernels.
tprt_status_t tprt__check_amax(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* amax, int format);

/// The segmented order of the contracted dimension N (docs/numerics.md, "Segmented contractions"):
/// *out_rows gets N indices (scratch memory, free with tprt__scratch_free), or NULL for the plain
/// order (segments == 1). INVALID_ARGUMENT names |op| when segments/blocks do not fit N and chunks.
tprt_status_t tprt__segmented_order(const char* op, int64_t n, int chunks, int segments, int blocks,
                                    int64_t** out_rows);

/// The segment rule of the grouped linears: checks group_sizes[G] against T rows and the E experts
/// of |w| (named |wname| in messages) and stores S = G/E. S == 1: the counts sum to T. S > 1: the T
/// rows split into S segments of capacity T/S, each holding at most T/S rows for its E experts,
/// then padding. |rows_of| names the tensor holding the rows ("x"), or NULL.
tprt_status_t tprt__check_segments(const char* op, int64_t t, const tprt_tensor_t* w, const char* wname,
                                   const char* rows_of, const tprt_tensor_t* group_sizes, int64_t* out_segments);

/// The two halves of tprt__check_segments: the shapes (group_sizes is [S*E], S divides T; stores
/// S), which a device backend checks too, and the counts (host data), which it cannot read.
tprt_status_t tprt__check_segment_shapes(const char* op, int64_t t, const tprt_tensor_t* w, const char* wname,
                                         const char* rows_of, const tprt_tensor_t* group_sizes, int64_t* out_segments);
tprt_status_t tprt__check_segment_counts(const char* op, int64_t t, const tprt_tensor_t* w, const char* rows_of,
                                         const tprt_tensor_t* group_sizes, int64_t segs, int64_t* out_segments);

/// The argument checks of tprt_cpu_linear and tprt_cpu_grouped_linear (the latter without the
/// host-side counts; stores S), shared with the CUDA launchers so both report the same statuses.
tprt_status_t tprt__check_linear(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                 const tprt_tensor_t* y, int chunks);
tprt_status_t tprt__check_grouped_linear(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                         const tprt_tensor_t* group_sizes, const tprt_tensor_t* y, int chunks,
                                         int64_t* out_segments);

/// The whole-model ops' shape, dtype and parameter checks (cpu_vocab.c, cpu_optim.c), shared with
/// the CUDA launchers. tprt__check_embedding checks neither the ids' values (the CPU kernels check
/// them too, reading them) nor |chunks|.
tprt_status_t tprt__check_embedding(const char* op, const tprt_tensor_t* ids, const tprt_tensor_t* table,
                                    const tprt_tensor_t* rows, bool grad, int64_t start, int64_t vocab);
tprt_status_t tprt__check_sumsq(const tprt_tensor_t* g, const tprt_tensor_t* acc, const tprt_tensor_t* acc_out);
tprt_status_t tprt__check_global_norm(const tprt_tensor_t* acc, const tprt_tensor_t* norm);
tprt_status_t tprt__check_adamw(const tprt_tensor_t* master, const tprt_tensor_t* grad, const tprt_tensor_t* m,
                                const tprt_tensor_t* v, const tprt_tensor_t* hyper, const tprt_tensor_t* norm,
                                const tprt_tensor_t* master_out, const tprt_tensor_t* m_out, const tprt_tensor_t* v_out,
                                const tprt_tensor_t* weight);

#endif  // TPRT_CPU_INTERNAL_H_
