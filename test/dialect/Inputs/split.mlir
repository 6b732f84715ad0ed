func.func @ok(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = "tp.add"(%x, %x) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
// -----
// The error below is on line 8 of this file.
func.func @bad(%x: tensor<2x4xf32>, %w: tensor<3x5xf32>) -> tensor<2x3xf32> {
  %y = "tp.linear"(%x, %w) : (tensor<2x4xf32>, tensor<3x5xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
