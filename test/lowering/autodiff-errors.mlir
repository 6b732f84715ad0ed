// RUN: tpc-opt %s --split-input-file --tp-autodiff --verify-diagnostics

/// Collectives have no gradient rule: differentiate the logical module.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @collective(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{tp-autodiff: 'tp.all_reduce' has no gradient rule (differentiate the logical module, before collectives, quantization and fusions are introduced)}}
  %y = "tp.all_reduce"(%x) {mesh = @world, axes = ["tp"]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

/// An argument the results do not depend on has no gradient.
// expected-error@+1 {{tp-autodiff: argument 'unused' does not affect the results, so it has no gradient; mark it {tp.grad = false}}}
func.func @unused(%x: tensor<4x4xf32> {tp.name = "x"}, %u: tensor<4x4xf32> {tp.name = "unused"}) -> tensor<4x4xf32> {
  %y = "tp.add"(%x, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

/// A function without results has nothing to differentiate (it used to emit a training step that
/// did not parse).
// expected-error@+1 {{tp-autodiff: the function returns nothing, so there is nothing to differentiate: return its outputs (or its loss)}}
func.func @returns_nothing() {
  return
}

