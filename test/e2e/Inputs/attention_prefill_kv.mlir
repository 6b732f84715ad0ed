// attention_block.mlir that also returns its rotated keys k and values v (2 causal sequences of 8
// tokens, 4 query heads over 2 key/value heads of 16): what a serving engine stores in its KV
// cache after a prefill. decode.test decodes from them with attention_decode.mlir.
func.func @attention_prefill(%x: tensor<16x64xbf16> {tp.name = "x"}, %gamma: tensor<64xbf16> {tp.name = "gamma"},
                             %cos: tensor<16x16xbf16> {tp.name = "cos"}, %sin: tensor<16x16xbf16> {tp.name = "sin"},
                             %wq: tensor<64x64xbf16> {tp.name = "wq"}, %wk: tensor<32x64xbf16> {tp.name = "wk"},
                             %wv: tensor<32x64xbf16> {tp.name = "wv"}, %wo: tensor<64x64xbf16> {tp.name = "wo"})
    -> (tensor<16x64xbf16> {tp.name = "y"}, tensor<16x32xbf16> {tp.name = "k"}, tensor<16x32xbf16> {tp.name = "v"}) {
  %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<16x64xbf16>, tensor<64xbf16>) -> tensor<16x64xbf16>
  %q = "tp.linear"(%h, %wq) {parallel = "column"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
  %k = "tp.linear"(%h, %wk) {parallel = "column"} : (tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
  %v = "tp.linear"(%h, %wv) {parallel = "column"} : (tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
  %qr = "tp.rope"(%q, %cos, %sin) : (tensor<16x64xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x64xbf16>
  %kr = "tp.rope"(%k, %cos, %sin) : (tensor<16x32xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x32xbf16>
  %a = "tp.attention"(%qr, %kr, %v) {seq_len = 8 : i64, head_dim = 16 : i64}
      : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  %o = "tp.linear"(%a, %wo) {parallel = "row"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
  %y = "tp.add"(%x, %o) : (tensor<16x64xbf16>, tensor<16x64xbf16>) -> tensor<16x64xbf16>
  return %y, %kr, %v : tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>
}
