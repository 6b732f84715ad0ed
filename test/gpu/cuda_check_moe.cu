// tprt-cuda-check, part two: grouped linear (with the segmented group_sizes rule and its +0.0
// padding rows), the MoE data-movement kernels (permute, unpermute, bucket, unbucket), the Philox
// fill and copy, each against the CPU kernel that defines its bits, plus their validation cases.
// The harness (ct_run_outputs, the summary, main) is in cuda_check.cu.
#include "cuda_check.h"

// ------------------------------------------------------------------------------------------------
// Inputs
// ------------------------------------------------------------------------------------------------

/// Random bytes for tensors moved as bytes (any dtype, integers and fp8 included).
static void ct_fill_bytes(ct_tensor_t* t, uint64_t* rng) {
  size_t bytes = tprt_tensor_bytes(&t->h);
  for (size_t i = 0; i < bytes; ++i) ((unsigned char*)t->h.data)[i] = (unsigned char)ct_next(rng);
  ct_upload(t);
}

/// An i64 vector with |values|, on both sides.
static ct_tensor_t ct_make_counts(const int64_t* values, int64_t n) {
  ct_tensor_t t = ct_make(TPRT_DTYPE_I64, 1, &n);
  if (n) memcpy(t.h.data, values, (size_t)n * sizeof(int64_t));
  ct_upload(&t);
  return t;
}

/// |parts| random non-negative counts summing to |total| (some zero when parts > total).
static void ct_random_counts(uint64_t* rng, int64_t total, int64_t parts, int64_t* out) {
  for (int64_t i = 0; i < parts; ++i) out[i] = 0;
  for (int64_t i = 0; i < total; ++i) out[ct_next(rng) % (uint64_t)parts]++;
}

// ------------------------------------------------------------------------------------------------
// Grouped linear
// ------------------------------------------------------------------------------------------------

static void ct_check_grouped_linear(cudaStream_t stream) {
  struct {
    int64_t t, n, k, e, segs;
    int chunks;         // 0: run chunks 1 and 8
    int64_t sizes[16];  // S*E counts; all zero: random counts filling each segment to |fill| rows
    int64_t fill;
  } cases[] = {
      {37, 13, 29, 4, 1, 0, {10, 0, 20, 7}, 0},
      {40, 13, 29, 3, 2, 0, {5, 0, 7, 12, 3, 0}, 0},  // 8 and 5 padding rows
      {24, 9, 7, 2, 3, 0, {0, 0, 8, 0, 3, 2}, 0},     // an empty segment: all padding
      {256, 192, 1000, 8, 1, 8, {0}, 256},
      {256, 130, 257, 4, 2, 0, {0}, 100},  // each segment 100 of 128 rows
      {6, 5, 0, 2, 1, 1, {3, 3}, 0},       // K = 0: +0 rows
      {9, 70, 3000, 3, 1, 1024, {2, 4, 3}, 0},
      {300, 136, 192, 5, 1, 8, {0}, 300},   // several experts per tile, chunks of 24 (vector loads)
      {1, 200, 64, 3, 1, 8, {0, 1, 0}, 0},  // one row
  };
  uint64_t rng = 0x6F0;
  for (const auto& c : cases) {
    int64_t g = c.segs * c.e, sizes[64];
    for (int64_t i = 0; i < g; ++i) sizes[i] = c.fill ? 0 : c.sizes[i];
    if (c.fill)
      for (int64_t sg = 0; sg < c.segs; ++sg) ct_random_counts(&rng, c.fill, c.e, sizes + sg * c.e);
    for (int ci = 0; ci < 2; ++ci) {
      int chunks = c.chunks ? c.chunks : (ci == 0 ? 1 : 8);
      if (c.chunks && ci == 1) break;
      for (int dtype : kDtypes) {
        for (int partial = 0; partial < 2; ++partial) {
          if (partial && dtype == TPRT_DTYPE_F32) continue;  // an f32 partial of f32 is the f32 case
          int64_t xd[2] = {c.t, c.k}, wd[3] = {c.e, c.n, c.k}, yd[2] = {c.t, c.n};
          for (int tile : {TPRT_CUDA_TILE_SMALL, TPRT_CUDA_TILE_LARGE}) {  // both tiles (linear_tile.cuh)
            ct_tensor_t x = ct_make(dtype, 2, xd), w = ct_make(dtype, 3, wd),
                        y = ct_make(partial ? TPRT_DTYPE_F32 : dtype, 2, yd), gs = ct_make_counts(sizes, g);
            ct_fill(&x, &rng, CT_DIST_MODERATE);
            ct_fill(&w, &rng, CT_DIST_MODERATE);
            char shape[48], params[48];
            snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld E=%lld", (long long)c.t, (long long)c.n, (long long)c.k,
                     (long long)c.e);
            snprintf(params, sizeof params, "S=%lld chunks=%d%s tile=%d", (long long)c.segs, chunks,
                     partial ? " y=f32 partial" : "", tile == TPRT_CUDA_TILE_LARGE ? 128 : 64);
            ct_run(
                "grouped_linear", shape, tprt_dtype_name(dtype), params, &y,
                [&] { return tprt_cpu_grouped_linear(&x.h, &w.h, &gs.h, &y.h, chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_grouped_linear_tiled(&x.d, &w.d, &gs.d, &y.d, chunks, tile, st);
                },
                true, stream);
            ct_free(&x);
            ct_free(&w);
            ct_free(&y);
            ct_free(&gs);
          }
        }
      }
    }
  }
}

/// A device copy of host |h| ([E, R, C]), each matrix transposed ([E, C, R]) when |transpose|, at
/// an offset of |offset| elements into its allocation |*base| (1: misaligned for 16-byte loads).
static void* ct_moe_dev_copy(const tprt_tensor_t* h, bool transpose, int offset, void** base) {
  int64_t r = h->dims[h->rank - 2], c = h->dims[h->rank - 1], mats = tprt_tensor_numel(h) / (r * c > 0 ? r * c : 1);
  size_t elem = tprt_dtype_bytes(h->dtype, 1), bytes = tprt_tensor_bytes(h);
  char* tmp = (char*)malloc(bytes ? bytes : 1);
  for (int64_t e = 0; e < mats; ++e)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        size_t from = (size_t)(e * r * c + i * c + j), to = (size_t)(e * r * c + (transpose ? j * r + i : i * c + j));
        memcpy(tmp + to * elem, (const char*)h->data + from * elem, elem);
      }
  CT_CUDA(cudaMalloc(base, bytes + 16));
  char* data = (char*)*base + (size_t)offset * elem;
  CT_CUDA(cudaMemcpy(data, tmp, bytes, cudaMemcpyHostToDevice));
  free(tmp);
  return data;
}

// The grouped GEMM with w read k-major (w[E,K,N]: the grouped dgrad's operand as stored) and with
// misaligned operands (the scalar loads), both tiles, against tprt_cpu_grouped_linear.
static void ct_check_grouped_layouts(cudaStream_t stream) {
  struct {
    int64_t t, n, k, e, segs;
    int chunks;
  } cases[] = {{300, 136, 192, 5, 1, 8}, {256, 72, 248, 3, 2, 16}, {40, 24, 520, 2, 1, 8}};
  uint64_t rng = 0x6F1;
  for (const auto& c : cases) {
    int64_t g = c.segs * c.e, sizes[16];
    // One segment holds every row; several leave 3 padding rows each.
    for (int64_t sg = 0; sg < c.segs; ++sg)
      ct_random_counts(&rng, c.segs == 1 ? c.t : c.t / c.segs - 3, c.e, sizes + sg * c.e);
    for (int dtype : kDtypes) {
      int64_t xd[2] = {c.t, c.k}, wd[3] = {c.e, c.n, c.k}, yd[2] = {c.t, c.n};
      ct_tensor_t x = ct_make(dtype, 2, xd), w = ct_make(dtype, 3, wd), y = ct_make(TPRT_DTYPE_F32, 2, yd),
                  gs = ct_make_counts(sizes, g);
      ct_fill(&x, &rng, CT_DIST_MODERATE);
      ct_fill(&w, &rng, CT_DIST_MODERATE);
      for (int w_kmajor = 0; w_kmajor < 2; ++w_kmajor) {
        for (int offset = 0; offset < 2; ++offset) {
          void *xbase = NULL, *wbase = NULL;
          void* xdev = ct_moe_dev_copy(&x.h, false, offset, &xbase);
          void* wdev = ct_moe_dev_copy(&w.h, w_kmajor, offset, &wbase);
          for (int tile : {TPRT_CUDA_TILE_SMALL, TPRT_CUDA_TILE_LARGE}) {
            char shape[48], params[64];
            snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld E=%lld", (long long)c.t, (long long)c.n, (long long)c.k,
                     (long long)c.e);
            snprintf(params, sizeof params, "S=%lld chunks=%d w=%s tile=%d%s", (long long)c.segs, c.chunks,
                     w_kmajor ? "[E,K,N]" : "[E,N,K]", tile == TPRT_CUDA_TILE_LARGE ? 128 : 64,
                     offset ? " misaligned" : "");
            ct_run(
                "grouped_linear", shape, tprt_dtype_name(dtype), params, &y,
                [&] { return tprt_cpu_grouped_linear(&x.h, &w.h, &gs.h, &y.h, c.chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_grouped_gemm_exact(xdev, wdev, w_kmajor, dtype, c.t, c.n, c.k, c.e,
                                                      (const int64_t*)gs.d.data, c.segs, y.d.data, TPRT_DTYPE_F32,
                                                      c.chunks, tile, st);
                },
                true, stream);
          }
          CT_CUDA(cudaFree(xbase));
          CT_CUDA(cudaFree(wbase));
        }
      }
      ct_free(&x);
      ct_free(&w);
      ct_free(&y);
      ct_free(&gs);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// MoE permute / unpermute / bucket / unbucket
// ------------------------------------------------------------------------------------------------

static void ct_check_permute(cudaStream_t stream) {
  struct {
    int64_t t, k, e, h;
    int dtype;
  } cases[] = {
      {37, 2, 5, 33, TPRT_DTYPE_BF16}, {256, 8, 64, 1024, TPRT_DTYPE_BF16},   {3000, 4, 128, 64, TPRT_DTYPE_F32},
      {100, 1, 3, 7, TPRT_DTYPE_F16},  {129, 2, 16, 17, TPRT_DTYPE_F8E4M3FN}, {50, 3, 7, 3, TPRT_DTYPE_I64},
      {0, 2, 4, 8, TPRT_DTYPE_BF16},   {600, 4, 1000, 8, TPRT_DTYPE_F32},
  };
  uint64_t rng = 0x9E7;
  for (const auto& c : cases) {
    int64_t xd[2] = {c.t, c.h}, id[2] = {c.t, c.k}, yd[2] = {c.t * c.k, c.h}, rows = c.t * c.k;
    ct_tensor_t x = ct_make(c.dtype, 2, xd), idx = ct_make(TPRT_DTYPE_I32, 2, id), y = ct_make(c.dtype, 2, yd),
                gs = ct_make(TPRT_DTYPE_I64, 1, &c.e), map = ct_make(TPRT_DTYPE_I32, 1, &rows);
    ct_fill_bytes(&x, &rng);
    for (int64_t i = 0; i < rows; ++i) ((int32_t*)idx.h.data)[i] = (int32_t)(ct_next(&rng) % (uint64_t)c.e);
    ct_upload(&idx);
    char shape[48], params[48];
    snprintf(shape, sizeof shape, "T=%lld k=%lld H=%lld", (long long)c.t, (long long)c.k, (long long)c.h);
    snprintf(params, sizeof params, "E=%lld y+group_sizes+row_map", (long long)c.e);
    ct_run_outputs(
        "moe_permute", shape, tprt_dtype_name(c.dtype), params, {&y, &gs, &map},
        [&] { return tprt_cpu_moe_permute(&x.h, &idx.h, &y.h, &gs.h, &map.h); },
        [&](cudaStream_t st) { return tprt_cuda_moe_permute(&x.d, &idx.d, &y.d, &gs.d, &map.d, st); }, true, stream);
    ct_free(&x);
    ct_free(&idx);
    ct_free(&y);
    ct_free(&gs);
    ct_free(&map);
  }
}

static void ct_check_unpermute(cudaStream_t stream) {
  const int64_t cases[][3] = {{37, 2, 33}, {256, 8, 1024}, {100, 1, 7}, {5, 64, 40}, {1000, 4, 96}};
  uint64_t rng = 0x0B7;
  for (const auto& c : cases) {
    for (int dtype : kDtypes) {
      int64_t t = c[0], k = c[1], h = c[2], rows = t * k;
      int64_t yd[2] = {rows, h}, wd[2] = {t, k}, od[2] = {t, h};
      ct_tensor_t y = ct_make(dtype, 2, yd), map = ct_make(TPRT_DTYPE_I32, 1, &rows),
                  w = ct_make(TPRT_DTYPE_F32, 2, wd), out = ct_make(dtype, 2, od);
      ct_fill(&y, &rng, CT_DIST_SPECIAL);
      ct_fill(&w, &rng, CT_DIST_MODERATE);
      int32_t* m = (int32_t*)map.h.data;
      for (int64_t i = 0; i < rows; ++i) m[i] = (int32_t)i;
      for (int64_t i = rows - 1; i > 0; --i) {  // Fisher-Yates: a random permutation of the slots
        int64_t j = (int64_t)(ct_next(&rng) % (uint64_t)(i + 1));
        int32_t tmp = m[i];
        m[i] = m[j];
        m[j] = tmp;
      }
      ct_upload(&map);
      char shape[48];
      snprintf(shape, sizeof shape, "T=%lld k=%lld H=%lld", (long long)t, (long long)k, (long long)h);
      ct_run(
          "moe_unpermute", shape, tprt_dtype_name(dtype), "random row_map edge", &out,
          [&] { return tprt_cpu_moe_unpermute(&y.h, &map.h, &w.h, &out.h); },
          [&](cudaStream_t st) { return tprt_cuda_moe_unpermute(&y.d, &map.d, &w.d, &out.d, st); }, true, stream);
      ct_free(&y);
      ct_free(&map);
      ct_free(&w);
      ct_free(&out);
    }
  }
}

static void ct_check_buckets(cudaStream_t stream) {
  struct {
    int64_t r, e, h;
    int buckets, dtype;
    bool skew;  // every row to the first expert: one full bucket, the others all padding
  } cases[] = {
      {50, 8, 24, 4, TPRT_DTYPE_BF16, false},    {1000, 64, 512, 8, TPRT_DTYPE_BF16, false},
      {77, 6, 7, 3, TPRT_DTYPE_F8E4M3FN, false}, {40, 4, 10, 2, TPRT_DTYPE_F4E2M1FN, false},
      {33, 5, 3, 5, TPRT_DTYPE_I64, false},      {64, 8, 96, 8, TPRT_DTYPE_F32, true},
      {20, 3, 5, 1, TPRT_DTYPE_F16, false},
  };
  uint64_t rng = 0xB0C;
  for (int unb = 0; unb < 2; ++unb) {
    const char* kernel = unb ? "moe_unbucket" : "moe_bucket";
    if (!ct_selected(kernel)) continue;
    for (const auto& c : cases) {
      int64_t sizes[64];
      ct_random_counts(&rng, c.r, c.e, sizes);
      if (c.skew)
        for (int64_t i = 0; i < c.e; ++i) sizes[i] = i == 0 ? c.r : 0;
      int64_t rd[2] = {c.r, c.h}, pd[2] = {c.buckets * c.r, c.h};
      ct_tensor_t x = ct_make(c.dtype, 2, unb ? pd : rd), y = ct_make(c.dtype, 2, unb ? rd : pd),
                  gs = ct_make_counts(sizes, c.e);
      ct_fill_bytes(&x, &rng);
      char shape[48], params[48];
      snprintf(shape, sizeof shape, "R=%lld H=%lld E=%lld", (long long)c.r, (long long)c.h, (long long)c.e);
      snprintf(params, sizeof params, "buckets=%d%s", c.buckets, c.skew ? " skewed" : "");
      ct_run(
          kernel, shape, tprt_dtype_name(c.dtype), params, &y,
          [&] {
            return unb ? tprt_cpu_moe_unbucket(&x.h, &gs.h, &y.h, c.buckets)
                       : tprt_cpu_moe_bucket(&x.h, &gs.h, &y.h, c.buckets);
          },
          [&](cudaStream_t st) {
            return unb ? tprt_cuda_moe_unbucket(&x.d, &gs.d, &y.d, c.buckets, st)
                       : tprt_cuda_moe_bucket(&x.d, &gs.d, &y.d, c.buckets, st);
          },
          true, stream);
      ct_free(&x);
      ct_free(&y);
      ct_free(&gs);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Philox fill and copy
// ------------------------------------------------------------------------------------------------

static void ct_check_philox(cudaStream_t stream) {
  struct {
    int rank;
    int64_t dims[3];
    int64_t row_offset, col_offset, logical_cols;
    float lo, hi;
  } cases[] = {
      {1, {1000}, 0, 0, 1000, 0.0f, 1.0f},
      {2, {7, 333}, 5, 100, 1000, -2.0f, 3.0f},  // a shard of a logical [*, 1000] tensor
      {2, {64, 4096}, 0, 0, 4096, -0.02f, 0.02f},
      {3, {3, 5, 7}, 11, 3, 17, -1e-3f, 7.5f},
  };
  uint64_t seed = 0x5EEDF00Dull, pstream = 3;
  for (const auto& c : cases) {
    for (int dtype : kDtypes) {
      ct_tensor_t t = ct_make(dtype, c.rank, c.dims);
      char shape[48], params[48];
      int used = snprintf(shape, sizeof shape, "[");
      for (int i = 0; i < c.rank; ++i)
        used += snprintf(shape + used, sizeof shape - used, i ? ",%lld" : "%lld", (long long)c.dims[i]);
      snprintf(shape + used, sizeof shape - used, "]");
      snprintf(params, sizeof params, "at (%lld,%lld) of %lld [%g,%g)", (long long)c.row_offset,
               (long long)c.col_offset, (long long)c.logical_cols, (double)c.lo, (double)c.hi);
      ct_run(
          "fill_philox", shape, tprt_dtype_name(dtype), params, &t,
          [&] {
            return tprt_cpu_fill_philox(&t.h, seed, pstream, c.lo, c.hi, c.row_offset, c.col_offset, c.logical_cols);
          },
          [&](cudaStream_t st) {
            return tprt_cuda_fill_philox(&t.d, seed, pstream, c.lo, c.hi, c.row_offset, c.col_offset, c.logical_cols,
                                         st);
          },
          true, stream);
      ct_free(&t);
    }
  }
}

static void ct_check_copy(cudaStream_t stream) {
  const int kF8 = TPRT_DTYPE_F8E5M2, kI = TPRT_DTYPE_I32;
  const int pairs[][2] = {{TPRT_DTYPE_BF16, TPRT_DTYPE_BF16},
                          {TPRT_DTYPE_F32, TPRT_DTYPE_BF16},
                          {TPRT_DTYPE_F32, TPRT_DTYPE_F16},
                          {TPRT_DTYPE_BF16, TPRT_DTYPE_F16},
                          {TPRT_DTYPE_F16, TPRT_DTYPE_F32},
                          {TPRT_DTYPE_F16, TPRT_DTYPE_BF16},
                          {kF8, kF8},
                          {kI, kI}};
  const int64_t dims[2] = {7, 333};
  uint64_t rng = 0xC09;
  for (const auto& p : pairs) {
    ct_tensor_t src = ct_make(p[0], 2, dims), dst = ct_make(p[1], 2, dims);
    bool is_float = p[0] <= TPRT_DTYPE_F32;
    if (is_float)
      ct_fill(&src, &rng, CT_DIST_SPECIAL);
    else
      ct_fill_bytes(&src, &rng);
    char params[48];
    snprintf(params, sizeof params, "-> %s%s", tprt_dtype_name(p[1]), p[0] == p[1] ? " (bytes)" : " edge");
    ct_run(
        "copy", "[7,333]", tprt_dtype_name(p[0]), params, &dst, [&] { return tprt_cpu_copy(&src.h, &dst.h); },
        [&](cudaStream_t st) { return tprt_cuda_copy(&src.d, &dst.d, st); }, true, stream);
    ct_free(&src);
    ct_free(&dst);
  }
}

void ct_check_moe_kernels(cudaStream_t stream) {
  if (ct_selected("grouped_linear")) ct_check_grouped_linear(stream);
  if (ct_selected("grouped_linear")) ct_check_grouped_layouts(stream);
  if (ct_selected("moe_permute")) ct_check_permute(stream);
  if (ct_selected("moe_unpermute")) ct_check_unpermute(stream);
  ct_check_buckets(stream);
  if (ct_selected("fill_philox")) ct_check_philox(stream);
  if (ct_selected("copy")) ct_check_copy(stream);
}

// ------------------------------------------------------------------------------------------------
// Validation: shape, dtype and parameter errors (the cases the CPU kernels detect before reading
// any counts, indices or row_map: the CUDA launchers never read device data)
// ------------------------------------------------------------------------------------------------

void ct_check_validation_moe(void) {
  static int64_t dummy[64];  // zero counts; validation reads no other data
  auto T = [](int dtype, int rank, int64_t d0, int64_t d1, int64_t d2) {
    int64_t dims[3] = {d0, d1, d2};
    return tprt_tensor_make(dummy, dtype, rank, dims);
  };
  const int B = TPRT_DTYPE_BF16, F = TPRT_DTYPE_F32, I64 = TPRT_DTYPE_I64, I32 = TPRT_DTYPE_I32;
  tprt_tensor_t x = T(B, 2, 8, 16, 0), w = T(B, 3, 4, 6, 16), gs = T(I64, 1, 4, 0, 0), y = T(B, 2, 8, 6, 0);
  tprt_tensor_t w_k = T(B, 3, 4, 6, 15), gs_bad = T(I64, 1, 6, 0, 0), gs_3 = T(I64, 1, 12, 0, 0),
                gs_i32 = T(I32, 1, 4, 0, 0), x0 = T(B, 2, 0, 16, 0), y0_bad = T(B, 2, 0, 7, 0);
  ct_same_status("grouped_linear chunks", tprt_cpu_grouped_linear(&x, &w, &gs, &y, 3),
                 tprt_cuda_grouped_linear(&x, &w, &gs, &y, 3, 0));
  ct_same_status("grouped_linear K", tprt_cpu_grouped_linear(&x, &w_k, &gs, &y, 8),
                 tprt_cuda_grouped_linear(&x, &w_k, &gs, &y, 8, 0));
  ct_same_status("grouped_linear G % E", tprt_cpu_grouped_linear(&x, &w, &gs_bad, &y, 8),
                 tprt_cuda_grouped_linear(&x, &w, &gs_bad, &y, 8, 0));
  ct_same_status("grouped_linear T % S", tprt_cpu_grouped_linear(&x, &w, &gs_3, &y, 8),
                 tprt_cuda_grouped_linear(&x, &w, &gs_3, &y, 8, 0));
  ct_same_status("grouped_linear sizes dtype", tprt_cpu_grouped_linear(&x, &w, &gs_i32, &y, 8),
                 tprt_cuda_grouped_linear(&x, &w, &gs_i32, &y, 8, 0));
  ct_same_status("grouped_linear y", tprt_cpu_grouped_linear(&x0, &w, &gs, &y0_bad, 8),
                 tprt_cuda_grouped_linear(&x0, &w, &gs, &y0_bad, 8, 0));

  tprt_tensor_t idx = T(I32, 2, 8, 2, 0), idx_t = T(I32, 2, 7, 2, 0), py = T(B, 2, 16, 16, 0),
                py_f = T(F, 2, 16, 16, 0), map = T(I32, 1, 16, 0, 0), map_bad = T(I32, 1, 15, 0, 0),
                gs0 = T(I64, 1, 0, 0, 0);
  ct_same_status("moe_permute indices T", tprt_cpu_moe_permute(&x, &idx_t, &py, &gs, &map),
                 tprt_cuda_moe_permute(&x, &idx_t, &py, &gs, &map, 0));
  ct_same_status("moe_permute y dtype", tprt_cpu_moe_permute(&x, &idx, &py_f, &gs, &map),
                 tprt_cuda_moe_permute(&x, &idx, &py_f, &gs, &map, 0));
  ct_same_status("moe_permute row_map", tprt_cpu_moe_permute(&x, &idx, &py, &gs, &map_bad),
                 tprt_cuda_moe_permute(&x, &idx, &py, &gs, &map_bad, 0));
  ct_same_status("moe_permute E = 0", tprt_cpu_moe_permute(&x, &idx, &py, &gs0, &map),
                 tprt_cuda_moe_permute(&x, &idx, &py, &gs0, &map, 0));

  tprt_tensor_t wts = T(F, 2, 8, 2, 0), out = T(B, 2, 8, 16, 0), out_f = T(F, 2, 8, 16, 0), uy_bad = T(B, 2, 15, 16, 0);
  ct_same_status("moe_unpermute y rows", tprt_cpu_moe_unpermute(&uy_bad, &map, &wts, &out),
                 tprt_cuda_moe_unpermute(&uy_bad, &map, &wts, &out, 0));
  ct_same_status("moe_unpermute out dtype", tprt_cpu_moe_unpermute(&py, &map, &wts, &out_f),
                 tprt_cuda_moe_unpermute(&py, &map, &wts, &out_f, 0));

  tprt_tensor_t bx = T(B, 2, 8, 16, 0), by = T(B, 2, 16, 16, 0), by_bad = T(B, 2, 17, 16, 0),
                fx = T(TPRT_DTYPE_F4E2M1FN, 2, 8, 3, 0), fy = T(TPRT_DTYPE_F4E2M1FN, 2, 16, 3, 0),
                gs_b = T(I64, 1, 2, 0, 0);
  ct_same_status("moe_bucket buckets 0", tprt_cpu_moe_bucket(&bx, &gs_b, &by, 0),
                 tprt_cuda_moe_bucket(&bx, &gs_b, &by, 0, 0));
  ct_same_status("moe_bucket E % B", tprt_cpu_moe_bucket(&bx, &gs_b, &by, 3),
                 tprt_cuda_moe_bucket(&bx, &gs_b, &by, 3, 0));
  ct_same_status("moe_bucket y", tprt_cpu_moe_bucket(&bx, &gs_b, &by_bad, 2),
                 tprt_cuda_moe_bucket(&bx, &gs_b, &by_bad, 2, 0));
  ct_same_status("moe_bucket f4 odd H", tprt_cpu_moe_bucket(&fx, &gs_b, &fy, 2),
                 tprt_cuda_moe_bucket(&fx, &gs_b, &fy, 2, 0));
  ct_same_status("moe_unbucket x", tprt_cpu_moe_unbucket(&by_bad, &gs_b, &bx, 2),
                 tprt_cuda_moe_unbucket(&by_bad, &gs_b, &bx, 2, 0));

  tprt_tensor_t ft = T(B, 2, 4, 8, 0), ci = T(I32, 2, 4, 8, 0), cf = T(F, 2, 4, 8, 0), cb = T(B, 2, 4, 9, 0);
  ct_same_status("fill_philox lo inf", tprt_cpu_fill_philox(&ft, 1, 0, -INFINITY, 1.0f, 0, 0, 8),
                 tprt_cuda_fill_philox(&ft, 1, 0, -INFINITY, 1.0f, 0, 0, 8, 0));
  ct_same_status("fill_philox block", tprt_cpu_fill_philox(&ft, 1, 0, 0.0f, 1.0f, 0, 4, 8),
                 tprt_cuda_fill_philox(&ft, 1, 0, 0.0f, 1.0f, 0, 4, 8, 0));
  ct_same_status("copy shape", tprt_cpu_copy(&ft, &cb), tprt_cuda_copy(&ft, &cb, 0));
  ct_same_status("copy i32 -> f32", tprt_cpu_copy(&ci, &cf), tprt_cuda_copy(&ci, &cf, 0));
}
