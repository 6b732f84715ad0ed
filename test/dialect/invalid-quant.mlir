// RUN: tpc-opt %s --split-input-file --verify-diagnostics

// Negative tests of the tp.quantize / tp.dequantize rules: one case per rule id, one per format
// and axis for the scale layouts, and one per condition of the global scale.

/// quant.input: quantization works on a float matrix [M,K]; a rank-1 tensor has no rows to scale.
func.func @quantize_rank1_input(%x: tensor<2048xbf16>) -> (tensor<2048xf8E4M3FN>, tensor<1xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.input: the high-precision tensor must be a bf16, f16 or f32 [M,K]; got tensor<2048xbf16>}}
  %d, %s = "tp.quantize"(%x) {format = "fp8_e4m3"} : (tensor<2048xbf16>) -> (tensor<2048xf8E4M3FN>, tensor<1xf32>)
  return %d, %s : tensor<2048xf8E4M3FN>, tensor<1xf32>
}

// -----

/// quant.data: fp8_e4m3 stores f8E4M3FN; f8E5M2 is the fp8_e5m2 format.
func.func @quantize_fp8_e4m3_wrong_data_type(%x: tensor<32x64xbf16>) -> (tensor<32x64xf8E5M2>, tensor<1xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.data: fp8_e4m3 rowwise data must be tensor<32x64xf8E4M3FN>; got tensor<32x64xf8E5M2>}}
  %d, %s = "tp.quantize"(%x) {format = "fp8_e4m3"} : (tensor<32x64xbf16>) -> (tensor<32x64xf8E5M2>, tensor<1xf32>)
  return %d, %s : tensor<32x64xf8E5M2>, tensor<1xf32>
}

// -----

/// quant.data: per-tensor FP8 columnwise data is stored transposed, [K,M], because Hopper FP8 GEMMs are TN only.
func.func @quantize_fp8_columnwise_not_transposed(%x: tensor<32x64xbf16>) -> (tensor<32x64xf8E4M3FN>, tensor<1xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.data: fp8_e4m3 columnwise data must be tensor<64x32xf8E4M3FN>; got tensor<32x64xf8E4M3FN>}}
  %d, %s = "tp.quantize"(%x) {format = "fp8_e4m3", axis = "columnwise"} : (tensor<32x64xbf16>) -> (tensor<32x64xf8E4M3FN>, tensor<1xf32>)
  return %d, %s : tensor<32x64xf8E4M3FN>, tensor<1xf32>
}

// -----

/// quant.block: MXFP8 rowwise scales blocks of 32 consecutive K elements; K=48 leaves a partial block.
func.func @quantize_mxfp8_rowwise_partial_block(%x: tensor<32x48xbf16>) -> (tensor<32x48xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.block: mxfp8 rowwise blocks of 32 need K=48 divisible by 32}}
  %d, %s = "tp.quantize"(%x) {format = "mxfp8"} : (tensor<32x48xbf16>) -> (tensor<32x48xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  return %d, %s : tensor<32x48xf8E4M3FN>, tensor<128x4xf8E8M0FNU>
}

// -----

/// quant.block: NVFP4 columnwise scales blocks of 16 along M; M=40 leaves a partial block.
func.func @quantize_nvfp4_columnwise_partial_block(%x: tensor<40x64xbf16>) -> (tensor<64x40xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.block: nvfp4 columnwise blocks of 16 need M=40 divisible by 16}}
  %d, %s, %g = "tp.quantize"(%x) {format = "nvfp4", axis = "columnwise"} : (tensor<40x64xbf16>) -> (tensor<64x40xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>)
  return %d, %s, %g : tensor<64x40xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xf32>
}

// -----

/// quant.scale: fp8_e4m3 has one f32 scale for the whole tensor, not one per row.
func.func @quantize_fp8_e4m3_rowwise_scale(%x: tensor<32x64xbf16>) -> (tensor<32x64xf8E4M3FN>, tensor<32xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.scale: fp8_e4m3 rowwise scales for [M,K]=[32,64] must be tensor<1xf32>; got tensor<32xf32>}}
  %d, %s = "tp.quantize"(%x) {format = "fp8_e4m3"} : (tensor<32x64xbf16>) -> (tensor<32x64xf8E4M3FN>, tensor<32xf32>)
  return %d, %s : tensor<32x64xf8E4M3FN>, tensor<32xf32>
}

// -----

/// quant.scale: the per-tensor scale stays f32 for columnwise data too; an f16 scale loses range.
func.func @quantize_fp8_e4m3_columnwise_scale(%x: tensor<32x64xbf16>) -> (tensor<64x32xf8E4M3FN>, tensor<1xf16>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.scale: fp8_e4m3 columnwise scales for [M,K]=[32,64] must be tensor<1xf32>; got tensor<1xf16>}}
  %d, %s = "tp.quantize"(%x) {format = "fp8_e4m3", axis = "columnwise"} : (tensor<32x64xbf16>) -> (tensor<64x32xf8E4M3FN>, tensor<1xf16>)
  return %d, %s : tensor<64x32xf8E4M3FN>, tensor<1xf16>
}

// -----

/// quant.scale: fp8_e5m2 has one f32 scale; a bf16 scale is rejected.
func.func @dequantize_fp8_e5m2_rowwise_scale(%d: tensor<32x64xf8E5M2>, %s: tensor<1xbf16>) -> tensor<32x64xbf16> {
  // expected-error@+1 {{'tp.dequantize' op violates rule quant.scale: fp8_e5m2 rowwise scales for [M,K]=[32,64] must be tensor<1xf32>; got tensor<1xbf16>}}
  %x = "tp.dequantize"(%d, %s) {format = "fp8_e5m2"} : (tensor<32x64xf8E5M2>, tensor<1xbf16>) -> tensor<32x64xbf16>
  return %x : tensor<32x64xbf16>
}

// -----

/// quant.scale: the fp8_e5m2 per-tensor scale is the rank-1 [1], not a [1,1] matrix.
func.func @dequantize_fp8_e5m2_columnwise_scale(%d: tensor<64x32xf8E5M2>, %s: tensor<1x1xf32>) -> tensor<32x64xbf16> {
  // expected-error@+1 {{'tp.dequantize' op violates rule quant.scale: fp8_e5m2 columnwise scales for [M,K]=[32,64] must be tensor<1xf32>; got tensor<1x1xf32>}}
  %x = "tp.dequantize"(%d, %s) {format = "fp8_e5m2", axis = "columnwise"} : (tensor<64x32xf8E5M2>, tensor<1x1xf32>) -> tensor<32x64xbf16>
  return %x : tensor<32x64xbf16>
}

// -----

/// quant.scale: MXFP8 rowwise scales are padded to [rup(M,128), rup(K/32,4)] = [128,4], not left at [100,2].
func.func @quantize_mxfp8_rowwise_unpadded_scale(%x: tensor<100x64xbf16>) -> (tensor<100x64xf8E4M3FN>, tensor<100x2xf8E8M0FNU>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.scale: mxfp8 rowwise scales for [M,K]=[100,64] must be tensor<128x4xf8E8M0FNU>; got tensor<100x2xf8E8M0FNU>}}
  %d, %s = "tp.quantize"(%x) {format = "mxfp8"} : (tensor<100x64xbf16>) -> (tensor<100x64xf8E4M3FN>, tensor<100x2xf8E8M0FNU>)
  return %d, %s : tensor<100x64xf8E4M3FN>, tensor<100x2xf8E8M0FNU>
}

// -----

/// quant.scale: MXFP8 columnwise scales are [rup(M/32,4), rup(K,128)] = [4,128], not left at [2,100].
func.func @quantize_mxfp8_columnwise_unpadded_scale(%x: tensor<64x100xbf16>) -> (tensor<64x100xf8E4M3FN>, tensor<2x100xf8E8M0FNU>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.scale: mxfp8 columnwise scales for [M,K]=[64,100] must be tensor<4x128xf8E8M0FNU>; got tensor<2x100xf8E8M0FNU>}}
  %d, %s = "tp.quantize"(%x) {format = "mxfp8", axis = "columnwise"} : (tensor<64x100xbf16>) -> (tensor<64x100xf8E4M3FN>, tensor<2x100xf8E8M0FNU>)
  return %d, %s : tensor<64x100xf8E4M3FN>, tensor<2x100xf8E8M0FNU>
}

// -----

/// quant.scale: NVFP4 block scales are f8E4M3FN; the power-of-two f8E8M0FNU scales are MXFP8's.
func.func @quantize_nvfp4_rowwise_e8m0_scale(%x: tensor<100x64xbf16>) -> (tensor<100x64xf4E2M1FN>, tensor<128x4xf8E8M0FNU>, tensor<1xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.scale: nvfp4 rowwise scales for [M,K]=[100,64] must be tensor<128x4xf8E4M3FN>; got tensor<128x4xf8E8M0FNU>}}
  %d, %s, %g = "tp.quantize"(%x) {format = "nvfp4"} : (tensor<100x64xbf16>) -> (tensor<100x64xf4E2M1FN>, tensor<128x4xf8E8M0FNU>, tensor<1xf32>)
  return %d, %s, %g : tensor<100x64xf4E2M1FN>, tensor<128x4xf8E8M0FNU>, tensor<1xf32>
}

// -----

/// quant.scale: NVFP4 columnwise scales are [rup(K,128), rup(ceil(M/16),4)] = [128,4] over the transposed data.
func.func @dequantize_nvfp4_columnwise_scale(%d: tensor<100x64xf4E2M1FN>, %s: tensor<64x8xf8E4M3FN>, %g: tensor<1xf32>) -> tensor<64x100xbf16> {
  // expected-error@+1 {{'tp.dequantize' op violates rule quant.scale: nvfp4 columnwise scales for [M,K]=[64,100] must be tensor<128x4xf8E4M3FN>; got tensor<64x8xf8E4M3FN>}}
  %x = "tp.dequantize"(%d, %s, %g) {format = "nvfp4", axis = "columnwise"} : (tensor<100x64xf4E2M1FN>, tensor<64x8xf8E4M3FN>, tensor<1xf32>) -> tensor<64x100xbf16>
  return %x : tensor<64x100xbf16>
}

// -----

/// quant.global-scale: NVFP4's E4M3 block scales are relative to a per-tensor f32 global scale.
func.func @quantize_nvfp4_missing_global_scale(%x: tensor<128x64xbf16>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.global-scale: nvfp4 needs a global_scale tensor<1xf32>}}
  %d, %s = "tp.quantize"(%x) {format = "nvfp4"} : (tensor<128x64xbf16>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>)
  return %d, %s : tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>
}

// -----

/// quant.global-scale: MXFP8's E8M0 scales are absolute; a global scale would be ignored.
func.func @dequantize_mxfp8_with_global_scale(%d: tensor<128x64xf8E4M3FN>, %s: tensor<128x4xf8E8M0FNU>, %g: tensor<1xf32>) -> tensor<128x64xbf16> {
  // expected-error@+1 {{'tp.dequantize' op violates rule quant.global-scale: only nvfp4 has a global_scale; mxfp8 does not}}
  %x = "tp.dequantize"(%d, %s, %g) {format = "mxfp8"} : (tensor<128x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>, tensor<1xf32>) -> tensor<128x64xbf16>
  return %x : tensor<128x64xbf16>
}

// -----

/// quant.global-scale: the global scale is one f32; bf16 cannot hold amax / (448 * 6) precisely.
func.func @quantize_nvfp4_bf16_global_scale(%x: tensor<128x64xbf16>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xbf16>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.global-scale: global_scale must be tensor<1xf32>; got tensor<1xbf16>}}
  %d, %s, %g = "tp.quantize"(%x) {format = "nvfp4"} : (tensor<128x64xbf16>) -> (tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xbf16>)
  return %d, %s, %g : tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<1xbf16>
}

// -----

/// amax.input: the amax is a maximum over float values; an integer tensor has none to scale.
func.func @amax_of_integers(%x: tensor<32x64xi32>) -> tensor<1xf32> {
  // expected-error@+1 {{'tp.amax' op violates rule amax.input: x must be a bf16, f16 or f32 tensor of rank >= 1; got tensor<32x64xi32>}}
  %a = "tp.amax"(%x) : (tensor<32x64xi32>) -> tensor<1xf32>
  return %a : tensor<1xf32>
}

// -----

/// amax.result: the amax is one f32 (tensor<1xf32>, the shape tp.quantize's amax operand takes).
func.func @amax_bf16_result(%x: tensor<32x64xbf16>) -> tensor<1xbf16> {
  // expected-error@+1 {{'tp.amax' op violates rule amax.result: the amax must be tensor<1xf32>; got tensor<1xbf16>}}
  %a = "tp.amax"(%x) : (tensor<32x64xbf16>) -> tensor<1xbf16>
  return %a : tensor<1xbf16>
}

// -----

/// quant.amax: the amax operand is the whole tensor's amax, one f32; a per-row amax is not one.
func.func @quantize_fp8_per_row_amax(%x: tensor<32x64xbf16>, %a: tensor<32xf32>) -> (tensor<32x64xf8E4M3FN>, tensor<1xf32>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.amax: the amax operand must be tensor<1xf32>; got tensor<32xf32>}}
  %d, %s = "tp.quantize"(%x, %a) {format = "fp8_e4m3"} : (tensor<32x64xbf16>, tensor<32xf32>) -> (tensor<32x64xf8E4M3FN>, tensor<1xf32>)
  return %d, %s : tensor<32x64xf8E4M3FN>, tensor<1xf32>
}

// -----

/// quant.amax-format: MXFP8 scales each 32-element block by its own amax; a tensor amax would be ignored.
func.func @quantize_mxfp8_with_amax(%x: tensor<32x64xbf16>, %a: tensor<1xf32>) -> (tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>) {
  // expected-error@+1 {{'tp.quantize' op violates rule quant.amax-format: mxfp8 scales every block by its own amax and takes no amax operand; only fp8_e4m3, fp8_e5m2 and nvfp4 do}}
  %d, %s = "tp.quantize"(%x, %a) {format = "mxfp8"} : (tensor<32x64xbf16>, tensor<1xf32>) -> (tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>)
  return %d, %s : tensor<32x64xf8E4M3FN>, tensor<128x4xf8E8M0FNU>
}
