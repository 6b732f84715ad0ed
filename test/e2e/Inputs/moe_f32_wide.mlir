// docs/examples/moe.mlir in f32 with expert FFN 256 (w1 8 x 512 x 128, w2 8 x 128 x 256): wide
// enough that fast mode's per-rank chunking changes f32 bits across TP degrees, so the MoE
// invariance tests (test/e2e/invariance.test) can fail.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @moe(%x: tensor<16x128xf32> {tp.name = "x"}, %router: tensor<8x128xf32> {tp.name = "router"},
                 %w1: tensor<8x512x128xf32> {tp.name = "w1"}, %w2: tensor<8x128x256xf32> {tp.name = "w2"})
      -> (tensor<16x128xf32> {tp.name = "y"}) {
    %logits = "tp.linear"(%x, %router)
        : (tensor<16x128xf32>, tensor<8x128xf32>) -> tensor<16x8xf32>
    %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64, normalize = true}
        : (tensor<16x8xf32>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
    %xp, %sizes, %map = "tp.moe_permute"(%x, %idx)
        : (tensor<16x128xf32>, tensor<16x2xi32>) -> (tensor<32x128xf32>, tensor<8xi64>, tensor<32xi32>)
    %h1 = "tp.grouped_linear"(%xp, %w1, %sizes) {parallel = "column"}
        : (tensor<32x128xf32>, tensor<8x512x128xf32>, tensor<8xi64>) -> tensor<32x512xf32>
    %a = "tp.glu"(%h1) {kind = "swiglu"} : (tensor<32x512xf32>) -> tensor<32x256xf32>
    %h2 = "tp.grouped_linear"(%a, %w2, %sizes) {parallel = "row"}
        : (tensor<32x256xf32>, tensor<8x128x256xf32>, tensor<8xi64>) -> tensor<32x128xf32>
    %y = "tp.moe_unpermute"(%h2, %map, %wts)
        : (tensor<32x128xf32>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xf32>
    return %y : tensor<16x128xf32>
  }
}
