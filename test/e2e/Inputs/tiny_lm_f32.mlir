// A whole tiny language model's training function (f32): token embedding, one Llama-style MLP
// block (rmsnorm, SwiGLU, residual), the final norm and the LM head's cross-entropy, both ends
// vocabulary-parallel. 16 tokens, vocabulary 64, hidden 32, FFN 64. test/e2e/lm.test runs it.
module attributes {tp.numerics = "exact", tp.chunks = 8 : i64} {
  func.func @lm(%ids: tensor<16xi32> {tp.name = "ids"}, %targets: tensor<16xi32> {tp.name = "targets"},
                %emb: tensor<64x32xf32> {tp.name = "emb"}, %g1: tensor<32xf32> {tp.name = "g1"},
                %w1: tensor<128x32xf32> {tp.name = "w1"}, %w2: tensor<32x64xf32> {tp.name = "w2"},
                %gf: tensor<32xf32> {tp.name = "gf"}, %head: tensor<64x32xf32> {tp.name = "head"})
      -> (tensor<16xf32> {tp.name = "loss"}) {
    %x = "tp.embedding"(%ids, %emb) {parallel = "vocab"} : (tensor<16xi32>, tensor<64x32xf32>) -> tensor<16x32xf32>
    %h = "tp.rmsnorm"(%x, %g1) {eps = 1.0e-05 : f32} : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
    %u = "tp.linear"(%h, %w1) {parallel = "column"} : (tensor<16x32xf32>, tensor<128x32xf32>) -> tensor<16x128xf32>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x128xf32>) -> tensor<16x64xf32>
    %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x64xf32>, tensor<32x64xf32>) -> tensor<16x32xf32>
    %y = "tp.add"(%x, %d) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    %n = "tp.rmsnorm"(%y, %gf) {eps = 1.0e-05 : f32} : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
    %loss, %lse = "tp.cross_entropy"(%n, %head, %targets) {parallel = "vocab"} : (tensor<16x32xf32>, tensor<64x32xf32>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
    return %loss : tensor<16xf32>
  }
}
