// docs/examples/mlp.mlir with biases on both linears and FFN 2048 (bf16). FC2's bias is added once,
// after the row-parallel reduction: invariant numerics adds it to the f32 sum and rounds once,
// as TP = 1's linear does (fast mode rounds the sum first, then adds).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @mlp(%x: tensor<16x128xbf16> {tp.name = "x"}, %gamma: tensor<128xbf16> {tp.name = "gamma"},
                 %w1: tensor<4096x128xbf16> {tp.name = "w1"}, %b1: tensor<4096xbf16> {tp.name = "b1"},
                 %w2: tensor<128x2048xbf16> {tp.name = "w2"}, %b2: tensor<128xbf16> {tp.name = "b2"})
      -> (tensor<16x128xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32}
        : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %u = "tp.linear"(%h, %w1, %b1) {parallel = "column"}
        : (tensor<16x128xbf16>, tensor<4096x128xbf16>, tensor<4096xbf16>) -> tensor<16x4096xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x4096xbf16>) -> tensor<16x2048xbf16>
    %d = "tp.linear"(%a, %w2, %b2) {parallel = "row"}
        : (tensor<16x2048xbf16>, tensor<128x2048xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %y = "tp.add"(%x, %d) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}
