// RUN: tpc-opt %s --split-input-file --tp-shard | FileCheck %s

///---------------------------------------------------------------------------
/// [Rule: column-parallel linear -> GLU -> row-parallel linear]
/// IN:  logical FC1 [512,128], FC2 [128,256] on a tp=4 mesh
/// OUT: FC1 sharded in 2 blocks (stride 2: matching gate/up rows), FC2 sharded along K, an f32
///      partial completed by tp.all_reduce into bf16; activations replicated.
///---------------------------------------------------------------------------

"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
// CHECK-LABEL: func.func @mlp_column_row(
// CHECK-SAME:      %[[X:.*]]: tensor<16x128xbf16> {tp.shard = {axes = {{\[\[\], \[\]\]}}, blocks = array<i64: 1, 1>, logical = array<i64: 16, 128>}},
// CHECK-SAME:      %[[W1:.*]]: tensor<128x128xbf16> {tp.shard = {axes = {{\[\["tp"\], \[\]\]}}, blocks = array<i64: 2, 1>, logical = array<i64: 512, 128>}},
// CHECK-SAME:      %[[W2:.*]]: tensor<128x64xbf16> {tp.shard = {axes = {{\[\[\], \["tp"\]\]}}, blocks = array<i64: 1, 1>, logical = array<i64: 128, 256>}})
// CHECK-SAME:      -> (tensor<16x128xbf16> {tp.shard = {axes = {{\[\[\], \[\]\]}}
// CHECK-NEXT:    %[[U:.*]] = "tp.linear"(%[[X]], %[[W1]]) {parallel = "column"} : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    %[[A:.*]] = "tp.glu"(%[[U]]) {kind = "swiglu"} : (tensor<16x128xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT:    %[[P:.*]] = "tp.linear"(%[[A]], %[[W2]]) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @mlp_column_row(%x: tensor<16x128xbf16>, %w1: tensor<512x128xbf16>, %w2: tensor<128x256xbf16>) -> tensor<16x128xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

// -----

/// [Rule: sequence parallelism] tokens are sharded over tp around the block: an all-gather
/// before the column-parallel linear, a reduce-scatter after the row-parallel one, and the norm
/// and the residual add on the local tokens.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
// CHECK-LABEL: func.func @sequence_parallel(
// CHECK-SAME:      %[[X:.*]]: tensor<8x128xbf16> {tp.shard = {axes = {{\[\["tp"\], \[\]\]}}
// CHECK:         %[[H:.*]] = "tp.rmsnorm"(%[[X]], %{{.*}}) {{.*}} -> tensor<8x128xbf16>
// CHECK-NEXT:    %[[G:.*]] = "tp.all_gather"(%[[H]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<8x128xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    %[[U:.*]] = "tp.linear"(%[[G]], %{{.*}}) {parallel = "column", sequence_parallel = true} : (tensor<16x128xbf16>, tensor<256x128xbf16>) -> tensor<16x256xbf16>
// CHECK-NEXT:    %[[A:.*]] = "tp.glu"(%[[U]])
// CHECK-NEXT:    %[[P:.*]] = "tp.linear"(%[[A]], %{{.*}}) {parallel = "row", partial = true, sequence_parallel = true} : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xf32>
// CHECK-NEXT:    %[[D:.*]] = "tp.reduce_scatter"(%[[P]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<16x128xf32>) -> tensor<8x128xbf16>
// CHECK-NEXT:    %[[Y:.*]] = "tp.add"(%[[X]], %[[D]]) : (tensor<8x128xbf16>, tensor<8x128xbf16>) -> tensor<8x128xbf16>
func.func @sequence_parallel(%x: tensor<16x128xbf16>, %g: tensor<128xbf16>, %w1: tensor<512x128xbf16>, %w2: tensor<128x256xbf16>) -> tensor<16x128xbf16> {
  %h = "tp.rmsnorm"(%x, %g) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  %u = "tp.linear"(%h, %w1) {parallel = "column", sequence_parallel = true} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  %d = "tp.linear"(%a, %w2) {parallel = "row", sequence_parallel = true} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  %y = "tp.add"(%x, %d) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// [Rule: data parallelism] activations are split along tokens over dp; weights are replicated
/// over dp; an interleaved GLU (blocks of 32) needs no stride-2 sharding.
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 2>} : () -> ()
// CHECK-LABEL: func.func @data_parallel_interleaved(
// CHECK-SAME:      %[[X:.*]]: tensor<8x128xbf16> {tp.shard = {axes = {{\[\["dp"\], \[\]\]}}
// CHECK-SAME:      %[[W1:.*]]: tensor<256x128xbf16> {tp.shard = {axes = {{\[\["tp"\], \[\]\]}}, blocks = array<i64: 1, 1>
// CHECK:         "tp.glu"({{.*}}) {interleave = 32 : i64, kind = "swiglu"} : (tensor<8x256xbf16>) -> tensor<8x128xbf16>
func.func @data_parallel_interleaved(%x: tensor<16x128xbf16>, %w1: tensor<512x128xbf16>) -> tensor<16x256xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu", interleave = 32 : i64} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %a : tensor<16x256xbf16>
}

// -----

/// [Rule: expert tensor parallelism] each expert's FC1 is column-sharded (stride 2 within every
/// expert), FC2 row-sharded and completed by an all-reduce; routing and permutation replicated.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
// CHECK-LABEL: func.func @expert_tensor_parallel(
// CHECK-SAME:      %{{.*}}: tensor<4x64x128xbf16> {tp.shard = {axes = {{\[\[\], \["tp"\], \[\]\]}}, blocks = array<i64: 1, 2, 1>
// CHECK-SAME:      %{{.*}}: tensor<4x128x32xbf16> {tp.shard = {axes = {{\[\[\], \[\], \["tp"\]\]}}
// CHECK:         "tp.grouped_linear"({{.*}}) {parallel = "column"} : (tensor<32x128xbf16>, tensor<4x64x128xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
// CHECK:         "tp.grouped_linear"({{.*}}) {parallel = "row", partial = true} : (tensor<32x32xbf16>, tensor<4x128x32xbf16>, tensor<4xi64>) -> tensor<32x128xf32>
// CHECK-NEXT:    "tp.all_reduce"
func.func @expert_tensor_parallel(%x: tensor<16x128xbf16>, %r: tensor<4x128xbf16>, %w1: tensor<4x128x128xbf16>, %w2: tensor<4x128x64xbf16>) -> tensor<16x128xbf16> {
  %l = "tp.linear"(%x, %r) : (tensor<16x128xbf16>, tensor<4x128xbf16>) -> tensor<16x4xbf16>
  %i, %w = "tp.moe_route"(%l) {top_k = 2 : i64} : (tensor<16x4xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  %p, %s, %m = "tp.moe_permute"(%x, %i) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<4xi64>, tensor<32xi32>)
  %h = "tp.grouped_linear"(%p, %w1, %s) {parallel = "column"} : (tensor<32x128xbf16>, tensor<4x128x128xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  %a = "tp.glu"(%h) {kind = "swiglu"} : (tensor<32x128xbf16>) -> tensor<32x64xbf16>
  %o = "tp.grouped_linear"(%a, %w2, %s) {parallel = "row"} : (tensor<32x64xbf16>, tensor<4x128x64xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  %y = "tp.moe_unpermute"(%o, %m, %w) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// On a mesh of size 1 the per-rank program is the logical one: no collectives, no partials.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 1>} : () -> ()
// CHECK-LABEL: func.func @tp1_is_logical(
// CHECK-NOT:     "tp.all_reduce"
// CHECK:         "tp.linear"({{.*}}) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
func.func @tp1_is_logical(%a: tensor<16x256xbf16>, %w2: tensor<128x256xbf16>) -> tensor<16x128xbf16> {
  %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

// -----

/// [Rule: expert parallelism] tokens sharded over ep; after the permutation the rows go to the
/// ranks owning their experts in fixed-capacity buckets (all-to-all of rows and of counts), the
/// grouped linears run over the received segments, and a second all-to-all and tp.moe_unbucket
/// bring the rows back before the combine.
"tp.mesh"() {sym_name = "world", axes = ["ep"], shape = array<i64: 2>} : () -> ()
// CHECK-LABEL: func.func @expert_parallel(
// CHECK-SAME:      %[[X:.*]]: tensor<8x128xbf16> {tp.shard = {axes = {{\[\["ep"\], \[\]\]}}
// CHECK-SAME:      %{{.*}}: tensor<2x128x128xbf16> {tp.shard = {axes = {{\[\["ep"\], \[\], \[\]\]}}
// CHECK:         %[[P:.*]]:3 = "tp.moe_permute"(%[[X]], %{{.*}}) {{.*}} -> (tensor<16x128xbf16>, tensor<4xi64>, tensor<16xi32>)
// CHECK-NEXT:    %[[B:.*]] = "tp.moe_bucket"(%[[P]]#0, %[[P]]#1) {buckets = 2 : i64} : (tensor<16x128xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
// CHECK-NEXT:    %[[R:.*]] = "tp.all_to_all"(%[[B]]) {axes = ["ep"], concat_dim = 0 : i64, mesh = @world, split_dim = 0 : i64}
// CHECK-NEXT:    %[[C:.*]] = "tp.all_to_all"(%[[P]]#1) {axes = ["ep"], concat_dim = 0 : i64, mesh = @world, split_dim = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT:    %[[H:.*]] = "tp.grouped_linear"(%[[R]], %{{.*}}, %[[C]])
// CHECK-NEXT:    %[[A:.*]] = "tp.glu"(%[[H]])
// CHECK-NEXT:    %[[O:.*]] = "tp.grouped_linear"(%[[A]], %{{.*}}, %[[C]])
// CHECK-NEXT:    %[[BACK:.*]] = "tp.all_to_all"(%[[O]])
// CHECK-NEXT:    %[[U:.*]] = "tp.moe_unbucket"(%[[BACK]], %[[P]]#1) {buckets = 2 : i64} : (tensor<32x128xbf16>, tensor<4xi64>) -> tensor<16x128xbf16>
// CHECK-NEXT:    "tp.moe_unpermute"(%[[U]], %[[P]]#2, %{{.*}}) {{.*}} -> tensor<8x128xbf16>
func.func @expert_parallel(%x: tensor<16x128xbf16>, %r: tensor<4x128xbf16>, %w1: tensor<4x128x128xbf16>, %w2: tensor<4x128x64xbf16>) -> tensor<16x128xbf16> {
  %l = "tp.linear"(%x, %r) : (tensor<16x128xbf16>, tensor<4x128xbf16>) -> tensor<16x4xbf16>
  %i, %w = "tp.moe_route"(%l) {top_k = 2 : i64} : (tensor<16x4xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  %p, %s, %m = "tp.moe_permute"(%x, %i) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<4xi64>, tensor<32xi32>)
  %h = "tp.grouped_linear"(%p, %w1, %s) {parallel = "column"} : (tensor<32x128xbf16>, tensor<4x128x128xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  %a = "tp.glu"(%h) {kind = "swiglu"} : (tensor<32x128xbf16>) -> tensor<32x64xbf16>
  %o = "tp.grouped_linear"(%a, %w2, %s) {parallel = "row"} : (tensor<32x64xbf16>, tensor<4x128x64xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  %y = "tp.moe_unpermute"(%o, %m, %w) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// [Rule: row-parallel bias] the partial linear drops the bias; it is added once, after the
/// all-reduce, as a broadcast tp.add; a column-parallel bias is sharded like N (stride 2 here).
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
// CHECK-LABEL: func.func @row_bias(
// CHECK-SAME:      %[[B1:[^:]*]]: tensor<128xbf16> {tp.shard = {axes = {{\[\["tp"\]\]}}, blocks = array<i64: 2>
// CHECK-SAME:      %[[B2:[^:]*]]: tensor<64xbf16> {tp.shard = {axes = {{\[\[\]\]}}
// CHECK:         %[[P:.*]] = "tp.linear"(%{{.*}}, %{{.*}}) {parallel = "row", partial = true} : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xf32>
// CHECK-NEXT:    %[[R:.*]] = "tp.all_reduce"(%[[P]])
// CHECK-NEXT:    %[[Y:.*]] = "tp.add"(%[[R]], %[[B2]]) : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @row_bias(%x: tensor<8x64xbf16>, %w1: tensor<256x64xbf16>, %b1: tensor<256xbf16>,
                    %w2: tensor<64x128xbf16>, %b2: tensor<64xbf16>) -> tensor<8x64xbf16> {
  %u = "tp.linear"(%x, %w1, %b1) {parallel = "column"} : (tensor<8x64xbf16>, tensor<256x64xbf16>, tensor<256xbf16>) -> tensor<8x256xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<8x256xbf16>) -> tensor<8x128xbf16>
  %d = "tp.linear"(%a, %w2, %b2) {parallel = "row"} : (tensor<8x128xbf16>, tensor<64x128xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  return %d : tensor<8x64xbf16>
}

// -----

/// [Rule: sequence-parallel MoE] every tp rank routes its own tokens; the column-parallel
/// grouped linear all-gathers the rows and the counts (one segment per rank), the row-parallel
/// one reduce-scatters its f32 partial back to the rows' owners.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
// CHECK-LABEL: func.func @moe_sequence_parallel(
// CHECK:         %[[P:.*]]:3 = "tp.moe_permute"{{.*}} -> (tensor<16x128xbf16>, tensor<4xi64>, tensor<16xi32>)
// CHECK-NEXT:    %[[C:.*]] = "tp.all_gather"(%[[P]]#1) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<4xi64>) -> tensor<8xi64>
// CHECK-NEXT:    %[[R:.*]] = "tp.all_gather"(%[[P]]#0) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<16x128xbf16>) -> tensor<32x128xbf16>
// CHECK-NEXT:    %[[H:.*]] = "tp.grouped_linear"(%[[R]], %{{.*}}, %[[C]])
// CHECK-NEXT:    %[[A:.*]] = "tp.glu"(%[[H]])
// CHECK-NEXT:    %[[O:.*]] = "tp.grouped_linear"(%[[A]], %{{.*}}, %[[C]]) {parallel = "row", partial = true, sequence_parallel = true}
// CHECK-NEXT:    %[[Y:.*]] = "tp.reduce_scatter"(%[[O]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<32x128xf32>) -> tensor<16x128xbf16>
// CHECK-NEXT:    "tp.moe_unpermute"(%[[Y]],
func.func @moe_sequence_parallel(%x: tensor<16x128xbf16>, %r: tensor<4x128xbf16>, %w1: tensor<4x128x128xbf16>, %w2: tensor<4x128x64xbf16>) -> tensor<16x128xbf16> {
  %l = "tp.linear"(%x, %r) : (tensor<16x128xbf16>, tensor<4x128xbf16>) -> tensor<16x4xbf16>
  %i, %w = "tp.moe_route"(%l) {top_k = 2 : i64} : (tensor<16x4xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  %p, %s, %m = "tp.moe_permute"(%x, %i) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<4xi64>, tensor<32xi32>)
  %h = "tp.grouped_linear"(%p, %w1, %s) {parallel = "column", sequence_parallel = true} : (tensor<32x128xbf16>, tensor<4x128x128xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  %a = "tp.glu"(%h) {kind = "swiglu"} : (tensor<32x128xbf16>) -> tensor<32x64xbf16>
  %o = "tp.grouped_linear"(%a, %w2, %s) {parallel = "row", sequence_parallel = true} : (tensor<32x64xbf16>, tensor<4x128x64xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  %y = "tp.moe_unpermute"(%o, %m, %w) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// [Rule: tp.amax, and a quantize that takes it] the amax of a sharded tensor is each rank's amax
/// of its shard, completed by a max all-reduce over the axes that shard it (tp for the row-parallel
/// weight's K, dp for the tokens of y): the whole tensor's amax, replicated. A quantize with that
/// amax may take a sharded x: NVFP4 data and block scales keep x's layout (128 rows, 8 scale
/// columns per rank: whole tiles), the global scale is replicated.
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 2>} : () -> ()
// CHECK-LABEL: func.func @amax_row_nvfp4(
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<128x128xbf16> {tp.shard = {axes = {{\[\[\], \["tp"\]\]}}
// CHECK:         %[[A:.*]] = "tp.amax"(%[[W2]]) : (tensor<128x128xbf16>) -> tensor<1xf32>
// CHECK-NEXT:    %[[M:.*]] = "tp.all_reduce"(%[[A]]) {axes = ["tp"], mesh = @world, reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[W2]], %[[M]]) {format = "nvfp4"} : (tensor<128x128xbf16>, tensor<1xf32>) -> (tensor<128x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[D:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1, %[[Q]]#2) {format = "nvfp4"} : (tensor<128x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>) -> tensor<128x128xbf16>
// CHECK-NEXT:    %[[P:.*]] = "tp.linear"(%{{.*}}, %[[D]]) {parallel = "row", partial = true}
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world} : (tensor<4x128xf32>) -> tensor<4x128xbf16>
// CHECK-NEXT:    %[[AY:.*]] = "tp.amax"(%[[Y]]) : (tensor<4x128xbf16>) -> tensor<1xf32>
// CHECK-NEXT:    %[[MY:.*]] = "tp.all_reduce"(%[[AY]]) {axes = ["dp"], mesh = @world, reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    return %[[Y]], %[[MY]]
func.func @amax_row_nvfp4(%x: tensor<8x128xbf16>, %w1: tensor<256x128xbf16>, %w2: tensor<128x256xbf16>) -> (tensor<8x128xbf16>, tensor<1xf32>) {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<8x128xbf16>, tensor<256x128xbf16>) -> tensor<8x256xbf16>
  %a = "tp.amax"(%w2) : (tensor<128x256xbf16>) -> tensor<1xf32>
  %q, %s, %g = "tp.quantize"(%w2, %a) {format = "nvfp4"} : (tensor<128x256xbf16>, tensor<1xf32>) -> (tensor<128x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<1xf32>)
  %d = "tp.dequantize"(%q, %s, %g) {format = "nvfp4"} : (tensor<128x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<1xf32>) -> tensor<128x256xbf16>
  %y = "tp.linear"(%u, %d) {parallel = "row"} : (tensor<8x256xbf16>, tensor<128x256xbf16>) -> tensor<8x128xbf16>
  %ay = "tp.amax"(%y) : (tensor<8x128xbf16>) -> tensor<1xf32>
  return %y, %ay : tensor<8x128xbf16>, tensor<1xf32>
}

// -----

///---------------------------------------------------------------------------
/// [Rules: a module of gradients alone, tp=2 x dp=2]
/// OUT: a weight or group sizes that an argument gives a backward op first take the forward op's
///      layout (replicated here: no parallel attribute), never the activations' (tokens over dp);
///      the grouped weight gradient sums the dp replicas' tokens.
///---------------------------------------------------------------------------
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 2>} : () -> ()
// CHECK-LABEL: func.func @grouped_grads(
// CHECK-SAME:      %{{[^:]*}}: tensor<16x16xbf16> {tp.shard = {axes = {{\[\["dp"\], \[\]\]}}
// CHECK-SAME:      %{{[^:]*}}: tensor<4x16x64xbf16> {tp.shard = {axes = {{\[\[\], \[\], \[\]\]}}
// CHECK-SAME:      %{{[^:]*}}: tensor<16x64xbf16> {tp.shard = {axes = {{\[\["dp"\], \[\]\]}}
// CHECK-SAME:      %{{[^:]*}}: tensor<4xi64> {tp.shard = {axes = {{\[\[\]\]}}
// CHECK:         "tp.grouped_linear_dgrad"({{.*}}) : (tensor<16x16xbf16>, tensor<4x16x64xbf16>, tensor<4xi64>) -> tensor<16x64xbf16>
// CHECK-NEXT:    %[[P:.*]] = "tp.grouped_linear_wgrad"({{.*}}) {partial = true} : (tensor<16x16xbf16>, tensor<16x64xbf16>, tensor<4xi64>) -> tensor<4x16x64xf32>
// CHECK-NEXT:    "tp.all_reduce"(%[[P]]) {axes = ["dp"], mesh = @world}
func.func @grouped_grads(%dy: tensor<32x16xbf16>, %w: tensor<4x16x64xbf16>, %x: tensor<32x64xbf16>, %g: tensor<4xi64>)
    -> (tensor<32x64xbf16>, tensor<4x16x64xf32>) {
  %dx = "tp.grouped_linear_dgrad"(%dy, %w, %g) : (tensor<32x16xbf16>, tensor<4x16x64xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
  %dw = "tp.grouped_linear_wgrad"(%dy, %x, %g) : (tensor<32x16xbf16>, tensor<32x64xbf16>, tensor<4xi64>) -> tensor<4x16x64xf32>
  return %dx, %dw : tensor<32x64xbf16>, tensor<4x16x64xf32>
}

// -----

/// A row-parallel linear_dgrad whose weight is an argument: sharded along K over tp, like the
/// forward weight, and dx with it.
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 2>} : () -> ()
// CHECK-LABEL: func.func @row_dgrad(
// CHECK-SAME:      %{{[^:]*}}: tensor<128x64xbf16> {tp.shard = {axes = {{\[\[\], \["tp"\]\]}}
// CHECK:         "tp.linear_dgrad"({{.*}}) {parallel = "row"} : (tensor<8x128xbf16>, tensor<128x64xbf16>) -> tensor<8x64xbf16>
func.func @row_dgrad(%dy: tensor<16x128xbf16>, %w: tensor<128x128xbf16>) -> tensor<16x128xbf16> {
  %dx = "tp.linear_dgrad"(%dy, %w) {parallel = "row"} : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xbf16>
  return %dx : tensor<16x128xbf16>
}

// -----

/// Column-parallel dgrads whose dy and w are both arguments: dy takes the forward output's layout
/// (N over tp, like w), so dx is an f32 partial completed over tp.
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 2>} : () -> ()
// CHECK-LABEL: func.func @column_dgrad(
// CHECK-SAME:      %{{[^:]*}}: tensor<8x128xbf16> {tp.shard = {axes = {{\[\["dp"\], \["tp"\]\]}}
// CHECK-SAME:      %{{[^:]*}}: tensor<128x128xbf16> {tp.shard = {axes = {{\[\["tp"\], \[\]\]}}
// CHECK:         %[[P:.*]] = "tp.linear_dgrad"({{.*}}) {parallel = "column", partial = true} : (tensor<8x128xbf16>, tensor<128x128xbf16>) -> tensor<8x128xf32>
// CHECK-NEXT:    "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world}
// CHECK-LABEL: func.func @grouped_column_dgrad(
// CHECK-SAME:      %{{[^:]*}}: tensor<16x8xbf16> {tp.shard = {axes = {{\[\["dp"\], \["tp"\]\]}}
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8x64xbf16> {tp.shard = {axes = {{\[\[\], \["tp"\], \[\]\]}}
// CHECK:         "tp.grouped_linear_dgrad"({{.*}}) {parallel = "column", partial = true}
func.func @column_dgrad(%dy: tensor<16x256xbf16>, %w: tensor<256x128xbf16>) -> tensor<16x128xbf16> {
  %dx = "tp.linear_dgrad"(%dy, %w) {parallel = "column"} : (tensor<16x256xbf16>, tensor<256x128xbf16>) -> tensor<16x128xbf16>
  return %dx : tensor<16x128xbf16>
}
func.func @grouped_column_dgrad(%dy: tensor<32x16xbf16>, %w: tensor<4x16x64xbf16>, %g: tensor<4xi64>) -> tensor<32x64xbf16> {
  %dx = "tp.grouped_linear_dgrad"(%dy, %w, %g) {parallel = "column"} : (tensor<32x16xbf16>, tensor<4x16x64xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
  return %dx : tensor<32x64xbf16>
}
