// tprt_cuda_linear_fast: fast-mode linear on cuBLASLt (tensor cores, f32 accumulation, cuBLASLt's
// own reduction order: no invariance, docs/numerics.md "Modes"). libcublasLt is loaded with dlopen
// on first use, so the CUDA backend plugin still loads (and exact mode still runs) on a machine
// without it; the status then says what is missing.
//
// Row-major y[M,N] = x[M,K]·w[N,K]ᵀ is column-major yᵀ[N,M] = op_T(w as K×N)·(x as K×M): A = w
// with TRANSA = T, B = x, C = D = y, all with leading dimension their row length.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cublasLt.h>

#include "tprt_cuda_kernels.h"

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

static tprt__lt_t tprt__lt;
static pthread_once_t tprt__lt_once = PTHREAD_ONCE_INIT;

static void tprt__lt_load(void) {
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  for (int i = 0; i < 3 && !tprt__lt.lib; ++i) tprt__lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!tprt__lt.lib) {
    snprintf(tprt__lt.error, sizeof tprt__lt.error, "cannot load libcublasLt (%s)", dlerror());
    return;
  }
#define TPRT__SYM(field, name)                                                                       \
  if (!(*(void**)&tprt__lt.field = dlsym(tprt__lt.lib, name))) {                                     \
    snprintf(tprt__lt.error, sizeof tprt__lt.error, "libcublasLt has no %s", name);                  \
    tprt__lt.lib = NULL;                                                                              \
    return;                                                                                           \
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

bool tprt_cuda_linear_fast_supported(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* bias,
                                     const tprt_tensor_t* y) {
  cudaDataType_t t;
  return !bias && x->rank == 2 && w->rank == 2 && y->rank == 2 && x->dtype == w->dtype &&
         (x->dtype == TPRT_DTYPE_BF16 || x->dtype == TPRT_DTYPE_F16) && tprt__lt_type(y->dtype, &t) &&
         (y->dtype == x->dtype || y->dtype == TPRT_DTYPE_F32) && x->dims[1] == w->dims[1] && y->dims[0] == x->dims[0] &&
         y->dims[1] == w->dims[0] && x->dims[0] > 0 && w->dims[0] > 0 && x->dims[1] > 0;
}

tprt_status_t tprt_cuda_lt_handle(void** out) {
  pthread_once(&tprt__lt_once, tprt__lt_load);
  if (!tprt__lt.lib) return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "fast-mode linear: %s", tprt__lt.error);
  cublasLtHandle_t h = NULL;
  cublasStatus_t s = tprt__lt.create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) return tprt__lt_status(s, "cublasLtCreate");
  *out = h;
  return NULL;
}

void tprt_cuda_lt_handle_destroy(void* handle) {
  if (handle && tprt__lt.lib) tprt__lt.destroy((cublasLtHandle_t)handle);
}

tprt_status_t tprt_cuda_linear_fast(const tprt_tensor_t* x, const tprt_tensor_t* w, tprt_tensor_t* y, void* handle,
                                    void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!tprt_cuda_linear_fast_supported(x, w, NULL, y))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "fast-mode linear: unsupported shapes or dtypes");
  int64_t m = x->dims[0], k = x->dims[1], n = w->dims[0];
  cudaDataType_t ab = CUDA_R_16BF, c = CUDA_R_32F;
  tprt__lt_type(x->dtype, &ab);
  tprt__lt_type(y->dtype, &c);
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  tprt_status_t st = NULL;
  cublasStatus_t s = tprt__lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof opn);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.layout_create(&la, ab, (uint64_t)k, (uint64_t)n, k);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.layout_create(&lb, ab, (uint64_t)k, (uint64_t)m, k);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.layout_create(&lc, c, (uint64_t)n, (uint64_t)m, n);
  if (s == CUBLAS_STATUS_SUCCESS) s = tprt__lt.pref_create(&pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = tprt__lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = tprt__lt.heuristic((cublasLtHandle_t)handle, desc, la, lb, lc, lc, pref, 1, &result, &found);
  if (s != CUBLAS_STATUS_SUCCESS) {
    st = tprt__lt_status(s, "cuBLASLt setup");
  } else if (found == 0) {
    st = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "fast-mode linear: cuBLASLt has no algorithm for M=%lld N=%lld K=%lld",
                          (long long)m, (long long)n, (long long)k);
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    s = tprt__lt.matmul((cublasLtHandle_t)handle, desc, &alpha, w->data, la, x->data, lb, &beta, y->data, lc, y->data,
                        lc, &result.algo, workspace, workspace_bytes, stream);
    if (s != CUBLAS_STATUS_SUCCESS) st = tprt__lt_status(s, "cublasLtMatmul");
  }
  if (pref) tprt__lt.pref_destroy(pref);
  if (lc) tprt__lt.layout_destroy(lc);
  if (lb) tprt__lt.layout_destroy(lb);
  if (la) tprt__lt.layout_destroy(la);
  if (desc) tprt__lt.desc_destroy(desc);
  return st;
}
