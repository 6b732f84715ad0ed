// Shared by the two files of tprt-cuda-check-fast (check_fast.cu: the fast-mode kernels and
// main; check_fast_invariant.cu: the invariant-mode ones): the device tensor, the random inputs,
// the comparisons and the pass/fail counters.
#ifndef TPC_CHECK_FAST_H_
#define TPC_CHECK_FAST_H_

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utility>
#include <string>
#include <vector>

#include "tprt_cuda_kernels.h"
#include "tprt_numerics.h"
#include "tprt_status.h"

#define FC_CUDA(expr)                                                                                 \
  do {                                                                                                \
    cudaError_t fc_e = (expr);                                                                        \
    if (fc_e != cudaSuccess) {                                                                        \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(fc_e)); \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

extern int g_passed, g_failed;
extern uint64_t g_rng;

static inline uint64_t fc_next(void) {  // splitmix64
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A device tensor (and its dims) that frees itself.
struct fc_tensor {
  tprt_tensor_t t;
  int64_t dims[3];
  fc_tensor(int dtype, std::initializer_list<int64_t> d) {
    int r = 0;
    for (int64_t v : d) dims[r++] = v;
    size_t bytes = 1;
    for (int i = 0; i < r; ++i) bytes *= (size_t)dims[i];
    bytes *= (size_t)tprt_dtype_bytes(dtype, 1);
    void* p = nullptr;
    FC_CUDA(cudaMalloc(&p, bytes ? bytes : 16));
    t = tprt_tensor_make(p, dtype, r, dims);
  }
  /// The group sizes |counts| as an i64 tensor on the device.
  explicit fc_tensor(const std::vector<int64_t>& counts) : fc_tensor(TPRT_DTYPE_I64, {(int64_t)counts.size()}) {
    FC_CUDA(cudaMemcpy(t.data, counts.data(), counts.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  }
  fc_tensor(const fc_tensor&) = delete;
  fc_tensor& operator=(const fc_tensor&) = delete;
  ~fc_tensor() { cudaFree(t.data); }
  size_t bytes() const { return tprt_tensor_bytes(&t); }
  int64_t count() const { return (int64_t)(bytes() / tprt_dtype_bytes(t.dtype, 1)); }
  void poison() { FC_CUDA(cudaMemset(t.data, 0xFF, bytes() ? bytes() : 1)); }
  /// Uniform values in [-1, 1) rounded to the dtype.
  void fill() {
    std::vector<uint8_t> h(bytes());
    for (int64_t i = 0; i < count(); ++i) {
      float v = (float)((int64_t)(fc_next() >> 40) - (1 << 23)) * 0x1p-23f;
      tprt_store_elem(h.data(), t.dtype, i, v);
    }
    FC_CUDA(cudaMemcpy(t.data, h.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<double> host() const {
    std::vector<uint8_t> h(bytes());
    FC_CUDA(cudaMemcpy(h.data(), t.data, bytes(), cudaMemcpyDeviceToHost));
    std::vector<double> v((size_t)count());
    for (int64_t i = 0; i < count(); ++i) v[(size_t)i] = tprt_load_elem(h.data(), t.dtype, i);
    return v;
  }
};

/// Compares |got| with |want| (relative error within |tolerance|, the dtype's when 0) and prints a row.
void fc_compare(const char* kernel, const char* shape, const fc_tensor& got, const fc_tensor& want,
                tprt_status_t fast_status, tprt_status_t exact_status, double tolerance = 0);
/// group_sizes[S*E] for T rows: |pattern| 0 uniform, 1 skewed, 2 one expert takes all.
std::vector<int64_t> fc_counts(int64_t t, int64_t e, int64_t segs, int pattern);
/// A grouped-linear case: T rows, E experts of N x K weights, S segments, fc_counts' |pattern|.
struct fc_grouped_case {
  int64_t t, n, k, e, segs;
  int pattern;
  std::vector<int64_t> counts() const { return fc_counts(t, e, segs, pattern); }
  /// "T=.. N=.. K=.. E=.. S=.. <pattern>".
  std::string label() const;
};
/// Bitwise comparison of |rows| rows of |cols| elements of |elem| bytes at pitches |pa|, |pb|.
int64_t fc_diff_rows(const void* a, int64_t pa, const void* b, int64_t pb, int64_t rows, int64_t cols, int elem);
/// Prints a row for a bitwise check with |bad| differing elements (or the failure |s|).
void fc_bitwise_row(const char* kernel, const char* what, int64_t bad, tprt_status_t s);
/// Prints a bitwise row for |kernel|: the f32 partials of R = |parts| shards (|shards|: "row-parallel
/// TP", "token shards SP") summed by the canonical pairwise tree (the collectives' order) against
/// the one-rank result |tp1| (NaN equals NaN), or the failure |s|.
void fc_tree_row(const char* kernel, const char* shards, const std::vector<double>& tp1,
                 const std::vector<std::vector<double>>& parts, tprt_status_t s);

/// The decoding kernels' checks (check_fast_decode.cu).
void fc_check_skinny(cudaStream_t s);
void fc_check_add_norm_fast(cudaStream_t s);
/// The invariant-mode checks (check_fast_invariant.cu).
void fc_check_invariant(cudaStream_t s);
void fc_check_grouped_invariant(cudaStream_t s);
void fc_check_grouped_glu(cudaStream_t s);
/// The tensor-core attention kernels (check_fast_attention.cu).
void fc_check_attention(cudaStream_t s);

#endif  // TPC_CHECK_FAST_H_
