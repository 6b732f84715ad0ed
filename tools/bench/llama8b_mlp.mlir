// A Llama-3-8B-like MLP block for step-time benchmarks on GPUs (test/gpu/run.sh with
// TPC_GPU_BENCH=1): hidden 4096, FFN 14336, SwiGLU, 4096 tokens, bf16.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @mlp(%x: tensor<4096x4096xbf16> {tp.name = "x"}, %gamma: tensor<4096xbf16> {tp.name = "gamma"},
                 %w1: tensor<28672x4096xbf16> {tp.name = "w1"}, %w2: tensor<4096x14336xbf16> {tp.name = "w2"})
      -> (tensor<4096x4096xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32}
        : (tensor<4096x4096xbf16>, tensor<4096xbf16>) -> tensor<4096x4096xbf16>
    %u = "tp.linear"(%h, %w1) {parallel = "column"}
        : (tensor<4096x4096xbf16>, tensor<28672x4096xbf16>) -> tensor<4096x28672xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<4096x28672xbf16>) -> tensor<4096x14336xbf16>
    %d = "tp.linear"(%a, %w2) {parallel = "row"}
        : (tensor<4096x14336xbf16>, tensor<4096x14336xbf16>) -> tensor<4096x4096xbf16>
    %y = "tp.add"(%x, %d) : (tensor<4096x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16>
    return %y : tensor<4096x4096xbf16>
  }
}
