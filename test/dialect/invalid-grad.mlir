// RUN: tpc-opt %s --split-input-file --verify-diagnostics

/// dgrad.segments: N = 36 cannot be cut into 4 blocks of 2 equal segments.
func.func @linear_dgrad_segments(%dy: tensor<16x36xbf16>, %w: tensor<36x64xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.linear_dgrad' op violates rule dgrad.segments: segments (2) and blocks (4) must be >= 1, and with segments > 1 the contracted N (36) must be divisible by segments x blocks}}
  %dx = "tp.linear_dgrad"(%dy, %w) {segments = 2 : i64, blocks = 4 : i64} : (tensor<16x36xbf16>, tensor<36x64xbf16>) -> tensor<16x64xbf16>
  return %dx : tensor<16x64xbf16>
}

// -----

/// dgrad.segments: a count below 1 is meaningless.
func.func @grouped_dgrad_segments_zero(%dy: tensor<16x32xbf16>, %w: tensor<2x32x64xbf16>, %g: tensor<2xi64>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.grouped_linear_dgrad' op violates rule dgrad.segments: segments (0) and blocks (1) must be >= 1}}
  %dx = "tp.grouped_linear_dgrad"(%dy, %w, %g) {segments = 0 : i64} : (tensor<16x32xbf16>, tensor<2x32x64xbf16>, tensor<2xi64>) -> tensor<16x64xbf16>
  return %dx : tensor<16x64xbf16>
}

// -----

/// grad.acc: acc cannot join a partial dx, which a collective completes later.
func.func @linear_dgrad_acc_partial(%dy: tensor<16x32xbf16>, %w: tensor<32x64xbf16>, %acc: tensor<16x64xf32>) -> tensor<16x64xf32> {
  // expected-error@+1 {{'tp.linear_dgrad' op violates rule grad.acc: acc cannot be added to a partial result (the collective that completes it would add acc once per rank); add it after the collective}}
  %dx = "tp.linear_dgrad"(%dy, %w, %acc) {partial = true} : (tensor<16x32xbf16>, tensor<32x64xbf16>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return %dx : tensor<16x64xf32>
}

// -----

/// acc has dx's type (the IRDL constraint).
func.func @linear_dgrad_acc_type(%dy: tensor<16x32xbf16>, %w: tensor<32x64xbf16>, %acc: tensor<16x64xf32>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{expected 'tensor<16x64xf32>' but got 'tensor<16x64xbf16>'}}
  %dx = "tp.linear_dgrad"(%dy, %w, %acc) : (tensor<16x32xbf16>, tensor<32x64xbf16>, tensor<16x64xf32>) -> tensor<16x64xbf16>
  return %dx : tensor<16x64xbf16>
}

// -----

/// linear_dgrad.shapes: dx is [M,K] for dy[M,N] and w[N,K].
func.func @linear_dgrad_wrong_dx(%dy: tensor<16x32xbf16>, %w: tensor<32x64xbf16>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.linear_dgrad' op violates rule linear_dgrad.shapes: expects dy[M,N] and w[N,K] of one float type and dx[M,K] (f32, or dy's type unless partial); got dy tensor<16x32xbf16>, w tensor<32x64xbf16>, dx tensor<16x32xbf16>}}
  %dx = "tp.linear_dgrad"(%dy, %w) : (tensor<16x32xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
  return %dx : tensor<16x32xbf16>
}

// -----

/// linear_wgrad.shapes: a partial weight gradient is an f32 sum.
func.func @linear_wgrad_partial_bf16(%dy: tensor<16x32xbf16>, %x: tensor<16x64xbf16>) -> tensor<32x64xbf16> {
  // expected-error@+1 {{'tp.linear_wgrad' op violates rule linear_wgrad.shapes: expects dy[M,N] and x[M,K] of one float type and dw[N,K] (f32, or dy's type unless partial); got dy tensor<16x32xbf16>, x tensor<16x64xbf16>, dw tensor<32x64xbf16>}}
  %dw = "tp.linear_wgrad"(%dy, %x) {partial = true} : (tensor<16x32xbf16>, tensor<16x64xbf16>) -> tensor<32x64xbf16>
  return %dw : tensor<32x64xbf16>
}

// -----

/// bias_grad.shapes: db has one entry per output feature.
func.func @bias_grad_wrong_length(%dy: tensor<16x32xbf16>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.bias_grad' op violates rule bias_grad.shapes: expects a float dy[M,N] and db[N] (f32, or dy's type unless partial); got dy tensor<16x32xbf16>, db tensor<16xf32>}}
  %db = "tp.bias_grad"(%dy) : (tensor<16x32xbf16>) -> tensor<16xf32>
  return %db : tensor<16xf32>
}

// -----

/// grouped_linear_grad.shapes: the weight gradient has w's shape [E,N,K].
func.func @grouped_wgrad_wrong_dw(%dy: tensor<32x16xbf16>, %x: tensor<32x64xbf16>, %g: tensor<4xi64>) -> tensor<4x64x16xf32> {
  // expected-error@+1 {{'tp.grouped_linear_wgrad' op violates rule grouped_linear_grad.shapes: expects dy[T,N], x[T,K], group_sizes[S*E] i64 (T divisible by S) and dw[E,N,K]; got dy tensor<32x16xbf16>, x tensor<32x64xbf16>, group_sizes tensor<4xi64>, dw tensor<4x64x16xf32>}}
  %dw = "tp.grouped_linear_wgrad"(%dy, %x, %g) : (tensor<32x16xbf16>, tensor<32x64xbf16>, tensor<4xi64>) -> tensor<4x64x16xf32>
  return %dw : tensor<4x64x16xf32>
}

// -----

/// glu_grad.shapes: dy has half of x's last dimension.
func.func @glu_grad_wrong_dy(%x: tensor<16x128xbf16>, %dy: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.glu_grad' op violates rule glu_grad.shapes: expects x[...,2F] and dy[...,F] of one float type; got x tensor<16x128xbf16>, dy tensor<16x128xbf16>}}
  %dx = "tp.glu_grad"(%x, %dy) {kind = "swiglu"} : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
  return %dx : tensor<16x128xbf16>
}

// -----

/// norm_grad.shapes: dgamma has gamma's length.
func.func @rmsnorm_grad_wrong_dgamma(%x: tensor<16x128xbf16>, %g: tensor<128xbf16>, %dy: tensor<16x128xbf16>) -> tensor<64xf32> {
  // expected-error@+1 {{'tp.rmsnorm_grad' op violates rule norm_grad.shapes: dgamma must be [H]=[128] in f32 (or gamma's type unless partial); got tensor<64xf32>}}
  %dx, %dg = "tp.rmsnorm_grad"(%x, %g, %dy) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<64xf32>)
  return %dg : tensor<64xf32>
}

// -----

/// moe_unpermute_grad.shapes: the router weights are f32.
func.func @moe_unpermute_grad_bf16_weights(%d: tensor<16x128xbf16>, %y: tensor<32x128xbf16>, %m: tensor<32xi32>, %w: tensor<16x2xbf16>) -> tensor<32x128xbf16> {
  // expected-error@+1 {{'tp.moe_unpermute_grad' op violates rule moe_unpermute_grad.shapes: expects dout[T,H] and y[T*k,H] of one float type, row_map[T*k] i32 and weights[T,k] f32; got dout tensor<16x128xbf16>, y tensor<32x128xbf16>, row_map tensor<32xi32>, weights tensor<16x2xbf16>}}
  %dy, %dw = "tp.moe_unpermute_grad"(%d, %y, %m, %w) : (tensor<16x128xbf16>, tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xbf16>) -> (tensor<32x128xbf16>, tensor<16x2xbf16>)
  return %dy : tensor<32x128xbf16>
}

// -----

/// moe_permute_grad.shapes: dy has T*k rows.
func.func @moe_permute_grad_wrong_k(%dy: tensor<32x128xbf16>, %m: tensor<32xi32>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.moe_permute_grad' op violates rule moe_permute_grad.shapes: expects dy[T*k,H], row_map[T*k] i32 and dx[T,H] of dy's float type with top_k=4; got dy tensor<32x128xbf16>, row_map tensor<32xi32>, dx tensor<16x128xbf16>}}
  %dx = "tp.moe_permute_grad"(%dy, %m) {top_k = 4 : i64} : (tensor<32x128xbf16>, tensor<32xi32>) -> tensor<16x128xbf16>
  return %dx : tensor<16x128xbf16>
}

// -----

/// moe_route_grad.shapes: top_k cannot exceed the number of experts.
func.func @moe_route_grad_top_k(%l: tensor<16x2xbf16>, %i: tensor<16x4xi32>, %dw: tensor<16x4xf32>) -> tensor<16x2xbf16> {
  // expected-error@+1 {{'tp.moe_route_grad' op violates rule moe_route_grad.shapes: expects float logits[T,E], indices[T,k] i32 and dweights[T,k] f32 with 1 <= top_k=4 <= E; got logits tensor<16x2xbf16>, indices tensor<16x4xi32>, dweights tensor<16x4xf32>}}
  %dl = "tp.moe_route_grad"(%l, %i, %dw) {top_k = 4 : i64} : (tensor<16x2xbf16>, tensor<16x4xi32>, tensor<16x4xf32>) -> tensor<16x2xbf16>
  return %dl : tensor<16x2xbf16>
}
