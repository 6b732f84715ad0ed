// mlp_nvfp4_weights.mlir with each weight's amax written out: "tp.amax" of the weight feeds its
// quantize's amax operand. The quantize then may take a sharded weight: tp-shard completes the
// amax of the tensor-parallel shard with a max all-reduce over tp (and tp-gtp over gtp), so the
// module runs on tp = 2 and 4, alone or beside gtp, and quantizes as one rank does
// (test/e2e/gtp.test). The row-parallel w2 holds 256 or 128 columns per rank: 16 or 8 scale
// columns, whole tiles of 4.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @qmlp(%x: tensor<16x512xbf16> {tp.name = "x"}, %w1: tensor<1024x512xbf16> {tp.name = "w1"},
                  %w2: tensor<512x512xbf16> {tp.name = "w2"}) -> (tensor<16x512xbf16> {tp.name = "y"}) {
    %a1 = "tp.amax"(%w1) : (tensor<1024x512xbf16>) -> tensor<1xf32>
    %q1, %s1, %g1 = "tp.quantize"(%w1, %a1) {format = "nvfp4"} : (tensor<1024x512xbf16>, tensor<1xf32>) -> (tensor<1024x512xf4E2M1FN>, tensor<1024x32xf8E4M3FN>, tensor<1xf32>)
    %d1 = "tp.dequantize"(%q1, %s1, %g1) {format = "nvfp4"} : (tensor<1024x512xf4E2M1FN>, tensor<1024x32xf8E4M3FN>, tensor<1xf32>) -> tensor<1024x512xbf16>
    %u = "tp.linear"(%x, %d1) {parallel = "column"} : (tensor<16x512xbf16>, tensor<1024x512xbf16>) -> tensor<16x1024xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x1024xbf16>) -> tensor<16x512xbf16>
    %a2 = "tp.amax"(%w2) : (tensor<512x512xbf16>) -> tensor<1xf32>
    %q2, %s2, %g2 = "tp.quantize"(%w2, %a2) {format = "nvfp4"} : (tensor<512x512xbf16>, tensor<1xf32>) -> (tensor<512x512xf4E2M1FN>, tensor<512x32xf8E4M3FN>, tensor<1xf32>)
    %d2 = "tp.dequantize"(%q2, %s2, %g2) {format = "nvfp4"} : (tensor<512x512xf4E2M1FN>, tensor<512x32xf8E4M3FN>, tensor<1xf32>) -> tensor<512x512xbf16>
    %y = "tp.linear"(%a, %d2) {parallel = "row"} : (tensor<16x512xbf16>, tensor<512x512xbf16>) -> tensor<16x512xbf16>
    return %y : tensor<16x512xbf16>
  }
}
