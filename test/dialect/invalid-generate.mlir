// RUN: tpc-opt %s --split-input-file --verify-diagnostics

/// The rules of the generation ops tp.kvcache_write and tp.sample (dialect/tpc_verify_generate.c).

/// kvcache_write.shapes: the new rows must have the cache's element type.
func.func @kvcache_write_dtype(%c: tensor<16x32xbf16>, %n: tensor<2x32xf32>, %len: tensor<2xi32>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.kvcache_write' op violates rule kvcache_write.shapes: expects cache[B*C,W] and new[B*S,W] of one bf16, f16 or f32 type and out of cache's type; got cache tensor<16x32xbf16>, new tensor<2x32xf32>, out tensor<16x32xbf16>}}
  %o = "tp.kvcache_write"(%c, %n, %len) {seq_len = 1 : i64, head_dim = 16 : i64} : (tensor<16x32xbf16>, tensor<2x32xf32>, tensor<2xi32>) -> tensor<16x32xbf16>
  return %o : tensor<16x32xbf16>
}

// -----

/// kvcache_write.shapes: 3 sequences do not share a cache of 16 rows.
func.func @kvcache_write_rows(%c: tensor<16x32xbf16>, %n: tensor<3x32xbf16>, %len: tensor<3xi32>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.kvcache_write' op violates rule kvcache_write.shapes: cache must hold C >= seq_len=1 rows for each of the B=3 sequences (new's 3 rows / seq_len); got cache [16,32]}}
  %o = "tp.kvcache_write"(%c, %n, %len) {seq_len = 1 : i64, head_dim = 16 : i64} : (tensor<16x32xbf16>, tensor<3x32xbf16>, tensor<3xi32>) -> tensor<16x32xbf16>
  return %o : tensor<16x32xbf16>
}

// -----

/// kvcache_write.shapes: cache_len holds one i32 per sequence.
func.func @kvcache_write_len(%c: tensor<16x32xbf16>, %n: tensor<2x32xbf16>, %len: tensor<2xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.kvcache_write' op violates rule kvcache_write.shapes: cache_len must be tensor<2xi32>: the cached tokens of each of the B=2 sequences; got tensor<2xi64>}}
  %o = "tp.kvcache_write"(%c, %n, %len) {seq_len = 1 : i64, head_dim = 16 : i64} : (tensor<16x32xbf16>, tensor<2x32xbf16>, tensor<2xi64>) -> tensor<16x32xbf16>
  return %o : tensor<16x32xbf16>
}

// -----

/// kvcache_write.seq-len: seq_len divides the new rows.
func.func @kvcache_write_seq_len(%c: tensor<16x32xbf16>, %n: tensor<3x32xbf16>, %len: tensor<1xi32>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.kvcache_write' op violates rule kvcache_write.seq-len: seq_len=2 must be >= 1 and divide the 3 rows of new [3,32]}}
  %o = "tp.kvcache_write"(%c, %n, %len) {seq_len = 2 : i64, head_dim = 16 : i64} : (tensor<16x32xbf16>, tensor<3x32xbf16>, tensor<1xi32>) -> tensor<16x32xbf16>
  return %o : tensor<16x32xbf16>
}

// -----

/// kvcache_write.head-dim: the cache holds whole heads.
func.func @kvcache_write_head_dim(%c: tensor<16x32xbf16>, %n: tensor<2x32xbf16>, %len: tensor<2xi32>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.kvcache_write' op violates rule kvcache_write.head-dim: head_dim=12 must be >= 1 and divide the cache's width 32}}
  %o = "tp.kvcache_write"(%c, %n, %len) {seq_len = 1 : i64, head_dim = 12 : i64} : (tensor<16x32xbf16>, tensor<2x32xbf16>, tensor<2xi32>) -> tensor<16x32xbf16>
  return %o : tensor<16x32xbf16>
}

// -----

/// sample.logits: the logits are a float matrix.
func.func @sample_logits_rank(%l: tensor<4x2x8xf32>, %s: tensor<4xi64>, %r: tensor<4xi32>, %p: tensor<4xi32>, %t: tensor<4xf32>, %k: tensor<4xi32>, %tp: tensor<4xf32>) -> tensor<4xi32> {
  // expected-error@+1 {{'tp.sample' op violates rule sample.logits: logits must be [B,V] of bf16, f16 or f32 with V >= 1; got tensor<4x2x8xf32>}}
  %o = "tp.sample"(%l, %s, %r, %p, %t, %k, %tp) : (tensor<4x2x8xf32>, tensor<4xi64>, tensor<4xi32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi32>
  return %o : tensor<4xi32>
}

// -----

/// sample.rows: the seed is one i64 per row.
func.func @sample_seed_i32(%l: tensor<4x8xf32>, %s: tensor<4xi32>, %r: tensor<4xi32>, %p: tensor<4xi32>, %t: tensor<4xf32>, %k: tensor<4xi32>, %tp: tensor<4xf32>) -> tensor<4xi32> {
  // expected-error@+1 {{'tp.sample' op violates rule sample.rows: seed must be tensor<4xi64>: one per row of logits [4,8]; got tensor<4xi32>}}
  %o = "tp.sample"(%l, %s, %r, %p, %t, %k, %tp) : (tensor<4x8xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi32>
  return %o : tensor<4xi32>
}

// -----

/// sample.rows: one temperature per row.
func.func @sample_temperature_rows(%l: tensor<4x8xf32>, %s: tensor<4xi64>, %r: tensor<4xi32>, %p: tensor<4xi32>, %t: tensor<1xf32>, %k: tensor<4xi32>, %tp: tensor<4xf32>) -> tensor<4xi32> {
  // expected-error@+1 {{'tp.sample' op violates rule sample.rows: temperature must be tensor<4xf32>: one per row of logits [4,8]; got tensor<1xf32>}}
  %o = "tp.sample"(%l, %s, %r, %p, %t, %k, %tp) : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xi32>, tensor<4xi32>, tensor<1xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi32>
  return %o : tensor<4xi32>
}

// -----

/// sample.rows: the token is an i32 id.
func.func @sample_token_i64(%l: tensor<4x8xf32>, %s: tensor<4xi64>, %r: tensor<4xi32>, %p: tensor<4xi32>, %t: tensor<4xf32>, %k: tensor<4xi32>, %tp: tensor<4xf32>) -> tensor<4xi64> {
  // expected-error@+1 {{'tp.sample' op violates rule sample.rows: token must be tensor<4xi32>: one per row of logits [4,8]; got tensor<4xi64>}}
  %o = "tp.sample"(%l, %s, %r, %p, %t, %k, %tp) : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xi32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi64>
  return %o : tensor<4xi64>
}
