// Tests of tp-invariant (lowering/invariant.c) on the per-rank programs of tp-shard (and tp-autodiff):
// every reducing collective over R ranks fed by the f32 partial of a contraction gets
// order = "canonical" and its producer chunks = tp.chunks / R; the dgrad of a gate/up GLU gets
// segments = 2; strategy "gather" replaces partial + collective by gathers and the whole contraction.
// Every run verifies its output (--verify-each runs tp-verify after each pass).

/// (a) tp.numerics = "fast" (the examples' own, or forced with --numerics fast): the pass is the
/// identity, whatever tp.strategy says.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=2 --tp-autodiff --tp-shard > %t.shard.mlir
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=2 --verify-each --tp-autodiff --tp-shard --tp-invariant > %t.fast.mlir
// RUN: diff %t.shard.mlir %t.fast.mlir
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=2 --numerics fast --strategy gather --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=FAST --implicit-check-not=canonical --implicit-check-not=segments --implicit-check-not=all_gather
// FAST:      module attributes {tp.chunks = 8 : i64, tp.numerics = "fast", tp.strategy = "gather"}
// FAST:      %[[ROW:.*]] = "tp.linear"({{.*}}) {parallel = "row", partial = true} :
// FAST-NEXT: "tp.all_reduce"(%[[ROW]]) {axes = ["tp"], mesh = @world} :
// FAST:      %[[DX:.*]] = "tp.linear_dgrad"({{.*}}) {parallel = "column", partial = true} :
// FAST-NEXT: "tp.all_reduce"(%[[DX]]) {axes = ["tp"], mesh = @world} :
// FAST-NEXT: "tp.rmsnorm_grad"({{.*}}) {eps = {{[^,]*}}} :

/// (b) Canonical, the MLP training step at tp=2, tp=4 and tp=8: the row-parallel linear and the
/// column-parallel dgrad (of the GLU: segments = 2) are subtrees of C/R = 4, 2, 1 chunks; their
/// all-reduces are canonical. The row dgrad (whose dy is no GLU gradient) and the wgrads reduce
/// over no rank and keep chunks 0, the module's whole tree.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=2 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefixes=TP,TP2
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=4 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefixes=TP,TP4
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=8 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefixes=TP,TP8
// TP:        module attributes {tp.chunks = 8 : i64, tp.numerics = "invariant"}
// TP2:       %[[ROW:.*]] = "tp.linear"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true} : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xf32>
// TP4:       %[[ROW:.*]] = "tp.linear"({{.*}}) {chunks = 2 : i64, parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
// TP8:       %[[ROW:.*]] = "tp.linear"({{.*}}) {chunks = 1 : i64, parallel = "row", partial = true} : (tensor<16x32xbf16>, tensor<128x32xbf16>) -> tensor<16x128xf32>
// TP-NEXT:   "tp.all_reduce"(%[[ROW]]) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
// TP:        "tp.linear_wgrad"({{.*}}) {parallel = "row"} :
// TP-NEXT:   "tp.linear_dgrad"({{.*}}) {parallel = "row"} :
// TP-NEXT:   %[[DU:.*]] = "tp.glu_grad"(
// TP-NEXT:   "tp.linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column"} :
// TP2-NEXT:  %[[DX:.*]] = "tp.linear_dgrad"(%[[DU]], {{.*}}) {chunks = 4 : i64, parallel = "column", partial = true, segments = 2 : i64} :
// TP4-NEXT:  %[[DX:.*]] = "tp.linear_dgrad"(%[[DU]], {{.*}}) {chunks = 2 : i64, parallel = "column", partial = true, segments = 2 : i64} :
// TP8-NEXT:  %[[DX:.*]] = "tp.linear_dgrad"(%[[DU]], {{.*}}) {chunks = 1 : i64, parallel = "column", partial = true, segments = 2 : i64} :
// TP-NEXT:   "tp.all_reduce"(%[[DX]]) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
// TP-NEXT:   "tp.rmsnorm_grad"({{.*}}) {eps = {{[^,]*}}} :

/// The forward-only pipeline --tp-pipeline=invariant (tp-shard, tp-invariant), numerics exact.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=2 --numerics exact --verify-each --tp-pipeline=invariant \
// RUN:   | FileCheck %s --check-prefix=PIPE
// PIPE:      module attributes {tp.chunks = 8 : i64, tp.numerics = "exact"}
// PIPE:      "tp.linear"({{.*}}) {parallel = "column"} :
// PIPE:      %[[ROW:.*]] = "tp.linear"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true} :
// PIPE-NEXT: "tp.all_reduce"(%[[ROW]]) {axes = ["tp"], mesh = @world, order = "canonical"} :

/// (c) TP = 1: no collective; the GLU dgrad still contracts [gate | up] in segmented order
/// (segments = 2), over the module's whole tree (no chunks).
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=1 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=TP1 --implicit-check-not=tp.all_reduce --implicit-check-not=canonical
// TP1:       "tp.linear"({{.*}}) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
// TP1:       "tp.linear_dgrad"({{.*}}) {parallel = "row"} :
// TP1-NEXT:  %[[DU:.*]] = "tp.glu_grad"(
// TP1-NEXT:  "tp.linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column"} :
// TP1-NEXT:  "tp.linear_dgrad"(%[[DU]], {{.*}}) {parallel = "column", segments = 2 : i64} : (tensor<16x512xbf16>, tensor<512x128xbf16>) -> tensor<16x128xbf16>

/// (d) Sequence parallelism at tp=2: the row-parallel linear and the column dgrad are
/// reduce-scattered canonically; the norm's dgamma (an f32 partial over the token shards) gets
/// chunks = 4 and a canonical all-reduce.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=2 --numerics invariant --sequence-parallel --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=SP
// SP:        %[[ROW:.*]] = "tp.linear"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true, sequence_parallel = true} :
// SP-NEXT:   "tp.reduce_scatter"(%[[ROW]]) {axes = ["tp"], dim = 0 : i64, mesh = @world, order = "canonical"} : (tensor<16x128xf32>) -> tensor<8x128xbf16>
// SP:        %[[DX:.*]] = "tp.linear_dgrad"({{.*}}) {chunks = 4 : i64, parallel = "column", partial = true, segments = 2 : i64, sequence_parallel = true} :
// SP-NEXT:   %[[DXS:.*]] = "tp.reduce_scatter"(%[[DX]]) {axes = ["tp"], dim = 0 : i64, mesh = @world, order = "canonical"} : (tensor<16x128xf32>) -> tensor<8x128xbf16>
// SP-NEXT:   %[[N:.*]]:2 = "tp.rmsnorm_grad"({{.*}}, %[[DXS]]) {chunks = 4 : i64, eps = {{[^,]*}}, partial = true} :
// SP-NEXT:   "tp.all_reduce"(%[[N]]#1) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<128xf32>) -> tensor<128xf32>

/// (e) dp=2 x tp=2: the weight and norm gradients are f32 partials over the dp token shards
/// (M = 16 over 2 ranks: chunks = 4), all-reduced canonically over dp.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh dp=2,tp=2 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=DP
// DP:        %[[ROW:.*]] = "tp.linear"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true} :
// DP-NEXT:   "tp.all_reduce"(%[[ROW]]) {axes = ["tp"], mesh = @world, order = "canonical"} :
// DP:        %[[W2:.*]] = "tp.linear_wgrad"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true} : (tensor<8x128xbf16>, tensor<8x128xbf16>) -> tensor<128x128xf32>
// DP-NEXT:   "tp.all_reduce"(%[[W2]]) {axes = ["dp"], mesh = @world, order = "canonical"} :
// DP-NEXT:   "tp.linear_dgrad"({{.*}}) {parallel = "row"} :
// DP-NEXT:   "tp.glu_grad"
// DP-NEXT:   %[[W1:.*]] = "tp.linear_wgrad"({{.*}}) {chunks = 4 : i64, parallel = "column", partial = true} : (tensor<8x256xbf16>, tensor<8x128xbf16>) -> tensor<256x128xf32>
// DP-NEXT:   "tp.all_reduce"(%[[W1]]) {axes = ["dp"], mesh = @world, order = "canonical"} :
// DP-NEXT:   %[[DX:.*]] = "tp.linear_dgrad"({{.*}}) {chunks = 4 : i64, parallel = "column", partial = true, segments = 2 : i64} :
// DP-NEXT:   "tp.all_reduce"(%[[DX]]) {axes = ["tp"], mesh = @world, order = "canonical"} :
// DP-NEXT:   %[[N:.*]]:2 = "tp.rmsnorm_grad"({{.*}}) {chunks = 4 : i64, eps = {{[^,]*}}, partial = true} :
// DP-NEXT:   "tp.all_reduce"(%[[N]]#1) {axes = ["dp"], mesh = @world, order = "canonical"} :

/// (f) MoE at tp=2: the row-parallel grouped linear and the GLU's grouped dgrad (segments = 2)
/// get chunks = 4; the replicated router is untouched.
// RUN: tpc-opt %tpc_src/docs/examples/moe.mlir --mesh tp=2 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=MOE
// MOE:       "tp.linear"(%arg0, %arg1) : (tensor<16x128xbf16>, tensor<8x128xbf16>) -> tensor<16x8xbf16>
// MOE:       "tp.grouped_linear"({{.*}}) {parallel = "column"} :
// MOE:       %[[ROW:.*]] = "tp.grouped_linear"({{.*}}) {chunks = 4 : i64, parallel = "row", partial = true} : (tensor<32x32xbf16>, tensor<8x128x32xbf16>, tensor<8xi64>) -> tensor<32x128xf32>
// MOE-NEXT:  "tp.all_reduce"(%[[ROW]]) {axes = ["tp"], mesh = @world, order = "canonical"} :
// MOE:       "tp.grouped_linear_dgrad"({{.*}}) {parallel = "row"} :
// MOE-NEXT:  %[[DU:.*]] = "tp.glu_grad"(
// MOE-NEXT:  "tp.grouped_linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column"} :
// MOE-NEXT:  %[[DX:.*]] = "tp.grouped_linear_dgrad"(%[[DU]], {{.*}}) {chunks = 4 : i64, parallel = "column", partial = true, segments = 2 : i64} : (tensor<32x64xbf16>, tensor<8x64x128xbf16>, tensor<8xi64>) -> tensor<32x128xf32>
// MOE-NEXT:  "tp.all_reduce"(%[[DX]]) {axes = ["tp"], mesh = @world, order = "canonical"} :
// MOE:       "tp.linear_wgrad"({{.*}}) : (tensor<16x8xbf16>, tensor<16x128xbf16>) -> tensor<8x128xf32>
// MOE-NEXT:  "tp.linear_dgrad"({{.*}}) : (tensor<16x8xbf16>, tensor<8x128xbf16>) -> tensor<16x128xbf16>

/// MoE at ep=2: the experts' ops reduce over no rank (whole experts per rank), so only the
/// GLU's grouped dgrad gets segments = 2; the router's wgrad is an f32 partial over the ep token
/// shards (chunks = 4), all-reduced canonically.
// RUN: tpc-opt %tpc_src/docs/examples/moe.mlir --mesh ep=2 --numerics invariant --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=EP
// EP:        "tp.grouped_linear"({{.*}}) {parallel = "row"} : (tensor<32x64xbf16>, tensor<4x128x64xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
// EP:        %[[DU:.*]] = "tp.glu_grad"(
// EP-NEXT:   "tp.grouped_linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column"} :
// EP-NEXT:   "tp.grouped_linear_dgrad"(%[[DU]], {{.*}}) {parallel = "column", segments = 2 : i64} :
// EP:        %[[R:.*]] = "tp.linear_wgrad"({{.*}}) {chunks = 4 : i64, partial = true} : (tensor<8x8xbf16>, tensor<8x128xbf16>) -> tensor<8x128xf32>
// EP-NEXT:   "tp.all_reduce"(%[[R]]) {axes = ["ep"], mesh = @world, order = "canonical"} : (tensor<8x128xf32>) -> tensor<8x128xf32>

/// (g) strategy = "gather" at tp=4: the row-parallel linear becomes all-gathers of x and w along
/// K and the whole (non-partial) linear; the GLU dgrad all-gathers dy along N and w along its rows
/// and contracts N in 4 blocks of 2 segments. No all-reduce is left but the one of the norm.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=4 --numerics invariant --strategy gather --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=GATHER --implicit-check-not=tp.all_reduce --implicit-check-not=partial
// GATHER:      module attributes {tp.chunks = 8 : i64, tp.numerics = "invariant", tp.strategy = "gather"}
// GATHER:      %[[A:.*]] = "tp.glu"(
// GATHER-NEXT: %[[AG:.*]] = "tp.all_gather"(%[[A]]) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<16x64xbf16>) -> tensor<16x256xbf16>
// GATHER-NEXT: %[[WG:.*]] = "tp.all_gather"(%arg3) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<128x64xbf16>) -> tensor<128x256xbf16>
// GATHER-NEXT: %[[Y:.*]] = "tp.linear"(%[[AG]], %[[WG]]) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
// GATHER-NEXT: "tp.add"(%arg0, %[[Y]])
// GATHER:      %[[DU:.*]] = "tp.glu_grad"(
// GATHER-NEXT: "tp.linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column"} :
// GATHER-NEXT: %[[DUG:.*]] = "tp.all_gather"(%[[DU]]) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<16x128xbf16>) -> tensor<16x512xbf16>
// GATHER-NEXT: %[[W1G:.*]] = "tp.all_gather"(%arg2) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<128x128xbf16>) -> tensor<512x128xbf16>
// GATHER-NEXT: %[[DX:.*]] = "tp.linear_dgrad"(%[[DUG]], %[[W1G]]) {blocks = 4 : i64, parallel = "column", segments = 2 : i64} : (tensor<16x512xbf16>, tensor<512x128xbf16>) -> tensor<16x128xbf16>
// GATHER-NEXT: "tp.rmsnorm_grad"({{.*}}, %[[DX]]) {eps = {{[^,]*}}} :

/// Gather under sequence parallelism at tp=4: an all-to-all (split the tokens, concatenate K)
/// brings each rank its own tokens with every K column instead of a reduce-scatter; the norm's
/// dgamma (no GEMM) stays canonical.
// RUN: tpc-opt %tpc_src/docs/examples/mlp.mlir --mesh tp=4 --numerics invariant --strategy gather --sequence-parallel --verify-each --tp-autodiff --tp-shard --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=GSP --implicit-check-not=tp.reduce_scatter
// GSP:         %[[A:.*]] = "tp.glu"(
// GSP-NEXT:    %[[AT:.*]] = "tp.all_to_all"(%[[A]]) {axes = ["tp"], concat_dim = 1 : i64, mesh = @world, split_dim = 0 : i64} : (tensor<16x64xbf16>) -> tensor<4x256xbf16>
// GSP-NEXT:    %[[WG:.*]] = "tp.all_gather"(%arg3) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<128x64xbf16>) -> tensor<128x256xbf16>
// GSP-NEXT:    "tp.linear"(%[[AT]], %[[WG]]) {parallel = "row", sequence_parallel = true} : (tensor<4x256xbf16>, tensor<128x256xbf16>) -> tensor<4x128xbf16>
// GSP:         %[[DU:.*]] = "tp.glu_grad"(
// GSP-NEXT:    "tp.linear_wgrad"(%[[DU]], {{.*}}) {parallel = "column", sequence_parallel = true} :
// GSP-NEXT:    %[[DUT:.*]] = "tp.all_to_all"(%[[DU]]) {axes = ["tp"], concat_dim = 1 : i64, mesh = @world, split_dim = 0 : i64} : (tensor<16x128xbf16>) -> tensor<4x512xbf16>
// GSP-NEXT:    %[[W1G:.*]] = "tp.all_gather"(%arg2) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<128x128xbf16>) -> tensor<512x128xbf16>
// GSP-NEXT:    %[[DX:.*]] = "tp.linear_dgrad"(%[[DUT]], %[[W1G]]) {blocks = 4 : i64, parallel = "column", segments = 2 : i64, sequence_parallel = true} : (tensor<4x512xbf16>, tensor<512x128xbf16>) -> tensor<4x128xbf16>
// GSP-NEXT:    %[[N:.*]]:2 = "tp.rmsnorm_grad"({{.*}}, %[[DX]]) {chunks = 2 : i64, eps = {{[^,]*}}, partial = true} :
// GSP-NEXT:    "tp.all_reduce"(%[[N]]#1) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<128xf32>) -> tensor<128xf32>

/// (h) Hand-written per-rank modules, --tp-invariant alone (below). With --numerics fast the
/// same modules come back unchanged.
// RUN: tpc-opt %s --split-input-file --verify-each --tp-invariant | FileCheck %s --check-prefix=RANK
// RUN: tpc-opt %s --split-input-file --numerics fast --verify-each --tp-invariant \
// RUN:   | FileCheck %s --check-prefix=RANKFAST --implicit-check-not=canonical --implicit-check-not=segments --implicit-check-not=all_gather --implicit-check-not='{{[{ ]}}chunks ='

/// A row-parallel linear completed by the fused all-reduce + residual add + RMSNorm, a GLU
/// dgrad and a bias gradient, all over tp=2 with the default tp.chunks = 8.
// RANK-LABEL: func.func @per_rank(
// RANK:       %[[P:.*]] = "tp.linear"(%arg0, %arg1) {chunks = 4 : i64, parallel = "row", partial = true} :
// RANK-NEXT:  "tp.fused_allreduce_add_rmsnorm"(%[[P]], %arg2, %arg3) {axes = ["tp"], eps = {{[^,]*}}, mesh = @world, order = "canonical"} :
// RANK-NEXT:  %[[DU:.*]] = "tp.glu_grad"(%arg4, %arg5)
// RANK-NEXT:  %[[DX:.*]] = "tp.linear_dgrad"(%[[DU]], %arg6) {chunks = 4 : i64, parallel = "column", partial = true, segments = 2 : i64} :
// RANK-NEXT:  "tp.all_reduce"(%[[DX]]) {axes = ["tp"], mesh = @world, order = "canonical"} :
// RANK-NEXT:  %[[DB:.*]] = "tp.bias_grad"(%arg7) {chunks = 4 : i64, partial = true} : (tensor<8x32xbf16>) -> tensor<32xf32>
// RANK-NEXT:  "tp.all_reduce"(%[[DB]]) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<32xf32>) -> tensor<32xf32>
// RANKFAST-LABEL: func.func @per_rank(
// RANKFAST:       "tp.linear"(%arg0, %arg1) {parallel = "row", partial = true} :
// RANKFAST:       "tp.linear_dgrad"({{.*}}) {parallel = "column", partial = true} :
// RANKFAST:       "tp.bias_grad"(%arg7) {partial = true} :
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @per_rank(%a: tensor<16x64xbf16>, %w2: tensor<128x64xbf16>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>,
                      %u: tensor<16x64xbf16>, %da: tensor<16x32xbf16>, %w1: tensor<64x128xbf16>, %dy: tensor<8x32xbf16>)
      -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<32xf32>) {
    %p = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32}
        : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
    %du = "tp.glu_grad"(%u, %da) {kind = "swiglu"} : (tensor<16x64xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
    %dxp = "tp.linear_dgrad"(%du, %w1) {parallel = "column", partial = true} : (tensor<16x64xbf16>, tensor<64x128xbf16>) -> tensor<16x128xf32>
    %dx = "tp.all_reduce"(%dxp) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
    %dbp = "tp.bias_grad"(%dy) {partial = true} : (tensor<8x32xbf16>) -> tensor<32xf32>
    %db = "tp.all_reduce"(%dbp) {mesh = @world, axes = ["tp"]} : (tensor<32xf32>) -> tensor<32xf32>
    return %n, %o, %dx, %db : tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<32xf32>
  }
}

// -----

/// numerics "exact", tp.chunks = 16 on a dp=2 x tp=4 mesh: the fused reduce-scatter + add +
/// RMSNorm and the async reduce_scatter_start over tp (16/4 = 4 chunks), a layernorm's dgamma
/// over dp (16/2 = 8 chunks).
// RANK-LABEL: func.func @exact_fused_async(
// RANK:       %[[P:.*]] = "tp.linear"(%arg0, %arg1) {chunks = 4 : i64, parallel = "row", partial = true, sequence_parallel = true} :
// RANK-NEXT:  "tp.fused_reduce_scatter_add_rmsnorm"(%[[P]], %arg2, %arg3) {axes = ["tp"], eps = {{[^,]*}}, mesh = @world, order = "canonical"} :
// RANK-NEXT:  %[[L:.*]]:3 = "tp.layernorm_grad"(%arg4, %arg3, %arg5) {chunks = 8 : i64, eps = {{[^,]*}}, partial = true} :
// RANK-NEXT:  "tp.all_reduce"(%[[L]]#1) {axes = ["dp"], mesh = @world, order = "canonical"} : (tensor<128xf32>) -> tensor<128xf32>
// RANK-NEXT:  %[[D:.*]] = "tp.linear_dgrad"(%arg6, %arg1) {chunks = 4 : i64, parallel = "column", partial = true, sequence_parallel = true} :
// RANK-NEXT:  %[[F:.*]] = "tp.reduce_scatter_start"(%[[D]]) {axes = ["tp"], dim = 0 : i64, mesh = @world, order = "canonical"} : (tensor<64x32xf32>) -> !tp.future<tensor<16x32xf32>>
// RANK-NEXT:  "tp.wait"(%[[F]])
// RANKFAST-LABEL: func.func @exact_fused_async(
// RANKFAST:       "tp.fused_reduce_scatter_add_rmsnorm"({{.*}}) {axes = ["tp"], eps = {{[^,]*}}, mesh = @world} :
// RANKFAST:       "tp.reduce_scatter_start"({{.*}}) {axes = ["tp"], dim = 0 : i64, mesh = @world} :
module attributes {tp.numerics = "exact", tp.chunks = 16 : i64} {
  "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
  func.func @exact_fused_async(%a: tensor<64x32xbf16>, %w: tensor<128x32xbf16>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>,
                               %x: tensor<16x128xbf16>, %dy: tensor<16x128xbf16>, %dz: tensor<64x128xbf16>)
      -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<128xf32>, tensor<16x32xf32>) {
    %p = "tp.linear"(%a, %w) {parallel = "row", partial = true, sequence_parallel = true} : (tensor<64x32xbf16>, tensor<128x32xbf16>) -> tensor<64x128xf32>
    %n, %o = "tp.fused_reduce_scatter_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32}
        : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
    %lx, %lg, %lb = "tp.layernorm_grad"(%x, %g, %dy) {eps = 1.0e-05 : f32, partial = true}
        : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<128xf32>, tensor<128xf32>)
    %lgs = "tp.all_reduce"(%lg) {mesh = @world, axes = ["dp"]} : (tensor<128xf32>) -> tensor<128xf32>
    %d = "tp.linear_dgrad"(%dz, %w) {parallel = "column", partial = true, sequence_parallel = true} : (tensor<64x128xbf16>, tensor<128x32xbf16>) -> tensor<64x32xf32>
    %f = "tp.reduce_scatter_start"(%d) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<64x32xf32>) -> !tp.future<tensor<16x32xf32>>
    %ds = "tp.wait"(%f) : (!tp.future<tensor<16x32xf32>>) -> tensor<16x32xf32>
    return %n, %o, %lgs, %ds : tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<128xf32>, tensor<16x32xf32>
  }
}

// -----

/// Strategy "gather", hand-written: an all-reduced partial linear becomes gathers + the whole
/// linear; a reduce-scatter along a dimension other than the tokens has no gather form and stays
/// canonical, as does a norm parameter gradient (no GEMM).
// RANK-LABEL: func.func @gather(
// RANK-NEXT:  %[[XG:.*]] = "tp.all_gather"(%arg0) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<16x64xbf16>) -> tensor<16x128xbf16>
// RANK-NEXT:  %[[WG:.*]] = "tp.all_gather"(%arg1) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<128x64xbf16>) -> tensor<128x128xbf16>
// RANK-NEXT:  %[[Y:.*]] = "tp.linear"(%[[XG]], %[[WG]]) {parallel = "row"} : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xbf16>
// RANK-NEXT:  %[[Q:.*]] = "tp.linear"(%arg0, %arg1) {chunks = 4 : i64, parallel = "row", partial = true} :
// RANK-NEXT:  %[[S:.*]] = "tp.reduce_scatter"(%[[Q]]) {axes = ["tp"], dim = 1 : i64, mesh = @world, order = "canonical"} :
// RANK-NEXT:  %[[N:.*]]:2 = "tp.rmsnorm_grad"(%arg2, %arg3, %arg4) {chunks = 4 : i64, eps = {{[^,]*}}, partial = true} :
// RANK-NEXT:  %[[G:.*]] = "tp.all_reduce"(%[[N]]#1) {axes = ["tp"], mesh = @world, order = "canonical"} :
// RANK-NEXT:  return %[[Y]], %[[S]], %[[G]]
// RANKFAST-LABEL: func.func @gather(
// RANKFAST-NEXT:  %[[P:.*]] = "tp.linear"(%arg0, %arg1) {parallel = "row", partial = true} :
// RANKFAST-NEXT:  "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world} :
module attributes {tp.numerics = "invariant", tp.strategy = "gather"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @gather(%a: tensor<16x64xbf16>, %w2: tensor<128x64xbf16>, %x: tensor<8x128xbf16>, %g: tensor<128xbf16>, %dy: tensor<8x128xbf16>)
      -> (tensor<16x128xbf16>, tensor<16x64xf32>, tensor<128xf32>) {
    %p = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
    %q = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %s = "tp.reduce_scatter"(%q) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<16x128xf32>) -> tensor<16x64xf32>
    %dx, %dg = "tp.rmsnorm_grad"(%x, %g, %dy) {eps = 1.0e-05 : f32, partial = true}
        : (tensor<8x128xbf16>, tensor<128xbf16>, tensor<8x128xbf16>) -> (tensor<8x128xbf16>, tensor<128xf32>)
    %dgs = "tp.all_reduce"(%dg) {mesh = @world, axes = ["tp"]} : (tensor<128xf32>) -> tensor<128xf32>
    return %y, %s, %dgs : tensor<16x128xbf16>, tensor<16x64xf32>, tensor<128xf32>
  }
}

// -----

/// A row-parallel bias (tp-shard adds it once, after the reduction): canonical numerics keeps the
/// reduced sum in f32 and the tp.add rounds once to the bias's type, as TP = 1's linear does.
// RANK-LABEL: func.func @row_bias(
// RANK-NEXT:  %[[P:.*]] = "tp.linear"(%arg0, %arg1) {chunks = 4 : i64, parallel = "row", partial = true} :
// RANK-NEXT:  %[[Y:.*]] = "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<16x128xf32>) -> tensor<16x128xf32>
// RANK-NEXT:  "tp.add"(%[[Y]], %arg2) : (tensor<16x128xf32>, tensor<128xbf16>) -> tensor<16x128xbf16>
// RANK-NEXT:  %[[Q:.*]] = "tp.linear"(%arg0, %arg1) {chunks = 4 : i64, parallel = "row", partial = true, sequence_parallel = true} :
// RANK-NEXT:  %[[S:.*]] = "tp.reduce_scatter"(%[[Q]]) {axes = ["tp"], dim = 0 : i64, mesh = @world, order = "canonical"} : (tensor<16x128xf32>) -> tensor<8x128xf32>
// RANK-NEXT:  "tp.add"(%[[S]], %arg2) : (tensor<8x128xf32>, tensor<128xbf16>) -> tensor<8x128xbf16>
// RANKFAST-LABEL: func.func @row_bias(
// RANKFAST:       "tp.all_reduce"({{.*}}) {axes = ["tp"], mesh = @world} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
// RANKFAST-NEXT:  "tp.add"({{.*}}) : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @row_bias(%a: tensor<16x64xbf16>, %w2: tensor<128x64xbf16>, %b: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<8x128xbf16>) {
    %p = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
    %yb = "tp.add"(%y, %b) : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %q = "tp.linear"(%a, %w2) {parallel = "row", partial = true, sequence_parallel = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %s = "tp.reduce_scatter"(%q) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<16x128xf32>) -> tensor<8x128xbf16>
    %sb = "tp.add"(%s, %b) : (tensor<8x128xbf16>, tensor<128xbf16>) -> tensor<8x128xbf16>
    return %yb, %sb : tensor<16x128xbf16>, tensor<8x128xbf16>
  }
}

// -----

/// The same under strategy "gather": the bias goes back into the whole linear (an all-gather of
/// x for the all-reduce, an all-to-all for the token reduce-scatter).
// RANK-LABEL: func.func @row_bias_gather(
// RANK-NEXT:  %[[XG:.*]] = "tp.all_gather"(%arg0) {axes = ["tp"], dim = 1 : i64, mesh = @world} :
// RANK-NEXT:  %[[WG:.*]] = "tp.all_gather"(%arg1) {axes = ["tp"], dim = 1 : i64, mesh = @world} :
// RANK-NEXT:  %[[Y:.*]] = "tp.linear"(%[[XG]], %[[WG]], %arg2) {parallel = "row"} : (tensor<16x128xbf16>, tensor<128x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
// RANK-NEXT:  %[[XT:.*]] = "tp.all_to_all"(%arg0) {axes = ["tp"], concat_dim = 1 : i64, mesh = @world, split_dim = 0 : i64} : (tensor<16x64xbf16>) -> tensor<8x128xbf16>
// RANK-NEXT:  %[[WG2:.*]] = "tp.all_gather"(%arg1) {axes = ["tp"], dim = 1 : i64, mesh = @world} :
// RANK-NEXT:  %[[S:.*]] = "tp.linear"(%[[XT]], %[[WG2]], %arg2) {parallel = "row", sequence_parallel = true} : (tensor<8x128xbf16>, tensor<128x128xbf16>, tensor<128xbf16>) -> tensor<8x128xbf16>
// RANK-NEXT:  return %[[Y]], %[[S]]
// RANKFAST-LABEL: func.func @row_bias_gather(
module attributes {tp.numerics = "invariant", tp.strategy = "gather"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @row_bias_gather(%a: tensor<16x64xbf16>, %w2: tensor<128x64xbf16>, %b: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<8x128xbf16>) {
    %p = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
    %yb = "tp.add"(%y, %b) : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %q = "tp.linear"(%a, %w2) {parallel = "row", partial = true, sequence_parallel = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    %s = "tp.reduce_scatter"(%q) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<16x128xf32>) -> tensor<8x128xbf16>
    %sb = "tp.add"(%s, %b) : (tensor<8x128xbf16>, tensor<128xbf16>) -> tensor<8x128xbf16>
    return %yb, %sb : tensor<16x128xbf16>, tensor<8x128xbf16>
  }
}

// -----

/// No tp.numerics at all: fast, nothing changes.
// RANK-LABEL: func.func @no_numerics(
// RANK-NEXT:  %[[P:.*]] = "tp.linear"(%arg0, %arg1) {parallel = "row", partial = true} :
// RANK-NEXT:  "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world} :
// RANKFAST-LABEL: func.func @no_numerics(
"tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
func.func @no_numerics(%a: tensor<16x64xbf16>, %w2: tensor<128x64xbf16>) -> tensor<16x128xbf16> {
  %p = "tp.linear"(%a, %w2) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
  %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}
