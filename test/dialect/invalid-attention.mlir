// RUN: tpc-opt %s --split-input-file --verify-diagnostics

/// The rules of tp.rope, tp.attention and tp.attention_grad (dialect/tpc_verify_attention.c);
/// tp.attention_grad shares tp.attention's rule ids.

/// rope.rank: x is a [T,H*D] matrix; flatten batch and sequence first.
func.func @rope_rank3(%x: tensor<2x8x64xbf16>, %cos: tensor<8x16xbf16>, %sin: tensor<8x16xbf16>) -> tensor<2x8x64xbf16> {
  // expected-error@+1 {{'tp.rope' op violates rule rope.rank: expects x[T,H*D], cos[T,D], sin[T,D] and y of x's shape; got x [2,8,64], cos [8,16], sin [8,16], y [2,8,64]}}
  %y = "tp.rope"(%x, %cos, %sin) : (tensor<2x8x64xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<2x8x64xbf16>
  return %y : tensor<2x8x64xbf16>
}

// -----

/// rope.dtype: the cos and sin tables are float (bf16, f16 or f32).
func.func @rope_integer_tables(%x: tensor<16x64xbf16>, %cos: tensor<16x16xi32>, %sin: tensor<16x16xi32>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.rope' op violates rule rope.dtype: x and y must share one bf16, f16 or f32 element type, and cos and sin one; got x tensor<16x64xbf16>, y tensor<16x64xbf16>, cos tensor<16x16xi32>, sin tensor<16x16xi32>}}
  %y = "tp.rope"(%x, %cos, %sin) : (tensor<16x64xbf16>, tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// rope.table: a table width D=24 does not split x's 64 columns into heads.
func.func @rope_d_not_dividing_width(%x: tensor<16x64xbf16>, %cos: tensor<16x24xbf16>, %sin: tensor<16x24xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.rope' op violates rule rope.table: cos and sin must be [T,D] with T=16 (x's rows) and an even D >= 2 dividing x's width 64; got cos [16,24], sin [16,24]}}
  %y = "tp.rope"(%x, %cos, %sin) : (tensor<16x64xbf16>, tensor<16x24xbf16>, tensor<16x24xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// rope.table: rotate_half pairs the two halves of a head, so D must be even.
func.func @rope_odd_d(%x: tensor<16x63xbf16>, %cos: tensor<16x7xbf16>, %sin: tensor<16x7xbf16>) -> tensor<16x63xbf16> {
  // expected-error@+1 {{'tp.rope' op violates rule rope.table: cos and sin must be [T,D] with T=16 (x's rows) and an even D >= 2 dividing x's width 63; got cos [16,7], sin [16,7]}}
  %y = "tp.rope"(%x, %cos, %sin) : (tensor<16x63xbf16>, tensor<16x7xbf16>, tensor<16x7xbf16>) -> tensor<16x63xbf16>
  return %y : tensor<16x63xbf16>
}

// -----

/// rope.table: the tables hold one row per token of x.
func.func @rope_table_rows(%x: tensor<16x64xbf16>, %cos: tensor<8x16xbf16>, %sin: tensor<8x16xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.rope' op violates rule rope.table: cos and sin must be [T,D] with T=16 (x's rows) and an even D >= 2 dividing x's width 64; got cos [8,16], sin [8,16]}}
  %y = "tp.rope"(%x, %cos, %sin) : (tensor<16x64xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.rank: k and v are [T,Hkv*D] matrices, not [T,Hkv,D].
func.func @attention_rank3(%q: tensor<16x64xbf16>, %k: tensor<16x2x16xbf16>, %v: tensor<16x2x16xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.rank: q, k, v and y must be rank 2 ([T,H*D]); got k tensor<16x2x16xbf16>}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x64xbf16>, tensor<16x2x16xbf16>, tensor<16x2x16xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.dtype: q, k and v share one element type.
func.func @attention_mixed_dtypes(%q: tensor<16x64xf32>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x64xf32> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.dtype: q, k, v and y must share one bf16, f16 or f32 element type; got q tensor<16x64xf32>, k tensor<16x32xbf16>}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x64xf32>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

/// attention.dtype: attention is computed on float tensors only.
func.func @attention_integer(%q: tensor<16x64xi32>, %k: tensor<16x32xi32>, %v: tensor<16x32xi32>) -> tensor<16x64xi32> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.dtype: q, k, v and y must share one bf16, f16 or f32 element type; got q tensor<16x64xi32>}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x64xi32>, tensor<16x32xi32>, tensor<16x32xi32>) -> tensor<16x64xi32>
  return %y : tensor<16x64xi32>
}

// -----

/// attention.seq-len: T=16 tokens are not whole sequences of 6.
func.func @attention_seq_len_not_dividing(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.seq-len: seq_len=6 must be >= 1 and divide the T=16 rows of q [16,64]}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 6 : i64, head_dim = 16 : i64} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.seq-len: a sequence has at least one token.
func.func @attention_seq_len_zero(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.seq-len: seq_len=0 must be >= 1 and divide the T=16 rows of q [16,64]}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 0 : i64, head_dim = 16 : i64} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.head-dim: head_dim=24 does not divide q's 64 columns.
func.func @attention_head_dim(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.head-dim: head_dim=24 must be >= 1 and divide the widths of q [16,64] and k [16,32]}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 24 : i64} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.heads: 3 query heads do not split into groups over 2 key/value heads.
func.func @attention_heads(%q: tensor<16x48xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x48xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.heads: with head_dim=16, q [16,48] has Hq=3 query heads and k [16,32] Hkv=2 key/value heads; Hq must be a multiple of Hkv >= 1}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x48xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x48xbf16>
  return %y : tensor<16x48xbf16>
}

// -----

/// attention.heads: k with no columns has no key/value head.
func.func @attention_no_kv_heads(%q: tensor<16x64xbf16>, %k: tensor<16x0xbf16>, %v: tensor<16x0xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.heads: with head_dim=16, q [16,64] has Hq=4 query heads and k [16,0] Hkv=0 key/value heads; Hq must be a multiple of Hkv >= 1}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x64xbf16>, tensor<16x0xbf16>, tensor<16x0xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.shapes: k and v have one row per token of q.
func.func @attention_kv_rows(%q: tensor<16x64xbf16>, %k: tensor<8x32xbf16>, %v: tensor<8x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.shapes: k must be [T,Hkv*D] with q's T=16 rows; got q [16,64], k [8,32]}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x64xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.scale: a negative scale would invert the softmax.
func.func @attention_negative_scale(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.scale: scale=-1 must be finite and >= 0 (0 means 1/sqrt(head_dim))}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64, scale = -1.0 : f32} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.scale: the scale is finite.
func.func @attention_infinite_scale(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.scale: scale=inf must be finite and >= 0 (0 means 1/sqrt(head_dim))}}
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64, scale = 0x7F800000 : f32} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// attention.heads on tp.attention_grad, which shares tp.attention's rules.
func.func @attention_grad_heads(%q: tensor<16x48xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>, %y: tensor<16x48xbf16>, %dy: tensor<16x48xbf16>) -> (tensor<16x48xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) {
  // expected-error@+1 {{'tp.attention_grad' op violates rule attention.heads: with head_dim=16, q [16,48] has Hq=3 query heads and k [16,32] Hkv=2 key/value heads; Hq must be a multiple of Hkv >= 1}}
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %v, %y, %dy) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x48xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<16x48xbf16>, tensor<16x48xbf16>) -> (tensor<16x48xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>)
  return %dq, %dk, %dv : tensor<16x48xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>
}

// -----

/// attention.dtype on tp.attention_grad: k, v, dk and dv have q's element type.
func.func @attention_grad_mixed(%q: tensor<16x64xbf16>, %k: tensor<16x32xf16>, %v: tensor<16x32xf16>, %y: tensor<16x64xbf16>, %dy: tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<16x32xf16>, tensor<16x32xf16>) {
  // expected-error@+1 {{'tp.attention_grad' op violates rule attention.dtype: q, k, v, y, dy, dq, dk and dv must share one bf16, f16 or f32 element type; got q tensor<16x64xbf16>, k tensor<16x32xf16>}}
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %v, %y, %dy) {seq_len = 8 : i64, head_dim = 16 : i64} : (tensor<16x64xbf16>, tensor<16x32xf16>, tensor<16x32xf16>, tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<16x32xf16>, tensor<16x32xf16>)
  return %dq, %dk, %dv : tensor<16x64xbf16>, tensor<16x32xf16>, tensor<16x32xf16>
}

// -----

/// attention.shapes on tp.attention_grad: k has q's T rows.
func.func @attention_grad_kv_rows(%q: tensor<16x64xbf16>, %k: tensor<32x32xbf16>, %v: tensor<32x32xbf16>, %y: tensor<16x64xbf16>, %dy: tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>) {
  // expected-error@+1 {{'tp.attention_grad' op violates rule attention.shapes: k must be [T,Hkv*D] with q's T=16 rows; got q [16,64], k [32,32]}}
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %v, %y, %dy) {seq_len = 16 : i64, head_dim = 16 : i64, causal = false} : (tensor<16x64xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>)
  return %dq, %dk, %dv : tensor<16x64xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>
}

// -----

/// attention.scale on tp.attention_grad: NaN is not a scale.
func.func @attention_grad_nan_scale(%q: tensor<16x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x64xf32>, %y: tensor<16x64xf32>, %dy: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  // expected-error@+1 {{'tp.attention_grad' op violates rule attention.scale: scale=nan must be finite and >= 0 (0 means 1/sqrt(head_dim))}}
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %v, %y, %dy) {seq_len = 8 : i64, head_dim = 16 : i64, scale = 0x7FC00000 : f32} : (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>)
  return %dq, %dk, %dv : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

/// attention.cache: the caches hold whole sequences, C rows each: 15 rows do not split over the 2
/// sequences of q (2 rows, seq_len 1).
func.func @kvcache_rows(%q: tensor<2x64xbf16>, %k: tensor<2x32xbf16>, %v: tensor<2x32xbf16>,
                        %kc: tensor<15x32xbf16>, %vc: tensor<15x32xbf16>, %len: tensor<2xi32>) -> tensor<2x64xbf16> {
  // expected-error@+1 {{'tp.attention_kvcache' op violates rule attention.cache: k_cache and v_cache must be [B*C,Hkv*D] of k's type with B=2 sequences (q's 2 rows / seq_len) and C >= 1 rows each, and k's width 32; got k_cache tensor<15x32xbf16>, v_cache tensor<15x32xbf16>}}
  %y = "tp.attention_kvcache"(%q, %k, %v, %kc, %vc, %len) {seq_len = 1 : i64, head_dim = 16 : i64}
      : (tensor<2x64xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<15x32xbf16>, tensor<15x32xbf16>,
         tensor<2xi32>) -> tensor<2x64xbf16>
  return %y : tensor<2x64xbf16>
}

// -----

/// attention.cache: the caches have k's element type and width.
func.func @kvcache_dtype(%q: tensor<2x64xbf16>, %k: tensor<2x32xbf16>, %v: tensor<2x32xbf16>,
                         %kc: tensor<16x32xf32>, %vc: tensor<16x32xf32>, %len: tensor<2xi32>) -> tensor<2x64xbf16> {
  // expected-error@+1 {{'tp.attention_kvcache' op violates rule attention.cache: k_cache and v_cache must be [B*C,Hkv*D] of k's type with B=2 sequences (q's 2 rows / seq_len) and C >= 1 rows each, and k's width 32; got k_cache tensor<16x32xf32>, v_cache tensor<16x32xf32>}}
  %y = "tp.attention_kvcache"(%q, %k, %v, %kc, %vc, %len) {seq_len = 1 : i64, head_dim = 16 : i64}
      : (tensor<2x64xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<16x32xf32>, tensor<16x32xf32>,
         tensor<2xi32>) -> tensor<2x64xbf16>
  return %y : tensor<2x64xbf16>
}

// -----

/// attention.cache: cache_len holds one i32 count per sequence.
func.func @kvcache_len(%q: tensor<4x64xbf16>, %k: tensor<4x32xbf16>, %v: tensor<4x32xbf16>,
                       %kc: tensor<16x32xbf16>, %vc: tensor<16x32xbf16>, %len: tensor<2xi64>) -> tensor<4x64xbf16> {
  // expected-error@+1 {{'tp.attention_kvcache' op violates rule attention.cache: cache_len must be tensor<2xi32>: the cached tokens of each of the B=2 sequences; got tensor<2xi64>}}
  %y = "tp.attention_kvcache"(%q, %k, %v, %kc, %vc, %len) {seq_len = 2 : i64, head_dim = 16 : i64}
      : (tensor<4x64xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>,
         tensor<2xi64>) -> tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

/// The shared rules hold for tp.attention_kvcache too (attention.heads: 3 query heads over 2).
func.func @kvcache_heads(%q: tensor<2x48xbf16>, %k: tensor<2x32xbf16>, %v: tensor<2x32xbf16>,
                         %kc: tensor<16x32xbf16>, %vc: tensor<16x32xbf16>, %len: tensor<2xi32>) -> tensor<2x48xbf16> {
  // expected-error@+1 {{'tp.attention_kvcache' op violates rule attention.heads}}
  %y = "tp.attention_kvcache"(%q, %k, %v, %kc, %vc, %len) {seq_len = 1 : i64, head_dim = 16 : i64}
      : (tensor<2x48xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>,
         tensor<2xi32>) -> tensor<2x48xbf16>
  return %y : tensor<2x48xbf16>
}

// -----

/// attention.lse: the statistics are f32, one per token and query head (16 tokens, 4 heads).
func.func @lse_dtype(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>) -> tensor<16x4xbf16> {
  // expected-error@+1 {{'tp.attention' op violates rule attention.lse: lse must be tensor<16x4xf32>: one f32 per token and query head (T=16, Hq=4); got tensor<16x4xbf16>}}
  %y, %lse = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64}
      : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> (tensor<16x64xbf16>, tensor<16x4xbf16>)
  return %lse : tensor<16x4xbf16>
}

// -----

/// attention.lse on the gradient: [T, Hq], not [Hq, T].
func.func @grad_lse_shape(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>,
                          %y: tensor<16x64xbf16>, %dy: tensor<16x64xbf16>, %lse: tensor<4x16xf32>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.attention_grad' op violates rule attention.lse: lse must be tensor<16x4xf32>}}
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %v, %y, %dy, %lse) {seq_len = 8 : i64, head_dim = 16 : i64}
      : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>,
         tensor<4x16xf32>) -> (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>)
  return %dq : tensor<16x64xbf16>
}
