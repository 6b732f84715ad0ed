// Unit tests of tprt_cpu_quantize / tprt_cpu_dequantize: hand-checked bit patterns for every
// format, an independent transcription of the research note's algorithms on random data
// (rowwise and columnwise, padded scale shapes), round-trip error bounds, and argument errors;
// tprt_cpu_amax and tprt_cpu_quantize_with_amax: NaN, zero, inf and negative amaxes, x's own
// amax as the operand, and row shards quantized with the whole tensor's amax.
#include <float.h>

#include "test_cpu_util.h"

static float f_at(const tprt_tensor_t* t, int64_t i) { return (float)tc_get(t, i); }
static uint8_t u8_at(const tprt_tensor_t* t, int64_t i) { return ((const uint8_t*)t->data)[i]; }
static float scalar_f32(const tprt_tensor_t* t) {
  float f;
  memcpy(&f, t->data, 4);
  return f;
}
static int64_t rup(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

TPRT_TEST(fp8_per_tensor_bit_patterns) {
  // amax = 4: E4M3 scale = 448/4 = 112, so 0.5, -1, 2, 4 become 56, -112, 224, 448.
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)2),
              d = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)2, (int64_t)2);
  tc_tensor_t dt = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)2, (int64_t)2), s = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  const float v[4] = {0.5f, -1.0f, 2.0f, 4.0f};
  memcpy(x.t.data, v, sizeof v);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &d.t, &s.t, NULL, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_ROWWISE));
  const uint8_t want[4] = {0x66, 0xEE, 0x76, 0x7E};
  for (int i = 0; i < 4; ++i) TPRT_EXPECT_EQ_BITS(u8_at(&d.t, i), want[i]);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(scalar_f32(&s.t)), tprt_f32_bits(1.0f / 112.0f));
  // Columnwise data is the transpose [K,M], same scale.
  TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &dt.t, &s.t, NULL, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_COLUMNWISE));
  const uint8_t want_t[4] = {0x66, 0x76, 0xEE, 0x7E};
  for (int i = 0; i < 4; ++i) TPRT_EXPECT_EQ_BITS(u8_at(&dt.t, i), want_t[i]);
  // Dequantize multiplies by scale_inv: 56·(1/112) = 0.5 exactly, etc.
  tc_tensor_t back = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)2);
  TPRT_EXPECT_OK(tprt_cpu_dequantize(&dt.t, &s.t, NULL, &back.t, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_COLUMNWISE));
  for (int i = 0; i < 4; ++i) TPRT_EXPECT_NEAR(f_at(&back.t, i), v[i], 0.0, 1e-6);
  // E5M2: scale = 57344/4 = 14336; 0.5 -> 7168 = 1.75·2^12 -> 0x6F.
  tc_tensor_t d5 = tc_make(TPRT_DTYPE_F8E5M2, 2, (int64_t)2, (int64_t)2);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &d5.t, &s.t, NULL, TPRT_QUANT_FP8_E5M2, TPRT_QUANT_ROWWISE));
  TPRT_EXPECT_EQ_BITS(u8_at(&d5.t, 0), 0x6F);
  TPRT_EXPECT_EQ_BITS(u8_at(&d5.t, 3), 0x7B);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(scalar_f32(&s.t)), tprt_f32_bits(1.0f / 14336.0f));
  // amax = 0: scale 1.
  memset(x.t.data, 0, 16);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &d.t, &s.t, NULL, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_ROWWISE));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(scalar_f32(&s.t)), tprt_f32_bits(1.0f));
  // A scale that overflows becomes the input dtype's largest finite value (bf16: 0x7F7F).
  tc_tensor_t xb = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)1, (int64_t)2);
  ((uint16_t*)xb.t.data)[0] = 0x0001;  // the smallest bf16 subnormal, 2^-133
  tc_tensor_t db = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)1, (int64_t)2);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&xb.t, &db.t, &s.t, NULL, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_ROWWISE));
  float bmax = tprt_bf16_to_f32(0x7F7F);
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(scalar_f32(&s.t)), tprt_f32_bits(1.0f / bmax));
  TPRT_EXPECT_EQ_BITS(u8_at(&db.t, 0), tprt_f32_to_e4m3(0x1p-133f * bmax));
  tc_tensor_t* all[] = {&x, &d, &dt, &s, &back, &d5, &xb, &db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

TPRT_TEST(mxfp8_bit_patterns_and_padding) {
  // Rows of 64: block 0 has amax 1 -> e = rceil(1·(1/448)) = 119 (2^-8), elements times 2^8;
  // block 1 has amax 0 -> e = 0.
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)64);
  for (int j = 0; j < 32; ++j) ((float*)x.t.data)[j] = j == 5 ? -1.0f : 0.5f;
  ((float*)x.t.data)[64 + 40] = 448.0f * 4.0f;  // row 1, block 1: amax 1792 -> e = 129 (2^2)
  tc_tensor_t d = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)2, (int64_t)64);
  tc_tensor_t s = tc_make(TPRT_DTYPE_F8E8M0FNU, 2, (int64_t)128, (int64_t)4);
  memset(s.t.data, 0xAB, 512);  // padding must be overwritten with zeros
  TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &d.t, &s.t, NULL, TPRT_QUANT_MXFP8, TPRT_QUANT_ROWWISE));
  TPRT_EXPECT_EQ_BITS(u8_at(&s.t, 0), 119);
  TPRT_EXPECT_EQ_BITS(u8_at(&s.t, 1), 0);
  TPRT_EXPECT_EQ_BITS(u8_at(&s.t, 4), 0);    // row 1 block 0: amax 0
  TPRT_EXPECT_EQ_BITS(u8_at(&s.t, 5), 129);  // row 1 block 1
  int nonzero_pad = 0;
  for (int i = 0; i < 512; ++i)
    if (i != 0 && i != 5) nonzero_pad += u8_at(&s.t, i) != 0;
  TPRT_EXPECT_EQ_I64(nonzero_pad, 0);
  TPRT_EXPECT_EQ_BITS(u8_at(&d.t, 0), 0x70);        // 0.5·256 = 128 = 2^7
  TPRT_EXPECT_EQ_BITS(u8_at(&d.t, 5), 0xF8);        // -256
  TPRT_EXPECT_EQ_BITS(u8_at(&d.t, 64 + 40), 0x7E);  // 1792/4 = 448
  tc_tensor_t back = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)64);
  TPRT_EXPECT_OK(tprt_cpu_dequantize(&d.t, &s.t, NULL, &back.t, TPRT_QUANT_MXFP8, TPRT_QUANT_ROWWISE));
  TPRT_EXPECT(tc_same_bytes(&back.t, &x.t));  // all values were representable
  // Columnwise: blocks of 32 rows, scale [rup(M/32,4), rup(K,128)] = [4,128], data stays [M,K].
  tc_tensor_t xc = tc_make(TPRT_DTYPE_F32, 2, (int64_t)64, (int64_t)3);
  ((float*)xc.t.data)[40 * 3 + 2] = 3.0f;  // block 1, column 2: amax 3 -> rceil(3/448) = 2^-7 -> e 120
  tc_tensor_t dc = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)64, (int64_t)3);
  tc_tensor_t sc = tc_make(TPRT_DTYPE_F8E8M0FNU, 2, (int64_t)4, (int64_t)128);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&xc.t, &dc.t, &sc.t, NULL, TPRT_QUANT_MXFP8, TPRT_QUANT_COLUMNWISE));
  TPRT_EXPECT_EQ_BITS(u8_at(&sc.t, 1 * 128 + 2), 120);
  TPRT_EXPECT_EQ_BITS(u8_at(&dc.t, 40 * 3 + 2), tprt_f32_to_e4m3(3.0f * 128.0f));
  tc_tensor_t* all[] = {&x, &d, &s, &back, &xc, &dc, &sc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

TPRT_TEST(nvfp4_ties_and_layout) {
  // Row 0 holds 2688 (gamax, so S_enc = 2688/2688 = 1 and global_scale = 1); row 1 holds the
  // FP4 ties of the note with block amax 6, so its E4M3 block scale is 1.0 and every element
  // is rounded by E2M1 itself: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4, 6->6.
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)16);
  float* xv = (float*)x.t.data;
  xv[0] = 2688.0f;
  const float ties[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
  for (int j = 0; j < 8; ++j) {
    xv[16 + j] = ties[j];
    xv[24 + j] = -ties[j];
  }
  tc_tensor_t d = tc_make(TPRT_DTYPE_F4E2M1FN, 2, (int64_t)2, (int64_t)16);
  tc_tensor_t s = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)128, (int64_t)4), g = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &d.t, &s.t, &g.t, TPRT_QUANT_NVFP4, TPRT_QUANT_ROWWISE));
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(scalar_f32(&g.t)), tprt_f32_bits(1.0f));
  TPRT_EXPECT_EQ_BITS(u8_at(&s.t, 0), 0x7E);                                 // row 0: 2688·(1/6) = 448
  TPRT_EXPECT_EQ_BITS(u8_at(&s.t, 4), 0x38);                                 // row 1: 6·(1/6) = 1
  const uint8_t row0[8] = {0x07, 0, 0, 0, 0, 0, 0, 0};                       // 2688/448 = 6 -> code 7 in the low nibble
  const uint8_t row1[8] = {0x20, 0x42, 0x64, 0x76, 0xA8, 0xCA, 0xEC, 0xFE};  // element 2j low, 2j+1 high
  for (int i = 0; i < 8; ++i) {
    TPRT_EXPECT_EQ_BITS(u8_at(&d.t, i), row0[i]);
    TPRT_EXPECT_EQ_BITS(u8_at(&d.t, 8 + i), row1[i]);
  }
  tc_tensor_t back = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)16);
  TPRT_EXPECT_OK(tprt_cpu_dequantize(&d.t, &s.t, &g.t, &back.t, TPRT_QUANT_NVFP4, TPRT_QUANT_ROWWISE));
  const float deq[8] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, 6.0f};
  TPRT_EXPECT_EQ_BITS(tprt_f32_bits(f_at(&back.t, 0)), tprt_f32_bits(2688.0f));
  for (int j = 0; j < 8; ++j) {
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(f_at(&back.t, 16 + j)), tprt_f32_bits(deq[j]));
    TPRT_EXPECT_EQ_BITS(tprt_f32_bits(f_at(&back.t, 24 + j)), tprt_f32_bits(-deq[j]));
  }
  // Columnwise: data [K,M] = [16,2] (row k holds column k of x), scale [rup(K,128), rup(M/16,4)]
  // needs M % 16 == 0, so use the transpose of x: xt [16,2].
  tc_tensor_t xt = tc_make(TPRT_DTYPE_F32, 2, (int64_t)16, (int64_t)2);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 2; ++j) ((float*)xt.t.data)[i * 2 + j] = xv[j * 16 + i];
  tc_tensor_t dc = tc_make(TPRT_DTYPE_F4E2M1FN, 2, (int64_t)2, (int64_t)16);
  tc_tensor_t sc = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)128, (int64_t)4);
  TPRT_EXPECT_OK(tprt_cpu_quantize(&xt.t, &dc.t, &sc.t, &g.t, TPRT_QUANT_NVFP4, TPRT_QUANT_COLUMNWISE));
  TPRT_EXPECT(tc_same_bytes(&dc.t, &d.t));  // columnwise of xᵀ is rowwise of x
  TPRT_EXPECT(tc_same_bytes(&sc.t, &s.t));
  tc_tensor_t* all[] = {&x, &d, &s, &g, &back, &xt, &dc, &sc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

// TE forms 1/S_enc in double; the kernel divides in f32. Both round to the same float.
TPRT_TEST(nvfp4_reciprocal_double_equals_float) {
  uint64_t st = 99;
  int64_t bad = 0;
  for (int i = 0; i < 2000000; ++i) {
    float s = tprt_f32_from_bits((uint32_t)(tc_next(&st) % 0x7F800000u));
    if (s == 0.0f) continue;
    bad += tprt_f32_bits((float)(1.0 / (double)s)) != tprt_f32_bits(1.0f / s);
  }
  TPRT_EXPECT_EQ_I64(bad, 0);
}

// The research note's algorithms, transcribed independently (element loops in natural order,
// double for 1/S_enc as TE's kernel does), on random data with large dynamic range.
static void note_quantize(const tprt_tensor_t* x, int format, int axis, uint8_t* data, uint8_t* scale, int64_t s1,
                          float* global) {
  int64_t m = x->dims[0], k = x->dims[1];
  int col = axis == TPRT_QUANT_COLUMNWISE;
  if (format == TPRT_QUANT_MXFP8) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) {
        int64_t bi = col ? i / 32 : i, bj = col ? j : j / 32;
        float amax = 0.0f;
        for (int64_t e = 0; e < 32; ++e) {
          float v = fabsf(f_at(x, col ? (bi * 32 + e) * k + j : i * k + bj * 32 + e));
          amax = fmaxf(amax, v);
        }
        uint8_t se = tprt_e8m0_rceil(amax * (float)(1.0 / 448.0));
        scale[bi * s1 + bj] = se;
        data[i * k + j] = tprt_f32_to_e4m3(f_at(x, i * k + j) * tprt_e8m0_rcp(se));
      }
    return;
  }
  float gamax = 0.0f;
  for (int64_t i = 0; i < m * k; ++i) gamax = fmaxf(gamax, fabsf(f_at(x, i)));
  float S_enc = 448.f * 6.f / gamax;
  S_enc = fminf(S_enc, FLT_MAX);
  if (gamax == 0.f || S_enc == 0.f) S_enc = 1.f;
  float S_dec = (float)(1.0 / (double)S_enc);
  *global = S_dec;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      int64_t b = col ? i / 16 : j / 16;
      float bamax = 0.0f;
      for (int64_t e = 0; e < 16; ++e)
        bamax = fmaxf(bamax, fabsf(f_at(x, col ? (b * 16 + e) * k + j : i * k + b * 16 + e)));
      float sdec = bamax * (S_enc * (1.0f / 6.0f));
      uint8_t sf = tprt_f32_to_e4m3(fminf(sdec, FLT_MAX));
      float sfd = tprt_e4m3_to_f32(sf);
      float senc = sfd == 0.f ? 0.f : fminf(1.0f / (sfd * S_dec), FLT_MAX);
      int64_t srow = col ? j : i, e = col ? j * m + i : i * k + j;
      scale[srow * s1 + b] = sf;
      uint8_t q = tprt_f32_to_e2m1(f_at(x, i * k + j) * senc);
      data[e / 2] = (uint8_t)(e % 2 ? (data[e / 2] & 0x0F) | (q << 4) : (data[e / 2] & 0xF0) | q);
    }
}

TPRT_TEST(block_formats_match_note_transcription) {
  const int64_t shapes[][2] = {{32, 64}, {64, 32}, {96, 160}, {160, 96}};
  for (int dt = 0; dt < 3; ++dt)
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
      for (int format = TPRT_QUANT_MXFP8; format <= TPRT_QUANT_NVFP4; ++format)
        for (int axis = 0; axis < 2; ++axis) {
          const int dtypes[3] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F16, TPRT_DTYPE_F32};
          int64_t m = shapes[sh][0], k = shapes[sh][1];
          tc_tensor_t x = tc_make(dtypes[dt], 2, m, k);
          uint64_t st = 1000 + sh;
          for (int64_t i = 0; i < m * k; ++i) {
            // Magnitudes over 2^-12 .. 2^12 (f16 saturates above 65504), with a zero block.
            double mag = ldexp(tc_uniform(&st, 0.5, 1.0), (int)(tc_next(&st) % 25) - 12);
            tc_set(&x.t, i, (i / 16) % 7 == 3 ? 0.0f : (float)(tc_next(&st) & 1 ? mag : -mag));
          }
          bool nv = format == TPRT_QUANT_NVFP4, tr = nv && axis;
          int64_t s0, s1;
          if (nv) {
            s0 = axis ? rup(k, 128) : rup(m, 128);
            s1 = rup((axis ? m : k) / 16, 4);
          } else {
            s0 = axis ? rup(m / 32, 4) : rup(m, 128);
            s1 = axis ? rup(k, 128) : rup(k / 32, 4);
          }
          tc_tensor_t d = tc_make(nv ? TPRT_DTYPE_F4E2M1FN : TPRT_DTYPE_F8E4M3FN, 2, tr ? k : m, tr ? m : k);
          tc_tensor_t s = tc_make(nv ? TPRT_DTYPE_F8E4M3FN : TPRT_DTYPE_F8E8M0FNU, 2, s0, s1);
          tc_tensor_t g = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
          TPRT_EXPECT_OK(tprt_cpu_quantize(&x.t, &d.t, &s.t, nv ? &g.t : NULL, format, axis));
          size_t dbytes = tprt_tensor_bytes(&d.t), sbytes = tprt_tensor_bytes(&s.t);
          uint8_t* rd = calloc(1, dbytes);
          uint8_t* rs = calloc(1, sbytes);
          float rg = 0.0f;
          note_quantize(&x.t, format, axis, rd, rs, s1, &rg);
          bool ok = memcmp(rd, d.t.data, dbytes) == 0 && memcmp(rs, s.t.data, sbytes) == 0 &&
                    (!nv || tprt_f32_bits(rg) == tprt_f32_bits(scalar_f32(&g.t)));
          if (!ok)
            TPRT__FAIL("%s %s %s [%lld,%lld] differs from the note", format == TPRT_QUANT_MXFP8 ? "mxfp8" : "nvfp4",
                       axis ? "columnwise" : "rowwise", tprt_dtype_name(dtypes[dt]), (long long)m, (long long)k);
          // Round trip: each element within half a quantum of its block (E4M3: 2^-4 relative or
          // the subnormal step; E2M1 with its E4M3 block scale: 1/4 relative of the block amax).
          tc_tensor_t back = tc_make(TPRT_DTYPE_F32, 2, m, k);
          TPRT_EXPECT_OK(tprt_cpu_dequantize(&d.t, &s.t, nv ? &g.t : NULL, &back.t, format, axis));
          int64_t bad = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < k; ++j) {
              int bs = nv ? 16 : 32;
              double amax = 0.0;
              for (int e = 0; e < bs; ++e)
                amax = fmax(amax, fabs(tc_get(&x.t, axis ? ((i / bs) * bs + e) * k + j : i * k + (j / bs) * bs + e)));
              double v = tc_get(&x.t, i * k + j), err = fabs(tc_get(&back.t, i * k + j) - v);
              double tol = nv ? 0.25 * amax * 1.07 : fmax(fabs(v) * 0x1p-4, amax * 0x1p-16);
              if (err > tol && bad++ < 3)
                TPRT__FAIL("round trip [%lld,%lld]: %.9g -> %.9g (block amax %.9g)", (long long)i, (long long)j, v,
                           tc_get(&back.t, i * k + j), amax);
            }
          free(rd);
          free(rs);
          tc_tensor_t* all[] = {&x, &d, &s, &g, &back};
          for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
        }
}

TPRT_TEST(quant_invalid_arguments) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)32, (int64_t)48);
  tc_tensor_t d = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)32, (int64_t)48);
  tc_tensor_t s = tc_make(TPRT_DTYPE_F8E8M0FNU, 2, (int64_t)128, (int64_t)2);
  tc_tensor_t f = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x.t, &d.t, &s.t, NULL, TPRT_QUANT_MXFP8, TPRT_QUANT_ROWWISE),
                     TPRT_STATUS_INVALID_ARGUMENT, "quantize: mxfp8 rowwise blocks of 32 need K=48 divisible by 32");
  tc_tensor_t x64 = tc_make(TPRT_DTYPE_BF16, 2, (int64_t)32, (int64_t)64);
  tc_tensor_t d64 = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)32, (int64_t)64);
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d64.t, &s.t, NULL, TPRT_QUANT_MXFP8, TPRT_QUANT_ROWWISE),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "quantize: mxfp8 rowwise scale for x [32,64] must be [128,4] f8E8M0FNU; got [128,2] f8E8M0FNU");
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d.t, &f.t, NULL, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_ROWWISE),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "quantize: fp8_e4m3 rowwise data for x [32,64] must be [32,64] f8E4M3FN; got [32,48] f8E4M3FN");
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d64.t, &f.t, NULL, TPRT_QUANT_FP8_E5M2, TPRT_QUANT_ROWWISE),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "quantize: fp8_e5m2 rowwise data for x [32,64] must be [32,64] f8E5M2; got [32,64] f8E4M3FN");
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d64.t, &f.t, &f.t, TPRT_QUANT_FP8_E4M3, TPRT_QUANT_ROWWISE),
                     TPRT_STATUS_INVALID_ARGUMENT, "quantize: only nvfp4 has a global_scale; fp8_e4m3 does not");
  tc_tensor_t d4 = tc_make(TPRT_DTYPE_F4E2M1FN, 2, (int64_t)32, (int64_t)64);
  tc_tensor_t s4 = tc_make(TPRT_DTYPE_F8E4M3FN, 2, (int64_t)128, (int64_t)4);
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d4.t, &s4.t, NULL, TPRT_QUANT_NVFP4, TPRT_QUANT_ROWWISE),
                     TPRT_STATUS_INVALID_ARGUMENT, "quantize: nvfp4 needs a global_scale [1] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d4.t, &s4.t, &f.t, TPRT_QUANT_NVFP4, TPRT_QUANT_COLUMNWISE),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "quantize: nvfp4 columnwise data for x [32,64] must be [64,32] f4E2M1FN; got [32,64] f4E2M1FN");
  TPRT_EXPECT_STATUS(tprt_cpu_quantize(&x64.t, &d4.t, &s4.t, &f.t, 7, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "quantize: format=7 is not 0 (fp8_e4m3), 1 (fp8_e5m2), 2 (mxfp8) or 3 (nvfp4)");
  TPRT_EXPECT_STATUS(tprt_cpu_dequantize(&d4.t, &s4.t, &f.t, &x64.t, TPRT_QUANT_NVFP4, 2), TPRT_STATUS_INVALID_ARGUMENT,
                     "dequantize: axis=2 is not 0 (rowwise) or 1 (columnwise)");
  TPRT_EXPECT_STATUS(tprt_cpu_dequantize(&d4.t, &s4.t, &f.t, &d4.t, TPRT_QUANT_NVFP4, 0), TPRT_STATUS_INVALID_ARGUMENT,
                     "dequantize: x must be a rank-2 bf16, f16 or f32 tensor; got [32,64] f4E2M1FN");
  tc_tensor_t* all[] = {&x, &d, &s, &f, &x64, &d64, &d4, &s4};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

//===----------------------------------------------------------------------===//
// tprt_cpu_amax and tprt_cpu_quantize_with_amax (a shard quantized with the whole tensor's amax)
//===----------------------------------------------------------------------===//

// The outputs of one quantization of x[m,k]: data, scale and (nvfp4) global scale.
typedef struct {
  tc_tensor_t d, s, g;
  bool nv;
} q_out_t;

static q_out_t q_make(int format, int axis, int64_t m, int64_t k) {
  q_out_t o = {.nv = format == TPRT_QUANT_NVFP4};
  bool tr = axis == TPRT_QUANT_COLUMNWISE;  // fp8 and nvfp4 store columnwise data transposed
  int dt = o.nv ? TPRT_DTYPE_F4E2M1FN : format == TPRT_QUANT_FP8_E4M3 ? TPRT_DTYPE_F8E4M3FN : TPRT_DTYPE_F8E5M2;
  o.d = tc_make(dt, 2, tr ? k : m, tr ? m : k);
  if (o.nv)
    o.s = tc_make(TPRT_DTYPE_F8E4M3FN, 2, rup(tr ? k : m, 128), rup((tr ? m : k) / 16, 4));
  else
    o.s = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  o.g = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  return o;
}

static void q_free(q_out_t* o) {
  tc_free(&o->d);
  tc_free(&o->s);
  tc_free(&o->g);
}

// Quantizes |x| into |o|, with |amax| (NULL: x's own).
static tprt_status_t q_run(const tprt_tensor_t* x, const tprt_tensor_t* amax, q_out_t* o, int format, int axis) {
  return tprt_cpu_quantize_with_amax(x, amax, &o->d.t, &o->s.t, o->nv ? &o->g.t : NULL, format, axis);
}

static bool q_same(const q_out_t* a, const q_out_t* b) {
  return tc_same_bytes(&a->d.t, &b->d.t) && tc_same_bytes(&a->s.t, &b->s.t) &&
         (!a->nv || tc_same_bytes(&a->g.t, &b->g.t));
}

static const char* q_name(int format) {
  return format == TPRT_QUANT_FP8_E4M3 ? "fp8_e4m3" : format == TPRT_QUANT_FP8_E5M2 ? "fp8_e5m2" : "nvfp4";
}

TPRT_TEST(amax_skips_nan_and_counts_inf) {
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, (int64_t)2, (int64_t)3), a = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  const float v[6] = {1.0f, -5.0f, NAN, 2.0f, -0.0f, 3.0f};
  memcpy(x.t.data, v, sizeof v);
  TPRT_EXPECT_OK(tprt_cpu_amax(&x.t, &a.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&a.t, 0), tprt_f32_bits(5.0f));  // the NaN is skipped, the sign dropped
  ((float*)x.t.data)[4] = -INFINITY;
  TPRT_EXPECT_OK(tprt_cpu_amax(&x.t, &a.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&a.t, 0), tprt_f32_bits(INFINITY));
  for (int i = 0; i < 6; ++i) ((float*)x.t.data)[i] = i % 2 ? NAN : -0.0f;  // nothing but NaN and -0: +0
  TPRT_EXPECT_OK(tprt_cpu_amax(&x.t, &a.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&a.t, 0), 0u);
  // Any rank and float dtype; an empty tensor's amax is +0.
  tc_tensor_t b = tc_make(TPRT_DTYPE_BF16, 3, (int64_t)2, (int64_t)2, (int64_t)2),
              e = tc_make(TPRT_DTYPE_F16, 2, (int64_t)0, (int64_t)4);
  for (int i = 0; i < 8; ++i) tc_set(&b.t, i, (float)(i - 6) * 0.5f);
  TPRT_EXPECT_OK(tprt_cpu_amax(&b.t, &a.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&a.t, 0), tprt_f32_bits(3.0f));
  ((float*)a.t.data)[0] = 7.0f;
  TPRT_EXPECT_OK(tprt_cpu_amax(&e.t, &a.t));
  TPRT_EXPECT_EQ_BITS(tc_bits(&a.t, 0), 0u);
  tc_tensor_t a2 = tc_make(TPRT_DTYPE_F32, 1, (int64_t)2), xi = tc_make(TPRT_DTYPE_I32, 1, (int64_t)4);
  TPRT_EXPECT_STATUS(tprt_cpu_amax(&x.t, &a2.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "amax: amax must be [1] f32; got [2] f32");
  TPRT_EXPECT_STATUS(tprt_cpu_amax(&xi.t, &a.t), TPRT_STATUS_INVALID_ARGUMENT,
                     "amax: x must be a rank >= 1 bf16, f16 or f32 tensor; got [4] i32");
  tc_tensor_t* all[] = {&x, &a, &b, &e, &a2, &xi};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}

// x's own amax as the operand quantizes as x alone does, for every input the amax can see: NaN
// elements (skipped by both), an all-zero tensor (amax 0: scale 1), infinities (amax inf).
TPRT_TEST(quantize_with_own_amax_is_quantize) {
  const int dtypes[2] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F32};
  const int64_t m = 48, k = 64;
  for (int dt = 0; dt < 2; ++dt)
    for (int kind = 0; kind < 4; ++kind)
      for (int format = TPRT_QUANT_FP8_E4M3; format <= TPRT_QUANT_NVFP4; ++format) {
        if (format == TPRT_QUANT_MXFP8) continue;
        for (int axis = 0; axis < 2; ++axis) {
          tc_tensor_t x = tc_make(dtypes[dt], 2, m, k), a = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
          tc_fill(&x.t, 77 + (uint64_t)kind, -3.0, 3.0);
          if (kind == 1)  // NaN elements, one of them where the amax would otherwise be
            for (int64_t i = 0; i < m * k; i += 37) tc_set(&x.t, i, NAN);
          if (kind == 2) memset(x.t.data, 0, tprt_tensor_bytes(&x.t));
          if (kind == 3) {
            tc_set(&x.t, 5, INFINITY);
            tc_set(&x.t, 700, -INFINITY);
          }
          q_out_t own = q_make(format, axis, m, k), given = q_make(format, axis, m, k);
          TPRT_EXPECT_OK(q_run(&x.t, NULL, &own, format, axis));
          TPRT_EXPECT_OK(tprt_cpu_amax(&x.t, &a.t));
          TPRT_EXPECT_OK(q_run(&x.t, &a.t, &given, format, axis));
          if (!q_same(&own, &given))
            TPRT__FAIL("%s %s %s input %d: quantize(x, amax(x)) differs from quantize(x)", q_name(format),
                       axis ? "columnwise" : "rowwise", tprt_dtype_name(dtypes[dt]), kind);
          if (kind == 2 && !own.nv) TPRT_EXPECT_EQ_BITS(tc_bits(&own.s.t, 0), tprt_f32_bits(1.0f));
          q_free(&own);
          q_free(&given);
          tc_free(&x);
          tc_free(&a);
        }
      }
}

// Operands the amax op never makes are read as it would have made them: NaN as 0 (a NaN element
// counts for nothing), a negative amax as its magnitude; 0 and inf both give scale 1 (fp8) and
// S_enc = 1 (nvfp4), as for a tensor whose own amax is 0 or inf.
TPRT_TEST(quantize_amax_operand_edge_cases) {
  const int64_t m = 32, k = 32;
  tc_tensor_t x = tc_make(TPRT_DTYPE_F32, 2, m, k), a = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  tc_fill(&x.t, 5, -2.0, 2.0);
  const float edges[4] = {0.0f, NAN, INFINITY, -0.0f};
  for (int format = TPRT_QUANT_FP8_E4M3; format <= TPRT_QUANT_NVFP4; ++format) {
    if (format == TPRT_QUANT_MXFP8) continue;
    q_out_t ref = q_make(format, 0, m, k), got = q_make(format, 0, m, k);
    ((float*)a.t.data)[0] = 0.0f;
    TPRT_EXPECT_OK(q_run(&x.t, &a.t, &ref, format, 0));
    if (ref.nv)
      TPRT_EXPECT_EQ_BITS(tc_bits(&ref.g.t, 0), tprt_f32_bits(1.0f));
    else
      TPRT_EXPECT_EQ_BITS(tc_bits(&ref.s.t, 0), tprt_f32_bits(1.0f));
    for (int e = 1; e < 4; ++e) {
      ((float*)a.t.data)[0] = edges[e];
      TPRT_EXPECT_OK(q_run(&x.t, &a.t, &got, format, 0));
      if (!q_same(&ref, &got)) TPRT__FAIL("%s: amax %g quantizes unlike amax 0", q_name(format), (double)edges[e]);
    }
    q_out_t pos = q_make(format, 0, m, k);
    ((float*)a.t.data)[0] = 1.5f;
    TPRT_EXPECT_OK(q_run(&x.t, &a.t, &pos, format, 0));
    ((float*)a.t.data)[0] = -1.5f;
    TPRT_EXPECT_OK(q_run(&x.t, &a.t, &got, format, 0));
    if (!q_same(&pos, &got)) TPRT__FAIL("%s: amax -1.5 quantizes unlike amax 1.5", q_name(format));
    q_free(&ref);
    q_free(&got);
    q_free(&pos);
  }
  tc_free(&x);
  tc_free(&a);
}

// The GTP claim at the kernel: row shards quantized with the whole tensor's amax are the whole
// tensor's quantization, row for row (data, NVFP4 block scales; the per-tensor scales equal), and
// with its own amax the first is not (rows whose magnitudes grow give each shard its own amax).
TPRT_TEST(shards_quantized_with_whole_amax_are_the_whole) {
  const int64_t m = 256, k = 64, half = m / 2;
  tc_tensor_t x = tc_make(TPRT_DTYPE_BF16, 2, m, k), a = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1);
  uint64_t st = 99;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j)
      tc_set(&x.t, i * k + j, (float)(tc_uniform(&st, -1.0, 1.0) * (1.0 + 3.0 * (double)i / m)));
  TPRT_EXPECT_OK(tprt_cpu_amax(&x.t, &a.t));
  for (int format = TPRT_QUANT_FP8_E4M3; format <= TPRT_QUANT_NVFP4; ++format) {
    if (format == TPRT_QUANT_MXFP8) continue;
    q_out_t whole = q_make(format, 0, m, k);
    TPRT_EXPECT_OK(q_run(&x.t, NULL, &whole, format, 0));
    size_t dbytes = tprt_tensor_bytes(&whole.d.t) / 2, sbytes = whole.nv ? tprt_tensor_bytes(&whole.s.t) / 2 : 4;
    for (int r = 0; r < 2; ++r) {
      int64_t dims[2] = {half, k};
      tprt_tensor_t shard =
          tprt_tensor_make((char*)x.t.data + (size_t)r * tprt_tensor_bytes(&x.t) / 2, x.t.dtype, 2, dims);
      q_out_t with = q_make(format, 0, half, k), own = q_make(format, 0, half, k);
      TPRT_EXPECT_OK(q_run(&shard, &a.t, &with, format, 0));
      TPRT_EXPECT_OK(q_run(&shard, NULL, &own, format, 0));
      bool same = memcmp(with.d.t.data, (char*)whole.d.t.data + (size_t)r * dbytes, dbytes) == 0 &&
                  memcmp(with.s.t.data, (char*)whole.s.t.data + (whole.nv ? (size_t)r * sbytes : 0), sbytes) == 0 &&
                  (!whole.nv || tc_same_bytes(&with.g.t, &whole.g.t));
      if (!same)
        TPRT__FAIL("%s: shard %d quantized with the whole amax differs from the whole's rows", q_name(format), r);
      // Shard 1 holds the whole tensor's amax; shard 0's own amax is smaller.
      if (r == 0 && q_same(&with, &own))
        TPRT__FAIL("%s: shard 0's own amax gives the whole's bits (a weak test)", q_name(format));
      q_free(&with);
      q_free(&own);
    }
    q_free(&whole);
  }
  // MXFP8 takes no amax; the operand is one f32.
  tc_tensor_t d = tc_make(TPRT_DTYPE_F8E4M3FN, 2, m, k), s = tc_make(TPRT_DTYPE_F8E8M0FNU, 2, m, (int64_t)4);
  TPRT_EXPECT_STATUS(tprt_cpu_quantize_with_amax(&x.t, &a.t, &d.t, &s.t, NULL, TPRT_QUANT_MXFP8, 0),
                     TPRT_STATUS_INVALID_ARGUMENT,
                     "quantize: mxfp8 scales every block by its own amax and takes no amax operand");
  tc_tensor_t f = tc_make(TPRT_DTYPE_F32, 1, (int64_t)1), b1 = tc_make(TPRT_DTYPE_BF16, 1, (int64_t)1);
  TPRT_EXPECT_STATUS(tprt_cpu_quantize_with_amax(&x.t, &b1.t, &d.t, &f.t, NULL, TPRT_QUANT_FP8_E4M3, 0),
                     TPRT_STATUS_INVALID_ARGUMENT, "quantize: amax must be a rank-1 f32 tensor; got [1] bf16");
  tc_tensor_t* all[] = {&x, &a, &d, &s, &f, &b1};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tc_free(all[i]);
}
