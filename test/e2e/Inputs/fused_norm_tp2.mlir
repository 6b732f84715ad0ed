// fused_norm.mlir on a 2-rank world (the same cases and references; the all-reduce is exactly
// 2·partial, and the reduce-scatter's partial holds 2 ranks' tokens, [16,64]). Two ranks also
// allow order "any" bitwise: p + p is exact in any order, so NCCL's own all-reduce and
// reduce-scatter (fast mode's) must give the canonical bits too: "any_normed" = "ar_normed_ref",
// "any_residual" = "ar_residual_ref", and the reduce-scatter along dim 1 gathered back along dim 1
// is 2·partial: "any_rs_gathered" = "any_rs_expected".
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @step(%p: tensor<8x64xbf16> {tp.name = "partial"}, %r: tensor<8x64xbf16> {tp.name = "residual"},
                %g: tensor<64xbf16> {tp.name = "gamma"},
                %pt: tensor<16x64xbf16> {tp.name = "partial_tokens"},
                %pf: tensor<8x64xf32> {tp.name = "partial_f32"}, %rf: tensor<8x64xf32> {tp.name = "residual_f32"},
                %gf: tensor<64xf32> {tp.name = "gamma_f32"})
    -> (tensor<8x64xbf16> {tp.name = "ar_normed"}, tensor<8x64xbf16> {tp.name = "ar_normed_ref"},
        tensor<8x64xbf16> {tp.name = "ar_residual"}, tensor<8x64xbf16> {tp.name = "ar_residual_ref"},
        tensor<8x64xbf16> {tp.name = "rs_normed"}, tensor<8x64xbf16> {tp.name = "rs_normed_ref"},
        tensor<8x64xbf16> {tp.name = "rs_residual"}, tensor<8x64xbf16> {tp.name = "rs_residual_ref"},
        tensor<8x64xf32> {tp.name = "f32_normed"}, tensor<8x64xf32> {tp.name = "f32_normed_ref"},
        tensor<8x64xf32> {tp.name = "f32_residual"}, tensor<8x64xf32> {tp.name = "f32_residual_ref"},
        tensor<8x64xbf16> {tp.name = "mixed_normed"}, tensor<8x64xbf16> {tp.name = "mixed_residual"},
        tensor<8x64xbf16> {tp.name = "any_normed"}, tensor<8x64xbf16> {tp.name = "any_residual"},
        tensor<8x64xbf16> {tp.name = "any_rs_gathered"}, tensor<8x64xbf16> {tp.name = "any_rs_expected"}) {
  // All-reduce, bf16 partial and residual.
  %n1, %o1 = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical"}
      : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>)
  %s1 = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"], order = "canonical"} : (tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %o1r = "tp.add"(%r, %s1) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n1r = "tp.rmsnorm"(%o1r, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  // Reduce-scatter along the tokens (sequence parallel): partial [32,64] -> this rank's [8,64].
  %n2, %o2 = "tp.fused_reduce_scatter_add_rmsnorm"(%pt, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical"}
      : (tensor<16x64xbf16>, tensor<8x64xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>)
  %s2 = "tp.reduce_scatter"(%pt) {mesh = @world, axes = ["tp"], dim = 0 : i64, order = "canonical"} : (tensor<16x64xbf16>) -> tensor<8x64xbf16>
  %o2r = "tp.add"(%r, %s2) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %n2r = "tp.rmsnorm"(%o2r, %g) {eps = 1.0e-05 : f32} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  // All-reduce, f32 partial and residual.
  %n3, %o3 = "tp.fused_allreduce_add_rmsnorm"(%pf, %rf, %gf) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical"}
      : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>)
  %s3 = "tp.all_reduce"(%pf) {mesh = @world, axes = ["tp"], order = "canonical"} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %o3r = "tp.add"(%rf, %s3) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %n3r = "tp.rmsnorm"(%o3r, %gf) {eps = 1.0e-05 : f32} : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  // All-reduce, f32 partial (a partial linear's) and bf16 residual: the sum is rounded once.
  %n4, %o4 = "tp.fused_allreduce_add_rmsnorm"(%pf, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical"}
      : (tensor<8x64xf32>, tensor<8x64xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>)
  // Order "any" (NCCL's own reductions on the cuda backend).
  %n5, %o5 = "tp.fused_allreduce_add_rmsnorm"(%p, %r, %g) {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "any"}
      : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>)
  %s6 = "tp.reduce_scatter"(%p) {mesh = @world, axes = ["tp"], dim = 1 : i64, order = "any"} : (tensor<8x64xbf16>) -> tensor<8x32xbf16>
  %g6 = "tp.all_gather"(%s6) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<8x32xbf16>) -> tensor<8x64xbf16>
  %e6 = "tp.add"(%p, %p) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  return %n1, %n1r, %o1, %o1r, %n2, %n2r, %o2, %o2r, %n3, %n3r, %o3, %o3r, %n4, %o4, %n5, %o5, %g6, %e6
      : tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>,
        tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>,
        tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>,
        tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>,
        tensor<8x64xbf16>, tensor<8x64xbf16>
}
