// tprt-cuda-check, attention: tprt_cuda_rope, tprt_cuda_attention and tprt_cuda_attention_grad
// against the CPU kernels of cpu_attention.c, bitwise, on fresh random inputs. Cases: bf16/f16/f32;
// causal and full; grouped-query groups of 1, 2 and 4 query heads per key/value head; head_dim
// 16/64/128 (and 300, 4100 and 9000, where the per-block vectors move from shared memory to the
// workspace); seq_len 1/7/64/300 (more keys than the 256 lanes of the softmax sum) over 1 to 3
// sequences; scale 0 (1/sqrt(D)) and explicit; wide and special inputs (underflowing
// exponentials, infinities, NaN scores); rope forward and inverse with cos/sin of x's dtype or f32.
// The backward's y is the CPU forward's output, so both backends read the same y.
#include "cuda_check.h"
#include "tprt_attention_rows.h"

static void ct_check_rope(cudaStream_t stream) {
  struct {
    int64_t t, heads, d;
    ct_dist_t dist;
  } shapes[] = {{1, 1, 2, CT_DIST_MODERATE},   {7, 3, 16, CT_DIST_MODERATE},   {64, 4, 64, CT_DIST_MODERATE},
                {5, 2, 128, CT_DIST_MODERATE}, {33, 8, 128, CT_DIST_MODERATE}, {9, 2, 64, CT_DIST_SPECIAL}};
  uint64_t rng = 0x20BE;
  for (const auto& sh : shapes) {
    for (int dtype : kDtypes) {
      for (int table_f32 = 0; table_f32 < 2; ++table_f32) {
        for (int inverse = 0; inverse < 2; ++inverse) {
          const int td = table_f32 ? TPRT_DTYPE_F32 : dtype;
          int64_t xd[2] = {sh.t, sh.heads * sh.d}, cd[2] = {sh.t, sh.d};
          ct_tensor_t x = ct_make(dtype, 2, xd), y = ct_make(dtype, 2, xd);
          ct_tensor_t cs = ct_make(td, 2, cd), sn = ct_make(td, 2, cd);
          ct_fill(&x, &rng, sh.dist);
          ct_fill(&cs, &rng, CT_DIST_MODERATE);
          ct_fill(&sn, &rng, CT_DIST_MODERATE);
          char shape[48], params[48];
          snprintf(shape, sizeof shape, "T=%lld H=%lld D=%lld", (long long)sh.t, (long long)sh.heads, (long long)sh.d);
          snprintf(params, sizeof params, "cos=%s%s%s", tprt_dtype_name(td), inverse ? " inverse" : "",
                   sh.dist == CT_DIST_SPECIAL ? " special" : "");
          ct_run(
              "rope", shape, tprt_dtype_name(dtype), params, &y,
              [&] { return tprt_cpu_rope(&x.h, &cs.h, &sn.h, &y.h, inverse); },
              [&](cudaStream_t st) { return tprt_cuda_rope(&x.d, &cs.d, &sn.d, &y.d, inverse, st); }, true, stream);
          ct_free(&x);
          ct_free(&y);
          ct_free(&cs);
          ct_free(&sn);
        }
      }
    }
  }
}

static void ct_check_attention(cudaStream_t stream) {
  struct {
    int64_t b, s, hq, hkv, d;
    float scale;
    ct_dist_t dist;
  } cases[] = {
      {1, 1, 1, 1, 16, 0.0f, CT_DIST_MODERATE},        // one token: a single visible key
      {3, 1, 2, 1, 128, 0.0f, CT_DIST_MODERATE},       // S = 1 over 3 sequences, group 2
      {2, 7, 2, 2, 16, 0.0f, CT_DIST_MODERATE},        // group 1 (multi-head attention)
      {3, 7, 4, 2, 64, 0.125f, CT_DIST_MODERATE},      // group 2, explicit scale
      {2, 64, 4, 1, 64, 0.0f, CT_DIST_MODERATE},       // group 4 (one key/value head)
      {1, 64, 8, 2, 128, 0.3f, CT_DIST_MODERATE},      // group 4, two key/value heads
      {2, 300, 2, 1, 64, 0.0f, CT_DIST_MODERATE},      // 300 keys: two per lane of the softmax sum
      {1, 300, 4, 1, 128, 0.0884f, CT_DIST_MODERATE},  // group 4, explicit scale
      {2, 300, 1, 1, 16, 0.0f, CT_DIST_MODERATE},      // one head
      {2, 64, 2, 1, 16, 0.0f, CT_DIST_WIDE},           // large scores: exponentials that underflow to 0
      {1, 7, 2, 1, 16, 0.0f, CT_DIST_SPECIAL},         // infinities and NaN scores
      {1, 5, 2, 1, 300, 0.0f, CT_DIST_MODERATE},       // D > 256: two columns per thread
      {1, 3, 2, 1, 4100, 0.0f, CT_DIST_MODERATE},      // backward vectors in the workspace, q_i in shared memory
      {1, 3, 1, 1, 9000, 0.01f, CT_DIST_MODERATE},     // every per-block vector in the workspace
  };
  uint64_t rng = 0xA77E;
  for (const auto& c : cases) {
    for (int dtype : kDtypes) {
      for (int causal = 0; causal < 2; ++causal) {
        const int64_t t = c.b * c.s;
        int64_t qd[2] = {t, c.hq * c.d}, kd[2] = {t, c.hkv * c.d};
        ct_tensor_t q = ct_make(dtype, 2, qd), k = ct_make(dtype, 2, kd), v = ct_make(dtype, 2, kd);
        ct_tensor_t y = ct_make(dtype, 2, qd), yref = ct_make(dtype, 2, qd), dy = ct_make(dtype, 2, qd);
        ct_tensor_t dq = ct_make(dtype, 2, qd), dk = ct_make(dtype, 2, kd), dv = ct_make(dtype, 2, kd);
        ct_fill(&q, &rng, c.dist);
        ct_fill(&k, &rng, c.dist);
        ct_fill(&v, &rng, c.dist == CT_DIST_SPECIAL ? c.dist : CT_DIST_MODERATE);
        ct_fill(&dy, &rng, CT_DIST_MODERATE);
        char shape[48], params[48];
        snprintf(shape, sizeof shape, "B=%lld S=%lld H=%lld/%lld D=%lld", (long long)c.b, (long long)c.s,
                 (long long)c.hq, (long long)c.hkv, (long long)c.d);
        snprintf(params, sizeof params, "%s scale=%g%s", causal ? "causal" : "full", (double)c.scale,
                 c.dist == CT_DIST_WIDE      ? " wide"
                 : c.dist == CT_DIST_SPECIAL ? " special"
                                             : "");
        int64_t sd[2] = {t, c.hq};
        ct_tensor_t lse = ct_make(TPRT_DTYPE_F32, 2, sd);  // the optional statistics, m + ln(l)
        if (ct_selected("attention"))
          ct_run_outputs(
              "attention", shape, tprt_dtype_name(dtype), params, {&y, &lse},
              [&] { return tprt_cpu_attention(&q.h, &k.h, &v.h, NULL, &y.h, &lse.h, c.s, c.d, causal, c.scale); },
              [&](cudaStream_t st) {
                return tprt_cuda_attention(&q.d, &k.d, &v.d, NULL, &y.d, &lse.d, c.s, c.d, causal, c.scale, st);
              },
              true, stream);
        ct_free(&lse);
        if (ct_selected("attention_grad")) {
          tprt_status_t s = tprt_cpu_attention(&q.h, &k.h, &v.h, NULL, &yref.h, NULL, c.s, c.d, causal, c.scale);
          if (s) {
            ct_fail_status("CPU attention (the backward's y)", s);
          } else {
            ct_upload(&yref);
            ct_run_outputs(
                "attention_grad", shape, tprt_dtype_name(dtype), params, {&dq, &dk, &dv},
                [&] {
                  return tprt_cpu_attention_grad(&q.h, &k.h, &v.h, &yref.h, &dy.h, NULL, &dq.h, &dk.h, &dv.h, c.s, c.d,
                                                 causal, c.scale);
                },
                [&](cudaStream_t st) {
                  return tprt_cuda_attention_grad(&q.d, &k.d, &v.d, &yref.d, &dy.d, NULL, &dq.d, &dk.d, &dv.d, c.s, c.d,
                                                  causal, c.scale, st);
                },
                true, stream);
          }
        }
        ct_tensor_t* all[] = {&q, &k, &v, &y, &yref, &dy, &dq, &dk, &dv};
        for (ct_tensor_t* x : all) ct_free(x);
      }
    }
  }
}

// Decoding with a KV cache: the cached rows (C per sequence, those past cache_len random) come
// first; cache lengths of 0, C and in between, over 64-token chunks and single tokens, with more
// than 256 keys in a row.
static void ct_check_attention_cache(cudaStream_t stream) {
  struct {
    int64_t b, s, hq, hkv, d, cap;
    int32_t lens[3];
  } cases[] = {
      {1, 1, 4, 1, 64, 9, {5}},                // one decode step
      {3, 1, 8, 2, 128, 300, {0, 300, 137}},   // empty, full and partial caches; 301 keys
      {2, 7, 2, 2, 16, 20, {13, 20}},          // a chunk of 7 after the cache
      {2, 64, 4, 2, 64, 64, {64, 1}},
  };
  uint64_t rng = 0xCAC4E;
  for (const auto& c : cases)
    for (int dtype : kDtypes)
      for (int causal = 0; causal < 2; ++causal) {
        int64_t qd[2] = {c.b * c.s, c.hq * c.d}, kd[2] = {c.b * c.s, c.hkv * c.d}, cd[2] = {c.b * c.cap, c.hkv * c.d};
        int64_t ld[1] = {c.b};
        ct_tensor_t q = ct_make(dtype, 2, qd), k = ct_make(dtype, 2, kd), v = ct_make(dtype, 2, kd);
        ct_tensor_t y = ct_make(dtype, 2, qd), kc = ct_make(dtype, 2, cd), vc = ct_make(dtype, 2, cd);
        ct_tensor_t len = ct_make(TPRT_DTYPE_I32, 1, ld);
        for (ct_tensor_t* x : {&q, &k, &v, &kc, &vc}) ct_fill(x, &rng, CT_DIST_MODERATE);
        for (int64_t b = 0; b < c.b; ++b) ((int32_t*)len.h.data)[b] = c.lens[b];
        ct_upload(&len);
        char shape[64], params[48];
        snprintf(shape, sizeof shape, "B=%lld S=%lld H=%lld/%lld D=%lld C=%lld", (long long)c.b, (long long)c.s,
                 (long long)c.hq, (long long)c.hkv, (long long)c.d, (long long)c.cap);
        snprintf(params, sizeof params, "%s cache_len=%d,%d,%d", causal ? "causal" : "full", c.lens[0],
                 c.b > 1 ? c.lens[1] : -1, c.b > 2 ? c.lens[2] : -1);
        tprt_kv_cache_t hc = {&kc.h, &vc.h, &len.h}, dc = {&kc.d, &vc.d, &len.d};
        ct_run(
            "attention", shape, tprt_dtype_name(dtype), params, &y,
            [&] { return tprt_cpu_attention(&q.h, &k.h, &v.h, &hc, &y.h, NULL, c.s, c.d, causal, 0.0f); },
            [&](cudaStream_t st) { return tprt_cuda_attention(&q.d, &k.d, &v.d, &dc, &y.d, NULL, c.s, c.d, causal, 0.0f, st); },
            true, stream);
        for (ct_tensor_t* x : {&q, &k, &v, &y, &kc, &vc, &len}) ct_free(x);
      }
}

void ct_check_validation_attention(void) {
  static char dummy[64];  // validation never reads data, but a non-empty view needs a pointer
  auto T = [](int dtype, int64_t d0, int64_t d1) {
    int64_t dims[2] = {d0, d1};
    return tprt_tensor_make(dummy, dtype, 2, dims);
  };
  const int B = TPRT_DTYPE_BF16, F = TPRT_DTYPE_F32;
  tprt_tensor_t x = T(B, 4, 16), y = T(B, 4, 16), cs = T(F, 4, 8), cs_odd = T(F, 4, 3), cs_rows = T(F, 3, 8),
                sn_h = T(TPRT_DTYPE_F16, 4, 8), y_f = T(F, 4, 16);
  ct_same_status("rope odd D", tprt_cpu_rope(&x, &cs_odd, &cs_odd, &y, false),
                 tprt_cuda_rope(&x, &cs_odd, &cs_odd, &y, false, 0));
  ct_same_status("rope table rows", tprt_cpu_rope(&x, &cs_rows, &cs_rows, &y, false),
                 tprt_cuda_rope(&x, &cs_rows, &cs_rows, &y, false, 0));
  ct_same_status("rope sin dtype", tprt_cpu_rope(&x, &cs, &sn_h, &y, true),
                 tprt_cuda_rope(&x, &cs, &sn_h, &y, true, 0));
  ct_same_status("rope y dtype", tprt_cpu_rope(&x, &cs, &cs, &y_f, false),
                 tprt_cuda_rope(&x, &cs, &cs, &y_f, false, 0));

  // q [4, 4·8] and k, v [4, 2·8]: D = 8, Hq = 4, Hkv = 2.
  tprt_tensor_t q = T(B, 4, 32), k = T(B, 4, 16), v = T(B, 4, 16), ya = T(B, 4, 32);
  tprt_tensor_t k3 = T(B, 4, 24), k_f = T(F, 4, 16), ya_bad = T(B, 4, 24), dk_bad = T(B, 4, 32);
  ct_same_status("attention seq_len", tprt_cpu_attention(&q, &k, &v, NULL, &ya, NULL, 3, 8, true, 0.0f),
                 tprt_cuda_attention(&q, &k, &v, NULL, &ya, NULL, 3, 8, true, 0.0f, 0));
  ct_same_status("attention head_dim", tprt_cpu_attention(&q, &k, &v, NULL, &ya, NULL, 4, 0, true, 0.0f),
                 tprt_cuda_attention(&q, &k, &v, NULL, &ya, NULL, 4, 0, true, 0.0f, 0));
  ct_same_status("attention groups", tprt_cpu_attention(&q, &k3, &k3, NULL, &ya, NULL, 4, 8, false, 0.0f),
                 tprt_cuda_attention(&q, &k3, &k3, NULL, &ya, NULL, 4, 8, false, 0.0f, 0));
  ct_same_status("attention scale", tprt_cpu_attention(&q, &k, &v, NULL, &ya, NULL, 4, 8, false, -1.0f),
                 tprt_cuda_attention(&q, &k, &v, NULL, &ya, NULL, 4, 8, false, -1.0f, 0));
  ct_same_status("attention scale nan", tprt_cpu_attention(&q, &k, &v, NULL, &ya, NULL, 4, 8, false, NAN),
                 tprt_cuda_attention(&q, &k, &v, NULL, &ya, NULL, 4, 8, false, NAN, 0));
  ct_same_status("attention k dtype", tprt_cpu_attention(&q, &k_f, &k_f, NULL, &ya, NULL, 4, 8, false, 0.0f),
                 tprt_cuda_attention(&q, &k_f, &k_f, NULL, &ya, NULL, 4, 8, false, 0.0f, 0));
  ct_same_status("attention y", tprt_cpu_attention(&q, &k, &v, NULL, &ya_bad, NULL, 4, 8, false, 0.0f),
                 tprt_cuda_attention(&q, &k, &v, NULL, &ya_bad, NULL, 4, 8, false, 0.0f, 0));
  ct_same_status("attention_grad NULL dy",
                 tprt_cpu_attention_grad(&q, &k, &v, &ya, NULL, NULL, &ya, &k, &v, 4, 8, true, 0.0f),
                 tprt_cuda_attention_grad(&q, &k, &v, &ya, NULL, NULL, &ya, &k, &v, 4, 8, true, 0.0f, 0));
  ct_same_status("attention_grad dk", tprt_cpu_attention_grad(&q, &k, &v, &ya, &ya, NULL, &ya, &dk_bad, &v, 4, 8, true, 0.0f),
                 tprt_cuda_attention_grad(&q, &k, &v, &ya, &ya, NULL, &ya, &dk_bad, &v, 4, 8, true, 0.0f, 0));
  // lse: f32 [T, Hq] = [4, 4].
  tprt_tensor_t lse_rows = T(F, 3, 4), lse_bf16 = T(B, 4, 4);
  ct_same_status("attention lse shape", tprt_cpu_attention(&q, &k, &v, NULL, &ya, &lse_rows, 4, 8, true, 0.0f),
                 tprt_cuda_attention(&q, &k, &v, NULL, &ya, &lse_rows, 4, 8, true, 0.0f, 0));
  ct_same_status("attention_grad lse dtype",
                 tprt_cpu_attention_grad(&q, &k, &v, &ya, &ya, &lse_bf16, &ya, &k, &v, 4, 8, true, 0.0f),
                 tprt_cuda_attention_grad(&q, &k, &v, &ya, &ya, &lse_bf16, &ya, &k, &v, 4, 8, true, 0.0f, 0));
}

void ct_check_attention_kernels(cudaStream_t stream) {
  if (ct_selected("rope")) ct_check_rope(stream);
  if (ct_selected("attention") || ct_selected("attention_grad")) ct_check_attention(stream);
  if (ct_selected("attention")) ct_check_attention_cache(stream);
}

void ct_check_attention_control(cudaStream_t stream) {
  // f32, one sequence of 300 tokens (more keys than lanes), one head, D = 64, full attention: the
  // CUDA kernel against the same formulas with l summed sequentially instead of by the lanes'
  // tree. A different order changes l in the last bits for some rows, and y with it.
  const int64_t s = 300, d = 64;
  int64_t dims[2] = {s, d};
  uint64_t rng = 0xC0DEA77E;
  ct_tensor_t q = ct_make(TPRT_DTYPE_F32, 2, dims), k = ct_make(TPRT_DTYPE_F32, 2, dims),
              v = ct_make(TPRT_DTYPE_F32, 2, dims), y = ct_make(TPRT_DTYPE_F32, 2, dims);
  ct_fill(&q, &rng, CT_DIST_MODERATE);
  ct_fill(&k, &rng, CT_DIST_MODERATE);
  ct_fill(&v, &rng, CT_DIST_MODERATE);
  const float *qv = (const float*)q.h.data, *kv = (const float*)k.h.data, *vv = (const float*)v.h.data;
  float* wrong = (float*)y.h.data;
  const float sc = tprt_attn_scale(0.0f, d);
  static float e[300];
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < s; ++j) e[j] = tprt_attn_dot(qv + i * d, kv + j * d, d) * sc;
    float m = e[0], l = 0.0f;
    for (int64_t j = 1; j < s; ++j)
      if (e[j] > m) m = e[j];
    for (int64_t j = 0; j < s; ++j) {
      e[j] = tprt_expf(e[j] - m);
      l = l + e[j];  // sequential, not the canonical 256-lane tree
    }
    for (int64_t c = 0; c < d; ++c) {
      float o = 0.0f;
      for (int64_t j = 0; j < s; ++j) o = fmaf(e[j], vv[j * d + c], o);
      wrong[i * d + c] = o / l;
    }
  }
  tprt_status_t st = tprt_cuda_attention(&q.d, &k.d, &v.d, NULL, &y.d, NULL, s, d, false, 0.0f, stream);
  if (st) {
    ct_control_failed("control attention", st);
  } else {
    CT_CUDA(cudaStreamSynchronize(stream));
    ct_control_row("cuda vs sequential sum", "S=300 H=1/1 D=64", "f32", &y, wrong);
  }
  ct_free(&q);
  ct_free(&k);
  ct_free(&v);
  ct_free(&y);
}
