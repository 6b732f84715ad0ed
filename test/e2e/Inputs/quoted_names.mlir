// Names that need quotes in MLIR text: a mesh "the world" and a function "mlp step" (the passes
// generate references to both; e2e/quoted-names.test).
"tp.mesh"() {sym_name = "the world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
func.func @"mlp step"(%x: tensor<16x128xbf16> {tp.name = "x"}, %w1: tensor<512x128xbf16> {tp.name = "w1"},
                     %w2: tensor<128x256xbf16> {tp.name = "w2"}) -> (tensor<16x128xbf16> {tp.name = "y"}) {
  %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
  %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
  %y = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}
