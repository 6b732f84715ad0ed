// tprt-cuda-check-fast, attention: the tensor-core kernels of fast and invariant modes
// (attention_tc_*.cu) close to the exact ones (forward y, backward dq, dk, dv; causal and full,
// grouped-query heads, head dims 64 and 128, bf16 and f16, sequences that are not multiples of the
// tiles), and bitwise invariant over the batch (a sequence alone = the same sequence in a batch),
// the heads a rank holds (a TP shard of the heads, a different row stride) and, causal, the prefix
// (the first rows of a sequence = the rows of the shorter sequence), and decoding with a KV cache
// (a token after its cached keys = the same token in the prefill).
#include "check_fast.h"

namespace {

struct fc_attn_case {
  int64_t b, l, hq, hkv, d;
  bool causal;
  float scale;  // 0: 1/sqrt(D)
  int dtype;
  std::string label() const {
    char out[96];
    snprintf(out, sizeof out, "B=%lld S=%lld H=%lld/%lld D=%lld %s%s", (long long)b, (long long)l, (long long)hq,
             (long long)hkv, (long long)d, causal ? "causal" : "full", scale == 0.0f ? "" : " s=1");
    return out;
  }
};

/// The forward and backward of one case on both kernels, compared within tolerance.
void fc_attn_close(const fc_attn_case& c, cudaStream_t s) {
  const int64_t t = c.b * c.l;
  fc_tensor q(c.dtype, {t, c.hq * c.d}), k(c.dtype, {t, c.hkv * c.d}), v(c.dtype, {t, c.hkv * c.d});
  fc_tensor dy(c.dtype, {t, c.hq * c.d});
  q.fill(), k.fill(), v.fill(), dy.fill();
  fc_tensor y(c.dtype, {t, c.hq * c.d}), ye(c.dtype, {t, c.hq * c.d});
  y.poison(), ye.poison();
  const std::string label = c.label();
  tprt_status_t fs = tprt_cuda_attention_tc(&q.t, &k.t, &v.t, NULL, &y.t, NULL, c.l, c.d, c.causal, c.scale, s);
  tprt_status_t es = tprt_cuda_attention(&q.t, &k.t, &v.t, NULL, &ye.t, NULL, c.l, c.d, c.causal, c.scale, s);
  fc_compare("attention tc", label.c_str(), y, ye, fs, es);
  // The backward of both from the exact forward's y.
  fc_tensor dq(c.dtype, {t, c.hq * c.d}), dk(c.dtype, {t, c.hkv * c.d}), dv(c.dtype, {t, c.hkv * c.d});
  fc_tensor dqe(c.dtype, {t, c.hq * c.d}), dke(c.dtype, {t, c.hkv * c.d}), dve(c.dtype, {t, c.hkv * c.d});
  dq.poison(), dk.poison(), dv.poison(), dqe.poison(), dke.poison(), dve.poison();
  fs = tprt_cuda_attention_grad_tc(&q.t, &k.t, &v.t, &ye.t, &dy.t, NULL, &dq.t, &dk.t, &dv.t, c.l, c.d, c.causal, c.scale,
                                   s);
  es = tprt_cuda_attention_grad(&q.t, &k.t, &v.t, &ye.t, &dy.t, NULL, &dqe.t, &dke.t, &dve.t, c.l, c.d, c.causal, c.scale,
                                s);
  // One status per comparison: the first row reports a failure, the others compare what exists.
  fc_compare("attention_grad tc dq", label.c_str(), dq, dqe, fs, es);
  fc_compare("attention_grad tc dk", label.c_str(), dk, dke, nullptr, nullptr);
  fc_compare("attention_grad tc dv", label.c_str(), dv, dve, nullptr, nullptr);
  // The forward's lse (f32 [T, Hq]) against the exact kernel's m + ln(l), and the backward that
  // takes it instead of recomputing the statistics against the exact backward.
  fc_tensor lse(TPRT_DTYPE_F32, {t, c.hq}), lsee(TPRT_DTYPE_F32, {t, c.hq});
  lse.poison(), lsee.poison();
  fs = tprt_cuda_attention_tc(&q.t, &k.t, &v.t, NULL, &y.t, &lse.t, c.l, c.d, c.causal, c.scale, s);
  es = tprt_cuda_attention(&q.t, &k.t, &v.t, NULL, &ye.t, &lsee.t, c.l, c.d, c.causal, c.scale, s);
  fc_compare("attention tc lse", label.c_str(), lse, lsee, fs, es);
  dq.poison(), dk.poison(), dv.poison();
  fs = tprt_cuda_attention_grad_tc(&q.t, &k.t, &v.t, &ye.t, &dy.t, &lse.t, &dq.t, &dk.t, &dv.t, c.l, c.d, c.causal,
                                   c.scale, s);
  fc_compare("attention_grad tc+lse dq", label.c_str(), dq, dqe, fs, nullptr);
  fc_compare("attention_grad tc+lse dk", label.c_str(), dk, dke, nullptr, nullptr);
  fc_compare("attention_grad tc+lse dv", label.c_str(), dv, dve, nullptr, nullptr);
}

/// A view of rows [r0, r0 + rows) and columns [c0, c0 + cols) of |x| copied into |out| (dense).
void fc_copy_block(const fc_tensor& x, int64_t r0, int64_t rows, int64_t c0, int64_t cols, fc_tensor& out) {
  const int elem = tprt_dtype_bytes(x.t.dtype, 1);
  FC_CUDA(cudaMemcpy2D(out.t.data, (size_t)(cols * elem), (char*)x.t.data + (r0 * x.t.dims[1] + c0) * elem,
                       (size_t)(x.t.dims[1] * elem), (size_t)(cols * elem), (size_t)rows, cudaMemcpyDeviceToDevice));
}

/// Bitwise invariance of a case: sequence |seq| alone, the first half of the heads (with their
/// key/value heads) alone, and, causal, the first |prefix| rows of sequence 0 as a sequence.
void fc_attn_invariant(const fc_attn_case& c, int64_t seq, int64_t prefix, cudaStream_t s) {
  const int64_t t = c.b * c.l, wq = c.hq * c.d, wk = c.hkv * c.d;
  const int elem = tprt_dtype_bytes(c.dtype, 1);
  fc_tensor q(c.dtype, {t, wq}), k(c.dtype, {t, wk}), v(c.dtype, {t, wk}), dy(c.dtype, {t, wq});
  q.fill(), k.fill(), v.fill(), dy.fill();
  fc_tensor y(c.dtype, {t, wq}), dq(c.dtype, {t, wq}), dk(c.dtype, {t, wk}), dv(c.dtype, {t, wk});
  y.poison(), dq.poison(), dk.poison(), dv.poison();
  tprt_status_t st = tprt_cuda_attention_tc(&q.t, &k.t, &v.t, NULL, &y.t, NULL, c.l, c.d, c.causal, c.scale, s);
  if (!st)
    st = tprt_cuda_attention_grad_tc(&q.t, &k.t, &v.t, &y.t, &dy.t, NULL, &dq.t, &dk.t, &dv.t, c.l, c.d, c.causal, c.scale,
                                     s);
  FC_CUDA(cudaDeviceSynchronize());
  const std::string label = c.label();
  if (st) {
    fc_bitwise_row("attention tc", label.c_str(), 0, st);
    return;
  }
  // One sequence alone: the same tensors at an offset, B = 1.
  {
    const int64_t r0 = seq * c.l;
    int64_t qd[2] = {c.l, wq}, kd[2] = {c.l, wk};
    fc_tensor ys(c.dtype, {c.l, wq}), dqs(c.dtype, {c.l, wq}), dks(c.dtype, {c.l, wk}), dvs(c.dtype, {c.l, wk});
    ys.poison(), dqs.poison(), dks.poison(), dvs.poison();
    tprt_tensor_t qs = tprt_tensor_make((char*)q.t.data + r0 * wq * elem, c.dtype, 2, qd);
    tprt_tensor_t ks = tprt_tensor_make((char*)k.t.data + r0 * wk * elem, c.dtype, 2, kd);
    tprt_tensor_t vs = tprt_tensor_make((char*)v.t.data + r0 * wk * elem, c.dtype, 2, kd);
    tprt_tensor_t dys = tprt_tensor_make((char*)dy.t.data + r0 * wq * elem, c.dtype, 2, qd);
    tprt_status_t e = tprt_cuda_attention_tc(&qs, &ks, &vs, NULL, &ys.t, NULL, c.l, c.d, c.causal, c.scale, s);
    if (!e)
      e = tprt_cuda_attention_grad_tc(&qs, &ks, &vs, &ys.t, &dys, NULL, &dqs.t, &dks.t, &dvs.t, c.l, c.d, c.causal, c.scale,
                                      s);
    FC_CUDA(cudaDeviceSynchronize());
    char what[96];
    snprintf(what, sizeof what, "%s: seq %lld alone", label.c_str(), (long long)seq);
    int64_t bad = 0;
    if (!e) {
      bad += fc_diff_rows((char*)y.t.data + r0 * wq * elem, wq, ys.t.data, wq, c.l, wq, elem);
      bad += fc_diff_rows((char*)dq.t.data + r0 * wq * elem, wq, dqs.t.data, wq, c.l, wq, elem);
      bad += fc_diff_rows((char*)dk.t.data + r0 * wk * elem, wk, dks.t.data, wk, c.l, wk, elem);
      bad += fc_diff_rows((char*)dv.t.data + r0 * wk * elem, wk, dvs.t.data, wk, c.l, wk, elem);
    }
    fc_bitwise_row("attention tc y,dq,dk,dv", what, bad, e);
  }
  // A TP shard: the first half of the query heads and of the key/value heads, dense (row strides
  // halve).
  if (c.hkv % 2 == 0) {
    const int64_t hq = c.hq / 2, hk = c.hkv / 2;
    fc_tensor qs(c.dtype, {t, hq * c.d}), ks(c.dtype, {t, hk * c.d}), vs(c.dtype, {t, hk * c.d}),
        dys(c.dtype, {t, hq * c.d});
    fc_copy_block(q, 0, t, 0, hq * c.d, qs), fc_copy_block(k, 0, t, 0, hk * c.d, ks);
    fc_copy_block(v, 0, t, 0, hk * c.d, vs), fc_copy_block(dy, 0, t, 0, hq * c.d, dys);
    fc_tensor ys(c.dtype, {t, hq * c.d}), dqs(c.dtype, {t, hq * c.d}), dks(c.dtype, {t, hk * c.d}),
        dvs(c.dtype, {t, hk * c.d});
    ys.poison(), dqs.poison(), dks.poison(), dvs.poison();
    tprt_status_t e = tprt_cuda_attention_tc(&qs.t, &ks.t, &vs.t, NULL, &ys.t, NULL, c.l, c.d, c.causal, c.scale, s);
    if (!e)
      e = tprt_cuda_attention_grad_tc(&qs.t, &ks.t, &vs.t, &ys.t, &dys.t, NULL, &dqs.t, &dks.t, &dvs.t, c.l, c.d, c.causal,
                                      c.scale, s);
    FC_CUDA(cudaDeviceSynchronize());
    char what[96];
    snprintf(what, sizeof what, "%s: heads of TP rank 0/2", label.c_str());
    int64_t bad = 0;
    if (!e) {
      bad += fc_diff_rows(y.t.data, wq, ys.t.data, hq * c.d, t, hq * c.d, elem);
      bad += fc_diff_rows(dq.t.data, wq, dqs.t.data, hq * c.d, t, hq * c.d, elem);
      bad += fc_diff_rows(dk.t.data, wk, dks.t.data, hk * c.d, t, hk * c.d, elem);
      bad += fc_diff_rows(dv.t.data, wk, dvs.t.data, hk * c.d, t, hk * c.d, elem);
    }
    fc_bitwise_row("attention tc y,dq,dk,dv", what, bad, e);
  }
  // Causal prefix: the first |prefix| tokens of sequence 0 as a sequence of their own.
  if (c.causal && prefix > 0) {
    fc_tensor qs(c.dtype, {prefix, wq}), ks(c.dtype, {prefix, wk}), vs(c.dtype, {prefix, wk}),
        ys(c.dtype, {prefix, wq});
    fc_copy_block(q, 0, prefix, 0, wq, qs), fc_copy_block(k, 0, prefix, 0, wk, ks), fc_copy_block(v, 0, prefix, 0, wk, vs);
    ys.poison();
    tprt_status_t e = tprt_cuda_attention_tc(&qs.t, &ks.t, &vs.t, NULL, &ys.t, NULL, prefix, c.d, true, c.scale, s);
    FC_CUDA(cudaDeviceSynchronize());
    char what[96];
    snprintf(what, sizeof what, "%s: prefix %lld", label.c_str(), (long long)prefix);
    fc_bitwise_row("attention tc y", what, e ? 0 : fc_diff_rows(y.t.data, wq, ys.t.data, wq, prefix, wq, elem), e);
  }
}

/// Decoding with a KV cache on the tensor cores: sequence b's rows past_b .. past_b + n - 1 computed
/// from a cache of its first past_b keys and values (C rows per sequence, the rest poisoned) have
/// the bits of the same rows of the prefill of the whole sequence (causal), for every (past, n) in
/// |splits| (past at, below and above the 128-key blocks' boundaries), sequences of one call with
/// different cache lengths.
void fc_attn_decode(const fc_attn_case& c, const std::vector<std::pair<int64_t, int64_t>>& splits, cudaStream_t s) {
  const int64_t t = c.b * c.l, wq = c.hq * c.d, wk = c.hkv * c.d, cap = c.l;
  const int elem = tprt_dtype_bytes(c.dtype, 1);
  fc_tensor q(c.dtype, {t, wq}), k(c.dtype, {t, wk}), v(c.dtype, {t, wk}), y(c.dtype, {t, wq});
  q.fill(), k.fill(), v.fill(), y.poison();
  tprt_status_t st = tprt_cuda_attention_tc(&q.t, &k.t, &v.t, NULL, &y.t, NULL, c.l, c.d, true, c.scale, s);
  FC_CUDA(cudaDeviceSynchronize());
  const std::string label = c.label();
  if (st) {
    fc_bitwise_row("attention tc decode", label.c_str(), 0, st);
    return;
  }
  for (const auto& sp : splits) {
    const int64_t n = sp.second;
    std::vector<int32_t> past(c.b);
    for (int64_t b = 0; b < c.b; ++b) past[b] = (int32_t)((sp.first + 37 * b) % (c.l - n + 1));  // differ per sequence
    fc_tensor qn(c.dtype, {c.b * n, wq}), kn(c.dtype, {c.b * n, wk}), vn(c.dtype, {c.b * n, wk}), yn(c.dtype, {c.b * n, wq});
    fc_tensor kc(c.dtype, {c.b * cap, wk}), vc(c.dtype, {c.b * cap, wk}), len(TPRT_DTYPE_I32, {c.b});
    kc.poison(), vc.poison(), yn.poison();
    FC_CUDA(cudaMemcpy(len.t.data, past.data(), past.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    for (int64_t b = 0; b < c.b; ++b) {
      const int64_t src = b * c.l, p = past[b];
      fc_tensor* from[3] = {&q, &k, &v};
      fc_tensor* to[3] = {&qn, &kn, &vn};
      const int64_t width[3] = {wq, wk, wk};
      for (int i = 0; i < 3; ++i)
        FC_CUDA(cudaMemcpy((char*)to[i]->t.data + b * n * width[i] * elem,
                           (char*)from[i]->t.data + (src + p) * width[i] * elem, (size_t)(n * width[i] * elem),
                           cudaMemcpyDeviceToDevice));
      if (p > 0) {
        FC_CUDA(cudaMemcpy((char*)kc.t.data + b * cap * wk * elem, (char*)k.t.data + src * wk * elem,
                           (size_t)(p * wk * elem), cudaMemcpyDeviceToDevice));
        FC_CUDA(cudaMemcpy((char*)vc.t.data + b * cap * wk * elem, (char*)v.t.data + src * wk * elem,
                           (size_t)(p * wk * elem), cudaMemcpyDeviceToDevice));
      }
    }
    tprt_kv_cache_t cache = {&kc.t, &vc.t, &len.t};
    st = tprt_cuda_attention_tc(&qn.t, &kn.t, &vn.t, &cache, &yn.t, NULL, n, c.d, true, c.scale, s);
    FC_CUDA(cudaDeviceSynchronize());
    int64_t bad = 0;
    for (int64_t b = 0; b < c.b && !st; ++b)
      bad += fc_diff_rows((char*)y.t.data + (b * c.l + past[b]) * wq * elem, wq, (char*)yn.t.data + b * n * wq * elem,
                          wq, n, wq, elem);
    char what[96];
    snprintf(what, sizeof what, "%s: %lld after %d..", label.c_str(), (long long)n, past[0]);
    fc_bitwise_row("attention tc decode", what, bad, st);
    st = nullptr;
  }
}

/// What the tensor-core kernels take (tprt_cuda_attention_tc_fits: the kernel table sends the rest
/// to the exact kernels) and the errors of their launchers for calls outside it: one row each.
void fc_attn_fits(cudaStream_t s) {
  const int64_t t = 256;
  fc_tensor q(TPRT_DTYPE_BF16, {t, 4 * 64}), kv(TPRT_DTYPE_BF16, {t, 2 * 64}), y(TPRT_DTYPE_BF16, {t, 4 * 64});
  fc_tensor qf(TPRT_DTYPE_F32, {t, 4 * 64}), kvf(TPRT_DTYPE_F32, {t, 2 * 64}), yf(TPRT_DTYPE_F32, {t, 4 * 64});
  fc_tensor q96(TPRT_DTYPE_BF16, {t, 4 * 96}), kv96(TPRT_DTYPE_BF16, {t, 2 * 96}), y96(TPRT_DTYPE_BF16, {t, 4 * 96});
  int64_t qd[2] = {t - 1, 4 * 64}, kd[2] = {t - 1, 2 * 64};
  // Views one element (2 bytes) into the tensors: not 16-byte aligned.
  tprt_tensor_t qm = tprt_tensor_make((char*)q.t.data + 2, TPRT_DTYPE_BF16, 2, qd);
  tprt_tensor_t km = tprt_tensor_make((char*)kv.t.data + 2, TPRT_DTYPE_BF16, 2, kd);
  tprt_tensor_t ym = tprt_tensor_make((char*)y.t.data + 2, TPRT_DTYPE_BF16, 2, qd);
  struct {
    const char* what;
    bool got, want;
  } rows[] = {
      {"bf16 D=64 fits", tprt_cuda_attention_tc_fits(&q.t, &kv.t, &kv.t, NULL, &y.t, 128, 64), true},
      {"f32 does not fit", tprt_cuda_attention_tc_fits(&qf.t, &kvf.t, &kvf.t, NULL, &yf.t, 128, 64), false},
      {"D=96 does not fit", tprt_cuda_attention_tc_fits(&q96.t, &kv96.t, &kv96.t, NULL, &y96.t, 128, 96), false},
      {"misaligned does not fit", tprt_cuda_attention_tc_fits(&qm, &km, &km, NULL, &ym, 255, 64), false},
      {"T % S != 0 does not fit", tprt_cuda_attention_tc_fits(&q.t, &kv.t, &kv.t, NULL, &y.t, 100, 64), false},
  };
  for (const auto& r : rows) {
    bool ok = r.got == r.want;
    ok ? ++g_passed : ++g_failed;
    printf("%-22s %-34s %-5s %10s  %s\n", "attention tc fits", r.what, "-", "-", ok ? "pass" : "FAIL");
  }
  // The launchers refuse what does not fit with a message naming the rule, and validate like the
  // exact kernels.
  auto expect = [&](const char* what, tprt_status_t st, const char* needle) {
    bool ok = st && strstr(tprt_status_message(st), needle);
    ok ? ++g_passed : ++g_failed;
    printf("%-22s %-34s %-5s %10s  %s %s\n", "attention tc error", what, "-", "-", ok ? "pass" : "FAIL",
           st ? tprt_status_message(st) : "(no error)");
    tprt_status_free(st);
  };
  expect("D=96", tprt_cuda_attention_tc(&q96.t, &kv96.t, &kv96.t, NULL, &y96.t, NULL, 128, 96, true, 0.0f, s), "head_dim 64 or 128");
  fc_tensor dq(TPRT_DTYPE_BF16, {t, 4 * 64}), dk(TPRT_DTYPE_BF16, {t, 2 * 64});
  tprt_tensor_t dqm = tprt_tensor_make((char*)dq.t.data + 2, TPRT_DTYPE_BF16, 2, qd);
  tprt_tensor_t dkm = tprt_tensor_make((char*)dk.t.data + 2, TPRT_DTYPE_BF16, 2, kd);
  expect("misaligned grad", tprt_cuda_attention_grad_tc(&qm, &km, &km, &ym, &qm, NULL, &dqm, &dkm, &dkm, 255, 64, true, 0.0f, s),
         "16-byte aligned");
  expect("seq_len 0", tprt_cuda_attention_tc(&q.t, &kv.t, &kv.t, NULL, &y.t, NULL, 0, 64, true, 0.0f, s), "seq_len=0");
}

}  // namespace

void fc_check_attention(cudaStream_t s) {
  fc_attn_fits(s);
  const int bf = TPRT_DTYPE_BF16, f16 = TPRT_DTYPE_F16;
  const fc_attn_case close[] = {
      {1, 128, 4, 2, 64, true, 0.0f, bf},    {2, 200, 4, 4, 128, true, 0.0f, bf}, {3, 77, 8, 2, 64, false, 0.0f, bf},
      {1, 1000, 2, 1, 128, false, 0.0f, bf}, {4, 1, 4, 2, 64, true, 0.0f, bf},    {2, 513, 4, 1, 128, true, 1.0f, bf},
      {1, 300, 4, 2, 64, false, 1.0f, f16},  {2, 256, 2, 2, 128, true, 0.0f, f16}, {1, 2048, 8, 2, 128, true, 0.0f, bf},
  };
  for (const auto& c : close) fc_attn_close(c, s);
  const fc_attn_case inv[] = {
      {3, 300, 8, 4, 128, true, 0.0f, bf},
      {4, 129, 4, 2, 64, true, 1.0f, bf},
      {2, 200, 4, 2, 64, false, 0.0f, f16},
  };
  fc_attn_invariant(inv[0], 1, 257, s);
  fc_attn_invariant(inv[0], 2, 1, s);
  fc_attn_invariant(inv[1], 3, 128, s);
  fc_attn_invariant(inv[2], 1, 0, s);
  // Decoding = prefill, bitwise: one token and chunks of 3 and 130, caches of 0 to 299 tokens;
  // one token per sequence with grouped-query heads runs a CTA per KV head (Params::packed).
  const std::vector<std::pair<int64_t, int64_t>> splits = {{0, 1}, {1, 1}, {127, 1}, {128, 1}, {129, 1},
                                                           {299, 1}, {126, 3}, {200, 3}, {5, 130}};
  fc_attn_decode({3, 300, 8, 2, 64, true, 0.0f, bf}, splits, s);
  fc_attn_decode({2, 300, 4, 4, 128, true, 0.0f, f16}, splits, s);
  fc_attn_decode({2, 300, 8, 2, 128, true, 0.0f, f16}, splits, s);  // one token: a CTA per KV head
  fc_attn_decode({3, 200, 64, 1, 64, true, 0.0f, bf}, splits, s);    // a group of 64
}
