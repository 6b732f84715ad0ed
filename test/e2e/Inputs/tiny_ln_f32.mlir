// The tiny f32 block with a layernorm (gamma and beta) in place of the rmsnorm: its parameter
// gradients sum over the tokens, which data and sequence parallelism shard.
module attributes {tp.numerics = "fast", tp.chunks = 4 : i64} {
  func.func @tiny_ln(%x: tensor<4x16xf32> {tp.name = "x"}, %gamma: tensor<16xf32> {tp.name = "gamma"},
                     %beta: tensor<16xf32> {tp.name = "beta"},
                     %w1: tensor<32x16xf32> {tp.name = "w1"}, %w2: tensor<16x16xf32> {tp.name = "w2"})
      -> (tensor<4x16xf32> {tp.name = "y"}) {
    %h = "tp.layernorm"(%x, %gamma, %beta) {eps = 1.0e-05 : f32}
        : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %u = "tp.linear"(%h, %w1) {parallel = "column"} : (tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<4x32xf32>) -> tensor<4x16xf32>
    %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
    %y = "tp.add"(%x, %d) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    return %y : tensor<4x16xf32>
  }
}
