// RUN: tpc-opt %s --split-input-file --verify-diagnostics

// Negative tests of the compute ops' verifier rules: one case per rule id, and one per distinct
// condition where a rule has several.

/// linear.rank: x must be the rank-2 [M,K]; here it carries an extra batch dimension.
func.func @linear_x_rank3(%x: tensor<2x8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.rank: expects x[M,K], w[N,K], bias[N], y[M,N]; got x [2,8,64], w [32,64], bias none, y [8,32]}}
  %y = "tp.linear"(%x, %w) : (tensor<2x8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// linear.rank: bias is one value per output column, [N], not a matrix.
func.func @linear_bias_rank2(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %b: tensor<1x32xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.rank: expects x[M,K], w[N,K], bias[N], y[M,N]; got x [8,64], w [32,64], bias [1,32], y [8,32]}}
  %y = "tp.linear"(%x, %w, %b) : (tensor<8x64xbf16>, tensor<32x64xbf16>, tensor<1x32xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// linear.dtype: the GEMM runs on floats only; i32 is a legal tensor element but not a GEMM input.
func.func @linear_integer_operands(%x: tensor<8x64xi32>, %w: tensor<32x64xi32>) -> tensor<8x32xi32> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.dtype: x, w and bias must share one bf16, f16 or f32 element type; got x tensor<8x64xi32>, w tensor<32x64xi32>, bias none}}
  %y = "tp.linear"(%x, %w) : (tensor<8x64xi32>, tensor<32x64xi32>) -> tensor<8x32xi32>
  return %y : tensor<8x32xi32>
}

// -----

/// linear.dtype: a bias of another element type than x and w is not promoted implicitly.
func.func @linear_bias_dtype_mismatch(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %b: tensor<32xf32>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.dtype: x, w and bias must share one bf16, f16 or f32 element type; got x tensor<8x64xbf16>, w tensor<32x64xbf16>, bias tensor<32xf32>}}
  %y = "tp.linear"(%x, %w, %b) : (tensor<8x64xbf16>, tensor<32x64xbf16>, tensor<32xf32>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// linear.dtype: a complete (non-partial) linear returns x's element type, not an f32 accumulator.
func.func @linear_result_dtype(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xf32> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.dtype: y must have x's element type bf16; y is tensor<8x32xf32>}}
  %y = "tp.linear"(%x, %w) : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

/// linear.k: x[M,K] and w[N,K] must contract over the same K.
func.func @linear_k_mismatch(%x: tensor<8x64xbf16>, %w: tensor<32x60xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.k: x[M,K] and w[N,K] disagree on K: x [8,64] has K=64, w [32,60] has K=60}}
  %y = "tp.linear"(%x, %w) : (tensor<8x64xbf16>, tensor<32x60xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// linear.partial: every rank would add the bias to its partial sum, adding it tp times in total.
func.func @linear_partial_with_bias(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %b: tensor<32xbf16>) -> tensor<8x32xf32> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.partial: a partial linear cannot add a bias; the bias is added once, after the reduction}}
  %y = "tp.linear"(%x, %w, %b) {partial = true} : (tensor<8x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

/// linear.partial: a partial sum is reduced across ranks in f32; rounding it to bf16 first loses bits.
func.func @linear_partial_bf16_result(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.partial: a partial linear returns an unreduced f32 sum; y is tensor<8x32xbf16>}}
  %y = "tp.linear"(%x, %w) {partial = true} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// linear.result: y is [M,N] = [8,32]; [8,16] matches neither x nor w.
func.func @linear_result_shape(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x16xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.result: y must be [M,N]=[8,32] for x [8,64] and w [32,64]; got [8,16]}}
  %y = "tp.linear"(%x, %w) : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

/// linear.bias: the bias has one entry per output column, N=32.
func.func @linear_bias_length(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %b: tensor<16xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.bias: bias must be [N]=[32] for w [32,64]; got [16]}}
  %y = "tp.linear"(%x, %w, %b) : (tensor<8x64xbf16>, tensor<32x64xbf16>, tensor<16xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// linear.sequence-parallel: the sequence-parallel gather/scatter pairs with a column or row shard.
func.func @linear_sequence_parallel_unsharded(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule linear.sequence-parallel: sequence_parallel needs parallel = "column" or "row"; this linear is not sharded}}
  %y = "tp.linear"(%x, %w) {sequence_parallel = true} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// grouped_linear.rank: w stacks one [N,K] matrix per expert, [E,N,K]; a single matrix is not enough.
func.func @grouped_linear_w_rank2(%x: tensor<16x64xbf16>, %w: tensor<32x64xbf16>, %g: tensor<4xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.rank: expects x[T,K], w[E,N,K], y[T,N]; got x [16,64], w [32,64], y [16,32]}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<32x64xbf16>, tensor<4xi64>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// grouped_linear.dtype: x and w must have one element type; mixed f16 x bf16 GEMMs do not exist.
func.func @grouped_linear_mixed_dtype(%x: tensor<16x64xf16>, %w: tensor<4x32x64xbf16>, %g: tensor<4xi64>) -> tensor<16x32xf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.dtype: x and w must share one bf16, f16 or f32 element type; got x tensor<16x64xf16>, w tensor<4x32x64xbf16>}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xf16>, tensor<4x32x64xbf16>, tensor<4xi64>) -> tensor<16x32xf16>
  return %y : tensor<16x32xf16>
}

// -----

/// grouped_linear.dtype: a complete (non-partial) grouped linear returns x's element type.
func.func @grouped_linear_result_dtype(%x: tensor<16x64xbf16>, %w: tensor<4x32x64xbf16>, %g: tensor<4xi64>) -> tensor<16x32xf32> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.dtype: y must have x's element type bf16; y is tensor<16x32xf32>}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<4x32x64xbf16>, tensor<4xi64>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

/// grouped_linear.k: x[T,K] and w[E,N,K] must contract over the same K.
func.func @grouped_linear_k_mismatch(%x: tensor<16x64xbf16>, %w: tensor<4x32x48xbf16>, %g: tensor<4xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.k: x[T,K] and w[E,N,K] disagree on K: x [16,64] has K=64, w [4,32,48] has K=48}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<4x32x48xbf16>, tensor<4xi64>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// grouped_linear.groups: group_sizes holds one i64 row count per expert of w (E=4); i32 counts are rejected.
func.func @grouped_linear_group_sizes_i32(%x: tensor<16x64xbf16>, %w: tensor<4x32x64xbf16>, %g: tensor<4xi32>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.groups: group_sizes must be tensor<Gxi64> with G a multiple of the 4 experts of w and the 16 rows of x divisible into G/4 segments; got tensor<4xi32>}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<4x32x64xbf16>, tensor<4xi32>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// grouped_linear.groups: w must hold at least one expert (the group count divides by E).
func.func @grouped_linear_no_experts(%x: tensor<16x64xbf16>, %w: tensor<0x32x64xbf16>, %g: tensor<4xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.groups: w[E,N,K] must hold at least one expert; got w [0,32,64]}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<0x32x64xbf16>, tensor<4xi64>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// grouped_linear.partial: a partial sum is reduced across ranks in f32.
func.func @grouped_linear_partial_bf16_result(%x: tensor<16x64xbf16>, %w: tensor<4x32x64xbf16>, %g: tensor<4xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.partial: a partial grouped linear returns an unreduced f32 sum; y is tensor<16x32xbf16>}}
  %y = "tp.grouped_linear"(%x, %w, %g) {partial = true} : (tensor<16x64xbf16>, tensor<4x32x64xbf16>, tensor<4xi64>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// grouped_linear.result: y keeps x's T rows and has w's N=32 columns.
func.func @grouped_linear_result_shape(%x: tensor<16x64xbf16>, %w: tensor<4x32x64xbf16>, %g: tensor<4xi64>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.result: y must be [T,N]=[16,32] for x [16,64] and w [4,32,64]; got [8,32]}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<4x32x64xbf16>, tensor<4xi64>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// glu.dtype: the activation is computed in floating point; an i32 input has no meaning.
func.func @glu_integer_input(%x: tensor<16x512xi32>) -> tensor<16x256xi32> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.dtype: x must be a bf16, f16 or f32 tensor of rank >= 1; got tensor<16x512xi32>}}
  %y = "tp.glu"(%x) {kind = "swiglu"} : (tensor<16x512xi32>) -> tensor<16x256xi32>
  return %y : tensor<16x256xi32>
}

// -----

/// glu.dtype: a rank-0 tensor has no last dimension to split into gate and up.
func.func @glu_rank0_input(%x: tensor<bf16>) -> tensor<bf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.dtype: x must be a bf16, f16 or f32 tensor of rank >= 1; got tensor<bf16>}}
  %y = "tp.glu"(%x) {kind = "swiglu"} : (tensor<bf16>) -> tensor<bf16>
  return %y : tensor<bf16>
}

// -----

/// glu.even: the last dimension splits into equal gate and up halves, so it must be even.
func.func @glu_odd_width(%x: tensor<16x511xbf16>) -> tensor<16x255xbf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.even: the last dimension of x holds gate and up and must be even; got 511}}
  %y = "tp.glu"(%x) {kind = "swiglu"} : (tensor<16x511xbf16>) -> tensor<16x255xbf16>
  return %y : tensor<16x255xbf16>
}

// -----

/// glu.result: y has x's shape with the last dimension halved, 512 -> 256.
func.func @glu_result_not_halved(%x: tensor<16x512xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.result: y must be x's shape with the last dimension halved (512 -> 256); got tensor<16x128xbf16>}}
  %y = "tp.glu"(%x) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// glu.interleave: gate and up alternate in blocks of `interleave` rows, which must tile F=256.
func.func @glu_interleave_not_dividing(%x: tensor<16x512xbf16>) -> tensor<16x256xbf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.interleave: interleave=48 must be 0 (gate and up halves) or a block size dividing F=256}}
  %y = "tp.glu"(%x) {kind = "swiglu", interleave = 48 : i64} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %y : tensor<16x256xbf16>
}

// -----

/// glu.interleave: a negative block size has no layout.
func.func @glu_interleave_negative(%x: tensor<16x512xbf16>) -> tensor<16x256xbf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.interleave: interleave=-1 must be 0 (gate and up halves) or a block size dividing F=256}}
  %y = "tp.glu"(%x) {kind = "swiglu", interleave = -1 : i64} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %y : tensor<16x256xbf16>
}

// -----

/// glu.params: alpha and limit parameterize quick_geglu only; on swiglu they would be silently ignored.
func.func @glu_alpha_on_swiglu(%x: tensor<16x512xbf16>) -> tensor<16x256xbf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.params: alpha and limit apply only to kind = "quick_geglu"}}
  %y = "tp.glu"(%x) {kind = "swiglu", alpha = 1.5 : f32} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %y : tensor<16x256xbf16>
}

// -----

/// glu.params: quick_geglu computes x * sigmoid(alpha * x) clamped at limit; both must be positive.
func.func @glu_quick_geglu_zero_alpha(%x: tensor<16x512xbf16>) -> tensor<16x256xbf16> {
  // expected-error@+1 {{'tp.glu' op violates rule glu.params: alpha=0 and limit=7 must be finite and > 0}}
  %y = "tp.glu"(%x) {kind = "quick_geglu", alpha = 0.0 : f32} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %y : tensor<16x256xbf16>
}

// -----

/// fused_grouped_mlp.shapes: w2 is [E,H,F] with F=128, half of w1's 2F=256 rows; w2 here has F=100.
func.func @fused_grouped_mlp_w2_width(%x: tensor<16x64xbf16>, %w1: tensor<4x256x64xbf16>, %w2: tensor<4x64x100xbf16>, %g: tensor<4xi64>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.fused_grouped_mlp' op violates rule fused_grouped_mlp.shapes: expects x[T,H], w1[E,2F,H], w2[E,H,F] of one float type; got x tensor<16x64xbf16>, w1 tensor<4x256x64xbf16>, w2 tensor<4x64x100xbf16>}}
  %y = "tp.fused_grouped_mlp"(%x, %w1, %w2, %g) {kind = "swiglu"} : (tensor<16x64xbf16>, tensor<4x256x64xbf16>, tensor<4x64x100xbf16>, tensor<4xi64>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// fused_grouped_mlp.groups: group_sizes needs one count per expert of w1 (E=4), not 2.
func.func @fused_grouped_mlp_group_count(%x: tensor<16x64xbf16>, %w1: tensor<4x256x64xbf16>, %w2: tensor<4x64x128xbf16>, %g: tensor<2xi64>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.fused_grouped_mlp' op violates rule fused_grouped_mlp.groups: group_sizes must be tensor<4xi64> (one count per expert); got tensor<2xi64>}}
  %y = "tp.fused_grouped_mlp"(%x, %w1, %w2, %g) {kind = "swiglu"} : (tensor<16x64xbf16>, tensor<4x256x64xbf16>, tensor<4x64x128xbf16>, tensor<2xi64>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// norm.input: RMSNorm normalizes the rows of a float [M,H]; a rank-3 activation must be flattened first.
func.func @rmsnorm_rank3_input(%x: tensor<2x8x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<2x8x128xbf16> {
  // expected-error@+1 {{'tp.rmsnorm' op violates rule norm.input: the normalized tensor must be a bf16, f16 or f32 [M,H]; got tensor<2x8x128xbf16>}}
  %y = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<2x8x128xbf16>, tensor<128xbf16>) -> tensor<2x8x128xbf16>
  return %y : tensor<2x8x128xbf16>
}

// -----

/// norm.gamma: gamma scales each of the H=128 hidden features.
func.func @rmsnorm_gamma_length(%x: tensor<16x128xbf16>, %gamma: tensor<64xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.rmsnorm' op violates rule norm.gamma: gamma must be a float [H]=[128]; got tensor<64xbf16>}}
  %y = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<64xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// norm.beta: the LayerNorm shift beta is stored like gamma; here gamma is bf16 and beta f32.
func.func @layernorm_beta_dtype(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>, %beta: tensor<128xf32>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.layernorm' op violates rule norm.beta: beta must be [H]=[128] with gamma's element type; got tensor<128xf32>}}
  %y = "tp.layernorm"(%x, %gamma, %beta) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<128xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// norm.eps: eps keeps 1/sqrt(mean(x^2) + eps) finite for an all-zero row; 0 does not.
func.func @rmsnorm_zero_eps(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.rmsnorm' op violates rule norm.eps: eps=0 must be finite and > 0}}
  %y = "tp.rmsnorm"(%x, %gamma) {eps = 0.0 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.add_rmsnorm takes the norm's rules on its residual: a gamma of another width, a zero eps.
func.func @add_rmsnorm_gamma(%r: tensor<16x128xbf16>, %y: tensor<16x128xbf16>, %gamma: tensor<64xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.add_rmsnorm' op violates rule norm.gamma}}
  %n, %s = "tp.add_rmsnorm"(%r, %y, %gamma) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<64xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n : tensor<16x128xbf16>
}

// -----

func.func @add_rmsnorm_zero_eps(%r: tensor<16x128xbf16>, %y: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.add_rmsnorm' op violates rule norm.eps: eps=0 must be finite and > 0}}
  %n, %s = "tp.add_rmsnorm"(%r, %y, %gamma) {eps = 0.0 : f32} : (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n : tensor<16x128xbf16>
}

// -----

/// elementwise.dtype: tp.add is the floating-point residual add; integer tensors are not added.
func.func @add_integer_operands(%a: tensor<4x8xi32>, %b: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // expected-error@+1 {{'tp.add' op violates rule elementwise.dtype: operands must be bf16, f16 or f32 tensors; got tensor<4x8xi32>}}
  %c = "tp.add"(%a, %b) : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  return %c : tensor<4x8xi32>
}

// -----

/// moe_route.logits: routing takes a softmax over the E experts of each token, so logits are a float [T,E].
func.func @moe_route_rank1_logits(%logits: tensor<16xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>) {
  // expected-error@+1 {{'tp.moe_route' op violates rule moe_route.logits: logits must be a float [T,E]; got tensor<16xbf16>}}
  %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64} : (tensor<16xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  return %idx, %wts : tensor<16x2xi32>, tensor<16x2xf32>
}

// -----

/// moe_route.top_k: each token picks k distinct experts, so k cannot exceed the E=4 there are.
func.func @moe_route_top_k_above_experts(%logits: tensor<16x4xbf16>) -> (tensor<16x8xi32>, tensor<16x8xf32>) {
  // expected-error@+1 {{'tp.moe_route' op violates rule moe_route.top_k: top_k=8 must be in [1, E] with E=4 experts}}
  %idx, %wts = "tp.moe_route"(%logits) {top_k = 8 : i64} : (tensor<16x4xbf16>) -> (tensor<16x8xi32>, tensor<16x8xf32>)
  return %idx, %wts : tensor<16x8xi32>, tensor<16x8xf32>
}

// -----

/// moe_route.top_k: routing every token to no expert would drop it.
func.func @moe_route_top_k_zero(%logits: tensor<16x4xbf16>) -> (tensor<16x0xi32>, tensor<16x0xf32>) {
  // expected-error@+1 {{'tp.moe_route' op violates rule moe_route.top_k: top_k=0 must be in [1, E] with E=4 experts}}
  %idx, %wts = "tp.moe_route"(%logits) {top_k = 0 : i64} : (tensor<16x4xbf16>) -> (tensor<16x0xi32>, tensor<16x0xf32>)
  return %idx, %wts : tensor<16x0xi32>, tensor<16x0xf32>
}

// -----

/// moe_route.results: expert indices are i32 (what tp.moe_permute reads), not i64.
func.func @moe_route_i64_indices(%logits: tensor<16x4xbf16>) -> (tensor<16x2xi64>, tensor<16x2xf32>) {
  // expected-error@+1 {{'tp.moe_route' op violates rule moe_route.results: expects indices tensor<16x2xi32> and weights tensor<16x2xf32>; got tensor<16x2xi64> and tensor<16x2xf32>}}
  %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64} : (tensor<16x4xbf16>) -> (tensor<16x2xi64>, tensor<16x2xf32>)
  return %idx, %wts : tensor<16x2xi64>, tensor<16x2xf32>
}

// -----

/// moe_permute.shapes: each of T=16 tokens is copied k=2 times, so y and row_map have 32 rows, not 16.
func.func @moe_permute_rows_not_t_times_k(%x: tensor<16x128xbf16>, %idx: tensor<16x2xi32>) -> (tensor<16x128xbf16>, tensor<4xi64>, tensor<16xi32>) {
  // expected-error@+1 {{'tp.moe_permute' op violates rule moe_permute.shapes: expects x[T,H], indices[T,k] i32, y[T*k,H] with x's type and row_map[T*k] i32; got x tensor<16x128xbf16>, indices tensor<16x2xi32>, y tensor<16x128xbf16>, row_map tensor<16xi32>}}
  %xp, %sizes, %map = "tp.moe_permute"(%x, %idx) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<16x128xbf16>, tensor<4xi64>, tensor<16xi32>)
  return %xp, %sizes, %map : tensor<16x128xbf16>, tensor<4xi64>, tensor<16xi32>
}

// -----

/// moe_permute.groups: a token's k=2 distinct experts need at least 2 experts to count rows for.
func.func @moe_permute_fewer_experts_than_k(%x: tensor<16x128xbf16>, %idx: tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<1xi64>, tensor<32xi32>) {
  // expected-error@+1 {{'tp.moe_permute' op violates rule moe_permute.groups: group_sizes must be [E] i64 with top_k=2 <= E; got tensor<1xi64>}}
  %xp, %sizes, %map = "tp.moe_permute"(%x, %idx) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<1xi64>, tensor<32xi32>)
  return %xp, %sizes, %map : tensor<32x128xbf16>, tensor<1xi64>, tensor<32xi32>
}

// -----

/// moe_unpermute.shapes: the combine weights are the f32 router weights; bf16 weights are rejected.
func.func @moe_unpermute_bf16_weights(%y: tensor<32x128xbf16>, %map: tensor<32xi32>, %wts: tensor<16x2xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.moe_unpermute' op violates rule moe_unpermute.shapes: expects a float y[T*k,H], row_map[T*k] i32, weights[T,k] f32 and out[T,H] with y's type; got y tensor<32x128xbf16>, row_map tensor<32xi32>, weights tensor<16x2xbf16>, out tensor<16x128xbf16>}}
  %out = "tp.moe_unpermute"(%y, %map, %wts) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xbf16>) -> tensor<16x128xbf16>
  return %out : tensor<16x128xbf16>
}

// -----

/// moe_unpermute.shapes: the combine is a weighted float sum; integer rows are rejected.
func.func @moe_unpermute_integer_rows(%y: tensor<32x128xi32>, %map: tensor<32xi32>, %wts: tensor<16x2xf32>) -> tensor<16x128xi32> {
  // expected-error@+1 {{'tp.moe_unpermute' op violates rule moe_unpermute.shapes: expects a float y[T*k,H], row_map[T*k] i32, weights[T,k] f32 and out[T,H] with y's type; got y tensor<32x128xi32>}}
  %out = "tp.moe_unpermute"(%y, %map, %wts) : (tensor<32x128xi32>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xi32>
  return %out : tensor<16x128xi32>
}

// -----

/// grouped_linear.groups: 3 segments (12 counts for 4 experts) cannot split 16 rows evenly.
func.func @grouped_linear_uneven_segments(%x: tensor<16x64xbf16>, %w: tensor<4x32x64xbf16>, %g: tensor<12xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.groups: group_sizes must be tensor<Gxi64> with G a multiple of the 4 experts of w and the 16 rows of x divisible into G/4 segments; got tensor<12xi64>}}
  %y = "tp.grouped_linear"(%x, %w, %g) : (tensor<16x64xbf16>, tensor<4x32x64xbf16>, tensor<12xi64>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// moe_bucket.groups: 6 experts cannot be spread over 4 buckets.
func.func @moe_bucket_experts_not_divisible(%x: tensor<32x128xbf16>, %g: tensor<6xi64>) -> tensor<128x128xbf16> {
  // expected-error@+1 {{'tp.moe_bucket' op violates rule moe_bucket.groups: group_sizes must be tensor<Exi64> with E divisible by buckets=4; got tensor<6xi64>}}
  %y = "tp.moe_bucket"(%x, %g) {buckets = 4 : i64} : (tensor<32x128xbf16>, tensor<6xi64>) -> tensor<128x128xbf16>
  return %y : tensor<128x128xbf16>
}

// -----

/// moe_bucket.shapes: every bucket has the capacity of all R rows (dropless), so y is [B*R, H].
func.func @moe_unbucket_wrong_rows(%x: tensor<128x128xbf16>, %g: tensor<8xi64>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.moe_unbucket' op violates rule moe_bucket.shapes: expects rows [R,H] and buckets [4*R,H] of one element type; got x tensor<128x128xbf16>, y tensor<16x128xbf16>}}
  %y = "tp.moe_unbucket"(%x, %g) {buckets = 4 : i64} : (tensor<128x128xbf16>, tensor<8xi64>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// elementwise.result: only an f32 lhs plus a bias may round to another type (the bias's).
func.func @add_result_type(%a: tensor<8x64xbf16>, %b: tensor<8x64xbf16>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.add' op violates rule elementwise.result: the result must have lhs's type tensor<8x64xbf16> (an f32 lhs plus a bias may instead round to the bias's element type); got tensor<8x64xf32>}}
  %c = "tp.add"(%a, %b) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xf32>
  return %c : tensor<8x64xf32>
}

// -----

/// elementwise.result: an f32 sum plus a bf16 bias rounds to bf16, not to f16.
func.func @add_bias_result_type(%a: tensor<8x64xf32>, %b: tensor<64xbf16>) -> tensor<8x64xf16> {
  // expected-error@+1 {{'tp.add' op violates rule elementwise.result: the result must have lhs's type tensor<8x64xf32> (an f32 lhs plus a bias may instead round to the bias's element type); got tensor<8x64xf16>}}
  %c = "tp.add"(%a, %b) : (tensor<8x64xf32>, tensor<64xbf16>) -> tensor<8x64xf16>
  return %c : tensor<8x64xf16>
}

// -----

/// elementwise.shapes: a bias must match lhs's last dimension.
func.func @add_bias_wrong_length(%x: tensor<8x64xbf16>, %b: tensor<32xbf16>) -> tensor<8x64xbf16> {
  // expected-error@+1 {{'tp.add' op violates rule elementwise.shapes: rhs must have lhs's type tensor<8x64xbf16> (or be a bias of its last dimension); got tensor<32xbf16>}}
  %y = "tp.add"(%x, %b) : (tensor<8x64xbf16>, tensor<32xbf16>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

/// grouped_linear.sequence-parallel: sequence parallelism applies to tensor-parallel experts.
func.func @grouped_sequence_parallel_expert(%x: tensor<16x64xbf16>, %w: tensor<4x32x64xbf16>, %g: tensor<4xi64>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.grouped_linear' op violates rule grouped_linear.sequence-parallel: sequence_parallel needs parallel = "column" or "row" (expert tensor parallelism)}}
  %y = "tp.grouped_linear"(%x, %w, %g) {parallel = "expert", sequence_parallel = true} : (tensor<16x64xbf16>, tensor<4x32x64xbf16>, tensor<4xi64>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}
