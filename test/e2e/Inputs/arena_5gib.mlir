// Three linears whose intermediates need a 5 GiB arena: h [65536,32768] bf16 (4 GiB) is still live
// while g is written after it, at offset 4 GiB. Compiled and run with --count-only (plan only: no
// memory is allocated) by test/e2e/arena-64bit.test.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @big(%x: tensor<65536x8192xbf16> {tp.name = "x"}, %w1: tensor<32768x8192xbf16> {tp.name = "w1"},
                 %w2: tensor<8192x32768xbf16> {tp.name = "w2"}, %w3: tensor<8192x8192xbf16> {tp.name = "w3"})
      -> (tensor<65536x8192xbf16> {tp.name = "y"}) {
    %h = "tp.linear"(%x, %w1) : (tensor<65536x8192xbf16>, tensor<32768x8192xbf16>) -> tensor<65536x32768xbf16>
    %g = "tp.linear"(%h, %w2) : (tensor<65536x32768xbf16>, tensor<8192x32768xbf16>) -> tensor<65536x8192xbf16>
    %y = "tp.linear"(%g, %w3) : (tensor<65536x8192xbf16>, tensor<8192x8192xbf16>) -> tensor<65536x8192xbf16>
    return %y : tensor<65536x8192xbf16>
  }
}
