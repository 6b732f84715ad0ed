// RUN: tpc-opt %s --split-input-file --fused-norm-algorithm=one-shot | FileCheck %s --check-prefix=ONESHOT
// RUN: tpc-opt %s --split-input-file --fused-norm-algorithm=two-shot | FileCheck %s --check-prefix=TWOSHOT
// RUN: tpc-opt %s --split-input-file --pass-pipeline='builtin.module(tp-lower-runtime{fused-norm-algorithm=two-shot})' | FileCheck %s --check-prefix=LOWERED2
// RUN: tpc-opt %s --split-input-file --pass-pipeline='builtin.module(tp-lower-runtime{fused-norm-algorithm=composition})' | FileCheck %s --check-prefix=LOWERED
// RUN: not tpc-opt %s --pass-pipeline='builtin.module(tp-lower-runtime{fused-norm-algorithm=one_shot})' 2>&1 | FileCheck %s --check-prefix=BADVALUE --implicit-check-not='{{.}}'
// RUN: not tpc-compile %s -o %t.so --fused-norm-algorithm=fused 2>&1 | FileCheck %s --check-prefix=BADFLAG --implicit-check-not='{{.}}'
// RUN: not tpc-opt %s --pass-pipeline='builtin.module(tp-lower-runtime{algorithm=one-shot})' 2>&1 | FileCheck %s --check-prefix=BADNAME --implicit-check-not='{{.}}'

// tp-lower-runtime's fused-norm-algorithm option (also tpc-opt's and tpc-compile's
// --fused-norm-algorithm) sets `algorithm` on every fused norm left at "auto"; an explicit other
// value in the input wins.

// BADVALUE: tpc-opt: error: --fused-norm-algorithm must be auto, one-shot, two-shot or composition; got 'one_shot'
// BADFLAG: tpc-compile: error: --fused-norm-algorithm must be auto, one-shot, two-shot or composition; got 'fused'
// BADNAME: tpc-opt: error: pass tp-lower-runtime has no option 'algorithm' (it takes fused-norm-algorithm)

/// The option sets the attribute on a fused all-reduce norm that has none, and the descriptor
/// carries it: after eps's bits come algorithm (composition: 2, two_shot: 3), order (any: 0) and
/// sum_type (f32: 0).
// ONESHOT-LABEL: func.func @fused_allreduce_without_algorithm(
// ONESHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "one_shot", axes = ["tp"], eps = {{[^,]*}}, mesh = @world}
// TWOSHOT-LABEL: func.func @fused_allreduce_without_algorithm(
// TWOSHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "two_shot", axes = ["tp"], eps = {{[^,]*}}, mesh = @world}
// LOWERED:       llvm.mlir.global internal constant @__tpc_desc_fused_allreduce_without_algorithm_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 2, 1, 0, 1, 0]>
// LOWERED2:      llvm.mlir.global internal constant @__tpc_desc_fused_allreduce_without_algorithm_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 3, 1, 0, 1, 0]>
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_allreduce_without_algorithm(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>)
    -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// An explicit "auto" is the default: the option replaces it.
// ONESHOT-LABEL: func.func @fused_allreduce_explicit_auto(
// ONESHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "one_shot", axes = ["tp"], eps = {{[^,]*}}, mesh = @world, order = "canonical"}
// TWOSHOT-LABEL: func.func @fused_allreduce_explicit_auto(
// TWOSHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "two_shot", axes = ["tp"], eps = {{[^,]*}}, mesh = @world, order = "canonical"}
// LOWERED:       llvm.mlir.global internal constant @__tpc_desc_fused_allreduce_explicit_auto_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 2, 1, 1, 1, 0]>
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_allreduce_explicit_auto(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>)
    -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", algorithm = "auto"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// An explicit non-default algorithm in the input wins over the option.
// ONESHOT-LABEL: func.func @fused_allreduce_explicit_algorithm_wins(
// ONESHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "composition", axes = ["tp"]
// ONESHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "one_shot", axes = ["tp"]
// TWOSHOT-LABEL: func.func @fused_allreduce_explicit_algorithm_wins(
// TWOSHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "composition", axes = ["tp"]
// TWOSHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "one_shot", axes = ["tp"]
// LOWERED:       llvm.mlir.global internal constant @__tpc_desc_fused_allreduce_explicit_algorithm_wins_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 2, 1, 0, 1, 0]>
// LOWERED:       llvm.mlir.global internal constant @__tpc_desc_fused_allreduce_explicit_algorithm_wins_1(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 1, 1, 0, 1, 0]>
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_allreduce_explicit_algorithm_wins(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>)
    -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "composition"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  %n2, %o2 = "tp.fused_allreduce_add_rmsnorm"(%p, %o, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "one_shot"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n2, %o2 : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// The reduce-scatter form has no fused kernel: one-shot and two-shot leave it at "auto" (no
/// attribute, 0 in the descriptor); composition applies to it.
// ONESHOT-LABEL: func.func @fused_reduce_scatter_stays_auto(
// ONESHOT-NOT:     algorithm
// ONESHOT:         "tp.fused_reduce_scatter_add_rmsnorm"({{.*}}) {axes = ["tp"], eps = {{[^,]*}}, mesh = @world}
// TWOSHOT-LABEL: func.func @fused_reduce_scatter_stays_auto(
// TWOSHOT-NOT:     algorithm
// TWOSHOT:         "tp.fused_reduce_scatter_add_rmsnorm"({{.*}}) {axes = ["tp"], eps = {{[^,]*}}, mesh = @world}
// LOWERED:       llvm.mlir.global internal constant @__tpc_desc_fused_reduce_scatter_stays_auto_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 2, 1, 0, 1, 0]>
// LOWERED2:      llvm.mlir.global internal constant @__tpc_desc_fused_reduce_scatter_stays_auto_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 0, 1, 0, 1, 0]>
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_reduce_scatter_stays_auto(%p: tensor<64x128xf32>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>)
    -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n, %o = "tp.fused_reduce_scatter_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32}
      : (tensor<64x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}

// -----

/// An explicit "two_shot" wins over the option too, and the descriptor carries it (3).
// ONESHOT-LABEL: func.func @fused_allreduce_explicit_two_shot_wins(
// ONESHOT:         "tp.fused_allreduce_add_rmsnorm"({{.*}}) {algorithm = "two_shot", axes = ["tp"]
// LOWERED:       llvm.mlir.global internal constant @__tpc_desc_fused_allreduce_explicit_two_shot_wins_0(dense<[{{.*}}, 1, 1, 1, 925353388, 1, 3, 1, 0, 1, 0]>
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @fused_allreduce_explicit_two_shot_wins(%p: tensor<16x128xf32>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>)
    -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
  %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, algorithm = "two_shot"}
      : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
  return %n, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
}
