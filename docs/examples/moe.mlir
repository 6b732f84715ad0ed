// A logical Mixtral-style MoE block: a replicated router, top-2 routing over 8 experts, tokens
// permuted into expert order, a grouped SwiGLU FFN per expert, and the weighted combine.
// 16 tokens, hidden 128, expert FFN 64 (FC1 has 2 x 64 rows per expert). Each expert's FFN is
// tensor parallel over tp (Megatron's expert tensor parallelism): FC1 column-parallel, FC2
// row-parallel. On a mesh with an ep axis whole experts are spread over ep ranks and tokens move
// to them and back by all-to-all (tpc-run --mesh ep=4).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @moe(%x: tensor<16x128xbf16> {tp.name = "x"}, %router: tensor<8x128xbf16> {tp.name = "router"},
                 %w1: tensor<8x128x128xbf16> {tp.name = "w1"}, %w2: tensor<8x128x64xbf16> {tp.name = "w2"})
      -> (tensor<16x128xbf16> {tp.name = "y"}) {
    %logits = "tp.linear"(%x, %router)
        : (tensor<16x128xbf16>, tensor<8x128xbf16>) -> tensor<16x8xbf16>
    %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64, normalize = true}
        : (tensor<16x8xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
    %xp, %sizes, %map = "tp.moe_permute"(%x, %idx)
        : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>)
    %h1 = "tp.grouped_linear"(%xp, %w1, %sizes) {parallel = "column"}
        : (tensor<32x128xbf16>, tensor<8x128x128xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
    %a = "tp.glu"(%h1) {kind = "swiglu"} : (tensor<32x128xbf16>) -> tensor<32x64xbf16>
    %h2 = "tp.grouped_linear"(%a, %w2, %sizes) {parallel = "row"}
        : (tensor<32x64xbf16>, tensor<8x128x64xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
    %y = "tp.moe_unpermute"(%h2, %map, %wts)
        : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}
