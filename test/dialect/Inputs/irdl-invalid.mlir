func.func @f(%x: tensor<16x512xbf16>) -> tensor<16x256xbf16> {
  %a = "tp.glu"(%x) {kind = "diagonal"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  return %a : tensor<16x256xbf16>
}
