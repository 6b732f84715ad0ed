// Async collectives overlapping compute, and reduce-scatter along dim 1, in a per-rank module on a
// 4-rank world. Every rank holds the same x and y, so reduce-scattering 2x along dim 1 over the 4
// ranks gives each rank its column slice of 8x exactly, and all-gathering the slices back along
// dim 1 gives 8x, which the adds ((x + x) + (x + x)) + ... also compute exactly: "gathered" and
// "expected" must have one hash; likewise for the f32 rank-3 y (reduce-scatter along dim 1 under
// leading dims, then an async all-gather): "gathered_y" = "expected_y".
//
// The compute between each start and its wait overlaps the collective on a device backend (the
// comm stream). %d is placed there on purpose: the memory plan must keep %x2, the start's input,
// live until the wait, or %d would take its bytes while the comm stream still reads them.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @step(%x: tensor<8x64xbf16> {tp.name = "x"}, %y: tensor<2x16x32xf32> {tp.name = "y"})
    -> (tensor<8x64xbf16> {tp.name = "gathered"}, tensor<8x64xbf16> {tp.name = "expected"},
        tensor<8x16xbf16> {tp.name = "slice"}, tensor<2x16x32xf32> {tp.name = "gathered_y"},
        tensor<2x16x32xf32> {tp.name = "expected_y"}) {
  %x2 = "tp.add"(%x, %x) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %f = "tp.reduce_scatter_start"(%x2) {mesh = @world, axes = ["tp"], dim = 1 : i64, order = "canonical"}
      : (tensor<8x64xbf16>) -> !tp.future<tensor<8x16xbf16>>
  %d = "tp.add"(%x, %x) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %q = "tp.add"(%d, %d) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %e = "tp.add"(%q, %q) : (tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %s = "tp.wait"(%f) : (!tp.future<tensor<8x16xbf16>>) -> tensor<8x16xbf16>
  %g = "tp.all_gather"(%s) {mesh = @world, axes = ["tp"], dim = 1 : i64} : (tensor<8x16xbf16>) -> tensor<8x64xbf16>
  %ry = "tp.reduce_scatter"(%y) {mesh = @world, axes = ["tp"], dim = 1 : i64, order = "canonical"}
      : (tensor<2x16x32xf32>) -> tensor<2x4x32xf32>
  %fy = "tp.all_gather_start"(%ry) {mesh = @world, axes = ["tp"], dim = 1 : i64}
      : (tensor<2x4x32xf32>) -> !tp.future<tensor<2x16x32xf32>>
  %y2 = "tp.add"(%y, %y) : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %y4 = "tp.add"(%y2, %y2) : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %gy = "tp.wait"(%fy) : (!tp.future<tensor<2x16x32xf32>>) -> tensor<2x16x32xf32>
  return %g, %e, %s, %gy, %y4 : tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x16xbf16>, tensor<2x16x32xf32>,
      tensor<2x16x32xf32>
}
