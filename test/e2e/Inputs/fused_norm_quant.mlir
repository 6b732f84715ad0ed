// tp.fused_allreduce_add_rmsnorm_quantize on a 2-rank world, each case beside its unfused chain
// (all_reduce rounding to the residual's bf16, add, rmsnorm, quantize): sum_type "residual" and the
// canonical order give the chain's bits, so every fused output's hash equals its reference's
// (test/e2e/fused-norm.test). mxfp8 (one E8M0 scale per 32 columns), fp8_e4m3 and nvfp4 with the
// amax of an earlier tensor (the residual's: delayed scaling's shape), and mxfp8 with algorithm
// "one_shot" (the fused kernel where the backend has one).
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @step(%p: tensor<16x256xf32> {tp.name = "partial"}, %r: tensor<16x256xbf16> {tp.name = "residual"},
                %g: tensor<256xbf16> {tp.name = "gamma"})
    -> (tensor<16x256xf8E4M3FN> {tp.name = "mx_data"}, tensor<16x256xf8E4M3FN> {tp.name = "mx_data_ref"},
        tensor<128x8xf8E8M0FNU> {tp.name = "mx_scale"}, tensor<128x8xf8E8M0FNU> {tp.name = "mx_scale_ref"},
        tensor<16x256xbf16> {tp.name = "mx_normed"}, tensor<16x256xbf16> {tp.name = "mx_normed_ref"},
        tensor<16x256xbf16> {tp.name = "mx_residual"}, tensor<16x256xbf16> {tp.name = "mx_residual_ref"},
        tensor<16x256xf8E4M3FN> {tp.name = "fp8_data"}, tensor<16x256xf8E4M3FN> {tp.name = "fp8_data_ref"},
        tensor<1xf32> {tp.name = "fp8_scale"}, tensor<1xf32> {tp.name = "fp8_scale_ref"},
        tensor<16x256xf4E2M1FN> {tp.name = "fp4_data"}, tensor<16x256xf4E2M1FN> {tp.name = "fp4_data_ref"},
        tensor<128x16xf8E4M3FN> {tp.name = "fp4_scale"}, tensor<128x16xf8E4M3FN> {tp.name = "fp4_scale_ref"},
        tensor<1xf32> {tp.name = "fp4_global"}, tensor<1xf32> {tp.name = "fp4_global_ref"},
        tensor<16x256xf8E4M3FN> {tp.name = "one_shot_data"}, tensor<128x8xf8E8M0FNU> {tp.name = "one_shot_scale"}) {
  %s = "tp.all_reduce"(%p) {mesh = @world, axes = ["tp"], order = "canonical"} : (tensor<16x256xf32>) -> tensor<16x256xbf16>
  %y = "tp.add"(%r, %s) : (tensor<16x256xbf16>, tensor<16x256xbf16>) -> tensor<16x256xbf16>
  %n = "tp.rmsnorm"(%y, %g) {eps = 1.0e-05 : f32} : (tensor<16x256xbf16>, tensor<256xbf16>) -> tensor<16x256xbf16>
  %a = "tp.amax"(%r) : (tensor<16x256xbf16>) -> tensor<1xf32>

  %n1, %o1, %d1, %s1 = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %g)
      {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", sum_type = "residual", format = "mxfp8"}
      : (tensor<16x256xf32>, tensor<16x256xbf16>, tensor<256xbf16>)
      -> (tensor<16x256xbf16>, tensor<16x256xbf16>, tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>)
  %d1r, %s1r = "tp.quantize"(%n) {format = "mxfp8"} : (tensor<16x256xbf16>) -> (tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>)

  %n2, %o2, %d2, %s2 = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %g, %a)
      {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", sum_type = "residual", format = "fp8_e4m3"}
      : (tensor<16x256xf32>, tensor<16x256xbf16>, tensor<256xbf16>, tensor<1xf32>)
      -> (tensor<16x256xbf16>, tensor<16x256xbf16>, tensor<16x256xf8E4M3FN>, tensor<1xf32>)
  %d2r, %s2r = "tp.quantize"(%n, %a) {format = "fp8_e4m3"} : (tensor<16x256xbf16>, tensor<1xf32>) -> (tensor<16x256xf8E4M3FN>, tensor<1xf32>)

  %n3, %o3, %d3, %s3, %g3 = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %g, %a)
      {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", sum_type = "residual", format = "nvfp4"}
      : (tensor<16x256xf32>, tensor<16x256xbf16>, tensor<256xbf16>, tensor<1xf32>)
      -> (tensor<16x256xbf16>, tensor<16x256xbf16>, tensor<16x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<1xf32>)
  %d3r, %s3r, %g3r = "tp.quantize"(%n, %a) {format = "nvfp4"}
      : (tensor<16x256xbf16>, tensor<1xf32>) -> (tensor<16x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<1xf32>)

  %n4, %o4, %d4, %s4 = "tp.fused_allreduce_add_rmsnorm_quantize"(%p, %r, %g)
      {mesh = @world, axes = ["tp"], eps = 1.0e-05 : f32, order = "canonical", sum_type = "residual", format = "mxfp8",
       algorithm = "one_shot"}
      : (tensor<16x256xf32>, tensor<16x256xbf16>, tensor<256xbf16>)
      -> (tensor<16x256xbf16>, tensor<16x256xbf16>, tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>)
  return %d1, %d1r, %s1, %s1r, %n1, %n, %o1, %y, %d2, %d2r, %s2, %s2r, %d3, %d3r, %s3, %s3r, %g3, %g3r, %d4, %s4
      : tensor<16x256xf8E4M3FN>, tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<128x8xf8E8M0FNU>,
        tensor<16x256xbf16>, tensor<16x256xbf16>, tensor<16x256xbf16>, tensor<16x256xbf16>,
        tensor<16x256xf8E4M3FN>, tensor<16x256xf8E4M3FN>, tensor<1xf32>, tensor<1xf32>,
        tensor<16x256xf4E2M1FN>, tensor<16x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<128x16xf8E4M3FN>,
        tensor<1xf32>, tensor<1xf32>, tensor<16x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
}
