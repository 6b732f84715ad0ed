// RUN: tpc-opt %s --split-input-file --tp-autodiff --tp-shard | FileCheck %s

///---------------------------------------------------------------------------
/// [Rules: backward of column -> GLU -> row, tp=2 x dp=2]
/// OUT: row linear_dgrad stays sharded along K (no communication); column linear_dgrad is an f32
///      partial completed by an all-reduce over tp; every weight gradient is an f32 partial over
///      the data-parallel tokens, all-reduced over dp.
///---------------------------------------------------------------------------
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 2>} : () -> ()
// CHECK-LABEL: func.func @mlp_train(
// CHECK-SAME:      {tp.grad_of = 1 : i64, tp.name = "w1_grad", tp.shard = {axes = {{\[\["tp"\], \[\]\]}}, blocks = array<i64: 2, 1>
// CHECK-SAME:      {tp.grad_of = 2 : i64, tp.name = "w2_grad", tp.shard = {axes = {{\[\[\], \["tp"\]\]}}
// CHECK:         %[[W2P:.*]] = "tp.linear_wgrad"({{.*}}) {parallel = "row", partial = true} : (tensor<8x128xbf16>, tensor<8x128xbf16>) -> tensor<128x128xf32>
// CHECK-NEXT:    %[[W2G:.*]] = "tp.all_reduce"(%[[W2P]]) {axes = ["dp"], mesh = @world} : (tensor<128x128xf32>) -> tensor<128x128xf32>
// CHECK-NEXT:    %[[DA:.*]] = "tp.linear_dgrad"({{.*}}) {parallel = "row"} : (tensor<8x128xbf16>, tensor<128x128xbf16>) -> tensor<8x128xbf16>
// CHECK-NEXT:    %[[DU:.*]] = "tp.glu_grad"({{.*}}, %[[DA]]) {kind = "swiglu"} : (tensor<8x256xbf16>, tensor<8x128xbf16>) -> tensor<8x256xbf16>
// CHECK-NEXT:    %[[W1P:.*]] = "tp.linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column", partial = true} : (tensor<8x256xbf16>, tensor<8x128xbf16>) -> tensor<256x128xf32>
// CHECK-NEXT:    "tp.all_reduce"(%[[W1P]]) {axes = ["dp"], mesh = @world}
// CHECK-NEXT:    %[[DXP:.*]] = "tp.linear_dgrad"(%[[DU]], {{.*}}) {parallel = "column", partial = true} : (tensor<8x256xbf16>, tensor<256x128xbf16>) -> tensor<8x128xf32>
// CHECK-NEXT:    "tp.all_reduce"(%[[DXP]]) {axes = ["tp"], mesh = @world} : (tensor<8x128xf32>) -> tensor<8x128xbf16>
func.func @mlp_train(%x: tensor<16x128xbf16> {tp.name = "x"}, %w1: tensor<512x128xbf16> {tp.name = "w1"},
                     %w2: tensor<128x256xbf16> {tp.name = "w2"}) -> (tensor<16x128xbf16> {tp.name = "y"}) {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

// -----

/// [Rules: backward under sequence parallelism, tp=2] the cotangent (token-sharded like the
/// output) is all-gathered before the row-parallel gradients; the column-parallel dgrad is
/// reduce-scattered back to the token shards; the norm's dgamma is all-reduced over tp.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
// CHECK-LABEL: func.func @sp_train(
// CHECK-SAME:      %[[COT:[^:]*]]: tensor<8x128xbf16> {tp.cotangent = 0 : i64, tp.name = "y_grad"
// CHECK:         %[[C:.*]] = "tp.all_gather"(%[[COT]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<8x128xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    "tp.linear_wgrad"(%[[C]],
// CHECK:         %[[DXP:.*]] = "tp.linear_dgrad"({{.*}}) {parallel = "column", partial = true, sequence_parallel = true}
// CHECK-NEXT:    %[[DX:.*]] = "tp.reduce_scatter"(%[[DXP]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<16x128xf32>) -> tensor<8x128xbf16>
// CHECK-NEXT:    %[[N:.*]]:2 = "tp.rmsnorm_grad"({{.*}}, %[[DX]]) {eps = {{.*}}, partial = true}
// CHECK-NEXT:    "tp.all_reduce"(%[[N]]#1) {axes = ["tp"], mesh = @world} : (tensor<128xf32>) -> tensor<128xf32>
func.func @sp_train(%x: tensor<16x128xbf16> {tp.name = "x"}, %g: tensor<128xbf16> {tp.name = "gamma"},
                    %w1: tensor<512x128xbf16> {tp.name = "w1"}, %w2: tensor<128x256xbf16> {tp.name = "w2"})
    -> (tensor<16x128xbf16> {tp.name = "y"}) {
  %h = "tp.rmsnorm"(%x, %g) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  %u = "tp.linear"(%h, %w1) {parallel = "column", sequence_parallel = true} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  %d = "tp.linear"(%a, %w2) {parallel = "row", sequence_parallel = true} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}
