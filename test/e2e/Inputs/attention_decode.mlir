// One decoding step of attention_prefill_kv.mlir's block with a KV cache: 2 sequences of 2 new
// tokens each (T = 4), after cache_len[b] cached tokens of 8 rows per sequence (k_cache and
// v_cache [2*8, 32], grouped-query 4/2 heads of 16). cos and sin are the new tokens' rows. It
// returns y and the new tokens' k and v, which the caller appends to the cache.
func.func @attention_decode(%x: tensor<4x64xbf16> {tp.name = "x"}, %gamma: tensor<64xbf16> {tp.name = "gamma"},
                            %cos: tensor<4x16xbf16> {tp.name = "cos"}, %sin: tensor<4x16xbf16> {tp.name = "sin"},
                            %wq: tensor<64x64xbf16> {tp.name = "wq"}, %wk: tensor<32x64xbf16> {tp.name = "wk"},
                            %wv: tensor<32x64xbf16> {tp.name = "wv"}, %wo: tensor<64x64xbf16> {tp.name = "wo"},
                            %kc: tensor<16x32xbf16> {tp.name = "k_cache"}, %vc: tensor<16x32xbf16> {tp.name = "v_cache"},
                            %len: tensor<2xi32> {tp.name = "cache_len"})
    -> (tensor<4x64xbf16> {tp.name = "y"}, tensor<4x32xbf16> {tp.name = "k"}, tensor<4x32xbf16> {tp.name = "v"}) {
  %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<4x64xbf16>, tensor<64xbf16>) -> tensor<4x64xbf16>
  %q = "tp.linear"(%h, %wq) {parallel = "column"} : (tensor<4x64xbf16>, tensor<64x64xbf16>) -> tensor<4x64xbf16>
  %k = "tp.linear"(%h, %wk) {parallel = "column"} : (tensor<4x64xbf16>, tensor<32x64xbf16>) -> tensor<4x32xbf16>
  %v = "tp.linear"(%h, %wv) {parallel = "column"} : (tensor<4x64xbf16>, tensor<32x64xbf16>) -> tensor<4x32xbf16>
  %qr = "tp.rope"(%q, %cos, %sin) : (tensor<4x64xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x64xbf16>
  %kr = "tp.rope"(%k, %cos, %sin) : (tensor<4x32xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x32xbf16>
  %a = "tp.attention_kvcache"(%qr, %kr, %v, %kc, %vc, %len)
      {seq_len = 2 : i64, head_dim = 16 : i64}
      : (tensor<4x64xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>,
         tensor<2xi32>) -> tensor<4x64xbf16>
  %o = "tp.linear"(%a, %wo) {parallel = "row"} : (tensor<4x64xbf16>, tensor<64x64xbf16>) -> tensor<4x64xbf16>
  %y = "tp.add"(%x, %o) : (tensor<4x64xbf16>, tensor<4x64xbf16>) -> tensor<4x64xbf16>
  return %y, %kr, %v : tensor<4x64xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>
}
