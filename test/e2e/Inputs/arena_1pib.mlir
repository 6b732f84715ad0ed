// An arena of 1.5 PiB (no machine has that): test/e2e/out-of-memory.test. The intermediate h is
// 65536 x 8589934592 bf16 (1 PiB), its GLU 0.5 PiB; the weights are never allocated because the
// arena is allocated first.
module attributes {tp.numerics = "fast"} {
  func.func @huge(%x: tensor<65536x64xbf16> {tp.name = "x"}, %w1: tensor<8589934592x64xbf16> {tp.name = "w1"},
                  %w2: tensor<64x4294967296xbf16> {tp.name = "w2"}) -> (tensor<65536x64xbf16> {tp.name = "y"}) {
    %h = "tp.linear"(%x, %w1) : (tensor<65536x64xbf16>, tensor<8589934592x64xbf16>) -> tensor<65536x8589934592xbf16>
    %a = "tp.glu"(%h) {kind = "swiglu"} : (tensor<65536x8589934592xbf16>) -> tensor<65536x4294967296xbf16>
    %y = "tp.linear"(%a, %w2) : (tensor<65536x4294967296xbf16>, tensor<64x4294967296xbf16>) -> tensor<65536x64xbf16>
    return %y : tensor<65536x64xbf16>
  }
}
