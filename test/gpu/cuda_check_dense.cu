// tprt-cuda-check, the dense forward kernels (cuda_check.h): linear, the norms, GLU, the
// elementwise ops, the add forms (bias, f32 sum plus a storage-precision residual) and the
// collectives' staged sums, each bitwise against its CPU kernel on fresh random inputs.
#include "cuda_check.h"

void ct_check_linear(cudaStream_t stream) {
  struct {
    int64_t m, n, k;
    int chunks;  // 0: run chunks 1 and 8
    ct_dist_t dist;
  } shapes[] = {
      {1, 1, 1, 0, CT_DIST_MODERATE},
      {3, 5, 7, 0, CT_DIST_MODERATE},
      {7, 13, 29, 0, CT_DIST_MODERATE},
      {64, 64, 64, 0, CT_DIST_MODERATE},
      {65, 127, 300, 0, CT_DIST_MODERATE},
      {33, 70, 1000, 0, CT_DIST_MODERATE},
      {130, 96, 257, 0, CT_DIST_MODERATE},
      {256, 512, 1024, 0, CT_DIST_MODERATE},
      {5, 9, 0, 0, CT_DIST_MODERATE},
      {4, 5, 7, 16, CT_DIST_MODERATE},
      {9, 70, 3000, 1024, CT_DIST_MODERATE},
      // The tiled kernels' special cases (linear_tile.cuh): M = 1 over several tiles; ragged M, N
      // and K; chunk sizes that are multiples of the 16-byte vector but not of the k tile (24 with
      // chunks 8: a full and a partial tile of 16, one partial tile of 32), a short non-empty last
      // chunk (K=248, chunks 16: S=16, chunk 15 has 8) and an empty one (K=120, chunks 16: S=8)
      // on the vector loads; odd chunk sizes on the scalar loads (K=520: S=65); f16 subnormals
      // (wide values) and infinities, NaNs and signed zeros (special values).
      {1, 300, 520, 0, CT_DIST_MODERATE},
      {100, 200, 192, 0, CT_DIST_MODERATE},
      {65, 129, 248, 16, CT_DIST_MODERATE},
      {70, 130, 120, 16, CT_DIST_MODERATE},
      {129, 131, 67, 0, CT_DIST_MODERATE},
      {64, 96, 256, 8, CT_DIST_WIDE},
      {16, 40, 64, 8, CT_DIST_SPECIAL},
  };
  uint64_t rng = 0x11AEA5;
  for (const auto& sh : shapes) {
    for (int ci = 0; ci < 2; ++ci) {
      int chunks = sh.chunks ? sh.chunks : (ci == 0 ? 1 : 8);
      if (sh.chunks && ci == 1) break;
      for (int dtype : kDtypes) {
        for (int partial = 0; partial < 2; ++partial) {
          // Both output tiles of the tiled kernel (64 and 128 square), whatever the grid size.
          for (int tile : {TPRT_CUDA_TILE_SMALL, TPRT_CUDA_TILE_LARGE}) {
            int64_t xd[2] = {sh.m, sh.k}, wd[2] = {sh.n, sh.k}, bd[1] = {sh.n}, yd[2] = {sh.m, sh.n};
            int y_dtype = partial ? TPRT_DTYPE_F32 : dtype;
            bool with_bias = !partial;  // an f32 partial takes no bias
            ct_tensor_t x = ct_make(dtype, 2, xd), w = ct_make(dtype, 2, wd), b = ct_make(dtype, 1, bd),
                        y = ct_make(y_dtype, 2, yd);
            ct_fill(&x, &rng, sh.dist);
            ct_fill(&w, &rng, sh.dist);
            ct_fill(&b, &rng, CT_DIST_MODERATE);
            char shape[48], params[64];
            snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld", (long long)sh.m, (long long)sh.n, (long long)sh.k);
            snprintf(params, sizeof params, "chunks=%d %s tile=%d%s", chunks, partial ? "y=f32 partial" : "bias",
                     tile == TPRT_CUDA_TILE_LARGE ? 128 : 64,
                     sh.dist == CT_DIST_WIDE ? " wide" : sh.dist == CT_DIST_SPECIAL ? " edge" : "");
            ct_run(
                "linear", shape, tprt_dtype_name(dtype), params, &y,
                [&] { return tprt_cpu_linear(&x.h, &w.h, with_bias ? &b.h : NULL, &y.h, chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_linear_tiled(&x.d, &w.d, with_bias ? &b.d : NULL, &y.d, chunks, tile, st);
                },
                true, stream);
            ct_free(&x);
            ct_free(&w);
            ct_free(&b);
            ct_free(&y);
          }
        }
      }
    }
  }
}

/// A device copy of a host [R, C] matrix, transposed ([C, R]) when |transpose|, at an offset of
/// |offset| elements into its allocation (1: misaligned for 16-byte loads). Free |base|.
typedef struct {
  void* base;
  void* data;
} ct_dev_t;

static ct_dev_t ct_dev_copy(const tprt_tensor_t* h, bool transpose, int offset) {
  int64_t r = h->dims[h->rank - 2], c = h->dims[h->rank - 1], mats = tprt_tensor_numel(h) / (r * c > 0 ? r * c : 1);
  size_t elem = tprt_dtype_bytes(h->dtype, 1), bytes = tprt_tensor_bytes(h);
  char* tmp = (char*)malloc(bytes ? bytes : 1);
  for (int64_t e = 0; e < mats; ++e)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        size_t from = (size_t)(e * r * c + i * c + j), to = (size_t)(e * r * c + (transpose ? j * r + i : i * c + j));
        memcpy(tmp + to * elem, (const char*)h->data + from * elem, elem);
      }
  ct_dev_t d;
  CT_CUDA(cudaMalloc(&d.base, bytes + 16));
  d.data = (char*)d.base + (size_t)offset * elem;
  CT_CUDA(cudaMemcpy(d.data, tmp, bytes, cudaMemcpyHostToDevice));
  free(tmp);
  return d;
}

// The exact GEMM under the gradients with every operand layout (tprt_cuda_gemm_exact: a and b row
// major or read k-major, as the dgrad and wgrad read them), both tiles, 16-byte aligned and
// misaligned operands (the scalar loads), against tprt_cpu_linear of the same product; and the
// grouped GEMM with w read k-major (the grouped dgrad's) and misaligned operands.
void ct_check_gemm_layouts(cudaStream_t stream) {
  struct {
    int64_t m, n, k;
    int chunks;
  } shapes[] = {{1, 136, 64, 8}, {130, 200, 192, 8}, {67, 72, 248, 16}, {256, 264, 120, 16}, {40, 24, 520, 8}};
  uint64_t rng = 0x6E33;
  for (const auto& sh : shapes) {
    for (int dtype : kDtypes) {
      int64_t xd[2] = {sh.m, sh.k}, wd[2] = {sh.n, sh.k}, yd[2] = {sh.m, sh.n};
      ct_tensor_t x = ct_make(dtype, 2, xd), w = ct_make(dtype, 2, wd), y = ct_make(TPRT_DTYPE_F32, 2, yd);
      ct_fill(&x, &rng, CT_DIST_MODERATE);
      ct_fill(&w, &rng, CT_DIST_MODERATE);
      for (int layout = 0; layout < 4; ++layout) {
        const int a_kmajor = layout & 1, b_kmajor = layout >> 1;
        for (int offset = 0; offset < 2; ++offset) {
          ct_dev_t a = ct_dev_copy(&x.h, a_kmajor, offset), b = ct_dev_copy(&w.h, b_kmajor, offset);
          for (int tile : {TPRT_CUDA_TILE_SMALL, TPRT_CUDA_TILE_LARGE}) {
            char shape[48], params[64];
            snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld", (long long)sh.m, (long long)sh.n, (long long)sh.k);
            snprintf(params, sizeof params, "gemm %s%s chunks=%d tile=%d%s", a_kmajor ? "Ak" : "Ar",
                     b_kmajor ? "Bk" : "Br", sh.chunks, tile == TPRT_CUDA_TILE_LARGE ? 128 : 64,
                     offset ? " misaligned" : "");
            ct_run(
                "linear", shape, tprt_dtype_name(dtype), params, &y,
                [&] { return tprt_cpu_linear(&x.h, &w.h, NULL, &y.h, sh.chunks); },
                [&](cudaStream_t st) {
                  return tprt_cuda_gemm_exact(a.data, a_kmajor, b.data, b_kmajor, dtype, sh.m, sh.n, sh.k, NULL,
                                              y.d.data, TPRT_DTYPE_F32, sh.chunks, tile, st);
                },
                true, stream);
          }
          CT_CUDA(cudaFree(a.base));
          CT_CUDA(cudaFree(b.base));
        }
      }
      ct_free(&x);
      ct_free(&w);
      ct_free(&y);
    }
  }
}

// The norms and tp.add_rmsnorm (layer 2: the add of a residual, then the rmsnorm of the rounded
// sum; normed and sum both compared) against the CPU's, bitwise.
void ct_check_norms(cudaStream_t stream) {
  const int64_t shapes[][2] = {{1, 1}, {3, 17}, {4, 256}, {5, 257}, {7, 1000}, {64, 4096}, {3, 8191}};
  const char* const kernels[] = {"rmsnorm", "layernorm", "add_rmsnorm"};
  uint64_t rng = 0x2A0B;
  for (int layer = 0; layer < 3; ++layer) {
    const char* kernel = kernels[layer];
    if (!ct_selected(kernel)) continue;
    int si = 0;
    for (const auto& sh : shapes) {
      for (int di = 0; di < 3; ++di) {
        int dtype = kDtypes[di], g_dtype = kDtypes[(di + si) % 3];  // every x/gamma dtype pairing occurs
        float eps = layer == 1 ? 1e-5f : 1e-6f;
        int64_t h1[1] = {sh[1]};
        ct_tensor_t x = ct_make(dtype, 2, sh), y = ct_make(dtype, 2, sh), g = ct_make(g_dtype, 1, h1),
                    b = ct_make(g_dtype, 1, h1), r = ct_make(dtype, 2, sh), sum = ct_make(dtype, 2, sh);
        ct_fill(&x, &rng, layer == 1 ? CT_DIST_OFFSET : CT_DIST_MODERATE);
        ct_fill(&g, &rng, CT_DIST_MODERATE);
        ct_fill(&b, &rng, CT_DIST_MODERATE);
        if (layer == 2) ct_fill(&r, &rng, CT_DIST_MODERATE);
        char shape[48], params[48];
        snprintf(shape, sizeof shape, "M=%lld H=%lld", (long long)sh[0], (long long)sh[1]);
        snprintf(params, sizeof params, "gamma=%s eps=%g", tprt_dtype_name(g_dtype), (double)eps);
        if (layer == 2) {
          ct_run_outputs(
              kernel, shape, tprt_dtype_name(dtype), params, {&y, &sum},
              [&] { return tprt_cpu_add_rmsnorm(&r.h, &x.h, &g.h, &y.h, &sum.h, eps); },
              [&](cudaStream_t st) { return tprt_cuda_add_rmsnorm(&r.d, &x.d, &g.d, &y.d, &sum.d, eps, st); }, true,
              stream);
        } else {
          ct_run(
              kernel, shape, tprt_dtype_name(dtype), params, &y,
              [&] {
                return layer ? tprt_cpu_layernorm(&x.h, &g.h, &b.h, &y.h, eps) : tprt_cpu_rmsnorm(&x.h, &g.h, &y.h, eps);
              },
              [&](cudaStream_t st) {
                return layer ? tprt_cuda_layernorm(&x.d, &g.d, &b.d, &y.d, eps, st)
                             : tprt_cuda_rmsnorm(&x.d, &g.d, &y.d, eps, st);
              },
              true, stream);
        }
        ct_free(&x), ct_free(&y), ct_free(&g), ct_free(&b), ct_free(&r), ct_free(&sum);
      }
      ++si;
    }
  }
}

void ct_check_glu(cudaStream_t stream) {
  struct {
    int rank;
    int64_t dims[3];
    ct_dist_t dist;
  } shapes[] = {
      {2, {3, 2}, CT_DIST_WIDE},          // F = 1: interleave 0 only
      {2, {4, 64}, CT_DIST_SPECIAL},      // edge values: +-0, +-inf, subnormals, clamps
      {3, {3, 5, 128}, CT_DIST_WIDE},     // rank 3
      {2, {64, 2752}, CT_DIST_MODERATE},  // F = 1376 = 43 blocks of 32
  };
  const char* kinds[] = {"swiglu", "geglu", "quick_geglu"};
  const float alpha = 1.702f, limit = 7.0f;  // TE's ClampedQGeGLU defaults (gpt-oss)
  uint64_t rng = 0x61C;
  for (const auto& sh : shapes) {
    int64_t f = sh.dims[sh.rank - 1] / 2;
    for (int64_t interleave : {(int64_t)0, (int64_t)32}) {
      if (interleave && f % interleave) continue;
      for (int kind = 0; kind < 3; ++kind) {
        for (int dtype : kDtypes) {
          int64_t yd[3] = {sh.dims[0], sh.dims[1], sh.dims[2]};
          yd[sh.rank - 1] = f;
          ct_tensor_t x = ct_make(dtype, sh.rank, sh.dims), y = ct_make(dtype, sh.rank, yd);
          ct_fill(&x, &rng, sh.dist);
          char shape[48], params[48];
          if (sh.rank == 2)
            snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)sh.dims[0], (long long)sh.dims[1]);
          else
            snprintf(shape, sizeof shape, "[%lld,%lld,%lld]", (long long)sh.dims[0], (long long)sh.dims[1],
                     (long long)sh.dims[2]);
          snprintf(params, sizeof params, "%s interleave=%lld%s", kinds[kind], (long long)interleave,
                   sh.dist == CT_DIST_SPECIAL ? " edge" : "");
          ct_run(
              "glu", shape, tprt_dtype_name(dtype), params, &y,
              [&] { return tprt_cpu_glu(&x.h, &y.h, kind, interleave, alpha, limit); },
              [&](cudaStream_t st) { return tprt_cuda_glu(&x.d, &y.d, kind, interleave, alpha, limit, st); }, true,
              stream);
          ct_free(&x);
          ct_free(&y);
        }
      }
    }
  }
}

void ct_check_elementwise(cudaStream_t stream) {
  struct {
    int rank;
    int64_t dims[4];
  } shapes[] = {{1, {1}}, {1, {1000}}, {2, {7, 333}}, {2, {64, 4096}}, {4, {3, 5, 7, 11}}};
  uint64_t rng = 0xADD;
  for (int mul = 0; mul < 2; ++mul) {
    const char* kernel = mul ? "mul" : "add";
    if (!ct_selected(kernel)) continue;
    int si = 0;
    for (const auto& sh : shapes) {
      for (int dtype : kDtypes) {
        // The last shape runs in place (c = a) to check the aliasing the API allows.
        bool in_place = si == 4;
        ct_tensor_t a = ct_make(dtype, sh.rank, sh.dims), b = ct_make(dtype, sh.rank, sh.dims),
                    c = ct_make(dtype, sh.rank, sh.dims);
        ct_fill(&a, &rng, CT_DIST_SPECIAL);
        ct_fill(&b, &rng, CT_DIST_SPECIAL);
        ct_tensor_t* out = in_place ? &a : &c;
        char shape[48];
        int used = snprintf(shape, sizeof shape, "[");
        for (int i = 0; i < sh.rank; ++i)
          used += snprintf(shape + used, sizeof shape - used, i ? ",%lld" : "%lld", (long long)sh.dims[i]);
        snprintf(shape + used, sizeof shape - used, "]");
        // The CPU computes into a host copy of a when in place, so that both sides read the same a.
        ct_tensor_t ref = ct_make(dtype, sh.rank, sh.dims);
        memcpy(ref.h.data, a.h.data, tprt_tensor_bytes(&a.h));
        ct_tensor_t* cpu_out = in_place ? &ref : &c;
        // ct_run compares out->h against out->d: the CPU result must sit in out->h.
        ct_run(
            kernel, shape, tprt_dtype_name(dtype), in_place ? "edge c=a (in place)" : "edge", out,
            [&] {
              tprt_status_t s = mul ? tprt_cpu_mul(in_place ? &ref.h : &a.h, &b.h, &cpu_out->h)
                                    : tprt_cpu_add(in_place ? &ref.h : &a.h, &b.h, &cpu_out->h);
              if (!s && in_place) memcpy(a.h.data, ref.h.data, tprt_tensor_bytes(&a.h));
              return s;
            },
            [&](cudaStream_t st) {
              return mul ? tprt_cuda_mul(&a.d, &b.d, &out->d, st) : tprt_cuda_add(&a.d, &b.d, &out->d, st);
            },
            !in_place, stream);
        ct_free(&a);
        ct_free(&b);
        ct_free(&c);
        ct_free(&ref);
      }
      ++si;
    }
  }
}

// The other forms of add (tprt__check_elementwise): a rank-1 bias b of a's last dimension, and an
// f32 a (a reduced f32 sum) plus a b in storage precision, of a's shape (the fused norms' residual
// add) or a bias, with c in b's dtype or f32; the residual form also in place (c = b).
void ct_check_add_forms(cudaStream_t stream) {
  if (!ct_selected("add")) return;
  struct {
    int rank;
    int64_t dims[4];
  } shapes[] = {{2, {7, 333}}, {2, {64, 4096}}, {4, {3, 5, 7, 11}}};
  uint64_t rng = 0xADD2;
  for (const auto& sh : shapes) {
    char shape[48];
    int used = snprintf(shape, sizeof shape, "[");
    for (int i = 0; i < sh.rank; ++i)
      used += snprintf(shape + used, sizeof shape - used, i ? ",%lld" : "%lld", (long long)sh.dims[i]);
    snprintf(shape + used, sizeof shape - used, "]");
    const int64_t* cols = &sh.dims[sh.rank - 1];
    // (a dtype, b dtype, c dtype, b a bias, in place)
    struct {
      int a, b, c;
      bool bias, in_place;
    } forms[] = {
        {TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, true, false},
        {TPRT_DTYPE_F16, TPRT_DTYPE_F16, TPRT_DTYPE_F16, true, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_F32, TPRT_DTYPE_F32, true, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, true, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_F16, TPRT_DTYPE_F32, true, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, false, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_F16, TPRT_DTYPE_F16, false, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_BF16, TPRT_DTYPE_F32, false, false},
        {TPRT_DTYPE_F32, TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, false, true},
    };
    for (const auto& f : forms) {
      ct_tensor_t a = ct_make(f.a, sh.rank, sh.dims), b = f.bias ? ct_make(f.b, 1, cols) : ct_make(f.b, sh.rank, sh.dims),
                  c = ct_make(f.c, sh.rank, sh.dims);
      ct_fill(&a, &rng, CT_DIST_SPECIAL);
      ct_fill(&b, &rng, CT_DIST_SPECIAL);
      // In place (c = b): the CPU computes into a host copy of b, so that both sides read the same b.
      ct_tensor_t ref = ct_make(f.b, b.h.rank, b.h.dims);
      memcpy(ref.h.data, b.h.data, tprt_tensor_bytes(&b.h));
      ct_tensor_t* out = f.in_place ? &b : &c;
      char params[64];
      snprintf(params, sizeof params, "%s %s+%s->%s%s", f.bias ? "bias" : "residual", tprt_dtype_name(f.a),
               tprt_dtype_name(f.b), tprt_dtype_name(f.c), f.in_place ? " c=b" : "");
      ct_run(
          "add", shape, tprt_dtype_name(f.a), params, out,
          [&] {
            tprt_status_t s = tprt_cpu_add(&a.h, f.in_place ? &ref.h : &b.h, f.in_place ? &ref.h : &c.h);
            if (!s && f.in_place) memcpy(b.h.data, ref.h.data, tprt_tensor_bytes(&b.h));
            return s;
          },
          [&](cudaStream_t st) { return tprt_cuda_add(&a.d, &b.d, &out->d, st); }, !f.in_place, stream);
      ct_free(&a);
      ct_free(&b);
      ct_free(&c);
      ct_free(&ref);
    }
  }
}


// The summing half of the reducing collectives (tprt_cuda_reduce_staged_own), against the CPU
// collectives' order written out here: the pairwise tree (canonical) or increasing member, f32
// sums, one rounding. Group sizes with a compile-time kernel (2, 4, 8) and one without (3); n a
// multiple of 4 (the vector path) or not; the caller's own member read through a strided view (its
// staged block then holds garbage that must not be read).
void ct_check_reduce_staged(cudaStream_t stream) {
  if (!ct_selected("reduce_staged")) return;
  const int pairs[][2] = {{TPRT_DTYPE_BF16, TPRT_DTYPE_BF16}, {TPRT_DTYPE_F32, TPRT_DTYPE_F32},
                          {TPRT_DTYPE_F32, TPRT_DTYPE_BF16}, {TPRT_DTYPE_BF16, TPRT_DTYPE_F32},
                          {TPRT_DTYPE_F16, TPRT_DTYPE_F16}};
  const int groups[] = {2, 3, 4, 8};
  struct {
    int64_t n, cols, pitch;  // cols 0: no own view
  } shapes[] = {{4096, 0, 0}, {1023, 0, 0}, {4096, 1024, 1536}, {1023, 341, 345}, {4096, 4096, 4096}};
  uint64_t rng = 0x5EED;
  for (const auto& p : pairs)
    for (int g : groups)
      for (const auto& sh : shapes)
        for (int canonical = 0; canonical < 2; ++canonical) {
          int64_t sd[2] = {g, sh.n}, od[1] = {sh.n};
          int64_t rows = sh.cols ? sh.n / sh.cols : 1, vd[2] = {rows, sh.cols ? sh.pitch : 1};
          ct_tensor_t staged = ct_make(p[0], 2, sd), out = ct_make(p[1], 1, od), view = ct_make(p[0], 2, vd);
          ct_fill(&staged, &rng, CT_DIST_WIDE);
          ct_fill(&view, &rng, CT_DIST_WIDE);
          int member = sh.cols ? g / 2 : -1;
          tprt_cuda_staged_own_t own = {member, view.d.data, sh.cols ? sh.cols : 1, sh.cols ? sh.pitch : 1};
          if (member >= 0)  // garbage in the own member's staged block (device only)
            CT_CUDA(cudaMemset((char*)staged.d.data + tprt_dtype_bytes(p[0], (int64_t)member * sh.n), 0x7F,
                               (size_t)tprt_dtype_bytes(p[0], sh.n)));
          char shape[64], params[64];
          snprintf(shape, sizeof shape, "[%d,%lld]", g, (long long)sh.n);
          snprintf(params, sizeof params, "-> %s %s%s", tprt_dtype_name(p[1]), canonical ? "canonical" : "any",
                   member >= 0 ? " own view" : "");
          ct_run(
              "reduce_staged", shape, tprt_dtype_name(p[0]), params, &out,
              [&] {
                for (int64_t i = 0; i < sh.n; ++i) {
                  float v[8] = {0};
                  for (int m = 0; m < g; ++m)
                    v[m] = m == member ? tprt_load_elem(view.h.data, p[0], (i / sh.cols) * sh.pitch + i % sh.cols)
                                       : tprt_load_elem(staged.h.data, p[0], (int64_t)m * sh.n + i);
                  if (canonical) {
                    for (int s = 1; s < g; s *= 2)
                      for (int m = 0; m + s < g; m += 2 * s) v[m] = v[m] + v[m + s];
                  } else {
                    for (int m = 1; m < g; ++m) v[0] = v[0] + v[m];
                  }
                  tprt_store_elem(out.h.data, p[1], i, v[0]);
                }
                return (tprt_status_t)NULL;
              },
              [&](cudaStream_t st) {
                return tprt_cuda_reduce_staged_own(staged.d.data, g, p[0], sh.n, out.d.data, p[1], canonical, own, st);
              },
              true, stream);
          ct_free(&staged);
          ct_free(&out);
          ct_free(&view);
        }
}
