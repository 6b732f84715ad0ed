// One column-parallel linear whose weight (4096 x 1024 bf16, 2^22 elements) is large enough for
// tpc-run to fill it from Philox on several threads; at tp=4 each rank fills its 1024-row shard
// on one.
module {
  func.func @big(%x: tensor<8x1024xbf16> {tp.name = "x"}, %w: tensor<4096x1024xbf16> {tp.name = "w"})
      -> (tensor<8x4096xbf16> {tp.name = "y"}) {
    %y = "tp.linear"(%x, %w) {parallel = "column"} : (tensor<8x1024xbf16>, tensor<4096x1024xbf16>) -> tensor<8x4096xbf16>
    return %y : tensor<8x4096xbf16>
  }
}
