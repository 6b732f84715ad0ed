// docs/examples/mlp.mlir in f32 with FFN 2048 (FC1 4096 x 128, FC2 128 x 2048): wide enough that
// fast mode's per-rank chunking changes the f32 bits of y across TP degrees (test/e2e/fast-not-invariant.test).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @mlp(%x: tensor<16x128xf32> {tp.name = "x"}, %gamma: tensor<128xf32> {tp.name = "gamma"},
                 %w1: tensor<4096x128xf32> {tp.name = "w1"}, %w2: tensor<128x2048xf32> {tp.name = "w2"})
      -> (tensor<16x128xf32> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32}
        : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
    %u = "tp.linear"(%h, %w1) {parallel = "column"}
        : (tensor<16x128xf32>, tensor<4096x128xf32>) -> tensor<16x4096xf32>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x4096xf32>) -> tensor<16x2048xf32>
    %d = "tp.linear"(%a, %w2) {parallel = "row"}
        : (tensor<16x2048xf32>, tensor<128x2048xf32>) -> tensor<16x128xf32>
    %y = "tp.add"(%x, %d) : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
    return %y : tensor<16x128xf32>
  }
}
