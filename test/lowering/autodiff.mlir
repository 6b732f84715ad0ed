// RUN: tpc-opt %s --split-input-file --tp-autodiff | FileCheck %s

///---------------------------------------------------------------------------
/// [Rule: tp.linear -> tp.linear_dgrad + tp.linear_wgrad; tp.add -> both operands]
/// IN:  y = x + linear(x, w)      OUT: (y, x_grad, w_grad) with a cotangent argument y_grad;
///      x's two contributions are summed in reverse program order; w_grad is f32; each gradient
///      names its argument (tp.grad_of).
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @residual_linear(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x16xbf16> {tp.name = "x"}, %[[W:[^:]*]]: tensor<16x16xbf16> {tp.name = "w"},
// CHECK-SAME:      %[[C:[^:]*]]: tensor<8x16xbf16> {tp.cotangent = 0 : i64, tp.name = "y_grad"})
// CHECK-SAME:      -> (tensor<8x16xbf16> {tp.name = "y"}, tensor<8x16xbf16> {tp.grad_of = 0 : i64, tp.name = "x_grad"}, tensor<16x16xf32> {tp.grad_of = 1 : i64, tp.name = "w_grad"})
// CHECK-NEXT:    %[[D:.*]] = "tp.linear"(%[[X]], %[[W]]) {parallel = "row"}
// CHECK-NEXT:    %[[Y:.*]] = "tp.add"(%[[X]], %[[D]])
// CHECK-NEXT:    %[[DW:.*]] = "tp.linear_wgrad"(%[[C]], %[[X]]) {parallel = "row"} : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<16x16xf32>
// CHECK-NEXT:    %[[DX:.*]] = "tp.linear_dgrad"(%[[C]], %[[W]]) {parallel = "row"} : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
// CHECK-NEXT:    %[[SUM:.*]] = "tp.add"(%[[C]], %[[DX]])
// CHECK-NEXT:    return %[[Y]], %[[SUM]], %[[DW]]
func.func @residual_linear(%x: tensor<8x16xbf16> {tp.name = "x"}, %w: tensor<16x16xbf16> {tp.name = "w"})
    -> (tensor<8x16xbf16> {tp.name = "y"}) {
  %d = "tp.linear"(%x, %w) {parallel = "row"} : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %y = "tp.add"(%x, %d) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

/// [Rule: tp.glu -> tp.glu_grad with the same attributes; tp.rmsnorm -> tp.rmsnorm_grad]
/// `tp.grad = false` keeps an argument out of the gradients.
// CHECK-LABEL: func.func @norm_glu(
// CHECK-SAME:      -> (tensor<8x16xbf16> {tp.name = "y"}, tensor<8x32xbf16> {tp.grad_of = 0 : i64, tp.name = "x_grad"})
// CHECK:         %[[G:.*]] = "tp.glu_grad"(%{{.*}}, %{{.*}}) {interleave = 8 : i64, kind = "swiglu"}
// CHECK-NEXT:    %[[N:.*]]:2 = "tp.rmsnorm_grad"(%{{.*}}, %{{.*}}, %[[G]]) {eps = {{.*}}} : ({{.*}}) -> (tensor<8x32xbf16>, tensor<32xf32>)
// CHECK-NEXT:    return %{{.*}}, %[[N]]#0 :
func.func @norm_glu(%x: tensor<8x32xbf16> {tp.name = "x"}, %g: tensor<32xbf16> {tp.name = "gamma", tp.grad = false})
    -> (tensor<8x16xbf16> {tp.name = "y"}) {
  %h = "tp.rmsnorm"(%x, %g) {eps = 1.0e-05 : f32} : (tensor<8x32xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
  %y = "tp.glu"(%h) {kind = "swiglu", interleave = 8 : i64} : (tensor<8x32xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

/// [Rule: tp.mul -> two tp.mul]
// CHECK-LABEL: func.func @product(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<4x4xf32>, %[[B:[^:]*]]: tensor<4x4xf32>, %[[C:[^:]*]]: tensor<4x4xf32> {tp.cotangent = 0 : i64, tp.name = "result0_grad"})
// CHECK-NEXT:    %[[P:.*]] = "tp.mul"(%[[A]], %[[B]])
// CHECK-NEXT:    %[[DB:.*]] = "tp.mul"(%[[C]], %[[A]])
// CHECK-NEXT:    %[[DA:.*]] = "tp.mul"(%[[C]], %[[B]])
// CHECK-NEXT:    return %[[P]], %[[DA]], %[[DB]]
func.func @product(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %c = "tp.mul"(%a, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// -----

/// [Rules: the MoE block] moe_unpermute -> moe_unpermute_grad; grouped_linear -> the grouped
/// dgrad/wgrad pair (f32 weight gradients); moe_permute -> moe_permute_grad (top_k from the
/// indices); moe_route -> moe_route_grad with the route's attributes; the router linear's dgrad
/// adds to x's gradient from the permutation.
// CHECK-LABEL: func.func @moe_train(
// CHECK:         %[[U:.*]]:2 = "tp.moe_unpermute_grad"
// CHECK-NEXT:    "tp.grouped_linear_wgrad"(%[[U]]#0, {{.*}}) : (tensor<32x16xbf16>, tensor<32x16xbf16>, tensor<4xi64>) -> tensor<4x16x16xf32>
// CHECK-NEXT:    %[[DP:.*]] = "tp.grouped_linear_dgrad"(%[[U]]#0, {{.*}}) : (tensor<32x16xbf16>, tensor<4x16x16xbf16>, tensor<4xi64>) -> tensor<32x16xbf16>
// CHECK-NEXT:    %[[DX1:.*]] = "tp.moe_permute_grad"(%[[DP]], {{.*}}) {top_k = 2 : i64}
// CHECK-NEXT:    %[[DL:.*]] = "tp.moe_route_grad"({{.*}}, %[[U]]#1) {normalize = true, top_k = 2 : i64}
// CHECK-NEXT:    "tp.linear_wgrad"(%[[DL]],
// CHECK-NEXT:    %[[DX2:.*]] = "tp.linear_dgrad"(%[[DL]],
// CHECK-NEXT:    "tp.add"(%[[DX1]], %[[DX2]])
func.func @moe_train(%x: tensor<16x16xbf16>, %r: tensor<4x16xbf16>, %w: tensor<4x16x16xbf16>) -> tensor<16x16xbf16> {
  %l = "tp.linear"(%x, %r) : (tensor<16x16xbf16>, tensor<4x16xbf16>) -> tensor<16x4xbf16>
  %i, %wt = "tp.moe_route"(%l) {top_k = 2 : i64, normalize = true} : (tensor<16x4xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  %p, %s, %m = "tp.moe_permute"(%x, %i) : (tensor<16x16xbf16>, tensor<16x2xi32>) -> (tensor<32x16xbf16>, tensor<4xi64>, tensor<32xi32>)
  %h = "tp.grouped_linear"(%p, %w, %s) : (tensor<32x16xbf16>, tensor<4x16x16xbf16>, tensor<4xi64>) -> tensor<32x16xbf16>
  %y = "tp.moe_unpermute"(%h, %m, %wt) : (tensor<32x16xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x16xbf16>
  return %y : tensor<16x16xbf16>
}

// -----

/// [Rule: tp.layernorm -> tp.layernorm_grad with f32 dgamma and dbeta]
// CHECK-LABEL: func.func @layernorm_train(
// CHECK:         "tp.layernorm_grad"{{.*}} -> (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>)
func.func @layernorm_train(%x: tensor<8x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %y = "tp.layernorm"(%x, %g, %b) {eps = 1.0e-05 : f32} : (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
