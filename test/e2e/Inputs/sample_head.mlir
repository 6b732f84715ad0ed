// A language model's last step: logits = h · headᵀ (a vocabulary-parallel head: column-parallel
// over tp) and one token per row by tp.sample at temperature 0.9, top_k 40, top_p 0.95 (the
// per-row parameters are arguments). tp-shard gathers the logits before the draw.
func.func @last(%h: tensor<64x32xbf16> {tp.name = "h"}, %head: tensor<256x32xbf16> {tp.name = "head"},
                %seed: tensor<64xi64> {tp.name = "seed"}, %request: tensor<64xi32> {tp.name = "request"},
                %position: tensor<64xi32> {tp.name = "position"}, %temperature: tensor<64xf32> {tp.name = "temperature"},
                %top_k: tensor<64xi32> {tp.name = "top_k"}, %top_p: tensor<64xf32> {tp.name = "top_p"})
    -> (tensor<64xi32> {tp.name = "token"}) {
  %logits = "tp.linear"(%h, %head) {parallel = "column"} : (tensor<64x32xbf16>, tensor<256x32xbf16>) -> tensor<64x256xbf16>
  %t = "tp.sample"(%logits, %seed, %request, %position, %temperature, %top_k, %top_p)
      : (tensor<64x256xbf16>, tensor<64xi64>, tensor<64xi32>, tensor<64xi32>, tensor<64xf32>, tensor<64xi32>,
         tensor<64xf32>) -> tensor<64xi32>
  return %t : tensor<64xi32>
}
