// RUN: tpc-opt %s --split-input-file --pass-pipeline='builtin.module(tp-fuse)' | FileCheck %s

// tp-fuse rewrites all_reduce -> residual add -> rmsnorm (and the sequence-parallel
// reduce_scatter along the tokens) into the fused op where every condition of lowering/fuse.c
// holds; anything else is left as it is. Outside fast numerics the fused op rounds the sum first
// (sum_type = "residual"), as the chain does.

/// The end of a block and the next block's norm: one fused op; the add's result keeps its other
/// use (the next residual) through residual_out; the collective's order and the norm's eps carry
/// over.
// CHECK-LABEL: func.func @block_end(
// CHECK:         %[[F:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(%arg0, %arg1, %arg2) {axes = ["tp"], eps = 1.000000e-01 : f32, mesh = @world, order = "any"}
// CHECK-SAME:      (tensor<8x64xf32>, tensor<8x64xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>)
// CHECK-NOT:     "tp.all_reduce"
// CHECK-NOT:     "tp.rmsnorm"
// CHECK:         %[[Z:.*]] = "tp.add"(%[[F]]#1, %[[F]]#0)
// CHECK:         return %[[Z]], %[[F]]#1
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @block_end(%p: tensor<8x64xf32>, %r: tensor<8x64xbf16>, %g: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"], order = "any"} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y = "tp.add"(%r, %s) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 0.1 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %z = "tp.add"(%y, %n) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %z, %y : tensor<8x64xbf16>, tensor<8x64xbf16>
}

// -----

/// Sequence parallelism: a reduce-scatter along the tokens (dim 0) becomes the fused
/// reduce-scatter form; one along dim 1 does not.
// CHECK-LABEL: func.func @tokens(
// CHECK:         "tp.fused_reduce_scatter_add_rmsnorm"(%arg0, %arg1, %arg2) {axes = ["tp"], eps = {{.*}}, mesh = @world}
// CHECK-SAME:      (tensor<8x64xf32>, tensor<4x64xbf16>, tensor<64xbf16>) -> (tensor<4x64xbf16>, tensor<4x64xbf16>)
// CHECK-LABEL: func.func @columns(
// CHECK:         %[[S:.*]] = "tp.reduce_scatter"
// CHECK:         "tp.add_rmsnorm"(%[[S]], %arg1, %arg2)
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @tokens(%p: tensor<8x64xf32>, %r: tensor<4x64xbf16>, %g: tensor<64xbf16>) -> tensor<4x64xbf16> {
  %s = "tp.reduce_scatter"(%p) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<8x64xf32>) -> tensor<4x64xbf16>
  %y = "tp.add"(%s, %r) : (tensor<4x64xbf16>, tensor<4x64xbf16>) -> tensor<4x64xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<4x64xbf16>, tensor<64xbf16>) -> tensor<4x64xbf16>
  return %n : tensor<4x64xbf16>
}
func.func @columns(%p: tensor<8x64xf32>, %r: tensor<8x32xbf16>, %g: tensor<32xbf16>) -> tensor<8x32xbf16> {
  %s = "tp.reduce_scatter"(%p) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<8x64xf32>) -> tensor<8x32xbf16>
  %y = "tp.add"(%s, %r) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<8x32xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
  return %n : tensor<8x32xbf16>
}

// -----

/// Chains left unfused with their collective: the sum used twice, a max all-reduce, no norm of
/// the sum, a gamma computed after the add. The first two keep an add and its norm, which become
/// tp.add_rmsnorm on the collective's result.
// CHECK-LABEL: func.func @left(
// CHECK-NOT:     "tp.fused_
// CHECK-COUNT-2: "tp.add_rmsnorm"
// CHECK-NOT:     "tp.fused_
// CHECK-NOT:     "tp.add_rmsnorm"
// CHECK:         return
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @left(%p: tensor<8x64xf32>, %r: tensor<8x64xbf16>, %g: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>) {
  %s1 = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y1 = "tp.add"(%r, %s1) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n1 = "tp.rmsnorm"(%y1, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %w1 = "tp.add"(%s1, %n1) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %s2 = "tp.all_reduce"(%r) {mesh = @world, axes = ["tp"], reduce = "max"} : (tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %y2 = "tp.add"(%r, %s2) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n2 = "tp.rmsnorm"(%y2, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %s3 = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y3 = "tp.add"(%r, %s3) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %s4 = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y4 = "tp.add"(%r, %s4) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %g4 = "tp.add"(%g, %g) : (tensor<64xbf16>, tensor<64xbf16>) -> tensor<64xbf16>
  %n4 = "tp.rmsnorm"(%y4, %g4) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  return %w1, %n2, %y3, %n4, %y2 : tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>
}

// -----

/// Invariant and exact numerics fuse with sum_type = "residual": the sum is rounded to the
/// residual's type before the add, as the chain's all-reduce does, so the bits stay the chain's
/// (TP = 1's). Fast numerics leaves sum_type out (f32, rounded once after the add).
// CHECK-LABEL: module attributes {tp.numerics = "invariant"}
// CHECK:         "tp.fused_allreduce_add_rmsnorm"(%arg0, %arg1, %arg2) {axes = ["tp"], eps = {{.*}}, mesh = @world, order = "canonical", sum_type = "residual"}
// CHECK-NOT:     "tp.all_reduce"
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @kept(%p: tensor<8x64xf32>, %r: tensor<8x64xbf16>, %g: tensor<64xbf16>) -> tensor<8x64xbf16> {
    %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"], order = "canonical"} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
    %y = "tp.add"(%r, %s) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
    %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
    return %n : tensor<8x64xbf16>
  }
}

// -----

/// Exact numerics, the sequence-parallel form: the same attribute.
// CHECK-LABEL: module attributes {tp.numerics = "exact"}
// CHECK:         "tp.fused_reduce_scatter_add_rmsnorm"(%arg0, %arg1, %arg2) {axes = ["tp"], eps = {{.*}}, mesh = @world, sum_type = "residual"}
module attributes {tp.numerics = "exact"} {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @exact_tokens(%p: tensor<8x64xf32>, %r: tensor<4x64xf32>, %g: tensor<64xf32>) -> tensor<4x64xf32> {
    %s = "tp.reduce_scatter"(%p) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<8x64xf32>) -> tensor<4x64xf32>
    %y = "tp.add"(%s, %r) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
    %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
    return %n : tensor<4x64xf32>
  }
}

// -----

/// A rowwise tp.quantize of the fused norm's normed joins it when the quantization is local to a
/// row: mxfp8, or fp8 with an amax operand defined before the chain (delayed scaling: an
/// argument). normed keeps its other use. A quantize whose amax is normed's own (tp.amax of
/// normed, current scaling) needs every row first and stays apart, as does a columnwise one.
// CHECK-LABEL: func.func @quantized(
// CHECK:         %[[F:.*]]:4 = "tp.fused_allreduce_add_rmsnorm_quantize"(%arg0, %arg1, %arg2) {axes = ["tp"], eps = {{.*}}, format = "mxfp8", mesh = @world}
// CHECK-SAME:      -> (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
// CHECK-NOT:     "tp.quantize"
// CHECK:         %[[Z:.*]] = "tp.add"(%[[F]]#1, %[[F]]#0)
// CHECK:         return %[[F]]#2, %[[F]]#3, %[[Z]]
// CHECK-LABEL: func.func @delayed(
// CHECK:         %[[F:.*]]:4 = "tp.fused_allreduce_add_rmsnorm_quantize"(%arg0, %arg1, %arg2, %arg3) {axes = ["tp"], eps = {{.*}}, format = "fp8_e4m3", mesh = @world}
// CHECK:         return %[[F]]#2, %[[F]]#3
// CHECK-LABEL: func.func @current(
// CHECK:         %[[F:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(
// CHECK:         "tp.amax"(%[[F]]#0)
// CHECK:         "tp.quantize"(%[[F]]#0,
// CHECK-LABEL: func.func @columnwise(
// CHECK:         %[[F:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(
// CHECK:         "tp.quantize"(%[[F]]#0) {axis = "columnwise", format = "mxfp8"}
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @quantized(%p: tensor<8x64xf32>, %r: tensor<8x64xbf16>, %g: tensor<64xbf16>)
    -> (tensor<8x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>, tensor<8x64xbf16>) {
  %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y = "tp.add"(%r, %s) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %q, %qs = "tp.quantize"(%n) {format = "mxfp8"} : (tensor<8x64xbf16>) -> (tensor<8x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  %z = "tp.add"(%y, %n) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %q, %qs, %z : tensor<8x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>, tensor<8x64xbf16>
}
func.func @delayed(%p: tensor<8x64xf32>, %r: tensor<8x64xbf16>, %g: tensor<64xbf16>, %a: tensor<1xf32>)
    -> (tensor<8x64xf8E4M3FN>, tensor<1xf32>) {
  %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y = "tp.add"(%r, %s) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %q, %qs = "tp.quantize"(%n, %a) {format = "fp8_e4m3"} : (tensor<8x64xbf16>, tensor<1xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<1xf32>)
  return %q, %qs : tensor<8x64xf8E4M3FN>, tensor<1xf32>
}
func.func @current(%p: tensor<8x64xf32>, %r: tensor<8x64xbf16>, %g: tensor<64xbf16>)
    -> (tensor<8x64xf8E4M3FN>, tensor<1xf32>) {
  %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  %y = "tp.add"(%r, %s) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %a = "tp.amax"(%n) : (tensor<8x64xbf16>) -> tensor<1xf32>
  %q, %qs = "tp.quantize"(%n, %a) {format = "fp8_e4m3"} : (tensor<8x64xbf16>, tensor<1xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<1xf32>)
  return %q, %qs : tensor<8x64xf8E4M3FN>, tensor<1xf32>
}
func.func @columnwise(%p: tensor<64x64xf32>, %r: tensor<64x64xbf16>, %g: tensor<64xbf16>)
    -> (tensor<64x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>) {
  %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<64x64xf32>) -> tensor<64x64xbf16>
  %y = "tp.add"(%r, %s) : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<64x64xbf16>, tensor<64xbf16>) -> tensor<64x64xbf16>
  %q, %qs = "tp.quantize"(%n) {format = "mxfp8", axis = "columnwise"} : (tensor<64x64xbf16>) -> (tensor<64x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>)
  return %q, %qs : tensor<64x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>
}

// -----

/// The LM head's two gradients of the same operands and sharding: one tp.cross_entropy_grad at
/// the earlier op's place, dx (the dgrad's chunks, partial) and dw (the wgrad's chunks as
/// token_chunks); the results keep their uses.
// CHECK-LABEL: func.func @head_grads(
// CHECK:         %[[G:.*]]:2 = "tp.cross_entropy_grad"(%arg0, %arg1, %arg2, %arg3, %arg4) {axes = ["tp"], chunks = 4 : i64, mesh = @world, parallel = "vocab", partial = true, token_chunks = 8 : i64}
// CHECK-SAME:      -> (tensor<16x32xf32>, tensor<64x32xf32>)
// CHECK-NOT:     "tp.cross_entropy_dgrad"
// CHECK-NOT:     "tp.cross_entropy_wgrad"
// CHECK:         %[[S:.*]] = "tp.all_reduce"(%[[G]]#0)
// CHECK:         return %[[S]], %[[G]]#1
/// Other operands (another dloss) or another sharding: left as they are.
// CHECK-LABEL: func.func @other_dloss(
// CHECK:         "tp.cross_entropy_wgrad"
// CHECK:         "tp.cross_entropy_dgrad"
// CHECK-LABEL: func.func @other_parallel(
// CHECK:         "tp.cross_entropy_wgrad"
// CHECK:         "tp.cross_entropy_dgrad"
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @head_grads(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %lse: tensor<16xf32>, %g: tensor<16xf32>)
    -> (tensor<16x32xbf16>, tensor<64x32xf32>) {
  %dw = "tp.cross_entropy_wgrad"(%x, %w, %t, %lse, %g) {parallel = "vocab", chunks = 8 : i64, mesh = @world, axes = ["tp"]} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<64x32xf32>
  %dx = "tp.cross_entropy_dgrad"(%x, %w, %t, %lse, %g) {parallel = "vocab", partial = true, chunks = 4 : i64, mesh = @world, axes = ["tp"]} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16x32xf32>
  %s = "tp.all_reduce"(%dx) {mesh = @world, axes = ["tp"]} : (tensor<16x32xf32>) -> tensor<16x32xbf16>
  return %s, %dw : tensor<16x32xbf16>, tensor<64x32xf32>
}
func.func @other_dloss(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %lse: tensor<16xf32>, %g: tensor<16xf32>, %g2: tensor<16xf32>)
    -> (tensor<16x32xbf16>, tensor<64x32xf32>) {
  %dw = "tp.cross_entropy_wgrad"(%x, %w, %t, %lse, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<64x32xf32>
  %dx = "tp.cross_entropy_dgrad"(%x, %w, %t, %lse, %g2) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16x32xbf16>
  return %dx, %dw : tensor<16x32xbf16>, tensor<64x32xf32>
}
func.func @other_parallel(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %lse: tensor<16xf32>, %g: tensor<16xf32>)
    -> (tensor<16x32xbf16>, tensor<64x32xf32>) {
  %dw = "tp.cross_entropy_wgrad"(%x, %w, %t, %lse, %g) {parallel = "vocab"} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<64x32xf32>
  %dx = "tp.cross_entropy_dgrad"(%x, %w, %t, %lse, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16x32xbf16>
  return %dx, %dw : tensor<16x32xbf16>, tensor<64x32xf32>
}

// -----

/// The loss and the gradient of its lse, whole vocabulary, dloss an argument: one
/// tp.cross_entropy_with_grad at the loss's place (the grad's chunks and token_chunks); every
/// result keeps its uses.
// CHECK-LABEL: func.func @loss_and_grads(
// CHECK:         %[[F:.*]]:4 = "tp.cross_entropy_with_grad"(%arg0, %arg1, %arg2, %arg3) {chunks = 4 : i64, parallel = "vocab", token_chunks = 8 : i64}
// CHECK-SAME:      -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xbf16>, tensor<64x32xf32>)
// CHECK-NOT:     "tp.cross_entropy"
// CHECK-NOT:     "tp.cross_entropy_grad"
// CHECK:         return %[[F]]#0, %[[F]]#1, %[[F]]#2, %[[F]]#3
/// A dloss computed after the loss, a vocabulary-parallel gradient (mesh axes) or other targets:
/// left as they are.
// CHECK-LABEL: func.func @dloss_after(
// CHECK:         "tp.cross_entropy"
// CHECK:         "tp.cross_entropy_grad"
// CHECK-LABEL: func.func @sharded_grad(
// CHECK:         "tp.cross_entropy"
// CHECK:         "tp.cross_entropy_grad"
// CHECK-LABEL: func.func @other_targets(
// CHECK:         "tp.cross_entropy"
// CHECK:         "tp.cross_entropy_grad"
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @loss_and_grads(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %g: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xbf16>, tensor<64x32xf32>) {
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) {parallel = "vocab"} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  %dx, %dw = "tp.cross_entropy_grad"(%x, %w, %t, %lse, %g) {parallel = "vocab", chunks = 4 : i64, token_chunks = 8 : i64} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<64x32xf32>)
  return %loss, %lse, %dx, %dw : tensor<16xf32>, tensor<16xf32>, tensor<16x32xbf16>, tensor<64x32xf32>
}
func.func @dloss_after(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>)
    -> (tensor<16x32xbf16>, tensor<64x32xf32>) {
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  %g = "tp.add"(%loss, %lse) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %dx, %dw = "tp.cross_entropy_grad"(%x, %w, %t, %lse, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<64x32xf32>)
  return %dx, %dw : tensor<16x32xbf16>, tensor<64x32xf32>
}
func.func @sharded_grad(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %g: tensor<16xf32>)
    -> (tensor<16x32xf32>, tensor<64x32xf32>) {
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) {parallel = "vocab"} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  %dx, %dw = "tp.cross_entropy_grad"(%x, %w, %t, %lse, %g) {parallel = "vocab", partial = true, mesh = @world, axes = ["tp"]} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xf32>, tensor<64x32xf32>)
  return %dx, %dw : tensor<16x32xf32>, tensor<64x32xf32>
}
func.func @other_targets(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %t2: tensor<16xi32>, %g: tensor<16xf32>)
    -> (tensor<16x32xbf16>, tensor<64x32xf32>) {
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  %dx, %dw = "tp.cross_entropy_grad"(%x, %w, %t2, %lse, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<64x32xf32>)
  return %dx, %dw : tensor<16x32xbf16>, tensor<64x32xf32>
}

// -----

/// A decoding step's head: the logits z = linear(x, w) are computed for the draw, so the loss of the
/// drawn token is tp.cross_entropy_logits(z, token) at the loss's place, not a second head GEMM.
// CHECK-LABEL: func.func @loss_of_logits(
// CHECK:         %[[Z:.*]] = "tp.linear"(%arg0, %arg1)
// CHECK:         %[[T:.*]] = "tp.sample"(%[[Z]],
// CHECK:         %[[L:.*]]:2 = "tp.cross_entropy_logits"(%[[Z]], %[[T]]) : (tensor<4x64xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT:     "tp.cross_entropy"(
// CHECK:         return %[[T]], %[[L]]#0
/// A vocabulary shard (after tp-shard): the statistics, their gather and the combine give way to the
/// loss of the gathered logits that the draw reads; no collective of statistics is left.
// CHECK-LABEL: func.func @loss_of_gathered_logits(
// CHECK:         %[[Z:.*]] = "tp.linear"(%arg0, %arg1)
// CHECK:         %[[G:.*]] = "tp.all_gather"(%[[Z]])
// CHECK:         %[[T:.*]] = "tp.sample"(%[[G]],
// CHECK-NOT:     "tp.cross_entropy_stats"
// CHECK-NOT:     "tp.all_gather"
// CHECK:         %[[L:.*]]:2 = "tp.cross_entropy_logits"(%[[G]], %[[T]])
// CHECK-NOT:     "tp.cross_entropy_combine"
// CHECK:         return %[[T]], %[[L]]#0
/// Logits with a bias, of their own chunks, computed after the loss, or gathered in blocks: left
/// as they are.
// CHECK-LABEL: func.func @logits_bias(
// CHECK:         "tp.cross_entropy"(
// CHECK-LABEL: func.func @logits_chunks(
// CHECK:         "tp.cross_entropy"(
// CHECK-LABEL: func.func @logits_after(
// CHECK:         "tp.cross_entropy"(
// CHECK-LABEL: func.func @gathered_in_blocks(
// CHECK:         "tp.cross_entropy_stats"
// CHECK:         "tp.cross_entropy_combine"
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @loss_of_logits(%x: tensor<4x32xbf16>, %w: tensor<64x32xbf16>, %seed: tensor<4xi64>, %req: tensor<4xi32>,
                          %pos: tensor<4xi32>, %temp: tensor<4xf32>, %k: tensor<4xi32>, %p: tensor<4xf32>)
    -> (tensor<4xi32>, tensor<4xf32>) {
  %z = "tp.linear"(%x, %w) {parallel = "column"} : (tensor<4x32xbf16>, tensor<64x32xbf16>) -> tensor<4x64xbf16>
  %t = "tp.sample"(%z, %seed, %req, %pos, %temp, %k, %p) : (tensor<4x64xbf16>, tensor<4xi64>, tensor<4xi32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi32>
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) {parallel = "vocab"} : (tensor<4x32xbf16>, tensor<64x32xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %t, %loss : tensor<4xi32>, tensor<4xf32>
}
func.func @loss_of_gathered_logits(%x: tensor<4x32xbf16>, %w: tensor<32x32xbf16>, %seed: tensor<4xi64>, %req: tensor<4xi32>,
                                   %pos: tensor<4xi32>, %temp: tensor<4xf32>, %k: tensor<4xi32>, %p: tensor<4xf32>)
    -> (tensor<4xi32>, tensor<4xf32>) {
  %z = "tp.linear"(%x, %w) {parallel = "column"} : (tensor<4x32xbf16>, tensor<32x32xbf16>) -> tensor<4x32xbf16>
  %g = "tp.all_gather"(%z) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<4x32xbf16>) -> tensor<4x64xbf16>
  %t = "tp.sample"(%g, %seed, %req, %pos, %temp, %k, %p) : (tensor<4x64xbf16>, tensor<4xi64>, tensor<4xi32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi32>
  %st = "tp.cross_entropy_stats"(%x, %w, %t) {mesh = @world, axes = ["tp"]} : (tensor<4x32xbf16>, tensor<32x32xbf16>, tensor<4xi32>) -> tensor<4x3xf32>
  %sg = "tp.all_gather"(%st) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<4x3xf32>) -> tensor<4x6xf32>
  %loss, %lse = "tp.cross_entropy_combine"(%sg, %t) : (tensor<4x6xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %t, %loss : tensor<4xi32>, tensor<4xf32>
}
func.func @logits_bias(%x: tensor<4x32xbf16>, %w: tensor<64x32xbf16>, %b: tensor<64xbf16>, %t: tensor<4xi32>) -> (tensor<4x64xbf16>, tensor<4xf32>) {
  %z = "tp.linear"(%x, %w, %b) : (tensor<4x32xbf16>, tensor<64x32xbf16>, tensor<64xbf16>) -> tensor<4x64xbf16>
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) : (tensor<4x32xbf16>, tensor<64x32xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %z, %loss : tensor<4x64xbf16>, tensor<4xf32>
}
func.func @logits_chunks(%x: tensor<4x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<4xi32>) -> (tensor<4x64xbf16>, tensor<4xf32>) {
  %z = "tp.linear"(%x, %w) {chunks = 4 : i64} : (tensor<4x32xbf16>, tensor<64x32xbf16>) -> tensor<4x64xbf16>
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) : (tensor<4x32xbf16>, tensor<64x32xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %z, %loss : tensor<4x64xbf16>, tensor<4xf32>
}
func.func @logits_after(%x: tensor<4x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<4xi32>) -> (tensor<4x64xbf16>, tensor<4xf32>) {
  %loss, %lse = "tp.cross_entropy"(%x, %w, %t) : (tensor<4x32xbf16>, tensor<64x32xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
  %z = "tp.linear"(%x, %w) : (tensor<4x32xbf16>, tensor<64x32xbf16>) -> tensor<4x64xbf16>
  return %z, %loss : tensor<4x64xbf16>, tensor<4xf32>
}
func.func @gathered_in_blocks(%x: tensor<4x32xbf16>, %w: tensor<32x32xbf16>, %t: tensor<4xi32>) -> (tensor<4x64xbf16>, tensor<4xf32>) {
  %z = "tp.linear"(%x, %w) {parallel = "column"} : (tensor<4x32xbf16>, tensor<32x32xbf16>) -> tensor<4x32xbf16>
  %g = "tp.all_gather"(%z) {mesh = @world, axes = ["tp"], dim = 1 : i64, blocks = 2 : i64} : (tensor<4x32xbf16>) -> tensor<4x64xbf16>
  %st = "tp.cross_entropy_stats"(%x, %w, %t) {mesh = @world, axes = ["tp"]} : (tensor<4x32xbf16>, tensor<32x32xbf16>, tensor<4xi32>) -> tensor<4x3xf32>
  %sg = "tp.all_gather"(%st) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<4x3xf32>) -> tensor<4x6xf32>
  %loss, %lse = "tp.cross_entropy_combine"(%sg, %t) : (tensor<4x6xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %g, %loss : tensor<4x64xbf16>, tensor<4xf32>
}

// -----

/// Gradient sums: a tp.add of a linear_dgrad (not partial) or of a rmsnorm_grad's dx, used only
/// by the add, takes the add's other operand as the op's acc when that operand is defined before
/// the op: the q/k/v input gradients chain through acc, and the norm's dx takes the residual
/// gradient. The later-defined operand of the add is the one that takes acc.
// CHECK-LABEL: func.func @grad_sums(
// CHECK:         %[[K:.*]] = "tp.linear_dgrad"(%arg1, %arg4) {parallel = "column"} : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
// CHECK:         %[[V:.*]] = "tp.linear_dgrad"(%arg2, %arg5, %[[K]]) {parallel = "column"} : (tensor<8x16xbf16>, tensor<16x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
// CHECK:         %[[Q:.*]] = "tp.linear_dgrad"(%arg0, %arg3, %[[V]]) {chunks = 2 : i64, parallel = "column"}
// CHECK:         %[[N:.*]]:2 = "tp.rmsnorm_grad"(%arg6, %arg7, %[[Q]], %arg8) {eps = {{.*}}} : (tensor<8x32xbf16>, tensor<32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>) -> (tensor<8x32xbf16>, tensor<32xf32>)
// CHECK-NOT:     "tp.add"
// CHECK:         return %[[N]]#0, %[[N]]#1
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @grad_sums(%dq: tensor<8x32xbf16>, %dk: tensor<8x16xbf16>, %dv: tensor<8x16xbf16>, %wq: tensor<32x32xbf16>,
                     %wk: tensor<16x32xbf16>, %wv: tensor<16x32xbf16>, %x: tensor<8x32xbf16>, %g: tensor<32xbf16>,
                     %res: tensor<8x32xbf16>) -> (tensor<8x32xbf16>, tensor<32xf32>) {
  %a = "tp.linear_dgrad"(%dk, %wk) {parallel = "column"} : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %b = "tp.linear_dgrad"(%dv, %wv) {parallel = "column"} : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %s = "tp.add"(%a, %b) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %c = "tp.linear_dgrad"(%dq, %wq) {parallel = "column", chunks = 2 : i64} : (tensor<8x32xbf16>, tensor<32x32xbf16>) -> tensor<8x32xbf16>
  %t = "tp.add"(%c, %s) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %dx, %dg = "tp.rmsnorm_grad"(%x, %g, %t) {eps = 1.0e-05 : f32} : (tensor<8x32xbf16>, tensor<32xbf16>, tensor<8x32xbf16>) -> (tensor<8x32xbf16>, tensor<32xf32>)
  %u = "tp.add"(%res, %dx) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  return %u, %dg : tensor<8x32xbf16>, tensor<32xf32>
}

/// A tied embedding: its gradient starts from the LM head's (acc); a partial one (summed over
/// ranks later) keeps its add.
// CHECK-LABEL: func.func @tied(
// CHECK:         %[[E:.*]] = "tp.embedding_grad"(%arg0, %arg1, %arg2) {parallel = "vocab"} : (tensor<8xi32>, tensor<8x32xbf16>, tensor<64x32xf32>) -> tensor<64x32xf32>
// CHECK:         %[[P:.*]] = "tp.embedding_grad"(%arg0, %arg1) {partial = true}
// CHECK:         "tp.add"(%arg2, %[[P]])
func.func @tied(%ids: tensor<8xi32>, %dy: tensor<8x32xbf16>, %head: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
  %e = "tp.embedding_grad"(%ids, %dy) {parallel = "vocab"} : (tensor<8xi32>, tensor<8x32xbf16>) -> tensor<64x32xf32>
  %s = "tp.add"(%head, %e) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %p = "tp.embedding_grad"(%ids, %dy) {partial = true} : (tensor<8xi32>, tensor<8x32xbf16>) -> tensor<64x32xf32>
  %t = "tp.add"(%head, %p) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  return %s, %t : tensor<64x32xf32>, tensor<64x32xf32>
}

// -----

/// Left as adds: a partial dgrad (its collective completes it later), a dgrad used twice, an
/// addend defined after the dgrad, a broadcast bias.
// CHECK-LABEL: func.func @sums_left(
// CHECK-COUNT-5: "tp.add"
// CHECK-NOT:     "tp.linear_dgrad"({{[^)]*}}, {{[^)]*}}, {{[^)]*}})
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @sums_left(%dy: tensor<8x16xbf16>, %w: tensor<16x32xbf16>, %r: tensor<8x32xbf16>, %r32: tensor<8x32xf32>,
                     %b: tensor<32xbf16>)
    -> (tensor<8x32xf32>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>) {
  %p = "tp.linear_dgrad"(%dy, %w) {partial = true} : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xf32>
  %s1 = "tp.add"(%p, %r32) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %d = "tp.linear_dgrad"(%dy, %w) : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %s2 = "tp.add"(%d, %r) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %e = "tp.linear_dgrad"(%dy, %w) : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %late = "tp.add"(%r, %r) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %s3 = "tp.add"(%e, %late) : (tensor<8x32xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %h = "tp.linear_dgrad"(%dy, %w) : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %s5 = "tp.add"(%h, %b) : (tensor<8x32xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
  return %s1, %s2, %d, %s3, %s5 : tensor<8x32xf32>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>
}

// -----

/// One rank: a residual add and the next norm become tp.add_rmsnorm at the add's place; the sum's
/// other use (the next residual) takes its second result, the norm's users its first.
// CHECK-LABEL: func.func @add_norm(
// CHECK:         %[[F:.*]]:2 = "tp.add_rmsnorm"(%arg0, %arg1, %arg2) {eps = 1.000000e-01 : f32} : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>)
// CHECK-NOT:     "tp.rmsnorm"
// CHECK:         %[[L:.*]] = "tp.linear"(%[[F]]#0, %arg3)
// CHECK:         %[[Z:.*]] = "tp.add"(%[[F]]#1, %[[L]])
// CHECK:         return %[[Z]]
func.func @add_norm(%r: tensor<8x64xbf16>, %y: tensor<8x64xbf16>, %g: tensor<64xbf16>, %w: tensor<64x64xbf16>)
    -> tensor<8x64xbf16> {
  %s = "tp.add"(%r, %y) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n = "tp.rmsnorm"(%s, %g) {eps = 0.1 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %l = "tp.linear"(%n, %w) : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16>
  %z = "tp.add"(%s, %l) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %z : tensor<8x64xbf16>
}

// -----

/// Left alone: a bias-like add (a row of H), no norm of the sum, a gamma computed after the add,
/// and a norm in another block.
// CHECK-LABEL: func.func @add_norm_left(
// CHECK-NOT:     "tp.add_rmsnorm"
// CHECK:         return
func.func @add_norm_left(%r: tensor<8x64xbf16>, %b: tensor<64xbf16>, %g: tensor<64xbf16>, %c: i1)
    -> (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>) {
  %s1 = "tp.add"(%r, %b) : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %n1 = "tp.rmsnorm"(%s1, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %s2 = "tp.add"(%r, %r) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %s3 = "tp.add"(%r, %n1) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %g3 = "tp.add"(%g, %g) : (tensor<64xbf16>, tensor<64xbf16>) -> tensor<64xbf16>
  %n3 = "tp.rmsnorm"(%s3, %g3) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %s4 = "tp.add"(%s2, %r) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n4 = scf.if %c -> tensor<8x64xbf16> {
    %t = "tp.rmsnorm"(%s4, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
    scf.yield %t : tensor<8x64xbf16>
  } else {
    scf.yield %s4 : tensor<8x64xbf16>
  }
  return %s2, %n3, %n4, %s1 : tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>
}
