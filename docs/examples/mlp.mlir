// A logical dense transformer MLP block (Llama style), written once for every mesh:
//   y = x + FC2(swiglu(FC1(rmsnorm(x))))
// FC1 is column-parallel (each rank holds F/tp gate and F/tp up rows), FC2 row-parallel; tp-shard
// turns this into the per-rank program. 16 tokens, hidden 128, FFN 256 (FC1 has 2 x 256 rows).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @mlp(%x: tensor<16x128xbf16> {tp.name = "x"}, %gamma: tensor<128xbf16> {tp.name = "gamma"},
                 %w1: tensor<512x128xbf16> {tp.name = "w1"}, %w2: tensor<128x256xbf16> {tp.name = "w2"})
      -> (tensor<16x128xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32}
        : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %u = "tp.linear"(%h, %w1) {parallel = "column"}
        : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
    %d = "tp.linear"(%a, %w2) {parallel = "row"}
        : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
    %y = "tp.add"(%x, %d) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}
