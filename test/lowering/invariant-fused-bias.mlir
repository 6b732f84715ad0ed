// RUN: tpc-opt %s --tp-invariant | FileCheck %s
// A bias added after a fused all-reduce + add + RMSNorm is added to its normalized rows, not to the
// reduced sum: tp-invariant keeps the fused op's results as they are (regression: it used to
// retype the first result to f32 as for a plain all-reduce).
module attributes {tp.numerics = "invariant"} {
  "tp.mesh"() {axes = ["tp"], shape = array<i64: 2>, sym_name = "world"} : () -> ()
  func.func @f(%a: tensor<16x64xbf16>, %w: tensor<128x64xbf16>, %r: tensor<16x128xbf16>, %g: tensor<128xbf16>,
               %b: tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>) {
    // CHECK: "tp.linear"{{.*}}chunks = 4 : i64
    %p = "tp.linear"(%a, %w) {parallel = "row", partial = true} : (tensor<16x64xbf16>, tensor<128x64xbf16>) -> tensor<16x128xf32>
    // CHECK: "tp.fused_allreduce_add_rmsnorm"{{.*}}order = "canonical"{{.*}} -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
    %n, %o = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32}
        : (tensor<16x128xf32>, tensor<16x128xbf16>, tensor<128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
    // CHECK: "tp.add"{{.*}} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %nb = "tp.add"(%n, %b) : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    return %nb, %o : tensor<16x128xbf16>, tensor<16x128xbf16>
  }
}
