// An MLP whose weights are quantized to MXFP8 (rowwise, 1x32 blocks with E8M0 scales) before their
// linears: a storage and wire format (Hopper has no MXFP8 MMA; the linears read the dequantized
// bf16). H 256, FFN 512, 16 tokens; 1024 and 256 weight rows keep every MXFP8 scale tile whole on
// up to 4 ranks (test/e2e/gtp.test: quantize-then-gather).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @qmlp(%x: tensor<16x256xbf16> {tp.name = "x"}, %w1: tensor<1024x256xbf16> {tp.name = "w1"},
                  %w2: tensor<256x512xbf16> {tp.name = "w2"}) -> (tensor<16x256xbf16> {tp.name = "y"}) {
    %q1, %s1 = "tp.quantize"(%w1) {format = "mxfp8"} : (tensor<1024x256xbf16>) -> (tensor<1024x256xf8E4M3FN>, tensor<1024x8xf8E8M0FNU>)
    %d1 = "tp.dequantize"(%q1, %s1) {format = "mxfp8"} : (tensor<1024x256xf8E4M3FN>, tensor<1024x8xf8E8M0FNU>) -> tensor<1024x256xbf16>
    %u = "tp.linear"(%x, %d1) {parallel = "column"} : (tensor<16x256xbf16>, tensor<1024x256xbf16>) -> tensor<16x1024xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x1024xbf16>) -> tensor<16x512xbf16>
    %q2, %s2 = "tp.quantize"(%w2) {format = "mxfp8"} : (tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>)
    %d2 = "tp.dequantize"(%q2, %s2) {format = "mxfp8"} : (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>) -> tensor<256x512xbf16>
    %y = "tp.linear"(%a, %d2) {parallel = "row"} : (tensor<16x512xbf16>, tensor<256x512xbf16>) -> tensor<16x256xbf16>
    return %y : tensor<16x256xbf16>
  }
}
