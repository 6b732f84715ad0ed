// RUN: tpc-opt %s --split-input-file --verify-diagnostics

// Negative tests of the rules every tp op shares (tensor.*, attr.*), of tp.mesh (mesh.*) and of
// the module attributes (module.*), then of the IRDL definition itself, whose errors come from
// MLIR before the tp verifier runs.

/// tensor.static: tp ops are planned with static shapes; a dynamic dimension is rejected.
func.func @linear_dynamic_weight(%x: tensor<8x64xbf16>, %w: tensor<?x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule tensor.static: operand 'w' has type tensor<?x64xbf16>; tp ops need static shapes}}
  %y = "tp.linear"(%x, %w) : (tensor<8x64xbf16>, tensor<?x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// tensor.static: shapes are unpacked into fixed arrays of TPC_MAX_RANK = 8 dimensions; each
/// offending operand and result is reported.
func.func @glu_rank9(%x: tensor<1x1x1x1x1x1x1x2x8xbf16>) -> tensor<1x1x1x1x1x1x1x2x4xbf16> {
  // expected-error@+2 {{'tp.glu' op violates rule tensor.static: operand 'x' has rank 9; tp ops support rank <= 8}}
  // expected-error@+1 {{'tp.glu' op violates rule tensor.static: result 'y' has rank 9; tp ops support rank <= 8}}
  %y = "tp.glu"(%x) {kind = "swiglu"} : (tensor<1x1x1x1x1x1x1x2x8xbf16>) -> tensor<1x1x1x1x1x1x1x2x4xbf16>
  return %y : tensor<1x1x1x1x1x1x1x2x4xbf16>
}

// -----

/// tensor.element-type: f64 is not one of the element types the runtime kernels support.
func.func @linear_f64_input(%x: tensor<8x64xf64>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule tensor.element-type: operand 'x' has type tensor<8x64xf64>; element types are bf16, f16, f32, f8E4M3FN, f8E5M2, f8E8M0FNU, f4E2M1FN, i32, i64}}
  %y = "tp.linear"(%x, %w) : (tensor<8x64xf64>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// tensor.element-type: the tensor inside a !tp.future is checked like any other result.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_gather_start_f64_future(%x: tensor<8x64xf32>) -> !tp.future<tensor<32x64xf64>> {
  // expected-error@+1 {{'tp.all_gather_start' op violates rule tensor.element-type: result 'future' has type tensor<32x64xf64>; element types are bf16, f16, f32, f8E4M3FN, f8E5M2, f8E8M0FNU, f4E2M1FN, i32, i64}}
  %f = "tp.all_gather_start"(%x) {mesh = @mesh, axes = ["tp"], dim = 0 : i64} : (tensor<8x64xf32>) -> !tp.future<tensor<32x64xf64>>
  return %f : !tp.future<tensor<32x64xf64>>
}

// -----

/// attr.kind: optional attributes are invisible to IRDL; `partial` is a bool, not an integer.
func.func @linear_partial_integer(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xf32> {
  // expected-error@+1 {{'tp.linear' op violates rule attr.kind: attribute 'partial' must be a bool}}
  %y = "tp.linear"(%x, %w) {partial = 1 : i64} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

/// attr.kind: IRDL accepts any symbol reference for `mesh`; a nested one cannot name a tp.mesh.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_reduce_nested_mesh_ref(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule attr.kind: attribute 'mesh' must be a flat symbol reference (@name)}}
  %y = "tp.all_reduce"(%x) {mesh = @outer::@mesh, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// attr.enum: a misspelt optional enumeration value is named, with the values allowed.
func.func @linear_parallel_misspelt(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule attr.enum: attribute 'parallel' is "columns"; allowed values are "none", "column", "row"}}
  %y = "tp.linear"(%x, %w) {parallel = "columns"} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// attr.enum: "expert" parallelism belongs to tp.grouped_linear; tp.linear has no experts.
func.func @linear_parallel_expert(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule attr.enum: attribute 'parallel' is "expert"; allowed values are "none", "column", "row"}}
  %y = "tp.linear"(%x, %w) {parallel = "expert"} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// mesh.axes: a mesh without axes has no ranks to name.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.axes: a mesh needs at least one axis}}
"tp.mesh"() {sym_name = "mesh", axes = [], shape = array<i64>} : () -> ()
func.func @mesh_no_axes() {
  return
}

// -----

/// mesh.axes: collectives name axes by string, so an empty name cannot be referred to.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.axes: axis 1 must be a non-empty string}}
"tp.mesh"() {sym_name = "mesh", axes = ["dp", ""], shape = array<i64: 2, 4>} : () -> ()
func.func @mesh_empty_axis_name() {
  return
}

// -----

/// mesh.axes: axis names reach the passes and the manifest as C strings; a NUL would cut "tp\00x"
/// to "tp", an axis the mesh does not have.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.axes: axis 1 must be an identifier of at most 15 letters, digits and '_' (not starting with a digit)}}
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp\00x"], shape = array<i64: 2, 2>} : () -> ()
func.func @mesh_axis_nul() {
  return
}

// -----

/// mesh.axes: a name longer than 15 characters would be cut in the lowering's fields.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.axes: axis 0 must be an identifier of at most 15 letters}}
"tp.mesh"() {sym_name = "mesh", axes = ["a_very_long_axis_name"], shape = array<i64: 2>} : () -> ()
func.func @mesh_axis_long() {
  return
}

// -----

/// mesh.axes: axis names must be unique, or a collective's axes would be ambiguous.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.axes: axis "tp" appears twice}}
"tp.mesh"() {sym_name = "mesh", axes = ["tp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @mesh_duplicate_axis() {
  return
}

// -----

/// mesh.shape: shape gives one size per axis; two axes and one size do not pair up.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.shape: shape has 1 entries but there are 2 axes}}
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp"], shape = array<i64: 8>} : () -> ()
func.func @mesh_shape_length() {
  return
}

// -----

/// mesh.shape: every axis has at least one rank.
// expected-error@+1 {{'tp.mesh' op violates rule mesh.shape: axis "tp" has size -2; sizes must be >= 1}}
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp"], shape = array<i64: 2, -2>} : () -> ()
func.func @mesh_negative_size() {
  return
}

// -----

/// mesh.placement: collectives look meshes up in the enclosing module, so one inside a function is never found.
func.func @mesh_inside_function() {
  // expected-error@+1 {{'tp.mesh' op violates rule mesh.placement: a mesh must be declared directly in a module}}
  "tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
  return
}

// -----

/// mesh.placement: a mesh name is declared once per module. builtin.module's symbol table
/// rejects the duplicate before the tp verifier runs, so the error is MLIR's.
// expected-note@+1 {{see existing symbol definition here}}
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
// expected-error@+1 {{redefinition of symbol named 'mesh'}}
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 8>} : () -> ()
func.func @mesh_declared_twice() {
  return
}

// -----

/// module.numerics: the numerics mode is one of three; "slow" is not one of them.
// expected-error@+1 {{'builtin.module' op violates rule module.numerics: tp.numerics must be "fast", "invariant" or "exact"; got "slow"}}
module attributes {tp.numerics = "slow"} {
  func.func @numerics_unknown() {
    return
  }
}

// -----

/// module.chunks: canonical K chunks halve recursively, so their count is a power of two.
// expected-error@+1 {{'builtin.module' op violates rule module.chunks: tp.chunks must be a power of two >= 1 (the canonical K chunk count); got 6 : i64}}
module attributes {tp.chunks = 6 : i64} {
  func.func @chunks_not_power_of_two() {
    return
  }
}

// -----

/// module.strategy: tp-invariant knows two ways to complete a sharded contraction.
// expected-error@+1 {{'builtin.module' op violates rule module.strategy: tp.strategy must be "canonical" or "gather"; got "allgather"}}
module attributes {tp.numerics = "invariant", tp.strategy = "allgather"} {
  func.func @strategy_unknown() {
    return
  }
}

// -----

/// attr.chunks: an op's own chunk count (set by tp-invariant) is 0 or a power of two.
func.func @linear_chunks_not_power_of_two(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xf32> {
  // expected-error@+1 {{'tp.linear' op violates rule attr.chunks: attribute 'chunks' must be 0 (the module's tp.chunks) or a power of two in [1, 1024]; got 3}}
  %y = "tp.linear"(%x, %w) {partial = true, chunks = 3 : i64} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

/// module.chunks: the count is an integer attribute; the string "8" is reported as written.
// expected-error@+1 {{'builtin.module' op violates rule module.chunks: tp.chunks must be a power of two >= 1 (the canonical K chunk count); got "8"}}
module attributes {tp.chunks = "8"} {
  func.func @chunks_string() {
    return
  }
}

// -----

/// module.zero: ZeRO-1 is on or off.
// expected-error@+1 {{'builtin.module' op violates rule module.zero: tp.zero must be true or false; got 1 : i64}}
module attributes {tp.zero = 1 : i64} {
  func.func @zero_integer() {
    return
  }
}

// -----

/// module.recompute: activation recomputation is on or off.
// expected-error@+1 {{'builtin.module' op violates rule module.recompute: tp.recompute must be true or false; got "layers"}}
module attributes {tp.recompute = "layers"} {
  func.func @recompute_string() {
    return
  }
}

// -----

/// module.gtp_prefetch: a count of contractions, never negative.
// expected-error@+1 {{'builtin.module' op violates rule module.gtp_prefetch: tp.gtp_prefetch must be an integer >= 0 (contractions between a GTP weight's all-gather and its use); got -1 : i64}}
module attributes {tp.gtp_prefetch = -1 : i64} {
  func.func @gtp_prefetch_negative() {
    return
  }
}

// -----

/// module.gtp_keep: gathered weights are kept or not.
// expected-error@+1 {{'builtin.module' op violates rule module.gtp_keep: tp.gtp_keep must be true or false; got 1 : i64}}
module attributes {tp.gtp_keep = 1 : i64} {
  func.func @gtp_keep_integer() {
    return
  }
}

// -----

/// module.gtp_wgrad: one of the weight-gradient forms.
// expected-error@+1 {{'builtin.module' op violates rule module.gtp_wgrad: tp.gtp_wgrad must be "scatter", "gather" or "auto"; got "sum"}}
module attributes {tp.gtp_wgrad = "sum"} {
  func.func @gtp_wgrad_unknown() {
    return
  }
}

// -----

/// arg.gtp: the mark is a boolean.
// expected-error@+1 {{'func.func' op violates rule arg.gtp: argument 1 ('w'): tp.gtp must be true or false; got "yes"}}
func.func @gtp_mark_string(%x: tensor<8x16xbf16>, %w: tensor<16x16xbf16> {tp.name = "w", tp.gtp = "yes"}) -> tensor<8x16xbf16> {
  %y = "tp.linear"(%x, %w) : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

/// arg.gtp: a GTP weight is all-gathered before each use, which only a linear's (or grouped
/// linear's) weight operand can take; a norm's gamma cannot.
func.func @gtp_mark_on_gamma(%x: tensor<8x16xbf16>, %g: tensor<16xbf16> {tp.name = "gamma", tp.gtp = true}) -> tensor<8x16xbf16> {
  // expected-error@+1 {{'tp.rmsnorm' op violates rule arg.gtp: argument 1 ('gamma') is marked tp.gtp = true (sharded over gtp, gathered before each use), but 'tp.rmsnorm' operand 1 cannot take a gathered weight: only the weight of tp.linear, tp.grouped_linear and their dgrad can}}
  %y = "tp.rmsnorm"(%x, %g) {eps = 1.0e-05 : f32} : (tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

/// arg.gtp: nor can a linear's input.
func.func @gtp_mark_on_input(%x: tensor<8x16xbf16> {tp.gtp = true}, %w: tensor<16x16xbf16>) -> tensor<8x16xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule arg.gtp: argument 0 is marked tp.gtp = true (sharded over gtp, gathered before each use), but 'tp.linear' operand 0 cannot take a gathered weight}}
  %y = "tp.linear"(%x, %w) : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

/// IRDL: the required enumeration `kind` of tp.glu is checked by IRDL, which names the value only.
func.func @glu_unknown_kind(%x: tensor<16x512xbf16>) -> tensor<16x256xbf16> {
  // expected-error@+1 {{'"reglu"' does not satisfy the constraint}}
  %y = "tp.glu"(%x) {kind = "reglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %y : tensor<16x256xbf16>
}

// -----

/// IRDL: a required attribute (eps of tp.rmsnorm) that is missing.
func.func @rmsnorm_missing_eps(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{'tp.rmsnorm' op attribute "eps" is expected but not provided}}
  %y = "tp.rmsnorm"(%x, %gamma) : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// IRDL: a required attribute of the wrong base (an integer eps where a float is declared).
func.func @rmsnorm_integer_eps(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 {{expected base attribute 'builtin.float' but got 'builtin.integer'}}
  %y = "tp.rmsnorm"(%x, %gamma) {eps = 1 : i64} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// attr.unknown: a misspelt optional attribute would otherwise be ignored; the closest name is suggested.
func.func @linear_misspelt_attribute(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.linear' op violates rule attr.unknown: unknown attribute 'paralel'; did you mean 'parallel'?}}
  %y = "tp.linear"(%x, %w) {paralel = "row"} : (tensor<8x64xbf16>, tensor<32x64xbf16>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// attr.unknown: with no close name, the op's attributes are listed; prefixed (discardable) names pass.
func.func @add_unknown_attribute(%x: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
  // expected-error@+1 {{'tp.add' op violates rule attr.unknown: unknown attribute 'scale'; this op has no attributes}}
  %y = "tp.add"(%x, %x) {scale = 2.0 : f32, tp.note = "kept"} : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}
