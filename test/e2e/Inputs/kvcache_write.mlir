// A decoding step's bookkeeping: the new keys of 2 sequences (2 tokens each) written into their
// KV cache of 4 rows per sequence after cache_len[b] cached rows (2 kv heads of 16).
func.func @append(%cache: tensor<8x32xbf16> {tp.name = "cache"}, %new: tensor<4x32xbf16> {tp.name = "new"},
                  %cache_len: tensor<2xi32> {tp.name = "cache_len"}) -> (tensor<8x32xbf16> {tp.name = "out"}) {
  %o = "tp.kvcache_write"(%cache, %new, %cache_len) {seq_len = 2 : i64, head_dim = 16 : i64}
      : (tensor<8x32xbf16>, tensor<4x32xbf16>, tensor<2xi32>) -> tensor<8x32xbf16>
  return %o : tensor<8x32xbf16>
}
