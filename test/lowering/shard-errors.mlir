// RUN: tpc-opt %s --split-input-file --tp-shard --verify-diagnostics

/// A plan needs a mesh.
// expected-error@unknown {{tp-shard: the module declares no tp.mesh; pass --mesh tp=N (and dp=M) or declare one}}
func.func @no_mesh(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  return %x : tensor<16x128xbf16>
}

// -----

/// A row-parallel linear whose input is not sharded along K cannot be realised.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @row_without_sharded_input(%x: tensor<16x256xbf16>, %w: tensor<128x256xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{tp-shard: 'tp.linear' input x is laid out [-, -]; a row-parallel linear needs its input sharded along K over tp}}
  %d = "tp.linear"(%x, %w) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

// -----

/// Divisibility: 36 FC1 rows in 2 stride-2 blocks cannot be split over tp=4.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
// expected-error@+1 {{tp-shard: 'func.func' argument 1: dimension 0 (size 36) is not divisible by [tp/2, -] = 4 ranks × 2 blocks}}
func.func @not_divisible(%x: tensor<16x128xbf16>, %w1: tensor<36x128xbf16>) -> tensor<16x18xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<36x128xbf16>) -> tensor<16x36xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x36xbf16>) -> tensor<16x18xbf16>
  return %a : tensor<16x18xbf16>
}

// -----

/// An axis without a sharding role.
// expected-error@+1 {{tp-shard: mesh axis 'pp' (size 2) has no sharding role; tp-shard knows tp, dp, ep, gtp and mb}}
"tp.mesh"() {sym_name = "world", axes = ["pp", "tp"], shape = array<i64: 2, 2>} : () -> ()
func.func @unknown_axis(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  return %x : tensor<16x128xbf16>
}

// -----

/// More axes than the four roles, even of size 1: the plan's layouts name at most four.
// expected-error@+1 {{tp-shard: mesh 'world' has 5 axes; tp-shard partitions over at most 4 (tp, dp, ep, gtp)}}
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp", "a", "b", "c"], shape = array<i64: 1, 2, 1, 1, 1>} : () -> ()
func.func @five_axes(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  return %x : tensor<16x128xbf16>
}

// -----

/// Sequence-parallel activations reaching a linear that is not sequence parallel.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @sequence_parallel_mismatch(%x: tensor<16x128xbf16>, %w1: tensor<256x128xbf16>, %w3: tensor<256x128xbf16>) -> tensor<16x256xbf16> {
  %u = "tp.linear"(%x, %w1) {parallel = "column", sequence_parallel = true} : (tensor<16x128xbf16>, tensor<256x128xbf16>) -> tensor<16x256xbf16>
  // expected-error@+1 {{tp-shard: 'tp.linear' input x is laid out [tp, -]; its tokens are sharded over tp; set sequence_parallel = true on this linear}}
  %v = "tp.linear"(%x, %w3) {parallel = "column"} : (tensor<16x128xbf16>, tensor<256x128xbf16>) -> tensor<16x256xbf16>
  return %v : tensor<16x256xbf16>
}

// -----

/// One weight used by two linears with different plans.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @weight_with_two_plans(%x: tensor<16x128xbf16>, %w: tensor<128x128xbf16>) -> tensor<16x128xbf16> {
  %u = "tp.linear"(%x, %w) {parallel = "column"} : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xbf16>
  // expected-error@+1 {{tp-shard: operand 1 is laid out [tp, -] but this op's plan needs [-, -] (a weight shared by ops with different plans?)}}
  %v = "tp.linear"(%x, %w) : (tensor<16x128xbf16>, tensor<128x128xbf16>) -> tensor<16x128xbf16>
  return %v : tensor<16x128xbf16>
}

// -----

/// Collectives do not belong in a logical module.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @collective_in_logical_module(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{tp-shard: 'tp.all_reduce' has no sharding rule; a logical module holds compute ops only (tp-shard inserts the collectives)}}
  %y = "tp.all_reduce"(%x) {mesh = @world, axes = ["tp"]} : (tensor<16x128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// Sequence parallelism inside expert-parallel experts is refused (it would gather the wrong rows).
"tp.mesh"() {sym_name = "world", axes = ["ep", "tp"], shape = array<i64: 2, 2>} : () -> ()
func.func @sp_inside_ep(%x: tensor<16x128xbf16>, %idx: tensor<16x2xi32>, %w1: tensor<8x128x128xbf16>) -> tensor<32x128xbf16> {
  %xp, %sizes, %map = "tp.moe_permute"(%x, %idx)
      : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>)
  // expected-error@+1 {{tp-shard: sequence parallelism inside expert-parallel experts (ep=2 with tp=2) is not supported yet; drop sequence_parallel on the grouped linears, or use ep alone}}
  %h = "tp.grouped_linear"(%xp, %w1, %sizes) {parallel = "column", sequence_parallel = true}
      : (tensor<32x128xbf16>, tensor<8x128x128xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
  return %h : tensor<32x128xbf16>
}

// -----

/// acc is tp-fuse's, formed after partitioning: a logical module writes the sum as a tp.add.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @acc_before_shard(%dy: tensor<16x64xbf16>, %w: tensor<64x128xbf16>, %r: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{tp-shard: acc is formed by tp-fuse after partitioning; write the sum as a tp.add}}
  %dx = "tp.linear_dgrad"(%dy, %w, %r) : (tensor<16x64xbf16>, tensor<64x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
  return %dx : tensor<16x128xbf16>
}

// -----

"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @embedding_acc_before_shard(%ids: tensor<16xi32>, %dy: tensor<16x32xbf16>, %h: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error@+1 {{tp-shard: acc is formed by tp-fuse after partitioning; write the sum as a tp.add}}
  %d = "tp.embedding_grad"(%ids, %dy, %h) : (tensor<16xi32>, tensor<16x32xbf16>, tensor<64x32xf32>) -> tensor<64x32xf32>
  return %d : tensor<64x32xf32>
}
