// Communication/compute overlap on the CUDA backend (async form; test/gpu/run.sh with TPC_GPU_BENCH=1
// times overlap_sync.mlir against overlap_async.mlir, docs/performance.md). A per-rank module on 4
// ranks: an all-gather of a 64 MB bf16 shard per rank (256 MB gathered, a GTP-style weight
// prefetch) and an independent 8192^3 linear. The sync form runs them one after the other on the
// compute stream; the async form starts the gather on the comm stream, runs the linear meanwhile
// and waits after it. Both then use the gathered tensor (an add, so that each writes its results
// in place). Compile with --numerics=fast (cuBLASLt linear, NCCL gather).
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @step(%x: tensor<8192x8192xbf16> {tp.name = "x"}, %w: tensor<8192x8192xbf16> {tp.name = "w"},
                %shard: tensor<4096x8192xbf16> {tp.name = "shard"})
    -> (tensor<8192x8192xbf16> {tp.name = "y"}, tensor<16384x8192xbf16> {tp.name = "gathered"}) {
  %f = "tp.all_gather_start"(%shard) {mesh = @world, axes = ["tp"], dim = 0 : i64}
      : (tensor<4096x8192xbf16>) -> !tp.future<tensor<16384x8192xbf16>>
  %y = "tp.linear"(%x, %w) : (tensor<8192x8192xbf16>, tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>
  %g = "tp.wait"(%f) : (!tp.future<tensor<16384x8192xbf16>>) -> tensor<16384x8192xbf16>
  %u = "tp.add"(%g, %g) : (tensor<16384x8192xbf16>, tensor<16384x8192xbf16>) -> tensor<16384x8192xbf16>
  return %y, %u : tensor<8192x8192xbf16>, tensor<16384x8192xbf16>
}
