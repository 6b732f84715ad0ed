// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --gtp-wgrad scatter --tp-autodiff --tp-shard --tp-gtp | FileCheck %s
// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --gtp-wgrad scatter --tp-autodiff --tp-shard --tp-gtp --tp-invariant --numerics invariant | FileCheck %s --check-prefix=INV
// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --gtp-wgrad scatter --tp-autodiff --tp-shard --tp-gtp | FileCheck %s --check-prefix=COUNT
// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --gtp-wgrad gather --tp-autodiff --tp-shard --tp-gtp | FileCheck %s --check-prefix=GATHER
// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --tp-autodiff --tp-shard --tp-gtp | FileCheck %s --check-prefix=GATHER
// RUN: tpc-opt %s --split-input-file --gtp-prefetch 1 --gtp-wgrad gather --tp-autodiff --tp-shard --tp-gtp --tp-invariant --numerics invariant | FileCheck %s --check-prefix=GINV

///---------------------------------------------------------------------------
/// [tp-gtp: a training step over gtp = 2 x tp = 2]
/// Weights: w1 (column-parallel, stride-2 for the GLU) and w2 (row-parallel) become gtp shards
/// of their tensor-parallel shards along the output features; gtp is the minor axis of that dim,
/// so w1's [256,128] tp shard in 2 blocks is stored as [128,128] and gathered back with
/// blocks = 2. gamma (a norm parameter) stays whole. Every use gets its own gather, started one
/// contraction ahead (--gtp-prefetch 1: before the previous contraction, or at the top) and
/// waited for just before the use: the backward re-gathers. The weight gradients, summed over the
/// token axis gtp by tp-shard, are reduce-scattered back to the shards instead, in f32, waited
/// for before the second contraction after them.
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<128x128xbf16> {tp.name = "w1", tp.shard = {axes = {{\[\["tp", "gtp"\], \[\]\]}}, blocks = array<i64: 2, 1>, logical = array<i64: 512, 128>}}
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<64x128xbf16> {tp.name = "w2", tp.shard = {axes = {{\[\["gtp"\], \["tp"\]\]}}, blocks = array<i64: 1, 1>, logical = array<i64: 128, 256>}}
// CHECK-SAME:      tensor<128xf32> {tp.grad_of = 1 : i64, tp.name = "gamma_grad", tp.shard = {axes = {{\[\[\]\]}}
// CHECK-SAME:      tensor<128x128xf32> {tp.grad_of = 2 : i64, tp.name = "w1_grad", tp.shard = {axes = {{\[\["tp", "gtp"\], \[\]\]}}
// CHECK-SAME:      tensor<64x128xf32> {tp.grad_of = 3 : i64, tp.name = "w2_grad", tp.shard = {axes = {{\[\["gtp"\], \["tp"\]\]}}
// CHECK-SAME:      attributes {tp.gtp_prefetch = 1 : i64}
// CHECK-NEXT:    %[[F1:.*]] = "tp.all_gather_start"(%[[W1]]) {axes = ["gtp"], blocks = 2 : i64, dim = 0 : i64, mesh = @world} : (tensor<128x128xbf16>) -> !tp.future<tensor<256x128xbf16>>
// CHECK-NEXT:    %[[H:.*]] = "tp.rmsnorm"
// CHECK-NEXT:    %[[G1:.*]] = "tp.wait"(%[[F1]]) : (!tp.future<tensor<256x128xbf16>>) -> tensor<256x128xbf16>
// CHECK-NEXT:    %[[F2:.*]] = "tp.all_gather_start"(%[[W2]]) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<64x128xbf16>) -> !tp.future<tensor<128x128xbf16>>
// CHECK-NEXT:    %[[U:.*]] = "tp.linear"(%[[H]], %[[G1]]) {parallel = "column"} : (tensor<8x128xbf16>, tensor<256x128xbf16>) -> tensor<8x256xbf16>
// CHECK-NEXT:    %[[A:.*]] = "tp.glu"(%[[U]])
// CHECK-NEXT:    %[[G2:.*]] = "tp.wait"(%[[F2]])
// CHECK-NEXT:    "tp.linear"(%[[A]], %[[G2]]) {parallel = "row", partial = true}
// CHECK:         %[[F2B:.*]] = "tp.all_gather_start"(%[[W2]])
// CHECK-NEXT:    %[[P2:.*]] = "tp.linear_wgrad"({{.*}}) {parallel = "row", partial = true} : (tensor<8x128xbf16>, tensor<8x128xbf16>) -> tensor<128x128xf32>
// CHECK-NEXT:    %[[R2:.*]] = "tp.reduce_scatter_start"(%[[P2]]) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<128x128xf32>) -> !tp.future<tensor<64x128xf32>>
// CHECK-NEXT:    %[[G2B:.*]] = "tp.wait"(%[[F2B]])
// CHECK-NEXT:    "tp.linear_dgrad"({{.*}}, %[[G2B]]) {parallel = "row"}
// CHECK-NEXT:    "tp.glu_grad"
// CHECK-NEXT:    %[[F1B:.*]] = "tp.all_gather_start"(%[[W1]]) {axes = ["gtp"], blocks = 2 : i64
// CHECK-NEXT:    %[[S2:.*]] = "tp.wait"(%[[R2]]) : (!tp.future<tensor<64x128xf32>>) -> tensor<64x128xf32>
// CHECK-NEXT:    %[[P1:.*]] = "tp.linear_wgrad"({{.*}}) {parallel = "column", partial = true} : (tensor<8x256xbf16>, tensor<8x128xbf16>) -> tensor<256x128xf32>
// CHECK-NEXT:    %[[R1:.*]] = "tp.reduce_scatter_start"(%[[P1]]) {axes = ["gtp"], blocks = 2 : i64, dim = 0 : i64, mesh = @world} : (tensor<256x128xf32>) -> !tp.future<tensor<128x128xf32>>
// CHECK-NEXT:    %[[G1B:.*]] = "tp.wait"(%[[F1B]])
// CHECK-NEXT:    "tp.linear_dgrad"({{.*}}, %[[G1B]]) {parallel = "column", partial = true}
// CHECK:         "tp.all_reduce"({{.*}}) {axes = ["gtp"], mesh = @world} : (tensor<128xf32>) -> tensor<128xf32>
// CHECK:         %[[S1:.*]] = "tp.wait"(%[[R1]]) : (!tp.future<tensor<128x128xf32>>) -> tensor<128x128xf32>
// CHECK-NEXT:    return {{.*}}, %[[S1]], %[[S2]] :
/// Invariant numerics: each partial is a subtree of C / 2 chunks of the tree the gtp reduction
/// completes; the reduce-scatters sum in the canonical order.
// INV-LABEL: func.func @mlp(
// INV:         "tp.linear_wgrad"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true}
// INV-NEXT:    "tp.reduce_scatter_start"({{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world, order = "canonical"}
/// The gather form (--gtp-wgrad gather, and the cost model's pick at these sizes): each rank
/// computes its shard's rows of a weight gradient over both gtp ranks' tokens. Where the partial
/// was, x is gathered over gtp along the tokens and dy goes through an all-to-all that sends each
/// rank its columns (w1's by block: its gate and up rows); the wgrad of the two moves past the
/// next contraction, which overlaps both transfers, and before the next gradient's transfers
/// start. No reduce-scatter, no f32 partial of the whole weight.
// GATHER-LABEL: func.func @mlp(
// GATHER:         %[[X2:.*]] = "tp.all_gather_start"(%[[A:[^)]*]]) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<8x128xbf16>) -> !tp.future<tensor<16x128xbf16>>
// GATHER-NEXT:    %[[D2:.*]] = "tp.all_to_all_start"(%[[DY:[^)]*]]) {axes = ["gtp"], blocks = 1 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<8x128xbf16>) -> !tp.future<tensor<16x64xbf16>>
// GATHER-NEXT:    "tp.wait"
// GATHER-NEXT:    "tp.linear_dgrad"(%[[DY]], %{{.*}}) {parallel = "row"}
// GATHER-NEXT:    %[[DU:.*]] = "tp.glu_grad"
// GATHER-NEXT:    "tp.all_gather_start"
// GATHER-NEXT:    %[[X2W:.*]] = "tp.wait"(%[[X2]])
// GATHER-NEXT:    %[[D2W:.*]] = "tp.wait"(%[[D2]])
// GATHER-NEXT:    %[[G2:.*]] = "tp.linear_wgrad"(%[[D2W]], %[[X2W]]) {parallel = "row"} : (tensor<16x64xbf16>, tensor<16x128xbf16>) -> tensor<64x128xf32>
// GATHER-NEXT:    %[[X1:.*]] = "tp.all_gather_start"(%[[H:[^)]*]]) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<8x128xbf16>) -> !tp.future<tensor<16x128xbf16>>
// GATHER-NEXT:    %[[D1:.*]] = "tp.all_to_all_start"(%[[DU]]) {axes = ["gtp"], blocks = 2 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<8x256xbf16>) -> !tp.future<tensor<16x128xbf16>>
// GATHER-NEXT:    "tp.wait"
// GATHER-NEXT:    "tp.linear_dgrad"(%[[DU]], %{{.*}}) {parallel = "column", partial = true}
// GATHER:         %[[X1W:.*]] = "tp.wait"(%[[X1]])
// GATHER-NEXT:    %[[D1W:.*]] = "tp.wait"(%[[D1]])
// GATHER-NEXT:    %[[G1:.*]] = "tp.linear_wgrad"(%[[D1W]], %[[X1W]]) {parallel = "column"} : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<128x128xf32>
// GATHER-NEXT:    return {{.*}}, %[[G1]], %[[G2]] :
// GATHER-NOT:     "tp.reduce_scatter_start"
/// Invariant numerics: the wgrads contract the gtp ranks' tokens in rank order, TP = 1's rows: the
/// whole tree (no chunks attribute), nothing left to reduce.
// GINV-LABEL: func.func @mlp(
// GINV:         "tp.linear_wgrad"({{.*}}) {parallel = "row"} : (tensor<16x64xbf16>, tensor<16x128xbf16>) -> tensor<64x128xf32>
// GINV:         "tp.linear_wgrad"({{.*}}) {parallel = "column"} : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<128x128xf32>
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["gtp", "tp"], shape = array<i64: 2, 2>} : () -> ()
  func.func @mlp(%x: tensor<16x128xbf16> {tp.name = "x"}, %gamma: tensor<128xbf16> {tp.name = "gamma"},
                 %w1: tensor<512x128xbf16> {tp.name = "w1"}, %w2: tensor<128x256xbf16> {tp.name = "w2"})
      -> (tensor<16x128xbf16> {tp.name = "y"}) {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %u = "tp.linear"(%h, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
    %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
    %y = "tp.add"(%x, %d) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}

// -----

///---------------------------------------------------------------------------
/// [tp-gtp: data parallelism beside gtp, a tied weight, a replicated router, tp.gtp = false]
/// Tokens are sharded over dp and gtp, so tp-shard sums weight gradients over ["dp", "gtp"]; that
/// reduction becomes a reduce-scatter over gtp and an all-reduce of the shard over dp (the tree's
/// upper levels). w is read by two linears: two gathers, two scattered contributions, and
/// tp-autodiff's add adds shards. The router (a replicated linear) and w2 (marked
/// tp.gtp = false) stay whole and are summed over dp and gtp as before.
///---------------------------------------------------------------------------
// CHECK-LABEL: func.func @tied(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x64xbf16> {tp.name = "w", tp.shard = {axes = {{\[\["tp", "gtp"\], \[\]\]}}
// CHECK-SAME:      %[[R:[^:]*]]: tensor<8x64xbf16> {tp.name = "router", tp.shard = {axes = {{\[\[\], \[\]\]}}
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<64x32xbf16> {tp.gtp = false, tp.name = "w2", tp.shard = {axes = {{\[\[\], \["tp"\]\]}}
// CHECK-SAME:      -> ({{.*}}tensor<16x64xf32> {tp.grad_of = 2 : i64, tp.name = "w_grad", tp.shard = {axes = {{\[\["tp", "gtp"\], \[\]\]}}
// CHECK:         %[[P:.*]] = "tp.linear_wgrad"({{.*}}) {partial = true} : (tensor<4x8xbf16>, tensor<4x64xbf16>) -> tensor<8x64xf32>
// CHECK-NEXT:    %[[RG:.*]] = "tp.all_reduce"(%[[P]]) {axes = ["dp", "gtp"], mesh = @world} : (tensor<8x64xf32>) -> tensor<8x64xf32>
// CHECK:         %[[RS1:.*]] = "tp.reduce_scatter_start"({{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<32x64xf32>) -> !tp.future<tensor<16x64xf32>>
// CHECK:         %[[S1:.*]] = "tp.wait"(%[[RS1]])
// CHECK-NEXT:    %[[D1:.*]] = "tp.all_reduce"(%[[S1]]) {axes = ["dp"], mesh = @world} : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK:         %[[RS2:.*]] = "tp.reduce_scatter_start"({{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<32x64xf32>) -> !tp.future<tensor<16x64xf32>>
// CHECK-NEXT:    %[[S2:.*]] = "tp.wait"(%[[RS2]])
// CHECK-NEXT:    %[[D2:.*]] = "tp.all_reduce"(%[[S2]]) {axes = ["dp"], mesh = @world} : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %[[WG:.*]] = "tp.add"(%[[D1]], %[[D2]]) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK:         return {{.*}}, %[[WG]], %[[RG]], {{.*}} : {{.*}}, tensor<16x64xf32>, tensor<8x64xf32>, tensor<64x32xf32>
/// Four gathers of w (two forward uses, two backward dgrads), none of the router or w2.
// COUNT-LABEL: func.func @tied(
// COUNT-COUNT-4: "tp.all_gather_start"(%arg2)
// COUNT-NOT:     "tp.all_gather_start"
// COUNT:         return
/// Invariant numerics: the chain is one canonical reduction over 4 ranks (chunks = 8 / 4); the
/// all-reduce over dp continues it.
// INV-LABEL: func.func @tied(
// INV:         "tp.linear_wgrad"({{.*}}) {chunks = 2 : i64, parallel = "column", partial = true}
// INV-NEXT:    "tp.reduce_scatter_start"({{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world, order = "canonical"}
// INV:         "tp.all_reduce"({{.*}}) {axes = ["dp"], mesh = @world, order = "canonical"} : (tensor<16x64xf32>) -> tensor<16x64xf32>
/// The gather form beside dp and a tied weight: each of w's two contributions is its shard's rows
/// over the gtp ranks' tokens, still a partial over dp (all-reduced over dp alone), and the add
/// adds shards. Invariant numerics: the gathered rows are the dp group's tokens in order, the
/// subtree of C / dp = 4 chunks that the dp all-reduce completes.
// GATHER-LABEL: func.func @tied(
// GATHER:         %[[T1:.*]] = "tp.linear_wgrad"({{.*}}) {parallel = "column", partial = true} : (tensor<8x16xbf16>, tensor<8x64xbf16>) -> tensor<16x64xf32>
// GATHER-NEXT:    %[[S1:.*]] = "tp.all_reduce"(%[[T1]]) {axes = ["dp"], mesh = @world} : (tensor<16x64xf32>) -> tensor<16x64xf32>
// GATHER:         %[[T2:.*]] = "tp.linear_wgrad"({{.*}}) {parallel = "column", partial = true} : (tensor<8x16xbf16>, tensor<8x64xbf16>) -> tensor<16x64xf32>
// GATHER-NEXT:    %[[S2:.*]] = "tp.all_reduce"(%[[T2]]) {axes = ["dp"], mesh = @world} : (tensor<16x64xf32>) -> tensor<16x64xf32>
// GATHER-NEXT:    "tp.add"(%[[S1]], %[[S2]]) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
// GINV-LABEL: func.func @tied(
// GINV:         "tp.linear_wgrad"({{.*}}) {chunks = 4 : i64, parallel = "column", partial = true} : (tensor<8x16xbf16>, tensor<8x64xbf16>) -> tensor<16x64xf32>
// GINV-NEXT:    "tp.all_reduce"({{.*}}) {axes = ["dp"], mesh = @world, order = "canonical"} : (tensor<16x64xf32>) -> tensor<16x64xf32>
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["dp", "gtp", "tp"], shape = array<i64: 2, 2, 2>} : () -> ()
  func.func @tied(%x: tensor<16x64xbf16> {tp.name = "x"}, %g: tensor<64xbf16> {tp.name = "gamma"},
                  %w: tensor<64x64xbf16> {tp.name = "w"}, %r: tensor<8x64xbf16> {tp.name = "router"},
                  %w2: tensor<64x64xbf16> {tp.name = "w2", tp.gtp = false})
      -> (tensor<16x64xbf16> {tp.name = "y"}, tensor<16x8xbf16> {tp.name = "logits"}) {
    %h = "tp.rmsnorm"(%x, %g) {eps = 1.0e-05 : f32} : (tensor<16x64xbf16>, tensor<64xbf16>) -> tensor<16x64xbf16>
    %a = "tp.linear"(%h, %w) {parallel = "column"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
    %b = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
    %c = "tp.linear"(%b, %w) {parallel = "column"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
    %d = "tp.linear"(%c, %w2) {parallel = "row"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
    %l = "tp.linear"(%x, %r) : (tensor<16x64xbf16>, tensor<8x64xbf16>) -> tensor<16x8xbf16>
    return %d, %l : tensor<16x64xbf16>, tensor<16x8xbf16>
  }
}

// -----

///---------------------------------------------------------------------------
/// [tp-gtp: the MoE block over gtp = 2 x tp = 2]
/// The grouped weights [E, N, K] become gtp shards along N (dim 1, every local expert at once: one
/// gather per weight, not one per expert); the stride-2 FC1 shard is gathered with blocks = 2.
/// The router stays whole. Invariant numerics: an expert weight gradient summed over the gtp
/// ranks has no canonical split (where the ranks' rows cut an expert's sequence depends on the
/// routing), so tp-invariant gathers the rows instead: the counts and x of both gtp ranks (one
/// segment each, in token order), and this rank's gtp columns of dy from both (an all-to-all,
/// block by block), and contracts them whole into the gradient's shard.
// CHECK-LABEL: func.func @moe(
// CHECK-SAME:      tensor<8x128xbf16> {tp.name = "router", tp.shard = {axes = {{\[\[\], \[\]\]}}
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<8x32x128xbf16> {tp.name = "w1", tp.shard = {axes = {{\[\[\], \["tp", "gtp"\], \[\]\]}}, blocks = array<i64: 1, 2, 1>
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<8x64x32xbf16> {tp.name = "w2", tp.shard = {axes = {{\[\[\], \["gtp"\], \["tp"\]\]}}
// CHECK:         "tp.all_gather_start"(%[[W1]]) {axes = ["gtp"], blocks = 2 : i64, dim = 1 : i64, mesh = @world} : (tensor<8x32x128xbf16>) -> !tp.future<tensor<8x64x128xbf16>>
// CHECK:         "tp.all_gather_start"(%[[W2]]) {axes = ["gtp"], blocks = 1 : i64, dim = 1 : i64, mesh = @world} : (tensor<8x64x32xbf16>) -> !tp.future<tensor<8x128x32xbf16>>
// INV-LABEL: func.func @moe(
// INV:         %[[C2:.*]] = "tp.all_gather"(%{{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<8xi64>) -> tensor<16xi64>
// INV-NEXT:    %[[X2:.*]] = "tp.all_gather"(%{{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<16x32xbf16>) -> tensor<32x32xbf16>
// INV-NEXT:    %[[D2:.*]] = "tp.all_to_all"(%{{.*}}) {axes = ["gtp"], blocks = 1 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<16x128xbf16>) -> tensor<32x64xbf16>
// INV-NEXT:    "tp.grouped_linear_wgrad"(%[[D2]], %[[X2]], %[[C2]]) {parallel = "row"} : (tensor<32x64xbf16>, tensor<32x32xbf16>, tensor<16xi64>) -> tensor<8x64x32xf32>
// INV:         "tp.all_to_all"(%{{.*}}) {axes = ["gtp"], blocks = 2 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<16x64xbf16>) -> tensor<32x32xbf16>
// INV-NEXT:    "tp.grouped_linear_wgrad"({{.*}}) {parallel = "column"} : (tensor<32x32xbf16>, tensor<32x128xbf16>, tensor<16xi64>) -> tensor<8x32x128xf32>
// INV-NOT:     "tp.reduce_scatter_start"
/// The gather form of the expert weights' gradients (over gtp alone): tp-gtp itself gathers the
/// rows asynchronously, x and the [E] counts over gtp (one segment per gtp rank) and this rank's
/// columns of dy by an all-to-all, and the grouped wgrad contracts them whole into the shard; in
/// any numerics, so tp-invariant has nothing left to reduce.
// GATHER-LABEL: func.func @moe(
// GATHER:         %[[X2:.*]] = "tp.all_gather_start"(%{{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<16x32xbf16>) -> !tp.future<tensor<32x32xbf16>>
// GATHER-NEXT:    %[[D2:.*]] = "tp.all_to_all_start"(%{{.*}}) {axes = ["gtp"], blocks = 1 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<16x128xbf16>) -> !tp.future<tensor<32x64xbf16>>
// GATHER-NEXT:    %[[C2:.*]] = "tp.all_gather_start"(%{{.*}}) {axes = ["gtp"], blocks = 1 : i64, dim = 0 : i64, mesh = @world} : (tensor<8xi64>) -> !tp.future<tensor<16xi64>>
// GATHER:         %[[X2W:.*]] = "tp.wait"(%[[X2]])
// GATHER-NEXT:    %[[D2W:.*]] = "tp.wait"(%[[D2]])
// GATHER-NEXT:    %[[C2W:.*]] = "tp.wait"(%[[C2]])
// GATHER-NEXT:    "tp.grouped_linear_wgrad"(%[[D2W]], %[[X2W]], %[[C2W]]) {parallel = "row"} : (tensor<32x64xbf16>, tensor<32x32xbf16>, tensor<16xi64>) -> tensor<8x64x32xf32>
// GATHER:         "tp.all_to_all_start"(%{{.*}}) {axes = ["gtp"], blocks = 2 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<16x64xbf16>) -> !tp.future<tensor<32x32xbf16>>
// GATHER:         "tp.grouped_linear_wgrad"({{.*}}) {parallel = "column"} : (tensor<32x32xbf16>, tensor<32x128xbf16>, tensor<16xi64>) -> tensor<8x32x128xf32>
// GINV-LABEL: func.func @moe(
// GINV-NOT:     "tp.all_to_all"(
// GINV:         "tp.grouped_linear_wgrad"({{.*}}) {parallel = "row"} : (tensor<32x64xbf16>, tensor<32x32xbf16>, tensor<16xi64>) -> tensor<8x64x32xf32>
// GINV-NOT:     "tp.reduce_scatter_start"
module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {
  "tp.mesh"() {sym_name = "world", axes = ["gtp", "tp"], shape = array<i64: 2, 2>} : () -> ()
  func.func @moe(%x: tensor<16x128xbf16> {tp.name = "x"}, %router: tensor<8x128xbf16> {tp.name = "router"},
                 %w1: tensor<8x128x128xbf16> {tp.name = "w1"}, %w2: tensor<8x128x64xbf16> {tp.name = "w2"})
      -> (tensor<16x128xbf16> {tp.name = "y"}) {
    %logits = "tp.linear"(%x, %router) : (tensor<16x128xbf16>, tensor<8x128xbf16>) -> tensor<16x8xbf16>
    %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64, normalize = true} : (tensor<16x8xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
    %xp, %sizes, %map = "tp.moe_permute"(%x, %idx) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>)
    %h1 = "tp.grouped_linear"(%xp, %w1, %sizes) {parallel = "column"} : (tensor<32x128xbf16>, tensor<8x128x128xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
    %a = "tp.glu"(%h1) {kind = "swiglu"} : (tensor<32x128xbf16>) -> tensor<32x64xbf16>
    %h2 = "tp.grouped_linear"(%a, %w2, %sizes) {parallel = "row"} : (tensor<32x64xbf16>, tensor<8x128x64xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
    %y = "tp.moe_unpermute"(%h2, %map, %wts) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}
