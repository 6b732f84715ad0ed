func.func @grouped(%x: tensor<8x16xf32> {tp.name = "x"}, %w: tensor<2x4x16xf32> {tp.name = "w"},
                   %sizes: tensor<2xi64> {tp.name = "sizes"}) -> tensor<8x4xf32> {
  %y = "tp.grouped_linear"(%x, %w, %sizes) : (tensor<8x16xf32>, tensor<2x4x16xf32>, tensor<2xi64>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
