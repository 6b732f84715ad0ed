// RUN: tpc-opt %s --split-input-file | FileCheck %s
// RUN: tpc-opt %s --split-input-file | tpc-opt --split-input-file | FileCheck %s
// RUN: %mlir_opt --irdl-file=%tp_irdl %s --split-input-file | FileCheck %s

// Round-trip test of every op of the tp dialect and of the !tp.future type. IRDL ops have no
// custom syntax, so input and output are both in generic form; the printer sorts attributes by
// name. The second RUN line checks that the printed form parses back to the same text, and the
// third that upstream mlir-opt, loading only dialect/tp.irdl.mlir, prints the same IR (it runs
// IRDL's checks but not the C verifier).
//
// Collective cases declare their mesh next to the function; tpc-opt and mlir-opt wrap the
// top-level ops of a chunk in one module. The cases must stay split: two chunks declaring
// @world in one module would redefine the symbol.

/// tp.mesh: a three-axis mesh (dp x tp x gtp = 1 x 4 x 2), declared directly in the module.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp", "gtp"], shape = array<i64: 1, 4, 2>, sym_name = "grid"} : () -> ()
// CHECK-LABEL: func.func @mesh_three_axes(
// CHECK-NEXT:    return
"tp.mesh"() {sym_name = "grid", axes = ["dp", "tp", "gtp"], shape = array<i64: 1, 4, 2>} : () -> ()
func.func @mesh_three_axes() {
  return
}

// -----

/// Module attributes: the numerics mode and the canonical K chunk count.
// CHECK:       module attributes {tp.chunks = 8 : i64, tp.numerics = "invariant"} {
// CHECK-LABEL: func.func @module_attributes_invariant(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xbf16>, %[[W:.*]]: tensor<32x64xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.linear"(%[[X]], %[[W]]) : (tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
// CHECK-NEXT:    return %[[Y]]
module attributes {tp.numerics = "invariant", tp.chunks = 8 : i64} {
  func.func @module_attributes_invariant(%x: tensor<16x64xbf16>,
                                         %w: tensor<32x64xbf16>) -> tensor<16x32xbf16> {
    %y = "tp.linear"(%x, %w) : (tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
    return %y : tensor<16x32xbf16>
  }
}

// -----

/// tp.numerics = "exact" with 16 chunks.
// CHECK:       module attributes {tp.chunks = 16 : i64, tp.numerics = "exact"} {
// CHECK-LABEL: func.func @module_attributes_exact_16_chunks(
// CHECK-SAME:    %[[A:.*]]: tensor<16x64xf32>, %[[B:.*]]: tensor<16x64xf32>)
// CHECK-NEXT:    %[[C:.*]] = "tp.add"(%[[A]], %[[B]]) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    return %[[C]]
module attributes {tp.numerics = "exact", tp.chunks = 16 : i64} {
  func.func @module_attributes_exact_16_chunks(%a: tensor<16x64xf32>,
                                               %b: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %c = "tp.add"(%a, %b) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
    return %c : tensor<16x64xf32>
  }
}

// -----

/// tp.linear with every optional attribute at its default and no bias.
// CHECK-LABEL: func.func @linear_no_bias(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xbf16>, %[[W:.*]]: tensor<32x64xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.linear"(%[[X]], %[[W]]) : (tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_no_bias(%x: tensor<16x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<16x32xbf16> {
  %y = "tp.linear"(%x, %w) : (tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// A column-parallel linear (Megatron ColumnParallelLinear) with the optional bias operand.
// CHECK-LABEL: func.func @linear_column_parallel_with_bias(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xbf16>, %[[W:.*]]: tensor<32x64xbf16>, %[[B:.*]]: tensor<32xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.linear"(%[[X]], %[[W]], %[[B]]) {parallel = "column"} : (tensor<16x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<16x32xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_column_parallel_with_bias(%x: tensor<16x64xbf16>, %w: tensor<32x64xbf16>,
                                            %b: tensor<32xbf16>) -> tensor<16x32xbf16> {
  %y = "tp.linear"(%x, %w, %b) {parallel = "column"}
      : (tensor<16x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}

// -----

/// A row-parallel linear after partitioning: y is the unreduced f32 partial sum of this rank.
// CHECK-LABEL: func.func @linear_row_parallel_partial_f32(
// CHECK-SAME:    %[[X:.*]]: tensor<16x16xbf16>, %[[W:.*]]: tensor<64x16xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.linear"(%[[X]], %[[W]]) {parallel = "row", partial = true} : (tensor<16x16xbf16>, tensor<64x16xbf16>) -> tensor<16x64xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_row_parallel_partial_f32(%x: tensor<16x16xbf16>,
                                           %w: tensor<64x16xbf16>) -> tensor<16x64xf32> {
  %y = "tp.linear"(%x, %w) {parallel = "row", partial = true}
      : (tensor<16x16xbf16>, tensor<64x16xbf16>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

/// sequence_parallel on a column-parallel linear (the input is gathered along tokens).
// CHECK-LABEL: func.func @linear_column_parallel_sequence_parallel(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xf16>, %[[W:.*]]: tensor<32x64xf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.linear"(%[[X]], %[[W]]) {parallel = "column", sequence_parallel = true} : (tensor<16x64xf16>, tensor<32x64xf16>) -> tensor<16x32xf16>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_column_parallel_sequence_parallel(%x: tensor<16x64xf16>,
                                                    %w: tensor<32x64xf16>) -> tensor<16x32xf16> {
  %y = "tp.linear"(%x, %w) {parallel = "column", sequence_parallel = true}
      : (tensor<16x64xf16>, tensor<32x64xf16>) -> tensor<16x32xf16>
  return %y : tensor<16x32xf16>
}

// -----

/// sequence_parallel on a row-parallel linear (the output is reduce-scattered along tokens).
// CHECK-LABEL: func.func @linear_row_parallel_sequence_parallel(
// CHECK-SAME:    %[[X:.*]]: tensor<16x32xf32>, %[[W:.*]]: tensor<64x32xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.linear"(%[[X]], %[[W]]) {parallel = "row", sequence_parallel = true} : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_row_parallel_sequence_parallel(%x: tensor<16x32xf32>,
                                                 %w: tensor<64x32xf32>) -> tensor<16x64xf32> {
  %y = "tp.linear"(%x, %w) {parallel = "row", sequence_parallel = true}
      : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

/// tp.grouped_linear with experts sharded over ranks (expert parallelism).
// CHECK-LABEL: func.func @grouped_linear_expert_parallel(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xbf16>, %[[W:.*]]: tensor<4x128x64xbf16>, %[[SIZES:.*]]: tensor<4xi64>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.grouped_linear"(%[[X]], %[[W]], %[[SIZES]]) {parallel = "expert"} : (tensor<32x64xbf16>, tensor<4x128x64xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @grouped_linear_expert_parallel(%x: tensor<32x64xbf16>, %w: tensor<4x128x64xbf16>,
                                          %sizes: tensor<4xi64>) -> tensor<32x128xbf16> {
  %y = "tp.grouped_linear"(%x, %w, %sizes) {parallel = "expert"}
      : (tensor<32x64xbf16>, tensor<4x128x64xbf16>, tensor<4xi64>) -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}

// -----

/// A row-parallel grouped linear after partitioning returns an f32 partial sum.
// CHECK-LABEL: func.func @grouped_linear_row_parallel_partial_f32(
// CHECK-SAME:    %[[X:.*]]: tensor<32x16xbf16>, %[[W:.*]]: tensor<4x64x16xbf16>, %[[SIZES:.*]]: tensor<4xi64>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.grouped_linear"(%[[X]], %[[W]], %[[SIZES]]) {parallel = "row", partial = true} : (tensor<32x16xbf16>, tensor<4x64x16xbf16>, tensor<4xi64>) -> tensor<32x64xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @grouped_linear_row_parallel_partial_f32(%x: tensor<32x16xbf16>, %w: tensor<4x64x16xbf16>,
                                                   %sizes: tensor<4xi64>) -> tensor<32x64xf32> {
  %y = "tp.grouped_linear"(%x, %w, %sizes) {parallel = "row", partial = true}
      : (tensor<32x16xbf16>, tensor<4x64x16xbf16>, tensor<4xi64>) -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}

// -----

/// tp.glu swiglu on [gate; up] halves (interleave = 0, the default).
// CHECK-LABEL: func.func @glu_swiglu(
// CHECK-SAME:    %[[X:.*]]: tensor<16x256xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.glu"(%[[X]]) {kind = "swiglu"} : (tensor<16x256xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @glu_swiglu(%x: tensor<16x256xbf16>) -> tensor<16x128xbf16> {
  %y = "tp.glu"(%x) {kind = "swiglu"} : (tensor<16x256xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.glu geglu on a rank-3 input: only the last dimension is halved.
// CHECK-LABEL: func.func @glu_geglu_rank3(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x256xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.glu"(%[[X]]) {kind = "geglu"} : (tensor<2x8x256xf32>) -> tensor<2x8x128xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @glu_geglu_rank3(%x: tensor<2x8x256xf32>) -> tensor<2x8x128xf32> {
  %y = "tp.glu"(%x) {kind = "geglu"} : (tensor<2x8x256xf32>) -> tensor<2x8x128xf32>
  return %y : tensor<2x8x128xf32>
}

// -----

/// tp.glu quick_geglu (TE ClampedQGeGLU) with explicit alpha and limit.
// CHECK-LABEL: func.func @glu_quick_geglu_alpha_limit(
// CHECK-SAME:    %[[X:.*]]: tensor<16x256xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.glu"(%[[X]]) {alpha = 1.500000e+00 : f32, kind = "quick_geglu", limit = 8.000000e+00 : f32} : (tensor<16x256xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @glu_quick_geglu_alpha_limit(%x: tensor<16x256xbf16>) -> tensor<16x128xbf16> {
  %y = "tp.glu"(%x) {kind = "quick_geglu", alpha = 1.5 : f32, limit = 8.0 : f32}
      : (tensor<16x256xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.glu swiglu with gate and up interleaved in blocks of 32 rows.
// CHECK-LABEL: func.func @glu_swiglu_interleave_32(
// CHECK-SAME:    %[[X:.*]]: tensor<16x256xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.glu"(%[[X]]) {interleave = 32 : i64, kind = "swiglu"} : (tensor<16x256xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @glu_swiglu_interleave_32(%x: tensor<16x256xbf16>) -> tensor<16x128xbf16> {
  %y = "tp.glu"(%x) {kind = "swiglu", interleave = 32 : i64}
      : (tensor<16x256xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.rmsnorm on bf16 activations with a bf16 gamma.
// CHECK-LABEL: func.func @rmsnorm_bf16(
// CHECK-SAME:    %[[X:.*]]: tensor<16x128xbf16>, %[[GAMMA:.*]]: tensor<128xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.rmsnorm"(%[[X]], %[[GAMMA]]) {eps = 9.99999974E-6 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @rmsnorm_bf16(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>) -> tensor<16x128xbf16> {
  %y = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32}
      : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.rmsnorm on bf16 activations with f32 weights (gamma's float type is independent of x's).
// CHECK-LABEL: func.func @rmsnorm_bf16_with_f32_gamma(
// CHECK-SAME:    %[[X:.*]]: tensor<16x128xbf16>, %[[GAMMA:.*]]: tensor<128xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.rmsnorm"(%[[X]], %[[GAMMA]]) {eps = 9.99999997E-7 : f32} : (tensor<16x128xbf16>, tensor<128xf32>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @rmsnorm_bf16_with_f32_gamma(%x: tensor<16x128xbf16>,
                                       %gamma: tensor<128xf32>) -> tensor<16x128xbf16> {
  %y = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-06 : f32}
      : (tensor<16x128xbf16>, tensor<128xf32>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.layernorm with gamma and beta.
// CHECK-LABEL: func.func @layernorm_bf16(
// CHECK-SAME:    %[[X:.*]]: tensor<16x128xbf16>, %[[GAMMA:.*]]: tensor<128xbf16>, %[[BETA:.*]]: tensor<128xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.layernorm"(%[[X]], %[[GAMMA]], %[[BETA]]) {eps = 9.99999974E-6 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @layernorm_bf16(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>,
                          %beta: tensor<128xbf16>) -> tensor<16x128xbf16> {
  %y = "tp.layernorm"(%x, %gamma, %beta) {eps = 1.0e-05 : f32}
      : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// tp.add: operands and result share one type.
// CHECK-LABEL: func.func @add_bf16(
// CHECK-SAME:    %[[A:.*]]: tensor<16x128xbf16>, %[[B:.*]]: tensor<16x128xbf16>)
// CHECK-NEXT:    %[[C:.*]] = "tp.add"(%[[A]], %[[B]]) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[C]]
func.func @add_bf16(%a: tensor<16x128xbf16>, %b: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  %c = "tp.add"(%a, %b) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
  return %c : tensor<16x128xbf16>
}

// -----

/// tp.mul: operands and result share one type.
// CHECK-LABEL: func.func @mul_f16(
// CHECK-SAME:    %[[A:.*]]: tensor<16x128xf16>, %[[B:.*]]: tensor<16x128xf16>)
// CHECK-NEXT:    %[[C:.*]] = "tp.mul"(%[[A]], %[[B]]) : (tensor<16x128xf16>, tensor<16x128xf16>) -> tensor<16x128xf16>
// CHECK-NEXT:    return %[[C]]
func.func @mul_f16(%a: tensor<16x128xf16>, %b: tensor<16x128xf16>) -> tensor<16x128xf16> {
  %c = "tp.mul"(%a, %b) : (tensor<16x128xf16>, tensor<16x128xf16>) -> tensor<16x128xf16>
  return %c : tensor<16x128xf16>
}

// -----

/// Per-tensor FP8 E4M3, rowwise: data keeps [M,K], one f32 scale.
// CHECK-LABEL: func.func @quantize_dequantize_fp8_e4m3_rowwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {format = "fp8_e4m3"} : (tensor<128x64xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {format = "fp8_e4m3"} : (tensor<128x64xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_fp8_e4m3_rowwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale = "tp.quantize"(%x) {format = "fp8_e4m3"}
      : (tensor<128x64xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale) {format = "fp8_e4m3"}
      : (tensor<128x64xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// tp.amax of a shard, completed by a max all-reduce, then the shard quantized with the whole
/// tensor's amax (what tp-gtp emits for a per-tensor FP8 weight).
// CHECK-LABEL: func.func @amax_all_reduce_quantize_fp8(
// CHECK-SAME:    %[[X:.*]]: tensor<64x64xbf16>)
// CHECK-NEXT:    %[[A:.*]] = "tp.amax"(%[[X]]) : (tensor<64x64xbf16>) -> tensor<1xf32>
// CHECK-NEXT:    %[[M:.*]] = "tp.all_reduce"(%[[A]]) {axes = ["gtp"], mesh = @world, reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]], %[[M]]) {format = "fp8_e4m3"} : (tensor<64x64xbf16>, tensor<1xf32>) -> (tensor<64x64xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    return %[[Q]]#0, %[[Q]]#1
"tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
func.func @amax_all_reduce_quantize_fp8(%x: tensor<64x64xbf16>) -> (tensor<64x64xf8E4M3FN>, tensor<1xf32>) {
  %a = "tp.amax"(%x) : (tensor<64x64xbf16>) -> tensor<1xf32>
  %m = "tp.all_reduce"(%a) {mesh = @world, axes = ["gtp"], reduce = "max"} : (tensor<1xf32>) -> tensor<1xf32>
  %data, %scale = "tp.quantize"(%x, %m) {format = "fp8_e4m3"}
      : (tensor<64x64xbf16>, tensor<1xf32>) -> (tensor<64x64xf8E4M3FN>, tensor<1xf32>)
  return %data, %scale : tensor<64x64xf8E4M3FN>, tensor<1xf32>
}

// -----

/// NVFP4 with an amax operand: the global scale (and so every E4M3 block scale) from that amax.
// CHECK-LABEL: func.func @quantize_nvfp4_with_amax(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xf32>, %[[A:.*]]: tensor<1xf32>)
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[X]], %[[A]]) {format = "nvfp4"} : (tensor<128x64xf32>, tensor<1xf32>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
func.func @quantize_nvfp4_with_amax(%x: tensor<128x64xf32>, %a: tensor<1xf32>)
    -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>) {
  %data, %scale, %global = "tp.quantize"(%x, %a) {format = "nvfp4"}
      : (tensor<128x64xf32>, tensor<1xf32>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
  return %data, %scale, %global : tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>
}

// -----

/// Per-tensor FP8 E4M3, columnwise: data is transposed to [K,M] (Hopper FP8 GEMMs are TN only).
// CHECK-LABEL: func.func @quantize_dequantize_fp8_e4m3_columnwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {axis = "columnwise", format = "fp8_e4m3"} : (tensor<128x64xbf16>) -> (tensor<64x128xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {axis = "columnwise", format = "fp8_e4m3"} : (tensor<64x128xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_fp8_e4m3_columnwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale = "tp.quantize"(%x) {format = "fp8_e4m3", axis = "columnwise"}
      : (tensor<128x64xbf16>) -> (tensor<64x128xf8E4M3FN>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale) {format = "fp8_e4m3", axis = "columnwise"}
      : (tensor<64x128xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// Per-tensor FP8 E5M2 (the gradient format), rowwise.
// CHECK-LABEL: func.func @quantize_dequantize_fp8_e5m2_rowwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {format = "fp8_e5m2"} : (tensor<128x64xbf16>) -> (tensor<128x64xf8E5M2>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {format = "fp8_e5m2"} : (tensor<128x64xf8E5M2>, tensor<1xf32>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_fp8_e5m2_rowwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale = "tp.quantize"(%x) {format = "fp8_e5m2"}
      : (tensor<128x64xbf16>) -> (tensor<128x64xf8E5M2>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale) {format = "fp8_e5m2"}
      : (tensor<128x64xf8E5M2>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// Per-tensor FP8 E5M2, columnwise: data [K,M].
// CHECK-LABEL: func.func @quantize_dequantize_fp8_e5m2_columnwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {axis = "columnwise", format = "fp8_e5m2"} : (tensor<128x64xbf16>) -> (tensor<64x128xf8E5M2>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {axis = "columnwise", format = "fp8_e5m2"} : (tensor<64x128xf8E5M2>, tensor<1xf32>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_fp8_e5m2_columnwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale = "tp.quantize"(%x) {format = "fp8_e5m2", axis = "columnwise"}
      : (tensor<128x64xbf16>) -> (tensor<64x128xf8E5M2>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale) {format = "fp8_e5m2", axis = "columnwise"}
      : (tensor<64x128xf8E5M2>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// MXFP8 rowwise: an E8M0 scale per 32 K elements, [rup(M,128), rup(K/32,4)] = [128,4].
// CHECK-LABEL: func.func @quantize_dequantize_mxfp8_rowwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {format = "mxfp8"} : (tensor<128x64xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {format = "mxfp8"} : (tensor<128x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_mxfp8_rowwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale = "tp.quantize"(%x) {format = "mxfp8"}
      : (tensor<128x64xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  %y = "tp.dequantize"(%data, %scale) {format = "mxfp8"}
      : (tensor<128x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// MXFP8 columnwise: data stays [M,K], scales [rup(M/32,4), rup(K,128)] = [4,128].
// CHECK-LABEL: func.func @quantize_dequantize_mxfp8_columnwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {axis = "columnwise", format = "mxfp8"} : (tensor<128x64xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {axis = "columnwise", format = "mxfp8"} : (tensor<128x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_mxfp8_columnwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale = "tp.quantize"(%x) {format = "mxfp8", axis = "columnwise"}
      : (tensor<128x64xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>)
  %y = "tp.dequantize"(%data, %scale) {format = "mxfp8", axis = "columnwise"}
      : (tensor<128x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// NVFP4 rowwise: E4M3 scales [rup(M,128), rup(K/16,4)] = [128,4] and an f32 global scale.
// CHECK-LABEL: func.func @quantize_dequantize_nvfp4_rowwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[X]]) {format = "nvfp4"} : (tensor<128x64xbf16>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1, %[[Q]]#2) {format = "nvfp4"} : (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_nvfp4_rowwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale, %global = "tp.quantize"(%x) {format = "nvfp4"}
      : (tensor<128x64xbf16>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale, %global) {format = "nvfp4"}
      : (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// NVFP4 columnwise: data [K,M], scales [rup(K,128), rup(M/16,4)] = [128,8], global scale.
// CHECK-LABEL: func.func @quantize_dequantize_nvfp4_columnwise(
// CHECK-SAME:    %[[X:.*]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[X]]) {axis = "columnwise", format = "nvfp4"} : (tensor<128x64xbf16>) -> (tensor<64x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1, %[[Q]]#2) {axis = "columnwise", format = "nvfp4"} : (tensor<64x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_nvfp4_columnwise(%x: tensor<128x64xbf16>) -> tensor<128x64xbf16> {
  %data, %scale, %global = "tp.quantize"(%x) {format = "nvfp4", axis = "columnwise"}
      : (tensor<128x64xbf16>) -> (tensor<64x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale, %global) {format = "nvfp4", axis = "columnwise"}
      : (tensor<64x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// -----

/// MXFP8 scales are padded: M=32 still takes rup(32,128) = 128 scale rows; explicit axis.
// CHECK-LABEL: func.func @quantize_dequantize_mxfp8_rowwise_padded_scale(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xf32>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {axis = "rowwise", format = "mxfp8"} : (tensor<32x64xf32>) -> (tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {axis = "rowwise", format = "mxfp8"} : (tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) -> tensor<32x64xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_mxfp8_rowwise_padded_scale(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %data, %scale = "tp.quantize"(%x) {format = "mxfp8", axis = "rowwise"}
      : (tensor<32x64xf32>) -> (tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  %y = "tp.dequantize"(%data, %scale) {format = "mxfp8", axis = "rowwise"}
      : (tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}

// -----

/// MXFP8 columnwise padding on both scale dims: [rup(32/32,4), rup(64,128)] = [4,128].
// CHECK-LABEL: func.func @quantize_dequantize_mxfp8_columnwise_padded_scale(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xf16>)
// CHECK-NEXT:    %[[Q:.*]]:2 = "tp.quantize"(%[[X]]) {axis = "columnwise", format = "mxfp8"} : (tensor<32x64xf16>) -> (tensor<32x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1) {axis = "columnwise", format = "mxfp8"} : (tensor<32x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>) -> tensor<32x64xf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_mxfp8_columnwise_padded_scale(%x: tensor<32x64xf16>) -> tensor<32x64xf16> {
  %data, %scale = "tp.quantize"(%x) {format = "mxfp8", axis = "columnwise"}
      : (tensor<32x64xf16>) -> (tensor<32x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>)
  %y = "tp.dequantize"(%data, %scale) {format = "mxfp8", axis = "columnwise"}
      : (tensor<32x64xf8E4M3FN>, tensor<4x128xf8E8M0FNU>) -> tensor<32x64xf16>
  return %y : tensor<32x64xf16>
}

// -----

/// NVFP4 columnwise padding: [rup(64,128), rup(32/16,4)] = [128,4].
// CHECK-LABEL: func.func @quantize_dequantize_nvfp4_columnwise_padded_scale(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xbf16>)
// CHECK-NEXT:    %[[Q:.*]]:3 = "tp.quantize"(%[[X]]) {axis = "columnwise", format = "nvfp4"} : (tensor<32x64xbf16>) -> (tensor<64x32xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.dequantize"(%[[Q]]#0, %[[Q]]#1, %[[Q]]#2) {axis = "columnwise", format = "nvfp4"} : (tensor<64x32xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>) -> tensor<32x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @quantize_dequantize_nvfp4_columnwise_padded_scale(%x: tensor<32x64xbf16>) -> tensor<32x64xbf16> {
  %data, %scale, %global = "tp.quantize"(%x) {format = "nvfp4", axis = "columnwise"}
      : (tensor<32x64xbf16>) -> (tensor<64x32xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
  %y = "tp.dequantize"(%data, %scale, %global) {format = "nvfp4", axis = "columnwise"}
      : (tensor<64x32xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>) -> tensor<32x64xbf16>
  return %y : tensor<32x64xbf16>
}

// -----

/// tp.moe_route: top-2 of 8 experts with renormalized weights.
// CHECK-LABEL: func.func @moe_route_top2_normalized(
// CHECK-SAME:    %[[LOGITS:.*]]: tensor<16x8xbf16>)
// CHECK-NEXT:    %[[ROUTE:.*]]:2 = "tp.moe_route"(%[[LOGITS]]) {normalize = true, top_k = 2 : i64} : (tensor<16x8xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
// CHECK-NEXT:    return %[[ROUTE]]#0, %[[ROUTE]]#1
func.func @moe_route_top2_normalized(%logits: tensor<16x8xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>) {
  %indices, %weights = "tp.moe_route"(%logits) {top_k = 2 : i64, normalize = true}
      : (tensor<16x8xbf16>) -> (tensor<16x2xi32>, tensor<16x2xf32>)
  return %indices, %weights : tensor<16x2xi32>, tensor<16x2xf32>
}

// -----

/// tp.moe_permute: 16 tokens, top-2, 8 experts -> 32 expert-sorted rows.
// CHECK-LABEL: func.func @moe_permute_top2(
// CHECK-SAME:    %[[X:.*]]: tensor<16x128xbf16>, %[[INDICES:.*]]: tensor<16x2xi32>)
// CHECK-NEXT:    %[[PERM:.*]]:3 = "tp.moe_permute"(%[[X]], %[[INDICES]]) : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>)
// CHECK-NEXT:    return %[[PERM]]#0, %[[PERM]]#1, %[[PERM]]#2
func.func @moe_permute_top2(%x: tensor<16x128xbf16>,
                            %indices: tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>) {
  %y, %sizes, %map = "tp.moe_permute"(%x, %indices)
      : (tensor<16x128xbf16>, tensor<16x2xi32>) -> (tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>)
  return %y, %sizes, %map : tensor<32x128xbf16>, tensor<8xi64>, tensor<32xi32>
}

// -----

/// tp.moe_unpermute: the weighted combine of 32 expert rows back into 16 tokens.
// CHECK-LABEL: func.func @moe_unpermute_top2(
// CHECK-SAME:    %[[Y:.*]]: tensor<32x128xbf16>, %[[MAP:.*]]: tensor<32xi32>, %[[WEIGHTS:.*]]: tensor<16x2xf32>)
// CHECK-NEXT:    %[[OUT:.*]] = "tp.moe_unpermute"(%[[Y]], %[[MAP]], %[[WEIGHTS]]) : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[OUT]]
func.func @moe_unpermute_top2(%y: tensor<32x128xbf16>, %map: tensor<32xi32>,
                              %weights: tensor<16x2xf32>) -> tensor<16x128xbf16> {
  %out = "tp.moe_unpermute"(%y, %map, %weights)
      : (tensor<32x128xbf16>, tensor<32xi32>, tensor<16x2xf32>) -> tensor<16x128xbf16>
  return %out : tensor<16x128xbf16>
}

// -----

/// tp.rope over 4 heads of D=16 with bf16 tables (inverse = false, the default).
// CHECK-LABEL: func.func @rope_bf16(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xbf16>, %[[COS:.*]]: tensor<16x16xbf16>, %[[SIN:.*]]: tensor<16x16xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.rope"(%[[X]], %[[COS]], %[[SIN]]) : (tensor<16x64xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @rope_bf16(%x: tensor<16x64xbf16>, %cos: tensor<16x16xbf16>,
                     %sin: tensor<16x16xbf16>) -> tensor<16x64xbf16> {
  %y = "tp.rope"(%x, %cos, %sin)
      : (tensor<16x64xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// tp.rope inverse (rope's gradient) on bf16 activations with f32 tables (their float type is independent of x's).
// CHECK-LABEL: func.func @rope_inverse_f32_tables(
// CHECK-NEXT:    "tp.rope"{{.*}} {inverse = true} : (tensor<16x64xbf16>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x64xbf16>
func.func @rope_inverse_f32_tables(%dy: tensor<16x64xbf16>, %cos: tensor<16x16xf32>,
                                   %sin: tensor<16x16xf32>) -> tensor<16x64xbf16> {
  %dx = "tp.rope"(%dy, %cos, %sin) {inverse = true}
      : (tensor<16x64xbf16>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x64xbf16>
  return %dx : tensor<16x64xbf16>
}

// -----

/// tp.attention, causal (the default), grouped-query: 2 sequences of 8 tokens, 4 query heads
/// over 2 key/value heads of D=16.
// CHECK-LABEL: func.func @attention_causal_gqa(
// CHECK-SAME:    %[[Q:.*]]: tensor<16x64xbf16>, %[[K:.*]]: tensor<16x32xbf16>, %[[V:.*]]: tensor<16x32xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.attention"(%[[Q]], %[[K]], %[[V]]) {head_dim = 16 : i64, seq_len = 8 : i64} : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @attention_causal_gqa(%q: tensor<16x64xbf16>, %k: tensor<16x32xbf16>,
                                %v: tensor<16x32xbf16>) -> tensor<16x64xbf16> {
  %y = "tp.attention"(%q, %k, %v) {seq_len = 8 : i64, head_dim = 16 : i64}
      : (tensor<16x64xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// tp.attention without the causal mask and with an explicit scale; as many key/value heads as query heads.
// CHECK-LABEL: func.func @attention_bidirectional_scale(
// CHECK-NEXT:    "tp.attention"{{.*}} {causal = false, head_dim = 32 : i64, scale = 1.250000e-01 : f32, seq_len = 16 : i64} : (tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
func.func @attention_bidirectional_scale(%q: tensor<32x64xf32>, %k: tensor<32x64xf32>,
                                         %v: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %y = "tp.attention"(%q, %k, %v) {seq_len = 16 : i64, head_dim = 32 : i64, causal = false, scale = 0.125 : f32}
      : (tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}

// -----

/// tp.attention_kvcache: one decoding step of 2 sequences (1 new token each) after a KV cache of 8
/// rows per sequence, cache_len cached tokens of each.
// CHECK-LABEL: func.func @attention_kvcache_decode(
// CHECK-NEXT:    "tp.attention_kvcache"{{.*}} {head_dim = 16 : i64, seq_len = 1 : i64} : (tensor<2x64xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<2xi32>) -> tensor<2x64xbf16>
func.func @attention_kvcache_decode(%q: tensor<2x64xbf16>, %k: tensor<2x32xbf16>, %v: tensor<2x32xbf16>,
                                    %kc: tensor<16x32xbf16>, %vc: tensor<16x32xbf16>,
                                    %len: tensor<2xi32>) -> tensor<2x64xbf16> {
  %y = "tp.attention_kvcache"(%q, %k, %v, %kc, %vc, %len) {seq_len = 1 : i64, head_dim = 16 : i64}
      : (tensor<2x64xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<16x32xbf16>, tensor<16x32xbf16>,
         tensor<2xi32>) -> tensor<2x64xbf16>
  return %y : tensor<2x64xbf16>
}

// -----

/// tp.all_reduce over the tensor-parallel axis, in any order (NCCL's).
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_reduce_tp(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_reduce"(%[[X]]) {axes = ["tp"], mesh = @world} : (tensor<16x64xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_reduce_tp(%x: tensor<16x64xbf16>) -> tensor<16x64xbf16> {
  %y = "tp.all_reduce"(%x) {mesh = @world, axes = ["tp"]}
      : (tensor<16x64xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// tp.all_reduce of f32 partials over two mesh axes (8 ranks) in the canonical order.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_reduce_canonical_two_axes(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_reduce"(%[[X]]) {axes = ["dp", "tp"], mesh = @world, order = "canonical"} : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_reduce_canonical_two_axes(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %y = "tp.all_reduce"(%x) {mesh = @world, axes = ["dp", "tp"], order = "canonical"}
      : (tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

/// tp.all_gather along tokens (sequence parallelism): dim 0 grows by the 4 tp ranks.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_gather_dim0(
// CHECK-SAME:    %[[X:.*]]: tensor<4x64xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_gather"(%[[X]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<4x64xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_gather_dim0(%x: tensor<4x64xbf16>) -> tensor<16x64xbf16> {
  %y = "tp.all_gather"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64}
      : (tensor<4x64xbf16>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// tp.all_gather of FP8 weight shards along dim 1 (GTP quantize-then-gather).
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_gather_fp8_dim1(
// CHECK-SAME:    %[[X:.*]]: tensor<64x16xf8E4M3FN>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_gather"(%[[X]]) {axes = ["tp"], dim = 1 : i64, mesh = @world} : (tensor<64x16xf8E4M3FN>) -> tensor<64x64xf8E4M3FN>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_gather_fp8_dim1(%x: tensor<64x16xf8E4M3FN>) -> tensor<64x64xf8E4M3FN> {
  %y = "tp.all_gather"(%x) {mesh = @world, axes = ["tp"], dim = 1 : i64}
      : (tensor<64x16xf8E4M3FN>) -> tensor<64x64xf8E4M3FN>
  return %y : tensor<64x64xf8E4M3FN>
}

// -----

/// tp.reduce_scatter along tokens in the canonical order: dim 0 shrinks by the 4 tp ranks.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @reduce_scatter_canonical_dim0(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.reduce_scatter"(%[[X]]) {axes = ["tp"], dim = 0 : i64, mesh = @world, order = "canonical"} : (tensor<16x64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @reduce_scatter_canonical_dim0(%x: tensor<16x64xf32>) -> tensor<4x64xf32> {
  %y = "tp.reduce_scatter"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64, order = "canonical"}
      : (tensor<16x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

/// tp.all_to_all with split_dim = concat_dim (expert-parallel token dispatch): the shape is kept.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_to_all_same_dim(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_to_all"(%[[X]]) {axes = ["tp"], concat_dim = 0 : i64, mesh = @world, split_dim = 0 : i64} : (tensor<32x64xbf16>) -> tensor<32x64xbf16>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_to_all_same_dim(%x: tensor<32x64xbf16>) -> tensor<32x64xbf16> {
  %y = "tp.all_to_all"(%x) {mesh = @world, axes = ["tp"], split_dim = 0 : i64, concat_dim = 0 : i64}
      : (tensor<32x64xbf16>) -> tensor<32x64xbf16>
  return %y : tensor<32x64xbf16>
}

// -----

/// tp.all_to_all from head-sharded to token-sharded (Ulysses): split dim 1, concat dim 0.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_to_all_split1_concat0(
// CHECK-SAME:    %[[X:.*]]: tensor<8x64xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_to_all"(%[[X]]) {axes = ["tp"], concat_dim = 0 : i64, mesh = @world, order = "canonical", split_dim = 1 : i64} : (tensor<8x64xbf16>) -> tensor<32x16xbf16>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_to_all_split1_concat0(%x: tensor<8x64xbf16>) -> tensor<32x16xbf16> {
  %y = "tp.all_to_all"(%x) {mesh = @world, axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64, order = "canonical"}
      : (tensor<8x64xbf16>) -> tensor<32x16xbf16>
  return %y : tensor<32x16xbf16>
}

// -----

/// tp.all_gather_start returns a future; tp.wait yields the gathered tensor.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @all_gather_start_wait(
// CHECK-SAME:    %[[X:.*]]: tensor<16x64xbf16>)
// CHECK-NEXT:    %[[F:.*]] = "tp.all_gather_start"(%[[X]]) {axes = ["tp"], dim = 0 : i64, mesh = @world} : (tensor<16x64xbf16>) -> !tp.future<tensor<64x64xbf16>>
// CHECK-NEXT:    %[[Y:.*]] = "tp.wait"(%[[F]]) : (!tp.future<tensor<64x64xbf16>>) -> tensor<64x64xbf16>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @all_gather_start_wait(%x: tensor<16x64xbf16>) -> tensor<64x64xbf16> {
  %f = "tp.all_gather_start"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64}
      : (tensor<16x64xbf16>) -> !tp.future<tensor<64x64xbf16>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<64x64xbf16>>) -> tensor<64x64xbf16>
  return %y : tensor<64x64xbf16>
}

// -----

/// tp.reduce_scatter_start (canonical) returns a future; tp.wait yields this rank's slice.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @reduce_scatter_start_wait(
// CHECK-SAME:    %[[X:.*]]: tensor<64x64xf32>)
// CHECK-NEXT:    %[[F:.*]] = "tp.reduce_scatter_start"(%[[X]]) {axes = ["tp"], dim = 0 : i64, mesh = @world, order = "canonical"} : (tensor<64x64xf32>) -> !tp.future<tensor<16x64xf32>>
// CHECK-NEXT:    %[[Y:.*]] = "tp.wait"(%[[F]]) : (!tp.future<tensor<16x64xf32>>) -> tensor<16x64xf32>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @reduce_scatter_start_wait(%x: tensor<64x64xf32>) -> tensor<16x64xf32> {
  %f = "tp.reduce_scatter_start"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64, order = "canonical"}
      : (tensor<64x64xf32>) -> !tp.future<tensor<16x64xf32>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<16x64xf32>>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

/// tp.all_to_all_start (2 blocks: each rank's piece of each block) returns a future; tp.wait yields what arrived.
// CHECK-LABEL: func.func @all_to_all_start_wait(
// CHECK-SAME:    %[[X:.*]]: tensor<8x256xbf16>)
// CHECK-NEXT:    %[[F:.*]] = "tp.all_to_all_start"(%[[X]]) {axes = ["gtp"], blocks = 2 : i64, concat_dim = 0 : i64, mesh = @world, split_dim = 1 : i64} : (tensor<8x256xbf16>) -> !tp.future<tensor<16x128xbf16>>
// CHECK-NEXT:    %[[Y:.*]] = "tp.wait"(%[[F]]) : (!tp.future<tensor<16x128xbf16>>) -> tensor<16x128xbf16>
// CHECK-NEXT:    return %[[Y]]
"tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
func.func @all_to_all_start_wait(%x: tensor<8x256xbf16>) -> tensor<16x128xbf16> {
  %f = "tp.all_to_all_start"(%x) {mesh = @world, axes = ["gtp"], split_dim = 1 : i64, concat_dim = 0 : i64, blocks = 2 : i64}
      : (tensor<8x256xbf16>) -> !tp.future<tensor<16x128xbf16>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<16x128xbf16>>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// -----

/// !tp.future as a function argument: tp.wait needs no collective in sight.
// CHECK-LABEL: func.func @wait_future_argument(
// CHECK-SAME:    %[[F:.*]]: !tp.future<tensor<16x64xbf16>>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.wait"(%[[F]]) : (!tp.future<tensor<16x64xbf16>>) -> tensor<16x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @wait_future_argument(%f: !tp.future<tensor<16x64xbf16>>) -> tensor<16x64xbf16> {
  %y = "tp.wait"(%f) : (!tp.future<tensor<16x64xbf16>>) -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

/// tp.fused_allreduce_add_rmsnorm on an f32 partial from a row-parallel linear.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @fused_allreduce_add_rmsnorm_f32_partial(
// CHECK-SAME:    %[[PARTIAL:.*]]: tensor<16x128xf32>, %[[RESIDUAL:.*]]: tensor<16x128xbf16>, %[[GAMMA:.*]]: tensor<128xbf16>)
// CHECK-NEXT:    %[[NORM:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(%[[PARTIAL]], %[[RESIDUAL]], %[[GAMMA]]) {axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world, order = "canonical"} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
// CHECK-NEXT:    return %[[NORM]]#0, %[[NORM]]#1
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @fused_allreduce_add_rmsnorm_f32_partial(%partial: tensor<16x128xf32>,
                                                   %residual: tensor<16x128xbf16>,
                                                   %gamma: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %normed, %residual_out = "tp.fused_allreduce_add_rmsnorm"(%partial, %residual, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %normed, %residual_out : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// tp.fused_reduce_scatter_add_rmsnorm (sequence parallel): partial has all 4 ranks' tokens.
// CHECK:       "tp.mesh"() {axes = ["dp", "tp"], shape = array<i64: 2, 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @fused_reduce_scatter_add_rmsnorm_sequence_parallel(
// CHECK-SAME:    %[[PARTIAL:.*]]: tensor<64x128xbf16>, %[[RESIDUAL:.*]]: tensor<16x128xbf16>, %[[GAMMA:.*]]: tensor<128xf32>)
// CHECK-NEXT:    %[[NORM:.*]]:2 = "tp.fused_reduce_scatter_add_rmsnorm"(%[[PARTIAL]], %[[RESIDUAL]], %[[GAMMA]]) {axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world} : (tensor<64x128xbf16>, tensor<16x128xbf16>, tensor<128xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
// CHECK-NEXT:    return %[[NORM]]#0, %[[NORM]]#1
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @fused_reduce_scatter_add_rmsnorm_sequence_parallel(%partial: tensor<64x128xbf16>,
                                                              %residual: tensor<16x128xbf16>,
                                                              %gamma: tensor<128xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %normed, %residual_out = "tp.fused_reduce_scatter_add_rmsnorm"(%partial, %residual, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32}
      : (tensor<64x128xbf16>, tensor<16x128xbf16>, tensor<128xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %normed, %residual_out : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// tp.fused_grouped_mlp with SwiGLU: 4 experts, hidden 64, expert FFN 128.
// CHECK-LABEL: func.func @fused_grouped_mlp_swiglu(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xbf16>, %[[W1:.*]]: tensor<4x256x64xbf16>, %[[W2:.*]]: tensor<4x64x128xbf16>, %[[SIZES:.*]]: tensor<4xi64>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.fused_grouped_mlp"(%[[X]], %[[W1]], %[[W2]], %[[SIZES]]) {kind = "swiglu"} : (tensor<32x64xbf16>, tensor<4x256x64xbf16>, tensor<4x64x128xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @fused_grouped_mlp_swiglu(%x: tensor<32x64xbf16>, %w1: tensor<4x256x64xbf16>,
                                    %w2: tensor<4x64x128xbf16>,
                                    %sizes: tensor<4xi64>) -> tensor<32x64xbf16> {
  %y = "tp.fused_grouped_mlp"(%x, %w1, %w2, %sizes) {kind = "swiglu"}
      : (tensor<32x64xbf16>, tensor<4x256x64xbf16>, tensor<4x64x128xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
  return %y : tensor<32x64xbf16>
}

// -----

/// tp.fused_grouped_mlp with quick_geglu, explicit alpha and limit, and FC1 rows interleaved by 32.
// CHECK-LABEL: func.func @fused_grouped_mlp_quick_geglu_interleave_32(
// CHECK-SAME:    %[[X:.*]]: tensor<32x64xbf16>, %[[W1:.*]]: tensor<4x256x64xbf16>, %[[W2:.*]]: tensor<4x64x128xbf16>, %[[SIZES:.*]]: tensor<4xi64>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.fused_grouped_mlp"(%[[X]], %[[W1]], %[[W2]], %[[SIZES]]) {alpha = 1.702000e+00 : f32, interleave = 32 : i64, kind = "quick_geglu", limit = 7.000000e+00 : f32} : (tensor<32x64xbf16>, tensor<4x256x64xbf16>, tensor<4x64x128xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
// CHECK-NEXT:    return %[[Y]]
func.func @fused_grouped_mlp_quick_geglu_interleave_32(%x: tensor<32x64xbf16>,
                                                       %w1: tensor<4x256x64xbf16>,
                                                       %w2: tensor<4x64x128xbf16>,
                                                       %sizes: tensor<4xi64>) -> tensor<32x64xbf16> {
  %y = "tp.fused_grouped_mlp"(%x, %w1, %w2, %sizes) {kind = "quick_geglu", alpha = 1.702 : f32, limit = 7.0 : f32, interleave = 32 : i64}
      : (tensor<32x64xbf16>, tensor<4x256x64xbf16>, tensor<4x64x128xbf16>, tensor<4xi64>) -> tensor<32x64xbf16>
  return %y : tensor<32x64xbf16>
}

// -----

/// all_reduce completing f32 partials into a bf16 result (the row-parallel linear's reduction).
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
// CHECK-LABEL: func.func @all_reduce_f32_partials_to_bf16(
// CHECK-SAME:      %[[P:.*]]: tensor<8x64xf32>)
// CHECK-NEXT:    %[[Y:.*]] = "tp.all_reduce"(%[[P]]) {axes = ["tp"], mesh = @world} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
func.func @all_reduce_f32_partials_to_bf16(%p: tensor<8x64xf32>) -> tensor<8x64xbf16> {
  %y = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"]} : (tensor<8x64xf32>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

/// moe_bucket / moe_unbucket: expert-parallel dispatch buckets (4 ranks, 8 experts, 32 rows).
// CHECK-LABEL: func.func @moe_bucket_round_trip(
// CHECK-SAME:      %[[X:.*]]: tensor<32x128xbf16>, %[[G:.*]]: tensor<8xi64>)
// CHECK-NEXT:    %[[B:.*]] = "tp.moe_bucket"(%[[X]], %[[G]]) {buckets = 4 : i64} : (tensor<32x128xbf16>, tensor<8xi64>) -> tensor<128x128xbf16>
// CHECK-NEXT:    %[[Y:.*]] = "tp.moe_unbucket"(%[[B]], %[[G]]) {buckets = 4 : i64} : (tensor<128x128xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
func.func @moe_bucket_round_trip(%x: tensor<32x128xbf16>, %g: tensor<8xi64>) -> tensor<32x128xbf16> {
  %b = "tp.moe_bucket"(%x, %g) {buckets = 4 : i64} : (tensor<32x128xbf16>, tensor<8xi64>) -> tensor<128x128xbf16>
  %y = "tp.moe_unbucket"(%b, %g) {buckets = 4 : i64} : (tensor<128x128xbf16>, tensor<8xi64>) -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}

// -----

/// grouped_linear over 4 segments of 2 local experts (the rows an expert-parallel rank receives).
// CHECK-LABEL: func.func @grouped_linear_segments(
// CHECK-NEXT:    "tp.grouped_linear"{{.*}} : (tensor<128x64xbf16>, tensor<2x32x64xbf16>, tensor<8xi64>) -> tensor<128x32xbf16>
func.func @grouped_linear_segments(%x: tensor<128x64xbf16>, %w: tensor<2x32x64xbf16>, %g: tensor<8xi64>) -> tensor<128x32xbf16> {
  %y = "tp.grouped_linear"(%x, %w, %g) {parallel = "expert"} : (tensor<128x64xbf16>, tensor<2x32x64xbf16>, tensor<8xi64>) -> tensor<128x32xbf16>
  return %y : tensor<128x32xbf16>
}

// -----

/// add with a rank-1 rhs: a bias broadcast over the rows.
// CHECK-LABEL: func.func @add_bias_broadcast(
// CHECK-NEXT:    "tp.add"{{.*}} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
func.func @add_bias_broadcast(%x: tensor<8x64xbf16>, %b: tensor<64xbf16>) -> tensor<8x64xbf16> {
  %y = "tp.add"(%x, %b) : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}
