// RUN: tpc-opt %s --split-input-file --verify-diagnostics

/// The rules of the whole-model ops (dialect/tpc_verify_model.c): tp.embedding, tp.embedding_grad,
/// tp.cross_entropy, tp.cross_entropy_stats / _combine, tp.cross_entropy_logits, the cross-entropy
/// gradients and the optimizer.

/// vocab.ids: token ids are a rank-1 i32 tensor.
func.func @ids_i64(%ids: tensor<16xi64>, %table: tensor<64x32xbf16>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.embedding' op violates rule vocab.ids: ids must be a rank-1 tensor of i32 token ids (tensor<Txi32>); got tensor<16xi64>}}
  %y = "tp.embedding"(%ids, %table) : (tensor<16xi64>, tensor<64x32xbf16>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// vocab.ids: the targets of the loss likewise.
func.func @targets_2d(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<4x4xi32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy' op violates rule vocab.ids: targets must be a rank-1 tensor of i32 token ids (tensor<Txi32>); got tensor<4x4xi32>}}
  %l, %s = "tp.cross_entropy"(%x, %w, %t) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<4x4xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %l : tensor<16xf32>
}

// -----

/// embedding.shapes: y has the table's width and one row per id.
func.func @embedding_width(%ids: tensor<16xi32>, %table: tensor<64x32xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.embedding' op violates rule embedding.shapes: expects a float table[V,H] and y[T,H] of its type for ids[T]; got ids tensor<16xi32>, table tensor<64x32xbf16>, y tensor<16x64xbf16>}}
  %y = "tp.embedding"(%ids, %table) : (tensor<16xi32>, tensor<64x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// embedding_grad.shapes: the table's gradient is f32 (a weight gradient).
func.func @embedding_grad_bf16(%ids: tensor<16xi32>, %dy: tensor<16x32xbf16>) -> tensor<64x32xbf16> {
  // expected-error@+1 {{'tp.embedding_grad' op violates rule embedding_grad.shapes: expects a float dy[T,H] for ids[T] and an f32 dtable[V,H]; got ids tensor<16xi32>, dy tensor<16x32xbf16>, dtable tensor<64x32xbf16>}}
  %g = "tp.embedding_grad"(%ids, %dy) : (tensor<16xi32>, tensor<16x32xbf16>) -> tensor<64x32xbf16>
  return %g : tensor<64x32xbf16>
}

// -----

/// vocab.mesh: a vocabulary shard names its mesh and its group together.
module {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @mesh_without_axes(%ids: tensor<16xi32>, %table: tensor<32x32xbf16>) -> tensor<16x32xbf16> {
    // expected-error@+1 {{'tp.embedding' op violates rule vocab.mesh: a vocabulary shard names both `mesh` (a tp.mesh symbol) and `axes` (its group), or neither}}
    %y = "tp.embedding"(%ids, %table) {mesh = @world} : (tensor<16xi32>, tensor<32x32xbf16>) -> tensor<16x32xbf16>
    return %y : tensor<16x32xbf16>
  }
}

// -----

/// collective.axes (through vocab.mesh): the group's axes belong to the mesh.
module {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @unknown_axis(%ids: tensor<16xi32>, %dy: tensor<16x32xf32>) -> tensor<32x32xf32> {
    // expected-error@+1 {{'tp.embedding_grad' op violates rule collective.axes: mesh @world has no axis "dp"}}
    %g = "tp.embedding_grad"(%ids, %dy) {mesh = @world, axes = ["dp"]} : (tensor<16xi32>, tensor<16x32xf32>) -> tensor<32x32xf32>
    return %g : tensor<32x32xf32>
  }
}

// -----

/// cross_entropy.shapes: the head has x's width and element type.
func.func @head_width(%x: tensor<16x32xbf16>, %w: tensor<64x48xbf16>, %t: tensor<16xi32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy' op violates rule cross_entropy.shapes: expects x[T,H] (float), w[V,H] of x's type and targets[T]; got x tensor<16x32xbf16>, w tensor<64x48xbf16>, targets tensor<16xi32>}}
  %l, %s = "tp.cross_entropy"(%x, %w, %t) : (tensor<16x32xbf16>, tensor<64x48xbf16>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %l : tensor<16xf32>
}

// -----

/// cross_entropy.shapes: the loss and its log-sum-exp are f32, one per token.
func.func @loss_bf16(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>) -> tensor<16xbf16> {
  // expected-error@+1 {{'tp.cross_entropy' op violates rule cross_entropy.shapes: expects loss and lse of type tensor<16xf32>; got tensor<16xbf16> and tensor<16xbf16>}}
  %l, %s = "tp.cross_entropy"(%x, %w, %t) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>) -> (tensor<16xbf16>, tensor<16xbf16>)
  return %l : tensor<16xbf16>
}

// -----

/// cross_entropy.shapes: a shard's statistics are [T,3] f32.
module {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @stats_shape(%x: tensor<16x32xbf16>, %w: tensor<32x32xbf16>, %t: tensor<16xi32>) -> tensor<16x2xf32> {
    // expected-error@+1 {{'tp.cross_entropy_stats' op violates rule cross_entropy.shapes: expects stats of type tensor<16x3xf32>; got tensor<16x2xf32>}}
    %st = "tp.cross_entropy_stats"(%x, %w, %t) {mesh = @world, axes = ["tp"]} : (tensor<16x32xbf16>, tensor<32x32xbf16>, tensor<16xi32>) -> tensor<16x2xf32>
    return %st : tensor<16x2xf32>
  }
}

// -----

/// cross_entropy.shapes: the loss of given logits reads one row of logits per target.
func.func @logits_rows(%z: tensor<8x64xbf16>, %t: tensor<16xi32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy_logits' op violates rule cross_entropy.shapes: expects logits z[T,V] (float) and targets[T]; got z tensor<8x64xbf16>, targets tensor<16xi32>}}
  %l, %s = "tp.cross_entropy_logits"(%z, %t) : (tensor<8x64xbf16>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %l : tensor<16xf32>
}

// -----

/// cross_entropy.shapes: logits are a float matrix.
func.func @logits_ints(%z: tensor<16x64xi32>, %t: tensor<16xi32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy_logits' op violates rule cross_entropy.shapes: expects logits z[T,V] (float) and targets[T]; got z tensor<16x64xi32>, targets tensor<16xi32>}}
  %l, %s = "tp.cross_entropy_logits"(%z, %t) : (tensor<16x64xi32>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %l : tensor<16xf32>
}

// -----

/// cross_entropy.shapes: its loss and log-sum-exp are f32, one per token.
func.func @logits_loss(%z: tensor<16x64xbf16>, %t: tensor<16xi32>) -> tensor<16xbf16> {
  // expected-error@+1 {{'tp.cross_entropy_logits' op violates rule cross_entropy.shapes: expects loss and lse of type tensor<16xf32>; got tensor<16xbf16> and tensor<16xbf16>}}
  %l, %s = "tp.cross_entropy_logits"(%z, %t) : (tensor<16x64xbf16>, tensor<16xi32>) -> (tensor<16xbf16>, tensor<16xbf16>)
  return %l : tensor<16xbf16>
}

// -----

/// vocab.ids: targets are i32 token ids.
func.func @logits_targets(%z: tensor<16x64xbf16>, %t: tensor<16xi64>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy_logits' op violates rule vocab.ids: targets must be a rank-1 tensor of i32 token ids (tensor<Txi32>); got tensor<16xi64>}}
  %l, %s = "tp.cross_entropy_logits"(%z, %t) : (tensor<16x64xbf16>, tensor<16xi64>) -> (tensor<16xf32>, tensor<16xf32>)
  return %l : tensor<16xf32>
}

// -----

/// cross_entropy.shapes: the combined statistics hold 3 values per shard.
func.func @combine_columns(%st: tensor<16x4xf32>, %t: tensor<16xi32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy_combine' op violates rule cross_entropy.shapes: expects stats[T,3R] (f32: 3 values from each of R shards) and targets[T]; got stats tensor<16x4xf32>, targets tensor<16xi32>}}
  %l, %s = "tp.cross_entropy_combine"(%st, %t) : (tensor<16x4xf32>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %l : tensor<16xf32>
}

// -----

/// cross_entropy.shapes: a partial input gradient is f32.
func.func @dgrad_partial_bf16(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %lse: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16x32xbf16> {
  // expected-error@+1 {{'tp.cross_entropy_dgrad' op violates rule cross_entropy.shapes: expects dx of x's shape, f32 or (unless partial) x's type; got x tensor<16x32xbf16>, dx tensor<16x32xbf16>}}
  %dx = "tp.cross_entropy_dgrad"(%x, %w, %t, %lse, %g) {partial = true} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16x32xbf16>
  return %dx : tensor<16x32xbf16>
}

// -----

/// cross_entropy.shapes: the head's gradient has w's shape, in f32.
func.func @wgrad_shape(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %lse: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<32x64xf32> {
  // expected-error@+1 {{'tp.cross_entropy_wgrad' op violates rule cross_entropy.shapes: expects dw of w's shape in f32; got w tensor<64x32xbf16>, dw tensor<32x64xf32>}}
  %dw = "tp.cross_entropy_wgrad"(%x, %w, %t, %lse, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> tensor<32x64xf32>
  return %dw : tensor<32x64xf32>
}

// -----

/// cross_entropy.shapes: the fused gradients' second result is dw, of w's shape in f32.
func.func @grad_dw(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %lse: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<64x32xbf16> {
  // expected-error@+1 {{'tp.cross_entropy_grad' op violates rule cross_entropy.shapes: expects dw of w's shape in f32; got w tensor<64x32xbf16>, dw tensor<64x32xbf16>}}
  %dx, %dw = "tp.cross_entropy_grad"(%x, %w, %t, %lse, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<64x32xbf16>)
  return %dw : tensor<64x32xbf16>
}

// -----

/// cross_entropy.shapes: the fused loss and gradients' dx is of x's shape.
func.func @with_grad_dx(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy_with_grad' op violates rule cross_entropy.shapes: expects dx of x's shape, f32 or x's type; got x tensor<16x32xbf16>, dx tensor<32x16xbf16>}}
  %loss, %lse, %dx, %dw = "tp.cross_entropy_with_grad"(%x, %w, %t, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<32x16xbf16>, tensor<64x32xf32>)
  return %loss : tensor<16xf32>
}

// -----

/// cross_entropy.shapes: its dw is of w's shape in f32.
func.func @with_grad_dw(%x: tensor<16x32xbf16>, %w: tensor<64x32xbf16>, %t: tensor<16xi32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error@+1 {{'tp.cross_entropy_with_grad' op violates rule cross_entropy.shapes: expects dw of w's shape in f32; got w tensor<64x32xbf16>, dw tensor<32x64xf32>}}
  %loss, %lse, %dx, %dw = "tp.cross_entropy_with_grad"(%x, %w, %t, %g) : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<16xi32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xbf16>, tensor<32x64xf32>)
  return %loss : tensor<16xf32>
}

// -----

/// optimizer.shapes: the accumulator of the exact sum of squares is tensor<21xi64>.
func.func @sumsq_accumulator(%g: tensor<64x32xf32>) -> tensor<16xi64> {
  // expected-error@+1 {{'tp.sumsq' op violates rule optimizer.shapes: expects a float gradient and an accumulator of type tensor<21xi64>; got g tensor<64x32xf32>, acc tensor<16xi64>}}
  %a = "tp.sumsq"(%g) : (tensor<64x32xf32>) -> tensor<16xi64>
  return %a : tensor<16xi64>
}

// -----

/// optimizer.shapes: the norm takes whole accumulators.
func.func @norm_words(%a: tensor<30xi64>) -> tensor<1xf32> {
  // expected-error@+1 {{'tp.global_norm' op violates rule optimizer.shapes: expects acc[R*21] (i64: R accumulators) and norm of type tensor<1xf32>; got acc tensor<30xi64>, norm tensor<1xf32>}}
  %n = "tp.global_norm"(%a) : (tensor<30xi64>) -> tensor<1xf32>
  return %n : tensor<1xf32>
}

// -----

/// optimizer.shapes: AdamW's hyperparameters are 8 floats.
func.func @adamw_hyper(%p: tensor<64x32xf32>, %g: tensor<64x32xf32>, %m: tensor<64x32xf32>, %v: tensor<64x32xf32>, %h: tensor<7xf32>, %n: tensor<1xf32>) -> tensor<64x32xbf16> {
  // expected-error@+1 {{'tp.adamw' op violates rule optimizer.shapes: expects f32 master, grad, m, v of one shape (grad: a multiple along one dim for a ZeRO-1 share), hyper tensor<8xf32>, norm tensor<1xf32> and a float weight of master's shape; got master tensor<64x32xf32>, hyper tensor<7xf32>, norm tensor<1xf32>, weight tensor<64x32xbf16>}}
  %p1, %m1, %v1, %w = "tp.adamw"(%p, %g, %m, %v, %h, %n) : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<7xf32>, tensor<1xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xbf16>)
  return %w : tensor<64x32xbf16>
}
