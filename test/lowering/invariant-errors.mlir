// The refusals of tp-invariant (lowering/invariant.c), each at the op it concerns, with the exact
// message. Three kinds of input below, split into files that keep this file's line numbers:
// logical forward modules (tp-shard, tp-invariant), logical training steps (tp-autodiff first)
// and hand-written per-rank modules (tp-invariant alone).
// RUN: rm -rf %t && split-file --leading-lines %s %t
// RUN: tpc-opt %t/forward.mlir --split-input-file --numerics invariant --tp-shard --tp-invariant --verify-diagnostics
// RUN: tpc-opt %t/train.mlir --split-input-file --numerics invariant --tp-autodiff --tp-shard --tp-invariant --verify-diagnostics
// RUN: tpc-opt %t/per-rank.mlir --split-input-file --tp-invariant --verify-diagnostics

/// tpc-opt's --numerics and --strategy take only the documented values (the whole stderr).
// RUN: not tpc-opt %s --strategy bogus 2>&1 | FileCheck %s --check-prefix=STRATEGY --match-full-lines --implicit-check-not='{{.}}'
// RUN: not tpc-opt %s --numerics slow 2>&1 | FileCheck %s --check-prefix=NUMERICS --match-full-lines --implicit-check-not='{{.}}'
// RUN: not tpc-opt %s --numerics=invariant --strategy=bogus 2>&1 | FileCheck %s --check-prefix=STRATEGY --match-full-lines --implicit-check-not='{{.}}'
// STRATEGY: tpc-opt: error: --strategy must be canonical or gather; got 'bogus'
// NUMERICS: tpc-opt: error: --numerics must be fast, invariant or exact; got 'slow'

//--- forward.mlir

/// 16 ranks cannot each own a subtree of tp.chunks = 8 chunks.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 16>} : () -> ()
func.func @tp16(%x: tensor<16x128xbf16>, %w1: tensor<256x128xbf16>, %w2: tensor<128x256xbf16>) -> tensor<16x128xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<256x128xbf16>) -> tensor<16x256xbf16>
  // expected-error@+1 {{'tp.all_reduce' op: tp-invariant: the reduction spans 16 ranks, which does not divide tp.chunks = 8: a rank's share would not be a subtree of the canonical tree (use a power-of-two axis size <= tp.chunks, or raise tp.chunks)}}
  %d = "tp.linear"(%u, %w2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

// -----

/// K = 36 shards over tp = 2 (18 each) but is not a multiple of tp.chunks = 8: rank 0's half
/// would end inside chunk 3 (chunk size ceil(36 / 8) = 5).
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @k_not_multiple_of_chunks(%x: tensor<16x128xbf16>, %w1: tensor<36x128xbf16>, %w2: tensor<128x36xbf16>) -> tensor<16x128xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<36x128xbf16>) -> tensor<16x36xbf16>
  // expected-error@+1 {{'tp.linear' op: tp-invariant: its contracted K is split over 2 ranks (18 each, summed by 'tp.all_reduce'); the shares are subtrees of the canonical tree only if the whole K, 36, is a multiple of tp.chunks = 8. Pad the model dimension with zeros, or change tp.chunks (docs/numerics.md, "Padding rules")}}
  %d = "tp.linear"(%u, %w2) {parallel = "row"} : (tensor<16x36xbf16>, tensor<128x36xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

//--- train.mlir

/// The dgrad of a gate/up GLU with 2F = 36 rows (shardable over tp = 2: 9 gate and 9 up rows
/// per rank) whose stride-2 shards need 2F divisible by 2 x tp.chunks = 16. FC2 contracts F = 18,
/// which the canonical tree cannot split either (the two conditions always come together: F % C).
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @glu_dgrad(%x: tensor<16x128xbf16>, %w1: tensor<36x128xbf16>, %w2: tensor<128x18xbf16>) -> tensor<16x128xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<36x128xbf16>) -> tensor<16x36xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x36xbf16>) -> tensor<16x18xbf16>
  // expected-error@+1 {{'tp.linear' op: tp-invariant: its contracted K is split over 2 ranks (9 each, summed by 'tp.all_reduce'); the shares are subtrees of the canonical tree only if the whole K, 18, is a multiple of tp.chunks = 8. Pad the model dimension with zeros, or change tp.chunks (docs/numerics.md, "Padding rules")}}
  %y = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x18xbf16>, tensor<128x18xbf16>) -> tensor<16x128xbf16>
  // expected-error@-4 {{'tp.linear_dgrad' op: tp-invariant: this dgrad contracts the gate and up rows of a GLU (N = 18 on each of 2 ranks, stride-2 shards), whose canonical order needs the logical N = 36 divisible by 2 x tp.chunks = 16; change tp.chunks or the FFN size}}
  return %y : tensor<16x128xbf16>
}

// -----

/// The same under strategy = "gather": FC2 is contracted whole on every rank (no split to refuse),
/// but the whole GLU dgrad still needs N divisible by 2 x tp.chunks.
module attributes {tp.strategy = "gather"} {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @glu_dgrad_gather(%x: tensor<16x128xbf16>, %w1: tensor<36x128xbf16>, %w2: tensor<128x18xbf16>) -> tensor<16x128xbf16> {
    // expected-error@+1 {{'tp.linear_dgrad' op: tp-invariant: this dgrad contracts the gate and up rows of a GLU (N = 36), whose canonical order needs N divisible by 2 x tp.chunks = 16; change tp.chunks or the FFN size}}
    %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<36x128xbf16>) -> tensor<16x36xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x36xbf16>) -> tensor<16x18xbf16>
    %y = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x18xbf16>, tensor<128x18xbf16>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}

// -----

/// MoE with expert parallelism beside gtp (ep=2 x gtp=2): each expert weight gradient is summed
/// over the gtp ranks, whose rows reach the experts' owners through the ep all-to-all. tp-invariant
/// gathers the rows of an expert gradient summed over dp (or gtp) ranks, in token order; rows
/// dispatched over ep and then gathered over gtp would not be in token order (gtp comes after ep
/// in the mesh), so the pair is refused. FC2's wgrad comes first (the backward runs in reverse).
"tp.mesh"() {sym_name = "world", axes = ["ep", "gtp"], shape = array<i64: 2, 2>} : () -> ()
func.func @moe_ep_gtp(%x: tensor<16x128xbf16>, %router: tensor<8x128xbf16>, %w1: tensor<8x128x128xbf16>, %w2: tensor<8x128x64xbf16>) -> tensor<16x128xbf16> {
  %logits = "tp.linear"(%x, %router) : (tensor<16x128xbf16>, tensor<8x128xbf16>) -> tensor<16x8xbf16>
  %idx, %wts = "tp.moe_route"(%logits) {top_k = 2 : i64, normalize = true} : (tensor<16x8xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  %xp, %sizes, %map = "tp.moe_permute"(%x, %idx) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>)
  // expected-error@+4 {{'tp.grouped_linear_wgrad' op: tp-invariant: no canonical implementation for this expert weight gradient summed over 2 ranks: its order runs over each expert's rows in token order, and the rows dispatched from the ep peers, gathered over gtp, would not be in that order (expert parallelism works beside dp, not beside gtp, in invariant numerics); drop gtp or ep, or use fast numerics}}
  // expected-error@+1 {{'tp.grouped_linear_wgrad' op: tp-invariant: no canonical implementation for this expert weight gradient summed over 2 ranks}}
  %h1 = "tp.grouped_linear"(%xp, %w1, %sizes) {parallel = "column"} : (tensor<32x128xbf16>, tensor<8x128x128xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
  %a = "tp.glu"(%h1) {kind = "swiglu"} : (tensor<32x128xbf16>) -> tensor<32x64xbf16>
  %h2 = "tp.grouped_linear"(%a, %w2, %sizes) {parallel = "row"} : (tensor<32x64xbf16>, tensor<8x128x64xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
  %y = "tp.moe_unpermute"(%h2, %map, %wts) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

//--- per-rank.mlir

/// An all-reduce of a function argument: nothing says how its value was summed.
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @all_reduce_of_argument(%p: tensor<16x128xf32>) -> tensor<16x128xf32> {
    // expected-error@+1 {{'tp.all_reduce' op: tp-invariant: no canonical implementation: it sums a function argument over 2 ranks, but only the f32 partial of a contraction (tp.linear, tp.grouped_linear, their dgrad and wgrad, bias and norm parameter gradients, marked partial = true) has a canonical order to continue}}
    %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %y : tensor<16x128xf32>
  }
}

// -----

/// An all-reduce of an elementwise sum.
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @all_reduce_of_add(%a: tensor<16x128xf32>, %b: tensor<16x128xf32>) -> tensor<16x128xf32> {
    %s = "tp.add"(%a, %b) : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
    // expected-error@+1 {{'tp.all_reduce' op: tp-invariant: no canonical implementation: it sums tp.add over 2 ranks, but only the f32 partial of a contraction (tp.linear, tp.grouped_linear, their dgrad and wgrad, bias and norm parameter gradients, marked partial = true) has a canonical order to continue}}
    %y = "tp.all_reduce"(%s) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %y : tensor<16x128xf32>
  }
}

// -----

/// A contraction that is not marked partial (its result is already rounded) is no subtree either.
module attributes {tp.numerics = "exact"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @all_reduce_of_rounded_linear(%a: tensor<16x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<16x128xbf16> {
    %p = "tp.linear"(%a, %w) {parallel = "row"} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xbf16>
    // expected-error@+1 {{'tp.all_reduce' op: tp-invariant: no canonical implementation: it sums tp.linear (not marked partial = true) over 2 ranks, but only}}
    %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xbf16>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}

// -----

/// One partial completed by reductions over 4 (tp) and 2 (dp) ranks: no one chunk count fits both.
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
  func.func @two_rank_counts(%a: tensor<16x32xbf16>, %w: tensor<128x32xbf16>) -> (tensor<16x128xf32>, tensor<16x128xf32>) {
    // expected-error@+1 {{'tp.linear' op: tp-invariant: its partial is summed by reductions over different rank counts (4 and 2 ranks), so no single split of the chunk tree serves both; reduce it once}}
    %p = "tp.linear"(%a, %w) {parallel = "row", partial = true} : (tensor<16x32xbf16>, tensor<128x32xbf16>) -> tensor<16x128xf32>
    %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<16x128xf32>) -> tensor<16x128xf32>
    %z = "tp.all_reduce"(%p) {mesh = @world, axes = ["dp"]} : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %y, %z : tensor<16x128xf32>, tensor<16x128xf32>
  }
}
