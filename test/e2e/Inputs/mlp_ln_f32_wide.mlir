// mlp_f32_wide.mlir with a layernorm (gamma and beta) in place of the rmsnorm: under sequence
// parallelism dgamma and dbeta are summed over every rank's tokens (test/e2e/invariance.test).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @mlp(%x: tensor<16x128xf32> {tp.name = "x"}, %gamma: tensor<128xf32> {tp.name = "gamma"}, %beta: tensor<128xf32> {tp.name = "beta"},
                 %w1: tensor<4096x128xf32> {tp.name = "w1"}, %w2: tensor<128x2048xf32> {tp.name = "w2"})
      -> (tensor<16x128xf32> {tp.name = "y"}) {
    %h = "tp.layernorm"(%x, %gamma, %beta) {eps = 1.0e-05 : f32}
        : (tensor<16x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
    %u = "tp.linear"(%h, %w1) {parallel = "column"}
        : (tensor<16x128xf32>, tensor<4096x128xf32>) -> tensor<16x4096xf32>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x4096xf32>) -> tensor<16x2048xf32>
    %d = "tp.linear"(%a, %w2) {parallel = "row"}
        : (tensor<16x2048xf32>, tensor<128x2048xf32>) -> tensor<16x128xf32>
    %y = "tp.add"(%x, %d) : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
    return %y : tensor<16x128xf32>
  }
}
