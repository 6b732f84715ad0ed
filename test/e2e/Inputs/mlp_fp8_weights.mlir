// An MLP whose weights are quantized to FP8 E4M3 with one per-tensor scale each (TE's current
// scaling) before their linears: a storage and wire format; the linears read the dequantized bf16.
// H 256, FFN 512, 16 tokens. Under tp-gtp each rank quantizes its shard with the whole weight's
// amax (tp.amax of the shard and a max all-reduce over gtp) and only the 8-bit data is gathered
// (test/e2e/gtp.test: quantize-then-gather).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @qmlp(%x: tensor<16x256xbf16> {tp.name = "x"}, %w1: tensor<1024x256xbf16> {tp.name = "w1"},
                  %w2: tensor<256x512xbf16> {tp.name = "w2"}) -> (tensor<16x256xbf16> {tp.name = "y"}) {
    %q1, %s1 = "tp.quantize"(%w1) {format = "fp8_e4m3"} : (tensor<1024x256xbf16>) -> (tensor<1024x256xf8E4M3FN>, tensor<1xf32>)
    %d1 = "tp.dequantize"(%q1, %s1) {format = "fp8_e4m3"} : (tensor<1024x256xf8E4M3FN>, tensor<1xf32>) -> tensor<1024x256xbf16>
    %u = "tp.linear"(%x, %d1) {parallel = "column"} : (tensor<16x256xbf16>, tensor<1024x256xbf16>) -> tensor<16x1024xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x1024xbf16>) -> tensor<16x512xbf16>
    %q2, %s2 = "tp.quantize"(%w2) {format = "fp8_e4m3"} : (tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<1xf32>)
    %d2 = "tp.dequantize"(%q2, %s2) {format = "fp8_e4m3"} : (tensor<256x512xf8E4M3FN>, tensor<1xf32>) -> tensor<256x512xbf16>
    %y = "tp.linear"(%a, %d2) {parallel = "row"} : (tensor<16x512xbf16>, tensor<256x512xbf16>) -> tensor<16x256xbf16>
    return %y : tensor<16x256xbf16>
  }
}
