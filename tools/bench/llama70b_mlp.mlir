// A Llama-70B-like MLP block for accounting (tools/bench/comm_table.py): hidden 8192, FFN 28672,
// 4096 tokens, SwiGLU, bf16. Too large to compute on a CPU; `tpc-run --count-only --stats` runs its
// schedule and counts GEMM FLOPs and collective bytes per rank without computing.
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  func.func @mlp(%x: tensor<4096x8192xbf16> {tp.name = "x"}, %gamma: tensor<8192xbf16> {tp.name = "gamma"},
                 %w1: tensor<57344x8192xbf16> {tp.name = "w1"}, %w2: tensor<8192x28672xbf16> {tp.name = "w2"})
      -> (tensor<4096x8192xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32}
        : (tensor<4096x8192xbf16>, tensor<8192xbf16>) -> tensor<4096x8192xbf16>
    %u = "tp.linear"(%h, %w1) {parallel = "column"}
        : (tensor<4096x8192xbf16>, tensor<57344x8192xbf16>) -> tensor<4096x57344xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<4096x57344xbf16>) -> tensor<4096x28672xbf16>
    %d = "tp.linear"(%a, %w2) {parallel = "row"}
        : (tensor<4096x28672xbf16>, tensor<8192x28672xbf16>) -> tensor<4096x8192xbf16>
    %y = "tp.add"(%x, %d) : (tensor<4096x8192xbf16>, tensor<4096x8192xbf16>) -> tensor<4096x8192xbf16>
    return %y : tensor<4096x8192xbf16>
  }
}
