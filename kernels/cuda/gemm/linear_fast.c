// The fast-mode dense contractions on cuBLASLt (tensor cores, f32 accumulation, cuBLASLt's own
// reduction order: no invariance, docs/numerics.md "Modes"): the linear's forward (bias in the
// epilogue), dgrad, wgrad and bias gradient. libcublasLt is loaded with dlopen on first use, so
// the CUDA backend plugin still loads (and exact mode still runs) on a machine without it; the
// status then says what is missing.
//
// Every call is one column-major cuBLASLt matmul on the row-major tensors (a row-major [R,C]
// matrix is a column-major C x R one with leading dimension C):
//   forward  yᵀ[N,M]  = (w as K x N)ᵀ · (x as K x M)
//   dgrad    dxᵀ[K,M] = (w as K x N) · (dy as N x M)
//   wgrad    dwᵀ[K,N] = (x as K x M) · (dy as N x M)ᵀ
//   bias     db[N]    = (dy as N x M) · ones[M]
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "tprt_cuda_kernels.h"
#include "tprt_cuda_status.h"

typedef struct {
  void* lib;
  cublasStatus_t (*create)(cublasLtHandle_t*);
  cublasStatus_t (*destroy)(cublasLtHandle_t);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t);
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*, size_t);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t);
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void*, size_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*);
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);
  char error[256];
} tprt__lt_t;

static tprt__lt_t tprt__lt;  // the library's entry points, loaded once per process
static pthread_once_t tprt__lt_once = PTHREAD_ONCE_INIT;

static void tprt__lt_load(void) {
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  for (int i = 0; i < 3 && !tprt__lt.lib; ++i) tprt__lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!tprt__lt.lib) {
    snprintf(tprt__lt.error, sizeof tprt__lt.error, "cannot load libcublasLt (%s)", dlerror());
    return;
  }
#define TPRT__SYM(field, name)                                                      \
  if (!(*(void**)& tprt__lt.field = dlsym(tprt__lt.lib, name))) {                   \
    snprintf(tprt__lt.error, sizeof tprt__lt.error, "libcublasLt has no %s", name); \
    tprt__lt.lib = NULL;                                                            \
    return;                                                                         \
  }
  TPRT__SYM(create, "cublasLtCreate")
  TPRT__SYM(destroy, "cublasLtDestroy")
  TPRT__SYM(desc_create, "cublasLtMatmulDescCreate")
  TPRT__SYM(desc_destroy, "cublasLtMatmulDescDestroy")
  TPRT__SYM(desc_set, "cublasLtMatmulDescSetAttribute")
  TPRT__SYM(layout_create, "cublasLtMatrixLayoutCreate")
  TPRT__SYM(layout_destroy, "cublasLtMatrixLayoutDestroy")
  TPRT__SYM(pref_create, "cublasLtMatmulPreferenceCreate")
  TPRT__SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy")
  TPRT__SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute")
  TPRT__SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic")
  TPRT__SYM(matmul, "cublasLtMatmul")
#undef TPRT__SYM
}

static tprt_status_t tprt__lt_status(cublasStatus_t s, const char* what) {
  return tprt_make_status(TPRT_STATUS_INTERNAL, "%s failed: cublasStatus %d", what, (int)s);
}

static bool tprt__lt_type(int dtype, cudaDataType_t* out) {
  switch (dtype) {
    case TPRT_DTYPE_BF16:
      *out = CUDA_R_16BF;
      return true;
    case TPRT_DTYPE_F16:
      *out = CUDA_R_16F;
      return true;
    case TPRT_DTYPE_F32:
      *out = CUDA_R_32F;
      return true;
    default:
      return false;
  }
}

// The cuBLASLt call of every fast dense contraction, column-major: D[m,n] = op(A)·op(B) with
// op(A) m x k, op(B) k x n, f32 accumulation, optional bias[m] (the epilogue adds it in f32
// before the one rounding to D's dtype); with |accumulate|, C's values are added too (beta = 1),
// C being |c| (D's layout and dtype) or, when NULL, D itself.
typedef struct {
  cublasOperation_t opa, opb;
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* d;
  int64_t ldd;
  int ab_dtype, d_dtype;
  const void* bias;
  bool accumulate;
  const void* c;
} tprt__lt_gemm_t;

// Which of cuBLASLt's candidate algorithms a call runs (docs/cuda-backend.md, "Fast-mode GEMM
// algorithms"). By default the heuristic's first answer. With TPRT_CUDA_GEMM_TUNE=1, the first call
// of each shape times up to kTprtLtCandidates of them on its own operands (one warm-up, then the
// median of three) and every later call of that shape, in any rank of the process, runs the fastest;
// a shape first met during CUDA graph capture, or whose accumulating result is too large to copy
// aside, keeps the first answer. Timing is noise-prone, so two processes may choose differently.
enum { kTprtLtCandidates = 8 };
#define TPRT__LT_SCRATCH_MAX ((size_t)256 << 20)

typedef struct {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  const tprt__lt_gemm_t* g;
  const tprt_cuda_lt_t* lt;
  cudaStream_t stream;
} tprt__lt_call_t;

typedef struct {
  int device, opa, opb, ab_dtype, d_dtype, sm_target;
  int64_t m, n, k, lda, ldb, ldd;
  bool bias, accumulate, c;
} tprt__lt_key_t;

typedef struct {
  tprt__lt_key_t key;
  cublasLtMatmulHeuristicResult_t result;
} tprt__lt_choice_t;

static struct {
  pthread_mutex_t lock;
  tprt__lt_choice_t* choices;
  size_t count, capacity;
  int mode;  // -1: not read yet; 0: the heuristic's first answer; 1: timed
} tprt__lt_tuned = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, -1};

static bool tprt__lt_key_eq(const tprt__lt_key_t* a, const tprt__lt_key_t* b) {
  return a->device == b->device && a->opa == b->opa && a->opb == b->opb && a->ab_dtype == b->ab_dtype &&
         a->d_dtype == b->d_dtype && a->sm_target == b->sm_target && a->m == b->m && a->n == b->n && a->k == b->k &&
         a->lda == b->lda && a->ldb == b->ldb && a->ldd == b->ldd && a->bias == b->bias &&
         a->accumulate == b->accumulate && a->c == b->c;
}

// The median of three timed runs of |algo| after one warm-up, in ms; negative when it fails.
static float tprt__lt_time(const tprt__lt_call_t* call, const cublasLtMatmulAlgo_t* algo, void* d,
                           cudaEvent_t e0, cudaEvent_t e1) {
  const tprt__lt_gemm_t* g = call->g;
  const float alpha = 1.0f, beta = g->accumulate ? 1.0f : 0.0f;
  const void* c = g->c ? g->c : g->d;
  float t[3];
  for (int r = -1; r < 3; ++r) {
    if (r >= 0 && cudaEventRecord(e0, call->stream) != cudaSuccess) return -1;
    cublasStatus_t s = tprt__lt.matmul(call->handle, call->desc, &alpha, g->a, call->la, g->b, call->lb, &beta, c,
                                       call->lc, d, call->lc, algo, call->lt->workspace, call->lt->workspace_bytes,
                                       call->stream);
    if (s != CUBLAS_STATUS_SUCCESS) return -1;
    if (r < 0) continue;
    if (cudaEventRecord(e1, call->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&t[r], e0, e1) != cudaSuccess)
      return -1;
  }
  float lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
  return t[2] < lo ? lo : (t[2] > hi ? hi : t[2]);
}

// The fastest of |n| candidates (index 0 on any failure). An accumulating call is timed into a
// scratch copy of its result, so its operands stay as they were.
static int tprt__lt_fastest(const tprt__lt_call_t* call, const cublasLtMatmulHeuristicResult_t* cand, int n) {
  const tprt__lt_gemm_t* g = call->g;
  size_t bytes = (size_t)g->ldd * (size_t)g->n * (g->d_dtype == TPRT_DTYPE_F32 ? 4u : 2u);
  void* d = g->d;
  if (g->accumulate) {
    if (bytes > TPRT__LT_SCRATCH_MAX || cudaMalloc(&d, bytes) != cudaSuccess) return 0;
  }
  cudaEvent_t e0 = NULL, e1 = NULL;
  int best = 0;
  if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
    float best_ms = -1;
    for (int i = 0; i < n; ++i) {
      float ms = tprt__lt_time(call, &cand[i].algo, d, e0, e1);
      if (ms > 0 && (best_ms < 0 || ms < best_ms)) best_ms = ms, best = i;
    }
  }
  (void)cudaGetLastError();
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (d != g->d) {
    cudaStreamSynchronize(call->stream);
    cudaFree(d);
  }
  return best;
}

static cublasStatus_t tprt__lt_choose(const tprt__lt_call_t* call, cublasLtMatmulPreference_t pref, int sm_target,
                                      cublasLtMatmulHeuristicResult_t* result, int* found) {
  pthread_mutex_lock(&tprt__lt_tuned.lock);
  if (tprt__lt_tuned.mode < 0) {
    const char* v = getenv("TPRT_CUDA_GEMM_TUNE");
    tprt__lt_tuned.mode = v && strcmp(v, "1") == 0;
  }
  int mode = tprt__lt_tuned.mode;
  pthread_mutex_unlock(&tprt__lt_tuned.lock);
  if (mode == 0) return tprt__lt.heuristic(call->handle, call->desc, call->la, call->lb, call->lc, call->lc, pref, 1,
                                           result, found);
  const tprt__lt_gemm_t* g = call->g;
  tprt__lt_key_t key;
  memset(&key, 0, sizeof key);
  if (cudaGetDevice(&key.device) != cudaSuccess) key.device = -1;
  key.opa = g->opa, key.opb = g->opb, key.ab_dtype = g->ab_dtype, key.d_dtype = g->d_dtype;
  key.sm_target = sm_target, key.m = g->m, key.n = g->n, key.k = g->k;
  key.lda = g->lda, key.ldb = g->ldb, key.ldd = g->ldd;
  key.bias = g->bias != NULL, key.accumulate = g->accumulate, key.c = g->c != NULL;
  pthread_mutex_lock(&tprt__lt_tuned.lock);
  for (size_t i = 0; i < tprt__lt_tuned.count; ++i) {
    if (tprt__lt_key_eq(&tprt__lt_tuned.choices[i].key, &key)) {
      *result = tprt__lt_tuned.choices[i].result;
      *found = 1;
      pthread_mutex_unlock(&tprt__lt_tuned.lock);
      return CUBLAS_STATUS_SUCCESS;
    }
  }
  pthread_mutex_unlock(&tprt__lt_tuned.lock);
  cublasLtMatmulHeuristicResult_t cand[kTprtLtCandidates];
  int n = 0;
  cublasStatus_t s = tprt__lt.heuristic(call->handle, call->desc, call->la, call->lb, call->lc, call->lc, pref,
                                        kTprtLtCandidates, cand, &n);
  if (s != CUBLAS_STATUS_SUCCESS || n == 0) {
    *found = 0;
    return s;
  }
  enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(call->stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError();
    *result = cand[0];  // not timed, not remembered: a later eager call of this shape times it
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
  }
  int best = n > 1 ? tprt__lt_fastest(call, cand, n) : 0;
  *result = cand[best];
  *found = 1;
  pthread_mutex_lock(&tprt__lt_tuned.lock);
  if (tprt__lt_tuned.count == tprt__lt_tuned.capacity) {
    size_t cap = tprt__lt_tuned.capacity ? 2 * tprt__lt_tuned.capacity : 64;
    tprt__lt_choice_t* grown = realloc(tprt__lt_tuned.choices, cap * sizeof *grown);
    if (grown) tprt__lt_tuned.choices = grown, tprt__lt_tuned.capacity = cap;
  }
  if (tprt__lt_tuned.count < tprt__lt_tuned.capacity)  // out of memory: the choice is timed again next call
    tprt__lt_tuned.choices[tprt__lt_tuned.count++] = (tprt__lt_choice_t){key, cand[best]};
  pthread_mutex_unlock(&tprt__lt_tuned.lock);
  return CUBLAS_STATUS_SUCCESS;
}

static tprt_status_t tprt__lt_matmul(const char* op, const tprt__lt_gemm_t* g, const tprt_cuda_lt_t* lt,
                                     cudaStream_t stream) {
  cudaDataType_t ab = CUDA_R_16BF, c = CUDA_R_32F;
  if (!tprt__lt_type(g->ab_dtype, &ab) || !tprt__lt_type(g->d_dtype, &c))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s (fast): unsupported dtypes", op);
  // While an async collective is in flight the GEMM targets fewer SMs and leaves it the rest.
  int32_t sm_target = 0;
  if (tprt_cuda_sm_reserve() > 0) {
    tprt_status_t e = tprt_cuda_gemm_sms(&sm_target);
    if (e) return tprt_status_annotate(e, "%s (fast)", op);
  }
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  tprt_status_t st = NULL;
  bool ta = g->opa == CUBLAS_OP_T, tb = g->opb == CUBLAS_OP_T;
  cublasStatus_t s = tprt__lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &g->opa, sizeof g->opa);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &g->opb, sizeof g->opb);
  if (s == CUBLAS_STATUS_SUCCESS && sm_target > 0)
    s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof sm_target);
  if (s == CUBLAS_STATUS_SUCCESS && g->bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias);
  }
  if (s == CUBLAS_STATUS_SUCCESS)
    s = tprt__lt.layout_create(&la, ab, (uint64_t)(ta ? g->k : g->m), (uint64_t)(ta ? g->m : g->k), g->lda);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = tprt__lt.layout_create(&lb, ab, (uint64_t)(tb ? g->n : g->k), (uint64_t)(tb ? g->k : g->n), g->ldb);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.layout_create(&lc, c, (uint64_t)g->m, (uint64_t)g->n, g->ldd);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.pref_create(&pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = tprt__lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt->workspace_bytes,
                          sizeof lt->workspace_bytes);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS) {
    tprt__lt_call_t call = {(cublasLtHandle_t)lt->handle, desc, la, lb, lc, g, lt, stream};
    s = tprt__lt_choose(&call, pref, sm_target, &result, &found);
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    st = tprt__lt_status(s, "cuBLASLt setup");
  } else if (found == 0) {
    st = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s (fast): cuBLASLt has no algorithm for M=%lld N=%lld K=%lld",
                          op, (long long)g->m, (long long)g->n, (long long)g->k);
  } else {
    const float alpha = 1.0f, beta = g->accumulate ? 1.0f : 0.0f;
    s = tprt__lt.matmul((cublasLtHandle_t)lt->handle, desc, &alpha, g->a, la, g->b, lb, &beta, g->c ? g->c : g->d, lc,
                        g->d, lc,
                        &result.algo, lt->workspace, lt->workspace_bytes, stream);
    if (s != CUBLAS_STATUS_SUCCESS) st = tprt__lt_status(s, "cublasLtMatmul");
  }
  if (pref) tprt__lt.pref_destroy(pref);
  if (lc) tprt__lt.layout_destroy(lc);
  if (lb) tprt__lt.layout_destroy(lb);
  if (la) tprt__lt.layout_destroy(la);
  if (desc) tprt__lt.desc_destroy(desc);
  return st ? tprt_status_annotate(st, "%s (fast)", op) : NULL;
}

static bool tprt__half(const tprt_tensor_t* t) {
  return t && (t->dtype == TPRT_DTYPE_BF16 || t->dtype == TPRT_DTYPE_F16);
}

// A 2-D operand pair of one half dtype and a result of that dtype or f32, all non-empty.
static bool tprt__fits2(const tprt_tensor_t* a, const tprt_tensor_t* b, const tprt_tensor_t* d) {
  return tprt__half(a) && b && d && a->rank == 2 && b->rank == 2 && d->rank == 2 && b->dtype == a->dtype &&
         (d->dtype == a->dtype || d->dtype == TPRT_DTYPE_F32) && a->dims[0] > 0 && a->dims[1] > 0 && b->dims[0] > 0 &&
         b->dims[1] > 0;
}

bool tprt_cuda_linear_fast_fits(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                const tprt_tensor_t* y) {
  // The bias rides cuBLASLt's epilogue in y's dtype, so y must have x's (an f32 partial has none).
  bool bias_ok =
      !bias || (bias->rank == 1 && bias->dtype == x->dtype && y->dtype == x->dtype && bias->dims[0] == w->dims[0]);
  return tprt__fits2(x, w, y) && bias_ok && x->dims[1] == w->dims[1] && y->dims[0] == x->dims[0] &&
         y->dims[1] == w->dims[0];
}

bool tprt_cuda_linear_dgrad_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* dx) {
  return tprt__fits2(dy, w, dx) && w->dims[0] == dy->dims[1] && dx->dims[0] == dy->dims[0] && dx->dims[1] == w->dims[1];
}

bool tprt_cuda_linear_wgrad_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* x, const tprt_tensor_t* dw) {
  return tprt__fits2(dy, x, dw) && x->dims[0] == dy->dims[0] && dw->dims[0] == dy->dims[1] && dw->dims[1] == x->dims[1];
}

bool tprt_cuda_bias_grad_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* db) {
  return tprt__half(dy) && db && dy->rank == 2 && db->rank == 1 && db->dims[0] == dy->dims[1] && dy->dims[0] > 0 &&
         dy->dims[1] > 0 && (db->dtype == dy->dtype || db->dtype == TPRT_DTYPE_F32);
}

tprt_status_t tprt_cuda_lt_create(tprt_cuda_lt_t* lt) {
  memset(lt, 0, sizeof *lt);
  pthread_once(&tprt__lt_once, tprt__lt_load);
  if (!tprt__lt.lib) return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "fast-mode linear: %s", tprt__lt.error);
  cublasLtHandle_t h = NULL;
  cublasStatus_t s = tprt__lt.create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) return tprt__lt_status(s, "cublasLtCreate");
  lt->handle = h;
  lt->workspace_bytes = TPRT_CUDA_LT_WORKSPACE_BYTES;
  cudaError_t err = cudaMalloc(&lt->workspace, lt->workspace_bytes);
  if (err != cudaSuccess) {
    tprt_cuda_lt_destroy(lt);
    return tprt__cuda_make_status(err, "cuBLASLt workspace", __FILE__, __LINE__);
  }
  return NULL;
}

void tprt_cuda_lt_destroy(tprt_cuda_lt_t* lt) {
  if (lt->handle && tprt__lt.lib) tprt__lt.destroy((cublasLtHandle_t)lt->handle);
  if (lt->workspace) cudaFree(lt->workspace);
  if (lt->ones) cudaFree(lt->ones);
  memset(lt, 0, sizeof *lt);
}

tprt_status_t tprt_cuda_linear_fast(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                    tprt_tensor_t* y, const tprt_cuda_lt_t* lt, cudaStream_t stream) {
  if (!tprt_cuda_linear_fast_fits(x, w, bias, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "linear (fast): unsupported shapes or dtypes");
  // yᵀ[N,M] = (w as K x N)ᵀ · (x as K x M)
  int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  tprt__lt_gemm_t g = {CUBLAS_OP_T, CUBLAS_OP_N, n,       m, k,        w->data,  k,
                       x->data,     k,           y->data, n, x->dtype, y->dtype, bias ? bias->data : NULL, false, NULL};
  return tprt__lt_matmul("linear", &g, lt, stream);
}

tprt_status_t tprt_cuda_linear_dgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* w, tprt_tensor_t* dx,
                                          const tprt_cuda_lt_t* lt, cudaStream_t stream) {
  if (!tprt_cuda_linear_dgrad_fast_fits(dy, w, dx))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "linear_dgrad (fast): unsupported shapes or dtypes");
  // dxᵀ[K,M] = (w as K x N) · (dy as N x M)
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1];
  tprt__lt_gemm_t g = {CUBLAS_OP_N, CUBLAS_OP_N, k,        m, n,         w->data,   k,
                       dy->data,    n,           dx->data, k, dy->dtype, dx->dtype, NULL, false, NULL};
  return tprt__lt_matmul("linear_dgrad", &g, lt, stream);
}

bool tprt_cuda_linear_dgrad_acc_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                          const tprt_tensor_t* dx) {
  return tprt_cuda_linear_dgrad_fast_fits(dy, w, dx) && acc && acc->rank == 2 && acc->dtype == dx->dtype &&
         acc->dims[0] == dx->dims[0] && acc->dims[1] == dx->dims[1];
}

tprt_status_t tprt_cuda_linear_dgrad_acc_fast(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                              tprt_tensor_t* dx, const tprt_cuda_lt_t* lt, cudaStream_t stream) {
  if (!tprt_cuda_linear_dgrad_acc_fast_fits(dy, w, acc, dx))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "linear_dgrad accumulate (fast): unsupported shapes or dtypes");
  // dxᵀ[K,M] = (w as K x N) · (dy as N x M) + accᵀ, rounded once.
  int64_t m = dy->dims[0], n = dy->dims[1], k = w->dims[1];
  tprt__lt_gemm_t g = {CUBLAS_OP_N, CUBLAS_OP_N, k,        m, n,         w->data,   k,
                       dy->data,    n,           dx->data, k, dy->dtype, dx->dtype, NULL, true, acc->data};
  return tprt__lt_matmul("linear_dgrad accumulate", &g, lt, stream);
}

// dwᵀ[K,N] = (x as K x M) · (dy as N x M)ᵀ, plus dw's values with |accumulate|.
static tprt_status_t tprt__lt_wgrad(const char* op, const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                    bool accumulate, const tprt_cuda_lt_t* lt, cudaStream_t stream) {
  int64_t m = dy->dims[0], n = dy->dims[1], k = x->dims[1];
  tprt__lt_gemm_t g = {CUBLAS_OP_N, CUBLAS_OP_T, k,        n, m,         x->data,   k,
                       dy->data,    n,           dw->data, k, dy->dtype, dw->dtype, NULL, accumulate, NULL};
  return tprt__lt_matmul(op, &g, lt, stream);
}

tprt_status_t tprt_cuda_linear_wgrad_fast(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                          const tprt_cuda_lt_t* lt, cudaStream_t stream) {
  if (!tprt_cuda_linear_wgrad_fast_fits(dy, x, dw))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "linear_wgrad (fast): unsupported shapes or dtypes");
  return tprt__lt_wgrad("linear_wgrad", dy, x, dw, false, lt, stream);
}

bool tprt_cuda_linear_wgrad_acc_fast_fits(const tprt_tensor_t* dy, const tprt_tensor_t* x, const tprt_tensor_t* dw) {
  return tprt_cuda_linear_wgrad_fast_fits(dy, x, dw) && dw->dtype == TPRT_DTYPE_F32;
}

tprt_status_t tprt_cuda_linear_wgrad_acc_fast(const tprt_tensor_t* dy, const tprt_tensor_t* x, tprt_tensor_t* dw,
                                              const tprt_cuda_lt_t* lt, cudaStream_t stream) {
  if (!tprt_cuda_linear_wgrad_acc_fast_fits(dy, x, dw))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "linear_wgrad accumulate (fast): unsupported shapes or dtypes");
  return tprt__lt_wgrad("linear_wgrad accumulate", dy, x, dw, true, lt, stream);
}

tprt_status_t tprt_cuda_bias_grad_fast(const tprt_tensor_t* dy, tprt_tensor_t* db, tprt_cuda_lt_t* lt,
                                       cudaStream_t stream) {
  if (!tprt_cuda_bias_grad_fast_fits(dy, db))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "bias_grad (fast): unsupported shapes or dtypes");
  int64_t m = dy->dims[0], n = dy->dims[1];
  // db[N] = (dy as N x M) · ones[M]: a vector of ones in dy's dtype, grown outside graph capture.
  if (lt->ones_count < m || lt->ones_dtype != dy->dtype) {
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TPRT_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                              "--graph: bias_grad (fast) needs a larger ones vector during CUDA graph capture");
    if (lt->ones) {
      TPRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      TPRT_CUDA_RETURN_IF_ERROR(cudaFree(lt->ones));
      lt->ones = NULL;
    }
    TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&lt->ones, (size_t)m * 2));
    lt->ones_count = m;
    lt->ones_dtype = dy->dtype;
    tprt_status_t s = tprt_cuda_fill_bits(lt->ones, m, 2, dy->dtype == TPRT_DTYPE_BF16 ? 0x3F80u : 0x3C00u, stream);
    if (s) return s;
  }
  tprt__lt_gemm_t g = {CUBLAS_OP_N, CUBLAS_OP_N, n,        1, m,         dy->data,  n,
                       lt->ones,    m,           db->data, n, dy->dtype, db->dtype, NULL, false, NULL};
  return tprt__lt_matmul("bias_grad", &g, lt, stream);
}
