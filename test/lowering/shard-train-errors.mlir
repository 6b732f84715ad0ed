// RUN: tpc-opt %s --tp-autodiff --tp-shard --verify-diagnostics
// A training step whose result stays sharded along a non-token dimension: its cotangent argument is
// laid out like an activation, which the backward ops cannot consume, so tp-shard refuses.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @sharded_result(%x: tensor<16x128xbf16>, %w1: tensor<64x128xbf16>) -> tensor<16x32xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<64x128xbf16>) -> tensor<16x64xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x64xbf16>) -> tensor<16x32xbf16>
  // expected-error@+1 {{tp-shard: training step: result 0 is laid out [-, tp], but its cotangent argument is laid out like an activation, [-, -]; return a value that is replicated or sharded along the tokens only (e.g. after a row-parallel linear)}}
  return %a : tensor<16x32xbf16>
}
