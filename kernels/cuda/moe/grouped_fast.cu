// Fast-mode grouped linears (docs/numerics.md "Modes": no bitwise promise) on CUTLASS's sm90
// grouped GEMM (grouped_fast.cuh): forward, dgrad and wgrad of tp.grouped_linear with the device
// group sizes, one GEMM launch for all experts and segments and no host synchronization.
//
// Planning: a kernel reads group_sizes[S*E] (segment s holds group_sizes[s*E + j] rows of expert
// j, then padding up to the capacity T/S; docs/numerics.md "Segmented group sizes") and writes
// each group's problem shape, operand pointers and leading dimensions into a stream-ordered
// device buffer, clamping the counts exactly as the exact kernels do (a count outside [0, T/S]
// never reads or writes out of bounds). Forward and dgrad have one group per (segment, expert);
// rows of padding get +0.0 (a memset first, only when S > 1). The wgrad contracts an expert's
// rows across all segments: with S > 1 they are first copied to expert-major order (compaction),
// then each expert is one group whose K is its row count; experts without rows get dw = +0.0.
//
// Requirements (tprt_cuda_grouped_fast_fits): bf16 operands; D bf16 or f32; K and N multiples of
// 8 and 16-byte aligned tensors (TMA); sizes below 2^31. Other inputs take the exact kernels.
//
// Invariant mode runs the same plans on the invariant grouped GEMM (grouped_invariant.cuh): the
// chunk tree over K (forward) or N (dgrad, in the op's segmented order), one chunk over an
// expert's rows (wgrad). Nothing else differs, so segments, padding rows and empty experts are
// handled once for both modes.
#include "grouped_glu.cuh"
#include "grouped_invariant.cuh"
#include "tprt_cuda_internal.cuh"
#include "tprt_cuda_kernels.h"
extern "C" {
#include "tprt_cpu_internal.h"  // tprt__segmented_order (a C header)
}

namespace {

// Threads of the planning, compaction and zeroing kernels.
constexpr int kThreads = 256;

/// Count j of segment s, clamped as the exact kernels clamp it: to [0, cap], and to what is left
/// of the segment after the counts before it. |start| gets the row of the group's first row.
__device__ int64_t tprt__group_rows(const int64_t* sizes, int64_t s, int64_t j, int64_t e, int64_t cap,
                                    int64_t* start) {
  int64_t local = 0;
  for (int64_t i = 0; i < j; ++i) {
    int64_t c = sizes[s * e + i];
    local += c < 0 ? 0 : c > cap ? cap : c;
  }
  if (local > cap) local = cap;
  int64_t c = sizes[s * e + j];
  c = c < 0 ? 0 : c > cap ? cap : c;
  if (c > cap - local) c = cap - local;
  *start = s * cap + local;
  return c;
}

/// Rows of expert j over all segments.
__device__ int64_t tprt__expert_rows(const int64_t* sizes, int64_t segs, int64_t j, int64_t e, int64_t cap) {
  int64_t n = 0, start;
  for (int64_t s = 0; s < segs; ++s) n += tprt__group_rows(sizes, s, j, e, cap, &start);
  return n;
}

/// One thread per group: the forward or dgrad problem of (segment g / E, expert g % E).
/// |ldd|: D's row length (0: the product's, N forward and K dgrad; a GLU epilogue writes F or 2F).
__global__ void tprt__plan_rows(int layout, const int64_t* sizes, int64_t segs, int64_t e, int64_t cap, const char* a,
                                const char* w, char* d, int64_t n, int64_t k, int d_elem, int64_t ldd,
                                tprt__grouped_plan_t plan) {
  int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= segs * e) return;
  int64_t s = g / e, j = g % e, row;
  int64_t m = tprt__group_rows(sizes, s, j, e, cap, &row);
  const size_t two = 2;  // bf16 operands
  plan.b[g] = w + (size_t)(j * n * k) * two;
  if (layout == TPRT__GROUPED_FWD) {  // y[rows] = x[rows] · w[j]ᵀ: (m, N, K)
    plan.problems[g] = cute::make_shape((int)m, (int)n, (int)k);
    plan.a[g] = a + (size_t)(row * k) * two;
    if (ldd == 0) ldd = n;
    plan.d[g] = d + (size_t)(row * ldd) * (size_t)d_elem;
    plan.lda[g] = k;
    plan.ldb[g] = k;
    plan.ldd[g] = ldd;
  } else {  // dx[rows] = dy[rows] · w[j]: (m, K, N), w[j] row-major as N x K
    plan.problems[g] = cute::make_shape((int)m, (int)k, (int)n);
    plan.a[g] = a + (size_t)(row * n) * two;
    if (ldd == 0) ldd = k;
    plan.d[g] = d + (size_t)(row * ldd) * (size_t)d_elem;
    plan.lda[g] = n;
    plan.ldb[g] = k;
    plan.ldd[g] = ldd;
  }
}

/// One thread per expert: dw[j] = dy[rows_j]ᵀ · x[rows_j] over the expert-major rows of
/// |dy|, |x| (N x K, K = the expert's rows; no tiles for an expert without rows).
__global__ void tprt__plan_wgrad(const int64_t* sizes, int64_t segs, int64_t e, int64_t cap, const char* dy,
                                 const char* x, char* dw, int64_t n, int64_t k, int d_elem, tprt__grouped_plan_t plan) {
  int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= e) return;
  int64_t r0 = 0;
  for (int64_t i = 0; i < j; ++i) r0 += tprt__expert_rows(sizes, segs, i, e, cap);
  int64_t rows = tprt__expert_rows(sizes, segs, j, e, cap);
  plan.problems[j] = cute::make_shape(rows > 0 ? (int)n : 0, (int)k, (int)rows);
  plan.a[j] = dy + (size_t)(r0 * n) * 2;
  plan.b[j] = x + (size_t)(r0 * k) * 2;
  plan.d[j] = dw + (size_t)(j * n * k) * (size_t)d_elem;
  plan.lda[j] = n;
  plan.ldb[j] = k;
  plan.ldd[j] = k;
}

/// Copies |rows| rows of |bytes| (a multiple of 16) from src row |from| to dst row |to|.
__device__ void tprt__copy_rows(const char* src, char* dst, int64_t from, int64_t to, int64_t rows, int64_t bytes) {
  const int64_t words = bytes / 16;
  for (int64_t i = threadIdx.x; i < rows * words; i += blockDim.x) {
    int64_t r = i / words, c = i % words;
    reinterpret_cast<uint4*>(dst + (to + r) * bytes)[c] = reinterpret_cast<const uint4*>(src + (from + r) * bytes)[c];
  }
}

/// One block per (segment, expert): its rows of dy and x to their place in expert-major order.
__global__ void tprt__compact_rows(const int64_t* sizes, int64_t segs, int64_t e, int64_t cap, const char* dy,
                                   const char* x, char* dyc, char* xc, int64_t n, int64_t k) {
  int64_t s = blockIdx.x / e, j = blockIdx.x % e, from, unused;
  int64_t rows = tprt__group_rows(sizes, s, j, e, cap, &from);
  if (rows == 0) return;
  int64_t to = 0;
  for (int64_t i = 0; i < j; ++i) to += tprt__expert_rows(sizes, segs, i, e, cap);
  for (int64_t t = 0; t < s; ++t) to += tprt__group_rows(sizes, t, j, e, cap, &unused);
  tprt__copy_rows(dy, dyc, from, to, rows, n * 2);
  tprt__copy_rows(x, xc, from, to, rows, k * 2);
}

/// dw[j] = +0.0 for the experts without rows (grid.y = expert; |bytes| per expert, multiple of 16).
__global__ void tprt__zero_empty(const int64_t* sizes, int64_t segs, int64_t e, int64_t cap, char* dw, int64_t bytes) {
  const int64_t j = blockIdx.y;
  if (tprt__expert_rows(sizes, segs, j, e, cap) != 0) return;
  uint4* out = reinterpret_cast<uint4*>(dw + j * bytes);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes / 16; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = make_uint4(0, 0, 0, 0);
}

bool tprt__aligned(const void* p) { return ((uintptr_t)p & 15) == 0; }

/// The plan's device buffer for |groups| groups (each array 16-byte aligned).
tprt_status_t tprt__plan_alloc(int64_t groups, tprt__grouped_plan_t* plan, void** mem, cudaStream_t stream) {
  const int64_t g2 = (groups + 1) / 2 * 2;  // pointer and int64 arrays: whole 16-byte units
  const size_t shapes = ((size_t)groups * sizeof(cute::Shape<int, int, int>) + 15) / 16 * 16;
  size_t bytes = (size_t)g2 * 6 * 8 + shapes;
  TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(mem, bytes, stream));
  char* p = (char*)*mem;
  plan->groups = (int)groups;
  plan->a = (const void**)p;
  plan->b = (const void**)(p + g2 * 8);
  plan->d = (void**)(p + g2 * 16);
  plan->lda = (int64_t*)(p + g2 * 24);
  plan->ldb = (int64_t*)(p + g2 * 32);
  plan->ldd = (int64_t*)(p + g2 * 40);
  plan->problems = (cute::Shape<int, int, int>*)(p + g2 * 48);
  return nullptr;
}

tprt_status_t tprt__sm_count(int* out) { return tprt_cuda_gemm_sms(out); }

int64_t tprt__blocks(int64_t n) { return (n + kThreads - 1) / kThreads; }

/// Which GEMM runs a plan: the fast kernel, or the invariant one with |chunks| chunks of
/// |tiles_per_chunk| k tiles (0: one chunk of the group's K).
struct tprt__grouped_mode_t {
  bool invariant;
  int chunks, tiles_per_chunk;
};

/// Runs the grouped GEMM of |layout| over |plan| in |mode| (the invariant tree's workspace
/// stream-ordered); with |glu|, the GLU epilogue's kernel (layout FWD: the forward, DGRAD: the
/// backward; D bf16).
tprt_status_t tprt__grouped_gemm(int layout, const tprt__grouped_plan_t& plan, const tprt__grouped_mode_t& mode,
                                 bool d_f32, int sm, cudaStream_t stream, const tprt__glu_epi_t* glu = nullptr) {
  const bool backward = layout == TPRT__GROUPED_DGRAD;
  if (!mode.invariant) {
    if (glu) return tprt__grouped_glu_gemm_fast(backward, plan, *glu, sm, stream);
    return layout == TPRT__GROUPED_FWD     ? tprt__grouped_gemm_fwd(plan, d_f32, sm, stream)
           : layout == TPRT__GROUPED_DGRAD ? tprt__grouped_gemm_dgrad(plan, d_f32, sm, stream)
                                           : tprt__grouped_gemm_wgrad(plan, d_f32, sm, stream);
  }
  // A long contraction takes its own kernel (grouped_invariant.cuh); the wgrad's (an expert's
  // rows, known on the device: one chunk) never does.
  const bool long_k = mode.tiles_per_chunk > 0 && (int64_t)mode.tiles_per_chunk * 64 * mode.chunks >= 12288;
  tprt__grouped_tree_t tree{mode.tiles_per_chunk, nullptr, sm, long_k};
  tprt_status_t s = tprt__inv_tree_alloc(mode.tiles_per_chunk > 0 ? mode.chunks : 1,
                                         tprt__grouped_inv_first_level(tree), sm, &tree.tree_ws, stream);
  if (s) return s;
  s = glu                             ? tprt__grouped_glu_gemm_inv(backward, plan, tree, *glu, sm, stream)
      : layout == TPRT__GROUPED_FWD   ? tprt__grouped_inv_gemm_fwd(plan, tree, d_f32, sm, stream)
      : layout == TPRT__GROUPED_DGRAD ? tprt__grouped_inv_gemm_dgrad(plan, tree, d_f32, sm, stream)
                                      : tprt__grouped_inv_gemm_wgrad(plan, tree, d_f32, sm, stream);
  if (tree.tree_ws) tprt__cuda_free_async(tree.tree_ws, stream);
  return s;
}

/// The status of the last launch: NULL, or what failed.
tprt_status_t tprt__launched(const char* what) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : tprt__cuda_make_status(err, what, __FILE__, __LINE__);
}

}  // namespace

extern "C" bool tprt_cuda_grouped_fast_fits(const tprt_tensor_t* a, const tprt_tensor_t* w,
                                            const tprt_tensor_t* group_sizes, const tprt_tensor_t* out, int which) {
  // a: x (forward) or dy; w: the weights [E,N,K] (forward, dgrad) or x (wgrad); out: y, dx or dw.
  if (!a || !w || !group_sizes || !out || a->rank != 2 || group_sizes->rank != 1 ||
      group_sizes->dtype != TPRT_DTYPE_I64 || a->dtype != TPRT_DTYPE_BF16 || w->dtype != TPRT_DTYPE_BF16 ||
      (out->dtype != TPRT_DTYPE_BF16 && out->dtype != TPRT_DTYPE_F32))
    return false;
  if (!tprt__aligned(a->data) || !tprt__aligned(w->data) || !tprt__aligned(out->data)) return false;
  const int64_t lim = INT32_MAX;
  int64_t t = a->dims[0], e, n, k;
  if (which == TPRT__GROUPED_WGRAD) {  // dy[T,N], x[T,K], dw[E,N,K]
    if (w->rank != 2 || out->rank != 3 || w->dims[0] != t) return false;
    e = out->dims[0], n = a->dims[1], k = w->dims[1];
    if (out->dims[1] != n || out->dims[2] != k) return false;
  } else {  // forward x[T,K], w[E,N,K], y[T,N]; dgrad dy[T,N], w[E,N,K], dx[T,K]
    if (w->rank != 3 || out->rank != 2 || out->dims[0] != t) return false;
    e = w->dims[0], n = w->dims[1], k = w->dims[2];
    int64_t in = which == TPRT__GROUPED_FWD ? k : n, res = which == TPRT__GROUPED_FWD ? n : k;
    if (a->dims[1] != in || out->dims[1] != res) return false;
  }
  int64_t g = group_sizes->dims[0];
  return e > 0 && g > 0 && g % e == 0 && t % (g / e) == 0 && t > 0 && n > 0 && k > 0 && n % 8 == 0 && k % 8 == 0 &&
         t < lim && n < lim && k < lim && g < lim;
}

/// Forward or dgrad over the rows of every group. With |glu| the GLU epilogue's kernel writes
/// |out| (gated [T, F] forward, dh [T, 2F] backward) instead of the product, whose shape the
/// checks take from |prod| (bf16 [T, 2F] forward, [T, F] backward).
static tprt_status_t tprt__grouped_rows(int layout, const tprt_tensor_t* a, const tprt_tensor_t* w,
                                        const tprt_tensor_t* group_sizes, tprt_tensor_t* out,
                                        const tprt__grouped_mode_t& mode, cudaStream_t stream,
                                        const tprt__glu_epi_t* glu = nullptr, const tprt_tensor_t* prod = nullptr) {
  const char* op = layout == TPRT__GROUPED_FWD
                       ? (mode.invariant ? "grouped_linear (invariant)" : "grouped_linear (fast)")
                   : mode.invariant ? "grouped_linear_dgrad (invariant)"
                                    : "grouped_linear_dgrad (fast)";
  if (!tprt_cuda_grouped_fast_fits(a, w, group_sizes, glu ? prod : out, layout))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported shapes, dtypes or alignment", op);
  int64_t t = a->dims[0], e = w->dims[0], n = w->dims[1], k = w->dims[2];
  int64_t segs = group_sizes->dims[0] / e, cap = t / segs, groups = segs * e;
  if (segs > 1) TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->data, 0, tprt_tensor_bytes(out), stream));
  int sm = 0;
  TPRT_RETURN_IF_ERROR(tprt__sm_count(&sm), "%s", op);
  tprt__grouped_plan_t plan;
  void* mem = nullptr;
  TPRT_RETURN_IF_ERROR(tprt__plan_alloc(groups, &plan, &mem, stream), "%s", op);
  tprt__plan_rows<<<(unsigned)tprt__blocks(groups), kThreads, 0, stream>>>(
      layout, (const int64_t*)group_sizes->data, segs, e, cap, (const char*)a->data, (const char*)w->data,
      (char*)out->data, n, k, out->dtype == TPRT_DTYPE_F32 ? 4 : 2, glu ? out->dims[1] : 0, plan);
  tprt_status_t s = tprt__launched("grouped GEMM plan");
  bool f32 = out->dtype == TPRT_DTYPE_F32;
  if (!s) s = tprt__grouped_gemm(layout, plan, mode, f32, sm, stream, glu);
  tprt__cuda_free_async(mem, stream);
  return s ? tprt_status_annotate(s, "%s", op) : nullptr;
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_fast(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                       const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                                       cudaStream_t stream) {
  return tprt__grouped_rows(TPRT__GROUPED_FWD, x, w, group_sizes, y, tprt__grouped_mode_t{false, 0, 0}, stream);
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_dgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                             const tprt_tensor_t* group_sizes, tprt_tensor_t* dx,
                                                             cudaStream_t stream) {
  return tprt__grouped_rows(TPRT__GROUPED_DGRAD, dy, w, group_sizes, dx, tprt__grouped_mode_t{false, 0, 0}, stream);
}

static tprt_status_t tprt__grouped_wgrad(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                         const tprt_tensor_t* group_sizes, tprt_tensor_t* dw,
                                         const tprt__grouped_mode_t& mode, cudaStream_t stream) {
  const char* op = mode.invariant ? "grouped_linear_wgrad (invariant)" : "grouped_linear_wgrad (fast)";
  if (!tprt_cuda_grouped_fast_fits(dy, x, group_sizes, dw, TPRT__GROUPED_WGRAD))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported shapes, dtypes or alignment", op);
  int64_t t = dy->dims[0], n = dy->dims[1], k = x->dims[1], e = dw->dims[0];
  int64_t segs = group_sizes->dims[0] / e, cap = t / segs;
  const int64_t* sizes = (const int64_t*)group_sizes->data;
  int sm = 0;
  TPRT_RETURN_IF_ERROR(tprt__sm_count(&sm), "%s", op);
  const int d_elem = dw->dtype == TPRT_DTYPE_F32 ? 4 : 2;
  const int64_t expert_bytes = n * k * d_elem;
  tprt__zero_empty<<<dim3((unsigned)(tprt__blocks(expert_bytes / 16) < 1024 ? tprt__blocks(expert_bytes / 16) : 1024),
                          (unsigned)e),
                     kThreads, 0, stream>>>(sizes, segs, e, cap, (char*)dw->data, expert_bytes);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  // Segments: the expert's rows to expert-major order first.
  const char *dyp = (const char*)dy->data, *xp = (const char*)x->data;
  void* compact = nullptr;
  if (segs > 1) {
    TPRT_CUDA_RETURN_IF_ERROR(tprt__cuda_malloc_async(&compact, (size_t)(t * (n + k)) * 2, stream));
    char *dyc = (char*)compact, *xc = dyc + (size_t)(t * n) * 2;
    tprt__compact_rows<<<(unsigned)(segs * e), kThreads, 0, stream>>>(sizes, segs, e, cap, dyp, xp, dyc, xc, n, k);
    dyp = dyc;
    xp = xc;
  }
  tprt__grouped_plan_t plan;
  void* mem = nullptr;
  tprt_status_t s = tprt__launched("grouped wgrad compaction");
  if (!s) s = tprt__plan_alloc(e, &plan, &mem, stream);
  if (!s) {
    tprt__plan_wgrad<<<(unsigned)tprt__blocks(e), kThreads, 0, stream>>>(sizes, segs, e, cap, dyp, xp, (char*)dw->data,
                                                                         n, k, d_elem, plan);
    s = tprt__launched("grouped GEMM plan");
  }
  if (!s) s = tprt__grouped_gemm(TPRT__GROUPED_WGRAD, plan, mode, dw->dtype == TPRT_DTYPE_F32, sm, stream);
  if (mem) tprt__cuda_free_async(mem, stream);
  if (compact) tprt__cuda_free_async(compact, stream);
  return s ? tprt_status_annotate(s, "%s", op) : nullptr;
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_wgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                             const tprt_tensor_t* group_sizes, tprt_tensor_t* dw,
                                                             cudaStream_t stream) {
  return tprt__grouped_wgrad(dy, x, group_sizes, dw, tprt__grouped_mode_t{false, 0, 0}, stream);
}

//===----------------------------------------------------------------------===//
// Invariant mode
//===----------------------------------------------------------------------===//

/// The contracted length of |which| (0 forward: K; 1 dgrad: N) for an invariant call that fits.
static int64_t tprt__inv_len(const tprt_tensor_t* w, int which) { return which == 0 ? w->dims[2] : w->dims[1]; }

/// |len| splits into |chunks| (a power of two up to 1024) chunks of whole 64-wide k tiles.
static bool tprt__inv_chunks_fit(int64_t len, int chunks) {
  return chunks >= 1 && chunks <= 1024 && (chunks & (chunks - 1)) == 0 && len % chunks == 0 && (len / chunks) % 64 == 0;
}

extern "C" bool tprt_cuda_grouped_invariant_fits(const tprt_tensor_t* a, const tprt_tensor_t* w,
                                                 const tprt_tensor_t* group_sizes, const tprt_tensor_t* out, int which,
                                                 int chunks) {
  if (!tprt_cuda_grouped_fast_fits(a, w, group_sizes, out, which)) return false;
  return which == TPRT__GROUPED_WGRAD || tprt__inv_chunks_fit(tprt__inv_len(w, which), chunks);
}

/// The invariant mode for a call of |which| that fits.
static tprt__grouped_mode_t tprt__inv_mode(const tprt_tensor_t* w, int which, int chunks) {
  return tprt__grouped_mode_t{true, chunks, (int)(tprt__inv_len(w, which) / chunks / 64)};
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_invariant(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                                            const tprt_tensor_t* group_sizes, tprt_tensor_t* y,
                                                            int chunks, cudaStream_t stream) {
  if (!tprt_cuda_grouped_invariant_fits(x, w, group_sizes, y, TPRT__GROUPED_FWD, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "grouped_linear (invariant): unsupported shapes, dtypes, alignment or chunks");
  return tprt__grouped_rows(TPRT__GROUPED_FWD, x, w, group_sizes, y, tprt__inv_mode(w, TPRT__GROUPED_FWD, chunks),
                            stream);
}

/// The invariant dgrad; with |glu|, the GLU epilogue's backward writing |dx| = dh from the
/// product's shape |prod|.
static tprt_status_t tprt__grouped_dgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                   const tprt_tensor_t* group_sizes, tprt_tensor_t* dx, int chunks,
                                                   int segments, int blocks, cudaStream_t stream,
                                                   const tprt__glu_epi_t* glu, const tprt_tensor_t* prod) {
  const char* op = glu ? "grouped_linear_dgrad_glu (invariant)" : "grouped_linear_dgrad (invariant)";
  if (!tprt_cuda_grouped_invariant_fits(dy, w, group_sizes, glu ? prod : dx, TPRT__GROUPED_DGRAD, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported shapes, dtypes, alignment or chunks", op);
  int64_t t = dy->dims[0], e = w->dims[0], n = w->dims[1], k = w->dims[2];
  // The host order only validates (the CPU kernel's checks and messages); the device computes it.
  int64_t* order = nullptr;
  tprt_status_t s = tprt__segmented_order(op, n, chunks, segments, blocks, &order);
  if (s) return s;
  const bool segmented = order != nullptr;
  tprt__scratch_free(order);
  const tprt__grouped_mode_t mode = tprt__inv_mode(w, TPRT__GROUPED_DGRAD, chunks);
  if (!segmented) return tprt__grouped_rows(TPRT__GROUPED_DGRAD, dy, w, group_sizes, dx, mode, stream, glu, prod);
  // dy's columns and every expert's rows of w in the segmented order (copies), then the same GEMM.
  tprt_cuda_order_t o = {chunks, segments, blocks};
  void *dyp = nullptr, *wp = nullptr;
  cudaError_t err = tprt__cuda_malloc_async(&dyp, (size_t)(t * n) * 2, stream);
  if (err == cudaSuccess) err = tprt__cuda_malloc_async(&wp, (size_t)(e * n * k) * 2, stream);
  if (err != cudaSuccess) s = tprt__cuda_make_status(err, "tprt__cuda_malloc_async", __FILE__, __LINE__);
  if (!s) s = tprt_cuda_gather_2d(dy->data, t, n, 2, nullptr, o, n, 0, dyp, stream);
  if (!s) s = tprt_cuda_gather_rows_batched(w->data, e, n, k * 2, o, wp, stream);
  if (!s) {
    tprt_tensor_t dyv = tprt_tensor_make(dyp, dy->dtype, 2, dy->dims), wv = tprt_tensor_make(wp, w->dtype, 3, w->dims);
    s = tprt__grouped_rows(TPRT__GROUPED_DGRAD, &dyv, &wv, group_sizes, dx, mode, stream, glu, prod);
  }
  if (dyp) tprt__cuda_free_async(dyp, stream);
  if (wp) tprt__cuda_free_async(wp, stream);
  return s ? tprt_status_annotate(s, "%s", op) : nullptr;
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_dgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* w,
                                                                  const tprt_tensor_t* group_sizes, tprt_tensor_t* dx,
                                                                  int chunks, int segments, int blocks,
                                                                  cudaStream_t stream) {
  return tprt__grouped_dgrad_invariant(dy, w, group_sizes, dx, chunks, segments, blocks, stream, nullptr, nullptr);
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_wgrad_invariant(const tprt_tensor_t* dy, const tprt_tensor_t* x,
                                                                  const tprt_tensor_t* group_sizes, tprt_tensor_t* dw,
                                                                  cudaStream_t stream) {
  return tprt__grouped_wgrad(dy, x, group_sizes, dw, tprt__grouped_mode_t{true, 1, 0}, stream);
}

//===----------------------------------------------------------------------===//
// The GLU in the epilogue (grouped_glu.cuh)
//===----------------------------------------------------------------------===//

namespace {

/// The GLU epilogue's parameters, or NULL with |why| set when the shapes do not allow it.
bool tprt__glu_setup(const tprt_tensor_t* h_like, int kind, int64_t interleave, float alpha, float limit,
                     tprt__glu_epi_t* glu) {
  if (!h_like || h_like->rank != 2 || h_like->dims[1] % 2 || kind < 0 || kind > 2 || interleave < 0 ||
      interleave > INT32_MAX)
    return false;
  const int64_t f = h_like->dims[1] / 2;
  if (f == 0 || (interleave > 0 && f % interleave)) return false;
  *glu = tprt__glu_epi_t{kind, (int)interleave, alpha, limit, f, nullptr, nullptr};
  return true;
}

}  // namespace

extern "C" bool tprt_cuda_grouped_linear_glu_fits(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                                  const tprt_tensor_t* group_sizes, const tprt_tensor_t* gated,
                                                  int64_t interleave, int chunks) {
  if (!x || !w1 || !gated || gated->rank != 2 || w1->rank != 3 || gated->dtype != TPRT_DTYPE_BF16 ||
      w1->dims[1] != 2 * gated->dims[1] || !tprt__aligned(gated->data))
    return false;
  // The product h [T, 2F] the kernel computes and never writes.
  int64_t hd[2] = {gated->dims[0], w1->dims[1]};
  tprt_tensor_t h = tprt_tensor_make(gated->data, TPRT_DTYPE_BF16, 2, hd);
  if (chunks == 0) {
    return tprt__glu_fwd_pairs(interleave, cute::size<1>(tprt__grouped_fast_tile_t{})) &&
           tprt_cuda_grouped_fast_fits(x, w1, group_sizes, &h, TPRT__GROUPED_FWD);
  }
  return tprt__glu_fwd_pairs(interleave, cute::size<1>(tprt__grouped_inv_tile_t{})) &&
         tprt_cuda_grouped_invariant_fits(x, w1, group_sizes, &h, TPRT__GROUPED_FWD, chunks);
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_glu(const tprt_tensor_t* x, const tprt_tensor_t* w1,
                                                      const tprt_tensor_t* group_sizes, tprt_tensor_t* gated, int kind,
                                                      int64_t interleave, float alpha, float limit, int chunks,
                                                      cudaStream_t stream) {
  const char* op = chunks ? "grouped_linear_glu (invariant)" : "grouped_linear_glu (fast)";
  tprt__glu_epi_t glu;
  if (!tprt_cuda_grouped_linear_glu_fits(x, w1, group_sizes, gated, interleave, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported shapes, dtypes, interleave or chunks", op);
  int64_t hd[2] = {gated->dims[0], w1->dims[1]};
  tprt_tensor_t h = tprt_tensor_make(gated->data, TPRT_DTYPE_BF16, 2, hd);
  if (!tprt__glu_setup(&h, kind, interleave, alpha, limit, &glu))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported GLU", op);
  const tprt__grouped_mode_t mode = chunks ? tprt__inv_mode(w1, TPRT__GROUPED_FWD, chunks) : tprt__grouped_mode_t{};
  return tprt__grouped_rows(TPRT__GROUPED_FWD, x, w1, group_sizes, gated, mode, stream, &glu, &h);
}

extern "C" bool tprt_cuda_grouped_linear_dgrad_glu_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w2,
                                                        const tprt_tensor_t* group_sizes, const tprt_tensor_t* h,
                                                        const tprt_tensor_t* dh, int chunks) {
  if (!dy || !w2 || !h || !dh || h->rank != 2 || dh->rank != 2 || h->dtype != TPRT_DTYPE_BF16 ||
      dh->dtype != TPRT_DTYPE_BF16 || h->dims[0] != dh->dims[0] || h->dims[1] != dh->dims[1] || h->dims[1] % 2 ||
      w2->rank != 3 || w2->dims[2] != h->dims[1] / 2 || !tprt__aligned(h->data) || !tprt__aligned(dh->data))
    return false;
  int64_t pd[2] = {dh->dims[0], dh->dims[1] / 2};  // the product dgated [T, F]
  tprt_tensor_t prod = tprt_tensor_make(dh->data, TPRT_DTYPE_BF16, 2, pd);
  return chunks == 0 ? tprt_cuda_grouped_fast_fits(dy, w2, group_sizes, &prod, TPRT__GROUPED_DGRAD)
                     : tprt_cuda_grouped_invariant_fits(dy, w2, group_sizes, &prod, TPRT__GROUPED_DGRAD, chunks);
}

extern "C" tprt_status_t tprt_cuda_grouped_linear_dgrad_glu(const tprt_tensor_t* dy, const tprt_tensor_t* w2,
                                                            const tprt_tensor_t* group_sizes, const tprt_tensor_t* h,
                                                            tprt_tensor_t* dh, int kind, int64_t interleave,
                                                            float alpha, float limit, int chunks, int segments,
                                                            int blocks, cudaStream_t stream) {
  const char* op = chunks ? "grouped_linear_dgrad_glu (invariant)" : "grouped_linear_dgrad_glu (fast)";
  tprt__glu_epi_t glu;
  if (!tprt_cuda_grouped_linear_dgrad_glu_fits(dy, w2, group_sizes, h, dh, chunks))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported shapes, dtypes, alignment or chunks", op);
  if (!tprt__glu_setup(h, kind, interleave, alpha, limit, &glu))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: unsupported GLU", op);
  glu.h = static_cast<const uint16_t*>(h->data);
  glu.d_base = static_cast<const uint16_t*>(dh->data);
  int64_t pd[2] = {dh->dims[0], dh->dims[1] / 2};
  tprt_tensor_t prod = tprt_tensor_make(dh->data, TPRT_DTYPE_BF16, 2, pd);
  if (chunks)
    return tprt__grouped_dgrad_invariant(dy, w2, group_sizes, dh, chunks, segments, blocks, stream, &glu, &prod);
  return tprt__grouped_rows(TPRT__GROUPED_DGRAD, dy, w2, group_sizes, dh, tprt__grouped_mode_t{}, stream, &glu, &prod);
}
