// A dense block with biases on both linears: the row-parallel bias is added once, after the reduction.
module attributes {tp.chunks = 8 : i64} {
  func.func @mlpb(%x: tensor<16x128xbf16> {tp.name = "x"}, %w1: tensor<512x128xbf16> {tp.name = "w1"}, %b1: tensor<512xbf16> {tp.name = "b1"},
                  %w2: tensor<128x256xbf16> {tp.name = "w2"}, %b2: tensor<128xbf16> {tp.name = "b2"}) -> (tensor<16x128xbf16> {tp.name = "y"}) {
    %u = "tp.linear"(%x, %w1, %b1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<512x128xbf16>, tensor<512xbf16>) -> tensor<16x512xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
    %d = "tp.linear"(%a, %w2, %b2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    return %d : tensor<16x128xbf16>
  }
}
