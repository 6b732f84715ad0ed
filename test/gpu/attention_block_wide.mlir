// The attention block of test/e2e/Inputs/attention_block.mlir at sizes the GPU's tensor-core
// attention takes (bf16, head_dim 64): 2 causal sequences of 200 tokens, hidden 512, 8 query heads
// and 4 key/value heads. test/gpu/prepare_modules.sh stages its invariant-mode training step at
// TP 1/2/4 with and without sequence parallelism for test/gpu/shared_gpu.sh.
func.func @attention_block(%x: tensor<400x512xbf16> {tp.name = "x"}, %gamma: tensor<512xbf16> {tp.name = "gamma"},
                           %cos: tensor<400x64xbf16> {tp.name = "cos"}, %sin: tensor<400x64xbf16> {tp.name = "sin"},
                           %wq: tensor<512x512xbf16> {tp.name = "wq"}, %wk: tensor<256x512xbf16> {tp.name = "wk"},
                           %wv: tensor<256x512xbf16> {tp.name = "wv"}, %wo: tensor<512x512xbf16> {tp.name = "wo"})
    -> (tensor<400x512xbf16> {tp.name = "y"}) {
  %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<400x512xbf16>, tensor<512xbf16>) -> tensor<400x512xbf16>
  %q = "tp.linear"(%h, %wq) {parallel = "column"} : (tensor<400x512xbf16>, tensor<512x512xbf16>) -> tensor<400x512xbf16>
  %k = "tp.linear"(%h, %wk) {parallel = "column"} : (tensor<400x512xbf16>, tensor<256x512xbf16>) -> tensor<400x256xbf16>
  %v = "tp.linear"(%h, %wv) {parallel = "column"} : (tensor<400x512xbf16>, tensor<256x512xbf16>) -> tensor<400x256xbf16>
  %qr = "tp.rope"(%q, %cos, %sin) : (tensor<400x512xbf16>, tensor<400x64xbf16>, tensor<400x64xbf16>) -> tensor<400x512xbf16>
  %kr = "tp.rope"(%k, %cos, %sin) : (tensor<400x256xbf16>, tensor<400x64xbf16>, tensor<400x64xbf16>) -> tensor<400x256xbf16>
  %a = "tp.attention"(%qr, %kr, %v) {seq_len = 200 : i64, head_dim = 64 : i64}
      : (tensor<400x512xbf16>, tensor<400x256xbf16>, tensor<400x256xbf16>) -> tensor<400x512xbf16>
  %o = "tp.linear"(%a, %wo) {parallel = "row"} : (tensor<400x512xbf16>, tensor<512x512xbf16>) -> tensor<400x512xbf16>
  %y = "tp.add"(%x, %o) : (tensor<400x512xbf16>, tensor<400x512xbf16>) -> tensor<400x512xbf16>
  return %y : tensor<400x512xbf16>
}
