// A Mixtral-8x7B-like MoE block for training-step benchmarks on GPUs (test/gpu/run.sh with
// TPC_GPU_BENCH=1; the peer is test/gpu/bench_moe_peer.py): 4096 tokens, hidden 4096, 8 experts,
// top-2 routing with normalized weights, expert FFN 14336 with SwiGLU (FC1 has 2 x 14336 rows per
// expert, gate then up), bf16. The same structure as docs/examples/moe.mlir.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @moe(%x: tensor<4096x4096xbf16> {tp.name = "x"}, %router: tensor<8x4096xbf16> {tp.name = "router"},
                 %w1: tensor<8x28672x4096xbf16> {tp.name = "w1"}, %w2: tensor<8x4096x14336xbf16> {tp.name = "w2"})
      -> (tensor<4096x4096xbf16> {tp.name = "y"}) {
    %logits = "tp.linear"(%x, %router)
        : (tensor<4096x4096xbf16>, tensor<8x4096xbf16>) -> tensor<4096x8xbf16>
    %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64, normalize = true}
        : (tensor<4096x8xbf16>) -> (tensor<4096x2xi32>, tensor<4096x2xf32>)
    %xp, %sizes, %map = "tp.moe_permute"(%x, %idx)
        : (tensor<4096x4096xbf16>, tensor<4096x2xi32>) -> (tensor<8192x4096xbf16>, tensor<8xi64>, tensor<8192xi32>)
    %h1 = "tp.grouped_linear"(%xp, %w1, %sizes) {parallel = "column"}
        : (tensor<8192x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<8xi64>) -> tensor<8192x28672xbf16>
    %a = "tp.glu"(%h1) {kind = "swiglu"} : (tensor<8192x28672xbf16>) -> tensor<8192x14336xbf16>
    %h2 = "tp.grouped_linear"(%a, %w2, %sizes) {parallel = "row"}
        : (tensor<8192x14336xbf16>, tensor<8x4096x14336xbf16>, tensor<8xi64>) -> tensor<8192x4096xbf16>
    %y = "tp.moe_unpermute"(%h2, %map, %wts)
        : (tensor<8192x4096xbf16>, tensor<8192xi32>, tensor<4096x2xf32>) -> tensor<4096x4096xbf16>
    return %y : tensor<4096x4096xbf16>
  }
}
