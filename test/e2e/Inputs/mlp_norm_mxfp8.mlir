// A Llama-style MLP block whose output norm feeds an MXFP8 quantize (the next block's quantized
// activations): at TP > 1 tp-shard's all-reduce, the residual add, the norm and the quantize
// become one tp.fused_allreduce_add_rmsnorm_quantize (test/e2e/fuse.test). H 256, FFN 512,
// 16 tokens.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @block(%x: tensor<16x256xbf16> {tp.name = "x"}, %g1: tensor<256xbf16> {tp.name = "norm1"},
                   %w1: tensor<1024x256xbf16> {tp.name = "w1"}, %w2: tensor<256x512xbf16> {tp.name = "w2"},
                   %g2: tensor<256xbf16> {tp.name = "norm2"})
      -> (tensor<16x256xbf16> {tp.name = "next"}, tensor<16x256xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %g1) {eps = 1.0e-05 : f32} : (tensor<16x256xbf16>, tensor<256xbf16>) -> tensor<16x256xbf16>
    %u = "tp.linear"(%h, %w1) {parallel = "column"} : (tensor<16x256xbf16>, tensor<1024x256xbf16>) -> tensor<16x1024xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x1024xbf16>) -> tensor<16x512xbf16>
    %o = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x512xbf16>, tensor<256x512xbf16>) -> tensor<16x256xbf16>
    %y = "tp.add"(%x, %o) : (tensor<16x256xbf16>, tensor<16x256xbf16>) -> tensor<16x256xbf16>
    %n = "tp.rmsnorm"(%y, %g2) {eps = 1.0e-05 : f32} : (tensor<16x256xbf16>, tensor<256xbf16>) -> tensor<16x256xbf16>
    %q, %s = "tp.quantize"(%n) {format = "mxfp8"} : (tensor<16x256xbf16>) -> (tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>)
    %d = "tp.dequantize"(%q, %s) {format = "mxfp8"} : (tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>) -> tensor<16x256xbf16>
    return %d, %y : tensor<16x256xbf16>, tensor<16x256xbf16>
  }
}
