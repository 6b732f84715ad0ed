// An MLP whose weights are quantized to NVFP4 (E2M1 data, an E4M3 scale per 16 elements along K
// under a per-tensor f32 global scale) before their linears. H 512, FFN 512, 16 tokens: 1024 and 512
// weight rows keep every NVFP4 scale tile (128 rows) whole on up to 4 gtp ranks. The global scale,
// and through it every block scale, is the whole weight's amax: under tp-gtp each rank quantizes
// its shard with the amax all-reduced over gtp (test/e2e/gtp.test: quantize-then-gather).
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @qmlp(%x: tensor<16x512xbf16> {tp.name = "x"}, %w1: tensor<1024x512xbf16> {tp.name = "w1"},
                  %w2: tensor<512x512xbf16> {tp.name = "w2"}) -> (tensor<16x512xbf16> {tp.name = "y"}) {
    %q1, %s1, %g1 = "tp.quantize"(%w1) {format = "nvfp4"} : (tensor<1024x512xbf16>) -> (tensor<1024x512xf4E2M1FN>, tensor<1024x32xf8E4M3FN>, tensor<1xf32>)
    %d1 = "tp.dequantize"(%q1, %s1, %g1) {format = "nvfp4"} : (tensor<1024x512xf4E2M1FN>, tensor<1024x32xf8E4M3FN>, tensor<1xf32>) -> tensor<1024x512xbf16>
    %u = "tp.linear"(%x, %d1) {parallel = "column"} : (tensor<16x512xbf16>, tensor<1024x512xbf16>) -> tensor<16x1024xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x1024xbf16>) -> tensor<16x512xbf16>
    %q2, %s2, %g2 = "tp.quantize"(%w2) {format = "nvfp4"} : (tensor<512x512xbf16>) -> (tensor<512x512xf4E2M1FN>, tensor<512x32xf8E4M3FN>, tensor<1xf32>)
    %d2 = "tp.dequantize"(%q2, %s2, %g2) {format = "nvfp4"} : (tensor<512x512xf4E2M1FN>, tensor<512x32xf8E4M3FN>, tensor<1xf32>) -> tensor<512x512xbf16>
    %y = "tp.linear"(%a, %d2) {parallel = "row"} : (tensor<16x512xbf16>, tensor<512x512xbf16>) -> tensor<16x512xbf16>
    return %y : tensor<16x512xbf16>
  }
}
