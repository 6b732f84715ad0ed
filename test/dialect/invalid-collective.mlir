// RUN: tpc-opt %s --split-input-file --verify-diagnostics

// Negative tests of the collective rules (mesh, axes, dims, divisibility, result shapes) and of
// the fused collective + add + RMSNorm ops: one case per rule id and per distinct condition.

/// collective.mesh: the group is named by a tp.mesh of the enclosing module; @nope is not declared.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_reduce_undeclared_mesh(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.mesh: mesh @nope is not declared by a tp.mesh in the enclosing module}}
  %y = "tp.all_reduce"(%x) {mesh = @nope, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// collective.axes: an empty axis list would be a group of one rank, almost certainly a mistake.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_reduce_no_axes(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.axes: axes must name at least one axis of mesh @mesh}}
  %y = "tp.all_reduce"(%x) {mesh = @mesh, axes = []} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// collective.axes: axes are named, not numbered.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_reduce_axis_index(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.axes: axes must be strings naming axes of mesh @mesh}}
  %y = "tp.all_reduce"(%x) {mesh = @mesh, axes = [0 : i64]} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// collective.axes: listing an axis twice would square its size in the group.
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_reduce_duplicate_axis(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.axes: axis "tp" appears twice}}
  %y = "tp.all_reduce"(%x) {mesh = @mesh, axes = ["tp", "tp"]} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// collective.axes: "pp" is not an axis of @mesh, which has only dp and tp.
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_reduce_unknown_axis(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.axes: mesh @mesh has no axis "pp"}}
  %y = "tp.all_reduce"(%x) {mesh = @mesh, axes = ["pp"]} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// collective.dim: a rank-2 input has dimensions 0 and 1 only.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_gather_dim_out_of_range(%x: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
  // expected-error@+1 {{'tp.all_gather' op violates rule collective.dim: dim=2 is out of range for a rank-2 input}}
  %y = "tp.all_gather"(%x) {mesh = @mesh, axes = ["tp"], dim = 2 : i64} : (tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

/// collective.dim: dimensions are not counted from the end; concat_dim=-1 is rejected.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_to_all_negative_concat_dim(%x: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
  // expected-error@+1 {{'tp.all_to_all' op violates rule collective.dim: concat_dim=-1 is out of range for a rank-2 input}}
  %y = "tp.all_to_all"(%x) {mesh = @mesh, axes = ["tp"], split_dim = 0 : i64, concat_dim = -1 : i64} : (tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

/// collective.blocks: an all-gather with blocks = 3 cuts dim 0 into 3 equal blocks; 8 rows do not.
"tp.mesh"() {sym_name = "mesh", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
func.func @all_gather_blocks_indivisible(%w: tensor<8x64xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.all_gather_start' op violates rule collective.blocks: blocks = 3 must be >= 1 and divide input dimension 0 (size 8; input [8,64])}}
  %f = "tp.all_gather_start"(%w) {mesh = @mesh, axes = ["gtp"], dim = 0 : i64, blocks = 3 : i64} : (tensor<8x64xbf16>) -> !tp.future<tensor<16x64xbf16>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<16x64xbf16>>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// collective.blocks: a reduce-scatter with blocks = 2 over 4 ranks scatters each 6-row block 4 ways; 6 rows do not split.
"tp.mesh"() {sym_name = "mesh", axes = ["gtp"], shape = array<i64: 4>} : () -> ()
func.func @reduce_scatter_blocks_indivisible(%g: tensor<12x64xf32>) -> tensor<3x64xf32> {
  // expected-error@+1 {{'tp.reduce_scatter' op violates rule collective.blocks: each of the 2 blocks of input dimension 0 (size 12) must divide by the 4 ranks of the group (input [12,64])}}
  %y = "tp.reduce_scatter"(%g) {mesh = @mesh, axes = ["gtp"], dim = 0 : i64, blocks = 2 : i64} : (tensor<12x64xf32>) -> tensor<3x64xf32>
  return %y : tensor<3x64xf32>
}

// -----

/// collective.blocks: an all-to-all in blocks splits each block over the ranks; with 2 blocks of 6
/// columns, 4 ranks do not divide them.
"tp.mesh"() {sym_name = "mesh", axes = ["gtp"], shape = array<i64: 4>} : () -> ()
func.func @all_to_all_blocks_indivisible(%x: tensor<8x12xbf16>) -> tensor<32x3xbf16> {
  // expected-error@+1 {{'tp.all_to_all' op violates rule collective.blocks: blocks = 2 must be >= 1; with more than one block, split_dim (1, size 12) must differ from concat_dim, each block must split over the 4 ranks, and the input's rank be below 8 (input [8,12])}}
  %y = "tp.all_to_all"(%x) {mesh = @mesh, axes = ["gtp"], split_dim = 1 : i64, concat_dim = 0 : i64, blocks = 2 : i64} : (tensor<8x12xbf16>) -> tensor<32x3xbf16>
  return %y : tensor<32x3xbf16>
}

// -----

/// collective.blocks: a block count whose product with the 4 ranks overflows int64 is refused (not divided by).
"tp.mesh"() {sym_name = "mesh", axes = ["gtp"], shape = array<i64: 4>} : () -> ()
func.func @all_to_all_blocks_overflow(%x: tensor<8x12xbf16>) -> tensor<32x3xbf16> {
  // expected-error@+1 {{'tp.all_to_all' op violates rule collective.blocks: blocks = 4611686018427387904 must be >= 1; with more than one block, split_dim (1, size 12) must differ from concat_dim, each block must split over the 4 ranks, and the input's rank be below 8 (input [8,12])}}
  %y = "tp.all_to_all"(%x) {mesh = @mesh, axes = ["gtp"], split_dim = 1 : i64, concat_dim = 0 : i64, blocks = 4611686018427387904 : i64} : (tensor<8x12xbf16>) -> tensor<32x3xbf16>
  return %y : tensor<32x3xbf16>
}

// -----

/// collective.blocks: blocks must be at least 1.
"tp.mesh"() {sym_name = "mesh", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
func.func @all_gather_blocks_zero(%w: tensor<8x64xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+1 {{'tp.all_gather' op violates rule collective.blocks: blocks = 0 must be >= 1}}
  %y = "tp.all_gather"(%w) {mesh = @mesh, axes = ["gtp"], dim = 0 : i64, blocks = 0 : i64} : (tensor<8x64xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// collective.divisible: reduce_scatter gives each of the 4 ranks an equal slice; 6 rows do not split 4 ways.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @reduce_scatter_indivisible(%x: tensor<6x64xf32>) -> tensor<1x64xf32> {
  // expected-error@+1 {{'tp.reduce_scatter' op violates rule collective.divisible: input scattered dimension 0 has size 6, not divisible by the 4 ranks of the group (input [6,64])}}
  %y = "tp.reduce_scatter"(%x) {mesh = @mesh, axes = ["tp"], dim = 0 : i64} : (tensor<6x64xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}

// -----

/// collective.divisible: all_to_all sends an equal slice of split_dim to each of the 8 ranks of dp x tp.
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_to_all_indivisible(%x: tensor<16x12xbf16>) -> tensor<128x1xbf16> {
  // expected-error@+1 {{'tp.all_to_all' op violates rule collective.divisible: input split dimension 1 has size 12, not divisible by the 8 ranks of the group (input [16,12])}}
  %y = "tp.all_to_all"(%x) {mesh = @mesh, axes = ["dp", "tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<16x12xbf16>) -> tensor<128x1xbf16>
  return %y : tensor<128x1xbf16>
}

// -----

/// collective.result: all_gather along dim 0 over 4 ranks grows the rows, [8,64] -> [32,64], not the columns.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_gather_wrong_dim_grown(%x: tensor<8x64xbf16>) -> tensor<8x256xbf16> {
  // expected-error@+1 {{'tp.all_gather' op violates rule collective.result: the result must be [32,64] of bf16 over a group of 4 ranks; got tensor<8x256xbf16>}}
  %y = "tp.all_gather"(%x) {mesh = @mesh, axes = ["tp"], dim = 0 : i64} : (tensor<8x64xbf16>) -> tensor<8x256xbf16>
  return %y : tensor<8x256xbf16>
}

// -----

/// collective.result: the future of reduce_scatter_start carries the scattered tensor, [32,64] / 4 ranks = [8,64].
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @reduce_scatter_start_wrong_future(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  // expected-error@+1 {{'tp.reduce_scatter_start' op violates rule collective.result: the result must be [8,64] of f32 (or another float type) over a group of 4 ranks; got tensor<32x64xf32>}}
  %f = "tp.reduce_scatter_start"(%x) {mesh = @mesh, axes = ["tp"], dim = 0 : i64} : (tensor<32x64xf32>) -> !tp.future<tensor<32x64xf32>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<32x64xf32>>) -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}

// -----

/// collective.result: the future of all_to_all_start carries the exchanged tensor, [8,64] split along 1 over 4 ranks = [32,16].
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_to_all_start_wrong_future(%x: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
  // expected-error@+1 {{'tp.all_to_all_start' op violates rule collective.result}}
  %f = "tp.all_to_all_start"(%x) {mesh = @mesh, axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<8x64xbf16>) -> !tp.future<tensor<8x64xbf16>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<8x64xbf16>>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

/// collective.divisible: all_to_all_start splits split_dim over the group, 6 rows over 4 ranks.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_to_all_start_indivisible(%x: tensor<8x6xbf16>) -> tensor<32x1xbf16> {
  // expected-error@+1 {{'tp.all_to_all_start' op violates rule collective.divisible}}
  %f = "tp.all_to_all_start"(%x) {mesh = @mesh, axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<8x6xbf16>) -> !tp.future<tensor<32x1xbf16>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<32x1xbf16>>) -> tensor<32x1xbf16>
  return %y : tensor<32x1xbf16>
}

// -----

/// collective.result: all_to_all over 8 ranks divides split_dim and multiplies concat_dim, [16,64] -> [128,8].
"tp.mesh"() {sym_name = "mesh", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_to_all_dims_swapped(%x: tensor<16x64xbf16>) -> tensor<2x512xbf16> {
  // expected-error@+1 {{'tp.all_to_all' op violates rule collective.result: the result must be [128,8] of bf16 over a group of 8 ranks; got tensor<2x512xbf16>}}
  %y = "tp.all_to_all"(%x) {mesh = @mesh, axes = ["dp", "tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<16x64xbf16>) -> tensor<2x512xbf16>
  return %y : tensor<2x512xbf16>
}

// -----

/// fused_norm.partial: the partial sum is f32 or residual's bf16; an f16 partial would be silently converted.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_allreduce_f16_partial(%p: tensor<16x128xf16>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  // expected-error@+1 {{'tp.fused_allreduce_add_rmsnorm' op violates rule fused_norm.partial: partial must be [16,128] in f32 or residual's element type (residual tensor<16x128xbf16>); got tensor<16x128xf16>}}
  %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32} : (tensor<16x128xf16>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// fused_norm.partial: with reduce-scatter, partial holds all 4 ranks' tokens, [4*16,128], and residual this rank's 16.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_reduce_scatter_unscattered_partial(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  // expected-error@+1 {{'tp.fused_reduce_scatter_add_rmsnorm' op violates rule fused_norm.partial: partial must be [64,128] in f32 or residual's element type (residual tensor<16x128xbf16>, scattered over dim 0); got tensor<16x128xf32>}}
  %n, %o = "tp.fused_reduce_scatter_add_rmsnorm"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// fused_norm.quantize: a per-tensor format scales by the whole tensor's amax, which a fused kernel
/// cannot know while it normalizes a row; the op takes it as an operand.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_quantize_fp8_without_amax(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x128xf8E4M3FN> {
  // expected-error@+1 {{'tp.fused_allreduce_add_rmsnorm_quantize' op violates rule fused_norm.quantize: fp8_e4m3 scales by the whole tensor's amax, which no row knows before every row is normalized: give the amax operand (a tp.amax, or a calibrated or previous step's), or use mxfp8}}
  %n, %o, %d, %s = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32, format = "fp8_e4m3"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<1xf32>)
  return %d : tensor<16x128xf8E4M3FN>
}

// -----

/// quant.scale on the fused norm's quantized outputs: mxfp8 rowwise scales of [16,128] are [128,4].
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_quantize_mxfp8_scale_shape(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x4xf8E8M0FNU> {
  // expected-error@+1 {{'tp.fused_allreduce_add_rmsnorm_quantize' op violates rule quant.scale: mxfp8 rowwise scales for [M,K]=[16,128] must be tensor<128x4xf8E8M0FNU>; got tensor<16x4xf8E8M0FNU>}}
  %n, %o, %d, %s = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32, format = "mxfp8"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<16x4xf8E8M0FNU>)
  return %s : tensor<16x4xf8E8M0FNU>
}

// -----

/// quant.amax-format on the fused norm: mxfp8 takes no amax operand.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_quantize_mxfp8_with_amax(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>, %a: tensor<1xf32>) -> tensor<16x128xf8E4M3FN> {
  // expected-error@+1 {{'tp.fused_allreduce_add_rmsnorm_quantize' op violates rule quant.amax-format: mxfp8 scales every block by its own amax and takes no amax operand; only fp8_e4m3, fp8_e5m2 and nvfp4 do}}
  %n, %o, %d, %s = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %gamma, %a) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32, format = "mxfp8"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>, tensor<1xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  return %d : tensor<16x128xf8E4M3FN>
}

// -----

/// fused_norm.algorithm: the one-shot and two-shot kernels are all-reduces; the reduce-scatter
/// form has neither.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_reduce_scatter_one_shot(%p: tensor<64x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  // expected-error@+1 {{'tp.fused_reduce_scatter_add_rmsnorm' op violates rule fused_norm.algorithm: algorithm = "one_shot" is for tp.fused_allreduce_add_rmsnorm only; use "auto" or "composition"}}
  %n, %o = "tp.fused_reduce_scatter_add_rmsnorm"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "one_shot"} : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_reduce_scatter_two_shot(%p: tensor<64x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  // expected-error@+1 {{'tp.fused_reduce_scatter_add_rmsnorm' op violates rule fused_norm.algorithm: algorithm = "two_shot" is for tp.fused_allreduce_add_rmsnorm only; use "auto" or "composition"}}
  %n, %o = "tp.fused_reduce_scatter_add_rmsnorm"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "two_shot"} : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// attr.enum: sum_type names the sum's type before the add, "f32" or the residual's; a dtype is
/// not one of them.
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_sum_type(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  // expected-error@+1 {{'tp.fused_allreduce_add_rmsnorm' op violates rule attr.enum: attribute 'sum_type' is "bf16"; allowed values are "f32", "residual"}}
  %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %gamma) {mesh = @mesh, axes = ["tp"], eps = 1.0e-05 : f32, sum_type = "bf16"} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// A collective over a malformed mesh reports only the mesh's error: a size-0 axis must not make
/// the group size 0 (the divisibility check used to divide by it and crash).
// expected-error@+1 {{'tp.mesh' op violates rule mesh.shape: axis "tp" has size 0; sizes must be >= 1}}
"tp.mesh"() {sym_name = "mesh", axes = ["tp"], shape = array<i64: 0>} : () -> ()
func.func @reduce_scatter_over_empty_axis(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %y = "tp.reduce_scatter"(%x) {mesh = @mesh, axes = ["tp"], dim = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// collective.result: an all-reduce keeps the shape; only the float type may change.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_reduce_shape_change(%x: tensor<8x64xf32>) -> tensor<8x32xbf16> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.result: the result must be [8,64] of f32 (or another float type) over a group of 4 ranks; got tensor<8x32xbf16>}}
  %y = "tp.all_reduce"(%x) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}

// -----

/// collective.result: an all-gather moves data and cannot change its type.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @all_gather_type_change(%x: tensor<8x64xf32>) -> tensor<32x64xbf16> {
  // expected-error@+1 {{'tp.all_gather' op violates rule collective.result: the result must be [32,64] of f32 over a group of 4 ranks; got tensor<32x64xbf16>}}
  %y = "tp.all_gather"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<8x64xf32>) -> tensor<32x64xbf16>
  return %y : tensor<32x64xbf16>
}

// -----

/// collective.reduce: a max all-reduce returns one of its inputs, so it keeps their element type.
"tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
func.func @all_reduce_max_rounds(%x: tensor<1xf32>) -> tensor<1xbf16> {
  // expected-error@+1 {{'tp.all_reduce' op violates rule collective.reduce: reduce = "max" takes a bf16, f16 or f32 input and keeps its element type; got tensor<1xf32> -> tensor<1xbf16>}}
  %y = "tp.all_reduce"(%x) {mesh = @world, axes = ["gtp"], reduce = "max"} : (tensor<1xf32>) -> tensor<1xbf16>
  return %y : tensor<1xbf16>
}
