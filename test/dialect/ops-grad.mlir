// RUN: tpc-opt %s --split-input-file | FileCheck %s
// RUN: tpc-opt %s --split-input-file | tpc-opt --split-input-file | FileCheck %s
// RUN: %mlir_opt --irdl-file=%tp_irdl %s --split-input-file | FileCheck %s

/// Round trip of the backward ops (produced by tp-autodiff, writable by hand).

/// linear_dgrad / linear_wgrad / bias_grad of a [16,64] x [32,64] linear; wgrad kept in f32.
// CHECK-LABEL: func.func @linear_grads(
// CHECK-SAME:      %[[DY:.*]]: tensor<16x32xbf16>, %[[W:.*]]: tensor<32x64xbf16>, %[[X:.*]]: tensor<16x64xbf16>)
// CHECK-NEXT:    %[[DX:.*]] = "tp.linear_dgrad"(%[[DY]], %[[W]]) {parallel = "column"} : (tensor<16x32xbf16>, tensor<32x64xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT:    %[[DW:.*]] = "tp.linear_wgrad"(%[[DY]], %[[X]]) {parallel = "column"} : (tensor<16x32xbf16>, tensor<16x64xbf16>) -> tensor<32x64xf32>
// CHECK-NEXT:    %[[DB:.*]] = "tp.bias_grad"(%[[DY]]) : (tensor<16x32xbf16>) -> tensor<32xf32>
func.func @linear_grads(%dy: tensor<16x32xbf16>, %w: tensor<32x64xbf16>, %x: tensor<16x64xbf16>)
    -> (tensor<16x64xbf16>, tensor<32x64xf32>, tensor<32xf32>) {
  %dx = "tp.linear_dgrad"(%dy, %w) {parallel = "column"} : (tensor<16x32xbf16>, tensor<32x64xbf16>) -> tensor<16x64xbf16>
  %dw = "tp.linear_wgrad"(%dy, %x) {parallel = "column"} : (tensor<16x32xbf16>, tensor<16x64xbf16>) -> tensor<32x64xf32>
  %db = "tp.bias_grad"(%dy) : (tensor<16x32xbf16>) -> tensor<32xf32>
  return %dx, %dw, %db : tensor<16x64xbf16>, tensor<32x64xf32>, tensor<32xf32>
}

// -----

/// Grouped gradients over 4 experts.
// CHECK-LABEL: func.func @grouped_grads(
// CHECK-NEXT:    "tp.grouped_linear_dgrad"{{.*}} : (tensor<32x16xbf16>, tensor<4x16x64xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
// CHECK-NEXT:    "tp.grouped_linear_wgrad"{{.*}} : (tensor<32x16xbf16>, tensor<32x64xbf16>, tensor<4xi64>) -> tensor<4x16x64xf32>
func.func @grouped_grads(%dy: tensor<32x16xbf16>, %w: tensor<4x16x64xbf16>, %x: tensor<32x64xbf16>, %g: tensor<4xi64>)
    -> (tensor<32x64xbf16>, tensor<4x16x64xf32>) {
  %dx = "tp.grouped_linear_dgrad"(%dy, %w, %g) : (tensor<32x16xbf16>, tensor<4x16x64xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
  %dw = "tp.grouped_linear_wgrad"(%dy, %x, %g) : (tensor<32x16xbf16>, tensor<32x64xbf16>, tensor<4xi64>) -> tensor<4x16x64xf32>
  return %dx, %dw : tensor<32x64xbf16>, tensor<4x16x64xf32>
}

// -----

/// glu_grad with the forward GLU's attributes; the norm gradients.
// CHECK-LABEL: func.func @glu_and_norm_grads(
// CHECK-NEXT:    "tp.glu_grad"{{.*}} {alpha = 1.702000e+00 : f32, kind = "quick_geglu", limit = 7.000000e+00 : f32} : (tensor<16x128xbf16>, tensor<16x64xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    "tp.rmsnorm_grad"{{.*}} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<128xf32>)
// CHECK-NEXT:    "tp.layernorm_grad"{{.*}} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<128xf32>, tensor<128xf32>)
func.func @glu_and_norm_grads(%u: tensor<16x128xbf16>, %da: tensor<16x64xbf16>, %x: tensor<16x128xbf16>, %g: tensor<128xbf16>, %dy: tensor<16x128xbf16>)
    -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<128xf32>, tensor<16x128xbf16>, tensor<128xf32>, tensor<128xf32>) {
  %du = "tp.glu_grad"(%u, %da) {kind = "quick_geglu", alpha = 1.702 : f32, limit = 7.0 : f32} : (tensor<16x128xbf16>, tensor<16x64xbf16>) -> tensor<16x128xbf16>
  %dx, %dg = "tp.rmsnorm_grad"(%x, %g, %dy) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<128xf32>)
  %lx, %lg, %lb = "tp.layernorm_grad"(%x, %g, %dy) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<128xf32>, tensor<128xf32>)
  return %du, %dx, %dg, %lx, %lg, %lb : tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<128xf32>, tensor<16x128xbf16>, tensor<128xf32>, tensor<128xf32>
}

// -----

/// The MoE gradients (16 tokens, top-2 of 8 experts).
// CHECK-LABEL: func.func @moe_grads(
// CHECK-NEXT:    "tp.moe_unpermute_grad"{{.*}} -> (tensor<32x128xbf16>, tensor<16x2xf32>)
// CHECK-NEXT:    "tp.moe_permute_grad"{{.*}} {top_k = 2 : i64} : (tensor<32x128xbf16>, tensor<32xi32>) -> tensor<16x128xbf16>
// CHECK-NEXT:    "tp.moe_route_grad"{{.*}} {normalize = true, top_k = 2 : i64} : (tensor<16x8xbf16>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x8xbf16>
func.func @moe_grads(%dout: tensor<16x128xbf16>, %y: tensor<32x128xbf16>, %map: tensor<32xi32>, %w: tensor<16x2xf32>,
                     %logits: tensor<16x8xbf16>, %idx: tensor<16x2xi32>) -> (tensor<16x128xbf16>, tensor<16x8xbf16>) {
  %dy, %dw = "tp.moe_unpermute_grad"(%dout, %y, %map, %w) : (tensor<16x128xbf16>, tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> (tensor<32x128xbf16>, tensor<16x2xf32>)
  %dx = "tp.moe_permute_grad"(%dy, %map) {top_k = 2 : i64} : (tensor<32x128xbf16>, tensor<32xi32>) -> tensor<16x128xbf16>
  %dl = "tp.moe_route_grad"(%logits, %idx, %dw) {top_k = 2 : i64, normalize = true} : (tensor<16x8xbf16>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x8xbf16>
  return %dx, %dl : tensor<16x128xbf16>, tensor<16x8xbf16>
}

// -----

/// attention_grad with the forward attention's attributes (causal, 4 query heads over 2 key/value heads).
// CHECK-LABEL: func.func @attention_grad_gqa(
// CHECK-SAME:      %[[Q:.*]]: tensor<16x64xbf16>, %[[K:.*]]: tensor<16x32xbf16>, %[[V:.*]]: tensor<16x32xbf16>, %[[Y:.*]]: tensor<16x64xbf16>, %[[DY:.*]]: tensor<16x64xbf16>)
// CHECK-NEXT:    %[[G:.*]]:3 = "tp.attention_grad"(%[[Q]], %[[K]], %[[V]], %[[Y]], %[[DY]]) {head_dim = 16 : i64, seq_len = 8 : i64} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>)
// CHECK-NEXT:    return %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @attention_grad_gqa(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>, %v: tensor<16x32xbf16>,
                              %y: tensor<16x64xbf16>, %dy: tensor<16x64xbf16>)
    -> (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) {
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %v, %y, %dy) {seq_len = 8 : i64, head_dim = 16 : i64}
      : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>)
      -> (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>)
  return %dq, %dk, %dv : tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>
}
