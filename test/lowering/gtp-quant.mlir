// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --tp-shard --tp-gtp | FileCheck %s
// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --tp-shard --tp-gtp --tp-invariant --numerics invariant | FileCheck %s --check-prefix=INV

// tp-gtp's quantize-then-gather of weights quantized before their linears (inference: tp-autodiff
// has no gradient for the casts, so these cases are not in gtp.mlir, whose runs are training steps).

///---------------------------------------------------------------------------
/// [tp-gtp: per-tensor FP8 weights over gtp = 2]
/// Each rank quantizes its shard with the whole weight's amax: tp.amax of the shard, a max
/// all-reduce over gtp (exact: every rank gets the whole weight's), the quantize's amax operand.
/// So every rank computes the one scale of the whole weight, and only the 8-bit data is
/// gathered; the dequantize reads the local scale. The quantize and its amax move to where the
/// gather starts (--gtp-prefetch 1: one contraction ahead, or the top).
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @fp8(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x256xbf16>
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<256x256xbf16> {tp.name = "w1", tp.shard = {axes = {{\[\["gtp"\], \[\]\]}}, blocks = array<i64: 1, 1>, logical = array<i64: 512, 256>}}
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<128x256xbf16> {tp.name = "w2", tp.shard = {axes = {{\[\["gtp"\], \[\]\]}}
// CHECK-NEXT:    %[[A1:.*]] = "tp.amax"(%[[W1]]) : (tensor<256x256xbf16>) -> tensor<1xf32>
// CHECK-NEXT:    %[[M1:.*]] = "tp.all_reduce"(%[[A1]]) {axes = ["gtp"], mesh = @world, reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    %[[Q1:.*]]:2 = "tp.quantize"(%[[W1]], %[[M1]]) {format = "fp8_e4m3"} : (tensor<256x256xbf16>, tensor<1xf32>) -> (tensor<256x256xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[F1:.*]] = "tp.all_gather_start"(%[[Q1]]#0) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x256xf8E4M3FN>) -> !tp.future<tensor<512x256xf8E4M3FN>>
// CHECK-NEXT:    %[[H:.*]] = "tp.rmsnorm"
// CHECK-NEXT:    %[[G1:.*]] = "tp.wait"(%[[F1]]) : (!tp.future<tensor<512x256xf8E4M3FN>>) -> tensor<512x256xf8E4M3FN>
// CHECK-NEXT:    %[[D1:.*]] = "tp.dequantize"(%[[G1]], %[[Q1]]#1) {format = "fp8_e4m3"} : (tensor<512x256xf8E4M3FN>, tensor<1xf32>) -> tensor<512x256xbf16>
// CHECK-NEXT:    %[[A2:.*]] = "tp.amax"(%[[W2]])
// CHECK-NEXT:    %[[M2:.*]] = "tp.all_reduce"(%[[A2]]) {axes = ["gtp"], mesh = @world, reduce = "max"}
// CHECK-NEXT:    %[[Q2:.*]]:2 = "tp.quantize"(%[[W2]], %[[M2]]) {format = "fp8_e5m2"}
// CHECK-NEXT:    %[[F2:.*]] = "tp.all_gather_start"(%[[Q2]]#0) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<128x256xf8E5M2>) -> !tp.future<tensor<256x256xf8E5M2>>
// CHECK-NEXT:    %[[U:.*]] = "tp.linear"(%[[H]], %[[D1]]) {parallel = "column"}
// CHECK-NEXT:    %[[GLU:.*]] = "tp.glu"(%[[U]])
// CHECK-NEXT:    %[[G2:.*]] = "tp.wait"(%[[F2]])
// CHECK-NEXT:    %[[D2:.*]] = "tp.dequantize"(%[[G2]], %[[Q2]]#1) {format = "fp8_e5m2"}
// CHECK-NEXT:    "tp.linear"(%[[GLU]], %[[D2]]) {parallel = "row"}
/// The max all-reduce is exact in any order: tp-invariant leaves it as it is.
// INV-LABEL: func.func @fp8(
// INV:         "tp.all_reduce"({{.*}}) {axes = ["gtp"], mesh = @world, reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
// INV-NOT:     order = "canonical"
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
  func.func @fp8(%x: tensor<16x256xbf16> {tp.name = "x"}, %g: tensor<256xbf16> {tp.name = "gamma"},
                 %w1: tensor<512x256xbf16> {tp.name = "w1"}, %w2: tensor<256x256xbf16> {tp.name = "w2"})
      -> (tensor<16x256xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %g) {eps = 1.0e-05 : f32} : (tensor<16x256xbf16>, tensor<256xbf16>) -> tensor<16x256xbf16>
    %q1, %s1 = "tp.quantize"(%w1) {format = "fp8_e4m3"} : (tensor<512x256xbf16>) -> (tensor<512x256xf8E4M3FN>, tensor<1xf32>)
    %d1 = "tp.dequantize"(%q1, %s1) {format = "fp8_e4m3"} : (tensor<512x256xf8E4M3FN>, tensor<1xf32>) -> tensor<512x256xbf16>
    %u = "tp.linear"(%h, %d1) {parallel = "column"} : (tensor<16x256xbf16>, tensor<512x256xbf16>) -> tensor<16x512xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
    %q2, %s2 = "tp.quantize"(%w2) {format = "fp8_e5m2"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E5M2>, tensor<1xf32>)
    %d2 = "tp.dequantize"(%q2, %s2) {format = "fp8_e5m2"} : (tensor<256x256xf8E5M2>, tensor<1xf32>) -> tensor<256x256xbf16>
    %y = "tp.linear"(%a, %d2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<256x256xbf16>) -> tensor<16x256xbf16>
    return %y : tensor<16x256xbf16>
  }
}

// -----

///---------------------------------------------------------------------------
/// [tp-gtp: an NVFP4 weight over gtp = 2]
/// NVFP4's global scale (and through it every E4M3 block scale) comes from the whole weight's
/// amax, all-reduced as for FP8; the 4-bit data and the block scales (whole 128-row tiles: 256
/// rows per shard) are gathered, and the dequantize reads the local global scale.
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @nvfp4(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x256xbf16>
// CHECK-SAME:      %[[W:[^:]*]]: tensor<256x256xbf16> {tp.name = "w", tp.shard = {axes = {{\[\["gtp"\], \[\]\]}}
// CHECK-NEXT:    %[[A:.*]] = "tp.amax"(%[[W]]) : (tensor<256x256xbf16>) -> tensor<1xf32>
// CHECK-NEXT:    %[[M:.*]] = "tp.all_reduce"(%[[A]]) {axes = ["gtp"], mesh = @world, reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[W]], %[[M]]) {format = "nvfp4"} : (tensor<256x256xbf16>, tensor<1xf32>) -> (tensor<256x256xf4E2M1FN>, tensor<256x16xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[FD:.*]] = "tp.all_gather_start"(%[[Q]]#0) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x256xf4E2M1FN>) -> !tp.future<tensor<512x256xf4E2M1FN>>
// CHECK-NEXT:    %[[FS:.*]] = "tp.all_gather_start"(%[[Q]]#1) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x16xf8E4M3FN>) -> !tp.future<tensor<512x16xf8E4M3FN>>
// CHECK-NEXT:    %[[GD:.*]] = "tp.wait"(%[[FD]])
// CHECK-NEXT:    %[[GS:.*]] = "tp.wait"(%[[FS]])
// CHECK-NEXT:    %[[D:.*]] = "tp.dequantize"(%[[GD]], %[[GS]], %[[Q]]#2) {format = "nvfp4"} : (tensor<512x256xf4E2M1FN>, tensor<512x16xf8E4M3FN>, tensor<1xf32>) -> tensor<512x256xbf16>
// CHECK-NEXT:    "tp.linear"(%[[X]], %[[D]]) {parallel = "column"}
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
  func.func @nvfp4(%x: tensor<16x256xbf16> {tp.name = "x"}, %w: tensor<512x256xbf16> {tp.name = "w"})
      -> (tensor<16x512xbf16> {tp.name = "y"}) {
    %q, %s, %g = "tp.quantize"(%w) {format = "nvfp4"} : (tensor<512x256xbf16>) -> (tensor<512x256xf4E2M1FN>, tensor<512x16xf8E4M3FN>, tensor<1xf32>)
    %d = "tp.dequantize"(%q, %s, %g) {format = "nvfp4"} : (tensor<512x256xf4E2M1FN>, tensor<512x16xf8E4M3FN>, tensor<1xf32>) -> tensor<512x256xbf16>
    %y = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<16x256xbf16>, tensor<512x256xbf16>) -> tensor<16x512xbf16>
    return %y : tensor<16x512xbf16>
  }
}

// -----

///---------------------------------------------------------------------------
/// [tp-gtp: an NVFP4 weight with its amax written out, over gtp = 2 x tp = 2]
/// tp-shard completes the tp.amax of the tensor-parallel shard with a max all-reduce over tp;
/// tp-gtp then shards the weight over gtp too, and completes the amax over gtp first. The
/// quantize moves with that chain to where its gathers start (before the w0 linear); the stride-2
/// shard is gathered with blocks = 2, data and scales alike.
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @nvfp4_amax(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<256x256xbf16> {tp.name = "w", tp.shard = {axes = {{\[\["tp", "gtp"\], \[\]\]}}, blocks = array<i64: 2, 1>
// CHECK:         %[[A:.*]] = "tp.amax"(%[[W]]) : (tensor<256x256xbf16>) -> tensor<1xf32>
// CHECK-NEXT:    %[[MG:.*]] = "tp.all_reduce"(%[[A]]) {axes = ["gtp"], mesh = @world, reduce = "max"}
// CHECK-NEXT:    %[[MT:.*]] = "tp.all_reduce"(%[[MG]]) {axes = ["tp"], mesh = @world, reduce = "max"}
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[W]], %[[MT]]) {format = "nvfp4"}
// CHECK-NEXT:    "tp.all_gather_start"(%[[Q]]#0) {axes = ["gtp"], blocks = 2 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x256xf4E2M1FN>) -> !tp.future<tensor<512x256xf4E2M1FN>>
// CHECK-NEXT:    "tp.all_gather_start"(%[[Q]]#1) {axes = ["gtp"], blocks = 2 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x16xf8E4M3FN>) -> !tp.future<tensor<512x16xf8E4M3FN>>
// CHECK-NEXT:    "tp.linear"({{.*}}) {parallel = "column"} : (tensor<8x256xbf16>, tensor<128x256xbf16>) -> tensor<8x128xbf16>
// CHECK:         "tp.dequantize"({{.*}}, %[[Q]]#2) {format = "nvfp4"} : (tensor<512x256xf4E2M1FN>, tensor<512x16xf8E4M3FN>, tensor<1xf32>) -> tensor<512x256xbf16>
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["gtp", "tp"], shape = array<i64: 2, 2>} : () -> ()
  func.func @nvfp4_amax(%x: tensor<16x256xbf16> {tp.name = "x"}, %w0: tensor<256x256xbf16> {tp.name = "w0"},
                        %w: tensor<1024x256xbf16> {tp.name = "w"}) -> (tensor<16x512xbf16> {tp.name = "y"}) {
    %h = "tp.linear"(%x, %w0) {parallel = "column"} : (tensor<16x256xbf16>, tensor<256x256xbf16>) -> tensor<16x256xbf16>
    %a = "tp.amax"(%w) : (tensor<1024x256xbf16>) -> tensor<1xf32>
    %q, %s, %g = "tp.quantize"(%w, %a) {format = "nvfp4"} : (tensor<1024x256xbf16>, tensor<1xf32>) -> (tensor<1024x256xf4E2M1FN>, tensor<1024x16xf8E4M3FN>, tensor<1xf32>)
    %d = "tp.dequantize"(%q, %s, %g) {format = "nvfp4"} : (tensor<1024x256xf4E2M1FN>, tensor<1024x16xf8E4M3FN>, tensor<1xf32>) -> tensor<1024x256xbf16>
    %u = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<16x256xbf16>, tensor<1024x256xbf16>) -> tensor<16x1024xbf16>
    %y = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x1024xbf16>) -> tensor<16x512xbf16>
    return %y : tensor<16x512xbf16>
  }
}

// -----

///---------------------------------------------------------------------------
/// [tp-gtp: an MXFP8 weight over gtp = 2]
/// MXFP8 scales each 32-element block by its own amax: no amax, no all-reduce; data and E8M0
/// block scales are gathered.
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @mxfp8(
// CHECK-NOT:     "tp.amax"
// CHECK:         %[[Q:.*]]:2 = "tp.quantize"(%{{.*}}) {format = "mxfp8"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>)
// CHECK-NEXT:    "tp.all_gather_start"(%[[Q]]#0) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x256xf8E4M3FN>) -> !tp.future<tensor<512x256xf8E4M3FN>>
// CHECK-NEXT:    "tp.all_gather_start"(%[[Q]]#1) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x8xf8E8M0FNU>) -> !tp.future<tensor<512x8xf8E8M0FNU>>
// CHECK-NOT:     "tp.all_reduce"
// CHECK:         return
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
  func.func @mxfp8(%x: tensor<16x256xbf16> {tp.name = "x"}, %w: tensor<512x256xbf16> {tp.name = "w"})
      -> (tensor<16x512xbf16> {tp.name = "y"}) {
    %q, %s = "tp.quantize"(%w) {format = "mxfp8"} : (tensor<512x256xbf16>) -> (tensor<512x256xf8E4M3FN>, tensor<512x8xf8E8M0FNU>)
    %d = "tp.dequantize"(%q, %s) {format = "mxfp8"} : (tensor<512x256xf8E4M3FN>, tensor<512x8xf8E8M0FNU>) -> tensor<512x256xbf16>
    %y = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<16x256xbf16>, tensor<512x256xbf16>) -> tensor<16x512xbf16>
    return %y : tensor<16x512xbf16>
  }
}
