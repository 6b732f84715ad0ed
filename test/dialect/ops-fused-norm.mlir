// RUN: tpc-opt %s --split-input-file | FileCheck %s
// RUN: tpc-opt %s --split-input-file | tpc-opt --split-input-file | FileCheck %s
// RUN: %mlir_opt --irdl-file=%tp_irdl %s --split-input-file | FileCheck %s

// Round trip of the fused norms' `algorithm` and `sum_type` attributes; the other fused-op cases are in ops.mlir.

/// `algorithm` on the fused norms: "one_shot" and "two_shot" on the all-reduce form, "composition"
/// on both.
// CHECK:       "tp.mesh"() {axes = ["tp"], shape = array<i64: 4>, sym_name = "world"} : () -> ()
// CHECK-LABEL: func.func @fused_norm_algorithm(
// CHECK-SAME:    %[[PARTIAL:.*]]: tensor<16x128xf32>, %[[RESIDUAL:.*]]: tensor<16x128xbf16>, %[[GAMMA:.*]]: tensor<128xbf16>, %[[TOKENS:.*]]: tensor<64x128xf32>)
// CHECK-NEXT:    %[[ONE:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(%[[PARTIAL]], %[[RESIDUAL]], %[[GAMMA]]) {algorithm = "one_shot", axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
// CHECK-NEXT:    %[[TWO:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(%[[PARTIAL]], %[[ONE]]#1, %[[GAMMA]]) {algorithm = "two_shot", axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
// CHECK-NEXT:    %[[COMP:.*]]:2 = "tp.fused_allreduce_add_rmsnorm"(%[[PARTIAL]], %[[TWO]]#1, %[[GAMMA]]) {algorithm = "composition", axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world, order = "canonical"} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
// CHECK-NEXT:    %[[SCAT:.*]]:2 = "tp.fused_reduce_scatter_add_rmsnorm"(%[[TOKENS]], %[[COMP]]#1, %[[GAMMA]]) {algorithm = "composition", axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world} : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
// CHECK-NEXT:    return %[[SCAT]]#0, %[[SCAT]]#1
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_algorithm(%partial: tensor<16x128xf32>, %residual: tensor<16x128xbf16>, %gamma: tensor<128xbf16>,
                                %tokens: tensor<64x128xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n1, %o1 = "tp.fused_allreduce_add_rmsnorm"(%partial, %residual, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "one_shot"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  %n4, %o4 = "tp.fused_allreduce_add_rmsnorm"(%partial, %o1, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "two_shot"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  %n2, %o2 = "tp.fused_allreduce_add_rmsnorm"(%partial, %o4, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", algorithm = "composition"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  %n3, %o3 = "tp.fused_reduce_scatter_add_rmsnorm"(%tokens, %o2, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "composition"}
      : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n3, %o3 : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// `sum_type` on both fused norms: "residual" rounds the sum to the residual's type before the add
/// (what tp-fuse writes outside fast numerics); "f32", the default, is printed when written.
// CHECK-LABEL: func.func @fused_norm_sum_type(
// CHECK:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world, order = "canonical", sum_type = "residual"}
// CHECK:         "tp.fused_reduce_scatter_add_rmsnorm"({{.*}}) {axes = ["tp"], eps = 9.99999974E-6 : f32, mesh = @world, sum_type = "f32"}
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_sum_type(%partial: tensor<16x128xf32>, %residual: tensor<16x128xbf16>, %gamma: tensor<128xbf16>,
                               %tokens: tensor<64x128xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n1, %o1 = "tp.fused_allreduce_add_rmsnorm"(%partial, %residual, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", sum_type = "residual"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  %n2, %o2 = "tp.fused_reduce_scatter_add_rmsnorm"(%tokens, %o1, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, sum_type = "f32"}
      : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n2, %o2 : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// tp.fused_allreduce_add_rmsnorm_quantize: mxfp8 (no amax), fp8_e4m3 and nvfp4 with the amax operand
/// (nvfp4 also returns its global scale).
// CHECK-LABEL: func.func @fused_norm_quantize(
// CHECK:         "tp.fused_allreduce_add_rmsnorm_quantize"(%{{.*}}, %{{.*}}, %{{.*}}) {axes = ["tp"], eps = 9.99999974E-6 : f32, format = "mxfp8", mesh = @world} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
// CHECK:         "tp.fused_allreduce_add_rmsnorm_quantize"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {axes = ["tp"], eps = 9.99999974E-6 : f32, format = "fp8_e4m3", mesh = @world, sum_type = "residual"} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>, tensor<1xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<1xf32>)
// CHECK:         "tp.fused_allreduce_add_rmsnorm_quantize"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {algorithm = "one_shot", axes = ["tp"], eps = 9.99999974E-6 : f32, format = "nvfp4", mesh = @world} : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>, tensor<1xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>)
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_norm_quantize(%partial: tensor<16x128xf32>, %residual: tensor<16x128xbf16>, %gamma: tensor<128xbf16>,
                               %amax: tensor<1xf32>) -> (tensor<16x128xf8E4M3FN>, tensor<128x4xf8E8M0FNU>, tensor<16x128xf8E4M3FN>, tensor<16x128xf4E2M1FN>) {
  %n1, %o1, %d1, %s1 = "tp.fused_allreduce_add_rmsnorm_quantize"(%partial, %residual, %gamma) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, format = "mxfp8"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  %n2, %o2, %d2, %s2 = "tp.fused_allreduce_add_rmsnorm_quantize"(%partial, %o1, %gamma, %amax) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, format = "fp8_e4m3", sum_type = "residual"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>, tensor<1xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf8E4M3FN>, tensor<1xf32>)
  %n3, %o3, %d3, %s3, %g3 = "tp.fused_allreduce_add_rmsnorm_quantize"(%partial, %o2, %gamma, %amax) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, format = "nvfp4", algorithm = "one_shot"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>, tensor<1xf32>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x128xf4E2M1FN>, tensor<128x8xf8E4M3FN>, tensor<1xf32>)
  return %d1, %s1, %d2, %d3 : tensor<16x128xf8E4M3FN>, tensor<128x4xf8E8M0FNU>, tensor<16x128xf8E4M3FN>, tensor<16x128xf4E2M1FN>
}
