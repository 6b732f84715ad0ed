// The attention block without a causal mask (an encoder's): 4 sequences of 6 tokens, hidden 128,
// 4 query heads and 2 key/value heads of head_dim 32, and an explicit softmax scale of 0.25
// (not the default 1/sqrt(32)).
func.func @attention_block_full(%x: tensor<24x128xbf16> {tp.name = "x"}, %gamma: tensor<128xbf16> {tp.name = "gamma"},
                                %cos: tensor<24x32xbf16> {tp.name = "cos"}, %sin: tensor<24x32xbf16> {tp.name = "sin"},
                                %wq: tensor<128x128xbf16> {tp.name = "wq"}, %wk: tensor<64x128xbf16> {tp.name = "wk"},
                                %wv: tensor<64x128xbf16> {tp.name = "wv"}, %wo: tensor<128x128xbf16> {tp.name = "wo"})
    -> (tensor<24x128xbf16> {tp.name = "y"}) {
  %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<24x128xbf16>, tensor<128xbf16>) -> tensor<24x128xbf16>
  %q = "tp.linear"(%h, %wq) {parallel = "column"} : (tensor<24x128xbf16>, tensor<128x128xbf16>) -> tensor<24x128xbf16>
  %k = "tp.linear"(%h, %wk) {parallel = "column"} : (tensor<24x128xbf16>, tensor<64x128xbf16>) -> tensor<24x64xbf16>
  %v = "tp.linear"(%h, %wv) {parallel = "column"} : (tensor<24x128xbf16>, tensor<64x128xbf16>) -> tensor<24x64xbf16>
  %qr = "tp.rope"(%q, %cos, %sin) : (tensor<24x128xbf16>, tensor<24x32xbf16>, tensor<24x32xbf16>) -> tensor<24x128xbf16>
  %kr = "tp.rope"(%k, %cos, %sin) : (tensor<24x64xbf16>, tensor<24x32xbf16>, tensor<24x32xbf16>) -> tensor<24x64xbf16>
  %a = "tp.attention"(%qr, %kr, %v) {seq_len = 6 : i64, head_dim = 32 : i64, causal = false, scale = 2.500000e-01 : f32}
      : (tensor<24x128xbf16>, tensor<24x64xbf16>, tensor<24x64xbf16>) -> tensor<24x128xbf16>
  %o = "tp.linear"(%a, %wo) {parallel = "row"} : (tensor<24x128xbf16>, tensor<128x128xbf16>) -> tensor<24x128xbf16>
  %y = "tp.add"(%x, %o) : (tensor<24x128xbf16>, tensor<24x128xbf16>) -> tensor<24x128xbf16>
  return %y : tensor<24x128xbf16>
}
